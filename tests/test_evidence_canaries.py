"""Canary verdicts by code on fixed answers, set parsing, summaries, and one lab run."""

from __future__ import annotations

import json

import httpx

from seat_console.node.engine_client import EngineClient
from tests.engine_double import EngineDouble
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from seat_console.evidence import canaries as c
from seat_console.evidence.canaries import CanaryError, CanaryResult
from seat_console.evidence.stats import NO_DIFFERENCE

ITEMS = {i.item_id: i for i in c.shipped_canaries()}


@pytest.mark.parametrize("answer, ok", [
    ("391", True), ("391.", True), (" The answer is 391.0", True), ("+391", True),
    ("390.9", False), ("3910", False), ("thirty", False), ("", False), ("-391", False),
])
def test_arithmetic(answer: str, ok: bool) -> None:
    assert c.judge(ITEMS["arith-mul"], answer).passed is ok


@pytest.mark.parametrize("answer, ok, why", [
    ('{"name": "get_weather", "arguments": {"city": "Oslo", "unit": "celsius"}}', True, "valid"),
    ('Sure! {"name": "get_weather", "arguments": {"city": "Oslo", "unit": "celsius"}} done',
     True, "valid"),
    ('{"name": "get_weather", "arguments": {"city": "Oslo", "unit": "kelvin"}}', False,
     "arguments/unit"),
    ('{"name": "get_weather", "arguments": {"city": "Oslo"}}', False, "'unit' is a required"),
    ('{"name": "get_weather", "arguments": {"city": "Oslo", "unit": "celsius"', False,
     "no JSON object"),
    ("get_weather(Oslo)", False, "no JSON object"),
])
def test_tool_call(answer: str, ok: bool, why: str) -> None:
    v = c.judge(ITEMS["tool-weather"], answer)
    assert v.passed is ok and why in v.reason


@pytest.mark.parametrize("answer, ok, why", [
    ("```python\ndef add(a, b):\n    return a + b\n```", True, "parses"),
    ("def add(a, b): return a + b", True, "parses"),
    ("```python\ndef add(a, b)\n    return a + b\n```", False, "does not parse"),
    ("```python\ndef plus(a, b):\n    return a + b\n```", False, "defines no function 'add'"),
    ("   ", False, "no code"),
])
def test_code(answer: str, ok: bool, why: str) -> None:
    v = c.judge(ITEMS["code-add"], answer)
    assert v.passed is ok and why in v.reason


def test_prose_bounds() -> None:
    item = ITEMS["prose-oncall"]  # 5..40 words
    assert c.judge(item, "one two three four five").passed
    assert not c.judge(item, "one two three four").passed
    assert not c.judge(item, " ".join(["w"] * 41)).passed


@pytest.mark.parametrize("raw, match", [
    ("{}", "non-empty JSON list"),
    ('[{"id": "a#1", "kind": "prose", "prompt": "p", "max_tokens": 5}]', "without '#'"),
    ('[{"id": "a", "kind": "poem", "prompt": "p", "max_tokens": 5}]', "'kind' must be"),
    ('[{"id": "a", "kind": "arithmetic", "prompt": "p", "max_tokens": 5, "expected": "x"}]',
     "decimal"),
    ('[{"id": "a", "kind": "tool_call", "prompt": "p", "max_tokens": 5, '
     '"schema": {"type": 12}}]', "not valid JSON Schema"),
    ('[{"id": "a", "kind": "prose", "prompt": "p", "max_tokens": 5, "min_words": 9, '
     '"max_words": 3}]', "min_words"),
])
def test_parse_errors_name_the_set(raw: str, match: str) -> None:
    with pytest.raises(CanaryError, match=match) as ei:
        c.parse_canaries(raw, "my-canaries.json")
    assert "my-canaries.json" in str(ei.value)


@given(st.text(max_size=400))
@settings(max_examples=200, deadline=None)
def test_judges_never_raise_on_any_answer(answer: str) -> None:
    for item in ITEMS.values():
        v = c.judge(item, answer)
        assert isinstance(v.passed, bool) and v.reason


@given(st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=8),
                    lambda ch: st.lists(ch, max_size=4) | st.dictionaries(
                        st.sampled_from(["id", "kind", "prompt", "max_tokens", "expected",
                                         "schema", "defines", "min_words", "max_words"]),
                        ch, max_size=6), max_leaves=25))
@settings(max_examples=200, deadline=None)
def test_parse_only_documented_errors(doc: object) -> None:
    try:
        c.parse_canaries(json.dumps(doc), "fuzz.json")
    except CanaryError as exc:
        assert "fuzz.json" in str(exc)


