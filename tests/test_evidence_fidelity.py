"""Fidelity comparator: parser properties, comparison logic, and the lab's real vLLM."""

from __future__ import annotations

import json

from seat_console.node.engine_client import EngineClient
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from seat_console.evidence import fidelity as f
from seat_console.evidence.fidelity import FidelityError, Position, Trace


def _body(ids: list[int], tops: list[dict[int, float]]) -> str:
    return json.dumps({"choices": [{"logprobs": {
        "tokens": [f"token_id:{i}" for i in ids],
        "token_logprobs": [t[i] for i, t in zip(ids, tops, strict=True)],
        "top_logprobs": [{f"token_id:{k}": v for k, v in t.items()} for t in tops]}}]})


def _trace(case: str, rows: list[tuple[int, dict[int, float]]]) -> Trace:
    return Trace(case, tuple(Position(t, top[t], top) for t, top in rows))


def test_parse_reads_token_ids_and_keeps_top_20() -> None:
    top = {k: -0.1 * k for k in range(1, 23)}  # 22 entries: the 20 best are kept
    (pos,) = f.parse_completion(_body([1], [top]))
    assert pos.token_id == 1 and pos.logprob == pytest.approx(-0.1)
    assert sorted(pos.top) == list(range(1, 21))


@pytest.mark.parametrize("body, match", [
    ("not json", "not JSON"),
    ("[]", "not an object"),
    ('{"error": {"message": "bad logprobs"}}', "answered an error: bad logprobs"),
    ('{"choices": [{"text": "x"}]}', "was logprobs requested"),
    ('{"choices": [{"logprobs": {"tokens": ["hello"], "token_logprobs": [-1.0], '
     '"top_logprobs": [{"hello": -1.0}]}}]}', "return_tokens_as_token_ids"),
    ('{"choices": [{"logprobs": {"tokens": ["token_id:1"], "token_logprobs": [], '
     '"top_logprobs": []}}]}', "differ in length"),
    ('{"choices": [{"logprobs": {"tokens": ["token_id:1"], "token_logprobs": [NaN], '
     '"top_logprobs": [{"token_id:1": -1}]}}]}', "NaN is not JSON"),   # refused by load_json
])
def test_parse_errors_name_the_input(body: str, match: str) -> None:
    with pytest.raises(FidelityError, match=match) as ei:
        f.parse_completion(body, source="http://engine/v1/completions")
    assert "http://engine/v1/completions" in str(ei.value)


@given(st.one_of(st.binary(max_size=300), st.text(max_size=300),
                 st.recursive(st.none() | st.booleans() | st.floats() | st.integers()
                              | st.text(max_size=12),
                              lambda c: st.lists(c, max_size=4)
                              | st.dictionaries(st.sampled_from(
                                  ["choices", "logprobs", "tokens", "token_logprobs",
                                   "top_logprobs", "error", "token_id:1"]), c, max_size=4),
                              max_leaves=30).map(json.dumps)))
@settings(max_examples=300, deadline=None)
def test_parse_only_documented_errors(body: bytes | str) -> None:
    try:
        out = f.parse_completion(body, source="fuzz")
    except FidelityError as exc:
        assert "fuzz" in str(exc)
    else:
        assert all(isinstance(p.token_id, int) for p in out)


@given(st.lists(st.tuples(st.integers(0, 1000),
                          st.dictionaries(st.integers(0, 1000),
                                          st.floats(-50, 0, allow_nan=False), min_size=1,
                                          max_size=25)), max_size=10))
def test_parse_roundtrip(rows: list[tuple[int, dict[int, float]]]) -> None:
    ids = []
    tops = []
    for tid, top in rows:
        top = dict(top)
        top.setdefault(tid, -60.0)
        ids.append(tid)
        tops.append(top)
    out = f.parse_completion(_body(ids, tops))
    assert [p.token_id for p in out] == ids
    assert all(len(p.top) == min(20, len(t)) for p, t in zip(out, tops, strict=True))


