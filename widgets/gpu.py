"""The GPU panel: one block per card from a :class:`seat_console.sources.gpu.GpuSnapshot`.

Per card: identity (NVML index for display only, name, UUID, PCI bus id; SEAT when the profile's
``node.gpus`` names it; LOST when it fell off the bus), a bar of used | reserved | free memory
with the numbers in GiB (2^30 B), utilisation / temperature / power, a sparkline of used memory
over the profile's ``console.history_s``, and the compute-process table (PID, process name,
container, used memory; PIDs this console cannot map are shown as such, their memory counted).

Unknown values render ``n/a`` (never 0). With NVML's v1 memory API (no ``reserved`` figure) the
bar and the numbers say "used incl. reserved". When NVML as a whole is unavailable the base
class shows the reason; :meth:`GpuPanel.unavailable_hint` adds what that state means.

The widget does no I/O: it draws the frozen snapshot it is given (which the app obtained in a
worker thread) and keeps only a display history of used memory per card key.
"""

from __future__ import annotations

from collections import deque
from datetime import datetime, timedelta
from itertools import pairwise
from typing import ClassVar

from pydantic import BaseModel
from rich.console import Console, ConsoleOptions, Group, RenderResult
from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Container
from textual.widget import Widget
from textual.widgets import Static

from seat_console.sources.gpu import GpuCard, GpuProcess, GpuSnapshot, MemoryReading, MigInstance
from seat_console.core.fmt import GIB, fmt_duration, gib_unit
from seat_console.core.base import Unavailable
from seat_console.widgets import gpu_lines
from seat_console.widgets.panel import SourcePanel

GiB = GIB
"""Bytes in one GiB (2^30; :data:`seat_console.core.fmt.GIB`), the display unit."""

SPARK_CHARS = " ▁▂▃▄▅▆▇█"
"""Sparkline levels: index 0 (blank) means no sample in that time bucket."""

HINTS: dict[str, str] = {
    "no-library": "No GPU memory can be shown on this machine. On a serving node, install the "
                  "NVIDIA driver. The other panels are not affected.",
    "no-driver": "Check `nvidia-smi` on the node; a reboot may be needed after a driver "
                 "install. The other panels are not affected.",
    "version-mismatch": "Typical after a driver upgrade without a reboot: reboot or reload the "
                        "driver. The other panels are not affected.",
    "no-permission": "Run the console as a user allowed to open /dev/nvidia*. The other panels "
                     "are not affected.",
    "no-gpu": "Check `nvidia-smi -L`. The other panels are not affected.",
}
"""What an NVML ``Unavailable.kind`` means for the engineer (shown under the reason)."""


_USED_STYLE = gpu_lines.USED_STYLE
_RESERVED_STYLE = gpu_lines.RESERVED_STYLE
_FREE_STYLE = gpu_lines.FREE_STYLE


_na = gpu_lines.na


class MemoryBar:
    """Rich renderable: one line, used | reserved | free across the available width.

    Segment widths are proportional to bytes over ``total_bytes`` (rounded, at least one cell
    for a non-zero part). Glyphs differ per segment (█ used, ▓ reserved, ░ free) so the bar reads
    without colour (NO_COLOR). An unknown part leaves its share blank.
    """

    def __init__(self, mem: MemoryReading) -> None:
        self.mem = mem

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        width = max(10, options.max_width)
        m = self.mem
        total = m.total_bytes
        if not total:
            yield Text("memory total n/a".ljust(width), style="dim")
            return
        parts = [(m.used_bytes, "█", _USED_STYLE[m.used_includes_reserved]),
                 (None if m.used_includes_reserved else m.reserved_bytes, "▓", _RESERVED_STYLE),
                 (m.free_bytes, "░", _FREE_STYLE)]
        cells = [0 if not nbytes else max(1, round(width * nbytes / total))
                 for nbytes, _, _ in parts]
        known = (m.used_bytes is not None and m.free_bytes is not None
                 and (m.reserved_bytes is not None or m.used_includes_reserved))
        if known:
            # the parts make up the total: give the rounding difference to the largest part so
            # the bar fills the width exactly
            largest = max(range(3), key=lambda i: cells[i])
            cells[largest] = max(1, cells[largest] + width - sum(cells))
        bar = Text()
        for (_, glyph, style), n in zip(parts, cells, strict=True):
            bar.append(glyph * n, style=style)
        bar.truncate(width, pad=True)
        yield bar


