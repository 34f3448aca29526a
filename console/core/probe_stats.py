"""Per-phase figures of a probe, computed from its request records (pure). In core so that the
probe (which writes them) and the evidence report (which re-derives them from
``requests.jsonl``) use this one definition.

Definitions follow ``vllm bench serve`` (``vllm/benchmarks/serve.py``, ``calculate_metrics``),
written out in ``docs/probe.md``:

* **duration** — from the first request sent to the last request finished (the phase's wall
  time; ``bench serve``'s ``benchmark_duration``);
* **request throughput** — completed requests / duration (req/s);
* **output throughput** — Σ ``usage.completion_tokens`` of completed requests / duration (tok/s);
* **total token throughput** — (Σ prompt tokens + Σ output tokens) of completed requests /
  duration (tok/s);
* **percentiles** — p50/p95/p99 by linear interpolation between closest ranks (numpy's default
  ``np.percentile``, Hyndman & Fan type 7, what ``bench serve`` uses) over: TTFT and E2E (one
  value per completed request), TPOT (completed requests whose TPOT is defined,
  :func:`tpot_of`), ITL (every value of every completed request, pooled).

**TPOT is undefined** (excluded from its population and counted by reason, never 0) for a
request with one output token (no second token: :data:`TPOT_ONE_TOKEN`) and for one whose
every output token reached the client in the network read of its first
(:data:`TPOT_ONE_READ`: E2E = TTFT, so ``(E2E − TTFT)/(n − 1)`` is 0 s — no decode time the
client could see, not a decode that took no time; the engine sent its tokens in one burst).
``bench serve`` leaves the first out of its TPOT percentiles too but counts the second as 0,
which pulls the p50 to a false 0.00 ms (a lab compare showed TPOT p50 0.00 ms on the resident
for 3 of 4 such requests).

Every figure carries its population (``n``); a phase that is not complete (failed or missing
requests) has ``headline = None`` and says ``"incomplete: 61/64 completed"``.

**Goodput** (``[probe.slo]``, :func:`goodput`): the share of the phase's distinct sent requests
that completed and met every latency target given (TTFT, TPOT, E2E, milliseconds, each ``<=``),
with its Wilson 95 % interval — ``vllm bench serve --goodput``'s test per request
(``vllm/benchmarks/serve.py``, ``calculate_metrics``: a request with one output token has TPOT
0 there, and here, as does one whose output all arrived in one read: the client waited no
time for a token after the first), reported as a share with an interval as guidellm does. A
failed request, or one whose figure for a target is unknown or not finite, did not meet it
(unknown is never met).
"""

from __future__ import annotations

import math
import statistics
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from seat_console.core.probe_record import RequestRecord
from seat_console.core.base import Frozen
from seat_console.core.proportion import wilson_interval

PERCENTILES = (50, 95, 99)
"""The percentiles reported for every latency."""


def percentile(values: Sequence[float], p: float) -> float | None:
    """The ``p``-th percentile (0–100) of ``values`` by linear interpolation (numpy's default,
    type 7); ``None`` for no values. Raises :class:`ValueError` for ``p`` outside 0–100."""
    if not 0 <= p <= 100:
        raise ValueError(f"percentile {p}: give 0 to 100")
    if not values:
        return None
    xs = sorted(values)
    if len(xs) == 1:
        return float(xs[0])
    if p == 100:
        return float(xs[-1])
    if p == 0:
        return float(xs[0])
    # type 7: rank h = (n − 1)·p/100, interpolate between xs[floor(h)] and the next
    h = (len(xs) - 1) * p / 100.0
    lo = int(h)
    return float(xs[lo] + (h - lo) * (xs[min(lo + 1, len(xs) - 1)] - xs[lo]))


class Distribution(Frozen):
    """A latency's population and summary, seconds: ``n`` values; ``mean_s``; ``p50_s`` /
    ``p95_s`` / ``p99_s``; ``max_s``. All ``None`` when ``n == 0``."""

    n: int
    mean_s: float | None = None
    p50_s: float | None = None
    p95_s: float | None = None
    p99_s: float | None = None
    max_s: float | None = None


