"""The engine source caps each endpoint's answer while it streams in (not after the whole
download): an answer above ``MAX_BODY_BYTES`` counts as that endpoint failing, naming the
limit, and the other endpoints are still read. Against a local HTTP server serving vLLM
0.32.0's recorded answers."""

from __future__ import annotations

import sys
import threading
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from test_partial_reads import METRICS, FakeVllm

from seat_console.sources import engine as E


@pytest.fixture
def vllm():
    srv = FakeVllm()
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    yield srv
    srv.shutdown()
    srv.server_close()


def test_oversize_metrics_answer_is_cut_while_streaming(vllm, monkeypatch) -> None:
    monkeypatch.setattr(E, "MAX_BODY_BYTES", len(METRICS) - 1)
    src = E.EngineSource(vllm.url, timeout_s=2.0)
    try:
        r = src.read()
    finally:
        src.close()
    assert isinstance(r, E.EngineReading), r
    assert r.metrics is None and r.models and r.version == "0.32.0"
    assert any(p.startswith("/metrics: GET /metrics: the answer is above the "
                            f"{len(METRICS) - 1:,}-byte limit") for p in r.problems), r.problems


def test_answer_at_the_limit_is_read_whole(vllm, monkeypatch) -> None:
    monkeypatch.setattr(E, "MAX_BODY_BYTES", len(METRICS))
    src = E.EngineSource(vllm.url, timeout_s=2.0)
    try:
        r = src.read()
    finally:
        src.close()
    assert r.metrics is not None and r.problems == ()
