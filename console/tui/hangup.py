"""The hang-up watchdog: the console exits when its terminal goes away.

Three ways to notice: SIGHUP (on the UI thread's loop); a thread that waits in ``poll(2)`` for
the terminal's ``POLLHUP``/``POLLERR`` (:func:`wait_for_hangup`: a hang-up that sent no signal,
e.g. SIGHUP blocked, noticed even while the UI thread is stuck); and, as a backstop, the age
tick's ``tcgetattr`` on the UI thread. Then :meth:`HangupMixin.terminal_gone` asks a runbook
in flight to stop after its step, points stdin/stdout/stderr at ``/dev/null`` and exits with
:data:`EXIT_HANGUP`; if the clean exit is itself stuck, a watchdog thread ends the process
after :data:`HANGUP_EXIT_GRACE_S` (and :data:`RUNBOOK_STOP_GRACE_S` for a runbook's step) with
:data:`EXIT_HANGUP_FORCED`.

Why a thread: Textual's output thread dies on the first write to a hung-up terminal (``EIO``),
and its queue holds 30 writes; a UI thread that renders 30 more frames before it next checks
the terminal then blocks in ``Queue.put`` for good (seen under CI load, py-spy: the main thread
in ``WriterThread.write``), and no check on that thread can run again. The watch thread leaves
the terminal from outside the UI thread and drains that queue, so the UI thread wakes and
exits cleanly.
"""

from __future__ import annotations

import asyncio
import logging
import os
import select
import signal
import sys
import termios
import threading
import time

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

def wait_for_hangup(fd: int) -> str | None:
    """Block (no CPU, no timeout) until the terminal on ``fd`` hangs up: ``poll(2)`` with no
    events asked for returns only ``POLLHUP``/``POLLERR``, which Linux sets on a pty's slave
    once its master is closed (drivers/tty/n_tty.c ``n_tty_poll``: ``TTY_OTHER_CLOSED``; a
    hung-up file's ``hung_up_tty_poll``). Returns why (``"terminal hung up"``), or ``None``
    when ``fd`` is not open (``POLLNVAL``: nothing to watch). Raises nothing; an ``OSError``
    from ``poll`` is logged and read as ``None``."""
    watch = select.poll()
    try:
        watch.register(fd, 0)
        while True:
            for _fd, events in watch.poll():
                if events & select.POLLNVAL:
                    return None
                if events & (select.POLLHUP | select.POLLERR):
                    return "terminal hung up"
    except OSError:
        log.debug("cannot watch fd %s for a hang-up", fd, exc_info=True)
        return None


def in_flight() -> list:
    """:func:`seat_console.actions.runbook.in_flight` (the runbook engine and its journal are
    imported on first use, not before the first frame)."""
    from seat_console.actions.runbook import in_flight as running

    return running()


def stop_in_flight(grace_s: float, why: str = "terminal gone") -> list:
    """:func:`seat_console.actions.runbook.stop_in_flight`, imported on first use."""
    from seat_console.actions.runbook import stop_in_flight as stop

    return stop(grace_s, why)


QUIT_CONFIRM_S = 5.0
"""While a runbook runs, a second quit within this many seconds of the first quits."""


def _running_words(runs: list) -> str:
    """``swap (step 'start probe')``, joined by ``; `` — the runs in flight, for a person."""
    return "; ".join(f"{rb.name} (step '{rb.current_step or 'starting'}')" for rb in runs)


def end_runbooks_on_exit(hangup: bool, stream=None, interrupted: bool = False) -> list:
    """After the app's loop ended (the terminal is restored): stop every runbook in flight
    (:func:`stop_in_flight`, :data:`RUNBOOK_STOP_GRACE_S`), saying on ``stream`` (default
    ``sys.stderr``) that the process waits and why, then which runs were cut off and what to
    run next. After a hang-up (``hangup``) nothing is written: there is no terminal. The
    journal's reason for a run cut off: ``terminal gone`` (``hangup``), ``interrupted
    by Ctrl-C`` (``interrupted``: a SIGINT ended the app, exit code 130), else ``quit``.
    Returns :func:`stop_in_flight`'s sentences."""
    runs = in_flight()
    out = None if hangup else (stream or sys.stderr)
    if runs and out is not None:
        _say(out, f"seat-console: waiting for {_running_words(runs)} to finish its step and "
                  f"undo before the console ends (up to {RUNBOOK_STOP_GRACE_S:.0f} s)…")
    why = "terminal gone" if hangup else "interrupted by Ctrl-C" if interrupted else "quit"
    left = stop_in_flight(RUNBOOK_STOP_GRACE_S, why)
    if runs and out is not None:
        _say(out, "seat-console: " + ("; ".join(left) + " — run `seat-console recover`"
                                      if left else "done: nothing was left mid-step"))
    return left


def _say(out, line: str) -> None:
    try:
        out.write(line + "\n")
        out.flush()
    except (OSError, ValueError):   # a closed or gone stream: the journal has it
        pass