def distribution(values: Iterable[float]) -> Distribution:
    """Summarize ``values`` (seconds) into a :class:`Distribution`."""
    xs = list(values)
    if not xs:
        return Distribution(n=0)
    return Distribution(n=len(xs), mean_s=statistics.fmean(xs), p50_s=percentile(xs, 50),
                        p95_s=percentile(xs, 95), p99_s=percentile(xs, 99), max_s=max(xs))


SLO_TARGETS = ("ttft_ms", "tpot_ms", "e2e_ms")
"""The latency targets ``[probe.slo]`` may set (milliseconds; a request meets one when its
figure is ``<=`` the target)."""


class Goodput(Frozen):
    """A phase's goodput against ``slo`` (target name of :data:`SLO_TARGETS` → ms; only the
    targets given). ``trials``: distinct requests sent (by index; the population); ``met``:
    those that completed and met every target; ``missed``: per target (and ``"failed"``), how
    many requests did not meet it (a request can miss several); ``share`` = met / trials and
    ``low`` / ``high`` its Wilson 95 % interval (:func:`~seat_console.core.proportion.
    wilson_interval`); all three ``None`` when ``trials`` is 0."""

    slo: dict[str, float]
    trials: int
    met: int
    missed: dict[str, int]
    share: float | None = None
    low: float | None = None
    high: float | None = None


TPOT_ONE_TOKEN = "one output token"
"""Why a completed request has no TPOT: it produced one output token (no second to time)."""
TPOT_ONE_READ = "all output in one network read"
"""Why a completed request has no TPOT: every output token reached the client in the read of
its first (E2E = TTFT), so the client saw no decode time to divide."""
TPOT_UNKNOWN = "TPOT not recorded"
"""Why a completed request has no TPOT: its record holds no TPOT, TTFT or E2E."""


def tpot_of(r: RequestRecord) -> tuple[float | None, str | None]:
    """A completed request's TPOT in seconds and ``None``, or ``None`` and why it is undefined:
    :data:`TPOT_ONE_TOKEN` (≤ 1 output token); :data:`TPOT_ONE_READ` (finite E2E = TTFT, with
    no TPOT recorded or — a record written before the probe left these out — a TPOT of
    exactly 0.0); :data:`TPOT_UNKNOWN` (no TPOT, a time that is not finite, or figures that
    disagree: TPOT ≤ 0 or E2E < TTFT). Never a 0 for an undefined TPOT."""
    if r.output_tokens is not None and r.output_tokens <= 1:
        return None, TPOT_ONE_TOKEN
    t, ttft, e2e = r.tpot_s, r.ttft_s, r.e2e_s
    if ttft is None or e2e is None or not (math.isfinite(ttft) and math.isfinite(e2e)):
        return None, TPOT_UNKNOWN
    if e2e == ttft and (t is None or t == 0.0):
        return None, TPOT_ONE_READ
    if t is None or not math.isfinite(t) or not t > 0.0 or not e2e > ttft:
        return None, TPOT_UNKNOWN
    return t, None


def tpot_excluded(records: Iterable[RequestRecord]) -> dict[str, int]:
    """Of the completed ``records``, how many have no TPOT, by reason (:func:`tpot_of`);
    reasons with none left out."""
    return dict(Counter(why for r in records if r.ok for _, why in [tpot_of(r)] if why))


def tpot_population(n: int, completed: int, excluded: dict[str, int]) -> str:
    """The words for a TPOT figure's population: ``"TPOT over 1 of 4 requests; 3 had all
    output in one network read"`` (``n`` requests with a TPOT of ``completed``; ``excluded``
    as :func:`tpot_excluded` gives, counts ≥ 0)."""
    text = f"TPOT over {n:,} of {completed:,} request{'' if completed == 1 else 's'}"
    why = [f"{k:,} had {reason}" if reason != TPOT_UNKNOWN else f"{k:,}: {reason}"
           for reason, k in sorted(excluded.items()) if k]
    return text + ("; " + ", ".join(why) if why else "")


