"""The evidence report: claims refused by rule, retained runs, and SHA-256 verification."""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path

import pytest

from evidence_factory import IDENT_A, IDENT_B, T0, write_leg, write_run
from seat_console.cli import main
from seat_console.evidence import report as rp
from seat_console.evidence.runs import RunError


def _claims(rep: dict, subject: str) -> list[dict]:
    return [c for c in rep["claims"] if c["subject"] == subject]


def _rules(claim: dict) -> set[str]:
    return {r["rule"] for r in claim["refused_by"]}


def test_61_of_64_refuses_the_throughput_claim(tmp_path: Path) -> None:
    bad = write_run(tmp_path / "runs", phases={"load": (64, 3)})
    rep = rp.build_report(rp.load_inputs([str(bad)]))
    (claim,) = _claims(rep, "throughput/latency (load)")
    assert not claim["survives"] and _rules(claim) == {rp.RULE_INCOMPLETE}
    assert "61/64 completed (64 attempted)" in claim["refused_by"][0]["detail"]
    (kept,) = rep["retained"]
    assert kept["status"] == "incomplete" and "61/64" in kept["reason"]
    md = rp.render_markdown(rep)
    assert "REFUSED — throughput/latency (load)" in md and "61/64 completed" in md


def test_64_of_64_keeps_the_throughput_claim(tmp_path: Path) -> None:
    good = write_run(tmp_path / "runs", phases={"load": (64, 0)})
    rep = rp.build_report(rp.load_inputs([str(good)]))
    (claim,) = _claims(rep, "throughput/latency (load)")
    assert claim["survives"], claim
    assert "n=64" in claim["statement"] and rep["retained"] == []


def test_runs_taken_days_apart_are_not_simultaneous(tmp_path: Path) -> None:
    a = write_run(tmp_path / "runs", ident=IDENT_A)
    b = write_run(tmp_path / "runs", ident=IDENT_B, at=T0 + timedelta(days=9))
    rep = rp.build_report(rp.load_inputs([str(a), str(b)]))
    assert rep["simultaneity"]["label"] == "not simultaneous (taken 9.0 days apart)"
    (claim,) = _claims(rep, "throughput difference (load)")
    assert rp.RULE_NOT_SIMULTANEOUS in _rules(claim)
    assert "taken 9.0 days apart" in json.dumps(claim)
    assert set(rep["arms"]) == {"A", "B"}


def test_two_runs_compared_directly_name_the_pairs_and_the_bracket_that_gives_them(
        tmp_path: Path) -> None:
    """The trial's ``report RUN1 RUN2``: "needs ≥ 6 rounds (6 pairs)", then the decision's "a
    complete, undisturbed bracket of ≥ 3 rounds": two answers. Runs are not a bracket: the
    pairs are named, and the ABBA rounds of the compare that gives them (3)."""
    a = write_run(tmp_path / "runs", ident=IDENT_A)
    b = write_run(tmp_path / "runs", ident=IDENT_B, at=T0 + timedelta(minutes=30))
    rep = rp.build_report(rp.load_inputs([str(a), str(b)]))
    text = json.dumps(rep, ensure_ascii=False)
    assert "needs ≥ 6 pairs to claim a difference (a compare bracket of ≥ 3 rounds of ABBA" \
        in text, text[:2000]
    assert "6 rounds" not in text


def test_disrupted_run_backs_no_claim(tmp_path: Path) -> None:
    d = write_run(tmp_path / "runs", disruptions=[{"reason": "container seat-resident restarted "
                                                           "by someone else"}])
    rep = rp.build_report(rp.load_inputs([str(d)]))
    (claim,) = _claims(rep, "throughput/latency (load)")
    assert rp.RULE_DISRUPTED in _rules(claim)
    assert rep["retained"][0]["status"] == "disrupted"
    assert "restarted by someone else" in rep["retained"][0]["reason"]


def _trace(case: str, ids: list[int]) -> dict:
    return {"case_id": case, "positions": [{"token_id": t, "logprob": -0.5,
                                            "top": {str(t): -0.5, str(t + 1): -1.0}}
                                           for t in ids]}


def _canary(item: str, run: int, passed: bool) -> dict:
    return {"item_id": item, "kind": "arithmetic", "run": run, "passed": passed,
            "reason": "r", "answer": "", "error": None}


