"""A client for the Prometheus HTTP API v1 (what Thanos, Mimir and VictoriaMetrics also speak).

API (https://prometheus.io/docs/prometheus/latest/querying/api/, checked against Debian's
Prometheus 2.42):

* ``GET /api/v1/query?query=Q&time=T&timeout=D`` (or ``POST`` with the same parameters as a
  ``application/x-www-form-urlencoded`` body, which this client sends) → ``{"status": "success", "data":
  {"resultType": "vector", "result": [{"metric": {labels}, "value": [t, "v"]}, …]},
  "warnings": […]}``; ``resultType`` may also be ``scalar`` / ``string`` (``[t, "v"]``) or
  ``matrix``;
* ``GET /api/v1/query_range?query=Q&start=S&end=E&step=D`` → ``resultType: "matrix"``, each
  series with ``"values": [[t, "v"], …]``;
* an error is ``{"status": "error", "errorType": "bad_data", "error": "…"}`` with HTTP 400
  (bad query), 422 (cannot be executed), 503 (timeout / aborted);
* sample values are strings: a float, ``"NaN"``, ``"+Inf"``, ``"-Inf"``; ``warnings`` lists
  partial-response reasons (a store of Thanos/Mimir that did not answer).

Rules: every request has a timeout (connect and read) and passes ``timeout`` to the server;
connection errors, timeouts and HTTP 502/503/504 are retried with tenacity (``attempts``, short
exponential back-off); every failure is a :class:`PromError` naming the URL, the query and
the fix. The parser (:func:`parse_response`) never invents a value: a sample whose value is not
a number, or ``NaN``, is ``None`` (unknown), never 0; one malformed series is left out with a
reason in :attr:`QueryResult.problems`, the others are kept.
"""

from __future__ import annotations

import json
import math
import threading
from collections.abc import Mapping
from functools import lru_cache
from urllib.parse import quote, urlencode
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import orjson
import urllib3
from tenacity import Retrying, retry_if_exception, stop_after_attempt, wait_exponential

from seat_console.core.untrusted import InputError

MAX_REPLY_BYTES = 64 << 20
"""Largest reply accepted (64 MiB): 1,000 seats × 2 GPUs × 2 families is ~0.6 MB."""
MAX_SERIES = 200_000
"""Most series one reply may carry; above it the reply is refused (a query matching far more
than a fleet's seats is a mistake, and parsing it would stall the screen)."""
MAX_LABEL_CHARS = 1024
"""Longest label name or value kept; a longer one makes its series malformed."""


class PromError(Exception):
    """A query failed. ``kind``: ``unreachable``, ``timeout``, ``http``, ``auth``,
    ``bad-response`` (not JSON, wrong shape), ``query`` (``status: error``: ``error_type`` is
    Prometheus' ``errorType``). The message names the URL and the query and says what to do."""

    def __init__(self, kind: str, message: str, error_type: str | None = None) -> None:
        self.kind = kind
        self.error_type = error_type
        super().__init__(message)


class Series(NamedTuple):
    """One series of a result: ``labels`` (name → value, ``__name__`` included when the reply
    has it) and ``points``: ``(unix s, value)`` pairs, oldest first; a value is ``None`` when
    it is ``NaN`` or not a number (unknown, never 0). An instant vector has one point.
    Immutable (a named tuple: one of these is made per sample of a reply, ~10,000 a 1,000-seat
    refresh, and a tuple is ~3× cheaper to make than a frozen dataclass)."""

    labels: Mapping[str, str]
    points: tuple[tuple[float, float | None], ...]

    @property
    def value(self) -> float | None:
        """The last point's value (``None``: unknown or no point)."""
        return self.points[-1][1] if self.points else None

    @property
    def timestamp(self) -> float | None:
        """The last point's time (unix s), or ``None``."""
        return self.points[-1][0] if self.points else None


