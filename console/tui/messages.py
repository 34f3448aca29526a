"""The TUI's typed messages and the app's face the controllers see.

The runbook controller (:mod:`seat_console.tui.runbook`) and the probe's run
(:mod:`seat_console.tui.probe_tui`) work in threads and talk back to the app with these
messages (``post_message`` is thread-safe); the app forwards them to the controller on the UI
thread. :class:`ConsoleApp` is what the controllers and the main screen may use of the app
(typed, instead of ``Any``); :class:`~seat_console.tui.app.SeatConsoleApp` is one.
"""

from __future__ import annotations

from typing import Any, Protocol

from textual.message import Message


class ConsoleApp(Protocol):
    """The app as the controllers and screens use it: the profile, the node context, its
    per-source states and layout, screens, notifications, messages, the progress line."""

    loaded: Any
    node: Any
    readonly: bool
    force_compact: bool | None
    compact_layout: bool | None
    is_running: bool

    @property
    def states(self) -> dict[str, Any]: ...

    def notify(self, message: str, *, title: str = "", severity: Any = "information",
               timeout: float | None = None, markup: bool = True) -> None: ...

    def push_screen(self, screen: Any, callback: Any = None,
                    wait_for_dismiss: bool = False) -> Any: ...

    def post_message(self, message: Message) -> bool: ...

    def show_progress(self, title: str, lines: list[str]) -> None: ...

    def update_header(self) -> None: ...

    def redraw_dirty(self) -> None: ...

    def key_of(self, binding_id: str | None) -> str | None: ...


class PlanReady(Message):
    """A flow's plan was read (or could not be): ``kind``, ``plan`` (a
    :class:`~seat_console.actions.runbook.Plan`, a probe preflight, or the exception)."""

    def __init__(self, kind: str, plan: Any) -> None:
        super().__init__()
        self.kind = kind
        self.plan = plan


class RunbookEvent(Message):
    """One line of a running flow: ``key`` (the step it updates in place; ``None``: a new
    line), ``line`` (plain text) and ``event`` (the runbook's
    :class:`~seat_console.actions.runbook.Event` it came from; ``None`` for a log line)."""

    def __init__(self, kind: str, line: str, key: str | None = None,
                 event: Any = None) -> None:
        super().__init__()
        self.kind = kind
        self.line = line
        self.key = key
        self.event = event


class RunFinished(Message):
    """A flow ended: ``result`` (a :class:`~seat_console.actions.runbook.Result`, or the
    exception), ``refresh`` (source keys to read again now)."""

    def __init__(self, kind: str, result: Any, refresh: tuple[str, ...] = ()) -> None:
        super().__init__()
        self.kind = kind
        self.result = result
        self.refresh = refresh



__all__ = ["ConsoleApp", "PlanReady", "RunFinished", "RunbookEvent"]