def read_tpot_excluded(d: Any) -> dict[str, int]:
    """A phase's ``stats.tpot_excluded`` from a run file (outside input: reason → count) → the
    entries whose reason is a string of at most 100 characters and whose count is an integer
    in 0..2^63; anything else left out (``{}`` when absent). Never raises."""
    if not isinstance(d, Mapping):
        return {}
    return {k: v for k, v in d.items() if isinstance(k, str) and len(k) <= 100
            and isinstance(v, int) and not isinstance(v, bool) and 0 <= v < 2**63}


def _figure_s(r: RequestRecord, target: str) -> float | None:
    if target == "ttft_ms":
        return r.ttft_s
    if target == "e2e_ms":
        return r.e2e_s
    if tpot_of(r)[1] in (TPOT_ONE_TOKEN, TPOT_ONE_READ):
        return 0.0  # bench serve: a one-token answer's (or one burst's) TPOT is 0 here
    return r.tpot_s


def slo_misses(r: RequestRecord, slo: dict[str, float]) -> list[str]:
    """The targets of ``slo`` (name → ms) that request ``r`` did not meet: ``["failed"]`` for a
    request that did not complete; a target whose figure is unknown or not finite is missed.
    ``[]`` = met them all. Raises :class:`ValueError` for a target name not in
    :data:`SLO_TARGETS`."""
    if not r.ok:
        return ["failed"]
    out = []
    for name, ms in slo.items():
        if name not in SLO_TARGETS:
            raise ValueError(f"SLO target {name!r}: give one of {', '.join(SLO_TARGETS)}")
        v = _figure_s(r, name)
        if v is None or not math.isfinite(v) or not v * 1000.0 <= ms:
            out.append(name)
    return out


def goodput(records: Sequence[RequestRecord], slo: dict[str, float]) -> Goodput:
    """The goodput of one phase's ``records`` against ``slo`` (name → ms, at least one of
    :data:`SLO_TARGETS`, each finite and > 0). Distinct requests by ``index`` (a repeated index
    counts once: its first record). Raises :class:`ValueError` for an empty ``slo``, an unknown
    target or a target that is not a finite positive number."""
    if not slo:
        raise ValueError("an SLO needs at least one target: " + ", ".join(SLO_TARGETS))
    for name, ms in slo.items():
        if name not in SLO_TARGETS:
            raise ValueError(f"SLO target {name!r}: give one of {', '.join(SLO_TARGETS)}")
        if isinstance(ms, bool) or not isinstance(ms, (int, float)) or not math.isfinite(ms) \
                or ms <= 0:
            raise ValueError(f"SLO target {name} = {ms!r}: give a finite number of ms > 0")
    seen: set[int] = set()
    met = 0
    missed: Counter[str] = Counter()
    for r in records:
        if r.index in seen:
            continue
        seen.add(r.index)
        miss = slo_misses(r, slo)
        missed.update(miss)
        met += not miss
    n = len(seen)
    gp = Goodput(slo={k: float(v) for k, v in slo.items()}, trials=n, met=met,
                 missed=dict(missed))
    if n:
        iv = wilson_interval(met, n)
        gp = gp.model_copy(update={"share": met / n, "low": iv.low, "high": iv.high})
    return gp


def read_goodput(d: Any) -> Goodput | None:
    """A ``stats.goodput`` block read back from a run file (outside input): a
    :class:`Goodput`, or ``None`` when ``d`` is not a whole, consistent block — counts not
    integers ≥ 0, ``met`` > ``trials``, a bound not finite or outside [0, 1], a target not one of
    :data:`SLO_TARGETS` with a finite positive value. Never raises; unknown is never 0."""
    if not isinstance(d, dict):
        return None
    met, trials = d.get("met"), d.get("trials")
    if not all(isinstance(v, int) and not isinstance(v, bool) and v >= 0
               for v in (met, trials)) or met > trials:
        return None
    slo = d.get("slo")
    if not isinstance(slo, dict) or not slo or not all(
            k in SLO_TARGETS and isinstance(v, (int, float)) and not isinstance(v, bool)
            and math.isfinite(v) and v > 0 for k, v in slo.items()):
        return None
    missed = d.get("missed") if isinstance(d.get("missed"), dict) else {}
    missed = {str(k)[:40]: v for k, v in missed.items()
              if isinstance(v, int) and not isinstance(v, bool) and 0 <= v <= trials}
    bounds = []
    for k in ("share", "low", "high"):
        v = d.get(k)
        if v is None and trials == 0:
            bounds.append(None)
        elif isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) \
                and 0.0 <= v <= 1.0:
            bounds.append(float(v))
        else:
            return None
    if trials and not bounds[1] <= bounds[0] <= bounds[2]:  # type: ignore[operator]
        return None
    return Goodput(slo={k: float(v) for k, v in slo.items()}, trials=trials, met=met,
                   missed=missed, share=bounds[0], low=bounds[1], high=bounds[2])