@dataclass(frozen=True)
class QueryResult:
    """A parsed reply: ``result_type`` (``vector`` / ``matrix`` / ``scalar`` / ``string``),
    ``series``, ``warnings`` (the server's partial-response warnings, shown to the user) and
    ``problems`` (one reason per series left out as malformed)."""

    query: str
    result_type: str
    series: tuple[Series, ...]
    warnings: tuple[str, ...] = ()
    problems: tuple[str, ...] = ()


def _clip(text: str, limit: int = 160) -> str:
    return text if len(text) <= limit else f"{text[:limit]}… ({len(text):,} characters)"


def parse_value(raw: Any) -> float | None:
    """A sample value as the API writes it (a string: ``"1.5"``, ``"NaN"``, ``"+Inf"``) →
    float, or ``None`` when it is NaN or not a number (unknown: never 0). Infinities are kept
    (``histogram_quantile`` returns ``+Inf`` legitimately)."""
    if isinstance(raw, bool) or not isinstance(raw, str | int | float):
        return None
    try:
        v = float(raw)
    except (ValueError, OverflowError):
        return None
    return None if math.isnan(v) else v


def _point(raw: Any) -> tuple[float, float | None]:
    if not isinstance(raw, list) or len(raw) != 2:
        raise ValueError("a sample is not a [time, \"value\"] pair")
    t = raw[0]
    if isinstance(t, bool) or not isinstance(t, int | float) or not math.isfinite(t):
        raise ValueError(f"sample time {_clip(repr(t), 40)} is not a finite number")
    return float(t), parse_value(raw[1])


def _labels(raw: Any) -> dict[str, str]:
    if not isinstance(raw, dict):
        raise ValueError("its metric is not an object of labels")
    for k, v in raw.items():
        if not isinstance(v, str):
            raise ValueError(f"label {_clip(str(k), 60)!r} is not a string")
        if len(k) > MAX_LABEL_CHARS or len(v) > MAX_LABEL_CHARS:
            raise ValueError(f"label {_clip(str(k), 60)!r} is longer than {MAX_LABEL_CHARS} "
                             "characters")
    return raw


_EMPTY: dict[str, str] = {}


def _vector_sample(item: Any, out: list[Series]) -> bool:
    """The fast path of one instant-vector sample: when ``item`` is well formed (an object,
    labels all strings within :data:`MAX_LABEL_CHARS`, ``value`` a ``[finite number,
    string]`` pair) append its :class:`Series` to ``out`` and return True; otherwise return
    False and leave it to the checks that name what is wrong. The same rules as
    :func:`_labels` / :func:`_point` / :func:`parse_value`, with the per-label work done by C
    built-ins (``max(map(len, …))``, ``str.join``) instead of a Python loop: the parse of a
    1,000-seat refresh (~10,000 samples) was ~60 % of the fleet core's CPU."""
    if type(item) is not dict:
        return False
    m = item.get("metric", _EMPTY)
    v = item.get("value")
    if type(m) is not dict or type(v) is not list or len(v) != 2:
        return False
    t, raw = v
    if type(t) is not float and type(t) is not int or type(raw) is not str:
        return False
    if m:
        try:
            if max(map(len, m.values())) > MAX_LABEL_CHARS or max(map(len, m)) > \
                    MAX_LABEL_CHARS:
                return False
            "".join(m.values())          # TypeError unless every value is a string
        except TypeError:
            return False
    try:
        t = float(t)
    except OverflowError:
        return False
    if not math.isfinite(t):
        return False
    try:
        x: float | None = float(raw)
    except (ValueError, OverflowError):
        x = None
    else:
        if x != x:                       # NaN: unknown
            x = None
    out.append(Series(m, ((t, x),)))
    return True


