"""The live probe panel and its screen (pure views of :class:`~seat_console.probe.live.LiveView`).

:class:`ProbePanel` draws, per phase, a progress bar of completed (█) and failed (✗) requests
out of the expected population with the counts in words, then the live output tok/s and a
sparkline of it, TTFT / ITL p50 and p95 of recent requests with their populations, the engine's
running / waiting requests and KV-cache usage ("n/a" when not read, never 0), and the run's
state in plain words — DISRUPTED / INCOMPLETE / INTERRUPTED say there is no headline.
:class:`ProbeScreen` holds the panel while a probe runs: ``x`` stops the probe (the run is kept
as interrupted), Escape closes the screen (the probe goes on; the probe key reopens it).
No I/O here; the app feeds :meth:`ProbeScreen.show` from the probe's worker.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import ClassVar

from rich.text import Text
from seat_console.core.fmt import share_text
from seat_console.probe.live import LiveView
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.css.query import NoMatches
from textual.screen import ModalScreen
from textual.widgets import Footer, Static

BAR_WIDTH = 30
"""Characters of a phase's progress bar."""

SPARK = "▁▂▃▄▅▆▇█"


def progress_bar(completed: int, failed: int, expected: int, width: int = BAR_WIDTH) -> Text:
    """``[█████✗✗·····]``: completed then failed, as shares of ``expected`` (rounded down, at
    least one cell for any failure so a failure is never invisible)."""
    if expected <= 0:
        return Text("[" + "·" * width + "]")
    done = completed * width // expected
    bad = failed * width // expected
    if failed and not bad:
        bad = 1
    done = min(done, width - bad)
    rest = width - done - bad
    t = Text("[")
    t.append("█" * done, style="green")
    t.append("✗" * bad, style="bold red")
    t.append("·" * rest, style="dim")
    t.append("]")
    return t


def sparkline(values: tuple[float, ...]) -> str:
    """Unicode block sparkline of ``values`` scaled to their maximum (all zero → lowest bar)."""
    if not values:
        return ""
    top = max(values)
    if top <= 0:
        return SPARK[0] * len(values)
    return "".join(SPARK[min(int(v / top * (len(SPARK) - 1) + 0.5), len(SPARK) - 1)]
                   for v in values)


def _ms(x: float | None) -> str:
    return "n/a" if x is None else f"{x * 1000:,.1f} ms"


def render_live(v: LiveView) -> Text:
    """The panel's whole text for one :class:`LiveView`."""
    t = Text()
    alarm = v.status in ("disrupted", "incomplete", "interrupted", "failed") or v.disruptions
    t.append(f"probe {v.run_id}  ", style="bold")
    t.append(v.words + "\n", style="bold red" if alarm else
             ("bold green" if v.status == "complete" else "bold"))
    for ph in v.phases:
        t.append(f"{ph.name:<16} ")
        t.append_text(progress_bar(ph.completed, ph.failed, ph.expected))
        t.append(f" {ph.completed}/{ph.expected} completed, {ph.failed} failed")
        if ph.in_flight:
            t.append(f", {ph.in_flight} in flight")
        if ph.slo_met is not None:
            t.append("; goodput " + share_text(ph.slo_met, ph.completed + ph.failed,
                                               ph.goodput_low, ph.goodput_high))
        if ph.state not in ("running", "measured"):
            t.append(f" — {ph.state}", style="red" if ph.state.startswith(
                ("incomplete", "disrupted", "unverified")) else "dim")
        t.append("\n")
    if v.tok_s is None or v.tok_s_window_s is None:
        t.append("output — tok/s (no phase has run yet)  ")
    else:
        t.append(f"output {v.tok_s:,.1f} tok/s (last {v.tok_s_window_s:.1f} s of "
                 f"{v.tok_s_phase})  ")
    t.append(sparkline(v.spark), style="cyan")
    t.append("\n")
    t.append(f"TTFT p50 {_ms(v.ttft_p50_s)} p95 {_ms(v.ttft_p95_s)} (n={v.ttft_n})   "
             f"ITL p50 {_ms(v.itl_p50_s)} p95 {_ms(v.itl_p95_s)} (n={v.itl_n})")
    if v.itl_p50_s == 0:   # docs/probe.md, Timestamps: tokens that arrive in one read
        t.append(" (0 = tokens arrived in one network read)", style="dim")
    t.append("\n")
    run = "n/a" if v.running is None else f"{v.running:.0f}"
    wait = "n/a" if v.waiting is None else f"{v.waiting:.0f}"
    kv = "n/a" if v.kv_usage is None else f"{v.kv_usage * 100:.1f} %"
    t.append(f"engine: {run} running, {wait} waiting, KV cache {kv} used\n")
    for d in v.disruptions:
        t.append(f"DISRUPTED {d}\n", style="bold red")
    for p in v.problems:
        t.append(f"NOT WATCHED {p}\n", style="yellow")
    return t


