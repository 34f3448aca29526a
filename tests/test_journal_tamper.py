"""Journal tampering a naive check misses (issue 22): a row edited *with its own hash
recomputed* (only the next row's ``prev_hash`` link tells), the *last* row rewritten the same
way (only the head record tells), and a credential-looking key redacted although its value
was never registered as a secret."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from seat_console.actions.journal import Journal, row_hash, scrub


@pytest.fixture
def journal(tmp_path: Path):
    j = Journal(tmp_path / "j.sqlite3", user="tester", host="box")
    yield j
    j.close()


def _three(journal: Journal) -> None:
    for k in ("start", "begin", "end"):
        journal.append(run_id="r1", runbook="hold", kind=k, step="s" if k == "begin" else "",
                       outcome="failed" if k == "end" else "")
    assert journal.verify().ok


def _rewrite(path: Path, seq: int, outcome: str) -> None:
    """Edit row ``seq``'s outcome and store the hash recomputed from the edited content (what a
    careful forger does), bypassing the append-only triggers."""
    db = sqlite3.connect(path)
    db.row_factory = sqlite3.Row
    db.executescript("DROP TRIGGER entries_no_update; DROP TRIGGER entries_no_delete;")
    row = dict(db.execute("SELECT * FROM entries WHERE seq = ?", (seq,)).fetchone())
    row["outcome"] = outcome
    h = row_hash(row["prev_hash"], row)   # the documented rule (operator included when set)
    db.execute("UPDATE entries SET outcome = ?, hash = ? WHERE seq = ?", (outcome, h, seq))
    db.commit()
    db.close()


def test_a_row_edited_with_its_own_hash_recomputed_is_named_by_the_next_link(
        journal: Journal) -> None:
    _three(journal)
    _rewrite(journal.path, 2, "done")
    rep = journal.verify()
    assert not rep.ok
    assert rep.bad_seqs == (3,)            # row 2's own hash matches; row 3's link does not
    assert "row 3: prev_hash does not match row 2's hash" in rep.problems[0]
    assert not any("row 2 " in p and "content does not match" in p for p in rep.problems)


def test_a_rewritten_last_row_is_named_by_the_head_record(journal: Journal) -> None:
    _three(journal)
    _rewrite(journal.path, 3, "done")      # no next row to link: only the head can tell
    rep = journal.verify()
    assert not rep.ok and rep.rows == 3 and rep.bad_seqs == (3,)
    assert rep.problems == ("row 3: hash does not match the head record (the end of the chain "
                            "was rewritten)",)


@pytest.mark.parametrize("key", ["token", "api_key", "Authorization", "password",
                                 "X-Auth-Token", "client_secret"])
def test_a_credential_key_is_redacted_without_registering_its_value(journal: Journal,
                                                                    key: str) -> None:
    assert scrub({key: "v4lue-never-registered", "note": "kept"}) == {
        key: "<redacted>", "note": "kept"}
    journal.append(run_id="r", runbook="x", kind="start",
                   inputs={"auth": {key: "v4lue-never-registered"}})
    raw = journal.path.read_bytes() + (journal.path.parent / "j.sqlite3-wal").read_bytes()
    assert b"v4lue-never-registered" not in raw
    assert journal.entries()[0].inputs == {"auth": {key: "<redacted>"}}


def test_a_secret_inside_a_longer_secret_leaves_no_tail() -> None:
    assert scrub("x hunter2-and-more y", ["hunter2", "hunter2-and-more"]) == "x <redacted> y"
