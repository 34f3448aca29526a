"""The hold as a lease: stop the seat's timers and silence its endpoint, with the restore put
in place on the node *before* anything is changed. Also extend, release, and the hold's state.

The hold runbook (:func:`build_hold`), in order:

1. **schedule lease** — preflight (node reachable; ``systemctl`` and ``systemd-run`` on the
   node's PATH; the timers read; no other hold active), then a transient systemd timer on the
   node (``systemd-run --on-active=TTL``, :func:`~seat_console.actions.node_ops.schedule_lease`)
   that starts exactly the timers that are active now — the ones this hold is about to stop.
   A console killed at any later instant, or a lost SSH session, still gets them back at expiry.
2. **stop <timer>** for each timer of the profile that is active (recorded; a timer already
   inactive is skipped: "not ours to restart"); verified ``inactive`` by an independent read.
3. **silence seat** — an Alertmanager silence with every profile matcher (all four fields),
   ``endsAt = now + TTL`` (UTC, ``Z``; it lapses by itself), comment carrying the hold ID;
   verified by reading it back (matchers, ``endsAt``, state ``active``).

On any failure the steps done are undone in reverse (timers started again, the lease cancelled,
the silence expired). The hold's state (lease unit, silence ID, stopped timers, expiry) is the
run's facts in the journal, so any later console finds it: :func:`holds`, :func:`active_hold`.

Release (:func:`build_release`, policy ``continue``: one failure does not stop the rest): start
each timer the hold stopped and verify it is active with a next elapse (warning first when a
``Persistent=true`` timer missed its elapse during the hold: it fires at once), expire the
silence (it stays listed as expired), cancel the lease. Extend (:func:`build_extend`): a new
lease first, then the silence's end moved (using the ID the response gives), then the old lease
cancelled.
"""

from __future__ import annotations

import re
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from seat_console.actions import node_ops
from seat_console.actions.journal import Entry, Journal
from seat_console.actions.runbook import Check, Observer, Runbook, RunContext, Step, StepError
from seat_console.node.context import NodeContext
from seat_console.node.transport import TransportError
from seat_console.core.base import Unavailable, utcnow
from seat_console.core.fmt import fmt_duration, fmt_ttl
from seat_console.sources.silences import coverage_warnings
from seat_console.node.alertmanager import AlertmanagerError, Silence
from seat_console.sources.timers import (
    TimerState,
    TimersReading,
    read_start_forecast,
    read_timers,
)

TTL_MIN_S = 10
"""Shortest hold TTL in seconds (tests use 15–20 s; on call, use hours)."""
TTL_MAX_S = 7 * 86400
START_SETTLE_S = 10.0
"""How long release waits for a started timer to show its next elapse (seconds)."""
"""Longest hold TTL in seconds (the profile's ``silence.ttl_s`` bound)."""

_TTL_RE = re.compile(r"^\s*(?:(\d+)\s*d)?\s*(?:(\d+)\s*h)?\s*(?:(\d+)\s*m(?:in)?)?\s*"
                     r"(?:(\d+)\s*s)?\s*$", re.IGNORECASE)
SECONDS_SHOWN_BELOW_S = 3600
"""Lease and silence ends of a hold shorter than this (seconds: an hour) are shown to the
second ("until 12:41:30Z"); a longer hold to the minute."""


def parse_ttl(text: str) -> int:
    """A TTL such as ``"4h"``, ``"10m"``, ``"1h30m"`` or ``"900s"`` → seconds.

    Every number needs its unit (``d``, ``h``, ``m``/``min``, ``s``): ``"10m5"`` and ``"900"``
    are refused rather than guessed. Raises :class:`ValueError` naming the text and the
    accepted range (:data:`TTL_MIN_S` to :data:`TTL_MAX_S`) for anything else, the empty text
    included.
    """
    m = _TTL_RE.match(text or "")
    if not m or not any(m.groups()):
        raise ValueError(f"TTL {text!r}: give a duration such as 4h, 30m, 1h30m or 900s")
    d, h, mi, s = (int(g) if g else 0 for g in m.groups())
    total = d * 86400 + h * 3600 + mi * 60 + s
    if not TTL_MIN_S <= total <= TTL_MAX_S:
        raise ValueError(f"TTL {text!r} = {total} s: must be between {TTL_MIN_S} s and "
                         f"{TTL_MAX_S // 86400} days")
    return total


def zulu(t: datetime | None, ttl_s: float | None = None) -> str:
    """``HH:MMZ`` (UTC), or ``n/a``; ``HH:MM:SSZ`` when ``ttl_s`` (the hold's lifetime, seconds)
    is under :data:`SECONDS_SHOWN_BELOW_S` — a 30 s lease shown to the minute says nothing."""
    if t is None:
        return "n/a"
    fmt = "%H:%M:%SZ" if ttl_s is not None and ttl_s < SECONDS_SHOWN_BELOW_S else "%H:%MZ"
    return t.astimezone(UTC).strftime(fmt)


def countdown(t: datetime | None, now: datetime | None = None) -> str:
    """Time left until ``t`` (UTC) in coarse steps, so a line that shows it changes at most
    every 10 s and the screen is not redrawn each second (the app's coarse-ages rule):
    ``in 2 h 05 min`` (whole minutes from an hour), ``in 4 min`` (whole minutes),
    ``in 40 s`` (tens of seconds), ``in under 10 s``, ``passed``; ``n/a`` for ``None``."""
    if t is None:
        return "n/a"
    s = int((t - (now or utcnow())).total_seconds())
    if s <= 0:
        return "passed"
    if s < 10:
        return "in under 10 s"
    if s < 60:
        return f"in {s // 10 * 10} s"
    return f"in {fmt_duration(s, coarse=True)}"


def expiry_text(expires_at: datetime | None, ttl_s: float | None,
                now: datetime | None = None) -> str:
    """``until 12:41:30Z, in 4 min`` — a hold's end (:func:`zulu`: to the second for a hold
    shorter than :data:`SECONDS_SHOWN_BELOW_S`) and the coarse :func:`countdown`; ``ttl_s`` is
    the hold's whole lifetime (seconds, ``expires_at - placed_at``; ``None``: unknown, shown
    to the minute)."""
    return f"until {zulu(expires_at, ttl_s)}, {countdown(expires_at, now)}"


def iso(t: datetime | None) -> str | None:
    """ISO 8601 UTC with ``Z`` (second precision), or ``None``."""
    return None if t is None else t.astimezone(UTC).isoformat(
        timespec="seconds").replace("+00:00", "Z")


def _from_iso(s: str | None) -> datetime | None:
    return None if not s else datetime.fromisoformat(s.replace("Z", "+00:00"))


def _in(t: datetime | None, now: datetime | None = None) -> str:
    if t is None:
        return "n/a"
    s = int((t - (now or utcnow())).total_seconds())
    if s < 0:
        return f"{fmt_duration(s)} ago"
    return f"in {fmt_duration(s, coarse=True)}"


def foreign_lease_text(t: TimerState, now: datetime | None = None) -> str:
    """``seat-hold-…-lease.timer elapses 2026-12-01T10:33:10Z (in 9 min)`` — a lease on the
    node, as ``hold`` and ``hold --status`` name it."""
    when = iso(t.next_elapse) or "n/a"
    return f"{t.unit} elapses {when} ({_in(t.next_elapse, now)})"


_HOLD_ID_RE = re.compile(r"^seat-hold-[0-9]{8}t[0-9]{6}z-[0-9a-f]{4}$")
"""A hold ID as :func:`new_hold_id` makes it."""


def new_hold_id() -> str:
    """``seat-hold-<YYYYmmddtHHMMSSz>-<4 hex>`` — a valid systemd unit name prefix."""
    return f"seat-hold-{datetime.now(UTC):%Y%m%dt%H%M%Sz}-{uuid.uuid4().hex[:4]}"


