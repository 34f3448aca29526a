"""The seat-state file: which container is the seat's resident after a ``promote``.

Where: ``$SEAT_CONSOLE_STATE_DIR/seat.json`` when that variable is set, else the console's XDG
state dir (:func:`seat_console.core.paths.state_dir`), beside the journal. Absent until the first
``seat-console promote``: then the profile's ``[resident] container`` is the resident. Written
only by :mod:`seat_console.actions.promote` (atomically: a temporary file, ``fsync``,
``os.replace``; the version it replaces kept beside it as ``seat.json.prev``); read here, through
:func:`read_seat_file`, by every reader that must know the resident (``swap``, ``restore``,
``promote --undo``, the runbook state).

Format (JSON object, ``format`` 1)::

    {"format": 1,
     "resident": RECORD,            # the container that holds the seat as its resident
     "previous": RECORD | null,     # the resident it replaced (kept, stopped: the rollback)
     "promoted_at": "2026-12-05T03:30:00Z", "promoted_by": "user@host",
     "promote_run_id": "promote-…", "swap_run_id": "swap-…" | null,
     "forced": "reason" | null,     # --force --reason: promoted without a PROMOTE-ABLE decision
     "profile": {"source": "/path/profile.toml" | "<embedded default>", "written": bool}}

A RECORD is the launch record of a container (the shape of
:func:`seat_console.actions.swap.identity`, plus mounts and GPUs): ``name``, ``id`` (container
ID), ``image_id`` (``sha256:…``), ``image_ref``, ``repo_digests`` (``[repo@sha256:…]``),
``entrypoint`` / ``cmd`` (argv lists or ``null``), ``env_names`` (names only: values may be
credentials and are never written), ``mounts`` (``"source:destination[:ro]"``), ``gpus`` (UUIDs),
``stop_timeout_s``, ``started_at`` (ISO UTC or ``null``) and ``models`` (what ``/v1/models``
listed).

Every error is a :class:`SeatFileError` naming the file and saying the fix; a file that is not
there is ``None``, not an error.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from seat_console.core.paths import state_dir
from seat_console.core.untrusted import InputError, load_json

SEAT_FILE = "seat.json"
"""The seat-state file's name in the state dir."""
PREV_SUFFIX = ".prev"
"""The version a write replaced is kept as ``seat.json.prev``."""
FORMAT = 1
"""The format this module reads and writes."""
MAX_SEAT_FILE_BYTES = 1 << 20
"""Largest seat-state file read (1 MiB; a real one is ~2 KB)."""

_NAME_RE = re.compile(r"[a-zA-Z0-9][a-zA-Z0-9_.-]{0,254}")
_ID_RE = re.compile(r"[0-9a-f]{12,64}")
_IMAGE_ID_RE = re.compile(r"sha256:[0-9a-f]{64}")
_MAX_STR = 4096
_MAX_LIST = 1024


class SeatFileError(InputError):
    """The seat-state file cannot be used: ``what`` is its path, ``problem`` says what is wrong
    and the fix (``str()``: ``"PATH: problem"``)."""


FIX = ("fix: restore the version before from seat.json.prev beside it, or move the file aside "
       "to make the profile's [resident] the resident again (`seat-console promote --undo` "
       "reads it too)")


def seat_file_path(environ: Mapping[str, str] | None = None) -> Path:
    """Path of the seat-state file in :func:`~seat_console.core.paths.state_dir`."""
    return state_dir(environ) / SEAT_FILE


def prev_path(path: Path) -> Path:
    """Where the version before ``path`` is kept (``seat.json.prev``)."""
    return path.with_name(path.name + PREV_SUFFIX)


@dataclass(frozen=True)
class SeatFile:
    """A parsed seat-state file (module docstring). ``resident`` / ``previous``: RECORD dicts
    (validated, JSON-able); ``promoted_at``: aware UTC; ``path``: where it was read."""

    resident: dict[str, Any]
    previous: dict[str, Any] | None
    promoted_at: datetime
    promoted_by: str
    promote_run_id: str
    swap_run_id: str | None
    forced: str | None
    profile: dict[str, Any]
    path: str = ""

    @property
    def container(self) -> str:
        """The resident container's name."""
        return str(self.resident["name"])

    def to_json(self) -> dict[str, Any]:
        """The file's JSON object (what :func:`parse_seat_file` reads back)."""
        from seat_console.core.untrusted import aware_utc

        at = aware_utc(self.promoted_at, "promoted_at")
        return {"format": FORMAT, "resident": self.resident, "previous": self.previous,
                "promoted_at": at.strftime("%Y-%m-%dT%H:%M:%SZ"),
                "promoted_by": self.promoted_by, "promote_run_id": self.promote_run_id,
                "swap_run_id": self.swap_run_id, "forced": self.forced,
                "profile": self.profile}


def _str(d: Mapping[str, Any], key: str, where: str, *, required: bool = True,
         pattern: re.Pattern[str] | None = None) -> str | None:
    v = d.get(key)
    if v is None and not required:
        return None
    if not isinstance(v, str) or not v or len(v) > _MAX_STR:
        raise ValueError(f"{where}.{key} must be a non-empty string of at most {_MAX_STR} "
                         f"characters (got {type(v).__name__})")
    if pattern is not None and not pattern.fullmatch(v):
        raise ValueError(f"{where}.{key} = {v[:80]!r} is not of the form {pattern.pattern}")
    return v


def _str_list(d: Mapping[str, Any], key: str, where: str, *, nullable: bool = False
              ) -> list[str] | None:
    v = d.get(key, None if nullable else [])
    if v is None and nullable:
        return None
    if not isinstance(v, list) or len(v) > _MAX_LIST or not all(
            isinstance(x, str) and len(x) <= _MAX_STR for x in v):
        raise ValueError(f"{where}.{key} must be a list of strings (at most {_MAX_LIST})")
    return list(v)


