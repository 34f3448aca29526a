#!/usr/bin/env python3
"""Where an idle console's resident memory is: run a command in a 120×40 pty for ``--seconds``
(default 10), then sum ``Rss`` of ``/proc/PID/smaps`` by mapping (anonymous, heap, each shared
library; a site-packages library by its distribution's folder), with the thread count
(``/proc/PID/status``). MiB = 2^20 B. Not a test.

Usage::

    python3 benchmarks/rss_breakdown.py [--seconds 10] [--json FILE] -- python3 -m seat_console
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import re
import sys
import time
from pathlib import Path

from ptyrun import PtyRun


def breakdown(pid: int) -> dict:
    """``{"total_mib", "threads", "by_mapping": [(name, MiB), …]}`` of process ``pid``."""
    agg: collections.Counter = collections.Counter()
    cur = "[anon]"
    with open(f"/proc/{pid}/smaps") as f:
        for line in f:
            if re.match(r"^[0-9a-f]+-[0-9a-f]+ ", line):
                parts = line.split()
                name = parts[5] if len(parts) > 5 else "[anon]"
                if "site-packages/" in name:
                    name = "site-packages/" + name.split("site-packages/")[1].split("/")[0]
                elif name.startswith("/"):
                    name = os.path.basename(name)
                cur = name
            elif line.startswith("Rss:"):
                agg[cur] += int(line.split()[1])
    threads = next((int(line.split()[1]) for line in open(f"/proc/{pid}/status")
                    if line.startswith("Threads:")), None)
    return {"total_mib": round(sum(agg.values()) / 1024, 2), "threads": threads,
            "by_mapping": [(k, round(v / 1024, 2)) for k, v in agg.most_common(30)]}


def main(argv: list[str] | None = None) -> int:
    """Run the command, print and optionally write the breakdown."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--json", metavar="FILE")
    ap.add_argument("cmd", nargs=argparse.REMAINDER)
    args = ap.parse_args(argv)
    cmd = args.cmd[1:] if args.cmd[:1] == ["--"] else args.cmd
    with PtyRun(cmd, cols=120, rows=40) as run:
        time.sleep(args.seconds)
        res = {"command": cmd, "seconds": args.seconds,
               "malloc_arena_max": os.environ.get("MALLOC_ARENA_MAX"), **breakdown(run.pid)}
    print(f"{res['total_mib']:.1f} MiB RSS, {res['threads']} threads "
          f"(MALLOC_ARENA_MAX={res['malloc_arena_max']})")
    for name, mib in res["by_mapping"][:15]:
        print(f"  {mib:7.2f}  {name}")
    if args.json:
        Path(args.json).write_text(json.dumps(res, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
