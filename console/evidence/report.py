"""The evidence report: identity, fit and KV capacity, phases with populations, fidelity,
canaries, every retained non-complete run, the claims that survive and those refused (with
the rule), and the SHA-256 of every raw file it was built from.

Rules (``docs/evidence.md`` explains each and the claim it guards):

* :data:`RULE_INCOMPLETE` — a figure from a phase whose expected = attempted = completed does
  not hold (in any run of either arm) is not a claim;
* :data:`RULE_DISRUPTED` — a run with interference (or a non-complete status) backs no claim;
* :data:`RULE_NOT_SIMULTANEOUS` — arms not measured in one bracket are "not simultaneous
  (taken N days apart)": no cross-arm claim;
* :data:`RULE_UNMATCHED` — the arms must have measured the same case IDs;
* :data:`RULE_OVERLAP` — a pass-rate difference is claimed only when the Wilson 95 %
  intervals of the independent trials are disjoint: "no difference can be claimed";
* :data:`RULE_UNDERPOWERED` / :data:`RULE_NOT_SIGNIFICANT` — a throughput or latency
  difference is claimed only from the exact sign-flip test over the bracket's pairs of legs at
  p ≤ 0.05 (:func:`difference_claim`), and never from a design that cannot reach it;
* :data:`RULE_SUMMARY_EDITED` — a run whose ``summary.json`` disagrees with the figures
  re-derived from its ``requests.jsonl`` backs no claim;
* :data:`RULE_UNKNOWN` — a figure that was not recorded (e.g. the KV capacity) is unknown,
  never 0, and backs no claim;
* :data:`RULE_IDENTITY` — the legs of one arm must share one identity (image, digest, patches,
  served model).

Pure except :func:`load_inputs` (reads files) and :func:`verify` (re-reads them).
"""

from __future__ import annotations

import hashlib
import json
import math
import re
import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from seat_console.core import engine_timing
from seat_console.core.fmt import fmt_duration, zulu_time
from seat_console.core.probe_stats import TPOT_ONE_READ
from seat_console.evidence import canaries as can
from seat_console.evidence import fidelity as fid
from seat_console.evidence.runs import (
    FileLedger,
    Identity,
    Phase,
    RunError,
    SIDE_CANDIDATE,
    SIDE_RESIDENT,
    RunSummary,
    input_path,
    is_kind,
    load_leg,
    load_probe_run,
    parse_time,
    read_json,
    shown,
)
from seat_console.core.sweep import GOODPUT_MIN, GROWTH_MIN, SweepStep, judge
from seat_console.evidence.stats import (
    NO_DIFFERENCE,
    Interval,
    RateComparison,
    compare_rates,
    pairs_needed,
    sign_flip_test,
    wilson_interval,
)

REPORT_FORMAT = 2
"""The report's format version: bumped with every change to the report's fields or text, so
``report --verify`` can tell a report written by an older console (whose text this console
cannot re-derive to the letter) from an edited one (:func:`report_format`).

* ``1`` — every report written before this number was kept (JSON ``schema`` ``…/1``, or a
  Markdown report without a "Report format" line); its format changed under that one number
  (the decision, goodput, cache, server and sweep tables were added), so a difference found
  re-deriving it is not evidence of an edit;
* ``2`` — the Markdown report states its format (``Report format seat-console.evidence-
  report/2.``); the JSON ``schema`` says it."""
REPORT_SCHEMA = f"seat-console.evidence-report/{REPORT_FORMAT}"
_SCHEMA_RE = re.compile(r"seat-console\.evidence-report/(\d{1,6})")
_MD_FORMAT = re.compile(r"^Report format seat-console\.evidence-report/(\d{1,6})\.$")

RULE_INCOMPLETE = "incomplete population"
RULE_DISRUPTED = "disrupted"
RULE_NOT_SIMULTANEOUS = "not simultaneous"
RULE_UNMATCHED = "unmatched cases"
RULE_OVERLAP = "overlapping intervals"
RULE_UNKNOWN = "unknown"
RULE_IDENTITY = "mixed identities"
RULE_UNDERPOWERED = "design cannot reach 95 %"
RULE_NOT_SIGNIFICANT = "not significant"
RULE_SUMMARY_EDITED = "summary disagrees with raw requests"
RULE_NOT_REPRODUCIBLE = "arm not reproducible"
RULE_CACHE = "cache state differs"

CACHE_HIT_RATE_BOUND = 0.05
"""The widest spread of prefix-cache hit rates (absolute, 0–1) among the legs of a phase that
still backs a cross-arm claim: beyond it a phase may have measured cache state, not the arm."""

RULES: dict[str, str] = {
    RULE_INCOMPLETE: "every phase behind a figure has expected = attempted = completed",
    RULE_DISRUPTED: "no run behind a claim was disrupted, interrupted, failed or killed",
    RULE_NOT_SIMULTANEOUS: "cross-arm claims need both arms measured in one bracket",
    RULE_UNMATCHED: "both arms measured the same case IDs",
    RULE_OVERLAP: "a pass-rate or goodput difference needs disjoint Wilson 95 % intervals over "
                  "independent trials, else no difference can be claimed",
    RULE_UNKNOWN: "a figure that was not recorded is unknown, never 0, and backs no claim",
    RULE_CACHE: "cross-arm claims need the legs' prefix-cache hit rates within "
                f"{CACHE_HIT_RATE_BOUND:.2f} of each other (each known where any is)",
    RULE_IDENTITY: "every leg of an arm ran the same image, digest, patches and model",
    RULE_UNDERPOWERED: "a throughput/latency difference needs enough pairs of legs for the "
                       "exact sign-flip test to reach p <= 0.05 (6 pairs: 3 ABBA rounds)",
    RULE_NOT_SIGNIFICANT: "a throughput/latency difference needs p <= 0.05 in the exact "
                          "sign-flip test over pairs of legs (leg = unit)",
    RULE_NOT_REPRODUCIBLE: "a fidelity divergence between arms is claimed only when each "
                           "arm's own legs agree exactly (the within-arm control)",
    RULE_SUMMARY_EDITED: "every figure of a run's summary.json equals the figure re-derived "
                         "from its requests.jsonl",
}


# -- inputs ----------------------------------------------------------------------------------
@dataclass(frozen=True)
class Inputs:
    """What a report is built from: ``runs`` (each with ``arm`` set to "A" or "B"),
    ``comparison`` (the ``compare.json`` dict, or ``None`` for plain runs), ``files`` (path →
    SHA-256 of every raw file read), ``sources`` (the absolute directories the RUN arguments
    named, in path order: what ``report --verify`` re-derives the report from),
    ``arms_assignment`` (how the arms were told, :func:`assign_arms`; ``None``: built by
    hand, every run's ``arm`` taken as given)."""

    runs: tuple[RunSummary, ...]
    comparison: Mapping[str, Any] | None
    files: Mapping[str, str]
    sources: tuple[str, ...] = ()
    arms_assignment: Mapping[str, Any] | None = None


def _resolve(arg: str, data_root: Path | None) -> Path:
    what = shown(arg)
    p = input_path(arg, what, expand_user=True)
    if is_kind(p, what, "dir"):
        try:
            return p.resolve()
        except (OSError, RuntimeError) as exc:   # a symlink loop: RuntimeError on 3.11
            raise RunError(f"{what}: cannot resolve ({exc})") from None
    from seat_console.core.paths import data_dir

    base = data_root or data_dir()
    for sub in ("runs", "comparisons"):
        if not p.is_absolute() and is_kind(base / sub / arg, what, "dir"):
            return (base / sub / arg).resolve()
    raise RunError(f"{what}: no such run directory, and no run or comparison with that ID under "
                   f"{base}/runs or {base}/comparisons (see `seat-console runs`)")


def load_inputs(args: Sequence[str], data_root: Path | None = None) -> Inputs:
    """Read every RUN argument: a comparison directory (``compare.json``), a leg directory
    (``leg.json``) or a probe run directory (``summary.json``), by path or by ID under the data
    dir (``data_root``, default the probe store's).

    The arguments' order never matters: the directories are read in path order, and the arms
    come from the runs themselves (:func:`assign_arms`): a leg's arm is the one its bracket
    recorded; a plain run's is the seat side its probe recorded measuring (resident → A,
    candidate → B), an identity without a recorded side taking the side the other identity
    does not have. More than two identities is an error.

    Raises :class:`RunError` naming the argument or file.
    """
    if not args:
        raise RunError("give at least one RUN (a run or comparison ID or directory)")
    ledger = FileLedger()
    comparison: dict[str, Any] | None = None
    runs: list[RunSummary] = []
    plain: list[RunSummary] = []
    resolved = sorted({str(_resolve(arg, data_root)): arg for arg in args}.items())
    sources: list[str] = []
    for ds, arg in resolved:
        d = Path(ds)
        sources.append(ds)
        if is_kind(d / "compare.json", arg):
            if comparison is not None:
                raise RunError(f"{arg}: one comparison per report (give its legs' runs "
                               f"instead to mix comparisons)")
            cp = d / "compare.json"
            comparison = read_json(ledger.read(cp), str(cp))
            if not isinstance(comparison, dict) or not isinstance(comparison.get("legs"), list):
                raise RunError(f"{cp}: not a comparison record (no 'legs' list)")
            for leg in comparison["legs"]:
                runs.append(load_leg(d / str(leg), ledger))
        elif is_kind(d / "leg.json", arg):
            runs.append(load_leg(d, ledger))
        else:
            plain.append(load_probe_run(d, ledger))
    if plain and runs:
        raise RunError("give either comparison legs or plain probe runs, not both: plain runs "
                       "are put in arms by identity, legs by their bracket")
    runs, assignment = assign_arms(runs, plain)
    return Inputs(runs=tuple(runs), comparison=comparison, files=dict(ledger.files),
                  sources=tuple(sources), arms_assignment=assignment)


_SIDE_ARM = {SIDE_RESIDENT: "A", SIDE_CANDIDATE: "B"}


def _start_key(r: RunSummary) -> tuple[str, str, str]:
    return (r.started_at.isoformat() if r.started_at else "~", r.run_id, str(r.path))


