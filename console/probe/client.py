"""The probe's load client: one streaming request to vLLM's OpenAI-compatible server, timed.

The API is async :mod:`httpx`; under it, by default, the ``httpx-aiohttp`` transport
(:class:`httpx_aiohttp.AiohttpTransport`: aiohttp's C HTTP/1.1 parser, the client ``vllm bench
serve`` uses; ``make_client(..., http="httpcore")`` gives httpx's own pure-Python stack).
Server-Sent Events are read as the WHATWG HTML standard defines them ("Parsing an event
stream", html.spec.whatwg.org/multipage/server-sent-events.html): framing is :mod:`httpx_sse`'s
line and event decoders (events split across or merged within network reads, ``: ping``
comments, fields), with the three places where httpx-sse 0.4 departs from the standard put
right in :class:`SSEFeed`: one leading U+FEFF BOM is dropped (the stdlib ``utf-8-sig``
incremental decoder; UTF-8 split across reads is its job too); a CR ending one read ends its
line *there* (an LF opening the next read is the same line end), where httpx-sse held the line
back to the next read; and a blank line after no ``data:`` line (``event:``, ``id:`` or
``retry:`` alone) dispatches nothing (:meth:`SSEFeed.feed`), where httpx-sse dispatched an
event with empty data that failed the stream as a bad chunk. Each network read gets one arrival
timestamp (``time.perf_counter`` when the read is handed to the client); **an event is stamped
with the time of the read that holds the end of its terminating blank line** (the CR or LF
that ends it) — nothing waits to coalesce reads. An event the stream ends before its blank
line is discarded, as the standard says. Chunk JSON is parsed with :mod:`orjson`. This module
only interprets each event's ``data`` payload (:func:`parse_chunk`) and keeps the clock
(:class:`StreamTimer`).

Definitions (written next to ``vllm bench serve``'s in ``docs/probe.md``; all times in seconds,
``time.perf_counter`` from just before the request is sent):

* **TTFT** — time to the first chunk that carries output tokens (a chat ``role`` chunk with
  ``completion_tokens`` still 0, or a ``choices: []`` usage chunk, is not output);
* **ITL** — for each later output chunk, the gap since the previous output chunk, spread evenly
  over the tokens the chunk carries (a chunk of *k* tokens after a gap *g* adds *k* values
  *g/k*, as speculative decoding produces). The extra tokens of a multi-token *first* chunk add
  no ITL values (they arrived with the first token; the TTFT covers them);
* **E2E latency** — time to the last output chunk (as ``vllm bench serve``: the trailing usage
  chunk and ``[DONE]`` do not move it); ``stream_end_s`` records the end of the stream too;
* **TPOT** — ``(E2E − TTFT) / (output tokens − 1)``, only for output tokens > 1
  (``vllm/benchmarks/serve.py``, ``calculate_metrics``) and only when the output did not all
  arrive in the read of the first token (E2E = TTFT: no decode time the client could see;
  ``bench serve`` would record 0 s) — otherwise ``None``, never 0
  (:func:`seat_console.core.probe_stats.tpot_of`);
* **output tokens** — ``usage.completion_tokens`` of the final usage chunk
  (``stream_options.include_usage``). Tokens per chunk come from the change in the running
  ``usage.completion_tokens`` (``stream_options.continuous_usage_stats``, which vLLM supports),
  else from the chunk's ``logprobs`` token list, else 1 for a chunk with non-empty text.

A request **fails** (``ok = False``, with ``failure_kind`` and a one-sentence ``failure``) on:
a non-200 status (``http``); a connect/read/overall timeout, including a stall with no bytes for
``read_timeout_s`` (``timeout``); a ``data: {"error": …}`` event in an HTTP 200 stream
(``error-event``); a stream that ends without ``data: [DONE]``, or a connection that closes
mid-body (``truncated``); no final usage
chunk, so the output token count is unknown (``no-usage``); a chunk that is not the JSON this
API sends, any event after ``data: [DONE]``, a running ``usage.completion_tokens`` above the
request's ``max_tokens``, or an SSE line or event above :data:`MAX_EVENT_CHARS` (``bad-chunk``);
a wrong content type (``not-sse``); a transport error, including a connection closed before any
response head (``transport``).
"""

from __future__ import annotations

import asyncio
import codecs
import math
import socket
import time
import weakref
from collections.abc import Coroutine, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, NamedTuple, TypeVar

import httpx
import orjson
from httpx_sse._decoders import SSEDecoder, SSELineDecoder
from pydantic import Field
from seat_console.core.base import Frozen, utcnow
from seat_console.core.probe_record import RequestRecord
from seat_console.core.server_metrics import ServerTiming, parse_server_metrics
from seat_console.node.engine_client import CHAT_COMPLETIONS, COMPLETIONS

Api = Literal["completions", "chat"]
"""Which endpoint: ``/v1/completions`` (``prompt``) or ``/v1/chat/completions`` (``messages``)."""

