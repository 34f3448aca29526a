"""``seat-console exporter``: the seat as Prometheus metrics, read-only.

* ``exporter [--listen 127.0.0.1:9469] [--interval S] [--profile FILE]`` — serve ``/metrics``
  (``prometheus_client``; the families of ``docs/prometheus/metrics.md``) until SIGTERM/SIGINT;
* ``exporter --once`` (or ``--dry-run``) — read every source once and print one scrape in the
  Prometheus text format; ``--json`` — the same families as JSON;
* ``exporter --print-unit [--unit-user NAME]`` — print the systemd unit that runs it as an
  unprivileged user.

Read-only: it never writes to the node, Alertmanager, the journal or the probe runs, and it
refuses the action options (``--yes``, ``--force``, ``--ttl``, ``--extend``, ``--reason``).

Exit codes: ``0`` served until stopped / printed; ``1`` the address cannot be bound or the
unit cannot be written; ``2`` usage (a bad ``--listen``, an action option); ``3`` (``--once``
/ ``--json``) at least one source is down (``seat_source_up`` 0; the scrape is still printed).
"""

from __future__ import annotations

import argparse
import ipaddress
import os
import signal
import sys
import threading
from pathlib import Path
from typing import TYPE_CHECKING

from seat_console.core import jsonout
from seat_console.core.profile import LoadedProfile

if TYPE_CHECKING:
    from prometheus_client.core import Metric

    from seat_console.exporter.collector import Exporter

PROG = "seat-console exporter"
DEFAULT_LISTEN = "127.0.0.1:9469"
EXIT_OK, EXIT_ERROR, EXIT_USAGE, EXIT_UNAVAILABLE = 0, 1, 2, 3
_ACTIONS = ("--yes", "--force", "--ttl", "--extend", "--reason")


def parse_listen(text: str) -> tuple[str, int]:
    """``HOST:PORT`` (IPv6 in brackets: ``[::1]:9469``) → ``(host, port)``.

    The host is an IP address or a host name; the port 1–65535. Raises :class:`ValueError`
    naming the value and the expected form."""
    shown = text if len(text) <= 80 else text[:80] + "…"
    bad = ValueError(f"--listen {shown!r}: expected HOST:PORT, e.g. 127.0.0.1:9469 or "
                     "[::1]:9469 (port 1-65535)")
    if not text or not text.isascii() or not text.isprintable() or " " in text:
        raise bad
    if text.startswith("["):
        host, sep, port = text[1:].partition("]:")
        if not sep:
            raise bad
        try:
            ipaddress.IPv6Address(host)
        except ValueError:
            raise bad from None
    else:
        host, sep, port = text.rpartition(":")
        if not sep or not host or ":" in host:
            raise bad
        if not all(part and len(part) <= 63 and (part.replace("-", "").isalnum())
                   for part in host.split(".")):
            raise bad
    if not (port.isdigit() and len(port) <= 5 and 1 <= int(port) <= 65535):
        raise bad
    return host, int(port)


def register(sub: argparse._SubParsersAction) -> None:
    """Add the ``exporter`` subcommand."""
    p = sub.add_parser("exporter", help="serve the seat's hold, lease, silence, container, "
                                        "runbook, fit and source health as Prometheus metrics "
                                        "(read-only)",
                       description="Serve /metrics for Prometheus: the seat as the node and "
                                   "Alertmanager see it. Read-only. Exit 0 ok, 1 cannot bind, "
                                   "2 usage, 3 (--once/--json) a source is down.")
    p.add_argument("--listen", default=DEFAULT_LISTEN, metavar="HOST:PORT",
                   help=f"address to serve on (default {DEFAULT_LISTEN})")
    p.add_argument("--profile", default=argparse.SUPPRESS, metavar="FILE",
                   help="the seat profile (as the global --profile)")
    p.add_argument("--interval", type=float, default=None, metavar="S",
                   help="seconds between two reads of every source (default: per source, "
                        "5-30 s; docs/prometheus/metrics.md)")
    p.add_argument("--json", action="store_true", help="print one scrape's families as JSON")
    p.add_argument("--once", "--dry-run", dest="once", action="store_true",
                   help="print one scrape in the Prometheus text format and exit")
    p.add_argument("--wait", type=float, default=20.0, metavar="S",
                   help="with --once/--json: seconds to wait for the sources (default 20)")
    p.add_argument("--print-unit", action="store_true",
                   help="print a systemd unit that runs the exporter as an unprivileged user")
    p.add_argument("--unit-user", metavar="NAME",
                   help="with --print-unit: User=NAME instead of DynamicUser=yes")
    for opt in _ACTIONS:   # refused with a clear message (the exporter never acts)
        p.add_argument(opt, dest=f"action_{opt[2:]}", nargs="?", const=True, default=None,
                       help=argparse.SUPPRESS)
    p.set_defaults(func=run)


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("seat-console")
    except PackageNotFoundError:
        return "unknown"


