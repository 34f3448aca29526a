"""Issue 30, the runbook screen's TUI part: a new engineer reaches a decision and acts on it
from the runbook screen without guessing a key.

* Enter runs EVERY stage through the one runbook controller (fit, image and decide, which have
  no key, through their flows; the rest through their keys); under ``--readonly`` none;
* at the decision, Enter on the next stage opens the branch: PROMOTE-ABLE offers promote or
  keep, KEEP offers keep (restore, or release when the resident already serves),
  INCONCLUSIVE says what would decide it and offers compare again or keep; the decide row shows
  each question's answer (✓ ✗ ?), never raw JSON;
* promote (``M``) and its undo (``Z``) are keys of the one table (remappable, in ``?``, hidden
  under ``--readonly``), each with the seat's name typed;
* the screen defects: the restore / release buttons say what each does; a no-op build says
  there is nothing to build and offers Close; the probe screen's footer drops "x stop probe"
  once the run ended; the strip never cuts the next stage's name.

Pilot tests at 80×24 and 120×40 over recorded runbook states (:func:`app_fixtures.
decided_runbook`, :func:`app_fixtures.recorded_runbook`); the read stages' flows over a real
journal in a temporary state dir."""

from __future__ import annotations

import dataclasses
import re
import sys
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import SimpleNamespace

import pytest
from hypothesis import given
from hypothesis import strategies as st

sys.path.insert(0, str(Path(__file__).parent))
from app_fixtures import (CountingPanel, CountingSource, FakeClock, decided_runbook,
                          default_loaded, recorded_runbook)
from screen_fixtures import flat, lines_of, screen_text, wait_for

from seat_console.actions.runbook import Plan, PlanLine
from seat_console.actions.stages import STAGES
from seat_console.tui import runbook as rb
from seat_console.tui.app import SeatConsoleApp
from seat_console.tui.messages import PlanReady
from seat_console.widgets.confirm import ConfirmScreen
from seat_console.widgets.decision import DecisionScreen, answer_mark, branch_of
from seat_console.widgets.runbook_screen import RunbookScreen, stage_rows
from seat_console.widgets.runbook_strip import MARKS, render_strip

