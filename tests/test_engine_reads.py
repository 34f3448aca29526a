"""What one engine read asks and parses (issue 33: the idle console's CPU): an endpoint the
engine does not offer (``/is_paused``, ``/is_sleeping`` without ``VLLM_SERVER_DEV_MODE``: HTTP
404) is not asked again for :data:`NOT_OFFERED_KEEP_S` while ``/health`` answers 200, and at
once after it did not; ``/metrics`` is parsed again only when the families the console reads
changed — and a change is always parsed (the figures follow the text)."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from seat_console.sources import engine as E

RECORDED = (Path(__file__).parent / "data" / "engine" / "vllm-0.32.0-cpu.metrics.txt").read_text()


class _Engine:
    """An engine behind ``httpx.MockTransport``: ``asked`` lists the paths, ``health`` and
    ``metrics`` are what it answers, ``/is_paused`` answers 404 unless ``paused`` is set."""

    def __init__(self) -> None:
        self.asked: list[str] = []
        self.health = 200
        self.metrics = RECORDED
        self.paused: bool | None = None

    def __call__(self, request: httpx.Request) -> httpx.Response:
        path = request.url.path
        self.asked.append(path)
        if path == "/health":
            return httpx.Response(self.health)
        if path == "/metrics":
            return httpx.Response(200, text=self.metrics)
        if path == "/version":
            return httpx.Response(200, json={"version": "0.32.0"})
        if path == "/v1/models":
            return httpx.Response(200, json={"object": "list", "data": [{"id": "seat"}]})
        if path == "/is_paused" and self.paused is not None:
            return httpx.Response(200, json={"is_paused": self.paused})
        return httpx.Response(404, json={"detail": "Not Found"})


@pytest.fixture
def engine():
    eng, now = _Engine(), [1000.0]
    reader = E.EngineReader("http://127.0.0.1:9", transport=httpx.MockTransport(eng),
                            clock=lambda: now[0])
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
