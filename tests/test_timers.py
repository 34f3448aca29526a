"""Timers: machine-format parsing (recorded from the lab's systemd 252) and, against the lab's
real systemd node, state before/after a stop/start and the Persistent= catch-up the warning
describes."""

from __future__ import annotations

import subprocess
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from conftest import wait_until

from seat_console.core.base import Unavailable, utcnow
from seat_console.sources.timers import (
    PERSISTENT_WARNING,
    TimerSource,
    TimersReading,
    build_timer_state,
    check_unit_name,
    parse_list_timers_json,
    parse_schedule,
    parse_show_blocks,
    parse_timestamp,
    read_timers,
    service_running,
)
from seat_console.actions.node_ops import TimerActionError, start_timer, stop_timer
from seat_console.node.transport import DockerExecTransport

DATA = Path(__file__).parent / "data" / "timers"


# -- parsing (recorded output of systemd 252 in the lab node) -------------------------------
def test_show_blocks_recorded() -> None:
    blocks = parse_show_blocks((DATA / "systemd-252-show.txt").read_text())
    assert [b["Id"] for b in blocks] == ["seat-conformance-smoke.timer",
                                         "seat-conformance-full.timer",
                                         "fleet-remediation-cycle.timer", "nosuch.timer"]
    smoke, full, _, nosuch = blocks
    # a repeated key keeps both values
    assert parse_schedule(smoke.get("TimersCalendar"), smoke["TimersMonotonic"]) == (
        "OnUnitActiveUSec=2min", "OnBootUSec=1min")
    assert parse_schedule(full["TimersCalendar"]) == ("OnCalendar=*-*-* *:00/15:00",)
    # systemd 252 prints these as locale text even with --timestamp=unix: never parsed
    assert full["NextElapseUSecRealtime"] == "Sun 2026-11-29 13:15:00 UTC"
    with pytest.raises(ValueError, match="not a machine-format"):
        parse_timestamp(full["NextElapseUSecRealtime"])
    assert nosuch["LoadState"] == "not-found"


def test_list_timers_json_recorded() -> None:
    times = parse_list_timers_json((DATA / "systemd-252-list-timers.json").read_text())
    nxt, last = times["seat-conformance-smoke.timer"]
    assert nxt == datetime.fromtimestamp(1795957975.392973, UTC)
    assert last == datetime.fromtimestamp(1795957855.389182, UTC)
    # "last": 0 means never triggered: n/a, not the epoch
    assert times["seat-conformance-full.timer"] == (
        datetime(2026, 11, 29, 13, 15, tzinfo=UTC), None)


@pytest.mark.parametrize("raw,expected", [
    ("@1795958100", datetime(2026, 11, 29, 13, 15, tzinfo=UTC)),
    ("1795958100000000", datetime(2026, 11, 29, 13, 15, tzinfo=UTC)),
    ("", None), ("n/a", None), ("0", None), ("@0", None), ("infinity", None),
    (str(2**64 - 1), None), (None, None),
])
def test_parse_timestamp(raw: str | None, expected: datetime | None) -> None:
    assert parse_timestamp(raw) == expected


@pytest.mark.parametrize("active,sub,running", [
    ("activating", "start", True),      # Type=oneshot while its command runs
    ("active", "running", True),
    ("active", "exited", False),        # finished oneshot with RemainAfterExit=yes
    ("inactive", "dead", False),
    ("failed", "failed", False),
    ("deactivating", "stop-sigterm", True),
    (None, None, None),
])
def test_service_running(active: str | None, sub: str | None, running: bool | None) -> None:
    assert service_running(active, sub) is running


def test_persistent_warning_only_for_persistent() -> None:
    blocks = parse_show_blocks((DATA / "systemd-252-show.txt").read_text())
    states = {b["Id"]: build_timer_state(b["Id"], b, None) for b in blocks}
    assert states["seat-conformance-full.timer"].persistent is True
    assert states["seat-conformance-full.timer"].persistent_warning == PERSISTENT_WARNING
    assert "fire a missed run at once" in PERSISTENT_WARNING
    assert states["seat-conformance-smoke.timer"].persistent is False
    assert states["seat-conformance-smoke.timer"].persistent_warning is None
    assert not states["nosuch.timer"].loaded