def _res(item: str, kind: str, run: int, passed: bool | None) -> CanaryResult:
    return CanaryResult(item, kind, run, passed, "r", error=None if passed is not None else "x")


def test_summary_rates_and_refusal() -> None:
    rs = [_res("a", "prose", r, r < 4) for r in range(5)] + \
         [_res("b", "prose", r, True) for r in range(5)]
    s = c.summarise(rs, k=3)["prose"]
    assert (s.attempted, s.completed, s.passed) == (10, 10, 9)
    assert round(s.interval.low, 3) == 0.596 and round(s.interval.high, 3) == 0.982
    assert s.pass_k == pytest.approx((0.4 + 1.0) / 2)
    broken = c.summarise(rs[:-1] + [_res("b", "prose", 4, None)], k=3)["prose"]
    assert broken.interval is None and "incomplete population: 9/10" in broken.refused
    cmp_ = c.compare_canaries(c.summarise(rs), c.summarise([_res("a", "prose", r, True)
                                                             for r in range(10)]))
    assert cmp_["prose"].verdict == NO_DIFFERENCE
    assert "not compared" in c.compare_canaries({"prose": broken}, {"prose": s})["prose"]


def test_result_roundtrip() -> None:
    r = _res("a", "prose", 2, True)
    assert CanaryResult.from_dict(json.loads(json.dumps(r.as_dict()))) == r
    with pytest.raises(CanaryError, match="raw.jsonl"):
        CanaryResult.from_dict({"item_id": "a", "passed": "yes"}, "raw.jsonl")


def test_lab_canary_run_counts_populations(lab) -> None:
    """Real vLLM with random weights: answers are noise, so verdicts mostly fail; what is
    checked is that every run got a verdict and the populations add up."""
    items = list(ITEMS.values())
    with EngineClient(lab.vllm_url, timeout_s=120.0) as client:
        rs = c.run_canaries(client, lab.served_model_name, items, runs=3)
    assert len(rs) == 3 * len(items)
    assert all(r.error is None and r.passed is not None for r in rs), [r.error for r in rs]
    s = c.summarise(rs, k=3)
    assert s["all"].attempted == s["all"].completed == len(rs)
    assert sum(s[k].attempted for k in c.KINDS) == len(rs)
    assert s["all"].interval is not None and s["all"].refused is None


def _copy(item: str, run: int, passed: bool, answer: str) -> CanaryResult:
    return CanaryResult(item, "arithmetic", run, passed, "r", answer=answer)


def test_byte_identical_copies_across_legs_are_one_trial() -> None:
    """Issue 17: two legs of an arm with the same seeds on a deterministic engine wrote
    byte-identical results: 10/12 [0.552, 0.953], pass^3 0.600 from copies; the independent
    data are 5/6 [0.436, 0.970], pass^3 0.5."""
    leg = ([_copy("a", r, True, f"391 (a{r})") for r in range(3)]
           + [_copy("b", r, r < 2, f"answer b{r}") for r in range(3)])
    s = c.summarise(leg + leg, k=3)["arithmetic"]  # the second leg copies the first
    assert (s.completed, s.passed, s.distinct, s.distinct_passed) == (12, 10, 6, 5)
    assert (round(s.interval.low, 3), round(s.interval.high, 3)) == (0.436, 0.970)
    assert s.pass_k == pytest.approx(0.5)
    assert "12 trials, 6 distinct: 6 had the same case" in s.why
    # the same case and seed with a different answer (sampling varied) is a distinct trial
    varied = leg + [_copy("a", 0, False, "390")]
    assert c.summarise(varied)["arithmetic"].distinct == 7


def test_pass_k_needs_k_distinct_trials_per_item() -> None:
    one_seed = [_copy("a", 0, True, "391")] * 3  # three legs, one seed: one trial
    s = c.summarise(one_seed, k=3)["arithmetic"]
    assert s.distinct == 1 and s.pass_k is None
    assert "needs 3 independent trials per item (distinct seeds" in s.refused


def test_run_canaries_seeds_from_first_seed() -> None:
    seen: list[int] = []

    def handler(req: httpx.Request) -> httpx.Response:
        seen.append(json.loads(req.content)["seed"])
        return httpx.Response(200, json={"choices": [{"message": {"content": "391"}}]})

    with EngineDouble(handler) as url, EngineClient(url) as cl:
        rs = c.run_canaries(cl, "m", [ITEMS["arith-mul"]], runs=3, first_seed=6)
    assert seen == [6, 7, 8] and [r.case_id for r in rs] == ["arith-mul#r6", "arith-mul#r7",
                                                               "arith-mul#r8"]
