"""Service panels (timers, silences, containers, engine): what they draw from readings (unit,
Pilot), and in the app against the lab, each panel's behaviour when its component is stopped —
the reason and the last good value's age in its own panel while the others stay live."""

from __future__ import annotations

import asyncio
import re
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from textual.app import App, ComposeResult

from seat_console.sources import containers
from seat_console.sources import engine
from seat_console.sources import silences
from seat_console.sources import timers
from seat_console.tui.app import SeatConsoleApp
from seat_console.sources.containers import ContainersReading, ContainerState
from seat_console.node.docker import ContainerEvent, EventStreamStatus
from seat_console.sources.engine import EngineReading, ModelInfo, parse_metrics
from seat_console.core.profile import load_profile
from seat_console.sources.silences import SilencesReading
from seat_console.node.alertmanager import Silence, SilenceMatcher
from seat_console.core.base import Unavailable
from seat_console.sources.timers import PERSISTENT_WARNING, ServiceState, TimersReading, TimerState
from seat_console.widgets.panel import SourcePanel
from seat_console.widgets.services import ContainersPanel, EnginePanel, SilencesPanel, TimersPanel

NOW = datetime(2026, 11, 29, 13, 0, 0, tzinfo=UTC)
RECORDED = (Path(__file__).parent / "data" / "engine" / "vllm-0.32.0-cpu.metrics.txt").read_text()


def screen_text(app: App) -> str:
    """What the terminal shows, as plain text with borders and whitespace runs collapsed."""
    raw = "\n".join(strip.text for strip in app.screen._compositor.render_strips())
    return re.sub(r"\s+", " ", re.sub(r"[│╭╮╰╯─]", " ", raw))


class OnePanel(App):
    def __init__(self, panel: SourcePanel) -> None:
        super().__init__()
        self.panel = panel

    def compose(self) -> ComposeResult:
        yield self.panel


# -- recorded / constructed readings --------------------------------------------------------
def engine_reading(text: str = RECORDED) -> EngineReading:
    return EngineReading(endpoint="http://127.0.0.1:18000", read_at=NOW, healthy=True,
                         health_status=200, version="0.32.0",
                         models=(ModelInfo(id="seat-resident", max_model_len=512),),
                         metrics=parse_metrics(text))


def timers_reading() -> TimersReading:
    return TimersReading(where="docker-exec node", read_at=NOW, timers=(
        TimerState(unit="smoke.timer", load_state="loaded", active_state="active",
                   sub_state="running", persistent=False,
                   last_trigger=NOW - timedelta(seconds=5),
                   service=ServiceState(unit="smoke.service", active_state="activating",
                                        sub_state="start", running=True)),
        TimerState(unit="full.timer", load_state="loaded", active_state="inactive",
                   sub_state="dead", persistent=True, persistent_warning=PERSISTENT_WARNING,
                   service=ServiceState(unit="full.service", active_state="inactive",
                                        sub_state="dead", running=False)),
        TimerState(unit="gone.timer", load_state="not-found", active_state="inactive"),
    ))


def silences_reading() -> SilencesReading:
    seat = (SilenceMatcher(name="instance", value="seat:8000", is_regex=False, is_equal=True),)
    neg = SilenceMatcher(name="alertname", value="Watchdog", is_regex=False, is_equal=False)
    return SilencesReading(
        url="http://127.0.0.1:19093", version="0.25.0", read_at=NOW, seat_matchers=seat,
        total=5, tls_verify=False, silences=(
            Silence(id="0123456789abcdef", state="active", matchers=(*seat, neg),
                    starts_at=NOW - timedelta(minutes=5), ends_at=NOW + timedelta(minutes=90),
                    created_by="seat-console", comment="hold"),
        ))


