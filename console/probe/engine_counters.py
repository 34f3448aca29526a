"""The engine's own counts, read before and after each phase, and its KV-cache capacity.

``/metrics`` is parsed by the one Prometheus text reader (:func:`seat_console.core.promtext.
parse_families`: the engine source's :func:`~seat_console.sources.engine.parse_metrics` for the
logical metrics, and the same reader here for the label breakdown of ``vllm:request_success_total`` by ``finished_reason``).
Counters used (vLLM ``vllm/v1/metrics/loggers.py``):

* ``vllm:generation_tokens_total`` — output tokens generated, all requests;
* ``vllm:prompt_tokens_total`` — prompt tokens processed;
* ``vllm:request_success_total{finished_reason=stop|length|abort|error|…}`` — finished
  requests by reason; *succeeded* here means ``stop`` + ``length`` (+ any reason other than
  ``abort``/``error``);
* ``process_start_time_seconds`` — the API server process's start (a change = a restart; read
  by the engine source's rule, :func:`seat_console.sources.engine.process_start`, into
  :attr:`~seat_console.sources.engine.EngineMetrics.process_start_s`);
* ``vllm:prefix_cache_queries`` / ``vllm:prefix_cache_hits`` — prompt tokens looked up in the
  prefix cache and those found there (``PrometheusStatLogger.__init__`` in
  ``vllm/v1/metrics/loggers.py``, 0.32–0.34; counters, one series per engine, summed here; the
  ``external_`` connector counters are not these). Δ hits / Δ queries over a phase is its
  prefix-cache hit rate (:func:`prefix_cache_delta`).

The probe compares Σ ``usage.completion_tokens`` of its requests with Δ generation tokens, and
its completed requests with Δ succeeded requests; any difference (foreign traffic, a restart,
a lost request) is reported with both figures. A counter that went *down*, or a changed process
start time, means the engine restarted: the run is disrupted.

KV-cache capacity comes from ``vllm:cache_config_info``'s labels (``kv_cache_size_tokens``,
``kv_cache_max_concurrency``, ``num_gpu_blocks``, ``block_size`` when this vLLM exposes them)
and from the engine's startup log (:func:`seat_console.sources.startup_log.parse_startup_log`).
"""

from __future__ import annotations

import math
from typing import Any

import httpx
from seat_console.core.base import Frozen
from seat_console.core.promtext import parse_families
from seat_console.node.engine_client import METRICS, EngineError, get_async
from seat_console.core.engine_timing import ITL, TTFT, Histogram, parse_histograms
from seat_console.sources.engine import count_ok, normalize, parse_metrics, unique_series

FAILED_REASONS = frozenset({"abort", "error"})
"""``finished_reason`` values of ``vllm:request_success_total`` that are not a success."""


class EngineCounters(Frozen):
    """One scrape's counters (``None`` = the metric is not exposed — never 0 for unknown).

    ``generation_tokens``, ``prompt_tokens``: cumulative tokens; ``requests_by_reason``:
    finished requests per ``finished_reason`` (``None`` when the metric is missing);
    ``requests_succeeded``: sum over reasons outside :data:`FAILED_REASONS`;
    ``process_start_s``: ``process_start_time_seconds`` (Unix s); ``running`` / ``waiting``:
    requests in the engine's queues; ``kv_cache_usage``: 0–1; ``cache_config``: the labels of
    ``vllm:cache_config_info``; ``timing``: the engine's TTFT and ITL histograms
    (:data:`~seat_console.core.engine_timing.TTFT`, :data:`~seat_console.core.engine_timing.ITL`;
    an absent one is not a key; one the scrape could not use — no ``+Inf`` bucket, a count that
    is not one — is the sentence saying why,
    :func:`~seat_console.core.engine_timing.parse_histograms`), ``None`` when the text could
    not be parsed (``timing_problem`` says why).

    Unknown is ``None``, never 0 and never a change: a count that is NaN, infinite or negative
    is not summed, and a ``process_start_time_seconds`` that is not a finite time after the
    Unix epoch is ``None`` (a NaN there read as a restart at every scrape, issue 31). A series
    repeated in the scrape (same name and labels) counts once, the first — the rule of
    :func:`seat_console.sources.engine.unique_series`, as Prometheus's own scrape keeps the
    first sample of a duplicate series.
    ``prefix_cache_hits`` / ``prefix_cache_queries``: cumulative tokens (``None``: not exposed,
    or a value not finite or negative).
    """

    generation_tokens: float | None = None
    prompt_tokens: float | None = None
    requests_by_reason: dict[str, float] | None = None
    requests_succeeded: float | None = None
    process_start_s: float | None = None
    running: float | None = None
    waiting: float | None = None
    kv_cache_usage: float | None = None
    cache_config: dict[str, str] | None = None
    timing: dict[str, Histogram | str] | None = None
    timing_problem: str | None = None
    prefix_cache_hits: float | None = None
    prefix_cache_queries: float | None = None


