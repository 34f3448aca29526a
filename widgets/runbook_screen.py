"""The runbook screen (``g``): every stage of the seat swap with its status, when and by whom it
was done, its evidence and what it needs — and "Enter: run the next stage".

One row per stage (:func:`stage_rows`), the next stage marked ``▸`` and highlighted when the
screen opens (``fit`` after a closed cycle: a new one begins there); ↑ ↓ choose another. Enter
runs the chosen stage through the app's one runbook controller (plan → confirm → run; the
action's own gates refuse a stage out of order, with the state and the fix): its key's action,
or for the read stages without a key (fit, image, decide) their flows — the row says ``run:
Enter``. Once the decision is made, Enter on the next stage opens the decision's branch
(:mod:`seat_console.widgets.decision`: promote or keep, compare again); the head says so, and
the decide row lists each question's answer (✓ ✗ ?). A done promote shows its undo. A stage
that cannot run here (a run that never ended: ``seat-console recover``) shows its command.
Under ``--readonly`` the run part is hidden: the stages are shown, Enter runs nothing. Esc (or
q) goes back. Pure view of a
:class:`~seat_console.actions.stages.RunbookState` handed down by the app
(:mod:`seat_console.tui.runbook_state`); no I/O.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import ClassVar

from rich.console import Group
from rich.table import Table
from rich.text import Text
from textual import events, on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import OptionList, Static
from textual.widgets.option_list import Option

from seat_console.actions.stages import RunbookState, StageState, seat_phrase
from seat_console.core.fmt import printable, zulu_time
from seat_console.core.profile_path import with_profile
from seat_console.widgets.decision import answer_mark, branch_of, questions_of
from seat_console.widgets.runbook_strip import MARKS, NEXT_MARK, STYLES, KeyOf

RunStage = Callable[[StageState], bool]
"""``run(stage) -> whether it started`` (the app's ``run_stage``)."""

UNDO_KEY = "node.promote-undo"
"""The binding id of promote's undo (shown under a done promote)."""

INDENT = "\n     "
"""A stage's second and later lines start here (unstyled)."""

RUN_HINT = "Enter: run the next stage (▸) or the one chosen with ↑ ↓ · Esc: back"
READONLY_HINT = "Read-only: the stages are shown, not run · ↑ ↓ scroll · Esc: back"


def stage_lines(stage: StageState, *, is_next: bool, key_of: KeyOf,
                enter: bool = False, profile: str | None = None) -> tuple[Text, list[Text]]:
    """One stage as the screen shows it: its head ``✓ hold  done 2026-12-05T03:10Z by
    ops@node``, then its later lines — the reason (failed / stale), each evidence item (a
    decision's questions marked ✓ ✗ ?), what it needs and how it is run (its key, ``Enter``
    where ``enter`` and it has none, and its command; a done promote: its undo). Outside text
    is made printable. A command names ``profile`` (the ``--profile`` the console was started
    with, :func:`~seat_console.core.profile_path.with_profile`): pasted in a shell it reads the
    same seat. Pure."""
    command = with_profile(stage.command, profile) if stage.command else stage.command
    head = Text()
    head.append(NEXT_MARK if is_next else " ", style="bold")
    head.append(MARKS.get(stage.status, "?"), style=STYLES.get(stage.status, ""))
    head.append(f" {stage.name:<9}", style="bold" if is_next else "")
    head.append(f" {stage.status}", style=STYLES.get(stage.status, ""))
    if stage.at is not None:
        head.append(f" {zulu_time(stage.at, seconds=False)}")
    if stage.operator:
        head.append(f" by {printable(stage.operator)}")
    more: list[Text] = []
    if stage.reason:
        more.append(Text(f"why: {printable(stage.reason)}",
                         style="red" if stage.status == "failed" else "yellow"))
    for label, value in stage.evidence.items():
        t = Text()
        t.append(f"{printable(str(label))}: ", style="dim")
        t.append(printable(str(value)), style="bold" if label == "decision" else "")
        more.append(t)
    for question, answer in questions_of(stage):      # the decision's answers, marked
        t = Text()
        mark = answer_mark(answer)
        t.append(f"{mark} ", style={"✓": "green", "✗": "bold red"}.get(mark, "yellow"))
        if question:
            t.append(f"{printable(question)}: ", style="bold")
        t.append(printable(answer))
        more.append(t)
    todo = is_next or stage.status not in ("done", "skipped", "running")
    if stage.needs and todo:      # a done or skipped stage needs and runs nothing
        t = Text()
        t.append("needs: ", style="dim")
        t.append(printable(stage.needs))
        more.append(t)
    key = key_of(stage.key) or ("Enter" if enter else None)
    if (key or command) and todo:
        t = Text()
        t.append("run: ", style="dim")
        if key:
            t.append(f" {key} ", style="bold reverse")
            t.append(f" or {printable(command)}" if command else "", style="dim")
        else:
            t.append(printable(command or ""))
        more.append(t)
    undo = key_of(UNDO_KEY)
    if stage.name == "promote" and stage.status == "done":
        t = Text()
        t.append("undo: ", style="dim")
        if undo:
            t.append(f" {undo} ", style="bold reverse")
            t.append(" (or Enter) or ", style="dim")
        t.append(with_profile("seat-console promote --undo", profile), style="dim")
        more.append(t)
    return head, more


def stage_rows(stage: StageState, *, is_next: bool, key_of: KeyOf, enter: bool = False,
               profile: str | None = None) -> Text:
    """:func:`stage_lines` as one text, the later lines indented (tests, screen readers)."""
    head, more = stage_lines(stage, is_next=is_next, key_of=key_of, enter=enter,
                             profile=profile)
    t = head.copy()
    for line in more:
        t.append(INDENT)
        t.append_text(line)
    return t


def stage_prompt(stage: StageState, *, is_next: bool, key_of: KeyOf,
                 enter: bool = False, profile: str | None = None) -> Group:
    """:func:`stage_lines` for the option list: the later lines in an indented column, so a
    long one wraps under itself, not at the screen's edge."""
    head, more = stage_lines(stage, is_next=is_next, key_of=key_of, enter=enter,
                             profile=profile)
    if not more:
        return Group(head)
    grid = Table.grid()
    grid.add_column(width=len(INDENT) - 1, no_wrap=True)
    grid.add_column(ratio=1)
    for line in more:
        grid.add_row("", line)
    return Group(head, grid)


def header_text(state: RunbookState | None, error: str | None) -> Text:
    """The screen's head: who holds the seat, when the state was read, what is next, and the
    sources that could not be read (or why there is no state)."""
    t = Text()
    t.append("Runbook — the seat swap, stage by stage\n", style="bold")
    if state is None:
        t.append(error or "reading the runbook's state…", style="dim")
        return t
    t.append(f"in the seat: {seat_phrase(state.seat_holder)}")
    for fh in state.foreign_holds:       # a hold by another console, next to it
        t.append(f" · held by another console: {printable(fh)}", style="bold yellow")
    t.append(f" · read {zulu_time(state.read_at)}")
    if state.next is None and state.cycle_closed_at is not None:
        t.append(f" · cycle closed {zulu_time(state.cycle_closed_at, seconds=False)}; "
                 "Enter on fit starts a new one", style="bold green")
    elif state.next is None:
        t.append(" · the runbook is complete", style="bold green")
    else:
        t.append(" · next: ")
        t.append(state.next.name, style="bold")
        if state.next_why:       # it jumps over todo stages: say why, once
            t.append(f"\n{printable(state.next_why)}", style="dim")
    branch = branch_of(state)
    if branch is not None:
        t.append("\nDecision ")
        t.append(branch.decision, style={"PROMOTE-ABLE": "bold green", "KEEP": "bold red"}
                 .get(branch.decision, "bold yellow"))
        t.append(": Enter on ▸ " + state.next.name + " chooses — "   # type: ignore[union-attr]
                 + " or ".join(c.label.lower() for c in branch.choices))
    t.append(f"\n{printable(state.seat_downtime)}" if state.seat_downtime else "", style="dim")
    for p in state.problems:
        t.append(f"\n⚠ {printable(p)}", style="yellow")
    if error:
        t.append(f"\n⚠ the newest read failed ({printable(error)}); shown: the last read",
                 style="yellow")
    return t


def next_name(state: RunbookState) -> str | None:
    """The stage Enter runs first: the next one, or ``fit`` after a closed cycle (a new one
    begins there); ``None`` when there is none."""
    if state.next is not None:
        return state.next.name
    return "fit" if state.cycle_closed_at is not None else None


class RunbookScreen(ModalScreen[None]):
    """The runbook screen (see the module docstring). ``key_of``: the app's key display of a
    binding id; ``run``: runs a stage's key (``None``: read-only, nothing is run)."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,q", "dismiss", "back", key_display="Esc", id="runbook-close"),
    ]

    DEFAULT_CSS = """
    RunbookScreen { align: center middle; }
    RunbookScreen > Vertical {
        width: 100%; max-width: 130; height: 100%; border: thick $primary;
        background: $surface; padding: 0 1;
    }
    RunbookScreen #runbook-head { height: auto; }
    RunbookScreen #runbook-stages { height: 1fr; border: none; padding: 0;
                                    scrollbar-gutter: stable; }
    RunbookScreen #runbook-hint { height: auto; color: $text-muted; }
    """

    def __init__(self, key_of: KeyOf, run: RunStage | None,
                 profile: str | None = None) -> None:
        super().__init__(id="runbook")
        self.key_of = key_of
        self.run = run
        self.profile = profile   # the --profile given: every command shown names it
        self.state: RunbookState | None = None
        self.error: str | None = None

    def compose(self) -> ComposeResult:
        """The head, the stages, the hint."""
        with Vertical():
            yield Static(header_text(None, None), id="runbook-head")
            yield OptionList(id="runbook-stages")
            yield Static(Text(RUN_HINT if self.run is not None else READONLY_HINT),
                         id="runbook-hint")

    def on_mount(self) -> None:
        """Draw what was handed down before the screen was mounted; focus the stages."""
        self._draw(first=True)
        self.query_one(OptionList).focus()

    def show(self, state: RunbookState | None, error: str | None) -> None:
        """The newest state (``None``: none read yet; ``error``: why the newest read failed).
        The highlight follows the next stage (▸) when it was on it — so after a stage ran,
        Enter runs the one after — and stays where the engineer moved it otherwise."""
        if state == self.state and error == self.error:
            return
        old = self._next_index()
        self.state, self.error = state, error
        if self.is_mounted:
            ol = self.query_one(OptionList)
            self._draw(first=ol.highlighted is None or ol.highlighted == old)

    def _next_index(self) -> int | None:
        if self.state is None:
            return None
        nxt = next_name(self.state)
        return next((i for i, s in enumerate(self.state.stages) if s.name == nxt), None)

    def _draw(self, *, first: bool) -> None:
        self.query_one("#runbook-head", Static).update(header_text(self.state, self.error))
        ol = self.query_one(OptionList)
        keep = ol.highlighted
        ol.clear_options()
        if self.state is None:
            return
        nxt = next_name(self.state)
        ol.add_options([Option(stage_prompt(s, is_next=s.name == nxt, key_of=self.key_of,
                                            enter=self.run is not None,
                                            profile=self.profile),
                               id=s.name) for s in self.state.stages])
        idx = self._next_index() or 0
        ol.highlighted = idx if first or keep is None else min(keep, ol.option_count - 1)

    def stage_at(self, index: int | None) -> StageState | None:
        """The stage of row ``index`` (``None`` when there is none)."""
        if self.state is None or index is None or not 0 <= index < len(self.state.stages):
            return None
        return self.state.stages[index]

    def on_key(self, event: events.Key) -> None:
        """A stage's key, the one its row shows (``run:  U  or …``), runs it here as Enter on
        its row does: a stranger pressed U on this screen, as the release row said, and nothing
        happened. The highlight stays where it was (the ▸ row, or the row chosen with ↑ ↓): a
        key that moved it left Enter on a stage the key's plan had refused, and Enter ran the
        refused stage again (a QA walk). Other keys pass on."""
        if self.state is None or not event.character:
            return
        for stage in self.state.stages:
            if stage.key is not None and self.key_of(stage.key) == event.character:
                event.stop()
                self._run_or_say(stage)
                return

    @on(OptionList.OptionSelected, "#runbook-stages")
    def _selected(self, event: OptionList.OptionSelected) -> None:
        self._run_or_say(self.stage_at(event.option_index))

    def _run_or_say(self, stage: StageState | None) -> None:
        """Run ``stage`` (Enter on its row, or its key); when nothing started, say why."""
        if stage is None or self.run is None:
            return
        if self.run(stage):
            return
        if stage.status == "running":
            self.notify(f"{stage.name}: in progress ({stage.reason}); wait for it to end",
                        markup=False, timeout=15)
            return
        if stage.command:
            self.notify(f"{stage.name}: run it in a shell: "
                        f"{with_profile(stage.command, self.profile)}", markup=False,
                        timeout=15)
        else:
            self.notify(f"{stage.name}: nothing to run from here ({stage.needs or 'no command'})",
                        markup=False)


__all__ = ["READONLY_HINT", "RUN_HINT", "RunbookScreen", "header_text", "next_name",
           "stage_lines", "stage_prompt", "stage_rows"]
