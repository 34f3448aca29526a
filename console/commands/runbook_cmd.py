"""``seat-console runbook [--json]``: the seat-swap runbook's state — each stage's mark, when and
by whom it was done, its evidence, what it needs, the next stage and its command;
``seat-console runbook next [--dry-run] [--yes] [--json]``: run the next stage.

The state is :func:`seat_console.actions.stages.read_runbook` (the node, the journal, the run
store; never this console's memory), so a console started after a crash shows the same.

``runbook next`` runs the next stage through the existing command's own code (its plan,
confirmation, journal and exit code; ``--dry-run``, ``--yes`` and ``--json`` passed on where
that command takes them):

* ``fit``: the candidate's fit verdict read now (the same as ``seat-console fit``) is journaled
  as a ``fit`` row (runbook ``fit``, kind ``end``, facts ``{"verdict": "fits" | "over" |
  "no verdict", "candidate", "resident", "words"}``); nothing on the node changes;
* ``image``, ``decide``, ``promote``: ``image-check``, ``decide``, ``promote`` (a stage
  whose command this console lacks is refused naming the command);
* ``hold``, ``backport``, ``swap``, ``probe``, ``compare``, ``restore``, ``release``: ``hold``
  (reason ``seat-swap runbook``), ``build-backport``, ``swap``, ``probe``, ``compare``,
  ``restore``, ``release`` (``restore --keep-hold`` where the candidate was swapped in
  before the compare: the runbook's next line names it);
* a run that never ended (a console killed inside it): ``recover``, which lists it and what
  it changed; choose ``seat-console recover --undo`` or ``--complete`` yourself.

After a closed cycle (a release ended it) ``runbook next`` starts a new one at ``fit``.

Exit codes:

* ``runbook``: ``0`` shown; ``1`` the journal cannot be read; ``3`` shown, but a source could
  not be read (the problems are listed: docker, the run store, a comparison's file);
* ``runbook next``: the stage's command's own code (:mod:`seat_console.commands.action_common`:
  0 done, 1 failed and undone, 2 usage / confirmation needed, 4 left partly changed,
  5 refused, 6 declined); ``5`` also when the stage's command is not in this console or there
  is no next stage to run (the state cannot be read); at ``fit``: ``0`` the candidate fits,
  ``5`` it does not or there is no verdict (journaled either way: the runbook stops there),
  ``1`` the verdict cannot be journaled.
"""

from __future__ import annotations

import argparse
import importlib
from typing import Any

from seat_console.actions.journal import Journal, JournalError
from seat_console.actions.stages import (
    RECOVER_COMMAND,
    RunbookState,
    StageState,
    next_json,
    next_line,
    read_runbook,
    restore_keeps_hold,
    seat_phrase,
    state_to_json,
)
from seat_console.commands import action_common as ac
from seat_console.core import jsonout
from seat_console.core.profile import LoadedProfile
from seat_console.node.context import NodeContext

PROG = "seat-console runbook"
EXIT_UNAVAILABLE = 3

HOLD_REASON = "seat-swap runbook"
"""The reason ``runbook next`` gives a hold it places (in the silence comment and journal)."""

# stage -> (command module, argv of the command)
DELEGATE: dict[str, tuple[str, list[str]]] = {
    "image": ("seat_console.commands.image_cmd", ["image-check"]),
    "hold": ("seat_console.commands.hold_cmd", ["hold", "--reason", HOLD_REASON]),
    "backport": ("seat_console.commands.backport_cmd", ["build-backport"]),
    "swap": ("seat_console.commands.swap_cmd", ["swap"]),
    "probe": ("seat_console.commands.probe_cmd", ["probe"]),
    "compare": ("seat_console.commands.compare_cmd", ["compare"]),
    "decide": ("seat_console.commands.decide_cmd", ["decide"]),
    "restore": ("seat_console.commands.swap_cmd", ["restore"]),
    "promote": ("seat_console.commands.promote_cmd", ["promote"]),
    "release": ("seat_console.commands.release_cmd", ["release"]),
    "recover": ("seat_console.commands.recover_cmd", ["recover"]),
}
"""Stage -> the command module that runs it and its arguments (``recover``: an unfinished
run)."""

_MARK = {"todo": "·", "done": "✓", "failed": "✗", "stale": "~", "skipped": "-"}


