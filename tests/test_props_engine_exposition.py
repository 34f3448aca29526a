"""Property tests: the engine's exposition as the probe reads it (issue 31, "Engine
exposition"): ``parse_histograms`` / ``engine_deltas`` / ``check_figure``
(``core/engine_timing.py``), ``parse_counters`` / ``compare`` / ``kv_capacity``
(``probe/engine_counters.py``) and the quantiles of ``sources/engine.py``.

Asserted, each on hostile input the fuzz run found:

* a histogram count that is NaN, ±Inf, ``1e400`` or negative makes that histogram unknown with
  a sentence naming the metric — it never reaches ``math.ceil`` (``OverflowError`` before);
* a histogram without its ``+Inf`` bucket is unknown ("no +Inf bucket"), never the whole
  population: no client-vs-engine finding is made from it, and its p50 / p95 are ``None``;
* a series repeated in a scrape counts once (the first), whatever is repeated;
* a ``process_start_time_seconds`` that is not a finite time is unknown, so two scrapes of it
  never read as a restart;
* ``num_gpu_blocks × block_size`` above 2^53 is unknown with a note (``inf`` → ``int`` raised);
* a label value holding a line separator other than LF (U+2028, ``\\x1c``…) cannot make a
  counter line of its tail: the probe's line filter splits as the exposition parser does.
"""

from __future__ import annotations

import math
import re

from hypothesis import given
from hypothesis import strategies as st
from seat_console.core.engine_timing import (
    ITL,
    TTFT,
    Histogram,
    check_figure,
    engine_deltas,
    parse_histograms,
    parse_phase_timing,
)
from seat_console.probe.engine_counters import (
    MAX_LABEL_COUNT,
    compare,
    kv_capacity,
    parse_counters,
)
from seat_console.sources.engine import parse_metrics

BOUNDS = [0.01, 0.05, 0.1, 0.5]
HOSTILE = ["NaN", "+Inf", "-Inf", "1e400", "-1", "-1e400", "1e308"]
_count = st.one_of(st.integers(0, 1000).map(str), st.sampled_from(HOSTILE))


@st.composite
def histogram_text(draw: st.DrawFn, name: str) -> tuple[str, bool, bool]:
    """A histogram's exposition (1-3 label sets), whether every count is a finite count ≥ 0,
    whether every label set has its +Inf bucket."""
    lines = [f"# TYPE {name} histogram"]
    all_finite = with_inf = True
    for e in range(draw(st.integers(1, 3))):
        inf = draw(st.booleans()) if e == 0 or draw(st.booleans()) else True
        with_inf &= inf
        cum = 0
        for le in [*BOUNDS, math.inf] if inf else BOUNDS:
            if draw(st.integers(0, 9)) == 0:
                v = draw(st.sampled_from(HOSTILE))
                all_finite &= v == "1e308"
            else:
                cum += draw(st.integers(0, 50))
                v = str(cum)
            le_s = "+Inf" if le == math.inf else repr(le)
            lines.append(f'{name}_bucket{{engine="{e}",le="{le_s}"}} {v}')
    return "\n".join(lines) + "\n", all_finite, with_inf


@given(histogram_text(TTFT), histogram_text(ITL), st.floats(0.0, 2.0), st.floats(0.0, 2.0))
def test_hostile_histogram_counts_are_unknown_never_a_crash(a, b, c50, c95) -> None:
    text = a[0] + b[0]
    before = parse_histograms(text)
    for name, (_, finite, inf) in ((TTFT, a), (ITL, b)):
        h = before[name]
        if isinstance(h, str):
            assert h.startswith(name + ": "), h          # names the metric
            if not inf and finite and "different" not in h and "summed" not in h:
                assert "no +Inf bucket" in h or "not cumulative" in h, h
        else:
            assert finite and inf
            assert h.bounds[-1] == math.inf
            assert all(math.isfinite(x) and x >= 0 for x in h.cumulative)
    # the scrape before the phase: the same buckets, every count 0
    zero = parse_histograms(re.sub(r"\} \S+$", "} 0", text, flags=re.M))
    deltas = engine_deltas(zero, before)
    for figure, (_, finite, inf) in (("ttft", a), ("itl", b)):
        d = deltas[figure]
        t = check_figure(figure, d if isinstance(d, Histogram) else None,
                         {0.5: c50, 0.95: c95}, 5, None,
                         problem=d if isinstance(d, str) else None)
        if not inf:                                       # unknown, never "client-side delay"
            assert t.engine is None and not t.checks, t
            assert t.problem is not None and t.problem.startswith("unknown: "), t.problem