SIZES = pytest.mark.parametrize("size", [(80, 24), (120, 40)], ids=["80x24", "120x40"])
ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(autouse=True)
def _state(tmp_path, monkeypatch):
    monkeypatch.setenv("SEAT_CONSOLE_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.setenv("SEAT_CONSOLE_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("TZ", "UTC")


def _app(state=None, readonly: bool = False, loaded=None) -> SeatConsoleApp:
    state = state if state is not None else recorded_runbook()
    return SeatConsoleApp(loaded or default_loaded(), interval=3600.0, readonly=readonly,
                          panels=[(lambda _l: CountingSource(), CountingPanel)],
                          clock=FakeClock(), age_tick_s=3600.0, watch_terminal=False,
                          runbook_reader=lambda _app: state)


@pytest.fixture
def keyed(monkeypatch) -> list[str]:
    """The flows the controller was asked to run (``RunbookController.key``), not run."""
    got: list[str] = []
    monkeypatch.setattr(rb.RunbookController, "key", lambda self, kind: got.append(kind))
    return got


async def _open(pilot, app) -> RunbookScreen:
    await wait_for(pilot, lambda: app.runbook_reads >= 1, "the runbook read")
    await pilot.press("g")
    await wait_for(pilot, lambda: isinstance(app.screen, RunbookScreen), "the runbook screen")
    await pilot.pause()
    return app.screen


def _visible(app, selector: str) -> bool:
    """``selector``'s widget lies wholly inside the terminal."""
    w = app.screen.query_one(selector)
    r = w.region
    return (w.display and r.width > 0 and r.height > 0 and r.x >= 0 and r.y >= 0
            and r.right <= app.size.width and r.bottom <= app.size.height)


# -- Enter runs every stage ---------------------------------------------------------------------
FLOW_OF = {"fit": "fit", "image": "image", "hold": "hold", "backport": "build", "swap": "swap",
           "probe": "probe", "compare": "compare", "decide": "decide", "restore": "restore",
           "promote": "promote", "release": "release"}


@SIZES
async def test_enter_runs_every_stage_through_the_controller(keyed, size) -> None:
    app = _app(recorded_runbook(0))
    async with app.run_test(size=size) as pilot:
        scr = await _open(pilot, app)
        ol = scr.query_one("#runbook-stages")
        for i, name in enumerate(STAGES):
            ol.highlighted = i
            await pilot.press("enter")
            await wait_for(pilot, lambda n=i: len(keyed) == n + 1, f"Enter on {name}")
            assert isinstance(app.screen, RunbookScreen)
    assert keyed == [FLOW_OF[s] for s in STAGES]


async def test_a_stages_key_runs_it_on_the_runbook_screen_as_its_row_says(keyed) -> None:
    """A stranger on the runbook screen pressed U, as the release row said ("run:  U  or
    seat-console release"), and nothing happened: only Enter ran a stage there. Each stage's
    key now runs it as Enter on its row does, the highlight left where it was (a key that
    moved it left Enter on a refused stage); a key of no stage does nothing, and under
    --readonly no key runs anything."""
    app = _app(recorded_runbook(0))
    async with app.run_test(size=(120, 40)) as pilot:
        scr = await _open(pilot, app)
        assert "run:  U  or seat-console release" in "\n".join(lines_of(app))
        ol = scr.query_one("#runbook-stages")
        before = ol.highlighted
        for key, flow in (("U", "release"), ("H", "hold"), ("B", "build")):
            await pilot.press(key)
            await wait_for(pilot, lambda f=flow: keyed[-1:] == [f], f"{key} on the screen")
            assert ol.highlighted == before
            assert isinstance(app.screen, RunbookScreen)
        await pilot.press("x")
        await pilot.pause(0.1)
        assert keyed == ["release", "hold", "build"]
    ro = _app(recorded_runbook(0), readonly=True)
    async with ro.run_test(size=(120, 40)) as pilot:
        await _open(pilot, ro)
        for key in ("U", "H", "B", "S"):
            await pilot.press(key)
        await pilot.pause(0.1)
        assert keyed == ["release", "hold", "build"] and isinstance(ro.screen, RunbookScreen)


async def test_keyless_stages_say_enter_and_readonly_runs_nothing(keyed) -> None:
    app = _app(recorded_runbook(0))
    async with app.run_test(size=(120, 40)) as pilot:
        await _open(pilot, app)
        text = "\n".join(lines_of(app))
        assert "run:  Enter  or seat-console fit" in text
        assert "run:  Enter  or seat-console image-check" in text
    ro = _app(recorded_runbook(0), readonly=True)
    async with ro.run_test(size=(120, 40)) as pilot:
        scr = await _open(pilot, ro)
        assert "Enter" not in "\n".join(lines_of(ro)).split("Runbook", 1)[1].split("Esc")[0]
        for i in range(len(STAGES)):
            scr.query_one("#runbook-stages").highlighted = i
            await pilot.press("enter")
        await pilot.pause(0.1)
        assert keyed == [] and isinstance(ro.screen, RunbookScreen)


async def test_a_closed_cycle_offers_fit_to_start_a_new_one(keyed) -> None:
    closed = replace(recorded_runbook(11), next=None,
                     cycle_closed_at=datetime(2026, 11, 29, 12, 20, tzinfo=UTC))
    t = render_strip(closed, 78, {}.get).plain
    assert t.endswith("▸ fit"), t
    app = _app(closed)
    async with app.run_test(size=(80, 24)) as pilot:
        scr = await _open(pilot, app)
        assert scr.query_one("#runbook-stages").highlighted == 0
        assert "Enter on fit starts a new one" in "\n".join(lines_of(app))
        await pilot.press("enter")
        await wait_for(pilot, lambda: keyed == ["fit"], "fit from a closed cycle")


# -- the decision's branch ----------------------------------------------------------------------
CASES = {  # decision, holder -> (the buttons, the first one's flow)
    ("PROMOTE-ABLE", "candidate"): (["Not now", "Promote the candidate", "Keep the resident"],
                                    "promote", "restore"),
    ("KEEP", "candidate"): (["Not now", "Keep the resident"], "restore", "restore"),
    ("KEEP", "resident"): (["Not now", "Keep the resident"], "release", "release"),
    ("INCONCLUSIVE", "resident"): (["Not now", "Compare again", "Keep the resident"],
                                   "compare", "release"),
}


@SIZES
@pytest.mark.parametrize("case", list(CASES), ids=lambda c: f"{c[0]}-{c[1]}")
async def test_the_decision_offers_what_it_allows_and_runs_the_choice(keyed, size,
                                                                      case) -> None:
    decision, holder = case
    buttons, first, keep = CASES[case]
    state = decided_runbook(decision, holder=holder,
                            restore="skipped" if holder == "resident" else "todo")
    app = _app(state)
    async with app.run_test(size=size, notifications=True) as pilot:
        await _open(pilot, app)
        head = "\n".join(lines_of(app))
        assert f"Decision {decision}: Enter on ▸ {state.next.name} chooses" in head
        await pilot.press("enter")
        await wait_for(pilot, lambda: isinstance(app.screen, DecisionScreen), "the branch")
        await pilot.pause()
        scr = app.screen
        assert [str(b.label) for b in scr.query("Button")] == buttons
        for b in scr.query("Button"):
            assert _visible(app, f"#{b.id}"), (b.id, b.region, app.size)
        text = "\n".join(lines_of(app))
        assert f"Decision: {decision}" in text
        assert "✓ fits? (critical): yes: the fit budget says" in text
        if decision == "INCONCLUSIVE":
            assert "What would decide it: ≥ 3 rounds (6 pairs)" in text
        if decision == "KEEP":
            assert "✗ canaries? (critical): no: json-schema" in text
        # the hint names what Enter presses now, and follows the focus
        hint = lambda: str(scr.query_one("#decision-hint").render())  # noqa: E731
        assert f"Enter: {buttons[1]} (its plan comes first)" in hint(), hint()
        await pilot.press("left")
        await wait_for(pilot, lambda: "Enter: not now" in hint(), "the hint follows the focus")
        await pilot.press("right")
        await wait_for(pilot, lambda: f"Enter: {buttons[1]}" in hint(), "back on the first")
        await pilot.press("enter")                      # the focused, first choice
        await wait_for(pilot, lambda: keyed == [first], "the first choice run")
        assert isinstance(app.screen, RunbookScreen)
        await pilot.press("enter")
        await wait_for(pilot, lambda: isinstance(app.screen, DecisionScreen), "again")
        await pilot.click(f"#choice-{keep}")
        await wait_for(pilot, lambda: keyed == [first, keep], "keep run")
        await pilot.press("enter")
        await wait_for(pilot, lambda: isinstance(app.screen, DecisionScreen), "again")
        await pilot.press("escape")
        await wait_for(pilot, lambda: any("nothing done" in str(n.message)
                                          for n in app._notifications), "not now said")
        assert keyed == [first, keep]


def test_the_branch_is_only_at_the_decision() -> None:
    assert branch_of(recorded_runbook(3)) is None                       # no decision yet
    assert branch_of(decided_runbook("PROMOTE-ABLE", promote="done")) is None   # acted on
    b = branch_of(decided_runbook("PROMOTE-ABLE", holder="resident"))
    assert b is not None and "does not hold the seat" in b.note         # promote will refuse


async def test_the_decide_row_shows_each_answer_not_json(keyed) -> None:
    state = decided_runbook("KEEP")
    row = stage_rows(state.stage("decide"), is_next=False, key_of={}.get, enter=True).plain
    assert "decision: KEEP" in row and "runs: r1, r2, r3, r4" in row
    assert "✓ fits? (critical): yes: the fit budget says candidate-nvfp4 fits" in row
    assert "✗ canaries? (critical): no: json-schema passes 7/12" in row
    assert "[" not in row and "{" not in row


def test_each_answer_sentence_of_the_decision_module_gets_its_mark() -> None:
    """Every literal PASS / FAIL sentence head in evidence/decision.py gets ✓ / ✗ (the decide
    row keeps the sentence, not the status); "cannot tell" is ?; an unknown head is ?."""
    src = (ROOT / "console/evidence/decision.py").read_text("utf-8")
    found = re.findall(r"Answer\(Q_\w+, (PASS|FAIL), f?\"([^\"{]{2,})", src)
    found += [(s, h) for s, h in re.findall(r"Answer\(Q_\w+, (PASS|FAIL), f\"\{'(\w+)'", src)]
    assert len(found) >= 10, found
    for status, head in found:
        assert answer_mark(head) == {"PASS": "✓", "FAIL": "✗"}[status], (status, head)
    assert answer_mark("cannot tell, because x; needs y") == "?"
    assert answer_mark("maybe") == "?"


# -- promote and its undo: keys of the one table ------------------------------------------------
class _Plan:
    ok = True
    lines: tuple = ()
    facts: dict = {}

    def text_lines(self) -> list[str]:
        return ["• check seat: seat-probe holds the seat; decision PROMOTE-ABLE",
                "• rename candidate: seat-probe -> seat-resident-promoted-20261129T120000Z",
                "• write seat state", "• write profile", "• verify serving"]


@SIZES
@pytest.mark.parametrize("key,kind,yes", [("M", "promote", "Yes, promote the candidate"),
                                          ("Z", "promote-undo", "Yes, undo the promote")])
async def test_promote_and_its_undo_plan_then_ask_for_the_seats_name(monkeypatch, size, key,
                                                                     kind, yes) -> None:
    monkeypatch.setitem(rb.FLOWS, kind, replace(rb.FLOWS[kind],
                                                make=lambda *a, **k: SimpleNamespace(
                                                    plan=lambda: _Plan())))
    app = _app()
    async with app.run_test(size=size) as pilot:
        await pilot.press(key)
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmScreen), "the confirmation")
        await pilot.pause()
        scr = app.screen
        assert scr.typed == "seat-node" and scr.yes_label == yes
        assert scr.query_one("#confirm-yes-button").disabled
        for sel in ("#confirm-input", "#confirm-yes-button", "#confirm-no-button",
                    "#confirm-hint"):
            assert _visible(app, sel), sel
        await pilot.press(*"seat-node")
        await wait_for(pilot, lambda: not scr.query_one("#confirm-yes-button").disabled,
                       "yes enabled by the typed name")
        await pilot.press("escape")
        await wait_for(pilot, lambda: not isinstance(app.screen, ConfirmScreen), "cancelled")


