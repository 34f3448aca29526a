"""Wilson intervals, pass^k and the overlap rule against hand-computed values and properties."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from seat_console.evidence.stats import (
    NO_DIFFERENCE,
    StatsError,
    compare_rates,
    pass_hat_k,
    wilson_interval,
)


def test_wilson_ten_of_ten() -> None:
    # By hand: z² = 3.8415, 1 + z²/n = 1.38415, centre = 1.19207/1.38415 = 0.86123,
    # half = 1.41601 · sqrt(3.8415/400) = 0.13877 → [0.72246, 1].
    iv = wilson_interval(10, 10)
    assert round(iv.low, 3) == 0.722
    assert iv.high == 1.0


def test_wilson_nine_of_ten() -> None:
    # centre = (0.9 + 0.19207)/1.38415 = 0.78898; half = 1.41601 · sqrt(0.009 + 0.00960) = 0.19312
    iv = wilson_interval(9, 10)
    assert (round(iv.low, 3), round(iv.high, 3)) == (0.596, 0.982)


def test_wilson_zero_successes_is_not_degenerate() -> None:
    iv = wilson_interval(0, 10)
    assert iv.low == 0.0 and round(iv.high, 3) == 0.278


def test_pass_hat_k_hand_value() -> None:
    assert pass_hat_k([(4, 5)], 3) == pytest.approx(0.4)
    # mean over items: (C(4,3)/C(5,3) + C(5,3)/C(5,3)) / 2 = (0.4 + 1) / 2
    assert pass_hat_k([(4, 5), (5, 5)], 3) == pytest.approx(0.7)
    assert pass_hat_k([(2, 5)], 3) == 0.0


@pytest.mark.parametrize("args", [(-1, 10), (11, 10), (0, 0), (1.5, 3), (True, 3)])
def test_wilson_rejects_bad_counts(args: tuple) -> None:
    with pytest.raises(StatsError, match="successes|trials|integers"):
        wilson_interval(*args)


def test_pass_hat_k_rejects_k_above_n_and_empty() -> None:
    with pytest.raises(StatsError, match="k=4 exceeds the item's n=3"):
        pass_hat_k([(3, 3)], 4)
    with pytest.raises(StatsError, match="no items"):
        pass_hat_k([], 1)
    with pytest.raises(StatsError, match="k=0"):
        pass_hat_k([(1, 1)], 0)


def test_overlap_rule() -> None:
    # 10/10 [0.722, 1] and 9/10 [0.596, 0.982] overlap: never "parity" or "regression".
    cmp_ = compare_rates(wilson_interval(10, 10), wilson_interval(9, 10))
    assert cmp_.verdict == NO_DIFFERENCE and not cmp_.claimable
    far = compare_rates(wilson_interval(100, 100), wilson_interval(10, 100))
    assert far.verdict == "A higher" and far.claimable
    assert compare_rates(wilson_interval(10, 100), wilson_interval(100, 100)).verdict == "B higher"


counts = st.integers(1, 10_000).flatmap(lambda n: st.tuples(st.integers(0, n), st.just(n)))


@given(counts)
def test_wilson_properties(cn: tuple[int, int]) -> None:
    c, n = cn
    iv = wilson_interval(c, n)
    assert 0.0 <= iv.low <= c / n <= iv.high <= 1.0
    mirror = wilson_interval(n - c, n)  # the interval of failures is the mirror image
    assert math.isclose(iv.low, 1 - mirror.high, abs_tol=1e-12)
    assert math.isclose(iv.high, 1 - mirror.low, abs_tol=1e-12)
    if c < n:   # one more success moves both bounds up (was: an interval overlaps itself)
        up = wilson_interval(c + 1, n)
        assert up.low > iv.low and up.high >= iv.high
        assert up.overlaps(iv) and iv.overlaps(up)   # one success apart is never a difference


@given(st.lists(st.integers(1, 30).flatmap(lambda n: st.tuples(st.integers(0, n), st.just(n))),
                min_size=1, max_size=20), st.integers(1, 5))
def test_pass_hat_k_properties(items: list[tuple[int, int]], k: int) -> None:
    if any(k > n for _, n in items):
        with pytest.raises(StatsError):
            pass_hat_k(items, k)
        return
    v = pass_hat_k(items, k)
    assert 0.0 <= v <= 1.0
    assert v <= pass_hat_k(items, 1) + 1e-12  # all k pass is no likelier than one passing
    assert pass_hat_k(items, 1) == pytest.approx(sum(c / n for c, n in items) / len(items))


# -- the paired sign-flip test -------------------------------------------------------------------
from seat_console.evidence.stats import (  # noqa: E402
    EXACT_MAX_PAIRS,
    pairs_needed,
    sign_flip_test,
)


def test_one_abba_round_can_never_claim() -> None:
    t = sign_flip_test([0.9, 1.1])  # B ~2.7x faster in both pairs
    assert t.p_value == 0.5 and t.min_p == 0.5 and not t.reachable and not t.claimable
    assert t.mde_ratio is None and t.needed_pairs == 6 == pairs_needed(0.05)
    assert pairs_needed(0.01) == 8  # 2/2^8 = 0.0078


def test_exact_p_values_by_hand() -> None:
    # 6 pairs all positive: only the observed signs and their mirror reach |sum| → 2/64
    assert sign_flip_test([0.1, 0.2, 0.3, 0.4, 0.5, 0.6]).p_value == pytest.approx(2 / 64)
    # flip the smallest: the sign vectors with |Σ| ≥ 1.9 are ±(all +) and ±(only 0.1 −): 4/64
    t = sign_flip_test([-0.1, 0.2, 0.3, 0.4, 0.5, 0.6])
    assert t.p_value == pytest.approx(4 / 64) and not t.claimable
    assert sign_flip_test([0.0] * 6).p_value == 1.0  # no difference at all
    assert sign_flip_test([0.3, -0.3]).ratio == pytest.approx(1.0)


def test_mde_is_the_shift_at_which_the_test_just_rejects() -> None:
    d = [0.1, -0.1, 0.05, 0.2, -0.02, 0.03]
    t = sign_flip_test(d)
    assert t.mde_ratio is not None and t.mde_ratio > 1
    mean = sum(d) / len(d)
    resid = [x - mean for x in d]
    delta = math.log(t.mde_ratio)
    assert sign_flip_test([r + delta * 1.001 for r in resid]).claimable
    assert not sign_flip_test([r + delta * 0.999 for r in resid]).claimable


def test_many_pairs_use_a_seeded_monte_carlo_sample() -> None:
    d = [0.05 * ((-1) ** i) + 0.01 for i in range(EXACT_MAX_PAIRS + 6)]
    t1, t2 = sign_flip_test(d), sign_flip_test(d)
    assert not t1.exact and t1.p_value == t2.p_value and 0 < t1.p_value <= 1
    strong = sign_flip_test([0.5 + 0.01 * i for i in range(30)])
    assert strong.claimable and strong.p_value == pytest.approx(1 / 10_000)


@pytest.mark.parametrize("bad", [[], [float("nan")], [1.0, float("inf")]])
def test_sign_flip_refuses_bad_input(bad: list[float]) -> None:
    with pytest.raises(StatsError):
        sign_flip_test(bad)


@given(st.lists(st.floats(-5, 5, allow_nan=False), min_size=1, max_size=10))
def test_sign_flip_p_is_a_probability_and_symmetric(d: list[float]) -> None:
    t = sign_flip_test(d)
    assert t.min_p <= t.p_value <= 1.0 or t.p_value == pytest.approx(t.min_p)
    assert sign_flip_test([-x for x in d]).p_value == pytest.approx(t.p_value)
