"""A small, real HTTP/1.1 server on 127.0.0.1 that streams Server-Sent Events the nasty ways.

Used by the probe client tests (``tests/test_probe_client.py``). Raw :mod:`asyncio` streams, so
the test controls every byte and every write boundary: chunked transfer encoding as uvicorn
(vLLM's server) sends it, events split across writes at arbitrary byte positions (also inside a
multi-byte UTF-8 character), several events merged into one write, ``: ping`` comments, a stream
cut without ``[DONE]`` or without the terminating chunk, HTTP 500, a stall.

The scenario is chosen by the request's prompt (``/v1/completions``) or the last message's
content (``/v1/chat/completions``); see :data:`SCENARIOS`.
"""

from __future__ import annotations

import asyncio
import bisect
import json
import math
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from seat_console.probe.prompts import strip_nonce

Writer = Callable[[bytes], Awaitable[None]]


def completion_chunk(text: str, running: int | None = None, finish: str | None = None,
                     logprob_tokens: int | None = None) -> bytes:
    """One ``/v1/completions`` stream event (as vLLM 0.32 sends it), bytes incl. blank line."""
    choice: dict[str, Any] = {"index": 0, "text": text, "finish_reason": finish,
                              "logprobs": None}
    if logprob_tokens is not None:
        choice["logprobs"] = {"tokens": ["t"] * logprob_tokens}
    obj: dict[str, Any] = {"id": "cmpl-x", "object": "text_completion", "choices": [choice]}
    if running is not None:
        obj["usage"] = {"prompt_tokens": 7, "completion_tokens": running,
                        "total_tokens": 7 + running}
    return b"data: " + json.dumps(obj, ensure_ascii=False).encode() + b"\n\n"


def chat_chunk(content: str | None, running: int, role: bool = False) -> bytes:
    """One ``/v1/chat/completions`` stream event with continuous usage."""
    delta: dict[str, Any] = {"content": content}
    if role:
        delta["role"] = "assistant"
    obj = {"id": "chatcmpl-x", "object": "chat.completion.chunk",
           "choices": [{"index": 0, "delta": delta, "finish_reason": None}],
           "usage": {"prompt_tokens": 9, "completion_tokens": running,
                     "total_tokens": 9 + running}}
    return b"data: " + json.dumps(obj, ensure_ascii=False).encode() + b"\n\n"


def usage_chunk(total: int) -> bytes:
    """The final ``choices: []`` usage event."""
    obj = {"id": "cmpl-x", "choices": [],
           "usage": {"prompt_tokens": 7, "completion_tokens": total, "total_tokens": 7 + total}}
    return b"data: " + json.dumps(obj).encode() + b"\n\n"


DONE = b"data: [DONE]\n\n"
PING = b": ping\n\n"
SNOWMAN_TEXT = "h\u00e9\u2603\U0001F600"
"""Output text with 2-, 3- and 4-byte UTF-8 characters (4 characters, 10 bytes)."""


async def _normal(w: Writer) -> None:
    await w(PING)
    for i in range(1, 5):
        await w(completion_chunk("ab", running=i))
        await asyncio.sleep(0.01)
        await w(PING)
    await w(usage_chunk(4) + DONE)


async def _multi(w: Writer) -> None:
    # tokens per chunk 1, 3, 2 with ~0.05 s gaps: ITL = [g/3]*3 + [g/2]*2
    await w(completion_chunk("a", running=1))
    await asyncio.sleep(0.06)
    await w(completion_chunk("bcd", running=4))
    await asyncio.sleep(0.06)
    await w(completion_chunk("ef", running=6, finish="length"))
    await w(usage_chunk(6) + DONE)


async def _logprobs(w: Writer) -> None:
    # no continuous usage: tokens per chunk from the logprobs list (2, 2)
    await w(completion_chunk("ab", logprob_tokens=2))
    await asyncio.sleep(0.02)
    await w(completion_chunk("cd", logprob_tokens=2, finish="length"))
    await w(usage_chunk(4) + DONE)


async def _split(w: Writer) -> None:
    # every event split into 1-3 byte writes: lines, the blank separator and the 2/3/4-byte
    # characters of SNOWMAN_TEXT all cross write boundaries
    body = (completion_chunk(SNOWMAN_TEXT[:2], running=1) + PING
            + completion_chunk(SNOWMAN_TEXT[2:], running=2) + usage_chunk(2) + DONE)
    sizes = [1, 2, 3]
    i = k = 0
    while i < len(body):
        n = sizes[k % 3]
        await w(body[i:i + n])
        await asyncio.sleep(0.001)
        i += n
        k += 1


