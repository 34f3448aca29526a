"""Finding and finishing runbooks that a dead console left unfinished.

A run with a ``start`` row and no ``end`` row in the journal is unfinished (the console was
killed, the machine rebooted, the SSH session dropped with a runbook in flight).
:func:`describe` says what it did (each step with a ``begin`` row may have changed the node;
one with a ``verify`` row certainly did) and what remains; :func:`finish` undoes it (every begun
step's undo, in reverse — the undos read the node and put back only what is still changed, so a
lease that already fired is fine) or completes it (the steps not yet verified), as the engineer
chooses. The rows are appended under the run's own ``run_id`` and the run gets its ``end``.

Runbooks known here: ``hold`` (undo or complete), ``release`` (complete: it only puts the safety
net back), ``extend`` (undo: the new lease is cancelled if it was made; the old one is kept), ``swap``
(undo: the probe stopped and kept, the resident started and verified; :mod:`seat_console.
actions.swap`), ``restore`` (complete), ``compare`` (undo: the resident restored, a hold the
compare placed released; the measured legs are kept; :mod:`seat_console.actions.compare`),
``promote`` (undo: the candidate's name, the seat-state file and the profile put back) and
``promote-undo`` (undo: the promoted resident serving again; :mod:`seat_console.actions.
promote`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

from seat_console.actions import hold as hold_mod
from seat_console.actions.journal import Entry, Journal
from seat_console.actions.runbook import Observer, Result, Runbook, facts_from_rows
from seat_console.actions.runner_id import RUNNER, runner_alive
from seat_console.node.context import NodeContext

Action = Literal["undo", "complete"]


def unfinished(journal: Journal) -> list[list[Entry]]:
    """The unfinished runs, oldest first (each: that run's rows)."""
    return journal.unfinished()


def describe(rows: Sequence[Entry]) -> dict[str, Any]:
    """What an unfinished run did and what remains: ``{"run_id", "runbook", "started_at",
    "started_by", "done": [step…], "maybe": [step…] (begun, not verified: may have changed the
    node), "skipped": […], "last_row": "…", "can": ["undo", "complete"], "in_progress",
    "runner"}``. ``in_progress``: the process that runs it still runs on this host
    (:func:`~seat_console.actions.runner_id.runner_alive`): then ``can`` is empty."""
    first = rows[0]
    verified = [r.step for r in rows if r.kind == "verify"]
    begun = [r.step for r in rows if r.kind == "begin"]
    undone = {r.step for r in rows if r.kind == "undo"}
    can = {"hold": ["undo", "complete"], "release": ["complete"],
           "extend": ["undo"], "swap": ["undo"], "restore": ["complete"],
           "compare": ["undo"], "promote": ["undo"],
           "promote-undo": ["undo"]}.get(first.runbook, [])
    last = rows[-1]
    skipped = {r.step for r in rows if r.kind == "skip"}
    would_undo, seen = [], set()
    for name in reversed(begun):     # what `--undo` puts back, in that order
        if name not in undone and name not in seen:
            seen.add(name)
            would_undo.append(name)
    would_complete = [s for s in _steps_in_order(rows) if s not in verified and s not in skipped]
    facts = facts_from_rows(rows)
    runner = facts.get(RUNNER)
    alive = runner_alive(runner)
    if alive:      # its console still runs it: in progress, never ours to undo or complete
        can = []
    return {"run_id": first.run_id, "runbook": first.runbook, "in_progress": bool(alive),
            "runner": runner if isinstance(runner, dict) else None,
            "would_undo": would_undo, "would_complete": would_complete,
            "started_at": hold_mod.iso(first.at), "started_by": f"{first.user}@{first.host}",
            "done": [s for s in verified if s not in undone],
            "maybe": [s for s in begun if s not in verified and s not in undone],
            "skipped": [r.step for r in rows if r.kind == "skip"],
            "undone": sorted(undone),
            "last_row": f"#{last.seq} {last.kind} {last.step} {last.outcome}".strip(),
            "facts": facts, "can": can}


def _steps_in_order(rows: Sequence[Entry]) -> list[str]:
    out: list[str] = []
    for r in rows:
        if r.step and r.kind in ("begin", "skip", "verify", "fail") and r.step not in out:
            out.append(r.step)
    return out


def describe_text(rows: Sequence[Entry], action: str | None = None) -> list[str]:
    """:func:`describe` as lines for the terminal; ``action`` (``undo`` / ``complete``): also
    what that choice would do, step by step (``recover --undo --dry-run``)."""
    d = describe(rows)
    out = [f"unfinished {d['runbook']} run {d['run_id']} started {d['started_at']} by "
           f"{d['started_by']} (last row {d['last_row']})"]
    for s in d["done"]:
        out.append(f"  done:   {s}")
    for s in d["maybe"]:
        out.append(f"  begun, not verified (may have changed the node): {s}")
    h = d["facts"].get("hold") or {}
    if h.get("lease"):
        out.append(f"  lease: {h['lease']}.timer, expiry {h.get('expires_at') or 'n/a'}")
    if h.get("silence_id"):
        out.append(f"  silence: {h['silence_id']}")
    if action == "undo" and "undo" in d["can"]:
        out.append("  --undo would put back, in this order (each reads the node first and "
                   "does only what is still changed):")
        out += [f"    undo: {s}" for s in d["would_undo"]] or ["    nothing: no step began"]
    elif action == "complete" and "complete" in d["can"]:
        out.append("  --complete would run from the first step not verified (the steps "
                   "begun after the crash are re-checked first):")
        out += ([f"    run: {s}" for s in d["would_complete"]]
                or ["    the journaled steps are all done; the remaining ones of the runbook"])
    elif action is not None:
        out.append(f"  --{action} is not possible for a {d['runbook']} run")
    out.append("  choose: " + " or ".join(f"`seat-console recover --{c}`" for c in d["can"]))
    return out


def build_for(nctx: NodeContext, journal: Journal, rows: Sequence[Entry],
              observer: Observer | None = None) -> Runbook:
    """The runbook that a run's rows belong to, rebuilt with its inputs, facts and run_id.
    Raises :class:`ValueError` for a runbook this module does not know."""
    first = rows[0]
    facts = facts_from_rows(rows)
    inputs = first.inputs
    if first.runbook == "hold":
        return hold_mod.build_hold(nctx, journal, ttl_s=int(inputs.get("ttl_s", 600)),
                                   reason=str(inputs.get("reason", "")), observer=observer,
                                   run_id=first.run_id, facts=facts)
    if first.runbook == "release":
        h = facts["hold"]
        placeholder = hold_mod.HoldState(
            hold_id=h["hold_id"], run_id=first.run_id, state="active",
            lease_unit=f"{h['lease']}.timer", silence_id=h.get("silence_id"),
            stopped=tuple(h.get("stopped", [])),
            expires_at=hold_mod._from_iso(h.get("expires_at")) or first.at,
            placed_at=first.at, placed_by=f"{first.user}@{first.host}", reason="")
        for prev in hold_mod.holds(journal):
            if prev.hold_id == h["hold_id"]:
                placeholder = prev
        return hold_mod.build_release(nctx, journal, placeholder, observer=observer,
                                      run_id=first.run_id, facts=facts)
    if first.runbook in ("swap", "restore"):  # issue 8: seat swap and restore
        from seat_console.actions import swap as swap_mod

        return swap_mod.rebuild(nctx, journal, rows, observer)
    if first.runbook == "compare":  # issue 10: undo = resident back, the compare's hold released
        from seat_console.actions import compare as compare_mod

        return compare_mod.rebuild(nctx, journal, rows, observer)
    if first.runbook in ("promote", "promote-undo"):  # issue 30: promote and its undo
        from seat_console.actions import promote as promote_mod

        return promote_mod.rebuild(nctx, journal, rows, observer)
    raise ValueError(f"recover: runbook {first.runbook!r} cannot be rebuilt here")


def finish(nctx: NodeContext, journal: Journal, rows: Sequence[Entry], action: Action,
           observer: Observer | None = None) -> Result:
    """Undo or complete the unfinished run ``rows`` (see the module docstring)."""
    d = describe(rows)
    if d["in_progress"]:
        raise ValueError(f"recover: {d['runbook']} run {d['run_id']} is in progress (pid "
                         f"{d['runner'].get('pid')} on this host still runs it): wait for it to "
                         "end; recover finishes runs whose console died")
    if action not in d["can"]:
        raise ValueError(f"recover --{action} is not possible for a {d['runbook']} run "
                         f"(possible: {', '.join(d['can']) or 'none'})")
    if d["runbook"] == "extend":
        return _undo_extend(nctx, journal, rows, observer)
    rb = build_for(nctx, journal, rows, observer)
    return rb.finish_from_journal(rows, action)


def _undo_extend(nctx: NodeContext, journal: Journal, rows: Sequence[Entry],
                 observer: Observer | None) -> Result:
    from seat_console.actions import node_ops
    from seat_console.actions.runbook import Check, Step

    facts = facts_from_rows(rows)
    new = facts.get("new_lease")

    def check(ctx: Any) -> Check:
        return Check(bool(new), f"cancel the extend's new lease {new}.timer" if new
                     else "no new lease was made")

    step = Step("cancel new lease", check,
                lambda ctx: node_ops.cancel_lease(nctx.transport, new) and None,
                lambda ctx: None)
    rb = Runbook("extend", [step], journal=journal, observer=observer, run_id=rows[0].run_id,
                 facts=facts, inputs=rows[0].inputs, profile_sha256=nctx.loaded.sha256)
    rb._row("recover", outcome="undo")
    # a one-step runbook under the same run_id: its start row is a second start, harmless (the
    # run is finished by its end row)
    return rb.run()


__all__ = ["Action", "build_for", "describe", "describe_text", "finish", "unfinished"]
