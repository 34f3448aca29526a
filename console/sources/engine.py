"""The seat's inference engine (vLLM's OpenAI-compatible server): health, models, version,
metrics.

Endpoints read through the one engine client (:mod:`seat_console.node.engine_client`: its
timeout and error rule; ``/health``, ``/v1/models``, ``/version``, ``/metrics``; vLLM
``vllm/entrypoints/openai/api_server.py``), and where the
engine offers them ``/is_paused`` and ``/is_sleeping`` (vLLM 0.32: mounted only when the server
runs with ``VLLM_SERVER_DEV_MODE=1``, ``entrypoints/launchers/api_server/routers.py``; a 404 says
"not offered", never "not paused"): the engine's own hold state, :func:`hold_state`. ``/metrics`` is
parsed by the one Prometheus text reader, :func:`seat_console.core.promtext.parse_families`.

What one read asks (:class:`EngineReader`): ``/health`` and ``/metrics`` every read; the
engine's identity — ``/version`` and ``/v1/models`` — on the first read, at once after a read
in which ``/health`` did not answer 200 or did not answer, at once when the engine's
incarnation changed (``process_start_time_seconds`` in ``/metrics``: a restart), again while
its last read failed in part, and otherwise every :data:`IDENTITY_KEEP_S` (15 s), so a failing
``/v1/models`` shows within 15 s. Between identity reads the reading carries the last identity
with the time it was really read (:attr:`EngineReading.identity_at`); the panel draws that
time. ``/is_paused`` / ``/is_sleeping`` are not asked again for :data:`NOT_OFFERED_KEEP_S`
after they answered "not offered" from a healthy engine.

Metric names change across vLLM releases, so each logical metric has an alias list and is
found by normalized name, then by fragment (``vllm:gpu_cache_usage_perc`` became
``vllm:kv_cache_usage_perc`` with the V1 engine; ``vllm:time_per_output_token_seconds`` became
``vllm:inter_token_latency_seconds``; exporters may use ``vllm_`` instead of ``vllm:``).
Normalizing lower-cases, drops a ``vllm:`` / ``vllm_`` prefix and a ``_total`` suffix. A metric
that is not exposed at all is ``None`` and shown as "metric missing" — never 0 (an idle engine
exposes real zeros, which are shown as 0).

Aggregation across label sets (several engines / data-parallel ranks, several models):
request gauges and counters are summed; KV cache usage is the maximum (the fullest engine is the
one that preempts); latency histograms are merged bucket by bucket before a percentile is
estimated (averaging replicas' p95 would be wrong). Field terms: TTFT (time to first token),
ITL (inter-token latency), E2E latency (request end to end).
"""

from __future__ import annotations

import functools
import math
import re
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from pydantic import BaseModel

from seat_console.core.profile import LoadedProfile
from seat_console.core.base import Frozen, Source, Unavailable, utcnow
from seat_console.core.partial import Kept, keep
from seat_console.core.promtext import MAX_TEXT_CHARS, Metric, parse_families
from seat_console.core.untrusted import InputError, get_bool, get_int, get_str, load_json
from seat_console.node.engine_client import (
    HEALTH,
    IS_PAUSED,
    IS_SLEEPING,
    METRICS,
    MODELS,
    VERSION,
    EngineClient,
    EngineError,
)

METRIC_ALIASES: dict[str, tuple[str, ...]] = {
    "requests_running": ("num_requests_running",),
    "requests_waiting": ("num_requests_waiting",),
    "kv_cache_usage": ("kv_cache_usage_perc", "gpu_cache_usage_perc", "cpu_cache_usage_perc",
                       "cache_usage_perc"),
    "prompt_tokens": ("prompt_tokens",),
    "generation_tokens": ("generation_tokens",),
    "preemptions": ("num_preemptions", "num_preemption", "preemptions"),
    "requests_finished": ("request_success",),
    "ttft": ("time_to_first_token_seconds",),
    "itl": ("inter_token_latency_seconds", "time_per_output_token_seconds"),
    "e2e": ("e2e_request_latency_seconds",),
}
"""Logical metric → normalized vLLM names, preferred first. The last entries double as
fragments: a family whose normalized name contains one (e.g. ``cache_usage_perc``) matches when
no exact alias does."""

HISTOGRAMS = frozenset({"ttft", "itl", "e2e"})
"""Logical metrics that are histograms; the others are counters or gauges. A candidate family of
the wrong type is skipped (``vllm:request_prompt_tokens`` is a histogram of prompt lengths, not
the ``prompt_tokens`` counter)."""

MAX_METRICS_CHARS = MAX_TEXT_CHARS
"""Largest ``/metrics`` text parsed (16 Mi characters, :data:`seat_console.core.promtext.
MAX_TEXT_CHARS`; vLLM's is ~100 KB per engine)."""

MISSING = "metric missing"
"""How a metric the engine does not expose is shown."""


def normalize(name: str) -> str:
    """``vllm:kv_cache_usage_perc`` → ``kv_cache_usage_perc``; ``vllm_prompt_tokens_total`` →
    ``prompt_tokens`` (lower-case, ``vllm:``/``vllm_`` prefix and ``_total`` suffix dropped)."""
    n = name.lower()
    for p in ("vllm:", "vllm_"):
        if n.startswith(p):
            n = n[len(p):]
            break
    if n.endswith("_total"):
        n = n[: -len("_total")]
    return n


def find_family(families: dict[str, Metric], logical: str) -> Metric | None:
    """The family that serves ``logical`` (a key of :data:`METRIC_ALIASES`), or ``None``.

    ``families`` maps normalized names to parsed families. Exact aliases first, in order; then
    the first alias found as a fragment: a name that ends with it (another namespace prefix,
    ``custom_vllm_num_requests_running``) beats one that merely contains it
    (``num_requests_running_by_lora``, a breakdown); then the shortest. Only families of the
    right type (histogram or not, :data:`HISTOGRAMS`) are considered.
    """
    aliases = METRIC_ALIASES[logical]
    want_hist = logical in HISTOGRAMS

    def fits(fam: Metric) -> bool:
        return (fam.type == "histogram") == want_hist

    for a in aliases:
        if a in families and fits(families[a]):
            return families[a]
    for a in aliases:
        hits = sorted((n for n in families if a in n and fits(families[n])),
                      key=lambda n: (not n.endswith(a), len(n)))
        if hits:
            return families[hits[0]]
    return None