def test_no_inf_bucket_is_unknown_not_a_client_side_delay() -> None:
    """The fuzz case: the finite buckets were taken as the whole population, and a client p50
    above the last finite bound read as a client-side delay."""
    def scrape(n: int) -> str:
        return (f"# TYPE {TTFT} histogram\n{TTFT}_bucket{{le=\"0.1\"}} {n}\n"
                f"{TTFT}_bucket{{le=\"0.2\"}} {2 * n}\n")
    d = engine_deltas(parse_histograms(scrape(0)), parse_histograms(scrape(5)))["ttft"]
    assert isinstance(d, str) and d.startswith("unknown: ") and "no +Inf bucket" in d
    t = check_figure("ttft", None, {0.5: 0.5, 0.95: 0.5}, 10, None, problem=d)
    assert t.checks == [] and "no +Inf bucket" in (t.problem or "")


def test_a_summary_histogram_without_inf_or_with_an_infinite_count_is_refused() -> None:
    """``summary.json`` read back (``report --verify``): the same rules, the phase named."""
    for engine in ({"bounds": [0.1, 0.2], "cumulative": [1.0, 2.0]},
                   {"bounds": [0.1, "+Inf"], "cumulative": [1.0, "Infinity"]},
                   {"bounds": [0.1, "+Inf"], "cumulative": [3.0, 2.0]}):
        block = {"ttft": {"figure": "ttft", "metric": TTFT, "engine": engine, "client_n": 1}}
        try:
            parse_phase_timing(block, "summary.json phase p")
        except ValueError as exc:
            assert "summary.json phase p" in str(exc)
        else:
            raise AssertionError(f"accepted {engine}")


# -- counters ---------------------------------------------------------------------------------
REASONS = ["stop", "length", "abort", "error"]
_counter_lines = st.lists(st.one_of(
    st.tuples(st.sampled_from(REASONS), st.sampled_from(["0", "1"]), st.integers(0, 10**6)).map(
        lambda t: f'vllm:request_success_total{{finished_reason="{t[0]}",engine="{t[1]}"}} '
                  f"{t[2]}"),
    st.integers(0, 10**9).map(lambda n: f"vllm:generation_tokens_total {n}"),
    st.integers(0, 10**9).map(lambda n: f"vllm:prompt_tokens_total {n}"),
    st.integers(1, 2 * 10**9).map(lambda n: f"process_start_time_seconds {n}"),
), max_size=12)


@given(_counter_lines, st.data())
def test_a_repeated_series_counts_once_the_first(lines: list[str], data: st.DataObject) -> None:
    """Any scrape with some of its lines repeated later, with any value (duplicates of a
    series): the same counters as the scrape where each series appears once, first value."""
    first: dict[str, str] = {}
    for ln in lines:
        first.setdefault(ln.rsplit(" ", 1)[0], ln)
    once = "\n".join(first.values()) + "\n"
    repeats = data.draw(st.lists(st.sampled_from(lines), max_size=6)) if lines else []
    other = data.draw(st.lists(st.integers(0, 10**6), min_size=len(repeats),
                               max_size=len(repeats)))
    twice = "\n".join(lines + [f"{r.rsplit(' ', 1)[0]} {v}" for r, v in zip(repeats, other,
                                                                           strict=True)]) + "\n"
    a, b = parse_counters(once), parse_counters(twice)
    assert a == b


def test_a_repeated_success_line_is_not_counted_twice() -> None:
    line = 'vllm:request_success_total{finished_reason="stop"} 5\n'
    c = parse_counters(line + line)
    assert c.requests_by_reason == {"stop": 5.0} and c.requests_succeeded == 5.0


