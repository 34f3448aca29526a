"""systemd timer units of the seat: state, schedule, what they trigger, and stop/start.

What is read, per timer unit of ``profile.timers`` (through the node transport, so it works
locally, over SSH and via ``docker exec`` into a container running systemd as PID 1):

* ``systemctl show --timestamp=unix -p Id,LoadState,ActiveState,SubState,UnitFileState,Unit,
  Persistent,Result,TimersCalendar,TimersMonotonic UNIT…`` — ``Key=value`` lines, one block per
  unit in argument order (a key such as ``TimersMonotonic`` may repeat).
* ``systemctl list-timers --all --output=json UNIT…`` — the next elapse and the last trigger in
  µs since the epoch (``next``, ``last``), the next elapse merged by systemd itself from the
  calendar (realtime) and monotonic (``OnBootSec``/``OnUnitActiveSec``…) triggers. This is the
  machine format for those two times: on systemd 252 (Debian 12, checked in the lab)
  ``systemctl show`` prints ``NextElapseUSecRealtime`` and ``LastTriggerUSec`` as locale text
  (``Sun 2026-11-29 13:05:54 UTC``) even with ``--timestamp=unix``, and
  ``NextElapseUSecMonotonic`` as a time span (``13min 33.6s``); this module never parses those.
  ``null`` or 0 means "no such time" and becomes ``None`` (shown "n/a"), never the epoch. The
  ``left``/``passed`` fields are not used (252 fills them with the absolute times).
* the triggered service (the timer's ``Unit=``): ``ActiveState``/``SubState`` — it "runs now"
  while ``activating`` / ``deactivating`` / ``reloading``, or ``active`` with a sub-state other
  than ``exited`` (a ``Type=oneshot`` service is ``activating``/``start`` while it runs).

``Persistent=yes`` timers record their last trigger on disk; after they were stopped across a
scheduled time, starting them again fires the missed run at once (systemd.timer(5),
"Persistent="). The reading carries that warning so the hold/restore action can show it.

This module only reads. The writers (``systemctl stop|start`` with read-back) live in
:mod:`seat_console.actions.node_ops`: reading code cannot change the node.
"""

from __future__ import annotations

import fnmatch
import math
import re
import time
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from pydantic import BaseModel, Field

from seat_console.core.profile import LoadedProfile
from seat_console.node.runner import CommandResult
from seat_console.core.base import BrokenSource, Frozen, Source, Unavailable, utcnow
from seat_console.core.fmt import fmt_duration
from seat_console.core.untrusted import load_json
from seat_console.core.partial import Kept, keep
from seat_console.node.transport import Transport, TransportError, make_transport

PERSISTENT_WARNING = ("Persistent=yes: starting it again may fire a missed run at once (systemd "
                      "stores the last trigger on disk and catches up on a schedule missed while "
                      "the timer was stopped)")
"""The warning shown next to a ``Persistent=yes`` timer (systemd.timer(5), ``Persistent=``)."""

TIMER_PROPERTIES = ("Id", "LoadState", "ActiveState", "SubState", "UnitFileState", "Unit",
                    "Persistent", "Result", "TimersCalendar", "TimersMonotonic",
                    "ActiveEnterTimestamp")
"""Properties read from each timer unit with ``systemctl show``."""

SERVICE_PROPERTIES = ("Id", "LoadState", "ActiveState", "SubState", "ExecMainStartTimestamp",
                      "Result")
"""Properties read from each triggered service."""

_UNIT_RE = re.compile(r"^[A-Za-z0-9:_.\\@][A-Za-z0-9:_.\\@-]*$")
_RUNNING_STATES = {"activating", "deactivating", "reloading", "refreshing"}
_NO_SYSTEMD = ("System has not been booted with systemd", "Failed to connect to bus",
               "Failed to connect to system scope bus", "Host is down")


class ServiceState(Frozen):
    """The service a timer triggers: ``unit`` name, systemd states, whether it runs right now
    (``running``: ``None`` when the state could not be read), and when its main process last
    started (UTC, ``None`` = never / n/a)."""

    unit: str
    load_state: str | None = None
    active_state: str | None = None
    sub_state: str | None = None
    result: str | None = None
    running: bool | None = None
    last_started: datetime | None = None


class TimerState(Frozen):
    """One timer unit as systemd reports it.

    ``load_state``: ``loaded`` / ``not-found`` / ``masked`` / ``bad-setting``…; ``active_state``:
    ``active`` (armed), ``inactive`` (stopped), ``failed``; ``sub_state``: ``waiting``,
    ``running``, ``elapsed``, ``dead``; ``unit_file_state``: ``enabled``/``disabled``/``static``…;
    ``next_elapse`` / ``last_trigger``: UTC, ``None`` = n/a (never triggered, or not armed);
    ``schedule``: the trigger definitions as systemd lists them (``OnCalendar=*-*-* 02:00:00``,
    ``OnUnitActiveUSec=1h``); ``persistent``: ``Persistent=`` (``None`` when unknown);
    ``persistent_warning``: :data:`PERSISTENT_WARNING` when persistent, else ``None``;
    ``service``: the triggered unit and its state; ``errors``: the parts this read missed,
    ``"service"`` (the service's state) and/or ``"times"`` (next elapse and last trigger) → why
    (one sentence) — those fields are n/a unless the app kept them from the last good reading.
    """

    unit: str
    load_state: str | None = None
    active_state: str | None = None
    sub_state: str | None = None
    unit_file_state: str | None = None
    result: str | None = None
    next_elapse: datetime | None = None
    last_trigger: datetime | None = None
    schedule: tuple[str, ...] = ()
    persistent: bool | None = None
    persistent_warning: str | None = None
    service: ServiceState | None = None
    errors: dict[str, str] = Field(default_factory=dict)
    active_since: datetime | None = None
    """When the timer last became active (``ActiveEnterTimestamp``, UTC; ``None`` n/a): the
    identity of one start, so two starts of the same timer are two events."""

    @property
    def loaded(self) -> bool:
        """``True`` when systemd has the unit loaded (``LoadState=loaded``)."""
        return self.load_state == "loaded"

    @property
    def active(self) -> bool:
        """``True`` when the timer is armed (``ActiveState=active``)."""
        return self.active_state == "active"


