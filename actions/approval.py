"""Four eyes: a runbook that waits for a second operator's approval (issue 30, item 8).

With the profile's ``[runbook] approvals = 2``, ``swap`` and ``promote`` (and ``compare``, once
for its whole bracket) get :func:`approval_gate`: right after the run's ``start`` row, before
any step, it journals an approval **request** (runbook ``approval``, its own run ID — the
approval ID, e.g. ``approval-20261205T034512Z-1a2b3c``), says the ID, and waits up to
``[runbook] approval_timeout_s`` (default 30 min) for ``seat-console approve ID`` run by
another operator. Approved: the run goes on (the approvers are in its facts, ``approval``).
Not approved in time, or interrupted: refused, nothing changed. The plan only says it will wait.

Who counts as an operator: the person behind the journal row (:mod:`seat_console.actions.who`):
``SUDO_USER`` when set (the person behind ``root``), else the login name. The operator who
started the run counts as the first approval; nobody counts twice, so ``approvals = 2`` needs
someone else. Every request, approval and outcome is a journal row (kinds ``request``,
``approve``, ``end`` with outcome ``approved`` / ``timed out`` / ``interrupted``), each with its
operator — the record of who approved what.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from seat_console.actions.journal import Entry, Journal
from seat_console.actions.runbook import Gate, RunContext, StepError, new_run_id
from seat_console.core.base import utcnow
from seat_console.core.fmt import fmt_duration

APPROVAL = "approval"
"""The journal ``runbook`` of approval rows."""
POLL_S = 1.0
"""How often (seconds) a waiting run reads the journal for approvals."""


class ApprovalError(Exception):
    """``seat-console approve`` refused: unknown ID, no longer pending, or the same operator
    (the message names the state and the fix)."""


def who_key(op: Mapping[str, Any] | None) -> str:
    """The person an operator dict stands for: ``SUDO_USER`` when set, else the login name
    (``"?"`` when neither is known)."""
    if not op:
        return "?"
    return str(op.get("sudo_user") or op.get("login") or "?")


@dataclass(frozen=True)
class Approval:
    """One approval request as the journal records it: ``id``; ``runbook`` / ``run_id`` (the run
    waiting); ``needed`` (operators, the requester included); ``requested_by`` (:func:`who_key`);
    ``requested_at`` / ``expires_at`` (UTC); ``approvers`` (who counts, requester first);
    ``state``: ``pending``, ``approved``, ``timed out``, ``interrupted``."""

    id: str
    runbook: str
    run_id: str
    needed: int
    requested_by: str
    requested_at: datetime
    expires_at: datetime
    approvers: tuple[str, ...]
    state: str

    def ready(self) -> bool:
        """Enough distinct operators approved."""
        return len(self.approvers) >= self.needed

    def to_json(self) -> dict[str, Any]:
        """JSON-ready dict (times ISO 8601 UTC)."""
        return {"id": self.id, "runbook": self.runbook, "run_id": self.run_id,
                "needed": self.needed, "requested_by": self.requested_by,
                "requested_at": self.requested_at.isoformat(),
                "expires_at": self.expires_at.isoformat(), "approvers": list(self.approvers),
                "state": self.state}


def _from_rows(rows: list[Entry]) -> Approval | None:
    req = next((r for r in rows if r.kind == "request"), None)
    if req is None:
        return None
    a = req.facts.get(APPROVAL) if isinstance(req.facts.get(APPROVAL), dict) else {}
    try:
        needed = int(a.get("needed", 2))
        expires = datetime.fromisoformat(str(a["expires_at"]))
    except (KeyError, TypeError, ValueError, OverflowError):
        return None   # not a request this module wrote: ignored
    if expires.tzinfo is None or not 1 <= needed <= 16:
        return None   # a naive time cannot be compared with the UTC clock: not ours either
    approvers = [who_key(req.operator)]
    for r in rows:
        if r.kind == "approve" and who_key(r.operator) not in approvers:
            approvers.append(who_key(r.operator))
    end = next((r for r in rows if r.kind == "end"), None)
    return Approval(id=req.run_id, runbook=str(a.get("runbook", "")),
                    run_id=str(a.get("run_id", "")), needed=needed,
                    requested_by=approvers[0], requested_at=req.at, expires_at=expires,
                    approvers=tuple(approvers), state=end.outcome if end else "pending")


def approvals(journal: Journal) -> list[Approval]:
    """Every approval request in the journal, oldest first."""
    out = []
    for rows in journal.runs().values():
        if rows[0].runbook == APPROVAL:
            a = _from_rows(rows)
            if a is not None:
                out.append(a)
    return out


def find(journal: Journal, approval_id: str) -> Approval | None:
    """The request ``approval_id`` (its whole ID, or its last 6 hex digits), or ``None``."""
    key = approval_id.strip()
    rows = journal.entries(run_id=key) if key.startswith(f"{APPROVAL}-") else []
    if rows:
        return _from_rows(rows)
    hits = [a for a in approvals(journal) if key and a.id.endswith(f"-{key}")]
    return hits[-1] if len(hits) == 1 else None


def pending(journal: Journal, now: datetime | None = None) -> list[Approval]:
    """Requests still waiting (``pending``, not past ``expires_at``)."""
    now = now or utcnow()
    return [a for a in approvals(journal) if a.state == "pending" and a.expires_at > now]


def request(journal: Journal, runbook: str, run_id: str, needed: int,
            timeout_s: float) -> Approval:
    """Journal a request for ``needed`` operators to approve run ``run_id`` of ``runbook``,
    open for ``timeout_s`` seconds; the journal's operator is the requester (the first)."""
    aid = new_run_id(APPROVAL)
    now = utcnow()
    expires = now + timedelta(seconds=timeout_s)
    journal.append(run_id=aid, runbook=APPROVAL, kind="request",
                   outcome=f"{runbook} {run_id} waits for {needed - 1} more operator(s)",
                   inputs={"runbook": runbook, "run_id": run_id},
                   facts={APPROVAL: {"runbook": runbook, "run_id": run_id, "needed": needed,
                                     "expires_at": expires.isoformat()}})
    a = find(journal, aid)
    assert a is not None
    return a


