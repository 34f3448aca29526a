"""The one-glance screen (issue 11): the status line's wording in every state (also under
NO_COLOR), the 80×24 first screen holding GPUs, timers, silence and fit, keys and focus
(Escape never stops scrolling, a visible focus, the footer's keys, p → resume), detail views,
a too-small terminal, redraws only of what changed, engine rates and the exited container.

Inputs are recorded (tests/screen_fixtures.py), the clock is fixed and the refresh interval is
an hour, so only the test's key presses take readings."""

from __future__ import annotations

import re
import sys
from datetime import timedelta
from pathlib import Path
from types import SimpleNamespace

import pytest

sys.path.insert(0, str(Path(__file__).parent))
import screen_fixtures as F
from screen_fixtures import all_read, refresh_all, wait_for
from app_fixtures import T0

from seat_console.tui.app import SeatConsoleApp
from seat_console.tui.polling import same_reading
from seat_console.widgets.detail import DetailScreen
from seat_console.snapshot.engine_rates import RateHistory, counter_rate, window_latency
from seat_console.core.base import Unavailable
from seat_console.sources.engine import HistogramSummary
from seat_console.snapshot.fit_reading import gather_fit_inputs
from seat_console.fit.inputs import compute_budgets
from seat_console.widgets import status as S
from seat_console.widgets.fit import FitPanel
from seat_console.widgets.panel import SourcePanel, fmt_coarse_age
from textual.widget import Widget
from textual.widgets import Input

GiB = 1 << 30


def text_of(app: SeatConsoleApp) -> str:
    return "\n".join(strip.text for strip in app.screen._compositor.render_strips())


def flat(text: str) -> str:
    return re.sub(r"\s+", " ", re.sub(r"[│╭╮╰╯─┃┏┓┗┛━]", " ", text))


# -- the status line, pure -------------------------------------------------------------------
def words(facts) -> str:
    return S.render_status(facts).plain


def test_status_line_wording_in_each_state() -> None:
    now = T0
    up = F.engine()
    down = Unavailable(source="engine", kind="unreachable", reason="refused")
    fit_ok = compute_budgets(F.fit_inputs())[0]
    over = compute_budgets(gather_fit_inputs(F.default_loaded(), None))[0]  # declared 95 GiB
    base = dict(engine=up, containers=F.containers(), timers=F.timers(),
                silences=F.silences(), fit=fit_ok, hold=None, hold_known=True, now=now)
    assert words(S.build_status(**base)) == (
        "engine UP · seat seat-resident · hold none · silence none · timers 2/2 active · "
        "fit fits")
    held = SimpleNamespace(state="active", expires_at=now + timedelta(minutes=41))
    stopped = F.timers().model_copy(update={"timers": (
        F.timers().timers[0].model_copy(update={"active_state": "inactive"}),
        F.timers().timers[1])})
    worst = S.build_status(**{**base, "engine": down, "containers": F.containers(running=False),
                              "timers": stopped, "silences": F.silences(active=True),
                              "fit": over, "hold": held})
    assert words(worst) == (
        "engine DOWN · seat none running · hold active until 12:41Z · silence active, ends in "
        "2 h 10 min · timers 1/2 active · fit OVER: 31.94 GiB per card must leave")
    unknown = S.build_status(engine=None, containers=None, timers=None, silences=None, fit=None,
                             hold=None, hold_known=False, now=now)
    assert words(unknown) == ("engine n/a · seat n/a · hold n/a · silence n/a · timers n/a · "
                              "fit n/a")
    assert S.hold_fact(SimpleNamespace(state="unfinished", expires_at=now), True).words == \
        "unfinished"
    assert [f.level for f in worst] == ["bad", "bad", "warn", "warn", "warn", "bad"]


