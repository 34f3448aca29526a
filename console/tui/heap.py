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

Before the freeze, the collector is held off altogether (:func:`hold_collector`, from the very
start of a TUI run on a terminal): the start-up allocates that same heap, and CPython's
collector, triggered every 700 net allocations, walked it again and again on the way to the
full screen. Measured on the lab (120×40, every source live; its callbacks' thread CPU from
``gc.callbacks``, ``exec`` to the full screen, 2026-12-05, docs/benchmarks.md "seventh
pass"): 88–156 ms of CPU in ~260 collections, the generation-2 ones 47–110 ms, of the start's
0.89–1.06 s. The freeze's own full collection then frees whatever cyclic garbage the first
seconds made (the few seconds' worth: at most a few MiB held that long).
"""

from __future__ import annotations

import gc
import sys

FREEZE_AFTER_S = 5.0
"""Seconds after the app's mount at which :func:`freeze_startup_heap` runs (the first frame
and the first readings are in by then)."""

YOUNG_THRESHOLD = 10_000
"""Generation 0's collection threshold after the freeze (CPython's default is 700; 3.13
raised it to 2,000). Cyclic garbage waits at most that many net allocations longer."""

_frozen = False
_held = False


def release_free_heap() -> bool:
    """Give the C heap's free pages back to the kernel: glibc's ``malloc_trim(0)``, which
    "attempts to release free memory from the heap (by calling sbrk(2) or madvise(2) with
    suitable arguments)", and since glibc 2.8 from every arena and from the middle of a heap,
    not only its top (malloc_trim(3)). The start-up frees most of what its imports, pydantic's
    schema building and the first frames allocated, but those pages stay in the process (and
    count in its RSS) until something trims them. On the lab (120×40, every source live, 9 s
    after start, three pairs; docs/benchmarks.md, r19): 82.3–82.4 → 81.4–81.8 MiB RSS with
    the console's bytecode cached, and 86.4–86.9 → 82.3–82.9 MiB (the same 60 s later) where
    every start compiled the console's modules (``PYTHONDONTWRITEBYTECODE`` set, no cache). Returns
    True when glibc's ``malloc_trim`` released memory, False when it had nothing to release or
    there is no glibc (another libc, another OS). Raises nothing."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        import ctypes

        trim = ctypes.CDLL(None).malloc_trim
    except (OSError, AttributeError, ImportError):
        return False
    trim.argtypes = [ctypes.c_size_t]
    trim.restype = ctypes.c_int
    return bool(trim(0))


def hold_collector() -> bool:
    """Hold CPython's cyclic garbage collector off (``gc.disable``) until
    :func:`freeze_startup_heap` runs, which collects once and turns it back on. For the start of
    a TUI run on a real terminal only, where the app's mount schedules that freeze (a process
    that never reaches it must end soon: an error before the app runs, the app's exit).
    Reference counting still frees everything not in a cycle meanwhile. Returns True when it
    turned the collector off, False when the collector was off already or the heap frozen
    (nothing done). Raises nothing."""
    global _held
    if _frozen or not gc.isenabled():
        return False
    gc.disable()
    _held = True
    return True


def freeze_startup_heap() -> bool:
    """Collect once, then :func:`gc.freeze` every object the collector tracks and raise
    generation 0's threshold to :data:`YOUNG_THRESHOLD` (the older ones unchanged); a collector
    held off by :func:`hold_collector` is turned back on; then the start-up's freed C heap goes
    back to the kernel (:func:`release_free_heap`). Runs on the calling thread (the UI
    thread: one collection, ~30–50 ms at 1,000 seats, once). Returns True the first time,
    False (and does nothing) after. Raises nothing."""
    global _frozen, _held
    if _frozen:
        return False
    _frozen = True
    gc.collect()
    gc.freeze()
    _, older, oldest = gc.get_threshold()
    gc.set_threshold(YOUNG_THRESHOLD, older, oldest)
    if _held:
        _held = False
        gc.enable()
    release_free_heap()
    return True


__all__ = ["FREEZE_AFTER_S", "YOUNG_THRESHOLD", "freeze_startup_heap", "hold_collector",
           "release_free_heap"]
