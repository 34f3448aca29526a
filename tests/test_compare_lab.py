"""One end-to-end A/B/B/A compare on the lab: the resident (engine:day0 by digest) against the
backport image of the same tiny model, through the real CLI in a child process.

It restarts vLLM four times (~30-60 s each on this CPU), so it is the only such test: it holds
``.lab/disrupt.lock`` EXCLUSIVELY and, whatever happens, leaves the lab as it found it (probe
stopped, resident serving, the test's hold released, timers as before).
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from lab_helpers import (
    PROBE_CONTAINER as PROBE,
    exclusive_lab,
    node_transport,
    restore_seat,
    seat_cli,
    serving as _serving,
    state_env,
    timers_active as _timers,
)


def _cli(lab, env, *args: str, timeout: float = 900) -> subprocess.CompletedProcess[str]:
    return seat_cli(lab.profile_path, env, *args, timeout=timeout)


def test_lab_abba_compare_resident_vs_backport(lab, tmp_path: Path) -> None:
    env = state_env(tmp_path, data=True)
    node = node_transport(lab)
    with exclusive_lab(lab, "the compare test restarts the seat four times"):
        timers_before = _timers(node, lab.timers)
        try:
            _compare(lab, env, node, tmp_path, timers_before)
        finally:
            restore_seat(lab, env, node, timers_before)


def _compare(lab, env, node, tmp_path: Path, timers_before: dict[str, bool]) -> None:
    r = _cli(lab, env, "build-backport", "--json", timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    backport_id = json.loads(r.stdout)["image_id"]
    r = _cli(lab, env, "compare", "--bracket", "ABBA", "--yes", "--json", "--ttl", "30m")
    assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-6000:]
    out = json.loads(r.stdout)
    rep = out["report"]
    assert rep["comparison"]["status"] == "complete", rep["comparison"]
    assert rep["comparison"]["restored"] is True and rep["comparison"]["hold_released"]
    assert rep["simultaneity"]["simultaneous"]
    names = [run["name"] for a in ("A", "B") for run in rep["arms"][a]["runs"]]
    assert sorted(names) == ["A1", "A4", "B2", "B3"]
    assert rep["retained"] == [], rep["retained"]
    # identities: resident by digest vs the backport image, same served model
    a_id, b_id = rep["arms"]["A"]["identity"], rep["arms"]["B"]["identity"]
    assert a_id["image_id"] == lab.engine_image_id and b_id["image_id"] == backport_id
    assert a_id["served_model"] == b_id["served_model"]
    # B's base image digest, from the backport's label (a local build has no repo digest)
    assert b_id["base_digest"] and "@sha256:" in b_id["base_digest"], b_id
    assert a_id["base_digest"] is None
    assert rep["arms"]["A"]["identity_consistent"] and rep["arms"]["B"]["identity_consistent"]
    # matched populations: every phase expected = attempted = completed in every leg
    for ph in rep["phases"]:
        assert all(row["complete"] for row in ph["rows"]), ph
    # fresh incarnations: four distinct container starts, in leg order
    cmp_doc = json.loads((Path(out["comparison"]) / "compare.json").read_text())
    starts = [cmp_doc["containers"][f"leg{n}_container"]["started_at"] for n in (1, 2, 3, 4)]
    assert starts == sorted(starts) and len(set(starts)) == 4
    # same weights on both arms: greedy outputs and top-20 sets agree exactly
    (fid,) = [c for c in rep["claims"] if c["subject"].startswith("fidelity")]
    assert fid["survives"] and "equal A's on all" in fid["statement"], fid
    assert all(p["all_exact"] for p in rep["fidelity"]["pairs"]), rep["fidelity"]
    # the report verifies against the raw files it names
    rp_file = tmp_path / "report.json"
    rp_file.write_text(json.dumps(rep))
    v = _cli(lab, env, "report", "--verify", str(rp_file), timeout=120)
    assert v.returncode == 0, v.stdout + v.stderr
    # the decision (issue 30): arms from the legs' records, which the probes' roles confirm;
    # one round cannot claim a throughput difference, so INCONCLUSIVE, needing 3 rounds —
    # whose minutes this compare's own journaled swap/restore/restart/measure times forecast
    assert rep["arms_assignment"]["problem"] is None, rep["arms_assignment"]
    assert rep["decision"]["outcome"] == "INCONCLUSIVE", rep["decision"]
    assert rep["decision"]["rounds_needed"] == 3
    d = _cli(lab, env, "decide", "--json", timeout=120)
    assert d.returncode == 0, d.stdout + d.stderr
    dd = json.loads(d.stdout)
    assert dd["facts"]["bracket_id"] == rep["comparison"]["bracket_id"]
    assert dd["cost"]["minutes"] is not None and dd["cost"]["missing"] == [], dd["cost"]
    assert "min on this node" in dd["facts"]["needs"], dd["facts"]
    # the lab as found: resident serving, no hold, timers as before
    assert _serving(lab)
    assert _timers(node, lab.timers) == timers_before
    with lab.docker_client() as client:
        assert client.containers.get(lab.resident_container).attrs["State"]["Running"]
        assert not client.containers.list(filters={"name": PROBE})


def test_lab_aa_compare_claims_no_difference(lab, tmp_path: Path) -> None:
    """A/A on the lab (issue 17): the candidate is the resident's own image (same image ID,
    same weights, same engine). One ABBA round: every throughput/latency difference is refused
    (the design cannot reach p <= 0.05), no canary or fidelity difference is claimed, and the
    canaries' distinct trials are counted per seed, never copies."""
    from seat_console.evidence import report as rp

    prof = tmp_path / "aa-profile.toml"
    text = lab.profile_path.read_text()
    assert '\nimage = "backport"\n' in text, "the lab profile's [swap] image changed"
    # the same image and the same engine command: the lab's probe engine flags (per-request
    # metrics, scripts/lab.py PROBE_ENGINE_FLAGS) left out, so B runs exactly what A runs
    prof.write_text(text.replace('\nimage = "backport"\n',
                                 f'\nimage = "{lab.engine_image_id}"\n', 1)
                    .replace(', "--enable-per-request-metrics"]', "]", 1))
    env = state_env(tmp_path, data=True)
    node = node_transport(lab)
    with exclusive_lab(lab, "the A/A compare test restarts the seat four times"):
        timers_before = _timers(node, lab.timers)
        try:
            r = seat_cli(prof, env, "compare", "--bracket", "ABBA", "--yes", "--json", "--ttl",
                         "30m", timeout=900)
        finally:
            restore_seat(lab, env, node, timers_before, profile=prof)
    assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-6000:]
    out = json.loads(r.stdout)
    assert out["result"]["outcome"] == "done"  # exit 0 and "done" only for a complete bracket
    rep = out["report"]
    assert rep["comparison"]["status"] == "complete", rep["comparison"]
    a_id, b_id = rep["arms"]["A"]["identity"], rep["arms"]["B"]["identity"]
    assert a_id["image_id"] == b_id["image_id"] == lab.engine_image_id
    diffs = [c for c in rep["claims"] if " difference (" in c["subject"]]
    assert diffs and not [c for c in diffs if c["survives"]], diffs
    # refused because one round cannot reach p <= 0.05 and/or, for an ITL/TPOT that is
    # undefined on this CPU (all output in one network read), because the value is unknown:
    # no other rule may refuse an A/A difference
    for c in diffs:
        rules = {x["rule"] for x in c["refused_by"]}
        assert rules and rules <= {rp.RULE_UNDERPOWERED, rp.RULE_UNKNOWN}, c
        if rp.RULE_UNDERPOWERED in rules:
            assert "needs ≥ 3 rounds" in json.dumps(c, ensure_ascii=False), c
    assert any(x["rule"] == rp.RULE_UNDERPOWERED for c in diffs for x in c["refused_by"])
    for c in rep["claims"]:
        if c["subject"].startswith("canaries ("):
            assert not c["survives"], c
        if c["subject"].startswith("fidelity"):
            assert "diverges" not in c["statement"] or not c["survives"], c
    arith = rep["canaries"]["arms"]["A"]["all"]
    assert arith["distinct"] == arith["completed"], arith  # each pair of legs: its own seeds
    assert rep["requests"]["all"]["legs"] == 4 and rep["requests"]["all"]["warmup"] > 0
    md = tmp_path / "aa.md"
    md.write_text(rp.render_markdown(rep))
    v = seat_cli(prof, env, "report", "--verify", str(md), timeout=120)
    assert v.returncode == 0, v.stdout + v.stderr
    assert "identical to the report" in v.stdout
