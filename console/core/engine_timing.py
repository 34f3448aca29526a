"""The engine's own TTFT and ITL histograms over a phase, beside the probe's client figures.

vLLM exports ``vllm:time_to_first_token_seconds`` and ``vllm:inter_token_latency_seconds`` as
Prometheus histograms (cumulative ``_bucket{le=…}`` counts, seconds; ``vllm/v1/metrics/
loggers.py``). A phase's engine distribution is the bucket-wise difference between the scrapes
before and after it, summed over label sets (engines, models) — buckets are merged, never
quantiles averaged (vllm-htop's rule in STYLE.md). Parsed by the one Prometheus text reader,
:func:`seat_console.core.promtext.parse_families` (``prometheus_client``'s parser).

A client quantile is checked against the engine bucket that holds the same quantile of the
engine's distribution: inside it (or the engine's data cannot place it) is no finding; above
its upper bound is "client-side delay" (the client's clock saw the token later than the engine
finished it: network, the HTTP stack or the client's own loop); at or below its lower bound
means the client saw it *sooner* than the engine's own measure allows (different definitions or
clocks) — reported, never averaged away. A delay is attributed by the client's own CPU over
the phase (:data:`BUSY_SHARE`): a client that used most of a core is the likely cause
(``client-side delay``); one that did not points outside it (``network``: the path, and the
server's API front before the engine's clock starts — vLLM v1 takes TTFT from the request's
``arrival_time`` in the engine, after the API server tokenized it, ``vllm/v1/metrics/stats.py``).

In core (pure) so that the probe, which records the engine's bucket deltas per phase in its
``summary.json``, and the evidence report, which checks them again against the client figures
it re-derives from ``requests.jsonl``, use one definition.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from pydantic import ValidationError, field_serializer, model_validator
from seat_console.core.base import Frozen
from seat_console.core.promtext import parse_families

TTFT = "vllm:time_to_first_token_seconds"
ITL = "vllm:inter_token_latency_seconds"


def _le_json(xs: Sequence[float]) -> list[float | str]:
    """Bounds for JSON: ``+inf`` as Prometheus spells it, ``"+Inf"`` (strict JSON has no
    infinity; pydantic reads ``"+Inf"`` back as ``math.inf``)."""
    return ["+Inf" if math.isinf(x) and x > 0 else x for x in xs]


class Histogram(Frozen):
    """Cumulative bucket counts: ``bounds`` (upper bounds ``le``, seconds, ascending, the last
    ``+inf``; ``"+Inf"`` in JSON) and ``cumulative`` (observations ≤ each bound), same length.

    Checked when built, from a scrape, a delta or a ``summary.json`` alike (pydantic's
    :class:`~pydantic.ValidationError`, a :class:`ValueError`): the bounds strictly ascending
    and not NaN, the last ``+inf`` (without the ``+Inf`` bucket how many observations there
    were is unknown: the last finite bucket is not the whole population, and PromQL's
    ``histogram_quantile`` returns NaN for such a histogram, promql/quantile.go); every count
    finite and ≥ 0, and not decreasing from one bound to the next (cumulative). So
    :func:`quantile_bucket` never meets an unknown population or a count ``math.ceil`` cannot
    take (issue 31: a ``+Inf`` count reached it as ``OverflowError``)."""

    bounds: list[float]
    cumulative: list[float]

    @model_validator(mode="after")
    def _is_a_histogram(self) -> Histogram:
        problem = histogram_problem(self.bounds, self.cumulative)
        if problem is not None:
            raise ValueError(problem)
        return self

    @field_serializer("bounds", when_used="json")
    def _bounds_json(self, v: list[float]) -> list[float | str]:
        return _le_json(v)


def histogram_problem(bounds: Sequence[float], cumulative: Sequence[float]) -> str | None:
    """Why ``bounds`` / ``cumulative`` are not a cumulative histogram with a ``+Inf`` bucket
    (the rules of :class:`Histogram`), one sentence; ``None`` when they are."""
    if len(bounds) != len(cumulative) or not bounds:
        return (f"{len(bounds)} bucket bounds for {len(cumulative)} counts: not a histogram "
                "(one count per bound, at least the +Inf bucket)")
    if any(math.isnan(b) for b in bounds) or any(
            b >= a for a, b in zip(bounds[1:], bounds, strict=False)):
        return "the bucket bounds are not strictly ascending numbers"
    if bounds[-1] != math.inf:
        return (f"no +Inf bucket (the last bound is {bounds[-1]:g} s): how many observations "
                "there were is unknown")
    for le, c in zip(bounds, cumulative, strict=True):
        if not (math.isfinite(c) and c >= 0):
            return f"the count of bucket le={_le_text(le)} is {c!r}, not a finite count ≥ 0"
    if any(b > a for a, b in zip(cumulative[1:], cumulative, strict=False)):
        return "the bucket counts go down from one bound to the next: not cumulative"
    return None


def _le_text(le: float) -> str:
    return "+Inf" if le == math.inf else f"{le:g}"


def parse_histograms(text: str, names: Sequence[str] = (TTFT, ITL)
                     ) -> dict[str, Histogram | str]:
    """The histograms ``names`` in Prometheus text ``text``, each summed over its label sets.

    A name that is absent is absent from the result (never an empty histogram). A histogram
    that is there but cannot be used is, in place of its :class:`Histogram`, one sentence
    naming the metric and why: label sets with different buckets, a bucket bound that is not a
    number, a count that is NaN, infinite or negative, counts that are not cumulative, no
    ``+Inf`` bucket (how many observations there were is unknown), counts whose sum over the
    label sets overflows. A series repeated in the scrape (same name and labels) counts once, the first (Prometheus keeps the first sample of
    a duplicate series in a scrape and drops the others). Raises :class:`ValueError` only for
    text the parser rejects or text above its size limit (:func:`seat_console.core.promtext.
    parse_families`: ``"/metrics: not Prometheus text (…)"``).
    """
    want = {n.removesuffix("_bucket") for n in names}
    per: dict[str, dict[tuple, dict[float, float]]] = {}
    bad: dict[str, str] = {}
    for fam in parse_families(text, "/metrics"):
        if fam.name not in want:
            continue
        series = per.setdefault(fam.name, {})
        for s in fam.samples:
            if not s.name.endswith("_bucket") or "le" not in s.labels or fam.name in bad:
                continue
            try:
                le = float(s.labels["le"])
            except ValueError:
                bad[fam.name] = (f"{fam.name}: bucket bound le={s.labels['le'][:40]!r} is "
                                 "not a number")
                continue
            key = tuple(sorted((k, v) for k, v in s.labels.items() if k != "le"))
            series.setdefault(key, {}).setdefault(le, float(s.value))
    out: dict[str, Histogram | str] = {}
    for name, series in per.items():
        if name in bad:
            out[name] = bad[name]
            continue
        bounds: list[float] | None = None
        total: list[float] = []
        problem = None
        for buckets in series.values():
            b = sorted(buckets)
            if bounds is None:
                bounds, total = b, [0.0] * len(b)
            elif b != bounds:
                problem = f"label sets have different buckets ({b} vs {bounds})"
                break
            counts = [buckets[le] for le in b]
            problem = histogram_problem(b, counts)
            if problem is not None:
                break
            for i, c in enumerate(counts):
                total[i] += c
        if problem is None and bounds:
            problem = histogram_problem(bounds, total)
            if problem is not None:
                problem = f"summed over its label sets, {problem}"
        if problem is not None:
            out[name] = f"{name}: {problem}"
        elif bounds:
            out[name] = Histogram(bounds=bounds, cumulative=total)
    return out


def delta(before: Histogram, after: Histogram) -> Histogram:
    """The observations between two scrapes, bucket by bucket. Raises :class:`ValueError`
    when the buckets differ, a count went down (the engine restarted: no phase figure) or the
    differences are not cumulative (a lower bucket grew more than a higher one)."""
    if before.bounds != after.bounds:
        raise ValueError("the histogram's buckets changed between the scrapes")
    d = [a - b for a, b in zip(after.cumulative, before.cumulative, strict=True)]
    if any(x < 0 for x in d):
        raise ValueError("a histogram count went down between the scrapes (engine restart?)")
    problem = histogram_problem(after.bounds, d)
    if problem is not None:
        raise ValueError(f"the observations between the scrapes are not a histogram: {problem}")
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


BUSY_SHARE = 0.8
"""The share of one core (client CPU seconds / phase seconds) at or above which a delay is
attributed to the client itself ("client-side delay") rather than to the network."""

QUANTILES = (0.5, 0.95)
"""The quantiles checked: p50 and p95 (issue 21: "beyond the bucket that holds the p50 / p95")."""

METRICS = {"ttft": TTFT, "itl": ITL}
"""The probe's figure → the engine's histogram over the same quantity."""


def cause(direction: str | None, cpu_share: float | None) -> str | None:
    """The finding for a verdict ``direction`` (:func:`verdict`) given the client's CPU share of
    one core over the phase (``None``: unknown): ``"client-side delay"`` at or above
    :data:`BUSY_SHARE`, ``"network"`` below it, ``"client-side delay or network"`` when the
    share is unknown; any other direction is returned as it is."""
    if direction != "client-side delay":
        return direction
    if cpu_share is None:
        return "client-side delay or network"
    return "client-side delay" if cpu_share >= BUSY_SHARE else "network"


class QuantileCheck(Frozen):
    """One quantile ``q`` of one figure: the client's value (``client_s``, seconds, ``None``
    when it has no values), the engine bucket ``(lo, hi]`` holding the same quantile of the
    engine's distribution (``engine_bucket_s``; ``None`` when the engine has none) and the
    ``finding`` (``None``: agree or cannot be placed)."""

    q: float
    client_s: float | None
    engine_bucket_s: tuple[float, float] | None
    finding: str | None = None

    @field_serializer("engine_bucket_s", when_used="json")
    def _bucket_json(self, v: tuple[float, float] | None) -> list[float | str] | None:
        return None if v is None else _le_json(v)


class MetricTiming(Frozen):
    """One figure of one phase (``figure``: ``ttft`` / ``itl``) against ``metric``:
    ``engine`` (the bucket delta over the phase; ``None`` when it could not be had),
    ``engine_n`` (observations in it), ``client_n`` (the client's values), ``checks`` (one per
    :data:`QUANTILES`), ``problem`` (why there is no engine figure)."""

    figure: str
    metric: str
    engine: Histogram | None = None
    engine_n: float | None = None
    client_n: int
    checks: list[QuantileCheck] = []
    problem: str | None = None


def check_figure(figure: str, engine: Histogram | None, client_q: dict[float, float | None],
                 client_n: int, cpu_share: float | None, problem: str | None = None
                 ) -> MetricTiming:
    """Compare one figure: ``engine`` the phase's bucket delta (or ``None`` with ``problem``),
    ``client_q`` quantile → the client's value (seconds; the probe's own p50 / p95, numpy type
    7), ``client_n`` the client's population, ``cpu_share`` as for :func:`cause`."""
    metric = METRICS[figure]
    if engine is None:
        return MetricTiming(figure=figure, metric=metric, client_n=client_n,
                            problem=problem or f"{metric} not read")
    checks = []
    for q in QUANTILES:
        b = quantile_bucket(engine, q)
        c = client_q.get(q)
        checks.append(QuantileCheck(
            q=q, client_s=c, engine_bucket_s=b,
            finding=None if c is None else cause(verdict(c, b), cpu_share)))
    return MetricTiming(figure=figure, metric=metric, engine=engine,
                        engine_n=engine.cumulative[-1] if engine.cumulative else 0.0,
                        client_n=client_n, checks=checks, problem=problem)