def _fail(msg: str, code: int, json_mode: bool) -> int:
    if json_mode:
        print(jsonout.dumps({"ok": False, "error": msg, "exit": code}))
    print(f"{PROG}: {msg}", file=sys.stderr)
    return code


def run(args: argparse.Namespace, loaded: LoadedProfile) -> int:
    """Serve, print one scrape, or print the unit (see the module docstring)."""
    given = [o for o in _ACTIONS if getattr(args, f"action_{o[2:]}", None) is not None]
    if given:
        return _fail(f"{', '.join(given)}: the exporter is read-only and takes no action; "
                     "run the action as its own command (e.g. `seat-console hold`)",
                     EXIT_USAGE, args.json)
    try:
        host, port = parse_listen(args.listen)
    except ValueError as exc:
        return _fail(str(exc), EXIT_USAGE, args.json)
    for name, v in (("--interval", args.interval), ("--wait", args.wait)):
        if v is not None and not (0 < v <= 3600):
            return _fail(f"{name} {v!r}: give seconds between 0 and 3600", EXIT_USAGE,
                         args.json)
    if args.print_unit:
        return print_unit(args, loaded, host, port)
    from seat_console.exporter.collector import Exporter

    exp = Exporter(loaded, _version(), interval_s=args.interval)
    if args.once or args.json:
        return once(exp, args.json, args.wait)
    return serve(exp, host, port)


def once(exp: Exporter, json_mode: bool, wait_s: float) -> int:
    """Read every source once (up to ``wait_s`` s), print one scrape; exit 3 if a source is
    down."""
    from seat_console.exporter.model import families_json

    exp.read_all_once(wait_s)
    fams = list(exp.collector.collect())
    down = [s.labels["source"] for f in fams if f.name == "seat_source_up"
            for s in f.samples if s.value == 0]
    if json_mode:
        print(jsonout.dumps({"families": families_json(fams), "sources_down": down}, indent=2))
    else:
        sys.stdout.write(_text(fams))
    exp.stop()
    return EXIT_UNAVAILABLE if down else EXIT_OK


def _text(fams: list[Metric]) -> str:
    """The families (already collected) in the Prometheus text format 0.0.4."""
    from prometheus_client import CollectorRegistry, generate_latest
    from prometheus_client.registry import Collector

    class _Fixed(Collector):
        def collect(self):  # type: ignore[no-untyped-def]
            return iter(fams)

    reg = CollectorRegistry(auto_describe=False)
    reg.register(_Fixed())
    return generate_latest(reg).decode("utf-8")


def serve(exp: Exporter, host: str, port: int) -> int:
    """Serve ``/metrics`` on ``host:port`` until SIGTERM or SIGINT; exit 0 (1: cannot bind)."""
    from prometheus_client import start_http_server

    try:
        server, thread = start_http_server(port, addr=host, registry=exp.registry)
    except OSError as exc:
        return _fail(f"cannot listen on {host}:{port}: {exc.strerror or exc}", EXIT_ERROR,
                     False)
    exp.start()
    done = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: done.set())
    shown = f"[{host}]" if ":" in host else host
    print(f"{PROG}: serving http://{shown}:{port}/metrics (read-only); SIGTERM stops it",
          file=sys.stderr, flush=True)
    done.wait()
    server.shutdown()
    server.server_close()
    exp.stop()
    return EXIT_OK


def print_unit(args: argparse.Namespace, loaded: LoadedProfile, host: str, port: int) -> int:
    """Print the systemd unit (:func:`seat_console.exporter.unit.render_unit`)."""
    from seat_console.core.paths import state_dir
    from seat_console.exporter.unit import render_unit
    from seat_console.core.paths import data_dir

    # the interpreter running now (a venv's python is kept as is: resolving its link would
    # leave the venv), never a PATH lookup that could find a shell shim
    program = [os.path.abspath(sys.executable), "-m", "seat_console"]
    src = Path(loaded.source)
    if not src.is_file():
        return _fail(f"--print-unit needs a profile file (the unit passes it with --profile); "
                     f"{loaded.source!r} is not one", EXIT_USAGE, args.json)
    shown = f"[{host}]" if ":" in host else host
    argv = [*program, "exporter", "--profile", str(src.resolve()), "--listen", f"{shown}:{port}"]
    if args.interval is not None:
        argv += ["--interval", f"{args.interval:g}"]
    try:
        text = render_unit(argv, user=args.unit_user, state_dir=state_dir().resolve(),
                           data_dir=data_dir().resolve())
    except ValueError as exc:
        return _fail(str(exc), EXIT_ERROR, args.json)
    if args.json:
        print(jsonout.dumps({"ok": True, "unit": text}))
    else:
        sys.stdout.write(text)
    return EXIT_OK


__all__ = ["parse_listen", "register", "run"]
