"""The evidence report screen (read-only): the newest comparison's report, else the newest
probe run's, as ``seat-console report`` prints it.

The screen does no I/O of its own: the app hands it ``load`` (a callable returning the report's
Markdown, :func:`seat_console.evidence.latest.build_markdown`), which it runs in a thread worker
(never on the UI thread); it shows "reading …" until then, and the error in words if the run
cannot be read.
Keys: ``escape`` / ``q`` close, ``r`` reads again.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Footer, Markdown, Static
from textual.worker import Worker, WorkerState


class EvidenceScreen(ModalScreen[None]):
    """Read-only report screen. ``load()``: the report as Markdown (blocking; run in a worker
    thread)."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "dismiss", "close", key_display="Esc", id="evidence-close"),
        Binding("q", "dismiss", "close", show=False, id="evidence-close-q"),
        Binding("r", "reload", "read again", id="evidence-reload"),
    ]
    DEFAULT_CSS = """
    EvidenceScreen { align: center middle; }
    EvidenceScreen > VerticalScroll { width: 95%; height: 95%; border: round $accent;
                                      background: $surface; }
    """

    def __init__(self, load: Callable[[], str]) -> None:
        super().__init__()
        self.load = load
        self.text: str | None = None

    def compose(self) -> ComposeResult:
        """The status line and the report in a scrolling column, then this screen's own
        footer (Esc close, r read again): the main screen's, showing through, said "q quit"
        where q closes this screen (the trial)."""
        with VerticalScroll():
            yield Static("reading the evidence report …", id="evidence-status")
            yield Markdown("", id="evidence-report")
        yield Footer()

    def on_mount(self) -> None:
        self.action_reload()

    def action_reload(self) -> None:
        """Build the report again in a thread worker."""
        self.query_one("#evidence-status", Static).update("reading the evidence report …")
        self.run_worker(self.load, thread=True,
                        exclusive=True, exit_on_error=False, group="evidence")

    async def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        """Show the report (or the worker's error) when the build finishes."""
        if event.worker.group != "evidence":
            return
        status = self.query_one("#evidence-status", Static)
        if event.state == WorkerState.SUCCESS:
            self.text = str(event.worker.result)
            status.update("read-only · Esc closes · r reads again")
            await self.query_one("#evidence-report", Markdown).update(self.text)
        elif event.state == WorkerState.ERROR:
            status.update(f"the report could not be built: {event.worker.error}")


__all__ = ["EvidenceScreen"]
