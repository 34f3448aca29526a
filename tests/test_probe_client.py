"""The probe's load client against a real local SSE server sending the nasty cases, and
property tests of the chunk parser / stream accumulator."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from seat_console.probe.client import (
    ChunkError,
    ClientTimeouts,
    RequestSpec,
    StreamFailure,
    StreamTimer,
    make_client,
    parse_chunk,
    run_request,
)
from seat_console.probe.hotpath import StreamPool, run_request_hot
from sse_server import SNOWMAN_TEXT, SSEServer

FAST = ClientTimeouts(connect_s=2.0, read_s=0.5, total_s=10.0)


@pytest.fixture(params=["hot", "aiohttp", "httpcore"])
def stack(request: pytest.FixtureRequest) -> str:
    """Every nasty case runs over the stream hot path (``probe/hotpath.py``) and both HTTP
    stacks under the httpx API."""
    return request.param


async def send(url: str, spec: RequestSpec, timeouts: ClientTimeouts, stack: str):
    """One request to ``url`` over ``stack`` ("hot" or an httpx stack)."""
    if stack == "hot":
        async with StreamPool(url, timeouts, 4) as pool:
            return await run_request_hot(pool, spec, timeouts=timeouts)
    async with make_client(url, timeouts, 4, http=stack) as client:  # type: ignore[arg-type]
        return await run_request(client, spec, timeouts=timeouts)


async def _one(scenario: str, api: str = "completions", timeouts: ClientTimeouts = FAST,
               stack: str = "aiohttp"):
    async with SSEServer() as srv:
        spec = RequestSpec(phase="t", index=0, api=api, model="m", prompt=scenario,
                           max_tokens=8)
        rec = await send(srv.url, spec, timeouts, stack)
        return rec, srv.requests


async def test_normal_stream_with_pings_counts_usage_tokens(stack: str) -> None:
    rec, reqs = await _one("normal", stack=stack)
    assert rec.ok, rec.failure
    assert rec.output_tokens == 4 and rec.tokens_streamed == 4 and rec.output_chunks == 4
    assert len(rec.itl_s) == 3                      # 4 tokens, one per chunk
    assert rec.ttft_s is not None and rec.e2e_s is not None and rec.e2e_s >= rec.ttft_s
    assert rec.tpot_s == pytest.approx((rec.e2e_s - rec.ttft_s) / 3)
    assert rec.stream_end_s >= rec.e2e_s
    body = reqs[0]
    assert body["stream"] is True and body["stream_options"]["include_usage"] is True
    assert body["ignore_eos"] is True and body["max_tokens"] == 8


async def test_multi_token_chunks_spread_their_gap(stack: str) -> None:
    rec, _ = await _one("multi", stack=stack)
    assert rec.ok, rec.failure
    assert rec.output_tokens == 6 and rec.output_chunks == 3
    itl = rec.itl_s
    assert len(itl) == 5                            # 6 tokens, first chunk carries 1
    assert itl[0] == itl[1] == itl[2] and itl[3] == itl[4]
    assert itl[0] * 3 == pytest.approx(itl[3] * 2, rel=0.6)  # both gaps ~0.06 s
    assert itl[0] > 0.01
    assert sum(itl) == pytest.approx(rec.e2e_s - rec.ttft_s)
    assert rec.tpot_s == pytest.approx(sum(itl) / 5)
    assert rec.finish_reason == "length"


async def test_tokens_per_chunk_from_logprobs_without_continuous_usage(stack: str) -> None:
    rec, _ = await _one("logprobs", stack=stack)
    assert rec.ok and rec.count_source == "logprobs"
    assert rec.output_tokens == 4 and rec.tokens_streamed == 4 and len(rec.itl_s) == 2


async def test_events_and_utf8_split_across_reads(stack: str) -> None:
    rec, _ = await _one("split", stack=stack)
    assert rec.ok, rec.failure
    assert rec.output_tokens == 2 and rec.output_chunks == 2
    assert rec.text_chars == len(SNOWMAN_TEXT)      # no U+FFFD from a split character


async def test_events_merged_in_one_read(stack: str) -> None:
    rec, _ = await _one("merged", stack=stack)
    assert rec.ok and rec.output_tokens == 5 and rec.output_chunks == 5 and len(rec.itl_s) == 4


async def test_chat_role_chunk_is_not_a_token_but_empty_text_token_is(stack: str) -> None:
    rec, reqs = await _one("chat", api="chat", stack=stack)
    assert rec.ok, rec.failure
    assert rec.output_tokens == 3 and rec.tokens_streamed == 3
    assert len(rec.itl_s) == 2
    assert rec.ttft_s is not None and rec.ttft_s > 0.015   # after the role chunk's 0.02 s
    assert reqs[0]["messages"] == [{"role": "user", "content": "chat"}]


@pytest.mark.parametrize(("scenario", "kind", "words"), [
    ("error-event", "error-event", "engine dead"),
    ("cut", "truncated", "without data: [DONE]"),
    ("cut-chunked", "truncated", "closed mid-stream"),
    ("no-usage", "no-usage", "usage"),
    ("http500", "http", "HTTP 500"),
    ("not-sse", "not-sse", "application/json"),
    ("hangup", "transport", "isconnected"),
    ("bad-json", "bad-chunk", "not JSON"),
])
async def test_failures_have_their_reason(scenario: str, kind: str, words: str,
                                          stack: str) -> None:
    rec, _ = await _one(scenario, stack=stack)
    assert not rec.ok
    assert rec.failure_kind == kind, rec.failure
    assert words in (rec.failure or "")


async def test_http500_keeps_status(stack: str) -> None:
    rec, _ = await _one("http500", stack=stack)
    assert rec.http_status == 500 and "boom" in (rec.failure or "")


async def test_stall_past_read_timeout_fails_as_timeout(stack: str) -> None:
    rec, _ = await _one("stall", stack=stack)
    assert not rec.ok and rec.failure_kind == "timeout"
    assert "stalled" in (rec.failure or "")
    assert rec.stream_end_s is not None and rec.stream_end_s < 3.0


async def test_total_timeout_bounds_a_slow_stream(stack: str) -> None:
    t = ClientTimeouts(connect_s=2.0, read_s=10.0, total_s=0.5)
    rec, _ = await _one("stall", timeouts=t, stack=stack)
    assert not rec.ok and rec.failure_kind == "timeout" and "0.5 s" in (rec.failure or "")


async def test_connection_refused_is_a_transport_failure(stack: str) -> None:
    rec = await send("http://127.0.0.1:9", RequestSpec(phase="t", index=0, model="m",
                                                       prompt="x", max_tokens=1), FAST, stack)
    assert not rec.ok and rec.failure_kind == "transport"


def test_unknown_http_stack_is_refused_by_name() -> None:
    with pytest.raises(ValueError, match="'h3'"):
        make_client("http://127.0.0.1:9", FAST, 1, http="h3")  # type: ignore[arg-type]


def test_httpx_sse_decoders_are_where_the_client_imports_them() -> None:
    """The client feeds httpx-sse's own line/event decoders (``httpx_sse._decoders``, stable
    since 0.4.1; pinned below 0.5 in pyproject.toml): a move or rename fails here, not in use."""
    from httpx_sse._decoders import SSEDecoder, SSELineDecoder

    lines = SSELineDecoder()
    got = lines.decode("data: a\r") + lines.decode("\n\ndata: b\n\n")
    evs = [e for e in map(SSEDecoder().decode, got) if e is not None]
    assert [e.data for e in evs] == ["a", "b"]


# -- parser properties ------------------------------------------------------------------------
@settings(max_examples=300, deadline=None)
@given(st.text(max_size=200))
def test_parse_chunk_only_raises_chunk_error(data: str) -> None:
    try:
        parse_chunk(data)
    except ChunkError as exc:
        assert "chunk" in str(exc)


_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner,
                                                                max_size=4),
    max_leaves=20)


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(st.sampled_from(["choices", "usage", "error", "id"]), _json, max_size=4))
def test_parse_chunk_on_json_objects_only_raises_chunk_error(obj: dict) -> None:
    try:
        ch = parse_chunk(json.dumps(obj))
    except ChunkError:
        return
    assert ch.kind in ("error", "usage", "choice")
    if ch.completion_tokens is not None:
        assert ch.completion_tokens >= 0


def test_parse_chunk_deep_nesting_is_a_chunk_error() -> None:
    with pytest.raises(ChunkError):
        parse_chunk("[" * 100_000)


def test_usage_chunk_is_not_a_token_and_zero_is_not_unknown() -> None:
    assert parse_chunk('{"choices": [], "usage": {"completion_tokens": 0}}').kind == "usage"
    with pytest.raises(ChunkError):
        parse_chunk('{"choices": []}')            # no usage: not a token, and not a count
    with pytest.raises(ChunkError):
        parse_chunk('{"choices": [], "usage": {"completion_tokens": -1}}')


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(min_value=0, max_value=5), min_size=1, max_size=30),
       st.lists(st.floats(min_value=0.0, max_value=1.0), min_size=30, max_size=30))
def test_stream_timer_sums(per_chunk: list[int], gaps: list[float]) -> None:
    """For any tokens-per-chunk and gaps: tokens streamed = usage, ITL has one value per token
    after the first output chunk, and the ITLs sum to E2E − TTFT."""
    tm = StreamTimer()
    t = 0.0
    running = 0
    for n, g in zip(per_chunk, gaps, strict=False):
        t += g
        running += n
        tm.feed(json.dumps({"choices": [{"text": "x" * n}],
                            "usage": {"completion_tokens": running}}), t)
    tm.feed(json.dumps({"choices": [], "usage": {"completion_tokens": running}}), t)
    tm.feed("[DONE]", t)
    if running == 0:
        with pytest.raises(StreamFailure):
            tm.result()
        return
    r = tm.result()
    first = next(n for n in per_chunk if n)
    assert r["output_tokens"] == running == tm.tokens_streamed
    assert len(r["itl_s"]) == running - first
    assert sum(r["itl_s"]) == pytest.approx(r["e2e_s"] - r["ttft_s"], abs=1e-9)
    if running > 1 and r["e2e_s"] > r["ttft_s"]:
        assert r["tpot_s"] == pytest.approx((r["e2e_s"] - r["ttft_s"]) / (running - 1))
    else:   # one output token, or all of them in one read: undefined, never 0
        assert r["tpot_s"] is None
