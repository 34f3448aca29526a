"""``seat-console profile --check FILE | --print-default | --show``."""

from __future__ import annotations

import argparse
import sys

from seat_console.core import jsonout
from seat_console.core.profile import ProfileError, default_profile_text, load_profile


EXITS = ("exit codes: 0 valid (or printed); 1 the profile does not validate (the message names"
         " the key and the fix)")
"""The exit codes, as ``--help`` ends (``epilog``)."""


def register(sub: argparse._SubParsersAction) -> None:
    """Add the ``profile`` subcommand."""
    p = sub.add_parser("profile", epilog=EXITS, help="validate, print or show the seat profile")
    g = p.add_mutually_exclusive_group(required=True)
    g.add_argument("--check", metavar="FILE", help="validate FILE and report problems")
    g.add_argument("--print-default", action="store_true",
                   help="write the embedded default profile to stdout, to edit")
    g.add_argument("--show", action="store_true",
                   help="print the profile in effect (after lookup) as JSON")
    p.set_defaults(func=run, needs_profile=False)


def run(args: argparse.Namespace, _loaded: object) -> int:
    """Run ``profile``; returns 0 when valid, 1 when invalid."""
    if args.print_default:
        sys.stdout.write(default_profile_text())
        return 0
    try:
        loaded = (load_profile(args.check, flag="--check") if args.check
                  else load_profile(args.profile))
    except ProfileError as exc:
        print(f"seat-console: {exc}", file=sys.stderr)
        return 1
    if args.check:
        print(f"{loaded.source}: ok (sha256 {loaded.sha256})")
        return 0
    print(jsonout.dumps({"source": loaded.source, "origin": loaded.origin, "sha256": loaded.sha256,
                         "profile": loaded.profile.model_dump(mode="json")}, indent=2))
    return 0
