"""What the action commands (``hold``, ``release``, ``recover``; later ``backport``, ``swap``,
``probe``) share: exit codes, the confirmation prompt, the terminal observer, and opening the
journal and the node context.

Exit codes of action commands (README.md):

* ``0`` — done (or, for ``--dry-run`` / ``--status``, the plan / status was printed);
* ``1`` — error: the action failed and every change was undone (the node is as it was), or an
  error before anything ran (invalid profile, journal unwritable);
* ``2`` — usage error, or confirmation needed: not a terminal and no ``--yes``;
* ``3`` — unavailable: a status (``hold --status``) could not read part of what it shows (the
  output names which part);
* ``4`` — failed part-way and something is LEFT CHANGED on the node: the output lists what and
  how to fix it by hand (also ``recover`` when an unfinished run was found and no choice given);
* ``5`` — refused: a precondition failed and nothing was changed (node unreachable, a binary
  missing on the node, a hold already active, no hold to release);
* ``6`` — the engineer declined at the confirmation prompt (nothing was changed).
"""

from __future__ import annotations

import argparse
import functools
import io
import json  # json.loads only: every document is written by jsonout
import os
import sys
from collections.abc import Callable
from typing import Any, TextIO

from seat_console.core import jsonout
from seat_console.actions.journal import Journal, JournalError
from seat_console.actions.runbook import Event, Plan, Result, Runbook
from seat_console.node.context import NodeContext
from seat_console.core.profile import LoadedProfile
from seat_console.core.profile_path import with_profile

EXIT_OK = 0
EXIT_ERROR = 1
EXIT_USAGE = 2
EXIT_UNAVAILABLE = 3
EXIT_PARTIAL = 4
EXIT_REFUSED = 5
EXIT_DECLINED = 6


def exit_code(result: Result) -> int:
    """The exit code of a finished run (module docstring)."""
    return {"done": EXIT_OK, "undone": EXIT_ERROR, "partial": EXIT_PARTIAL,
            "refused": EXIT_REFUSED}[result.outcome]


def open_journal(nctx: NodeContext | None = None) -> Journal:
    """The journal (``$SEAT_CONSOLE_STATE_DIR`` or the XDG state dir), with the node's
    credentials registered as secrets. Raises :class:`JournalError`."""
    j = Journal()
    if nctx is not None:
        j.add_secrets(nctx.secrets())
    return j


def context(loaded: LoadedProfile) -> NodeContext:
    """The node context for ``loaded``."""
    return NodeContext.from_profile(loaded)


def add_action_flags(p: argparse.ArgumentParser, *,
                     dry_run: str = "print the plan, change nothing",
                     json_help: str = "print the result as JSON",
                     yes: str | None = "do not ask for confirmation") -> None:
    """The flags every action command takes: ``--dry-run`` (help ``dry_run``), ``--yes`` (no
    confirmation prompt; help ``yes``; ``None``: a command that never asks has none) and
    ``--json`` (help ``json_help``)."""
    p.add_argument("--dry-run", action="store_true", help=dry_run)
    if yes is not None:
        p.add_argument("--yes", action="store_true", help=yes)
    p.add_argument("--json", action="store_true", help=json_help)


def with_node_and_journal(loaded: LoadedProfile, prog: str, json_mode: bool,
                          body: Callable[[NodeContext, Journal], int]) -> int:
    """Run ``body(node context, journal)`` and return its exit code; both are closed after it
    (also when it raises). A journal that cannot be opened is exit :data:`EXIT_ERROR` with
    its :class:`JournalError` message, printed as ``prog: …`` (JSON with ``json_mode``)."""
    nctx = context(loaded)
    try:
        try:
            journal = open_journal(nctx)
        except JournalError as exc:
            return fail(prog, str(exc), EXIT_ERROR, json_mode)
        try:
            return body(nctx, journal)
        finally:
            journal.close()
    finally:
        nctx.close()


