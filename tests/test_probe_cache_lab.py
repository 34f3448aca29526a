"""Cache-clean phases and goodput on the lab's real vLLM (issue 35): two phases with the same
prompts hit the engine's prefix cache without cleaning and do not with it (the lab's engine has
no ``VLLM_SERVER_DEV_MODE``, so no ``/reset_prefix_cache``: the nonce); goodput against a target
the lab meets and one it misses; no token mismatch, and the run says once that the engine gave
no per-request metrics (the lab's vLLM runs without ``--enable-per-request-metrics``). Holds the seat (``held``, released afterwards, always)."""

from __future__ import annotations

import json
from pathlib import Path

from test_probe_lab import cli, env, exclusive, held, node, without_probe  # noqa: F401

# Each prompt ~300 tokens on the lab's tokenizer: two full 128-token blocks (the lab's
# --block-size; vLLM caches full blocks only); the first tokens differ between prompts.
BODY = " ".join(f"item {i} of the seat probe cache test" for i in range(17))
PROMPTS = [f"prompt {k}: {BODY}" for k in range(4)]

PROBE = """
[probe]
prompt_set = "{prompts}"
output_tokens = 4
warmup_requests = 1
read_timeout_s = 30
request_timeout_s = 120
watch_interval_s = 0.5
prefix_cache = "{mode}"
[probe.slo]
{slo}
[[probe.phases]]
name = "a"
requests = 4
concurrency = 1
[[probe.phases]]
name = "b"
requests = 4
concurrency = 1
"""


def _probe(lab, held: Path, env: dict[str, str], tmp_path: Path, mode: str, slo: str) -> dict:
    pfile = tmp_path / "long-prompts.json"
    pfile.write_text(json.dumps({"name": "cache-test", "prompts": PROMPTS}))
    prof = tmp_path / f"cache-{mode}.toml"
    prof.write_text(without_probe(held.read_text("utf-8"))
                    + PROBE.format(prompts=pfile, mode=mode, slo=slo), "utf-8")
    cp = cli(prof, env, "probe", "--json")
    assert cp.returncode == 0, cp.stdout + cp.stderr
    return json.loads(cp.stdout)


def _phase(s: dict, name: str) -> dict:
    return next(b for b in s["phases"] if b["name"] == name)


def test_same_prompts_hit_the_cache_unless_the_phase_is_cleaned_and_goodput(
        lab, held: Path, env, tmp_path: Path) -> None:
    # no cleaning, a target the lab meets (E2E within 10 minutes)
    off = _probe(lab, held, env, tmp_path, "off", "e2e_ms = 600000")
    b = _phase(off, "b")
    assert b["prefix_cache"]["mode"] == "off"
    assert b["prefix_cache"]["hit_rate"] > 0.5, b["prefix_cache"]    # a's prompts, cached
    for name in ("a", "b"):
        gp = _phase(off, name)["stats"]["goodput"]
        assert (gp["met"], gp["trials"]) == (4, 4) and gp["high"] == 1.0, gp
    # cleaned ("auto": the lab's engine offers no reset, so the nonce), a target it misses
    clean = _probe(lab, held, env, tmp_path, "auto", "ttft_ms = 0.001")
    assert clean["prefix_cache_reset"].startswith("not offered: POST /reset_prefix_cache → "
                                                  "HTTP 404"), clean.get("prefix_cache_reset")
    for name in ("a", "b"):
        pc = _phase(clean, name)["prefix_cache"]
        assert pc["mode"] == "nonce" and pc["queries"] > 0, pc
        assert pc["hit_rate"] < 0.05, pc                     # ~0: no phase hits another's
        gp = _phase(clean, name)["stats"]["goodput"]
        assert (gp["met"], gp["trials"]) == (0, 4) and gp["low"] == 0.0, gp
        assert gp["missed"] == {"ttft_ms": 4}
        sv = _phase(clean, name)["stats"]["server"]
        assert sv["token_mismatches"] == 0 and sv["token_mismatch_first"] == [], sv
        assert sv["with_metrics"] == 0          # the lab's engine: no per-request metrics
    assert "--enable-per-request-metrics" in clean["server_metrics"]      # said once a run


