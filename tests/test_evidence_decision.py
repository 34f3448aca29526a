"""The decision (issue 30, item 5): PROMOTE-ABLE / KEEP / INCONCLUSIVE per question, with the
canary and fidelity vetoes, too little data never a pass, and arms from the runs' identity."""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from evidence_factory import IDENT_A, IDENT_B, T0, write_leg, write_run
from seat_console.evidence import decision as dc
from seat_console.evidence import report as rp
from seat_console.evidence.bracket import plan_bracket

ROLE_A = {**IDENT_A, "container": {"role": "resident"}}
ROLE_B = {**IDENT_B, "container": {"role": "probe"}}
NEAR = {1: -0.5, 2: -0.6, 3: -0.7, 4: -0.8, 9: -0.45, 10: -1.0}   # B's top-20 keeps A's tokens


def _trace(case: str, ids: list[int], top: dict[int, float] | None = None) -> dict:
    return {"case_id": case, "positions": [
        {"token_id": t, "logprob": -0.5,
         "top": {str(k): v for k, v in (top or {t: -0.5, t + 1: -1.0}).items()}} for t in ids]}


def _canaries(pass_b: bool, arm: str) -> list[dict]:
    return [{"item_id": "x", "kind": "arithmetic", "run": r,
             "passed": (r < 9) if arm == "A" or pass_b else False, "reason": "r",
             "answer": f"{arm}{r}", "error": None} for r in range(10)]


def bracket(tmp: Path, *, rounds: int = 3, speed_b: float = 1.0, kv_b: int = 9_000,
            b_ids: tuple[int, ...] = (1, 2, 3), b_top: dict[int, float] | None = None,
            canaries_b_pass: bool = True, fits_b: bool | None = True,
            names: tuple[str, str] = ("resident-fp8", "candidate-nvfp4"),
            failed_b: int = 0, status: str = "complete", only_a: bool = False,
            a_role: str = "resident", traces: bool = True, canaries: bool = True,
            slo: dict[str, float] | None = None, cache: tuple[float, float] | None = None
            ) -> Path:
    """A bracket on disk: A = the resident, B = the candidate, ``rounds`` ABBA rounds."""
    runs, cmp_dir = tmp / "runs", tmp / "comparisons" / "cmp-1"
    legs = []
    for leg in plan_bracket("ABBA", rounds):
        if only_a and leg.arm == "B":
            continue
        a = leg.arm == "A"
        ident = {**(IDENT_A if a else IDENT_B), "container": {"role": a_role if a else "probe"}}
        probe = write_run(runs, ident=ident, speed=1.0 if a else speed_b,
                          phases={"load": (16, 0 if a else failed_b)},
                          at=T0 + timedelta(minutes=5 * leg.n), slo=slo,
                          cache_hit_rate=None if cache is None else cache[0 if a else 1])
        legs.append(write_leg(
            cmp_dir, leg.n, leg.arm, probe, kv=9_000 if a else kv_b,
            traces=[_trace("c1", [1, 2, 3] if a else list(b_ids), None if a else b_top)]
            if traces else None,
            canaries=_canaries(canaries_b_pass, leg.arm) if canaries else None,
            pair=leg.pair, round_=leg.round))
    planned = [f"legs/{x.dirname}" for x in plan_bracket("ABBA", rounds)]
    (cmp_dir / "compare.json").write_text(json.dumps({
        "bracket_id": "cmp-1", "order": "ABBA", "rounds": rounds, "legs": legs,
        "planned_legs": planned, "status": status, "restored": True, "hold_released": True,
        "fit": {"A": {"name": names[0], "kv_tokens": 9_500, "fits": True},
                "B": {"name": names[1], "kv_tokens": 9_600, "fits": fits_b,
                      "words": "fits" if fits_b else "over by 3.1 GiB"}}}))
    return cmp_dir


def decide(path: Path) -> dict[str, Any]:
    rep = rp.build_report(rp.load_inputs([str(path)]))
    json.dumps(rep["decision"], allow_nan=False)          # strict JSON
    return rep["decision"]


