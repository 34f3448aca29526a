#!/usr/bin/env python3
"""The TUI's GPU panel against ``nvidia-smi``, to the MiB, on the card as it is now.

Starts the console's Textual app headless (``App.run_test``, ``--size`` 120x40, the profile of
``--profile`` or the embedded default, ``--interval`` 1 s), then:

1. reads ``nvidia-smi --query-gpu=index,memory.used,memory.total,memory.reserved
   --format=csv,noheader,nounits`` (MiB, 2^20 B, which nvidia-smi rounds up);
2. waits (up to ``--timeout`` s) for the GPU panel to be given a :class:`GpuSnapshot` sampled
   after that read; takes the panel's reading (``panel.reading``: the bytes it draws) and the
   text its widgets show (every ``Static`` inside the panel, plain);
3. reads nvidia-smi again: ``stable`` says both reads were equal (the held memory did not move
   while the panel sampled; the comparison is only meaningful then).

Per card and field (used, total, reserved): the panel's bytes agree when
``ceil(bytes / 2^20)`` equals nvidia-smi's MiB exactly (nvidia-smi rounds up;
docs/validation.md). The panel's text agrees when its ``used X/Y GiB`` (GiB = 2^30 B, two
decimals, truncated toward zero by ``core.fmt.gib``; Y is the CUDA-visible total, total −
reserved) is within the display's step (0.01 GiB) plus nvidia-smi's rounding (1 MiB per
figure, so 2 MiB for a difference) of nvidia-smi's used and total − reserved.

``--nvml-double`` puts the NVML double (``tests/nvml_double.py``, via
``benchmarks/nvml_double_console.py``) where ``pynvml`` stands: for rehearsing on a machine
without a GPU, with ``--smi`` naming a stand-in that prints the double's figures. Not a test.

Usage::

    python3 benchmarks/panel_vs_smi.py --json OUT.json [--smi nvidia-smi] [--profile FILE]

Exit status: 0 every figure agrees and the card was stable, 1 a figure disagrees or the
card moved, 2 nothing could be compared (no nvidia-smi, no reading, the app failed).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import re
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MiB = 1 << 20
GiB = 1 << 30
FIELDS = ("used", "total", "reserved")
QUERY = ["--query-gpu=index,memory.used,memory.total,memory.reserved",
         "--format=csv,noheader,nounits"]
PANEL_USED = re.compile(r"GPU (\d+)\b.*?\bused(?:\+rsv)?\s+([\d,.]+)/([\d,.]+) GiB")
"""The panel's ``GPU 0 H200  SEAT  used  97.66/139.80 GiB`` line (compact view and cards)."""
TEXT_TOLERANCE_GIB = 0.01 + 2 / 1024
"""The display's step (two decimals, truncated) plus nvidia-smi's rounding up of two figures."""


def read_smi(smi: str) -> dict[int, dict[str, int]]:
    """``{index: {"used": MiB, "total": MiB, "reserved": MiB}}`` from one nvidia-smi query.

    Raises ``RuntimeError`` naming the command when it fails or prints a row that is not four
    integers (e.g. ``[N/A]``)."""
    p = subprocess.run([smi, *QUERY], capture_output=True, text=True, timeout=60, check=False)
    if p.returncode != 0:
        raise RuntimeError(f"{smi} {' '.join(QUERY)}: rc {p.returncode}: {p.stderr.strip()[-300:]}")
    out: dict[int, dict[str, int]] = {}
    for line in p.stdout.strip().splitlines():
        cells = [c.strip() for c in line.split(",")]
        if len(cells) != 4 or not all(c.isdigit() for c in cells):
            raise RuntimeError(f"{smi}: row {line!r} is not index,used,total,reserved in MiB")
        i, used, total, reserved = (int(c) for c in cells)
        out[i] = {"used": used, "total": total, "reserved": reserved}
    return out


def panel_text(panel: object) -> str:
    """The plain text of every ``Static`` inside ``panel`` (what the panel shows now)."""
    from rich.text import Text
    from textual.widgets import Static

    lines = []
    for w in panel.query(Static):  # type: ignore[attr-defined]
        c = w.content
        lines.append(c.plain if isinstance(c, Text) else str(c))
    return "\n".join(x for x in lines if x)


