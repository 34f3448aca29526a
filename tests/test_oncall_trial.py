"""What a first-time on-call engineer tripped over doing one seat swap from the runbook screen
on the lab (120×40, tmux), each pinned here:

* the probe's preflight named the hold's end as Python prints a datetime
  (``expires 2026-12-05 21:11:07+00:00``), where every other screen says ``…T21:11:07Z``;
* the runbook screen's decide row and the decision's choices cut a long answer mid-word
  (``… (no decode time the cl``), reading as the whole answer: a cut now ends with ``…``;
* for the first seconds after start the Containers panel said ``events DISCONNECTED`` (bold
  red) while docker's event stream was still connecting: it says ``events connecting…``;
  a stream that was lost still says DISCONNECTED;
* the restore / release confirmation told the engineer to type
  ``seat-console restore --defer UNIT=WHEN`` beside its own "Defer 3 to 21:17Z" button, and
  said "the others start now" when every stopped timer was deferred; the run's log repeated
  the CLI advice after the choice was made.

Pilot tests over the app without the lab (:mod:`app_fixtures`), and the journal in a temporary
state dir."""

from __future__ import annotations

import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import SimpleNamespace

import pytest
from textual.app import App, ComposeResult

sys.path.insert(0, str(Path(__file__).parent))
from app_fixtures import CountingPanel, CountingSource, FakeClock, default_loaded
from screen_fixtures import flat, screen_text, wait_for

from seat_console.actions.runbook import Plan, PlanLine
from seat_console.node.docker import EventStreamStatus
from seat_console.sources.containers import ContainersReading, ContainerState
from seat_console.tui import runbook as rb
from seat_console.tui.app import SeatConsoleApp
from seat_console.tui.messages import PlanReady
from seat_console.widgets.confirm import ConfirmScreen
from seat_console.widgets.services import ContainersPanel

NOW = datetime(2026, 12, 5, 20, 10, 0, tzinfo=UTC)

# the release plan's line for a timer that fires at once, as the lab's restore showed it
FIRING_LINE = (
    "start seat-conformance-smoke.timer (inactive since the hold) ⚠ seat-conformance-smoke."
    "timer fires at once when started: OnUnitActiveSec=2min elapsed at 2026-12-05T20:11:23Z "
    "(after seat-conformance-smoke.service last started, 2026-12-05T20:09:23Z) — its service "
    "runs right after the start (to keep it stopped until a quiet moment: `seat-console "
    "restore --defer seat-conformance-smoke.timer=WHEN`)")


