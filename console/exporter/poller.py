"""Each source read in a background thread on its own interval; a scrape reads the cache only.

A :class:`Poller` calls its ``read`` function every ``interval_s`` seconds in a daemon thread and
keeps the newest result. :meth:`Poller.state` (called by a scrape, never blocking on I/O) says
whether the source is up and returns the **last good** value with its time:

* up — the newest finished read was good (not :class:`~seat_console.sources.Unavailable`, no
  exception) and no read has been in flight for longer than ``timeout_s``;
* down — the newest read failed, or the one in flight has run past ``timeout_s`` (a hung
  source: the scrape does not wait for it), or no read has finished yet.

The value served while a source is down is its last good one (``None`` before any), and the
last good time is kept, so ``seat_source_last_good_timestamp_seconds`` shows how old it is.

A :class:`PollerGroup` reads several sources with one call in one thread (the node's timers and
hold leases: one ``systemctl show``); each of its sources still has its own :class:`Poller`
state, so one bad part never downs the others.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Self

from seat_console.core.base import Unavailable

log = logging.getLogger("seat_console.exporter")


@dataclass(frozen=True)
class SourceState:
    """One source as a scrape sees it.

    ``name``: the source (``gpus``, ``timers``, ``silences``, ``containers``, ``engine``,
    ``journal``, ``lease``); ``up``: see the module docstring; ``value``: the last good
    reading (``None`` before any); ``last_good_at``: unix seconds of that reading's end
    (``None`` before any); ``reason``: why it is down (``None`` when up).
    """

    name: str
    up: bool
    value: Any
    last_good_at: float | None
    reason: str | None = None


def is_good(value: Any) -> bool:
    """A reading is good unless it is an :class:`~seat_console.sources.Unavailable`."""
    return not isinstance(value, Unavailable)


class _ReadingThread:
    """The reading thread of a :class:`Poller` or :class:`PollerGroup`: :func:`_loop` over the
    subclass's ``read_now`` every ``interval_s`` s until :meth:`stop` (subclasses set ``name``,
    ``interval_s``, ``_stop``, ``_thread`` and ``_close``)."""

    name: str
    interval_s: float
    _stop: threading.Event
    _thread: threading.Thread | None
    _close: Callable[[], None] | None

    def read_now(self) -> None:  # pragma: no cover - every subclass defines it
        raise NotImplementedError

    def start(self) -> Self:
        """Start the reading thread (a daemon: a hung read never keeps the process alive);
        returns ``self``."""
        if self._thread is None:
            self._thread = threading.Thread(
                target=_loop, args=(self._stop, self.interval_s, self.read_now, self._close,
                                    self.name), name=f"exporter-{self.name}", daemon=True)
            self._thread.start()
        return self

    def stop(self, join_s: float = 2.0) -> None:
        """Ask the thread to end after its current read; wait up to ``join_s`` s for it."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(join_s)


