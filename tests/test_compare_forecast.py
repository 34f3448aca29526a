"""compare's cost up front (issue 30, item 3): rounds, minutes from this node's measured swap,
restore, restart and leg-measurement times in the journal ("no measurement yet" without them),
and whether the design can reach a claim under the calibrated rule."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from seat_console.actions import compare as cmp_mod
from seat_console.actions.journal import Journal
from seat_console.commands.compare_cmd import render_dry_run

T = datetime(2026, 12, 4, 10, 0, tzinfo=timezone.utc)


def _run(j: Journal, runbook: str, run_id: str, start: datetime, secs: float,
         outcome: str = "done") -> None:
    j.append(run_id=run_id, runbook=runbook, kind="start", outcome="started", at=start)
    j.append(run_id=run_id, runbook=runbook, kind="end", outcome=outcome,
             at=start + timedelta(seconds=secs))


def _step(j: Journal, run_id: str, step: str, text: str, start: datetime, secs: float) -> None:
    j.append(run_id=run_id, runbook="compare", kind="begin", step=step, outcome=text, at=start)
    j.append(run_id=run_id, runbook="compare", kind="verify", step=step, outcome="ok",
             at=start + timedelta(seconds=secs))


@pytest.fixture
def journal(tmp_path: Path) -> Journal:
    j = Journal(path=tmp_path / "journal.sqlite3")
    yield j
    j.close()


def test_no_history_gives_no_minutes_never_a_made_up_figure(journal: Journal,
                                                            tmp_path: Path) -> None:
    fc = cmp_mod.forecast(journal, "ABBA", 1, data_root=tmp_path / "data")
    assert fc["minutes"] is None
    assert set(fc["missing"]) == {"restart", "measure", "swap", "restore"}
    assert "no measurement yet" in fc["text"] and "min on this node" not in fc["text"]
    assert not fc["can_claim"] and fc["rounds_needed"] == 3
    assert "needs ≥ 3 rounds (6 pairs)" in fc["text"]
    json.dumps(fc, allow_nan=False)


def test_history_gives_minutes_from_this_nodes_medians(journal: Journal, tmp_path: Path) -> None:
    _run(journal, "swap", "swap-1", T, 60)
    _run(journal, "swap", "swap-2", T + timedelta(hours=1), 80)
    _run(journal, "swap", "swap-3", T + timedelta(hours=2), 9_999, outcome="undone")  # not done
    _run(journal, "restore", "restore-1", T, 40)
    _run(journal, "hold", "hold-1", T, 2)
    _run(journal, "release", "release-1", T, 4)
    _step(journal, "compare-1", "leg A1: seat", "leg A1: restart the resident r (fresh)", T, 30)
    _step(journal, "compare-1", "leg B2: seat", "leg B2: swap: stop the resident", T, 70)
    for k in range(4):
        _step(journal, "compare-1", f"leg X{k}: measure", "probe", T, 120)
    fc = cmp_mod.forecast(journal, "ABBA", 3, hold_active=False, data_root=tmp_path / "data")
    # per round ABBA: restart 30 (A1 first; A after A later) + swap 70 + restart 30 + restore 40,
    # and 4 measurements of 120; round 1 starts with a restart, rounds 2-3 with a restart too
    # (A after A): 3 × (30 + 70 + 30 + 40 + 4 × 120) + hold 2 + release 4
    assert fc["parts"]["swap"] == {"median_s": 70.0, "measurements": 2}
    assert fc["minutes"] == pytest.approx((3 * (30 + 70 + 30 + 40 + 480) + 6) / 60)
    assert fc["missing"] == [] and fc["can_claim"] and fc["pairs"] == 6
    assert f"≈ {fc['minutes']:.0f} min on this node" in fc["text"]
    assert fc["mde_ratio"] is None and "unknown until a comparison" in fc["mde_text"]
    # an active hold is used, not placed: hold and release are not part of the cost
    used = cmp_mod.forecast(journal, "ABBA", 3, hold_active=True, data_root=tmp_path / "data")
    assert used["minutes"] == pytest.approx(fc["minutes"] - 6 / 60)


def test_the_probe_alone_is_said_when_no_leg_was_measured(journal: Journal,
                                                          tmp_path: Path) -> None:
    journal.append(run_id="p1", runbook="probe", kind="probe", step="start", at=T)
    journal.append(run_id="p1", runbook="probe", kind="probe", step="end",
                   at=T + timedelta(minutes=3))
    fc = cmp_mod.forecast(journal, "ABBA", 1, data_root=tmp_path / "data")
    assert fc["minutes"] is None and "a probe alone took 3.0 min" in fc["text"]
    # a probe of seconds is said in seconds (a QA walk read "a probe alone took 0.0 min")
    journal.append(run_id="p2", runbook="probe", kind="probe", step="start", at=T)
    journal.append(run_id="p2", runbook="probe", kind="probe", step="end",
                   at=T + timedelta(seconds=1.5))
    journal.append(run_id="p3", runbook="probe", kind="probe", step="start", at=T)
    journal.append(run_id="p3", runbook="probe", kind="probe", step="end",
                   at=T + timedelta(seconds=1.5))
    fc = cmp_mod.forecast(journal, "ABBA", 1, data_root=tmp_path / "data")
    assert "a probe alone took 1.5 s" in fc["text"], fc["text"]


def test_the_minimum_detectable_effect_uses_the_nodes_measured_spread(
        journal: Journal, tmp_path: Path) -> None:
    import sys
    sys.path.insert(0, str(Path(__file__).parent))
    from test_evidence_decision import bracket

    data = tmp_path / "data"
    bracket(data.parent / "x", rounds=1, speed_b=1.0)     # writes x/comparisons/cmp-1
    (data).mkdir()
    (data.parent / "x" / "comparisons").rename(data / "comparisons")
    spread = cmp_mod.leg_spread(data)
    assert spread is not None and spread["pairs"] == 2
    fc = cmp_mod.forecast(journal, "ABBA", 3, data_root=data)
    assert fc["mde_ratio"] is not None and fc["mde_ratio"] >= 1.0
    assert "at the spread of cmp-1" in fc["mde_text"]


def test_the_dry_run_text_and_json_carry_the_cost(journal: Journal, tmp_path: Path) -> None:
    from seat_console.commands.compare_cmd import _plan_json
    from seat_console.evidence.bracket import pairs, plan_bracket

    class _Plan:
        def text_lines(self) -> list[str]:
            return ["• hold"]

        def to_json(self) -> dict:
            return {"ok": True}

    legs = plan_bracket("ABBA", 1)
    fc = cmp_mod.forecast(journal, "ABBA", 1, data_root=tmp_path / "data")
    text = render_dry_run("compare ABBA x1", legs, pairs(legs), _Plan(), fc)
    assert text.splitlines()[2].startswith("  cost: 4 legs (1 round(s) of ABBA, 2 pairs): no "
                                           "measurement yet")
    assert _plan_json(legs, pairs(legs), _Plan(), fc)["cost"]["rounds_needed"] == 3
