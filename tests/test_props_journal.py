"""Property tests: the journal read back with arbitrary row contents (issue 31).

The journal is a SQLite file anyone with the ``sqlite3`` shell can edit, and SQLite keeps any
value in any column: a BLOB, NULL or an integer where text belongs, ``inputs`` / ``facts`` that
are JSON lists, strings or 100,000 levels deep, a hold whose facts lack their lease. Before the
fix such rows were accepted, then crashed ``seat-console journal`` (``--json``: bytes are not
JSON), the hold's attribution and ``hold --status`` (``.get`` on a list, ``h["lease"]``), or
raised :class:`RecursionError`. The oracle: every reader gives output or the documented
:class:`~seat_console.actions.journal.JournalError` naming the file — never another exception;
a bad row is named by its ``seq`` (readers skip it, ``journal --verify`` names it); the good
rows still read; and a write of a non-object ``inputs`` / ``facts`` is refused.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import sqlite3
import tempfile
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from seat_console.actions import compare as compare_mod
from seat_console.actions import hold as hold_mod
from seat_console.actions import recover, swap as swap_mod
from seat_console.actions.actionlog import ActionLogSource
from seat_console.actions.journal import (
    _COLUMNS,
    BadRow,
    Journal,
    JournalError,
    row_hash,
    validate_row,
)
from seat_console.core.base import Unavailable

NOW = datetime(2026, 12, 5, 12, 0, tzinfo=UTC)

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=10),
    lambda kids: st.lists(kids, max_size=3) | st.dictionaries(st.text(max_size=8), kids,
                                                              max_size=3),
    max_leaves=10)

_HOLD = {"hold_id": "h-1", "lease": "seat-lease-h-1", "expires_at": "2026-12-05T13:00:00Z",
         "stopped": ["remediate.timer"], "silence_id": "s-1", "reason": "probe",
         "timers_before": {"remediate.timer": "active"}}


def _mutated_hold(draw: Any) -> Any:
    h = dict(_HOLD)
    for k in draw(st.lists(st.sampled_from(sorted(_HOLD)), max_size=3, unique=True)):
        if draw(st.booleans()):
            del h[k]
        else:
            h[k] = draw(json_values)
    return h


@st.composite
def json_text(draw: Any, clean: bool = False) -> Any:
    """What a row's ``inputs`` / ``facts`` column may hold after an edit (``clean``: a JSON
    object, its values hostile)."""
    c = draw(st.integers(5, 6) if clean else st.integers(0, 9))
    if c == 0:
        return draw(st.binary(max_size=20))
    if c == 1:
        return draw(st.none() | st.integers(-2**63, 2**63 - 1) | st.floats())
    if c == 2:
        n = draw(st.integers(33, 20_000))
        return "[" * n + "]" * n
    if c == 3:
        return draw(st.text(max_size=20))
    if c == 4:
        return "9" * draw(st.integers(300, 5000))
    if c in (5, 6):
        return json.dumps({"hold": _mutated_hold(draw), "acts_on": draw(json_values),
                           "breach": draw(json_values), "hold_id": draw(json_values),
                           "resident": draw(json_values)})
    return json.dumps(draw(json_values))


@st.composite
def text_value(draw: Any, real: list[str], clean: bool = False) -> Any:
    c = draw(st.integers(3, 9) if clean else st.integers(0, 9))
    if c == 0:
        return draw(st.binary(max_size=12))
    if c == 1:
        return draw(st.none() | st.integers(-2**63, 2**63 - 1) | st.floats())
    if c == 2:
        return draw(st.text(max_size=12))
    return draw(st.sampled_from(real))


TIMES = ["2026-12-05T11:59:00.000000Z", "2026-12-05T11:00:00Z", "9999-12-31T23:59:59-01:00",
         "2026-12-05T11:59:00", "not a time", ""]


@st.composite
def rows(draw: Any) -> list[dict[str, Any]]:
    out = []
    for seq in range(1, draw(st.integers(1, 8)) + 1):
        ok = draw(st.booleans())   # a row that reads: its facts' contents are what is hostile
        r = {
            "seq": seq if ok or draw(st.integers(0, 9)) else draw(st.integers(-3, 20)),
            "at": draw(text_value(TIMES[:2] if ok else TIMES)),
            "user": draw(text_value(["op"], ok)), "host": draw(text_value(["box"], ok)),
            "profile_sha256": draw(text_value([""], ok)),
            "run_id": draw(text_value(["r1", "r2", "r3"], ok)),
            "runbook": draw(text_value(["hold", "release", "extend", "swap", "compare",
                                        "restore"], ok)),
            "kind": draw(text_value(["start", "begin", "verify", "end", "interference",
                                     "undo"], ok)),
            "step": draw(text_value(["", "stop remediate.timer", "watch", "place silence"],
                                    ok)),
            "inputs": draw(json_text(ok)), "outcome": draw(text_value(["done", "ok", ""], ok)),
            "output": draw(text_value([""], ok)), "facts": draw(json_text(ok)),
            "prev_hash": draw(text_value(["0" * 64], ok)),
            "hash": draw(text_value(["0" * 64], ok))}
        if draw(st.booleans()):   # a careful forger: the row hashed as if written
            try:
                r["hash"] = row_hash(str(r["prev_hash"]), {k: r[k] for k in _COLUMNS})
            except (TypeError, ValueError):
                pass
        out.append(r)
    return out


def _write(path: Path, rs: list[dict[str, Any]], typeless: bool) -> None:
    if not typeless:
        Journal(path).close()   # this console's schema, triggers included
    db = sqlite3.connect(path)
    if typeless:   # a foreign file: the same columns, no types, no primary key
        db.execute(f"CREATE TABLE entries ({', '.join(_COLUMNS)}, prev_hash, hash)")
    cols = (*_COLUMNS, "prev_hash", "hash")
    for r in rs:
        try:
            db.execute(f"INSERT INTO entries ({', '.join(cols)}) VALUES "
                       f"({', '.join('?' * len(cols))})", tuple(r[c] for c in cols))
        except (sqlite3.Error, OverflowError):
            pass   # NOT NULL / a duplicate seq: that row is not in the file
    db.commit()
    db.close()


def _cli(path: Path, *args: str) -> tuple[int, str]:
    from seat_console.cli import main

    out, err = io.StringIO(), io.StringIO()
    old = os.environ.get("SEAT_CONSOLE_STATE_DIR")
    os.environ["SEAT_CONSOLE_STATE_DIR"] = str(path.parent)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            rc = main(["journal", *args])
    finally:
        if old is None:
            os.environ.pop("SEAT_CONSOLE_STATE_DIR", None)
        else:
            os.environ["SEAT_CONSOLE_STATE_DIR"] = old
    return rc, out.getvalue() + err.getvalue()


def _readers(j: Journal) -> None:
    """Every reader of journal rows below the fronts, as the hold, recover, compare, swap and
    the TUI's action log call them."""
    hs = hold_mod.holds(j)
    for h in hs:
        json.dumps(h.to_json(NOW), allow_nan=False)
        hold_mod.stop_times(j, h)
        attribute = hold_mod.journal_attribution(j, h, NOW)
        attribute("remediate.timer", NOW - timedelta(minutes=1))
        hold_mod.own_change(j, h, NOW)
        hold_mod.hold_breach_rows(j, h.hold_id)
        compare_mod.bracket_breaches(j, h.hold_id, "2026-12-05T10:00:00+00:00")
        hold_mod.observe(j, h, None, None, NOW)
    hold_mod.active_hold(j, NOW)
    hold_mod.current_hold(j)
    for run in j.unfinished():
        json.dumps(recover.describe(run), default=str)
        recover.describe_text(run)
    swap_mod.last_swap(j)
    from seat_console.node.attribution import JournalAttributor

    att = JournalAttributor(j.path, clock=lambda: NOW)
    try:   # the node layer's own read-only reader of the journal (docker event attribution)
        att.rows(NOW - timedelta(days=3650))
        att.attribution(["seat-resident"], NOW - timedelta(minutes=1))
    finally:
        att.close()
    reading = ActionLogSource(journal_path=str(j.path), readonly=True).read()
    assert not isinstance(reading, Unavailable) or reading.reason.startswith(
        f"journal {j.path}"), reading.reason


