"""A half-failed read never replaces a fuller last good value with n/a (issue 11, Deliver 5).

* the engine: the real :class:`~seat_console.sources.engine.EngineSource` against a local HTTP
  server that serves vLLM 0.32.0's recorded ``/metrics`` and ``/v1/models``, where
  ``/v1/models`` (or ``/metrics``) stops answering in time: the panel keeps the model (or the
  metrics) from the last good read, marked STALE with its age and the endpoint's error — the
  model once the identity keep (15 s, issue 33) has run out and ``/v1/models`` is asked, its
  age that of the identity read;
* the timers: the real :class:`~seat_console.sources.timers.TimerSource` against the lab's
  systemd, through a transport that makes one of the three ``systemctl`` commands time out:
  the panel keeps each timer's service state (or next elapse) from the last good read;
* the merge rules themselves (:mod:`seat_console.core.partial`) on constructed readings.
"""

from __future__ import annotations

import contextlib
import functools
import re
import sys
import threading
from datetime import timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Self

import pytest

sys.path.insert(0, str(Path(__file__).parent))
import screen_fixtures
from app_fixtures import FakeClock, default_loaded
from screen_fixtures import engine as recorded_engine
from screen_fixtures import timers as recorded_timers

from seat_console.tui.app import SeatConsoleApp
from seat_console.node.runner import CommandResult
from seat_console.core.base import Unavailable, utcnow
from seat_console.sources import engine as E
from seat_console.sources.engine import EngineReading, EngineSource
from seat_console.core.partial import merge_last_good
from seat_console.sources.timers import ServiceState, TimerSource, TimersReading
from seat_console.widgets.services import EnginePanel, TimersPanel

DATA = Path(__file__).parent / "data" / "engine"
METRICS = (DATA / "vllm-0.32.0-cpu.metrics.txt").read_bytes()
MODELS = (DATA / "vllm-0.32.0-cpu.models.json").read_bytes()
SIZE = (100, 50)


def screen_text(app: SeatConsoleApp) -> str:
    """The screen as one line: box borders and runs of whitespace collapsed."""
    text = "\n".join(strip.text for strip in app.screen._compositor.render_strips())
    return re.sub(r"\s+", " ", re.sub(r"[│╭╮╰╯─┃┏┓┗┛━]", " ", text))


# 3000 steps of 10 ms: a 30 s liveness bound (the lab's systemd answers through docker exec)
wait_for = functools.partial(screen_fixtures.wait_for, limit=3000)
refresh = functools.partial(screen_fixtures.refresh, limit=3000)


def make_app(factory, panel, clock) -> SeatConsoleApp:
    return SeatConsoleApp(default_loaded(), interval=3600.0, panels=[(factory, panel)],
                          clock=clock, age_tick_s=3600.0, watch_terminal=False)


@contextlib.asynccontextmanager
async def first_reading(source, panel, clock, key: str):
    """The app with one panel showing ``source``, running, after its first reading:
    ``(app, pilot, state)`` with ``state`` the source's ``app.states[key]``."""
    app = make_app(lambda _l: source, panel, clock)
    async with app.run_test(size=SIZE) as pilot:
        st = app.states[key]
        await wait_for(pilot, lambda: st.polls == 1, "first reading")
        yield app, pilot, st


# -- the engine, over HTTP -----------------------------------------------------------------------
CLIENT_TIMEOUT_S = 5.0
"""The engine source's timeout here: generous, so the good reads answer in time on a loaded
machine (it was 0.5 s, and the first read itself timed out under load, issue #22); a path in
``slow`` never answers until the test ends, so its reads time out whatever the load."""


class FakeVllm(ThreadingHTTPServer):
    """Serves recorded vLLM answers; a path in ``slow`` does not answer until the server is
    closed (the client's timeout fires first). ``with FakeVllm() as srv:`` serves from a thread
    until the block ends."""

    daemon_threads = True

    def __init__(self) -> None:
        self.slow: set[str] = set()
        self.asked: list[str] = []
        self.released = threading.Event()
        super().__init__(("127.0.0.1", 0), _Handler)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"

    def __enter__(self) -> Self:
        threading.Thread(target=self.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc) -> None:
        self.released.set()
        self.shutdown()
        self.server_close()


