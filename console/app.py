"""The Seat Console TUI: composes the panels, polls the sources, and stays responsive.

Shape (see ``../shared/DESIGN.md``): each :class:`PanelSpec` of :data:`PANELS` pairs a source
factory (``"module:function"`` imported after the first frame, or a callable
``make_source(loaded_profile) -> Source``) with the
:class:`~seat_console.widgets.panel.SourcePanel` subclass that draws it. For every entry the app

* polls the source's blocking ``read()`` in a daemon thread of its own, reused for every read
  of that source (:class:`Poller`; no Textual worker, task or thread start per poll — at 1 Hz
  that overhead was most of the idle console's CPU);
* schedules the next poll only when the last one has finished (:class:`PollTimer`, an asyncio
  ``call_later``), so polls of one
  source never overlap, and backs off after unavailable readings (:func:`next_delay`);
* gets the result back as a :class:`SourceReading` message and, on the UI thread, keeps per
  source the last reading, the last good reading and its time, then calls the panel's
  :meth:`~seat_console.widgets.panel.SourcePanel.show`;
* once a second (no I/O) refreshes every panel's age, so a read that hangs only stales its own
  panel ("STALE · reading for 40 s") while keys and the other panels keep working.

Redraw only what changed: a reading equal to the last one (:func:`same_reading`, ignoring its
timestamp) is not drawn again; ages are coarse and the border is only touched when its text
changes; nothing calls ``refresh(layout=True)`` on a tick. The fit source reads the GPU panel's
reading (:class:`LatestReading`) instead of a second NVML sampler of its own.

Screen: header, the one-glance :class:`~seat_console.widgets.status.StatusLine`, the panels
(compact forms below :data:`COMPACT_BELOW_ROWS` rows, two columns from :data:`WIDE_FROM_COLS`
columns), footer. Enter on a focused panel opens its :class:`DetailScreen` (full view; the fit
budget's what-if controls). Adding a key: a ``Binding`` with an ``id`` in
:attr:`SeatConsoleApp.BINDINGS` and an ``action_*`` method; adding a screen: ``push_screen``
from that action (readings arriving meanwhile are drawn when it closes).

Why a daemon thread per read instead of ``@work(thread=True)``: Textual runs thread workers in
asyncio's default executor, and ``asyncio.run`` joins that executor's threads on exit, so a
``read()`` hung on a dead NFS mount or a wedged driver would keep the console alive after the
engineer quit or the SSH session dropped. A daemon thread is abandoned at exit instead.

The app exits when its terminal goes away: on SIGHUP, and when the terminal stops answering
``tcgetattr`` (a hang-up that sent no signal); if a clean exit is itself stuck writing to the
dead terminal, a watchdog ends the process after :data:`HANGUP_EXIT_GRACE_S`.

Key bindings each carry an ``id`` (remap with ``App.set_keymap``). Bindings whose id starts
with :data:`NODE_ACTION_PREFIX` change the node; ``--readonly`` hides and disables them
(:func:`filter_action_bindings`, :meth:`SeatConsoleApp.check_action`).

The app holds no business rules and does no I/O on the UI thread.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import os
import queue
import signal
import sys
import termios
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import datetime
from functools import partial
from typing import ClassVar

from pydantic import BaseModel
from rich.console import Group
from rich.table import Table
from rich.text import Text
from textual import on
from textual.app import App, ComposeResult
from textual.binding import Binding, BindingType
from textual.command import DiscoveryHit, Hit, Hits, Provider
from textual.containers import Horizontal, VerticalScroll
from textual.css.query import NoMatches
from textual.message import Message
from textual.screen import ModalScreen, Screen
from textual.widgets import Footer, Static
from textual.worker import Worker, WorkerState

from seat_console.core.profile import (
    REFRESH_INTERVAL_MAX_S,
    REFRESH_INTERVAL_MIN_S,
    LoadedProfile,
)
from seat_console.node.context import NodeContext
from seat_console.core.base import BrokenSource, Source, Unavailable, utcnow
from seat_console.early import take as take_prestarted, take_context
from seat_console.first_frame import header_line
from seat_console.core.partial import merge_last_good
from seat_console.widgets.fit import FitPanel
from seat_console.widgets.gpu import GpuPanel
from seat_console.widgets.footer import SeatFooter
from seat_console.widgets.nocolor import NoColorAlarms
from seat_console.widgets.panel import STALE_FACTOR, STALE_MIN_S, SourcePanel
from seat_console.widgets.services import ContainersPanel, EnginePanel, SilencesPanel, TimersPanel
from seat_console.widgets.seat import SeatPanel
from seat_console.widgets.actionlog import ActionLogPanel
from seat_console.widgets.status import StatusLine, build_status

log = logging.getLogger(__name__)

SourceFactory = Callable[..., Source]
"""``make_source(loaded_profile) -> Source`` builds one source from the seat profile; with
``PanelSpec.uses_readings`` it is called as ``make_source(loaded_profile, readings)`` where
``readings`` is the app's :class:`LatestReadings` (e.g. the fit source takes the GPU reading)."""


@dataclass(frozen=True)
class PanelSpec:
    """One panel of the main screen.

    ``source``: ``"module:function"`` (imported in a thread after the first frame, so docker,
    httpx or the checkpoint scanner do not delay it) or a callable factory (see
    :data:`SourceFactory`); ``panel``: the :class:`SourcePanel` subclass that draws it;
    ``eager``: built and read at start-up, before the first frame (the GPU panel);
    ``min_interval_s``: poll no more often than this (s), whatever the refresh interval;
    ``uses_readings``: pass the app's :class:`LatestReadings` to the factory; ``span``: columns
    the panel takes in the two-column layout (1 or 2; ``None``: the panel class's
    ``wide_span``).
    """

    source: str | SourceFactory
    panel: type[SourcePanel]
    eager: bool = False
    min_interval_s: float = 0.0
    uses_readings: bool = False
    span: int | None = None


PANELS: list[PanelSpec] = [
    PanelSpec("seat_console.sources.gpu:make_source", GpuPanel, eager=True),
    PanelSpec("seat_console.sources.timers:make_source", TimersPanel),
    PanelSpec("seat_console.sources.silences:make_source", SilencesPanel),
    PanelSpec("seat_console.app:make_fit_source", FitPanel, uses_readings=True,
              min_interval_s=10.0),
    PanelSpec("seat_console.sources.engine:make_source", EnginePanel),
    PanelSpec("seat_console.sources.containers:make_source", ContainersPanel),
    PanelSpec("seat_console.sources.seat:make_source", SeatPanel),
    PanelSpec("seat_console.actions.actionlog:make_source", ActionLogPanel, uses_readings=True),
]
"""The panels the app shows, in reading order (the seat's safety net — GPUs, timers, silences,
fit — first, so it is on the first screen at 80×24).

To add a panel, append one line, e.g.
``PanelSpec("seat_console.sources.probe:make_source", ProbePanel),``. Plain
``(make_source, PanelClass)`` pairs are accepted too (tests)."""

