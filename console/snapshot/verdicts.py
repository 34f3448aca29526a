"""The status line's verdicts, computed once from the newest readings: the seat's state in six
facts readable in one second (engine, seat, hold, silence, timers, fit).

Each fact is a :class:`Fact` — a label, the words and a level (``ok`` / ``warn`` / ``bad`` /
``unknown``). The words alone carry the state (UP/DOWN, none/active, N/M, fits/OVER; unknown is
always ``n/a``, never a guess); the level only picks a colour where a front has colours. Pure
and duck-typed over the sources' frozen readings (this module imports none of them), with no
Textual or Rich: the TUI's status line (``seat_console.widgets.status``), and any other front,
draw the same facts.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from seat_console.core.fmt import clock_z, fmt_duration, gib

SECONDS_SHOWN_BELOW_S = 3600
"""A hold shorter than this (seconds: an hour) ends "until 12:41:30Z", a longer one "until
12:41Z" (the rule of :data:`seat_console.actions.hold.SECONDS_SHOWN_BELOW_S`)."""


@dataclass(frozen=True)
class Fact:
    """One fact of the status line: ``label`` (e.g. ``"engine"``), ``words`` (e.g. ``"UP"``),
    ``level`` (``ok`` / ``warn`` / ``bad`` / ``unknown``)."""

    label: str
    words: str
    level: str


def _is_reading(r: Any) -> bool:
    """A good reading (not ``None``, not an Unavailable — which has ``kind`` and ``reason``)."""
    return r is not None and not (hasattr(r, "kind") and hasattr(r, "reason"))


def engine_fact(engine: Any) -> Fact:
    """``engine UP`` (``/health`` 200), ``PAUSED`` / ``ASLEEP`` (``/health`` 200 but the engine
    says it admits nothing new / sleeps: ``EngineReading.hold_state``), ``DOWN`` (not healthy
    or not answering), ``n/a``."""
    if engine is None:
        return Fact("engine", "n/a", "unknown")
    if not _is_reading(engine):
        return Fact("engine", "DOWN", "bad")
    state = getattr(engine, "hold_state", None)
    if state in ("PAUSED", "ASLEEP"):
        return Fact("engine", state, "warn")
    return Fact("engine", "UP", "ok") if engine.healthy else Fact("engine", "DOWN", "bad")


def seat_fact(containers: Any) -> Fact:
    """Which container holds the seat: the running one, resident before probe; ``none
    running`` when neither runs; ``n/a`` when docker is unknown."""
    if not _is_reading(containers):
        return Fact("seat", "n/a", "unknown")
    running = [c for c in containers.containers if c.running]
    if not running:
        return Fact("seat", "none running", "bad")
    running.sort(key=lambda c: c.role != "resident")
    c = running[0]
    words = c.name if c.role == "resident" else f"{c.name} ({c.role})"
    return Fact("seat", words, "ok" if c.role == "resident" else "warn")


def hold_fact(hold: Any, known: bool, timers: Any = None) -> Fact:
    """``hold none`` / ``hold active until 12:41Z`` (UTC; ``12:41:30Z`` for a hold shorter than
    an hour, from the hold's ``ttl_s``); ``hold by another console until 13:41:30Z`` for a
    lease armed on the node by another console (``foreign``); a hold the journal has in another
    state says it (``hold lapsed``, ``hold unfinished``: run ``seat-console recover``); ``n/a``
    while the journal is unknown (``known`` False) or its reader failed.

    ``hold``: the journal's hold in effect — an object with ``state`` and ``expires_at`` (the
    action-log source's ``HoldInfo``) or with ``active`` and ``until`` — or ``None``."""
    if not known or hold == "error":
        return Fact("hold", "n/a", "unknown")
    if hold is None:
        return Fact("hold", "none", "ok")
    state = getattr(hold, "state", None)
    active = getattr(hold, "active", None)
    if active is None:
        active = state == "active"
    until = getattr(hold, "until", None) or getattr(hold, "expires_at", None)
    if active:
        ttl = getattr(hold, "ttl_s", None)   # under an hour: to the second (12:41:30Z)
        head = "by another console" if getattr(hold, "foreign", False) else "active"
        shown = clock_z(until, seconds=ttl is not None and ttl < SECONDS_SHOWN_BELOW_S) if until else None
        words = head + (f" until {shown}" if shown else "")
        note = protection_note(timers)
        if note:
            return Fact("hold", f"{words}, {note}", "bad")
        return Fact("hold", words, "warn")
    if state in (None, "released"):
        return Fact("hold", "none", "ok")
    return Fact("hold", str(state), "bad")


def protection_note(timers: Any) -> str | None:
    """``protects nothing: timers 3/3 active`` when a hold is in effect but every timer of the
    profile is armed (a hold by another console whose timers were started again, or one that
    stopped nothing): the safety net it stands for is running. ``None`` otherwise (some timer
    stopped, or the timers unknown)."""
    if not _is_reading(timers) or not timers.timers:
        return None
    m = len(timers.timers)
    n = sum(1 for t in timers.timers if t.active)
    return f"protects nothing: timers {n}/{m} active" if n == m else None


