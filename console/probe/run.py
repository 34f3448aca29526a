"""A probe run: preflight, warm-up, phases, accounting, interference, kept evidence.

:func:`preflight` (blocking, run it in a worker) finds which container holds the seat, the
engine's version and served model, the run's identity and whether a hold is active; it refuses
(:class:`ProbeRefused`) without an active hold unless forced with a reason.
:func:`run_probe` (async) then sends the warm-up requests (excluded from every figure) and each
phase — closed loop (at most ``concurrency`` in flight) or open loop (Poisson arrivals at
``request_rate``, seeded, still capped by ``concurrency``) —, reads the engine's counters before
and after each phase, watches for interference, and writes the run directory
(:mod:`seat_console.probe.store`) as it goes. Ctrl-C (task cancellation) or :meth:`Probe.stop`
ends it cleanly: in-flight requests are recorded as ``interrupted`` and the run is kept with
status ``interrupted``.

Status and headlines (``docs/probe.md``): a phase shows a headline only if every expected
request was sent and completed, the client's counts equal the engine's, every watch check could
be made, and nothing disturbed the run. Otherwise it says why, in words, and every record stays.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import math
import platform
import random
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
from seat_console.core import engine_timing
from seat_console.core.engine_timing import Histogram
from seat_console.core.fmt import zulu_time
from seat_console.probe.client import (
    ClientTimeouts,
    RequestRecord,
    RequestSpec,
    make_client,
    run_request,
)
from seat_console.probe.hotpath import StreamPool, run_request_hot
from seat_console.probe.engine_counters import (
    Accounting,
    EngineCounters,
    KvCapacity,
    compare,
    kv_capacity,
    prefix_cache_delta,
    scrape,
)
from seat_console.probe.interference import InterferenceMonitor, earliest
from seat_console.probe.prompts import PromptSet, load_prompt_set, phase_nonce, with_nonce
from seat_console.core.probe_stats import PhaseStats, phase_stats, slo_misses
from seat_console.core.sweep import (
    GOODPUT_MIN,
    GROWTH_MIN,
    SweepStep,
    SweepVerdict,
    judge,
    ladder,
)
from seat_console.probe.store import SUMMARY_SCHEMA, RunWriter
from seat_console.core.profile import LoadedProfile, ProbePhaseSpec, ProbeSpec
from seat_console.core.base import utcnow

log = logging.getLogger(__name__)

WARMUP = "warmup"
"""Phase name of the warm-up requests in ``requests.jsonl`` (excluded from every figure)."""

@dataclass(frozen=True)
class SweepSpec:
    """``probe --sweep``: closed-loop steps at concurrency :func:`~seat_console.core.sweep.ladder`
    (``top``), ``requests_per_slot`` requests per unit of concurrency (at least 8 a step),
    stopped by :func:`~seat_console.core.sweep.judge` with ``goodput_min`` / ``growth_min``."""

    top: int = 64
    goodput_min: float = GOODPUT_MIN
    growth_min: float = GROWTH_MIN
    requests_per_slot: int = 4

    def phases(self) -> list[ProbePhaseSpec]:
        """The steps as phases ``sweep-c<N>``."""
        return [ProbePhaseSpec(name=f"sweep-c{c}", requests=max(8, c * self.requests_per_slot),
                               concurrency=c) for c in ladder(self.top)]


def sweep_step(block: dict[str, Any]) -> SweepStep:
    """One phase block of a summary as a :class:`~seat_console.core.sweep.SweepStep`."""
    st = block.get("stats") or {}
    gp = st.get("goodput") or {}
    return SweepStep(phase=block["name"], concurrency=int(st.get("concurrency") or 0),
                     complete=bool(st.get("headline")),
                     output_tok_s=st.get("output_tok_s"),
                     ttft_p95_s=(st.get("ttft") or {}).get("p95_s"), goodput=gp.get("share"))


NONCE_RULE = "sha256('{run}/{phase}/<prompt_id>')[:16]"
"""How a nonce-cleaned phase's prompt nonces are made, as recorded with the phase."""

SETTLE_S = 3.0
"""How long the after-phase scrape waits for the engine's counters to catch up with the last
responses (vLLM updates them as it finishes a request, which can trail the stream's end)."""


@dataclass(frozen=True)
class PreflightCheck:
    """One preflight check as the dry run shows it: ``name`` (``hold``, ``seat container``,
    ``engine``, ``model``), ``ok`` (``True`` passed, ``False`` refuses the probe, ``None`` not
    checked because an earlier check it needs failed), ``detail`` (one sentence)."""

    name: str
    ok: bool | None
    detail: str