async def test_promote_keys_are_in_help_remappable_and_hidden_readonly(keyed) -> None:
    rows = {label: k for k, label, _s in _app().help_rows()}
    assert rows["promote"] == "M" and rows["undo promote"] == "Z"
    ro = _app(readonly=True)
    assert not {"promote", "undo promote"} & {label for _k, label, _s in ro.help_rows()}
    assert ro.check_action("promote", ()) is False
    assert ro.check_action("promote_undo", ()) is False
    loaded = replace(default_loaded(), profile=default_loaded().profile.model_copy(
        update={"keys": {"node.promote": "ctrl+o"}}))
    app = _app(loaded=loaded)
    assert app.key_of("node.promote") == "^o"
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.press("ctrl+o")
        await wait_for(pilot, lambda: keyed == ["promote"], "the remapped key")
        await pilot.press("M")
        await pilot.pause(0.1)
        assert keyed == ["promote"]


async def test_a_done_promote_shows_and_runs_its_undo(keyed) -> None:
    state = decided_runbook("PROMOTE-ABLE", promote="done", restore="skipped")
    row = stage_rows(state.stage("promote"), is_next=False, key_of={"node.promote-undo": "Z",
                                                                    "node.promote": "M"}.get)
    assert "undo:  Z  (or Enter) or seat-console promote --undo" in row.plain
    app = _app(state)
    async with app.run_test(size=(80, 24)) as pilot:
        scr = await _open(pilot, app)
        scr.query_one("#runbook-stages").highlighted = STAGES.index("promote")
        await pilot.press("enter")
        await wait_for(pilot, lambda: keyed == ["promote-undo"], "the undo")


