"""Cached readings → the exporter's metric families (pure: no I/O, no clock of its own).

The families and their meaning are the agreed schema, documented in
``docs/prometheus/metrics.md``. Rules kept here:

* a series whose value is unknown is **absent**, never 0: a source never read has no series of
  its own (only ``seat_source_up{source} 0``); a source down serves its last good value;
* label values are bounded: unit names from the profile, container roles, one run ID at a time;
* times are unix seconds (``*_timestamp_seconds``), sizes bytes.

What "the hold" means, as the node sees it (not as a journal remembers it):

* a profile timer is **stopped** when systemd has it loaded and not ``active`` (a unit that is
  not found is not active, ``seat_timer_active 0``, but it is no hold);
* a **lease** is armed when a ``seat-hold-*-lease.timer`` is loaded, active and not elapsed on
  the node (:func:`seat_console.actions.node_ops.lease_pending`), whoever placed it;
* ``seat_hold_active`` = a lease armed **or** a profile timer stopped;
  ``seat_hold_without_lease`` = a profile timer stopped **and** no lease armed (nothing on the
  node will restore the timers: the dangerous state).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from seat_console.snapshot.poll import SourceView
from seat_console.snapshot.table import exported

SOURCES = tuple(exported())
"""The exporter's sources, as ``seat_source_up{source}`` names them: the names the source
table's entries are exported as (:func:`seat_console.snapshot.table.exported`)."""

SIDES = ("resident", "candidate")


@dataclass(frozen=True)
class Identity:
    """The seat's identity from the profile: ``node`` (``node.name``), ``seat`` (the
    ``[resident]`` name: the model the seat is meant to serve), ``endpoint``
    (``seat.endpoint``), ``tensor_parallel_size``, the profile's timer ``units``, and the
    console's ``version``."""

    node: str
    seat: str
    endpoint: str
    tensor_parallel_size: int
    units: tuple[str, ...]
    version: str


@dataclass(frozen=True)
class EngineCheck:
    """The engine as ``GET /health`` found it: ``healthy`` (answered 200), ``status`` (HTTP
    status, ``None`` when it did not answer), ``detail`` (why not healthy)."""

    healthy: bool
    status: int | None = None
    detail: str | None = None
    paused: bool | None = None
    """``GET /is_paused`` (vLLM, ``VLLM_SERVER_DEV_MODE=1``); ``None``: not offered or not
    read."""
    asleep: bool | None = None
    """``GET /is_sleeping``; ``None``: not offered or not read."""


@dataclass(frozen=True)
class FitVerdict:
    """One side's fit verdict: ``fits``, and ``over_bytes`` — bytes per card that must leave
    the GPU for vLLM to start (:attr:`seat_console.fit.budget.Verdict.must_leave_bytes`:
    over the usable budget before any KV cache, plus the KV cache one max_model_len request
    lacks); 0 when it fits."""

    fits: bool
    over_bytes: int


@dataclass(frozen=True)
class GpuValue:
    """The ``gpus`` source's value: the NVML reading was good, and the fit verdicts computed
    with it (``{side: FitVerdict}``; a side without a verdict is missing)."""

    fit: Mapping[str, FitVerdict] = field(default_factory=dict)


@dataclass(frozen=True)
class RunbookRun:
    """An unfinished runbook run in the journal: ``runbook``, its last ``step``, ``run_id``."""

    runbook: str
    step: str
    run_id: str


