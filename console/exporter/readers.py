"""The exporter's read functions, one per source, each turning a source's reading into the small
value :func:`seat_console.exporter.model.build_families` needs. Read only: nothing here writes
to the node, Alertmanager, the journal or the probe runs.

Each ``make_*`` returns ``(read, close)``; ``read()`` blocks (it runs in its
:class:`~seat_console.snapshot.poll.Poller`'s thread) and returns a value or an
:class:`~seat_console.sources.Unavailable`. Each source gets its own transport or client: no
two threads share one. The sources are the source table's
(:mod:`seat_console.snapshot.table`): :data:`READERS` has one reader per name the table's
entries are exported as, and a reader that reads a source builds it by the table's entry.
"""

from __future__ import annotations

import os
import sqlite3
import time
from collections.abc import Callable
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from seat_console.actions.journal import ReadOnlyJournal, unfinished_heads
from seat_console.exporter.model import (
    ContainerValue,
    EngineCheck,
    FitVerdict,
    GpuValue,
    JournalValue,
    LeaseValue,
    RunbookRun,
    SilenceValue,
    TimerFact,
)
from seat_console.core.profile import LoadedProfile
from seat_console.core.base import Unavailable
from seat_console.core.untrusted import InputError, get_dict, get_list, get_str, load_json
from seat_console.snapshot import table

Reader = tuple[Callable[[], Any], Callable[[], None]]

MAX_SUMMARY_BYTES = 4 * 2**20
"""A probe run's ``summary.json`` larger than this is not read (it is a few KiB)."""


def _noop() -> None:
    return None


# -- node: timers and leases -----------------------------------------------------------------
def make_node(loaded: LoadedProfile) -> Reader:
    """The profile's timer units and every hold lease on the node in **one** ``systemctl
    show`` through the node transport (the units and the pattern
    :data:`~seat_console.actions.node_ops.LEASE_GLOB`:
    :func:`seat_console.sources.timers.read_unit_states_matching`), plus one ``systemctl
    list-timers`` for the next elapse only while a lease is armed
    (:func:`seat_console.actions.node_ops.armed_leases`) → ``{"timers": tuple[TimerFact, ...],
    "lease": LeaseValue}``, either one an :class:`Unavailable` on its own (a matched block that
    cannot be trusted downs ``lease`` only; a failed command or untrustworthy timer blocks
    down both). Read by one :class:`~seat_console.snapshot.poll.PollerGroup`."""
    from seat_console.actions import node_ops
    from seat_console.node.transport import TransportError, make_transport
    from seat_console.sources.timers import read_unit_states_matching

    units = list(loaded.profile.timers.all_units)
    try:
        transport = make_transport(loaded)
    except TransportError as exc:
        msg = str(exc)
        return (lambda: {n: Unavailable(source=n, kind="config", reason=msg)
                         for n in ("timers", "lease")}), _noop

    def read() -> dict[str, Any]:
        try:
            r = read_unit_states_matching(transport, units, [node_ops.LEASE_GLOB])
        except (TransportError, ValueError) as exc:
            r = Unavailable(source="timers", kind="error", reason=str(exc))
        if isinstance(r, Unavailable):
            return {"timers": r, "lease": r.model_copy(update={"source": "lease"})}
        timers = tuple(timer_fact(t) for t in r.named.timers)
        if r.matched is None:
            return {"timers": timers, "lease": Unavailable(
                source="lease", kind="error", reason=r.matched_error or "leases not read")}
        partial = incomplete_block(r.matched)
        if partial is not None:
            return {"timers": timers, "lease": Unavailable(source="lease", kind="error",
                                                          reason=partial)}
        try:
            leases = node_ops.armed_leases(transport, r.matched)
        except TransportError as exc:
            return {"timers": timers,
                    "lease": Unavailable(source="lease", kind="error", reason=str(exc))}
        return {"timers": timers, "lease": LeaseValue(tuple(
            t.next_elapse.timestamp() if t.next_elapse else None for t in leases))}

    return read, transport.close


