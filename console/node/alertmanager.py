"""The Alertmanager v2 client: the one HTTP client of the node's Alertmanager, for the reader
(:mod:`seat_console.sources.silences`) and the writers (:mod:`seat_console.actions.node_ops`:
the hold's silence), with public read calls (:meth:`AlertmanagerClient.list_silences`,
:meth:`~AlertmanagerClient.get_silence`, :meth:`~AlertmanagerClient.version`) and public write
calls (:meth:`~AlertmanagerClient.post_silence`, :meth:`~AlertmanagerClient.delete_silence`),
its credentials (never logged: :func:`redact`) and the silence models it reads back.

API: Alertmanager's OpenAPI v2 (``api/v2/openapi.yaml``): ``GET /api/v2/silences``,
``GET /api/v2/silence/{id}``, ``POST /api/v2/silences`` (create, or update with ``id``),
``DELETE /api/v2/silence/{id}`` (expire), ``GET /api/v2/status``.
"""
from __future__ import annotations

import os
import re
import ssl
from collections.abc import Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any, Literal

import httpx
from pydantic import ConfigDict, Field, ValidationError, field_validator
from tenacity import (
    Retrying,
    retry_if_exception,
    stop_after_attempt,
    wait_exponential,
)

from seat_console.core.base import Frozen, utcnow
from seat_console.core.profile import AlertmanagerSpec, Matcher
from seat_console.core.untrusted import (
    InputError,
    aware_utc,
    compile_re2,
    get_dict,
    get_str,
    load_json,
)


SilenceState = Literal["pending", "active", "expired"]


_RE2_CACHE: dict[str, Any] = {}



ENV_USER = "SEAT_CONSOLE_AM_USER"


ENV_PASSWORD = "SEAT_CONSOLE_AM_PASSWORD"


ENV_TOKEN = "SEAT_CONSOLE_AM_TOKEN"


class AlertmanagerError(Exception):
    """An Alertmanager request failed or a write did not verify.

    ``kind``: ``"unreachable"``, ``"timeout"``, ``"auth"``, ``"tls"``, ``"http"``,
    ``"bad-response"``, ``"verify"``, ``"config"``; the message names the URL and the fix and
    never holds a secret.
    """

    def __init__(self, kind: str, message: str) -> None:
        self.kind = kind
        self.sent = True
        """``False`` when a write could not even connect (nothing was created)."""
        super().__init__(message)


# -- credentials ---------------------------------------------------------------------------------
class Credentials:
    """Alertmanager credentials; the secret is kept out of ``repr``/``str``.

    ``scheme``: ``"none"``, ``"basic"`` or ``"bearer"``. ``secrets()`` lists the secret strings
    (for :func:`redact`).
    """

    def __init__(self, scheme: str, user: str | None = None, secret: str | None = None,
                 origin: str = "") -> None:
        self.scheme = scheme
        self._user = user
        self._secret = secret
        self.origin = origin

    def __repr__(self) -> str:
        return f"Credentials(scheme={self.scheme!r}, origin={self.origin!r}, secret=<redacted>)"

    __str__ = __repr__

    def secrets(self) -> list[str]:
        """The secret values (password/token, and the user name) to scrub from any message."""
        return [s for s in (self._secret, self._user) if s]

    def httpx_auth(self) -> httpx.Auth | None:
        """The httpx auth object (``None`` for ``scheme = "none"``)."""
        if self.scheme == "basic":
            return httpx.BasicAuth(self._user or "", self._secret or "")
        if self.scheme == "bearer":
            return _BearerAuth(self._secret or "")
        return None


class _BearerAuth(httpx.Auth):
    def __init__(self, token: str) -> None:
        self._token = token

    def __repr__(self) -> str:
        return "_BearerAuth(<redacted>)"

    def auth_flow(self, request: httpx.Request):  # noqa: ANN201 - httpx generator protocol
        request.headers["Authorization"] = f"Bearer {self._token}"
        yield request


