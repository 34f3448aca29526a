#!/usr/bin/env python3
"""A stand-in for vLLM's streaming ``/v1/completions`` server, for measuring *client* CPU and
client timing error alone; it records the gaps it actually sent.

``python benchmarks/stream_server.py PORT [GAP_S] [--cpu N]`` serves on 127.0.0.1:PORT:

* ``POST /v1/completions`` — HTTP/1.1 keep-alive, chunked transfer encoding as uvicorn (vLLM's
  server) sends it, one event per HTTP chunk, ``max_tokens`` chunks shaped as vLLM 0.32's (with
  ``continuous_usage_stats`` usage, ~321 B each), the first ``GAP_S`` seconds (default 0.002)
  after the request and each next one ``GAP_S`` after the previous one's *due* time (a fixed
  schedule: a late send does not shift the ones after it), then the ``choices: []`` usage chunk
  and ``data: [DONE]`` with the last token's chunk;
* ``GET /summary`` — JSON: every stream since the last reset, keyed by its **tag** (the
  ``req-…`` word the prompt starts with, else ``#<n>`` in arrival order), each with ``sent``,
  the ``time.monotonic()`` second at which each token's chunk was handed to the socket (one per
  token, in order); ``arrived``, the ``time.monotonic()`` second at which each stream's request
  had been read whole (its first token is due one gap later); ``conn``, the number of the
  connection each stream came on (connections numbered from 1 in accept order, over the
  server's life), so a client's turnaround — its next request on a connection after the last
  token of the one before — can be read off; plus the server's CPU seconds
  (``time.process_time``) and wall seconds since the reset, tokens sent, and the lag of each
  send behind its due time (p50 / p99 / max, s);
* ``POST /reset`` — forget the record and restart the CPU clock.

Every other path gets 404. All streams share **one timer**: each tick sends the chunk of every
stream that is due (a heap of due times), so the server's cost per token is one ``write`` and
no per-stream sleep — enough for 50k tokens/s on one core. ``--cpu N`` pins the process to core
N (``os.sched_setaffinity``). It runs on uvloop, whose timers have 1 ms resolution: a send is
up to ~1 ms after its due time even on an idle core, which is why the record holds the send
times, not the schedule. Not a test and not a fake used by tests (those use
``tests/sse_server.py``).
"""

from __future__ import annotations

import argparse
import asyncio
import heapq
import json
import os
import re
import time
from typing import Any

import httptools

_TAG = re.compile(r"^(req-[A-Za-z0-9_.-]+)")
_HEAD_200 = (b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream; charset=utf-8\r\n"
             b"transfer-encoding: chunked\r\n\r\n")


def event(i: int, n: int) -> bytes:
    """The ``i``-th of ``n`` completion events, bytes with the blank line."""
    obj = {"id": "cmpl-0123456789abcdef", "object": "text_completion", "created": 1796116449,
           "model": "seat-resident",
           "choices": [{"index": 0, "text": " tok", "logprobs": None,
                        "finish_reason": None if i < n else "length", "stop_reason": None,
                        "prompt_token_ids": None, "token_ids": None}],
           "usage": {"prompt_tokens": 60, "total_tokens": 60 + i, "completion_tokens": i}}
    return ("data: " + json.dumps(obj, separators=(",", ":")) + "\n\n").encode()


def chunk(b: bytes) -> bytes:
    """``b`` as one HTTP/1.1 chunk."""
    return b"%x\r\n%s\r\n" % (len(b), b)


def tail(n: int) -> bytes:
    """What follows the ``n``-th token's chunk: the usage chunk, ``[DONE]``, the last chunk."""
    usage = {"id": "cmpl-0123456789abcdef", "object": "text_completion",
             "created": 1796116449, "model": "seat-resident", "choices": [],
             "usage": {"prompt_tokens": 60, "total_tokens": 60 + n, "completion_tokens": n}}
    return (chunk(("data: " + json.dumps(usage) + "\n\n").encode())
            + chunk(b"data: [DONE]\n\n") + b"0\r\n\r\n")


class _Chunks:
    """Token ``i`` of ``n`` as wire bytes, built once per (i, n)."""

    def __init__(self) -> None:
        self._c: dict[tuple[int, int], bytes] = {}

    def get(self, i: int, n: int) -> bytes:
        b = self._c.get((i, n))
        if b is None:
            b = chunk(event(i, n)) + (tail(n) if i == n else b"")
            self._c[(i, n)] = b
        return b


def _pct(xs: list[float], q: float) -> float | None:
    if not xs:
        return None
    s = sorted(xs)
    return s[min(len(s) - 1, round(q * (len(s) - 1)))]


