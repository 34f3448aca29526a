"""The node writers: timer stop/start, the lease (a transient systemd timer), silence
create/expire/extend — each verified by reading the result back through a *source*.

Moved here from the sources (``console/sources/timers.py``, ``console/sources/silences.py``) so
that reading code cannot change the node: the sources only read; every change goes through this
module, called by runbook steps (:mod:`seat_console.actions.hold`).

* timers: ``systemctl stop|start -- UNIT`` through the node transport, then
  :func:`~seat_console.sources.timers.read_timers` until the state reads back (``inactive`` after
  stop, ``active`` after start), else :class:`TimerActionError`.
* the lease: ``systemd-run --on-active=<TTL>s --unit=<name> --description=… --timer-property=
  AccuracySec=1s -- <systemctl> start -- <timers…>`` (systemd-run(1); verified in the lab,
  ``shared/RECIPES.md``) — a transient ``<name>.timer`` + ``<name>.service`` on the node itself
  that starts the given timers when it elapses, whether or not a console is still alive.
  ``systemctl stop <name>.timer`` cancels it (the transient units vanish).
* silences: Alertmanager API v2 ``POST /api/v2/silences`` (with ``id`` to update),
  ``DELETE /api/v2/silence/{id}``; each verified with ``GET /api/v2/silence/{id}``. Alertmanager
  0.25 keeps the ID when only ``endsAt`` changes and issues a new one when the matchers change
  (checked in the lab): :func:`extend_silence` always uses the ID the response gives.
"""

from __future__ import annotations

import re
import time
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta

from seat_console.node.runner import CommandResult
from seat_console.node.transport import Transport, TransportError
from seat_console.core.profile import Matcher
from seat_console.core.base import Frozen, Unavailable, utcnow
from seat_console.node.alertmanager import (
    AlertmanagerClient,
    AlertmanagerError,
    Silence,
    SilenceMatcher,
    api_time,
)
from seat_console.sources.timers import (
    TimerState,
    check_unit_name,
    parse_list_timers_json,
    read_timers,
)


# -- timers ------------------------------------------------------------------------------------
class TimerActionError(Exception):
    """A timer stop/start failed or its read-back did not show the change.

    ``unit``, ``action`` and ``result`` (the :class:`~seat_console.node.runner.CommandResult`, or ``None``
    when the command succeeded but verification failed) are attributes.
    """

    def __init__(self, unit: str, action: str, message: str,
                 result: CommandResult | None = None) -> None:
        self.unit = unit
        self.action = action
        self.result = result
        super().__init__(message)


class TimerChange(Frozen):
    """A verified stop or start: the state ``before`` and ``after`` (read back), the command's
    result, and ``action`` (``"stop"`` / ``"start"``). ``changed`` is ``False`` when the timer
    was already in the wanted state (nothing to restore later)."""

    unit: str
    action: str
    before: TimerState
    after: TimerState
    command: CommandResult
    changed: bool


# -- stop / start (low level, for the hold action) -------------------------------------------
def _read_one(transport: Transport, unit: str, timeout_s: float) -> TimerState:
    r = read_timers(transport, [unit], timeout_s=timeout_s)
    if isinstance(r, Unavailable):
        raise TimerActionError(unit, "read", f"cannot read {unit} on {transport.where}: {r.reason}")
    return r.timers[0]


