"""The one key table (console/tui/keys.py): it makes the app's bindings, the help screen's rows
(a sentence per key, not one word), README's key table and the --readonly filter; the profile's
[keys] remaps keys through Textual's keymap, refusing an unknown id or a clash by the file's
name. Plus the fronts' shape: no function over 80 lines, app.py at most 400 lines."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest
from app_fixtures import CountingPanel, CountingSource, FakeClock

from seat_console.core.profile import LoadedProfile, ProfileError, default_profile_text, parse_profile
from seat_console.tui import keys as kt
from seat_console.tui.app import SeatConsoleApp
from seat_console.widgets.help import HelpScreen
from seat_console.widgets.hold_options import HoldOptionsScreen

ROOT = Path(__file__).resolve().parents[1]


def _loaded(extra: str = "", source: str = "/etc/seat/profile.toml") -> LoadedProfile:
    return LoadedProfile(parse_profile(default_profile_text() + extra, source), source,
                         "--profile", "0" * 64)


def _app(loaded: LoadedProfile, readonly: bool = False) -> SeatConsoleApp:
    return SeatConsoleApp(loaded, readonly=readonly, interval=3600.0,
                          panels=[(lambda _l: CountingSource(), CountingPanel)],
                          clock=FakeClock(), age_tick_s=3600.0, watch_terminal=False)


async def _wait(pilot, pred, what: str, limit: int = 3000) -> None:
    for _ in range(limit):
        if pred():
            return
        await pilot.pause(0.02)
    raise AssertionError(f"timed out waiting for {what}")


def test_the_apps_bindings_are_the_key_table() -> None:
    got = [(b.id, b.key, b.action) for b in SeatConsoleApp.BINDINGS]
    assert got == [(k.id, k.key, k.action) for k in kt.KEYS]
    assert len({k.id for k in kt.KEYS}) == len(kt.KEYS)
    assert {k.id for k in kt.KEYS if k.node} == {
        "node.hold", "node.release", "node.build-backport", "node.swap", "node.restore",
        "node.probe", "node.compare", "node.promote", "node.promote-undo"}


def test_readme_lists_every_key_of_the_table() -> None:
    readme = (ROOT / "README.md").read_text("utf-8")
    for row in kt.readme_rows():
        assert row in readme, f"README's key table lacks (or has an old) row: {row}"
    for key in "HBSRUP":
        assert f"| `{key}` |" in readme


def test_help_gives_a_sentence_per_key_and_hides_node_keys_readonly() -> None:
    for readonly in (False, True):
        rows = _app(_loaded(), readonly).help_rows()
        assert rows and all(len(sentence.split()) >= 5 for _k, _l, sentence in rows), rows
        assert any(k == "H" for k, _l, _s in rows) is (not readonly)
    keys = [k for k, _l, _s in _app(_loaded()).help_rows()]
    assert keys.count("p") == 1


async def test_help_screen_shows_the_sentences() -> None:
    app = _app(_loaded())
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.press("question_mark")
        await _wait(pilot, lambda: isinstance(app.screen, HelpScreen), "help")
        from rich.console import Console

        c = Console(width=100, record=True)
        c.print(app.screen.query_one("#help-keys").content)
        text = " ".join(c.export_text().split())
        assert "stop the timers and silence the seat's endpoint" in text
        assert "type the seat's name" in text


def test_help_names_each_keys_binding_id_for_the_profiles_keys_table() -> None:
    """README: the [keys] table remaps by binding id, "ids on ?" — the help showed labels
    only ("g runbook", "H hold"), so nobody could find "node.hold" there."""
    rows = {label: sentence for _k, label, sentence in _app(_loaded()).help_rows()}
    for key in kt.KEYS:
        if key.show or key.help:
            label = next(lbl for lbl in rows if key.label in lbl.split(" / "))
            named = [i for ids in re.findall(r"\[keys: ([^\]]+)\]", rows[label])
                     for i in ids.split(", ")]
            assert key.id in named, (key.id, rows[label])
    assert rows["hold"].endswith("[keys: node.hold]")
    # one key, two actions: each sentence says which it is, never run together
    assert rows["pause / resume"].startswith("pause: Stop reading"), rows["pause / resume"]
    assert "[keys: toggle-pause]  ·  resume: Start reading" in rows["pause / resume"]


async def test_a_node_actions_key_under_readonly_says_why_nothing_happens() -> None:
    """A new engineer on a --readonly console pressed H, S, U… and saw nothing at all. The key
    still runs nothing, and now says why (the remapped key too); a key of no action stays
    silent."""
    app = _app(_loaded('\n[keys]\n"node.swap" = "ctrl+o"\n'), readonly=True)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.press("H")
        await _wait(pilot, lambda: len(app._notifications) == 1, "the H notice")
        said = list(app._notifications)[0].message
        assert said.startswith("H hold: not in this console — it runs --readonly"), said
        assert not isinstance(app.screen, HoldOptionsScreen)
        await pilot.press("ctrl+o")
        await _wait(pilot, lambda: len(app._notifications) == 2, "the remapped key's notice")
        assert "swap: not in this console" in list(app._notifications)[1].message
        await pilot.press("x")
        await pilot.pause(0.1)
        assert len(app._notifications) == 2
    plain = _app(_loaded())
    async with plain.run_test(size=(120, 40)) as pilot:
        await pilot.press("H")
        await _wait(pilot, lambda: isinstance(plain.screen, HoldOptionsScreen), "the hold")


async def test_profile_keys_remap_through_the_keymap() -> None:
    app = _app(_loaded('\n[keys]\n"node.hold" = "ctrl+o"\nrefresh-now = "f5"\n'))
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.press("H")                       # no longer the hold key
        await pilot.pause(0.2)
        assert not isinstance(app.screen, HoldOptionsScreen)
        await pilot.press("ctrl+o")
        await _wait(pilot, lambda: isinstance(app.screen, HoldOptionsScreen), "the remapped key")
        await pilot.press("escape")
        rows = {label: k for k, label, _s in app.help_rows()}
        assert rows["hold"] == "^o" and rows["refresh"] == "f5"


def test_an_unknown_binding_id_is_refused_naming_the_file() -> None:
    with pytest.raises(ProfileError) as err:
        _app(_loaded('\n[keys]\n"node.hodl" = "ctrl+h"\n'))
    msg = str(err.value)
    assert msg.startswith("/etc/seat/profile.toml: [keys] 'node.hodl': no such key binding")
    assert "node.hold" in msg                        # the ids are listed


def test_two_actions_on_one_key_are_refused() -> None:
    with pytest.raises(kt.KeymapError) as err:
        _app(_loaded('\n[keys]\n"node.hold" = "q"\n'))
    assert "key 'q' is bound to both 'quit' and 'hold'" in str(err.value)
    assert str(err.value).startswith("/etc/seat/profile.toml:")
    kt.check_keymap({"toggle-pause": "f6", "resume": "f6"}, "x")   # one key, pause / resume


def test_a_bad_key_name_in_the_profile_is_refused() -> None:
    with pytest.raises(ProfileError, match=r"keys.node.hold = 'ctrl h!'"):
        parse_profile(default_profile_text() + '\n[keys]\nnode.hold = "ctrl h!"\n', "p.toml")


def _functions(root: Path):
    for path in sorted(root.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text("utf-8"))):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                yield path, node


def test_no_function_of_the_fronts_is_over_80_lines() -> None:
    long = [f"{p.relative_to(ROOT)}:{n.lineno} {n.name} ({n.end_lineno - n.lineno + 1} lines)"
            for d in ("console/tui", "widgets", "console/commands")
            for p, n in _functions(ROOT / d) if n.end_lineno - n.lineno + 1 > 80]
    assert not long, long


def test_the_app_module_stays_small() -> None:
    lines = (ROOT / "console/tui/app.py").read_text("utf-8").count("\n")
    assert lines <= 400, f"console/tui/app.py has {lines} lines"


async def test_the_palette_names_the_keys_the_profile_gives() -> None:
    """The palette's entries said "(same as q)", "(same as p)"… whatever the profile's [keys]
    had remapped them to; they name the user's keys now."""
    from seat_console.tui.palette import SeatCommands

    app = _app(_loaded('\n[keys]\n"quit" = "x"\n"toggle-pause" = "z"\n"help" = "f1"\n'))
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        quits = [c for c in app.get_system_commands(app.screen) if c.title == "Quit"]
        assert len(quits) == 1 and quits[0].help.endswith("(same as x)."), quits
        helps = {text: help_ for text, _cb, help_ in SeatCommands(app.screen)._commands()}
        assert helps["Pause polling"].endswith("(same as z)"), helps
        assert helps["Open help"].endswith("(same as f1)")
        assert helps["Refresh now"].endswith("(same as r)")    # not remapped: the table's
    plain = _app(_loaded())
    async with plain.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        helps = {text: help_ for text, _cb, help_ in SeatCommands(plain.screen)._commands()}
        assert helps["Open help"].endswith("(same as ?)")