def test_a_sweep_on_the_lab_stops_by_its_rule_and_the_report_shows_the_knee(
        lab, held: Path, env, tmp_path: Path) -> None:
    """The lab's engine runs at most 16 sequences (--max-num-seqs): past concurrency 16 the
    rest queue and its throughput cannot keep growing 10 % a step, so a sweep to 64 stops by
    the rule (on the loaded VM at c4, knee c2; at worst two steps past saturation, c64: 512
    requests of 8 tokens in all, well under a minute). Its dry run before has
    no forecast (nothing measured on this image in this test's data dir); after, the steps it
    ran are forecast from it."""
    from seat_console.core.sweep import SweepStep, judge

    prof = tmp_path / "sweep.toml"
    prof.write_text(without_probe(held.read_text("utf-8")) + """
[probe]
output_tokens = 8
warmup_requests = 1
read_timeout_s = 30
request_timeout_s = 120
watch_interval_s = 0.5
[probe.slo]
e2e_ms = 600000
[[probe.phases]]
name = "unused"
requests = 1
""", "utf-8")
    args = ("probe", "--sweep", "--sweep-top", "64", "--json")
    dry = cli(prof, env, *args, "--dry-run")
    assert dry.returncode == 0, dry.stdout + dry.stderr
    plan = json.loads(dry.stdout)["sweep"]
    assert [x["concurrency"] for x in plan["steps"]] == [1, 2, 4, 8, 16, 32, 64]
    assert plan["forecast_s"] is None and plan["unmeasured"] == [1, 2, 4, 8, 16, 32, 64]
    cp = cli(prof, env, *args)
    assert cp.returncode == 0, cp.stdout + cp.stderr
    s = json.loads(cp.stdout)
    sw = s["sweep"]
    names = [b["name"] for b in s["phases"]]
    again = judge([SweepStep(**x) for x in sw["steps"]], sw["goodput_min"], sw["growth_min"])
    assert again.model_dump(mode="json") == {k: sw[k] for k in again.model_dump()}
    # stopped by the rule, nothing run above the stopping step
    assert sw["found"] and sw["stopped_by"] and names[-1] == sw["stopped_at"], sw
    assert names == [f"sweep-c{c}" for c in (1, 2, 4, 8, 16, 32, 64)][:len(names)], names
    knee = sw["knee"]
    assert knee is not None and knee["output_tok_s"] > 0 and knee["concurrency"] <= 32, sw
    # the report re-derives the knee per arm (the resident: arm A) and shows it
    rep = cli(prof, env, "report", "--json", s["path"])
    assert rep.returncode == 0, rep.stdout + rep.stderr
    doc = json.loads(rep.stdout)
    assert doc["consistency"] == [], doc["consistency"]       # re-derived from requests.jsonl
    (row,) = doc["sweeps"]["A"]
    assert row["knee"]["concurrency"] == knee["concurrency"] and row["found"], row
    assert row["stopped_at"] == sw["stopped_at"]
    md = cli(prof, env, "report", s["path"]).stdout
    assert "## Load sweep: the knee per arm" in md
    assert any(x.startswith(f"| A | {row['run']} | {knee['concurrency']} |")
               for x in md.splitlines()), md
    # the dry run now forecasts the steps the sweep measured whole from this run
    plan = json.loads(cli(prof, env, *args, "--dry-run").stdout)["sweep"]
    ran = {b["stats"]["concurrency"] for b in s["phases"] if (b["stats"] or {}).get("complete")}
    assert {x["concurrency"] for x in plan["steps"] if x["forecast_s"]} == ran, (plan, ran)
    assert all(s["run_id"] in x["basis"] for x in plan["steps"] if x["forecast_s"])
