"""What ``seat-console serve`` will do, decided before anything listens (pure; no I/O).

* :func:`loopback_refusal` — the web view has no authentication of its own, so it listens on
  loopback only; anything else is refused with the way to share it (an SSH tunnel);
* :func:`served_argv` — the argument list of the app process started per browser tab: the
  absolute interpreter, ``-m seat_console``, always ``--readonly``, the profile's path passed
  through; no shell, so no value is ever parsed by one;
* :class:`ServePlan` — all of it, as ``--json`` / ``--dry-run`` print it.

Nothing here imports textual-serve, aiohttp, Textual or Rich.
"""

from __future__ import annotations

import ipaddress
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8470
DEFAULT_MAX_VIEWERS = 4
"""Browser tabs served at once by default; each is one app process."""

MAX_VIEWERS_CAP = 32
"""The most ``--max-viewers`` accepts: every viewer is a whole console process polling the node
(docs/benchmarks.md gives one viewer's idle CPU), so the bound is kept small on purpose."""

READONLY_FLAG = "--readonly"


class ServeUsageError(ValueError):
    """A ``serve`` option that cannot be used; the message names the option and the fix
    (the command exits 2)."""


def ssh_hint(port: int) -> str:
    """The command a viewer runs on their own machine to reach the web view through SSH:
    ``ssh -L PORT:127.0.0.1:PORT <node>`` (OpenSSH's local forwarding, ``man ssh``: -L)."""
    return f"ssh -L {port}:127.0.0.1:{port} <node>"


def loopback_host(host: str) -> str | None:
    """``host`` as the address to listen on if it is a loopback address, else ``None``.

    Loopback: an IPv4 address in 127.0.0.0/8, the IPv6 ``::1`` (optionally in brackets), or the
    name ``localhost`` (taken as ``127.0.0.1`` without asking a resolver: a name could resolve
    anywhere). ``0.0.0.0``, ``::``, other addresses and other names are not loopback."""
    h = host.strip()
    if h.lower() == "localhost":
        return "127.0.0.1"
    if h.startswith("[") and h.endswith("]"):
        h = h[1:-1]
    try:
        addr = ipaddress.ip_address(h)
    except ValueError:
        return None
    return str(addr) if addr.is_loopback else None


def loopback_refusal(host: str, port: int = DEFAULT_PORT) -> str | None:
    """The refusal for a ``--host`` that is not loopback (:func:`loopback_host`), else
    ``None``. It says why (no authentication is built in) and how to share the view instead
    (an SSH tunnel, :func:`ssh_hint`)."""
    if loopback_host(host) is not None:
        return None
    shown = host if host.strip() else "(empty)"
    return (f"seat-console serve: --host {shown} is not a loopback address. The web view has no "
            f"authentication of its own, so it listens on loopback only (127.0.0.1, ::1). To "
            f"share it, each viewer opens an SSH tunnel to this node from their machine: "
            f"`{ssh_hint(port)}`, then browses http://127.0.0.1:{port}/ (SSH does the "
            f"authentication).")


def check_limits(port: int, max_viewers: int) -> None:
    """Raise :class:`ServeUsageError` naming the option if ``port`` is not 0..65535 (0: any
    free port) or ``max_viewers`` is not 1..:data:`MAX_VIEWERS_CAP`."""
    if not 0 <= port <= 65535:
        raise ServeUsageError(f"seat-console serve: --port {port}: give a TCP port 1 to 65535 "
                              f"(0: any free port; default {DEFAULT_PORT})")
    if not 1 <= max_viewers <= MAX_VIEWERS_CAP:
        raise ServeUsageError(f"seat-console serve: --max-viewers {max_viewers}: give 1 to "
                              f"{MAX_VIEWERS_CAP} (each viewer is one console process; default "
                              f"{DEFAULT_MAX_VIEWERS})")


