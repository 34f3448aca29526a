"""The action log: the journal's newest rows, the hold in effect, unfinished runs, and
interference while a hold is active (source ``actions``).

Reads the journal (SQLite, a read in the poll worker — never on the UI thread) and, for
interference, the app's newest timers and silences readings (no extra node I/O): a timer the
hold stopped that is active again before the lease elapsed, or the hold's silence expired by
someone else (:func:`seat_console.actions.hold.interference`). Each new interference notice is
journaled once (kind ``interference``) and shown in the panel. A release or extend of the hold
in flight or just ended (:func:`seat_console.actions.hold.own_change`) is the console's own
change: no notice. A ``readonly`` source (the app sets it under ``--readonly``) shows notices
but never writes the journal.
"""

from __future__ import annotations

import re
import time
from datetime import UTC, datetime
from typing import Any

from pydantic import BaseModel

from seat_console.core.profile import LoadedProfile
from seat_console.core.base import Frozen, Source, Unavailable, utcnow

RECENT_ROWS = 12
"""Journal rows shown in the panel (newest last)."""
FOREIGN_EVERY_S = 10.0
"""How often (seconds) the poll worker lists the node's hold leases for one armed by another
console (two ``systemctl`` calls through the transport; the journal is read every poll)."""
_LEASE_AT_RE = re.compile(r"^seat-hold-(\d{8}t\d{6}z)-")


def foreign_hold(t: Any, now: datetime) -> HoldInfo:
    """A :class:`HoldInfo` for lease timer ``t`` (a :class:`~seat_console.sources.timers.
    TimerState` of ``seat-hold-<YYYYmmddtHHMMSSz>-<hex>-lease.timer``, armed on the node by
    another console): state ``active``, ``expires_at`` its next elapse (UTC), ``ttl_s`` from
    the time in its name (:func:`seat_console.actions.hold.new_hold_id`) to the elapse, and
    ``banner`` "hold by another console until 13:41:30Z (lease seat-hold-…-lease.timer)"."""
    from seat_console.actions.hold import zulu

    m = _LEASE_AT_RE.match(t.unit)
    ttl = None
    if m and t.next_elapse is not None:
        placed = datetime.strptime(m.group(1), "%Y%m%dt%H%M%Sz").replace(tzinfo=UTC)
        ttl = (t.next_elapse - placed).total_seconds()
    until = t.next_elapse or now
    hid = t.unit.removesuffix(".timer").removesuffix("-lease")
    return HoldInfo(hold_id=hid, state="active", expires_at=until, lease_unit=t.unit,
                    silence_id=None, stopped=(), placed_by="another console", reason="",
                    banner=f"hold by another console until {zulu(until, ttl)} "
                           f"(lease {t.unit})", ttl_s=ttl, foreign=True)


class LogRow(Frozen):
    """One journal row as the panel shows it: ``seq``, ``at`` (UTC), ``who`` (user@host),
    ``runbook``, ``kind``, ``step``, ``outcome``."""

    seq: int
    at: datetime
    who: str
    runbook: str
    kind: str
    step: str
    outcome: str


class HoldInfo(Frozen):
    """The hold in effect: ``hold_id``, ``state`` (``active`` / ``lapsed`` / ``unfinished`` /
    ``release-partial``), ``expires_at`` (UTC), ``lease_unit``, ``silence_id``, ``stopped``
    timers, ``placed_by``, ``reason``, and ``banner`` ("held by the console until 12:41Z (lease
    …)") for the timer and silence panels; ``ttl_s``: the hold's lifetime (s; under an hour its
    end is shown to the second)."""

    hold_id: str
    state: str
    expires_at: datetime
    lease_unit: str
    silence_id: str | None
    stopped: tuple[str, ...]
    placed_by: str
    reason: str
    banner: str
    ttl_s: float | None = None
    foreign: bool = False
    """``True``: a hold lease armed on the node by another console (another state dir: not in
    this journal), read from the node's lease timer units (:func:`seat_console.actions.
    node_ops.node_leases`); ``expires_at`` is the lease's next elapse, ``silence_id`` unknown."""


