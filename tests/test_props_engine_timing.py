"""Property tests of the engine histogram parser and the bucket comparison."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from seat_console.probe.engine_timing import (
    ITL,
    TTFT,
    Histogram,
    delta,
    parse_histograms,
    quantile_bucket,
    verdict,
)

BOUNDS = [0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1.0]


def exposition(name: str, series: list[list[int]]) -> str:
    """Histogram text: one label set per entry of per-bucket (non-cumulative) counts."""
    out = [f"# TYPE {name} histogram"]
    for e, counts in enumerate(series):
        cum = 0
        for le, c in zip([*BOUNDS, math.inf], counts, strict=True):
            cum += c
            le_s = "+Inf" if le == math.inf else repr(le)
            out.append(f'{name}_bucket{{engine="{e}",le="{le_s}"}} {float(cum)}')
        out.append(f'{name}_count{{engine="{e}"}} {float(cum)}')
        out.append(f'{name}_sum{{engine="{e}"}} 0.0')
    return "\n".join(out) + "\n"


_counts = st.lists(st.integers(0, 50), min_size=len(BOUNDS) + 1, max_size=len(BOUNDS) + 1)


@settings(max_examples=150, deadline=None)
@given(st.lists(_counts, min_size=1, max_size=3))
def test_parse_sums_label_sets_bucketwise(series: list[list[int]]) -> None:
    h = parse_histograms(exposition(TTFT, series))[TTFT]
    assert h.bounds == [*BOUNDS, math.inf]
    assert h.cumulative[-1] == sum(sum(c) for c in series)
    assert all(a <= b for a, b in zip(h.cumulative, h.cumulative[1:], strict=False))
    assert ITL not in parse_histograms(exposition(TTFT, series))


@settings(max_examples=150, deadline=None)
@given(_counts, _counts, st.floats(0.01, 1.0))
def test_delta_and_quantile_bucket(a: list[int], b: list[int], q: float) -> None:
    before = parse_histograms(exposition(ITL, [a]))[ITL]
    after = parse_histograms(exposition(ITL, [[x + y for x, y in zip(a, b, strict=True)]]))[ITL]
    d = delta(before, after)
    assert d.cumulative[-1] == sum(b)
    bucket = quantile_bucket(d, q)
    if sum(b) == 0:
        assert bucket is None
        return
    assert bucket is not None
    lo, hi = bucket
    i = [*BOUNDS, math.inf].index(hi)
    rank = max(math.ceil(q * sum(b) - 1e-9), 1)
    assert d.cumulative[i] >= rank and (i == 0 or d.cumulative[i - 1] < rank)
    assert verdict(hi + 1e-6, bucket) == ("client-side delay" if hi < math.inf else None)
    assert verdict((lo + min(hi, lo + 1)) / 2, bucket) is None


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=200))
def test_parse_only_raises_value_error(text: str) -> None:
    try:
        parse_histograms(text)
    except ValueError:
        pass


def test_count_going_down_is_refused() -> None:
    h1 = Histogram(bounds=[1.0, math.inf], cumulative=[5.0, 6.0])
    h0 = Histogram(bounds=[1.0, math.inf], cumulative=[1.0, 2.0])
    with pytest.raises(ValueError, match="went down"):
        delta(h1, h0)