@dataclass(frozen=True)
class JournalValue:
    """The ``journal`` source's value: ``runbooks`` unfinished (journal: a ``start`` row and no
    ``end`` row), ``probe_phase`` ``(run_id, phase)`` of a probe run in progress (``None``:
    none), ``probe_disrupted`` of the latest probe run (``None``: no probe run kept)."""

    runbooks: tuple[RunbookRun, ...] = ()
    probe_phase: tuple[str, str] | None = None
    probe_disrupted: bool | None = None
    stages: tuple[tuple[str, str], ...] | None = None
    """``(stage, status)`` of every runbook stage
    (:func:`seat_console.actions.stages.read_runbook`); ``None``: not known."""
    next_stage: tuple[str, str] | None = None
    """``(stage, status)`` of the next stage while a runbook cycle is under way (some stage
    of the open cycle is not ``todo``); ``None`` at rest (nothing begun, or the cycle closed)."""
    promoted: tuple[str, str, bool] | None = None
    """``(container, promote run ID, forced)`` when the seat-state file (``seat.json``) names
    a promoted resident; ``None`` when there is none or it cannot be read."""
    downtime_s: float | None = None
    """The seat's downtime (s) measured by the newest runbook run that stopped it
    (:func:`seat_console.actions.drain.last_downtime`); ``None``: none measured."""
    downtime_runs: int = 0
    """How many runs in the journal measured a seat downtime."""
    downtime_sum_s: float = 0.0
    """Their downtimes (s) summed."""


@dataclass(frozen=True)
class TimerFact:
    """One timer unit as the exporter needs it: ``unit``, ``loaded`` (``LoadState=loaded``),
    ``active`` (``ActiveState=active``); ``None``: systemd's answer did not say (the block
    lacked that property) — unknown, never read as "not loaded" or "stopped"."""

    unit: str
    loaded: bool | None
    active: bool | None

    @property
    def stopped(self) -> bool | None:
        """Loaded by systemd and not active: stopped (a hold, or a fault). ``False`` when not
        loaded (not found: no hold); ``None`` when the load or active state is unknown."""
        if self.loaded is False:
            return False
        if self.loaded is None or self.active is None:
            return None
        return not self.active


def any_stopped(timers: Sequence[TimerFact] | None) -> bool | None:
    """Whether a timer is stopped, in three values: ``True`` when one is, ``False`` when
    every one is known not to be, ``None`` when it cannot be told (no reading, or a timer's
    state unknown and none known stopped)."""
    if timers is None:
        return None
    states = [t.stopped for t in timers]
    if True in states:
        return True
    return None if None in states else False


@dataclass(frozen=True)
class LeaseValue:
    """The ``lease`` source's value: the next elapse (unix s, ``None`` = unknown) of every hold
    lease armed on the node."""

    elapses: tuple[float | None, ...] = ()


@dataclass(frozen=True)
class SilenceValue:
    """The ``silences`` source's value: the ends (unix s) of the active silences that cover
    the seat."""

    active_ends: tuple[float, ...] = ()


@dataclass(frozen=True)
class ContainerValue:
    """The ``containers`` source's value: who holds the seat — ``role`` (``resident`` /
    ``probe`` / ``unknown``; ``None``: nobody, the seat is empty), ``name``, ``image_id``,
    ``repo_digest`` (``None`` for an image never pushed)."""

    role: str | None
    name: str | None = None
    image_id: str | None = None
    repo_digest: str | None = None


def _g(name: str, doc: str, labels: Sequence[str] = (), unit: str = "") -> GaugeMetricFamily:
    return GaugeMetricFamily(name, doc, labels=list(labels), unit=unit)


def _b(v: bool) -> float:
    return 1.0 if v else 0.0