def _bracket(tmp_path: Path, speed_b: float, b_ids: list[int], rounds: int = 1) -> Path:
    from seat_console.evidence.bracket import plan_bracket

    runs, cmp_dir = tmp_path / "runs", tmp_path / "comparisons" / "cmp-1"
    legs = []
    for leg in plan_bracket("ABBA", rounds):
        n, arm = leg.n, leg.arm
        ident, speed, kv, ids = ((IDENT_A, 1.0, 9_000, [1, 2, 3]) if arm == "A"
                                 else (IDENT_B, speed_b, 4_000, b_ids))
        probe = write_run(runs, ident=ident, speed=speed, at=T0 + timedelta(minutes=5 * n))
        legs.append(write_leg(cmp_dir, n, arm, probe, kv=kv, traces=[_trace("c1", ids)],
                              canaries=[_canary("x", r, r < 9) for r in range(10)],
                              pair=leg.pair, round_=leg.round))
    (cmp_dir / "compare.json").write_text(json.dumps({
        "bracket_id": "br-1", "order": "ABBA", "rounds": rounds, "legs": legs,
        "status": "complete", "restored": True, "hold_released": True,
        "fit": {"A": {"name": "resident-fp8", "kv_tokens": 9_500, "fits": True, "words": "fits"},
                "B": {"name": "candidate-bf16", "kv_tokens": 4_200, "fits": True}}}))
    return cmp_dir


def test_bracket_report(tmp_path: Path) -> None:
    cmp_dir = _bracket(tmp_path, speed_b=1.0, b_ids=[1, 2, 9])
    rep = rp.build_report(rp.load_inputs([str(cmp_dir)]))
    assert rep["simultaneity"]["simultaneous"]
    assert rep["kv_ratio_resident_over_candidate"] == pytest.approx(2.25)
    (kv,) = _claims(rep, "KV capacity")
    assert kv["survives"] and "2.25×" in kv["statement"]
    ratios = rep["kv_ratios_candidate_over_resident"]
    assert ratios["engine"] == pytest.approx(4_000 / 9_000)
    assert ratios["fit"] == pytest.approx(4_200 / 9_500)
    assert "KV capacity, candidate / resident: engine (startup log) 0.44×; fit budget " \
           "(predicted) 0.44×" in rp.render_markdown(rep)
    (tl,) = _claims(rep, "throughput/latency (load)")
    assert tl["survives"]
    # one ABBA round = 2 pairs: the exact test's smallest p is 0.5, so nothing can be claimed
    (diff,) = _claims(rep, "throughput difference (load)")
    assert _rules(diff) == {rp.RULE_UNDERPOWERED}
    assert "needs ≥ 3 rounds (6 pairs) to claim a difference" in json.dumps(diff,
                                                                          ensure_ascii=False)
    assert "minimum detectable effect with 2 pair(s) and this spread: none" in diff["statement"]
    (fid,) = _claims(rep, "fidelity (localisation, not KL)")
    assert fid["survives"] and "c1 at position 2" in fid["statement"]
    (cn,) = _claims(rep, "canaries (arithmetic)")
    assert _rules(cn) == {rp.RULE_OVERLAP} and "no difference can be claimed" in cn["statement"]
    assert rep["arms"]["B"]["identity"]["patch_sha256s"] == ["/opt/vllm/x.py=" + "c" * 64]
    assert rep["arms"]["B"]["fit"]["kv_tokens"] == 4_200
    md = rp.render_markdown(rep)
    assert "fit budget: candidate-bf16 — predicted KV 4,200 tokens — fits" in md
    for section in ("## Identity per arm", "## Fit budget and engine KV capacity",
                    "## Fidelity", "## Canaries", "## Claims", "## Raw files (SHA-256)"):
        assert section in md


def test_one_round_with_a_2x_throughput_claims_nothing(tmp_path: Path) -> None:
    """The old rule ("per-leg ranges do not overlap") claimed this; one round cannot."""
    rep = rp.build_report(rp.load_inputs([str(_bracket(tmp_path, speed_b=2.0,
                                                        b_ids=[1, 2, 3]))]))
    (diff,) = _claims(rep, "throughput difference (load)")
    assert not diff["survives"] and _rules(diff) == {rp.RULE_UNDERPOWERED}
    assert "B/A = 1.284×" in diff["statement"] and "p = 0.500" in diff["statement"]


def test_three_rounds_with_a_2x_throughput_claim_a_difference(tmp_path: Path) -> None:
    rep = rp.build_report(rp.load_inputs([str(_bracket(tmp_path, speed_b=2.0,
                                                        b_ids=[1, 2, 3], rounds=3))]))
    (diff,) = _claims(rep, "throughput difference (load)")
    assert diff["survives"], diff
    assert "B/A = 1.284× (geometric mean over 6 pair(s): r1p1" in diff["statement"]
    assert "p = 0.031" in diff["statement"]
    for label in ("TTFT p50", "TPOT p50", "E2E p50"):  # latency halves on B: claimed too
        (c,) = _claims(rep, f"{label} difference (load)")
        assert c["survives"] and "B/A = 0.500×" in c["statement"], c
    (fid,) = _claims(rep, "fidelity (localisation, not KL)")
    assert "equal A's on all 1 cases" in fid["statement"]


