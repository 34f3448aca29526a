"""The hold key's first question: for how long, and why (before the plan is read).

``HoldOptionsScreen(node, default_ttl_s)`` shows two fields — the TTL (prefilled with the
profile's ``silence.ttl_s``, e.g. ``4 h``; the lease and the silence both end then) and the
reason (it goes into the journal and the silence's comment) — and dismisses with
``(ttl_s, reason)`` on Enter or "Read the plan", or ``None`` on Escape / "Cancel". A TTL that
the hold's ``parse_ttl`` (handed down) refuses stays on screen with its message (the same
words as ``seat-console hold --ttl``), and nothing is read or changed; the message follows the
field's edits from then on, and goes once the TTL reads. Pure view: no I/O; the
plan and its confirmation come after (the runbook controller, :mod:`seat_console.tui.runbook`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import ClassVar

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, Input, Static

REASON_MAX_CHARS = 200
"""Longest reason accepted (characters): it is journaled and put in the silence's comment."""


class HoldOptionsScreen(ModalScreen["tuple[int, str] | None"]):
    """Ask the hold's TTL and reason (see the module docstring). ``node``: the seat's node
    name (for the title); ``default_ttl_s``: the TTL field's first value, in seconds."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "cancel", "cancel", id="hold-options-cancel"),
    ]

    DEFAULT_CSS = """
    HoldOptionsScreen { align: center middle; }
    HoldOptionsScreen > Vertical {
        width: 90%; max-width: 100; height: auto; max-height: 100%; border: thick $warning;
        background: $surface; padding: 0 1;
    }
    HoldOptionsScreen #hold-options-title { text-style: bold; }
    HoldOptionsScreen #hold-options-error { color: $error; height: auto; }
    HoldOptionsScreen #hold-options-hint { color: $text-muted; }
    HoldOptionsScreen Horizontal { height: auto; align: right middle; }
    HoldOptionsScreen Button { margin: 0 1; }
    """

    def __init__(self, node: str, default_ttl_s: int, *, ttl_text: Callable[[int], str],
                 parse_ttl: Callable[[str], int]) -> None:
        """``ttl_text(seconds)`` writes a TTL (``"4 h"``); ``parse_ttl(text)`` reads one in
        seconds or raises ``ValueError`` with the words to show (the hold's own rules, handed
        down by the runbook controller: this view imports no actions)."""
        super().__init__(id="hold-options")
        self.node = node
        self.default_ttl_s = int(default_ttl_s)
        self.ttl_text = ttl_text
        self.parse_ttl = parse_ttl

    def compose(self) -> ComposeResult:
        """Title, the TTL and reason fields, an error line, the hint, the buttons."""
        with Vertical():
            yield Static(Text(f"Hold the seat on {self.node}: stop the timers, silence the "
                              "seat's endpoint, lease until the TTL ends"),
                         id="hold-options-title")
            yield Static(Text("TTL (e.g. 4h, 30m, 1h30m; lease and silence end then):"))
            yield Input(value=self.ttl_text(self.default_ttl_s), id="hold-options-ttl")
            yield Static(Text("Reason (journaled, and in the silence's comment):"))
            yield Input(placeholder="e.g. NVFP4 probe, ticket 1234",
                        max_length=REASON_MAX_CHARS, id="hold-options-reason")
            err = Static("", id="hold-options-error")
            err.display = False   # shown with a refused TTL only (keeps the buttons on 80×24)
            yield err
            yield Static(Text("Enter: read the plan (nothing changes yet) · Tab: TTL → reason → "
                              "Read the plan · Esc: cancel"), id="hold-options-hint")
            with Horizontal():
                no = Button("Cancel", id="hold-options-no", compact=True)
                no.can_focus = False   # Esc cancels; Tab never lands on it (Enter there cancelled)
                yield no
                yield Button("Read the plan", id="hold-options-go", variant="warning",
                             compact=True)

    def on_mount(self) -> None:
        """Focus the TTL, its text selected (the hint's order: TTL first; a typed ``30m``
        replaces the profile's TTL — it once went into the reason while the TTL field kept
        its value); Tab goes TTL → reason → "Read the plan", so Enter after Tab reads the
        plan, never cancels."""
        self.query_one("#hold-options-ttl", Input).focus()

    def answer(self) -> tuple[int, str] | None:
        """``(ttl_s, reason)`` from the fields, or ``None`` (and the error shown) when the
        TTL is refused."""
        ttl_text = self.query_one("#hold-options-ttl", Input).value
        try:
            ttl_s = self.parse_ttl(ttl_text)
        except ValueError as exc:
            err = self.query_one("#hold-options-error", Static)
            err.update(Text(str(exc)))
            err.display = True
            self.query_one("#hold-options-ttl", Input).focus()
            return None
        reason = " ".join(self.query_one("#hold-options-reason", Input).value.split())
        return ttl_s, reason[:REASON_MAX_CHARS]

    @on(Input.Changed, "#hold-options-ttl")
    def _recheck(self) -> None:
        """Once a TTL was refused, check the field again as it is edited: the message goes
        when the TTL reads, and says the new problem while it does not (a QA walk read the
        first refusal still on screen under a corrected TTL). Before any refusal, typing
        shows nothing."""
        err = self.query_one("#hold-options-error", Static)
        if not err.display:
            return
        try:
            self.parse_ttl(self.query_one("#hold-options-ttl", Input).value)
        except ValueError as exc:
            err.update(Text(str(exc)))
        else:
            err.update("")
            err.display = False

    @on(Input.Submitted)
    @on(Button.Pressed, "#hold-options-go")
    def _go(self) -> None:
        got = self.answer()
        if got is not None:
            self.dismiss(got)

    @on(Button.Pressed, "#hold-options-no")
    def _no(self) -> None:
        self.dismiss(None)

    def action_cancel(self) -> None:
        """Escape: close without reading anything."""
        self.dismiss(None)


__all__ = ["REASON_MAX_CHARS", "HoldOptionsScreen"]
