#!/usr/bin/env python3
"""Check ``seat-console gpus --json`` against ``nvidia-smi`` on a real GPU, idle and loaded.

Steps (each recorded; a failing step is reported, the rest still run):

1. **idle**: at one moment (threads released by one barrier) run ``seat-console gpus --json``,
   ``nvidia-smi --query-gpu=memory.total,memory.reserved,memory.used,memory.free
   --format=csv,noheader,nounits`` and ``nvidia-smi --query-compute-apps=pid,used_memory
   --format=csv,noheader,nounits`` (plus ``--query-gpu=index,uuid,pci.bus_id`` to key rows by
   UUID), and compare to the MiB;
2. **loaded**: start ``scripts/gpu_hold.py --gib GIB`` (torch holds the memory), then the same
   three commands at one moment; compare, including the holder's PID and memory, and torch's
   ``mem_get_info`` total against the console's CUDA-visible total (bytes, exact);
3. while the memory is still held, optionally: the TUI screenshots (``scripts/tui_screenshot.py``),
   the sampler benchmark and the idle-CPU benchmarks (``benchmarks/``);
4. release the memory; write ``OUT/validation.json`` and ``OUT/validation.md`` (the comparison
   tables in Markdown), and the raw outputs.

Usage: ``python3 scripts/validate_gpu.py --out DIR [--gib 100] [--screenshots] [--bench]``.
Exit 0 when every compared figure agrees to the MiB, 1 otherwise. nvidia-smi prints MiB
(2^20 B) rounded up; a console figure agrees when ``ceil(bytes / 2^20)`` equals nvidia-smi's
number exactly (which implies ``|bytes / 2^20 − nvidia-smi| < 1``).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import threading
import time
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MiB = 1 << 20
GiB = 1 << 30
QUERY_GPU = ["nvidia-smi", "--query-gpu=memory.total,memory.reserved,memory.used,memory.free",
             "--format=csv,noheader,nounits"]
QUERY_IDS = ["nvidia-smi", "--query-gpu=index,uuid,pci.bus_id", "--format=csv,noheader,nounits"]
QUERY_APPS = ["nvidia-smi", "--query-compute-apps=pid,used_memory",
              "--format=csv,noheader,nounits"]


def console_cmd() -> list[str]:
    """``seat-console gpus --json`` if installed, else ``python -m seat_console gpus --json``."""
    exe = shutil.which("seat-console")
    return [exe, "gpus", "--json"] if exe else [sys.executable, "-m", "seat_console", "gpus", "--json"]


def at_one_moment(commands: dict[str, list[str]]) -> dict[str, dict]:
    """Run the commands concurrently, released together by a barrier; record times and output."""
    barrier = threading.Barrier(len(commands))
    results: dict[str, dict] = {}

    def one(name: str, argv: list[str]) -> None:
        barrier.wait()
        t0 = time.time()
        p = subprocess.run(argv, capture_output=True, text=True, cwd=ROOT, timeout=120,
                           check=False)
        results[name] = {"argv": argv, "rc": p.returncode, "stdout": p.stdout,
                         "stderr": p.stderr, "started": t0, "ended": time.time()}

    threads = [threading.Thread(target=one, args=(n, a)) for n, a in commands.items()]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return results


def _rows(text: str) -> list[list[str]]:
    return [[c.strip() for c in line.split(",")] for line in text.strip().splitlines() if line]


def _agree(console_bytes: int | None, smi_mib: str) -> dict:
    try:
        smi = int(smi_mib)
    except ValueError:
        return {"smi_mib": smi_mib, "console_bytes": console_bytes, "agree": False}
    if console_bytes is None:
        return {"smi_mib": smi, "console_bytes": None, "agree": False}
    exact = console_bytes / MiB
    ceil = -(-console_bytes // MiB)
    return {"smi_mib": smi, "console_bytes": console_bytes, "console_mib_exact": exact,
            "console_mib_ceil": ceil, "diff_mib": smi - exact,
            "within_1_mib": abs(smi - exact) < 1.0, "agree": smi == ceil}


def compare(raw: dict[str, dict], holder: dict | None) -> dict:
    """Per card and per process: nvidia-smi MiB vs console bytes. Returns rows + verdict."""
    out: dict = {"cards": [], "processes": [], "torch": None, "errors": []}
    try:
        snap = json.loads(raw["console"]["stdout"])
    except (KeyError, json.JSONDecodeError) as exc:
        out["errors"].append(f"console output not JSON ({exc}): {raw['console']['stderr'][-500:]}")
        out["agree"] = False
        return out
    out["sampled_at"] = snap.get("sampled_at")
    ids = _rows(raw["ids"]["stdout"])
    mem = _rows(raw["gpu"]["stdout"])
    for (index, uuid, bus), (total, reserved, used, free) in zip(ids, mem, strict=True):
        card = next((c for c in snap["cards"] if c["uuid"] == uuid), None)
        if card is None or card["memory"] is None:
            out["errors"].append(f"card {uuid}: missing in the console's snapshot")
            continue
        m = card["memory"]
        out["cards"].append({
            "index": int(index), "uuid": uuid, "pci_bus_id": bus, "api": m["api"],
            "memory.total": _agree(m["total_bytes"], total),
            "memory.reserved": _agree(m["reserved_bytes"], reserved),
            "memory.used": _agree(m["used_bytes"], used),
            "memory.free": _agree(m["free_bytes"], free),
            "cuda_visible_bytes": m["cuda_visible_bytes"],
        })
    console_procs = {p["pid"]: (c["uuid"], p) for c in snap["cards"]
                     for p in (c["processes"] or [])}
    for pid, used in _rows(raw["apps"]["stdout"]):
        uuid, p = console_procs.get(int(pid), (None, None))
        row = {"pid": int(pid), "card": uuid,
               "used_memory": _agree(p["used_memory_bytes"] if p else None, used),
               "mapped": p["mapped"] if p else None, "name": p["name"] if p else None,
               "command": " ".join(p["command"] or []) if p else None}
        out["processes"].append(row)
    extra = set(console_procs) - {r["pid"] for r in out["processes"]}
    if extra:
        out["errors"].append(f"PIDs only the console lists: {sorted(extra)}")
    if holder is not None:
        card0 = out["cards"][0] if out["cards"] else None
        cv = card0["cuda_visible_bytes"] if card0 else None
        free = card0 and next((c["memory"]["free_bytes"] for c in snap["cards"]
                               if c["uuid"] == card0["uuid"]), None)
        out["torch"] = {"mem_get_info_total_bytes": holder["total_bytes"],
                        "console_cuda_visible_bytes": cv,
                        "agree_exact_bytes": holder["total_bytes"] == cv,
                        "mem_get_info_free_bytes": holder["free_bytes"],
                        "console_free_bytes": free,
                        "free_agree_exact_bytes": holder["free_bytes"] == free,
                        "holder": holder,
                        "holder_pid": holder["pid"],
                        "holder_listed": holder["pid"] in console_procs,
                        "torch_memory_reserved": holder["torch_memory_reserved"]}
    checks = [r[k]["agree"] for r in out["cards"] for k in
              ("memory.total", "memory.reserved", "memory.used", "memory.free")]
    checks += [r["used_memory"]["agree"] for r in out["processes"]]
    if out["torch"] is not None:
        checks += [out["torch"]["agree_exact_bytes"], out["torch"]["holder_listed"]]
    out["agree"] = bool(checks) and all(checks) and not out["errors"]
    return out


def phase(name: str, label: str, out_dir: Path, holder: dict | None) -> dict:
    """Take the three readings at one moment, save them raw (``NAME_raw.json``), compare."""
    raw = at_one_moment({"console": console_cmd(), "gpu": QUERY_GPU, "apps": QUERY_APPS,
                         "ids": QUERY_IDS})
    (out_dir / f"{name}_raw.json").write_text(json.dumps(raw, indent=2))
    result = compare(raw, holder)
    result["phase"] = label
    result["spread_s"] = (max(r["ended"] for r in raw.values())
                          - min(r["started"] for r in raw.values()))
    return result


def markdown(results: list[dict], meta: dict) -> str:
    """The comparison tables as Markdown."""
    lines = [(f"Run {meta['date_utc']} on {meta['host']}: {meta['gpus']}, driver "
              f"{meta['driver']}."), ""]
    for r in results:
        lines += [(f"**{r['phase']}** (console sampled at {r.get('sampled_at')}; all commands "
                   f"finished within {r['spread_s']:.2f} s):"), "",
                  ("| card | field | nvidia-smi (MiB) | console (bytes) | console (MiB, exact) "
                   "| agree (ceil = smi) |"), "|---|---|---:|---:|---:|---|"]
        for c in r["cards"]:
            for k in ("memory.total", "memory.reserved", "memory.used", "memory.free"):
                a = c[k]
                exact = a.get("console_mib_exact")
                lines.append(f"| {c['index']} `{c['uuid'][:12]}…` | {k} | {a['smi_mib']:,} | "
                             f"{a['console_bytes']:,} | "
                             f"{'n/a' if exact is None else f'{exact:,.2f}'} | "
                             f"{'yes' if a['agree'] else 'NO'} |")
            lines.append(f"| {c['index']} | CUDA-visible (total − reserved) | – | "
                         f"{c['cuda_visible_bytes']:,} | {c['cuda_visible_bytes'] / MiB:,.2f} "
                         "| – |")
        for p in r["processes"]:
            a = p["used_memory"]
            exact = a.get("console_mib_exact")
            cb = a["console_bytes"]
            lines.append(f"| pid {p['pid']} ({p['name']}) | used_memory | {a['smi_mib']:,} | "
                         f"{'n/a' if cb is None else f'{cb:,}'} | "
                         f"{'n/a' if exact is None else f'{exact:,.2f}'} | "
                         f"{'yes' if a['agree'] else 'NO'} |")
        if r.get("torch"):
            t = r["torch"]
            lines.append(f"| torch | `mem_get_info()` total vs console CUDA-visible | – | "
                         f"{t['mem_get_info_total_bytes']:,} vs "
                         f"{t['console_cuda_visible_bytes']:,} | – | "
                         f"{'yes (exact bytes)' if t['agree_exact_bytes'] else 'NO'} |")
            lines.append(f"| torch | `mem_get_info()` free vs console memory.free | – | "
                         f"{t['mem_get_info_free_bytes']:,} vs {t['console_free_bytes']:,} | – "
                         f"| {'yes (exact bytes)' if t['free_agree_exact_bytes'] else 'NO'} |")
        if r["errors"]:
            lines += ["", *[f"- error: {e}" for e in r["errors"]]]
        lines += ["", f"Verdict: {'all figures agree to the MiB' if r['agree'] else 'MISMATCH'}.",
                  ""]
    return "\n".join(lines)


def run_step(name: str, argv: list[str], out_dir: Path, timeout: int) -> dict:
    """Run one extra step (screenshots, benchmarks); capture its output to OUT/NAME.log."""
    t0 = time.monotonic()
    try:
        p = subprocess.run(argv, capture_output=True, text=True, cwd=ROOT, timeout=timeout,
                           check=False)
        rc, text = p.returncode, p.stdout + p.stderr
    except subprocess.TimeoutExpired as exc:
        rc, text = 124, f"timed out after {timeout} s: {exc}"
    (out_dir / f"{name}.log").write_text(text)
    print(f"[{name}] rc={rc} in {time.monotonic() - t0:.1f} s\n{text[-1500:]}", flush=True)
    return {"step": name, "rc": rc, "seconds": time.monotonic() - t0}


def main() -> int:
    """Run the validation; exit 0 when everything agrees."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--gib", type=float, default=100.0)
    ap.add_argument("--screenshots", action="store_true")
    ap.add_argument("--bench", action="store_true",
                    help="also run benchmarks/bench_sampler.py and bench_idle_cpu.py (60 s per "
                         "idle mode) while the memory is held")
    ap.add_argument("--idle-modes", default="pty,headless,sampler",
                    help="bench_idle_cpu.py modes to run with --bench (comma-separated)")
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    py = sys.executable
    results, steps = [], []

    results.append(phase("idle", "idle", args.out, None))
    holder_proc = subprocess.Popen([py, str(ROOT / "scripts" / "gpu_hold.py"), "--gib",
                                    str(args.gib)], stdin=subprocess.PIPE,
                                   stdout=subprocess.PIPE, text=True)
    try:
        holder = json.loads(holder_proc.stdout.readline())
        print(f"holder: {holder}", flush=True)
        results.append(phase("loaded", f"loaded ({args.gib:g} GiB held by torch)", args.out,
                             holder))
        if args.screenshots:
            steps.append(run_step("screenshots", [py, "scripts/tui_screenshot.py", str(args.out),
                                                  "--size", "120x40", "--size", "80x24"],
                                  args.out, 120))
        if args.bench:
            steps.append(run_step("bench_sampler", [py, "benchmarks/bench_sampler.py", "--json",
                                                    str(args.out / "bench_sampler.json")],
                                  args.out, 180))
            for mode in [m for m in args.idle_modes.split(",") if m]:
                steps.append(run_step(f"bench_idle_{mode}", [
                    py, "benchmarks/bench_idle_cpu.py", "--mode", mode, "--seconds", "60",
                    "--json", str(args.out / f"bench_idle_{mode}.json")], args.out, 150))
    finally:
        holder_proc.stdin.close()
        holder_proc.wait(60)

    snap_meta = {}
    try:
        snap_meta = json.loads(json.loads((args.out / "idle_raw.json").read_text())
                               ["console"]["stdout"])
    except (OSError, KeyError, json.JSONDecodeError):
        pass
    meta = {"date_utc": datetime.now(UTC).isoformat(timespec="seconds"),
            "host": os.uname().nodename,
            "gpus": ", ".join(c["name"] or "?" for c in snap_meta.get("cards", [])),
            "driver": snap_meta.get("driver_version"),
            "command": " ".join([Path(py).name, *sys.argv])}
    (args.out / "validation.json").write_text(json.dumps(
        {"meta": meta, "results": results, "steps": steps}, indent=2))
    md = markdown(results, meta)
    (args.out / "validation.md").write_text(md)
    print(md)
    return 0 if all(r["agree"] for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
