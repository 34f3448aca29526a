"""Pilot tests of the Seat Console app: press keys, check what is rendered.

Sources are real :class:`seat_console.core.base.Source` subclasses with controlled behaviour
(tests/app_fixtures.py): counting, hanging on an Event, raising, going down; the GPU panel runs
the real GPU source over the in-process NVML double (tests/nvml_double.py). Waits are predicate
loops around ``pilot.pause()``; the one fixed pause (checking that *nothing* happens while
paused) is paired with a structural check (no poll scheduled, none in flight).
"""

from __future__ import annotations

import os
import re
import sys
import threading
from pathlib import Path
from typing import ClassVar

import pynvml
import pytest
from textual.binding import Binding, BindingType
from textual.command import CommandPalette

sys.path.insert(0, str(Path(__file__).parent))
from app_fixtures import (
    GIB,
    VLLM_WORKER_BYTES,
    ClockedGpuSource,
    CountingPanel,
    CountingSource,
    DownSource,
    FakeClock,
    HangingSource,
    RaisingSource,
    default_loaded,
    demo_app,
    demo_cards,
    fixed,
    vllm_mapper,
)
import pty_helpers
from nvml_double import FakeMig, FakeProcess, NvmlDouble
from screen_fixtures import flat, refresh, screen_text, wait_for

from seat_console.tui.app import SeatConsoleApp
from seat_console.tui.hangup import EXIT_HANGUP
from seat_console.tui.keys import filter_action_bindings
from seat_console.tui.polling import BACKOFF_MAX_S, BACKOFF_MIN_S, next_delay
from seat_console.widgets.help import HelpScreen
from seat_console.core.fmt import gib
from seat_console.widgets.gpu import GpuCardView, GpuPanel, Spark

SIZE = (100, 60)  # ≥ COMPACT_BELOW_ROWS: the full panels (compact forms: test_screen.py)


# ------------------------------------------------------------------------------ helpers
def make_app(specs, *, interval: float = 3600.0, clock=None, readonly: bool = False,
             age_tick_s: float = 3600.0, app_cls=SeatConsoleApp) -> SeatConsoleApp:
    return app_cls(default_loaded(), readonly=readonly, interval=interval, panels=specs,
                   clock=clock or FakeClock(), age_tick_s=age_tick_s, watch_terminal=False)


# ------------------------------------------------------------------------------ pure rules
def test_backoff_grows_from_two_seconds_and_is_capped_at_ten():
    assert [next_delay(1.0, n) for n in range(7)] == [1.0, 2.0, 4.0, 8.0, 10.0, 10.0, 10.0]
    assert next_delay(0.05, 1) == BACKOFF_MIN_S
    assert next_delay(0.05, 1000) == BACKOFF_MAX_S
    assert next_delay(60.0, 3) == 60.0  # never polls a failing source more often than a good one


def test_readonly_filters_node_actions_only():
    hold = Binding("h", "hold", "hold", id="node.hold")
    bindings = [Binding("q", "quit", "quit", id="quit"), hold, ("x", "noop", "tuple binding")]
    assert filter_action_bindings(bindings, readonly=False) == bindings
    assert filter_action_bindings(bindings, readonly=True) == [bindings[0], bindings[2]]


def test_every_binding_has_an_id():
    assert all(isinstance(b, Binding) and b.id for b in SeatConsoleApp.BINDINGS)
    assert all(isinstance(b, Binding) and b.id for b in HelpScreen.BINDINGS)


# ------------------------------------------------------------------------------ keys
async def test_help_opens_and_closes():
    app = make_app([(fixed(CountingSource()), CountingPanel)])
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("question_mark")
        await wait_for(pilot, lambda: isinstance(app.screen, HelpScreen), "help screen")
        text = flat(screen_text(app))
        assert "Seat Console — help" in text
        assert "q / ^q quit" in text and "p pause" in text and "^p palette" in text
        rest = flat(str(app.screen.query_one("#help-text").render()))   # below the keys
        assert "2^30 bytes" in rest and "STALE" in rest
        await pilot.press("escape")
        await wait_for(pilot, lambda: not isinstance(app.screen, HelpScreen), "help closed")
        await pilot.press("question_mark")
        await wait_for(pilot, lambda: isinstance(app.screen, HelpScreen), "help again")
        await pilot.press("question_mark")
        await wait_for(pilot, lambda: not isinstance(app.screen, HelpScreen), "closed by ?")