async def _merged(w: Writer) -> None:
    await w(b"".join(completion_chunk("x", running=i) for i in range(1, 6))
            + usage_chunk(5) + DONE)


async def _error_event(w: Writer) -> None:
    await w(completion_chunk("a", running=1))
    await w(b'data: {"error": {"message": "engine dead", "type": "InternalServerError", '
            b'"code": 500}}\n\n')
    await w(DONE)


async def _cut(w: Writer) -> None:
    # two tokens, then the server ends the body cleanly but never sends usage or [DONE]
    await w(completion_chunk("a", running=1) + completion_chunk("b", running=2))


async def _no_usage(w: Writer) -> None:
    await w(completion_chunk("a", running=1) + completion_chunk("b", running=2) + DONE)


async def _stall(w: Writer) -> None:
    await w(completion_chunk("a", running=1))
    await asyncio.sleep(5)  # longer than the client's read timeout in the test
    await w(usage_chunk(1) + DONE)


async def _chat(w: Writer) -> None:
    await w(chat_chunk("", 0, role=True))        # role chunk: no token
    await asyncio.sleep(0.02)
    await w(chat_chunk("hi", 1))
    await w(chat_chunk("", 2))                    # a token with empty text (partial UTF-8)
    await w(chat_chunk(" there", 3))
    await w(usage_chunk(3) + DONE)


async def _bad_json(w: Writer) -> None:
    await w(completion_chunk("a", running=1) + b"data: {not json\n\n" + DONE)


def _cr(event: bytes) -> bytes:
    """An event with CR line ends (``data: X\r\r``), as the standard allows."""
    return event.replace(b"\n", b"\r")


async def _spec(w: Writer) -> None:
    # valid SSE the standard settles (issue 31): a leading BOM before the first token, events
    # without a data line (retry, event, id alone), CR and CRLF line ends with a CR ending a
    # write and its LF opening the next
    await w(b"\xef\xbb\xbf" + completion_chunk("a", running=1))
    await w(b"retry: 3000\n\nevent: keepalive\n\nid: 7\n\n")
    await w(_cr(completion_chunk("b", running=2)))
    await w(completion_chunk("c", running=3).replace(b"\n", b"\r\n")[:-1])   # …\r\n\r
    await w(b"\n" + usage_chunk(3) + DONE)


async def _after_done(w: Writer) -> None:
    # a token chunk after [DONE] (a mutation of the client survived: it was accepted)
    await w(completion_chunk("a", running=1) + usage_chunk(1) + DONE)
    await w(completion_chunk("b", running=2))


async def _jump(w: Writer) -> None:
    # a running completion_tokens of 2^40: 2^40 ITL values (MemoryError) before the bound
    await w(completion_chunk("a", running=1))
    await w(completion_chunk("b", running=1 << 40))
    await w(usage_chunk(1 << 40) + DONE)


SCENARIOS: dict[str, Callable[[Writer], Awaitable[None]]] = {
    "normal": _normal, "multi": _multi, "logprobs": _logprobs, "split": _split,
    "merged": _merged, "error-event": _error_event, "cut": _cut, "no-usage": _no_usage,
    "stall": _stall, "chat": _chat, "bad-json": _bad_json, "spec": _spec,
    "after-done": _after_done, "jump": _jump,
}
"""Scenario name (the prompt) → body writer. Special prompts: ``http500`` (HTTP 500 with a JSON
error body), ``cut-chunked`` (the connection closes inside a chunked body), ``not-sse`` (HTTP 200
with a JSON body), ``hangup`` (the connection closes before any response head)."""

TOKENS = {"normal": 4, "multi": 6, "logprobs": 4, "split": 2, "merged": 5, "chat": 3, "spec": 3}
"""Output tokens the server counts (``/metrics``) for each scenario that succeeds."""


TTFT_BOUNDS = (0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5,
               5.0, 7.5, 10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0)
ITL_BOUNDS = (0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0,
              7.5, 10.0, 20.0, 40.0, 80.0)
"""vLLM's buckets for ``vllm:time_to_first_token_seconds`` / ``vllm:inter_token_latency_seconds``
(``vllm/v1/metrics/loggers.py``)."""


