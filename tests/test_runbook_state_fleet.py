"""The fleet row's runbook stage (issue 30): ``seat_runbook_next_info`` answered in the
``runbook`` part of the state query → :attr:`FleetRow.stage`, shown in the Probe column when
no probe or unfinished runbook is, and the fast path still equal to the slow one."""

from __future__ import annotations

from seat_console.fleet import rows as rows_mod
from seat_console.fleet.rows import build_rows, cells, queries
from tests.test_fleet_rows import NOW, _got, _seat, _vec


def _answers() -> dict:
    got = _got({"a:1": _seat(), "b:1": _seat(), "c:1": _seat(), "d:1": _seat()})
    got["runbook"] = _vec([
        ({"instance": "a:1", "stage": "backport", "status": "todo"}, 1),
        ({"instance": "b:1", "stage": "hold", "status": "failed"}, 1),
        ({"instance": "d:1", "runbook": "hold", "step": "silence seat"}, 1),
        ({"instance": "d:1", "stage": "hold", "status": "failed"}, 1),
    ])
    return got


def test_the_query_asks_for_the_next_stage() -> None:
    assert "seat_runbook_next_info" in queries(600, 15)["runbook"]


def test_stage_decoded_and_shown() -> None:
    rows = {r.instance: r for r in build_rows(_answers(), NOW, 15.0)}
    assert rows["a:1"].stage == "backport" and rows["b:1"].stage == "hold failed"
    assert rows["c:1"].stage is None
    assert rows["d:1"].runbook == "hold:silence seat" and rows["d:1"].stage == "hold failed"
    assert cells(rows["a:1"], NOW)[-1] == "next backport"
    assert cells(rows["d:1"], NOW)[-1] == "hold:silence seat"   # the run in progress first
    assert rows["a:1"].to_json()["stage"] == "backport"


def test_fast_path_equal_with_stages() -> None:
    got = _answers()
    fast = build_rows(got, NOW, 15.0, numbers=False)
    rows_mod._FAST_PATH = False
    try:
        slow = build_rows(got, NOW, 15.0, numbers=False)
    finally:
        rows_mod._FAST_PATH = True
    assert fast == slow
    assert {r.instance: r.stage for r in fast}["a:1"] == "backport"


def test_real_prometheus_answers_the_stage_beside_the_runbook(tmp_path) -> None:
    """The merged ``state`` query on a real Prometheus over the simulator: each seat with a
    probe in progress sends ``seat_runbook_next_info{stage="probe"}`` beside its
    ``seat_runbook_active``; the row has both, the others neither."""
    import pytest
    from prom_fixtures import start_fleet, wait_until

    from seat_console.fleet.promapi import PromClient
    from seat_console.fleet.rows import Fleet

    if not __import__("pathlib").Path("/usr/bin/prometheus").exists():
        pytest.skip("no /usr/bin/prometheus")
    f = start_fleet(tmp_path, 10)
    try:
        fleet = Fleet(PromClient(f.url, timeout_s=10), scrape_interval_s=1.0)
        want = {s.instance for s in f.plan if s.phase and not s.stale}
        assert want, "the simulator's plan has no seat with a probe in progress"

        def ok():  # noqa: ANN202
            r = fleet.refresh()
            got = {row.instance for row in r.rows if row.stage == "probe"} if r.ok else None
            return r if got == want else None

        r = wait_until(ok, 60, "rows with the next stage", every_s=1.0)
        for row in r.rows:
            assert (row.runbook is not None) == (row.stage is not None), row
    finally:
        f.stop()
