"""The help screen (``?``): every key with a sentence on what it does, then how to read the
panels. Pure view: the key rows come down from the app's key table
(:func:`seat_console.tui.keys.help_rows`)."""

from __future__ import annotations

from typing import ClassVar

from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

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

    def __init__(self, keys: list[tuple[str, str, str]],
                 sections: list[tuple[str, list[str]]] | None = None) -> None:
        """``keys``: ``(keys, label, sentence)`` per key offered (the key table's help rows);
        ``sections``: ``(heading, paragraphs)`` after the keys (default: the main screen's,
        :data:`HELP_SECTIONS`)."""
        super().__init__(id="help")
        self._keys = keys
        self._sections = HELP_SECTIONS if sections is None else sections

    def compose(self) -> ComposeResult:
        """A scrollable help text: keys first (a sentence each, wrapped beside the key), then
        how to read the panels."""
        head = Text()
        head.append("Seat Console — help\n", style="bold")
        head.append("Close: Esc, q or ?. Scroll: ↑ ↓, PgUp PgDn, Home End (or the mouse "
                    "wheel).\n\n", style="italic")
        head.append("Keys", style="bold underline")
        keys = Table.grid(padding=(0, 1))
        keys.add_column(no_wrap=True, style="bold")
        keys.add_column(ratio=1)
        for key, label, sentence in self._keys:
            what = Text()
            what.append(label, style="bold")
            if sentence and sentence != label:
                what.append(f" — {sentence}")
            keys.add_row(f" {key}", what)
        rest = Text()
        for heading, paragraphs in self._sections:
            rest.append(f"\n{heading}\n", style="bold underline")
            for para in paragraphs:
                rest.append(f"• {para}\n")
        with VerticalScroll(id="help-scroll"):
            yield Static(head, id="help-head")
            yield Static(keys, id="help-keys")
            yield Static(rest, id="help-text")

    def key_text(self) -> str:
        """The key rows as plain text (tests, screen readers)."""
        return "\n".join(f"{k} {label} — {sentence}" for k, label, sentence in self._keys)

    def on_mount(self) -> None:
        """Focus the text so the arrow keys and PgUp/PgDn scroll it at once."""
        self.query_one("#help-scroll").focus()


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
        ("PAUSED: nothing is read until you press p again (each panel says 'paused', and no "
         "retry comes). READ-ONLY: no action that changes the node is offered."),
    ]),
    ("The header", [
        ("node · TP (tensor parallel size) · gpu_memory_utilization (the seat's share of each "
         "card's CUDA-visible memory, as vLLM is started with it); where the line is short of "
         "room it is written gpu_mem_util, then left out (the header's tooltip has it whole). "
         "On the right: READ-ONLY, PAUSED or how often the sources are read."),
    ]),
    ("The status line (under the header)", [
        ("engine UP/DOWN · which container holds the seat · hold · silence on the seat · "
         "timers active of those in the profile · fit of the candidate (fits / OVER: N GiB "
         "per card must leave, as `fit` says). Each in words, so it reads the same without colour (NO_COLOR)."),
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
         "open this help, quit (as q: a runbook in flight finishes its step)."),
    ]),
]
"""Help text after the key list: (heading, paragraphs)."""


__all__ = ["HELP_SECTIONS", "HelpScreen"]