API_PATHS: dict[str, str] = {"completions": COMPLETIONS, "chat": CHAT_COMPLETIONS}
"""URL path per :data:`Api` (the engine's paths: :mod:`seat_console.node.engine_client`)."""

MAX_ERROR_TEXT = 500
"""At most this many characters of a server's error body are kept in a record."""

MAX_STREAM_TOKENS = 1 << 20
"""Output tokens one stream may report (``usage.completion_tokens``) when the request's own
``max_tokens`` is not known to the timer: a count above it fails the request as a bad chunk
before the ITL list grows by it (a jump to 2^40 raised ``MemoryError``, issue 31)."""

MAX_EVENT_CHARS = 16 << 20
"""Characters one SSE line or event may hold while it is still incomplete (16 Mi; vLLM's token
chunk is ~300 characters): a stream that never ends its line or event fails as a bad chunk
instead of growing the decoders' buffers without bound."""


class ChunkError(ValueError):
    """An SSE ``data`` payload is not a chunk this API sends; the message quotes (a prefix of)
    the payload and says what was wrong."""


class Chunk(NamedTuple):
    """One parsed ``data`` payload (a named tuple: immutable, and cheap to build once per
    streamed token).

    ``kind``: ``"done"`` (``[DONE]``), ``"error"`` (``{"error": …}``; ``error`` holds its
    message), ``"usage"`` (``choices: []`` with ``usage``: not a token), ``"choice"`` (a chunk
    with a choice: ``text`` is the completion text or the chat delta's content);
    ``completion_tokens``: ``usage.completion_tokens`` when the chunk carries usage (running
    total with ``continuous_usage_stats``, the final total on the usage chunk), else ``None``;
    ``prompt_tokens``: likewise; ``logprob_tokens``: how many tokens the chunk's ``logprobs``
    lists, ``None`` without logprobs; ``finish_reason``: the choice's, or ``None``;
    ``server``: the engine's per-request timing on the usage chunk
    (:func:`~seat_console.core.server_metrics.parse_server_metrics`), else ``None``.
    """

    kind: Literal["done", "error", "usage", "choice"]
    text: str = ""
    completion_tokens: int | None = None
    prompt_tokens: int | None = None
    logprob_tokens: int | None = None
    finish_reason: str | None = None
    error: str | None = None
    server: ServerTiming | None = None


def _clip(s: str, n: int = 80) -> str:
    return s if len(s) <= n else s[:n] + "…"


def _count(v: Any, what: str, data: str) -> int | None:
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, int) or v < 0:
        raise ChunkError(f"{what} is {v!r}, not a non-negative integer, in chunk "
                         f"{_clip(data)!r}")
    return v


def parse_chunk(data: str) -> Chunk:
    """Interpret one SSE event's ``data`` (vLLM's completions or chat completions stream).

    Accepts ``[DONE]``; ``{"error": {...} | str}``; ``{"choices": [], "usage": {...}}``; and
    ``{"choices": [{"text" | "delta": {"content"}, "logprobs", "finish_reason"}], "usage"?}``.
    Raises :class:`ChunkError` (quoting the payload) for anything else: not JSON, not an
    object, ``choices`` not a list, ``usage`` counts that are not non-negative integers, a
    ``choices: []`` chunk without usage. Never raises another exception type.
    """
    s = data.strip()
    if s == "[DONE]":
        return Chunk(kind="done")
    try:
        # orjson: RFC 8259 JSON only (NaN/Infinity, integers beyond 64 bits, lone surrogates
        # and nesting deeper than 1,024 are JSONDecodeError, a ValueError)
        obj = orjson.loads(s)
    except (ValueError, RecursionError) as exc:
        raise ChunkError(f"chunk is not JSON ({type(exc).__name__}): {_clip(data)!r}") from None
    if not isinstance(obj, dict):
        raise ChunkError(f"chunk is JSON but not an object: {_clip(data)!r}")
    if "error" in obj and obj["error"] is not None:
        err = obj["error"]
        msg = err.get("message") if isinstance(err, dict) else err
        return Chunk(kind="error", error=_clip(str(msg if msg is not None else err),
                                               MAX_ERROR_TEXT))
    usage = obj.get("usage")
    ctoks = ptoks = None
    if usage is not None:
        if not isinstance(usage, dict):
            raise ChunkError(f"usage is not an object in chunk {_clip(data)!r}")
        ctoks = usage.get("completion_tokens")
        if type(ctoks) is not int or ctoks < 0:   # the usual case costs two tests, no call
            ctoks = _count(ctoks, "usage.completion_tokens", data)
        ptoks = usage.get("prompt_tokens")
        if type(ptoks) is not int or ptoks < 0:
            ptoks = _count(ptoks, "usage.prompt_tokens", data)
    choices = obj.get("choices")
    if not isinstance(choices, list):
        raise ChunkError(f"chunk has no 'choices' list: {_clip(data)!r}")
    if not choices:
        if usage is None or ctoks is None:
            raise ChunkError(f"chunk has 'choices: []' but no usage.completion_tokens: "
                             f"{_clip(data)!r}")
        return Chunk(kind="usage", completion_tokens=ctoks, prompt_tokens=ptoks,
                     server=parse_server_metrics(obj.get("metrics")))
    c0 = choices[0]
    if not isinstance(c0, dict):
        raise ChunkError(f"choices[0] is not an object in chunk {_clip(data)!r}")
    if "delta" in c0:
        delta = c0["delta"]
        if not isinstance(delta, dict):
            raise ChunkError(f"choices[0].delta is not an object in chunk {_clip(data)!r}")
        text = delta.get("content")
    else:
        text = c0.get("text")
    if text is not None and not isinstance(text, str):
        raise ChunkError(f"the chunk's text is {type(text).__name__}, not a string: "
                         f"{_clip(data)!r}")
    lp = c0.get("logprobs")
    lp_n: int | None = None
    if isinstance(lp, dict):
        toks = lp.get("tokens") if "tokens" in lp else lp.get("content")
        if isinstance(toks, list):
            lp_n = len(toks)
    fr = c0.get("finish_reason")
    # positional: Chunk(kind, text, completion_tokens, prompt_tokens, logprob_tokens,
    # finish_reason) — a keyword call costs more, once per token
    return Chunk("choice", text or "", ctoks, ptoks, lp_n, fr if isinstance(fr, str) else None)


