"""The bracketed comparison: A/B/B/A legs, each on a freshly started container, one hold.

Runbook ``compare`` (policy ``undo``), built from the bracket plan
(:func:`seat_console.evidence.bracket.plan_bracket`):

1. **hold** — an active hold is used as it is (and left in place at the end); otherwise one is
   placed (:func:`~seat_console.actions.hold.build_hold`) and released at the end. Undo:
   release it if this compare placed it.
2. per leg, **seat** — make the leg's arm serve on a freshly started container:

   * A after nothing or A: restart the resident container (stop, start; same container);
   * B after A (or first): the ``swap`` runbook (:func:`~seat_console.actions.swap.build_swap`);
   * B after B: restart the probe container (stop, start; same container, same image ID);
   * A after B: the ``restore`` runbook's first two steps (stop the probe, start the recorded
     resident and verify it) — *without* its hold release, so the hold is held throughout.

   Verify: the seat's container is running, started after the step began, and serves.
   Undo (swap steps): restore the resident, keeping the hold.
3. per leg, **measure** — the probe (every phase of ``[probe]``), fidelity (greedy with
   ``logprobs`` 20 on the shipped prompts) and canaries, written to the leg's directory
   (:mod:`seat_console.evidence.runs` documents ``leg.json``). A leg whose probe is not
   complete is kept and reported as such: it does not stop the bracket (the report refuses
   claims from it).

   **A breach of the hold stops the bracket.** Before each leg's seat step the journal is read
   for breaches of the hold during the bracket (a stopped timer started by someone else, the
   silence gone: :func:`watch_hold` journals them after each leg's measurement). If there is
   one, that leg and every later one are skipped (:func:`breach_stop`): with the hold broken
   the fleet's remediation loop may act on the seat at any moment, which is what the hold
   exists to prevent, and the bracket can no longer be complete, so running the remaining legs
   would only lengthen the seat's downtime. The seat is restored and the hold released as
   below; ``compare.json`` says ``incomplete``, names the breach and the legs not run.
4. **restore seat** — if the candidate holds the seat, the restore steps (hold kept).
5. **release hold** — only if step 1 placed it.

**Gate** (:func:`~seat_console.actions.gates.compare_gate`, read right before the first
step): refused unless the resident holds the seat — a compare started with the candidate in
the seat measured the candidate as arm A and its "restart the resident" leg crashed against the
running candidate. The fix it names: ``seat-console restore`` first. And
(:func:`candidate_image_gate`) refused unless the candidate's image resolves on the engine, so
no leg takes the seat down for a compare whose B legs cannot start.

``compare.json`` (in ``<data dir>/comparisons/<bracket id>/``) is written before the first
step (status ``running``) and rewritten at the end with the outcome, so a killed compare is
kept too. Nothing recorded is ever deleted.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from seat_console.actions import hold as hold_mod
from seat_console.actions import swap as swap_mod
from seat_console.actions.journal import Entry, Journal
from seat_console.actions.runbook import (
    Check,
    Gate,
    Observer,
    Result,
    Runbook,
    RunContext,
    Step,
    StepError,
    facts_from_rows,
)
from seat_console.evidence import canaries as can
from seat_console.evidence import fidelity as fid
from seat_console.evidence.bracket import LegPlan, new_bracket_id, plan_bracket, transition
from seat_console.node.context import NodeContext
from seat_console.node.engine_client import EngineClient, EngineError
from seat_console.core.base import utcnow

COMPARE_SCHEMA = "seat-console.comparison/1"

UNNAMED_BRACKET = "cmp-<time>-<id>"
"""The bracket ID a plan that is not run names (``seat-console compare --dry-run``): a run
mints its own (:func:`~seat_console.evidence.bracket.new_bracket_id`) when it is planned, so a
dry run names no folder that a later ``compare`` would not use. A plan that is run (the CLI's
plan then run in one process, the TUI's confirmed plan) names the folder the run writes."""


@dataclass
class CompareOptions:
    """``order``/``rounds``: the bracket; ``ttl_s``: the hold's lease if the compare places
    one; ``canary_runs``: runs per canary item per leg (≥ 3 so pass^3 is defined);
    ``fidelity``/``canaries``: whether to run them; ``force``/``reason``: passed to the swap
    (skip its fit check, journaled); ``on_log``: each engine log line while one starts;
    ``data_root``: the data dir (default the probe store's)."""

    order: str = "ABBA"
    rounds: int = 1
    ttl_s: int = 3600
    canary_runs: int = 3
    fidelity: bool = True
    canaries: bool = True
    force: bool = False
    reason: str = ""
    on_log: Callable[[str], None] = field(default=lambda line: None)
    data_root: Path | None = None


def comparisons_dir(data_root: Path | None = None) -> Path:
    """``<data dir>/comparisons`` (the data dir of :mod:`seat_console.probe.store`)."""
    from seat_console.core.paths import data_dir

    return (data_root or data_dir()) / "comparisons"


def _write_json(path: Path, doc: dict[str, Any]) -> None:
    tmp = path.with_name("." + path.name + ".tmp")
    tmp.write_text(json.dumps(doc, indent=1, default=str) + "\n", "utf-8")
    os.replace(tmp, path)


# -- seat changes -----------------------------------------------------------------------------
def _started(c: Any) -> datetime | None:
    from seat_console.node.docker import parse_docker_time

    return parse_docker_time(c.attrs.get("State", {}).get("StartedAt"))


def restart_container(nctx: NodeContext, name: str, on_log: Callable[[str], None],
                      facts: dict[str, Any] | None = None) -> str:
    """Drain, stop and start container ``name`` (the same container: same image ID, args,
    mounts) and wait until the seat serves and answers one completion. The drain
    (:func:`seat_console.actions.swap.stop_container`) and the seat's downtime
    (:func:`seat_console.actions.drain.mark_up`) go into ``facts`` (``drain``, ``downtime``)
    when given. Raises :class:`StepError` if it is missing, its drain fails, it does not stop
    or does not serve (with its log tail)."""
    facts = {} if facts is None else facts
    client = nctx.docker(timeout_s=swap_mod.DOCKER_TIMEOUT_S)
    try:
        c = swap_mod._inspect(client, name)
        if c is None:
            raise StepError(f"container {name} does not exist")
        models = swap_mod._models(swap_mod._seat(nctx)) or []
        out = ""
        if swap_mod._running(c):
            rec: dict[str, Any] = {}
            try:
                out = swap_mod.stop_container(
                    client, c, int(c.attrs.get("Config", {}).get("StopTimeout") or 10),
                    nctx, record=rec) + "; "
            finally:
                if rec:
                    facts["drain"] = rec
        nctx.expect(c.name, ("start",))
        c.start()
        c.reload()
        msg = swap_mod.wait_serving(c, swap_mod._seat(nctx), models,
                                    swap_mod.RESIDENT_START_TIMEOUT_S, on_log,
                                    since=_started(c))
        done = swap_mod.completion(swap_mod._seat(nctx), models[0]) if models else ""
        down = ""
        if done:
            from seat_console.actions import drain as drain_mod

            down = drain_mod.mark_up(facts, started_at=_started(c), image_id=c.attrs.get("Image"))
        return "; ".join(x for x in (f"{out}{name} started fresh", msg, done, down) if x)
    finally:
        client.close()


def restore_keep_hold(nctx: NodeContext, journal: Journal, observer: Observer | None,
                      on_log: Callable[[str], None]) -> Result:
    """The ``restore`` runbook without its last step (the hold release): stop the probe,
    start the recorded resident and verify it. Raises :class:`StepError` when no swap
    recorded a resident."""
    rb = swap_mod.build_restore(nctx, journal, on_log=on_log, observer=observer)
    steps = [s for s in rb.steps if s.name != "release hold"]
    keep = Runbook("restore", steps, journal=journal, observer=observer, policy="continue",
                   inputs={**rb.ctx.inputs, "keep_hold": "compare holds it throughout"},
                   facts=rb.ctx.facts, profile_sha256=nctx.loaded.sha256)
    return keep.run()


def _seat_container(nctx: NodeContext) -> Any | None:
    """The running container that holds the seat (resident or probe), or ``None``."""
    names = [swap_mod.resident_or_profile(nctx)]   # after a promote: the seat-state file's
    if nctx.profile.swap is not None:
        names.append(nctx.profile.swap.container)
    client = nctx.docker(timeout_s=swap_mod.DOCKER_TIMEOUT_S)
    try:
        for n in names:
            c = swap_mod._inspect(client, n)
            if swap_mod._running(c):
                return c
        return None
    finally:
        client.close()


# -- the fit budget of both arms ---------------------------------------------------------------
def fit_summary(nctx: NodeContext) -> dict[str, Any]:
    """The fit budget of the resident (A) and the candidate (B) from the profile and the
    checkpoints (``seat-console fit --no-live``'s pipeline): per arm ``name``, ``kv_tokens``
    (predicted KV capacity, tokens), ``max_concurrency``, ``fits`` and ``words``; plus
    ``kv_tokens_ratio`` (resident/candidate). ``{"problem": …}`` when it cannot be computed
    (the compare goes on; the report says "fit: not recorded")."""
    try:
        from seat_console.snapshot.fit_reading import gather_fit_inputs, host_memory
        from seat_console.fit.inputs import WhatIf, compute_budgets, no_verdict_reason

        inputs = gather_fit_inputs(nctx.loaded, None, gpu_unavailable="not read by compare",
                                   host=host_memory(), containers=None)
        comp, _overlay = compute_budgets(inputs, WhatIf())
    except Exception as exc:  # noqa: BLE001 - the budget is context, not a precondition
        return {"problem": f"{type(exc).__name__}: {exc}"}
    out: dict[str, Any] = {"kv_tokens_ratio": comp.kv_tokens_ratio,
                           "source": "seat-console fit --no-live (profile + checkpoints)"}
    arms = (("A", comp.resident, comp.resident_unavailable, inputs.resident),
            ("B", comp.candidate, comp.candidate_unavailable, inputs.candidate))
    for arm, budget, why, side in arms:
        if budget is None:
            out[arm] = {"name": None, "kv_tokens": None, "max_concurrency": None, "fits": None,
                        "words": why or no_verdict_reason(side)}
        else:
            out[arm] = {"name": budget.name, "kv_tokens": budget.kv_tokens,
                        "max_concurrency": budget.max_concurrency,
                        "fits": budget.verdict.fits,
                        "words": budget.verdict.words or budget.no_verdict}
    return out


def backport_base(c: Any) -> str | None:
    """The base image (``repo@sha256:…``) a backport image was built from, read from the
    ``org.seat-console.backport.base`` label of the container's image (build-backport writes
    it); ``None`` for an image without it or one that cannot be inspected."""
    from seat_console.actions.backport import LABEL_PREFIX

    try:
        labels = (c.image.attrs.get("Config") or {}).get("Labels") or {}
    except Exception:  # noqa: BLE001 - provenance is context, not a precondition
        return None
    v = labels.get(f"{LABEL_PREFIX}.base")
    return str(v) if v else None


def _incarnation(nctx: NodeContext) -> str | None:
    """``"<name> <container id[:12]> started <StartedAt>"`` of the seat's container, or None."""
    c = _seat_container(nctx)
    if c is None:
        return None
    return f"{c.name} {c.id[:12]} started {c.attrs.get('State', {}).get('StartedAt')}"


# -- one leg's measurement --------------------------------------------------------------------
def canary_first_seed(leg: LegPlan, opts: CompareOptions) -> int:
    """The first canary seed of ``leg``: each pair of legs (A and B alike) gets its own
    ``canary_runs`` seeds — pair j (0-based over the bracket) seeds j·runs … j·runs + runs − 1
    — so the legs of one arm are distinct trials (a deterministic engine given one seed twice
    gives one trial, not two) while the A and B legs of a pair still match case for case."""
    per_round = max(1, opts.order.count("A"))
    k = int(leg.pair.rsplit("p", 1)[1])
    return ((leg.round - 1) * per_round + (k - 1)) * opts.canary_runs


def measure_leg(nctx: NodeContext, leg: LegPlan, bracket_id: str, cmp_dir: Path,
                opts: CompareOptions) -> dict[str, Any]:
    """Probe + fidelity + canaries on whatever holds the seat now, into ``cmp_dir/legs/<n>-<arm>``.

    Returns the ``leg.json`` dict it wrote. Never raises for a measurement that went wrong: the
    leg is written with ``status`` and ``reason`` (kept like every run). Blocking (worker).
    """
    from seat_console.probe.client import run_async
    from seat_console.actions import probe_journal
    from seat_console.probe.run import Probe, ProbeRefused, default_monitor_factory, preflight
    from seat_console.probe.store import RunWriter, runs_dir

    d = cmp_dir / "legs" / leg.dirname
    d.mkdir(parents=True, exist_ok=True)
    rec: dict[str, Any] = {"arm": leg.arm, "leg": leg.n, "round": leg.round, "pair": leg.pair,
                           "bracket_id": bracket_id, "started_at": utcnow().isoformat(),
                           "status": "running", "reason": None, "probe_run_dir": None}
    _write_json(d / "leg.json", rec)
    problems: list[str] = []
    loaded = nctx.loaded
    before = _incarnation(nctx)
    try:
        pre = preflight(loaded, hold=probe_journal.hold_info())
    except ProbeRefused as exc:
        rec.update(status="failed", reason=f"probe refused: {exc}", ended_at=utcnow().isoformat())
        _write_json(d / "leg.json", rec)
        return rec
    c = _seat_container(nctx)
    if c is not None:
        try:
            (d / "engine.log").write_bytes(c.logs(since=_started(c)))
        except Exception as exc:  # noqa: BLE001 - the log is evidence, not a precondition
            problems.append(f"engine log not kept: {exc}")
        base = backport_base(c)
        if base:
            rec["identity"] = {"base_digest": base}
    root = (opts.data_root / "runs") if opts.data_root else runs_dir()
    writer = RunWriter(root=root)
    rec["probe_run_dir"] = str(writer.path)
    _write_json(d / "leg.json", rec)
    probe = Probe(loaded, pre, writer=writer, monitor_factory=default_monitor_factory(loaded, pre))
    summary = run_async(probe.run())
    rec["kv_cache_tokens"] = (summary.get("kv_capacity") or {}).get("tokens")
    with EngineClient(pre.endpoint, timeout_s=120.0) as client:
        if opts.fidelity:
            try:
                traces = fid.collect(client, pre.model, fid.shipped_cases())
                (d / "fidelity.jsonl").write_text(
                    "".join(json.dumps(t.as_dict()) + "\n" for t in traces), "utf-8")
            except (fid.FidelityError, EngineError) as exc:
                problems.append(f"fidelity: {exc}")
        if opts.canaries:
            results = can.run_canaries(client, pre.model, can.shipped_canaries(),
                                       opts.canary_runs,
                                       first_seed=canary_first_seed(leg, opts))
            (d / "canaries.jsonl").write_text(
                "".join(json.dumps(r.as_dict()) + "\n" for r in results), "utf-8")
            failed = sum(r.error is not None for r in results)
            if failed:
                problems.append(f"canaries: {failed}/{len(results)} requests failed")
    status = summary.get("status") or "unknown"
    if problems and status == "complete":
        status = "incomplete"
    after = _incarnation(nctx)
    if after != before:  # the probe watches its own window; this covers fidelity + canaries
        rec["disruptions"] = [{"kind": "container", "at": utcnow().isoformat(),
                               "what": f"the seat's container changed during the leg: "
                                       f"{before} → {after}"}]
        status = "disrupted"
    rec.update(status=status, reason="; ".join(problems + list(summary.get("problems") or []))
               or None, ended_at=utcnow().isoformat())
    _write_json(d / "leg.json", rec)
    return rec


# -- breaches of the bracket's hold (issue 17) -------------------------------------------------
def watch_hold(nctx: NodeContext, journal: Journal, hold_id: str | None) -> list[str]:
    """Read the node now and journal every new breach of hold ``hold_id`` (a timer it stopped
    started by someone else, its silence expired: :func:`~seat_console.actions.hold.observe`,
    one row per change event, any console's journaled steps consulted). Returns the texts
    found now (``[]`` when the hold is not active or the node cannot be read; never raises)."""
    from seat_console.sources.timers import TimersReading, read_timers

    try:
        h = next((x for x in hold_mod.holds(journal) if x.hold_id == hold_id), None)
        if h is None or not h.is_active():
            return []
        r = read_timers(nctx.transport, nctx.timer_units)
        timers = r if isinstance(r, TimersReading) else None
        sils = None
        if h.silence_id:
            try:
                sils = [nctx.alertmanager.get_silence(h.silence_id)]
            except Exception:  # noqa: BLE001 - unreadable: the timers are still checked
                sils = None
        found = hold_mod.observe(journal, h, timers, sils)
        hold_mod.record_breaches(journal, h, found)
        return [b.text for b in found]
    except Exception:  # noqa: BLE001 - the watch is evidence, never a failed step
        return []


def bracket_breaches(journal: Journal, hold_id: str | None, since: str | None,
                     until: datetime | None = None) -> list[dict[str, Any]]:
    """Every breach of the bracket's hold journaled (by any console) from ``since`` (ISO, the
    compare's start) to ``until``: ``[{"journaled_at", "changed_at", "seen_at", "what",
    "seq", "by"}]`` — what ``compare.json`` records as ``breaches`` for the report (the
    evidence layer does not read the journal)."""
    if not hold_id:
        return []
    start = datetime.fromisoformat(since) if since else None
    out = []
    for r in hold_mod.hold_breach_rows(journal, hold_id, start, until):
        b = r.facts.get("breach") if isinstance(r.facts.get("breach"), dict) else {}
        out.append({"journaled_at": hold_mod.iso(r.at), "changed_at": b.get("changed_at"),
                    "seen_at": b.get("seen_at"), "what": r.outcome, "seq": r.seq,
                    "by": f"{r.user}@{r.host}"})
    return out


BREACH_STOP_FACT = "stopped_at_breach"
"""Run fact: the name of the first leg skipped because the hold was breached (unset: none)."""


def breach_stop(journal: Journal | None, ctx: RunContext, leg_name: str) -> str | None:
    """Whether leg ``leg_name`` must not begin: the text saying why (the first breach of the
    bracket's hold journaled since the compare started, with its time), else ``None``.

    Once a leg is stopped, every later one is too (run fact :data:`BREACH_STOP_FACT`). Reads
    the journal only (:func:`bracket_breaches`); ``None`` without a journal, and before
    :func:`run_compare` has started the run (``compare_started_at``: a plan, dry-run or not,
    never stops a leg — it shares the run's facts)."""
    if ctx.facts.get(BREACH_STOP_FACT):
        return (f"leg {leg_name} not run: the bracket stopped before leg "
                f"{ctx.facts[BREACH_STOP_FACT]} (a breach of the hold)")
    since = ctx.facts.get("compare_started_at")
    if journal is None or not since:
        return None
    found = bracket_breaches(journal, ctx.facts.get("hold_id"), since)
    if not found:
        return None
    ctx.facts[BREACH_STOP_FACT] = leg_name
    first = found[0]
    return (f"leg {leg_name} not run: the hold was breached during the bracket "
            f"({first['what']}, at {first.get('changed_at') or first['journaled_at']}); the "
            "bracket stops here, the seat is restored and the hold released")


def _record_breaches_file(cmp_dir: Path, journal: Journal, ctx: RunContext) -> None:
    """Keep ``compare.json``'s ``breaches`` current (after each leg)."""
    cp = cmp_dir / "compare.json"
    try:
        doc = json.loads(cp.read_text("utf-8"))
        doc["breaches"] = bracket_breaches(journal, ctx.facts.get("hold_id"),
                                           ctx.facts.get("compare_started_at"))
        _write_json(cp, doc)
    except (OSError, ValueError):
        pass  # written again at the end by run_compare


# -- the runbook ------------------------------------------------------------------------------
def candidate_image_gate(nctx: NodeContext) -> Gate:
    """``compare``'s gate on the candidate's image: its B legs start the probe container from
    swap's image (``[swap] image``: the backport tag, or a reference), so the compare is refused
    before its first leg takes the seat down when that image does not resolve on the engine —
    the check swap's own plan makes (:func:`~seat_console.actions.swap.probe_image`: no
    ``[swap]``, the backport not built or built from other inputs, the image not pulled). Met
    by a new engineer: `compare --dry-run` planned a clean run while `swap --dry-run` refused
    for a backport image not built; the run would have restarted the resident (leg A1) before
    failing at B1. Raises :class:`StepError` (the state and the fix); returns ``None``."""
    def gate(ctx: RunContext) -> str | None:
        client = swap_mod._client(nctx)
        try:
            swap_mod.probe_image(nctx, client)
        finally:
            client.close()
        return None
    return gate


def build_compare(nctx: NodeContext, journal: Journal, *, options: CompareOptions | None = None,
                  observer: Observer | None = None, bracket_id: str | None = None,
                  run_id: str | None = None,
                  facts: dict[str, Any] | None = None) -> tuple[Runbook, Path]:
    """The compare runbook (module docstring) and its comparison directory (not created yet:
    :func:`run_compare` creates it, runs the runbook and finalises ``compare.json``).

    Raises :class:`~seat_console.evidence.bracket.BracketError` for a bad order/rounds.
    """
    opts = options or CompareOptions()
    legs = plan_bracket(opts.order, opts.rounds)
    bid = bracket_id or new_bracket_id()
    cmp_dir = comparisons_dir(opts.data_root) / bid
    resident = swap_mod.resident_or_profile(nctx)
    probe_name = nctx.profile.swap.container if nctx.profile.swap is not None else None

    def hold_check(ctx: RunContext) -> Check:
        h = hold_mod.active_hold(journal)
        if h is not None and ctx.planning and ctx.facts.get("seat_holder") == "candidate":
            # the gate refused: its fix (`seat-console restore`) releases this hold first
            return Check(True, f"place a hold for {hold_mod.fmt_ttl(opts.ttl_s)} (released at "
                               f"the end): the `seat-console restore` the refusal names "
                               f"releases hold {h.hold_id}")
        if h is not None:
            ctx.facts["hold_placed"] = False
            ctx.facts["hold_id"] = h.hold_id
            return Check(False, f"use the active hold {h.hold_id} (left in place at the end)")
        return Check(True, f"place a hold for {hold_mod.fmt_ttl(opts.ttl_s)} (released at "
                           "the end)")

    def hold_apply(ctx: RunContext) -> str:
        res = hold_mod.build_hold(nctx, journal, ttl_s=opts.ttl_s,
                                  reason=f"seat-console compare {bid}", observer=observer).run()
        if not res.ok:
            raise StepError(f"hold {res.outcome}: {res.describe()}")
        ctx.facts["hold_placed"] = True
        h = hold_mod.active_hold(journal)
        ctx.facts["hold_id"] = h.hold_id if h else None
        return res.describe()

    def hold_verify(ctx: RunContext) -> str:
        h = hold_mod.active_hold(journal)
        if h is None:
            raise StepError("no active hold after placing one")
        return f"hold {h.hold_id} active until {hold_mod.zulu(h.expires_at)}"

    def release(ctx: RunContext) -> str:
        h = hold_mod.current_hold(journal)
        if h is None:
            return "no hold to release"
        watch_hold(nctx, journal, ctx.facts.get("hold_id"))   # a last look before it ends
        res = hold_mod.build_release(nctx, journal, h, observer=observer).run()
        if not res.ok:
            raise StepError(f"release {res.outcome}: {res.describe()}")
        ctx.facts["hold_released"] = True
        return res.describe()

    def undo_hold(ctx: RunContext) -> str | None:
        return release(ctx) if ctx.facts.get("hold_placed") else None

    def restore_seat(ctx: RunContext) -> str:
        c = _seat_container(nctx)
        if c is not None and c.name == resident:
            return f"{resident} already holds the seat"
        res = restore_keep_hold(nctx, journal, observer, opts.on_log)
        if not res.ok:
            raise StepError(f"restore {res.outcome}: {res.describe()}")
        ctx.facts[LAST_DOWNTIME] = res.facts.get("downtime")
        return res.describe()

    steps: list[Step] = [Step("hold", hold_check, hold_apply, hold_verify, undo_hold,
                              manual="seat-console release")]
    prev: str | None = None
    for leg in legs:
        steps.append(_seat_step(nctx, journal, leg, prev, opts, observer, resident, probe_name,
                                restore_seat))
        steps.append(_measure_step(nctx, leg, bid, cmp_dir, opts, journal))
        prev = leg.arm

    def end_check(ctx: RunContext) -> Check:
        if ctx.facts.get(BREACH_STOP_FACT):   # stopped early: the seat as it is now
            c = _seat_container(nctx)
            if c is not None and c.name == resident:
                return Check(False, f"the resident ({resident}) already holds the seat")
        elif prev == "A":
            return Check(False, f"the last leg is the resident's: {resident} holds the seat "
                                "at the end, nothing to restore")
        return Check(True, f"restore the resident ({resident}), keeping the hold until the "
                           "next step")

    def end_verify(ctx: RunContext) -> str:
        c = _seat_container(nctx)
        if c is None or c.name != resident:
            raise StepError(f"the seat is held by {c.name if c else 'nothing'}, not {resident}")
        return f"{resident} holds the seat"

    steps.append(Step("restore seat", end_check, restore_seat, end_verify, None,
                      manual="seat-console restore",
                      acts_on=[n for n in (resident, probe_name) if n]))

    def rel_check(ctx: RunContext) -> Check:
        if ctx.facts.get("hold_placed") is False or (
                "hold_placed" not in ctx.facts and hold_mod.active_hold(journal) is not None):
            return Check(False, "the hold was placed before this compare: left in place "
                                "(`seat-console release` ends it)")
        return Check(True, "release the hold this compare placed")

    def rel_verify(ctx: RunContext) -> str:
        if hold_mod.active_hold(journal) is not None:
            raise StepError("a hold is still active after the release")
        return "hold released"

    steps.append(Step("release hold", rel_check, release, rel_verify, None,
                      manual="seat-console release"))
    from seat_console.actions.approval import approval_gate
    from seat_console.actions.gates import compare_gate

    spec = nctx.profile.runbook
    approve = approval_gate(journal, "compare", spec.approvals, spec.approval_timeout_s)
    rb = Runbook("compare", steps, journal=journal, observer=observer, policy="undo",
                 gates=[compare_gate(nctx), candidate_image_gate(nctx),
                        *([approve] if approve is not None else [])],
                 inputs={"bracket_id": bid, "order": opts.order, "rounds": opts.rounds,
                         "force": opts.force, "reason": opts.reason},
                 facts={"bracket_id": bid, "cmp_dir": str(cmp_dir), **(facts or {})},
                 run_id=run_id, profile_sha256=nctx.loaded.sha256)
    return rb, cmp_dir


def rebuild(nctx: NodeContext, journal: Journal, rows: Sequence[Entry],
            observer: Observer | None = None) -> Runbook:
    """For ``recover``: the compare runbook of an unfinished (killed) compare, with its run
    ID, inputs and facts. Its undo puts the resident back (the swap steps' undo: restore,
    hold kept) and releases the hold if the compare placed it; the legs measured stay kept.
    Raises :class:`ValueError` for another runbook."""
    first = rows[0]
    if first.runbook != "compare":
        raise ValueError(f"compare.rebuild: {first.runbook!r} is not a compare run")
    inp = first.inputs
    facts = facts_from_rows(rows)
    opts = CompareOptions(order=str(inp.get("order", "ABBA")), rounds=int(inp.get("rounds", 1)),
                          force=bool(inp.get("force")), reason=str(inp.get("reason", "")))
    rb, _ = build_compare(nctx, journal, options=opts, observer=observer,
                          bracket_id=str(inp.get("bracket_id") or facts.get("bracket_id")),
                          run_id=first.run_id, facts=facts)
    return rb


def _seat_step(nctx: NodeContext, journal: Journal, leg: LegPlan, prev: str | None,
               opts: CompareOptions, observer: Observer | None, resident: str,
               probe_name: str | None, restore_seat: Callable[[RunContext], str]) -> Step:
    how = transition(prev, leg.arm)
    if how == "restart-resident":
        what, text = "restart", f"restart the resident {resident} (fresh incarnation)"

        def apply(ctx: RunContext) -> str:
            out = restart_container(nctx, resident, opts.on_log, ctx.facts)
            ctx.facts[LAST_DOWNTIME] = ctx.facts.get("downtime")
            return out
    elif how == "restart-candidate":
        if probe_name is None:
            raise StepError("the profile has no [swap] section: no candidate to compare")
        what, text = "restart", f"restart the probe {probe_name} (fresh incarnation)"

        def apply(ctx: RunContext) -> str:
            out = restart_container(nctx, probe_name, opts.on_log, ctx.facts)
            ctx.facts[LAST_DOWNTIME] = ctx.facts.get("downtime")
            return out
    elif how == "swap":
        what, text = "swap", "swap: stop the resident, start the candidate (swap runbook)"

        def apply(ctx: RunContext) -> str:
            res = swap_mod.build_swap(nctx, journal, options=swap_mod.SwapOptions(
                force=opts.force, reason=opts.reason, on_log=opts.on_log),
                observer=observer, approval=False).run()   # the compare was approved once
            if not res.ok:
                raise StepError(f"swap {res.outcome}: {res.describe()}")
            ctx.facts[LAST_DOWNTIME] = res.facts.get("downtime")
            return res.describe()
    else:
        what, text = "restore", "restore the resident (restore runbook, hold kept)"
        apply = restore_seat  # type: ignore[assignment]

    want = resident if leg.arm == "A" else probe_name

    def check(ctx: RunContext) -> Check:
        stop = breach_stop(journal, ctx, leg.name)
        if stop is not None:
            return Check(False, stop)
        ctx.facts[f"leg{leg.n}_began"] = utcnow().isoformat()
        bound = (f"bound {nctx.profile.seat.drain_timeout_s:g} s" if nctx is not None
                 else "bound [seat] drain_timeout_s")
        return Check(True, f"leg {leg.name}: {text}; the seat's engine is drained before it "
                           f"stops ({bound}, actions/drain.py) and the seat's downtime "
                           "measured")

    def verify(ctx: RunContext) -> str:
        c = _seat_container(nctx)
        if c is None or c.name != want:
            raise StepError(f"leg {leg.name}: the seat is held by "
                            f"{c.name if c else 'nothing'}, not {want}")
        began = datetime.fromisoformat(ctx.facts[f"leg{leg.n}_began"])
        st = _started(c)
        if st is None or st < began:
            raise StepError(f"leg {leg.name}: {want} started at {st}, before this leg began "
                            f"({began.isoformat()}): not a fresh incarnation")
        ctx.facts[f"leg{leg.n}_container"] = {"name": c.name, "id": c.id,
                                               "image_id": c.attrs.get("Image"),
                                               "started_at": st.isoformat()}
        return f"leg {leg.name}: {want} ({c.id[:12]}) started fresh at {st.isoformat()}"

    def undo(ctx: RunContext) -> str | None:  # a swap is undone by a restore (hold kept)
        return restore_seat(ctx)

    def apply_measured(ctx: RunContext) -> str:
        """The leg's seat change; its seat downtime (s) kept as ``leg<n>_downtime_s``
        (``None``: not measured — the seat did not change, or no completion was verified)."""
        ctx.facts.pop(LAST_DOWNTIME, None)
        out = apply(ctx)
        d = ctx.facts.pop(LAST_DOWNTIME, None)
        ctx.facts[f"leg{leg.n}_downtime_s"] = d.get("seconds") if isinstance(d, dict) else None
        return out

    return Step(f"leg {leg.name}: seat", check, apply_measured, verify,
                undo if what == "swap" else None, manual="seat-console restore",
                acts_on=[n for n in (resident, probe_name) if n])


def _measure_step(nctx: NodeContext, leg: LegPlan, bid: str, cmp_dir: Path,
                  opts: CompareOptions, journal: Journal | None = None) -> Step:
    def check(ctx: RunContext) -> Check:
        if ctx.facts.get(BREACH_STOP_FACT):   # its seat step was skipped: nothing to measure
            return Check(False, breach_stop(None, ctx, leg.name) or "")
        return Check(True, f"leg {leg.name}: probe, fidelity, canaries → "
                           f"{cmp_dir / 'legs' / leg.dirname}")

    def apply(ctx: RunContext) -> str:
        t = time.monotonic()
        try:
            rec = measure_leg(nctx, leg, bid, cmp_dir, opts)
        except Exception as exc:  # noqa: BLE001 - kept as a failed leg, then the step fails
            lp = cmp_dir / "legs" / leg.dirname / "leg.json"
            try:
                doc = json.loads(lp.read_text("utf-8"))
            except (OSError, ValueError):
                doc = {"arm": leg.arm, "leg": leg.n, "bracket_id": bid}
            doc.update(status="failed", reason=f"{type(exc).__name__}: {exc}",
                       ended_at=utcnow().isoformat())
            lp.parent.mkdir(parents=True, exist_ok=True)
            _write_json(lp, doc)
            ctx.facts.setdefault("legs", []).append(f"legs/{leg.dirname}")
            raise StepError(f"leg {leg.name}: the measurement failed ({type(exc).__name__}: "
                            f"{exc}); the leg is kept as failed") from None
        ctx.facts.setdefault("legs", []).append(f"legs/{leg.dirname}")
        if journal is not None:   # a breach of the hold during the leg gets its row now
            watch_hold(nctx, journal, ctx.facts.get("hold_id"))
        cp = cmp_dir / "compare.json"
        try:  # keep compare.json current: a compare killed after this leg still lists it
            doc = json.loads(cp.read_text("utf-8"))
            doc["legs"] = list(ctx.facts["legs"])
            doc["containers"] = {k: v for k, v in ctx.facts.items() if k.endswith("_container")}
            doc["downtimes"] = leg_downtimes(ctx.facts)
            _write_json(cp, doc)
        except (OSError, ValueError):
            pass  # written again at the end by run_compare
        if journal is not None:
            _record_breaches_file(cmp_dir, journal, ctx)
        return (f"leg {leg.name}: {rec['status']}" + (f" ({rec['reason']})" if rec["reason"]
                                                      else "")
                + f" in {time.monotonic() - t:.1f} s")

    def verify(ctx: RunContext) -> str:
        p = cmp_dir / "legs" / leg.dirname / "leg.json"
        try:
            doc = json.loads(p.read_text("utf-8"))
        except (OSError, ValueError) as exc:
            raise StepError(f"{p}: not written ({exc})") from None
        if doc.get("arm") != leg.arm or doc.get("status") == "running":
            raise StepError(f"{p}: arm {doc.get('arm')}, status {doc.get('status')}")
        return f"{p} written (status {doc['status']})"

    return Step(f"leg {leg.name}: measure", check, apply, verify, None)


LAST_DOWNTIME = "seat_downtime_last"
"""The fact a leg's seat change leaves its downtime record in, for :func:`leg_downtimes`."""


def leg_downtimes(facts: dict[str, Any]) -> dict[str, float | None]:
    """``{"leg1": 31.4, …}``: each leg's seat downtime (s) from the compare's facts, as
    ``compare.json`` records it (``downtimes``) for the report; ``None``: not measured."""
    return {k.removesuffix("_downtime_s"): v for k, v in facts.items()
            if k.startswith("leg") and k.endswith("_downtime_s")}


def compare_record(rb: Runbook, opts: CompareOptions, status: str, *,
                   result: Result | None = None) -> dict[str, Any]:
    """The ``compare.json`` document for runbook ``rb`` in ``status``."""
    legs = plan_bracket(opts.order, opts.rounds)
    f = result.facts if result is not None else rb.ctx.facts
    return {"schema": COMPARE_SCHEMA, "bracket_id": f.get("bracket_id"), "order": opts.order,
            "rounds": opts.rounds, "run_id": rb.run_id, "status": status,
            "reason": result.error if result is not None else None,
            "legs": [x for x in (f.get("legs") or [])],
            "planned_legs": [f"legs/{leg.dirname}" for leg in legs],
            "containers": {k: v for k, v in f.items() if k.endswith("_container")},
            "downtimes": leg_downtimes(f),
            "hold_placed": f.get("hold_placed"), "hold_released": f.get("hold_released"),
            "restored": None if result is None else (result.ok or result.outcome == "undone"),
            "started_at": f.get("compare_started_at"),
            "ended_at": utcnow().isoformat() if result is not None else None}


def run_compare(rb: Runbook, cmp_dir: Path, opts: CompareOptions,
                nctx: NodeContext | None = None) -> Result:
    """Run the compare runbook, writing ``compare.json`` before (``running``) and after
    (``complete`` when every step is done and every leg complete; ``disrupted`` when a leg was
    disrupted, ``incomplete`` when another leg is not complete — each naming the legs — or
    ``failed`` with the runbook's error)."""
    cmp_dir.mkdir(parents=True, exist_ok=True)
    rb.ctx.facts["compare_started_at"] = utcnow().isoformat()
    fit = fit_summary(nctx) if nctx is not None else {"problem": "no node context"}
    _write_json(cmp_dir / "compare.json", {**compare_record(rb, opts, "running"), "fit": fit})
    res = rb.run()
    not_ok: list[str] = []
    disrupted = False
    for leg in res.facts.get("legs") or []:
        try:
            st = json.loads((cmp_dir / leg / "leg.json").read_text())["status"]
        except (OSError, ValueError, KeyError, TypeError):
            st = "unreadable"
        if st != "complete":
            not_ok.append(f"{leg.rsplit('/', 1)[-1]} {st}")
            disrupted |= st == "disrupted"
    if res.facts.get(BREACH_STOP_FACT):
        run = set(res.facts.get("legs") or [])
        skipped = [x.rsplit("/", 1)[-1] for x in
                   (f"legs/{leg.dirname}" for leg in plan_bracket(opts.order, opts.rounds))
                   if x not in run]
        not_ok.append(f"{', '.join(skipped) or 'no leg'} not run (the bracket stopped at a "
                      "breach of the hold)")
    legs_ok = not not_ok
    status = ("complete" if res.ok and legs_ok else
              ("disrupted" if disrupted else "incomplete") if res.ok else "failed")
    doc = {**compare_record(rb, opts, status, result=res), "fit": fit}
    if nctx is not None:  # read the seat back rather than trusting the runbook's outcome
        try:
            c = _seat_container(nctx)
            doc["restored"] = c is not None and c.name == swap_mod.resident_or_profile(nctx)
        except Exception as exc:  # noqa: BLE001 - unknown, said so
            doc["restored"] = None
            doc["restored_problem"] = f"{type(exc).__name__}: {exc}"
    if res.ok and not legs_ok:
        doc["reason"] = ("legs not complete: " + ", ".join(not_ok)
                         + " (see each leg.json)")
    _mark_breaches(rb, doc)
    _write_json(cmp_dir / "compare.json", doc)
    return res


def _mark_breaches(rb: Runbook, doc: dict[str, Any]) -> None:
    """Record every breach of the hold during the bracket in ``doc["breaches"]``; a bracket
    with one is not ``complete`` (status ``incomplete``, the reason names it)."""
    if rb.journal is None:
        return
    doc["breaches"] = bracket_breaches(rb.journal, rb.ctx.facts.get("hold_id"),
                                       rb.ctx.facts.get("compare_started_at"), utcnow())
    if doc["breaches"]:
        first = doc["breaches"][0]
        why = (f"{len(doc['breaches'])} breach(es) of the hold during the bracket, first "
               f"{first.get('changed_at') or first['journaled_at']}: {first['what']}")
        if doc.get("status") == "complete":
            doc["status"] = "incomplete"
        doc["reason"] = "; ".join(x for x in (doc.get("reason"), why) if x)


# -- the cost of a compare, up front (issue 30) ------------------------------------------------
FORECAST_HISTORY = 10
"""The newest this many measured durations of each kind are used (their median)."""


def _durations(journal: Journal) -> dict[str, list[float]]:
    """This node's measured durations (seconds) from the journal, oldest first, by kind:
    ``swap`` / ``restore`` / ``hold`` / ``release`` (a finished run of that runbook, ``start``
    to its ``end`` row, outcome ``done``; the compare's own swaps and restores are such runs
    too); ``restart`` (a compare's ``leg …: seat`` step that restarted a container, ``begin``
    to ``verify``); ``measure`` (a compare's ``leg …: measure`` step: probe, fidelity,
    canaries); ``probe`` (a ``probe`` start to its end row: the probe alone)."""
    out: dict[str, list[float]] = {k: [] for k in ("swap", "restore", "hold", "release",
                                                    "restart", "measure", "probe")}
    for rows in journal.runs().values():
        first = rows[0]
        if first.runbook in ("swap", "restore", "hold", "release"):
            start = next((r for r in rows if r.kind == "start"), None)
            end = next((r for r in rows if r.kind == "end"), None)
            if start and end and end.outcome == "done":
                out[first.runbook].append((end.at - start.at).total_seconds())
        elif first.runbook == "probe":
            s = next((r for r in rows if r.kind == "probe" and r.step == "start"), None)
            e = next((r for r in rows if r.kind == "probe" and r.step == "end"), None)
            if s and e:
                out["probe"].append((e.at - s.at).total_seconds())
        elif first.runbook == "compare":
            began: dict[str, Entry] = {}
            for r in rows:
                if r.kind == "begin":
                    began[r.step] = r
                elif r.kind == "verify" and r.step in began:
                    b = began.pop(r.step)
                    secs = (r.at - b.at).total_seconds()
                    if r.step.endswith(": measure"):
                        out["measure"].append(secs)
                    elif r.step.endswith(": seat") and ": restart " in b.outcome:
                        out["restart"].append(secs)
    return {k: [x for x in v if x >= 0][-FORECAST_HISTORY:] for k, v in out.items()}


def _median(xs: Sequence[float]) -> float | None:
    import statistics

    return statistics.median(xs) if xs else None


def leg_spread(data_root: Path | None = None) -> dict[str, Any] | None:
    """The pair-to-pair spread of ln(B/A) output throughput this node showed in its newest
    comparison with ≥ 2 complete pairs (the largest SD over its phases): ``{"bracket_id",
    "pairs", "sd_log_ratio"}``, or ``None`` when no comparison has measured one. Never
    raises (an unreadable comparison is passed over)."""
    import math
    import statistics

    from seat_console.evidence import report as rp
    from seat_console.evidence.runs import RunError, list_comparisons

    root = comparisons_dir(data_root).parent
    for c in sorted(list_comparisons(root), key=lambda c: str(c.get("bracket_id")),
                    reverse=True):
        try:
            inputs = rp.load_inputs([str(c["path"])])
        except (RunError, OSError, ValueError):
            continue
        arms: dict[str, list[Any]] = {}
        for r in inputs.runs:
            arms.setdefault(r.arm or "A", []).append(r)
        names = {p.name for r in inputs.runs for p in r.phases}
        best: float | None = None
        n_pairs = 0
        for name in sorted(names):
            per_arm = {a: [(r, next((p for p in r.phases if p.name == name), None))
                           for r in rs] for a, rs in arms.items()}
            pairs_, _ = rp.leg_pairs(per_arm)
            d = [math.log(pb.output_tok_s / pa.output_tok_s) for _, _, pa, _, pb in pairs_
                 if pa is not None and pb is not None and pa.complete and pb.complete
                 and pa.output_tok_s and pb.output_tok_s and pa.output_tok_s > 0
                 and pb.output_tok_s > 0]
            if len(d) >= 2:
                sd = statistics.stdev(d)
                if best is None or sd > best:
                    best, n_pairs = sd, len(d)
        if best is not None:
            return {"bracket_id": c["bracket_id"], "pairs": n_pairs, "sd_log_ratio": best}
    return None


def claim_rounds(order: str = "ABBA") -> int:
    """The fewest rounds of ``order`` whose bracket can reach a throughput/latency claim under
    the report's rule (:func:`seat_console.evidence.stats.pairs_needed` pairs, one pair per
    ``A`` leg of a round: the same arithmetic as :func:`forecast`'s ``rounds_needed``), ≥ 1.
    Raises :class:`~seat_console.evidence.bracket.BracketError` for a bad order."""
    import math

    from seat_console.evidence.stats import pairs_needed

    plan_bracket(order, 1)
    return max(1, math.ceil(pairs_needed() / max(1, order.count("A"))))


def forecast(journal: Journal, order: str = "ABBA", rounds: int = 1, *,
             hold_active: bool | None = None, data_root: Path | None = None) -> dict[str, Any]:
    """The cost of a compare of ``rounds`` × ``order`` on this node, before it runs.

    ``minutes``: the forecast from this node's measured durations (:func:`_durations`, the
    median of the newest :data:`FORECAST_HISTORY` of each kind): per leg its seat change
    (swap, restore or restart, :func:`~seat_console.evidence.bracket.transition`) plus its
    measurement, then the end restore; plus the hold and its release when the compare places
    one (``hold_active`` false). ``None`` when a leg's part was never measured here
    (``missing`` names it: "no measurement yet" — never a made-up figure). ``parts``: each
    kind's median seconds (``None`` unmeasured) and how many measurements it rests on.

    ``pairs`` / ``needed_pairs`` / ``can_claim``: whether the design can reach a claim under
    the report's A/A-calibrated rule (the exact sign-flip test over pairs of legs: 6 pairs);
    ``rounds_needed`` when it cannot; ``mde_ratio``: the minimum detectable effect of this
    design at the spread this node's newest comparison showed (:func:`leg_spread`,
    :func:`seat_console.evidence.stats.design_mde`), ``None`` when unknown (said in
    ``mde_text``). ``text``: one line for the plan. Raises
    :class:`~seat_console.evidence.bracket.BracketError` for a bad order or rounds."""
    import math

    from seat_console.evidence.stats import StatsError, design_mde, pairs_needed

    legs = plan_bracket(order, rounds)
    dur = _durations(journal)
    med = {k: _median(v) for k, v in dur.items()}
    total = 0.0
    missing: list[str] = []
    prev: str | None = None
    kinds = {"restart-resident": "restart", "restart-candidate": "restart", "swap": "swap",
             "restore": "restore"}
    for leg in legs:
        for k in (kinds[transition(prev, leg.arm)], "measure"):
            if med[k] is None:
                if k not in missing:
                    missing.append(k)
            else:
                total += med[k]   # type: ignore[operator]
        prev = leg.arm
    if prev == "B":
        if med["restore"] is None:
            if "restore" not in missing:
                missing.append("restore")
        else:
            total += med["restore"]   # type: ignore[operator]
    excluded = []
    if not hold_active:
        for k in ("hold", "release"):
            if med[k] is None:
                excluded.append(k)
            else:
                total += med[k]   # type: ignore[operator]
    per_round = max(1, order.count("A"))
    pairs = len(legs) // 2
    need = pairs_needed()
    can = pairs >= need
    spread = leg_spread(data_root)
    try:
        mde = (design_mde(pairs, spread["sd_log_ratio"]) if spread and can else None)
    except StatsError:
        mde, spread = None, None

    rounds_needed = None if can else math.ceil(need / per_round)
    minutes = None if missing else total / 60
    if minutes is None:
        when = ("no measurement yet of " + ", ".join(
            {"measure": "a compare leg's measurement", "restart": "a container restart"}.get(
                k, f"a {k}") for k in missing) + " on this node: no forecast")
        if med["probe"] is not None and "measure" in missing:
            p = med["probe"]   # a tiny model's probe takes seconds: "0.0 min" said nothing
            when += (f" (a probe alone took {p / 60:.1f} min)" if p >= 60
                     else f" (a probe alone took {p:.1f} s)")
    else:
        when = (f"≈ {minutes:.0f} min on this node (medians of its measured "
                + ", ".join(f"{k} {med[k]:.0f} s" for k in ("swap", "restore", "restart",
                                                           "measure") if med[k] is not None)
                + ")" + (f"; not counted: {', '.join(excluded)} (no measurement yet)"
                         if excluded else ""))
    if not can:
        reach = (f"cannot reach a throughput/latency claim: {pairs} pair(s) < {need}; needs ≥ "
                 f"{rounds_needed} rounds ({rounds_needed * per_round} pairs)")
        mde_text = "none (the design cannot reach p ≤ 0.05)"
    elif mde is not None and spread is not None:
        mde_text = (f"×{mde:.3f} at the spread of {spread['bracket_id']} (SD of ln(B/A) "
                    f"{spread['sd_log_ratio']:.3f} over {spread['pairs']} pairs)")
        reach = f"can reach a claim ({pairs} pairs ≥ {need}); minimum detectable effect {mde_text}"
    else:
        mde_text = ("unknown until a comparison of ≥ 2 complete pairs has measured this node's "
                    "leg-to-leg spread")
        reach = f"can reach a claim ({pairs} pairs ≥ {need}); minimum detectable effect {mde_text}"
    return {"rounds": rounds, "order": order, "legs": len(legs), "pairs": pairs,
            "needed_pairs": need, "can_claim": can, "rounds_needed": rounds_needed,
            "minutes": minutes, "missing": missing, "not_counted": excluded,
            "parts": {k: {"median_s": med[k], "measurements": len(dur[k])} for k in dur},
            "mde_ratio": mde, "mde_text": mde_text, "spread": spread,
            "text": f"{len(legs)} legs ({rounds} round(s) of {order}, {pairs} pairs): {when}; "
                    f"{reach}"}