async def test_pause_shows_paused_and_stops_polling():
    src = CountingSource()
    clock = FakeClock()
    app = make_app([(fixed(src), CountingPanel)], interval=0.02, clock=clock)
    async with app.run_test(size=SIZE) as pilot:
        st = app.states["counter"]
        await wait_for(pilot, lambda: src.reads >= 3, "three polls")
        assert "PAUSED" not in screen_text(app) and "every 0.02 s" in screen_text(app)
        await pilot.press("p")
        await wait_for(pilot, lambda: st.busy_since is None, "the poll in flight to finish")
        await pilot.pause()
        assert app.paused and "PAUSED" in screen_text(app)
        assert st.timer is None  # nothing scheduled
        reads = src.reads
        await pilot.pause(0.3)  # 15 intervals: would have polled many times if not paused
        assert src.reads == reads
        clock.advance(3600)
        app.tick_ages()
        await pilot.pause()
        # paused readings age visibly but are not flagged STALE: the engineer stopped polling
        assert "updated 1 h 00 min ago" in screen_text(app) and not st.panel.stale
        await pilot.press("p")
        await wait_for(pilot, lambda: src.reads > reads + 1, "polling again")
        assert "PAUSED" not in screen_text(app)


async def test_refresh_key_reads_once_while_paused():
    src = CountingSource()
    app = make_app([(fixed(src), CountingPanel)])
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: app.states["counter"].polls == 1, "first poll")
        await pilot.press("p")
        await refresh(pilot, app, "counter")
        assert src.reads == 2 and app.states["counter"].timer is None
        assert "n: 2" in screen_text(app)


async def test_palette_opens_and_runs_console_commands():
    src = CountingSource()
    app = make_app([(fixed(src), CountingPanel)])
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("ctrl+p")
        await wait_for(pilot, lambda: isinstance(app.screen, CommandPalette), "palette")
        await pilot.press(*"pause polling")
        await pilot.pause(0.05)
        await wait_for(pilot, lambda: "Pause polling" in screen_text(app), "the pause command")
        await pilot.press("enter")
        await wait_for(pilot, lambda: app.paused, "paused from the palette")
        await pilot.press("ctrl+p")
        await wait_for(pilot, lambda: isinstance(app.screen, CommandPalette), "palette again")
        await pilot.press(*"interval 7")
        await wait_for(pilot, lambda: "Set refresh interval to 7 s" in screen_text(app),
                       "the typed interval offered")
        await pilot.press("enter")
        await wait_for(pilot, lambda: app.interval_s == 7.0, "interval set")
        await wait_for(pilot, lambda: not isinstance(app.screen, CommandPalette), "closed")
        assert "PAUSED" in screen_text(app)
        await pilot.press("p")
        await wait_for(pilot, lambda: "every 7 s" in screen_text(app), "header shows 7 s")


async def test_the_palettes_quit_is_the_consoles_quit():
    """The palette offered Textual's own Quit ("as soon as possible": ``App.action_quit``
    called straight, past the app's ``check_action``); its one Quit now runs the ``quit``
    action as ``q`` does (``run_action``) and says the rule: a runbook in flight finishes its
    current step."""
    app = make_app([(fixed(CountingSource()), CountingPanel)])
    ran: list[str] = []
    real = app.run_action

    async def run_action(action, *args, **kwargs):
        ran.append(action)
        return await real(action, *args, **kwargs)

    app.run_action = run_action
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        quits = [c for c in app.get_system_commands(app.screen) if c.title == "Quit"]
        assert len(quits) == 1 and "finishes its current step" in quits[0].help, quits
        await pilot.press("ctrl+p")
        await wait_for(pilot, lambda: isinstance(app.screen, CommandPalette), "palette")
        await pilot.press(*"quit")
        await wait_for(pilot, lambda: "finishes its current step" in screen_text(app),
                       "the console's Quit offered")
        await pilot.pause(0.2)   # every provider's hits in before choosing the first
        await pilot.press("enter")
        await wait_for(pilot, lambda: app.return_code is not None, "the app quit")
    assert ran[-1] == "quit" and app.return_code == 0   # (ctrl+p and Enter ran actions too)


@pytest.mark.parametrize(("typed", "expected"), [("interval 3", 3.0), ("interval 6", 6.0),
                                                 ("interval 1", 1.0), ("refresh 0.5s", 0.5)])
