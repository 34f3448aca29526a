"""The one HTTP client of the seat's engine (vLLM's OpenAI-compatible server), issue 33: every
reader and writer reaches the engine through :class:`EngineClient` — the engine source
(:mod:`seat_console.sources.engine`: the panel, ``status``, the probe's preflight), the exporter
(:mod:`seat_console.exporter.readers`), the swap / promote / compare checks
(:mod:`seat_console.actions.swap`), the drain (:mod:`seat_console.actions.drain`) and the
evidence's canaries and fidelity traces. The probe's load generator keeps its own async transport
(:mod:`seat_console.probe.client`, :mod:`seat_console.probe.hotpath`: the measured path), and its
two side calls on that transport (``/metrics`` around a phase, the prefix-cache reset) go through
:func:`get_async` / :func:`post_async` here, under the same error rule.

Endpoints (vLLM ``entrypoints/openai/api_server.py`` and its routers, 0.32–0.34):
``GET /health`` (200 while serving, also while paused or asleep), ``GET /version``
(``{"version": …}``), ``GET /v1/models``, ``GET /metrics`` (Prometheus text), ``POST
/v1/completions`` and ``/v1/chat/completions``, and where the server runs with
``VLLM_SERVER_DEV_MODE=1`` the hold-state endpoints ``GET /is_paused``, ``GET /is_sleeping``,
``POST /pause?mode=wait``, ``POST /resume`` (404 where not offered).

This module moves bytes; it parses nothing. The answers are parsed where the parsers of
outside input are listed and fuzzed (``tests/parsers.toml``): ``/v1/models`` and the hold-state
flags by :mod:`seat_console.sources.engine`, ``/metrics`` by :mod:`seat_console.core.promtext`.

**The timeout rule**: one timeout per client, ``timeout_s`` (default :data:`DEFAULT_TIMEOUT_S`)
for reading, writing and the pool, and at most :data:`CONNECT_S` to connect (a refused or
unroutable engine fails fast); a call may pass its own ``timeout_s`` (a completion may take
minutes, ``POST /pause?mode=wait`` waits up to the drain's bound). No redirects are followed and
no proxy or ``.netrc`` from the environment is used (``trust_env=False``): the engine is this
node's.

**The error rule**: a call that gets an HTTP answer returns it as an :class:`Answer`, whatever its
status (404 says "not offered", 503 "not ready": the caller decides). A call that gets no answer
raises :class:`EngineError` naming the method and URL: ``kind`` ``"timeout"`` (no answer in
time), ``"unreachable"`` (refused, reset, DNS, protocol error) or ``"too-large"`` (the body is
above ``max_bytes``, default :data:`MAX_BODY_BYTES`: reading stops there while it streams in, the
answer is never downloaded whole).
"""

from __future__ import annotations

import json as _json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal
from urllib.parse import urlencode

import httpx
import urllib3

HEALTH = "/health"
VERSION = "/version"
MODELS = "/v1/models"
METRICS = "/metrics"
COMPLETIONS = "/v1/completions"
CHAT_COMPLETIONS = "/v1/chat/completions"
IS_PAUSED = "/is_paused"
IS_SLEEPING = "/is_sleeping"
PAUSE = "/pause"
RESUME = "/resume"
RESET_PREFIX_CACHE = "/reset_prefix_cache"
"""The engine's paths, in one place."""

DEFAULT_TIMEOUT_S = 3.0
"""Seconds a read may wait for the engine unless the client or the call says otherwise."""

CONNECT_S = 2.0
"""Seconds a connection may take at the most (never more than the call's timeout)."""

MAX_BODY_BYTES = 16 << 20
"""Bytes of one answer read at the most (16 MiB; vLLM's ``/metrics`` is ~100 KB per engine)."""

CHUNK_BYTES = 64 << 10
"""Bytes asked of the socket per read while an answer streams in."""

POOL_CONNECTIONS = 4
"""Kept-alive connections per client (more are opened when threads ask at once, and closed
after their answer: the pool never blocks)."""

ErrorKind = Literal["timeout", "unreachable", "too-large"]

_JSON_HEADERS = {"Content-Type": "application/json"}


class EngineError(Exception):
    """No usable answer from the engine: ``kind`` (:data:`ErrorKind`), ``method``, ``url`` (the
    full URL called), ``problem`` (one sentence, without the URL). ``str()`` is ``"<method>
    <url>: <problem>"``."""

    def __init__(self, kind: ErrorKind, method: str, url: str, problem: str) -> None:
        self.kind, self.method, self.url, self.problem = kind, method, url, problem
        super().__init__(f"{method} {url}: {problem}")


