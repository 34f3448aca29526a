"""``seat-console recover [--undo | --complete] [--dry-run] [--yes] [--json]``: finish a
runbook that a dead console left unfinished.

Without ``--undo``/``--complete`` it lists each unfinished run (what it did, what may have
changed, what remains). ``--undo`` puts back every change the run began (idempotent: what the
lease already restored is left alone); ``--complete`` runs its remaining steps (a hold is
completed only while its lease is armed). Runs are finished oldest first; the output ends with
the runbook's ``next: …`` line.

Exit codes (:data:`EXIT_HELP`, shown by ``--help``; the action codes of
:mod:`seat_console.commands.action_common`):

* listing (no ``--undo``/``--complete``): ``0`` no unfinished run; ``4`` one or more found
  (listed: choose ``--undo`` or ``--complete``);
* ``--dry-run``: ``0`` (what would be done is printed; nothing changes);
* ``--undo`` / ``--complete`` (the worst run decides: 4 > 5 > 1 > 0): ``0`` nothing to do, or
  every run undone / completed; ``1`` a completion failed and what it began was undone;
  ``4`` a run is left partly changed (the output says what and how to fix it by hand);
  ``5`` refused, nothing changed (a run that cannot be recovered, a precondition that
  failed); ``6`` declined at the prompt;
* ``2`` usage: ``--undo`` with ``--complete``, no ``--yes`` off a terminal, or ``--readonly``;
* ``1`` also: the journal cannot be opened.
"""

from __future__ import annotations

import argparse
import sys

from seat_console.core import jsonout
from seat_console.actions import recover as rec
from seat_console.actions.journal import Journal
from seat_console.commands import action_common as ac
from seat_console.node.context import NodeContext
from seat_console.core.profile import LoadedProfile

PROG = "seat-console recover"
EXIT_HELP = """exit codes:
  listing (no --undo/--complete): 0 no unfinished run; 4 one or more found (listed)
  --dry-run: 0 (what would be done is printed; nothing changes)
  --undo/--complete (the worst run decides: 4 > 5 > 1 > 0):
    0 nothing to do, or every run undone / completed
    1 a completion failed and what it began was undone
    4 a run is left partly changed (what, and how to fix it by hand, is printed)
    5 refused, nothing changed (a run that cannot be recovered, a failed precondition)
    6 declined at the prompt
  2 usage: --undo with --complete, no --yes off a terminal, or --readonly
  1 the journal cannot be opened"""
"""The exit codes as ``recover --help`` prints them (the module docstring's, in words)."""


def register(sub: argparse._SubParsersAction) -> None:
    """Add the ``recover`` subcommand."""
    p = sub.add_parser("recover", help="find runbooks a dead console left unfinished; undo or "
                                       "complete them",
                       description="Finish runbooks a dead console left unfinished (from "
                                   "the journal): list them, --undo them or --complete them.\n\n"
                                   + EXIT_HELP,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    g = p.add_mutually_exclusive_group()
    g.add_argument("--undo", action="store_true", help="undo what each unfinished run began")
    g.add_argument("--complete", action="store_true", help="run each one's remaining steps")
    ac.add_action_flags(p, dry_run="print what would be done")
    p.set_defaults(func=ac.ends_with_next(run))


def run(args: argparse.Namespace, loaded: LoadedProfile) -> int:
    """List or finish unfinished runs (oldest first)."""
    return ac.with_node_and_journal(loaded, PROG, args.json,
                                    lambda nctx, journal: _recover(args, nctx, journal))


def _recover(args: argparse.Namespace, nctx: NodeContext, journal: Journal) -> int:
    runs = rec.unfinished(journal)
    if not args.undo and not args.complete or args.dry_run:
        if args.json:
            print(jsonout.dumps({"unfinished": [rec.describe(r) for r in runs]}, indent=2,
                                default=str))
        elif not runs:
            print("no unfinished runbook in the journal")
        else:
            act = "undo" if args.undo else "complete" if args.complete else None
            for rows in runs:
                print("\n".join(rec.describe_text(rows, act if args.dry_run else None)))
        if args.dry_run:
            return ac.EXIT_OK
        return ac.EXIT_PARTIAL if runs else ac.EXIT_OK
    if not runs:
        print(jsonout.dumps({"unfinished": [], "results": []}) if args.json
              else "no unfinished runbook in the journal; nothing to do")
        return ac.EXIT_OK
    action = "undo" if args.undo else "complete"
    if not args.yes:
        if not sys.stdin.isatty():
            return ac.fail(PROG, "this changes the node; add --yes to confirm",
                           ac.EXIT_USAGE, args.json)
        for rows in runs:
            print("\n".join(rec.describe_text(rows)))
        answer = input(f"{action} these? [y/N] ").strip()
        if answer.lower() not in ("y", "yes"):
            return ac.EXIT_DECLINED
        journal.confirmed("y", answer)
    else:
        journal.confirmed("--yes")
    results, worst = [], ac.EXIT_OK
    for rows in runs:
        try:
            res = rec.finish(nctx, journal, rows, action, observer=ac.observer(args.json))
        except ValueError as exc:
            print(f"{PROG}: {exc}", file=sys.stderr, flush=True)
            worst = ac.EXIT_REFUSED if worst != ac.EXIT_PARTIAL else worst
            continue
        results.append(res.to_json())
        undone_ok = action == "undo" and res.outcome == "undone"
        if not args.json:
            print(f"{res.runbook} {res.run_id}: recovered — every change it began is undone;"
                  " the node is as it was" if undone_ok else res.describe())
        code = ac.EXIT_OK if undone_ok else ac.exit_code(res)
        # the worst outcome decides: partial (4) > refused (5) > failed-undone (1) > ok
        worst = max((worst, code), key=[ac.EXIT_OK, ac.EXIT_ERROR, ac.EXIT_REFUSED,
                                        ac.EXIT_PARTIAL].index)
    if args.json:
        print(jsonout.dumps({"results": results}, indent=2, default=str))
    return worst
