"""Evidence behaviours a mutation run found unguarded (issue 22): same tokens with different
logprobs are not "exact"; a run whose summary says complete but lists disruptions is not
complete and backs no claim; a phase missing from one run refuses the claim; Wilson intervals
at hand-computed values and the overlap rule on disjoint and touching intervals."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from evidence_factory import write_run
from seat_console.evidence import fidelity as f
from seat_console.evidence import report as rp
from seat_console.evidence.runs import FileLedger, load_probe_run
from seat_console.evidence.stats import (
    NO_DIFFERENCE,
    Interval,
    compare_rates,
    pairs_needed,
    wilson_interval,
)


def _trace(case: str, rows: list[tuple[int, dict[int, float]]]) -> f.Trace:
    return f.Trace(case_id=case, positions=tuple(
        f.Position(token_id=t, logprob=top[t], top=top) for t, top in rows))


# -- fidelity -----------------------------------------------------------------------------------
def test_same_tokens_with_different_logprobs_are_not_exact() -> None:
    a = _trace("c", [(1, {1: -0.5, 2: -1.0}), (2, {2: -0.2, 3: -2.0})])
    b = _trace("c", [(1, {1: -0.5, 2: -1.0}), (2, {2: -0.2, 3: -2.001})])
    c = f.compare_traces(a, b)
    assert c.first_divergence is None and c.top_sets_identical and c.length_a == c.length_b
    assert c.max_common_abs_dlogprob == pytest.approx(0.001)
    assert not c.exact and c.as_dict()["exact"] is False
    assert not f.FidelitySummary(cases=(c,)).all_exact


def test_different_top_sets_or_a_shorter_output_are_not_exact() -> None:
    a = _trace("c", [(1, {1: -0.5, 2: -1.0}), (2, {2: -0.2, 3: -2.0})])
    other_set = _trace("c", [(1, {1: -0.5, 4: -1.0}), (2, {2: -0.2, 3: -2.0})])
    c = f.compare_traces(a, other_set)
    assert c.first_divergence is None and not c.top_sets_identical and not c.exact
    prefix = _trace("c", [(1, {1: -0.5, 2: -1.0})])
    c = f.compare_traces(a, prefix)
    assert c.first_divergence is None and (c.length_a, c.length_b) == (2, 1) and not c.exact
    same = f.compare_traces(a, a)
    assert same.exact
    assert not f.FidelitySummary(cases=(same,), unmatched=("d",)).all_exact
    assert f.FidelitySummary(cases=(same,)).all_exact


# -- runs and claims ----------------------------------------------------------------------------
def test_a_complete_run_that_lists_disruptions_is_not_complete(tmp_path: Path) -> None:
    d = write_run(tmp_path / "runs")
    summary = json.loads((d / "summary.json").read_text())
    assert summary["status"] == "complete"
    clean = load_probe_run(d, FileLedger())
    assert clean.complete                              # the control
    summary["disruptions"] = [{"kind": "container", "at": "2026-12-01T09:01:00Z",
                               "what": "container seat-resident: restart, not by the console"}]
    (d / "summary.json").write_text(json.dumps(summary))
    r = load_probe_run(d, FileLedger())
    assert r.status == "complete" and r.disruptions and not r.complete
    rep = rp.build_report(rp.load_inputs([str(d)]))
    claim = next(c for c in rep["claims"] if c["subject"] == "throughput/latency (load)")
    assert rp.RULE_DISRUPTED in {x["rule"] for x in claim["refused_by"]}


def test_a_phase_missing_from_one_run_refuses_the_claim(tmp_path: Path) -> None:
    from datetime import timedelta

    from evidence_factory import T0

    full = write_run(tmp_path / "runs", phases={"single": (4, 0), "load": (64, 0)})
    part = write_run(tmp_path / "runs", phases={"single": (4, 0)}, at=T0 + timedelta(minutes=5))
    rep = rp.build_report(rp.load_inputs([str(full), str(part)]))
    claim = next(c for c in rep["claims"] if c["subject"] == "throughput/latency (load)")
    refusals = {x["rule"]: x for x in claim["refused_by"]}
    assert rp.RULE_INCOMPLETE in refusals, claim
    assert "phase missing" in json.dumps(refusals[rp.RULE_INCOMPLETE])


# -- stats --------------------------------------------------------------------------------------
def _score_bound(c: int, n: int, z: float, upper: bool) -> float:
    """The Wilson bound found the way Wilson defined it, independently of the closed form: the
    p at which the score statistic |c/n − p| / sqrt(p(1 − p)/n) equals z, by bisection."""
    phat = c / n
    lo, hi = (phat, 1.0) if upper else (0.0, phat)
    if (upper and c == n) or (not upper and c == 0):
        return phat
    for _ in range(200):
        mid = (lo + hi) / 2
        inside = abs(phat - mid) / (mid * (1 - mid) / n) ** 0.5 < z
        if inside == upper:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2


@pytest.mark.parametrize("c, n", [(9, 10), (10, 10), (0, 10), (50, 100), (1, 3), (7, 1000)])
def test_wilson_interval_is_the_score_test_inversion(c: int, n: int) -> None:
    from seat_console.evidence.stats import Z_95

    iv = wilson_interval(c, n)
    assert iv.low == pytest.approx(_score_bound(c, n, Z_95, upper=False), abs=1e-9)
    assert iv.high == pytest.approx(_score_bound(c, n, Z_95, upper=True), abs=1e-9)
    if c == 9 and n == 10:                     # the docstring's example
        assert (round(iv.low, 3), round(iv.high, 3)) == (0.596, 0.982)


def test_the_overlap_rule_on_disjoint_and_touching_intervals() -> None:
    lo, hi = wilson_interval(0, 10), wilson_interval(10, 10)
    assert not lo.overlaps(hi) and not hi.overlaps(lo)
    assert compare_rates(lo, hi).verdict == "B higher"
    assert compare_rates(hi, lo).verdict == "A higher"
    a = Interval(successes=1, trials=2, low=0.1, high=0.5)
    b = Interval(successes=1, trials=2, low=0.5, high=0.9)   # share exactly one point
    assert a.overlaps(b) and compare_rates(a, b).verdict == NO_DIFFERENCE


def test_pairs_needed_for_the_two_sided_sign_flip_test() -> None:
    # two-sided: the smallest p with m pairs is 2 / 2^m; 5 pairs give 0.0625 > 0.05
    assert pairs_needed(0.05) == 6 and pairs_needed(0.01) == 8 and pairs_needed(0.5) == 2
