"""80×24 (issue 11): nothing wraps badly or is cut — the one-line unavailable reason keeps its
"Enter: why & fix", every panel's detail view stacks its rows instead of cutting table columns,
and the fit panel's what-if fields hold their longest values on the detail view.

Recorded inputs (tests/screen_fixtures.py), a fixed clock, an hour's refresh interval."""

from __future__ import annotations

import dataclasses
import re
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
import screen_fixtures as F
from screen_fixtures import lines_of, wait_for, all_read

from seat_console.tui.app import SeatConsoleApp
from seat_console.widgets.detail import DetailScreen
from seat_console.core.base import Source, Unavailable

LONG_REASON = ("the NVML shared library (libnvidia-ml.so.1) was not found: no NVIDIA driver is "
               "installed here, or its library is not on the loader path (inside a container: "
               "run it with the NVIDIA container toolkit, e.g. `--gpus all`)")


async def open_detail(pilot, app: SeatConsoleApp, key: str) -> list[str]:
    app.states[key].panel.focus()
    await pilot.press("enter")
    await wait_for(pilot, lambda: isinstance(app.screen, DetailScreen), f"{key} detail view")
    await pilot.pause(0.1)
    return lines_of(app)


async def close_detail(pilot, app: SeatConsoleApp) -> None:
    await pilot.press("escape")
    await wait_for(pilot, lambda: not isinstance(app.screen, DetailScreen), "detail closed")


def row_with(lines: list[str], needle: str) -> str:
    return next(x for x in lines if needle in x)


async def test_unavailable_gpu_line_is_one_line_that_ends_with_where_the_fix_is() -> None:
    class NoNvml(Source):
        name = "gpus"

        def read(self):
            return Unavailable(source="nvml", kind="no-library", reason=LONG_REASON)

    app, srcs = F.seat_app(silence_active=True)
    srcs["gpus"].read = NoNvml().read
    async with app.run_test(size=(80, 24)) as pilot:
        await all_read(pilot, app)
        status = app.states["gpus"].panel.query_one("#panel-status")
        assert status.size.height == 1
        line = row_with(lines_of(app), "unavailable (no-library)")
        assert line.rstrip().endswith("· Enter: why & fix"), line
        assert "the NVML shared library (libnv" in line and "…" in line
        assert len(line) <= 80
        detail = re.sub(r"\s+", " ", re.sub(r"[│╭╮╰╯─┃┏┓┗┛━█▀▄]", " ", "\n".join(
            await open_detail(pilot, app, "gpus"))))
        assert "toolkit, e.g. `--gpus all`)" in detail   # the whole reason on the detail view


async def test_detail_views_at_80_columns_stack_rows_and_cut_nothing() -> None:
    app, srcs = F.seat_app(silence_active=True)
    srcs["containers"].reading = F.containers(running=False)
    async with app.run_test(size=(80, 24)) as pilot:
        await all_read(pilot, app)
        timers = await open_detail(pilot, app, "timers")
        head = row_with(timers, "fleet-remediation-cycle.timer")
        assert "active/waiting" in head and "svc idle" in head
        assert "next 12:06:31Z (in 6 min 31 s) · last 11:52:00Z (8 min 00 s ago)" in \
            row_with(timers, "next 12:06:31Z")
        await close_detail(pilot, app)

        silences = await open_detail(pilot, app, "silences")
        row = row_with(silences, "5d2c9a1e")
        assert "ends in 2 h 10 min" in row and "by seat-console: hold" in row
        assert 'instance="seat-node:8000"' in row_with(silences, "  instance=")
        await close_detail(pilot, app)

        containers = await open_detail(pilot, app, "containers")
        assert "exited (137)" in row_with(containers, "resident seat-resident")
        assert "exited 3 min 00 s ago" in row_with(containers, "exited 3 min")
        assert "repo digest 127.0.0.1:5000/engine@sha256:58a8" in row_with(containers,
                                                                          "repo digest")
        await close_detail(pilot, app)

        engine = await open_detail(pilot, app, "engine")
        assert "n/a (one scrape, missing or reset)" in row_with(engine, "TTFT (")
        assert "mean 36.7 ms · p95 ~58 ms (n=2)" in row_with(engine, "TTFT (all)")
        await close_detail(pilot, app)