def assign_arms(legs: Sequence[RunSummary], plain: Sequence[RunSummary]
                ) -> tuple[list[RunSummary], dict[str, Any]]:
    """The runs with their arms (A = the resident, B = the candidate) and how they were told:
    ``{"by": …, "problem": str | None}`` — ``problem`` set when the runs do not say which side
    each measured, or contradict themselves; then the arms are labelled for display only
    (earliest-started identity = A) and no decision rests on them.

    * legs of a bracket: the arm ``leg.json`` recorded; a leg whose probe recorded measuring
      the other side of the seat (``identity.container.role``) is a problem (a compare that
      began with the candidate in the seat measured it as arm A — issue 30);
    * plain probe runs: grouped by identity (image, digest, patches, model); a group's arm is
      the side its runs recorded (resident → A, candidate → B); one group without a recorded
      side takes the side the other group does not have; two groups with no side, or with the
      same side, are a problem.

    Independent of the order of ``legs`` / ``plain`` (runs are ordered by start time, run ID,
    path). Raises :class:`RunError` for more than two identities among plain runs.
    """
    if legs:
        out = sorted(legs, key=_start_key)
        bad = [f"{_run_name(r)} ({r.run_id}) measured the {r.side} container"
               for r in out if r.side is not None and _SIDE_ARM.get(r.side) != r.arm]
        problem = (("the bracket's recorded arms contradict what its probes measured: "
                    + "; ".join(bad) + " — arm A must be the resident, B the candidate")
                   if bad else None)
        return out, {"by": "the bracket's leg records (leg.json arm)", "problem": problem}
    if not plain:
        return [], {"by": "no runs", "problem": "no runs"}
    ordered = sorted(plain, key=_start_key)
    groups: dict[tuple[Any, ...], list[RunSummary]] = {}
    for r in ordered:
        groups.setdefault(r.identity.key(), []).append(r)
    if len(groups) > 2:
        raise RunError(f"{len(groups)} different identities (image, digest, patches, model) "
                       f"among the runs: a report compares at most two arms")
    keys = list(groups)
    sides: dict[tuple[Any, ...], set[str]] = {
        k: {r.side for r in rs if r.side is not None} for k, rs in groups.items()}
    problem = None
    arm_of: dict[tuple[Any, ...], str] = {}
    mixed = [k for k in keys if len(sides[k]) > 1]
    if mixed:
        problem = ("runs of one identity recorded both sides of the seat ("
                   + ", ".join(r.run_id for r in groups[mixed[0]]) + ")")
    else:
        known = {k: next(iter(sides[k])) for k in keys if sides[k]}
        if len(keys) == 1:
            if known:
                arm_of[keys[0]] = _SIDE_ARM[known[keys[0]]]
            else:
                problem = "the runs do not record which side of the seat they measured"
        elif len(set(known.values())) < len(known):
            problem = (f"both identities recorded measuring the {next(iter(known.values()))}"
                       " — one must be the resident, the other the candidate")
        elif known:
            for k in keys:
                if k in known:
                    arm_of[k] = _SIDE_ARM[known[k]]
            for k in keys:
                if k not in arm_of:
                    arm_of[k] = "B" if "A" in arm_of.values() else "A"
        else:
            problem = ("no run records which side of the seat it measured (resident or "
                       "candidate): the arms cannot be told from the runs")
    if problem is not None or not arm_of:
        arm_of = {k: "AB"[i] for i, k in enumerate(keys)}   # display only: earliest = A
        by = "start time, for display only (earliest identity = A)"
    else:
        by = "the side each probe recorded measuring (identity.container.role) and identity"
    return ([_with_arm(r, arm_of[r.identity.key()]) for r in ordered],
            {"by": by, "problem": problem})


def _with_arm(r: RunSummary, arm: str) -> RunSummary:
    from dataclasses import replace

    return replace(r, arm=arm)


# -- helpers ---------------------------------------------------------------------------------
def _arms(runs: Iterable[RunSummary]) -> dict[str, list[RunSummary]]:
    out: dict[str, list[RunSummary]] = {}
    for r in runs:
        out.setdefault(r.arm or "A", []).append(r)
    return dict(sorted(out.items()))


def _run_name(r: RunSummary) -> str:
    return f"{r.arm}{r.leg}" if r.leg is not None else r.run_id


def simultaneity(runs: Sequence[RunSummary]) -> tuple[bool, str]:
    """(simultaneous, label): true only when every run is a leg of one bracket (or there is
    only one arm, so nothing is compared across time); else the label says "not simultaneous
    (taken N days apart)" from the earliest to the latest start
    (or "times unknown")."""
    ids = {r.bracket_id for r in runs}
    if len({r.arm for r in runs}) < 2:
        return True, "one arm: no cross-arm comparison"
    if len(ids) == 1 and None not in ids:
        return True, f"simultaneous: one bracket ({ids.pop()})"
    starts = [r.started_at for r in runs if r.started_at is not None]
    if len(starts) < len(runs) or not starts:
        return False, "not simultaneous (start times unknown)"
    gap = (max(starts) - min(starts)).total_seconds()
    return False, f"not simultaneous (taken {fmt_duration(gap, style='words')} apart)"


