"""The fleet screen's keys come from the one key table (issue 33): its bindings are
``FLEET_KEYS``, a profile's ``[keys]`` remaps them by id (and an unknown id or a clash is
refused naming the file), ``?`` lists them with a sentence each, ``--readonly`` filters them
as the main screen's, and README's fleet key table lists every row."""

from __future__ import annotations

from pathlib import Path

import pytest

from seat_console.fleet.rows import FleetRow
from seat_console.tui import keys as kt
from seat_console.tui.fleet import FleetApp, SeatDetail
from test_fleet_rows import NOW, _OneReading  # noqa: F401 - NOW used by the reading

ROOT = Path(__file__).resolve().parents[1]


def _app(**kw) -> FleetApp:  # noqa: ANN003
    return FleetApp(_OneReading([FleetRow(instance="i:1", node="gpu-1", state="healthy",
                                          engine_up=True, hold="none", silence="none")]),
                    interval_s=3600, **kw)


async def _wait(pilot, pred, what: str) -> None:  # noqa: ANN001
    for _ in range(200):
        if pred():
            return
        await pilot.pause(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def test_the_fleets_bindings_are_the_key_table() -> None:
    assert [(b.id, b.key, b.action) for b in FleetApp.BINDINGS] == [
        (k.id, k.key, k.action) for k in kt.FLEET_KEYS]
    assert [b.id for b in SeatDetail.BINDINGS] == [k.id for k in kt.FLEET_DETAIL_KEYS]
    ids = [k.id for t in kt.TABLES for k in t]
    assert len(ids) == len(set(ids))


def test_readme_lists_every_fleet_key() -> None:
    readme = (ROOT / "README.md").read_text("utf-8")
    for row in kt.readme_rows(kt.FLEET_KEYS + kt.FLEET_DETAIL_KEYS):
        assert row in readme, f"README's fleet key table lacks (or has an old) row: {row}"


def test_a_profiles_keys_remap_the_fleet_and_bad_ones_are_refused() -> None:
    # a fleet id is known to the main screen's check too (one [keys] table for both)
    assert kt.check_keymap({"fleet.filter": "f", "node.hold": "ctrl+h"}, "p.toml") == {
        "node.hold": "ctrl+h"}
    app = _app(keymap={"fleet.filter": "f", "node.hold": "ctrl+h"}, keymap_source="p.toml")
    assert app.keymap == {"fleet.filter": "f"}
    with pytest.raises(kt.KeymapError, match=r"p\.toml.*'fleet\.filtr'.*fleet\.filter"):
        _app(keymap={"fleet.filtr": "f"}, keymap_source="p.toml")
    with pytest.raises(kt.KeymapError, match=r"p\.toml.*key 'q' is bound to both"):
        _app(keymap={"fleet.filter": "q"}, keymap_source="p.toml")


async def test_help_lists_the_fleet_keys_as_remapped_and_the_remap_works() -> None:
    from seat_console.widgets.help import HelpScreen

    app = _app(keymap={"fleet.filter": "f"}, readonly=True)
    async with app.run_test(size=(120, 40)) as pilot:
        await _wait(pilot, lambda: bool(app._order), "the first rows")
        await pilot.press("question_mark")
        await _wait(pilot, lambda: isinstance(app.screen, HelpScreen), "the help screen")
        text = app.screen.key_text()
        assert "f filter — Filter the rows" in text and "/ filter" not in text
        for k in kt.FLEET_KEYS:
            assert k.label in text
        assert "Reading the fleet table" in str(app.screen.query_one("#help-text").render())
        assert "Reading the GPU panel" not in str(app.screen.query_one("#help-text").render())
        await pilot.press("escape")
        await _wait(pilot, lambda: not isinstance(app.screen, HelpScreen), "help closed")
        await pilot.press("f")   # the remapped key opens the filter
        await _wait(pilot, lambda: "hidden" not in app.query_one("#fleet-filter").classes,
                    "the filter field")


def test_readonly_filters_the_fleet_keys_as_the_main_screens() -> None:
    rows = _app(readonly=True).help_rows()
    assert [r[1] for r in rows] == [r[1] for r in _app().help_rows()]   # no node key here
    assert all(len(s.split()) >= 5 for _k, _l, s in rows)


async def test_the_fleet_header_says_read_only_under_readonly() -> None:
    """The second trial: the fleet screen under --readonly had no marker, unlike the main
    screen's READ-ONLY. It leads the header, where no cut reaches it."""
    for readonly, head in ((True, "fleet READ-ONLY · "), (False, "fleet · ")):
        app = _app(readonly=readonly)
        async with app.run_test(size=(80, 24)) as pilot:
            await _wait(pilot, lambda: app.reading is not None, "the first reading")
            assert app.header_text().startswith(head), app.header_text()
