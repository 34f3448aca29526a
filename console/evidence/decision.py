"""The decision: from an evidence report, PROMOTE-ABLE, KEEP or INCONCLUSIVE, per question.

Pure: reads only the report's JSON-ready dict (:func:`seat_console.evidence.report.build_report`),
so a decision is re-derived with the report (``report --verify``) and is the same in every
front. The questions, each answered or "cannot tell, because …; needs …":

========================  ========  =======================================================
question                  critical  fails when
========================  ========  =======================================================
enough data?              yes       (never fails: too little data is "cannot tell") — arms
                                    not told from the runs, an arm missing, the bracket not
                                    complete or not given whole, a phase's figures refused,
                                    an arm of mixed identities, an incomplete population;
                                    "too little data" at ≥ 50 % of them incomplete
fits?                     yes       the candidate's fit budget says it does not fit
KV capacity?              no        the candidate's engine holds fewer KV tokens than the
                                    resident's (the engines' own startup figures)
fidelity?                 yes       a reproducible divergence where none is expected (the
                                    same checkpoint on both arms), or any case whose top-20
                                    sets share no token at a position both arms reached
canaries?                 yes       a kind's pass rate is lower on B by a claimed difference
                                    (disjoint Wilson 95 % intervals over distinct trials)
throughput and latency?   no        a figure is worse on B by a claimed difference (exact
                                    sign-flip test over pairs of legs, p ≤ 0.05), or B's
                                    goodput is lower by a claimed difference (the canaries'
                                    rule: disjoint Wilson 95 % intervals over distinct
                                    requests); "cannot tell" when the legs' prefix-cache
                                    hit rates differ beyond the report's bound
========================  ========  =======================================================

The outcome (the order matters: a failure is decisive, too little data is never a pass):

* **KEEP** — a question failed: a critical check, or the candidate is worse by a claimed
  difference;
* **INCONCLUSIVE** — nothing failed, but some question cannot be answered; ``needs`` says what
  would decide it (e.g. "≥ 3 rounds (6 pairs)"; ``seat-console decide`` adds the minutes this
  node's measured swap and probe times forecast);
* **PROMOTE-ABLE** — every question answered and passed: nothing measured speaks against the
  candidate and every critical check passed.

Sources of the rules:

* Kayenta's ACA judge (``kayenta-judge`` ``NetflixACAJudge.scala``): a failed *critical* metric
  fails the whole analysis whatever the other metrics score — here canaries and fidelity veto
  whatever throughput says; ≥ 50 % missing data is never a pass (Kayenta: a metric with more
  than half its data missing is a "NodataFailMetric"); here it is "cannot tell";
* Argo Rollouts' analysis (``docs/features/analysis.md``): three outcomes, Successful / Failed /
  Inconclusive, Inconclusive pausing for a person; its issue #4479 (an analysis "Successful"
  while every measurement errored) is the bug this module never has: an answer needs data;
* the claim rules themselves are the report's A/A-calibrated ones (``docs/evidence.md``,
  "Statistics"): a difference speaks against the candidate only when the report claims it
  (the sign-flip test at p ≤ 0.05 over ≥ 6 pairs of legs; disjoint Wilson intervals); no new
  threshold is added here, and a refused claim is never read as parity or as a regression.
"""

from __future__ import annotations

import re

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

PROMOTE_ABLE = "PROMOTE-ABLE"
KEEP = "KEEP"
INCONCLUSIVE = "INCONCLUSIVE"
OUTCOMES = (PROMOTE_ABLE, KEEP, INCONCLUSIVE)

PASS, FAIL, UNKNOWN = "pass", "fail", "unknown"

MISSING_SHARE = 0.5
"""At or above this share of incomplete measured populations the data are too few (Kayenta)."""

