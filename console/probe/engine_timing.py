"""The engine's own TTFT and ITL histograms over a phase, beside the probe's client figures.

vLLM exports ``vllm:time_to_first_token_seconds`` and ``vllm:inter_token_latency_seconds`` as
Prometheus histograms (cumulative ``_bucket{le=…}`` counts, seconds; ``vllm/v1/metrics/
loggers.py``). A phase's engine distribution is the bucket-wise difference between the scrapes
before and after it, summed over label sets (engines, models) — buckets are merged, never
quantiles averaged (vllm-htop's rule in STYLE.md). Parsed with ``prometheus_client``'s parser.

A client quantile is checked against the engine bucket that holds the same quantile of the
engine's distribution: inside it (or the engine's data cannot place it) is no finding; above
its upper bound is "client-side delay" (the client's clock saw the token later than the engine
finished it: network, the HTTP stack or the client's own loop); at or below its lower bound
means the client saw it *sooner* than the engine's own measure allows (different definitions or
clocks) — reported, never averaged away.

Not yet wired into the run record or the evidence report (issue 21, part 2, is open).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from prometheus_client.parser import text_string_to_metric_families
from seat_console.core.base import Frozen

TTFT = "vllm:time_to_first_token_seconds"
ITL = "vllm:inter_token_latency_seconds"


class Histogram(Frozen):
    """Cumulative bucket counts: ``bounds`` (upper bounds ``le``, seconds, ascending, the last
    ``+inf``) and ``cumulative`` (observations ≤ each bound), same length."""

    bounds: list[float]
    cumulative: list[float]


def parse_histograms(text: str, names: Sequence[str] = (TTFT, ITL)) -> dict[str, Histogram]:
    """The histograms ``names`` in Prometheus text ``text``, each summed over its label sets.

    A name that is absent is absent from the result (never an empty histogram). Raises
    :class:`ValueError` (naming the metric) for text the parser rejects or a histogram whose
    label sets have different buckets.
    """
    want = {n.removesuffix("_bucket") for n in names}
    per: dict[str, dict[tuple, dict[float, float]]] = {}
    try:
        for fam in text_string_to_metric_families(text):
            if fam.name not in want:
                continue
            for s in fam.samples:
                if not s.name.endswith("_bucket") or "le" not in s.labels:
                    continue
                key = tuple(sorted((k, v) for k, v in s.labels.items() if k != "le"))
                per.setdefault(fam.name, {}).setdefault(key, {})[float(s.labels["le"])] = \
                    float(s.value)
    except (ValueError, TypeError, IndexError) as exc:
        raise ValueError(f"/metrics text is not Prometheus exposition format: {exc}") from None
    out: dict[str, Histogram] = {}
    for name, series in per.items():
        bounds = None
        total: list[float] = []
        for buckets in series.values():
            b = sorted(buckets)
            if bounds is None:
                bounds, total = b, [0.0] * len(b)
            elif b != bounds:
                raise ValueError(f"{name}: label sets have different buckets ({b} vs {bounds})")
            for i, le in enumerate(b):
                total[i] += buckets[le]
        if bounds:
            out[name] = Histogram(bounds=bounds, cumulative=total)
    return out


def delta(before: Histogram, after: Histogram) -> Histogram:
    """The observations between two scrapes, bucket by bucket. Raises :class:`ValueError`
    when the buckets differ or a count went down (the engine restarted: no phase figure)."""
    if before.bounds != after.bounds:
        raise ValueError("the histogram's buckets changed between the scrapes")
    d = [a - b for a, b in zip(after.cumulative, before.cumulative, strict=True)]
    if any(x < 0 for x in d):
        raise ValueError("a histogram count went down between the scrapes (engine restart?)")
    return Histogram(bounds=list(after.bounds), cumulative=d)


def quantile_bucket(h: Histogram, q: float) -> tuple[float, float] | None:
    """``(lower, upper]`` in seconds of the bucket holding the ``q``-quantile (0 < q ≤ 1) of
    ``h``'s observations (rank ``ceil(q·n)``); ``None`` with no observations."""
    if not 0.0 < q <= 1.0:
        raise ValueError(f"quantile {q!r} is not in (0, 1]")
    n = h.cumulative[-1] if h.cumulative else 0.0
    if n <= 0:
        return None
    rank = max(math.ceil(q * n - 1e-9), 1)
    lo = 0.0
    for le, c in zip(h.bounds, h.cumulative, strict=True):
        if c >= rank:
            return lo, le
        lo = le
    return lo, math.inf   # pragma: no cover - the +Inf bucket holds every observation


def verdict(client_value: float, bucket: tuple[float, float] | None) -> str | None:
    """``None`` when ``client_value`` (seconds) lies in the engine's bucket ``(lo, hi]`` (or
    there is none); ``"client-side delay"`` above it; ``"client sooner than engine"`` at or
    below its lower bound."""
    if bucket is None:
        return None
    lo, hi = bucket
    if client_value > hi:
        return "client-side delay"
    if client_value <= lo:
        return "client sooner than engine"
    return None


__all__ = ["ITL", "TTFT", "Histogram", "delta", "parse_histograms", "quantile_bucket",
           "verdict"]
