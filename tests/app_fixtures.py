"""Recorded inputs for the app's Pilot and snapshot tests and for the README screenshot.

* :class:`FakeClock` — the app's injected UTC clock, advanced only by the test, so ages and
  sparkline positions are the same on every run.
* :class:`RecordedMapper` — stands where the host's ``/proc`` stands for the GPU sampler: a
  recorded PID → process/container table (NVML's PIDs in the double do not exist on this
  machine). The real ``/proc`` mapping is tested in ``tests/test_gpu.py``.
* :class:`ClockedGpuSource` — the real :class:`seat_console.sources.gpu.GpuSource` over the NVML double,
  with its timestamps taken from the fake clock; optionally plays a script of used-memory
  values (one per read) for the sparkline.
* :func:`demo_app` — the seat of the README screenshot: two H200s, a ~100 GiB vLLM worker in
  the ``seat-resident`` container on GPU 0.
* Small sources with controlled behaviour: counting, hanging on an Event, raising, unavailable.
"""

from __future__ import annotations

import dataclasses

import sys
import threading
from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from seat_console.tui.app import SeatConsoleApp
from seat_console.sources.gpu import ContainerRef, GpuSampler, GpuSnapshot, GpuSource, ProcessMapper
from seat_console.node.nvml import Nvml
from seat_console.core.profile import LoadedProfile, load_profile
from seat_console.core.base import Frozen, Source, Unavailable
from seat_console.widgets.gpu import GpuPanel
from seat_console.widgets.panel import SourcePanel

sys.path.insert(0, str(Path(__file__).parent))
from nvml_double import FakeCard, FakeProcess, NvmlDouble, h200_pair

GIB = 1 << 30
T0 = datetime(2026, 11, 29, 12, 0, 0, tzinfo=UTC)
"""Start of the recorded timeline (UTC)."""

VLLM_PID = 4121
VLLM_CONTAINER_ID = "4c0a1b7d4ad395694bee0c2848084b95681f651f2f3f57b9ee119f87a0d4a7b3"
VLLM_WORKER_BYTES = 100 * GIB + 384 * (1 << 20)
"""The resident vLLM worker's memory on GPU 0: 100.375 GiB."""


class FakeClock:
    """A UTC clock that moves only when told to (``advance``)."""

    def __init__(self, start: datetime = T0) -> None:
        self.t = start

    def __call__(self) -> datetime:
        return self.t

    def advance(self, seconds: float) -> None:
        """Move the clock forward by ``seconds``."""
        self.t += timedelta(seconds=seconds)


class RecordedMapper(ProcessMapper):
    """PID → fields recorded from a host (see module docstring); unknown PIDs are unmapped."""

    def __init__(self, table: dict[int, dict[str, Any]]) -> None:
        super().__init__("/nonexistent-proc")
        self.table = table

    def map(self, pid: int) -> dict[str, Any]:
        """The recorded fields for ``pid``, else unmapped with the sampler's usual reason."""
        return self.table.get(pid, {
            "mapped": False,
            "unmapped_reason": "no such PID here (another PID namespace, or exited)"})


class ClockedGpuSource(GpuSource):
    """The real GPU source over the NVML double, timestamped by ``clock``.

    ``script``: optional used-memory values (bytes) for ``double.cards[0]``, one per read
    (the last repeats); each scripted read advances ``clock`` by ``step_s`` first (reads past
    the script's end leave the clock alone, so extra polls change nothing on screen).
    """

    def __init__(self, double: NvmlDouble, clock: FakeClock, seat: list[str],
                 mapper: ProcessMapper, *, script: Sequence[int] = (), step_s: float = 0.0,
                 on_read: Callable[[int], None] | None = None) -> None:
        super().__init__(GpuSampler(Nvml(double), seat, mapper))
        self.double, self.clock, self.script, self.step_s = double, clock, list(script), step_s
        self.reads = 0
        self.on_read = on_read

    def read(self) -> BaseModel:
        """One snapshot with ``sampled_at`` from the fake clock (and a fixed duration)."""
        if self.step_s and (not self.script or self.reads < len(self.script)):
            self.clock.advance(self.step_s)
        if self.script:
            used = self.script[min(self.reads, len(self.script) - 1)]
            self.double.cards[0].used = used
        if self.on_read is not None:
            self.on_read(self.reads)
        self.reads += 1
        r = super().read()
        if isinstance(r, GpuSnapshot):
            return r.model_copy(update={"sampled_at": self.clock(), "sample_duration_s": 0.0021})
        if isinstance(r, Unavailable):
            return r.model_copy(update={"at": self.clock()})
        return r


