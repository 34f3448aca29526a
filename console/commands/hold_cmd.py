"""``seat-console hold``: place the hold as a lease, show it, or extend it.

* ``hold [--ttl 4h] [--reason TEXT] [--dry-run] [--yes] [--json]`` — the hold runbook
  (:mod:`seat_console.actions.hold`): lease first, then the timers, then the silence;
* ``hold --status [--json]`` — the hold in effect (whoever placed it, from the journal), its
  countdown, the lease and silence as read on the node now, interference (each notice
  journaled once, whoever sees it first; not under ``--readonly``), unfinished runs,
  and any hold lease armed on the node by another console (``foreign_leases``: unit, elapse);
  ``hold`` refuses while one is armed unless ``--force --reason TEXT``;
* ``hold --extend TTL [--dry-run] [--yes] [--json]`` — a new lease and the silence's end moved
  to now + TTL, then the old lease cancelled.

A word where only options go (``hold status``, ``hold extend 1h``) is a usage error (exit 2,
JSON with ``--json``) that names the form meant (``hold --status``, ``hold --extend 1h``);
nothing is changed.

Exit codes: see :mod:`seat_console.commands.action_common` (0 done, 1 failed and undone,
2 usage / needs --yes, 4 left partly changed, 5 refused — nothing changed, 6 declined).
``hold --status``: 0 when everything it shows was read; 3 (unavailable) when a part of the hold
could not be read — its lease on the node, its silence in Alertmanager, or the node's hold
leases — the output names which (``unreadable`` in ``--json``), the rest is still shown.
"""

from __future__ import annotations

import argparse
import re
from typing import Any

from seat_console.core import jsonout
from seat_console.actions import hold as hold_mod
from seat_console.actions import node_ops
from seat_console.actions.journal import JournalError
from seat_console.commands import action_common as ac
from seat_console.core.profile import LoadedProfile
from seat_console.core.base import utcnow
from seat_console.node.alertmanager import AlertmanagerError
from seat_console.sources.timers import TimersReading, read_timers

PROG = "seat-console hold"


def register(sub: argparse._SubParsersAction) -> None:
    """Add the ``hold`` subcommand."""
    p = sub.add_parser("hold", help="stop the seat's timers and silence it, as a lease that "
                                    "restores them by itself at expiry",
                       description="Place the hold: a transient systemd timer on the node that "
                                   "restarts the timers at expiry is scheduled first, then the "
                                   "active timers are stopped and the seat silenced until "
                                   "now + TTL. Exit 0 done, 1 failed and undone, 2 usage, "
                                   "4 left partly changed, 5 refused (nothing changed), "
                                   "6 declined.")
    p.add_argument("--ttl", metavar="TTL", help="lease and silence lifetime, e.g. 4h, 30m, "
                                               "1h30m, 900s — a unit on every number "
                                               "(default: the profile's "
                                               "silence.ttl_s; 7200 s = 2 h in the embedded "
                                               "default profile)")
    p.add_argument("--reason", default="", metavar="TEXT",
                   help="why (goes in the silence comment and the journal)")
    p.add_argument("--force", action="store_true",
                   help="place the hold even though another console's lease is armed on the "
                        "node, or the silence matchers miss the seat's seat.endpoint "
                        "(needs --reason; journaled)")
    ac.add_action_flags(p)
    g = p.add_mutually_exclusive_group()
    g.add_argument("--status", action="store_true",
                   help="show the hold in effect (from the journal) and the node's lease/silence")
    g.add_argument("--extend", metavar="TTL", help="extend the active hold to now + TTL")
    # "--ttl -5m" / "--extend -5m": take "-5m" as the option's value (argparse would call it an
    # unknown option and print a bare usage error), so run() gives the TTL's own message.
    p._negative_number_matcher = re.compile(r"^-\d")  # noqa: SLF001 - argparse has no API
    # words where only options go (`hold status`, `hold extend 1h`): run() names the right
    # form, in JSON with --json (argparse alone said "unrecognized arguments: status")
    p.add_argument("words", nargs="*", help=argparse.SUPPRESS)
    p.set_defaults(func=ac.ends_with_next(run))


def stray_words(words: list[str]) -> str:
    """The usage error for ``words`` given to ``hold`` (it takes options only), naming the
    form that was meant: ``hold status`` → ``hold --status``, ``hold extend 1h`` → ``hold
    --extend 1h``, ``hold release`` → ``release``."""
    head = words[0].strip().lower()
    said = " ".join(words)[:100]
    if head in ("status", "show", "info"):
        right = "the hold's status is `seat-console hold --status` (add --json for JSON)"
    elif head == "extend":
        right = f"extending is `seat-console hold --extend {(words[1:] or ['TTL'])[0][:20]}`"
    elif head == "release":
        right = "releasing is `seat-console release`"
    else:
        right = ("hold takes options only: --ttl TTL, --reason TEXT, --status, --extend TTL "
                 "(`seat-console hold --help`)")
    return f"`hold {said}`: not a form of hold; {right}; nothing was changed"


