"""Issue 30, what a new user met driving the runbook screen on the lab: the TUI's compare ran
one round (it can only read INCONCLUSIVE), the next stage jumped over todo stages unsaid,
"held by resident" read as a hold, the run log cut lines at 80 columns and kept "the run goes
on" after it ended, done/skipped stages kept their "needs:"/"run:" lines, and ``hold
--status`` on a fresh journal spoke of released holds."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime, timedelta
from types import SimpleNamespace

import pytest
from app_fixtures import recorded_runbook
from screen_fixtures import wait_for
from textual.app import App
from textual.widgets import RichLog, Static

from seat_console.actions import compare as cmp_mod
from seat_console.widgets.runbook_screen import header_text, stage_rows
from seat_console.widgets.runlog import RunLogScreen


@pytest.fixture(autouse=True)
def _state(tmp_path, monkeypatch):
    monkeypatch.setenv("SEAT_CONSOLE_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.setenv("SEAT_CONSOLE_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("TZ", "UTC")


def test_the_tui_compare_runs_the_smallest_design_that_can_reach_a_claim(monkeypatch) -> None:
    """Was: ``CompareOptions()``'s one round, whose own forecast says it cannot reach a
    claim. Now the rounds the forecast says are needed."""
    from seat_console.tui import runbook as rb

    seen = {}

    def build(nctx, journal, *, options, observer, bracket_id=None):
        seen["rounds"] = options.rounds
        return SimpleNamespace(), "cmp-dir"

    monkeypatch.setattr(cmp_mod, "build_compare", build)
    ctl = SimpleNamespace(app=SimpleNamespace(loaded=SimpleNamespace(
        profile=SimpleNamespace(swap=object()), source="profile.toml")))
    run = rb._make_compare(ctl, None, None, None, lambda _l: None)
    assert seen["rounds"] == cmp_mod.claim_rounds("ABBA") == run.opts.rounds
    from seat_console.actions.journal import Journal

    with Journal() as j:
        fc = cmp_mod.forecast(j, "ABBA", run.opts.rounds, hold_active=True)
        assert fc["can_claim"], fc["text"]
        assert not cmp_mod.forecast(j, "ABBA", run.opts.rounds - 1,
                                    hold_active=True)["can_claim"]   # and no bigger than needed
    assert len(run.legs) == 4 * run.opts.rounds
    ctl.compare_rounds = 1          # chosen on the confirmation ("1 round instead")
    assert rb._make_compare(ctl, None, None, None, lambda _l: None).opts.rounds == 1


def test_the_compare_jumping_over_swap_and_probe_says_why(tmp_path) -> None:
    from runbook_history import History

    from seat_console.actions.journal import Journal
    from seat_console.actions.stages import read_runbook, state_to_json
    from seat_console.commands.runbook_cmd import render as text_lines

    with Journal() as j:
        # read with the real clock: the history starts an hour ago (its hold lasts 4 h)
        h = History(j, tmp_path, t0=datetime.now(UTC) - timedelta(hours=1))
        h.fit()
        h.image()
        h.hold()
        st = read_runbook(None, j, runs_dir=tmp_path, seat="resident")
        assert st.next.name == "backport" and st.next_why == ""
        h.backport()
        st = read_runbook(None, j, runs_dir=tmp_path, seat="resident")
    why = "compare first: it starts from the resident in the seat; swap and probe come after"
    assert st.next.name == "compare" and st.next_why == why
    assert state_to_json(st)["next_why"] == why
    assert why in header_text(st, None).plain
    assert why in text_lines(st)


def test_the_seat_line_says_who_is_in_it_not_a_hold() -> None:
    from seat_console.commands.runbook_cmd import render as text_lines

    st = recorded_runbook(3)
    head = header_text(st, None).plain
    assert "in the seat: the resident" in head and "held by" not in head
    assert "in the seat: the resident" in text_lines(st)[0]
    assert "in the seat: the candidate" in header_text(
        dataclasses.replace(st, seat_holder="candidate"), None).plain


def test_a_hold_by_another_console_is_shown_next_to_who_is_in_the_seat() -> None:
    from seat_console.actions.stages import state_to_json
    from seat_console.commands.runbook_cmd import render as text_lines

    lease = "seat-hold-20261205t081500z-9f3c-lease.timer elapses 2026-12-05T09:15:00Z (in 40 min)"
    st = dataclasses.replace(recorded_runbook(3), foreign_holds=(lease,))
    for line in (header_text(st, None).plain.splitlines()[1], text_lines(st)[0]):
        assert f"in the seat: the resident · held by another console: {lease}" in line, line
    assert state_to_json(st)["foreign_holds"] == [lease]
    assert "another console" not in header_text(recorded_runbook(3), None).plain


def test_done_and_skipped_stages_show_no_needs_or_run_line() -> None:
    st = recorded_runbook(3, statuses={"image": "skipped"})
    keys = lambda _k: "g"   # noqa: E731 - every stage has a key here
    for name in ("fit", "image", "hold"):
        text = stage_rows(st.stage(name), is_next=False, key_of=keys, enter=True).plain
        assert "run:" not in text and "needs:" not in text, (name, text)
    text = stage_rows(st.stage("backport"), is_next=True, key_of=keys, enter=True).plain
    assert "run:" in text and "needs:" in text


def test_hold_status_on_a_fresh_journal_says_there_never_was_a_hold(capsys) -> None:
    from seat_console.actions.journal import Journal
    from seat_console.commands.hold_cmd import _print_status

    with Journal() as j:
        _print_status(j, None, {"foreign_leases": []}, datetime.now(UTC))
    out = capsys.readouterr().out
    assert "no hold in the journal" in out and "released" not in out


class _OneScreenApp(App[None]):
    def __init__(self, screen: RunLogScreen) -> None:
        super().__init__()
        self.first = screen

    def on_mount(self) -> None:
        self.push_screen(self.first)


async def test_the_run_log_wraps_long_lines_and_says_when_the_run_ended() -> None:
    long = "build: step " + " ".join(f"word{i:03d}" for i in range(40)) + " THE-END"
    screen = RunLogScreen("Build the backport", ["short", long])
    app = _OneScreenApp(screen)
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_for(pilot, lambda: app.screen is screen and screen.query(RichLog), "log")
        log = screen.query_one(RichLog)
        await wait_for(pilot, lambda: len(log.lines) >= 3, "the long line wrapped")
        text = "\n".join(strip.text for strip in log.lines)
        assert "THE-END" in text and max(len(s.text.rstrip()) for s in log.lines) <= 80
        title = lambda: str(screen.query_one("#runlog-title", Static).render())  # noqa: E731
        assert "the run goes on" in title()
        screen.mark_ended()
        await pilot.pause()
        assert "run ended: Esc close" in title() and "goes on" not in title()


def test_the_compare_confirmation_offers_the_other_design_and_plans_it_again() -> None:
    """The confirmation's buttons: run the design shown, or plan the other one (1 round ⇄ the
    fewest that can claim), planned and confirmed again with its own cost line."""
    from seat_console.tui import runbook as rb

    need = cmp_mod.claim_rounds("ABBA")
    plan = rb.ComparePlan(SimpleNamespace(ok=True, lines=[], text_lines=lambda: []), [],
                          need)
    _q, labels = rb.confirm_labels(rb.FLOWS["compare"], "Compare?", plan, deferred=False)
    assert labels["yes_label"] == f"Run {need} rounds"
    assert labels["alt_label"] == "1 round instead" and "INCONCLUSIVE" in labels["note"]
    replans: list = []
    ctl = SimpleNamespace(compare_rounds=None, _read_plan=replans.append)
    rb.RunbookController._answered(ctl, rb.FLOWS["compare"], "Compare?", plan, "alt")
    assert ctl.compare_rounds == 1 and replans == [rb.FLOWS["compare"]]
    one = rb.ComparePlan(plan.plan, [], 1)
    assert rb.confirm_labels(rb.FLOWS["compare"], "Compare?", one, deferred=False)[1]["alt_label"] == \
        f"{need} rounds instead"
    rb.RunbookController._answered(ctl, rb.FLOWS["compare"], "Compare?", one, "alt")
    assert ctl.compare_rounds == need and len(replans) == 2


async def test_the_compare_confirmations_three_buttons_fit_80x24() -> None:
    from textual.widgets import Button

    from seat_console.tui import runbook as rb
    from seat_console.widgets.confirm import ConfirmScreen

    labels = rb.compare_labels(cmp_mod.claim_rounds("ABBA"))
    screen = ConfirmScreen("Compare the resident and the candidate?", ["cost: 12 legs"] * 30,
                           typed="seat-node", **labels)
    app = _OneScreenApp(screen)
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_for(pilot, lambda: app.screen is screen and len(screen.query(Button)) == 3,
                       "the buttons")
        await pilot.pause()
        for b in screen.query(Button):
            assert 0 <= b.region.x and b.region.right <= 80 and b.region.bottom <= 24, b.label
            assert str(b.label) in (labels["yes_label"], labels["alt_label"], "Cancel")


def test_swapped_before_the_compare_the_next_stage_is_restore_and_says_why(tmp_path) -> None:
    """A QA walk swapped and probed before comparing: the runbook's next was compare, which is
    refused while the candidate holds the seat, and its refusal's fix (restore) closed the
    cycle unsaid. The next stage is now restore, and the line says what it costs."""
    from runbook_history import History

    from seat_console.actions.journal import Journal
    from seat_console.actions.stages import RESTORE_BEFORE_COMPARE, read_runbook
    from seat_console.commands.runbook_cmd import render as text_lines

    with Journal() as j:
        h = History(j, tmp_path, t0=datetime.now(UTC) - timedelta(hours=1))
        h.to_backport()
        h.swap()
        h.probe()
        st = read_runbook(None, j, runs_dir=tmp_path, seat="candidate")
        assert st.next.name == "restore" and st.next_why == RESTORE_BEFORE_COMPARE
        assert st.next.key is not None                     # R: a key runs it
        assert "ends the hold" in header_text(st, None).plain
        assert RESTORE_BEFORE_COMPARE in text_lines(st)
        # with the resident in the seat the compare is next, as before
        st = read_runbook(None, j, runs_dir=tmp_path, seat="resident")
        assert st.next.name == "compare"


def test_a_swap_before_the_compare_is_warned_of_at_its_confirmation(tmp_path) -> None:
    """The swap's confirmation says what swapping before the compare costs while the resident
    is in the seat and the compare is to do; not once the compare is done."""
    from runbook_history import History

    from seat_console.actions.journal import Journal
    from seat_console.actions.stages import read_runbook, swap_before_compare

    assert swap_before_compare(None) is None
    with Journal() as j:
        h = History(j, tmp_path, t0=datetime.now(UTC) - timedelta(hours=1))
        h.to_backport()
        warn = swap_before_compare(read_runbook(None, j, runs_dir=tmp_path, seat="resident"))
        assert warn is not None and "refused until the resident is back" in warn
        assert "`restore --keep-hold` keeps the hold" in warn and "compare first" in warn
        assert swap_before_compare(read_runbook(None, j, runs_dir=tmp_path,
                                                seat="candidate")) is None
        h.compare()
        assert swap_before_compare(read_runbook(None, j, runs_dir=tmp_path,
                                                seat="resident")) is None
