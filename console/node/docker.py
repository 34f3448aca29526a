"""The docker engine, reached through the docker SDK: the one client factory
(:func:`docker_client`) and the engine's event stream (:class:`EventWatcher`).

Every docker client of the console is built by :func:`docker_client` (the containers source,
the GPU source's container names, the seat source, the node context, the probe's interference
monitor, the swap and backport runbooks through the context), with the API version negotiated
(``version="auto"``: the SDK's default, 1.44, is newer than what a Debian 12 engine — 20.10,
API 1.41 — speaks).

The engine's event stream (``GET /events``, types container and image) runs in a background
thread (:class:`EventWatcher`): it reconnects after a drop with ``since`` = the last event seen
(events the engine still holds in its in-memory ring are replayed; duplicates are dropped), keeps
a bounded list of recent changes (actor, action, time) and is closed cleanly by ``close()``.
Actions register what they are about to do with :meth:`EventWatcher.expect` (through the app's
:class:`~seat_console.node.context.NodeContext`, ``context.expect``); events that match an
expectation are marked ``by_console = True``. Across processes the journal is the truth: with an
``attribute`` callback (the context gives one reading the journal,
:mod:`seat_console.node.attribution`) an event on a container that a journaled runbook step (any
console process on this state dir: a ``swap`` in another shell) was acting on at that moment is
the console's too, and ``by`` names that run. Every other change was made by someone else — the
basis of interference detection (``shared/DESIGN.md``, rule 4).

The SDK (``docker``, ``requests``, ``urllib3``: ~6 MiB RSS) is imported only when a client is
built.
"""

from __future__ import annotations

import os
import re
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from seat_console.core.base import Frozen, utcnow
from seat_console.core.untrusted import get_dict

if TYPE_CHECKING:
    import docker


def docker_client(base_url: str | None = None, *, timeout_s: float = 5.0) -> docker.DockerClient:
    """A new docker SDK client (the caller closes it) on ``base_url`` — an engine URL such as
    ``unix:///var/run/docker.sock`` — else on :func:`resolve_docker_host` (``$DOCKER_HOST``,
    then :data:`DEFAULT_DOCKER_HOST`), API version negotiated, ``timeout_s`` per API call
    (whole seconds, at least 1). Raises ``docker.errors.DockerException`` when the URL is
    malformed, or when the engine cannot be reached: ``version="auto"`` asks ``GET /version``
    as the client is built.

    The client's ``requests`` session reads nothing from the environment (``trust_env``
    off: no ``*_PROXY``, ``.netrc`` or CA-bundle variables — the docker SDK's own TLS settings
    still apply): the engine is the node's own, and the per-call look-up of the environment's
    proxy settings was ~0.2 ms of CPU of every Engine API call (a containers read of four
    calls: 4.2-4.4 → 3.3-3.8 ms on the lab; issue 33, ``docs/benchmarks.md``)."""
    import docker

    client = docker.DockerClient(base_url=base_url or resolve_docker_host(None),
                                 version="auto", timeout=int(max(1, timeout_s)))
    client.api.trust_env = False
    return client


DEFAULT_DOCKER_HOST = "unix:///var/run/docker.sock"
"""The engine used when neither ``node.docker_host`` nor ``$DOCKER_HOST`` is set."""


RECENT_CHANGES = 200
"""How many engine events the recent-changes list keeps (oldest dropped first)."""


IGNORED_ACTIONS = ("exec_create", "exec_start", "exec_die", "exec_detach", "top", "resize",
                   "attach", "detach", "archive-path")
"""Event actions that do not change a container's state (``docker exec`` — which the console
itself uses to reach a node over the docker-exec transport —, ``docker top``, terminal resizes,
``docker cp`` out of a container). They are counted (``ignored``) but not kept as changes;
Docker reports exec actions with the command appended (``exec_start: /bin/sh …``), so prefixes
are matched."""


WATCHED_ACTIONS = ("create", "start", "restart", "stop", "kill", "die", "oom", "pause",
                   "unpause", "destroy", "rename", "update", "health_status", "commit", "copy",
                   "export", "extract-to-dir", "prune",
                   "pull", "push", "tag", "untag", "delete", "import", "load", "save")
"""The event actions asked of the engine (its ``event`` filter): every container and image
action Docker's event reference lists (Engine API ``GET /events``, "Containers report these
events", "Images report these events", plus ``docker cp``'s ``extract-to-dir``) except
:data:`IGNORED_ACTIONS`. The engine then never sends the ``exec_*`` events of a node reached by
``docker exec`` — the console's own timer reads and, on the lab, the exporter's, ~8 events a
second that this process decoded and dropped (0.1 % of a core: issue 33,
``docs/benchmarks.md``). With ``health_status`` among them the engine matches each as a prefix
(moby ``daemon/events/filter.go``: ``health_status: healthy`` is kept; no name here is a prefix of
an ignored action). An action Docker adds later and this list lacks is not seen: add it here."""