async def test_palette_typed_interval_wins_over_a_longer_choice(typed, expected):
    """'interval 3' + Enter sets 3 s, not the offered 30 s that fuzzy-matches the same text."""
    src = CountingSource()
    app = make_app([(fixed(src), CountingPanel)])
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("ctrl+p")
        await wait_for(pilot, lambda: isinstance(app.screen, CommandPalette), "palette")
        await pilot.press(*typed)
        await wait_for(pilot, lambda: f"Set refresh interval to {expected:g} s" in screen_text(app),
                       "the typed interval offered")
        await pilot.pause(0.2)  # let every provider's hits arrive before choosing the first
        await pilot.press("enter")
        await wait_for(pilot, lambda: not isinstance(app.screen, CommandPalette), "closed")
        assert app.interval_s == expected


class AppWithNodeAction(SeatConsoleApp):
    """The app plus one node-changing binding, as the actions helpers will add."""

    BINDINGS: ClassVar[list[BindingType]] = [
        *SeatConsoleApp.BINDINGS,
        Binding("h", "test_hold", "hold seat", id="node.test-hold")]  # node.hold is the app's H
    held = 0

    def action_test_hold(self) -> None:
        type(self).held += 1


@pytest.mark.parametrize("readonly", [False, True])
async def test_readonly_shows_and_hides_node_actions(readonly):
    AppWithNodeAction.held = 0
    app = make_app([(fixed(CountingSource()), CountingPanel)], readonly=readonly,
                   app_cls=AppWithNodeAction)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        text = screen_text(app)
        footer = text.splitlines()[-1]
        assert ("READ-ONLY" in text) is readonly
        assert ("hold seat" in footer) is (not readonly)
        assert "quit" in footer
        await pilot.press("h")
        await pilot.pause()
        assert AppWithNodeAction.held == (0 if readonly else 1)
        assert any(what == "hold seat" for _, what in app.help_keys()) is (not readonly)


async def test_footer_keys_are_built_with_their_compact_class(monkeypatch):
    """Each footer key's ``compact`` watcher, run as the key mounts, finds the ``-compact``
    class already as it asks (``preset_compact``), so no key is restyled a second time at
    start-up (issue 33: ~16 % of the UI thread's start-up CPU); the classes end as Textual
    sets them."""
    from textual.widgets._footer import FooterKey

    seen: list[tuple[bool, bool]] = []
    watch = FooterKey._watch_compact

    def spy(self, compact: bool) -> None:
        seen.append((compact, "-compact" in self.classes))
        watch(self, compact)

    monkeypatch.setattr(FooterKey, "_watch_compact", spy)
    app = make_app([(fixed(CountingSource()), CountingPanel)])
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        keys = list(app.screen.query(FooterKey))
        assert keys and seen
        assert all(was == compact for compact, was in seen), seen
        assert all(("-compact" in k.classes) == k.compact for k in keys)


async def test_footer_recomposes_only_when_its_keys_change(monkeypatch):
    """The footer is composed again only when the keys it shows change (issue 33: the base
    footer recomposed on every bindings update, four times at start-up with the same keys):
    once at start; ``p`` (pause) changes the keys, so the footer then offers resume."""
    from seat_console.widgets.footer import SeatFooter

    composed: list[bool] = []
    compose = SeatFooter.compose

    def spy(self):
        composed.append(self._bindings_ready)
        return compose(self)

    monkeypatch.setattr(SeatFooter, "compose", spy)
    src = CountingSource()
    app = make_app([(fixed(src), CountingPanel)])
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: src.reads >= 1 and any(composed), "the first reading")
        for _ in range(10):   # focus, the first reading and its bindings refresh settle
            await pilot.pause()
        assert composed.count(True) == 1, composed
        assert "pause" in screen_text(app).splitlines()[-1]
        await pilot.press("p")
        await wait_for(pilot, lambda: "resume" in screen_text(app).splitlines()[-1],
                       "the footer to offer resume")
        assert composed.count(True) == 2, composed