class StreamFailure(Exception):
    """The stream shows the request failed: ``kind`` (a :class:`RequestRecord` failure kind)
    and ``reason`` (one sentence)."""

    def __init__(self, kind: str, reason: str) -> None:
        super().__init__(reason)
        self.kind = kind
        self.reason = reason


@dataclass(slots=True)
class StreamTimer:
    """Pure accumulator of one stream's chunks and their arrival times (seconds since send).

    Feed each event's ``data`` with :meth:`feed` (or its UTF-8 bytes with
    :meth:`feed_payload`, the same result); it raises :class:`StreamFailure` for an error
    event or an unparseable chunk. :meth:`result` checks the end state ([DONE] seen, usage
    seen) and returns the timing fields of a :class:`RequestRecord`. Slotted: its fields are
    read and written once per streamed token. ``max_tokens``: the most output tokens the
    request allowed (its ``max_tokens``; default :data:`MAX_STREAM_TOKENS`); a running
    ``usage.completion_tokens`` above it is a bad chunk (it would add that many ITL values).
    Any event after ``[DONE]`` is a bad chunk.
    """

    ttft_s: float | None = None
    last_token_s: float | None = None
    itl_s: list[float] = field(default_factory=list)
    output_chunks: int = 0
    events: int = 0
    tokens_streamed: int = 0
    running_tokens: int | None = None
    final_tokens: int | None = None
    prompt_tokens: int | None = None
    finish_reason: str | None = None
    count_source: str | None = None
    done: bool = False
    text_chars: int = 0
    max_tokens: int = MAX_STREAM_TOKENS
    server: ServerTiming | None = None

    def feed(self, data: str, t: float) -> None:
        """One event payload arriving ``t`` seconds after the request was sent."""
        self.events += 1
        if self.done:
            raise StreamFailure("bad-chunk", f"an event after [DONE]: {_clip(data)!r}")
        try:
            ch = parse_chunk(data)
        except ChunkError as exc:
            raise StreamFailure("bad-chunk", str(exc)) from None
        if ch.kind == "done":
            self.done = True
            return
        if ch.kind == "error":
            raise StreamFailure("error-event", f"error event in the HTTP 200 stream: {ch.error}")
        if ch.kind == "usage":
            if ch.prompt_tokens is not None:
                self.prompt_tokens = ch.prompt_tokens
            self.final_tokens = ch.completion_tokens
            self.server = ch.server
            return
        self._choice(ch.text, ch.completion_tokens, ch.prompt_tokens, ch.logprob_tokens,
                     ch.finish_reason, t)

    def feed_payload(self, raw: bytes, t: float) -> None:
        """One event payload as bytes (the ``X`` of a ``data: X`` line, UTF-8): the same as
        ``feed(raw.decode("utf-8", "replace"), t)`` — same state, same failures, same words —
        without the decode, the strip and the :class:`Chunk` for the chunk vLLM sends for
        every token (valid UTF-8 JSON: an object with no ``error``, ``usage`` absent or with
        integer counts, one or more ``choices`` whose first is an object with ``text`` or a
        ``delta`` object, a string or null). Anything else — ``[DONE]``, the usage chunk, an
        error, a malformed chunk, invalid UTF-8 (which :mod:`orjson` refuses on bytes), an
        event after ``[DONE]`` — goes to :meth:`feed`; ``tests/test_probe_ssefeed.py`` holds
        the two to the same result on arbitrary payloads."""
        if self.done:
            return self.feed(raw.decode("utf-8", "replace"), t)
        try:
            obj = orjson.loads(raw)
        except ValueError:
            return self.feed(raw.decode("utf-8", "replace"), t)
        # the checks parse_chunk makes, in the order it makes them; any doubt: feed()
        if type(obj) is not dict or obj.get("error") is not None:
            return self.feed(raw.decode("utf-8", "replace"), t)
        usage = obj.get("usage")
        ctoks = ptoks = None
        if usage is not None:
            if type(usage) is not dict:
                return self.feed(raw.decode("utf-8", "replace"), t)
            ctoks = usage.get("completion_tokens")
            ptoks = usage.get("prompt_tokens")
            if ((ctoks is not None and (type(ctoks) is not int or ctoks < 0))
                    or (ptoks is not None and (type(ptoks) is not int or ptoks < 0))):
                return self.feed(raw.decode("utf-8", "replace"), t)
        choices = obj.get("choices")
        if type(choices) is not list or not choices or type(c0 := choices[0]) is not dict:
            return self.feed(raw.decode("utf-8", "replace"), t)
        if "delta" in c0:
            delta = c0["delta"]
            if type(delta) is not dict:
                return self.feed(raw.decode("utf-8", "replace"), t)
            text = delta.get("content")
        else:
            text = c0.get("text")
        if text is not None and type(text) is not str:
            return self.feed(raw.decode("utf-8", "replace"), t)
        lp = c0.get("logprobs")
        lp_n: int | None = None
        if isinstance(lp, dict):
            toks = lp.get("tokens") if "tokens" in lp else lp.get("content")
            if isinstance(toks, list):
                lp_n = len(toks)
        fr = c0.get("finish_reason")
        self.events += 1
        self._choice(text or "", ctoks, ptoks, lp_n, fr if isinstance(fr, str) else None, t)

    def _choice(self, text: str, ctoks: int | None, ptoks: int | None, lp_n: int | None,
                fr: str | None, t: float) -> None:
        """A choice chunk (parsed): its tokens, counts and time."""
        if ptoks is not None:
            self.prompt_tokens = ptoks
        # how many output tokens does it carry?
        if ctoks is not None:
            prev = self.running_tokens or 0
            n = ctoks - prev
            if n < 0:
                raise StreamFailure("bad-chunk", f"usage.completion_tokens went down "
                                                 f"({prev} → {ctoks})")
            if ctoks > self.max_tokens:
                raise StreamFailure("bad-chunk", f"usage.completion_tokens {ctoks:,} in the "
                                                 f"stream is above the {self.max_tokens:,} "
                                                 "output tokens the request allowed "
                                                 "(max_tokens); not a count this run can hold")
            self.running_tokens = ctoks
            self.count_source = "usage"
        elif lp_n is not None:
            n = lp_n
            self.count_source = self.count_source or "logprobs"
        else:
            n = 1 if text else 0
            self.count_source = self.count_source or "text-chunks"
        if fr is not None:
            self.finish_reason = fr
        self.text_chars += len(text)
        if n == 0:
            return
        self.output_chunks += 1
        self.tokens_streamed += n
        if self.ttft_s is None:
            self.ttft_s = t
        else:
            assert self.last_token_s is not None
            gap = t - self.last_token_s
            if gap < 0.0:          # max(gap, 0.0) without the call (once per token)
                gap = 0.0
            if n == 1:
                self.itl_s.append(gap)
            else:
                self.itl_s.extend([gap / n] * n)
        self.last_token_s = t

    def result(self) -> dict[str, Any]:
        """Timing fields for a completed stream; raises :class:`StreamFailure` for a stream cut
        before ``[DONE]`` (``truncated``), without a final usage chunk (``no-usage``) or without
        any output token (``no-output``)."""
        if not self.done:
            raise StreamFailure("truncated", f"the stream ended without data: [DONE] after "
                                             f"{self.events} event(s), {self.tokens_streamed} "
                                             "token(s)")
        if self.final_tokens is None:
            raise StreamFailure("no-usage", "no final usage chunk (choices: []), so the output "
                                            "token count is unknown; the server must honour "
                                            "stream_options.include_usage")
        if self.ttft_s is None or self.last_token_s is None:
            raise StreamFailure("no-output", f"no output token in {self.events} event(s)")
        out = self.final_tokens
        span = self.last_token_s - self.ttft_s
        tpot = span / (out - 1) if out > 1 and span > 0.0 else None  # 0 s: one read, not 0
        return {"ttft_s": self.ttft_s, "e2e_s": self.last_token_s, "tpot_s": tpot,
                "itl_s": list(self.itl_s), "output_tokens": out,
                "prompt_tokens": self.prompt_tokens, "finish_reason": self.finish_reason,
                "count_source": self.count_source,
                "server_queue_s": self.server.queue_s if self.server else None,
                "server_ttft_s": self.server.ttft_s if self.server else None}