def _change(transport: Transport, unit: str, action: str, want: set[str],
            timeout_s: float, settle_s: float) -> TimerChange:
    check_unit_name(unit)
    if not unit.endswith(".timer"):
        raise ValueError(f"{unit!r} is not a timer unit (must end in '.timer')")
    before = _read_one(transport, unit, timeout_s)
    if not before.loaded:
        raise TimerActionError(unit, action, (
            f"{unit} on {transport.where} is not loaded (LoadState={before.load_state}); "
            f"nothing to {action}"))
    res = transport.run(["systemctl", action, "--", unit], timeout_s=timeout_s)
    if not res.ok:
        raise TimerActionError(unit, action, f"systemctl {action} {unit} failed: {res.failure}",
                               res)
    deadline = time.monotonic() + settle_s
    after = _read_one(transport, unit, timeout_s)
    while after.active_state not in want and time.monotonic() < deadline:
        time.sleep(0.2)
        after = _read_one(transport, unit, timeout_s)
    if after.active_state not in want:
        raise TimerActionError(unit, action, (
            f"systemctl {action} {unit} exited 0 but the read-back shows ActiveState="
            f"{after.active_state} (wanted {'/'.join(sorted(want))}); not counted as done"), res)
    return TimerChange(unit=unit, action=action, before=before, after=after, command=res,
                       changed=before.active_state not in want)


def stop_timer(transport: Transport, unit: str, *, timeout_s: float = 30.0,
               settle_s: float = 5.0) -> TimerChange:
    """Stop the timer ``unit`` (``systemctl stop``) and verify it reads back ``inactive``.

    Only the timer is stopped; a run of its service already in progress continues (systemd
    semantics) — check ``after.service.running``. ``settle_s``: how long to keep re-reading for
    the new state. Returns a :class:`TimerChange`; raises :class:`TimerActionError` when the
    unit is not loaded, the command fails, or the read-back does not show ``inactive``.
    """
    return _change(transport, unit, "stop", {"inactive"}, timeout_s, settle_s)


def start_timer(transport: Transport, unit: str, *, timeout_s: float = 30.0,
                settle_s: float = 5.0) -> TimerChange:
    """Start the timer ``unit`` (``systemctl start``) and verify it reads back ``active``.

    For a ``Persistent=yes`` timer this may fire a missed run at once (see
    :data:`PERSISTENT_WARNING`). Returns a :class:`TimerChange`; raises
    :class:`TimerActionError` on failure or when the read-back does not show ``active``.
    """
    return _change(transport, unit, "start", {"active"}, timeout_s, settle_s)


# -- silences (sent once, verified by reading back) ------------------------------------------
def create_silence(client: AlertmanagerClient, matchers: Sequence[SilenceMatcher | Matcher], *,
                   ends_at: datetime, starts_at: datetime | None = None,
                   created_by: str, comment: str) -> Silence:
    """Create a silence and verify it by reading it back.

    ``ends_at`` / ``starts_at`` must be timezone-aware (``starts_at`` defaults to now, UTC).
    Every matcher is sent with all four fields. Returns the silence as read back; raises
    :class:`AlertmanagerError` when the POST fails (kind ``http``/``auth``/…; Alertmanager's
    400 text is included) or the read-back differs (kind ``verify``: matchers, end time,
    creator, or a state other than pending/active).
    """
    ms = tuple(m if isinstance(m, SilenceMatcher) else SilenceMatcher.from_profile(m)
               for m in matchers)
    if not ms:
        raise ValueError("a silence needs at least one matcher")
    start = starts_at or utcnow()
    for label, t in (("ends_at", ends_at), ("starts_at", start)):
        if t.tzinfo is None:
            raise ValueError(f"{label} must be timezone-aware (UTC)")
    if ends_at <= start:
        raise ValueError("ends_at must be after starts_at")
    body = {"matchers": [m.to_api() for m in ms], "startsAt": api_time(start),
            "endsAt": api_time(ends_at), "createdBy": created_by, "comment": comment}
    sid = client.post_silence(body, "create silence")
    back = client.get_silence(sid)
    problems = []
    if set(back.matchers) != set(ms):
        problems.append(f"matchers {[str(m) for m in back.matchers]} != "
                        f"{[str(m) for m in ms]}")
    if abs((back.ends_at - ends_at).total_seconds()) > 1.0:
        problems.append(f"endsAt {back.ends_at.isoformat()} != {ends_at.isoformat()}")
    if back.created_by != created_by:
        problems.append(f"createdBy {back.created_by!r} != {created_by!r}")
    if back.state not in ("pending", "active"):
        problems.append(f"state {back.state}")
    if problems:
        raise AlertmanagerError("verify", f"silence {sid} read back differs: "
                                          + "; ".join(problems))
    return back