def _load(body: bytes | str, where: str) -> Any:
    """Parse the reply with orjson (strict JSON: no NaN/Infinity literals, integers within
    64 bits, nesting bounded by orjson's own limit — it raises, never recurses out), within
    :data:`MAX_REPLY_BYTES`; ~6× faster than the stdlib on a 0.6 MB reply of 1,000 seats.
    Raises :class:`InputError` naming ``where``."""
    if len(body) > MAX_REPLY_BYTES:
        raise InputError(where, f"{len(body):,} bytes is above the {MAX_REPLY_BYTES:,}-byte "
                                "limit")
    try:
        return orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        raise InputError(where, f"not valid JSON: {exc}") from None


def parse_response(body: bytes | str, query: str, what: str = "Prometheus") -> QueryResult:
    """Parse a ``/api/v1/query`` or ``/api/v1/query_range`` reply body.

    ``query``: the PromQL (named in every message); ``what``: the URL, for messages. Returns a
    :class:`QueryResult`. Raises :class:`PromError`: ``bad-response`` naming ``what`` and the
    query for a body that is not JSON (an HTML page from a proxy), not an object, without
    ``status``, or with a ``data`` of the wrong shape, or more than :data:`MAX_SERIES`
    series; ``query`` for ``status: "error"`` (with Prometheus' ``errorType`` and ``error``).
    A malformed series (labels not strings, a bad sample) is left out and named in
    ``problems``; the rest are kept.
    """
    where = f"{what}: query {_clip(query, 120)!r}"
    try:
        doc = _load(body, where)
    except InputError as exc:
        text = body[:200].decode("utf-8", "replace") if isinstance(body, bytes) else body[:200]
        hint = " (an HTML page: is the URL a Prometheus query API, not a proxy or UI?)" \
            if text.lstrip().startswith("<") else ""
        raise PromError("bad-response", f"{exc.what}: {exc.problem}{hint}") from None
    if not isinstance(doc, dict):
        raise PromError("bad-response", f"{where}: the reply is a JSON {type(doc).__name__}, "
                                        "not an object (is the URL a Prometheus query API?)")
    warnings = doc.get("warnings")
    warn = tuple(_clip(str(w), 300) for w in warnings) if isinstance(warnings, list) else ()
    status = doc.get("status")
    if status == "error":
        et = doc.get("errorType")
        et = et if isinstance(et, str) else None
        msg = doc.get("error")
        raise PromError("query", f"{where}: {et or 'error'}: "
                                 f"{_clip(msg if isinstance(msg, str) else repr(msg), 300)}",
                        error_type=et)
    if status != "success":
        raise PromError("bad-response", f"{where}: reply has status {_clip(repr(status), 40)}, "
                                        "neither 'success' nor 'error'")
    data = doc.get("data")
    if not isinstance(data, dict) or not isinstance(data.get("resultType"), str):
        raise PromError("bad-response", f"{where}: reply has no data.resultType")
    rtype = data["resultType"]
    result = data.get("result")
    if rtype in ("scalar", "string"):
        try:
            return QueryResult(query, rtype, (Series({}, (_point(result),)),), warn)
        except ValueError as exc:
            raise PromError("bad-response", f"{where}: {rtype} result: {exc}") from None
    if rtype not in ("vector", "matrix"):
        raise PromError("bad-response", f"{where}: unknown resultType {_clip(rtype, 40)!r}")
    if not isinstance(result, list):
        raise PromError("bad-response", f"{where}: data.result is not a list")
    if len(result) > MAX_SERIES:
        raise PromError("bad-response", f"{where}: {len(result):,} series is above the "
                                        f"{MAX_SERIES:,}-series limit (narrow the query)")
    series: list[Series] = []
    problems: list[str] = []
    fast = rtype == "vector"
    for n, item in enumerate(result):
        if fast and _vector_sample(item, series):
            continue
        try:
            if not isinstance(item, dict):
                raise ValueError("is not an object")
            labels = _labels(item.get("metric", {}))
            if rtype == "vector":
                if "value" not in item:
                    raise ValueError("has no value (a native histogram is not read here)")
                points: tuple = (_point(item["value"]),)
            else:
                raw = item.get("values")
                if not isinstance(raw, list):
                    raise ValueError("has no values list")
                points = tuple(_point(p) for p in raw)
            series.append(Series(labels, points))
        except ValueError as exc:
            problems.append(f"{where}: series {n}: {exc}")
    return QueryResult(query, rtype, tuple(series), warn, tuple(problems))


