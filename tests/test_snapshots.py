"""Snapshot tests (pytest-textual-snapshot) of the Seat Console at 80×24 and 160×50.

Inputs are recorded, never live: the GPU panel runs the real GPU source over the in-process NVML
double with a recorded PID table (tests/app_fixtures.py), every time comes from a fixed fake
clock, TZ is UTC, and the refresh interval is an hour so no timer can fire between the set-up and
the screenshot. Readings are taken by pressing ``r`` and waiting for each to land.

Update after an intended change with ``pytest tests/test_snapshots.py --snapshot-update`` and
look at the SVGs (``tests/__snapshots__/test_snapshots/``) before committing them.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pynvml
import pytest

sys.path.insert(0, str(Path(__file__).parent))
from app_fixtures import (
    CountingPanel,
    DownSource,
    FakeClock,
    HangingSource,
    default_loaded,
    demo_app,
    demo_cards,
    fixed,
    loading_script,
    recorded_runbook,
)
from nvml_double import NvmlDouble

from seat_console.tui.app import SeatConsoleApp

NARROW = (80, 24)
WIDE = (160, 50)


@pytest.fixture(autouse=True)
def _utc(monkeypatch):
    monkeypatch.setenv("TZ", "UTC")
    monkeypatch.delenv("NO_COLOR", raising=False)


async def _take_readings(pilot, app: SeatConsoleApp, key: str, n: int) -> None:
    st = app.states[key]
    for _ in range(n):
        before = st.polls
        await pilot.press("r")
        for _ in range(2000):
            if st.polls > before:
                break
            await pilot.pause(0.01)
        else:
            raise AssertionError(f"no reading from {key}")
    await pilot.pause()


def _history_run(app: SeatConsoleApp):
    async def run_before(pilot) -> None:
        await _first(pilot, app)
        await _take_readings(pilot, app, "gpus", len(loading_script(1)) - 1)
    return run_before


async def _first(pilot, app: SeatConsoleApp) -> None:
    """Every source read once, and the runbook's state (the strip) read once."""
    for _ in range(2000):
        if all(st.polls for st in app.states.values()) and app.runbook_reads:
            break
        await pilot.pause(0.01)
    await pilot.pause()


@pytest.mark.parametrize("size", [NARROW, WIDE], ids=["80x24", "160x50"])
def test_whole_seat_one_glance(snap_compare, size):
    """Every panel with recorded readings (a silence active): at 80×24 the compact one-glance
    screen (status line, GPUs, timers, silence, fit, engine, containers), at 160×50 the full
    panels in two columns."""
    from screen_fixtures import seat_app

    app, _srcs = seat_app(silence_active=True)

    async def run_before(pilot) -> None:
        await _first(pilot, app)

    assert snap_compare(app, terminal_size=size, run_before=run_before)


@pytest.mark.parametrize("size", [NARROW, WIDE], ids=["80x24", "160x50"])
def test_seat_with_vllm_worker(snap_compare, size):
    app, _src = demo_app()
    assert snap_compare(app, terminal_size=size, run_before=_history_run(app))


@pytest.mark.parametrize("size", [NARROW, WIDE], ids=["80x24", "160x50"])
def test_nvml_unavailable_no_driver_library(snap_compare, size):
    double = NvmlDouble(demo_cards(), init_error=pynvml.NVML_ERROR_LIBRARY_NOT_FOUND)
    app, _src = demo_app(history=False, double=double)

    async def run_before(pilot) -> None:
        await _first(pilot, app)

    assert snap_compare(app, terminal_size=size, run_before=run_before)


def test_lost_card_and_v1_driver_160x50(snap_compare):
    cards = demo_cards()
    double = NvmlDouble(cards, memory_v2=False)
    app, _src = demo_app(double=double)

    async def run_before(pilot) -> None:
        await _first(pilot, app)
        await _take_readings(pilot, app, "gpus", 12)
        cards[1].lost = True
        await _take_readings(pilot, app, "gpus", 1)

    assert snap_compare(app, terminal_size=WIDE, run_before=run_before)


def test_help_screen_80x24(snap_compare):
    app, _src = demo_app(history=False)

    async def run_before(pilot) -> None:
        await _first(pilot, app)

    assert snap_compare(app, terminal_size=NARROW, press=["question_mark"],
                        run_before=run_before)


def test_paused_and_readonly_80x24(snap_compare):
    app, _src = demo_app(history=False, readonly=True)

    async def run_before(pilot) -> None:
        await _first(pilot, app)
        await pilot.press("p")
        await pilot.pause()

    assert snap_compare(app, terminal_size=NARROW, run_before=run_before)


def test_stale_and_unavailable_panels_80x24(snap_compare):
    clock = FakeClock()
    hang, down = HangingSource(), DownSource()
    app = SeatConsoleApp(default_loaded(), interval=3600.0, clock=clock, watch_terminal=False,
                         panels=[(fixed(down), CountingPanel), (fixed(hang), CountingPanel)],
                         runbook_reader=lambda _app: recorded_runbook())

    async def run_before(pilot) -> None:
        for _ in range(2000):
            if app.states["down"].polls and hang.entered.is_set() and app.runbook_reads:
                break
            await pilot.pause(0.01)
        down.down = True
        clock.advance(4 * 3600)  # longer than 3 refresh intervals: the hung read is STALE
        await _take_readings(pilot, app, "down", 1)
        clock.advance(3)
        app.tick_ages()
        await pilot.pause()

    try:
        assert snap_compare(app, terminal_size=NARROW, run_before=run_before)
    finally:
        hang.release.set()


RUNBOOK_SIZES = [NARROW, (120, 40)]


def _stale_probe():
    from app_fixtures import recorded_runbook

    return recorded_runbook(6, statuses={"probe": "stale"}, next_stage="probe",
                            problems=("run store: /data/probe-runs unreadable (permission "
                                      "denied)",))


@pytest.mark.parametrize("size", RUNBOOK_SIZES, ids=["80x24", "120x40"])
def test_runbook_strip(snap_compare, size):
    """Issue 30: the strip under the status line, a stale probe next (its key reversed), the
    Actions panel with the hold's countdown on the first screen."""
    from screen_fixtures import seat_app

    app, _srcs = seat_app(silence_active=True, with_actions=True, runbook=_stale_probe())

    async def run_before(pilot) -> None:
        await _first(pilot, app)
        for _ in range(2000):
            if app.runbook_reads:
                break
            await pilot.pause(0.01)
        await pilot.pause()

    assert snap_compare(app, terminal_size=size, run_before=run_before)


@pytest.mark.parametrize("size", RUNBOOK_SIZES, ids=["80x24", "120x40"])
def test_runbook_screen(snap_compare, size):
    """Issue 30: the runbook screen (g): every stage, the next one highlighted."""
    from screen_fixtures import seat_app

    app, _srcs = seat_app(silence_active=True, with_actions=True, runbook=_stale_probe())

    async def run_before(pilot) -> None:
        await _first(pilot, app)
        for _ in range(2000):
            if app.runbook_reads:
                break
            await pilot.pause(0.01)
        await pilot.press("g")
        await pilot.pause(0.2)

    assert snap_compare(app, terminal_size=size, run_before=run_before)
