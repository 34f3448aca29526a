#!/usr/bin/env python3
"""The floor under any Python streaming client: CPU per network read with *no* parsing.

Against ``benchmarks/stream_server.py`` (one event per HTTP chunk, so one read per token), two
clients that do nothing per read but count it (and take one ``time.perf_counter()``):

* ``protocol`` — a bare :class:`asyncio.Protocol` (``data_received`` only; the request written
  by hand, the end found by the chunked terminator): the event loop's own cost per read;
* ``aiohttp`` — ``aiohttp.ClientSession`` streaming with ``response.content.iter_any()``: the
  C-parser HTTP client's cost per read, before any SSE/JSON work.

Each on the stdlib asyncio loop and on uvloop, in this process; CPU = ``time.process_time()``
around the requests. Prints µs of client CPU per read. What a probe client could at best reach:
``docs/benchmarks.md``. Usage::

    python benchmarks/stream_server.py 18931 &
    python benchmarks/client_floor.py http://127.0.0.1:18931 --requests 128 --concurrency 8
"""

from __future__ import annotations

import argparse
import asyncio
import json
import subprocess
import sys
import time
from urllib.parse import urlsplit


async def protocol_client(url: str, n: int, conc: int, tokens: int) -> tuple[float, int]:
    """(CPU s, reads) for ``n`` streamed requests over ``conc`` bare-protocol connections."""
    loop = asyncio.get_running_loop()
    u = urlsplit(url)
    body = json.dumps({"max_tokens": tokens}).encode()
    req = (b"POST /v1/completions HTTP/1.1\r\nhost: %s\r\ncontent-type: application/json\r\n"
           b"content-length: %d\r\n\r\n%s" % (u.netloc.encode(), len(body), body))
    reads = [0]

    class P(asyncio.Protocol):
        done: asyncio.Future[None]

        def data_received(self, data: bytes) -> None:
            reads[0] += 1
            time.perf_counter()
            if data.endswith(b"0\r\n\r\n"):
                self.done.set_result(None)

    left = [n]

    async def worker() -> None:
        t, p = await loop.create_connection(P, u.hostname, u.port)
        while left[0] > 0:
            left[0] -= 1
            p.done = loop.create_future()
            t.write(req)
            await p.done
        t.close()

    c0 = time.process_time()
    await asyncio.gather(*[worker() for _ in range(conc)])
    return time.process_time() - c0, reads[0]


async def aiohttp_client(url: str, n: int, conc: int, tokens: int) -> tuple[float, int]:
    """(CPU s, reads) for ``n`` streamed requests with aiohttp's ``iter_any``."""
    import aiohttp

    reads = [0]
    left = [n]
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=conc)) as s:
        async def worker() -> None:
            while left[0] > 0:
                left[0] -= 1
                async with s.post(url + "/v1/completions",
                                  json={"max_tokens": tokens, "stream": True}) as resp:
                    async for _ in resp.content.iter_any():
                        reads[0] += 1
                        time.perf_counter()

        c0 = time.process_time()
        await asyncio.gather(*[worker() for _ in range(conc)])
        return time.process_time() - c0, reads[0]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("url")
    ap.add_argument("--requests", type=int, default=128)
    ap.add_argument("--concurrency", type=int, default=8)
    ap.add_argument("--output-len", type=int, default=64)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--one", help=argparse.SUPPRESS)   # child: "<client>-<loop>"
    a = ap.parse_args(argv)
    if a.one:
        client, loop = a.one.split("-")
        fn = protocol_client if client == "protocol" else aiohttp_client
        coro = fn(a.url, a.requests, a.concurrency, a.output_len)
        if loop == "uvloop":
            import uvloop
            cpu, reads = uvloop.run(coro)
        else:
            cpu, reads = asyncio.run(coro)
        print(json.dumps({"cpu_s": cpu, "reads": reads}))
        return 0
    for r in range(a.rounds):
        for v in ("protocol-asyncio", "protocol-uvloop", "aiohttp-asyncio", "aiohttp-uvloop"):
            cp = subprocess.run([sys.executable, __file__, a.url, "--requests", str(a.requests),
                                 "--concurrency", str(a.concurrency), "--output-len",
                                 str(a.output_len), "--one", v],
                                capture_output=True, text=True, check=True)
            x = json.loads(cp.stdout)
            print(f"round {r + 1} {v:17s} {x['reads']:6d} reads, "
                  f"{x['cpu_s'] / x['reads'] * 1e6:5.1f} µs CPU per read", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