class ProbeRefused(Exception):
    """Preflight refused to start the probe; the message says why and how to proceed.

    ``checks``: the :class:`PreflightCheck` list gathered so far (every check when
    :func:`preflight` ran with ``collect=True``); ``partial``: what was learnt before the
    refusal (``endpoint``, ``container``, ``model``, ``hold``), for the dry run's plan."""

    def __init__(self, message: str, checks: list[PreflightCheck] | None = None,
                 partial: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.checks: list[PreflightCheck] = list(checks or [])
        self.partial: dict[str, Any] = dict(partial or {})


@dataclass(frozen=True)
class HoldInfo:
    """Whether a hold is active: ``active`` (``None`` = cannot tell), ``detail`` (one
    sentence), ``silence_id`` (the hold's silence, to watch), ``expires_at`` (UTC)."""

    active: bool | None
    detail: str
    silence_id: str | None = None
    expires_at: datetime | None = None


@dataclass
class Preflight:
    """What preflight found: ``endpoint`` (probe URL), ``model`` (served model name),
    ``identity`` (the summary's identity block), ``kv`` (:class:`KvCapacity`), ``hold``,
    ``seat_containers`` (names whose foreign changes disrupt the run), ``problems``, ``checks``
    (the :class:`PreflightCheck` list, all passed)."""

    endpoint: str
    model: str
    identity: dict[str, Any]
    kv: KvCapacity
    hold: HoldInfo
    seat_containers: set[str]
    forced: str | None = None
    problems: list[str] = field(default_factory=list)
    checks: list[PreflightCheck] = field(default_factory=list)


def _sha256_file(p: Path) -> str | None:
    try:
        return hashlib.sha256(p.read_bytes()).hexdigest()
    except OSError:
        return None


def _seat_container(loaded: LoadedProfile) -> tuple[dict[str, Any], set[str], str | None]:
    """Inspect the profile's containers; the running one that holds the seat (the swap probe
    when running, else the resident) → (identity dict, names, startup log text or None)."""
    from seat_console.sources.containers import ContainerSource, ContainersReading
    from seat_console.node.docker import resolve_docker_host

    p = loaded.profile
    names: dict[str, str] = {}
    swap = getattr(p, "swap", None)
    if swap is not None:
        names["probe"] = swap.container
    elif p.candidate is not None and p.candidate.container:
        names["probe"] = p.candidate.container
    if p.resident.container:
        names["resident"] = p.resident.container
    all_names = set(names.values())
    if p.node.transport == "docker-exec" and p.node.exec_container:
        all_names.add(p.node.exec_container)
    host = resolve_docker_host(p.node.docker_host)
    src = ContainerSource(host, names, watch_events=False)
    try:
        r = src.read()
        if not isinstance(r, ContainersReading):
            return {"problem": str(r)}, all_names, None
        seat = next((c for c in r.containers if c.role == "probe" and c.running), None) or \
            next((c for c in r.containers if c.running), None)
        if seat is None:
            states = ", ".join(f"{c.name}: {c.state}" for c in r.containers) or "none named"
            return {"problem": f"no seat container is running ({states})"}, all_names, None
        ident = {"name": seat.name, "role": seat.role, "id": seat.id, "image_ref": seat.image_ref,
                 "image_id": seat.image_id, "repo_digest": seat.repo_digest,
                 "started_at": seat.started_at.isoformat() if seat.started_at else None,
                 "docker_host": host}
        log = None
        try:
            client = src._get_client()  # the source's own SDK client
            raw = client.api.logs(seat.name, stdout=True, stderr=True, tail=4000)
            log = raw.decode("utf-8", "replace") if isinstance(raw, bytes) else str(raw)
        except Exception as exc:  # noqa: BLE001 - no log = no startup facts, said so
            ident["log_problem"] = f"{type(exc).__name__}: {exc}"
        return ident, all_names, log
    finally:
        src.close()


def _gpus(loaded: LoadedProfile) -> dict[str, Any]:
    """GPU UUIDs, names and the driver version from NVML, or why they are unavailable."""
    try:
        from seat_console.core.base import read_once
        from seat_console.sources.gpu import make_source

        snap = read_once(make_source(loaded))
    except Exception as exc:  # noqa: BLE001
        return {"unavailable": f"{type(exc).__name__}: {exc}"}
    cards = getattr(snap, "cards", None)
    if cards is None:
        return {"unavailable": str(snap)}
    return {"driver": getattr(snap, "driver_version", None),
            "cards": [{"uuid": c.uuid, "name": getattr(c, "name", None),
                       "pci_bus_id": getattr(c, "pci_bus_id", None)} for c in cards]}


def _backport(loaded: LoadedProfile) -> list[dict[str, Any]]:
    bp = getattr(loaded.profile, "backport", None)
    if bp is None:
        return []
    base = Path(loaded.source).parent if loaded.source.startswith("/") else Path.cwd()
    out = []
    for f in bp.files:
        src = f.source if f.source.is_absolute() else base / f.source
        out.append({"dest": f.dest, "source": str(src), "sha256": _sha256_file(src)})
    return out


def preflight(loaded: LoadedProfile, *, hold: HoldInfo, force_reason: str | None = None,
              timeout_s: float = 10.0,
              collect: bool = False) -> Preflight:
    """Check that a probe may start and gather its identity (blocking I/O; a worker thread).

    Raises :class:`ProbeRefused` when there is no active hold (or it cannot be told) and no
    ``force_reason``; when no seat container runs; when the engine does not answer or lists no
    model. ``hold``: whether a hold is active, as the journal says (the caller asks
    :func:`seat_console.actions.probe_journal.hold_info`: the probe reads no journal). ``collect`` (the dry run): do not
    stop at the first refusal — run every check that can still run, then raise one
    :class:`ProbeRefused` (the first refusal's message) carrying all the checks and what was
    learnt (``exc.checks``, ``exc.partial``). The returned :class:`Preflight`'s ``problems``
    is empty; its ``checks`` lists every check (all passed).
    """
    from seat_console.sources.engine import EngineReader, EngineReading
    from seat_console.sources.startup_log import parse_startup_log

    spec = loaded.profile.probe
    h = hold
    checks: list[PreflightCheck] = []
    fails: list[str] = []
    partial: dict[str, Any] = {"hold": h.detail}

    def refuse(name: str, message: str) -> None:
        checks.append(PreflightCheck(name, False, message))
        if not collect:
            raise ProbeRefused(message, checks, partial)
        fails.append(message)

    if h.active is not True and not force_reason:
        refuse("hold", f"refusing to probe: {h.detail}. Place a hold first "
                       "(`seat-console hold`), or pass --force --reason '…' (journaled)")
    else:
        checks.append(PreflightCheck("hold", True, h.detail if h.active is True else
                                     f"{h.detail}; FORCED: {force_reason!r} (journaled)"))
    endpoint = str(spec.endpoint or loaded.profile.seat.endpoint).rstrip("/")
    partial["endpoint"] = endpoint
    ident_c, names, log = _seat_container(loaded)
    partial["container"] = ident_c
    if "problem" in ident_c:
        refuse("seat container", f"refusing to probe: {ident_c['problem']}")
    else:
        checks.append(PreflightCheck("seat container", True,
                                     f"{ident_c.get('name')} ({ident_c.get('role')}) running"))
    ec = EngineReader(endpoint, timeout_s=timeout_s)
    try:
        er = ec.read()
    finally:
        ec.close()
    if not isinstance(er, EngineReading):
        refuse("engine", f"refusing to probe: {er}")
        checks.append(PreflightCheck("model", None, "not checked: the engine did not answer"))
        raise ProbeRefused(fails[0], checks, partial)
    if not er.healthy:
        refuse("engine", f"refusing to probe: engine at {endpoint} is not healthy "
                         f"({'; '.join(er.problems) or er.health_status})")
    else:
        checks.append(PreflightCheck("engine", True, f"{endpoint} healthy"
                                     + (f", vLLM {er.version}" if er.version else "")))
    model = spec.model or (er.models[0].id if er.models else None)
    partial["model"] = model
    if not model:
        refuse("model", f"refusing to probe: {endpoint}/v1/models lists no model; set "
                        "probe.model")
    else:
        checks.append(PreflightCheck("model", True, f"{model}"
                                     + (" (probe.model)" if spec.model else
                                        " (first of /v1/models)")))
    if fails:
        raise ProbeRefused(fails[0], checks, partial)
    assert model is not None  # every refusal above raised
    max_len = next((m.max_model_len for m in (er.models or ()) if m.id == model), None)
    startup = parse_startup_log(log, loaded.profile.seat.block_size) if log else None
    kv = kv_capacity(er.metrics.cache_config if er.metrics else None, startup, max_len)
    prompts = load_prompt_set(spec.prompt_set)
    identity = {
        "profile_sha256": loaded.sha256, "profile_source": loaded.source,
        "endpoint": endpoint, "served_model": model, "engine_version": er.version,
        "max_model_len": max_len, "container": ident_c,
        "backport_patches": _backport(loaded), "gpus": _gpus(loaded),
        "prompt_set": {"name": prompts.name, "sha256": prompts.sha256,
                       "source": prompts.source, "count": len(prompts.prompts)},
        "client_host": platform.node(),
    }
    return Preflight(endpoint=endpoint, model=model, identity=identity, kv=kv, hold=h,
                     seat_containers=names, forced=force_reason if h.active is not True else None,
                     checks=checks)


# -- live progress -------------------------------------------------------------------------
@dataclass
class PhaseProgress:
    """Live counts of one phase: ``expected``, ``attempted``, ``completed``, ``failed``,
    ``in_flight``; ``tokens`` (Σ output tokens of completed requests); ``slo_met`` (finished
    requests that met every ``[probe.slo]`` target; 0 without one); ``state``."""

    name: str
    expected: int
    concurrency: int
    attempted: int = 0
    completed: int = 0
    failed: int = 0
    in_flight: int = 0
    tokens: int = 0
    slo_met: int = 0
    started: float | None = None
    ended: float | None = None
    state: str = "waiting"


@dataclass
class Progress:
    """What the live panel shows, updated by the run (read it through :meth:`snapshot` from
    another thread). ``token_times``: (perf-counter s, tokens) of completed requests, recent;
    ``ttft_s`` / ``itl_s``: recent values; ``engine``: last counters; ``slo``: the run's
    ``[probe.slo]`` targets (name → ms), ``None`` without one."""

    run_id: str
    phases: list[PhaseProgress]
    status: str = "starting"
    current: str | None = None
    token_events: deque[tuple[float, int]] = field(default_factory=lambda: deque(maxlen=20000))
    ttft_s: deque[float] = field(default_factory=lambda: deque(maxlen=2000))
    itl_s: deque[float] = field(default_factory=lambda: deque(maxlen=20000))
    engine: EngineCounters | None = None
    slo: dict[str, float] | None = None
    disruptions: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    result: dict[str, Any] | None = None


# -- the run ---------------------------------------------------------------------------------
class Probe:
    """One probe run. ``loaded``: the profile; ``pre``: :func:`preflight`'s result;
    ``phases``: which phases to run (default all of ``probe.phases``); ``writer``: where the
    run is kept (default a new :class:`RunWriter`); ``monitor_factory``: builds the
    :class:`InterferenceMonitor` for the run's event loop (``None``: no watching — recorded as
    a problem, the run is then *incomplete*); ``on_progress``: called (in the run's loop) after
    every change."""

    def __init__(self, loaded: LoadedProfile, pre: Preflight, *,
                 phases: list[str] | None = None, writer: RunWriter | None = None,
                 monitor_factory: Callable[[Callable[[], Any]], InterferenceMonitor] | None = None,
                 on_progress: Callable[[Progress], None] | None = None,
                 sweep: SweepSpec | None = None) -> None:
        self.loaded = loaded
        self.spec: ProbeSpec = loaded.profile.probe
        self.pre = pre
        self.sweep = sweep
        chosen = self.spec.phases
        if sweep is not None:
            chosen = sweep.phases()
        elif phases:
            known = {p.name for p in self.spec.phases}
            unknown = [n for n in phases if n not in known]
            if unknown:
                raise ValueError(f"--phase {', '.join(unknown)}: not in probe.phases "
                                 f"({', '.join(sorted(known))})")
            chosen = [p for p in self.spec.phases if p.name in phases]
        self.phases: list[ProbePhaseSpec] = list(chosen)
        self.writer = writer or RunWriter()
        self.monitor_factory = monitor_factory
        self.on_progress = on_progress
        self.prompts: PromptSet = load_prompt_set(self.spec.prompt_set)
        self.timeouts = ClientTimeouts(connect_s=min(10.0, self.spec.read_timeout_s),
                                       read_s=self.spec.read_timeout_s,
                                       total_s=self.spec.request_timeout_s)
        self.progress = Progress(run_id=self.writer.run_id, phases=[
            PhaseProgress(name=p.name, expected=p.requests, concurrency=p.concurrency)
            for p in self.phases], slo=self.spec.slo.targets() if self.spec.slo else None)
        self.started_at = utcnow()
        self._streams: StreamPool | None = None
        self._stop: asyncio.Event | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self.records: dict[str, list[RequestRecord]] = {p.name: [] for p in self.phases}
        self.summary: dict[str, Any] = {}
        self.phase_cpu: dict[str, float] = {}
        self.engine_hist: dict[str, dict[str, Histogram | str]] = {}
        """Per phase: the engine's TTFT / ITL bucket deltas (or why none), for the timing
        check (:mod:`seat_console.core.engine_timing`)."""
        self.cache: dict[str, dict[str, Any]] = {}
        """Per phase its ``prefix_cache`` block (:meth:`_clean_cache`, then the hit rate)."""
        self._reset_offered: bool | None = None

    @property
    def run_id(self) -> str:
        """The run's id (its directory name)."""
        return self.writer.run_id

    def stop(self) -> None:
        """Ask the run to stop (thread-safe): no new requests; in-flight ones are cancelled and
        recorded as interrupted; the run is kept as ``interrupted``."""
        loop, ev = self._loop, self._stop
        if loop is not None and ev is not None:
            loop.call_soon_threadsafe(ev.set)

    def _changed(self) -> None:
        if self.on_progress is not None:
            try:
                self.on_progress(self.progress)
            except Exception:
                log.warning("probe progress callback failed", exc_info=True)

    def _base_summary(self, status: str) -> dict[str, Any]:
        s = self.spec
        return {
            "schema": SUMMARY_SCHEMA, "run_id": self.run_id, "status": status,
            "started_at": self.started_at.isoformat(), "ended_at": None,
            "identity": self.pre.identity,
            "settings": {"api": s.api, "output_tokens": s.output_tokens,
                         "ignore_eos": s.ignore_eos, "warmup_requests": s.warmup_requests,
                         "read_timeout_s": s.read_timeout_s,
                         "request_timeout_s": s.request_timeout_s, "seed": s.seed,
                         "stream_client": s.stream_client,
                         "prefix_cache": s.prefix_cache,
                         "slo": s.slo.targets() if s.slo else None,
                         "phases": [p.model_dump() for p in self.phases]},
            "hold": {"active": self.pre.hold.active, "detail": self.pre.hold.detail,
                     "silence_id": self.pre.hold.silence_id,
                     "forced_reason": self.pre.forced},
            "kv_capacity": self.pre.kv.model_dump(),
            "warmup": {"expected": s.warmup_requests, "completed": 0, "failed": 0},
            "phases": [], "disruptions": [], "check_problems": [], "problems": [],
            "headline_allowed": False, "requests_file": "requests.jsonl",
        }

    async def _one(self, client: httpx.AsyncClient, phase: str, i: int, t0: float
                   ) -> RequestRecord:
        pid, text = self.prompts.pick(i)
        if self.cache.get(phase, {}).get("mode") == "nonce":
            text = with_nonce(text, phase_nonce(self.run_id, phase, pid))
        spec = RequestSpec(phase=phase, index=i, api=self.spec.api, model=self.pre.model,
                           prompt=text, prompt_id=pid, max_tokens=self.spec.output_tokens,
                           ignore_eos=self.spec.ignore_eos)
        sent_at = utcnow()
        t_send = time.perf_counter()
        try:
            if self._streams is not None:
                return await run_request_hot(self._streams, spec, timeouts=self.timeouts,
                                             phase_t0=t0)
            return await run_request(client, spec, timeouts=self.timeouts, phase_t0=t0)
        except asyncio.CancelledError:
            rec = RequestRecord(phase=phase, index=i, api=spec.api, prompt_id=pid,
                                sent_at=sent_at, start_s=t_send - t0, ok=False,
                                failure_kind="interrupted",
                                failure="the run was stopped while this request was in flight",
                                stream_end_s=time.perf_counter() - t_send)
            self.writer.append(rec)
            if phase != WARMUP:
                self.records[phase].append(rec)
            raise

    def _account(self, rec: RequestRecord, pp: PhaseProgress | None) -> None:
        self.writer.append(rec)
        if pp is None:
            return
        self.records[pp.name].append(rec)
        pp.in_flight -= 1
        if self.spec.slo is not None:
            pp.slo_met += not slo_misses(rec, self.spec.slo.targets())
        if rec.ok:
            pp.completed += 1
            pp.tokens += rec.output_tokens or 0
            now = time.perf_counter()
            self.progress.token_events.append((now, rec.output_tokens or 0))
            if rec.ttft_s is not None:
                self.progress.ttft_s.append(rec.ttft_s)
            self.progress.itl_s.extend(rec.itl_s)
        else:
            pp.failed += 1
        self._changed()

    async def _phase(self, client: httpx.AsyncClient, ph: ProbePhaseSpec, pp: PhaseProgress
                     ) -> None:
        assert self._stop is not None
        t0 = time.perf_counter()
        pp.started = t0
        pp.state = "running"
        sem = asyncio.Semaphore(ph.concurrency)
        rng = random.Random(f"{self.spec.seed}:{ph.name}")
        tasks: set[asyncio.Task[None]] = set()

        async def one(i: int) -> None:
            try:
                rec = await self._one(client, ph.name, i, t0)
                self._account(rec, pp)
            finally:
                sem.release()

        try:
            await self._send_all(ph, pp, sem, rng, tasks, one, t0)
        except asyncio.CancelledError:
            for t in list(tasks):
                t.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            pp.ended = time.perf_counter()
            raise
        if self._stop.is_set():
            for t in list(tasks):
                t.cancel()
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)
        pp.ended = time.perf_counter()

    async def _send_all(self, ph: ProbePhaseSpec, pp: PhaseProgress, sem: asyncio.Semaphore,
                        rng: random.Random, tasks: set[asyncio.Task[None]],
                        one: Callable[[int], Any], t0: float) -> None:
        assert self._stop is not None
        next_at = t0
        # A stop wakes a sender waiting for a free slot: one watcher per phase releases the
        # semaphore once when the stop event is set (the sender sees the event and ends), where
        # each request used to wait on two new futures (its acquire and the event; ~20 µs of
        # CPU per request inside the phase). The extra release is never used: nothing is
        # sent after a stop.
        stop_w = asyncio.ensure_future(self._stop.wait())
        stop_w.add_done_callback(lambda _: sem.release())
        try:
            for i in range(ph.requests):
                if self._stop.is_set():
                    break
                if ph.request_rate is not None:
                    next_at += rng.expovariate(ph.request_rate)
                    delay = next_at - time.perf_counter()
                    if delay > 0:
                        try:
                            await asyncio.wait_for(self._stop.wait(), delay)
                            break
                        except TimeoutError:
                            pass
                await sem.acquire()
                if self._stop.is_set():
                    sem.release()
                    break
                pp.attempted += 1
                pp.in_flight += 1
                t = asyncio.ensure_future(one(i))
                tasks.add(t)
                t.add_done_callback(tasks.discard)
                self._changed()
        finally:
            stop_w.cancel()

    async def _settled_after(self, client: httpx.AsyncClient, before: EngineCounters,
                             tokens: int, requests: int) -> EngineCounters | str:
        deadline = time.monotonic() + SETTLE_S
        while True:
            after = await scrape(client)
            if isinstance(after, str):
                return after
            acc = compare(before, after, client_tokens=tokens, client_requests=requests)
            if acc.ok or time.monotonic() > deadline:
                return after
            await asyncio.sleep(0.1)

    async def run(self) -> dict[str, Any]:
        """Run warm-up and phases; returns the final summary (also written to the run dir).
        Cancellation (Ctrl-C) ends the run as ``interrupted`` and re-raises after the summary
        is written."""
        self._loop = asyncio.get_running_loop()
        self._stop = asyncio.Event()
        summary = self._base_summary("running")
        self.writer.write_summary(summary)
        self.progress.status = "running"
        self._changed()
        max_c = max([p.concurrency for p in self.phases] + [1])
        sc = self.spec.stream_client
        client = make_client(self.pre.endpoint, self.timeouts, max_c,
                             http="aiohttp" if sc == "hot" else sc)
        # streams on the hot path (probe/hotpath.py); health, models, /metrics stay on httpx
        self._streams = (StreamPool(self.pre.endpoint, self.timeouts, max_c) if sc == "hot"
                         else None)
        monitor: InterferenceMonitor | None = None
        accounting: dict[str, Accounting | str] = {}
        interrupted = False
        fatal: str | None = None
        try:
            if self.monitor_factory is not None:
                monitor = self.monitor_factory(lambda: scrape(client))
                monitor.on_change = self._sync_monitor(monitor)
                await monitor.baseline()
                monitor.start()
            # warm-up (excluded)
            for i in range(self.spec.warmup_requests):
                if self._stop.is_set():
                    break
                rec = await self._one(client, WARMUP, i, time.perf_counter())
                self.writer.append(rec)
                w = summary["warmup"]
                w["completed" if rec.ok else "failed"] += 1
            for ph, pp in zip(self.phases, self.progress.phases, strict=True):
                if self._stop.is_set():
                    break
                if monitor is not None and monitor.disruptions:
                    # No headline can come of this run any more: do not load a seat that was
                    # just restarted or taken over; the phases left say "not run" and why.
                    break
                if monitor is not None:
                    monitor.phase = ph.name
                self.progress.current = ph.name
                self.cache[ph.name] = await self._clean_cache(client, ph.name, summary)
                before = await scrape(client)
                cpu0 = time.process_time()
                await self._phase(client, ph, pp)
                self.phase_cpu[ph.name] = time.process_time() - cpu0
                recs = self.records[ph.name]
                toks = sum(r.output_tokens or 0 for r in recs if r.ok) + sum(
                    r.tokens_streamed for r in recs if not r.ok)
                done = sum(1 for r in recs if r.ok)
                if isinstance(before, str):
                    accounting[ph.name] = f"before the phase: {before}"
                    self.engine_hist[ph.name] = dict.fromkeys(
                        engine_timing.METRICS, f"/metrics not read before the phase ({before})")
                else:
                    after = await self._settled_after(client, before, toks, done)
                    accounting[ph.name] = (f"after the phase: {after}" if isinstance(after, str)
                                           else compare(before, after, client_tokens=toks,
                                                        client_requests=done))
                    if not isinstance(after, str):
                        self.cache[ph.name].update(
                            prefix_cache_delta(before, after).model_dump(mode="json"))
                    self.engine_hist[ph.name] = (
                        dict.fromkeys(engine_timing.METRICS,
                                      f"/metrics not read after the phase ({after})")
                        if isinstance(after, str) else
                        engine_timing.engine_deltas(before.timing, after.timing))
                pp.state = "measured"
                summary["phases"] = self._phase_blocks(accounting, monitor)
                if self.sweep is not None:
                    verdict = self._judge_sweep(summary)
                    if verdict.found:   # the steps above the stopping one are not run
                        k = next(i for i, p in enumerate(self.phases)
                                 if p.name == verdict.stopped_at)
                        self.phases = self.phases[:k + 1]
                        self.progress.phases = self.progress.phases[:k + 1]
                        self.writer.write_summary(summary)
                        break
                self.writer.write_summary(summary)
                self._changed()
            interrupted = self._stop.is_set()
        except asyncio.CancelledError:
            interrupted = True
            raise
        except Exception as exc:  # noqa: BLE001 - the run is kept as failed, with the reason
            fatal = f"{type(exc).__name__}: {exc}"
        finally:
            if monitor is not None:
                try:
                    await asyncio.shield(monitor.stop())
                except asyncio.CancelledError:
                    monitor.problem("monitor", "the final interference check was cut short by "
                                               "the interruption")
                except Exception as exc:  # noqa: BLE001 - recorded, the run is still kept
                    monitor.problem("monitor", f"final check failed: {type(exc).__name__}: {exc}")
                closer = getattr(monitor, "close_watcher", None)
                if closer is not None:
                    await asyncio.to_thread(closer)
            await client.aclose()
            if self._streams is not None:
                await self._streams.aclose()
            self.summary = self._finish(summary, accounting, monitor, interrupted, fatal)
            self.writer.write_summary(self.summary)
            self.writer.close()
            self.progress.status = self.summary["status"]
            self.progress.result = self.summary
            self._changed()
        return self.summary

    def _sync_monitor(self, monitor: InterferenceMonitor) -> Callable[[], None]:
        def sync() -> None:
            self.progress.disruptions = [f"{zulu_time(d.at)} {d.kind}: "
                                         f"{d.what}" for d in monitor.disruptions]
            self.progress.problems = [f"{p.check}: {p.reason}" for p in monitor.problems]
            self.progress.engine = monitor.last_counters
            self._changed()
        return sync

    def _phase_blocks(self, accounting: dict[str, Accounting | str],
                      monitor: InterferenceMonitor | None) -> list[dict[str, Any]]:
        disrupted = None
        unverified_run = None
        first: Any = None
        if monitor is not None:
            first = d = earliest(monitor.disruptions)
            if d is not None:
                disrupted = f"{d.kind} at {zulu_time(d.at)}: {d.what}"
            if monitor.problems:
                p = monitor.problems[0]
                unverified_run = f"watch check {p.check} failed: {p.reason}"
        else:
            unverified_run = "interference was not watched"
        blocks = []
        for ph in self.phases:
            if ph.name not in accounting:
                continue
            acc = accounting[ph.name]
            unverified = unverified_run
            if isinstance(acc, str):
                unverified = unverified or f"engine counters not read ({acc})"
            elif not acc.ok:
                unverified = unverified or "; ".join(
                    n for n in (acc.reset, acc.tokens.note, acc.requests.note) if n)
            st: PhaseStats = phase_stats(ph.name, self.records[ph.name], expected=ph.requests,
                                         concurrency=ph.concurrency,
                                         request_rate=ph.request_rate, disrupted=disrupted,
                                         unverified=unverified, slo=self._slo())
            timing = self._timing(ph.name, st)
            block_disturbed = (disturbed_from(self.records[ph.name], first.at, first.at_source)
                               if first is not None else None)
            blocks.append({"name": ph.name, "state": st.state, "stats": st.model_dump(mode="json"),
                           "prefix_cache": self.cache.get(ph.name),
                           "disturbed": block_disturbed,
                           "client_cpu_s": self.phase_cpu.get(ph.name),
                           "accounting": (acc.model_dump(mode="json")
                                          if isinstance(acc, Accounting) else {"problem": acc}),
                           "engine_timing": {k: v.model_dump(mode="json")
                                             for k, v in timing.items()},
                           "timing_findings": engine_timing.findings(timing)})
        return blocks

    async def _clean_cache(self, client: httpx.AsyncClient, phase: str,
                           summary: dict[str, Any]) -> dict[str, Any]:
        """Start ``phase`` cache-clean (``probe.prefix_cache``, ``docs/probe.md``): ``POST
        /reset_prefix_cache`` where the engine offers it (vLLM serves it only with
        ``VLLM_SERVER_DEV_MODE=1``), else a nonce before every prompt of the phase
        (:func:`~seat_console.probe.prompts.phase_nonce`). Returns the phase's ``prefix_cache``
        block: ``mode`` (``reset`` / ``nonce`` / ``off``), ``nonce`` (how each prompt's nonce
        is made, :data:`NONCE_RULE`),
        ``reset`` (what the engine answered). A reset the engine does not offer is said once
        per run, in ``summary["prefix_cache_reset"]``."""
        mode = self.spec.prefix_cache
        if mode == "off":
            return {"mode": "off", "nonce": None,
                    "reset": "not tried (probe.prefix_cache = off)"}
        why = "not tried (probe.prefix_cache = nonce)"
        if mode == "auto" and self._reset_offered is not False:
            why = await self._reset(client)
            if why == "ok":
                self._reset_offered = True
                return {"mode": "reset", "nonce": None, "reset": "ok"}
            if self._reset_offered is None and why.startswith("not offered"):
                self._reset_offered = False
                summary["prefix_cache_reset"] = why
        elif mode == "auto":
            why = summary.get("prefix_cache_reset") or "not offered"
        return {"mode": "nonce", "nonce": NONCE_RULE.format(run=self.run_id, phase=phase),
                "reset": why}

    @staticmethod
    async def _reset(client: httpx.AsyncClient) -> str:
        """``"ok"``, or why the engine's prefix cache was not reset (``"not offered: …"`` for
        HTTP 404/405, the engine's own refusal otherwise)."""
        from seat_console.core.untrusted import load_json
        from seat_console.node.engine_client import RESET_PREFIX_CACHE, EngineError, post_async

        try:
            r = await post_async(client, RESET_PREFIX_CACHE, timeout_s=30.0)
        except EngineError as exc:
            return str(exc)
        if r.status in (404, 405):
            return (f"not offered: POST /reset_prefix_cache → HTTP {r.status} (vLLM "
                    "serves it only with VLLM_SERVER_DEV_MODE=1); each phase's prompts carry "
                    "a recorded nonce instead")
        if r.status != 200:
            return f"POST /reset_prefix_cache → HTTP {r.status}"
        try:   # vLLM >= 0.32 answers {"success": bool}
            ok = load_json(r.body, r.url).get("success", True)
        except (ValueError, AttributeError):
            ok = True                            # older vLLM: an empty 200
        return "ok" if ok is True else ("the engine refused the reset (success=false: blocks "
                                        "still held)")

    def _judge_sweep(self, summary: dict[str, Any]) -> SweepVerdict:
        """Apply the sweep's stop rule (:func:`seat_console.core.sweep.judge`) to the steps
        measured so far; records ``summary["sweep"]``."""
        assert self.sweep is not None
        steps = [sweep_step(b) for b in summary["phases"]]
        v = judge(steps, self.sweep.goodput_min, self.sweep.growth_min)
        summary["sweep"] = {"top": self.sweep.top, "goodput_min": self.sweep.goodput_min,
                            "growth_min": self.sweep.growth_min,
                            "steps": [s.model_dump(mode="json") for s in steps],
                            **v.model_dump(mode="json")}
        return v

    def _slo(self) -> dict[str, float] | None:
        return self.spec.slo.targets() if self.spec.slo is not None else None

    def _timing(self, name: str, st: PhaseStats) -> dict[str, engine_timing.MetricTiming]:
        """The client's TTFT / ITL p50 and p95 (``st``) against the engine's own histograms
        over the phase; the client's CPU share of one core attributes a delay."""
        cpu = self.phase_cpu.get(name)
        share = cpu / st.duration_s if cpu is not None and st.duration_s else None
        hist = self.engine_hist.get(name) or dict.fromkeys(engine_timing.METRICS,
                                                           "/metrics not read")
        out = {}
        for figure, dist in (("ttft", st.ttft), ("itl", st.itl)):
            h = hist.get(figure)
            out[figure] = engine_timing.check_figure(
                figure, h if isinstance(h, Histogram) else None,
                {0.5: dist.p50_s, 0.95: dist.p95_s}, dist.n, share,
                problem=h if isinstance(h, str) else None)
        return out

    def _finish(self, summary: dict[str, Any], accounting: dict[str, Accounting | str],
                monitor: InterferenceMonitor | None, interrupted: bool,
                fatal: str | None) -> dict[str, Any]:
        out = dict(summary)
        out["ended_at"] = utcnow().isoformat()
        out["phases"] = self._phase_blocks(accounting, monitor)
        ran = {b["name"] for b in out["phases"]}
        for ph, pp in zip(self.phases, self.progress.phases, strict=True):
            if ph.name not in ran and self.records[ph.name]:
                # interrupted mid-phase: keep its stats (incomplete by construction)
                st = phase_stats(ph.name, self.records[ph.name], expected=ph.requests,
                                 concurrency=ph.concurrency, request_rate=ph.request_rate,
                                 unverified="interrupted", slo=self._slo())
                out["phases"].append({"name": ph.name, "state": st.state,
                                      "stats": st.model_dump(mode="json"),
                                      "accounting": {"problem": "interrupted before the "
                                                                "after-phase scrape"}})
            elif ph.name not in ran:
                block: dict[str, Any] = {"name": ph.name, "state": "not run", "stats": None,
                                         "accounting": None}
                if monitor is not None and monitor.disruptions and not interrupted:
                    d = monitor.disruptions[0]
                    block["reason"] = (f"not started: the run was disrupted at "
                                       f"{zulu_time(d.at)} ({d.kind}: "
                                       f"{d.what})")
                out["phases"].append(block)
            pp.state = next(b["state"] for b in out["phases"] if b["name"] == ph.name)
        if monitor is not None:
            out["disruptions"] = [d.model_dump(mode="json") for d in monitor.disruptions]
            out["check_problems"] = [p.model_dump(mode="json") for p in monitor.problems]
        if not any(r.ok and (r.server_ttft_s is not None or r.server_queue_s is not None)
                   for recs in self.records.values() for r in recs):
            out["server_metrics"] = (
                "the engine returned no per-request metrics in its usage chunks (vLLM: start "
                "it with --enable-per-request-metrics): client and engine timing are compared "
                "per phase only (histograms), not per request")
        if fatal:
            out["problems"] = [*out.get("problems", []), fatal]
        if interrupted:
            status = "interrupted"
        elif fatal:
            status = "failed"
        elif out["disruptions"]:
            status = "disrupted"
        elif all(b.get("stats") and b["stats"].get("headline") for b in out["phases"]):
            status = "complete"
        else:
            status = "incomplete"
        out["status"] = status
        out["headline_allowed"] = status == "complete"
        return out


