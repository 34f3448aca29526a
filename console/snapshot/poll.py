"""The one poll engine of the node's live picture: every front reads its sources through it.

* **Intervals and back-off** — one rule, :func:`next_delay`: a source is read every interval,
  and after unavailable readings no more often than ``min(max(interval × 2^errors, 2), 10)``
  (never more often than a good one); polls due within a second of each other are moved onto
  one grid (:func:`aligned_when`) so that they wake their front together.
* **Last good, stale** — one bookkeeping class, :class:`SourceState`: the newest reading, the
  last good one and its time, the read in flight (``busy_since``), the errors in a row; and
  one view of it for a reader, :class:`SourceView` (up or down, the last good value, why).
* **A hung source stales only itself** — each source is read in a daemon thread of its own,
  reused for every read (:class:`Poller`): a read hung on a dead mount or a wedged driver
  holds only that thread, is reported down once it has been in flight past its timeout, and
  never keeps the process alive at exit (a daemon is abandoned, not joined).

The fronts differ only in who schedules the next read and what they do with a result: the TUI
submits reads from its event loop (:meth:`Poller.submit`, the next one scheduled when the last
finished) and turns each result into a message; the exporter lets each :class:`Poller` (or a
:class:`PollerGroup`: several sources in one read) run its own loop (:meth:`Poller.start`) and a
scrape reads :meth:`Poller.state`; ``status`` reads every source once
(:mod:`seat_console.snapshot.reading`). No Textual, no Rich.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Self

from pydantic import BaseModel

from seat_console.core.base import Source, Unavailable

log = logging.getLogger(__name__)

BACKOFF_MIN_S = 2.0
"""Shortest wait in seconds before polling a source again after an unavailable reading."""

BACKOFF_MAX_S = 10.0
"""Longest wait in seconds between polls of a failing source (unless the interval is longer):
a source that recovered is seen within 10 s."""

ALIGN_GRID_S = 1.0
"""Polls due in at least this many seconds are moved to the nearest multiple of it on the
monotonic clock (by at most half of it), so that sources polled every second, back-off retries
and a front's age tick wake together, once a second, instead of each on its own phase."""

TIME_FIELDS = frozenset({"read_at", "sampled_at"})
"""Fields of a reading that say when it was taken; ignored by :func:`same_reading`."""


def next_delay(interval_s: float, consecutive_errors: int) -> float:
    """Seconds to wait before the next poll of a source — the one back-off rule.

    ``interval_s``: the refresh interval (s). ``consecutive_errors``: how many readings in a row
    were unavailable. No errors → ``interval_s``. Otherwise exponential back-off from the
    interval, clamped to [:data:`BACKOFF_MIN_S`, :data:`BACKOFF_MAX_S`] and never shorter than
    the interval: ``max(interval, min(max(interval × 2^errors, 2), 10))`` — at 1 s: 2, 4, 8,
    10, 10… (the rule of ``../shared/STYLE.md``, capped at 10 s so a recovered source is seen
    within 10 s); at 15 s: 15 (a slow source is never read more often when it fails).
    """
    if consecutive_errors <= 0:
        return interval_s
    grown = interval_s * (2.0 ** min(consecutive_errors, 16))
    return max(interval_s, min(max(grown, BACKOFF_MIN_S), BACKOFF_MAX_S))


def aligned_when(now: float, delay_s: float, grid_s: float = ALIGN_GRID_S) -> float:
    """The monotonic time for something due ``delay_s`` seconds after ``now``: the nearest
    multiple of ``grid_s`` to ``now + delay_s`` when ``delay_s >= grid_s`` (so never more than
    ``grid_s / 2`` early or late, and never before ``now + delay_s / 2``), else exactly
    ``now + delay_s``. Seconds in, seconds out."""
    if grid_s <= 0 or not delay_s >= grid_s:
        return now + delay_s
    return max(round((now + delay_s) / grid_s) * grid_s, now + delay_s / 2)


def same_reading(a: BaseModel | None, b: BaseModel | None) -> bool:
    """Whether two readings show the same thing: same type and equal fields, ignoring
    :data:`TIME_FIELDS` (when they were taken). Two :class:`Unavailable` readings are the same
    when kind and reason are. ``None`` is never the same as anything."""
    if a is None or b is None or type(a) is not type(b):
        return False
    if isinstance(a, Unavailable):
        return (a.kind, a.reason) == (b.kind, b.reason)  # type: ignore[attr-defined]
    da, db = a.__dict__, b.__dict__
    return all(k in TIME_FIELDS or da[k] == db.get(k) for k in da) and da.keys() == db.keys()