# -- records --------------------------------------------------------------------------------
class RequestSpec(Frozen):
    """One request to send: ``phase``/``index`` (its place), ``api``, ``model`` (served model
    name), ``prompt`` (text; chat sends it as one user message), ``max_tokens`` (output
    length), ``ignore_eos`` (vLLM's extension: generate exactly ``max_tokens``),
    ``prompt_id`` (index into the prompt set)."""

    phase: str
    index: int
    api: Api = "completions"
    model: str
    prompt: str
    prompt_id: int = 0
    max_tokens: int = Field(ge=1)
    ignore_eos: bool = True

    def payload(self) -> dict[str, Any]:
        """The JSON body (streaming, usage in every chunk and at the end, temperature 0)."""
        body: dict[str, Any] = {
            "model": self.model, "max_tokens": self.max_tokens, "stream": True,
            "stream_options": {"include_usage": True, "continuous_usage_stats": True},
            "temperature": 0.0, "ignore_eos": self.ignore_eos,
        }
        if self.api == "chat":
            body["messages"] = [{"role": "user", "content": self.prompt}]
        else:
            body["prompt"] = self.prompt
        return body


class SSEFeed:
    """One stream's bytes → events → :class:`StreamTimer`, shared by both stream paths (the
    httpx one in :func:`run_request` and the protocol one in :mod:`.hotpath`), so both split and
    count identically.

    Framing is :mod:`httpx_sse`'s own line and event decoders, fed as its
    ``EventSource.aiter_sse`` feeds them, put right where they depart from the WHATWG standard
    (the module docstring): one leading BOM dropped (the stdlib ``utf-8-sig`` incremental
    decoder, which also joins multi-byte UTF-8 split across reads, U+FFFD for invalid bytes),
    CR / LF / CRLF line ends at any read boundary (a CR that ends a read ends its line in that
    read; an LF opening the next read is skipped as the rest of the CRLF), no event without a
    ``data:`` line ("If the data buffer is an empty string, set the data buffer and the event
    type buffer to the empty string and return", WHATWG "dispatch the event": the pending
    event type and retry are dropped, the last event ID stays). One read holding exactly one
    whole event skips the decoders for the same result (:meth:`feed`). :meth:`feed` takes one network read
    (bytes) and its arrival time ``t`` (seconds since send): every event whose terminating
    blank line ends in that read is stamped ``t``. :meth:`finish` ends the body: an event
    without its blank line is discarded (the standard). Both raise :class:`StreamFailure` as
    :meth:`StreamTimer.feed` does, and ``bad-chunk`` for a line or event still incomplete past
    :data:`MAX_EVENT_CHARS`. ``max_tokens``: the request's (:attr:`StreamTimer.max_tokens`).
    """

    __slots__ = ("_cr", "_event_chars", "_events", "_idle", "_line_chars", "_lines", "_utf8",
                 "timer")

    def __init__(self, max_tokens: int = MAX_STREAM_TOKENS) -> None:
        self.timer = StreamTimer(max_tokens=max_tokens)
        self._lines, self._events = SSELineDecoder(), SSEDecoder()
        self._utf8 = codecs.getincrementaldecoder("utf-8-sig")("replace")
        self._idle = False   # the first read goes through the decoders: a BOM is theirs to drop
        self._cr = False     # the last character decoded was a CR that ended a line
        self._event_chars = 0   # characters of the lines since the last blank line
        self._line_chars = 0    # characters of the line not yet ended

    def feed(self, raw: bytes, t: float) -> None:
        """One read's bytes, arrived at ``t``.

        A shortcut for the read vLLM sends for every token: a read that is exactly one
        ``data: X\\n\\n`` event (no other line break, no CR), reaching decoders that hold
        nothing (no partial line, no pending ``event`` / ``data`` / ``retry`` field, no CR
        whose LF may follow, the stream's first bytes already seen), is handed to the timer as
        ``X`` directly — what the decoders make of it (the lines ``data: X`` and ``""``: one
        event whose data is ``X``, an empty ``X`` included), leaving them as idle as it found
        them; it saves ~1.5 µs of the ~5 µs per token. The test is made on the bytes, with the
        UTF-8 decoder holding nothing either (an ASCII ``\\n\\n`` ends the read, so the decoder
        would hold nothing after it, and the bytes of ``X`` are what it would decode): ``X``
        goes to the timer as bytes (:meth:`StreamTimer.feed_payload`, the same result as the
        decoded text). Every other read goes through the decoders;
        ``tests/test_probe_ssefeed.py`` checks the two against each other, and both against a
        reading of the standard written out in the test, on arbitrary streams split
        anywhere."""
        if (self._idle and raw[-2:] == b"\n\n" and raw[:6] == b"data: "
                and raw.count(b"\n") == 2 and b"\r" not in raw):
            self.timer.feed_payload(raw[6:-2], t)
            return
        text = self._utf8.decode(raw)
        if not text:   # nothing decoded, maybe the start of a character held back
            self._idle = self._idle and not self._utf8.getstate()[0]
            return
        self._idle = False
        if self._cr:   # the last read ended in a CR: an LF here is the rest of that line end
            self._cr = False
            if text[0] == "\n":
                text = text[1:]
                if not text:
                    self._idle = self._quiet()
                    return
        if text[-1] == "\r":   # the line ends here, in this read (httpx-sse held it back):
            text += "\n"      # made a CRLF, one line end however the text before it ends
            self._cr = True
        timer = self.timer
        events = self._events
        decode = SSEDecoder.decode
        held = self._event_chars
        for line in self._lines.decode(text):
            if line:                 # a field or a comment: httpx-sse's; it never dispatches
                decode(events, line)
                held += len(line)
            elif events._data:       # a blank line after a data line: the event, dispatched
                held = 0
                timer.feed(decode(events, line).data, t)  # type: ignore[union-attr]
            else:                    # a blank line after no data line: nothing (the standard)
                held = 0
                events._event = ""
                events._retry = None
        if self._quiet():        # nothing held: the shortcut may take the next read
            self._idle, self._event_chars, self._line_chars = True, 0, 0
            return
        # what the decoders hold, bounded: the lines since the last blank line (a comment
        # line over-counts) and the line not yet ended
        end = max(text.rfind("\n"), text.rfind("\r"))
        line = self._line_chars = (len(text) - end - 1) if end >= 0 else \
            self._line_chars + len(text)
        self._event_chars = held
        if held + line > MAX_EVENT_CHARS:
            raise StreamFailure("bad-chunk", f"an SSE event is still incomplete after "
                                             f"{held + line:,} characters (the limit is "
                                             f"{MAX_EVENT_CHARS:,}): not a stream of chunks")

    def _quiet(self) -> bool:
        """The decoders hold nothing: no partial line, no pending field, no CR whose LF may
        follow, no partial character (httpx-sse's decoder state, read; :meth:`feed` writes
        only the event type and retry it drops for a blank line after no data line)."""
        lines, events = self._lines, self._events
        return (not self._cr and not lines.buffer and not events._data and not events._event
                and events._retry is None and not self._utf8.getstate()[0])

    def finish(self, t: float) -> None:
        """The body ended at ``t``: whatever the decoders still hold — a partial line, an event
        without its terminating blank line, a cut character — is discarded ("If the file ends
        in the middle of an event, before the final empty line, the incomplete event is not
        dispatched", WHATWG); nothing is fed, so a ``data: [DONE]`` the stream cut before its
        blank line leaves the stream truncated."""
        self._utf8.reset()
        self._lines.flush()
        self._events = SSEDecoder()
        self._cr, self._idle, self._event_chars, self._line_chars = False, False, 0, 0