def q(d: dict, question: str) -> dict:
    return next(x for x in d["questions"] if x["question"] == question)


# -- the outcomes ------------------------------------------------------------------------------
def test_promote_able_when_every_question_passes(tmp_path: Path) -> None:
    d = decide(bracket(tmp_path))
    assert d["outcome"] == dc.PROMOTE_ABLE, d
    assert {x["status"] for x in d["questions"]} == {"pass"}
    assert [x["question"] for x in d["questions"]] == list(dc.QUESTIONS)
    assert q(d, dc.Q_FIDELITY)["critical"] and q(d, dc.Q_CANARIES)["critical"]
    assert not q(d, dc.Q_SPEED)["critical"]


def test_a_faster_candidate_is_still_promote_able(tmp_path: Path) -> None:
    d = decide(bracket(tmp_path, speed_b=2.0))
    assert d["outcome"] == dc.PROMOTE_ABLE
    assert "better" in q(d, dc.Q_SPEED)["answer"]


def test_keep_when_slower_by_a_claimed_difference(tmp_path: Path) -> None:
    d = decide(bracket(tmp_path, speed_b=0.5))
    assert d["outcome"] == dc.KEEP
    s = q(d, dc.Q_SPEED)
    assert s["status"] == "fail" and "TTFT p50 (load) B/A 2.000×" in s["answer"]


def test_canary_failure_vetoes_whatever_throughput_says(tmp_path: Path) -> None:
    d = decide(bracket(tmp_path, speed_b=3.0, canaries_b_pass=False))
    assert d["outcome"] == dc.KEEP
    assert q(d, dc.Q_CANARIES)["status"] == "fail"
    assert q(d, dc.Q_SPEED)["status"] == "pass"             # faster, and still KEEP
    assert d["why"].startswith("canaries? (critical)")


def test_fidelity_divergence_of_the_same_weights_vetoes(tmp_path: Path) -> None:
    d = decide(bracket(tmp_path, speed_b=3.0, b_ids=(1, 2, 9), b_top=NEAR,
                         names=("tiny", "tiny")))
    assert d["outcome"] == dc.KEEP
    f = q(d, dc.Q_FIDELITY)
    assert f["status"] == "fail" and "same weights" in f["answer"]


def test_fidelity_divergence_of_different_weights_is_expected(tmp_path: Path) -> None:
    d = decide(bracket(tmp_path, b_ids=(1, 2, 9), b_top=NEAR))
    assert q(d, dc.Q_FIDELITY)["status"] == "pass"
    assert "expected divergence" in q(d, dc.Q_FIDELITY)["answer"]
    assert d["outcome"] == dc.PROMOTE_ABLE


def test_fidelity_collapse_vetoes_even_different_weights(tmp_path: Path) -> None:
    # B's top-20 on A's own prefix shares no token with A's: broken, whatever the weights
    d = decide(bracket(tmp_path, speed_b=3.0, b_ids=(50, 51, 52), b_top={50: -0.1, 99: -2.0}))
    assert q(d, dc.Q_FIDELITY)["status"] == "fail" and d["outcome"] == dc.KEEP


def test_fit_failure_is_critical(tmp_path: Path) -> None:
    d = decide(bracket(tmp_path, fits_b=False))
    assert d["outcome"] == dc.KEEP and q(d, dc.Q_FITS)["status"] == "fail"
    assert "over by 3.1 GiB" in q(d, dc.Q_FITS)["answer"]


def test_less_kv_capacity_speaks_against(tmp_path: Path) -> None:
    d = decide(bracket(tmp_path, kv_b=4_000))
    assert d["outcome"] == dc.KEEP and q(d, dc.Q_KV)["status"] == "fail"
    assert "0.44×" in q(d, dc.Q_KV)["answer"]


# -- goodput and the cache rule feed "throughput and latency?" (issue 35) ---------------------
SLO = {"ttft_ms": 75.0}      # A's TTFT is 50 ms (meets it); B's at half speed 100 ms (misses)


