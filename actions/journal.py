"""The action journal: an append-only, hash-chained SQLite record of every runbook.

Where: ``$SEAT_CONSOLE_STATE_DIR/journal.sqlite3`` when that variable is set (tests, a shared
on-call box), else ``platformdirs.user_state_dir("seat-console")/journal.sqlite3`` (on Linux
``$XDG_STATE_HOME/seat-console`` or ``~/.local/state/seat-console``). stdlib :mod:`sqlite3`, WAL
journal mode (readers — the TUI's action log, ``hold --status`` of another console — never block
the writer), ``synchronous=FULL`` (a row written is on disk before the next node change).

One row per runbook start, step event (``begin``, ``apply``, ``verify``, ``skip``, ``fail``,
``undo``, ``undo-fail``), end, and per hold-state change and interference notice. Each row holds:
``seq`` (1, 2, 3…), ``at`` (UTC, ISO 8601 with ``Z``), ``user``, ``host``, ``profile_sha256``,
``run_id``, ``runbook``, ``kind``, ``step``, ``inputs`` (JSON), ``outcome``, ``output`` (a command
output tail, at most :data:`OUTPUT_TAIL_CHARS` characters), ``facts`` (JSON: what a step learnt,
e.g. a silence ID), ``prev_hash`` and ``hash``; and ``operator`` (JSON, nullable: who did it —
login, ``SUDO_USER``, the SSH client, the tty, and for a confirmed run what was typed:
:mod:`seat_console.actions.who`). A journal written before the ``operator`` column existed gets
it added (``ALTER TABLE``) when opened; its old rows keep ``NULL`` there.

Hash chain: ``hash = SHA-256(prev_hash ‖ canonical JSON of every other column, seq included)``
— ``operator`` only when it is not ``NULL``, so rows written before it existed still verify,
``prev_hash`` of row 1 is 64 zeros (:data:`GENESIS`). :meth:`Journal.verify` recomputes it, so
an edited row (its own hash no longer matches), a deleted row (a gap in ``seq``, or the next row's
``prev_hash`` no longer matches), or reordered rows are found and *named* (by ``seq``). SQLite
triggers refuse ``UPDATE``/``DELETE`` through the library; someone with the ``sqlite3`` shell can
drop them, which is what the chain is for.

Head anchor: a pure hash chain cannot see rows cut from its *end*. So after each append the
journal writes a head record — ``{"rows": <last seq>, "hash": <its hash>}`` — to a separate file
next to it (``journal.sqlite3.head``, :func:`head_path`), atomically (temporary file, ``fsync``,
``os.replace``) and only forward (under an ``flock`` of ``journal.sqlite3.head.lock``, a head is
never replaced by an older one). :meth:`Journal.verify` checks that row ``rows`` exists and has
that hash: rows deleted from the end are named ("rows 37–39 missing after row 36"); a missing
head file on a non-empty journal is reported too. A console killed between the row's commit
and the head write leaves the head one row behind, which verify accepts (rows after the head
still have to chain from it).

Rows are validated on write and on read (issue 31): SQLite keeps any value in any column, and
the file can be edited. A write whose ``inputs`` / ``facts`` is not a mapping, nests deeper than
:data:`MAX_JSON_DEPTH`, or whose text columns are not strings is refused (:class:`JournalError`,
nothing written); NaN / ±inf become their words and lone surrogates U+FFFD, so every row written
reads back. On read, :func:`validate_row` checks each row (``seq`` an integer, every text column
a string, ``at`` a zoned time, ``inputs`` / ``facts`` JSON objects of bounded depth); a row that
fails is skipped by every reader and named by ``seq`` in :attr:`Journal.skipped` /
:meth:`Journal.bad_rows` (``seat-console journal`` prints it; :meth:`Journal.verify` names it),
never a crash, never the whole journal unreadable.

Secrets never reach it: every text written is passed through :func:`scrub` — values of keys that
look like credentials (``password``, ``token``, ``secret``, ``authorization``…) become
``<redacted>``, and every string the caller registered as a secret (e.g. the Alertmanager
credentials, :meth:`Journal.add_secrets`) is replaced wherever it appears.

Threads: one :class:`Journal` (one connection) per thread; the runbook engine writes from the
thread that runs the runbook. Appends from several processes are serialised by
``BEGIN IMMEDIATE`` (the chain stays linear).
"""

from __future__ import annotations

import fcntl
import getpass
import hashlib
import json
import math
import os
import re
import socket
import sqlite3
import threading
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from seat_console.actions.who import confirmation, operator_now
from seat_console.core.paths import ENV_STATE_DIR, journal_path
from seat_console.core.untrusted import InputError, load_json, nesting_depth, without_surrogates