class ContainerEvent(Frozen):
    """One engine event: ``at`` (UTC, ns precision kept in ``time_nano``), ``type``
    (``container``/``image``), ``action`` (``start``, ``stop``, ``die``, ``kill``, ``restart``,
    ``health_status: healthy``, ``pull``, ``tag``…), ``actor_id``, ``actor_name`` (container
    name or image reference), ``image``, ``exit_code`` (for ``die``), ``by_console`` (matched an
    expectation the console registered before acting, or a journaled runbook step acting on the
    container then), ``by`` (who, when ``by_console``: the journaled run — ``swap run swap-…,
    step 'stop resident' (journal seq 12, alice@node1)`` — or ``this console``)."""

    at: datetime
    time_nano: int
    type: str
    action: str
    actor_id: str
    actor_name: str | None = None
    image: str | None = None
    exit_code: int | None = None
    by_console: bool = False
    by: str | None = None


class EventStreamStatus(Frozen):
    """Health of the event stream: ``connected``; ``since`` (UTC; start of the watched window);
    ``reconnects`` (count after drops); ``last_error`` (why it last dropped, ``None`` if never);
    ``events_seen``: changes kept; ``ignored``: events of :data:`IGNORED_ACTIONS` dropped."""

    connected: bool
    since: datetime
    reconnects: int
    last_error: str | None
    events_seen: int
    ignored: int = 0

    @property
    def connecting(self) -> bool:
        """Not connected yet and nothing went wrong: the stream's first connection is still
        being made (the docker SDK loading, the engine's first answer: seconds on a busy
        node). Every drop or failed attempt sets ``last_error``, so a stream that was lost
        is never "connecting"."""
        return not self.connected and self.last_error is None

    @property
    def word(self) -> str:
        """``connected``, ``connecting…`` or ``DISCONNECTED`` (the panels' and ``status``'s
        word for the stream)."""
        return ("connected" if self.connected else "connecting…" if self.connecting
                else "DISCONNECTED")


# -- pure helpers ----------------------------------------------------------------------------
def find_container(client: Any, name_or_id: str) -> Any | None:
    """The container ``name_or_id`` as the docker SDK's ``client.containers.get`` returns it
    (a ``Container``, its ``attrs`` read now), or ``None`` when the engine has none by that name
    or ID. Other errors (``APIError``, a connection error) are raised as the SDK raises them.
    The one lookup every action and gate uses (``docker inspect NAME``)."""
    from docker.errors import NotFound

    try:
        return client.containers.get(name_or_id)
    except NotFound:
        return None


def container_running(c: Any | None) -> bool:
    """Whether container ``c`` (:func:`find_container`'s answer) runs: its
    ``State.Running`` (``docker inspect -f '{{.State.Running}}'``); ``False`` for ``None``."""
    return c is not None and bool((c.attrs.get("State") or {}).get("Running"))


def parse_docker_time(value: str | None) -> datetime | None:
    """A docker RFC 3339 time with nanoseconds (``2026-11-29T13:00:00.123456789Z``) → UTC
    datetime (µs precision); the zero time ``0001-01-01T00:00:00Z`` and empty → ``None``.
    Raises :class:`ValueError` naming the value for anything else (month 13, offset +99:99)."""
    if not value or value.startswith("0001-01-01"):
        return None
    shown = value if len(value) <= 60 else f"{value[:60]}…"
    m = _TIME_RE.match(value.strip())
    if m is None:
        raise ValueError(f"not a docker RFC 3339 time: {shown!r}")
    frac = (m.group(2) or ".0")[1:7].ljust(6, "0")
    tz = "+00:00" if m.group(3) == "Z" else m.group(3)
    try:
        return datetime.fromisoformat(f"{m.group(1)}.{frac}{tz}").astimezone(UTC)
    except (ValueError, OverflowError) as exc:
        raise ValueError(f"docker time {shown!r} is not a valid time ({exc})") from None


def time_or_none(value: Any) -> datetime | None:
    """:func:`parse_docker_time` for an inspect field; ``None`` (unknown) for a value that is
    not a string or not a valid docker time."""
    if not isinstance(value, str):
        return None
    try:
        return parse_docker_time(value)
    except ValueError:
        return None