class TimersReading(Frozen):
    """All timer units of the profile, read in one go on ``where`` at ``read_at`` (UTC).

    ``notes``: partial failures that left some fields n/a (e.g. ``list-timers`` failed, so next
    elapse and last trigger are unknown), one sentence each; ``kept``: the parts this read
    missed that the app filled from the last good reading (:meth:`with_last_good`), with the
    time each was really read (a note whose every missed part was kept is dropped).
    """

    where: str
    read_at: datetime
    timers: tuple[TimerState, ...]
    notes: tuple[str, ...] = ()
    kept: tuple[Kept, ...] = ()

    def with_last_good(self, last: TimersReading) -> TimersReading:
        """This reading with each timer's missed parts (:attr:`TimerState.errors`: its
        service's state, its next elapse and last trigger) taken from the same unit in
        ``last``, the app's last good reading on the same node — only where ``last`` had them
        (read, or kept itself) and, for the service, the timer still triggers the same unit.
        Each filled part is listed in ``kept`` (:mod:`seat_console.core.partial`)."""
        if last.where != self.where:
            return self
        kept: list[Kept] = []
        timers: list[TimerState] = []
        for t in self.timers:
            lt = last.get(t.unit)
            update: dict[str, object] = {}
            for group, why in t.errors.items():
                field = f"timers[{t.unit}].{group}"
                had = lt is not None and (group not in lt.errors
                                          or any(k.field == field for k in last.kept))
                k = keep(last, field, f"{t.unit} {TIMER_PARTS.get(group, group)}",
                         why) if had else None
                if group == "service" and lt is not None and (
                        lt.service is None or t.service is None
                        or lt.service.unit != t.service.unit):
                    k = None
                if k is None:
                    continue
                assert lt is not None
                if group == "service":
                    update["service"] = lt.service
                elif group == "times":
                    update["next_elapse"] = lt.next_elapse
                    update["last_trigger"] = lt.last_trigger
                kept.append(k)
            timers.append(t.model_copy(update=update) if update else t)
        if not kept:
            return self
        # a note that says a part is n/a goes when that part was kept for every timer
        gone = {g for g in TIMER_PARTS if any(k.field.endswith(f"].{g}") for k in kept)
                and not any(g in t.errors for t in self.timers if
                            not any(k.field == f"timers[{t.unit}].{g}" for k in kept))}
        return self.model_copy(update={
            "timers": tuple(timers), "kept": tuple(kept),
            "notes": tuple(n for n in self.notes
                           if not any(n.startswith(_NOTE_PREFIX[g]) for g in gone))})

    def get(self, unit: str) -> TimerState | None:
        """The state of ``unit``, or ``None`` when it is not part of this reading."""
        return next((t for t in self.timers if t.unit == unit), None)


TIMER_PARTS = {"service": "service state", "times": "next elapse / last trigger"}
"""The parts of a :class:`TimerState` a read can miss (its ``errors`` keys), in words."""

_NOTE_PREFIX = {"service": "services not read", "times": "list-timers JSON not available"}
"""How :func:`read_timers`' note on each missed part begins."""


# -- parsing (pure) ------------------------------------------------------------------------------
def parse_show_blocks(text: str) -> list[dict[str, str]]:
    """Split ``systemctl show`` output (``Key=value`` lines, blocks separated by blank lines)
    into one dict per unit, in output order. A value keeps everything after the first ``=``; a
    key that repeats within a block (``TimersMonotonic``) has its values joined by newlines."""
    # Values of a repeated key are collected in lists and joined once per block: joining them
    # one by one copied the growing string every time (quadratic in a long repeated value).
    blocks: list[dict[str, str]] = []
    cur: dict[str, list[str]] = {}
    for line in text.splitlines():
        if not line.strip():
            if cur:
                blocks.append({k: "\n".join(v) for k, v in cur.items()})
                cur = {}
            continue
        key, sep, value = line.partition("=")
        if sep:
            cur.setdefault(key, []).append(value)
    if cur:
        blocks.append({k: "\n".join(v) for k, v in cur.items()})
    return blocks


def parse_timestamp(value: str | None) -> datetime | None:
    """A systemd time in a machine format → aware UTC :class:`datetime`, or ``None`` for n/a.

    Accepts ``@<seconds>`` (``--timestamp=unix``) and a bare integer of µs since the epoch (the
    raw ``…USec`` D-Bus value, e.g. from ``busctl`` or ``list-timers -o json``). Empty, ``n/a``,
    ``0``, ``@0`` and the ``UINT64_MAX`` "infinity" value mean "no time" → ``None``. Raises
    :class:`ValueError` for locale text (``Sat 2026-11-29 …``), which this module never parses.
    """
    if value is None:
        return None
    v = value.strip()
    if v in ("", "n/a", "0", "@0", "infinity", str(2**64 - 1)):
        return None
    shown = v if len(v) <= 40 else f"{v[:40]}…"
    try:
        if v.startswith("@"):
            secs = float(v[1:])
            if not math.isfinite(secs):
                raise ValueError("not finite")
            return None if secs <= 0 else datetime.fromtimestamp(secs, UTC)
        if v.isascii() and v.isdigit() and len(v) <= 20:
            usec = int(v)
            return None if usec <= 0 or usec >= 2**63 else datetime.fromtimestamp(usec / 1e6, UTC)
    except (ValueError, OverflowError, OSError) as exc:  # year out of range, inf, nan
        raise ValueError(f"systemd time {shown!r} is out of range or not a number ({exc})"
                         ) from None
    raise ValueError(f"not a machine-format systemd time: {shown!r} (expected @SECONDS or µs)")


def parse_bool(value: str | None) -> bool | None:
    """systemd booleans (``yes``/``no``/``true``/``false``/``1``/``0``) → bool; else ``None``."""
    if value is None:
        return None
    v = value.strip().lower()
    if v in ("yes", "true", "1", "on"):
        return True
    if v in ("no", "false", "0", "off"):
        return False
    return None


_SCHED_HEAD_RE = re.compile(r"\s*(\w+)=([^\n]*)")


def parse_schedule(*values: str | None) -> tuple[str, ...]:
    """``TimersCalendar`` / ``TimersMonotonic`` values → ``("OnCalendar=*-*-* 02:00:00", …)``.

    systemd prints each trigger as ``{ OnCalendar=… ; next_elapse=… }``; only the definition
    before the first ``;`` is kept (the elapse is read from the dedicated properties).
    """
    # Split on "{" and cut at the first ";": linear in the text. The regex this replaced
    # (``\{\s*(\w+)=(.*?)\s*;``) rescanned to the end of the text from every "{" when no ";"
    # followed: quadratic on a long systemctl value.
    out: list[str] = []
    for v in values:
        for chunk in (v or "").split("{")[1:]:
            head, sep, _ = chunk.partition(";")
            if not sep:
                continue
            m = _SCHED_HEAD_RE.match(head)
            if m is not None:
                out.append(f"{m.group(1)}={m.group(2).strip()}")
    return tuple(out)


