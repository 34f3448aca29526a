"""Where the console keeps its files: the state dir (the journal) and the data dir (probe runs,
comparisons), both XDG through platformdirs and overridable by an environment variable.
Paths only: nothing here creates or reads a file."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

import platformdirs


ENV_STATE_DIR = "SEAT_CONSOLE_STATE_DIR"
"""Environment variable that overrides the state directory (the journal lives in it)."""


JOURNAL_FILE = "journal.sqlite3"


def state_dir(environ: Mapping[str, str] | None = None) -> Path:
    """The console's state directory: ``$SEAT_CONSOLE_STATE_DIR`` or platformdirs' user state
    dir for ``seat-console`` (XDG: ``$XDG_STATE_HOME/seat-console``)."""
    env = os.environ if environ is None else environ
    if env.get(ENV_STATE_DIR):
        return Path(env[ENV_STATE_DIR]).expanduser()
    return Path(platformdirs.user_state_dir("seat-console"))


def journal_path(environ: Mapping[str, str] | None = None) -> Path:
    """Path of the journal file in :func:`state_dir`."""
    return state_dir(environ) / JOURNAL_FILE


DATA_DIR_ENV = "SEAT_CONSOLE_DATA_DIR"
"""Environment variable that overrides the data directory (tests, a shared evidence disk)."""


def data_dir(environ: dict[str, str] | None = None) -> Path:
    """``$SEAT_CONSOLE_DATA_DIR``, else platformdirs' user data dir for ``seat-console``."""
    env = os.environ if environ is None else environ
    if env.get(DATA_DIR_ENV):
        return Path(env[DATA_DIR_ENV]).expanduser()
    return Path(platformdirs.user_data_dir("seat-console"))


__all__ = ["DATA_DIR_ENV", "ENV_STATE_DIR", "JOURNAL_FILE", "data_dir", "journal_path", "state_dir"]
