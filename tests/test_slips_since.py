"""Tests written for the survivors of issue 31's own mutation run over the code added since the
first half (`python3 scripts/mutation.py --set since`, docs/testing.md): each one fails with its
mutant applied."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from seat_console.probe.engine_counters import EngineCounters
from seat_console.probe.interference import Disruption, counters_reset, earliest
from seat_console.serve.plan import loopback_host
from seat_console.sources.timers import forecast_start
from seat_console.tui import keys as kt

T = datetime(2026, 12, 5, 3, 0, tzinfo=UTC)


def test_the_run_is_disrupted_from_the_earliest_event_by_the_nodes_clock() -> None:
    seen_first = Disruption(at=T + timedelta(seconds=10), kind="container", what="restart")
    happened_first = Disruption(at=T, kind="service", what="fleet-remediation ran")
    last = Disruption(at=T + timedelta(seconds=5), kind="silence", what="expired")
    for order in ([seen_first, happened_first, last], [happened_first, last, seen_first]):
        assert earliest(order) is happened_first
    assert earliest([]) is None


def test_a_counter_that_went_down_by_one_is_a_restart() -> None:
    a = EngineCounters(generation_tokens=100.0)
    assert counters_reset(a, EngineCounters(generation_tokens=99.0)) is not None
    assert counters_reset(a, EngineCounters(generation_tokens=100.0)) is None


def test_a_one_time_trigger_that_passed_before_the_latest_run_stays_disabled() -> None:
    boot = T - timedelta(hours=1)
    manager = {"Virtualization": "docker", "UserspaceTimestamp": f"@{int(boot.timestamp())}"}
    timer = {"Unit": "s.service", "TimersMonotonic": "{ OnBootUSec=5min ; next_elapse=x }"}
    # the service ran at boot + 1 min (before the trigger's elapse at + 5 min), and the timer
    # last triggered at + 10 min (after it): systemd disabled the one-time trigger
    svc = {"InactiveExitTimestamp": f"@{int((boot + timedelta(minutes=1)).timestamp())}"}
    fc = forecast_start("s.timer", timer, svc, manager, boot + timedelta(minutes=10), T)
    assert fc.triggers == () and not fc.fires_at_once


def test_localhost_is_a_name_not_a_prefix() -> None:
    assert loopback_host("localhost") == "127.0.0.1"
    assert loopback_host("localhost.evil.example") is None
    assert loopback_host("localhost:8470") is None


def test_a_remapped_key_loses_the_label_of_the_key_it_replaced() -> None:
    rows = kt.remapped(kt.bindings(), {"help": "f1"})
    b = next(b for b in rows if getattr(b, "id", None) == "help")
    assert b.key == "f1" and b.key_display is None
