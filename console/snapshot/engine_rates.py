"""Engine rates from successive ``/metrics`` scrapes (pure arithmetic, no I/O).

vLLM's counters (``vllm:request_success_total``, ``vllm:generation_tokens_total``) and latency
histograms (TTFT, inter-token latency, end-to-end) are cumulative since the engine started, so
totals say little at 3 a.m. This module turns a short history of scrapes into what is happening
now:

* req/s and output tok/s: the counter's difference over the last interval between two scrapes
  divided by the seconds between them (PromQL's ``rate()`` over two samples);
* TTFT / ITL / E2E p50 and p95 over a recent window (default 60 s): the difference of the
  window's first and last cumulative histogram buckets, then ``histogram_quantile``'s linear
  interpolation (:func:`seat_console.sources.engine.histogram_quantile`), with the number of
  observations in the window (``n``).

A counter that went down (the engine restarted) gives ``None`` ("reset"), never a negative or a
zero rate; fewer than two scrapes give ``None`` too.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from datetime import datetime
from typing import Any

WINDOW_S = 60.0
"""How far back the latency percentiles look (seconds)."""


@dataclass(frozen=True)
class Latency:
    """Percentiles over the window: ``n`` observations, ``p50_s`` / ``p95_s`` in seconds
    (``None`` when ``n`` is 0)."""

    n: int
    p50_s: float | None
    p95_s: float | None


@dataclass(frozen=True)
class EngineRates:
    """What the engine did recently. ``interval_s``: seconds between the last two scrapes;
    ``req_per_s`` / ``out_tok_per_s``: finished requests and generated tokens per second over
    it; ``window_s``: seconds the latency window spans; ``ttft`` / ``itl`` / ``e2e``:
    :class:`Latency` over it. ``None`` = unknown (one scrape only, metric missing, or a counter
    reset by an engine restart)."""

    interval_s: float | None
    req_per_s: float | None
    out_tok_per_s: float | None
    window_s: float | None
    ttft: Latency | None
    itl: Latency | None
    e2e: Latency | None


def counter_rate(old: float | None, new: float | None, seconds: float) -> float | None:
    """``(new − old) / seconds`` for a cumulative counter; ``None`` when either is missing,
    ``seconds`` ≤ 0, or the counter went down (reset by a restart)."""
    if old is None or new is None or seconds <= 0 or new < old:
        return None
    return (new - old) / seconds


def window_latency(old: Any, new: Any) -> Latency | None:
    """Percentiles of the observations between two cumulative histogram summaries
    (:class:`seat_console.sources.engine.HistogramSummary` with ``buckets``); ``None`` when one
    is missing, the bucket bounds differ, or a count went down (reset)."""
    from seat_console.sources.engine import histogram_quantile

    if old is None or new is None or not new.buckets:
        return None
    old_b = dict(old.buckets)
    if old_b and set(old_b) != {le for le, _ in new.buckets}:
        return None
    delta = [(le, c - old_b.get(le, 0.0)) for le, c in new.buckets]
    if any(d < 0 for _, d in delta) or new.count < old.count:
        return None
    n = new.count - old.count
    if n == 0:
        return Latency(0, None, None)
    return Latency(n, histogram_quantile(0.5, delta), histogram_quantile(0.95, delta))


class RateHistory:
    """The scrapes of the last :data:`WINDOW_S` seconds (``(at, EngineMetrics)``) and the
    :class:`EngineRates` they give. ``add`` one scrape per poll (an equal one too: time
    passing with no traffic is a rate of 0)."""

    def __init__(self, window_s: float = WINDOW_S) -> None:
        self.window_s = window_s
        self._samples: deque[tuple[datetime, Any]] = deque()

    def add(self, at: datetime, metrics: Any) -> None:
        """Record the metrics scraped at ``at`` (UTC); forget those older than the window."""
        if metrics is None:
            return
        if self._samples and at <= self._samples[-1][0]:
            return
        self._samples.append((at, metrics))
        while len(self._samples) > 2 and (at - self._samples[1][0]).total_seconds() >= \
                self.window_s:
            self._samples.popleft()

    def rates(self) -> EngineRates:
        """The rates over the last interval and the latency over the window."""
        if len(self._samples) < 2:
            return EngineRates(None, None, None, None, None, None, None)
        (t0, m0), (t1, m1) = self._samples[-2], self._samples[-1]
        dt = (t1 - t0).total_seconds()
        (tw, mw) = self._samples[0]
        return EngineRates(
            interval_s=dt,
            req_per_s=counter_rate(m0.requests_finished, m1.requests_finished, dt),
            out_tok_per_s=counter_rate(m0.generation_tokens, m1.generation_tokens, dt),
            window_s=(t1 - tw).total_seconds(),
            ttft=window_latency(mw.ttft, m1.ttft), itl=window_latency(mw.itl, m1.itl),
            e2e=window_latency(mw.e2e, m1.e2e))


__all__ = ["WINDOW_S", "EngineRates", "Latency", "RateHistory", "counter_rate",
           "window_latency"]
