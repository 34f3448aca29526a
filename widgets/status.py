"""The one-glance status line under the header: the seat's state readable in one second.

``engine UP · seat seat-resident · hold none · silence active, ends in 2 h 10 min ·
timers 2/2 active · fit: OVER: 31.94 GiB per card must leave``

Each fact is a :class:`Fact` — a label, the words and a level (``ok`` / ``warn`` / ``bad`` /
``unknown``). The level only picks a colour: the words alone carry the state, so the line reads
the same under ``NO_COLOR`` (UP/DOWN, none/active, N/M, fits/OVER; unknown is always ``n/a``,
never a guess). The facts are computed once, below the fronts, by
:mod:`seat_console.snapshot.verdicts` (re-exported here); :class:`StatusLine` only draws them and only
redraws when the text changes. Pure view: no I/O, no actions.
"""

from __future__ import annotations

from typing import Any

from rich.text import Text
from textual.widgets import Static

from seat_console.snapshot.verdicts import (  # the verdicts, computed below the fronts
    Fact,
    build_status,
    engine_fact,
    fit_fact,
    hold_fact,
    seat_fact,
    silence_fact,
    timers_fact,
)

LEVEL_STYLES = {"ok": "bold green", "warn": "bold yellow", "bad": "bold red",
                "unknown": "dim"}
"""Colour of a fact's words by level (the words say the same without colour)."""


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
