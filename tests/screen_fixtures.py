"""The whole seat on one screen, from recorded inputs: every panel of the app with a fixed
reading (GPU: the real source over the NVML double; timers, silences, containers, engine:
constructed readings; fit: the default profile's inputs over the double's cards), for the
80×24 first-screen tests, the snapshots and the README screenshot.

:func:`seat_app` returns the app and its sources by key; a test can swap a source's reading
(``sources["engine"].reading = Unavailable(...)``) and press ``r``.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path

from pydantic import BaseModel
from textual.widgets import Input

sys.path.insert(0, str(Path(__file__).parent))
from app_fixtures import (T0, ClockedGpuSource, FakeClock, default_loaded, demo_cards,
                          recorded_runbook, vllm_mapper)
from nvml_double import NvmlDouble

from seat_console.tui.app import SeatConsoleApp
from seat_console.actions.actionlog import ActionLogReading, HoldInfo
from seat_console.tui.panels import PANELS, PanelSpec
from seat_console.widgets.actionlog import ActionLogPanel
from seat_console.fit.budget import HostMemory
from seat_console.core.profile import MAX_MODEL_LEN, MAX_NUM_SEQS
from seat_console.core.base import Source
from seat_console.sources.containers import ContainersReading, ContainerState
from seat_console.node.docker import EventStreamStatus
from seat_console.sources.engine import EngineReading, ModelInfo, parse_metrics
from seat_console.snapshot.fit_reading import gather_fit_inputs
from seat_console.sources.gpu import GpuSampler
from seat_console.node.nvml import Nvml
from seat_console.sources.silences import SilencesReading
from seat_console.node.alertmanager import Silence, SilenceMatcher
from seat_console.sources.timers import ServiceState, TimersReading, TimerState
from seat_console.widgets.fit import FitPanel
from seat_console.widgets.gpu import GpuPanel
from seat_console.widgets.services import ContainersPanel, EnginePanel, SilencesPanel, TimersPanel

GiB = 1 << 30
NOW = T0
RECORDED_METRICS = (Path(__file__).parent / "data" / "engine"
                    / "vllm-0.32.0-cpu.metrics.txt").read_text()


class Fixed(Source):
    """Returns ``reading`` (settable); ``reads`` counts calls."""

    def __init__(self, name: str, reading: BaseModel) -> None:
        self.name = name
        self.reading = reading
        self.reads = 0

    def read(self) -> BaseModel:
        self.reads += 1
        return self.reading


def timers() -> TimersReading:
    """Two fleet timers, both armed."""
    return TimersReading(where="docker-exec seat-node", read_at=NOW, timers=(
        TimerState(unit="fleet-remediation-cycle.timer", load_state="loaded",
                   active_state="active", sub_state="waiting", persistent=False,
                   next_elapse=NOW + timedelta(minutes=6, seconds=31),
                   last_trigger=NOW - timedelta(minutes=8),
                   service=ServiceState(unit="fleet-remediation-cycle.service",
                                        active_state="inactive", sub_state="dead",
                                        running=False)),
        TimerState(unit="seat-conformance-smoke.timer", load_state="loaded",
                   active_state="active", sub_state="waiting", persistent=False,
                   next_elapse=NOW + timedelta(minutes=21),
                   last_trigger=NOW - timedelta(minutes=39),
                   service=ServiceState(unit="seat-conformance-smoke.service",
                                        active_state="inactive", sub_state="dead",
                                        running=False)),
    ))


def silences(active: bool = False) -> SilencesReading:
    """The seat's silences: none, or one active for 2 h 10 min more."""
    seat = (SilenceMatcher(name="instance", value="seat-node:8000", is_regex=False,
                           is_equal=True),)
    rows = ()
    if active:
        rows = (Silence(id="5d2c9a1e0b7f4c3a", state="active", matchers=seat,
                        starts_at=NOW - timedelta(minutes=20),
                        ends_at=NOW + timedelta(hours=2, minutes=10),
                        created_by="seat-console", comment="hold"),)
    return SilencesReading(url="http://127.0.0.1:9093", version="0.25.0", read_at=NOW,
                           seat_matchers=seat, total=3, tls_verify=True, silences=rows)


