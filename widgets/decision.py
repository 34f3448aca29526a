"""The decision's branch on the runbook screen: once ``decide`` is done, Enter on the next stage
(promote, restore or release) opens :class:`DecisionScreen` — the decision, each question's
answer, what would decide an INCONCLUSIVE — and offers only what the decision allows, each
button saying what it does:

* **PROMOTE-ABLE**: *Promote the candidate* (promote's own plan and typed confirmation
  follow) or *Keep the resident* (restore; or release when the resident already serves);
* **KEEP**: *Keep the resident*;
* **INCONCLUSIVE**: *Compare again* (what would decide it is said above) or *Keep the
  resident*.

It dismisses with the chosen flow's kind (``"promote"``, ``"restore"``, ``"release"``,
``"compare"``) or ``None`` (Esc: nothing done); the app runs that flow through the runbook
controller (plan → confirm → run). :func:`branch_of` decides when the branch applies and what
it offers, from the :class:`~seat_console.actions.stages.RunbookState` alone. Pure view: no
I/O.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.css.query import NoMatches
from textual.screen import ModalScreen
from textual.widgets import Button, Static

from seat_console.actions.stages import DECISIONS, RunbookState, StageState
from seat_console.core.fmt import printable
from seat_console.evidence.decision import CRITICAL

ANSWER_MARKS = (("no figure is worse", "✓"), ("expected divergence", "✓"), ("yes", "✓"),
                ("higher", "✓"), ("the same", "✓"), ("no:", "✗"), ("lower", "✗"),
                ("worse", "✗"), ("cannot tell", "?"))
"""A question's mark by the first words of its answer, first match wins — the heads of
:mod:`seat_console.evidence.decision`'s sentences (pass: ``yes: …``, ``higher``/``the same``,
``no figure is worse …``, ``expected divergence …``; fail: ``no: …``, ``lower: …``, ``worse
by a claimed difference …``; ``cannot tell, because …``). A decide row keeps the sentence, not
the status, so an unknown head is ``?``, never a pass."""


BRANCH_STAGES = ("promote", "restore", "release")
"""The next stages at which Enter opens the branch (once ``decide`` is done)."""


def answer_mark(answer: str) -> str:
    """``✓`` / ``✗`` / ``?`` for a question's answer sentence (:data:`ANSWER_MARKS`)."""
    low = answer.strip().lower()
    return next((mark for head, mark in ANSWER_MARKS if low.startswith(head)), "?")


def split_answer(line: str) -> tuple[str, str]:
    """A decide stage's ``details`` line (``"fits? yes: …"``: the question, a space, its
    answer) as ``(question, answer)``, the question marked ``(critical)`` when it is one of
    :data:`~seat_console.evidence.decision.CRITICAL`; a line without ``"? "`` is all answer
    (question ``""``)."""
    q, sep, a = line.partition("? ")
    if not sep:
        return "", line
    q += "?"
    return (f"{q} (critical)" if q in CRITICAL else q), a


def questions_of(stage: StageState) -> tuple[tuple[str, str], ...]:
    """The decide stage's answers, ``(question, answer)`` per question, from its ``details``
    (:attr:`~seat_console.actions.stages.StageState.details`; none on a console whose stages
    carry none)."""
    return tuple(split_answer(x) for x in getattr(stage, "details", ()) or ())


@dataclass(frozen=True)
class Choice:
    """One way on: ``kind`` (the flow the app runs), ``label`` (the button), ``says`` (what it
    does, one sentence under the buttons)."""

    kind: str
    label: str
    says: str


@dataclass(frozen=True)
class Branch:
    """The decision's branch: ``decision`` (one of ``DECISIONS``), ``questions`` ((question,
    answer) from the decide stage's details, :func:`questions_of`), ``needs`` (what would decide it, or ``""``),
    ``choices`` (in button order), ``note`` (a caution, or ``""``)."""

    decision: str
    questions: tuple[tuple[str, str], ...]
    needs: str
    choices: tuple[Choice, ...]
    note: str = ""


def branch_of(state: RunbookState | None) -> Branch | None:
    """The branch the runbook is at, or ``None``: ``decide`` done with one of ``DECISIONS``,
    neither promote nor restore done, and the next stage one of :data:`BRANCH_STAGES`.
    Pure."""
    if state is None or state.next is None or state.next.name not in BRANCH_STAGES:
        return None
    decide = state.stage("decide")
    decision = decide.evidence.get("decision")
    if decide.status != "done" or decision not in DECISIONS:
        return None
    if "done" in (state.stage("promote").status, state.stage("restore").status):
        return None
    questions = questions_of(decide)
    if state.stage("restore").status == "skipped":
        keep = Choice("release", "Keep the resident",
                      "Keep the resident: it already serves; release the hold (the timers "
                      "start again)")
    else:
        keep = Choice("restore", "Keep the resident",
                      "Keep the resident: restore it in the seat and release the hold")
    note = ""
    if decision == "PROMOTE-ABLE":
        choices = (Choice("promote", "Promote the candidate",
                          "Promote: the candidate becomes the seat's resident (its plan, then "
                          "type the seat's name); the old one is kept for the undo"), keep)
        if state.seat_holder != "candidate":
            note = (f"The candidate does not hold the seat now ({state.seat_holder} does): "
                    "promote's plan will say so and how to put it back in.")
    elif decision == "KEEP":
        choices = (keep,)
    else:
        choices = (Choice("compare", "Compare again",
                          "Compare again: a new bracket, to decide it (its plan says the "
                          "cost); then decide again"), keep)
        if state.seat_holder == "candidate":
            note = ("A compare starts from the resident in the seat: with the candidate in "
                    "it, compare's plan will ask for `seat-console restore --keep-hold` "
                    "first (the resident back, the hold kept).")
    return Branch(decision, questions, decide.needs if decision == "INCONCLUSIVE" else "",
                  choices, note)