def disturbed_from(records: Sequence[RequestRecord], at: datetime, source: str
                   ) -> dict[str, Any]:
    """The requests a disruption at ``at`` (UTC) touched: every request still in flight at that
    instant or sent after it (its end — ``sent_at`` + ``stream_end_s``, else + ``e2e_s`` — at
    or after ``at``; a request with no end recorded counts as touched). Returns ``{"from": ISO
    time, "from_source": "node" | "detected", "requests": touched, "of": all}``."""
    n = 0
    for r in records:
        dur = r.stream_end_s if r.stream_end_s is not None else r.e2e_s
        if dur is None or not math.isfinite(dur) or r.sent_at + timedelta(seconds=max(dur, 0.0)) >= at:
            n += 1
    return {"from": at.isoformat(), "from_source": source, "requests": n, "of": len(records)}


def default_monitor_factory(loaded: LoadedProfile, pre: Preflight, *, context: Any | None = None,
                            ) -> Callable[[Callable[[], Any]], InterferenceMonitor]:
    """The real monitor: the docker event stream, the node's service units of the profile's
    timers, the hold's silence, the engine's counters. ``context``: the app's
    :class:`~seat_console.node.context.NodeContext` — its event watcher (shared with the
    containers panel and the actions; the monitor reads its changes from the probe's start and
    does not close it), transport and Alertmanager client are used; without it the monitor
    makes its own (an :class:`EventWatcher` from now, attributing through the journal)."""
    from seat_console.node.attribution import JournalAttributor
    from seat_console.node.transport import TransportError, make_transport
    from seat_console.probe.interference import service_units
    from seat_console.node.docker import EventWatcher, docker_client, resolve_docker_host

    def factory(scrape_fn: Callable[[], Any]) -> InterferenceMonitor:
        if context is not None:
            watcher = context.watcher().start()
            close_watcher: Callable[[], None] = lambda: None   # the context's owner closes it
        else:
            host = resolve_docker_host(loaded.profile.node.docker_host)
            watcher = EventWatcher(lambda: docker_client(host, timeout_s=10),
                                   types=("container",), since=utcnow(),
                                   attribute=JournalAttributor()).start()
            close_watcher = watcher.close
        try:
            transport = context.transport if context is not None else make_transport(loaded)
        except TransportError:
            transport = None
        silence_state = None
        if pre.hold.silence_id:
            silence_state = _silence_checker(loaded, pre.hold.silence_id, pre.hold.expires_at,
                                             client=_am_of(context))
        mon = InterferenceMonitor(
            watcher=watcher, container_names=pre.seat_containers, transport=transport,
            services=service_units(loaded.profile.timers.all_units),
            timers=list(loaded.profile.timers.all_units),
            silence_state=silence_state, scrape=scrape_fn,
            interval_s=loaded.profile.probe.watch_interval_s)
        mon.close_watcher = close_watcher  # type: ignore[attr-defined]
        return mon

    return factory


