"""Issue 30 item 3, the TUI: the runbook strip under the status line (every stage's mark, the
next stage's key highlighted, one line at 80 columns, readable under NO_COLOR), read in a worker
and again after every action; the runbook screen (``g``: every stage with its status, time,
operator, evidence and needs; Enter runs the next stage through the runbook controller, or shows
the command of a stage without a key; ``--readonly`` hides the run part); ``compare`` in the TUI
(``c``: its plan, lines as the plan gives them, a typed confirmation, the log screen).

The state is a recorded :class:`~seat_console.actions.stages.RunbookState`
(:func:`app_fixtures.recorded_runbook`), handed to the app as its runbook reader."""

from __future__ import annotations

import re
import sys
import threading
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace

import pytest
from hypothesis import given
from hypothesis import strategies as st
from rich.cells import cell_len

sys.path.insert(0, str(Path(__file__).parent))
import screen_fixtures as F
from app_fixtures import (CountingPanel, CountingSource, FakeClock, default_loaded,
                          recorded_runbook)
from screen_fixtures import all_read, lines_of, wait_for

from seat_console.actions import stages
from seat_console.actions.stages import STAGES
from seat_console.tui import runbook as rb
from seat_console.tui.app import SeatConsoleApp
from seat_console.tui.messages import RunFinished
from seat_console.tui.runbook_state import NO_READER
from seat_console.widgets.confirm import ConfirmScreen
from seat_console.widgets.help import HelpScreen
from seat_console.widgets.runbook_screen import (READONLY_HINT, RUN_HINT, RunbookScreen,
                                                 stage_rows)
from seat_console.widgets.runbook_strip import MARKS, render_strip

KEYS = {"node.hold": "H", "node.build-backport": "B", "node.swap": "S", "node.probe": "P",
        "node.compare": "c", "node.restore": "R", "node.release": "U"}


