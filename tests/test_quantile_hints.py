"""Issue 11 (fresh-eyes defects): a histogram quantile says which bucket it was interpolated
inside (so a p50 above the mean reads as the estimate it is), and a probe's ITL p50 of 0 says
why (tokens that arrived in one network read, docs/probe.md)."""

from __future__ import annotations

import math

from seat_console.commands.probe_cmd import _dist
from seat_console.commands.status_cmd import _hist
from seat_console.sources.engine import HistogramSummary, histogram_quantile, quantile_bucket

# vLLM-like ITL buckets (s): 11 observations, 8 of them at or below 5 ms... mean 2.3 ms
BUCKETS = ((0.005, 8.0), (0.01, 11.0), (0.025, 11.0), (math.inf, 11.0))


def test_quantile_bucket_is_the_one_histogram_quantile_interpolates_inside() -> None:
    assert quantile_bucket(0.5, BUCKETS) == (0.0, 0.005)
    assert quantile_bucket(0.95, BUCKETS) == (0.005, 0.01)
    lo, hi = quantile_bucket(0.5, BUCKETS)
    assert lo <= histogram_quantile(0.5, BUCKETS) <= hi
    assert quantile_bucket(0.5, ((0.1, 0.0), (math.inf, 4.0))) == (0.1, math.inf)
    assert quantile_bucket(0.5, ()) is None and quantile_bucket(0.5, ((math.inf, 0.0),)) is None


def test_status_line_names_the_bucket_of_an_interpolated_p50_above_the_mean() -> None:
    h = HistogramSummary(count=11, sum_s=0.0253, mean_s=0.0023,
                         p50_s=histogram_quantile(0.5, BUCKETS),
                         p95_s=histogram_quantile(0.95, BUCKETS), buckets=BUCKETS)
    text = _hist(h)
    assert "mean 2.3 ms, p50 ~3.4 ms (in bucket 0–5 ms), p95 ~" in text, text
    assert "(in bucket 5–10 ms) (n=11)" in text, text


def test_probe_itl_p50_of_zero_says_why() -> None:
    d = {"n": 918, "p50_s": 0.0, "p95_s": 0.012, "p99_s": 0.0279}
    assert "ITL 0 = tokens that arrived in one network read" in _dist("ITL", d)
    assert "network read" not in _dist("ITL", {**d, "p50_s": 0.0028})
    assert "network read" not in _dist("TTFT", d)


def test_live_probe_panel_itl_p50_of_zero_says_why() -> None:
    from seat_console.probe.live import LiveView
    from seat_console.widgets.probe import render_live

    v = LiveView(run_id="r1", status="running", phases=(), tok_s=10.0, itl_p50_s=0.0,
                 itl_p95_s=0.012, itl_n=918, words="running")
    assert "(0 = tokens arrived in one network read)" in render_live(v).plain
    assert "network read" not in render_live(v.model_copy(update={"itl_p50_s": 0.003})).plain
