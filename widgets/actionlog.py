"""The action-log panel (source ``actions``): the hold in effect with its countdown, a runbook's
progress in place, unfinished runs, interference, and the journal's newest rows.

Pure view of an :class:`~seat_console.actions.actionlog.ActionLogReading`; the progress lines
of a runbook running in this console are set by the controller (:meth:`ActionLogPanel.
set_progress`, UI thread) and shown above the journal rows until the next run.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import ClassVar

from pydantic import BaseModel
from rich.console import Group
from rich.text import Text
from textual.app import ComposeResult
from textual.widgets import Static

from seat_console.core.base import utcnow
from seat_console.widgets.panel import SourcePanel

_KIND_STYLE = {"fail": "bold red", "undo-fail": "bold red", "cut-off": "bold red",
               "interference": "bold magenta", "warn": "yellow", "verify": "green",
               "undo": "cyan", "end": "bold", "start": "bold", "skip": "dim"}


def _until(h: object, now: datetime) -> str:
    """``until 12:41:30Z, in 4 min`` (:func:`seat_console.actions.hold.expiry_text`: seconds
    for a hold under an hour, a countdown in coarse steps — no per-second redraw)."""
    from seat_console.actions.hold import expiry_text

    return expiry_text(getattr(h, "expires_at", None), getattr(h, "ttl_s", None), now)


def row_words(runbook: str, step: str, outcome: str) -> str:
    """One journal row's words after its time and kind: ``runbook step: outcome``, each part
    only where it has text (a runbook's ``end`` row has no step: ``hold: done``, never
    ``hold : done``)."""
    head = " ".join(p for p in (runbook, step) if p)
    return f"{head}: {outcome}" if outcome and head else head or outcome


class ActionLogPanel(SourcePanel):
    """The hold and the journal (see the module docstring)."""

    source_name: ClassVar[str] = "actions"
    title: ClassVar[str] = "Actions (hold, journal)"
    compact_title: ClassVar[str | None] = "Actions"

    def compose_body(self) -> ComposeResult:
        yield Static("", id="actions-progress")
        yield Static("", id="actions-body")

    def set_progress(self, title: str, lines: Sequence[str]) -> None:
        """Show a running (or just finished) runbook's steps in place: one line per step, its
        latest state. UI thread only."""
        t = Text()
        t.append(title, style="bold")
        for line in lines:
            t.append("\n  " + line, style=("bold red" if "FAILED" in line or "✗" in line
                                            else "green" if "✓" in line else ""))
        self.query_one("#actions-progress", Static).update(t)

    def build(self, reading: BaseModel, now: datetime) -> Group:
        """Hold line, unfinished runs, interference, then the newest journal rows."""
        from seat_console.actions.actionlog import ActionLogReading

        if not isinstance(reading, ActionLogReading):
            raise TypeError(f"actions panel got {type(reading).__name__}")
        head = Text()
        h = reading.hold
        if h is None:
            head.append("no hold in effect", style="bold")
        elif getattr(h, "foreign", False):
            head.append("HOLD BY ANOTHER CONSOLE", style="bold yellow")
            head.append(f"  {_until(h, now)}")
            head.append(f"\n  lease {h.lease_unit} armed on the node, not in this console's "
                        "journal (another state dir) — release it from that console",
                        style="dim")
        else:
            style = {"active": "bold green", "lapsed": "bold yellow"}.get(h.state, "bold red")
            head.append(f"HOLD {h.state.upper()}", style=style)
            head.append(f"  {_until(h, now)}  by {h.placed_by}")
            head.append(f"\n  lease {h.lease_unit} · silence {h.silence_id or 'none'} · "
                        f"stopped {', '.join(h.stopped) or 'none'}", style="dim")
            if h.reason:
                head.append(f"\n  reason: {h.reason}", style="dim")
            if h.state == "lapsed":
                head.append("\n  the lease elapsed (timers restarted on the node); press U to "
                            "check and close the hold", style="yellow")
        parts: list[Text] = [head]
        for u in reading.unfinished:
            parts.append(Text(f"⚠ {u}", style="bold red"))
        for u in reading.in_progress:
            parts.append(Text(f"▸ {u}", style="cyan"))
        for i in reading.interference:
            parts.append(Text(f"⚠ INTERFERENCE: {i}", style="bold magenta"))
        rows = Text()
        for r in reading.recent:
            if rows:
                rows.append("\n")
            rows.append(f"{r.at:%H:%M:%S}Z ", style="dim")
            rows.append(f"{r.kind:<9}", style=_KIND_STYLE.get(r.kind, ""))
            rows.append(" " + row_words(r.runbook, r.step, r.outcome))
        parts.append(rows if rows else Text("journal empty", style="dim italic"))
        parts.append(Text(f"journal {reading.path}", style="dim"))
        return Group(*parts)

    def render_reading(self, reading: BaseModel) -> None:
        """Fill the body from one reading."""
        self.query_one("#actions-body", Static).update(self.build(reading, self.now or utcnow()))

    def render_compact(self, reading: BaseModel) -> Text | None:
        """One line: the hold and its time left, or "no hold"."""
        from seat_console.actions.actionlog import ActionLogReading

        if not isinstance(reading, ActionLogReading):
            return None
        h = reading.hold
        now = self.now or utcnow()
        if h is None:
            t = Text("no hold in effect")
        elif getattr(h, "foreign", False):
            t = Text(f"HOLD BY ANOTHER CONSOLE {_until(h, now)}")
        else:
            t = Text(f"HOLD {h.state.upper()} {_until(h, now)}")
        if reading.unfinished or reading.interference:
            t.append(f"  ⚠ {len(reading.unfinished) + len(reading.interference)} to check",
                     style="bold red")
        return t


__all__ = ["ActionLogPanel", "row_words"]