@settings(max_examples=100, deadline=10_000)   # three CLI runs and every reader per example
@given(rows(), st.booleans())
def test_any_row_contents_give_output_or_the_journal_error_never_a_crash(rs, typeless):
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "journal.sqlite3"
        _write(path, rs, typeless)
        rc, text = _cli(path)
        assert rc in (0, 1), text
        rc, text = _cli(path, "--json")
        if rc == 0:
            doc = json.loads(text)
            for r in doc["rows"]:
                assert isinstance(r["inputs"], dict) and isinstance(r["facts"], dict)
            assert all(isinstance(b["seq"], int | str) for b in doc["bad_rows"])
        else:
            assert rc == 1 and str(path) in text
        rc, text = _cli(path, "--verify", "--json")
        assert rc in (0, 1)
        verified = json.loads(text) if text.lstrip().startswith("{") else None
        try:
            j = Journal(path)
        except JournalError as exc:
            assert str(path) in str(exc)
            return
        try:
            good = j.entries()
            bad = j.bad_rows()
            _readers(j)
        except JournalError as exc:
            assert str(path) in str(exc)
            return
        finally:
            j.close()
        assert all(isinstance(e.inputs, dict) and isinstance(e.facts, dict) for e in good)
        assert all(isinstance(getattr(e, c), str) for e in good
                   for c in ("user", "host", "run_id", "runbook", "kind", "step", "outcome"))
        # every bad row of this console's schema is named by verify too
        if verified is not None and not typeless:
            assert {b.seq for b in bad} <= set(verified["bad_rows"]), (bad, verified)


