"""``seat-console release [--defer UNIT=WHEN]… [--defer-firing WHEN] [--dry-run] [--yes]
[--json]``: end the hold; ``release --cancel-deferred``: start deferred timers now.

Starts each timer the hold stopped (verified active with a next elapse), expires the silence
(it stays listed as expired), cancels the lease, verifies each. Before each timer is started,
when it would elapse once started is read from the node — ``Persistent=true`` catch-up *and*
monotonic triggers (``OnUnitActiveSec=``, ``OnBootSec=``, ``OnUnitInactiveSec=``,
``OnStartupSec=``) whose interval already passed: systemd runs the service the moment such a
timer starts. Each is warned about with its time (``--dry-run`` shows the warnings first).
``--defer UNIT=WHEN`` keeps that timer stopped and schedules its start at WHEN on the node (a
transient timer ``seat-hold-…-defer-<timer>.timer``, journaled); ``--defer-firing WHEN`` does
so for every timer that would fire at once. WHEN: a duration from now (``30m``, ``2h``) or a
UTC time (``23:00Z``, ``2026-12-01T23:00Z``). ``--cancel-deferred`` cancels the deferred starts
armed on the node and starts those timers now.

A release with no hold says so and changes nothing (exit 5). A hold whose console died
mid-runbook is finished with ``seat-console recover`` instead. While the candidate holds the
seat and no promote made it the resident, the release is refused (exit 5, the state and the
fix named: ``restore`` or ``promote`` first); ``--force --reason TEXT`` releases anyway,
journaled (:func:`seat_console.actions.gates.release_gate`).

With Alertmanager unreachable the release still starts the timers and cancels the lease; the
silence is left to lapse by itself at the hold's end (the time is said) and the exit is 4, "left
partly changed", naming the silence that remains.

Exit codes: :mod:`seat_console.commands.action_common`.
"""

from __future__ import annotations

import argparse
from datetime import UTC, datetime, timedelta

from seat_console.core import jsonout
from seat_console.actions import hold as hold_mod
from seat_console.actions import node_ops
from seat_console.actions.journal import Journal
from seat_console.commands import action_common as ac
from seat_console.node.context import NodeContext
from seat_console.core.base import utcnow
from seat_console.core.profile import LoadedProfile

PROG = "seat-console release"


def register(sub: argparse._SubParsersAction) -> None:
    """Add the ``release`` subcommand."""
    p = sub.add_parser("release", help="end the hold: restart the timers it stopped, expire its "
                                       "silence, cancel its lease",
                       description="Release the hold in effect. Timers that would fire the "
                                   "moment they start (Persistent catch-up, a monotonic "
                                   "interval that passed) are warned about; --defer keeps one "
                                   "stopped until a chosen time. Exit 0 done, 2 usage, 4 left "
                                   "partly changed (e.g. Alertmanager unreachable: the silence "
                                   "lapses at its end), 5 no hold or refused (the candidate "
                                   "holds the seat; nothing changed), 6 declined.")
    p.add_argument("--defer", action="append", default=[], metavar="UNIT=WHEN",
                   help="keep timer UNIT stopped and start it at WHEN (30m, 2h, 23:00Z, "
                        "2026-12-01T23:00Z) by a transient timer on the node; repeatable")
    p.add_argument("--defer-firing", metavar="WHEN",
                   help="defer to WHEN every timer that would fire at once when started")
    p.add_argument("--force", action="store_true",
                   help="release although the candidate holds the seat without a promote "
                        "(needs --reason; journaled)")
    p.add_argument("--reason", default="", metavar="TEXT", help="why --force (journaled)")
    p.add_argument("--cancel-deferred", action="store_true",
                   help="cancel the deferred starts armed on the node and start those timers "
                        "now")
    ac.add_action_flags(p)
    p.set_defaults(func=ac.ends_with_next(run))


