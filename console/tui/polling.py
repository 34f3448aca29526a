"""The TUI's side of the one poll engine (:mod:`seat_console.snapshot.poll`): the engine's
daemon thread per source, its back-off rule and its bookkeeping (last good, errors, the read in
flight), scheduled from the event loop, with every result turned into a message and drawn on
the UI thread.

For every panel the app (:class:`PollingMixin`)

* polls the source's blocking ``read()`` in the engine's daemon thread of its own, reused for
  every read of that source (:class:`~seat_console.snapshot.poll.Poller`; no Textual worker,
  task or thread start per poll — at 1 Hz that overhead was most of the idle console's CPU);
* schedules the next poll only when the last one has finished (:class:`PollTimer`, an asyncio
  ``call_at``), so polls of one source never overlap, and backs off after unavailable readings
  (:func:`next_delay`);
* gets the result back as a :class:`SourceReading` message and, on the UI thread, keeps per
  source the last reading, the last good reading and its time
  (:class:`~seat_console.snapshot.poll.SourceState`, in :class:`PanelState`), then calls the
  panel's
  :meth:`~seat_console.widgets.panel.SourcePanel.show`;
* once a second (no I/O) refreshes every panel's age, so a read that hangs only stales its own
  panel ("STALE · reading for 40 s") while keys and the other panels keep working.

Redraw only what changed: a reading equal to the last one (:func:`same_reading`, ignoring its
timestamp) is not drawn again.

Why a daemon thread per read instead of ``@work(thread=True)``: Textual runs thread workers in
asyncio's default executor, and ``asyncio.run`` joins that executor's threads on exit, so a
``read()`` hung on a dead NFS mount or a wedged driver would keep the console alive after the
engineer quit or the SSH session dropped. A daemon thread is abandoned at exit instead.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from functools import partial
from typing import Any

from pydantic import BaseModel
from textual.message import Message

from seat_console.core.base import BrokenSource, Source, Unavailable
from seat_console.core.partial import merge_last_good
from seat_console.snapshot.poll import (
    ALIGN_GRID_S,
    BACKOFF_MAX_S,
    BACKOFF_MIN_S,
    TIME_FIELDS,
    Poller,
    SourceState,
    aligned_when,
    next_delay,
    read_guarded,
    same_reading,
)
from seat_console.tui.early import take as take_prestarted
from seat_console.tui.panels import PanelSpec, resolve_factory, takes_context
from seat_console.widgets.detail import DetailScreen
from seat_console.widgets.panel import STALE_FACTOR, STALE_MIN_S, SourcePanel

log = logging.getLogger(__name__)

STATUS_SOURCES = frozenset({"engine", "containers", "timers", "silences", "fit", "actions"})
"""Sources the status line is drawn from (a change of another does not redraw it)."""

def call_in_daemon_thread(fn: Callable[[], BaseModel], name: str) -> concurrent.futures.Future:
    """Run ``fn`` in a new daemon thread; return a future of its result.

    A daemon thread is abandoned, not joined, when the process exits, so a hung ``fn`` cannot
    keep the console alive (see the module docstring).
    """
    fut: concurrent.futures.Future = concurrent.futures.Future()

    def run() -> None:
        if not fut.set_running_or_notify_cancel():
            return
        try:
            fut.set_result(fn())
        except BaseException as exc:  # noqa: BLE001 - handed to the awaiting worker
            fut.set_exception(exc)

    threading.Thread(target=run, name=name, daemon=True).start()
    return fut


@dataclass
class PanelState(SourceState):
    """What the app keeps per source (UI thread only): the poll engine's
    :class:`~seat_console.snapshot.poll.SourceState` (times UTC from the app's clock) and the
    panel that draws it.

    ``timer``: the pending next poll; ``dirty``: a reading came while a modal was open.
    """

    source: Source | None = None
    panel: SourcePanel | None = None
    spec: PanelSpec | None = None
    timer: PollTimer | None = None
    dirty: bool = False
    again: bool = False
    """Read again as soon as the poll in flight ends (:meth:`PollingMixin.poll_now` came
    while it ran: it began before the action ended, so its answer may be from before)."""
    prebuilt: concurrent.futures.Future | None = None
    """Eager sources: the future of ``(source, first reading)`` started before the first frame."""


class PollTimer:
    """The pending next poll of one source: an asyncio ``call_at`` handle (a Textual
    ``Timer`` builds a task and a repr of its target per poll), at :func:`aligned_when`.
    ``interval_s``: its delay (s)."""

    def __init__(self, loop: asyncio.AbstractEventLoop, delay_s: float,
                 callback: Callable[[], None]) -> None:
        self.interval_s = delay_s
        self._handle = loop.call_at(aligned_when(loop.time(), delay_s), callback)

    def stop(self) -> None:
        """Cancel it (no-op once it ran)."""
        self._handle.cancel()


class SourceReading(Message):
    """A poll finished: ``key`` names the source, ``reading`` is its model or Unavailable.

    ``started_at`` / ``finished_at`` are UTC times from the app's clock. ``source``: set when
    this poll also built the source (deferred construction).
    """

    def __init__(self, key: str, reading: BaseModel, started_at: datetime,
                 finished_at: datetime, source: Source | None = None) -> None:
        super().__init__()
        self.key = key
        self.reading = reading
        self.started_at = started_at
        self.finished_at = finished_at
        self.source = source



class PollingMixin:
    """The app's polling engine (mixed into :class:`~seat_console.tui.app.SeatConsoleApp`,
    which provides ``loaded``, ``node``, ``readonly``, ``interval_s``, ``paused``, ``clock``,
    ``age_tick_s``, ``readings``, ``_panel_specs``, ``_states``, ``_pollers``,
    ``_shutting_down``, ``post_message``, ``screen`` and ``after_change(state)``)."""

    def _make_source(self, spec: PanelSpec) -> Source:
        """Build ``spec``'s source; a factory that fails becomes a :class:`BrokenSource`. A
        factory with a ``context`` keyword gets the app's :attr:`node` (one transport, one
        Alertmanager client, one docker event watcher for every panel and action). Under
        ``--readonly`` a source with a ``readonly`` attribute gets it set (it must not write)."""
        try:
            factory = resolve_factory(spec.source)
            kw = {"context": self.node} if takes_context(factory) else {}
            if spec.uses_readings:
                source = factory(self.loaded, self.readings, **kw)
            else:
                source = factory(self.loaded, **kw)
            if self.readonly and hasattr(source, "readonly"):
                source.readonly = True   # e.g. the action log: never writes the journal
            return source
        except Exception as exc:
            log.warning("source factory %r failed", spec.source, exc_info=True)
            return BrokenSource(spec.panel.source_name,
                                f"could not set up: {type(exc).__name__}: {exc}")

    def _build_states(self) -> None:
        for i, spec in enumerate(self._panel_specs):
            source: Source | None = None
            if callable(spec.source):   # tests: built now, so their names key the states
                source = self._make_source(spec)
                name = source.name
            else:
                name = spec.panel.source_name
            key = name if name not in self._states else f"{name}-{i}"
            panel = spec.panel(loaded=self.loaded, id=f"panel-{key}",
                               classes="-span2" if (spec.span or spec.panel.wide_span) > 1
                               else None)
            st = PanelState(key=key, source=source, panel=panel, spec=spec,
                            delay_s=self.interval_s)
            if source is None and spec.eager:   # read before the first frame is drawn
                early = (take_prestarted(spec.factory, self.loaded)
                         if isinstance(spec.factory, str) else None)
                st.prebuilt = call_in_daemon_thread(
                    partial(self._build_and_read, spec) if early is None
                    else partial(self._finish_prestarted, spec, early),
                    name=f"seat-console:build:{key}")
            self._states[key] = st

    def _build_and_read(self, spec: PanelSpec) -> tuple[Source, BaseModel]:
        """Worker thread: build ``spec``'s source and take its first reading."""
        source = self._make_source(spec)
        return source, read_guarded(source)

    def _finish_prestarted(self, spec: PanelSpec,
                           early: concurrent.futures.Future) -> tuple[Source, BaseModel]:
        """Worker thread: the source and first reading :mod:`seat_console.tui.early` started
        before the app was imported; if that failed, the usual :meth:`_build_and_read` (which
        names the failure as it always has)."""
        try:
            source, reading = early.result()
        except BaseException:  # noqa: BLE001 - built again the usual way, which reports it
            log.warning("early start of %r failed", spec.source, exc_info=True)
            return self._build_and_read(spec)
        if self.readonly and hasattr(source, "readonly"):
            source.readonly = True
        if not isinstance(reading, BaseModel):
            reading = read_guarded(source)
        return source, reading


    @property
    def states(self) -> dict[str, PanelState]:
        """Per-source state, by source key (read-only use: tests, commands)."""
        return self._states

    def _start_poll(self, key: str, manual: bool = False) -> None:
        """Start one read of source ``key`` unless one is in flight (UI thread). ``manual``:
        asked for with ``r`` (a failure then does not count towards the back-off)."""
        st = self._states[key]
        if st.timer is not None:
            st.timer.stop()
            st.timer = None
        if st.busy_since is not None or self._shutting_down:
            return
        st.begin(self.clock(), manual)
        poller = self._pollers.get(key)
        if poller is None:
            poller = self._pollers[key] = Poller(f"seat-console:{key}")
        poller.submit(partial(self._poll, key, st.busy_since))

    def _poll(self, key: str, started_at: datetime) -> None:
        """Poll thread: the blocking read (building the source first if it is not built yet),
        then post the result to the UI thread. Never raises: a failure outside ``read`` (a
        bug) is posted as ``Unavailable(kind="error")``, so the source never stays busy."""
        st = self._states[key]
        built: Source | None = None
        try:
            if st.prebuilt is not None:
                fut, st.prebuilt = st.prebuilt, None
                built, reading = fut.result()
            elif st.source is None:
                assert st.spec is not None
                built, reading = self._build_and_read(st.spec)
            else:
                reading = read_guarded(st.source)
        except BaseException as exc:  # noqa: BLE001 - shown in the panel, polling goes on
            log.warning("poll of %s failed", key, exc_info=True)
            reading = Unavailable(source=key, kind="error",
                                  reason=f"poll failed: {type(exc).__name__}: {exc}")
        self.post_message(SourceReading(key, reading, started_at, self.clock(), source=built))

    def on_source_reading(self, message: SourceReading) -> None:
        """A poll finished (UI thread): keep the reading, schedule the next poll, draw it when
        it changed and tell the app (``after_change``)."""
        st = self._states.get(message.key)
        if st is None:
            return
        if message.source is not None and st.source is None:
            st.source = message.source
        again, st.again = st.again, False
        # a half-failed read keeps the last good value of the parts it missed, marked stale
        reading = merge_last_good(message.reading, st.last_good)
        unchanged = same_reading(reading, st.reading)
        # the engine's one rule: last good, and a failure counts unless asked for with r
        if st.finish(reading, message.finished_at):
            self.readings.put(st.key, reading)
            self._wake_fit_on_engine_change(st.key, reading)
        self._note_first_readings()
        if again and not self._shutting_down:
            self._start_poll(st.key, manual=True)   # the read asked for after the action
        else:
            self._schedule_next(st)
        if unchanged and not st.dirty and st.panel.reading is not None:
            st.panel.reading = reading   # same content: only the age moves (no redraw)
            st.panel._reading_at = message.finished_at
            if not isinstance(reading, Unavailable):   # ...and the last good value is fresh
                st.panel.last_good, st.panel.last_good_at = reading, st.last_good_at
            st.panel.note_unchanged(reading)
            self._show_age(st, self.clock())
            return
        self._draw(st)
        self.after_change(st)

    _fit_engine_seen: tuple[Any, Any] | None = None
    """The engine's ``(healthy, version)`` when the fit was last woken for it."""

    def _wake_fit_on_engine_change(self, key: str, reading: BaseModel) -> None:
        """The fit budgets a side by the version of the engine serving it
        (:func:`seat_console.snapshot.fit_reading.running_engine_versions`): when the engine's
        health or ``/version`` changes — its first answer among them — read the fit again at
        once, not at its 10 s interval (UI thread, no I/O; not while paused)."""
        if key != "engine":
            return
        seen = (getattr(reading, "healthy", None), getattr(reading, "version", None))
        if seen == self._fit_engine_seen:
            return
        self._fit_engine_seen = seen
        st = self._states.get("fit")
        if st is None or self.paused or self._shutting_down:
            return
        if st.busy_since is not None:
            st.again = True     # the read in flight may have begun before this reading
        elif st.source is not None:
            self._start_poll("fit")

    _every_panel_read: bool = False
    """Whether every panel has had its first reading (:meth:`_note_first_readings`)."""

    def _note_first_readings(self) -> None:
        """Once every panel has its first reading (the full screen), tell the app once (its
        ``first_readings_in()``, if it has one): work that no panel waits for starts then, not
        beside the sources' first reads under the same GIL (issue 33)."""
        if self._every_panel_read or any(st.polls == 0 for st in self._states.values()):
            return
        self._every_panel_read = True
        hook = getattr(self, "first_readings_in", None)
        if hook is not None:
            hook()

    def _schedule_next(self, st: PanelState) -> None:
        st.next_delay(max(self.interval_s, st.spec.min_interval_s if st.spec else 0.0))
        if self.paused or self._shutting_down or st.busy_since is not None:
            return
        st.timer = PollTimer(asyncio.get_running_loop(), st.delay_s,
                             partial(self._start_poll, st.key))

    def _draw(self, st: PanelState) -> None:
        screen = self.screen if self.screen_stack else None
        if isinstance(screen, DetailScreen) and screen.key == st.key:
            screen.panel.show(st.reading, st.last_good, st.last_good_at, now=self.clock(),
                              reading_at=st.reading_at)
        if len(self.screen_stack) > 1:  # a modal (help, palette) is open: draw on return
            st.dirty = True
            return
        st.dirty = False
        st.panel.show(st.reading, st.last_good, st.last_good_at, now=self.clock(),
                      reading_at=st.reading_at)
        self._show_age(st, self.clock())

    def redraw_dirty(self) -> None:
        """Draw the panels whose source reported while a modal screen was open."""
        for st in self._states.values():
            if st.dirty:
                self._draw(st)

    def _show_age(self, st: PanelState, now: datetime) -> None:
        # while paused, readings age but are not "stale": the engineer stopped the polling
        stale_after = (float("inf") if self.paused and st.busy_since is None
                       else max(STALE_FACTOR * max(self.interval_s, st.delay_s), STALE_MIN_S))
        st.panel.fresh_s = max(2.0, 2 * max(self.interval_s, st.delay_s))
        st.panel.show_age(now, stale_after_s=stale_after, busy_since=st.busy_since,
                          retry_s=st.delay_s if st.consecutive_errors else None,
                          paused=self.paused)

    def _schedule_age_tick(self) -> None:
        """The next :meth:`tick_ages` in :attr:`age_tick_s`, on the polls' grid
        (:func:`aligned_when`: one wake-up a second for both)."""
        if self._shutting_down:
            return
        loop = asyncio.get_running_loop()
        loop.call_at(aligned_when(loop.time(), self.age_tick_s), self._age_tick)

    def _age_tick(self) -> None:
        if not self.is_running:   # the app has exited (its loop may live on: tests)
            return
        try:
            self.wake_on_docker_change()
        except Exception:  # noqa: BLE001 - a broken wake-up must not cost the ages
            log.warning("docker wake-up failed", exc_info=True)
        try:
            self.tick_ages()
        except Exception:  # noqa: BLE001 - a broken tick must not stop the ages
            log.warning("age tick failed", exc_info=True)
        finally:
            self._schedule_age_tick()

    _docker_seen: int | None = None
    """The docker event watcher's count of changes when last looked at (``None``: none yet)."""

    def wake_on_docker_change(self) -> bool:
        """Once a tick (UI thread, no I/O): when the node context's docker event watcher saw a
        container or image change since the last look, read the sources marked
        ``on_docker_change`` at once (idle ones; one in flight is read again when it ends; not
        while paused) and tell the app (its ``docker_changed()``, if it has one). Returns
        whether anything changed. A watcher that is not running wakes nothing: those sources
        keep their interval."""
        look = getattr(self.node, "docker_changes_seen", None)   # a test's context may lack it
        seen = look() if look is not None else None
        if seen is None or seen == self._docker_seen:
            return False
        first, self._docker_seen = self._docker_seen is None, seen
        if first or self.paused or self._shutting_down:
            return False
        for key, st in self._states.items():
            if st.spec is None or not st.spec.on_docker_change or st.source is None:
                continue
            if st.busy_since is not None:
                st.again = True    # the read in flight may have begun before the change
            else:
                self._start_poll(key)
        hook = getattr(self, "docker_changed", None)
        if hook is not None:
            hook()
        return True

    def tick_ages(self) -> None:
        """Redraw every panel's age / STALE mark (runs on the UI thread; no I/O)."""
        now = self.clock()
        for st in self._states.values():
            self._show_age(st, now)
        screen = self.screen if self.screen_stack else None
        if isinstance(screen, DetailScreen):   # its relative times move too (to the second)
            screen.panel.show_age(now, paused=self.paused)


    def start_polling(self) -> None:
        """On mount: start the sources that are built (the GPU one first) and, after the first
        frame, build and start the others (:meth:`_start_deferred`)."""
        for key, st in self._states.items():
            if st.source is not None or st.prebuilt is not None:
                self._start_poll(key)
        self.call_after_refresh(self._start_deferred)

    def _start_deferred(self) -> None:
        """After the first frame: build (in their poll threads) and read the other sources."""
        for key, st in self._states.items():
            if st.source is None and st.prebuilt is None:
                self._start_poll(key)


    def poll_now(self, *keys: str) -> None:
        """Read sources ``keys`` now (those the app has), e.g. after a runbook changed them:
        each source's back-off is reset (its failures were the action's doing: the engine is
        down while a swap starts the candidate), and a source whose read is in flight is read
        again as soon as it ends (that read began before the action ended). Right after a
        swap had verified the new engine serving, the status line said ``engine DOWN`` for
        up to :data:`BACKOFF_MAX_S` (issue 30)."""
        for key in keys:
            st = self._states.get(key)
            if st is None:
                continue
            st.consecutive_errors = 0
            if st.busy_since is not None:
                st.again = st.manual = True
            else:
                self._start_poll(key, manual=True)

    def action_pause(self) -> None:
        """``p`` while polling: pause (the footer then offers ``p`` resume)."""
        if not self.paused:
            self.action_toggle_pause()

    def action_resume(self) -> None:
        """``p`` while paused: resume."""
        if self.paused:
            self.action_toggle_pause()

    def action_toggle_pause(self) -> None:
        """``p``: stop polling (pending polls cancelled) or resume (every source polled now)."""
        self.paused = not self.paused
        if self.paused:
            for st in self._states.values():
                if st.timer is not None:
                    st.timer.stop()
                    st.timer = None
        else:
            for key in self._states:
                self._start_poll(key)
        self.update_header()
        self.tick_ages()
        self.refresh_bindings()

    def action_refresh_now(self) -> None:
        """``r``: read every idle source now (also while paused: one reading each). Resets
        each source's back-off; a failure of this read does not count as one."""
        for key, st in self._states.items():
            st.consecutive_errors = 0
            self._start_poll(key, manual=True)

    def set_refresh_interval(self, seconds: float) -> None:
        """Change the refresh interval (s > 0); polls already scheduled are re-timed."""
        if not seconds > 0:
            self.notify(f"refresh interval {seconds!r} s: must be > 0", severity="error")
            return
        self.interval_s = float(seconds)
        for st in self._states.values():
            if st.timer is not None:
                st.timer.stop()
                st.timer = None
                self._schedule_next(st)
        self.update_header()
        self.notify(f"refresh interval {self.interval_s:g} s")

    def close_sources(self, timeout_s: float = 2.0) -> None:
        """Call every source's ``close()`` in daemon threads, waiting at most ``timeout_s``;
        retire every source's read thread (:meth:`~seat_console.snapshot.poll.Poller.retire`:
        an idle one ends at once, so the exit does not wait its grace for it)."""
        self._shutting_down = True
        for poller in [*self._pollers.values(), getattr(self, "_rb_poller", None)]:
            if poller is not None:
                poller.retire()
        threads = []
        for st in self._states.values():
            if st.source is None:
                continue
            t = threading.Thread(target=_close_quietly, args=(st.source,),
                                 name=f"seat-console-close:{st.key}", daemon=True)
            t.start()
            threads.append(t)
        deadline = time.monotonic() + timeout_s
        for t in threads:
            t.join(max(0.0, deadline - time.monotonic()))
        t = threading.Thread(target=self.node.close, name="seat-console-close:node", daemon=True)
        t.start()   # the shared context last: the sources no longer use it
        t.join(max(0.0, deadline - time.monotonic()))



def _close_quietly(source: Source) -> None:
    try:
        source.close()
    except Exception:
        log.warning("closing source %s failed", getattr(source, "name", source), exc_info=True)



__all__ = ["ALIGN_GRID_S", "BACKOFF_MAX_S", "BACKOFF_MIN_S", "TIME_FIELDS", "PanelState",
           "PollTimer", "Poller", "PollingMixin", "SourceReading", "SourceState", "aligned_when",
           "call_in_daemon_thread", "next_delay", "read_guarded", "same_reading"]
