"""The probe's SSE stream end to end (issue 31, "The SSE stream, as the spec defines it"): the
feed (``SSEFeed``) and the timer (``StreamTimer``) on hostile streams, and the three stream
paths (the hot path, httpx over aiohttp, httpx over httpcore) against ``tests/sse_server.py``.

Asserted:

* valid SSE the standard settles — a leading BOM, events with no ``data:`` line (``retry:``,
  ``event:``, ``id:`` alone), CR / CRLF line ends with a CR ending one write and its LF opening
  the next — is a complete request with every token counted, on every path;
* a token chunk after ``data: [DONE]`` fails the request as a bad chunk, on every path and
  through both of the timer's entries (``feed``, ``feed_payload``) and the feed's shortcut;
* a running ``usage.completion_tokens`` above the request's ``max_tokens`` (2^40: a
  ``MemoryError`` reported as "malformed" before) is a bad chunk naming the count and the limit;
  the ITL list never holds more values than the request's tokens;
* a line or event that never ends is a bad chunk at :data:`MAX_EVENT_CHARS`;
* any bytes, split anywhere, give a record or one of the documented failures, nothing else.
"""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st
from seat_console.probe import client as client_mod
from seat_console.probe.client import (
    ClientTimeouts,
    RequestSpec,
    SSEFeed,
    StreamFailure,
    StreamTimer,
    make_client,
    run_request,
)
from seat_console.probe.hotpath import StreamPool, run_request_hot
from sse_server import DONE, SSEServer, completion_chunk, usage_chunk

FAST = ClientTimeouts(connect_s=2.0, read_s=2.0, total_s=10.0)


@pytest.fixture(params=["hot", "aiohttp", "httpcore"])
def stack(request: pytest.FixtureRequest) -> str:
    return request.param


async def _one(scenario: str, stack: str, max_tokens: int = 8):
    async with SSEServer() as srv:
        spec = RequestSpec(phase="t", index=0, model="m", prompt=scenario,
                           max_tokens=max_tokens)
        if stack == "hot":
            async with StreamPool(srv.url, FAST, 2) as pool:
                return await run_request_hot(pool, spec, timeouts=FAST)
        async with make_client(srv.url, FAST, 2, http=stack) as c:  # type: ignore[arg-type]
            return await run_request(c, spec, timeouts=FAST)


async def test_valid_sse_the_standard_settles_is_a_complete_request(stack: str) -> None:
    rec = await _one("spec", stack)
    assert rec.ok, rec.failure
    # the BOM did not cost the first token: three chunks of one token each
    assert rec.output_tokens == 3 and rec.tokens_streamed == 3 and rec.output_chunks == 3
    assert len(rec.itl_s) == 2 and rec.text_chars == 3


async def test_a_token_after_done_is_a_bad_chunk(stack: str) -> None:
    rec = await _one("after-done", stack)
    assert not rec.ok and rec.failure_kind == "bad-chunk", rec.failure
    assert "after [DONE]" in (rec.failure or "")


async def test_a_token_count_jump_is_a_bad_chunk_not_memory(stack: str) -> None:
    rec = await _one("jump", stack)
    assert not rec.ok and rec.failure_kind == "bad-chunk", rec.failure
    assert "1,099,511,627,776" in (rec.failure or "") and "max_tokens" in (rec.failure or "")


# -- the timer --------------------------------------------------------------------------------
def _tok(running: int | None, text: str = "x") -> bytes:
    return completion_chunk(text, running=running)[len(b"data: "):-2]


@given(st.lists(st.integers(0, 1 << 62), max_size=8), st.integers(1, 4096))
def test_any_running_count_is_bounded_by_max_tokens(counts: list[int], max_tokens: int) -> None:
    tm = StreamTimer(max_tokens=max_tokens)
    try:
        for i, c in enumerate(counts):
            tm.feed_payload(_tok(c), 0.01 * i)
    except StreamFailure as exc:
        assert exc.kind == "bad-chunk", exc.reason
        assert "usage.completion_tokens" in exc.reason
    assert len(tm.itl_s) <= max_tokens and tm.tokens_streamed <= max_tokens


