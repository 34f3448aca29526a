"""``seat-console gpus [--json]``: one GPU snapshot, headless.

``--json`` prints ``GpuSnapshot.model_dump(mode="json")`` — the same model the TUI's GPU panel
renders (:mod:`seat_console.sources.gpu`); without it, a table with sizes in GiB (2^30 B) and MiB (2^20 B,
nvidia-smi's unit).

Exit codes (``seat_console.cli``): 0 — a snapshot was taken (check each card's ``state``: a lost card
is reported, not an exit code); 3 — no GPU or NVML unavailable (no library, no driver,
driver/library version mismatch, no permission): the reason goes to stderr, and with ``--json``
the :class:`~seat_console.core.base.Unavailable` model goes to stdout; 1 — any other error.

Tests inject the NVML double by replacing :func:`seat_console.node.nvml.module_factory` (see
``tests/test_gpu_cli.py``).
"""

from __future__ import annotations

import argparse
import os
import sys

from seat_console.core import jsonout
from seat_console.sources.gpu import GpuCard, GpuProcess, GpuSnapshot, MemoryReading, make_source
from seat_console.core.fmt import gib, zulu_time
from seat_console.core.profile import LoadedProfile, MiB
from seat_console.core.base import Unavailable, read_once

EXIT_OK, EXIT_ERROR, EXIT_UNAVAILABLE = 0, 1, 3
UNAVAILABLE_KINDS = {"no-library", "no-driver", "version-mismatch", "no-permission", "no-gpu"}


