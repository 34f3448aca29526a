"""The live probe panel's output rate is taken over the time its phase actually ran (issue 31:
"output 268.8 tok/s (last 5 s)" divided by 5 s a phase that lasted 1.5 s)."""

from __future__ import annotations

import pytest
from seat_console.probe.live import RATE_WINDOW_S, live_view, rate_window, window_rate
from seat_console.probe.run import PhaseProgress, Progress
from seat_console.widgets.probe import render_live


def _progress(phases: list[PhaseProgress], events: list[tuple[float, int]]) -> Progress:
    p = Progress(run_id="r1", phases=phases, status="running")
    p.token_events.extend(events)
    return p


def test_finished_phase_of_1_5_s_is_divided_by_1_5_s() -> None:
    ph = PhaseProgress(name="c64", expected=4, concurrency=4, started=100.0, ended=101.5,
                       state="measured")
    p = _progress([ph], [(100.5, 200), (101.0, 200), (101.5, 200)])
    v = live_view(p, now=130.0)          # long after the phase ended
    assert v.tok_s == pytest.approx(600 / 1.5)
    assert v.tok_s_window_s == pytest.approx(1.5) and v.tok_s_phase == "c64"
    assert "last 1.5 s of c64" in render_live(v).plain


def test_running_phase_window_starts_at_the_phase_not_5_s_back() -> None:
    warm = PhaseProgress(name="warmup", expected=1, concurrency=1, started=90.0, ended=99.0,
                         state="measured")
    ph = PhaseProgress(name="c1", expected=9, concurrency=1, started=100.0, state="running")
    # warm-up tokens just before the phase began must not count in the phase's rate
    p = _progress([warm, ph], [(98.5, 1000), (101.0, 50), (102.0, 50)])
    v = live_view(p, now=102.0)
    assert v.tok_s == pytest.approx(100 / 2.0)
    # a long phase: the last RATE_WINDOW_S seconds only
    v = live_view(p, now=100.0 + 3 * RATE_WINDOW_S)
    assert v.tok_s_window_s == pytest.approx(RATE_WINDOW_S) and v.tok_s == 0.0


def test_no_phase_yet_is_unknown_not_zero() -> None:
    p = _progress([PhaseProgress(name="c1", expected=1, concurrency=1)], [(1.0, 5)])
    v = live_view(p, now=2.0)
    assert v.tok_s is None and rate_window(p, 2.0) is None
    assert "output — tok/s" in render_live(v).plain
    assert window_rate([(1.0, 5)], 3.0, 3.0) is None