def silence_fact(silences: Any, now: datetime) -> Fact:
    """Silence on the seat: ``none`` or ``active, ends in 2 h 10 min`` (the latest ending of
    the active ones; ``N active`` when more than one); ``n/a`` when Alertmanager is unknown."""
    if not _is_reading(silences):
        return Fact("silence", "n/a", "unknown")
    active = list(silences.active)
    if not active:
        return Fact("silence", "none", "ok")
    ends = max((s.ends_in_s(now) or 0.0) for s in active)
    head = "active" if len(active) == 1 else f"{len(active)} active"
    return Fact("silence", f"{head}, ends in {fmt_duration(None if ends is None else max(0.0, ends), coarse=True)}", "warn")


def timers_fact(timers: Any) -> Fact:
    """``timers N/M active``: armed timer units of those in the profile; all armed is ok, some
    stopped is a warning (a hold stops them), ``n/a`` when the node is unknown."""
    if not _is_reading(timers):
        return Fact("timers", "n/a", "unknown")
    m = len(timers.timers)
    n = sum(1 for t in timers.timers if t.active)
    return Fact("timers", f"{n}/{m} active", "ok" if n == m else "warn")


NO_CANDIDATE = "no candidate in the profile"
"""The reason :func:`seat_console.fit.inputs.compute_budgets` gives for a profile without a
candidate: that side is absent, not unknown."""


def _side_fact(budget: Any, unavailable: str | None) -> tuple[int, str, str]:
    """One side's ``(rank, words, severity)``; higher rank is worse: OVER 3, NO VERDICT 2,
    n/a 1, fits 0."""
    if budget is None:
        return 1, "n/a", "unknown"
    if getattr(budget, "no_verdict", None):
        return 2, "NO VERDICT", "bad"
    v = budget.verdict
    if v.fits:
        return 0, "fits", "ok"
    return 3, over_words(v), "bad"


def over_words(v: Any) -> str:
    """A verdict that does not fit, in the words every headline uses (the status line, the
    Fit panel's row): ``OVER: 31.94 GiB per card must leave`` — the figure ``fit`` prints,
    :attr:`~seat_console.fit.budget.Verdict.must_leave_bytes` (weights + PLE + reserve over
    usable, plus the KV cache one max_model_len request needs). Two trials read the headline's
    "OVER by 24.74" (before any KV cache) beside ``fit``'s "31.94 must leave" as two answers.
    ``OVER: vLLM refuses to start`` when it would not start at all (its heads do not divide
    by the TP size), ``OVER`` alone when no figure is known."""
    if getattr(v, "refused", None):
        return "OVER: vLLM refuses to start"
    must = v.must_leave_bytes or v.over_bytes or v.kv_short_bytes
    return f"OVER: {gib(must)} GiB per card must leave" if must else "OVER"


def fit_fact(comparison: Any) -> Fact:
    """The worst of the two sides' fits with the profile's settings (the Fit panel's verdicts,
    never a better word than either): ``fits`` when every side fits; else the worst side's
    word — ``OVER: 31.94 GiB per card must leave`` (:func:`over_words`), ``NO VERDICT`` (the footprint cannot be trusted,
    :attr:`seat_console.fit.budget.FitBudget.no_verdict`), ``n/a`` (that side could not be
    budgeted) — with ``(resident)`` after it when the resident is the worse side, ``(candidate)``
    after NO VERDICT / n/a of the candidate. A profile without a candidate is judged on the
    resident alone. ``n/a`` when no budget could be made at all."""
    if comparison is None:
        return Fact("fit", "n/a", "unknown")
    sides = []
    for role in ("candidate", "resident"):
        budget = getattr(comparison, role, None)
        why = getattr(comparison, f"{role}_unavailable", None)
        if budget is None and (why == NO_CANDIDATE or why is None and role == "candidate"):
            continue
        sides.append((role, *_side_fact(budget, why)))
    if not sides:
        return Fact("fit", "n/a", "unknown")
    role, rank, words, severity = max(sides, key=lambda x: x[1])   # ties: the candidate
    if rank == 0:
        return Fact("fit", "fits", "ok")
    if role == "resident" or rank < 3:
        words = f"{words} ({role})"
    return Fact("fit", words, severity)


def build_status(*, engine: Any, containers: Any, timers: Any, silences: Any, fit: Any,
                 hold: Any, hold_known: bool, now: datetime) -> list[Fact]:
    """The status line's facts, in reading order: engine, seat, hold, silence, timers, fit.

    Arguments are the newest readings (a frozen model, an Unavailable, or ``None`` before the
    first), ``fit`` a :class:`seat_console.fit.budget.Comparison` with the profile's settings,
    ``hold`` the hold feature's view (``active``, ``until``) or ``None``, ``now`` UTC.
    """
    return [engine_fact(engine), seat_fact(containers), hold_fact(hold, hold_known, timers),
            silence_fact(silences, now), timers_fact(timers), fit_fact(fit)]


__all__ = ["Fact", "build_status", "engine_fact", "fit_fact", "hold_fact", "over_words", "protection_note", "seat_fact",
           "silence_fact", "timers_fact"]