def run(args: argparse.Namespace, loaded: LoadedProfile) -> int:
    """Dispatch to status / extend / place."""
    if getattr(args, "words", None):
        return ac.fail(PROG, stray_words(args.words), ac.EXIT_USAGE, args.json)
    try:
        ttl_s = (hold_mod.parse_ttl(args.ttl) if args.ttl is not None
                 else loaded.profile.silence.ttl_s)   # --ttl '' is an error, not the default
        ext_s = hold_mod.parse_ttl(args.extend) if args.extend is not None else None
    except ValueError as exc:
        opt = "extend" if args.extend is not None else "ttl"
        return ac.fail(PROG, f"--{opt}: {exc} (every number needs a unit: d, h, m, s)",
                       ac.EXIT_USAGE, args.json)
    if getattr(args, "force", False) and not (args.reason or "").strip():
        return ac.fail(PROG, "--force needs --reason TEXT (why the other lease is overridden; "
                             "it is journaled)", ac.EXIT_USAGE, args.json)

    def body(nctx: Any, journal: Any) -> int:
        if args.status:
            return status(nctx, journal, args.json, readonly=getattr(args, "readonly", False))
        if ext_s is not None:
            h = hold_mod.active_hold(journal)
            if h is None:
                return ac.fail(PROG, "no active hold to extend (see `seat-console hold "
                                     "--status`)", ac.EXIT_REFUSED, args.json)
            rb = hold_mod.build_extend(nctx, journal, h, ext_s,
                                       observer=ac.observer(args.json))
            title = f"extend hold {h.hold_id} to now + {hold_mod.fmt_ttl(ext_s)}"
        else:
            rb = hold_mod.build_hold(nctx, journal, ttl_s=ttl_s, reason=args.reason,
                                     observer=ac.observer(args.json),
                                     force=getattr(args, "force", False))
            title = f"hold {loaded.profile.node.name} for {hold_mod.fmt_ttl(ttl_s)}"
        plan = rb.plan()
        if args.dry_run:
            ac.print_plan(plan, title, args.json)
            return ac.EXIT_OK if plan.ok else ac.EXIT_REFUSED
        code = ac.refused(plan, PROG, args.json)
        if code is not None:
            return code
        code = ac.confirm(plan, title, args.yes, PROG, journal)
        if code is not None:
            return code
        res = rb.run()
        extra: dict[str, Any] = {}
        if res.ok:
            h = hold_mod.active_hold(journal)
            if h is not None:
                extra["hold"] = h.to_json()
                if not args.json:
                    print(placed_line(h))
        return ac.report(res, args.json, extra)

    return ac.with_node_and_journal(loaded, PROG, args.json, body)


def placed_line(h: Any) -> str:
    """The line printed once a hold is placed: the hold's ID (the one to quote: ``hold
    --status``, the silence comment, the lease unit's name), its lease unit, and the journal
    run that placed it, each labelled so two IDs are never taken for two holds."""
    return (f"hold ID {h.hold_id}: active until {hold_mod.iso(h.expires_at)}, lease "
            f"{h.lease_unit} on the node (journal run {h.run_id}); release with "
            "`seat-console release`")


def status(nctx: Any, journal: Any, json_mode: bool, readonly: bool = False) -> int:
    """Print the hold in effect and what the node says now; exit 0, or
    :data:`~seat_console.commands.action_common.EXIT_UNAVAILABLE` (3) when the hold's lease,
    its silence or the node's hold leases could not be read (:func:`unreadable`).

    Interference (a timer the hold stopped started again, its silence expired, by someone
    else — not this console's own release / extend, :func:`~seat_console.actions.hold.
    own_change`) is printed and journaled once (kind ``interference``, whoever sees it first:
    :func:`~seat_console.actions.hold.record_interference`); ``readonly`` (global
    ``--readonly``): printed, not journaled. JSON ``interference_journaled``: notices written
    by this call."""
    now = utcnow()
    h = hold_mod.current_hold(journal)
    out = _status_data(nctx, journal, h, now, readonly)
    out["unreadable"] = unreadable(out)
    code = ac.EXIT_UNAVAILABLE if out["unreadable"] else ac.EXIT_OK
    if json_mode:
        print(jsonout.dumps(out, indent=2, default=str))
        return code
    _print_status(journal, h, out, now)
    if out["unreadable"]:
        print(f"  NOT READ: {', '.join(out['unreadable'])} (exit {code}: the hold's state is "
              "only partly known)")
    return code


def unreadable(out: dict[str, Any]) -> list[str]:
    """What :func:`_status_data` could not read: ``"lease"``, ``"silence"``, ``"node leases"``
    (each carried an ``error``); ``[]`` when everything was read. Pure."""
    bad = []
    if isinstance(out.get("lease"), dict) and "error" in out["lease"]:
        bad.append("lease")
    if isinstance(out.get("silence"), dict) and "error" in out["silence"]:
        bad.append("silence")
    if "foreign_leases_error" in out:
        bad.append("node leases")
    return bad


