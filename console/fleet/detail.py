"""One seat's last hour for the fleet screen's detail view: range queries and text sparklines.

:func:`read_history` sends :data:`HISTORY` range queries (``/api/v1/query_range``, one seat's
``instance``, default the last hour every 60 s) — only when the user opens a seat, never per
refresh. :func:`spark` draws a series as block characters with a blank for every unknown point
(a gap is never drawn as 0). A point Prometheus sent as ``±Inf`` (or ``NaN``) is a gap too,
counted in :attr:`Line.dropped`.

One instant, one unit: the fleet screen reads the history ending at the instant its row's
figures were read (``now``: the reading's time), so each line's newest point is the figure
the row shows, and :func:`fmt_point` writes it in the row's unit (KV cache in %, memory in GiB
= 2^30 B with the row's one decimal). GPU memory has a line per card and, with more than one
card, the seat's sum (:data:`SEAT_GPU_LINE`), the figure the row's ``GPU GiB`` shows.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field

from seat_console.core.fmt import MIB, gib
from seat_console.fleet.promapi import PromClient, PromError, promql_string

SPARK_BLOCKS = "▁▂▃▄▅▆▇█"
SEAT_GPU_LINE = "GPU memory used, all cards"
"""The line of the seat's GPU memory: its cards' sum at each point where every card has one
(the row's rule: a partial sum is never shown as the seat's)."""


def history_queries(instance: str) -> dict[str, str]:
    """Name → PromQL range query for one seat (``instance`` quoted as a PromQL string)."""
    i = promql_string(instance)
    return {
        "engine up": f"max(seat_engine_up{{instance={i}}})",
        "held": f"max(seat_hold_active{{instance={i}}})",
        "requests running": f"sum(vllm:num_requests_running{{instance={i}}})",
        "requests waiting": f"sum(vllm:num_requests_waiting{{instance={i}}})",
        "KV cache usage": (f'max({{__name__=~"vllm:kv_cache_usage_perc|vllm:gpu_cache_usage_perc",'
                           f"instance={i}}})"),
        "GPU memory used": f"max by (UUID) (DCGM_FI_DEV_FB_USED{{instance={i}}})",
    }


@dataclass(frozen=True)
class Line:
    """One sparkline: ``name``, ``values`` on the common grid (``None``: no sample), and its
    last known value and min/max of the known ones (``None`` when none is known)."""

    name: str
    values: tuple[float | None, ...]
    dropped: int = 0
    """Points Prometheus sent that are not finite numbers (``±Inf``), drawn as gaps."""

    @property
    def known(self) -> list[float]:
        """The known values."""
        return [v for v in self.values if v is not None]

    @property
    def last(self) -> float | None:
        """The newest known value."""
        return next((v for v in reversed(self.values) if v is not None), None)

    @property
    def last_index(self) -> int | None:
        """The grid index of the newest known value (``None`` when none is known)."""
        return next((i for i in range(len(self.values) - 1, -1, -1)
                     if self.values[i] is not None), None)


def fmt_point(name: str, v: float | None) -> str:
    """A history value in the unit the seat's row shows it: ``KV cache usage`` (a fraction)
    as a percentage (``0.532`` → ``53%``), ``GPU memory used`` (DCGM's MiB) in GiB (2^30 B,
    :func:`seat_console.core.fmt.gib` with the row's one decimal, truncated: ``81920`` →
    ``80.0 GiB``), the request gauges as whole numbers, ``engine up`` / ``held`` as ``1`` /
    ``0``, anything else to 3 significant digits; ``None`` → ``n/a``."""
    if v is None:
        return "n/a"
    if name.startswith("KV cache"):
        return f"{v * 100:.0f}%"
    if name.startswith("GPU memory"):
        return f"{gib(round(v * MIB), 1, group=False)} GiB"
    if name.startswith("requests") or name in ("engine up", "held"):
        return f"{v:.0f}"
    return f"{v:.3g}"


@dataclass(frozen=True)
class SeatHistory:
    """A seat's history: ``lines`` in :func:`history_queries` order (one per GPU for memory),
    ``start``/``end``/``step_s`` of the grid (unix s), ``problems`` (a failed query names
    itself; its line is absent, the others are shown), ``warnings`` (partial responses)."""

    instance: str
    start: float
    end: float
    step_s: float
    lines: tuple[Line, ...]
    problems: tuple[str, ...] = ()
    warnings: tuple[str, ...] = field(default_factory=tuple)


def read_history(prom: PromClient, instance: str, *, span_s: float = 3600.0,
                 step_s: float = 60.0, now: float | None = None) -> SeatHistory:
    """Range-query one seat's ``span_s`` seconds up to ``now`` (unix s; default the clock:
    the fleet screen passes the instant its row's figures were read, so the newest point is
    that reading) every ``step_s`` (blocking: a worker thread). Never raises for a query's
    failure: it is in ``problems``."""
    end = time.time() if now is None else now
    start = end - span_s
    n = int(span_s // step_s) + 1
    grid = [start + k * step_s for k in range(n)]
    lines: list[Line] = []
    problems: list[str] = []
    warnings: list[str] = []
    for name, q in history_queries(instance).items():
        try:
            res = prom.query_range(q, start, end, step_s)
        except PromError as exc:
            problems.append(f"{name}: {exc}")
            continue
        warnings += res.warnings
        problems += res.problems
        if not res.series:
            lines.append(Line(name, tuple([None] * n)))
        first = len(lines)
        for s in res.series:
            by_t = {round((t - start) / step_s): v for t, v in s.points}
            vals = [by_t.get(k) for k in range(len(grid))]
            bad = sum(1 for v in vals if v is not None and not math.isfinite(v))
            label = name if "UUID" not in s.labels else f"{name} {s.labels['UUID'][:12]}…"
            if bad:
                problems.append(f"{label}: {bad} point(s) of ±Inf from Prometheus shown as "
                                "gaps (unknown)")
            lines.append(Line(label, tuple(v if v is None or math.isfinite(v) else None
                                           for v in vals), bad))
        if name == "GPU memory used" and len(lines) - first > 1:
            lines.insert(first, seat_sum(lines[first:]))
    return SeatHistory(instance, start, end, step_s, tuple(lines), tuple(problems),
                       tuple(dict.fromkeys(warnings)))


def seat_sum(cards: list[Line]) -> Line:
    """The :data:`SEAT_GPU_LINE` of ``cards`` (one line per card on the same grid): their sum
    at each point where every card has a value, else a gap."""
    pts = zip(*(c.values for c in cards), strict=True)
    return Line(SEAT_GPU_LINE, tuple(None if any(v is None for v in p) else sum(p)
                                     for p in pts))


def spark(values: tuple[float | None, ...] | list[float | None], width: int | None = None,
          lo: float | None = None, hi: float | None = None) -> str:
    """Block-character sparkline; a ``None`` point, and one that is not a finite number
    (``NaN``, ``±Inf``), is a space (a gap, never 0 or a full block). ``width``: the newest
    ``width`` points (default all); ``lo``/``hi``: the scale (default the known values'
    min/max; a non-finite bound is ignored; a flat series draws at the lowest block). Any
    finite values, 1e308 and -1e308 included, scale without overflow. Raises nothing."""
    pts = [v if v is not None and math.isfinite(v) else None
           for v in (list(values)[-width:] if width else list(values))]
    known = [v for v in pts if v is not None]
    if not known:
        return " " * len(pts)
    a = min(known) if lo is None or not math.isfinite(lo) else lo
    b = max(known) if hi is None or not math.isfinite(hi) else hi
    # halves: b - a of two finite floats can overflow to inf (1e308 - -1e308), their halves'
    # difference cannot
    half_span = b / 2 - a / 2
    top = len(SPARK_BLOCKS) - 1
    out = []
    for v in pts:
        if v is None:
            out.append(" ")
        elif half_span <= 0:
            out.append(SPARK_BLOCKS[0])
        else:
            x = (min(max(v, a), b) / 2 - a / 2) / half_span
            out.append(SPARK_BLOCKS[min(top, max(0, int(x * top + 0.5)))])
    return "".join(out)


__all__ = ["SEAT_GPU_LINE", "Line", "SeatHistory", "fmt_point", "history_queries",
           "read_history", "seat_sum", "spark"]