def _machine_time(value: str | None) -> datetime | None:
    """:func:`parse_timestamp`, but ``None`` for a value not in a machine format."""
    try:
        return parse_timestamp(value)
    except ValueError:
        return None


machine_time = _machine_time
"""Public name of :func:`_machine_time`: a ``--timestamp=unix`` time, ``None`` when absent or
not in a machine format (the probe's interference monitor reads units' times through it)."""


def _none_if_empty(v: str | None) -> str | None:
    return v if v not in (None, "") else None


def service_running(active_state: str | None, sub_state: str | None) -> bool | None:
    """Whether a service is running now, from its systemd states (``None`` when unknown).

    Running: ``activating``/``deactivating``/``reloading``/``refreshing`` (a ``Type=oneshot``
    service is ``activating``/``start`` while its command runs), or ``active`` with a sub-state
    other than ``exited`` (``active``/``exited`` is a finished oneshot with RemainAfterExit=yes).
    """
    if not active_state:
        return None
    if active_state in _RUNNING_STATES:
        return True
    if active_state == "active":
        return sub_state != "exited"
    return False


def build_timer_state(unit: str, props: dict[str, str], service: ServiceState | None,
                      times: tuple[datetime | None, datetime | None] = (None, None)) -> TimerState:
    """Assemble a :class:`TimerState` from ``systemctl show`` properties (pure).

    ``times``: ``(next elapse, last trigger)`` from ``list-timers`` JSON
    (:func:`parse_list_timers_json`).
    """
    persistent = parse_bool(props.get("Persistent"))
    return TimerState(
        unit=unit,
        load_state=_none_if_empty(props.get("LoadState")),
        active_state=_none_if_empty(props.get("ActiveState")),
        sub_state=_none_if_empty(props.get("SubState")),
        unit_file_state=_none_if_empty(props.get("UnitFileState")),
        result=_none_if_empty(props.get("Result")),
        next_elapse=times[0],
        last_trigger=times[1],
        schedule=parse_schedule(props.get("TimersCalendar"), props.get("TimersMonotonic")),
        persistent=persistent,
        persistent_warning=PERSISTENT_WARNING if persistent else None,
        service=service,
        active_since=_machine_time(props.get("ActiveEnterTimestamp")),
    )


def parse_list_timers_json(text: str) -> dict[str, tuple[datetime | None, datetime | None]]:
    """``systemctl list-timers --all -o json`` → ``{timer unit: (next elapse, last trigger)}``.

    systemd 252 prints ``[{"next": µs, "left": µs, "last": µs, "passed": µs, "unit": "x.timer",
    "activates": "x.service"}, …]`` (µs since the epoch, UTC); ``null`` or 0 mean n/a → ``None``,
    and so does a value that is not a positive integer or is past year 9999.
    Raises :class:`ValueError` (an :class:`~seat_console.core.untrusted.InputError` naming
    the command for JSON it refuses: too deep, NaN, oversize) for text that is not that shape.
    """
    data = load_json(text, "systemctl list-timers -o json")
    if not isinstance(data, list):
        raise ValueError("systemctl list-timers -o json: not a JSON list")

    def usec(v: object) -> datetime | None:
        # one odd value (negative, past year 9999, not an integer) blanks that time only
        if not isinstance(v, int) or isinstance(v, bool) or v <= 0:
            return None
        try:
            return parse_timestamp(str(v))
        except ValueError:
            return None

    out: dict[str, tuple[datetime | None, datetime | None]] = {}
    for row in data:
        if isinstance(row, dict) and isinstance(row.get("unit"), str):
            out[row["unit"]] = (usec(row.get("next")), usec(row.get("last")))
    return out


def check_unit_name(unit: str) -> str:
    """Return ``unit`` if it is a plausible systemd unit name; raise :class:`ValueError` (naming
    it) otherwise — e.g. a leading ``-`` that ``systemctl`` would take as an option."""
    if not _UNIT_RE.match(unit) or "." not in unit:
        raise ValueError(f"{unit!r} is not a systemd unit name")
    return unit


# -- reading ---------------------------------------------------------------------------------
def _explain_systemctl(res: CommandResult) -> tuple[str, str]:
    err = res.stderr.strip()
    if any(m in err for m in _NO_SYSTEMD):
        return "no-systemd", (f"systemd is not reachable on {res.where}: "
                              f"{err.splitlines()[0] if err else res.failure}")
    if res.unreachable:
        return "unreachable", res.failure or f"{res.where} not reachable"
    if res.timed_out:
        return "timeout", res.failure or "timed out"
    if res.rc == 127:
        return "not-found", res.failure or "systemctl not found"
    tail = f": {err.splitlines()[-1]}" if err else ""
    return "error", (res.failure or "systemctl failed") + tail


def _service_state(name: str, sp: dict[str, str]) -> ServiceState:
    """A :class:`ServiceState` from the service's ``systemctl show`` block (pure)."""
    return ServiceState(
        unit=name, load_state=_none_if_empty(sp.get("LoadState")),
        active_state=_none_if_empty(sp.get("ActiveState")),
        sub_state=_none_if_empty(sp.get("SubState")),
        result=_none_if_empty(sp.get("Result")),
        running=service_running(sp.get("ActiveState"), sp.get("SubState")),
        last_started=_machine_time(sp.get("ExecMainStartTimestamp")))


def default_services(units: Sequence[str]) -> tuple[str, ...]:
    """The services ``units`` (timer unit names) trigger when their ``Unit=`` is not set: "a
    service that has the same name as the timer unit, except for the suffix" (systemd.timer(5),
    ``Unit=``), sorted and without repeats, as :func:`_show_together` takes them. The guess
    for a first read, before any answer named the services; a timer with another ``Unit=``
    makes that one answer not fit, and the read falls back to two commands."""
    return tuple(sorted({u.removesuffix(".timer") + ".service" for u in units}))


