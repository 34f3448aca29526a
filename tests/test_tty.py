"""The console in a real pseudo-terminal (issue 11): with the quiet input driver, keys (a lone
Escape included) arrive at once and ``q`` exits at once; the idle terminal gets no writes.

Bounded: each step waits at most a few seconds for the text it expects."""

from __future__ import annotations

import fcntl
import os
import re
import select
import signal
import struct
import subprocess
import sys
import termios
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
ANSI = re.compile(rb"\x1b(?:\[[0-9;?<>=]*[ -/]*[@-~]|\][^\x07\x1b]*(?:\x07|\x1b\\)|[()][0-9A-Za-z]|[=>78cDEHMNOZ])")


class Tty:
    def __init__(self, cols: int = 100, rows: int = 30) -> None:
        self.master, slave = os.openpty()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
        env = {**os.environ, "TERM": "xterm-256color"}
        env.pop("NO_COLOR", None)
        self.proc = subprocess.Popen([sys.executable, "-m", "seat_console", "--interval", "1"],
                                     stdin=slave, stdout=slave, stderr=slave, env=env,
                                     cwd=ROOT, start_new_session=True)
        os.close(slave)
        self.text = ""

    def read_for(self, seconds: float) -> int:
        """Read output for ``seconds``; returns the bytes read."""
        end, n = time.monotonic() + seconds, 0
        while time.monotonic() < end:
            r, _, _ = select.select([self.master], [], [], max(0.0, end - time.monotonic()))
            if not r:
                break
            try:
                data = os.read(self.master, 65536)
            except OSError:
                break
            n += len(data)
            self.text += ANSI.sub(b"", data).decode("utf-8", "replace")
        return n

    def expect(self, pattern: str, within: float) -> float:
        """Wait until ``pattern`` appears in the output; returns the seconds it took."""
        t0 = time.monotonic()
        start = len(self.text)
        while time.monotonic() - t0 < within:
            self.read_for(0.05)
            if re.search(pattern, self.text[start:]):
                return time.monotonic() - t0
        raise AssertionError(f"{pattern!r} not seen within {within} s; got: "
                             f"{self.text[start:][-600:]!r}")

    def send(self, keys: str) -> None:
        os.write(self.master, keys.encode())

    def close(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(10)
        os.close(self.master)


@pytest.fixture
def tty():
    t = Tty()
    yield t
    t.close()


def test_keys_escape_and_quit_are_prompt_and_an_idle_screen_is_quiet(tty) -> None:
    tty.expect(r"node \S+ · TP", within=30)
    tty.read_for(4.0)              # sources come up, fail, back off
    time.sleep(3.0)                # nobody types: the input thread is in its long wait
    tty.send("?")
    tty.expect(r"Close: Esc", within=3)
    tty.send("\x1b")               # a lone Escape must close help without waiting for more
    time.sleep(0.4)
    tty.send("p")                  # only reaches the app if help is closed
    assert tty.expect(r"PAUSED", within=2) < 2
    tty.send("q")
    t0 = time.monotonic()
    tty.read_for(3.0)
    tty.proc.wait(5)
    assert tty.proc.returncode == 0 and time.monotonic() - t0 < 5
