#!/usr/bin/env python3
"""What each import adds to the console's start-up time and resident memory, in one process.

Imports the modules named on the command line (default :data:`DEFAULT_MODULES`, the order the
console meets them) one after the other and prints, per module, the wall time of its import and
the growth of ``VmRSS`` (``/proc/self/status``, KiB → MiB, 2^20 B) — what *that* import added
on top of everything imported before it. Then optionally loads the profile (``--profile``:
``seat_console.core.profile.load_profile``; ``default`` = the embedded one). Linux only. Not a test.

Usage::

    python3 benchmarks/import_cost.py [--json FILE] [--profile default] [MODULE ...]
"""

from __future__ import annotations

import argparse
import importlib
import json
import sys
import time

DEFAULT_MODULES = [
    "pydantic", "platformdirs", "seat_console.core.profile", "rich.console", "textual.app",
    "textual.widgets", "psutil", "pynvml", "seat_console.sources", "seat_console.sources.gpu",
    "seat_console.widgets.gpu", "seat_console.widgets.status", "seat_console.widgets.services",
    "seat_console.widgets.fit", "seat_console.actions.runbook", "seat_console.tui.app",
    "seat_console.fit.budget", "seat_console.snapshot.fit_reading", "httpx", "prometheus_client",
    "seat_console.sources.engine", "seat_console.sources.silences", "docker",
    "seat_console.sources.containers", "seat_console.sources.timers", "sqlite3",
    "seat_console.actions.journal", "seat_console.actions.actionlog",
    "seat_console.sources.seat", "seat_console.sources.checkpoint",
]
"""The console's imports, roughly in the order the TUI meets them (first frame, then after)."""


def vmrss_kib() -> int:
    """Resident set size of this process in KiB (``VmRSS`` of ``/proc/self/status``)."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise RuntimeError("/proc/self/status has no VmRSS line")


def measure(modules: list[str], profile: str | None = None) -> dict:
    """Import ``modules`` in order; return the baseline RSS and per-module ms / MiB added."""
    rows = []
    base = vmrss_kib()
    for name in modules:
        before, t0 = vmrss_kib(), time.perf_counter()
        try:
            importlib.import_module(name)
            err = None
        except Exception as exc:  # noqa: BLE001 - report and go on
            err = f"{type(exc).__name__}: {exc}"
        rows.append({"module": name, "ms": round(1000 * (time.perf_counter() - t0), 1),
                     "rss_added_mib": round((vmrss_kib() - before) / 1024, 2),
                     **({"error": err} if err else {})})
    if profile is not None:
        from seat_console.core.profile import load_profile

        before, t0 = vmrss_kib(), time.perf_counter()
        load_profile(None if profile == "default" else profile)
        rows.append({"module": f"load_profile({profile})",
                     "ms": round(1000 * (time.perf_counter() - t0), 1),
                     "rss_added_mib": round((vmrss_kib() - before) / 1024, 2)})
    return {"python": sys.version.split()[0], "rss_at_start_mib": round(base / 1024, 2),
            "rss_at_end_mib": round(vmrss_kib() / 1024, 2), "rows": rows}


def main(argv: list[str] | None = None) -> int:
    """Print the table (and write ``--json``)."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("modules", nargs="*")
    ap.add_argument("--profile", metavar="FILE|default")
    ap.add_argument("--json", metavar="FILE")
    args = ap.parse_args(argv)
    res = measure(args.modules or DEFAULT_MODULES, args.profile)
    print(f"start: {res['rss_at_start_mib']:.1f} MiB RSS (Python {res['python']})")
    print(f"{'import':44}{'ms':>8}{'+MiB':>8}")
    for r in res["rows"]:
        print(f"{r['module']:44}{r['ms']:8.1f}{r['rss_added_mib']:8.2f}"
              + (f"  {r['error']}" if "error" in r else ""))
    print(f"end: {res['rss_at_end_mib']:.1f} MiB RSS")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(res, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