def _show_together(transport: Transport, units: Sequence[str], services: Any,
                   timeout_s: float) -> tuple[list[dict[str, str]], list[dict[str, str]]] | None:
    """The timers' and their services' ``systemctl show`` blocks in **one** command, the
    services being those the last read found (``services``: a tuple of unit names, sorted):
    ``(timer blocks, service blocks)``, or ``None`` — nothing known yet, the command failed,
    the answer has another number of blocks, or the timers now trigger other services — and
    the caller reads them with two commands as before (so a failure is still reported per
    part). One ``docker exec`` / ``ssh`` round trip of two saved per read (issue 33)."""
    if not isinstance(services, tuple) or not services:
        return None
    props = dict.fromkeys((*TIMER_PROPERTIES, *SERVICE_PROPERTIES))
    res = transport.run(["systemctl", "show", "--timestamp=unix", "-p", ",".join(props),
                         "--", *units, *services], timeout_s=timeout_s)
    if not res.ok:
        return None
    blocks = parse_show_blocks(res.stdout)
    if len(blocks) != len(units) + len(services):
        return None
    timers, svcs = blocks[:len(units)], blocks[len(units):]
    if tuple(sorted({b.get("Unit") for b in timers if b.get("Unit")})) != services:
        return None
    if any(b.get("Id") not in (None, name) for b, name in zip(svcs, services, strict=True)):
        return None
    # a timer's block holds the timer's properties only (systemctl prints no property the
    # unit's type lacks), so it reads as the separate command's block
    return timers, svcs


TIMES_MAX_AGE_S = 60.0
"""The longest :func:`read_timers` reuses a ``list-timers`` answer while nothing it depends on
changed (seconds)."""


def read_timers(transport: Transport, units: Sequence[str], *,
                timeout_s: float = 10.0,
                times_cache: dict[str, Any] | None = None) -> TimersReading | Unavailable:
    """Read the state of ``units`` (timer unit names) on the node behind ``transport``.

    Three commands: ``systemctl show`` for the timers, ``systemctl list-timers -o json`` for
    their next elapse and last trigger, ``systemctl show`` for the services. ``times_cache``
    (a dict the caller keeps between reads): the ``list-timers`` answer is reused, without
    running it, while the timers' and their services' ``systemctl show`` blocks are unchanged
    (a trigger starts the service: its start time moves; a start, stop or reload changes the
    timer's block) and it is younger than :data:`TIMES_MAX_AGE_S` — one ``docker exec`` /
    ``ssh`` round trip of three saved per read on a quiet node; and the timers' and services'
    ``systemctl show`` are one command (:func:`_show_together`: the services the last read
    found, or before any read, and without a ``times_cache``, those systemd's default names,
    :func:`default_services`; the two commands as before when that answer does not fit). Returns
    :class:`TimersReading`, or :class:`Unavailable` (kind ``no-systemd``,
    ``timeout``, ``not-found``, ``unreachable``, ``error``) with the reason. Never raises for
    node problems; raises :class:`ValueError` for an invalid unit name.
    """
    units = [check_unit_name(u) for u in units]
    read_at = utcnow()
    if not units:
        return TimersReading(where=transport.where, read_at=read_at, timers=())
    services_known = (times_cache or {}).get("services")
    blocks, svc_blocks = _show_together(
        transport, units, services_known if services_known is not None
        else default_services(units), timeout_s) or (None, None)
    if blocks is None:
        res = transport.run(["systemctl", "show", "--timestamp=unix",
                             "-p", ",".join(TIMER_PROPERTIES), "--", *units],
                            timeout_s=timeout_s)
        if not res.ok:
            kind, reason = _explain_systemctl(res)
            return Unavailable(source="timers", kind=kind, reason=reason)
        blocks = parse_show_blocks(res.stdout)
    if len(blocks) != len(units):
        return Unavailable(source="timers", kind="error", reason=(
            f"systemctl show returned {len(blocks)} blocks for {len(units)} units"))
    services = [b.get("Unit") or None for b in blocks]
    notes: list[str] = []
    svc_states: dict[str, ServiceState] = {}
    sres_failure: str | None = None
    wanted = sorted({s for s in services if s})
    if times_cache is not None:
        times_cache["services"] = tuple(wanted)
    if svc_blocks is not None and len(svc_blocks) == len(wanted):
        for name, sp in zip(wanted, svc_blocks, strict=True):
            svc_states[name] = _service_state(name, sp)
    elif wanted:
        sres = transport.run(["systemctl", "show", "--timestamp=unix",
                              "-p", ",".join(SERVICE_PROPERTIES), "--", *wanted],
                             timeout_s=timeout_s)
        if sres.ok:
            for name, sp in zip(wanted, parse_show_blocks(sres.stdout), strict=False):
                svc_states[name] = _service_state(name, sp)
        else:
            sres_failure = sres.failure or "failed"
            notes.append(f"services not read ({sres.failure}); whether they run now is n/a")
    svc_why = None if sres_failure is None else f"systemctl show (services): {sres_failure}"
    times: dict[str, tuple[datetime | None, datetime | None]] = {}
    times_why: str | None = None
    loaded = [u for u, b in zip(units, blocks, strict=True) if b.get("LoadState") == "loaded"]
    key = (tuple(tuple(sorted(b.items())) for b in blocks),
           tuple(sorted((n, v.active_state, v.sub_state, v.last_started)
                        for n, v in svc_states.items())), sres_failure, tuple(loaded))
    cached = times_cache.get("times") if times_cache is not None else None
    if (loaded and cached is not None and sres_failure is None and times_cache is not None
            and times_cache.get("key") == key
            and time.monotonic() - times_cache.get("at", 0.0) < TIMES_MAX_AGE_S):
        times = cached
    elif loaded:
        lres = transport.run(["systemctl", "list-timers", "--all", "--output=json", "--",
                              *loaded], timeout_s=timeout_s)
        try:
            if not lres.ok:
                raise ValueError(lres.failure)
            times = parse_list_timers_json(lres.stdout)
            if times_cache is not None:
                times_cache.update(key=key, times=times, at=time.monotonic())
        except ValueError as exc:
            times_why = f"systemctl list-timers: {exc}"
            notes.append(f"list-timers JSON not available ({exc}); next elapse and last "
                         "trigger are n/a")
    timers = []
    for unit, props, svc in zip(units, blocks, services, strict=True):
        service = (svc_states.get(svc) or ServiceState(unit=svc)) if svc else None
        errors: dict[str, str] = {}
        if svc and svc not in svc_states:
            errors["service"] = svc_why or f"{svc} missing from systemctl show's answer"
        if unit in loaded and unit not in times:
            errors["times"] = times_why or f"{unit} missing from systemctl list-timers' answer"
        state = build_timer_state(unit, props, service, times.get(unit, (None, None)))
        timers.append(state.model_copy(update={"errors": errors}) if errors else state)
    return TimersReading(where=transport.where, read_at=read_at, timers=tuple(timers),
                         notes=tuple(notes))