def _status_data(nctx: Any, journal: Any, h: Any, now: Any, readonly: bool) -> dict[str, Any]:
    """:func:`status`'s facts as its ``--json`` prints them: the hold, its lease and silence
    as the node and Alertmanager say, interference (journaled unless ``readonly``), unfinished
    runs, other consoles' leases."""
    out: dict[str, Any] = {"now": hold_mod.iso(now), "hold": None, "lease": None,
                           "silence": None, "interference": [], "unfinished": [],
                           "foreign_leases": []}
    try:   # leases armed on the node by any console, this journal's own hold's excepted
        own = h.lease_unit if h is not None else None
        out["foreign_leases"] = [
            {"unit": t.unit, "next_elapse": hold_mod.iso(t.next_elapse),
             "text": hold_mod.foreign_lease_text(t, now)}
            for t in node_ops.node_leases(nctx.transport) if t.unit != own]
    except node_ops.LeaseError as exc:
        out["foreign_leases_error"] = str(exc)
    from seat_console.actions import recover

    out["unfinished"] = [recover.describe(rows) for rows in journal.unfinished()]
    timers: TimersReading | None = None
    if h is not None:
        out["hold"] = h.to_json(now)
        try:
            ls = node_ops.read_lease(nctx.transport, h.lease_unit)
            out["lease"] = {"unit": h.lease_unit, "load_state": ls.load_state,
                            "active_state": ls.active_state, "armed": node_ops.lease_pending(ls),
                            "next_elapse": hold_mod.iso(ls.next_elapse)}
            r = read_timers(nctx.transport, nctx.timer_units)
            timers = r if isinstance(r, TimersReading) else None
        except Exception as exc:  # noqa: BLE001 - status reports what it cannot read
            out["lease"] = {"unit": h.lease_unit, "error": str(exc)}
        sils = None
        if h.silence_id:
            try:
                s = nctx.alertmanager.get_silence(h.silence_id)
                sils = [s]
                out["silence"] = {"id": s.id, "state": s.state, "ends_at": hold_mod.iso(s.ends_at)}
            except (AlertmanagerError, ValueError) as exc:
                out["silence"] = {"id": h.silence_id, "error": str(exc)}
        if hold_mod.own_change(journal, h, now) is None:
            found = hold_mod.observe(journal, h, timers, sils, now)
            out["interference"] = [b.text for b in found]
            try:
                out["interference_journaled"] = [
                    e.outcome for e in hold_mod.record_breaches(
                        journal, h, found, readonly=readonly)]
            except JournalError as exc:
                out["interference_journal_error"] = str(exc)
    skipped = getattr(journal, "skipped", ())   # rows no reader could take (issue 31)
    if skipped:
        out["journal_bad_rows"] = [b.text() for b in skipped]
    return out


def _print_status(journal: Any, h: Any, out: dict[str, Any], now: Any) -> None:
    """:func:`status`'s text: the facts of :func:`_status_data` in lines."""
    if h is None:
        print(("no hold in this console's journal (every hold in it was released)"
               if hold_mod.holds(journal) else "no hold in the journal (none was ever placed)")
              if not out["foreign_leases"] else
              "no hold in this console's journal — but the node has a lease armed:")
    else:
        left = h.remaining_s(now)
        state = h.state if not (h.state == "active" and left <= 0) else "lapsed"
        print(f"hold {h.hold_id}: {state}, placed {hold_mod.iso(h.placed_at)} by {h.placed_by}"
              + (f" — {h.reason}" if h.reason else ""))
        print(f"  expires {hold_mod.iso(h.expires_at)} "
              + (f"(in {hold_mod.fmt_ttl(int(left))})" if left > 0 else "(passed)"))
        print(f"  stopped: {', '.join(h.stopped) or 'none'}")
        lease = out["lease"] or {}
        print(f"  lease {h.lease_unit}: " + (lease.get("error") or (
            f"armed, elapses {lease['next_elapse']}" if lease.get("armed")
            else f"not armed ({lease.get('load_state')})")))
        sil = out["silence"] or {}
        print(f"  silence {h.silence_id or 'none'}: " + (sil.get("error") or (
            f"{sil.get('state')} until {sil.get('ends_at')}" if sil else "n/a")))
        for i in out["interference"]:
            print(f"  INTERFERENCE: {i}" + (" (journaled now)"
                                            if i in out.get("interference_journaled", ())
                                            else ""))
        if "interference_journal_error" in out:
            print(f"  interference not journaled: {out['interference_journal_error']}")
        if h.state == "active" and left <= 0:
            print("  the lease has elapsed (timers restarted by the node, silence ended); run "
                  "`seat-console release` to check and close it")
    for fl in out["foreign_leases"]:
        print(f"  FOREIGN LEASE {fl['text']}: placed by another console (another state dir; "
              "not in this journal) — `hold` refuses while it is armed; release it from that "
              "console")
    if "foreign_leases_error" in out:
        print(f"  node leases: cannot read ({out['foreign_leases_error']})")
    for bad in out.get("journal_bad_rows", ()):
        print(f"  journal {bad}: skipped (edited outside the console?) — `seat-console journal "
              "--verify` names what changed")
    from seat_console.actions import recover as rec

    for rows in journal.unfinished():
        for line in rec.describe_text(rows):
            print(line)


__all__ = ["placed_line", "register", "run", "status", "unreadable"]