def timer_fact(t: Any) -> TimerFact:
    """A named timer's :class:`TimerFact` from its
    :class:`~seat_console.sources.timers.TimerState`: a ``LoadState`` or ``ActiveState``
    its block lacked is unknown (``None``), never "not loaded" / "not active" — which would
    read as no hold, or as a stopped timer (a hold, and without a lease the alert's
    ``seat_hold_without_lease``)."""
    return TimerFact(t.unit, None if t.load_state is None else t.loaded,
                     None if t.active_state is None else t.active)


def incomplete_block(matched: Any) -> str | None:
    """Why the lease part of a ``systemctl show`` cannot be trusted, or ``None``: a matched
    unit (a possible hold lease) whose block lacks ``LoadState`` or ``ActiveState``, or an
    active one without ``SubState`` (elapsed or waiting cannot be told) — whether a lease is
    armed is then unknown, never "no lease"."""
    for t in matched:
        missing = [p for p, v in (("LoadState", t.load_state), ("ActiveState", t.active_state))
                   if v is None]
        if not missing and t.active_state == "active" and t.sub_state is None:
            missing = ["SubState"]
        if missing:
            name = t.unit if len(t.unit) <= 80 else t.unit[:80] + "…"
            return (f"systemctl show: the block of {name!r} has no {' or '.join(missing)}; "
                    "whether a hold lease is armed is unknown")
    return None


def _part(name: str) -> Callable[[LoadedProfile], Reader]:
    def make(loaded: LoadedProfile) -> Reader:
        read, close = make_node(loaded)
        return (lambda: read()[name]), close

    make.__doc__ = f"The ``{name}`` part of :func:`make_node` alone (its own transport)."
    return make


make_timers = _part("timers")
make_lease = _part("lease")


# -- Alertmanager ----------------------------------------------------------------------------
def make_silences(loaded: LoadedProfile) -> Reader:
    """The seat's silences (Alertmanager API v2, the profile's matchers) →
    :class:`SilenceValue` (the ends of the active ones known to cover the seat)."""
    from seat_console.sources.silences import SilencesReading

    src = table.build("silences", loaded)

    def read() -> Any:
        r = src.read()
        if not isinstance(r, SilencesReading):
            return r
        return SilenceValue(tuple(s.ends_at.timestamp() for s in r.active))

    return read, src.close


# -- docker ----------------------------------------------------------------------------------
def make_containers(loaded: LoadedProfile) -> Reader:
    """Who holds the seat (:mod:`seat_console.sources.seat`: the resident or the probe
    container, its image ID and repo digest) → :class:`ContainerValue`."""
    from seat_console.sources.seat import SeatReading

    src = table.build("seat", loaded)

    def read() -> Any:
        r = src.read()
        if not isinstance(r, SeatReading):
            return r
        role = r.role if r.role in ("resident", "probe", None) else "unknown"
        return ContainerValue(role, r.name, r.image_id, r.repo_digest)

    return read, src.close


# -- the engine ------------------------------------------------------------------------------
def make_engine(loaded: LoadedProfile, timeout_s: float = 3.0) -> Reader:
    """``GET <seat.endpoint>/health`` → :class:`EngineCheck` (healthy = HTTP 200), and when it
    is 200 ``GET /is_paused`` and ``/is_sleeping`` (the engine's own hold state), through the
    one engine client (:class:`seat_console.node.engine_client.EngineClient`). No answer
    (refused, timed out) is a good reading that says the engine is down: the source is up
    when the exporter could look."""
    from seat_console.node.engine_client import IS_PAUSED, IS_SLEEPING, EngineClient, EngineError

    base = str(loaded.profile.seat.endpoint).rstrip("/")
    client = EngineClient(base, timeout_s)

    def read() -> Any:
        try:
            status = client.health()
        except EngineError as exc:
            if exc.kind == "timeout":
                return EngineCheck(False, None, f"{base}/health: no answer in {timeout_s:g} s")
            return EngineCheck(False, None, f"{base}/health: {exc.problem}")
        if status != 200:
            return EngineCheck(False, status, f"HTTP {status}")
        return EngineCheck(True, 200, None, paused=flag(IS_PAUSED, "is_paused"),
                           asleep=flag(IS_SLEEPING, "is_sleeping"))

    def flag(path: str, key: str) -> bool | None:
        """The engine's own hold state (:func:`seat_console.sources.engine.parse_flag`):
        ``None`` when not offered (404: no ``VLLM_SERVER_DEV_MODE``), not answered or not
        ``{key: bool}`` (unknown, never "not paused")."""
        from seat_console.core.untrusted import InputError
        from seat_console.sources.engine import parse_flag

        try:
            r = client.flag(path, max_bytes=4096)
        except EngineError:
            return None
        if r.status != 200:
            return None
        try:
            return parse_flag(r.body, path, key)
        except InputError:
            return None

    return read, client.close


