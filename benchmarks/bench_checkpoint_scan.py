"""Benchmark: how long ``seat_console.sources.checkpoint.scan_checkpoint`` takes on multi-hundred-GB to
multi-TB checkpoints (sparse files with real-size headers; only headers are read).

Checkpoints (tensor lists of ``tests/ckpt_factory.py``, published configs):

* DeepSeek-V3 FP8 as published: 163 shards, 90,427 tensors, 673 GB;
* the same in BF16 (every FP8 weight written as BF16, scales dropped): 1.3 TB;
* Qwen3-Next-80B-A3B BF16: 40 shards, 74,367 tensors, 159 GB.

Run: ``python benchmarks/bench_checkpoint_scan.py [--repeat N] [--json FILE]``. Prints per
checkpoint the size, the tensor count and min / median wall time of ``scan_checkpoint`` over N
runs (after one warm-up run, so the headers are in the page cache as on a node that just listed
the files), and beside it **the floor** (issue 33): the same shards' headers read and
``json.loads``-ed and nothing else (:func:`floor_read`: open, the 8-byte length, the header,
``json.loads``), run alternately with the scan so the machine's drift falls on both; the ratio
is scan / floor per pair (target ≤ 2×). Not a test: timings depend on the machine.
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

from seat_console.sources.checkpoint import scan_checkpoint


def _bf16(tensors: list[F.Tensor]) -> list[F.Tensor]:
    return [(n, "BF16", s) for n, d, s in tensors if not n.endswith("weight_scale_inv")]


def floor_read(directory: str) -> int:
    """Read and ``json.loads`` the header of every ``*.safetensors`` file in ``directory``
    (the format: an unsigned little-endian 64-bit header length, then that many bytes of
    JSON; huggingface/safetensors' README); return the tensor count. What any scan of the
    headers must do at the least: the floor the scanner is held to."""
    n = 0
    for path in sorted(Path(directory).glob("*.safetensors")):
        with open(path, "rb") as f:
            (size,) = struct.unpack("<Q", f.read(8))
            header = json.loads(f.read(size))
        n += len(header) - ("__metadata__" in header)
    return n


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=7)
    ap.add_argument("--json", metavar="FILE")
    args = ap.parse_args()
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
          f"{'floor s':>8} {'ratio':>6}")
    for name, (cfg, make, shards, tf) in cases.items():
        with tempfile.TemporaryDirectory() as d:
            tensors = make(cfg)
            if tf:
                tensors = tf(tensors)
            F.write_checkpoint(Path(d), F.split_even(tensors, shards), config=cfg)
            s = scan_checkpoint(d)  # warm-up
            assert floor_read(d) == s.tensor_count
            times, floors = [], []
            for _ in range(args.repeat):
                t0 = time.perf_counter()
                scan_checkpoint(d)
                times.append(time.perf_counter() - t0)
                t0 = time.perf_counter()
                floor_read(d)
                floors.append(time.perf_counter() - t0)
            ratios = [a / b for a, b in zip(times, floors)]
            print(f"{name:<38} {s.total_bytes:>20,} {s.tensor_count:>8,} {min(times):>7.3f} "
                  f"{statistics.median(times):>9.3f} {statistics.median(floors):>8.3f} "
                  f"{statistics.median(ratios):>6.2f}")
            out[name] = {"bytes": s.total_bytes, "tensors": s.tensor_count, "scan_s": times,
                         "floor_s": floors, "ratio_per_pair": ratios,
                         "ratio_median": statistics.median(ratios)}
    if args.json:
        Path(args.json).write_text(json.dumps({"benchmark": "checkpoint scan vs reading and "
                                               "json.loads-ing every header", "cases": out,
                                               "repeat": args.repeat}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
