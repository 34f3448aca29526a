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

import math
import re
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from pydantic import BaseModel, Field

from seat_console.core.profile import LoadedProfile
from seat_console.node.runner import CommandResult
from seat_console.core.base import BrokenSource, Frozen, Source, Unavailable, utcnow
from seat_console.core.untrusted import load_json
from seat_console.core.partial import Kept, keep
from seat_console.node.transport import Transport, TransportError, make_transport

PERSISTENT_WARNING = ("Persistent=yes: starting it again may fire a missed run at once (systemd "
                      "stores the last trigger on disk and catches up on a schedule missed while "
                      "the timer was stopped)")
"""The warning shown next to a ``Persistent=yes`` timer (systemd.timer(5), ``Persistent=``)."""

TIMER_PROPERTIES = ("Id", "LoadState", "ActiveState", "SubState", "UnitFileState", "Unit",
                    "Persistent", "Result", "TimersCalendar", "TimersMonotonic")
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


def read_timers(transport: Transport, units: Sequence[str], *,
                timeout_s: float = 10.0) -> TimersReading | Unavailable:
    """Read the state of ``units`` (timer unit names) on the node behind ``transport``.

    Three commands: ``systemctl show`` for the timers, ``systemctl list-timers -o json`` for
    their next elapse and last trigger, ``systemctl show`` for the services. Returns
    :class:`TimersReading`, or :class:`Unavailable` (kind ``no-systemd``,
    ``timeout``, ``not-found``, ``unreachable``, ``error``) with the reason. Never raises for
    node problems; raises :class:`ValueError` for an invalid unit name.
    """
    units = [check_unit_name(u) for u in units]
    read_at = utcnow()
    if not units:
        return TimersReading(where=transport.where, read_at=read_at, timers=())
    res = transport.run(["systemctl", "show", "--timestamp=unix",
                         "-p", ",".join(TIMER_PROPERTIES), "--", *units], timeout_s=timeout_s)
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
    if wanted:
        sres = transport.run(["systemctl", "show", "--timestamp=unix",
                              "-p", ",".join(SERVICE_PROPERTIES), "--", *wanted],
                             timeout_s=timeout_s)
        if sres.ok:
            for name, sp in zip(wanted, parse_show_blocks(sres.stdout), strict=False):
                svc_states[name] = ServiceState(
                    unit=name, load_state=_none_if_empty(sp.get("LoadState")),
                    active_state=_none_if_empty(sp.get("ActiveState")),
                    sub_state=_none_if_empty(sp.get("SubState")),
                    result=_none_if_empty(sp.get("Result")),
                    running=service_running(sp.get("ActiveState"), sp.get("SubState")),
                    last_started=_machine_time(sp.get("ExecMainStartTimestamp")))
        else:
            sres_failure = sres.failure or "failed"
            notes.append(f"services not read ({sres.failure}); whether they run now is n/a")
    svc_why = None if sres_failure is None else f"systemctl show (services): {sres_failure}"
    times: dict[str, tuple[datetime | None, datetime | None]] = {}
    times_why: str | None = None
    loaded = [u for u, b in zip(units, blocks, strict=True) if b.get("LoadState") == "loaded"]
    if loaded:
        lres = transport.run(["systemctl", "list-timers", "--all", "--output=json", "--",
                              *loaded], timeout_s=timeout_s)
        try:
            if not lres.ok:
                raise ValueError(lres.failure)
            times = parse_list_timers_json(lres.stdout)
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

    def read(self) -> BaseModel:
        """One :class:`TimersReading`, or :class:`Unavailable` with the reason; never raises."""
        try:
            return read_timers(self.transport, self.units, timeout_s=self.timeout_s)
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


__all__ = ["PERSISTENT_WARNING", "ServiceState", "TimerSource", "TimerState", "TimersReading",
           "build_timer_state", "check_unit_name", "make_source", "parse_list_timers_json",
           "parse_schedule", "parse_show_blocks", "parse_timestamp", "read_timers",
           "service_running"]