async def test_status_line_says_it_under_no_color(monkeypatch) -> None:
    monkeypatch.setenv("NO_COLOR", "1")
    app, srcs = F.seat_app(silence_active=True)
    async with app.run_test(size=(120, 40)) as pilot:
        await all_read(pilot, app)
        assert app.no_color
        line = flat(text_of(app))
        assert ("engine UP · seat seat-resident · hold n/a · silence active, ends in 2 h 10 min"
                " · timers 2/2 active · fit fits") in line
        srcs["engine"].reading = F.engine(healthy=False)
        await refresh_all(pilot, app)
        assert "engine DOWN" in flat(text_of(app))


# -- the 80×24 first screen ------------------------------------------------------------------
async def test_80x24_first_screen_holds_gpus_timers_silence_and_fit() -> None:
    app, _ = F.seat_app(silence_active=True)
    async with app.run_test(size=(80, 24)) as pilot:
        await all_read(pilot, app)
        text = text_of(app)
        assert app.query_one("#panels").max_scroll_y == 0   # nothing below the fold
        assert re.search(r"GPU 0 H200 +SEAT +used +100\.\d\d/139\.80 GiB", text)
        assert re.search(r"GPU 1 H200 +SEAT", text)
        assert "fleet-remediation-cycle.timer  next 12:06:31Z" in text
        assert "seat-conformance-smoke.timer" in text
        assert re.search(r"ACTIVE +ends in 2 h 10 min +5d2c9a1e", text)
        assert "RESIDENT" in text and re.search(r"CANDIDATE fits +candidate-nvfp4", text)
        assert "engine UP" in text and "timers 2/2 active" in text
        lines = text.splitlines()
        assert len(lines) == 24 and all(len(line) <= 80 for line in lines)


async def test_an_unavailable_source_takes_one_line_with_the_fix_on_its_detail_view() -> None:
    app, srcs = F.seat_app()
    srcs["timers"].reading = Unavailable(
        source="timers", kind="no-systemd",
        reason="systemctl: not found on the node (docker-exec seat-node): install systemd")
    async with app.run_test(size=(80, 24)) as pilot:
        await all_read(pilot, app)
        panel = app.states["timers"].panel
        status = panel.query_one("#panel-status")
        assert status.size.height == 1
        assert "unavailable (no-systemd): systemctl: not found" in text_of(app)
        panel.focus()
        await pilot.press("enter")
        await wait_for(pilot, lambda: isinstance(app.screen, DetailScreen), "detail view")
        await pilot.pause(0.05)
        detail = flat(text_of(app))
        assert "timers unavailable (no-systemd): systemctl: not found" in detail
        assert "do not assume the fleet's timers are stopped" in detail   # the hint / fix
        await pilot.press("escape")
        await wait_for(pilot, lambda: not isinstance(app.screen, DetailScreen), "closed")


async def test_fit_detail_view_has_the_full_budget_and_what_if() -> None:
    app, _ = F.seat_app()
    async with app.run_test(size=(80, 24)) as pilot:
        await all_read(pilot, app)
        app.states["fit"].panel.focus()
        await pilot.press("enter")
        await wait_for(pilot, lambda: isinstance(app.screen, DetailScreen), "detail view")
        panel = app.screen.panel
        await wait_for(pilot, lambda: panel.comparison is not None, "budget computed")
        assert not panel.compact and panel.query_one("#fit-util", Input).display
        assert "usable" in flat(text_of(app))


async def test_too_small_terminal_says_so() -> None:
    app, _ = F.seat_app()
    async with app.run_test(size=(50, 10)) as pilot:
        await pilot.pause()
        assert "Terminal 50×10 is too small" in flat(text_of(app))
        assert "at least 60×12" in flat(text_of(app))


async def test_two_columns_from_160() -> None:
    app, _ = F.seat_app()
    async with app.run_test(size=(160, 50)) as pilot:
        await all_read(pilot, app)
        timers = app.states["timers"].panel.region
        silences = app.states["silences"].panel.region
        assert timers.y == silences.y and silences.x >= timers.right  # side by side
        assert app.states["gpus"].panel.region.width >= 150             # spans both