def containers_reading() -> ContainersReading:
    return ContainersReading(
        engine="unix:///lab/docker.sock", engine_version="20.10.24", api_version="1.41",
        read_at=NOW,
        containers=(
            ContainerState(role="resident", name="seat-resident", state="running", running=True,
                           started_at=NOW - timedelta(minutes=3), restart_count=0,
                           image_id="sha256:a04e5f50632b47b4b563e705b5a5df581bd2fd829f59",
                           repo_digest="127.0.0.1:15000/engine@sha256:58a86611e91eeb76b6df"),
            ContainerState(role="probe", name="seat-probe", state="absent"),
        ),
        events=EventStreamStatus(connected=True, since=NOW, reconnects=0, last_error=None,
                                 events_seen=1),
        recent_changes=(ContainerEvent(at=NOW - timedelta(seconds=30), time_nano=1,
                                       type="container", action="stop", actor_id="abc",
                                       actor_name="seat-resident"),))


async def _show(panel: SourcePanel, reading, last_good=None, last_good_at=None,
                now: datetime = NOW) -> str:
    app = OnePanel(panel)
    async with app.run_test(size=(160, 40)) as pilot:
        panel.show(reading, last_good if last_good is not None else reading,
                   last_good_at or NOW, now=now)
        await pilot.pause()
        assert panel.render_error is None, panel.render_error
        return screen_text(app)


async def test_engine_panel_values_and_missing_metric() -> None:
    text = await _show(EnginePanel(), engine_reading())
    assert "healthy" in text and "vLLM 0.32.0" in text
    assert "seat-resident (max_model_len 512)" in text
    assert "KV cache 0.0 %" in text and "generation tokens 13" in text
    assert "metric missing" not in text
    no_kv = "\n".join(line for line in RECORDED.splitlines() if "kv_cache_usage" not in line)
    text2 = await _show(EnginePanel(), engine_reading(no_kv))
    assert "KV cache metric missing" in text2
    assert "generation tokens 13" in text2


async def test_timers_panel() -> None:
    text = await _show(TimersPanel(), timers_reading())
    assert re.search(r"smoke\.timer .*RUNNING", text)   # its own .service: state only
    assert "full.timer [P]" in text and "inactive/dead" in text
    assert "fire a missed run at once" in text
    assert "gone.timer not-found" in text
    assert "5 s ago" in text


async def test_silences_panel() -> None:
    text = await _show(SilencesPanel(), silences_reading())
    assert "1 active" in text and "5 in Alertmanager" in text
    # the panel's and the detail's words agree (the trial: "no silence on the seat" above
    # "18 concern the seat", all 18 expired)
    assert "of them expired" in text and "concern the seat" not in text
    assert "ends in 1 h 30 min" in text
    assert 'alertname!="Watchdog"' in text
    assert "TLS NOT VERIFIED" in text


async def test_silences_panel_warns_when_the_matchers_miss_the_seat() -> None:
    """The tester's case: instance matcher on :18001 while the seat is on :18000."""
    warn = ('the hold\'s silence would not cover the seat: matcher instance="127.0.0.1:18001" '
            "vs the seat's 127.0.0.1:18000 (seat.endpoint)")
    r = silences_reading().model_copy(update={"coverage": (warn,)})
    text = await _show(SilencesPanel(), r)          # compact at 40 rows: one line, Enter
    assert "WARNING: the hold's silence would not cover the seat" in text
    full = SilencesPanel()
    full.detail = True
    text = await _show(full, r)
    assert 'matcher instance="127.0.0.1:18001" vs the seat\'s 127.0.0.1:18000' in text
    assert "fix [[silence.matchers]] in the profile" in text
    assert "WARNING" not in await _show(SilencesPanel(), silences_reading())


async def test_containers_panel() -> None:
    text = await _show(ContainersPanel(), containers_reading())
    assert "seat-resident running" in text and "3 min ago" in text   # coarse (main screen)
    assert "sha256:a04e5f50632b…" in text
    assert "127.0.0.1:15000/engine@sha256:58a86611e91e…" in text
    assert "seat-probe absent" in text
    assert "not by the console" in text