def observer(json_mode: bool, out: TextIO | None = None) -> Callable[[Event], None]:
    """Prints each event as a line (to stderr with ``--json``, so stdout stays one document),
    flushed at once (a killed console has shown everything it did)."""
    stream = out or (sys.stderr if json_mode else sys.stdout)

    def obs(e: Event) -> None:
        print(e.line(), file=stream, flush=True)
    return obs


def print_plan(plan: Plan, title: str, json_mode: bool) -> None:
    """Print a dry-run plan (text or JSON on stdout)."""
    if json_mode:
        print(jsonout.dumps({"dry_run": True, **plan.to_json()}, indent=2))
        return
    print(f"{title} — plan (read from the node now; nothing changed):")
    for line in plan.text_lines():
        print(f"  {line}")


def refused(plan: Plan, prog: str, json_mode: bool) -> int | None:
    """``None`` when ``plan`` can run; else the refusal printed (every refusal of the plan,
    "refused, nothing changed") and :data:`EXIT_REFUSED` to return (nothing was changed)."""
    if plan.ok:
        return None
    err = plan.refusal_text()
    return fail(prog, f"refused, nothing changed: {err}", EXIT_REFUSED, json_mode)


def refuse_journaled(rb: Runbook, plan: Plan, prog: str, json_mode: bool) -> int | None:
    """``None`` when ``plan`` can run; else the refusal journaled (``rb`` is run: its first
    check refuses again and nothing changes) and printed with every refusal of the plan,
    :data:`EXIT_REFUSED` returned — or, should the node have changed since the plan so that
    the run went further, that run's result reported and its exit code returned."""
    if plan.ok:
        return None
    err = plan.refusal_text()
    res = rb.run()
    if res.outcome == "refused":
        return fail(prog, f"refused, nothing changed: {err}", EXIT_REFUSED, json_mode)
    return report(res, json_mode)


def plan_refuse_confirm(rb: Runbook, plan: Plan, title: str, args: argparse.Namespace,
                        seat: str, prog: str, journal: Journal,
                        what: str = "this stops the seat's resident") -> int | None:
    """Everything an action that takes the seat does before it runs (``swap``, ``promote``):
    ``--dry-run`` prints ``plan`` and returns 0 (5 when it refuses); a refusal is journaled
    and returned (:func:`refuse_journaled`); then the seat's name typed
    (:func:`typed_confirm`). ``None``: run it."""
    if args.dry_run:
        print_plan(plan, title, args.json)
        return EXIT_OK if plan.ok else EXIT_REFUSED
    code = refuse_journaled(rb, plan, prog, args.json)
    if code is not None:
        return code
    return typed_confirm(plan, title, seat, args.yes, prog, journal=journal, what=what)


def _unattended(yes: bool, prog: str, what: str, journal: Journal | None) -> int | None | bool:
    """The part of every confirmation before the question: ``None`` to go on (``--yes``,
    journaled as how it was confirmed), :data:`EXIT_USAGE` not on a terminal (said: add
    ``--yes``; ``what`` the action does), ``False`` to ask."""
    if yes:
        if journal is not None:
            journal.confirmed("--yes")
        return None
    if not sys.stdin.isatty():
        print(f"{prog}: {what}; not a terminal, so add --yes to confirm "
              "(or --dry-run to see the plan)", file=sys.stderr)
        return EXIT_USAGE
    return False


def typed_confirm(plan: Plan, title: str, seat: str, yes: bool, prog: str,
                  journal: Journal | None = None,
                  what: str = "this stops the seat's resident") -> int | None:
    """Typed confirmation: ``None`` to go on, else the exit code. With ``--yes`` go on; not on a
    terminal without it, exit 2 (the message says ``what`` the action does); else print the
    plan and require the seat's name typed (exit 6 when it does not match). ``journal``: how
    it was confirmed (``--yes``, or the name typed) goes in every row the run then writes
    (:meth:`~seat_console.actions.journal.Journal.confirmed`)."""
    first = _unattended(yes, prog, what, journal)
    if first is not False:
        return first
    print_plan(plan, title, False)
    try:
        answer = input(f"Type the seat's name ({seat}) to proceed: ").strip()
    except EOFError:
        answer = ""
    if answer != seat:
        print("declined (the name did not match); nothing was changed", file=sys.stderr)
        return EXIT_DECLINED
    if journal is not None:
        journal.confirmed("typed", answer)
    return None