class ProbePanel(Static):
    """Draws one :class:`LiveView` (call :meth:`show`); redraws only when the text changes."""

    DEFAULT_CSS = """
    ProbePanel { border: round $accent; padding: 0 1; height: auto; }
    """

    def __init__(self, **kwargs: object) -> None:
        super().__init__("probe: starting…", **kwargs)  # type: ignore[arg-type]
        self._last: str | None = None
        self.border_title = "probe"

    def show(self, view: LiveView) -> None:
        """Render ``view`` (no I/O)."""
        text = render_live(view)
        if text.plain != self._last:
            self._last = text.plain
            self.update(text)


LIVE_STATUSES = frozenset({"starting", "running"})
"""A probe run's statuses while it runs; any other is its end (complete, interrupted, …)."""


class ProbeScreen(ModalScreen[None]):
    """The live probe: ``x`` stops it (kept as interrupted), Escape closes the screen (the
    probe goes on). Once the run has ended (its view's status not in :data:`LIVE_STATUSES`)
    the footer offers only "Esc close": the stop key and "probe goes on" are gone."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("x", "stop_probe", "stop probe", id="probe-stop"),
        Binding("escape", "dismiss", "close (probe goes on)", key_display="Esc",
                id="probe-close"),
        Binding("escape", "close_ended", "close", key_display="Esc", id="probe-close-ended"),
    ]
    DEFAULT_CSS = """
    ProbeScreen { align: center middle; }
    ProbeScreen > Vertical { width: 100; height: auto; max-height: 90%; }
    """

    def __init__(self, stop: Callable[[], None], view: LiveView | None = None) -> None:
        super().__init__()
        self._stop = stop
        self._view = view
        self.ended = False
        """Whether the run has ended (the footer then offers only "Esc close")."""

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """While the probe runs: stop and "close (probe goes on)"; once it ended: "close"."""
        if action in ("stop_probe", "dismiss"):
            return not self.ended
        if action == "close_ended":
            return self.ended
        return True

    def mark_ended(self) -> None:
        """The run ended (its outcome came, whatever its last view said): the footer offers
        only "Esc close"."""
        if not self.ended:
            self.ended = True
            self.refresh_bindings()

    def action_close_ended(self) -> None:
        """Escape after the run ended: close the screen."""
        self.dismiss()

    def compose(self) -> ComposeResult:
        with Vertical():
            yield ProbePanel(id="probe-panel")
        yield Footer()

    def on_mount(self) -> None:
        if self._view is not None:
            self.show(self._view)

    def show(self, view: LiveView) -> None:
        """Draw ``view`` in the panel; a view of an ended run changes the footer's keys."""
        self._view = view
        if view.status not in LIVE_STATUSES:
            self.mark_ended()
        try:
            panel = self.query_one(ProbePanel)
        except NoMatches:   # not mounted yet / already closed: on_mount draws the last view
            return
        panel.show(view)

    def action_stop_probe(self) -> None:
        """Ask the probe to stop (it keeps the run as interrupted)."""
        self._stop()
        self.notify("stopping the probe: in-flight requests are recorded as interrupted")


__all__ = ["BAR_WIDTH", "LIVE_STATUSES", "ProbePanel", "ProbeScreen", "progress_bar", "render_live", "sparkline"]
