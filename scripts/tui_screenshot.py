#!/usr/bin/env python3
"""Render the Seat Console headless and save SVG screenshots once the GPU panel has data.

``python3 scripts/tui_screenshot.py OUT_DIR [--size 120x40 --size 80x24]`` runs
:class:`seat_console.tui.app.SeatConsoleApp` under Textual's ``App.run_test`` (no terminal), waits until
the ``gpus`` source has delivered a reading (polling ``pilot.pause()``, at most 30 s), lets the
panel draw, and writes ``seat-console-COLSxROWS.svg`` per size with ``App.save_screenshot``.
Prints the paths and the GPU reading's kind (snapshot or unavailable reason).
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from seat_console.tui.app import SeatConsoleApp
from seat_console.core.profile import load_profile


async def shoot(out: Path, cols: int, rows: int) -> Path:
    """One screenshot at ``cols``×``rows``; returns its path."""
    app = SeatConsoleApp(load_profile(), interval=1.0, watch_terminal=False)
    path = out / f"seat-console-{cols}x{rows}.svg"
    async with app.run_test(size=(cols, rows)) as pilot:
        deadline = time.monotonic() + 30
        state = app._states.get("gpus")
        while state is not None and state.reading is None and time.monotonic() < deadline:
            await pilot.pause(0.1)
        for _ in range(5):
            await pilot.pause(0.1)
        app.save_screenshot(filename=path.name, path=str(out))
        kind = type(state.reading).__name__ if state is not None else "no gpus source"
        print(f"{path} ({cols}x{rows}; gpus reading: {kind})")
    app.close_sources()
    return path


def main() -> int:
    """Parse arguments and take each screenshot."""
    ap = argparse.ArgumentParser()
    ap.add_argument("out", type=Path)
    ap.add_argument("--size", action="append", default=None, help="COLSxROWS (repeatable)")
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    for size in args.size or ["120x40", "80x24"]:
        cols, rows = (int(x) for x in size.split("x"))
        asyncio.run(shoot(args.out, cols, rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
