"""The compare's progress as one line for its log screen: ``leg 2 of 4 (B2) · seat (swap:
start probe) · step 0:42 · total 3:10``.

A compare's log screen fills with the engine's start-up lines for minutes at each leg (vLLM's
config dump); this line stays above them. It is fed from the runbook's own events (the
:class:`~seat_console.actions.runbook.Event` s its observer gets: the compare's ``start`` /
``begin`` / ``end``, and the ``begin`` of the runbooks it runs inside a step — its swap,
restores, hold and release), never from the log lines. Pure: :func:`advance` and
:func:`progress_line` take the event and the time; the controller keeps the state and the
log screen asks for the line once a second (so the elapsed times move between events).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

_LEG_STEP = re.compile(r"leg ([AB]\d{1,4}): (seat|measure)")
"""The compare's per-leg step names (actions/compare.py: ``leg B2: seat``, ``leg B2: measure``;
the leg's name is its arm and its 1-based position in the bracket)."""


@dataclass(frozen=True)
class CompareProgress:
    """Where a compare is: ``legs`` (the bracket's legs, from the plan; ``None``: unknown),
    ``leg`` (the current leg's name, ``"B2"``; ``None`` before the first), ``step`` (the
    compare's step: ``seat`` / ``measure`` within a leg, else the step's name, ``hold``,
    ``restore seat``, ``release hold``), ``detail`` (the step of a runbook run inside it,
    ``swap: start probe``), ``started_at`` / ``step_at`` (UTC: the compare's start, the step's
    begin), ``ended``."""

    legs: int | None = None
    leg: str | None = None
    step: str = ""
    detail: str = ""
    started_at: datetime | None = None
    step_at: datetime | None = None
    ended: bool = False


def advance(p: CompareProgress, e: Any) -> CompareProgress:
    """``p`` after event ``e`` (an :class:`~seat_console.actions.runbook.Event`: ``runbook``,
    ``kind``, ``step``, ``at``). Events of other kinds, or of another runbook's other kinds,
    leave it as it is; never raises for an event of any shape."""
    runbook, kind = getattr(e, "runbook", None), getattr(e, "kind", None)
    step, at = str(getattr(e, "step", "") or ""), getattr(e, "at", None)
    if not isinstance(at, datetime):
        at = None
    if runbook != "compare":
        if kind == "begin" and step:
            return replace(p, detail=f"{runbook}: {step}")
        return p
    if kind == "start":
        return replace(p, started_at=at, ended=False)
    if kind == "end":
        return replace(p, ended=True, detail="")
    if kind != "begin" or not step:
        return p
    m = _LEG_STEP.fullmatch(step)
    if m is not None:
        return replace(p, leg=m.group(1), step=m.group(2), detail="", step_at=at)
    return replace(p, step=step, detail="", step_at=at)


def elapsed(since: datetime | None, now: datetime) -> str:
    """``m:ss`` (``h:mm:ss`` from an hour) from ``since`` to ``now``; ``?`` when ``since`` is
    unknown. A ``since`` after ``now`` (another clock) reads ``0:00``."""
    if since is None:
        return "?"
    s = max(0, int((now - since).total_seconds()))
    h, rem = divmod(s, 3600)
    return f"{h}:{rem // 60:02d}:{rem % 60:02d}" if h else f"{rem // 60}:{rem % 60:02d}"


def progress_line(p: CompareProgress, now: datetime) -> str:
    """The one line (module docstring); ``now``: UTC."""
    if p.started_at is None:
        return "compare: starting…"
    if p.ended:
        return f"compare ended · total {elapsed(p.started_at, now)}"
    parts = []
    if p.leg is not None and p.step in ("seat", "measure"):
        n = p.leg[1:]
        parts.append(f"leg {n} of {p.legs} ({p.leg})" if p.legs else f"leg {n} ({p.leg})")
    if p.step:
        parts.append(p.step + (f" ({p.detail})" if p.detail else ""))
        parts.append(f"step {elapsed(p.step_at, now)}")
    parts.append(f"total {elapsed(p.started_at, now)}")
    return " · ".join(parts)


__all__ = ["CompareProgress", "advance", "elapsed", "progress_line"]