Q_DATA = "enough data?"
Q_FITS = "fits?"
Q_KV = "KV capacity?"
Q_FIDELITY = "fidelity?"
Q_CANARIES = "canaries?"
Q_SPEED = "throughput and latency?"
QUESTIONS = (Q_DATA, Q_FITS, Q_KV, Q_FIDELITY, Q_CANARIES, Q_SPEED)
CRITICAL = frozenset({Q_DATA, Q_FITS, Q_FIDELITY, Q_CANARIES})

# the report's rule names (kept as strings: evidence.report imports this module)
_RULE_OVERLAP = "overlapping intervals"
_RULE_UNDERPOWERED = "design cannot reach 95 %"
_RULE_NOT_SIGNIFICANT = "not significant"
_RULE_UNKNOWN = "unknown"
_RULE_CACHE = "cache state differs"
_FIDELITY_SUBJECT = "fidelity (localisation, not KL)"


@dataclass(frozen=True)
class Answer:
    """One question's answer: ``question``; ``status`` pass / fail / unknown; ``critical``;
    ``answer`` (the sentence: for unknown, "cannot tell, because …; needs …"); ``needs``
    (what would answer it, ``""`` when answered)."""

    question: str
    status: str
    answer: str
    needs: str = ""

    @property
    def critical(self) -> bool:
        """Whether a failure vetoes the candidate whatever else says (:data:`CRITICAL`)."""
        return self.question in CRITICAL

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready: question, status, critical, answer, needs."""
        return {"question": self.question, "status": self.status, "critical": self.critical,
                "answer": self.answer, "needs": self.needs}


def _unknown(question: str, because: str, needs: str) -> Answer:
    return Answer(question, UNKNOWN, f"cannot tell, because {because}; needs {needs}", needs)


@dataclass(frozen=True)
class Decision:
    """The outcome (:data:`OUTCOMES`), the ``answers`` in :data:`QUESTIONS` order, ``why``
    (one sentence), ``needs`` (what would decide an INCONCLUSIVE; ``""`` otherwise) and
    ``rounds_needed`` (the bracket rounds a throughput/latency claim needs when that is what
    is missing, else ``None``)."""

    outcome: str
    answers: tuple[Answer, ...]
    why: str
    needs: str = ""
    rounds_needed: int | None = None
    arms: Mapping[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready (strict JSON: no NaN or infinity)."""
        return {"outcome": self.outcome, "why": self.why, "needs": self.needs,
                "rounds_needed": self.rounds_needed, "arms": dict(self.arms),
                "questions": [a.as_dict() for a in self.answers]}