# -- the hold's state ---------------------------------------------------------------------------
@dataclass(frozen=True)
class HoldState:
    """A hold as the journal records it.

    ``state``: ``active`` (placed, not released; may have ``lapsed`` once ``expires_at`` passed),
    ``released``, ``release-partial`` (a release ran but left something: see the journal),
    ``unfinished`` (the console died mid-hold: run ``seat-console recover``), ``failed`` (the
    hold failed and was undone). ``stopped``: timers this hold stopped (and will restore);
    ``lease_unit``: the transient timer on the node; ``silence_id``: the silence (``None`` until
    created); ``expires_at``: UTC; ``placed_by``: ``user@host``; ``timers_before``: per stopped
    timer, its state before the hold (``next_elapse``, ``last_trigger`` ISO, ``persistent``).
    """

    hold_id: str
    run_id: str
    state: str
    lease_unit: str
    silence_id: str | None
    stopped: tuple[str, ...]
    expires_at: datetime
    placed_at: datetime
    placed_by: str
    reason: str
    timers_before: dict[str, dict[str, Any]] = field(default_factory=dict)

    def remaining_s(self, now: datetime | None = None) -> float:
        """Seconds until the lease and silence lapse (negative once past)."""
        return (self.expires_at - (now or utcnow())).total_seconds()

    def lapsed(self, now: datetime | None = None) -> bool:
        """``True`` once ``expires_at`` has passed (the lease fired, the silence ended)."""
        return self.remaining_s(now) <= 0

    def is_active(self, now: datetime | None = None) -> bool:
        """Placed, not released, not lapsed."""
        return self.state == "active" and not self.lapsed(now)

    @property
    def ttl_s(self) -> float:
        """The hold's whole lifetime in seconds (``expires_at - placed_at``; an extend moves
        ``expires_at``)."""
        return (self.expires_at - self.placed_at).total_seconds()

    def banner(self) -> str:
        """``held by the console until 12:41Z (lease seat-hold-…-lease)`` — for the panels;
        to the second (``12:41:30Z``) for a hold shorter than an hour."""
        return (f"held by the console until {zulu(self.expires_at, self.ttl_s)} "
                f"(lease {self.lease_unit})")

    def to_json(self, now: datetime | None = None) -> dict[str, Any]:
        """JSON-ready dict (times ISO 8601 ``Z``; ``remaining_s`` rounded)."""
        return {"hold_id": self.hold_id, "run_id": self.run_id, "state": self.state,
                "active": self.is_active(now), "lease_unit": self.lease_unit,
                "silence_id": self.silence_id, "stopped": list(self.stopped),
                "expires_at": iso(self.expires_at), "placed_at": iso(self.placed_at),
                "placed_by": self.placed_by, "reason": self.reason,
                "remaining_s": round(self.remaining_s(now)), "timers_before": self.timers_before}


def _iso_or_none(v: Any) -> datetime | None:
    """A journaled ISO 8601 time as aware UTC, ``None`` for absent or unreadable (a fact edited
    outside the console)."""
    if not isinstance(v, str) or not v:
        return None
    try:
        t = _from_iso(v)
        return None if t is None or t.tzinfo is None else t.astimezone(UTC)
    except (ValueError, OverflowError):
        return None


def hold_facts(h: Any) -> dict[str, Any] | None:
    """A run's ``hold`` fact checked as outside input (the journal is a file anyone can edit):
    ``hold_id`` and ``lease`` non-empty strings; ``silence_id`` a string or absent; ``stopped``
    a list of strings; ``reason`` a string; ``timers_before`` an object; ``expires_at`` an
    ISO 8601 time with a zone (or absent/unreadable: ``None``). Returns the fact with those
    types (``expires_at`` parsed), or ``None`` when it is not a hold this console wrote: its
    readers skip it rather than raise (``journal --verify`` names the edited row)."""
    if not isinstance(h, dict):
        return None
    hid, lease, sil = h.get("hold_id"), h.get("lease"), h.get("silence_id")
    stopped, reason, before = h.get("stopped", []), h.get("reason", ""), h.get("timers_before", {})
    if not (isinstance(hid, str) and hid and isinstance(lease, str) and lease
            and (sil is None or isinstance(sil, str)) and isinstance(stopped, list)
            and all(isinstance(u, str) for u in stopped) and isinstance(reason, str)
            and isinstance(before, dict)):
        return None
    return {**h, "expires_at": _iso_or_none(h.get("expires_at"))}


def _hold_from_facts(h: dict[str, Any], run_id: str, state: str, first: Entry) -> HoldState:
    """``h``: a fact :func:`hold_facts` accepted."""
    return HoldState(hold_id=h["hold_id"], run_id=run_id, state=state,
                     lease_unit=node_ops.lease_timer(h["lease"]), silence_id=h.get("silence_id"),
                     stopped=tuple(h.get("stopped", [])),
                     expires_at=h["expires_at"] or first.at,
                     placed_at=first.at, placed_by=f"{first.user}@{first.host}",
                     reason=h.get("reason", ""), timers_before=h.get("timers_before", {}))


def holds(journal: Journal) -> list[HoldState]:
    """Every hold in the journal, oldest first, with extends and releases applied."""
    out: dict[str, HoldState] = {}
    for run_id, rows in journal.runs().items():
        rb = rows[0].runbook
        end = next((r for r in rows if r.kind == "end"), None)
        facts: dict[str, Any] = {}
        for r in rows:
            facts.update(r.facts)
        h = hold_facts(facts.get("hold"))
        if h is None:   # no hold, or not one this console wrote (an edited row)
            continue
        hid = h["hold_id"]
        if rb == "hold":
            if end is None:
                state = "unfinished"
            elif end.outcome == "done":
                state = "active"
            else:
                state = "failed"
            out[hid] = _hold_from_facts(h, run_id, state, rows[0])
        elif hid in out and end is not None:
            prev = out[hid]
            if rb == "extend" and end.outcome == "done":
                out[hid] = HoldState(**{**prev.__dict__, "lease_unit": node_ops.lease_timer(
                    h["lease"]), "silence_id": h.get("silence_id"),
                    "expires_at": h["expires_at"] or prev.expires_at})
            elif rb == "release" and end.outcome != "refused":
                out[hid] = HoldState(**{**prev.__dict__, "state": "released" if end.outcome
                                        == "done" else "release-partial"})
    return list(out.values())


def active_hold(journal: Journal, now: datetime | None = None) -> HoldState | None:
    """The hold in effect now (placed, not released, not lapsed), whoever placed it; ``None``
    when there is none. A probe/swap runbook should refuse to start without one."""
    live = [h for h in holds(journal) if h.is_active(now)]
    return live[-1] if live else None


def hold_in_effect(nctx: NodeContext, journal: Journal) -> tuple[HoldState | None, str | None]:
    """``(hold, problem)``: the journal's active hold (:func:`active_hold`) and, when it
    stopped timers, whether its lease is armed on the node now — ``problem`` says what is wrong
    (``None``: the hold is in effect as the journal says, or there is none). Never raises (a
    node that cannot be read is a ``problem``). The gates' hold reading
    (:data:`seat_console.actions.gates.HoldReader`)."""
    h = active_hold(journal)
    if h is None or not h.stopped:
        return h, None
    try:
        st = node_ops.read_lease(nctx.transport, h.lease_unit.removesuffix(".timer"))
    except Exception as exc:  # noqa: BLE001 - the node unreadable: said, not assumed
        return h, f"its lease {h.lease_unit} cannot be read on the node ({exc})"
    if not node_ops.lease_pending(st):
        return h, (f"its lease {h.lease_unit} is not armed on the node ({st.load_state}/"
                   f"{st.active_state}): nothing restores the timers at its end")
    return h, None


def current_hold(journal: Journal) -> HoldState | None:
    """The newest hold not yet released (active, lapsed, unfinished or release-partial) — what
    ``release`` acts on; ``None`` when every hold was released."""
    cands = [h for h in holds(journal) if h.state in ("active", "unfinished", "release-partial")]
    return cands[-1] if cands else None


# -- reading the node for the steps ------------------------------------------------------------
def _read_timers(nctx: NodeContext, units: Sequence[str]) -> TimersReading:
    try:
        r = read_timers(nctx.transport, list(units))
    except TransportError as exc:
        raise StepError(str(exc)) from None
    if isinstance(r, Unavailable):
        raise StepError(f"cannot read the timers on {nctx.transport.where}: {r.reason}")
    return r


def _timer(nctx: NodeContext, unit: str) -> TimerState:
    t = _read_timers(nctx, [unit]).timers[0]
    return t


def _describe_timer(t: TimerState) -> str:
    nxt = f"next {_in(t.next_elapse)}" if t.next_elapse else "no next elapse"
    return f"{t.active_state}, {nxt}"


