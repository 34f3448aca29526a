"""Who holds the seat: the resident or the probe container, since when, its image identity, and
what the engine said about its KV cache while starting (the seat panel's source).

Per poll: ``GET /containers/{name}/json`` for the profile's resident (``resident.container``)
and probe (``swap.container``, else ``candidate.container``). The running one holds the seat
(both running: the resident is shown and ``conflict`` says so). Its startup lines are read
from ``docker logs`` between its start and :data:`STARTUP_WINDOW_S` later (so a resident that
has served for weeks is not re-read in full), parsed by
:func:`seat_console.sources.startup_log.parse_startup_log`, and cached per container start
until they are complete.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from pydantic import BaseModel

from seat_console.core.profile import LoadedProfile
from seat_console.core.base import Frozen, Source, Unavailable, utcnow
from seat_console.sources.containers import pick_repo_digest
from seat_console.node.docker import (docker_client, missing_socket, parse_docker_time,
                                      resolve_docker_host)
from seat_console.sources.startup_log import StartupFacts, parse_startup_log

STARTUP_WINDOW_S = 1800
"""Seconds after a container's start within which its startup lines are looked for."""

LOG_SETTLE_S = 10.0
"""Seconds after the startup window's end after which the lines in it are taken as all there:
docker stamps a line when it receives it, so a read this long after the window's end has
seen every line of the window, and its facts are final even when incomplete."""


class SeatReading(Frozen):
    """Which container holds the seat now.

    ``role``: ``"resident"``, ``"probe"`` or ``None`` (neither runs: the seat is empty);
    ``name`` / ``container_id``; ``since``: its start (UTC); ``image_id`` (config digest) and
    ``repo_digest`` (manifest digest, ``None`` for a locally built image such as a backport not
    pushed); ``image_ref``: what it was created from; ``backport_tag`` / ``backport_base``: from
    the image's ``org.seat-console.backport.*`` labels, if any; ``startup``: the engine's
    startup facts from its log (``None`` before any were read); ``other``: the other
    container's state (``"exited"``, ``"absent"``…); ``conflict``: both run.
    """

    role: str | None = None
    name: str | None = None
    container_id: str | None = None
    since: datetime | None = None
    image_id: str | None = None
    image_ref: str | None = None
    repo_digest: str | None = None
    backport_base: str | None = None
    content_hash: str | None = None
    startup: StartupFacts | None = None
    other: str | None = None
    conflict: bool = False
    read_at: datetime | None = None