# -- keys and focus --------------------------------------------------------------------------
async def test_escape_in_a_field_keeps_scrolling_and_focus_visible() -> None:
    app, _ = F.seat_app(compact=False)
    async with app.run_test(size=(100, 30)) as pilot:
        await all_read(pilot, app)
        scroll = app.query_one("#panels")
        assert scroll.max_scroll_y > 0
        fit = app.states["fit"].panel
        fit.query_one("#fit-util", Input).focus()
        await pilot.pause()
        assert "Esc leave field" in flat(text_of(app).splitlines()[-1])
        await pilot.press("escape")
        await wait_for(pilot, lambda: app.focused is fit, "the field's panel focused")
        assert fit.styles.border_top[0] == "heavy"               # the focus is visible
        assert "leave field" not in text_of(app).splitlines()[-1]
        scroll.scroll_home(animate=False)
        await pilot.pause()
        await pilot.press("pagedown")
        await wait_for(pilot, lambda: scroll.scroll_y > 0, "PageDown scrolled")
        y = scroll.scroll_y
        await pilot.press("escape")                                # Escape again: no harm
        await pilot.press("down")
        await wait_for(pilot, lambda: scroll.scroll_y > y or scroll.scroll_y == scroll.max_scroll_y,
                       "down still scrolls")


async def test_first_panel_focused_and_tab_moves_the_visible_focus() -> None:
    app, _ = F.seat_app()
    async with app.run_test(size=(80, 24)) as pilot:
        await all_read(pilot, app)
        gpus, timers = app.states["gpus"].panel, app.states["timers"].panel
        assert app.focused is gpus and gpus.styles.border_top[0] == "heavy"
        assert timers.styles.border_top[0] != "heavy"
        # "⏎ details" leaves the footer at 80 columns for the runbook's action keys (issue 30);
        # Enter still opens the detail view (tests/test_screen_80x24.py)
        await pilot.press("tab")
        await wait_for(pilot, lambda: app.focused is timers, "tab to timers")
        assert timers.styles.border_top[0] == "heavy" and gpus.styles.border_top[0] != "heavy"


async def test_tab_stops_only_where_the_focus_shows_and_the_keys_still_scroll() -> None:
    """Tab stopped, after the last panel, on the panels' scrolling column (``#panels``),
    whose focus shows nowhere; every stop is now a panel with its bright border (or, in the
    full forms, a what-if control), and PgDn still scrolls the column from a panel."""
    app, _ = F.seat_app(with_actions=True)
    async with app.run_test(size=(80, 24)) as pilot:
        await all_read(pilot, app)
        panels = [st.panel for st in app.states.values()]
        seen = []
        for _ in range(len(panels) + 1):
            await pilot.press("tab")
            await pilot.pause()
            seen.append(app.focused)
            assert isinstance(app.focused, SourcePanel), app.focused
            assert app.focused.styles.border_top[0] == "heavy", app.focused
        assert set(seen) == set(panels)
        scroll = app.query_one("#panels")
        assert scroll.max_scroll_y > 0
        scroll.scroll_home(animate=False)
        await pilot.pause()
        await pilot.press("pagedown")
        await wait_for(pilot, lambda: scroll.scroll_y > 0, "PgDn scrolled from a panel")
    app, _ = F.seat_app(compact=False)
    async with app.run_test(size=(100, 30)) as pilot:
        await all_read(pilot, app)
        for _ in range(len(app.screen.focus_chain) + 1):
            await pilot.press("tab")
            await pilot.pause()
            assert app.focused is not scroll and app.focused.id != "panels", app.focused