# -- the screen defects -------------------------------------------------------------------------
def _release_plan(kind: str, firing: dict[str, bool]) -> Plan:
    return Plan(kind, (PlanLine("release hold", True, "release hold h1: start the timers"),),
                facts={"forecast": {u: {"fires_at_once": f} for u, f in firing.items()}})


@SIZES
@pytest.mark.parametrize("kind", ["restore", "release"])
async def test_the_restore_and_release_buttons_say_what_each_does(monkeypatch, size,
                                                                   kind) -> None:
    app = _app()
    async with app.run_test(size=size) as pilot:
        monkeypatch.setattr(app.runbooks, "_read_plan", lambda flow: None)
        app.runbooks.plan_ready(PlanReady(kind, _release_plan(kind, {"a.timer": True,
                                                                     "b.timer": False})))
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmScreen)
                       and app.screen.query("#confirm-note"), "the confirmation")
        await pilot.pause()
        yes = str(app.screen.query_one("#confirm-yes-button").label)
        alt = str(app.screen.query_one("#confirm-alt-button").label)
        assert yes == "Start all now" and alt.startswith("Defer 1 to ")
        note = str(app.screen.query_one("#confirm-note").render())
        assert note.startswith("Both restore the resident and release the hold. " if kind ==
                               "restore" else "Both release the hold. "), note
        assert "Start all now: every stopped timer starts now — a.timer fires at once" in note
        assert f"{alt}: a.timer stays stopped until" in note
        for sel in ("#confirm-yes-button", "#confirm-alt-button", "#confirm-no-button",
                    "#confirm-note"):
            assert _visible(app, sel), sel


async def test_without_timers_firing_the_restore_asks_plainly(monkeypatch) -> None:
    app = _app()
    async with app.run_test(size=(80, 24)) as pilot:
        app.runbooks.plan_ready(PlanReady("restore", _release_plan("restore", {"b.timer": False})))
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmScreen), "confirmation")
        await pilot.pause()
        assert str(app.screen.query_one("#confirm-yes-button").label) == "Yes, restore the seat"
        assert not app.screen.query("#confirm-alt-button")
        assert not app.screen.query("#confirm-note")