def test_a_claimed_goodput_drop_keeps_the_resident(tmp_path: Path) -> None:
    # one round: the sign-flip test cannot claim the latency (2 pairs), but goodput A 32/32
    # vs B 0/32 has disjoint Wilson intervals over distinct requests: claimed, so KEEP
    d = decide(bracket(tmp_path, rounds=1, speed_b=0.5, slo=SLO))
    assert d["outcome"] == dc.KEEP, d
    s = q(d, dc.Q_SPEED)
    assert s["status"] == "fail" and "goodput (load)" in s["answer"], s
    assert "A 32/32" in s["answer"] and "B 0/32" in s["answer"] and "A higher" in s["answer"]


def test_goodput_within_overlapping_intervals_does_not_decide(tmp_path: Path) -> None:
    d = decide(bracket(tmp_path, rounds=1, speed_b=0.5, slo={"ttft_ms": 500.0}))
    assert d["outcome"] == dc.INCONCLUSIVE and d["rounds_needed"] == 3, d   # both meet it
    d3 = decide(bracket(tmp_path / "3", slo=SLO))
    assert d3["outcome"] == dc.PROMOTE_ABLE, d3
    assert "not significant" in q(d3, dc.Q_SPEED)["answer"]


def test_a_claimed_goodput_gain_is_better_never_a_failure(tmp_path: Path) -> None:
    d = decide(bracket(tmp_path, speed_b=2.0, slo={"ttft_ms": 40.0}))    # A 50 ms, B 25 ms
    assert d["outcome"] == dc.PROMOTE_ABLE, d
    assert "goodput (load)" in q(d, dc.Q_SPEED)["answer"] and "better" in q(d, dc.Q_SPEED)[
        "answer"]


@pytest.mark.parametrize("cache", [(0.0, 0.5), (0.5, 0.0)])
def test_legs_with_hit_rates_beyond_the_bound_cannot_tell(tmp_path: Path, cache) -> None:
    # three rounds, B slower by half: claimed on its own — but the legs' prefix-cache hit rates
    # differ by 0.5 (> 0.05): the phase may have measured cache state, so cannot tell
    d = decide(bracket(tmp_path, speed_b=0.5, slo=SLO, cache=cache))
    assert d["outcome"] == dc.INCONCLUSIVE, d
    s = q(d, dc.Q_SPEED)
    assert s["status"] == "unknown", s
    assert s["answer"].startswith("cannot tell, because the legs' prefix-cache hit rates "
                                  "differ beyond the report's bound"), s
    assert "differ by more than 0.05" in s["answer"]
    assert "cache-clean" in s["needs"] and "cache-clean" in d["needs"]


def test_hit_rates_within_the_bound_decide_as_before(tmp_path: Path) -> None:
    d = decide(bracket(tmp_path, speed_b=0.5, cache=(0.01, 0.03)))
    assert d["outcome"] == dc.KEEP and q(d, dc.Q_SPEED)["status"] == "fail", d
    d = decide(bracket(tmp_path / "same", cache=(0.0, 0.0)))
    assert d["outcome"] == dc.PROMOTE_ABLE, d


def test_cache_and_too_few_rounds_name_both_needs(tmp_path: Path) -> None:
    d = decide(bracket(tmp_path, rounds=1, cache=(0.0, 0.4)))
    s = q(d, dc.Q_SPEED)
    assert d["outcome"] == dc.INCONCLUSIVE and "prefix-cache" in s["answer"], d
    assert "cache-clean" in s["needs"] and "--rounds 3" in s["needs"]
    assert d["rounds_needed"] == 3


def test_one_round_is_inconclusive_with_the_rounds_it_needs(tmp_path: Path) -> None:
    d = decide(bracket(tmp_path, rounds=1, speed_b=0.5))    # slower, but 2 pairs claim nothing
    assert d["outcome"] == dc.INCONCLUSIVE
    assert d["rounds_needed"] == 3 and "--rounds 3" in d["needs"]
    assert q(d, dc.Q_SPEED)["answer"].startswith("cannot tell, because")