BACKOFF_MIN_S = 2.0
"""Shortest wait in seconds before polling a source again after an unavailable reading."""

BACKOFF_MAX_S = 10.0
"""Longest wait in seconds between polls of a failing source (unless the interval is longer):
a source that recovered is seen within 10 s, or at once with ``r``."""

COMPACT_BELOW_ROWS = 50
"""Below this many terminal rows the main screen shows the panels' compact forms."""

WIDE_FROM_COLS = 160
"""From this many columns the panels are laid out in two columns."""

MIN_COLS, MIN_ROWS = 60, 12
"""Smallest terminal that can show the header and the status line (columns, rows)."""

STATUS_SOURCES = frozenset({"engine", "containers", "timers", "silences", "fit", "actions"})
"""Sources the status line is drawn from (a change of another does not redraw it)."""

TIME_FIELDS = frozenset({"read_at", "sampled_at"})
"""Fields of a reading that say when it was taken; ignored by :func:`same_reading`."""

HANGUP_EXIT_GRACE_S = 5.0
"""Seconds a clean exit may take after the terminal went away before the process is ended."""

RUNBOOK_STOP_GRACE_S = 60.0
"""After a hang-up, seconds a runbook in flight gets to finish its current step and undo before
the process ends (a step cut off is journaled; the hold's lease covers the rest)."""

EXIT_HANGUP = 129
"""Exit code after the terminal went away (128 + SIGHUP, the shell's convention)."""

EXIT_HANGUP_FORCED = 140
"""Exit code when, after the terminal went away, the clean exit did not finish within
:data:`HANGUP_EXIT_GRACE_S` and the watchdog ended the process."""

NODE_ACTION_PREFIX = "node."
"""Binding ids starting with this change the node (hold, build, probe, restore…); hidden and
disabled under ``--readonly``."""

INTERVAL_CHOICES_S = (0.5, 1.0, 2.0, 5.0, 10.0, 30.0, 60.0)
"""Refresh intervals offered in the command palette (seconds); any positive number may be typed."""


def in_flight() -> list:
    """:func:`seat_console.actions.runbook.in_flight` (the runbook engine and its journal are
    imported on first use, not before the first frame)."""
    from seat_console.actions.runbook import in_flight as running

    return running()


def stop_in_flight(grace_s: float) -> list:
    """:func:`seat_console.actions.runbook.stop_in_flight`, imported on first use."""
    from seat_console.actions.runbook import stop_in_flight as stop

    return stop(grace_s)


def next_delay(interval_s: float, consecutive_errors: int) -> float:
    """Seconds to wait before the next poll of a source.

    ``interval_s``: the refresh interval (s). ``consecutive_errors``: how many readings in a row
    were unavailable. No errors → ``interval_s``. Otherwise exponential back-off from the
    interval, clamped to [:data:`BACKOFF_MIN_S`, :data:`BACKOFF_MAX_S`] and never shorter than
    the interval: ``max(interval, min(max(interval × 2^errors, 2), 10))`` — at 1 s: 2, 4, 8,
    10, 10… (the rule of ``../shared/STYLE.md``, capped at 10 s so a recovered source is seen
    within 10 s).
    """
    if consecutive_errors <= 0:
        return interval_s
    grown = interval_s * (2.0 ** min(consecutive_errors, 16))
    return max(interval_s, min(max(grown, BACKOFF_MIN_S), BACKOFF_MAX_S))


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


class LatestReadings:
    """The app's newest good reading per source key, readable from any thread (the app writes
    it on the UI thread; a reader gets a frozen model or ``None``)."""

    def __init__(self) -> None:
        self._by_key: dict[str, BaseModel] = {}

    def get(self, key: str) -> BaseModel | None:
        """The newest good reading of source ``key``, or ``None`` before the first."""
        return self._by_key.get(key)

    def put(self, key: str, reading: BaseModel) -> None:
        """Record ``reading`` as source ``key``'s newest good reading (UI thread)."""
        self._by_key[key] = reading


class LatestReading(Source):
    """A source that returns another panel's newest good reading (no I/O): how the fit source
    shares the GPU panel's NVML sample. Before the first one: ``Unavailable(kind="waiting")``."""

    def __init__(self, readings: LatestReadings, key: str) -> None:
        self.readings = readings
        self.key = key
        self.name = key

    def read(self) -> BaseModel:
        """The newest good reading of ``key``, or :class:`Unavailable` naming what is awaited."""
        got = self.readings.get(self.key)
        if got is None:
            return Unavailable(source=self.key, kind="waiting",
                               reason=f"no {self.key} reading yet")
        return got


def make_fit_source(loaded: LoadedProfile, readings: LatestReadings) -> Source:
    """The fit panel's source, reading the GPU panel's newest snapshot instead of NVML (so the
    GPU and fit panels show one sample, and no second sampler, ``/proc`` mapper or docker
    client runs)."""
    from seat_console.snapshot.fit_reading import FitSource

    return FitSource(loaded, gpu_source=LatestReading(readings, "gpus"),
                     containers_source=LatestReading(readings, "containers"))


def takes_context(factory: SourceFactory) -> bool:
    """Whether ``factory`` accepts a ``context`` keyword (the app's shared
    :class:`~seat_console.node.context.NodeContext`); test factories without it still work."""
    import inspect

    try:
        params = inspect.signature(factory).parameters
    except (TypeError, ValueError):
        return False
    return "context" in params or any(p.kind is inspect.Parameter.VAR_KEYWORD
                                      for p in params.values())


def resolve_factory(source: str | SourceFactory) -> SourceFactory:
    """``"package.module:function"`` → that function (imports the module); a callable as is.

    Raises ``ImportError`` / ``AttributeError`` naming the module or function when it is
    missing, ``ValueError`` for a string without ``:``."""
    if callable(source):
        return source
    mod, sep, fn = source.partition(":")
    if not sep:
        raise ValueError(f"panel source {source!r}: write 'package.module:function'")
    import importlib

    return getattr(importlib.import_module(mod), fn)


def as_spec(entry: PanelSpec | tuple) -> PanelSpec:
    """A :class:`PanelSpec` from a spec or a ``(factory, PanelClass)`` pair."""
    if isinstance(entry, PanelSpec):
        return entry
    factory, panel = entry
    return PanelSpec(factory, panel)