@pytest.mark.parametrize("bad", ["-H.timer", "a b.timer", "x;y.timer", "noext", ""])
def test_unit_names_checked(bad: str) -> None:
    with pytest.raises(ValueError):
        check_unit_name(bad)


# -- the real systemd in the lab node ----------------------------------------------------------
@pytest.fixture
def node(lab) -> DockerExecTransport:
    return DockerExecTransport(lab.node_container, docker_host=lab.docker_host)


def test_lab_timers_read(lab, node) -> None:
    r = TimerSource(node, list(lab.timers)).read()
    assert isinstance(r, TimersReading), r
    assert [t.unit for t in r.timers] == list(lab.timers)
    assert r.notes == ()
    for t, svc in zip(r.timers, lab.services, strict=True):
        assert t.loaded and t.active, t
        assert t.service is not None and t.service.unit == svc
        assert t.service.running is not None
        assert t.persistent is (t.unit in lab.persistent_timers)
        assert (t.persistent_warning is not None) is (t.unit in lab.persistent_timers)
        assert t.schedule
        # armed: a next elapse, unless a monotonic timer's service is running right now
        assert t.next_elapse is not None or t.service.running
        if t.next_elapse is not None:
            assert t.next_elapse > r.read_at - timedelta(seconds=5)


def test_lab_timer_stop_start_verified(lab, node) -> None:
    unit = next(u for u in lab.timers if u not in lab.persistent_timers)
    before = read_timers(node, [unit])
    assert isinstance(before, TimersReading) and before.timers[0].active
    try:
        stopped = stop_timer(node, unit)
        assert stopped.changed and stopped.before.active_state == "active"
        assert stopped.after.active_state == "inactive"
        assert stopped.after.next_elapse is None          # not armed: n/a, never the epoch
        assert stopped.command.ok and stopped.command.remote_argv[-1] == unit
        # an independent read sees it too
        mid = read_timers(node, [unit])
        assert isinstance(mid, TimersReading) and mid.timers[0].active_state == "inactive"
        again = stop_timer(node, unit)
        assert not again.changed                          # nothing to restore later
    finally:
        started = start_timer(node, unit)
    assert started.changed and started.after.active
    assert started.after.next_elapse is not None


def test_lab_stop_unknown_unit_is_refused(node) -> None:
    with pytest.raises(TimerActionError, match="not loaded"):
        stop_timer(node, "seat-console-no-such.timer")


CATCHUP_UNIT = "seat-console-test-catchup"
PERIOD_S = 10


def _install(lab, node, tmp_path: Path, persistent: bool) -> None:
    timer = tmp_path / f"{CATCHUP_UNIT}.timer"
    timer.write_text(f"[Timer]\nOnCalendar=*:*:0/{PERIOD_S}\nAccuracySec=1ms\n"
                     f"Persistent={'true' if persistent else 'false'}\n")
    (tmp_path / f"{CATCHUP_UNIT}.service").write_text(
        "[Service]\nType=oneshot\nExecStart=/bin/true\n")
    for f in (timer, tmp_path / f"{CATCHUP_UNIT}.service"):
        subprocess.run(lab.docker_argv("cp", str(f), f"{lab.node_container}:/etc/systemd/system/"),
                       check=True, capture_output=True, timeout=60)
    assert node.run(["systemctl", "daemon-reload"]).ok


def _last(node) -> datetime | None:
    r = read_timers(node, [f"{CATCHUP_UNIT}.timer"])
    assert isinstance(r, TimersReading), r
    return r.timers[0].last_trigger


def _wait(pred, timeout: float, what: str):
    return wait_until(pred, timeout=timeout, interval=0.1, what=what)


