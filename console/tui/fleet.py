"""The fleet screen (``seat-console fleet``): one row per seat, trouble first.

Shape (the single-node app's rules, ``console/app.py``): the blocking
:meth:`~seat_console.fleet.rows.Fleet.refresh` runs on a daemon thread of its own (a request
hung past its timeout cannot keep the process alive at exit); its reading comes back as a
:class:`FleetRefreshed` message; the next refresh is scheduled only when the last one has
finished (``interval``, backing off to ``min(max(2 × interval, 5), 30)`` s while Prometheus
does not answer), so refreshes never overlap and the UI thread does no I/O.

Reading: a refresh reads every seat's states (the order, the filter, the header's counts) but
the moving numbers — requests, KV cache, GPU memory — only for the rows on screen and a page
around them (:meth:`FleetApp.window_instances`, handed to
:meth:`~seat_console.fleet.rows.Fleet.refresh`); rows scrolled or filtered into view between
refreshes get theirs at once from a numbers-only read, and show ``…`` (not read) until it
answers.

Drawing: the table (:class:`~seat_console.tui.fleet_table.FleetTable`, a Line-API widget)
renders only its visible window, each row from a cache keyed by the row's content; a refresh
hands it the (filtered) rows, whose texts are built only for the rows it draws, and only the
visible rows whose cells changed are repainted (nothing when none did). A new order repaints the window once, keeping the cursor on
its seat. Column widths come from the terminal's width (:func:`layout`): 80 columns fit the
narrow set, 140 and more the wide one.

Keys: ``/`` filter (substring of node, instance, state, engine, hold, silence, probe; Escape
clears), Enter
the seat's last hour (range queries, :mod:`seat_console.fleet.detail`), ``a`` the seat's own
console when the inventory names its profile (the app is suspended while it runs; over SSH
with the argument list of :func:`~seat_console.fleet.setup.console_argv`), ``r`` refresh
now, ``q`` quit. Every binding has an ``id``.

When Prometheus is down or slow the banner says so, with the reason and the age of the rows
still shown (the last good ones); partial-response warnings and failed queries are shown there
too.
"""

from __future__ import annotations

import subprocess
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from functools import partial
from typing import ClassVar

from rich.text import Text
from textual import on
from textual.app import App, ComposeResult, SuspendNotSupported
from textual.containers import VerticalScroll
from textual.message import Message
from textual.screen import ModalScreen
from textual.widgets import Footer, Input, Static

from seat_console.core.fmt import fmt_duration
from seat_console.fleet.detail import SeatHistory, fmt_point, read_history, spark
from seat_console.fleet.rows import (
    COLUMNS,
    RANK,
    REFRESH_QUERIES,
    REUSED_QUERIES,
    Fleet,
    FleetReading,
    FleetRow,
    cells,
    content_widths,
    iso,
)
from seat_console.fleet.setup import console_argv
from seat_console.tui import keys as keytable
from seat_console.tui.fleet_table import Content, FleetTable
from seat_console.tui.heap import FREEZE_AFTER_S, freeze_startup_heap
from seat_console.tui.quiet_driver import driver_class

_age = partial(fmt_duration, style="cell", unknown="?")
"""An age in a narrow place (the one duration rule, style ``cell``)."""

STATE_WORDS = {
    "without-lease": "hold WITHOUT LEASE (timers stopped, nothing will restore them)",
    "hold-overdue": ("hold OVERDUE (the lease's end has passed and the seat is still held: "
                     "its restore did not run)"),
    "down": "engine down and not held",
    "stale": "stale (no sample for two scrape intervals)",
    "no-series": "no series (an inventory seat Prometheus has nothing of)",
    "unknown": "unknown (a value that cannot be read; the detail view says which)",
    "held": "held (its lease, where known, still ahead)",
    "healthy": "healthy",
}
"""The rows' states in words, for the help (every state of
:data:`~seat_console.fleet.rows.RANK`; a test checks none is missing)."""


def states_in_trouble_order() -> str:
    """The states of :data:`STATE_WORDS` in :data:`~seat_console.fleet.rows.RANK` order."""
    return "; ".join(STATE_WORDS[s] for s in sorted(STATE_WORDS, key=lambda s: RANK[s]))