def histogram_series(name: str, bounds: Sequence[float], counts: Sequence[int], labels: str,
                     total: float) -> list[str]:
    """The ``_bucket`` / ``_count`` / ``_sum`` lines of one label set (``labels``, e.g.
    ``'engine="0"'``) of histogram ``name``: ``counts`` per bucket (not cumulative, one more than
    ``bounds``: the last is ``+Inf``'s), ``total`` the ``_sum``."""
    out, cum = [], 0
    for le, c in zip([*bounds, math.inf], counts, strict=True):
        cum += c
        le_s = "+Inf" if le == math.inf else repr(le)
        out.append(f'{name}_bucket{{{labels},le="{le_s}"}} {float(cum)}')
    out.append(f"{name}_count{{{labels}}} {float(cum)}")
    out.append(f"{name}_sum{{{labels}}} {float(total)}")
    return out


def histogram_text(name: str, bounds: tuple[float, ...], values: list[float]) -> str:
    """``values`` (seconds) as a Prometheus histogram ``name`` with upper bounds ``bounds``."""
    counts = [0] * (len(bounds) + 1)
    for v in values:
        counts[bisect.bisect_left(bounds, v)] += 1
    return "\n".join([f"# TYPE {name} histogram", *histogram_series(
        name, bounds, counts, 'engine="0",model_name="m"', sum(values))]) + "\n"


