"""Promote and its undo at the step seam (issue 30, item 6), without the lab.

The docker engine is the in-process fake of :mod:`test_actions_seam` (containers as dicts, the
SDK's own ``NotFound``); the journal is a real one in ``tmp_path``; the seat endpoint's HTTP
answers (``/health``, ``/v1/models``, a completion, waiting for serving) are stubbed, since they
are HTTP to the seat, not the node seam. ``tests/test_promote_lab.py`` runs the same against the
lab's real engine.

Refusals: no decision, KEEP, INCONCLUSIVE, PROMOTE-ABLE for another image, the resident in the
seat, no hold, ``--force`` without ``--reason``; then apply / verify (rename, seat-state file,
profile sides), a failure part-way undone, restore seeing nothing to restore, the undo, and
recover's undo after a kill inside a step.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from test_actions_seam import FakeEngine, FakeNodeContext

from seat_console.actions import promote as pm
from seat_console.actions import recover
from seat_console.actions import swap as swap_mod
from seat_console.actions.decide import record_decision
from seat_console.actions.journal import Journal
from seat_console.actions.runbook import StepError
from seat_console.core.profile import LoadedProfile, load_profile
from seat_console.core.seat_file import prev_path, read_seat_file

RES_ID, CAND_ID = "a1" * 32, "b2" * 32
RES_IMG, CAND_IMG = "sha256:" + "a" * 64, "sha256:" + "c" * 64
PROFILE = ('[node]\nname = "seat-node"\n'
           '# the resident: the model in the seat\n'
           '[resident]\nname = "old-model"\ncontainer = "seat-resident"\nimage = "img:0"\n'
           '[candidate]\nname = "new-model"\nimage = "img:1"\n'
           '[[silence.matchers]]\nname = "instance"\nvalue = "n:8000"\n'
           '[swap]\ncontainer = "seat-probe"\nimage = "img:1"\ncommand = ["--model", "/m"]\n'
           'served_model_name = "seat-model"\ngpus = []\n')
RESIDENT = {"id": RES_ID, "name": "seat-resident", "image_id": RES_IMG, "image_ref": "img:0",
            "repo_digests": [], "entrypoint": None, "cmd": ["--model", "/r"],
            "env_names": ["HF_TOKEN"], "stop_timeout_s": 1, "started_at": None,
            "models": ["seat-model"]}


class Seat:
    """A node with the candidate in the seat after a journaled swap, a hold, and a seat
    endpoint that answers (stubbed); ``decide(...)`` journals a decision row."""

    def __init__(self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        self.tmp = tmp_path
        self.profile_path = tmp_path / "profile.toml"
        self.profile_path.write_text(PROFILE)
        self.engine = FakeEngine()
        self.res = self.engine.add(RES_ID, "seat-resident", RES_IMG, running=False)
        self.cand = self.engine.add(CAND_ID, "seat-probe", CAND_IMG, running=True)
        self.cand.attrs["Config"]["Env"] = ["HF_TOKEN=hf_secret_value", "VLLM_X=1"]
        self.cand.attrs["Mounts"] = [{"Source": "/models", "Destination": "/m", "RW": False}]
        self.nctx = FakeNodeContext(load_profile(self.profile_path), self.engine)
        self.seat_path = tmp_path / "state" / "seat.json"
        monkeypatch.setenv("SEAT_CONSOLE_STATE_DIR", str(tmp_path / "state"))
        self.journal = Journal(tmp_path / "state" / "journal.sqlite3")
        self.runs = tmp_path / "runs"
        self.serving = True
        self.completions: list[str] = []
        monkeypatch.setattr(swap_mod, "_health", lambda ep, timeout_s=3.0:
                            200 if self.serving else None)
        monkeypatch.setattr(swap_mod, "_models", lambda ep, timeout_s=5.0:
                            ["seat-model"] if self.serving else None)
        monkeypatch.setattr(swap_mod, "completion", self._completion)
        monkeypatch.setattr(swap_mod, "wait_serving", lambda c, *a, **k: f"{c.name} serving")
        self.hold()
        self.journal.append(run_id="swap-1", runbook="swap", kind="start")
        self.journal.append(run_id="swap-1", runbook="swap", kind="end", outcome="done",
                            facts={"resident": RESIDENT, "probe_id": CAND_ID})

    def _completion(self, endpoint: str, model: str, timeout_s: float = 120.0) -> str:
        self.completions.append(model)
        return "one completion answered: 4 token(s)"

    def hold(self, minutes: int = 60) -> None:
        exp = (datetime.now(UTC) + timedelta(minutes=minutes)).isoformat().replace(
            "+00:00", "Z")
        h = {"hold_id": f"seat-hold-{minutes}", "lease": f"seat-hold-{minutes}-lease",
             "stopped": ["a.timer"], "silence_id": None, "expires_at": exp,
             "timers_before": {}}
        self.hold_facts = h
        for kind, outcome in (("start", ""), ("end", "done")):
            self.journal.append(run_id=f"hold-{minutes}", runbook="hold", kind=kind,
                                outcome=outcome, facts={"hold": h})

    def release(self) -> None:
        """Journal the hold's release, as `seat-console release` ends it."""
        for kind, outcome in (("start", ""), ("end", "done")):
            self.journal.append(run_id="release-1", runbook="release", kind=kind,
                                outcome=outcome, facts={"hold": self.hold_facts})

    def decide(self, decision: str, *, image: str | None = CAND_IMG, run: bool = True) -> None:
        facts: dict[str, Any] = {"decision": decision, "bracket_id": "b-1", "runs": [],
                                 "report_sha256": "0" * 64, "questions": [],
                                 "needs": "3 rounds ≈ 14 min on this node"}
        if run and image is not None:     # the decision cites a probe run of that image
            d = self.runs / f"run-{image[7:15]}"
            d.mkdir(parents=True, exist_ok=True)
            (d / "summary.json").write_text(json.dumps({"status": "complete", "identity": {
                "container": {"role": "probe", "name": "seat-probe", "image_id": image}}}))
            facts["runs"] = [d.name]
        record_decision(self.journal, facts)

    def promote(self, **kw: Any) -> Any:
        return pm.build_promote(self.nctx, self.journal, runs_root=self.runs,
                                seat_path=self.seat_path, **kw)

    def undo(self) -> Any:
        return pm.build_promote_undo(self.nctx, self.journal, seat_path=self.seat_path)


