"""The log screen of a running node action (build, swap, restore): its runbook events and the
engine's or the build's log lines, wrapped at the screen's width (never cut). Esc (or q)
closes it; the run goes on, and the action's key reopens it; once the run ended its title
says so. Pure view: lines come down from the runbook controller."""

from __future__ import annotations

from typing import ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import RichLog, Static

MAX_LINES = 2000
"""Log lines kept for the log screen."""

RUNNING = "   (Esc: close; the run goes on)"
"""The title's tail while the run goes on."""

ENDED = "   (run ended: Esc close)"
"""The title's tail once the run ended."""


class RunLogScreen(ModalScreen[None]):
    """The running action's lines (runbook events, log lines); Esc closes, the run goes on.
    ``ended``: the run had ended when the screen was opened (:meth:`mark_ended` later)."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,q", "dismiss", "close (the run goes on)", id="runlog-close"),
    ]
    DEFAULT_CSS = """
    RunLogScreen { align: center middle; }
    RunLogScreen > Vertical { width: 90%; height: 80%; border: thick $primary; padding: 0 1; }
    RunLogScreen RichLog { height: 1fr; }
    """

    def __init__(self, title: str, lines: list[str], *, ended: bool = False) -> None:
        super().__init__()
        self._title = title
        self._initial = list(lines)
        self.ended = ended

    def compose(self) -> ComposeResult:
        """Title, then the log (wrapped, plain text: no markup read from the lines)."""
        with Vertical():
            yield Static(self._title_text(), id="runlog-title")
            yield RichLog(id="runlog", max_lines=MAX_LINES, wrap=True, markup=False,
                          highlight=False)

    def _title_text(self) -> Text:
        return Text(self._title + (ENDED if self.ended else RUNNING), style="bold")

    def on_mount(self) -> None:
        """Show the lines so far."""
        log = self.query_one(RichLog)
        for line in self._initial:
            log.write(Text(line))

    def add(self, line: str) -> None:
        """Append one line (UI thread)."""
        self.query_one(RichLog).write(Text(line))

    def mark_ended(self) -> None:
        """The run ended: the title says so (UI thread)."""
        self.ended = True
        self.query_one("#runlog-title", Static).update(self._title_text())


__all__ = ["ENDED", "MAX_LINES", "RUNNING", "RunLogScreen"]
