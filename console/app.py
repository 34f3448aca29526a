"""The Seat Console TUI: composes the panels, polls the sources, and stays responsive.

Shape (see ``../shared/DESIGN.md``): each entry of :data:`PANELS` pairs a source factory
(``make_source(loaded_profile) -> Source``) with the :class:`~seat_console.widgets.panel.SourcePanel`
subclass that draws it. For every entry the app

* polls the source's blocking ``read()`` in a thread of its own, started by a Textual worker
  (``run_worker(..., exclusive=True, exit_on_error=False)``, one worker group per source);
* schedules the next poll only when the last one has finished (``set_timer``), so polls of one
  source never overlap, and backs off after unavailable readings (:func:`next_delay`);
* gets the result back as a :class:`SourceReading` message and, on the UI thread, keeps per
  source the last reading, the last good reading and its time, then calls the panel's
  :meth:`~seat_console.widgets.panel.SourcePanel.show`;
* once a second (no I/O) refreshes every panel's age, so a read that hangs only stales its own
  panel ("STALE · reading for 40 s") while keys and the other panels keep working.

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
from textual.containers import VerticalScroll
from textual.css.query import NoMatches
from textual.message import Message
from textual.screen import ModalScreen, Screen
from textual.timer import Timer
from textual.widgets import Footer, Static
from textual.worker import Worker, WorkerState

from seat_console.sources import containers as containers_source
from seat_console.sources import engine as engine_source
from seat_console.sources import fit_source
from seat_console.sources import silences as silences_source
from seat_console.sources import timers as timers_source
from seat_console.sources.gpu import make_source as make_gpu_source
from seat_console.profile import (
    REFRESH_INTERVAL_MAX_S,
    REFRESH_INTERVAL_MIN_S,
    LoadedProfile,
)
from seat_console.sources import BrokenSource, Source, Unavailable, utcnow
from seat_console.widgets.fit import FitPanel
from seat_console.widgets.gpu import GpuPanel
from seat_console.widgets.panel import STALE_FACTOR, STALE_MIN_S, SourcePanel
from seat_console.widgets.services import ContainersPanel, EnginePanel, SilencesPanel, TimersPanel

log = logging.getLogger(__name__)

SourceFactory = Callable[[LoadedProfile], Source]
"""``make_source(loaded_profile) -> Source``: builds one source from the seat profile."""

PANELS: list[tuple[SourceFactory, type[SourcePanel]]] = [
    (make_gpu_source, GpuPanel),
    (engine_source.make_source, EnginePanel),
    (containers_source.make_source, ContainersPanel),
    (timers_source.make_source, TimersPanel),
    (silences_source.make_source, SilencesPanel),
    (fit_source.make_source, FitPanel),
]
"""The panels the app shows, top to bottom: ``(make_source, PanelClass)`` pairs.