# ------------------------------------------------------------------------------ bad sources
async def test_hanging_source_stales_its_panel_and_keys_still_work():
    clock = FakeClock()
    hang, counter = HangingSource(), CountingSource()
    app = make_app([(fixed(hang), CountingPanel), (fixed(counter), CountingPanel)],
                   interval=0.02, clock=clock, age_tick_s=0.02)
    before = set(threading.enumerate())   # an earlier test's hung read may still be waiting
    try:
        async with app.run_test(size=SIZE) as pilot:
            await wait_for(pilot, lambda: hang.entered.is_set() and counter.reads >= 2,
                           "the hanging read started and the counter polled")
            clock.advance(40)
            hung = app.states["hanging"].panel
            await wait_for(pilot, lambda: hung.stale, "the hung panel marked stale")
            reads = counter.reads
            await wait_for(pilot, lambda: counter.reads > reads + 2, "the counter still polls")
            await wait_for(pilot, lambda: "reading for 40 s" in screen_text(app), "age shown")
            text = screen_text(app)
            assert "STALE" in text and "waiting for the first reading" in text
            assert not app.states["counter"].panel.stale
            await pilot.press("question_mark")
            await wait_for(pilot, lambda: isinstance(app.screen, HelpScreen), "help opens")
            await pilot.press("escape")
            await pilot.press("p")
            await wait_for(pilot, lambda: "PAUSED" in screen_text(app), "pause works")
            assert app.states["hanging"].polls == 0  # the hung read was never doubled up
            # the hung read runs in a daemon thread, which process exit does not wait for
            hung_threads = [t for t in threading.enumerate()
                            if t.name == "seat-console:hanging" and t not in before]
            assert len(hung_threads) == 1 and hung_threads[0].daemon
        # leaving the context quit the app although a read is still hung
        assert not app.is_running and not hang.release.is_set()
    finally:
        hang.release.set()


async def test_raising_source_is_shown_as_error_and_backs_off():
    raising, counter = RaisingSource(), CountingSource()
    app = make_app([(fixed(raising), CountingPanel), (fixed(counter), CountingPanel)],
                   interval=1.0)
    async with app.run_test(size=SIZE) as pilot:
        st = app.states["raising"]
        await wait_for(pilot, lambda: st.polls == 1 and app.states["counter"].polls >= 1,
                       "first polls")
        await pilot.pause()
        text = flat(screen_text(app))
        # on a loaded machine either source may have been read again by now (#2, n: 2)
        assert re.search(r"raising unavailable \(error\): read\(\) raised RuntimeError: "
                         r"disk on fire #\d", text), text
        assert "no good value yet" in text and re.search(r"n: \d", text)  # the other is fine
        assert "retry every 2 s" in text
        assert app.is_running and st.panel.unavailable is not None
        steps = [(st.consecutive_errors, st.delay_s)]
        assert steps == [(1, 2.0)]
        assert st.timer is not None and st.timer.interval_s == BACKOFF_MIN_S
        for _ in range(4):   # scheduled polls (as the timer makes them): the back-off grows
            # On a loaded machine the app's own timer (2 s, 4 s ...) may start a poll before
            # this loop does; either way each poll's failure grows the delay by the one rule.
            before = st.polls
            app._start_poll("raising")
            await wait_for(pilot, lambda b=before: st.polls > b and st.busy_since is None,
                           "scheduled poll")
            steps.append((st.consecutive_errors, st.delay_s))
        # doubling from 2 s, capped at 10 s, one step per failed poll
        assert all(d == min(2.0 ** n, 10.0) for n, d in steps), steps
        assert st.consecutive_errors >= 5 and st.delay_s == 10.0
        assert raising.reads == st.polls  # one read per poll: no overlap, no extra retries
        await pilot.pause()
        assert "retry every 10 s" in screen_text(app)
        # r resets the back-off, and its own failed read does not count as a failure
        reads = raising.reads
        await refresh(pilot, app, "raising")
        assert st.consecutive_errors == 0 and st.delay_s == 1.0 and raising.reads == reads + 1
        assert st.timer is not None and st.timer.interval_s == 1.0


async def test_source_going_down_keeps_last_good_value_with_its_age():
    clock = FakeClock()
    down = DownSource()
    app = make_app([(fixed(down), CountingPanel)], clock=clock)
    async with app.run_test(size=SIZE) as pilot:
        st = app.states["down"]
        await wait_for(pilot, lambda: st.polls == 1, "first poll")
        down.down = True
        clock.advance(12)
        await refresh(pilot, app, "down")
        text = flat(screen_text(app))
        assert "down unavailable (unreachable): connection refused (127.0.0.1:9)" in text
        assert "last good value 10 s ago" in text
        assert "n: 1" in text  # the last good value is still on screen (dimmed)
        assert st.panel.has_class("-unavailable") and st.last_good is not None
        down.down = False
        await refresh(pilot, app, "down")
        text = flat(screen_text(app))
        assert "unavailable" not in text and "n: 3" in text
        assert st.consecutive_errors == 0 and st.delay_s == 3600.0


async def test_source_factory_that_raises_becomes_an_unavailable_panel():
    def broken(_loaded):
        raise ValueError("node.docker_host 'tcp://x' is not reachable")

    app = make_app([(broken, CountingPanel), (fixed(CountingSource()), CountingPanel)])
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: all(s.polls for s in app.states.values()), "polls")
        await pilot.pause()
        text = flat(screen_text(app))
        assert ("counter unavailable (config): could not set up: ValueError: node.docker_host "
                "'tcp://x' is not reachable") in text
        assert "n: 1" in text


