"""The fleet screen's table: a Line-API widget that renders only the visible window of rows and
re-renders only the rows whose displayed content changed.

Why not Textual's ``DataTable``: its line cache is keyed by one update counter, so any changed
cell re-renders every visible cell (~36 rows × 9 cells at 60 lines) and the whole widget is
repainted; with 1,000 seats whose numbers move every 5 s that was most of the fleet screen's
idle CPU (docs/benchmarks.md, issue 19). Here each row's rendered :class:`~textual.strip.Strip`
is cached by the row's content (its cells' texts and styles) and whether the cursor is on it;
:meth:`FleetTable.set_rows` compares each row's content with the shown one and marks dirty only
the screen lines of visible rows that changed (nothing at all when none did).

Shape: a fixed header line, then one line per row; ``rows`` are ``(key, (texts, styles))``
with ``texts`` a tuple of strings in column order (plain: never parsed as console markup —
node names and phases come from outside) and ``styles`` a tuple of Rich style strings, ``""``
for none (share one ``styles`` tuple between rows of the same look: comparing it is then an
identity check). Keys: up / down / page up / page down / home / end move the cursor, Enter posts
:class:`FleetTable.RowSelected`; a click moves the cursor, a click on the cursor row selects it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import ClassVar

from rich.cells import set_cell_size
from rich.segment import Segment
from rich.style import Style
from textual import events
from textual.binding import Binding
from textual.geometry import Region, Size
from textual.message import Message
from textual.scroll_view import ScrollView
from textual.strip import Strip

Content = tuple[tuple[str, ...], tuple[str, ...]]
"""One row's content: ``(texts, styles)``, each in column order."""
Row = tuple[str, Content]
"""One row: ``(key, content)``."""


