"""The TUI side of build-backport, swap and restore: the keys' flow, kept out of
``console/app.py``.

Each key (``B`` build backport, ``S`` swap, ``R`` restore; ids ``node.*``, so hidden under
``--readonly``) reads the plan in a daemon thread (never on the UI thread), shows it in a
confirmation modal — for the swap a **typed** one: the seat's name (``node.name``) must be
typed, since it stops the resident; build and restore use the same y/n modal as the probe
(issue 7's ``widgets/confirm.py`` when present) — and on yes runs the runbook in its own daemon
thread with a fresh journal and the app's node context (``app.node``, the one the panels read
through). Progress (every runbook event and the engine's or the build's log lines) goes to a log
screen (:class:`RunLogScreen`; Esc closes it, the run goes on; the key reopens it) and the
outcome to a notification. One action at a time. The runbook's own container changes are
registered on that context's docker event watcher (``nctx.expect``) and journaled with the
containers each step acts on, so the containers panel does not flag them as interference.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any, ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Input, Log, Static

MAX_LINES = 2000
"""Log lines kept for the log screen."""


class TypedConfirm(ModalScreen[bool]):
    """Confirmation that needs the seat's name typed (Enter checks it; Esc cancels)."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "cancel", "cancel", id="typed-confirm-cancel"),
    ]
    DEFAULT_CSS = """
    TypedConfirm { align: center middle; }
    TypedConfirm > Vertical { width: 100; height: auto; border: thick $error; padding: 1 2; }
    """

    def __init__(self, title: str, lines: list[str], seat: str) -> None:
        super().__init__()
        self._title, self._lines, self.seat = title, lines, seat

    def compose(self) -> ComposeResult:
        """The plan, then the input for the seat's name."""
        body = Text(self._title + "\n\n", style="bold")
        body.append("\n".join(self._lines) + "\n\n")
        body.append(f"Type the seat's name ({self.seat}) and Enter to proceed; Esc cancels.",
                    style="bold")
        with Vertical():
            yield Static(body)
            yield Input(placeholder=self.seat, id="typed-confirm-input")

    def on_input_submitted(self, event: Input.Submitted) -> None:
        """Enter: yes only when the name matches exactly."""
        self.dismiss(event.value.strip() == self.seat)

    def action_cancel(self) -> None:
        """Esc: no."""
        self.dismiss(False)


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


class SwapController:
    """The three keys' flow for one app (module docstring); ``app`` provides ``loaded``,
    ``push_screen``, ``notify``, ``call_from_thread``."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self.thread: threading.Thread | None = None
        self.title = ""
        self.lines: list[str] = []
        self.screen: RunLogScreen | None = None
        self._planning = False

    @property
    def running(self) -> bool:
        """Whether an action runs now."""
        return self.thread is not None and self.thread.is_alive()

    def key(self, kind: str) -> None:
        """``kind``: ``"build"``, ``"swap"`` or ``"restore"``."""
        if self.running:
            self.app.notify(f"{self.title} is running; showing its log")
            self._open()
            return
        if self._planning:
            self.app.notify("reading the plan…")
            return
        self._planning = True
        self.app.notify(f"{kind}: reading the plan from the node…")
        threading.Thread(target=self._plan, args=(kind,), daemon=True,
                         name=f"seat-console:{kind}-plan").start()

    # -- threads ------------------------------------------------------------------------------
    def _make(self, kind: str, journal: Any, nctx: Any, observer: Any, on_log: Any) -> Any:
        if kind == "build":
            from seat_console.actions.backport import BuildOptions, build_runbook

            return build_runbook(self.app.loaded, nctx.docker(timeout_s=60), journal,
                                 options=BuildOptions(on_log=on_log), observer=observer)
        from seat_console.actions import swap as swap_mod

        if kind == "swap":
            return swap_mod.build_swap(nctx, journal, observer=observer,
                                       options=swap_mod.SwapOptions(on_log=on_log))
        return swap_mod.build_restore(nctx, journal, on_log=on_log, observer=observer)

    def _plan(self, kind: str) -> None:
        from seat_console.tui_runbook import read_plan

        result = read_plan(self.app, lambda journal, nctx: self._make(
            kind, journal, nctx, None, lambda line: None))
        self.app.call_from_thread(self._confirm, kind, result)

    def _confirm(self, kind: str, plan: Any) -> None:
        from seat_console.tui_runbook import plan_problem

        self._planning = False
        problem = plan_problem(kind, plan)
        if problem is not None:
            self.app.notify(problem[0], severity="error", timeout=problem[1])
            return
        lines = plan.text_lines()
        seat = self.app.loaded.profile.node.name
        titles = {"build": "Build the backport?", "swap": f"Swap the seat {seat}? "
                  "(stops the resident)", "restore": f"Restore the seat {seat}?"}
        if kind == "swap":
            screen: ModalScreen[bool] = TypedConfirm(titles[kind], lines, seat)
        else:
            from seat_console.probe.tui import confirm_screen

            screen = confirm_screen(titles[kind], lines)
        self.app.push_screen(screen, lambda yes: self._start(kind, titles[kind]) if yes
                             else self.app.notify(f"{kind}: cancelled; nothing changed"))

    def _start(self, kind: str, title: str) -> None:
        self.title = title.rstrip("?")
        self.lines = []
        self.thread = threading.Thread(target=self._run, args=(kind,), daemon=True,
                                       name=f"seat-console:{kind}")
        self.thread.start()
        self._open()

    def _line(self, line: str) -> None:
        """Any thread: record and show one line."""
        def ui() -> None:
            self.lines.append(line)
            del self.lines[:-MAX_LINES]
            if self.screen is not None:
                self.screen.add(line)
        try:
            self.app.call_from_thread(ui)
        except RuntimeError:  # the app is gone
            pass

    def _run(self, kind: str) -> None:
        from seat_console.tui_runbook import with_journal

        try:
            res = with_journal(self.app, lambda journal, nctx: self._make(
                kind, journal, nctx, lambda e: self._line(e.line()),
                lambda line: self._line(f"  | {line}")).run(), secrets=True)
        except Exception as exc:  # noqa: BLE001 - shown, never raised into the UI
            self._line(f"{kind} failed: {type(exc).__name__}: {exc}")
            self.app.call_from_thread(self.app.notify, f"{kind} failed: {exc}",
                                      severity="error", timeout=20)
            return
        for line in res.describe().splitlines():
            self._line(line)
        self.app.call_from_thread(
            self.app.notify, res.describe().splitlines()[0],
            severity="information" if res.ok else "error", timeout=20)

    def _open(self) -> None:
        screen = RunLogScreen(self.title, self.lines)
        self.screen = screen

        def closed(_: object) -> None:
            self.screen = None

        self.app.push_screen(screen, closed)


def attach(app: Any, kind: str) -> Callable[[], None]:
    """The action for key ``kind`` of ``app`` (one controller per app, made on first use)."""
    ctl = getattr(app, "_swap_controller", None)
    if ctl is None:
        ctl = SwapController(app)
        app._swap_controller = ctl
    return lambda: ctl.key(kind)


__all__ = ["RunLogScreen", "SwapController", "TypedConfirm", "attach"]
