"""Property tests: the Docker Engine's multiplexed exec stream (``StreamDemux``), the bytes the
docker-exec transport reads from the engine for every command without stdin.

Asserted: any sequence of stdout/stderr frames, split into chunks at any points, decodes to the
same two streams as the frames' payloads joined (headers and payloads may span chunks); an
input cut inside a frame leaves ``pending`` > 0 (the transport then reports the output as
incomplete); a stream byte other than 0–3 raises :class:`StreamProtocolError` and nothing else
is ever raised; the caps keep the first ``cap`` bytes of stdout (and say so) and the last
``cap`` bytes of stderr, as the runner does.
"""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from seat_console.node.engine_exec import FRAME_HEADER, StreamDemux, StreamProtocolError

frames = st.lists(st.tuples(st.sampled_from([1, 2]), st.binary(max_size=300)), max_size=30)


def encode(fs: list[tuple[int, bytes]]) -> bytes:
    return b"".join(FRAME_HEADER.pack(s, len(p)) + p for s, p in fs)


def split(data: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({c % (len(data) + 1) for c in cuts})
    out, last = [], 0
    for p in points + [len(data)]:
        out.append(data[last:p])
        last = p
    return out


@given(frames, st.lists(st.integers(min_value=0), max_size=40))
def test_any_chunking_decodes_the_payloads(fs: list[tuple[int, bytes]], cuts: list[int]) -> None:
    d = StreamDemux()
    for chunk in split(encode(fs), cuts):
        d.feed(chunk)
    d.finish()
    assert d.stdout == b"".join(p for s, p in fs if s == 1)
    assert d.stderr == b"".join(p for s, p in fs if s == 2)
    assert d.pending == 0 and not d.stdout_truncated


@given(st.lists(st.tuples(st.sampled_from([1, 2]), st.binary(min_size=1, max_size=100)),
                min_size=1, max_size=10), st.data())
def test_a_cut_inside_a_frame_is_pending(fs: list[tuple[int, bytes]], data: st.DataObject) -> None:
    whole = encode(fs)
    cut = data.draw(st.integers(min_value=1, max_value=len(whole) - 1))
    ends = set()
    at = 0
    for _s, p in fs:
        at += FRAME_HEADER.size + len(p)
        ends.add(at)
    d = StreamDemux()
    d.feed(whole[:cut])
    assert (d.pending == 0) == (cut in ends)


@given(st.integers(min_value=4, max_value=255), st.binary(max_size=50), frames)
def test_unknown_stream_byte_raises_only_protocol_error(stream: int, payload: bytes,
                                                        before: list[tuple[int, bytes]]) -> None:
    d = StreamDemux()
    with pytest.raises(StreamProtocolError, match="stream byte"):
        d.feed(encode(before) + FRAME_HEADER.pack(stream, len(payload)) + payload)


@given(st.binary(max_size=2000))
def test_arbitrary_bytes_never_raise_anything_else(data: bytes) -> None:
    d = StreamDemux()
    try:
        d.feed(data)
    except StreamProtocolError:
        pass


@given(frames, st.integers(min_value=0, max_value=500))
def test_caps_keep_stdout_head_and_stderr_tail(fs: list[tuple[int, bytes]], cap: int) -> None:
    d = StreamDemux(cap=cap)
    d.feed(encode(fs))
    d.finish()
    out = b"".join(p for s, p in fs if s == 1)
    err = b"".join(p for s, p in fs if s == 2)
    assert d.stdout == out[:cap]
    assert d.stdout_truncated == (len(out) > cap)
    assert d.stderr == (err[-cap:] if cap else b"")