def _am_of(context: Any | None) -> Any | None:
    """The context's Alertmanager client, or ``None`` (none given, or it cannot be built)."""
    if context is None:
        return None
    try:
        return context.alertmanager
    except Exception:  # noqa: BLE001 - the checker makes its own and reports the error
        return None


def _silence_checker(loaded: LoadedProfile, silence_id: str,
                     expires_at: datetime | None = None, client: Any | None = None,
                     ) -> Callable[[], str | None]:
    """``None`` while silence ``silence_id`` is active and the hold's lease (``expires_at``,
    UTC) has not passed; a sentence when either ended; ``"check failed: …"`` when Alertmanager
    cannot be asked. ``client``: a shared Alertmanager client (the app's node context), else
    one is made per check."""
    from seat_console.node.alertmanager import AlertmanagerClient

    def check() -> str | None:
        if expires_at is not None and utcnow() >= expires_at:
            return f"the hold's lease expired at {zulu_time(expires_at)}"
        try:
            c = client if client is not None else AlertmanagerClient(loaded.profile.alertmanager)
        except Exception as exc:  # noqa: BLE001
            return f"check failed: {type(exc).__name__}: {exc}"
        try:
            s = c.get_silence(silence_id)
        except Exception as exc:  # noqa: BLE001
            return f"check failed: {type(exc).__name__}: {exc}"
        finally:
            if c is not client:
                c.close()
        state = getattr(s, "state", None)
        if state != "active":
            return f"the hold's silence {silence_id} is {state} (it expired or was removed)"
        return None

    return check


__all__ = [
    "WARMUP",
    "disturbed_from",
    "HoldInfo",
    "PhaseProgress",
    "Preflight",
    "PreflightCheck",
    "Probe",
    "ProbeRefused",
    "Progress",
    "SweepSpec",
    "default_monitor_factory",
    "preflight",
]