@dataclass(frozen=True)
class Claim:
    """One claim: ``subject``, ``statement`` (what it says, with figures), ``survives``, and
    ``refused_by`` (``[(rule, detail), …]``; empty when it survives); ``test``: for a
    throughput/latency difference, its figures as numbers (:func:`difference_claim`), which
    the decision reads (:mod:`seat_console.evidence.decision`), else ``None``; ``rate``: for
    a goodput difference between two arms, ``{"kind": "goodput", "phase", "verdict"
    ("A higher" / "B higher" / "no difference can be claimed"; ``None`` when an arm recorded
    none), "a", "b" (each arm's pooled Wilson interval as a dict, or ``None``)}``, which the
    decision reads too, else ``None``."""

    subject: str
    statement: str
    refused_by: tuple[tuple[str, str], ...] = ()
    test: Mapping[str, Any] | None = None
    rate: Mapping[str, Any] | None = None

    @property
    def survives(self) -> bool:
        """True when no rule refused it."""
        return not self.refused_by

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready."""
        out = {"subject": self.subject, "statement": self.statement,
               "survives": self.survives,
               "refused_by": [{"rule": r, "detail": d} for r, d in self.refused_by]}
        if self.test is not None:
            out["test"] = dict(self.test)
        if self.rate is not None:
            out["rate"] = dict(self.rate)
        return out


def _fmt(v: float | None, unit: str = "", scale: float = 1.0, digits: int = 1) -> str:
    return "unknown" if v is None else f"{v * scale:,.{digits}f}{unit}"


# -- building --------------------------------------------------------------------------------
def build_report(inputs: Inputs, now: datetime | None = None) -> dict[str, Any]:
    """The report as a JSON-ready dict (schema :data:`REPORT_SCHEMA`): ``arms`` (identity,
    KV capacity, fit, runs), ``phases``, ``fidelity``, ``canaries``, ``retained`` (every run not
    complete, with its reason), ``claims``, ``decision`` (PROMOTE-ABLE / KEEP / INCONCLUSIVE
    per question, :func:`seat_console.evidence.decision.decide`, from this same dict),
    ``arms_assignment`` (how the arms were told, :func:`assign_arms`), ``consistency`` (each figure of a ``summary.json``
    that its ``requests.jsonl`` does not give), ``simultaneity``, ``rules``, ``inputs`` (the
    run/comparison directories), ``files`` (path → SHA-256)."""
    arms = _arms(inputs.runs)
    runs = list(inputs.runs)
    simultaneous, sim_label = simultaneity(runs)
    two = len(arms) == 2
    claims: list[Claim] = []

    # identity and KV capacity per arm
    arm_out: dict[str, Any] = {}
    kv: dict[str, int | None] = {}
    for arm, rs in arms.items():
        idents = {r.identity.key() for r in rs}
        kvs = {r.kv_cache_tokens for r in rs}
        kv[arm] = kvs.pop() if len(kvs) == 1 else None
        arm_out[arm] = {
            "identity": rs[0].identity.as_dict(),
            "identity_consistent": len(idents) == 1,
            "kv_cache_tokens": kv[arm],
            "kv_cache_tokens_per_leg": {_run_name(r): r.kv_cache_tokens for r in rs},
            "fit": next((dict(r.fit) for r in rs if r.fit), None) or _cmp_fit(inputs, arm),
            "runs": [{"name": _run_name(r), "run_id": r.run_id, "path": str(r.path),
                      "status": r.status, "started_at": _iso(r.started_at),
                      "ended_at": _iso(r.ended_at), "identity": r.identity.as_dict()}
                     for r in rs],
        }
        if len(idents) != 1:
            claims.append(Claim(f"identity of arm {arm}", f"arm {arm} is one configuration",
                                ((RULE_IDENTITY, f"{len(idents)} identities among "
                                  + ", ".join(_run_name(r) for r in rs)),)))
    kv_ratio = None
    if two:
        a, b = kv.get("A"), kv.get("B")
        if a and b:
            kv_ratio = a / b
            claims.append(Claim("KV capacity", f"resident/candidate KV capacity = "
                                f"{kv_ratio:.2f}× ({a:,} vs {b:,} tokens; candidate/resident "
                                f"{b / a:.2f}×)"))
        else:
            claims.append(Claim("KV capacity", "resident/candidate KV capacity ratio",
                                ((RULE_UNKNOWN, "the engine's KV capacity was not recorded (or "
                                  "differs between legs) for arm " + ", ".join(
                                      x for x in ("A", "B") if not kv.get(x))),)))

    # retained runs (every run that is not complete is listed with its reason)
    retained = [{"name": _run_name(r), "run_id": r.run_id, "path": str(r.path),
                 "status": r.status if not r.disruptions or r.status != "complete"
                 else "disrupted",
                 "reason": "; ".join(filter(None, [r.reason, *r.disruptions])) or "unknown"}
                for r in runs if not r.complete]

    # phases
    phase_names: list[str] = []
    for r in runs:
        for p in r.phases:
            if p.name not in phase_names:
                phase_names.append(p.name)
    phases_out = []
    for name in phase_names:
        per_arm: dict[str, list[tuple[RunSummary, Phase | None]]] = {
            arm: [(r, next((p for p in r.phases if p.name == name), None)) for r in rs]
            for arm, rs in arms.items()}
        rows = [{"arm": arm, "run": _run_name(r), **(p.as_dict() if p else
                 {"name": name, "population": "phase missing", "complete": False})}
                for arm, lst in per_arm.items() for r, p in lst]
        phases_out.append({"phase": name, "rows": rows})
        claims.extend(_phase_claims(name, per_arm, two, simultaneous, sim_label,
                                    _per_round(inputs.comparison)))
        claims.extend(_goodput_claims(name, per_arm, two, simultaneous, sim_label))

    # fidelity
    fidelity_out, fclaims = _fidelity(arms, two, simultaneous, sim_label)
    claims.extend(fclaims)
    sweeps_out = sweep_knees(arms)
    canaries_out, cclaims = _canaries(arms, two, simultaneous, sim_label)
    claims.extend(cclaims)

    problem = bracket_problem(inputs.comparison, runs)
    # a cut bracket backs no cross-arm claim (one leg cut at run 4 of 5); a breached hold backs
    # no claim at all, one arm's own figures included: they were measured while the fleet's
    # remediation loop could act on the seat (a compare stops at a breach, leaving one arm)
    if problem and (two or breaches(inputs.comparison)):
        from dataclasses import replace

        claims = [c if c.subject.startswith("identity of arm") else
                  replace(c, refused_by=(*c.refused_by, (RULE_INCOMPLETE, problem)))
                  for c in claims]
    rep: dict[str, Any] = {
        "schema": REPORT_SCHEMA,
        "generated_at": _iso((now or datetime.now(timezone.utc)).replace(microsecond=0)),
        "decision": None,
        "arms_assignment": dict(inputs.arms_assignment) if inputs.arms_assignment is not None
        else {"by": "given with the runs", "problem": None},
        "comparison": {k: inputs.comparison.get(k) for k in
                       ("bracket_id", "order", "rounds", "status", "reason", "started_at",
                        "ended_at", "restored", "hold_released", "downtimes")}
        if inputs.comparison else None,
        "simultaneity": {"simultaneous": simultaneous, "label": sim_label},
        "arms": arm_out,
        "kv_ratio_resident_over_candidate": kv_ratio,
        "kv_ratios_candidate_over_resident": kv_ratios(arm_out, kv_ratio),
        "phases": phases_out,
        "fidelity": fidelity_out,
        "canaries": canaries_out,
        "sweeps": sweeps_out,
        "retained": retained,
        "breaches": breaches(inputs.comparison),
        "claims": [c.as_dict() for c in claims],
        "requests": request_totals(arms),
        "consistency": [{"run": _run_name(r), "path": str(r.path), "problem": x}
                        for r in runs for x in r.consistency],
        "rules": RULES,
        "inputs": list(inputs.sources),
        "files": dict(inputs.files),
    }
    from seat_console.evidence.decision import decide

    rep["decision"] = decide(rep).as_dict()
    return rep


def kv_ratios(arm_out: Mapping[str, Any], resident_over_candidate: float | None
              ) -> dict[str, float | None]:
    """KV capacity candidate / resident (the direction of ``seat-console fit`` and of the
    paper's 2.25× for NVFP4 vs FP8): ``engine`` from the engines' startup logs (the inverse of
    ``resident_over_candidate``), ``fit`` from the fit budgets recorded for both arms (their
    predicted KV tokens) — each ``None`` unless both sides have a figure (resident > 0)."""
    def tokens(arm: str) -> Any:
        f = (arm_out.get(arm) or {}).get("fit")
        return f.get("kv_tokens") if isinstance(f, Mapping) else None

    ra, rb = tokens("A"), tokens("B")
    fit = (rb / ra if isinstance(ra, (int, float)) and isinstance(rb, (int, float))
           and not isinstance(ra, bool) and not isinstance(rb, bool) and ra > 0 else None)
    return {"engine": 1 / resident_over_candidate if resident_over_candidate else None,
            "fit": fit}


def request_totals(arms: Mapping[str, Sequence[RunSummary]]) -> dict[str, Any]:
    """Requests behind the report, per arm and in all: ``legs``, ``warmup`` (sent first and
    excluded from every figure), ``measured`` (the phases' records), ``fidelity`` and
    ``canaries`` (one request per trace / result); a count is ``None`` (unknown) when a run
    has no ``requests.jsonl``."""
    def add(a: int | None, b: int | None) -> int | None:
        return None if a is None or b is None else a + b

    out: dict[str, Any] = {}
    total = {"legs": 0, "warmup": 0, "measured": 0, "fidelity": 0, "canaries": 0}
    for arm, rs in arms.items():
        row: dict[str, int | None] = {"legs": len(rs), "warmup": 0, "measured": 0,
                                      "fidelity": 0, "canaries": 0}
        for r in rs:
            row["warmup"] = add(row["warmup"], r.warmup_requests)
            row["measured"] = add(row["measured"], r.measured_requests)
            row["fidelity"] = add(row["fidelity"], len(r.fidelity))
            row["canaries"] = add(row["canaries"], len(r.canaries))
        out[arm] = row
        for k in total:
            total[k] = add(total[k], row[k])  # type: ignore[assignment]
    out["all"] = total
    return out


def bracket_problem(comparison: Mapping[str, Any] | None,
                    runs: Sequence[RunSummary]) -> str | None:
    """Why a comparison's bracket is not whole, or ``None``: its status is not ``complete``
    (running or killed, failed, incomplete), or fewer legs were measured than planned."""
    if not comparison:
        return None
    found = breaches(comparison)
    if found:   # a breach of the hold: the bracket is not complete, whatever its status says
        return (f"the hold was breached {len(found)} time(s) during the bracket (first "
                f"{found[0]['changed_at'] or found[0]['journaled_at']}: {found[0]['what']})")
    planned = comparison.get("planned_legs")
    n_planned = len(planned) if isinstance(planned, list) else None
    status = comparison.get("status")
    if n_planned is not None and len(runs) < n_planned:
        return (f"bracket incomplete: {len(runs)}/{n_planned} legs measured (comparison "
                f"{status}: {comparison.get('reason') or 'no reason recorded'})")
    if status != "complete":
        why = comparison.get("reason") or "no reason recorded"
        return f"comparison {status or 'status unknown'}: {why}"
    return None


def breaches(comparison: Mapping[str, Any] | None) -> list[dict[str, Any]]:
    """Every breach of the hold during the bracket, as the compare runbook recorded it from the
    journal (``compare.json`` → ``breaches``: a timer the hold stopped started by someone else,
    its silence expired), oldest first: ``[{"changed_at", "seen_at", "journaled_at", "what",
    "by", "seq"}]`` (times ISO UTC; ``changed_at``: when the node says it happened, ``None``
    unknown). ``[]`` for plain runs or a comparison with none; an entry that is not an object
    is kept as ``{"what": "unreadable breach record: …"}`` (never dropped)."""
    raw = (comparison or {}).get("breaches")
    if not isinstance(raw, list):
        return []
    out = []
    for b in raw:
        if not isinstance(b, Mapping):
            out.append({"changed_at": None, "seen_at": None, "journaled_at": None,
                        "what": f"unreadable breach record: {str(b)[:80]!r}", "by": None,
                        "seq": None})
            continue
        out.append({k: b.get(k) for k in ("changed_at", "seen_at", "journaled_at", "what",
                                          "by", "seq")})
    return sorted(out, key=lambda b: str(b.get("changed_at") or b.get("journaled_at") or ""))


def breaches_markdown(found: Sequence[Mapping[str, Any]] | None) -> list[str]:
    """The report's ``## Breaches of the hold during the bracket`` section (lines)."""
    L = ["", "## Breaches of the hold during the bracket", ""]
    if not found:
        return L + ["None recorded: no timer the hold stopped was started and its silence was "
                    "not expired by anyone else while the bracket ran."]
    L += [f"{len(found)} breach(es): the bracket is not complete and backs no cross-arm claim.",
          "", "| changed at (node) | seen at | journaled at | what | seen by |",
          "|---|---|---|---|---|"]
    for b in found:
        L.append(f"| {_cell(b.get('changed_at'))} | {_cell(b.get('seen_at'))} | "
                 f"{_cell(b.get('journaled_at'))} | {_cell(b.get('what'))} | "
                 f"{_cell(b.get('by'))} |")
    return L


def _per_round(comparison: Mapping[str, Any] | None) -> int:
    """Pairs per round of the comparison's order (ABBA: 2); 0 when unknown."""
    order = (comparison or {}).get("order")
    return order.count("A") if isinstance(order, str) else 0


def _cmp_fit(inputs: Inputs, arm: str) -> dict[str, Any] | None:
    """The fit budget the comparison recorded for ``arm`` (``compare.json`` → ``fit``)."""
    fit = (inputs.comparison or {}).get("fit")
    v = fit.get(arm) if isinstance(fit, Mapping) else None
    return dict(v) if isinstance(v, Mapping) else None


def _iso(t: datetime | None) -> str | None:
    return None if t is None else t.astimezone(timezone.utc).isoformat()


def _zulu(iso: Any) -> str:
    """An ISO 8601 time of the report (``_iso``'s ``…+00:00``) as the screens write it
    (:func:`seat_console.core.fmt.zulu_time`: ``2026-11-29T13:15:00Z``); other text as it is."""
    try:
        return zulu_time(datetime.fromisoformat(str(iso)))
    except (TypeError, ValueError):
        return str(iso)


def _common_refusals(rs: Sequence[RunSummary], two: bool, simultaneous: bool,
                     sim_label: str) -> list[tuple[str, str]]:
    out = []
    bad = [r for r in rs if r.disruptions or r.status not in ("complete", "incomplete")]
    if bad:
        out.append((RULE_DISRUPTED, "; ".join(
            f"{_run_name(r)} {r.status}" + (f": {r.disruptions[0]}" if r.disruptions else "")
            for r in bad)))
    edited = [f"{_run_name(r)}: {r.consistency[0]}"
              + (f" (+{len(r.consistency) - 1} more)" if len(r.consistency) > 1 else "")
              for r in rs if r.consistency]
    if edited:
        out.append((RULE_SUMMARY_EDITED, "; ".join(edited)))
    if two and not simultaneous:
        out.append((RULE_NOT_SIMULTANEOUS, sim_label))
    return out


METRICS: tuple[tuple[str, str, str, float, int], ...] = (
    ("throughput", "output_tok_s", " tok/s", 1.0, 1),
    ("TTFT p50", "ttft_p50_s", " ms", 1000.0, 1),
    ("TPOT p50", "tpot_p50_s", " ms", 1000.0, 2),
    ("ITL p50", "itl_p50_s", " ms", 1000.0, 2),
    ("E2E p50", "e2e_p50_s", " ms", 1000.0, 1),
)
"""The per-leg figures a difference is tested on: (label, :class:`Phase` attribute, unit,
display scale, digits). Each is one claim kind with its own 5 % false-claim rate."""


def leg_pairs(per_arm: Mapping[str, Sequence[tuple[RunSummary, Phase | None]]]
              ) -> tuple[list[tuple[str, RunSummary, Phase | None, RunSummary, Phase | None]],
                         list[str]]:
    """The bracket's pairs ``[(pair id, A run, A phase, B run, B phase), …]`` and the names of
    legs left without a partner. Legs carry their pair ID (``leg.json`` ``pair``, e.g.
    ``r1p1`` = A1–B2, ``r1p2`` = A4–B3); runs without one are paired k-th A with k-th B in
    leg/start order."""
    a = list(per_arm.get("A", ()))
    b = list(per_arm.get("B", ()))
    out = []
    if a and b and all(r.pair for r, _ in a + b):
        bb = {r.pair: (r, p) for r, p in b}
        for ra, pa in a:
            if ra.pair in bb:
                rb, pb = bb.pop(ra.pair)
                out.append((str(ra.pair), ra, pa, rb, pb))
        lone = [_run_name(r) for r, _ in a if r.pair not in {x[0] for x in out}]
        return out, lone + [_run_name(r) for r, _ in bb.values()]

    def order(x: tuple[RunSummary, Phase | None]) -> tuple[int, str]:
        r = x[0]
        return (r.leg if r.leg is not None else 10**9,
                r.started_at.isoformat() if r.started_at else r.run_id)

    a.sort(key=order)
    b.sort(key=order)
    for k, ((ra, pa), (rb, pb)) in enumerate(zip(a, b), 1):
        out.append((f"p{k}", ra, pa, rb, pb))
    n = len(out)
    return out, [_run_name(r) for r, _ in a[n:] + b[n:]]


ABBA_PAIRS_PER_ROUND = 2
"""Pairs one round of ABBA gives (A1–B2, A4–B3): the compare the report advises."""


def difference_claim(label: str, name: str, values: Sequence[tuple[str, float | None,
                                                                      float | None]],
                     base: Sequence[tuple[str, str]], per_round: int,
                     unit: str = "", scale: float = 1.0, digits: int = 1) -> Claim:
    """The claim "B differs from A in ``label`` (phase ``name``)" from per-pair figures
    ``values`` = ``[(pair id, A's figure, B's figure), …]``, with the refusals ``base`` already
    found (populations, disruption, simultaneity…).

    The unit is the leg (a fresh incarnation): the test is the exact sign-flip test over the
    pairs' log ratios ln(B/A) (:func:`seat_console.evidence.stats.sign_flip_test`), two-sided
    at 5 %. Refused by :data:`RULE_UNDERPOWERED` when the number of pairs cannot reach
    p ≤ 0.05 at any effect (one ABBA round: 2 pairs, smallest p = 0.5), saying how many rounds
    of ``per_round`` pairs are needed (``per_round`` 0: runs compared directly, not a
    bracket: the rounds are those of the ABBA compare that would give the pairs, 2 a round —
    the trial read "needs ≥ 6 rounds (6 pairs)" above "a bracket of ≥ 3 rounds");
    by :data:`RULE_NOT_SIGNIFICANT` when p > 0.05, with the
    minimum detectable effect for these pairs and their spread; by :data:`RULE_UNKNOWN` when a
    figure is missing or not positive (no log ratio)."""
    refusals = list(base)
    direct = per_round <= 0
    per_round = ABBA_PAIRS_PER_ROUND if direct else per_round
    statement = f"B differs from A in {label} ({name})"
    test: dict[str, Any] = {"figure": label, "phase": name, "pairs": len(values),
                            "higher_is_better": label == "throughput", "ratio_b_over_a": None,
                            "p_value": None, "needed_pairs": pairs_needed(),
                            "rounds_needed": math.ceil(pairs_needed() / max(1, per_round)),
                            "pairs_per_round": max(1, per_round), "mde_ratio": None}
    if not values:
        refusals.append((RULE_UNMATCHED, "no pair of an A leg and a B leg to compare"))
        return Claim(f"{label} difference ({name})", statement, tuple(refusals), test)
    bad = [pid for pid, a, b in values if a is None or b is None or a <= 0 or b <= 0]
    per_pair = ", ".join(f"{pid} {_fmt(a, '', scale, digits)}→{_fmt(b, unit, scale, digits)}"
                         for pid, a, b in values)
    test["unknown_pairs"] = len(bad)
    test["unknown_on_every_leg"] = all(a is None and b is None for _, a, b in values)
    if bad:
        refusals.append((RULE_UNKNOWN, f"{label} unknown or not positive in pair(s) "
                                       f"{', '.join(bad)} ({per_pair}): no log ratio"))
        return Claim(f"{label} difference ({name})", statement, tuple(refusals), test)
    t = sign_flip_test([math.log(b / a) for _, a, b in values])  # type: ignore[operator]
    m = t.n_pairs
    rounds_needed = math.ceil(t.needed_pairs / max(1, per_round))
    sd = "n/a (one pair)" if t.sd_log_ratio is None else f"{t.sd_log_ratio:.3f}"
    statement += (f": B/A = {t.ratio:.3f}× (geometric mean over {m} pair(s): {per_pair}); "
                  f"SD of ln(B/A) {sd}; exact sign-flip test p = {t.p_value:.3f}")
    if not t.reachable:
        mde = "none"
        refusals.append((RULE_UNDERPOWERED, (
            f"{m} pair(s): the smallest p this design can give is {t.min_p:.3f} > "
            f"{t.alpha:g}, so no effect however large can be claimed; needs ≥ "
            + (f"{t.needed_pairs} pairs to claim a difference (a compare bracket of ≥ "
               f"{rounds_needed} rounds of ABBA: `seat-console compare`): " if direct else
               f"{rounds_needed} rounds ({t.needed_pairs} pairs) to claim a difference: ")
            + NO_DIFFERENCE)))
    else:
        assert t.mde_ratio is not None
        mde = f"×{t.mde_ratio:.3f} (or ×{1 / t.mde_ratio:.3f})"
        if not t.claimable:
            refusals.append((RULE_NOT_SIGNIFICANT, f"p = {t.p_value:.3f} > {t.alpha:g}: "
                                                   f"{NO_DIFFERENCE}"))
    statement += f"; minimum detectable effect with {m} pair(s) and this spread: {mde}"
    test.update(ratio_b_over_a=t.ratio, p_value=t.p_value, mde_ratio=t.mde_ratio,
                sd_log_ratio=t.sd_log_ratio)
    return Claim(f"{label} difference ({name})", statement, tuple(refusals), test)


def _phase_claims(name: str, per_arm: Mapping[str, list[tuple[RunSummary, Phase | None]]],
                  two: bool, simultaneous: bool, sim_label: str,
                  per_round: int = 0) -> list[Claim]:
    rs = [r for lst in per_arm.values() for r, _ in lst]
    refusals = _common_refusals(rs, two, simultaneous, sim_label)
    incomplete = [f"{_run_name(r)}: {p.population if p else 'phase missing'}"
                  for lst in per_arm.values() for r, p in lst if p is None or not p.complete]
    if incomplete:
        refusals.insert(0, (RULE_INCOMPLETE, "; ".join(incomplete)))
    if two:
        keysets = {frozenset(c for c in r.cases if c[0] == name) for r in rs}
        if len(keysets) > 1:
            refusals.append((RULE_UNMATCHED, "the runs measured different (phase, index, "
                                             "prompt) case sets"))
    tput = {arm: [p.output_tok_s for _, p in lst if p is not None] for arm, lst in
            per_arm.items()}
    figure_refusals = list(refusals)
    if any(v is None for vs in tput.values() for v in vs) and not incomplete:
        figure_refusals.append((RULE_UNKNOWN, "output throughput not recorded for a run"))

    def legs_text(vals: Sequence[float | None], unit: str, scale: float, digits: int) -> str:
        known = [v for v in vals if v is not None]
        mean = _fmt(statistics.fmean(known) if known else None, unit, scale, digits)
        return (f"{mean} (mean of the legs' figures; per leg "
                + ", ".join(_fmt(v, "", scale, digits) for v in vals) + ")")

    def arm_text(arm: str) -> str:
        ph = [p for _, p in per_arm[arm] if p is not None]
        pops = "+".join(str(p.completed) for p in ph)
        return (f"{arm}: output {legs_text(tput[arm], ' tok/s', 1.0, 1)} over "
                f"{len(ph)} leg(s), n={pops}; TTFT p50 "
                f"{legs_text([p.ttft_p50_s for p in ph], ' ms', 1000.0, 1)}; E2E p50 "
                f"{legs_text([p.e2e_p50_s for p in ph], ' ms', 1000.0, 1)}")

    figures = "; ".join(arm_text(a) for a in per_arm)
    out = [Claim(f"throughput/latency ({name})", figures, tuple(figure_refusals))]
    if two:
        pairs_, lone = leg_pairs(per_arm)
        base = list(refusals)
        if lone:
            base.append((RULE_UNMATCHED, "legs without a partner in the other arm: "
                                         + ", ".join(lone)))
        cache = cache_refusal(per_arm)
        if cache:
            base.append(cache)
        for label, attr, unit, scale, digits in METRICS:
            values = [(pid, getattr(pa, attr) if pa else None, getattr(pb, attr) if pb else None)
                      for pid, _, pa, _, pb in pairs_]
            out.append(difference_claim(label, name, values,
                                        base + tpot_refusal(pairs_) if attr == "tpot_p50_s"
                                        else base, per_round,
                                        unit, scale, digits))
    return out


def tpot_refusal(pairs_: Sequence[tuple[str, RunSummary, Phase | None, RunSummary,
                                        Phase | None]]) -> list[tuple[str, str]]:
    """The TPOT claim's refusal when a paired leg's TPOT leaves out completed requests whose
    output all arrived in one network read (:data:`~seat_console.core.probe_stats.
    TPOT_ONE_READ`):
    those are the fastest streams, so the p50 over the rest is not the leg's and the arms'
    populations differ — ``[(RULE_UNKNOWN, words naming each leg)]``, or ``[]``."""
    legs = [f"{pid} {arm}: {p.tpot_partial}" for pid, _, pa, _, pb in pairs_
            for arm, p in (("A", pa), ("B", pb))
            if p is not None and p.tpot_excluded.get(TPOT_ONE_READ)]
    if not legs:
        return []
    return [(RULE_UNKNOWN, "TPOT undefined for requests whose output all arrived in one "
                           "network read (no decode time the client could see; not 0): "
                           + "; ".join(legs))]


def _threshold(v: Any, default: float, hi: float) -> float:
    ok = isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) \
        and 0.0 <= v <= hi
    return float(v) if ok else default


def sweep_knees(arms: Mapping[str, Sequence[RunSummary]]) -> dict[str, list[dict[str, Any]]] | None:
    """Per arm, each ``probe --sweep`` run's knee, re-derived here from its steps' figures (the
    phases named in its ``sweep`` block, as re-read from ``summary.json`` and checked against
    ``requests.jsonl``) by the probe's own rule (:func:`seat_console.core.sweep.judge`, with the
    thresholds the run recorded). ``None`` when no run was a sweep."""
    out: dict[str, list[dict[str, Any]]] = {}
    for arm, rs in arms.items():
        for r in rs:
            if r.sweep is None:
                continue
            steps = [SweepStep(phase=p.name, concurrency=p.concurrency or 0,
                               complete=p.complete and not r.disruptions and not r.consistency,
                               output_tok_s=p.output_tok_s, ttft_p95_s=p.ttft_p95_s,
                               goodput=p.goodput.share if p.goodput else None)
                     for p in r.phases if p.name.startswith("sweep-c")]
            v = judge(steps, _threshold(r.sweep.get("goodput_min"), GOODPUT_MIN, 1.0),
                      _threshold(r.sweep.get("growth_min"), GROWTH_MIN, 10.0))
            out.setdefault(arm, []).append({"run": _run_name(r), **v.model_dump(mode="json")})
    return out or None


def sweep_markdown(sw: Mapping[str, Any] | None) -> list[str]:
    """The sweep section: per arm and run, the knee (concurrency, tok/s, p95 TTFT) and why the
    sweep stopped."""
    if not sw:
        return []
    L = ["", "## Load sweep: the knee per arm", "",
         "| arm | run | knee concurrency | output tok/s | TTFT p95 ms | goodput | stopped |",
         "|---|---|---|---|---|---|---|"]
    rule = ""
    for arm, rows in sw.items():
        for row in rows:
            rule = row["rule"]
            k = row["knee"]
            stop = row["stopped_by"] or "not stopped: the knee is above the top step"
            if k is None:
                L.append(f"| {arm} | {row['run']} | none (the first step failed) | | | | "
                         f"{stop} |")
                continue
            gp = "n/a" if k["goodput"] is None else f"{k['goodput'] * 100:.1f} %"
            L.append(f"| {arm} | {row['run']} | {k['concurrency']} | "
                     f"{_fmt(k['output_tok_s'])} | {_fmt(k['ttft_p95_s'], '', 1000)} | {gp} | "
                     f"{stop} |")
    return [*L, "", f"Rule: {rule}.", ""]


def cache_refusal(per_arm: Mapping[str, Sequence[tuple[RunSummary, Phase | None]]]
                  ) -> tuple[str, str] | None:
    """:data:`RULE_CACHE` for a cross-arm claim on one phase: the legs' prefix-cache hit
    rates spread beyond :data:`CACHE_HIT_RATE_BOUND`, or some legs' rate is unknown while
    others' is known. ``None`` when they agree, or when no leg recorded one (runs from before
    the probe read the counters; the table says "not recorded")."""
    legs = [(r, p) for lst in per_arm.values() for r, p in lst if p is not None]
    known = [(r, p.cache_hit_rate) for r, p in legs if p.cache_hit_rate is not None]
    if not known:
        return None
    unknown = [f"{_run_name(r)} ({p.cache_note or 'not recorded'})" for r, p in legs
               if p.cache_hit_rate is None]
    if unknown:
        return (RULE_CACHE, "prefix-cache hit rate unknown in " + ", ".join(unknown))
    lo, hi = min(v for _, v in known), max(v for _, v in known)
    if hi - lo > CACHE_HIT_RATE_BOUND:
        return (RULE_CACHE, f"prefix-cache hit rates {lo:.3f}–{hi:.3f} differ by more than "
                            f"{CACHE_HIT_RATE_BOUND:.2f} ("
                + ", ".join(f"{_run_name(r)} {v:.3f}" for r, v in known) + ")")
    return None


def pooled_goodput(legs: Sequence[tuple[RunSummary, Phase | None]]
                   ) -> tuple[Interval | None, list[str], set[tuple[tuple[str, float], ...]]]:
    """An arm's goodput over its legs of one phase: the legs' requests pooled (each request
    is one trial: a leg's ``met`` of its ``trials``), the Wilson 95 % interval of the pool
    (``None`` when no leg recorded goodput or none sent a request); the legs that recorded none
    (by name); the distinct SLOs the legs were measured against."""
    met = trials = 0
    missing: list[str] = []
    slos: set[tuple[tuple[str, float], ...]] = set()
    for r, p in legs:
        gp = p.goodput if p is not None else None
        if gp is None:
            missing.append(_run_name(r))
            continue
        met += gp.met
        trials += gp.trials
        slos.add(tuple(sorted(gp.slo.items())))
    return (wilson_interval(met, trials) if trials else None), missing, slos


def _goodput_claims(name: str, per_arm: Mapping[str, list[tuple[RunSummary, Phase | None]]],
                    two: bool, simultaneous: bool, sim_label: str) -> list[Claim]:
    """Goodput per arm (pooled over its legs) and, with two arms, the difference claimed by
    the canaries' rule (:data:`RULE_OVERLAP`: disjoint Wilson 95 % intervals over distinct
    requests). Nothing when no leg of the phase recorded goodput."""
    pools = {arm: pooled_goodput(lst) for arm, lst in per_arm.items()}
    if not any(iv is not None for iv, _, _ in pools.values()):
        return []
    rs = [r for lst in per_arm.values() for r, _ in lst]
    refusals = _common_refusals(rs, two, simultaneous, sim_label)
    incomplete = [f"{_run_name(r)}: {p.population if p else 'phase missing'}"
                  for lst in per_arm.values() for r, p in lst if p is None or not p.complete]
    if incomplete:
        refusals.insert(0, (RULE_INCOMPLETE, "; ".join(incomplete)))
    missing = [m for _, ms, _ in pools.values() for m in ms]
    if missing:
        refusals.append((RULE_UNKNOWN, "no goodput recorded (no [probe.slo]) in "
                         + ", ".join(missing)))
    slos = set().union(*(s for _, _, s in pools.values()))
    if len(slos) > 1:
        refusals.append((RULE_UNMATCHED, "the legs were measured against different SLOs: "
                         + "; ".join(", ".join(f"{k} {v:g}" for k, v in slo)
                                     for slo in sorted(slos))))

    def text(arm: str) -> str:
        iv = pools[arm][0]
        if iv is None:
            return f"{arm} unknown"
        return (f"{arm} {iv.successes}/{iv.trials} = {iv.rate * 100:.1f} % "
                f"[{iv.low:.3f}, {iv.high:.3f}]")

    slo_text = "; ".join(", ".join(f"{k.removesuffix('_ms').upper()} <= {v:g} ms"
                                   for k, v in slo) for slo in sorted(slos))
    ia, ib = pools.get("A", (None,))[0], pools.get("B", (None,))[0]
    rate: dict[str, Any] | None = None
    if two:
        rate = {"kind": "goodput", "phase": name, "verdict": None,
                "a": ia.as_dict() if ia is not None else None,
                "b": ib.as_dict() if ib is not None else None}
    if two and ia is not None and ib is not None:
        cache = cache_refusal(per_arm)
        if cache:
            refusals.append(cache)
        cmp_ = compare_rates(ia, ib)
        if not cmp_.claimable:
            refusals.append((RULE_OVERLAP, f"Wilson 95 % intervals overlap: {NO_DIFFERENCE}"))
        statement = (f"goodput ({name}, {slo_text}): {text('A')} vs {text('B')}: "
                     f"{cmp_.verdict}")
        assert rate is not None
        rate["verdict"] = cmp_.verdict
    else:
        statement = (f"goodput ({name}, {slo_text}): "
                     + "; ".join(text(a) for a in per_arm))
        if two:
            refusals.append((RULE_UNKNOWN, "an arm recorded no goodput"))
    return [Claim(f"goodput ({name})", statement, tuple(refusals), rate=rate)]


def _fidelity(arms: Mapping[str, list[RunSummary]], two: bool, simultaneous: bool,
              sim_label: str) -> tuple[dict[str, Any] | None, list[Claim]]:
    with_traces = {arm: [r for r in rs if r.fidelity] for arm, rs in arms.items()}
    if not any(with_traces.values()):
        return None, []
    out: dict[str, Any] = {"note": fid.LOCALISATION_NOTE, "pairs": []}
    claims: list[Claim] = []

    def pair(x: RunSummary, y: RunSummary) -> fid.FidelitySummary:
        s = fid.compare_arms(x.fidelity, y.fidelity)
        out["pairs"].append({"a": _run_name(x), "b": _run_name(y), **s.as_dict()})
        return s

    controls: list[tuple[str, fid.FidelitySummary]] = []
    for rs in with_traces.values():  # within-arm control: is the arm reproducible?
        for other in rs[1:]:
            controls.append((f"{_run_name(rs[0])}–{_run_name(other)}", pair(rs[0], other)))
    if two and with_traces.get("A") and with_traces.get("B"):
        pairs_, _ = leg_pairs({arm: [(r, None) for r in rs] for arm, rs in with_traces.items()})
        cross = [(f"{_run_name(ra)}–{_run_name(rb)}", ra, rb, pair(ra, rb))
                 for _, ra, _, rb, _ in pairs_]
        refusals = _common_refusals([r for rs in with_traces.values() for r in rs], True,
                                    simultaneous, sim_label)
        unmatched = sorted({u for *_, s in cross for u in s.unmatched})
        if unmatched:
            refusals.append((RULE_UNMATCHED, "cases on one arm only: " + ", ".join(unmatched)))
        names = ", ".join(n for n, *_ in cross)
        n_cases = max((len(s.cases) for *_, s in cross), default=0)
        if all(s.all_exact for *_, s in cross):
            statement = (f"B's greedy outputs, top-20 sets and logprobs equal A's on all "
                         f"{n_cases} cases in every pair ({names})")
        else:
            parts = []
            for n, _, _, s in cross:
                div = [c for c in s.cases if c.first_divergence is not None]
                worst = min((c.min_top_overlap for c in s.cases
                             if c.min_top_overlap is not None), default=None)
                parts.append(f"{n}: {len(div)}/{len(s.cases)} cases diverge"
                             + (" (" + ", ".join(f"{c.case_id} at position {c.first_divergence}"
                                                 for c in div[:5])
                                + ("…" if len(div) > 5 else "") + ")" if div else "")
                             + f", minimum top-20 overlap {worst}")
            statement = "B diverges from A: " + "; ".join(parts)
            noisy = [f"{n}: {sum(c.first_divergence is not None for c in s.cases)} case(s) "
                     f"diverge" for n, s in controls if not s.all_exact]
            if noisy:
                refusals.append((RULE_NOT_REPRODUCIBLE, "an arm's own legs disagree ("
                                 + "; ".join(noisy) + "): the engine is not reproducible "
                                 "run to run, so a divergence between arms cannot be "
                                 "attributed to B"))
        claims.append(Claim("fidelity (localisation, not KL)", statement, tuple(refusals)))
    return out, claims


def _canaries(arms: Mapping[str, list[RunSummary]], two: bool, simultaneous: bool,
              sim_label: str) -> tuple[dict[str, Any] | None, list[Claim]]:
    pooled = {arm: [c for r in rs for c in r.canaries] for arm, rs in arms.items()}
    if not any(pooled.values()):
        return None, []
    sums = {arm: can.summarise(cs) for arm, cs in pooled.items() if cs}
    out: dict[str, Any] = {"arms": {arm: {k: v.as_dict() for k, v in s.items()}
                                    for arm, s in sums.items()}, "comparisons": {}}
    claims: list[Claim] = []
    if two and "A" in sums and "B" in sums:
        refusals_common = _common_refusals([r for rs in arms.values() for r in rs if r.canaries],
                                           True, simultaneous, sim_label)
        ida = {c.case_id for c in pooled["A"]}
        idb = {c.case_id for c in pooled["B"]}
        if ida != idb:
            refusals_common.append((RULE_UNMATCHED, f"{len(ida ^ idb)} canary case IDs on one "
                                                    f"arm only"))
        for kind, cmp_ in sorted(can.compare_canaries(sums["A"], sums["B"]).items()):
            refusals = list(refusals_common)
            if isinstance(cmp_, RateComparison):
                out["comparisons"][kind] = {"verdict": cmp_.verdict,
                                            "a": cmp_.a.as_dict(), "b": cmp_.b.as_dict()}
                statement = (f"canaries ({kind}): A {cmp_.a.successes}/{cmp_.a.trials} "
                             f"[{cmp_.a.low:.3f}, {cmp_.a.high:.3f}] vs B "
                             f"{cmp_.b.successes}/{cmp_.b.trials} "
                             f"[{cmp_.b.low:.3f}, {cmp_.b.high:.3f}]: {cmp_.verdict}")
                if not cmp_.claimable:
                    refusals.append((RULE_OVERLAP, f"Wilson 95 % intervals overlap: "
                                                   f"{NO_DIFFERENCE}"))
            else:
                out["comparisons"][kind] = {"verdict": cmp_}
                statement = f"canaries ({kind}): pass-rate difference"
                refusals.append((RULE_INCOMPLETE, cmp_))
            claims.append(Claim(f"canaries ({kind})", statement, tuple(refusals)))
    return out, claims


# -- rendering -------------------------------------------------------------------------------
def server_markdown(rows: Sequence[Mapping[str, Any]]) -> list[str]:
    """The client against the engine per request, per leg of one phase (a table), or nothing
    for runs from before the probe recorded it."""
    if not any(r.get("server") for r in rows):
        return []
    L = ["| arm | run | requests with engine metrics | client − engine TTFT p50 / p95 ms "
         "(n) | token mismatches (first) |", "|---|---|---|---|---|"]
    for r in rows:
        sv = r.get("server")
        if not sv:
            L.append(f"| {r['arm']} | {r['run']} | not recorded | | |")
            continue
        wm = sv["with_metrics"]
        cmd = (f"{_fmt(sv['cmd_p50_s'], '', 1000, 2)} / {_fmt(sv['cmd_p95_s'], '', 1000, 2)} "
               f"({sv['cmd_n']})" if sv.get("cmd_n") else "n/a (the engine gave none)")
        tm = sv["token_mismatches"]
        first = ", ".join(str(i) for i in sv["token_mismatch_first"])
        L.append(f"| {r['arm']} | {r['run']} | {'unknown' if wm is None else wm} | {cmd} | "
                 f"{'unknown' if tm is None else tm}{f' ({first})' if first else ''} |")
    return [*L, ""]


def cache_markdown(rows: Sequence[Mapping[str, Any]]) -> list[str]:
    """How each leg of one phase started cache-clean and its prefix-cache hit rate (a table),
    or nothing for runs from before the probe recorded it."""
    if not any(r.get("cache_mode") or r.get("cache_hit_rate") is not None for r in rows):
        return []
    L = ["| arm | run | cache-clean by | prefix-cache hit rate |", "|---|---|---|---|"]
    for r in rows:
        rate = r.get("cache_hit_rate")
        L.append(f"| {r['arm']} | {r['run']} | {r.get('cache_mode') or 'not recorded'} | "
                 + (f"{rate * 100:.1f} %" if rate is not None else
                    f"unknown ({r.get('cache_note') or 'not recorded'})") + " |")
    return [*L, f"Cross-arm claims need these within {CACHE_HIT_RATE_BOUND * 100:.0f} "
                "points of each other.", ""]


def goodput_markdown(rows: Sequence[Mapping[str, Any]]) -> list[str]:
    """Goodput per leg of one phase (a table), or nothing when no leg recorded it."""
    if not any(r.get("goodput") for r in rows):
        return []
    L = ["| arm | run | goodput (met/sent) | Wilson 95 % | targets | missed |",
         "|---|---|---|---|---|---|"]
    for r in rows:
        gp = r.get("goodput")
        if not gp:
            L.append(f"| {r['arm']} | {r['run']} | unknown (not recorded) | | | |")
            continue
        share = "n/a" if gp["share"] is None else f"{gp['share'] * 100:.1f} %"
        iv = ("n/a" if gp["low"] is None else
              f"[{gp['low'] * 100:.1f}, {gp['high'] * 100:.1f}] %")
        slo = ", ".join(f"{k.removesuffix('_ms').upper()} <= {v:g} ms"
                        for k, v in gp["slo"].items())
        missed = ", ".join(f"{k} {v}" for k, v in gp["missed"].items()) or "none"
        L.append(f"| {r['arm']} | {r['run']} | {gp['met']}/{gp['trials']} = {share} | {iv} "
                 f"| {slo} | {missed} |")
    return [*L, ""]


def render_markdown(rep: Mapping[str, Any]) -> str:
    """The report as Markdown (sections: comparison, identity, KV/fit, phases, fidelity,
    canaries, retained runs, claims, rules, raw files with SHA-256)."""
    from seat_console.evidence.decision import render_lines

    L: list[str] = ["# Seat evidence report", ""]
    if rep.get("decision"):
        L += [*render_lines(rep["decision"]), ""]
    L.append(f"Generated {_zulu(rep['generated_at'])} (UTC). {rep['simultaneity']['label']}.")
    L.append(f"Report format {rep.get('schema') or REPORT_SCHEMA}.")
    asg = rep.get("arms_assignment") or {}
    L.append("Arms: A = the resident, B = the candidate, told by "
             f"{asg.get('by') or 'the runs'}"
             + (f" — **cannot be told: {asg['problem']}**" if asg.get("problem") else "") + ".")
    for c in rep.get("consistency") or []:
        L += ["", f"**WARNING — {c['run']} ({c['path']}): {c['problem']}**: this summary "
                  f"was edited or not written from its raw requests; no claim rests on it."]
    cmp_ = rep.get("comparison")
    if cmp_:
        L.append(f"Bracket {cmp_.get('bracket_id')}: order {cmp_.get('order')}, "
                 f"{cmp_.get('rounds')} round(s), status {cmp_.get('status')}"
                 + (f" ({cmp_.get('reason')})" if cmp_.get("reason") else "")
                 + f"; seat restored: {_yn(cmp_.get('restored'))}; hold released: "
                   f"{_yn(cmp_.get('hold_released'))}.")
        L.append(downtimes_markdown(cmp_.get("downtimes")))
    req = rep.get("requests")
    if req:
        def cnt(v: Any) -> str:
            return "unknown" if v is None else f"{v:,}"
        L.append("Requests (warm-up excluded from every figure): " + "; ".join(
            f"{'all' if a == 'all' else 'arm ' + a}: {cnt(v['legs'])} leg(s), "
            f"{cnt(v['warmup'])} warm-up + {cnt(v['measured'])} measured probe requests, "
            f"{cnt(v['fidelity'])} fidelity, {cnt(v['canaries'])} canary"
            for a, v in req.items()) + ".")
    arms = rep["arms"]
    L += ["", "## Identity per arm", "",
          "| field | " + " | ".join(f"arm {a}" for a in arms) + " |",
          "|---|" + "---|" * len(arms)]
    for f in Identity.FIELDS:
        L.append(f"| {f} | " + " | ".join(_cell(arms[a]["identity"].get(f)) for a in arms)
                 + " |")
    L.append("| runs | " + " | ".join(", ".join(f"{r['name']} ({r['status']})"
                                                 for r in arms[a]["runs"]) for a in arms) + " |")
    L += ["", "## Fit budget and engine KV capacity", ""]
    for a, v in arms.items():
        kvt = v["kv_cache_tokens"]
        L.append(f"- arm {a}: KV capacity {'unknown' if kvt is None else f'{kvt:,} tokens'} "
                 f"(engine startup log; per leg: "
                 + ", ".join(f"{k} {'unknown' if x is None else f'{x:,}'}"
                             for k, x in v["kv_cache_tokens_per_leg"].items()) + ")"
                 + "; fit budget: " + _fit_text(v.get("fit")))
    if rep.get("kv_ratio_resident_over_candidate"):
        L.append(f"- resident/candidate KV ratio: "
                 f"{rep['kv_ratio_resident_over_candidate']:.2f}×")
    kr = rep.get("kv_ratios_candidate_over_resident") or {}
    if kr.get("engine") is not None or kr.get("fit") is not None:
        L.append("- KV capacity, candidate / resident: engine (startup log) "
                 + ("unknown" if kr.get("engine") is None else f"{kr['engine']:.2f}×")
                 + "; fit budget (predicted) "
                 + ("unknown" if kr.get("fit") is None else f"{kr['fit']:.2f}×"))
    L += ["", "## Throughput and latency per phase (population first)", ""]
    for ph in rep["phases"]:
        L += [f"### {ph['phase']}", "",
              "| arm | run | population | state | output tok/s | TTFT p50 ms | TTFT p95 ms "
              "| TPOT p50 ms | ITL p50 ms | E2E p50 ms |",
              "|---|---|---|---|---|---|---|---|---|---|"]
        for r in ph["rows"]:
            L.append(f"| {r['arm']} | {r['run']} | {r['population']} | {r.get('state', '')} | "
                     f"{_fmt(r.get('output_tok_s'))} | {_fmt(r.get('ttft_p50_s'), '', 1000)} | "
                     f"{_fmt(r.get('ttft_p95_s'), '', 1000)} | "
                     f"{_fmt(r.get('tpot_p50_s'), '', 1000, 2)}"
                     f"{' (' + r['tpot_population'] + ')' if r.get('tpot_population') else ''} | "
                     f"{_fmt(r.get('itl_p50_s'), '', 1000, 2)} | "
                     f"{_fmt(r.get('e2e_p50_s'), '', 1000)} |")
        L.append("")
        L += goodput_markdown(ph["rows"])
        L += cache_markdown(ph["rows"])
        L += server_markdown(ph["rows"])
        L += timing_markdown(ph["rows"])
    L += sweep_markdown(rep.get("sweeps"))
    fd = rep.get("fidelity")
    L += ["## Fidelity", ""]
    if fd:
        L += [fd["note"], "", "| pair | case | positions compared | first divergence | "
              "min top-20 overlap | max common abs Δ logprob | exact |",
              "|---|---|---|---|---|---|---|"]
        for p in fd["pairs"]:
            for c in p["cases"]:
                d = c["max_common_abs_dlogprob"]
                L.append(f"| {p['a']} vs {p['b']} | {c['case_id']} | {c['positions_compared']} "
                         f"| {_cell(c['first_divergence'], 'none')} "
                         f"| {_cell(c['min_top_overlap'])} "
                         f"| {'unknown' if d is None else f'{d:.3g}'} | {_yn(c['exact'])} |")
            if p["unmatched"]:
                L.append(f"| {p['a']} vs {p['b']} | unmatched: {', '.join(p['unmatched'])} "
                         f"| | | | | |")
    else:
        L.append("No fidelity traces in these runs.")
    cn = rep.get("canaries")
    L += ["", "## Canaries (verdicts by code)", ""]
    if cn:
        L += ["Identical outputs for the same case (item and seed) on several legs are one "
              "trial (answer SHA-256): intervals and pass^k use the distinct trials only.", "",
              "| arm | kind | trials: passed/completed (attempted) | distinct trials: passed/"
              "distinct | Wilson 95 % (distinct) | pass^k (distinct) | why | note |",
              "|---|---|---|---|---|---|---|---|"]
        for a, kinds in cn["arms"].items():
            for k, s in kinds.items():
                iv = s["interval"]
                L.append(f"| {a} | {k} | {s['passed']}/{s['completed']} ({s['attempted']}) | "
                         f"{s.get('distinct_passed', '?')}/{s.get('distinct', '?')} | "
                         + (f"[{iv['low']:.3f}, {iv['high']:.3f}]" if iv else "withheld")
                         + " | " + ("withheld" if s["pass_k"] is None
                                    else f"{s['pass_k']:.3f}")
                         + f" (k={s['k']}) | {s.get('why', '')} | {s['refused'] or ''} |")
    else:
        L.append("No canary results in these runs.")
    L += ["", "## Retained runs that are not complete", ""]
    L += ([f"- {r['name']} ({r['run_id']}): **{r['status']}** — {r['reason']} ({r['path']})"
           for r in rep["retained"]] or ["None: every run is complete."])
    L += breaches_markdown(rep.get("breaches"))
    L += ["", "## Claims", ""]
    for c in rep["claims"]:
        if c["survives"]:
            L.append(f"- SURVIVES — {c['subject']}: {c['statement']}")
        else:
            L.append(f"- REFUSED — {c['subject']}: {c['statement']}")
            for r in c["refused_by"]:
                L.append(f"  - rule **{r['rule']}**: {r['detail']}")
    L += ["", "## Rules", ""] + [f"- **{k}**: {v}" for k, v in rep["rules"].items()]
    L += ["", "## Raw files (SHA-256)", "", "`seat-console report --verify THIS_FILE` "
          "re-checks them and re-derives this report from them.", ""]
    L += [f"Input: `{x}`" for x in rep.get("inputs") or []]
    L += ["", "| sha256 | path |", "|---|---|"]
    L += [f"| `{h}` | {p} |" for p, h in rep["files"].items()]
    return "\n".join(L) + "\n"


def downtimes_markdown(d: Any) -> str:
    """The bracket's seat downtime per leg (``compare.json``'s ``downtimes``: ``{"leg1":
    31.4, …}``, each leg's seat change measured from the drain to the first completion
    verified on the engine that follows, actions/drain.py): ``"Seat down per leg: leg 1
    31.4 s, leg 2 unknown."``. A value that is not a finite number ≥ 0 is unknown, never 0;
    a compare.json without the field (older) says the downtime was not recorded."""
    if not isinstance(d, Mapping) or not d:
        return "Seat down per leg: not recorded in this bracket's compare.json."
    parts = []
    for k, v in sorted(d.items(), key=lambda kv: str(kv[0]))[:64]:
        ok = (isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)
              and v >= 0)
        name = str(k).replace("leg", "leg ", 1)[:16]
        parts.append(f"{name} {v:.1f} s" if ok else f"{name} unknown")
    return "Seat down per leg (drain to the first completion on the next engine): " + \
        ", ".join(parts) + "."


