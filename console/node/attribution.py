"""Whose container change is this? The journal's answer, across processes.

A runbook step that changes a container declares it (:attr:`Step.acts_on
<seat_console.actions.runbook.Step.acts_on>`); the engine then writes the container names into
the ``facts`` of every journal row of that step (key :data:`ACTS_ON`: its ``begin`` row, written
*before* the step touches the node, its ``apply`` / ``verify`` / ``fail`` rows, and — for a run
that undoes — every row of the undo phase). The journal is shared by every console process on
one state dir, so a docker event watcher in the TUI can tell that ``seat-console swap --yes``
run in another shell stopped the resident: the event is the console's when a journaled step
acting on that container was **in flight** at the event's time, or began / ended within a small
window around it (:data:`BEFORE_S`, :data:`AFTER_S`: the journal's clock and the docker daemon's
may differ slightly, and the engine journals a step's end just after its last docker call).

Rule, per journaled run: its rows in ``seq`` order form *spans* — maximal runs of consecutive
rows whose ``facts[ACTS_ON]`` names the container. A span covers ``[first row − BEFORE_S,
last row + AFTER_S]``; when the span is the run's last rows and the run has no ``end`` row
(the step is running now), it covers up to now (but at most :data:`IN_FLIGHT_MAX_S` after its
last row, so a console killed mid-step does not claim the container forever). Among the runs
that cover the event, the one whose span began last is named (a swap nested in a compare leg is
named rather than the compare).

:class:`JournalAttributor` is the watcher's callback: it reads the journal file read-only (it
never creates or writes it: a ``--readonly`` console may use it).
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from seat_console.core.untrusted import InputError, load_json

ACTS_ON = "acts_on"
"""The ``facts`` key holding the container names a step acts on (a sorted list)."""

BEFORE_S = 5.0
"""An event up to this many seconds before a span's first row still counts (clock skew)."""

AFTER_S = 15.0
"""An event up to this many seconds after a span's last row still counts (the engine journals
a step's end just after its last docker call; the daemon may report the event a bit later)."""

IN_FLIGHT_MAX_S = 3600.0
"""A step still in flight (no later row, no ``end`` row) counts for at most this long after its
last row (s) — longer than any seat step waits (a resident start waits 15 min at most)."""


@dataclass(frozen=True)
class Row:
    """The columns of one journal row that attribution needs (``at``: aware UTC)."""

    seq: int
    at: datetime
    user: str
    host: str
    run_id: str
    runbook: str
    kind: str
    step: str
    acts_on: tuple[str, ...]


@dataclass(frozen=True)
class Attribution:
    """The journaled run that made a change: ``runbook``, ``run_id``, ``step``, ``seq`` (the
    journal row of the step nearest before the event), ``user`` / ``host`` (who ran it)."""

    runbook: str
    run_id: str
    step: str
    seq: int
    user: str
    host: str

    def label(self) -> str:
        """``swap run swap-…, step 'stop resident' (journal seq 12, alice@node1)``."""
        step = f", step '{self.step}'" if self.step else ""
        return (f"{self.runbook} run {self.run_id}{step} (journal seq {self.seq}, "
                f"{self.user}@{self.host})")


def attribute(rows: Sequence[Row], names: Collection[str], at: datetime, *,
              now: datetime | None = None, before_s: float = BEFORE_S,
              after_s: float = AFTER_S, in_flight_max_s: float = IN_FLIGHT_MAX_S
              ) -> Attribution | None:
    """The run whose step acted on a container in ``names`` (its name and/or ID) at ``at``
    (aware UTC), by the module's rule, or ``None``. ``rows``: journal rows (any order; several
    runs), ``now``: the present (default: the wall clock). Pure."""
    want = {n.lstrip("/") for n in names if n}
    if not want:
        return None
    now = now or datetime.now(UTC)
    runs: dict[str, list[Row]] = {}
    for r in sorted(rows, key=lambda r: r.seq):
        runs.setdefault(r.run_id, []).append(r)
    best: tuple[datetime, Attribution] | None = None
    for run in runs.values():
        ended = any(r.kind == "end" for r in run)
        i = 0
        while i < len(run):
            if not want.intersection(run[i].acts_on):
                i += 1
                continue
            j = i
            while j + 1 < len(run) and want.intersection(run[j + 1].acts_on):
                j += 1
            first, last = run[i], run[j]
            start = first.at - timedelta(seconds=before_s)
            end = last.at + timedelta(seconds=after_s)
            if j == len(run) - 1 and not ended:
                end = max(end, min(now, last.at + timedelta(seconds=in_flight_max_s)))
            if start <= at <= end:
                near = next((r for r in reversed(run[i:j + 1]) if r.at <= at), first)
                a = Attribution(runbook=near.runbook, run_id=near.run_id, step=near.step,
                                seq=near.seq, user=near.user, host=near.host)
                if best is None or first.at > best[0]:
                    best = (first.at, a)
            i = j + 1
    return best[1] if best else None


