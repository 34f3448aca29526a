"""The display rules, in one place: byte counts (GiB), durations (:func:`fmt_duration`) and
times relative to now (:func:`fmt_when`). No I/O, no pydantic (the first frame imports it).

Byte counts: GiB = 2^30 B, two decimals, truncated toward zero.

Code carries bytes; only the screen shows GiB. Every panel, command and message formats sizes
through this module, so the same bytes print the same way everywhere (51,201,966,080 B was
"47.69 GiB" in the GPU panel and "47.68 GiB" in the fit panel before there was one rule).

The rule (:func:`gib`): the exact value is first rounded to 10^-6 GiB (≈1 kB: this absorbs the
sub-byte remainder lost when a profile's ``"62.56 GiB"`` is parsed to whole bytes by
``pydantic.ByteSize``), then truncated toward zero to ``digits`` decimals — the way the problem
statement wrote its figures (51,201,966,080 B = 47.685546875 GiB is "47.68"; 24.7455 GiB over is
"24.74"). Truncation never shows more memory than there is. Thousands are grouped with commas
("1,024.00"). ``None`` (unknown) renders ``n/a``, never 0.
"""

from __future__ import annotations

import math
import re
from datetime import UTC, datetime
from typing import Literal

GIB = 1 << 30
"""Bytes in one GiB (2^30)."""

MIB = 1 << 20
"""Bytes in one MiB (2^20), the unit nvidia-smi prints."""

NA = "n/a"
"""How an unknown quantity renders."""

UNITS_NOTE = "GiB = 2^30 B, 2 decimals truncated toward zero"
"""The rule in words, for legends and ``--help``."""


CONTROL_CHARS = re.compile(r"[\x00-\x1f\x7f-\x9f]")
"""Control characters (C0, DEL, C1): what a name shown on the terminal must not carry raw."""


def first_control(text: str) -> int | None:
    """The index of the first :data:`CONTROL_CHARS` character in ``text``, or ``None``."""
    m = CONTROL_CHARS.search(text)
    return None if m is None else m.start()


def printable(text: str) -> str:
    """``text`` with every :data:`CONTROL_CHARS` character (``\\x00``–``\\x1f``,
    ``\\x7f``–``\\x9f``) shown as its ``\\xNN`` escape, so a name from outside (a profile, a
    container) cannot move the cursor, retitle the terminal or clear the screen."""
    return CONTROL_CHARS.sub(lambda m: f"\\x{ord(m.group()):02x}", text)