def test_verify_passes_then_fails_after_a_raw_file_is_edited(tmp_path: Path,
                                                            capsys: pytest.CaptureFixture) -> None:
    run = write_run(tmp_path / "runs")
    for fmt in ("--json", "--md"):
        out = tmp_path / f"report{fmt}"
        assert main(["report", str(run), fmt, "--out", str(out)]) == 0
        assert main(["report", "--verify", str(out)]) == 0
    capsys.readouterr()
    req = run / "requests.jsonl"
    req.write_text(req.read_text().replace('"ok":true', '"ok":false', 1))
    for fmt in ("--json", "--md"):
        assert main(["report", "--verify", str(tmp_path / f"report{fmt}")]) == 1
        text = capsys.readouterr().out
        assert f"FAILED  {req.resolve()}: changed since the report" in text
        assert "1 FAILED" in text


def test_report_errors_name_the_input(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    assert main(["report", str(tmp_path / "nope"), "--data-dir", str(tmp_path)]) == 1
    assert "nope: no such run directory" in capsys.readouterr().err
    d = tmp_path / "runs" / "broken"
    d.mkdir(parents=True)
    (d / "summary.json").write_text("{not json")
    with pytest.raises(RunError, match="broken/summary.json: not valid JSON"):
        rp.load_inputs([str(d)])
    assert main(["report", "--verify", str(tmp_path / "runs" / "broken" / "summary.json")]) == 1
    assert main(["report"]) == 2


from hypothesis import HealthCheck, example, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from seat_console.evidence.runs import FileLedger, load_probe_run  # noqa: E402

_json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-5, 10**6) | st.floats(allow_nan=False)
    | st.text(max_size=10) | st.sampled_from(["complete", "2026-12-01T09:00:00+00:00",
                                             "2026-12-01T09:00:00", "load"]),
    lambda ch: st.lists(ch, max_size=4) | st.dictionaries(st.sampled_from(
        ["status", "started_at", "ended_at", "phases", "name", "stats", "expected",
         "attempted", "completed", "identity", "disruptions", "ttft", "p50_s", "image_id",
         "patch_sha256s", "gpu_uuids", "reason"]), ch, max_size=6), max_leaves=30)


