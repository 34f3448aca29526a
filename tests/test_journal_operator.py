"""Who did it (issue 30, item 8): every journal row records the operator (login, SUDO_USER, the
SSH client from SSH_CONNECTION, the tty) and, for a confirmed run, what was typed;
``seat-console journal`` shows it. A journal written before the ``operator`` column existed
still verifies (old rows: ``NULL``, hashed as before), and so does one that mixes old and new
rows; an operator edited afterwards (new row) or added to an old row is named by ``--verify``.
The parsers of outside input here (``SSH_CONNECTION``, what was typed, the ``operator`` column
of a row) get property-based tests."""

from __future__ import annotations

import hashlib
import json
import sqlite3
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from seat_console.actions import journal as jmod
from seat_console.actions import who
from seat_console.actions.journal import Journal, JournalError

OLD_COLUMNS = ("seq", "at", "user", "host", "profile_sha256", "run_id", "runbook", "kind",
               "step", "inputs", "outcome", "output", "facts")
"""The columns (and the hash rule) of a journal written before the operator column."""


def _old_journal(path: Path, n: int = 3) -> list[str]:
    """A journal as the console wrote it before this change: the old table (no ``operator``
    column), ``n`` rows hashed by the old rule (SHA-256 of prev_hash ‖ canonical JSON of the
    thirteen columns), its head record. Returns the hashes."""
    db = sqlite3.connect(path)
    db.executescript(jmod._SCHEMA)
    assert "operator" not in [r[1] for r in db.execute("PRAGMA table_info(entries)")]
    prev, hashes = jmod.GENESIS, []
    for seq in range(1, n + 1):
        row = {"seq": seq, "at": f"2026-12-01T10:00:0{seq}.000000Z", "user": "old",
               "host": "node", "profile_sha256": "", "run_id": "hold-old", "runbook": "hold",
               "kind": ["start", "begin", "end"][(seq - 1) % 3], "step": "",
               "inputs": "{}", "outcome": "done", "output": "", "facts": "{}"}
        h = hashlib.sha256((prev + json.dumps(
            {k: row[k] for k in OLD_COLUMNS}, sort_keys=True, separators=(",", ":"),
            ensure_ascii=False)).encode()).hexdigest()
        db.execute(f"INSERT INTO entries ({', '.join(OLD_COLUMNS)}, prev_hash, hash) VALUES "
                   f"({', '.join('?' * 15)})", (*(row[k] for k in OLD_COLUMNS), prev, h))
        prev = h
        hashes.append(h)
    db.commit()
    db.close()
    jmod._write_head(path, n, prev)
    return hashes


OP = {"login": "alice", "sudo_user": "bob", "ssh_client": "203.0.113.5 53122",
      "tty": "/dev/pts/3"}


def test_an_old_journal_still_verifies_and_takes_new_rows_with_their_operator(tmp_path) -> None:
    path = tmp_path / "journal.sqlite3"
    _old_journal(path)
    j = Journal(path, operator=dict(OP))
    rep = j.verify()
    assert rep.ok and rep.rows == 3, rep.problems             # old rows: NULL, old hash rule
    assert [e.operator for e in j.entries()] == [None, None, None]
    j.confirmed("typed", "seat-node")
    j.append(run_id="swap-1", runbook="swap", kind="start", outcome="started")
    rep = j.verify()
    assert rep.ok and rep.rows == 4, rep.problems             # a mixed journal verifies
    new = j.entries()[-1]
    assert new.operator == {**OP, "confirmed": {"how": "typed", "typed": "seat-node"}}
    assert new.to_json()["operator"] == new.operator
    j.close()
    with Journal(path) as again:                               # reopened: nothing migrates twice
        assert again.verify().ok


def _edit(path: Path, seq: int, operator: str | None) -> None:
    db = sqlite3.connect(path)
    db.executescript("DROP TRIGGER entries_no_update;")
    db.execute("UPDATE entries SET operator = ? WHERE seq = ?", (operator, seq))
    db.commit()
    db.close()


@pytest.mark.parametrize("seq, value", [
    (4, json.dumps({**OP, "login": "mallory"}, sort_keys=True, separators=(",", ":"))),
    (4, None),                                   # the operator removed from a new row
    (2, '{"login":"mallory"}')])                 # an operator added to an old row
def test_an_edited_operator_is_named_by_verify(tmp_path, seq, value) -> None:
    path = tmp_path / "journal.sqlite3"
    _old_journal(path)
    with Journal(path, operator=dict(OP)) as j:
        j.append(run_id="swap-1", runbook="swap", kind="start", outcome="started")
        j.append(run_id="swap-1", runbook="swap", kind="end", outcome="done")
    _edit(path, seq, value)
    with Journal(path) as j:
        rep = j.verify()
    assert not rep.ok and seq in rep.bad_seqs
    assert any(p.startswith(f"row {seq} (") and "content does not match its hash" in p
               for p in rep.problems), rep.problems


def test_the_operator_is_read_from_the_environment() -> None:
    op = who.operator_now({"SUDO_USER": "bob", "SSH_CONNECTION": "203.0.113.5 53122 10.0.0.1 22"})
    assert op["sudo_user"] == "bob" and op["ssh_client"] == "203.0.113.5 53122"
    assert op["login"] and set(op) == {"login", "sudo_user", "ssh_client", "tty"}
    bare = who.operator_now({})
    assert bare["sudo_user"] is None and bare["ssh_client"] is None