def engine_deltas(before: dict[str, Histogram | str] | None,
                  after: dict[str, Histogram | str] | None) -> dict[str, Histogram | str]:
    """Per figure (``ttft`` / ``itl``) the engine's bucket delta between two scrapes' parsed
    histograms (:func:`parse_histograms`), or a sentence saying why there is none (a scrape
    without histograms, the metric not exposed, a histogram a scrape could not use — no
    ``+Inf`` bucket, a count that is not one —, buckets changed, a count went down)."""
    out: dict[str, Histogram | str] = {}
    for figure, metric in METRICS.items():
        if before is None or after is None:
            out[figure] = "the engine's histograms were not read around the phase"
        elif metric not in before or metric not in after:
            out[figure] = f"the engine does not expose {metric}"
        elif isinstance(before[metric], str) or isinstance(after[metric], str):
            bad = before[metric] if isinstance(before[metric], str) else after[metric]
            when = "before" if isinstance(before[metric], str) else "after"
            out[figure] = f"unknown: {bad} (the scrape {when} the phase)"
        else:
            try:
                out[figure] = delta(before[metric], after[metric])
            except ValueError as exc:
                out[figure] = f"{metric}: {exc}"
    return out


def findings(timings: dict[str, MetricTiming]) -> list[str]:
    """One sentence per quantile check with a finding, e.g. ``"TTFT p95: client 312.0 ms,
    above the engine's bucket (100.0, 250.0] ms: network"``."""
    out = []
    for t in timings.values():
        for c in t.checks:
            if c.finding and c.engine_bucket_s is not None and c.client_s is not None:
                where = "above" if c.client_s > c.engine_bucket_s[1] else "at or below"
                out.append(f"{t.figure.upper()} p{round(c.q * 100)}: client "
                           f"{ms_text(c.client_s)} ms, {where} the engine's bucket "
                           f"{bucket_text(c.engine_bucket_s)}: {c.finding}")
    return out