class SSEServer:
    """``async with SSEServer() as srv:`` → ``srv.url``; counts requests in ``srv.requests``.

    Its ``/metrics`` has vLLM's TTFT and ITL histograms as an engine measures them: from the
    request's arrival (after ``front_delay_s``, a delay before the engine sees the request, as a
    slow network or proxy in front of it would add) to the first token chunk, and between token
    chunks."""

    def __init__(self, keep_alive: bool = False, say_close: bool = False) -> None:
        # keep_alive: event streams end without "Connection: close" and the connection then
        # serves the next request (as uvicorn does); ``connections`` counts accepted ones.
        # say_close: send "Connection: close" all the same while still serving the connection
        # (a client that honours the header opens a new one; one that ignores it reuses this)
        self.keep_alive = keep_alive
        self.say_close = say_close
        self.connections = 0
        self.requests: list[dict[str, Any]] = []
        self._server: asyncio.base_events.Server | None = None
        self.url = ""
        # engine-like counters served on GET /metrics (Prometheus text), as vLLM names them
        self.generation_tokens = 0
        self.succeeded = 0
        self.extra_tokens = 0          # tests add "foreign traffic" here
        self.process_start = 1_700_000_000.0
        self.front_delay_s = 0.0       # a delay before each stream that the engine never sees
        self.ttft_s: list[float] = []
        self.itl_s: list[float] = []
        self.histograms = True         # False: a vLLM without the TTFT / ITL histograms
        # prefix cache, as vLLM counts it (prompt tokens looked up / found): a prompt seen since
        # the last reset hits in full; POST /reset_prefix_cache answers reset_status (404: a
        # vLLM without VLLM_SERVER_DEV_MODE) and, on 200, {"success": reset_success}
        self.prefix_seen: set[str] = set()
        self.prefix_hits = 0
        self.prefix_queries = 0
        self.reset_status = 404
        self.reset_success = True
        self.resets = 0

    def metrics_text(self) -> str:
        """vLLM-style ``/metrics`` for what this server has streamed."""
        return (
            "# TYPE vllm:generation_tokens_total counter\n"
            f'vllm:generation_tokens_total{{engine="0",model_name="m"}} '
            f"{float(self.generation_tokens + self.extra_tokens)}\n"
            "# TYPE vllm:request_success_total counter\n"
            f'vllm:request_success_total{{engine="0",finished_reason="length",model_name="m"}} '
            f"{float(self.succeeded)}\n"
            f'vllm:request_success_total{{engine="0",finished_reason="abort",model_name="m"}} 0.0\n'
            "# TYPE vllm:num_requests_running gauge\n"
            'vllm:num_requests_running{engine="0",model_name="m"} 0.0\n'
            "# TYPE vllm:prefix_cache_queries_total counter\n"
            f'vllm:prefix_cache_queries_total{{engine="0",model_name="m"}} '
            f"{float(self.prefix_queries)}\n"
            "# TYPE vllm:prefix_cache_hits_total counter\n"
            f'vllm:prefix_cache_hits_total{{engine="0",model_name="m"}} {float(self.prefix_hits)}\n'
            "# TYPE process_start_time_seconds gauge\n"
            f"process_start_time_seconds {self.process_start}\n"
            + (histogram_text("vllm:time_to_first_token_seconds", TTFT_BOUNDS, self.ttft_s)
               + histogram_text("vllm:inter_token_latency_seconds", ITL_BOUNDS, self.itl_s)
               if self.histograms else ""))

    async def __aenter__(self) -> SSEServer:
        self._server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
        port = self._server.sockets[0].getsockname()[1]
        self.url = f"http://127.0.0.1:{port}"
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._server is not None
        self._server.close()
        await self._server.wait_closed()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        try:
            while await self._serve_one(reader, writer) and self.keep_alive:
                pass
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            writer.close()

    async def _serve_one(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
                         ) -> bool:
        """Serve one request; True when the connection may serve another."""
        head = await reader.readuntil(b"\r\n\r\n")
        length = 0
        for line in head.decode("latin-1").split("\r\n")[1:]:
            k, _, v = line.partition(":")
            if k.strip().lower() == "content-length":
                length = int(v.strip())
        if head.startswith(b"GET /metrics"):
            text = self.metrics_text().encode()
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/plain; version=0.0.4\r\n"
                         b"Connection: close\r\nContent-Length: " + str(len(text)).encode()
                         + b"\r\n\r\n" + text)
            await writer.drain()
            return False
        if head.startswith(b"POST /reset_prefix_cache"):
            await reader.readexactly(length)
            msg = json.dumps({"success": self.reset_success}).encode()
            if self.reset_status == 200:
                self.resets += 1
                if self.reset_success:
                    self.prefix_seen.clear()
            writer.write(b"HTTP/1.1 %d X\r\nContent-Type: application/json\r\n"
                         b"Connection: close\r\nContent-Length: %d\r\n\r\n"
                         % (self.reset_status, len(msg)) + msg)
            await writer.drain()
            return False
        body = json.loads(await reader.readexactly(length)) if length else {}
        self.requests.append(body)
        prompt = body.get("prompt") or body.get("messages", [{}])[-1].get("content", "")
        self.prefix_queries += 7
        if prompt in self.prefix_seen:
            self.prefix_hits += 7
        self.prefix_seen.add(prompt)
        scenario = strip_nonce(prompt)   # the probe's cache-clean nonce (probe/prompts.py)
        if scenario == "hangup":          # the server closes before any response head
            return False
        if scenario == "not-sse":         # HTTP 200, but a JSON body, not an event stream
            msg = b'{"choices": []}'
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                         b"Content-Length: " + str(len(msg)).encode()
                         + b"\r\nConnection: close\r\n\r\n" + msg)
            await writer.drain()
            return False
        if scenario == "http500":
            msg = b'{"error": {"message": "boom", "code": 500}}'
            writer.write(b"HTTP/1.1 500 Internal Server Error\r\nContent-Type: "
                         b"application/json\r\nContent-Length: " + str(len(msg)).encode()
                         + b"\r\nConnection: close\r\n\r\n" + msg)
            await writer.drain()
            return False
        if self.front_delay_s:
            await asyncio.sleep(self.front_delay_s)
        arrived = time.perf_counter()
        close = b"" if self.keep_alive and not self.say_close else b"Connection: close\r\n"
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream; charset=utf-8\r\n"
                     b"Transfer-Encoding: chunked\r\n" + close + b"\r\n")
        await writer.drain()
        last: list[float] = []

        async def w(data: bytes) -> None:
            if b'"text"' in data or b'"content"' in data:   # a token chunk: the engine's times
                now = time.perf_counter()
                if last:
                    self.itl_s.append(now - last[0])
                else:
                    self.ttft_s.append(now - arrived)
                last[:] = [now]
            writer.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
            await writer.drain()

        if scenario == "cut-chunked":
            await w(completion_chunk("a", running=1))
            writer.write(b"40\r\ndata: {\"trunc")  # a chunk announced, never finished
            await writer.drain()
            return False
        await SCENARIOS[scenario](w)
        writer.write(b"0\r\n\r\n")
        await writer.drain()
        if scenario in TOKENS:
            self.generation_tokens += TOKENS[scenario]
            self.succeeded += 1
        return True
