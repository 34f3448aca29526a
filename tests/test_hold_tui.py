"""TUI: the confirmation modal (plain and typed), the hold/release keys hidden under
--readonly, and — on the lab's real systemd node and Alertmanager — placing and releasing a hold
with confirmation from the keys, progress in the action-log panel, and the "held by the console
until …" banner on the timers and silences panels."""

from __future__ import annotations

import fcntl
from pathlib import Path

import pytest
from conftest import _flock

from seat_console.tui.app import SeatConsoleApp
from seat_console.tui.keys import filter_action_bindings
from seat_console.tui.panels import PanelSpec
from seat_console.actions.hold import fmt_ttl, parse_ttl
from seat_console.node.transport import DockerExecTransport
from seat_console.core.profile import load_profile
from seat_console.sources.timers import TimersReading, read_timers
from seat_console.widgets.actionlog import ActionLogPanel
from seat_console.widgets.confirm import ConfirmScreen
from seat_console.widgets.hold_options import HoldOptionsScreen
from seat_console.widgets.services import SilencesPanel, TimersPanel

from app_fixtures import CountingPanel, CountingSource, FakeClock, default_loaded


async def _wait(pilot, pred, what: str, limit: int = 3000) -> None:
    for _ in range(limit):
        if pred():
            return
        await pilot.pause(0.02)
    raise AssertionError(f"timed out waiting for {what}")


def _plain_app(readonly: bool = False) -> SeatConsoleApp:
    return SeatConsoleApp(default_loaded(), readonly=readonly, interval=3600.0,
                          panels=[(lambda _l: CountingSource(), CountingPanel)],
                          clock=FakeClock(), age_tick_s=3600.0, watch_terminal=False)


@pytest.mark.parametrize("readonly", [False, True])
def test_hold_keys_hidden_under_readonly(readonly):
    ids = {b.id for b in filter_action_bindings(SeatConsoleApp.BINDINGS, readonly)}
    assert ("node.hold" in ids) is (not readonly)
    assert ("node.release" in ids) is (not readonly)


async def test_confirm_plain_yes_no():
    answers: list[bool] = []
    app = _plain_app()
    async with app.run_test(size=(120, 40)) as pilot:
        app.push_screen(ConfirmScreen("Do it?", ["• stop x.timer", "– skip y.timer"]),
                        answers.append)
        await pilot.pause()
        await pilot.press("n")
        await _wait(pilot, lambda: answers == [False], "no")
        app.push_screen(ConfirmScreen("Do it?", ["• stop x.timer"]), answers.append)
        await pilot.pause()
        await pilot.press("y")
        await _wait(pilot, lambda: answers == [False, True], "yes")


async def test_confirm_typed_needs_the_text():
    answers: list[bool] = []
    app = _plain_app()
    async with app.run_test(size=(120, 40)) as pilot:
        app.push_screen(ConfirmScreen("Swap?", ["• stop resident"], typed="seat-node"),
                        answers.append)
        await pilot.pause()
        scr = app.screen
        assert isinstance(scr, ConfirmScreen)
        await pilot.press("y", "n", "enter")       # typing, not answers
        await pilot.pause()
        assert answers == [] and scr.query_one("#confirm-yes-button").disabled
        for _ in range(2):
            await pilot.press("backspace")
        await pilot.press(*"seat-node")
        await _wait(pilot, lambda: not scr.query_one("#confirm-yes-button").disabled,
                    "yes enabled once typed")
        await pilot.press("enter")
        await _wait(pilot, lambda: answers == [True], "confirmed")


async def test_hold_options_refuse_a_bad_ttl_and_cancel_reads_nothing():
    answers: list = []
    app = _plain_app()
    async with app.run_test(size=(100, 30)) as pilot:
        app.push_screen(HoldOptionsScreen("seat-node", 4 * 3600, ttl_text=fmt_ttl, parse_ttl=parse_ttl), answers.append)
        await pilot.pause()
        scr = app.screen
        assert scr.query_one("#hold-options-ttl").value == "4 h"   # the profile's, parseable
        scr.query_one("#hold-options-ttl").value = "-5m"
        await pilot.press("tab", *"probe", "enter")               # TTL first, then reason
        await pilot.pause()
        assert answers == [] and app.screen is scr                 # refused, still asking
        err = scr.query_one("#hold-options-error")
        assert "TTL '-5m'" in str(err.render())
        scr.query_one("#hold-options-ttl").value = "7x"            # edited, still wrong
        await _wait(pilot, lambda: "TTL '7x'" in str(err.render()), "the new problem named")
        scr.query_one("#hold-options-ttl").value = "1h30m"         # corrected: no stale words
        await _wait(pilot, lambda: not err.display, "the message gone")
        assert "TTL" not in str(err.render())
        await pilot.press("enter")
        await _wait(pilot, lambda: answers == [(5400, "probe")], "the answer")
        app.push_screen(HoldOptionsScreen("seat-node", 600, ttl_text=fmt_ttl, parse_ttl=parse_ttl), answers.append)
        await pilot.pause()
        await pilot.press("escape")
        await _wait(pilot, lambda: answers[-1] is None, "cancelled")


