"""One GiB display rule everywhere (issue 12, "the same bytes print two ways").

51,201,966,080 B (47.685546875 GiB) printed "47.69 GiB" in the GPU panel and "47.68 GiB" in the
fit panel. Every display now goes through :mod:`seat_console.core.fmt`; these tests pin the rule and
check each place that shows sizes, and that no module formats GiB on its own again.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from seat_console.core import fmt
from seat_console.commands import gpus_cmd, status_cmd
from seat_console.fit import budget
from seat_console.widgets import gpu as gpu_widget

PLE = 51_201_966_080
"""47.685546875 GiB: the byte count the review saw printed two ways."""


def test_rule_truncates_after_micro_rounding():
    assert fmt.gib(PLE) == "47.68"
    assert fmt.gib(int(62.56 * fmt.GIB)) == "62.56"  # sub-byte parse remainder absorbed
    assert fmt.gib(-26_570_328_637) == "-24.74"
    assert fmt.gib(fmt.GIB - 1) == "1.00"            # within 10^-6 GiB of 1
    assert fmt.gib(fmt.GIB * 1024) == "1,024.00"
    assert fmt.gib(150_754_820_096, 0) == "140"
    assert fmt.gib(None) == "n/a" and fmt.gib_unit(None) == "n/a" and fmt.gib_b(None) == "n/a"
    assert fmt.gib(0) == "0.00"                       # a known 0 is 0; unknown is n/a
    assert fmt.gib_b(PLE) == "47.68 GiB (51,201,966,080 B)"
    with pytest.raises(ValueError, match="digits"):
        fmt.gib(1, 7)


def test_every_display_prints_the_same_bytes_the_same_way():
    assert budget.gib(PLE) == "47.68"
    assert gpu_widget.gib_unit(PLE) == "47.68 GiB"     # the widget uses core/fmt's own
    assert gpus_cmd._size(PLE).startswith("47.68 GiB (")
    assert status_cmd.gib_unit(PLE) == "47.68 GiB"


def test_no_module_formats_gib_by_itself():
    """A new ``n / GiB:.2f`` somewhere would bring the two rules back."""
    root = Path(__file__).resolve().parent.parent
    pattern = re.compile(r"/\s*(GiB|GIB|\(1 << 30\)|2\s*\*\*\s*30|1024\s*\*\*\s*3)\s*:")
    offenders = []
    for folder in ("console", "widgets", "actions"):
        for path in (root / folder).rglob("*.py"):
            for i, line in enumerate(path.read_text("utf-8").splitlines(), 1):
                if pattern.search(line):
                    offenders.append(f"{path.relative_to(root)}:{i}: {line.strip()}")
    assert not offenders, "format GiB with seat_console.core.fmt instead:\n" + "\n".join(offenders)


def test_one_duration_rule_for_snapshot_and_hold() -> None:
    """Durations come from one function (core.fmt.fmt_duration); the hold's countdowns say
    "in …" / "… ago" around it (they were written out again in actions/hold.py)."""
    from datetime import UTC, datetime, timedelta

    from seat_console.actions import hold
    from seat_console.core.fmt import fmt_duration

    assert fmt_duration(391) == "6 min 31 s" and fmt_duration(391, coarse=True) == "6 min"
    assert fmt_duration(-7500) == "2 h 05 min" == fmt_duration(7500, coarse=True)
    assert fmt_duration(3 * 86400 + 4 * 3600) == "3 d 04 h"
    assert fmt_duration(None) == "n/a"
    now = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
    for s in (75, 391, 3900, 7500, 2 * 86400 + 60):
        assert hold.countdown(now + timedelta(seconds=s), now) == \
            f"in {fmt_duration(s, coarse=True)}"
    assert hold.countdown(now + timedelta(seconds=45), now) == "in 40 s"
    assert hold.countdown(now - timedelta(seconds=5), now) == "passed"


def test_the_fleet_cells_are_the_one_rule_ungrouped():
    """The fleet table's GPU cell had its own two formatters (whole GiB by floor division, one
    decimal by float truncation); ``gib(n, d, group=False)`` writes the same for every byte
    count the fleet reads (dcgm-exporter's whole MiB, up to 2^40 MiB)."""
    from hypothesis import example, given
    from hypothesis import strategies as st

    @given(st.integers(0, 2**40))
    @example(1023)
    @example(1024 * 1128)           # 8 × 141 GiB: "1128", not "1,128"
    @example(1024 * 1000 - 1)
    def check(mib: int) -> None:
        n = mib * fmt.MIB
        assert fmt.gib(n, 0, group=False) == str(int(n // fmt.GIB))
        assert fmt.gib(n, 1, group=False) == f"{int(n * 10 / fmt.GIB) / 10:.1f}"

    check()