@pytest.mark.parametrize("value, want", [
    ("203.0.113.5 53122 10.0.0.1 22", "203.0.113.5 53122"),
    ("fe80::1%eth0 40000 fe80::2 22", "fe80::1%eth0 40000"),
    ("203.0.113.5 53122 10.0.0.1", None), ("not-an-ip 1 2 3", None),
    ("203.0.113.5 0 10.0.0.1 22", None), ("203.0.113.5 70000 10.0.0.1 22", None),
    ("203.0.113.5 ٣ 10.0.0.1 22", None), ("", None), (None, None)])
def test_ssh_connection_is_parsed_or_dropped(value, want) -> None:
    assert who.ssh_client(value) == want


@settings(max_examples=300, deadline=200)
@given(st.one_of(st.none(), st.text(max_size=300),
                 st.builds(lambda a, b, c, d: f"{a} {b} {c} {d}", st.ip_addresses().map(str),
                           st.integers(-5, 70000), st.ip_addresses().map(str),
                           st.integers(0, 70000))))
def test_ssh_client_never_raises_and_keeps_only_a_valid_address(value) -> None:
    got = who.ssh_client(value)
    if got is not None:
        ip, port = got.split(" ")
        assert 1 <= int(port) <= 65535 and got in " ".join(value.split())


@settings(max_examples=200, deadline=200)
@given(st.text(max_size=600))
def test_what_was_typed_is_kept_printable_and_bounded(typed) -> None:
    c = who.confirmation("typed", typed)
    assert c["how"] == "typed" and len(c["typed"]) <= who.MAX_FIELD
    assert c["typed"].isprintable() or c["typed"] == ""


def test_an_unknown_confirmation_is_refused() -> None:
    with pytest.raises(ValueError, match="confirmation 'maybe'"):
        who.confirmation("maybe")


@settings(max_examples=150, deadline=None)
@given(st.one_of(st.text(max_size=60), st.just("5"), st.just("[]"), st.just('"x"'),
                 st.just("{"), st.just('{"login": "x"}')))
def test_a_garbled_operator_column_is_named_by_its_row(tmp_path_factory, text) -> None:
    path = tmp_path_factory.mktemp("j") / "journal.sqlite3"
    with Journal(path, operator=dict(OP)) as j:
        j.append(run_id="r", runbook="hold", kind="start")
    _edit(path, 1, text)
    with Journal(path) as j:
        rows = j.entries()          # a bad row is skipped and named, never a crash
        if rows:
            assert isinstance(rows[0].operator, dict) and not j.skipped
        else:
            assert [b.seq for b in j.skipped] == [1] and "operator" in j.skipped[0].problem


# -- the confirmation reaches the rows; `journal` shows who ------------------------------------
@pytest.mark.parametrize("yes, answer, want", [
    (True, None, {"how": "--yes", "typed": None}), (False, "y", {"how": "y", "typed": "y"})])
def test_the_confirmation_goes_in_the_rows(tmp_path, monkeypatch, yes, answer, want) -> None:
    import builtins
    import sys

    from seat_console.actions.runbook import Plan, PlanLine
    from seat_console.commands import action_common as ac

    monkeypatch.setattr(sys.stdin, "isatty", lambda: True, raising=False)
    monkeypatch.setattr(builtins, "input", lambda prompt="": answer)
    j = Journal(tmp_path / "j.sqlite3", operator=dict(OP))
    plan = Plan("hold", (PlanLine("stop a.timer", True, "stop a.timer"),))
    assert ac.confirm(plan, "hold", yes, "seat-console hold", j) is None
    row = j.append(run_id="hold-1", runbook="hold", kind="start")
    assert row.operator == {**OP, "confirmed": want}


def test_the_typed_seat_name_goes_in_the_rows(tmp_path, monkeypatch) -> None:
    import builtins
    import sys

    from seat_console.actions.runbook import Plan, PlanLine
    from seat_console.commands.swap_cmd import typed_confirm

    monkeypatch.setattr(sys.stdin, "isatty", lambda: True, raising=False)
    monkeypatch.setattr(builtins, "input", lambda prompt="": " seat-node ")
    j = Journal(tmp_path / "j.sqlite3", operator=dict(OP))
    plan = Plan("swap", (PlanLine("stop resident", True, "stop seat-resident"),))
    assert typed_confirm(plan, "swap", "seat-node", False, "seat-console swap", j) is None
    row = j.append(run_id="swap-1", runbook="swap", kind="start")
    assert row.operator["confirmed"] == {"how": "typed", "typed": "seat-node"}


def test_seat_console_journal_shows_who(tmp_path, monkeypatch, capsys) -> None:
    from seat_console.cli import main

    state = tmp_path / "state"
    state.mkdir()
    monkeypatch.setenv("SEAT_CONSOLE_STATE_DIR", str(state))
    path = state / "journal.sqlite3"
    _old_journal(path, n=1)
    with Journal(path, operator=dict(OP)) as j:
        j.confirmed("typed", "seat-node")
        j.append(run_id="swap-1", runbook="swap", kind="start", outcome="started")
        j.append(run_id="swap-1", runbook="swap", kind="end", outcome="done")
    assert main(["journal"]) == 0
    out = capsys.readouterr().out.splitlines()
    by = [line for line in out if line.strip().startswith("by ")]
    assert by == ["       by alice (sudo from bob) ssh 203.0.113.5 53122 /dev/pts/3; typed "
                  "'seat-node'"]                        # once for the run; none for the old row
    assert main(["journal", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)["rows"]
    assert rows[0]["operator"] is None and rows[1]["operator"]["login"] == "alice"
    assert main(["journal", "--verify"]) == 0
    capsys.readouterr()
    # nothing since: the line names the journal it read (a console's state dir is per user)
    assert main(["journal", "--since", "2099-01-01T00:00Z"]) == 0
    assert capsys.readouterr().out == f"no rows in {path} since 2099-01-01 00:00:00Z\n"
