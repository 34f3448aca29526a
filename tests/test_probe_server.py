"""Per-request server truth (issue 35): the engine's queue time and TTFT from the final usage
chunk (vLLM ``--enable-per-request-metrics``) beside the client's, per request; the client −
engine distribution per phase; token mismatches counted with their first IDs."""

from __future__ import annotations

import json
import math
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from evidence_factory import T0
from seat_console.core.probe_record import RequestRecord
from seat_console.core.probe_stats import phase_stats
from seat_console.core.server_metrics import ServerTiming, parse_server_metrics
from seat_console.evidence.runs import read_server_check
from seat_console.probe.client import StreamTimer, parse_chunk

USAGE = {"id": "c", "object": "text_completion", "choices": [],
         "usage": {"prompt_tokens": 7, "completion_tokens": 2, "total_tokens": 9}}


def test_the_usage_chunks_metrics_reach_the_record() -> None:
    t = StreamTimer()
    t.feed_payload(json.dumps({"choices": [{"text": "a"}], "usage": {
        "prompt_tokens": 7, "completion_tokens": 1}}).encode(), 0.10)
    t.feed_payload(json.dumps({"choices": [{"text": "b"}], "usage": {
        "prompt_tokens": 7, "completion_tokens": 2}}).encode(), 0.12)
    t.feed_payload(json.dumps({**USAGE, "metrics": {
        "time_to_first_token_ms": 60.0, "queue_time_ms": 15.0, "mean_itl_ms": 20.0}}).encode(),
        0.13)
    t.feed("[DONE]", 0.13)
    f = t.result()
    assert math.isclose(f["server_ttft_s"], 0.060) and math.isclose(f["server_queue_s"], 0.015)
    # without metrics: unknown, never 0
    assert parse_chunk(json.dumps(USAGE)).server is None


@given(st.one_of(st.none(), st.integers(), st.text(max_size=4), st.lists(st.integers()),
                 st.dictionaries(st.sampled_from(["time_to_first_token_ms", "queue_time_ms",
                                                  "x"]),
                                 st.one_of(st.none(), st.booleans(), st.text(max_size=4),
                                           st.integers(-10, 10**6),
                                           st.floats(allow_nan=True, allow_infinity=True)))))
def test_server_metrics_parse_or_are_unknown(m) -> None:
    t = parse_server_metrics(m)
    assert t is None or isinstance(t, ServerTiming)
    if t is not None:
        for v in t:
            assert v is None or (math.isfinite(v) and v >= 0)
    # through the chunk parser: never an exception other than the documented one
    parse_chunk(json.dumps({**USAGE, "metrics": m}, allow_nan=True).replace("NaN", "null"))


def _rec(i: int, ttft: float, q: float | None, st_: float | None, streamed: int = 16,
         out: int = 16) -> RequestRecord:
    return RequestRecord(phase="p", index=i, api="completions", prompt_id=0, sent_at=T0,
                         start_s=0.0, ok=True, ttft_s=ttft, e2e_s=0.5, stream_end_s=0.5,
                         output_tokens=out, tokens_streamed=streamed, server_queue_s=q,
                         server_ttft_s=st_)


def test_client_minus_server_and_token_mismatches_per_phase() -> None:
    recs = [_rec(0, 0.10, 0.02, 0.05), _rec(1, 0.20, 0.05, 0.10, streamed=15),
            _rec(2, 0.30, None, None), _rec(3, 0.30, None, None, streamed=17)]
    sv = phase_stats("p", recs, expected=4, concurrency=1).server
    assert sv.with_metrics == 2 and sv.client_minus_server.n == 2
    assert math.isclose(sv.client_minus_server.p50_s, (0.03 + 0.05) / 2)
    assert sv.token_mismatches == 2 and sv.token_mismatch_first == [1, 3]


def test_text_says_once_when_the_engine_gives_no_per_request_metrics(tmp_path: Path) -> None:
    from seat_console.commands.probe_cmd import render_phase, render_summary

    recs = [_rec(0, 0.1, 0.01, 0.05), _rec(1, 0.1, None, None, streamed=3)]
    st_ = phase_stats("p", recs, expected=2, concurrency=1).model_dump(mode="json")
    text = "\n".join(render_phase({"name": "p", "state": "complete", "stats": st_}))
    assert "per request vs the engine (1 with its metrics): client − engine TTFT" in text
    assert "token mismatches (stream count ≠ usage.completion_tokens): 1 (first: requests 1)" \
        in text
    s = {"run_id": "r", "status": "complete", "server_metrics": "the engine returned no "
         "per-request metrics", "phases": []}
    assert render_summary(s).count("per-request metrics: the engine returned no") == 1


@given(st.one_of(st.none(), st.integers(), st.dictionaries(
    st.sampled_from(["with_metrics", "client_minus_server", "token_mismatches",
                     "token_mismatch_first"]),
    st.one_of(st.none(), st.booleans(), st.integers(-3, 9), st.lists(st.integers(-3, 9)),
              st.floats(allow_nan=True), st.dictionaries(st.sampled_from(["n", "p50_s"]),
                                                         st.floats(allow_nan=True))))))
def test_read_server_check_never_raises(d) -> None:
    got = read_server_check(d)
    if got is not None:
        assert got["token_mismatches"] is None or got["token_mismatches"] >= 0
        assert all(isinstance(i, int) and i >= 0 for i in got["token_mismatch_first"])


# -- the sweep ----------------------------------------------------------------------------------
from seat_console.core.sweep import SweepStep, judge, ladder  # noqa: E402