async def test_panel_render_bug_is_shown_not_raised():
    class BadPanel(CountingPanel):
        def render_reading(self, reading):
            raise KeyError("field")

    app = make_app([(fixed(CountingSource()), BadPanel)])
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: app.states["counter"].polls == 1, "first poll")
        await pilot.pause()
        assert "panel could not render this reading: KeyError: 'field'" in screen_text(app)
        assert app.is_running


async def test_readings_arriving_under_a_modal_are_drawn_when_it_closes():
    src = CountingSource()
    app = make_app([(fixed(src), CountingPanel)])
    async with app.run_test(size=SIZE) as pilot:
        st = app.states["counter"]
        await wait_for(pilot, lambda: st.polls == 1, "first poll")
        await pilot.press("question_mark")
        await wait_for(pilot, lambda: isinstance(app.screen, HelpScreen), "help")
        app.action_refresh_now()
        await wait_for(pilot, lambda: st.polls == 2, "second poll under the modal")
        assert st.dirty and st.panel.reading.n == 1  # not redrawn behind the modal
        await pilot.press("escape")
        await wait_for(pilot, lambda: not st.dirty, "redrawn on return")
        assert "n: 2" in screen_text(app)


# ------------------------------------------------------------------------------ GPU panel
def gpu_app(double: NvmlDouble, clock: FakeClock | None = None,
            interval: float = 3600.0) -> SeatConsoleApp:
    clock = clock or FakeClock()
    loaded = default_loaded()
    src = ClockedGpuSource(double, clock, list(loaded.profile.node.gpus), vllm_mapper())
    return make_app([(fixed(src), GpuPanel)], clock=clock, interval=interval)


async def gpu_text(app: SeatConsoleApp, pilot, size=SIZE) -> str:
    await wait_for(pilot, lambda: app.states["gpus"].polls >= 1, "a GPU reading")
    await pilot.pause()
    return screen_text(app)


async def test_gpu_panel_shows_cards_bar_numbers_and_processes():
    app = gpu_app(NvmlDouble(demo_cards()))
    async with app.run_test(size=(100, 60)) as pilot:
        text = await gpu_text(app, pilot)
        assert "GPU 0  NVIDIA H200   SEAT" in text and "GPU 1  NVIDIA H200   SEAT" in text
        assert "GPU-11111111-2222-3333-4444-555555555555  pci 00000000:18:00.0" in text
        used = VLLM_WORKER_BYTES + 512 * (1 << 20)
        assert f"█ used {gib(used)} GiB  ▓ reserved 0.60 GiB" in text
        assert "total 140.40 GiB" in text and "CUDA-visible 139.80 GiB" in text
        assert "GiB = 2^30 B" in text
        row = next(line for line in text.splitlines() if " 4121 " in line)
        assert "python3" in row and "seat-resident" in row and "100.37 GiB" in row
        assert "unmapped PID" in text and "its memory still counts" in flat(text)
        assert "no compute processes" in text
        bar = next(line for line in text.splitlines() if "░" in line and "free" not in line)
        assert "█" in bar and "▓" in bar  # used, reserved and free segments


async def test_gpu_panel_v1_driver_says_used_includes_reserved():
    app = gpu_app(NvmlDouble(demo_cards(), memory_v2=False))
    async with app.run_test(size=SIZE) as pilot:
        text = await gpu_text(app, pilot)
        assert "used incl. reserved" in text and "▓ reserved" not in text
        assert "v1 memory API" in text and "CUDA-visible n/a" in text


async def test_gpu_panel_lost_card_while_the_other_stays_live():
    cards = demo_cards()
    app = gpu_app(NvmlDouble(cards))
    async with app.run_test(size=(100, 60)) as pilot:
        text = await gpu_text(app, pilot)
        assert "LOST" not in text
        cards[1].lost = True  # falls off the bus while the console watches
        await refresh(pilot, app, "gpus")
        text = screen_text(app)
        assert "LOST" in text and "The other cards stay live" in text
        views = list(app.query(GpuCardView))
        assert len(views) == 2  # the same view, now marked, not a new anonymous card
        lost_view = next(v for v in views if v.card.state == "lost")
        assert lost_view.card.uuid == cards[1].uuid
        assert "100.37 GiB" in text and "python3" in text  # GPU 0 still live