def confirm(plan: Plan, title: str, yes: bool, prog: str,
            journal: Journal | None = None) -> int | None:
    """Ask before changing the node: ``None`` to go on, or the exit code to return.

    With ``--yes`` go on. Without it, on a terminal, print the plan and ask ``[y/N]``; not on a
    terminal, refuse with exit 2 and say to add ``--yes``. ``journal``: how it was confirmed
    (``--yes``, or ``y`` with what was typed) goes in every row the run then writes
    (:meth:`Journal.confirmed`).
    """
    first = _unattended(yes, prog, "this changes the node", journal)
    if first is not False:
        return first
    print_plan(plan, title, False)
    try:
        answer = input("Proceed? [y/N] ").strip().lower()
    except EOFError:
        answer = ""
    if answer not in ("y", "yes"):
        print("declined; nothing was changed", file=sys.stderr)
        return EXIT_DECLINED
    if journal is not None:
        journal.confirmed("y", answer)
    return None


def report(result: Result, json_mode: bool, extra: dict[str, Any] | None = None) -> int:
    """Print a run's result (JSON on stdout, or text) and return its exit code."""
    if json_mode:
        print(jsonout.dumps({**result.to_json(), **(extra or {})}, indent=2, default=str))
    else:
        stream = sys.stdout if result.ok else sys.stderr
        print(result.describe(), file=stream)
    return exit_code(result)


def fail(prog: str, message: str, code: int, json_mode: bool = False) -> int:
    """Print an error (JSON ``{"error": …}`` on stdout with ``--json``) and return ``code``."""
    if json_mode:
        print(jsonout.dumps({"ok": False, "error": message, "exit": code}))
    print(f"{prog}: {message}", file=sys.stderr)
    return code


# -- every action's output ends with the runbook's next stage (issue 30) -----------------------
_NEXT_DEPTH = [0]   # >0 while a wrapped command runs: an action run by `runbook next` says it once


ACTION_EXITS = ("exit codes: 0 done; 1 failed and undone; 2 usage (or no terminal and no "
                "--yes); 4 left partly changed (the output says what); 5 refused, nothing "
                "changed; 6 declined at the prompt")
"""The exit codes of every action command, as its ``--help`` ends (``epilog``)."""

def next_doc_with_profile(doc: dict[str, Any], profile: str | None) -> dict[str, Any]:
    """A ``next`` JSON object (:func:`seat_console.actions.stages.next_json`) with the commands
    it suggests given ``--profile`` (:func:`with_profile`): its ``line`` and ``command``."""
    if not profile:
        return doc
    return {**doc, **{k: with_profile(doc[k], profile) for k in ("line", "command")
                      if isinstance(doc.get(k), str)}}


def runbook_next(loaded: LoadedProfile | None,
                 profile: str | None = None) -> tuple[str, dict[str, Any]]:
    """The runbook's next stage read now (:func:`seat_console.actions.stages.read_runbook` over
    the node and the journal): ``(the "next: …" line, its JSON)`` — both from
    :func:`seat_console.actions.stages.next_json`, the one format every command uses.
    ``loaded`` ``None`` (a command that runs without a profile, e.g. ``decide``): the profile
    is looked up as the CLI does (``profile``: ``--profile``). Never raises: a state that
    cannot be read is said in the line (``next: unknown — …``; JSON ``name`` ``None`` and
    ``error``)."""
    from seat_console.actions.stages import next_json, read_runbook

    try:
        if loaded is None:
            from seat_console.core.profile import load_profile

            loaded = load_profile(profile)
        nctx = context(loaded)
        try:
            journal = open_journal(nctx)
            try:
                state = read_runbook(nctx, journal)
            finally:
                journal.close()
        finally:
            nctx.close()
    except Exception as exc:  # noqa: BLE001 - the action's own result stands; say why
        why = f"the runbook's state cannot be read ({type(exc).__name__}: {exc})"
        line = f"next: unknown — {why}"
        return line, {"name": None, "error": why, "line": line}
    doc = next_json(state)
    return doc["line"], doc


