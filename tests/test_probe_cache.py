"""Cache-clean phases (issue 35): before each phase the engine's prefix cache is reset where it
offers ``POST /reset_prefix_cache``, else every prompt of the phase carries a recorded nonce;
per phase the prefix-cache hit rate from the engine's counters; the report refuses a cross-arm
claim whose legs' hit rates differ beyond its bound."""

from __future__ import annotations

import json
import math
from datetime import timedelta
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from evidence_factory import IDENT_A, IDENT_B, T0, write_leg, write_run
from seat_console.evidence import report as rp
from seat_console.evidence.runs import read_prefix_cache
from seat_console.probe.engine_counters import (
    EngineCounters,
    parse_counters,
    prefix_cache_delta,
)
from seat_console.probe.prompts import phase_nonce, strip_nonce, with_nonce
from seat_console.probe.run import Probe
from seat_console.probe.store import RunWriter
from sse_server import SSEServer
from test_probe_run import _loaded, _pre

TWO_SAME = """[[probe.phases]]
name = "a"
requests = 2
concurrency = 1
[[probe.phases]]
name = "b"
requests = 2
concurrency = 1
"""


async def _run(tmp_path: Path, mode: str | None, status: int = 404,
               success: bool = True) -> tuple[dict, SSEServer]:
    async with SSEServer() as srv:
        srv.reset_status, srv.reset_success = status, success
        extra = f'prefix_cache = "{mode}"\n' if mode else ""
        loaded = _loaded(tmp_path, srv.url, ["normal", "multi"], extra + TWO_SAME)
        s = await Probe(loaded, _pre(srv.url), writer=RunWriter(root=tmp_path / "runs")).run()
    return s, srv


def _pc(s: dict, phase: str) -> dict:
    return next(b for b in s["phases"] if b["name"] == phase)["prefix_cache"]


async def test_without_cleaning_the_second_phase_hits_the_firsts_cache(tmp_path: Path) -> None:
    s, _ = await _run(tmp_path, "off")
    assert _pc(s, "b")["mode"] == "off" and _pc(s, "b")["hit_rate"] == 1.0


async def test_no_reset_offered_gives_each_phase_its_own_nonce(tmp_path: Path) -> None:
    s, srv = await _run(tmp_path, None)          # default: auto
    a, b = _pc(s, "a"), _pc(s, "b")
    assert a["mode"] == b["mode"] == "nonce" and a["hit_rate"] == b["hit_rate"] == 0.0
    assert a["nonce"] == f"sha256('{s['run_id']}/a/<prompt_id>')[:16]" != b["nonce"]
    assert s["prefix_cache_reset"].startswith("not offered: POST /reset_prefix_cache → HTTP 404")
    sent = [r["prompt"] for r in srv.requests]
    assert with_nonce("normal", phase_nonce(s["run_id"], "a", 0)) in sent
    assert with_nonce("multi", phase_nonce(s["run_id"], "b", 1)) in sent
    assert phase_nonce(s["run_id"], "a", 0) != phase_nonce(s["run_id"], "a", 1)
    assert srv.resets == 0
    from seat_console.commands.probe_cmd import render_summary
    text = render_summary(s)
    assert text.count("prefix-cache reset: not offered") == 1       # said once per run
    assert f"nonce {a['nonce']} before every prompt; hit rate 0.0 %" in text


async def test_a_reset_offered_is_used_before_every_phase(tmp_path: Path) -> None:
    s, srv = await _run(tmp_path, None, status=200)
    assert srv.resets == 2
    assert _pc(s, "a")["mode"] == _pc(s, "b")["mode"] == "reset"
    assert _pc(s, "b")["hit_rate"] == 0.0 and "prefix_cache_reset" not in s
    assert all(strip_nonce(r["prompt"]) == r["prompt"] for r in srv.requests)


async def test_a_refused_reset_falls_back_to_the_nonce(tmp_path: Path) -> None:
    s, _ = await _run(tmp_path, None, status=200, success=False)
    b = _pc(s, "b")
    assert b["mode"] == "nonce" and "success=false" in b["reset"] and b["hit_rate"] == 0.0


@given(st.text(max_size=40))
def test_nonce_round_trip(text: str) -> None:
    n = phase_nonce("run", "p", 3)
    assert strip_nonce(with_nonce(text, n)) == text and with_nonce(text, None) == text


counter = st.one_of(st.floats(allow_nan=True, allow_infinity=True), st.integers(-5, 10**9))


@given(counter, counter)
def test_prefix_counters_parse_or_are_unknown(hits, queries) -> None:
    text = ("# TYPE vllm:prefix_cache_hits_total counter\n"
            f'vllm:prefix_cache_hits_total{{engine="0"}} {hits}\n'
            "# TYPE vllm:prefix_cache_queries_total counter\n"
            f'vllm:prefix_cache_queries_total{{engine="0"}} {queries}\n'
            "# TYPE vllm:external_prefix_cache_hits_total counter\n"
            'vllm:external_prefix_cache_hits_total{engine="0"} 99\n')
    try:
        c = parse_counters(text)
    except ValueError:
        return
    for got, want in ((c.prefix_cache_hits, hits), (c.prefix_cache_queries, queries)):
        if not math.isfinite(float(want)) or float(want) < 0:
            assert got is None                      # unknown, never 0
        else:
            assert got == float(want)


