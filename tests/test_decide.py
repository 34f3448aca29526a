"""The decide stage (issue 30): the ``decide`` journal row (CONVENTIONS: kind end, outcome
done, facts decision/bracket_id/runs/report_sha256/questions/needs), its reader, and
``seat-console decide``."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from seat_console.actions import decide as dec
from seat_console.actions.journal import Journal
from seat_console.cli import main
from seat_console.evidence import report as rp
from test_evidence_decision import bracket


@pytest.fixture
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("SEAT_CONSOLE_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.setenv("SEAT_CONSOLE_DATA_DIR", str(tmp_path / "data"))
    return tmp_path


def _facts(tmp: Path, **kw: Any) -> tuple[dict, dict]:
    cmp_dir = bracket(tmp, **kw)
    rep = json.loads(json.dumps(rp.build_report(rp.load_inputs([str(cmp_dir)]))))
    return rep, dec.decision_facts(rep)


def test_the_decide_row_round_trips(tmp_path: Path) -> None:
    rep, facts = _facts(tmp_path)
    assert set(facts) == set(dec.FACT_KEYS)
    assert facts["decision"] == "PROMOTE-ABLE" and facts["bracket_id"] == "cmp-1"
    assert len(facts["runs"]) == 12 and facts["needs"] == ""
    assert all(set(q) == {"question", "answer", "critical"} for q in facts["questions"])
    with Journal(path=tmp_path / "j.sqlite3") as j:
        assert dec.newest_decision(j) is None
        row = dec.record_decision(j, facts)
        assert (row.runbook, row.kind, row.outcome) == ("decide", "end", "done")
        assert row.facts == facts                               # exactly the convention's facts
        got = dec.newest_decision(j)
        assert got is not None
        assert {k: got[k] for k in dec.FACT_KEYS} == facts
        assert got["seq"] == row.seq and got["by"] == f"{j.user}@{j.host}"
        # the newest wins
        facts2 = {**facts, "decision": "KEEP"}
        dec.record_decision(j, facts2)
        assert dec.newest_decision(j)["decision"] == "KEEP"
        assert j.verify().ok


def test_the_sha256_is_of_the_report_at_the_rows_time(tmp_path: Path) -> None:
    cmp_dir = bracket(tmp_path)
    at = datetime(2026, 12, 5, 4, 0, tzinfo=UTC)
    rep = json.loads(json.dumps(rp.build_report(rp.load_inputs([str(cmp_dir)]), now=at)))
    facts = dec.decision_facts(rep)
    assert dec.rederive_sha256([str(cmp_dir)], at) == facts["report_sha256"]
    assert dec.report_sha256({**rep, "decision": {**rep["decision"], "outcome": "KEEP"}}) != \
        facts["report_sha256"]


def test_a_bad_decision_is_never_written(tmp_path: Path) -> None:
    with Journal(path=tmp_path / "j.sqlite3") as j:
        with pytest.raises(dec.DecisionRowError, match="not one of"):
            dec.record_decision(j, {"decision": "SHIP IT"})
        assert j.entries() == []


def test_an_unreadable_newest_row_is_an_error_not_an_older_decision(tmp_path: Path) -> None:
    _, facts = _facts(tmp_path)
    with Journal(path=tmp_path / "j.sqlite3") as j:
        dec.record_decision(j, facts)
        j.append(run_id="decide-x", runbook="decide", kind="end", outcome="done",
                 facts={"decision": "PROMOTE-ABLE"})
        with pytest.raises(dec.DecisionRowError, match=r"journal row 2 \(decide\)"):
            dec.newest_decision(j)


_json = st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=8)
                     | st.floats(allow_nan=True), lambda c: st.lists(c, max_size=3)
                     | st.dictionaries(st.text(max_size=8), c, max_size=4), max_leaves=12)


@settings(max_examples=200)
@given(facts=st.dictionaries(st.sampled_from([*dec.FACT_KEYS, "x"]), _json, max_size=7))
def test_parse_facts_only_raises_its_documented_error(facts: dict) -> None:
    try:
        out = dec.parse_facts(facts, "row 9")
    except dec.DecisionRowError as exc:
        assert str(exc).startswith("row 9: not a decision")
    else:
        assert set(out) == set(dec.FACT_KEYS) and out["decision"] in (
            "PROMOTE-ABLE", "KEEP", "INCONCLUSIVE")


# -- the command -------------------------------------------------------------------------------
def test_decide_defaults_to_the_newest_bracket_and_journals(env: Path,
                                                           capsys: pytest.CaptureFixture) -> None:
    bracket(env / "data", rounds=1)       # data/comparisons/cmp-1 (1 round)
    assert main(["decide", "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("## Decision: **INCONCLUSIVE**")
    assert "--rounds 3" in out and "no measurement yet" in out
    assert "Not journaled (--dry-run)." in out
    # the runbook's one next-line format (stages.next_line), as every action ends with
    assert re.match(r"next: (\w+ — `seat-console [^`]+`|unknown — )",
                    out.rstrip().splitlines()[-1]), out
    assert "next: seat-console" not in out
    with Journal() as j:
        assert dec.newest_decision(j) is None
    assert main(["decide", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["decision"]["outcome"] == "INCONCLUSIVE" and doc["journaled"]["seq"] == 1
    assert doc["next"]["line"].startswith("next: ")          # the same key every action has
    with Journal() as j:
        got = dec.newest_decision(j)
    assert got["decision"] == "INCONCLUSIVE" and got["bracket_id"] == "cmp-1"
    assert "no forecast" in got["needs"]
    # the row carries the profile's hash as every other row does (it was "": the trial)
    from seat_console.core.profile import load_profile

    with Journal() as j:
        (row,) = [e for e in j.entries() if e.runbook == "decide"]
    assert row.profile_sha256 == load_profile(None).sha256 != ""


def test_decide_is_allowed_under_readonly(env: Path, capsys: pytest.CaptureFixture) -> None:
    from seat_console.cli import NODE_CHANGING

    assert "decide" not in NODE_CHANGING      # it writes the journal, never the node
    bracket(env / "data")
    assert main(["--readonly", "decide"]) == 0
    assert "PROMOTE-ABLE" in capsys.readouterr().out


def test_decide_without_a_bracket_says_so(env: Path, capsys: pytest.CaptureFixture) -> None:
    assert main(["decide"]) == 1
    assert "no compare bracket found" in capsys.readouterr().err


def test_the_hash_never_fails_on_a_non_finite_figure() -> None:
    a = dec.report_sha256({"x": float("nan"), "y": [float("inf")]})
    assert len(a) == 64 and a == dec.report_sha256({"y": [float("inf")], "x": float("nan")})
