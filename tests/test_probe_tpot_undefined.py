"""An undefined TPOT is excluded and counted, never shown as 0 (issue 35's standard: unknown is
never 0). A new user's one-round A/B/B/A compare on the lab showed "TPOT p50 r1p1 0.00→6.59 ms,
r1p2 0.00→4.54 ms" for the resident (arm A): 3 of A1's 4 single-stream requests (4 of A4's) had
every one of their 16 output tokens arrive in the network read of the first (E2E = TTFT), so
the client's ``(E2E − TTFT)/(n − 1)`` was 0 s and the p50 landed on it. Not a decode that took
no time: no decode time the client could see. ``tests/data/lab_tpot_one_read_a1_single_stream
.jsonl`` holds those four records as the probe wrote them."""

from __future__ import annotations

import json
import math
from dataclasses import replace
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from evidence_factory import T0
from seat_console.commands.probe_cmd import render_phase
from seat_console.core.probe_record import RequestRecord, parse_record
from seat_console.core.probe_stats import (
    TPOT_ONE_READ,
    TPOT_ONE_TOKEN,
    TPOT_UNKNOWN,
    phase_stats,
    tpot_of,
    tpot_population,
)
from seat_console.evidence.report import tpot_refusal
from seat_console.evidence.runs import Phase, rederive_problems, with_tpot
from seat_console.probe.client import StreamTimer

LAB = Path(__file__).parent / "data" / "lab_tpot_one_read_a1_single_stream.jsonl"


def _lab_records() -> list[RequestRecord]:
    return [parse_record(line, f"{LAB}:{n}")
            for n, line in enumerate(LAB.read_text().splitlines(), 1)]


def test_lab_case_one_read_requests_are_excluded_and_counted() -> None:
    recs = _lab_records()
    assert [r.tpot_s for r in recs].count(0.0) == 3          # what the probe wrote
    st_ = phase_stats("single-stream", recs, expected=4, concurrency=1)
    assert st_.tpot.n == 1 and st_.tpot.p50_s == recs[0].tpot_s == 0.036044186733488456
    assert st_.tpot_excluded == {TPOT_ONE_READ: 3}
    assert tpot_population(st_.tpot.n, st_.completed, st_.tpot_excluded) == (
        "TPOT over 1 of 4 requests; 3 had all output in one network read")


def test_lab_case_old_summary_is_corrected_not_flagged_as_edited() -> None:
    """The run's summary.json (written before) says tpot.p50_s 0.0: the report re-derives the
    figure from the records (with_tpot) and does not call the old figure an edit."""
    recs = _lab_records()
    old = {"name": "single-stream", "stats": {
        "phase": "single-stream", "expected": 4, "concurrency": 1, "attempted": 4,
        "completed": 4, "failed": 0, "tpot": {"n": 4, "p50_s": 0.0}}}
    problems = rederive_problems([old], {"single-stream": recs}, Path("summary.json"),
                                 Path("requests.jsonl"))
    assert not [p for p in problems if "tpot" in p]
    edited = {**old, "stats": {**old["stats"], "tpot": {"n": 4, "p50_s": 0.5}}}
    assert [p for p in rederive_problems([edited], {"single-stream": recs},
                                         Path("summary.json"), Path("requests.jsonl"))
            if "tpot.p50_s" in p]
    ph = with_tpot(Phase.from_summary(old, "summary.json"), recs)
    assert ph.tpot_p50_s == 0.036044186733488456 and ph.tpot_n == 1
    assert ph.tpot_partial == "TPOT over 1 of 4 requests; 3 had all output in one network read"
    # the cross-arm TPOT claim is refused, naming the leg and the count
    words = tpot_refusal([("r1p1", None, ph, None,  # type: ignore[list-item]
                           replace(ph, tpot_excluded={}))])
    assert len(words) == 1 and "r1p1 A: TPOT over 1 of 4 requests; 3 had all output" in words[0][1]


def _chunk(k: int) -> str:
    return json.dumps({"choices": [{"index": 0, "text": "x"}],
                       "usage": {"prompt_tokens": 3, "completion_tokens": k}})


def _timer(times: list[float]) -> dict:
    t = StreamTimer(max_tokens=len(times))
    for k, at in enumerate(times, 1):
        t.feed(_chunk(k), at)
    t.feed('{"choices":[],"usage":{"prompt_tokens":3,"completion_tokens":%d}}' % len(times),
           times[-1])
    t.feed("[DONE]", times[-1])
    return t.result()