@pytest.fixture(autouse=True)
def _state(tmp_path, monkeypatch):
    monkeypatch.setenv("SEAT_CONSOLE_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.setenv("SEAT_CONSOLE_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("TZ", "UTC")


def _app(reader=None, readonly: bool = False, **kw) -> SeatConsoleApp:
    return SeatConsoleApp(default_loaded(), interval=3600.0, readonly=readonly,
                          panels=[(lambda _l: CountingSource(), CountingPanel)],
                          clock=FakeClock(), age_tick_s=3600.0, watch_terminal=False,
                          runbook_reader=reader or (lambda _app: recorded_runbook()), **kw)


def _strip_line(app) -> str:
    return next(x for x in lines_of(app) if "▸" in x or "runbook" in x)


def _segments(app, row_text: str):
    for strip in app.screen._compositor.render_strips():
        if strip.text == row_text:
            return list(strip)
    raise AssertionError(row_text)


# -- the strip -------------------------------------------------------------------------------
@given(statuses=st.lists(st.sampled_from(sorted(MARKS)), min_size=len(STAGES),
                         max_size=len(STAGES)),
       nxt=st.one_of(st.none(), st.sampled_from(STAGES)), width=st.integers(60, 200))
def test_the_strip_fits_any_width_from_60_and_names_the_next_stage(statuses, nxt, width):
    state = recorded_runbook(0, statuses=dict(zip(STAGES, statuses, strict=True)),
                             next_stage=nxt)
    t = render_strip(state, width, KEYS.get)
    assert cell_len(t.plain) <= width
    if nxt is not None and width >= 80:
        assert f"▸{'' if state.next.status == 'todo' else MARKS[state.next.status]}" in t.plain
        assert nxt in t.plain
        key = KEYS.get(state.next.key)
        if key:
            assert f"▸{'' if state.next.status == 'todo' else MARKS[state.next.status]} {key} " \
                f"{nxt}" in t.plain
    if nxt is None and width >= 80:
        assert "complete" in t.plain
    if width >= 130:   # every stage by name, with its mark
        for name, status in zip(STAGES, statuses, strict=True):
            assert name in t.plain and MARKS[status] in t.plain


@pytest.mark.parametrize("size", [(80, 24), (120, 40)], ids=["80x24", "120x40"])
async def test_the_strip_under_the_status_line(size) -> None:
    app, _ = F.seat_app(silence_active=True)
    async with app.run_test(size=size) as pilot:
        await all_read(pilot, app)
        await wait_for(pilot, lambda: app.runbook_reads >= 1, "the runbook read")
        await pilot.pause()
        lines = lines_of(app)
        row = _strip_line(app)
        status_end = max(i for i, x in enumerate(lines) if "fit fits" in x)
        assert lines.index(row) == status_end + 1, lines       # right under the status line
        assert len(row.rstrip()) <= size[0]
        if size[0] == 80:
            assert "✓✓✓ ▸ B backport ·swap ·probe ·compare" in row, row
        else:
            assert "runbook ✓ fit  ✓ image  ✓ hold  ▸ B backport  · swap" in row, row
        key = [s for s in _segments(app, row) if s.text.strip() == "B"]
        assert key and key[0].style.reverse, key               # the next stage's key stands out


async def test_the_strip_reads_under_no_color(monkeypatch) -> None:
    monkeypatch.setenv("NO_COLOR", "1")
    state = recorded_runbook(5, statuses={"probe": "stale", "image": "failed",
                                          "restore": "skipped"}, next_stage="probe")
    app = _app(lambda _app: state)
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_for(pilot, lambda: app.runbook_reads >= 1, "the runbook read")
        await pilot.pause()
        row = _strip_line(app)
        for mark in ("✓ fit", "✗ image", "▸~ P probe", "· compare", "– restore"):
            assert mark in row, row
        key = [s for s in _segments(app, row) if s.text.strip() == "P"]
        assert key and key[0].style.reverse, key
        assert key[0].style.color is None or key[0].style.color.is_default, key


async def test_the_runbook_is_read_in_a_worker_and_again_after_each_action() -> None:
    threads: list[str] = []
    after = threading.Event()

    def reader(_app):
        threads.append(threading.current_thread().name)
        return recorded_runbook(4 if after.is_set() else 3)

    app = _app(reader)
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_for(pilot, lambda: "▸ B backport" in _strip_line(app), "the first read")
        reads = app.runbook_reads
        after.set()
        done = SimpleNamespace(ok=True, describe=lambda: "build-backport: done", remaining=(),
                               outcome="done", error=None)
        app.post_message(RunFinished("build", done, rb.FLOWS["build"].refresh))
        await wait_for(pilot, lambda: app.runbook_reads > reads
                       and "▸ S swap" in _strip_line(app), "the read after the build")
    assert threads and threading.main_thread().name not in threads, threads


async def test_without_the_reader_the_strip_says_so(monkeypatch) -> None:
    monkeypatch.delattr(stages, "read_runbook", raising=False)
    app = SeatConsoleApp(default_loaded(), interval=3600.0,
                         panels=[(lambda _l: CountingSource(), CountingPanel)],
                         clock=FakeClock(), age_tick_s=3600.0, watch_terminal=False)
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_for(pilot, lambda: app.runbook_reads >= 1, "the runbook read")
        await pilot.pause()
        assert NO_READER[:40] in _strip_line(app)


# -- the runbook screen ------------------------------------------------------------------------
async def _open(pilot, app) -> RunbookScreen:
    await wait_for(pilot, lambda: app.runbook_reads >= 1, "the runbook read")
    await pilot.press("g")
    await wait_for(pilot, lambda: isinstance(app.screen, RunbookScreen), "the runbook screen")
    await pilot.pause()
    return app.screen


@pytest.mark.parametrize("size", [(80, 24), (120, 40)], ids=["80x24", "120x40"])
async def test_the_runbook_screen_shows_every_stage_and_enter_runs_the_next(
        monkeypatch, size) -> None:
    planned: list[str] = []
    monkeypatch.setattr(rb.RunbookController, "_read_plan",
                        lambda self, flow: planned.append(flow.kind))
    app = _app()
    async with app.run_test(size=size, notifications=True) as pilot:
        scr = await _open(pilot, app)
        ol = scr.query_one("#runbook-stages")
        assert ol.option_count == len(STAGES)
        nxt = app.runbook_state.next.name
        rows = [stage_rows(x, is_next=x.name == nxt, key_of=app.key_of).plain
                for x in app.runbook_state.stages]
        assert [ol.get_option_at_index(i).id for i in range(ol.option_count)] == list(STAGES)
        for name, row in zip(STAGES, rows, strict=True):
            assert row.split()[1 if row.startswith(" ") else 0].lstrip("▸✓·") in (name, "")
            assert name in row
        assert "done 2026-11-29T12:02Z by ops@seat-node" in rows[2]
        assert "hold: seat-hold-20261129t115500z-1a2b" in rows[2]
        assert "needs: the hold" in rows[3] and "seat-console build-backport" in rows[3]
        assert rows[3].startswith("▸") and ol.highlighted == 3            # the next stage
        assert RUN_HINT in "\n".join(lines_of(app))
        await pilot.press("enter")
        await wait_for(pilot, lambda: planned == ["build"], "the build planned")
        ol.highlighted = 0                                    # fit: no key, its flow runs
        await pilot.press("enter")
        await wait_for(pilot, lambda: planned == ["build", "fit"], "fit planned")
        await pilot.press("escape")
        await wait_for(pilot, lambda: not isinstance(app.screen, RunbookScreen), "closed")


async def test_the_runbook_screen_under_readonly_runs_nothing(monkeypatch) -> None:
    planned: list[str] = []
    monkeypatch.setattr(rb.RunbookController, "_read_plan",
                        lambda self, flow: planned.append(flow.kind))
    app = _app(readonly=True)
    async with app.run_test(size=(80, 24)) as pilot:
        scr = await _open(pilot, app)
        text = "\n".join(lines_of(app))
        assert READONLY_HINT[:40] in text and "Enter: run" not in text
        ol = scr.query_one("#runbook-stages")
        assert "run:  B " not in "\n".join(lines_of(app))            # no key offered
        assert "run: seat-console build-backport" in "\n".join(lines_of(app))
        await pilot.press("enter")
        await pilot.pause(0.1)
        assert planned == [] and isinstance(app.screen, RunbookScreen)


async def test_the_runbook_is_in_help_and_the_palette() -> None:
    app = _app()
    assert any(k == "g" and label == "runbook" for k, label, _s in app.help_rows())
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.press("question_mark")
        await wait_for(pilot, lambda: isinstance(app.screen, HelpScreen), "help")
        assert "g runbook — The runbook screen" in app.screen.key_text()
        await pilot.press("escape")
        await pilot.press("ctrl+p")
        await pilot.pause(0.2)
        await pilot.press(*"open the runbook")
        await pilot.pause(0.3)
        await pilot.press("enter")
        await wait_for(pilot, lambda: isinstance(app.screen, RunbookScreen), "from the palette")


@pytest.mark.parametrize("n", [26, 27, 28, 29])
async def test_a_wrapped_command_keeps_its_second_line_at_80_columns(monkeypatch, n) -> None:
    """The second trial at 80×24: "run: seat-console --profile /work/main/.lab/profile.toml"
    and no "build-backport": the option list measured the row without its scrollbar, the
    wrapped word fell on a line it never drew (a command 1-2 cells wider than the list less
    its scrollbar: profile paths of 27-28 characters here). The list keeps the gutter."""
    monkeypatch.setattr(rb.RunbookController, "_read_plan", lambda self, flow: None)
    path = "/p/" + "x" * (n - 8) + ".toml"
    assert len(path) == n
    given = replace(default_loaded(), source=path, origin="--profile")
    app = SeatConsoleApp(given, interval=3600.0, readonly=True,
                         panels=[(lambda _l: CountingSource(), CountingPanel)],
                         clock=FakeClock(), age_tick_s=3600.0, watch_terminal=False,
                         runbook_reader=lambda _app: recorded_runbook())
    async with app.run_test(size=(80, 24)) as pilot:
        scr = await _open(pilot, app)
        state = scr.state
        scr.show(None, None)                     # the state arrives after the screen opened,
        await pilot.pause()                      # as on the lab: the list grows a scrollbar
        scr.show(state, None)
        await pilot.pause()
        ol = scr.query_one("#runbook-stages")
        seen: list[str] = []
        for _ in range(60):                      # every row, scrolled through
            seen += lines_of(app)
            ol.scroll_down(animate=False)
            await pilot.pause()
        text = "\n".join(seen)
        assert f"run: seat-console --profile {path}" in text, text
        assert "build-backport" in text, text


def test_the_palettes_runbook_entry_does_not_promise_a_run_under_readonly() -> None:
    """The trial, under ``--readonly``: the palette said "Enter runs the next" of a screen
    that runs nothing there."""
    from seat_console.tui.palette import SeatCommands

    for readonly, said in ((False, "Enter runs the next"), (True, "read-only")):
        app = _app(readonly=readonly)
        helps = {t: h for t, _cb, h in SeatCommands._commands(SimpleNamespace(app=app))}
        assert said in helps["Open the runbook"], helps


# -- compare ---------------------------------------------------------------------------------
class _ComparePlan:
    ok = True
    lines: list = []

    def text_lines(self) -> list[str]:
        return ["• hold: place a hold for 1 h (released at the end)",
                "• cost: 1 round, 4 legs ≈ 14 min on this node"]


async def test_c_plans_the_compare_with_its_cost_and_asks_for_the_seats_name(monkeypatch) -> None:
    fake = SimpleNamespace(plan=lambda: _ComparePlan())
    monkeypatch.setitem(rb.FLOWS, "compare", replace(rb.FLOWS["compare"],
                                                     make=lambda *a, **k: fake))
    app = _app()
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("c")
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmScreen), "the confirmation")
        scr = app.screen
        assert scr.typed == "seat-node" and scr.yes_label == "Yes, compare"
        assert "• cost: 1 round, 4 legs ≈ 14 min on this node" in scr.lines
        await pilot.press("escape")
        await wait_for(pilot, lambda: not isinstance(app.screen, ConfirmScreen), "cancelled")


