"""One command in a pseudo-terminal for the benchmarks: started in a session of its own, its
output drained (and counted) by a thread, taken down with its process group.

Used by ``bench_idle_cpu.py``, ``bench_vs_nvitop.py`` and ``rss_breakdown.py``::

    with PtyRun(["python3", "-m", "seat_console"], cols=120, rows=40) as run:
        time.sleep(5)
        print(run.bytes, "B written to the terminal so far")

Standard library only (the benchmarks that need psutil build ``psutil.Process(run.pid)``).
"""

from __future__ import annotations

import fcntl
import os
import signal
import struct
import subprocess
import termios
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import Self

ROOT = Path(__file__).resolve().parents[1]


class PtyRun:
    """``argv`` run in a ``cols``×``rows`` pty (``TIOCSWINSZ``; ``TERM=xterm-256color`` and
    ``COLUMNS``/``LINES`` to match), cwd the repository root, ``start_new_session``.

    ``env``: added to this process's environment; a ``None`` value removes that name (e.g.
    ``{"NO_COLOR": None}``). ``on_chunk(chunk, t)``: called from the drain thread with each
    chunk read and ``t``, seconds since just before ``exec``. ``bytes``: bytes read so far.
    :meth:`close` (also on leaving a ``with``) stops the drain, sends the process group
    SIGTERM, waits 10 s, then SIGKILLs it, and closes the pty. Raises ``OSError`` when the
    command cannot be started (nothing is left open then)."""

    def __init__(self, argv: Sequence[str], *, cols: int = 120, rows: int = 40,
                 env: Mapping[str, str | None] | None = None,
                 on_chunk: Callable[[bytes, float], None] | None = None) -> None:
        full_env = {**os.environ, "TERM": "xterm-256color", "COLUMNS": str(cols),
                    "LINES": str(rows)}
        for k, v in (env or {}).items():
            if v is None:
                full_env.pop(k, None)
            else:
                full_env[k] = v
        self.bytes = 0
        self._on_chunk = on_chunk
        self._stop = threading.Event()
        self._master, slave = os.openpty()
        try:
            fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
            self.t_exec = time.monotonic()
            self.child = subprocess.Popen(list(argv), stdin=slave, stdout=slave, stderr=slave,
                                          env=full_env, cwd=ROOT, start_new_session=True)
        except BaseException:
            os.close(self._master)
            raise
        finally:
            os.close(slave)
        self.pid = self.child.pid
        threading.Thread(target=self._drain, daemon=True).start()

    def _drain(self) -> None:
        while not self._stop.is_set():
            try:
                chunk = os.read(self._master, 65536)
            except OSError:
                return
            if not chunk:
                return
            self.bytes += len(chunk)
            if self._on_chunk is not None:
                self._on_chunk(chunk, time.monotonic() - self.t_exec)

    def close(self) -> None:
        """Stop draining; SIGTERM the process group, SIGKILL it after 10 s; close the pty.
        A second call does nothing."""
        if self._stop.is_set():
            return
        self._stop.set()
        try:
            os.killpg(self.pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
        try:
            self.child.wait(10)
        except subprocess.TimeoutExpired:
            try:
                os.killpg(self.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self.child.wait()
        os.close(self._master)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, typ: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()
