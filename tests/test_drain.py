"""Drain before stop, the seat's downtime, the engine's own hold state (issue 32).

The drain runs against a real HTTP server on 127.0.0.1 that answers as vLLM 0.32's API server
does with ``VLLM_SERVER_DEV_MODE=1`` (``/pause?mode=wait`` returns once the running requests
finished, ``/resume``, ``/is_paused``, ``/metrics``; ``entrypoints/rl/online/api_router.py``),
or without it (404). The lab test (tests/test_drain_lab.py) runs the real engine. Every new
reading of the engine's state and of our own facts has a property test here.
"""

from __future__ import annotations

import json
import math
import threading
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from seat_console.actions import drain as D
from seat_console.actions.journal import Journal
from seat_console.actions.runbook import StepError
from seat_console.core.untrusted import InputError
from seat_console.sources import engine as E


# -- an engine that pauses ---------------------------------------------------------------------
class Engine(ThreadingHTTPServer):
    """``running`` / ``waiting`` requests (exposed on ``/metrics``); ``offers_pause``: the
    dev-mode routes exist; ``pause_status``: what ``POST /pause`` answers; ``finish``: set when
    the running requests finish (``/pause?mode=wait`` returns then)."""

    daemon_threads = True

    def __init__(self, *, offers_pause: bool = True, running: int = 3, waiting: int = 0,
                 pause_status: int = 200, version: str | None = None) -> None:
        self.offers_pause = offers_pause
        self.version = version
        self.running = running
        self.waiting = waiting
        self.pause_status = pause_status
        self.paused = False
        self.calls: list[str] = []
        self.finish = threading.Event()
        self.gone = threading.Event()
        super().__init__(("127.0.0.1", 0), _Handler)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"

    def __enter__(self) -> Engine:
        threading.Thread(target=self.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.gone.set()
        self.finish.set()
        self.shutdown()
        self.server_close()


class _Handler(BaseHTTPRequestHandler):
    server: Engine

    def log_message(self, *args: object) -> None:
        pass

    def _send(self, code: int, body: bytes) -> None:
        try:
            self.send_response(code)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
        except OSError:
            pass

    def do_GET(self) -> None:  # http.server's name for the GET handler
        srv = self.server
        srv.calls.append(f"GET {self.path}")
        if self.path == "/health":
            self._send(200, b"")
        elif self.path == "/metrics":
            text = ("# TYPE vllm:num_requests_running gauge\n"
                    f"vllm:num_requests_running{{engine=\"0\"}} {srv.running}\n"
                    "# TYPE vllm:num_requests_waiting gauge\n"
                    f"vllm:num_requests_waiting{{engine=\"0\"}} {srv.waiting}\n")
            self._send(200, text.encode())
        elif self.path == "/version" and srv.version is not None:
            self._send(200, json.dumps({"version": srv.version}).encode())
        elif self.path == "/is_paused" and srv.offers_pause:
            self._send(200, json.dumps({"is_paused": srv.paused}).encode())
        else:
            self._send(404, b'{"detail": "Not Found"}')

    def do_POST(self) -> None:  # http.server's name for the POST handler
        srv = self.server
        srv.calls.append(f"POST {self.path}")
        if not srv.offers_pause:
            self._send(404, b"")
        elif self.path.startswith("/pause"):
            if srv.pause_status != 200:
                self._send(srv.pause_status, b'{"error": "boom"}')
                return
            srv.paused = True
            srv.finish.wait(60)          # mode=wait: returns once the running requests finished
            if not srv.gone.is_set():
                srv.running = 0
                self._send(200, b'{"status": "paused"}')
        elif self.path == "/resume":
            srv.paused = False
            self._send(200, b'{"status": "resumed"}')
        else:
            self._send(404, b"")


class Container:
    """What the drain reads of a docker container: ``name`` and ``attrs``."""

    def __init__(self, argv: list[Any] | None = None, stop_timeout: int | None = None) -> None:
        self.name = "seat-resident"
        self.attrs = {"Config": {"Cmd": argv or [], "StopTimeout": stop_timeout}}


class Stopper:
    def __init__(self, fail: bool = False) -> None:
        self.fail = fail
        self.timeouts: list[int] = []

    def __call__(self, t: int) -> str:
        self.timeouts.append(t)
        if self.fail:
            raise StepError("stop seat-resident: still running")
        return f"stopped seat-resident (t={t} s)"


def test_pause_drains_then_stops_and_counts_nothing_cut() -> None:
    with Engine(running=3, waiting=0) as eng:
        plan = D.drain_plan(Container(), eng.url, bound_s=30)
        assert plan.pause is True and plan.in_flight == 3
        assert "3 running + 0 waiting" in plan.words() and "/pause?mode=wait" in plan.words()
        threading.Timer(0.2, eng.finish.set).start()    # the 3 requests finish
        stop = Stopper()
        words, rec = D.drain_and_stop(Container(), plan, stop)
    assert rec["mode"] == "pause" and rec["reached_zero"] is True and rec["cut"] == 0
    assert "0 requests cut" in words
    assert stop.timeouts == [plan.stop_timeout_s]
    assert D.parse_iso(rec["down_at"]) is not None
    assert eng.calls.index("POST /pause?mode=wait") < len(eng.calls)


def test_drain_that_cannot_finish_stops_at_the_bound_with_the_cut_counted() -> None:
    with Engine(running=2, waiting=1) as eng:           # the requests never finish
        plan = D.drain_plan(Container(), eng.url, bound_s=0.5)
        stop = Stopper()
        words, rec = D.drain_and_stop(Container(), plan, stop)
        assert eng.paused
    assert rec["reached_zero"] is False and rec["cut"] == 3
    assert "3 request(s) cut at the bound" in words
    assert stop.timeouts, "the stop happens at the bound"


def test_the_queue_reaches_a_slot_before_the_pause() -> None:
    # a paused vLLM never schedules a queued request (PAUSED_NEW): the drain lets the requests
    # waiting at its start reach a slot first, then pauses
    with Engine(running=1, waiting=2) as eng:
        plan = D.drain_plan(Container(), eng.url, bound_s=30)
        seen: list[int] = []

        def slot() -> None:
            seen.append(len(eng.calls))
            eng.waiting = 0
            eng.running = 3
        threading.Timer(0.5, slot).start()
        threading.Timer(0.8, eng.finish.set).start()
        words, rec = D.drain_and_stop(Container(), plan, Stopper())
    assert rec["queue_empty"] is True and rec["cut"] == 0
    assert eng.calls.index("POST /pause?mode=wait") > seen[0]
    assert rec["left_running"] == 0 and rec["queued_while_paused"] == 0


@pytest.mark.parametrize(("empties_at", "want"), [
    (0.15, False),   # emptied after the wait's deadline (0.1 s): not counted, and not waited for
    (0.05, True),    # emptied within it: seen at the read on the deadline
    (0.0, True)])
def test_the_wait_for_the_queue_reads_no_later_than_its_deadline(
        monkeypatch: pytest.MonkeyPatch, empties_at: float, want: bool) -> None:
    # a fake clock: a read takes 10 ms, a sleep exactly what it asks; the queue (3 waiting)
    # empties at t0 + empties_at. The lab's drain test (0.2 s bound: the wait's share 0.1 s,
    # polled every 0.2 s) slept past its deadline and counted a queue that emptied at 0.2 s
    import time
    t0 = 1000.0
    now = [t0]
    reads: list[float] = []

    def read_queue(endpoint: str, timeout_s: float = 3.0) -> tuple[float, float, None]:
        reads.append(now[0])
        waiting = 0.0 if now[0] >= t0 + empties_at else 3.0
        now[0] += 0.01
        return 16.0, waiting, None

    def sleep(s: float) -> None:
        now[0] += s

    monkeypatch.setattr(D, "read_queue", read_queue)
    monkeypatch.setattr(time, "monotonic", lambda: now[0])
    monkeypatch.setattr(time, "sleep", sleep)
    until = t0 + 0.1
    assert D._wait_queue_empty("http://engine", until, poll_s=0.2) is want
    assert max(reads) <= until, reads
    if not want:
        assert reads[-1] == pytest.approx(until), reads   # the last read is on the deadline


def test_a_drain_bound_of_0_is_the_plain_stop() -> None:
    with Engine(running=2) as eng:
        plan = D.drain_plan(Container(), eng.url, bound_s=0)
        assert "drain off" in plan.words()
        stop = Stopper()
        words, rec = D.drain_and_stop(Container(), plan, stop)
    assert rec["mode"] == "off" and not any(c.startswith("POST") for c in eng.calls)
    assert stop.timeouts == [plan.stop_timeout_s] and "drain off" in words
    assert D.parse_iso(rec["down_at"]) is not None and D.summary(rec) == "drain off: no drain"


@pytest.mark.parametrize(("version", "want"), [
    ("0.32.0", "queued"), ("0.10.1.1", "queued"), ("0.33.0", "refused"), ("0.34.0", "refused"),
    ("0.33.1.dev4+gabc", "refused"), ("v0.32.0", "queued"), ("1.0.0", "refused"),
    ("0.3", "queued"), ("dev", None), ("", None), ("x0.32", None), (None, None), (33, None)])
def test_what_the_engine_version_does_to_newcomers_while_paused(version: Any, want: Any) -> None:
    assert D.newcomers_while_paused(version) == want


@given(st.one_of(st.text(max_size=300), st.integers(), st.none(), st.floats(),
                 st.binary(max_size=20)))
def test_newcomers_while_paused_never_raises(v: Any) -> None:
    assert D.newcomers_while_paused(v) in ("queued", "refused", None)


@pytest.mark.parametrize(("version", "words"), [
    ("0.32.0", "accepts and queues requests that arrive while paused"),
    ("0.34.0", "refuses requests that arrive while paused with a retryable 503")])
def test_the_plan_says_what_happens_to_requests_arriving_while_paused(version: str,
                                                                       words: str) -> None:
    with Engine(running=1, version=version) as eng:
        plan = D.drain_plan(Container(), eng.url, bound_s=30)
    assert plan.newcomers in ("queued", "refused") and words in plan.words()


@pytest.mark.parametrize(("bound", "want"), [(0, 10), (30, 15)])
def test_the_drain_off_stops_with_the_containers_own_timeout(bound: float, want: int) -> None:
    # drain off: the stop as before the drain (the caller's 10 s); on: >= --shutdown-timeout +
    # the margin (15 s). The stop is SIGTERM, bounded by that stop timeout
    # (tests/test_stop_released.py: how it ends)
    from types import SimpleNamespace

    from seat_console.actions import swap as swap_mod

    class C(Container):
        def __init__(self) -> None:
            super().__init__()
            self.attrs["State"] = {"Running": True, "ExitCode": 0}
            self.signals: list[str] = []

        def reload(self) -> None:
            pass

        def kill(self, signal: str) -> None:      # exits by itself at SIGTERM
            self.signals.append(signal)
            self.attrs["State"] = {"Running": False, "ExitCode": 0}

    nctx = SimpleNamespace(profile=SimpleNamespace(seat=SimpleNamespace(drain_timeout_s=bound)),
                           expect=lambda *a: None)
    c = C()
    with Engine(running=0, offers_pause=False) as eng:
        rec: dict[str, Any] = {}
        swap_mod.stop_container(None, c, 10, nctx, endpoint=eng.url,  # type: ignore[arg-type]
                                record=rec)
    assert rec["stop_timeout_s"] == rec["stop"]["stop_timeout_s"] == want
    assert c.signals == ["SIGTERM"] and rec["stop"]["way"] == "exited"
    assert rec["mode"] == ("off" if bound == 0 else "sigterm")


def test_a_failed_pause_resumes_and_does_not_stop() -> None:
    with Engine(pause_status=500) as eng:
        plan = D.drain_plan(Container(), eng.url, bound_s=5)
        stop = Stopper()
        with pytest.raises(StepError, match="resumed.*not stopped"):
            D.drain_and_stop(Container(), plan, stop)
        assert "POST /resume" in eng.calls
    assert stop.timeouts == []


def test_a_failed_stop_after_the_pause_resumes() -> None:
    with Engine() as eng:
        eng.finish.set()
        plan = D.drain_plan(Container(), eng.url, bound_s=5)
        with pytest.raises(StepError, match=r"still running; the engine was resumed"):
            D.drain_and_stop(Container(), plan, Stopper(fail=True))
        assert "POST /resume" in eng.calls and not eng.paused


def test_without_pause_sigterm_waits_the_shutdown_timeout_plus_margin() -> None:
    with Engine(offers_pause=False, running=4, waiting=1) as eng:
        plan = D.drain_plan(Container(["--model", "m", "--shutdown-timeout", "45"], 10),
                            eng.url, bound_s=60)
        assert plan.pause is False and plan.stop_timeout_s == 45 + D.STOP_MARGIN_S
        assert "SIGTERM with stop timeout 60 s" in plan.words()
        stop = Stopper()
        words, rec = D.drain_and_stop(Container(), plan, stop)
    assert stop.timeouts == [60] and rec["mode"] == "sigterm" and rec["cut"] is None
    assert "drains within --shutdown-timeout 45 s" in words


def test_without_pause_and_shutdown_timeout_0_the_plan_says_what_is_aborted() -> None:
    with Engine(offers_pause=False, running=4, waiting=1) as eng:
        plan = D.drain_plan(Container(["--model", "m"]), eng.url, bound_s=60)
        assert "aborts 5 request(s)" in plan.words()
        words, rec = D.drain_and_stop(Container(), plan, Stopper())
    assert rec["cut"] == 5 and "aborted about 5" in words


def test_engine_not_answering_is_unknown_not_zero() -> None:
    plan = D.drain_plan(Container(), "http://127.0.0.1:9", bound_s=5)
    assert plan.in_flight is None and plan.pause is None
    assert "requests now: unknown" in plan.words()
    _, rec = D.drain_and_stop(Container(), plan, Stopper())
    assert rec["mode"] == "none" and rec["cut"] is None


# -- downtime -----------------------------------------------------------------------------------
def _journal_run(j: Journal, run_id: str, runbook: str, facts: dict[str, Any]) -> None:
    j.append(run_id=run_id, runbook=runbook, kind="begin", facts={})
    j.append(run_id=run_id, runbook=runbook, kind="end", outcome="done", facts=facts)


def test_downtime_measured_from_the_drain_to_the_first_completion(tmp_path: Path) -> None:
    t0 = datetime(2026, 12, 5, 4, 0, tzinfo=UTC)
    facts: dict[str, Any] = {"drain": {"down_at": D.iso(t0)}}
    words = D.mark_up(facts, started_at=t0 + timedelta(seconds=2.6), image_id="sha256:a",
                      now=t0 + timedelta(seconds=31.4))
    assert words == "seat down 31.4 s"
    assert facts["downtime"]["seconds"] == 31.4 and facts["downtime"]["start_s"] == 28.8
    with Journal(path=tmp_path / "j.sqlite3") as j:
        assert D.forecast(j, "sha256:a", 60).startswith("seat downtime: no start")
        _journal_run(j, "r1", "swap", facts)
        _journal_run(j, "r2", "hold", {"downtime": {"seconds": 1}})   # not a seat change
        assert D.last_downtime(j)["seconds"] == 31.4
        assert D.last_downtime(j)["run_id"] == "r1"
        assert "≈ 29 s (last start of this image 28.8 s" in D.forecast(j, "sha256:a", 60)
        assert D.forecast(j, "sha256:b", 60).startswith("seat downtime: no start")


def test_no_drain_no_downtime() -> None:
    facts: dict[str, Any] = {}
    assert D.mark_up(facts) == "" and "downtime" not in facts


_JSONISH = st.recursive(st.none() | st.booleans() | st.integers() | st.floats() | st.text(),
                        lambda c: st.lists(c, max_size=3) | st.dictionaries(st.text(), c,
                                                                             max_size=3),
                        max_leaves=8)


@given(_JSONISH)
def test_downtimes_read_any_facts_without_raising_and_never_invent_a_figure(v: Any) -> None:
    import tempfile

    with tempfile.TemporaryDirectory() as d, Journal(path=Path(d) / "j.sqlite3") as j:
        _journal_run(j, "r", "restore", {"downtime": v})
        ds = D.downtimes(j)
    secs = v.get("seconds") if isinstance(v, dict) else None
    if ds:
        assert ds[0]["seconds"] == secs and math.isfinite(ds[0]["seconds"])
        assert ds[0]["seconds"] >= 0
    else:
        assert not (isinstance(secs, int | float) and not isinstance(secs, bool)
                    and math.isfinite(secs) and secs >= 0)


@given(st.one_of(st.none(), st.text(max_size=80), st.integers(), st.floats()))
def test_parse_iso_only_aware_times(v: Any) -> None:
    t = D.parse_iso(v)
    assert t is None or t.tzinfo is not None


# -- the engine's argv and state readings -----------------------------------------------------
@pytest.mark.parametrize("argv, want", [
    ([], 0), (["--model", "m"], 0), (["--shutdown-timeout", "30"], 30),
    (["--shutdown-timeout=7"], 7), (["--shutdown-timeout", "5", "--shutdown-timeout=9"], 9),
    (["--shutdown-timeout"], None), (["--shutdown-timeout", "-1"], None),
    (["--shutdown-timeout", "1e3"], None)])
def test_shutdown_timeout_of(argv: list[str], want: int | None) -> None:
    assert D.shutdown_timeout_of(argv) == want


@given(st.lists(st.one_of(st.text(max_size=20), st.sampled_from(
    ["--shutdown-timeout", "--shutdown-timeout=", "--shutdown-timeout=12", "30"]),
    st.integers(), st.none()), max_size=8))
def test_shutdown_timeout_of_never_raises(argv: list[Any]) -> None:
    got = D.shutdown_timeout_of(argv)
    assert got is None or (isinstance(got, int) and got >= 0)
    assert D.stop_timeout_for(None, got) >= D.STOP_MARGIN_S


@given(st.one_of(st.binary(max_size=60), st.text(max_size=60),
                 st.dictionaries(st.text(max_size=12), _JSONISH, max_size=3).map(json.dumps)))
def test_parse_flag_only_input_errors_naming_the_path(body: Any) -> None:
    try:
        v = E.parse_flag(body, "/is_paused", "is_paused")
    except InputError as exc:
        assert "/is_paused" in str(exc)
    else:
        assert isinstance(v, bool)
        assert json.loads(body)["is_paused"] is v


def test_parse_flag_reads_the_engines_answers() -> None:
    assert E.parse_flag(b'{"is_paused": true}', "/is_paused", "is_paused") is True
    assert E.parse_flag('{"is_sleeping": false}', "/is_sleeping", "is_sleeping") is False
    for bad in (b'{"is_paused": 1}', b'{"is_paused": "true"}', b"[]", b"nope"):
        with pytest.raises(InputError, match="/is_paused"):
            E.parse_flag(bad, "/is_paused", "is_paused")


def _sleep_text(awake: list[str]) -> str:
    lines = ["# TYPE vllm:engine_sleep_state gauge"]
    for i, v in enumerate(awake):
        lines += [f'vllm:engine_sleep_state{{engine="{i}",sleep_state="awake"}} {v}',
                  f'vllm:engine_sleep_state{{engine="{i}",sleep_state="weights_offloaded"}} 0']
    return "\n".join(lines) + "\n"


def test_sleep_gauge_read() -> None:
    assert E.parse_metrics(_sleep_text(["1", "1"])).sleep_awake == 1.0
    assert E.parse_metrics(_sleep_text(["1", "0"])).sleep_awake == 0.0
    assert E.parse_metrics(_sleep_text([])).sleep_awake is None
    assert E.parse_metrics("").sleep_awake is None


@given(st.lists(st.sampled_from(["0", "1", "NaN", "+Inf", "-Inf", "0.5", "-1", "2", "1e308"]),
                max_size=4))
def test_sleep_gauge_unknown_is_never_awake(vals: list[str]) -> None:
    got = E.parse_metrics(_sleep_text(vals)).sleep_awake
    if not vals or any(v not in ("0", "1") for v in vals):
        assert got is None
    else:
        assert got == (0.0 if "0" in vals else 1.0)


@pytest.mark.parametrize("healthy, paused, sleeping, awake, want", [
    (True, None, None, None, "UP"), (True, False, False, 1.0, "UP"),
    (True, True, None, None, "PAUSED"), (True, None, True, None, "ASLEEP"),
    (True, True, False, 0.0, "ASLEEP"), (False, None, None, None, None),
    (False, True, None, None, "PAUSED")])
def test_hold_state(healthy: bool, paused: bool | None, sleeping: bool | None,
                    awake: float | None, want: str | None) -> None:
    assert E.hold_state(healthy, paused, sleeping, awake) == want


def test_engine_reading_reads_is_paused_where_offered() -> None:
    with Engine() as eng:
        eng.paused = True
        r = E.EngineReader(eng.url).read()
    assert isinstance(r, E.EngineReading)
    assert r.paused is True and r.sleeping is None and r.hold_state == "PAUSED"
    assert not any("/is_sleeping" in p for p in r.problems), "404 = not offered, no problem"


# -- the exporter ------------------------------------------------------------------------------
def _families(states: dict[str, Any]) -> dict[tuple[str, tuple], float]:
    from seat_console.exporter.model import Identity, build_families
    from seat_console.snapshot.poll import SourceView

    ident = Identity("n1", "resident-a", "http://127.0.0.1:8000", 2, ("a.timer",), "0.1.0")
    out = {}
    for f in build_families(ident, {k: SourceView(k, True, v, 1000.0)
                                    for k, v in states.items()}):
        for smp in f.samples:
            out[(smp.name, tuple(sorted(smp.labels.items())))] = smp.value
    return out


def test_exporter_engine_hold_state_absent_when_not_offered() -> None:
    from seat_console.exporter.model import EngineCheck

    s = _families({"engine": EngineCheck(True, 200)})
    assert s[("seat_engine_up", ())] == 1
    assert ("seat_engine_paused", ()) not in s and ("seat_engine_asleep", ()) not in s
    s = _families({"engine": EngineCheck(True, 200, paused=True, asleep=False)})
    assert s[("seat_engine_paused", ())] == 1 and s[("seat_engine_asleep", ())] == 0


def test_exporter_downtime_of_the_last_run_and_the_counters() -> None:
    from seat_console.exporter.model import JournalValue

    assert ("seat_downtime_seconds", ()) not in _families({"journal": JournalValue()})
    s = _families({"journal": JournalValue(downtime_s=31.4, downtime_runs=2,
                                           downtime_sum_s=60.0)})
    assert s[("seat_downtime_seconds", ())] == 31.4
    assert s[("seat_downtime_runs_total", ())] == 2
    assert s[("seat_down_seconds_total", ())] == 60.0


def test_exporter_reads_the_engines_pause_and_the_journals_downtime(tmp_path: Path) -> None:
    from seat_console.core.profile import load_profile
    from seat_console.exporter.readers import ReadOnlyJournal, make_engine, seat_downtimes

    with Engine() as eng:
        eng.paused = True
        f = tmp_path / "p.toml"
        f.write_text(f'[resident]\nname = "r"\n[timers]\nconformance = ["a.timer"]\n'
                     f'[[silence.matchers]]\nname = "instance"\nvalue = "x"\n'
                     f'[seat]\nendpoint = "{eng.url}"\n')
        read, close = make_engine(load_profile(str(f)))
        try:
            got = read()
        finally:
            close()
    assert got.healthy and got.paused is True and got.asleep is None
    t0 = datetime(2026, 12, 5, 4, 0, tzinfo=UTC)
    with Journal(path=tmp_path / "j.sqlite3") as j:
        _journal_run(j, "a", "swap", {"downtime": {"seconds": 20.0, "up_at": D.iso(t0)}})
        _journal_run(j, "b", "restore", {"downtime": {"seconds": 31.4,
                                                      "up_at": D.iso(t0 + timedelta(1))}})
    assert seat_downtimes(ReadOnlyJournal(tmp_path / "j.sqlite3")) == (31.4, 2, 51.4)


# -- every front says PAUSED / ASLEEP -----------------------------------------------------------
def _paused_reading(state: str = "PAUSED") -> E.EngineReading:
    return E.EngineReading(endpoint="http://127.0.0.1:18000", read_at=datetime.now(UTC),
                           healthy=True, health_status=200, version="0.32.0", models=(),
                           metrics=None, paused=state == "PAUSED",
                           sleeping=state == "ASLEEP", hold_state=state)


@pytest.mark.parametrize("state", ["PAUSED", "ASLEEP"])
def test_status_line_and_text_say_the_hold_state(state: str) -> None:
    from seat_console.commands.status_cmd import render_engine
    from seat_console.snapshot.verdicts import engine_fact

    f = engine_fact(_paused_reading(state))
    assert (f.words, f.level) == (state, "warn")
    assert engine_fact(_paused_reading("UP")).words == "UP"
    assert f": {state} (healthy" in render_engine(_paused_reading(state))


def test_status_json_carries_the_hold_state_and_reads_back() -> None:
    r = _paused_reading()
    doc = json.loads(r.model_dump_json())
    assert doc["hold_state"] == "PAUSED" and doc["paused"] is True
    assert E.EngineReading.model_validate_json(r.model_dump_json()).hold_state == "PAUSED"


async def test_engine_panel_says_paused_not_up() -> None:
    from test_service_panels import _show

    from seat_console.widgets.services import EnginePanel

    text = await _show(EnginePanel(), _paused_reading())
    assert "PAUSED healthy, admits nothing new" in text


# -- the runbook front ---------------------------------------------------------------------------
def test_runbook_shows_the_last_downtime(tmp_path: Path, monkeypatch, capsys) -> None:
    from seat_console import cli

    monkeypatch.setenv("SEAT_CONSOLE_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.setenv("SEAT_CONSOLE_DATA_DIR", str(tmp_path / "data"))
    (tmp_path / "state").mkdir()
    with Journal(path=tmp_path / "state" / "journal.sqlite3") as j:
        cli.main(["runbook"])
        assert "seat downtime: none measured yet" in capsys.readouterr().out
        _journal_run(j, "r9", "restore", {"downtime": {"seconds": 31.4,
                                                       "up_at": "2026-12-05T04:00:00.000Z"}})
        cli.main(["runbook"])
        out = capsys.readouterr().out.splitlines()
        assert any(line.startswith("seat down 31.4 s in the last runbook run that stopped it "
                                   "(restore r9") for line in out)
        assert out[-1].startswith("next:")
        cli.main(["runbook", "--json"])
        assert json.loads(capsys.readouterr().out)["seat_downtime"]["seconds"] == 31.4


def test_status_carries_the_last_downtime(tmp_path: Path, monkeypatch) -> None:
    from seat_console.commands import status_cmd
    from seat_console.core.profile import load_profile
    from seat_console.node import transport

    monkeypatch.setenv("SEAT_CONSOLE_STATE_DIR", str(tmp_path / "state"))
    (tmp_path / "state").mkdir()

    def no_node(_loaded: Any) -> Any:
        raise transport.TransportError("no node in this test")
    monkeypatch.setattr(transport, "make_transport", no_node)
    loaded = load_profile(None, environ={})
    now = datetime(2026, 12, 5, 5, 0, tzinfo=UTC)
    with Journal(path=tmp_path / "state" / "journal.sqlite3") as j:
        sec = status_cmd.read_hold_section(loaded, None, now)
        assert sec["seat_downtime"] is None
        assert "seat downtime: none measured yet" in status_cmd.render_hold(sec)
        _journal_run(j, "r7", "swap", {"downtime": {"seconds": 12.5,
                                                    "up_at": "2026-12-05T04:00:00.000Z"}})
    sec = status_cmd.read_hold_section(loaded, None, now)
    assert sec["seat_downtime"]["seconds"] == 12.5 and sec["seat_downtime"]["run_id"] == "r7"
    assert "seat down 12.5 s in the last runbook run that stopped it (swap r7" in \
        status_cmd.render_hold(sec)


def test_the_runbook_state_and_screen_show_the_last_downtime(tmp_path: Path) -> None:
    from seat_console.actions.stages import read_runbook
    from seat_console.widgets.runbook_screen import header_text
    from tests.runbook_history import History

    with Journal(path=tmp_path / "journal.sqlite3") as j:
        h = History(j, tmp_path)
        s = read_runbook(None, j, runs_dir=tmp_path / "runs", now=h.t)
        assert s.seat_downtime.startswith("seat downtime: none measured yet")
        h.run("restore", facts={"downtime": {"seconds": 27.25,
                                             "up_at": "2026-12-05T04:00:00.000Z"}},
              run_id="r5")
        h.run("promote-undo", facts={"downtime": {"seconds": 9.5,
                                                  "up_at": "2026-12-05T05:00:00.000Z"}},
              run_id="r6")
        s = read_runbook(None, j, runs_dir=tmp_path / "runs", now=h.t)
    assert s.seat_downtime.startswith("seat down 9.5 s in the last runbook run that stopped "
                                      "it (promote-undo r6")
    assert "seat down 9.5 s" in header_text(s, None).plain


def test_the_report_says_each_legs_seat_downtime(tmp_path: Path) -> None:
    from seat_console.actions.compare import leg_downtimes
    from seat_console.evidence import report as rp
    from tests.test_evidence_report import _bracket

    facts = {"leg1_downtime_s": 31.4, "leg2_downtime_s": None, "leg1_began": "x", "drain": {}}
    assert leg_downtimes(facts) == {"leg1": 31.4, "leg2": None}
    cmp_dir = _bracket(tmp_path, speed_b=1.0, b_ids=[1, 2, 9])
    md = rp.render_markdown(rp.build_report(rp.load_inputs([str(cmp_dir)])))
    assert "Seat down per leg: not recorded in this bracket's compare.json." in md
    doc = json.loads((cmp_dir / "compare.json").read_text())
    doc["downtimes"] = {"leg1": 31.4, "leg2": None, "leg3": 12.0, "leg4": -1.0}
    (cmp_dir / "compare.json").write_text(json.dumps(doc))
    rep = rp.build_report(rp.load_inputs([str(cmp_dir)]))
    assert rep["comparison"]["downtimes"]["leg1"] == 31.4
    assert ("Seat down per leg (drain to the first completion on the next engine): leg 1 "
            "31.4 s, leg 2 unknown, leg 3 12.0 s, leg 4 unknown.") in rp.render_markdown(rep)


@given(st.one_of(st.none(), st.integers(), st.text(max_size=5),
                 st.dictionaries(st.text(max_size=8), st.one_of(
                     st.none(), st.booleans(), st.floats(), st.integers(), st.text(max_size=4)),
                     max_size=8)))
def test_downtimes_markdown_never_raises_and_unknown_is_never_0(d: Any) -> None:
    from seat_console.evidence.report import downtimes_markdown

    text = downtimes_markdown(d)
    assert text.startswith("Seat down per leg")
    if isinstance(d, dict):
        for v in d.values():
            if v is None or isinstance(v, bool | str) or (isinstance(v, float)
                                                           and not math.isfinite(v)):
                assert "unknown" in text


def test_each_compare_leg_keeps_its_seat_downtime(tmp_path: Path, monkeypatch) -> None:
    # ABBA: restart the resident, swap, restart the candidate, restore — each leg's seat
    # change leaves its downtime in the compare's facts (compare.json "downtimes")
    from types import SimpleNamespace

    from test_actions_seam import SWAP_PROFILE
    from test_compare_breach_unit import NoNode

    from seat_console.actions import compare as cmp_mod
    from seat_console.actions import swap as swap_mod
    from seat_console.actions.runbook import RunContext
    from seat_console.core.profile import load_profile
    from seat_console.node.context import NodeContext

    f = tmp_path / "p.toml"
    f.write_text(SWAP_PROFILE)
    nctx = NodeContext(load_profile(f), transport=NoNode())
    rb, _ = cmp_mod.build_compare(nctx, journal=None, options=cmp_mod.CompareOptions(
        order="ABBA", data_root=tmp_path))

    def restart(_n: Any, name: str, _log: Any, facts: dict[str, Any]) -> str:
        facts["downtime"] = {"seconds": 5.0 if "probe" not in name else 6.0}
        return "restarted"

    def ran(seconds: float | None) -> Any:
        facts = {} if seconds is None else {"downtime": {"seconds": seconds}}
        return SimpleNamespace(ok=True, facts=facts, describe=lambda: "ran")
    monkeypatch.setattr(cmp_mod, "restart_container", restart)
    monkeypatch.setattr(swap_mod, "build_swap", lambda *a, **k: SimpleNamespace(
        run=lambda: ran(7.0)))
    monkeypatch.setattr(cmp_mod, "restore_keep_hold", lambda *a, **k: ran(None))
    monkeypatch.setattr(cmp_mod, "_seat_container", lambda _n: SimpleNamespace(name="x"))
    ctx = RunContext("r", "compare", {}, {})
    for step in [s for s in rb.steps if s.name.endswith(": seat")]:
        step.apply(ctx)
    assert cmp_mod.leg_downtimes(ctx.facts) == {"leg1": 5.0, "leg2": 7.0, "leg3": 6.0,
                                                "leg4": None}
    assert cmp_mod.LAST_DOWNTIME not in ctx.facts


# -- the fleet row -------------------------------------------------------------------------------
@pytest.mark.parametrize("value, want", [(31.4, 31.4), (0.0, 0.0), (float("nan"), None),
                                         (float("inf"), None), (-1.0, None), (1e12, None)])
def test_fleet_row_carries_the_last_downtime_unknown_never_0(value: float,
                                                             want: float | None) -> None:
    from test_fleet_rows import NOW, _got, _seat

    from seat_console.fleet.rows import build_rows

    rows = build_rows(_got({"a:1": _seat(seat_downtime_seconds=value), "b:1": _seat()}),
                      NOW, 15)
    by = {r.instance: r for r in rows}
    assert by["a:1"].downtime_s == want and by["b:1"].downtime_s is None
    assert by["a:1"].to_json()["downtime_s"] == want
    if want is None and not math.isnan(value):   # NaN is dropped by the response parser
        assert any("seat downtime" in u for u in by["a:1"].unknown)
    from seat_console.tui.fleet import SeatDetail

    text = SeatDetail(None, by["a:1"])._summary().plain  # type: ignore[arg-type]
    assert ("seat down in its last runbook run: "
            + ("n/a (none measured)" if want is None else f"{want:.1f} s")) in text


@pytest.mark.parametrize("rec, want", [
    (None, ""), ({}, ""),
    ({"mode": "pause", "reached_zero": True, "drained_s": 0.42, "cut": 0},
     "drained by /pause in 0.4 s, 0 requests cut"),
    ({"mode": "pause", "reached_zero": False, "bound_s": 0.2, "cut": 3},
     "drain stopped at the 0.2 s bound, 3 request(s) cut at the bound"),
    ({"mode": "pause", "reached_zero": True, "drained_s": 0.77, "cut": 0, "newcomers": "queued"},
     "drained by /pause in 0.8 s, 0 requests cut (vLLM < 0.33: requests arriving while "
     "paused are queued and cut, maybe uncounted)"),
    ({"mode": "off"}, "drain off: no drain"),
    ({"mode": "sigterm", "cut": 2}, "SIGTERM (no /pause), about 2 request(s) aborted"),
    ({"mode": "none", "cut": None}, "not drained (the engine did not answer)")])
def test_drain_summary_for_the_verify_message(rec: Any, want: str) -> None:
    assert D.summary(rec) == want
