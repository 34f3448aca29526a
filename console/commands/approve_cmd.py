"""``seat-console approve [ID] [--dry-run] [--json]``: a second operator approves a waiting ``swap``,
``promote`` or ``compare`` (profile ``[runbook] approvals = 2``;
:mod:`seat_console.actions.approval`).

Without ``ID``: the approval requests pending in the journal (who asked, for which run, until
when). With ``ID`` (the one the waiting run printed, or its last 6 hex digits): approve it as
this operator (``SUDO_USER``, else the login name) — journaled with who you are
(:mod:`seat_console.actions.who`). The operator who started the run cannot approve it, and
nobody approves twice. ``--dry-run``: every check, nothing written.

Exit codes: 0 approved (or the pending list printed); 1 the journal cannot be opened or
written; 5 refused, nothing written (unknown ID, no longer pending or expired, the same
operator).
"""

from __future__ import annotations

import argparse
from seat_console.core import jsonout

from seat_console.actions import approval as ap
from seat_console.actions.journal import JournalError
from seat_console.commands import action_common as ac
from seat_console.core.profile import LoadedProfile

PROG = "seat-console approve"


def register(sub: argparse._SubParsersAction) -> None:
    """Add the ``approve`` subcommand."""
    p = sub.add_parser("approve", help="approve a swap/promote/compare waiting for a second "
                                       "operator ([runbook] approvals = 2); no ID: list them",
                       description="Approve, as a second operator, a run waiting for it. "
                                   "Exit 0 approved (or listed), 1 journal error, 5 refused.")
    p.add_argument("id", nargs="?", metavar="ID", help="the approval ID the waiting run printed")
    p.add_argument("--dry-run", action="store_true",
                   help="check that this operator may approve it; write nothing")
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    p.set_defaults(func=run, needs_profile=False)


def run(args: argparse.Namespace, loaded: LoadedProfile | None) -> int:
    """List pending approvals, or approve one (exit codes in the module docstring)."""
    try:
        journal = ac.open_journal()
    except JournalError as exc:
        return ac.fail(PROG, str(exc), ac.EXIT_ERROR, args.json)
    try:
        if not args.id:
            waiting = ap.pending(journal)
            if args.json:
                print(jsonout.dumps({"pending": [a.to_json() for a in waiting]}, indent=2))
            elif not waiting:
                print("no approval is pending")
            for a in ([] if args.json else waiting):
                print(f"{a.id}: {a.runbook} {a.run_id} requested by {a.requested_by} at "
                      f"{a.requested_at:%H:%M:%S}Z, until {a.expires_at:%H:%M:%S}Z — "
                      f"`seat-console approve {a.id}`")
            return ac.EXIT_OK
        try:
            a = ap.approve(journal, args.id, dry_run=args.dry_run)
        except ap.ApprovalError as exc:
            return ac.fail(PROG, f"refused, nothing written: {exc}", ac.EXIT_REFUSED, args.json)
        except JournalError as exc:
            return ac.fail(PROG, str(exc), ac.EXIT_ERROR, args.json)
        if args.json:
            print(jsonout.dumps({"approved": not args.dry_run, "dry_run": args.dry_run,
                              "approval": a.to_json()}, indent=2))
        else:
            print(f"{'would approve' if args.dry_run else 'approved'} {a.id}: {a.runbook} "
                  f"{a.run_id} — approvers "
                  f"{', '.join(a.approvers)} ({len(a.approvers)} of {a.needed})")
        return ac.EXIT_OK
    finally:
        journal.close()


__all__ = ["register", "run"]
