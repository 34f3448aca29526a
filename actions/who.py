"""Who did it: the operator a journal row records (issue 30, item 8).

:func:`operator_now` reads, once per console process:

* ``login`` — the effective user's login name (:func:`getpass.getuser`: ``$LOGNAME``, ``$USER``,
  … then the password database);
* ``sudo_user`` — ``$SUDO_USER`` when the console runs under ``sudo`` (the person behind
  ``root``), else ``None``;
* ``ssh_client`` — the SSH client's address and port from ``$SSH_CONNECTION``
  (``"<client ip> <client port> <server ip> <server port>"``, set by sshd; ssh(1) ENVIRONMENT),
  as ``"203.0.113.5 53122"``; ``None`` when not over SSH or the variable is malformed
  (:func:`ssh_client`);
* ``tty`` — the controlling terminal of stdin (:func:`os.ttyname`), e.g. ``/dev/pts/3``;
  ``None`` when stdin is not a terminal (a pipe, cron).

A confirmation adds ``confirmed``: ``{"how": "typed" | "y" | "--yes" | "tui", "typed": TEXT}``
(what the engineer typed: the seat's name, ``y``; :func:`confirmation`). The journal stores
the dict in its ``operator`` column (:mod:`seat_console.actions.journal`). Environment values
are outside input: each is cut to :data:`MAX_FIELD` characters and must be printable, else it
is dropped (``None``), never guessed.
"""

from __future__ import annotations

import getpass
import ipaddress
import os
import sys
from collections.abc import Mapping
from typing import Any

MAX_FIELD = 256
"""Longest value (characters) kept from the environment or typed text."""


def _clean(value: str | None) -> str | None:
    """``value`` stripped, or ``None`` when empty, too long or not printable."""
    if value is None:
        return None
    v = value.strip()
    if not v or len(v) > MAX_FIELD or not v.isprintable():
        return None
    return v


def ssh_client(value: str | None) -> str | None:
    """The client ``"<ip> <port>"`` of an ``SSH_CONNECTION`` value (four space-separated
    fields: client IP, client port, server IP, server port), or ``None`` when ``value`` is
    unset or not that shape (an IP that does not parse, a port outside 1–65535). Pure; never
    raises."""
    v = _clean(value)
    if v is None:
        return None
    parts = v.split()
    if len(parts) != 4:
        return None
    ip, port = parts[0], parts[1]
    try:
        ipaddress.ip_address(ip.split("%", 1)[0])   # an IPv6 zone (fe80::1%eth0) is kept
    except ValueError:
        return None
    if not port.isascii() or not port.isdigit() or not 1 <= int(port) <= 65535:
        return None
    return f"{ip} {int(port)}"


def _tty() -> str | None:
    try:
        return _clean(os.ttyname(sys.stdin.fileno())) if sys.stdin.isatty() else None
    except (OSError, ValueError, AttributeError):   # no stdin, closed, or not a real file
        return None


def _login() -> str:
    try:
        return _clean(getpass.getuser()) or f"uid {os.getuid()}"
    except (KeyError, OSError):
        return f"uid {os.getuid()}"


def operator_now(env: Mapping[str, str] | None = None) -> dict[str, Any]:
    """``{"login", "sudo_user", "ssh_client", "tty"}`` of this process (module docstring);
    ``env``: the environment to read (default :data:`os.environ`). Never raises."""
    e = os.environ if env is None else env
    return {"login": _login(), "sudo_user": _clean(e.get("SUDO_USER")),
            "ssh_client": ssh_client(e.get("SSH_CONNECTION")), "tty": _tty()}


CONFIRM_HOW = ("typed", "y", "--yes", "tui")
"""How a run was confirmed: the seat's name typed, ``y`` at a ``[y/N]`` prompt, ``--yes`` on
the command line, the TUI's confirmation."""


def confirmation(how: str, typed: str | None = None) -> dict[str, Any]:
    """The ``confirmed`` part of an operator: ``how`` (:data:`CONFIRM_HOW`) and what was
    typed (cut to :data:`MAX_FIELD`, control characters dropped). Raises :class:`ValueError`
    for another ``how``."""
    if how not in CONFIRM_HOW:
        raise ValueError(f"confirmation {how!r}: one of {', '.join(CONFIRM_HOW)}")
    t = None
    if typed is not None:
        t = "".join(ch for ch in typed if ch.isprintable())[:MAX_FIELD]
    return {"how": how, "typed": t}


def describe(op: Mapping[str, Any] | None) -> str:
    """One line for ``seat-console journal``: ``alice (sudo from bob) ssh 203.0.113.5 53122
    /dev/pts/3; typed 'seat-node'`` — ``""`` for a row written before operators were recorded
    (``None``)."""
    if not op:
        return ""
    parts = [str(op.get("login") or "?")]
    if op.get("sudo_user"):
        parts.append(f"(sudo from {op['sudo_user']})")
    if op.get("ssh_client"):
        parts.append(f"ssh {op['ssh_client']}")
    if op.get("tty"):
        parts.append(str(op["tty"]))
    text = " ".join(parts)
    c = op.get("confirmed")
    if isinstance(c, Mapping):
        how = c.get("how")
        text += ("; confirmed with --yes" if how == "--yes" else
                 f"; typed {c.get('typed')!r}" if c.get("typed") is not None else
                 f"; confirmed ({how})")
    return text


__all__ = ["CONFIRM_HOW", "MAX_FIELD", "confirmation", "describe", "operator_now", "ssh_client"]
