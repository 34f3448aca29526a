"""The hang-up watchdog: the console exits when its terminal goes away.

On SIGHUP, and when the terminal stops answering ``tcgetattr`` (a hang-up that sent no signal,
checked on the age tick), :meth:`HangupMixin.terminal_gone` asks a runbook in flight to stop
after its step, points stdin/stdout/stderr at ``/dev/null`` and exits; if the clean exit is
itself stuck writing to the dead terminal, a watchdog thread ends the process after
:data:`HANGUP_EXIT_GRACE_S` (and :data:`RUNBOOK_STOP_GRACE_S` for a runbook's step).
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import sys
import termios
import threading

log = logging.getLogger(__name__)

HANGUP_EXIT_GRACE_S = 5.0
"""Seconds a clean exit may take after the terminal went away before the process is ended."""

RUNBOOK_STOP_GRACE_S = 60.0
"""After a hang-up, seconds a runbook in flight gets to finish its current step and undo before
the process ends (a step cut off is journaled; the hold's lease covers the rest)."""

EXIT_HANGUP = 129
"""Exit code after the terminal went away (128 + SIGHUP, the shell's convention)."""

EXIT_HANGUP_FORCED = 140
"""Exit code when, after the terminal went away, the clean exit did not finish within
:data:`HANGUP_EXIT_GRACE_S` and the watchdog ended the process."""

def in_flight() -> list:
    """:func:`seat_console.actions.runbook.in_flight` (the runbook engine and its journal are
    imported on first use, not before the first frame)."""
    from seat_console.actions.runbook import in_flight as running

    return running()


def stop_in_flight(grace_s: float) -> list:
    """:func:`seat_console.actions.runbook.stop_in_flight`, imported on first use."""
    from seat_console.actions.runbook import stop_in_flight as stop

    return stop(grace_s)



class HangupMixin:
    """The app's side of the watchdog (mixed into :class:`~seat_console.tui.app.SeatConsoleApp`;
    uses its ``exit``, ``_driver``, ``_tty_fd`` and ``_shutting_down``)."""

    _tty_fd: int | None
    _shutting_down: bool

    def _install_hangup_watch(self) -> None:
        """Exit on SIGHUP; remember the terminal to check it answers (:meth:`_check_terminal`)."""
        try:
            asyncio.get_running_loop().add_signal_handler(signal.SIGHUP, self.terminal_gone,
                                                          "SIGHUP")
        except (NotImplementedError, RuntimeError, ValueError):
            log.debug("cannot install SIGHUP handler")
        fd = sys.__stdout__.fileno() if sys.__stdout__ is not None else None
        if fd is not None and os.isatty(fd):
            self._tty_fd = fd

    def _check_terminal(self) -> None:
        assert self._tty_fd is not None
        try:
            termios.tcgetattr(self._tty_fd)
        except (termios.error, OSError):
            self.terminal_gone("terminal stopped answering")

    def terminal_gone(self, why: str = "terminal gone") -> None:
        """The terminal went away: exit now; end the process if the exit itself hangs."""
        if self._shutting_down:
            return
        self._shutting_down = True
        log.warning("exiting: %s", why)

        def watchdog() -> None:
            for rb in in_flight():   # a runbook stops after its current step and undoes
                rb.request_stop()
            threading.Event().wait(HANGUP_EXIT_GRACE_S)
            # before ending the process: let a runbook in flight finish its step, or journal
            # exactly where it was cut off (seat-console recover picks it up)
            stop_in_flight(RUNBOOK_STOP_GRACE_S)
            os._exit(EXIT_HANGUP_FORCED)

        threading.Thread(target=watchdog, name="seat-console-hangup", daemon=True).start()
        # Point stdin/stdout/stderr at /dev/null so Textual's writer thread and its restoring of
        # the terminal do not block or fail on the dead terminal; the exit can then run cleanly.
        if self._tty_fd is not None:
            try:
                devnull = os.open(os.devnull, os.O_RDWR)
                for fd in (0, 1, 2):
                    os.dup2(devnull, fd)
                os.close(devnull)
            except OSError:
                log.debug("could not detach from the dead terminal", exc_info=True)
        self._unblock_dead_writer()
        self.exit(return_code=EXIT_HANGUP)

    def _unblock_dead_writer(self) -> None:
        """If Textual's output thread already died writing to the dead terminal, drain its
        queue so the exit's last writes (restoring the terminal) cannot block the UI thread.
        Best effort on Textual internals; the watchdog in :meth:`terminal_gone` backs it up."""
        writer = getattr(self._driver, "_writer_thread", None)
        queue = getattr(writer, "_queue", None)
        if writer is None or queue is None or writer.is_alive():
            return

        def drain() -> None:
            while True:
                queue.get()

        threading.Thread(target=drain, name="seat-console-drain", daemon=True).start()



__all__ = ["EXIT_HANGUP", "EXIT_HANGUP_FORCED", "HANGUP_EXIT_GRACE_S", "RUNBOOK_STOP_GRACE_S",
           "HangupMixin", "in_flight", "stop_in_flight"]