class ActionLogReading(Frozen):
    """What the action-log panel shows: the journal ``path``, the ``hold`` in effect (or
    ``None``), ``unfinished`` runs that no process runs any more (one sentence each, the fix
    ``seat-console recover``), ``in_progress`` runs whose console still runs them on this host
    (one sentence each: nothing to do), ``interference`` notices of the hold in effect, the
    ``recent`` rows, ``read_at`` (UTC)."""

    path: str
    read_at: datetime
    hold: HoldInfo | None = None
    unfinished: tuple[str, ...] = ()
    in_progress: tuple[str, ...] = ()
    interference: tuple[str, ...] = ()
    recent: tuple[LogRow, ...] = ()


def unfinished_words(runbook: str, run_id: str, who: str,
                     runner: Any) -> tuple[bool, str]:
    """``(in progress, sentence)`` for a run with a ``start`` row and no ``end`` row. Its
    runner (the run's ``facts["runner"]``: pid, host, boot) is asked at every read, since a
    console can die without a journal write: still running on this host
    (:func:`~seat_console.actions.runner_id.runner_alive`) the run is in progress and nothing
    is to be done; else (ended, another host, or not recorded) the fix is ``seat-console
    recover`` (which itself refuses a run whose runner still runs)."""
    from seat_console.actions.runner_id import runner_alive

    if runner_alive(runner):
        pid = runner.get("pid") if isinstance(runner, dict) else None
        return True, f"{runbook} run {run_id} by {who} in progress (pid {pid} on this host)"
    return False, f"unfinished {runbook} run {run_id} by {who}: run `seat-console recover`"