class HistogramSummary(Frozen):
    """A latency histogram merged across label sets: ``count`` observations summing to
    ``sum_s`` seconds; ``mean_s``; ``p50_s`` / ``p95_s`` estimated by linear interpolation inside
    the merged cumulative buckets (as PromQL's ``histogram_quantile``); ``None`` when there are
    no observations. ``buckets``: the merged cumulative ``(upper bound s, count)`` pairs, sorted
    (``+Inf`` last), so rates over a window can be taken from two scrapes' differences
    (``seat_console.snapshot.engine_rates``). In JSON the ``+Inf`` bound is the string ``"Infinity"``
    (:class:`~seat_console.core.base.Frozen` sets ``ser_json_inf_nan="strings"``), which validates
    back to ``math.inf``; pydantic's default would write ``null`` and a snapshot could not be read
    back."""

    count: int
    sum_s: float | None
    """``None`` when the histogram exposes no ``_sum`` (unknown, never 0)."""
    mean_s: float | None
    p50_s: float | None
    p95_s: float | None
    buckets: tuple[tuple[float, float], ...] = ()


class EngineMetrics(Frozen):
    """Engine metrics from one ``/metrics`` scrape; ``None`` = the metric is missing.

    ``requests_running`` / ``requests_waiting``: requests in the running / waiting queue;
    ``kv_cache_usage``: fraction 0–1 of KV cache blocks in use (max over engines);
    ``prompt_tokens`` / ``generation_tokens``: cumulative token counters since engine start;
    ``preemptions``: cumulative preemptions (requests evicted for lack of KV cache);
    ``requests_finished``: cumulative finished requests (all finish reasons); ``ttft`` / ``itl``
    / ``e2e``: latency histograms; ``cache_config``: labels of ``vllm:cache_config_info``
    (``num_gpu_blocks``, ``block_size``…) when exposed; ``matched``: logical name → the metric name
    that served it; ``missing``: logical names not exposed; ``families``: how many families the
    scrape had.
    """

    requests_running: float | None = None
    requests_waiting: float | None = None
    kv_cache_usage: float | None = None
    prompt_tokens: float | None = None
    generation_tokens: float | None = None
    preemptions: float | None = None
    requests_finished: float | None = None
    ttft: HistogramSummary | None = None
    itl: HistogramSummary | None = None
    e2e: HistogramSummary | None = None
    cache_config: dict[str, str] | None = None
    sleep_awake: float | None = None
    """``vllm:engine_sleep_state{sleep_state="awake"}``: 1 every engine awake, 0 one or more
    asleep (the minimum over engines); ``None`` when not exposed or not 0/1 (unknown). vLLM
    ``v1/metrics/loggers.py`` ``PrometheusStatLogger.record_sleep_state``: awake = 0 while the
    engine sleeps (``/sleep``, level 1 weights offloaded, level 2 discarded)."""
    process_start_s: float | None = None
    """``process_start_time_seconds`` (Unix s; ``prometheus_client``'s process collector in
    vLLM's API server, exposed by vLLM 0.32): the serving process's start, so a change is a
    restart — the engine's incarnation (:func:`process_start`). ``None`` when not exposed or
    not a finite time after the epoch (unknown, never a change)."""
    matched: dict[str, str]
    missing: tuple[str, ...]
    families: int


class ModelInfo(Frozen):
    """One entry of ``/v1/models``: ``id`` (served model name), ``root`` (path or repo it was
    loaded from), ``max_model_len`` (tokens; ``None`` if not reported)."""

    id: str
    root: str | None = None
    max_model_len: int | None = None


class EngineReading(Frozen):
    """The seat's engine at ``read_at`` (UTC).

    ``endpoint``: base URL; ``healthy``: ``/health`` answered 200; ``health_status``: its HTTP
    status; ``version``: from ``/version``; ``models``: from ``/v1/models`` (``None`` when that
    failed); ``metrics``: parsed ``/metrics`` (``None`` when that failed); ``problems``: one
    sentence per endpoint that failed while the engine answered; ``kept``: the parts this read
    missed that the app filled from the last good reading (:meth:`with_last_good`), each with
    the time it was really read; ``identity_at``: when ``version`` and ``models`` were read —
    ``read_at`` when this read asked them, earlier when the reader kept the engine's identity
    from its last identity read (:data:`IDENTITY_KEEP_S`: they are not asked every read), so
    the panel shows the identity with its real age, never as fresher than it is.
    """

    endpoint: str
    read_at: datetime
    healthy: bool
    health_status: int | None
    version: str | None
    models: tuple[ModelInfo, ...] | None
    metrics: EngineMetrics | None
    problems: tuple[str, ...] = ()
    kept: tuple[Kept, ...] = ()
    paused: bool | None = None
    """``/is_paused`` (``None``: the engine does not offer it — vLLM mounts it only with
    ``VLLM_SERVER_DEV_MODE=1``, ``entrypoints/launchers/api_server/routers.py``)."""
    sleeping: bool | None = None
    """``/is_sleeping`` (``None``: not offered; same switch, and ``--enable-sleep-mode`` to
    sleep at all)."""
    hold_state: str | None = None
    """``UP`` / ``PAUSED`` / ``ASLEEP`` (:func:`hold_state` of this reading's ``/health``,
    ``/is_paused``, ``/is_sleeping`` and the sleep gauge), ``None`` when not healthy."""
    identity_at: datetime | None = None
    """UTC time ``version`` and ``models`` were read (see the class docstring); ``None`` in a
    reading built without it (taken as ``read_at``)."""

    def with_last_good(self, last: EngineReading) -> EngineReading:
        """This reading with ``version`` / ``models`` / ``metrics`` that this read missed
        (``None`` here, a value in ``last``) taken from ``last``, the app's last good reading
        of the same endpoint, each listed in ``kept`` with its age and this read's problem
        for that endpoint (:mod:`seat_console.core.partial`). A part read now is never
        replaced; another endpoint's last reading is never used. A kept ``version`` /
        ``models`` is as old as ``last``'s ``identity_at`` (the identity is not asked every
        read), and this reading's ``identity_at`` becomes its oldest identity part's time."""
        if last.endpoint != self.endpoint:
            return self
        update: dict[str, Any] = {}
        kept: list[Kept] = []
        for field, path in (("version", VERSION), ("models", MODELS), ("metrics", METRICS)):
            if getattr(self, field) is not None or getattr(last, field) is None:
                continue
            why = next((p.removeprefix(f"{path}: ") for p in self.problems
                        if p.startswith(path)), "not read this time")
            k = keep(last, field, path, why)
            if (k is not None and field != "metrics" and last.identity_at is not None
                    and not any(x.field == field for x in last.kept)):
                # the identity ``last`` showed was read at its identity_at, not at its read_at
                k = k.model_copy(update={"since": last.identity_at})
            if k is not None:
                update[field] = getattr(last, field)
                kept.append(k)
        if not kept:
            return self
        identity = [k.since for k in kept if k.field != "metrics"]
        if identity and self.identity_at is not None:
            # a part of the identity is older than this read's: the identity is as old as
            # its oldest part, never shown as read now
            update["identity_at"] = min([self.identity_at, *identity])
        return self.model_copy(update={**update, "kept": tuple(kept)})