def request_common(spec: RequestSpec, sent_at: Any, start_s: float) -> dict[str, Any]:
    """The identity fields of ``spec``'s :class:`RequestRecord` (``sent_at``: UTC datetime;
    ``start_s``: seconds from the phase origin to the send)."""
    return {"phase": spec.phase, "index": spec.index, "api": spec.api,
            "prompt_id": spec.prompt_id, "sent_at": sent_at, "start_s": start_s}


def failed_record(common: dict[str, Any], timer: StreamTimer, status: int | None,
                  end_s: float, kind: str, reason: str) -> RequestRecord:
    """A failed request's record: what ``timer`` saw up to the failure, ``end_s`` seconds
    after the send."""
    return RequestRecord(**common, ok=False, failure_kind=kind, failure=reason,
                         http_status=status, stream_end_s=end_s,
                         tokens_streamed=timer.tokens_streamed, output_tokens=timer.final_tokens,
                         prompt_tokens=timer.prompt_tokens, output_chunks=timer.output_chunks,
                         events=timer.events, ttft_s=timer.ttft_s,
                         finish_reason=timer.finish_reason, count_source=timer.count_source,
                         text_chars=timer.text_chars)


def ok_record(common: dict[str, Any], timer: StreamTimer, status: int | None, end_s: float,
              fields: dict[str, Any]) -> RequestRecord:
    """A completed request's record (``fields``: :meth:`StreamTimer.result`)."""
    return RequestRecord(**common, ok=True, http_status=status, stream_end_s=end_s,
                         tokens_streamed=timer.tokens_streamed, output_chunks=timer.output_chunks,
                         events=timer.events, text_chars=timer.text_chars, **fields)