def build_families(ident: Identity, states: Mapping[str, SourceView]) -> list[Metric]:
    """The metric families of one scrape, from the sources' cached states.

    ``states``: ``{source name: SourceView}`` for the names in :data:`SOURCES` (a missing
    name counts as never read). The values each source's state holds: ``timers`` — a
    sequence of :class:`TimerFact`; ``lease`` — :class:`LeaseValue`; ``silences`` —
    :class:`SilenceValue`; ``containers`` — :class:`ContainerValue`; ``engine`` —
    :class:`EngineCheck`; ``gpus`` — :class:`GpuValue`; ``journal`` — :class:`JournalValue`.
    ``seat_scrape_duration_seconds`` is not here (the collector measures and adds it).
    """
    def val(name: str) -> Any:
        st = states.get(name)
        return st.value if st is not None else None

    out: list[Metric] = []
    info = _g("seat_info", "The seat's identity (from the profile); always 1.",
              ("node", "seat", "endpoint", "tensor_parallel_size"))
    info.add_metric([ident.node, ident.seat, ident.endpoint, str(ident.tensor_parallel_size)], 1)
    build = _g("seat_exporter_build_info", "The exporter's version; always 1.", ("version",))
    build.add_metric([ident.version], 1)
    out += [info, build]

    eng = val("engine")
    up = _g("seat_engine_up", "1 when the seat's engine answered GET /health with 200.")
    paused = _g("seat_engine_paused", "1 when the seat's engine says it is paused "
                                      "(GET /is_paused; /health is 200 while paused).")
    asleep = _g("seat_engine_asleep", "1 when the seat's engine says it is asleep "
                                      "(GET /is_sleeping; /health is 200 while asleep).")
    if isinstance(eng, EngineCheck):
        up.add_metric([], _b(eng.healthy))
        if eng.paused is not None:     # not offered: absent, never 0
            paused.add_metric([], _b(eng.paused))
        if eng.asleep is not None:
            asleep.add_metric([], _b(eng.asleep))
    out += [up, paused, asleep]

    timers: Sequence[TimerFact] | None = val("timers")
    lease: LeaseValue | None = val("lease")
    stopped = any_stopped(timers)
    armed = bool(lease.elapses) if lease is not None else None
    hold = _g("seat_hold_active", "1 when a hold lease is armed on the node or a timer the "
                                  "profile names is stopped.")
    if armed is True or stopped is True:
        hold.add_metric([], 1)
    elif armed is False and stopped is False:
        hold.add_metric([], 0)
    lease_g = _g("seat_hold_lease_armed", "1 when a seat-hold-*-lease timer is armed on the "
                                          "node (it restores the timers when it fires).")
    if armed is not None:
        lease_g.add_metric([], _b(armed))
    without = _g("seat_hold_without_lease", "1 when a timer the profile names is stopped and no "
                                            "lease is armed: nothing will restore it.")
    if stopped is not None and armed is not None:
        without.add_metric([], _b(stopped and not armed))
    expiry = _g("seat_hold_expiry_timestamp_seconds", "When the first armed hold lease fires "
                                                      "(unix seconds).", unit="seconds")
    known = [e for e in (lease.elapses if lease is not None else ()) if e is not None]
    if known:
        expiry.add_metric([], min(known))
    out += [hold, lease_g, without, expiry]

    tim = _g("seat_timer_active", "1 when the timer unit is active (armed) on the node.",
             ("unit",))
    for t in timers or ():
        if t.active is not None:      # unknown: absent, never 0
            tim.add_metric([t.unit], _b(t.active))
    out.append(tim)

    sil: SilenceValue | None = val("silences")
    sil_g = _g("seat_silence_active", "1 when an active Alertmanager silence covers the seat.")
    sil_end = _g("seat_silence_end_timestamp_seconds", "The endsAt of the active silence that "
                                                       "covers the seat longest (unix seconds).",
                 unit="seconds")
    if sil is not None:
        sil_g.add_metric([], _b(bool(sil.active_ends)))
        if sil.active_ends:
            sil_end.add_metric([], max(sil.active_ends))
    out += [sil_g, sil_end]

    cont: ContainerValue | None = val("containers")
    cont_g = _g("seat_container_info", "The container holding the seat; always 1.",
                ("role", "name", "image_id", "repo_digest"))
    if cont is not None and cont.role is not None:
        cont_g.add_metric([cont.role, cont.name or "", cont.image_id or "",
                           cont.repo_digest or ""], 1)
    out.append(cont_g)

    jr: JournalValue | None = val("journal")
    rb = _g("seat_runbook_active", "An unfinished runbook run (journal: started, not ended); "
                                   "always 1.", ("runbook", "step", "run_id"))
    ph = _g("seat_probe_phase_info", "The phase of a probe run in progress; always 1.",
            ("run_id", "phase"))
    dis = _g("seat_probe_disrupted", "1 when the latest probe run was disrupted.")
    prom = _g("seat_promoted_info", "The resident a promote made (seat.json); forced: promoted "
                                    "with --force, without a PROMOTE-ABLE decision; always 1.",
              ("container", "run_id", "forced"))
    if jr is not None and jr.promoted is not None:
        c, rid, forced = jr.promoted
        prom.add_metric([c, rid, "true" if forced else "false"], 1)
    if jr is not None:
        for r in jr.runbooks:
            rb.add_metric([r.runbook, r.step, r.run_id], 1)
        if jr.probe_phase is not None:
            ph.add_metric(list(jr.probe_phase), 1)
        if jr.probe_disrupted is not None:
            dis.add_metric([], _b(jr.probe_disrupted))
    out += [rb, ph, dis, prom]

    stage = _g("seat_runbook_stage", "The seat-swap runbook's stages (journal, run store); "
                                     "always 1, the status as a label.", ("stage", "status"))
    nxt = _g("seat_runbook_next_info", "The runbook's next stage while a cycle is under way; "
                                       "always 1.", ("stage", "status"))
    if jr is not None and jr.stages is not None:
        for name, status in jr.stages:
            stage.add_metric([name, status], 1)
        if jr.next_stage is not None:
            nxt.add_metric(list(jr.next_stage), 1)
    out += [stage, nxt]

    down = _g("seat_downtime_seconds", "How long the seat was down in the newest runbook run "
                                       "that stopped it: from the drain to the first verified "
                                       "completion on the engine that followed.", unit="seconds")
    down_runs = CounterMetricFamily("seat_downtime_runs", "Runbook runs that measured a seat "
                                                          "downtime (journal).")
    down_sum = CounterMetricFamily("seat_down_seconds", "Seat downtime measured by every "
                                                        "runbook run, summed (journal).",
                                   unit="seconds")
    if jr is not None:
        if jr.downtime_s is not None:
            down.add_metric([], jr.downtime_s)
        down_runs.add_metric([], float(jr.downtime_runs))
        down_sum.add_metric([], jr.downtime_sum_s)
    out += [down, down_runs, down_sum]

    gv: GpuValue | None = val("gpus")
    fits = _g("seat_fit_fits", "1 when the side fits the seat's GPUs (fit budget verdict).",
              ("side",))
    over = _g("seat_fit_over_bytes", "Bytes per card that must leave the GPU for the side to "
                                     "start (0 when it fits).", ("side",), unit="bytes")
    for side in SIDES:
        v = gv.fit.get(side) if gv is not None else None
        if v is not None:
            fits.add_metric([side], _b(v.fits))
            over.add_metric([side], float(v.over_bytes))
    out += [fits, over]

    src_up = _g("seat_source_up", "1 when the exporter's newest reading of the source is good "
                                  "and not overdue.", ("source",))
    src_t = _g("seat_source_last_good_timestamp_seconds", "When the source was last read good "
                                                          "(unix seconds).", ("source",),
               unit="seconds")
    for name in SOURCES:
        st = states.get(name)
        src_up.add_metric([name], _b(st is not None and st.up))
        if st is not None and st.last_good_at is not None:
            src_t.add_metric([name], st.last_good_at)
    out += [src_up, src_t]
    return out


def families_json(families: Iterable[Metric]) -> list[dict[str, Any]]:
    """Families as JSON-ready dicts: ``name``, ``type``, ``help``, ``unit``, ``samples`` (each
    ``name``, ``labels``, ``value``)."""
    return [{"name": f.name, "type": f.type, "help": f.documentation, "unit": f.unit,
             "samples": [{"name": s.name, "labels": dict(s.labels), "value": s.value}
                         for s in f.samples]} for f in families]


__all__ = ["ContainerValue", "EngineCheck", "FitVerdict", "GpuValue", "Identity",
           "JournalValue", "LeaseValue", "RunbookRun", "SIDES", "SOURCES", "SilenceValue",
           "TimerFact", "any_stopped", "build_families", "families_json"]