def served_argv(python: str, *, profile: str | None, fleet: bool = False,
                fleet_has_own_readonly: bool = False,
                interval_s: float | None = None) -> list[str]:
    """The app process's argument list (one per browser tab).

    ``python``: the interpreter (made absolute; :class:`ServeUsageError` if empty);
    ``profile``: a profile file path passed through as ``--profile`` (made absolute), or
    ``None`` for the embedded default; ``fleet``: the fleet screen (``seat-console fleet``)
    instead of the node's; ``fleet_has_own_readonly``: the ``fleet`` subcommand defines
    ``--readonly`` itself (then it is given after ``fleet`` as well, since a subcommand's own
    default would override the global flag); ``interval_s``: ``--interval`` passed through.

    ``--readonly`` is always in it, before any subcommand: the served console never offers or
    runs an action that changes the node (``seat_console.cli``)."""
    if not python:
        raise ServeUsageError("seat-console serve: the Python interpreter's path is unknown "
                              "(sys.executable is empty); run it as `python -m seat_console "
                              "serve`")
    argv = [os.path.abspath(python), "-m", "seat_console", READONLY_FLAG]
    if profile is not None:
        argv += ["--profile", os.path.abspath(profile)]
    if interval_s is not None:
        argv += ["--interval", f"{interval_s:g}"]
    if fleet:
        argv.append("fleet")
        if fleet_has_own_readonly:
            argv.append(READONLY_FLAG)
    return argv


def url_for(host: str, port: int) -> str:
    """``http://HOST:PORT/`` (IPv6 in brackets)."""
    shown = f"[{host}]" if ":" in host else host
    return f"http://{shown}:{port}/"


@dataclass(frozen=True)
class ServePlan:
    """The resolved plan of one ``seat-console serve``.

    ``host``: the loopback address listened on; ``port``: TCP port (0: any free one, known
    once bound); ``argv``: the app process started per browser tab; ``max_viewers``: tabs
    served at once (the next is refused with a page); ``fleet``: the fleet screen;
    ``profile``: the profile file passed through (``None``: the embedded default)."""

    host: str
    port: int
    argv: tuple[str, ...]
    max_viewers: int
    fleet: bool
    profile: str | None
    readonly: bool = field(default=True, init=False)

    @property
    def url(self) -> str:
        """The page's address (``http://127.0.0.1:8470/``)."""
        return url_for(self.host, self.port)

    def as_dict(self) -> dict[str, Any]:
        """The plan as ``--json`` prints it."""
        return {
            "url": self.url, "host": self.host, "port": self.port,
            "screen": "fleet" if self.fleet else "node",
            "argv": list(self.argv), "readonly": self.readonly, "shell": False,
            "profile": self.profile,
            "limits": {"max_viewers": self.max_viewers,
                       "process_per_viewer": True,
                       "listen": "loopback only"},
            "share": self.share(),
            "assets": "served from this node only (no request leaves it)",
        }

    def text_lines(self) -> list[str]:
        """The plan as ``--dry-run`` prints it, one line each."""
        return [
            f"seat-console serve would listen on {self.url} (loopback only)",
            f"  screen: {'fleet' if self.fleet else 'node'}, read-only",
            f"  per browser tab, one process: {' '.join(self.argv)}",
            f"  at most {self.max_viewers} viewer(s) at once; the next is refused with a page",
            f"  share: {self.share()}",
        ]

    def share(self) -> str:
        """The SSH tunnel to share the view: on this port; with ``--port 0`` (the kernel
        picks one at start) the tunnel's port is the one the start prints — the plan named
        8470, where nothing would listen (the trial)."""
        if self.port == 0:
            return ("ssh -L PORT:127.0.0.1:PORT <node>, PORT being the port it prints when it "
                    "starts (--port 0: the kernel picks one)")
        return ssh_hint(self.port)


def make_plan(host: str, port: int, max_viewers: int, *, python: str,
              profile: str | None, fleet: bool = False, fleet_has_own_readonly: bool = False,
              interval_s: float | None = None) -> ServePlan:
    """The plan, or :class:`ServeUsageError` (a non-loopback host: :func:`loopback_refusal`;
    a port or viewer count out of range: :func:`check_limits`)."""
    refusal = loopback_refusal(host, port or DEFAULT_PORT)
    if refusal is not None:
        raise ServeUsageError(refusal)
    check_limits(port, max_viewers)
    listen = loopback_host(host)
    assert listen is not None
    argv = served_argv(python, profile=profile, fleet=fleet,
                       fleet_has_own_readonly=fleet_has_own_readonly, interval_s=interval_s)
    return ServePlan(host=listen, port=port, argv=tuple(argv), max_viewers=max_viewers,
                     fleet=fleet, profile=None if profile is None else os.path.abspath(profile))


def is_readonly_argv(argv: Sequence[str]) -> bool:
    """Whether ``argv`` is a served command of :func:`served_argv`'s shape: an absolute
    interpreter, ``-m seat_console``, then ``--readonly`` first among the global options (the
    server refuses to start any other)."""
    return (len(argv) >= 4 and os.path.isabs(argv[0])
            and list(argv[1:4]) == ["-m", "seat_console", READONLY_FLAG])
