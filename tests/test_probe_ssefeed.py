"""``SSEFeed``'s one-event read shortcut against httpx-sse's decoders: on any byte stream, split
into reads anywhere, the shortcut must hand the timer the same events, with the same read
times, as the decoders alone (the pipeline before the shortcut)."""

from __future__ import annotations

import codecs
from typing import Any

from httpx_sse._decoders import SSEDecoder, SSELineDecoder
from hypothesis import given
from hypothesis import strategies as st
from seat_console.probe.client import SSEFeed


class _Recorder:
    """Stands in for the StreamTimer: keeps what it is fed."""

    def __init__(self) -> None:
        self.fed: list[tuple[str, Any]] = []

    def feed(self, data: str, t: Any) -> None:
        self.fed.append((data, t))

    def feed_payload(self, raw: bytes, t: Any) -> None:
        # StreamTimer.feed_payload is feed(raw decoded); test_feed_payload_is_feed holds it so
        self.fed.append((raw.decode("utf-8", "replace"), t))


def reference(reads: list[bytes]) -> list[tuple[str, Any]]:
    """The decoders alone, as SSEFeed fed them before the shortcut."""
    lines, events = SSELineDecoder(), SSEDecoder()
    utf8 = codecs.getincrementaldecoder("utf-8")("replace")
    out: list[tuple[str, Any]] = []

    def push(text: str, t: Any) -> None:
        for line in lines.decode(text) if text else []:
            ev = events.decode(line.rstrip("\n"))
            if ev is not None and (ev.data or ev.event):
                out.append((ev.data, t))

    for i, raw in enumerate(reads):
        push(utf8.decode(raw), i)
    tail = utf8.decode(b"", final=True)
    for line in (lines.decode(tail) if tail else []) + lines.flush():
        ev = events.decode(line.rstrip("\n"))
        if ev is not None and (ev.data or ev.event):
            out.append((ev.data, "end"))
    return out


def fed(reads: list[bytes]) -> list[tuple[str, Any]]:
    feed = SSEFeed()
    rec = _Recorder()
    feed.timer = rec  # type: ignore[assignment]
    for i, raw in enumerate(reads):
        feed.feed(raw, i)
    feed.finish("end")  # type: ignore[arg-type]
    return rec.fed


_TEXT = st.text(alphabet=st.sampled_from("ab {}\":,é€😀[DONE]\x00"), max_size=12)
_EOL = st.sampled_from(["\n", "\r\n", "\r"])
_LINE = st.one_of(
    _TEXT.map(lambda s: "data: " + s),
    _TEXT.map(lambda s: "data:" + s),
    _TEXT.map(lambda s: ": " + s),
    st.sampled_from(["event: x", "event:", "id: 7", "retry: 10", "retry: x", "data", "",
                     "data: ", "data:  two spaces"]),
)
# whole events as vLLM sends them (one per read when unsplit), mixed with arbitrary lines
_PIECE = st.one_of(
    _TEXT.map(lambda s: f"data: {s}\n\n".encode()),
    st.tuples(_LINE, _EOL).map(lambda le: (le[0] + le[1]).encode()),
    st.just(b"\xff"), st.just(b"\xe2\x82"),          # invalid / cut UTF-8
)


@st.composite
def streams(draw: st.DrawFn) -> list[bytes]:
    pieces = draw(st.lists(_PIECE, max_size=25))
    if draw(st.booleans()):
        return pieces                                 # one read per piece (the shortcut's case)
    data = b"".join(pieces)
    cuts = sorted(draw(st.lists(st.integers(0, len(data)), max_size=12)))
    bounds = [0, *cuts, len(data)]
    return [data[a:b] for a, b in zip(bounds, bounds[1:], strict=False) if b > a]


@given(streams())
def test_shortcut_feeds_what_the_decoders_feed(reads: list[bytes]) -> None:
    assert fed(reads) == reference(reads)


def test_the_cases_that_must_leave_the_shortcut() -> None:
    """Each read here looks like a whole event but is not one for the decoders' state."""
    cases = [
        [b"event: x\n", b"data: a\n\n"],      # a pending event name (the timer never sees it)
        [b"data: a\n", b"data: b\n\n"],       # pending data: one event "a\nb"
        [b"retry: 5\n", b"data: a\n\n"],      # a pending retry
        [b"da", b"data: a\n\n"],              # a partial line
        [b"data: a\r", b"\ndata: b\n\n"],     # a trailing CR held over
        [b"data: a\rb\n\n"],                  # a CR inside: two lines
        [b"data: \n\n", b"data: x\n\n"],      # an empty data field: still an event ("message")
    ]
    for reads in cases:
        assert fed(reads) == reference(reads), reads
    assert fed([b"event: x\n", b"data: a\n\n"]) == [("a", 1)]


# -- StreamTimer.feed_payload (bytes) against StreamTimer.feed (the decoded text) ------------