def timing_markdown(rows: Sequence[Mapping[str, Any]]) -> list[str]:
    """The client-vs-engine TTFT / ITL table of one phase (its rows' ``engine_timing``, the
    checks made again by :meth:`~seat_console.evidence.runs.Phase.timing_checks`): per leg and
    figure the populations, the client's p50 / p95 and the engine bucket holding the same
    quantile of vLLM's own histogram over the phase, and every finding. ``[]`` when no leg
    recorded the engine's histograms and none failed to."""
    body = []
    for r in rows:
        if r.get("timing_problem"):
            body.append(f"| {r['arm']} | {r['run']} | — | | | | | | unreadable: "
                        f"{r['timing_problem']} |")
        for f, t in (r.get("engine_timing") or {}).items():
            if t.get("engine") is None:
                body.append(f"| {r['arm']} | {r['run']} | {f.upper()} | {t['client_n']} / — "
                            f"| | | | | engine: {t.get('problem') or 'not read'} |")
                continue
            c = {round(x["q"] * 100): x for x in t["checks"]}

            def q(p: int, c: Mapping[int, Any] = c) -> str:
                x = c.get(p)
                if x is None:
                    return " | "
                v, b = x["client_s"], x["engine_bucket_s"]   # JSON: "+Inf" as a string
                return (("n/a" if v is None else engine_timing.ms_text(v)) + " | "
                        + engine_timing.bucket_text(None if b is None
                                                    else (float(b[0]), float(b[1]))))
            finds = "; ".join(f"p{p}: **{x['finding']}**" for p, x in c.items() if x["finding"])
            body.append(f"| {r['arm']} | {r['run']} | {f.upper()} | {t['client_n']} / "
                        f"{t['engine_n']:,.0f} | {q(50)} | {q(95)} | {finds or 'agree'} |")
    if not body:
        return []
    return ["Client vs engine (vLLM's own `vllm:time_to_first_token_seconds` / "
            "`vllm:inter_token_latency_seconds`, bucket deltas between the phase's two scrapes; "
            "a client quantile outside the engine bucket holding the same quantile is a "
            f"finding: \"client-side delay\" when the probe used ≥ {engine_timing.BUSY_SHARE:.0%} "
            "of a core over the phase, else \"network\" — anything outside the probe: the path "
            "and vLLM's API server before the engine's clock starts, such as tokenization and "
            "its queue; p50 / p95 are the client's own, re-derived from its requests):", "",
            "| arm | run | figure | n client / engine | p50 client ms | p50 engine bucket | "
            "p95 client ms | p95 engine bucket | finding |",
            "|---|---|---|---|---|---|---|---|---|", *body, ""]


