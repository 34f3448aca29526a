"""One node context built from the profile, shared by the sources and the actions.

:class:`NodeContext` holds the one transport (local / SSH / docker exec), the Alertmanager
client, a factory for docker engine clients and the NVML gateway for the profile's node, so an
action's verify step and the panels read the same things through the same objects. Each part
is built on first use (an NVML init or a docker connection costs nothing until asked for); a
part that cannot be built (invalid transport target, missing Alertmanager credentials) is kept
as its error and raised as the documented exception on use, so the console still starts and
the panel or step names what to fix.

The app builds ONE context (``app.node``) and hands it to the source factories (their
``context=`` keyword) and to the actions it runs (hold, release, swap, restore, probe), so the
timers panel and the hold's verify step use the same transport object, the silences panel and
the hold the same Alertmanager client, and the containers panel and the swap the same docker
event watcher (:meth:`NodeContext.watcher`) — which is how an action marks its own container
changes (:meth:`NodeContext.expect`) and how the watcher tells them from someone else's; other
console processes' changes are told apart through the journal
(:mod:`seat_console.node.attribution`).

Thread-safety (a poll thread and an action worker use the same objects at once): the
transport runs each command as its own child process (its only shared state, the resolved
binary paths, is under a lock); the Alertmanager client is one ``httpx.Client`` (thread-safe,
its connection pool is locked); :meth:`docker` makes a new docker client per caller (the SDK's
``requests`` session is not thread-safe); the event watcher's readers and :meth:`expect` take
its lock; NVML calls go through the gateway's lock.

Typical use::

    ctx = NodeContext.from_profile(loaded)
    timers = read_timers(ctx.transport, ctx.timer_units)    # a read
    stop_timer(ctx.transport, unit)                          # an action (actions/node_ops)
    ctx.close()
"""

from __future__ import annotations

import threading
from typing import Any

from seat_console.node.transport import Transport, TransportError, make_transport
from seat_console.core.profile import LoadedProfile


