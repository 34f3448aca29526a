"""What a new on-call engineer's full seat swap from the runbook screen (``g``, the lab at
120x40) found in the read stages' confirmations: the decide confirmation printed the long
"cannot tell, because …" twice (its headline and its question row), and the fit confirmation
said "fit verdict now: fits — fits: …"; and ``seat-console hold status --json`` failed with
argparse's "unrecognized arguments: status" (the form is ``hold --status``)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from seat_console.actions import read_stages
from seat_console.evidence.decision import FAIL, PASS, UNKNOWN, Answer, outcome_of
from seat_console.tui.stage_flows import FitRun, decision_lines, verdict_words

LONG = ("cannot tell, because throughput (single-stream): 2 pair(s) cannot reach p ≤ 0.05; "
        + "TPOT undefined for requests whose output all arrived in one network read; " * 4
        + "needs a complete, undisturbed bracket of ≥ 3 rounds")


def test_an_inconclusive_s_long_answer_is_shown_once() -> None:
    d = outcome_of([Answer("throughput and latency?", UNKNOWN, LONG, "≥ 3 rounds"),
                    Answer("fits?", PASS, "yes: the fit budget says it fits")]).as_dict()
    lines = decision_lines(d, d["needs"])
    text = "\n".join(lines)
    assert text.count("cannot tell, because") == 1, text
    assert lines[0] == ("decision: INCONCLUSIVE — from throughput and latency? (its answer "
                        "below)"), lines[0]
    assert any(LONG in ln for ln in lines[1:])              # the answer itself, whole, once


def test_a_keep_names_its_failed_questions_and_shows_each_answer_once() -> None:
    d = outcome_of([Answer("fits?", FAIL, "no: weights exceed usable memory by 3.1 GiB"),
                    Answer("canaries?", FAIL, "no: B passes fewer by a claimed difference"),
                    Answer("fidelity?", PASS, "yes: greedy tokens agree")]).as_dict()
    lines = decision_lines(d)
    assert lines[0] == "decision: KEEP — from fits?, canaries? (their answers below)", lines[0]
    assert "\n".join(lines).count("weights exceed usable memory") == 1


@pytest.mark.parametrize("why", [
    "canaries? (critical) no",           # a why that is not the answers themselves: kept
    "nothing measured speaks against the candidate and every critical check passed",
])
def test_a_why_that_says_more_than_the_rows_is_kept(why: str) -> None:
    d = {"outcome": "KEEP", "why": why, "questions": [
        {"question": "canaries?", "answer": "no: B passes fewer", "critical": True}]}
    assert decision_lines(d)[0] == f"decision: KEEP — {why}"


def test_the_fit_confirmation_says_the_verdict_once(monkeypatch: pytest.MonkeyPatch) -> None:
    words = "fits: 21.50 GiB per card for the KV cache = 187,904 tokens, 5.73× at 32,768"
    monkeypatch.setattr(read_stages, "fit_facts", lambda _n: {
        "verdict": "fits", "words": words, "candidate": "cand", "resident": "res"})
    first = FitRun(SimpleNamespace(), None, None, lambda _l: None).plan().text_lines()[0]
    assert first == f"fit verdict now: {words}", first
    assert verdict_words({"verdict": "over", "words": "does not fit: short by 3 GiB"}) == \
        "over — does not fit: short by 3 GiB"
    assert verdict_words({"verdict": "no verdict", "words": "NO VERDICT: no live reading"}) == \
        "NO VERDICT: no live reading"
    assert verdict_words({"verdict": "fits", "words": "fitsomething"}) == "fits — fitsomething"


# -- `hold status --json`: the error names `hold --status` -------------------------------------
@pytest.mark.parametrize("argv, meant", [
    (["hold", "status", "--json"], "`seat-console hold --status`"),
    (["hold", "--json", "status"], "`seat-console hold --status`"),
    (["--readonly", "hold", "status", "--json"], "`seat-console hold --status`"),
    (["hold", "extend", "1h", "--json"], "`seat-console hold --extend 1h`"),
    (["hold", "release", "--json"], "`seat-console release`"),
    (["hold", "4h", "--json"], "--ttl TTL"),
])
def test_a_word_after_hold_is_a_usage_error_naming_the_form_meant(
        argv: list[str], meant: str, tmp_path, monkeypatch, capsys) -> None:
    """Was argparse's plain "unrecognized arguments: status" (exit 2, no JSON). Now exit 2
    still (usage, as documented), the error in JSON with --json, naming the form meant;
    nothing runs (under --readonly too: not taken for placing a hold)."""
    import json

    from seat_console.cli import main

    monkeypatch.setenv("SEAT_CONSOLE_STATE_DIR", str(tmp_path / "state"))
    assert main(argv) == 2
    out, err = capsys.readouterr()
    doc = json.loads(out)
    assert doc["ok"] is False and doc["exit"] == 2 and meant in doc["error"], doc
    assert "nothing was changed" in doc["error"] and "unrecognized" not in err
    assert "--readonly forbids" not in err


def test_hold_help_does_not_show_the_catch_all(capsys) -> None:
    from seat_console.cli import main

    with pytest.raises(SystemExit):
        main(["hold", "--help"])
    out = capsys.readouterr().out
    assert "words" not in out and "[--status | --extend TTL]" in out