GENESIS = "0" * 64
"""``prev_hash`` of the first row."""
OUTPUT_TAIL_CHARS = 4000
"""At most this many characters of a command's output are kept in a row (the tail)."""

_SECRET_KEY_RE = re.compile(r"(pass(word)?|token|secret|authori[sz]ation|api[_-]?key|cookie|"
                            r"credential)", re.IGNORECASE)
_COLUMNS = ("seq", "at", "user", "host", "profile_sha256", "run_id", "runbook", "kind", "step",
            "inputs", "outcome", "output", "facts")
OPERATOR = "operator"
"""The nullable column of who did it (module docstring): in the hash only when not ``NULL``."""

_SCHEMA = """
CREATE TABLE IF NOT EXISTS entries (
    seq INTEGER PRIMARY KEY,
    at TEXT NOT NULL,
    user TEXT NOT NULL,
    host TEXT NOT NULL,
    profile_sha256 TEXT NOT NULL,
    run_id TEXT NOT NULL,
    runbook TEXT NOT NULL,
    kind TEXT NOT NULL,
    step TEXT NOT NULL,
    inputs TEXT NOT NULL,
    outcome TEXT NOT NULL,
    output TEXT NOT NULL,
    facts TEXT NOT NULL,
    prev_hash TEXT NOT NULL,
    hash TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS entries_run ON entries(run_id);
CREATE TRIGGER IF NOT EXISTS entries_no_update BEFORE UPDATE ON entries
BEGIN SELECT RAISE(ABORT, 'the seat-console journal is append-only'); END;
CREATE TRIGGER IF NOT EXISTS entries_no_delete BEFORE DELETE ON entries
BEGIN SELECT RAISE(ABORT, 'the seat-console journal is append-only'); END;
"""


_TEXT_COLUMNS = ("at", "user", "host", "profile_sha256", "run_id", "runbook", "kind", "step",
                 "outcome", "output", "prev_hash", "hash")
_JSON_COLUMNS = ("inputs", "facts")
MAX_JSON_DEPTH = 32
"""Deepest nesting of a row's ``inputs`` / ``facts`` (the object itself is level 1). A runbook's
facts nest 3–4 levels; a write above this is refused, and a row read back above it is a bad row
(json.loads of a 100,000-level document raised :class:`RecursionError`, issue 31)."""
MAX_JSON_CHARS = 4 << 20
"""Longest ``inputs`` / ``facts`` text read back (4 Mi characters)."""


EVENT_KEY = "event_key"
"""The ``facts`` key :meth:`Journal.append_once` dedupes on when given a ``key``: the identity
of one change event (e.g. ``timer:<unit>:active-since:<time>``)."""


class JournalError(Exception):
    """The journal cannot be opened or written (message names the file and the fix)."""


@dataclass(frozen=True)
class BadRow:
    """A journal row that does not read as a row this console writes: ``seq`` (as stored; an
    ``int`` in a journal of this console's schema) and ``problem`` (which column, and why).
    Readers skip it and say so; ``journal --verify`` names it through the hash chain too."""

    seq: Any
    problem: str

    def text(self) -> str:
        """``"row 12: facts is a JSON list, not an object"``."""
        return f"row {self.seq!r}: {self.problem}"


class RowError(ValueError):
    """One row that fails :func:`validate_row`; ``bad`` is its :class:`BadRow`."""

    def __init__(self, bad: BadRow) -> None:
        self.bad = bad
        super().__init__(bad.text())


def head_path(path: Path) -> Path:
    """The head-anchor file of the journal at ``path``: ``<path>.head`` (module docstring)."""
    return Path(str(path) + ".head")


def read_head(path: Path) -> tuple[int, str] | None:
    """The head record of the journal at ``path`` as ``(rows, hash)``, or ``None`` when there is
    no head file. Raises :class:`ValueError` naming the file when it is not a head record."""
    hp = head_path(path)
    try:
        text = hp.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    try:
        d = json.loads(text)
        rows, h = d["rows"], d["hash"]
        if not isinstance(rows, int) or isinstance(rows, bool) or rows < 0 \
                or not isinstance(h, str) or not re.fullmatch(r"[0-9a-f]{64}", h):
            raise TypeError
    except (ValueError, KeyError, TypeError):
        raise ValueError(f"head record {hp}: not a journal head ({text[:80]!r})") from None
    return rows, h


def _write_head(path: Path, rows: int, h: str) -> None:
    """Write the head record atomically, only forward (never replacing a newer head)."""
    hp = head_path(path)
    with open(str(hp) + ".lock", "a+") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            cur = read_head(path)
        except ValueError:
            cur = None
        if cur is not None and cur[0] >= rows:
            return
        tmp = hp.with_name(f"{hp.name}.{os.getpid()}.tmp")
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(json.dumps({"rows": rows, "hash": h}) + "\n")
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, hp)