def vllm_mapper() -> RecordedMapper:
    """The resident engine's worker as read from a host's /proc: python3 in seat-resident."""
    return RecordedMapper({VLLM_PID: {
        "mapped": True, "unmapped_reason": None, "name": "python3",
        "command": ["python3", "-m", "vllm.entrypoints.openai.api_server", "--model",
                    "/models/resident-fp8", "--tensor-parallel-size", "2"],
        "username": "root",
        "container": ContainerRef(runtime="docker", id=VLLM_CONTAINER_ID, name="seat-resident"),
    }})


def demo_cards() -> list[FakeCard]:
    """Two H200s: GPU 0 holds the vLLM worker (~100 GiB) and an unmappable PID; GPU 1 idle."""
    cards = h200_pair()
    c0, c1 = cards
    c0.used = VLLM_WORKER_BYTES + 512 * (1 << 20)
    c0.processes = [FakeProcess(VLLM_PID, VLLM_WORKER_BYTES),
                    FakeProcess(9_999_999, 512 * (1 << 20))]
    c0.util_gpu, c0.util_mem, c0.temperature = 37, 21, 54
    c0.power_mw, c0.power_limit_mw = 312_480, 700_000
    c1.used = 0
    c1.util_gpu, c1.util_mem, c1.temperature, c1.power_mw = 0, 0, 31, 75_123
    return cards


