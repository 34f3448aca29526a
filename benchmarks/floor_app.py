#!/usr/bin/env python3
"""The floor for the console's idle cost: a minimal Textual app that redraws one line once a
second (a clock, as the console's ages move at 1 Hz) and does nothing else. Its idle CPU,
start-up and RSS are what Textual itself costs on this machine (``bench_lab_idle.py`` runs it
beside the console). The line reads ``floor ready HH:MM:SSZ`` once the screen is up."""

from __future__ import annotations

from datetime import UTC, datetime

from textual.app import App, ComposeResult
from textual.widgets import Static


class FloorApp(App[None]):
    """One :class:`Static`, updated every second with the UTC time."""

    def compose(self) -> ComposeResult:
        yield Static(id="clock")

    def on_mount(self) -> None:
        self.tick()
        self.set_interval(1.0, self.tick)

    def tick(self) -> None:
        """Redraw the line with the time now (UTC)."""
        self.query_one("#clock", Static).update(
            f"floor ready {datetime.now(UTC):%H:%M:%S}Z")


if __name__ == "__main__":
    FloorApp().run()
