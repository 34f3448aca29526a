"""The seat's containers and the docker engine's event stream, through the docker SDK.

Per container named in the profile (``resident.container``, ``candidate.container`` — the probe),
from ``GET /containers/{name}/json`` and ``GET /images/{id}/json``:

* state (``created`` / ``running`` / ``paused`` / ``restarting`` / ``exited`` / ``dead``, or
  ``absent`` when no such container exists), health (``starting`` / ``healthy`` /
  ``unhealthy``; ``None`` = the image defines no healthcheck), start and finish time (UTC),
  restart count, exit code, OOM-killed flag;
* the **image ID** — ``sha256:`` digest of the image's *config* JSON, local to the engine, what
  ``docker inspect -f '{{.Image}}' CONTAINER`` prints — and the **repo digest** — ``sha256:``
  digest of the *registry manifest*, only known for an image pushed to or pulled from a registry
  (``RepoDigests``, ``repo@sha256:…``; a locally built or imported image has none, shown as
  n/a). Two engines that pulled the same manifest share the repo digest; the image ID is what
  the running container actually uses.

The engine's event stream (``GET /events``, types container and image) runs in a background
thread (:class:`EventWatcher`): it reconnects after a drop with ``since`` = the last event seen
(events the engine still holds in its in-memory ring are replayed; duplicates are dropped), keeps
a bounded list of recent changes (actor, action, time) and is closed cleanly by ``close()``.
Actions register what they are about to do with :meth:`EventWatcher.expect` (through the app's
:class:`~seat_console.node.context.NodeContext`, ``context.expect``); events that match an
expectation are marked ``by_console = True``. Across processes the journal is the truth: with an
``attribute`` callback (the context gives one reading the journal, :mod:`seat_console.actions.
attribution`) an event on a container that a journaled runbook step (any console process on this
state dir: a ``swap`` in another shell) was acting on at that moment is the console's too, and
``by`` names that run. Every other change was made by someone else — the basis of interference
detection (``shared/DESIGN.md``, rule 4).
"""

from __future__ import annotations

import os
import re
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from datetime import UTC, datetime
from typing import Any

from pydantic import BaseModel, Field

from seat_console.profile import LoadedProfile
from seat_console.sources import Frozen, Source, Unavailable, utcnow
from seat_console.sources.untrusted import get_bool, get_dict, get_int, get_list, get_str

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


# -- models ------------------------------------------------------------------------------------
class ContainerState(Frozen):
    """One container as the engine reports it.

    ``role``: ``"resident"`` or ``"probe"``; ``name``: as in the profile; ``state``: docker's
    ``State.Status`` or ``"absent"``; ``health``: ``State.Health.Status`` or ``None`` (no
    healthcheck); ``started_at`` / ``finished_at``: UTC or ``None`` (never); ``restart_count``:
    ``RestartCount``; ``image_ref``: the reference the container was created from
    (``Config.Image``); ``image_id``: ``sha256:`` config digest; ``repo_digests``: every
    ``repo@sha256:`` manifest digest the engine knows for that image; ``repo_digest``: the one
    whose repository matches ``image_ref`` (else the first, else ``None``).
    """

    role: str
    name: str
    state: str
    id: str | None = None
    running: bool = False
    health: str | None = None
    started_at: datetime | None = None
    finished_at: datetime | None = None
    restart_count: int | None = None
    exit_code: int | None = None
    oom_killed: bool | None = None
    image_ref: str | None = None
    image_id: str | None = None
    repo_digests: tuple[str, ...] = ()
    repo_digest: str | None = None
    device_env: dict[str, str] = Field(default_factory=dict)
    """The container's ``CUDA_VISIBLE_DEVICES`` / ``CUDA_DEVICE_ORDER`` /
    ``NVIDIA_VISIBLE_DEVICES`` (``Config.Env``) when set — they renumber or hide GPUs, so
    ``node.gpus`` indices may not be what the engine sees. No other variable is kept (the
    environment may hold secrets)."""
    problem: str | None = None
    """Why this container's state is unknown when the engine's reply could not be read (a
    reply that is not an object), naming the request; ``None`` otherwise."""
    engine_env: dict[str, str] = Field(default_factory=dict)
    """The container's :data:`ENGINE_ENV_VARS` (``VLLM_CPU_KVCACHE_SPACE``: the CPU backend's
    KV cache size in GiB, which the fit budget uses) when set; nothing else is kept."""