@pytest.mark.parametrize("kw", [dict(traces=False), dict(canaries=False)])
def test_a_missing_critical_check_is_inconclusive_never_a_pass(tmp_path: Path, kw: dict) -> None:
    d = decide(bracket(tmp_path, **kw))
    assert d["outcome"] == dc.INCONCLUSIVE
    assert "without --no-" in d["needs"]


def test_every_measurement_errored_is_inconclusive(tmp_path: Path) -> None:
    # Argo Rollouts #4479: "Successful" while every measurement errored is the bug to never have
    d = decide(bracket(tmp_path, failed_b=16, canaries=False, traces=False))
    assert d["outcome"] == dc.INCONCLUSIVE
    assert q(d, dc.Q_DATA)["status"] == "unknown"


def test_half_the_populations_missing_is_too_little_data(tmp_path: Path) -> None:
    d = decide(bracket(tmp_path, failed_b=1))               # every B leg 15/16
    assert d["outcome"] == dc.INCONCLUSIVE
    assert "too little data" in q(d, dc.Q_DATA)["answer"] and "50%" in q(d, dc.Q_DATA)["answer"]


def test_a_missing_arm_is_inconclusive(tmp_path: Path) -> None:
    d = decide(bracket(tmp_path, only_a=True, status="incomplete"))
    assert d["outcome"] == dc.INCONCLUSIVE
    assert "candidate (arm B)" in q(d, dc.Q_DATA)["answer"]


def test_an_incomplete_bracket_is_inconclusive(tmp_path: Path) -> None:
    d = decide(bracket(tmp_path, status="incomplete"))
    assert d["outcome"] == dc.INCONCLUSIVE


def test_a_bracket_that_measured_the_candidate_as_a_is_inconclusive(tmp_path: Path) -> None:
    # issue 30: compare started with the candidate in the seat measured it as arm A
    d = decide(bracket(tmp_path, a_role="probe"))
    assert d["outcome"] == dc.INCONCLUSIVE
    assert "arms cannot be told" in q(d, dc.Q_DATA)["answer"]
    assert "measured the candidate container" in q(d, dc.Q_DATA)["answer"]


def test_outcome_order_failure_beats_unknown() -> None:
    a = [dc.Answer(dc.Q_DATA, "unknown", "cannot tell, because x; needs y", "y"),
         dc.Answer(dc.Q_SPEED, "fail", "worse"), dc.Answer(dc.Q_CANARIES, "fail", "no")]
    d = dc.outcome_of(a)
    assert d.outcome == dc.KEEP and d.why.startswith("canaries? (critical)")
    assert dc.outcome_of(a[:1]).outcome == dc.INCONCLUSIVE
    assert dc.outcome_of([dc.Answer(q_, "pass", "ok") for q_ in dc.QUESTIONS]).outcome \
        == dc.PROMOTE_ABLE


# -- the report carries it ---------------------------------------------------------------------
def test_the_decision_heads_the_markdown_and_verify_covers_it(tmp_path: Path) -> None:
    cmp_dir = bracket(tmp_path, rounds=1)
    rep = rp.build_report(rp.load_inputs([str(cmp_dir)]))
    md = rp.render_markdown(rep)
    lines = md.splitlines()
    assert lines[2] == "## Decision: **INCONCLUSIVE**"
    assert lines.index("## Decision: **INCONCLUSIVE**") < next(
        i for i, x in enumerate(lines) if x.startswith("Generated "))
    assert rp.rederive(md, "r.md") == []
    edited = md.replace("## Decision: **INCONCLUSIVE**", "## Decision: **PROMOTE-ABLE**")
    assert any("PROMOTE-ABLE" in x for x in rp.rederive(edited, "r.md"))
    text = json.dumps(rep)
    assert rp.rederive(text, "r.json") == []
    doc = json.loads(text)
    doc["decision"]["outcome"] = "PROMOTE-ABLE"
    assert any(x.startswith("report.decision.outcome") for x in
               rp.rederive(json.dumps(doc), "r.json"))


