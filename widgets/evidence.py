"""The evidence report screen (read-only): the newest comparison's report, else the newest
probe run's, as ``seat-console report`` prints it.

The files are read and the report built in a thread worker (never on the UI thread); the
screen shows "reading …" until then, and the error in words if the run cannot be read.
Keys: ``escape`` / ``q`` close, ``r`` reads again.
"""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Markdown, Static
from textual.worker import Worker, WorkerState


def newest_evidence(data_root: Path | None = None) -> Path | None:
    """The newest comparison directory (``comparisons/<id>`` with ``compare.json``), else the
    newest probe run directory (``runs/<id>`` with ``summary.json``), else ``None``. IDs start
    with their UTC start time, so the newest sorts last."""
    from seat_console.core.paths import data_dir

    base = data_root or data_dir()
    for sub, marker in (("comparisons", "compare.json"), ("runs", "summary.json")):
        d = base / sub
        if d.is_dir():
            found = sorted(p for p in d.iterdir() if (p / marker).is_file())
            if found:
                return found[-1]
    return None


def build_markdown(target: Path | None, data_root: Path | None = None) -> str:
    """The report of ``target`` (default :func:`newest_evidence`) as Markdown, or a sentence
    saying there is nothing to show / why it cannot be read. Blocking: call from a worker."""
    from seat_console.evidence import report as rp
    from seat_console.evidence.runs import RunError

    target = target or newest_evidence(data_root)
    if target is None:
        return ("# No evidence yet\n\nNo comparison or probe run is kept in the data dir. "
                "Run `seat-console compare --bracket ABBA` (or a probe) first.")
    try:
        return rp.render_markdown(rp.build_report(rp.load_inputs([str(target)])))
    except RunError as exc:
        return f"# The report cannot be built\n\n{exc}"


class EvidenceScreen(ModalScreen[None]):
    """Read-only report screen. ``target``: a comparison or run directory (default the
    newest); ``data_root``: the data dir (default the probe store's)."""

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

    def __init__(self, target: Path | None = None, data_root: Path | None = None) -> None:
        super().__init__()
        self.target = target
        self.data_root = data_root
        self.text: str | None = None

    def compose(self) -> ComposeResult:
        with VerticalScroll():
            yield Static("reading the evidence report …", id="evidence-status")
            yield Markdown("", id="evidence-report")

    def on_mount(self) -> None:
        self.action_reload()

    def action_reload(self) -> None:
        """Build the report again in a thread worker."""
        self.query_one("#evidence-status", Static).update("reading the evidence report …")
        self.run_worker(lambda: build_markdown(self.target, self.data_root), thread=True,
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
            status.update(f"the report could not be built: {event.worker.error!r}")
