"""The confirmation modal every node action uses: a title, the plan lines, and yes / no.

``ConfirmScreen(title, lines)`` — ``y`` / Enter on "Yes" confirms, ``n`` / Escape cancels;
``ConfirmScreen(title, lines, typed="seat-node")`` — the most destructive actions (k9s'
ShowConfirmAck idea): the engineer must type the text (e.g. the seat's name) before "Yes" is
enabled; ``y`` is then typing, not an answer. It dismisses with ``True`` (go) or ``False``
(cancel); push it with a callback: ``app.push_screen(ConfirmScreen(...), on_answer)``.
``alt_label="…"`` adds a third button (e.g. the release's "Defer 2 to 07:41Z"):
it dismisses with ``"alt"``, and the caller plans that variant (it is confirmed again).
``note="…"``: a sentence under the plan saying what each button does (where two buttons
both go on); ``no_label``: the cancel button's words ("Close" where nothing would be done).

The plan lines come from :meth:`seat_console.actions.runbook.Plan.text_lines` (``•`` will change
the node, ``–`` skipped, ``✗`` a precondition failed). Pure view: no I/O.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.css.query import NoMatches
from textual.screen import ModalScreen
from textual.widgets import Button, Input, Static

BOX_HEIGHT_SHARE = 0.9
"""The confirmation's box takes at most this share of the screen's rows (its CSS max-height)."""

PLAN_MIN_ROWS, PLAN_MAX_ROWS = 3, 24
"""The plan's scrolling height, in rows: never less (it scrolls), never more."""