def load_credentials(spec: AlertmanagerSpec,
                     environ: Mapping[str, str] | None = None) -> Credentials:
    """Read the credentials ``spec.auth`` asks for.

    basic: ``$SEAT_CONSOLE_AM_USER`` + ``$SEAT_CONSOLE_AM_PASSWORD``, else ``credentials_file``
    holding ``user:password`` (first line); bearer: ``$SEAT_CONSOLE_AM_TOKEN``, else the file's
    first line. Raises :class:`AlertmanagerError` (kind ``config``) naming what is missing — never
    the value.
    """
    env = os.environ if environ is None else environ
    if spec.auth == "none":
        return Credentials("none")
    file_text: str | None = None
    if spec.credentials_file is not None:
        p = Path(spec.credentials_file).expanduser()
        try:
            file_text = (p.read_text("utf-8").splitlines() or [""])[0].strip()
        except OSError as exc:
            raise AlertmanagerError("config", f"alertmanager.credentials_file {p}: cannot read "
                                              f"({exc.strerror})") from None
    if spec.auth == "basic":
        if env.get(ENV_USER) and env.get(ENV_PASSWORD):
            return Credentials("basic", env[ENV_USER], env[ENV_PASSWORD], origin="environment")
        if file_text and ":" in file_text:
            user, _, pw = file_text.partition(":")
            return Credentials("basic", user, pw, origin=str(spec.credentials_file))
        raise AlertmanagerError("config", (
            f"alertmanager.auth = 'basic' needs ${ENV_USER} and ${ENV_PASSWORD}, or "
            "alertmanager.credentials_file holding 'user:password'"))
    if env.get(ENV_TOKEN):
        return Credentials("bearer", None, env[ENV_TOKEN], origin="environment")
    if file_text:
        return Credentials("bearer", None, file_text, origin=str(spec.credentials_file))
    raise AlertmanagerError("config", (
        f"alertmanager.auth = 'bearer' needs ${ENV_TOKEN} or alertmanager.credentials_file "
        "holding the token"))


def redact(text: str, secrets: Sequence[str]) -> str:
    """``text`` with every secret (of 3+ characters) replaced by ``<redacted>``."""
    for s in sorted(secrets, key=len, reverse=True):
        if s and len(s) >= 3:
            text = text.replace(s, "<redacted>")
    return text


# -- models ------------------------------------------------------------------------------------
class SilenceMatcher(Frozen):
    """One matcher of a silence: ``name`` (label), ``value``, ``is_regex``, ``is_equal``
    (``False`` = negative, ``!=`` / ``!~``). Alertmanager regexes are anchored (full match)."""

    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True)

    name: str
    value: str
    is_regex: bool = Field(alias="isRegex")
    is_equal: bool = Field(default=True, alias="isEqual")

    @classmethod
    def from_profile(cls, m: Matcher) -> SilenceMatcher:
        """From the profile's :class:`~seat_console.core.profile.Matcher`."""
        return cls.model_validate({"name": m.name, "value": m.value, "isRegex": m.is_regex,
                                   "isEqual": m.is_equal})

    def to_api(self) -> dict[str, Any]:
        """The v2 API form, every field present: ``{"name", "value", "isRegex", "isEqual"}``."""
        return {"name": self.name, "value": self.value, "isRegex": self.is_regex,
                "isEqual": self.is_equal}

    def matches(self, label_value: str | None) -> bool:
        """Whether this matcher matches a label value (``None`` = label absent, i.e. ``""``),
        as Alertmanager does (pkg/labels/matcher.go: a regex is Go ``regexp`` (RE2) syntax,
        anchored ``^(?:…)$``). Regexes are matched with RE2 (``google-re2``): linear time, so
        no pattern can hang the console, and RE2-only syntax such as ``\\z`` works.

        Raises :class:`~seat_console.core.untrusted.InputError` naming the matcher when its
        regex is not valid RE2 (then whether it matches is unknown, not False)."""
        v = label_value or ""
        if self.is_regex:
            hit = _compiled(self.value, str(self)).search(v) is not None
        else:
            hit = v == self.value
        return hit if self.is_equal else not hit

    def __str__(self) -> str:
        op = {(False, True): "=", (False, False): "!=", (True, True): "=~",
              (True, False): "!~"}[(self.is_regex, self.is_equal)]
        return f'{self.name}{op}"{self.value}"'


_API_NAMES = {"starts_at": "startsAt", "ends_at": "endsAt", "updated_at": "updatedAt",
              "created_by": "createdBy", "state": "status.state"}
"""Model field → the API's name for it (error messages name what the reply calls it)."""


def _compiled(pattern: str, what: str) -> Any:
    """The anchored RE2 program of a matcher value (cached; at most 1,024 kept)."""
    prog = _RE2_CACHE.get(pattern)
    if prog is None:
        prog = compile_re2(pattern, f"matcher {what}", anchored=True)
        if len(_RE2_CACHE) >= 1024:
            _RE2_CACHE.clear()
        _RE2_CACHE[pattern] = prog
    return prog