@dataclass(frozen=True)
class Answer:
    """One HTTP answer of the engine: ``method``, ``url`` (full), ``path``, ``status`` (HTTP
    code), ``body`` (bytes, whole: at most the call's ``max_bytes``, or cut there when the call
    said ``cut=True``, then ``was_cut``)."""

    method: str
    url: str
    path: str
    status: int
    body: bytes
    was_cut: bool = False

    @property
    def ok(self) -> bool:
        """HTTP 200."""
        return self.status == 200

    @property
    def text(self) -> str:
        """The body as UTF-8 (bad bytes as U+FFFD)."""
        return self.body.decode("utf-8", "replace")


def _timeout(timeout_s: float, connect_s: float | None = None) -> urllib3.Timeout:
    """``timeout_s`` for each read and write on the socket; ``connect_s`` to connect when
    given, else ``min(timeout_s, CONNECT_S)``."""
    return urllib3.Timeout(connect=min(timeout_s, CONNECT_S) if connect_s is None
                           else connect_s, read=timeout_s)


def _no_answer(exc: Exception, method: str, url: str) -> EngineError:
    """The error rule for a call that got no HTTP answer (urllib3's or httpx's exception;
    urllib3's :class:`~urllib3.exceptions.NewConnectionError` — refused, DNS — subclasses its
    connect *timeout*, so it is told apart first)."""
    if isinstance(exc, urllib3.exceptions.NewConnectionError):
        reason = str(exc).split(": ", 1)[-1]   # without the connection object's repr
        return EngineError("unreachable", method, url, f"cannot connect: {reason}")
    if isinstance(exc, urllib3.exceptions.TimeoutError | httpx.TimeoutException):
        return EngineError("timeout", method, url, f"no answer in time ({type(exc).__name__})")
    return EngineError("unreachable", method, url, f"{type(exc).__name__}: {exc}")


def _too_large(method: str, url: str, limit: int) -> EngineError:
    return EngineError("too-large", method, url, f"the answer is above the {limit:,}-byte "
                       "limit (reading stopped there)")


