"""A FleetTable in a real terminal for tests/test_fleet_table.py: 1,000 rows; every 0.3 s the
visible row k3 and the off-screen row k500 get a new text (``CHANGED1`` … ``CHANGED3``), so
the test can check that the incremental repaint reaches the terminal."""

from __future__ import annotations

from textual.app import App, ComposeResult

from seat_console.tui.fleet_table import FleetTable

STYLES = ("bold", "")


def rows(n: int) -> list:
    """1,000 rows, k3 and k500 saying ``CHANGED{n}`` when ``n`` > 0."""
    return [(f"k{i}", ((f"node-{i}", f"CHANGED{n}" if n and i in (3, 500) else f"v{i}"),
                       STYLES)) for i in range(1000)]


class Demo(App[None]):
    """The table alone, changing two rows three times."""

    def compose(self) -> ComposeResult:
        yield FleetTable(id="t")

    def on_mount(self) -> None:
        t = self.query_one(FleetTable)
        t.set_columns([("node", "Node", 10), ("run", "Run", 10)], padding=1)
        t.set_rows(rows(0))
        self.n = 0
        self.set_interval(0.3, self.step)

    def step(self) -> None:
        if self.n < 3:
            self.n += 1
            self.query_one(FleetTable).set_rows(rows(self.n))


if __name__ == "__main__":
    Demo().run()