async def test_unavailable_shows_reason_age_and_last_good() -> None:
    good = engine_reading()
    down = Unavailable(source="engine", kind="unreachable", reason="engine at X not answering",
                       at=NOW + timedelta(seconds=42))
    panel = EnginePanel()
    text = await _show(panel, down, last_good=good, last_good_at=NOW,
                       now=NOW + timedelta(seconds=42))
    assert "engine unavailable (unreachable): engine at X not answering" in text
    assert "last good value 40 s ago" in text  # coarse: tens of seconds
    assert "seat's endpoint does not answer" in text   # the panel's hint
    assert "generation tokens 13" in text              # last good value still shown (dimmed)
    assert panel.has_class("-unavailable")


async def test_panel_given_wrong_reading_reports_instead_of_raising() -> None:
    panel = TimersPanel()
    app = OnePanel(panel)
    async with app.run_test(size=(120, 20)) as pilot:
        panel.show(engine_reading(), engine_reading(), NOW, now=NOW)
        await pilot.pause()
        assert panel.render_error is not None and "TypeError" in panel.render_error


# -- in the app, against the lab ------------------------------------------------------------
SERVICE_PANELS = [
    (timers.make_source, TimersPanel),
    (silences.make_source, SilencesPanel),
    (containers.make_source, ContainersPanel),
    (engine.make_source, EnginePanel),
]


async def _until(pilot, pred, what: str, timeout: float = 90.0):
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while loop.time() < deadline:
        v = pred()
        if v:
            return v
        await pilot.pause(0.1)
    raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")


def _panels(app: SeatConsoleApp) -> dict[str, SourcePanel]:
    return {p.source_name: p for p in app.query(SourcePanel)}


# component → (panels that must go unavailable, their kind, text in the reason)
OUTAGES = {
    "alertmanager": ({"silences": ("unreachable", "cannot reach")}),
    "node": ({"timers": ("unreachable", "is not running")}),
    "dockerd": ({"containers": ("unreachable", "not reachable"),
                 "timers": ("unreachable", "cannot connect to the docker engine")}),
    "vllm": ({"engine": ("unreachable", "not answering")}),
}


@pytest.mark.parametrize("component", list(OUTAGES))
async def test_lab_component_down_shows_in_its_own_panel(lab, lab_stop, component: str) -> None:
    loaded = load_profile(lab.profile_path)
    app = SeatConsoleApp(loaded, interval=0.5, panels=SERVICE_PANELS, watch_terminal=False)
    expect_down = OUTAGES[component]
    async with app.run_test(size=(160, 70)) as pilot:
        panels = _panels(app)
        await _until(pilot, lambda: all(p.last_good is not None and p.unavailable is None
                                        for p in panels.values()), "all four panels live")
        cm = lab_stop(component)
        await asyncio.to_thread(cm.__enter__)
        try:
            t_down = datetime.now(UTC)
            for name, (kind, words) in expect_down.items():
                p = panels[name]
                await _until(pilot, lambda p=p: p.unavailable is not None,
                             f"{name} panel unavailable while {component} is down")
                assert p.unavailable.kind == kind, p.unavailable
                assert words in p.unavailable.reason, p.unavailable.reason
            await pilot.pause(0.2)
            text = screen_text(app)
            for name in expect_down:
                assert f"{panels[name].unavailable.source} unavailable" in text
            assert "last good value" in text
            # the other panels keep taking fresh good readings
            others = [n for n in panels if n not in expect_down]
            for name in others:
                p = panels[name]
                await _until(pilot, lambda p=p: p.unavailable is None and p.last_good_at
                             and p.last_good_at > t_down, f"{name} still live")
            if component == "vllm":
                # the stop is visible to the containers panel as a foreign change
                c = panels["containers"]
                await _until(pilot, lambda: any(
                    e.actor_name == lab.resident_container and e.action == "stop"
                    and not e.by_console for e in c.last_good.recent_changes),
                    "the resident's stop among the recent changes")
                assert not c.last_good.get(lab.resident_container).running
        finally:
            await asyncio.to_thread(cm.__exit__, None, None, None)
        for name in expect_down:
            p = panels[name]
            await _until(pilot, lambda p=p: p.unavailable is None, f"{name} back", 120)
