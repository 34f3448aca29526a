"""The one duration formatter, :func:`seat_console.core.fmt.fmt_duration` (issue 33): each style
writes exactly what the function it replaced wrote. The eight functions are kept here, verbatim,
as the oracles (snapshot/verdicts._ends_in, widgets/panel.fmt_age and fmt_coarse_age,
widgets/services._coarse, fleet/rows.fmt_age, widgets/gpu._span, sources/timers._span_text,
evidence/report._span_text), and the old core/fmt.fmt_ttl; hypothesis over any finite
duration (and ``None``, NaN, ±Inf where the old one took them)."""

from __future__ import annotations

import math

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from seat_console.core.fmt import fmt_duration, fmt_ttl
from seat_console.widgets.panel import fmt_coarse_age

SECONDS = st.floats(min_value=-1e7, max_value=1e9, allow_nan=False, allow_infinity=False)
EDGES = [0, 0.4, 0.99, 1, 9.5, 9.99, 10, 59.4, 59.6, 60, 119, 120, 3599, 3600, 3725, 7199,
         7200, 86399, 86400, 172799, 172800, 1e6, -1, -95]


# -- the old functions, verbatim --------------------------------------------------------------
def old_ends_in(seconds):
    if seconds is None:
        return "n/a"
    s = int(max(0.0, seconds))
    if s < 60:
        return f"{s} s"
    if s < 3600:
        return f"{s // 60} min"
    if s < 86400:
        return f"{s // 3600} h {(s % 3600) // 60:02d} min"
    return f"{s // 86400} d {(s % 86400) // 3600:02d} h"


def old_panel_age(seconds):
    if seconds is None:
        return "n/a"
    s = max(0.0, seconds)
    if s < 10:
        return f"{s:.1f} s" if s < 1 else f"{s:.0f} s"
    if s < 60:
        return f"{s:.0f} s"
    if s < 3600:
        m, r = divmod(int(s), 60)
        return f"{m} min {r:02d} s"
    h, r = divmod(int(s), 3600)
    return f"{h} h {r // 60:02d} min"


def old_coarse_age(seconds, fresh_s=2.0):
    if seconds is None:
        return "n/a"
    s = max(0.0, seconds)
    if s <= fresh_s:
        return "just now"
    if s < 10:
        return f"{int(s)} s"
    if s < 60:
        return f"{int(s) // 10 * 10} s"
    if s < 3600:
        return f"{int(s) // 60} min"
    h, r = divmod(int(s), 3600)
    return f"{h} h {r // 60:02d} min"


def old_services_coarse(seconds):
    s = int(abs(seconds))
    if s < 60:
        return f"{s // 10 * 10} s" if s >= 10 else f"{s} s"
    if s < 3600:
        return f"{s // 60} min"
    return f"{s // 3600} h {(s % 3600) // 60:02d} min"


def old_fleet_age(seconds):
    if seconds is None or not math.isfinite(seconds):
        return "?"
    s = max(0, int(seconds))
    if s < 120:
        return f"{s} s"
    if s < 7200:
        return f"{s // 60} min"
    if s < 172800:
        return f"{s // 3600} h"
    return f"{s // 86400} d"


def old_gpu_span(seconds):
    if seconds % 3600 == 0:
        return f"{int(seconds // 3600)} h"
    if seconds % 60 == 0:
        return f"{int(seconds // 60)} min"
    return f"{seconds:g} s"


def old_timers_span(seconds):
    s = int(round(seconds))
    if s and s % 3600 == 0:
        return f"{s // 3600}h"
    if s and s % 60 == 0:
        return f"{s // 60}min"
    if s >= 60:
        return f"{s // 60}min {s % 60}s"
    return f"{seconds:g}s"


def old_report_span(seconds):
    if seconds >= 86_400:
        return f"{seconds / 86_400:.1f} days"
    if seconds >= 3_600:
        return f"{seconds / 3_600:.1f} hours"
    return f"{seconds / 60:.0f} minutes"


def old_ttl(ttl_s):
    h, rem = divmod(int(ttl_s), 3600)
    m, s = divmod(rem, 60)
    parts = [f"{h} h"] if h else []
    parts += [f"{m} min"] if m else []
    parts += [f"{s} s"] if s else []
    return " ".join(parts) or "0 s"


def _examples(f):
    for e in EDGES:
        f = example(float(e))(f)
    return f


@_examples
@given(SECONDS)
def test_each_style_writes_what_the_old_function_wrote(x: float) -> None:
    assert fmt_duration(None if x is None else max(0.0, x), coarse=True) == old_ends_in(x)
    assert fmt_duration(x, style="age") == old_panel_age(x)
    assert fmt_coarse_age(x, 2.0) == old_coarse_age(x, 2.0)
    assert fmt_coarse_age(x, 0) == old_coarse_age(x, 0)
    assert fmt_duration(x, style="ticker") == old_services_coarse(x)
    assert fmt_duration(x, style="cell", unknown="?") == old_fleet_age(x)
    assert fmt_duration(x, style="span") == old_gpu_span(x)
    assert fmt_duration(x, style="systemd") == old_timers_span(x)
    assert fmt_duration(x, style="words") == old_report_span(x)
    assert fmt_ttl(int(x)) == old_ttl(int(x))


@given(st.integers(-10**7, 10**9))
def test_whole_seconds_too(n: int) -> None:
    assert fmt_duration(n, style="span") == old_gpu_span(n)
    assert fmt_duration(n, style="systemd") == old_timers_span(n)
    assert fmt_duration(n, style="ttl") == old_ttl(n)


@pytest.mark.parametrize("x", [None, math.nan, math.inf, -math.inf])
def test_unknown_is_never_zero(x) -> None:
    assert fmt_duration(x, style="cell", unknown="?") == old_fleet_age(x) == "?"
    if x is None:
        for style in ("exact", "coarse", "age", "ticker", "span", "ttl", "systemd", "words"):
            assert fmt_duration(None, style=style) == "n/a"   # type: ignore[arg-type]
    else:   # NaN, -Inf → "just now" as before; +Inf raised OverflowError before and now
        assert _outcome(fmt_coarse_age, x) == _outcome(old_coarse_age, x)


def _outcome(f, x):
    try:
        return f(x)
    except (OverflowError, ValueError) as exc:
        return type(exc)


def test_an_unknown_style_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown style 'fortnights'"):
        fmt_duration(5, style="fortnights")  # type: ignore[arg-type]
