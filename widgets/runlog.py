"""The log screen of a running node action (build, swap, restore): its runbook events and the
engine's or the build's log lines. Esc (or q) closes it; the run goes on, and the action's key
reopens it. Pure view: lines come down from the runbook controller."""

from __future__ import annotations

from typing import ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Log, Static

MAX_LINES = 2000
"""Log lines kept for the log screen."""


class RunLogScreen(ModalScreen[None]):
    """The running action's lines (runbook events, log lines); Esc closes, the run goes on."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,q", "dismiss", "close (the run goes on)", id="runlog-close"),
    ]
    DEFAULT_CSS = """
    RunLogScreen { align: center middle; }
    RunLogScreen > Vertical { width: 90%; height: 80%; border: thick $primary; padding: 0 1; }
    RunLogScreen Log { height: 1fr; }
    """

    def __init__(self, title: str, lines: list[str]) -> None:
        super().__init__()
        self._title = title
        self._initial = list(lines)

    def compose(self) -> ComposeResult:
        """Title, then the log."""
        with Vertical():
            yield Static(Text(self._title + "   (Esc: close; the run goes on)", style="bold"))
            yield Log(id="runlog", max_lines=MAX_LINES)

    def on_mount(self) -> None:
        """Show the lines so far."""
        self.query_one(Log).write_lines(self._initial)

    def add(self, line: str) -> None:
        """Append one line (UI thread)."""
        self.query_one(Log).write_line(line)


__all__ = ["MAX_LINES", "RunLogScreen"]