async def test_paused_panels_say_paused_and_promise_no_retry() -> None:
    """While paused, the GPU panel of an unavailable NVML said "retry every 10 s": nothing is
    read until p again, so every panel says "paused" instead (and the retry is back on
    resume)."""
    app, srcs = F.seat_app()
    srcs["gpus"].read = lambda: Unavailable(source="nvml", kind="no-library",
                                            reason="libnvidia-ml.so.1 not found")
    async with app.run_test(size=(80, 24)) as pilot:
        await all_read(pilot, app)
        gpus, timers = app.states["gpus"].panel, app.states["timers"].panel
        await wait_for(pilot, lambda: "retry every" in str(gpus.border_title), "a retry said")
        await pilot.press("p")
        await wait_for(pilot, lambda: app.paused, "paused")
        await pilot.pause()
        for panel in (gpus, timers):
            title = str(panel.border_title)
            assert title.endswith(" · paused") and "retry" not in title, title
        head = next(x for x in text_of(app).splitlines() if "GPUs" in x)
        assert "paused" in head and "retry" not in head, head
        await pilot.press("p")
        await wait_for(pilot, lambda: "retry every" in str(gpus.border_title), "retry again")
        assert "paused" not in str(timers.border_title)


async def test_p_shows_resume_while_paused() -> None:
    app, _ = F.seat_app()
    async with app.run_test(size=(100, 30)) as pilot:
        await all_read(pilot, app)
        footer = lambda: text_of(app).splitlines()[-1]  # noqa: E731
        # the footer recomposes when the bindings change (as the first readings arrive): wait
        # for it to show its keys rather than read it once (CI once read a blank last line)
        await wait_for(pilot, lambda: "p pause" in footer(), "pause offered")
        assert "resume" not in footer()
        await pilot.press("p")
        await wait_for(pilot, lambda: app.paused and "p resume" in footer(), "resume offered")
        await pilot.press("p")
        await wait_for(pilot, lambda: not app.paused and "p pause" in footer(), "pause again")


async def test_help_says_how_to_close_and_scroll() -> None:
    app, _ = F.seat_app()
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("question_mark")
        await pilot.pause(0.05)
        text = flat(text_of(app))
        assert "Close: Esc, q or ?" in text and "Scroll: ↑ ↓, PgUp PgDn" in text


# -- redraw only what changed ----------------------------------------------------------------
async def test_a_tick_with_unchanged_readings_redraws_nothing(monkeypatch) -> None:
    app, srcs = F.seat_app()
    calls: list[tuple[str, bool]] = []
    real = Widget.refresh

    def counting(self, *a, **k):
        if counting.on:
            calls.append((type(self).__name__, bool(k.get("layout"))))
        return real(self, *a, **k)

    counting.on = False
    monkeypatch.setattr(Widget, "refresh", counting)
    async with app.run_test(size=(120, 40)) as pilot:
        await all_read(pilot, app)
        await refresh_all(pilot, app)        # ages settle ("just now"), the engine has 2 scrapes
        draws = {k: st.panel.draws for k, st in app.states.items()}
        fit = app.states["fit"].panel
        recomputes = fit.recomputes
        counting.on = True
        for _ in range(3):
            await refresh_all(pilot, app)    # equal readings (new timestamps only)
            app.tick_ages()                  # the once-a-second age tick
            await pilot.pause()
        counting.on = False
        assert calls == [], calls            # no repaint, let alone a layout
        assert {k: st.panel.draws for k, st in app.states.items()} == draws
        assert fit.recomputes == recomputes   # the fit budget is not recomputed
        # the counting itself works: a changed reading is redrawn
        srcs["engine"].reading = F.engine(healthy=False)
        counting.on = True
        await refresh_all(pilot, app)
        counting.on = False
        assert calls and app.states["engine"].panel.draws == draws["engine"] + 1


def test_same_reading_ignores_only_the_timestamp() -> None:
    a, b = F.timers(), F.timers().model_copy(update={"read_at": T0 + timedelta(seconds=1)})
    assert same_reading(a, b)
    c = F.timers().model_copy(update={"where": "ssh node"})
    assert not same_reading(a, c) and not same_reading(a, None)
    u1 = Unavailable(source="x", kind="k", reason="r")
    assert same_reading(u1, Unavailable(source="x", kind="k", reason="r"))
    assert not same_reading(u1, Unavailable(source="x", kind="k", reason="other"))