_TIME_RE = re.compile(r"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(\.\d+)?(Z|[+-]\d\d:\d\d)$")


def event_from_api(ev: Mapping[str, Any]) -> ContainerEvent | None:
    """One decoded ``/events`` object → :class:`ContainerEvent` (``None`` for a shape it does not
    understand). Uses ``timeNano``, ``Type``, ``Action``, ``Actor.ID``, ``Actor.Attributes``."""
    try:
        tn = int(ev.get("timeNano") or int(ev["time"]) * 1_000_000_000)
        if tn <= 0:
            return None  # no time: not an event this console can place
        actor = get_dict(ev, "Actor")
        attrs = get_dict(actor, "Attributes")
        code = attrs.get("exitCode")
        return ContainerEvent(
            at=datetime.fromtimestamp(tn / 1e9, UTC), time_nano=tn,
            type=ev.get("Type") or ev.get("type") or "unknown",
            action=ev.get("Action") or ev.get("status") or "unknown",
            actor_id=actor.get("ID") or ev.get("id") or "",
            actor_name=attrs.get("name"), image=attrs.get("image") or ev.get("from"),
            exit_code=(int(code) if isinstance(code, str | int) and not isinstance(code, bool)
                       and str(code).lstrip("-").isascii() and str(code).lstrip("-").isdigit()
                       and len(str(code)) <= 12 else None))
    except (KeyError, TypeError, ValueError, AttributeError, OverflowError, OSError):
        return None


# -- event stream --------------------------------------------------------------------------
class _Expectation:
    def __init__(self, actor: str, action: str, until: float, label: str | None) -> None:
        self.actor, self.action, self.until, self.label = actor, action, until, label


Attribute = Callable[[ContainerEvent], str | None]
"""``attribute(event) -> label | None``: who in the console made ``event`` (a journaled run),
``None`` when no console run was acting on that container then. Called on the watcher's
thread; it must not raise (an exception counts as ``None``)."""