def expire_silence(client: AlertmanagerClient, silence_id: str) -> Silence:
    """Expire a silence (``DELETE /api/v2/silence/{id}``) and verify it reads back
    ``expired``. Returns the silence as read back; raises :class:`AlertmanagerError`."""
    client.delete_silence(silence_id)
    back = client.get_silence(silence_id)
    if back.state != "expired":
        raise AlertmanagerError("verify", f"silence {silence_id} still {back.state} after "
                                          "DELETE")
    return back


def hold_window(ttl_s: int, now: datetime | None = None) -> tuple[datetime, datetime]:
    """``(starts_at, ends_at)`` for a hold lease of ``ttl_s`` seconds from ``now`` (UTC)."""
    start = now or utcnow()
    return start, start + timedelta(seconds=ttl_s)


def extend_silence(client: AlertmanagerClient, silence: Silence, ends_at: datetime) -> Silence:
    """Move ``silence``'s end to ``ends_at`` (aware UTC): ``POST /api/v2/silences`` with its
    ``id``, same matchers, start, creator and comment. Returns the silence as read back by the ID
    the *response* gives (Alertmanager may issue a new one); raises :class:`AlertmanagerError`
    (kind ``verify`` when the read-back's end or state differs)."""
    if ends_at.tzinfo is None:
        raise ValueError("ends_at must be timezone-aware (UTC)")
    body = {"id": silence.id, "matchers": [m.to_api() for m in silence.matchers],
            "startsAt": api_time(silence.starts_at), "endsAt": api_time(ends_at),
            "createdBy": silence.created_by, "comment": silence.comment}
    sid = client.post_silence(body, f"extend silence {silence.id}")
    back = client.get_silence(sid)
    if abs((back.ends_at - ends_at).total_seconds()) > 1.0 or back.state != "active":
        raise AlertmanagerError("verify", (
            f"silence {sid} (extended from {silence.id}) reads back endsAt "
            f"{back.ends_at.isoformat()} state {back.state}; wanted {ends_at.isoformat()} active"))
    return back


# -- the lease: a transient systemd timer on the node ----------------------------------------
class LeaseError(Exception):
    """Scheduling, reading or cancelling a lease failed (message names the unit, the node and
    the command's failure — e.g. ``systemd-run`` not found on the node's PATH)."""


def lease_timer(name: str) -> str:
    """The timer unit of the lease named ``name`` (``<name>.timer``)."""
    return name if name.endswith(".timer") else f"{name}.timer"


def read_lease(transport: Transport, name: str, *, timeout_s: float = 10.0) -> TimerState:
    """The lease's timer as systemd reports it (``load_state`` ``not-found`` once it is gone:
    cancelled, or elapsed and collected). Raises :class:`LeaseError` when it cannot be read."""
    r = read_timers(transport, [lease_timer(name)], timeout_s=timeout_s)
    if isinstance(r, Unavailable):
        raise LeaseError(f"cannot read lease {lease_timer(name)} on {transport.where}: {r.reason}")
    return r.timers[0]


def lease_pending(state: TimerState) -> bool:
    """``True`` while the lease is armed (loaded, ``active``, waiting to elapse)."""
    return state.loaded and state.active_state == "active" and state.sub_state != "elapsed"