FLEET_HELP: list[tuple[str, list[str]]] = [
    ("Reading the fleet table", [
        f"One row per seat, trouble first: {states_in_trouble_order()}.",
        (f"Read from the fleet's Prometheus — at most {len(REFRESH_QUERIES)} instant queries per "
         f"refresh whatever the seat count ({len(REFRESH_QUERIES) - len(REUSED_QUERIES)} while "
         "the seats' node names are reused), a retry counted as one more; the header's 'N "
         "queries' is the last refresh's, '+M' the reads since of rows scrolled or filtered "
         "into view — and Alertmanager; a node's figures older than its staleness bound show "
         "as stale, never as current."),
        "Enter on a row: that seat's last hour (Esc, q or Enter back).",
    ]),
]
"""The fleet screen's help sections (its keys come from the key table)."""

WIDE_FROM_COLS = 140
BUSY_SHOWN_AFTER_S = 1.0
"""A refresh still running this long (s) is said in the header (``· refreshing``), at the
next of its once-a-second ticks."""
NARROW = {"node": 12, "engine": 11, "hold": 14, "silence": 7, "running": 4, "waiting": 4,
          "kv": 5, "gpu": 8, "probe": 7}
"""Narrow widths include the one-space gap (cell padding 0); the node column takes the rest."""
WIDE = {"node": 22, "engine": 12, "hold": 14, "silence": 13, "running": 5, "waiting": 5,
        "kv": 5, "gpu": 15, "probe": 22}
STYLE = {"without-lease": "bold red", "hold-overdue": "bold red", "down": "bold red",
         "stale": "yellow",
         "no-series": "yellow", "unknown": "yellow", "held": "cyan", "healthy": ""}

_STYLES = {(state, no_lease): (style, style, "bold red reverse" if no_lease else "")
           + ("",) * (len(COLUMNS) - 3)
           for state, style in STYLE.items() for no_lease in (False, True)}
"""Cell styles by (state, hold without lease), one shared tuple each."""


FLEX_MAX = {"node": 40, "probe": 30}
"""The most characters the two long columns get when the content would take more."""


def layout(width: int, needs: dict[str, int] | None = None) -> dict[str, int]:
    """Column widths (characters) for a terminal ``width`` columns wide.

    ``needs``: each column's content width (:func:`~seat_console.fleet.rows.content_widths`):
    every column gets its content (plus the one-space gap below :data:`WIDE_FROM_COLS`, where
    the cell padding is 0), the node and probe columns at most :data:`FLEX_MAX`, and when that
    is wider than the terminal the node column, then the probe column, give way down to 8.
    Without ``needs``, or when even that does not fit: the wide set from
    :data:`WIDE_FROM_COLS`, else the narrow set, whose node column takes what is left. (At
    120 columns the fixed set gave the node ~57 while a probe phase was cut to ``single-``
    and ``Silence`` ran into ``Run``.)"""
    if needs is not None:
        wide = width >= WIDE_FROM_COLS
        gap = 0 if wide else 1
        w = {k: needs.get(k, len(k)) + gap for k in NARROW}
        for k, most in FLEX_MAX.items():
            w[k] = min(w[k], most + gap)
        over = sum(w.values()) + (2 * len(w) + 2 if wide else 3) - width
        for k in ("node", "probe"):
            cut = min(max(over, 0), w[k] - 8)
            if cut > 0:
                w[k] -= cut
                over -= cut
        if over <= 0:
            return w
    if width >= WIDE_FROM_COLS:
        w = dict(WIDE)
        w["node"] = max(WIDE["node"], min(40, width - sum(WIDE.values()) + WIDE["node"]
                                          - 2 * len(WIDE) - 2))
        return w
    w = dict(NARROW)
    w["node"] = max(8, width - (sum(NARROW.values()) - NARROW["node"]) - 3)
    return w


def backoff_s(interval_s: float, failures: int) -> float:
    """Seconds to the next refresh: ``interval_s`` after a good one, else
    ``min(max(2 × interval, 5), 30)`` (STYLE.md's back-off)."""
    return interval_s if failures <= 0 else min(max(2 * interval_s, 5.0), 30.0)