@pytest.fixture(autouse=True)
def _state(tmp_path, monkeypatch):
    monkeypatch.setenv("SEAT_CONSOLE_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.setenv("SEAT_CONSOLE_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("TZ", "UTC")


def _app() -> SeatConsoleApp:
    return SeatConsoleApp(default_loaded(), interval=3600.0,
                          panels=[(lambda _l: CountingSource(), CountingPanel)],
                          clock=FakeClock(), age_tick_s=3600.0, watch_terminal=False)


# -- the probe's preflight: the hold's end in UTC with Z ----------------------------------------
def test_the_probe_preflight_names_the_hold_end_as_every_screen_does(monkeypatch) -> None:
    from seat_console.actions import probe_journal

    end = datetime(2026, 12, 5, 21, 11, 7, 512000, tzinfo=UTC)
    monkeypatch.setattr(probe_journal, "active_hold",
                        lambda journal: SimpleNamespace(silence_id="e8b4bec1", expires_at=end))
    info = probe_journal.hold_info()
    assert info.active is True and info.expires_at == end
    assert info.detail == "hold active (silence e8b4bec1, expires 2026-12-05T21:11:07Z)"


# -- the decide row: a cut answer says it was cut -----------------------------------------------
def test_a_long_decide_answer_is_cut_with_an_ellipsis_on_the_runbook_screen() -> None:
    from seat_console.actions import read_stages
    from seat_console.actions.journal import Journal
    from seat_console.actions.stages import read_runbook
    from seat_console.tui.stage_flows import DecideRun
    from seat_console.widgets.decision import questions_of
    from seat_console.widgets.runbook_screen import stage_rows

    long = ("cannot tell, because throughput (single-stream): 2 pair(s) cannot reach p ≤ 0.05; "
            + "TPOT undefined for requests whose output all arrived in one network read; " * 6
            + "THE END")
    questions = [{"question": "throughput and latency?", "answer": long, "critical": False},
                 {"question": "fits?", "answer": "yes: it fits", "critical": True}]
    made = read_stages.Decided(
        {"outcome": "INCONCLUSIVE", "why": "throughput and latency? cannot tell",
         "needs": "a complete, undisturbed bracket of ≥ 3 rounds", "questions": questions},
        {"decision": "INCONCLUSIVE", "bracket_id": "b1", "runs": ["r1"],
         "report_sha256": "ab" * 32, "questions": questions,
         "needs": "a complete, undisturbed bracket of ≥ 3 rounds"},
        None, ("/data/comparisons/b1",), datetime(2026, 12, 5, 20, 17, tzinfo=UTC))
    with Journal() as j:
        run = DecideRun(default_loaded(), j, None, lambda line: None)
        run._decide = lambda: made
        assert run.run().ok
        st = read_runbook(None, j).stage("decide")
    cut = next(x for x in st.details if x.startswith("throughput and latency?"))
    assert "THE END" not in cut and cut.endswith("…") and len(cut) == 300
    assert "fits? yes: it fits" in st.details                        # a short one is whole
    answer = dict(questions_of(st))["throughput and latency?"]
    assert answer.endswith("…")                                      # the decision's choices
    row = stage_rows(st, is_next=False, key_of={}.get).plain          # the runbook screen
    assert answer in row and "THE END" not in row


# -- the Containers panel while the event stream connects ---------------------------------------
class OnePanel(App):
    def __init__(self, panel: ContainersPanel) -> None:
        super().__init__()
        self.panel = panel

    def compose(self) -> ComposeResult:
        yield self.panel


def _containers(events: EventStreamStatus) -> ContainersReading:
    return ContainersReading(
        engine="unix:///lab/docker.sock", engine_version="20.10.24", api_version="1.41",
        read_at=NOW, events=events, recent_changes=(),
        containers=(ContainerState(role="resident", name="seat-resident", state="running",
                                   running=True, started_at=NOW - timedelta(minutes=6),
                                   restart_count=0),))


@pytest.mark.parametrize("compact", [True, False], ids=["compact", "full"])
@pytest.mark.parametrize("last_error,word", [
    (None, "connecting…"),
    ("the engine closed the event stream", "DISCONNECTED")], ids=["connecting", "lost"])
async def test_the_containers_panel_says_connecting_until_the_stream_first_answers(
        compact, last_error, word) -> None:
    ev = EventStreamStatus(connected=False, since=NOW, reconnects=0, last_error=last_error,
                           events_seen=0)
    panel = ContainersPanel()
    app = OnePanel(panel)
    async with app.run_test(size=(120, 40)) as pilot:
        panel.set_compact(compact)      # what the main screen does below 50 rows
        reading = _containers(ev)
        panel.show(reading, reading, NOW, now=NOW)
        await pilot.pause()
        assert panel.render_error is None, panel.render_error
        text = flat(screen_text(app))
    assert f"events{' ' if compact else ': '}{word}" in text, text
    if last_error is None:
        assert "DISCONNECTED" not in text


# -- the restore / release confirmation: the TUI's words, not the CLI's -------------------------
def _restore_plan(firing: dict[str, bool]) -> Plan:
    return Plan("restore", (PlanLine("release hold", True, FIRING_LINE),),
                facts={"forecast": {u: {"fires_at_once": f} for u, f in firing.items()}})


async def test_the_restore_confirmation_names_its_defer_button_not_a_cli_flag(
        monkeypatch) -> None:
    app = _app()
    async with app.run_test(size=(120, 40)) as pilot:
        monkeypatch.setattr(app.runbooks, "_read_plan", lambda flow: None)
        app.runbooks.plan_ready(PlanReady("restore", _restore_plan(
            {"a.timer": True, "b.timer": True, "c.timer": True})))
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmScreen)
                       and app.screen.query("#confirm-note"), "the confirmation")
        await pilot.pause()
        alt = str(app.screen.query_one("#confirm-alt-button").label)
        lines = flat(str(app.screen.query_one("#confirm-lines").render()))
        note = str(app.screen.query_one("#confirm-note").render())
    assert alt.startswith("Defer 3 to ")
    assert "--defer" not in lines and f"(“{alt}” keeps it stopped)" in lines, lines
    assert "its service runs right after the start" in lines          # the warning stays
    assert "the others" not in note and note.endswith("then start."), note


def test_the_note_keeps_the_others_when_some_stopped_timer_does_not_fire() -> None:
    _q, labels = rb.confirm_labels(rb.FLOWS["restore"], "Restore?",
                                   _restore_plan({"a.timer": True, "b.timer": False}),
                                   deferred=False)
    assert labels["note"].endswith("then starts; the others start now."), labels["note"]


def test_the_run_log_drops_the_cli_defer_advice_once_chosen() -> None:
    assert rb.defer_advice(FIRING_LINE, None).endswith("runs right after the start")
    assert rb.defer_advice("start b.timer (inactive since the hold)", None) == \
        "start b.timer (inactive since the hold)"
    release = FIRING_LINE.replace("seat-console restore", "seat-console release")
    assert rb.defer_advice(release, "Defer 1 to 21:17Z").endswith(
        "runs right after the start (“Defer 1 to 21:17Z” keeps it stopped)")