# -- parsing (pure) ------------------------------------------------------------------------
def unique_series(samples: Iterable[Any]) -> list[Any]:
    """``samples`` (``prometheus_client`` samples) with duplicate series dropped: a series (same
    sample name and labels) repeated in one scrape counts once, **the first** — never summed
    twice. The rule of Prometheus's own scrape, which keeps the first sample of a series and
    drops later ones of the same timestamp (counted in
    ``prometheus_target_scrapes_sample_duplicate_timestamp_total``). Every reader of engine
    exposition here uses it (:func:`parse_metrics`,
    :func:`seat_console.probe.engine_counters.parse_counters`; the histogram parser
    :func:`seat_console.core.engine_timing.parse_histograms` keeps the first bucket sample)."""
    seen: set[tuple[str, tuple[tuple[str, str], ...]]] = set()
    out = []
    for s in samples:
        key = (s.name, tuple(sorted(s.labels.items())))
        if key not in seen:
            seen.add(key)
            out.append(s)
    return out


def _value_samples(fam: Metric) -> list[Any]:
    """Samples that carry the family's value (counters: ``*_total`` or bare; not ``_created``),
    duplicate series dropped."""
    out = []
    for s in unique_series(fam.samples):
        if s.name.endswith("_created"):
            continue
        if fam.type in ("histogram", "summary") and not s.name.endswith(("_sum", "_count")):
            continue
        out.append(s)
    return out


def count_ok(v: float, upper: float = math.inf) -> bool:
    """A request count, token counter, usage fraction or time is finite, ≥ 0 and ≤ ``upper``;
    any other value (NaN, ±Inf, negative) is unknown, never summed."""
    return math.isfinite(v) and 0 <= v <= upper


def _sum(fam: Metric | None) -> float | None:
    if fam is None:
        return None
    vals = [s.value for s in _value_samples(fam) if count_ok(s.value)]
    return float(sum(vals)) if vals else None


def _max(fam: Metric | None, upper: float = math.inf) -> float | None:
    if fam is None:
        return None
    vals = [s.value for s in _value_samples(fam) if count_ok(s.value, upper)]
    return float(max(vals)) if vals else None


def histogram_quantile(q: float, buckets: Sequence[tuple[float, float]]) -> float | None:
    """Estimate the ``q`` quantile (0–1) from cumulative ``(upper bound, count)`` buckets.

    Linear interpolation within the bucket that holds the rank, as Prometheus's
    ``histogram_quantile`` (promql/quantile.go): the first bucket's lower bound is 0; a rank in
    the ``+Inf`` bucket returns the largest finite upper bound. ``None`` without observations,
    and ``None`` (unknown) without a ``+Inf`` bucket or with a count that is not finite:
    the last finite bucket is not the whole population (PromQL returns NaN there).
    """
    bs = sorted(buckets, key=lambda b: b[0])
    if not bs or bs[-1][0] != math.inf or not all(math.isfinite(c) for _, c in bs) \
            or bs[-1][1] <= 0:
        return None
    total = bs[-1][1]
    rank = q * total
    prev_le, prev_c = 0.0, 0.0
    for le, c in bs:
        if c >= rank:
            if math.isinf(le):
                return prev_le
            if c == prev_c:
                return le
            return prev_le + (le - prev_le) * (rank - prev_c) / (c - prev_c)
        prev_le, prev_c = le, c
    return prev_le


def quantile_bucket(q: float, buckets: Sequence[tuple[float, float]]
                    ) -> tuple[float, float] | None:
    """The ``(lower, upper)`` bounds in seconds of the cumulative bucket that holds the ``q``
    quantile (0–1) — the bucket :func:`histogram_quantile` interpolates inside (Prometheus
    ``histogram_quantile``, promql/quantile.go: the first bucket's lower bound is 0). The
    estimate is only known to lie in it: with coarse buckets (vLLM's ITL buckets are 10 ms
    wide and more) an interpolated p50 can exceed the mean. ``upper`` is ``math.inf`` for the
    ``+Inf`` bucket; ``None`` without observations, without a ``+Inf`` bucket or with a count
    that is not finite (unknown, as :func:`histogram_quantile`)."""
    bs = sorted(buckets, key=lambda b: b[0])
    if not bs or bs[-1][0] != math.inf or not all(math.isfinite(c) for _, c in bs) \
            or bs[-1][1] <= 0:
        return None
    rank = q * bs[-1][1]
    prev_le = 0.0
    for le, c in bs:
        if c >= rank:
            return prev_le, le
        prev_le = le
    return prev_le, math.inf


def _le(s: Any) -> float | None:
    try:
        le = float(s.labels.get("le", "nan"))
    except ValueError:
        return None
    return None if math.isnan(le) or le < 0 else le


