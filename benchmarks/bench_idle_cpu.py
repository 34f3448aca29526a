#!/usr/bin/env python3
"""The console's CPU use while idle at 1 Hz: CPU seconds per wall second over a window.

Modes (``--mode``):

* ``pty`` (default): the real ``python -m seat_console --interval 1`` in a pseudo-terminal of
  120×40 (what an engineer runs), its output drained and counted; CPU time of that process (all
  threads) read with psutil before and after the window.
* ``headless``: :class:`seat_console.tui.app.SeatConsoleApp` in this process under Textual's
  ``App.run_test`` (no terminal writes); CPU time of this process.
* ``sampler``: only the GPU source's ``read()`` once a second (no UI) — the floor.

A warm-up (default 5 s, and until the GPU panel has its first reading in ``headless`` mode)
precedes the window (default 60 s). Usage::

    python benchmarks/bench_idle_cpu.py --mode pty --seconds 60 --json out.json

Reports % of one core, RSS, polls made (headless) and terminal bytes per second (pty). Not a
test: nothing is asserted.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))


def machine() -> dict:
    """Host, CPU model, cores, Python, and the GPUs NVML sees (names), for the report."""
    from bench_sampler import cpu_model

    from seat_console.sources.gpu import GpuSampler, GpuSnapshot
    from seat_console.node.nvml import Nvml

    nv = Nvml()
    snap = GpuSampler(nv).sample()
    nv.close()
    gpus = [c.name for c in snap.cards] if isinstance(snap, GpuSnapshot) else str(snap)
    return {"host": platform.node(), "cpu": cpu_model(), "cores": os.cpu_count(),
            "python": platform.python_version(), "gpus": gpus,
            "driver": getattr(snap, "driver_version", None)}


def _cpu_s(proc: psutil.Process) -> float:
    t = proc.cpu_times()
    return t.user + t.system


def run_pty(seconds: float, warmup: float, cols: int, rows: int) -> dict:
    """Start the console in a pty, drain it, measure its CPU over ``seconds``."""
    from ptyrun import PtyRun

    with PtyRun([sys.executable, "-m", "seat_console", "--interval", "1"],
                cols=cols, rows=rows) as run:
        proc = psutil.Process(run.pid)
        time.sleep(warmup)
        if run.child.poll() is not None:
            raise SystemExit(f"the console exited during warm-up (rc {run.child.returncode})")
        c0, b0, t0 = _cpu_s(proc), run.bytes, time.monotonic()
        time.sleep(seconds)
        c1, b1, t1 = _cpu_s(proc), run.bytes, time.monotonic()
        rss = proc.memory_info().rss
        threads = proc.num_threads()
    wall = t1 - t0
    return {"cpu_s": c1 - c0, "wall_s": wall, "cpu_pct_of_one_core": 100 * (c1 - c0) / wall,
            "rss_mib": rss / 2**20, "threads": threads,
            "tty_bytes_per_s": (b1 - b0) / wall}


def run_headless(seconds: float, warmup: float, cols: int, rows: int) -> dict:
    """Run the app under ``run_test``; measure this process's CPU over ``seconds``."""
    from seat_console.tui.app import SeatConsoleApp
    from seat_console.core.profile import load_profile

    app = SeatConsoleApp(load_profile(), interval=1.0, watch_terminal=False)
    me = psutil.Process()
    out: dict = {}

    async def body() -> None:
        async with app.run_test(size=(cols, rows)) as pilot:
            deadline = time.monotonic() + warmup + 30
            states = getattr(app, "_states", {})
            while time.monotonic() < deadline:
                await pilot.pause(0.1)
                gpu = states.get("gpus")
                if gpu is None or gpu.polls >= 1:
                    break
            await asyncio.sleep(warmup)
            polls0 = sum(s.polls for s in states.values())
            c0, t0 = _cpu_s(me), time.monotonic()
            await asyncio.sleep(seconds)
            c1, t1 = _cpu_s(me), time.monotonic()
            polls1 = sum(s.polls for s in states.values())
            out.update(cpu_s=c1 - c0, wall_s=t1 - t0,
                       cpu_pct_of_one_core=100 * (c1 - c0) / (t1 - t0),
                       rss_mib=me.memory_info().rss / 2**20, threads=me.num_threads(),
                       polls=polls1 - polls0, sources=sorted(states))
        app.close_sources()

    asyncio.run(body())
    return out


def run_sampler(seconds: float, warmup: float) -> dict:
    """GPU source ``read()`` at 1 Hz, no UI; this process's CPU over ``seconds``."""
    from seat_console.sources.gpu import make_source
    from seat_console.core.profile import load_profile

    source = make_source(load_profile())
    me = psutil.Process()
    source.read()
    time.sleep(warmup)
    c0, t0 = _cpu_s(me), time.monotonic()
    n = 0
    next_at = t0
    while time.monotonic() - t0 < seconds:
        source.read()
        n += 1
        next_at += 1.0
        time.sleep(max(0.0, next_at - time.monotonic()))
    c1, t1 = _cpu_s(me), time.monotonic()
    source.close()
    return {"cpu_s": c1 - c0, "wall_s": t1 - t0, "cpu_pct_of_one_core": 100 * (c1 - c0) / (t1 - t0),
            "reads": n, "rss_mib": me.memory_info().rss / 2**20}


def main(argv: list[str] | None = None) -> int:
    """Run one mode and print/write the result."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--mode", choices=["pty", "headless", "sampler"], default="pty")
    ap.add_argument("--seconds", type=float, default=60.0)
    ap.add_argument("--warmup", type=float, default=5.0)
    ap.add_argument("--size", default="120x40", help="terminal COLSxROWS")
    ap.add_argument("--json", metavar="FILE")
    args = ap.parse_args(argv)
    cols, rows = (int(x) for x in args.size.split("x"))
    if args.mode == "pty":
        res = run_pty(args.seconds, args.warmup, cols, rows)
    elif args.mode == "headless":
        res = run_headless(args.seconds, args.warmup, cols, rows)
    else:
        res = run_sampler(args.seconds, args.warmup)
    result = {"benchmark": f"idle CPU at 1 Hz ({args.mode})",
              "date_utc": datetime.now(UTC).isoformat(timespec="seconds"),
              "command": " ".join([Path(sys.executable).name, *sys.argv]),
              "machine": machine(), **res}
    print(f"{args.mode}: {res['cpu_pct_of_one_core']:.2f} % of one core over "
          f"{res['wall_s']:.1f} s ({res['cpu_s']:.2f} CPU s)"
          + (f", {res['tty_bytes_per_s']:.0f} B/s to the terminal" if "tty_bytes_per_s" in res
             else "")
          + (f", {res['polls']} polls" if "polls" in res else ""))
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
