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
