"""The fleet rows and screen against a REAL Prometheus (Debian's /usr/bin/prometheus, started
here on a free loopback port with its own config and TSDB) scraping the fleet simulator
(scripts/fleet_sim.py, honor_labels). Independent of the lab's Prometheus."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from dataclasses import replace

import pytest

from prom_fixtures import fleet_sim, start_fleet, wait_until
from seat_console.fleet.promapi import PromClient
from seat_console.fleet.rows import (
    PART,
    RANK,
    WIRE,
    Fleet,
    FleetRow,
    InventoryEntry,
    cells,
    merge,
    number_queries,
    queries,
    split,
)
from seat_console.tui.fleet import FleetApp, SeatDetail

pytestmark = pytest.mark.prometheus   # fails (never skips) without /usr/bin/prometheus

FLEET_SCRAPE_S = 3.0
"""The scrape interval the Fleet is told (stale after 6 s); Prometheus scrapes every 1 s, so a
loaded machine's late scrapes do not make live seats stale."""


def expected_state(seat) -> str:  # noqa: ANN001
    """What the row of a simulator seat must say (from fleet_sim.plan)."""
    if seat.stale:
        return "stale"
    return {"held-no-lease": "without-lease", "down": "down", "held": "held"}.get(seat.kind,
                                                                                   "healthy")


@pytest.fixture(scope="module")
def prom10(tmp_path_factory):
    f = start_fleet(tmp_path_factory.mktemp("prom10"), 10, stale=2, stale_after_s=25.0)
    yield f
    f.stop()


def _fleet(url: str, **kw) -> Fleet:
    return Fleet(PromClient(url, timeout_s=10), scrape_interval_s=FLEET_SCRAPE_S, **kw)


def _settled(fleet: Fleet, plan) -> tuple:  # noqa: ANN001
    """Refresh until every seat's row has its expected state (the stale seats have vanished
    and aged past two intervals); returns the reading."""
    want = {s.instance: expected_state(s) for s in plan}

    def ok():
        r = fleet.refresh()
        return r if r.ok and {row.instance: row.state for row in r.rows} == want else None

    return wait_until(ok, 120, "rows with the simulator's states", every_s=1.0)


def test_rows_held_down_stale_in_trouble_order(prom10):
    reading = _settled(_fleet(prom10.url), prom10.plan)
    states = [r.state for r in reading.rows]
    assert [RANK[s] for s in states] == sorted(RANK[s] for s in states)
    assert {"without-lease", "down", "stale", "held", "healthy"} <= set(states)
    assert states.index("without-lease") < states.index("down") < states.index("stale") \
        < states.index("held") < states.index("healthy")
    by = {r.instance: r for r in reading.rows}
    for seat in prom10.plan:
        row = by[seat.instance]
        assert row.node == seat.node
        if seat.stale:
            assert row.engine_up is None and row.stale_s > 2 * FLEET_SCRAPE_S
            continue
        assert row.engine_up is seat.engine_up
        assert row.probe_disrupted is (False if seat.probe_kept else None)
        if seat.kind == "held":
            assert row.hold == "lease" and row.hold_until is not None
        elif seat.kind == "held-no-lease":
            assert row.hold == "without-lease"
        else:
            assert row.hold == "none"
        if seat.dcgm:
            assert row.gpus == 2 and row.gpu_total_bytes == 2 * 143_771 * (1 << 20)
        else:
            assert row.gpus == 0 and row.gpu_used_bytes is None
        if seat.engine_up:
            assert row.running is not None and row.kv_usage is not None
        else:
            assert row.running is None     # no vLLM series: unknown, never 0


def _count_queries(prom, fleet: Fleet) -> tuple[int, object]:  # noqa: ANN001
    before = prom.query_requests()
    reading = fleet.refresh()
    return prom.query_requests() - before, reading


def test_queries_per_refresh_fixed_10_seats(prom10):
    fleet = _fleet(prom10.url)
    n, reading = _count_queries(prom10, fleet)
    assert reading.ok
    assert n == reading.queries <= 15          # counted by Prometheus itself
    assert len(fleet.queries) == 4


def test_queries_per_refresh_fixed_1000_seats(tmp_path):
    big = start_fleet(tmp_path / "p1000", 1000, stale=5, stale_after_s=3600,
                      scrape_interval_s=5.0, timeout_s=180)
    try:
        fleet = Fleet(PromClient(big.url, timeout_s=30), scrape_interval_s=5.0)
        n, reading = _count_queries(big, fleet)
        assert reading.ok, reading.error
        assert len(reading.rows) == 1000
        assert n == reading.queries <= 15
        assert len(fleet.queries) == 4         # the same queries as for 10 seats
    finally:
        big.stop()


