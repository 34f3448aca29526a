"""A real HTTP server on 127.0.0.1 that answers with a handler written for ``httpx``
(``handler(request: httpx.Request) -> httpx.Response``): the engine's stand-in for unit tests
of the one engine client (:mod:`seat_console.node.engine_client`), which speaks to a socket
through urllib3 — so every test goes through the same client code the node runs.

A handler that raises (``httpx.ConnectError`` or anything else) closes the connection without
an answer, which the client reports as ``unreachable``. Keep-alive is on (HTTP/1.1), as
vLLM's uvicorn server does.

Usage::

    with EngineDouble(handler) as url:
        with EngineClient(url) as c:
            ...
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx

Handler = Callable[[httpx.Request], httpx.Response]


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False
    handler: Handler


class _Req(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server

    def log_message(self, *args: object) -> None:   # quiet
        pass

    def _any(self) -> None:
        n = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(n) if n else b""
        host = f"http://{self.server.server_address[0]}:{self.server.server_address[1]}"
        req = httpx.Request(self.command, host + self.path,
                            headers=[(k, v) for k, v in self.headers.items()], content=body)
        try:
            resp = self.server.handler(req)
            data = resp.read()
        except Exception:  # noqa: BLE001 - the test's "no answer": close without one
            self.close_connection = True
            return
        self.send_response(resp.status_code)
        for k, v in resp.headers.items():
            if k.lower() not in ("content-length", "transfer-encoding", "content-encoding"):
                self.send_header(k, v)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    do_GET = do_POST = do_PUT = do_DELETE = _any


class EngineDouble:
    """Serve ``handler`` on an ephemeral port of 127.0.0.1 while in the ``with`` block; the
    block gets the base URL (``http://127.0.0.1:PORT``). :attr:`url` is set once entered."""

    def __init__(self, handler: Handler) -> None:
        self.handler = handler
        self.url = ""
        self._srv: _Server | None = None
        self._thread: threading.Thread | None = None

    def __enter__(self) -> str:
        srv = _Server(("127.0.0.1", 0), _Req)
        srv.handler = self.handler
        self._srv = srv
        self._thread = threading.Thread(target=srv.serve_forever, kwargs={"poll_interval": 0.05},
                                        daemon=True)
        self._thread.start()
        self.url = f"http://127.0.0.1:{srv.server_address[1]}"
        return self.url

    def start(self) -> str:
        """Enter without a ``with`` block (a module-level double); :meth:`stop` ends it."""
        return self.__enter__()

    def stop(self) -> None:
        """Stop serving and close the listening socket."""
        if self._srv is not None:
            self._srv.shutdown()
            self._srv.server_close()
            self._srv = None

    def __exit__(self, *exc: object) -> None:
        self.stop()
