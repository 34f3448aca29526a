#!/usr/bin/env python3
"""Where the idle console's CPU goes, per thread and per function: the console on a profile in
a 120×40 pty, after a warm-up, sampled by ``py-spy record --gil --threads`` (only the thread
holding the GIL is sampled, so samples count Python CPU, not threads waiting in a socket read
— which plain sampling counts as busy). The process's CPU (user + system, psutil) over the
same window is printed beside, so a thread's share converts to % of a core.

Usage::

    python benchmarks/cpu_by_thread.py --profile .lab/profile.toml --seconds 30 --raw out.txt
    python benchmarks/cpu_by_thread.py --summarise out.txt     # an earlier raw file

``PYTHONPATH`` is passed on (an older tree measures the code before a change). Needs
``py-spy`` next to this Python or on ``PATH``. Not a test: nothing is asserted.
"""

from __future__ import annotations

import argparse
import collections
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))


def summarise(text: str, top: int = 40) -> str:
    """Collapsed stacks with a thread root (``py-spy --threads --format raw``) → per-thread
    shares and the ``top`` functions by inclusive share, as lines of text."""
    threads: collections.Counter = collections.Counter()
    incl: collections.Counter = collections.Counter()
    total = 0
    for line in text.splitlines():
        stack, _, n = line.rpartition(" ")
        if not n.isdigit():
            continue
        count = int(n)
        total += count
        frames = stack.split(";")
        threads[frames[0].split(": ", 1)[-1].strip()] += count
        for f in set(frames[1:]):
            incl[re.sub(r":\d+\)", ")", f)] += count
    out = [f"samples {total}"]
    out += [f"{100 * c / total:5.1f} %  {t}" for t, c in threads.most_common()]
    out.append("-- inclusive, all threads")
    out += [f"{100 * c / total:5.1f} %  {f}" for f, c in incl.most_common(top)]
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    """Record (or only summarise) and print the summary."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--profile")
    ap.add_argument("--seconds", type=int, default=30)
    ap.add_argument("--warmup", type=float, default=8.0)
    ap.add_argument("--rate", type=int, default=250)
    ap.add_argument("--raw", default="cpu_by_thread.txt")
    ap.add_argument("--summarise", metavar="RAW")
    args = ap.parse_args(argv)
    if args.summarise:
        print(summarise(Path(args.summarise).read_text()))
        return 0
    import psutil
    from bench_vs_nvitop import _cpu_s
    from ptyrun import PtyRun

    spy = shutil.which("py-spy", path=str(Path(sys.executable).parent)) or shutil.which("py-spy")
    if spy is None:
        print("py-spy is not installed", file=sys.stderr)
        return 1
    cmd = [sys.executable, "-m", "seat_console", "--profile", args.profile, "--interval", "1"]
    with PtyRun(cmd, cols=120, rows=40) as run:
        time.sleep(args.warmup)
        proc = psutil.Process(run.pid)
        c0, t0 = _cpu_s(proc), time.monotonic()
        r = subprocess.run([spy, "record", "--pid", str(run.pid), "-d", str(args.seconds),
                            "-r", str(args.rate), "--gil", "--threads", "--nonblocking",
                            "--format", "raw", "-o", args.raw], capture_output=True, text=True)
        c1, t1 = _cpu_s(proc), time.monotonic()
    if r.returncode != 0:
        print(f"py-spy rc {r.returncode}: {r.stderr[-800:]}", file=sys.stderr)
        return 1
    print(f"process CPU over the window: {100 * (c1 - c0) / (t1 - t0):.2f} % of one core")
    print(summarise(Path(args.raw).read_text()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