def test_client_leaves_tpot_undefined_when_every_token_came_in_one_read() -> None:
    assert _timer([0.1] * 16)["tpot_s"] is None                 # one read: not 0
    assert _timer([0.1] * 16)["e2e_s"] == 0.1
    assert math.isclose(_timer([0.1, 0.2, 0.3])["tpot_s"], 0.1)
    assert _timer([0.1])["tpot_s"] is None                      # one output token


finite = st.floats(min_value=1e-6, max_value=100.0, allow_nan=False)


@st.composite
def records(draw) -> RequestRecord:
    ok = draw(st.booleans())
    toks = draw(st.one_of(st.none(), st.integers(0, 64)))
    ttft = draw(st.one_of(finite, st.sampled_from([math.nan, math.inf]), st.none()))
    span = draw(st.one_of(st.just(0.0), finite))
    e2e = None if ttft is None else ttft + span
    # the TPOT as either client wrote it (old: 0.0 for one read; new: None), or anything
    tpot = draw(st.one_of(
        st.just(span / (toks - 1) if toks and toks > 1 else None),
        st.just(None if span == 0.0 else (span / (toks - 1) if toks and toks > 1 else None)),
        st.none(), st.just(0.0), st.sampled_from([math.nan, -1.0]), finite))
    return RequestRecord(phase="p", index=draw(st.integers(0, 10**6)), api="completions",
                         prompt_id=0, sent_at=T0, start_s=0.0, ok=ok,
                         ttft_s=ttft if ok else None, e2e_s=e2e if ok else None,
                         stream_end_s=e2e if ok else None, tpot_s=tpot if ok else None,
                         output_tokens=toks if ok else None,
                         failure_kind=None if ok else "timeout")


@given(st.lists(records(), max_size=40))
def test_undefined_tpot_is_never_zero_and_its_population_is_stated(recs) -> None:
    st_ = phase_stats("p", recs, expected=len(recs), concurrency=1)
    # every completed request is either in the TPOT population or counted out, by reason
    assert st_.tpot.n + sum(st_.tpot_excluded.values()) == st_.completed
    assert set(st_.tpot_excluded) <= {TPOT_ONE_READ, TPOT_ONE_TOKEN, TPOT_UNKNOWN}
    assert all(v > 0 for v in st_.tpot_excluded.values())
    for r in recs:
        v, why = tpot_of(r)
        assert (v is None) != (why is None)
        assert v is None or (math.isfinite(v) and v > 0)      # a TPOT is never 0
    if st_.tpot.n:
        assert st_.tpot.p50_s > 0 and st_.tpot.max_s > 0      # type: ignore[operator]
    else:
        assert st_.tpot.p50_s is None                         # unknown, not 0
    if not st_.headline:
        return
    text = "\n".join(render_phase({"name": "p", "state": st_.state,
                                   "stats": st_.model_dump(mode="json")}))
    assert "TPOT p50/p95/p99 0.0/" not in text
    if st_.tpot_excluded:      # the population is stated, with each reason's count
        assert f"TPOT over {st_.tpot.n:,} of {st_.completed:,} request" in text
        for why, k in st_.tpot_excluded.items():
            assert str(k) in text and why in text
    else:
        assert "TPOT over" not in text


json_values = st.recursive(st.none() | st.booleans() | st.integers() | st.floats()
                           | st.text(max_size=120),
                           lambda c: st.lists(c, max_size=4)
                           | st.dictionaries(st.text(max_size=120), c, max_size=4),
                           max_leaves=12)


@given(json_values)
def test_read_tpot_excluded_keeps_only_counts(d) -> None:
    """A run file's ``stats.tpot_excluded`` (outside input): never raises; keeps only
    reason → a whole count in 0..2^63 (a float, a bool, a negative or a huge number is left
    out, never read as 0)."""
    from seat_console.core.probe_stats import read_tpot_excluded

    out = read_tpot_excluded(d)
    assert all(isinstance(k, str) and len(k) <= 100 for k in out)
    assert all(type(v) is int and 0 <= v < 2**63 for v in out.values())
    if isinstance(d, dict):
        assert out == {k: v for k, v in d.items() if len(k) <= 100 and type(v) is int
                       and 0 <= v < 2**63}
    else:
        assert out == {}


def test_a_measured_time_below_a_tenth_of_a_millisecond_never_prints_as_zero() -> None:
    """A real TPOT of 0.049 ms (hypothesis found one: 41 tokens in 1.95 ms after the first)
    printed as ``0.0`` at one decimal, which reads as the 0 an undefined TPOT must never be."""
    from seat_console.commands.probe_cmd import _ms

    assert _ms(4.8828125e-05) == "0.049"
    assert _ms(1e-9) == "<0.001"
    assert _ms(0.0) == "0.0" and _ms(None) == "n/a" and _ms(0.1234) == "123.4"