def is_good(value: Any) -> bool:
    """A reading is good unless it is an :class:`~seat_console.core.base.Unavailable` (or
    ``None``: no reading)."""
    return value is not None and not isinstance(value, Unavailable)


def read_guarded(source: Source) -> BaseModel:
    """Call ``source.read()`` and turn anything but a model into :class:`Unavailable`.

    Sources must not raise, but a bug in one must not reach a front: an exception becomes
    ``Unavailable(kind="error")`` naming the exception type and message; a non-model return
    value becomes ``Unavailable(kind="error")`` naming its type. Runs in a poll thread.
    """
    name = getattr(source, "name", type(source).__name__)
    try:
        reading = source.read()
    except Exception as exc:
        log.warning("source %s raised", name, exc_info=True)
        return Unavailable(source=name, kind="error",
                           reason=f"read() raised {type(exc).__name__}: {exc}")
    if not isinstance(reading, BaseModel):
        return Unavailable(source=name, kind="error",
                           reason=f"read() returned {type(reading).__name__}, not a model")
    return reading


@dataclass(frozen=True)
class SourceView:
    """One source as a reader sees it (a scrape, ``status``).

    ``name``: the source; ``up``: the newest finished read was good and no read has been in
    flight past its timeout; ``value``: the last good reading (``None`` before any);
    ``last_good_at``: unix seconds of that reading's end (``None`` before any); ``reason``: why
    it is down (``None`` when up).
    """

    name: str
    up: bool
    value: Any
    last_good_at: float | None
    reason: str | None = None


@dataclass
class SourceState:
    """What the engine keeps per source — the one bookkeeping of every front.

    ``key``: the source. ``reading`` / ``reading_at``: the newest reading and when it finished;
    ``last_good`` / ``last_good_at``: the newest good one (never an :class:`Unavailable`);
    ``busy_since``: set while a read is in flight; ``consecutive_errors``: unavailable readings
    in a row (drives :func:`next_delay`; a read asked for by hand does not count); ``polls``:
    finished reads; ``delay_s``: the wait scheduled after the last read. Times are whatever
    clock the owner passes (the TUI: UTC datetimes; the exporter: unix seconds). The owner
    serialises access (the TUI: its UI thread; :class:`Poller`: a lock).
    """

    key: str
    reading: Any = None
    reading_at: Any = None
    last_good: Any = None
    last_good_at: Any = None
    busy_since: Any = None
    consecutive_errors: int = 0
    polls: int = 0
    delay_s: float = 0.0
    manual: bool = False
    """The poll in flight was asked for by hand (its failure does not count)."""

    def begin(self, now: Any, manual: bool = False) -> None:
        """A read starts at ``now``."""
        self.busy_since = now
        self.manual = manual

    def finish(self, reading: Any, now: Any) -> bool:
        """The read in flight ended at ``now`` with ``reading`` (a model, an
        :class:`Unavailable`, or ``None`` for a read that failed outside the source); returns
        whether it was good. A good one becomes the last good; an unavailable one counts an
        error unless the read was asked for by hand."""
        manual, self.manual = self.manual, False
        self.busy_since = None
        self.polls += 1
        self.reading, self.reading_at = reading, now
        if is_good(reading):
            self.consecutive_errors = 0
            self.last_good, self.last_good_at = reading, now
            return True
        if not manual:
            self.consecutive_errors += 1
        return False

    def next_delay(self, interval_s: float) -> float:
        """The wait before the next read (:func:`next_delay`), kept in :attr:`delay_s`."""
        self.delay_s = next_delay(interval_s, self.consecutive_errors)
        return self.delay_s


def _unix(t: Any) -> float | None:
    if t is None:
        return None
    return t.timestamp() if isinstance(t, datetime) else float(t)