class Spark:
    """Rich renderable: used memory over time, one column per time bucket, scaled 0..total.

    ``points`` are ``(time, used_bytes)``; the axis ends at ``end`` and spans ``span_s`` seconds.
    Each column shows the *maximum* used in its bucket (a short spike stays visible). Between
    samples sparser than the columns, a column repeats the previous sample if that sample is at
    most 2.5 × the median sample spacing old; a longer gap (paused, source hung) stays blank.
    Scaling is absolute (0 to ``total_bytes``), so a flat line at 98 of 140 GiB reads as 70 %
    full, not as noise.
    """

    def __init__(self, points: list[tuple[datetime, int]], end: datetime, span_s: float,
                 total_bytes: int | None) -> None:
        self.points, self.end, self.span_s, self.total = points, end, span_s, total_bytes

    def columns(self, width: int) -> list[int | None]:
        """Used bytes per column (``None``: no sample), ``width`` columns, oldest first."""
        cols: list[int | None] = [None] * width
        last_t: list[datetime | None] = [None] * width
        start = self.end - timedelta(seconds=self.span_s)
        pts = [(t, u) for t, u in self.points if start <= t <= self.end]
        for t, used in pts:
            c = min(width - 1, int((t - start).total_seconds() / self.span_s * width))
            cols[c] = used if cols[c] is None else max(cols[c], used)
            last_t[c] = t if last_t[c] is None else max(last_t[c], t)
        gaps = sorted((b[0] - a[0]).total_seconds() for a, b in pairwise(pts))
        if not gaps:
            return cols
        max_gap = 2.5 * gaps[len(gaps) // 2]
        bucket = self.span_s / width
        prev: tuple[datetime, int] | None = None
        for c in range(width):
            if cols[c] is not None:
                prev = (last_t[c], cols[c])  # type: ignore[assignment]
                continue
            col_t = start + timedelta(seconds=(c + 0.5) * bucket)
            if prev is not None and (col_t - prev[0]).total_seconds() <= max_gap:
                cols[c] = prev[1]
        return cols

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        width = max(1, options.max_width)
        cols = self.columns(width)
        top = self.total or max((u for u in cols if u is not None), default=0) or 1
        out = Text()
        for used in cols:
            if used is None:
                out.append(" ")
            else:
                level = 1 + min(7, int(7 * used / top + 0.5))
                out.append(SPARK_CHARS[level], style="green")
        yield out


def _process_table(procs: list[GpuProcess] | None) -> Table | Text | Group:
    """The process table, largest first; unmapped PIDs say so, with their reasons below."""
    if procs is None:
        return Text("processes: n/a (NVML could not list them)", style="dim")
    if not procs:
        return Text("no compute processes", style="dim")
    t = Table(box=None, pad_edge=False, expand=True, show_edge=False, padding=(0, 1))
    t.add_column("PID", justify="right", no_wrap=True, style="bold")
    t.add_column("process", no_wrap=True, overflow="ellipsis", ratio=2)
    t.add_column("container", no_wrap=True, overflow="ellipsis", ratio=2)
    t.add_column("used", justify="right", no_wrap=True)
    reasons: dict[str, list[int]] = {}
    for p in sorted(procs, key=lambda p: (-(p.used_memory_bytes or 0), p.pid)):
        if p.mapped:
            name = Text(p.name or "n/a")
        else:
            name = Text("unmapped PID", style="italic yellow")
            reasons.setdefault(p.unmapped_reason or "not visible from here", []).append(p.pid)
        if p.container is None:
            ctr = Text("host" if p.mapped else "n/a", style="dim")
        else:
            ctr = Text(p.container.name or p.container.short_id)
        if p.gpu_instance_id is not None:
            name.append(f" (MIG GI {p.gpu_instance_id})", style="dim")
        t.add_row(str(p.pid), name, ctr, gib_unit(p.used_memory_bytes))
    if not reasons:
        return t
    notes = "\n".join(f"unmapped PID {', '.join(map(str, pids))}: {reason} (its memory "
                      "still counts)" for reason, pids in reasons.items())
    return Group(t, Text(notes, style="dim italic"))


class GpuCardView(Widget):
    """One card: title, memory numbers and bar, utilisation line, sparkline, processes.

    A single widget that renders a Rich group from its last :class:`GpuCard` (``card``), the
    snapshot time and the used-memory history; ``present`` is False when the latest snapshot no
    longer lists the card (kept, marked, so a vanished seat card is not silently dropped).
    """

    DEFAULT_CSS = """
    GpuCardView { height: auto; padding: 0 0 1 0; }
    """

    def __init__(self, card: GpuCard, history_s: float, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.card = card
        self.present = True
        self.history_s = history_s
        self.points: deque[tuple[datetime, int]] = deque()
        self.end: datetime | None = None
        self.total_bytes: int | None = None
        """Last known memory total (bytes): the sparkline's scale, kept when a card is lost."""

    def update_card(self, card: GpuCard | None, at: datetime) -> None:
        """Take the card's reading of the snapshot taken at ``at`` (``None``: not listed).

        Redraws only when what the view shows changed (the card's fields, its presence, or a
        sparkline column); re-lays out only when its number of lines may have changed (state,
        processes, MIG instances, problems)."""
        before = self._signature()
        self.end = at
        if card is None:
            self.present = False
        else:
            self.present = True
            self.card = card
            if card.memory is not None and card.memory.total_bytes:
                self.total_bytes = card.memory.total_bytes
            used = card.memory.used_bytes if card.memory is not None else None
            if used is not None and card.state == "ok":
                self.points.append((at, used))
        cutoff = at - timedelta(seconds=self.history_s)
        while self.points and self.points[0][0] < cutoff:
            self.points.popleft()
        after = self._signature()
        if after != before:
            self.refresh(layout=before is None or after[0] != before[0])

    def _signature(self) -> tuple | None:
        """(what decides the view's height, what it draws) — compared across updates."""
        if self.end is None:
            return None
        c = self.card
        shape = (c.state, self.present, len(c.processes or ()), c.processes is None,
                 len(c.mig_instances), len(c.unsupported), len(c.errors), bool(self.points))
        width = max(10, self.size.width - 20)
        spark = (tuple(Spark(list(self.points), self.end, self.history_s,
                             self.total_bytes).columns(width)) if self.points else ())
        return shape, c, spark

    def _title(self) -> Text:
        c = self.card
        t = Text(no_wrap=True, overflow="ellipsis")
        t.append(f"GPU {_na(c.index)}", style="bold")
        t.append(f"  {c.name or 'n/a'}")
        if c.serves_seat:
            t.append("  ")
            t.append(" SEAT ", style="bold reverse green")
        else:
            t.append("  not in the seat", style="dim")
        if c.state == "lost":
            t.append("  ")
            t.append(" LOST ", style="bold reverse red")
        elif c.state == "error":
            t.append("  ")
            t.append(" ERROR ", style="bold reverse red")
        if not self.present:
            t.append("  ")
            t.append(" NOT LISTED ", style="bold reverse yellow")
        return t

    def _ids(self) -> Text:
        c = self.card
        return Text(f"{c.uuid or 'uuid n/a'}  pci {c.pci_bus_id or 'n/a'}", style="dim",
                    no_wrap=True, overflow="ellipsis")

    def _numbers(self, m: MemoryReading) -> Text:
        t = Text()
        t.append("█ ", style=_USED_STYLE[m.used_includes_reserved])
        t.append(f"{m.used_label} ", style="bold")
        t.append(gib_unit(m.used_bytes))
        if not m.used_includes_reserved:
            t.append("  ▓ ", style=_RESERVED_STYLE)
            t.append("reserved ", style="bold")
            t.append(gib_unit(m.reserved_bytes))
        t.append("  ░ ", style=_FREE_STYLE)
        t.append("free ", style="bold")
        t.append(gib_unit(m.free_bytes))
        t.append("  total ", style="bold")
        t.append(gib_unit(m.total_bytes))
        return t

    def _info(self) -> Text:
        c = self.card
        m = c.memory
        t = Text()
        if m is not None:
            t.append("CUDA-visible ")
            t.append(gib_unit(m.cuda_visible_bytes) if m.cuda_visible_bytes is not None
                     else "n/a (v1 API: reserved unknown)")
            t.append("  ")
        t.append(f"util {_na(c.utilization_gpu_pct, '{} %')}  mem {_na(c.utilization_memory_pct, '{} %')}"
                 f"  {_na(c.temperature_c, '{} °C')}  ")
        draw = None if c.power_draw_mw is None else f"{c.power_draw_mw / 1000:.0f}"
        limit = None if c.power_limit_mw is None else f"{c.power_limit_mw / 1000:.0f}"
        t.append(f"power {_na(draw)} / {_na(limit)} W")
        return t

    def _mig_line(self, inst: MigInstance) -> Text:
        name = inst.name or "n/a"
        if self.card.name and name.startswith(self.card.name):
            name = name[len(self.card.name):].strip()  # "NVIDIA H200 MIG 3g.71gb" → "MIG 3g.71gb"
        im = inst.memory
        nproc = "n/a" if inst.processes is None else str(len(inst.processes))
        t = Text(f"{name}  GI {_na(inst.gpu_instance_id)} CI {_na(inst.compute_instance_id)}  ")
        t.append("used ", style="bold")
        used, total = (gib_unit(im.used_bytes), gib_unit(im.total_bytes)) if im else ("n/a",) * 2
        t.append(f"{used} of {total}  processes {nproc}")
        return t

    def render(self) -> Group:
        """The card as a Rich group (no I/O)."""
        c = self.card
        rows: list = [self._title(), self._ids()]
        if c.state in ("lost", "error"):
            if c.state_reason:
                why = c.state_reason.rstrip(".") + "."
            elif c.state == "lost":
                why = ("the GPU fell off the bus (NVML_ERROR_GPU_IS_LOST); reset it or reboot "
                       "the node.")
            else:
                why = "the card could not be read."
            rows.append(Text(f"{c.state.upper()}: {why} The other cards stay live.",
                             style="bold red"))
        m = c.memory
        if m is not None and c.state == "ok":
            rows.append(self._numbers(m))
            rows.append(MemoryBar(m))
        elif c.state == "ok":
            rows.append(Text("memory n/a", style="dim"))
        if c.state == "ok":
            rows.append(self._info())
        if self.points and self.end is not None:
            label = Text(f"used, last {fmt_duration(self.history_s, style='span')} "
                         f"(0–{gib_unit(self.total_bytes, 0)}) ", style="dim")
            spark = Table.grid(expand=True)
            spark.add_column(no_wrap=True)
            spark.add_column(ratio=1, no_wrap=True)
            spark.add_row(label, Spark(list(self.points), self.end, self.history_s,
                                       self.total_bytes))
            rows.append(spark)
        if c.mig_enabled:
            for inst in c.mig_instances:
                rows.append(self._mig_line(inst))
        if c.state == "ok":
            rows.append(_process_table(c.processes))
        problems = [f"{k}: not supported" for k in c.unsupported] + [
            f"{k}: {v}" for k, v in c.errors.items()]
        if problems:
            rows.append(Text("n/a fields — " + "; ".join(problems), style="dim italic"))
        return Group(*rows)


class GpuPanel(SourcePanel):
    """GPU memory per card from NVML (source ``gpus``): see the module docstring."""

    source_name: ClassVar[str] = "gpus"
    title: ClassVar[str] = "GPUs (NVML)"
    wide_span: ClassVar[int] = 2

    SCOPED_CSS = False  # the wide-screen rule below starts at Screen, outside the panel

    DEFAULT_CSS = """
    GpuPanel #gpu-cards { height: auto; layout: vertical; }
    Screen.-wide GpuPanel #gpu-cards { layout: grid; grid-size: 2; grid-gutter: 0 2;
                                       grid-rows: auto; }
    GpuPanel #gpu-summary { height: auto; }
    """

    def compose_body(self) -> ComposeResult:
        """A summary line and the card views (mounted as cards appear)."""
        yield Static(id="gpu-summary")
        yield Container(id="gpu-cards")

    def unavailable_hint(self, unavailable: Unavailable) -> str | None:
        """What NVML's unavailable ``kind`` means here (see :data:`HINTS`)."""
        return HINTS.get(unavailable.kind)

    @property
    def history_s(self) -> float:
        """Sparkline span in seconds: the profile's ``console.history_s`` (300 without one)."""
        return float(self.loaded.profile.console.history_s) if self.loaded else 300.0

    def card_views(self) -> dict[str, GpuCardView]:
        """The mounted card views by card key (UUID, else PCI bus id)."""
        return {v.card.key: v for v in self.query(GpuCardView)}

    def note_unchanged(self, reading: BaseModel) -> None:
        """An equal snapshot: add its sample to each card's sparkline (redrawn only when a
        column changes)."""
        if isinstance(reading, GpuSnapshot) and not self.compact:
            views = self.card_views()
            for card in reading.cards:
                view = views.get(card.key)
                if view is not None:
                    view.update_card(card, reading.sampled_at)

    def render_compact(self, reading: BaseModel) -> Text | None:
        """One line per card: index, name, SEAT/LOST, used / CUDA-visible total in GiB, a
        12-cell bar (█ used ░ free), utilisation, and the containers holding it; the summary
        only when it warns (v1 memory API, unmatched node.gpus): drawn by
        :func:`seat_console.widgets.gpu_lines.compact`, whose memory cells the pre-Textual first
        frame also uses (:func:`seat_console.tui.first_frame.nvml_lines`)."""
        if not isinstance(reading, GpuSnapshot):
            raise TypeError(f"GPU panel got {type(reading).__name__}, not GpuSnapshot")
        return gpu_lines.compact(reading)

    def render_reading(self, reading: BaseModel) -> None:
        """Draw a :class:`GpuSnapshot`: summary line, then one view per card (by key)."""
        if not isinstance(reading, GpuSnapshot):
            raise TypeError(f"GPU panel got {type(reading).__name__}, not GpuSnapshot")
        snap = reading
        self.query_one("#gpu-summary", Static).update(gpu_lines.summary(snap))
        views = self.card_views()
        container = self.query_one("#gpu-cards", Container)
        seen = set()
        for card in snap.cards:
            seen.add(card.key)
            view = views.get(card.key)
            if view is None:
                view = GpuCardView(card, self.history_s)
                view.update_card(card, snap.sampled_at)
                container.mount(view)
            else:
                view.update_card(card, snap.sampled_at)
        for key, view in views.items():
            if key not in seen:
                view.update_card(None, snap.sampled_at)


__all__ = ["HINTS", "GpuCardView", "GpuPanel", "MemoryBar", "Spark"]