# -- GPUs and the fit verdict ----------------------------------------------------------------
def make_gpus(loaded: LoadedProfile) -> Reader:
    """NVML (:mod:`seat_console.sources.gpu`), and with it the fit verdict per side
    (:func:`seat_console.snapshot.fit_verdict.profile_budgets`: computed once per change of
    its inputs, as the TUI's; checkpoint scans are cached while the files do not change) → :class:`GpuValue`. NVML unavailable: the source is down (the
    verdict needs live cards; none is given from declared sizes alone)."""
    from seat_console.snapshot.fit_reading import (gather_fit_inputs, host_memory,
                                                   running_engine_versions)
    from seat_console.snapshot.fit_verdict import profile_budgets
    from seat_console.sources.gpu import GpuSnapshot

    src = table.build("gpus", loaded)
    seat = table.build("seat", loaded)
    base = str(loaded.profile.seat.endpoint).rstrip("/")

    def read() -> Any:
        snap = src.read()
        if not isinstance(snap, GpuSnapshot):
            return snap
        running = running_engine_versions(loaded, _engine_version(base), seat.read())
        comp, _ = profile_budgets(gather_fit_inputs(loaded, snap, host=host_memory(),
                                                    running_versions=running))
        fit: dict[str, FitVerdict] = {}
        for side, b in (("resident", comp.resident), ("candidate", comp.candidate)):
            if b is not None and b.no_verdict is None:
                fit[side] = FitVerdict(b.verdict.fits, max(0, b.verdict.must_leave_bytes))
        return GpuValue(fit)

    def close() -> None:
        src.close()
        seat.close()

    return read, close


def _engine_version(base: str, timeout_s: float = 3.0) -> Any:
    """The engine at ``base``: ``/health`` and, when 200, ``/version``, as the fields
    :func:`seat_console.snapshot.fit_reading.running_engine_versions` reads (``healthy``,
    ``version``, ``read_at``: UTC before the first request); ``None`` when it does not answer.
    Never raises. Source of the rule: vLLM's ``GET /version`` (``{"version": "0.32.0"}``)."""
    from types import SimpleNamespace

    from seat_console.node.engine_client import EngineClient, EngineError
    from seat_console.sources.engine import parse_version

    read_at = datetime.now(timezone.utc)
    try:
        with EngineClient(base, timeout_s) as client:
            if client.health() != 200:
                return SimpleNamespace(healthy=False, version=None, read_at=read_at)
            r = client.version(max_bytes=4096)
    except EngineError:
        return None
    version = None
    if r.status == 200:
        try:
            version = parse_version(r.body)
        except InputError:
            version = None
    return SimpleNamespace(healthy=True, version=version, read_at=read_at)


# -- the journal and the probe runs (local files, opened read-only) --------------------------
def unfinished_runs(path: Path) -> tuple[RunbookRun, ...]:
    """The journal's unfinished runs (a ``start`` row, no ``end`` row), oldest first, each with
    its newest row's step: :func:`seat_console.actions.journal.unfinished_heads` (the file
    opened read-only; the exporter never creates or writes it). Raises :class:`sqlite3.Error`
    when it cannot be read."""
    return tuple(RunbookRun(rb, step, rid) for rid, rb, step in unfinished_heads(path))


