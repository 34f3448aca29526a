#!/usr/bin/env python3
"""The exporter's scrape time and idle CPU: the real ``seat-console exporter`` as a child.

1. Starts ``python -m seat_console exporter --profile PROFILE --listen 127.0.0.1:PORT`` with
   its default read intervals (or ``--interval``), waits until every source but ``gpus`` has a
   reading (warm-up).
2. Scrape time: ``--scrapes`` N back-to-back ``GET /metrics`` over HTTP (httpx, one keep-alive
   connection); median and p99 of the client-side wall time, and of the exporter's own
   ``seat_scrape_duration_seconds``.
3. Idle CPU: one scrape every ``--scrape-interval`` s (default 15, Prometheus' usual) for
   ``--seconds`` s; the exporter's CPU seconds (user + system, all threads, plus reaped
   children: systemctl over a local transport) per wall second, in % of one core.

4. ``--per-source N``: instead, each source's read function called N times in this process;
   CPU ms (this process and reaped children: the node transport's ``docker exec`` /
   ``systemctl`` processes) and wall ms per read.

Usage::

    python benchmarks/bench_exporter.py --profile .lab/profile.toml --seconds 120 --json out.json

Not a test: nothing is asserted. The machine may be loaded by other work: the report says what
else ran (load average before and after).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from datetime import UTC, datetime

import httpx
import psutil
from prometheus_client.parser import text_string_to_metric_families


def pct(xs: list[float], q: float) -> float:
    """The ``q`` quantile (0..1) of ``xs``, nearest rank."""
    s = sorted(xs)
    return s[min(len(s) - 1, max(0, int(round(q * len(s) + 0.5)) - 1))]


def scrape(client: httpx.Client, url: str) -> tuple[float, float | None, dict[str, float]]:
    """One scrape: (client wall s, the exporter's seat_scrape_duration_seconds, source ups)."""
    t0 = time.perf_counter()
    r = client.get(url)
    wall = time.perf_counter() - t0
    r.raise_for_status()
    own = None
    ups: dict[str, float] = {}
    for f in text_string_to_metric_families(r.text):
        for s in f.samples:
            if s.name == "seat_scrape_duration_seconds":
                own = s.value
            elif s.name == "seat_source_up":
                ups[s.labels["source"]] = s.value
    return wall, own, ups


def cpu_s(p: psutil.Process) -> float:
    """CPU seconds of ``p`` (all threads) and of its reaped children."""
    t = p.cpu_times()
    return t.user + t.system + t.children_user + t.children_system


def per_source(profile: str, n: int) -> dict[str, dict[str, float]]:
    """Each read the exporter makes, ``n`` times after one warm-up read: CPU and wall ms per
    read. Sources read together (``GROUP_READERS``: the node's timers and leases, one
    ``systemctl show``) are one entry, ``timers+lease``."""
    from seat_console.exporter.readers import GROUP_READERS, READERS
    from seat_console.core.profile import load_profile

    loaded = load_profile(profile)

    def cpu() -> float:
        t = os.times()
        return t.user + t.system + t.children_user + t.children_system

    grouped = {n for names in GROUP_READERS for n in names}
    makers = {"+".join(names): make for names, make in GROUP_READERS.items()}
    makers.update((k, m) for k, m in READERS.items() if k not in grouped)
    out = {}
    for name, make in makers.items():
        read, close = make(loaded)
        read()
        c0, w0 = cpu(), time.perf_counter()
        for _ in range(n):
            read()
        out[name] = {"cpu_ms": (cpu() - c0) / n * 1e3,
                     "wall_ms": (time.perf_counter() - w0) / n * 1e3}
        close()
    return out


def uptime() -> str:
    """``uptime``'s line (the load beside the figures), or why it could not be read."""
    try:
        return subprocess.run(["uptime"], capture_output=True, text=True, timeout=5,
                              check=False).stdout.strip()
    except (OSError, subprocess.SubprocessError) as exc:
        return f"uptime: {exc}"


def commit() -> str:
    """The checkout's commit (``git rev-parse --short HEAD``), ``+`` when the exporter's code
    (``console/exporter``, ``console/sources``, ``console/node``, ``actions``) differs from it."""
    here = os.path.dirname(os.path.abspath(__file__))
    try:
        head = subprocess.run(["git", "-C", here, "rev-parse", "--short", "HEAD"],
                              capture_output=True, text=True, timeout=10, check=False)
        dirty = subprocess.run(["git", "-C", here, "status", "--porcelain", "--",
                                "../console/exporter", "../console/sources", "../console/node",
                                "../actions"], capture_output=True, text=True, timeout=30,
                               check=False)
    except (OSError, subprocess.SubprocessError) as exc:
        return f"unknown ({exc})"
    return head.stdout.strip() + ("+" if dirty.stdout.strip() else "")


def code_under_test() -> dict[str, str]:
    """Which ``seat_console`` the exporter imports (this checkout, or an older tree put first on
    ``PYTHONPATH`` for an A/B) and how its docker-exec transport reaches the engine: ``api``
    (the Engine API for commands without stdin, since 46b8bb4) or ``cli`` (a ``docker exec``
    process per command)."""
    import seat_console
    from seat_console.node import transport

    return {"seat_console_dir": os.path.dirname(os.path.abspath(seat_console.__file__)),
            "docker_exec_via": "api" if hasattr(transport, "EngineExec") else "cli"}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--profile", required=True)
    ap.add_argument("--port", type=int, default=19479)
    ap.add_argument("--interval", type=float, default=None,
                    help="the exporter's --interval (default: its per-source defaults)")
    ap.add_argument("--scrapes", type=int, default=300)
    ap.add_argument("--scrape-interval", type=float, default=15.0)
    ap.add_argument("--seconds", type=float, default=120.0)
    ap.add_argument("--warmup", type=float, default=45.0)
    ap.add_argument("--json", metavar="FILE")
    ap.add_argument("--per-source", type=int, metavar="N", default=0)
    a = ap.parse_args()
    if a.per_source:
        load0, up0 = os.getloadavg(), uptime()
        res = per_source(a.profile, a.per_source)
        text = json.dumps({"at": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
                           "host": platform.node(), "cores": os.cpu_count(),
                           "commit": commit(), **code_under_test(),
                           "reads_per_source": a.per_source, "load_avg_before": load0,
                           "uptime_before": up0, "load_avg": os.getloadavg(),
                           "uptime_after": uptime(), "per_source": res}, indent=2)
        print(text)
        if a.json:
            with open(a.json, "w") as fh:
                fh.write(text + "\n")
        return 0

    argv = [sys.executable, "-m", "seat_console", "exporter", "--profile", a.profile,
            "--listen", f"127.0.0.1:{a.port}"]
    if a.interval is not None:
        argv += ["--interval", str(a.interval)]
    load0, up0 = os.getloadavg(), uptime()
    child = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    url = f"http://127.0.0.1:{a.port}/metrics"
    try:
        proc = psutil.Process(child.pid)
        with httpx.Client(timeout=10, trust_env=False) as client:
            deadline = time.monotonic() + a.warmup
            ups: dict[str, float] = {}
            while time.monotonic() < deadline:
                try:
                    _, _, ups = scrape(client, url)
                    if all(v == 1.0 for k, v in ups.items() if k != "gpus") and ups:
                        break
                except httpx.HTTPError:
                    pass
                time.sleep(0.2)
            walls, owns = [], []
            for _ in range(a.scrapes):
                w, o, _u = scrape(client, url)
                walls.append(w)
                if o is not None:
                    owns.append(o)
            time.sleep(2)
            c0, t0 = cpu_s(proc), time.monotonic()
            n = 0
            while time.monotonic() - t0 < a.seconds:
                scrape(client, url)
                n += 1
                time.sleep(max(0.0, min(a.scrape_interval, a.seconds - (time.monotonic() - t0))))
            c1, t1 = cpu_s(proc), time.monotonic()
            rss = proc.memory_info().rss
    finally:
        child.terminate()
        try:
            child.wait(10)
        except subprocess.TimeoutExpired:
            child.kill()
    out = {
        "at": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "host": platform.node(), "cores": os.cpu_count(), "python": platform.python_version(),
        "commit": commit(), **code_under_test(),
        "load_avg_before": load0, "load_avg_after": os.getloadavg(),
        "uptime_before": up0, "uptime_after": uptime(),
        "profile": a.profile, "exporter_interval": a.interval or "defaults",
        "sources_up_at_start": ups,
        "scrapes": len(walls),
        "scrape_wall_ms": {"median": statistics.median(walls) * 1e3,
                           "p99": pct(walls, 0.99) * 1e3, "max": max(walls) * 1e3},
        "scrape_own_ms": {"median": statistics.median(owns) * 1e3,
                          "p99": pct(owns, 0.99) * 1e3} if owns else None,
        "idle_window_s": t1 - t0, "idle_scrapes": n, "scrape_interval_s": a.scrape_interval,
        "idle_cpu_pct_of_core": (c1 - c0) / (t1 - t0) * 100,
        "rss_mib": rss / 2**20,
    }
    text = json.dumps(out, indent=2)
    print(text)
    if a.json:
        with open(a.json, "w") as fh:
            fh.write(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
