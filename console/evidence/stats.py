"""Interval statistics for pass rates: Wilson score interval, pass^k, and the overlap rule.

Pure functions, no I/O. Counts are integers (successes ``c`` out of trials ``n``); rates and
bounds are floats in [0, 1].
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

# The two-sided 95 % standard-normal quantile, Φ⁻¹(0.975) (NIST/SEMATECH e-Handbook, table of
# the normal distribution; statistics.NormalDist().inv_cdf(0.975) gives the same digits).
Z_95 = 1.959963984540054

NO_DIFFERENCE = "no difference can be claimed"


class StatsError(ValueError):
    """Counts that cannot describe a sample (negative, c > n, k > n, k < 1)."""


@dataclass(frozen=True)
class Interval:
    """A confidence interval for a proportion: ``low`` ≤ ``high``, both in [0, 1].

    ``successes``/``trials`` are the counts it was computed from; ``rate`` is their ratio.
    """

    successes: int
    trials: int
    low: float
    high: float

    @property
    def rate(self) -> float:
        """The point estimate ``successes / trials``."""
        return self.successes / self.trials

    def overlaps(self, other: Interval) -> bool:
        """Whether the two closed intervals share at least one point."""
        return self.low <= other.high and other.low <= self.high

    def as_dict(self) -> dict[str, float | int]:
        """JSON-ready: successes, trials, rate, low, high."""
        return {"successes": self.successes, "trials": self.trials, "rate": self.rate,
                "low": self.low, "high": self.high}


def _check_counts(successes: int, trials: int) -> None:
    if isinstance(successes, bool) or isinstance(trials, bool) or not (
            isinstance(successes, int) and isinstance(trials, int)):
        raise StatsError(f"counts must be integers, got successes={successes!r}, "
                         f"trials={trials!r}")
    if trials < 1:
        raise StatsError(f"trials={trials}: an interval needs at least one trial")
    if not 0 <= successes <= trials:
        raise StatsError(f"successes={successes} must be from 0 to trials={trials}")


def wilson_interval(successes: int, trials: int, z: float = Z_95) -> Interval:
    """The Wilson score interval for ``successes`` out of ``trials`` (95 % by default).

    Formula (E. B. Wilson, "Probable inference, the law of succession, and statistical
    inference", JASA 22 (1927) 209–212), with p̂ = c/n:

        centre = (p̂ + z²/2n) / (1 + z²/n)
        half   = z / (1 + z²/n) · sqrt(p̂(1 − p̂)/n + z²/4n²)
        [centre − half, centre + half], clipped to [0, 1] against rounding.

    Unlike the normal (Wald) interval it is not degenerate at p̂ = 0 or 1: 10/10 gives
    [0.722, 1] and 9/10 gives [0.596, 0.982].

    Raises :class:`StatsError` if the counts are not integers with 0 ≤ c ≤ n, n ≥ 1.
    """
    _check_counts(successes, trials)
    n = trials
    p = successes / n
    z2 = z * z
    denom = 1.0 + z2 / n
    centre = (p + z2 / (2 * n)) / denom
    half = (z / denom) * math.sqrt(p * (1.0 - p) / n + z2 / (4 * n * n))
    low = 0.0 if successes == 0 else max(0.0, centre - half)
    high = 1.0 if successes == n else min(1.0, centre + half)
    return Interval(successes=successes, trials=n, low=low, high=high)


def pass_hat_k(items: Iterable[tuple[int, int]], k: int) -> float:
    """pass^k: the probability that ``k`` independent runs of an item all pass, averaged.

    ``items`` is ``(c, n)`` per item: ``c`` passes out of ``n`` runs. The unbiased estimator
    per item is C(c, k) / C(n, k) (sampling k of the n runs without replacement, all passing);
    pass^k is its mean over items — as defined for τ-bench (S. Yao et al., "τ-bench: A Benchmark
    for Tool-Agent-User Interaction in Real-World Domains", 2024, arXiv:2406.12045).
    Example: one item with c = 4, n = 5, k = 3 gives C(4,3)/C(5,3) = 4/10 = 0.4.

    Raises :class:`StatsError` if there are no items, ``k`` < 1, or an item has ``k`` > n
    (it cannot be estimated from fewer than k runs) or invalid counts.
    """
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise StatsError(f"k={k!r}: pass^k needs an integer k >= 1")
    total = 0.0
    count = 0
    for c, n in items:
        _check_counts(c, n)
        if k > n:
            raise StatsError(f"k={k} exceeds the item's n={n} runs: pass^{k} needs at least "
                             f"{k} runs of every item (raise the runs per item or lower k)")
        total += math.comb(c, k) / math.comb(n, k)
        count += 1
    if count == 0:
        raise StatsError("pass^k of no items: give at least one (c, n)")
    return total / count


@dataclass(frozen=True)
class RateComparison:
    """Two arms' pass rates with intervals and the verdict the overlap rule allows.

    ``verdict`` is :data:`NO_DIFFERENCE` when the intervals overlap, else ``"A higher"`` or
    ``"B higher"``; it is never "parity" or "regression" from overlapping intervals.
    """

    a: Interval
    b: Interval
    verdict: str

    @property
    def claimable(self) -> bool:
        """True only when the intervals are disjoint."""
        return self.verdict != NO_DIFFERENCE


def compare_rates(a: Interval, b: Interval) -> RateComparison:
    """Apply the overlap rule: overlapping 95 % intervals → "no difference can be claimed".

    A conservative rule (disjoint Wilson intervals imply a difference at well under 5 %; the
    converse does not hold), chosen so that a small sample is never read as parity.
    """
    if a.overlaps(b):
        verdict = NO_DIFFERENCE
    else:
        verdict = "A higher" if a.low > b.high else "B higher"
    return RateComparison(a=a, b=b, verdict=verdict)
