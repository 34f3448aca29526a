#!/usr/bin/env python3
"""Sampler cost: µs per card per tick of :meth:`seat_console.sources.gpu.GpuSampler.sample`.

One tick = one batched snapshot of every card (identity, memory v2, utilisation, temperature,
power, MIG mode, compute processes with their PID → process/container mapping, which is cached
per PID and start time). The cost per card per tick is the tick's wall time divided by the
number of cards. Then each call the sampler makes for a card is timed on its own (through the
gateway, card 0), so the tick can be split into NVML time and Python time.

Usage::

    python benchmarks/bench_sampler.py                  # real NVML (a GPU machine)
    python benchmarks/bench_sampler.py --double 2       # CPU-only reference: the NVML double
    python benchmarks/bench_sampler.py --ticks 5000 --json out.json

Prints a summary (median, p95, p99, min, mean in µs) and, with ``--json``, writes it with the
machine, date (UTC) and command line. Not a test: nothing is asserted.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from seat_console.sources.gpu import GpuSampler, GpuSnapshot
from seat_console.node.nvml import Nvml


def _pct(values: list[float], q: float) -> float:
    """The q-quantile (0..1) by the nearest-rank method."""
    s = sorted(values)
    return s[min(len(s) - 1, max(0, round(q * len(s) + 0.5) - 1))]


def summary(values_us: list[float]) -> dict[str, float]:
    """median / p95 / p99 / min / mean of a list of µs values."""
    return {"n": len(values_us), "median_us": statistics.median(values_us),
            "p95_us": _pct(values_us, 0.95), "p99_us": _pct(values_us, 0.99),
            "min_us": min(values_us), "mean_us": statistics.fmean(values_us)}


def cpu_model() -> str:
    """The CPU model name from /proc/cpuinfo (Linux), else platform.processor()."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark; returns 0, or 3 when NVML is unavailable."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ticks", type=int, default=3000)
    ap.add_argument("--warmup", type=int, default=50)
    ap.add_argument("--double", type=int, metavar="CARDS",
                    help="use the in-process NVML double with CARDS H200-like cards")
    ap.add_argument("--json", metavar="FILE", help="write the results as JSON")
    args = ap.parse_args(argv)

    if args.double:
        sys.path.insert(0, str(ROOT / "tests"))
        from nvml_double import FakeCard, FakeProcess, NvmlDouble

        cards = [FakeCard(uuid=f"GPU-{i:08d}-0000-0000-0000-000000000000",
                          pci_bus_id=f"00000000:{0x18 + i:02X}:00.0",
                          processes=[FakeProcess(os.getpid(), 100 << 30)])
                 for i in range(args.double)]
        nvml = Nvml(NvmlDouble(cards))
        backend = f"NVML double ({args.double} cards, 1 process each)"
    else:
        nvml = Nvml()
        backend = "real NVML (pynvml)"
    sampler = GpuSampler(nvml, ["0", "1"])
    first = sampler.sample()
    if not isinstance(first, GpuSnapshot):
        print(f"NVML unavailable: {first}", file=sys.stderr)
        return 3
    ncards = len(first.cards)
    for _ in range(args.warmup):
        sampler.sample()

    per_tick_us: list[float] = []
    for _ in range(args.ticks):
        t0 = time.perf_counter_ns()
        sampler.sample()
        per_tick_us.append((time.perf_counter_ns() - t0) / 1000)
    per_card_us = [t / ncards for t in per_tick_us]

    # Breakdown: each call the sampler makes per card, through the gateway, one at a time.
    handle = nvml.call("nvmlDeviceGetHandleByIndex", 0)
    sensor = getattr(nvml.module, "NVML_TEMPERATURE_GPU", 0)
    pids = [p.pid for p in (first.cards[0].processes or [])]
    steps: dict[str, object] = {
        "nvmlDeviceGetHandleByIndex": lambda: nvml.call("nvmlDeviceGetHandleByIndex", 0),
        "nvmlDeviceGetUUID": lambda: nvml.call("nvmlDeviceGetUUID", handle),
        "nvmlDeviceGetPciInfo": lambda: nvml.call("nvmlDeviceGetPciInfo", handle),
        "nvmlDeviceGetName": lambda: nvml.call("nvmlDeviceGetName", handle),
        f"memory_info ({nvml.memory_api})": lambda: nvml.memory_info(handle),
        "nvmlDeviceGetUtilizationRates": lambda: nvml.call("nvmlDeviceGetUtilizationRates",
                                                           handle),
        "nvmlDeviceGetTemperature": lambda: nvml.call("nvmlDeviceGetTemperature", handle,
                                                      sensor),
        "nvmlDeviceGetPowerUsage": lambda: nvml.call("nvmlDeviceGetPowerUsage", handle),
        "nvmlDeviceGetEnforcedPowerLimit": lambda: nvml.call("nvmlDeviceGetEnforcedPowerLimit",
                                                             handle),
        "nvmlDeviceGetMigMode": lambda: nvml.call("nvmlDeviceGetMigMode", handle),
        f"running_processes ({nvml.process_api})": lambda: nvml.running_processes(handle),
        f"PID map, cached ({len(pids)} PIDs)": lambda: [sampler.mapper.map(p) for p in pids],
    }
    calls: dict[str, list[float]] = {k: [] for k in steps}
    for _ in range(max(200, args.ticks // 5)):
        for name, fn in steps.items():
            t0 = time.perf_counter_ns()
            fn()  # type: ignore[operator]
            calls[name].append((time.perf_counter_ns() - t0) / 1000)
    nvml.close()

    result = {
        "benchmark": "sampler cost per card per tick",
        "date_utc": datetime.now(UTC).isoformat(timespec="seconds"),
        "command": " ".join([Path(sys.executable).name, *sys.argv]),
        "machine": {"host": platform.node(), "cpu": cpu_model(), "cores": os.cpu_count(),
                    "python": platform.python_version(), "backend": backend,
                    "gpus": [c.name for c in first.cards], "driver": first.driver_version,
                    "processes_on_card0": len(first.cards[0].processes or [])},
        "cards": ncards,
        "per_card_per_tick": summary(per_card_us),
        "per_tick": summary(per_tick_us),
        "nvml_calls": {k: summary(v) for k, v in calls.items()},
    }
    s = result["per_card_per_tick"]
    print(f"{backend}, {ncards} card(s), {args.ticks} ticks: per card per tick median "
          f"{s['median_us']:.1f} µs, p95 {s['p95_us']:.1f} µs, p99 {s['p99_us']:.1f} µs "
          f"(per tick median {result['per_tick']['median_us']:.1f} µs)")
    total = 0.0
    for k, v in result["nvml_calls"].items():
        total += v["median_us"]
        print(f"  {k}: median {v['median_us']:.2f} µs, p95 {v['p95_us']:.2f} µs")
    print(f"  sum of the medians above: {total:.1f} µs; the rest of a card's tick is building "
          "the frozen models and the snapshot")
    result["sum_of_call_medians_us"] = total
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