async def test_gpu_panel_card_lost_before_the_first_reading():
    cards = demo_cards()
    cards[1].lost = True
    app = gpu_app(NvmlDouble(cards))
    async with app.run_test(size=(100, 60)) as pilot:
        text = await gpu_text(app, pilot)
        assert "GPU 1" in text and "LOST" in text and "100.37 GiB" in text


async def test_gpu_panel_unsupported_fields_are_na_never_zero():
    cards = demo_cards()
    cards[0].unsupported = {"nvmlDeviceGetPowerUsage", "nvmlDeviceGetTemperature",
                            "nvmlDeviceGetUtilizationRates"}
    app = gpu_app(NvmlDouble(cards))
    async with app.run_test(size=SIZE) as pilot:
        text = await gpu_text(app, pilot)
        line = next(ln for ln in text.splitlines() if "CUDA-visible" in ln and "n/a" in ln)
        assert "util n/a" in line and "mem n/a" in line and "n/a °C" not in line
        assert "power n/a / 700 W" in line and " 0 °C" not in line
        assert "not supported" in text


async def test_gpu_panel_mig_instances_and_a_card_outside_the_seat():
    cards = demo_cards()
    cards[1].mig_mode = True
    cards[1].mig = [
        FakeMig(uuid="MIG-aaaa", name="NVIDIA H200 MIG 3g.71gb", gpu_instance_id=1,
                compute_instance_id=0, total=71 * GIB, reserved=0, used=20 * GIB,
                processes=[FakeProcess(4121, 20 * GIB, 1, 0)]),
        None,
        FakeMig(uuid="MIG-bbbb", name="NVIDIA H200 MIG 3g.71gb", gpu_instance_id=2,
                compute_instance_id=0, total=71 * GIB, reserved=0, used=0),
    ]
    clock = FakeClock()
    src = ClockedGpuSource(NvmlDouble(cards), clock, ["0"], vllm_mapper())  # seat: GPU 0 only
    app = make_app([(fixed(src), GpuPanel)], clock=clock)
    async with app.run_test(size=(100, 60)) as pilot:
        text = await gpu_text(app, pilot)
        assert "GPU 1  NVIDIA H200  not in the seat" in text
        assert "1 in the seat" in text
        assert "MIG 3g.71gb  GI 1 CI 0  used 20.00 GiB of 71.00 GiB  processes 1" in text
        assert "MIG 3g.71gb  GI 2 CI 0  used 0.00 GiB of 71.00 GiB  processes 0" in text
        assert "python3 (MIG GI 1)" in text


@pytest.mark.parametrize(("code", "kind", "words"), [
    (pynvml.NVML_ERROR_LIBRARY_NOT_FOUND, "no-library", "install the NVIDIA driver"),
    (pynvml.NVML_ERROR_DRIVER_NOT_LOADED, "no-driver", "Check `nvidia-smi`"),
    (pynvml.NVML_ERROR_LIB_RM_VERSION_MISMATCH, "version-mismatch", "reboot or reload"),
])
async def test_gpu_panel_nvml_unavailable_says_why(code, kind, words):
    app = gpu_app(NvmlDouble(demo_cards(), init_error=code), interval=1.0)
    async with app.run_test(size=SIZE) as pilot:
        text = flat(await gpu_text(app, pilot))
        assert f"nvml unavailable ({kind}):" in text
        assert words in text and "The other panels are not affected" in text
        assert "no good value yet" in text and "retry every 2 s" in text
        assert "GPU 0" not in text  # nothing pretends to be a card


async def test_gpu_panel_recovers_and_builds_history():
    clock = FakeClock()
    double = NvmlDouble(demo_cards(), init_error=pynvml.NVML_ERROR_DRIVER_NOT_LOADED)
    app = gpu_app(double, clock)
    async with app.run_test(size=SIZE) as pilot:
        await gpu_text(app, pilot)
        double.init_error = None  # the driver got loaded
        for _ in range(5):
            clock.advance(10)
            await refresh(pilot, app, "gpus")
        text = screen_text(app)
        assert "unavailable" not in text and "SEAT" in text
        views = list(app.query(GpuCardView))
        assert len(views) == 2 and all(len(v.points) == 5 for v in views)
        assert "used, last 5 min (0–140 GiB)" in text


def test_sparkline_scales_to_total_and_leaves_long_gaps_blank():
    from datetime import timedelta

    from app_fixtures import T0

    pts = [(T0 + timedelta(seconds=10 * i), 70 * GIB) for i in range(10)]  # 0..90 s
    pts.append((T0 + timedelta(seconds=290), 140 * GIB))  # after a 200 s gap
    cols = Spark(pts, T0 + timedelta(seconds=300), 300, 140 * GIB).columns(30)
    assert cols[0] == 70 * GIB and cols[9] == 70 * GIB  # forward-filled between samples
    assert cols[15] is None  # the long gap stays blank
    assert cols[29] == 140 * GIB