def view(st: SourceState, now: float, timeout_s: float, reason: str | None = None
         ) -> SourceView:
    """The :class:`SourceView` of ``st`` at ``now`` (unix seconds; ``st``'s times unix
    seconds or UTC datetimes): down while a read has been in flight longer than ``timeout_s``
    (a hung source: the reader does not wait for it), after a read that was not good
    (``reason``, else the reading's own words), or before any read finished."""
    busy = _unix(st.busy_since)
    last_good_at = _unix(st.last_good_at)
    if busy is not None and now - busy > timeout_s:
        return SourceView(st.key, False, st.last_good, last_good_at,
                          f"a read has been in flight for {now - busy:.0f} s "
                          f"(timeout {timeout_s:g} s)")
    if st.polls == 0:
        return SourceView(st.key, False, None, None, reason or "no reading yet")
    if is_good(st.reading):
        return SourceView(st.key, True, st.last_good, last_good_at, None)
    return SourceView(st.key, False, st.last_good, last_good_at,
                      reason or str(st.reading) if st.reading is not None else reason)


class Poller:
    """One source's daemon thread, reused for every read of it for the process's life.

    Two ways to drive it, one thread either way:

    * :meth:`submit` — the owner schedules (the TUI, from its event loop): ``fn`` (a read that
      hands its own result on) is queued and run on this thread; an exception escaping ``fn``
      is logged and the thread goes on.
    * :meth:`start` — the poller schedules itself (the exporter): ``read`` every interval,
      backing off by :func:`next_delay` after reads that are not good, and :meth:`state` gives
      a reader the :class:`SourceView` without blocking on I/O.

    ``name``: the source; ``read``: blocking, returns a reading (or an :class:`Unavailable`;
    an exception counts as a failed read, its type and message the reason); ``interval_s``,
    ``timeout_s``: seconds (how long a read may be in flight before the source is down);
    ``close``: called once when a started loop ends; ``clock``: unix seconds (tests pass a
    fake). Raises :class:`ValueError` for a non-positive interval or timeout.
    """

    def __init__(self, name: str, read: Callable[[], Any] | None = None, *,
                 interval_s: float = 1.0, timeout_s: float = 11.0,
                 close: Callable[[], None] | None = None,
                 clock: Callable[[], float] = time.time) -> None:
        if not interval_s > 0 or not timeout_s > 0:
            raise ValueError(f"source {name}: interval {interval_s!r} s and timeout "
                             f"{timeout_s!r} s must be positive")
        self.name = name
        self.interval_s = float(interval_s)
        self.timeout_s = float(timeout_s)
        self._read = read
        self._close = close
        self._clock = clock
        self._lock = threading.Lock()
        self._st = SourceState(name)
        self._reason: str | None = "no reading yet"
        self._stop = threading.Event()
        self._queue: queue.SimpleQueue[Callable[[], None] | None] | None = None
        self._thread: threading.Thread | None = None

    @property
    def reads(self) -> int:
        """Reads finished so far (tests and the benchmarks count them)."""
        return self._st.polls

    # -- driven by the owner ----------------------------------------------------------------
    def submit(self, fn: Callable[[], None]) -> None:
        """Queue ``fn`` to run on this source's thread (started on the first submit)."""
        if self._queue is None:
            self._queue = queue.SimpleQueue()
            self._thread = threading.Thread(target=self._run_queue, name=self.name,
                                            daemon=True)
            self._thread.start()
        self._queue.put(fn)

    def retire(self) -> None:
        """End this source's queue thread once what was submitted before has run: an idle
        thread ends at once, one in a read when the read returns (a hung read stays hung;
        the process does not wait for it). The TUI retires every source when it quits: each
        idle thread used to stay alive, and the exit waited its whole 2 s grace for them
        (``first_frame.end_process``; the trial's "q takes 2-3 s"). Submitting after this
        starts a new thread."""
        q = self._queue
        if q is not None:
            self._queue = self._thread = None
            q.put(None)

    def _run_queue(self) -> None:
        q = self._queue
        assert q is not None
        while True:
            fn = q.get()
            if fn is None:   # retired
                return
            try:
                fn()
            except BaseException:  # noqa: BLE001 - logged; the next read still runs
                log.exception("poll on %s failed", self.name)

    # -- self-scheduled ---------------------------------------------------------------------
    def read_now(self) -> None:
        """One read, in the caller's thread, recorded as the loop's reads are."""
        self._begin()
        try:
            value = self._read() if self._read is not None else None
        except Exception as exc:  # noqa: BLE001 - a failed read is a down source, not a crash
            self._record(None, f"{type(exc).__name__}: {exc}")
            return
        self._record(value)

    def _begin(self) -> None:
        with self._lock:
            self._st.begin(self._clock())

    def _record(self, value: Any, failure: str | None = None) -> None:
        """Record the end of a read: ``value`` (good unless an ``Unavailable``), or the read
        raised (``failure``: its type and message)."""
        end = self._clock()
        with self._lock:
            good = self._st.finish(value if failure is None else None, end)
            self._reason = None if good else (failure if failure is not None else str(value))

    def state(self) -> SourceView:
        """The source now (:func:`view`); never blocks on I/O."""
        now = self._clock()
        with self._lock:
            return view(self._st, now, self.timeout_s, self._reason)

    def next_wait_s(self) -> float:
        """Seconds from one read's start to the next: :func:`next_delay` of the errors so far."""
        with self._lock:
            return self._st.next_delay(self.interval_s)

    def start(self) -> Self:
        """Start the self-scheduled loop in a daemon thread; returns ``self``."""
        if self._thread is None:
            self._thread = threading.Thread(target=_loop, args=(self,),
                                            name=f"poll-{self.name}", daemon=True)
            self._thread.start()
        return self

    def stop(self, join_s: float = 2.0) -> None:
        """Ask the loop to end after its current read; wait up to ``join_s`` s for it."""
        self._stop.set()
        if self._thread is not None and self._queue is None:
            self._thread.join(join_s)


