"""``seat-console fleet [--prometheus URL] [--alertmanager URL] [--interval S] [--json]
[--readonly]``: one row per seat of the fleet, read from its Prometheus and Alertmanager.

Without ``--json`` the command line opens the fleet screen (:mod:`seat_console.tui.fleet`;
needs a terminal): commands and the TUI are sibling fronts, so :mod:`seat_console.cli` starts
it. With ``--json`` it makes one refresh (the same rows, trouble first) and prints them
as JSON.

Exit codes (``--json``): ``0`` every query and the Alertmanager read answered; ``3``
Prometheus did not answer (``ok: false``, no rows), or a query, a series or the Alertmanager
read failed (``problems`` says which; the rows are still printed); ``1`` a bad URL or missing
credentials; ``2`` bad arguments, or the screen without a terminal.
"""

from __future__ import annotations

import argparse
import sys

from seat_console.core import jsonout
from seat_console.core.profile import LoadedProfile

EXIT_OK = 0
EXIT_ERROR = 1
EXIT_USAGE = 2
EXIT_UNAVAILABLE = 3


EXITS = ("exit codes (--json): 0 every query and the Alertmanager read answered; 1 a bad URL "
         "or missing credentials; 2 bad arguments, or the screen without a terminal; 3 "
         "Prometheus or a query did not answer (rows still printed)")
"""The exit codes, as ``--help`` ends (``epilog``)."""


def register(sub: argparse._SubParsersAction) -> None:
    """Add the ``fleet`` subcommand."""
    p = sub.add_parser("fleet", help="one row per seat of the fleet, from its Prometheus and "
                                     "Alertmanager (the fleet screen; --json: one refresh)")
    p.epilog = EXITS
    p.add_argument("--prometheus", metavar="URL",
                   help="Prometheus-compatible query API (default: the profile's "
                        "fleet.prometheus_url)")
    p.add_argument("--alertmanager", metavar="URL",
                   help="Alertmanager for the silences (default: fleet.alertmanager_url, else "
                        "alertmanager.url; 'none': the exporters' silence series)")
    # dest shared with the global options, SUPPRESS: given before or after `fleet`, one value
    p.add_argument("--interval", type=float, metavar="S", default=argparse.SUPPRESS,
                   help="refresh interval in seconds, at least 1 (default: "
                        "fleet.refresh_interval_s, 5 s)")
    p.add_argument("--readonly", action="store_true", default=argparse.SUPPRESS,
                   help="open nodes' consoles (a) read-only")
    p.add_argument("--json", action="store_true", help="print one refresh's rows as JSON")
    p.set_defaults(func=run, screen="fleet")


def prepare(args: argparse.Namespace, loaded: LoadedProfile) -> tuple[object, float] | int:
    """``(fleet, interval_s)`` for these arguments, or the exit code after printing why not
    (``2`` an interval below 1 s or the screen without a terminal, ``1`` a bad URL or missing
    credentials). Shared by ``--json`` (:func:`run`) and the screen (started by
    :mod:`seat_console.cli`, the layer above both this command and the TUI)."""
    from seat_console.fleet.promapi import PromError
    from seat_console.fleet.setup import make_fleet
    from seat_console.sources.silences import AlertmanagerError

    interval = args.interval if getattr(args, "interval", None) is not None else \
        loaded.profile.fleet.refresh_interval_s
    if interval < 1.0:
        return _fail(args, f"--interval {interval:g}: the fleet refreshes at most once a "
                           "second (give 1 or more)", EXIT_USAGE)
    if not args.json:
        from seat_console.core.terminal import is_terminal

        if not (is_terminal(sys.stdout) and is_terminal(sys.stdin)):
            print("seat-console fleet: the fleet screen needs a terminal (stdin or stdout is a "
                  "pipe or a file); for one reading run `seat-console fleet --json`",
                  file=sys.stderr)
            return EXIT_USAGE
    try:
        return make_fleet(loaded, args.prometheus, args.alertmanager), interval
    except (PromError, AlertmanagerError) as exc:
        return _fail(args, str(exc), EXIT_ERROR)


def _fail(args: argparse.Namespace, message: str, code: int) -> int:
    """The error on stderr, and with ``--json`` as a JSON document on stdout too (the trial:
    ``fleet --json --prometheus notaurl`` printed plain text only)."""
    from seat_console.commands.action_common import fail

    return fail("seat-console fleet", message, code, bool(getattr(args, "json", False)))


def run(args: argparse.Namespace, loaded: LoadedProfile) -> int:
    """``--json``: one refresh printed; the exit code (module doc). Without ``--json`` the
    command line starts the screen instead (:func:`seat_console.cli.run_fleet_screen`)."""
    prepared = prepare(args, loaded)
    if isinstance(prepared, int):
        return prepared
    fleet, _ = prepared
    reading = fleet.refresh()  # type: ignore[attr-defined]
    sys.stdout.write(jsonout.dumps(reading.to_json(), indent=1) + "\n")
    if not reading.ok:
        print(f"seat-console fleet: {reading.error}", file=sys.stderr)
    return EXIT_OK if reading.ok and not reading.problems else EXIT_UNAVAILABLE