class EngineClient:
    """The engine at ``base_url`` (e.g. ``http://127.0.0.1:8000``; a trailing ``/`` dropped; a
    path in it is the prefix of every call's path).

    ``timeout_s``: the client's timeout (the rule in the module docstring). One pool of
    kept-alive connections (:data:`POOL_CONNECTIONS`), safe to share between threads
    (urllib3's :class:`~urllib3.HTTPConnectionPool` is); :meth:`close` it, or use it as a
    context manager. Raises :class:`ValueError` for a ``base_url`` that is not an http(s) URL
    with a host.

    Why urllib3 and not httpx (issue 33, ``docs/benchmarks.md``): the TUI asks the engine two
    GETs a second; one GET through httpx cost 0.38–0.60 ms of CPU on the lab (URL building,
    the cookie jar, httpcore and h11), through urllib3 0.21–0.33 ms (its parser is the standard
    library's ``http.client``) — the engine read was the largest share of the console's idle
    CPU. The fleet's Prometheus client moved for the same reason (:mod:`seat_console.fleet.
    promapi`). No proxy or ``.netrc`` is read from the environment, no redirect followed, no
    retry made (the caller decides), and no compression asked for (``Accept-Encoding:
    identity``: a cut answer is cut in the engine's own bytes).
    """

    def __init__(self, base_url: str, timeout_s: float = DEFAULT_TIMEOUT_S) -> None:
        self.base_url = str(base_url).rstrip("/")
        self.timeout_s = float(timeout_s)
        try:
            u = urllib3.util.parse_url(self.base_url)
        except (urllib3.exceptions.LocationParseError, ValueError):
            u = None
        if u is None or u.scheme not in ("http", "https") or not u.host:
            raise ValueError(f"engine endpoint {self.base_url!r} is not an http(s) URL with a "
                             "host (e.g. http://127.0.0.1:8000)")
        self._prefix = (u.path or "").rstrip("/")
        self._pool = urllib3.connection_from_url(
            self.base_url, maxsize=POOL_CONNECTIONS, block=False, retries=False,
            timeout=_timeout(self.timeout_s))

    def __repr__(self) -> str:
        return f"EngineClient({self.base_url!r})"

    def __enter__(self) -> EngineClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def url(self, path: str) -> str:
        """The full URL of ``path`` on this engine."""
        return self.base_url + path

    def request(self, method: str, path: str, *, json: Any = None,
                params: Mapping[str, str] | None = None, timeout_s: float | None = None,
                connect_s: float | None = None, max_bytes: int | None = None,
                cut: bool = False) -> Answer:
        """``method`` ``path`` (``json`` body, query ``params``) → :class:`Answer`, any status.

        ``timeout_s`` / ``connect_s``: this call's (default: the client's timeout, and to
        connect ``min(timeout_s, CONNECT_S)``).
        ``max_bytes``: body bytes read at the most (default :data:`MAX_BODY_BYTES`, read when
        called); above it, :class:`EngineError` ``too-large`` — or with ``cut=True`` the body cut
        there and :attr:`Answer.was_cut` set. Raises :class:`EngineError` (``timeout`` /
        ``unreachable`` / ``too-large``) naming the method and URL when there is no answer,
        and :class:`ValueError` for a ``json`` body JSON cannot carry (NaN, ±Inf).
        """
        limit = MAX_BODY_BYTES if max_bytes is None else max_bytes
        url = self.url(path)
        target = self._prefix + path + (f"?{urlencode(params)}" if params else "")
        body = None if json is None else _json.dumps(
            json, separators=(",", ":"), ensure_ascii=False, allow_nan=False).encode("utf-8")
        t = _timeout(timeout_s if timeout_s is not None else self.timeout_s, connect_s)
        chunks: list[bytes] = []
        size, was_cut, whole = 0, False, False
        try:
            r = self._pool.urlopen(method, target, body=body,
                                   headers=None if body is None else _JSON_HEADERS, timeout=t,
                                   retries=False, redirect=False, preload_content=False,
                                   assert_same_host=False)
            try:
                for chunk in r.stream(CHUNK_BYTES):
                    if size + len(chunk) > limit:
                        if not cut:
                            raise _too_large(method, url, limit)
                        chunks.append(chunk[:limit - size])
                        was_cut = True
                        break
                    size += len(chunk)
                    chunks.append(chunk)
                else:
                    whole = True
            finally:
                if not whole:
                    r.close()   # the rest is never read: this connection is not kept
                r.release_conn()
        except (urllib3.exceptions.HTTPError, OSError) as exc:
            raise _no_answer(exc, method, url) from None
        return Answer(method, url, path, r.status, b"".join(chunks), was_cut)

    def get(self, path: str, **kw: Any) -> Answer:
        """``GET path`` (:meth:`request`'s arguments and errors)."""
        return self.request("GET", path, **kw)

    def post(self, path: str, **kw: Any) -> Answer:
        """``POST path`` (:meth:`request`'s arguments and errors)."""
        return self.request("POST", path, **kw)

    # -- the endpoints, by name ------------------------------------------------------------
    def health(self, **kw: Any) -> int:
        """``GET /health``'s HTTP status (200: serving — also while paused or asleep). Raises
        :class:`EngineError` when nothing answers."""
        return self.get(HEALTH, **kw).status

    def version(self, **kw: Any) -> Answer:
        """``GET /version`` (``{"version": "0.32.0"}``)."""
        return self.get(VERSION, **kw)

    def models(self, **kw: Any) -> Answer:
        """``GET /v1/models`` (parsed by :func:`seat_console.sources.engine.parse_models`)."""
        return self.get(MODELS, **kw)

    def metrics(self, **kw: Any) -> Answer:
        """``GET /metrics`` (Prometheus text; :mod:`seat_console.core.promtext`)."""
        return self.get(METRICS, **kw)

    def flag(self, path: str, **kw: Any) -> Answer:
        """``GET /is_paused`` or ``/is_sleeping`` (404/405: not offered; parsed by
        :func:`seat_console.sources.engine.parse_flag`)."""
        if path not in (IS_PAUSED, IS_SLEEPING):
            raise ValueError(f"flag: {path!r} is not a hold-state endpoint")
        return self.get(path, **kw)

    def pause(self, wait_s: float, **kw: Any) -> Answer:
        """``POST /pause?mode=wait``: stop admitting, wait up to ``wait_s`` for the running
        requests (the call's read timeout; 5 s to connect, whatever ``wait_s``). A
        :class:`EngineError` ``timeout`` means the wait ran past ``wait_s`` — the pause itself
        applied at once."""
        return self.post(PAUSE, params={"mode": "wait"}, timeout_s=max(wait_s, 0.1),
                         connect_s=5.0, **kw)

    def resume(self, **kw: Any) -> Answer:
        """``POST /resume``."""
        return self.post(RESUME, **kw)

    def completion(self, body: Mapping[str, Any], *, chat: bool = False, **kw: Any) -> Answer:
        """``POST /v1/completions`` (``chat``: ``/v1/chat/completions``) with the JSON
        ``body``, not streamed. Give a ``timeout_s`` fit for a generation."""
        return self.post(CHAT_COMPLETIONS if chat else COMPLETIONS, json=dict(body), **kw)

    def close(self) -> None:
        """Close the connection pool."""
        self._pool.close()