class Silence(Frozen):
    """A silence as Alertmanager returns it; times are aware UTC (a time without an offset is
    refused: it would be the wall clock of an unknown zone).

    ``state``: ``pending`` (starts later), ``active``, ``expired``. ``exact``: its matchers are
    exactly the profile's (the hold's own silence); set by the source. ``match_unknown``: why
    it cannot be told whether the silence concerns the seat (a regex matcher RE2 refuses), else
    ``None``; set by the source.
    """

    id: str
    state: SilenceState
    matchers: tuple[SilenceMatcher, ...]
    starts_at: datetime
    ends_at: datetime
    updated_at: datetime | None = None
    created_by: str = ""
    comment: str = ""
    exact: bool = False
    match_unknown: str | None = None

    @field_validator("starts_at", "ends_at", "updated_at", mode="before")
    @classmethod
    def _rfc3339_text(cls, v: object) -> object:
        if v is not None and not isinstance(v, str | datetime):
            raise ValueError(f"must be an RFC 3339 time string, got {type(v).__name__}")
        return v

    @field_validator("starts_at", "ends_at", "updated_at")
    @classmethod
    def _aware(cls, v: datetime | None) -> datetime | None:
        if v is None:
            return None
        try:
            return aware_utc(v, "time")
        except InputError as exc:
            raise ValueError(exc.problem) from None

    def ends_in_s(self, now: datetime | None = None) -> float | None:
        """Seconds until it ends (``None`` once expired)."""
        if self.state == "expired":
            return None
        return (self.ends_at - (now or utcnow())).total_seconds()

    def starts_in_s(self, now: datetime | None = None) -> float | None:
        """Seconds until a pending silence starts (``None`` unless pending)."""
        if self.state != "pending":
            return None
        return (self.starts_at - (now or utcnow())).total_seconds()

    @classmethod
    def from_api(cls, d: Mapping[str, Any], what: str = "Alertmanager") -> Silence:
        """Parse one ``gettableSilence`` (``what`` names the reply, e.g.
        ``GET /api/v2/silences``). Raises :class:`AlertmanagerError` (``bad-response``) naming
        ``what``, the silence ID and the field for a wrong shape or type, a missing field, a
        time that is not aware RFC 3339 text."""
        sid = get_str(d, "id", max_len=200)
        where = f"{what}: silence {sid!r}" if sid else f"{what}: silence object"
        if not isinstance(d, Mapping):
            raise AlertmanagerError("bad-response", f"{where}: is a JSON {type(d).__name__}, "
                                                    "not an object")
        raw_matchers = d.get("matchers")
        if not isinstance(raw_matchers, list) or not all(isinstance(m, Mapping)
                                                         for m in raw_matchers):
            raise AlertmanagerError("bad-response", f"{where}: matchers must be a list of "
                                                    "objects")
        try:
            return cls(
                id=d.get("id"), state=get_dict(d, "status").get("state"),
                matchers=tuple(SilenceMatcher.model_validate(
                    {"isEqual": True, **m}) for m in raw_matchers),
                starts_at=d.get("startsAt"), ends_at=d.get("endsAt"),
                updated_at=d.get("updatedAt"),
                created_by=d.get("createdBy", ""), comment=d.get("comment", ""))
        except ValidationError as exc:
            first = exc.errors()[0]
            loc = ".".join(_API_NAMES.get(str(x), str(x)) for x in first["loc"]) or "(object)"
            raise AlertmanagerError("bad-response", (
                f"{where}: field {loc}: {first['msg']} ({exc.error_count()} problem(s))"
            )) from None
        except (KeyError, TypeError, ValueError) as exc:
            raise AlertmanagerError("bad-response", f"{where}: {exc}") from None


# -- client ------------------------------------------------------------------------------------
def _retryable(exc: BaseException) -> bool:
    if isinstance(exc, httpx.TransportError):
        return True
    return isinstance(exc, httpx.HTTPStatusError) and exc.response.status_code in (502, 503, 504)