async def test_no_color_renders_monochrome(monkeypatch):
    monkeypatch.setenv("NO_COLOR", "1")
    app, _src = demo_app(history=False)
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_for(pilot, lambda: app.states["gpus"].polls >= 1, "a GPU reading")
        await pilot.pause()
        assert app.no_color
        svg = app.export_screenshot()
    colours = set(re.findall(r"fill=\"#([0-9a-fA-F]{6})\"", svg))
    colours |= set(re.findall(r"fill: #([0-9a-fA-F]{6})", svg))
    assert colours
    chroma = {c for c in colours
              if len({c[0:2].lower(), c[2:4].lower(), c[4:6].lower()}) > 1}
    # only the colours of Textual's SVG window frame (title text, the three window buttons)
    assert chroma <= {"c5c8c6", "ff5f57", "febc2e", "28c840"}, chroma


# ------------------------------------------------------------------------------ terminal gone
_PTY_CHILD = """
import fcntl, os, signal, sys, termios
fcntl.ioctl(0, termios.TIOCSCTTY, 0)  # the pty becomes the controlling terminal
if sys.argv[1] != "deliver":
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGHUP})  # inherited across exec
if sys.argv[1] != "no-tick":
    os.execv(sys.executable, [sys.executable, "-m", "seat_console", "--interval", "0.5"])
# no-tick: the UI thread never checks the terminal (its age tick is an hour away), as when it
# is stuck (a full output queue behind a dead writer thread): only the watch thread can notice
from seat_console.tui import app as app_mod
init = app_mod.SeatConsoleApp.__init__
def hour_tick(self, *args, **kwargs):
    init(self, *args, **{**kwargs, "age_tick_s": 3600.0})
app_mod.SeatConsoleApp.__init__ = hour_tick
sys.argv = ["seat-console", "--interval", "0.5"]
from seat_console.cli import main
sys.exit(main())
"""


@pytest.mark.parametrize("mode", ["deliver", "block", "no-tick"],
                         ids=["sighup", "no-signal", "no-signal-no-ui-check"])
def test_app_exits_when_its_terminal_goes_away(tmp_path, mode):
    proc, master = pty_helpers.spawn_python(
        ["-c", _PTY_CHILD, mode], {"XDG_CONFIG_HOME": str(tmp_path)}, cols=80, rows=24)
    try:
        out = pty_helpers.read_until(master, b"GPUs (NVML)")
        assert b"GPUs (NVML)" in out, out[-2000:]
        os.close(master)  # the SSH session drops: the terminal hangs up
        rc = proc.wait(timeout=30)  # liveness bound, not a speed assert
        # 129: the app's own clean exit (not killed by the signal: -1; not the watchdog: 140)
        assert rc == EXIT_HANGUP
    finally:
        pty_helpers.reap(proc)


async def test_header_names_the_profile_and_its_hash():
    import dataclasses

    from seat_console.core.profile import load_profile

    loaded = load_profile(None, environ={})
    app = SeatConsoleApp(loaded, interval=3600.0, panels=[(fixed(CountingSource()), CountingPanel)],
                         clock=FakeClock(), age_tick_s=3600.0, watch_terminal=False)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        text = screen_text(app)
        assert f"sha256 {loaded.sha256[:8]}" in text and "embedded default" in text
    other = dataclasses.replace(loaded, sha256="ab" * 32)
    app2 = SeatConsoleApp(other, interval=3600.0, panels=[(fixed(CountingSource()), CountingPanel)],
                          clock=FakeClock(), age_tick_s=3600.0, watch_terminal=False)
    async with app2.run_test(size=SIZE) as pilot:
        await pilot.pause()
        assert "sha256 abababab" in screen_text(app2)


async def test_a_compact_header_still_says_the_default_profile_runs():
    """A compact header (few rows) drops the profile line; on the embedded default it keeps
    "default profile" (a trial at 120×40 never saw which profile ran)."""
    from seat_console.core.profile import load_profile

    loaded = load_profile(None, environ={})
    app = SeatConsoleApp(loaded, interval=3600.0, panels=[(fixed(CountingSource()), CountingPanel)],
                         clock=FakeClock(), age_tick_s=3600.0, watch_terminal=False, compact=True)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        head = screen_text(app).splitlines()[0]
        assert "default profile · every 3600 s" in head and "sha256" not in head, head


