"""``seat-console serve``: the console's screen, read-only, in a browser on loopback.

Each browser tab gets its own console process, started by the server as
``python -m seat_console --readonly --profile FILE`` (``--fleet``: the fleet screen,
``… fleet``); no key, palette command or URL in the browser can reach an action. The server
listens on loopback only (share it with ``ssh -L 8470:127.0.0.1:8470 <node>``), serves at most
``--max-viewers`` tabs, and every file the page loads comes from the node itself.
``--json`` / ``--dry-run`` print the plan and exit. See docs/serve.md.
"""

from __future__ import annotations

import argparse
import sys

from seat_console.core import jsonout
from seat_console.serve.plan import (
    DEFAULT_HOST,
    DEFAULT_MAX_VIEWERS,
    DEFAULT_PORT,
    READONLY_FLAG,
    ServePlan,
    ServeUsageError,
    make_plan,
    ssh_hint,
    url_for,
)

EXIT_OK = 0
EXIT_ERROR = 1
EXIT_USAGE = 2

NO_FLEET = ("seat-console serve --fleet: this seat-console has no `fleet` command (the fleet "
            "screen is not part of this install), so there is no fleet screen to serve. Serve "
            "the node's screen without --fleet, or install a seat-console that has "
            "`seat-console fleet`.")


def register(sub: argparse._SubParsersAction) -> None:
    """Add the ``serve`` subcommand (nothing of the web stack is imported here)."""
    p = sub.add_parser(
        "serve", help="show the console, read-only, in a browser on loopback (one console "
                      "process per tab; share it with an SSH tunnel)",
        description=__doc__,
        epilog="exit codes: 0 stopped (or the plan printed); 1 cannot listen (port in use…); "
               "2 usage (a non-loopback host, bad limits, --fleet without a fleet command)")
    p.add_argument("--host", default=DEFAULT_HOST,
                   help=f"loopback address to listen on (default {DEFAULT_HOST}; anything "
                        f"else is refused: share with `{ssh_hint(DEFAULT_PORT)}`)")
    p.add_argument("--port", type=int, default=DEFAULT_PORT,
                   help=f"TCP port (default {DEFAULT_PORT}; 0: any free port, printed)")
    p.add_argument("--fleet", action="store_true",
                   help="serve the fleet screen (`seat-console fleet --readonly`) instead of "
                        "this node's")
    p.add_argument("--max-viewers", type=int, default=DEFAULT_MAX_VIEWERS, metavar="N",
                   help=f"browser tabs served at once, each one console process (default "
                        f"{DEFAULT_MAX_VIEWERS}); the next gets a page saying the view is full")
    p.add_argument("--profile", metavar="FILE", default=argparse.SUPPRESS,
                   help="seat profile TOML passed to the served console (as the global "
                        "--profile)")
    p.add_argument("--json", action="store_true",
                   help="print the resolved plan (URL, the served command, limits) as JSON "
                        "and exit")
    p.add_argument("--dry-run", action="store_true",
                   help="print the resolved plan and exit without listening")
    p.set_defaults(func=run, serve_commands=sub)


def fleet_parser(args: argparse.Namespace) -> argparse.ArgumentParser | None:
    """The ``fleet`` subcommand's parser if this install has one, else ``None`` (read from
    the parser ``serve`` was registered on)."""
    sub = getattr(args, "serve_commands", None)
    choices = getattr(sub, "choices", None) or {}
    return choices.get("fleet")


def _fail(args: argparse.Namespace, message: str, code: int) -> int:
    if getattr(args, "json", False):
        print(jsonout.dumps({"ok": False, "error": message, "exit": code}))
    print(message, file=sys.stderr)
    return code


def build_plan(args: argparse.Namespace, loaded: object) -> ServePlan:
    """The plan from the parsed options and the validated profile. ``ServeUsageError``: a
    non-loopback host, a port or viewer count out of range, ``--fleet`` without a fleet
    command."""
    fleet_has_own_readonly = False
    if args.fleet:
        fp = fleet_parser(args)
        if fp is None:
            raise ServeUsageError(NO_FLEET)
        fleet_has_own_readonly = READONLY_FLAG in fp._option_string_actions
    origin = getattr(loaded, "origin", "default")
    profile = None if origin == "default" else getattr(loaded, "source", None)
    return make_plan(args.host, args.port, args.max_viewers, python=sys.executable,
                     profile=profile, fleet=args.fleet,
                     fleet_has_own_readonly=fleet_has_own_readonly,
                     interval_s=getattr(args, "interval", None))


def run(args: argparse.Namespace, loaded: object) -> int:
    """Resolve the plan; print it (``--json`` / ``--dry-run``) or serve until SIGINT/SIGTERM.
    Exit 0 (stopped or plan printed), 1 (cannot listen: port in use…), 2 (usage: non-loopback
    host, bad limits, ``--fleet`` without a fleet command)."""
    try:
        plan = build_plan(args, loaded)
    except ServeUsageError as exc:
        return _fail(args, str(exc), EXIT_USAGE)
    if args.json:
        print(jsonout.dumps({"ok": True, "dry_run": bool(args.dry_run), **plan.as_dict()},
                            indent=2))
        return EXIT_OK
    if args.dry_run:
        print("\n".join(plan.text_lines()))
        return EXIT_OK
    try:
        from seat_console.serve.server import serve
    except ImportError as exc:
        return _fail(args, f"seat-console serve: the web server cannot be loaded ({exc}); "
                           f"reinstall seat-console (it depends on textual-serve)", EXIT_ERROR)

    def ready(port: int) -> None:
        print(f"seat-console serve: {url_for(plan.host, port)} (read-only, at most "
              f"{plan.max_viewers} viewers; share: {ssh_hint(port)}; Ctrl-C stops)",
              flush=True)

    try:
        serve(plan, ready)
    except OSError as exc:
        return _fail(args, f"seat-console serve: cannot listen on "
                           f"{url_for(plan.host, plan.port)}: {exc.strerror or exc} (another "
                           f"server on that port? choose one with --port)", EXIT_ERROR)
    return EXIT_OK