def is_node_action(binding: Binding) -> bool:
    """Whether ``binding`` changes the node (its id starts with :data:`NODE_ACTION_PREFIX`)."""
    return bool(binding.id and binding.id.startswith(NODE_ACTION_PREFIX))


def filter_action_bindings(bindings: Iterable[BindingType], readonly: bool) -> list[BindingType]:
    """The bindings to offer: all of them, or under ``readonly`` all but node actions.

    ``bindings``: :class:`Binding` objects or Textual's ``(key, action, description)`` tuples
    (tuples have no id, so they are never node actions).
    """
    if not readonly:
        return list(bindings)
    return [b for b in bindings if not (isinstance(b, Binding) and is_node_action(b))]


def read_guarded(source: Source) -> BaseModel:
    """Call ``source.read()`` and turn anything but a model into :class:`Unavailable`.

    Sources must not raise, but a bug in one must not reach the UI: an exception becomes
    ``Unavailable(kind="error")`` naming the exception type and message; a non-model return
    value becomes ``Unavailable(kind="error")`` naming its type. Runs in a worker thread.
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
class SourceState:
    """What the app keeps per source (UI thread only).

    Times are UTC from the app's clock. ``busy_since`` is set while a read is in flight.
    ``consecutive_errors`` counts unavailable readings in a row (drives :func:`next_delay`).
    ``polls`` counts finished reads. ``delay_s`` is the wait scheduled after the last read.
    """

    key: str
    source: Source | None
    panel: SourcePanel
    spec: PanelSpec | None = None
    reading: BaseModel | None = None
    reading_at: datetime | None = None
    last_good: BaseModel | None = None
    last_good_at: datetime | None = None
    busy_since: datetime | None = None
    consecutive_errors: int = 0
    polls: int = 0
    delay_s: float = 0.0
    timer: PollTimer | None = None
    dirty: bool = False
    manual: bool = False
    """The poll in flight was asked for with ``r`` (its failure does not count)."""
    prebuilt: concurrent.futures.Future | None = None
    """Eager sources: the future of ``(source, first reading)`` started before the first frame."""


ALIGN_GRID_S = 1.0
"""Polls and the age tick due in at least this many seconds are moved to the nearest multiple
of it on the event loop's clock (by at most half of it), so that the sources polled every
second, the back-off retries and the age tick wake the UI thread together, once a second,
instead of each on its own phase (every wake-up costs the event loop and Textual a pass)."""


def aligned_when(now: float, delay_s: float, grid_s: float = ALIGN_GRID_S) -> float:
    """The loop time for something due ``delay_s`` seconds after ``now``: the nearest multiple
    of ``grid_s`` to ``now + delay_s`` when ``delay_s >= grid_s`` (so never more than
    ``grid_s / 2`` early or late, and never before ``now + delay_s / 2``), else exactly
    ``now + delay_s``. Seconds in, seconds out."""
    if grid_s <= 0 or not delay_s >= grid_s:
        return now + delay_s
    return max(round((now + delay_s) / grid_s) * grid_s, now + delay_s / 2)


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


class Poller:
    """One daemon thread that runs one source's reads, one after another, for the app's life.

    ``submit(fn)`` queues ``fn`` (a read that posts its own result). The thread is started on
    the first submit and abandoned at exit (a daemon: a read hung on a dead mount cannot keep
    the console alive). An exception escaping ``fn`` is logged and the thread goes on."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._queue: queue.SimpleQueue[Callable[[], None]] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None

    def submit(self, fn: Callable[[], None]) -> None:
        """Queue ``fn`` to run on this source's thread."""
        if self._thread is None:
            self._thread = threading.Thread(target=self._loop, name=self.name, daemon=True)
            self._thread.start()
        self._queue.put(fn)

    def _loop(self) -> None:
        while True:
            fn = self._queue.get()
            try:
                fn()
            except BaseException:  # noqa: BLE001 - logged; the next read still runs
                log.exception("poll on %s failed", self.name)


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


class SeatHeader(Static):
    """Header: node and seat identity on the left, refresh state (PAUSED, READ-ONLY) right."""

    DEFAULT_CSS = """
    SeatHeader { height: auto; background: $panel; color: $text; padding: 0 1; }
    """


class HelpScreen(ModalScreen[None]):
    """The help screen (``?``): keys, what the panels show, units and states."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,question_mark,q", "dismiss", "close help", id="help-close"),
    ]

    DEFAULT_CSS = """
    HelpScreen { align: center middle; }
    HelpScreen > VerticalScroll {
        width: 80%; max-width: 100; min-width: 60; height: 80%;
        border: thick $primary; background: $surface; padding: 0 1;
    }
    """

    def __init__(self, keys: list[tuple[str, str]]) -> None:
        super().__init__(id="help")
        self._keys = keys

    def compose(self) -> ComposeResult:
        """A scrollable help text: keys first, then how to read the panels."""
        t = Text()
        t.append("Seat Console — help\n", style="bold")
        t.append("Close: Esc, q or ?. Scroll: ↑ ↓, PgUp PgDn, Home End (or the mouse wheel).\n\n",
                 style="italic")
        t.append("Keys\n", style="bold underline")
        for key, what in self._keys:
            t.append(f"  {key:<14}", style="bold")
            t.append(f"{what}\n")
        for heading, paragraphs in HELP_SECTIONS:
            t.append(f"\n{heading}\n", style="bold underline")
            for para in paragraphs:
                t.append(f"• {para}\n")
        with VerticalScroll(id="help-scroll"):
            yield Static(t, id="help-text")

    def on_mount(self) -> None:
        """Focus the text so the arrow keys and PgUp/PgDn scroll it at once."""
        self.query_one("#help-scroll").focus()


class DetailScreen(ModalScreen[None]):
    """A panel's full view (Enter on a focused panel): everything the compact form leaves out —
    a source's full reason and fix, the fit budget per card with its what-if controls. The app
    keeps drawing the source's readings into it while it is open. Esc leaves a field first,
    then closes; q closes."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "back", "close", key_display="Esc", id="detail-close"),
        Binding("q", "dismiss", "close", show=False, id="detail-close-q"),
    ]

    DEFAULT_CSS = """
    DetailScreen { align: center middle; }
    DetailScreen > VerticalScroll {
        width: 96%; height: 94%; border: thick $primary; background: $surface;
    }
    DetailScreen #detail-hint { color: $text-muted; padding: 0 1; }
    """

    def __init__(self, key: str, panel: SourcePanel) -> None:
        super().__init__(id="detail")
        self.key = key
        self.panel = panel

    def compose(self) -> ComposeResult:
        """The hint line and the full panel in a scrolling column, then the footer."""
        with VerticalScroll(id="detail-scroll"):
            yield Static(Text("Esc or q: back to the seat · ↑ ↓ PgUp PgDn: scroll · Tab: "
                              "next control"), id="detail-hint")
            yield self.panel
        yield Footer()

    def on_mount(self) -> None:
        """Focus the scroll column so the arrow keys scroll."""
        self.query_one("#detail-scroll").focus()

    def action_back(self) -> None:
        """Esc: inside a field, leave the field (focus the column); else close."""
        focused = self.focused
        if focused is not None and _is_field(focused):
            self.query_one("#detail-scroll").focus()
            return
        self.dismiss()


