"""The TUI side of the probe: the probe key's flow, kept out of ``console/app.py``.

:class:`ProbeController` (one per app): the probe key runs :func:`~.run.preflight` in a daemon
thread (never on the UI thread), then shows the plan in the confirmation modal
(``seat_console.widgets.confirm.ConfirmScreen``), and on "yes" runs the probe in its own
thread with its own event loop. The live panel (:class:`~seat_console.widgets.probe.ProbeScreen`) redraws four times a second
from the run's :class:`~.run.Progress` (pure computation, no I/O on the UI thread). Pressing the
key again while a probe runs reopens the live screen; ``x`` there stops it (kept as
interrupted). Preflight refusals (no hold, engine down) are shown as an error notification.
A forced probe (no hold) is not offered in the TUI: use the CLI's ``--force --reason``.
"""

from __future__ import annotations

import atexit
import threading
from collections.abc import Callable
from typing import Any

from textual.screen import ModalScreen

REDRAW_S = 0.25
"""Live panel redraw period, seconds."""

STOP_GRACE_S = 10.0
"""At exit, how long a running probe gets to record its in-flight requests as interrupted and
write its summary, seconds."""


def confirm_screen(title: str, lines: list[str]) -> ModalScreen[bool]:
    """Issue 7's confirmation modal (``widgets/confirm.py``) with the probe's plan lines."""
    from seat_console.widgets.confirm import ConfirmScreen

    return ConfirmScreen(title, lines, yes_label="Yes, start the probe")


class ProbeController:
    """The probe key's flow for one app (see the module docstring). ``app``: the Textual app
    (uses ``loaded``, ``push_screen``, ``notify``, ``call_from_thread``)."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self.probe: Any = None
        self.thread: threading.Thread | None = None
        self.screen: Any = None
        self._preflighting = False
        self._exit_hook = False

    @property
    def running(self) -> bool:
        """Whether a probe run is in progress."""
        return self.thread is not None and self.thread.is_alive()

    def key(self) -> None:
        """The probe key: reopen the live screen, or preflight → confirm → run."""
        if self.running:
            self._open_screen()
            return
        if self._preflighting:
            self.app.notify("probe: preflight is already running")
            return
        self._preflighting = True
        self.app.notify("probe: preflight (seat container, engine, hold)…")
        threading.Thread(target=self._preflight, name="seat-console:probe-preflight",
                         daemon=True).start()

    def _preflight(self) -> None:
        from seat_console.actions import probe_journal
        from seat_console.probe.run import ProbeRefused, preflight

        try:
            result: Any = preflight(self.app.loaded, hold=probe_journal.hold_info())
        except ProbeRefused as exc:
            result = exc
        except Exception as exc:  # noqa: BLE001 - shown, never raised into the UI
            result = RuntimeError(f"{type(exc).__name__}: {exc}")
        self.app.call_from_thread(self._confirm, result)

    def _confirm(self, pre: Any) -> None:
        self._preflighting = False
        if isinstance(pre, Exception):
            self.app.notify(f"probe: {pre}", severity="error", timeout=15)
            return
        from seat_console.probe.plan import render_preflight

        lines = render_preflight(pre, self.app.loaded, None).splitlines()[1:]
        self.app.push_screen(confirm_screen("Start the probe? (sends load to the seat)",
                                            [ln.strip() for ln in lines]),
                             lambda yes: self._start(pre) if yes else None)

    def _start(self, pre: Any) -> None:
        from seat_console.probe.run import Probe, default_monitor_factory
        from seat_console.probe.store import RunWriter, StoreError

        loaded = self.app.loaded
        try:
            writer = RunWriter()
        except StoreError as exc:
            self.app.notify(f"probe: {exc}", severity="error", timeout=15)
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
        self._open_screen()

    def _run(self) -> None:
        from seat_console.probe.client import run_async
        from seat_console.actions.probe_journal import journal_probe

        loaded = self.app.loaded
        journal_probe(loaded, self.probe.run_id, "start", "started", "from the TUI")
        try:
            run_async(self.probe.run())
        except Exception as exc:  # noqa: BLE001 - the run is kept; say what happened
            self._tell(f"probe failed: {type(exc).__name__}: {exc}", "error")
            return
        s = self.probe.summary
        journal_probe(loaded, self.probe.run_id, "end", str(s.get("status")),
                      f"headline {'allowed' if s.get('headline_allowed') else 'withheld'}")
        self._tell(f"probe {s.get('run_id')}: {s.get('status')}"
                   + ("" if s.get("headline_allowed") else " — no headline"),
                   "information" if s.get("headline_allowed") else "warning")

    def _tell(self, message: str, severity: str) -> None:
        """Notify from the probe's thread — only while the app still runs (after it exited,
        ``call_from_thread`` would wait for a loop that is gone)."""
        if not getattr(self.app, "is_running", False):
            return
        try:
            self.app.call_from_thread(self.app.notify, message, severity=severity, timeout=15)
        except RuntimeError:   # the app stopped between the check and the call
            pass

    def _open_screen(self) -> None:
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


def attach(app: Any) -> Callable[[], None]:
    """The probe key's action for ``app`` (one controller per app, created on first use)."""
    ctl = getattr(app, "_probe_controller", None)
    if ctl is None:
        ctl = ProbeController(app)
        app._probe_controller = ctl
    return ctl.key


__all__ = ["REDRAW_S", "STOP_GRACE_S", "ProbeController", "attach", "confirm_screen"]