class FleetTable(ScrollView, can_focus=True):
    """Rows of plain-text cells under a fixed header, with a row cursor.

    Columns are set with :meth:`set_columns` (``(key, header, width)``, ``width`` in terminal
    cells, plus ``padding`` cells each side); rows with :meth:`set_rows`. ``cursor_row`` is the
    cursor's index in the rows (0 when there are none). Renders at most the visible rows, each
    from a per-row cache keyed by its content."""

    COMPONENT_CLASSES: ClassVar[set[str]] = {"fleet-table--header", "fleet-table--cursor"}
    DEFAULT_CSS = """
    FleetTable { background: $surface; color: $foreground; }
    FleetTable > .fleet-table--header { text-style: bold; background: $panel;
                                        color: $foreground; }
    FleetTable > .fleet-table--cursor { background: $block-cursor-blurred-background;
                                        color: $block-cursor-blurred-foreground; }
    FleetTable:focus > .fleet-table--cursor { background: $block-cursor-background;
                                              color: $block-cursor-foreground;
                                              text-style: bold; }
    """
    BINDINGS: ClassVar = [
        Binding("up", "cursor(-1)", "up", show=False, id="fleet.table.up"),
        Binding("down", "cursor(1)", "down", show=False, id="fleet.table.down"),
        Binding("pageup", "page(-1)", "page up", show=False, id="fleet.table.page_up"),
        Binding("pagedown", "page(1)", "page down", show=False, id="fleet.table.page_down"),
        Binding("home", "to(0)", "first", show=False, id="fleet.table.home"),
        Binding("end", "to(-1)", "last", show=False, id="fleet.table.end"),
        Binding("enter", "select", "open", show=False, id="fleet.table.select"),
    ]

    class RowSelected(Message):
        """Enter (or a click) on a row: ``row_key`` (the row's key), ``cursor_row`` (its
        index)."""

        def __init__(self, table: FleetTable, row_key: str, cursor_row: int) -> None:
            super().__init__()
            self.table = table
            self.row_key = row_key
            self.cursor_row = cursor_row

        @property
        def control(self) -> FleetTable:
            """The table that posted it."""
            return self.table

    class Scrolled(Message):
        """The visible window moved to another first row (scroll, page, cursor): ``top``."""

        def __init__(self, table: FleetTable, top: int) -> None:
            super().__init__()
            self.table = table
            self.top = top

        @property
        def control(self) -> FleetTable:
            """The table that posted it."""
            return self.table

    def __init__(self, *, id: str | None = None) -> None:  # noqa: A002 - Textual's name
        super().__init__(id=id)
        self.columns: list[tuple[str, str, int]] = []
        self.cell_padding = 1
        self.cursor_row = 0
        self._keys: list[str] = []
        self._content: list[Content | None] = []
        self._source: Callable[[int], Content] | None = None
        self._index: dict[str, int] = {}
        self._cache: dict[str, tuple[Content, bool, Strip]] = {}
        self._header: tuple[tuple, Strip] | None = None
        self._styles: tuple[Style, Style] | None = None
        self._segs: dict[tuple[str, int, str, bool], Segment] = {}
        self.rendered_rows = 0
        """Rows rendered (cache misses) since start: for tests and profiles."""

    # -- the model ---------------------------------------------------------------------------
    @property
    def row_count(self) -> int:
        """Number of rows."""
        return len(self._keys)

    @property
    def row_keys(self) -> list[str]:
        """The rows' keys in display order (a copy)."""
        return list(self._keys)

    @property
    def line_width(self) -> int:
        """Width of a full row in cells: the columns' widths plus their padding."""
        return sum(w + 2 * self.cell_padding for _, _, w in self.columns)

    def set_columns(self, columns: Sequence[tuple[str, str, int]], padding: int) -> None:
        """Set the columns (``(key, header, width)``, width in cells) and the padding each
        side of a cell; every row is rendered again."""
        self.columns = list(columns)
        self.cell_padding = padding
        self._cache.clear()
        self._segs.clear()
        self._header = None
        self._sync_size()
        self.refresh()

    def get_cell(self, row_key: str, column_key: str) -> str:
        """The plain text of one cell. Raises ``KeyError`` for an unknown row or column."""
        cols = [k for k, _, _ in self.columns]
        if column_key not in cols:
            raise KeyError(column_key)
        return self._content_at(self._index[row_key])[0][cols.index(column_key)]

    def _content_at(self, i: int) -> Content:
        c = self._content[i]
        if c is None:
            assert self._source is not None
            c = self._content[i] = self._source(i)
        return c

    def set_rows(self, rows: Sequence[Row]) -> int:
        """Show ``rows`` (``(key, (texts, styles))``, keys unique). When the keys and their order are
        unchanged only the visible rows whose cells changed are repainted (nothing when none
        did); otherwise every visible row is, the cursor staying on its row's key when that
        row is still there. Returns the number of rows whose content changed (all of them on
        a new order)."""
        keys = [k for k, _ in rows]
        if keys == self._keys:
            content = self._content
            top, bottom, width = self._window()
            changed = 0
            for i, (_, cells) in enumerate(rows):
                if content[i] != cells:
                    content[i] = cells
                    changed += 1
                    if top <= i < bottom:
                        self.refresh(Region(0, i - top + 1, width, 1))
            self._source = None
            return changed
        self._new_order(keys, [c for _, c in rows], None)
        return len(keys)

    def set_rows_lazy(self, keys: Sequence[str], content_at: Callable[[int], Content]) -> int:
        """Show the rows ``keys`` (unique), whose content is ``content_at(i)`` for row ``i``,
        asked for only when the row is drawn or read (:meth:`get_cell`): a refresh of 1,000
        rows with ~40 on screen builds ~40 rows' texts, not 1,000. ``content_at`` is called on
        the UI thread until the next ``set_rows*``. Same repaint rules as :meth:`set_rows`;
        returns the number of *visible* rows whose content changed (all of them on a new
        order)."""
        keys = list(keys)
        if keys == self._keys:
            self._content = [None] * len(keys)
            self._source = content_at
            top, bottom, width = self._window()
            changed = 0
            for i in range(top, min(bottom, len(keys))):
                hit = self._cache.get(keys[i])
                if hit is None or hit[0] != self._content_at(i):
                    changed += 1
                    self.refresh(Region(0, i - top + 1, width, 1))
            return changed
        self._new_order(keys, [None] * len(keys), content_at)
        return len(keys)

    def _window(self) -> tuple[int, int, int]:
        """``(first visible row, one past the last, line width to repaint)``."""
        top = int(self.scroll_offset.y)
        return top, top + max(0, self.size.height - 1), max(self.size.width, self.line_width)

    def visible_range(self) -> tuple[int, int]:
        """``(first, one past the last)`` index of the rows on screen (scroll offset and
        height; the last may be past the rows)."""
        top, bottom, _ = self._window()
        return top, bottom

    def _new_order(self, keys: list[str], content: list[Content | None],
                   source: Callable[[int], Content] | None) -> None:
        at = self._keys[self.cursor_row] if 0 <= self.cursor_row < len(self._keys) else None
        self._keys = keys
        self._content = content
        self._source = source
        self._index = {k: i for i, k in enumerate(keys)}
        live = self._index
        self._cache = {k: v for k, v in self._cache.items() if k in live}
        if at in live:
            self.cursor_row = live[at]
        self.cursor_row = max(0, min(self.cursor_row, len(keys) - 1))
        self._sync_size()
        self._scroll_to_cursor()
        self.refresh()

    def _sync_size(self) -> None:
        self.virtual_size = Size(self.line_width, len(self._keys) + 1)

    def watch_scroll_y(self, old_value: float, new_value: float) -> None:
        """Scrolled: Textual's own handling, then :class:`Scrolled` when the first visible row
        changed (the fleet screen reads the numbers of rows that came into view)."""
        super().watch_scroll_y(old_value, new_value)
        if round(old_value) != round(new_value):
            self.post_message(self.Scrolled(self, int(round(new_value))))

    # -- rendering ---------------------------------------------------------------------------
    def _line(self, content: Content, base: Style, over: Style | None = None) -> Strip:
        """One line of ``content``: each cell's style over ``base``, then ``over`` (the
        cursor's style, so the cursor row reads the same whatever its cells' colours)."""
        pad = " " * self.cell_padding
        segs = []
        for (_, _, w), text, style in zip(self.columns, *content, strict=False):
            st = base + Style.parse(style) if style else base
            if over is not None:
                st = st + over
            segs.append(Segment(pad + set_cell_size(text, w) + pad, st))
        return Strip(segs, self.line_width)

    def _row_line(self, content: Content, on: bool) -> Strip:
        """A row's line as :meth:`_line` draws it, each cell's :class:`Segment` kept by
        ``(text, width, style, cursor)``: of a row whose numbers moved, the other cells are
        reused (cleared with the styles: theme, focus, columns)."""
        base, cursor = self._base_styles()
        pad = " " * self.cell_padding
        cache = self._segs
        if len(cache) > 20_000:
            cache.clear()
        segs = []
        for (_, _, w), text, style in zip(self.columns, *content, strict=False):
            key = (text, w, style, on)
            seg = cache.get(key)
            if seg is None:
                st = base + Style.parse(style) if style else base
                if on:
                    st = st + cursor
                seg = cache[key] = Segment(pad + set_cell_size(text, w) + pad, st)
            segs.append(seg)
        return Strip(segs, self.line_width)

    def _base_styles(self) -> tuple[Style, Style]:
        """``(the widget's rich style, the cursor's)``, computed once per style change (Textual
        walks the ancestors for each: it was a tenth of a refresh's UI time)."""
        if self._styles is None:
            self._styles = (self.rich_style,
                            self.get_component_rich_style("fleet-table--cursor"))
        return self._styles

    def _header_strip(self) -> Strip:
        style = self.get_component_rich_style("fleet-table--header")
        key = (tuple(self.columns), self.cell_padding, style)
        if self._header is None or self._header[0] != key:
            self._header = (key, self._line((tuple(h for _, h, _ in self.columns),
                                             ("",) * len(self.columns)), style))
        return self._header[1]

    def _row_strip(self, i: int) -> Strip:
        key, cells = self._keys[i], self._content_at(i)
        on = i == self.cursor_row
        hit = self._cache.get(key)
        if hit is not None and hit[1] == on and hit[0] is cells:
            return hit[2]
        if hit is not None and hit[1] == on and hit[0] == cells:
            self._cache[key] = (cells, on, hit[2])
            return hit[2]
        strip = self._row_line(cells, on)
        self._cache[key] = (cells, on, strip)
        self.rendered_rows += 1
        return strip

    def render_line(self, y: int) -> Strip:
        """Line ``y`` of the widget: the header at 0, else row ``y - 1 + scroll_y``."""
        width = self.size.width
        sx, sy = self.scroll_offset
        if y == 0:
            strip = self._header_strip()
        else:
            i = y - 1 + sy
            if not 0 <= i < len(self._keys):
                return Strip.blank(width, self._base_styles()[0])
            strip = self._row_strip(i)
        return strip.crop_extend(sx, sx + width, self._base_styles()[0])

    def notify_style_update(self) -> None:
        """Styles changed (theme, focus): render every row again."""
        super().notify_style_update()
        self._cache.clear()
        self._segs.clear()
        self._styles = None
        self._header = None

    def on_focus(self, event: events.Focus) -> None:
        """Focus changes the cursor's style: render the rows again."""
        self._cache.clear()
        self._segs.clear()
        self._styles = None
        self.refresh()

    def on_blur(self, event: events.Blur) -> None:
        """Blur changes the cursor's style: render the rows again."""
        self._cache.clear()
        self._segs.clear()
        self._styles = None
        self.refresh()

    # -- the cursor --------------------------------------------------------------------------
    def _refresh_row(self, i: int) -> None:
        top = int(self.scroll_offset.y)
        if top <= i < top + self.size.height - 1:
            self.refresh(Region(0, i - top + 1, max(self.size.width, self.line_width), 1))

    def _scroll_to_cursor(self) -> None:
        """Scroll the cursor's row into view. ``force``: a table that had no scrollbar (a
        filter left a screenful of rows) has none yet when the rows come back, and Textual
        drops the scroll of a widget without one — the cursor was left off screen, and ``a``
        acted on a seat nobody saw."""
        page = max(1, self.size.height - 1)
        top = int(self.scroll_offset.y)
        if self.cursor_row < top:
            self.scroll_to(y=self.cursor_row, animate=False, force=True)
        elif self.cursor_row >= top + page:
            self.scroll_to(y=self.cursor_row - page + 1, animate=False, force=True)

    def on_resize(self, event: events.Resize) -> None:
        """A new height (the filter box shown or hidden): the cursor's row kept in view."""
        self._scroll_to_cursor()

    def cursor_shown(self) -> bool:
        """Whether the cursor is on a row that is on screen (a row exists under it and the
        visible window holds it)."""
        top, bottom = self.visible_range()
        return 0 <= self.cursor_row < len(self._keys) and top <= self.cursor_row < bottom

    def move_cursor(self, row: int) -> None:
        """Put the cursor on row ``row`` (clamped), scrolling it into view."""
        new = max(0, min(row, len(self._keys) - 1))
        if new == self.cursor_row:
            return
        old, self.cursor_row = self.cursor_row, new
        self._refresh_row(old)
        self._refresh_row(new)
        self._scroll_to_cursor()

    def action_cursor(self, delta: int) -> None:
        """Up / down: the cursor ``delta`` rows."""
        self.move_cursor(self.cursor_row + delta)

    def action_page(self, pages: int) -> None:
        """Page up / down: the cursor by the visible rows."""
        self.move_cursor(self.cursor_row + pages * max(1, self.size.height - 2))

    def action_to(self, row: int) -> None:
        """Home / end: the first row (0) or the last (-1)."""
        self.move_cursor(row if row >= 0 else len(self._keys) - 1)

    def action_select(self) -> None:
        """Enter: post :class:`RowSelected` for the cursor's row."""
        if 0 <= self.cursor_row < len(self._keys):
            self.post_message(self.RowSelected(self, self._keys[self.cursor_row],
                                               self.cursor_row))

    def on_click(self, event: events.Click) -> None:
        """A click moves the cursor to its row; on the cursor's row it selects it."""
        y = event.y
        if y < 1:
            return
        i = y - 1 + int(self.scroll_offset.y)
        if not 0 <= i < len(self._keys):
            return
        if i == self.cursor_row:
            self.action_select()
        else:
            self.move_cursor(i)


__all__ = ["Content", "FleetTable", "Row"]