def test_coarse_ages_change_rarely() -> None:
    assert [fmt_coarse_age(s, 2.0) for s in (0.3, 2.0, 3, 9.9, 10, 19, 59, 61, 3725)] == [
        "just now", "just now", "3 s", "9 s", "10 s", "10 s", "50 s", "1 min", "1 h 02 min"]


async def test_fit_panel_recomputes_only_when_its_inputs_change() -> None:
    inputs = F.fit_inputs()
    app, srcs = F.seat_app(compact=False)
    async with app.run_test(size=(160, 60)) as pilot:
        await all_read(pilot, app)
        fit: FitPanel = app.states["fit"].panel
        n = fit.recomputes
        host = inputs.host.model_copy(update={"available_bytes": inputs.host.available_bytes
                                              + 10 * (1 << 20)})      # +10 MiB: noise
        srcs["fit"].reading = inputs.model_copy(update={"host": host})
        await refresh_all(pilot, app)
        assert fit.recomputes == n
        seat = inputs.seat.model_copy(update={"max_model_len": 131072})  # a real change
        srcs["fit"].reading = inputs.model_copy(update={"seat": seat})
        await refresh_all(pilot, app)
        assert fit.recomputes == n + 1


# -- engine rates ------------------------------------------------------------------------------
def hist(count: int, buckets: list[tuple[float, float]]) -> HistogramSummary:
    return HistogramSummary(count=count, sum_s=0.0, mean_s=None, p50_s=None, p95_s=None,
                            buckets=tuple(buckets))


def test_counter_rates_and_reset() -> None:
    assert counter_rate(100, 160, 2.0) == 30.0
    assert counter_rate(100, 40, 2.0) is None       # the engine restarted: unknown, not <0
    assert counter_rate(None, 40, 2.0) is None and counter_rate(1, 2, 0) is None


def test_window_percentiles_from_bucket_deltas() -> None:
    inf = float("inf")
    old = hist(100, [(0.1, 90), (0.5, 100), (inf, 100)])
    new = hist(110, [(0.1, 90), (0.5, 110), (inf, 110)])   # 10 new, all in (0.1, 0.5]
    lat = window_latency(old, new)
    assert lat.n == 10 and 0.1 < lat.p50_s <= 0.5 and lat.p95_s <= 0.5
    assert window_latency(new, old) is None                 # reset
    assert window_latency(old, old).n == 0


def test_rate_history_over_the_last_interval() -> None:
    m = F.engine().metrics
    h = RateHistory(window_s=60)
    h.add(T0, m)
    assert h.rates().req_per_s is None                      # one scrape: unknown
    m2 = m.model_copy(update={"requests_finished": (m.requests_finished or 0) + 4,
                              "generation_tokens": (m.generation_tokens or 0) + 200})
    h.add(T0 + timedelta(seconds=2), m2)
    r = h.rates()
    assert r.req_per_s == 2.0 and r.out_tok_per_s == 100.0 and r.interval_s == 2.0


def _engine_with_traffic(requests: int, tokens: int):
    """The recorded engine reading 1 s after T0 with ``requests`` more finished requests and
    ``tokens`` more generated tokens (counters; 1 s apart they are the rates per second)."""
    m = F.engine().metrics
    return F.engine().model_copy(update={
        "read_at": T0 + timedelta(seconds=1),
        "metrics": m.model_copy(update={
            "requests_finished": (m.requests_finished or 0) + requests,
            "generation_tokens": (m.generation_tokens or 0) + tokens})})


async def test_engine_panel_shows_rates_in_stable_columns() -> None:
    app, srcs = F.seat_app()
    async with app.run_test(size=(100, 30)) as pilot:
        await all_read(pilot, app)
        srcs["engine"].reading = _engine_with_traffic(requests=3, tokens=1234)
        await refresh_all(pilot, app)
        line = next(x for x in text_of(app).splitlines() if "req/s" in x)
        assert "req/s    3.0 · tok/s  1234.0" in line
        col = line.index("tok/s")
        srcs["engine"].reading = srcs["engine"].reading.model_copy(update={
            "read_at": T0 + timedelta(seconds=2)})          # no traffic: rates fall to 0
        await refresh_all(pilot, app)
        line2 = next(x for x in text_of(app).splitlines() if "req/s" in x)
        assert "req/s    0.0 · tok/s     0.0" in line2 and line2.index("tok/s") == col


