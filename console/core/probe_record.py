"""The probe's record of one request (one JSONL line of a run): written by
:mod:`seat_console.probe`, read back by :mod:`seat_console.evidence`."""

from __future__ import annotations

import math
from datetime import datetime
from typing import Any

from pydantic import ValidationError

from seat_console.core.base import Frozen
from seat_console.core.untrusted import InputError, load_json

RECORD_INT_DIGITS = 20
"""Longest integer literal a request record's line may hold: every integer the probe writes is a
count, a status or an index (far below 10^20); a longer one was not written by the probe."""
MAX_RECORD_BYTES = 64 << 20
"""Longest request line read back (64 MiB: a 2^20-token stream's ITL list is ~20 MiB)."""


class RequestRecord(Frozen):
    """What one request did (one JSONL line of a run). Times in seconds.

    ``sent_at``: UTC wall time when it was sent; ``start_s``: perf-counter seconds since the
    phase started; ``ok``; ``failure_kind`` / ``failure`` when not ok; ``http_status``;
    ``ttft_s``, ``e2e_s``, ``tpot_s`` (``None`` when ≤ 1 output token or all output arrived
    in one read — :func:`seat_console.core.probe_stats.tpot_of`), ``itl_s`` (one value per
    output token after the first chunk), ``stream_end_s``; ``output_tokens``
    (``usage.completion_tokens``; ``None`` if unknown — never 0 for unknown);
    ``tokens_streamed`` (sum over chunks); ``prompt_tokens``; ``output_chunks``; ``events``
    (SSE events with data); ``finish_reason``; ``count_source`` (how tokens per chunk were
    known: ``usage`` / ``logprobs`` / ``text-chunks``); ``text_chars``: characters of output
    text received (the text itself is not kept); ``server_queue_s`` / ``server_ttft_s``: the
    engine's own queue time and TTFT (scheduled → first token) from the final usage chunk
    (``--enable-per-request-metrics``; :mod:`seat_console.core.server_metrics`), ``None`` when
    it gave none.
    """

    phase: str
    index: int
    api: str
    prompt_id: int
    sent_at: datetime
    start_s: float
    ok: bool
    failure_kind: str | None = None
    failure: str | None = None
    http_status: int | None = None
    ttft_s: float | None = None
    e2e_s: float | None = None
    tpot_s: float | None = None
    itl_s: tuple[float, ...] = ()
    stream_end_s: float | None = None
    output_tokens: int | None = None
    tokens_streamed: int = 0
    prompt_tokens: int | None = None
    output_chunks: int = 0
    events: int = 0
    finish_reason: str | None = None
    count_source: str | None = None
    text_chars: int = 0
    server_queue_s: float | None = None
    server_ttft_s: float | None = None


def parse_record(line: str | bytes, what: str) -> RequestRecord:
    """One ``requests.jsonl`` line read back as a :class:`RequestRecord`.

    ``what`` names the line (``"…/requests.jsonl:12"``). The line is parsed by
    :func:`~seat_console.core.untrusted.load_json` (nesting ≤ 64, no ``NaN``/``Infinity``, no
    integer literal over :data:`RECORD_INT_DIGITS` digits), then validated by the model; a float
    field that reads as non-finite (pydantic takes the strings ``"Infinity"``/``"NaN"``, and a
    400-digit integer becomes ``inf``) or an integer outside ±2^63 is refused too: each would
    raise :class:`OverflowError` in the figures re-derived from the record. Raises
    :class:`~seat_console.core.untrusted.InputError` naming ``what``.
    """
    doc = load_json(line, what, max_bytes=MAX_RECORD_BYTES, max_int_digits=RECORD_INT_DIGITS)
    if not isinstance(doc, dict):
        raise InputError(what, f"a JSON {type(doc).__name__}, not a request record (an object)")
    try:
        rec = RequestRecord.model_validate(doc)
    except ValidationError as exc:
        first = exc.errors()[0] if exc.errors() else {}
        where = ".".join(str(x) for x in first.get("loc", ())) or "record"
        raise InputError(what, f"not a request record ({exc.error_count()} problem(s); "
                               f"{where}: {str(first.get('msg', exc))[:120]})") from None
    for name in RequestRecord.model_fields:
        v: Any = getattr(rec, name)
        for x in (v if isinstance(v, tuple) else (v,)):
            if isinstance(x, float) and not math.isfinite(x):
                raise InputError(what, f"{name} is {x}: not a measured time (the probe records "
                                       "finite seconds)")
            if isinstance(x, int) and not isinstance(x, bool) and not -2**63 <= x < 2**63:
                raise InputError(what, f"{name} is an integer of {len(str(abs(x)))} digits: out "
                                       "of range")
    return rec


__all__ = ["MAX_RECORD_BYTES", "RECORD_INT_DIGITS", "RequestRecord", "parse_record"]