def test_lab_persistent_timer_fires_missed_run_at_once(lab, node, tmp_path: Path) -> None:
    """What the warning says, shown on the real systemd: a Persistent=yes calendar timer that
    was stopped across a scheduled time runs its service as soon as it is started again —
    seconds before the next scheduled time."""
    unit = f"{CATCHUP_UNIT}.timer"
    _install(lab, node, tmp_path, persistent=True)
    try:
        assert start_timer(node, unit).after.persistent_warning == PERSISTENT_WARNING
        first = _wait(lambda: _last(node), PERIOD_S + 5, "the first scheduled trigger")
        stop_timer(node, unit)
        # stay stopped across the next scheduled time, then start well before the one after
        missed = datetime.fromtimestamp((first.timestamp() // PERIOD_S + 1) * PERIOD_S, UTC)

        def good_moment() -> bool:
            now = utcnow()
            into = now.timestamp() % PERIOD_S
            return now > missed + timedelta(seconds=1) and 1.0 <= into <= PERIOD_S - 4.0

        _wait(good_moment, 3 * PERIOD_S, "a start time between two scheduled times")
        t_start = utcnow()
        next_scheduled = datetime.fromtimestamp(
            (t_start.timestamp() // PERIOD_S + 1) * PERIOD_S, UTC)
        start_timer(node, unit)
        fired = _wait(lambda: (lt := _last(node)) is not None and lt > first and lt,
                      3.0, "the catch-up run right after start")
        assert t_start - timedelta(seconds=0.5) <= fired < next_scheduled
    finally:
        node.run(["systemctl", "stop", unit])
        node.run(["rm", "-f", f"/etc/systemd/system/{unit}",
                  f"/etc/systemd/system/{CATCHUP_UNIT}.service",
                  f"/var/lib/systemd/timers/stamp-{unit}"])
        node.run(["systemctl", "daemon-reload"])


def test_node_container_missing_is_unavailable(lab) -> None:
    src = TimerSource(DockerExecTransport("seat-console-gone", docker_host=lab.docker_host),
                      list(lab.timers))
    r = src.read()
    assert isinstance(r, Unavailable) and r.kind == "unreachable"
    assert "does not exist" in r.reason


# -- the list-timers answer reused while nothing it depends on changed (issue 33) -------------
class _CountingNode:
    """A node whose ``systemctl`` answers are set by the test; counts the commands run."""

    where = "fake-node"

    def __init__(self) -> None:
        self.started = "1764421855"
        self.runs: list[str] = []

    def run(self, argv, timeout_s=None):
        from seat_console.core.base import utcnow
        from seat_console.node.runner import CommandResult

        argv = list(argv)
        self.runs.append(argv[1])
        if argv[1] == "list-timers":
            out = ('[{"next": 1764422455000000, "left": 0, "last": 1764421855000000, '
                   '"passed": 0, "unit": "a.timer", "activates": "a.service"}]')
        else:   # systemctl show: one block per unit named, in argument order
            blocks = {"a.timer": ("Id=a.timer\nLoadState=loaded\nActiveState=active\n"
                                  "SubState=waiting\nUnitFileState=enabled\nUnit=a.service\n"
                                  "Persistent=no\nResult=success\n"),
                      "a.service": ("Id=a.service\nLoadState=loaded\nActiveState=inactive\n"
                                    "SubState=dead\n"
                                    f"ExecMainStartTimestamp=@{self.started}\n"
                                    "Result=success\n")}
            out = "\n".join(blocks[a] for a in argv[argv.index("--") + 1:])
        return CommandResult(argv=tuple(argv), where=self.where, rc=0, stdout=out,
                             started_at=utcnow(), duration_s=0.0, ok=True)


def test_list_timers_is_run_again_only_when_a_timer_or_its_service_changed() -> None:
    node = _CountingNode()
    src = TimerSource(node, ["a.timer"])   # type: ignore[arg-type]
    first = src.read()
    assert node.runs.count("list-timers") == 1 and first.timers[0].next_elapse is not None
    second = src.read()
    assert node.runs.count("list-timers") == 1   # nothing changed: the answer is reused
    assert second.timers[0].next_elapse == first.timers[0].next_elapse
    # the timers and services are read every time, in one command (the first time the
    # services systemd's default names, then those the last read found)
    assert node.runs.count("show") == 2
    assert second.timers[0].service == first.timers[0].service
    node.started = "1764421975"                  # the timer fired: its service started again
    src.read()
    assert node.runs.count("list-timers") == 2
    # read_timers alone (no cache kept) runs it every time, as before
    read_timers(node, ["a.timer"])   # type: ignore[arg-type]
    read_timers(node, ["a.timer"])   # type: ignore[arg-type]
    assert node.runs.count("list-timers") == 4


def test_timers_and_services_in_one_show_once_the_services_are_known() -> None:
    """The timers' and services' ``systemctl show`` is one command, the first time with the
    services systemd's default names (``a.timer`` → ``a.service``, systemd.timer(5)); the
    service's change is seen in it, and a timer that triggers another service (or a failed
    or short answer) falls back to the two commands, reading the same as before (issue 33)."""
    node = _CountingNode()
    src = TimerSource(node, ["a.timer"])   # type: ignore[arg-type]
    first = src.read()
    assert node.runs == ["show", "list-timers"]
    assert first.timers[0].service.unit == "a.service" and first.timers[0].errors == {}
    node.runs.clear()
    node.started = "1764421975"
    second = src.read()
    assert node.runs == ["show", "list-timers"]   # one show; the service moved: list-timers
    assert second.timers[0].service.last_started == datetime.fromtimestamp(1764421975, UTC)
    assert second.timers[0].service.unit == "a.service" and second.timers[0].errors == {}
    assert second.model_dump(exclude={"read_at"}) != first.model_dump(exclude={"read_at"})
    # the timers now trigger another service than the one named: two commands again
    src._times["services"] = ("b.service",)
    node.runs.clear()
    node.run = _also(node.run, "b.service", "Id=b.service\nLoadState=not-found\n")
    third = src.read()
    # the one command, then the two
    assert node.runs == ["show"] * 3 and third.timers[0].service.unit == "a.service"
    assert third.timers[0].service.last_started == second.timers[0].service.last_started


def test_a_first_read_of_a_timer_with_another_unit_falls_back_to_two_commands() -> None:
    """``Unit=`` set to another service than the default name: the one command's answer does
    not fit, and the first read is the two commands' (the same reading as without the guess);
    the next read names the service found."""
    node = _CountingNode()
    plain = node.run

    def run(argv, timeout_s=None):   # b.service answers as a.service would, under its name
        res = plain([a.replace("b.service", "a.service") for a in argv], timeout_s)
        if argv[1] == "show":
            out = res.stdout.replace("Unit=a.service", "Unit=b.service").replace(
                "Id=a.service", "Id=b.service")
            res = res.model_copy(update={"stdout": out})
        return res

    node.run = run
    src = TimerSource(node, ["a.timer"])   # type: ignore[arg-type]
    first = src.read()
    assert node.runs == ["show", "show", "show", "list-timers"]   # the one, then the two
    assert first.timers[0].service.unit == "b.service" and first.timers[0].errors == {}
    node.runs.clear()
    src.read()
    assert node.runs == ["show"]   # b.service named beside the timer; list-timers reused


def _also(run, unit: str, block: str):
    """``run`` answering ``unit``'s block too (an extra unit named in ``systemctl show``)."""
    from seat_console.node.runner import CommandResult

    def inner(argv, timeout_s=None):
        argv = list(argv)
        if unit not in argv:
            return run(argv, timeout_s)
        rest = [a for a in argv if a != unit]
        r = run(rest, timeout_s)
        return CommandResult(argv=tuple(argv), where=r.where, rc=0, stdout=r.stdout + "\n"
                             + block, started_at=r.started_at, duration_s=0.0, ok=True)
    return inner