async def test_exited_container_says_exited_not_started() -> None:
    app, srcs = F.seat_app()
    srcs["containers"].reading = F.containers(running=False)
    async with app.run_test(size=(100, 30)) as pilot:
        await all_read(pilot, app)
        row = next(x for x in text_of(app).splitlines() if "seat-resident  exited" in x)
        assert "exited (137)" in row and "exited 3 min ago" in row   # compact: coarse
        assert "started" not in row


@pytest.mark.parametrize("panel_cls", [SourcePanel])
def test_panels_are_focusable(panel_cls) -> None:
    assert panel_cls.can_focus


# -- fresh-eyes defects (LEAD 10:30) -----------------------------------------------------------
def plain(renderable, width: int = 150) -> str:
    """A Rich renderable as plain text (the widget's content, scrolled into view or not)."""
    from rich.console import Console

    con = Console(width=width, record=True, file=open("/dev/null", "w"), color_system=None)
    con.print(renderable)
    return con.export_text()


def _rates_row(app: SeatConsoleApp) -> str:
    body = app.states["engine"].panel.query_one("#engine-body").content
    return next(x for x in plain(body).splitlines() if "req/s" in x and "output tok/s" in x)


async def test_full_view_engine_rates_fall_to_zero_when_idle_not_n_a() -> None:
    app, srcs = F.seat_app()
    async with app.run_test(size=(160, 50)) as pilot:
        await all_read(pilot, app)
        assert not app.states["engine"].panel.compact
        srcs["engine"].reading = _engine_with_traffic(requests=3, tokens=1234)
        await refresh_all(pilot, app)
        assert re.search(r"req/s +3\.0 .*output tok/s +1234\.0", _rates_row(app))
        srcs["engine"].reading = srcs["engine"].reading.model_copy(update={
            "read_at": T0 + timedelta(seconds=2)})          # idle: an equal scrape
        await refresh_all(pilot, app)
        row = _rates_row(app)
        assert re.search(r"req/s +0\.0 .*output tok/s +0\.0", row), row   # not stale 3.0


async def test_full_view_idle_engine_two_scrapes_is_zero_not_n_a() -> None:
    app, srcs = F.seat_app()
    async with app.run_test(size=(160, 50)) as pilot:
        await all_read(pilot, app)
        assert "n/a" in _rates_row(app)                     # one scrape: unknown
        srcs["engine"].reading = F.engine().model_copy(update={
            "read_at": T0 + timedelta(seconds=2)})
        await refresh_all(pilot, app)
        row = _rates_row(app)
        assert re.search(r"req/s +0\.0 .*output tok/s +0\.0", row), row


def _with_expired(n: int = 50, active: bool = True):
    """The seat's silences plus ``n`` expired ones (Alertmanager keeps them for days)."""
    from seat_console.node.alertmanager import Silence

    r = F.silences(active)
    old = tuple(Silence(id=f"e{i:015d}", state="expired", matchers=r.seat_matchers,
                        starts_at=T0 - timedelta(hours=30 + i), ends_at=T0 - timedelta(hours=29 + i),
                        created_by="seat-console", comment=f"old hold {i}") for i in range(n))
    return r.model_copy(update={"silences": r.silences + old, "total": 3 + n})


