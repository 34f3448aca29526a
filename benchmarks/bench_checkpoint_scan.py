"""Benchmark: how long ``seat_console.sources.checkpoint.scan_checkpoint`` takes on multi-hundred-GB to
multi-TB checkpoints (sparse files with real-size headers; only headers are read).

Checkpoints (tensor lists of ``tests/ckpt_factory.py``, published configs):

* DeepSeek-V3 FP8 as published: 163 shards, 90,427 tensors, 673 GB;
* the same in BF16 (every FP8 weight written as BF16, scales dropped): 1.3 TB;
* Qwen3-Next-80B-A3B BF16: 40 shards, 74,367 tensors, 159 GB.

Run: ``python benchmarks/bench_checkpoint_scan.py [--repeat N]``. Prints per checkpoint the
size, the tensor count and min / median wall time of ``scan_checkpoint`` over N runs (after one
warm-up run, so the headers are in the page cache as on a node that just listed the files).
Not a test: timings depend on the machine.
"""

from __future__ import annotations

import argparse
import statistics
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


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=7)
    args = ap.parse_args()
    cases = {
        "DeepSeek-V3 FP8 (163 shards)": (F.deepseek_v3_config(), F.deepseek_v3_tensors, 163,
                                         None),
        "DeepSeek-V3 as BF16 (163 shards)": (F.deepseek_v3_config(), F.deepseek_v3_tensors,
                                             163, _bf16),
        "Qwen3-Next-80B-A3B BF16 (40 shards)": (F.qwen3_next_config(), F.qwen3_next_tensors,
                                                40, None),
    }
    print(f"{'checkpoint':<38} {'bytes':>20} {'tensors':>8} {'min s':>7} {'median s':>9}")
    for name, (cfg, make, shards, tf) in cases.items():
        with tempfile.TemporaryDirectory() as d:
            tensors = make(cfg)
            if tf:
                tensors = tf(tensors)
            F.write_checkpoint(Path(d), F.split_even(tensors, shards), config=cfg)
            s = scan_checkpoint(d)  # warm-up
            times = []
            for _ in range(args.repeat):
                t0 = time.perf_counter()
                scan_checkpoint(d)
                times.append(time.perf_counter() - t0)
            print(f"{name:<38} {s.total_bytes:>20,} {s.tensor_count:>8,} {min(times):>7.3f} "
                  f"{statistics.median(times):>9.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
