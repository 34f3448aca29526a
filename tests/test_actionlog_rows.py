"""The Actions panel's journal rows: a row without a step or an outcome reads without a stray
space or colon (a QA walk read "end hold : done" for the hold runbook's end row)."""

from __future__ import annotations

from datetime import UTC, datetime

from seat_console.actions.actionlog import ActionLogReading, LogRow
from seat_console.widgets.actionlog import ActionLogPanel, row_words

NOW = datetime(2026, 12, 6, 17, 0, 0, tzinfo=UTC)


def test_row_words_leave_out_empty_parts() -> None:
    assert row_words("hold", "stop timer", "done") == "hold stop timer: done"
    assert row_words("hold", "", "done") == "hold: done"
    assert row_words("hold", "stop timer", "") == "hold stop timer"
    assert row_words("hold", "", "") == "hold"
    assert row_words("", "", "done") == "done"


def test_the_panel_shows_an_end_row_as_runbook_and_outcome() -> None:
    rows = (LogRow(seq=1, at=NOW, who="u@h", runbook="hold", kind="end", step="",
                   outcome="done"),
            LogRow(seq=2, at=NOW, who="u@h", runbook="release", kind="verify",
                   step="timers active", outcome="ok"))
    reading = ActionLogReading(path="/j", read_at=NOW, recent=rows)
    body = "\n".join(t.plain for t in ActionLogPanel().build(reading, NOW).renderables)
    assert "end       hold: done" in body, body
    assert "hold : done" not in body
    assert "verify    release timers active: ok" in body, body
