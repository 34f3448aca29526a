"""The fleet rows from the LAB's real Prometheus (127.0.0.1:19090): the lab's own seat (its vLLM
and exporter jobs relabelled to one ``instance``, the seat's endpoint ``127.0.0.1:18000``, by ``scripts/lab.py``) listed
beside the fleet simulator's 1,000 seats (127.0.0.1:19470, ``honor_labels``), trouble first,
through the lab profile's own ``[fleet]`` section — what ``seat-console fleet`` shows there."""

from __future__ import annotations

import pytest
from prom_fixtures import fleet_sim, wait_until
from test_fleet_prometheus import expected_state

from seat_console.core.profile import load_profile
from seat_console.fleet.promapi import PromClient
from seat_console.fleet.rows import RANK
from seat_console.fleet.setup import make_fleet

LAB_SEATS = 1000
"""``scripts/lab.py``'s ``FLEET_SIM_SEATS`` (seed 0, no stale seats)."""


def test_lab_seat_and_the_simulators_1000_in_trouble_order(lab) -> None:
    fleet = make_fleet(load_profile(lab.profile_path))
    fleet.prom.close()   # a generous per-query limit: the lab's Prometheus on a loaded 2-core box
    fleet.prom = PromClient(fleet.prom.url, timeout_s=60)
    (entry,) = [e for e in fleet.inventory if e.node == "seat-lab"]
    want = {s.instance: expected_state(s) for s in fleet_sim().plan(LAB_SEATS, 0, 0)}

    def settled():
        r = fleet.refresh()
        if not r.ok:
            return None
        by = {row.instance: row for row in r.rows}
        lab_row = by.get(entry.instance)
        if lab_row is None or lab_row.state in ("stale", "no-series", "unknown"):
            return None
        return r if all(by.get(i) and by[i].state == s for i, s in want.items()) else None

    try:
        reading = wait_until(settled, 300, "the lab seat and the simulator's seats", every_s=2.0)
    finally:
        fleet.prom.close()
    rows = reading.rows
    assert len(rows) == LAB_SEATS + 1, [r.instance for r in rows if r.instance not in want]
    assert [r.rank for r in rows] == sorted(RANK[r.state] for r in rows)
    states = [r.state for r in rows]
    assert states.index("without-lease") < states.index("down") < states.index("held") \
        < states.index("healthy")
    (lab_row,) = [r for r in rows if r.instance == entry.instance]
    # one seat across the jobs: the exporter's identity and hold beside vLLM's own numbers
    assert lab_row.node == "seat-lab" and lab_row.in_inventory
    assert lab_row.engine_up is not None and lab_row.hold is not None
    if lab_row.engine_up:
        assert lab_row.running is not None and lab_row.kv_usage is not None, lab_row
    assert lab_row.gpus == 0   # no dcgm-exporter in the lab: "no DCGM", not 0 GiB
    assert lab_row.state in ("healthy", "held", "down", "without-lease")


pytestmark = pytest.mark.prometheus
