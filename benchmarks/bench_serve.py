#!/usr/bin/env python3
"""The idle CPU of one ``seat-console serve`` viewer: the server plus that tab's console.

Starts ``python -m seat_console [--profile P] serve --port 0`` (``--interval 1``), then one
viewer: a websocket client that reads every frame as a browser would (the browser's own CPU is
the viewer's machine's, not the node's, and is not counted). After a warm-up, for each window
the CPU seconds (user + system, all threads, psutil) of the server and of the tab's console
process are read before and after; the report gives % of one core for each and together,
what the server sent per second, and their RSS. A baseline window with no viewer (the server
alone) comes first. Not a test: nothing is asserted.

Usage::

    SEAT_LAB_DIR=/work/lab python benchmarks/bench_serve.py --profile /work/lab/profile.toml \\
        --seconds 60 --windows 3 --json out.json

Without ``--profile`` the embedded default profile is served (on a machine without the
seat's components most sources fail and back off).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import signal
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

import aiohttp
import psutil


def cpu_s(pid: int) -> float:
    """CPU seconds (user + system) of ``pid`` so far."""
    t = psutil.Process(pid).cpu_times()
    return t.user + t.system


def rss_mib(pid: int) -> float:
    """Resident memory of ``pid`` in MiB (2^20 B)."""
    return psutil.Process(pid).memory_info().rss / 2**20


def start_server(profile: str | None, interval: float) -> tuple[subprocess.Popen, str]:
    """The server in a child process; returns it and its URL (from the ready line)."""
    argv = [sys.executable, "-m", "seat_console", "--interval", f"{interval:g}"]
    if profile:
        argv += ["--profile", profile]
    argv += ["serve", "--port", "0", "--max-viewers", "1"]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                            start_new_session=True)
    assert proc.stdout is not None
    for line in proc.stdout:
        if line.startswith("seat-console serve: http://"):
            return proc, line.split()[2]
    raise SystemExit(f"the server did not start (exit {proc.wait()})")


def viewer_pid(server_pid: int) -> int | None:
    """The tab's console: the server's child running ``-m seat_console --readonly``."""
    for k in psutil.Process(server_pid).children():
        if "--readonly" in k.cmdline():
            return k.pid
    return None


async def measure(url: str, server_pid: int, warmup_s: float, seconds: float,
                  windows: int) -> dict:
    """The baseline window (no viewer), then ``windows`` windows with one viewer."""
    out: dict = {"baseline": {}, "windows": []}
    c0, t0 = cpu_s(server_pid), time.monotonic()
    await asyncio.sleep(min(seconds, 20.0))
    out["baseline"] = {"server_pct": 100 * (cpu_s(server_pid) - c0) / (time.monotonic() - t0),
                       "server_rss_mib": rss_mib(server_pid)}
    received = {"bytes": 0}
    async with aiohttp.ClientSession() as session:
        ws = await session.ws_connect(url + "ws?width=160&height=50",
                                      headers={"Origin": url.rstrip("/")})

        async def drain() -> None:
            async for msg in ws:
                if msg.type == aiohttp.WSMsgType.BINARY:
                    received["bytes"] += len(msg.data)

        reader = asyncio.create_task(drain())
        await ws.send_str(json.dumps(["resize", {"width": 160, "height": 50}]))
        pid = None
        while pid is None:
            await asyncio.sleep(0.2)
            pid = viewer_pid(server_pid)
        await asyncio.sleep(warmup_s)
        for _ in range(windows):
            s0, a0, b0, t0 = cpu_s(server_pid), cpu_s(pid), received["bytes"], time.monotonic()
            await asyncio.sleep(seconds)
            wall = time.monotonic() - t0
            s, a = cpu_s(server_pid) - s0, cpu_s(pid) - a0
            out["windows"].append({
                "wall_s": wall, "server_pct": 100 * s / wall, "console_pct": 100 * a / wall,
                "total_pct": 100 * (s + a) / wall,
                "bytes_per_s": (received["bytes"] - b0) / wall,
                "server_rss_mib": rss_mib(server_pid), "console_rss_mib": rss_mib(pid),
                "console_threads": psutil.Process(pid).num_threads(),
            })
        reader.cancel()
        await ws.close()
    return out


def main() -> int:
    """Parse the arguments, run, print (and write ``--json``); returns 0."""
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--profile", help="profile to serve (default: the embedded one)")
    ap.add_argument("--interval", type=float, default=1.0, help="refresh interval, s")
    ap.add_argument("--warmup", type=float, default=10.0, help="seconds before the windows")
    ap.add_argument("--seconds", type=float, default=60.0, help="length of one window, s")
    ap.add_argument("--windows", type=int, default=3, help="windows with the viewer")
    ap.add_argument("--json", help="write the result here too")
    args = ap.parse_args()
    proc, url = start_server(args.profile, args.interval)
    try:
        result = asyncio.run(measure(url, proc.pid, args.warmup, args.seconds, args.windows))
    finally:
        os.kill(proc.pid, signal.SIGTERM)
        proc.wait(60)
    result.update({
        "when": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "host": platform.node(), "cores": os.cpu_count(),
        "load_1min": os.getloadavg()[0], "profile": args.profile or "embedded default",
        "interval_s": args.interval, "window_s": args.seconds,
    })
    print(json.dumps(result, indent=2))
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2) + "\n", "utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