UNIT_STATE_PROPERTIES = ("Id", "Names", "LoadState", "ActiveState", "SubState")
"""Properties :func:`read_unit_states` and :func:`read_unit_states_matching` read."""

_PATTERN_RE = re.compile(r"^[A-Za-z0-9:_.\\@*?\[\]][A-Za-z0-9:_.\\@*?\[\]-]*$")


def check_unit_pattern(pattern: str) -> str:
    """Return ``pattern`` if it is a plausible systemd unit glob (``seat-hold-*-lease.timer``:
    unit-name characters and ``*``, ``?``, ``[…]``, with a ``.`` and at least one glob
    character); raise :class:`ValueError` (naming it) otherwise."""
    if not _PATTERN_RE.match(pattern) or "." not in pattern or not any(
            c in pattern for c in "*?["):
        raise ValueError(f"{pattern!r} is not a systemd unit pattern")
    return pattern


class UnitStates(Frozen):
    """One ``systemctl show`` of named units and unit patterns
    (:func:`read_unit_states_matching`).

    ``named``: the named units, in argument order, with ``load_state`` / ``active_state`` /
    ``sub_state`` only (as :func:`read_unit_states` gives them); ``matched``: the units systemd
    has loaded now whose name matches a pattern (``unit`` = systemd's ``Id``), in systemd's
    order, each once — ``None`` when that part of the answer could not be trusted, with the
    reason in ``matched_error`` (the named units are still good: one bad matched block never
    blanks them)."""

    named: TimersReading
    matched: tuple[TimerState, ...] | None = ()
    matched_error: str | None = None


def _state(unit: str, b: dict[str, str]) -> TimerState:
    return TimerState(unit=unit, load_state=_none_if_empty(b.get("LoadState")),
                      active_state=_none_if_empty(b.get("ActiveState")),
                      sub_state=_none_if_empty(b.get("SubState")))


def split_unit_states(blocks: Sequence[dict[str, str]], units: Sequence[str],
                      patterns: Sequence[str]
                      ) -> tuple[tuple[TimerState, ...], tuple[TimerState, ...] | None,
                                 str | None]:
    """The blocks of ``systemctl show -p Id,Names,… -- UNIT… PATTERN…`` → ``(named states,
    matched states or None, why the matched part is None)`` (pure).

    systemctl prints the named units first, in argument order, then the loaded units the
    patterns match (each once; systemd 252 ``expand_unit_names``, checked in the lab). A named
    unit's block is positional and must name it (``Id`` or one of ``Names``, an alias) when it
    says who it is; a block without ``Id`` is taken by position only when no pattern was
    given. Raises :class:`ValueError` naming the block when a named unit is missing or its
    block names another unit: the positions cannot be trusted, so nothing is. A matched block
    without an ``Id``, with an ``Id`` that is not a unit name, or one that matches no pattern
    makes the matched part ``None`` only."""
    if len(blocks) < len(units) or (not patterns and len(blocks) != len(units)):
        raise ValueError(f"systemctl show returned {len(blocks)} blocks for {len(units)} units"
                         + (f" and {len(patterns)} patterns" if patterns else ""))
    named = []
    for i, (unit, b) in enumerate(zip(units, blocks, strict=False)):
        ident = b.get("Id")
        if ident is None and patterns:
            raise ValueError(f"systemctl show: block {i + 1} (for {unit}) has no Id")
        if ident is not None and ident != unit and unit not in b.get("Names", "").split():
            shown = ident if len(ident) <= 80 else ident[:80] + "…"
            raise ValueError(f"systemctl show: block {i + 1} is {shown!r}, expected {unit}")
        named.append(_state(unit, b))
    matched: list[TimerState] = []
    seen: set[str] = set()
    for i, b in enumerate(blocks[len(units):], start=len(units) + 1):
        ident = b.get("Id")
        shown = None if ident is None else (ident if len(ident) <= 80 else ident[:80] + "…")
        if not ident:
            return tuple(named), None, f"systemctl show: matched block {i} has no Id"
        try:
            check_unit_name(ident)
        except ValueError:
            return tuple(named), None, (f"systemctl show: matched block {i}: {shown!r} is "
                                        "not a unit name")
        if not any(fnmatch.fnmatchcase(ident, p) for p in patterns):
            return tuple(named), None, (f"systemctl show: matched block {i}: {shown!r} "
                                        f"matches none of {', '.join(patterns)}")
        if ident not in seen:
            seen.add(ident)
            matched.append(_state(ident, b))
    return tuple(named), tuple(matched), None


def read_unit_states_matching(transport: Transport, units: Sequence[str],
                              patterns: Sequence[str], *, timeout_s: float = 10.0
                              ) -> UnitStates | Unavailable:
    """The load and active states of ``units`` and of every loaded unit matching
    ``patterns``, in **one** command (``systemctl show -p Id,Names,LoadState,ActiveState,
    SubState -- UNIT… PATTERN…``; a pattern matches only the units systemd has loaded now, as
    ``systemctl list-units`` lists them): a :class:`UnitStates`. For a reader that polls often
    (the exporter: the profile's timers and the hold leases in one ``docker exec`` / ``ssh``).
    Returns :class:`Unavailable` (source ``timers``; kinds as :func:`read_timers`) when the
    command fails or the named units' blocks cannot be trusted
    (:func:`split_unit_states`); raises :class:`ValueError` for an invalid unit name or
    pattern."""
    units = [check_unit_name(u) for u in units]
    patterns = [check_unit_pattern(p) for p in patterns]
    read_at = utcnow()
    if not units and not patterns:
        return UnitStates(named=TimersReading(where=transport.where, read_at=read_at,
                                              timers=()))
    res = transport.run(["systemctl", "show", "-p", ",".join(UNIT_STATE_PROPERTIES), "--",
                         *units, *patterns], timeout_s=timeout_s)
    if not res.ok:
        kind, reason = _explain_systemctl(res)
        return Unavailable(source="timers", kind=kind, reason=reason)
    try:
        named, matched, why = split_unit_states(parse_show_blocks(res.stdout), units, patterns)
    except ValueError as exc:
        return Unavailable(source="timers", kind="error", reason=str(exc))
    return UnitStates(named=TimersReading(where=transport.where, read_at=read_at, timers=named),
                      matched=matched, matched_error=why)


