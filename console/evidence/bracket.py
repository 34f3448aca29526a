"""The bracket: the order of legs in a paired comparison, and which legs pair up (pure).

An A/B/B/A bracket (A = resident, B = candidate) cancels a linear drift of the node over the
run (thermal state, a neighbour's load, cache warmth): the mean of A's legs and the mean of B's
legs sit at the same mean time. Each leg runs on a freshly started container; legs are paired
k-th A with k-th B inside a round (ABBA: A1–B2 and A4–B3), and every leg measures the same
case IDs (same prompt set, phases, seeds), so pairs are matched by construction.
"""

from __future__ import annotations

import re
import secrets
from dataclasses import dataclass
from datetime import datetime

from seat_console.core.base import utcnow

MAX_ROUNDS = 16
"""At most 16 rounds (64 ABBA legs): each leg restarts the engine."""

_ORDER = re.compile(r"[AB]{2,16}")


class BracketError(ValueError):
    """A bracket order or round count that cannot make a paired comparison; the message names
    the argument and the fix."""


@dataclass(frozen=True)
class LegPlan:
    """One leg: ``n`` (1-based, over all rounds), ``arm`` ("A" resident, "B" candidate),
    ``round`` (1-based), ``pair`` (the pair ID shared by the A and B legs it pairs:
    ``"r<round>p<k>"``)."""

    n: int
    arm: str
    round: int
    pair: str

    @property
    def name(self) -> str:
        """``"<arm><n>"``, e.g. ``"B3"`` (the name the report uses)."""
        return f"{self.arm}{self.n}"

    @property
    def dirname(self) -> str:
        """The leg's directory name inside the comparison: ``"<n>-<arm>"``."""
        return f"{self.n}-{self.arm}"


def plan_bracket(order: str = "ABBA", rounds: int = 1) -> tuple[LegPlan, ...]:
    """The legs of ``rounds`` repetitions of ``order`` (e.g. ``"ABBA"``).

    Raises :class:`BracketError` when ``order`` has letters other than A/B, is shorter than 2
    or longer than 16, has unequal numbers of A and B legs (no complete pairing), or when
    ``rounds`` is not 1..:data:`MAX_ROUNDS`.
    """
    if not isinstance(order, str) or not _ORDER.fullmatch(order):
        raise BracketError(f"--bracket {order!r}: give 2 to 16 letters A (resident) and B "
                           f"(candidate), e.g. ABBA")
    if order.count("A") != order.count("B"):
        raise BracketError(f"--bracket {order}: {order.count('A')} A legs and "
                           f"{order.count('B')} B legs cannot all pair; use as many of each "
                           f"(e.g. ABBA)")
    if isinstance(rounds, bool) or not isinstance(rounds, int) or not 1 <= rounds <= MAX_ROUNDS:
        raise BracketError(f"--rounds {rounds!r}: give 1 to {MAX_ROUNDS}")
    legs: list[LegPlan] = []
    n = 0
    for r in range(1, rounds + 1):
        seen = {"A": 0, "B": 0}
        for arm in order:
            n += 1
            seen[arm] += 1
            legs.append(LegPlan(n=n, arm=arm, round=r, pair=f"r{r}p{seen[arm]}"))
    return tuple(legs)


def pairs(legs: tuple[LegPlan, ...]) -> list[tuple[LegPlan, LegPlan]]:
    """``[(A leg, B leg), …]`` by pair ID, in order of the A legs.

    Raises :class:`BracketError` if a pair ID does not have exactly one A and one B leg.
    """
    by_pair: dict[str, dict[str, LegPlan]] = {}
    for leg in legs:
        slot = by_pair.setdefault(leg.pair, {})
        if leg.arm in slot:
            raise BracketError(f"pair {leg.pair}: two {leg.arm} legs")
        slot[leg.arm] = leg
    out = []
    for pid, slot in by_pair.items():
        if set(slot) != {"A", "B"}:
            raise BracketError(f"pair {pid}: has only arm {''.join(slot)}")
        out.append((slot["A"], slot["B"]))
    return sorted(out, key=lambda p: p[0].n)


def new_bracket_id(at: datetime | None = None) -> str:
    """``cmp-YYYYMMDDTHHMMSSZ-xxxxxx``: when it was minted (UTC: the compare's plan, which
    its run then uses, so the folder the plan names is the one written) and 6 random hex
    digits."""
    t = at or utcnow()
    return f"cmp-{t.strftime('%Y%m%dT%H%M%SZ')}-{secrets.token_hex(3)}"


def transition(prev: str | None, arm: str) -> str:
    """How leg ``arm`` gets a freshly started container after a leg of arm ``prev`` (``None``
    for the first leg): ``"restart-resident"`` (A after A or first), ``"swap"`` (B after A or
    first), ``"restart-candidate"`` (B after B), ``"restore"`` (A after B)."""
    if arm == "A":
        return "restore" if prev == "B" else "restart-resident"
    return "restart-candidate" if prev == "B" else "swap"


_HOW = {"restart-resident": "restart the resident container (stop, start: fresh incarnation)",
        "swap": "swap: stop the resident, start the candidate container (swap runbook)",
        "restart-candidate": "restart the candidate container (stop, start: fresh incarnation)",
        "restore": "restore: stop the candidate, start the recorded resident (hold kept)"}


def plan_lines(legs: tuple[LegPlan, ...], resident: str, candidate: str) -> list[str]:
    """The dry-run plan, one line per leg, in order: how the leg's arm gets a freshly started
    container (:func:`transition`), then what is measured; then the end (restore the resident,
    release the hold if the compare placed it)."""
    out = []
    prev: str | None = None
    for leg in legs:
        who = resident if leg.arm == "A" else candidate
        out.append(f"leg {leg.name} (round {leg.round}, pair {leg.pair}, {who}): "
                   f"{_HOW[transition(prev, leg.arm)]}; wait for /health; probe (every phase, "
                   f"KV capacity from the engine); fidelity (greedy, logprobs=20); canaries")
        prev = leg.arm
    end = (f"restore the resident ({resident})" if prev == "B"
           else f"the resident ({resident}) already holds the seat")
    out.append(f"end: {end}; release the hold if this compare placed it")
    return out