class _Handler(BaseHTTPRequestHandler):
    server: FakeVllm

    def log_message(self, *args) -> None:
        pass

    def do_GET(self) -> None:  # http.server's name for the GET handler
        bodies = {"/health": b"", "/version": b'{"version": "0.32.0"}', "/v1/models": MODELS,
                  "/metrics": METRICS}
        body = bodies.get(self.path)
        self.server.asked.append(self.path)
        if body is None:
            self.send_error(404)
            return
        if self.path in self.server.slow:
            self.server.released.wait(120)   # no answer in time: the client gives up first
        try:
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
        except OSError:
            pass   # the client gave up (its timeout): that is the point


@pytest.fixture
def vllm():
    with FakeVllm() as srv:
        yield srv


def engine_source(vllm: FakeVllm, clock: FakeClock) -> EngineSource:
    """The real engine source, its keeps (the identity's 15 s) on the test's clock."""
    return EngineSource(vllm.url, timeout_s=CLIENT_TIMEOUT_S,
                        clock=lambda: clock().timestamp())


async def test_engine_models_timeout_keeps_the_last_model_marked_stale(vllm) -> None:
    clock = FakeClock(start=utcnow())
    src = engine_source(vllm, clock)
    async with first_reading(src, EnginePanel, clock, "engine") as (app, pilot, st):
        first = st.reading
        assert isinstance(first, EngineReading) and first.models and not first.kept
        model = first.models[0].id
        await wait_for(pilot, lambda: model in screen_text(app), "first reading drawn")
        assert first.identity_at is not None
        assert f"identity read {first.identity_at:%H:%M:%S}Z" in screen_text(app)
        vllm.slow = {"/v1/models"}
        # inside the identity keep (issue 33) /v1/models is not asked: the model stays, with
        # the time it was really read, and no STALE mark (nothing failed)
        vllm.asked.clear()
        clock.advance(E.IDENTITY_KEEP_S - 1)
        await refresh(pilot, app, "engine")
        assert "/v1/models" not in vllm.asked and "/health" in vllm.asked
        assert st.reading.kept == () and st.reading.identity_at == first.identity_at
        # past the keep it is asked, times out, and shows — within the keep, not later
        clock.advance(130 - (E.IDENTITY_KEEP_S - 1))
        await refresh(pilot, app, "engine")
        assert "/v1/models" in vllm.asked
        r = st.reading
        assert isinstance(r, EngineReading), r
        assert r.models == first.models, "the model list fell back to n/a"
        assert [k.field for k in r.kept] == ["models"]
        assert r.kept[0].since == first.identity_at
        assert r.identity_at == first.identity_at   # never shown as read now
        assert r.metrics is not None and r.metrics.families == first.metrics.families
        text = screen_text(app)
        assert model in text
        assert "STALE /v1/models: last read 2 min ago, kept from then" in text
        assert "no answer in time" in text
        assert st.panel.has_class("-partial") and st.consecutive_errors == 0
        # a second failed read in a row: the value is still from the first read (age grows)
        clock.advance(60)
        await refresh(pilot, app, "engine")
        assert st.reading.kept[0].since == first.identity_at
        assert "STALE /v1/models: last read 3 min ago" in screen_text(app)
        # /v1/models answers again: fresh, no STALE mark left
        vllm.slow = set()
        await refresh(pilot, app, "engine")
        assert st.reading.kept == () and st.reading.models == first.models
        assert "STALE" not in screen_text(app) and not st.panel.has_class("-partial")


async def test_engine_metrics_timeout_keeps_last_metrics_and_no_zero_rate(vllm) -> None:
    clock = FakeClock(start=utcnow())
    src = engine_source(vllm, clock)
    async with first_reading(src, EnginePanel, clock, "engine") as (app, pilot, st):
        first = st.reading
        vllm.slow = {"/metrics"}
        clock.advance(15)
        await refresh(pilot, app, "engine")
        r = st.reading
        assert r.metrics == first.metrics and [k.field for k in r.kept] == ["metrics"]
        text = screen_text(app)
        assert "metrics n/a" not in text and "STALE /metrics" in text
        assert "running" in text and "KV cache" in text
        # the kept scrape is not a new sample: no made-up 0 req/s from two equal scrapes
        assert len(st.panel.history._samples) == 1