def read_unit_states(transport: Transport, units: Sequence[str], *,
                     timeout_s: float = 10.0) -> TimersReading | Unavailable:
    """The load and active states of ``units`` only, in **one** command (``systemctl show -p
    Id,Names,LoadState,ActiveState,SubState -- UNIT…``): a :class:`TimersReading` whose timers
    have ``load_state`` / ``active_state`` / ``sub_state`` and nothing else (no next elapse, no
    service: :func:`read_timers` reads those with two more commands). Returns
    :class:`Unavailable` as :func:`read_timers` does (and when a block names another unit);
    raises :class:`ValueError` for an invalid unit name. :func:`read_unit_states_matching`
    adds unit patterns to the same command."""
    r = read_unit_states_matching(transport, units, (), timeout_s=timeout_s)
    return r if isinstance(r, Unavailable) else r.named


# -- source ----------------------------------------------------------------------------------
class TimerSource(Source):
    """Polls the profile's timer units through the node transport (``name = "timers"``)."""

    name = "timers"

    def __init__(self, transport: Transport, units: Sequence[str], timeout_s: float = 10.0, *,
                 owns_transport: bool = True) -> None:
        self.transport = transport
        self.units = [check_unit_name(u) for u in units]
        self.timeout_s = timeout_s
        self.owns_transport = owns_transport
        """``False``: the transport is shared (the app's node context closes it)."""
        self._times: dict[str, Any] = {}
        """:func:`read_timers`' ``list-timers`` answer kept between reads."""

    def read(self) -> BaseModel:
        """One :class:`TimersReading`, or :class:`Unavailable` with the reason; never raises."""
        try:
            return read_timers(self.transport, self.units, timeout_s=self.timeout_s,
                               times_cache=self._times)
        except Exception as exc:  # noqa: BLE001 - a source never raises into the UI
            return Unavailable(source=self.name, kind="error",
                               reason=f"{type(exc).__name__}: {exc}")

    def close(self) -> None:
        """Close the transport (unless it is shared)."""
        if self.owns_transport:
            self.transport.close()


def make_source(loaded: LoadedProfile, *, context: Any | None = None) -> Source:
    """The timers source for ``loaded``'s node and ``timers`` units.

    ``context``: the app's :class:`~seat_console.node.context.NodeContext` — its transport is
    used (the very object the hold's stop/start and verify steps use); without it the source
    makes its own. An invalid transport setting becomes a source that always reports it as
    :class:`Unavailable` (the app still starts).
    """
    try:
        if context is not None:
            return TimerSource(context.transport, loaded.profile.timers.all_units,
                               owns_transport=False)
        transport = make_transport(loaded)
    except TransportError as exc:
        return BrokenSource("timers", str(exc))
    return TimerSource(transport, loaded.profile.timers.all_units)


# -- when a stopped timer would elapse once started (issue 17) ----------------------------------
_SPAN_UNITS = {"us": 1e-6, "µs": 1e-6, "usec": 1e-6, "ms": 1e-3, "msec": 1e-3, "s": 1.0,
               "sec": 1.0, "second": 1.0, "seconds": 1.0, "min": 60.0, "m": 60.0,
               "minute": 60.0, "minutes": 60.0, "h": 3600.0, "hr": 3600.0, "hour": 3600.0,
               "hours": 3600.0, "d": 86400.0, "day": 86400.0, "days": 86400.0,
               "w": 604800.0, "week": 604800.0, "weeks": 604800.0,
               "M": 2629800.0, "month": 2629800.0, "months": 2629800.0,
               "y": 31557600.0, "year": 31557600.0, "years": 31557600.0}
_SPAN_RE = re.compile(r"(\d+(?:\.\d+)?)\s*([A-Za-zµ]+)")

MONOTONIC_BASES = ("OnActiveUSec", "OnBootUSec", "OnStartupUSec", "OnUnitActiveUSec",
                   "OnUnitInactiveUSec")
"""The monotonic trigger kinds as ``systemctl show`` names them in ``TimersMonotonic``."""

CONTAINER_VIRT = frozenset({"docker", "podman", "lxc", "lxc-libvirt", "systemd-nspawn",
                            "openvz", "rkt", "wsl", "proot", "pouch", "container-other"})
"""``Virtualization=`` values that are containers: there ``OnBootSec=`` counts from the
manager's own start (systemd ``src/core/timer.c``, ``TIMER_BOOT`` falls through to
``TIMER_STARTUP`` when ``detect_container()`` is true)."""


def parse_timespan(text: str) -> float:
    """A systemd time span as ``systemctl show`` prints it (``2min``, ``1min 30s``,
    ``8min 20.556743s``, ``1h 5min``, ``100ms``, ``0``) → seconds (float).

    Units as systemd.time(7) lists them (``us``, ``ms``, ``s``, ``min``, ``h``, ``d``, ``w``,
    ``M`` = 30.44 days, ``y`` = 365.25 days). Raises :class:`ValueError` naming the text for
    anything else (empty, ``infinity``, an unknown unit, text between the parts)."""
    v = (text or "").strip()
    shown = v if len(v) <= 40 else f"{v[:40]}…"
    if v == "0":
        return 0.0
    if not v or len(v) > 200:
        raise ValueError(f"systemd time span {shown!r}: empty or too long")
    total, pos = 0.0, 0
    for m in _SPAN_RE.finditer(v):
        if v[pos:m.start()].strip():
            raise ValueError(f"systemd time span {shown!r}: unexpected {v[pos:m.start()]!r}")
        unit = m.group(2)
        if unit not in _SPAN_UNITS:
            raise ValueError(f"systemd time span {shown!r}: unknown unit {unit!r}")
        total += float(m.group(1)) * _SPAN_UNITS[unit]
        pos = m.end()
    if pos == 0 or v[pos:].strip():
        raise ValueError(f"systemd time span {shown!r}: not a time span")
    if not math.isfinite(total):
        raise ValueError(f"systemd time span {shown!r}: not finite")
    return total


