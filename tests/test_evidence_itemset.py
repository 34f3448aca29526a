"""The one parser of the evidence prompt sets (canaries, fidelity cases): bounded JSON through
``load_json`` (deep nesting, NaN and oversize refused, naming the set), the shared checks, and
only documented errors on any input (hypothesis)."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from seat_console.evidence.canaries import CanaryError, parse_canaries
from seat_console.evidence.fidelity import FidelityError, parse_cases
from seat_console.evidence.itemset import parse_item_set

PARSERS = [(parse_cases, FidelityError), (parse_canaries, CanaryError)]


def _item(**extra) -> dict:
    return {"id": "a", "kind": "prose", "prompt": "p", "max_tokens": 5, "min_words": 1,
            "max_words": 9, **extra}


@pytest.mark.parametrize("parse, error", PARSERS)
@pytest.mark.parametrize("raw, match", [
    (json.dumps([_item(note=[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[
        [1]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]])]),
     "nest"),
    ('[{"id": "a", "prompt": "p", "max_tokens": 5, "min_words": NaN}]', "NaN"),
    (b"\xff[]", "not UTF-8"),
    ('[{"id": "a", "kind": "prose", "prompt": "", "max_tokens": 5}]', "'prompt' must be"),
    ('[{"id": "a", "kind": "prose", "prompt": "p", "max_tokens": true}]', "'max_tokens'"),
])
def test_sets_are_read_bounded_and_errors_name_the_set(parse, error, raw, match) -> None:
    with pytest.raises(error, match=match) as ei:
        parse(raw, "my-set.json")
    assert "my-set.json" in str(ei.value)


@pytest.mark.parametrize("parse, error", PARSERS)
def test_duplicate_ids_name_the_item(parse, error) -> None:
    with pytest.raises(error, match=r"my-set.json item 1 \(a\): duplicate id"):
        parse(json.dumps([_item(), _item()]), "my-set.json")


def test_oversize_set_refused_before_parsing() -> None:
    with pytest.raises(FidelityError, match="byte limit"):
        parse_item_set(b"[" + b" " * (16 << 20) + b"]", "big.json", error=FidelityError,
                       noun="cases", max_tokens=10)


@given(st.one_of(st.binary(max_size=200), st.text(max_size=200),
                 st.recursive(st.none() | st.booleans() | st.integers() | st.floats()
                              | st.text(max_size=6),
                              lambda c: st.lists(c, max_size=3) | st.dictionaries(
                                  st.sampled_from(["id", "prompt", "max_tokens", "kind"]), c,
                                  max_size=4), max_leaves=20).map(json.dumps)))
@settings(max_examples=300, deadline=None)
def test_only_documented_errors(raw) -> None:
    try:
        items = parse_item_set(raw, "fuzz.json", error=FidelityError, noun="cases",
                               max_tokens=64)
    except FidelityError as exc:
        assert "fuzz.json" in str(exc)
    else:
        assert items and all(1 <= it.max_tokens <= 64 and it.item_id for it in items)