class EventWatcher:
    """Background reader of the engine's event stream, with reconnects and a bounded history.

    ``make_client``: returns a new :class:`docker.DockerClient` (called on every (re)connect);
    ``maxlen``: events kept; ``types``: event types watched; ``backoff_s``: (first, max) delay
    between reconnect attempts; ``attribute``: :data:`Attribute` (the journal's view of the
    console's own runs, also other processes'), asked for every event; an event it names is
    ``by_console`` with ``by`` = its label. Start with :meth:`start`, stop with :meth:`close`
    (joins the thread). Thread-safe: :meth:`expect`, :meth:`changes`, :meth:`status`.
    """

    def __init__(self, make_client: Callable[[], docker.DockerClient], *,
                 maxlen: int = RECENT_CHANGES, types: tuple[str, ...] = ("container", "image"),
                 backoff_s: tuple[float, float] = (0.5, 10.0),
                 since: datetime | None = None, attribute: Attribute | None = None) -> None:
        self._make_client = make_client
        self._attribute = attribute
        self._types = types
        self._backoff = backoff_s
        self._events: deque[ContainerEvent] = deque(maxlen=maxlen)
        self._seen: deque[tuple[int, str, str]] = deque(maxlen=maxlen * 2)
        self._expect: list[_Expectation] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._stream: Any = None
        self._client: docker.DockerClient | None = None
        self._thread: threading.Thread | None = None
        self._since = since or utcnow()
        self._last_nano: int | None = None
        self._connected = False
        self._reconnects = 0
        self._connects = 0
        self._last_error: str | None = None
        self._count = 0
        self._ignored = 0
        self._reconnect_requested = False

    # -- lifecycle ----------------------------------------------------------------------------
    def start(self) -> EventWatcher:
        """Start the reader thread (idempotent)."""
        if self._thread is None:
            self._thread = threading.Thread(target=self._loop, name="docker-events", daemon=True)
            self._thread.start()
        return self

    def close(self, timeout_s: float = 5.0) -> None:
        """Stop the thread: close the stream (unblocks the read) and join it."""
        self._stop.set()
        with self._lock:
            stream, client = self._stream, self._client
        for obj in (stream, client):
            if obj is not None:
                try:
                    obj.close()
                except Exception:  # noqa: BLE001 - closing a dead connection may fail; fine
                    pass
        if self._thread is not None:
            self._thread.join(timeout_s)

    def reconnect(self) -> None:
        """Drop the current connection; the thread reconnects after its back-off with
        ``since`` = the last event seen (for a stream suspected to have stalled)."""
        with self._lock:
            stream = self._stream
            self._reconnect_requested = True
        if stream is not None:
            try:
                stream.close()
            except Exception:  # noqa: BLE001 - already closed
                pass

    @property
    def alive(self) -> bool:
        """Whether the reader thread is running."""
        return self._thread is not None and self._thread.is_alive()

    def _since_param(self) -> str:
        if self._last_nano is not None:
            s, ns = divmod(self._last_nano, 1_000_000_000)
            return f"{s}.{ns:09d}"
        return f"{self._since.timestamp():.9f}"

    def _loop(self) -> None:
        delay = self._backoff[0]
        while not self._stop.is_set():
            try:
                client = self._make_client()
                with self._lock:
                    self._client = client
                stream = client.api.events(since=self._since_param(),
                                           filters={"type": list(self._types),
                                                    "event": list(WATCHED_ACTIONS)},
                                           decode=True)
                with self._lock:
                    self._stream = stream
                    stopped = self._stop.is_set()
                if stopped:
                    # close() ran while this thread was connecting: it found no stream to
                    # close, so nothing would unblock the read below. (Checked under the lock
                    # close() reads the stream under: one of the two always sees the other.)
                    break
                with self._lock:
                    self._connected = True
                    if self._connects:
                        self._reconnects += 1
                    self._connects += 1
                delay = self._backoff[0]
                for raw in stream:
                    if self._stop.is_set():
                        break
                    self._handle(raw)
                if not self._stop.is_set():
                    self._last_error = ("reconnect requested" if self._reconnect_requested
                                        else "the engine closed the event stream")
                    self._reconnect_requested = False
            except Exception as exc:  # noqa: BLE001 - any failure → reconnect with back-off
                if not self._stop.is_set():
                    self._last_error = f"{type(exc).__name__}: {exc}"
            finally:
                with self._lock:
                    self._connected = False
                    stream, self._stream = self._stream, None
                    client, self._client = self._client, None
                for obj in (stream, client):
                    if obj is not None:
                        try:
                            obj.close()
                        except Exception:  # noqa: BLE001
                            pass
            if self._stop.wait(delay):
                break
            delay = min(delay * 2, self._backoff[1])

    def _handle(self, raw: Mapping[str, Any]) -> None:
        ev = event_from_api(raw)
        if ev is None:
            return
        if ev.action.split(":", 1)[0].strip() in IGNORED_ACTIONS:
            with self._lock:
                self._ignored += 1
            return
        key = (ev.time_nano, ev.actor_id, ev.action)
        expected: _Expectation | None = None
        with self._lock:
            if key in self._seen:
                return  # replayed after a reconnect with since=
            self._seen.append(key)
            now = time.monotonic()
            self._expect = [e for e in self._expect if e.until >= now]
            expected = next((e for e in self._expect if e.action == ev.action
                             and e.actor in (ev.actor_name, ev.actor_id)), None)
        label: str | None = None
        if self._attribute is not None and ev.type == "container":
            try:   # outside the lock: it reads the journal (SQLite, a few ms)
                label = self._attribute(ev)
            except Exception:  # noqa: BLE001 - attribution failing = not attributed
                label = None
        if expected is not None or label is not None:
            ev = ev.model_copy(update={"by_console": True, "by": label or (
                expected.label if expected is not None and expected.label
                else "this console")})
        with self._lock:
            self._events.append(ev)
            self._count += 1
            self._last_nano = ev.time_nano if self._last_nano is None else max(
                self._last_nano, ev.time_nano)

    # -- readers ------------------------------------------------------------------------------
    def expect(self, actor: str, actions: Iterable[str], within_s: float = 120.0,
               label: str | None = None) -> None:
        """Register that the console is about to make ``actions`` on ``actor`` (container name or
        ID): matching events in the next ``within_s`` seconds are marked ``by_console`` (``by``:
        the journal's label for the run if it has one, else ``label``, else ``this
        console``)."""
        until = time.monotonic() + within_s
        with self._lock:
            self._expect.extend(_Expectation(actor, a, until, label) for a in actions)

    def changes(self, since: datetime | None = None) -> tuple[ContainerEvent, ...]:
        """Recent events (oldest first), optionally only those at or after ``since`` (UTC)."""
        with self._lock:
            evs = tuple(self._events)
        return evs if since is None else tuple(e for e in evs if e.at >= since)

    @property
    def changes_seen(self) -> int:
        """Changes kept so far (events not of :data:`IGNORED_ACTIONS`, replays dropped): a
        reader that remembers it knows, without a copy of the events, whether anything changed
        since (the TUI re-reads its container sources when it moved)."""
        with self._lock:
            return self._count

    def foreign_changes(self, since: datetime | None = None) -> tuple[ContainerEvent, ...]:
        """Recent events the console did not announce with :meth:`expect`."""
        return tuple(e for e in self.changes(since) if not e.by_console)

    def status(self) -> EventStreamStatus:
        """A snapshot of the stream's health."""
        with self._lock:
            return EventStreamStatus(connected=self._connected, since=self._since,
                                     reconnects=self._reconnects, last_error=self._last_error,
                                     events_seen=self._count, ignored=self._ignored)