WANTED = ("generation_tokens", "prompt_tokens", "request_success", "num_requests_running",
          "num_requests_waiting", "cache_usage_perc", "cache_config_info", "process_start_time",
          "prefix_cache_hits", "prefix_cache_queries")
"""Fragments of the metric names this module reads; other families are dropped before parsing
(vLLM exposes hundreds of histogram lines; parsing them all costs ~60 ms of CPU a scrape)."""
TIMING_WANTED = (TTFT.removeprefix("vllm:"), ITL.removeprefix("vllm:"))
"""The histogram families parsed apart (:func:`seat_console.core.engine_timing.parse_histograms`):
parsing them with the counters as well took a scrape from 6 to 14 ms of CPU."""


def _wanted_lines(text: str) -> tuple[str, str]:
    """One pass over ``text``: the lines of the :data:`WANTED` families and those of the
    :data:`TIMING_WANTED` ones, each as Prometheus text."""
    keep: list[str] = []
    timing: list[str] = []
    for line in text.split("\n"):   # as the exposition parser splits: not str.splitlines,
        # which also breaks at U+2028, \x1c… inside a label value and made a line of its tail
        if line.startswith("#"):
            parts = line.split(None, 3)
            name = parts[2] if len(parts) > 2 and parts[1] in ("TYPE", "HELP") else ""
        else:
            name = line.split("{", 1)[0].split(" ", 1)[0]
        if any(w in name for w in WANTED):
            keep.append(line)
        elif any(w in name for w in TIMING_WANTED):
            timing.append(line)
    return "\n".join(keep) + "\n", "\n".join(timing) + "\n"


def parse_counters(text: str) -> EngineCounters:
    """Parse Prometheus text from vLLM's ``/metrics`` into :class:`EngineCounters` (only the
    families named by :data:`WANTED` are parsed).

    Raises :class:`ValueError` when the text is not Prometheus exposition format. Values and
    repeated series as :class:`EngineCounters` says.
    """
    text, timing_text = _wanted_lines(text)
    m = parse_metrics(text)
    by_reason: dict[str, float] | None = None
    samples = []
    prefix_samples = []
    for fam in parse_families(text, METRICS):
        if normalize(fam.name) == "request_success":
            samples.extend(fam.samples)
        elif normalize(fam.name) in ("prefix_cache_hits", "prefix_cache_queries"):
            prefix_samples.extend(fam.samples)
    for s in unique_series(samples):
        if not count_ok(s.value) or s.name.endswith("_created"):
            continue
        reason = s.labels.get("finished_reason", "unlabelled")
        by_reason = by_reason or {}
        by_reason[reason] = by_reason.get(reason, 0.0) + s.value
    timing: dict[str, Histogram | str] | None = None
    prefix: dict[str, float | None] = {}
    for s in unique_series(prefix_samples):
        if s.name.endswith("_created"):
            continue
        name = normalize(s.name)
        if not count_ok(s.value) or prefix.get(name, 0.0) is None:
            prefix[name] = None          # one unknown series: the sum is unknown, never less
        else:
            prefix[name] = (prefix.get(name) or 0.0) + s.value
    timing_problem = None
    try:
        timing = parse_histograms(timing_text)
    except ValueError as exc:
        timing_problem = str(exc)
    succeeded = (None if by_reason is None else
                 sum(v for k, v in by_reason.items() if k not in FAILED_REASONS))
    if by_reason is None and m.requests_finished is not None:
        succeeded = m.requests_finished
    return EngineCounters(
        generation_tokens=m.generation_tokens, prompt_tokens=m.prompt_tokens,
        requests_by_reason=by_reason, requests_succeeded=succeeded,
        process_start_s=m.process_start_s,
        running=m.requests_running, waiting=m.requests_waiting,
        kv_cache_usage=m.kv_cache_usage, cache_config=m.cache_config, timing=timing,
        timing_problem=timing_problem, prefix_cache_hits=prefix.get("prefix_cache_hits"),
        prefix_cache_queries=prefix.get("prefix_cache_queries"))


class PrefixCacheDelta(Frozen):
    """A phase's prefix-cache use from two scrapes: ``hits`` / ``queries`` (Δ tokens, ``None``
    = unknown), ``hit_rate`` = hits / queries (``None`` when unknown or no query), ``problem``:
    why unknown (not exposed, a counter went down)."""

    hits: float | None = None
    queries: float | None = None
    hit_rate: float | None = None
    problem: str | None = None