def parse_record(d: Any, where: str) -> dict[str, Any]:
    """One RECORD (module docstring) validated and normalised; raises :class:`ValueError`
    naming the field (``where``: its place in the file, e.g. ``resident``)."""
    if not isinstance(d, Mapping):
        raise ValueError(f"{where} must be an object (got {type(d).__name__})")
    st = d.get("stop_timeout_s", 10)
    if not isinstance(st, int) or isinstance(st, bool) or not 0 <= st <= 86_400:
        raise ValueError(f"{where}.stop_timeout_s must be an integer 0-86400 seconds")
    env_names = _str_list(d, "env_names", where) or []
    if any("=" in n for n in env_names):
        raise ValueError(f"{where}.env_names holds 'NAME=value' entries: only names are kept "
                         "(values may be credentials)")
    return {"name": _str(d, "name", where, pattern=_NAME_RE),
            "id": _str(d, "id", where, pattern=_ID_RE),
            "image_id": _str(d, "image_id", where, pattern=_IMAGE_ID_RE),
            "image_ref": _str(d, "image_ref", where, required=False),
            "repo_digests": _str_list(d, "repo_digests", where),
            "entrypoint": _str_list(d, "entrypoint", where, nullable=True),
            "cmd": _str_list(d, "cmd", where, nullable=True),
            "env_names": env_names,
            "mounts": _str_list(d, "mounts", where),
            "gpus": _str_list(d, "gpus", where),
            "stop_timeout_s": st,
            "started_at": _str(d, "started_at", where, required=False),
            "models": _str_list(d, "models", where)}


def parse_seat_file(text: str | bytes, source: str) -> SeatFile:
    """Parse a seat-state file's text (module docstring). ``source``: its path, for messages.

    Raises :class:`SeatFileError` naming ``source`` and the fix (:data:`FIX`) for text that is
    not bounded JSON (:func:`~seat_console.core.untrusted.load_json`), not an object, of another
    ``format``, or with a missing or mistyped field (a container name that is not a docker name,
    an image ID that is not ``sha256:`` + 64 hex, ``env_names`` with values, a time that is not
    ISO 8601 UTC)."""
    from seat_console.core.untrusted import aware_utc

    try:
        doc = load_json(text, source, max_bytes=MAX_SEAT_FILE_BYTES, max_depth=8)
    except InputError as exc:
        raise SeatFileError(source, f"{exc.problem}; {FIX}") from None
    try:
        if not isinstance(doc, dict):
            raise ValueError(f"must be a JSON object (got {type(doc).__name__})")
        if doc.get("format") != FORMAT or isinstance(doc.get("format"), bool):
            raise ValueError(f"format {doc.get('format')!r} is not {FORMAT} (written by "
                             "another version of the console?)")
        resident = parse_record(doc.get("resident"), "resident")
        prev = doc.get("previous")
        previous = None if prev is None else parse_record(prev, "previous")
        at_text = _str(doc, "promoted_at", "(top level)")
        assert at_text is not None
        try:
            at = aware_utc(datetime.fromisoformat(at_text.replace("Z", "+00:00")),
                           "promoted_at")
        except (ValueError, InputError):
            raise ValueError(f"promoted_at = {at_text[:40]!r} is not an ISO 8601 UTC time "
                             "(e.g. 2026-12-05T03:30:00Z)") from None
        forced = doc.get("forced")
        if forced is not None and not isinstance(forced, str):
            raise ValueError("forced must be a string (the --reason) or null")
        prof = doc.get("profile", {})
        if not isinstance(prof, dict) or not isinstance(prof.get("written", False), bool) \
                or not isinstance(prof.get("source", ""), str):
            raise ValueError("profile must be {\"source\": str, \"written\": bool}")
        return SeatFile(resident=resident, previous=previous, promoted_at=at,
                        promoted_by=_str(doc, "promoted_by", "(top level)") or "",
                        promote_run_id=_str(doc, "promote_run_id", "(top level)") or "",
                        swap_run_id=_str(doc, "swap_run_id", "(top level)", required=False),
                        forced=forced,
                        profile={"source": str(prof.get("source", ""))[:_MAX_STR],
                                 "written": bool(prof.get("written", False))},
                        path=source)
    except ValueError as exc:
        raise SeatFileError(source, f"{exc}; {FIX}") from None


def read_seat_file(path: Path | None = None) -> SeatFile | None:
    """The seat-state file at ``path`` (default :func:`seat_file_path`), parsed; ``None`` when
    there is none (no promote yet, or it was undone to "none"). Raises :class:`SeatFileError`
    for a file that cannot be read or parsed (:func:`parse_seat_file`)."""
    p = path or seat_file_path()
    try:
        data = p.read_bytes()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise SeatFileError(str(p), f"cannot read it: {exc.strerror or exc}; {FIX}") from None
    return parse_seat_file(data, str(p))


def resident_container(default: str | None, path: Path | None = None) -> str | None:
    """The resident container's name for a reader that must not fail (a source, a status
    line): the seat-state file's resident when there is a readable one, else ``default`` (the
    profile's ``[resident] container``). An unreadable file gives ``default``: the actions
    refuse on it (:class:`SeatFileError`); a display keeps showing what it can."""
    try:
        sf = read_seat_file(path)
    except SeatFileError:
        return default
    return sf.container if sf is not None else default


__all__ = ["FIX", "FORMAT", "MAX_SEAT_FILE_BYTES", "PREV_SUFFIX", "SEAT_FILE", "SeatFile",
           "SeatFileError", "parse_record", "parse_seat_file", "prev_path", "read_seat_file",
           "resident_container", "seat_file_path"]
