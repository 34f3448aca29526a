"""Write the README screenshot: the app on the NVML double (``docs/screenshot.svg``).

Usage: ``python tests/make_screenshot.py [OUT.svg] [--size COLSxROWS]`` (default
``docs/screenshot.svg`` at 100x30). The seat is :func:`screen_fixtures.seat_app` on the embedded
default profile: every panel (two H200s with a ~100 GiB vLLM worker in the ``seat-resident``
container on GPU 0, the fleet timers, a silence on the seat, the fit budget, the engine, the
containers) from recorded readings at a fixed clock, so the picture is the same on every run;
the header shows the default profile's refresh interval.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from app_fixtures import default_loaded
from screen_fixtures import seat_app


async def take(out: Path, size: tuple[int, int]) -> None:
    """Run the whole recorded seat headless, wait for every panel, save the SVG to ``out``."""
    # the header shows the default profile's refresh interval, as a real run of it does
    interval = default_loaded().profile.console.refresh_interval_s
    app, _srcs = seat_app(silence_active=True, interval=interval)
    async with app.run_test(size=size) as pilot:
        while not (all(st.polls for st in app.states.values()) and app.runbook_reads):
            await pilot.pause(0.01)
        await pilot.pause()
        out.parent.mkdir(parents=True, exist_ok=True)
        app.save_screenshot(filename=out.name, path=str(out.parent))


def main() -> int:
    """Parse the arguments and write the screenshot; returns 0."""
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("out", nargs="?", default="docs/screenshot.svg")
    ap.add_argument("--size", default="100x30", help="terminal COLSxROWS")
    args = ap.parse_args()
    cols, rows = (int(x) for x in args.size.lower().split("x"))
    os.environ.setdefault("TZ", "UTC")
    asyncio.run(take(Path(args.out), (cols, rows)))
    print(args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