@pytest.fixture
def seat(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Seat:
    return Seat(tmp_path, monkeypatch)


def _refusal(rb: Any) -> str:
    plan = rb.plan()
    assert not plan.ok
    return next(p.error for p in plan.lines if p.error)


# -- refusals: each names the state and the fix; nothing changes -------------------------------
@pytest.mark.parametrize("decision, words", [
    (None, ["no decision in the journal", "seat-console decide", "--force --reason"]),
    ("KEEP", ["is KEEP", "seat-console restore"]),
    ("INCONCLUSIVE", ["is INCONCLUSIVE", "3 rounds ≈ 14 min", "seat-console compare"]),
])
def test_refused_without_a_promote_able_decision(seat: Seat, decision, words) -> None:
    if decision:
        seat.decide(decision)
    rb = seat.promote()
    err = _refusal(rb)
    for w in words:
        assert w in err, err
    res = rb.run()
    assert res.outcome == "refused"
    assert seat.engine.calls == [] and not seat.seat_path.exists()
    assert seat.profile_path.read_text() == PROFILE
    ends = [r for r in seat.journal.entries() if r.runbook == "promote" and r.kind == "end"]
    assert ends[-1].outcome == "refused"


def test_refused_when_the_decision_is_for_another_image(seat: Seat) -> None:
    seat.decide("PROMOTE-ABLE", image="sha256:" + "e" * 64)
    err = _refusal(seat.promote())
    assert "PROMOTE-ABLE for sha256:eeee" in err and "not for the candidate in the seat" in err


def test_the_newest_decision_counts(seat: Seat) -> None:
    seat.decide("PROMOTE-ABLE")
    seat.decide("KEEP")
    assert "is KEEP" in _refusal(seat.promote())


def test_refused_while_the_resident_holds_the_seat(seat: Seat) -> None:
    seat.decide("PROMOTE-ABLE")
    seat.res.attrs["State"]["Running"] = True
    seat.cand.attrs["State"]["Running"] = False
    err = _refusal(seat.promote())
    assert "the resident seat-resident holds the seat" in err and "nothing to promote" in err
    assert "seat-console swap" in err


def test_the_dry_run_lists_every_refusal_and_says_the_plan_once(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A new user's `promote --dry-run` (issue 30 follow-up, item 1): no hold, the resident in
    the seat, no decision — each refusal on its own line with its fix, then what promote would
    do said once (no repeated "not planned" lines)."""
    s = Seat(tmp_path, monkeypatch)
    s.release()
    s.res.attrs["State"]["Running"] = True
    s.cand.attrs["State"]["Running"] = False
    plan = s.promote().plan()
    assert not plan.ok
    refusals = plan.refusals
    assert len(refusals) == 3, refusals
    assert "no active hold" in refusals[0] and "seat-console hold" in refusals[0]
    # the hold's sentence says nothing of who holds the seat (it said "the swap that put the
    # candidate in the seat needed one too" above "the resident … holds the seat": the trial)
    assert "candidate in the seat" not in refusals[0], refusals[0]
    assert "the resident seat-resident holds the seat" in refusals[1]
    assert "seat-console swap" in refusals[1]
    assert "no decision in the journal" in refusals[2] and "seat-console decide" in refusals[2]
    text = plan.text_lines()
    assert sum(line.startswith("✗ check seat:") for line in text) == 3
    once = [line for line in text if "once the 3 refusals above are fixed" in line]
    assert len(once) == 1, text
    after = text[text.index(once[0]) + 1:]
    assert len(after) == 4 and len(set(after)) == 4, after
    assert "rename seat-probe to seat-resident-promoted-<UTC>" in after[0]
    assert not any("not planned" in line for line in text)
    doc = plan.to_json()
    assert doc["refusals"] == list(refusals)
    assert [x["after_refusal"] for x in doc["steps"][3:]] == [True] * 4
    res = s.promote().run()   # the run refuses with every refusal, nothing changed
    assert res.outcome == "refused" and all(r in res.error for r in refusals)
    assert s.engine.calls == []


def test_refused_without_a_hold(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    s = Seat(tmp_path, monkeypatch)
    s.release()
    s.decide("PROMOTE-ABLE")
    err = _refusal(s.promote())
    assert "no active hold" in err and "seat-console hold" in err


def test_force_needs_a_reason_and_a_forced_promote_is_recorded(seat: Seat) -> None:
    assert "--force needs --reason" in _refusal(seat.promote(force=True, reason=" "))
    res = seat.promote(force=True, reason="incident 42: the resident leaks").run()
    assert res.ok, res.describe()
    assert res.facts["forced"] == "incident 42: the resident leaks"
    assert any("without a PROMOTE-ABLE decision" in w for w in res.warnings)
    assert read_seat_file(seat.seat_path).forced == "incident 42: the resident leaks"


def test_cli_force_without_reason_is_usage(tmp_path, monkeypatch, capsys) -> None:
    from seat_console.cli import main

    f = tmp_path / "p.toml"
    f.write_text(PROFILE)
    monkeypatch.setenv("SEAT_CONSOLE_STATE_DIR", str(tmp_path / "state"))
    assert main(["--profile", str(f), "promote", "--force", "--yes"]) == 2
    assert "--force needs --reason" in capsys.readouterr().err
    assert main(["--profile", str(f), "promote", "--undo", "--force", "--reason", "x"]) == 2


def test_a_seat_file_that_cannot_be_read_refuses_with_its_name(seat: Seat) -> None:
    seat.decide("PROMOTE-ABLE")
    seat.seat_path.parent.mkdir(parents=True, exist_ok=True)
    seat.seat_path.write_text('{"format": 1, "resident": []}')
    assert str(seat.seat_path) in _refusal(seat.promote())
    with pytest.raises(StepError, match="seat.json.prev"):
        swap_mod.resident_name(seat.nctx)


# -- apply / verify ----------------------------------------------------------------------------
def test_promote_makes_the_candidate_the_resident(seat: Seat) -> None:
    seat.decide("PROMOTE-ABLE")
    rb = seat.promote()
    plan = rb.plan()
    assert plan.ok, plan.text_lines()
    assert any("write a new version of" in line for line in plan.text_lines())
    res = rb.run()
    assert res.ok, res.describe()
    name = res.facts["new_name"]
    assert name.startswith("seat-resident-promoted-")
    # the candidate was renamed, nothing stopped or removed
    assert seat.engine.calls == [("rename", "seat-probe", name)]
    assert seat.cand.attrs["State"]["Running"] and seat.res.attrs["State"]["Running"] is False
    # the seat-state file names it with its launch record; env names only
    sf = read_seat_file(seat.seat_path)
    assert sf.container == name and sf.resident["id"] == CAND_ID
    assert sf.resident["image_id"] == CAND_IMG and sf.resident["mounts"] == ["/models:/m:ro"]
    assert sf.resident["env_names"] == ["HF_TOKEN", "VLLM_X"]
    assert "hf_secret_value" not in seat.seat_path.read_text()
    assert sf.previous["id"] == RES_ID and sf.swap_run_id == "swap-1"
    assert "hf_secret_value" not in json.dumps([r.facts for r in seat.journal.entries()])
    # every later swap / restore reads it
    assert swap_mod.resident_name(seat.nctx) == name
    # the profile's sides exchanged, comments kept, the old text beside it
    prof = load_profile(seat.profile_path).profile
    assert prof.resident.container == name and prof.resident.name == "new-model"
    assert prof.resident.image == CAND_IMG and prof.candidate.name == "old-model"
    assert "# the resident: the model in the seat" in seat.profile_path.read_text()
    backup = seat.profile_path.with_name(f"profile.toml.before-{res.run_id}")
    assert backup.read_text() == PROFILE
    assert seat.completions == ["seat-model"]
    kinds = [(r.kind, r.step) for r in seat.journal.entries() if r.runbook == "promote"]
    for step in ("check seat", "rename candidate", "write seat state", "write profile",
                 "verify serving"):
        assert ("verify", step) in kinds


def test_a_read_only_profile_is_left_alone_and_the_plan_says_so(seat: Seat) -> None:
    seat.decide("PROMOTE-ABLE")
    lp = seat.nctx.loaded
    seat.nctx.loaded = LoadedProfile(lp.profile, "<embedded default>", "default", lp.sha256)
    rb = seat.promote()
    assert any("leave the profile as it is" in line and "seat-state file alone" in line
               for line in rb.plan().text_lines())
    res = rb.run()
    assert res.ok and seat.profile_path.read_text() == PROFILE
    assert read_seat_file(seat.seat_path).profile["written"] is False


def test_restore_after_a_promote_has_nothing_to_restore(seat: Seat) -> None:
    seat.decide("PROMOTE-ABLE")
    assert seat.promote().run().ok
    with pytest.raises(swap_mod.NothingToRestore, match="seat-resident-promoted-"):
        swap_mod.build_restore(seat.nctx, seat.journal)


def test_a_failure_part_way_is_undone(seat: Seat, monkeypatch) -> None:
    seat.decide("PROMOTE-ABLE")
    rb = seat.promote()
    seat.seat_path.parent.mkdir(parents=True, exist_ok=True)

    def no_completion(endpoint: str, model: str, timeout_s: float = 120.0) -> str:
        raise StepError("completion on the seat: HTTP 500")
    monkeypatch.setattr(swap_mod, "completion", no_completion)
    res = rb.run()
    assert res.outcome == "undone", res.describe()
    assert seat.cand.name == "seat-probe"                      # renamed back
    assert not seat.seat_path.exists()                         # no seat-state file again
    assert seat.profile_path.read_text() == PROFILE            # the profile as it was
    assert swap_mod.resident_name(seat.nctx) == "seat-resident"


# -- the undo ----------------------------------------------------------------------------------
def test_undo_puts_the_previous_resident_back(seat: Seat) -> None:
    seat.decide("PROMOTE-ABLE")
    name = seat.promote().run().facts["new_name"]
    seat.engine.calls.clear()
    # a new console: its profile is the version the promote wrote (it names the promoted one)
    seat.nctx = FakeNodeContext(load_profile(seat.profile_path), seat.engine)
    assert seat.nctx.profile.resident.container == name
    rb = seat.undo()
    assert rb.plan().ok, rb.plan().text_lines()
    res = rb.run()
    assert res.ok, res.describe()
    assert seat.engine.calls == [("stop", name), ("start", "seat-resident")]
    assert seat.cand.attrs["State"]["Running"] is False         # stopped, kept
    assert seat.res.attrs["State"]["Running"] is True
    assert not seat.seat_path.exists() and prev_path(seat.seat_path).exists()
    assert seat.profile_path.read_text() == PROFILE
    fresh = FakeNodeContext(load_profile(seat.profile_path), seat.engine)   # a new console
    assert swap_mod.resident_name(fresh) == "seat-resident"
    assert seat.completions == ["seat-model", "seat-model"]
    # the stop drained (the engine not answering here: said so) and the downtime measured,
    # journaled as swap's (issue 32)
    assert res.facts["drain"]["mode"] == "none" and res.facts["drain"]["down_at"]
    assert res.facts["downtime"]["down_at"] == res.facts["drain"]["down_at"]
    assert 0 <= res.facts["downtime"]["seconds"] < 60
    # nothing left to undo
    assert "no promote to undo" in _refusal(seat.undo())


def test_undo_needs_a_hold(tmp_path, monkeypatch) -> None:
    s = Seat(tmp_path, monkeypatch)
    s.decide("PROMOTE-ABLE")
    assert s.promote().run().ok
    s.release()
    err = _refusal(s.undo())
    assert "no active hold" in err and "seat-console hold" in err


def test_an_undo_that_fails_part_way_serves_the_promoted_one_again(seat: Seat) -> None:
    seat.decide("PROMOTE-ABLE")
    name = seat.promote().run().facts["new_name"]
    seat.res.attrs["Image"] = "sha256:" + "f" * 64       # the old resident's image changed
    assert "now has image" in _refusal(seat.undo())
    seat.res.attrs["Image"] = RES_IMG
    rb = seat.undo()
    steps = {s.name: s for s in rb.steps}
    orig = steps["start previous"].apply

    def broken(ctx):
        orig(ctx)
        raise StepError("the previous resident answers no completion")
    steps["start previous"].apply = broken
    res = rb.run()
    assert res.outcome == "undone", res.describe()
    assert seat.cand.attrs["State"]["Running"] and seat.cand.name == name
    assert seat.res.attrs["State"]["Running"] is False
    assert read_seat_file(seat.seat_path).container == name


def test_recover_undoes_a_promote_killed_inside_a_step(seat: Seat) -> None:
    seat.decide("PROMOTE-ABLE")
    rb = seat.promote()
    steps = {s.name: s for s in rb.steps}
    orig = steps["write profile"].apply

    def killed(ctx):
        orig(ctx)                 # the profile's new version is written…
        raise SystemExit("kill -9")   # …and the console dies: no apply row, no undo, no end
    steps["write profile"].apply = killed
    with pytest.raises(SystemExit):
        rb.run()
    assert load_profile(seat.profile_path).profile.resident.container != "seat-resident"
    (rows,) = [r for r in seat.journal.unfinished() if r[0].runbook == "promote"]
    d = recover.describe(rows)
    assert d["can"] == ["undo"] and d["maybe"] == ["write profile"]
    # a new console: the runbook rebuilt from the journal alone; each undo reads the node
    res = recover.finish(seat.nctx, seat.journal, rows, "undo")
    assert res.outcome == "undone", res.describe()
    assert seat.cand.name == "seat-probe" and not seat.seat_path.exists()
    assert seat.profile_path.read_text() == PROFILE
    assert swap_mod.resident_name(seat.nctx) == "seat-resident"
    assert not [r for r in seat.journal.unfinished() if r[0].runbook == "promote"]


def test_the_profile_sides_exchange_with_nested_tables_and_comments() -> None:
    text = PROFILE.replace('[candidate]\nname = "new-model"\nimage = "img:1"\n',
                           '[candidate]\nname = "new-model"\nimage = "img:1"\n'
                           '# what the new model needs from its image\n'
                           '[candidate.requires]\nengine = ">=0.33"\n'
                           '[[candidate.requires.files]]\npath = "/x/gemma3n.py"\n'
                           'pattern = "per_layer.*offload"\n')
    rec = {"image_id": CAND_IMG, "repo_digests": ["reg/seat-backport@sha256:" + "d" * 64]}
    from seat_console.core.profile import parse_profile

    parse_profile(text, "p.toml")          # the profile before is valid
    out = pm.new_profile_text(text, "p.toml", "seat-resident-promoted-20261205T000000Z", rec)
    prof = parse_profile(out, "p.toml")
    assert prof.resident.name == "new-model" and prof.resident.image == rec["repo_digests"][0]
    assert prof.resident.requires is not None and prof.resident.requires.files[0].path == \
        "/x/gemma3n.py"
    assert prof.candidate.name == "old-model" and prof.candidate.container == "seat-resident"
    assert prof.candidate.requires is None and prof.swap.container == "seat-probe"
    assert "# the resident: the model in the seat" in out


def test_the_seat_panel_reads_the_promoted_resident(seat: Seat) -> None:
    from test_actions_seam import _Client

    from seat_console.sources.seat import SeatSource

    src = SeatSource("tcp://127.0.0.1:1", "seat-resident", "seat-probe",
                     make_client=lambda: _Client(seat.engine))
    before = src.read()
    assert before.role == "probe" and before.name == "seat-probe"
    seat.decide("PROMOTE-ABLE")
    name = seat.promote().run().facts["new_name"]
    after = src.read()
    assert after.role == "resident" and after.name == name and after.container_id == CAND_ID


@pytest.mark.parametrize("forced", [False, True])
def test_the_exporter_exports_the_promoted_resident_and_whether_it_was_forced(
        seat: Seat, forced: bool) -> None:
    from test_exporter import get, samples, up

    from seat_console.exporter.model import JournalValue
    from seat_console.exporter.readers import promoted

    assert promoted(seat.seat_path) is None
    s = samples({"journal": up("journal", JournalValue())})
    assert not [k for k in s if k[0] == "seat_promoted_info"]          # absent, not 0
    if forced:
        res = seat.promote(force=True, reason="incident 42").run()
    else:
        seat.decide("PROMOTE-ABLE")
        res = seat.promote().run()
    assert res.ok, res.describe()
    fact = promoted(seat.seat_path)
    assert fact == (res.facts["new_name"], res.run_id, forced)
    s = samples({"journal": up("journal", JournalValue(promoted=fact))})
    assert get(s, "seat_promoted_info", container=res.facts["new_name"], run_id=res.run_id,
               forced="true" if forced else "false") == 1.0
    seat.seat_path.write_text("{")          # unreadable: the series is absent, never a guess
    assert promoted(seat.seat_path) is None


def test_the_containers_panel_watches_the_promoted_resident(seat: Seat) -> None:
    from test_actions_seam import _Client

    from seat_console.sources.containers import ContainerSource

    src = ContainerSource("tcp://127.0.0.1:1", {"resident": "seat-resident"},
                          watch_events=False, make_client=lambda: _Client(seat.engine))
    assert src.containers == {"resident": "seat-resident"}
    seat.decide("PROMOTE-ABLE")
    name = seat.promote().run().facts["new_name"]
    assert src.containers == {"resident": name}
    seat.seat_path.write_text("{")      # unreadable: the profile's name, the actions refuse
    assert src.containers == {"resident": "seat-resident"}


@pytest.mark.parametrize("args, typed, code, ran", [
    (["promote"], "seat-node", 0, ["promote"]), (["promote"], "y", 6, []),
    (["promote", "--undo"], "seat-node", 0, ["promote-undo"]),
    (["promote", "--undo"], "", 6, []), (["promote", "--yes"], None, 0, ["promote"]),
    (["promote", "--dry-run", "--json"], None, 0, [])])
def test_cli_promote_asks_for_the_seats_name(tmp_path, monkeypatch, capsys, args, typed, code,
                                             ran) -> None:
    import builtins
    import sys

    from seat_console.actions.runbook import Plan, PlanLine, Runbook
    from seat_console.cli import main

    done: list[str] = []

    class FakeRunbook:
        def __init__(self, name: str) -> None:
            self.name = name

        def plan(self) -> Any:
            return Plan(self.name, (PlanLine("check seat", True, "promote seat-probe"),))

        def run(self) -> Any:
            done.append(self.name)
            return Runbook(self.name, [], journal=None).run()

    f = tmp_path / "p.toml"
    f.write_text(PROFILE)
    monkeypatch.setenv("SEAT_CONSOLE_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.setattr(pm, "build_promote", lambda *a, **k: FakeRunbook("promote"))
    monkeypatch.setattr(pm, "build_promote_undo", lambda *a, **k: FakeRunbook("promote-undo"))
    monkeypatch.setattr(sys.stdin, "isatty", lambda: True, raising=False)
    monkeypatch.setattr(builtins, "input", lambda prompt="": typed or "")
    rc = main(["--profile", str(f), *args])
    out, err = capsys.readouterr()
    assert rc == code, out + err
    assert done == ran
    if "--json" in args:
        assert json.loads(out)["dry_run"] is True


def test_a_newest_decide_row_that_is_no_decision_refuses_naming_it(seat: Seat) -> None:
    seat.decide("PROMOTE-ABLE")
    seat.journal.append(run_id="decide-x", runbook="decide", kind="end", outcome="done",
                        facts={"decision": "SHIP-IT"})
    err = _refusal(seat.promote())
    assert "not a decision" in err and "SHIP-IT" in err and "seat-console decide" in err


def test_cli_promote_dry_run_prints_every_refusal_and_the_plan_once(
        tmp_path, monkeypatch, capsys) -> None:
    """`seat-console promote --dry-run` with nothing in place (issue 30 follow-up, item 1): the
    CLI prints each refusal on its own line (state + fix), the plan once under them, and the
    real run refuses naming them all (exit 5)."""
    from seat_console.cli import main

    f = tmp_path / "p.toml"
    f.write_text(PROFILE)
    monkeypatch.setenv("SEAT_CONSOLE_STATE_DIR", str(tmp_path / "state"))
    from test_actions_seam import _Client

    monkeypatch.setattr(swap_mod, "_client", lambda nctx: _Client(FakeEngine()))
    assert main(["--profile", str(f), "promote", "--dry-run"]) == 5
    out = capsys.readouterr().out
    refusals = [line for line in out.splitlines() if line.lstrip().startswith("✗")]
    assert len(refusals) == 3, out
    assert "no active hold" in refusals[0] and "not running" in refusals[1]
    assert "no decision in the journal" in refusals[2]
    assert out.count("once the 3 refusals above are fixed, promote would:") == 1
    assert "not planned" not in out
    assert main(["--profile", str(f), "promote", "--yes"]) == 5
    err = capsys.readouterr().err
    assert "no active hold" in err and "no decision in the journal" in err
