#!/usr/bin/env python3
"""Hold GPU memory with torch until stdin closes (for scripts/validate_gpu.py).

``python3 scripts/gpu_hold.py --gib 100 [--device 0]`` allocates GIB × 2^30 bytes with one plain
``torch.empty`` (cudaMalloc through the caching allocator, no managed memory), writes it once,
then prints one JSON line: ``pid``, ``requested_bytes``, torch's ``memory_reserved`` /
``memory_allocated``, and ``torch.cuda.mem_get_info()`` as ``free_bytes`` / ``total_bytes``
(CUDA's view: total = NVML total − reserved). It then waits until its stdin is closed and exits,
freeing the memory.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

import torch


def main() -> int:
    """Allocate, report, wait for stdin to close."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--gib", type=float, default=100.0)
    ap.add_argument("--device", type=int, default=0)
    args = ap.parse_args()
    dev = torch.device("cuda", args.device)
    n = int(args.gib * (1 << 30))
    held = torch.empty(n, dtype=torch.uint8, device=dev)
    held.fill_(1)
    torch.cuda.synchronize(dev)
    free, total = torch.cuda.mem_get_info(dev)
    print(json.dumps({"pid": os.getpid(), "requested_bytes": n,
                      "torch_memory_reserved": torch.cuda.memory_reserved(dev),
                      "torch_memory_allocated": torch.cuda.memory_allocated(dev),
                      "free_bytes": free, "total_bytes": total,
                      "device_name": torch.cuda.get_device_name(dev)}), flush=True)
    sys.stdin.read()
    del held
    return 0


if __name__ == "__main__":
    sys.exit(main())