def parse_monotonic_triggers(value: str | None) -> list[tuple[str, float]]:
    """``TimersMonotonic`` (one ``{ OnUnitActiveUSec=2min ; next_elapse=… }`` per line) →
    ``[("OnUnitActiveUSec", 120.0), …]``. A trigger whose span cannot be read is left out
    (one bad item never blanks the rest); raises nothing."""
    out: list[tuple[str, float]] = []
    for chunk in (value or "").split("{")[1:]:
        head, sep, _ = chunk.partition(";")
        m = _SCHED_HEAD_RE.match(head)
        if not sep or m is None:
            continue
        try:
            out.append((m.group(1), parse_timespan(m.group(2))))
        except ValueError:
            continue
    return out


def parse_calendar_elapses(value: str | None) -> list[tuple[str, datetime | None]]:
    """``TimersCalendar`` read with ``--timestamp=unix`` (``{ OnCalendar=*-*-* 02:00:00 ;
    next_elapse=@1796161500 }``) → ``[("*-*-* 02:00:00", elapse UTC or None), …]``. The
    elapse is the one systemd computed from the last trigger; it is kept while the timer is
    stopped (``v->next_elapse`` in ``src/core/timer.c``). Raises nothing."""
    out: list[tuple[str, datetime | None]] = []
    for chunk in (value or "").split("{")[1:]:
        head, sep, rest = chunk.partition(";")
        m = _SCHED_HEAD_RE.match(head)
        if not sep or m is None:
            continue
        nm = re.search(r"next_elapse=(\S+)", rest[:200])
        out.append((m.group(2).strip(), _machine_time(nm.group(1)) if nm else None))
    return out


class TriggerForecast(Frozen):
    """One trigger of a stopped timer and when it elapses once the timer is started:
    ``trigger`` (``OnUnitActiveSec=2min``), ``elapse`` (UTC; ``None`` = it never fires from
    this trigger), ``base`` (what the interval counts from, in words), ``at_once`` (the elapse
    is at or before the start: systemd runs the service the moment the timer starts)."""

    trigger: str
    elapse: datetime | None
    base: str
    at_once: bool = False


class StartForecast(Frozen):
    """What starting a (stopped) timer will do, read from the node (:func:`read_start_forecast`):
    ``unit``; ``at``: the start time assumed (UTC); ``triggers``; ``fires_at_once``: some
    trigger already passed; ``next_elapse``: the earliest elapse (UTC, ``None`` unknown);
    ``unknown``: parts that could not be read (one sentence each)."""

    unit: str
    at: datetime
    triggers: tuple[TriggerForecast, ...] = ()
    unknown: tuple[str, ...] = ()

    @property
    def fires_at_once(self) -> bool:
        """``True`` when a trigger's elapse is at or before the start."""
        return any(t.at_once for t in self.triggers)

    @property
    def next_elapse(self) -> datetime | None:
        """The earliest elapse of any trigger."""
        ts = [t.elapse for t in self.triggers if t.elapse is not None]
        return min(ts) if ts else None

    def warning(self) -> str | None:
        """``seat-conformance-smoke.timer fires at once when started: OnUnitActiveSec=2min
        elapsed at 2026-12-01T21:34:06Z (2 min after seat-conformance-smoke.service last
        started, 2026-12-01T21:32:06Z)`` — or ``None`` when no trigger passed."""
        hits = [t for t in self.triggers if t.at_once]
        if not hits:
            return None
        parts = [f"{t.trigger} elapsed at {_z(t.elapse)} ({t.base})" for t in hits]
        return f"{self.unit} fires at once when started: " + "; ".join(parts)


def _z(t: datetime | None) -> str:
    return "n/a" if t is None else t.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def forecast_start(unit: str, timer: dict[str, str], service: dict[str, str] | None,
                   manager: dict[str, str], last_trigger: datetime | None,
                   at: datetime) -> StartForecast:
    """When timer ``unit`` elapses if started at ``at`` (pure).

    ``timer``: its ``systemctl show --timestamp=unix`` properties (``TimersMonotonic``,
    ``TimersCalendar``, ``Persistent``); ``service``: the triggered unit's (``InactiveExitTimestamp``,
    ``InactiveEnterTimestamp``); ``manager``: ``systemctl show`` of the manager
    (``UserspaceTimestamp``, ``KernelTimestamp``, ``Virtualization``); ``last_trigger``: the
    timer's last trigger (``list-timers`` JSON ``last``).

    The rule is systemd's own (``src/core/timer.c``, ``timer_start`` → ``timer_enter_waiting``,
    systemd 252 as on the lab's node): starting a timer forgets its last trigger (a
    ``Persistent=true`` one reloads it from its stamp file), then each trigger elapses at
    ``OnActiveSec``: the start + span; ``OnBootSec``: boot (in a container: the manager's start)
    + span; ``OnStartupSec``: the manager's start + span; ``OnUnitActiveSec``: the service's
    last activation (``InactiveExitTimestamp``) + span; ``OnUnitInactiveSec``: its last
    deactivation (``InactiveEnterTimestamp``) + span; ``OnCalendar``: the next calendar time
    after the last trigger when ``Persistent=true`` (the elapse systemd computed; systemd 252
    prints ``next_elapse=(null)`` for a stopped timer — checked on the lab — so it is then
    "unknown" and the caller uses the elapse it recorded before stopping it), else the next
    one after the start (never at once). An elapse at or
    before the start fires the service at once. An ``OnBootSec``/``OnStartupSec`` elapse that
    passed before the timer's last trigger — or before its service last started (systemd 252
    clears ``LastTriggerUSec`` when a timer is stopped) — was disabled by systemd (a one-time
    trigger, ``v->disabled``, not re-enabled by a start) and is left out. ``RandomizedDelaySec=`` is ignored (it only delays)."""
    trig: list[TriggerForecast] = []
    unknown: list[str] = []
    svc = service or {}
    virt = (manager.get("Virtualization") or "").strip()
    userspace = _machine_time(manager.get("UserspaceTimestamp"))
    kernel = _machine_time(manager.get("KernelTimestamp"))
    boot = userspace if virt in CONTAINER_VIRT else (kernel or userspace)
    svc_name = timer.get("Unit") or "its service"
    for kind, span in parse_monotonic_triggers(timer.get("TimersMonotonic")):
        shown = f"{kind.replace('USec', 'Sec')}={fmt_duration(span, style='systemd')}"
        if kind == "OnActiveUSec":
            base, words = at, "from the start"
        elif kind in ("OnBootUSec", "OnStartupUSec"):
            base = boot if kind == "OnBootUSec" else userspace
            words = ("after boot" if kind == "OnBootUSec" and virt not in CONTAINER_VIRT
                     else f"after the node's systemd started, {_z(base)}")
            if base is None:
                unknown.append(f"{shown}: the node's boot/start time was not read")
                continue
            e = base + _td(span)
            fired = [x for x in (last_trigger, _machine_time(svc.get("InactiveExitTimestamp")))
                     if x is not None]
            if fired and e <= max(fired):
                continue   # a one-time trigger that already passed: systemd disabled it
            trig.append(TriggerForecast(trigger=shown, elapse=e, base=words, at_once=e <= at))
            continue
        elif kind == "OnUnitActiveUSec":
            base = _machine_time(svc.get("InactiveExitTimestamp"))
            words = f"after {svc_name} last started, {_z(base)}"
            if base is None:
                trig.append(TriggerForecast(trigger=shown, elapse=None,
                                            base=f"{svc_name} never ran: no elapse from it"))
                continue
        elif kind == "OnUnitInactiveUSec":
            base = _machine_time(svc.get("InactiveEnterTimestamp"))
            words = f"after {svc_name} last ended, {_z(base)}"
            if base is None:
                trig.append(TriggerForecast(trigger=shown, elapse=None,
                                            base=f"{svc_name} never ended: no elapse from it"))
                continue
        else:
            unknown.append(f"{shown}: unknown trigger kind")
            continue
        e = base + _td(span)
        trig.append(TriggerForecast(trigger=shown, elapse=e, base=words, at_once=e <= at))
    persistent = parse_bool(timer.get("Persistent"))
    for spec, elapse in parse_calendar_elapses(timer.get("TimersCalendar")):
        shown = f"OnCalendar={spec}"
        if persistent and elapse is not None:
            trig.append(TriggerForecast(
                trigger=shown, elapse=elapse, at_once=elapse <= at,
                base=f"Persistent=true: the next calendar time after the last trigger "
                     f"{_z(last_trigger)}"))
        elif persistent:
            unknown.append(f"{shown}: Persistent=true but its next elapse was not read")
        else:
            trig.append(TriggerForecast(trigger=shown, elapse=None if elapse is None or
                                        elapse <= at else elapse,
                                        base="the next calendar time after the start"))
    return StartForecast(unit=unit, at=at, triggers=tuple(trig), unknown=tuple(unknown))