class Poller(_ReadingThread):
    """Reads one source every ``interval_s`` s in a daemon thread (:meth:`start`).

    ``read``: blocking, returns a reading (or an :class:`~seat_console.sources.Unavailable`;
    an exception counts as a failed read, with its type and message as the reason);
    ``timeout_s``: how long a read may be in flight before the source is reported down;
    ``clock``: unix seconds (tests pass a fake). ``close``: called once when the thread ends.
    Raises :class:`ValueError` for a non-positive interval or timeout.
    """

    def __init__(self, name: str, read: Callable[[], Any], *, interval_s: float,
                 timeout_s: float, close: Callable[[], None] | None = None,
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
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._value: Any = None
        self._last_good_at: float | None = None
        self._last_ok: bool | None = None   # None: no read finished yet
        self._last_reason: str | None = "no reading yet"
        self._in_flight_since: float | None = None
        self.reads = 0
        """Reads finished so far (tests and the benchmark count them)."""

    # -- the reading thread ------------------------------------------------------------------
    def read_now(self) -> None:
        """One read, in the caller's thread, recorded as the thread's reads are."""
        self._begin()
        try:
            value = self._read()
        except Exception as exc:  # noqa: BLE001 - a failed read is a down source, not a crash
            self._record(None, f"{type(exc).__name__}: {exc}")
            return
        self._record(value)

    def _begin(self) -> None:
        with self._lock:
            self._in_flight_since = self._clock()

    def _record(self, value: Any, failure: str | None = None) -> None:
        """Record the end of a read: ``value`` (good unless an ``Unavailable``), or the read
        raised (``failure``: its type and message)."""
        ok = failure is None and is_good(value)
        reason = failure if failure is not None else (None if ok else str(value))
        end = self._clock()
        with self._lock:
            self._in_flight_since = None
            self._last_ok = ok
            self._last_reason = reason
            self.reads += 1
            if ok:
                self._value = value
                self._last_good_at = end


    # -- the scrape's view -------------------------------------------------------------------
    def state(self) -> SourceState:
        """The source now (see the module docstring); never blocks on I/O."""
        now = self._clock()
        with self._lock:
            hung = (self._in_flight_since is not None
                    and now - self._in_flight_since > self.timeout_s)
            if hung:
                return SourceState(self.name, False, self._value, self._last_good_at,
                                   f"a read has been in flight for "
                                   f"{now - self._in_flight_since:.0f} s (timeout "
                                   f"{self.timeout_s:g} s)")
            return SourceState(self.name, bool(self._last_ok), self._value,
                               self._last_good_at, None if self._last_ok else self._last_reason)


def _loop(stop: threading.Event, interval_s: float, read_now: Callable[[], None],
          close: Callable[[], None] | None, name: str) -> None:
    """A reading thread's body: ``read_now`` every ``interval_s`` s (from one read's start to
    the next) until ``stop`` is set, then ``close``."""
    try:
        while not stop.is_set():
            t0 = time.monotonic()
            read_now()
            stop.wait(max(0.0, interval_s - (time.monotonic() - t0)))
    finally:
        if close is not None:
            try:
                close()
            except Exception:  # noqa: BLE001 - closing must not raise out of a thread
                log.warning("closing source %s failed", name, exc_info=True)


def _read_by_group() -> Any:
    raise RuntimeError("this source is read by its PollerGroup")


class PollerGroup(_ReadingThread):
    """Several sources read by **one** call, in one daemon thread (:meth:`start`): e.g. the
    node's timers and hold leases in one ``systemctl show``, so one ``docker exec`` / ``ssh``
    per interval instead of one per source.

    ``read``: blocking, returns ``{source name: reading}`` for ``names`` (each reading good, or
    an :class:`~seat_console.sources.Unavailable` that downs that source only; a name missing
    from the mapping is a failed read of that source); an exception downs every source of the
    group. :attr:`parts` holds one :class:`Poller` per name: a scrape reads their
    :meth:`Poller.state` as any poller's (up / down / hung / last good value and time, each
    source its own). ``interval_s``, ``timeout_s``, ``close``, ``clock``: as :class:`Poller`'s.
    Raises :class:`ValueError` as :class:`Poller` does, or for no names.
    """

    def __init__(self, names: tuple[str, ...], read: Callable[[], Any], *, interval_s: float,
                 timeout_s: float, close: Callable[[], None] | None = None,
                 clock: Callable[[], float] = time.time) -> None:
        if not names:
            raise ValueError("a poller group needs at least one source")
        self.name = "+".join(names)
        self.parts: dict[str, Poller] = {
            n: Poller(n, _read_by_group, interval_s=interval_s, timeout_s=timeout_s,
                      clock=clock) for n in names}
        self.interval_s = float(interval_s)
        self._read = read
        self._close = close
        self._stop = threading.Event()
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



__all__ = ["Poller", "PollerGroup", "SourceState", "is_good"]