@SIZES
async def test_a_no_op_build_says_nothing_to_build_and_offers_close(size) -> None:
    plan = Plan("build-backport", (PlanLine("build", False, "no-op: seat/backport:ab12 was "
                                            "already built; nothing to build"),),
                facts={"no_op": True, "image_id": "sha256:ab12"})
    app = _app()
    async with app.run_test(size=size, notifications=True) as pilot:
        app.runbooks.plan_ready(PlanReady("build", plan))
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmScreen), "confirmation")
        await pilot.pause()
        scr = app.screen
        assert scr.title_text.startswith("Nothing to build")
        assert str(scr.query_one("#confirm-no-button").label) == "Close"
        assert str(scr.query_one("#confirm-yes-button").label) == "Record it (no build)"
        assert "Yes, build" not in "\n".join(lines_of(app))
        assert _visible(app, "#confirm-no-button") and _visible(app, "#confirm-yes-button")
        await pilot.press("escape")
        await wait_for(pilot, lambda: not isinstance(app.screen, ConfirmScreen), "closed")
        assert app.runbooks.running is None


def _view(status: str):
    from seat_console.probe.live import LiveView

    return LiveView(run_id="r1", status=status, phases=(), tok_s=None, words=status)


@SIZES
async def test_the_probe_screens_footer_drops_stop_once_the_run_ended(size) -> None:
    from seat_console.widgets.probe import ProbeScreen

    stopped: list[int] = []
    app = _app()
    async with app.run_test(size=size) as pilot:
        scr = ProbeScreen(lambda: stopped.append(1), _view("running"))
        app.push_screen(scr)
        await wait_for(pilot, lambda: app.screen is scr
                       and "stop probe" in (lines_of(app) or [""])[-1], "the probe's footer")
        assert "probe goes on" in lines_of(app)[-1]
        scr.show(_view("complete"))
        await wait_for(pilot, lambda: "stop probe" not in lines_of(app)[-1]
                       and "close" in lines_of(app)[-1], "footer redrawn")
        footer = lines_of(app)[-1]
        assert "close" in footer and "probe goes on" not in footer, footer
        await pilot.press("x")
        await pilot.pause(0.05)
        assert stopped == []                                   # x does nothing any more
        await pilot.press("escape")
        await wait_for(pilot, lambda: app.screen is not scr, "closed")


@given(statuses=st.lists(st.sampled_from(sorted(MARKS)), min_size=len(STAGES),
                         max_size=len(STAGES)),
       nxt=st.sampled_from(STAGES), width=st.integers(40, 200))
def test_the_strip_never_cuts_the_next_stages_name(statuses, nxt, width) -> None:
    state = recorded_runbook(0, statuses=dict(zip(STAGES, statuses, strict=True)),
                             next_stage=nxt)
    keys = {"node.hold": "H", "node.build-backport": "B", "node.swap": "S", "node.probe": "P",
            "node.compare": "c", "node.restore": "R", "node.release": "U", "node.promote": "M"}
    t = render_strip(state, width, keys.get).plain
    assert len(t) <= width
    marks = "".join(MARKS.values())
    assert re.search(rf"▸[{marks}]?(?: \S+ | ){nxt}(?![a-z])", t), (t, nxt)


# -- the read stages' flows over a real journal -------------------------------------------------
def _journal():
    from seat_console.actions.journal import Journal

    return Journal()


def test_the_fit_flow_plans_the_verdict_and_journals_it_as_runbook_next_does() -> None:
    """The default profile's candidate does not fit the recorded cards: the plan says so and
    that the runbook stops there; the run journals the ``fit`` row, which the runbook reads as
    a failed fit stage with the verdict's words."""
    from seat_console.actions.stages import read_runbook
    from seat_console.node.context import NodeContext
    from seat_console.tui.stage_flows import FitRun

    loaded = default_loaded()
    nctx = NodeContext.from_profile(loaded)
    with _journal() as j:
        plan = FitRun(loaded, j, nctx, lambda line: None).plan()
        assert plan.ok and plan.text_lines()[0].startswith("fit verdict now: over — does not fit")
        assert any("the runbook stops at fit" in x for x in plan.text_lines())
        res = FitRun(loaded, j, nctx, lambda line: None).run()
        assert not res.ok and res.describe().startswith("fit: over — the runbook stops here")
        st = read_runbook(None, j).stage("fit")
    assert st.status == "failed" and "fit verdict over" in st.reason