@given(st.sampled_from(HOSTILE + ["0", "-5"]), st.sampled_from(HOSTILE + ["0", "1.7e9"]))
def test_an_unknown_start_time_is_never_a_restart(v1: str, v2: str) -> None:
    a = parse_counters(f"process_start_time_seconds {v1}\nvllm:generation_tokens_total 3\n")
    b = parse_counters(f"process_start_time_seconds {v2}\nvllm:generation_tokens_total 3\n")
    for c, v in ((a, v1), (b, v2)):
        assert c.process_start_s is None or (math.isfinite(c.process_start_s)
                                             and c.process_start_s > 0), (v, c)
        # the engine source's incarnation is the same rule (its identity keep, issue 33)
        text = f"process_start_time_seconds {v}\nvllm:generation_tokens_total 3\n"
        assert parse_metrics(text).process_start_s == c.process_start_s, (v, c)
    acc = compare(a, a, client_tokens=0, client_requests=0)
    assert acc.reset is None, acc.reset                   # one scrape is never a restart
    if a.process_start_s is None or b.process_start_s is None:
        assert compare(a, b, client_tokens=0, client_requests=0).reset is None


@given(st.sampled_from(["\u2028", "\x1c", "\x1d", "\x1e", "\x0b", "\x0c", "\x85", "\u2029",
                        "\r"]), st.integers(0, 10**9))
def test_a_label_value_cannot_inject_a_counter_line(sep: str, real: int) -> None:
    """A foreign family's label value holding ``sep`` and a counter line: the counters are
    those of the scrape without that family (str.splitlines made a line of its tail)."""
    base = f"vllm:generation_tokens_total {real}\n"
    foreign = f'foo_info{{note="x{sep}vllm:generation_tokens_total 1e9{sep}"}} 1\n'
    assert parse_counters(foreign + base) == parse_counters(base)
    assert parse_counters(foreign + base).generation_tokens == real


_label = st.one_of(st.integers(-5, 2**60).map(str), st.sampled_from(HOSTILE + ["x", "", "None"]),
                   st.floats(allow_nan=True).map(repr))


@given(st.fixed_dictionaries({}, optional={
    k: _label for k in ("num_gpu_blocks", "block_size", "kv_cache_size_tokens",
                        "kv_cache_max_concurrency", "kv_cache_memory_bytes")}))
def test_kv_capacity_from_any_labels_is_bounded_or_unknown(cfg: dict[str, str]) -> None:
    kv = kv_capacity(cfg, None)
    for v in (kv.tokens, kv.blocks, kv.block_size, kv.memory_bytes):
        assert v is None or 0 <= v <= MAX_LABEL_COUNT
    assert kv.max_concurrency is None or math.isfinite(kv.max_concurrency)


def test_blocks_times_block_size_overflow_is_unknown_with_a_note() -> None:
    kv = kv_capacity({"num_gpu_blocks": str(2**40), "block_size": str(2**40)}, None)
    assert kv.tokens is None and any("num_gpu_blocks × block_size" in n for n in kv.notes)
    assert kv_capacity({"num_gpu_blocks": "1e200", "block_size": "1e200"}, None).tokens is None


# -- the engine source's quantiles --------------------------------------------------------------
@given(st.lists(st.integers(0, 100), min_size=1, max_size=5), st.booleans())
def test_source_quantiles_without_inf_bucket_are_unknown(counts: list[int], inf: bool) -> None:
    lines = [f"# TYPE {TTFT} histogram"]
    cum = 0
    bounds = [*BOUNDS[:len(counts)]]
    for le, c in zip(bounds, counts, strict=False):
        cum += c
        lines.append(f'{TTFT}_bucket{{le="{le!r}"}} {cum}')
    if inf:
        lines.append(f'{TTFT}_bucket{{le="+Inf"}} {cum}')
    lines.append(f"{TTFT}_count {cum}")
    h = parse_metrics("\n".join(lines) + "\n").ttft
    assert h is not None and h.count == cum
    if not inf:
        assert h.p50_s is None and h.p95_s is None and h.buckets == ()
    elif cum:
        assert h.p50_s is not None
