#!/usr/bin/env python3
"""The UI thread's CPU from the TUI's construction to its full screen, headless, on recorded
readings: the share of start-up that is Textual's and the panels' own work (mounting,
styling, the first draw of every panel), without the sources' imports and I/O.

Each run builds the app of ``tests/screen_fixtures.seat_app`` (every panel of the main screen,
the action log included, over recorded inputs; the sources answer at once), runs it headless
at ``--size``, waits until every panel has had its first reading, lets the screen settle once,
and takes ``time.thread_time()`` (this thread's user + system seconds: the UI thread; the
sources' reads run in their own threads and do not count). Each run is a fresh process (the
imports are paid before the clock starts), ``--runs`` times; the median is printed. To
measure older code, run it with ``PYTHONPATH`` = a ``git archive`` of that code (a folder
holding ``seat_console/``), as ``bench_lab_idle.py --baseline-src`` does.

Usage::

    python benchmarks/ui_start_cpu.py --runs 5 [--json out.json]

Not a test: nothing is asserted (docs/benchmarks.md, issue 33).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


async def one_run(cols: int, rows: int) -> float:
    """UI-thread CPU seconds from the app's construction to every panel's first reading."""
    sys.path.insert(0, str(ROOT / "tests"))
    import screen_fixtures as F

    t0 = time.thread_time()
    app, _ = F.seat_app(with_actions=True)
    async with app.run_test(size=(cols, rows)) as pilot:
        while not all(st.polls for st in app.states.values()):
            await pilot.pause(0.005)
        await pilot.pause()
        return time.thread_time() - t0


def main(argv: list[str] | None = None) -> int:
    """Run ``--runs`` fresh processes (or, with ``--one``, measure once here)."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--size", default="120x40")
    ap.add_argument("--one", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--json", metavar="FILE")
    args = ap.parse_args(argv)
    cols, rows = (int(x) for x in args.size.lower().split("x"))
    if args.one:
        print(f"{asyncio.run(one_run(cols, rows)):.4f}")
        return 0
    ms = []
    for _ in range(args.runs):
        out = subprocess.run([sys.executable, __file__, "--one", "--size", args.size],
                             capture_output=True, text=True, check=True, cwd=ROOT)
        ms.append(1000 * float(out.stdout.strip().splitlines()[-1]))
    res = {"size": args.size, "ui_thread_cpu_ms": [round(m, 1) for m in ms],
           "median_ms": round(statistics.median(ms), 1)}
    print(json.dumps(res))
    if args.json:
        Path(args.json).write_text(json.dumps(res, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