class AlertmanagerClient:
    """A small Alertmanager v2 client.

    ``spec``: the profile's ``[alertmanager]``; ``credentials``: default from
    :func:`load_credentials`; ``timeout_s``: per request; ``read_attempts``: tries for an
    idempotent GET. Raises :class:`AlertmanagerError` (kind ``config``) for a URL carrying
    credentials (put them in the environment or a file instead) or missing credentials.
    """

    def __init__(self, spec: AlertmanagerSpec, *, credentials: Credentials | None = None,
                 timeout_s: float = 5.0, read_attempts: int = 3,
                 environ: Mapping[str, str] | None = None) -> None:
        url = httpx.URL(str(spec.url))
        if url.username or url.password:
            raise AlertmanagerError("config", (
                "alertmanager.url must not contain credentials (user:password@); use auth = "
                "'basic' with the environment or credentials_file"))
        self.url = str(url).rstrip("/")
        self.spec = spec
        self.credentials = credentials or load_credentials(spec, environ)
        self.read_attempts = read_attempts
        verify: ssl.SSLContext | bool
        if not spec.verify_tls:
            verify = False
        elif spec.ca_file is not None:
            verify = ssl.create_default_context(cafile=str(Path(spec.ca_file).expanduser()))
        else:
            verify = True
        self.tls_verify = spec.verify_tls
        self._silences_last: tuple[bytes, tuple[Any, ...], tuple[str, ...]] | None = None
        """The last ``GET /api/v2/silences`` body and what it parsed to (one tuple, replaced
        whole: safe to read from another thread)."""
        self._client = httpx.Client(
            base_url=self.url, auth=self.credentials.httpx_auth(), verify=verify,
            timeout=httpx.Timeout(timeout_s, connect=min(timeout_s, 3.0)),
            headers={"Accept": "application/json"}, follow_redirects=False)

    def __repr__(self) -> str:
        return f"AlertmanagerClient(url={self.url!r}, auth={self.credentials.scheme!r})"

    def close(self) -> None:
        """Close the HTTP connection pool."""
        self._client.close()

    # -- plumbing -------------------------------------------------------------------------
    def _error(self, exc: BaseException, what: str) -> AlertmanagerError:
        secrets = self.credentials.secrets()
        if isinstance(exc, httpx.HTTPStatusError):
            code = exc.response.status_code
            body = exc.response.text.strip().replace("\n", " ")[:300]
            if code in (401, 403):
                kind, msg = "auth", (f"{what}: HTTP {code} from {self.url} — check alertmanager."
                                     "auth and the credentials (environment or credentials_file)")
            else:
                kind, msg = "http", f"{what}: HTTP {code} from {self.url}: {body}"
        elif isinstance(exc, httpx.TimeoutException):
            kind, msg = "timeout", (f"{what}: {self.url} did not answer in time "
                                    f"({type(exc).__name__})")
        elif isinstance(exc, httpx.ConnectError) and "CERTIFICATE_VERIFY_FAILED" in str(exc):
            kind, msg = "tls", (f"{what}: TLS certificate of {self.url} not trusted — set "
                                "alertmanager.ca_file (verification stays on)")
        elif isinstance(exc, httpx.TransportError):
            kind, msg = "unreachable", f"{what}: cannot reach {self.url}: {exc}"
        else:
            kind, msg = "bad-response", f"{what}: {type(exc).__name__}: {exc}"
        return AlertmanagerError(kind, redact(msg, secrets))

    def _get(self, path: str, what: str) -> Any:
        return self._json(self._get_bytes(path, what), path, what)

    def _json(self, raw: bytes, path: str, what: str) -> Any:
        """``raw`` (``GET path``'s body) as JSON. Raises :class:`AlertmanagerError`
        (``bad-response``, named after ``what``) when it is not (:func:`load_json`'s rules)."""
        try:
            return load_json(raw, f"GET {path} from {self.url}")
        except ValueError as exc:
            raise self._error(exc, what) from None

    def _get_bytes(self, path: str, what: str) -> bytes:
        """``GET path``'s body (retried like every read). Raises :class:`AlertmanagerError`
        named after ``what``."""
        def once() -> bytes:
            r = self._client.get(path)
            r.raise_for_status()
            return r.content

        try:
            for attempt in Retrying(stop=stop_after_attempt(self.read_attempts),
                                    wait=wait_exponential(multiplier=0.2, max=2.0),
                                    retry=retry_if_exception(_retryable), reraise=True):
                with attempt:
                    return once()
        except (httpx.HTTPError, ValueError) as exc:
            raise self._error(exc, what) from None
        raise AssertionError("unreachable")  # pragma: no cover

    # -- reads ----------------------------------------------------------------------------
    def version(self) -> str | None:
        """Alertmanager's version from ``GET /api/v2/status`` (``None`` if absent)."""
        data = self._get("/api/v2/status", "read status")
        return get_str(get_dict(data, "versionInfo"), "version", max_len=200)

    def list_silences(self) -> list[Silence]:
        """Every silence Alertmanager holds (``GET /api/v2/silences``). Raises
        :class:`AlertmanagerError` for a reply that is not a list, or for the first silence
        that cannot be parsed (see :meth:`list_silences_tolerant` for the source's reading)."""
        good, bad = self.list_silences_tolerant()
        if bad:
            raise AlertmanagerError("bad-response", bad[0])
        return good

    def list_silences_tolerant(self) -> tuple[list[Silence], list[str]]:
        """``(silences, reasons)``: every silence that parses, and one reason per silence object
        that does not (named by its ID). Raises :class:`AlertmanagerError` only when the reply
        as a whole is unusable (not JSON, not a list, unreachable…)."""
        raw = self._get_bytes("/api/v2/silences", "list silences")
        last = self._silences_last
        if last is not None and last[0] == raw:
            # the same answer as last time (Alertmanager computes each silence's state when
            # asked, so an expiry changes the body): the same silences, not parsed again
            return list(last[1]), list(last[2])
        data = self._json(raw, "/api/v2/silences", "list silences")
        if not isinstance(data, list):
            raise AlertmanagerError("bad-response", f"GET /api/v2/silences from {self.url} "
                                                    f"returned a JSON {type(data).__name__}, "
                                                    "not a list")
        good: list[Silence] = []
        bad: list[str] = []
        for d in data:
            try:
                good.append(Silence.from_api(d, "GET /api/v2/silences"))
            except AlertmanagerError as exc:
                bad.append(str(exc))
        self._silences_last = (raw, tuple(good), tuple(bad))
        return good, bad

    def get_silence(self, silence_id: str) -> Silence:
        """One silence by ID (``GET /api/v2/silence/{id}``)."""
        check_silence_id(silence_id)
        return Silence.from_api(self._get(f"/api/v2/silence/{silence_id}",
                                          f"read silence {silence_id}"),
                                f"GET /api/v2/silence/{silence_id}")

    # -- writes (sent once, never retried: a repeated POST would create a second silence) ------
    def post_silence(self, body: Mapping[str, Any], what: str = "create silence") -> str:
        """``POST /api/v2/silences`` with ``body`` (a ``postableSilence``: ``matchers`` with
        all four fields, ``startsAt``, ``endsAt``, ``createdBy``, ``comment``; with ``id`` it
        updates that silence). Returns the ``silenceID`` of the response (Alertmanager may issue
        a new one on update). Raises :class:`AlertmanagerError` named after ``what``; its
        attribute ``sent`` is ``False`` when no connection was made (nothing was created), else
        ``True``. The caller verifies by reading the silence back (:meth:`get_silence`)."""
        try:
            r = self._client.post("/api/v2/silences", json=dict(body))
            r.raise_for_status()
            return str(r.json()["silenceID"])
        except (httpx.ConnectError, httpx.ConnectTimeout) as exc:
            err = self._error(exc, what)
            err.sent = False
            raise err from None
        except (httpx.HTTPError, ValueError, KeyError, TypeError) as exc:
            err = self._error(exc, what)
            err.sent = True
            raise err from None

    def delete_silence(self, silence_id: str) -> None:
        """``DELETE /api/v2/silence/{silence_id}`` (expires it; the silence stays, state
        ``expired``). Raises :class:`AlertmanagerError` (and ``ValueError`` for an ID that is
        not one); the caller verifies by reading it back."""
        check_silence_id(silence_id)
        try:
            r = self._client.delete(f"/api/v2/silence/{silence_id}")
            r.raise_for_status()
        except httpx.HTTPError as exc:
            raise self._error(exc, f"expire silence {silence_id}") from None


def check_silence_id(silence_id: str) -> None:
    """Refuse text that is not an Alertmanager silence ID (a UUID: letters, digits and ``-``,
    at most 64) before it goes into a URL path; raises ``ValueError`` naming it."""
    if not re.fullmatch(r"[A-Za-z0-9-]{1,64}", silence_id or ""):
        raise ValueError(f"{silence_id!r} is not a silence ID")


def api_time(t: datetime) -> str:
    """RFC 3339 in UTC with a ``Z``, millisecond precision (what Alertmanager stores)."""
    from datetime import UTC

    return t.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


__all__ = ["AlertmanagerClient", "AlertmanagerError", "Credentials", "ENV_PASSWORD", "ENV_TOKEN",
           "ENV_USER", "Silence", "SilenceMatcher", "SilenceState", "api_time", "check_silence_id",
           "load_credentials", "redact"]
