"""``seat-console promote``: the candidate in the seat becomes the seat's resident
(:mod:`seat_console.actions.promote`); ``promote --undo`` puts the previous resident back.

* ``promote [--dry-run] [--yes] [--force --reason TEXT] [--json]`` — refused unless a hold is
  active, the candidate (the ``[swap]`` probe container, started by a journaled swap) holds the
  seat and serves, and the newest ``decide`` row is PROMOTE-ABLE for the image it runs;
  ``--force --reason`` promotes anyway (journaled; the seat-state file records it). Asks the
  engineer to **type the seat's name** (``node.name``) unless ``--yes``. The candidate is
  renamed ``<resident>-promoted-<UTC>``, the seat-state file (``seat.json`` in the state dir)
  names it the resident, the profile gets a new version when it is a writable file (the plan
  says which), and its serving is verified. Any failure undoes what was done.
* ``promote --undo [--dry-run] [--yes] [--json]`` — needs an active hold: stop (keep) the
  promoted resident, start the previous one as recorded, verify image ID, ``/health`` and one
  completion, put the seat-state file and the profile back. Any failure undoes it (the promoted
  resident serving again).

Exit codes (:mod:`seat_console.commands.action_common`): ``0`` done (or the plan printed),
``1`` failed and every change undone, ``2`` usage (``--force`` without ``--reason``, ``--undo``
with ``--force``) or not a terminal without ``--yes``, ``4`` failed part-way and left partly
changed (the output lists what and how to fix it by hand), ``5`` refused: a precondition failed
and nothing was changed (the message names the state and the fix), ``6`` declined (the typed
name did not match).
"""

from __future__ import annotations

import argparse
from typing import Any

from seat_console.commands import action_common as ac
from seat_console.commands.swap_cmd import TYPED_YES
from seat_console.core.profile import LoadedProfile


def register(sub: argparse._SubParsersAction) -> None:
    """Add the ``promote`` subcommand."""
    p = sub.add_parser("promote", help="make the candidate in the seat its resident (needs a "
                                       "hold and a PROMOTE-ABLE decision); --undo puts the "
                                       "previous resident back",
                       description="Promote the candidate that holds the seat to resident. "
                                   "Exit 0 done, 1 failed and undone, 2 usage, 4 left partly "
                                   "changed, 5 refused (nothing changed), 6 declined.")
    p.add_argument("--undo", action="store_true",
                   help="put the previous resident back (runbook promote-undo)")
    p.add_argument("--force", action="store_true",
                   help="promote without a PROMOTE-ABLE decision for this candidate")
    p.add_argument("--reason", default="", metavar="TEXT", help="why --force (journaled)")
    ac.add_action_flags(p, yes=TYPED_YES)
    p.set_defaults(func=ac.ends_with_next(run))


def run(args: argparse.Namespace, loaded: LoadedProfile) -> int:
    """``promote``: exit codes in the module docstring."""
    from seat_console.actions import promote as promote_mod

    prog = "seat-console promote" + (" --undo" if args.undo else "")
    if args.undo and args.force:
        return ac.fail(prog, "--undo takes no --force (the undo needs no decision)",
                       ac.EXIT_USAGE, args.json)
    if args.force and not args.reason.strip():
        return ac.fail(prog, "--force needs --reason TEXT (it is journaled)", ac.EXIT_USAGE,
                       args.json)

    def body(nctx: Any, journal: Any) -> int:
        obs = ac.observer(args.json)
        if args.undo:
            rb = promote_mod.build_promote_undo(nctx, journal, observer=obs)
            title = f"undo the promotion on the seat {loaded.profile.node.name}"
        else:
            rb = promote_mod.build_promote(nctx, journal, force=args.force, reason=args.reason,
                                           observer=obs)
            title = f"promote the candidate to resident of the seat {loaded.profile.node.name}"
        plan = rb.plan()
        what = ("this stops the promoted resident and starts the previous one" if args.undo
                else "this changes the seat's resident")
        code = ac.plan_refuse_confirm(rb, plan, title, args, loaded.profile.node.name, prog,
                                      journal, what=what)
        if code is not None:
            return code
        res = rb.run()
        extra = {"resident": (res.facts.get("new_name") if res.ok and not args.undo
                               else None),
                 "forced": res.facts.get("forced")}
        return ac.report(res, args.json, extra)

    return ac.with_node_and_journal(loaded, prog, args.json, body)


__all__ = ["register", "run"]
