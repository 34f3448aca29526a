"""The one engine client (:mod:`seat_console.node.engine_client`, issue 33): its timeout and
error rule. An answer of any status comes back as an :class:`Answer`; no answer is one
:class:`EngineError` naming the method and the full URL, with ``kind`` ``timeout`` /
``unreachable`` / ``too-large``; the body is capped while it streams in. Against
``httpx.MockTransport`` and a real socket that refuses or never answers (no sleeps: the server
side holds the request until the client's timeout fires)."""

from __future__ import annotations

import asyncio
import socket
import threading

import httpx
import pytest

from seat_console.node import engine_client as EC
from seat_console.node.engine_client import Answer, EngineClient, EngineError


def _client(handler, **kw) -> EngineClient:
    return EngineClient("http://engine:8000/", transport=httpx.MockTransport(handler), **kw)


def test_any_status_is_an_answer_with_the_url() -> None:
    seen = []

    def h(req: httpx.Request) -> httpx.Response:
        seen.append((req.method, str(req.url)))
        return httpx.Response(503 if req.url.path == "/health" else 404, content=b"no")

    with _client(h) as c:
        assert c.health() == 503
        a = c.flag(EC.IS_PAUSED)
    assert isinstance(a, Answer) and a.status == 404 and not a.ok and a.text == "no"
    assert a.url == "http://engine:8000/is_paused"
    assert seen == [("GET", "http://engine:8000/health"), ("GET", "http://engine:8000/is_paused")]


def test_pause_and_completion_send_what_the_engine_expects() -> None:
    seen = []

    def h(req: httpx.Request) -> httpx.Response:
        seen.append((req.method, req.url.path, dict(req.url.params), req.content))
        return httpx.Response(200, json={})

    with _client(h) as c:
        c.pause(5.0)
        c.resume()
        c.completion({"model": "m"}, chat=True)
    assert seen == [("POST", "/pause", {"mode": "wait"}, b""), ("POST", "/resume", {}, b""),
                    ("POST", "/v1/chat/completions", {}, b'{"model":"m"}')]


def test_unreachable_names_the_url() -> None:
    with socket.socket() as s:          # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with EngineClient(f"http://127.0.0.1:{port}", timeout_s=2.0) as c:
        with pytest.raises(EngineError) as e:
            c.health()
    assert e.value.kind == "unreachable"
    assert str(e.value).startswith(f"GET http://127.0.0.1:{port}/health: ConnectError")


def test_no_answer_in_time_is_a_timeout_naming_the_url() -> None:
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen()
    port = srv.getsockname()[1]
    done = threading.Event()

    def hold() -> None:      # accept, read, never answer until the client gave up
        conn, _ = srv.accept()
        conn.recv(4096)
        done.wait(30)
        conn.close()

    t = threading.Thread(target=hold, daemon=True)
    t.start()
    try:
        with EngineClient(f"http://127.0.0.1:{port}", timeout_s=0.2) as c:
            with pytest.raises(EngineError) as e:
                c.metrics()
    finally:
        done.set()
        t.join(5)
        srv.close()
    assert e.value.kind == "timeout"
    assert str(e.value) == (f"GET http://127.0.0.1:{port}/metrics: no answer in time "
                            "(ReadTimeout)")


def test_too_large_is_refused_while_streaming(monkeypatch) -> None:
    def h(req: httpx.Request) -> httpx.Response:
        return httpx.Response(200, stream=httpx.ByteStream(b"x" * 1000))

    with _client(h) as c:
        with pytest.raises(EngineError, match=r"^GET http://engine:8000/metrics: the answer is "
                                              r"above the 999-byte limit"):
            c.metrics(max_bytes=999)
        assert c.metrics(max_bytes=1000).body == b"x" * 1000
        monkeypatch.setattr(EC, "MAX_BODY_BYTES", 10)   # the default is read at each call
        with pytest.raises(EngineError) as e:
            c.version()
    assert e.value.kind == "too-large"


def test_the_timeout_rule() -> None:
    t = EC._timeout(3.0)
    assert (t.read, t.write, t.pool, t.connect) == (3.0, 3.0, 3.0, EC.CONNECT_S)
    assert EC._timeout(0.5).connect == 0.5
    assert EC._timeout(0.1, connect_s=5.0).connect == 5.0   # the pause: connect, then wait


def test_flag_refuses_a_path_that_is_no_hold_state_endpoint() -> None:
    with _client(lambda r: httpx.Response(200)) as c, pytest.raises(ValueError, match="/health"):
        c.flag("/health")


def test_async_side_calls_follow_the_same_rule() -> None:
    def h(req: httpx.Request) -> httpx.Response:
        if req.url.path == "/metrics":
            return httpx.Response(200, content=b"x 1\n")
        raise httpx.ConnectError("refused", request=req)

    async def go() -> tuple[Answer, EngineError]:
        async with httpx.AsyncClient(base_url="http://engine:8000",
                                     transport=httpx.MockTransport(h)) as c:
            a = await EC.get_async(c, EC.METRICS)
            try:
                await EC.post_async(c, EC.RESET_PREFIX_CACHE)
            except EngineError as exc:
                return a, exc
        raise AssertionError("no error")

    a, err = asyncio.run(go())
    assert a.ok and a.body == b"x 1\n"
    assert str(err) == "POST http://engine:8000/reset_prefix_cache: ConnectError: refused"