def parse_when(text: str, now: datetime | None = None) -> datetime:
    """WHEN → an aware UTC time: a duration from ``now`` (``30m``, ``1h30m``: every number
    with a unit, :func:`~seat_console.actions.hold.parse_ttl`'s bounds), ``HH:MMZ`` (the next
    such time, today or tomorrow, UTC) or an ISO 8601 time with ``Z`` or an offset
    (``2026-12-01T23:00Z``). Raises :class:`ValueError` naming the text and the forms."""
    now = now or utcnow()
    v = (text or "").strip()
    forms = "give a duration (30m, 2h) or a UTC time (23:00Z, 2026-12-01T23:00Z)"
    if not v:
        raise ValueError(f"WHEN {text!r}: empty — {forms}")
    try:
        return now + timedelta(seconds=hold_mod.parse_ttl(v))
    except ValueError:
        pass
    if len(v) in (6, 9) and v.upper().endswith("Z") and v[2] == ":":
        try:
            hh, mm, *ss = (int(x) for x in v[:-1].split(":"))
            t = now.replace(hour=hh, minute=mm, second=ss[0] if ss else 0, microsecond=0)
        except ValueError:
            raise ValueError(f"WHEN {text!r}: not a time — {forms}") from None
        return t if t > now else t + timedelta(days=1)
    try:
        t = datetime.fromisoformat(v.replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        raise ValueError(f"WHEN {text!r}: not a duration or a time — {forms}") from None
    if t.tzinfo is None:
        raise ValueError(f"WHEN {text!r}: no timezone — end it with Z (UTC)")
    t = t.astimezone(UTC)
    if t <= now:
        raise ValueError(f"WHEN {text!r}: {hold_mod.iso(t)} is in the past")
    return t


def parse_defer(items: list[str], defer_firing: str | None,
                now: datetime | None = None) -> tuple[dict[str, datetime], datetime | None]:
    """``--defer UNIT=WHEN`` items and ``--defer-firing WHEN`` → ``(unit → UTC time, time or
    None)`` (:func:`parse_when`); ``release`` and ``restore`` take both. Raises
    :class:`ValueError` naming the item and the form."""
    defer: dict[str, datetime] = {}
    for item in items:
        unit, sep, when = item.partition("=")
        if not sep or not unit.strip():
            raise ValueError(f"--defer {item!r}: give UNIT=WHEN, e.g. "
                             "seat-conformance-smoke.timer=30m")
        defer[unit.strip()] = parse_when(when, now)
    return defer, (parse_when(defer_firing, now) if defer_firing else None)


def run(args: argparse.Namespace, loaded: LoadedProfile) -> int:
    """Release the current hold (or cancel deferred starts)."""
    try:
        defer, firing = parse_defer(args.defer, args.defer_firing)
    except ValueError as exc:
        return ac.fail(PROG, str(exc), ac.EXIT_USAGE, args.json)
    if getattr(args, "force", False) and not (getattr(args, "reason", "") or "").strip():
        return ac.fail(PROG, "--force needs --reason TEXT (why the release goes on while the "
                             "candidate holds the seat; it is journaled)", ac.EXIT_USAGE,
                       args.json)
    if args.cancel_deferred and (defer or firing):
        return ac.fail(PROG, "--cancel-deferred cannot be combined with --defer/--defer-firing",
                       ac.EXIT_USAGE, args.json)
    return ac.with_node_and_journal(
        loaded, PROG, args.json,
        lambda nctx, journal: (_cancel(args, nctx, journal) if args.cancel_deferred
                               else _release(args, nctx, journal, defer, firing)))


def _release(args: argparse.Namespace, nctx: NodeContext, journal: Journal,
             defer: dict[str, datetime], firing: datetime | None) -> int:
    h = hold_mod.current_hold(journal)
    if h is None:
        return ac.fail(PROG, "no hold to release: nothing changed (see `seat-console hold "
                             "--status`)", ac.EXIT_REFUSED, args.json)
    if h.state == "unfinished":
        return ac.fail(PROG, f"hold {h.hold_id} never finished (its console died mid-run): "
                             "run `seat-console recover` to undo or complete it",
                       ac.EXIT_REFUSED, args.json)
    try:
        rb = hold_mod.build_release(nctx, journal, h, observer=ac.observer(args.json),
                                    defer=defer, defer_firing=firing,
                                    force=getattr(args, "force", False),
                                    reason=getattr(args, "reason", ""))
    except ValueError as exc:
        return ac.fail(PROG, str(exc), ac.EXIT_USAGE, args.json)
    title = f"release hold {h.hold_id} (placed by {h.placed_by})"
    plan = rb.plan()
    if args.dry_run:
        if args.json:
            print(jsonout.dumps({"dry_run": True, **plan.to_json(),
                                 "forecast": rb.ctx.facts.get("forecast", {})}, indent=2))
        else:
            ac.print_plan(plan, title, False)
        return ac.EXIT_OK if plan.ok else ac.EXIT_REFUSED
    code = ac.refused(plan, PROG, args.json)
    if code is not None:
        return code
    code = ac.confirm(plan, title, args.yes, PROG, journal)
    if code is not None:
        return code
    res = rb.run()
    return ac.report(res, args.json, {"forecast": res.facts.get("forecast", {}),
                                      "deferred": res.facts.get("deferred", {})})


def _cancel(args: argparse.Namespace, nctx: NodeContext, journal: Journal) -> int:
    try:
        ds = node_ops.node_deferrals(nctx.transport)
    except node_ops.LeaseError as exc:
        return ac.fail(PROG, str(exc), ac.EXIT_REFUSED, args.json)
    if not ds:
        return ac.fail(PROG, "no deferred timer start is armed on the node: nothing changed",
                       ac.EXIT_REFUSED, args.json)
    rb = hold_mod.build_cancel_deferred(nctx, journal, ds, observer=ac.observer(args.json))
    title = "cancel the deferred timer starts and start those timers now"
    plan = rb.plan()
    if args.dry_run:
        ac.print_plan(plan, title, args.json)
        return ac.EXIT_OK
    code = ac.confirm(plan, title, args.yes, PROG, journal)
    if code is not None:
        return code
    return ac.report(rb.run(), args.json)
