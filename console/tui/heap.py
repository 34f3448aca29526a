"""The start-up heap moved out of the cyclic garbage collector's way (``gc.freeze``).

A Textual app builds tens of thousands of long-lived objects at start (the widgets, their
styles and caches, the imported modules), and every full collection of CPython's cyclic
collector walks all of them again. Measured on the fleet screen at 1,000 seats (120×40,
refresh 5 s, docs/benchmarks.md): the collector was 26 % of the process's CPU, one
generation-2 collection of ~35 ms every ~40 s the largest part; after :func:`gc.freeze`
(CPython ≥ 3.7: "move all objects tracked by the garbage collector to a permanent generation,
ignored in all future collections", Python docs, ``gc`` module) it was 8 %; with the
youngest generation's threshold raised from 700 to :data:`YOUNG_THRESHOLD` (a refresh's
replies are tens of thousands of short-lived containers: at 700 a reply's objects outlived
several young collections and were walked again in the next generation) it was 1 % (the
collector's own time from ``gc.callbacks``, 40 s at 1,000 seats: 13 ms → 2 ms).

Frozen objects are still freed by reference counting when their last reference goes; only a
reference cycle among them would stay (start-up objects in a cycle live as long as the app
anyway). Called once per process, a few seconds after the app's mount, on a real terminal only
(headless test runs share one long pytest process and are left as they are).
"""

from __future__ import annotations

import gc

FREEZE_AFTER_S = 5.0
"""Seconds after the app's mount at which :func:`freeze_startup_heap` runs (the first frame
and the first readings are in by then)."""

YOUNG_THRESHOLD = 10_000
"""Generation 0's collection threshold after the freeze (CPython's default is 700; 3.13
raised it to 2,000). Cyclic garbage waits at most that many net allocations longer."""

_frozen = False


def freeze_startup_heap() -> bool:
    """Collect once, then :func:`gc.freeze` every object the collector tracks and raise
    generation 0's threshold to :data:`YOUNG_THRESHOLD` (the older ones unchanged). Runs on the
    calling thread (the UI thread: one collection, ~30–50 ms at 1,000 seats, once). Returns
    True the first time, False (and does nothing) after. Raises nothing."""
    global _frozen
    if _frozen:
        return False
    _frozen = True
    gc.collect()
    gc.freeze()
    _, older, oldest = gc.get_threshold()
    gc.set_threshold(YOUNG_THRESHOLD, older, oldest)
    return True


__all__ = ["FREEZE_AFTER_S", "YOUNG_THRESHOLD", "freeze_startup_heap"]
