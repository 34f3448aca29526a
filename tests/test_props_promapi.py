"""Property tests of the Prometheus API v1 reply parser (seat_console.fleet.promapi) and the
row builder over what it returns: only documented errors naming the input, no hang, unknown
never 0, one bad series never blanks the rows."""

from __future__ import annotations

import json
import math
from dataclasses import replace

from hypothesis import example, given
from hypothesis import strategies as st

from seat_console.fleet.promapi import PromError, parse_response, parse_value
from seat_console.fleet.rows import PART, build_rows, cells, queries, split
from test_fleet_rows import states_answer

Q = 'max by (instance) (seat_engine_up)'
WHAT = "http://prom.test:9090/api/v1/query"

json_leaf = st.none() | st.booleans() | st.integers(-10**20, 10**20) | st.floats(
    allow_nan=False, allow_infinity=False) | st.text(max_size=20)
json_any = st.recursive(json_leaf, lambda c: st.lists(c, max_size=4) | st.dictionaries(
    st.text(max_size=8), c, max_size=4), max_leaves=20)
value_text = st.sampled_from(["1", "0", "NaN", "+Inf", "-Inf", "1e3", "nope", "", "0x10"]) \
    | st.floats(allow_nan=True).map(str)


def _parse_or_documented(body: bytes | str) -> None:
    try:
        res = parse_response(body, Q, WHAT)
    except PromError as exc:
        assert exc.kind in ("bad-response", "query")
        assert WHAT in str(exc) and "seat_engine_up" in str(exc)   # names the input
        return
    for s in res.series:
        for _, v in s.points:
            assert v is None or not math.isnan(v)


@given(st.binary(max_size=300))
def test_any_bytes_only_documented_errors(body):
    _parse_or_documented(body)


@given(json_any)
def test_any_json_only_documented_errors(doc):
    _parse_or_documented(json.dumps(doc))


@given(st.dictionaries(st.sampled_from(["status", "data", "warnings", "errorType", "error"]),
                       json_any, max_size=5))
def test_reply_shaped_json_only_documented_errors(doc):
    _parse_or_documented(json.dumps(doc))


@given(st.lists(st.tuples(st.text(min_size=1, max_size=12), value_text), min_size=1,
                max_size=12), st.integers(0, 11), json_any)
def test_one_bad_series_never_blanks_the_rest(items, bad_at, junk):
    result = [{"metric": {"instance": f"{name}:{n}"}, "value": [1700000000.5, val]}
              for n, (name, val) in enumerate(items)]
    bad_at %= len(result)
    result[bad_at] = junk if not isinstance(junk, dict) else {"metric": 5, "value": junk}
    body = json.dumps({"status": "success", "data": {"resultType": "vector", "result": result}})
    res = parse_response(body, Q, WHAT)
    assert len(res.series) == len(result) - 1
    assert len(res.problems) == 1 and f"series {bad_at}" in res.problems[0]
    for s in res.series:
        n = int(s.labels["instance"].rsplit(":", 1)[1])
        want = parse_value(items[n][1])
        assert s.value == want or (want is None and s.value is None)


label_value = st.sampled_from(["", "a", "x" * 1024, "x" * 1025, 3, None, ["a"], {"a": "b"}])
label_key = st.sampled_from(["instance", "node", "k" * 1024, "k" * 1025])
metric = st.dictionaries(label_key, label_value, max_size=3) | st.sampled_from([None, 5, "m", []])
point_time = st.floats(allow_nan=False) | st.integers(-2**63, 2**63 - 1) \
    | st.sampled_from([True, None, "1"])
point = st.tuples(point_time, value_text | st.sampled_from([1, None, True, []])).map(list) \
    | st.sampled_from([None, [], [1.0], [1.0, "1", 2]])
sample = st.fixed_dictionaries({"metric": metric, "value": point}) \
    | st.fixed_dictionaries({"value": point}) | json_any


@given(st.lists(sample, max_size=8))
@example([{"metric": {"a": "x" * 1025}, "value": [1.0, "1"]}])
@example([{"metric": {"k" * 1025: "a"}, "value": [1.0, "1"]}])
@example([{"metric": {"a": ["b"]}, "value": [1.0, "1"]}])
@example([{"metric": {"a": "b"}, "value": [True, "1"]}, {"value": [1e300, "NaN"]}])
def test_vector_fast_path_agrees_with_the_checks(result):
    """The instant-vector fast path (promapi._vector_sample) keeps, values and refuses
    exactly what the per-field checks do: same series, same problems."""
    import seat_console.fleet.promapi as promapi

    try:
        body = json.dumps({"status": "success", "data": {"resultType": "vector",
                                                         "result": result}},
                          allow_nan=False)
    except ValueError:                    # NaN / Infinity floats: not JSON
        return
    fast = parse_response(body, Q, WHAT)
    orig = promapi._vector_sample
    promapi._vector_sample = lambda item, out: False
    try:
        slow = parse_response(body, Q, WHAT)
    finally:
        promapi._vector_sample = orig
    assert fast.problems == slow.problems
    assert [(dict(a.labels), a.points) for a in fast.series] == \
        [(dict(b.labels), b.points) for b in slow.series]


