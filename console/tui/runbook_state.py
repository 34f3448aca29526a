"""The runbook's state in the TUI: read in a worker, shown in the strip and the runbook screen.

The state is never kept by the console: it is read — from the node, the journal and the run
store — by :func:`seat_console.actions.stages.read_runbook` (through :func:`read_state`, on a
daemon thread of its own, never on the UI thread): first once every panel has its first
reading (at most :data:`RUNBOOK_FIRST_WAIT_S` after mount), then at the refresh interval (at
least every :data:`RUNBOOK_MIN_INTERVAL_S`), at once after every action the console ran, and
when polling resumes. The result comes back as a :class:`RunbookRead` message; :class:`RunbookStateMixin`
(mixed into the app) draws it in the :class:`~seat_console.widgets.runbook_strip.RunbookStrip`
and an open :class:`~seat_console.widgets.runbook_screen.RunbookScreen`, and runs a stage
(:meth:`RunbookStateMixin.run_stage`: its key's action, the read stages' flows, the decision's
branch) through the one runbook controller (:mod:`seat_console.tui.runbook`).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

from textual.binding import Binding
from textual.css.query import NoMatches
from textual.message import Message

from seat_console.tui import keys as keytable
from seat_console.tui.polling import Poller, PollTimer

log = logging.getLogger(__name__)

RUNBOOK_MIN_INTERVAL_S = 15.0
"""The runbook is read at the refresh interval, but not more often than this (s): it changes
when an action runs (read at once after each) or another console acts — whose journal rows
(the action log's reading changed: :meth:`RunbookStateMixin.runbook_inputs_changed`) and
container changes (docker's event stream) are read at once too; what is left to this interval
is a hold lease armed by a console on another state dir. Each read opens the journal, asks
docker who holds the seat and the node for its hold leases (a ``docker exec`` / ``ssh``):
7-14 ms of CPU on the lab (benchmarks/source_cost.py), 0.15-0.3 % of a core at every 5 s
(docs/benchmarks.md, issue 33)."""

RUNBOOK_FIRST_WAIT_S = 2.0
"""At start the runbook is first read once every panel has its first reading, or this many
seconds after the app is mounted, whichever comes first (s). The first read (imports of the
runbook's modules, the journal, docker, a ``docker exec`` for the node's hold leases: ~12 % of
the start-up's CPU samples on the lab, ``py-spy --gil``) ran beside the sources' first reads
under the same GIL and made the full screen later (docs/benchmarks.md, issue 33); the strip
says "reading the runbook's state…" meanwhile. A source that hangs delays it by this at most."""

NO_READER = "n/a: this console has no runbook reader (actions.stages.read_runbook)"
"""What the strip says while the reader is not installed."""

STAGE_FLOWS = {"fit": "fit", "image": "image", "decide": "decide"}
"""The stages without a key whose flow Enter on the runbook screen runs (the read stages:
:mod:`seat_console.tui.stage_flows`); a closed cycle's Enter on ``fit`` opens a new one."""

BRANCH_KEYS = {"promote": "node.promote", "restore": "node.restore",
               "release": "node.release", "compare": "node.compare"}
"""The decision branch's choices (:class:`~seat_console.widgets.decision.Choice` ``kind``) ->
the key whose action runs them (so ``--readonly`` and remapping apply as to the key)."""

Reader = Callable[[Any], Any]
"""``reader(app) -> RunbookState`` (worker thread; raises on failure)."""


def read_state(app: Any) -> Any:
    """The runbook's state now: :func:`seat_console.actions.stages.read_runbook` with the
    app's node context and a fresh journal (:func:`seat_console.tui.runbook.with_journal`).
    Raises :class:`LookupError` (:data:`NO_READER`) when that reader is not there, else what
    it raises. Worker thread."""
    from seat_console.actions import stages
    from seat_console.tui.runbook import with_journal

    reader = getattr(stages, "read_runbook", None)
    if reader is None:
        raise LookupError(NO_READER)
    return with_journal(app, lambda journal, nctx: reader(nctx, journal, leases=True))


class RunbookRead(Message):
    """A read of the runbook's state ended: ``state`` (a
    :class:`~seat_console.actions.stages.RunbookState`) or ``error`` (a sentence)."""

    def __init__(self, state: Any, error: str | None) -> None:
        super().__init__()
        self.state = state
        self.error = error


class RunbookStateMixin:
    """The app's runbook reads and views (see the module docstring). The app provides
    ``runbook_reader`` (``None``: :func:`read_state`), ``interval_s``, ``paused``,
    ``readonly``, ``BINDINGS``, ``keymap``, ``runbooks`` and Textual's ``App``."""

    runbook_state: Any = None
    """The newest :class:`~seat_console.actions.stages.RunbookState` read (``None``: none yet)."""
    runbook_error: str | None = None
    """Why the newest read failed (``None``: it did not)."""
    _rb_poller: Poller | None = None
    _rb_busy: bool = False
    _rb_again: bool = False
    _rb_timer: PollTimer | None = None
    runbook_reads: int = 0
    """Reads finished (tests)."""

    _rb_first_pending: bool = False

    def start_runbook_reads(self) -> None:
        """On mount: the first read once every panel has its first reading
        (:meth:`first_readings_in`) or after :data:`RUNBOOK_FIRST_WAIT_S`, whichever comes
        first; at once when the app has no panel to wait for. Any earlier reason to read
        (:meth:`read_runbook_now`: an action, a resume) reads at once."""
        if not getattr(self, "_states", None):
            self.read_runbook_now()
            return
        self._rb_first_pending = True
        self._rb_timer = PollTimer(asyncio.get_running_loop(), RUNBOOK_FIRST_WAIT_S,
                                   self.read_runbook_now)

    def first_readings_in(self) -> None:
        """Every panel has its first reading (the polling engine's hook): the first read of
        the runbook, if it is still waiting for that."""
        if self._rb_first_pending:
            self.read_runbook_now()

    def read_runbook_now(self) -> None:
        """Read the runbook's state now (after an action; on resume); a read in flight is
        followed by another when it ends (it began before the action ended)."""
        self._rb_first_pending = False
        if self._rb_timer is not None:
            self._rb_timer.stop()
            self._rb_timer = None
        if self._rb_busy:
            self._rb_again = True
            return
        self._rb_busy = True
        if self._rb_poller is None:
            self._rb_poller = Poller("seat-console:runbook")
        self._rb_poller.submit(self._read_runbook)

    def _read_runbook(self) -> None:
        """Worker thread: one read, posted back."""
        reader: Reader = getattr(self, "runbook_reader", None) or read_state
        try:
            msg = RunbookRead(reader(self), None)
        except Exception as exc:  # noqa: BLE001 - shown in the strip, never raised into the UI
            if not isinstance(exc, LookupError):
                log.warning("runbook read failed", exc_info=True)
            msg = RunbookRead(None, f"n/a: {exc}" if not isinstance(exc, LookupError)
                              else str(exc))
        self.post_message(msg)

    def runbook_inputs_changed(self) -> None:
        """What the runbook is read from changed (a journal row: the action log's reading
        moved; a container: docker's event stream): read it again now, unless paused."""
        if not self.paused and not self._shutting_down:
            self.read_runbook_now()

    def docker_changed(self) -> None:
        """docker's event stream saw a container or image change (the polling engine's
        :meth:`~seat_console.tui.polling.PollingMixin.wake_on_docker_change`): who holds the
        seat may have moved."""
        self.runbook_inputs_changed()

    def on_runbook_read(self, message: RunbookRead) -> None:
        """UI thread: keep the newest state (or the error, the last good state kept), draw it,
        schedule the next read."""
        self._rb_busy = False
        self.runbook_reads += 1
        if message.state is not None:
            self.runbook_state, self.runbook_error = message.state, None
        else:
            self.runbook_error = message.error
        self.show_runbook()
        if message.state is not None:
            self.runbooks.state_read(message.state)   # a finished run's log: its next: line
        if self._rb_again:
            self._rb_again = False
            self.read_runbook_now()
        elif not self.paused and not self._shutting_down:
            delay = max(self.interval_s, RUNBOOK_MIN_INTERVAL_S)
            self._rb_timer = PollTimer(asyncio.get_running_loop(), delay, self.read_runbook_now)

    def show_runbook(self) -> None:
        """Draw the newest state in the strip and in the runbook screen if it is open."""
        from seat_console.widgets.runbook_screen import RunbookScreen
        from seat_console.widgets.runbook_strip import RunbookStrip

        try:
            self.query_one("#runbook-strip", RunbookStrip).show(
                self.runbook_state, self.runbook_error)
        except NoMatches:
            log.debug("runbook strip not mounted")
        for screen in self.screen_stack:
            if isinstance(screen, RunbookScreen):
                screen.show(self.runbook_state, self.runbook_error)

    def action_toggle_pause(self) -> None:
        """``p``: the polling engine's pause / resume; on resume the runbook is read too."""
        super().action_toggle_pause()
        if self.paused:
            if self._rb_timer is not None:
                self._rb_timer.stop()
                self._rb_timer = None
        else:
            self.read_runbook_now()

    # -- keys ----------------------------------------------------------------------------------
    def key_of(self, binding_id: str | None) -> str | None:
        """The key of binding ``binding_id`` as the screen shows it (remapped by the profile's
        ``[keys]``), or ``None``: no such binding, or a node action under ``--readonly``."""
        for b in keytable.remapped(self.BINDINGS, self.keymap):
            if isinstance(b, Binding) and b.id == binding_id:
                if self.readonly and keytable.is_node_action(b):
                    return None
                return b.key_display or self.get_key_display(b)
        return None

    def run_binding(self, binding_id: str | None) -> bool:
        """Run the action of binding ``binding_id`` (a stage's key) as its key would — through
        the runbook controller for node actions, refused under ``--readonly``. ``False`` when
        there is no such binding (or it is refused)."""
        for k in keytable.KEYS:
            if k.id == binding_id:
                if not self.check_action(k.action, ()):
                    return False
                self.call_later(self.run_action, k.action)
                return True
        return False

    def run_stage(self, stage: Any) -> bool:
        """Enter on the runbook screen: run ``stage`` (a
        :class:`~seat_console.actions.stages.StageState`) as its key would, through the
        runbook controller. At the decision (:func:`~seat_console.widgets.decision.branch_of`:
        ``decide`` done, the next stage promote, restore or release) Enter on the next stage
        opens the :class:`~seat_console.widgets.decision.DecisionScreen` instead, offering what
        the decision allows. The read stages without a key (fit, image, decide) run their flows
        (:data:`STAGE_FLOWS`). ``False`` (nothing started; the screen shows the command):
        read-only, a run that never ended (``seat-console recover``) or in progress, or a
        stage with no way to run here. A done promote: its undo (``promote --undo``)."""
        from seat_console.actions.stages import RECOVER_COMMAND
        from seat_console.widgets.decision import DecisionScreen, branch_of

        if self.readonly or stage.status == "running" or stage.command == RECOVER_COMMAND:
            return False
        state = self.runbook_state
        branch = branch_of(state)
        if branch is not None and state.next is not None and stage.name == state.next.name:
            self.push_screen(DecisionScreen(branch), self._branch_chosen)
            return True
        if stage.name == "promote" and stage.status == "done":
            return self.run_binding("node.promote-undo")     # done: Enter offers its undo
        if stage.key is not None:
            return self.run_binding(stage.key)
        flow = STAGE_FLOWS.get(stage.name)
        if flow is None:
            return False
        self.call_later(self.runbooks.key, flow)
        return True

    def _branch_chosen(self, kind: str | None) -> None:
        """The decision's branch closed: run the chosen flow's key (its plan and confirmation
        follow), or say nothing was done."""
        if kind is None:
            self.notify("decision: nothing done; Enter on the runbook screen offers it again")
            return
        if not self.run_binding(BRANCH_KEYS[kind]):
            self.notify(f"{kind}: not offered here (read-only?)", severity="warning")

    def action_runbook(self) -> None:
        """``g``: the runbook screen (every stage, its evidence; Enter runs the next one)."""
        from seat_console.widgets.runbook_screen import RunbookScreen

        if isinstance(self.screen, RunbookScreen):
            return
        screen = RunbookScreen(self.key_of, run=None if self.readonly else self.run_stage,
                               profile=self.loaded.given_path)
        self.push_screen(screen)
        screen.show(self.runbook_state, self.runbook_error)
        self.read_runbook_now()

    def action_compare(self) -> None:
        """``c``: plan the bracketed comparison, type the seat's name, run it with its log."""
        self.runbooks.key("compare")

    def action_promote(self) -> None:
        """``M``: plan the promote (the candidate in the seat becomes the resident), type the
        seat's name, run it with its log."""
        self.runbooks.key("promote")

    def action_promote_undo(self) -> None:
        """``Z``: plan the promote's undo (the previous resident back), type the seat's name,
        run it with its log."""
        self.runbooks.key("promote-undo")


__all__ = ["BRANCH_KEYS", "NO_READER", "RUNBOOK_FIRST_WAIT_S", "RUNBOOK_MIN_INTERVAL_S",
           "RunbookRead", "RunbookStateMixin", "STAGE_FLOWS", "read_state"]