def _am(nctx: NodeContext) -> Any:
    try:
        return nctx.alertmanager
    except AlertmanagerError as exc:
        raise StepError(str(exc)) from None


def _find_silence(nctx: NodeContext, hold_id: str) -> Silence | None:
    """The hold's silence, found by the hold ID in its comment (when a crash lost the ID)."""
    for s in _am(nctx).list_silences():
        if f"[{hold_id}]" in s.comment and s.state != "expired":
            return s
    return None


# -- hold ----------------------------------------------------------------------------------------
def build_hold(nctx: NodeContext, journal: Journal, *, ttl_s: int, reason: str = "",
               observer: Observer | None = None, run_id: str | None = None,
               facts: dict[str, Any] | None = None, force: bool = False,
               hold_id: str | None = None) -> Runbook:
    """The hold runbook (module docstring) for the profile's timers and silence.

    ``hold_id``: the hold ID (and so the lease unit ``<hold_id>-lease.timer``) a plan already
    showed — a front that plans with one runbook and runs another passes the plan's
    (``plan.facts["hold"]["hold_id"]``), so the lease created is the one the plan named;
    default a new one (:func:`new_hold_id`). Raises :class:`ValueError` for an ID that is not a
    hold ID or is already in the journal (plan again).

    ``ttl_s``: lease and silence lifetime in seconds (:func:`parse_ttl` bounds); ``reason``:
    free text for the silence comment and the journal. ``run_id`` / ``facts``: given by
    :mod:`~seat_console.actions.recover` to finish a crashed run. The preflight also reads the
    node's own hold leases (:func:`~seat_console.actions.node_ops.node_leases`): a lease armed
    by another console (another state dir, so not in this journal) refuses the hold, naming it
    and the fix, unless ``force`` (the caller requires a ``reason``; the leases forced past go
    in the run's facts, ``hold.forced_past_leases``, and in the check's journaled message).
    """
    units = nctx.timer_units
    spec = nctx.profile.silence
    init = facts or {}
    if "hold" not in init:
        if hold_id is not None:
            if not _HOLD_ID_RE.match(hold_id):
                raise ValueError(f"hold ID {hold_id!r} is not one (seat-hold-<UTC>-<4 hex>)")
            if any(x.hold_id == hold_id for x in holds(journal)):
                raise ValueError(f"hold ID {hold_id} is already in the journal: read the plan "
                                 "again")
        hid = hold_id or new_hold_id()
        init = {"hold": {"hold_id": hid, "lease": f"{hid}-lease", "ttl_s": ttl_s,
                         "reason": reason, "expires_at": None, "to_stop": [], "stopped": [],
                         "timers_before": {}, "silence_id": None}}

    def hold(ctx: RunContext) -> dict[str, Any]:
        return ctx.facts["hold"]

    def expires(ctx: RunContext) -> datetime:
        """The hold's end: the one the lease's apply fixed (TTL counted from placing), else,
        while planning, one instant for every line of the plan (the lease's and the silence's
        said 21:10Z and 21:11:00Z for one end: the on-call trial)."""
        h = hold(ctx)
        if h["expires_at"] is None:
            if h.get("planned_end") is None:
                h["planned_end"] = iso(utcnow() + timedelta(seconds=ttl_s))
            return _from_iso(h["planned_end"])  # type: ignore[return-value]
        return _from_iso(h["expires_at"])  # type: ignore[return-value]

    # 1. lease ----------------------------------------------------------------------------
    def lease_check(ctx: RunContext) -> Check:
        try:
            tr = nctx.transport
            for b in ("systemctl", "systemd-run"):
                path, res = tr.resolve(b)
                if res is not None:
                    raise StepError(f"node {nctx.node_name} not reachable: {res.failure}")
                if path is None:
                    raise StepError(f"`{b}` not found on {tr.where} (PATH={tr._node_path}); "
                                    "the hold needs it — install systemd's tools there or fix "
                                    "the PATH")
        except TransportError as exc:
            raise StepError(str(exc)) from None
        for rows in journal.unfinished():
            if rows[0].run_id != ctx.run_id and rows[0].runbook in ("hold", "release", "extend"):
                raise StepError(f"an unfinished {rows[0].runbook} run {rows[0].run_id} (by "
                                f"{rows[0].user}@{rows[0].host}) is in the journal: its console "
                                "died mid-run — run `seat-console recover` first")
        other = active_hold(journal)
        if other is not None and other.hold_id != hold(ctx)["hold_id"]:
            raise StepError(f"a hold is already active: {other.hold_id} by {other.placed_by} "
                            f"until {iso(other.expires_at)} — use `seat-console hold --extend "
                            "TTL` or `seat-console release`")
        own = node_ops.lease_timer(hold(ctx)["lease"])
        try:
            foreign = [t for t in node_ops.node_leases(tr) if t.unit != own]
        except node_ops.LeaseError as exc:
            raise StepError(str(exc)) from None
        forced = ""
        if foreign:
            desc = "; ".join(foreign_lease_text(t) for t in foreign)
            if not force:
                raise StepError(
                    f"a hold lease is already armed on {tr.where}, not in this console's "
                    f"journal (another console or state dir placed it): {desc} — release it "
                    f"from that console, or if it is stale `systemctl stop {foreign[0].unit}` "
                    "on the node (its timers then need starting by hand), or pass --force "
                    "--reason TEXT")
            hold(ctx)["forced_past_leases"] = [t.unit for t in foreign]
            forced = f"; FORCED past {desc} (reason: {reason or 'none given'})"
        r = _read_timers(nctx, units)
        missing = [t.unit for t in r.timers if not t.loaded]
        if missing:
            raise StepError(f"timer(s) {', '.join(missing)} not loaded on {tr.where}: fix "
                            "[timers] in the profile")
        active = [t.unit for t in r.timers if t.active]
        h = hold(ctx)
        h["to_stop"] = active
        h["lease_planned"] = True
        h["timers_before"] = {t.unit: {"next_elapse": iso(t.next_elapse),
                                       "last_trigger": iso(t.last_trigger),
                                       "persistent": t.persistent} for t in r.timers if t.active}
        if not active:
            return Check(False, "no lease needed: none of the timers is active "
                                f"({', '.join(units)}){forced}")
        when = expires(ctx)
        return Check(True, f"schedule lease {h['lease']}.timer on {tr.where}: at "
                           f"{iso(when)} ({fmt_ttl(ttl_s)} after it is placed) it starts "
                           f"{', '.join(active)}{forced}")

    def lease_apply(ctx: RunContext) -> str:
        h = hold(ctx)
        h["expires_at"] = iso(utcnow() + timedelta(seconds=ttl_s))
        try:
            _, res = node_ops.schedule_lease(
                nctx.transport, h["lease"], ttl_s, h["to_stop"],
                description=f"seat-console hold {h['hold_id']}: restore timers")
        except node_ops.LeaseError as exc:
            raise StepError(str(exc)) from None
        return (res.stdout + res.stderr).strip()

    def lease_verify(ctx: RunContext) -> str:
        h = hold(ctx)
        try:
            st = node_ops.read_lease(nctx.transport, h["lease"])
        except node_ops.LeaseError as exc:
            raise StepError(str(exc)) from None
        if not node_ops.lease_pending(st):
            raise StepError(f"lease {h['lease']}.timer reads back {st.load_state}/"
                            f"{st.active_state}: not armed")
        return f"lease armed: {h['lease']}.timer elapses at {iso(st.next_elapse)}"

    def lease_undo(ctx: RunContext) -> str:
        h = hold(ctx)
        try:
            node_ops.cancel_lease(nctx.transport, h["lease"])
        except (node_ops.LeaseError, TransportError) as exc:
            raise StepError(str(exc)) from None
        return f"lease {h['lease']}.timer cancelled"

    steps = [Step("schedule lease", lease_check, lease_apply, lease_verify, lease_undo,
                  manual=lambda ctx: f"systemctl stop {hold(ctx)['lease']}.timer (on the node)")]

    # 2. timers ---------------------------------------------------------------------------
    for unit in units:
        steps.append(_stop_step(nctx, unit, hold))

    # 3. silence --------------------------------------------------------------------------
    matchers = nctx.silence_matchers()

    def sil_check(ctx: RunContext) -> Check:
        am_reachable(nctx)
        shown = ", ".join(str(m) for m in matchers)
        misses = coverage_warnings(matchers, str(nctx.profile.seat.endpoint),
                                   nctx.profile.seat.prometheus_instance)
        if misses and not force:
            raise StepError(f"{'; '.join(misses)} — fix [[silence.matchers]] (or "
                            f"seat.prometheus_instance, the seat's instance label in "
                            f"Prometheus) in the profile "
                            f"{nctx.loaded.source}, or pass --force --reason TEXT")
        warn = f"; WARNING (forced): {'; '.join(misses)}" if misses else ""
        return Check(True, f"create silence {{{shown}}} on {_am(nctx).url} until "
                           f"{iso(expires(ctx))}{warn}")

    def sil_apply(ctx: RunContext) -> str:
        h = hold(ctx)
        ends = expires(ctx)
        comment = f"{spec.comment}: {h['reason'] or 'no reason given'} [{h['hold_id']}]"
        try:
            s = node_ops.create_silence(_am(nctx), matchers, ends_at=ends,
                                        created_by=spec.created_by, comment=comment)
        except AlertmanagerError as exc:
            if getattr(exc, "sent", True) is False:
                h["silence_post"] = "not-sent"   # the connection failed: nothing was created
            raise StepError(f"{exc}{_am_fix(nctx, exc)}") from None
        h["silence_id"] = s.id
        h["expires_at"] = iso(ends)
        return f"silenceID {s.id}"

    def sil_verify(ctx: RunContext) -> str:
        h = hold(ctx)
        try:
            back = _am(nctx).get_silence(h["silence_id"])
        except AlertmanagerError as exc:
            raise StepError(str(exc)) from None
        problems = []
        if set(back.matchers) != set(matchers):
            problems.append("matchers differ")
        if abs((back.ends_at - expires(ctx)).total_seconds()) > 1.0:
            problems.append(f"endsAt {iso(back.ends_at)}")
        if back.state != "active":
            problems.append(f"state {back.state}")
        if problems:
            raise StepError(f"silence {back.id} reads back wrong: {'; '.join(problems)}")
        return f"silence {back.id} active until {iso(back.ends_at)}"

    def sil_undo(ctx: RunContext) -> str:
        h = hold(ctx)
        try:
            sid = h.get("silence_id")
            if sid is None and h.get("silence_post") == "not-sent":
                return ("no silence was created (the POST never reached Alertmanager: the "
                        "connection failed)")
            if sid is None:
                found = _find_silence(nctx, h["hold_id"])
                if found is None:
                    return "no silence was created"
                sid = found.id
            s = _am(nctx).get_silence(sid)
            if s.state == "expired":
                return f"silence {sid} already expired"
            node_ops.expire_silence(_am(nctx), sid)
        except AlertmanagerError as exc:
            raise StepError(str(exc)) from None
        return f"silence {sid} expired"

    def sil_manual(ctx: RunContext) -> str:
        sid = hold(ctx).get("silence_id")
        if sid is None:
            return (f"in Alertmanager ({_safe_url(nctx)}), expire the silence whose comment "
                    f"contains [{hold(ctx)['hold_id']}], if there is one (`amtool silence query`"
                    ", then `amtool silence expire ID`)")
        return (f"expire silence {sid}: curl -X DELETE {_safe_url(nctx)}/api/v2/silence/{sid} "
                "or `amtool silence expire`")

    steps.append(Step("silence seat", sil_check, sil_apply, sil_verify, sil_undo,
                      manual=sil_manual))
    return Runbook("hold", steps, journal=journal, observer=observer, policy="undo",
                   inputs={"ttl_s": ttl_s, "reason": reason, "node": nctx.node_name,
                           "timers": units}, facts=init, run_id=run_id,
                   profile_sha256=nctx.loaded.sha256)