def test_compare_identical_is_exact() -> None:
    rows = [(1, {1: -0.5, 2: -1.0}), (2, {2: -0.2, 3: -2.0})]
    c = f.compare_traces(_trace("c", rows), _trace("c", rows))
    assert c.exact and c.first_divergence is None and c.positions_compared == 2
    assert c.min_top_overlap == 2 and c.max_common_abs_dlogprob == 0.0


def test_compare_stops_at_first_id_divergence() -> None:
    a = _trace("c", [(1, {1: -0.5, 2: -1.0}), (2, {2: -0.2, 3: -2.0}),
                     (5, {5: -0.1, 6: -3.0}), (7, {7: -0.1})])
    b = _trace("c", [(1, {1: -0.5, 2: -1.25}), (3, {3: -0.3, 2: -0.4}),
                     (9, {9: -0.1, 8: -9.0}), (7, {7: -0.1})])
    c = f.compare_traces(a, b)
    assert c.first_divergence == 1 and c.positions_compared == 2 and not c.exact
    # position 0: common {1, 2}, |Δ| 0.25; position 1: common {2, 3}, |Δ| 0.2 and 1.7
    assert c.max_common_abs_dlogprob == pytest.approx(1.7)
    assert c.min_top_overlap == 2  # positions 2-3 (different sets) are never looked at


def test_compare_arms_reports_unmatched_cases() -> None:
    rows = [(1, {1: -0.5})]
    s = f.compare_arms([_trace("x", rows), _trace("y", rows)], [_trace("x", rows)])
    assert s.unmatched == ("y",) and not s.all_exact
    with pytest.raises(FidelityError, match="appears twice"):
        f.compare_arms([_trace("x", rows), _trace("x", rows)], [])


def test_shipped_cases_and_bad_sets() -> None:
    cases = f.shipped_cases()
    assert len(cases) >= 5 and len({c.case_id for c in cases}) == len(cases)
    with pytest.raises(FidelityError, match="duplicate id"):
        f.parse_cases('[{"id":"a","prompt":"p","max_tokens":1},'
                      '{"id":"a","prompt":"p","max_tokens":1}]', "set.json")
    with pytest.raises(FidelityError, match="max_tokens"):
        f.parse_cases('[{"id":"a","prompt":"p","max_tokens":0}]', "set.json")


def test_trace_dict_roundtrip() -> None:
    t = _trace("c", [(1, {1: -0.5, 2: -1.0})])
    assert Trace.from_dict(json.loads(json.dumps(t.as_dict()))) == t
    with pytest.raises(FidelityError, match="stored.jsonl"):
        Trace.from_dict({"case_id": "c"}, source="stored.jsonl")


def test_lab_same_model_exact_and_banned_token_diverges_at_its_position(lab) -> None:
    """Real vLLM: the same engine twice agrees exactly (IDs, top-20 sets, logprobs); a
    deliberately different sampling setting — a logit_bias of -100 on the token arm A chose at
    position j (and not before) — is reported as diverging at exactly j."""
    cases = f.shipped_cases()[:3]
    with EngineClient(lab.vllm_url, timeout_s=120.0) as client:
        a = f.collect(client, lab.served_model_name, cases)
        b = f.collect(client, lab.served_model_name, cases)
        same = f.compare_arms(a, b)
        assert same.all_exact, same.as_dict()
        assert all(c.positions_compared == cases[0].max_tokens and c.min_top_overlap == f.TOP_N
                   for c in same.cases)
        ids = [p.token_id for p in a[0].positions]
        j = next(i for i in range(2, len(ids)) if ids[i] not in ids[:i])
        banned = f.fetch_trace(client, lab.served_model_name, cases[0],
                               {"logit_bias": {str(ids[j]): -100.0}})
    c = f.compare_traces(a[0], banned)
    assert c.first_divergence == j and c.positions_compared == j + 1 and not c.exact
    # vLLM reports raw logprobs (before logit_bias): the top-20 sets still agree up to j
    assert c.min_top_overlap == f.TOP_N
