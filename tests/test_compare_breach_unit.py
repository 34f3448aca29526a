"""Compare's breach stop and the exit code of a breached bracket, at the step seam (no lab):
issue 31's mutation survivors "after a breach stop, a candidate holding the seat is not
restored" and "a breached bracket still exits 0" were on lines only lab tests reached."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest
from test_actions_seam import SWAP_PROFILE

from seat_console.actions import compare as cmp_mod
from seat_console.actions.runbook import Check, RunContext, Runbook, Step
from seat_console.commands import compare_cmd
from seat_console.core.profile import load_profile
from seat_console.evidence.bracket import plan_bracket
from seat_console.node.context import NodeContext


class NoNode:
    """The node seam: nothing here may reach it (a step that does fails the test)."""

    where, _node_path = "fake", "/usr/bin"

    def run(self, *a, **kw):  # pragma: no cover - must not be reached
        raise AssertionError(f"the node was reached: {a}")

    def close(self) -> None:
        pass


@pytest.fixture
def restore_step(tmp_path: Path, monkeypatch):
    f = tmp_path / "p.toml"
    f.write_text(SWAP_PROFILE)
    loaded = load_profile(f)
    nctx = NodeContext(loaded, transport=NoNode())
    rb, _ = cmp_mod.build_compare(nctx, journal=None, options=cmp_mod.CompareOptions(
        data_root=tmp_path))
    step = next(s for s in rb.steps if s.name == "restore seat")
    holder: dict[str, str | None] = {"name": None}
    monkeypatch.setattr(cmp_mod, "_seat_container",
                        lambda nctx: SimpleNamespace(name=holder["name"])
                        if holder["name"] else None)
    return step, holder, loaded.profile


def test_after_a_breach_stop_a_candidate_in_the_seat_is_restored(restore_step) -> None:
    step, holder, profile = restore_step
    ctx = RunContext("r", "compare", {}, {cmp_mod.BREACH_STOP_FACT: "B2"})
    holder["name"] = profile.swap.container               # the candidate holds the seat
    c = step.check(ctx)
    assert c.go and "restore the resident" in c.text, c.text
    holder["name"] = profile.resident.container          # the resident already does
    c = step.check(ctx)
    assert not c.go and "already holds the seat" in c.text


def test_without_a_breach_the_last_leg_decides(restore_step) -> None:
    step, holder, profile = restore_step
    holder["name"] = profile.swap.container
    # ABBA ends on an A leg: the resident is in the seat, nothing to restore
    assert not step.check(RunContext("r", "compare", {}, {})).go


def _fake_compare(tmp_path: Path, facts: dict, measured: int) -> tuple[Runbook, Path]:
    """A compare runbook whose one step measures the first ``measured`` legs of ABBA (each
    leg.json complete) and sets ``facts``: run_compare's own bookkeeping is under test."""
    cmp_dir = tmp_path / "cmp"

    def apply(ctx: RunContext) -> str:
        names = [f"legs/{leg.dirname}" for leg in plan_bracket("ABBA", 1)][:measured]
        for n in names:
            (cmp_dir / n).mkdir(parents=True)
            (cmp_dir / n / "leg.json").write_text(json.dumps({"status": "complete"}))
        ctx.facts["legs"] = names
        ctx.facts.update(facts)
        return "measured"

    rb = Runbook("compare", [Step("A1", lambda ctx: Check(True, "A1"), apply,
                                  lambda ctx: "ok")], journal=None)
    return rb, cmp_dir


def test_a_breached_bracket_is_not_complete_and_does_not_exit_0(tmp_path: Path) -> None:
    opts = cmp_mod.CompareOptions(order="ABBA", rounds=1, data_root=tmp_path)
    rb, cmp_dir = _fake_compare(tmp_path, {cmp_mod.BREACH_STOP_FACT: "2-B"}, measured=1)
    res = cmp_mod.run_compare(rb, cmp_dir, opts)
    doc = json.loads((cmp_dir / "compare.json").read_text())
    assert res.ok and doc["status"] == "incomplete", doc
    assert "2-B, 3-B, 4-A not run" in doc["reason"] and "breach" in doc["reason"], doc["reason"]
    code, headline = compare_cmd.bracket_outcome(res, cmp_dir)
    assert code == compare_cmd.EXIT_NOT_COMPLETE != 0 and "NOT complete" in headline


def test_the_control_a_whole_bracket_is_complete_and_exits_0(tmp_path: Path) -> None:
    opts = cmp_mod.CompareOptions(order="ABBA", rounds=1, data_root=tmp_path)
    rb, cmp_dir = _fake_compare(tmp_path, {}, measured=4)
    res = cmp_mod.run_compare(rb, cmp_dir, opts)
    assert json.loads((cmp_dir / "compare.json").read_text())["status"] == "complete"
    assert compare_cmd.bracket_outcome(res, cmp_dir)[0] == 0