async def test_the_engines_detail_view_opens_with_the_rates_the_panel_has(vllm) -> None:
    """The trial: Enter on the engine panel opened a view saying "req/s n/a", "TTFT n/a (one
    scrape, missing or reset)" for its next two reads, while the line behind it said 0.0: the
    view's panel started a rate history of its own. It now shares the panel's."""
    from seat_console.widgets.detail import DetailScreen

    clock = FakeClock(start=utcnow())
    src = engine_source(vllm, clock)
    async with first_reading(src, EnginePanel, clock, "engine") as (app, pilot, st):
        clock.advance(15)
        await refresh(pilot, app, "engine")
        assert st.panel.history.rates().req_per_s is not None   # two scrapes: a rate
        st.panel.focus()
        await pilot.pause()
        app.action_open_detail()
        await wait_for(pilot, lambda: isinstance(app.screen, DetailScreen), "the detail view")
        detail = app.screen.panel
        await wait_for(pilot, lambda: detail.reading is not None, "drawn")
        assert detail.history.rates() == st.panel.history.rates()
        text = screen_text(app)
        assert "req/s" in text and not re.search(r"req/s\s+n/a", text), text
        assert "one scrape, missing or reset" not in text, text


# -- the timers, on the lab's systemd -----------------------------------------------------------
class FlakyTransport:
    """The lab's real transport, except that a command each of whose words ``fail`` is part of
    an argument of times out (as the runner reports a timeout) instead of running."""

    def __init__(self, inner) -> None:
        self.inner = inner
        self.fail: tuple[str, ...] | None = None

    @property
    def where(self) -> str:
        return self.inner.where

    def run(self, argv, *, timeout_s: float = 30.0, **kw) -> CommandResult:
        if self.fail is not None and all(any(w in a for a in argv) for w in self.fail):
            return CommandResult(argv=tuple(argv), where=self.where, rc=None,
                                 started_at=utcnow(), duration_s=timeout_s, timed_out=True,
                                 ok=False, failure=f"timed out after {timeout_s:g} s")
        return self.inner.run(argv, timeout_s=timeout_s, **kw)

    def close(self) -> None:
        self.inner.close()


@pytest.mark.parametrize("fail, group, shown", [
    (("show", "ExecMainStartTimestamp"), "service", "service state"),
    (("list-timers",), "times", "next elapse / last trigger"),
])
async def test_lab_timers_half_failed_read_keeps_last_good_parts(lab, fail, group,
                                                                 shown) -> None:
    from seat_console.node.transport import DockerExecTransport

    flaky = FlakyTransport(DockerExecTransport(lab.node_container, docker_host=lab.docker_host))
    clock = FakeClock(start=utcnow())
    src = TimerSource(flaky, list(lab.timers))
    async with first_reading(src, TimersPanel, clock, "timers") as (app, pilot, st):
        first = st.reading
        assert isinstance(first, TimersReading) and first.notes == () and not first.kept, first
        assert all(t.errors == {} for t in first.timers)
        flaky.fail = fail
        # the source reuses a list-timers answer while nothing changed (issue 33): drop it so
        # this read runs the command that fails
        src._times.clear()
        clock.advance(45)
        await refresh(pilot, app, "timers")
        r = st.reading
        assert isinstance(r, TimersReading), r
        assert [k.field for k in r.kept] == [f"timers[{u}].{group}" for u in lab.timers]
        assert all(k.since == first.read_at for k in r.kept)
        for t, old in zip(r.timers, first.timers, strict=True):
            assert t.errors.keys() == {group}
            if group == "service":
                assert t.service == old.service and t.service.running is not None
            else:
                assert (t.next_elapse, t.last_trigger) == (old.next_elapse, old.last_trigger)
        assert r.notes == (), "a note saying n/a although every missed part was kept"
        text = screen_text(app)
        assert f"STALE {lab.timers[0]} {shown}: last read 40 s ago" in text
        assert "timed out after 10 s" in text
        if group == "service":
            assert "state n/a" not in text
        flaky.fail = None
        await refresh(pilot, app, "timers")
        assert st.reading.kept == () and "STALE" not in screen_text(app)


# -- the merge rules ----------------------------------------------------------------------------
def _timers_missing_services(read_at) -> TimersReading:
    good = recorded_timers()
    note = "services not read (timed out); whether they run now is n/a"
    return good.model_copy(update={"read_at": read_at, "notes": (note,), "timers": tuple(
        t.model_copy(update={"service": ServiceState(unit=t.service.unit),
                             "errors": {"service": "systemctl show (services): timed out"}})
        for t in good.timers)})


