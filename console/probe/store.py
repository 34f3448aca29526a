"""Probe runs kept on disk: one directory per run under the XDG data dir, never deleted.

Layout (``docs/probe.md`` has the full summary schema)::

    $SEAT_CONSOLE_DATA_DIR or platformdirs.user_data_dir("seat-console")  (~/.local/share/…)
      runs/
        20261201T091700Z-3f9a1c/        run id: start time (UTC, basic ISO 8601) + 6 hex
          summary.json                  SUMMARY_SCHEMA; rewritten atomically as the run goes
          requests.jsonl                one RequestRecord per line (warm-up included, phase
                                        "warmup"), appended as each request finishes

``summary.json`` is written when the run starts (``status: "running"``), after every phase, and
at the end; a console killed mid-run leaves ``running``, which :func:`list_runs` shows as
``"running (or killed)"`` — it is kept like every other run. Writes go to a temporary file in the
same directory, then :func:`os.replace` (atomic on POSIX), so a reader never sees half a file.
"""

from __future__ import annotations

import json
import math
import os
import secrets
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

from seat_console.core.paths import DATA_DIR_ENV, data_dir
from seat_console.core.probe_record import RequestRecord
from seat_console.core.probe_stats import read_goodput
from seat_console.core.base import utcnow
from seat_console.core.untrusted import finite_nonneg, get_dict, get_int, get_list, get_str


SUMMARY_SCHEMA = "seat-console.probe-run/1"
"""``schema`` value of every summary this version writes."""

STATUSES = ("running", "complete", "incomplete", "disrupted", "interrupted", "failed")
"""Run statuses: ``complete`` — every phase complete, undisturbed, accounting agrees (the only
status with headline numbers); ``incomplete`` — a phase had failed or unsent requests, or an
accounting check could not be made; ``disrupted`` — interference during the run;
``interrupted`` — stopped by Ctrl-C / a stop request; ``failed`` — the run could not proceed
(preflight passed but e.g. the engine vanished); ``running`` — in progress, or the console was
killed (the summary was never finalised)."""


class StoreError(Exception):
    """The data directory cannot be used (not writable, a file where a directory should be); the
    message names the path and the fix."""


def runs_dir(environ: dict[str, str] | None = None) -> Path:
    """The ``runs/`` folder inside :func:`data_dir`."""
    return data_dir(environ) / "runs"


def new_run_id(at: datetime | None = None) -> str:
    """``YYYYMMDDTHHMMSSZ-xxxxxx``: the start time in UTC plus 6 random hex digits."""
    t = at or utcnow()
    return f"{t.strftime('%Y%m%dT%H%M%SZ')}-{secrets.token_hex(3)}"


def _jsonable(obj: Any) -> Any:
    if hasattr(obj, "model_dump"):
        return obj.model_dump(mode="json")
    if isinstance(obj, datetime):
        return obj.isoformat()
    raise TypeError(f"not JSON-serialisable: {type(obj).__name__}")


class RunWriter:
    """Writes one run's directory. ``root``: the runs folder (default :func:`runs_dir`).

    Raises :class:`StoreError` when the directory cannot be created.
    """

    def __init__(self, run_id: str | None = None, root: Path | None = None) -> None:
        self.run_id = run_id or new_run_id()
        self.root = root or runs_dir()
        self.path = self.root / self.run_id
        try:
            self.path.mkdir(parents=True, exist_ok=False)
        except FileExistsError:
            raise StoreError(f"{self.path}: a run with this id already exists") from None
        except OSError as exc:
            raise StoreError(f"{self.path}: cannot create the run directory ({exc.strerror}); "
                             f"make {self.root} writable or set ${DATA_DIR_ENV}") from None
        self._requests = (self.path / "requests.jsonl").open("a", encoding="utf-8")

    def append(self, record: RequestRecord) -> None:
        """Append one request record (a line of JSON) and flush it.

        The line is pydantic's own JSON (``model_dump_json``: ~5 µs a record, where
        ``json.dumps`` of ``model_dump`` took ~40 µs, the ITL floats' formatting most of it,
        inside the phase's CPU). It reads back as the same record (:func:`read_requests`;
        ``tests/test_probe_store.py``); only spellings differ from the lines before
        2026-12-03: a float's exponent (``1e-5``, was ``1e-05``), an infinite float as
        ``"Infinity"`` (was a bare ``Infinity``, not JSON). A record with any non-ASCII text
        (a failure quoting a server) is written as before, ``\\u``-escaped: pydantic writes
        UTF-8, and a U+0085 or U+2028 in a line would split it for a reader that splits on
        every line boundary (``str.splitlines``, as the evidence reader does)."""
        line = record.model_dump_json()
        if not line.isascii():
            line = json.dumps(record.model_dump(mode="json"), separators=(",", ":"))
        self._requests.write(line + "\n")
        self._requests.flush()

    def write_summary(self, summary: dict[str, Any]) -> None:
        """Write ``summary.json`` atomically (temp file + ``os.replace``)."""
        tmp = self.path / ".summary.json.tmp"
        tmp.write_text(json.dumps(summary, indent=1, default=_jsonable) + "\n", "utf-8")
        os.replace(tmp, self.path / "summary.json")

    def close(self) -> None:
        """Close the requests file (fsync first, so a kept run survives a crash)."""
        try:
            self._requests.flush()
            os.fsync(self._requests.fileno())
        finally:
            self._requests.close()