class FleetRefreshed(Message):
    """A refresh finished: ``reading``; ``started`` is its ``time.perf_counter()`` start."""

    def __init__(self, reading: FleetReading, started: float) -> None:
        super().__init__()
        self.reading = reading
        self.started = started


class NumbersRead(Message):
    """The moving numbers of rows that came into view were read: ``reading`` (``base`` with
    them filled in)."""

    def __init__(self, base: FleetReading, reading: FleetReading) -> None:
        super().__init__()
        self.base = base
        self.reading = reading


class HistoryRead(Message):
    """The detail view's range queries finished (``history``) or failed (``error``)."""

    def __init__(self, history: SeatHistory | None, error: str | None = None) -> None:
        super().__init__()
        self.history = history
        self.error = error


def _daemon(fn: Callable[[], None], name: str) -> None:
    threading.Thread(target=fn, name=name, daemon=True).start()


class SeatDetail(ModalScreen[None]):
    """One seat: its row in words and its last hour as sparklines (read in a daemon thread)."""

    BINDINGS: ClassVar = keytable.bindings(keytable.FLEET_DETAIL_KEYS)
    DEFAULT_CSS = """
    SeatDetail { align: center middle; }
    SeatDetail > VerticalScroll { width: 96%; height: 92%; border: round $accent;
                                  background: $surface; padding: 0 1; }
    """

    def __init__(self, fleet: Fleet, row: FleetRow, read_at: float | None = None) -> None:
        super().__init__()
        self.fleet = fleet
        self.row = row
        self.read_at = read_at
        """When the row's figures were read (unix s; the refresh's time), said with them."""
        self.history: SeatHistory | None = None

    def compose(self) -> ComposeResult:
        with VerticalScroll():
            yield Static(self._summary(), id="detail-summary")
            yield Static("reading the last hour …", id="detail-history")

    def _summary(self) -> Text:
        """The row in words: its figures as the table showed them, at the reading's instant
        (:attr:`read_at`; the clock when unknown), in the table's units."""
        r, now = self.row, time.time()
        at = now if self.read_at is None else self.read_at
        c = dict(zip([k for k, _ in COLUMNS], cells(r, at), strict=True))
        t = Text()
        t.append(f"{r.node}", style="bold")
        t.append(f"  ({r.instance})  {r.state}\n", style=STYLE.get(r.state, ""))
        seen = (f"{iso(r.last_seen)} ({_age(now - r.last_seen)} ago)" if r.last_seen
                else "unknown" if r.unknown else "never")
        t.append(f"last sample {seen}\n")
        if self.read_at is not None:
            t.append(f"figures below read at {iso(self.read_at)}; the last hour ends at that "
                     "instant\n")
        t.append(f"engine {c['engine']} · hold {c['hold'] or 'n/a'} · silence {c['silence']}"
                 f"{' (exporter: Alertmanager unread)' if r.silence_from == 'exporter' else ''}\n")
        t.append(f"requests running {c['running']} waiting {c['waiting']} · KV cache {c['kv']}"
                 f" · GPU memory {c['gpu']}"
                 + (" GiB (GiB = 2^30 B; " if c["gpu"][:1].isdigit() else " (")   # figures: GiB
                 + f"{max(r.gpus, 0)} card(s) with DCGM series)\n")
        if r.hold_until and r.state == "hold-overdue":
            t.append(f"hold lease OVERDUE: it was to fire at {iso(r.hold_until)} "
                     f"({_age(at - r.hold_until)} before the figures) and the seat is still "
                     "held — its restore did not run; see the node's lease timer\n",
                     style="bold red")
        elif r.hold_until:
            t.append(f"hold lease fires {iso(r.hold_until)}\n")
        t.append("seat down in its last runbook run: " + ("n/a (none measured)" if r.downtime_s
                                                          is None else f"{r.downtime_s:.1f} s")
                 + "\n")
        if r.probe_phase or r.runbook or r.stage:
            t.append(f"probe phase {r.probe_phase or '-'} · runbook {r.runbook or '-'} · "
                     f"next stage {r.stage or '-'}\n")
        if r.sources_down:
            t.append(f"exporter sources down: {', '.join(r.sources_down)}\n", style="yellow")
        for why in r.unknown:
            t.append(f"{why}\n", style="yellow")
        return t

    def on_mount(self) -> None:
        fleet, inst, at = self.fleet, self.row.instance, self.read_at

        def work() -> None:
            try:
                h = read_history(fleet.prom, inst, now=at)   # one instant with the figures
                self.post_message(HistoryRead(h))
            except Exception as exc:  # noqa: BLE001 - shown in the view
                self.post_message(HistoryRead(None, f"{type(exc).__name__}: {exc}"))

        _daemon(work, f"fleet-history:{inst}")

    @on(HistoryRead)
    def _show_history(self, msg: HistoryRead) -> None:
        self.history = msg.history
        w = self.query_one("#detail-history", Static)
        if msg.history is None:
            w.update(Text(f"history unavailable: {msg.error}", style="red"))
            return
        h = msg.history
        t = Text(f"last hour, {iso(h.start)} → {iso(h.end)}, every {h.step_s:g} s "
                 "(blank: no sample); KV cache in %, memory in GiB (2^30 B)\n\n")
        width = max(10, min(len(h.lines[0].values) if h.lines else 60, self.size.width - 34))
        for line in h.lines:
            known, i = line.known, line.last_index
            rng = (f"{fmt_point(line.name, min(known))}..{fmt_point(line.name, max(known))}"
                   if known else "no samples")
            at = "" if i is None else f" at {iso(h.start + i * h.step_s)}"
            t.append(f"{line.name[:28]:<28} ", style="bold")
            t.append(spark(line.values, width, lo=0.0))
            t.append(f"  last {fmt_point(line.name, line.last)}{at} ({rng})\n")
        for p in h.problems + h.warnings:
            t.append(f"{p}\n", style="yellow")
        w.update(t)