def _acts_on(facts_json: Any) -> tuple[str, ...]:
    """The ``acts_on`` names of a row's ``facts`` column as stored (outside input: the file can
    be edited): ``()`` for anything but a JSON object text (a BLOB, NULL, a list, nesting past
    the limit: :func:`~seat_console.core.untrusted.load_json`, where ``json.loads`` raised
    :class:`RecursionError`, issue 31)."""
    if not isinstance(facts_json, str) or ACTS_ON not in facts_json:   # cheap pre-check: most
        return ()                                                    # rows name no container
    try:
        doc = load_json(facts_json, "facts", max_depth=32)
    except InputError:
        return ()
    v = doc.get(ACTS_ON) if isinstance(doc, dict) else None
    return tuple(x for x in v if isinstance(x, str)) if isinstance(v, list) else ()


def _text_or_bytes(b: bytes) -> str | bytes:
    try:
        return b.decode("utf-8")
    except UnicodeDecodeError:
        return b


def _iso(t: datetime) -> str:
    return t.astimezone(UTC).isoformat(timespec="microseconds").replace("+00:00", "Z")


class JournalAttributor:
    """The :data:`~seat_console.node.docker.Attribute` callback over the journal at
    ``path`` (default: :func:`~seat_console.core.paths.journal_path`, read when first
    called): ``attributor(event) -> label | None``. Opens the file read-only, per thread;
    a missing or unreadable journal attributes nothing. ``clock``: the present (tests)."""

    def __init__(self, path: str | Path | None = None, *, clock: Any = None) -> None:
        self._path = Path(path) if path is not None else None
        self._clock = clock or (lambda: datetime.now(UTC))
        self._local = threading.local()

    @property
    def path(self) -> Path:
        """The journal file read."""
        if self._path is None:
            from seat_console.core.paths import journal_path

            self._path = journal_path()
        return self._path

    def _db(self) -> sqlite3.Connection | None:
        db = getattr(self._local, "db", None)
        if db is None:
            if not self.path.exists():
                return None
            db = sqlite3.connect(f"file:{self.path}?mode=ro", uri=True, timeout=5.0,
                                 check_same_thread=False)
            # an edited row's text that is not UTF-8 reads as bytes (skipped below), instead
            # of failing the whole read
            db.text_factory = _text_or_bytes
            self._local.db = db
        return db

    def rows(self, since: datetime) -> list[Row]:
        """Journal rows at or after ``since`` (aware UTC), ``[]`` when the journal cannot be
        read."""
        try:
            db = self._db()
            if db is None:
                return []
            raw = db.execute("SELECT seq, at, user, host, run_id, runbook, kind, step, facts "
                             "FROM entries WHERE at >= ? ORDER BY seq", (_iso(since),)).fetchall()
        except sqlite3.Error:
            self.close()
            return []
        out = []
        for seq, at, user, host, run_id, runbook, kind, step, facts in raw:
            if not (isinstance(seq, int) and isinstance(at, str) and all(
                    isinstance(x, str) for x in (user, host, run_id, runbook, kind, step))):
                continue   # an edited row (a BLOB, NULL, a number): not a row to attribute to
            try:
                t = datetime.fromisoformat(at.replace("Z", "+00:00"))
                if t.tzinfo is None:
                    continue
                t = t.astimezone(UTC)
            except (ValueError, OverflowError):
                continue
            out.append(Row(seq=seq, at=t, user=user, host=host, run_id=run_id,
                           runbook=runbook, kind=kind, step=step, acts_on=_acts_on(facts)))
        return out

    def attribution(self, names: Collection[str], at: datetime) -> Attribution | None:
        """:func:`attribute` over the journal rows of the last :data:`IN_FLIGHT_MAX_S` before
        ``at``."""
        rows = self.rows(at - timedelta(seconds=IN_FLIGHT_MAX_S + BEFORE_S))
        return attribute(rows, names, at, now=self._clock())

    def __call__(self, event: Any) -> str | None:
        """The label of the journaled run that made ``event`` (a
        :class:`~seat_console.node.docker.ContainerEvent`), or ``None``."""
        a = self.attribution([n for n in (event.actor_name, event.actor_id) if n], event.at)
        return a.label() if a is not None else None

    def close(self) -> None:
        """Close this thread's connection (others close when their thread ends)."""
        db = getattr(self._local, "db", None)
        if db is not None:
            self._local.db = None
            try:
                db.close()
            except sqlite3.Error:
                pass


__all__ = ["ACTS_ON", "AFTER_S", "Attribution", "BEFORE_S", "IN_FLIGHT_MAX_S",
           "JournalAttributor", "Row", "attribute"]