def schedule_lease(transport: Transport, name: str, ttl_s: int, timers: Sequence[str], *,
                   description: str, timeout_s: float = 30.0) -> tuple[TimerState, CommandResult]:
    """Schedule the lease: in ``ttl_s`` seconds the node itself starts ``timers``.

    ``name``: the transient unit name (``seat-hold-…-lease``); ``timers``: timer units the lease
    will start (must be non-empty). Both ``systemd-run`` and ``systemctl`` are resolved on the
    node first (a missing one is a :class:`LeaseError` naming it). Verified by reading the lease
    back: loaded, ``active`` and a next elapse within ``ttl_s`` + 60 s. Returns ``(state,
    command result)``.
    """
    check_unit_name(lease_timer(name))
    for t in timers:
        check_unit_name(t)
    if not timers:
        raise ValueError("a lease needs at least one timer to start")
    if ttl_s < 1:
        raise ValueError(f"ttl_s = {ttl_s}: must be at least 1 s")
    systemctl = _need(transport, "systemctl")
    _need(transport, "systemd-run")
    res = transport.run(["systemd-run", f"--on-active={int(ttl_s)}s",
                         f"--unit={name.removesuffix('.timer')}", f"--description={description}",
                         "--timer-property=AccuracySec=1s", "--", systemctl, "start", "--",
                         *timers], timeout_s=timeout_s)
    if not res.ok:
        raise LeaseError(f"systemd-run on {transport.where} failed: {res.failure}"
                         + _tail(res))
    st = read_lease(transport, name)
    deadline = utcnow() + timedelta(seconds=ttl_s + 60)
    if not lease_pending(st) or st.next_elapse is None or st.next_elapse > deadline:
        raise LeaseError(f"lease {lease_timer(name)} on {transport.where} reads back "
                         f"LoadState={st.load_state} ActiveState={st.active_state} next elapse "
                         f"{st.next_elapse}; not armed as asked")
    return st, res


def cancel_lease(transport: Transport, name: str, *, timeout_s: float = 30.0) -> TimerState:
    """Cancel the lease (``systemctl stop <name>.timer``) and verify it is no longer armed.
    Idempotent: a lease already gone is fine. Raises :class:`LeaseError`."""
    st = read_lease(transport, name)
    if st.loaded and st.active_state != "inactive":
        res = transport.run(["systemctl", "stop", "--", lease_timer(name)], timeout_s=timeout_s)
        if not res.ok:
            raise LeaseError(f"systemctl stop {lease_timer(name)} on {transport.where} failed: "
                             f"{res.failure}" + _tail(res))
        st = read_lease(transport, name)
    if lease_pending(st):
        raise LeaseError(f"lease {lease_timer(name)} on {transport.where} still armed after stop")
    return st


LEASE_GLOB = "seat-hold-*-lease.timer"
"""systemd glob matching every hold lease any console scheduled on the node."""
_LEASE_NAME_RE = re.compile(r"^seat-hold-[A-Za-z0-9_.:-]+-lease\.timer$")


DEFER_GLOB = "seat-hold-*-defer-*.timer"
"""systemd glob matching every deferred timer start a release scheduled on the node
(:func:`defer_unit`)."""
_DEFER_NAME_RE = re.compile(r"^seat-hold-[A-Za-z0-9_.:-]+-defer-[A-Za-z0-9_.:@-]+\.timer$")


def defer_unit(hold_id: str, timer: str) -> str:
    """The transient unit (no ``.timer``) that starts ``timer`` later for hold ``hold_id``'s
    release: ``<hold id>-defer-<timer without .timer>``."""
    return f"{hold_id}-defer-{timer.removesuffix('.timer')}"


def node_deferrals(transport: Transport, *, timeout_s: float = 10.0) -> list[TimerState]:
    """Every deferred timer start armed on the node now (:data:`DEFER_GLOB`), soonest first;
    as :func:`node_leases`. Raises :class:`LeaseError`."""
    return node_leases(transport, timeout_s=timeout_s, glob=DEFER_GLOB, name_re=_DEFER_NAME_RE)


