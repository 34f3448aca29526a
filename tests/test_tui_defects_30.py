"""Issue 30 item 9: the screen defects met on the way through the runbook, each driven by Pilot
through the one key table and the one runbook controller (console/tui/runbook.py): the swap's
typed confirmation keeps its buttons and "Esc: cancel" on an 80×24 screen; the Actions panel
(the hold's countdown) is on the first screen at 80×24; the footer offers the runbook's action
keys at 80 columns; right after an action the sources it touched are read at once, their
back-off reset (the status line said ``engine DOWN`` for ~10 s after a swap had verified the
new engine serving). The hold dialog's TTL-first focus is in tests/test_tui_defects.py."""

from __future__ import annotations

import sys
import threading
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace

import pytest

sys.path.insert(0, str(Path(__file__).parent))
import screen_fixtures as F
from app_fixtures import CountingPanel, CountingSource, FakeClock, Reading, default_loaded
from screen_fixtures import all_read, lines_of, wait_for

from seat_console.core.base import Source, Unavailable
from seat_console.tui import runbook as rb
from seat_console.tui.app import SeatConsoleApp
from seat_console.tui.messages import RunFinished
from seat_console.widgets.confirm import ConfirmScreen
from seat_console.widgets.services import EnginePanel


@pytest.fixture(autouse=True)
def _state(tmp_path, monkeypatch):
    monkeypatch.setenv("SEAT_CONSOLE_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.setenv("SEAT_CONSOLE_DATA_DIR", str(tmp_path / "data"))


class _LongPlan:
    ok = True
    lines: list = []

    def text_lines(self) -> list[str]:
        return [f"• step {i}: stop, start or verify something on the node" for i in range(16)]


async def test_swap_confirmation_keeps_its_buttons_and_hint_on_80x24(monkeypatch) -> None:
    runbook = SimpleNamespace(plan=lambda: _LongPlan())
    monkeypatch.setitem(rb.FLOWS, "swap", replace(rb.FLOWS["swap"],
                                                  make=lambda *a, **k: runbook))
    app = SeatConsoleApp(default_loaded(), interval=3600.0,
                         panels=[(lambda _l: CountingSource(), CountingPanel)],
                         clock=FakeClock(), age_tick_s=3600.0, watch_terminal=False)
    async with app.run_test(size=(80, 24)) as pilot:
        await all_read(pilot, app)   # the main screen built: a key pressed before it was lost
        await pilot.press("S")
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmScreen), "the confirmation")
        scr = app.screen
        await wait_for(pilot, lambda: "Esc: cancel" in "\n".join(lines_of(app)), "the hint")
        text = "\n".join(lines_of(app))
        assert "Yes, swap the seat" in text and "Cancel" in text, text
        assert "Type 'seat-node' to confirm:" in text
        for wid in ("#confirm-yes-button", "#confirm-no-button", "#confirm-input"):
            r = scr.query_one(wid).region
            assert r.height > 0 and r.bottom <= 24, (wid, r)
        assert "step 0:" in text                       # the plan's head shows; the rest scrolls
        plan = scr.query_one("#confirm-plan")
        assert plan.max_scroll_y > 0


async def test_actions_panel_is_on_the_first_screen_at_80x24() -> None:
    app, _ = F.seat_app(silence_active=True, with_actions=True)
    async with app.run_test(size=(80, 24)) as pilot:
        await all_read(pilot, app)
        lines = lines_of(app)
        head = next((i for i, x in enumerate(lines) if x.lstrip("━─ ").startswith("Actions")),
                    None)
        assert head is not None and head + 1 < len(lines) - 1, lines
        assert "HOLD ACTIVE" in lines[head + 1], lines


async def test_footer_offers_the_runbooks_action_keys_at_80_columns() -> None:
    app, _ = F.seat_app()
    async with app.run_test(size=(80, 24)) as pilot:
        await all_read(pilot, app)
        # the footer recomposes as the first readings change the bindings: wait for its keys
        await wait_for(pilot, lambda: "g runbook" in lines_of(app)[-1], "the footer's keys")
        footer = lines_of(app)[-1]
        for key in ("H hold", "B build", "S swap", "P probe", "R restore", "g runbook"):
            assert key in footer, footer
        assert "q quit" in footer and "? all keys" in footer and "^p palette" in footer