async def test_full_view_keeps_its_tables_when_wide() -> None:
    app, _ = F.seat_app(silence_active=True)
    async with app.run_test(size=(120, 60)) as pilot:
        await all_read(pilot, app)
        lines = lines_of(app)
        assert any("next" in x and "last" in x and "svc" in x and "state" in x for x in lines)
        assert not any("svc idle" in x for x in lines)


async def test_fit_what_if_fields_hold_their_longest_values_on_the_80x24_detail_view() -> None:
    app, _ = F.seat_app()
    async with app.run_test(size=(80, 24)) as pilot:
        await all_read(pilot, app)
        await open_detail(pilot, app, "fit")
        panel = app.screen.panel
        await wait_for(pilot, lambda: panel.comparison is not None, "budget computed")
        assert panel.has_class("-narrow-controls")
        await F.type_longest_what_ifs(pilot, panel, lambda v: row_with(lines_of(app), v))
        assert panel.whatif_error is None


def _on_node(app: SeatConsoleApp, name: str) -> SeatConsoleApp:
    """``app`` with its profile's node called ``name`` (only the header shows it)."""
    p = app.loaded.profile
    app.loaded = dataclasses.replace(app.loaded, profile=p.model_copy(
        update={"node": p.node.model_copy(update={"name": name})}))
    return app


async def test_the_header_keeps_to_one_line_at_80_columns_whatever_the_node_name() -> None:
    """A node name of 16 characters wrapped ``gpu_memory_utilization`` onto a line of its own
    at 80×24 (read-only, paused): the header shortens the term, then leaves the utilisation
    out, and says the whole in its tooltip; at 120 columns the term is whole again."""
    for name, shown in (("gpu-h200-node-07", "· TP 2 · gpu_mem_util 0.90"),
                        ("h200-prod-us-east-1-node-0042", "· TP 2")):
        app, _ = F.seat_app()
        app.readonly = True
        _on_node(app, name)
        async with app.run_test(size=(80, 24)) as pilot:
            await all_read(pilot, app)
            await pilot.press("p")
            await wait_for(pilot, lambda: app.paused, "paused")
            await pilot.pause()
            header = app.query_one("#header-text")
            head = lines_of(app)[0]
            assert header.size.height == 1, lines_of(app)[:3]
            assert f"node {name} {shown}" in head and "READ-ONLY" in head and "PAUSED" in head
            assert "gpu_memory_utilization 0.90" in str(header.tooltip)
            await pilot.resize_terminal(120, 24)
            await pilot.pause()
            assert header.size.height == 1
            assert "· gpu_memory_utilization 0.90" in lines_of(app)[0]


@pytest.mark.parametrize("size", [(80, 24), (120, 40), (200, 50)], ids=["80", "120", "200"])
async def test_fit_detail_keeps_a_rule_between_resident_and_candidate(size) -> None:
    """The fit detail view's two columns (resident, candidate) ran together at 80 and 120
    columns ("… gpu_memory_utilization 0.32-0.33: …", one blank between them): every row
    both show now has " │ " between them."""
    app, _ = F.seat_app()
    async with app.run_test(size=size) as pilot:
        await all_read(pilot, app)
        await open_detail(pilot, app, "fit")
        panel = app.screen.panel
        await wait_for(pilot, lambda: panel.comparison is not None, "budget computed")
        await pilot.pause()
        lines = lines_of(app)
        left = panel.query_one("#fit-resident").region
        right = panel.query_one("#fit-candidate").region
        view = app.screen.query_one("#detail-scroll").content_region
        rows = range(max(left.y, right.y, view.y),
                     min(left.bottom, right.bottom, view.bottom))
        assert len(rows) >= 5, (left, right, view)
        assert right.x == left.right
        for y in rows:
            assert lines[y][left.right - 2:left.right + 1] == " │ ", lines[y]
