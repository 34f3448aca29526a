"""Release's `--defer` edge cases and the fire-at-once forecast inside a container, without the
lab (issue 31's mutation survivors: "--defer of a timer the hold did not stop is silently
ignored"; "OnBootSec counted from the kernel's boot inside a container gives a false 'fires at
once'")."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from app_fixtures import default_loaded

from seat_console.actions import hold as hold_mod
from seat_console.actions.runbook import RunContext, StepError
from seat_console.node.context import NodeContext
from seat_console.node.runner import CommandResult
from seat_console.sources.timers import forecast_start

NOW = datetime.now(UTC)


def _at(t: datetime) -> str:
    return f"@{int(t.timestamp())}"


# -- OnBootSec inside a container ----------------------------------------------------------------
HOST_BOOT = NOW - timedelta(days=7)
CONTAINER_START = NOW - timedelta(minutes=1)
BOOT_TIMER = {"Unit": "s.service", "TimersMonotonic": "{ OnBootUSec=15min ; next_elapse=x }"}


def test_onbootsec_counts_from_the_containers_systemd_not_the_hosts_kernel() -> None:
    container = {"Virtualization": "docker", "UserspaceTimestamp": _at(CONTAINER_START),
                 "KernelTimestamp": _at(HOST_BOOT)}
    fc = forecast_start("s.timer", BOOT_TIMER, {}, container, None, NOW)
    assert not fc.fires_at_once, fc.warning()
    assert fc.next_elapse == datetime.fromtimestamp(int(CONTAINER_START.timestamp()), UTC) + \
        timedelta(minutes=15)
    # the control: on a VM the kernel's boot is the boot, a week ago: it fires at once
    vm = {**container, "Virtualization": "kvm"}
    assert forecast_start("s.timer", BOOT_TIMER, {}, vm, None, NOW).fires_at_once


# -- --defer ------------------------------------------------------------------------------------
def _hold(stopped: tuple[str, ...]) -> hold_mod.HoldState:
    return hold_mod.HoldState(hold_id="seat-hold-t", run_id="r", state="active",
                              lease_unit="seat-hold-t-lease.timer", silence_id=None,
                              stopped=stopped, expires_at=NOW + timedelta(hours=1),
                              placed_at=NOW, placed_by="me@node", reason="test")


class Node:
    """The node seam: the timer is inactive; `systemd-run` (a deferral) must not be reached
    by a step that refuses."""

    where, _node_path = "fake", "/usr/bin"

    def __init__(self) -> None:
        self.argvs: list[list[str]] = []

    def run(self, argv, timeout_s=10.0):  # noqa: ANN001, ANN201 - transport protocol
        self.argvs.append(list(argv))
        if argv[:2] == ["systemctl", "show"] and "--" in argv:
            units = argv[argv.index("--") + 1:]
            out = "\n\n".join(f"Id={u}\nLoadState=loaded\nActiveState=inactive\nSubState=dead\n"
                              f"Unit={u.removesuffix('.timer')}.service\nTimersMonotonic=\n"
                              "TimersCalendar=\nPersistent=no" for u in units)
        elif argv[:2] == ["systemctl", "show"]:
            out = f"Virtualization=docker\nUserspaceTimestamp={_at(CONTAINER_START)}"
        elif argv[:2] == ["systemctl", "list-timers"]:
            out = "[]"
        else:
            out = ""
        return CommandResult(argv=list(argv), rc=0, stdout=out + "\n", stderr="",
                             duration_s=0.01, where="fake", started_at=NOW, ok=True)

    def close(self) -> None:
        pass


def test_defer_of_a_timer_the_hold_did_not_stop_is_refused_naming_both() -> None:
    nctx = NodeContext(default_loaded(), transport=Node())
    with pytest.raises(ValueError) as e:
        hold_mod.build_release(nctx, None, _hold(("a.timer",)),  # type: ignore[arg-type]
                               defer={"b.timer": NOW + timedelta(hours=2)})
    assert "--defer b.timer" in str(e.value) and "a.timer" in str(e.value)


def test_defer_too_soon_is_refused_before_anything_changes() -> None:
    node = Node()
    nctx = NodeContext(default_loaded(), transport=node)
    rb = hold_mod.build_release(nctx, None, _hold(("a.timer",)),  # type: ignore[arg-type]
                                defer={"a.timer": NOW + timedelta(seconds=1)})
    step = next(s for s in rb.steps if s.name == "start a.timer")
    with pytest.raises(StepError) as e:
        step.check(RunContext("r", "release", {}, {}))
    assert "--defer a.timer" in str(e.value) and "not at least" in str(e.value)
    assert not any(a[0] == "systemd-run" or "start" in a[:2] for a in node.argvs), node.argvs


def test_defer_plans_a_deferred_start_and_defer_firing_spares_a_quiet_timer() -> None:
    nctx = NodeContext(default_loaded(), transport=Node())
    later = NOW + timedelta(hours=2)
    rb = hold_mod.build_release(nctx, None, _hold(("a.timer",)),  # type: ignore[arg-type]
                                defer={"a.timer": later})
    c = next(s for s in rb.steps if s.name == "start a.timer").check(
        RunContext("r", "release", {}, {}))
    assert c.go and c.text.startswith("defer a.timer: keep it stopped until"), c.text
    # --defer-firing only defers a timer that would fire at once: this one would not
    rb = hold_mod.build_release(nctx, None, _hold(("a.timer",)),  # type: ignore[arg-type]
                                defer_firing=later)
    c = next(s for s in rb.steps if s.name == "start a.timer").check(
        RunContext("r", "release", {}, {}))
    assert c.go and c.text.startswith("start a.timer"), c.text