def register(sub: argparse._SubParsersAction) -> None:
    """Add the ``runbook`` subcommand (and its ``next``)."""
    p = sub.add_parser("runbook", help="the seat-swap runbook: each stage's state, evidence and "
                                       "the next stage; `runbook next` runs it",
                       description="The runbook fit -> image -> hold -> backport -> swap -> "
                                   "probe -> compare -> decide -> restore | promote -> release, "
                                   "read from the node, the journal and the run store. "
                                   "`runbook next` runs the next stage through its own "
                                   "command. Exit (runbook) 0 shown, 1 journal unreadable, "
                                   "3 a source unreadable; (runbook next) the stage command's "
                                   "code, 5 when it cannot be run here.")
    p.add_argument("action", nargs="?", choices=["next"],
                   help="next: run the next stage")
    ac.add_action_flags(p, dry_run="(next) show what the next stage would do; change nothing")
    p.set_defaults(func=run)


def read_state(nctx: NodeContext, journal: Journal) -> RunbookState:
    """The runbook's state now (:func:`read_runbook` with the default run store)."""
    return read_runbook(nctx, journal, leases=True)


def run(args: argparse.Namespace, loaded: LoadedProfile) -> int:
    """Show the runbook (``runbook``) or run its next stage (``runbook next``)."""
    if args.action == "next":
        return ac.with_node_and_journal(loaded, PROG + " next", args.json,
                                        lambda nctx, journal: _next(args, loaded, nctx, journal))
    return ac.with_node_and_journal(loaded, PROG, args.json,
                                    lambda nctx, journal: _show(args, nctx, journal))


# -- show ---------------------------------------------------------------------------------------
def _z(s: StageState) -> str:
    return "" if s.at is None else s.at.strftime("%Y-%m-%d %H:%M:%SZ")


def render(state: RunbookState) -> list[str]:
    """The runbook as text lines: a head (who is in the seat, the cycle), one line per stage
    (mark, name, status, when and by whom, evidence; the reason or what it needs under it),
    the problems, why the next stage jumps over todo ones (if it does) and the ``next: …``
    line. Marks: ✓ done, · todo, ✗ failed, ~ stale,
    - skipped."""
    cyc = ("cycle closed at " + state.cycle_closed_at.strftime("%Y-%m-%d %H:%M:%SZ")
           if state.cycle_closed_at is not None else
           "cycle since " + state.cycle_started_at.strftime("%Y-%m-%d %H:%M:%SZ")
           if state.cycle_started_at is not None else "first cycle in this journal")
    held = "".join(f" · held by another console: {fh}" for fh in state.foreign_holds)
    out = [f"runbook — in the seat: {seat_phrase(state.seat_holder)}{held} · {cyc}"]
    for s in state.stages:
        here = "▶" if state.next is not None and s.name == state.next.name else " "
        who = f" {_z(s)} by {s.operator}" if s.at is not None and s.operator else ""
        ev = "  " + ", ".join(f"{k} {v}" for k, v in s.evidence.items()) if s.evidence else ""
        out.append(f"{here}{_MARK[s.status]} {s.name:<9} {s.status:<8}{who}{ev}")
        out.extend(f"      {d}" for d in s.details)
        if s.reason:
            out.append(f"      {s.reason}")
        elif s.status == "todo":
            out.append(f"      needs {s.needs}; `{s.command}`")
    for p in state.problems:
        out.append(f"  problem: {p}")
    if state.next_why:
        out.append(state.next_why)
    out.append(next_line(state))
    return out


def downtime_line(d: dict[str, Any] | None) -> str:
    """The seat's downtime line (:func:`seat_console.actions.drain.downtime_line`)."""
    from seat_console.actions.drain import downtime_line as line

    return line(d)


def _show(args: argparse.Namespace, nctx: NodeContext, journal: Journal) -> int:
    from seat_console.actions.drain import last_downtime

    state = read_state(nctx, journal)
    down = last_downtime(journal)
    prof = getattr(args, "profile", None)
    if args.json:
        print(jsonout.dumps({**state_to_json(state),
                             "next": ac.next_doc_with_profile(next_json(state), prof),
                             "seat_downtime": down}, indent=2))
    else:
        lines = render(state)
        print(ac.with_profile("\n".join([*lines[:-1], downtime_line(down), lines[-1]]), prof))
    if state.next is None and state.cycle_closed_at is None and state.problems:
        return ac.EXIT_ERROR
    return EXIT_UNAVAILABLE if state.problems else ac.EXIT_OK


