"""Bracket ordering and pairing."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from seat_console.evidence.bracket import BracketError, LegPlan, pairs, plan_bracket


def test_abba_one_round() -> None:
    legs = plan_bracket("ABBA", 1)
    assert [leg.name for leg in legs] == ["A1", "B2", "B3", "A4"]
    assert [(a.name, b.name) for a, b in pairs(legs)] == [("A1", "B2"), ("A4", "B3")]


def test_abba_two_rounds_pairs_within_a_round() -> None:
    legs = plan_bracket("ABBA", 2)
    assert "".join(leg.arm for leg in legs) == "ABBAABBA"
    assert [(a.name, b.name) for a, b in pairs(legs)] == [
        ("A1", "B2"), ("A4", "B3"), ("A5", "B6"), ("A8", "B7")]
    assert {leg.round for leg in legs[4:]} == {2}
    assert [leg.dirname for leg in legs[:2]] == ["1-A", "2-B"]


@pytest.mark.parametrize("order, rounds, match", [
    ("ABB", 1, "2 B legs cannot all pair"), ("ABCA", 1, "letters A"), ("A", 1, "letters A"),
    ("ABBA", 0, "--rounds 0"), ("ABBA", 17, "--rounds 17"), ("AAAA", 1, "cannot all pair"),
])
def test_bad_brackets_are_named(order: str, rounds: int, match: str) -> None:
    with pytest.raises(BracketError, match=match):
        plan_bracket(order, rounds)


def test_pairs_refuses_an_unpaired_leg() -> None:
    with pytest.raises(BracketError, match="only arm A"):
        pairs((LegPlan(1, "A", 1, "r1p1"),))


@given(st.text(alphabet="AB", min_size=1, max_size=8).map(lambda s: s + s.translate(
    str.maketrans("AB", "BA"))), st.integers(1, 4))
def test_every_balanced_order_pairs_every_leg_once(order: str, rounds: int) -> None:
    legs = plan_bracket(order, rounds)
    ps = pairs(legs)
    assert len(ps) * 2 == len(legs) == len(order) * rounds
    used = [leg.n for p in ps for leg in p]
    assert sorted(used) == list(range(1, len(legs) + 1))
    assert all(a.round == b.round and a.arm == "A" and b.arm == "B" for a, b in ps)


def test_transitions_give_every_leg_a_fresh_container() -> None:
    from seat_console.evidence.bracket import plan_lines, transition

    legs = plan_bracket("ABBA", 2)
    prev = None
    seen = []
    for leg in legs:
        seen.append(transition(prev, leg.arm))
        prev = leg.arm
    assert seen == ["restart-resident", "swap", "restart-candidate", "restore",
                    "restart-resident", "swap", "restart-candidate", "restore"]
    lines = plan_lines(plan_bracket("ABBA"), "seat-resident", "seat-probe")
    assert len(lines) == 5 and "swap" in lines[1] and "restore" in lines[3]
    assert lines[-1].startswith("end: the resident (seat-resident) already holds the seat")
    assert plan_lines(plan_bracket("BAAB"), "r", "c")[-1].startswith("end: restore the resident")