# -- arms from identity, never from argument order ---------------------------------------------
@pytest.fixture(scope="module")
def plain_runs(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    root = tmp_path_factory.mktemp("plain") / "runs"
    out = []
    for k in range(2):   # the candidate measured FIRST: start order must not decide the arms
        out.append(str(write_run(root, ident=ROLE_B, at=T0 + timedelta(minutes=10 * k))))
        out.append(str(write_run(root, ident=ROLE_A, at=T0 + timedelta(minutes=10 * k + 5))))
    return out


def _arms(args: list[str]) -> tuple[dict[str, list[str]], dict]:
    rep = rp.build_report(rp.load_inputs(args), now=T0)
    return ({a: sorted(r["run_id"] for r in v["runs"]) for a, v in rep["arms"].items()},
            rep["decision"])


def test_plain_runs_take_arms_from_their_recorded_side(plain_runs: list[str]) -> None:
    rep = rp.build_report(rp.load_inputs(plain_runs))
    for arm, role in (("A", "resident"), ("B", "probe")):
        assert {r["identity"]["image_id"] for r in rep["arms"][arm]["runs"]} == \
            {(ROLE_A if arm == "A" else ROLE_B)["image_id"]}, role
    assert rep["arms_assignment"]["problem"] is None


@settings(max_examples=25, deadline=None)
@given(perm=st.permutations(range(4)))
def test_permuting_the_run_arguments_never_changes_the_decision(
        plain_runs: list[str], perm: list[int]) -> None:
    assert _arms([plain_runs[i] for i in perm]) == _arms(plain_runs)


def test_runs_without_a_recorded_side_cannot_be_assigned(tmp_path: Path) -> None:
    a = write_run(tmp_path / "runs", ident=IDENT_A)
    b = write_run(tmp_path / "runs", ident=IDENT_B, at=T0 + timedelta(minutes=5))
    for args in ([str(a), str(b)], [str(b), str(a)]):
        rep = rp.build_report(rp.load_inputs(args))
        assert rep["arms_assignment"]["problem"]
        assert rep["decision"]["outcome"] == dc.INCONCLUSIVE
        assert "cannot be told" in rp.render_markdown(rep)
        assert rep["arms"]["A"]["runs"][0]["run_id"] == a.name    # display: earliest = A


def test_one_side_recorded_gives_the_other_identity_the_other_side(tmp_path: Path) -> None:
    a = write_run(tmp_path / "runs", ident=IDENT_A, at=T0 + timedelta(minutes=5))
    b = write_run(tmp_path / "runs", ident=ROLE_B)
    rep = rp.build_report(rp.load_inputs([str(b), str(a)]))
    assert rep["arms_assignment"]["problem"] is None
    assert rep["arms"]["A"]["runs"][0]["run_id"] == a.name


# -- parsers of our own run files and the planned-design arithmetic ---------------------------
_js = st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=10)
                   | st.floats(allow_nan=True), lambda c: st.lists(c, max_size=3)
                   | st.dictionaries(st.sampled_from(["container", "role", "side", "x"]), c,
                                     max_size=3), max_leaves=10)


@settings(max_examples=300)
@given(ident=_js)
def test_recorded_side_never_guesses(ident: Any) -> None:
    from seat_console.evidence.runs import recorded_side

    side = recorded_side(ident)
    assert side in (None, "resident", "candidate")
    if not isinstance(ident, dict):
        assert side is None


@settings(max_examples=100, deadline=None)
@given(pairs=st.integers(-3, 20), sd=st.floats(allow_nan=True, allow_infinity=True))
def test_design_mde_raises_only_its_documented_error(pairs: int, sd: float) -> None:
    from seat_console.evidence.stats import StatsError, design_mde, pairs_needed

    try:
        m = design_mde(pairs, sd)
    except StatsError as exc:
        assert "pairs=" in str(exc) or "sd_log_ratio=" in str(exc)
        return
    assert (m is None) == (pairs < pairs_needed())
    assert m is None or m >= 1.0