def parse_phase_timing(obj: Any, where: str) -> dict[str, MetricTiming]:
    """A phase block's ``engine_timing`` as a ``summary.json`` holds it (figure → the JSON of
    :class:`MetricTiming`) → figure → :class:`MetricTiming`. ``None`` / absent (a run from
    before the check existed) gives ``{}``. Raises :class:`ValueError` naming ``where`` and the
    figure for anything else that is not that shape (an unknown figure, a histogram that breaks
    a rule of :class:`Histogram` — bounds and counts of different lengths, bounds not
    ascending, no ``+Inf`` bucket, a count that is not finite and ≥ 0 or not cumulative —, a
    bucket that is not ``lo < hi``)."""
    if obj is None:
        return {}
    if not isinstance(obj, dict):
        raise ValueError(f"{where}: engine_timing is a {type(obj).__name__}, not an object")
    out = {}
    for figure, v in obj.items():
        if figure not in METRICS:
            raise ValueError(f"{where}: engine_timing has an unknown figure {figure!r} "
                             f"(known: {', '.join(METRICS)})")
        try:
            t = MetricTiming.model_validate(v)
        except ValidationError as exc:
            first = exc.errors()[0]
            loc = ".".join(str(x) for x in first.get("loc", ()))
            if loc == "engine" and first.get("type") == "value_error":   # Histogram's rules
                raise ValueError(f"{where}: engine_timing.{figure}.engine is not a histogram: "
                                 f"{first.get('ctx', {}).get('error', first.get('msg'))}"
                                 ) from None
            raise ValueError(f"{where}: engine_timing.{figure}.{loc}: {first.get('msg')}"
                             ) from None
        for c in t.checks:
            if c.engine_bucket_s is not None and not c.engine_bucket_s[0] < c.engine_bucket_s[1]:
                raise ValueError(f"{where}: engine_timing.{figure} bucket "
                                 f"{list(c.engine_bucket_s)} is not (lo < hi]")
        out[figure] = t
    return out