def prefix_cache_delta(before: EngineCounters, after: EngineCounters) -> PrefixCacheDelta:
    """Δ ``vllm:prefix_cache_hits`` / Δ ``vllm:prefix_cache_queries`` between two scrapes of
    one phase. Unknown (with ``problem``) when either scrape lacks a counter or one went down
    (an engine restart); a rate only when queries > 0 and 0 <= hits <= queries."""
    b_h, b_q = before.prefix_cache_hits, before.prefix_cache_queries
    a_h, a_q = after.prefix_cache_hits, after.prefix_cache_queries
    if None in (b_h, b_q, a_h, a_q):
        return PrefixCacheDelta(problem="the engine does not expose vllm:prefix_cache_hits / "
                                        "vllm:prefix_cache_queries (prefix caching off?)")
    assert b_h is not None and b_q is not None and a_h is not None and a_q is not None
    hits, queries = a_h - b_h, a_q - b_q
    if hits < 0 or queries < 0:
        return PrefixCacheDelta(problem="a prefix-cache counter went down (an engine restart)")
    if queries == 0:
        return PrefixCacheDelta(hits=hits, queries=queries,
                                problem="no prompt token was looked up in the prefix cache")
    if hits > queries:
        return PrefixCacheDelta(hits=hits, queries=queries,
                                problem=f"hits {hits:,.0f} > queries {queries:,.0f}")
    return PrefixCacheDelta(hits=hits, queries=queries, hit_rate=hits / queries)


async def scrape(client: httpx.AsyncClient) -> EngineCounters | str:
    """``GET /metrics`` on ``client``'s base URL → :class:`EngineCounters`, or a sentence saying
    why not (never raises for an engine problem; no answer: the engine client's error, naming
    the URL, :func:`seat_console.node.engine_client.get_async`)."""
    try:
        r = await get_async(client, METRICS, timeout_s=10.0)
    except EngineError as exc:
        return str(exc)
    if r.status != 200:
        return f"GET /metrics: HTTP {r.status}"
    try:
        return parse_counters(r.text)
    except ValueError as exc:
        return f"GET /metrics: not Prometheus text ({exc})"


class Check(Frozen):
    """One client-vs-engine comparison: ``what``; ``client`` (the probe's count); ``engine``
    (Δ of the engine's counter, ``None`` when unknown); ``ok`` (equal); ``note`` (why not, with
    both figures)."""

    what: str
    client: int
    engine: float | None
    ok: bool
    note: str | None = None


class Accounting(Frozen):
    """Client vs engine for one phase: ``tokens`` (Σ usage.completion_tokens vs Δ
    ``vllm:generation_tokens_total``), ``requests`` (completed vs Δ succeeded requests);
    ``engine_failed`` (Δ of abort/error finished requests); ``reset``: a sentence when the
    engine's counters went down or its process restarted between the two scrapes; ``ok``: both
    checks agree and no reset."""

    tokens: Check
    requests: Check
    engine_failed: float | None = None
    reset: str | None = None
    ok: bool


def _delta(before: float | None, after: float | None) -> float | None:
    return None if before is None or after is None else after - before


def compare(before: EngineCounters, after: EngineCounters, *, client_tokens: int,
            client_requests: int) -> Accounting:
    """Build :class:`Accounting` from two scrapes around a phase and the client's sums.

    The engine counts every token it generated, including those of requests the client gave up
    on (a timeout aborts the request in the engine after some tokens), so the tokens check
    compares with Σ ``usage.completion_tokens`` of *completed* requests plus the streamed tokens
    of failed ones being unknown: any difference is shown, never hidden.
    """
    reset = None
    for name in ("generation_tokens", "prompt_tokens", "requests_succeeded"):
        b, a = getattr(before, name), getattr(after, name)
        if b is not None and a is not None and a < b:
            reset = (f"the engine's {name} counter went down ({b:,.0f} → {a:,.0f}): the engine "
                     "restarted during the phase")
    if (before.process_start_s is not None and after.process_start_s is not None
            and before.process_start_s != after.process_start_s):
        reset = (f"the engine's process start time changed ({before.process_start_s:.0f} → "
                 f"{after.process_start_s:.0f}): the engine restarted during the phase")

    def check(what: str, client: int, engine: float | None, metric: str) -> Check:
        if engine is None:
            return Check(what=what, client=client, engine=None, ok=False,
                         note=f"{metric} not exposed by the engine; {what} cannot be checked "
                              f"(client: {client:,})")
        ok = engine == client
        note = None if ok else (f"{what}: client {client:,} vs engine Δ{metric} "
                                f"{engine:,.0f} (foreign traffic, a restart or a lost request)")
        return Check(what=what, client=client, engine=engine, ok=ok, note=note)

    tokens = check("output tokens", client_tokens,
                   _delta(before.generation_tokens, after.generation_tokens),
                   "vllm:generation_tokens_total")
    reqs = check("requests", client_requests,
                 _delta(before.requests_succeeded, after.requests_succeeded),
                 "vllm:request_success_total")
    failed = None
    if before.requests_by_reason is not None and after.requests_by_reason is not None:
        failed = sum(after.requests_by_reason.get(k, 0.0) - before.requests_by_reason.get(k, 0.0)
                     for k in FAILED_REASONS)
    return Accounting(tokens=tokens, requests=reqs, engine_failed=failed, reset=reset,
                      ok=tokens.ok and reqs.ok and reset is None)


