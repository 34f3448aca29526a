"""The probe's stream hot path: one streaming request per keep-alive connection, written and read
in an :class:`asyncio.Protocol` (on :mod:`uvloop` when the run loop is uvloop's) with
:mod:`httptools` (the C HTTP/1.1 parser uvicorn uses) — no httpx, no aiohttp, no stream reader
layer between the socket and the clock.

Each ``data_received`` call takes **one** ``time.perf_counter`` reading; every SSE event that
read completes is stamped with it (the same rule as the httpx path). Bytes → events → timings go
through :class:`~seat_console.probe.client.SSEFeed` (httpx-sse's decoders and the
:class:`~seat_console.probe.client.StreamTimer`), shared with the httpx path, so the two paths
produce the same per-request records; only the transport differs. Health, models, ``/metrics``
and every non-streaming call stay on httpx.

Behaviour kept from the httpx path (``console/probe/client.py``'s failure kinds and reasons):
a non-200 status reads the body (``http``); a 200 without ``text/event-stream`` (``not-sse``);
an error event or a bad chunk (``error-event`` / ``bad-chunk``; the connection is closed, as
httpx closes a response left mid-body); a body cut by the peer (``truncated``), a connection
closed before any response head (``transport``); no bytes for ``read_s`` (``timeout``, "the
stream stalled"), no connection within ``connect_s`` (``timeout``), the whole request past
``total_s`` (``timeout``). A fully read response whose server allows keep-alive returns its
connection to the pool (idle at most 2 s, as :func:`~seat_console.probe.client.make_client`'s
pool, before uvicorn's 5 s keep-alive closes it under us).
"""

from __future__ import annotations

import asyncio
import socket
import ssl
import time
import zlib
from collections.abc import Mapping
from typing import Any

import httptools
import httpx
import orjson
from seat_console.core.base import utcnow
from seat_console.core.probe_record import RequestRecord
from seat_console.probe.client import (
    _SSE_HEADERS,
    API_PATHS,
    MAX_ERROR_TEXT,
    ClientTimeouts,
    RequestSpec,
    SSEFeed,
    StreamFailure,
    _clip,
    failed_record,
    ok_record,
    request_common,
)

KEEPALIVE_EXPIRY_S = 2.0
"""An idle pooled connection older than this is closed, not reused (seconds)."""


class _Exchange:
    """The state of one request/response on a connection (filled by the protocol's callbacks)."""

    __slots__ = ("body", "chunked", "complete", "ctype", "done", "encoding", "failure", "feed",
                 "head", "keep_alive", "last_read", "length", "status", "t0", "unzip")

    def __init__(self, feed: SSEFeed, t0: float, done: asyncio.Future[None]) -> None:
        self.feed = feed
        self.t0 = t0
        self.done = done
        self.status: int | None = None
        self.head = False
        self.ctype = ""
        self.encoding = ""
        self.chunked = False
        self.length = False
        self.body = bytearray()          # a non-200 response's body
        self.failure: tuple[str, str] | None = None
        self.complete = False
        self.keep_alive = False
        self.last_read = t0
        self.unzip: Any = None

    def finish(self, failure: tuple[str, str] | None = None) -> None:
        if failure is not None and self.failure is None:
            self.failure = failure
        if not self.done.done():
            self.done.set_result(None)