@given(value_text)
def test_unknown_value_is_none_never_zero(raw):
    v = parse_value(raw)
    try:
        f = float(raw)
    except ValueError:
        assert v is None
        return
    assert (v is None) if math.isnan(f) else (v == f)


def test_status_error_names_the_error_type():
    body = json.dumps({"status": "error", "errorType": "bad_data",
                       "error": "1:5: parse error: unexpected"})
    try:
        parse_response(body, Q, WHAT)
    except PromError as exc:
        assert exc.kind == "query" and exc.error_type == "bad_data"
        assert "bad_data" in str(exc) and "parse error" in str(exc)
    else:
        raise AssertionError("status: error was accepted")


def test_html_reply_says_it_is_not_the_api():
    try:
        parse_response(b"<html><body>Sign in</body></html>", Q, WHAT)
    except PromError as exc:
        assert exc.kind == "bad-response" and "HTML page" in str(exc)
    else:
        raise AssertionError("HTML was accepted")


def test_warnings_are_kept():
    body = json.dumps({"status": "success", "warnings": ["store eu-1 did not answer"],
                       "data": {"resultType": "vector", "result": []}})
    assert parse_response(body, Q, WHAT).warnings == ("store eu-1 did not answer",)


# -- the rows over parsed replies -------------------------------------------------------------
def _vec(series):  # noqa: ANN001, ANN202
    body = json.dumps({"status": "success", "data": {"resultType": "vector", "result": [
        {"metric": m, "value": [1000.0, v]} for m, v in series]}})
    return parse_response(body, "q", WHAT)


@given(st.lists(st.sampled_from(["1", "0", "NaN", "x"]), min_size=1, max_size=6),
       st.lists(st.sampled_from(["1", "0", "NaN", "x", None]), min_size=6, max_size=6))
def test_rows_unknown_flags_never_read_as_zero(seen_vals, flags):
    insts = [f"n{i}:9469" for i in range(len(seen_vals))]
    got = {name: None for name in queries(600, 15)}
    got["seen"] = _vec([({"instance": i}, "999.0") for i in insts])
    fams = ["seat_engine_up", "seat_hold_active", "seat_hold_lease_armed",
            "seat_hold_without_lease", "seat_silence_active", "seat_probe_disrupted"]
    got["states"] = states_answer({insts[0]: dict(zip(fams, flags, strict=True))})
    rows = build_rows(got, 1000.0, 15.0)
    assert len(rows) == len(insts)                     # every seat keeps its row
    row = next(r for r in rows if r.instance == insts[0])
    up = dict(zip(fams, flags, strict=True))["seat_engine_up"]
    if up in ("NaN", "x", None):
        assert row.engine_up is None and row.state != "healthy"
    for r in rows:
        texts = cells(r, 1000.0)
        if r.running is None:
            assert texts[4] == "n/a"
        if r.gpus < 0:                                  # the GPU query failed: n/a, not 0
            assert texts[7] == "n/a"


@given(st.lists(st.tuples(st.sampled_from(["states", "times", "probe", "", "x", None]),
                          st.dictionaries(st.sampled_from(["instance", "__name__", "q"]),
                                          st.text(max_size=6), max_size=3),
                          value_text), max_size=12))
def test_split_puts_each_series_in_its_part_and_names_the_rest(series):
    """:func:`split` of a merged answer (any labels, any ``part`` tag or none): every series
    tagged with a part name is in that part and only there, the rest are counted in a
    problem, warnings stay; never raises, never drops a tagged series."""
    names = ["states", "times", "probe"]
    res = _vec([({**m, **({PART: p} if p is not None else {})}, v) for p, m, v in series])
    res = replace(res, warnings=("partial",))
    got = split(res, names)
    assert list(got) == names
    for n in names:
        want = [s for s in res.series if s.labels.get(PART) == n]
        assert list(got[n].series) == want
    stray = sum(1 for s in res.series if s.labels.get(PART) not in names)
    assert got["states"].warnings == ("partial",)
    if stray:
        assert any(f"{stray} series" in p for p in got["states"].problems)
    else:
        assert got["states"].problems == res.problems
    assert split(None, names) == dict.fromkeys(names)