@pytest.fixture(scope="module")
def good_report(tmp_path_factory: pytest.TempPathFactory) -> dict:
    d = bracket(tmp_path_factory.mktemp("good"))
    return json.loads(json.dumps(rp.build_report(rp.load_inputs([str(d)]))))


_KEYS = ["arms", "arms_assignment", "phases", "fidelity", "canaries", "claims", "comparison",
         "simultaneity"]


@settings(max_examples=150, deadline=None)
@given(drop=st.sets(st.sampled_from(_KEYS)), flip=st.sets(st.integers(0, 40)),
       junk=st.sampled_from([None, [], {}, "x", 0]))
def test_never_a_pass_from_missing_or_refused_evidence(good_report: dict, drop: set,
                                                       flip: set, junk: Any) -> None:
    rep = json.loads(json.dumps(good_report))
    for k in drop:
        rep[k] = junk if isinstance(junk, (dict, list)) or junk is None else None
    for i in flip:   # refuse some claims by a rule the decision does not excuse
        if isinstance(rep.get("claims"), list) and i < len(rep["claims"]):
            rep["claims"][i]["survives"] = False
            rep["claims"][i]["refused_by"] = [{"rule": "disrupted", "detail": "x"}]
    d = dc.decide(rep).as_dict()
    json.dumps(d, allow_nan=False)
    assert d["outcome"] in dc.OUTCOMES
    if d["outcome"] == dc.PROMOTE_ABLE:
        assert all(q_["status"] == "pass" for q_ in d["questions"])
    if drop or any(i < len(good_report["claims"]) for i in flip):
        assert d["outcome"] != dc.PROMOTE_ABLE, (drop, flip, d)


def test_report_run_run_in_either_order_is_the_same_report(
        plain_runs: list[str], capsys: pytest.CaptureFixture) -> None:
    from seat_console.cli import main

    out = []
    for args in (plain_runs, plain_runs[::-1]):
        assert main(["report", "--json", *args]) == 0
        doc = json.loads(capsys.readouterr().out)
        doc.pop("generated_at")
        out.append(doc)
    assert out[0] == out[1]
    assert out[0]["arms"]["A"]["identity"]["image_id"] == ROLE_A["image_id"]


# -- the decision over random reports (issue 35) ----------------------------------------------
_RULE_NAMES = [rp.RULE_INCOMPLETE, rp.RULE_DISRUPTED, rp.RULE_OVERLAP, rp.RULE_UNKNOWN,
               rp.RULE_CACHE, rp.RULE_UNDERPOWERED, rp.RULE_NOT_SIGNIFICANT, rp.RULE_UNMATCHED,
               rp.RULE_NOT_SIMULTANEOUS]
_refusals = st.lists(st.builds(lambda r: {"rule": r, "detail": f"because {r}"},
                               st.sampled_from(_RULE_NAMES)), max_size=3)
_num = st.none() | st.floats(0.01, 100) | st.just(float("nan")) | st.integers(0, 3)


def _claim(subject: str, refused: list, **extra: Any) -> dict:
    return {"subject": subject, "statement": f"{subject} said", "survives": not refused,
            "refused_by": refused, **extra}


_test_claim = st.builds(
    lambda ph, fig, refused, ratio, hib, rounds: _claim(
        f"{fig} difference ({ph})", refused, test={
            "figure": fig, "phase": ph, "ratio_b_over_a": ratio, "higher_is_better": hib,
            "p_value": 0.03, "rounds_needed": rounds, "pairs": 2, "pairs_per_round": 2,
            "mde_ratio": 1.2, "unknown_on_every_leg": False}),
    st.sampled_from(["load", "single"]), st.sampled_from(["output tok/s", "TTFT p50"]),
    _refusals, _num, st.booleans(), st.none() | st.integers(1, 5))
_goodput_claim = st.builds(
    lambda ph, refused, verdict: _claim(f"goodput ({ph})", refused, rate={
        "kind": "goodput", "phase": ph, "verdict": verdict, "a": None, "b": None}),
    st.sampled_from(["load", "single"]), _refusals,
    st.sampled_from(["A higher", "B higher", "no difference can be claimed", None, 3]))
