"""The runbook engine and the journal, on a fake node held in a dict (no lab needed).

The fake "node" is a plain dict of switches; each step flips one and reads it back. That is the
engine's own logic under test (order, undo in reverse, what remains, journal rows); the real
node is exercised by tests/test_hold_lab.py.
"""

from __future__ import annotations

import json
import sqlite3
import threading
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from seat_console.actions.journal import GENESIS, Journal, scrub
from seat_console.core.paths import ENV_STATE_DIR, journal_path
from seat_console.actions.runbook import (
    Check,
    Event,
    Runbook,
    Step,
    StepError,
    facts_from_rows,
    in_flight,
)


def switch(node: dict, key: str, *, fail_apply: bool = False, fail_verify: bool = False,
           fail_undo: bool = False, skip: bool = False) -> Step:
    def check(ctx):
        if skip or node.get(key):
            return Check(False, f"skip {key}: already on")
        return Check(True, f"turn {key} on")

    def apply(ctx):
        if fail_apply:
            raise StepError(f"cannot turn {key} on", output="tail of output")
        node[key] = True
        ctx.facts[key] = "on"
        return f"{key} on"

    def verify(ctx):
        if fail_verify or not node.get(key):
            raise StepError(f"{key} reads back off")
        return f"{key} reads back on"

    def undo(ctx):
        if fail_undo:
            raise StepError(f"{key} will not turn off")
        node.pop(key, None)
        return f"{key} off again"

    return Step(name=f"turn {key} on", check=check, apply=apply, verify=verify, undo=undo,
                manual=f"turn {key} off by hand")


@pytest.fixture
def journal(tmp_path: Path) -> Journal:
    j = Journal(tmp_path / "j.sqlite3", user="tester", host="box")
    yield j
    j.close()


def test_all_steps_done_and_journaled(journal: Journal) -> None:
    node: dict = {}
    events: list[Event] = []
    rb = Runbook("demo", [switch(node, "a"), switch(node, "b")], journal=journal,
                 inputs={"ttl_s": 10}, observer=events.append)
    res = rb.run()
    assert res.ok and res.outcome == "done" and node == {"a": True, "b": True}
    kinds = [(e.kind, e.step) for e in journal.entries(run_id=rb.run_id)]
    assert kinds == [("start", ""), ("begin", "turn a on"), ("apply", "turn a on"),
                     ("verify", "turn a on"), ("begin", "turn b on"), ("apply", "turn b on"),
                     ("verify", "turn b on"), ("end", "")]
    assert [e.kind for e in events][0] == "start" and events[-1].kind == "end"
    facts = dict(journal.entries()[-1].facts)
    from seat_console.actions.runner_id import RUNNER, runner_identity
    assert facts.pop(RUNNER) == runner_identity()     # who runs it, from the start row on
    assert facts == {"a": "on", "b": "on"}
    assert journal.entries()[0].facts.get(RUNNER) == runner_identity()
    assert not journal.unfinished()
    assert journal.verify().ok


def test_failure_undoes_in_reverse(journal: Journal) -> None:
    node: dict = {}
    rb = Runbook("demo", [switch(node, "a"), switch(node, "b"), switch(node, "c",
                                                                      fail_verify=True)],
                 journal=journal)
    res = rb.run()
    assert res.outcome == "undone" and node == {}
    assert "c reads back off" in (res.error or "")
    undos = [e.step for e in journal.entries(run_id=rb.run_id, kind="undo")]
    assert undos == ["turn c on", "turn b on", "turn a on"]
    assert [s.status for s in res.steps] == ["undone", "undone", "undone"]


def test_failed_undo_says_what_remains_and_the_fix(journal: Journal) -> None:
    node: dict = {}
    rb = Runbook("demo", [switch(node, "a", fail_undo=True), switch(node, "b", fail_apply=True)],
                 journal=journal)
    res = rb.run()
    assert res.outcome == "partial" and node == {"a": True}
    assert res.remaining == ("turn a on: a will not turn off",)
    assert res.manual == ("turn a off by hand",)
    text = res.describe()
    assert "still changed: turn a on" in text and "fix by hand: turn a off by hand" in text
    fail = journal.entries(run_id=rb.run_id, kind="fail")[0]
    assert fail.output == "tail of output"


