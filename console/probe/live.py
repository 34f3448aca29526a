"""What the live probe panel shows, computed from a run's :class:`~.run.Progress` (pure, no I/O).

:func:`live_view` turns the run's mutable progress into a frozen :class:`LiveView` the widget
draws: per phase the counts (completed / failed of expected, in flight), live output tok/s over
the last few seconds, TTFT / ITL p50 and p95 of recent requests (with their populations), a tok/s
history for the sparkline, the engine's running / waiting requests and KV-cache usage from the
last ``/metrics`` read, and the run's state in plain words (disrupted, incomplete, interrupted).
"""

from __future__ import annotations

import time

from seat_console.probe.run import PhaseProgress, Progress
from seat_console.core.probe_stats import percentile
from seat_console.core.base import Frozen
from seat_console.core.proportion import wilson_interval

SPARK_BUCKET_S = 1.0
"""Width of one sparkline bar, seconds."""
SPARK_BARS = 40
"""Bars in the sparkline (the last ``SPARK_BARS × SPARK_BUCKET_S`` seconds)."""
RATE_WINDOW_S = 5.0
"""The live output rate's window, seconds, cut to the time its phase actually ran."""


def rate_window(p: Progress, now: float) -> tuple[str, float, float] | None:
    """The live rate's window ``(phase, from, to)`` in perf-counter seconds: the last
    :data:`RATE_WINDOW_S` s of the running phase (``to = now``), else of the last phase that
    ran (``to`` = its end); ``from`` is never before the phase began, so a phase that ran 1.5 s
    is divided by 1.5 s, not 5 s. ``None`` before any phase began."""
    cur = next((x for x in p.phases if x.state == "running" and x.started is not None), None)
    if cur is not None and cur.started is not None:
        return cur.name, max(now - RATE_WINDOW_S, cur.started), now
    ran = [x for x in p.phases if x.started is not None and x.ended is not None]
    if not ran:
        return None
    last = max(ran, key=lambda x: x.ended or 0.0)
    assert last.started is not None and last.ended is not None
    return last.name, max(last.ended - RATE_WINDOW_S, last.started), last.ended


def window_rate(events: list[tuple[float, int]], t_from: float, t_to: float) -> float | None:
    """Tokens per second of ``events`` ((perf-counter s, tokens)) stamped in
    ``[t_from, t_to]``; ``None`` for an empty window (``t_to <= t_from``: no rate, never 0)."""
    span = t_to - t_from
    if not span > 0:
        return None
    return sum(n for ts, n in events if t_from <= ts <= t_to) / span


class PhaseLine(Frozen):
    """One phase: ``name``, ``expected``, ``attempted``, ``completed``, ``failed``,
    ``in_flight``, ``concurrency``, ``state`` (``waiting`` / ``running`` / ``measured`` / the
    final phrase, e.g. ``incomplete: 61/64 completed, 3 failed``); ``slo_met``: finished
    requests (completed + failed) that met every ``[probe.slo]`` target, ``None`` without an
    SLO; ``goodput_low`` / ``goodput_high``: its Wilson 95 % interval over the finished
    requests (``None`` before one finished)."""

    name: str
    expected: int
    attempted: int
    completed: int
    failed: int
    in_flight: int
    concurrency: int
    state: str
    slo_met: int | None = None
    goodput_low: float | None = None
    goodput_high: float | None = None


class LiveView(Frozen):
    """The panel's content. ``tok_s``: output tokens/s of completed streamed requests over
    :attr:`tok_s_window_s` seconds — the last :data:`RATE_WINDOW_S` s of the current phase, or of
    the last phase that ran, never a window longer than the phase (``None`` before any phase
    began, or over a window of 0 s); ``tok_s_phase``: the phase it was measured in; ``ttft_p50_s`` … ``itl_p95_s`` with ``ttft_n`` / ``itl_n``: over the
    recent requests (``None`` = none yet); ``spark``: tok/s per :data:`SPARK_BUCKET_S`, oldest
    first; ``running`` / ``waiting`` / ``kv_usage`` (0–1): the engine's, ``None`` = not read
    (never 0 for unknown); ``status`` (the run's); ``words``: the state in one sentence;
    ``disruptions`` / ``problems``: one line each."""

    run_id: str
    status: str
    phases: tuple[PhaseLine, ...]
    tok_s: float | None
    tok_s_window_s: float | None = None
    tok_s_phase: str | None = None
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


def _line(x: PhaseProgress, slo: bool) -> PhaseLine:
    line = PhaseLine(name=x.name, expected=x.expected, attempted=x.attempted,
                     completed=x.completed, failed=x.failed, in_flight=x.in_flight,
                     concurrency=x.concurrency, state=x.state)
    finished = x.completed + x.failed
    if not slo:
        return line
    met = min(x.slo_met, finished)
    iv = wilson_interval(met, finished) if finished else None
    return line.model_copy(update={"slo_met": met, "goodput_low": iv.low if iv else None,
                                   "goodput_high": iv.high if iv else None})


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
    win = rate_window(p, t)
    rate = window_rate(events, win[1], win[2]) if win else None
    return LiveView(
        run_id=p.run_id, status=p.status,
        phases=tuple(_line(x, p.slo is not None) for x in p.phases),
        tok_s=rate, tok_s_window_s=(win[2] - win[1]) if win else None,
        tok_s_phase=win[0] if win else None,
        ttft_p50_s=percentile(ttft, 50), ttft_p95_s=percentile(ttft, 95), ttft_n=len(ttft),
        itl_p50_s=percentile(itl, 50), itl_p95_s=percentile(itl, 95), itl_n=len(itl),
        spark=tuple(spark),
        running=eng.running if eng else None, waiting=eng.waiting if eng else None,
        kv_usage=eng.kv_cache_usage if eng else None, words=_words(p),
        disruptions=tuple(p.disruptions), problems=tuple(p.problems))


__all__ = ["RATE_WINDOW_S", "SPARK_BARS", "SPARK_BUCKET_S", "LiveView", "PhaseLine", "live_view",
           "rate_window", "window_rate"]