@given(_json_values)
@settings(max_examples=200, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_summary_parser_only_documented_errors(tmp_path: Path, doc: object) -> None:
    d = tmp_path / "run"
    d.mkdir(exist_ok=True)
    (d / "summary.json").write_text(json.dumps(doc))
    try:
        run = load_probe_run(d, FileLedger())
    except RunError as exc:
        assert "summary.json" in str(exc)
    else:
        assert all(p.expected is None or p.expected >= 0 for p in run.phases)
        rp.build_report(rp.Inputs(runs=(run,), comparison=None, files={}))  # never raises


@given(st.text(max_size=300))
def test_recorded_hashes_only_documented_errors(text: str) -> None:
    try:
        rp.recorded_hashes(text, "r.md")
    except RunError as exc:
        assert "r.md" in str(exc)


def test_unverified_phase_backs_no_claim(tmp_path: Path) -> None:
    """The probe marks a phase 'unverified: …' when the engine's counters disagree with the
    client's: populations look complete but the claim is refused."""
    run = write_run(tmp_path / "runs", phases={"load": (8, 0)})
    s = json.loads((run / "summary.json").read_text())
    s["phases"][0]["state"] = "unverified: output tokens client 128 ≠ engine Δ 120"
    s["status"] = "incomplete"
    (run / "summary.json").write_text(json.dumps(s))
    rep = rp.build_report(rp.load_inputs([str(run)]))
    (claim,) = _claims(rep, "throughput/latency (load)")
    assert rp.RULE_INCOMPLETE in _rules(claim) and "unverified" in json.dumps(claim)
    assert rep["simultaneity"]["label"] == "one arm: no cross-arm comparison"


def test_lab_report_from_a_real_probe_run(lab, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                          capsys: pytest.CaptureFixture) -> None:
    """A real `seat-console probe` on the lab's vLLM, then `report` over its run directory:
    identity read from the probe's nested summary, KV capacity known, claims survive."""
    from lab_helpers import exclusive_lab

    monkeypatch.setenv("SEAT_CONSOLE_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("SEAT_CONSOLE_STATE_DIR", str(tmp_path / "state"))
    prof = str(lab.profile_path)
    # Under a real hold: without one, the lab's conformance timer (every 120 s) firing during
    # the probe marks the run disrupted, as it should.
    with exclusive_lab(lab, "the evidence lab test holds the seat"):
        assert main(["--profile", prof, "hold", "--yes", "--ttl", "10m", "--reason",
                     "evidence report lab test"]) == 0
        try:
            rc = main(["--profile", prof, "probe"])
        finally:
            assert main(["--profile", prof, "release", "--yes"]) == 0
    out = capsys.readouterr()
    assert rc == 0, out.out[-3000:] + out.err[-2000:]
    (run_dir,) = (tmp_path / "data" / "runs").iterdir()
    assert main(["report", run_dir.name, "--json"]) == 0
    rep = json.loads(capsys.readouterr().out)
    ident = rep["arms"]["A"]["identity"]
    assert ident["image_id"].startswith("sha256:") and ident["engine_version"] == "0.32.0"
    assert ident["repo_digest"] and ident["container_id"] and ident["prompt_set_sha256"]
    assert rep["arms"]["A"]["kv_cache_tokens"] and rep["arms"]["A"]["kv_cache_tokens"] > 0
    phase_claims = [c for c in rep["claims"] if c["subject"].startswith("throughput/latency")]
    assert phase_claims and all(c["survives"] for c in phase_claims), phase_claims
    assert str((run_dir / "requests.jsonl").resolve()) in rep["files"]
    # the probe's TTFT / ITL beside vLLM's own histograms over each phase (issue 21, part 2)
    for ph in rep["phases"]:
        (row,) = ph["rows"]
        for fig in ("ttft", "itl"):
            t = row["engine_timing"][fig]
            assert t["engine"] is not None and t["problem"] is None, t
            assert t["client_n"] > 0 and t["engine_n"] >= t["client_n"] * 0.5, t
            if fig == "ttft":     # one per request: the engine counted exactly the phase's
                assert t["engine_n"] == row["completed"] == t["client_n"], t
            for c in t["checks"]:
                lo, hi = (float(x) for x in c["engine_bucket_s"])
                assert lo < hi and c["client_s"] is not None
                inside = lo < c["client_s"] <= hi
                assert (c["finding"] is None) is inside, c   # every outside value is named
    assert main(["report", run_dir.name]) == 0
    md = capsys.readouterr().out
    head = "| arm | run | figure | n client / engine | p50 client ms | p50 engine bucket |"
    assert head in md
    # the timing table's rows (the report has other per-leg tables: goodput, cache, server
    # timing): per phase a TTFT and an ITL row of arm A
    rows = [ln for ln in md.splitlines() if ln.startswith("| A | ")]
    for fig in ("TTFT", "ITL"):
        n = sum(1 for ln in rows if f" | {fig} | " in ln)
        assert n == len(rep["phases"]), (fig, n, rows)


def test_a_cut_bracket_backs_no_cross_arm_claim(tmp_path: Path) -> None:
    """The evaluation's failure: one leg cut part-way. A compare killed after B2 kept A1 and B2;
    the report lists them but refuses every cross-arm claim."""
    cmp_dir = _bracket(tmp_path, speed_b=2.0, b_ids=[1, 2, 3])
    doc = json.loads((cmp_dir / "compare.json").read_text())
    doc.update(status="running", legs=doc["legs"][:2],
               planned_legs=["legs/1-A", "legs/2-B", "legs/3-B", "legs/4-A"])
    (cmp_dir / "compare.json").write_text(json.dumps(doc))
    rep = rp.build_report(rp.load_inputs([str(cmp_dir)]))
    cross = [c for c in rep["claims"] if c["subject"] in (
        "throughput difference (load)", "fidelity (localisation, not KL)", "KV capacity")]
    assert len(cross) == 3
    for c in cross:
        assert not c["survives"]
        assert any("bracket incomplete: 2/4 legs measured" in r["detail"]
                   for r in c["refused_by"]), c


from seat_console.evidence.runs import load_leg  # noqa: E402


@given(_json_values, _json_values)
@settings(max_examples=200, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_leg_parser_only_documented_errors(tmp_path: Path, leg: object, line: object) -> None:
    d = tmp_path / "leg"
    d.mkdir(exist_ok=True)
    doc = {"arm": "A", **leg} if isinstance(leg, dict) else leg
    (d / "leg.json").write_text(json.dumps(doc))
    (d / "fidelity.jsonl").write_text(json.dumps(line) + "\n")
    (d / "canaries.jsonl").write_text(json.dumps(line) + "\n")
    try:
        run = load_leg(d, FileLedger())
    except RunError as exc:
        assert str(d) in str(exc)
    else:
        rp.build_report(rp.Inputs(runs=(run,), comparison=None, files={}))


def test_a_leg_disrupted_after_its_probe_backs_no_claim(tmp_path: Path) -> None:
    """compare marks a leg disrupted when the seat's container changed during fidelity or
    canaries (after the probe's own watch ended)."""
    cmp_dir = _bracket(tmp_path, speed_b=2.0, b_ids=[1, 2, 3])
    lp = cmp_dir / "legs" / "3-B" / "leg.json"
    leg = json.loads(lp.read_text())
    leg.update(status="disrupted", disruptions=[{"kind": "container", "at": "2026-12-01T10:00Z",
                                                 "what": "the seat's container changed"}])
    lp.write_text(json.dumps(leg))
    rep = rp.build_report(rp.load_inputs([str(cmp_dir)]))
    (diff,) = _claims(rep, "throughput difference (load)")
    assert rp.RULE_DISRUPTED in _rules(diff)
    assert "container: the seat's container changed" in json.dumps(diff)
    assert [r["name"] for r in rep["retained"]] == ["B3"]


def test_identity_from_the_probe_summary_shape() -> None:
    from seat_console.evidence.runs import Identity

    probe = {"container": {"role": "probe", "id": "c1", "image_id": "sha256:b",
                           "repo_digest": None},
             "backport_patches": [{"dest": "/etc/issue", "sha256": "f" * 64}],
             "gpus": {"driver": "580.159.04", "cards": [{"uuid": "GPU-1"}, {"uuid": "GPU-2"}]},
             "prompt_set": {"sha256": "e" * 64}, "served_model": "m"}
    i = Identity.from_mapping(probe)
    assert (i.container_id, i.image_id, i.driver_version) == ("c1", "sha256:b", "580.159.04")
    assert i.patch_sha256s == ("/etc/issue=" + "f" * 64,) and i.gpu_uuids == ("GPU-1", "GPU-2")
    assert i.prompt_set_sha256 == "e" * 64 and i.repo_digest is None
    resident = {**probe, "container": {**probe["container"], "role": "resident"}}
    assert Identity.from_mapping(resident).patch_sha256s == ()
    assert Identity.from_mapping("not a mapping") == Identity()


def test_verify_fails_on_an_edited_claim_in_the_report(tmp_path: Path,
                                                       capsys: pytest.CaptureFixture) -> None:
    """Issue 17: a claim edited from REFUSED to SURVIVES and 1.284× to 2.500× in the .md (or
    the JSON) verified, because only the raw files were re-hashed. Now it fails, naming it."""
    cmp_dir = _bracket(tmp_path, speed_b=2.0, b_ids=[1, 2, 3])
    md, js = tmp_path / "r.md", tmp_path / "r.json"
    assert main(["report", str(cmp_dir), "--out", str(md)]) == 0
    assert main(["report", str(cmp_dir), "--json", "--out", str(js)]) == 0
    assert main(["report", "--verify", str(md)]) == 0
    assert main(["report", "--verify", str(js)]) == 0
    assert "identical to the report" in capsys.readouterr().out
    text = md.read_text()
    old = next(line for line in text.splitlines()
               if line.startswith("- REFUSED — throughput difference (load)"))
    assert "B/A = 1.284×" in old
    md.write_text(text.replace(old, old.replace("REFUSED", "SURVIVES")
                               .replace("1.284×", "2.500×")))
    assert main(["report", "--verify", str(md)]) == 1
    out = capsys.readouterr().out
    assert "DIFFERS line" in out and "SURVIVES — throughput difference (load)" in out
    assert "2.500×" in out and "1 difference(s) FAILED" in out
    doc = json.loads(js.read_text())
    i = next(i for i, c in enumerate(doc["claims"])
             if c["subject"] == "throughput difference (load)")
    doc["claims"][i]["survives"] = True
    js.write_text(json.dumps(doc, indent=2))
    assert main(["report", "--verify", str(js)]) == 1
    assert f"DIFFERS report.claims[{i}].survives: the report says true, re-derived false" in \
        capsys.readouterr().out


def test_a_report_regenerated_from_an_edited_summary_warns_and_fails_verify(
        tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    cmp_dir = _bracket(tmp_path, speed_b=1.0, b_ids=[1, 2, 3])
    probe = Path(json.loads((cmp_dir / "legs" / "2-B" / "leg.json").read_text())["probe_run_dir"])
    s = json.loads((probe / "summary.json").read_text())
    s["phases"][1]["stats"]["output_tok_s"] *= 2.5  # "B is 2.5x faster"
    (probe / "summary.json").write_text(json.dumps(s))
    md = tmp_path / "r.md"
    assert main(["report", str(cmp_dir), "--out", str(md)]) == 0
    cap = capsys.readouterr()
    assert "WARNING: B2" in cap.err and "summary.json phase load output_tok_s" in cap.err
    assert "requests.jsonl gives" in cap.err
    assert "**WARNING — B2" in md.read_text()
    rep = rp.build_report(rp.load_inputs([str(cmp_dir)]))
    for c in _claims(rep, "throughput difference (load)") + _claims(
            rep, "throughput/latency (load)"):
        assert rp.RULE_SUMMARY_EDITED in _rules(c), c
    assert main(["report", "--verify", str(md)]) == 1  # the hashes match; the re-derivation not
    out = capsys.readouterr().out
    assert "DIFFERS B2: summary.json phase load output_tok_s" in out


def test_a_report_without_inputs_cannot_be_verified(tmp_path: Path,
                                                    capsys: pytest.CaptureFixture) -> None:
    run = write_run(tmp_path / "runs")
    md = tmp_path / "r.md"
    assert main(["report", str(run), "--out", str(md)]) == 0
    md.write_text("\n".join(x for x in md.read_text().splitlines()
                            if not x.startswith("Input: ")))
    assert main(["report", "--verify", str(md)]) == 1
    assert "names no input directory" in capsys.readouterr().out


def test_fidelity_compares_every_pair_of_the_bracket(tmp_path: Path) -> None:
    """Issue 17: cross-arm fidelity compared A1–B2 only, never A4–B3."""
    cmp_dir = _bracket(tmp_path, speed_b=1.0, b_ids=[1, 2, 3])
    rep = rp.build_report(rp.load_inputs([str(cmp_dir)]))
    (f,) = _claims(rep, "fidelity (localisation, not KL)")
    assert "in every pair (A1–B2, A4–B3)" in f["statement"] and f["survives"]
    # B3 alone diverges at position 2, and B2 = A: B's own legs disagree → not attributable
    (cmp_dir / "legs" / "3-B" / "fidelity.jsonl").write_text(json.dumps(_trace("c1", [1, 2, 9]))
                                                             + "\n")
    rep = rp.build_report(rp.load_inputs([str(cmp_dir)]))
    (f,) = _claims(rep, "fidelity (localisation, not KL)")
    assert "A4–B3: 1/1 cases diverge (c1 at position 2)" in f["statement"]
    assert "A1–B2: 0/1 cases diverge" in f["statement"]
    assert _rules(f) == {rp.RULE_NOT_REPRODUCIBLE} and "B2–B3: 1 case(s)" in json.dumps(
        f, ensure_ascii=False)
    pairs = {(p["a"], p["b"]) for p in rep["fidelity"]["pairs"]}
    assert {("A1", "B2"), ("A4", "B3"), ("A1", "A4"), ("B2", "B3")} <= pairs


def test_request_totals_and_base_digest_per_bracket(tmp_path: Path) -> None:
    cmp_dir = _bracket(tmp_path, speed_b=1.0, b_ids=[1, 2, 3])
    lp = cmp_dir / "legs" / "2-B" / "leg.json"
    leg = json.loads(lp.read_text())
    leg["identity"] = {"base_digest": "127.0.0.1:15000/engine@sha256:" + "1" * 64}
    lp.write_text(json.dumps(leg))
    rep = rp.build_report(rp.load_inputs([str(cmp_dir)]))
    assert rep["requests"]["A"] == {"legs": 2, "warmup": 0, "measured": 136, "fidelity": 2,
                                    "canaries": 20}
    assert rep["requests"]["all"]["measured"] == 272
    assert rep["arms"]["B"]["identity"]["base_digest"].endswith("1" * 64)
    md = rp.render_markdown(rep)
    assert "all: 4 leg(s), 0 warm-up + 272 measured probe requests, 4 fidelity, 40 canary" in md
    assert "| base_digest | unknown | 127.0.0.1:15000/engine@sha256:" in md


def test_runs_lists_comparisons_and_each_run_s_leg_and_container(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture) -> None:
    """Issue 17: `runs` showed the served model (always the seat's), no arm, and no
    comparison, though `report --help` says to find their IDs there."""
    monkeypatch.setenv("SEAT_CONSOLE_DATA_DIR", str(tmp_path))
    _bracket(tmp_path, speed_b=1.0, b_ids=[1, 2, 3])
    write_run(tmp_path / "runs", ident={**IDENT_A, "container": {
        "role": "probe", "name": "seat-probe", "image_id": "sha256:" + "b" * 64}})
    assert main(["runs"]) == 0
    out = capsys.readouterr().out
    assert "comparisons (give the ID to `seat-console report`):" in out
    assert "  cmp-1  complete  ABBA x1, 4/? legs" in out
    assert out.count("leg cmp-1 A") == 2 and out.count("leg cmp-1 B") == 2
    assert "probe seat-probe image bbbbbbbbbbbb" in out and "seat-resident  " not in out
    assert main(["runs", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["comparisons"][0]["bracket_id"] == "cmp-1"
    assert sorted(r["leg"] for r in doc["runs"] if r["leg"]) == [
        "cmp-1 A1", "cmp-1 A4", "cmp-1 B2", "cmp-1 B3"]


@given(_json_values, _json_values)
@settings(max_examples=150, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_list_comparisons_never_raises(tmp_path: Path, cmp_doc: object, leg: object) -> None:
    from seat_console.evidence.runs import list_comparisons

    d = tmp_path / "comparisons" / "c1"
    (d / "legs" / "1-A").mkdir(parents=True, exist_ok=True)
    doc = {"legs": ["legs/1-A"], **cmp_doc} if isinstance(cmp_doc, dict) else cmp_doc
    (d / "compare.json").write_text(json.dumps(doc))
    (d / "legs" / "1-A" / "leg.json").write_text(json.dumps(leg))
    (row,) = list_comparisons(tmp_path)
    assert row["bracket_id"] == "c1" and isinstance(row["status"], str)


@given(st.lists(_json_values, max_size=3))
@settings(max_examples=150, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_rederive_against_fuzzed_summary_phases_only_documented_errors(
        tmp_path: Path, phases: list) -> None:
    """A summary.json with arbitrary phases next to real request records: loading never
    raises anything but RunError, and a phase that does not match its records is named."""
    run = tmp_path / "runs" / "r"
    if not run.exists():
        run = write_run(tmp_path / "runs", phases={"load": (8, 0)})
        run.rename(tmp_path / "runs" / "r")
        run = tmp_path / "runs" / "r"
    s = json.loads((run / "summary.json").read_text())
    s["phases"] = phases
    (run / "summary.json").write_text(json.dumps(s))
    try:
        r = load_probe_run(run, FileLedger())
    except RunError as exc:
        assert "summary.json" in str(exc)
    else:
        assert all(isinstance(x, str) for x in r.consistency)
        rp.build_report(rp.Inputs(runs=(r,), comparison=None, files={}))


@given(st.text(max_size=400))
@example("{x")       # JSON it refuses: its documented error (hypothesis found it only at times)
def test_recorded_inputs_raise_only_their_documented_error(text: str) -> None:
    try:
        ins, at, _ = rp.recorded_inputs(text)
    except RunError as exc:   # documented: JSON text it refuses, naming the report
        assert text.lstrip().startswith("{") and str(exc).startswith("report: "), exc
        return
    assert isinstance(ins, list) and (at is None or at.tzinfo is not None)


def test_engine_timing_findings_are_made_again_and_a_hostile_block_is_named(tmp_path: Path
                                                                           ) -> None:
    """The report does not take the probe's verdicts: a summary whose recorded finding was
    edited away still shows the finding (client p95 re-derived from requests.jsonl against the
    recorded engine bucket); a block that is not a histogram is named on its own row, and the
    other phase keeps its table."""
    from test_props_engine_timing import exposition

    from seat_console.core.engine_timing import (
        ITL,
        TTFT,
        check_figure,
        engine_deltas,
        parse_histograms,
    )

    run = write_run(tmp_path / "runs")
    sp = run / "summary.json"
    doc = json.loads(sp.read_text())
    zero = parse_histograms(exposition(TTFT, [[0] * 8]) + exposition(ITL, [[0] * 8]))
    tiny = parse_histograms(exposition(TTFT, [[60, 0, 0, 0, 0, 0, 0, 4]])   # ≤ 1 ms, some ∞
                            + exposition(ITL, [[0] * 7 + [500]]))
    d = engine_deltas(zero, tiny)
    for ph in doc["phases"]:
        n = ph["stats"]["completed"]
        block = {f: check_figure(f, d[f], {}, n, None).model_dump(mode="json")
                 for f in ("ttft", "itl")}
        for c in block["ttft"]["checks"]:
            c["finding"] = None                   # "edited": the recorded verdicts say nothing
        ph["engine_timing"] = block
    doc["phases"][1]["engine_timing"]["itl"]["engine"]["bounds"].reverse()   # hostile
    sp.write_text(json.dumps(doc))
    rep = rp.build_report(rp.load_inputs([str(run)]))
    single, load = (ph["rows"][0] for ph in rep["phases"])
    t = single["engine_timing"]["ttft"]
    # the factory's TTFTs (tens of ms) are above the engine's (0, 1 ms] p50 bucket: found again
    assert t["checks"][0]["finding"] == "client-side delay or network", t   # CPU share unknown
    assert t["checks"][0]["client_s"] == single["ttft_p50_s"]
    assert load["timing_problem"] and "engine_timing.itl.engine is not a histogram" in \
        load["timing_problem"] and load["engine_timing"] == {}
    md = rp.render_markdown(rep)
    assert "p50: **client-side delay or network**" in md
    assert "| — | | | | | | unreadable: " in md and "phase load" in md


@pytest.mark.parametrize("breached", [True, False], ids=["breached", "killed"])
def test_a_one_arm_comparison_backs_no_claim_after_a_breach(tmp_path: Path,
                                                            breached: bool) -> None:
    """A compare stopped at a breach of the hold leaves one arm (leg A1): its own figures were
    measured while the hold was broken, so every claim but the identity is refused naming the
    breach. One arm of a bracket cut for another reason keeps its figures (no cross-arm claim
    is made from one arm anyway)."""
    runs, cmp_dir = tmp_path / "runs", tmp_path / "comparisons" / "cmp-1"
    probe = write_run(runs, ident=IDENT_A, at=T0)
    leg = write_leg(cmp_dir, 1, "A", probe, kv=9_000, traces=[_trace("c1", [1, 2, 3])],
                    canaries=[_canary("x", r, True) for r in range(10)])
    breach = {"journaled_at": "2026-12-01T20:55:03Z", "changed_at": "2026-12-01T20:55:00Z",
              "seen_at": "2026-12-01T20:55:02Z", "seq": 9, "by": "u@h",
              "what": "fleet-remediation-cycle.timer: active again (stopped by the hold)"}
    (cmp_dir / "compare.json").write_text(json.dumps({
        "bracket_id": "br-1", "order": "AB", "rounds": 1, "legs": [leg],
        "planned_legs": ["legs/1-A", "legs/2-B"], "status": "incomplete",
        "reason": "legs not complete: 2-B not run", "restored": True, "hold_released": True,
        "breaches": [breach] if breached else []}))
    rep = rp.build_report(rp.load_inputs([str(cmp_dir)]))
    figures = [c for c in rep["claims"] if c["subject"].startswith("throughput/latency (")]
    assert figures
    others = [c for c in rep["claims"] if not c["subject"].startswith("identity of arm")]
    if breached:
        assert not [c for c in others if c["survives"]], others
        assert all("2026-12-01T20:55:00Z" in json.dumps(c["refused_by"]) for c in figures)
    else:
        assert all(c["survives"] for c in figures), figures


def test_verify_names_the_format_and_an_older_one_is_not_called_edited(
        tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    """A report written before a format change (issue 30 follow-up, item 7): `--verify` says
    which format it is, checks what it can (the raw files) and lists the text differences as
    a format mismatch (exit 3), never a false "FAILED"; the current format still fails on an
    edit, and a raw file changed under an old report still fails."""
    cmp_dir = _bracket(tmp_path, speed_b=2.0, b_ids=[1, 2, 3])
    md, js = tmp_path / "r.md", tmp_path / "r.json"
    assert main(["report", str(cmp_dir), "--out", str(md)]) == 0
    assert main(["report", str(cmp_dir), "--json", "--out", str(js)]) == 0
    capsys.readouterr()
    assert main(["report", "--verify", str(md)]) == 0
    assert f"format: {rp.REPORT_FORMAT} (seat-console.evidence-report/{rp.REPORT_FORMAT})" in \
        capsys.readouterr().out
    # format 1: no "Report format" line, and a table an older console did not write
    old = "\n".join(line for line in md.read_text().splitlines()
                    if not line.startswith("Report format ")) + "\n"
    old = old.replace("## Claims", "## Claims (older wording)", 1)
    assert rp.report_format(old) == 1
    md.write_text(old)
    assert main(["report", "--verify", str(md)]) == 3
    out = capsys.readouterr().out
    assert "format: the report is format 1" in out and "DIFFERS (format)" in out
    assert "NOT JUDGED" in out and "FAILED" not in out
    doc = json.loads(js.read_text())
    doc["schema"] = "seat-console.evidence-report/1"
    js.write_text(json.dumps(doc, indent=2))
    assert main(["report", "--verify", str(js), "--json"]) == 3
    v = json.loads(capsys.readouterr().out)
    assert (v["format"], v["current_format"], v["outcome"]) == (1, rp.REPORT_FORMAT,
                                                              "format mismatch")
    # a raw file changed: failed, whatever the format
    leg = next((tmp_path / "runs").rglob("requests.jsonl"))
    leg.write_text(leg.read_text().replace('"ok":true', '"ok":false', 1))
    assert main(["report", "--verify", str(md)]) == 1
