"""Issue 18's TUI defects, each through the one runbook controller (console/tui/runbook.py) or the
one key table, driven by Pilot: the confirm button says what the action does (B and R said
"Yes, start the probe"); an error's "[swap]" is not eaten as markup; the hold dialog's Tab order
reaches "Read the plan", never Cancel, and its buttons fit 80×24; errors are sentences with a
fix (no "DockerException: … FileNotFoundError(2…)", no "StepError:"); P does not suggest the
CLI's --force --reason; an error notification goes when a screen is opened; the controller's
messages are typed (no call into the app's private state)."""

from __future__ import annotations

import ast
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace

import pytest
from app_fixtures import CountingPanel, CountingSource, FakeClock
from screen_fixtures import all_read
from textual.widgets import Button
from textual.widgets._toast import Toast

from seat_console.core.profile import LoadedProfile, default_profile_text, parse_profile
from seat_console.tui import runbook as rb
from seat_console.tui.app import SeatConsoleApp
from seat_console.widgets.confirm import ConfirmScreen
from seat_console.widgets.help import HelpScreen
from seat_console.widgets.hold_options import HoldOptionsScreen

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(autouse=True)
def _state(tmp_path, monkeypatch):
    monkeypatch.setenv("SEAT_CONSOLE_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.setenv("SEAT_CONSOLE_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.delenv("DOCKER_HOST", raising=False)


def _loaded(text: str | None = None) -> LoadedProfile:
    return LoadedProfile(parse_profile(text or default_profile_text(), "<embedded default>"),
                         "<embedded default>", "default", "0" * 64)


def _app(loaded: LoadedProfile | None = None) -> SeatConsoleApp:
    return SeatConsoleApp(loaded or _loaded(), interval=3600.0,
                          panels=[(lambda _l: CountingSource(), CountingPanel)],
                          clock=FakeClock(), age_tick_s=3600.0, watch_terminal=False)


async def _wait(pilot, pred, what: str, limit: int = 3000) -> None:
    for _ in range(limit):
        if pred():
            return
        await pilot.pause(0.02)
    raise AssertionError(f"timed out waiting for {what}")


def _toasts(app: SeatConsoleApp) -> str:
    return "\n".join(str(t.render()) for t in app.screen.query(Toast))


class _Plan:
    ok = True
    lines: list = []

    def text_lines(self) -> list[str]:
        return ["• do the thing"]


def _fake_flows(monkeypatch) -> None:
    runbook = SimpleNamespace(plan=lambda: _Plan())
    for kind in ("build", "restore", "swap"):
        monkeypatch.setitem(rb.FLOWS, kind, replace(rb.FLOWS[kind],
                                                    make=lambda *a, **k: runbook))


@pytest.mark.parametrize(("key", "label"), [("B", "Yes, build the image"),
                                            ("R", "Yes, restore the seat"),
                                            ("S", "Yes, swap the seat")])
async def test_the_confirm_button_says_what_the_action_does(monkeypatch, key, label) -> None:
    _fake_flows(monkeypatch)
    app = _app()
    async with app.run_test(size=(120, 40), notifications=True) as pilot:
        await all_read(pilot, app)   # a key pressed before the screen is built is lost
        await pilot.press(key)
        await _wait(pilot, lambda: isinstance(app.screen, ConfirmScreen), "the confirmation")
        yes = app.screen.query_one("#confirm-yes-button", Button)
        assert str(yes.label) == label and "probe" not in str(yes.label)
        assert (app.screen.typed == "seat-node") is (key == "S")   # the swap: type the name
        await pilot.press("escape")
        await _wait(pilot, lambda: not isinstance(app.screen, ConfirmScreen), "cancelled")


async def test_swap_on_the_default_profile_names_the_swap_table() -> None:
    app = _app()
    async with app.run_test(size=(120, 40), notifications=True) as pilot:
        await all_read(pilot, app)   # a key pressed before the screen is built is lost
        await pilot.press("S")
        await _wait(pilot, lambda: "table" in _toasts(app), "the refusal")
        shown = _toasts(app)
        assert "the profile has no [swap] table" in shown, shown


async def test_hold_dialog_tab_reaches_read_the_plan_and_fits_80x24(monkeypatch) -> None:
    """Issue 30 item 9: the dialog opens in the TTL (its hint's order: TTL → reason → Read the
    plan), the profile's TTL selected, so a typed ``30m`` is the TTL — it used to open in the
    reason, where ``30m`` became the reason and the hold ran the profile's 4 h."""
    planned: list = []
    monkeypatch.setattr(rb.RunbookController, "_read_plan",
                        lambda self, flow: planned.append((flow.kind, self.ttl_s, self.reason)))
    app = _app()
    async with app.run_test(size=(80, 24), notifications=True) as pilot:
        await all_read(pilot, app)   # a key pressed before the screen is built is lost
        await pilot.press("H")
        await _wait(pilot, lambda: isinstance(app.screen, HoldOptionsScreen), "the dialog")
        scr = app.screen
        assert scr.focused is scr.query_one("#hold-options-ttl")
        hint = str(scr.query_one("#hold-options-hint").render())
        assert hint.index("TTL") < hint.index("reason")
        for btn in scr.query(Button):                 # both buttons wholly on screen
            r = btn.region
            assert r.height > 0 and r.bottom <= 24 and r.right <= 80, (btn.id, r)
        await pilot.press(*"30m", "tab")               # replaces the profile's "4 h"
        assert scr.focused is scr.query_one("#hold-options-reason"), scr.focused
        await pilot.press(*"why", "tab")
        assert scr.focused is scr.query_one("#hold-options-go"), scr.focused
        await pilot.press("tab")
        assert scr.focused is scr.query_one("#hold-options-ttl"), scr.focused  # TTL → reason → go
        await pilot.press("tab", "tab", "enter")       # reason, "Read the plan", Enter
        await _wait(pilot, lambda: planned, "the plan read")
    assert planned == [("hold", 30 * 60, "why")]


async def test_docker_down_is_a_sentence_with_the_fix(monkeypatch) -> None:
    text = default_profile_text().replace('[node]\n', '[node]\ndocker_host = '
                                          '"unix:///nonexistent/seat-test.sock"\n', 1)
    app = _app(_loaded(text))
    async with app.run_test(size=(120, 40), notifications=True) as pilot:
        await all_read(pilot, app)   # a key pressed before the screen is built is lost
        for key in ("B", "R"):
            await pilot.press(key)
            await _wait(pilot, lambda: "docker engine" in _toasts(app), f"{key}'s error")
            shown = _toasts(app)
            for raw in ("DockerException", "FileNotFoundError", "Error while fetching",
                        "$DOCKER_HOST", "StepError"):
                assert raw not in shown, (key, shown)
            assert "unix:///nonexistent/seat-test.sock" in shown, shown
            app.clear_notifications()
            await _wait(pilot, lambda: rb.FLOWS and app.runbooks.planning is None, "idle")


def test_step_error_and_force_reason_are_said_for_the_tui() -> None:
    from seat_console.actions.runbook import StepError

    assert rb.human_error("swap", StepError("candidate container: no image")) == \
        "swap: candidate container: no image"
    nested = rb.plain_words("cannot read (StepError: docker: boom)")
    assert "StepError" not in nested and "docker: boom" in nested
    text = ("refusing to probe: no active hold. Place a hold first (`seat-console hold`), or "
            "pass --force --reason '…' (journaled)")
    said = rb.plain_words(text)
    assert "--force" not in said and said.endswith("Place a hold first (`seat-console hold`).")
    # said as the key the screen shows: remapped, or the command where none runs it
    assert rb.press_keys(said, {"node.hold": "H"}.get).endswith("Place a hold first (press H).")
    assert rb.press_keys(said, {"node.hold": "ctrl+h"}.get).endswith("(press ctrl+h).")
    assert rb.press_keys(said, lambda _b: None) == said                   # --readonly


async def test_probe_refusal_says_press_h(monkeypatch) -> None:
    from seat_console.probe.run import ProbeRefused

    def refuse(loaded, **_kw):
        raise ProbeRefused("refusing to probe: no active hold in the journal. Place a hold "
                           "first (`seat-console hold`), or pass --force --reason '…' "
                           "(journaled)")

    monkeypatch.setattr("seat_console.probe.run.preflight", refuse)
    app = _app()
    async with app.run_test(size=(120, 40), notifications=True) as pilot:
        await all_read(pilot, app)   # a key pressed before the screen is built is lost
        await pilot.press("P")
        await _wait(pilot, lambda: "no active hold" in _toasts(app), "the refusal")
        shown = _toasts(app)
        assert "Place a hold first (press H)" in shown and "--force" not in shown, shown


async def test_an_error_goes_when_a_screen_opens() -> None:
    app = _app()
    async with app.run_test(size=(120, 40), notifications=True) as pilot:
        app.runbooks.error("swap: something failed")
        await _wait(pilot, lambda: "something failed" in _toasts(app), "the error")
        assert rb.ERROR_TIMEOUT_S <= 10
        await pilot.press("question_mark")
        await _wait(pilot, lambda: isinstance(app.screen, HelpScreen), "help")
        await pilot.pause(0.1)
        assert not list(app._notifications), list(app._notifications)


def test_flows_reach_the_app_only_through_messages_and_its_public_face() -> None:
    """The controllers call no private member of the app (today's ``_start_poll`` and
    ``states`` are gone from them) and type the app (no ``Any``)."""
    for name in ("runbook.py", "probe_tui.py", "main_screen.py"):
        tree = ast.parse((ROOT / "console/tui" / name).read_text("utf-8"))
        for node in ast.walk(tree):
            if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Attribute)
                    and node.value.attr == "app" and node.attr.startswith("_")):
                raise AssertionError(f"{name}:{node.lineno} reaches app.{node.attr}")
            if isinstance(node, ast.arg) and node.arg == "app" and node.annotation is not None:
                assert ast.unparse(node.annotation) != "Any", f"{name}:{node.lineno}"
    from seat_console.tui.messages import PlanReady, RunbookEvent, RunFinished

    for cls in (PlanReady, RunbookEvent, RunFinished):
        assert cls.handler_name.startswith("on_")