class ConfirmScreen(ModalScreen["bool | str"]):
    """Confirm a node action (see the module docstring).

    ``title``: the question ("Place the hold on seat-node for 4 h?"); ``lines``: the plan, one
    line per step; ``typed``: text that must be typed exactly to enable "Yes" (``None``: a plain
    y/n); ``yes_label``: the button's label; ``alt_label``: a third button's label (it
    dismisses with ``"alt"``), or ``None``: none; ``no_label``: the cancel button's label;
    ``note``: what each button does, under the plan (``None``: no note).
    """

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "answer(False)", "cancel", id="confirm-cancel"),
        Binding("n", "answer(False)", "no", id="confirm-no", show=False),
        Binding("y", "yes_key", "yes", id="confirm-yes", show=False),
    ]

    DEFAULT_CSS = """
    ConfirmScreen { align: center middle; }
    ConfirmScreen > Vertical {
        width: 90%; max-width: 130; height: auto; max-height: 90%;
        border: thick $warning; background: $surface; padding: 0 1;
    }
    ConfirmScreen #confirm-title { text-style: bold; padding: 0 0 1 0; }
    ConfirmScreen #confirm-plan { height: auto; max-height: 24; }
    ConfirmScreen #confirm-hint { color: $text-muted; padding: 1 0 0 0; }
    ConfirmScreen #confirm-note { padding: 1 0 0 0; }
    ConfirmScreen Horizontal { height: auto; align: right middle; }
    ConfirmScreen Button { margin: 0 1; }
    """

    def __init__(self, title: str, lines: Sequence[str], typed: str | None = None, *,
                 yes_label: str = "Yes, do it", alt_label: str | None = None,
                 no_label: str = "Cancel", note: str | None = None) -> None:
        super().__init__(id="confirm")
        self.alt_label = alt_label
        self.no_label = no_label
        self.note = note
        self.title_text = title
        self.lines = list(lines)
        self.typed = typed
        self.yes_label = yes_label

    def compose(self) -> ComposeResult:
        """Title, the plan (scrolls when long), the typed field if asked, the buttons."""
        plan = Text()
        for i, line in enumerate(self.lines):
            if i:
                plan.append("\n")
            style = ("bold" if line.startswith("•") else "red" if line.startswith("✗")
                     else "dim")
            plan.append(line, style=style)
        with Vertical(id="confirm-box"):
            yield Static(Text(self.title_text), id="confirm-title")
            with VerticalScroll(id="confirm-plan"):
                yield Static(plan if self.lines else Text("(nothing to change)",
                                                          style="italic"), id="confirm-lines")
            if self.typed is not None:
                yield Static(Text(f"Type {self.typed!r} to confirm:"), id="confirm-typed-label")
                # Not the name itself: a placeholder equal to it reads as already typed
                # (a new user pressed Enter on the empty field and nothing happened).
                yield Input(placeholder="type it here", id="confirm-input")
            if self.note:
                yield Static(Text(self.note), id="confirm-note")
            no = self.no_label.lower()
            plain = self.alt_label is None and self.no_label == "Cancel"
            hint = (f"type {self.typed!r}, then Enter · Esc: {no}" if self.typed is not None else
                    "y: yes · n / Esc: no" if plain else
                    f"y: {self.yes_label.lower()} · n / Esc: {no}")
            yield Static(Text(hint), id="confirm-hint")
            with Horizontal():
                yield Button(self.no_label, id="confirm-no-button")
                if self.alt_label is not None:
                    yield Button(self.alt_label, id="confirm-alt-button")
                yield Button(self.yes_label, id="confirm-yes-button", variant="warning",
                             disabled=self.typed is not None)

    def on_mount(self) -> None:
        """Focus the typed field (typed confirmation) or the Cancel button (safe default);
        fit the plan to the screen once laid out (:meth:`fit_plan`)."""
        if self.typed is not None:
            self.query_one("#confirm-input", Input).focus()
        else:
            self.query_one("#confirm-no-button", Button).focus()
        self.call_after_refresh(self.fit_plan)

    def on_resize(self) -> None:
        """The terminal's height changed: fit the plan again."""
        self.call_after_refresh(self.fit_plan)

    def fit_plan(self) -> None:
        """Cap the plan's scrolling height so the typed field, the hint and the buttons stay
        on screen: the box may take :data:`BOX_HEIGHT_SHARE` of the screen's rows; the plan
        gets what its border and the other rows leave (at least :data:`PLAN_MIN_ROWS`, at
        most :data:`PLAN_MAX_ROWS`). At 80×24 a long swap plan pushed "Esc: cancel" and the
        buttons under the name field, out of sight."""
        try:
            box = self.query_one("#confirm-box", Vertical)
            plan = self.query_one("#confirm-plan", VerticalScroll)
        except NoMatches:
            return
        others = sum(w.outer_size.height for w in box.children if w is not plan)
        room = int(self.size.height * BOX_HEIGHT_SHARE) - others - box.styles.gutter.height
        rows = max(PLAN_MIN_ROWS, min(PLAN_MAX_ROWS, room))
        if plan.styles.max_height is None or plan.styles.max_height.value != rows:
            plan.styles.max_height = rows

    @on(Input.Changed, "#confirm-input")
    def _typed_changed(self, event: Input.Changed) -> None:
        self.query_one("#confirm-yes-button", Button).disabled = event.value != self.typed

    @on(Input.Submitted, "#confirm-input")
    def _typed_submitted(self, event: Input.Submitted) -> None:
        if event.value == self.typed:
            self.dismiss(True)
        else:   # say why nothing happens, rather than nothing
            self.notify(f"{event.value!r} is not {self.typed!r}: type {self.typed!r} to confirm, "
                        f"or Esc to cancel" if event.value else
                        f"nothing typed: type {self.typed!r} to confirm, or Esc to cancel",
                        severity="warning")

    @on(Button.Pressed, "#confirm-yes-button")
    def _yes(self) -> None:
        self.dismiss(True)

    @on(Button.Pressed, "#confirm-alt-button")
    def _alt(self) -> None:
        self.dismiss("alt")

    @on(Button.Pressed, "#confirm-no-button")
    def _no(self) -> None:
        self.dismiss(False)

    def action_yes_key(self) -> None:
        """``y``: yes, for a plain confirmation (a typed one needs the text)."""
        if self.typed is None:
            self.dismiss(True)

    def action_answer(self, yes: bool) -> None:
        """Close with the answer."""
        self.dismiss(yes)


__all__ = ["ConfirmScreen"]
