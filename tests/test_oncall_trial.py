"""What a first-time on-call engineer tripped over doing one seat swap from the runbook screen
on the lab (120×40, tmux), each pinned here:

* the probe's preflight named the hold's end as Python prints a datetime
  (``expires 2026-12-05 21:11:07+00:00``), where every other screen says ``…T21:11:07Z``;
* the runbook screen's decide row and the decision's choices cut a long answer mid-word
  (``… (no decode time the cl``), reading as the whole answer: a cut now ends with ``…``;
* for the first seconds after start the Containers panel said ``events DISCONNECTED`` (bold
  red) while docker's event stream was still connecting: it says ``events connecting…``;
  a stream that was lost still says DISCONNECTED;

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
from app_fixtures import default_loaded
from screen_fixtures import flat, screen_text

from seat_console.node.docker import EventStreamStatus
from seat_console.sources.containers import ContainersReading, ContainerState
from seat_console.widgets.services import ContainersPanel

NOW = datetime(2026, 12, 5, 20, 10, 0, tzinfo=UTC)


@pytest.fixture(autouse=True)
def _state(tmp_path, monkeypatch):
    monkeypatch.setenv("SEAT_CONSOLE_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.setenv("SEAT_CONSOLE_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("TZ", "UTC")


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