def _loop(p: Poller | PollerGroup) -> None:
    """A self-scheduled poller's body: ``read_now``, then wait :meth:`next_wait_s` from the
    read's start (on the :func:`aligned_when` grid), until stopped; then ``close``."""
    try:
        while not p._stop.is_set():
            t0 = time.monotonic()
            p.read_now()
            due = aligned_when(t0, p.next_wait_s())
            p._stop.wait(max(0.0, due - time.monotonic()))
    finally:
        if p._close is not None:
            try:
                p._close()
            except Exception:  # noqa: BLE001 - closing must not raise out of a thread
                log.warning("closing source %s failed", p.name, exc_info=True)


class PollerGroup:
    """Several sources read by **one** call, in one daemon thread (:meth:`start`): e.g. the
    node's timers and hold leases in one ``systemctl show``, so one ``docker exec`` / ``ssh``
    per interval instead of one per source.

    ``read``: blocking, returns ``{source name: reading}`` for ``names`` (each reading good, or
    an :class:`Unavailable` that downs that source only; a name missing from the mapping is a
    failed read of that source); an exception downs every source of the group. :attr:`parts`
    holds one :class:`Poller` per name, whose :meth:`Poller.state` a reader reads as any
    poller's. ``interval_s``, ``timeout_s``, ``close``, ``clock``: as :class:`Poller`'s; the
    group backs off by its worst part. Raises :class:`ValueError` as :class:`Poller` does, or
    for no names.
    """

    def __init__(self, names: tuple[str, ...], read: Callable[[], Any], *, interval_s: float,
                 timeout_s: float, close: Callable[[], None] | None = None,
                 clock: Callable[[], float] = time.time) -> None:
        if not names:
            raise ValueError("a poller group needs at least one source")
        self.name = "+".join(names)
        self.parts: dict[str, Poller] = {
            n: Poller(n, None, interval_s=interval_s, timeout_s=timeout_s, clock=clock)
            for n in names}
        self.interval_s = float(interval_s)
        self._read = read
        self._close = close
        self._stop = threading.Event()
        self._queue = None   # never owner-driven: stop() joins the loop's thread
        self._thread: threading.Thread | None = None

    def read_now(self) -> None:
        """One read of every part, in the caller's thread."""
        for p in self.parts.values():
            p._begin()
        try:
            values = self._read()
            if not isinstance(values, dict):
                raise TypeError(f"source group {self.name}: read returned "
                                f"{type(values).__name__}, not a dict")
        except Exception as exc:  # noqa: BLE001 - a failed read is a down source, not a crash
            for p in self.parts.values():
                p._record(None, f"{type(exc).__name__}: {exc}")
            return
        for n, p in self.parts.items():
            if n in values:
                p._record(values[n])
            else:
                p._record(None, f"source group {self.name}: the read gave no {n} value")

    def next_wait_s(self) -> float:
        """The longest :meth:`Poller.next_wait_s` of the parts."""
        return max(p.next_wait_s() for p in self.parts.values())

    start = Poller.start
    stop = Poller.stop


__all__ = ["ALIGN_GRID_S", "BACKOFF_MAX_S", "BACKOFF_MIN_S", "Poller", "PollerGroup",
           "SourceState", "SourceView", "TIME_FIELDS", "aligned_when", "is_good",
           "next_delay", "read_guarded", "same_reading", "view"]
