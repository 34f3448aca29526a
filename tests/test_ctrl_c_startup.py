"""Ctrl-C at any instant of start-up gives the shell its terminal back (issue #22).

About 1 start in 10, a SIGINT while the console started (between the first frame's
alternate-screen entry and Textual's driver, or during Textual's own start) exited 130 with the
shell left on the alternate screen, the cursor hidden. Here the console runs in a pty (the NVML
double stands for the cards) and gets one SIGINT per start, 50 starts, at instants spread over
the start-up: after the process began, after the first frame appeared, and after Textual's
first bytes, each with a growing delay. Every start must end with exit code 130 (or 0, when the
app got to quit on it; or CPython's own start ended by it, before any of the console's code
ran and anything was drawn: :func:`cpython_refused_to_start`) and the terminal restored: the
last alternate-screen entry followed by its exit, the last cursor hide by a cursor show, and
the pty back in canonical mode with echo. A Ctrl-C CPython printed and dropped while it
started is honoured too (exit 130, :mod:`seat_console.core.interrupt`): only CPython's own
message about it may hold a traceback (:data:`CPYTHON_DROPPED`).

The delays only place the signal (the variable under test); every wait for output or exit is
bounded generously (a liveness bound, never a speed assertion).
"""

from __future__ import annotations

import os
import re
import signal
import sys
import termios
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
import pty_helpers  # noqa: E402

ALT_ON, ALT_OFF = b"\x1b[?1049h", b"\x1b[?1049l"
HIDE, SHOW = b"\x1b[?25l", b"\x1b[?25h"
TEXTUAL_FIRST = b"GPUs (NVML)"   # the GPU panel's title: Textual's screen is up


def restored(buf: bytes) -> list[str]:
    """What the bytes ``buf`` written to the terminal left undone (empty: restored)."""
    problems = []
    if buf.rfind(ALT_ON) > buf.rfind(ALT_OFF):
        problems.append("left on the alternate screen")
    if buf.rfind(HIDE) > buf.rfind(SHOW):
        problems.append("cursor left hidden")
    return problems


def _wait_for(master: int, needle: bytes, buf: bytearray, limit_s: float) -> bool:
    got = pty_helpers.read_until(master, needle, limit_s)
    buf += got
    return needle in buf


def one_interrupted_start(tmp_path: Path, anchor: str, delay_s: float
                          ) -> tuple[int | None, bytes, list[str]]:
    """Start the console on a pty, send SIGINT ``delay_s`` after ``anchor`` (``"spawn"``, the
    first frame's ``"frame"``, Textual's ``"textual"``), read until it exits. Returns the exit
    code, the bytes written and the terminal problems left (:func:`restored` and the pty's
    line discipline)."""
    proc, master = pty_helpers.spawn_python(
        ["benchmarks/nvml_double_console.py", "--", "--interval", "1"],
        {"XDG_CONFIG_HOME": str(tmp_path)})
    buf = bytearray()
    try:
        if anchor == "frame":
            _wait_for(master, ALT_ON, buf, 60)
        elif anchor == "textual":
            _wait_for(master, TEXTUAL_FIRST, buf, 90)
        end = time.monotonic() + delay_s
        while time.monotonic() < end:   # keep reading: a full pty would block the child
            buf += pty_helpers.read_until(master, b"\x00never\x00", max(0.0, end - time.monotonic()))
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGINT)  # as Ctrl-C sends it before Textual's raw mode
        buf += pty_helpers.drain(proc, master, 90)
        if proc.poll() is None:
            return None, bytes(buf), ["did not exit within 90 s of the SIGINT"]
        problems = restored(bytes(buf))
        lflag = termios.tcgetattr(master)[3]
        if not (lflag & termios.ICANON and lflag & termios.ECHO):
            problems.append("pty left in raw mode (no ICANON/ECHO)")
        return proc.returncode, bytes(buf), problems
    finally:
        pty_helpers.close(proc, master)


SCHEDULE = [(anchor, step * gap)
            for anchor, steps, gap in (("spawn", 17, 0.06), ("frame", 17, 0.08),
                                       ("textual", 16, 0.05))
            for step in range(steps)]
"""50 (anchor, delay) pairs: 0 to ~1 s after the start, 0 to ~1.3 s after the first frame
(the profile's validation, the early readings, Textual's import), 0 to 0.75 s after Textual's
first screen."""


def test_the_schedule_spreads_fifty_instants_over_the_start_up():
    assert len(SCHEDULE) == 50 and len(set(SCHEDULE)) == 50


def test_restored_reads_what_the_bytes_left_undone():
    assert restored(b"x" + ALT_ON + HIDE + b"frame" + SHOW + ALT_OFF) == []
    assert restored(ALT_ON + HIDE + b"frame") == ["left on the alternate screen",
                                                  "cursor left hidden"]
    assert restored(ALT_ON + HIDE + SHOW + ALT_OFF + ALT_ON) == ["left on the alternate screen"]
    assert restored(b"") == []