def compare(snap: object, text: str, smi: dict[int, dict[str, int]]) -> list[dict]:
    """One row per card of ``snap`` and field: bytes, ceil MiB, nvidia-smi MiB, agree; then
    one row per card for the panel's ``used X/Y GiB`` text against nvidia-smi."""
    rows: list[dict] = []
    shown = {int(m[1]): (float(m[2].replace(",", "")), float(m[3].replace(",", "")))
             for m in PANEL_USED.finditer(text)}
    for card in snap.cards:  # type: ignore[attr-defined]
        mem = card.memory
        s = smi.get(card.index)
        for f in FIELDS:
            b = None if mem is None else getattr(mem, f"{f}_bytes")
            mib = None if b is None else math.ceil(b / MiB)
            rows.append({"card": card.index, "field": f"memory.{f}", "panel_bytes": b,
                         "panel_mib_ceil": mib, "panel_mib_exact": None if b is None else b / MiB,
                         "nvidia_smi_mib": None if s is None else s[f],
                         "agree": s is not None and mib == s[f]})
        if card.index in shown and s is not None:
            used_gib, visible_gib = shown[card.index]
            want_used = s["used"] / 1024
            want_visible = (s["total"] - s["reserved"]) / 1024
            rows.append({"card": card.index, "field": "panel text used/CUDA-visible GiB",
                         "panel_text": [used_gib, visible_gib],
                         "nvidia_smi_gib": [round(want_used, 4), round(want_visible, 4)],
                         "agree": (abs(used_gib - want_used) <= TEXT_TOLERANCE_GIB
                                   and abs(visible_gib - want_visible) <= TEXT_TOLERANCE_GIB)})
        else:
            rows.append({"card": card.index, "field": "panel text used/CUDA-visible GiB",
                         "panel_text": None, "agree": False,
                         "why": "no 'GPU N … used X/Y GiB' line for this card in the panel"
                         if s is not None else "nvidia-smi lists no such card"})
    return rows


async def panel_reading(args: argparse.Namespace, smi: str) -> dict:
    """Run the app headless; return the smi reads, the panel's reading and text, the rows."""
    from seat_console.core.profile import load_profile
    from seat_console.sources.gpu import GpuSnapshot
    from seat_console.tui.app import SeatConsoleApp
    from seat_console.widgets.gpu import GpuPanel

    cols, rows = (int(x) for x in args.size.lower().split("x"))
    app = SeatConsoleApp(load_profile(args.profile), interval=args.interval)
    out: dict = {}
    async with app.run_test(size=(cols, rows)) as pilot:
        before = read_smi(smi)
        t_before = datetime.now(UTC)
        panel = app.query_one(GpuPanel)
        end = time.monotonic() + args.timeout
        while time.monotonic() < end:
            r = panel.reading
            if isinstance(r, GpuSnapshot) and r.sampled_at > t_before:
                break
            await pilot.pause(0.1)
        else:
            out["error"] = (f"the GPU panel had no GpuSnapshot sampled after "
                            f"{t_before.isoformat()} within {args.timeout} s; it had "
                            f"{type(panel.reading).__name__}: {str(panel.reading)[:300]}")
            out["smi_before"] = before
            return out
        await pilot.pause(0.2)   # let the panel's text follow the reading it was given
        snap, text = panel.reading, panel_text(panel)
        after = read_smi(smi)
    out.update({"smi_before": before, "smi_after": after, "stable": before == after,
                "panel_sampled_at": snap.sampled_at.isoformat(),
                "panel_text": text, "driver_version": snap.driver_version,
                "memory_api": snap.memory_api,
                "cards": [{"index": c.index, "name": c.name, "uuid": c.uuid,
                           "memory": None if c.memory is None else c.memory.model_dump(),
                           "processes": [p.model_dump(include={"pid", "used_memory_bytes",
                                                                "name", "mapped"})
                                         for p in c.processes or []]}
                          for c in snap.cards],
                "rows": compare(snap, text, after)})
    return out


def main(argv: list[str] | None = None) -> int:
    """Parse the arguments, compare, print a table, write the JSON; exit as the docstring says."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--smi", default="nvidia-smi", help="the nvidia-smi to run")
    ap.add_argument("--profile", default=None, help="seat profile (default: embedded)")
    ap.add_argument("--size", default="120x40")
    ap.add_argument("--interval", type=float, default=1.0)
    ap.add_argument("--timeout", type=float, default=30.0)
    ap.add_argument("--nvml-double", action="store_true",
                    help="the NVML double as pynvml (rehearsal without a GPU)")
    ap.add_argument("--json", metavar="FILE")
    args = ap.parse_args(argv)
    if args.nvml_double:
        sys.path.insert(0, str(ROOT / "benchmarks"))
        from nvml_double_console import install

        install()
    result: dict = {"benchmark": "GPU panel vs nvidia-smi, MiB",
                    "date_utc": datetime.now(UTC).isoformat(timespec="seconds"),
                    "nvml_double": args.nvml_double, "size": args.size}
    try:
        result |= asyncio.run(panel_reading(args, args.smi))
    except (RuntimeError, OSError, subprocess.TimeoutExpired) as exc:
        result["error"] = f"{type(exc).__name__}: {exc}"
    rows = result.get("rows", [])
    for r in rows:
        print(f"card {r['card']} {r['field']:34} panel "
              f"{r.get('panel_mib_ceil', r.get('panel_text'))!s:>16} "
              f"nvidia-smi {r.get('nvidia_smi_mib', r.get('nvidia_smi_gib'))!s:>16} "
              f"{'agree' if r['agree'] else 'DIFFER'}")
    if "error" in result:
        print("error:", result["error"])
    ok = bool(rows) and all(r["agree"] for r in rows) and result.get("stable", False)
    result["all_agree"] = ok
    print(f"stable: {result.get('stable')}  all agree: {ok}")
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2, default=str))
    if not rows:
        return 2
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