class KvCapacity(Frozen):
    """The engine's KV-cache capacity: ``tokens`` (KV cache size in tokens) and
    ``max_concurrency`` (requests of ``per_request_tokens`` that fit at once), each with where it
    came from (``source``: ``"vllm:cache_config_info"`` / ``"startup log"``); ``blocks``,
    ``block_size``; ``memory_bytes`` (``kv_cache_memory_bytes`` label or the log's
    "Available KV cache memory"); ``notes``: what could not be read."""

    tokens: int | None = None
    max_concurrency: float | None = None
    per_request_tokens: int | None = None
    blocks: int | None = None
    block_size: int | None = None
    memory_bytes: int | None = None
    source: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()


MAX_LABEL_COUNT = 2 ** 53
"""The largest count (tokens, blocks, bytes) taken from a ``vllm:cache_config_info`` label or
made from two of them (9.0e15: above it a float is no longer an exact integer; an H200's
memory is 1.5e11 B). Larger is unknown, with a note."""


def _num(v: Any) -> float | None:
    """A label value as a finite number ≥ 0 and ≤ :data:`MAX_LABEL_COUNT`; else ``None``."""
    try:
        x = float(v)
    except (TypeError, ValueError):
        return None
    return x if math.isfinite(x) and 0 <= x <= MAX_LABEL_COUNT else None


def kv_capacity(cache_config: dict[str, str] | None, startup: Any | None,
                max_model_len: int | None = None) -> KvCapacity:
    """Combine ``vllm:cache_config_info`` labels and a startup-log reading
    (:class:`~seat_console.sources.startup_log.StartupFacts` or ``None``) into
    :class:`KvCapacity`. The metric wins where both have a figure; both sources are named.

    A label that is not a number, or is NaN, infinite, negative or above
    :data:`MAX_LABEL_COUNT`, is unknown (``None``), and so is the token count
    ``num_gpu_blocks × block_size`` when the product is above it (a note says so: it overflowed
    to ``inf`` and raised :class:`OverflowError` before, issue 31)."""
    cfg = cache_config or {}
    src: list[str] = []
    notes: list[str] = []
    tokens = _num(cfg.get("kv_cache_size_tokens"))
    conc = _num(cfg.get("kv_cache_max_concurrency"))
    mem = _num(cfg.get("kv_cache_memory_bytes"))
    blocks = _num(cfg.get("num_gpu_blocks"))
    bsz = _num(cfg.get("block_size"))
    if cache_config is None:
        notes.append("vllm:cache_config_info not exposed")
    elif tokens is not None or blocks is not None:
        src.append("vllm:cache_config_info")
    per_req = max_model_len
    if startup is not None:
        used = False
        if tokens is None and startup.kv_cache_tokens is not None:
            tokens, used = float(startup.kv_cache_tokens), True
        if startup.max_concurrency is not None:
            if conc is None:
                conc, used = startup.max_concurrency, True
            per_req = startup.concurrency_tokens_per_request or per_req
        if mem is None and startup.available_kv_cache_bytes is not None:
            mem, used = float(startup.available_kv_cache_bytes), True
        if used or startup.kv_cache_tokens is not None:
            src.append("startup log")
    else:
        notes.append("startup log not read")
    if tokens is None and blocks is not None and bsz is not None:
        tokens = blocks * bsz
        if tokens > MAX_LABEL_COUNT:
            notes.append(f"num_gpu_blocks × block_size = {blocks:g} × {bsz:g} is above "
                         f"{MAX_LABEL_COUNT:,} tokens: not a real KV cache, unknown")
            tokens = None
    return KvCapacity(tokens=int(tokens) if tokens is not None else None,
                      max_concurrency=conc, per_request_tokens=per_req,
                      blocks=int(blocks) if blocks is not None else None,
                      block_size=int(bsz) if bsz is not None else None,
                      memory_bytes=int(mem) if mem is not None else None,
                      source=tuple(src), notes=tuple(notes))


__all__ = [
    "PrefixCacheDelta",
    "prefix_cache_delta",
    "FAILED_REASONS",
    "MAX_LABEL_COUNT",
    "Accounting",
    "Check",
    "EngineCounters",
    "KvCapacity",
    "compare",
    "kv_capacity",
    "parse_counters",
    "scrape",
]
