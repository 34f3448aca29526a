"""The one engine client (:mod:`seat_console.node.engine_client`, issue 33): its timeout and
error rule. An answer of any status comes back as an :class:`Answer`; no answer is one
:class:`EngineError` naming the method and the full URL, with ``kind`` ``timeout`` /
``unreachable`` / ``too-large``; the body is capped while it streams in. Against
a real local HTTP server (``tests/engine_double.py``) and a real socket that refuses or never
answers (no sleeps: the server side holds the request until the client's timeout fires)."""

from __future__ import annotations

import asyncio
import socket
import threading

import httpx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from seat_console.node import engine_client as EC
from seat_console.node.engine_client import Answer, EngineClient, EngineError
from tests.engine_double import EngineDouble


@pytest.fixture
def serve():
    """``serve(handler) -> EngineClient`` on a real local server (closed after the test)."""
    opened: list = []

    def make(handler, **kw) -> EngineClient:
        d = EngineDouble(handler)
        url = d.start()
        c = EngineClient(url + "/", **kw)
        opened.append((d, c))
        return c

    yield make
    for d, c in opened:
        c.close()
        d.stop()


def test_any_status_is_an_answer_with_the_url(serve) -> None:
    seen = []

    def h(req: httpx.Request) -> httpx.Response:
        seen.append((req.method, req.url.path))
        return httpx.Response(503 if req.url.path == "/health" else 404, content=b"no")

    with serve(h) as c:
        assert c.health() == 503
        a = c.flag(EC.IS_PAUSED)
    assert isinstance(a, Answer) and a.status == 404 and not a.ok and a.text == "no"
    assert a.url == c.base_url + "/is_paused" and not c.base_url.endswith("/")
    assert seen == [("GET", "/health"), ("GET", "/is_paused")]


def test_a_path_in_the_endpoint_prefixes_every_call(serve) -> None:
    seen = []

    def h(req: httpx.Request) -> httpx.Response:
        seen.append(req.url.path)
        return httpx.Response(200)

    with EngineDouble(h) as url, EngineClient(url + "/vllm/") as c:
        assert c.health() == 200
        assert c.url(EC.HEALTH) == url + "/vllm/health"
    assert seen == ["/vllm/health"]


@pytest.mark.parametrize("bad", ["", "127.0.0.1:8000", "ftp://h/", "http://", "http://[::1"])
def test_an_endpoint_that_is_no_http_url_is_refused_naming_it(bad) -> None:
    with pytest.raises(ValueError, match="is not an http"):
        EngineClient(bad)


def test_a_kept_alive_connection_is_used_again(serve) -> None:
    def h(req: httpx.Request) -> httpx.Response:
        return httpx.Response(200, content=b"ok")

    c = serve(h)
    for _ in range(5):
        assert c.health() == 200
    pool = c._pool
    assert pool.num_connections == 1 and pool.num_requests == 5


def test_a_connection_closed_without_an_answer_is_unreachable(serve) -> None:
    def h(req: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("closed", request=req)

    with serve(h) as c, pytest.raises(EngineError) as e:
        c.health()
    assert e.value.kind == "unreachable" and e.value.url.endswith("/health")


def test_a_too_large_answer_does_not_spoil_the_next_call(serve) -> None:
    def h(req: httpx.Request) -> httpx.Response:
        return httpx.Response(200, content=b"y" * (200_000 if req.url.path == "/metrics" else 2))

    c = serve(h)
    with pytest.raises(EngineError):
        c.metrics(max_bytes=1000)
    assert c.health() == 200 and c.get("/x").body == b"yy"


class _RawServer:
    """A socket that answers each connection with the bytes given, then closes it."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(8)
        self.port = self.sock.getsockname()[1]
        self.reply = b""
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            with conn:
                try:
                    conn.settimeout(2.0)
                    conn.recv(65536)
                    conn.sendall(self.reply)
                except OSError:
                    pass


_RAW = _RawServer()
_STATUS = st.sampled_from([b"HTTP/1.1 200 OK", b"HTTP/1.1 404 Not Found", b"HTTP/1.0 503 x",
                           b"HTTP/1.1 999 odd", b"HTTP/1.1 20 short", b"HTTP/2 200", b"ICY 200",
                           b"HTTP/1.1 200"])
_HEADER = st.sampled_from([b"Content-Length: 3", b"Content-Length: 0", b"Content-Length: -1",
                           b"Content-Length: 99999999999999999999", b"Content-Length: x",
                           b"Transfer-Encoding: chunked", b"Connection: close",
                           b"Content-Encoding: gzip", b"X: \xff\xfe", b"no colon"])


@settings(deadline=None, max_examples=60)
@given(st.one_of(
    st.binary(max_size=300),
    st.tuples(_STATUS, st.lists(_HEADER, max_size=4), st.binary(max_size=200)).map(
        lambda t: t[0] + b"\r\n" + b"".join(h + b"\r\n" for h in t[1]) + b"\r\n" + t[2])))
def test_any_bytes_from_the_socket_are_an_answer_or_a_named_error(reply) -> None:
    """Whatever the engine's socket sends (then closes): an :class:`Answer` within the body
    limit, or :class:`EngineError` naming the URL — never another exception, never a hang
    (the server closes, and the client's timeout bounds a read)."""
    _RAW.reply = reply
    with EngineClient(f"http://127.0.0.1:{_RAW.port}", timeout_s=2.0) as c:
        try:
            a = c.get(EC.METRICS, max_bytes=1000)
        except EngineError as exc:
            assert str(exc).startswith(f"GET http://127.0.0.1:{_RAW.port}/metrics: ")
            assert exc.kind in ("timeout", "unreachable", "too-large")
            return
    assert isinstance(a.status, int) and len(a.body) <= 1000


def test_pause_and_completion_send_what_the_engine_expects(serve) -> None:
    seen = []

    def h(req: httpx.Request) -> httpx.Response:
        seen.append((req.method, req.url.path, dict(req.url.params), req.content))
        return httpx.Response(200, json={})

    with serve(h) as c:
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
    assert str(e.value).startswith(f"GET http://127.0.0.1:{port}/health: cannot connect: ")
    assert "refused" in str(e.value) and "object at" not in str(e.value)


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
                            "(ReadTimeoutError)")


def test_too_large_is_refused_while_streaming(monkeypatch, serve) -> None:
    def h(req: httpx.Request) -> httpx.Response:
        return httpx.Response(200, stream=httpx.ByteStream(b"x" * 1000))

    with serve(h) as c:
        with pytest.raises(EngineError, match=r"^GET http://127.0.0.1:\d+/metrics: the answer "
                                              r"is above the 999-byte limit"):
            c.metrics(max_bytes=999)
        assert c.metrics(max_bytes=1000).body == b"x" * 1000
        monkeypatch.setattr(EC, "MAX_BODY_BYTES", 10)   # the default is read at each call
        with pytest.raises(EngineError) as e:
            c.version()
    assert e.value.kind == "too-large"


def test_the_timeout_rule() -> None:
    t = EC._timeout(3.0)
    assert (t.read_timeout, t.connect_timeout) == (3.0, EC.CONNECT_S)
    assert EC._timeout(0.5).connect_timeout == 0.5
    assert EC._timeout(0.1, connect_s=5.0).connect_timeout == 5.0   # the pause: connect, wait


def test_flag_refuses_a_path_that_is_no_hold_state_endpoint(serve) -> None:
    with serve(lambda r: httpx.Response(200)) as c, pytest.raises(ValueError, match="/health"):
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