def _is_field(widget: object) -> bool:
    """Whether ``widget`` takes typed keys (an Input or a Select)."""
    from textual.widgets import Input, Select

    return isinstance(widget, Input | Select)


HELP_SECTIONS: list[tuple[str, list[str]]] = [
    ("Reading the GPU panel", [
        ("Memory is in GiB (1 GiB = 2^30 bytes). The bar shows used █, reserved ▓ and free ░ "
         "per card."),
        ("'used incl. reserved': the driver only has NVML's v1 memory API, which counts the "
         "driver-reserved memory as used."),
        "CUDA-visible = total − reserved: the total that vLLM applies gpu_memory_utilization to.",
        ("n/a: the card does not report that field (never shown as 0). SEAT: the card serves the "
         "seat (profile node.gpus). LOST: the card fell off the bus; the other cards stay live."),
    ]),
    ("States of a panel", [
        "The border shows how old the reading is.",
        ("STALE (red border): no new reading for a while, e.g. a read that hangs ('reading for "
         "N s'). The other panels stay live."),
        ("Unavailable (yellow border): the reason, how old the last good value is, and that "
         "value dimmed. A failing source is retried less often (2 s, growing to 10 s); r reads "
         "it again at once and resets that."),
        ("Ages are coarse ('just now', '10 s ago', '3 min ago') so the screen only changes when "
         "something did."),
        ("PAUSED: nothing is read until you press p again. READ-ONLY: no action that changes "
         "the node is offered."),
    ]),
    ("The status line (under the header)", [
        ("engine UP/DOWN · which container holds the seat · hold · silence on the seat · "
         "timers active of those in the profile · fit of the candidate (fits / OVER by N GiB "
         "per card). Each in words, so it reads the same without colour (NO_COLOR)."),
    ]),
    ("Panels and detail views", [
        ("Tab / shift+Tab move between panels (the focused one has a bright border); Enter "
         "opens its detail view: the full reading, an unavailable source's reason and fix, the "
         "fit budget per card with its what-if controls. Esc or q goes back."),
        ("Below 50 rows the main screen shows each panel compactly; from 160 columns it uses "
         "two columns."),
    ]),
    ("Fit budget panel", [
        ("Tab moves into the what-if controls (PLE placement, util, TP, context, seqs); the "
         "budget recomputes as you type; a blank or invalid field uses the profile's value. "
         "Escape leaves the field, so q, p, r and ? work again."),
        ("Bar: █ weights ▓ PLE ▒ reserve ░ KV cache · the part above gpu_memory_utilization; "
         "│ marks the usable limit."),
    ]),
    ("Command palette (ctrl+p)", [
        ("Pause or resume, refresh now, set the refresh interval (type e.g. 'interval 3'), "
         "open this help."),
    ]),
]
"""Help text after the key list: (heading, paragraphs)."""


class SeatCommands(Provider):
    """Command palette entries for the rarer console actions (pause, interval, help, refresh)."""

    def _commands(self) -> list[tuple[str, Callable[[], object], str]]:
        app = self.app
        assert isinstance(app, SeatConsoleApp)
        cmds: list[tuple[str, Callable[[], object], str]] = [
            ("Resume polling" if app.paused else "Pause polling", app.action_toggle_pause,
             "Stop or restart reading the node (same as p)"),
            ("Refresh now", app.action_refresh_now, "Read every source once now (same as r)"),
            ("Open help", app.action_help, "Keys and how to read the panels (same as ?)"),
            ("Open the evidence report", app.action_evidence,
             "The newest comparison's (else probe run's) report, read-only (same as e)"),
        ]
        for s in INTERVAL_CHOICES_S:
            cmds.append((f"Set refresh interval to {s:g} s", partial(app.set_refresh_interval, s),
                         f"Poll every source every {s:g} s (now {app.interval_s:g} s)"))
        return cmds

    async def discover(self) -> Hits:
        """Every command, for the palette's empty prompt."""
        for text, cb, help_ in self._commands():
            yield DiscoveryHit(text, cb, text=text, help=help_)

    async def search(self, query: str) -> Hits:
        """Fuzzy matches; ``interval N`` (N seconds, 0.1 to 3600) offers that interval, and only
        that one.

        A typed interval replaces the offered choices: the fuzzy matcher scores "interval 3"
        as high against "… to 30 s" as against "… to 3 s", so Enter would otherwise set 30 s.
        """
        matcher = self.matcher(query)
        typed: float | None = None
        words = query.lower().split()
        if len(words) == 2 and words[0] in {"interval", "refresh"}:
            try:
                s = float(words[1].removesuffix("s"))
            except ValueError:
                s = 0.0
            if REFRESH_INTERVAL_MIN_S <= s <= REFRESH_INTERVAL_MAX_S:
                typed = s
        for text, cb, help_ in self._commands():
            if typed is not None and text.startswith("Set refresh interval"):
                continue
            score = matcher.match(text)
            if score > 0:
                yield Hit(score, matcher.highlight(text), cb, text=text, help=help_)
        if typed is not None:
            text = f"Set refresh interval to {typed:g} s"
            assert isinstance(self.app, SeatConsoleApp)
            score = max(matcher.match(text), 1.0)
            yield Hit(score, matcher.highlight(text), partial(self.app.set_refresh_interval, typed),
                      text=text, help=f"Poll every source every {typed:g} s "
                                      f"(now {self.app.interval_s:g} s)")


class MainScreen(Screen[None]):
    """The console's screen; redraws panels that changed while a modal was open."""

    def on_screen_resume(self) -> None:
        """Back from help or the palette: draw what arrived meanwhile."""
        app = self.app
        if isinstance(app, SeatConsoleApp):
            app.redraw_dirty()

    def on_resize(self, event: object) -> None:
        """Compact or full panels, one or two columns, "too small" — by the new size."""
        app = self.app
        if isinstance(app, SeatConsoleApp):
            app.apply_size(self.size.width, self.size.height)