@given(st.integers(1, 64), st.lists(st.integers(1, 3), max_size=40))
def test_exactly_max_tokens_is_a_complete_stream_and_one_more_is_not(max_tokens: int,
                                                                   steps: list[int]) -> None:
    """vLLM with ignore_eos sends exactly max_tokens: that is a complete request; one more
    token than the request allowed is a bad chunk (the bound is not off by one)."""
    tm = StreamTimer(max_tokens=max_tokens)
    running = 0
    for i, s in enumerate(steps):
        if running + s > max_tokens:
            break
        running += s
        tm.feed_payload(_tok(running), 0.01 * i)
    tm.feed_payload(_tok(max_tokens), 1.0)              # the last chunk: at the limit
    tm.feed_payload(usage_chunk(max_tokens)[len(b"data: "):-2], 1.0)
    tm.feed_payload(b"[DONE]", 1.0)
    assert tm.result()["output_tokens"] == max_tokens and tm.tokens_streamed == max_tokens
    over = StreamTimer(max_tokens=max_tokens)
    with pytest.raises(StreamFailure, match="above the"):
        over.feed_payload(_tok(max_tokens + 1), 0.0)


@given(st.sampled_from(["feed", "feed_payload", "sse"]), st.integers(1, 5),
       st.sampled_from([_tok(2), _tok(None), _tok(None, ""), b"[DONE]",
                        b'{"choices": [], "usage": {"completion_tokens": 1}}']))
def test_any_event_after_done_is_a_bad_chunk(entry: str, n: int, after: bytes) -> None:
    tm = StreamTimer()
    feed = SSEFeed()
    stream = [_tok(1), b'{"choices": [], "usage": {"completion_tokens": 1}}', b"[DONE]",
              *[after] * n]
    with pytest.raises(StreamFailure) as exc:
        for i, raw in enumerate(stream):
            if entry == "feed":
                tm.feed(raw.decode(), i)
            elif entry == "feed_payload":
                tm.feed_payload(raw, i)
            else:
                feed.feed(b"data: " + raw + b"\n\n", i)   # one event per read: the shortcut
    assert exc.value.kind == "bad-chunk" and "after [DONE]" in exc.value.reason


def test_a_line_that_never_ends_is_a_bad_chunk(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(client_mod, "MAX_EVENT_CHARS", 1000)
    feed = SSEFeed()
    with pytest.raises(StreamFailure, match="still incomplete") as exc:
        for i in range(100):
            feed.feed(b"data: " + b"x" * 100, i)
    assert exc.value.kind == "bad-chunk"
    feed = SSEFeed()                                   # many whole lines are not one line
    for i in range(100):
        feed.feed(b": ping " + b"x" * 100 + b"\n", i)
    # a long valid stream read in pieces that never end on an event boundary: never "held"
    data = b"".join(completion_chunk("x", running=i) for i in range(1, 400))
    feed = SSEFeed()
    for i in range(0, len(data), 333):
        feed.feed(data[i:i + 333], i)
    assert feed.timer.tokens_streamed == 399


# -- any stream ----------------------------------------------------------------------------------
_PIECES = st.one_of(
    st.just(completion_chunk("a", running=1)), st.just(completion_chunk("b", running=2)),
    st.just(usage_chunk(2)), st.just(DONE), st.just(b": ping\n\n"),
    st.just(b"retry: 5\n\nevent: x\n\nid: 1\n\n"), st.just(b"\xef\xbb\xbf"),
    st.sampled_from([b"\r", b"\n", b"\r\n", b"data:", b"data: {}\n\n", b'data: {"error": "e"}\n\n',
                     b"data: " + json.dumps({"choices": [{"text": "x"}],
                                             "usage": {"completion_tokens": 1 << 40}}).encode()
                     + b"\n\n"]),
    st.binary(max_size=12),
)


@given(st.lists(_PIECES, max_size=12), st.lists(st.integers(0, 400), max_size=8))
def test_any_stream_split_anywhere_gives_a_record_or_a_documented_failure(
        pieces: list[bytes], cuts: list[int]) -> None:
    data = b"".join(pieces)
    bounds = [0, *sorted(c % (len(data) + 1) for c in cuts), len(data)]
    feed = SSEFeed(max_tokens=64)
    try:
        for i, (a, b) in enumerate(zip(bounds, bounds[1:], strict=False)):
            if b > a:
                feed.feed(data[a:b], 0.01 * i)
        feed.finish(1.0)
        fields = feed.timer.result()
    except StreamFailure as exc:
        assert exc.kind in ("bad-chunk", "error-event", "truncated", "no-usage", "no-output")
        assert exc.reason
        return
    assert fields["output_tokens"] >= 0 and len(fields["itl_s"]) <= 64