def summarize_histogram(fam: Metric | None) -> HistogramSummary | None:
    """Merge a histogram family's label sets bucket by bucket → :class:`HistogramSummary`.

    ``None`` (unknown, shown as missing — never "no requests") when the family has no
    samples, or its observation count is unknown: no ``_count`` sample and no ``+Inf`` bucket
    (Prometheus: ``_count`` equals the ``+Inf`` bucket, which is used when ``_count`` is
    absent). Duplicate series count once (:func:`unique_series`); samples with a NaN,
    infinite or negative value, or a bucket bound that is not a non-negative number, are
    skipped. ``sum_s`` and ``mean_s`` are ``None`` (unknown) when no ``_sum`` is exposed (it
    was reported as 0 before, issue #22). ``p50_s`` / ``p95_s`` are ``None`` (unknown) without
    a ``+Inf`` bucket — the finite buckets are not the whole population, so the quantiles
    would be taken of part of it (issue 31) — and ``buckets`` is then empty, as it is when
    the merged counts overflow.
    """
    if fam is None:
        return None
    buckets: dict[float, float] = {}
    total_sum = 0.0
    have_sum = False
    count = 0.0
    have_count = False
    for s in unique_series(fam.samples):
        if not count_ok(s.value):
            continue
        if s.name.endswith("_bucket"):
            le = _le(s)
            if le is not None:
                buckets[le] = buckets.get(le, 0.0) + s.value
        elif s.name.endswith("_sum"):
            total_sum += s.value
            have_sum = True
        elif s.name.endswith("_count"):
            count += s.value
            have_count = True
    if not have_count:
        if math.inf not in buckets:
            return None  # how many observations there were is unknown
        count = buckets[math.inf]
    if not math.isfinite(count) or not math.isfinite(total_sum):
        return None
    bl = sorted(buckets.items())
    if not bl or bl[-1][0] != math.inf or not all(math.isfinite(c) for _, c in bl):
        bl = []   # the quantiles and any window over them are unknown
    return HistogramSummary(
        count=int(count), sum_s=total_sum if have_sum else None,
        mean_s=(total_sum / count) if count and have_sum else None,
        p50_s=histogram_quantile(0.5, bl), p95_s=histogram_quantile(0.95, bl),
        buckets=tuple(bl))


EXTRA_FAMILIES = frozenset({"cache_config_info", "engine_sleep_state", "process_start_time",
                            "process_start_time_seconds"})
"""Normalized families :func:`parse_metrics` reads besides :data:`METRIC_ALIASES`."""

_FRAGMENTS = tuple(sorted({a for aliases in METRIC_ALIASES.values() for a in aliases}))
_SUFFIXES = ("_bucket", "_count", "_sum", "_created", "_gcount", "_gsum", "_info")
_METRIC_NAME = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*\Z")


def wanted_family(name: str) -> bool:
    """Whether a metric or sample ``name`` may belong to a family :func:`parse_metrics` reads:
    its normalized name (:func:`normalize`), with a histogram's sample suffix dropped or not,
    is one of :data:`EXTRA_FAMILIES` or contains an alias of :data:`METRIC_ALIASES` (the
    fragment rule of :func:`find_family`)."""
    n = normalize(name)
    cands = [n] + [n[: -len(x)] for x in _SUFFIXES if n.endswith(x)]
    return any(c in EXTRA_FAMILIES or any(a in c for a in _FRAGMENTS) for c in cands)


@dataclass(frozen=True)
class _Declared:
    """A family as its ``# TYPE`` line declares it (for :func:`find_family` before parsing)."""

    name: str
    type: str


@functools.lru_cache(maxsize=4096)
def _bases(name: str) -> tuple[str, ...]:
    """Normalized family names a sample ``name`` may belong to: itself, and without a
    histogram's / counter's sample suffix. Cached (a pure function of the name; an engine
    exposes the same ~150 sample names every read, and computing them was a quarter of
    :func:`select_families`' CPU; 4096 names at most, so a hostile scrape cannot grow it)."""
    n = normalize(name)
    low = name.lower()
    return (n, *(normalize(name[: -len(x)]) for x in _SUFFIXES if low.endswith(x)))


def select_families(text: str) -> tuple[str, int]:
    """The lines of ``text`` (Prometheus exposition) that :func:`parse_metrics` needs, and how
    many declared families were dropped.

    vLLM exposes ~90 families (~630 lines: every histogram's buckets, the process and Python
    collectors); the console reads ~12, and the text parser's cost grows with every line it
    parses (most of the engine source's CPU at 1 Hz before this, ``docs/benchmarks.md``).
    First the ``# TYPE`` lines say which families exist and of what type, and
    :func:`find_family` picks, by the same rule as after parsing, the one family each logical
    metric reads; their lines, those of :data:`EXTRA_FAMILIES`, and the samples of families
    without a ``# TYPE`` line that :func:`wanted_family` may want are kept; other comments and
    blank lines are dropped (the parser skips them). A dropped sample line is still checked to
    start with a metric name and carry a value, so an HTML error page or other text that is
    not the format is refused as before. A scrape that declares one family twice, or has a
    declared family's sample outside the block its ``# TYPE`` line starts, is returned whole
    (the parser types and joins those by what lies around them). Raises :class:`ValueError` naming ``/metrics`` and
    the line for one that does not. The decision is :func:`_decide`'s (the kept lines'
    indices), remembered per scrape shape by :class:`_SelectionMemo`.
    """
    lines = text.split("\n")
    kept, dropped = _decide(lines)
    return (text, 0) if kept is None else (_rebuild(lines, kept), dropped)


def _rebuild(lines: Sequence[str], kept: Sequence[int]) -> str:
    """The text :func:`select_families` returns: ``lines`` at the indices ``kept``, each
    ending with a newline."""
    return "\n".join([lines[i] for i in kept]) + ("\n" if kept else "")


