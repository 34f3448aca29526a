"""``SSEFeed`` against the WHATWG standard's event-stream parsing (html.spec.whatwg.org,
"Parsing an event stream" and "Interpreting an event stream"), written out here as a slow,
whole-stream reader (:func:`reference`): on any byte stream, split into reads anywhere, the feed
must hand the timer the same events as the standard dispatches, each stamped with the read that
holds the end of its terminating blank line; the one-event read shortcut must not change that.
Issue 31: an ``event:`` / ``id:`` / ``retry:`` alone dispatched an empty event that failed the
stream, a leading BOM lost the first event, and a CR ending a read was stamped with the next
read's time."""

from __future__ import annotations

import bisect
import itertools
import re
from typing import Any

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


_EOL = re.compile(rb"\r\n|\r|\n")


def reference(reads: list[bytes]) -> list[tuple[str, int]]:
    """The events the standard dispatches from the stream ``b"".join(reads)``, each with the
    index of the read holding the first byte of its blank line's line end (the CR of a CRLF:
    the line has ended there). Written from the standard, not from the code under test: one
    leading BOM dropped; lines end at CRLF, CR or LF; a line at the end of the stream without
    a line end, and an event without its blank line, are discarded; ``:`` starts a comment;
    ``field: value`` drops one space after the colon; a line without a colon is a field with
    an empty value; ``data`` appends value + LF to the data buffer; a blank line with an empty
    data buffer dispatches nothing and clears the event type; else the data, its last LF
    removed, is dispatched."""
    data = b"".join(reads)
    ends = list(itertools.accumulate(len(r) for r in reads))
    pos = 3 if data.startswith(b"\xef\xbb\xbf") else 0
    out: list[tuple[str, int]] = []
    buf = ""
    for m in _EOL.finditer(data, pos):
        line = data[pos:m.start()].decode("utf-8", "replace")
        pos = m.end()
        if not line:
            if buf:
                out.append((buf[:-1], bisect.bisect_right(ends, m.start())))
            buf = ""
            continue
        if line.startswith(":"):
            continue
        name, colon, value = line.partition(":")
        if colon and value.startswith(" "):
            value = value[1:]
        if name == "data":
            buf += value + "\n"
    return out


def fed(reads: list[bytes]) -> list[tuple[str, Any]]:
    feed = SSEFeed()
    rec = _Recorder()
    feed.timer = rec  # type: ignore[assignment]
    for i, raw in enumerate(reads):
        feed.feed(raw, i)
    feed.finish("end")  # type: ignore[arg-type]
    return rec.fed


_TEXT = st.text(alphabet=st.sampled_from("ab {}\":,é€😀[DONE]\x00\ufeff"), max_size=12)
_EOL_S = st.sampled_from(["\n", "\r\n", "\r"])
_LINE = st.one_of(
    _TEXT.map(lambda s: "data: " + s),
    _TEXT.map(lambda s: "data:" + s),
    _TEXT.map(lambda s: ": " + s),
    st.sampled_from(["event: x", "event:", "id: 7", "id", "retry: 10", "retry: x", "data", "",
                     "data: ", "data:  two spaces", "\ufeffdata: b", "dat", "DATA: x"]),
)
# whole events as vLLM sends them (one per read when unsplit), mixed with arbitrary lines
_PIECE = st.one_of(
    _TEXT.map(lambda s: f"data: {s}\n\n".encode()),
    st.tuples(_LINE, _EOL_S).map(lambda le: (le[0] + le[1]).encode()),
    st.just(b"\xff"), st.just(b"\xe2\x82"),          # invalid / cut UTF-8
    st.sampled_from([b"\r", b"\n", b"\r\n", b"\r\r", b"\n\r"]),  # blank lines, runs of them
)


@st.composite
def streams(draw: st.DrawFn) -> list[bytes]:
    pieces = draw(st.lists(_PIECE, max_size=25))
    if draw(st.booleans()):
        pieces = [b"\xef\xbb\xbf" + (pieces[0] if pieces else b""), *pieces[1:]]   # a BOM
    mode = draw(st.sampled_from(["pieces", "groups", "bytes"]))
    if mode == "pieces":
        return pieces                                 # one read per piece (the shortcut's case)
    if mode == "groups":                              # runs of whole pieces per read
        cut = draw(st.lists(st.booleans(), min_size=len(pieces), max_size=len(pieces)))
        reads: list[bytes] = []
        for p, c in zip(pieces, cut, strict=True):
            if c or not reads:
                reads.append(p)
            else:
                reads[-1] += p
        return reads
    data = b"".join(pieces)
    # cut anywhere, and often right after a CR (where a CRLF may be split)
    after_cr = [m.end() for m in re.finditer(rb"\r", data)]
    cuts = draw(st.lists(st.integers(0, len(data)), max_size=12))
    if after_cr:
        cuts += draw(st.lists(st.sampled_from(after_cr), max_size=6))
    cuts = sorted(set(cuts))
    bounds = [0, *cuts, len(data)]
    return [data[a:b] for a, b in zip(bounds, bounds[1:], strict=False) if b > a]


@given(streams())
def test_the_feed_dispatches_what_the_standard_dispatches(reads: list[bytes]) -> None:
    assert fed(reads) == reference(reads)


@given(streams())
def test_any_split_gives_the_events_of_the_unsplit_stream(reads: list[bytes]) -> None:
    whole = b"".join(reads)
    assert [d for d, _ in fed(reads)] == [d for d, _ in fed([whole] if whole else [])]


def test_the_cases_the_standard_settles() -> None:
    """Each read here looks like a whole event but is not one for the decoders' state, or is
    one of the issue's cases."""
    cases = [
        [b"event: x\n", b"data: a\n\n"],      # a pending event name (the timer never sees it)
        [b"data: a\n", b"data: b\n\n"],       # pending data: one event "a\nb"
        [b"retry: 5\n", b"data: a\n\n"],      # a pending retry
        [b"da", b"data: a\n\n"],              # a partial line
        [b"data: a\r", b"\ndata: b\n\n"],     # a trailing CR: its LF is the same line end
        [b"data: a\rb\n\n"],                  # a CR inside: two lines
        [b"data: \n\n", b"data: x\n\n"],      # an empty data field: still an event ("message")
    ]
    for reads in cases:
        assert fed(reads) == reference(reads), reads
    assert fed([b"event: x\n", b"data: a\n\n"]) == [("a", 1)]
    # no data line: nothing dispatched (an empty event failed the stream before)
    assert fed([b"retry: 10\n\n", b"event: ping\n\n", b"id: 7\n\n", b"data: a\n\n"]) == \
        [("a", 3)]
    # a leading BOM is dropped, even split across reads (the first token was lost)
    assert fed([b"\xef\xbb\xbfdata: a\n\n"]) == [("a", 0)]
    assert fed([b"\xef", b"\xbb", b"\xbfdata: a\n\n"]) == [("a", 2)]
    assert fed([b"data: a\n\n", b"\xef\xbb\xbfdata: b\n\n"]) == [("a", 0)]   # only a leading one
    # the blank line's CR ends the event in its own read, not the next one
    assert fed([b"data: a\r\r", b"\ndata: b\r\n\r", b"\n"]) == [("a", 0), ("b", 1)]
    assert fed([b"data: a\n\r", b"\n"]) == [("a", 0)]
    # an event the stream ends before its blank line is not dispatched
    assert fed([b"data: [DONE]\n"]) == [] and fed([b"data: [DONE]"]) == []


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
