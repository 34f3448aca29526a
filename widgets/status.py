"""The one-glance status line under the header: the seat's state readable in one second.

``engine UP · seat seat-resident · hold none · silence active, ends in 2 h 10 min ·
timers 2/2 active · fit: OVER by 24.74 GiB per card``

Each fact is a :class:`Fact` — a label, the words and a level (``ok`` / ``warn`` / ``bad`` /
``unknown``). The level only picks a colour: the words alone carry the state, so the line reads
the same under ``NO_COLOR`` (UP/DOWN, none/active, N/M, fits/OVER; unknown is always ``n/a``,
never a guess). :func:`build_status` is pure (duck-typed over the sources' frozen readings, so
this module imports none of them); :class:`StatusLine` draws it and only redraws when the text
changes.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from rich.text import Text
from textual.widgets import Static

from seat_console.core.fmt import gib

LEVEL_STYLES = {"ok": "bold green", "warn": "bold yellow", "bad": "bold red",
                "unknown": "dim"}
"""Colour of a fact's words by level (the words say the same without colour)."""


@dataclass(frozen=True)
class Fact:
    """One fact of the status line: ``label`` (e.g. ``"engine"``), ``words`` (e.g. ``"UP"``),
    ``level`` (``ok`` / ``warn`` / ``bad`` / ``unknown``)."""

    label: str
    words: str
    level: str


def _ends_in(seconds: float | None) -> str:
    """``7800`` → ``"2 h 10 min"``; ``95`` → ``"1 min"``; ``40`` → ``"40 s"``; ``None`` → n/a."""
    if seconds is None:
        return "n/a"
    s = int(max(0.0, seconds))
    if s < 60:
        return f"{s} s"
    if s < 3600:
        return f"{s // 60} min"
    if s < 86400:
        return f"{s // 3600} h {(s % 3600) // 60:02d} min"
    return f"{s // 86400} d {(s % 86400) // 3600:02d} h"


def _is_reading(r: Any) -> bool:
    """A good reading (not ``None``, not an Unavailable — which has ``kind`` and ``reason``)."""
    return r is not None and not (hasattr(r, "kind") and hasattr(r, "reason"))


def engine_fact(engine: Any) -> Fact:
    """``engine UP`` (``/health`` 200), ``DOWN`` (not healthy or not answering), ``n/a``."""
    if engine is None:
        return Fact("engine", "n/a", "unknown")
    if not _is_reading(engine):
        return Fact("engine", "DOWN", "bad")
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


def hold_fact(hold: Any, known: bool) -> Fact:
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
        from seat_console.actions.hold import zulu

        ttl = getattr(hold, "ttl_s", None)   # under an hour: to the second (12:41:30Z)
        head = "by another console" if getattr(hold, "foreign", False) else "active"
        return Fact("hold", head + (f" until {zulu(until, ttl)}" if until else ""), "warn")
    if state in (None, "released"):
        return Fact("hold", "none", "ok")
    return Fact("hold", str(state), "bad")


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
    return Fact("silence", f"{head}, ends in {_ends_in(ends)}", "warn")


def timers_fact(timers: Any) -> Fact:
    """``timers N/M active``: armed timer units of those in the profile; all armed is ok, some
    stopped is a warning (a hold stops them), ``n/a`` when the node is unknown."""
    if not _is_reading(timers):
        return Fact("timers", "n/a", "unknown")
    m = len(timers.timers)
    n = sum(1 for t in timers.timers if t.active)
    return Fact("timers", f"{n}/{m} active", "ok" if n == m else "warn")


def fit_fact(comparison: Any) -> Fact:
    """The candidate's fit (the resident's when there is no candidate) with the profile's
    settings: ``fits`` or ``OVER by 24.74 GiB per card`` (weights + PLE + reserve − usable on
    the worst card, :attr:`seat_console.fit.budget.Verdict.over_bytes`; when only the KV cache
    is short, ``OVER: KV short by N GiB per card``); ``n/a`` when no budget could be made."""
    if comparison is None:
        return Fact("fit", "n/a", "unknown")
    budget = getattr(comparison, "candidate", None) or getattr(comparison, "resident", None)
    if budget is None:
        return Fact("fit", "n/a", "unknown")
    v = budget.verdict
    if v.fits:
        return Fact("fit", "fits", "ok")
    if v.over_bytes > 0:
        return Fact("fit", f"OVER by {gib(v.over_bytes)} GiB per card", "bad")
    return Fact("fit", f"OVER: KV short by {gib(v.kv_short_bytes)} GiB per card", "bad")


def build_status(*, engine: Any, containers: Any, timers: Any, silences: Any, fit: Any,
                 hold: Any, hold_known: bool, now: datetime) -> list[Fact]:
    """The status line's facts, in reading order: engine, seat, hold, silence, timers, fit.

    Arguments are the newest readings (a frozen model, an Unavailable, or ``None`` before the
    first), ``fit`` a :class:`seat_console.fit.budget.Comparison` with the profile's settings,
    ``hold`` the hold feature's view (``active``, ``until``) or ``None``, ``now`` UTC.
    """
    return [engine_fact(engine), seat_fact(containers), hold_fact(hold, hold_known),
            silence_fact(silences, now), timers_fact(timers), fit_fact(fit)]


def render_status(facts: list[Fact]) -> Text:
    """``label words · label words …``: labels plain, words bold in their level's colour."""
    t = Text(overflow="fold")
    for i, f in enumerate(facts):
        if i:
            t.append(" · ", style="dim")
        t.append(f"{f.label} ")
        t.append(f.words, style=LEVEL_STYLES.get(f.level, ""))
    return t


class StatusLine(Static):
    """The status line widget (see the module docstring). ``facts``: the last shown."""

    DEFAULT_CSS = """
    StatusLine { height: auto; padding: 0 1; background: $boost; }
    """

    def __init__(self, **kwargs: Any) -> None:
        super().__init__("", **kwargs)
        self.facts: list[Fact] = []
        self.draws = 0

    def show_facts(self, facts: list[Fact]) -> None:
        """Show ``facts``; nothing is redrawn when they did not change."""
        if facts == self.facts:
            return
        self.facts = facts
        self.draws += 1
        self.update(render_status(facts))


__all__ = ["Fact", "StatusLine", "build_status", "engine_fact", "fit_fact", "hold_fact",
           "render_status", "seat_fact", "silence_fact", "timers_fact"]