CPYTHON_DROPPED = re.compile(
    rb"(?:Exception ignored in: <function _get_module_lock\.<locals>\.cb[^\n]*"
    rb"|Failed checking if argv\[0\] is an import path entry)\r?\n"
    rb"Traceback \(most recent call last\):\r?\n(?:  [^\n]*\n)*KeyboardInterrupt:? ?\r?\n")
"""What CPython prints when it drops a KeyboardInterrupt while it starts, before any of the
console's code runs: raised in importlib's module-lock weakref callback ("Exception ignored
in …"), or while it checked the script's path. It runs on; the console finds the traces and
still exits 130 (:mod:`seat_console.core.interrupt`), but cannot unprint CPython's message."""


def console_output(buf: bytes) -> bytes:
    """``buf`` without :data:`CPYTHON_DROPPED` messages: what the console itself wrote."""
    return CPYTHON_DROPPED.sub(b"", buf)


def cpython_refused_to_start(rc: int | None, buf: bytes) -> bool:
    """Whether the SIGINT ended the interpreter's own start, before any of the console's code
    ran (nothing drawn, which is asserted): death by the signal (Python's handler not yet in
    place, or a KeyboardInterrupt raised in the launcher's own imports, which re-raises the
    signal to die by it, with a traceback); "Fatal Python error: init_…" (it came while
    CPython initialised: ``init_import_site``, ``init_sys_streams``, with a KeyboardInterrupt
    or an error of CPython's own set-up that the signal cut); exit 1 with a bare
    "KeyboardInterrupt", no traceback (it came after `site`, before the script's first line:
    CPython runs the pending signal handlers just before it runs the script,
    ``Py_MakePendingCalls`` in ``pymain_run_file_obj``, and exits 1 on the exception); or
    `site` turning it into an error while it ran a ``.pth`` line ("Error processing line",
    Python 3.11 wraps it in a RuntimeError), which leaves the package unimportable."""
    if ALT_ON in buf or rc in (None, 0, 130):
        return False
    if rc == 1 and b"Fatal Python error: init_" in buf:
        return True   # whatever the signal broke (a KeyboardInterrupt, or io's set-up failing)
    return rc == -signal.SIGINT or (b"KeyboardInterrupt" in buf and (
        (rc == 1 and console_output(buf).strip() == b"KeyboardInterrupt")
        or b"Error processing line" in buf))


def test_cpythons_own_start_up_outcomes_are_told_from_the_consoles():
    dropped = (b"Exception ignored in: <function _get_module_lock.<locals>.cb at 0x7f>\r\n"
               b"Traceback (most recent call last):\r\n"
               b'  File "<frozen importlib._bootstrap>", line 198, in cb\r\n'
               b"KeyboardInterrupt: \r\n")
    assert console_output(dropped + b"x") == b"x"
    assert b"Traceback" in console_output(b"Traceback (most recent call last):\r\n  File x\r\n"
                                          b"KeyboardInterrupt\r\n")
    assert cpython_refused_to_start(1, b"Fatal Python error: init_sys_streams: ...\r\n"
                                       b"TypeError: expected a message argument\r\n")
    assert cpython_refused_to_start(1, b"Fatal Python error: init_import_site: ...\r\n"
                                       b"KeyboardInterrupt\r\n")
    assert cpython_refused_to_start(-signal.SIGINT, b"")
    assert cpython_refused_to_start(1, b"KeyboardInterrupt\r\n")
    assert not cpython_refused_to_start(1, b"Traceback (most recent call last):\r\n"
                                           b'  File "cli.py", line 1\r\nKeyboardInterrupt\r\n')
    assert not cpython_refused_to_start(1, b"Traceback ... KeyboardInterrupt")   # the console's
    assert not cpython_refused_to_start(None, b"Error processing line 1 KeyboardInterrupt")
    assert not cpython_refused_to_start(-signal.SIGINT, ALT_ON)                 # drawn: no excuse


def test_ctrl_c_at_fifty_instants_of_start_up_always_restores_the_terminal(tmp_path):
    failures = []
    for i, (anchor, delay) in enumerate(SCHEDULE):
        rc, buf, problems = one_interrupted_start(tmp_path / str(i), anchor, delay)
        early_kill = cpython_refused_to_start(rc, buf)
        if problems or not (rc in (0, 130) or early_kill) or (
                b"Traceback" in console_output(buf) and not early_kill):
            failures.append(f"start {i} ({anchor} + {delay:.2f} s): exit {rc}, {problems}, "
                            f"last bytes {buf[-300:]!r}")
    assert not failures, "\n".join(failures)


@pytest.fixture()
def interrupt_state():
    """The first frame's SIGINT state as a fresh start-up has it, put back after the test."""
    from seat_console.tui import first_frame as ff

    saved = (ff._interrupt_hook, ff._interrupt_pending, getattr(ff._on_interrupt, "fired", False))
    ff.set_interrupt_hook(None)
    ff._interrupt_pending = False
    ff._on_interrupt.fired = False
    yield ff
    ff._interrupt_hook, ff._interrupt_pending, ff._on_interrupt.fired = saved