def _decide(lines: list[str]) -> tuple[tuple[int, ...] | None, int]:
    """:func:`select_families`' decision on ``lines`` (its text split at ``"\\n"``): the
    0-based indices of the lines kept and the count of declared families dropped, or
    ``(None, 0)`` when the whole text is to be parsed. Raises :class:`ValueError` as
    :func:`select_families`. What it reads of each line is what :func:`_skeleton` keeps."""
    declared: dict[str, _Declared] = {}
    for line in lines:
        if line.startswith("# TYPE "):
            parts = line.split(None, 3)
            if len(parts) == 4:
                n = normalize(parts[2])
                if n in declared:   # declared twice: how the parser joins them depends on
                    return None, 0  # what lies between, so the whole text is parsed
                declared[n] = _Declared(parts[2], parts[3].strip())
    chosen = set(EXTRA_FAMILIES)
    for logical in METRIC_ALIASES:
        hit = find_family(declared, logical)  # type: ignore[arg-type]
        if hit is not None:
            chosen.add(normalize(hit.name))

    decided: dict[str, bool] = {}

    def keep(name: str) -> bool:
        got = decided.get(name)
        if got is None:
            bases = _bases(name)
            got = decided[name] = any(b in chosen for b in bases) or (
                not any(b in declared for b in bases) and wanted_family(name))
        return got

    named: set[str] = set()

    def _named(name: str) -> bool:
        if name in named:
            return True
        if _METRIC_NAME.match(name):
            named.add(name)
            return True
        return False

    kept: list[int] = []
    current = None   # the family of the newest # TYPE line
    placed: dict[str, bool] = {}
    for i, line in enumerate(lines):
        if not line or line.isspace():
            continue
        if line[0] == "#":
            parts = line.split(None, 3)
            if len(parts) >= 3 and parts[1] in ("HELP", "TYPE", "UNIT"):
                if parts[1] == "TYPE":
                    current = normalize(parts[2])
                    placed.clear()
                if keep(parts[2]):
                    kept.append(i)
            continue
        end = len(line)
        for sep in ("{", " ", "\t"):
            j = line.find(sep)
            if 0 <= j < end:
                end = j
        name = line[:end]
        ok = placed.get(name)
        if ok is None:
            bases = _bases(name)
            ok = placed[name] = current in bases or not any(b in declared for b in bases)
        if not ok:   # a declared family's sample outside its block: the parser types it by
            return None, 0   # where it stands, so the whole text is parsed
        if keep(name):
            kept.append(i)
        elif end == len(line) or not _named(name):
            raise ValueError(f"/metrics: not Prometheus text (line {i + 1} does not start with "
                             f"a metric name and a value: {line[:80]!r})")
    dropped = sum(1 for n in declared if n not in chosen)
    return tuple(kept), dropped


_SHAPE = re.compile(r"^(?:[^#\s{][^\s{]*[{ \t]|.*)", re.M)


def _skeleton(text: str) -> list[str]:
    r"""The shape of a scrape: one string per line of ``text`` (split at ``"\n"``, as
    :func:`_decide` splits it), that line cut after its first ``{``, space or tab when it
    starts with a character that is neither ``#``, whitespace nor ``{`` and every character
    before that cut is neither whitespace nor ``{``; any other line whole. A sample line
    ``name{labels} value`` becomes ``name{``; comment, blank and malformed lines stay whole.

    Why equal skeletons give :func:`_decide` the same decision (same kept indices, same
    dropped count, a ``ValueError`` for both or neither; its message names the line and may
    differ): :func:`_decide` reads of a line (a) whether it is empty or all whitespace
    (``str.isspace``), (b) whether it starts with ``#`` and then the whole line, (c) else its
    name, the text before the first ``{``, space or tab, and whether anything follows the
    name; and the order and number of lines. ``_SHAPE`` holds no newline in a match (``.``
    and ``\s`` stop at it; ``^`` with ``re.M`` matches at the text's start and after each
    ``"\n"``), so line *k* of the skeleton is the shape of line *k* of the text. A line its
    first branch matches is ``N + c + rest`` with ``N`` the longest prefix free of ``\s`` and
    ``{`` (a shorter ``N`` is followed by a character that is neither, so not by ``c``) and
    ``c`` one of ``{``, space, tab; ``\s`` is ``str.isspace`` in ``re``'s str patterns (both
    ``Py_UNICODE_ISSPACE``; a test checks every code point), so ``N`` starts with neither
    ``#`` nor whitespace: the line is not blank, not a comment, and its name is exactly ``N``
    (``N`` holds no ``{``, space or tab, and ``c`` is one) with ``c`` and ``rest`` after it:
    (a), (b), (c) are functions of ``N + c``. Any other line is kept whole, so (a)-(c) are
    functions of it. Two lines with one shape are either both cut (``N + c`` ends with ``c``,
    so equal shapes give equal ``N``) or both whole (equal lines), never one of each: a whole
    line equal to some ``N + c`` would have matched the first branch. A name holding ``\r``,
    ``\x0b``, ``\xa0`` or other whitespace that is not a separator of :func:`_decide` (for
    which ``name\r 1`` is the name ``name\r``) stops ``N`` at a character that is not ``c``:
    that line is kept whole, so any change in it changes the skeleton.

    ~0.2 ms for vLLM's ~630-line scrape, against ~0.7 ms for :func:`_decide` (``re.sub`` to
    one string: ~0.35 ms; ``docs/benchmarks.md``, sixth pass)."""
    return _SHAPE.findall(text)


class _SelectionMemo:
    """:func:`select_families` remembered by the scrape's shape (:func:`_skeleton`): one
    entry, the last shape and its decision; a scrape of the same shape (an engine's next
    scrape: only the values change) is cut at the remembered line indices without deciding
    again. A ``ValueError`` is never remembered (the next scrape decides again)."""

    def __init__(self) -> None:
        self._last: tuple[list[str], tuple[tuple[int, ...] | None, int]] | None = None

    def select(self, text: str) -> tuple[str, int]:
        """``select_families(text)``, the same result or ``ValueError``."""
        shape = _skeleton(text)
        lines = text.split("\n")
        last = self._last
        if last is not None and last[0] == shape:
            kept, dropped = last[1]
        else:
            kept, dropped = _decide(lines)   # raises before anything is remembered
            self._last = (shape, (kept, dropped))
        return (text, 0) if kept is None else (_rebuild(lines, kept), dropped)


def parse_metrics(text: str) -> EngineMetrics:
    """Parse Prometheus text exposition from vLLM into :class:`EngineMetrics`.

    Only the families the console reads are parsed (:func:`select_families`); ``families``
    counts those parsed plus the declared families dropped. Raises
    :class:`ValueError` naming ``/metrics`` when the text is not Prometheus exposition
    format, or is above :data:`MAX_METRICS_CHARS`. Values that cannot be a count (NaN, ±Inf,
    negative) are unknown, and a series exposed twice counts once.
    """
    if len(text) > MAX_METRICS_CHARS:   # before the selection scans it
        raise ValueError(f"{METRICS}: {len(text):,} characters is above the "
                         f"{MAX_METRICS_CHARS:,}-character limit")
    return parse_selected(*select_families(text))


