#!/usr/bin/env python3
"""Seat Console next to nvitop in one run: idle CPU, terminal bytes, first frame, RSS.

Each session starts one program in a pseudo-terminal of ``--size`` (default 120×40), drains its
output, and measures over a window of ``--seconds`` (default 60) after ``--warmup`` (5 s):

* CPU: user + system seconds of the process and its children (psutil), per wall second, as
  % of one core;
* bytes written to the terminal per second;
* first frame: seconds from ``exec`` to the first byte, to the header (``--header-re``), to
  the first frame that shows GPU data (``--gpu-re``), and to the full screen (seat-console:
  Textual's GPU panel title, after the pre-Textual first frame; nvitop: its first frame),
  matched on the output with ANSI escape
  sequences removed;
* RSS at the end of the window and its maximum over the window (sampled every second).

Sessions run in the order A, B, B, A (A = seat-console, B = nvitop) so that drift on the
machine falls on both equally; the report gives each session and the mean per program, and the
ratios seat-console / nvitop. ``--profile S`` then runs seat-console once more under
``py-spy record`` for S seconds and reports where its CPU goes (share of samples by function,
inclusive and self).

Commands: ``A = python -m seat_console --interval 1`` (``--seat-cmd`` to change it; extra
arguments such as ``--profile FILE`` go there), ``B = nvitop -m full --interval 1``
(``--nvitop-cmd``). Not a test: nothing is asserted.

Usage::

    python3 benchmarks/bench_vs_nvitop.py --json out.json [--profile 30] [--order ABBA]
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import platform
import re
import shlex
import shutil
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

import psutil
from ptyrun import PtyRun

ANSI = re.compile(rb"\x1b(?:\[[0-9;?<>=]*[ -/]*[@-~]|\][^\x07\x1b]*(?:\x07|\x1b\\)|[PX^_][^\x1b]*\x1b\\|[()][0-9A-Za-z]|[=>78cDEHMNOZ])")
"""ANSI/VT escape sequences (CSI, OSC, DCS/SOS/PM/APC, charset, single-character)."""

SEAT_CMD = f"{shlex.quote(sys.executable)} -m seat_console --interval 1"
NVITOP_CMD = "nvitop -m full --interval 1"
SEAT_HEADER = r"node \S+ · TP"
SEAT_GPU = r"GPU 0 .{0,40}(used|LOST|memory n/a)"
SEAT_FULL = r"GPUs \(NVML\)"
"""The Textual screen's GPU panel title: the full screen is up (the first frame,
:mod:`seat_console.tui.first_frame`, comes before it)."""
NVITOP_HEADER = r"NVITOP"
NVITOP_GPU = r"\d+(?:\.\d+)?[KMGT]iB\s*/\s*\d+(?:\.\d+)?[KMGT]iB"


def _cpu_s(proc: psutil.Process) -> float:
    """CPU seconds of ``proc`` and its live children (user + system)."""
    total = 0.0
    for p in [proc, *proc.children(recursive=True)]:
        try:
            t = p.cpu_times()
            total += t.user + t.system
        except psutil.Error:
            pass
    return total


def session(cmd: str, *, cols: int, rows: int, seconds: float, warmup: float,
            header_re: str, gpu_re: str, env: dict[str, str] | None = None,
            full_re: str | None = None) -> dict:
    """Run ``cmd`` in a ``cols``×``rows`` pty; measure as the module docstring says."""
    state = {"first_byte": None, "header": None, "gpu": None, "full": None}
    tail = collections.deque(maxlen=64)
    hdr, gpu = re.compile(header_re), re.compile(gpu_re)
    full = re.compile(full_re) if full_re else None

    def on_chunk(chunk: bytes, now: float) -> None:
        if state["first_byte"] is None:
            state["first_byte"] = now
        if state["full"] is None:
            tail.append(chunk)
            text = ANSI.sub(b"", b"".join(tail)).decode("utf-8", "replace")
            if state["header"] is None and hdr.search(text):
                state["header"] = now
            if state["gpu"] is None and gpu.search(text):
                state["gpu"] = now
                if state["header"] is None:
                    state["header"] = now
            if state["gpu"] is not None and (full is None or full.search(text)):
                state["full"] = now

    out: dict = {"command": cmd, "size": f"{cols}x{rows}"}
    with PtyRun(shlex.split(cmd), cols=cols, rows=rows, env={**(env or {}), "NO_COLOR": None},
                on_chunk=on_chunk) as run:
        proc = psutil.Process(run.pid)
        time.sleep(warmup)
        if run.child.poll() is not None:
            run.close()
            text = ANSI.sub(b"", b"".join(tail)).decode("utf-8", "replace")
            return {**out, "error": f"exited during warm-up (rc {run.child.returncode})",
                    "output_tail": text[-2000:]}
        c0, b0, t0 = _cpu_s(proc), run.bytes, time.monotonic()
        rss_max = 0
        end = t0 + seconds
        while time.monotonic() < end:
            try:
                rss_max = max(rss_max, proc.memory_info().rss)
            except psutil.Error:
                break
            time.sleep(min(1.0, max(0.0, end - time.monotonic())))
        c1, b1, t1 = _cpu_s(proc), run.bytes, time.monotonic()
        rss = proc.memory_info().rss
        threads = proc.num_threads()
    wall = t1 - t0
    return {**out, "cpu_s": c1 - c0, "wall_s": wall,
            "cpu_pct_of_one_core": 100 * (c1 - c0) / wall,
            "tty_bytes_per_s": (b1 - b0) / wall, "rss_mib": rss / 2**20,
            "rss_max_mib": rss_max / 2**20, "threads": threads,
            "first_byte_s": state["first_byte"], "first_header_s": state["header"],
            "first_gpu_frame_s": state["gpu"], "first_full_screen_s": state["full"]}


def profile(cmd: str, seconds: float, cols: int, rows: int, out_dir: Path) -> dict:
    """Run ``cmd`` in a pty under ``py-spy record`` (raw collapsed stacks) for ``seconds``;
    summarise the samples by function (inclusive and self share)."""
    pyspy = shutil.which("py-spy") or shutil.which("py-spy", path=str(Path(sys.executable).parent))
    if pyspy is None:
        return {"error": "py-spy not installed"}
    raw = out_dir / "pyspy-seat-console.txt"
    with PtyRun(shlex.split(cmd), cols=cols, rows=rows) as run:
        time.sleep(5)
        spy = subprocess.run([pyspy, "record", "--pid", str(run.pid), "--duration",
                              str(int(seconds)), "--rate", "1000", "--format", "raw",
                              "--output", str(raw), "--nonblocking"],
                             capture_output=True, text=True, timeout=seconds + 60)
    if spy.returncode != 0 or not raw.exists():
        return {"error": f"py-spy rc {spy.returncode}: {spy.stderr[-800:]}"}
    return summarise_stacks(raw.read_text(), top=30) | {"raw": raw.name}


def summarise_stacks(text: str, top: int = 30) -> dict:
    """Collapsed stacks (``frame;frame;… count`` per line, root first) → total samples and the
    ``top`` functions by inclusive and by self share (%)."""
    incl: collections.Counter = collections.Counter()
    self_: collections.Counter = collections.Counter()
    total = 0
    for line in text.splitlines():
        stack, _, n = line.rpartition(" ")
        if not stack or not n.isdigit():
            continue
        count = int(n)
        total += count
        frames = [re.sub(r" \(.*?:\d+\)$", lambda m: m.group(0).split(":")[0] + ")", f)
                  for f in stack.split(";")]
        for f in set(frames):
            incl[f] += count
        self_[frames[-1]] += count
    pct = (lambda c: round(100 * c / total, 1)) if total else (lambda c: 0.0)
    return {"samples": total,
            "inclusive_pct": [(f, pct(c)) for f, c in incl.most_common(top)],
            "self_pct": [(f, pct(c)) for f, c in self_.most_common(top)]}


def machine() -> dict:
    """Host, CPU, cores, Python, GPU names (nvidia-smi), package versions."""
    info = {"host": platform.node(), "cores": os.cpu_count(),
            "python": platform.python_version()}
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                info["cpu"] = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    smi = shutil.which("nvidia-smi")
    if smi:
        r = subprocess.run([smi, "--query-gpu=name,driver_version,memory.used,memory.total",
                            "--format=csv,noheader"], capture_output=True, text=True)
        info["gpus"] = r.stdout.strip().splitlines()
    from importlib.metadata import PackageNotFoundError, version
    for pkg in ("textual", "rich", "nvitop", "nvidia-ml-py", "seat-console"):
        try:
            info[pkg] = version(pkg)
        except PackageNotFoundError:
            info[pkg] = None
    return info


def main(argv: list[str] | None = None) -> int:
    """Run the sessions, print a table, write the JSON."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seconds", type=float, default=60.0)
    ap.add_argument("--warmup", type=float, default=5.0)
    ap.add_argument("--size", default="120x40")
    ap.add_argument("--order", default="ABBA", help="A = seat-console, B = nvitop")
    ap.add_argument("--seat-cmd", default=SEAT_CMD)
    ap.add_argument("--nvitop-cmd", default=NVITOP_CMD)
    ap.add_argument("--profile", type=float, default=0.0, metavar="S",
                    help="then profile seat-console with py-spy for S seconds")
    ap.add_argument("--json", metavar="FILE")
    args = ap.parse_args(argv)
    cols, rows = (int(x) for x in args.size.lower().split("x"))
    progs = {"A": ("seat-console", args.seat_cmd, SEAT_HEADER, SEAT_GPU, SEAT_FULL),
             "B": ("nvitop", args.nvitop_cmd, NVITOP_HEADER, NVITOP_GPU, None)}
    runs = []
    for letter in args.order:
        name, cmd, h, g, f = progs[letter]
        res = session(cmd, cols=cols, rows=rows, seconds=args.seconds, warmup=args.warmup,
                      header_re=h, gpu_re=g, full_re=f)
        res["program"] = name
        runs.append(res)
        print(json.dumps({k: (round(v, 3) if isinstance(v, float) else v)
                          for k, v in res.items() if k != "output_tail"}), flush=True)
        if "error" in res:
            print(res.get("output_tail", ""), flush=True)
    keys = ("cpu_pct_of_one_core", "tty_bytes_per_s", "rss_mib", "first_header_s",
            "first_gpu_frame_s", "first_full_screen_s")
    means: dict[str, dict] = {}
    for name in ("seat-console", "nvitop"):
        ok = [r for r in runs if r["program"] == name and "error" not in r]
        means[name] = {k: (sum(r[k] for r in ok if r.get(k) is not None)
                           / max(1, sum(1 for r in ok if r.get(k) is not None))
                           if any(r.get(k) is not None for r in ok) else None) for k in keys}
    ratios = {k: (means["seat-console"][k] / means["nvitop"][k]
                  if means["seat-console"][k] is not None and means["nvitop"][k] else None)
              for k in keys}
    result = {"benchmark": "seat-console vs nvitop, idle, 1 Hz, pty",
              "date_utc": datetime.now(UTC).isoformat(timespec="seconds"),
              "order": args.order, "seconds": args.seconds, "warmup": args.warmup,
              "machine": machine(), "runs": runs, "means": means,
              "ratio_seat_over_nvitop": ratios}
    if args.profile > 0:
        out_dir = Path(args.json).parent if args.json else Path(".")
        result["profile"] = profile(args.seat_cmd, args.profile, cols, rows, out_dir)
    print(f"\n{'':22}{'seat-console':>14}{'nvitop':>12}{'ratio':>8}")
    for k in keys:
        a, b, r = means["seat-console"][k], means["nvitop"][k], ratios[k]
        print(f"{k:22}{'n/a' if a is None else f'{a:.3f}':>14}"
              f"{'n/a' if b is None else f'{b:.3f}':>12}{'n/a' if r is None else f'{r:.2f}':>8}")
    if "profile" in result:
        p = result["profile"]
        print("\npy-spy:", p.get("error") or f"{p['samples']} samples")
        for f, pc in p.get("inclusive_pct", [])[:20]:
            print(f"  {pc:5.1f} %  {f}")
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