def _am_fix(nctx: NodeContext, exc: AlertmanagerError) -> str:
    """`` — check `alertmanager.url` in FILE …`` for an Alertmanager that cannot be reached
    (``kind`` unreachable / timeout / tls), else ``""``."""
    if getattr(exc, "kind", None) not in ("unreachable", "timeout", "tls"):
        return ""
    return (f" — is Alertmanager running there? check `alertmanager.url` in the profile "
            f"{nctx.loaded.source}")


def am_reachable(nctx: NodeContext) -> None:
    """The silence step's precondition: Alertmanager at ``alertmanager.url`` answers a read
    (``GET /api/v2/silences``), so a hold is refused before any timer is stopped. Raises
    :class:`StepError` naming the URL, the profile key and file."""
    try:
        _am(nctx).list_silences_tolerant()
    except AlertmanagerError as exc:
        raise StepError(f"Alertmanager at {_safe_url(nctx)} cannot be read ({exc}): the hold "
                        "could not place its silence — fix `alertmanager.url` (or "
                        f"[alertmanager] auth) in the profile {nctx.loaded.source}, or start "
                        "Alertmanager") from None


def _safe_url(nctx: NodeContext) -> str:
    return str(nctx.profile.alertmanager.url).rstrip("/")


def _stop_step(nctx: NodeContext, unit: str, hold: Any) -> Step:
    def check(ctx: RunContext) -> Check:
        h = hold(ctx)
        t = _timer(nctx, unit)
        if not t.active:
            return Check(False, f"skip {unit}: already {t.active_state} — not ours to restart")
        if not h.get("lease_planned"):
            return Check(False, f"skip {unit} ({_describe_timer(t)}): not planned — the lease "
                                "step was refused (see above), and no timer is stopped "
                                "without a lease")
        if unit not in h["to_stop"]:
            return Check(False, f"skip {unit}: became active after the lease was planned, so "
                                "the lease would not restart it — not stopping it")
        if h["to_stop"]:
            try:
                ls = node_ops.read_lease(nctx.transport, h["lease"])
            except node_ops.LeaseError as exc:
                raise StepError(str(exc)) from None
            if not node_ops.lease_pending(ls) and h.get("expires_at") is not None:
                raise StepError(f"the lease {h['lease']}.timer is not armed "
                                f"({ls.load_state}/{ls.active_state}); refusing to stop "
                                f"{unit} without a restore scheduled")
        return Check(True, f"stop {unit} ({_describe_timer(t)})")

    def apply(ctx: RunContext) -> str:
        try:
            ch = node_ops.stop_timer(nctx.transport, unit)
        except node_ops.TimerActionError as exc:
            raise StepError(str(exc), (exc.result.stderr if exc.result else "")) from None
        h = hold(ctx)
        if unit not in h["stopped"]:
            h["stopped"].append(unit)
        run = " (its service is running now and finishes its run)" if (
            ch.after.service and ch.after.service.running) else ""
        return f"stopped{run}"

    def verify(ctx: RunContext) -> str:
        t = _timer(nctx, unit)
        if t.active_state != "inactive":
            raise StepError(f"{unit} reads back {t.active_state}, not inactive")
        return f"{unit} inactive"

    def undo(ctx: RunContext) -> str:
        t = _timer(nctx, unit)
        if t.active:
            return f"{unit} already active"
        try:
            ch = node_ops.start_timer(nctx.transport, unit)
        except node_ops.TimerActionError as exc:
            raise StepError(str(exc)) from None
        return f"{unit} started again (next elapse {iso(ch.after.next_elapse)})"

    return Step(f"stop {unit}", check, apply, verify, undo,
                manual=f"systemctl start {unit} (on the node)", acts_on=[unit])


# -- release -------------------------------------------------------------------------------------
def catchup_warning(unit: str, before: dict[str, Any], now: datetime | None = None
                    ) -> str | None:
    """The warning for a ``Persistent=true`` timer whose next elapse (recorded when the hold
    stopped it) passed while it was stopped: starting it fires the missed run at once
    (systemd.timer(5), ``Persistent=``). ``None`` when that does not apply."""
    nxt = _from_iso(before.get("next_elapse"))
    if not before.get("persistent") or nxt is None or nxt > (now or utcnow()):
        return None
    return (f"{unit} is Persistent=true and missed its elapse at {iso(nxt)} during the hold "
            f"(LastTriggerUSec {before.get('last_trigger') or 'n/a'}): starting it fires the "
            "missed run at once")


