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


# -- the probe's hot path: which connections go back to the pool -------------------------------
async def test_a_connection_close_response_is_not_reused() -> None:
    from seat_console.probe.hotpath import StreamPool, run_request_hot
    from sse_server import SSEServer
    from test_probe_client import FAST
    from test_probe_hotpath import _spec

    async with SSEServer(keep_alive=True, say_close=True) as srv, \
            StreamPool(srv.url, FAST, 4) as pool:
        recs = [await run_request_hot(pool, _spec("normal", i), timeouts=FAST) for i in range(2)]
    assert all(r.ok for r in recs), [r.failure for r in recs]
    assert pool.connects == 2 and srv.connections == 2     # the header honoured


async def test_an_idle_connection_past_the_keep_alive_is_not_reused() -> None:
    from seat_console.probe.hotpath import KEEPALIVE_EXPIRY_S, StreamPool, run_request_hot
    from sse_server import SSEServer
    from test_probe_client import FAST
    from test_probe_hotpath import _spec

    async with SSEServer(keep_alive=True) as srv, StreamPool(srv.url, FAST, 4) as pool:
        first = await run_request_hot(pool, _spec("normal", 0), timeouts=FAST)
        for c in pool._idle:                     # as if it had idled past the expiry
            c.idle_since -= KEEPALIVE_EXPIRY_S + 1
        second = await run_request_hot(pool, _spec("normal", 1), timeouts=FAST)
    assert first.ok and second.ok
    assert pool.connects == 2


def test_bytes_on_an_idle_connection_close_it() -> None:
    from seat_console.probe.hotpath import _Conn

    class Transport:
        closed = False

        def close(self) -> None:
            self.closed = True

    c = _Conn()
    c.transport = Transport()  # type: ignore[assignment]
    c.data_received(b"HTTP/1.1 408 Request Timeout\r\n\r\n")   # nobody asked: not ours
    assert c.closed and c.transport.closed  # type: ignore[union-attr]