async def test_the_hold_key_asks_first_and_cancel_changes_nothing(monkeypatch):
    import seat_console.tui.runbook as rb

    planned: list = []
    monkeypatch.setattr(rb.RunbookController, "_read_plan",
                        lambda self, flow: planned.append((flow.kind, self.ttl_s, self.reason)))
    app = _plain_app()
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.press("H")
        await _wait(pilot, lambda: isinstance(app.screen, HoldOptionsScreen), "the question")
        await pilot.press("escape")
        await pilot.pause()
        assert planned == []                                        # nothing read
        await pilot.press("H")
        await _wait(pilot, lambda: isinstance(app.screen, HoldOptionsScreen), "again")
        await pilot.press("enter")                                  # defaults
        await _wait(pilot, lambda: planned, "the plan read")
    assert planned == [("hold", app.loaded.profile.silence.ttl_s, rb.DEFAULT_REASON)]


# -- on the lab ------------------------------------------------------------------------------
@pytest.fixture
def exclusive(lab):
    _flock(lab.lab_dir, fcntl.LOCK_EX, "the hold TUI test changes the node's timers")
    try:
        yield
    finally:
        _flock(lab.lab_dir, fcntl.LOCK_SH, "lab")


async def test_tui_places_and_releases_a_hold(lab, exclusive, tmp_path: Path, monkeypatch):
    monkeypatch.setenv("SEAT_CONSOLE_STATE_DIR", str(tmp_path / "state"))
    node = DockerExecTransport(lab.node_container, docker_host=lab.docker_host)
    before = read_timers(node, list(lab.timers))
    assert isinstance(before, TimersReading)
    active = {t.unit for t in before.timers if t.active}
    loaded = load_profile(str(lab.profile_path))
    panels = [PanelSpec("seat_console.sources.timers:make_source", TimersPanel),
              PanelSpec("seat_console.sources.silences:make_source", SilencesPanel),
              PanelSpec("seat_console.actions.actionlog:make_source", ActionLogPanel,
                        uses_readings=True)]
    app = SeatConsoleApp(loaded, interval=0.5, panels=panels, watch_terminal=False)
    try:
        async with app.run_test(size=(160, 60)) as pilot:
            await _wait(pilot, lambda: app.states["actions"].reading is not None
                        and app.states["timers"].reading is not None, "first readings")
            await pilot.press("H")
            await _wait(pilot, lambda: isinstance(app.screen, HoldOptionsScreen), "TTL/reason")
            await pilot.press(*"20m", "tab", *"tui test 42")   # the TTL first, then the reason
            await pilot.press("enter")
            await _wait(pilot, lambda: isinstance(app.screen, ConfirmScreen), "the plan modal")
            assert "for 20 min (tui test 42)" in app.screen.title_text
            lines = "\n".join(app.screen.lines)
            assert "schedule lease" in lines and "create silence" in lines
            await pilot.press("y")
            ctl = app.runbooks
            await _wait(pilot, lambda: ctl.last_result is not None, "the hold to finish")
            assert ctl.last_result.ok, ctl.last_result.describe()
            from seat_console.actions.hold import current_hold
            from seat_console.actions.journal import Journal

            h = current_hold(Journal(tmp_path / "state" / "journal.sqlite3"))
            assert h is not None and h.reason == "tui test 42"        # journaled as typed
            assert app.states["silences"].source is not None
            assert "✓ done" in ctl.lines["end"] and any(
                "✓ stop" in v for v in ctl.lines.values())
            now = read_timers(node, list(lab.timers))
            assert all(not t.active for t in now.timers)
            await _wait(pilot, lambda: (app.states["timers"].panel.hold_banner or "")
                        .startswith("held by the console until"), "the banner on timers")
            assert app.states["silences"].panel.hold_banner == \
                app.states["timers"].panel.hold_banner
            ctl.last_result = None
            await pilot.press("U")
            await _wait(pilot, lambda: isinstance(app.screen, ConfirmScreen), "release modal")
            assert any(line.startswith("• start") for line in app.screen.lines)
            await pilot.press("y")
            await _wait(pilot, lambda: ctl.last_result is not None, "the release to finish")
            assert ctl.last_result.ok, ctl.last_result.describe()
            await _wait(pilot, lambda: app.states["timers"].panel.hold_banner is None,
                        "the banner gone")
    finally:
        after = read_timers(node, list(lab.timers))
        for t in after.timers:
            if t.unit in active and not t.active:
                node.run(["systemctl", "start", t.unit])
    assert {t.unit for t in after.timers if t.active} == active