DEVICE_ENV_VARS = ("CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER", "NVIDIA_VISIBLE_DEVICES")
"""Environment variables that change which GPUs a process sees, or their numbering."""

ENGINE_ENV_VARS = ("VLLM_CPU_KVCACHE_SPACE",)
"""Engine variables the fit budget reads from the seat container (no secrets among them)."""


def device_env(env: Any, names: tuple[str, ...] = DEVICE_ENV_VARS) -> dict[str, str]:
    """The ``names`` (default :data:`DEVICE_ENV_VARS`) set in ``env`` (``Config.Env``: a list
    of ``"K=V"`` strings, or a mapping), values cut to 256 characters; ``{}`` for anything
    else. Never raises."""
    out: dict[str, str] = {}
    items = env.items() if isinstance(env, Mapping) else (
        (str(kv).partition("=")[0], str(kv).partition("=")[2]) for kv in env
        if isinstance(kv, str)) if isinstance(env, list) else ()
    for k, v in items:
        if k in names and isinstance(v, str):
            out[k] = v[:256]
    return out


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


class ContainersReading(Frozen):
    """The engine, the seat's containers and recent changes at ``read_at`` (UTC).

    ``engine``: the docker host URL; ``engine_version`` / ``api_version``: from ``GET /version``;
    ``recent_changes``: newest last, at most :data:`RECENT_CHANGES`.
    """

    engine: str
    engine_version: str | None
    api_version: str | None
    read_at: datetime
    containers: tuple[ContainerState, ...]
    events: EventStreamStatus | None
    recent_changes: tuple[ContainerEvent, ...]

    def get(self, name: str) -> ContainerState | None:
        """The container named ``name`` in this reading (or ``None``)."""
        return next((c for c in self.containers if c.name == name), None)


# -- pure helpers ----------------------------------------------------------------------------
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


def _time_or_none(value: Any) -> datetime | None:
    """:func:`parse_docker_time` for an inspect field; ``None`` (unknown) for a value that is
    not a string or not a valid docker time."""
    if not isinstance(value, str):
        return None
    try:
        return parse_docker_time(value)
    except ValueError:
        return None


_TIME_RE = re.compile(r"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(\.\d+)?(Z|[+-]\d\d:\d\d)$")


def _repo_of(ref: str) -> str:
    """Repository part of an image reference (``host:5000/a/b:tag`` → ``host:5000/a/b``)."""
    ref = ref.split("@", 1)[0]
    last = ref.rsplit("/", 1)[-1]
    if ":" in last:
        ref = ref[: len(ref) - len(last)] + last.split(":", 1)[0]
    return ref


def pick_repo_digest(image_ref: str | None, repo_digests: Iterable[str]) -> str | None:
    """The ``repo@sha256:…`` entry whose repository matches ``image_ref``'s, else the first."""
    digests = list(repo_digests)
    if not digests:
        return None
    if image_ref:
        want = _repo_of(image_ref)
        for d in digests:
            if d.split("@", 1)[0] == want:
                return d
    return digests[0]