@dataclass(frozen=True)
class ClientTimeouts:
    """Timeouts (seconds): ``connect_s``; ``read_s`` — longest silence between bytes (a stall
    past it fails the request); ``total_s`` — the whole request."""

    connect_s: float = 10.0
    read_s: float = 60.0
    total_s: float = 600.0

    def httpx(self) -> httpx.Timeout:
        """As an :class:`httpx.Timeout` (write and pool timeouts = ``read_s``)."""
        return httpx.Timeout(connect=self.connect_s, read=self.read_s, write=self.read_s,
                             pool=self.total_s)


HttpStack = Literal["aiohttp", "httpcore"]
"""The HTTP stack under the httpx API: ``"aiohttp"`` (default; :mod:`httpx_aiohttp`'s transport
on aiohttp's C HTTP parser) or ``"httpcore"`` (httpx's own transport: httpcore + h11, pure
Python, about twice the client CPU per streamed token; ``docs/benchmarks.md``)."""


def make_client(base_url: str, timeouts: ClientTimeouts, max_connections: int, *,
                http: HttpStack = "aiohttp") -> httpx.AsyncClient:
    """An :class:`httpx.AsyncClient` for ``base_url`` with room for ``max_connections``
    concurrent streams (keep-alive pool of the same size) over the ``http`` stack
    (:data:`HttpStack`); TLS certificates are verified for ``https://`` URLs. Raises
    :class:`ValueError` for an unknown ``http``."""
    # idle connections are dropped after 2 s, before uvicorn's (vLLM's server) 5 s keep-alive
    # timeout closes them under us: a request sent on a connection the server is closing would
    # fail as a transport error that is not the engine's
    limits = httpx.Limits(max_connections=max_connections,
                          max_keepalive_connections=max_connections, keepalive_expiry=2.0)
    # a plain-HTTP endpoint never uses TLS: skip building a verifying SSL context (loading the
    # CA bundle costs ~0.1 s of CPU); an https:// endpoint is always verified
    verify = not base_url.lower().startswith("http://")
    transport: httpx.AsyncBaseTransport
    if http == "aiohttp":
        from httpx_aiohttp import AiohttpTransport

        # aiohttp sets TCP_NODELAY on every connection itself (aiohttp.tcp_helpers)
        transport = AiohttpTransport(verify=verify, limits=limits, trust_env=False)
    elif http == "httpcore":
        # TCP_NODELAY: httpcore writes the request head and body in two send() calls; with
        # Nagle's algorithm the second waits for the first's delayed ACK (up to 40 ms on
        # Linux), which serialised request starts (measured: ~18 ms per send on the lab)
        transport = httpx.AsyncHTTPTransport(
            verify=verify, limits=limits,
            socket_options=[(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)])
    else:
        raise ValueError(f"http stack {http!r} is not one of aiohttp, httpcore")
    return httpx.AsyncClient(base_url=base_url.rstrip("/"), timeout=timeouts.httpx(),
                             transport=transport, follow_redirects=False, trust_env=False)


