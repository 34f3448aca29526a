"""The one reader of Prometheus text exposition (issue 33): every scrape this console parses —
the engine's ``/metrics`` for the engine panel and ``status`` (:func:`seat_console.sources.engine.
parse_metrics`), the probe's counters around a phase (:mod:`seat_console.probe.engine_counters`)
and the engine's TTFT / ITL histograms (:func:`seat_console.core.engine_timing.parse_histograms`)
— goes through :func:`parse_families`, which is ``prometheus_client``'s own parser
(``prometheus_client.parser.text_string_to_metric_families``, the format of
prometheus.io/docs/instrumenting/exposition_formats) with one size limit and one error rule.

No own tokenizer: what the library accepts is what this console accepts. What it adds:

* a limit (:data:`MAX_TEXT_CHARS`) checked before parsing, so a runaway answer is refused with
  its size, not parsed for minutes;
* every failure of the library on hostile text — it raises ``ValueError`` (sometimes with no
  message), ``IndexError``, ``TypeError``… — becomes one :class:`ValueError` whose message
  starts with the input's name (``"/metrics: not Prometheus text (…)"``).

Values are the library's floats: ``NaN`` / ``+Inf`` / negative pass through as written (the
caller decides: a count that is not a finite number ≥ 0 is unknown, never 0).
"""

from __future__ import annotations

from prometheus_client.metrics_core import Metric
from prometheus_client.parser import text_string_to_metric_families

MAX_TEXT_CHARS = 16 << 20
"""Characters of exposition text parsed at the most (16 Mi; vLLM's ``/metrics`` is ~30 kB with
one engine, a few hundred kB with many label sets)."""


def parse_families(text: str, source: str = "/metrics", *,
                   max_chars: int = MAX_TEXT_CHARS) -> list[Metric]:
    """Every metric family of the Prometheus exposition ``text``, in the text's order, as
    ``prometheus_client`` parses them (:class:`~prometheus_client.metrics_core.Metric`: ``name``
    without ``_total`` for counters, ``type``, ``samples`` with ``name``, ``labels``, float
    ``value``).

    ``source`` names the input in errors (the URL path or file). Raises :class:`ValueError`
    ``"<source>: … characters is above the …-character limit"`` when ``text`` is longer than
    ``max_chars``, and ``"<source>: not Prometheus text (<error>)"`` for any text the parser
    refuses — never another exception type for bad text.
    """
    if len(text) > max_chars:
        raise ValueError(f"{source}: {len(text):,} characters is above the "
                         f"{max_chars:,}-character limit")
    try:
        return list(text_string_to_metric_families(text))
    except Exception as exc:  # noqa: BLE001 - the library's failures on hostile text
        # prometheus_client raises a bare ValueError() for some lines: name the input always
        raise ValueError(f"{source}: not Prometheus text ({type(exc).__name__}: "
                         f"{exc or 'a line it cannot parse'})") from None


__all__ = ["MAX_TEXT_CHARS", "Metric", "parse_families"]