def _step(c: int, tok: float | None, gp: float | None = None, ok: bool = True) -> SweepStep:
    return SweepStep(phase=f"sweep-c{c}", concurrency=c, complete=ok, output_tok_s=tok,
                     ttft_p95_s=0.1, goodput=gp)


def test_the_knee_is_the_step_before_the_stop() -> None:
    v = judge([_step(1, 100), _step(2, 190), _step(4, 200)])      # 200 < 1.1 × 190
    assert v.found and v.stopped_at == "sweep-c4" and v.knee.concurrency == 2
    v = judge([_step(1, 100, 1.0), _step(2, 190, 0.5)])            # goodput under 90 %
    assert v.stopped_at == "sweep-c2" and "goodput 50.0 % < 90 %" in v.stopped_by
    v = judge([_step(1, 100), _step(2, 300)])                      # still growing at the top
    assert not v.found and v.knee.concurrency == 2 and v.stopped_by is None
    v = judge([_step(1, None, ok=False)])
    assert v.found and v.knee is None and "not complete" in v.stopped_by


@given(st.lists(st.tuples(st.floats(min_value=0, max_value=1e6), st.one_of(
    st.none(), st.floats(min_value=0, max_value=1)), st.booleans()), min_size=1, max_size=8))
def test_the_rule_holds_below_the_knee(raw) -> None:
    steps = [_step(2 ** i, t, g, ok) for i, (t, g, ok) in enumerate(raw)]
    v = judge(steps)
    k = -1 if v.knee is None else steps.index(v.knee)
    for i, s in enumerate(steps[:k + 1]):           # every step up to the knee met the rule
        assert s.complete and (s.goodput is None or s.goodput >= 0.9)
        assert i == 0 or s.output_tok_s >= steps[i - 1].output_tok_s * 1.1
    if v.found:
        assert steps[k + 1].phase == v.stopped_at
    assert ladder(12) == [1, 2, 4, 8, 12]


async def test_a_probe_sweep_stops_by_its_rule(tmp_path: Path) -> None:
    from sse_server import SSEServer
    from test_probe_run import PHASES, _loaded, _monitor, _pre
    from seat_console.probe.run import Probe, SweepSpec
    from seat_console.probe.store import RunWriter

    async with SSEServer() as srv:
        loaded = _loaded(tmp_path, srv.url, ["normal"],
                         "[probe.slo]\nttft_ms = 0.0001\n" + PHASES)
        probe = Probe(loaded, _pre(srv.url), writer=RunWriter(root=tmp_path / "runs"),
                      sweep=SweepSpec(top=8), monitor_factory=lambda s: _monitor(s))
        s = await probe.run()
    sw = s["sweep"]
    assert [b["name"] for b in s["phases"]] == ["sweep-c1"]      # the steps above: not run
    assert sw["found"] and sw["stopped_at"] == "sweep-c1" and sw["knee"] is None
    # no docker events here: the step is unverified (no headline), so not complete — the rule
    # stops there before any goodput is read, and a step with no figure is never a knee
    assert "is not complete" in sw["stopped_by"] and sw["steps"][0]["complete"] is False
    assert sw["steps"][0]["goodput"] == 0.0 and "knee" in "\n".join(
        __import__("seat_console.commands.probe_cmd", fromlist=["x"]).sweep_lines(sw))


def test_the_report_rederives_the_knee_per_arm(tmp_path: Path) -> None:
    from evidence_factory import write_run
    from seat_console.evidence import report as rp

    # equal figures at every step: tok/s does not grow, the sweep stops at c2, knee c1
    d = write_run(tmp_path / "runs", phases={"sweep-c1": (8, 0), "sweep-c2": (8, 0)})
    sp = d / "summary.json"
    s = json.loads(sp.read_text())
    s["sweep"] = {"top": 2, "goodput_min": 0.9, "growth_min": 0.1,
                  "knee": {"concurrency": 64}}            # a recorded knee is not trusted
    sp.write_text(json.dumps(s))
    rep = rp.build_report(rp.load_inputs([str(d)]))
    (rows,) = rep["sweeps"].values()
    (row,) = rows
    assert row["found"] and row["stopped_at"] == "sweep-c2" and row["knee"]["phase"] == "sweep-c1"
    md = rp.render_markdown(rep)
    assert "## Load sweep: the knee per arm" in md and "under 1.10 × the previous" in md


def test_the_report_rederives_the_server_figures_an_edit_cannot_hide(tmp_path: Path) -> None:
    """The per-request figures are re-derived from requests.jsonl like the others: an edited
    ``token_mismatches`` (a count a reader trusts to be 0) is named; a run from before the
    probe recorded them (no ``server`` block) is not."""
    from evidence_factory import write_run
    from seat_console.evidence import report as rp

    d = write_run(tmp_path / "runs", phases={"p": (4, 0)})
    sp = d / "summary.json"
    s = json.loads(sp.read_text())
    sv = s["phases"][0]["stats"]["server"]
    assert rp.build_report(rp.load_inputs([str(d)]))["consistency"] == []
    sv["token_mismatches"], sv["token_mismatch_first"] = 0, []        # "no mismatch"
    sp.write_text(json.dumps(s))
    found = [c["problem"] for c in rp.build_report(rp.load_inputs([str(d)]))["consistency"]]
    assert any("server.token_mismatches = 0, but requests.jsonl gives 4" in x for x in found), \
        found
    del s["phases"][0]["stats"]["server"]                              # an older run
    sp.write_text(json.dumps(s))
    assert rp.build_report(rp.load_inputs([str(d)]))["consistency"] == []