def read_summary(run_dir: Path) -> dict[str, Any]:
    """A run's ``summary.json``; raises :class:`StoreError` naming the file when it is missing,
    not JSON (or nested too deeply to parse) or not a JSON object."""
    p = run_dir / "summary.json"
    try:
        doc = json.loads(p.read_text("utf-8"))
    except OSError as exc:
        raise StoreError(f"{p}: cannot read ({exc.strerror})") from None
    except (ValueError, RecursionError) as exc:   # RecursionError: nesting (issue #22)
        raise StoreError(f"{p}: not JSON ({str(exc)[:100]})") from None
    if not isinstance(doc, dict):   # callers read fields: a list or a number is no summary
        raise StoreError(f"{p}: the summary is a JSON {type(doc).__name__}, not an object")
    return doc


def read_requests(run_dir: Path) -> Iterator[RequestRecord]:
    """The run's request records in file order; a damaged line raises :class:`StoreError`
    naming the file and line number."""
    p = run_dir / "requests.jsonl"
    with p.open(encoding="utf-8") as fh:
        for n, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                yield RequestRecord.model_validate_json(line)
            except ValueError as exc:
                raise StoreError(f"{p}:{n}: not a request record ({exc})") from None


def _goodput(d: Any) -> dict[str, Any] | None:
    gp = read_goodput(d)
    return gp.model_dump(mode="json") if gp is not None else None


def list_runs(root: Path | None = None) -> list[dict[str, Any]]:
    """Every run under ``root`` (default :func:`runs_dir`), oldest first: for each, ``run_id``,
    ``path``, ``status``, ``started_at``, ``ended_at``, ``container`` (the seat container the
    probe measured: ``role`` resident/probe, ``name``, ``image_id``; ``{}`` if not recorded),
    ``phases`` (name, state, headline or ``None``, goodput or ``None`` — absent, or a block
    that does not read back whole), ``disruptions`` (count), and ``problem`` when its summary cannot be read (the run
    is still listed)."""
    base = root or runs_dir()
    if not base.is_dir():
        return []
    out: list[dict[str, Any]] = []
    for d in sorted(p for p in base.iterdir() if p.is_dir()):
        row: dict[str, Any] = {"run_id": d.name, "path": str(d)}
        try:
            s = read_summary(d)
        except StoreError as exc:
            row.update(status="unreadable", problem=str(exc))
            out.append(row)
            continue
        # typed reads: a field of another JSON type is unknown, and one edited summary can
        # never take the whole list down (it raised AttributeError / TypeError, issue #22)
        status = get_str(s, "status", max_len=100) or "unknown"
        ident = get_dict(s, "identity")
        row.update(
            status="running (or killed)" if status == "running" else status,
            started_at=get_str(s, "started_at", max_len=100),
            ended_at=get_str(s, "ended_at", max_len=100),
            endpoint=get_str(ident, "endpoint"), served_model=get_str(ident, "served_model"),
            container={k: v for k, v in get_dict(ident, "container").items()
                       if k in ("role", "name", "image_id") and isinstance(v, str)},
            phases=[{"name": get_str(p, "name", max_len=200),
                     "state": get_str(p, "state", max_len=100),
                     "headline": get_dict(p, "stats").get("headline"),
                     "goodput": _goodput(get_dict(p, "stats").get("goodput"))}
                    for p in get_list(s, "phases") if isinstance(p, dict)],
            disruptions=len(get_list(s, "disruptions")))
        out.append(row)
    return out


WAVE_MAX_S = 86_400.0
"""A wave time over a day is not a measurement a forecast stands on (an edited summary)."""


def measured_waves(image_id: str, output_tokens: int, api: str,
                   root: Path | None = None) -> dict[int, dict[str, Any]]:
    """What this seat's kept runs measured, per concurrency, for a forecast (``probe --sweep
    --dry-run``): ``{concurrency: {"wave_s", "run_id", "phase"}}`` from the newest run under
    ``root`` (default :func:`runs_dir`) whose identity's container ran image ``image_id`` with
    the same ``settings.output_tokens`` and ``settings.api``, over its closed-loop phases
    (no ``request_rate``) that completed whole (``stats.complete``, every expected request
    completed). ``wave_s`` = ``duration_s`` ÷ ⌈completed ÷ concurrency⌉: the seconds one
    round of ``concurrency`` requests took there. Never raises: a run, phase or figure that
    does not read back (not a finite number > 0, a wave over :data:`WAVE_MAX_S`) is skipped —
    a forecast has no figure rather than a made-up one."""
    out: dict[int, dict[str, Any]] = {}
    base = root or runs_dir()
    if not image_id or not base.is_dir():
        return out
    for d in sorted((p for p in base.iterdir() if p.is_dir()), reverse=True):   # newest first
        try:
            s = read_summary(d)
        except StoreError:
            continue
        ident, settings = get_dict(s, "identity"), get_dict(s, "settings")
        if (get_str(get_dict(ident, "container"), "image_id") != image_id
                or get_int(settings, "output_tokens") != output_tokens
                or get_str(settings, "api") != api):
            continue
        for p in get_list(s, "phases"):
            st = get_dict(p, "stats")
            c = get_int(st, "concurrency", minimum=1, maximum=1_000_000)
            done = get_int(st, "completed", minimum=1)
            dur = finite_nonneg(st.get("duration_s"))
            if (c is None or c in out or done is None or not dur or st.get("complete") is not True
                    or st.get("request_rate") is not None or get_int(st, "expected") != done):
                continue
            wave = dur / math.ceil(done / c)
            if 0.0 < wave <= WAVE_MAX_S:
                out[c] = {"wave_s": wave, "run_id": d.name,
                          "phase": get_str(p, "name", max_len=200) or "?"}
    return out


__all__ = [
    "STATUSES",
    "WAVE_MAX_S",
    "measured_waves",
    "SUMMARY_SCHEMA",
    "RunWriter",
    "StoreError",
    "list_runs",
    "new_run_id",
    "read_requests",
    "read_summary",
    "runs_dir",
]