def gib(n: int | None, digits: int = 2, *, group: bool = True) -> str:
    """``n`` bytes as a GiB number without the unit: ``gib(51_201_966_080) == "47.68"``. The one
    byte formatter: every other display of bytes (:func:`gib_unit`, :func:`gib_b`, the panels,
    the commands, the fleet table) goes through it.

    ``n``: bytes (int; negative allowed, e.g. "over by"), ``None`` → ``"n/a"``. ``digits``:
    decimals, 0..6. Rounded to 10^-6 GiB, then truncated toward zero (see the module docstring);
    thousands grouped with commas unless ``group=False`` (a narrow table cell: ``"1128"``).
    Raises ``ValueError`` for ``digits`` outside 0..6.
    """
    if n is None:
        return NA
    if not 0 <= digits <= 6:
        raise ValueError(f"gib: digits must be 0..6, got {digits}")
    micro = (abs(int(n)) * 10**6 + GIB // 2) // GIB
    scale = 10 ** digits
    q = micro // 10 ** (6 - digits)
    sign = "-" if n < 0 and q else ""
    whole = f"{q // scale:,}" if group else str(q // scale)
    return f"{sign}{whole}.{q % scale:0{digits}d}" if digits else f"{sign}{whole}"


def gib_unit(n: int | None, digits: int = 2) -> str:
    """``"47.68 GiB"``; ``None`` → ``"n/a"`` (no unit after an unknown)."""
    return NA if n is None else f"{gib(n, digits)} GiB"


def gib_b(n: int | None) -> str:
    """``"47.68 GiB (51,201,966,080 B)"``: the GiB figure next to the exact bytes; ``None`` →
    ``"n/a"``."""
    return NA if n is None else f"{gib(n)} GiB ({int(n):,} B)"


# -- durations and times -----------------------------------------------------------------
DurationStyle = Literal["exact", "coarse", "age", "ticker", "cell", "span", "ttl", "systemd",
                        "words"]
"""How :func:`fmt_duration` writes a duration (seconds), by where it is shown:

* ``exact`` (default): ``"42 s"``, ``"6 min 31 s"``, ``"2 h 05 min"``, ``"3 d 04 h"`` — two units
  at most, the second zero-padded, fractions truncated, the sign dropped (the caller says "in"
  or "ago");
* ``coarse``: as ``exact`` but whole minutes below an hour (``"6 min"``: countdowns that tick
  once a minute);
* ``age``: a panel's age: ``"0.4 s"`` below a second, whole seconds (rounded) below a minute,
  ``"3 min 05 s"``, ``"2 h 04 min"`` (no days); negative (clock skew) is ``"0.0 s"``;
* ``ticker``: an age that changes rarely, so a once-a-second redraw costs nothing on screen:
  ``"7 s"``, whole tens of seconds (``"40 s"``), ``"6 min"``, ``"2 h 10 min"`` (no days; the
  sign dropped);
* ``cell``: a narrow table cell: ``"42 s"`` below 2 min, ``"6 min"`` below 2 h, ``"3 h"`` below
  2 d, then ``"2 d"`` (negative is ``"0 s"``);
* ``span``: an interval in its largest whole unit: ``"1 h"``, ``"5 min"``, else ``"90 s"``
  (``:g``);
* ``ttl``: exactly, every non-zero unit, as a hold's TTL is typed: ``"4 h"``, ``"1 h 30 min"``,
  ``"20 s"``, ``"0 s"``;
* ``systemd``: systemd's time-span syntax (``systemd.time(7)``): ``"1h"``, ``"5min"``,
  ``"5min 3s"``, ``"30s"`` (as a unit file writes it);
* ``words``: prose: ``"5 minutes"``, ``"2.0 hours"``, ``"1.5 days"``.
"""


def fmt_duration(seconds: float | None, *, coarse: bool = False,
                 style: DurationStyle | None = None, unknown: str = NA) -> str:
    """The one duration formatter: ``seconds`` (s) written in ``style`` (:data:`DurationStyle`;
    default ``exact``, ``coarse=True`` = style ``coarse``). ``None`` → ``unknown`` (``"n/a"``;
    never 0); with style ``cell`` a non-finite value is unknown too. Raises :class:`ValueError`
    for an unknown style (and, as :func:`int` does, for NaN / ±Inf where a style needs whole
    seconds)."""
    style = style or ("coarse" if coarse else "exact")
    if seconds is None or (style == "cell" and not math.isfinite(seconds)):
        return unknown
    if style in ("exact", "coarse"):
        s = int(abs(seconds))
        if s < 60:
            return f"{s} s"
        if s < 3600:
            return f"{s // 60} min" if style == "coarse" else f"{s // 60} min {s % 60:02d} s"
        if s < 86400:
            return f"{s // 3600} h {(s % 3600) // 60:02d} min"
        return f"{s // 86400} d {(s % 86400) // 3600:02d} h"
    if style == "age":
        x = max(0.0, seconds)
        if x < 60:
            return f"{x:.1f} s" if x < 1 else f"{x:.0f} s"
        if x < 3600:
            return f"{int(x) // 60} min {int(x) % 60:02d} s"
        return f"{int(x) // 3600} h {int(x) % 3600 // 60:02d} min"
    if style == "ticker":
        s = int(abs(seconds))
        if s < 60:
            return f"{s // 10 * 10} s" if s >= 10 else f"{s} s"
        if s < 3600:
            return f"{s // 60} min"
        return f"{s // 3600} h {(s % 3600) // 60:02d} min"
    if style == "cell":
        s = max(0, int(seconds))
        for limit, unit, name in ((120, 1, "s"), (7200, 60, "min"), (172800, 3600, "h")):
            if s < limit:
                return f"{s // unit} {name}"
        return f"{s // 86400} d"
    if style == "span":
        if seconds % 3600 == 0:
            return f"{int(seconds // 3600)} h"
        if seconds % 60 == 0:
            return f"{int(seconds // 60)} min"
        return f"{seconds:g} s"
    if style == "ttl":
        h, rem = divmod(int(seconds), 3600)
        m, s = divmod(rem, 60)
        parts = ([f"{h} h"] if h else []) + ([f"{m} min"] if m else []) + (
            [f"{s} s"] if s else [])
        return " ".join(parts) or "0 s"
    if style == "systemd":
        s = int(round(seconds))
        if s and s % 3600 == 0:
            return f"{s // 3600}h"
        if s and s % 60 == 0:
            return f"{s // 60}min"
        if s >= 60:
            return f"{s // 60}min {s % 60}s"
        return f"{seconds:g}s"
    if style == "words":
        if seconds >= 86_400:
            return f"{seconds / 86_400:.1f} days"
        if seconds >= 3_600:
            return f"{seconds / 3_600:.1f} hours"
        return f"{seconds / 60:.0f} minutes"
    raise ValueError(f"fmt_duration: unknown style {style!r}")


def fmt_when(t: datetime | None, now: datetime | None = None) -> str:
    """``"2026-11-29T13:15:00Z (in 6 min 31 s)"`` / ``"(… ago)"``; ``None`` → ``"n/a"``.

    UTC, second precision, the one time format (:func:`zulu_time`); ``now`` defaults to the
    current time.
    """
    if t is None:
        return NA
    now = now or datetime.now(UTC)
    delta = (t - now).total_seconds()
    rel = f"in {fmt_duration(delta)}" if delta >= 0 else f"{fmt_duration(delta)} ago"
    return f"{zulu_time(t)} ({rel})"


def fmt_ttl(ttl_s: int) -> str:
    """A hold's TTL (seconds) exactly, every non-zero unit, as the TTL is typed: ``4 h``,
    ``1 h 30 min``, ``10 min``, ``20 s``; ``0 s`` for 0 (:func:`fmt_duration` style ``ttl``)."""
    return fmt_duration(ttl_s, style="ttl")


# -- time on screen (issue 18): one format, UTC with Z, no microseconds --------------------------
def zulu_time(t: object, *, seconds: bool = True) -> str:
    """A time as every screen writes it: ``2026-12-01T12:41:30Z`` (``seconds=False``:
    ``2026-12-01T12:41Z``) — UTC, ``Z``, no microseconds, never ``+00:00``; ``n/a`` for
    ``None``. ``t``: a timezone-aware :class:`datetime.datetime` (a naive one is taken as UTC,
    the console's only zone)."""
    from datetime import UTC, datetime

    if t is None:
        return NA
    if not isinstance(t, datetime):
        raise TypeError(f"zulu_time: a datetime, not {type(t).__name__}")
    t = t.replace(tzinfo=UTC) if t.tzinfo is None else t.astimezone(UTC)
    return t.strftime("%Y-%m-%dT%H:%M:%SZ" if seconds else "%Y-%m-%dT%H:%MZ")


def clock_z(t: object, *, seconds: bool = False) -> str:
    """The time of day of :func:`zulu_time`: ``12:41Z`` (``seconds``: ``12:41:30Z``), UTC;
    ``n/a`` for ``None``."""
    full = zulu_time(t, seconds=seconds)
    return full if full == NA else full.split("T", 1)[1]


def share_text(met: int, of: int, low: float | None, high: float | None) -> str:
    """A share with its interval, e.g. ``"58/64 = 90.6 % [81.0, 95.6] (Wilson 95 %)"`` (goodput;
    ``low`` / ``high`` in [0, 1]); ``"n/a (none finished)"`` when ``of`` is 0 or the interval is
    unknown (never 0 %)."""
    if not of or low is None or high is None:
        return "n/a (none finished)"
    return (f"{met}/{of} = {met / of * 100:.1f} % [{low * 100:.1f}, {high * 100:.1f}] "
            "(Wilson 95 %)")


__all__ = ["CONTROL_CHARS", "GIB", "MIB", "NA", "UNITS_NOTE", "DurationStyle", "first_control",
           "fmt_duration",
           "fmt_ttl", "fmt_when", "gib", "gib_b", "gib_unit", "printable", "share_text", "zulu_time",
           "clock_z"]