def loading_script(final: int, points: int = 30) -> list[int]:
    """Used bytes of a card while vLLM loads and then serves: idle, ramp over 6 reads, flat."""
    idle = 0
    ramp = [final * k // 6 for k in range(1, 7)]
    return [idle] * 4 + ramp + [final] * max(0, points - 10)


STAGE_KEYS = {"hold": "node.hold", "backport": "node.build-backport", "swap": "node.swap",
              "probe": "node.probe", "compare": "node.compare", "restore": "node.restore",
              "promote": "node.promote", "release": "node.release"}
"""The binding id that runs each stage in the TUI (as ``actions.stages.KEYS``; the read stages
without one — fit, image, decide — run from the runbook screen's Enter)."""

STAGE_COMMANDS = {"fit": "seat-console fit", "image": "seat-console image-check",
                  "hold": "seat-console hold --ttl 4h", "backport": "seat-console build-backport",
                  "swap": "seat-console swap", "probe": "seat-console probe",
                  "compare": "seat-console compare --bracket ABBA",
                  "decide": "seat-console decide", "restore": "seat-console restore",
                  "promote": "seat-console promote", "release": "seat-console release"}


def recorded_runbook(done: int = 3, *, statuses: dict[str, str] | None = None,
                     next_stage: str | None = "", problems: tuple[str, ...] = ()):
    """A :class:`~seat_console.actions.stages.RunbookState` as the reader would give it: the
    first ``done`` stages done (by ``ops@seat-node``, a minute apart from :data:`T0`, with
    evidence), the rest todo; ``statuses`` overrides stages' statuses; the next stage is the
    first not done or skipped (``next_stage``: that one; ``None``: complete)."""
    from seat_console.actions.stages import STAGES, RunbookState, StageState

    evidence = {"fit": {"verdict": "fits"}, "image": {"image digest": "sha256:58a8c0ffee"},
                "hold": {"hold": "seat-hold-20261129t115500z-1a2b"},
                "backport": {"image digest": "sha256:0b1d2e3f4a5b"}}
    needs = {"fit": "a candidate in the profile", "image": "the candidate's image",
             "hold": "nothing (it places the hold)", "backport": "the hold",
             "swap": "a hold and the backport image", "probe": "the candidate in the seat",
             "compare": "the resident in the seat", "decide": "a complete comparison",
             "restore": "a decision (KEEP)", "promote": "a decision (PROMOTE-ABLE)",
             "release": "the resident (or the promoted candidate) in the seat"}
    stages = []
    for i, name in enumerate(STAGES):
        status = (statuses or {}).get(name, "done" if i < done else "todo")
        finished = status in ("done", "failed", "stale")
        stages.append(StageState(
            name, status, at=T0 + timedelta(minutes=i) if finished else None,
            operator="ops@seat-node" if finished else None,
            evidence=evidence.get(name, {}) if finished else {}, needs=needs[name],
            key=STAGE_KEYS.get(name), command=STAGE_COMMANDS[name],
            reason="a new backport after the probe" if status == "stale" else
            "the probe's leg was disrupted" if status == "failed" else ""))
    if next_stage == "":
        nxt = next((s for s in stages if s.status not in ("done", "skipped")), None)
    else:
        nxt = next((s for s in stages if s.name == next_stage), None)
    return RunbookState(tuple(stages), nxt, "resident", T0 + timedelta(minutes=30), problems)


DECISION_ANSWERS = {
    "PROMOTE-ABLE": ("enough data? yes: 12 measured populations complete on both arms",
                     "fits? yes: the fit budget says candidate-nvfp4 fits",
                     "KV capacity? higher: 1,840,317 KV tokens on B vs 567,349 on A",
                     "fidelity? yes: top-20 sets overlap at every position",
                     "canaries? yes: no kind is worse on B",
                     "throughput and latency? no figure is worse by a claimed difference"),
    "KEEP": ("fits? yes: the fit budget says candidate-nvfp4 fits",
             "canaries? no: json-schema passes 7/12 on B vs 12/12 on A (disjoint Wilson 95 % "
             "intervals)"),
    "INCONCLUSIVE": ("fits? yes: the fit budget says candidate-nvfp4 fits",
                     "throughput and latency? cannot tell, because 2 pairs of legs cannot "
                     "reach p ≤ 0.05; needs ≥ 3 rounds (6 pairs)"),
}
"""Recorded answers of a decide row per decision (its stage's ``details``, as ``read_runbook``
gives them: ``"question answer"``)."""


def decided_runbook(decision: str = "PROMOTE-ABLE", *, holder: str = "candidate",
                    restore: str = "todo", promote: str | None = None):
    """A :class:`~seat_console.actions.stages.RunbookState` right after ``decide``: fit to
    decide done (image skipped), ``decision`` with :data:`DECISION_ANSWERS` as the decide
    stage's details, the seat held by ``holder``; ``restore`` / ``promote`` their statuses
    (promote default: todo for PROMOTE-ABLE, else skipped); the next stage as ``read_runbook``
    picks it (promote first after a PROMOTE-ABLE)."""
    from seat_console.actions.stages import STAGES, RunbookState, StageState

    base = recorded_runbook(8, statuses={"image": "skipped"})
    promote = promote or ("todo" if decision == "PROMOTE-ABLE" else "skipped")
    needs = ("≥ 3 rounds (6 pairs): `seat-console compare --rounds 3` (≈ 14 min on this node)"
             if decision == "INCONCLUSIVE" else base.stage("decide").needs)
    ev = {"decision": decision, "bracket": "20261129T1150Z-abba",
          "report sha256": "9f" * 32, "runs": "r1, r2, r3, r4"}
    stages = []
    for s in base.stages:
        if s.name == "decide":
            s = dataclasses.replace(s, evidence=ev, needs=needs,
                                    details=DECISION_ANSWERS[decision])
        elif s.name == "restore":
            s = dataclasses.replace(s, status=restore)
        elif s.name == "promote":
            s = dataclasses.replace(s, status=promote,
                                    at=T0 + timedelta(minutes=20) if promote == "done" else None,
                                    operator="ops@seat-node" if promote == "done" else None)
        stages.append(s)
    order = list(STAGES)
    if decision == "PROMOTE-ABLE":
        order.remove("promote")
        order.insert(order.index("restore"), "promote")
    by = {s.name: s for s in stages}
    nxt = next((by[n] for n in order if by[n].status not in ("done", "skipped")), None)
    return RunbookState(tuple(stages), nxt, holder, base.read_at)


RECORDED_PROFILE_SHA256 = "5eed" + "0" * 60
"""Stands in for the profile hash in snapshots, so editing a comment in the embedded default
does not redraw every snapshot; the header's hash display itself is asserted in test_app."""


def default_loaded() -> LoadedProfile:
    """The embedded default profile (never a file from the environment), its hash pinned to
    :data:`RECORDED_PROFILE_SHA256`."""
    return dataclasses.replace(load_profile(None, environ={}), sha256=RECORDED_PROFILE_SHA256)


def demo_app(*, clock: FakeClock | None = None, history: bool = True,
             interval: float = 3600.0, readonly: bool = False,
             double: NvmlDouble | None = None) -> tuple[SeatConsoleApp, ClockedGpuSource]:
    """The screenshot seat: the real GPU source over the double, recorded /proc, fixed clock.

    ``history``: the source plays :func:`loading_script` with 10 s between reads (press ``r``
    to take each reading). ``interval`` is long so no timer can fire during a test.
    """
    clock = clock or FakeClock()
    double = double or NvmlDouble(demo_cards())
    loaded = default_loaded()
    final = double.cards[0].used
    src = ClockedGpuSource(double, clock, list(loaded.profile.node.gpus), vllm_mapper(),
                           script=loading_script(final) if history else (),
                           step_s=10.0 if history else 0.0)
    app = SeatConsoleApp(loaded, readonly=readonly, interval=interval,
                         panels=[(lambda _l: src, GpuPanel)], clock=clock,
                         watch_terminal=False, runbook_reader=lambda _app: recorded_runbook())
    return app, src


# ---------------------------------------------------------------------------- test sources
class Reading(Frozen):
    """A trivial reading: ``n`` counts reads."""

    n: int


class CountingSource(Source):
    """Returns ``Reading(n)`` with n = 1, 2, …; ``reads`` counts calls."""

    def __init__(self, name: str = "counter") -> None:
        self.name = name
        self.reads = 0
        self.closed = False

    def read(self) -> BaseModel:
        self.reads += 1
        return Reading(n=self.reads)

    def close(self) -> None:
        self.closed = True


class HangingSource(Source):
    """``read`` blocks until ``release`` is set; ``entered`` is set once a read started."""

    def __init__(self, name: str = "hanging") -> None:
        self.name = name
        self.entered = threading.Event()
        self.release = threading.Event()

    def read(self) -> BaseModel:
        self.entered.set()
        self.release.wait()
        return Reading(n=-1)


class RaisingSource(Source):
    """``read`` raises (a buggy source); ``reads`` counts calls."""

    def __init__(self, name: str = "raising") -> None:
        self.name = name
        self.reads = 0

    def read(self) -> BaseModel:
        self.reads += 1
        raise RuntimeError(f"disk on fire #{self.reads}")


class DownSource(Source):
    """Good readings until ``down`` is set, then ``Unavailable(kind="unreachable")``."""

    def __init__(self, name: str = "down") -> None:
        self.name = name
        self.down = False
        self.reads = 0

    def read(self) -> BaseModel:
        self.reads += 1
        if self.down:
            return Unavailable(source=self.name, kind="unreachable",
                               reason="connection refused (127.0.0.1:9)")
        return Reading(n=self.reads)


class CountingPanel(SourcePanel):
    """A panel with the base class's default body (key: value lines)."""

    source_name = "counter"
    title = "Counter"


def fixed(source: Source) -> Callable[[LoadedProfile], Source]:
    """A ``make_source`` factory that returns ``source``."""
    return lambda _loaded: source
