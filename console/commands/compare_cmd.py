"""``seat-console compare --bracket ABBA [--rounds N] [--dry-run] [--yes] [--json]``.

Runs the bracketed comparison (``seat_console.actions.compare``): A (resident) / B (candidate)
legs in the bracket's order, each on a freshly started container, one hold throughout, the
resident restored at the end; then prints the evidence report of the comparison
(``seat-console report <bracket id>`` prints it again). ``--dry-run`` prints the bracket's
legs, their pairing, the cost (minutes forecast from this node's measured swap, restore,
restart and leg-measurement times in the journal, or "no measurement yet"; whether the design
can reach a throughput/latency claim, with its minimum detectable effect or the rounds it
needs; JSON ``cost``), where it writes (a new folder ``cmp-<time>-<id>`` made when the compare
starts: a dry run names none; JSON ``folder``) and the runbook plan once
(:func:`render_dry_run`), and changes nothing. A real run writes into the folder its own plan
names, and prints the cost on stderr before it asks. The compare stops the seat's
resident, so it asks the engineer to type the seat's name unless ``--yes``.

Exit codes: as the other action commands (README.md): 0 done — every leg complete; 1 failed
and undone; 2 usage (or no terminal and no --yes); 4 left partly changed (the output says
what); 5 refused, nothing changed; 6 declined at the prompt; 7 the runbook ran to its end but
the bracket is not complete (a leg incomplete or disrupted): kept, no cross-arm claim.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from seat_console.core import jsonout
from seat_console.commands import action_common as ac
from seat_console.core.profile import LoadedProfile


EXITS = (ac.ACTION_EXITS + "; 7 the runbook ran to its end but the bracket is not complete "
                           "(kept, no cross-arm claim)")
"""The exit codes, as ``--help`` ends (``epilog``)."""


def register(sub: argparse._SubParsersAction) -> None:
    """Add the ``compare`` subcommand."""
    p = sub.add_parser("compare", help="bracketed A/B comparison of the resident and the "
                                       "candidate (probe, fidelity, canaries), then its report",
                       description=__doc__.split("\n\n")[0])
    p.epilog = EXITS
    p.add_argument("--bracket", default="ABBA", metavar="ORDER",
                   help="leg order, letters A (resident) and B (candidate), as many of each "
                        "(default ABBA)")
    p.add_argument("--rounds", type=int, default=None, metavar="N",
                   help="repeat the bracket N times, 1-16 (default: the fewest rounds that can "
                        "reach a throughput/latency claim, 3 for ABBA, as the runbook screen "
                        "offers; 1 is quicker but can only read INCONCLUSIVE)")
    p.add_argument("--ttl", default="1h", metavar="DURATION",
                   help="the hold's lease if the compare places one (default 1h)")
    p.add_argument("--canary-runs", type=int, default=3, metavar="N",
                   help="runs per canary item per leg, 3-100 (default 3)")
    p.add_argument("--no-fidelity", action="store_true", help="skip the fidelity prompts")
    p.add_argument("--no-canaries", action="store_true", help="skip the canaries")
    p.add_argument("--force", action="store_true",
                   help="swap even if the fit budget says the candidate does not fit "
                        "(needs --reason; journaled)")
    p.add_argument("--reason", default="", metavar="TEXT", help="why --force")
    p.add_argument("--dry-run", action="store_true", help="print the plan; change nothing")
    p.add_argument("--yes", action="store_true", help="do not ask for confirmation")
    p.add_argument("--json", action="store_true", help="JSON on stdout")
    p.set_defaults(func=ac.ends_with_next(run))


def _plan_json(legs: Any, pairs_: Any, plan: Any,
               cost: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"dry_run": True, "legs": [{"name": x.name, "arm": x.arm, "round": x.round,
                                       "pair": x.pair} for x in legs],
            "pairs": [[a.name, b.name] for a, b in pairs_], "plan": plan.to_json(),
            "cost": cost}


def render_dry_run(title: str, legs: Any, pairs_: Any, plan: Any,
                   cost: dict[str, Any] | None = None, folder: str | None = None) -> str:
    """The dry-run text, printed once: one header naming every leg (round, pair) and the
    pairs, the cost (``cost``: :func:`seat_console.actions.compare.forecast` — minutes from
    this node's measured swap and probe times, and whether the design can reach a claim),
    where the comparison will be written (``folder``: a sentence), then the runbook's plan
    (``✗`` marks a refused precondition; ``–`` no change)."""
    head = [f"{title} — plan (read from the node now; nothing changed):",
            f"  {len(legs)} legs: "
            + ", ".join(f"{x.name} (round {x.round}, pair {x.pair})" for x in legs)
            + "; pairs " + ", ".join(f"{a.name}-{b.name}" for a, b in pairs_)]
    if cost is not None:
        head.append(f"  cost: {cost['text']}")
    if folder is not None:
        head.append(f"  folder: {folder}")
    return "\n".join([*head, *(f"  {line}" for line in plan.text_lines())]) + "\n"


def run(args: argparse.Namespace, loaded: LoadedProfile) -> int:
    """``compare``: exit codes in the module docstring."""
    from seat_console.actions.hold import parse_ttl
    from seat_console.actions.journal import JournalError
    from seat_console.evidence.bracket import BracketError, pairs, plan_bracket

    prog = "seat-console compare"
    try:
        if args.rounds is None:   # the runbook screen's default design (tui/runbook.py)
            from seat_console.actions.compare import claim_rounds

            args.rounds = claim_rounds(args.bracket)
        legs = plan_bracket(args.bracket, args.rounds)
        ttl_s = parse_ttl(args.ttl)
    except (BracketError, ValueError) as exc:
        return ac.fail(prog, str(exc), ac.EXIT_USAGE, args.json)
    if not 3 <= args.canary_runs <= 100:
        return ac.fail(prog, f"--canary-runs {args.canary_runs}: give 3 to 100 (pass^3 needs "
                             "3 runs per item)", ac.EXIT_USAGE, args.json)
    if args.force and not args.reason.strip():
        return ac.fail(prog, "--force needs --reason TEXT (it is journaled)", ac.EXIT_USAGE,
                       args.json)
    if loaded.profile.swap is None:
        return ac.fail(prog, f"{loaded.source} has no [swap] section: there is no candidate "
                             "to compare (see docs/evidence.md)", ac.EXIT_REFUSED, args.json)
    from seat_console.actions import compare as cmp_mod

    nctx = ac.context(loaded)
    try:
        journal = ac.open_journal(nctx)
    except JournalError as exc:
        nctx.close()
        return ac.fail(prog, str(exc), ac.EXIT_ERROR, args.json)
    try:
        opts = cmp_mod.CompareOptions(
            order=args.bracket, rounds=args.rounds, ttl_s=ttl_s, canary_runs=args.canary_runs,
            fidelity=not args.no_fidelity, canaries=not args.no_canaries, force=args.force,
            reason=args.reason,
            on_log=lambda line: print(f"  | {line}", file=sys.stderr, flush=True))
        # a dry run names no folder (a later compare mints its own); a real run writes into
        # the one its plan names
        rb, cmp_dir = cmp_mod.build_compare(
            nctx, journal, options=opts, observer=ac.observer(args.json),
            bracket_id=cmp_mod.UNNAMED_BRACKET if args.dry_run else None)
        plan = rb.plan()
        title = f"compare {args.bracket} x{args.rounds} on the seat {loaded.profile.node.name}"
        cost = compare_cost(cmp_mod, journal, args.bracket, args.rounds,
                            restore_first=plan.facts.get("seat_holder") == "candidate")
        if args.dry_run:
            folder = (f"a new folder {cmp_dir} is made when the compare starts (this dry run "
                      "names none)")
            if args.json:
                print(jsonout.dumps({**_plan_json(legs, pairs(legs), plan, cost),
                                     "folder": folder}, indent=2, default=str))
            else:
                sys.stdout.write(render_dry_run(title, legs, pairs(legs), plan, cost, folder))
            return ac.EXIT_OK if plan.ok else ac.EXIT_REFUSED
        if not args.json:
            print(f"compare cost: {cost['text']}", file=sys.stderr)
        code = ac.refused(plan, prog, args.json)
        if code is not None:
            return code
        code = ac.typed_confirm(plan, title, loaded.profile.node.name, args.yes, prog,
                              journal)
        if code is not None:
            return code
        res = cmp_mod.run_compare(rb, cmp_dir, opts, nctx)
        code, headline = bracket_outcome(res, cmp_dir)
        print(f"[compare] {cmp_dir}", file=sys.stderr)
        if not args.json:
            print(headline, file=sys.stderr)
        result = {**res.to_json(), "cost": cost}
        if code == EXIT_NOT_COMPLETE:
            result.update(runbook_outcome=result["outcome"], outcome="bracket not complete",
                          bracket_status=headline)
        return _print_report(cmp_dir, args.json, result, code)
    finally:
        journal.close()
        nctx.close()


def compare_cost(cmp_mod: Any, journal: Any, order: str, rounds: int, *,
                 restore_first: bool = False) -> dict[str, Any]:
    """The compare's cost up front (:func:`seat_console.actions.compare.forecast`), the hold's
    state read from the journal now (an active hold is used, so neither placed nor released;
    ``restore_first``: the candidate holds the seat, so the restore the gate asks for releases
    that hold and the compare places its own)."""
    from seat_console.actions.hold import active_hold

    return cmp_mod.forecast(journal, order, rounds,
                            hold_active=active_hold(journal) is not None and not restore_first)


EXIT_NOT_COMPLETE = 7
"""The runbook ran to its end (seat restored, hold as it was) but the bracket is not complete:
a leg incomplete or disrupted, fewer legs than planned, or ``compare.json`` unreadable. Its
report refuses every cross-arm claim; it is kept, never deleted."""


def bracket_outcome(res: Any, cmp_dir: Path) -> tuple[int, str]:
    """The exit code and the headline for a finished compare: the runbook's own when it did
    not run to its end (1 undone, 4 partly changed, 5 refused); else 0 and "done" only when
    ``compare.json`` says ``complete``, otherwise :data:`EXIT_NOT_COMPLETE` and a headline
    that says why — never "done" for a bracket that is not complete."""
    if res.outcome != "done":
        return ac.exit_code(res), res.describe()
    try:
        doc = json.loads((cmp_dir / "compare.json").read_text("utf-8"))
        status, reason = doc.get("status"), doc.get("reason")
    except (OSError, ValueError, AttributeError) as exc:
        status, reason = "unknown", f"compare.json unreadable ({exc})"
    if status == "complete":
        return ac.EXIT_OK, res.describe()
    lines = res.describe().splitlines()
    lines[0] = (f"{res.runbook} (journal run {res.run_id}): bracket {status or 'unknown'} — "
                f"NOT complete: {reason or 'no reason recorded'}. The runbook ran to its end "
                f"(seat restored, hold as it was); the legs are kept, and the report refuses "
                f"every cross-arm claim (exit {EXIT_NOT_COMPLETE})")
    return EXIT_NOT_COMPLETE, "\n".join(lines)


def _print_report(cmp_dir: Path, json_mode: bool, result: dict[str, Any], code: int) -> int:
    from seat_console.evidence import report as rp
    from seat_console.evidence.runs import RunError

    try:
        rep = rp.build_report(rp.load_inputs([str(cmp_dir)]))
    except RunError as exc:
        print(f"seat-console compare: the report cannot be built: {exc}", file=sys.stderr)
        if json_mode:
            print(jsonout.dumps({"result": result, "comparison": str(cmp_dir),
                                 "report_error": str(exc)}, indent=2, default=str))
        return code or ac.EXIT_ERROR
    if json_mode:
        print(jsonout.dumps({"result": result, "comparison": str(cmp_dir), "report": rep},
                            indent=2, default=str))
    else:
        sys.stdout.write(rp.render_markdown(rep))
    return code