_other_claim = st.builds(
    _claim, st.sampled_from(["KV capacity", "canaries (arithmetic)", "identity of arm B",
                             "fidelity (localisation, not KL)", "throughput/latency (load)"]),
    _refusals)
_rows = st.lists(st.builds(lambda c: {"run": "A1", "population": "16/16", "complete": c},
                           st.booleans()), max_size=6)


_OVERLAP = [{"rule": rp.RULE_OVERLAP, "detail": "overlap"}]
_NOT_SIG = [{"rule": rp.RULE_NOT_SIGNIFICANT, "detail": "p = 0.5"}]
_GOOD: dict[str, Any] = {
    "arms_assignment": {"by": "the bracket", "problem": None},
    "arms": {a: {"fit": {"fits": True, "name": "m"}, "kv_cache_tokens": 9_000,
                 "identity": {"served_model": "m", "image_id": "sha256:x"}} for a in "AB"},
    "phases": [{"phase": "load", "rows": [{"run": r, "population": "16/16", "complete": True}
                                          for r in ("A1", "B2", "B3", "A4")]}],
    "comparison": {"status": "complete"},
    "simultaneity": {"simultaneous": True, "label": "one bracket"},
    "canaries": {"comparisons": {"arithmetic": {"verdict": "no difference can be claimed"}}},
    "fidelity": {"pairs": [{"a": "A1", "b": "B2", "cases": [
        {"case_id": "c1", "exact": True, "min_top_overlap": 20}]}]},
    "claims": [_claim("KV capacity", []), _claim("fidelity (localisation, not KL)", []),
               _claim("canaries (arithmetic)", _OVERLAP),
               _claim("output tok/s difference (load)", _NOT_SIG, test={
                   "figure": "output tok/s", "phase": "load", "ratio_b_over_a": 1.01,
                   "higher_is_better": True, "p_value": 0.5, "mde_ratio": 1.2}),
               _claim("goodput (load)", _OVERLAP, rate={
                   "kind": "goodput", "phase": "load",
                   "verdict": "no difference can be claimed", "a": None, "b": None})],
}


@st.composite
def _reports(draw: st.DrawFn) -> dict:
    """A report that passes every question (:data:`_GOOD`) with a random set of its parts
    replaced by random ones (claims: random ones added)."""
    spoil = draw(st.sets(st.sampled_from(sorted(_GOOD)), max_size=3))
    rep = json.loads(json.dumps(_GOOD))
    arms = draw(st.sets(st.sampled_from(["A", "B"])))
    spoilt = {
        "arms_assignment": st.sampled_from([{"by": "x", "problem": "mixed"}, None, {}]),
        "arms": st.fixed_dictionaries({a: st.fixed_dictionaries({
            "fit": st.sampled_from([{}, {"fits": True, "name": "m"}, {"fits": False}]),
            "kv_cache_tokens": st.sampled_from([None, 0, 4_000, 9_000]),
            "identity": st.just({"served_model": "m"})}) for a in arms}),
        "phases": st.builds(lambda rows: [{"phase": "load", "rows": rows}], _rows),
        "comparison": st.sampled_from([None, {"status": "incomplete", "reason": "cut"}]),
        "simultaneity": st.just({"simultaneous": False, "label": "apart"}),
        "canaries": st.sampled_from([None, {}, *({"comparisons": {"arithmetic": {
            "verdict": v}}} for v in ("A higher", "B higher", "junk"))]),
        "fidelity": st.sampled_from([None, {"pairs": [{"a": "A1", "b": "B2", "cases": [
            {"case_id": "c1", "exact": False, "min_top_overlap": 0}]}]}]),
        "claims": st.lists(st.one_of(_test_claim, _goodput_claim, _other_claim), min_size=1,
                           max_size=6).map(lambda extra: [*_GOOD["claims"], *extra]),
    }
    for k in spoil:
        rep[k] = draw(spoilt[k])
    return rep


