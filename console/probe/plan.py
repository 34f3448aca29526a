"""The probe's plan in words: the preflight checks, the seat, the endpoint, the hold and every
phase — what ``seat-console probe --dry-run`` prints and the TUI's probe screen shows before
it asks (one text for both fronts; ``docs/probe.md``). Pure: formats what preflight learnt.
"""

from __future__ import annotations

from typing import Any

from seat_console.core.profile import LoadedProfile
from seat_console.core.sweep import SweepPlan, plan
from seat_console.probe.run import SETTLE_S, Preflight, PreflightCheck, SweepSpec
from seat_console.probe.store import measured_waves, runs_dir

__all__ = ["render_plan", "render_preflight", "sweep_plan"]


def sweep_plan(loaded: LoadedProfile, sweep: SweepSpec, image_id: str | None) -> SweepPlan:
    """``probe --sweep``'s plan before it runs: its steps (:meth:`SweepSpec.phases`), the stop
    rule and the forecast (:func:`seat_console.core.sweep.plan`) from what this seat's kept
    runs measured on image ``image_id`` (the seat container's, read by preflight; ``None``:
    not read, so no forecast) with the profile's output tokens and API
    (:func:`seat_console.probe.store.measured_waves`); per step the probe adds its
    after-phase settle (``SETTLE_S``)."""
    spec = loaded.profile.probe
    waves = measured_waves(image_id, spec.output_tokens, spec.api) if image_id else {}
    return plan([(p.name, p.concurrency, p.requests) for p in sweep.phases()], waves,
                request_timeout_s=spec.request_timeout_s, overhead_s=SETTLE_S,
                goodput_min=sweep.goodput_min, growth_min=sweep.growth_min)


def _sweep_lines(sp: SweepPlan, sweep: SweepSpec, loaded: LoadedProfile) -> list[str]:
    spec = loaded.profile.probe
    lines = [f"  sweep: closed loop at concurrency "
             f"{', '.join(str(p.concurrency) for p in sp.steps)} (top {sweep.top}), "
             f"{sweep.requests_per_slot} requests per unit of concurrency (at least 8 a step), "
             f"{spec.output_tokens} output tokens each; instead of probe.phases"]
    for p in sp.steps:
        fc = "no forecast" if p.forecast_s is None else f"≈ {p.forecast_s:.1f} s"
        lines.append(f"    step {p.phase}: {p.requests} requests at concurrency "
                     f"{p.concurrency} — {fc} ({p.basis})")
    lines += [f"  stop rule: {sp.rule}",
              f"  forecast: {sp.text}"]
    if not loaded.profile.probe.slo:
        lines.append("  goodput: no [probe.slo] in the profile, so goodput cannot stop the "
                     "sweep (throughput and an incomplete step still do)")
    return lines


def _mark(ok: bool | None) -> str:
    return {True: "✓", False: "✗"}.get(ok, "–")  # type: ignore[arg-type]


def render_plan(loaded: LoadedProfile, phases: list[str] | None, *,
                checks: list[PreflightCheck], endpoint: str | None,
                container: dict[str, Any] | None, model: str | None, hold: str | None,
                forced: str | None = None, sweep: SweepSpec | None = None) -> str:
    """The dry-run plan as text: the preflight checks (``✓`` passed, ``✗`` refuses the probe,
    ``–`` not checked), the seat container, endpoint, hold (its own line only where no
    preflight check named it: the hold check says it, forced or not), warm-up and every chosen
    phase with
    its request count, concurrency and output tokens — or, with ``sweep``, the sweep's steps,
    stop rule and forecast (:func:`sweep_plan`). Drawn whether or not preflight would
    refuse (``docs/probe.md``)."""
    spec = loaded.profile.probe
    chosen = [p for p in spec.phases if not phases or p.name in phases]
    c = container or {}
    refused = any(ch.ok is False for ch in checks)
    lines = ["probe — plan (preflight read now; nothing sent)"
             + (": PREFLIGHT WOULD REFUSE (exit 5)" if refused else ":")]
    lines.append("  preflight:")
    for ch in checks:
        lines.append(f"    {_mark(ch.ok)} {ch.name}: {ch.detail}")
    seat = (f"{c.get('name')} ({c.get('role')}), image ID {c.get('image_id')}"
            if c.get("name") else f"n/a ({c.get('problem') or 'not read'})")
    lines += [f"  seat: {seat}",
              (f"  endpoint {endpoint or spec.endpoint or loaded.profile.seat.endpoint}, model "
               f"{model or spec.model or 'n/a (first of /v1/models)'}, api {spec.api}, "
               f"{spec.output_tokens} output tokens per request"
               + (", each to the end (ignore_eos)" if spec.ignore_eos else
                  ", or fewer where the model stops (EOS)")),
              f"  warm-up: {spec.warmup_requests} request(s), excluded"]
    if not any(ch.name == "hold" for ch in checks):   # the check says it (forced too): once
        lines.insert(-1, f"  hold: {hold or 'n/a'}" + (f"; FORCED: {forced!r}" if forced else ""))
    if sweep is not None:
        lines += _sweep_lines(sweep_plan(loaded, sweep, c.get("image_id")), sweep, loaded)
        chosen = []
    for p in chosen:
        lines.append(f"  phase {p.name}: {p.requests} requests, concurrency {p.concurrency}, "
                     f"{spec.output_tokens} output tokens each"
                     + (f", {p.request_rate:g} req/s" if p.request_rate else ", closed loop"))
    lines.append(f"  run kept under {runs_dir()}")
    return "\n".join(lines) + "\n"


def render_preflight(pre: Preflight, loaded: LoadedProfile, phases: list[str] | None,
                     sweep: SweepSpec | None = None) -> str:
    """The dry-run plan as text for a preflight that passed (:func:`render_plan`)."""
    return render_plan(loaded, phases, checks=pre.checks, endpoint=pre.endpoint,
                       container=pre.identity.get("container"), model=pre.model,
                       hold=pre.hold.detail, forced=pre.forced, sweep=sweep)