def containers(running: bool = True) -> ContainersReading:
    """The resident container (running, or exited 3 min ago) and no probe."""
    resident = ContainerState(
        role="resident", name="seat-resident", state="running" if running else "exited",
        running=running, exit_code=None if running else 137,
        started_at=NOW - timedelta(hours=5), finished_at=None if running
        else NOW - timedelta(minutes=3), restart_count=0,
        image_id="sha256:a04e5f50632b47b4b563e705b5a5df581bd2fd829f59",
        repo_digest="127.0.0.1:5000/engine@sha256:58a86611e91eeb76b6df")
    return ContainersReading(
        engine="unix:///run/docker.sock", engine_version="20.10.24", api_version="1.41",
        read_at=NOW, containers=(resident, ContainerState(role="probe", name="seat-probe",
                                                          state="absent")),
        events=EventStreamStatus(connected=True, since=NOW, reconnects=0, last_error=None,
                                 events_seen=0), recent_changes=())


def engine(healthy: bool = True) -> EngineReading:
    """The resident engine, healthy, with the recorded vLLM 0.32.0 metrics."""
    return EngineReading(endpoint="http://127.0.0.1:8000", read_at=NOW, healthy=healthy,
                         health_status=200 if healthy else 503, version="0.32.0",
                         models=(ModelInfo(id="seat-resident", max_model_len=262144),),
                         metrics=parse_metrics(RECORDED_METRICS))


def fit_inputs():
    """The default profile's fit inputs over the double's two H200s (host RAM fixed)."""
    loaded = default_loaded()
    snap = GpuSampler(Nvml(NvmlDouble(demo_cards())), list(loaded.profile.node.gpus),
                      vllm_mapper()).sample()
    return gather_fit_inputs(loaded, snap, host=HostMemory(total_bytes=2048 * GiB,
                                                           available_bytes=1536 * GiB))


def actions(hold_minutes: float | None = 25.0) -> ActionLogReading:
    """The action log: a 30 min hold placed 5 min before :data:`NOW` (``None``: no hold)."""
    hold = None if hold_minutes is None else HoldInfo(
        hold_id="seat-hold-20261129t115500z-1a2b", state="active",
        expires_at=NOW + timedelta(minutes=hold_minutes),
        lease_unit="seat-hold-20261129t115500z-1a2b-lease.timer", silence_id="5d2c9a1e",
        stopped=("fleet-remediation-cycle.timer", "seat-conformance-smoke.timer"),
        placed_by="ops@seat-node", reason="candidate probe", banner="held by the console",
        ttl_s=1800.0)
    return ActionLogReading(path="/var/lib/seat-console/journal.sqlite3", read_at=NOW,
                            hold=hold)


def seat_app(*, clock: FakeClock | None = None, interval: float = 3600.0,
             silence_active: bool = False, compact: bool | None = None,
             with_actions: bool = False, runbook=None,
             ) -> tuple[SeatConsoleApp, dict[str, Source]]:
    """Every panel of the app in its production order over recorded inputs. ``with_actions``:
    the action-log panel too (:func:`actions`), every panel in :data:`PANELS`' order;
    ``runbook``: the runbook state the app reads (default :func:`recorded_runbook`'s)."""
    clock = clock or FakeClock()
    loaded = default_loaded()
    gpu = ClockedGpuSource(NvmlDouble(demo_cards()), clock, list(loaded.profile.node.gpus),
                           vllm_mapper())
    srcs: dict[str, Source] = {
        "gpus": gpu,
        "timers": Fixed("timers", timers()),
        "silences": Fixed("silences", silences(silence_active)),
        "fit": Fixed("fit", fit_inputs()),
        "engine": Fixed("engine", engine()),
        "containers": Fixed("containers", containers()),
    }
    panels = {"gpus": GpuPanel, "timers": TimersPanel, "silences": SilencesPanel,
              "fit": FitPanel, "engine": EnginePanel, "containers": ContainersPanel}
    order = list(srcs)
    if with_actions:
        srcs["actions"] = Fixed("actions", actions())
        panels["actions"] = ActionLogPanel
        order = [p.panel.source_name for p in PANELS if p.panel.source_name in srcs]
    spans = {p.panel.source_name: p.span for p in PANELS}   # as the production table lays out
    specs = [PanelSpec((lambda s: (lambda _l: s))(srcs[k]), panels[k],
                       span=spans.get(k) if with_actions else None) for k in order]
    app = SeatConsoleApp(loaded, interval=interval, panels=specs, clock=clock,
                         watch_terminal=False, age_tick_s=3600.0, compact=compact,
                         runbook_reader=lambda _app: runbook or recorded_runbook())
    return app, srcs