def parse_selected(text: str, dropped: int) -> EngineMetrics:
    """:func:`parse_metrics` after the selection: ``text`` is what :func:`select_families`
    kept, ``dropped`` the declared families it dropped. Raises :class:`ValueError` as
    :func:`parse_metrics` does."""
    families: dict[str, Metric] = {}
    for fam in parse_families(text, METRICS, max_chars=MAX_METRICS_CHARS):
        key = normalize(fam.name)
        prev = families.get(key)
        # a TYPE line whose samples carry another name (``# TYPE x counter`` + ``x_total``)
        # parses as an empty family plus an untyped one: keep the one with samples; samples
        # without a TYPE line parse as one family per line: merge those of one type (the
        # duplicate series among them are dropped later, by unique_series)
        if prev is None or (not prev.samples and fam.samples):
            families[key] = fam
        elif fam.samples and fam.type == prev.type:
            prev.samples.extend(fam.samples)
    matched: dict[str, str] = {}
    missing: list[str] = []
    found: dict[str, Metric | None] = {}
    for logical in METRIC_ALIASES:
        hit = find_family(families, logical)
        found[logical] = hit
        if hit is None:
            missing.append(logical)
        else:
            matched[logical] = hit.name
    cache_cfg = families.get("cache_config_info")
    cfg_labels = None
    if cache_cfg is not None and cache_cfg.samples:
        cfg_labels = {k: str(v) for k, v in cache_cfg.samples[0].labels.items()}
    return EngineMetrics(
        sleep_awake=sleep_awake(families.get("engine_sleep_state")),
        process_start_s=process_start(next((families[n] for n in (
            "process_start_time_seconds", "process_start_time") if n in families), None)),
        requests_running=_sum(found["requests_running"]),
        requests_waiting=_sum(found["requests_waiting"]),
        kv_cache_usage=_max(found["kv_cache_usage"], upper=1.0),
        prompt_tokens=_sum(found["prompt_tokens"]),
        generation_tokens=_sum(found["generation_tokens"]),
        preemptions=_sum(found["preemptions"]),
        requests_finished=_sum(found["requests_finished"]),
        ttft=summarize_histogram(found["ttft"]), itl=summarize_histogram(found["itl"]),
        e2e=summarize_histogram(found["e2e"]), cache_config=cfg_labels, matched=matched,
        missing=tuple(missing), families=len(families) + dropped)


def process_start(fam: Metric | None) -> float | None:
    """The serving process's start (Unix s) from the ``process_start_time_seconds`` family
    (``prometheus_client``'s process collector): its first sample (a repeated series counts
    once, :func:`unique_series`; ``_created`` samples skipped) whose value is finite and after
    the Unix epoch; ``None`` (unknown) when the family is absent or has no such sample — a NaN
    here read as a restart at every scrape (issue 31). The one rule for the engine's
    incarnation: the engine source's identity keep (:data:`IDENTITY_KEEP_S`) and the probe's
    restart check (:mod:`seat_console.probe.engine_counters`)."""
    if fam is None:
        return None
    for s in unique_series(fam.samples):
        if not s.name.endswith("_created") and count_ok(s.value) and s.value > 0:
            return float(s.value)
    return None


def sleep_awake(fam: Metric | None) -> float | None:
    """The ``awake`` series of ``vllm:engine_sleep_state`` (vLLM ``v1/metrics/loggers.py``,
    ``record_sleep_state``: a gauge per engine labelled ``sleep_state`` = ``awake`` /
    ``weights_offloaded`` / ``discard_all``): ``1.0`` when every engine's awake series is 1,
    ``0.0`` when any is 0; ``None`` (unknown) when the family or its awake series is absent or a
    value is not exactly 0 or 1 (NaN, ±Inf, 0.5 — never read as awake)."""
    if fam is None:
        return None
    vals = [s.value for s in unique_series(fam.samples)
            if s.labels.get("sleep_state") == "awake" and not s.name.endswith("_created")]
    if not vals or any(v not in (0.0, 1.0) for v in vals):
        return None
    return float(min(vals))


HOLD_STATES = ("UP", "PAUSED", "ASLEEP")
"""The engine's own hold state as :func:`hold_state` words it: serving (``UP``), admitting
nothing new (``PAUSED``: vLLM ``POST /pause``), weights put away (``ASLEEP``: ``POST /sleep``).
``/health`` answers 200 in all three (vLLM ``entrypoints/serve/instrumentator/health.py``), so
only these endpoints tell them apart."""


def parse_version(body: bytes | str) -> str | None:
    """The ``version`` string of the engine's ``GET /version`` answer (vLLM
    ``entrypoints/openai/api_server.py`` ``show_version``: ``{"version": "0.32.0"}``), at most
    200 characters; ``None`` when the object has no string ``version``. Raises
    :class:`~seat_console.core.untrusted.InputError` naming ``/version`` for a body that is not
    a JSON object (:func:`~seat_console.core.untrusted.load_json`'s rules: size, depth, NaN)."""
    return get_str(load_json(body, VERSION), "version", max_len=200)


def parse_flag(body: bytes | str, path: str, key: str) -> bool:
    """The boolean ``key`` of the JSON object ``body`` that the engine's ``path`` answered:
    ``/is_paused`` → ``{"is_paused": bool}`` (vLLM ``entrypoints/rl/online/api_router.py``,
    ``is_paused``), ``/is_sleeping`` → ``{"is_sleeping": bool}`` (``entrypoints/serve/dev/
    sleep/api_router.py``, ``is_sleeping``). Raises :class:`~seat_console.core.untrusted.
    InputError` naming ``path`` for anything else (not JSON, no such key, not a bool)."""
    doc = load_json(body, path)
    v = get_bool(doc, key)
    if v is None:
        raise InputError(path, f"expected {{{key!r}: true|false}}, got {str(doc)[:120]!r}")
    return v