def _iso(t: datetime) -> str:
    return t.astimezone(UTC).isoformat(timespec="microseconds").replace("+00:00", "Z")


def parse_time(text: str) -> datetime:
    """A journal ``at`` (ISO 8601, ``Z``) → aware UTC datetime. Raises :class:`ValueError`."""
    t = datetime.fromisoformat(text.replace("Z", "+00:00"))
    if t.tzinfo is None:
        raise ValueError(f"{text!r} has no timezone")
    try:
        return t.astimezone(UTC)
    except OverflowError:
        raise ValueError(f"{text!r} is outside the calendar in UTC") from None


def scrub(value: Any, secrets: Sequence[str] = ()) -> Any:
    """``value`` (JSON-like: dict/list/str/number) with credential-looking keys' values replaced by
    ``<redacted>`` and every string of ``secrets`` (3+ characters) replaced wherever it appears.
    Pure; returns a new object."""
    if isinstance(value, Mapping):
        return {str(k): ("<redacted>" if _SECRET_KEY_RE.search(str(k)) and v not in (None, "")
                         else scrub(v, secrets)) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [scrub(v, secrets) for v in value]
    if isinstance(value, str):
        for s in sorted(secrets, key=len, reverse=True):
            if s and len(s) >= 3:
                value = value.replace(s, "<redacted>")
        return without_surrogates(value)   # SQLite cannot store a lone surrogate (UTF-8)
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)                  # NaN / ±inf are not JSON: kept as their words
    if value is None or isinstance(value, (bool, int, float)):
        return value
    return scrub(str(value), secrets)