class ActionLogSource(Source):
    """Reads the journal (and the app's latest timers / silences readings) for the panel.

    ``readings``: the app's :class:`~seat_console.tui.app.LatestReadings` (``None``: no
    interference check); ``journal_path``: default the journal's usual place; ``readonly``:
    never write the journal (notices are shown, not journaled).
    """

    name = "actions"

    def __init__(self, readings: Any | None = None, journal_path: str | None = None,
                 readonly: bool = False, context: Any | None = None) -> None:
        self.readings = readings
        self.context = context
        """The app's :class:`~seat_console.node.context.NodeContext` (``None``: no look at the
        node, so no foreign hold shown)."""
        self._foreign: tuple[float, Any] | None = None   # (monotonic read time, leases)
        self.foreign_error: str | None = None
        self.readonly = readonly
        self._path = journal_path
        self._journal: Any = None
        self._flagged: set[str] = set()
        self._cache: tuple[int, Any, tuple[Any, ...], tuple[LogRow, ...]] | None = None
        self.journal_reads = 0
        """How many reads queried the journal's rows (the others found it unchanged)."""

    def _open(self) -> Any:
        from seat_console.actions.journal import Journal
        from seat_console.core.paths import journal_path

        if self._journal is None:
            self._journal = Journal(self._path or journal_path())
        return self._journal

    def read(self) -> BaseModel:
        """One :class:`ActionLogReading`, or :class:`Unavailable` (the journal cannot be
        opened); never raises."""
        from seat_console.actions.journal import JournalError

        try:
            j = self._open()
            now = utcnow()
            h, unfinished, in_progress, recent = self._journal_rows(j)
            info = None
            notes: list[str] = []
            if h is not None:
                state = "lapsed" if h.state == "active" and h.lapsed(now) else h.state
                info = HoldInfo(hold_id=h.hold_id, state=state, expires_at=h.expires_at,
                                lease_unit=h.lease_unit, silence_id=h.silence_id,
                                stopped=h.stopped, placed_by=h.placed_by, reason=h.reason,
                                banner=h.banner(), ttl_s=h.ttl_s)
                notes = self._interference(j, h, now)
            else:
                leases = self._foreign_leases()
                if leases:
                    info = foreign_hold(leases[0], now)
            return ActionLogReading(path=str(j.path), read_at=now, hold=info,
                                    unfinished=unfinished, in_progress=in_progress,
                                    interference=tuple(notes),
                                    recent=recent)
        except JournalError as exc:
            self._cache = None
            return Unavailable(source=self.name, kind="error", reason=str(exc))
        except Exception as exc:  # noqa: BLE001 - a source never raises into the UI
            self._cache = None
            return Unavailable(source=self.name, kind="error",
                               reason=f"{type(exc).__name__}: {exc}")

    def _journal_rows(self, j: Any) -> tuple[Any, tuple[str, ...], tuple[str, ...],
                                             tuple[LogRow, ...]]:
        """The current hold, the sentences of the unfinished runs no process runs and of those
        in progress (:func:`unfinished_words`, asked at every read), and the recent rows — the
        rows queried only when the journal changed since the last read, else the last ones
        again.

        Change test: SQLite's ``PRAGMA data_version``, which changes when another connection
        commits to the database (https://sqlite.org/pragma.html#pragma_data_version); this
        connection's own writes (an interference notice) drop the cache instead. One query per
        read, no row read while nothing changed (the journal is otherwise read every second).
        """
        from seat_console.actions import hold as hold_mod

        version = j.data_version()
        if self._cache is None or self._cache[0] != version:
            from seat_console.actions.runbook import facts_from_rows
            from seat_console.actions.runner_id import RUNNER

            self.journal_reads += 1
            h = hold_mod.current_hold(j)
            runs = tuple((rows[0].runbook, rows[0].run_id, f"{rows[0].user}@{rows[0].host}",
                          facts_from_rows(rows).get(RUNNER)) for rows in j.unfinished())
            rows = j.entries()[-RECENT_ROWS:]
            recent = tuple(LogRow(seq=r.seq, at=r.at, who=f"{r.user}@{r.host}",
                                  runbook=r.runbook, kind=r.kind, step=r.step,
                                  outcome=r.outcome) for r in rows)
            self._cache = (version, h, runs, recent)
        _v, h, runs, recent = self._cache
        words = [unfinished_words(*run) for run in runs]
        return (h, tuple(w for live, w in words if not live), tuple(w for live, w in words if live),
                recent)

    def _foreign_leases(self) -> list[Any]:
        """The hold leases armed on the node (by another console: this journal has no hold),
        read at most every :data:`FOREIGN_EVERY_S` seconds, in the poll worker; the last good
        list while a read fails (``foreign_error`` says why), ``[]`` without a context."""
        from seat_console.actions import node_ops
        from seat_console.node.transport import TransportError

        if self.context is None:
            return []
        mono = time.monotonic()
        if self._foreign is not None and mono - self._foreign[0] < FOREIGN_EVERY_S:
            return self._foreign[1]
        last = self._foreign[1] if self._foreign is not None else []
        try:
            leases = node_ops.node_leases(self.context.transport)
            self.foreign_error = None
        except (node_ops.LeaseError, TransportError) as exc:
            leases, self.foreign_error = last, str(exc)
        self._foreign = (mono, leases)
        return leases

    def _interference(self, j: Any, h: Any, now: datetime) -> list[str]:
        """The interference notices for hold ``h``; each new one is journaled once."""
        from seat_console.actions import hold as hold_mod
        from seat_console.sources.silences import SilencesReading
        from seat_console.sources.timers import TimersReading

        if self.readings is None or not h.is_active(now):
            return []
        if hold_mod.own_change(j, h, now) is not None:
            return []
        timers = self.readings.get("timers")
        sils = self.readings.get("silences")
        # the journal is consulted (when the hold's stop of each timer was verified, and any
        # console's journaled step acting on it), so a reading older than the stop is not
        # taken for a breach; each change event is journaled once, whoever sees it first
        found = hold_mod.observe(
            j, h, timers if isinstance(timers, TimersReading) else None,
            sils.silences if isinstance(sils, SilencesReading) else None, now)
        new = [b for b in found if b.key not in self._flagged]
        hold_mod.record_breaches(j, h, new, readonly=self.readonly)   # once, whoever first
        if new and not self.readonly:
            self._cache = None   # our own write: data_version does not see it
        self._flagged.update(b.key for b in new)
        return [b.text for b in found]

    def close(self) -> None:
        """Close the journal connection."""
        if self._journal is not None:
            self._journal.close()
            self._journal = None
            self._cache = None


def make_source(loaded: LoadedProfile, readings: Any | None = None,
                context: Any | None = None) -> Source:
    """The action-log source (the journal is the same for every profile; ``readings`` enables
    the interference check; ``context``, the app's NodeContext, the look at the node's hold
    leases for one placed by another console)."""
    return ActionLogSource(readings, context=context)


__all__ = ["ActionLogReading", "ActionLogSource", "HoldInfo", "LogRow", "foreign_hold", "make_source"]
