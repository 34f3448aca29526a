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