def test_skip_is_not_undone_and_first_precondition_failure_refuses(journal: Journal) -> None:
    node = {"a": True}
    res = Runbook("demo", [switch(node, "a"), switch(node, "b")], journal=journal).run()
    assert res.ok and [s.status for s in res.steps] == ["skipped", "done"]

    def refuse(ctx):
        raise StepError("node unreachable")

    bad = Step("probe", check=refuse, apply=lambda c: None, verify=lambda c: None)
    res = Runbook("demo", [bad, switch(node, "c")], journal=journal).run()
    assert res.outcome == "refused" and "c" not in node
    assert "nothing was changed" in res.describe()


def test_continue_policy_runs_the_rest(journal: Journal) -> None:
    node: dict = {}
    res = Runbook("release", [switch(node, "a", fail_apply=True), switch(node, "b")],
                  journal=journal, policy="continue").run()
    assert res.outcome == "partial" and node == {"b": True}
    assert res.remaining == ("turn a on: not done (cannot turn a on)",)


def test_plan_reads_state_and_changes_nothing(journal: Journal) -> None:
    node = {"a": True}
    rb = Runbook("demo", [switch(node, "a"), switch(node, "b")], journal=journal)
    plan = rb.plan()
    assert plan.text_lines() == ["– skip a: already on", "• turn b on"]
    assert node == {"a": True} and journal.entries() == []
    assert [p.step for p in plan.changes] == ["turn b on"]


def test_stop_request_lets_the_step_finish_then_undoes(journal: Journal) -> None:
    node: dict = {}
    gate, release = threading.Event(), threading.Event()
    slow = switch(node, "a")
    inner = slow.apply

    def apply(ctx):
        gate.set()
        release.wait(5)
        return inner(ctx)

    slow.apply = apply
    rb = Runbook("demo", [slow, switch(node, "b")], journal=journal)
    out: list = []
    t = threading.Thread(target=lambda: out.append(rb.run()))
    t.start()
    assert gate.wait(5)
    assert in_flight() == [rb] and rb.current_step == "turn a on"
    rb.request_stop()
    release.set()
    t.join(5)
    res = out[0]
    assert res.outcome == "undone" and node == {}
    assert "stop requested" in (res.error or "")
    assert in_flight() == []


def test_crash_recovery_undo_and_complete(journal: Journal) -> None:
    node: dict = {}
    rb = Runbook("demo", [switch(node, "a"), switch(node, "b")], journal=journal)
    # simulate a console killed inside step b's apply: rows up to b's begin, no end
    rb._row("start", outcome="started")
    rb.ctx.facts["a"] = "on"
    node["a"] = True
    for kind in ("begin", "apply", "verify"):
        rb._row(kind, "turn a on")
    rb._row("begin", "turn b on")
    node["b"] = True
    (rows,) = journal.unfinished()
    assert facts_from_rows(rows) == {"a": "on"}
    res = Runbook("demo", [switch(node, "a"), switch(node, "b")], journal=journal,
                  run_id=rb.run_id).finish_from_journal(rows, "undo")
    assert res.outcome == "undone" and node == {}
    assert not journal.unfinished()
    # the same crash, completed instead
    rb2 = Runbook("demo", [switch(node, "a"), switch(node, "b")], journal=journal)
    rb2._row("start")
    node["a"] = True
    for kind in ("begin", "apply", "verify"):
        rb2._row(kind, "turn a on")
    (rows,) = journal.unfinished()
    res = Runbook("demo", [switch(node, "a"), switch(node, "b")], journal=journal,
                  run_id=rb2.run_id).finish_from_journal(rows, "complete")
    assert res.ok and node == {"a": True, "b": True}
    assert not journal.unfinished() and journal.verify().ok


# -- the journal -------------------------------------------------------------------------------
def test_state_dir_override_and_default(tmp_path: Path) -> None:
    assert journal_path({ENV_STATE_DIR: str(tmp_path)}) == tmp_path / "journal.sqlite3"
    assert journal_path({}).name == "journal.sqlite3"
    assert "seat-console" in str(journal_path({}))


def test_wal_and_append_only(journal: Journal) -> None:
    journal.append(run_id="r", runbook="x", kind="start")
    db = sqlite3.connect(journal.path)
    assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    with pytest.raises(sqlite3.DatabaseError, match="append-only"):
        db.execute("UPDATE entries SET outcome = 'x'")
    with pytest.raises(sqlite3.DatabaseError, match="append-only"):
        db.execute("DELETE FROM entries")
    db.close()


def _tamper(path: Path, sql: str) -> None:
    db = sqlite3.connect(path)
    db.executescript("DROP TRIGGER entries_no_update; DROP TRIGGER entries_no_delete;" + sql)
    db.close()


