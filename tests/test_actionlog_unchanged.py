"""The action-log source queries the journal's rows only when the journal changed (issue 11:
no per-second work while nothing changed), and still sees every write by another connection
(another console, a CLI command: a second :class:`Journal` on the same file)."""

from __future__ import annotations

import pytest

from seat_console.actions.journal import Journal
from seat_console.actions.actionlog import ActionLogReading, ActionLogSource


def _row(j: Journal, n: int) -> None:
    j.append(run_id=f"run-{n}", runbook="test", kind="start", step="", outcome=f"row {n}")
    j.append(run_id=f"run-{n}", runbook="test", kind="end", step="", outcome="done")


@pytest.fixture
def logged(tmp_path):
    """``(path, writer, source)``: a journal file with one finished run (``row 1``) written by
    ``writer``, and an action-log source on the same file; both closed after the test."""
    path = tmp_path / "journal.sqlite3"
    writer = Journal(path)
    _row(writer, 1)
    src = ActionLogSource(None, str(path))
    yield path, writer, src
    src.close()
    writer.close()


def test_an_unchanged_journal_is_not_re_read(logged):
    _path, _writer, src = logged
    first = src.read()
    assert isinstance(first, ActionLogReading)
    for _ in range(5):
        again = src.read()
        assert isinstance(again, ActionLogReading)
        assert again.recent == first.recent
    assert src.journal_reads == 1


def test_a_write_by_another_connection_is_seen_at_the_next_read(logged):
    path, writer, src = logged
    before = src.read()
    assert [r.outcome for r in before.recent] == ["row 1", "done"]
    _row(writer, 2)
    after = src.read()
    assert [r.outcome for r in after.recent][-2:] == ["row 2", "done"]
    assert src.journal_reads == 2
    unfinished_writer = Journal(path)   # a third connection: a run that never ended
    unfinished_writer.append(run_id="run-3", runbook="hold", kind="start", outcome="x")
    unfinished_writer.close()
    assert any("run-3" in u for u in src.read().unfinished)


def test_a_run_whose_console_still_runs_it_is_in_progress_not_recover(logged):
    """A run with no end row whose runner (pid, host, boot) still runs a seat_console process is
    "in progress", not "run `seat-console recover`" (the QA walk saw the Actions panel tell
    an engineer to recover a compare the same console was running); once that process is gone
    the same run asks for recover at the next read, with no journal write in between."""
    import socket
    import subprocess
    import sys

    from seat_console.actions.runner_id import _boot_id

    path, _writer, src = logged
    proc = subprocess.Popen([sys.executable, "-c", "import sys, time; time.sleep(60)",
                             "seat_console"])
    try:
        runner = {"pid": proc.pid, "host": socket.gethostname()[:255], "boot_id": _boot_id()}
        w = Journal(path)
        w.append(run_id="run-9", runbook="compare", kind="start", outcome="x",
                 facts={"runner": runner})
        w.close()
        live = src.read()
        assert not any("run-9" in u for u in live.unfinished), live.unfinished
        assert any("run-9" in u and "in progress" in u for u in live.in_progress)
    finally:
        proc.kill()
        proc.wait()
    reads = src.journal_reads
    gone = src.read()
    assert src.journal_reads == reads          # the rows were not read again
    assert any("run-9" in u and "seat-console recover" in u for u in gone.unfinished)
    assert not gone.in_progress