def _fit_text(fit: Mapping[str, Any] | None) -> str:
    if not fit:
        return "not recorded"
    kv = fit.get("kv_tokens")
    parts = [f"{fit.get('name') or 'unnamed'}"]
    parts.append("predicted KV " + ("unknown" if kv is None else f"{kv:,} tokens"))
    if fit.get("fits") is not None:
        parts.append("fits" if fit["fits"] else "DOES NOT FIT")
    if fit.get("words"):
        parts.append(str(fit["words"]))
    return " — ".join(parts)


def _yn(v: Any) -> str:
    return "unknown" if v is None else ("yes" if v else "no")


def _cell(v: Any, none: str = "unknown") -> str:
    if v is None:
        return none
    if isinstance(v, (list, tuple)):
        return ", ".join(str(x) for x in v) or "none"
    if isinstance(v, dict):
        return ", ".join(f"{k}={x}" for k, x in v.items())
    return str(v).replace("|", "\\|")


# -- verify ----------------------------------------------------------------------------------
_MD_ROW = re.compile(r"^\| `([0-9a-f]{64})` \| (.+) \|$")


def recorded_hashes(report_text: str, source: str) -> dict[str, str]:
    """The ``{path: sha256}`` a report recorded: the JSON report's ``files``, or the Markdown
    report's "Raw files (SHA-256)" table. Raises :class:`RunError` naming ``source`` if it holds
    none."""
    doc = _report_doc(report_text, source)
    if isinstance(doc, dict):
        files = doc.get("files")
        if not isinstance(files, dict) or not all(
                isinstance(v, str) and re.fullmatch(r"[0-9a-f]{64}", v) for v in files.values()):
            raise RunError(f"{source}: a JSON report without a valid 'files' map")
        return dict(files)
    out = {m.group(2): m.group(1) for line in report_text.splitlines()
           if (m := _MD_ROW.match(line))}
    if not out:
        raise RunError(f"{source}: no SHA-256 table found (is this a seat-console report?)")
    return out


