"""The probe's record of one request (one JSONL line of a run): written by
:mod:`seat_console.probe`, read back by :mod:`seat_console.evidence`."""

from __future__ import annotations

from datetime import datetime

from seat_console.core.base import Frozen


class RequestRecord(Frozen):
    """What one request did (one JSONL line of a run). Times in seconds.

    ``sent_at``: UTC wall time when it was sent; ``start_s``: perf-counter seconds since the
    phase started; ``ok``; ``failure_kind`` / ``failure`` when not ok; ``http_status``;
    ``ttft_s``, ``e2e_s``, ``tpot_s`` (``None`` when ≤ 1 output token), ``itl_s`` (one value
    per output token after the first chunk), ``stream_end_s``; ``output_tokens``
    (``usage.completion_tokens``; ``None`` if unknown — never 0 for unknown);
    ``tokens_streamed`` (sum over chunks); ``prompt_tokens``; ``output_chunks``; ``events``
    (SSE events with data); ``finish_reason``; ``count_source`` (how tokens per chunk were
    known: ``usage`` / ``logprobs`` / ``text-chunks``); ``text_chars``: characters of output
    text received (the text itself is not kept).
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


__all__ = ["RequestRecord"]