def _release_plan(firing: dict[str, bool]):
    from seat_console.actions.runbook import Plan, PlanLine

    lines = tuple(PlanLine(f"start {u}", True, f"start {u}") for u in firing)
    return Plan("release", lines, facts={"forecast": {u: {"fires_at_once": f}
                                                      for u, f in firing.items()}})


async def test_release_confirmation_offers_to_defer_the_timers_that_fire_at_once(monkeypatch):
    """The TUI's release (issue 17's leftover: the CLI had --defer-firing, the TUI had no
    choice): when the plan forecasts timers that fire the moment they are started, the
    confirmation offers "Defer N to HH:MMZ"; choosing it plans the
    release again with those timers kept stopped for DEFER_FIRING_S, and confirms that plan. (The plan lines name each timer that fires at once.)"""
    from datetime import UTC, datetime, timedelta

    from seat_console.tui.messages import PlanReady
    from seat_console.tui import runbook as rb

    app = _plain_app()
    async with app.run_test(size=(120, 40)) as pilot:
        ctl = app.runbooks
        replanned: list[str] = []
        monkeypatch.setattr(ctl, "_read_plan", lambda flow: replanned.append(flow.kind))
        ctl.plan_ready(PlanReady("release", _release_plan({"a.timer": True, "b.timer": False,
                                                           "c.timer": True})))
        await _wait(pilot, lambda: isinstance(app.screen, ConfirmScreen)
                    and app.screen.query("#confirm-no-button"), "the confirmation")
        alt = app.screen.query_one("#confirm-alt-button")
        assert str(alt.label).startswith("Defer 2 to ") and str(alt.label).endswith("Z")
        t0 = datetime.now(UTC)
        await pilot.click("#confirm-alt-button")
        await _wait(pilot, lambda: replanned == ["release"]
                    and not isinstance(app.screen, ConfirmScreen), "the release planned again")
        assert ctl.defer_firing is not None
        assert t0 + timedelta(seconds=rb.DEFER_FIRING_S - 5) <= ctl.defer_firing \
            <= datetime.now(UTC) + timedelta(seconds=rb.DEFER_FIRING_S)
        # the deferred plan's confirmation offers no second deferral; nothing fires at once: none
        ctl.plan_ready(PlanReady("release", _release_plan({"a.timer": True})))
        await _wait(pilot, lambda: isinstance(app.screen, ConfirmScreen)
                    and app.screen.query("#confirm-no-button"), "the 2nd confirmation")
        assert not app.screen.query("#confirm-alt-button")
        await pilot.press("n")
        await _wait(pilot, lambda: not isinstance(app.screen, ConfirmScreen), "closed")
        ctl.defer_firing = None
        ctl.plan_ready(PlanReady("release", _release_plan({"b.timer": False})))
        await _wait(pilot, lambda: isinstance(app.screen, ConfirmScreen)
                    and app.screen.query("#confirm-no-button"), "the 3rd confirmation")
        assert not app.screen.query("#confirm-alt-button")


def test_the_tui_release_is_built_with_the_chosen_deferral(monkeypatch):
    from datetime import UTC, datetime
    from types import SimpleNamespace

    import seat_console.actions.hold as hold_mod
    from seat_console.tui import runbook as rb

    got = {}
    monkeypatch.setattr(hold_mod, "current_hold",
                        lambda journal: SimpleNamespace(state="active", hold_id="h1"))
    monkeypatch.setattr(hold_mod, "build_release",
                        lambda nctx, journal, h, **kw: got.update(kw) or "runbook")
    when = datetime(2026, 12, 2, 7, 41, tzinfo=UTC)
    ctl = SimpleNamespace(defer_firing=when)
    assert rb._make_release(ctl, None, None, None, None) == "runbook"
    assert got["defer_firing"] == when
    assert rb.firing_at_once(_release_plan({"x.timer": True, "y.timer": False})) == ["x.timer"]
    assert rb.firing_at_once(object()) == []