async def test_c_on_a_profile_without_a_candidate_is_refused_and_hidden_readonly() -> None:
    app = _app()
    async with app.run_test(size=(120, 40), notifications=True) as pilot:
        await pilot.press("c")
        await wait_for(pilot, lambda: any("there is no candidate to compare" in str(n.message)
                                          for n in app._notifications), "the refusal")
        assert not isinstance(app.screen, ConfirmScreen)
    ro = _app(readonly=True)
    async with ro.run_test(size=(120, 40)) as pilot:
        assert ro.check_action("compare", ()) is False
        await pilot.press("c")
        await pilot.pause(0.1)
        assert ro.runbooks.planning is None


def test_the_compare_plan_names_the_legs_then_the_plans_lines() -> None:
    from seat_console.evidence.bracket import plan_bracket

    plan = SimpleNamespace(ok=True, lines=[], text_lines=lambda: ["• cost: 14 min"])
    run = rb.CompareRun(SimpleNamespace(plan=lambda: plan), Path("/x"), None, None,
                        plan_bracket("ABBA", 1), lambda line: None)
    lines = run.plan().text_lines()
    assert lines[0].startswith("4 legs: A1 (round 1, pair r1p1)") and "pairs " in lines[0]
    assert lines[1:] == ["• cost: 14 min"]


