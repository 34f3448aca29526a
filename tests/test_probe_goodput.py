"""Goodput (issue 35): ``[probe.slo]`` → per phase the share of sent requests that met every
target, with its Wilson 95 % interval, in the probe's summary, its text, ``runs``, the live
panel and the evidence report; a difference between arms is claimed by the canaries' rule."""

from __future__ import annotations

import json
import math
from datetime import timedelta
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from evidence_factory import IDENT_A, IDENT_B, T0, write_leg, write_run
from seat_console.core.probe_record import RequestRecord
from seat_console.core.probe_stats import (
    SLO_TARGETS,
    goodput,
    phase_stats,
    read_goodput,
    slo_misses,
)
from seat_console.core.profile import ProbeSpec
from seat_console.core.proportion import wilson_interval
from seat_console.evidence import report as rp
from seat_console.evidence.runs import FileLedger, load_probe_run

finite = st.floats(min_value=0.0, max_value=10.0, allow_nan=False)
maybe = st.one_of(st.none(), finite, st.sampled_from([math.nan, math.inf, -math.inf]))


def _rec(i: int, ok: bool = True, ttft: float | None = 0.05, tpot: float | None = 0.01,
         e2e: float | None = 0.5, toks: int | None = 16) -> RequestRecord:
    return RequestRecord(phase="p", index=i, api="completions", prompt_id=0, sent_at=T0,
                         start_s=i * 0.01, ok=ok, ttft_s=ttft if ok else None,
                         tpot_s=tpot if ok else None, e2e_s=e2e if ok else None,
                         stream_end_s=e2e if ok else None,
                         output_tokens=toks if ok else None,
                         failure_kind=None if ok else "timeout")


records = st.lists(st.builds(_rec, st.integers(0, 40), st.booleans(), maybe, maybe, maybe,
                             st.one_of(st.none(), st.integers(0, 64))), max_size=60)
slos = st.dictionaries(st.sampled_from(SLO_TARGETS),
                       st.floats(min_value=1e-3, max_value=1e4, allow_nan=False),
                       min_size=1)


def _meets(r: RequestRecord, slo: dict[str, float]) -> bool:
    """The rule written out again: completed, and every target's figure known, finite, <=."""
    if not r.ok:
        return False
    for k, ms in slo.items():
        v = {"ttft_ms": r.ttft_s, "e2e_ms": r.e2e_s,
             "tpot_ms": 0.0 if (r.output_tokens is not None and r.output_tokens <= 1)
             or (r.tpot_s in (None, 0.0) and r.ttft_s is not None and r.ttft_s == r.e2e_s
                 and math.isfinite(r.ttft_s))   # all output in one read: no decode time seen
             else r.tpot_s}[k]
        if v is None or not math.isfinite(v) or v * 1000 > ms:
            return False
    return True


@given(records, slos)
def test_goodput_counts_distinct_requests_meeting_every_target(recs, slo) -> None:
    gp = goodput(recs, slo)
    first = {}
    for r in recs:
        first.setdefault(r.index, r)
    assert gp.trials == len(first)
    assert gp.met == sum(_meets(r, slo) for r in first.values())
    if gp.trials:
        iv = wilson_interval(gp.met, gp.trials)
        assert (gp.low, gp.high) == (iv.low, iv.high)
        assert gp.low <= gp.share == gp.met / gp.trials <= gp.high
    else:
        assert gp.share is gp.low is gp.high is None   # unknown, never 0
    # every request that did not meet them all is counted as missing some target
    assert all(v >= 1 for v in gp.missed.values())
    assert max(gp.missed.values(), default=0) <= gp.trials - gp.met
    # round trip through the run file
    assert read_goodput(json.loads(json.dumps(gp.model_dump(mode="json")))) == gp


@given(records, slos, st.floats(min_value=1.0, max_value=100.0))
def test_looser_targets_never_lower_goodput(recs, slo, k) -> None:
    looser = {n: v * k for n, v in slo.items()}
    assert goodput(recs, looser).met >= goodput(recs, slo).met


def test_unknown_or_not_finite_figures_never_meet_a_target() -> None:
    slo = {"ttft_ms": 100.0}
    assert slo_misses(_rec(0, ttft=None), slo) == ["ttft_ms"]
    assert slo_misses(_rec(0, ttft=math.nan), slo) == ["ttft_ms"]
    assert slo_misses(_rec(0, ok=False), slo) == ["failed"]
    assert slo_misses(_rec(0, ttft=0.1), slo) == []          # <= the target meets it
    assert slo_misses(_rec(0, tpot=None, toks=1), {"tpot_ms": 1.0}) == []   # bench serve: 0