def promql_string(value: str) -> str:
    """``value`` as a PromQL double-quoted string literal (``"gpu-node-1:9469"``): JSON's
    escaping, which PromQL's Go-style string syntax reads back (``\\"``, ``\\\\``, ``\\n``,
    ``\\u00XX`` for control characters), with every other character left as UTF-8 — Go's
    ``strconv.Unquote`` refuses the surrogate-pair escapes ``json.dumps`` would write for a
    character beyond U+FFFF ("escape sequence is an invalid Unicode code point", Prometheus
    3.x on the lab). ``value`` must be valid Unicode (a label value read from Prometheus is)."""
    return json.dumps(value, ensure_ascii=False)


_FORM = {"Content-Type": "application/x-www-form-urlencoded", "Accept": "application/json"}
_ACCEPT = {"Accept": "application/json"}


@lru_cache(maxsize=256)
def _form_query(expr: str) -> str:
    """``query=<expr percent-encoded>`` (RFC 3986 unreserved characters kept), cached: the
    same queries are sent at every refresh."""
    return "query=" + quote(expr, safe="")


def _retryable(exc: BaseException) -> bool:
    if isinstance(exc, urllib3.exceptions.HTTPError):
        return True
    return isinstance(exc, _HTTPStatus) and exc.code in (502, 503, 504)


class _HTTPStatus(Exception):
    def __init__(self, code: int, body: bytes) -> None:
        self.code = code
        self.body = body