async def test_c_reads_the_compare_plan_from_the_lab_and_escape_changes_nothing(
        lab, tmp_path, monkeypatch) -> None:
    """On the lab's real docker engine and systemd node: ``c`` reads the compare's plan (the
    legs, then the runbook's lines), asks for the seat's name; Escape changes nothing."""
    from seat_console.core.profile import load_profile

    monkeypatch.setenv("SEAT_CONSOLE_STATE_DIR", str(tmp_path / "state"))
    loaded = load_profile(lab.profile_path)
    with lab.docker_client() as client:
        before = client.containers.get(lab.resident_container).attrs["State"]["StartedAt"]
    app = SeatConsoleApp(loaded, interval=3600.0, clock=FakeClock(), age_tick_s=3600.0,
                         panels=[(lambda _l: CountingSource(), CountingPanel)],
                         watch_terminal=False, runbook_reader=lambda _app: recorded_runbook())
    async with app.run_test(size=(120, 40), notifications=True) as pilot:
        await pilot.press("c")
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmScreen)
                       or app.runbooks.planning is None and bool(app._notifications),
                       "the compare's plan", limit=6000)
        assert isinstance(app.screen, ConfirmScreen), [n.message for n in app._notifications]
        scr = app.screen
        assert scr.typed == loaded.profile.node.name
        # the screen offers the fewest rounds that can reach a claim (3 ABBA rounds: 12 legs)
        assert re.match(r"12 legs: A1 \(round 1", scr.lines[0]), scr.lines
        assert any("hold" in x for x in scr.lines[1:]), scr.lines
        assert scr.lines[1].startswith("cost: "), scr.lines      # the cost up front
        assert "cost: n/a" not in scr.lines[1], scr.lines
        await pilot.press("escape")
        await wait_for(pilot, lambda: not isinstance(app.screen, ConfirmScreen), "cancelled")
    with lab.docker_client() as client:
        c = client.containers.get(lab.resident_container).attrs
    assert c["State"]["Running"] and c["State"]["StartedAt"] == before


