"""The probe key and live panel in the TUI, against the local SSE server (real HTTP).

Preflight is replaced by a fixed :class:`Preflight` pointing at the local server (the real one
needs the lab's docker engine; it is tested in ``test_probe_lab.py``). The rest is real: the key,
the confirmation modal, the probe run in its thread, the live screen's redraws, stop.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
from pathlib import Path

import pytest
from app_fixtures import CountingPanel, CountingSource, FakeClock
from rich.text import Text
from seat_console.tui.app import SeatConsoleApp
from seat_console.probe.engine_counters import KvCapacity
from seat_console.probe.live import LiveView, PhaseLine
from seat_console.probe.run import HoldInfo, Preflight, ProbeRefused
from seat_console.core.profile import LoadedProfile, default_profile_text, parse_profile
from seat_console.widgets.probe import ProbeScreen, progress_bar, render_live, sparkline
from sse_server import SSEServer


def _loaded(tmp_path: Path, url: str, prompts: list[str]) -> LoadedProfile:
    pfile = tmp_path / "prompts.json"
    pfile.write_text(json.dumps({"prompts": prompts}))
    text = default_profile_text().split("\n[probe]")[0] + f"""
[probe]
prompt_set = "{pfile}"
output_tokens = 8
warmup_requests = 0
read_timeout_s = 30
watch_interval_s = 0.2
endpoint = "{url}"
model = "m"
[[probe.phases]]
name = "one"
requests = 6
concurrency = 2
"""
    return LoadedProfile(profile=parse_profile(text), source="test", origin="test",
                         sha256=hashlib.sha256(text.encode()).hexdigest())


def _app(loaded: LoadedProfile, readonly: bool = False) -> SeatConsoleApp:
    app = SeatConsoleApp(loaded, readonly=readonly, interval=3600.0,
                         panels=[(lambda _l: CountingSource(), CountingPanel)],
                         clock=FakeClock(), age_tick_s=3600.0, watch_terminal=False)
    return app


async def _wait(pilot, pred, what: str, limit: int = 3000) -> None:
    for _ in range(limit):
        if pred():
            return
        await pilot.pause(0.01)
    raise AssertionError(f"timed out waiting for {what}")


def _fake_preflight(url: str):
    def pre(loaded, **_kw):
        return Preflight(endpoint=url, model="m", identity={"endpoint": url,
                                                           "container": {"name": "seat-x"}},
                         kv=KvCapacity(), hold=HoldInfo(True, "test hold"),
                         seat_containers=set())
    return pre


@contextlib.asynccontextmanager
async def _serving(monkeypatch: pytest.MonkeyPatch):
    """The local SSE server, with the probe's preflight pointing at it."""
    async with SSEServer() as srv:
        monkeypatch.setattr("seat_console.probe.run.preflight", _fake_preflight(srv.url))
        yield srv


async def _ask_probe(pilot, app: SeatConsoleApp) -> None:
    """Press the probe key; wait for the confirmation modal."""
    await pilot.press("P")
    await _wait(pilot, lambda: type(app.screen).__name__ == "ConfirmScreen",
                "the confirmation modal")


