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


def _highlighted(app: FleetApp) -> list[str]:
    """The node names of the table lines drawn in the cursor's colours, read off the screen."""
    from seat_console.tui.fleet_table import FleetTable

    table = app.query_one(FleetTable)
    cursor = table.get_component_rich_style("fleet-table--cursor").bgcolor
    strips = [table.render_line(y) for y in range(1, table.size.height)]
    return [strip.text.split()[0] for strip in strips
            if any(s.style is not None and s.style.bgcolor == cursor for s in strip)]


async def test_a_opens_the_row_the_cursor_shows_after_a_filter_and_refuses_with_none() -> None:
    """A filter typed and cleared left the cursor on seat 54 with the table scrolled to the
    top (a table with no scrollbar drops the scroll): nothing highlighted on screen, and ``a``
    opened seat 54's console. ``a`` acts on the row the cursor shows; with no row shown it
    says so and opens nothing."""
    from seat_console.fleet.rows import InventoryEntry
    from seat_console.tui.fleet_table import FleetTable

    rows = [FleetRow(instance=f"i:{n}", node=f"gpu-{n:02d}", state="healthy", engine_up=True,
                     hold="none", silence="none") for n in range(60)]
    fleet = _OneReading(rows)
    fleet.inventory = [InventoryEntry(r.instance, profile=f"/etc/seat/{r.node}.toml")
                       for r in rows]
    ran: list[list[str]] = []
    app = FleetApp(fleet, interval_s=3600, run_console=lambda argv: ran.append(argv) or 0)
    async with app.run_test(size=(100, 24), notifications=True) as pilot:
        await _wait(pilot, lambda: len(app._order) == 60, "the rows")
        await pilot.press("end")
        await _wait(pilot, lambda: _highlighted(app) == ["gpu-59"], "the cursor on the last")
        await pilot.press("slash", "4")
        await _wait(pilot, lambda: len(app._order) == 15, "the filter")
        await pilot.press("enter", "escape")
        await _wait(pilot, lambda: len(app._order) == 60, "the filter cleared")
        await pilot.pause()
        shown = _highlighted(app)
        assert len(shown) == 1, f"no row (or several) highlighted on screen: {shown}"
        await pilot.press("a")
        await _wait(pilot, lambda: ran, "a console")
        assert ran[-1][-1] == f"/etc/seat/{shown[0]}.toml", (ran, shown)
        table = app.query_one(FleetTable)
        table.scroll_to(y=0, animate=False)            # the wheel: the cursor's row out of view
        await _wait(pilot, lambda: _highlighted(app) == [], "the cursor scrolled away")
        await pilot.press("a")
        await _wait(pilot, lambda: any("out of view" in str(n.message)
                                       for n in app._notifications), "the out-of-view notice")
        assert len(ran) == 1
        await pilot.press("slash", "z", "z", "enter")
        await _wait(pilot, lambda: app._order == [], "a filter that matches none")
        await pilot.press("a")
        await _wait(pilot, lambda: any("no seat shown" in str(n.message)
                                       for n in app._notifications), "the notice")
        assert len(ran) == 1


async def test_an_overdue_hold_reads_as_trouble_on_screen_and_in_the_help() -> None:
    """The overdue lease (``until 07:12Z`` read at 08:21) has its own state: red like the
    hold without a lease, counted in the header, and explained in ``?`` — whose list of
    states covers every state of the trouble order."""
    from datetime import UTC, datetime

    from seat_console.fleet.rows import RANK
    from seat_console.tui.fleet import STATE_WORDS, STYLE
    from seat_console.tui.fleet_table import FleetTable
    from seat_console.widgets.help import HelpScreen

    assert set(STATE_WORDS) == set(RANK) and set(STYLE) == set(RANK)
    due = datetime(2027, 1, 15, 7, 12, tzinfo=UTC).timestamp()
    rows = [FleetRow(instance="o:1", node="gpu-late", state="hold-overdue", engine_up=True,
                     hold="lease", hold_until=due, silence="none"),
            FleetRow(instance="h:1", node="gpu-held", state="held", engine_up=True,
                     hold="lease", hold_until=NOW + 3600, silence="none")]
    app = FleetApp(_OneReading(rows), interval_s=3600)
    async with app.run_test(size=(120, 30)) as pilot:
        await _wait(pilot, lambda: len(app._order) == 2, "the rows")
        table = app.query_one(FleetTable)
        assert table.get_cell("o:1", "hold") == "OVERDUE 07:12Z"
        late = app.row_styles(app._rows["o:1"])
        assert late[0] == "bold red" and "reverse" in late[2]
        assert app.row_styles(app._rows["h:1"])[0] == "cyan"
        assert "1 hold-overdue, 1 held" in app.header_text(), app.header_text()
        await pilot.press("question_mark")
        await _wait(pilot, lambda: isinstance(app.screen, HelpScreen), "the help screen")
        text = str(app.screen.query_one("#help-text").render())
        assert "hold OVERDUE" in text and "still held" in text
        assert text.index("WITHOUT LEASE") < text.index("hold OVERDUE") \
            < text.index("engine down and not held")


