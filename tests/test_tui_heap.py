"""The start-up heap freeze (seat_console.tui.heap), in a child process: freezing is for the
whole process, and pytest's own must stay as it is."""

from __future__ import annotations

import json
import subprocess
import sys

from seat_console.tui.heap import YOUNG_THRESHOLD

CHILD = """
import gc, json
from seat_console.tui.heap import freeze_startup_heap
before = gc.get_freeze_count()
first = freeze_startup_heap()
frozen = gc.get_freeze_count()
second = freeze_startup_heap()
junk = [[i] for i in range(1000)]     # made after: not frozen, still collected as usual
print(json.dumps([before, first, frozen, second, gc.get_freeze_count(), gc.isenabled(),
                  gc.get_threshold()]))
"""


def test_freeze_once_moves_the_start_up_heap_out_of_the_collector():
    out = subprocess.run([sys.executable, "-c", CHILD], capture_output=True, text=True,
                         timeout=60, check=True)
    before, first, frozen, second, after, enabled, thresholds = json.loads(out.stdout)
    assert before == 0 and first is True and frozen > 1000     # the imports' objects
    assert second is False and after == frozen                  # once per process
    assert enabled                                             # the collector still runs
    assert thresholds == [YOUNG_THRESHOLD, 10, 10]             # CPython 3.11's older two kept


HOLD_CHILD = """
import gc, json
from seat_console.tui.heap import freeze_startup_heap, hold_collector
held = hold_collector()
off = not gc.isenabled()
again = hold_collector()                 # off already: nothing to do
cycles = []
for _ in range(2000):                    # cyclic garbage made while held: kept until the freeze
    a = []; a.append(a)
before = gc.get_count()[0]
first = freeze_startup_heap()
print(json.dumps([held, off, again, before, first, gc.isenabled(), gc.get_threshold()[0],
                  hold_collector(), gc.isenabled()]))
"""


def test_the_collector_is_held_off_until_the_freeze_turns_it_back_on():
    out = subprocess.run([sys.executable, "-c", HOLD_CHILD], capture_output=True, text=True,
                         timeout=60, check=True)
    held, off, again, before, first, on, young, late, still_on = json.loads(out.stdout)
    assert held is True and off and again is False
    assert before > 700     # no young collection ran while held (at 700 one would have)
    assert first is True and on and young == YOUNG_THRESHOLD
    assert late is False and still_on      # after the freeze a hold does nothing


TRIM_CHILD = """
import json, os
from seat_console.tui.heap import freeze_startup_heap

def rss():
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")

# 64 MiB in 1 KiB blocks: above pymalloc's 512 B, below glibc's mmap threshold, so from the C
# heap; one block made after them stays, so the heap's top cannot shrink by itself on free
blocks = [bytes(1024) for _ in range(64 * 1024)]
pin = bytes(1024)
del blocks
freed = rss()
first = freeze_startup_heap()
print(json.dumps([first, freed, rss()]))
"""


def test_the_freeze_gives_the_start_ups_freed_c_heap_back_to_the_kernel():
    out = subprocess.run([sys.executable, "-c", TRIM_CHILD], capture_output=True, text=True,
                         timeout=60, check=True)
    first, freed, after = json.loads(out.stdout)
    assert first is True
    # the 64 MiB freed above counted in the RSS until the freeze; at least 3/4 of it goes
    assert freed - after > 48 * 2**20, (freed, after)
