"""``seat-console swap`` and ``seat-console restore``: the probe container takes the seat, and
the resident comes back (:mod:`seat_console.actions.swap`).

* ``swap [--dry-run] [--yes] [--force --reason TEXT] [--json]`` — refuses without an active
  hold, and without a fitting candidate budget unless ``--force --reason`` (journaled). Asks
  the engineer to **type the seat's name** (``node.name``) unless ``--yes``: it stops the
  resident. A failure undoes the swap (the resident is started and verified); the hold stays.
* ``restore [--defer UNIT=WHEN]… [--defer-firing WHEN] [--keep-hold] [--dry-run] [--yes]
  [--json]`` — stop
  (keep) the probe, start the resident as the newest swap recorded it, verify image ID,
  ``/health``, one completion, then release the hold. Its plan names each timer that fires the
  moment it is started, with the time (``forecast`` in ``--json``), and takes the same
  ``--defer`` / ``--defer-firing`` as ``release``; when no hold is in effect it says first that
  the seat goes down unheld. ``--keep-hold``: the same, but the hold is checked active and
  kept instead of released (the cycle stays open: compare next, then swap again); refused
  (exit 5) without an active hold, and a usage error (2) with ``--defer``.
  When no swap is recorded and the resident holds the seat (running, the probe not), it says
  so and exits 0: nothing to restore (with or without ``--dry-run``).

The starting engine's log lines go to stderr prefixed ``  | ``. Exit codes: see
:mod:`seat_console.commands.action_common` (0 done, 1 failed and undone, 2 usage / needs
--yes, 4 left partly changed, 5 refused — nothing changed, 6 declined).
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from seat_console.core import jsonout
from seat_console.actions.runbook import StepError
from seat_console.commands import action_common as ac
from seat_console.core.profile import LoadedProfile


def register(sub: argparse._SubParsersAction) -> None:
    """Add the ``swap`` and ``restore`` subcommands."""
    p = sub.add_parser("swap", help="stop the resident and start the probe container in the "
                                    "seat (needs an active hold and a fitting budget)")
    p.epilog = ac.ACTION_EXITS
    p.add_argument("--force", action="store_true",
                   help="swap although the fit budget says the candidate does not fit")
    p.add_argument("--reason", default="", metavar="TEXT", help="why --force (journaled)")
    ac.add_action_flags(p, yes=TYPED_YES)
    p.set_defaults(func=ac.ends_with_next(run_swap))
    r = sub.add_parser("restore", help="stop (keep) the probe, start the resident as recorded, "
                                       "verify it answers, release the hold")
    r.epilog = ac.ACTION_EXITS
    r.add_argument("--defer", action="append", default=[], metavar="UNIT=WHEN",
                   help="as `release --defer`: keep timer UNIT stopped and start it at WHEN "
                        "(30m, 2h, 23:00Z) by a transient timer on the node; repeatable")
    r.add_argument("--defer-firing", metavar="WHEN",
                   help="defer to WHEN every timer that would fire at once when started")
    r.add_argument("--keep-hold", action="store_true",
                   help="put the resident back but keep the hold (timers stopped, silence on): "
                        "the cycle stays open, so a swap made before the compare is undone "
                        "and the compare can run next; `seat-console release` ends the hold")
    ac.add_action_flags(r)
    r.set_defaults(func=ac.ends_with_next(run_restore))


def _log_line(line: str) -> None:
    print(f"  | {line}", file=sys.stderr, flush=True)


typed_confirm = ac.typed_confirm   # where compare and promote found it before
TYPED_YES = "do not ask (otherwise the seat's name must be typed)"
"""``--yes``'s help where the confirmation is the seat's name typed."""


def run_swap(args: argparse.Namespace, loaded: LoadedProfile) -> int:
    """``swap``: exit codes in the module docstring."""
    from seat_console.actions import swap as swap_mod

    prog = "seat-console swap"
    if args.force and not args.reason.strip():
        return ac.fail(prog, "--force needs --reason TEXT (it is journaled)", ac.EXIT_USAGE,
                       args.json)

    def body(nctx: Any, journal: Any) -> int:
        opts = swap_mod.SwapOptions(force=args.force, reason=args.reason, on_log=_log_line)
        rb = swap_mod.build_swap(nctx, journal, options=opts, observer=ac.observer(args.json))
        plan = rb.plan()
        title = f"swap the seat {loaded.profile.node.name}"
        code = ac.plan_refuse_confirm(rb, plan, title, args, loaded.profile.node.name, prog,
                                      journal)
        if code is not None:
            return code
        res = rb.run()
        if not res.ok and not args.json:
            print("the swap failed; the resident was put back (see above). The hold is still "
                  "active: fix and swap again, or `seat-console restore` to release it",
                  file=sys.stderr)
        startup = res.facts.get("probe_startup")
        return ac.report(res, args.json, {"probe_startup": startup})

    return ac.with_node_and_journal(loaded, prog, args.json, body)


def run_restore(args: argparse.Namespace, loaded: LoadedProfile) -> int:
    """``restore``: exit codes in the module docstring."""
    from seat_console.actions import swap as swap_mod

    from seat_console.commands.release_cmd import parse_defer

    prog = "seat-console restore"
    try:
        defer, firing = parse_defer(getattr(args, "defer", []),
                                    getattr(args, "defer_firing", None))
    except ValueError as exc:
        return ac.fail(prog, str(exc), ac.EXIT_USAGE, args.json)

    def body(nctx: Any, journal: Any) -> int:
        try:
            rb = swap_mod.build_restore(nctx, journal, on_log=_log_line,
                                        observer=ac.observer(args.json), defer=defer or None,
                                        defer_firing=firing,
                                        keep_hold=bool(getattr(args, "keep_hold", False)))
        except ValueError as exc:
            return ac.fail(prog, str(exc), ac.EXIT_USAGE, args.json)
        except swap_mod.NothingToRestore as exc:
            if args.json:
                print(jsonout.dumps({"dry_run": bool(args.dry_run), "nothing_to_restore": True,
                                     "detail": str(exc)}, indent=2))
            else:
                print(f"restore the seat {loaded.profile.node.name}: {exc}")
            return ac.EXIT_OK
        except StepError as exc:
            return ac.fail(prog, f"refused, nothing changed: {exc}", ac.EXIT_REFUSED, args.json)
        plan = rb.plan()
        title = f"restore the seat {loaded.profile.node.name}"
        if args.dry_run:
            if args.json:
                print(jsonout.dumps({"dry_run": True, **plan.to_json(),
                                  "forecast": rb.ctx.facts.get("forecast", {})}, indent=2))
            else:
                ac.print_plan(plan, title, False)
            return ac.EXIT_OK if plan.ok else ac.EXIT_REFUSED
        code = ac.confirm(plan, title, args.yes, prog, journal)
        if code is not None:
            return code
        res = rb.run()
        return ac.report(res, args.json, {"forecast": res.facts.get("forecast", {})})

    return ac.with_node_and_journal(loaded, prog, args.json, body)


__all__ = ["register", "run_restore", "run_swap", "typed_confirm"]
