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
    with FakeVllm() as srv:
        yield srv


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


class _Huge(threading.Thread):
    """An HTTP server whose ``POST /v1/completions`` answers 8 MiB of JSON-ish bytes."""

    def __init__(self) -> None:
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

        class H(BaseHTTPRequestHandler):
            def log_message(self, *a) -> None:
                pass

            def do_POST(self) -> None:  # http.server's name for the POST handler
                self.rfile.read(int(self.headers.get("Content-Length", 0)))
                body = b'{"choices": [' + b" " * (8 << 20) + b"]}"
                try:
                    self.send_response(200)
                    self.send_header("Content-Length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body)
                except OSError:
                    self.sent_all = False

        super().__init__(daemon=True)
        self.srv = ThreadingHTTPServer(("127.0.0.1", 0), H)
        self.srv.daemon_threads = True

    def run(self) -> None:
        self.srv.serve_forever()


def test_fidelity_completion_body_capped_while_streaming(monkeypatch) -> None:
    from seat_console.evidence import fidelity as F
    from seat_console.node.engine_client import EngineClient

    srv = _Huge()
    srv.start()
    monkeypatch.setattr(F, "MAX_BODY_BYTES", 4096)
    url = f"http://127.0.0.1:{srv.srv.server_address[1]}"
    try:
        with EngineClient(url, timeout_s=10.0) as client:
            case = F.FidelityCase(case_id="c1", prompt="p", max_tokens=4)
            with pytest.raises(F.FidelityError, match=r"over the 4,096 B limit"):
                F.fetch_trace(client, "m", case)
    finally:
        srv.srv.shutdown()
        srv.srv.server_close()


def test_a_cut_answer_stops_at_the_limit() -> None:
    """The engine client's ``cut=True`` (what fidelity reads with): the body cut at the limit
    while it streams in, and said so; an answer under the limit read whole."""
    import httpx

    from seat_console.node.engine_client import EngineClient

    from tests.engine_double import EngineDouble

    def big(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, stream=httpx.ByteStream(b"x" * 10_000))

    with EngineDouble(big) as url, EngineClient(url) as c:
        a = c.post("/v1/completions", json={}, max_bytes=100, cut=True)
    assert a.body == b"x" * 100 and a.was_cut

    def small(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, stream=httpx.ByteStream(b"abc"))

    with EngineDouble(small) as url, EngineClient(url) as c:
        a = c.post("/v1/completions", json={}, max_bytes=100, cut=True)
    assert a.body == b"abc" and not a.was_cut