# -- source --------------------------------------------------------------------------------
def missing_socket(docker_host: str) -> str | None:
    """Why the engine at ``docker_host`` cannot be there, without importing the docker SDK:
    for a ``unix://`` URL whose socket file does not exist, the sentence (naming the path and
    the fix); else ``None`` (a TCP/SSH URL, or a socket that exists, is left to the SDK).

    The console does not import the SDK (``docker``, ``requests``, ``urllib3``: ~6 MiB RSS,
    ~0.2 s on the GPU machine) for a node that has no docker engine; the check costs one
    ``stat`` per poll and a socket that appears is used at the next poll."""
    path = absent_socket(docker_host)
    if path is None:
        return None
    return (f"no socket at {path} (is dockerd running on this machine? set node.docker_host "
            f"or $DOCKER_HOST to reach another engine)")


def absent_socket(docker_host: str) -> str | None:
    """The socket path of a ``unix://`` engine URL when no file is there (an empty path is
    docker's default, ``/var/run/docker.sock``); ``None`` for a TCP/SSH URL or a path that
    exists. One ``stat``; raises nothing."""
    if not docker_host.startswith("unix://"):
        return None
    path = docker_host[len("unix://"):] or "/var/run/docker.sock"
    return None if os.path.exists(path) else path


_ANSWERED = ("APIError", "NotFound", "ImageNotFound", "InvalidRepository", "BuildError")
"""The docker SDK's errors that mean the engine answered (and refused); the others (its
``DockerException`` for a failed version handshake, ``requests``' connection errors) mean it
was not reached."""


def docker_error_sentence(exc: BaseException, docker_host: str | None,
                          environ: Mapping[str, str] | None = None) -> str:
    """``exc`` (raised while reaching or asking the docker engine) as one sentence that names
    the engine's URL (:func:`resolve_docker_host` of ``docker_host``, the profile's
    ``node.docker_host``) and the fix, without the SDK's exception repr (``('Connection
    aborted.', FileNotFoundError(2, …))``):

    * the engine answered (an ``APIError``): ``the docker engine at URL refused: <its
      explanation>``;
    * not reached: ``cannot reach the docker engine at URL: <why>`` — no socket at the unix
      URL's path, permission denied on the socket (run as root or a member of
      the ``docker`` group), connection refused, timed out, else the error's own first line
      (at most 200 characters) — then the fix: start dockerd, or set ``node.docker_host``.

    Pure but for one ``stat`` of a unix socket's path. Raises nothing."""
    url = resolve_docker_host(docker_host, environ)
    text = " ".join(str(exc).split()) or type(exc).__name__
    if type(exc).__name__ in _ANSWERED:
        said = getattr(exc, "explanation", None) or text
        return f"the docker engine at {url} refused: {' '.join(str(said).split())[:200]}"
    path = absent_socket(url)
    low = text.lower()
    why = (f"no socket at {path}" if path is not None else
           "permission denied on its socket (run as root or as a member of the docker group)"
           if "permission denied" in low else
           "connection refused (nothing listens there)" if "connection refused" in low else
           "it did not answer in time" if "timed out" in low or "timeout" in low else
           text[:200])
    return (f"cannot reach the docker engine at {url}: {why}. Start dockerd, or set "
            "node.docker_host in the profile to the engine that runs the seat")


def resolve_docker_host(docker_host: str | None, environ: Mapping[str, str] | None = None) -> str:
    """The engine URL: ``docker_host``, else ``$DOCKER_HOST``, else :data:`DEFAULT_DOCKER_HOST`."""
    env = os.environ if environ is None else environ
    return docker_host or env.get("DOCKER_HOST") or DEFAULT_DOCKER_HOST


__all__ = ["Attribute", "ContainerEvent", "DEFAULT_DOCKER_HOST", "EventStreamStatus",
           "EventWatcher", "IGNORED_ACTIONS", "RECENT_CHANGES", "WATCHED_ACTIONS",
           "container_running",
           "absent_socket", "docker_client", "docker_error_sentence", "event_from_api",
           "find_container", "missing_socket", "parse_docker_time", "resolve_docker_host",
           "time_or_none"]
