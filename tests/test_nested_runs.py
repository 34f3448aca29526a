"""A runbook run inside another's step (a compare's own hold, swaps, restores and release) is
the outer run's step, never a stage — from its first row on, while the outer run is still
inside that step (the on-call trial: during a TUI compare the runbook screen showed the
compare's internal swap leg as the *swap stage* "running" and its cursor jumped to "next:
swap" and back)."""

from __future__ import annotations

import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from seat_console.actions.journal import Entry, Journal
from seat_console.actions.runbook import PARENT_RUN, Check, Runbook, Step
from seat_console.actions.runner_id import runner_identity
from seat_console.actions.stages import read_runbook, _top_level

WAIT_S = 30.0


def _step(name: str, apply: Any) -> Step:
    return Step(name, lambda ctx: Check(True, name), apply, lambda ctx: f"{name} ok")


def _end(go: threading.Event, t: threading.Thread, proc: Any, j: Journal) -> None:
    """Let the held step go, wait for the outer run's thread, end the stand-in console
    process and close the journal (each test's teardown)."""
    go.set()
    t.join(WAIT_S)
    proc.kill()
    proc.wait()
    j.close()

def test_a_compare_s_swap_leg_in_progress_is_the_compare_stage(tmp_path: Path) -> None:
    # a stand-in console: its command line names seat_console, as a real one's does
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)",
                             "seat_console"])
    runner = {**runner_identity(), "pid": proc.pid}
    inside, go = threading.Event(), threading.Event()
    j = Journal(tmp_path / "journal.sqlite3")

    def swap_leg(ctx: Any) -> str:
        def held(_ctx: Any) -> str:
            inside.set()
            assert go.wait(WAIT_S)
            return "candidate serves"

        res = Runbook("swap", [_step("start probe", held)], journal=j,
                      facts={"runner": runner}).run()
        return res.describe()

    def hold(ctx: Any) -> str:
        return Runbook("hold", [_step("silence", lambda c: "placed")], journal=j,
                       facts={"runner": runner}).run().describe()

    outer = Runbook("compare", [_step("hold", hold), _step("leg B1: seat", swap_leg)],
                    journal=j, facts={"runner": runner})
    t = threading.Thread(target=outer.run, daemon=True)
    t.start()
    try:
        assert inside.wait(WAIT_S)
        s = read_runbook(None, j, runs_dir=tmp_path / "runs", seat="candidate")
        st_ = {x.name: x.status for x in s.stages}
        assert st_["compare"] == "running", s.stage("compare")
        assert st_["swap"] == "todo" and st_["hold"] == "todo", st_
        assert s.next is not None and s.next.name == "compare", s.next
        nested = [e for e in j.entries() if e.runbook in ("swap", "hold")]
        assert nested and all(e.facts.get(PARENT_RUN) == outer.run_id for e in nested)
        assert all(PARENT_RUN not in e.facts for e in j.entries() if e.runbook == "compare")
    finally:
        _end(go, t, proc, j)


def test_a_run_on_its_own_thread_names_no_parent(tmp_path: Path) -> None:
    """Only a run started inside another's step gets a parent: two runs one after the other
    on the same thread, or on another thread while one runs, are both top-level."""
    with Journal(tmp_path / "journal.sqlite3") as j:
        a = Runbook("hold", [_step("x", lambda c: None)], journal=j)
        a.run()
        b = Runbook("release", [_step("y", lambda c: None)], journal=j)
        b.run()
        rows = j.entries()
        assert rows and all(PARENT_RUN not in e.facts for e in rows)


def _row(seq: int, run_id: str, facts: Any) -> Entry:
    return Entry(seq=seq, at=None, run_id=run_id, runbook="swap", kind="start",  # type: ignore[arg-type]
                 step="", user="u", host="h", inputs={}, outcome="", output="", facts=facts,
                 profile_sha256="", prev_hash="", hash="")


@given(st.one_of(st.none(), st.integers(), st.text(max_size=8), st.lists(st.text(max_size=3)),
                 st.dictionaries(st.text(max_size=3), st.integers(), max_size=2),
                 st.sampled_from(["run-a", "run-b"])))
def test_any_parent_value_in_the_journal_is_read_without_error(parent: Any) -> None:
    """The journal is outside input: whatever ``parent_run`` holds, a run is nested only when
    it names another run of the journal; never an error."""
    runs = {"run-a": [_row(1, "run-a", {})],
            "run-b": [_row(2, "run-b", {PARENT_RUN: parent})]}
    top = _top_level(runs)
    assert "run-a" in top
    assert ("run-b" in top) == (parent != "run-a")


async def test_the_runbook_screen_stays_on_compare_while_its_swap_leg_runs(
        tmp_path: Path, monkeypatch) -> None:
    """The runbook screen (``g``, 120x40) read before the compare and while its swap leg
    runs: the highlight stays on compare and no row says the swap stage is running."""
    from datetime import UTC, datetime, timedelta

    from app_fixtures import CountingPanel, CountingSource, FakeClock, default_loaded
    from runbook_history import History
    from screen_fixtures import wait_for

    from seat_console.tui.app import SeatConsoleApp
    from seat_console.widgets.runbook_screen import RunbookScreen, stage_rows

    monkeypatch.setenv("SEAT_CONSOLE_STATE_DIR", str(tmp_path / "state"))
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)",
                             "seat_console"])
    runner = {**runner_identity(), "pid": proc.pid}
    inside, go = threading.Event(), threading.Event()
    j = Journal(tmp_path / "journal.sqlite3")
    h = History(j, tmp_path, datetime.now(UTC) - timedelta(hours=1))
    h.to_backport()
    states = [read_runbook(None, j, runs_dir=tmp_path / "runs", seat="resident")]

    def held(_ctx: Any) -> str:
        inside.set()
        assert go.wait(WAIT_S)
        return "candidate serves"

    outer = Runbook("compare", [_step("leg B1: seat", lambda c: Runbook(
        "swap", [_step("start probe", held)], journal=j, facts={"runner": runner}).run()
        .describe())], journal=j, facts={"runner": runner})
    t = threading.Thread(target=outer.run, daemon=True)
    t.start()
    try:
        assert inside.wait(WAIT_S)
        states.append(read_runbook(None, j, runs_dir=tmp_path / "runs", seat="candidate"))
    finally:
        _end(go, t, proc, j)
    shown = iter(states)
    app = SeatConsoleApp(default_loaded(), interval=3600.0,
                         panels=[(lambda _l: CountingSource(), CountingPanel)],
                         clock=FakeClock(), age_tick_s=3600.0, watch_terminal=False,
                         runbook_reader=lambda _app: next(shown, states[-1]))
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_for(pilot, lambda: app.runbook_reads >= 1, "the first read")
        await pilot.press("g")
        await wait_for(pilot, lambda: isinstance(app.screen, RunbookScreen), "the screen")
        scr = app.screen
        ol = scr.query_one("#runbook-stages")
        compare_at = [s.name for s in states[0].stages].index("compare")
        assert states[0].next.name == "compare" and ol.highlighted == compare_at
        reads = app.runbook_reads
        app.read_runbook_now()
        await wait_for(pilot, lambda: app.runbook_reads > reads
                       and scr.state is states[-1], "the read during the swap leg")
        await pilot.pause()
        assert ol.highlighted == compare_at, ol.highlighted
        swap = scr.state.stage("swap")
        assert swap.status != "running", swap
        assert "running" not in stage_rows(swap, is_next=False, key_of=app.key_of).plain
        assert scr.state.stage("compare").status == "running"
