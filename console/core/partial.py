"""A half-failed read keeps the fuller last good value of the parts it missed, marked stale.

A source's read can partly fail: the engine answers ``/metrics`` but ``/v1/models`` times out;
systemd lists the timers but the ``systemctl show`` of their services fails; NVML reads a card's
memory but not its process list. Such a reading is still good (it is not
:class:`~seat_console.core.base.Unavailable`), but taken alone it would replace what the panel
knew a second ago with ``n/a``. The app therefore merges each good reading with the last good
one (:func:`merge_last_good`): every part this read missed and the last good reading had is
taken from the last good reading, and the reading lists it in its ``kept`` field as a
:class:`Kept` — which part, since when the value is that old (the time of the read that really
got it, carried over across several failed reads in a row) and why this read missed it. Panels
show each kept part as stale with its age (``widgets/panel.py``).

How a reading type takes part: it has a ``kept: tuple[Kept, ...] = ()`` field and a method
``with_last_good(self, last) -> Self`` that fills its missed parts from ``last`` (a reading of
the same type), using :func:`kept_since` for the age and :func:`keep` to build the entry. The
merge is per field: a part the new read did get is always the new value (never overwritten by
an older one), and a part that the last good reading did not have either stays ``n/a``.
"""

from __future__ import annotations

import logging
from datetime import datetime

from pydantic import BaseModel

from seat_console.core.base import Frozen, Unavailable

log = logging.getLogger(__name__)


class Kept(Frozen):
    """One part of a reading that this read missed, shown from an earlier good read.

    ``field``: which part, as a stable key of the reading type (``"models"``,
    ``"timers[x.timer].service"``, ``"cards[GPU-…].processes"``); ``part``: the part in words
    for the panel (``"/v1/models"``, ``"x.timer's service state"``); ``since``: when the value
    shown was read (UTC) — its age is ``now − since``; ``reason``: why the newest read missed
    it (one sentence, e.g. the endpoint's error)."""

    field: str
    part: str
    since: datetime
    reason: str


def read_time(reading: BaseModel) -> datetime | None:
    """When ``reading`` was taken: its ``read_at`` or ``sampled_at`` field (UTC), else ``None``."""
    for name in ("read_at", "sampled_at"):
        t = getattr(reading, name, None)
        if isinstance(t, datetime):
            return t
    return None


def kept_since(last: BaseModel, field: str) -> datetime | None:
    """How old ``last``'s value of ``field`` is: the ``since`` of ``last``'s own :class:`Kept`
    entry for it (it was already carried over), else ``last``'s read time (:func:`read_time`)."""
    for k in getattr(last, "kept", ()) or ():
        if k.field == field:
            return k.since
    return read_time(last)


def keep(last: BaseModel, field: str, part: str, reason: str) -> Kept | None:
    """The :class:`Kept` entry for taking ``field`` from ``last`` (``None`` when ``last`` has
    no read time, so no age could be shown — then the part is not carried over)."""
    since = kept_since(last, field)
    if since is None:
        return None
    return Kept(field=field, part=part, since=since, reason=reason)


def merge_last_good(reading: BaseModel, last_good: BaseModel | None) -> BaseModel:
    """``reading`` with the parts it missed taken from ``last_good`` (see the module docstring).

    Returns ``reading`` itself when it is :class:`Unavailable`, when there is no last good
    reading, when the types differ, or when the type does not take part (no
    ``with_last_good``). Never raises: a bug in a ``with_last_good`` is logged and the new
    reading is returned as read."""
    if (last_good is None or isinstance(reading, Unavailable) or type(reading) is not
            type(last_good)):
        return reading
    merge = getattr(reading, "with_last_good", None)
    if merge is None:
        return reading
    try:
        merged = merge(last_good)
    except Exception:  # a merge bug must not lose the new reading
        log.warning("merging %s with its last good reading failed", type(reading).__name__,
                    exc_info=True)
        return reading
    return merged if isinstance(merged, type(reading)) else reading


__all__ = ["Kept", "keep", "kept_since", "merge_last_good", "read_time"]