def test_goodput_refuses_bad_targets() -> None:
    for slo in ({}, {"ttft": 1.0}, {"ttft_ms": 0.0}, {"e2e_ms": math.inf}, {"tpot_ms": True}):
        with pytest.raises(ValueError, match="SLO|target"):
            goodput([_rec(0)], slo)  # type: ignore[arg-type]


def test_phase_stats_carries_goodput_only_with_an_slo() -> None:
    recs = [_rec(0, ttft=0.05), _rec(1, ttft=0.2), _rec(2, ok=False)]
    assert phase_stats("p", recs, expected=3, concurrency=1).goodput is None
    gp = phase_stats("p", recs, expected=3, concurrency=1, slo={"ttft_ms": 100}).goodput
    assert gp is not None and (gp.met, gp.trials) == (1, 3)
    assert gp.missed == {"ttft_ms": 1, "failed": 1}


@given(st.recursive(st.none() | st.booleans() | st.integers(-5, 50) | st.text(max_size=8)
                    | st.floats(allow_nan=True, allow_infinity=True),
                    lambda c: st.lists(c, max_size=4)
                    | st.dictionaries(st.sampled_from(["met", "trials", "share", "low", "high",
                                                       "slo", "missed", "ttft_ms", "x"]),
                                      c, max_size=8), max_leaves=20))
def test_read_goodput_never_raises_and_reads_only_whole_blocks(doc) -> None:
    gp = read_goodput(doc)
    if gp is not None:
        assert 0 <= gp.met <= gp.trials and gp.slo
        assert all(k in SLO_TARGETS and math.isfinite(v) and v > 0 for k, v in gp.slo.items())
        if gp.trials:
            assert gp.low is not None and gp.high is not None and gp.share is not None
            assert 0 <= gp.low <= gp.share <= gp.high <= 1


def test_profile_slo_any_subset_at_least_one() -> None:
    assert ProbeSpec.model_validate({"slo": {"ttft_ms": 500}}).slo.targets() == {
        "ttft_ms": 500.0}
    for bad in ({}, {"ttft_ms": -1}, {"e2e_ms": "inf"}, {"ttft": 5}):
        with pytest.raises(ValueError):
            ProbeSpec.model_validate({"slo": bad})


# -- the probe's text, runs, live panel ----------------------------------------------------------
def test_probe_text_and_runs_show_goodput(tmp_path: Path) -> None:
    from seat_console.commands.probe_cmd import render_phase
    from seat_console.probe.store import list_runs

    d = write_run(tmp_path / "runs", phases={"load": (8, 2)}, slo={"ttft_ms": 100.0})
    s = json.loads((d / "summary.json").read_text())
    text = "\n".join(render_phase(s["phases"][0]))
    assert "goodput 6/8 = 75.0 % [40.9, 92.9] (Wilson 95 %) against TTFT <= 100 ms" in text
    assert "missed: failed 2" in text
    (row,) = list_runs(tmp_path / "runs")
    assert row["phases"][0]["goodput"]["met"] == 6
    # an edited block is unreadable, said so; never a figure
    s["phases"][0]["stats"]["goodput"]["met"] = 9
    assert "goodput: unreadable" in "\n".join(render_phase(s["phases"][0]))


def test_live_panel_shows_goodput_over_finished_requests() -> None:
    from seat_console.probe.live import live_view
    from seat_console.probe.run import PhaseProgress, Progress
    from seat_console.widgets.probe import render_live

    ph = PhaseProgress(name="c4", expected=10, concurrency=4, completed=3, failed=1,
                       slo_met=2, state="running")
    v = live_view(Progress(run_id="r", phases=[ph], status="running", slo={"ttft_ms": 50.0}),
                  now=1.0)
    assert (v.phases[0].slo_met, v.phases[0].goodput_low) == (2, wilson_interval(2, 4).low)
    assert "goodput 2/4 = 50.0 %" in render_live(v).plain
    v = live_view(Progress(run_id="r", phases=[ph], status="running"), now=1.0)
    assert v.phases[0].slo_met is None and "goodput" not in render_live(v).plain


