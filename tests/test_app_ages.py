"""Issue 11 (fresh-eyes defects): relative ages follow the app's age tick, and a compact panel's
dimmed last good value says in words that it is the last good value (NO_COLOR included).

Pilot tests over constructed readings (tests/screen_fixtures.py), a fixed clock and an hour's
refresh interval: the app never polls by itself, so a tick (``app.tick_ages()``) or an equal
reading is the only thing that can move what the panels show.
"""

from __future__ import annotations

import sys
from datetime import timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
import screen_fixtures as F
from screen_fixtures import lines_of, refresh_all, wait_for
from app_fixtures import T0, FakeClock, default_loaded

from seat_console.tui.app import SeatConsoleApp
from seat_console.tui.panels import PanelSpec
from seat_console.core.base import Unavailable
from seat_console.sources.seat import SeatReading
from seat_console.widgets.seat import SeatPanel
from seat_console.widgets.services import ContainersPanel, EnginePanel, TimersPanel

SINCE = T0 - timedelta(seconds=47)


def seat_reading() -> SeatReading:
    return SeatReading(role="resident", name="seat-resident", container_id="c0ffee",
                       since=SINCE, image_id="sha256:" + "a" * 64, read_at=T0)


def app_with(sources: dict, panels: dict, clock: FakeClock, compact: bool | None):
    specs = [PanelSpec((lambda s: (lambda _l: s))(sources[k]), panels[k]) for k in sources]
    return SeatConsoleApp(default_loaded(), interval=3600.0, panels=specs, clock=clock,
                          watch_terminal=False, age_tick_s=3600.0, compact=compact)


def row(app: SeatConsoleApp, needle: str) -> str:
    return next((x for x in lines_of(app) if needle in x), f"<no row with {needle!r}>")


async def check_seat_age_follows_the_tick(compact: bool, size: tuple[int, int]) -> None:
    clock = FakeClock()
    seat = F.Fixed("seat", seat_reading())
    cont = F.Fixed("containers", F.containers())
    app = app_with({"seat": seat, "containers": cont},
                   {"seat": SeatPanel, "containers": ContainersPanel}, clock, compact)
    async with app.run_test(size=size) as pilot:
        await wait_for(pilot, lambda: all(st.polls for st in app.states.values()), "readings")
        await pilot.pause()
        assert "(40 s ago)" in row(app, "holds the seat since 11:")
        clock.advance(92)                    # 2 min 19 s after "since"
        await refresh_all(pilot, app)            # an equal reading: the app does not redraw it
        assert "since" in row(app, "holds the seat since") and \
            "(2 min ago)" in row(app, "holds the seat since"), row(app, "holds the seat")
        clock.advance(55)                    # 3 min 14 s: only the tick moves it now
        app.tick_ages()
        await pilot.pause()
        assert "(3 min ago)" in row(app, "holds the seat since"), row(app, "holds the seat")
        draws = app.states["seat"].panel.draws
        clock.advance(1)                     # inside the same step: nothing is redrawn
        app.tick_ages()
        await pilot.pause()
        assert app.states["seat"].panel.draws == draws


async def test_seat_since_age_follows_the_tick_in_the_compact_view() -> None:
    await check_seat_age_follows_the_tick(True, (80, 24))


async def test_seat_since_age_follows_the_tick_in_the_full_view() -> None:
    await check_seat_age_follows_the_tick(False, (160, 50))


async def test_timer_and_container_ages_follow_the_tick() -> None:
    clock = FakeClock()
    srcs = {"timers": F.Fixed("timers", F.timers()),
            "containers": F.Fixed("containers", F.containers(running=False))}
    app = app_with(srcs, {"timers": TimersPanel, "containers": ContainersPanel}, clock, True)
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_for(pilot, lambda: all(st.polls for st in app.states.values()), "readings")
        await pilot.pause()
        assert "(in 6 min)" in row(app, "fleet-remediation-cycle")
        assert "exited (137)" in row(app, "seat-resident") and \
            "3 min ago" in row(app, "seat-resident")
        clock.advance(120)
        app.tick_ages()
        await pilot.pause()
        assert "(in 4 min)" in row(app, "fleet-remediation-cycle"), \
            row(app, "fleet-remediation-cycle")
        assert "5 min ago" in row(app, "seat-resident"), row(app, "seat-resident")


async def check_compact_last_good_in_words(monkeypatch, no_color: bool) -> None:
    if no_color:
        monkeypatch.setenv("NO_COLOR", "1")
    clock = FakeClock()
    srcs = {"engine": F.Fixed("engine", F.engine()), "seat": F.Fixed("seat", seat_reading()),
            "containers": F.Fixed("containers", F.containers()),
            "timers": F.Fixed("timers", F.timers())}
    panels = {"engine": EnginePanel, "seat": SeatPanel, "containers": ContainersPanel,
              "timers": TimersPanel}
    app = app_with(srcs, panels, clock, True)
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_for(pilot, lambda: all(st.polls for st in app.states.values()), "readings")
        await pilot.pause()
        assert "UP healthy" in row(app, "UP healthy")
        assert not row(app, "UP healthy").lstrip().startswith("last good")
        for key, src in srcs.items():
            src.reading = Unavailable(source=key, kind="unreachable",
                                      reason="connection refused (127.0.0.1:9)")
        clock.advance(6)
        await refresh_all(pilot, app)
        lines = lines_of(app)
        for needle in ("UP healthy", "holds the seat", "seat-resident  running",
                       "fleet-remediation-cycle.timer"):
            line = row(app, needle)
            assert line.lstrip().startswith("last good 6 s ago: "), (needle, line, lines)
        clock.advance(60)                    # the words age with the tick
        app.tick_ages()
        await pilot.pause()
        assert row(app, "UP healthy").lstrip().startswith("last good 1 min ago: ")
        assert row(app, "req/s").startswith("  "), row(app, "req/s")   # under its heading
        for src, reading in zip(srcs.values(), (F.engine(), seat_reading(), F.containers(),
                                                F.timers()), strict=True):
            src.reading = reading
        await refresh_all(pilot, app)
        assert not row(app, "UP healthy").lstrip().startswith("last good")


async def test_compact_unavailable_panel_says_its_value_is_the_last_good_one(monkeypatch):
    await check_compact_last_good_in_words(monkeypatch, no_color=False)


async def test_compact_unavailable_panel_says_it_under_no_color(monkeypatch):
    await check_compact_last_good_in_words(monkeypatch, no_color=True)


async def test_160x50_keeps_the_fit_panel_compact_so_every_panel_headline_is_on_screen():
    app, _srcs = F.seat_app()
    async with app.run_test(size=(160, 50)) as pilot:
        await wait_for(pilot, lambda: all(st.polls for st in app.states.values()), "readings")
        await pilot.pause()
        assert app.states["fit"].panel.compact
        assert not app.states["engine"].panel.compact   # the others keep their full forms
        text = "\n".join(lines_of(app))
        for needle in ("Engine (vLLM)", "Containers (docker)", "Timers (systemd)", "Fit ("):
            assert needle in text, needle
