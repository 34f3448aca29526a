"""The console's main screen: its layout by terminal size (compact panels below
:data:`COMPACT_BELOW_ROWS` rows, two columns from :data:`WIDE_FROM_COLS` columns, "too small"
below :data:`MIN_COLS` × :data:`MIN_ROWS`), and the redraw of what arrived while a modal was
open."""

from __future__ import annotations

from rich.text import Text
from textual import events
from textual.app import ComposeResult
from textual.containers import Horizontal, VerticalScroll
from textual.css.query import NoMatches
from textual.screen import Screen
from textual.widgets import Static

from seat_console.tui import keys as keytable
from seat_console.tui.messages import ConsoleApp
from seat_console.widgets.footer import SeatFooter
from seat_console.widgets.header import SeatHeader
from seat_console.widgets.panel import SourcePanel
from seat_console.widgets.runbook_strip import RunbookStrip
from seat_console.widgets.status import StatusLine


COMPACT_BELOW_ROWS = 50
"""Below this many terminal rows the main screen shows the panels' compact forms."""

WIDE_FROM_COLS = 160
"""From this many columns the panels are laid out in two columns."""

MIN_COLS, MIN_ROWS = 60, 12
"""Smallest terminal that can show the header and the status line (columns, rows)."""


class MainScreen(Screen[None]):
    """The console's screen (posting's ``MainScreen``: the screen owns its layout, the app stays
    small): header, status line, the panels, footer; redraws panels that changed while a modal
    was open; lays them out by size."""

    @property
    def seat_app(self) -> ConsoleApp:
        """The app, typed (this screen is only the console app's)."""
        return self.app  # type: ignore[return-value]

    def on_key(self, event: events.Key) -> None:
        """Under ``--readonly``, a key of a node action (hidden and not run) says why nothing
        happened instead of nothing at all (a new engineer told "press H to hold" took the key
        for broken); other keys pass on."""
        app = self.app
        if not getattr(app, "readonly", False):
            return
        b = keytable.node_action_of_key(
            keytable.remapped(app.BINDINGS, getattr(app, "keymap", {})), event.key)
        if b is None:
            return
        event.stop()
        app.notify(f"{b.key_display or app.get_key_display(b)} {b.description}: not in this "
                   "console — it runs --readonly and changes nothing on the node (start it "
                   "without --readonly to act)", severity="warning", timeout=6)

    def on_screen_resume(self) -> None:
        """Back from help or the palette: draw what arrived meanwhile."""
        self.seat_app.redraw_dirty()

    def on_resize(self, event: object) -> None:
        """Compact or full panels, one or two columns, "too small" — by the new size."""
        self.apply_size(self.size.width, self.size.height)

    def apply_size(self, width: int, height: int) -> None:
        """Compact panels below :data:`COMPACT_BELOW_ROWS` rows; "too small" below
        :data:`MIN_COLS` × :data:`MIN_ROWS` (saying so, and what is needed)."""
        app = self.seat_app
        small = width < MIN_COLS or height < MIN_ROWS
        self.set_class(small, "-too-small")
        if small:
            try:
                self.query_one("#too-small", Static).update(Text(
                    f"Terminal {width}×{height} is too small for the seat's status line: "
                    f"make it at least {MIN_COLS}×{MIN_ROWS} (q quits).", justify="center"))
            except NoMatches:
                pass
        compact = layout_compact(app, height)
        for st in app.states.values():   # set_compact: a no-op when unchanged
            st.panel.set_compact(panel_compact(app, width, height, st.panel))
        if compact != app.compact_layout:
            app.compact_layout = compact
            app.update_header()


def layout_compact(app: ConsoleApp, height: int) -> bool:
    """Whether the main screen shows the compact forms at ``height`` rows: below
    :data:`COMPACT_BELOW_ROWS`, unless the app forces one form (``force_compact``)."""
    return height < COMPACT_BELOW_ROWS if app.force_compact is None else app.force_compact


def panel_compact(app: ConsoleApp, width: int, height: int, panel: SourcePanel) -> bool:
    """Whether ``panel`` shows its compact form in a ``width`` × ``height`` terminal: the
    layout's (:func:`layout_compact`); a panel with ``compact_when_wide`` (the fit budget)
    stays compact in the two-column layout too, so a big terminal shows every panel's
    headline on its first screen."""
    wide_compact = app.force_compact is None and width >= WIDE_FROM_COLS
    return layout_compact(app, height) or (wide_compact and panel.compact_when_wide)


def compose_main(app: ConsoleApp) -> ComposeResult:
    """The main screen's widgets: header, status line, the runbook strip, the panels in a scrolling column (two
    at ≥ 160 columns; the column is no Tab stop, the panels are), footer. Composed by the app (``App.compose``), so the panels are
    mounted before the app's mount starts the polls."""
    yield SeatHeader(id="header-text")
    yield StatusLine(id="status-line")
    yield RunbookStrip(app.key_of, None if app.readonly else app.key_of("runbook"),
                       id="runbook-strip")
    yield Static(id="too-small")
    width, height = app.size
    for st in app.states.values():   # mounted in the form the first resize will ask for:
        # set before mount, the class costs no restyle of each panel (issue 33)
        st.panel.set_compact(panel_compact(app, width, height, st.panel))
    # not a Tab stop: its focus showed nowhere (an invisible stop after the last panel); the
    # arrow keys, PgUp/PgDn, Home/End still scroll it from the focused panel inside it (its
    # bindings are on the focused widget's chain)
    with VerticalScroll(id="panels", can_focus=False):
        row: list[SourcePanel] = []
        for st in app.states.values():   # span-1 panels pair up in the wide layout
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
    yield SeatFooter(compact=True, drop_order=keytable.footer_drop_order())


__all__ = ["COMPACT_BELOW_ROWS", "MIN_COLS", "MIN_ROWS", "WIDE_FROM_COLS", "MainScreen", "compose_main",
           "layout_compact", "panel_compact"]
