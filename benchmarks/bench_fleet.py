#!/usr/bin/env python3
"""The fleet screen at 1,000 seats on a real Prometheus: refresh → drawn rows, queries per
refresh, and idle CPU at a 5 s refresh beside the single-node console in the same run.

Starts ``scripts/fleet_sim.py`` (``--seats``, default 1,000; 5 stale, vanishing 30 s after
start) and Debian's
``/usr/bin/prometheus`` scraping it every ``--scrape`` seconds (own config and TSDB in a temp
dir, free loopback ports: ``tests/prom_fixtures.py``), then:

1. **refresh → drawn**: :class:`seat_console.tui.fleet.FleetApp` in this process under
   Textual's ``run_test`` (200×60), refreshing every 5 s; for each refresh, the time from its
   start (the queries sent) to the frame after the rows were applied to the table
   (``call_after_refresh``), ``--refreshes`` of them; the first (cold: empty table) is
   reported apart, and split into the refresh's own time (queries answered by Prometheus,
   rows built) and the table update + frame. Queries per refresh: counted by Prometheus itself
   (``prometheus_http_requests_total{handler="/api/v1/query"}``) over the run ÷ refreshes.
2. **idle CPU**: ``seat-console fleet --interval 5`` and the single-node console
   (``seat-console --interval 1``, the embedded default profile) each in a 120×40 pty, started
   together; CPU seconds of each process over the same ``--seconds`` window after a warm-up.

Usage::

    python benchmarks/bench_fleet.py --json /tmp/bench_fleet.json

Not a test: nothing is asserted; the machine's load is printed with the result (on the team's
2-core VM other work runs at the same time: the figures are noisy).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(Path(__file__).resolve().parent))


def _cpu_s(proc: psutil.Process) -> float:
    t = proc.cpu_times()
    return t.user + t.system


def drawn(url: str, scrape_s: float, refreshes: int, prom) -> dict:  # noqa: ANN001
    """Phase 1: refresh → drawn timings in a headless FleetApp (200×60)."""
    from seat_console.fleet.promapi import PromClient
    from seat_console.fleet.rows import Fleet
    from seat_console.tui.fleet import FleetApp

    fleet = Fleet(PromClient(url, timeout_s=30), scrape_interval_s=scrape_s)
    app = FleetApp(fleet, interval_s=5.0)
    out: dict = {}

    async def body() -> None:
        q0 = prom.query_requests()
        async with app.run_test(size=(200, 60)) as pilot:
            deadline = time.monotonic() + 60 + refreshes * 15
            while len(app.timings) < refreshes + 1 and time.monotonic() < deadline:
                await pilot.pause(0.2)
            out["rows"] = len(app._order)
            out["states"] = {s: sum(1 for r in app.reading.rows if r.state == s)
                             for s in sorted({r.state for r in app.reading.rows})}
        n = app.refreshes
        out["refreshes"] = n
        out["queries_per_refresh_server"] = (prom.query_requests() - q0) / max(1, n)
        out["queries_per_refresh_client"] = app.reading.queries
        t, q = app.timings, app.query_times
        out["first_refresh_to_drawn_s"] = round(t[0], 3) if t else None
        warm, wq = t[1:], q[1:len(t)]
        if warm:
            out["refresh_to_drawn_s"] = {
                "n": len(warm), "median": round(statistics.median(warm), 3),
                "max": round(max(warm), 3), "min": round(min(warm), 3)}
            out["of_which_queries_and_rows_s_median"] = round(statistics.median(wq), 3)
            out["of_which_table_and_frame_s_median"] = round(statistics.median(
                [a - b for a, b in zip(warm, wq, strict=False)]), 3)

    asyncio.run(body())
    fleet.prom.close()
    return out


def idle(url: str, scrape_s: float, seconds: float, warmup: float) -> dict:
    """Phase 2: idle CPU of the fleet screen (5 s) beside the single-node console (1 s)."""
    from ptyrun import PtyRun

    from seat_console.core.profile import default_profile_text

    prof = Path(tempfile.mkdtemp(prefix="bench-fleet-")) / "profile.toml"
    prof.write_text(default_profile_text() + f"\n[fleet]\nprometheus_url = \"{url}\"\n"
                    f"scrape_interval_s = {scrape_s:g}\n")
    env = {"SEAT_CONSOLE_PROFILE": None}
    fleet_cmd = [sys.executable, "-m", "seat_console", "--profile", str(prof), "fleet",
                 "--interval", "5", "--alertmanager", "none"]
    single_cmd = [sys.executable, "-m", "seat_console", "--interval", "1"]
    with PtyRun(fleet_cmd, cols=120, rows=40, env=env) as f, \
            PtyRun(single_cmd, cols=120, rows=40, env=env) as s:
        procs = {"fleet": psutil.Process(f.pid), "single_node": psutil.Process(s.pid)}
        time.sleep(warmup)
        for name, run in (("fleet", f), ("single_node", s)):
            if run.child.poll() is not None:
                raise SystemExit(f"{name} exited during warm-up (rc {run.child.returncode})")
        c0 = {k: _cpu_s(p) for k, p in procs.items()}
        t0 = time.monotonic()
        time.sleep(seconds)
        wall = time.monotonic() - t0
        c1 = {k: _cpu_s(p) for k, p in procs.items()}
        rss = {k: p.memory_info().rss / 2**20 for k, p in procs.items()}
    pct = {k: 100 * (c1[k] - c0[k]) / wall for k in procs}
    return {"window_s": round(wall, 1), "cpu_pct_of_one_core": {k: round(v, 2)
                                                                for k, v in pct.items()},
            "ratio_fleet_to_single_node": round(pct["fleet"] / pct["single_node"], 2)
            if pct["single_node"] > 0 else None,
            "rss_mib": {k: round(v, 1) for k, v in rss.items()}}


def main(argv: list[str] | None = None) -> int:
    """Run both phases; print (and write ``--json``) the result."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seats", type=int, default=1000)
    ap.add_argument("--scrape", type=float, default=5.0, help="Prometheus scrape interval (s)")
    ap.add_argument("--refreshes", type=int, default=8)
    ap.add_argument("--seconds", type=float, default=60.0, help="idle CPU window (s)")
    ap.add_argument("--warmup", type=float, default=15.0)
    ap.add_argument("--json", metavar="FILE")
    a = ap.parse_args(argv)
    from prom_fixtures import start_fleet

    tmp = Path(tempfile.mkdtemp(prefix="bench-fleet-prom-"))
    load0 = os.getloadavg()
    prom = start_fleet(tmp, a.seats, stale=5, stale_after_s=30, scrape_interval_s=a.scrape,
                       timeout_s=300, min_seats=a.seats - 5)
    import subprocess

    commit = subprocess.run(["git", "-C", str(ROOT), "describe", "--always", "--dirty"],
                            capture_output=True, text=True, check=False).stdout.strip() or None
    try:
        result = {"seats": a.seats, "scrape_interval_s": a.scrape, "commit": commit,
                  "cores": os.cpu_count(), "loadavg_before": load0,
                  "drawn": drawn(prom.url, a.scrape, a.refreshes, prom),
                  "idle": idle(prom.url, a.scrape, a.seconds, a.warmup),
                  "loadavg_after": os.getloadavg(),
                  "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    finally:
        prom.stop()
    text = json.dumps(result, indent=1)
    print(text)
    if a.json:
        Path(a.json).write_text(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