class _CountingProm:
    """An in-process Prometheus for :class:`Fleet`: ``seats`` current seats answer ``seen``,
    every other query answers an empty vector; ``requests`` counts the queries, as
    :class:`~seat_console.fleet.promapi.PromClient` does."""

    url = "http://prom.test:9090"

    def __init__(self, seats: int) -> None:
        self.seats = seats
        self.requests = 0
        self.seen_query = ""

    def query(self, q: str, at: float | None = None):  # noqa: ANN201
        import json
        import time

        from seat_console.fleet.promapi import parse_response

        self.requests += 1
        t = time.time() if at is None else at
        series = [{"metric": {"instance": f"n{i:02d}:9469"}, "value": [t, str(t - 1)]}
                  for i in range(self.seats)] if q == self.seen_query else []
        return parse_response(json.dumps({"status": "success", "data": {
            "resultType": "vector", "result": series}}), q)

    def close(self) -> None:
        pass


async def test_the_help_says_the_queries_per_refresh_the_header_counts() -> None:
    """The header counted 5 queries (a refresh's 4 and a numbers-only read of rows scrolled
    into view) under a help that said "4 queries per refresh". The help's numbers come from
    the refresh's own query list; the header keeps the refresh's count apart (``N+M``)."""
    import re

    from seat_console.fleet.rows import REFRESH_QUERIES, Fleet
    from seat_console.tui.fleet import FLEET_HELP
    from seat_console.tui.fleet_table import FleetTable

    prom = _CountingProm(60)
    fleet = Fleet(prom, scrape_interval_s=15.0)
    prom.seen_query = fleet.queries["seen"]
    assert tuple(fleet.queries) == REFRESH_QUERIES
    help_text = " ".join(FLEET_HELP[0][1])
    most = int(re.search(r"at most (\d+) instant queries per refresh", help_text)[1])
    assert most == len(fleet.queries)
    app = FleetApp(fleet, interval_s=3600)
    async with app.run_test(size=(80, 14)) as pilot:
        await _wait(pilot, lambda: len(app._order) == 60, "the rows")
        reads = app.numbers_reads
        app.query_one(FleetTable).focus()
        await pilot.press("end")                       # rows not read come into view
        await _wait(pilot, lambda: app.numbers_reads > reads, "a numbers-only read")
        said = re.search(r"· (\d+)(?:\+(\d+))? queries ·", app.header_text())
        assert said, app.header_text()
        assert int(said[1]) <= most and said[2], (app.header_text(), help_text)
        assert int(said[1]) + int(said[2]) == prom.requests


class _RangeProm:
    """A Prometheus answering the detail view's range queries: KV cache usage 0.532 and 30 GiB
    a card at every instant but ``at``, where they are 0.08 and 40 GiB (what the row was read
    as); ``asked`` records each query's ``(start, end)``."""

    url = "http://prom.test:9090"

    def __init__(self, at: float) -> None:
        self.at = at
        self.asked: list[tuple[float, float]] = []

    def query_range(self, q: str, start: float, end: float, step_s: float):  # noqa: ANN201
        import json

        from seat_console.fleet.promapi import parse_response

        self.asked.append((start, end))
        ts = [start + k * step_s for k in range(int((end - start) // step_s) + 1)]

        def pts(now: float, other: float) -> list:
            return [[t, str(now if abs(t - self.at) < 1e-3 else other)] for t in ts]

        if "kv_cache" in q:
            result = [{"metric": {}, "values": pts(0.08, 0.532)}]
        elif "DCGM_FI_DEV_FB_USED" in q:
            result = [{"metric": {"UUID": f"GPU-{c}"}, "values": pts(40960, 30720)}
                      for c in ("aaaa", "bbbb")]
        else:
            result = []
        return parse_response(json.dumps({"status": "success", "data": {
            "resultType": "matrix", "result": result}}), q)


async def test_the_seat_detail_reads_its_figures_and_last_hour_at_one_instant() -> None:
    """The seat detail said "KV cache 8%" above a sparkline whose newest point was 0.532:
    the row was read at the refresh, the last hour up to the moment the view opened. The last
    hour now ends at the row's reading, and each line's newest point is the row's figure, in
    the row's unit (%, GiB = 2^30 B)."""
    from seat_console.fleet.rows import iso
    from seat_console.tui.fleet import SeatDetail

    row = FleetRow(instance="i:1", node="gpu-1", state="healthy", engine_up=True, hold="none",
                   silence="none", last_seen=NOW - 1, running=3, waiting=0, kv_usage=0.08,
                   gpus=2, gpu_used_bytes=80 * 2**30, gpu_total_bytes=160 * 2**30)
    fleet = _OneReading([row])
    fleet.prom = _RangeProm(NOW)
    app = FleetApp(fleet, interval_s=3600)
    async with app.run_test(size=(120, 40)) as pilot:
        await _wait(pilot, lambda: len(app._order) == 1, "the row")
        await pilot.press("enter")
        await _wait(pilot, lambda: isinstance(app.screen, SeatDetail), "the detail view")
        detail = app.screen
        await _wait(pilot, lambda: detail.history is not None, "the last hour")
        assert {end for _start, end in fleet.prom.asked} == {NOW}, fleet.prom.asked
        summary = detail._summary().plain
        shown = str(detail.query_one("#detail-history").render())
        at = iso(NOW)
        assert f"figures below read at {at}" in summary
        assert "KV cache 8%" in summary and "GPU memory 80.0/160.0 GiB" in summary, summary
        assert f"last 8% at {at}" in shown, shown
        assert f"last 80.0 GiB at {at}" in shown, shown              # the seat: both cards
        assert f"last 40.0 GiB at {at}" in shown, shown              # one card
        assert "0.532" not in shown and "GiB (2^30 B)" in shown