class HangupMixin:
    """The app's side of the watchdog (mixed into :class:`~seat_console.tui.app.SeatConsoleApp`;
    uses its ``exit``, ``_driver``, ``_tty_fd`` and ``_shutting_down``)."""

    _tty_fd: int | None
    _shutting_down: bool
    _hangup_lock = threading.Lock()
    """Makes leaving the terminal happen once per process (the watch thread and the UI thread
    may both notice)."""
    _hangup_why: str | None = None
    """Why the terminal was left (``None``: it was not)."""
    _hangup_exit_asked = False

    _quit_asked_at: float | None = None

    async def action_quit(self) -> None:
        """Quit (``q``, ``ctrl+q``, the palette's Quit). While a runbook runs in this process
        the first quit only says what quitting does to it — it stops after its current step
        and undoes — and a second within :data:`QUIT_CONFIRM_S` quits."""
        runs = in_flight()
        now = time.monotonic()
        if runs and (self._quit_asked_at is None
                     or now - self._quit_asked_at > QUIT_CONFIRM_S):
            self._quit_asked_at = now
            self.notify(f"{_running_words(runs)} is running: quitting stops it after this step "
                        f"and undoes it. Quit again within {QUIT_CONFIRM_S:.0f} s to quit.",
                        title="runbook in flight", severity="warning",
                        timeout=QUIT_CONFIRM_S)
            return
        await super().action_quit()  # type: ignore[misc]

    def _install_hangup_watch(self) -> None:
        """Exit on SIGHUP; remember the terminal to check it answers (:meth:`_check_terminal`)
        and start the thread that waits for its hang-up (:func:`wait_for_hangup`)."""
        loop = asyncio.get_running_loop()
        try:
            loop.add_signal_handler(signal.SIGHUP, self.terminal_gone, "SIGHUP")
        except (NotImplementedError, RuntimeError, ValueError):
            log.debug("cannot install SIGHUP handler")
        fd = sys.__stdout__.fileno() if sys.__stdout__ is not None else None
        if fd is None or not os.isatty(fd):
            return
        self._tty_fd = fd

        def watch() -> None:
            why = wait_for_hangup(fd)
            if why is None or not self._leave_terminal(why):
                return
            try:
                loop.call_soon_threadsafe(self.terminal_gone, why)
            except RuntimeError:   # the loop is closed: the app has exited already
                log.debug("hang-up after the loop closed")

        t = threading.Thread(target=watch, name="seat-console-hangup-watch", daemon=True)
        t.never_ends = True   # type: ignore[attr-defined] # first_frame.end_process: not waited
        t.start()

    def _check_terminal(self) -> None:
        assert self._tty_fd is not None
        try:
            termios.tcgetattr(self._tty_fd)
        except (termios.error, OSError):
            self.terminal_gone("terminal stopped answering")

    def terminal_gone(self, why: str = "terminal gone") -> None:
        """The terminal went away (UI thread): leave it (:meth:`_leave_terminal`, unless the
        watch thread did) and exit with :data:`EXIT_HANGUP`. Does nothing while a normal exit
        is already under way."""
        self._leave_terminal(why)
        if self._hangup_why is None or self._hangup_exit_asked:
            return
        self._hangup_exit_asked = True
        self.exit(return_code=EXIT_HANGUP)

    def _leave_terminal(self, why: str) -> bool:
        """Any thread, once: start the watchdog that ends the process if the exit hangs, point
        stdin/stdout/stderr at ``/dev/null`` and unblock a UI thread stuck on Textual's output
        queue. Returns True when this call did it; False when the terminal was left already or
        a normal exit is under way (``_shutting_down``). Raises nothing."""
        with self._hangup_lock:
            if self._hangup_why is not None or self._shutting_down:
                return False
            self._hangup_why = why
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
        return True

    def _unblock_dead_writer(self) -> None:
        """Once Textual's output thread has ended (it dies on its first write to the dead
        terminal, ``EIO``; or it stopped), drain its queue for good, so no write of the UI
        thread (a frame, the exit's restoring of the terminal) can block on a full queue. Best
        effort on Textual internals (``textual/drivers/_writer_thread.py``); the watchdog in
        :meth:`_leave_terminal` backs it up."""
        writer = getattr(self._driver, "_writer_thread", None)
        queue = getattr(writer, "_queue", None)
        if writer is None or queue is None:
            return

        def drain() -> None:
            writer.join()   # a live writer now writes to /dev/null; drain only a dead one's
            while True:
                queue.get()

        threading.Thread(target=drain, name="seat-console-drain", daemon=True).start()



__all__ = ["EXIT_HANGUP", "EXIT_HANGUP_FORCED", "HANGUP_EXIT_GRACE_S", "RUNBOOK_STOP_GRACE_S",
           "HangupMixin", "QUIT_CONFIRM_S", "end_runbooks_on_exit", "in_flight",
           "stop_in_flight", "wait_for_hangup"]