# -- the evidence ---------------------------------------------------------------------------------
def _bracket(tmp_path: Path, speed_b: float, slo_b: dict[str, float] | None = None) -> Path:
    from seat_console.evidence.bracket import plan_bracket

    runs, cmp_dir = tmp_path / "runs", tmp_path / "comparisons" / "cmp-1"
    legs = []
    slo = {"ttft_ms": 75.0}
    for leg in plan_bracket("ABBA", 1):
        a = leg.arm == "A"
        probe = write_run(runs, ident=IDENT_A if a else IDENT_B, speed=1.0 if a else speed_b,
                          at=T0 + timedelta(minutes=5 * leg.n), phases={"load": (64, 0)},
                          slo=slo if a else (slo_b or slo))
        legs.append(write_leg(cmp_dir, leg.n, leg.arm, probe, kv=9000, pair=leg.pair,
                              round_=leg.round))
    (cmp_dir / "compare.json").write_text(json.dumps({
        "bracket_id": "br-1", "order": "ABBA", "rounds": 1, "legs": legs,
        "status": "complete", "restored": True, "hold_released": True}))
    return cmp_dir


def _goodput_claim(rep: dict) -> dict:
    (c,) = [c for c in rep["claims"] if c["subject"] == "goodput (load)"]
    return c


def test_a_goodput_difference_with_disjoint_intervals_is_claimed(tmp_path: Path) -> None:
    # B at half speed: TTFT 100 ms > 75 ms on every request; A's 50 ms meets it
    rep = rp.build_report(rp.load_inputs([str(_bracket(tmp_path, speed_b=0.5))]))
    c = _goodput_claim(rep)
    assert c["survives"], c
    assert "A 128/128 = 100.0 %" in c["statement"] and "B 0/128 = 0.0 %" in c["statement"]
    assert "A higher" in c["statement"]
    md = rp.render_markdown(rep)
    assert "| goodput (met/sent) |" in md and "64/64 = 100.0 %" in md


def test_equal_goodput_claims_no_difference(tmp_path: Path) -> None:
    c = _goodput_claim(rp.build_report(rp.load_inputs([str(_bracket(tmp_path, 1.0))])))
    assert not c["survives"]
    assert {r["rule"] for r in c["refused_by"]} == {rp.RULE_OVERLAP}


def test_legs_against_different_slos_back_no_goodput_claim(tmp_path: Path) -> None:
    c = _goodput_claim(rp.build_report(rp.load_inputs([str(
        _bracket(tmp_path, 0.5, slo_b={"ttft_ms": 200.0}))])))
    assert not c["survives"] and rp.RULE_UNMATCHED in {r["rule"] for r in c["refused_by"]}


def test_an_edited_goodput_is_caught_by_the_rederivation(tmp_path: Path) -> None:
    d = write_run(tmp_path / "runs", phases={"load": (8, 2)}, slo={"ttft_ms": 100.0})
    s = json.loads((d / "summary.json").read_text())
    gp = s["phases"][0]["stats"]["goodput"]
    gp.update(met=8, share=1.0, high=1.0, low=wilson_interval(8, 8).low)
    (d / "summary.json").write_text(json.dumps(s))
    run = load_probe_run(d, FileLedger())
    assert any("goodput.met = 8" in x for x in run.consistency), run.consistency


async def test_a_probe_run_records_goodput_per_phase(tmp_path: Path) -> None:
    from sse_server import SSEServer
    from test_probe_run import PHASES, _loaded, _pre
    from seat_console.probe.run import Probe
    from seat_console.probe.store import RunWriter

    async with SSEServer() as srv:
        loaded = _loaded(tmp_path, srv.url, ["normal", "multi"],
                         "[probe.slo]\ne2e_ms = 60000\n" + PHASES)
        probe = Probe(loaded, _pre(srv.url), writer=RunWriter(root=tmp_path / "runs"))
        s = await probe.run()
    assert s["settings"]["slo"] == {"e2e_ms": 60000.0}
    single, conc = s["phases"]
    assert (single["stats"]["goodput"]["met"], single["stats"]["goodput"]["trials"]) == (4, 4)
    assert conc["stats"]["goodput"]["trials"] == 8
    assert [p.slo_met for p in probe.progress.phases] == [4, conc["stats"]["goodput"]["met"]]