def test_the_decide_flow_refuses_without_a_bracket_and_journals_a_decision() -> None:
    from seat_console.actions import read_stages
    from seat_console.actions.stages import read_runbook
    from seat_console.tui.stage_flows import DecideRun

    loaded = default_loaded()
    with _journal() as j:
        plan = DecideRun(loaded, j, None, lambda line: None).plan()
        assert not plan.ok and "no compare bracket found" in plan.text_lines()[0]
        questions = [{"question": "fits?", "answer": "yes: the fit budget says it fits",
                      "critical": True},
                     {"question": "canaries?", "answer": "no: B passes fewer by a claimed "
                      "difference", "critical": True}]
        made = read_stages.Decided(
            {"outcome": "KEEP", "why": "canaries? (critical) no", "needs": "",
             "questions": questions},
            {"decision": "KEEP", "bracket_id": "b1", "runs": ["r1", "r2"],
             "report_sha256": "ab" * 32, "questions": questions, "needs": ""},
            None, ("/data/comparisons/b1",), datetime(2026, 11, 29, 12, 0, tzinfo=UTC))
        run = DecideRun(loaded, j, None, lambda line: None)
        run._decide = lambda: made                      # the report itself is test_decide's
        lines = run.plan().text_lines()
        assert lines[:3] == ["decision: KEEP — canaries? (critical) no",
                             "  ✓ fits? (critical): yes: the fit budget says it fits",
                             "  ✗ canaries? (critical): no: B passes fewer by a claimed "
                             "difference"]
        res = run.run()
        assert res.ok and res.describe().startswith("decide: KEEP — journaled (decide row ")
        st = read_runbook(None, j).stage("decide")
    assert st.status == "stale" and st.evidence["decision"] == "KEEP"  # no probe, no compare
    assert st.evidence["runs"] == "r1, r2"
    assert "canaries? no: B passes fewer by a claimed difference" in st.details
    row = stage_rows(st, is_next=False, key_of={}.get).plain
    assert "✗ canaries? (critical): no: B passes fewer" in row and "[" not in row


def test_the_image_flow_refuses_without_requirements() -> None:
    from seat_console.tui.stage_flows import ImageRun

    with _journal() as j:
        plan = ImageRun(default_loaded(), j, None, lambda line: None).plan()
    assert not plan.ok and "declares no [candidate.requires]" in plan.text_lines()[0]


async def test_the_highlight_follows_the_next_stage_unless_moved(keyed) -> None:
    """After a stage ran the state is read again: the highlight moves on with ▸, so Enter runs
    the next stage, not the one just done; a highlight the engineer moved stays put."""
    states = [recorded_runbook(3), recorded_runbook(4)]
    app = _app()
    app.runbook_reader = lambda _app: states[0]
    async with app.run_test(size=(80, 24)) as pilot:
        scr = await _open(pilot, app)
        ol = scr.query_one("#runbook-stages")
        assert ol.highlighted == 3
        states[0] = recorded_runbook(4)
        app.read_runbook_now()
        await wait_for(pilot, lambda: ol.highlighted == 4, "the highlight on the new next")
        await pilot.press("enter")
        await wait_for(pilot, lambda: keyed == ["swap"], "Enter runs the new next")
        ol.highlighted = 0
        states[0] = recorded_runbook(5)
        app.read_runbook_now()
        await wait_for(pilot, lambda: app.runbook_state.next.name == "probe", "read")
        await pilot.pause()
        assert ol.highlighted == 0


async def test_a_keyless_next_stage_shows_the_runbook_screens_key() -> None:
    keys = {"node.hold": "H"}.get
    for done, name in ((0, "fit"), (7, "decide")):
        t = render_strip(recorded_runbook(done), 78, keys, guide="g").plain
        assert f"▸ g {name}" in t, t
    assert "▸ H hold" in render_strip(recorded_runbook(2), 78, keys, guide="g").plain
    assert "▸ backport" in render_strip(recorded_runbook(3), 78, {}.get, guide="g").plain
    for readonly, shown in ((False, "▸ g fit"), (True, "▸ fit")):
        app = _app(recorded_runbook(0), readonly=readonly)
        async with app.run_test(size=(80, 24)) as pilot:
            await wait_for(pilot, lambda: any("▸" in x for x in lines_of(app)), "the strip")
            row = next(x for x in lines_of(app) if "▸" in x)
            assert shown + " " in row, (readonly, row)