def container_state_from_inspect(role: str, name: str, c: Mapping[str, Any],
                                 image: Mapping[str, Any] | None) -> ContainerState:
    """Build a :class:`ContainerState` from ``docker inspect`` JSON of the container and its
    image (``None`` when the image could not be inspected). Pure; never raises: a field of the
    wrong JSON type (an object where a string is expected, ``null``, a negative restart count,
    a time that is not RFC 3339) is unknown (``None``), never 0 or a crash."""
    st = get_dict(c, "State")
    cfg = get_dict(c, "Config")
    health = get_str(get_dict(st, "Health"), "Status")
    ref = get_str(cfg, "Image")
    digests = tuple(d for d in get_list(image, "RepoDigests") if isinstance(d, str))
    return ContainerState(
        role=role, name=name, state=get_str(st, "Status") or "unknown", id=get_str(c, "Id"),
        running=get_bool(st, "Running") is True, health=health or None,
        started_at=_time_or_none(st.get("StartedAt")),
        finished_at=_time_or_none(st.get("FinishedAt")),
        restart_count=get_int(c, "RestartCount", minimum=0),
        exit_code=get_int(st, "ExitCode", minimum=-(2**31), maximum=2**32),
        oom_killed=get_bool(st, "OOMKilled"), image_ref=ref, image_id=get_str(c, "Image"),
        repo_digests=digests, repo_digest=pick_repo_digest(ref, digests),
        device_env=device_env(cfg.get("Env") or []),
        engine_env=device_env(cfg.get("Env") or [], ENGINE_ENV_VARS))


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
                       and str(code).lstrip("-").isascii() and str(code).lstrip("-").isdigit() and len(str(code)) <= 12 else None))
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
                                           filters={"type": list(self._types)}, decode=True)
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
    if not docker_host.startswith("unix://"):
        return None
    path = docker_host[len("unix://"):] or "/var/run/docker.sock"
    if os.path.exists(path):
        return None
    return (f"no socket at {path} (is dockerd running on this machine? set node.docker_host "
            f"or $DOCKER_HOST to reach another engine)")


def resolve_docker_host(docker_host: str | None, environ: Mapping[str, str] | None = None) -> str:
    """The engine URL: ``docker_host``, else ``$DOCKER_HOST``, else :data:`DEFAULT_DOCKER_HOST`."""
    env = os.environ if environ is None else environ
    return docker_host or env.get("DOCKER_HOST") or DEFAULT_DOCKER_HOST