# -- next ---------------------------------------------------------------------------------------
def _next(args: argparse.Namespace, loaded: LoadedProfile, nctx: NodeContext,
          journal: Journal) -> int:
    prog = PROG + " next"
    state = read_state(nctx, journal)
    if state.next is None:
        if state.cycle_closed_at is None:
            why = state.problems[0] if state.problems else "every stage is done"
            return ac.fail(prog, f"no next stage to run: {why}", ac.EXIT_REFUSED, args.json)
        stage = "fit"   # a closed cycle: the next step opens a new one
    else:
        stage = "recover" if state.next.command == RECOVER_COMMAND else state.next.name
    keep = stage == "restore" and restore_keeps_hold(state)   # swapped before the compare
    if not args.json:
        print(f"runbook: next stage {stage}" + (" (keeping the hold: `seat-console restore "
                                                "--keep-hold`)" if keep else ""), flush=True)
    if stage == "fit":
        return _fit(args, loaded, nctx, journal)
    mod_name, argv = DELEGATE[stage]
    if keep:
        argv = [*argv, "--keep-hold"]
    try:
        mod = importlib.import_module(mod_name)
    except ImportError:
        cmd = " ".join(["seat-console", *argv])
        return ac.fail(prog, f"the {stage} stage's command `{cmd}` is not in this "
                             "console (update seat-console); nothing changed",
                       ac.EXIT_REFUSED, args.json)
    parser = argparse.ArgumentParser(prog="seat-console")
    sub = parser.add_subparsers(dest="command")
    mod.register(sub)
    takes = sub.choices[argv[0]]._option_string_actions   # noqa: SLF001 - argparse has no API
    flags = [f for f, on in (("--dry-run", args.dry_run), ("--yes", args.yes),
                             ("--json", args.json)) if on and f in takes]
    if args.dry_run and "--dry-run" not in takes:
        return ac.fail(prog, f"`seat-console {argv[0]}` has no --dry-run: run `runbook next` "
                             "without it to run the stage", ac.EXIT_USAGE, args.json)
    sub_args = parser.parse_args([*argv, *flags])
    return int(sub_args.func(sub_args, loaded))


def fit_facts(nctx: NodeContext) -> dict[str, Any]:
    """The fit verdict read now, as the ``fit`` row's facts
    (:func:`seat_console.actions.read_stages.fit_facts`: the TUI's runbook screen uses it too)."""
    from seat_console.actions.read_stages import fit_facts as read_fit

    return read_fit(nctx)


def _fit(args: argparse.Namespace, loaded: LoadedProfile, nctx: NodeContext,
         journal: Journal) -> int:
    prog = PROG + " next"
    facts = fit_facts(nctx)
    if args.dry_run:
        if args.json:
            print(jsonout.dumps({"dry_run": True, "stage": "fit", "would_journal": facts},
                             indent=2))
        else:
            print(f"fit — plan: journal the fit verdict ({facts['verdict']}): "
                  f"{facts['words']}; nothing on the node changes")
        # the exit code the run would give (5: it does not fit), as every --dry-run does
        return ac.EXIT_OK if facts["verdict"] == "fits" else ac.EXIT_REFUSED
    from seat_console.actions.read_stages import record_fit

    try:
        row = record_fit(journal, loaded, facts)
    except JournalError as exc:
        return ac.fail(prog, f"the fit verdict could not be journaled: {exc}", ac.EXIT_ERROR,
                       args.json)
    state = read_state(nctx, journal)
    nxt = ac.next_doc_with_profile(next_json(state), getattr(args, "profile", None))
    if args.json:
        print(jsonout.dumps({"stage": "fit", "journaled": row.seq, **facts,
                             "next": nxt}, indent=2, default=str))
    else:
        print(f"fit: {facts['verdict']} — {facts['words']} (journal row {row.seq})")
        print(nxt["line"])
    return ac.EXIT_OK if facts["verdict"] == "fits" else ac.EXIT_REFUSED


__all__ = ["DELEGATE", "fit_facts", "register", "render", "run"]