def build_release(nctx: NodeContext, journal: Journal, h: HoldState, *,
                  observer: Observer | None = None, run_id: str | None = None,
                  facts: dict[str, Any] | None = None,
                  defer: dict[str, datetime] | None = None,
                  defer_firing: datetime | None = None, force: bool = False,
                  reason: str = "", check_seat: bool = True) -> Runbook:
    """The release runbook for hold ``h`` (module docstring). Policy ``continue``.

    Its gate (:func:`~seat_console.actions.gates.release_gate`, read right before it acts):
    refused while the candidate holds the seat and no promote made it the resident, unless
    ``force`` with a ``reason`` (journaled); ``check_seat=False`` leaves the gate out (a
    restore plans its release before it has put the resident back).

    Before each timer is started, when it would elapse once started is read from the node
    (:func:`~seat_console.sources.timers.read_start_forecast`: Persistent catch-up and every
    monotonic trigger whose interval already passed) and a timer that would fire at once is
    warned about with the time. ``defer``: timer → UTC time: keep it stopped and start it
    then (a transient timer on the node, journaled, cancellable with
    :func:`build_cancel_deferred`); ``defer_firing``: the same for every timer that would fire
    at once. Raises :class:`ValueError` for a ``defer`` timer the hold did not stop."""
    steps: list[Step] = []
    for u in defer or {}:
        if u not in h.stopped:
            raise ValueError(f"--defer {u}: hold {h.hold_id} did not stop it (it stopped "
                             f"{', '.join(h.stopped) or 'none'})")
    for unit in h.stopped:
        steps.append(_start_step(nctx, journal, h, unit, (defer or {}).get(unit),
                                 defer_firing))
    steps.append(_expire_step(nctx, h))
    steps.append(_cancel_lease_step(nctx, h))
    init = facts or {"hold": {"hold_id": h.hold_id, "lease": h.lease_unit.removesuffix(".timer"),
                              "silence_id": h.silence_id, "stopped": list(h.stopped),
                              "expires_at": iso(h.expires_at)}}
    from seat_console.actions.gates import release_gate

    inputs: dict[str, Any] = {"hold_id": h.hold_id}
    if force:
        inputs.update(force=True, reason=reason)
    return Runbook("release", steps, journal=journal, observer=observer, policy="continue",
                   inputs=inputs, facts=init, run_id=run_id,
                   profile_sha256=nctx.loaded.sha256,
                   gates=[release_gate(nctx, journal, force=force, reason=reason)]
                   if check_seat else [])


def _forecast(nctx: NodeContext, unit: str) -> Any:
    """The :class:`~seat_console.sources.timers.StartForecast` of ``unit`` read now, or the
    reason it cannot be read (a string)."""
    try:
        r = read_start_forecast(nctx.transport, [unit])
    except TransportError as exc:
        return str(exc)
    if isinstance(r, Unavailable):
        return r.reason
    return r[unit]


def _firing_warning(unit: str, before: dict[str, Any], fc: Any) -> str | None:
    """The warning for a timer that fires the moment it is started: every trigger whose time
    already passed (:meth:`StartForecast.warning`: Persistent catch-up and monotonic
    intervals), else the Persistent rule from the state recorded when the hold stopped it
    (:func:`catchup_warning`) when the node could not be read."""
    if not isinstance(fc, str):
        w = fc.warning()
        w = w + " — its service runs right after the start" if w else None
        # a stopped Persistent timer's calendar elapse is not always readable on the node
        # (seen on the lab's systemd 252): the elapse recorded when the hold stopped it decides
        c = catchup_warning(unit, before)
        if c and (w is None or "OnCalendar=" not in w):
            w = f"{w}; {c}" if w else c
        return w
    return catchup_warning(unit, before)


def _start_step(nctx: NodeContext, journal: Journal, h: HoldState, unit: str,
                defer: datetime | None = None, defer_firing: datetime | None = None) -> Step:
    """Start ``unit`` again — or, when ``defer`` (always) or ``defer_firing`` (only if it would
    fire at once) is given, keep it stopped and schedule its start at that time on the node
    (a transient timer, :func:`~seat_console.actions.node_ops.defer_unit`, like the lease)."""
    before = h.timers_before.get(unit, {})
    name = node_ops.defer_unit(h.hold_id, unit)

    def when(ctx: RunContext, fc: Any) -> datetime | None:
        if defer is not None:
            return defer
        if defer_firing is not None and not isinstance(fc, str) and fc.fires_at_once:
            return defer_firing
        return None

    def plan_fc(ctx: RunContext) -> Any:
        fc = _forecast(nctx, unit)
        ctx.facts.setdefault("forecast", {})[unit] = (
            {"unreadable": fc} if isinstance(fc, str) else
            {"fires_at_once": fc.fires_at_once, "next_elapse": iso(fc.next_elapse),
             "warning": fc.warning(), "unknown": list(fc.unknown),
             "triggers": [{"trigger": x.trigger, "elapse": iso(x.elapse), "base": x.base,
                           "at_once": x.at_once} for x in fc.triggers]})
        return fc

    def check(ctx: RunContext) -> Check:
        t = _timer(nctx, unit)
        if t.active:
            return Check(False, f"skip {unit}: already active — started by someone else "
                                "during the hold, or by the lease at expiry")
        fc = plan_fc(ctx)
        warn = _firing_warning(unit, before, fc)
        w = when(ctx, fc)
        if w is not None:
            if w <= utcnow() + timedelta(seconds=TTL_MIN_S):
                raise StepError(f"--defer {unit}: {iso(w)} is not at least {TTL_MIN_S} s from "
                                "now — give a later time, or start it now")
            return Check(True, f"defer {unit}: keep it stopped until {iso(w)}, when the "
                               f"transient timer {name}.timer on the node starts it"
                         + (f" ({warn})" if warn else ""))
        nxt = "" if isinstance(fc, str) else (
            f"; once started it elapses {iso(fc.next_elapse)}" if fc.next_elapse
            and not fc.fires_at_once else "")
        unread = f" (what it does once started is unknown: {fc})" if isinstance(fc, str) else ""
        return Check(True, f"start {unit} ({t.active_state} since the hold){nxt}{unread}"
                           + (f" ⚠ {warn} (to keep it stopped until a quiet moment: "
                              f"`seat-console release --defer {unit}=WHEN`)" if warn else ""))

    def apply(ctx: RunContext) -> str:
        fc = plan_fc(ctx)
        warn = _firing_warning(unit, before, fc)
        w = when(ctx, fc)
        if w is not None:
            secs = max(TTL_MIN_S, int((w - utcnow()).total_seconds()))
            try:
                st, _ = node_ops.schedule_lease(
                    nctx.transport, name, secs, [unit],
                    description=f"seat-console release of {h.hold_id}: start {unit} later")
            except node_ops.LeaseError as exc:
                raise StepError(str(exc)) from None
            ctx.facts.setdefault("deferred", {})[unit] = {
                "unit": f"{name}.timer", "at": iso(st.next_elapse or w)}
            ctx.warn(f"{unit} kept stopped until {iso(st.next_elapse or w)} (deferred start "
                     f"{name}.timer on the node; cancel with `seat-console release "
                     f"--cancel-deferred`)" + (f"; {warn}" if warn else ""), f"start {unit}")
            return f"deferred to {iso(st.next_elapse or w)}"
        if warn:
            ctx.warn(warn, f"start {unit}")
        try:
            ch = node_ops.start_timer(nctx.transport, unit)
        except node_ops.TimerActionError as exc:
            raise StepError(str(exc)) from None
        if warn:
            nxt = (iso(ch.after.next_elapse)
                   or "none scheduled yet (it is running its caught-up run now)")
            last = iso(ch.after.last_trigger) or "never"
            ctx.warn(f"{unit} started; next elapse after the start: {nxt}; last trigger {last}",
                     f"start {unit}")
        return "started"

    def verify(ctx: RunContext) -> str:
        d = (ctx.facts.get("deferred") or {}).get(unit)
        if d is not None:
            try:
                st = node_ops.read_lease(nctx.transport, name)
            except node_ops.LeaseError as exc:
                raise StepError(str(exc)) from None
            if not node_ops.lease_pending(st):
                raise StepError(f"deferred start {name}.timer reads back {st.load_state}/"
                                f"{st.active_state}: not armed")
            return f"{unit} stays stopped; {name}.timer starts it at {iso(st.next_elapse)}"
        # A monotonic timer whose OnBootSec= has passed fires at once on start; its next
        # elapse (OnUnitActiveSec=) exists only once that run ends: wait for it a little.
        deadline = utcnow() + timedelta(seconds=START_SETTLE_S)
        t = _timer(nctx, unit)
        while t.active and t.next_elapse is None and utcnow() < deadline:
            time.sleep(0.5)
            t = _timer(nctx, unit)
        if not t.active:
            raise StepError(f"{unit} reads back {t.active_state}, not active")
        if t.next_elapse is None:
            if t.service and t.service.running:
                return (f"{unit} active; its service is running now (fired on start), next "
                        "elapse once it ends")
            raise StepError(f"{unit} is active but has no NextElapse (not armed)")
        return f"{unit} active, next elapse {iso(t.next_elapse)}"

    return Step(f"start {unit}", check, apply, verify, None,
                manual=f"systemctl start {unit} (on the node)", acts_on=[unit])


