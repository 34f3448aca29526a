"""Polls and the age tick share one grid on the event loop's clock (issue 11: fewer wake-ups
of the idle console), without polling a source much earlier or later than its delay."""

from __future__ import annotations

import asyncio
import math

from hypothesis import given
from hypothesis import strategies as st

from seat_console.tui.polling import ALIGN_GRID_S, PollTimer, aligned_when


@given(now=st.floats(0, 1e7), delay=st.floats(ALIGN_GRID_S, 3600.0))
def test_an_aligned_poll_is_within_half_a_grid_step_of_its_delay(now, delay):
    when = aligned_when(now, delay)
    assert abs(when - (now + delay)) <= ALIGN_GRID_S / 2 + 1e-6
    assert when >= now + delay / 2 - 1e-9
    k = when / ALIGN_GRID_S
    assert math.isclose(k, round(k), abs_tol=1e-6) or when == now + delay / 2


@given(now=st.floats(0, 1e7), delay=st.floats(0, ALIGN_GRID_S, exclude_max=True))
def test_a_short_delay_is_not_moved(now, delay):
    assert aligned_when(now, delay) == now + delay


def test_sources_finishing_at_different_times_are_polled_together():
    # GPU read done 30 ms into the second, journal 120 ms, a retry 2 s after a 400 ms failure
    whens = {aligned_when(100.03, 1.0), aligned_when(100.12, 1.0), aligned_when(99.4, 2.0)}
    assert whens == {101.0}


async def test_poll_timer_fires_at_the_aligned_time():
    loop = asyncio.get_running_loop()
    fired: list[float] = []
    PollTimer(loop, 1.0, lambda: fired.append(loop.time()))
    expected = aligned_when(loop.time(), 1.0)
    await asyncio.sleep(1.6)
    assert len(fired) == 1 and fired[0] >= expected - 0.01
