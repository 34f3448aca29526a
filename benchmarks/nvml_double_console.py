#!/usr/bin/env python3
"""Run ``seat-console`` (the TUI or any command) with the NVML double as ``pynvml``.

For measuring the start-up path (exec → first frame with GPU data) and memory on a machine
without a GPU: ``tests/nvml_double.py``'s :class:`NvmlDouble` with two idle H200s stands where
``pynvml`` stands (``sys.modules["pynvml"]``), so the console's own import order is unchanged
(nothing of ``seat_console`` is imported before ``cli.main``). ``--init-s S`` makes ``nvmlInit``
take S seconds (``time.sleep``, which releases the GIL as the real ctypes call does; an idle
H200's ``nvmlInit`` is tens of milliseconds). Not a test.

Usage (the arguments after ``--`` go to ``seat-console``)::

    python3 benchmarks/nvml_double_console.py [--init-s 0.05] -- --interval 1
    python3 benchmarks/bench_vs_nvitop.py --order A \\
        --seat-cmd "python3 benchmarks/nvml_double_console.py -- --interval 1"
"""

from __future__ import annotations

# this launcher runs ``seat_console.cli.main`` as its process's entry, as ``seat-console`` does:
# set before anything imports ``seat_console``, whose first act then holds Ctrl-C
# (seat_console.core.interrupt.ENTRY_MARK)
__seat_console_entry__ = True

import sys  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

T_EXEC = time.monotonic()
ROOT = Path(__file__).resolve().parents[1]


def install(init_s: float = 0.0) -> object:
    """Put an :class:`NvmlDouble` of two H200s in ``sys.modules["pynvml"]``; return it."""
    sys.path.insert(0, str(ROOT / "tests"))
    from nvml_double import FakeProcess, NvmlDouble, h200_pair

    cards = h200_pair()
    held = 100 * 2**30   # a process holds most of card 0, as on the GPU machine's runs
    cards[0].processes = [FakeProcess(pid=4242, used=held)]
    cards[0].used = held + 9_240_576   # + memory NVML attributes to no process (docs/validation.md)
    double = NvmlDouble(cards)
    if init_s > 0:
        real_init = double.nvmlInit

        def slow_init() -> None:
            time.sleep(init_s)
            real_init()

        double.nvmlInit = slow_init  # type: ignore[method-assign]
    sys.modules["pynvml"] = double  # type: ignore[assignment]
    sys.path.pop(0)
    return double


def main() -> int:
    """Parse ``[--init-s S] [--] ARGS…``, install the double, run ``seat_console.cli.main``."""
    argv = sys.argv[1:]
    init_s = 0.0
    if argv[:1] == ["--init-s"]:
        init_s = float(argv[1])
        argv = argv[2:]
    if argv[:1] == ["--"]:
        argv = argv[1:]
    install(init_s)
    from seat_console.cli import main as cli_main

    return cli_main(argv)


if __name__ == "__main__":
    sys.exit(main())
