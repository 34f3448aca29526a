"""The fleet table widget (console/tui/fleet_table.py) on its own: it renders only the visible
window, re-renders only rows whose content changed, keeps the cursor on its row's key across a
new order, and posts RowSelected on Enter."""

from __future__ import annotations

from textual.app import App, ComposeResult

from seat_console.tui.fleet_table import FleetTable

COLS = [("node", "Node", 10), ("run", "Run", 4)]
STYLES = ("bold", "")


def _rows(n: int, bump: dict[int, str] | None = None) -> list:
    bump = bump or {}
    return [(f"k{i}", ((f"node-{i}", bump.get(i, str(i % 7))), STYLES)) for i in range(n)]


class _App(App[None]):
    def __init__(self) -> None:
        super().__init__()
        self.selected: list[str] = []

    def compose(self) -> ComposeResult:
        yield FleetTable(id="t")

    def on_fleet_table_row_selected(self, msg: FleetTable.RowSelected) -> None:
        self.selected.append(msg.row_key)


async def _settle(pilot) -> None:  # noqa: ANN001
    await pilot.pause()
    await pilot.pause()


async def test_only_changed_visible_rows_are_rendered_again():
    app = _App()
    async with app.run_test(size=(40, 12)) as pilot:
        t = app.query_one(FleetTable)
        t.set_columns(COLS, padding=1)
        assert t.set_rows(_rows(1000)) == 1000
        await _settle(pilot)
        first = t.rendered_rows
        assert 0 < first <= 11                       # the visible window only, not 1,000 rows
        assert t.set_rows(_rows(1000)) == 0          # same content: nothing changes
        await _settle(pilot)
        assert t.rendered_rows == first
        assert t.set_rows(_rows(1000, {3: "99", 500: "98"})) == 2
        await _settle(pilot)
        assert t.rendered_rows == first + 1          # row 3 is visible, row 500 is not
        assert "99" in t.render_line(4).text
        assert t.get_cell("k500", "run") == "98"


async def test_cursor_keys_follow_and_select():
    app = _App()
    async with app.run_test(size=(40, 12)) as pilot:
        t = app.query_one(FleetTable)
        t.focus()
        t.set_columns(COLS, padding=0)
        t.set_rows(_rows(50))
        await _settle(pilot)
        await pilot.press("down", "down")
        assert t.cursor_row == 2
        await pilot.press("end")
        assert t.cursor_row == 49 and t.scroll_offset.y > 0
        assert "node-49" in t.render_line(t.size.height - 1).text   # scrolled into view
        await pilot.press("home", "down", "enter")
        await _settle(pilot)
        assert app.selected == ["k1"]
        rows = _rows(50)
        t.set_rows(rows[::-1])                       # a new order: the cursor stays on k1
        assert t.row_keys[t.cursor_row] == "k1"
        t.set_rows(rows[:1])                         # its row gone: clamped
        assert t.cursor_row == 0


def test_incremental_repaint_reaches_a_real_terminal():
    """The partial repaints (one line per changed visible row) are what a terminal shows:
    the demo changes row k3 three times; the screen (a VT100 emulator fed the pty's bytes)
    must end with CHANGED3 on k3's line and the other rows intact."""
    import sys
    import threading
    from pathlib import Path

    import pyte

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
    from ptyrun import PtyRun

    screen = pyte.Screen(40, 12)
    stream = pyte.ByteStream(screen)
    lock, seen = threading.Lock(), threading.Event()

    def feed(chunk: bytes, t: float) -> None:
        with lock:
            stream.feed(chunk)
            if any("CHANGED3" in line for line in screen.display):
                seen.set()

    demo = str(Path(__file__).with_name("fleet_table_demo.py"))
    with PtyRun([sys.executable, demo], cols=40, rows=12, on_chunk=feed):
        assert seen.wait(60), "CHANGED3 never reached the terminal"
        with lock:
            lines = list(screen.display)
    by_node = {line.split()[0]: line.split()[1] for line in lines
               if line.strip().startswith("node-")}
    assert by_node["node-3"] == "CHANGED3"
    assert by_node["node-2"] == "v2" and by_node["node-4"] == "v4"