def build_cancel_deferred(nctx: NodeContext, journal: Journal, deferrals: Sequence[TimerState],
                          *, observer: Observer | None = None) -> Runbook:
    """Cancel the deferred starts ``deferrals`` (transient ``…-defer-….timer`` units read on the
    node, :func:`~seat_console.actions.node_ops.node_deferrals`) and start each timer now
    instead (so the safety net is not left off). Policy ``continue``."""
    steps = []
    for d in deferrals:
        name = d.unit.removesuffix(".timer")
        target = name.split("-defer-", 1)[1] + ".timer"

        def check(ctx: RunContext, d: TimerState = d, target: str = target) -> Check:
            return Check(True, f"cancel {d.unit} (would start {target} at "
                               f"{iso(d.next_elapse)}) and start {target} now")

        def apply(ctx: RunContext, name: str = name, target: str = target) -> str:
            try:
                node_ops.cancel_lease(nctx.transport, name)
                node_ops.start_timer(nctx.transport, target)
            except (node_ops.LeaseError, node_ops.TimerActionError) as exc:
                raise StepError(str(exc)) from None
            return f"{name}.timer cancelled; {target} started"

        def verify(ctx: RunContext, target: str = target) -> str:
            t = _timer(nctx, target)
            if not t.active:
                raise StepError(f"{target} reads back {t.active_state}, not active")
            return f"{target} active"

        steps.append(Step(f"undefer {target}", check, apply, verify, None,
                          manual=f"systemctl stop {d.unit}; systemctl start {target}",
                          acts_on=[target]))
    return Runbook("cancel-deferred", steps, journal=journal, observer=observer,
                   policy="continue", inputs={"deferrals": [d.unit for d in deferrals]},
                   profile_sha256=nctx.loaded.sha256)


AM_DOWN_KINDS = ("unreachable", "timeout", "tls")
""":class:`AlertmanagerError` kinds that mean Alertmanager cannot be reached at all: the
release then degrades (the silence is left to lapse at its end) instead of refusing."""


def lapse_sentence(sid: str | None, h: HoldState, why: str, nctx: NodeContext) -> str:
    """The release's words for a silence it cannot expire because Alertmanager cannot be
    reached: which silence stays, when it lapses by itself (the hold's end, UTC) and how to end
    it sooner. ``sid``: the silence ID (``None``: not recorded — found by the hold ID)."""
    which = f"silence {sid}" if sid else f"the silence of hold {h.hold_id} (its ID not recorded)"
    fix = (f"`amtool silence expire {sid}`" if sid else
           f"expire the silence whose comment holds [{h.hold_id}]")
    return (f"Alertmanager at {_safe_url(nctx)} cannot be reached ({why}): {which} is left in "
            f"place and lapses by itself at {iso(h.expires_at)} — to end it sooner, once "
            f"Alertmanager answers: {fix} (or `seat-console release` again)")


def _expire_step(nctx: NodeContext, h: HoldState) -> Step:
    """Release's ``expire silence``. Alertmanager unreachable (:data:`AM_DOWN_KINDS`) never
    refuses the release: the plan says the silence will be left to lapse at the hold's end;
    the apply then fails with that sentence (:func:`lapse_sentence`, fact ``silence_left``),
    so — policy ``continue`` — the timers are started and the lease cancelled anyway and the
    run ends ``partial`` naming the silence that remains."""
    def sid(ctx: RunContext) -> str | None:
        s = ctx.facts["hold"].get("silence_id")
        if s is None:
            found = _find_silence(nctx, h.hold_id)
            s = found.id if found else None
            ctx.facts["hold"]["silence_id"] = s
        return s

    def down(exc: AlertmanagerError) -> bool:
        return getattr(exc, "kind", None) in AM_DOWN_KINDS

    def check(ctx: RunContext) -> Check:
        try:
            i = sid(ctx)
            if i is None:
                return Check(False, "skip silence: the hold created none")
            s = _am(nctx).get_silence(i)
        except StepError as exc:   # the client itself could not be made: said, not refused
            return Check(True, f"expire the hold's silence — "
                               f"{lapse_sentence(ctx.facts['hold'].get('silence_id'), h, str(exc), nctx)}"
                               " (if it still cannot be reached then)")
        except AlertmanagerError as exc:
            if not down(exc):
                raise StepError(str(exc)) from None
            return Check(True, "expire the hold's silence — now "
                               + lapse_sentence(ctx.facts["hold"].get("silence_id"), h,
                                                str(exc), nctx)
                               + " (if it still cannot be reached then)")
        if s.state == "expired":
            if s.ends_at < h.expires_at - timedelta(seconds=2):  # DELETE sets endsAt = now
                ctx.warn(f"silence {i} was expired by someone else during the hold "
                         f"(ended {iso(s.ends_at)}, the hold ran to {iso(h.expires_at)})",
                         "expire silence")
            return Check(False, f"skip silence {i}: already expired (at {iso(s.ends_at)})")
        return Check(True, f"expire silence {i} (active until {iso(s.ends_at)})")

    def left(ctx: RunContext, exc: Exception) -> StepError:
        i = ctx.facts["hold"].get("silence_id")
        ctx.facts["silence_left"] = {"id": i, "lapses_at": iso(h.expires_at),
                                     "why": str(exc)}
        return StepError(lapse_sentence(i, h, str(exc), nctx))

    def apply(ctx: RunContext) -> str:
        try:
            i = sid(ctx)
            if i is None:
                return "the hold created no silence"
            node_ops.expire_silence(_am(nctx), i)
        except StepError as exc:
            raise left(ctx, exc) from None
        except AlertmanagerError as exc:
            if down(exc):
                raise left(ctx, exc) from None
            raise StepError(str(exc)) from None
        return "expired"

    def verify(ctx: RunContext) -> str:
        i = sid(ctx)
        if i is None:
            return "no silence to expire"
        try:
            s = _am(nctx).get_silence(i)
        except AlertmanagerError as exc:
            raise StepError(str(exc)) from None
        if s.state != "expired":
            raise StepError(f"silence {s.id} reads back {s.state}, not expired")
        return f"silence {s.id} expired (still listed)"

    def manual(ctx: RunContext) -> str:
        i = ctx.facts["hold"].get("silence_id")
        if i is None:
            return (f"nothing, or once Alertmanager answers expire the silence whose comment "
                    f"holds [{h.hold_id}]; it lapses by itself at {iso(h.expires_at)}")
        return (f"nothing (it lapses by itself at {iso(h.expires_at)}), or to end it sooner: "
                f"curl -X DELETE {_safe_url(nctx)}/api/v2/silence/{i}")

    return Step("expire silence", check, apply, verify, None, manual=manual)


def _cancel_lease_step(nctx: NodeContext, h: HoldState) -> Step:
    name = h.lease_unit.removesuffix(".timer")

    def check(ctx: RunContext) -> Check:
        try:
            st = node_ops.read_lease(nctx.transport, name)
        except (node_ops.LeaseError, TransportError) as exc:
            raise StepError(str(exc)) from None
        if not node_ops.lease_pending(st):
            return Check(False, f"skip lease {name}.timer: already gone ({st.load_state})")
        return Check(True, f"cancel lease {name}.timer (would elapse {_in(st.next_elapse)})")

    def apply(ctx: RunContext) -> str:
        try:
            node_ops.cancel_lease(nctx.transport, name)
        except (node_ops.LeaseError, TransportError) as exc:
            raise StepError(str(exc)) from None
        return "cancelled"

    def verify(ctx: RunContext) -> str:
        try:
            st = node_ops.read_lease(nctx.transport, name)
        except (node_ops.LeaseError, TransportError) as exc:
            raise StepError(str(exc)) from None
        if node_ops.lease_pending(st):
            raise StepError(f"lease {name}.timer still armed")
        return f"lease {name}.timer gone ({st.load_state})"

    return Step("cancel lease", check, apply, verify, None,
                manual=f"systemctl stop {name}.timer (on the node)")


