"""State-aware gates: every action reads the seat's state right before it acts and refuses with
that state and the fix (issue 30, item 4).

The state is read, never remembered: **who holds the seat** from docker
(:func:`read_seat`: is the resident running, is the probe container running), **the hold**
from the journal and the node (:func:`seat_console.actions.hold.hold_in_effect`: the journal's
active hold, and its lease read on the node), and **a promote in effect** from the
journal (:func:`promote_in_effect`: the newest ``promote`` / ``promote-undo`` run that ended
``done``).

Each gate is a :data:`~seat_console.actions.runbook.Gate` (a function of the run context):
:class:`~seat_console.actions.runbook.Runbook` runs it first in the plan and again right after
the run's ``start`` row, before any step. It raises
:class:`~seat_console.actions.runbook.StepError` to refuse (journaled; nothing changed) or
returns a warning that the plan shows first and the run journals.

=============  ================================================================================
action         gate
=============  ================================================================================
``compare``    :func:`compare_gate`: refused unless the resident holds the seat (the candidate
               in the seat would be measured as arm A, and starting the resident next to it
               fails) — ``seat-console restore`` first. Chosen over "the plan restores first":
               a restore releases the hold and runs its own confirmation; the engineer decides.
``release``    :func:`release_gate`: refused while the candidate holds the seat and no promote
               made it the resident (``restore`` or ``promote`` first; ``--force --reason``
               overrides, journaled as a warning with the reason). Who holds the seat
               unreadable is a warning, not a refusal: the release puts back the fleet's
               safety net.
``restore``    :func:`downtime_gate`: when the seat is not already the resident's, the plan
               says first that it goes down without a hold if none is in effect.
``promote``    :func:`downtime_gate` (the promote's own branch calls it): the same warning.
=============  ================================================================================

``swap`` refuses without an active hold in its own first step (it never takes the seat down
unheld); a compare places its own hold when there is none. This module sits below
:mod:`~seat_console.actions.hold` and :mod:`~seat_console.actions.swap` (they attach these gates
to their runbooks), so it imports neither.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from seat_console.actions.journal import Entry, Journal
from seat_console.actions.runbook import Gate, RunContext, StepError
from seat_console.core.seat_file import resident_container
from seat_console.node.context import NodeContext
from seat_console.node.docker import container_running, find_container

Holder = str
"""Who holds the seat: ``"resident"`` (the resident runs, the probe does not), ``"candidate"``
(the probe runs, the resident does not), ``"both"``, ``"none"`` or ``"unknown"`` (docker could
not be read)."""


@dataclass(frozen=True)
class Seat:
    """The seat as docker says now: ``holder`` (:data:`Holder`), the container names
    ``resident`` / ``probe`` (``None``: the profile has no ``[swap]``), and ``problem`` (why it
    is ``unknown``)."""

    holder: Holder
    resident: str
    probe: str | None
    problem: str | None = None

    def words(self) -> str:
        """``the candidate seat-probe holds the seat (running; the resident seat-resident is
        stopped)`` — the state as a refusal names it."""
        p = self.probe or "the probe"
        return {
            "resident": f"the resident {self.resident} holds the seat ({p} is not running)",
            "candidate": f"the candidate {p} holds the seat (running; the resident "
                         f"{self.resident} is stopped)",
            "both": f"both the resident {self.resident} and the candidate {p} are running",
            "none": f"nothing holds the seat: neither {self.resident} nor {p} is running",
        }.get(self.holder, f"who holds the seat cannot be read ({self.problem})")


def read_seat(nctx: NodeContext, timeout_s: float = 60.0) -> Seat:
    """Who holds the seat, read from docker now: is the resident container running — the one
    the seat-state file names after a ``promote`` (:func:`seat_console.core.seat_file.
    resident_container`, the same file :func:`seat_console.actions.swap.resident_name` reads),
    else ``[resident] container`` —, is the probe container (``[swap] container``) running.
    Never raises: docker unreadable is ``holder="unknown"`` with the reason (``timeout_s``: the
    docker client's, seconds). :func:`seat_console.actions.swap.seat_state` is this reading as a
    tuple."""
    resident = resident_container(nctx.profile.resident.container) or ""
    probe = nctx.profile.swap.container if nctx.profile.swap is not None else None
    if not resident:
        return Seat("unknown", "the resident", probe,
                    "resident.container is not set in the profile")
    try:
        client = nctx.docker(timeout_s=timeout_s)
    except Exception as exc:  # noqa: BLE001 - unknown state, said so
        return Seat("unknown", resident, probe, f"{type(exc).__name__}: {exc}")
    try:
        res = _running(client, resident)
        prb = _running(client, probe) if probe is not None else False
    except Exception as exc:  # noqa: BLE001 - unknown state, said so
        return Seat("unknown", resident, probe, f"{type(exc).__name__}: {exc}")
    finally:
        client.close()
    holder = ("both" if res and prb else "resident" if res else "candidate" if prb else "none")
    return Seat(holder, resident, probe)


def _running(client: Any, name: str) -> bool:
    """Whether container ``name`` runs (``False`` when there is none)."""
    return container_running(find_container(client, name))


def promote_in_effect(journal: Journal) -> Entry | None:
    """The ``end`` row of the promote in effect: the newest run of runbook ``promote`` or
    ``promote-undo`` that ended ``done``, when it is a ``promote``; else ``None`` (never
    promoted, or undone since)."""
    last: Entry | None = None
    for rows in journal.runs().values():
        if rows[0].runbook not in ("promote", "promote-undo"):
            continue
        end = next((r for r in rows if r.kind == "end"), None)
        if end is not None and end.outcome == "done" and (last is None or end.seq > last.seq):
            last = end
    return last if last is not None and last.runbook == "promote" else None


HoldReader = Callable[[], "tuple[Any, str | None]"]
"""``() -> (hold, problem)``: the hold in effect, read from the journal and the node
(:func:`seat_console.actions.hold.hold_in_effect`): ``problem`` says what is wrong with it
(``None``: in effect as the journal says, or no hold)."""


def compare_gate(nctx: NodeContext) -> Gate:
    """``compare``'s gate: refused unless the resident holds the seat (module docstring)."""
    def gate(ctx: RunContext) -> str | None:
        seat = read_seat(nctx)
        ctx.facts["seat_holder"] = seat.holder
        if seat.holder == "resident":
            return None
        fix = {"candidate": "run `seat-console restore --keep-hold` first (the resident back, "
                            "the hold kept), then compare",
               "both": f"stop the one that should not serve (`docker stop {seat.probe}`), then "
                       "compare",
               "none": "run `seat-console restore` (or `docker start "
                       f"{seat.resident}`) first, then compare",
               }.get(seat.holder, "fix the docker connection (`docker ps` on the node), then "
                                  "compare")
        raise StepError(f"compare starts from the resident in the seat (it is arm A), but "
                        f"{seat.words()} — {fix}")
    return gate


def release_gate(nctx: NodeContext, journal: Journal, *, force: bool = False,
                 reason: str = "") -> Gate:
    """``release``'s gate: refused while the candidate holds the seat and no promote made it the
    resident; ``force`` with a non-empty ``reason`` releases anyway, journaled as a warning
    (fact ``forced``). Docker unreadable: a warning, not a refusal."""
    def gate(ctx: RunContext) -> str | None:
        seat = read_seat(nctx)
        ctx.facts["seat_holder"] = seat.holder
        if seat.holder == "unknown":
            return (f"{seat.words()}: released anyway (the release restores the fleet's safety "
                    "net) — check with `docker ps` that the resident serves")
        if seat.holder not in ("candidate", "both") or promote_in_effect(journal) is not None:
            return None
        if force:
            if not reason.strip():
                raise StepError("--force needs --reason TEXT (it is journaled)")
            ctx.facts["forced"] = {"gate": "release", "state": seat.holder, "reason": reason}
            return (f"FORCED (reason: {reason}): released while {seat.words()} and no promote "
                    "made it the resident — the fleet's timers and alerts now act on it")
        if seat.holder == "both":
            return (f"{seat.words()}: the candidate may be serving callers and no promote made "
                    "it the resident — `seat-console restore` stops it")
        raise StepError(
            f"{seat.words()} and no promote made it the resident: releasing the hold now would "
            "hand the fleet's timers and alerts a seat serving the candidate — run "
            "`seat-console restore` (the resident back, then the hold released) or "
            "`seat-console promote` (once the decision is PROMOTE-ABLE); to release anyway: "
            "`seat-console release --force --reason TEXT` (journaled)")
    return gate


def downtime_gate(nctx: NodeContext, hold: HoldReader, action: str, what: str) -> Gate:
    """The gate of an action that takes the seat down (``restore``, ``promote``): when the
    resident does not already hold the seat and no hold is in effect (``hold``, a
    :data:`HoldReader`: ``lambda: hold_mod.hold_in_effect(nctx, journal)``),
    the plan says so first — ``action`` (``"restore"``) ``what`` (``"stops the candidate and
    starts the resident"``). A warning, never a refusal (putting the resident back must not
    wait for a hold)."""
    def gate(ctx: RunContext) -> str | None:
        seat = read_seat(nctx)
        ctx.facts["seat_holder"] = seat.holder
        if seat.holder == "resident":
            return None   # nothing goes down: the resident already serves
        h, problem = hold()
        if h is not None and problem is None:
            return None
        why = ("no hold is in effect" if h is None
               else f"hold {h.hold_id} is in the journal but {problem}")
        return (f"the {action} takes the seat down WITHOUT a hold ({why}): it {what} while the "
                "fleet's timers and alerts are live, so they may page or remediate the seat "
                "meanwhile — to keep them off, place a hold first (`seat-console hold`)")
    return gate


__all__ = ["HoldReader", "Holder", "Seat", "compare_gate", "downtime_gate",
           "promote_in_effect", "read_seat", "release_gate"]