class _Engine(Source):
    """``engine``: down until ``up``; the first read after ``gate_next`` waits on ``gate``."""

    name = "engine"

    def __init__(self) -> None:
        self.up = False
        self.reads = 0
        self.gate = threading.Event()
        self.entered = threading.Event()
        self.gate_next = False

    def read(self):
        self.reads += 1
        up = self.up                             # as when the read began
        if self.gate_next:
            self.gate_next = False
            self.entered.set()
            self.gate.wait(30)
        if up:
            return F.engine()
        return Unavailable(source="engine", kind="unreachable",
                           reason="connection refused (127.0.0.1:8000)")


def _facts(app) -> str:
    return " · ".join(f"{f.label} {f.words}" for f in app.query_one("#status-line").facts)


async def test_after_a_swap_the_engine_is_read_at_once_its_back_off_reset() -> None:
    """A read in flight when the swap ends (it began while the engine was still starting, and
    answers DOWN) is followed by another at once, and the back-off of the DOWN readings is
    reset. The refresh interval is an hour: only the read after the action can show UP."""
    eng = _Engine()
    app = SeatConsoleApp(default_loaded(), interval=3600.0, clock=FakeClock(), age_tick_s=3600.0,
                         panels=[(lambda _l: eng, EnginePanel)], watch_terminal=False)
    async with app.run_test(size=(120, 40)) as pilot:
        st = app.states["engine"]
        await wait_for(pilot, lambda: st.consecutive_errors == 1, "a DOWN reading")
        assert "engine DOWN" in _facts(app)
        st.consecutive_errors = 5              # the swap took the engine down for a while
        eng.gate_next = True
        app._start_poll("engine")
        await wait_for(pilot, lambda: eng.entered.is_set(), "a read in flight")
        eng.up = True                          # the swap's own verify saw it serving...
        done = SimpleNamespace(ok=True, describe=lambda: "swap: done", remaining=(),
                               outcome="done", error=None)
        app.post_message(RunFinished("swap", done, rb.FLOWS["swap"].refresh))
        await wait_for(pilot, lambda: st.consecutive_errors == 0, "the back-off reset")
        reads = eng.reads
        eng.gate.set()                         # the read in flight answers (DOWN: it began early)
        await wait_for(pilot, lambda: eng.reads > reads and "engine UP" in _facts(app),
                       "the engine read again at once")
        assert st.consecutive_errors == 0


async def test_typed_confirmation_does_not_look_typed_and_says_why_enter_does_nothing(
        monkeypatch) -> None:
    """Met by a new user at 80×24: the name field's placeholder was the seat's name itself, so
    the empty field read as already typed; Enter on it did nothing and said nothing. Now the
    placeholder is not the name, the hint says to type it, and Enter on a wrong or empty
    field says why nothing happened (the screen stays)."""
    runbook = SimpleNamespace(plan=lambda: _LongPlan())
    monkeypatch.setitem(rb.FLOWS, "swap", replace(rb.FLOWS["swap"],
                                                  make=lambda *a, **k: runbook))
    app = SeatConsoleApp(default_loaded(), interval=3600.0,
                         panels=[(lambda _l: CountingSource(), CountingPanel)],
                         clock=FakeClock(), age_tick_s=3600.0, watch_terminal=False)
    async with app.run_test(size=(80, 24)) as pilot:
        await all_read(pilot, app)   # the main screen built: a key pressed before it was lost
        await pilot.press("S")
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmScreen), "the confirmation")
        scr = app.screen
        field = scr.query_one("#confirm-input")
        assert "seat-node" not in field.placeholder, field.placeholder
        await wait_for(pilot, lambda: "type 'seat-node', then Enter" in "\n".join(lines_of(app)),
                       "the hint")
        await pilot.press("enter")
        await wait_for(pilot, lambda: any("nothing typed" in n.message
                                          for n in app._notifications), "the warning")
        assert app.screen is scr