def _canonical(d: Mapping[str, Any]) -> str:
    return json.dumps(d, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def _json_column(name: str, value: Any, secrets: Sequence[str]) -> str:
    """``inputs`` / ``facts`` as written: a mapping (or ``None``: ``{}``), scrubbed, nesting at
    most :data:`MAX_JSON_DEPTH`. Raises :class:`ValueError` naming the column otherwise (a
    list, a string or a number is refused: every reader takes the column as an object)."""
    if value is None:
        value = {}
    if not isinstance(value, Mapping):
        raise ValueError(f"{name} must be a JSON object (a mapping), not a "
                         f"{type(value).__name__}")
    if nesting_depth(value, MAX_JSON_DEPTH) > MAX_JSON_DEPTH:
        raise ValueError(f"{name} nests deeper than {MAX_JSON_DEPTH} levels")
    return _canonical(scrub(dict(value), secrets))


def _text_column(name: str, value: Any) -> str:
    if not isinstance(value, str):
        raise ValueError(f"{name} must be text, not a {type(value).__name__}")
    return without_surrogates(value)


def row_hash(prev_hash: str, content: Mapping[str, Any]) -> str:
    """SHA-256 (hex) of ``prev_hash`` followed by the canonical JSON of the row's columns
    (:data:`_COLUMNS`, ``seq`` included, and :data:`OPERATOR` when it is not ``None``; sorted
    keys, no spaces, UTF-8)."""
    d = {k: content[k] for k in _COLUMNS}
    if content.get(OPERATOR) is not None:
        d[OPERATOR] = content[OPERATOR]
    return hashlib.sha256((prev_hash + _canonical(d)).encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class Entry:
    """One journal row. ``inputs`` / ``facts`` are decoded JSON; ``at`` is aware UTC."""

    seq: int
    at: datetime
    user: str
    host: str
    profile_sha256: str
    run_id: str
    runbook: str
    kind: str
    step: str
    inputs: dict[str, Any]
    outcome: str
    output: str
    facts: dict[str, Any]
    prev_hash: str
    hash: str
    operator: dict[str, Any] | None = None
    """Who wrote it (:func:`seat_console.actions.who.operator_now`, with ``confirmed``);
    ``None`` for a row written before operators were recorded."""

    def to_json(self) -> dict[str, Any]:
        """JSON-ready dict (``at`` as ISO 8601 with ``Z``)."""
        d = {k: getattr(self, k) for k in (*_COLUMNS, "prev_hash", "hash", OPERATOR)}
        d["at"] = _iso(self.at)
        return d


@dataclass(frozen=True)
class VerifyReport:
    """Result of :meth:`Journal.verify`: ``ok``; ``rows`` checked; ``problems``: one sentence
    per bad row, naming its ``seq``; ``bad_seqs``: those seqs."""

    ok: bool
    rows: int
    problems: tuple[str, ...] = ()
    bad_seqs: tuple[int, ...] = ()


@dataclass
class Journal:
    """The journal file at ``path`` (default :func:`journal_path`), opened (and created) now.

    ``user`` / ``host`` default to the login name and host name; ``operator`` to
    :func:`~seat_console.actions.who.operator_now` (every row written records it;
    :meth:`confirmed` adds what the engineer typed). Raises :class:`JournalError` when the
    directory cannot be created or the file is not a journal.
    """

    path: Path = field(default_factory=journal_path)
    user: str = field(default_factory=lambda: _user())
    host: str = field(default_factory=socket.gethostname)
    operator: dict[str, Any] = field(default_factory=operator_now)
    _secrets: list[str] = field(default_factory=list, repr=False)

    def __post_init__(self) -> None:
        self.path = Path(self.path)
        self.skipped: tuple[BadRow, ...] = ()
        """The rows the last read (:meth:`entries`, :meth:`runs`, :meth:`unfinished`) skipped
        because they do not read as rows (:func:`validate_row`), each named by ``seq``."""
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            # One connection used under a lock: a Journal made on the UI thread may be handed
            # to the worker that runs the runbook.
            self._lock = threading.RLock()
            self._db = sqlite3.connect(self.path, timeout=30.0, isolation_level=None,
                                       check_same_thread=False)
            # a TEXT value that is not UTF-8 (an edited row) comes back as bytes, so that row
            # is a bad row (validate_row) instead of the whole read failing
            self._db.text_factory = _text_or_bytes
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=FULL")
            self._db.executescript(_SCHEMA)
            self._has_operator = self._add_operator_column()
        except (OSError, sqlite3.Error, ValueError) as exc:  # ValueError: a garbage file's
            # schema text is not UTF-8 (UnicodeDecodeError), issue #22
            raise JournalError(f"journal {self.path}: cannot open ({exc}); check the directory "
                               f"permissions or set ${ENV_STATE_DIR}") from None

    def _add_operator_column(self) -> bool:
        """Add the nullable :data:`OPERATOR` column to a journal written before it existed
        (old rows keep ``NULL``; their hashes are unchanged). ``False`` when it is missing and
        cannot be added (a read-only file: rows are still read and verified)."""
        if OPERATOR in self._names():
            return True
        try:
            self._db.execute(f"ALTER TABLE entries ADD COLUMN {OPERATOR} TEXT")
        except sqlite3.OperationalError as exc:
            if "duplicate column" in str(exc):   # another console added it meanwhile
                return True
            return False
        return True

    def confirmed(self, how: str, typed: str | None = None) -> None:
        """Record how the engineer confirmed the run about to be written (``how``: ``typed``,
        ``y``, ``--yes``, ``tui``; ``typed``: what was typed): every later row's ``operator``
        carries it (:func:`~seat_console.actions.who.confirmation`; ValueError for another
        ``how``)."""
        self.operator = {**self.operator, "confirmed": confirmation(how, typed)}

    def data_version(self) -> int:
        """SQLite's ``PRAGMA data_version`` of this connection: a number that changes when
        another connection (another console, a CLI command) commits to the journal, and not
        for this connection's own writes (https://sqlite.org/pragma.html#pragma_data_version).
        Lets a reader skip re-reading an unchanged journal. Raises :class:`JournalError`."""
        with self._lock:
            try:
                return int(self._db.execute("PRAGMA data_version").fetchone()[0])
            except sqlite3.Error as exc:
                raise JournalError(f"journal {self.path}: cannot read ({exc})") from None

    def close(self) -> None:
        """Close the connection."""
        self._db.close()

    def __enter__(self) -> Journal:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def add_secrets(self, secrets: Iterable[str]) -> None:
        """Register strings that must never be written (replaced by ``<redacted>``)."""
        self._secrets.extend(s for s in secrets if s)

    # -- writing ------------------------------------------------------------------------------
    def append(self, *, run_id: str, runbook: str, kind: str, step: str = "",
               inputs: Mapping[str, Any] | None = None, outcome: str = "",
               output: str = "", facts: Mapping[str, Any] | None = None,
               profile_sha256: str = "", at: datetime | None = None) -> Entry:
        """Append one row (scrubbed of secrets, output cut to its tail) and return it.

        Raises :class:`JournalError` when the write fails (disk full, read-only file).
        """
        row = self._write(False, run_id=run_id, runbook=runbook, kind=kind, step=step,
                          inputs=inputs, outcome=outcome, output=output, facts=facts,
                          profile_sha256=profile_sha256, at=at)
        assert row is not None
        return row

    def append_once(self, *, run_id: str, runbook: str, kind: str, step: str = "",
                    outcome: str = "", output: str = "",
                    facts: Mapping[str, Any] | None = None,
                    key: str | None = None) -> Entry | None:
        """:meth:`append`, unless a row with the same ``run_id``, ``kind`` and ``outcome``
        (after scrubbing) is already there — or, with ``key``, a row of that ``run_id`` and
        ``kind`` whose ``facts["event_key"]`` is ``key`` (the identity of one change event, so
        a later, different change is never swallowed by an earlier notice with similar
        words): then nothing is written and ``None`` returned. ``key`` is stored as
        ``facts["event_key"]``. Checked inside the write transaction, so two consoles
        (processes) that see the same event journal it once (whoever sees it first). Raises
        :class:`JournalError` when the write fails."""
        if key is not None and (facts is None or isinstance(facts, Mapping)):
            facts = {**(facts or {}), EVENT_KEY: key}   # anything else is refused by _write
        return self._write(True, run_id=run_id, runbook=runbook, kind=kind, step=step,
                           outcome=outcome, output=output, facts=facts, key=key)

    def _write(self, only_if_new: bool, *, run_id: str, runbook: str, kind: str,
               step: str = "", inputs: Mapping[str, Any] | None = None, outcome: str = "",
               output: str = "", facts: Mapping[str, Any] | None = None,
               profile_sha256: str = "", at: datetime | None = None,
               key: str | None = None) -> Entry | None:
        sec = self._secrets
        try:   # validated on write as on read (validate_row): never a row no reader can take
            content: dict[str, Any] = {
                "at": _iso(at or datetime.now(UTC)), "user": _text_column("user", self.user),
                "host": _text_column("host", self.host),
                "profile_sha256": _text_column("profile_sha256", profile_sha256),
                "run_id": _text_column("run_id", run_id),
                "runbook": _text_column("runbook", runbook), "kind": _text_column("kind", kind),
                "step": scrub(_text_column("step", step), sec),
                "inputs": _json_column("inputs", inputs, sec),
                "outcome": scrub(_text_column("outcome", outcome), sec),
                "output": scrub(_text_column("output", output)[-OUTPUT_TAIL_CHARS:], sec),
                "facts": _json_column("facts", facts, sec),
                OPERATOR: (_json_column(OPERATOR, self.operator, sec)
                           if self._has_operator and self.operator else None),
            }
        except ValueError as exc:
            raise JournalError(f"journal {self.path}: row refused ({exc}); nothing was "
                               "written") from None
        cols = (*_COLUMNS, OPERATOR) if self._has_operator else _COLUMNS
        try:
            self._lock.acquire()
            self._db.execute("BEGIN IMMEDIATE")
            try:
                if only_if_new and key is not None and self._db.execute(
                        "SELECT 1 FROM entries WHERE run_id = ? AND kind = ? AND "
                        "json_valid(facts) AND json_extract(facts, '$.event_key') = ? LIMIT 1",
                        (run_id, kind, key)).fetchone():
                    self._db.execute("ROLLBACK")
                    return None
                if only_if_new and key is None and self._db.execute(
                        "SELECT 1 FROM entries WHERE run_id = ? AND kind = ? AND outcome = ? "
                        "LIMIT 1", (run_id, kind, content["outcome"])).fetchone():
                    self._db.execute("ROLLBACK")
                    return None
                last = self._db.execute(
                    "SELECT seq, hash FROM entries ORDER BY seq DESC LIMIT 1").fetchone()
                seq, prev = (last[0] + 1, last[1]) if last else (1, GENESIS)
                content["seq"] = seq
                h = row_hash(prev, content)
                self._db.execute(
                    f"INSERT INTO entries ({', '.join(cols)}, prev_hash, hash) VALUES "
                    f"({', '.join('?' * (len(cols) + 2))})",
                    (*(content[k] for k in cols), prev, h))
                self._db.execute("COMMIT")
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
        except sqlite3.Error as exc:
            raise JournalError(f"journal {self.path}: cannot write ({exc})") from None
        finally:
            self._lock.release()
        try:
            _write_head(self.path, seq, h)
        except OSError as exc:
            raise JournalError(f"journal {self.path}: row {seq} written but its head record "
                               f"{head_path(self.path)} could not be ({exc}); check the "
                               "directory permissions") from None
        return _entry({**content, "prev_hash": prev, "hash": h})

    # -- reading ------------------------------------------------------------------------------
    def entries(self, *, since: datetime | None = None, run_id: str | None = None,
                runbook: str | None = None, kind: str | None = None) -> list[Entry]:
        """Rows in ``seq`` order, optionally only those at/after ``since`` (aware), of one run,
        one runbook or one kind."""
        q, args = "SELECT * FROM entries WHERE 1=1", []
        if run_id is not None:
            q, args = q + " AND run_id = ?", [*args, run_id]
        if runbook is not None:
            q, args = q + " AND runbook = ?", [*args, runbook]
        if kind is not None:
            q, args = q + " AND kind = ?", [*args, kind]
        names, raw = self._read(q + " ORDER BY seq", args)
        rows, bad = [], []
        for r in raw:
            try:
                rows.append(validate_row(dict(zip(names, r, strict=True))))
            except RowError as exc:
                bad.append(exc.bad)
        self.skipped = tuple(bad)
        if since is not None:
            rows = [r for r in rows if r.at >= since]
        return rows

    def bad_rows(self) -> list[BadRow]:
        """Every row of the journal that does not read as a row (:func:`validate_row`), in
        ``seq`` order. Raises :class:`JournalError` when the file cannot be read."""
        self.entries()
        return list(self.skipped)

    def _names(self) -> list[str]:
        return [d[1] for d in self._db.execute("PRAGMA table_info(entries)")]

    def _read(self, q: str, args: Sequence[Any] = ()) -> tuple[list[str], list[Any]]:
        """``(column names, rows)`` of query ``q``; a corrupted file (not a database, a page
        that is not UTF-8 where text is kept) is a :class:`JournalError` naming the file."""
        with self._lock:
            try:
                names = self._names()
                missing = [c for c in (*_COLUMNS, "prev_hash", "hash") if c not in names]
                if missing:   # a damaged or foreign schema: no row can be read or checked
                    raise JournalError(f"journal {self.path}: not a seat-console journal (the "
                                       f"entries table lacks {', '.join(missing)}); keep it and "
                                       f"set ${ENV_STATE_DIR} to start a new one")
                return names, self._db.execute(q, args).fetchall()
            except sqlite3.Error as exc:
                raise JournalError(f"journal {self.path}: cannot read ({exc}); the file is "
                                   "damaged: keep it for the record and set "
                                   f"${ENV_STATE_DIR} to start a new one") from None


    def runs(self) -> dict[str, list[Entry]]:
        """Every run's rows, keyed by ``run_id``, in order of each run's first row."""
        out: dict[str, list[Entry]] = {}
        for e in self.entries():
            out.setdefault(e.run_id, []).append(e)
        return out

    def unfinished(self) -> list[list[Entry]]:
        """Runs with a ``start`` row and no ``end`` row (a console that died mid-runbook), oldest
        first; each is that run's rows."""
        return [rows for rows in self.runs().values()
                if any(r.kind == "start" for r in rows) and not any(r.kind == "end" for r in rows)]

    def verify(self) -> VerifyReport:
        """Recompute the hash chain; name every row that was edited, deleted or moved.

        Checks, per row in ``seq`` order: ``seq`` follows the previous one (a gap = deleted
        rows), ``prev_hash`` equals the previous row's ``hash``, and ``hash`` equals
        :func:`row_hash` of the row's own content; then the head record (:func:`read_head`):
        row ``rows`` must exist with that hash (rows cut from the end are named), and a
        non-empty journal must have one.
        """
        names, all_rows = self._read("SELECT * FROM entries ORDER BY seq")
        problems: list[str] = []
        bad: list[int] = []
        prev_hash, prev_seq, n = GENESIS, 0, 0
        for raw in all_rows:
            n += 1
            r = dict(zip(names, raw, strict=True))
            seq = r["seq"]
            if not isinstance(seq, int) or isinstance(seq, bool):   # a foreign schema's row
                problems.append(f"row {seq!r} (after row {prev_seq}): seq is not an integer "
                                "(edited)")
                bad.append(prev_seq + 1)
                continue
            if seq != prev_seq + 1:
                problems.append(f"row {prev_seq + 1}" + (f"–{seq - 1}" if seq - 1 > prev_seq + 1
                                                         else "")
                                + f" missing before row {seq} (deleted)")
                bad.append(seq)
            elif r["prev_hash"] != prev_hash:
                problems.append(f"row {seq}: prev_hash does not match row {prev_seq}'s hash "
                                "(a row before it was edited, deleted or reordered)")
                bad.append(seq)
            try:
                same = row_hash(r["prev_hash"], r) == r["hash"]
            except (TypeError, ValueError):   # a field edited to a blob or a number
                same = False
            if not same:
                what = " ".join(str(x)[:60] for x in (r["kind"], r["step"] or r["runbook"]))
                problems.append(f"row {seq} ({what}): content does not match its hash (edited)")
                bad.append(seq)
            else:
                try:
                    validate_row(r)
                except RowError as exc:   # hashed as written, yet no reader can take it
                    problems.append(f"{exc} (readers skip it)")
                    bad.append(seq)
            prev_hash, prev_seq = r["hash"], seq
        by_seq = {raw[names.index("seq")]: raw[names.index("hash")] for raw in all_rows}
        try:
            head = read_head(self.path)
        except ValueError as exc:
            head = None
            problems.append(str(exc))
            bad.append(prev_seq + 1)
        else:
            if head is None and n:
                problems.append(f"head record {head_path(self.path)} missing: the end of the "
                                f"chain cannot be checked (rows after row {prev_seq} may have "
                                "been deleted, or the head file was)")
                bad.append(prev_seq + 1)
        if head is not None:
            hrows, hhash = head
            if hrows > prev_seq:
                first = prev_seq + 1
                problems.append(f"row{'s' if hrows > first else ''} {first}"
                                + (f"–{hrows}" if hrows > first else "")
                                + f" missing after row {prev_seq} (deleted from the end; the "
                                  f"head record says {hrows} rows)")
                bad.append(first)
            elif hrows and by_seq.get(hrows) != hhash:
                problems.append(f"row {hrows}: hash does not match the head record (the end "
                                "of the chain was rewritten)")
                bad.append(hrows)
        return VerifyReport(ok=not problems, rows=n, problems=tuple(problems),
                            bad_seqs=tuple(dict.fromkeys(bad)))

    def __iter__(self) -> Iterator[Entry]:
        return iter(self.entries())


# -- read-only readers (another process's journal: the exporter) -----------------------------
def open_read_only(path: Path, *, text_factory: Any = "replace") -> sqlite3.Connection:
    """The journal file ``path`` opened read-only (SQLite URI ``mode=ro``: never created,
    never written; 5 s busy timeout). ``text_factory="replace"``: text that is not UTF-8 reads
    with U+FFFD for the bad bytes; ``None``: SQLite's default (such text raises). Raises
    :class:`sqlite3.Error` when it cannot be opened."""
    db = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True, timeout=5.0)
    if text_factory == "replace":
        db.text_factory = lambda b: b.decode("utf-8", "replace")
    return db


_UNFINISHED = """
SELECT e.run_id, e.runbook, e.step FROM entries e
JOIN (SELECT run_id, MAX(seq) AS last FROM entries GROUP BY run_id
      HAVING SUM(kind = 'start') > 0 AND SUM(kind = 'end') = 0) u
  ON e.run_id = u.run_id AND e.seq = u.last
ORDER BY e.seq
"""


def unfinished_heads(path: Path) -> list[tuple[str, str, str]]:
    """``(run_id, runbook, step)`` of every unfinished run of the journal at ``path`` (a
    ``start`` row, no ``end`` row), oldest first, with its newest row's step — in one query,
    the file opened read-only (:func:`open_read_only`). A journal that does not exist has no
    runs. Raises :class:`sqlite3.Error` when it cannot be read — also for a damaged file whose
    SQLite error message is not UTF-8 (Python raised ``UnicodeDecodeError`` building it, which
    escaped the reader: issue 31)."""
    if not path.exists():
        return []
    db = open_read_only(path)
    try:
        rows = db.execute(_UNFINISHED).fetchall()
    except UnicodeDecodeError:
        raise sqlite3.DatabaseError(f"{path}: damaged (SQLite's own error message is not "
                                    "UTF-8)") from None
    finally:
        db.close()
    return [(str(rid), str(rb), str(step)) for rid, rb, step in rows]


class ReadOnlyJournal:
    """The journal at ``path`` for :func:`~seat_console.actions.stages.read_runbook`, opened
    read-only (:func:`open_read_only`) at each :meth:`entries`: a reader (the exporter) never
    creates or writes it. A journal that does not exist has no rows."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.skipped: tuple[BadRow, ...] = ()
        """The rows the last :meth:`entries` skipped (:func:`~seat_console.actions.journal.
        validate_row`), each named by ``seq``, as :attr:`Journal.skipped`."""

    def entries(self) -> list[Entry]:
        """Every row in ``seq`` order, each read by the journal's own rule
        (:func:`~seat_console.actions.journal.validate_row`, the operator included); a row that
        does not read is skipped and named in :attr:`skipped`. Raises :class:`JournalError`
        naming the file when it cannot be read."""
        if not self.path.exists():
            return []
        try:
            db = open_read_only(self.path, text_factory=None)
            try:
                cur = db.execute("SELECT * FROM entries ORDER BY seq")
                names = [d[0] for d in cur.description]
                raw = cur.fetchall()
            finally:
                db.close()
        except sqlite3.Error as exc:
            raise JournalError(f"journal {self.path}: cannot read ({exc})") from None
        out, bad = [], []
        for r in raw:
            try:   # the journal's own row rule (validate_row): a bad row is skipped and named
                out.append(validate_row(dict(zip(names, r, strict=True))))
            except RowError as exc:
                bad.append(exc.bad)
        self.skipped = tuple(bad)
        return out



def _text_or_bytes(b: bytes) -> str | bytes:
    try:
        return b.decode("utf-8")
    except UnicodeDecodeError:
        return b


def _kind(v: Any) -> str:
    if isinstance(v, bytes):
        return "a BLOB (or text that is not UTF-8)"
    return "NULL" if v is None else f"an {type(v).__name__}" if isinstance(v, int) \
        else f"a {type(v).__name__}"


def validate_row(d: Mapping[str, Any]) -> Entry:
    """One raw row (column name → value as SQLite returned it) as an :class:`Entry`, checked as
    outside input: the file can be edited with the ``sqlite3`` shell, and SQLite keeps any
    value in any column (a BLOB, NULL or an integer where text belongs).

    Requires ``seq`` an integer ≥ 1; every text column (:data:`_TEXT_COLUMNS`) a string (a
    BLOB, NULL, a number or text that is not UTF-8 is refused); ``at`` an ISO 8601 time with
    a zone inside the calendar in UTC; ``inputs`` / ``facts`` JSON *objects* (``""`` reads as
    ``{}``, as rows before 2026-12 may hold) of at most :data:`MAX_JSON_CHARS` characters and
    :data:`MAX_JSON_DEPTH` levels, with finite numbers only; ``operator`` NULL (a row written
    before it was recorded) or a JSON object. Raises :class:`RowError` (a :class:`ValueError`)
    whose :class:`BadRow` names the ``seq`` and the column.
    """
    seq = d.get("seq")

    def bad(problem: str) -> RowError:
        return RowError(BadRow(seq, problem))

    if not isinstance(seq, int) or isinstance(seq, bool) or seq < 1:
        raise bad(f"seq is {type(seq).__name__} {str(seq)[:40]!r}, not a row number")
    for c in _TEXT_COLUMNS:
        v = d.get(c)
        if not isinstance(v, str):
            raise bad(f"{c} is {_kind(v)}, not text")
    try:
        at = parse_time(d["at"])
    except ValueError as exc:
        raise bad(f"at: {str(exc)[:100]}") from None
    objs: dict[str, dict[str, Any]] = {}
    for c in _JSON_COLUMNS:
        v = d.get(c)
        if not isinstance(v, str):
            raise bad(f"{c} is {_kind(v)}, not JSON text")
        try:
            o = load_json(v or "{}", c, max_bytes=MAX_JSON_CHARS * 4, max_depth=MAX_JSON_DEPTH)
        except InputError as exc:
            raise bad(str(exc)[:160]) from None
        if not isinstance(o, dict):
            raise bad(f"{c} is a JSON {type(o).__name__}, not an object")
        objs[c] = o
    return Entry(seq=seq, at=at, user=d["user"], host=d["host"],
                 profile_sha256=d["profile_sha256"], run_id=d["run_id"], runbook=d["runbook"],
                 kind=d["kind"], step=d["step"], inputs=objs["inputs"], outcome=d["outcome"],
                 output=d["output"], facts=objs["facts"], prev_hash=d["prev_hash"],
                 hash=d["hash"], operator=_operator(d.get(OPERATOR), bad))


def _operator(value: Any, bad: Any) -> dict[str, Any] | None:
    """The ``operator`` column decoded: ``None`` for ``NULL`` (a row written before it was
    recorded); a JSON object otherwise. Anything else is ``bad(reason)`` raised (the row is
    named by :func:`validate_row`'s caller, never a crash)."""
    if value is None:
        return None
    if not isinstance(value, str):
        raise bad(f"{OPERATOR} is {_kind(value)}, not JSON text")
    try:
        op = load_json(value, OPERATOR, max_bytes=MAX_JSON_CHARS * 4, max_depth=MAX_JSON_DEPTH)
    except InputError as exc:
        raise bad(str(exc)[:160]) from None
    if not isinstance(op, dict):
        raise bad(f"{OPERATOR} is a JSON {type(op).__name__}, not an object")
    return op


def _entry(d: Mapping[str, Any]) -> Entry:
    return validate_row(d)


def _user() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return f"uid {os.getuid()}"


__all__ = ["OPERATOR", "BadRow", "Entry", "GENESIS", "Journal", "JournalError", "MAX_JSON_DEPTH",
           "ReadOnlyJournal", "RowError", "VerifyReport", "head_path", "open_read_only", "parse_time",
           "read_head", "row_hash", "scrub", "unfinished_heads",
           "validate_row"]