def _three(journal: Journal) -> None:
    for k in ("start", "begin", "end"):
        journal.append(run_id="r1", runbook="hold", kind=k, step="s" if k == "begin" else "")
    assert journal.entries()[0].prev_hash == GENESIS
    assert journal.verify().ok and journal.verify().rows == 3


def test_verify_names_an_edited_row(journal: Journal) -> None:
    _three(journal)
    _tamper(journal.path, "UPDATE entries SET outcome = 'done' WHERE seq = 2;")
    rep = journal.verify()
    assert not rep.ok and rep.bad_seqs == (2,)
    assert "row 2" in rep.problems[0] and "edited" in rep.problems[0]


def test_verify_names_a_deleted_row(journal: Journal) -> None:
    _three(journal)
    _tamper(journal.path, "DELETE FROM entries WHERE seq = 2;")
    rep = journal.verify()
    assert not rep.ok and rep.bad_seqs == (3,)
    assert "row 2 missing" in rep.problems[0]


def test_verify_finds_the_last_row_deleted_only_by_count_so_it_checks_swaps(
        journal: Journal) -> None:
    _three(journal)
    _tamper(journal.path, "UPDATE entries SET seq = 10 WHERE seq = 2; "
                          "UPDATE entries SET seq = 2 WHERE seq = 3; "
                          "UPDATE entries SET seq = 3 WHERE seq = 10;")
    rep = journal.verify()
    assert not rep.ok and 2 in rep.bad_seqs


def test_secrets_never_written(journal: Journal) -> None:
    journal.add_secrets(["hunter2-pw"])
    journal.append(run_id="r", runbook="x", kind="start",
                   inputs={"password": "p4ss", "auth": {"Authorization": "Bearer abc"},
                           "note": "pw is hunter2-pw"}, output="curl -u u:hunter2-pw ...")
    raw = journal.path.read_bytes() + (journal.path.parent / "j.sqlite3-wal").read_bytes()
    for s in (b"p4ss", b"Bearer abc", b"hunter2-pw"):
        assert s not in raw
    e = journal.entries()[0]
    assert e.inputs["password"] == "<redacted>" and "<redacted>" in e.output


@settings(max_examples=60, deadline=None)
@given(st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=20),
                    lambda c: st.lists(c, max_size=4) | st.dictionaries(st.text(max_size=8), c,
                                                                         max_size=4),
                    max_leaves=20))
def test_scrub_keeps_json_and_drops_the_secret(value) -> None:
    out = scrub({"token": "s3cr3t-value", "v": value}, ["s3cr3t-value"])
    text = json.dumps(out)
    assert "s3cr3t-value" not in text
    assert out["token"] == "<redacted>"


def test_since_filter(journal: Journal) -> None:
    from datetime import UTC, datetime, timedelta

    old = datetime.now(UTC) - timedelta(days=2)
    journal.append(run_id="r", runbook="x", kind="start", at=old)
    journal.append(run_id="r", runbook="x", kind="end")
    assert [e.kind for e in journal.entries(since=old + timedelta(days=1))] == ["end"]


# -- the head anchor (rows cut from the end) ----------------------------------------------------
def test_verify_names_rows_deleted_from_the_end(journal: Journal) -> None:
    for i in range(5):
        journal.append(run_id="r1", runbook="hold", kind="begin", step=f"s{i}")
    assert journal.verify().ok
    _tamper(journal.path, "DELETE FROM entries WHERE seq >= 3;")
    rep = journal.verify()
    assert not rep.ok and rep.rows == 2 and rep.bad_seqs == (3,)
    assert "rows 3–5 missing after row 2" in rep.problems[0]


def test_verify_names_one_row_deleted_from_the_end_and_a_rewritten_end(journal: Journal) -> None:
    _three(journal)
    _tamper(journal.path, "DELETE FROM entries WHERE seq = 3;")
    rep = journal.verify()
    assert not rep.ok and "row 3 missing after row 2" in rep.problems[0]


def test_verify_reports_a_missing_head_file(journal: Journal) -> None:
    from seat_console.actions.journal import head_path, read_head

    _three(journal)
    assert read_head(journal.path) == (3, journal.entries()[-1].hash)
    head_path(journal.path).unlink()
    rep = journal.verify()
    assert not rep.ok and "head record" in rep.problems[0] and "missing" in rep.problems[0]


def test_head_only_moves_forward(journal: Journal) -> None:
    from seat_console.actions.journal import _write_head, read_head

    _three(journal)
    _write_head(journal.path, 1, journal.entries()[0].hash)  # a late writer
    assert read_head(journal.path)[0] == 3
    assert journal.verify().ok
