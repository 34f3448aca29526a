#!/usr/bin/env python3
"""A stand-in for vLLM's streaming ``/v1/completions`` server, for measuring *client* CPU alone.

``python benchmarks/stream_server.py PORT [GAP_S]`` serves ``POST /v1/completions`` on
127.0.0.1:PORT: HTTP/1.1 keep-alive, chunked transfer encoding as uvicorn (vLLM's server) sends
it, one event per HTTP chunk, ``max_tokens`` chunks shaped as vLLM 0.32's (with
``continuous_usage_stats`` usage, ~321 B each), ``GAP_S`` seconds (default 0.002) between
tokens, then the ``choices: []`` usage chunk and ``data: [DONE]``. Every other path gets 404.
It runs on uvloop in its own process, so the clients being compared (``bench_probe.py --url``)
get the same byte stream at the same pace and none of them competes with an engine for CPU.
Not a test and not a fake used by tests (those use ``tests/sse_server.py``).
"""

from __future__ import annotations

import asyncio
import json
import sys


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


async def handle(r: asyncio.StreamReader, w: asyncio.StreamWriter, gap: float) -> None:
    """Serve requests on one connection until the client closes it."""
    try:
        while True:
            head = await r.readuntil(b"\r\n\r\n")
            length = 0
            for line in head.split(b"\r\n"):
                if line.lower().startswith(b"content-length:"):
                    length = int(line.split(b":")[1])
            body = await r.readexactly(length) if length else b""
            if not head.startswith(b"POST /v1/completions "):
                w.write(b"HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\n\r\n")
                await w.drain()
                continue
            n = int(json.loads(body).get("max_tokens", 16))
            w.write(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream; charset=utf-8\r\n"
                    b"transfer-encoding: chunked\r\n\r\n")
            await w.drain()
            for i in range(1, n + 1):
                await asyncio.sleep(gap)
                w.write(chunk(event(i, n)))
                await w.drain()
            usage = {"id": "cmpl-0123456789abcdef", "object": "text_completion",
                     "created": 1796116449, "model": "seat-resident", "choices": [],
                     "usage": {"prompt_tokens": 60, "total_tokens": 60 + n,
                               "completion_tokens": n}}
            w.write(chunk(("data: " + json.dumps(usage) + "\n\n").encode()))
            w.write(chunk(b"data: [DONE]\n\n") + b"0\r\n\r\n")
            await w.drain()
    except (asyncio.IncompleteReadError, ConnectionError):
        pass
    finally:
        w.close()


async def main(port: int, gap: float) -> None:
    """Serve until killed."""
    server = await asyncio.start_server(lambda r, w: handle(r, w, gap), "127.0.0.1", port)
    async with server:
        await server.serve_forever()


if __name__ == "__main__":
    import uvloop

    uvloop.run(main(int(sys.argv[1]), float(sys.argv[2]) if len(sys.argv) > 2 else 0.002))
