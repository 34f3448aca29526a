"""The stream hot path (``probe/hotpath.py``) against the httpx path (``probe/client.py``) on
the recorded set of streams, the hostile ones included (``tests/sse_server.py``): both must
produce the same per-request record, field by field, apart from the clock readings."""

from __future__ import annotations

from typing import Any

import pytest
from seat_console.core.probe_record import RequestRecord
from seat_console.probe.client import ClientTimeouts, RequestSpec
from seat_console.probe.hotpath import StreamPool, run_request_hot
from sse_server import SCENARIOS, TOKENS, SSEServer
from test_probe_client import FAST, send

ALL = [*SCENARIOS, "cut-chunked", "http500", "not-sse", "hangup"]

_CLOCK = ("ttft_s", "e2e_s", "tpot_s", "stream_end_s", "start_s")
# failures whose text quotes the transport library's own exception (aiohttp's, httpcore's):
# kind and the probe's words before the library's are compared, not the library's words
_TRANSPORT_WORDED = ("transport",)


def shape(rec: RequestRecord) -> dict[str, Any]:
    """``rec`` with each clock reading replaced by whether it is set and ITLs by their count
    (which reads coincide depends on the scheduler, not the path; the even spread of a
    multi-token chunk's gap is checked per path in ``test_probe_client.py``)."""
    d = rec.model_dump(mode="json")
    d.pop("sent_at")
    # whether TPOT is defined depends on the reads too: all output in one read leaves it None
    one_read = d["ttft_s"] is not None and d["ttft_s"] == d["e2e_s"]
    for k in _CLOCK:
        d[k] = d[k] is not None
    d["tpot_s"] = d["tpot_s"] or one_read
    itl = d.pop("itl_s")
    d["itl_n"] = len(itl)
    if d["failure_kind"] in _TRANSPORT_WORDED:
        d["failure"] = bool(d["failure"])
    elif (d["failure"] or "").startswith("the connection closed mid-stream"):
        d["failure"] = "the connection closed mid-stream"
    return d


def _spec(scenario: str, i: int = 0) -> RequestSpec:
    return RequestSpec(phase="t", index=i, api="chat" if scenario == "chat" else "completions",
                       model="m", prompt=scenario, max_tokens=8)


@pytest.mark.parametrize("scenario", ALL)
@pytest.mark.parametrize("old", ["aiohttp", "httpcore"])
async def test_hot_path_record_equals_httpx_record(scenario: str, old: str) -> None:
    async with SSEServer() as srv:
        hot = await send(srv.url, _spec(scenario), FAST, "hot")
        ref = await send(srv.url, _spec(scenario), FAST, old)
    assert shape(hot) == shape(ref)
    if scenario in TOKENS:
        assert hot.ok and hot.output_tokens == TOKENS[scenario]


def test_shape_tells_records_apart() -> None:
    """The comparison can fail: a changed token count or failure kind changes the shape."""
    base = RequestRecord(phase="t", index=0, api="completions", prompt_id=0,
                         sent_at="2026-12-02T00:00:00Z", start_s=0.0, ok=True, http_status=200,
                         stream_end_s=1.0, tokens_streamed=2, output_chunks=2, events=3,
                         text_chars=2, ttft_s=0.1, e2e_s=0.2, tpot_s=0.1, itl_s=[0.1],
                         output_tokens=2)
    def but(**kw: Any) -> RequestRecord:
        return RequestRecord.model_validate({**base.model_dump(), **kw})

    assert shape(base) == shape(but(ttft_s=0.3, e2e_s=0.5))   # clock readings are not compared
    assert shape(base) != shape(but(output_tokens=3))
    assert shape(base) != shape(but(itl_s=[0.1, 0.1]))
    assert shape(base) != shape(but(ok=False, failure_kind="truncated", failure="cut"))


async def test_keep_alive_reuses_one_connection_for_sequential_streams() -> None:
    async with SSEServer(keep_alive=True) as srv, StreamPool(srv.url, FAST, 4) as pool:
        recs = [await run_request_hot(pool, _spec(s, i), timeouts=FAST)
                for i, s in enumerate(["normal", "multi", "chat", "merged"])]
    assert all(r.ok for r in recs), [r.failure for r in recs]
    assert pool.connects == 1 and srv.connections == 1


async def test_failed_stream_does_not_return_its_connection() -> None:
    """An error event leaves the body unread: the connection is closed, the next request
    opens a new one and succeeds."""
    async with SSEServer(keep_alive=True) as srv, StreamPool(srv.url, FAST, 4) as pool:
        bad = await run_request_hot(pool, _spec("error-event"), timeouts=FAST)
        good = await run_request_hot(pool, _spec("normal", 1), timeouts=FAST)
    assert bad.failure_kind == "error-event" and good.ok
    assert pool.connects == 2


async def test_total_timeout_on_the_hot_path_names_the_limit() -> None:
    t = ClientTimeouts(connect_s=2.0, read_s=10.0, total_s=0.3)
    async with SSEServer() as srv:
        rec = await send(srv.url, _spec("stall"), t, "hot")
    assert rec.failure_kind == "timeout" and "0.3 s" in (rec.failure or "")


def test_hot_path_on_uvloop_streams_every_recorded_case() -> None:
    """The probe runs on uvloop (``run_async``), whose transports are not asyncio's classes:
    every scenario gives the same record there as on the httpx path."""
    from seat_console.probe.client import run_async

    async def both() -> list[tuple[dict[str, Any], dict[str, Any]]]:
        out = []
        async with SSEServer(keep_alive=True) as srv:
            for s in ALL:
                out.append((shape(await send(srv.url, _spec(s), FAST, "hot")),
                            shape(await send(srv.url, _spec(s), FAST, "aiohttp"))))
        return out

    for hot, ref in run_async(both()):
        assert hot == ref


def test_pool_refuses_a_url_that_is_not_http() -> None:
    with pytest.raises(ValueError, match="ftp://x"):
        StreamPool("ftp://x", FAST, 1)