# -- extend --------------------------------------------------------------------------------------
def build_extend(nctx: NodeContext, journal: Journal, h: HoldState, ttl_s: int, *,
                 observer: Observer | None = None) -> Runbook:
    """Extend hold ``h`` to now + ``ttl_s``: a new lease, the silence's end moved (the ID the
    response gives is kept and verified), the old lease cancelled. Policy ``undo``."""
    old = h.lease_unit.removesuffix(".timer")
    base = re.sub(r"-lease(-\d+)?$", "", old)
    n = int(m.group(1)) + 1 if (m := re.search(r"-lease-(\d+)$", old)) else 2
    new = f"{base}-lease-{n}"
    ends = utcnow() + timedelta(seconds=ttl_s)
    facts = {"hold": {"hold_id": h.hold_id, "lease": old, "silence_id": h.silence_id,
                      "stopped": list(h.stopped), "expires_at": iso(h.expires_at)}}

    def hf(ctx: RunContext) -> dict[str, Any]:
        return ctx.facts["hold"]

    def new_check(ctx: RunContext) -> Check:
        if not h.stopped:
            return Check(False, "no lease needed: the hold stopped no timer")
        return Check(True, f"schedule lease {new}.timer: at {zulu(ends, ttl_s)} it starts "
                           f"{', '.join(h.stopped)}")

    def new_apply(ctx: RunContext) -> str:
        ttl = max(TTL_MIN_S, int((ends - utcnow()).total_seconds()))
        try:
            _, res = node_ops.schedule_lease(nctx.transport, new, ttl, list(h.stopped),
                                             description=f"seat-console hold {h.hold_id}: "
                                                         "restore timers (extended)")
        except node_ops.LeaseError as exc:
            raise StepError(str(exc)) from None
        ctx.facts["new_lease"] = new
        return (res.stdout + res.stderr).strip()

    def new_verify(ctx: RunContext) -> str:
        st = node_ops.read_lease(nctx.transport, new)
        if not node_ops.lease_pending(st):
            raise StepError(f"lease {new}.timer not armed")
        return f"lease {new}.timer elapses at {iso(st.next_elapse)}"

    def new_undo(ctx: RunContext) -> str:
        node_ops.cancel_lease(nctx.transport, new)
        return f"lease {new}.timer cancelled"

    def sil_check(ctx: RunContext) -> Check:
        if h.silence_id is None:
            return Check(False, "skip silence: the hold has none")
        return Check(True, f"move silence {h.silence_id}'s end to {iso(ends)}")

    def sil_apply(ctx: RunContext) -> str:
        try:
            cur = _am(nctx).get_silence(h.silence_id)
            back = node_ops.extend_silence(_am(nctx), cur, ends)
        except AlertmanagerError as exc:
            raise StepError(str(exc)) from None
        ctx.facts["old_silence_end"] = iso(cur.ends_at)
        hf(ctx)["silence_id"] = back.id
        return f"silenceID {back.id}" + ("" if back.id == cur.id else f" (was {cur.id})")

    def sil_verify(ctx: RunContext) -> str:
        s = _am(nctx).get_silence(hf(ctx)["silence_id"])
        if s.state != "active" or abs((s.ends_at - ends).total_seconds()) > 1:
            raise StepError(f"silence {s.id} reads back {s.state} until {iso(s.ends_at)}")
        return f"silence {s.id} active until {iso(s.ends_at)}"

    def sil_undo(ctx: RunContext) -> str:
        old_end = _from_iso(ctx.facts.get("old_silence_end"))
        if old_end is None or old_end <= utcnow():
            return "nothing to undo"
        s = _am(nctx).get_silence(hf(ctx)["silence_id"])
        back = node_ops.extend_silence(_am(nctx), s, old_end)
        hf(ctx)["silence_id"] = back.id
        return f"silence {back.id} back to end at {iso(old_end)}"

    def old_check(ctx: RunContext) -> Check:
        if not h.stopped:
            return Check(False, "no old lease")
        return Check(True, f"cancel the old lease {old}.timer")

    def old_apply(ctx: RunContext) -> str:
        node_ops.cancel_lease(nctx.transport, old)
        hf(ctx)["lease"] = new
        hf(ctx)["expires_at"] = iso(ends)
        return "cancelled"

    def old_verify(ctx: RunContext) -> str:
        if node_ops.lease_pending(node_ops.read_lease(nctx.transport, old)):
            raise StepError(f"old lease {old}.timer still armed")
        return f"old lease {old}.timer gone"

    def done_check(ctx: RunContext) -> Check:
        hf(ctx)["expires_at"] = iso(ends)
        if h.stopped:
            hf(ctx)["lease"] = new
        return Check(False, f"hold {h.hold_id} now ends at {iso(ends)}")

    steps = [Step("schedule new lease", new_check, new_apply, new_verify, new_undo,
                  manual=f"systemctl stop {new}.timer"),
             Step("extend silence", sil_check, sil_apply, sil_verify, sil_undo),
             Step("cancel old lease", old_check, old_apply, old_verify, None,
                  manual=f"systemctl stop {old}.timer"),
             Step("record new end", done_check, lambda c: None, lambda c: None)]
    return Runbook("extend", steps, journal=journal, observer=observer, policy="undo",
                   inputs={"hold_id": h.hold_id, "ttl_s": ttl_s}, facts=facts,
                   profile_sha256=nctx.loaded.sha256)


# -- interference ------------------------------------------------------------------------------
SETTLE_SKEW_S = 2.0
"""A timers reading that began less than this many seconds after the hold's stop of a timer was
verified (its journal row) says nothing about that timer after the stop (clocks of two console
processes on one host may differ by a little; a reading taken before the stop is stale). A
later reading decides: a real start is still seen, at most this much later."""


@dataclass(frozen=True)
class Breach:
    """One change someone else made to the hold: ``key`` (the change event's identity — a
    timer's ``ActiveEnterTimestamp``, a silence's end — so the same event seen twice is one
    notice and a later event is another), ``text`` (one sentence), ``changed_at`` (when the
    node says it happened, UTC, to the second; ``None`` unknown), ``seen_at`` (the reading that
    showed it began then, UTC), ``unit`` / ``silence_id`` (what changed)."""

    key: str
    text: str
    seen_at: datetime
    changed_at: datetime | None = None
    unit: str | None = None
    silence_id: str | None = None

    def facts(self) -> dict[str, Any]:
        """The journal row's facts: ``breach`` → unit/silence, changed_at, seen_at."""
        return {"breach": {"unit": self.unit, "silence_id": self.silence_id,
                           "changed_at": iso(self.changed_at), "seen_at": iso(self.seen_at)}}


