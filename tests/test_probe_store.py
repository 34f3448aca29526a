"""``RunWriter.append``'s line (pydantic's JSON since 2026-12-03) reads back as the record it
was given, and as the line written before (``json.dumps`` of ``model_dump``) reads back: the
per-request record is unchanged, only float spellings differ; a line stays one line for a
reader that splits on every Unicode line boundary."""

from __future__ import annotations

import json
import math
from datetime import UTC, datetime
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st
from seat_console.core.probe_record import RequestRecord
from seat_console.probe.store import RunWriter, read_requests

_F = st.floats(allow_nan=False)          # NaN is never a reading (and is != itself)
_OPT_F = st.none() | _F
_TEXT = st.text(max_size=30)             # any Unicode: failure texts quote the server
_OPT_T = st.none() | _TEXT
_OPT_I = st.none() | st.integers(-(2**63), 2**63 - 1)

records = st.builds(
    RequestRecord,
    phase=_TEXT, index=st.integers(0, 2**31), api=st.sampled_from(["completions", "chat"]),
    prompt_id=st.integers(0, 10**6),
    sent_at=st.datetimes(timezones=st.just(UTC)), start_s=_F, ok=st.booleans(),
    failure_kind=_OPT_T, failure=_OPT_T, http_status=_OPT_I, ttft_s=_OPT_F, e2e_s=_OPT_F,
    tpot_s=_OPT_F, itl_s=st.lists(_F, max_size=70).map(tuple), stream_end_s=_OPT_F,
    output_tokens=_OPT_I, tokens_streamed=st.integers(0, 10**9), prompt_tokens=_OPT_I,
    output_chunks=st.integers(0, 10**9), events=st.integers(0, 10**9),
    finish_reason=_OPT_T, count_source=_OPT_T, text_chars=st.integers(0, 10**9))


def _old_line(rec: RequestRecord) -> str:
    """The line ``RunWriter.append`` wrote before 2026-12-03."""
    return json.dumps(rec.model_dump(mode="json"), separators=(",", ":"))


@given(st.lists(records, min_size=1, max_size=4))
def test_appended_lines_read_back_as_the_records(recs: list[RequestRecord]) -> None:
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        w = RunWriter(root=Path(d))
        for r in recs:
            w.append(r)
        w.close()
        back = list(read_requests(w.path))
        # every line boundary str.splitlines knows (U+0085, U+2028…), as the evidence reader
        lines = (w.path / "requests.jsonl").read_bytes().decode("utf-8").splitlines()
    assert back == recs
    assert len(lines) == len(recs)
    for r, line in zip(recs, lines, strict=True):
        assert RequestRecord.model_validate_json(_old_line(r)) == RequestRecord.model_validate_json(
            line) == r


def test_a_record_with_odd_values_reads_back(tmp_path: Path) -> None:
    """Tiny and huge floats, an infinite one, non-ASCII and control characters: the same
    record; and the new line is JSON (the old one wrote a bare ``Infinity``)."""
    r = RequestRecord(phase="p", index=0, api="completions", prompt_id=0,
                      sent_at=datetime(2026, 12, 3, 8, 0, 0, 123456, tzinfo=UTC), start_s=1e-05,
                      ok=False, failure_kind="bad-chunk", failure='went down (2 → 1) "q" \x01 😀',
                      ttft_s=math.inf, itl_s=(1e-7, 0.1, 123456789.5, 5e-324, -0.0))
    w = RunWriter(root=tmp_path)
    w.append(r)
    w.close()
    line = (w.path / "requests.jsonl").read_text("utf-8").strip()
    assert list(read_requests(w.path)) == [r]
    assert line == _old_line(r)                          # non-ASCII: written as before
    ascii_rec = r.model_copy(update={"failure": "plain"})
    w2 = RunWriter(root=tmp_path)
    w2.append(ascii_rec)
    w2.close()
    line = (w2.path / "requests.jsonl").read_text("utf-8").strip()
    assert list(read_requests(w2.path)) == [ascii_rec]
    assert json.loads(line)["ttft_s"] == "Infinity"      # strict JSON now
    assert json.loads(line)["itl_s"] == [1e-7, 0.1, 123456789.5, 5e-324, -0.0]
    assert RequestRecord.model_validate_json(_old_line(r)) == r