def branch_text(b: Branch) -> Text:
    """The decision and its answers as the screen shows them."""
    t = Text()
    style = {"PROMOTE-ABLE": "bold green", "KEEP": "bold red"}.get(b.decision, "bold yellow")
    t.append("Decision: ", style="bold")
    t.append(b.decision, style=style)
    for q, a in b.questions:
        mark = answer_mark(a)
        t.append(f"\n {mark} ", style={"✓": "green", "✗": "bold red"}.get(mark, "yellow"))
        t.append(f"{printable(q)}: ", style="bold")
        t.append(printable(a))
    if b.needs:
        t.append("\nWhat would decide it: ", style="bold")
        t.append(printable(b.needs))
    for c in b.choices:
        t.append(f"\n• {c.says}")
    if b.note:
        t.append(f"\n⚠ {b.note}", style="yellow")
    return t


class DecisionScreen(ModalScreen["str | None"]):
    """The branch at the decision (see the module docstring)."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "dismiss(None)", "not now", key_display="Esc", id="decision-close"),
        Binding("left", "app.focus_previous", "previous", show=False, id="decision-left"),
        Binding("right", "app.focus_next", "next", show=False, id="decision-right"),
    ]

    DEFAULT_CSS = """
    DecisionScreen { align: center middle; }
    DecisionScreen > Vertical {
        width: 90%; max-width: 120; height: auto; max-height: 95%;
        border: thick $primary; background: $surface; padding: 0 1;
    }
    DecisionScreen #decision-text { height: auto; }
    DecisionScreen VerticalScroll { height: auto; max-height: 1fr; }
    DecisionScreen #decision-hint { color: $text-muted; }
    DecisionScreen Horizontal { height: auto; align: right middle; }
    DecisionScreen Button { margin: 0 1; }
    DecisionScreen Button:focus { text-style: bold reverse; }
    """

    def __init__(self, branch: Branch) -> None:
        super().__init__(id="decision")
        self.branch = branch

    def compose(self) -> ComposeResult:
        """The decision, the answers, what each button does, the buttons."""
        with Vertical():
            with VerticalScroll():
                yield Static(branch_text(self.branch), id="decision-text")
            yield Static(self.hint_text(self.branch.choices[0].label), id="decision-hint")
            with Horizontal():
                yield Button("Not now", id="choice-none")
                for c in self.branch.choices:
                    yield Button(c.label, id=f"choice-{c.kind}",
                                 variant="warning" if c.kind == "promote" else "primary")

    @staticmethod
    def hint_text(focused: str | None) -> Text:
        """The hint under the text: what Enter does now (the focused button, named: the trial
        could not tell which button had the focus), and the other keys."""
        t = Text("← → choose · Enter: ")
        if focused is None or focused == "Not now":
            t.append("not now", style="bold")
        else:
            t.append(focused, style="bold")
            t.append(" (its plan comes first)")
        t.append(" · Esc: not now")
        return t

    def on_descendant_focus(self, event: object) -> None:
        """The focus moved: the hint names the button Enter now presses."""
        focused = self.focused
        label = str(focused.label) if isinstance(focused, Button) else None
        try:
            self.query_one("#decision-hint", Static).update(self.hint_text(label))
        except NoMatches:
            return

    def on_mount(self) -> None:
        """Focus the first choice (the decision's own way on); fit the text to the screen once
        laid out (:meth:`fit_text`)."""
        self.query_one(f"#choice-{self.branch.choices[0].kind}", Button).focus()
        self.call_after_refresh(self.fit_text)

    def on_resize(self) -> None:
        """The terminal's size changed: fit the text again."""
        self.call_after_refresh(self.fit_text)

    def fit_text(self) -> None:
        """Cap the decision text's scrolling height so the hint and the buttons stay on screen:
        the box may take 95 % of the screen's rows (its CSS ``max-height``); the text gets what
        the box's border and the other rows leave, at least 3 rows. At 80×24 an INCONCLUSIVE's
        answers pushed the hint and every button off the screen (``max-height: 1fr`` does not
        bind inside a box of ``height: auto``): Enter then ran a choice the engineer could not
        see."""
        try:
            box = self.query_one(Vertical)
            text = self.query_one(VerticalScroll)
        except NoMatches:
            return
        others = sum(w.outer_size.height for w in box.children if w is not text)
        room = int(self.size.height * 0.95) - others - box.styles.gutter.height
        rows = max(3, room)
        if text.styles.max_height is None or text.styles.max_height.value != rows:
            text.styles.max_height = rows

    @on(Button.Pressed)
    def _pressed(self, event: Button.Pressed) -> None:
        kind = (event.button.id or "").removeprefix("choice-")
        self.dismiss(None if kind == "none" else kind)


__all__ = ["ANSWER_MARKS", "BRANCH_STAGES", "Branch", "Choice", "DecisionScreen",
           "answer_mark", "branch_of", "branch_text", "questions_of", "split_answer"]
