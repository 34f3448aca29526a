#!/usr/bin/env python3
"""Diagnose what an idle console writes: run it in a 120x40 pty for ARGV[1] seconds and print
each write after ARGV[2] seconds (time, bytes, the text with escape sequences shown as |)."""
import os, pty, sys, time, struct, fcntl, termios, subprocess, re, select
master, slave = os.openpty()
fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 120, 0, 0))
env = {**os.environ, "TERM": "xterm-256color"}
p = subprocess.Popen([sys.executable, "-m", "seat_console", "--interval", "1"], stdin=slave, stdout=slave, stderr=slave, env=env, cwd=__import__("pathlib").Path(__file__).resolve().parents[1], start_new_session=True)
os.close(slave)
t0 = time.monotonic(); chunks = []
while time.monotonic() - t0 < float(sys.argv[1]):
    r, _, _ = select.select([master], [], [], 0.2)
    if r:
        d = os.read(master, 65536); chunks.append((time.monotonic() - t0, d))
p.terminate(); p.wait()
ANSI = re.compile(rb"\x1b(?:\[[0-9;?<>=]*[ -/]*[@-~]|\][^\x07\x1b]*(?:\x07|\x1b\\)|[()][0-9A-Za-z]|[=>78cDEHMNOZ])")
for t, d in chunks:
    if t > float(sys.argv[2]):
        print(f"{t:6.2f} {len(d):6d} {ANSI.sub(b'|', d)[:300]!r}")