def _td(seconds: float) -> Any:
    from datetime import timedelta

    return timedelta(seconds=seconds)


FORECAST_TIMER_PROPS = ("Id", "Unit", "Persistent", "TimersMonotonic", "TimersCalendar")
FORECAST_SERVICE_PROPS = ("Id", "InactiveExitTimestamp", "InactiveEnterTimestamp")
FORECAST_MANAGER_PROPS = ("Virtualization", "UserspaceTimestamp", "KernelTimestamp")


def read_start_forecast(transport: Transport, units: Sequence[str], *,
                        at: datetime | None = None, timeout_s: float = 10.0
                        ) -> dict[str, StartForecast] | Unavailable:
    """:func:`forecast_start` for each of ``units`` as read on the node now: ``systemctl show
    --timestamp=unix`` of the timers, of their services and of the manager, and ``list-timers
    -o json`` for the last triggers. ``at``: the start time assumed (default now, UTC).
    Returns ``{unit: StartForecast}`` or :class:`Unavailable` with the reason; raises
    :class:`ValueError` for an invalid unit name."""
    units = [check_unit_name(u) for u in units]
    at = at or utcnow()
    if not units:
        return {}
    res = transport.run(["systemctl", "show", "--timestamp=unix", "-p",
                         ",".join(FORECAST_TIMER_PROPS), "--", *units], timeout_s=timeout_s)
    if not res.ok:
        kind, reason = _explain_systemctl(res)
        return Unavailable(source="timers", kind=kind, reason=reason)
    blocks = parse_show_blocks(res.stdout)
    if len(blocks) != len(units):
        return Unavailable(source="timers", kind="error", reason=(
            f"systemctl show returned {len(blocks)} blocks for {len(units)} units"))
    services = sorted({b.get("Unit") for b in blocks if b.get("Unit")})
    svc: dict[str, dict[str, str]] = {}
    if services:
        sres = transport.run(["systemctl", "show", "--timestamp=unix", "-p",
                              ",".join(FORECAST_SERVICE_PROPS), "--", *services],
                             timeout_s=timeout_s)
        if sres.ok:
            for sp in parse_show_blocks(sres.stdout):
                if sp.get("Id"):
                    svc[sp["Id"]] = sp
    mres = transport.run(["systemctl", "show", "--timestamp=unix", "-p",
                          ",".join(FORECAST_MANAGER_PROPS)], timeout_s=timeout_s)
    manager = (parse_show_blocks(mres.stdout) or [{}])[0] if mres.ok else {}
    lres = transport.run(["systemctl", "list-timers", "--all", "--output=json", "--", *units],
                         timeout_s=timeout_s)
    try:
        times = parse_list_timers_json(lres.stdout) if lres.ok else {}
    except ValueError:
        times = {}
    out: dict[str, StartForecast] = {}
    for unit, b in zip(units, blocks, strict=True):
        f = forecast_start(unit, b, svc.get(b.get("Unit") or ""), manager,
                           times.get(unit, (None, None))[1], at)
        extra = []
        if not mres.ok:
            extra.append("the node's boot time was not read")
        if b.get("Unit") and b.get("Unit") not in svc:
            extra.append(f"{b.get('Unit')}'s last run was not read")
        if extra:
            f = f.model_copy(update={"unknown": (*f.unknown, *extra)})
        out[unit] = f
    return out


__all__ = ["PERSISTENT_WARNING", "ServiceState", "StartForecast", "TimerSource", "TimerState",
           "TimersReading", "TriggerForecast", "UnitStates", "build_timer_state", "check_unit_name",
           "check_unit_pattern", "default_services", "machine_time",
           "forecast_start", "make_source", "parse_calendar_elapses", "parse_list_timers_json",
           "parse_monotonic_triggers", "parse_schedule", "parse_show_blocks", "parse_timestamp",
           "parse_timespan", "read_start_forecast", "read_timers", "read_unit_states",
           "read_unit_states_matching", "service_running", "split_unit_states"]