def register(sub: argparse._SubParsersAction) -> None:
    """Add the ``gpus`` subcommand."""
    p = sub.add_parser("gpus", help="print one GPU snapshot (NVML): memory per card, processes",
                       description="Print one GPU snapshot. Sizes: GiB = 2^30 B, MiB = 2^20 B. "
                                   "GPU numbers are NVML indices (nvidia-smi's order), not CUDA "
                                   "ordinals. Exit 0 ok, 3 no GPU / NVML unavailable, 1 error.")
    p.add_argument("--json", action="store_true",
                   help="print the snapshot model as JSON (the model the TUI renders)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace, loaded: LoadedProfile | None) -> int:
    """Take one snapshot and print it; returns the exit code (see the module docstring)."""
    reading = read_once(make_source(loaded))
    if isinstance(reading, Unavailable):
        print(f"seat-console gpus: {reading}", file=sys.stderr)
        if args.json:
            print(jsonout.dumps(reading.model_dump(mode="json"), indent=2))
        return EXIT_UNAVAILABLE if reading.kind in UNAVAILABLE_KINDS else EXIT_ERROR
    assert isinstance(reading, GpuSnapshot)
    if args.json:
        print(jsonout.dumps(reading.model_dump(mode="json"), indent=2))
    else:
        sys.stdout.write(render_table(reading))
    return EXIT_OK


# ---------------------------------------------------------------------- text rendering

def mib_as_nvidia_smi(n: int) -> int:
    """``n`` bytes in whole MiB rounded *up*, as nvidia-smi prints them.

    Observed on an H200 (driver 580.159.04, docs/validation.md): every nvidia-smi memory figure
    equalled ceil(bytes / 2^20) of NVML's byte count, e.g. reserved 644,939,776 B = 615.06 MiB
    printed as 616, free 42,086,825,984 B = 40,137.12 MiB printed as 40,138.
    """
    return -(-n // MiB)


def _size(n: int | None) -> str:
    """``n`` bytes as ``"140.40 GiB (143,771 MiB)"``; MiB rounded up as nvidia-smi prints."""
    if n is None:
        return "n/a"
    return f"{gib(n)} GiB ({mib_as_nvidia_smi(n):,} MiB)"


def _v(value: object, unit: str = "") -> str:
    return "n/a" if value is None else f"{value}{unit}"


def _watts(mw: int | None) -> str:
    return "n/a" if mw is None else f"{mw / 1000:.1f} W"


def _memory_lines(mem: MemoryReading | None, indent: str) -> list[str]:
    if mem is None:
        return [f"{indent}memory: n/a"]
    lines = [
        f"{indent}memory (NVML {mem.api}): total {_size(mem.total_bytes)}",
        f"{indent}  reserved {_size(mem.reserved_bytes)}"
        + ("  (v1 API: reserved is counted in used)" if mem.used_includes_reserved else ""),
        f"{indent}  {mem.used_label} {_size(mem.used_bytes)}",
        f"{indent}  free {_size(mem.free_bytes)}",
        f"{indent}  CUDA-visible (total - reserved) {_size(mem.cuda_visible_bytes)}",
    ]
    return lines


def _process_lines(procs: list[GpuProcess] | None, indent: str) -> list[str]:
    if procs is None:
        return [f"{indent}processes: n/a"]
    if not procs:
        return [f"{indent}processes: none"]
    lines = [f"{indent}{'PID':>8}  {'used':>24}  {'name':<16} {'container':<20} command"]
    for p in procs:
        if p.mapped:
            name = p.name or "n/a"
            container = "-"
            if p.container is not None:
                container = p.container.name or f"{p.container.runtime}:{p.container.short_id}"
            command = " ".join(p.command) if p.command else "n/a"
        else:
            name, container, command = "(unmapped)", "?", p.unmapped_reason or ""
        mig = ""
        if p.gpu_instance_id is not None:
            mig = f" [GI {p.gpu_instance_id} CI {_v(p.compute_instance_id)}]"
        lines.append(f"{indent}{p.pid:>8}  {_size(p.used_memory_bytes):>24}  {name[:16]:<16} "
                     f"{container[:20]:<20} {command[:100]}{mig}")
    return lines


def _card_lines(card: GpuCard) -> list[str]:
    seat = f"  [serves the seat: node.gpus {card.seat_match!r}]" if card.serves_seat else ""
    head = (f"GPU {_v(card.index)}  {card.name or 'n/a'}  {card.uuid or 'uuid n/a'}  "
            f"bus {card.pci_bus_id or 'n/a'}{seat}")
    if card.state != "ok":
        return [head, f"  STATE {card.state.upper()}: {card.state_reason}"]
    lines = [head, *_memory_lines(card.memory, "  ")]
    lines.append(f"  utilisation {_v(card.utilization_gpu_pct, ' %')} (memory "
                 f"{_v(card.utilization_memory_pct, ' %')})  temperature "
                 f"{_v(card.temperature_c, ' °C')}  power {_watts(card.power_draw_mw)} / "
                 f"{_watts(card.power_limit_mw)}")
    if card.mig_enabled:
        lines.append(f"  MIG enabled: {len(card.mig_instances)} instance(s)")
        for inst in card.mig_instances:
            lines.append(f"    MIG {inst.index} {inst.name or 'n/a'} {inst.uuid or 'n/a'} "
                         f"(GI {_v(inst.gpu_instance_id)}, CI {_v(inst.compute_instance_id)})")
            lines += _memory_lines(inst.memory, "      ")
            lines += _process_lines(inst.processes, "      ")
    else:
        api = f" (NVML {card.processes_api})" if card.processes_api else ""
        total = card.process_memory_bytes
        lines.append(f"  compute processes{api}: {len(card.processes or [])}, memory "
                     f"{_size(total) if card.processes is not None else 'n/a'}")
        lines += _process_lines(card.processes, "    ")
    if card.unsupported:
        lines.append(f"  not supported by NVML on this card (n/a): {', '.join(card.unsupported)}")
    for field, err in card.errors.items():
        lines.append(f"  error reading {field}: {err}")
    return lines


def render_table(snap: GpuSnapshot) -> str:
    """The human table for one snapshot (sizes in GiB = 2^30 B and MiB = 2^20 B)."""
    lines = [
        (f"GPUs: {len(snap.cards)}  driver {_v(snap.driver_version)}  CUDA "
         f"{_v(snap.cuda_driver_version)}  sampled {zulu_time(snap.sampled_at)} in "
         f"{snap.sample_duration_s * 1000:.1f} ms"),
        "sizes: GiB = 2^30 bytes, MiB = 2^20 bytes (nvidia-smi's unit, rounded up as it does)",
    ]
    if snap.unmatched_seat_gpus:
        lines.append("WARNING: node.gpus entries matching no card: "
                     + ", ".join(snap.unmatched_seat_gpus))
    for conflict in snap.seat_conflicts:
        lines.append(f"ERROR: {conflict}")
    for var in ("CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER"):
        if var in os.environ:
            lines.append(f"WARNING: {var}={os.environ[var]!r} is set in this environment; the "
                         "GPU numbers here are NVML indices (nvidia-smi's order), not CUDA "
                         "ordinals")
    for card in snap.cards:
        lines.append("")
        lines += _card_lines(card)
    return "\n".join(lines) + "\n"