opt = st.one_of(st.none(), st.floats(min_value=0, max_value=1e9))


@given(opt, opt, opt, opt)
def test_hit_rate_is_a_share_or_unknown_with_a_reason(bh, bq, ah, aq) -> None:
    d = prefix_cache_delta(EngineCounters(prefix_cache_hits=bh, prefix_cache_queries=bq),
                           EngineCounters(prefix_cache_hits=ah, prefix_cache_queries=aq))
    if d.hit_rate is None:
        assert d.problem
    else:
        assert 0.0 <= d.hit_rate <= 1.0 and d.queries and d.queries > 0


@given(st.one_of(st.none(), st.integers(), st.text(max_size=5),
                 st.dictionaries(st.sampled_from(["mode", "hit_rate", "problem", "nonce"]),
                                 st.one_of(st.none(), st.booleans(), st.text(max_size=6),
                                           st.floats(allow_nan=True, allow_infinity=True)),
                                 max_size=4)))
def test_read_prefix_cache_never_raises(doc) -> None:
    got = read_prefix_cache(doc)
    rate = got["cache_hit_rate"]
    assert rate is None or 0.0 <= rate <= 1.0
    assert got["cache_mode"] in (None, "reset", "nonce", "off")


def _bracket(tmp_path: Path, rate_a: float, rate_b: float | None) -> Path:
    from seat_console.evidence.bracket import plan_bracket

    runs, cmp_dir = tmp_path / "runs", tmp_path / "comparisons" / "cmp-1"
    legs = []
    for leg in plan_bracket("ABBA", 3):
        a = leg.arm == "A"
        d = write_run(runs, ident=IDENT_A if a else IDENT_B, speed=1.0 if a else 0.5,
                      at=T0 + timedelta(minutes=5 * leg.n), phases={"load": (16, 0)},
                      slo={"ttft_ms": 75.0})
        sp = d / "summary.json"
        s = json.loads(sp.read_text())
        rate = rate_a if a else rate_b
        s["phases"][0]["prefix_cache"] = {"mode": "nonce", "hit_rate": rate,
                                          "problem": None if rate is not None else "not read"}
        sp.write_text(json.dumps(s))
        legs.append(write_leg(cmp_dir, leg.n, leg.arm, d, kv=9000, pair=leg.pair,
                              round_=leg.round))
    (cmp_dir / "compare.json").write_text(json.dumps({
        "bracket_id": "br-1", "order": "ABBA", "rounds": 3, "legs": legs,
        "status": "complete", "restored": True, "hold_released": True}))
    return cmp_dir


def _claim(rep: dict, subject: str) -> dict:
    (c,) = [c for c in rep["claims"] if c["subject"] == subject]
    return c


def test_legs_with_equal_hit_rates_back_cross_arm_claims(tmp_path: Path) -> None:
    rep = rp.build_report(rp.load_inputs([str(_bracket(tmp_path, 0.0, 0.02))]))
    assert _claim(rep, "goodput (load)")["survives"]
    assert _claim(rep, "throughput difference (load)")["survives"]
    md = rp.render_markdown(rep)
    assert "| cache-clean by | prefix-cache hit rate |" in md and "2.0 %" in md


def test_legs_whose_hit_rates_differ_back_no_cross_arm_claim(tmp_path: Path) -> None:
    rep = rp.build_report(rp.load_inputs([str(_bracket(tmp_path, 0.0, 0.5))]))
    for subject in ("goodput (load)", "throughput difference (load)"):
        c = _claim(rep, subject)
        assert not c["survives"] and rp.RULE_CACHE in {r["rule"] for r in c["refused_by"]}
    rep = rp.build_report(rp.load_inputs([str(_bracket(tmp_path / "u", 0.0, None))]))
    c = _claim(rep, "goodput (load)")
    assert rp.RULE_CACHE in {r["rule"] for r in c["refused_by"]}
    assert "unknown in" in next(r["detail"] for r in c["refused_by"]
                                if r["rule"] == rp.RULE_CACHE)


def test_a_run_file_without_an_identity_reads_n_a_not_none() -> None:
    """The trial's ``runs <id>``: "seat: None (None), image ID None, repo digest n/a" and
    "hold: None". A value the run file lacks reads n/a, as everywhere else."""
    from seat_console.commands.probe_cmd import render_summary

    text = render_summary({"run_id": "r1", "status": "complete", "started_at": "t0",
                           "identity": {"container": {}}, "hold": {}})
    assert "None" not in text, text
    assert "seat: n/a (n/a), image ID n/a, repo digest n/a" in text and "hold: n/a" in text


def test_the_probe_plan_says_ignore_eos_in_words() -> None:
    """The trial's ``probe --dry-run``: "(ignore_eos True)"."""
    from seat_console.core.profile import load_profile
    from seat_console.probe.plan import render_plan

    loaded = load_profile(None, environ={})
    text = render_plan(loaded, None, checks=[], endpoint=None, container=None, model=None,
                       hold=None)
    assert "ignore_eos True" not in text and "ignore_eos False" not in text
    assert ("each to the end (ignore_eos)" in text) is loaded.profile.probe.ignore_eos
