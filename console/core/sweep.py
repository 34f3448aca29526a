"""The load sweep's stop rule and its knee (pure; the probe runs the steps, the report
re-derives the knee from the steps' figures).

``probe --sweep`` runs closed-loop steps at concurrency 1, 2, 4, … up to a top (:func:`ladder`)
and, after each, applies :func:`judge`:

* it **stops** at the first step that is not complete (no figure to trust), whose goodput share
  (``[probe.slo]``; point estimate) is under ``goodput_min``, or whose output tok/s is under
  (1 + ``growth_min``) × the previous step's (throughput stopped growing: the seat saturated);
* the **knee** is the step before the stopping one — the highest concurrency that still met the
  rule — or the top step when none stopped (the sweep then did not find the knee, and says so).

The rule follows the peers' practice (guidellm's sweep, ``vllm bench sweep``: raise the load
until the service level or the throughput gives out); the thresholds are stated in every result.
"""

from __future__ import annotations

from collections.abc import Sequence

from seat_console.core.base import Frozen

GOODPUT_MIN = 0.9
"""Default: a step whose goodput share is under 90 % stops the sweep."""
GROWTH_MIN = 0.10
"""Default: a step whose output tok/s grew less than 10 % over the previous step's stops it."""


class SweepStep(Frozen):
    """One step's figures: ``phase``, ``concurrency``, ``complete`` (its population whole and
    undisturbed), ``output_tok_s``, ``ttft_p95_s`` (seconds), ``goodput`` (share 0–1, ``None``
    without an SLO)."""

    phase: str
    concurrency: int
    complete: bool
    output_tok_s: float | None = None
    ttft_p95_s: float | None = None
    goodput: float | None = None


class SweepVerdict(Frozen):
    """The rule applied: ``rule`` (in words, with its thresholds), ``stopped_by`` (the step and
    why; ``None``: no step stopped it), ``stopped_at`` (that step's phase), ``knee`` (the last
    step that met the rule; ``None`` when the first step already failed it), ``found``: the
    sweep stopped by the rule, so the knee is below its top."""

    rule: str
    stopped_by: str | None = None
    stopped_at: str | None = None
    knee: SweepStep | None = None
    found: bool = False


def rule_text(goodput_min: float, growth_min: float) -> str:
    """The stop rule in words, with its thresholds."""
    return (f"stop at the first step that is not complete, whose goodput is under "
            f"{goodput_min * 100:.0f} % (with [probe.slo]), or whose output tok/s grew less "
            f"than {growth_min * 100:.0f} % over the previous step's; the knee is the step "
            "before it")


def ladder(top: int) -> list[int]:
    """Concurrency steps 1, 2, 4, … doubling up to ``top`` (``top`` itself last). Raises
    :class:`ValueError` for ``top`` < 1."""
    if top < 1:
        raise ValueError(f"sweep top concurrency {top}: give 1 or more")
    out = [1]
    while out[-1] * 2 < top:
        out.append(out[-1] * 2)
    if out[-1] != top:
        out.append(top)
    return out


def judge(steps: Sequence[SweepStep], goodput_min: float = GOODPUT_MIN,
          growth_min: float = GROWTH_MIN) -> SweepVerdict:
    """Apply the stop rule to ``steps`` in order (see the module docstring). Raises
    :class:`ValueError` for thresholds outside 0–1 (goodput) or < 0 (growth)."""
    if not 0.0 <= goodput_min <= 1.0 or not growth_min >= 0.0:
        raise ValueError(f"sweep thresholds goodput {goodput_min!r}, growth {growth_min!r}: "
                         "give goodput 0–1 and growth >= 0")
    rule = rule_text(goodput_min, growth_min)
    prev: SweepStep | None = None
    for s in steps:
        why = None
        if not s.complete or s.output_tok_s is None:
            why = f"step {s.phase} (concurrency {s.concurrency}) is not complete"
        elif s.goodput is not None and s.goodput < goodput_min:
            why = (f"step {s.phase} (concurrency {s.concurrency}): goodput "
                   f"{s.goodput * 100:.1f} % < {goodput_min * 100:.0f} %")
        elif prev is not None and prev.output_tok_s is not None and \
                s.output_tok_s < prev.output_tok_s * (1.0 + growth_min):
            why = (f"step {s.phase} (concurrency {s.concurrency}): output "
                   f"{s.output_tok_s:,.1f} tok/s, under {(1 + growth_min):.2f} × the previous "
                   f"step's {prev.output_tok_s:,.1f}")
        if why:
            return SweepVerdict(rule=rule, stopped_by=why, stopped_at=s.phase, knee=prev,
                                found=True)
        prev = s
    return SweepVerdict(rule=rule, knee=prev, found=False)


__all__ = ["GOODPUT_MIN", "GROWTH_MIN", "SweepStep", "SweepVerdict", "judge", "ladder",
           "rule_text"]
