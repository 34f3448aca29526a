"""What one engine read asks and parses (issue 33: the idle console's CPU): an endpoint the
engine does not offer (``/is_paused``, ``/is_sleeping`` without ``VLLM_SERVER_DEV_MODE``: HTTP
404) is not asked again for :data:`NOT_OFFERED_KEEP_S` while ``/health`` answers 200, and at
once after it did not; ``/metrics`` is parsed again only when the families the console reads
changed — and a change is always parsed (the figures follow the text); the engine's identity
(``/version``, ``/v1/models``) is not asked again inside :data:`IDENTITY_KEEP_S` while it is
unchanged (and carries its real read time), is asked at once after a restart (a new
``process_start_time_seconds``, a ``/health`` that was not 200 or did not answer), and a
``/v1/models`` that starts failing shows within the keep. The clock is injected: no sleeps."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from seat_console.sources import engine as E

from tests.engine_double import EngineDouble

RECORDED = (Path(__file__).parent / "data" / "engine" / "vllm-0.32.0-cpu.metrics.txt").read_text()


class _Engine:
    """An engine behind a real local HTTP server (``tests/engine_double.py``): ``asked`` lists the paths, ``health`` and
    ``metrics`` are what it answers, ``/is_paused`` answers 404 unless ``paused`` is set."""

    def __init__(self) -> None:
        self.asked: list[str] = []
        self.health: int | None = 200   # None: no answer at all (connection refused)
        self.metrics = RECORDED
        self.paused: bool | None = None
        self.version = "0.32.0"
        self.models_status = 200

    def __call__(self, request: httpx.Request) -> httpx.Response:
        path = request.url.path
        self.asked.append(path)
        if path == "/health":
            if self.health is None:
                raise httpx.ConnectError("connection refused", request=request)
            return httpx.Response(self.health)
        if path == "/metrics":
            return httpx.Response(200, text=self.metrics)
        if path == "/version":
            return httpx.Response(200, json={"version": self.version})
        if path == "/v1/models":
            return httpx.Response(self.models_status,
                                  json={"object": "list", "data": [{"id": "seat"}]})
        if path == "/is_paused" and self.paused is not None:
            return httpx.Response(200, json={"is_paused": self.paused})
        return httpx.Response(404, json={"detail": "Not Found"})


@pytest.fixture
def engine():
    eng, now = _Engine(), [1000.0]
    with EngineDouble(eng) as url:
        reader = E.EngineReader(url, clock=lambda: now[0])
        yield eng, reader, now
        reader.close()


def _flags_asked(eng: _Engine) -> list[str]:
    return [p for p in eng.asked if p in ("/is_paused", "/is_sleeping")]


def test_not_offered_endpoints_are_asked_again_only_after_the_keep_or_a_restart(engine):
    eng, reader, now = engine
    r = reader.read()
    assert isinstance(r, E.EngineReading) and r.paused is None and r.problems == ()
    assert _flags_asked(eng) == ["/is_paused", "/is_sleeping"]
    eng.asked.clear()
    now[0] += E.NOT_OFFERED_KEEP_S - 1
    r = reader.read()
    assert _flags_asked(eng) == [] and r.paused is None and r.hold_state == "UP"
    assert {"/health", "/version", "/v1/models", "/metrics"} <= set(eng.asked)
    now[0] += 2   # the keep ran out: asked again
    reader.read()
    assert _flags_asked(eng) == ["/is_paused", "/is_sleeping"]
    eng.asked.clear()
    eng.health = 503   # a restart: the next engine may offer them
    reader.read()
    assert _flags_asked(eng) == ["/is_paused", "/is_sleeping"]
    eng.health, eng.paused = 200, True
    eng.asked.clear()
    r = reader.read()
    assert _flags_asked(eng) == ["/is_paused", "/is_sleeping"] and r.paused is True
    assert r.hold_state == "PAUSED"
    eng.asked.clear()
    reader.read()   # offered: asked every read
    assert "/is_paused" in _flags_asked(eng)


def test_metrics_are_parsed_again_only_when_the_read_families_change(engine, monkeypatch):
    eng, reader, _ = engine
    parsed: list[int] = []
    real = E.parse_selected
    monkeypatch.setattr(E, "parse_selected", lambda *a: parsed.append(1) or real(*a))
    first = reader.read().metrics
    assert first is not None and first == E.parse_metrics(RECORDED) and len(parsed) == 2
    # a family the console does not read moved: the same figures, no parse
    eng.metrics = RECORDED.replace('python_gc_objects_collected_total{generation="0"} 13028.0',
                                   'python_gc_objects_collected_total{generation="0"} 13999.0')
    assert eng.metrics != RECORDED
    assert reader.read().metrics is first and len(parsed) == 2
    # a family it reads moved: parsed, the new figure shown
    line = next(x for x in RECORDED.splitlines() if x.startswith("vllm:num_requests_running"))
    eng.metrics = RECORDED.replace(line, line.rsplit(" ", 1)[0] + " 7.0")
    again = reader.read().metrics
    assert len(parsed) == 3 and again.requests_running == 7
    assert again == E.parse_metrics(eng.metrics)


# -- the engine's identity: /version and /v1/models ----------------------------------------------
IDENTITY = ["/version", "/v1/models"]
START = next(x for x in RECORDED.splitlines() if x.startswith("process_start_time_seconds "))


def _identity_asked(eng: _Engine) -> list[str]:
    got = [p for p in eng.asked if p in IDENTITY]
    eng.asked.clear()
    return got


def test_an_unchanged_identity_is_not_asked_again_inside_the_keep(engine):
    eng, reader, now = engine
    first = reader.read()
    assert isinstance(first, E.EngineReading) and first.version == "0.32.0"
    assert first.metrics is not None and first.metrics.process_start_s == 1.79595755626e9
    assert _identity_asked(eng) == IDENTITY and first.identity_at is not None
    for _ in range(3):   # reads inside the keep: /health and /metrics only
        now[0] += (E.IDENTITY_KEEP_S - 1) / 3
        r = reader.read()
        assert _identity_asked(eng) == []
        assert r.version == "0.32.0" and r.models == first.models and r.problems == ()
        # the identity shown is the one read first, with that read's time — never as read now
        assert r.identity_at == first.identity_at and r.identity_at < r.read_at
    now[0] += 2   # the keep ran out: asked again, and its time is the new read's
    r = reader.read()
    assert _identity_asked(eng) == IDENTITY and r.identity_at > first.identity_at


def test_a_models_failure_shows_within_the_keep(engine):
    eng, reader, now = engine
    first = reader.read()
    assert _identity_asked(eng) == IDENTITY and first.problems == ()
    eng.models_status = 500
    now[0] += E.IDENTITY_KEEP_S - 1
    assert reader.read().problems == () and _identity_asked(eng) == []   # not asked yet
    now[0] += 2
    r = reader.read()
    assert _identity_asked(eng) == IDENTITY
    assert r.models is None and r.problems == ("/v1/models: HTTP 500",)
    # the app keeps the last model, as old as its identity read (not the last reading's time)
    merged = r.with_last_good(first)
    assert merged.models == first.models and [k.field for k in merged.kept] == ["models"]
    assert merged.kept[0].since == first.identity_at == merged.identity_at
    # a failed identity is not a known one: asked at every read until it answers
    assert reader.read().problems == ("/v1/models: HTTP 500",)
    assert _identity_asked(eng) == IDENTITY
    eng.models_status = 200
    r = reader.read()
    assert _identity_asked(eng) == IDENTITY and r.models == first.models and r.problems == ()
    assert reader.read().models == first.models and _identity_asked(eng) == []


def test_a_restart_re_reads_the_identity_at_once(engine):
    eng, reader, now = engine
    reader.read()
    assert _identity_asked(eng) == IDENTITY
    now[0] += 1
    reader.read()
    assert _identity_asked(eng) == []
    # a new process behind the same healthy endpoint (a restart between two reads)
    eng.metrics = RECORDED.replace(START, "process_start_time_seconds 1.79595999e+09")
    eng.version = "0.33.0"
    now[0] += 1
    r = reader.read()
    assert _identity_asked(eng) == IDENTITY and r.version == "0.33.0"
    now[0] += 1
    assert reader.read().version == "0.33.0" and _identity_asked(eng) == []


@pytest.mark.parametrize("down", [503, None], ids=["health-503", "no-answer"])
def test_the_identity_is_asked_again_after_health_was_not_200(engine, down):
    eng, reader, now = engine
    reader.read()
    assert _identity_asked(eng) == IDENTITY
    eng.health = down
    now[0] += 1
    r = reader.read()
    if down is None:
        assert isinstance(r, E.Unavailable) and _identity_asked(eng) == []
    else:   # asked in the read where /health is not 200, too
        assert not r.healthy and _identity_asked(eng) == IDENTITY
    eng.health = 200
    now[0] += 1
    reader.read()   # the read after: asked at once (the engine may be another one)
    assert _identity_asked(eng) == IDENTITY
    now[0] += 1
    reader.read()
    assert _identity_asked(eng) == []