class Pacer:
    """All streams' next sends on one heap, served by one timer (the tick)."""

    def __init__(self, gap: float) -> None:
        self.gap = gap
        self.heap: list[tuple[float, int, _Stream]] = []
        self.seq = 0
        self.handle: asyncio.TimerHandle | None = None
        self.chunks = _Chunks()
        self.reset()

    def reset(self) -> None:
        """Forget the record; restart the CPU and wall clocks."""
        self.record: dict[str, list[float]] = {}
        self.arrived: dict[str, float] = {}
        self.conn: dict[str, int] = {}
        self.lags: list[float] = []
        self.arrivals = 0
        self.tokens = 0
        self.cpu0, self.wall0 = time.process_time(), time.monotonic()

    def add(self, s: _Stream) -> None:
        """Start ``s``: its first token is due one gap from now."""
        self.arrivals += 1
        tag = s.tag or f"#{self.arrivals}"
        if tag in self.record:   # a tag sent again (bench serve's test prompt): the last wins
            old = f"{tag}~{self.arrivals}"
            self.record[old] = self.record.pop(tag)
            self.arrived[old], self.conn[old] = self.arrived.pop(tag), self.conn.pop(tag)
        self.record[tag] = s.sent
        now = time.monotonic()
        self.arrived[tag], self.conn[tag] = now, s.proto.number
        self._push(now + self.gap, s)

    def _push(self, due: float, s: _Stream) -> None:
        self.seq += 1
        heapq.heappush(self.heap, (due, self.seq, s))
        if self.heap[0][2] is s:
            self._arm()

    def _arm(self) -> None:
        if self.handle is not None:
            self.handle.cancel()
        loop = asyncio.get_running_loop()
        self.handle = loop.call_at(self.heap[0][0], self.tick) if self.heap else None

    def tick(self) -> None:
        """Send every due stream's next chunk; re-arm for the earliest next due time."""
        self.handle = None
        heap, gap, chunks, lags = self.heap, self.gap, self.chunks, self.lags
        now = time.monotonic()
        while heap and heap[0][0] <= now:
            due, _, s = heapq.heappop(heap)
            if s.gone:
                continue
            s.i += 1
            s.transport.write(chunks.get(s.i, s.n))
            t = time.monotonic()
            s.sent.append(t)
            lags.append(t - due)
            self.tokens += 1
            if s.i < s.n:
                self.seq += 1
                heapq.heappush(heap, (due + gap, self.seq, s))
            else:
                s.proto.stream = None
            now = t
        if heap:
            self.handle = asyncio.get_running_loop().call_at(heap[0][0], self.tick)

    def summary(self) -> dict[str, Any]:
        """The record since the last reset (see the module docstring)."""
        lags = self.lags
        return {"gap_s": self.gap, "cpu_s": time.process_time() - self.cpu0,
                "wall_s": time.monotonic() - self.wall0, "tokens": self.tokens,
                "streams": len(self.record), "loadavg": os.getloadavg(),
                "send_lag_s": {"p50": _pct(lags, 0.5), "p99": _pct(lags, 0.99),
                               "max": max(lags) if lags else None},
                "sent": self.record, "arrived": self.arrived, "conn": self.conn}


class _Stream:
    __slots__ = ("gone", "i", "n", "proto", "sent", "tag", "transport")

    def __init__(self, proto: _Server, n: int, tag: str | None) -> None:
        self.proto, self.transport, self.n, self.tag = proto, proto.transport, n, tag
        self.i = 0
        self.sent: list[float] = []
        self.gone = False


class _Server(asyncio.Protocol):
    connections = 0

    def __init__(self, pacer: Pacer) -> None:
        _Server.connections += 1
        self.number = _Server.connections
        self.pacer = pacer
        self.parser = httptools.HttpRequestParser(self)
        self.transport: Any = None
        self.stream: _Stream | None = None
        self.url = b""
        self.body = bytearray()

    def connection_made(self, transport: Any) -> None:
        self.transport = transport

    def connection_lost(self, exc: Exception | None) -> None:
        if self.stream is not None:
            self.stream.gone = True

    def data_received(self, data: bytes) -> None:
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserError:
            self.transport.close()

    def on_url(self, url: bytes) -> None:
        self.url += url

    def on_body(self, body: bytes) -> None:
        self.body += body

    def on_message_complete(self) -> None:
        method, url, body = self.parser.get_method(), self.url, bytes(self.body)
        self.url, self.body = b"", bytearray()
        if method == b"POST" and url == b"/v1/completions":
            req = json.loads(body or b"{}")
            m = _TAG.match(str(req.get("prompt") or ""))
            self.transport.write(_HEAD_200)
            self.stream = _Stream(self, int(req.get("max_tokens", 16)), m and m.group(1))
            self.pacer.add(self.stream)
        elif method == b"GET" and url == b"/summary":
            out = json.dumps(self.pacer.summary()).encode()
            self.transport.write(b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n"
                                 b"content-length: %d\r\n\r\n%s" % (len(out), out))
        elif method == b"POST" and url == b"/reset":
            self.pacer.reset()
            self.transport.write(b"HTTP/1.1 204 No Content\r\ncontent-length: 0\r\n\r\n")
        else:
            self.transport.write(b"HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\n\r\n")


async def main(port: int, gap: float) -> None:
    """Serve until killed."""
    pacer = Pacer(gap)
    loop = asyncio.get_running_loop()
    server = await loop.create_server(lambda: _Server(pacer), "127.0.0.1", port, backlog=1024)
    async with server:
        await server.serve_forever()


if __name__ == "__main__":
    import uvloop

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("port", type=int)
    ap.add_argument("gap", type=float, nargs="?", default=0.002)
    ap.add_argument("--cpu", type=int, help="pin to this core")
    a = ap.parse_args()
    if a.cpu is not None:
        os.sched_setaffinity(0, {a.cpu})
    uvloop.run(main(a.port, a.gap))