def probe_state(runs: Path, stale_s: float, now: float | None = None
                ) -> tuple[tuple[str, str] | None, bool | None]:
    """``(phase in progress, latest run disrupted)`` from the newest probe run under ``runs``.

    Phase in progress: ``(run_id, phase)`` when the newest run's ``summary.json`` says
    ``running``, it or ``requests.jsonl`` changed within ``stale_s`` seconds (an older one is a
    console killed mid-run, not a run in progress), and a phase of its ``settings.phases`` is
    not yet in ``phases``: the first such (its warm-up counts as the first phase). Disrupted:
    the newest run has ``disruptions`` or status ``disrupted``; ``None`` without a run. A
    summary that cannot be read gives ``(None, None)``: raises :class:`ValueError` (an
    :class:`~seat_console.core.untrusted.InputError` naming the file)."""
    if not runs.is_dir():
        return None, None
    dirs = sorted(p for p in runs.iterdir() if p.is_dir())
    if not dirs:
        return None, None
    d = dirs[-1]
    f = d / "summary.json"
    try:
        if f.stat().st_size > MAX_SUMMARY_BYTES:
            raise InputError(str(f), f"larger than {MAX_SUMMARY_BYTES} bytes")
        s = load_json(f.read_bytes(), str(f))
    except OSError as exc:
        raise InputError(str(f), f"cannot read ({exc.strerror})") from None
    if not isinstance(s, dict):
        raise InputError(str(f), "not a JSON object")
    status = s.get("status")
    disruptions = s.get("disruptions")
    disrupted = status == "disrupted" or (isinstance(disruptions, list) and bool(disruptions))
    phase = None
    now = time.time() if now is None else now
    if status == "running":
        mtimes = [p.stat().st_mtime for p in (f, d / "requests.jsonl") if p.exists()]
        fresh = bool(mtimes) and now - max(mtimes) <= stale_s
        # phases lists of any JSON type: a number or true here raised TypeError (issue 31)
        planned = [get_str(p, "name") for p in get_list(get_dict(s, "settings"), "phases")]
        done = {get_str(p, "name") for p in get_list(s, "phases")}
        todo = [n for n in planned if n and n not in done]
        if fresh and todo:
            phase = (d.name, todo[0][:64])
    return phase, disrupted


def seat_downtimes(journal: Any) -> tuple[float | None, int, float]:
    """``(last, runs, total)``: the seat's downtime (s) measured by the newest runbook run,
    how many runs measured one, and their sum (:func:`seat_console.actions.drain.downtimes`);
    ``(None, 0, 0.0)`` when the journal cannot be read (the stages reading says why)."""
    from seat_console.actions.drain import downtimes

    try:
        ds = downtimes(journal)
    except Exception:  # noqa: BLE001 - JournalError; the stages read reports it
        return None, 0, 0.0
    return (ds[-1]["seconds"] if ds else None), len(ds), float(sum(d["seconds"] for d in ds))


def runbook_stages(journal: Any, runs: Path, profile: Any = None
                   ) -> tuple[tuple[tuple[str, str], ...], tuple[str, str] | None] | str:
    """``(every stage's (name, status), the next stage's (name, status) or None)`` by
    :func:`~seat_console.actions.stages.read_runbook` (the node not read: who holds the seat
    is the ``containers`` source's; ``profile``, the seat profile, decides the image stage as
    ``seat-console runbook`` does), or a sentence when the journal cannot be read. The next
    stage is given only while a cycle is under way: some stage of the open cycle is neither
    ``todo`` nor ``skipped``."""
    from seat_console.actions.stages import read_runbook

    st = read_runbook(None, journal, runs_dir=runs, profile=profile)
    bad = [p for p in st.problems if p.startswith("the journal")]
    if bad:
        return bad[0]
    stages = tuple((s.name, s.status) for s in st.stages)
    # a skipped image stage (nothing required of the image) is no cycle under way
    begun = any(s.status not in ("todo", "skipped") for s in st.stages)
    nxt = (st.next.name, st.next.status) if st.next is not None and begun else None
    return stages, nxt


STAGES_MAX_AGE_S = 60.0
"""The runbook's stages are read again at least this often (a hold's lease lapses with time
alone), else only when the journal, its WAL or the runs folder changed."""


def _files_key(*paths: Path) -> tuple[tuple[int, int] | None, ...]:
    """``(mtime_ns, size)`` of each path (``None``: absent): changes when one is written."""
    out: list[tuple[int, int] | None] = []
    for p in paths:
        try:
            st = p.stat()
            out.append((st.st_mtime_ns, st.st_size))
        except OSError:
            out.append(None)
    return tuple(out)