T = TypeVar("T")


def run_async(coro: Coroutine[Any, Any, T]) -> T:
    """Run ``coro`` to its end in a new event loop, as :func:`asyncio.run` does (Ctrl-C cancels
    it), on :mod:`uvloop`'s loop when uvloop is installed (its C event loop costs the load
    client about a third less CPU per streamed token than asyncio's; ``docs/benchmarks.md``).
    Returns the coroutine's result; its exceptions propagate."""
    try:
        import uvloop
    except ImportError:  # pragma: no cover - uvloop is a dependency on Linux
        return asyncio.run(coro)
    return uvloop.run(coro)


_SSE_HEADERS = {"Accept": "text/event-stream", "Cache-Control": "no-store",
                # an event stream must not be compressed (a compressor holds events back)
                "Accept-Encoding": "identity", "Content-Type": "application/json"}

_URLS: weakref.WeakKeyDictionary[httpx.AsyncClient, dict[str, httpx.URL]] = (
    weakref.WeakKeyDictionary())


def _url(client: httpx.AsyncClient, api: str) -> httpx.URL:
    """The absolute URL of ``api`` on ``client``'s base URL, parsed once per client (httpx
    re-parses and merges a relative URL on every request: ~0.1 ms of CPU each)."""
    per = _URLS.setdefault(client, {})
    u = per.get(api)
    if u is None:
        u = per[api] = client.base_url.join(client.base_url.raw_path.decode("ascii").rstrip("/")
                                            + API_PATHS[api])
    return u


