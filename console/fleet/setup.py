"""Build the fleet reader from the profile's ``[fleet]`` section and the command-line flags,
and the argument list that opens one node's own console (``a`` on the fleet screen)."""

from __future__ import annotations

import shlex
import shutil
import sys

from pydantic import AnyHttpUrl, ValidationError

from seat_console.fleet.promapi import PromClient, PromError
from seat_console.fleet.rows import Fleet, InventoryEntry
from seat_console.core.profile import FleetSpec, LoadedProfile


def inventory_of(spec: FleetSpec) -> list[InventoryEntry]:
    """The profile's ``[[fleet.inventory]]`` as :class:`InventoryEntry` values."""
    return [InventoryEntry(instance=s.instance, node=s.node, profile=s.profile, ssh=s.ssh)
            for s in spec.inventory]


def make_fleet(loaded: LoadedProfile, prometheus_url: str | None = None,
               alertmanager_url: str | None = None) -> Fleet:
    """A :class:`Fleet` for ``loaded``'s ``[fleet]`` section; ``prometheus_url`` /
    ``alertmanager_url`` (flags) override the profile's. Alertmanager: the flag, else
    ``fleet.alertmanager_url``, else ``[alertmanager].url``, with ``[alertmanager]``'s auth;
    ``alertmanager_url = "none"`` reads no silences (the exporters' are shown). Raises
    :class:`PromError` (kind ``config``) naming the flag or key for a bad URL, or
    :class:`~seat_console.sources.silences.AlertmanagerError` for missing credentials."""
    from seat_console.sources.silences import AlertmanagerClient

    spec = loaded.profile.fleet
    prom = PromClient(str(prometheus_url or spec.prometheus_url), timeout_s=spec.query_timeout_s)
    am = None
    url = alertmanager_url or (str(spec.alertmanager_url) if spec.alertmanager_url else None)
    if url != "none":
        am_spec = loaded.profile.alertmanager
        if url is not None:
            try:
                am_spec = am_spec.model_copy(update={"url": AnyHttpUrl(url)})
            except ValidationError:
                raise PromError("config", f"--alertmanager {url!r} is not an http(s) URL "
                                          "(e.g. http://127.0.0.1:9093), or 'none'") from None
        am = AlertmanagerClient(am_spec, timeout_s=spec.query_timeout_s, read_attempts=2)
    return Fleet(prom, am, inventory_of(spec), scrape_interval_s=spec.scrape_interval_s,
                 window_s=spec.window_s)


def console_argv(entry: InventoryEntry, *, readonly: bool = False,
                 python: str | None = None) -> list[str] | None:
    """The argument list that opens ``entry``'s single-node console, or ``None`` when the
    inventory names no profile for it.

    Local (no ``ssh``): ``[python, "-m", "seat_console", "--profile", P]``. SSH:
    ``[/abs/ssh, "-t", "--", "[user@]host", "seat-console --profile 'P'"]`` — ssh hands the
    remote command to the remote user's shell as one string, so each part is quoted with
    :func:`shlex.quote` (the profile path cannot run anything there), and ``--`` ends ssh's
    options (the host was already checked not to start with ``-``). ``--readonly`` is passed
    on. Raises ``FileNotFoundError`` naming ``ssh`` when it is not on PATH."""
    if not entry.profile:
        return None
    remote = ["seat-console", "--profile", entry.profile, *(["--readonly"] if readonly else [])]
    if entry.ssh is None:
        return [python or sys.executable, "-m", "seat_console", *remote[1:]]
    ssh = shutil.which("ssh")
    if ssh is None:
        raise FileNotFoundError("ssh is not on PATH: install openssh-client to open a node's "
                                "console from the fleet screen")
    return [ssh, "-t", "--", entry.ssh, " ".join(shlex.quote(a) for a in remote)]


__all__ = ["console_argv", "inventory_of", "make_fleet"]