@settings(max_examples=400, deadline=None)
@given(rep=_reports())
def test_the_decision_over_random_reports(rep: dict) -> None:
    d = dc.decide(rep).as_dict()
    json.dumps(d, allow_nan=False)
    assert d["outcome"] in dc.OUTCOMES
    status = {x["question"]: x["status"] for x in d["questions"]}
    # a critical failure is decisive; too little data is never a pass
    if any(x["status"] == "fail" and x["critical"] for x in d["questions"]):
        assert d["outcome"] == dc.KEEP, d
    if status[dc.Q_DATA] != "pass":
        assert d["outcome"] != dc.PROMOTE_ABLE, d
    rows = rep["phases"][0]["rows"]
    if (not rows or sum(not r["complete"] for r in rows) / len(rows) >= dc.MISSING_SHARE
            or set(rep["arms"]) != {"A", "B"}):
        assert d["outcome"] != dc.PROMOTE_ABLE and status[dc.Q_DATA] == "unknown", d
    if d["outcome"] == dc.PROMOTE_ABLE:
        assert set(status.values()) == {"pass"}
    # a claimed goodput drop is a failure of "throughput and latency?", so KEEP
    if any(c.get("rate") and c["survives"] and c["rate"]["verdict"] == "A higher"
           for c in rep["claims"]):
        assert status[dc.Q_SPEED] == "fail" and d["outcome"] == dc.KEEP, d
    # legs whose hit rates differ beyond the bound: never a pass of that question
    if any(r["rule"] == rp.RULE_CACHE for c in rep["claims"] if c.get("test") or c.get("rate")
           for r in c["refused_by"]):
        assert status[dc.Q_SPEED] != "pass", d


def test_the_unspoilt_random_report_is_promote_able() -> None:
    assert dc.decide(_GOOD).outcome == dc.PROMOTE_ABLE, dc.decide(_GOOD)


def test_needs_name_compare_once_and_fits_says_what_records_a_budget() -> None:
    """What would decide it names `seat-console compare` once, with every flag asked for, and
    a missing fit budget says what to run (issue 30 follow-up, item 5)."""
    from seat_console.evidence.decision import FIT_HOW, merge_needs

    got = merge_needs(["both arms measured in one bracket (`seat-console compare`)",
                       "a compare with fidelity on (without --no-fidelity)",
                       "≥ 3 rounds (6 pairs): `seat-console compare --rounds 3`", FIT_HOW,
                       "both arms measured in one bracket (`seat-console compare`)"])
    assert got.count("seat-console compare") == 1, got
    assert got.startswith("one `seat-console compare --rounds 3` for: both arms measured in "
                          "one bracket; with fidelity on (without --no-fidelity); ≥ 3 rounds")
    assert "`seat-console fit`" in got
    assert merge_needs(["x", "x", ""]) == "x"
    assert "`seat-console fit`" in FIT_HOW and "no fit budget" not in FIT_HOW


def test_the_canaries_pass_says_each_verdict_once_with_its_kinds() -> None:
    """Met by a new on-call engineer: "all no difference can be claimed, arithmetic no
    difference can be claimed, …" — the verdict repeated per kind and run into its name."""
    rep = json.loads(json.dumps(_GOOD))
    kinds = {"all": "no difference can be claimed", "arithmetic": "no difference can be claimed",
             "code": "B higher"}
    rep["canaries"] = {"comparisons": {k: {"verdict": v} for k, v in kinds.items()}}
    rep["claims"] = [c for c in rep["claims"] if not str(c["subject"]).startswith("canaries")]
    rep["claims"] += [_claim(f"canaries ({k})", _OVERLAP if v.startswith("no") else [])
                      for k, v in kinds.items()]
    a = dc.answer_canaries(rep)
    assert a.status == dc.PASS, a
    assert a.answer == ("yes: no kind is worse on B (no difference can be claimed: all, "
                      "arithmetic; B higher: code)"), a.answer