async def test_a_failed_read_keeps_the_last_state_and_says_it_is_old() -> None:
    fail = threading.Event()

    def reader(_app):
        if fail.is_set():
            raise OSError("journal: database is locked")
        return recorded_runbook()

    app = _app(reader)
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_for(pilot, lambda: "▸ B backport" in _strip_line(app), "the first read")
        assert "⚠" not in _strip_line(app)
        fail.set()
        app.read_runbook_now()
        await wait_for(pilot, lambda: "⚠ old" in _strip_line(app), "the failed read said")
        assert "▸ B backport" in _strip_line(app)
        assert app.runbook_error == "n/a: journal: database is locked"


async def test_the_runbook_screens_commands_name_the_profile_the_console_was_given(
        monkeypatch) -> None:
    """A new engineer started the TUI with ``--profile`` and pasted the runbook screen's
    ``seat-console build-backport``: bare, it reads another profile, another node. Every
    command the screen shows names the ``--profile`` given (absolute, shell-quoted); one
    found through ``$SEAT_CONSOLE_PROFILE`` or the default stays bare, as on the command line."""
    monkeypatch.setattr(rb.RunbookController, "_read_plan", lambda self, flow: None)
    path = "/srv/my seat.toml"   # never read: the profile is already loaded
    given = replace(default_loaded(), source=str(path), origin="--profile")
    app = SeatConsoleApp(given, interval=3600.0, readonly=True,
                         panels=[(lambda _l: CountingSource(), CountingPanel)],
                         clock=FakeClock(), age_tick_s=3600.0, watch_terminal=False,
                         runbook_reader=lambda _app: recorded_runbook())
    async with app.run_test(size=(120, 40)) as pilot:
        await _open(pilot, app)
        text = "\n".join(lines_of(app))
        assert f"run: seat-console --profile '{path}' build-backport" in text, text
    assert given.given_path == str(path) and default_loaded().given_path is None
    state = recorded_runbook()
    stage = next(s for s in state.stages if s.command)
    bare = stage_rows(stage, is_next=True, key_of=lambda _k: None).plain
    named = stage_rows(stage, is_next=True, key_of=lambda _k: None, profile="/p.toml").plain
    assert f"run: {stage.command}" in bare
    assert named == bare.replace("seat-console ", "seat-console --profile /p.toml ")
    line = rb.tui_next_line(state, lambda _k: None, "/p.toml")
    assert "seat-console --profile /p.toml " in line and "seat-console --profile /p.toml " \
        not in rb.tui_next_line(state, lambda _k: None), line