FIRST_IDS = 10
"""How many request indices a count of flagged requests names."""


class ServerCheck(Frozen):
    """The client against the engine, request by request, over a phase's completed requests.

    ``with_metrics``: requests whose final usage chunk carried the engine's own timing
    (``--enable-per-request-metrics``; 0 = the engine gave none); ``client_minus_server``: per
    such request with both figures, the client's TTFT − (the engine's queue time + its TTFT,
    which starts at scheduling) — what the network, the API server and the client add, seconds;
    ``token_mismatches``: requests whose tokens counted from the stream (Σ per chunk) differ from
    the engine's ``usage.completion_tokens`` — counted, never averaged away — and
    ``token_mismatch_first`` the first :data:`FIRST_IDS` of their indices."""

    with_metrics: int = 0
    client_minus_server: Distribution = Distribution(n=0)
    token_mismatches: int = 0
    token_mismatch_first: list[int] = []


def server_check(ok: Sequence[RequestRecord]) -> ServerCheck:
    """:class:`ServerCheck` of a phase's completed records ``ok``."""
    with_m = [r for r in ok if r.server_ttft_s is not None or r.server_queue_s is not None]
    diffs = [r.ttft_s - (r.server_queue_s + r.server_ttft_s) for r in with_m
             if r.ttft_s is not None and r.server_ttft_s is not None
             and r.server_queue_s is not None]
    bad = sorted(r.index for r in ok
                 if r.output_tokens is not None and r.tokens_streamed != r.output_tokens)
    return ServerCheck(with_metrics=len(with_m), client_minus_server=distribution(diffs),
                       token_mismatches=len(bad), token_mismatch_first=bad[:FIRST_IDS])


class Headline(Frozen):
    """The phase's headline figures — only ever built for a complete, undisturbed phase:
    ``output_tok_s``, ``request_s``, ``total_tok_s`` and the p50/p95 of TTFT, TPOT, ITL, E2E
    are in :class:`PhaseStats`; this says which population they stand on."""

    completed: int
    output_tok_s: float
    request_s: float
    total_tok_s: float


class PhaseStats(Frozen):
    """Figures of one phase.

    Counts: ``expected`` (the phase's ``requests``), ``attempted`` (sent), ``completed``,
    ``failed``, ``not_sent`` (expected − attempted, e.g. after Ctrl-C), ``failures`` (kind →
    count). ``duration_s``: first send to last finish, ``None`` when nothing was sent.
    Throughputs over completed requests / duration (``None`` when duration is unknown or 0).
    ``output_tokens`` / ``prompt_tokens``: sums of ``usage`` over completed requests.
    ``complete``: every expected request was sent and completed. ``headline``: set only when
    ``complete`` and the caller did not mark the phase disrupted or unverified; ``state``: one
    phrase (``"complete"``, ``"incomplete: 61/64 completed"``, ``"disrupted: …"``,
    ``"unverified: …"``). ``tpot``: over the completed requests with a TPOT (:func:`tpot_of`);
    ``tpot_excluded``: the completed requests without one, by reason (never counted as 0).
    """

    phase: str
    concurrency: int
    request_rate: float | None = None
    expected: int
    attempted: int
    completed: int
    failed: int
    not_sent: int
    failures: dict[str, int]
    duration_s: float | None
    output_tokens: int
    prompt_tokens: int
    request_s: float | None
    output_tok_s: float | None
    total_tok_s: float | None
    ttft: Distribution
    tpot: Distribution
    itl: Distribution
    e2e: Distribution
    complete: bool
    state: str
    headline: Headline | None = None
    goodput: Goodput | None = None
    server: ServerCheck | None = None
    tpot_excluded: dict[str, int] = {}


