"""The seat panel: which container holds the seat (resident or probe), since when, its image
identity (image ID vs repo digest; a backport's base digest and content hash), and the engine's
KV cache figures from its startup log (source ``seat``,
``seat_console.sources.seat.SeatReading``). No I/O; unknown values render ``n/a``.
"""

from __future__ import annotations

from datetime import datetime
from typing import ClassVar

from pydantic import BaseModel
from rich.console import Group
from rich.text import Text

from seat_console.core.fmt import gib_unit
from seat_console.widgets.services import _ServicePanel, _short_digest


def _kv_line(reading: BaseModel) -> Text:
    s = getattr(reading, "startup", None)
    t = Text()
    if s is None or (s.kv_cache_tokens is None and s.max_concurrency is None
                     and s.available_kv_cache_bytes is None):
        t.append("KV cache: not in its log yet", style="italic")
        return t
    t.append("KV cache ", style="bold")
    t.append(f"{s.kv_cache_tokens:,} tokens" if s.kv_cache_tokens is not None else "tokens n/a")
    if s.device:
        t.append(f" ({s.device})")
    if s.max_concurrency is not None and s.concurrency_tokens_per_request:
        t.append(f" · max concurrency {s.max_concurrency:.2f}x at "
                 f"{s.concurrency_tokens_per_request:,} tokens")
    if s.available_kv_cache_bytes is not None:
        t.append(f" · {gib_unit(s.available_kv_cache_bytes)} for KV (GiB = 2^30 B)")
    return t


class SeatPanel(_ServicePanel):
    """Who holds the seat now (see the module docstring)."""

    source_name: ClassVar[str] = "seat"
    title: ClassVar[str] = "Seat"
    body_id: ClassVar[str] = "seat-body"

    def time_points(self, reading: BaseModel) -> tuple[datetime | None, ...]:
        """When the holder started (its "since")."""
        return (getattr(reading, "since", None),)

    def _head(self, reading: BaseModel, now: datetime) -> Text:
        from seat_console.sources.seat import SeatReading

        if not isinstance(reading, SeatReading):
            raise TypeError(f"seat panel got {type(reading).__name__}")
        t = Text(no_wrap=True, overflow="ellipsis")
        if reading.role is None:
            t.append("EMPTY: neither the resident nor the probe runs", style="bold red")
            if reading.other:
                t.append(f" ({reading.other})")
            return t
        style = "bold green" if reading.role == "resident" else "bold yellow"
        t.append(reading.role.upper(), style=style)
        t.append(f" {reading.name} holds the seat since "
                 f"{reading.since:%H:%M:%SZ} ({self.rel(reading.since, now)})" if reading.since
                 else f" {reading.name} holds the seat")
        if reading.conflict:
            t.append("  BOTH RUN", style="bold red")
        return t

    def build_compact(self, reading: BaseModel, now: datetime) -> Text | None:
        """Two lines: who holds the seat since when; KV tokens and concurrency."""
        t = self._head(reading, now)
        if getattr(reading, "role", None) is not None:
            t.append("\n")
            t.append_text(_kv_line(reading))
        return t

    def build(self, reading: BaseModel, now: datetime) -> Group:
        """Holder, image identity, backport provenance, KV figures, the other container."""
        head = self._head(reading, now)
        rows = [head]
        if getattr(reading, "role", None) is not None:
            ident = Text()
            ident.append("image ID ", style="bold")
            ident.append(_short_digest(reading.image_id, 16))
            ident.append("  repo digest ", style="bold")
            ident.append(_short_digest(reading.repo_digest) if reading.repo_digest else
                         "n/a (built or loaded locally)")
            rows.append(ident)
            if reading.backport_base:
                bp = Text()
                bp.append("backport ", style="bold")
                bp.append(f"content hash {reading.content_hash or 'n/a'} over base "
                          f"{_short_digest(reading.backport_base)}")
                rows.append(bp)
            rows.append(_kv_line(reading))
            if reading.other:
                rows.append(Text(f"other: {reading.other}", style="dim"))
        return Group(*rows)


__all__ = ["SeatPanel"]