def breaches(h: HoldState, timers: TimersReading | None, silences: Sequence[Silence] | None,
             now: datetime | None = None, *, settled: dict[str, datetime] | None = None,
             attributed: Any = None) -> list[Breach]:
    """Changes made by someone else while hold ``h`` is active (pure): a timer the hold stopped
    that reads active, or the hold's silence expired before its end.

    ``settled``: per timer, when the hold's stop of it was verified (:func:`stop_times`, from
    the journal — whichever console placed the hold); a timer is judged only from a reading
    that began :data:`SETTLE_SKEW_S` after that (``None``: every reading counts — the old,
    racy rule: a reading taken while another process was still stopping the timers showed them
    active). A timer the hold never verified stopped is not judged. ``attributed``:
    ``f(unit, at) -> label | None``, a journaled step of any console acting on that timer at
    that time (:func:`journal_attribution`); such a change is that step's, not a breach."""
    now = now or utcnow()
    if not h.is_active(now):
        return []
    out: list[Breach] = []
    if timers is not None:
        for unit in h.stopped:
            t = timers.get(unit)
            if t is None or not t.active:
                continue
            stop_at = (settled or {}).get(unit)
            if settled is not None:
                if stop_at is None or timers.read_at < stop_at + timedelta(seconds=SETTLE_SKEW_S):
                    continue
            if attributed is not None and attributed(unit, timers.read_at):
                continue
            when = iso(t.active_since)
            key = (f"timer:{unit}:active-since:{when}" if when
                   else f"timer:{unit}:after-stop:{iso(stop_at)}")
            out.append(Breach(
                key=key, unit=unit, seen_at=timers.read_at, changed_at=t.active_since,
                text=(f"{unit} was started by someone else during hold {h.hold_id}"
                      + (f" at {when}" if when else " (start time n/a)")
                      + (f" (the hold stopped it at {iso(stop_at)}" if stop_at else " (")
                      + f"; the lease restarts it at {zulu(h.expires_at)})")))
    if silences is not None and h.silence_id is not None:
        s = next((x for x in silences if x.id == h.silence_id), None)
        if s is not None and s.state == "expired":
            out.append(Breach(
                key=f"silence:{s.id}:ended:{iso(s.ends_at)}", silence_id=s.id, seen_at=now,
                changed_at=s.ends_at,
                text=f"silence {s.id} of hold {h.hold_id} was expired by someone else at "
                     f"{iso(s.ends_at)}, before {zulu(h.expires_at)}"))
    return out


def interference(h: HoldState, timers: TimersReading | None,
                 silences: Sequence[Silence] | None, now: datetime | None = None, *,
                 settled: dict[str, datetime] | None = None, attributed: Any = None
                 ) -> list[str]:
    """:func:`breaches` as sentences (pure)."""
    return [b.text for b in breaches(h, timers, silences, now, settled=settled,
                                     attributed=attributed)]


def stop_times(journal: Journal, h: HoldState) -> dict[str, datetime]:
    """Per timer hold ``h`` stopped: the time its ``stop <timer>`` step was verified (the
    ``verify`` row of the hold's run; any console's journal row on this journal)."""
    out: dict[str, datetime] = {}
    for r in journal.entries(run_id=h.run_id):
        if r.kind == "verify" and r.step.startswith("stop "):
            out[r.step.removeprefix("stop ")] = r.at
    return out


def journal_attribution(journal: Journal, h: HoldState, now: datetime | None = None) -> Any:
    """``f(unit, at) -> label | None``: the journaled step of any console (this journal) that
    acted on timer ``unit`` around ``at`` (:func:`seat_console.node.attribution.attribute`:
    the step's rows name it in ``facts["acts_on"]``) — a release's ``start``, an undo — except
    the hold's own ``stop`` steps (a stop never makes a timer active)."""
    from seat_console.node.attribution import ACTS_ON, Row, attribute

    since = (now or utcnow()) - timedelta(hours=2)
    rows = []
    for e in journal.entries(since=since):
        names = e.facts.get(ACTS_ON) if isinstance(e.facts.get(ACTS_ON), list) else []
        if e.run_id == h.run_id and e.step.startswith("stop ") and e.kind != "undo":
            names = []    # every row is kept (a run's end row ends its in-flight span)
        rows.append(Row(seq=e.seq, at=e.at, user=e.user, host=e.host, run_id=e.run_id,
                        runbook=e.runbook, kind=e.kind, step=e.step,
                        acts_on=tuple(str(n) for n in names)))

    def f(unit: str, at: datetime) -> str | None:
        a = attribute(rows, [unit], at, now=now)
        return a.label() if a is not None else None
    return f


def observe(journal: Journal, h: HoldState, timers: TimersReading | None,
            silences: Sequence[Silence] | None, now: datetime | None = None) -> list[Breach]:
    """:func:`breaches` with the journal consulted (:func:`stop_times`,
    :func:`journal_attribution`): what the TUI's action log, ``hold --status`` and the compare
    runbook call."""
    now = now or utcnow()
    if not h.is_active(now) or not breaches(h, timers, silences, now):
        return []   # nothing looks changed: the journal is not read (the TUI polls each second)
    return breaches(h, timers, silences, now, settled=stop_times(journal, h),
                    attributed=journal_attribution(journal, h, now))


def record_breaches(journal: Journal, h: HoldState, found: Sequence[Breach], *,
                    readonly: bool = False) -> list[Entry]:
    """Journal each breach of ``found`` against hold ``h`` once per change event
    (:meth:`Journal.append_once` keyed by :attr:`Breach.key`, atomic across processes), at the
    time it is written (after it was seen, never before it happened), with
    :meth:`Breach.facts`. ``readonly``: write nothing. Returns the rows written now."""
    if readonly:
        return []
    out = []
    for b in found:
        row = journal.append_once(run_id=h.run_id, runbook="hold", kind="interference",
                                  outcome=b.text, step="watch", facts=b.facts(), key=b.key)
        if row is not None:
            out.append(row)
    return out


def hold_breach_rows(journal: Journal, hold_id: str, since: datetime | None = None,
                     until: datetime | None = None) -> list[Entry]:
    """The journaled interference rows of hold ``hold_id`` (any console) between ``since`` and
    ``until`` (UTC, inclusive; ``None``: open)."""
    h = next((x for x in holds(journal) if x.hold_id == hold_id), None)
    if h is None:
        return []
    rows = journal.entries(run_id=h.run_id, kind="interference")
    return [r for r in rows if (since is None or r.at >= since)
            and (until is None or r.at <= until)]


OWN_CHANGE_GRACE_S = 30.0
"""After a release / extend of a hold ends, readings taken while it ran may still arrive for this
long (seconds); its changes are not interference."""


def own_change(journal: Journal, h: HoldState, now: datetime | None = None) -> str | None:
    """The run ID of a ``release`` or ``extend`` of hold ``h`` that is in flight (a ``start``
    row, no ``end`` row) or ended less than :data:`OWN_CHANGE_GRACE_S` ago, else ``None``.
    Timers it restarts or a silence it moves are the console's own change, not interference."""
    now = now or utcnow()
    for run_id, rows in journal.runs().items():
        if rows[0].runbook not in ("release", "extend"):
            continue
        hf = rows[0].facts.get("hold")
        hid = rows[0].inputs.get("hold_id") or (hf.get("hold_id") if isinstance(hf, dict)
                                                 else None)
        if not isinstance(hid, str) or hid != h.hold_id:
            continue
        end = next((r for r in rows if r.kind == "end"), None)
        if end is None or (now - end.at).total_seconds() < OWN_CHANGE_GRACE_S:
            return run_id
    return None


def note_interference(journal: Journal, h: HoldState, message: str) -> Entry:
    """Journal one interference notice against hold ``h`` (kind ``interference``)."""
    return journal.append(run_id=h.run_id, runbook="hold", kind="interference",
                          outcome=message, step="watch")


def record_interference(journal: Journal, h: HoldState, notes: Sequence[str], *,
                        readonly: bool = False) -> list[Entry]:
    """Journal each of ``notes`` (from :func:`interference`) against hold ``h`` once, whoever
    sees it first — the TUI's action log, ``hold --status``, another console on the same
    journal: a notice already journaled for the hold (same text) is not written again
    (:meth:`Journal.append_once`, atomic across processes). ``readonly``: write nothing (a
    ``--readonly`` console never writes the journal). Returns the rows written now. Callers
    skip the check while :func:`own_change` names a release / extend of the hold in flight.
    Raises :class:`~seat_console.actions.journal.JournalError` when a write fails."""
    if readonly:
        return []
    out = []
    for n in notes:
        row = journal.append_once(run_id=h.run_id, runbook="hold", kind="interference",
                                  outcome=n, step="watch")
        if row is not None:
            out.append(row)
    return out


__all__ = ["HoldState", "TTL_MAX_S", "TTL_MIN_S", "active_hold", "build_extend", "build_hold",
           "build_release", "build_cancel_deferred", "hold_in_effect", "lapse_sentence", "catchup_warning", "countdown", "current_hold", "expiry_text",
           "fmt_ttl",
           "foreign_lease_text", "holds",
           "interference", "iso", "new_hold_id", "note_interference", "own_change",
           "record_interference", "parse_ttl", "zulu", "Breach", "breaches", "stop_times",
           "journal_attribution", "observe", "record_breaches", "hold_breach_rows",
           "SETTLE_SKEW_S"]
