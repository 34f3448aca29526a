"""``seat-console build-backport [--dry-run] [--push] [--json]``: build the profile's backport.

See :mod:`seat_console.actions.backport` for the steps. Progress (the runbook's events and the
build log) goes to stderr; stdout gets the result (text, or JSON with ``--json``).

Exit codes (:mod:`seat_console.commands.action_common`, plus ``3``): ``0`` built, or already
built from the same inputs (a no-op, said so), or the dry-run plan has no error; ``1`` failed
and undone (the built image removed); ``4`` failed and something is left (the output says
what); ``5`` refused before anything changed (bad base, wrong file, no ``[backport]``);
``3`` the docker engine cannot be reached.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from seat_console.commands import action_common as ac
from seat_console.core import jsonout
from seat_console.core.profile import LoadedProfile

BACKPORT_EXITS = ("exit codes: 0 built (or already built from the same inputs); 1 failed "
                  "and undone; 2 usage; 3 the docker engine cannot be reached; 4 failed "
                  "and something is left (the output says what); 5 refused, nothing changed")
"""``build-backport``'s exit codes, as its ``--help`` ends."""

EXIT_OK = 0
EXIT_ERROR = 1
EXIT_UNAVAILABLE = 3
EXIT_PARTIAL = 4
EXIT_REFUSED = 5


def register(sub: argparse._SubParsersAction) -> None:
    """Add the ``build-backport`` subcommand."""
    p = sub.add_parser("build-backport", epilog=BACKPORT_EXITS,
                       help="build the profile's [backport]: patched files over a base image "
                            "pinned by digest (classic builder, provenance labels, journaled)")
    p.add_argument("--push", action="store_true",
                   help="push the tag to its registry afterwards and record the repo digest")
    ac.add_action_flags(p, yes=None, json_help="print the plan / result as JSON",
                        dry_run="check the base and every file, print the plan; build nothing")
    p.set_defaults(func=ac.ends_with_next(run))


def _docker(loaded: LoadedProfile) -> Any:
    from seat_console.node.context import NodeContext

    client = NodeContext.from_profile(loaded).docker(timeout_s=60)
    client.ping()
    return client


def run(args: argparse.Namespace, loaded: LoadedProfile) -> int:
    """Plan or build; exit codes in the module docstring."""
    from seat_console.actions.backport import BackportError, BuildOptions, build_runbook
    from seat_console.actions.journal import Journal, JournalError
    from seat_console.actions.runbook import printing_observer

    def err(line: str) -> None:
        print(line, file=sys.stderr, flush=True)

    try:
        client = _docker(loaded)
    except Exception as exc:  # noqa: BLE001 - DockerException, ConnectionError, …
        from seat_console.node.docker import docker_error_sentence

        err(f"seat-console build-backport: "
            f"{docker_error_sentence(exc, loaded.profile.node.docker_host)}")
        return EXIT_UNAVAILABLE
    try:
        opts = BuildOptions(push=args.push, on_log=lambda line: err(f"  | {line}"))
        if args.dry_run:
            rb = build_runbook(loaded, client, None, options=opts)
            plan = rb.plan()
            if args.json:
                print(jsonout.dumps({**plan.to_json(), "dry_run": True,
                                     "tag": rb.ctx.facts.get("tag"),
                                     "content_hash": rb.ctx.facts.get("content_hash")}, indent=2))
            else:
                print(f"build-backport plan (dry run, nothing built) for {rb.ctx.facts['tag']}:")
                print("\n".join(plan.text_lines()))
            return EXIT_OK if plan.ok else EXIT_REFUSED
        try:
            journal = Journal()
        except JournalError as exc:
            err(f"seat-console build-backport: {exc}")
            return EXIT_ERROR
        with journal:
            rb = build_runbook(loaded, client, journal, options=opts,
                               observer=None if args.json else printing_observer(err))
            res = rb.run()
    except BackportError as exc:
        err(f"seat-console build-backport: {exc}")
        return EXIT_REFUSED
    finally:
        client.close()
    f = res.facts
    if args.json:
        print(jsonout.dumps({**res.to_json(), "image_id": f.get("image_id"), "tag": f.get("tag"),
                             "no_op": bool(f.get("no_op")),
                             "pushed_repo_digest": f.get("pushed_repo_digest")}, indent=2))
    elif res.ok:
        if f.get("no_op"):
            print(f"no-op: {f['tag']} is already built from the same inputs "
                  f"(image ID {f['image_id']})")
        else:
            print(f"built {f['tag']} (image ID {f['image_id']})")
        if f.get("pushed_repo_digest"):
            print(f"pushed: {f['pushed_repo_digest']}")
    else:
        print(res.describe())
    return {"done": EXIT_OK, "undone": EXIT_ERROR, "partial": EXIT_PARTIAL,
            "refused": EXIT_REFUSED}[res.outcome]
