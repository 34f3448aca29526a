"""A panel's detail view (Enter on a focused panel): the full reading in a modal screen."""

from __future__ import annotations

from typing import ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Footer, Static

from seat_console.widgets.panel import SourcePanel

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
        if focused is not None and is_field(focused):
            self.query_one("#detail-scroll").focus()
            return
        self.dismiss()


def is_field(widget: object) -> bool:
    """Whether ``widget`` takes typed keys (an Input or a Select)."""
    from textual.widgets import Input, Select

    return isinstance(widget, Input | Select)


__all__ = ["DetailScreen", "is_field"]