def approve(journal: Journal, approval_id: str, now: datetime | None = None, *,
            dry_run: bool = False) -> Approval:
    """Approve request ``approval_id`` as the journal's operator; returns it as it is now.
    Raises :class:`ApprovalError` (unknown ID, no longer pending or expired, or this operator
    already counts for it — the requester or an earlier approver). ``dry_run``: every check,
    nothing written (the request as it would be, this operator among its approvers)."""
    now = now or utcnow()
    a = find(journal, approval_id)
    if a is None:
        waiting = ", ".join(x.id for x in pending(journal, now)) or "none"
        raise ApprovalError(f"no approval request {approval_id!r} in the journal (pending: "
                            f"{waiting}) — copy the ID the waiting run printed")
    if a.state != "pending":
        raise ApprovalError(f"approval {a.id} ({a.runbook} {a.run_id}) is {a.state}: nothing "
                            "to approve")
    if a.expires_at <= now:
        raise ApprovalError(f"approval {a.id} ({a.runbook} {a.run_id}) expired at "
                            f"{a.expires_at.isoformat()}: the run was refused — start it again")
    me = who_key(journal.operator)
    if me in a.approvers:
        role = "requested it" if me == a.requested_by else "approved it already"
        raise ApprovalError(f"{me} {role}: approval {a.id} needs another operator (one "
                            "operator cannot approve twice)")
    if dry_run:
        return Approval(**{**a.__dict__, "approvers": (*a.approvers, me)})
    journal.append(run_id=a.id, runbook=APPROVAL, kind="approve",
                   outcome=f"{me} approves {a.runbook} {a.run_id}",
                   facts={APPROVAL: {"runbook": a.runbook, "run_id": a.run_id}})
    got = find(journal, a.id)
    assert got is not None
    return got


def approval_gate(journal: Journal, runbook: str, needed: int, timeout_s: float, *,
                  poll_s: float = POLL_S, stop: threading.Event | None = None) -> Gate | None:
    """The gate that waits for approvals (module docstring), or ``None`` when ``needed`` is 1.
    ``poll_s``: how often the journal is read (seconds); ``stop``: set it to give up at once
    (the run is refused). Planning only says it will wait."""
    if needed <= 1:
        return None

    def gate(ctx: RunContext) -> str | None:
        wait = fmt_duration(int(timeout_s), coarse=True)
        if ctx.planning:
            return (f"needs {needed - 1} more operator's approval: it waits up to {wait} for "
                    "`seat-console approve ID` (the ID is printed when it starts)")
        a = request(journal, runbook, ctx.run_id, needed, timeout_s)
        ctx.facts[APPROVAL] = {"id": a.id, "approvers": list(a.approvers)}
        ctx.warn(f"waiting up to {wait} for another operator: `seat-console approve {a.id}` "
                 f"(requested by {a.requested_by})")
        try:
            while True:
                a = find(journal, a.id) or a
                if a.ready():
                    ctx.facts[APPROVAL] = {"id": a.id, "approvers": list(a.approvers)}
                    journal.append(run_id=a.id, runbook=APPROVAL, kind="end",
                                   outcome="approved")
                    return None
                if utcnow() >= a.expires_at or (stop is not None and stop.is_set()):
                    why = "timed out" if utcnow() >= a.expires_at else "interrupted"
                    journal.append(run_id=a.id, runbook=APPROVAL, kind="end", outcome=why)
                    raise StepError(f"not approved by another operator within {wait} "
                                    f"(approval {a.id}, {why}): nothing changed — start it "
                                    "again when a second operator can run `seat-console "
                                    "approve ID`")
                if stop is not None:
                    stop.wait(poll_s)
                else:
                    time.sleep(poll_s)
        except KeyboardInterrupt:
            journal.append(run_id=a.id, runbook=APPROVAL, kind="end", outcome="interrupted")
            raise
    return gate


__all__ = ["APPROVAL", "Approval", "ApprovalError", "approval_gate", "approvals", "approve",
           "find", "pending", "request", "who_key"]
