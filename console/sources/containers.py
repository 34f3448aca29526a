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

The engine's event stream is :class:`seat_console.node.docker.EventWatcher` (the client factory
lives there too); this source keeps one, or reads the node context's. The stream runs in a background
thread: it reconnects after a drop with ``since`` = the last event seen
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

import threading
import time
from collections.abc import Callable, Iterable, Mapping
from datetime import datetime
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, Field

from seat_console.core.profile import LoadedProfile
from seat_console.core.base import Frozen, Source, Unavailable, utcnow
from seat_console.core.untrusted import get_bool, get_dict, get_int, get_list, get_str
from seat_console.node.docker import (
    ContainerEvent,
    EventStreamStatus,
    EventWatcher,
    time_or_none,
    docker_client,
    missing_socket,
    resolve_docker_host,
)

if TYPE_CHECKING:
    import docker


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
        started_at=time_or_none(st.get("StartedAt")),
        finished_at=time_or_none(st.get("FinishedAt")),
        restart_count=get_int(c, "RestartCount", minimum=0),
        exit_code=get_int(st, "ExitCode", minimum=-(2**31), maximum=2**32),
        oom_killed=get_bool(st, "OOMKilled"), image_ref=ref, image_id=get_str(c, "Image"),
        repo_digests=digests, repo_digest=pick_repo_digest(ref, digests),
        device_env=device_env(cfg.get("Env") or []),
        engine_env=device_env(cfg.get("Env") or [], ENGINE_ENV_VARS))


VERSION_MAX_AGE_S = 60.0
"""Seconds the containers source keeps the docker engine's ``version`` answer (it changes only
when the engine is replaced, which drops the connection and the answer with it)."""


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
        self._containers = dict(containers)
        self.timeout_s = timeout_s
        self._client: docker.DockerClient | None = None
        self._version: tuple[Any, float, Any] | None = None
        """``(client, monotonic s, answer)`` of the last ``version`` read."""
        self._images: dict[str, tuple[int, Any]] = {}
        """``{image ID: (docker's change count, inspect answer)}``: the images of the last
        read's containers (:meth:`_inspect`)."""
        self._lock = threading.Lock()
        self._make_client = make_client
        self._owns_watcher = watcher is None
        self.watcher: EventWatcher | None = watcher if watcher is not None else (
            EventWatcher(self._new_client) if watch_events else None)

    @property
    def containers(self) -> dict[str, str]:
        """``{role: container name}`` read per poll: the ``resident`` is the one the
        seat-state file names after a ``promote`` (:func:`seat_console.core.seat_file.
        resident_container`), else the one given."""
        from seat_console.core.seat_file import resident_container

        out = dict(self._containers)
        if "resident" in out:
            out["resident"] = resident_container(out["resident"]) or out["resident"]
        return out

    def _new_client(self) -> docker.DockerClient:
        if self._make_client is not None:
            return self._make_client()
        return docker_client(self.docker_host, timeout_s=self.timeout_s)

    def _get_client(self) -> docker.DockerClient:
        with self._lock:
            if self._client is None:
                self._client = self._new_client()
            return self._client

    def _engine_version(self, client: docker.DockerClient) -> Any:
        """The docker engine's ``version`` answer, kept for :data:`VERSION_MAX_AGE_S` with
        this client (a failed read drops the client, and the answer with it)."""
        now = time.monotonic()
        kept = self._version
        if kept is not None and kept[0] is client and now - kept[1] < VERSION_MAX_AGE_S:
            return kept[2]
        ver = client.api.version()
        self._version = (client, now, ver)
        return ver

    def _drop_client(self) -> None:
        self._version = None
        self._images = {}
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

        w = self.watcher
        if w is not None:
            w.start()
        # the changes first, then the containers' state: a reading never lists a change its
        # state has not caught up with (a stop listed beside the container still running, when
        # the stop's event came in between the inspect and this list)
        status, changes = (w.status(), w.changes()[-50:]) if w is not None else (None, ())
        try:
            client = self._get_client()
            ver = self._engine_version(client)
            key = status.events_seen if status is not None and status.connected else None
            kept, self._images = self._images, {}
            states = [self._inspect(client, role, name, key, kept)
                      for role, name in self.containers.items()]
        except (DockerException, requests.exceptions.RequestException) as exc:
            self._drop_client()
            return Unavailable(source=self.name, kind="unreachable", reason=(
                f"docker engine at {self.docker_host} not reachable: {_short(exc)}"))
        except Exception as exc:  # noqa: BLE001 - never raise into the UI
            self._drop_client()
            return Unavailable(source=self.name, kind="error",
                               reason=f"{type(exc).__name__}: {_short(exc)}")
        return ContainersReading(
            engine=self.docker_host, engine_version=get_str(ver, "Version", max_len=200),
            api_version=get_str(ver, "ApiVersion", max_len=50), read_at=utcnow(),
            containers=tuple(states), events=status, recent_changes=changes)

    def _inspect(self, client: docker.DockerClient, role: str, name: str,
                 key: int | None = None,
                 kept: Mapping[str, tuple[int, Any]] | None = None) -> ContainerState:
        """One container's state: ``inspect_container``, and its image's ``inspect_image`` —
        taken from ``kept`` (the last read's answers) while ``key`` (docker's change count,
        taken before this read while the event stream is connected; ``None``: never kept) is
        the one it was read under, since an image ID names fixed content and its tags and
        digests change only by an image event; the answer used is kept for the next read."""
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
            hit = (kept or {}).get(image_id)
            if key is not None and hit is not None and hit[0] == key:
                image = hit[1]
            else:
                try:
                    image = client.api.inspect_image(image_id)
                except NotFound:
                    image = None
            if key is not None:
                self._images[image_id] = (key, image)
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


__all__ = ["ContainerSource", "ContainerState", "ContainersReading",
           "container_state_from_inspect", "make_source", "pick_repo_digest"]