def test_a_sigint_before_the_app_run_is_raised_at_the_next_safe_point(interrupt_state):
    """Never raised from the handler (inside an import it could leave the import lock held:
    a deadlock), but by the start-up's next safe point."""
    ff = interrupt_state
    ff.raise_if_interrupted()                  # nothing came: nothing raised
    ff._on_interrupt(signal.SIGINT, None)      # must not raise
    assert ff.interrupt_pending()
    with pytest.raises(KeyboardInterrupt):
        ff.raise_if_interrupted()


def test_a_sigint_while_asyncio_builds_the_loop_is_pending_not_raised(interrupt_state):
    """The hook set (App.run under way) and no loop running yet: no KeyboardInterrupt (it left
    a half-made loop and tracebacks on the shell's screen); the app acts on it once its loop
    runs, and the run's code is 130."""
    ff = interrupt_state
    calls = []
    ff.set_interrupt_hook(lambda: calls.append("exit"))
    ff._on_interrupt(signal.SIGINT, None)      # no loop in this thread: must not raise
    assert calls == [] and ff.interrupt_pending()
    assert ff.run_pending_interrupt() is True and calls == ["exit"]


def test_a_sigint_while_the_loop_runs_calls_the_hook_on_the_loop(interrupt_state):
    import asyncio

    ff = interrupt_state
    calls = []

    async def main():
        ff.set_interrupt_hook(lambda: calls.append("exit"))
        ff._on_interrupt(signal.SIGINT, None)
        assert calls == []                      # not from the handler: on the loop, soon
        for _ in range(100):
            if calls:
                break
            await asyncio.sleep(0)
    asyncio.run(main())
    assert calls == ["exit"] and ff.interrupt_pending()


def test_no_sigint_nothing_pending(interrupt_state):
    ff = interrupt_state
    ff.set_interrupt_hook(lambda: None)
    assert not ff.interrupt_pending() and ff.run_pending_interrupt() is False


END_PROCESS_CHILD = r"""
import atexit, sys, threading
from seat_console.tui import first_frame
stuck = threading.Event()
threading.Thread(target=stuck.wait, daemon=True).start()     # never ends by itself
atexit.register(lambda: print("atexit ran", flush=True))
print("returned", first_frame.end_process(7, grace_s=0.2), flush=True)
"""


@pytest.mark.parametrize("on_terminal", [True, False])
def test_end_process_leaves_no_thread_to_the_interpreters_finalization(tmp_path, on_terminal):
    """A thread still alive after the grace: on a terminal the process ends at once with the
    exit code, after the atexit handlers (never reaching finalization, where glibc aborted an
    unwind once in 50 starts); off a terminal (a test calling it in-process) it returns."""
    import subprocess

    if on_terminal:
        proc, master = pty_helpers.spawn_python(["-c", END_PROCESS_CHILD])
        try:
            out = pty_helpers.drain(proc, master, 60)
        finally:
            pty_helpers.close(proc, master)
        assert proc.returncode == 7, out
        assert b"atexit ran" in out and b"returned" not in out, out
    else:
        r = subprocess.run([sys.executable, "-c", END_PROCESS_CHILD], capture_output=True,
                           text=True, timeout=60, check=False)
        assert r.returncode == 0 and "returned 7" in r.stdout, r


def test_end_process_does_not_wait_for_a_thread_that_never_ends(monkeypatch) -> None:
    """The trial: ``q`` took 2-3 s, on any profile. The exit waited its whole grace for the
    hang-up watch (blocked in poll(2) for the process's life) and for each source's idle read
    thread. A thread marked ``never_ends`` is not waited for; a retired source's idle thread
    ends at once (:meth:`~seat_console.snapshot.poll.Poller.retire`)."""
    import threading
    import time

    from seat_console.snapshot.poll import Poller
    from seat_console.tui import first_frame as ff

    stuck = threading.Event()
    t = threading.Thread(target=stuck.wait, daemon=True)
    t.never_ends = True   # type: ignore[attr-defined]
    t.start()
    p = Poller("seat-console:test")
    ran = threading.Event()
    p.submit(ran.set)
    assert ran.wait(30)
    worker = next(w for w in threading.enumerate() if w.name == "seat-console:test")
    p.retire()
    worker.join(30)
    assert not worker.is_alive()            # retired: the idle thread ended
    # only this thread and the one that never ends (pytest's own threads aside)
    monkeypatch.setattr(threading, "enumerate", lambda: [threading.current_thread(), t])
    t0 = time.monotonic()
    assert ff.end_process(3, grace_s=30.0) == 3   # not a terminal here: it returns
    monkeypatch.undo()
    assert time.monotonic() - t0 < 10, "waited for a thread marked never_ends"
    stuck.set()
    again = threading.Event()
    p.submit(again.set)                     # a submit after retire starts a new thread
    assert again.wait(30)
    p.retire()
