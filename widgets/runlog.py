"""The log screen of a running node action (build, swap, restore, compare): its runbook events
and the engine's or the build's log lines, wrapped at the screen's width (never cut); a
compare's also has one fixed progress line above them (``leg 2 of 4 (B2) · seat (swap: start
probe) · step 0:42 · total 3:10``, :mod:`seat_console.tui.compare_progress`). Esc (or q)
closes it; the run goes on, and the action's key reopens it; once the run ended its title
is the outcome (``swap: done …`` / ``swap FAILED …``) and, when the runbook's state has been
read again, its last line says what comes next (``next: probe — …``). Pure view: lines come
down from the runbook controller."""

from __future__ import annotations

from collections.abc import Callable
from typing import ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.timer import Timer
from textual.widgets import RichLog, Static

MAX_LINES = 2000
"""Log lines kept for the log screen."""

RUNNING = "   (Esc: close; the run goes on)"
"""The title's tail while the run goes on."""

ENDED = "   (run ended: Esc close)"
"""The title's tail once the run ended."""

PROGRESS_TICK_S = 1.0
"""How often the progress line (a compare's: leg, step, elapsed) is drawn again (s)."""


class RunLogScreen(ModalScreen[None]):
    """The running action's lines (runbook events, log lines); Esc closes, the run goes on.
    ``ended``: the run had ended when the screen was opened (:meth:`mark_ended` later);
    ``progress``: gives the fixed line shown above the log (a compare's leg, step and elapsed
    times), asked every :data:`PROGRESS_TICK_S` while the run goes on; ``None``: no such
    line."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,q", "dismiss", "close (the run goes on)", id="runlog-close"),
    ]
    DEFAULT_CSS = """
    RunLogScreen { align: center middle; }
    RunLogScreen > Vertical { width: 90%; height: 80%; border: thick $primary; padding: 0 1; }
    RunLogScreen RichLog { height: 1fr; }
    """

    def __init__(self, title: str, lines: list[str], *, ended: bool = False,
                 progress: Callable[[], str] | None = None) -> None:
        super().__init__()
        self._title = title
        self._initial = list(lines)
        self.ended = ended
        self._progress = progress
        self._tick: Timer | None = None
        self._ready = False

    def compose(self) -> ComposeResult:
        """Title, the progress line when there is one, then the log (wrapped, plain text: no
        markup read from the lines)."""
        with Vertical():
            yield Static(self._title_text(), id="runlog-title")
            if self._progress is not None:
                yield Static("", id="runlog-progress")
            yield RichLog(id="runlog", max_lines=MAX_LINES, wrap=True, markup=False,
                          highlight=False)

    def _title_text(self) -> Text:
        return Text(self._title + (ENDED if self.ended else RUNNING), style="bold")

    def on_mount(self) -> None:
        """Show the lines so far."""
        log = self.query_one(RichLog)
        for line in self._initial:
            log.write(Text(line))
        self._ready = True
        self.query_one("#runlog-title", Static).update(self._title_text())  # ended meanwhile?
        if self._progress is not None:
            self.show_progress()
            if not self.ended:
                self._tick = self.set_interval(PROGRESS_TICK_S, self.show_progress)

    def show_progress(self) -> None:
        """Draw the progress line again (its elapsed times move; UI thread)."""
        if self._progress is not None and self._ready:
            self.query_one("#runlog-progress", Static).update(
                Text(self._progress(), style="bold", no_wrap=True, overflow="ellipsis"))

    def add(self, line: str) -> None:
        """Append one line (UI thread); one that comes before the screen is mounted is
        written when it is."""
        if not self._ready:
            self._initial.append(line)
            return
        self.query_one(RichLog).write(Text(line))

    def mark_ended(self, outcome: str | None = None) -> None:
        """The run ended: the title says so, as ``outcome`` (its one-line result) when given
        instead of the question it was started with (UI thread)."""
        self.ended = True
        if outcome:
            self._title = outcome
        if not self._ready:
            return   # composed with the ended title
        self.query_one("#runlog-title", Static).update(self._title_text())
        if self._tick is not None:
            self._tick.stop()
            self._tick = None
        self.show_progress()


__all__ = ["ENDED", "MAX_LINES", "PROGRESS_TICK_S", "RUNNING", "RunLogScreen"]