To add a panel, append one line, e.g. ``(seat_console.sources.timers.make_source, TimersPanel),``.
"""

BACKOFF_MIN_S = 5.0
"""Shortest wait in seconds before polling a source again after an unavailable reading."""

BACKOFF_MAX_S = 30.0
"""Longest wait in seconds between polls of a failing source (unless the interval is longer)."""

HANGUP_EXIT_GRACE_S = 5.0
"""Seconds a clean exit may take after the terminal went away before the process is ended."""

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


def next_delay(interval_s: float, consecutive_errors: int) -> float:
    """Seconds to wait before the next poll of a source.

    ``interval_s``: the refresh interval (s). ``consecutive_errors``: how many readings in a row
    were unavailable. No errors → ``interval_s``. Otherwise exponential back-off from the
    interval, clamped to [:data:`BACKOFF_MIN_S`, :data:`BACKOFF_MAX_S`] and never shorter than
    the interval: ``max(interval, min(max(interval × 2^errors, 5), 30))`` — at 1 s: 5, 5, 8,
    16, 30, 30… (the rule of ``../shared/STYLE.md``, made exponential).
    """
    if consecutive_errors <= 0:
        return interval_s
    grown = interval_s * (2.0 ** min(consecutive_errors, 16))
    return max(interval_s, min(max(grown, BACKOFF_MIN_S), BACKOFF_MAX_S))


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
    source: Source
    panel: SourcePanel
    reading: BaseModel | None = None
    reading_at: datetime | None = None
    last_good: BaseModel | None = None
    last_good_at: datetime | None = None
    busy_since: datetime | None = None
    consecutive_errors: int = 0
    polls: int = 0
    delay_s: float = 0.0
    timer: Timer | None = None
    dirty: bool = False


class SourceReading(Message):
    """A poll finished: ``key`` names the source, ``reading`` is its model or Unavailable.

    ``started_at`` / ``finished_at`` are UTC times from the app's clock.
    """

    def __init__(self, key: str, reading: BaseModel, started_at: datetime,
                 finished_at: datetime) -> None:
        super().__init__()
        self.key = key
        self.reading = reading
        self.started_at = started_at
        self.finished_at = finished_at


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
        t.append("Seat Console — help\n\n", style="bold")
        t.append("Keys\n", style="bold underline")
        for key, what in self._keys:
            t.append(f"  {key:<14}", style="bold")
            t.append(f"{what}\n")
        for heading, paragraphs in HELP_SECTIONS:
            t.append(f"\n{heading}\n", style="bold underline")
            for para in paragraphs:
                t.append(f"• {para}\n")
        with VerticalScroll():
            yield Static(t, id="help-text")


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
         "value dimmed. A failing source is retried less often (5 s, growing to 30 s)."),
        ("PAUSED: nothing is read until you press p again. READ-ONLY: no action that changes "
         "the node is offered."),
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


class SeatConsoleApp(App[int]):
    """Seat Console: header, one panel per :data:`PANELS` entry, footer, help and palette.

    Parameters: ``loaded`` the seat profile; ``readonly`` hides node actions; ``interval`` the
    refresh interval in seconds (``None`` → the profile's ``console.refresh_interval_s``);
    ``panels`` overrides :data:`PANELS` (tests); ``clock`` returns the current UTC time
    (tests inject a fixed one for deterministic ages); ``age_tick_s`` how often ages are redrawn
    (s); ``watch_terminal`` exits on SIGHUP / a dead terminal (off in headless tests).
    """

    TITLE = "Seat Console"
    COMMANDS = App.COMMANDS | {SeatCommands}
    HORIZONTAL_BREAKPOINTS: ClassVar[list[tuple[int, str]]] = [(0, "-narrow"), (150, "-wide")]

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("q", "quit", "quit", id="quit"),
        Binding("ctrl+q", "quit", "quit", show=False, id="quit-ctrl", priority=True),
        Binding("p", "toggle_pause", "pause", id="toggle-pause"),
        Binding("r", "refresh_now", "refresh", id="refresh-now"),
        Binding("question_mark", "help", "help", key_display="?", id="help"),
        Binding("ctrl+p", "command_palette", "palette", show=False, id="command-palette",
                priority=True),
        Binding("escape", "leave_field", "leave field", show=False, id="leave-field"),
    ]

    CSS = """
    #panels { height: 1fr; }
    """

    def __init__(self, loaded: LoadedProfile, *, readonly: bool = False,
                 interval: float | None = None,
                 panels: list[tuple[SourceFactory, type[SourcePanel]]] | None = None,
                 clock: Callable[[], datetime] = utcnow, age_tick_s: float = 1.0,
                 watch_terminal: bool = True) -> None:
        super().__init__()
        if interval is not None and not interval > 0:
            raise ValueError(f"interval {interval!r}: must be a positive number of seconds")
        self.loaded = loaded
        self.readonly = readonly
        self.interval_s: float = interval or loaded.profile.console.refresh_interval_s
        self.paused: bool = False
        self.clock = clock
        self.age_tick_s = age_tick_s
        self.watch_terminal = watch_terminal
        self._panel_specs = list(PANELS if panels is None else panels)
        self._states: dict[str, SourceState] = {}
        self._shutting_down = False
        self._tty_fd: int | None = None
        self._build_states()

    # -- construction ---------------------------------------------------------------------
    def _build_states(self) -> None:
        for i, (factory, panel_cls) in enumerate(self._panel_specs):
            try:
                source = factory(self.loaded)
            except Exception as exc:
                log.warning("source factory %r failed", factory, exc_info=True)
                source = BrokenSource(panel_cls.source_name,
                                      f"could not set up: {type(exc).__name__}: {exc}")
            key = source.name if source.name not in self._states else f"{source.name}-{i}"
            panel = panel_cls(loaded=self.loaded, id=f"panel-{key}")
            self._states[key] = SourceState(key=key, source=source, panel=panel,
                                            delay_s=self.interval_s)

    def get_default_screen(self) -> Screen:
        """The console's main screen (see :class:`MainScreen`)."""
        return MainScreen(id="main")

    def compose(self) -> ComposeResult:
        """Header, the panels in a scrolling column, footer."""
        yield SeatHeader(id="header-text")
        with VerticalScroll(id="panels"):
            for st in self._states.values():
                yield st.panel
        yield Footer()

    def on_mount(self) -> None:
        """Draw the header, start every source's first poll, start the age ticker."""
        self.update_header()
        self.set_interval(self.age_tick_s, self.tick_ages, name="age-ticker")
        if self.watch_terminal and not self.is_headless:
            self._install_hangup_watch()
        for key in self._states:
            self._start_poll(key)

    # -- the header -----------------------------------------------------------------------
    def update_header(self) -> None:
        """Redraw the header from the profile and the current state (PAUSED, READ-ONLY)."""
        p = self.loaded.profile
        ident = Text()
        ident.append("node ")
        ident.append(p.node.name, style="bold")
        ident.append(" · TP ")
        ident.append(str(p.seat.tensor_parallel_size), style="bold")
        ident.append(" · gpu_memory_utilization ")
        ident.append(f"{p.seat.gpu_memory_utilization:.2f}", style="bold")
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
        try:
            self.query_one("#header-text", Static).update(Group(grid, detail))
        except NoMatches:  # not mounted yet (called before on_mount); drawn on mount
            log.debug("header not mounted yet")

    # -- polling ----------------------------------------------------------------------------
    @property
    def states(self) -> dict[str, SourceState]:
        """Per-source state, by source key (read-only use: tests, commands)."""
        return self._states

    def _start_poll(self, key: str) -> None:
        """Start one read of source ``key`` unless one is in flight (UI thread)."""
        st = self._states[key]
        if st.timer is not None:
            st.timer.stop()
            st.timer = None
        if st.busy_since is not None or self._shutting_down:
            return
        st.busy_since = self.clock()
        self.run_worker(self._poll(key, st.busy_since), name=f"poll:{key}", group=f"poll:{key}",
                        exclusive=True, exit_on_error=False,
                        description=f"read source {key}")

    async def _poll(self, key: str, started_at: datetime) -> None:
        """Worker body: run the blocking read in its own daemon thread, post the result."""
        source = self._states[key].source
        fut = call_in_daemon_thread(partial(read_guarded, source), name=f"seat-console:{key}")
        reading = await asyncio.wrap_future(fut)
        self.post_message(SourceReading(key, reading, started_at, self.clock()))

    @on(SourceReading)
    def _on_reading(self, message: SourceReading) -> None:
        st = self._states.get(message.key)
        if st is None:
            return
        st.busy_since = None
        st.polls += 1
        st.reading = message.reading
        st.reading_at = message.finished_at
        if isinstance(message.reading, Unavailable):
            st.consecutive_errors += 1
        else:
            st.consecutive_errors = 0
            st.last_good = message.reading
            st.last_good_at = message.finished_at
        self._schedule_next(st)
        self._draw(st)

    @on(Worker.StateChanged)
    def _on_worker_state(self, event: Worker.StateChanged) -> None:
        """A poll worker that failed outside ``read`` (a bug): show it, keep polling."""
        name = event.worker.name or ""
        if not name.startswith("poll:") or event.state != WorkerState.ERROR:
            return
        key = name.removeprefix("poll:")
        st = self._states.get(key)
        if st is None:
            return
        err = event.worker.error
        started = st.busy_since or self.clock()
        self.post_message(SourceReading(key, Unavailable(
            source=key, kind="error", reason=f"poll failed: {type(err).__name__}: {err}"),
            started, self.clock()))

    def _schedule_next(self, st: SourceState) -> None:
        st.delay_s = next_delay(self.interval_s, st.consecutive_errors)
        if self.paused or self._shutting_down or st.busy_since is not None:
            return
        st.timer = self.set_timer(st.delay_s, partial(self._start_poll, st.key),
                                  name=f"next-poll:{st.key}")

    def _draw(self, st: SourceState) -> None:
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
        st.panel.show_age(now, stale_after_s=stale_after, busy_since=st.busy_since,
                          retry_s=st.delay_s if st.consecutive_errors else None)

    def tick_ages(self) -> None:
        """Redraw every panel's age / STALE mark (runs on the UI thread; no I/O)."""
        now = self.clock()
        for st in self._states.values():
            self._show_age(st, now)
        if self._tty_fd is not None and not self._shutting_down:
            self._check_terminal()

    # -- actions ----------------------------------------------------------------------------
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
        """``r``: read every idle source now (also while paused: one reading each)."""
        for key in self._states:
            self._start_poll(key)

    def action_leave_field(self) -> None:
        """Escape: leave the focused control (a what-if field takes q, p, r and ? as typing),
        so the console's keys work again. No-op when nothing is focused."""
        self.screen.set_focus(None)

    def action_help(self) -> None:
        """``?``: open the help screen."""
        if not isinstance(self.screen, HelpScreen):
            self.push_screen(HelpScreen(self.help_keys()))

    def help_keys(self) -> list[tuple[str, str]]:
        """``(keys, description)`` per action offered now (node actions hidden if read-only);
        keys of one action are joined with " / "."""
        rows: dict[str, tuple[list[str], str]] = {}
        for b in filter_action_bindings(self.BINDINGS, self.readonly):
            if isinstance(b, Binding):
                key = b.key_display or self.get_key_display(b)
                keys, _ = rows.setdefault(b.action, ([], b.description or b.action))
                keys.append(key)
        return [(" / ".join(keys), what) for keys, what in rows.values()]

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
        """Under ``--readonly`` node actions are neither shown nor run."""
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
            threading.Event().wait(HANGUP_EXIT_GRACE_S)
            os._exit(EXIT_HANGUP_FORCED)  # the terminal is gone; nothing left to restore

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
            t = threading.Thread(target=_close_quietly, args=(st.source,),
                                 name=f"seat-console-close:{st.key}", daemon=True)
            t.start()
            threads.append(t)
        deadline = time.monotonic() + timeout_s
        for t in threads:
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
    "HelpScreen",
    "SeatConsoleApp",
    "SourceFactory",
    "SourceReading",
    "SourceState",
    "filter_action_bindings",
    "is_node_action",
    "next_delay",
    "read_guarded",
    "run_app",
]