def _blocked_runbook(tmp_path: Path):
    """A real :class:`Runbook` in flight in this process, inside its step 'start probe' until
    the returned event is set; (runbook, release event, thread, journal)."""
    from seat_console.actions.journal import Journal
    from seat_console.actions.runbook import Check, Runbook, Step

    journal = Journal(tmp_path / "j.sqlite3")
    entered, release = threading.Event(), threading.Event()

    def apply(ctx):
        entered.set()
        release.wait(30)

    rb = Runbook("swap", [Step("start probe", lambda c: Check(True, "ok"), apply,
                               lambda c: None, lambda c: None)], journal=journal)
    t = threading.Thread(target=rb.run, daemon=True)
    t.start()
    assert entered.wait(10)
    return rb, release, t, journal


async def test_quit_while_a_runbook_runs_asks_again_first(tmp_path):
    """q mid-swap made the screen vanish and the process wait up to 60 s, saying nothing,
    while the swap stopped after its step and undid: the first q now says that, and only a
    second within QUIT_CONFIRM_S quits."""
    rb, release, t, journal = _blocked_runbook(tmp_path)
    try:
        app = make_app([(fixed(CountingSource()), CountingPanel)])
        async with app.run_test(size=SIZE) as pilot:
            await pilot.pause()
            await pilot.press("q")
            said = lambda: " ".join(str(n.message) for n in app._notifications)  # noqa: E731
            await wait_for(pilot, lambda: "quitting stops it after this step" in said(),
                           "the warning")
            assert "swap (step 'start probe')" in said()
            assert app.return_code is None and app.is_running   # still here
            await pilot.press("q")
            await wait_for(pilot, lambda: app.return_code is not None, "the app quit")
        assert app.return_code == 0
    finally:
        release.set()
        t.join(30)
        journal.close()


async def test_quit_with_no_runbook_in_flight_quits_at_once():
    app = make_app([(fixed(CountingSource()), CountingPanel)])
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        await pilot.press("q")
        await wait_for(pilot, lambda: app.return_code is not None, "the app quit")


def test_the_exit_says_it_waits_for_a_runbook_and_how_it_ended(tmp_path, monkeypatch):
    """After the screen is gone the console says why it has not ended yet, then what was left:
    a run cut off names its step, 'quit' is the journal's reason, and recover is the fix."""
    import io

    import seat_console.tui.hangup as hangup_mod

    monkeypatch.setattr(hangup_mod, "RUNBOOK_STOP_GRACE_S", 0.2)
    rb, release, t, journal = _blocked_runbook(tmp_path)
    try:
        out = io.StringIO()
        left = hangup_mod.end_runbooks_on_exit(hangup=False, stream=out)
        said = out.getvalue()
        assert "waiting for swap (step 'start probe') to finish its step and undo" in said
        assert f"swap {rb.run_id}: cut off in step 'start probe'" in said
        assert "run `seat-console recover`" in said and left
        cut = journal.entries(run_id=rb.run_id, kind="cut-off")
        assert cut and "ending (quit)" in cut[0].outcome, cut
    finally:
        release.set()
        t.join(30)
    # a run that ends within the grace: said done; nothing at all after a hang-up
    monkeypatch.setattr(hangup_mod, "RUNBOOK_STOP_GRACE_S", 30.0)
    rb2, release2, t2, journal2 = _blocked_runbook(tmp_path / "b")
    threading.Timer(0.2, release2.set).start()
    out2 = io.StringIO()
    assert hangup_mod.end_runbooks_on_exit(hangup=True, stream=out2) == []
    assert out2.getvalue() == ""
    t2.join(30)
    journal2.close()
    journal.close()
    out3 = io.StringIO()
    hangup_mod.end_runbooks_on_exit(hangup=False, stream=out3)
    assert out3.getvalue() == ""     # nothing in flight: nothing said
    # a Ctrl-C that ended the app is the journal's reason, not "quit"
    monkeypatch.setattr(hangup_mod, "RUNBOOK_STOP_GRACE_S", 0.2)
    rb4, release4, t4, journal4 = _blocked_runbook(tmp_path / "c")
    try:
        hangup_mod.end_runbooks_on_exit(hangup=False, stream=io.StringIO(), interrupted=True)
        cut4 = journal4.entries(run_id=rb4.run_id, kind="cut-off")
        assert cut4 and "ending (interrupted by Ctrl-C)" in cut4[0].outcome, cut4
    finally:
        release4.set()
        t4.join(30)
        journal4.close()