def promoted(path: Path) -> tuple[str, str, bool] | None:
    """``(container, promote run ID, forced)`` from the seat-state file at ``path``; ``None``
    when there is none or it cannot be read (``seat_promoted_info`` is then absent)."""
    from seat_console.core.seat_file import SeatFileError, read_seat_file

    try:
        sf = read_seat_file(path)
    except SeatFileError:
        return None
    if sf is None:
        return None
    return sf.container, sf.promote_run_id, sf.forced is not None


def make_journal(loaded: LoadedProfile, environ: dict[str, str] | None = None) -> Reader:
    """The journal's unfinished runbooks, the runbook's stages (:func:`runbook_stages`; read
    again only when the journal, its WAL or the runs folder changed, or after
    :data:`STAGES_MAX_AGE_S`) and the newest probe run → :class:`JournalValue`.
    Paths: the console's state dir (``$SEAT_CONSOLE_STATE_DIR``) and data dir
    (``$SEAT_CONSOLE_DATA_DIR``). A probe run is stale after ``probe.request_timeout_s`` + 60 s
    without a write."""
    from seat_console.core.paths import journal_path
    from seat_console.probe.store import runs_dir

    from seat_console.core.seat_file import seat_file_path

    env = dict(os.environ if environ is None else environ)
    jpath, rpath, spath = journal_path(env), runs_dir(env), seat_file_path(env)
    cache: dict[str, Any] = {}   # the stages, kept while the files are unchanged
    stale_s = float(loaded.profile.probe.request_timeout_s) + 60.0

    def read() -> Any:
        try:
            runbooks = unfinished_runs(jpath)
        except sqlite3.Error as exc:
            return Unavailable(source="journal", kind="error",
                               reason=f"journal {jpath}: cannot read ({exc})")
        try:
            phase, disrupted = probe_state(rpath, stale_s)
        except ValueError as exc:
            return Unavailable(source="journal", kind="error", reason=str(exc))
        key = _files_key(jpath, Path(str(jpath) + "-wal"), rpath)
        if key != cache.get("key") or time.monotonic() - cache.get("at", 0.0) > STAGES_MAX_AGE_S:
            cache.update(key=key, at=time.monotonic(),
                         rs=runbook_stages(ReadOnlyJournal(jpath), rpath, loaded.profile))
            cache["down"] = seat_downtimes(ReadOnlyJournal(jpath))
        rs = cache["rs"]
        if isinstance(rs, str):
            return Unavailable(source="journal", kind="error", reason=rs)
        last, n, total = cache["down"]
        return JournalValue(runbooks, phase, disrupted, stages=rs[0], next_stage=rs[1],
                            promoted=promoted(spath), downtime_s=last, downtime_runs=n,
                            downtime_sum_s=total)

    return read, _noop


_BY_ENTRY: dict[str, dict[str, Callable[[LoadedProfile], Reader]]] = {
    "gpus": {"gpus": make_gpus}, "timers": {"timers": make_timers, "lease": make_lease},
    "silences": {"silences": make_silences}, "seat": {"containers": make_containers},
    "engine": {"engine": make_engine}, "actions": {"journal": make_journal},
}
"""The reader of each exported name, by the source table's entry it reads."""

READERS: dict[str, Callable[[LoadedProfile], Reader]] = {
    x: _BY_ENTRY[e.name][x] for x, e in table.exported().items()}
"""How each source's reader is built alone (tests pass their own)."""

GROUP_READERS: dict[tuple[str, ...], Callable[[LoadedProfile], Reader]] = {
    ("timers", "lease"): make_node,
}
"""Sources the exporter reads together with one call (one
:class:`~seat_console.snapshot.poll.PollerGroup` each); their :data:`READERS` entries are
then not used. The read returns ``{source: value}``."""

INTERVALS_S: dict[str, float] = {
    x: e.exporter_interval_s for x, e in table.exported().items()}
"""Default seconds between two reads of each source (``--interval`` sets them all): the
source table's ``exporter_interval_s``."""

__all__ = ["GROUP_READERS", "INTERVALS_S", "READERS", "ReadOnlyJournal", "incomplete_block",
           "make_containers", "make_engine", "make_gpus", "make_journal", "make_lease",
           "make_node", "make_silences", "make_timers", "probe_state", "runbook_stages",
           "timer_fact", "unfinished_runs"]
