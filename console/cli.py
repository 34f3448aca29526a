"""``seat-console`` command line: the TUI by default, and headless subcommands.

Exit codes (documented in README.md):

* ``0`` — ok;
* ``1`` — error (a source or action failed, invalid profile);
* ``2`` — usage error (bad arguments; argparse's convention);
* ``3`` — unavailable: no GPU / NVML unavailable (``gpus``), or a required source is down.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

from seat_console.profile import (
    REFRESH_INTERVAL_MAX_S,
    REFRESH_INTERVAL_MIN_S,
    ProfileError,
    load_profile,
)

EXIT_OK = 0
EXIT_ERROR = 1
EXIT_USAGE = 2
EXIT_UNAVAILABLE = 3

# Modules under seat_console.commands that provide ``register(subparsers)``.
COMMAND_MODULES = [
    "seat_console.commands.profile_cmd",
    "seat_console.commands.gpus_cmd",
    "seat_console.commands.fit_cmd",
    "seat_console.commands.status_cmd",
    "seat_console.commands.report_cmd",
    "seat_console.commands.compare_cmd",
    "seat_console.commands.backport_cmd",
    "seat_console.commands.swap_cmd",
    "seat_console.commands.hold_cmd",
    "seat_console.commands.release_cmd",
    "seat_console.commands.recover_cmd",
    "seat_console.commands.journal_cmd",
    "seat_console.commands.probe_cmd",
]


def build_parser() -> argparse.ArgumentParser:
    """The argument parser with every registered subcommand."""
    parser = argparse.ArgumentParser(
        prog="seat-console",
        description="Watch an LLM serving seat and run the seat-swap runbook safely.",
    )
    parser.add_argument("--profile", metavar="FILE",
                        help="seat profile TOML (else $SEAT_CONSOLE_PROFILE, the XDG config "
                             "path, then the embedded default)")
    parser.add_argument("--readonly", action="store_true",
                        help="hide every action that changes the node")
    parser.add_argument("--interval", type=float, metavar="S",
                        help="refresh interval in seconds, 0.1 to 3600 (default: the profile's, 1 s)")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMAND_MODULES:
        importlib.import_module(name).register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``seat-console`` and ``python -m seat_console``; returns the exit code."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.interval is not None and not (
            REFRESH_INTERVAL_MIN_S <= args.interval <= REFRESH_INTERVAL_MAX_S):  # also NaN
        parser.error(f"--interval {args.interval:g}: give seconds between "
                     f"{REFRESH_INTERVAL_MIN_S:g} and {REFRESH_INTERVAL_MAX_S:g}")
    func = getattr(args, "func", None)
    if func is not None and getattr(args, "needs_profile", True) is False:
        return func(args, None)
    try:
        loaded = load_profile(args.profile)
    except ProfileError as exc:
        print(f"seat-console: {exc}", file=sys.stderr)
        return EXIT_ERROR
    if func is None:
        from seat_console.app import run_app

        return run_app(loaded, readonly=args.readonly, interval=args.interval)
    return func(args, loaded)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
