"""``seat-console image-check [--json] [--dry-run]``: the runbook's image stage.

Checks what the candidate needs from its serving image (``[candidate.requires]``: an engine
version range, files with patterns, Python names) inside each image that could serve it — the
backport's base (by digest), the backport's output, the swap's image, the candidate's declared
image — offline (:mod:`seat_console.sources.image_caps`), and says which image has it and
which lacks it, with the line it found or missed. It changes nothing on the node; it journals
its answer (runbook ``image-check``, one ``end`` row) so the runbook's image stage is read from
the journal by any console.

Exit codes: ``0`` the image the swap will use has every requirement; ``1`` it lacks one (the
output names the image that has it, if any); ``2`` usage (no ``[candidate.requires]``);
``3`` cannot tell (docker unreachable, the image not built or not pulled, the check could not
run).
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from seat_console.commands import action_common as ac
from seat_console.core import jsonout
from seat_console.core.profile import LoadedProfile

EXIT_OK = 0
EXIT_LACKS = 1
EXIT_USAGE = 2
EXIT_UNKNOWN = 3


EXITS = ("exit codes: 0 the image the swap will use has every requirement; 1 it lacks one; 2 "
         "usage (no [candidate.requires]: the runbook skips the stage); 3 cannot tell (docker "
         "unreachable, the image not built or pulled)")
"""The exit codes, as ``--help`` ends (``epilog``)."""


def register(sub: argparse._SubParsersAction) -> None:
    """Add the ``image-check`` subcommand."""
    p = sub.add_parser("image-check",
                       help="check [candidate.requires] inside each image offline: which image "
                            "has the capability, with the line found or missed (journaled)")
    ac.add_action_flags(p, yes=None, json_help="print the answer as JSON",
                        dry_run="list the images and requirements that would be checked; "
                                "read nothing")
    p.epilog = EXITS
    p.set_defaults(func=ac.ends_with_next(run))


from seat_console.actions.read_stages import (  # noqa: E402 - the one copy (the TUI's too)
    check_images,
    python_bin,
    record_image_check,
)
from seat_console.actions.read_stages import image_targets as images  # noqa: E402


def run(args: argparse.Namespace, loaded: LoadedProfile) -> int:
    """Check, print, journal; exit codes in the module docstring."""
    prog = "seat-console image-check"
    cand = loaded.profile.candidate
    req = cand.requires if cand is not None else None
    if req is None:
        return ac.fail(prog, f"{loaded.source} has no [candidate.requires]: declare what the "
                             "candidate needs from its serving image (engine = \">=0.33\", "
                             "[[candidate.requires.files]] path + pattern, python = "
                             "[\"pkg.mod:attr\"]; see docs/runbook.md, 'The image stage'); "
                             "without it there is nothing to check and the runbook skips this "
                             "stage",
                       EXIT_USAGE, args.json)
    targets = images(loaded)
    if args.dry_run:
        plan = {"dry_run": True, "requires": req.model_dump(mode="json"),
                "images": [{"role": r, "image": i} for r, i in targets],
                "python_bin": python_bin(loaded)}
        if args.json:
            print(jsonout.dumps(plan, indent=2))
        else:
            print(f"image-check plan (dry run, nothing read): {len(targets)} image(s), offline")
            for r, i in targets:
                print(f"  {r}: {i}")
        return EXIT_OK
    from seat_console.node.context import NodeContext

    try:
        client = NodeContext.from_profile(loaded).docker(timeout_s=60)
        client.ping()
    except Exception as exc:  # noqa: BLE001 - DockerException, ConnectionError, …
        from seat_console.node.docker import docker_error_sentence

        return ac.fail(prog, docker_error_sentence(exc, loaded.profile.node.docker_host),
                       EXIT_UNKNOWN, args.json)
    try:
        check = check_images(loaded, client)
    finally:
        client.close()
    caps, used, doc = check.caps, check.used, check.doc
    ok, verdict = doc["ok"], doc["verdict"]
    _journal(loaded, doc)
    if args.json:
        print(jsonout.dumps(doc, indent=2))
    else:
        print(f"image-check: [candidate.requires] of {loaded.source}, checked inside each "
              "image, offline:")
        for c in caps:
            mark = "   ← the swap uses this image" if c is used else ""
            print(f"  {c.role} {c.image}"
                  + (f" (image ID {c.image_id[:19]}…)" if c.image_id else "")
                  + f": {c.verdict_words()}{mark}")
            if c.problem:
                print(f"    ? {c.problem}")
            for ch in c.checks:
                sign = {True: "✓", False: "✗"}.get(ch.ok, "?")  # type: ignore[arg-type]
                print(f"    {sign} {ch.evidence}")
        print(f"verdict: {verdict}")
    return {True: EXIT_OK, False: EXIT_LACKS}.get(ok, EXIT_UNKNOWN)  # type: ignore[arg-type]


def _journal(loaded: LoadedProfile, doc: dict[str, Any]) -> None:
    """One ``image-check`` row (``end``; outcome ``done`` / ``failed`` / ``unknown``); a journal
    that cannot be written is said on stderr, the answer still printed."""
    from seat_console.actions.journal import JournalError

    try:
        with ac.open_journal() as j:
            record_image_check(j, loaded, doc)
    except JournalError as exc:
        print(f"seat-console image-check: not journaled: {exc}", file=sys.stderr)


__all__ = ["EXIT_LACKS", "EXIT_OK", "EXIT_UNKNOWN", "EXIT_USAGE", "images", "python_bin",
           "register", "run"]
