"""Interference stamped with the time the node gives (issue 31): a unit's own start time, the
docker event's time, the engine's process start — not the moment a check noticed it — and a
timer the hold stopped, started by hand inside a probe's window, disrupts the run from that
instant, every request in flight then or sent later counted as disturbed."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

from seat_console.node.docker import ContainerEvent, EventStreamStatus
from seat_console.node.runner import CommandResult
from seat_console.probe.interference import (
    InterferenceMonitor,
    container_events,
    service_events,
    timer_events,
)
from seat_console.probe.run import Probe, disturbed_from
from seat_console.probe.store import RunWriter
from seat_console.core.probe_record import RequestRecord
from sse_server import SSEServer
from test_probe_run import PHASES, _loaded, _pre

T = datetime(2026, 12, 5, 3, 20, 1, tzinfo=UTC)


def _at(t: datetime) -> str:
    return f"@{t.timestamp():.6f}"


class Node:
    """The node seam: ``systemctl show`` of the watched units, their state set by the test."""

    where, _node_path = "fake", "/usr/bin"

    def __init__(self) -> None:
        self.units: dict[str, dict[str, str]] = {}
        self.calls = 0

    def run(self, argv, timeout_s=10.0):  # noqa: ANN001, ANN201 - transport protocol
        self.calls += 1
        assert argv[:3] == ["systemctl", "show", "--timestamp=unix"], argv
        units = argv[argv.index("--") + 1:]
        out = "\n\n".join("\n".join(f"{k}={v}" for k, v in {"Id": u, **self.units.get(
            u, {"ActiveState": "inactive", "SubState": "dead"})}.items()) for u in units)
        return CommandResult(argv=list(argv), rc=0, stdout=out + "\n", stderr="",
                             duration_s=0.01, where="fake", started_at=T, ok=True)

    def close(self) -> None:
        pass


def test_timer_started_during_the_run_is_a_breach_at_its_own_time() -> None:
    before = {"x.timer": {"ActiveState": "inactive"}, "y.timer": {"ActiveState": "active"}}
    now = {"x.timer": {"ActiveState": "active", "ActiveEnterTimestamp": _at(T)},
           "y.timer": {"ActiveState": "active", "ActiveEnterTimestamp": _at(T)}}
    ev = timer_events(before, now)
    assert len(ev) == 1 and ev[0][1] == T and "x.timer was started at" in ev[0][0]
    # unknown state at the start is not judged a start
    assert timer_events({"x.timer": {}}, now) == []
    assert timer_events({}, now) == []


def test_service_and_container_events_carry_the_nodes_time() -> None:
    before = {"r.service": {"InvocationID": "a"}}
    now = {"r.service": {"InvocationID": "b", "ActiveState": "active", "SubState": "running",
                         "ExecMainStartTimestamp": _at(T),
                         "ActiveEnterTimestamp": _at(T + timedelta(seconds=1))}}
    [(_, at)] = service_events(before, now)
    assert at == T
    no_time = {"r.service": {"InvocationID": "b", "ActiveState": "active", "SubState": "running"}}
    assert service_events(before, no_time)[0][1] is None     # unknown, never "now"
    e = ContainerEvent(type="container", action="restart", actor_id="abc",
                       actor_name="seat-resident", at=T, time_nano=int(T.timestamp() * 1e9),
                       by_console=False)
    [(sentence, at)] = container_events([e], {"seat-resident"})
    assert at == T and "restart" in sentence


def _rec(sent: datetime, dur: float | None) -> RequestRecord:
    return RequestRecord(phase="p", index=0, api="completions", prompt_id=0, sent_at=sent,
                         start_s=0.0, ok=True, stream_end_s=dur)


def test_requests_in_flight_at_the_instant_or_later_are_disturbed() -> None:
    recs = [_rec(T - timedelta(seconds=5), 1.0),      # ended 4 s before: undisturbed
            _rec(T - timedelta(seconds=1), 2.0),      # in flight at T
            _rec(T + timedelta(seconds=1), 0.5),      # sent after
            _rec(T - timedelta(seconds=9), None)]     # no end recorded: counted
    d = disturbed_from(recs, T, "node")
    assert (d["requests"], d["of"], d["from_source"]) == (3, 4, "node")


class Watcher:
    def status(self) -> EventStreamStatus:
        return EventStreamStatus(connected=True, since=datetime.now(UTC), reconnects=0,
                                 last_error=None, events_seen=0)

    def foreign_changes(self, since: datetime | None = None) -> tuple:
        return ()


async def test_timer_started_by_hand_mid_probe_disrupts_the_run_at_the_units_time(
        tmp_path: Path) -> None:
    node = Node()
    started = datetime.now(UTC)

    def factory(scrape):
        mon = InterferenceMonitor(watcher=Watcher(), container_names={"seat-resident"},
                                  transport=node, services=(), timers=["fleet.timer"],
                                  silence_state=None, scrape=scrape, interval_s=0.05)
        orig = mon.check_once

        async def check_once() -> None:
            # once a measured phase has a request (on a loaded machine the warm-up alone can
            # outlast the first checks, and a run disrupted then measures no phase at all):
            # someone ran `systemctl start fleet.timer` at `started`
            if node.calls >= 1 and any(probe.records.values()):
                node.units["fleet.timer"] = {"ActiveState": "active", "SubState": "waiting",
                                             "ActiveEnterTimestamp": _at(started)}
            await orig()
        mon.check_once = check_once  # type: ignore[method-assign]
        return mon

    async with SSEServer() as srv:
        loaded = _loaded(tmp_path, srv.url, ["normal", "multi"], PHASES)
        probe = Probe(loaded, _pre(srv.url), writer=RunWriter(root=tmp_path / "runs"),
                      monitor_factory=factory)
        s = await probe.run()
    assert s["status"] == "disrupted" and not s["headline_allowed"], s["status"]
    [d] = [d for d in s["disruptions"] if d["kind"] == "timer"]
    assert datetime.fromisoformat(d["at"]) == started.replace(microsecond=started.microsecond)
    assert d["at_source"] == "node"
    assert datetime.fromisoformat(d["detected_at"]) >= datetime.fromisoformat(d["at"])
    ran = [b for b in s["phases"] if b.get("stats")]
    assert ran and all(b["disturbed"]["from_source"] == "node" for b in ran)


async def test_the_same_disruption_is_recorded_once_not_at_every_check() -> None:
    node = Node()
    mon = InterferenceMonitor(watcher=None, container_names=set(), transport=node,
                              services=(), timers=["fleet.timer"], silence_state=None,
                              scrape=None, interval_s=0.05)
    await mon.baseline()
    node.units["fleet.timer"] = {"ActiveState": "active", "ActiveEnterTimestamp": _at(T)}
    for _ in range(3):
        await mon.check_once()
    assert [d.kind for d in mon.disruptions] == ["timer"]
    assert mon.disruptions[0].at == T
