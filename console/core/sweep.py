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

from collections.abc import Mapping, Sequence
from typing import Any

from seat_console.core.base import Frozen
from seat_console.core.fmt import fmt_duration

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


class StepPlan(Frozen):
    """One planned step of a sweep: ``phase``, ``concurrency``, ``requests``; ``forecast_s``
    (``None``: no measurement to stand on), ``basis`` (the run and phase it stands on, or why
    there is none), ``worst_s`` (every wave at the request timeout)."""

    phase: str
    concurrency: int
    requests: int
    forecast_s: float | None = None
    basis: str
    worst_s: float


class SweepPlan(Frozen):
    """A sweep before it runs (``probe --sweep --dry-run``): its ``steps``, the stop ``rule``
    in words, ``forecast_s`` (seconds to the top step when every step has a measurement, else
    ``None``), ``measured_s`` (the sum over the steps that have one), ``unmeasured`` (the
    concurrencies that have none), ``worst_s`` (every wave of every step at the request
    timeout, plus the per-step overhead), ``text`` (the forecast in one line)."""

    steps: list[StepPlan]
    rule: str
    forecast_s: float | None
    measured_s: float
    unmeasured: list[int]
    worst_s: float
    text: str


def _dur(s: float) -> str:
    """A forecast's duration in the one formatter's words (:func:`fmt_duration`, ``exact``)."""
    return fmt_duration(s)


def plan(steps: Sequence[tuple[str, int, int]], waves: Mapping[int, Mapping[str, Any]], *,
         request_timeout_s: float, overhead_s: float, goodput_min: float = GOODPUT_MIN,
         growth_min: float = GROWTH_MIN) -> SweepPlan:
    """The sweep's plan and forecast. ``steps``: ``(phase, concurrency, requests)`` in order;
    ``waves``: per concurrency the seconds one round of that many requests took on this seat
    before (``{"wave_s", "run_id", "phase"}``, :func:`seat_console.probe.store.measured_waves`);
    ``overhead_s``: what the probe adds per step (the after-phase settle and scrape).

    A step's forecast = ⌈requests ÷ concurrency⌉ waves × the measured wave + ``overhead_s``;
    no measurement at that concurrency → no forecast for it (never one made up from another
    concurrency: past the seat's knee the wave grows); worst case = ⌈requests ÷ concurrency⌉ ×
    ``request_timeout_s`` + ``overhead_s``. The forecast runs to the top step: the rule may
    stop the sweep earlier (said in ``text``). Raises :class:`ValueError` for a step with
    concurrency or requests < 1, or a negative timeout or overhead."""
    if request_timeout_s < 0 or overhead_s < 0:
        raise ValueError(f"sweep plan: request timeout {request_timeout_s!r} s, overhead "
                         f"{overhead_s!r} s: give both >= 0")
    out: list[StepPlan] = []
    for phase, c, n in steps:
        if c < 1 or n < 1:
            raise ValueError(f"sweep plan: step {phase} has concurrency {c}, {n} requests: "
                             "give both >= 1")
        rounds = -(-n // c)
        w = waves.get(c)
        wave = w.get("wave_s") if isinstance(w, Mapping) else None
        ok = isinstance(wave, (int, float)) and not isinstance(wave, bool) and wave > 0 \
            and wave < float("inf")
        out.append(StepPlan(
            phase=phase, concurrency=c, requests=n,
            forecast_s=rounds * float(wave) + overhead_s if ok else None,   # type: ignore[arg-type]
            basis=(f"run {w.get('run_id')} {w.get('phase')}: {float(wave):.2f} s a wave of {c}"
                   if ok and isinstance(w, Mapping) else
                   f"no measurement yet at concurrency {c} on this image"),
            worst_s=rounds * request_timeout_s + overhead_s))
    measured = sum(p.forecast_s for p in out if p.forecast_s is not None)
    unmeasured = [p.concurrency for p in out if p.forecast_s is None]
    worst = sum(p.worst_s for p in out)
    if not out:
        text = "no steps"
    elif not unmeasured:
        text = (f"≈ {_dur(measured)} if it runs to the top step (this seat's kept runs at "
                "every step's concurrency); the rule may stop it earlier")
    else:
        text = (f"unknown: no measurement yet on this image at concurrency "
                f"{', '.join(map(str, unmeasured))}"
                + (f"; the other steps ≈ {_dur(measured)}" if len(unmeasured) < len(out) else ""))
    text += f"; at most {_dur(worst)} (every request at its {request_timeout_s:g} s timeout)"
    return SweepPlan(steps=out, rule=rule_text(goodput_min, growth_min),
                     forecast_s=None if unmeasured or not out else measured,
                     measured_s=measured, unmeasured=unmeasured, worst_s=worst, text=text)


__all__ = ["GOODPUT_MIN", "GROWTH_MIN", "StepPlan", "SweepPlan", "SweepStep", "SweepVerdict",
           "judge", "ladder", "plan", "rule_text"]