def _report_doc(text: str, source: str) -> Any:
    """A report's text as JSON, or ``None`` when it is Markdown (does not start with ``{``).
    JSON text is read as outside input (:func:`~seat_console.evidence.runs.read_json`: nesting,
    non-finite numbers and huge integers refused — deep nesting raised :class:`RecursionError`
    here, issue 31); raises :class:`RunError` naming ``source`` for JSON it refuses."""
    if not text.lstrip().startswith("{"):
        return None
    return read_json(text, source, "a report this console writes is JSON of a few levels, or "
                                   "Markdown: regenerate it with `seat-console report`")


@dataclass(frozen=True)
class VerifyRow:
    """One file: ``path``, ``recorded`` and ``actual`` SHA-256 (``None`` if unreadable),
    ``ok``."""

    path: str
    recorded: str
    actual: str | None
    problem: str | None

    @property
    def ok(self) -> bool:
        """The file is there and unchanged."""
        return self.actual == self.recorded

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready."""
        return {"path": self.path, "recorded": self.recorded, "actual": self.actual,
                "ok": self.ok, "problem": self.problem}


def verify(recorded: Mapping[str, str]) -> list[VerifyRow]:
    """Re-hash every recorded file; a missing or unreadable file has ``actual`` None."""
    rows = []
    for path, h in recorded.items():
        try:
            actual = hashlib.sha256(Path(path).read_bytes()).hexdigest()
            problem = None if actual == h else "changed since the report"
        except OSError as exc:
            actual, problem = None, f"cannot read ({exc.strerror or exc})"
        except ValueError as exc:  # a NUL or a lone surrogate in an edited report's path
            actual, problem = None, f"not a file path ({exc})"
        rows.append(VerifyRow(path, h, actual, problem))
    return rows


_MD_INPUT = re.compile(r"^Input: `(.+)`$")
_MD_GENERATED = re.compile(r"^Generated (\S+) \(UTC\)\.")


def recorded_inputs(report_text: str, source: str = "report"
                    ) -> tuple[list[str], datetime | None, Any]:
    """From a report's text: the input directories it was built from (JSON ``inputs``, or the
    Markdown ``Input:`` lines), its ``generated_at`` time, and the parsed JSON document (or
    ``None`` for Markdown). Raises :class:`RunError` naming ``source`` for JSON text it refuses
    (nested too deeply, a non-finite number, a huge integer)."""
    doc = _report_doc(report_text, source)
    if isinstance(doc, dict):
        ins = doc.get("inputs")
        ins = [str(x) for x in ins] if isinstance(ins, list) else []
        gen = doc.get("generated_at")
    else:
        doc = None
        lines = report_text.splitlines()
        ins = [m.group(1) for line in lines if (m := _MD_INPUT.match(line))]
        gen = next((m.group(1) for line in lines if (m := _MD_GENERATED.match(line))), None)
    try:
        at = parse_time(gen, "generated_at") if isinstance(gen, str) else None
    except RunError:
        at = None
    return ins, at, doc


def _json_diff(a: Any, b: Any, path: str, out: list[str], limit: int = 20) -> None:
    if len(out) >= limit:
        return
    if isinstance(a, dict) and isinstance(b, dict):
        for k in list(a) + [k for k in b if k not in a]:
            if k not in b:
                out.append(f"{path}.{k}: in the report, not in the re-derived one")
            elif k not in a:
                out.append(f"{path}.{k}: missing from the report")
            else:
                _json_diff(a[k], b[k], f"{path}.{k}", out, limit)
    elif isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            out.append(f"{path}: {len(a)} items in the report, {len(b)} re-derived")
        for i, (x, y) in enumerate(zip(a, b)):
            _json_diff(x, y, f"{path}[{i}]", out, limit)
    elif a != b:
        out.append(f"{path}: the report says {json.dumps(a, ensure_ascii=False)[:160]}, "
                   f"re-derived {json.dumps(b, ensure_ascii=False)[:160]}")


def report_format(report_text: str, source: str = "report") -> int | None:
    """The format version (:data:`REPORT_FORMAT`) a report's text was written in: the JSON
    ``schema`` (``seat-console.evidence-report/N``), or the Markdown "Report format" line —
    ``1`` for a Markdown report of this console without one (written before formats were
    numbered); ``None`` when the text says no version this console knows the shape of (a JSON
    document without a ``schema``, Markdown that is not a seat evidence report, JSON this
    console refuses to read)."""
    try:
        doc = _report_doc(report_text, source)
    except RunError:
        return None
    if isinstance(doc, dict):
        m = _SCHEMA_RE.fullmatch(str(doc.get("schema", "")))
        return int(m.group(1)) if m else None
    if doc is not None:
        return None
    lines = report_text.splitlines()
    for line in lines:
        if (m := _MD_FORMAT.match(line)):
            return int(m.group(1))
    return 1 if lines and lines[0] == "# Seat evidence report" else None


def rederive(report_text: str, source: str) -> list[str]:
    """:func:`rederive_parts` as one list (the raw files' own problems first)."""
    problems, diffs = rederive_parts(report_text, source)
    return [*problems, *diffs]


def rederive_parts(report_text: str, source: str) -> tuple[list[str], list[str]]:
    """Re-derive the report at ``source`` from the raw files it names and say how it differs:
    every run/comparison it was built from is read again (summaries re-derived from the raw
    requests, :func:`seat_console.evidence.runs.rederive_problems`), the report is built again
    at its own ``generated_at`` and compared with the text — JSON field by field, Markdown
    line by line — so an edited claim ("REFUSED" → "SURVIVES", "1.113×" → "2.500×"), figure or
    table row is named. A ``summary.json`` that disagrees with its ``requests.jsonl`` is named
    too, even when the report was regenerated from it. Returns ``(problems, differences)``:
    ``problems`` — what is wrong whatever the report's format (it cannot be re-derived, a
    summary disagrees with its raw requests); ``differences`` — the report's text against the
    re-derived one (from an edit, or from a format this console no longer writes:
    :func:`report_format` tells). Both ``[]`` when the report is exactly what its raw files
    give."""
    try:
        ins, at, doc = recorded_inputs(report_text, source)
    except RunError as exc:
        return [f"cannot re-derive: {exc}"], []
    if not ins:
        return [f"{source}: names no input directory (no 'inputs' / 'Input:' lines): it cannot "
                f"be re-derived (regenerate it with this console's `seat-console report`)"], []
    try:
        inputs = load_inputs(ins)
    except RunError as exc:
        return [f"cannot re-derive: {exc}"], []
    rep = json.loads(json.dumps(build_report(inputs, now=at), default=str))
    problems = [f"{c['run']}: {c['problem']} ({c['path']})" for c in rep["consistency"]]
    out: list[str] = []
    if doc is not None:
        diffs: list[str] = []
        _json_diff(doc, rep, "report", diffs)
        out += diffs
    else:
        import difflib

        mine = report_text.splitlines()
        again = render_markdown(rep).splitlines()
        n = 0
        for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, mine, again,
                                                           autojunk=False).get_opcodes():
            if tag == "equal":
                continue
            n += 1
            if n > 20:
                out.append("… more differences")
                break
            got = " / ".join(mine[i1:i2])[:200] or "(nothing)"
            want = " / ".join(again[j1:j2])[:200] or "(nothing)"
            out.append(f"line {i1 + 1}: the report has {got!r}; re-derived from the raw files: "
                       f"{want!r}")
    return problems, out


__all__ = ["Claim", "Inputs", "REPORT_FORMAT", "REPORT_SCHEMA", "RULES", "VerifyRow",
           "build_report", "load_inputs", "parse_time", "recorded_hashes", "recorded_inputs",
           "rederive", "rederive_parts", "render_markdown", "report_format", "simultaneity",
           "verify"]
