"""Write the README screenshot: the app on the NVML double (``docs/screenshot.svg``).

Usage: ``python tests/make_screenshot.py [OUT.svg] [--size COLSxROWS]`` (default
``docs/screenshot.svg`` at 100x27). The seat is :func:`app_fixtures.demo_app`: two H200s, a
~100 GiB vLLM worker in the ``seat-resident`` container on GPU 0, five minutes of history at a
fixed clock (polls after the recorded five minutes change nothing), so the picture is the same
on every run.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from app_fixtures import demo_app, loading_script


async def take(out: Path, size: tuple[int, int]) -> None:
    """Run the demo app headless, take every scripted reading, save the SVG to ``out``."""
    app, src = demo_app(interval=1.0)  # the default interval, as an engineer would see it
    async with app.run_test(size=size) as pilot:
        st = app.states["gpus"]
        while src.reads < len(loading_script(1)):
            before = st.polls
            await pilot.press("r")  # also polled by the 1 s timer; either takes the next step
            while st.polls == before:
                await pilot.pause()
        await pilot.pause()
        out.parent.mkdir(parents=True, exist_ok=True)
        app.save_screenshot(filename=out.name, path=str(out.parent))


def main() -> int:
    """Parse the arguments and write the screenshot; returns 0."""
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("out", nargs="?", default="docs/screenshot.svg")
    ap.add_argument("--size", default="100x27", help="terminal COLSxROWS")
    args = ap.parse_args()
    cols, rows = (int(x) for x in args.size.lower().split("x"))
    os.environ.setdefault("TZ", "UTC")
    asyncio.run(take(Path(args.out), (cols, rows)))
    print(args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
