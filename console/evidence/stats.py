"""Statistics for claims: Wilson score interval, pass^k and the overlap rule for pass rates;
the exact sign-flip test over pairs of legs for throughput and latency.

Pure functions, no I/O. Counts are integers (successes ``c`` out of trials ``n``); rates and
bounds are floats in [0, 1].
"""

from __future__ import annotations

import math
import random
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from seat_console.core.proportion import (  # re-exported: the evidence's names
    Z_95,
    Interval,
    StatsError,
    _check_counts,
    wilson_interval,
)

NO_DIFFERENCE = "no difference can be claimed"


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


# -- paired differences between arms (throughput, latency) ------------------------------------
ALPHA = 0.05
"""The false-claim rate every difference claim is held to (two-sided, 95 %)."""

EXACT_MAX_PAIRS = 14
"""Up to 14 pairs every one of the 2^m sign assignments is enumerated (16,384); above, a
seeded Monte Carlo sample of :data:`MC_DRAWS` assignments with the (b + 1)/(N + 1) p-value."""

MC_DRAWS = 9_999


def pairs_needed(alpha: float = ALPHA) -> int:
    """The fewest pairs with which the two-sided sign-flip test can reach ``p ≤ alpha``: its
    smallest p-value is 2/2^m (the observed signs and their mirror image), so
    m = ⌈log2(2/alpha)⌉ — 6 at alpha 0.05 (2/64 = 0.031; 5 pairs give 2/32 = 0.0625)."""
    return max(1, math.ceil(math.log2(2.0 / alpha) - 1e-12))


def _sign_sums(values: Sequence[float], seed: int) -> tuple[list[float], bool]:
    """Σ s_i·v_i over every sign vector s ∈ {−1, +1}^m (m ≤ :data:`EXACT_MAX_PAIRS`), else
    over :data:`MC_DRAWS` seeded random ones; and whether the enumeration was exact."""
    m = len(values)
    if m <= EXACT_MAX_PAIRS:
        sums = [0.0]
        for v in values:
            sums = [s + v for s in sums] + [s - v for s in sums]
        return sums, True
    rng = random.Random(seed)
    return [sum(v if rng.random() < 0.5 else -v for v in values) for _ in range(MC_DRAWS)], False


def _p_from_sums(sums: Sequence[float], observed: float, exact: bool) -> float:
    obs = abs(observed) * (1 - 1e-12) - 1e-15  # ties (mirror images, equal |d|) count as ≥
    b = sum(1 for s in sums if abs(s) >= obs)
    return b / len(sums) if exact else (b + 1) / (len(sums) + 1)


def _mde_ratio(resid: Sequence[float], alpha: float, seed: int) -> float | None:
    """exp(δ*), δ* the smallest common shift of the residuals r_i (Σ r_i = 0) at which the
    sign-flip test rejects. With d_i = r_i + δ the observed statistic is mδ; a sign vector s
    (R = Σ s_i r_i, K = Σ s_i) counts against it iff |R + δK| ≥ mδ, i.e. iff
    δ ≤ c_s = max(R/(m − K), −R/(m + K)) (always, for s = ±1…1). The test rejects iff at most
    ⌊α·2^m⌋ vectors count (Monte Carlo: ⌊α(N + 1)⌋ − 1), so δ* is the next largest c_s.
    ``None`` when no shift can reach ``alpha``."""
    m = len(resid)
    if m <= EXACT_MAX_PAIRS:
        rk = [(0.0, 0)]
        for r in resid:
            rk = [(a + r, k + 1) for a, k in rk] + [(a - r, k - 1) for a, k in rk]
        allowed = math.floor(alpha * len(rk) + 1e-9)
    else:
        rng = random.Random(seed)
        rk = []
        for _ in range(MC_DRAWS):
            sv = [1 if rng.random() < 0.5 else -1 for _ in range(m)]
            rk.append((sum(si * r for si, r in zip(sv, resid)), sum(sv)))
        allowed = math.floor(alpha * (MC_DRAWS + 1) + 1e-9) - 1
    cs = sorted((math.inf if abs(k) == m else max(a / (m - k), -a / (m + k)) for a, k in rk),
                reverse=True)
    if allowed < 0 or allowed >= len(cs) or math.isinf(cs[allowed]):
        return None
    return math.exp(max(0.0, cs[allowed]))


