"""What disturbs a probe, detected while it runs (``shared/DESIGN.md``, rule 4).

:class:`InterferenceMonitor` is started before the first measured request and checked every
``probe.watch_interval_s`` seconds until the run ends. It flags, each with the time it was seen
(UTC) and what happened:

* ``container`` — a start/stop/restart/kill/die/pause/… of the seat's containers (resident,
  swap probe, candidate, the node container) that the console did not announce, from the docker
  engine's event stream (:class:`~seat_console.node.docker.EventWatcher`; events the
  console registered with ``expect`` are ``by_console``);
* ``service`` — a remediation or conformance service (the profile's timers' units) that started
  or ran: its ``InvocationID`` changed, or it is active/activating now (``systemctl show``
  through the node transport and the one runner);
* ``timer`` — one of the profile's timer units that was stopped when the run began (the hold
  stopped it) and is active now: started by hand or by another tool, a breach of the hold, so
  the run is disrupted from the timer's ``ActiveEnterTimestamp`` on, before its service fires;
* ``silence`` — the hold's Alertmanager silence is no longer active (expired or deleted);
* ``engine-reset`` — the engine's counters went down or its process start time changed.

A check that cannot be made (the runner reports a failure — exit 127 in 0.0 s is one —, the
event stream is down, Alertmanager unreachable) is a ``check-failed`` problem: the run could not
be watched, so its phases are *incomplete* (not verified), never silently "fine".
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Any

from seat_console.core.fmt import zulu_time
from seat_console.node.transport import Transport
from seat_console.probe.engine_counters import EngineCounters
from seat_console.core.base import Frozen, utcnow
from seat_console.node.docker import ContainerEvent, EventWatcher
from seat_console.sources.timers import machine_time, parse_show_blocks

DISRUPTING_ACTIONS = frozenset({"create", "start", "restart", "stop", "kill", "die", "pause",
                                "unpause", "destroy", "oom", "rename", "update"})
"""Container event actions that change what serves the seat."""

SERVICE_PROPS = ("Id", "InvocationID", "ActiveState", "SubState", "NRestarts",
                 "ActiveEnterTimestamp", "InactiveExitTimestamp", "ExecMainStartTimestamp")
"""``systemctl show --timestamp=unix`` properties read per watched unit (timers and services)."""


class Disruption(Frozen):
    """One thing that disturbed the run: ``at`` (UTC: when it happened, by the node's own clock
    where the node gives a time — ``at_source`` ``"node"`` —, else when a check saw it —
    ``"detected"``), ``detected_at`` (UTC, when the check saw it), ``kind`` (``container`` /
    ``service`` / ``timer`` / ``silence`` / ``engine-reset``), ``what`` (one sentence),
    ``phase`` (the phase running when it was seen, ``None`` between phases)."""

    at: datetime
    kind: str
    what: str
    phase: str | None = None
    detected_at: datetime | None = None
    at_source: str = "detected"


class CheckProblem(Frozen):
    """A watch check that could not be made: ``at``, ``check`` (``docker-events`` /
    ``services`` / ``silence`` / ``metrics``), ``reason``, ``phase``."""

    at: datetime
    check: str
    reason: str
    phase: str | None = None


def service_units(timer_units: Sequence[str]) -> list[str]:
    """``foo.timer`` → ``foo.service`` (systemd's default ``Unit=`` of a timer)."""
    return [u[: -len(".timer")] + ".service" for u in timer_units if u.endswith(".timer")]


def read_services(transport: Transport, units: Sequence[str],
                  timeout_s: float = 10.0) -> dict[str, dict[str, str]] | str:
    """``systemctl show --timestamp=unix -p <SERVICE_PROPS> -- UNITS`` on the node →
    ``{unit: properties}``, or the runner's failure sentence (a failed command, e.g. exit 127,
    is never read as "nothing ran")."""
    if not units:
        return {}
    res = transport.run(["systemctl", "show", "--timestamp=unix", "-p", ",".join(SERVICE_PROPS),
                         "--", *units], timeout_s=timeout_s)
    if not res.ok:
        return res.failure or f"`{res.shown}` failed"
    blocks = parse_show_blocks(res.stdout)
    if len(blocks) != len(units):
        return f"systemctl show returned {len(blocks)} blocks for {len(units)} units"
    return dict(zip(units, blocks, strict=True))


def _node_time(props: dict[str, str], *names: str) -> datetime | None:
    """The first of ``names`` (``systemctl show --timestamp=unix`` properties) that holds a
    machine-format time, as aware UTC; ``None`` when none does (unknown, never "now")."""
    for n in names:
        t = machine_time(props.get(n))
        if t is not None:
            return t
    return None


def service_events(before: dict[str, dict[str, str]], now: dict[str, dict[str, str]]
                   ) -> list[tuple[str, datetime | None]]:
    """``(sentence, at)`` for services that ran between two :func:`read_services` readings: a
    new ``InvocationID`` (it was started), or it is running now (``activating``/``active``
    other than ``exited``/``dead``, ``deactivating``). ``at``: when it started by the node's
    clock (``ExecMainStartTimestamp``, else ``InactiveExitTimestamp``, else
    ``ActiveEnterTimestamp``), ``None`` when the node gives no time."""
    out: list[tuple[str, datetime | None]] = []
    for unit, props in now.items():
        prev = before.get(unit, {})
        inv, prev_inv = props.get("InvocationID", ""), prev.get("InvocationID", "")
        state = f"{props.get('ActiveState')}/{props.get('SubState')}"
        at = _node_time(props, "ExecMainStartTimestamp", "InactiveExitTimestamp",
                        "ActiveEnterTimestamp")
        if inv and inv != prev_inv:
            out.append((f"{unit} was started (new invocation {inv[:12]}, now {state})", at))
        elif props.get("ActiveState") in ("activating", "deactivating", "reloading") or (
                props.get("ActiveState") == "active"
                and props.get("SubState") not in ("exited", "dead")):
            out.append((f"{unit} is running ({state})", at))
    return out


def service_changes(before: dict[str, dict[str, str]], now: dict[str, dict[str, str]]
                    ) -> list[str]:
    """The sentences of :func:`service_events`."""
    return [s for s, _ in service_events(before, now)]


def timer_events(before: dict[str, dict[str, str]], now: dict[str, dict[str, str]]
                 ) -> list[tuple[str, datetime | None]]:
    """``(sentence, at)`` for timer units inactive in ``before`` (the run's start: the hold
    stopped them) and active in ``now``: started by someone else, a breach of the hold. ``at``:
    the timer's ``ActiveEnterTimestamp`` (``None`` when the node gives none). A timer whose
    state is missing from either reading is not judged (unknown, never "started")."""
    out: list[tuple[str, datetime | None]] = []
    for unit, props in now.items():
        was = before.get(unit, {}).get("ActiveState")
        if was in (None, "") or was == "active" or props.get("ActiveState") != "active":
            continue
        at = _node_time(props, "ActiveEnterTimestamp", "InactiveExitTimestamp")
        when = f" at {zulu_time(at)}" if at else ""
        out.append((f"{unit} was started{when} while the hold had it stopped (a breach of "
                    "the hold)", at))
    return out


def container_events(events: Sequence[ContainerEvent], names: set[str]
                     ) -> list[tuple[str, datetime]]:
    """``(sentence, at)`` for foreign container events on ``names`` (container names) that
    change what serves the seat (:data:`DISRUPTING_ACTIONS`); ``at``: the event's own time
    (the docker engine's clock)."""
    out = []
    for e in events:
        if e.by_console or e.type != "container":
            continue
        if e.action.split(":", 1)[0].strip() not in DISRUPTING_ACTIONS:
            continue
        if names and e.actor_name not in names:
            continue
        out.append((f"container {e.actor_name or e.actor_id[:12]}: {e.action} at "
                    f"{zulu_time(e.at)}, not made by the console", e.at))
    return out


def container_disruptions(events: Sequence[ContainerEvent], names: set[str]) -> list[str]:
    """The sentences of :func:`container_events`."""
    return [s for s, _ in container_events(events, names)]


def counters_reset(first: EngineCounters, now: EngineCounters) -> str | None:
    """A sentence when ``now``'s counters went down from ``first``'s or the engine's process
    start time changed (a restart), else ``None``."""
    if (first.process_start_s is not None and now.process_start_s is not None
            and first.process_start_s != now.process_start_s):
        return (f"the engine's process start time changed ({first.process_start_s:.0f} → "
                f"{now.process_start_s:.0f}): it restarted")
    for name in ("generation_tokens", "prompt_tokens", "requests_succeeded"):
        a, b = getattr(first, name), getattr(now, name)
        if a is not None and b is not None and b < a:
            return f"the engine's {name} counter went down ({a:,.0f} → {b:,.0f}): it restarted"
    return None


def earliest(disruptions: Sequence[Disruption]) -> Disruption | None:
    """The disruption that happened first by the node's clock (:attr:`Disruption.at`), not the
    first a check happened to see (a watch interval, or a service's whole run, can separate
    the two); ``None`` for none."""
    return min(disruptions, key=lambda x: x.at) if disruptions else None


def _process_start(c: EngineCounters) -> datetime | None:
    """The engine's process start time (``process_start_time_seconds``) as aware UTC, when it is
    a finite time datetime can hold; ``None`` otherwise (unknown)."""
    t = c.process_start_s
    if t is None or not math.isfinite(t) or t <= 0:
        return None
    try:
        return datetime.fromtimestamp(t, UTC)
    except (OverflowError, OSError, ValueError):
        return None


class InterferenceMonitor:
    """Watches for interference during a run (see the module docstring).

    ``watcher``: a started :class:`EventWatcher` (``None``: docker events are not watched, a
    ``check-failed`` problem is recorded once); ``container_names``: the seat's containers;
    ``transport`` / ``services``: the node and the service units to watch (``None``/empty:
    not watched); ``timers``: the timer units to watch for a start during the run (those
    inactive at :meth:`baseline`; empty: not watched); ``silence_state``: callable returning ``None`` while the hold's silence is
    active, else a sentence (``None`` callable: no hold to watch); ``scrape``: async callable
    returning :class:`EngineCounters` or a reason; ``interval_s``: between checks.
    All checks run in worker threads (``asyncio.to_thread``) except the scrape.
    """

    def __init__(self, *, watcher: EventWatcher | None, container_names: set[str],
                 transport: Transport | None, services: Sequence[str],
                 silence_state: Callable[[], str | None] | None,
                 scrape: Callable[[], Any] | None, interval_s: float,
                 started_at: datetime | None = None, timers: Sequence[str] = ()) -> None:
        self.watcher = watcher
        self.names = container_names
        self.transport = transport
        self.services = list(services)
        self.timers = list(timers)
        self.silence_state = silence_state
        self.scrape = scrape
        self.interval_s = interval_s
        self.started_at = started_at or utcnow()
        self.disruptions: list[Disruption] = []
        self.problems: list[CheckProblem] = []
        self.phase: str | None = None
        self._seen: set[str] = set()
        self._svc_base: dict[str, dict[str, str]] | None = None
        self._timer_base: dict[str, dict[str, str]] | None = None
        self._counters0: EngineCounters | None = None
        self._task: asyncio.Task[None] | None = None
        self.last_counters: EngineCounters | None = None
        self.on_change: Callable[[], None] | None = None

    def _disrupt(self, kind: str, what: str, at: datetime | None = None) -> None:
        """Record a :class:`Disruption` once per ``kind`` and sentence; ``at``: when it
        happened by the node's clock (``None``: unknown, the detection time stands in)."""
        key = f"{kind}:{what}"
        if key in self._seen:
            return
        self._seen.add(key)
        seen = utcnow()
        self.disruptions.append(Disruption(
            at=at or seen, kind=kind, what=what, phase=self.phase, detected_at=seen,
            at_source="node" if at else "detected"))
        if self.on_change:
            self.on_change()

    def problem(self, check: str, reason: str) -> None:
        """Record a :class:`CheckProblem` (once per check and reason)."""
        key = f"problem:{check}:{reason}"
        if key in self._seen:
            return
        self._seen.add(key)
        self.problems.append(CheckProblem(at=utcnow(), check=check, reason=reason,
                                          phase=self.phase))
        if self.on_change:
            self.on_change()

    async def baseline(self) -> None:
        """Take the reference readings (services' invocation IDs, engine counters); call once
        before the first request. Failures become :class:`CheckProblem` entries."""
        if self.transport is not None and self.services:
            r = await asyncio.to_thread(read_services, self.transport, self.services)
            if isinstance(r, str):
                self.problem("services", r)
            else:
                self._svc_base = r
                for s, at in service_events({u: p for u, p in r.items()}, r):
                    if "is running" in s:
                        self._disrupt("service", s, at)
        if self.transport is not None and self.timers:
            t = await asyncio.to_thread(read_services, self.transport, self.timers)
            if isinstance(t, str):
                self.problem("timers", t)
            else:
                self._timer_base = t
        if self.scrape is not None:
            c = await self.scrape()
            if isinstance(c, str):
                self.problem("metrics", c)
            else:
                self._counters0 = self.last_counters = c

    async def check_once(self) -> None:
        """One round of every check."""
        if self.watcher is not None:
            st = self.watcher.status()
            if not st.connected and st.last_error:
                self.problem("docker-events", f"the docker event stream is down "
                                               f"({st.last_error})")
            for s, at in container_events(self.watcher.foreign_changes(self.started_at),
                                          self.names):
                self._disrupt("container", s, at)
        if self.transport is not None and self.services and self._svc_base is not None:
            r = await asyncio.to_thread(read_services, self.transport, self.services)
            if isinstance(r, str):
                self.problem("services", r)
            else:
                for s, at in service_events(self._svc_base, r):
                    self._disrupt("service", s, at)
        if self.transport is not None and self.timers and self._timer_base is not None:
            t = await asyncio.to_thread(read_services, self.transport, self.timers)
            if isinstance(t, str):
                self.problem("timers", t)
            else:
                for s, at in timer_events(self._timer_base, t):
                    self._disrupt("timer", s, at)
        if self.silence_state is not None:
            s = await asyncio.to_thread(self.silence_state)
            if s is not None:
                if s.startswith("check failed:"):
                    self.problem("silence", s.removeprefix("check failed:").strip())
                else:
                    self._disrupt("silence", s)
        if self.scrape is not None:
            c = await self.scrape()
            if isinstance(c, str):
                self._disrupt("engine-reset", f"the engine stopped answering /metrics: {c}")
            else:
                self.last_counters = c
                if self._counters0 is not None:
                    r = counters_reset(self._counters0, c)
                    if r:
                        self._disrupt("engine-reset", r, _process_start(c))
        if self.on_change:
            self.on_change()   # the live panel shows the engine's queues from this round

    async def _loop(self) -> None:
        while True:
            await asyncio.sleep(self.interval_s)
            try:
                await self.check_once()
            except Exception as exc:  # noqa: BLE001 - a broken check is a problem, not a crash
                self.problem("monitor", f"{type(exc).__name__}: {exc}")

    def start(self) -> None:
        """Start the periodic checks in the running event loop."""
        if self.watcher is None:
            self.problem("docker-events", "no docker event stream: container changes during "
                                           "the run cannot be seen")
        self._task = asyncio.get_running_loop().create_task(self._loop())

    async def stop(self) -> None:
        """Stop the periodic checks and run a final round (so a change in the last interval
        is not missed)."""
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except asyncio.CancelledError:
                pass
        try:
            await self.check_once()
        except Exception as exc:  # noqa: BLE001
            self.problem("monitor", f"{type(exc).__name__}: {exc}")


__all__ = [
    "DISRUPTING_ACTIONS",
    "CheckProblem",
    "Disruption",
    "InterferenceMonitor",
    "container_disruptions",
    "container_events",
    "counters_reset",
    "earliest",
    "read_services",
    "service_changes",
    "service_events",
    "service_units",
    "timer_events",
]
