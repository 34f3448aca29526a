#!/usr/bin/env python3
"""Where the console's idle CPU goes, per source: each source of the TUI (built as the TUI
builds it: by the source table, with one shared node context) read ``--reads`` times at
``--interval`` seconds, in this process, the CPU of each read taken with
``time.thread_time()`` (this thread's user + system seconds, so other threads and other
processes do not count). A source's share of the console's idle cost at 1 Hz is its CPU per
read × reads per second: every source is read each ``--interval`` here, and the report also
gives what the TUI spends on it a second at that interval, its reads being no more often than
its table entry's ``min_interval_s`` (the code measured: run with ``PYTHONPATH`` = an older
tree to measure that). ``runbook`` is the TUI's runbook state read
(:func:`seat_console.actions.stages.read_runbook` with the hold leases, a fresh journal), which
is not a table source; its rate is ``RUNBOOK_MIN_INTERVAL_S``'s. Reads on change (docker's
events, a journal row) come on top, and only when something changed.

Usage::

    python benchmarks/source_cost.py --profile .lab/profile.toml --reads 30 --json out.json

Not a test: nothing is asserted.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


from pydantic import BaseModel  # noqa: E402


class _Done(BaseModel):
    """A finished runbook read (its state is not kept)."""


class _RunbookRead:
    """The TUI's runbook state read as a source (timed; its state is not kept)."""

    name = "runbook"

    def __init__(self, ctx) -> None:
        self.ctx = ctx

    def read(self):
        from seat_console.actions.journal import Journal
        from seat_console.actions.stages import read_runbook

        with Journal() as journal:
            read_runbook(self.ctx, journal, leases=True)
        return _Done()

    def close(self) -> None:
        pass


def main(argv: list[str] | None = None) -> int:
    """Read every source, print CPU per read (median, p90, ms) and write the JSON."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--profile", required=True)
    ap.add_argument("--reads", type=int, default=30)
    ap.add_argument("--interval", type=float, default=1.0)
    ap.add_argument("--json", metavar="FILE")
    args = ap.parse_args(argv)

    from seat_console.core.profile import load_profile
    from seat_console.node.context import NodeContext
    from seat_console.snapshot import table
    from seat_console.snapshot.live import LatestReadings
    from seat_console.snapshot.poll import is_good, read_guarded

    loaded = load_profile(args.profile)
    ctx = NodeContext(loaded)
    readings = LatestReadings()
    sources = {}
    for name in table.names_for("tui"):
        e = table.entry(name)
        extra = (readings,) if e.uses_readings else ()
        sources[name] = table.build(name, loaded, *extra, context=ctx)
    every = {n: max(args.interval, table.entry(n).min_interval_s) for n in sources}
    sources["runbook"] = _RunbookRead(ctx)
    try:
        from seat_console.tui.runbook_state import RUNBOOK_MIN_INTERVAL_S
    except ImportError:
        RUNBOOK_MIN_INTERVAL_S = args.interval
    every["runbook"] = max(args.interval, RUNBOOK_MIN_INTERVAL_S)
    cpu: dict[str, list[float]] = {n: [] for n in sources}
    wall: dict[str, list[float]] = {n: [] for n in sources}
    good: dict[str, int] = {n: 0 for n in sources}
    for i in range(args.reads + 1):
        t_next = time.monotonic() + args.interval
        for name, src in sources.items():
            c0, w0 = time.thread_time(), time.perf_counter()
            r = read_guarded(src)
            c1, w1 = time.thread_time(), time.perf_counter()
            if is_good(r):
                readings.put(name, r)
            if i:   # the first read builds clients: not counted
                cpu[name].append(c1 - c0)
                wall[name].append(w1 - w0)
                good[name] += is_good(r)
        time.sleep(max(0.0, t_next - time.monotonic()))
    for src in sources.values():
        src.close()
    ctx.close()
    res = {n: {"cpu_ms_median": 1e3 * statistics.median(cpu[n]),
               "cpu_ms_p90": 1e3 * sorted(cpu[n])[int(0.9 * (len(cpu[n]) - 1))],
               "wall_ms_median": 1e3 * statistics.median(wall[n]),
               "good_reads": good[n], "reads": len(cpu[n]),
               "tui_every_s": every[n],
               "tui_cpu_ms_per_s": 1e3 * statistics.median(cpu[n]) / every[n]} for n in sources}
    total = sum(r["cpu_ms_median"] for r in res.values())
    tui = sum(r["tui_cpu_ms_per_s"] for r in res.values())
    print(f"{'source':12}{'CPU ms/read':>12}{'p90':>8}{'wall ms':>9}{'good':>6}"
          f"{'TUI every':>10}{'TUI ms/s':>9}")
    for n, r in res.items():
        print(f"{n:12}{r['cpu_ms_median']:12.2f}{r['cpu_ms_p90']:8.2f}"
              f"{r['wall_ms_median']:9.1f}{r['good_reads']:>4}/{r['reads']}"
              f"{r['tui_every_s']:9.0f} s{r['tui_cpu_ms_per_s']:9.2f}")
    print(f"{'sum':12}{total:12.2f}  = {total / 10:.2f} % of a core at one read a second each;"
          f" the TUI's schedule: {tui:.2f} ms/s = {tui / 10:.2f} % of a core")
    if args.json:
        import os
        Path(args.json).write_text(json.dumps({
            "benchmark": "CPU per source read (thread_time), lab",
            "date_utc": datetime.now(UTC).isoformat(timespec="seconds"),
            "load1": os.getloadavg()[0], "profile": args.profile, "reads": args.reads,
            "sources": res}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