def ends_with_next(func: Callable[[argparse.Namespace, Any], int]
                   ) -> Callable[[argparse.Namespace, Any], int]:
    """Wrap an action command's ``run(args, loaded)`` so its output ends with one ``next: …``
    line (:func:`runbook_next`, read after the action), or, with ``--json``, a ``next`` key in
    its JSON document (``{"name", "status", "command", "key", "needs", "reason", "line", …}``).
    The exit code is the command's own; a usage error (:data:`EXIT_USAGE`) gets no ``next``
    (the command was not understood: its message says the fix). With ``--json`` the document
    is held until the
    command ends (the action's event lines go to stderr meanwhile); an interactive
    confirmation (``--json`` on a terminal, no ``--yes``/``--dry-run``, a command that takes
    ``--yes``) is not held back: then the line goes to stderr. ``loaded`` ``None`` (a command
    run without a profile, ``decide``): :func:`runbook_next` looks the profile up. An action
    run by another wrapped command (``runbook next``) says it once, at the end."""
    @functools.wraps(func)
    def wrapper(args: argparse.Namespace, loaded: LoadedProfile | None) -> int:
        if _NEXT_DEPTH[0]:
            return func(args, loaded)
        json_mode = bool(getattr(args, "json", False))
        hold_doc = json_mode and (not hasattr(args, "yes")    # a command that never asks
                                  or args.yes or getattr(args, "dry_run", False)
                                  or not sys.stdin.isatty())
        out, buf = sys.stdout, io.StringIO()
        _NEXT_DEPTH[0] += 1
        try:
            if hold_doc:
                sys.stdout = buf
            code = func(args, loaded)
        except BaseException:   # Ctrl-C, a bug: what the command wrote still comes out
            sys.stdout = out
            sys.stdout.write(buf.getvalue())
            raise
        finally:
            _NEXT_DEPTH[0] -= 1
            sys.stdout = out
        if code == EXIT_USAGE:   # the command was not understood: its own fix, no next step
            if hold_doc:
                sys.stdout.write(buf.getvalue())
            return code
        profile = getattr(args, "profile", None)
        line, doc = runbook_next(loaded, profile)
        line, doc = with_profile(line, profile), next_doc_with_profile(doc, profile)
        if not hold_doc:
            print(line, file=sys.stderr if json_mode else sys.stdout, flush=True)
            return code
        text = buf.getvalue()
        try:
            parsed = json.loads(text)
        except ValueError:
            parsed = None
        if isinstance(parsed, dict):
            print(jsonout.dumps({**parsed, "next": doc}, indent=2, default=str), flush=True)
        else:   # not one JSON object: left as the command wrote it, the line on stderr
            sys.stdout.write(text)
            print(line, file=sys.stderr, flush=True)
        return code
    return wrapper


__all__ = ["ACTION_EXITS", "EXIT_DECLINED", "EXIT_ERROR", "EXIT_OK", "EXIT_PARTIAL", "EXIT_REFUSED",
           "EXIT_UNAVAILABLE", "EXIT_USAGE", "JournalError", "confirm", "context",
           "plan_refuse_confirm",
           "ends_with_next", "exit_code", "fail", "next_doc_with_profile", "observer",
           "open_journal", "print_plan", "refuse_journaled", "refused", "report",
           "runbook_next", "typed_confirm", "with_profile"]