class SeatConsoleApp(App[int]):
    """Seat Console: header, one panel per :data:`PANELS` entry, footer, help and palette.

    Parameters: ``loaded`` the seat profile; ``readonly`` hides node actions; ``interval`` the
    refresh interval in seconds (``None`` → the profile's ``console.refresh_interval_s``);
    ``panels`` overrides :data:`PANELS` (tests); ``clock`` returns the current UTC time
    (tests inject a fixed one for deterministic ages); ``age_tick_s`` how often ages are redrawn
    (s); ``watch_terminal`` exits on SIGHUP / a dead terminal (off in headless tests);
    ``compact`` forces the panels' compact (True) or full (False) forms (``None``: by size).
    """

    TITLE = "Seat Console"
    COMMANDS = App.COMMANDS | {SeatCommands}
    HORIZONTAL_BREAKPOINTS: ClassVar[list[tuple[int, str]]] = [(0, "-narrow"),
                                                                (WIDE_FROM_COLS, "-wide")]

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("q", "quit", "quit", id="quit"),
        Binding("ctrl+q", "quit", "quit", show=False, id="quit-ctrl", priority=True),
        Binding("p", "pause", "pause", id="toggle-pause"),
        Binding("p", "resume", "resume", id="resume"),
        Binding("r", "refresh_now", "refresh", id="refresh-now"),
        Binding("question_mark", "help", "help", key_display="?", id="help"),
        Binding("ctrl+p", "command_palette", "palette", show=False, id="command-palette",
                priority=True),
        Binding("escape", "leave_field", "leave field", key_display="Esc", id="leave-field"),
        Binding("P", "probe", "probe", id="node.probe"),
        Binding("B", "build_backport", "build backport", id="node.build-backport"),
        Binding("S", "swap", "swap seat", id="node.swap"),
        Binding("R", "restore", "restore seat", id="node.restore"),
        Binding("e", "evidence", "evidence", id="evidence"),
        Binding("H", "hold", "hold", id="node.hold"),
        Binding("U", "release", "release hold", id="node.release"),
    ]
    """Keys of the main screen. To add one: a ``Binding(key, action, description, id=...)``
    here and an ``action_<action>`` method; an id starting with :data:`NODE_ACTION_PREFIX`
    marks a key that changes the node (hidden under ``--readonly``)."""

    CSS = """
    #panels { height: 1fr; }
    .panel-row { height: auto; layout: vertical; }
    Screen.-wide .panel-row { layout: horizontal; }
    Screen.-wide .panel-row > SourcePanel { width: 1fr; }
    #too-small { display: none; height: 1fr; content-align: center middle; text-style: bold; }
    Screen.-too-small #too-small { display: block; }
    Screen.-too-small #panels, Screen.-too-small #status-line { display: none; }
    """

    def __init__(self, loaded: LoadedProfile, *, readonly: bool = False,
                 interval: float | None = None,
                 panels: list[tuple[SourceFactory, type[SourcePanel]]] | None = None,
                 clock: Callable[[], datetime] = utcnow, age_tick_s: float = 1.0,
                 watch_terminal: bool = True, compact: bool | None = None) -> None:
        super().__init__()
        if self.no_color:   # Textual's greys make red DOWN/OVER invisible: see widgets.nocolor
            from textual.filter import Monochrome, NoColor

            self._filters = [NoColorAlarms() if isinstance(f, Monochrome | NoColor) else f
                             for f in self._filters]
        if interval is not None and not interval > 0:
            raise ValueError(f"interval {interval!r}: must be a positive number of seconds")
        self.loaded = loaded
        self.readonly = readonly
        self.node = take_context(loaded) or NodeContext.from_profile(loaded)
        """The one node context (transport, Alertmanager client, docker client factory and event
        watcher, NVML gateway) shared by the sources (their factories' ``context=``) and the
        actions the keys run (hold, release, swap, restore, probe); closed after the sources by
        :meth:`close_sources`. Nothing connects until first used."""
        self.interval_s: float = interval or loaded.profile.console.refresh_interval_s
        self.paused: bool = False
        self.clock = clock
        self.age_tick_s = age_tick_s
        self.watch_terminal = watch_terminal
        self._panel_specs = [as_spec(e) for e in (PANELS if panels is None else panels)]
        self._states: dict[str, SourceState] = {}
        self._pollers: dict[str, Poller] = {}
        self._shutting_down = False
        self._tty_fd: int | None = None
        self._compact: bool | None = None
        self.force_compact = compact
        """``None``: compact panels below :data:`COMPACT_BELOW_ROWS` rows; True / False: always
        / never (tests of a panel's full view)."""
        self.readings = LatestReadings()
        self.hold_reader: Callable[[], object | None] | None = None
        """Set by the hold feature (issue 7): returns the active hold (attributes ``active``
        and ``until``, UTC) or ``None``; while unset the status line says "hold n/a"."""
        self._fit_signature: object = None
        self._fit_comparison: object = None
        self._build_states()

    # -- construction ---------------------------------------------------------------------
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
            st = SourceState(key=key, source=source, panel=panel, spec=spec,
                             delay_s=self.interval_s)
            if source is None and spec.eager:   # read before the first frame is drawn
                early = (take_prestarted(spec.source, self.loaded)
                         if isinstance(spec.source, str) else None)
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
        """Worker thread: the source and first reading :mod:`seat_console.early` started
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

    def get_driver_class(self) -> type:
        """Textual's driver, except on a Linux terminal :class:`~seat_console.quiet_driver.
        QuietLinuxDriver` (its input thread wakes once a second while nobody types instead of
        ten times; keys and exit as fast as before). ``SEAT_CONSOLE_TEXTUAL_DRIVER=1`` in the
        environment keeps Textual's own driver (a way out if a terminal misbehaves)."""
        cls = super().get_driver_class()
        from textual.drivers.linux_driver import LinuxDriver

        if cls is LinuxDriver and not os.environ.get("SEAT_CONSOLE_TEXTUAL_DRIVER"):
            from seat_console.quiet_driver import QuietLinuxDriver

            return QuietLinuxDriver
        return cls

    def get_default_screen(self) -> Screen:
        """The console's main screen (see :class:`MainScreen`)."""
        return MainScreen(id="main")

    def compose(self) -> ComposeResult:
        """Header, status line, the panels in a scrolling column (two at ≥ 160 columns),
        footer."""
        yield SeatHeader(id="header-text")
        yield StatusLine(id="status-line")
        yield Static(id="too-small")
        with VerticalScroll(id="panels"):
            row: list[SourcePanel] = []
            for st in self._states.values():   # span-1 panels pair up in the wide layout
                if "-span2" in st.panel.classes:
                    if row:
                        yield Horizontal(*row, classes="panel-row")
                        row = []
                    yield st.panel
                    continue
                row.append(st.panel)
                if len(row) == 2:
                    yield Horizontal(*row, classes="panel-row")
                    row = []
            if row:
                yield Horizontal(*row, classes="panel-row")
        yield SeatFooter(compact=True)   # below 150 columns: the rare node keys on ? only

    def on_mount(self) -> None:
        """Draw the header, start the sources that are built (the GPU one first), and after
        the first frame build and start the others; start the age ticker."""
        self.update_header()
        self.update_status()
        self._schedule_age_tick()
        if self.watch_terminal and not self.is_headless:
            self._install_hangup_watch()
        for key, st in self._states.items():
            if st.source is not None or st.prebuilt is not None:
                self._start_poll(key)
        first = next(iter(self._states.values()), None)
        if first is not None:   # a focused panel: visible, and the keys scroll the column
            first.panel.focus()
        self.call_after_refresh(self._start_deferred)

    def _start_deferred(self) -> None:
        """After the first frame: build (in their poll threads) and read the other sources."""
        for key, st in self._states.items():
            if st.source is None and st.prebuilt is None:
                self._start_poll(key)

    # -- size -----------------------------------------------------------------------------
    def apply_size(self, width: int, height: int) -> None:
        """Compact panels below :data:`COMPACT_BELOW_ROWS` rows; "too small" below
        :data:`MIN_COLS` × :data:`MIN_ROWS` (saying so, and what is needed)."""
        small = width < MIN_COLS or height < MIN_ROWS
        self.screen.set_class(small, "-too-small")
        if small:
            try:
                self.query_one("#too-small", Static).update(Text(
                    f"Terminal {width}×{height} is too small for the seat's status line: "
                    f"make it at least {MIN_COLS}×{MIN_ROWS} (q quits).", justify="center"))
            except NoMatches:
                pass
        compact = (height < COMPACT_BELOW_ROWS if self.force_compact is None
                   else self.force_compact)
        # a panel with compact_when_wide (the fit budget) stays compact in the two-column
        # layout too, so a big terminal shows every panel's headline on its first screen
        wide_compact = self.force_compact is None and width >= WIDE_FROM_COLS
        for st in self._states.values():   # set_compact: a no-op when unchanged
            st.panel.set_compact(compact or (wide_compact and st.panel.compact_when_wide))
        if compact != self._compact:
            self._compact = compact
            self.update_header()

    # -- the header -----------------------------------------------------------------------
    def update_header(self) -> None:
        """Redraw the header from the profile and the current state (PAUSED, READ-ONLY)."""
        p = self.loaded.profile
        ident = header_line(p)   # the same identity as the first frame's
        where = ("embedded default" if self.loaded.origin == "default"
                 else f"{self.loaded.source} ({self.loaded.origin})")
        detail = Text(f"endpoint {p.seat.endpoint} · profile {where} · "
                      f"sha256 {self.loaded.sha256[:8]}", style="dim")
        mode = Text()
        if self.readonly:
            mode.append(" READ-ONLY ", style="bold reverse")
            mode.append(" ")
        if self.paused:
            mode.append(" PAUSED ", style="bold reverse")
        else:
            mode.append(f"every {self.interval_s:g} s")
        grid = Table.grid(expand=True, padding=(0, 1))
        grid.add_column(ratio=1)
        grid.add_column(justify="right", no_wrap=True)
        grid.add_row(ident, mode)
        try:   # compact screens keep one header line: the detail is in help (?) and --json
            self.query_one("#header-text", Static).update(grid if self._compact else
                                                          Group(grid, detail))
        except NoMatches:  # not mounted yet (called before on_mount); drawn on mount
            log.debug("header not mounted yet")

    def update_status(self) -> None:
        """Redraw the one-glance status line from the newest readings (no I/O; only when its
        text changes)."""
        def good(key: str) -> BaseModel | None:
            st = self._states.get(key)
            return None if st is None else st.reading

        hold: object = None
        hold_known = self.hold_reader is not None
        if self.hold_reader is not None:
            try:
                hold = self.hold_reader()
            except Exception:  # noqa: BLE001 - the status line must not break the app
                log.warning("hold reader failed", exc_info=True)
                hold = "error"
        elif "actions" in self._states:   # the journal, as the action-log panel reads it
            actions = self._states["actions"].reading
            hold_known = actions is not None and not isinstance(actions, Unavailable)
            hold = getattr(actions, "hold", None) if hold_known else None
        facts = build_status(engine=good("engine"), containers=good("containers"),
                             timers=good("timers"), silences=good("silences"),
                             fit=self._fit_comparison, hold=hold,
                             hold_known=hold_known, now=self.clock())
        try:
            self.query_one("#status-line", StatusLine).show_facts(facts)
        except NoMatches:
            log.debug("status line not mounted yet")

    def _update_fit_summary(self, reading: BaseModel | None) -> None:
        """Recompute the profile's fit verdict for the status line, only when the fit inputs
        changed (:func:`seat_console.widgets.fit.fit_signature`)."""
        from seat_console.widgets.fit import fit_signature

        sig = fit_signature(reading)
        if sig == self._fit_signature:
            return
        self._fit_signature = sig
        if sig is None:
            self._fit_comparison = None
            return
        from seat_console.fit.inputs import compute_budgets

        try:
            self._fit_comparison, _ = compute_budgets(reading)  # type: ignore[arg-type]
        except Exception:  # noqa: BLE001 - the panel shows the error; the line says n/a
            log.warning("fit summary failed", exc_info=True)
            self._fit_comparison = None

    # -- polling ----------------------------------------------------------------------------
    @property
    def states(self) -> dict[str, SourceState]:
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
        st.busy_since = self.clock()
        st.manual = manual
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

    @on(SourceReading)
    def _on_reading(self, message: SourceReading) -> None:
        st = self._states.get(message.key)
        if st is None:
            return
        if message.source is not None and st.source is None:
            st.source = message.source
        manual, st.manual = st.manual, False
        st.busy_since = None
        st.polls += 1
        # a half-failed read keeps the last good value of the parts it missed, marked stale
        reading = merge_last_good(message.reading, st.last_good)
        unchanged = same_reading(reading, st.reading)
        st.reading = reading
        st.reading_at = message.finished_at
        if isinstance(reading, Unavailable):
            if not manual:   # a refresh asked for with r never counts as a failure
                st.consecutive_errors += 1
        else:
            st.consecutive_errors = 0
            st.last_good = reading
            st.last_good_at = message.finished_at
            self.readings.put(st.key, reading)
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
        self._after_change(st)

    def _after_change(self, st: SourceState) -> None:
        """A source's reading changed: refresh what depends on it (the status line; the fit
        summary; a fit re-read when the GPU totals moved)."""
        if st.key == "fit":
            self._update_fit_summary(st.last_good)
        if st.key == "actions":
            self._show_hold_banner(st.last_good)
        if st.key == "gpus" and "fit" in self._states:
            from seat_console.widgets.fit import gpu_fit_signature

            sig = gpu_fit_signature(st.last_good)
            if sig != getattr(self, "_gpu_fit_sig", None):
                self._gpu_fit_sig = sig
                fit = self._states["fit"]
                if fit.source is not None and not self.paused:
                    self._start_poll("fit")
        if st.key in STATUS_SOURCES:
            self.update_status()

    @on(Worker.StateChanged)
    def _on_worker_state(self, event: Worker.StateChanged) -> None:
        """A poll worker that failed outside ``read`` (a bug): show it, keep polling. One
        that was cancelled (exclusive restart, app shutting down) no longer leaves its source
        marked busy — which stopped that source from ever being polled again."""
        name = event.worker.name or ""
        if not name.startswith("poll:") or event.state not in (WorkerState.ERROR,
                                                               WorkerState.CANCELLED):
            return
        key = name.removeprefix("poll:")
        st = self._states.get(key)
        if st is None:
            return
        if event.state == WorkerState.CANCELLED:
            if any(w is not event.worker and w.name == name and w.state in (
                    WorkerState.PENDING, WorkerState.RUNNING) for w in self.workers):
                return   # a newer poll of this source is already under way
            st.busy_since = None
            st.manual = False
            if not self._shutting_down:
                self._schedule_next(st)
            return
        err = event.worker.error
        started = st.busy_since or self.clock()
        self.post_message(SourceReading(key, Unavailable(
            source=key, kind="error", reason=f"poll failed: {type(err).__name__}: {err}"),
            started, self.clock()))

    def _schedule_next(self, st: SourceState) -> None:
        interval = max(self.interval_s, st.spec.min_interval_s if st.spec else 0.0)
        st.delay_s = next_delay(interval, st.consecutive_errors)
        if self.paused or self._shutting_down or st.busy_since is not None:
            return
        st.timer = PollTimer(asyncio.get_running_loop(), st.delay_s,
                             partial(self._start_poll, st.key))

    def _draw(self, st: SourceState) -> None:
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

    def _show_age(self, st: SourceState, now: datetime) -> None:
        # while paused, readings age but are not "stale": the engineer stopped the polling
        stale_after = (float("inf") if self.paused and st.busy_since is None
                       else max(STALE_FACTOR * max(self.interval_s, st.delay_s), STALE_MIN_S))
        st.panel.fresh_s = max(2.0, 2 * max(self.interval_s, st.delay_s))
        st.panel.show_age(now, stale_after_s=stale_after, busy_since=st.busy_since,
                          retry_s=st.delay_s if st.consecutive_errors else None)

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
            self.tick_ages()
        except Exception:  # noqa: BLE001 - a broken tick must not stop the ages
            log.warning("age tick failed", exc_info=True)
        finally:
            self._schedule_age_tick()

    def tick_ages(self) -> None:
        """Redraw every panel's age / STALE mark (runs on the UI thread; no I/O)."""
        now = self.clock()
        for st in self._states.values():
            self._show_age(st, now)
        screen = self.screen if self.screen_stack else None
        if isinstance(screen, DetailScreen):   # its relative times move too (to the second)
            screen.panel.show_age(now)
        self.update_status()   # "ends in 2 h 10 min" moves by the minute; unchanged text: no-op
        if self._tty_fd is not None and not self._shutting_down:
            self._check_terminal()

    # -- actions ----------------------------------------------------------------------------
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

    def action_leave_field(self) -> None:
        """Escape: leave the focused control (a what-if field takes q, p, r and ? as typing),
        so the console's keys work again. Focus moves to the panel around the field (never to
        nothing), so the arrow keys and PgUp/PgDn keep scrolling."""
        focused = self.screen.focused
        node = focused.parent if focused is not None else None
        while node is not None and not isinstance(node, SourcePanel):
            node = node.parent
        if isinstance(node, SourcePanel):
            node.focus()
        else:
            try:
                self.query_one("#panels", VerticalScroll).focus()
            except NoMatches:
                self.screen.set_focus(None)

    def action_open_detail(self) -> None:
        """Enter on a focused panel: open its full view (:class:`DetailScreen`)."""
        if isinstance(self.screen, DetailScreen):
            return
        node = self.screen.focused
        while node is not None and not isinstance(node, SourcePanel):
            node = node.parent
        st = next((s for s in self._states.values() if s.panel is node), None)
        if st is None:
            return
        spec_panel = type(st.panel)
        panel = spec_panel(loaded=self.loaded, id=f"detail-{st.key}")
        panel.detail = True
        screen = DetailScreen(st.key, panel)
        self.push_screen(screen)
        self.call_after_refresh(lambda: panel.show(st.reading, st.last_good, st.last_good_at,
                                                   now=self.clock(), reading_at=st.reading_at))

    def action_probe(self) -> None:
        """The probe key (hidden under ``--readonly``): preflight, confirm, then the live probe
        panel (``seat_console.probe.tui``); again while it runs reopens the panel."""
        from seat_console.probe.tui import attach

        attach(self)()

    def action_build_backport(self) -> None:
        """``B`` (hidden under ``--readonly``): plan, confirm, build the profile's backport
        (``seat_console.swap_tui``)."""
        from seat_console.swap_tui import attach as swap_attach

        swap_attach(self, "build")()

    def action_swap(self) -> None:
        """``S`` (hidden under ``--readonly``): plan, typed confirmation (the seat's name),
        then the seat swap with its log on screen (``seat_console.swap_tui``)."""
        from seat_console.swap_tui import attach as swap_attach

        swap_attach(self, "swap")()

    def action_restore(self) -> None:
        """``R`` (hidden under ``--readonly``): plan, confirm, restore the resident and release
        the hold (``seat_console.swap_tui``)."""
        from seat_console.swap_tui import attach as swap_attach

        swap_attach(self, "restore")()

    def action_hold(self) -> None:
        """``H`` (hidden under ``--readonly``): plan, confirm, place the hold as a lease
        (``seat_console.hold_tui``); progress in the action-log panel."""
        from seat_console.hold_tui import attach as hold_attach

        hold_attach(self).key("hold")

    def action_release(self) -> None:
        """``U`` (hidden under ``--readonly``): plan, confirm, release the hold."""
        from seat_console.hold_tui import attach as hold_attach

        hold_attach(self).key("release")

    def _show_hold_banner(self, reading: BaseModel | None) -> None:
        """Put "held by the console until …" on the timers and silences panels (or take it
        off) and redraw them when it changed."""
        h = getattr(reading, "hold", None)
        banner = h.banner if h is not None and h.state == "active" else None
        for key in ("timers", "silences"):
            st = self._states.get(key)
            if st is None or getattr(st.panel, "hold_banner", None) == banner:
                continue
            st.panel.hold_banner = banner
            if st.reading is not None:
                self._draw(st)

    def action_evidence(self) -> None:
        """``e``: the read-only evidence report of the newest comparison (else probe run);
        built in a worker by :class:`~seat_console.widgets.evidence.EvidenceScreen`."""
        from seat_console.widgets.evidence import EvidenceScreen

        if not isinstance(self.screen, EvidenceScreen):
            self.push_screen(EvidenceScreen())

    def action_help(self) -> None:
        """``?``: open the help screen."""
        if not isinstance(self.screen, HelpScreen):
            self.push_screen(HelpScreen(self.help_keys()))

    def help_keys(self) -> list[tuple[str, str]]:
        """``(keys, description)`` per action offered now (node actions hidden if read-only);
        keys of one action are joined with " / ", and so are the actions of one key (p: pause /
        resume)."""
        rows: dict[str, tuple[list[str], str]] = {}
        for b in filter_action_bindings(self.BINDINGS, self.readonly):
            if isinstance(b, Binding):
                key = b.key_display or self.get_key_display(b)
                keys, _ = rows.setdefault(b.action, ([], b.description or b.action))
                keys.append(key)
        merged: dict[str, list[str]] = {}   # one key, two actions (p pause / resume): one row
        for keys, what in rows.values():
            merged.setdefault(" / ".join(keys), []).append(what)
        return [(keys, " / ".join(whats)) for keys, whats in merged.items()]

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

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """Under ``--readonly`` node actions are neither shown nor run; ``p`` offers pause or
        resume (whichever applies); "Esc leave field" shows only inside a field."""
        if action == "pause":
            return not self.paused
        if action == "resume":
            return self.paused
        if action == "leave_field":
            return self.screen_stack and _is_field(self.screen.focused)
        return not (self.readonly and action in self._node_action_names())

    def _node_action_names(self) -> set[str]:
        return {b.action for b in self.BINDINGS if isinstance(b, Binding) and is_node_action(b)}

    # -- terminal gone ----------------------------------------------------------------------
    def _install_hangup_watch(self) -> None:
        try:
            asyncio.get_running_loop().add_signal_handler(signal.SIGHUP, self.terminal_gone,
                                                          "SIGHUP")
        except (NotImplementedError, RuntimeError, ValueError):
            log.debug("cannot install SIGHUP handler")
        fd = sys.__stdout__.fileno() if sys.__stdout__ is not None else None
        if fd is not None and os.isatty(fd):
            self._tty_fd = fd

    def _check_terminal(self) -> None:
        assert self._tty_fd is not None
        try:
            termios.tcgetattr(self._tty_fd)
        except (termios.error, OSError):
            self.terminal_gone("terminal stopped answering")

    def terminal_gone(self, why: str = "terminal gone") -> None:
        """The terminal went away: exit now; end the process if the exit itself hangs."""
        if self._shutting_down:
            return
        self._shutting_down = True
        log.warning("exiting: %s", why)

        def watchdog() -> None:
            for rb in in_flight():   # a runbook stops after its current step and undoes
                rb.request_stop()
            threading.Event().wait(HANGUP_EXIT_GRACE_S)
            # before ending the process: let a runbook in flight finish its step, or journal
            # exactly where it was cut off (seat-console recover picks it up)
            stop_in_flight(RUNBOOK_STOP_GRACE_S)
            os._exit(EXIT_HANGUP_FORCED)

        threading.Thread(target=watchdog, name="seat-console-hangup", daemon=True).start()
        # Point stdin/stdout/stderr at /dev/null so Textual's writer thread and its restoring of
        # the terminal do not block or fail on the dead terminal; the exit can then run cleanly.
        if self._tty_fd is not None:
            try:
                devnull = os.open(os.devnull, os.O_RDWR)
                for fd in (0, 1, 2):
                    os.dup2(devnull, fd)
                os.close(devnull)
            except OSError:
                log.debug("could not detach from the dead terminal", exc_info=True)
        self._unblock_dead_writer()
        self.exit(return_code=EXIT_HANGUP)

    def _unblock_dead_writer(self) -> None:
        """If Textual's output thread already died writing to the dead terminal, drain its
        queue so the exit's last writes (restoring the terminal) cannot block the UI thread.
        Best effort on Textual internals; the watchdog in :meth:`terminal_gone` backs it up."""
        writer = getattr(self._driver, "_writer_thread", None)
        queue = getattr(writer, "_queue", None)
        if writer is None or queue is None or writer.is_alive():
            return

        def drain() -> None:
            while True:
                queue.get()

        threading.Thread(target=drain, name="seat-console-drain", daemon=True).start()

    # -- shutdown ---------------------------------------------------------------------------
    def close_sources(self, timeout_s: float = 2.0) -> None:
        """Call every source's ``close()`` in daemon threads, waiting at most ``timeout_s``."""
        self._shutting_down = True
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


def run_app(loaded: LoadedProfile, readonly: bool = False, interval: float | None = None) -> int:
    """Run the TUI on ``loaded`` until the user quits; return the exit code (0 ok,
    :data:`EXIT_HANGUP` when the terminal went away).

    ``interval`` (seconds) overrides the profile's ``console.refresh_interval_s``.
    """
    app = SeatConsoleApp(loaded, readonly=readonly, interval=interval)
    try:
        rc = app.run()
    finally:
        stop_in_flight(RUNBOOK_STOP_GRACE_S)   # a runbook worker must not die with the process
        app.close_sources()
    if app.return_code not in (None, 0):
        return app.return_code
    return rc or 0


__all__ = [
    "BACKOFF_MAX_S",
    "BACKOFF_MIN_S",
    "EXIT_HANGUP",
    "EXIT_HANGUP_FORCED",
    "NODE_ACTION_PREFIX",
    "PANELS",
    "DetailScreen",
    "HelpScreen",
    "LatestReading",
    "LatestReadings",
    "PanelSpec",
    "SeatConsoleApp",
    "SourceFactory",
    "SourceReading",
    "SourceState",
    "filter_action_bindings",
    "is_node_action",
    "next_delay",
    "make_fit_source",
    "read_guarded",
    "resolve_factory",
    "run_app",
    "same_reading",
    "takes_context",
]