@pytest.fixture
def data_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("SEAT_CONSOLE_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("SEAT_CONSOLE_STATE_DIR", str(tmp_path / "state"))
    return tmp_path / "data"


async def test_probe_key_confirms_runs_and_shows_the_live_panel(
        tmp_path: Path, data_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    async with _serving(monkeypatch) as srv:
        app = _app(_loaded(tmp_path, srv.url, ["normal", "http500"]))
        async with app.run_test(size=(120, 40)) as pilot:
            await _ask_probe(pilot, app)
            assert not srv.requests                      # nothing sent before "yes"
            await pilot.press("y")
            await _wait(pilot, lambda: isinstance(app.screen, ProbeScreen), "the live screen")
            ctl = app.runbooks.probe
            await _wait(pilot, lambda: not ctl.running and ctl.probe.summary, "the run's end")
            await pilot.pause(0.4)                        # one more redraw
            text = str(app.screen.query_one("#probe-panel").render())
            assert "3/6 completed, 3 failed" in text
            assert "INCOMPLETE — no headline" in text
            assert ctl.probe.summary["status"] == "incomplete"
            await pilot.press("escape")
            await _wait(pilot, lambda: not isinstance(app.screen, ProbeScreen), "screen closed")
    runs = list((data_dir / "runs").iterdir())
    assert len(runs) == 1 and (runs[0] / "requests.jsonl").read_text().count("\n") == 6


async def test_probe_key_declined_sends_nothing_and_refusal_is_shown(
        tmp_path: Path, data_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    async with _serving(monkeypatch) as srv:
        app = _app(_loaded(tmp_path, srv.url, ["normal"]))
        async with app.run_test(size=(120, 40)) as pilot:
            await _ask_probe(pilot, app)
            await pilot.press("n")
            await pilot.pause(0.3)
            assert not srv.requests and not (data_dir / "runs").exists()

            def refuse(loaded, **_kw):
                raise ProbeRefused("refusing to probe: no active hold in the journal")

            monkeypatch.setattr("seat_console.probe.run.preflight", refuse)
            await pilot.press("P")
            await _wait(pilot, lambda: any("no active hold" in str(n.message)
                                           for n in app._notifications), "the refusal")
            assert not srv.requests


async def test_probe_key_hidden_and_refused_in_readonly(tmp_path: Path) -> None:
    app = _app(_loaded(tmp_path, "http://127.0.0.1:9", ["normal"]), readonly=True)
    async with app.run_test(size=(120, 40)) as pilot:
        assert app.check_action("probe", ()) is False
        await pilot.press("P")
        await pilot.pause(0.2)
        assert app.runbooks.planning is None and not app.runbooks.probe.running
        assert "probe" not in [d for _k, d in app.help_keys()]


async def test_stop_in_the_live_screen_keeps_the_run_as_interrupted(
        tmp_path: Path, data_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    async with _serving(monkeypatch) as srv:
        app = _app(_loaded(tmp_path, srv.url, ["stall"]))
        async with app.run_test(size=(120, 40)) as pilot:
            await _ask_probe(pilot, app)
            await pilot.press("y")
            await _wait(pilot, lambda: isinstance(app.screen, ProbeScreen), "the live screen")
            ctl = app.runbooks.probe
            await _wait(pilot, lambda: ctl.probe.progress.phases[0].attempted == 2, "2 sent")
            await pilot.press("x")
            await _wait(pilot, lambda: not ctl.running, "the probe to stop")
            assert ctl.probe.summary["status"] == "interrupted"


def test_render_live_words_bars_and_unknowns() -> None:
    v = LiveView(run_id="r1", status="disrupted", phases=(
        PhaseLine(name="c64", expected=64, attempted=64, completed=61, failed=3, in_flight=0,
                  concurrency=64, state="incomplete: 61/64 completed, 3 failed"),),
        tok_s=123.4, words="DISRUPTED — no headline: 09:00 container: seat-resident: restart",
        disruptions=("09:00 container: seat-resident: restart",))
    t = render_live(v).plain
    assert "61/64 completed, 3 failed" in t and "incomplete: 61/64" in t
    assert "DISRUPTED" in t and "no headline" in t
    assert "engine: n/a running, n/a waiting, KV cache n/a used" in t   # unknown is not 0
    assert "TTFT p50 n/a" in t
    bar = progress_bar(61, 3, 64, width=32).plain
    assert bar.count("█") == 30 and bar.count("✗") == 1
    assert progress_bar(0, 1, 1000, width=10).plain.count("✗") == 1   # a failure never hidden
    assert sparkline((0.0, 1.0, 2.0)) == "▁▅█" and sparkline((0.0, 0.0)) == "▁▁"
    assert isinstance(render_live(v), Text)


async def test_quitting_mid_probe_keeps_the_run_as_interrupted(
        tmp_path: Path, data_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    async with _serving(monkeypatch) as srv:
        app = _app(_loaded(tmp_path, srv.url, ["stall"]))
        async with app.run_test(size=(120, 40)) as pilot:
            await _ask_probe(pilot, app)
            await pilot.press("y")
            ctl = app.runbooks.probe
            await _wait(pilot, lambda: ctl.probe.progress.phases[0].attempted == 2, "2 sent")
        assert ctl._exit_hook                      # registered with atexit
        # what the exit hook does (in a thread: this loop serves the SSE server's /metrics)
        await asyncio.to_thread(ctl.stop_and_wait, 10)
        assert not ctl.running
        run = next((data_dir / "runs").iterdir())
        assert json.loads((run / "summary.json").read_text())["status"] == "interrupted"
