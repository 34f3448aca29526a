"""The TUI reads the node's slow sources on change, not only on their interval (issue 33: the
idle console's CPU): a change docker's event stream reports re-reads the sources marked
``on_docker_change`` in the source table (and the runbook), at once, whatever their interval;
a new journal row (the action log's reading moved) re-reads the runbook.

The app runs with a one-hour refresh interval, so every read after the first is one of these
wake-ups; the docker event watcher's count is a stand-in on the app's own node context (the
watcher itself is tested on the lab's docker: tests/test_docker_events_lab.py)."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from app_fixtures import (CountingPanel, CountingSource, FakeClock, HangingSource, default_loaded,
                          recorded_runbook)
from screen_fixtures import wait_for

from seat_console.snapshot.table import SLOW_S, SOURCE_TABLE
from seat_console.tui.app import SeatConsoleApp
from seat_console.tui import runbook_state
from seat_console.tui.panels import PanelSpec


def _app(sources: dict[str, CountingSource], marked: set[str]) -> SeatConsoleApp:
    specs = [PanelSpec((lambda s: lambda _l: s)(src), CountingPanel,
                       on_docker_change=name in marked) for name, src in sources.items()]
    return SeatConsoleApp(default_loaded(), interval=3600.0, panels=specs, clock=FakeClock(),
                          age_tick_s=0.05, watch_terminal=False,
                          runbook_reader=lambda _app: recorded_runbook())


async def test_a_docker_change_reads_the_marked_sources_and_the_runbook_at_once() -> None:
    docker = CountingSource("docker")
    other = CountingSource("other")
    app = _app({"docker": docker, "other": other}, {"docker"})
    seen = [None]
    app.node.docker_changes_seen = lambda: seen[0]
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_for(pilot, lambda: docker.reads == 1 and other.reads == 1
                       and app.runbook_reads >= 1, "the first reads")
        seen[0] = 0          # the watcher started: its count is the baseline, no change yet
        await wait_for(pilot, lambda: app._docker_seen == 0, "the baseline looked at")
        assert docker.reads == 1 and app.runbook_reads == 1
        seen[0] = 1          # a container changed
        await wait_for(pilot, lambda: docker.reads == 2 and app.runbook_reads == 2,
                       "the re-read after the change")
        assert app._docker_seen == 1 and other.reads == 1   # unmarked: its interval only


async def test_a_new_journal_row_reads_the_runbook_again() -> None:
    actions = CountingSource("actions")   # each read differs, as a journal with a new row
    app = _app({"actions": actions}, set())
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_for(pilot, lambda: actions.reads == 1 and app.runbook_reads == 1,
                       "the first reads")
        await pilot.press("r")
        await wait_for(pilot, lambda: actions.reads == 2 and app.runbook_reads == 2,
                       "the runbook read after the action log moved")


def test_the_slow_sources_are_read_at_most_every_few_seconds_and_containers_on_change():
    slow = {n for n, e in SOURCE_TABLE.items() if e.min_interval_s >= SLOW_S}
    assert {"timers", "silences", "containers", "seat"} <= slow
    assert {n for n, e in SOURCE_TABLE.items() if e.on_docker_change} == {"containers", "seat"}
    assert SOURCE_TABLE["engine"].min_interval_s == 0   # the live panel: every interval


class _EngineSource(CountingSource):
    """An engine whose ``/version`` changes on the third read (a swap to another engine)."""

    def read(self):
        from datetime import datetime, timezone

        from seat_console.sources.engine import EngineReading

        self.reads += 1
        return EngineReading(endpoint="http://seat:8000", read_at=datetime.now(timezone.utc),
                             healthy=True, health_status=200, models=None, metrics=None,
                             version="0.32.0" if self.reads < 3 else "0.34.0")


async def test_the_engines_version_changing_reads_the_fit_again_at_once() -> None:
    # the fit budgets the side by the running engine's /version: its first answer and any
    # change re-read the fit whatever the fit's interval; an unchanged answer does not
    engine, fit = _EngineSource("engine"), CountingSource("fit")
    app = _app({"fit": fit, "engine": engine}, set())
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_for(pilot, lambda: engine.reads == 1 and fit.reads >= 2,
                       "the fit read again after the engine's first answer")
        reads = fit.reads
        await pilot.press("r")                       # the same version: no extra fit read
        await wait_for(pilot, lambda: engine.reads == 2 and fit.reads == reads + 1,
                       "the manual refresh (which reads the fit once itself)")
        await pilot.press("r")                       # 0.34.0 now
        await wait_for(pilot, lambda: engine.reads == 3 and fit.reads == reads + 3,
                       "the refresh and the re-read after the version changed")


def _gated_app(hang: HangingSource, other: CountingSource) -> SeatConsoleApp:
    specs = [PanelSpec((lambda s: lambda _l: s)(src), CountingPanel) for src in (other, hang)]
    return SeatConsoleApp(default_loaded(), interval=3600.0, panels=specs, clock=FakeClock(),
                          age_tick_s=0.05, watch_terminal=False,
                          runbook_reader=lambda _app: recorded_runbook())


async def test_the_first_runbook_read_waits_for_every_panels_first_reading(monkeypatch) -> None:
    """Issue 33: at start the runbook is read once every panel has its first reading, not
    beside the sources' first reads."""
    monkeypatch.setattr(runbook_state, "RUNBOOK_FIRST_WAIT_S", 3600.0)
    hang, other = HangingSource(), CountingSource("other")
    app = _gated_app(hang, other)
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_for(pilot, lambda: other.reads == 1 and hang.entered.is_set()
                       and app.states["other"].polls == 1, "one panel read, one in flight")
        for _ in range(20):   # the UI loop turns over; the first read still waits
            await pilot.pause()
        assert app.runbook_reads == 0 and app._rb_first_pending
        hang.release.set()
        await wait_for(pilot, lambda: app.runbook_reads == 1, "the runbook read after it")
        assert app.states["hanging"].polls == 1


async def test_a_hung_source_delays_the_first_runbook_read_only_so_long(monkeypatch) -> None:
    """A source that never answers does not keep the runbook unread: it is read after
    ``RUNBOOK_FIRST_WAIT_S``."""
    monkeypatch.setattr(runbook_state, "RUNBOOK_FIRST_WAIT_S", 0.05)
    hang, other = HangingSource(), CountingSource("other")
    app = _gated_app(hang, other)
    try:
        async with app.run_test(size=(120, 40)) as pilot:
            await wait_for(pilot, lambda: app.runbook_reads == 1, "the runbook read")
            assert app.states["hanging"].polls == 0
    finally:
        hang.release.set()