def _chunk_json(near_only: bool = False) -> st.SearchStrategy[bytes]:
    """vLLM-shaped chunk payloads and near misses (bad counts, types, errors, chat deltas,
    logprobs, whitespace, invalid UTF-8), as bytes."""
    count = st.one_of(st.integers(-2, 70), st.none(), st.just(True), st.just(1.5),
                      st.just("3"))
    text = st.one_of(st.text(alphabet="ab é€😀\\\"", max_size=4), st.none(), st.just(3))
    choice = st.fixed_dictionaries(
        {}, optional={"text": text, "delta": st.one_of(st.fixed_dictionaries(
            {}, optional={"content": text, "role": st.just("assistant")}), st.just("x")),
            "logprobs": st.one_of(st.none(), st.fixed_dictionaries(
                {}, optional={"tokens": st.lists(st.just("t"), max_size=3),
                              "content": st.lists(st.just({}), max_size=3)})),
            "finish_reason": st.one_of(st.none(), st.just("length"), st.just(7))})
    obj = st.fixed_dictionaries(
        {}, optional={"choices": st.one_of(st.lists(choice, max_size=2), st.just({}),
                                           st.just([1])),
                      "usage": st.one_of(st.none(), st.just([]), st.fixed_dictionaries(
                          {}, optional={"completion_tokens": count, "prompt_tokens": count})),
                      "error": st.one_of(st.none(), st.just("boom"),
                                         st.just({"message": "m"}))})
    import json as _json

    js = obj.map(lambda o: _json.dumps(o, ensure_ascii=False).encode())
    def vllm(ct: Any, pt: Any, tx: Any, chat: bool, lp: Any, fr: Any) -> bytes:
        c: dict[str, Any] = {"index": 0, "logprobs": lp, "finish_reason": fr}
        if chat:
            c["delta"] = {"content": tx}
        else:
            c["text"] = tx
        return _json.dumps({"id": "cmpl-1", "object": "text_completion", "choices": [c],
                            "usage": {"prompt_tokens": pt, "total_tokens": 9,
                                      "completion_tokens": ct}}).encode()

    # the chunk vLLM sends, one field at a time off its usual value
    odd = st.sampled_from([None, -1, True, 1.5, "3", 2**70])
    near = st.builds(vllm, st.one_of(st.integers(0, 9), odd), st.one_of(st.just(60), odd),
                     st.sampled_from([" tok", "", None, 3, ["x"], "é😀"]), st.booleans(),
                     st.sampled_from([None, {"tokens": ["a", "b"]}, {"content": [{}]}, [], {}]),
                     st.sampled_from([None, "length", 1, "stop"]))
    if near_only:
        return near
    return st.one_of(
        near, near,
        js,
        st.tuples(st.sampled_from([b"", b" ", b"\t", b"\x0b", b"\xc2\x85", b"\xef\xbb\xbf"]),
                  js, st.sampled_from([b"", b" ", b"\x1c", b"\xc2\xa0"])).map(b"".join),
        st.sampled_from([b"[DONE]", b" [DONE] ", b"", b"{", b"null", b"[]", b"5",
                         b'{"choices":[{"text":"\xff"}]}', b'{"choices":[{"text":"\xed\xa0\x80"}]}',
                         b'{"choices":[{"text":"\\ud800"}]}', b'{"choices":[{"text":"a"}]}\xff']),
        st.binary(max_size=20),
    )


def _run(payloads: list[bytes], as_bytes: bool) -> tuple[Any, ...]:
    from seat_console.probe.client import StreamFailure, StreamTimer

    tm = StreamTimer()
    err = None
    for i, raw in enumerate(payloads):
        try:
            if as_bytes:
                tm.feed_payload(raw, i * 0.01)
            else:
                tm.feed(raw.decode("utf-8", "replace"), i * 0.01)
        except StreamFailure as exc:
            err = (exc.kind, exc.reason)
            break
    return err, {k: getattr(tm, k) for k in tm.__slots__}


@given(st.lists(_chunk_json(), max_size=8))
def test_feed_payload_is_feed(payloads: list[bytes]) -> None:
    """Same timer state and the same failure (kind and words) from bytes as from the text."""
    assert _run(payloads, True) == _run(payloads, False)


@given(st.lists(_chunk_json(near_only=True), min_size=1, max_size=3))
def test_feed_payload_is_feed_near_vllm_chunks(payloads: list[bytes]) -> None:
    """The same, on vLLM's chunk with one field off its usual value at a time."""
    assert _run(payloads, True) == _run(payloads, False)


def test_feed_payload_takes_the_short_way_for_a_vllm_chunk() -> None:
    """The usual chunk does not fall back to ``feed`` (the gain is real), an odd one does."""
    from seat_console.probe.client import StreamTimer

    calls: list[str] = []

    class Spy(StreamTimer):
        __slots__ = ()

        def feed(self, data: str, t: float) -> None:
            calls.append(data)
            super().feed(data, t)

    tm = Spy()
    tm.feed_payload(b'{"id":"c","choices":[{"index":0,"text":" tok","logprobs":null,'
                    b'"finish_reason":null}],"usage":{"prompt_tokens":60,'
                    b'"completion_tokens":1}}', 0.1)
    assert calls == [] and tm.tokens_streamed == 1 and tm.events == 1
    tm.feed_payload(b"[DONE]", 0.2)
    assert calls == ["[DONE]"] and tm.done