@dataclass
class PromClient:
    """Queries one Prometheus-compatible API at ``url`` (``http://host:9090``; a path prefix
    such as Mimir's ``/prometheus`` is kept).

    ``timeout_s``: per request (read), also sent as the query's ``timeout``; ``connect_s``:
    the TCP connect limit; ``attempts``: tries per query (retrying connection errors,
    timeouts, HTTP 502/503/504). ``requests`` counts HTTP requests sent (retries included),
    for the bounded-cost check. Thread-safe: one urllib3 connection pool for the server
    (keep-alive, up to 8 connections; its own retries and redirects off — tenacity retries
    here, and a redirect is an answer, not followed). urllib3, not httpx: ~0.3 ms of CPU a
    request against httpx's ~0.6 ms, and a 1,000-seat refresh sends 3–4 (docs/benchmarks.md).
    """

    url: str
    timeout_s: float = 5.0
    connect_s: float = 2.0
    attempts: int = 2
    requests: int = 0
    _pool: urllib3.connectionpool.HTTPConnectionPool | None = field(default=None, repr=False)
    _prefix: str = field(default="", repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def __post_init__(self) -> None:
        try:
            u = urllib3.util.parse_url(self.url)
        except (urllib3.exceptions.LocationParseError, ValueError):
            u = None
        if u is None or u.scheme not in ("http", "https") or not u.host or " " in self.url:
            raise PromError("config", f"{self.url!r} is not an http(s) URL of a Prometheus "
                                      "query API (e.g. http://127.0.0.1:9090)")
        if u.auth:
            raise PromError("config", "the Prometheus URL must not contain credentials")
        self._prefix = (u.path or "").rstrip("/")
        self.url = f"{u.scheme}://{u.netloc}{self._prefix}"
        self._pool = urllib3.connection_from_url(
            self.url, maxsize=8, block=False, retries=False,
            timeout=urllib3.Timeout(connect=self.connect_s, read=self.timeout_s),
            headers={"Accept": "application/json"})

    def close(self) -> None:
        """Close the connection pool."""
        if self._pool is not None:
            self._pool.close()

    def _get(self, path: str, params: dict[str, str] | None, query: str,
             form: bytes | None = None) -> QueryResult:
        full = f"{self.url}{path}"
        where = f"{full}: query {_clip(query, 120)!r}"

        def once() -> bytes:
            with self._lock:
                self.requests += 1
            assert self._pool is not None
            if form is not None:
                r = self._pool.urlopen("POST", self._prefix + path, body=form, headers=_FORM,
                                       redirect=False, assert_same_host=False)
            else:
                r = self._pool.urlopen("GET", self._prefix + path + "?" + urlencode(params or {}),
                                       headers=_ACCEPT, redirect=False, assert_same_host=False)
            body = r.data
            ctype = r.headers.get("content-type", "")
            if r.status >= 400 and not ctype.startswith("application/json"):
                raise _HTTPStatus(r.status, body)
            if r.status in (502, 503, 504):
                raise _HTTPStatus(r.status, body)
            return body

        try:
            for attempt in Retrying(stop=stop_after_attempt(max(1, self.attempts)),
                                    wait=wait_exponential(multiplier=0.1, max=1.0),
                                    retry=retry_if_exception(_retryable), reraise=True):
                with attempt:
                    body = once()
        except _HTTPStatus as exc:
            try:   # a JSON error body (503 query timeout) says more than the code
                parse_response(exc.body, query, full)
            except PromError as inner:
                if inner.kind == "query":
                    raise
            kind = "auth" if exc.code in (401, 403) else "http"
            text = exc.body[:200].decode("utf-8", "replace").replace("\n", " ")
            fix = " — check the URL's credentials/proxy" if kind == "auth" else ""
            raise PromError(kind, f"{where}: HTTP {exc.code}{fix}: {text}") from None
        except urllib3.exceptions.NewConnectionError as exc:   # a ConnectTimeoutError subclass
            raise PromError("unreachable", f"{where}: cannot reach {self.url}: {exc} (is "
                                           "Prometheus running at that address?)") from None
        except urllib3.exceptions.TimeoutError as exc:
            raise PromError("timeout", f"{where}: no answer within {self.timeout_s:g} s "
                                       f"({type(exc).__name__}); Prometheus slow or "
                                       "overloaded") from None
        except urllib3.exceptions.HTTPError as exc:
            raise PromError("unreachable", f"{where}: cannot reach {self.url}: {exc} (is "
                                           "Prometheus running at that address?)") from None
        return parse_response(body, query, full)

    def query(self, expr: str, at: float | None = None) -> QueryResult:
        """An instant query evaluated at ``at`` (unix s; ``None``: the server's now), sent as
        ``POST /api/v1/query`` with a form body (the API's own alternative to ``GET``, for
        long queries: a query naming a screen's ~100 seats is several KB). The encoded
        ``query=`` part is cached by the query's text: a 1,000-seat refresh sends ~15 KB of
        PromQL, and httpx's per-character URL quoting of it was ~¼ of the fleet core's CPU.
        Raises :class:`PromError`."""
        form = _form_query(expr) + f"&timeout={self.timeout_s:g}s"
        if at is not None:
            form += f"&time={at:.3f}"
        return self._get("/api/v1/query", None, expr, form=form.encode("ascii"))

    def query_range(self, expr: str, start: float, end: float, step_s: float) -> QueryResult:
        """A range query (``GET /api/v1/query_range``) from ``start`` to ``end`` (unix s) every
        ``step_s`` seconds. Raises :class:`PromError` (also for ``step_s <= 0`` or
        ``end < start``, before anything is sent)."""
        if not step_s > 0 or not end >= start:
            raise PromError("config", f"query_range {expr!r}: need step > 0 and end >= start "
                                      f"(got step {step_s}, {start}..{end})")
        params = {"query": expr, "start": f"{start:.3f}", "end": f"{end:.3f}",
                  "step": f"{step_s:g}", "timeout": f"{self.timeout_s:g}s"}
        return self._get("/api/v1/query_range", params, expr)


__all__ = ["MAX_SERIES", "PromClient", "PromError", "QueryResult", "Series", "parse_response",
           "parse_value", "promql_string"]
