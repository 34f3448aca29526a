"""The TUI side of the probe: its preflight, its run and its live screen. The key's flow (plan →
confirm → run → notify) is the one runbook controller's (:mod:`seat_console.tui.runbook`).

:class:`ProbeController` (one per app, owned by the runbook controller): :meth:`~ProbeController.
preflight` runs :func:`seat_console.probe.run.preflight` in the controller's plan thread (never
on the UI thread); after the confirmation :meth:`~ProbeController.start` runs the probe in its
own thread with its own event loop and posts :class:`~seat_console.tui.runbook.RunFinished` at
the end. The live panel (:class:`~seat_console.widgets.probe.ProbeScreen`) redraws four times a
second from the run's progress (pure computation, no I/O on the UI thread). Pressing the key
again while a probe runs reopens the live screen; ``x`` there stops it (kept as interrupted).
Preflight refusals (no hold, engine down) are shown as an error notification that says to press
H first (a forced probe without a hold is the CLI's alone).
"""

from __future__ import annotations

import atexit
import threading
from dataclasses import dataclass
from typing import Any

from seat_console.tui.messages import ConsoleApp, RunFinished


REDRAW_S = 0.25
"""Live panel redraw period, seconds."""

STOP_GRACE_S = 10.0
"""At exit, how long a running probe gets to record its in-flight requests as interrupted and
write its summary, seconds."""


@dataclass(frozen=True)
class ProbeOutcome:
    """A finished probe run as the controller's :class:`RunFinished` carries it: ``ok`` (a
    headline is allowed), ``text`` (one line per fact)."""

    ok: bool
    text: str
    outcome: str = ""
    error: str = ""
    remaining: tuple[str, ...] = ()

    def describe(self) -> str:
        """The outcome in words (first line: the notification)."""
        return self.text


class ProbeController:
    """The probe's preflight, run and live screen for one app (see the module docstring).
    ``app``: the app (:class:`~seat_console.tui.messages.ConsoleApp`); ``runbooks``: its controller."""

    def __init__(self, app: ConsoleApp, runbooks: Any = None) -> None:
        self.app = app
        self.runbooks = runbooks
        self.probe: Any = None
        self.thread: threading.Thread | None = None
        self.screen: Any = None
        self._exit_hook = False

    @property
    def running(self) -> bool:
        """Whether a probe run is in progress."""
        return self.thread is not None and self.thread.is_alive()

    def preflight(self) -> Any:
        """Worker thread: the probe's preflight, or the exception that refused it (returned,
        never raised)."""
        from seat_console.actions import probe_journal
        from seat_console.probe.run import preflight

        try:
            return preflight(self.app.loaded, hold=probe_journal.hold_info())
        except Exception as exc:  # noqa: BLE001 - shown once, in words, by the controller
            return exc

    def plan_lines(self, pre: Any) -> list[str]:
        """The preflight as the confirmation's plan lines."""
        from seat_console.probe.plan import render_preflight

        lines = render_preflight(pre, self.app.loaded, None).splitlines()[1:]
        return [ln.strip() for ln in lines]

    def start(self, pre: Any) -> None:
        """UI thread, after yes: start the probe in its own thread and open its live screen."""
        from seat_console.probe.run import Probe, default_monitor_factory
        from seat_console.probe.store import RunWriter, StoreError

        loaded = self.app.loaded
        try:
            writer = RunWriter()
        except StoreError as exc:
            self.app.post_message(RunFinished("probe", exc))
            return
        self.probe = Probe(loaded, pre, writer=writer,
                           monitor_factory=default_monitor_factory(
                               loaded, pre, context=getattr(self.app, "node", None)))
        self.thread = threading.Thread(target=self._run, name="seat-console:probe",
                                       daemon=True)
        if not self._exit_hook:
            # quitting the console (or losing its terminal) mid-probe: stop the run so it is
            # kept as interrupted, instead of a daemon thread dying with "running" on disk
            atexit.register(self.stop_and_wait)
            self._exit_hook = True
        self.thread.start()
        self.open_screen()

    def _run(self) -> None:
        from seat_console.probe.client import run_async
        from seat_console.actions.probe_journal import journal_probe

        loaded = self.app.loaded
        journal_probe(loaded, self.probe.run_id, "start", "started", "from the TUI")
        try:
            run_async(self.probe.run())
        except Exception as exc:  # noqa: BLE001 - the run is kept; say what happened
            self._tell(exc)
            return
        s = self.probe.summary
        journal_probe(loaded, self.probe.run_id, "end", str(s.get("status")),
                      f"headline {'allowed' if s.get('headline_allowed') else 'withheld'}")
        ok = bool(s.get("headline_allowed"))
        self._tell(ProbeOutcome(ok, f"probe {s.get('run_id')}: {s.get('status')}"
                                + ("" if ok else " — no headline"), str(s.get("status"))))

    def _tell(self, result: Any) -> None:
        """Post the outcome from the probe's thread — only while the app still runs."""
        if getattr(self.app, "is_running", False):
            self.app.post_message(RunFinished("probe", result, ("actions", "engine")))

    def open_screen(self) -> None:
        """Open (or reopen) the live probe screen."""
        from seat_console.probe.live import live_view
        from seat_console.widgets.probe import ProbeScreen

        probe = self.probe
        screen = ProbeScreen(self.stop, live_view(probe.progress))
        self.screen = screen

        def redraw() -> None:
            screen.show(live_view(probe.progress))

        def closed(_: object) -> None:
            self.screen = None

        self.app.push_screen(screen, closed)
        screen.set_interval(REDRAW_S, redraw)

    def stop(self) -> None:
        """Stop the running probe (thread-safe; the run is kept as interrupted)."""
        if self.probe is not None:
            self.probe.stop()

    def stop_and_wait(self, timeout_s: float = STOP_GRACE_S) -> None:
        """Stop a running probe and wait up to ``timeout_s`` seconds for its summary to be
        written (run at interpreter exit)."""
        if self.running and self.thread is not None:
            self.stop()
            self.thread.join(timeout_s)


__all__ = ["REDRAW_S", "STOP_GRACE_S", "ProbeController", "ProbeOutcome"]
