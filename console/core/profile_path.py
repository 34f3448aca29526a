"""Where the seat profile comes from, without pydantic: the lookup, the embedded default, and
:class:`ProfileError`.

Split from :mod:`seat_console.core.profile` (which re-exports every name here) so that the first
frame (:mod:`seat_console.tui.first_frame`) can find the profile the TUI will load before the
~0.16 s of pydantic and model imports, and the command line can check ``--interval`` against
the same bounds the profile uses; the validation stays in :mod:`seat_console.core.profile`.

Lookup order (:func:`resolve_profile_path`): ``--profile FILE``, ``$SEAT_CONSOLE_PROFILE``,
``$XDG_CONFIG_HOME/seat-console/profile.toml`` (platformdirs), the embedded default.
"""

from __future__ import annotations

import os
import re
import shlex
from importlib import resources
from pathlib import Path

import platformdirs

ENV_VAR = "SEAT_CONSOLE_PROFILE"
"""Environment variable naming a profile file (second in the lookup order)."""

REFRESH_INTERVAL_MIN_S = 0.1
"""Shortest refresh interval (s) the profile, ``--interval`` and the palette accept: each source
is polled again as soon as its last poll ends plus the interval, so a tiny one would hammer
the node (``docker exec``, ``/metrics``) in a tight loop."""
REFRESH_INTERVAL_MAX_S = 3600.0
"""Longest refresh interval (s)."""


class ProfileError(Exception):
    """A profile could not be read or is invalid.

    The message names the file, the offending key (dotted path) and the fix; it never contains
    secret values (credentials are not part of a profile).
    """


def default_profile_text() -> str:
    """The embedded default profile, as TOML text (what ``profile --print-default`` prints)."""
    return resources.files("seat_console").joinpath("default_profile.toml").read_text("utf-8")


def xdg_profile_path() -> Path:
    """``$XDG_CONFIG_HOME/seat-console/profile.toml`` (platformdirs' user config dir on Linux)."""
    return Path(platformdirs.user_config_dir("seat-console")) / "profile.toml"


def resolve_profile_path(cli_path: str | os.PathLike[str] | None = None,
                         environ: dict[str, str] | None = None,
                         flag: str = "--profile") -> tuple[Path | None, str]:
    """Which profile file to load, and the lookup step that chose it.

    Returns ``(path, origin)``; ``path`` is ``None`` for the embedded default. A path given on
    the command line (``flag`` names the option the user typed, for the message) or in
    ``$SEAT_CONSOLE_PROFILE`` must exist (raises :class:`ProfileError` naming it); the XDG path
    is used only if present.
    """
    env = os.environ if environ is None else environ
    if cli_path:
        p = Path(cli_path).expanduser()
        if not p.is_file():
            what = "is a directory" if p.is_dir() else "no such file"
            raise ProfileError(f"{flag} {p}: {what} (give an existing TOML file"
                               + (", or omit --profile to use the embedded default)"
                                  if flag == "--profile" else ")"))
        return p, flag
    if env.get(ENV_VAR):
        p = Path(env[ENV_VAR]).expanduser()
        if not p.is_file():
            what = "is a directory" if p.is_dir() else "no such file"
            raise ProfileError(f"${ENV_VAR}={p}: {what} (point it at a TOML file, or unset the "
                               "variable)")
        return p, f"${ENV_VAR}"
    xdg = xdg_profile_path()
    if xdg.is_file():
        return xdg, "xdg"
    return None, "default"


_COMMAND_RE = re.compile(r"(^|`)seat-console (?!--profile )")


def with_profile(text: str, profile: str | None) -> str:
    """``text`` with every ``seat-console …`` command it suggests given the ``--profile``
    the console runs with (``profile``: the path as given; ``None`` or empty: ``text`` as it
    is — the profile then came from ``SEAT_CONSOLE_PROFILE`` or the defaults, which the pasted
    command finds the same way). A new engineer ran every command with ``--profile`` and was
    told ``next: fit — `seat-console runbook next` ``: pasted as is, that reads another profile,
    another node. The path is made absolute (the command may be pasted in another directory)
    and shell-quoted. Only a command at the start of ``text`` or inside backquotes is changed,
    and one that names ``--profile`` already is left alone. Used by the command line's
    ``next:`` lines and the TUI's runbook screen alike. Pure but for ``os.path.abspath``."""
    if not profile:
        return text
    flag = "--profile " + shlex.quote(os.path.abspath(profile))
    return _COMMAND_RE.sub(lambda m: f"{m.group(1)}seat-console {flag} ", text)


__all__ = ["ENV_VAR", "REFRESH_INTERVAL_MAX_S", "REFRESH_INTERVAL_MIN_S", "ProfileError",
           "default_profile_text", "resolve_profile_path", "with_profile", "xdg_profile_path"]
