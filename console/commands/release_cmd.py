"""``seat-console release [--dry-run] [--yes] [--json]``: end the hold.

Starts each timer the hold stopped (verified active with a next elapse; a ``Persistent=true``
timer that missed its elapse during the hold is warned about first: it fires at once), expires
the silence (it stays listed as expired), cancels the lease, verifies each. A release with no
hold says so and changes nothing (exit 5). A hold whose console died mid-runbook is finished
with ``seat-console recover`` instead.

Exit codes: :mod:`seat_console.commands.action_common`.
"""

from __future__ import annotations

import argparse

from seat_console.actions import hold as hold_mod
from seat_console.actions.journal import Journal
from seat_console.commands import action_common as ac
from seat_console.node.context import NodeContext
from seat_console.core.profile import LoadedProfile

PROG = "seat-console release"


def register(sub: argparse._SubParsersAction) -> None:
    """Add the ``release`` subcommand."""
    p = sub.add_parser("release", help="end the hold: restart the timers it stopped, expire its "
                                       "silence, cancel its lease",
                       description="Release the hold in effect. Exit 0 done, 2 usage, 4 left "
                                   "partly changed, 5 no hold (nothing changed), 6 declined.")
    ac.add_action_flags(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace, loaded: LoadedProfile) -> int:
    """Release the current hold."""
    return ac.with_node_and_journal(loaded, PROG, args.json,
                                    lambda nctx, journal: _release(args, nctx, journal))


def _release(args: argparse.Namespace, nctx: NodeContext, journal: Journal) -> int:
    h = hold_mod.current_hold(journal)
    if h is None:
        return ac.fail(PROG, "no hold to release: nothing changed (see `seat-console hold "
                             "--status`)", ac.EXIT_REFUSED, args.json)
    if h.state == "unfinished":
        return ac.fail(PROG, f"hold {h.hold_id} never finished (its console died mid-run): "
                             "run `seat-console recover` to undo or complete it",
                       ac.EXIT_REFUSED, args.json)
    rb = hold_mod.build_release(nctx, journal, h, observer=ac.observer(args.json))
    title = f"release hold {h.hold_id} (placed by {h.placed_by})"
    plan = rb.plan()
    if args.dry_run:
        ac.print_plan(plan, title, args.json)
        return ac.EXIT_OK
    code = ac.confirm(plan, title, args.yes, PROG)
    if code is not None:
        return code
    return ac.report(rb.run(), args.json)