__all__ = ["Fixed", "containers", "engine", "fit_inputs", "seat_app", "silences", "timers"]


# -- Pilot helpers shared by the screen tests ---------------------------------------------------

def lines_of(app: SeatConsoleApp) -> list[str]:
    """The terminal's lines as plain text (what the compositor would draw now)."""
    return [strip.text for strip in app.screen._compositor.render_strips()]


def screen_text(app: SeatConsoleApp) -> str:
    """What the terminal shows now, as plain text (one line per row)."""
    return "\n".join(lines_of(app))


def flat(text: str) -> str:
    """Text with box borders and runs of whitespace collapsed (wrapped lines join up)."""
    return re.sub(r"\s+", " ", re.sub(r"[│╭╮╰╯─┃┏┓┗┛━]", " ", text))  # heavy: the focused panel


async def wait_for(pilot, predicate, what: str, limit: int = 2000) -> None:
    """Pause the pilot in 10 ms steps until ``predicate()`` holds; AssertionError naming
    ``what`` after ``limit`` steps."""
    for _ in range(limit):
        if predicate():
            return
        await pilot.pause(0.01)
    raise AssertionError(f"timed out waiting for: {what}")


async def refresh(pilot, app: SeatConsoleApp, key: str, limit: int = 2000) -> None:
    """Press ``r`` and wait (:func:`wait_for`, ``limit`` steps) until source ``key`` was polled
    once more, then let the screen settle."""
    st = app.states[key]
    before = st.polls
    await pilot.press("r")
    await wait_for(pilot, lambda: st.polls > before, f"a new reading of {key}", limit)
    await pilot.pause()


async def refresh_all(pilot, app: SeatConsoleApp) -> None:
    """Press ``r`` and wait until every source was polled once more; let the screen settle."""
    before = {k: st.polls for k, st in app.states.items()}
    await pilot.press("r")
    await wait_for(pilot, lambda: all(st.polls > before[k] for k, st in app.states.items()),
                   "a new reading of every source")
    await pilot.pause()


LONGEST_WHAT_IF = {"fit-util": "0.9515", "fit-tp": "64", "fit-context": str(MAX_MODEL_LEN),
                   "fit-seqs": str(MAX_NUM_SEQS)}
"""Each fit what-if field's longest valid value (by its input's id)."""


async def type_longest_what_ifs(pilot, panel: FitPanel, row_of: Callable[[str], str]) -> None:
    """Put each of :data:`LONGEST_WHAT_IF` in its field, focused, cursor at its end; assert the
    field is wide enough for the value and the cursor, ends inside ``#fit-controls``, and that
    ``row_of(value)`` (the screen row it is on) shows the value whole."""
    controls = panel.query_one("#fit-controls")
    for wid, value in LONGEST_WHAT_IF.items():
        field = panel.query_one(f"#{wid}", Input)
        field.value = value
        field.focus()
        field.cursor_position = len(value)
        await wait_for(pilot, lambda f=field: f.has_focus and f.region.width > 0,
                       f"{wid} focused")
        await pilot.pause()
        assert field.region.width >= len(value) + 1, wid          # value + the cursor
        assert field.region.right <= controls.region.right, wid   # not cut
        row = row_of(value)
        assert f" {value} " in row + " ", (wid, row)


async def all_read(pilot, app: SeatConsoleApp) -> None:
    """Wait until every source of ``app`` was polled once, then let the screen settle."""
    await wait_for(pilot, lambda: all(st.polls for st in app.states.values()), "every source")
    await pilot.pause()
