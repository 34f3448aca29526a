"""The console (or a Python child) in a pseudo-terminal, for the tests that need a real
terminal: start it, read until a text appears, drain until it exits, stop it.

The size is given through ``COLUMNS``/``LINES`` only (the pty keeps its 0×0 size, so the
program falls back to them). Every wait is bounded: a liveness bound, never a speed assert.
"""

from __future__ import annotations

import os
import pty
import select
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def spawn_python(args: Sequence[str], env_extra: Mapping[str, str] | None = None, *,
                 cols: int = 100, rows: int = 30) -> tuple[subprocess.Popen, int]:
    """Start ``python args…`` (this interpreter) on a new pty, in a session of its own, cwd the
    repository root, ``TERM=xterm-256color``, ``COLUMNS``/``LINES`` from ``cols``/``rows``,
    ``env_extra`` added, ``SEAT_CONSOLE_PROFILE``, ``NO_COLOR`` and ``SEAT_CONSOLE_FIRST_FRAME`` removed. Returns the process
    and the pty's master fd (the caller closes it: :func:`close` or :func:`stop`)."""
    master, slave = pty.openpty()
    env = {**os.environ, "TERM": "xterm-256color", "COLUMNS": str(cols), "LINES": str(rows),
           **(env_extra or {})}
    env.pop("SEAT_CONSOLE_PROFILE", None)
    env.pop("NO_COLOR", None)
    env.pop("SEAT_CONSOLE_FIRST_FRAME", None)
    proc = subprocess.Popen([sys.executable, *args], stdin=slave, stdout=slave, stderr=slave,
                            env=env, start_new_session=True, close_fds=True, cwd=ROOT)
    os.close(slave)
    return proc, master


def read_until(master: int, needle: bytes, limit_s: float = 60.0) -> bytes:
    """What the pty says until ``needle`` is in it, the pty is closed, or ``limit_s`` s
    passed (the caller asserts on the bytes returned)."""
    buf = b""
    deadline = time.monotonic() + limit_s
    while needle not in buf and time.monotonic() < deadline:
        ready, _, _ = select.select([master], [], [], 0.2)
        if ready:
            try:
                buf += os.read(master, 65536)
            except OSError:
                break
    return buf


def drain(proc: subprocess.Popen, master: int, limit_s: float = 30.0) -> bytes:
    """Read the pty until the process has exited (a full pty buffer would block its writes),
    at most ``limit_s`` s."""
    buf = b""
    deadline = time.monotonic() + limit_s
    while proc.poll() is None and time.monotonic() < deadline:
        ready, _, _ = select.select([master], [], [], 0.2)
        if ready:
            try:
                buf += os.read(master, 65536)
            except OSError:
                time.sleep(0.05)
    return buf


def reap(proc: subprocess.Popen) -> None:
    """Kill the process if it still runs; wait for it."""
    if proc.poll() is None:
        proc.kill()
    proc.wait()


def close(proc: subprocess.Popen, master: int) -> None:
    """:func:`reap` the process, then close the pty's master fd."""
    reap(proc)
    os.close(master)


def stop(proc: subprocess.Popen, master: int) -> None:
    """Quit the console as a user does (``q``, then :func:`drain` until it exits), then
    :func:`close` (a kill only if it did not exit)."""
    try:
        if proc.poll() is None:
            os.write(master, b"q")
            drain(proc, master)
    except OSError:
        pass
    finally:
        close(proc, master)