def test_prometheus_stopped_keeps_last_good_rows_with_age(tmp_path):
    own = start_fleet(tmp_path / "p", 6, stale=0)
    try:
        fleet = Fleet(PromClient(own.url, timeout_s=2, attempts=1),
                      scrape_interval_s=FLEET_SCRAPE_S)
        good = wait_until(lambda: (r := fleet.refresh()).ok and len(r.rows) == 6 and r,
                          60, "a good refresh")
        own.pause()                              # accepts connections, never answers: slow
        slow = fleet.refresh()
        assert not slow.ok and "no answer within" in slow.error
        assert slow.rows == good.rows and slow.rows_at == good.taken_at
        own.resume()
        own.stop("prometheus")                   # down
        time.sleep(0.01)
        down = fleet.refresh()
        assert not down.ok and "cannot reach" in down.error
        assert down.rows == good.rows and down.rows_at == good.taken_at
        assert down.age_s(down.taken_at) >= down.taken_at - good.taken_at > 0
    finally:
        own.stop()


def test_fleet_json_command(prom10, tmp_path):
    _settled(_fleet(prom10.url), prom10.plan)
    prof = tmp_path / "profile.toml"
    from seat_console.core.profile import default_profile_text

    prof.write_text(default_profile_text() + f"\n[fleet]\nscrape_interval_s = {FLEET_SCRAPE_S}\n")
    out = subprocess.run([sys.executable, "-m", "seat_console", "--profile", str(prof), "fleet",
                          "--json", "--prometheus", prom10.url, "--alertmanager", "none"],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    assert doc["ok"] and doc["queries"] == 4 and doc["seats"] == 10
    assert doc["rows"][0]["state"] == "without-lease"
    assert doc["rows"][0]["last_seen"].endswith("Z")


# -- the screen (Pilot) -------------------------------------------------------------------------
async def _wait(pilot, pred, what: str, timeout_s: float = 60.0):  # noqa: ANN001
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if pred():
            return
        await pilot.pause(0.1)
    raise AssertionError(f"timed out waiting for {what}")


def _app(prom10, **kw) -> FleetApp:  # noqa: ANN001
    fleet = _fleet(prom10.url, inventory=kw.pop("inventory", ()))
    _settled(fleet, prom10.plan)
    return FleetApp(fleet, interval_s=kw.pop("interval_s", 30.0), **kw)


async def test_screen_80x24_filter_and_detail(prom10):
    app = _app(prom10)
    async with app.run_test(size=(80, 24)) as pilot:
        await _wait(pilot, lambda: len(app._order) == 10, "10 rows drawn")
        from seat_console.tui.fleet_table import FleetTable

        table = app.query_one(FleetTable)
        used = table.line_width
        assert used == sum(w for _, _, w in table.columns) + 2 * table.cell_padding * len(
            table.columns)
        assert used <= 80 - 2, f"columns need {used} cells at 80 wide"
        assert app.narrow and app._order[0] == next(
            s.instance for s in prom10.plan if s.kind == "held-no-lease")
        down = next(s for s in prom10.plan if s.kind == "down")
        await pilot.press("slash")
        for ch in down.node:
            await pilot.press(ch)
        await _wait(pilot, lambda: app._order == [down.instance], "the filter to leave one row")
        assert "1/10 shown" in app.header_text()
        # the rows' time comes first: a narrow screen cuts the URL, never the time (the trial)
        assert app.header_text().startswith("fleet · rows "), app.header_text()
        await pilot.press("enter")                  # leave the filter box
        await pilot.press("enter")                  # open the row
        await _wait(pilot, lambda: isinstance(app.screen, SeatDetail), "the detail view")
        detail = app.screen
        await _wait(pilot, lambda: detail.history is not None, "the last hour's range queries")
        names = [line.name for line in detail.history.lines]
        assert "engine up" in names and any(n.startswith("GPU memory") for n in names)
        assert detail.history.lines[0].last == 0.0          # the down seat's engine_up
        # one unit and a said instant: the history's figures read as the row's (issue 33)
        shown = str(detail.query_one("#detail-history").render())
        summary = detail._summary().plain
        assert "figures below read at " in summary and "Z" in summary
        for line in detail.history.lines:
            if line.name == "KV cache usage" and line.last is not None:
                assert f"last {line.last * 100:.0f}%" in shown
            if line.name.startswith("GPU memory") and line.last is not None:
                assert " GiB at " in shown and "(MiB)" not in shown
        await pilot.press("escape")
        await _wait(pilot, lambda: not isinstance(app.screen, SeatDetail), "back to the table")
        await pilot.press("slash")
        await pilot.press("escape")
        await _wait(pilot, lambda: len(app._order) == 10, "the filter cleared")


async def test_screen_200x60_wide_and_in_place_updates(prom10):
    app = _app(prom10, interval_s=1.0)
    async with app.run_test(size=(200, 60)) as pilot:
        # a refresh's timing is recorded when its rows are drawn, after `refreshes` counts it:
        # wait for both (on a loaded machine the third draw can lag the third refresh)
        await _wait(pilot, lambda: app.refreshes >= 3 and len(app._order) == 10
                    and len(app.timings) >= 3, "three refreshes drawn")
        assert not app.narrow


async def test_header_says_refreshing_only_while_a_refresh_is_slow(prom10):
    """A refresh that takes longer than BUSY_SHOWN_AFTER_S says so in the header at the next
    tick; a quick one never does (it cost a frame of its own at every refresh)."""
    from seat_console.tui.fleet import BUSY_SHOWN_AFTER_S

    app = _app(prom10, interval_s=1.0)
    async with app.run_test(size=(120, 30)) as pilot:
        await _wait(pilot, lambda: app.refreshes >= 2, "two quick refreshes")
        assert "refreshing" not in app.header_text()
        prom10.pause()
        try:
            await _wait(pilot, lambda: app.busy, "a refresh to start against the paused server")
            if time.monotonic() - app._busy_since < BUSY_SHOWN_AFTER_S / 2:
                assert "refreshing" not in app.header_text()  # not yet: under the threshold
            await _wait(pilot, lambda: "refreshing" in str(app.query_one("#fleet-header").render()),
                        f"'refreshing' in the header after {BUSY_SHOWN_AFTER_S} s")
        finally:
            prom10.resume()
        await _wait(pilot, lambda: not app.busy and "refreshing" not in app.header_text(),
                    "the refresh to finish and the header to drop it")


async def test_a_opens_the_inventory_console_readonly(prom10, tmp_path):
    first = next(s for s in prom10.plan if s.kind == "held-no-lease")
    ran: list[list[str]] = []
    app = _app(prom10, readonly=True, run_console=lambda argv: ran.append(argv) or 0,
               inventory=[InventoryEntry(first.instance, profile="/etc/seat/profile.toml")])
    async with app.run_test(size=(100, 30)) as pilot:
        await _wait(pilot, lambda: len(app._order) == 10, "rows drawn")
        assert isinstance(app.current_row(), FleetRow)
        await pilot.press("a")
        await _wait(pilot, lambda: ran, "the console to be started")
    assert ran == [[sys.executable, "-m", "seat_console", "--profile", "/etc/seat/profile.toml",
                    "--readonly"]]


def _answer(res) -> set:  # noqa: ANN001
    return {(tuple(sorted((k, v) for k, v in s.labels.items() if k != PART)), s.value)
            for s in res.series}


def test_a_merged_query_answers_each_part_as_that_part_alone(prom10):
    """Each wire query's parts, split back (:func:`split`), equal the part queried alone at
    the same instant — the ``part`` tag keeps ``or`` from dropping a part's series whose
    labels (without ``__name__``) match another part's: untagged, ``times`` (by instance,
    __name__) vanished behind the flags of ``states`` on this very Prometheus."""
    _settled(_fleet(prom10.url), prom10.plan)
    client = PromClient(prom10.url, timeout_s=10)
    at = time.time() - 1.0
    parts = queries(600, FLEET_SCRAPE_S)
    windowed = number_queries([s.instance for s in prom10.plan[:4]])
    for name, qs in [*((w, {n: parts[n] for n in ns}) for w, ns in WIRE.items()),
                     ("numbers (window)", windowed)]:
        got = split(client.query(merge(qs), at=at), list(qs))
        nonempty = 0
        for n, q in qs.items():
            alone = client.query(q, at=at)
            assert _answer(got[n]) == _answer(alone), (name, n)
            nonempty += bool(alone.series)
        assert nonempty >= 2, f"{name}: too few parts with series to tell them apart"


def test_a_windowed_refresh_reads_the_window_s_numbers_exactly_as_a_full_one(prom10):
    """The screen's refresh reads the moving numbers only for the seats its ``window`` names;
    those rows must equal a full refresh's at the same instant (same PromQL evaluation
    time), every other row must say its numbers were not read (never a value, never 0)."""
    _settled(_fleet(prom10.url), prom10.plan)
    at = time.time() - 1.0
    full = _fleet(prom10.url, clock=lambda: at).refresh()
    assert full.ok and all(r.numbers_read for r in full.rows)
    want = {full.rows[0].instance, full.rows[-1].instance,
            next(r.instance for r in full.rows if r.state == "healthy" and r.gpus)}
    seen: list[list[str]] = []

    def window(rows):  # noqa: ANN001, ANN202
        seen.append([r.instance for r in rows])
        return want

    before = prom10.query_requests()
    win = _fleet(prom10.url, clock=lambda: at).refresh(window=window)
    assert win.ok and prom10.query_requests() - before == win.queries <= 4
    assert seen == [[r.instance for r in full.rows]]     # called once, with the sorted rows
    by_full = {r.instance: r for r in full.rows}
    assert [r.instance for r in win.rows] == [r.instance for r in full.rows]
    for r in win.rows:
        if r.instance in want:
            assert r == by_full[r.instance]
        else:
            assert not r.numbers_read and r.running is None and r.kv_usage is None
            assert r.gpus == -1 and r.gpu_used_bytes is None
            # a stale or series-less seat has no current numbers to read: n/a, as in a full read
            unread = "n/a" if r.state in ("stale", "no-series") else "…"
            assert cells(r, at)[4:8] == (unread,) * 4
            same = replace(r, running=by_full[r.instance].running,
                           waiting=by_full[r.instance].waiting,
                           kv_usage=by_full[r.instance].kv_usage, gpus=by_full[r.instance].gpus,
                           gpu_used_bytes=by_full[r.instance].gpu_used_bytes,
                           gpu_total_bytes=by_full[r.instance].gpu_total_bytes,
                           numbers_read=True, probe_disrupted=by_full[r.instance].probe_disrupted)
            assert same == by_full[r.instance]


async def test_rows_scrolled_into_view_get_their_numbers(tmp_path):
    """60 seats at 80×14: a refresh reads the numbers of the rows on screen and a page
    around them only; End scrolls to rows that were not read, and a numbers-only read fills
    them in without waiting for the next refresh."""
    from seat_console.tui.fleet_table import FleetTable

    own = start_fleet(tmp_path / "p60", 60, stale=0)
    try:
        fleet = _fleet(own.url)
        _settled(fleet, own.plan)
        app = FleetApp(fleet, interval_s=3600.0)
        async with app.run_test(size=(80, 14)) as pilot:
            await _wait(pilot, lambda: len(app._order) == 60, "60 rows drawn")
            table = app.query_one(FleetTable)
            top, bottom = table.visible_range()
            # the rows are drawn before the read of their numbers has answered (on a loaded
            # machine it answered after the first draw): wait for it, on the state, not a time
            await _wait(pilot, lambda: all(r.numbers_read
                                           for r in app.reading.rows[top:bottom]),
                        "the numbers of the rows on screen")
            rows = app.reading.rows
            assert not rows[-1].numbers_read               # far below the window: not read
            reads = app.numbers_reads
            table.focus()
            await pilot.press("end")
            await _wait(pilot, lambda: app.numbers_reads > reads, "a numbers-only read")

            def shown() -> bool:
                a, b = table.visible_range()
                vis = app._order[a:b]
                return bool(vis) and all(app._rows[k].numbers_read for k in vis) and all(
                    table.get_cell(k, "running") != "…" for k in vis)

            await _wait(pilot, shown, "the rows now on screen to have their numbers")
            assert app.refreshes == 1                      # no refresh needed for it
    finally:
        own.stop()


def test_the_simulators_held_seats_never_read_as_overdue_however_long_it_runs() -> None:
    """The lab's simulator runs for a whole CI run: its held seats' leases (10 min to 2 h after
    its start) came due mid-run and the fleet read them as hold-overdue where the plan says
    held (test_fleet_lab waited 300 s, then failed). A held seat's lease is extended as it
    comes due: no scrape, hours after the start, has an expiry in the past."""
    from prometheus_client import CollectorRegistry, generate_latest
    from prometheus_client.parser import text_string_to_metric_families

    sim = fleet_sim()
    seats = sim.plan(200, 0, 0)
    assert any(s.kind == "held" for s in seats)
    for hours in (0.0, 0.5, 3.0, 49.0):
        started = time.time() - hours * 3600
        reg = CollectorRegistry(auto_describe=False)
        reg.register(sim.FleetCollector(seats, started, 1e9, 0))
        now = time.time()
        ends = [smp.value for fam in text_string_to_metric_families(generate_latest(reg).decode())
                if fam.name == "seat_hold_expiry_timestamp_seconds" for smp in fam.samples]
        assert ends and min(ends) >= now - sim.BUCKET_S, (hours, min(ends) - now)
    assert sim.lease_end(1000.0, 600.0, 1500.0) == 1600.0
    assert sim.lease_end(1000.0, 600.0, 1601.0) == 1600.0 + sim.LEASE_PERIOD_S
    assert sim.lease_end(1000.0, None, 5.0) is None