def hold_state(healthy: bool, paused: bool | None, sleeping: bool | None,
               awake: float | None = None) -> str | None:
    """``"ASLEEP"`` when ``/is_sleeping`` said true or the sleep gauge says an engine sleeps
    (``awake`` 0); else ``"PAUSED"`` when ``/is_paused`` said true; else ``"UP"`` when
    ``/health`` answered 200; else ``None`` (not serving: the health reading says why). An
    endpoint the engine does not offer (``None``) says nothing either way."""
    if sleeping or awake == 0.0:
        return "ASLEEP"
    if paused:
        return "PAUSED"
    return "UP" if healthy else None


def parse_models(data: Any) -> tuple[ModelInfo, ...]:
    """``/v1/models`` JSON (``{"object": "list", "data": [{"id", "root", "max_model_len"}…]}``)
    → models. Raises :class:`ValueError` for another shape."""
    if not isinstance(data, dict) or not isinstance(data.get("data"), list):
        raise ValueError("/v1/models did not return {'data': [...]}")
    # Typed fields: an entry without a string id is skipped; a root that is not a string and a
    # max_model_len that is not a positive integer (true, 1e400, "x") are unknown.
    return tuple(ModelInfo(id=m["id"], root=get_str(m, "root"),
                           max_model_len=get_int(m, "max_model_len", minimum=1))
                 for m in data["data"] if isinstance(m, dict) and isinstance(m.get("id"), str))


def fmt_metric(value: float | None, fmt: str = "{:.0f}") -> str:
    """A metric for display: :data:`MISSING` for ``None``, else ``fmt`` applied."""
    return MISSING if value is None else fmt.format(value)


# -- reading ---------------------------------------------------------------------------------
NOT_OFFERED_KEEP_S = 60.0
"""Seconds an engine's "not offered" answer (HTTP 404 / 405) of ``/is_paused`` or
``/is_sleeping`` is believed while ``/health`` keeps answering 200: those endpoints exist only
under ``VLLM_SERVER_DEV_MODE``, which an engine process does not gain while it runs, so asking
them every read spent two of the read's six requests (~1.4 ms of CPU at 1 Hz) on a known
answer. Asked again after this long, and at once after ``/health`` did not answer 200 (a
restart)."""

IDENTITY_KEEP_S = 15.0
"""Seconds the engine's identity — ``/version`` and ``/v1/models`` — is believed without asking
again while the engine stays the same process. The identity is read:

* on the reader's first read, and at every read while the last identity read failed in part
  (a ``/version`` or ``/v1/models`` that did not answer a valid 200 is not a known identity);
* at every read in which ``/health`` did not answer 200, and at the read after one in which it
  did not answer 200 or did not answer at all (a restarting or replaced engine);
* at once when the engine's incarnation changed: ``process_start_time_seconds`` in
  ``/metrics`` (:attr:`EngineMetrics.process_start_s`, read every read) differs from its value
  at the identity read (a restart between two reads of a still-healthy endpoint);
* otherwise when the last identity read is this old, so an endpoint that starts failing
  (``/v1/models`` timing out) shows within 15 s.

Between identity reads a reading carries the last identity with the time it was really read
(:attr:`EngineReading.identity_at`), never as read now. Why: the identity is not a live figure,
and asking it every read spent two of the read's four requests (~1.4 ms of CPU a second at
1 Hz in httpx alone, ``docs/benchmarks.md``) on a known answer."""

MAX_BODY_BYTES = MAX_METRICS_CHARS
"""Bytes read of one endpoint's answer at the most: reading stops there (while streaming, not
after the download) and the endpoint counts as failed, naming the limit."""


@dataclass(frozen=True)
class _Get:
    status: int | None
    body: bytes | None
    error: str | None


@dataclass(frozen=True)
class _Identity:
    """The engine's identity as one read got it: ``version`` and ``models`` (``None``: that
    endpoint failed, named in the read's problems), ``at`` (UTC) and ``mono`` (the reader's clock, s) when they were read, and
    ``start``, the process start time (:func:`process_start`) seen in the same read."""

    version: str | None
    models: tuple[ModelInfo, ...] | None
    at: datetime
    mono: float
    start: float | None