class FleetApp(App[int]):
    """The fleet screen over ``fleet`` (:class:`~seat_console.fleet.rows.Fleet`), refreshed
    every ``interval_s`` seconds. ``readonly``: nodes' consoles open with ``--readonly``.
    ``run_console``: runs an argument list while the app is suspended (tests pass their own).
    ``timings``: ``(refresh start → rows drawn)`` seconds of each drawn refresh;
    ``query_times``: each refresh's own time (queries answered and rows built, s)."""

    TITLE = "seat-console fleet"
    AUTO_FOCUS = "#fleet-table"
    CSS = """
    #fleet-header { height: 1; background: $panel; }
    #fleet-banner { height: auto; max-height: 4; color: $warning; }
    #fleet-banner.hidden { display: none; }
    #fleet-filter { height: 3; }
    #fleet-filter.hidden { display: none; }
    #fleet-table { height: 1fr; }
    """
    BINDINGS: ClassVar = keytable.bindings(keytable.FLEET_KEYS)
    """The fleet's keys: the one key table's :data:`~seat_console.tui.keys.FLEET_KEYS`."""

    def __init__(self, fleet: Fleet, *, interval_s: float = 5.0, readonly: bool = False,
                 run_console: Callable[[list[str]], int] | None = None,
                 keymap: Mapping[str, str] | None = None, keymap_source: str = "profile"
                 ) -> None:
        super().__init__()
        # the profile's [keys], checked against the fleet's key table (KeymapError names it)
        self.keymap = keytable.check_keymap(keymap or {}, keymap_source, keytable.FLEET_KEYS)
        self.set_keymap(self.keymap)
        self.fleet = fleet
        self.interval_s = interval_s
        self.readonly = readonly
        self.run_console = run_console or (lambda argv: subprocess.run(argv, check=False)
                                           .returncode)
        self.reading: FleetReading | None = None
        self.failures = 0
        self.busy = False
        self._busy_since = 0.0
        self.filter_text = ""
        self.timings: list[float] = []
        self.query_times: list[float] = []
        self.refreshes = 0
        self._order: list[str] = []
        self._rows: dict[str, FleetRow] = {}
        self._widths: dict[str, int] = {}
        self._needs_key: tuple[FleetReading, bool] | None = None
        self._needs_of: dict[str, int] | None = None
        self._timer = None
        self.narrow = False
        self._header = ""
        self._counts: tuple[FleetReading | None, dict[str, int]] = (None, {})
        self._banner: str | None = None
        self._win: tuple[str, int, int, str | None] = ("", 0, 60, None)
        self._numbers_busy = False
        self.numbers_reads = 0

    def get_driver_class(self) -> type:
        """:func:`~seat_console.tui.quiet_driver.driver_class` of Textual's choice: on a Linux
        terminal the input thread wakes once a second while nobody types, not ten times (as
        the single-node console's; keys are as fast)."""
        return driver_class(super().get_driver_class())

    def compose(self) -> ComposeResult:
        yield Static("fleet · connecting …", id="fleet-header")
        yield Static("", id="fleet-banner", classes="hidden")
        yield Input(placeholder="filter: node, instance, state, hold … (Escape clears)",
                    id="fleet-filter", classes="hidden")
        yield FleetTable(id="fleet-table")
        yield Footer()

    def on_mount(self) -> None:
        self._build_columns(self.size.width)
        self.set_interval(1.0, self._tick_header)
        self._start_refresh()
        if not self.is_headless:
            self.set_timer(FREEZE_AFTER_S, freeze_startup_heap)

    # -- refresh loop ---------------------------------------------------------------------
    def _start_refresh(self) -> None:
        if self.busy:
            return
        self.busy = True
        self._busy_since = time.monotonic()
        self._note_window()
        started = time.perf_counter()
        fleet = self.fleet

        def work() -> None:
            try:
                reading = fleet.refresh(window=self.window_instances)
            except Exception as exc:  # noqa: BLE001 - a bug must not kill the loop
                now = time.time()
                last = fleet.last_good
                reading = FleetReading(rows=last.rows if last else (), taken_at=now,
                                       rows_at=last.rows_at if last else None, ok=False,
                                       error=f"refresh raised {type(exc).__name__}: {exc}")
            self.post_message(FleetRefreshed(reading, started))

        _daemon(work, "fleet-refresh")
        self._tick_header()

    @on(FleetRefreshed)
    def _on_refreshed(self, msg: FleetRefreshed) -> None:
        self.busy = False
        self.refreshes += 1
        self.reading = msg.reading
        self.query_times.append(msg.reading.duration_s)
        self.failures = 0 if msg.reading.ok else self.failures + 1
        if msg.reading.ok or not self._order:
            self._apply_rows()
            self._read_missing_numbers()
        self._show_banner()
        self._tick_header()
        started = msg.started
        self.call_after_refresh(lambda: self.timings.append(time.perf_counter() - started))
        if self._timer is not None:
            self._timer.stop()
        self._timer = self.set_timer(backoff_s(self.interval_s, self.failures),
                                     self._start_refresh)

    # -- the moving numbers of the rows on screen ---------------------------------------------
    def _note_window(self) -> None:
        """Record (UI thread) what :meth:`window_instances` needs: the filter, the first
        visible row, the table's height and the cursor's seat."""
        table = self.query_one(FleetTable)
        top, bottom = table.visible_range()
        key = self._order[table.cursor_row] if 0 <= table.cursor_row < len(self._order) \
            else None
        self._win = (self.filter_text, top, max(1, bottom - top), key)

    def window_instances(self, rows: list[FleetRow]) -> list[str]:
        """The seats whose moving numbers a refresh reads (called on the refresh's thread with
        the new sorted rows): those of the filtered rows from one page above the first visible
        row to one page below the last, and a page either side of the cursor's seat (a new
        order scrolls the table to it). About 3 pages: ~110 of 1,000 seats at 40 lines."""
        f, top, page, key = self._win
        vis = self._filtered(rows, f)
        want = [r.instance for r in vis[max(0, top - page): top + 2 * page]]
        if key is not None:
            at = next((i for i, r in enumerate(vis) if r.instance == key), None)
            if at is not None:
                want += [r.instance for r in vis[max(0, at - page): at + page]]
        return want

    def _read_missing_numbers(self) -> None:
        """Rows on screen whose numbers this reading lacks (scrolled or filtered into view):
        read them in a daemon thread (one at a time), then redraw. Nothing when none lack
        them — the idle screen sends nothing here."""
        self._note_window()
        r = self.reading
        if r is None or not r.ok or self._numbers_busy or self.busy:
            return
        table = self.query_one(FleetTable)
        top, bottom = table.visible_range()
        if not any(not self._rows[k].numbers_read for k in self._order[top:bottom]
                   if k in self._rows):
            return
        want = self.window_instances(list(r.rows))
        self._numbers_busy = True
        fleet = self.fleet

        def work() -> None:
            try:
                new = fleet.read_numbers(r, want)
            except Exception:  # noqa: BLE001 - the next refresh reads them anyway
                new = r
            self.post_message(NumbersRead(r, new))

        _daemon(work, "fleet-numbers")

    @on(NumbersRead)
    def _on_numbers(self, msg: NumbersRead) -> None:
        self._numbers_busy = False
        self.numbers_reads += 1
        if self.reading is msg.base and msg.reading is not msg.base:
            self.reading = msg.reading
            self._apply_rows()
        self._read_missing_numbers()

    @on(FleetTable.Scrolled)
    def _on_scrolled(self, msg: FleetTable.Scrolled) -> None:
        self._read_missing_numbers()

    def action_refresh_now(self) -> None:
        """``r``: refresh now (unless one is in flight)."""
        if self._timer is not None:
            self._timer.stop()
        self._start_refresh()

    # -- drawing ----------------------------------------------------------------------------
    def _needs(self) -> dict[str, int] | None:
        """The columns' content widths over every row of the reading (computed once per
        reading and narrowness), ``None`` before the first rows."""
        r = self.reading
        if r is None or not r.rows:
            return None
        if self._needs_key is None or self._needs_key[0] is not r \
                or self._needs_key[1] != self.narrow:
            self._needs_key = (r, self.narrow)
            self._needs_of = content_widths(r.rows, r.taken_at, narrow=self.narrow)
        return self._needs_of

    def _fit_columns(self, width: int) -> bool:
        """Set the table's columns for ``width`` and the rows' content; whether they changed."""
        self.narrow = width < WIDE_FROM_COLS
        widths = layout(width, self._needs())
        if widths == self._widths:
            return False
        self._widths = widths
        self.query_one(FleetTable).set_columns(
            [(key, header, widths[key]) for key, header in COLUMNS],
            padding=0 if self.narrow else 1)
        return True

    def _build_columns(self, width: int) -> None:
        if self._fit_columns(width) and self.reading is not None:
            self._apply_rows()

    def on_resize(self, event: object) -> None:
        if self.is_mounted:
            self._build_columns(self.size.width)
            self.call_after_refresh(self._read_missing_numbers)

    def _visible(self) -> list[FleetRow]:
        return self._filtered(self.reading.rows if self.reading else (), self.filter_text)

    def _filtered(self, rows: Sequence[FleetRow], text: str) -> list[FleetRow]:
        """``rows`` whose node, engine, hold, silence or probe cell, instance or state holds
        ``text`` (case-insensitive; the moving numbers are not matched: they are not read for
        every seat)."""
        f = text.lower()
        if not f:
            return list(rows)
        now, narrow = time.time(), self.narrow
        out = []
        for r in rows:
            c = cells(r, now, narrow=narrow)
            if f in " ".join((r.instance, r.state, *c[:4], c[8])).lower():
                out.append(r)
        return out

    @staticmethod
    def row_styles(row: FleetRow) -> tuple[str, ...]:
        """The row's cell styles (:data:`COLUMNS` order): node and engine in the state's
        style, the hold WITHOUT LEASE or OVERDUE in reverse red; one shared tuple per look."""
        key = (row.state, row.hold == "without-lease" or row.state == "hold-overdue")
        return _STYLES.get(key) or _STYLES[("unknown", key[1])]

    def _apply_rows(self) -> None:
        """Hand the (filtered) rows to the table, their content ``(texts, styles)`` built only
        for the rows it draws (:meth:`FleetTable.set_rows_lazy`), the texts plain (the table
        never parses markup: node names, phases and instances come from outside — ``[bold]``
        in a label prints as itself)."""
        self._fit_columns(self.size.width)   # sized by the rows' content
        table = self.query_one(FleetTable)
        now = self.reading.taken_at if self.reading else time.time()
        rows = self._visible()
        self._order = [r.instance for r in rows]
        self._rows = {r.instance: r for r in rows}
        narrow, styles = self.narrow, self.row_styles

        def content(i: int) -> Content:
            r = rows[i]
            return cells(r, now, narrow=narrow), styles(r)

        table.set_rows_lazy(self._order, content)

    def header_text(self) -> str:
        """The header line: READ-ONLY under ``--readonly`` (the trial saw no marker), when the
        rows were read (their age once it is past two refreshes;
        first, so a narrow screen cuts the URL, not the time), seats by state, the queries of
        the last refresh (``N+M``: ``M`` sent since by numbers-only reads, as the help says),
        the Prometheus URL."""
        r = self.reading
        name = "fleet READ-ONLY" if self.readonly else "fleet"   # as the main screen says it
        if r is None:
            return f"{name} · {self.fleet.prom.url} · first refresh …"
        if self._counts[0] is not r:      # counted once per reading, not at every tick
            tally: dict[str, int] = {}
            for row in r.rows:
                tally[row.state] = tally.get(row.state, 0) + 1
            self._counts = (r, tally)
        counts = self._counts[1]
        parts = [f"{counts[s]} {s}" for s in sorted(counts, key=lambda s: (RANK.get(
            s, RANK["unknown"]), s))]
        age = r.age_s(time.time())
        late = age is not None and age > 2 * self.interval_s + 5
        when = (f"rows {iso(r.rows_at)[11:]}" + (f" ({_age(age)} ago)" if late else "")
                if r.rows_at else "no rows")
        # "refreshing" only for a refresh still running after BUSY_SHOWN_AFTER_S (a slow
        # Prometheus): saying it for every ~0.15 s refresh cost a frame of its own each time
        busy = " · refreshing" if self.busy and time.monotonic() - self._busy_since >= \
            BUSY_SHOWN_AFTER_S else ""
        shown = f"{len(self._order)}/{len(r.rows)} shown · " if self.filter_text else ""
        # when first: at 80 columns the line is cut at its end, and the rows' time is what a
        # reader must not lose (the trial lost it, and the URL, after "… healthy · rows")
        later = f"+{r.later_queries}" if r.later_queries else ""
        return (f"{name} · {when}{busy} · {len(r.rows)} seats: {', '.join(parts) or 'none'} · "
                f"{shown}{r.queries - r.later_queries}{later} queries · {self.fleet.prom.url}")

    def _tick_header(self) -> None:
        """Redraw the header only when its text changed, without a layout pass (a layout
        re-renders the whole screen: it was most of the idle CPU at one tick a second)."""
        text = self.header_text()
        if text != self._header:
            self._header = text
            self.query_one("#fleet-header", Static).update(Text(text), layout=False)

    def banner_text(self) -> str:
        """Why the rows may be old or partial ('' when all is well)."""
        r = self.reading
        if r is None:
            return ""
        lines = []
        if not r.ok:
            age = r.age_s(time.time())
            shown = (f"showing the last good rows, from {iso(r.rows_at)} ({_age(age)} ago)"
                     if r.rows_at else "no rows read yet")
            lines.append(f"PROMETHEUS UNAVAILABLE: {r.error} — {shown}; retrying every "
                         f"{backoff_s(self.interval_s, self.failures):g} s")
        lines += [f"partial response: {w}" for w in r.warnings[:2]]
        lines += list(r.problems[:2])
        more = len(r.warnings) + len(r.problems) - min(2, len(r.warnings)) \
            - min(2, len(r.problems))
        if more > 0:
            lines.append(f"… {more} more (seat-console fleet --json lists all)")
        return "\n".join(lines)

    def _show_banner(self) -> None:
        text = self.banner_text()
        if text == self._banner:
            return
        self._banner = text
        b = self.query_one("#fleet-banner", Static)
        b.update(Text(text))   # reasons come from servers: never parsed as markup
        b.set_class(not text, "hidden")

    # -- keys -------------------------------------------------------------------------------
    def action_help(self) -> None:
        """``?``: the help screen with the fleet's keys (as remapped, read-only filtered)."""
        from seat_console.widgets.help import HelpScreen

        if not isinstance(self.screen, HelpScreen):
            self.push_screen(HelpScreen(self.help_rows(), sections=FLEET_HELP))

    def help_rows(self) -> list[tuple[str, str, str]]:
        """``(keys, label, sentence)`` per key of the fleet's key table (keys as remapped by
        the profile's ``[keys]``; ``--readonly`` filters as the main screen's)."""
        return keytable.help_rows(keytable.remapped(self.BINDINGS, self.keymap), self.readonly,
                                  lambda b: b.key_display or self.get_key_display(b))

    def action_filter(self) -> None:
        """``/``: show the filter box and focus it."""
        box = self.query_one("#fleet-filter", Input)
        box.remove_class("hidden")
        box.focus()

    def action_clear_filter(self) -> None:
        """Escape: clear and hide the filter, back to the table — every row shown at once,
        not when the box's ``Changed`` message comes round (a key pressed meanwhile acts on
        the rows on screen)."""
        box = self.query_one("#fleet-filter", Input)
        box.value = ""
        box.add_class("hidden")
        self._set_filter("")
        self.query_one(FleetTable).focus()

    @on(Input.Changed, "#fleet-filter")
    def _filter_changed(self, event: Input.Changed) -> None:
        self._set_filter(event.value)

    def _set_filter(self, value: str) -> None:
        """Show the rows matching ``value`` (nothing to do when it is the filter shown: every
        drawing of the rows applies :attr:`filter_text`)."""
        text = value.strip()
        if text == self.filter_text:
            return
        self.filter_text = text
        self._apply_rows()
        self._read_missing_numbers()
        self._tick_header()

    @on(Input.Submitted, "#fleet-filter")
    def _filter_done(self, event: Input.Submitted) -> None:
        self.query_one(FleetTable).focus()

    def current_row(self) -> FleetRow | None:
        """The seat under the cursor, or ``None``."""
        table = self.query_one(FleetTable)
        if not self._order or not 0 <= table.cursor_row < len(self._order):
            return None
        return self._rows.get(self._order[table.cursor_row])

    def shown_row(self) -> tuple[FleetRow | None, str]:
        """``(the seat the cursor shows, '')``, or ``(None, why no row is shown)``: the
        filter matches none, there are no rows yet, or the cursor's row is scrolled out of
        view — an action never falls on a row nobody sees."""
        table = self.query_one(FleetTable)
        if not self._order:
            return None, (f"no seat shown: the filter {self.filter_text!r} matches none "
                          "(Esc clears it)" if self.filter_text else "no seat shown yet")
        row = self.current_row()
        if row is None or not table.cursor_shown():
            return None, ("the cursor's row is out of view: move the cursor onto the seat "
                          "first")
        return row, ""

    @on(FleetTable.RowSelected)
    def _row_selected(self, event: FleetTable.RowSelected) -> None:
        row = self._rows.get(event.row_key)
        if row is not None:
            self.push_screen(SeatDetail(self.fleet, row,
                                        self.reading.rows_at if self.reading else None))

    def action_open_console(self) -> None:
        """``a``: the console of the seat the cursor shows (inventory profile), the app
        suspended meanwhile; with no row shown, a notice and nothing else."""
        row, why = self.shown_row()
        if row is None:
            self.notify(f"open console: {why}", severity="warning")
            return
        entry = next((e for e in self.fleet.inventory if e.instance == row.instance), None)
        if entry is None or not entry.profile:
            self.notify(f"{row.node}: the profile's [[fleet.inventory]] names no profile for "
                        f"instance {row.instance!r}; add one to open its console",
                        severity="warning")
            return
        try:
            argv = console_argv(entry, readonly=self.readonly)
        except FileNotFoundError as exc:
            self.notify(str(exc), severity="error")
            return
        assert argv is not None
        try:
            with self.suspend():
                rc = self.run_console(argv)
        except SuspendNotSupported:
            rc = self.run_console(argv)
        self.notify(f"{row.node}: console exited with {rc}")


def run_fleet_app(fleet: Fleet, *, interval_s: float = 5.0, readonly: bool = False,
                  keymap: Mapping[str, str] | None = None, keymap_source: str = "profile"
                  ) -> int:
    """Run the fleet screen until ``q``; returns 0. ``keymap``: the profile's ``[keys]``
    (``keymap_source``: its file, named in a refusal)."""
    app = FleetApp(fleet, interval_s=interval_s, readonly=readonly, keymap=keymap,
                   keymap_source=keymap_source)
    app.run()
    fleet.prom.close()
    return 0


__all__ = ["FleetApp", "FleetRefreshed", "NumbersRead", "SeatDetail", "backoff_s", "layout", "run_fleet_app"]
