"""Benchmark: how long ``seat_console.sources.checkpoint.scan_checkpoint`` takes on multi-hundred-GB to
multi-TB checkpoints (sparse files with real-size headers; only headers are read).

Checkpoints (tensor lists of ``tests/ckpt_factory.py``, published configs):

* DeepSeek-V3 FP8 as published: 163 shards, 90,427 tensors, 673 GB;
* the same in BF16 (every FP8 weight written as BF16, scales dropped): 1.3 TB;
* Qwen3-Next-80B-A3B BF16: 40 shards, 74,367 tensors, 159 GB.

Run: ``python benchmarks/bench_checkpoint_scan.py [--repeat N] [--json FILE] [--reference]``
(``--reference``: the scanner before issue 33's rework, ``tests/checkpoint_reference.py``).
Prints per checkpoint the size, the tensor count and min / median wall time of
``scan_checkpoint`` over N runs (after one warm-up run, so the headers are in the page cache as
on a node that just listed the files), and beside it **the floor** (issue 33): the same shards'
headers read and ``json.loads``-ed and nothing else (:func:`floor_read`: open, the 8-byte
length, the header, ``json.loads``), run alternately with the scan so the machine's drift falls
on both; the ratio is scan / floor per pair (target ≤ 2×). The scan parses headers with orjson
(a project dependency, faster than ``json``), so a second floor reads and ``orjson.loads``-es
every header (:func:`floor_read_orjson`) and its ratio says what the scan costs beyond the
parser it uses. On a shared machine the process's CPU time (``time.process_time``) of each
run is recorded too, and its ratio per pair ("cpu ratio"), which other processes disturb less
than the wall time; the load average goes beside them. Not a test: timings depend on
the machine.
"""

from __future__ import annotations

import argparse
import json
import statistics
import struct
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import ckpt_factory as F
import orjson

from seat_console.sources.checkpoint import scan_checkpoint


def _bf16(tensors: list[F.Tensor]) -> list[F.Tensor]:
    return [(n, "BF16", s) for n, d, s in tensors if not n.endswith("weight_scale_inv")]


def floor_read(directory: str, loads=json.loads) -> int:
    """Read and ``loads`` (default ``json.loads``) the header of every ``*.safetensors`` file in
    ``directory`` (the format: an unsigned little-endian 64-bit header length, then that many
    bytes of JSON; huggingface/safetensors' README); return the tensor count. What any scan of
    the headers must do at the least: the floor the scanner is held to."""
    n = 0
    for path in sorted(Path(directory).glob("*.safetensors")):
        with open(path, "rb") as f:
            (size,) = struct.unpack("<Q", f.read(8))
            header = loads(f.read(size))
        n += len(header) - ("__metadata__" in header)
    return n


def floor_read_orjson(directory: str) -> int:
    """:func:`floor_read` with ``orjson.loads``, the parser the scan uses (the scan's floor
    with its own parser)."""
    return floor_read(directory, orjson.loads)


def _loadavg() -> list[float]:
    """The 1-, 5- and 15-minute load averages (``/proc/loadavg``), or [] where there is none."""
    try:
        return [float(x) for x in Path("/proc/loadavg").read_text().split()[:3]]
    except OSError:
        return []


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=7)
    ap.add_argument("--json", metavar="FILE")
    ap.add_argument("--reference", action="store_true",
                    help="time tests/checkpoint_reference.py, the scanner before issue 33's "
                         "rework (commit a657fc5), for a before/after on the same machine")
    args = ap.parse_args()
    scan = scan_checkpoint
    if args.reference:
        import checkpoint_reference

        scan = checkpoint_reference.scan_checkpoint
    out: dict[str, dict] = {}
    cases = {
        "DeepSeek-V3 FP8 (163 shards)": (F.deepseek_v3_config(), F.deepseek_v3_tensors, 163,
                                         None),
        "DeepSeek-V3 as BF16 (163 shards)": (F.deepseek_v3_config(), F.deepseek_v3_tensors,
                                             163, _bf16),
        "Qwen3-Next-80B-A3B BF16 (40 shards)": (F.qwen3_next_config(), F.qwen3_next_tensors,
                                                40, None),
    }
    print(f"{'checkpoint':<38} {'bytes':>20} {'tensors':>8} {'min s':>7} {'median s':>9} "
          f"{'floor s':>8} {'ratio':>6} {'orjson floor s':>15} {'ratio':>6} {'cpu ratio':>9}")
    load_before = _loadavg()
    for name, (cfg, make, shards, tf) in cases.items():
        with tempfile.TemporaryDirectory() as d:
            tensors = make(cfg)
            if tf:
                tensors = tf(tensors)
            F.write_checkpoint(Path(d), F.split_even(tensors, shards), config=cfg)
            s = scan(d)  # warm-up
            assert floor_read(d) == floor_read_orjson(d) == s.tensor_count
            times, floors, ofloors, cpu, fcpu = [], [], [], [], []
            for _ in range(args.repeat):
                c0, t0 = time.process_time(), time.perf_counter()
                scan(d)
                times.append(time.perf_counter() - t0)
                cpu.append(time.process_time() - c0)
                c0, t0 = time.process_time(), time.perf_counter()
                floor_read(d)
                floors.append(time.perf_counter() - t0)
                fcpu.append(time.process_time() - c0)
                t0 = time.perf_counter()
                floor_read_orjson(d)
                ofloors.append(time.perf_counter() - t0)
            ratios = [a / b for a, b in zip(times, floors)]
            oratios = [a / b for a, b in zip(times, ofloors)]
            cratios = [a / b for a, b in zip(cpu, fcpu)]
            print(f"{name:<38} {s.total_bytes:>20,} {s.tensor_count:>8,} {min(times):>7.3f} "
                  f"{statistics.median(times):>9.3f} {statistics.median(floors):>8.3f} "
                  f"{statistics.median(ratios):>6.2f} {statistics.median(ofloors):>15.3f} "
                  f"{statistics.median(oratios):>6.2f} {statistics.median(cratios):>9.2f}")
            out[name] = {"bytes": s.total_bytes, "tensors": s.tensor_count, "scan_s": times,
                         "floor_s": floors, "ratio_per_pair": ratios,
                         "ratio_median": statistics.median(ratios),
                         "orjson_floor_s": ofloors, "orjson_ratio_per_pair": oratios,
                         "orjson_ratio_median": statistics.median(oratios),
                         "scan_cpu_s": cpu, "floor_cpu_s": fcpu, "cpu_ratio_per_pair": cratios,
                         "cpu_ratio_median": statistics.median(cratios)}
    if args.json:
        Path(args.json).write_text(json.dumps({"benchmark": "checkpoint scan vs reading and "
                                               "json.loads-ing every header", "cases": out,
                                               "repeat": args.repeat,
                                               "scanner": "reference (a657fc5)"
                                               if args.reference else "this tree's",
                                               "loadavg_before": load_before,
                                               "loadavg_after": _loadavg()}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