async def test_expired_silences_are_counted_not_listed_except_on_the_detail_view() -> None:
    app, srcs = F.seat_app()
    srcs["silences"].reading = _with_expired()
    async with app.run_test(size=(160, 50)) as pilot:
        await all_read(pilot, app)
        panel = app.states["silences"].panel
        body = plain(panel.query_one("#silences-body").content)
        assert "50 expired (Enter for details)" in body
        assert "5d2c9a1e" in body and "old hold" not in body
        assert panel.size.height < 12                      # Fit/Engine stay above the fold
        assert app.states["fit"].panel.region.y < 50
        panel.focus()
        await pilot.press("enter")
        await wait_for(pilot, lambda: isinstance(app.screen, DetailScreen), "detail view")
        await pilot.pause(0.05)
        detail = plain(app.screen.panel.query_one("#silences-body").content)
        assert detail.count("old hold") == 50 and "expired (Enter" not in detail


def test_status_text_counts_expired_silences_in_one_line() -> None:
    from seat_console.commands.status_cmd import render_silences

    out = render_silences(_with_expired(), T0)
    assert "50 expired silences not shown (--json lists all)" in out
    assert "old hold" not in out and "5d2c9a1e" in out
    assert len(out.splitlines()) <= 8


@pytest.mark.parametrize("readonly", [False, True])
async def test_footer_shows_every_node_key_at_160_and_120_and_fits_80(readonly) -> None:
    """Issue 18: the footer hid H B S R U at 120 columns although they fit there; at 80 it
    drops the rarest keys (saying "? all keys") and nothing runs under the palette's key (the
    stray character in the last column, "palettec")."""
    app, _ = F.seat_app()
    app.readonly = readonly
    node_keys = ("H hold", "U release", "B build", "S swap", "R restore", "P probe")
    async with app.run_test(size=(160, 50)) as pilot:
        await all_read(pilot, app)
        for width in (160, 120):
            await pilot.resize_terminal(width, 40)
            # "? help", or "? all keys" once "⏎ details" / "e evidence" leave (120 columns,
            # since issue 30's g and c keys)
            await wait_for(pilot, lambda: "H hold" in text_of(app).splitlines()[-1]
                           or (readonly and "? help" in text_of(app).splitlines()[-1]), "footer")
            footer = text_of(app).splitlines()[-1]
            for key in node_keys:
                assert (key in footer) is (not readonly), (width, key, footer)
            assert footer.rstrip().endswith("^p palette"), footer
        await pilot.resize_terminal(80, 24)
        await wait_for(pilot, lambda: len(text_of(app).splitlines()[-1].rstrip()) <= 80
                       and (readonly or "all keys" in text_of(app).splitlines()[-1]), "narrow")
        footer = text_of(app).splitlines()[-1]
        assert "q quit" in footer and "^p palette" in footer
        # issue 30: the viewing keys (r refresh, p pause) go first, the action keys stay
        assert ("S swap" in footer and "P probe" in footer) is (not readonly), footer
        assert ("? all keys" in footer) is (not readonly)
        assert footer.rstrip().endswith("^p palette"), footer
        left = footer.rstrip()[:-len("^p palette")].rstrip(" ▏|")
        assert not left.endswith(("c", "palette")), footer


def test_help_lists_p_once_for_pause_and_resume() -> None:
    app, _ = F.seat_app()
    rows = app.help_keys()
    assert [k for k, _ in rows].count("p") == 1
    assert ("p", "pause / resume") in rows


def _segments_with(app: SeatConsoleApp, word: str):
    return [seg for strip in app.screen._compositor.render_strips() for seg in strip
            if word in seg.text]


async def test_no_color_alarms_are_reverse_bold_not_grey_on_grey(monkeypatch) -> None:
    monkeypatch.setenv("NO_COLOR", "1")
    app, srcs = F.seat_app()
    srcs["engine"].reading = F.engine(healthy=False)
    srcs["containers"].reading = F.containers(running=False)
    async with app.run_test(size=(100, 30)) as pilot:
        await all_read(pilot, app)
        for word in ("DOWN", "exited"):
            segs = _segments_with(app, word)
            assert segs, word
            for seg in segs:
                st = seg.style
                assert st.color is None or st.color.is_default, (word, st)   # no grey
                assert st.bgcolor is None or st.bgcolor.is_default, (word, st)
            assert any(s.style.reverse and s.style.bold for s in segs), (word, segs)


