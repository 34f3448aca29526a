"""The GPU panel's compact lines, without Textual: one line per card, then the warnings.

:func:`compact` draws the compact GPU panel
(:meth:`seat_console.widgets.gpu.GpuPanel.render_compact`) from a ``GpuSnapshot``;
:func:`memory_cells` (used / total GiB and the bar) is also what the first frame, drawn before
Textual and pydantic load (:func:`seat_console.tui.first_frame.nvml_lines`), shows per card, so both
draw memory the same way. Imports Rich and :mod:`seat_console.core.fmt` only: the GPU source's
models are annotations here, so this module needs neither Textual nor pydantic (~0.3 s of
imports the first frame does not wait for).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.text import Text

from seat_console.core.fmt import gib_unit

if TYPE_CHECKING:   # no pydantic at run time: the first frame draws before it is imported
    from seat_console.sources.gpu import GpuSnapshot

USED_STYLE = {False: "green", True: "yellow"}
"""Used segment: green (v2 memory API), yellow when it includes the reserved part (v1)."""
RESERVED_STYLE = "magenta"
FREE_STYLE = "blue"

BAR_CELLS = 12
"""Cells of the compact line's memory bar (█ used ░ free, of the card's total)."""


def na(v: object, fmt: str = "{}") -> str:
    """``fmt`` applied to ``v``, or ``"n/a"`` when ``v`` is ``None`` (never 0 for unknown)."""
    return "n/a" if v is None else fmt.format(v)


def memory_cells(used: int | None, shown_total: int | None, total: int | None,
                 used_includes_reserved: bool) -> Text:
    """`` used  97.66/139.80 GiB ██████████░░ ``: used / ``shown_total`` bytes in GiB (2^30 B;
    the label is "used+rsv" when ``used`` includes the driver-reserved memory, NVML's v1 API)
    and a :data:`BAR_CELLS`-cell bar of used over ``total``; ``"  memory n/a"`` when ``total``
    is unknown or 0 (never a 0 % bar for unknown)."""
    t = Text()
    if not total:
        t.append("  memory n/a", style="dim")
        return t
    label = "used" if not used_includes_reserved else "used+rsv"
    t.append(f" {label} {gib_unit(used).removesuffix(' GiB'):>6}/{gib_unit(shown_total or total)} ")
    n = 0 if used is None else max(0, min(BAR_CELLS, round(BAR_CELLS * used / total)))
    t.append("█" * n, style=USED_STYLE[used_includes_reserved])
    t.append("░" * (BAR_CELLS - n), style=FREE_STYLE)
    return t


def card_lines(snap: GpuSnapshot) -> Text:
    """One line per card of ``snap``: index, name, SEAT (or ----) / LOST / ERROR with its
    reason, used / CUDA-visible total in GiB (2^30 B; "used+rsv" under the v1 memory API), a
    :data:`BAR_CELLS`-cell bar, GPU utilisation, and the containers holding the card ("idle"
    when none; nothing when processes are unknown)."""
    t = Text()
    for i, c in enumerate(snap.cards):
        if i:
            t.append("\n")
        t.append(f"GPU {na(c.index)} ", style="bold")
        t.append(f"{(c.name or 'n/a').removeprefix('NVIDIA ')} ")
        if c.state != "ok":
            t.append(f" {c.state.upper()} ", style="bold reverse red")
            t.append(f" {c.state_reason or ''}".rstrip())
            continue
        t.append(" SEAT " if c.serves_seat else " ---- ",
                 style="bold reverse green" if c.serves_seat else "dim")
        m = c.memory
        if m is None:
            t.append("  memory n/a", style="dim")
        else:
            t.append_text(memory_cells(m.used_bytes, m.cuda_visible_bytes or m.total_bytes,
                                       m.total_bytes, m.used_includes_reserved))
        t.append(f" {na(c.utilization_gpu_pct, '{:>3} %')}")
        names = sorted({p.container.name or p.container.short_id for p in c.processes or ()
                        if p.container is not None})
        if names:
            t.append(f" {', '.join(names)}")
        elif c.processes is not None and not c.processes:
            t.append(" idle", style="dim")
    return t


def summary(snap: GpuSnapshot) -> Text:
    """The snapshot's first line (driver, CUDA, cards, cards in the seat, the GiB rule), then
    one line per warning: the v1 memory API, ``node.gpus`` entries that matched no card, and
    seat conflicts."""
    t = Text()
    t.append(f"driver {na(snap.driver_version)} · CUDA {na(snap.cuda_driver_version)} · "
             f"{len(snap.cards)} card(s), {len(snap.seat_cards)} in the seat · "
             "GiB = 2^30 B")
    if snap.memory_api == "v1":
        t.append("\nv1 memory API: 'used' includes the driver-reserved memory", style="yellow")
    if snap.unmatched_seat_gpus:
        t.append(f"\nprofile node.gpus matched no card: {', '.join(snap.unmatched_seat_gpus)}",
                 style="bold yellow")
    for conflict in snap.seat_conflicts:
        t.append(f"\n{conflict}", style="bold red")
    return t


def compact(snap: GpuSnapshot) -> Text:
    """:func:`card_lines`, then the :func:`summary`'s warnings (not its first line) in
    yellow: what the compact GPU panel draws."""
    t = card_lines(snap)
    s = summary(snap)
    if "\n" in s.plain:
        t.append("\n")
        t.append_text(Text(s.plain.split("\n", 1)[1], style="yellow"))
    return t


__all__ = ["BAR_CELLS", "FREE_STYLE", "RESERVED_STYLE", "USED_STYLE", "card_lines", "compact",
           "memory_cells", "na", "summary"]