def test_at_the_start_of_a_cycle_the_strip_keeps_the_names_after_fit() -> None:
    """Fit next with the g key: at 80 columns every stage by name; narrower, the stages after
    fit keep their names and the tail is cut (not every stage shrunk to a mark)."""
    t = render_strip(recorded_runbook(0), 78, {}.get, guide="g").plain
    assert t == "▸ g fit ·image·hold·backport·swap·probe·compare·decide·restore·promote·release"
    t = render_strip(recorded_runbook(0), 70, {}.get, guide="g").plain
    assert t.startswith("▸ g fit ·image·hold·backport·swap·probe·compare") and t.endswith("…")
    assert len(t) == 70


async def test_a_run_that_never_ended_shows_recover_and_runs_nothing(keyed) -> None:
    from seat_console.actions.stages import RECOVER_COMMAND

    state = recorded_runbook(3)
    stages = tuple(replace(s, status="failed", command=RECOVER_COMMAND,
                           reason="hold run h1 never ended") if s.name == "hold" else s
                   for s in state.stages)
    app = _app(replace(state, stages=stages, next=stages[2]))
    async with app.run_test(size=(80, 24), notifications=True) as pilot:
        await _open(pilot, app)
        await pilot.press("enter")
        await wait_for(pilot, lambda: any(f"run it in a shell: {RECOVER_COMMAND}"
                                          in str(n.message) for n in app._notifications),
                       "recover shown")
        assert keyed == []


def test_with_the_resident_in_the_seat_the_compare_comes_before_the_swap(tmp_path) -> None:
    """Met on the lab driving the screen by Enter: after swap and probe the candidate held the
    seat and compare (next) was refused "restore first" — which ends the hold and the cycle, so
    Enter could never reach a decision. While the resident holds the seat and neither is done,
    the compare is next; after it, the swap; after the probe, decide."""
    from runbook_history import History

    from seat_console.actions.journal import Journal
    from seat_console.actions.stages import read_runbook

    with Journal() as j:
        # read with the real clock: the history starts an hour ago (its hold lasts 4 h)
        h = History(j, tmp_path, t0=datetime.now(UTC) - timedelta(hours=1))
        h.to_backport()
        assert read_runbook(None, j, runs_dir=tmp_path, seat="resident").next.name == "compare"
        assert read_runbook(None, j, runs_dir=tmp_path, seat="unknown").next.name == "swap"
        h.compare()
        assert read_runbook(None, j, runs_dir=tmp_path, seat="resident").next.name == "swap"
        h.swap()
        assert read_runbook(None, j, runs_dir=tmp_path, seat="candidate").next.name == "probe"
        h.probe()
        st = read_runbook(None, j, runs_dir=tmp_path, seat="candidate")
        assert st.next.name == "decide", [(s.name, s.status, s.reason) for s in st.stages]
        h.decide("KEEP")
        st = read_runbook(None, j, runs_dir=tmp_path, seat="candidate")
        assert st.next.name == "restore" and branch_of(st) is not None


async def test_a_long_decision_keeps_its_buttons_and_hint_on_80x24(keyed) -> None:
    """Met on the lab by a new user at 80×24: an INCONCLUSIVE whose answers ran ~25 wrapped
    rows (the lab's own, below) pushed the hint and every button off the screen, so Enter ran
    the focused choice (Compare again) unseen. The text now scrolls inside the box."""
    lab = ("enough data? yes: 12 measured populations complete on both arms; arms told by the "
           "bracket's leg records (leg.json arm)",
           "fits? yes: the fit budget says lab-tiny-llama-backport fits (fits: 1.00 GiB per "
           "card for the KV cache = 1,048,576 tokens, 2,048 requests of 512 tokens at once)",
           "KV capacity? the same: candidate / resident = 1.00× (1,048,576 vs 1,048,576 "
           "tokens, engines' startup logs)",
           "fidelity? yes: B's greedy outputs, top-20 sets and logprobs equal A's on all 8 "
           "cases in every pair (A1–B2, A4–B3)",
           "canaries? yes: no kind is worse on B (all no difference can be claimed, arithmetic "
           "no difference can be claimed, code no difference can be claimed, prose no "
           "difference can be claimed, tool_call no difference can be claimed)",
           "throughput and latency? cannot tell, because throughput (single-stream): 2 pair(s) "
           "cannot reach p ≤ 0.05; TTFT p50 (single-stream): 2 pair(s) cannot reach p ≤ 0.05; "
           "TPOT p50 (single-stream): rule unknown (+12 more); needs a complete, undisturbed "
           "bracket of ≥ 3 rounds")
    base = decided_runbook("INCONCLUSIVE")
    stages = tuple(dataclasses.replace(s, details=lab) if s.name == "decide" else s
                   for s in base.stages)
    app = _app(dataclasses.replace(base, stages=stages))
    async with app.run_test(size=(80, 24)) as pilot:
        await _open(pilot, app)
        await pilot.press("enter")
        await wait_for(pilot, lambda: isinstance(app.screen, DecisionScreen), "the branch")
        await wait_for(pilot, lambda: all(_visible(app, f"#{b.id}")
                                          for b in app.screen.query("Button")),
                       "every button on the screen")
        assert _visible(app, "#decision-hint")
        assert "Decision: INCONCLUSIVE" in "\n".join(lines_of(app))


