"""The guards every parser of outside input uses (``seat_console.core.untrusted``)."""

from __future__ import annotations

import json
import time
from datetime import datetime, timezone

import pytest
from hypothesis import given
from hypothesis import strategies as st

from seat_console.core.untrusted import (
    MAX_DEPTH,
    InputError,
    aware_utc,
    compile_re2,
    get_bool,
    get_int,
    get_str,
    json_depth_exceeds,
    load_json,
    nesting_depth,
)


def test_depth_limit_is_exact_and_strings_do_not_count():
    ok = "[" * MAX_DEPTH + "]" * MAX_DEPTH
    assert load_json(ok, "x") is not None
    with pytest.raises(InputError, match=r"^GET /x: JSON nests arrays/objects deeper than 64"):
        load_json("[" * (MAX_DEPTH + 1) + "]" * (MAX_DEPTH + 1), "GET /x")
    assert load_json(json.dumps(["[" * 500, {"a": "{" * 500}]), "x")[1] == {"a": "{" * 500}
    with pytest.raises(InputError, match="deeper"):
        load_json('{"a":' * 100 + "1" + "}" * 100, "x")


@given(st.recursive(st.none() | st.integers() | st.text(max_size=5),
                    lambda k: st.lists(k, max_size=3) | st.dictionaries(st.text(max_size=3), k,
                                                                        max_size=3),
                    max_leaves=30))
def test_prescan_agrees_with_the_parsed_depth(value):
    text = json.dumps(value)
    assert json_depth_exceeds(text, 3) == (nesting_depth(value) > 3)


@pytest.mark.parametrize("text", ["[NaN]", "[Infinity]", "[-Infinity]", "[1e400]",
                                  "[" + "9" * 5000 + "]"])
def test_non_finite_and_oversized_numbers_are_refused_by_name(text):
    with pytest.raises(InputError, match=r"^reply: "):
        load_json(text, "reply")


def test_size_limit_and_utf8():
    with pytest.raises(InputError, match="above the 10-byte limit"):
        load_json(b"[1,2,3,4,5,6]", "f", max_bytes=10)
    with pytest.raises(InputError, match="not UTF-8"):
        load_json(b'["\xff"]', "f")


def test_typed_getters_never_take_a_bool_for_a_number():
    d = {"n": True, "m": 7, "s": 5, "t": "x", "b": 1, "neg": -1}
    assert get_int(d, "n") is None and get_int(d, "m") == 7
    assert get_int(d, "neg", minimum=0) is None and get_int(d, "m", maximum=6) is None
    assert get_str(d, "s") is None and get_str(d, "t") == "x"
    assert get_bool(d, "b") is None and get_bool(d, "n") is True
    assert get_int(["not", "a", "mapping"], "n") is None


def test_aware_utc():
    with pytest.raises(InputError, match="no UTC offset"):
        aware_utc(datetime(2026, 12, 1, 10, 0), "startsAt")
    t = aware_utc(datetime(2026, 12, 1, 12, 0, tzinfo=timezone.utc), "x")
    assert t.utcoffset().total_seconds() == 0


def test_re2_is_linear_anchored_and_names_the_pattern():
    p = compile_re2("(.*){18}x", "m", anchored=True)
    t0 = time.perf_counter()
    assert p.search("a" * 20000) is None
    assert time.perf_counter() - t0 < 0.5
    assert compile_re2("ab", "m", anchored=True).search("xaby") is None
    assert compile_re2("ab", "m").search("xaby") is not None
    with pytest.raises(InputError, match=r"^matcher x: '\(a\)\\\\1' is not a valid RE2"):
        compile_re2(r"(a)\1", "matcher x")
