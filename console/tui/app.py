"""The Seat Console TUI: composes the panels, the status line and the footer; routes keys.

Shape (see ``../shared/DESIGN.md``): the panel table is :data:`~seat_console.tui.panels.PANELS`;
the polling engine (a daemon thread per source, the next poll scheduled when the last one
finished, back-off) is :class:`~seat_console.tui.polling.PollingMixin`; the hang-up watchdog
:class:`~seat_console.tui.hangup.HangupMixin`; the keys, the help's key list, the footer's
choice of keys and the ``--readonly`` filter come from the one key table
(:mod:`seat_console.tui.keys`; a profile's ``[keys]`` remaps them through ``App.set_keymap``);
every node action runs through the one runbook controller (:mod:`seat_console.tui.runbook`),
which talks back with typed messages (``PlanReady``, ``RunbookEvent``, ``RunFinished``); the
help, detail, confirmation and log screens live in ``seat_console.widgets``.

Screen: header, the one-glance :class:`~seat_console.widgets.status.StatusLine`, the panels
(compact forms below :data:`COMPACT_BELOW_ROWS` rows, two columns from :data:`WIDE_FROM_COLS`
columns), footer. Enter on a focused panel opens its
:class:`~seat_console.widgets.detail.DetailScreen`.

The app holds no business rules and does no I/O on the UI thread.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable
from datetime import datetime
from typing import ClassVar

from textual import on
from textual.app import App, ComposeResult, SystemCommand
from textual.binding import BindingType
from textual.css.query import NoMatches
from textual.screen import Screen

from seat_console.node.context import NodeContext
from seat_console.core.profile import LoadedProfile
from seat_console.core.base import utcnow
from seat_console.tui import keys as keytable
from seat_console.tui.early import take_context
from seat_console.tui import first_frame
from seat_console.tui.first_frame import header_forms
from seat_console.tui.heap import FREEZE_AFTER_S, freeze_startup_heap
from seat_console.tui.hangup import HangupMixin, end_runbooks_on_exit
from seat_console.tui.palette import SeatCommands, with_console_quit
from seat_console.tui.panels import (
    PANELS,
    LatestReadings,
    SourceFactory,
    as_spec,
)
from seat_console.tui.polling import (
    STATUS_SOURCES,
    Poller,
    PollingMixin,
    SourceState,
)
from seat_console.tui.messages import PlanReady, RunbookEvent, RunFinished
from seat_console.tui.runbook import RunbookController
from seat_console.tui.runbook_state import Reader, RunbookStateMixin
from seat_console.tui.main_screen import WIDE_FROM_COLS, MainScreen, compose_main
from seat_console.widgets.detail import DetailScreen, is_field
from seat_console.tui.summary import SeatSummary, hold_banner
from seat_console.widgets.header import SeatHeader
from seat_console.widgets.help import HelpScreen
from seat_console.widgets.nocolor import NoColorAlarms
from seat_console.widgets.panel import SourcePanel
from seat_console.widgets.status import StatusLine

log = logging.getLogger(__name__)

class SeatConsoleApp(RunbookStateMixin, PollingMixin, HangupMixin, App[int]):
    """Seat Console: header, one panel per :data:`PANELS` entry, footer, help and palette.

    Parameters: ``loaded`` the seat profile; ``readonly`` hides node actions; ``interval`` the
    refresh interval in seconds (``None`` → the profile's ``console.refresh_interval_s``);
    ``panels`` overrides :data:`PANELS` (tests); ``clock`` returns the current UTC time
    (tests inject a fixed one for deterministic ages); ``age_tick_s`` how often ages are redrawn
    (s); ``watch_terminal`` exits on SIGHUP / a dead terminal (off in headless tests);
    ``compact`` forces the panels' compact (True) or full (False) forms (``None``: by size);
    ``runbook_reader(app)`` reads the runbook's state in a worker (``None``: the node's, tests
    give recorded ones; :mod:`seat_console.tui.runbook_state`).
    """

    TITLE = "Seat Console"
    ENABLE_COMMAND_PALETTE = True
    COMMANDS = App.COMMANDS | {SeatCommands}
    HORIZONTAL_BREAKPOINTS: ClassVar[list[tuple[int, str]]] = [(0, "-narrow"),
                                                                (WIDE_FROM_COLS, "-wide")]

    BINDINGS: ClassVar[list[BindingType]] = keytable.bindings()
    """Keys of the main screen, from the one key table (:data:`seat_console.tui.keys.KEYS`)."""

    CSS = """
    #panels { height: 1fr; }
    .panel-row { height: auto; layout: vertical; }
    Screen.-wide .panel-row { layout: horizontal; }
    Screen.-wide .panel-row > SourcePanel { width: 1fr; }
    #too-small { display: none; height: 1fr; content-align: center middle; text-style: bold; }
    Screen.-too-small #too-small { display: block; }
    Screen.-too-small #panels, Screen.-too-small #status-line,
    Screen.-too-small #runbook-strip { display: none; }
    """

    def __init__(self, loaded: LoadedProfile, *, readonly: bool = False,
                 interval: float | None = None,
                 panels: list[tuple[SourceFactory, type[SourcePanel]]] | None = None,
                 clock: Callable[[], datetime] = utcnow, age_tick_s: float = 1.0,
                 watch_terminal: bool = True, compact: bool | None = None,
                 runbook_reader: Reader | None = None) -> None:
        super().__init__()
        if self.no_color:   # Textual's greys make red DOWN/OVER invisible: see widgets.nocolor
            from textual.filter import Monochrome, NoColor

            self._filters = [NoColorAlarms() if isinstance(f, Monochrome | NoColor) else f
                             for f in self._filters]
        if interval is not None and not interval > 0:
            raise ValueError(f"interval {interval!r}: must be a positive number of seconds")
        # the profile's [keys], checked against the key table (KeymapError names the file)
        self.keymap = keytable.check_keymap(loaded.profile.keys, loaded.source)
        self.set_keymap(self.keymap)
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
        self.compact_layout: bool | None = None
        self.force_compact = compact
        """``None``: compact panels below :data:`COMPACT_BELOW_ROWS` rows; True / False: always
        / never (tests of a panel's full view)."""
        self.readings = LatestReadings()
        self.summary = SeatSummary()
        """The status line's facts and the fit verdict, derived from the readings."""
        self.runbook_reader = runbook_reader
        self.runbooks = RunbookController(self)
        """The one runbook controller: every node action's plan → confirm → run → notify."""
        self._build_states()

    def get_driver_class(self) -> type:
        """:func:`seat_console.tui.quiet_driver.driver_class` of Textual's choice."""
        from seat_console.tui.quiet_driver import driver_class

        return driver_class(super().get_driver_class())

    def get_system_commands(self, screen: Screen) -> Iterable[SystemCommand]:
        """Textual's palette commands, its Quit the console's (:func:`with_console_quit`)."""
        return with_console_quit(self, super().get_system_commands(screen), self.keymap)

    def get_default_screen(self) -> Screen:
        """The console's main screen (see :class:`MainScreen`)."""
        return MainScreen(id="main")

    def compose(self) -> ComposeResult:
        """The main screen's widgets (:func:`~seat_console.tui.main_screen.compose_main`)."""
        yield from compose_main(self)

    def on_mount(self) -> None:
        """Draw the header, start the sources that are built (the GPU one first), and after
        the first frame build and start the others; start the age ticker."""
        self.update_header()
        self.update_status()
        self._schedule_age_tick()
        if self.watch_terminal and not self.is_headless:
            self._install_hangup_watch()
        if not self.is_headless:
            self.set_timer(FREEZE_AFTER_S, freeze_startup_heap)
        self.start_polling()
        self.start_runbook_reads()
        first = next(iter(self._states.values()), None)
        if first is not None:   # a focused panel: visible, and the keys scroll the column
            first.panel.focus()
        # a Ctrl-C that came while Textual was still building its event loop: acted on now
        first_frame.run_pending_interrupt()

    # -- the header and the status line ------------------------------------------------------
    def update_header(self) -> None:
        """Redraw the header from the profile and the current state (PAUSED, READ-ONLY)."""
        try:
            self.query_one("#header-text", SeatHeader).draw(
                self.loaded, header_forms(self.loaded.profile), readonly=self.readonly, paused=self.paused,
                interval_s=self.interval_s, compact=bool(self.compact_layout))
        except NoMatches:  # not mounted yet (called before on_mount); drawn on mount
            log.debug("header not mounted yet")

    def update_status(self) -> None:
        """Redraw the one-glance status line from the newest readings (no I/O; only when its
        text changes)."""
        try:
            self.query_one("#status-line", StatusLine).show_facts(
                self.summary.facts(self._states, self.clock()))
        except NoMatches:
            log.debug("status line not mounted yet")

    def after_change(self, st: SourceState) -> None:
        """A source's reading changed: refresh what depends on it (the status line; the fit
        verdict; the hold banner; a fit re-read when the GPU totals moved)."""
        if st.key == "fit":
            self.summary.fit_changed(st.last_good)
        if st.key == "actions":
            self._show_hold_banner(hold_banner(st.last_good))
            if st.polls > 1:   # the journal moved: so may the runbook (not the first read)
                self.runbook_inputs_changed()
        if st.key == "gpus" and "fit" in self._states and self.summary.gpu_totals_moved(
                st.last_good):
            if self._states["fit"].source is not None and not self.paused:
                self._start_poll("fit")
        if st.key in STATUS_SOURCES:
            self.update_status()

    def tick_ages(self) -> None:
        """Every panel's age (the polling engine's), the status line ("ends in 2 h 10 min"
        moves by the minute; unchanged text is not redrawn), and whether the terminal still
        answers."""
        super().tick_ages()
        self.update_status()
        if self._tty_fd is not None and not self._shutting_down:
            self._check_terminal()

    def show_progress(self, title: str, lines: list[str]) -> None:
        """Show a runbook's steps in place in the action-log panel (if it is on screen)."""
        st = self._states.get("actions")
        if st is not None and hasattr(st.panel, "set_progress") and st.panel.is_mounted:
            st.panel.set_progress(title, lines)

    # -- the runbook controller's messages ----------------------------------------------------
    @on(PlanReady)
    def _plan_ready(self, message: PlanReady) -> None:
        self.runbooks.plan_ready(message)

    @on(RunbookEvent)
    def _runbook_event(self, message: RunbookEvent) -> None:
        self.runbooks.event(message)

    @on(RunFinished)
    def _run_finished(self, message: RunFinished) -> None:
        self.runbooks.finished(message)
        self.poll_now(*message.refresh)
        self.read_runbook_now()

    def push_screen(self, screen, callback=None, wait_for_dismiss=False):  # type: ignore[override]
        """Textual's ``push_screen``; an error notification does not outstay the screen it was
        shown over (it is cleared when another screen opens)."""
        self.clear_notifications()
        return super().push_screen(screen, callback, wait_for_dismiss=wait_for_dismiss)

    # -- actions ----------------------------------------------------------------------------
    def action_leave_field(self) -> None:
        """Escape: leave the focused control (a what-if field takes q, p, r and ? as typing),
        so the console's keys work again. Focus moves to the panel around the field (never to
        nothing), so the arrow keys and PgUp/PgDn keep scrolling."""
        focused = self.screen.focused
        node = focused.parent if focused is not None else None
        while node is not None and not isinstance(node, SourcePanel):
            node = node.parent
        if not isinstance(node, SourcePanel):   # the screen's first panel (the column around
            node = next(iter(self.screen.query(SourcePanel)), None)   # them is no Tab stop)
        self.screen.set_focus(node)

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
        panel.detail, panel.paused = True, self.paused
        panel.carry_over(st.panel)
        screen = DetailScreen(st.key, panel)
        self.push_screen(screen)
        self.call_after_refresh(lambda: panel.show(st.reading, st.last_good, st.last_good_at,
                                                   now=self.clock(), reading_at=st.reading_at))

    def action_probe(self) -> None:
        """``P``: preflight, confirm, then the live probe panel (again while it runs: reopen)."""
        self.runbooks.key("probe")

    def action_build_backport(self) -> None:
        """``B``: plan, confirm, build the profile's backport."""
        self.runbooks.key("build")

    def action_swap(self) -> None:
        """``S``: plan, typed confirmation (the seat's name), then the seat swap with its log."""
        self.runbooks.key("swap")

    def action_restore(self) -> None:
        """``R``: plan, confirm, restore the resident and release the hold."""
        self.runbooks.key("restore")

    def action_hold(self) -> None:
        """``H``: TTL and reason, plan, confirm, place the hold as a lease."""
        self.runbooks.key("hold")

    def action_release(self) -> None:
        """``U``: plan, confirm, release the hold."""
        self.runbooks.key("release")

    def _show_hold_banner(self, banner: str | None) -> None:
        """Put "held by the console until …" on the timers and silences panels (or take it
        off) and redraw them when it changed."""
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
        from seat_console.evidence.latest import build_markdown
        from seat_console.widgets.evidence import EvidenceScreen

        if not isinstance(self.screen, EvidenceScreen):
            self.push_screen(EvidenceScreen(lambda: build_markdown(None)))

    def action_help(self) -> None:
        """``?``: open the help screen."""
        if not isinstance(self.screen, HelpScreen):
            self.push_screen(HelpScreen(self.help_rows()))

    def help_keys(self) -> list[tuple[str, str]]:
        """``(keys, label)`` per action offered now (node actions hidden if read-only)."""
        return [(k, label) for k, label, _ in self.help_rows()]

    def help_rows(self) -> list[tuple[str, str, str]]:
        """``(keys, label, sentence)`` per action offered now, from the key table (keys as
        remapped by the profile's ``[keys]``)."""
        return keytable.help_rows(keytable.remapped(self.BINDINGS, self.keymap), self.readonly,
                                  lambda b: b.key_display or self.get_key_display(b))

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """Under ``--readonly`` node actions are neither shown nor run; ``p`` offers pause or
        resume (whichever applies); "Esc leave field" shows only inside a field."""
        if action == "pause":
            return not self.paused
        if action == "resume":
            return self.paused
        if action == "leave_field":
            return self.screen_stack and is_field(self.screen.focused)
        return not (self.readonly and action in self._node_action_names())

    def _node_action_names(self) -> set[str]:
        return keytable.node_actions(self.BINDINGS)


def run_app(loaded: LoadedProfile, readonly: bool = False, interval: float | None = None) -> int:
    """Run the TUI on ``loaded`` until the user quits; return the exit code (0 ok,
    :data:`EXIT_HANGUP` when the terminal went away, 130 on a SIGINT while it runs).

    ``interval`` (seconds) overrides the profile's ``console.refresh_interval_s``.
    """
    app = SeatConsoleApp(loaded, readonly=readonly, interval=interval)

    # a SIGINT while Textual runs (before its raw mode makes Ctrl-C a key, or `kill -INT`):
    # Textual's own exit, code 130, so its driver restores the terminal (issue #22)
    def interrupted() -> None:
        # asked again every 0.5 s until the loop ends: an exit asked for before Textual's
        # message processing has begun (or while its screen is being built) was lost, and the
        # app ran on (a hang in the 50-instant pty test)
        app.exit(return_code=130)
        asyncio.get_running_loop().call_later(0.5, interrupted)

    first_frame.set_interrupt_hook(interrupted)
    try:
        rc = app.run()
    finally:
        first_frame.set_interrupt_hook(None)
        # a runbook must not die with us; the journal says why the console ended
        end_runbooks_on_exit(app._hangup_why is not None, interrupted=(
            app.return_code == 130 or first_frame.interrupt_pending()))
        app.close_sources()
    if app.return_code not in (None, 0):
        return app.return_code
    if first_frame.interrupt_pending():   # a SIGINT during the run (or its clean-up)
        return 130
    return rc or 0


__all__ = ["SeatConsoleApp", "run_app"]
