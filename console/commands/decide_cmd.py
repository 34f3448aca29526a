"""``seat-console decide [RUN…] [--json] [--dry-run] [--data-dir DIR]``.

The decide stage of the runbook: builds the evidence report of RUN… (default: the newest
compare bracket — the newest ``compare`` run in the journal whose comparison directory exists,
else the newest comparison under the data dir), prints its decision (per question;
:mod:`seat_console.evidence.decision`) and journals it (runbook ``decide``,
:func:`seat_console.actions.decide.record_decision`), which is what ``promote`` reads. An
INCONCLUSIVE that needs more rounds says how long they would take on this node
(:func:`seat_console.actions.compare.forecast`, from the journal's measured times).
``--dry-run`` prints the decision and journals nothing. Its output ends with the runbook's
``next: …`` line (``--json``: the ``next`` key), as every action's does.

Outcomes (each question answered, or "cannot tell, because …; needs …"):

* **PROMOTE-ABLE** — nothing measured speaks against the candidate and every critical check
  (canaries, fidelity) passed: ``seat-console promote`` may make it the resident;
* **KEEP** — a critical check failed, or the candidate is worse by a claimed difference: keep
  the resident (``seat-console restore``, then ``seat-console release``);
* **INCONCLUSIVE** — nothing failed, but a question cannot be answered (too little data is
  never a pass): "what would decide it" names the measurement and its cost on this node.

It changes nothing on the node (it writes the journal only), so ``--readonly`` allows it.

Exit codes: 0 the decision was made (and journaled, unless ``--dry-run``) — whatever it is:
the outcome is in the output, not the exit code; 1 a run cannot be read, no comparison was
found, or the journal cannot be read or written; 2 usage.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from seat_console.commands import action_common as ac
from seat_console.core import jsonout

EXIT_OK, EXIT_ERROR, EXIT_USAGE = 0, 1, 2
PROG = "seat-console decide"


def register(sub: argparse._SubParsersAction) -> None:
    """Add the ``decide`` subcommand (its ``--help``: the module docstring's outcomes and exit
    codes)."""
    body = ("The decide stage: the decision from the newest compare bracket (or RUN…), per\n"
            "question, journaled (what `seat-console promote` reads); --dry-run journals\n"
            "nothing. The output ends with the runbook's `next: …` line, as every action's.\n\n"
            + __doc__.split("\n\n", 2)[2].replace("``", "`")
            .replace("**", ""))
    p = sub.add_parser("decide", help="the decision from the evidence (PROMOTE-ABLE, KEEP or "
                                      "INCONCLUSIVE, per question), journaled",
                       description=body,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("runs", nargs="*", metavar="RUN",
                   help="a run or comparison ID or directory (default: the newest compare "
                        "bracket)")
    ac.add_action_flags(p, yes=None, dry_run="print the decision, journal nothing",
                        json_help="JSON on stdout")
    p.add_argument("--data-dir", metavar="DIR",
                   help="where run IDs and comparisons are looked up (default: "
                        "$SEAT_CONSOLE_DATA_DIR or the XDG data dir)")
    p.set_defaults(func=ac.ends_with_next(run), needs_profile=False)


from seat_console.actions.read_stages import make_decision  # noqa: E402 - the one copy


def _fail(msg: str, code: int, json_mode: bool) -> int:
    return ac.fail(PROG, msg, code, json_mode)


def _profile_sha256(args: argparse.Namespace) -> str:
    """The hash of the profile this console runs with, for the decide row (every other row
    has one; it was empty: the trial). ``decide`` is registered without a profile
    (``needs_profile=False``): it is loaded here for the hash, "" when it cannot be."""
    from seat_console.core.profile import ProfileError, load_profile

    try:
        return load_profile(getattr(args, "profile", None)).sha256
    except ProfileError:
        return ""


def run(args: argparse.Namespace, _loaded: Any) -> int:
    """``decide``: exit codes in the module docstring."""
    from seat_console.actions import decide as dec
    from seat_console.actions.journal import JournalError
    from seat_console.evidence.decision import render_lines
    from seat_console.evidence.runs import RunError

    data_root = Path(args.data_dir) if args.data_dir else None
    try:
        journal = ac.open_journal()
    except JournalError as exc:
        return _fail(str(exc), EXIT_ERROR, args.json)
    try:
        try:
            made = make_decision(journal, list(args.runs), data_root)
        except LookupError as exc:
            return _fail(str(exc), EXIT_ERROR, args.json)
        except RunError as exc:
            return _fail(str(exc), EXIT_ERROR, args.json)
        decision, facts, cost, at = made.decision, made.facts, made.cost, made.at
        sources_read = list(made.sources)
        row = None
        if not args.dry_run:
            row = dec.record_decision(journal, facts, at=at,
                                      profile_sha256=_profile_sha256(args),
                                      inputs={"sources": sources_read},
                                      output=f"{facts['decision']}: {decision.get('why')}")
    except JournalError as exc:
        return _fail(str(exc), EXIT_ERROR, args.json)
    finally:
        journal.close()
    if args.json:
        print(jsonout.dumps({"ok": True, "dry_run": args.dry_run, "decision": decision,
                          "facts": facts, "cost": cost, "inputs": sources_read,
                          "journaled": None if row is None else {"seq": row.seq,
                                                                 "run_id": row.run_id}},
                            indent=2))
        return EXIT_OK
    lines = render_lines(decision)
    if cost is not None:
        lines += ["", f"Cost of what would decide it: {cost['text']}"]
    lines += ["", "Inputs: " + ", ".join(sources_read),
              f"Report SHA-256: {facts['report_sha256']} (built at {at.isoformat()})",
              ("Not journaled (--dry-run)." if row is None else
               f"Journaled: decide row {row.seq} (run {row.run_id}).")]
    print("\n".join(lines))
    return EXIT_OK