def test_refusals_in_the_tui_name_the_keys_not_the_commands() -> None:
    """A QA walk read "run `seat-console restore` … or `seat-console promote`" in the TUI's
    release refusal, where R and M run them; the swap's refusal already said "press H". The
    key is the one the screen shows (remapped), and a command stays where no key runs it
    (--readonly) or where it has arguments."""
    from seat_console.tui.runbook import press_keys

    keys = {"node.restore": "R", "node.promote": "M", "node.release": "U",
            "node.promote-undo": "Z"}
    release = ("the candidate holds the seat and no promote made it the resident: releasing "
               "the hold now would hand the fleet's timers and alerts a seat serving the "
               "candidate — run `seat-console restore` (the resident back, then the hold "
               "released) or `seat-console promote` (once the decision is PROMOTE-ABLE); to "
               "release anyway: `seat-console release --force --reason TEXT` (journaled)")
    said = press_keys(release, keys.get)
    assert "press R (restore) (the resident back" in said
    assert "or press M (promote) (once the decision" in said
    assert "`seat-console release --force --reason TEXT`" in said      # arguments: kept
    compare = "compare starts from … — run `seat-console restore` first, then compare"
    assert press_keys(compare, keys.get).endswith("— press R (restore) first, then compare")
    assert press_keys("`seat-console promote --undo`", keys.get) == "press Z (promote --undo)"
    # restore --keep-hold: asked as its own id (the controller says R only where R keeps it)
    from seat_console.tui.runbook import KEEP_HOLD_ID

    keep = "run `seat-console restore --keep-hold` first"
    assert press_keys(keep, keys.get) == keep
    assert press_keys(keep, {**keys, KEEP_HOLD_ID: "R"}.get) == \
        "press R (restore --keep-hold) first"
    assert press_keys(release, {"node.restore": "x"}.get).count("`seat-console") == 2
    assert press_keys(release, lambda _b: None) == release                # read-only: as is