def ms_text(v: float) -> str:
    """Seconds ``v`` as milliseconds to 0.1 (``"41.2"``); ``"∞"`` for the ``+Inf`` bound."""
    return "∞" if math.isinf(v) else f"{v * 1000:.1f}"


def bucket_text(b: tuple[float, float] | None) -> str:
    """``"(40.0, 60.0] ms"``, or ``"no data"``."""
    return "no data" if b is None else f"({ms_text(b[0])}, {ms_text(b[1])}] ms"


def describe(t: MetricTiming) -> str:
    """One line: ``"TTFT: client n=64, engine n=64 · p50 client 41.2 ms in engine (40.0, 60.0]
    ms · p95 client 80.3 ms, engine (60.0, 80.0] ms: client-side delay"``, or the problem."""
    head = f"{t.figure.upper()}: client n={t.client_n}"
    if t.engine is None:
        return f"{head}, engine: {t.problem or 'not read'}"
    parts = [f"{head}, engine n={t.engine_n:,.0f}"]
    for c in t.checks:
        cl = "no values" if c.client_s is None else f"{ms_text(c.client_s)} ms"
        parts.append(f"p{round(c.q * 100)} client {cl}, engine {bucket_text(c.engine_bucket_s)}"
                     + (f": {c.finding}" if c.finding else ""))
    return " · ".join(parts)


__all__ = ["BUSY_SHARE", "ITL", "METRICS", "QUANTILES", "TTFT", "Histogram", "MetricTiming",
           "QuantileCheck", "bucket_text", "cause", "check_figure", "delta", "describe",
           "engine_deltas", "findings", "histogram_problem", "ms_text", "parse_histograms",
           "parse_phase_timing", "quantile_bucket", "verdict"]