class NodeContext:
    """The node's shared clients for ``loaded`` (a :class:`~seat_console.core.profile.LoadedProfile`).

    Attributes built lazily, thread-safe: :attr:`transport` (raises
    :class:`~seat_console.node.transport.TransportError`), :attr:`alertmanager` (an
    :class:`~seat_console.node.alertmanager.AlertmanagerClient`; raises
    :class:`~seat_console.node.alertmanager.AlertmanagerError` kind ``config``), :meth:`docker`
    (a new docker SDK client on ``node.docker_host`` / ``$DOCKER_HOST``), :attr:`nvml` (the
    :class:`~seat_console.node.nvml.Nvml` gateway). ``transport`` / ``alertmanager`` may be
    given (tests, a shared client).
    """

    def __init__(self, loaded: LoadedProfile, *, transport: Transport | None = None,
                 alertmanager: Any | None = None, journal_path: Any | None = None) -> None:
        self.loaded = loaded
        self.profile = loaded.profile
        self._lock = threading.Lock()
        self._transport = transport
        self._am = alertmanager
        self._nvml: Any | None = None
        self._watcher: Any | None = None
        self._journal_path = journal_path

    @classmethod
    def from_profile(cls, loaded: LoadedProfile) -> NodeContext:
        """The context for a loaded profile (nothing is connected yet)."""
        return cls(loaded)

    def __repr__(self) -> str:
        return f"NodeContext({self.profile.node.name!r}, source={self.loaded.source!r})"

    @property
    def node_name(self) -> str:
        """The profile's ``node.name``."""
        return self.profile.node.name

    @property
    def timer_units(self) -> list[str]:
        """Every timer unit the hold manages (conformance first, then remediation)."""
        return list(self.profile.timers.all_units)

    @property
    def transport(self) -> Transport:
        """The node transport (built once); raises ``TransportError`` for an invalid target."""
        with self._lock:
            if self._transport is None:
                self._transport = make_transport(self.loaded)
            return self._transport

    @property
    def alertmanager(self) -> Any:
        """The Alertmanager client (built once); raises ``AlertmanagerError`` (``config``)."""
        from seat_console.node.alertmanager import AlertmanagerClient

        with self._lock:
            if self._am is None:
                self._am = AlertmanagerClient(self.profile.alertmanager)
            return self._am

    def silence_matchers(self) -> list[Any]:
        """The profile's silence matchers as
        :class:`~seat_console.node.alertmanager.SilenceMatcher` (all four fields)."""
        from seat_console.node.alertmanager import SilenceMatcher

        return [SilenceMatcher.from_profile(m) for m in self.profile.silence.matchers]

    def docker(self, timeout_s: float = 5.0) -> Any:
        """A new docker SDK client on the node's engine (the caller closes it). Raises
        ``ConnectionError`` naming the socket when the engine is a ``unix://`` socket that is
        not there, without importing the SDK (~4.5 MiB RSS,
        :func:`~seat_console.node.docker.absent_socket`, as the containers source does): the
        TUI's runbook reader asks who holds the seat at every read, and imported it on the GPU
        machine, which has no docker. Else the SDK's errors (``DockerException``)."""
        from seat_console.node.docker import (absent_socket, docker_client,
                                              docker_error_sentence, resolve_docker_host)

        url = resolve_docker_host(self.profile.node.docker_host)
        path = absent_socket(url)
        if path is not None:   # the sentence the SDK's own error would get
            raise ConnectionError(docker_error_sentence(FileNotFoundError(path), url))
        return docker_client(url, timeout_s=timeout_s)

    def watcher(self) -> Any:
        """The context's one docker :class:`~seat_console.node.docker.EventWatcher`
        (built on first call, not started: the containers source starts it on its first read;
        ``.start()`` is idempotent). Its events are the console's when an action registered
        them (:meth:`expect`) or a journaled runbook step of any console process on this state
        dir was acting on that container then (:class:`~seat_console.node.attribution.
        JournalAttributor`; ``journal_path`` given to the constructor, else the usual one)."""
        from seat_console.node.attribution import JournalAttributor
        from seat_console.node.docker import EventWatcher

        with self._lock:
            if self._watcher is None:
                self._watcher = EventWatcher(lambda: self.docker(timeout_s=5.0),
                                             attribute=JournalAttributor(self._journal_path))
            return self._watcher

    def docker_changes_seen(self) -> int | None:
        """The event watcher's :attr:`~seat_console.node.docker.EventWatcher.changes_seen`, or
        ``None`` while no watcher was built or its thread is not running (then nothing says
        when docker changed). Builds nothing; never raises; does not take the context's lock
        (the TUI asks on its UI thread, while a poll thread may be building a client under
        it): the attribute is read once, whole."""
        w = self._watcher
        if w is None or not w.alive:
            return None
        return w.changes_seen

    def expect(self, actor: str, actions: Any, within_s: float = 120.0,
               label: str | None = None) -> None:
        """Register that an action of this process is about to make ``actions`` (docker event
        actions: ``stop``, ``start``…) on container ``actor`` (name or ID): the context's event
        watcher marks matching events ``by_console`` (``by`` = the journal's label for the run,
        else ``label``). Does nothing when no watcher was built (nobody in this process
        watches; other processes attribute through the journal). Thread-safe; never raises."""
        with self._lock:
            w = self._watcher
        if w is not None:
            try:
                w.expect(actor, list(actions), within_s, label=label)
            except Exception:  # noqa: BLE001 - marking must never break the step
                pass

    @property
    def nvml(self) -> Any:
        """The NVML gateway (built once, initialised lazily on its first call)."""
        from seat_console.node.nvml import Nvml

        with self._lock:
            if self._nvml is None:
                self._nvml = Nvml()
            return self._nvml

    def adopt_nvml(self, nvml: Any) -> bool:
        """Use ``nvml`` (an :class:`~seat_console.node.nvml.Nvml` gateway opened before the
        context existed: the first frame's) as :attr:`nvml`, unless one was built already;
        return whether it was adopted. The context then closes it with the rest."""
        with self._lock:
            if self._nvml is not None:
                return False
            self._nvml = nvml
            return True

    def secrets(self) -> list[str]:
        """Credential strings to keep out of the journal and messages (none when the
        Alertmanager client could not be built)."""
        try:
            return list(self.alertmanager.credentials.secrets())
        except Exception:  # noqa: BLE001 - no client, no secrets to scrub
            return []

    def close(self) -> None:
        """Close whatever was built (the event watcher's thread is stopped); never raises."""
        for obj in (self._watcher, self._am, self._transport, self._nvml):
            if obj is not None:
                try:
                    obj.close()
                except Exception:  # noqa: BLE001
                    pass


def app_context(app: Any) -> tuple[NodeContext, bool]:
    """The app's shared context (``app.node``) and ``False``, or — for an app without one (a
    test harness) — a new context for ``app.loaded`` and ``True`` (the caller closes it)."""
    shared = getattr(app, "node", None)
    if isinstance(shared, NodeContext):
        return shared, False
    return NodeContext.from_profile(app.loaded), True


__all__ = ["NodeContext", "TransportError", "app_context"]