class SeatSource(Source):
    """The seat panel's source (``name = "seat"``); see the module docstring."""

    name = "seat"

    def __init__(self, docker_host: str, resident: str | None, probe: str | None,
                 block_size: int | None = None, timeout_s: float = 5.0,
                 make_client: Any | None = None) -> None:
        self.docker_host = docker_host
        self._make_client = make_client
        self.resident, self.probe = resident, probe
        self.block_size = block_size
        self.timeout_s = timeout_s
        self._client: docker.DockerClient | None = None
        self._cache: dict[tuple[str, str], tuple[StartupFacts, bool]] = {}
        """``{(container id, StartedAt): (facts, final)}``: the newest start's only."""

    @property
    def names(self) -> list[tuple[str, str]]:
        """``[(role, container name)]`` watched, read per poll: the resident is the one the
        seat-state file names after a ``promote`` (:func:`seat_console.core.seat_file.
        resident_container`), else the profile's."""
        from seat_console.core.seat_file import resident_container

        resident = resident_container(self.resident)
        return [(r, n) for r, n in (("resident", resident), ("probe", self.probe)) if n]

    def _get(self) -> docker.DockerClient:
        if self._client is None:
            self._client = (self._make_client() if self._make_client is not None else
                            docker_client(self.docker_host, timeout_s=self.timeout_s))
        return self._client

    def _startup(self, c: Any, started: datetime | None) -> StartupFacts | None:
        """The container's startup facts from its logs between ``started`` and
        :data:`STARTUP_WINDOW_S` later, cached per container start while they are complete —
        or final: read :data:`LOG_SETTLE_S` or more after the window's end, when no line of
        the window can still come (an engine whose log never gives every fact was read again
        at every poll for good: half the seat read's CPU on the lab's resident)."""
        key = (c.id, c.attrs.get("State", {}).get("StartedAt", ""))
        got = self._cache.get(key)
        if got is not None and (got[0].complete or got[1]):
            return got[0]
        kw: dict[str, Any] = {"stdout": True, "stderr": True}
        final = False
        if started is not None:
            kw["since"] = started
            kw["until"] = started + timedelta(seconds=STARTUP_WINDOW_S)
            final = utcnow() >= kw["until"] + timedelta(seconds=LOG_SETTLE_S)
        text = c.logs(**kw).decode("utf-8", "replace")
        facts = parse_startup_log(text, block_size=self.block_size)
        self._cache = {key: (facts, final)}
        return facts

    def read(self) -> BaseModel:
        """One :class:`SeatReading`, or :class:`Unavailable` (engine unreachable)."""
        missing = missing_socket(self.docker_host)
        if missing is not None:   # no engine here: the SDK is not loaded to find that out
            self.close()
            return Unavailable(source="seat", kind="unreachable",
                               reason=f"docker engine {self.docker_host}: {missing}")
        from docker.errors import DockerException, NotFound

        try:
            client = self._get()
            found: list[tuple[str, str, Any]] = []
            states: dict[str, str] = {}
            for role, name in self.names:   # the resident read now: a promote renames it
                try:
                    c = client.containers.get(name)
                except NotFound:
                    states[role] = "absent"
                    continue
                states[role] = c.attrs.get("State", {}).get("Status", "unknown")
                if c.attrs.get("State", {}).get("Running"):
                    found.append((role, name, c))
            if not found:
                return SeatReading(other=", ".join(f"{r} {s}" for r, s in states.items()),
                                   read_at=utcnow())
            role, name, c = found[0]
            started = parse_docker_time(c.attrs.get("State", {}).get("StartedAt"))
            img: dict[str, Any] = {}
            try:
                img = client.images.get(c.attrs["Image"]).attrs
            except DockerException:
                pass
            labels = (img.get("Config") or {}).get("Labels") or {}
            ref = (c.attrs.get("Config") or {}).get("Image")
            other = [f"{r} {s}" for r, s in states.items() if r != role]
            return SeatReading(
                role=role, name=name, container_id=c.id, since=started,
                image_id=c.attrs["Image"], image_ref=ref,
                repo_digest=pick_repo_digest(ref, img.get("RepoDigests") or []),
                backport_base=labels.get("org.seat-console.backport.base"),
                content_hash=labels.get("org.seat-console.backport.content-hash"),
                startup=self._startup(c, started), other=", ".join(other) or None,
                conflict=len(found) > 1, read_at=utcnow())
        except (DockerException, OSError) as exc:
            self.close()
            return Unavailable(source="seat", kind="unreachable",
                               reason=f"docker engine {self.docker_host}: {exc}")

    def close(self) -> None:
        """Close the docker client."""
        if self._client is not None:
            try:
                self._client.close()
            except Exception:  # noqa: BLE001
                pass
            self._client = None


def make_source(loaded: LoadedProfile, *, context: Any | None = None) -> Source:
    """The seat source for a profile (the app's ``PANELS`` factory); ``context``: the app's
    :class:`~seat_console.node.context.NodeContext` (its docker client factory is used)."""
    p = loaded.profile
    probe = p.swap.container if p.swap is not None else (
        p.candidate.container if p.candidate is not None else None)
    return SeatSource(resolve_docker_host(p.node.docker_host), p.resident.container, probe,
                      block_size=p.seat.block_size,
                      make_client=(None if context is None
                                   else lambda: context.docker(timeout_s=5.0)))


__all__ = ["LOG_SETTLE_S", "STARTUP_WINDOW_S", "SeatReading", "SeatSource", "make_source"]
