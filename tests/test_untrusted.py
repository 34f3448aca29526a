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
    json_depth_scan,
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


@pytest.mark.parametrize("hostile", [
    '"' + '\\"' * 500_000,              # a run of escaped quotes, never closed (was quadratic)
    '["' + '\\"' * 300_000 + "[" * 70,  # the same inside an array, then brackets in the string
    "[" * 70 + '"' * 1_000_000,           # a million quotes after deep nesting
    '\\' * 1_000_000,                   # a million backslashes
])
def test_prescan_is_one_pass_over_a_megabyte_of_hostile_text(hostile):
    """Issue #22: the string-stripping regex backtracked (32 kB of escaped quotes took 4 s of
    CPU). The scanner visits each quote, escape and bracket once: its step count is bounded by
    the length of the text, whatever the text."""
    depth, steps = json_depth_scan(hostile)
    assert steps <= len(hostile)
    assert depth == (65 if hostile.startswith("[" * 70) else (1 if hostile.startswith("[") else 0))
    with pytest.raises(InputError):
        load_json(hostile, "reply")


@given(st.text(alphabet='"\\[]{}a', max_size=400))
def test_prescan_steps_are_linear_and_depth_is_the_prefix_depth(text):
    depth, steps = json_depth_scan(text, 10_000)
    assert steps <= len(text)
    # oracle: a naive character loop that tracks strings and escapes the same way
    d = best = 0
    in_str = esc = False
    for c in text:
        if esc:
            esc = False
        elif c == "\\":
            esc = True
        elif in_str:
            in_str = c != '"'
        elif c == '"':
            in_str = True
        elif c in "[{":
            d += 1
            best = max(best, d)
        elif c in "]}":
            d = max(d - 1, 0)
    assert depth == best


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