class _Conn(asyncio.Protocol):
    """One HTTP/1.1 connection: writes a request, parses the response with httptools, feeds the
    body to the exchange's :class:`SSEFeed` with one timestamp per read."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.parser = httptools.HttpResponseParser(self)
        self.ex: _Exchange | None = None
        self.closed = False
        self.idle_since = 0.0
        self._t = 0.0

    # -- asyncio.Protocol
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's TCPTransport is not an asyncio.Transport subclass, but has its methods
        self.transport = transport  # type: ignore[assignment]
        sock = transport.get_extra_info("socket")
        if sock is not None:
            try:
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            except OSError:  # pragma: no cover - not a TCP socket
                pass

    def data_received(self, data: bytes) -> None:
        t = self._t = time.perf_counter()
        ex = self.ex
        if ex is None:                   # bytes on an idle connection: not ours to keep
            self.close()
            return
        ex.last_read = t
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserUpgrade:  # pragma: no cover - never asked for
            pass
        except httptools.HttpParserError as exc:
            if ex.failure is None:
                ex.finish(("truncated" if ex.head else "transport",
                           f"the server's HTTP response is malformed: {exc}"))
            self.close()

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        ex = self.ex
        if ex is None or ex.done.done():
            return
        if ex.head and not ex.length and not ex.chunked and not ex.complete:
            # a body delimited by the end of the connection ends here
            ex.complete = True
            ex.finish()
            return
        why = f": {exc}" if exc else ""
        if ex.head:
            ex.finish(("truncated", f"the connection closed mid-stream{why}"))
        else:
            ex.finish(("transport", f"Server disconnected without sending a response{why}"))

    # -- httptools callbacks (never raise: a callback error would be wrapped by the parser)
    def on_header(self, name: bytes, value: bytes) -> None:
        ex = self.ex
        assert ex is not None
        n = name.lower()
        if n == b"content-type":
            ex.ctype = value.decode("latin-1")
        elif n == b"content-encoding":
            ex.encoding = value.decode("latin-1").strip().lower()
        elif n == b"transfer-encoding":
            ex.chunked = b"chunked" in value.lower()
        elif n == b"content-length":
            ex.length = True

    def on_headers_complete(self) -> None:
        ex = self.ex
        assert ex is not None
        ex.head = True
        ex.status = self.parser.get_status_code()
        if ex.status != 200:
            return
        ctype = ex.ctype.partition(";")[0]
        if "text/event-stream" not in ctype:
            ex.finish(("not-sse", f"not an event stream: the response's Content-Type is "
                                  f"{ctype!r}, not text/event-stream"))
            self.close()
            return
        if ex.encoding in ("gzip", "deflate"):
            ex.unzip = zlib.decompressobj(zlib.MAX_WBITS | 32)   # gzip or zlib header
        elif ex.encoding not in ("", "identity"):
            ex.finish(("transport", f"the stream is compressed with {ex.encoding!r}, which the "
                                    "probe asked not to get (Accept-Encoding: identity)"))
            self.close()

    def on_body(self, body: bytes) -> None:
        ex = self.ex
        assert ex is not None
        if ex.failure is not None:
            return
        if ex.status != 200:
            if len(ex.body) < 64 * MAX_ERROR_TEXT:
                ex.body += body
            return
        try:
            if ex.unzip is not None:
                body = ex.unzip.decompress(body)
            ex.feed.feed(body, self._t - ex.t0)
        except StreamFailure as exc:
            ex.finish((exc.kind, exc.reason))
            self.close()
        except zlib.error as exc:
            ex.finish(("truncated", f"the compressed stream is corrupt: {exc}"))
            self.close()

    def on_message_complete(self) -> None:
        ex = self.ex
        assert ex is not None
        ex.complete = True
        ex.keep_alive = self.parser.should_keep_alive()
        ex.finish()

    # -- use
    def close(self) -> None:
        self.closed = True
        if self.transport is not None:
            self.transport.close()

    def start(self, request: bytes, ex: _Exchange) -> None:
        self.ex = ex
        self.parser = httptools.HttpResponseParser(self)
        assert self.transport is not None
        self.transport.write(request)


class StreamPool:
    """Keep-alive connections to one endpoint for streaming requests (the hot path).

    ``base_url``: ``http://`` or ``https://`` (verified TLS) host, port and optional path
    prefix; ``max_connections``: at most this many requests in flight (more wait for a slot);
    ``timeouts``: the connect timeout used when opening a connection. Use as an async context
    manager or call :meth:`aclose`. Raises :class:`ValueError` for a URL that is not http(s).
    """

    def __init__(self, base_url: str, timeouts: ClientTimeouts, max_connections: int) -> None:
        url = httpx.URL(base_url.rstrip("/"))
        if url.scheme not in ("http", "https") or not url.host:
            raise ValueError(f"endpoint {base_url!r} is not an http:// or https:// URL; give "
                             "the seat's endpoint as http://HOST:PORT")
        self.host = url.host
        self.port = url.port or (443 if url.scheme == "https" else 80)
        self._ssl: ssl.SSLContext | None = (ssl.create_default_context()
                                            if url.scheme == "https" else None)
        self._prefix = url.raw_path.decode("ascii").rstrip("/")
        self._hostport = (self.host if url.port is None else f"{self.host}:{url.port}")
        self.timeouts = timeouts
        self.max_connections = max_connections
        self._slots: asyncio.Semaphore | None = None
        self._idle: list[_Conn] = []
        self._heads: dict[tuple[str, tuple[tuple[str, str], ...]], bytes] = {}
        self.connects = 0
        """Connections opened so far (keep-alive reuse shows as fewer connects than requests)."""

    async def __aenter__(self) -> StreamPool:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Close every idle connection (in-flight ones close when their request ends)."""
        idle, self._idle = self._idle, []
        for c in idle:
            c.close()

    def head(self, api: str, headers: Mapping[str, str] | None) -> bytes:
        """The request head up to (not including) ``Content-Length`` (built once per API and
        header set)."""
        key = (api, tuple(sorted((headers or {}).items())))
        h = self._heads.get(key)
        if h is None:
            hdrs = {"Host": self._hostport, "User-Agent": "seat-console-probe",
                    **(headers or {}), **_SSE_HEADERS}
            lines = [f"POST {self._prefix}{API_PATHS[api]} HTTP/1.1"]
            lines += [f"{k}: {v}" for k, v in hdrs.items()
                      if k.lower() not in ("content-length", "connection")]
            for ln in lines:
                if "\r" in ln or "\n" in ln:
                    raise ValueError(f"request header line {ln!r} contains CR/LF")
            h = self._heads[key] = ("\r\n".join(lines) + "\r\nContent-Length: ").encode("latin-1")
        return h

    async def acquire(self) -> _Conn:
        """A live connection: the most recently idle one younger than
        :data:`KEEPALIVE_EXPIRY_S`, else a new one. Raises :class:`TimeoutError` past the
        connect timeout and :class:`OSError` when the connect fails."""
        now = time.perf_counter()
        while self._idle:
            c = self._idle.pop()
            if not c.closed and now - c.idle_since < KEEPALIVE_EXPIRY_S and (
                    c.transport is not None and not c.transport.is_closing()):
                return c
            c.close()
        loop = asyncio.get_running_loop()
        async with asyncio.timeout(self.timeouts.connect_s):
            _, proto = await loop.create_connection(
                _Conn, self.host, self.port, ssl=self._ssl,
                server_hostname=self.host if self._ssl else None)
        self.connects += 1
        return proto

    def release(self, c: _Conn) -> None:
        """Put a connection whose response was read to the end back in the pool."""
        c.ex = None
        c.idle_since = time.perf_counter()
        self._idle.append(c)

    def slots(self) -> asyncio.Semaphore:
        """The in-flight limit (made in the running loop)."""
        if self._slots is None:
            self._slots = asyncio.Semaphore(self.max_connections)
        return self._slots