@dataclass(frozen=True)
class PairedTest:
    """An exact two-sided sign-flip (permutation) test of a paired difference.

    ``log_ratios``: per pair ln(B/A); ``ratio``: exp(mean log ratio), the geometric-mean B/A;
    ``sd_log_ratio``: sample SD of the log ratios (``None`` for one pair); ``p_value``;
    ``min_p``: the smallest p-value this many pairs can give (2/2^m); ``exact`` (every
    assignment enumerated) or Monte Carlo; ``alpha``; ``needed_pairs`` (:func:`pairs_needed`);
    ``mde_ratio``: the minimum detectable effect — the smallest B/A (≥ 1, read also as its
    inverse) at which this test, with the observed pair-to-pair spread, would call a difference
    (``None`` when the design cannot reach ``alpha`` at any effect).
    """

    log_ratios: tuple[float, ...]
    ratio: float
    sd_log_ratio: float | None
    p_value: float
    min_p: float
    exact: bool
    alpha: float
    needed_pairs: int
    mde_ratio: float | None

    @property
    def n_pairs(self) -> int:
        """The number of pairs tested."""
        return len(self.log_ratios)

    @property
    def reachable(self) -> bool:
        """Whether this many pairs can give ``p ≤ alpha`` at all."""
        return self.min_p <= self.alpha

    @property
    def claimable(self) -> bool:
        """True when p ≤ alpha: a difference may be claimed."""
        return self.p_value <= self.alpha

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready."""
        return {"test": "exact sign-flip permutation test over pairs" if self.exact
                else f"sign-flip permutation test over pairs ({MC_DRAWS:,} seeded draws)",
                "pairs": self.n_pairs, "log_ratios": list(self.log_ratios),
                "ratio_b_over_a": self.ratio, "sd_log_ratio": self.sd_log_ratio,
                "p_value": self.p_value, "min_p": self.min_p, "alpha": self.alpha,
                "needed_pairs": self.needed_pairs, "mde_ratio": self.mde_ratio,
                "claimable": self.claimable}


def sign_flip_test(log_ratios: Sequence[float], alpha: float = ALPHA,
                   seed: int = 0) -> PairedTest:
    """Test whether paired log ratios d_i = ln(B_i/A_i) are centred on 0.

    Under "no difference" the two legs of a pair are exchangeable, so each d_i is as likely
    to be −d_i: the p-value is the share of the 2^m sign assignments whose |Σ s_i d_i| is at
    least the observed |Σ d_i| (R. A. Fisher, *The Design of Experiments*, 1935, §21; P. Good,
    *Permutation, Parametric and Bootstrap Tests of Hypotheses*, 3rd ed. 2005, ch. 3). Exact —
    its false-claim rate is at most ``alpha`` whatever the leg-to-leg noise, as long as it is
    the same for both arms — and it can never go below 2/2^m. Above
    :data:`EXACT_MAX_PAIRS` pairs a seeded Monte Carlo sample is used, with
    p = (b + 1)/(N + 1), which keeps the test valid (B. Phipson, G. K. Smyth, "Permutation
    P-values should never be zero", Stat. Appl. Genet. Mol. Biol. 9 (2010) 39).

    The minimum detectable effect shifts the observed residuals d_i − d̄ by a common δ and
    finds the smallest |δ| at which the test rejects (:func:`_mde_ratio`): the effect this run
    would have reported with the spread it saw (about even odds of detecting it).

    Raises :class:`StatsError` for no pairs or a non-finite value.
    """
    d = [float(x) for x in log_ratios]
    if not d:
        raise StatsError("a paired test needs at least one pair")
    if not all(math.isfinite(x) for x in d):
        raise StatsError(f"log ratios must be finite, got {d!r}")
    m = len(d)
    mean = sum(d) / m
    sd = math.sqrt(sum((x - mean) ** 2 for x in d) / (m - 1)) if m > 1 else None
    sums, exact = _sign_sums(d, seed)
    p = _p_from_sums(sums, sum(d), exact)
    min_p = 2.0 / 2**m if exact else 1.0 / (MC_DRAWS + 1)
    mde = _mde_ratio([x - mean for x in d], alpha, seed) if min_p <= alpha else None
    return PairedTest(log_ratios=tuple(d), ratio=math.exp(mean), sd_log_ratio=sd, p_value=p,
                      min_p=min_p, exact=exact, alpha=alpha, needed_pairs=pairs_needed(alpha),
                      mde_ratio=mde)


def design_mde(pairs: int, sd_log_ratio: float, alpha: float = ALPHA) -> float | None:
    """The minimum detectable effect (a B/A ratio ≥ 1, read also as its inverse) of a planned
    design of ``pairs`` pairs of legs, if the pair-to-pair spread of ln(B/A) is
    ``sd_log_ratio`` (a sample SD seen before on this node): :func:`_mde_ratio` over residuals
    ±s·√((m − 1)/m) in alternating signs (sum 0, sample SD exactly s; an odd m gets one 0).
    ``None`` when ``pairs`` cannot reach ``alpha`` at any effect (fewer than
    :func:`pairs_needed`). Raises :class:`StatsError` for ``pairs`` < 1, a negative or
    non-finite spread, or one so large that the ratio overflows."""
    if isinstance(pairs, bool) or not isinstance(pairs, int) or pairs < 1:
        raise StatsError(f"pairs={pairs!r}: give a whole number of pairs >= 1")
    if not math.isfinite(sd_log_ratio) or sd_log_ratio < 0:
        raise StatsError(f"sd_log_ratio={sd_log_ratio!r}: give a finite spread >= 0")
    if pairs < pairs_needed(alpha):
        return None
    even = pairs - pairs % 2
    r = sd_log_ratio * math.sqrt((pairs - 1) / even) if even else 0.0
    resid = [r if i % 2 == 0 else -r for i in range(even)] + [0.0] * (pairs - even)
    try:
        return _mde_ratio(resid, alpha, 0)
    except OverflowError:
        raise StatsError(f"sd_log_ratio={sd_log_ratio!r}: so large a spread gives no "
                         f"representable ratio") from None
