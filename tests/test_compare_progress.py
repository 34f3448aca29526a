"""A compare's log screen keeps one line above the engine's start-up flood: ``leg N of M (name)
· step · elapsed`` (the on-call trial: ~2.5 min of vLLM config lines per leg and no line saying
where the bracket was), fed from the runbook's own events."""

from __future__ import annotations

import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

sys.path.insert(0, str(Path(__file__).parent))
from app_fixtures import CountingPanel, CountingSource, FakeClock, default_loaded, recorded_runbook
from screen_fixtures import wait_for

from seat_console.actions.runbook import Event
from seat_console.tui.app import SeatConsoleApp
from seat_console.tui.compare_progress import CompareProgress, advance, elapsed, progress_line
from seat_console.tui.messages import RunbookEvent
from seat_console.widgets.runlog import RunLogScreen

T = datetime(2026, 12, 5, 20, 12, tzinfo=UTC)


def _e(runbook: str, kind: str, step: str = "", s: int = 0) -> Event:
    return Event("run-1", runbook, kind, step, "", at=T + timedelta(seconds=s))


def test_the_line_follows_the_compare_s_steps_and_its_inner_runbooks() -> None:
    p = CompareProgress(legs=4)
    assert progress_line(p, T) == "compare: starting…"
    for e in (_e("compare", "start"), _e("compare", "begin", "hold", 1),
              _e("hold", "begin", "silence", 2)):
        p = advance(p, e)
    assert progress_line(p, T + timedelta(seconds=5)) == \
        "hold (hold: silence) · step 0:04 · total 0:05"
    p = advance(p, _e("compare", "begin", "leg A1: seat", 10))
    p = advance(p, _e("compare", "begin", "leg B2: seat", 200))
    p = advance(p, _e("swap", "begin", "start probe", 210))
    p = advance(p, _e("swap", "verify", "start probe", 300))    # not a begin: the same line
    assert progress_line(p, T + timedelta(seconds=362)) == \
        "leg 2 of 4 (B2) · seat (swap: start probe) · step 2:42 · total 6:02"
    p = advance(p, _e("compare", "begin", "leg B2: measure", 400))
    assert progress_line(p, T + timedelta(seconds=3700)).startswith(
        "leg 2 of 4 (B2) · measure · step 55:00 · total 1:01:40")
    p = advance(p, _e("compare", "begin", "restore seat", 4000))
    assert progress_line(p, T + timedelta(seconds=4001)).startswith("restore seat · step 0:01")
    p = advance(p, _e("compare", "end", "", 4100))
    assert progress_line(p, T + timedelta(seconds=4200)) == "compare ended · total 1:10:00"


@given(st.text(max_size=30), st.sampled_from(["start", "begin", "end", "verify", "x", None]),
       st.text(max_size=30), st.one_of(st.none(), st.just(T), st.integers()))
def test_any_event_leaves_a_line(runbook, kind, step, at) -> None:
    """Whatever the event, :func:`advance` does not raise and the line is one line."""
    from types import SimpleNamespace

    p = advance(CompareProgress(legs=None, started_at=T),
                SimpleNamespace(runbook=runbook, kind=kind, step=step, at=at))
    line = progress_line(p, T + timedelta(seconds=1))
    assert line and "\n" not in line.replace(step, "") and elapsed(None, T) == "?"


async def test_the_compare_log_screen_shows_where_the_bracket_is_above_the_flood() -> None:
    app = SeatConsoleApp(default_loaded(), interval=3600.0,
                         panels=[(lambda _l: CountingSource(), CountingPanel)],
                         clock=FakeClock(), age_tick_s=3600.0, watch_terminal=False,
                         runbook_reader=lambda _app: recorded_runbook())
    async with app.run_test(size=(120, 40)) as pilot:
        ctl = app.runbooks
        ctl.title, ctl.running = "Compare the resident and the candidate", "compare"
        ctl.progress = CompareProgress(legs=4)
        ctl.open_log()
        await wait_for(pilot, lambda: isinstance(app.screen, RunLogScreen)
                       and app.screen.query("#runlog-progress"), "the log screen")
        now = datetime.now(UTC)
        for e in (Event("c", "compare", "start", "", "4 legs", at=now),
                  Event("c", "compare", "begin", "leg B2: seat", "", at=now),
                  Event("s", "swap", "begin", "start probe", "", at=now)):
            app.post_message(RunbookEvent("compare", e.line(), None, event=e))
        for i in range(300):                          # the engine's start-up flood
            app.post_message(RunbookEvent("compare", f"  | (EngineCore pid=1) config {i}"))

        def head() -> str:
            return str(app.screen.query_one("#runlog-progress").render())

        await wait_for(pilot, lambda: "leg 2 of 4 (B2) · seat (swap: start probe)" in head(),
                       "the progress line")
        assert "· step 0:0" in head() and "· total 0:0" in head()
