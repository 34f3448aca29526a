"""The engine's own per-request timing, from the final usage chunk of a stream (outside input).

vLLM started with ``--enable-per-request-metrics`` (``enable_per_request_metrics``,
``vllm/entrypoints/launchers/cli_args.py``, 0.32–0.34) adds ``metrics`` to the final usage chunk
of a stream (``OpenAIServingCompletion`` / ``OpenAIServingChat``'s stream generators): a
``PerRequestMetrics`` (``vllm/entrypoints/generate/base/protocol.py``) built by
``build_per_request_timing_metrics`` (``vllm/entrypoints/generate/base/serving.py``) —
``queue_time_ms`` (queued → scheduled), ``time_to_first_token_ms`` (scheduled → first token:
the queue time is *not* in it), ``generation_time_ms``, ``mean_itl_ms``,
``tokens_per_second``; a field is omitted when its timestamps are missing.

:func:`parse_server_metrics` keeps the two the probe compares with its own figures, in seconds.
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple


class ServerTiming(NamedTuple):
    """The engine's timing of one request, seconds: ``queue_s`` (waiting to be scheduled) and
    ``ttft_s`` (scheduled → first token); ``None`` = not given or not a finite number ≥ 0."""

    queue_s: float | None
    ttft_s: float | None


def _ms(v: Any) -> float | None:
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return None
    x = float(v)
    return x / 1000.0 if math.isfinite(x) and 0.0 <= x <= 1e12 else None


def parse_server_metrics(m: Any) -> ServerTiming | None:
    """A usage chunk's ``metrics`` object → :class:`ServerTiming`; ``None`` when there is none
    (``m`` absent or not an object) or it gives neither figure. Never raises: a figure that is
    not a finite non-negative number of ms is unknown (``None``), never 0."""
    if not isinstance(m, dict):
        return None
    t = ServerTiming(queue_s=_ms(m.get("queue_time_ms")), ttft_s=_ms(m.get("time_to_first_token_ms")))
    return t if t.queue_s is not None or t.ttft_s is not None else None


__all__ = ["ServerTiming", "parse_server_metrics"]