def phase_stats(phase: str, records: Sequence[RequestRecord], *, expected: int,
                concurrency: int, request_rate: float | None = None,
                disrupted: str | None = None, unverified: str | None = None,
                slo: dict[str, float] | None = None) -> PhaseStats:
    """Compute :class:`PhaseStats` for the measured records of one phase.

    ``expected``: requests the phase should send; ``disrupted``: a reason the run was disturbed
    (then there is no headline even when every request completed); ``unverified``: a reason the
    phase's population could not be verified (accounting mismatch, a watch check that could not
    be made) — no headline either. ``slo``: the phase's latency targets (``[probe.slo]``, name →
    ms): then ``goodput`` is set (:func:`goodput`; its errors too). Raises :class:`ValueError`
    when ``records`` hold more requests than ``expected`` (an accounting bug, never hidden).
    """
    attempted = len(records)
    if attempted > expected:
        raise ValueError(f"phase {phase}: {attempted} records for {expected} expected requests")
    ok = [r for r in records if r.ok]
    bad = [r for r in records if not r.ok]
    failures = dict(Counter(r.failure_kind or "unknown" for r in bad))
    if records:
        start = min(r.start_s for r in records)
        end = max(r.start_s + (r.stream_end_s or 0.0) for r in records)
        duration: float | None = max(end - start, 0.0)
    else:
        duration = None
    out_toks = sum(r.output_tokens or 0 for r in ok)
    prompt_toks = sum(r.prompt_tokens or 0 for r in ok)

    def rate(x: float) -> float | None:
        return x / duration if duration else None

    complete = attempted == expected and not bad
    if not complete:
        state = f"incomplete: {len(ok)}/{expected} completed"
        if bad:
            state += f", {len(bad)} failed"
        if attempted < expected:
            state += f", {expected - attempted} not sent"
    elif disrupted:
        state = f"disrupted: {disrupted}"
    elif unverified:
        state = f"unverified: {unverified}"
    else:
        state = "complete"
    st = PhaseStats(
        phase=phase, concurrency=concurrency, request_rate=request_rate, expected=expected,
        attempted=attempted, completed=len(ok), failed=len(bad), not_sent=expected - attempted,
        failures=failures, duration_s=duration, output_tokens=out_toks,
        prompt_tokens=prompt_toks, request_s=rate(len(ok)), output_tok_s=rate(out_toks),
        total_tok_s=rate(out_toks + prompt_toks),
        ttft=distribution(r.ttft_s for r in ok if r.ttft_s is not None),
        tpot=distribution(v for r in ok for v, _ in [tpot_of(r)] if v is not None),
        tpot_excluded=tpot_excluded(ok),
        itl=distribution(x for r in ok for x in r.itl_s),
        e2e=distribution(r.e2e_s for r in ok if r.e2e_s is not None),
        complete=complete, state=state,
        goodput=goodput(records, slo) if slo else None, server=server_check(ok))
    if complete and not disrupted and not unverified and st.output_tok_s is not None:
        st = st.model_copy(update={"headline": Headline(
            completed=len(ok), output_tok_s=st.output_tok_s, request_s=st.request_s or 0.0,
            total_tok_s=st.total_tok_s or 0.0)})
    return st


__all__ = [
    "PERCENTILES",
    "SLO_TARGETS",
    "Distribution",
    "Goodput",
    "Headline",
    "TPOT_ONE_READ",
    "TPOT_ONE_TOKEN",
    "TPOT_UNKNOWN",
    "ServerCheck",
    "server_check",
    "tpot_excluded",
    "tpot_of",
    "tpot_population",
    "PhaseStats",
    "distribution",
    "goodput",
    "percentile",
    "phase_stats",
    "read_goodput",
    "read_tpot_excluded",
    "slo_misses",
]