def _aiohttp_failure(exc: BaseException, timeouts: ClientTimeouts, mid_stream: bool
                     ) -> tuple[str, str] | None:
    """(failure kind, reason) for an httpx error raised by the aiohttp transport, read from the
    aiohttp exception it wraps (``httpx_aiohttp`` maps, e.g., a reset connection to
    ``ConnectTimeout``); ``None`` when ``exc`` does not wrap an aiohttp error."""
    cause = exc.__cause__
    try:
        import aiohttp
    except ImportError:  # pragma: no cover
        return None
    if not isinstance(cause, aiohttp.ClientError):
        return None
    words = f"{type(cause).__name__}: {cause}"
    if isinstance(cause, aiohttp.ConnectionTimeoutError):
        return "timeout", f"could not connect within {timeouts.connect_s:g} s"
    if isinstance(cause, aiohttp.SocketTimeoutError):
        return "timeout", f"the stream stalled: no bytes for {timeouts.read_s:g} s"
    if isinstance(cause, aiohttp.ServerTimeoutError):
        return "timeout", words
    if isinstance(cause, aiohttp.ClientPayloadError):
        return "truncated", f"the connection closed mid-stream: {words}"
    if mid_stream and isinstance(cause, aiohttp.ClientConnectionError):
        return "truncated", f"the connection closed mid-stream: {words}"
    return "transport", words


async def run_request(client: httpx.AsyncClient, spec: RequestSpec, *,
                      timeouts: ClientTimeouts = ClientTimeouts(),
                      phase_t0: float | None = None,
                      headers: Mapping[str, str] | None = None) -> RequestRecord:
    """Send ``spec`` over ``client`` and time its stream; never raises for a failed request.

    Returns a :class:`RequestRecord` (``ok = False`` with the reason for every failure listed in
    the module docstring). ``phase_t0``: perf-counter origin for ``start_s`` (default: now).
    :class:`asyncio.CancelledError` propagates (Ctrl-C): the caller records the request as
    interrupted.
    """
    sent_at = utcnow()
    t0 = time.perf_counter()
    base = phase_t0 if phase_t0 is not None else t0
    feed = SSEFeed(spec.max_tokens)
    timer = feed.timer
    status: int | None = None
    common = request_common(spec, sent_at, t0 - base)

    def failed(kind: str, reason: str) -> RequestRecord:
        return failed_record(common, timer, status, time.perf_counter() - t0, kind, reason)

    try:
        async with asyncio.timeout(timeouts.total_s):
            async with client.stream("POST", _url(client, spec.api),
                                     content=orjson.dumps(spec.payload()),
                                     headers={**(headers or {}), **_SSE_HEADERS}) as resp:
                status = resp.status_code
                if status != 200:
                    body = (await resp.aread()).decode("utf-8", "replace")
                    return failed("http", f"HTTP {status}: {_clip(body.strip(), MAX_ERROR_TEXT)}")
                ctype = resp.headers.get("content-type", "").partition(";")[0]
                if "text/event-stream" not in ctype:
                    return failed("not-sse", f"not an event stream: the response's Content-Type "
                                             f"is {ctype!r}, not text/event-stream")
                body_iter = (resp.aiter_bytes() if "content-encoding" in resp.headers
                             else resp.aiter_raw())
                # read on to the end of the body after [DONE] (an event after it is a bad
                # chunk): a fully read response returns its connection to the pool; breaking
                # off would close it and every request would pay a new connect
                async for raw in body_iter:
                    feed.feed(raw, time.perf_counter() - t0)
                feed.finish(time.perf_counter() - t0)
        end = time.perf_counter() - t0
        fields = timer.result()
    except StreamFailure as exc:
        return failed(exc.kind, exc.reason)
    except TimeoutError:
        return failed("timeout", f"no complete answer within the request timeout of "
                                 f"{timeouts.total_s:g} s")
    except httpx.HTTPError as exc:
        mapped = _aiohttp_failure(exc, timeouts, mid_stream=status is not None)
        if mapped is not None:
            return failed(*mapped)
        if isinstance(exc, httpx.TimeoutException):
            what = {"ConnectTimeout": f"could not connect within {timeouts.connect_s:g} s",
                    "ReadTimeout": f"the stream stalled: no bytes for {timeouts.read_s:g} s",
                    "WriteTimeout": f"could not send the request within {timeouts.read_s:g} s",
                    "PoolTimeout": "no free connection in the client's pool"}
            return failed("timeout", what.get(type(exc).__name__,
                                              f"{type(exc).__name__}: {exc}"))
        if isinstance(exc, httpx.RemoteProtocolError) and status is not None:
            return failed("truncated", f"the connection closed mid-stream: {exc}")
        return failed("transport", f"{type(exc).__name__}: {exc}")
    return ok_record(common, timer, status, end, fields)


def finite(x: float | None) -> bool:
    """Whether ``x`` is a finite number (not ``None``/NaN/inf)."""
    return x is not None and math.isfinite(x)


__all__ = [
    "API_PATHS",
    "Api",
    "Chunk",
    "ChunkError",
    "ClientTimeouts",
    "HttpStack",
    "RequestRecord",
    "RequestSpec",
    "MAX_EVENT_CHARS",
    "MAX_STREAM_TOKENS",
    "SSEFeed",
    "StreamFailure",
    "StreamTimer",
    "failed_record",
    "finite",
    "make_client",
    "ok_record",
    "parse_chunk",
    "request_common",
    "run_async",
    "run_request",
]