def node_leases(transport: Transport, *, timeout_s: float = 10.0, glob: str | None = None,
                name_re: re.Pattern[str] | None = None) -> list[TimerState]:
    """Every hold lease armed on the node now, whoever scheduled it (another console, another
    state dir), oldest next elapse first: ``systemctl list-units --all --type=timer`` of
    :data:`LEASE_GLOB` for the names, then :func:`read_timers` for their state (only those
    :func:`lease_pending`). Raises :class:`LeaseError` (names the node and the failure) when
    they cannot be read."""
    try:
        systemctl = _need(transport, "systemctl")
        res = transport.run([systemctl, "list-units", "--all", "--type=timer", "--plain",
                             "--no-legend", "--no-pager", "--", glob or LEASE_GLOB],
                            timeout_s=timeout_s)
    except TransportError as exc:
        raise LeaseError(f"cannot list the hold leases on {transport.where}: {exc}") from None
    if not res.ok:
        raise LeaseError(f"cannot list the hold leases on {transport.where}: {res.failure}"
                         + _tail(res))
    names = sorted({line.split()[0] for line in res.stdout.splitlines()
                    if line.split() and (name_re or _LEASE_NAME_RE).match(
                        line.split()[0].lstrip("●* "))})
    if not names:
        return []
    r = read_timers(transport, names, timeout_s=timeout_s)
    if isinstance(r, Unavailable):
        raise LeaseError(f"cannot read the hold leases on {transport.where}: {r.reason}")
    armed = [t for t in r.timers if lease_pending(t)]
    far = datetime.max.replace(tzinfo=UTC)
    return sorted(armed, key=lambda t: t.next_elapse or far)


def armed_leases(transport: Transport, matched: Sequence[TimerState], *,
                 timeout_s: float = 10.0) -> list[TimerState]:
    """The hold leases armed among ``matched`` — the states of the units matching
    :data:`LEASE_GLOB`, read with the profile's timers in one ``systemctl show``
    (:func:`~seat_console.sources.timers.read_unit_states_matching`) — oldest next elapse first,
    as :func:`node_leases` gives them but with the states and next elapse only: names that are
    not a lease's (:data:`LEASE_GLOB` is wider than a lease name) are left out, and the next
    elapse of those :func:`lease_pending` is read with one ``systemctl list-timers --all
    --output=json`` (only when one is armed: a node without a hold costs no second command).
    That read failing leaves ``next_elapse`` ``None`` (unknown) with the reason in
    ``errors["times"]``; the lease is still armed. Never raises for node problems."""
    armed = [t for t in matched if _LEASE_NAME_RE.match(t.unit) and lease_pending(t)]
    if not armed:
        return []
    res = transport.run(["systemctl", "list-timers", "--all", "--output=json", "--",
                         *(t.unit for t in armed)], timeout_s=timeout_s)
    try:
        if not res.ok:
            raise ValueError(res.failure or "failed")
        times = parse_list_timers_json(res.stdout)
    except ValueError as exc:
        why = f"systemctl list-timers: {exc}"
        return [t.model_copy(update={"errors": {"times": why}}) for t in armed]
    out = []
    for t in armed:
        if t.unit in times:
            out.append(t.model_copy(update={"next_elapse": times[t.unit][0]}))
        else:
            out.append(t.model_copy(update={"errors": {
                "times": f"{t.unit} missing from systemctl list-timers' answer"}}))
    far = datetime.max.replace(tzinfo=UTC)
    return sorted(out, key=lambda t: t.next_elapse or far)


def _need(transport: Transport, binary: str) -> str:
    path, res = transport.resolve(binary)
    if res is not None:
        raise LeaseError(res.failure or f"cannot look up {binary} on {transport.where}")
    if path is None:
        raise LeaseError(f"`{binary}` not found on {transport.where} (PATH="
                         f"{transport._node_path}); install systemd's tools on the node or fix "
                         "the PATH — the hold needs it")
    return path


def _tail(res: CommandResult) -> str:
    err = res.stderr.strip().splitlines()[-2:]
    return f" — stderr: {' | '.join(err)}" if err else ""


__all__ = ["LeaseError", "TimerActionError", "TimerChange", "armed_leases", "cancel_lease", "create_silence",
           "expire_silence", "extend_silence", "hold_window", "lease_pending", "lease_timer",
           "node_leases", "node_deferrals", "defer_unit", "DEFER_GLOB",
           "read_lease", "schedule_lease", "start_timer", "stop_timer"]