@SIZES
async def test_a_finished_runs_log_says_its_outcome_and_what_comes_next(size) -> None:
    """The log screen of a run that ended: the title is the outcome (not the question it was
    started with) and, once the runbook was read again after the end, the last line is the
    next stage as every action's output says it, with the key that runs it here."""
    from seat_console.tui.messages import RunFinished
    from seat_console.widgets.runlog import RunLogScreen

    after = recorded_runbook(5)   # the swap done: the probe comes next
    reads: list[datetime] = []

    def reader(_app):
        reads.append(datetime.now(UTC))
        return replace(after, read_at=reads[-1])

    app = SeatConsoleApp(default_loaded(), interval=3600.0,
                         panels=[(lambda _l: CountingSource(), CountingPanel)],
                         clock=FakeClock(), age_tick_s=3600.0, watch_terminal=False,
                         runbook_reader=reader)
    async with app.run_test(size=size) as pilot:
        await wait_for(pilot, lambda: app.runbook_reads >= 1, "the first runbook read")
        ctl = app.runbooks
        ctl.title, ctl.lines, ctl.running = "Put the candidate in the seat", {}, "swap"
        ctl.open_log()
        await wait_for(pilot, lambda: isinstance(app.screen, RunLogScreen)
                       and "Put the candidate in the seat" in flat(screen_text(app)),
                       "the log screen, titled with the question")
        res = SimpleNamespace(ok=True, remaining=(), describe=lambda: (
            "swap: done — the candidate holds the seat (seat down 3.1 s)"))
        n = app.runbook_reads
        ctl.finished(RunFinished("swap", res))
        await wait_for(pilot, lambda: app.runbook_reads > n
                       and "next: probe" in flat(screen_text(app)),
                       "the next line after a read begun after the end")
        text = flat(screen_text(app))
        assert "swap: done — the candidate holds the seat" in text
        assert "Put the candidate in the seat" not in text   # the question is gone
        line = rb.tui_next_line(after, app.key_of)
        assert line.startswith("next: probe — `seat-console probe`") and line.endswith("here: P")
        assert ctl.lines["next"] == line and ctl.next_after is None
        await pilot.press("escape")
        await wait_for(pilot, lambda: not isinstance(app.screen, RunLogScreen), "closed")
        ctl.open_log()   # reopened: the next line is still its last
        await wait_for(pilot, lambda: isinstance(app.screen, RunLogScreen)
                       and "next: probe" in flat(screen_text(app)), "reopened, next line kept")
        assert "swap: done — the candidate holds the seat" in flat(screen_text(app))


def test_the_next_line_names_the_runbook_screen_for_a_keyless_stage() -> None:
    state = recorded_runbook(0)   # fit: no key of its own
    keys = {"runbook": "g"}.get
    assert rb.tui_next_line(state, keys).endswith(" · here: g, then Enter")
    assert " · here" not in rb.tui_next_line(state, {}.get)   # nothing runs it here
    assert rb.tui_next_line(recorded_runbook(len(STAGES), next_stage=None), keys).startswith(
        "next: nothing")


def test_the_strip_counts_the_sources_it_could_not_read_in_words() -> None:
    """It said "⚠ 2 unread", read as unread messages; it counts sources not read."""
    two = replace(recorded_runbook(2), problems=("docker: who holds the seat cannot be read",
                                                 "the node's hold leases cannot be read"))
    assert "⚠ 2 sources not read" in render_strip(two, 200, {}.get).plain
    one = replace(two, problems=two.problems[:1])
    assert "⚠ 1 source not read" in render_strip(one, 200, {}.get).plain
    assert "not read" not in render_strip(recorded_runbook(2), 200, {}.get).plain
    # and where they are named, in words: the runbook screen's key (as remapped)
    assert "⚠ 2 sources not read (g: which)" in render_strip(
        two, 200, {"runbook": "g"}.get).plain
    # narrow, the words go but the count stays (the second trial: gone at 80 columns)
    for width in (60, 70, 80):
        narrow = render_strip(two, width, {"runbook": "g"}.get).plain
        assert "⚠2" in narrow or "⚠ 2 sources not read" in narrow, (width, narrow)