# -- the questions ---------------------------------------------------------------------------
def _claims(rep: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    return [c for c in rep.get("claims") or [] if isinstance(c, Mapping)]


def _rules(claim: Mapping[str, Any]) -> list[str]:
    return [str(r.get("rule")) for r in claim.get("refused_by") or [] if isinstance(r, Mapping)]


def _refusal_text(claim: Mapping[str, Any], skip: Iterable[str] = ()) -> str:
    skip = set(skip)
    return "; ".join(f"rule {r.get('rule')}: {r.get('detail')}"
                     for r in claim.get("refused_by") or []
                     if isinstance(r, Mapping) and r.get("rule") not in skip)


def _arm(rep: Mapping[str, Any], arm: str) -> Mapping[str, Any]:
    v = (rep.get("arms") or {}).get(arm)
    return v if isinstance(v, Mapping) else {}


def answer_data(rep: Mapping[str, Any]) -> Answer:
    """Enough data? Arms told from the runs (not from argument order), both arms present, the
    bracket complete, fewer than :data:`MISSING_SHARE` of the measured populations incomplete
    (and none, for an answer), every phase's own figures unrefused (not disrupted, not edited),
    one identity per arm, both arms in one bracket. Never fails: too little data is "cannot
    tell"."""
    assign = rep.get("arms_assignment")
    if not isinstance(assign, Mapping) or not assign.get("by"):
        return _unknown(Q_DATA, "the report does not record how its arms were told",
                        "a report built by this console (`seat-console report`)")
    if assign.get("problem"):
        return _unknown(Q_DATA, f"the arms cannot be told from the runs ({assign['problem']})",
                        "runs that record which side of the seat they measured: a compare "
                        "bracket (`seat-console compare`), or probe runs of this console")
    arms = rep.get("arms") or {}
    missing = [a for a in ("A", "B") if a not in arms]
    if missing:
        side = {"A": "resident (arm A)", "B": "candidate (arm B)"}
        return _unknown(Q_DATA, "there are no runs of the " + " or the ".join(
            side[a] for a in missing), "both arms measured in one bracket "
                                       "(`seat-console compare`)")
    rows = [r for ph in rep.get("phases") or [] for r in ph.get("rows") or []]
    bad = [r for r in rows if not r.get("complete")]
    if not rows:
        return _unknown(Q_DATA, "no phase was measured on either arm",
                        "a compare whose legs run the probe")
    share = len(bad) / len(rows)
    cmp_ = rep.get("comparison")
    cmp_ = cmp_ if isinstance(cmp_, Mapping) else {}
    if share >= MISSING_SHARE:
        return _unknown(Q_DATA, f"too little data: {len(bad)} of {len(rows)} measured "
                                f"populations ({share:.0%}) are incomplete (≥ "
                                f"{MISSING_SHARE:.0%} missing is never a pass)",
                        "a bracket whose legs complete: see the report's retained runs")
    if cmp_ and cmp_.get("status") != "complete":
        return _unknown(Q_DATA, f"the bracket is {cmp_.get('status') or 'of unknown status'}"
                                + (f" ({cmp_.get('reason')})" if cmp_.get("reason") else ""),
                        "a complete bracket (run `seat-console compare` again)")
    if bad:
        names = ", ".join(f"{r.get('run')} {r.get('population')}" for r in bad[:4])
        return _unknown(Q_DATA, f"{len(bad)} of {len(rows)} measured populations are "
                                f"incomplete ({names})",
                        "a bracket whose legs complete: see the report's retained runs")
    for c in _claims(rep):   # an arm of mixed identities; a phase's own figures refused
        subj = str(c.get("subject") or "")
        if not c.get("survives") and (subj.startswith("identity of arm")
                                      or subj.startswith("throughput/latency (")):
            return _unknown(Q_DATA, f"{subj}: {_refusal_text(c)}",
                            "a bracket whose legs are complete, undisturbed and of one "
                            "identity per arm")
    sim = rep.get("simultaneity")
    sim = sim if isinstance(sim, Mapping) else {}
    if not sim.get("simultaneous", False):
        return _unknown(Q_DATA, f"the arms were {sim.get('label') or 'not measured together'}",
                        "both arms measured in one bracket (`seat-console compare`)")
    if not cmp_:   # legs given one by one: a subset of a bracket is survivor filtering
        return _unknown(Q_DATA, "the runs are not a whole comparison (legs given without their "
                                "compare.json): whether the bracket is whole cannot be told",
                        "the comparison itself (`seat-console decide <bracket id>`)")
    return Answer(Q_DATA, PASS, f"yes: {len(rows)} measured populations complete on both "
                                f"arms; arms told by {assign.get('by') or 'the bracket'}")


FIT_HOW = ("a fit budget: check the candidate with `seat-console fit` (the profile's "
           "[candidate] needs its checkpoint or declared sizes); a compare records it")
"""What records a fit budget in the evidence (a compare records ``seat-console fit``'s
budget of the profile's sides, :func:`seat_console.actions.compare.fit_summary`)."""


def answer_fits(rep: Mapping[str, Any]) -> Answer:
    """Fits? The candidate's fit budget (``arms.B.fit.fits``); without one, an engine that
    started in the seat and reported its KV capacity has shown it fits. A budget that says it
    does not fit fails (critical), even if the candidate was started with ``--force``."""
    b = _arm(rep, "B")
    fit = b.get("fit") if isinstance(b.get("fit"), Mapping) else {}
    words = f" ({fit.get('words')})" if fit.get("words") else ""
    name = fit.get("name") or "the candidate"
    if fit.get("fits") is True:
        return Answer(Q_FITS, PASS, f"yes: the fit budget says {name} fits{words}")
    if fit.get("fits") is False:
        return Answer(Q_FITS, FAIL, f"no: the fit budget says {name} does not fit{words}")
    kv = b.get("kv_cache_tokens")
    if isinstance(kv, int) and kv > 0:
        return Answer(Q_FITS, PASS, f"yes: it started in the seat and its engine reported "
                                    f"{kv:,} KV tokens (no fit budget was recorded: "
                                    f"{FIT_HOW})")
    return _unknown(Q_FITS, "no fit budget was recorded for the candidate and its engine's KV "
                            "capacity is unknown", FIT_HOW)


def answer_kv(rep: Mapping[str, Any]) -> Answer:
    """KV capacity? The report's "KV capacity" claim (the engines' own startup figures, one
    per arm): the candidate holding fewer tokens than the resident speaks against it."""
    claim = next((c for c in _claims(rep) if c.get("subject") == "KV capacity"), None)
    a, b = _arm(rep, "A").get("kv_cache_tokens"), _arm(rep, "B").get("kv_cache_tokens")
    if claim is None:
        return _unknown(Q_KV, "there are not two arms to compare",
                        "both arms measured (`seat-console compare`)")
    if not claim.get("survives") or not isinstance(a, int) or not isinstance(b, int) or a <= 0:
        return _unknown(Q_KV, _refusal_text(claim) or "a KV capacity was not recorded",
                        "engines whose startup log states their KV capacity on both arms")
    ratio = b / a
    text = f"candidate / resident = {ratio:.2f}× ({b:,} vs {a:,} tokens, engines' startup logs)"
    if b < a:
        return Answer(Q_KV, FAIL, f"lower: {text}")
    return Answer(Q_KV, PASS, f"{'higher' if b > a else 'the same'}: {text}")


def _same_checkpoint(rep: Mapping[str, Any]) -> tuple[bool | None, str]:
    """Whether both arms serve the same weights, from the fit records' checkpoint names (else
    the served model names): ``(True/False/None unknown, how it was told)``."""
    fa = _arm(rep, "A").get("fit") or {}
    fb = _arm(rep, "B").get("fit") or {}
    na = fa.get("name") if isinstance(fa, Mapping) else None
    nb = fb.get("name") if isinstance(fb, Mapping) else None
    if na and nb:
        return na == nb, f"checkpoints {na} and {nb}"
    ma = (_arm(rep, "A").get("identity") or {}).get("served_model")
    mb = (_arm(rep, "B").get("identity") or {}).get("served_model")
    if ma and mb:
        return ma == mb, f"served models {ma} and {mb}"
    return None, "checkpoints not recorded"


def answer_fidelity(rep: Mapping[str, Any]) -> Answer:
    """Fidelity? The report's cross-arm fidelity claim (greedy top-20 traces, every pair of
    the bracket, with the within-arm control). Fails (critical) when it survives saying B
    diverges and the arms serve the same checkpoint (nothing should change the outputs), or
    when a case's top-20 sets share no token at a position both arms reached (B's distribution
    on A's own prefix has nothing in common with A's: broken, whatever the weights). A
    divergence between different checkpoints is expected: it passes, said so (this is a
    localisation signal, not a quality measure — the canaries judge answers)."""
    claim = next((c for c in _claims(rep) if c.get("subject") == _FIDELITY_SUBJECT), None)
    if claim is None:
        why = ("no fidelity traces were recorded" if not rep.get("fidelity")
               else "only one arm has fidelity traces")
        return _unknown(Q_FIDELITY, why, "a compare with fidelity on (without --no-fidelity)")
    if not claim.get("survives"):
        return _unknown(Q_FIDELITY, _refusal_text(claim),
                        "a bracket whose arms each reproduce their own outputs, undisturbed")
    pairs = [p for p in (rep.get("fidelity") or {}).get("pairs") or []
             if isinstance(p, Mapping) and str(p.get("a", ""))[:1] != str(p.get("b", ""))[:1]]
    cases = [c for p in pairs for c in p.get("cases") or [] if isinstance(c, Mapping)]
    if not cases:
        return _unknown(Q_FIDELITY, "the report holds no cross-arm fidelity case",
                        "a compare with fidelity on (without --no-fidelity)")
    collapsed = [c for c in cases if c.get("min_top_overlap") == 0]
    statement = str(claim.get("statement") or "")
    if collapsed:
        return Answer(Q_FIDELITY, FAIL, "no: B's top-20 set shares no token with A's on A's own "
                                        "prefix in " + ", ".join(sorted({str(c.get('case_id'))
                                                                        for c in collapsed}))
                      + f" ({statement})")
    if all(c.get("exact") for c in cases):
        return Answer(Q_FIDELITY, PASS, f"yes: {statement}")
    same, how = _same_checkpoint(rep)
    if same:
        return Answer(Q_FIDELITY, FAIL, f"no: the arms serve the same weights ({how}), yet "
                                        f"{statement}, while each arm reproduces itself")
    if same is None:
        return _unknown(Q_FIDELITY, f"{statement}, and whether the arms serve the same weights "
                                    f"is not recorded ({how})",
                        "the fit budgets of both arms (a compare records them)")
    return Answer(Q_FIDELITY, PASS, f"expected divergence of different weights ({how}): "
                                    f"{statement}; top-20 sets overlap at every compared "
                                    "position (a localisation signal, not a quality verdict)")


def answer_canaries(rep: Mapping[str, Any]) -> Answer:
    """Canaries? Per kind, the report's pass-rate comparison over distinct trials: a kind
    whose rate is lower on B by a claimed difference (disjoint Wilson 95 % intervals, the
    report's surviving claim) fails (critical); overlapping intervals are "no difference can
    be claimed" (a pass); any other refusal (incomplete population, disrupted, unmatched) is
    cannot tell."""
    can = rep.get("canaries")
    if not can:
        return _unknown(Q_CANARIES, "no canary results were recorded",
                        "a compare with canaries on (without --no-canaries)")
    comps = can.get("comparisons") or {}
    if not comps:
        return _unknown(Q_CANARIES, "only one arm has canary results",
                        "canaries on both arms of one bracket")
    claims = {str(c.get("subject")): c for c in _claims(rep)}
    worse, unknown = [], []
    fine: dict[str, list[str]] = {}   # verdict -> the kinds that have it
    for kind, comp in sorted(comps.items()):
        claim = claims.get(f"canaries ({kind})", {})
        verdict = comp.get("verdict") if isinstance(comp, Mapping) else None
        other = [r for r in _rules(claim) if r != _RULE_OVERLAP]
        if other or verdict not in ("A higher", "B higher", "no difference can be claimed"):
            unknown.append(f"{kind}: " + (_refusal_text(claim, {_RULE_OVERLAP})
                                          or str(verdict)))
        elif verdict == "A higher" and claim.get("survives"):
            worse.append(f"{kind}: {claim.get('statement')}")
        else:
            fine.setdefault(str(verdict), []).append(kind)
    if worse:
        return Answer(Q_CANARIES, FAIL, "no: B passes fewer by a claimed difference — "
                                        + "; ".join(worse))
    if unknown:
        return _unknown(Q_CANARIES, "; ".join(unknown),
                        "complete canary populations on both arms of one undisturbed bracket")
    # each verdict said once, with its kinds: "no difference can be claimed: all, code"
    return Answer(Q_CANARIES, PASS, "yes: no kind is worse on B ("
                  + "; ".join(f"{v}: {', '.join(k)}" for v, k in fine.items()) + ")")


def _goodput_claims(rep: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """The report's goodput difference claims between two arms (those carrying a ``rate``
    block of kind goodput: :class:`seat_console.evidence.report.Claim`)."""
    return [c for c in _claims(rep) if isinstance(c.get("rate"), Mapping)
            and c["rate"].get("kind") == "goodput"]


def _read_goodput(claims: Sequence[Mapping[str, Any]], worse: list[str], better: list[str],
                  none: list[str], unknown: list[str]) -> None:
    """Sort the goodput difference claims the way :func:`answer_speed` sorts the figures: a
    surviving claim that B's goodput is lower is worse (the canaries' rule: disjoint Wilson
    intervals), higher is better, overlapping intervals are no difference, anything else
    (an incomplete population, an arm with no goodput, unmatched SLOs, cache state) unknown."""
    for c in claims:
        r = c["rate"]
        name = f"goodput ({r.get('phase')})"
        verdict = r.get("verdict")
        if c.get("survives") and verdict in ("A higher", "B higher"):
            (worse if verdict == "A higher" else better).append(f"{name}: {c.get('statement')}")
        elif _rules(c) == [_RULE_OVERLAP] and verdict == "no difference can be claimed":
            none.append(name)
        else:
            unknown.append(f"{name}: " + (_refusal_text(c) or f"verdict {verdict!r}"))


def _cache_refusals(claims: Sequence[Mapping[str, Any]]) -> list[str]:
    """The distinct details of the cache rule among ``claims``' refusals (legs whose
    prefix-cache hit rates differ beyond the report's bound, or are partly unknown)."""
    return list(dict.fromkeys(str(r.get("detail")) for c in claims
                              for r in c.get("refused_by") or []
                              if isinstance(r, Mapping) and r.get("rule") == _RULE_CACHE))


def answer_speed(rep: Mapping[str, Any]) -> tuple[Answer, int | None]:
    """Throughput and latency? Every figure × phase difference claim of the report (exact
    sign-flip test over pairs of legs) and every goodput difference claim (the canaries'
    rule: disjoint Wilson 95 % intervals over distinct requests): a surviving claim that B is
    worse (lower tok/s, higher latency, lower goodput) fails; a latency figure recorded on no
    leg of either arm (e.g. ITL from a probe without token times) is left out, said so —
    throughput never is; legs whose prefix-cache hit rates differ beyond the report's bound
    (its rule "cache state differs") make it cannot tell — a phase may have measured cache
    state, not the arm; not significant at a design that can reach p ≤ 0.05 passes (no
    difference can be claimed, the minimum detectable effect said); a design that cannot reach
    it (fewer than 6 pairs) is cannot tell, needing the rounds it names. Returns the answer and
    the rounds a claim needs (``None`` unless that is what is missing)."""
    tests = [c for c in _claims(rep) if isinstance(c.get("test"), Mapping)]
    goodput = _goodput_claims(rep)
    if not tests and not goodput:
        return _unknown(Q_SPEED, "there are no pairs of A and B legs to compare",
                        "both arms measured in one bracket (`seat-console compare`)"), None
    worse: list[str] = []
    better: list[str] = []
    unknown: list[str] = []
    none: list[str] = []
    unmeasured: list[str] = []
    rounds_needed: int | None = None
    mdes: list[float] = []
    for c in tests:
        t = c["test"]
        name = f"{t.get('figure')} ({t.get('phase')})"
        ratio = t.get("ratio_b_over_a")
        rules = _rules(c)
        if c.get("survives") and isinstance(ratio, (int, float)):
            bad = ratio < 1 if t.get("higher_is_better") else ratio > 1
            p = t.get("p_value")
            (worse if bad else better).append(
                f"{name} B/A {ratio:.3f}× (p = "
                + (f"{p:.3f}" if isinstance(p, (int, float)) else "unknown") + ")")
        elif (rules == [_RULE_UNKNOWN] and t.get("unknown_on_every_leg")
              and not t.get("higher_is_better")):
            unmeasured.append(name)    # a latency figure this probe never records (e.g. ITL)
        elif rules == [_RULE_NOT_SIGNIFICANT]:
            none.append(name)
            if isinstance(t.get("mde_ratio"), (int, float)):
                mdes.append(float(t["mde_ratio"]))
        elif [r for r in rules if r != _RULE_CACHE] == [_RULE_UNDERPOWERED]:
            n = t.get("rounds_needed")   # (with the cache rule too: both needs are named)
            rounds_needed = max(rounds_needed or 0, n if isinstance(n, int) else 0) or None
            unknown.append(f"{name}: {t.get('pairs')} pair(s) cannot reach p ≤ 0.05")
        else:
            unknown.append(f"{name}: " + _refusal_text(c))
    _read_goodput(goodput, worse, better, none, unknown)
    if worse:
        return Answer(Q_SPEED, FAIL, "worse by a claimed difference: " + "; ".join(worse)
                      + (f" (better: {'; '.join(better)})" if better else "")
                      + " — read a lone claimed figure with the A/A rate of docs/evidence.md "
                        "in mind"), None
    cache = _cache_refusals([*tests, *goodput])
    if cache:
        design = (f"; and ≥ {rounds_needed} rounds (`seat-console compare --rounds "
                  f"{rounds_needed}`)" if rounds_needed else "")
        return _unknown(Q_SPEED, "the legs' prefix-cache hit rates differ beyond the report's "
                                 "bound, so a phase may have measured cache state, not the arm "
                                 f"({'; '.join(cache[:2])})",
                        "legs that start cache-clean (probe.prefix_cache \"auto\": the "
                        "engine's reset, else a nonce per prompt) with hit rates within the "
                        f"bound on both arms{design}"), rounds_needed
    if unknown:
        design = [u for u in unknown if "cannot reach" in u]
        if design and len(design) == len(unknown) and rounds_needed:
            per = (tests[0]["test"].get("pairs_per_round") if tests else None) or 2
            return _unknown(Q_SPEED, f"this design cannot claim a difference ({design[0]}; "
                                     f"{len(design)} figure(s) alike)",
                            f"≥ {rounds_needed} rounds ({rounds_needed * per} pairs): "
                            f"`seat-console compare --rounds {rounds_needed}`"), rounds_needed
        return _unknown(Q_SPEED, "; ".join(unknown[:3]) + (f" (+{len(unknown) - 3} more)"
                                                           if len(unknown) > 3 else ""),
                        "a complete, undisturbed bracket of ≥ 3 rounds"), rounds_needed
    if not none and not better:
        return _unknown(Q_SPEED, "no figure was measured on both arms",
                        "a bracket whose probe records its figures"), None
    mde = f"; minimum detectable effect up to ×{max(mdes):.3f}" if mdes else ""
    skipped = (f"; not recorded on any leg: {', '.join(unmeasured)}" if unmeasured else "")
    return Answer(Q_SPEED, PASS, f"no figure is worse by a claimed difference ({len(none)} not "
                                 f"significant" + (f"; better: {'; '.join(better)}" if better
                                                   else "") + f"{mde}{skipped})"), None


# -- the outcome -----------------------------------------------------------------------------
def decide(rep: Mapping[str, Any]) -> Decision:
    """The decision for a report (module docstring: the questions, the outcome's order, the
    rules' sources). Never raises for a report :func:`~seat_console.evidence.report.
    build_report` made; a field it cannot read is "cannot tell"."""
    speed, rounds = answer_speed(rep)
    answers = (answer_data(rep), answer_fits(rep), answer_kv(rep), answer_fidelity(rep),
               answer_canaries(rep), speed)
    return outcome_of(answers, rounds, arms={
        a: {"side": {"A": "resident", "B": "candidate"}[a],
            "image_id": (_arm(rep, a).get("identity") or {}).get("image_id"),
            "runs": [r.get("name") for r in _arm(rep, a).get("runs") or []]}
        for a in ("A", "B") if a in (rep.get("arms") or {})})


def outcome_of(answers: Sequence[Answer], rounds_needed: int | None = None,
               arms: Mapping[str, Any] | None = None) -> Decision:
    """Combine answers: any failure → KEEP (critical ones named first); else any "cannot
    tell" → INCONCLUSIVE with what each needs; else PROMOTE-ABLE."""
    failed = sorted((a for a in answers if a.status == FAIL), key=lambda a: not a.critical)
    unknown = [a for a in answers if a.status == UNKNOWN]
    if failed:
        why = "; ".join(f"{a.question} {'(critical) ' if a.critical else ''}{a.answer}"
                        for a in failed)
        return Decision(KEEP, tuple(answers), why, "", None, arms or {})
    if unknown:
        needs = merge_needs([a.needs for a in unknown])
        why = "; ".join(f"{a.question} {a.answer}" for a in unknown)
        return Decision(INCONCLUSIVE, tuple(answers), why, needs,
                        rounds_needed if any(a.question == Q_SPEED for a in unknown) else None,
                        arms or {})
    return Decision(PROMOTE_ABLE, tuple(answers), "nothing measured speaks against the "
                    "candidate and every critical check passed", "", None, arms or {})


_COMPARE_CMD = re.compile(r"`seat-console compare((?: --[\w-]+(?: \d+)?)*)`")
_COMPARE_WORDS = (re.compile(r"\s*\(run `seat-console compare[^`]*` again\)"),
                  re.compile(r"\s*\(`seat-console compare[^`]*`\)"),
                  re.compile(r":\s*`seat-console compare[^`]*`"),
                  re.compile(r"^a compare (?=with)"))


def merge_needs(needs: Sequence[str]) -> str:
    """What would decide an INCONCLUSIVE, one clause per need, ``"; "``-joined, each said once;
    the needs one compare answers (those that name `seat-console compare`, or "a compare with
    …") merged into one clause that names the command once, with every flag any of them asks
    for (``"one `seat-console compare --rounds 3` for: both arms measured in one bracket;
    ≥ 3 rounds (6 pairs); with fidelity on (without --no-fidelity)"``)."""
    uniq = list(dict.fromkeys(n for n in needs if n))
    by_cmp = [n for n in uniq if _COMPARE_CMD.search(n) or n.startswith("a compare with")]
    if len(by_cmp) < 2:
        return "; ".join(uniq)
    flags = list(dict.fromkeys(f.strip() for n in by_cmp for m in _COMPARE_CMD.finditer(n)
                               for f in m.group(1).split(" --") if f.strip()))
    what = []
    for n in by_cmp:
        for rx in _COMPARE_WORDS:
            n = rx.sub("", n)
        what.append(n.strip(" :;,") or "a complete bracket")
    cmd = "`seat-console compare" + "".join(f" --{f}" for f in flags) + "`"
    return "; ".join([f"one {cmd} for: " + "; ".join(dict.fromkeys(what)),
                      *(n for n in uniq if n not in by_cmp)])


def render_lines(d: Mapping[str, Any]) -> list[str]:
    """The decision as Markdown lines (the report's first section; ``decide``'s text):
    the outcome, why, what would decide it, then one line per question."""
    L = [f"## Decision: **{d.get('outcome')}**", "", str(d.get("why") or "")]
    if d.get("needs"):
        L += ["", f"What would decide it: {d['needs']}"]
    L.append("")
    for q in d.get("questions") or []:
        mark = {PASS: "ok  ", FAIL: "FAIL", UNKNOWN: "?   "}.get(str(q.get("status")), "?   ")
        L.append(f"- {mark} {q.get('question')}{' (critical)' if q.get('critical') else ''} "
                 f"{q.get('answer')}")
    return L


__all__ = ["Answer", "CRITICAL", "Decision", "FIT_HOW", "INCONCLUSIVE", "KEEP", "OUTCOMES",
           "PROMOTE_ABLE", "QUESTIONS", "decide", "merge_needs", "outcome_of", "render_lines"]