def test_a_bad_row_is_skipped_and_named_the_good_ones_still_read(tmp_path):
    j = Journal(tmp_path / "journal.sqlite3")
    for i in range(3):
        j.append(run_id="r", runbook="hold", kind="step", step=f"s{i}", outcome="ok",
                 inputs={"i": i})
    j.close()
    db = sqlite3.connect(tmp_path / "journal.sqlite3")
    db.execute("DROP TRIGGER entries_no_update")
    db.execute("UPDATE entries SET facts = '[1, 2]' WHERE seq = 2")
    db.execute("UPDATE entries SET user = x'00ff' WHERE seq = 3")
    db.commit()
    db.close()
    j = Journal(tmp_path / "journal.sqlite3")
    try:
        assert [e.seq for e in j.entries()] == [1]
        assert j.skipped == (BadRow(2, "facts is a JSON list, not an object"),
                             BadRow(3, "user is a BLOB (or text that is not UTF-8), not text"))
        rep = j.verify()
        assert {2, 3} <= set(rep.bad_seqs)
    finally:
        j.close()
    rc, text = _cli(tmp_path / "journal.sqlite3")
    assert rc == 0 and "row 2: facts is a JSON list, not an object" in text
    assert "journal --verify" in text


@pytest.mark.parametrize("bad", [[1, 2], "text", 3, ("a", "b")])
@pytest.mark.parametrize("column", ["inputs", "facts"])
def test_a_non_object_inputs_or_facts_is_refused_on_write(tmp_path, column, bad):
    j = Journal(tmp_path / "j.sqlite3")
    try:
        with pytest.raises(JournalError, match=f"{column} must be a JSON object"):
            j.append(run_id="r", runbook="hold", kind="start", **{column: bad})
        assert j.entries() == [] and j.verify().ok
    finally:
        j.close()


def test_a_write_is_read_back_whatever_its_values(tmp_path):
    """NaN, a lone surrogate, nesting at the limit: what a write accepts, a read takes."""
    j = Journal(tmp_path / "j.sqlite3")
    try:
        deep: Any = 1
        for _ in range(31):
            deep = [deep]
        j.append(run_id="r\ud800", runbook="hold", kind="start", output="x\udcff",
                 facts={"v": float("nan"), "w": float("inf"), "d": deep})
        with pytest.raises(JournalError, match="nests deeper than 32"):
            j.append(run_id="r", runbook="hold", kind="start", facts={"d": [deep]})
        (e,) = j.entries()
        assert e.facts["v"] == "nan" and e.facts["w"] == "inf" and e.run_id == "r\ufffd"
        assert j.verify().ok and j.skipped == ()
    finally:
        j.close()


def test_validate_row_names_the_column() -> None:
    good = {"seq": 1, "at": "2026-12-05T11:00:00Z", **{c: "" for c in _COLUMNS[2:]},
            "inputs": "{}", "facts": "{}", "prev_hash": "0" * 64, "hash": "0" * 64}
    assert validate_row(good).facts == {}
    for col, v, words in [("facts", "[" * 5000 + "]" * 5000, "deeper than"),
                          ("inputs", '"x"', "JSON str, not an object"),
                          ("facts", None, "facts is NULL"), ("kind", 7, "kind is an int"),
                          ("facts", "9" * 5000, "facts"), ("at", "x", "at:")]:
        with pytest.raises(ValueError, match=words):
            validate_row({**good, col: v})