def test_merge_keeps_missed_parts_only_and_carries_their_age() -> None:
    last = recorded_timers()
    t1 = last.read_at + timedelta(seconds=10)
    half = _timers_missing_services(t1)
    merged = merge_last_good(half, last)
    assert [t.service for t in merged.timers] == [t.service for t in last.timers]
    assert merged.notes == () and merged.read_at == t1
    assert {k.since for k in merged.kept} == {last.read_at}
    # next elapse was read now: the new value stays even though it differs from the last one
    moved = half.model_copy(update={"timers": tuple(
        t.model_copy(update={"next_elapse": t.next_elapse + timedelta(hours=1)})
        for t in half.timers)})
    m2 = merge_last_good(moved, last)
    assert [t.next_elapse for t in m2.timers] == [t.next_elapse for t in moved.timers]
    # two failed reads in a row: the kept value's age is from the read that got it
    m3 = merge_last_good(_timers_missing_services(t1 + timedelta(seconds=10)), merged)
    assert {k.since for k in m3.kept} == {last.read_at}
    assert [t.service for t in m3.timers] == [t.service for t in last.timers]


def test_merge_leaves_na_when_last_good_lacked_it_too_or_is_another_node() -> None:
    last = _timers_missing_services(recorded_timers().read_at)   # never read the services
    half = _timers_missing_services(last.read_at + timedelta(seconds=10))
    merged = merge_last_good(half, last)
    assert merged.kept == () and all(t.service.running is None for t in merged.timers)
    assert merged.notes == half.notes   # still says n/a: nothing was kept
    other = recorded_timers().model_copy(update={"where": "ssh root@other-node"})
    assert merge_last_good(half, other).kept == ()


def test_merge_engine_by_endpoint_and_never_over_a_fresh_part() -> None:
    last = recorded_engine()
    half = last.model_copy(update={"read_at": last.read_at + timedelta(seconds=5),
                                   "models": None, "version": None,
                                   "problems": ("/v1/models: HTTP 500", "/version: HTTP 500")})
    merged = merge_last_good(half, last)
    assert merged.models == last.models and merged.version == last.version
    assert {k.field: k.reason for k in merged.kept} == {"models": "HTTP 500",
                                                        "version": "HTTP 500"}
    elsewhere = last.model_copy(update={"endpoint": "http://10.0.0.9:8000"})
    assert merge_last_good(half, elsewhere).models is None
    assert merge_last_good(last, half) is last or merge_last_good(last, half).kept == ()
    down = Unavailable(source="engine", kind="timeout", reason="no answer")
    assert merge_last_good(down, last) is down


# -- the GPU sampler, over the NVML double -------------------------------------------------------
async def test_gpu_process_list_failing_on_one_card_keeps_its_last_processes() -> None:
    import pynvml

    from app_fixtures import demo_app

    clock = FakeClock()
    app, src = demo_app(clock=clock, history=False)
    async with app.run_test(size=(100, 60)) as pilot:
        st = app.states["gpus"]
        await wait_for(pilot, lambda: "python3" in screen_text(app), "first sample drawn")
        first = st.reading
        c0 = first.cards[0]
        assert c0.processes and not first.kept
        for fn in ("nvmlDeviceGetComputeRunningProcesses_v3",
                   "nvmlDeviceGetComputeRunningProcesses_v2",
                   "nvmlDeviceGetComputeRunningProcesses"):
            src.double.cards[0].errors[fn] = pynvml.NVML_ERROR_UNKNOWN
        src.double.cards[0].used += 1 << 30   # memory is still read: the new value shows
        clock.advance(75)
        await refresh(pilot, app, "gpus")
        r = st.reading
        k0 = r.cards[0]
        assert k0.processes == c0.processes and "processes" not in k0.errors
        assert k0.memory.used_bytes == c0.memory.used_bytes + (1 << 30)
        assert [k.field for k in r.kept] == [f"cards[{c0.uuid}].processes"]
        assert r.kept[0].since == first.sampled_at
        assert r.cards[1] == first.cards[1]
        text = screen_text(app)
        assert "python3" in text and "seat-resident" in text
        assert "STALE GPU 0 processes: last read 1 min ago, kept from then" in text
