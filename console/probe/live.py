"""What the live probe panel shows, computed from a run's :class:`~.run.Progress` (pure, no I/O).

:func:`live_view` turns the run's mutable progress into a frozen :class:`LiveView` the widget
draws: per phase the counts (completed / failed of expected, in flight), live output tok/s over
the last few seconds, TTFT / ITL p50 and p95 of recent requests (with their populations), a tok/s
history for the sparkline, the engine's running / waiting requests and KV-cache usage from the
last ``/metrics`` read, and the run's state in plain words (disrupted, incomplete, interrupted).
"""

from __future__ import annotations

import time

from seat_console.probe.run import Progress
from seat_console.probe.stats import percentile
from seat_console.core.base import Frozen

SPARK_BUCKET_S = 1.0
"""Width of one sparkline bar, seconds."""
SPARK_BARS = 40
"""Bars in the sparkline (the last ``SPARK_BARS × SPARK_BUCKET_S`` seconds)."""


class PhaseLine(Frozen):
    """One phase: ``name``, ``expected``, ``attempted``, ``completed``, ``failed``,
    ``in_flight``, ``concurrency``, ``state`` (``waiting`` / ``running`` / ``measured`` / the
    final phrase, e.g. ``incomplete: 61/64 completed, 3 failed``)."""

    name: str
    expected: int
    attempted: int
    completed: int
    failed: int
    in_flight: int
    concurrency: int
    state: str


class LiveView(Frozen):
    """The panel's content. ``tok_s``: output tokens/s over the last 5 s (streamed requests
    that completed); ``ttft_p50_s`` … ``itl_p95_s`` with ``ttft_n`` / ``itl_n``: over the
    recent requests (``None`` = none yet); ``spark``: tok/s per :data:`SPARK_BUCKET_S`, oldest
    first; ``running`` / ``waiting`` / ``kv_usage`` (0–1): the engine's, ``None`` = not read
    (never 0 for unknown); ``status`` (the run's); ``words``: the state in one sentence;
    ``disruptions`` / ``problems``: one line each."""

    run_id: str
    status: str
    phases: tuple[PhaseLine, ...]
    tok_s: float
    ttft_p50_s: float | None = None
    ttft_p95_s: float | None = None
    ttft_n: int = 0
    itl_p50_s: float | None = None
    itl_p95_s: float | None = None
    itl_n: int = 0
    spark: tuple[float, ...] = ()
    running: float | None = None
    waiting: float | None = None
    kv_usage: float | None = None
    words: str
    disruptions: tuple[str, ...] = ()
    problems: tuple[str, ...] = ()


def _words(p: Progress) -> str:
    if p.disruptions:
        return "DISRUPTED — no headline: " + p.disruptions[0]
    if p.status == "running":
        cur = next((x for x in p.phases if x.state == "running"), None)
        return f"running phase {cur.name}" if cur else "running (warm-up)"
    if p.status == "starting":
        return "starting"
    res = p.result or {}
    if p.status == "complete":
        return "complete: every phase complete, counts agree with the engine"
    bad = next((b for b in res.get("phases", []) if b.get("state") not in ("complete",)), None)
    detail = f" ({bad['name']}: {bad['state']})" if bad else ""
    return f"{p.status.upper()} — no headline{detail}"


def live_view(p: Progress, now: float | None = None) -> LiveView:
    """Snapshot ``p`` for drawing. ``now``: perf-counter seconds (default the current time).
    Safe to call from the UI thread while the run appends to ``p`` (it copies first)."""
    t = time.perf_counter() if now is None else now
    events = list(p.token_events)
    ttft = list(p.ttft_s)[-500:]
    itl = list(p.itl_s)[-5000:]
    spark = [0.0] * SPARK_BARS
    start = t - SPARK_BARS * SPARK_BUCKET_S
    for ts, n in events:
        if ts >= start:
            k = min(int((ts - start) / SPARK_BUCKET_S), SPARK_BARS - 1)
            spark[k] += n / SPARK_BUCKET_S
    eng = p.engine
    return LiveView(
        run_id=p.run_id, status=p.status,
        phases=tuple(PhaseLine(name=x.name, expected=x.expected, attempted=x.attempted,
                               completed=x.completed, failed=x.failed, in_flight=x.in_flight,
                               concurrency=x.concurrency, state=x.state) for x in p.phases),
        tok_s=sum(n for ts, n in events if ts >= t - 5.0) / 5.0,
        ttft_p50_s=percentile(ttft, 50), ttft_p95_s=percentile(ttft, 95), ttft_n=len(ttft),
        itl_p50_s=percentile(itl, 50), itl_p95_s=percentile(itl, 95), itl_n=len(itl),
        spark=tuple(spark),
        running=eng.running if eng else None, waiting=eng.waiting if eng else None,
        kv_usage=eng.kv_cache_usage if eng else None, words=_words(p),
        disruptions=tuple(p.disruptions), problems=tuple(p.problems))


__all__ = ["SPARK_BARS", "SPARK_BUCKET_S", "LiveView", "PhaseLine", "live_view"]