class EngineReader:
    """One reading of the engine at ``base_url`` (:meth:`read`) through the one engine client,
    :class:`seat_console.node.engine_client.EngineClient` (its timeout and error rule;
    ``timeout_s`` per request; ``clock``: monotonic seconds, for
    :data:`NOT_OFFERED_KEEP_S` and the identity keep; ``identity_keep_s``: the identity keep,
    default :data:`IDENTITY_KEEP_S`, 0 = ask ``/version`` and ``/v1/models`` every read). Its
    memories (the last parse, the endpoints not offered, the last identity) are replaced
    whole, so a reader shared between threads stays correct."""

    def __init__(self, base_url: str, timeout_s: float = 3.0, *,
                 clock: Any = time.monotonic,
                 identity_keep_s: float = IDENTITY_KEEP_S) -> None:
        self.client = EngineClient(base_url, timeout_s)
        self.base_url = self.client.base_url
        self._clock = clock
        self._identity_keep_s = identity_keep_s
        self._not_offered: dict[str, float] = {}
        self._parsed: tuple[tuple[str, int], EngineMetrics] | None = None
        self._selection = _SelectionMemo()
        self._identity: _Identity | None = None

    def __repr__(self) -> str:
        return f"EngineReader({self.base_url!r})"

    def _get(self, path: str) -> _Get:
        """GET ``path``: its status and body, read up to :data:`MAX_BODY_BYTES` while it
        streams in (a larger answer is dropped there, the limit named)."""
        try:
            a = self.client.get(path, max_bytes=MAX_BODY_BYTES)
        except EngineError as exc:   # the client's rule: timeout, unreachable, too large
            return _Get(None, None, f"GET {path}: {exc.problem}")
        return _Get(a.status, a.body, None)

    def read(self) -> EngineReading | Unavailable:
        """Read ``/health`` and ``/metrics``, and ``/version`` + ``/v1/models`` when the
        identity rule says so (:data:`IDENTITY_KEEP_S`: else the last identity, with its read
        time in ``identity_at``); :class:`Unavailable` when ``/health`` gets no HTTP answer at
        all (kind ``unreachable`` or ``timeout``). Never raises for engine problems."""
        h = self._get(HEALTH)
        if h.status is None:
            self._identity = None   # read the identity again once the engine answers
            kind = "timeout" if "in time" in (h.error or "") else "unreachable"
            return Unavailable(source="engine", kind=kind,
                               reason=f"engine at {self.base_url} not answering: {h.error}")
        problems: list[str] = []
        if h.status != 200:
            problems.append(f"/health answered HTTP {h.status}")
        metrics: EngineMetrics | None = None
        x = self._get(METRICS)
        if x.status == 200 and x.body is not None:
            try:
                metrics = self._parse_metrics(x.body.decode("utf-8", "replace"))
            except ValueError as exc:
                problems.append(str(exc))
        else:
            problems.append(f"/metrics: {x.error or f'HTTP {x.status}'}")
        start = metrics.process_start_s if metrics is not None else None
        ident = self._identity
        if ident is None or h.status != 200 or (start is not None and start != ident.start) \
                or not self._clock() - ident.mono < self._identity_keep_s:
            ident, whole = self._read_identity(start, problems)
            # kept only when read whole from an engine that is up (see IDENTITY_KEEP_S)
            self._identity = ident if whole and h.status == 200 else None
        version, models = ident.version, ident.models
        if h.status != 200:
            self._not_offered.clear()   # a restarting engine may come back offering them
        flags: dict[str, bool | None] = {}
        for path, key in ((IS_PAUSED, "is_paused"), (IS_SLEEPING, "is_sleeping")):
            flags[key] = None
            if self._clock() - self._not_offered.get(path, -math.inf) < NOT_OFFERED_KEEP_S:
                continue  # answered "not offered" lately, and the engine stayed up since
            g = self._get(path)
            if g.status in (404, 405):
                if h.status == 200:   # believed only from an engine that is up
                    self._not_offered[path] = self._clock()
                continue  # not offered by this engine (no VLLM_SERVER_DEV_MODE): say nothing
            self._not_offered.pop(path, None)
            if g.status == 200 and g.body is not None:
                try:
                    flags[key] = parse_flag(g.body, path, key)
                except InputError as exc:
                    problems.append(str(exc))
            else:
                problems.append(f"{path}: {g.error or f'HTTP {g.status}'}")
        return EngineReading(endpoint=self.base_url, read_at=utcnow(), healthy=h.status == 200,
                             health_status=h.status, version=version, models=models,
                             identity_at=ident.at, metrics=metrics, problems=tuple(problems),
                             paused=flags["is_paused"], sleeping=flags["is_sleeping"],
                             hold_state=hold_state(h.status == 200, flags["is_paused"],
                                                   flags["is_sleeping"],
                                                   metrics.sleep_awake if metrics else None))

    def _read_identity(self, start: float | None, problems: list[str]
                       ) -> tuple[_Identity, bool]:
        """Ask ``/version`` and ``/v1/models`` now: the identity read, and whether both
        answered a valid 200 (each failure is appended to ``problems``, naming its endpoint).
        ``start``: the process start time seen in this read's ``/metrics``."""
        before = len(problems)
        at, mono = utcnow(), self._clock()
        version = None
        v = self._get(VERSION)
        if v.status == 200 and v.body is not None:
            try:
                version = parse_version(v.body)
            except InputError as exc:
                problems.append(str(exc))
        else:
            problems.append(f"/version: {v.error or f'HTTP {v.status}'}")
        models: tuple[ModelInfo, ...] | None = None
        m = self._get(MODELS)
        if m.status == 200 and m.body is not None:
            try:
                models = parse_models(load_json(m.body, MODELS))
            except InputError as exc:
                problems.append(str(exc))
            except ValueError as exc:
                problems.append(f"/v1/models: {exc}")
        else:
            problems.append(f"/v1/models: {m.error or f'HTTP {m.status}'}")
        return _Identity(version, models, at, mono, start), len(problems) == before

    def _parse_metrics(self, text: str) -> EngineMetrics:
        """:func:`parse_metrics`, the parse skipped when the families it reads are the same
        text as at the last read (an idle engine's: the parse was ~3 ms of CPU a second at
        1 Hz), the selection's decision when the scrape has the last one's shape
        (:class:`_SelectionMemo`: ~0.7 ms to decide, ~0.25 ms to compare shapes and cut).
        Raises as :func:`parse_metrics`."""
        if len(text) > MAX_METRICS_CHARS:
            return parse_metrics(text)    # raises, naming the limit
        selected = self._selection.select(text)
        if self._parsed is not None and self._parsed[0] == selected:
            return self._parsed[1]
        metrics = parse_selected(*selected)
        self._parsed = (selected, metrics)
        return metrics

    def close(self) -> None:
        """Close the connection pool."""
        self.client.close()


class EngineSource(Source):
    """Polls the seat's engine endpoint (``name = "engine"``) through one
    :class:`EngineReader` (``timeout_s`` per request; ``clock``: monotonic seconds for its
    keeps, injectable for tests)."""

    name = "engine"

    def __init__(self, base_url: str, timeout_s: float = 3.0, *,
                 clock: Any = time.monotonic) -> None:
        self.client = EngineReader(base_url, timeout_s, clock=clock)

    def read(self) -> BaseModel:
        """An :class:`EngineReading` or :class:`Unavailable`; never raises."""
        try:
            return self.client.read()
        except Exception as exc:  # noqa: BLE001 - a source never raises into the UI
            return Unavailable(source=self.name, kind="error",
                               reason=f"{type(exc).__name__}: {exc}")

    def close(self) -> None:
        """Close the HTTP client."""
        self.client.close()


def make_source(loaded: LoadedProfile) -> Source:
    """The engine source for ``seat.endpoint``."""
    return EngineSource(str(loaded.profile.seat.endpoint))


def missing_of(metrics: EngineMetrics | None) -> Iterable[str]:
    """Logical metrics not exposed (all of them when there was no scrape)."""
    return METRIC_ALIASES.keys() if metrics is None else metrics.missing


__all__ = ["EngineMetrics", "EngineReader", "EngineReading", "EngineSource", "HOLD_STATES",
           "HistogramSummary", "METRIC_ALIASES", "MISSING", "ModelInfo", "count_ok",
           "find_family", "fmt_metric", "histogram_quantile", "hold_state", "make_source",
           "missing_of", "normalize", "parse_flag", "parse_metrics", "parse_models", "parse_version",
           "parse_selected", "sleep_awake", "summarize_histogram", "unique_series"]