def _watch(loop: asyncio.AbstractEventLoop, conn: _Conn, ex: _Exchange, read_s: float
           ) -> list[asyncio.TimerHandle]:
    """Arm the stall timer: it fires ``read_s`` after the last read and fails the request when
    no byte came since (re-armed from the last read otherwise: one timer per ``read_s`` of
    stream, not one per read). Returns a one-item list holding the current handle (cancel
    ``[0]``)."""
    def check() -> None:
        if ex.done.done():
            return
        quiet = time.perf_counter() - ex.last_read
        if quiet >= read_s * 0.999:
            ex.finish(("timeout", f"the stream stalled: no bytes for {read_s:g} s"))
            conn.close()
        else:
            box[0] = loop.call_later(read_s - quiet, check)
    box = [loop.call_later(read_s, check)]
    return box


async def run_request_hot(pool: StreamPool, spec: RequestSpec, *,
                          timeouts: ClientTimeouts = ClientTimeouts(),
                          phase_t0: float | None = None,
                          headers: Mapping[str, str] | None = None) -> RequestRecord:
    """Send ``spec`` over ``pool`` and time its stream: the hot-path twin of
    :func:`~seat_console.probe.client.run_request` (same arguments, same record, same failure
    kinds; never raises for a failed request; :class:`asyncio.CancelledError` propagates)."""
    sent_at = utcnow()
    t0 = time.perf_counter()
    base = phase_t0 if phase_t0 is not None else t0
    feed = SSEFeed(spec.max_tokens)
    timer = feed.timer
    common = request_common(spec, sent_at, t0 - base)
    ex: _Exchange | None = None

    def failed(kind: str, reason: str) -> RequestRecord:
        return failed_record(common, timer, ex.status if ex is not None else None,
                             time.perf_counter() - t0, kind, reason)

    body = orjson.dumps(spec.payload())
    request = pool.head(spec.api, headers) + str(len(body)).encode() + b"\r\n\r\n" + body
    loop = asyncio.get_running_loop()
    conn: _Conn | None = None
    try:
        async with asyncio.timeout(timeouts.total_s), pool.slots():
            try:
                conn = await pool.acquire()
            except TimeoutError:
                return failed("timeout", f"could not connect within {timeouts.connect_s:g} s")
            except OSError as exc:
                return failed("transport", f"{type(exc).__name__}: {exc}")
            ex = _Exchange(feed, t0, loop.create_future())
            conn.start(request, ex)
            watch = _watch(loop, conn, ex, timeouts.read_s)
            try:
                await ex.done
            finally:
                watch[0].cancel()
        if ex.failure is not None:
            return failed(*ex.failure)
        if ex.status != 200:
            text = bytes(ex.body).decode("utf-8", "replace")
            return failed("http", f"HTTP {ex.status}: {_clip(text.strip(), MAX_ERROR_TEXT)}")
        feed.finish(time.perf_counter() - t0)
        end = time.perf_counter() - t0
        fields = timer.result()
    except StreamFailure as exc:
        return failed(exc.kind, exc.reason)
    except TimeoutError:
        return failed("timeout", f"no complete answer within the request timeout of "
                                 f"{timeouts.total_s:g} s")
    finally:
        if conn is not None:
            if ex is not None and ex.complete and ex.keep_alive and ex.failure is None \
                    and not conn.closed:
                pool.release(conn)
            else:
                conn.close()
    return ok_record(common, timer, ex.status, end, fields)


__all__ = ["KEEPALIVE_EXPIRY_S", "StreamPool", "run_request_hot"]