class ContainerSource(Source):
    """Reads the seat's containers and keeps the engine's event stream (``name =
    "containers"``).

    ``docker_host``: engine URL; ``containers``: ``{role: container name}``; ``timeout_s``: per
    API call; ``watch_events``: start an :class:`EventWatcher` on the first read; ``watcher``:
    use this one (the app's :meth:`NodeContext.watcher
    <seat_console.node.context.NodeContext.watcher>`, shared with the actions; its owner closes
    it, :meth:`close` does not) instead of making one; ``make_client``: makes the API client
    (default: one on ``docker_host``).
    """

    name = "containers"

    def __init__(self, docker_host: str, containers: Mapping[str, str], *,
                 timeout_s: float = 5.0, watch_events: bool = True,
                 watcher: EventWatcher | None = None,
                 make_client: Callable[[], docker.DockerClient] | None = None) -> None:
        self.docker_host = docker_host
        self.containers = dict(containers)
        self.timeout_s = timeout_s
        self._client: docker.DockerClient | None = None
        self._lock = threading.Lock()
        self._make_client = make_client
        self._owns_watcher = watcher is None
        self.watcher: EventWatcher | None = watcher if watcher is not None else (
            EventWatcher(self._new_client) if watch_events else None)

    def _new_client(self) -> docker.DockerClient:
        if self._make_client is not None:
            return self._make_client()
        import docker

        # version="auto": negotiate the API version (the SDK's default, 1.44, is newer than
        # what a Debian 12 engine (20.10, API 1.41) speaks)
        return docker.DockerClient(base_url=self.docker_host, version="auto",
                                   timeout=int(max(1, self.timeout_s)))

    def _get_client(self) -> docker.DockerClient:
        with self._lock:
            if self._client is None:
                self._client = self._new_client()
            return self._client

    def _drop_client(self) -> None:
        with self._lock:
            client, self._client = self._client, None
        if client is not None:
            try:
                client.close()
            except Exception:  # noqa: BLE001
                pass

    def read(self) -> BaseModel:
        """A :class:`ContainersReading`, or :class:`Unavailable` (kind ``unreachable`` when the
        engine cannot be reached); never raises."""
        missing = missing_socket(self.docker_host)
        if missing is not None:   # no engine here: do not load the SDK to find that out
            self._drop_client()
            return Unavailable(source=self.name, kind="unreachable", reason=(
                f"docker engine at {self.docker_host} not reachable: {missing}"))
        import requests
        from docker.errors import DockerException

        if self.watcher is not None:
            self.watcher.start()
        try:
            client = self._get_client()
            ver = client.api.version()
            states = [self._inspect(client, role, name) for role, name in self.containers.items()]
        except (DockerException, requests.exceptions.RequestException) as exc:
            self._drop_client()
            return Unavailable(source=self.name, kind="unreachable", reason=(
                f"docker engine at {self.docker_host} not reachable: {_short(exc)}"))
        except Exception as exc:  # noqa: BLE001 - never raise into the UI
            self._drop_client()
            return Unavailable(source=self.name, kind="error",
                               reason=f"{type(exc).__name__}: {_short(exc)}")
        w = self.watcher
        return ContainersReading(
            engine=self.docker_host, engine_version=get_str(ver, "Version", max_len=200),
            api_version=get_str(ver, "ApiVersion", max_len=50), read_at=utcnow(),
            containers=tuple(states),
            events=w.status() if w else None,
            recent_changes=w.changes()[-50:] if w else ())

    def _inspect(self, client: docker.DockerClient, role: str, name: str) -> ContainerState:
        from docker.errors import NotFound

        try:
            c = client.api.inspect_container(name)
        except NotFound:
            return ContainerState(role=role, name=name, state="absent")
        if not isinstance(c, Mapping):
            # a reply that is not an object: this container is unknown, the others still shown
            # (it raised AttributeError before the typed parser saw it, issue #22)
            return ContainerState(role=role, name=name, state="unknown", problem=(
                f"docker inspect {name}: the reply is a JSON {type(c).__name__}, not an object"))
        image = None
        image_id = get_str(c, "Image", max_len=200)
        if image_id:
            try:
                image = client.api.inspect_image(image_id)
            except NotFound:
                image = None
        return container_state_from_inspect(role, name, c, image)

    def close(self) -> None:
        """Stop the event watcher (unless it is a shared one) and close the API client."""
        if self.watcher is not None and self._owns_watcher:
            self.watcher.close()
        self._drop_client()


def _short(exc: BaseException) -> str:
    text = str(exc).replace("\n", " ")
    return text if len(text) <= 300 else text[:297] + "…"


def make_source(loaded: LoadedProfile, watch_events: bool = True, *,
                context: Any | None = None) -> Source:
    """The containers source: ``resident.container`` (role ``resident``) and
    ``candidate.container`` (role ``probe``) on ``node.docker_host`` / ``$DOCKER_HOST``;
    ``watch_events=False`` skips the event-stream thread (one-shot headless reads);
    ``context``: the app's :class:`~seat_console.node.context.NodeContext` — its docker client
    factory and its one event watcher (shared with the actions) are used; without it the
    source makes its own."""
    p = loaded.profile
    names: dict[str, str] = {}
    if p.resident.container:
        names["resident"] = p.resident.container
    if p.candidate is not None and p.candidate.container:
        names["probe"] = p.candidate.container
    if context is not None:
        return ContainerSource(resolve_docker_host(p.node.docker_host), names,
                               watch_events=watch_events,
                               watcher=context.watcher() if watch_events else None,
                               make_client=lambda: context.docker(timeout_s=5.0))
    return ContainerSource(resolve_docker_host(p.node.docker_host), names,
                           watch_events=watch_events)


__all__ = ["Attribute", "ContainerEvent", "ContainerSource", "ContainerState", "ContainersReading",
           "DEFAULT_DOCKER_HOST", "EventStreamStatus", "IGNORED_ACTIONS", "EventWatcher",
           "missing_socket",
           "container_state_from_inspect", "event_from_api", "make_source", "parse_docker_time",
           "pick_repo_digest", "resolve_docker_host"]
