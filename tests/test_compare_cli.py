"""compare's CLI without changing the node: the dry-run plan, and usage errors."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from seat_console.cli import main



@pytest.fixture
def state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("SEAT_CONSOLE_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.setenv("SEAT_CONSOLE_DATA_DIR", str(tmp_path / "data"))
    return tmp_path


def test_dry_run_lists_legs_pairs_and_plan_and_changes_nothing(state: Path, lab,
                                                               capsys: pytest.CaptureFixture):
    # the plan reads only the journal (is a hold active?): the lab's profile (so: marked lab,
    # through the fixture), not its node
    assert main(["--profile", str(lab.profile_path), "compare", "--bracket", "ABBA",
                 "--rounds", "2", "--dry-run", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert [x["name"] for x in doc["legs"]] == ["A1", "B2", "B3", "A4", "A5", "B6", "B7", "A8"]
    assert doc["pairs"] == [["A1", "B2"], ["A4", "B3"], ["A5", "B6"], ["A8", "B7"]]
    steps = [line["step"] for line in doc["plan"]["steps"]]
    assert steps[0] == "hold" and steps[-2:] == ["restore seat", "release hold"]
    assert steps.count("leg B2: seat") == 1 and len(steps) == 1 + 2 * 8 + 2
    assert not (state / "data" / "comparisons").exists()  # nothing written
    assert "cmp-<time>-<id>" in doc["folder"] and "cmp-2" not in json.dumps(doc)


@pytest.mark.parametrize("bracket", ["ABBA", "AB", "AABB"])
def test_without_rounds_the_compare_runs_the_fewest_that_can_reach_a_claim(
        state: Path, lab, capsys: pytest.CaptureFixture, bracket: str) -> None:
    """The CLI's default design is the runbook screen's (the on-call trial: a plain
    ``compare`` ran one round, which can only read INCONCLUSIVE, while ``c`` offered 3):
    ``claim_rounds`` rounds, and its plan says it can reach a claim; ``--rounds 1`` says not."""
    from seat_console.actions.compare import claim_rounds

    need = claim_rounds(bracket)
    assert need > 1
    assert main(["--profile", str(lab.profile_path), "compare", "--bracket", bracket,
                 "--dry-run", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert len(doc["legs"]) == need * len(bracket)
    assert doc["cost"]["can_claim"] is True, doc["cost"]
    assert main(["--profile", str(lab.profile_path), "compare", "--bracket", bracket,
                 "--rounds", "1", "--dry-run", "--json"]) == 0
    one = json.loads(capsys.readouterr().out)
    assert len(one["legs"]) == len(bracket) and one["cost"]["can_claim"] is False


@pytest.mark.parametrize("args, code, text", [
    (["--bracket", "ABB"], 2, "cannot all pair"),
    (["--rounds", "0"], 2, "--rounds 0"),
    (["--canary-runs", "2"], 2, "pass^3 needs 3 runs"),
    (["--force"], 2, "--force needs --reason"),
])
def test_usage_errors(state: Path, capsys: pytest.CaptureFixture, args: list[str], code: int,
                      text: str) -> None:
    assert main(["compare", "--dry-run", *args]) == code
    assert text in capsys.readouterr().err


def test_no_candidate_is_refused(state: Path, tmp_path: Path, capsys: pytest.CaptureFixture):
    # the embedded default profile has no [swap]: nothing to compare against
    assert main(["compare", "--dry-run"]) == 5
    assert "no [swap] section" in capsys.readouterr().err


def test_a_killed_compare_is_rebuilt_for_recover_undo(state: Path, lab) -> None:
    """A compare killed after its B2 swap began: `recover` offers undo, and the rebuilt runbook
    (same run ID, inputs, facts) undoes the swap step (resident back) and the hold it placed."""
    from seat_console.actions import compare as cmp_mod
    from seat_console.actions import recover
    from seat_console.actions.journal import Journal
    from seat_console.node.context import NodeContext
    from seat_console.core.profile import load_profile

    loaded = load_profile(str(lab.profile_path))
    journal = Journal()
    try:
        rid, bid = "compare-test-1", "cmp-20261201T090000Z-abcdef"
        inputs = {"bracket_id": bid, "order": "ABBA", "rounds": 1, "force": False, "reason": ""}
        facts = {"bracket_id": bid, "hold_placed": True, "legs": ["legs/1-A"]}
        for kind, step in (("start", ""), ("begin", "hold"), ("verify", "hold"),
                           ("begin", "leg A1: seat"), ("verify", "leg A1: seat"),
                           ("begin", "leg A1: measure"), ("verify", "leg A1: measure"),
                           ("begin", "leg B2: seat")):
            journal.append(run_id=rid, runbook="compare", kind=kind, step=step, inputs=inputs,
                           facts=facts)
        (rows,) = [r for r in journal.unfinished() if r[0].run_id == rid]
        assert recover.describe(rows)["can"] == ["undo"]
        rb = recover.build_for(NodeContext.from_profile(loaded), journal, rows)
        assert rb.name == "compare" and rb.run_id == rid
        assert rb.ctx.facts["hold_placed"] is True and rb.ctx.inputs["bracket_id"] == bid
        by_name = {s.name: s for s in rb.steps}
        assert by_name["leg B2: seat"].undo is not None  # a swap: undone by a restore
        assert by_name["hold"].undo is not None  # releases the hold the compare placed
        assert by_name["leg A1: seat"].undo is None  # a restart leaves nothing to put back
        with pytest.raises(ValueError, match="not a compare run"):
            cmp_mod.rebuild(NodeContext.from_profile(loaded), journal,
                            [dataclasses.replace(rows[0], runbook="swap")])
    finally:
        journal.close()


def test_a_measurement_that_raises_is_kept_as_a_failed_leg(state: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    from seat_console.actions import compare as cmp_mod
    from seat_console.actions.runbook import RunContext, StepError
    from seat_console.evidence.bracket import plan_bracket

    def boom(*a: object, **k: object) -> dict:
        raise RuntimeError("the data dir filled up")

    monkeypatch.setattr(cmp_mod, "measure_leg", boom)
    leg = plan_bracket("ABBA")[1]
    cmp_dir = state / "cmp"
    step = cmp_mod._measure_step(None, leg, "cmp-x", cmp_dir,  # type: ignore[arg-type]
                                 cmp_mod.CompareOptions())
    ctx = RunContext(run_id="r", runbook="compare", inputs={}, facts={})
    with pytest.raises(StepError, match="leg B2: the measurement failed .*kept as failed"):
        step.apply(ctx)
    doc = json.loads((cmp_dir / "legs" / "2-B" / "leg.json").read_text())
    assert doc["status"] == "failed" and "the data dir filled up" in doc["reason"]
    assert ctx.facts["legs"] == ["legs/2-B"]


def test_canary_seeds_are_distinct_per_pair_and_shared_within_a_pair() -> None:
    from seat_console.actions.compare import CompareOptions, canary_first_seed
    from seat_console.evidence.bracket import plan_bracket

    opts = CompareOptions(order="ABBA", rounds=2, canary_runs=3)
    seeds = {leg.name: canary_first_seed(leg, opts) for leg in plan_bracket("ABBA", 2)}
    assert seeds == {"A1": 0, "B2": 0, "A4": 3, "B3": 3, "A5": 6, "B6": 6, "A8": 9, "B7": 9}


@pytest.mark.parametrize("status, outcome, code", [
    ("complete", "done", 0), ("incomplete", "done", 7), ("disrupted", "done", 7),
    ("running", "done", 7), ("failed", "undone", 1), ("failed", "partial", 4),
])
def test_a_bracket_that_is_not_complete_exits_7_and_never_says_done(
        tmp_path: Path, status: str, outcome: str, code: int) -> None:
    from seat_console.actions.runbook import Result
    from seat_console.commands.compare_cmd import bracket_outcome

    (tmp_path / "compare.json").write_text(json.dumps({
        "status": status, "reason": "legs not complete: 3-B disrupted (see each leg.json)"}))
    res = Result(run_id="r-1", runbook="compare", outcome=outcome, steps=())  # type: ignore
    got, headline = bracket_outcome(res, tmp_path)
    assert got == code
    first = headline.splitlines()[0]
    if code == 7:
        assert ": done" not in first and f"bracket {status} — NOT complete" in first
        assert "3-B disrupted" in first
    elif code == 0:
        assert first.endswith(": done")


def test_an_unreadable_compare_json_is_not_complete(tmp_path: Path) -> None:
    from seat_console.actions.runbook import Result
    from seat_console.commands.compare_cmd import bracket_outcome

    res = Result(run_id="r-1", runbook="compare", outcome="done", steps=())
    code, headline = bracket_outcome(res, tmp_path)
    assert code == 7 and "compare.json unreadable" in headline


def test_backport_base_is_read_from_the_image_label() -> None:
    from types import SimpleNamespace

    from seat_console.actions.compare import backport_base

    def box(labels: object) -> object:
        return SimpleNamespace(image=SimpleNamespace(attrs={"Config": {"Labels": labels}}))

    ref = "127.0.0.1:15000/engine@sha256:" + "1" * 64
    assert backport_base(box({"org.seat-console.backport.base": ref})) == ref
    assert backport_base(box(None)) is None and backport_base(box({})) is None

    class Gone:
        @property
        def image(self) -> object:
            raise RuntimeError("No such image")

    assert backport_base(Gone()) is None