def test_no_color_alarm_colours() -> None:
    from rich.color import Color as RC
    from seat_console.widgets.nocolor import is_alarm_colour

    assert is_alarm_colour(RC.parse("red")) and is_alarm_colour(RC.parse("#ffa62b"))
    assert is_alarm_colour(RC.parse("yellow"))
    assert not is_alarm_colour(RC.parse("green")) and not is_alarm_colour(RC.parse("#303030"))
    assert not is_alarm_colour(None) and not is_alarm_colour(RC.parse("default"))


async def test_full_view_columns_never_split_a_name_mid_word() -> None:
    app, _ = F.seat_app()
    async with app.run_test(size=(160, 50)) as pilot:
        await all_read(pilot, app)
        timers = plain(app.states["timers"].panel.query_one("#timers-body").content, 74)
        for word in ("fleet-remediation-cycle.timer", "seat-conformance-smoke.timer",
                     "active/waiting", "12:06:31Z", "11:52:00Z", "svc"):
            assert word in timers, (word, timers)
        containers = plain(app.states["containers"].panel.query_one(
            "#containers-body").content, 74)
        assert "seat-resident" in containers and "running" in containers, containers


@pytest.mark.parametrize("size", [(120, 40), (180, 40), (120, 60)])
async def test_panels_are_mounted_in_the_form_the_size_asks_for(monkeypatch, size) -> None:
    """The main screen composes each panel in its compact or full form for the terminal's
    size, so the first resize restyles none of them (issue 33: a restyle of every panel at
    start-up); the forms are those :meth:`MainScreen.apply_size` gives."""
    from seat_console.tui.main_screen import panel_compact

    restyled: list[str] = []
    set_compact = SourcePanel.set_compact

    def spy(self, compact: bool) -> None:
        if self.is_mounted and compact != self.compact:
            restyled.append(self.id)
        set_compact(self, compact)

    monkeypatch.setattr(SourcePanel, "set_compact", spy)
    app, _ = F.seat_app(with_actions=True)
    async with app.run_test(size=size) as pilot:
        await all_read(pilot, app)
        assert restyled == []
        for st in app.states.values():
            want = panel_compact(app, *size, st.panel)
            assert st.panel.compact is want and ("-compact" in st.panel.classes) is want
        assert any(st.panel.compact for st in app.states.values()) is (size[1] < 50
                                                                         or size[0] >= 160)


async def test_a_panels_first_reading_restyles_it_once(monkeypatch) -> None:
    """A reading that changes several of a panel's classes (``-waiting``, ``-no-value``,
    ``-has-compact``…) restyles the panel's subtree once, not once per class (issue 33); the
    classes end as each change asks."""
    per_show: list[tuple[str, int]] = []
    inside: list[int] = []
    update, show = SourcePanel.update_node_styles, SourcePanel.show

    def spy_update(self, animate: bool = True) -> None:
        if inside:
            inside[-1] += 1
        update(self, animate)

    def spy_show(self, *args, **kw) -> None:
        inside.append(0)
        try:
            show(self, *args, **kw)
        finally:
            per_show.append((self.id, inside.pop()))

    monkeypatch.setattr(SourcePanel, "update_node_styles", spy_update)
    monkeypatch.setattr(SourcePanel, "show", spy_show)
    app, _ = F.seat_app(with_actions=True)
    async with app.run_test(size=(120, 40)) as pilot:
        await all_read(pilot, app)
        assert len({pid for pid, _ in per_show}) == len(app.states)
        assert all(n <= 1 for _, n in per_show), per_show
        assert sum(n for _, n in per_show) >= len(app.states) - 1   # the classes did change
        for st in app.states.values():
            assert "-waiting" not in st.panel.classes
            assert ("-has-compact" in st.panel.classes) is (
                st.panel.compact and st.panel.render_compact(st.panel._shown) is not None)
