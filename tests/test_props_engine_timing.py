"""Property tests of the engine histogram parser and the bucket comparison."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sse_server import histogram_series
from seat_console.core.engine_timing import (
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
        out += histogram_series(name, BOUNDS, counts, f'engine="{e}"', 0.0)
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


# -- the recorded block, read back from a run's summary.json (outside input) -----------------
from seat_console.core.engine_timing import (  # noqa: E402
    check_figure,
    describe,
    engine_deltas,
    findings,
    parse_phase_timing,
)

_json = st.recursive(
    st.none() | st.booleans() | st.integers(-5, 5) | st.floats(allow_nan=True)
    | st.text(max_size=5) | st.sampled_from(["+Inf", "NaN", "-Inf"]),
    lambda kids: st.lists(kids, max_size=4) | st.dictionaries(
        st.sampled_from(["figure", "metric", "engine", "engine_n", "client_n", "checks",
                         "problem", "bounds", "cumulative", "q", "client_s",
                         "engine_bucket_s", "finding", "ttft", "itl", "x"]), kids, max_size=5),
    max_leaves=20)


@settings(max_examples=300, deadline=None)
@given(_json)
def test_parse_phase_timing_only_raises_value_error_naming_the_input(obj) -> None:
    try:
        out = parse_phase_timing(obj, "summary.json phase p")
    except ValueError as exc:
        assert "summary.json phase p" in str(exc)
        return
    for t in out.values():          # what it accepts can be described and checked again
        describe(t)
        check_figure(t.figure, t.engine, {0.5: 0.01, 0.95: 0.02}, t.client_n, 0.1)


def _good_block() -> dict:
    before = parse_histograms(exposition(TTFT, [[0] * 8]) + exposition(ITL, [[0] * 8]))
    after = parse_histograms(exposition(TTFT, [[0, 0, 3, 1, 0, 0, 0, 0]])
                             + exposition(ITL, [[0, 5, 5, 0, 0, 0, 0, 0]]))
    d = engine_deltas(before, after)
    client = {"ttft": {0.5: 0.007, 0.95: 0.3}, "itl": {0.5: 0.003, 0.95: 0.3}}
    return {f: check_figure(f, d[f], client[f], 4, 0.05).model_dump(mode="json")
            for f in ("ttft", "itl")}


def test_a_recorded_block_round_trips_through_strict_json() -> None:
    import json

    block = _good_block()
    text = json.dumps(block, allow_nan=False)           # strict JSON: +Inf as "+Inf"
    back = parse_phase_timing(json.loads(text), "w")
    assert back["ttft"].engine.bounds[-1] == math.inf
    # TTFT p50 0.007 s in (0.005, 0.01]; p95 0.3 s above (0.01, 0.05]: the idle client's
    # CPU share (5 %) makes it "network"
    assert [c.finding for c in back["ttft"].checks] == [None, "network"]
    sooner = check_figure("ttft", back["ttft"].engine, {0.5: 0.004}, 4, 0.05)
    assert sooner.checks[0].finding == "client sooner than engine"
    assert findings(back) == ["TTFT p95: client 300.0 ms, above the engine's bucket (10.0, "
                              "50.0] ms: network", "ITL p95: client 300.0 ms, above the "
                              "engine's bucket (5.0, 10.0] ms: network"]
    busy = check_figure("ttft", back["ttft"].engine, {0.5: 0.007, 0.95: 0.3}, 4, 0.95)
    assert busy.checks[1].finding == "client-side delay"


@pytest.mark.parametrize("edit", [
    lambda b: b["ttft"]["engine"]["bounds"].reverse(),
    lambda b: b["ttft"]["engine"]["cumulative"].pop(),
    lambda b: b["ttft"]["engine"].update(cumulative=[-1.0] * 9),
    lambda b: b["ttft"]["checks"][0].update(engine_bucket_s=[0.5, 0.1]),
    lambda b: b.update(tpot=b["ttft"]),
    lambda b: b["itl"].update(client_n="many"),
])
def test_an_edited_block_is_refused_naming_the_phase(edit) -> None:
    block = _good_block()
    edit(block)
    with pytest.raises(ValueError, match="summary.json phase c8"):
        parse_phase_timing(block, "summary.json phase c8")