# -- the listener itself ---------------------------------------------------------------------
LISTEN_PROBE_S = 0.5
"""Seconds one TCP connect to the engine's listener may take (:func:`listening`)."""


def listening(base_url: str, timeout_s: float = LISTEN_PROBE_S) -> bool | None:
    """Whether the engine's listener at ``base_url`` (the profile's endpoint, e.g.
    ``http://127.0.0.1:8000``; port 80 / 443 by the scheme when it names none) accepts a TCP
    connection now: ``True`` (connected; closed again at once, nothing sent), ``False`` (the
    connection was **refused**: nothing listens on that host and port), ``None`` (unknown: no
    answer within ``timeout_s``, another network error, or a URL without a host). No HTTP:
    the question is whether the server still holds its socket, not what it answers. Never
    raises.

    The seat's stop reads it (:func:`seat_console.actions.swap.docker_stop`): vLLM's API server
    closes its listener only after its engine has shut down (``entrypoints/launchers/
    launcher.py`` ``serve_http``). A port published through docker's userland proxy is accepted
    by the proxy while the container exists, so there it reads ``True`` until the container
    is gone."""
    import socket

    try:
        url = urllib3.util.parse_url(str(base_url))
        host = url.host
        port = url.port or {"http": 80, "https": 443}.get(url.scheme or "")
        if not host or port is None or not 0 < port < 65536:
            return None
        with socket.create_connection((host, port), timeout=max(float(timeout_s), 0.01)):
            return True
    except ConnectionRefusedError:
        return False
    except (OSError, ValueError, TypeError, OverflowError,
            urllib3.exceptions.LocationParseError):
        return None


# -- the probe's side calls, on its own async transport ---------------------------------------
async def get_async(client: httpx.AsyncClient, path: str, *,
                    timeout_s: float = 10.0) -> Answer:
    """``GET path`` on the probe's :class:`httpx.AsyncClient` (its ``base_url`` the engine), by
    this module's error rule: an :class:`Answer` whatever its status, :class:`EngineError`
    naming the URL when there is none (or when the body is above :data:`MAX_BODY_BYTES`)."""
    return await _async(client, "GET", path, timeout_s)


async def post_async(client: httpx.AsyncClient, path: str, *,
                     timeout_s: float = 10.0) -> Answer:
    """``POST path`` (no body) on the probe's client; as :func:`get_async`."""
    return await _async(client, "POST", path, timeout_s)


async def _async(client: httpx.AsyncClient, method: str, path: str, timeout_s: float) -> Answer:
    url = str(client.base_url).rstrip("/") + path
    try:
        async with client.stream(method, path, timeout=timeout_s) as r:
            chunks: list[bytes] = []
            size = 0
            async for chunk in r.aiter_bytes():
                size += len(chunk)
                if size > MAX_BODY_BYTES:
                    raise _too_large(method, url, MAX_BODY_BYTES)
                chunks.append(chunk)
    except httpx.HTTPError as exc:
        raise _no_answer(exc, method, url) from None
    return Answer(method, url, path, r.status_code, b"".join(chunks))


__all__ = ["CHAT_COMPLETIONS", "COMPLETIONS", "CONNECT_S", "DEFAULT_TIMEOUT_S", "HEALTH",
           "IS_PAUSED", "IS_SLEEPING", "MAX_BODY_BYTES", "METRICS", "MODELS", "PAUSE",
           "RESET_PREFIX_CACHE", "RESUME", "VERSION", "Answer", "EngineClient", "EngineError",
           "LISTEN_PROBE_S", "get_async", "listening", "post_async"]
