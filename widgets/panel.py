"""``SourcePanel``: the base widget of every panel that shows one source's readings.

The app (``console/tui/app.py``) polls each source in its own worker thread and, on the UI thread,
calls :meth:`SourcePanel.show` with the latest reading, the last *good* reading and when that
good reading was taken. A panel renders:

* a good reading: the subclass's view of it (:meth:`SourcePanel.render_reading`);
* an :class:`~seat_console.core.base.Unavailable`: its reason, "last good value N s ago" (or "no good
  value yet"), and below it the last good value, dimmed, so the engineer still sees what was
  last known and how old it is;
* staleness: :meth:`SourcePanel.show_age` (called by the app about once a second, no I/O) puts
  the age of the newest reading in the panel's border and marks the panel STALE when no reading
  has arrived for a while (a hung source), without touching the body.

A panel never raises: an exception from a subclass's rendering is shown in the panel's status
line (with its type and message) instead of reaching the app. Panels do no I/O and hold no
business rules; they only draw the frozen models they are given.

Compact form (the one-glance main screen at 80×24): a subclass may override
:meth:`SourcePanel.render_compact` to return a few lines (a Rich ``Text``); while the app has
the panel in compact mode (:meth:`SourcePanel.set_compact`) that replaces the body, and an
unavailable reading takes one line (the reason and fix are on the panel's detail view, Enter).
Panels are focusable (Tab); the focused one has a bright border, and Enter opens its detail.

Redraws: the age in the border is coarse ("just now", "10 s", "2 min") and the border and the
status line are only touched when their text changes, so a once-a-second age tick on a healthy
console changes nothing on screen (no layout, no repaint).

Adding a panel: subclass, set ``source_name`` (the ``Source.name`` it shows) and ``title``,
override :meth:`compose_body` (the widgets of the body) and :meth:`render_reading` (fill them
from one reading), optionally :meth:`render_compact`, then add a ``PanelSpec`` to
``seat_console.tui.app.PANELS``. The app constructs it as ``YourPanel(loaded=loaded_profile)``; if
you override ``__init__``, accept and pass on ``**kwargs``.
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime
from typing import Any, ClassVar

from pydantic import BaseModel
from rich.console import RenderableType
from rich.cells import cell_len
from rich.text import Text
from textual import events
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.css.query import NoMatches
from textual.widget import Widget
from textual.widgets import Static

from seat_console.core.profile import LoadedProfile
from seat_console.core.base import Unavailable
from seat_console.core.fmt import fmt_duration

log = logging.getLogger(__name__)

STALE_FACTOR = 3.0
"""A panel is marked STALE when its newest reading is older than this many refresh intervals
(and at least :data:`STALE_MIN_S` seconds)."""

STALE_MIN_S = 5.0
"""Floor of the staleness threshold in seconds, so a 0.2 s interval does not flicker STALE."""


def fmt_coarse_age(seconds: float | None, fresh_s: float = 2.0) -> str:
    """An age that changes rarely, so redrawing it once a second costs nothing on screen:
    ``"just now"`` up to ``fresh_s`` seconds, then the one duration rule's ``ticker`` style
    (:func:`seat_console.core.fmt.fmt_duration`: ``"7 s"``, whole tens of seconds, whole
    minutes, ``"2 h 04 min"``); ``None`` → ``"n/a"``.

    ``seconds``: a duration (s; negative, from clock skew, counts as 0). ``fresh_s``: how long a
    reading counts as current (the app passes twice the refresh interval, at least 2 s).
    """
    if seconds is None:
        return "n/a"
    s = max(0.0, seconds)
    return "just now" if s <= fresh_s else fmt_duration(s, style="ticker")


def set_text_if_changed(widget: Static, text: Text) -> bool:
    """Update ``widget`` with ``text`` only when it differs from what it shows; re-layout only
    when the number of lines changes. Returns whether anything was redrawn."""
    old = getattr(widget, "_seat_text", None)
    if old is not None and old == text:
        return False
    layout = old is None or old.plain.count("\n") != text.plain.count("\n")
    widget._seat_text = text  # type: ignore[attr-defined]
    widget.update(text, layout=layout)
    return True


def _age(now: datetime, then: datetime | None) -> float | None:
    if then is None:
        return None
    return (now - then).total_seconds()


def _ago(now: datetime, then: datetime) -> str:
    """``"12 s ago"``, ``"3 min ago"`` (coarse, see :func:`fmt_coarse_age`); ``"just now"``."""
    coarse = fmt_coarse_age(_age(now, then), 0)
    return coarse if coarse == "just now" else f"{coarse} ago"


class _OneRestyle:
    """The context of :meth:`SourcePanel._one_restyle` (nests: the outermost restyles)."""

    def __init__(self, panel: SourcePanel) -> None:
        self.panel = panel
        self.before: frozenset[str] = frozenset()

    def __enter__(self) -> None:
        if not self.panel._restyle_held:
            self.before = frozenset(self.panel.classes)
        self.panel._restyle_held += 1

    def __exit__(self, *exc: object) -> None:
        panel = self.panel
        panel._restyle_held -= 1
        if not panel._restyle_held and panel.is_mounted and (
                frozenset(panel.classes) != self.before):
            panel.update_node_styles()


class SourcePanel(Widget):
    """Base panel for one source: status line + body; renders readings, reasons and staleness.

    Class attributes: ``source_name`` is the ``Source.name`` this panel shows (the app routes
    readings by it); ``title`` is the border title. Instance state (read by tests and the app):
    ``reading`` (the latest reading shown, or ``None`` before the first), ``last_good``,
    ``last_good_at`` (UTC), ``unavailable`` (the current :class:`Unavailable` or ``None``),
    ``stale`` (``True`` while no reading has arrived for longer than the threshold),
    ``render_error`` (text of the last exception raised by a subclass's rendering, or ``None``),
    ``now`` (the app's clock at the last :meth:`show`, for subclasses that draw times).
    """

    source_name: ClassVar[str] = "source"
    title: ClassVar[str] = "Source"
    compact_title: ClassVar[str | None] = None
    """Border title in compact mode (``None``: ``title``)."""
    detail: bool = False
    _restyle_held: int = 0
    """Depth of :meth:`_one_restyle` blocks (0: each class change restyles at once)."""

    paused: bool = False
    """Polling is paused: the subtitle says "paused" instead of a retry (set through
    :meth:`show_age`, or by the app on a detail view's panel)."""
    compact: bool = False
    """Class defaults of the instance flags set in ``__init__`` (a panel's ``build`` may be
    called on an instance made without Textual's init, e.g. to render a reading as text)."""
    compact_when_wide: ClassVar[bool] = False
    """Keep the compact form on the main screen in the two-column layout (≥ 160 columns) even
    when the terminal is tall enough for full forms (the fit panel: its full budget is on the
    detail view, Enter)."""
    wide_span: ClassVar[int] = 1
    """Columns the panel takes in the two-column layout (≥ 160 columns): 1 or 2."""
    can_focus = True

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("enter", "app.open_detail", "details", id="panel-details"),
    ]

    DEFAULT_CSS = """
    SourcePanel {
        height: auto;
        border: round $primary 60%;
        border-title-color: $text;
        border-title-style: bold;
        border-subtitle-color: $text-muted;
        padding: 0 1;
    }
    SourcePanel:focus {
        border: heavy $accent;
        border-title-color: $accent;
    }
    SourcePanel > .panel-status {
        height: auto;
        display: none;
    }
    SourcePanel > .panel-compact {
        height: auto;
        display: none;
        text-wrap: nowrap;
        text-overflow: ellipsis;
    }
    SourcePanel.-compact > .panel-status {
        text-wrap: nowrap;
        text-overflow: ellipsis;
    }
    SourcePanel.-compact {
        border: none;
        border-top: solid $primary 60%;
    }
    SourcePanel.-compact.-unavailable {
        border: none;
        border-top: solid $warning;
    }
    SourcePanel.-compact.-stale {
        border: none;
        border-top: solid $error;
    }
    SourcePanel.-compact:focus {
        border: none;
        border-top: heavy $accent;
    }
    SourcePanel.-compact.-has-compact > .panel-compact {
        display: block;
    }
    SourcePanel.-compact.-has-compact > .panel-body {
        display: none;
    }
    SourcePanel.-compact.-unavailable.-has-compact > .panel-compact {
        text-opacity: 55%;
    }
    SourcePanel.-unavailable > .panel-status,
    SourcePanel.-partial > .panel-status,
    SourcePanel.-render-error > .panel-status,
    SourcePanel.-waiting > .panel-status {
        display: block;
    }
    SourcePanel.-unavailable {
        border: round $warning;
    }
    SourcePanel.-stale {
        border: round $error;
    }
    SourcePanel.-unavailable > .panel-body,
    SourcePanel.-stale > .panel-body {
        text-opacity: 55%;
    }
    SourcePanel > .panel-body {
        height: auto;
    }
    SourcePanel.-no-value > .panel-body {
        display: none;
    }
    """

    def __init__(self, *, loaded: LoadedProfile | None = None, name: str | None = None,
                 id: str | None = None, classes: str | None = None) -> None:
        """``loaded`` is the seat profile the app runs on (for display settings such as
        ``console.history_s``); ``None`` in isolated widget tests."""
        super().__init__(name=name, id=id, classes=classes)
        self.loaded = loaded
        self.reading: BaseModel | None = None
        self.last_good: BaseModel | None = None
        self.last_good_at: datetime | None = None
        self.unavailable: Unavailable | None = None
        self.stale: bool = False
        self.render_error: str | None = None
        self.now: datetime | None = None
        self.compact: bool = False
        self.detail: bool = False
        """Set by the app on the copy shown in a :class:`DetailScreen` (everything, e.g. the
        expired silences the main screen only counts)."""
        self.fresh_s: float = 2.0
        """Seconds a reading counts as current ("just now"); the app sets 2 × interval."""
        self.draws: int = 0
        """How many times a reading was rendered (tests count redraws)."""
        self._shown: BaseModel | None = None
        self._reading_at: datetime | None = None
        self._subtitle: str | None = None
        self._status_text: Text | None = None
        self._drawn_prefix: str | None = None
        self._restyle_held = 0
        self.border_title = self.title
        self.add_class("-waiting", "-no-value")

    # -- structure ------------------------------------------------------------------------
    def compose(self) -> ComposeResult:
        """Status line (reasons, errors) above the subclass's body."""
        yield Static(Text("waiting for the first reading…", style="italic"),
                     classes="panel-status", id="panel-status")
        yield Static("", classes="panel-compact", id="panel-compact")
        with PanelBody(classes="panel-body", id="panel-body"):
            yield from self.compose_body()

    def compose_body(self) -> ComposeResult:
        """The body's widgets. Default: one :class:`Static` that :meth:`render_reading` fills."""
        yield Static("", id="panel-default-body")

    def render_reading(self, reading: BaseModel) -> None:
        """Fill the body from one good reading (a frozen model). Subclasses override.

        The default shows the model's fields as ``key: value`` lines (enough for a new source
        to be visible before it has a proper view). May raise; :meth:`show` catches it.
        """
        lines = Text()
        for key, value in reading.model_dump().items():
            lines.append(f"{key}: ", style="bold")
            lines.append(f"{value}\n")
        lines.rstrip()
        self.query_one("#panel-default-body", Static).update(lines)

    def render_compact(self, reading: BaseModel) -> Text | None:
        """The panel's compact form (a few lines) for the one-glance main screen, or ``None``
        when the panel has none (then the full body is shown in compact mode too). Default:
        ``None``. May raise; :meth:`show` catches it."""
        return None

    def note_unchanged(self, reading: BaseModel) -> None:
        """A reading equal to the shown one arrived (the app does not redraw it): record what
        must still move with time (e.g. a sparkline's sample), without redrawing unless that
        changes what is drawn. Default: nothing."""

    def retime(self, now: datetime) -> None:
        """Called by :meth:`show_age` (the app's age tick, about once a second, no I/O):
        redraw the body when a relative time it draws ("since 13:09Z (2 min ago)") moved at
        ``now``. Default: nothing (the body draws no relative times); see
        ``seat_console.widgets.services._ServicePanel.retime``."""

    def detail_renderable(self) -> RenderableType | None:
        """Extra content for the detail view beyond the full panel (default: none)."""
        return None

    def carry_over(self, shown: SourcePanel) -> None:
        """A detail view's panel (this one, fresh) takes what the main screen's panel
        ``shown`` has built over its readings — what one reading cannot give (the engine's
        rate history). Default: nothing; see
        ``seat_console.widgets.services.EnginePanel.carry_over``."""

    def set_compact(self, compact: bool) -> None:
        """Switch between the compact and the full form and redraw the last value in it."""
        if compact == self.compact:
            return
        with self._one_restyle():
            self._set_compact(compact)

    def _set_compact(self, compact: bool) -> None:
        self.compact = compact
        # before mount (the main screen's compose) the class is set without a restyle: the
        # mount styles the panel once, in its form (issue 33)
        self.set_class(compact, "-compact", update=self.is_mounted)
        self._show_subtitle(self._subtitle or "", force=True)
        if self._shown is not None:
            self._render_guarded(self._shown)
        if self.unavailable is not None and self.now is not None:
            self._set_status(self._unavailable_text(self.unavailable, self.now))
        elif self.now is not None:
            self._show_kept(self.now)

    def unavailable_hint(self, unavailable: Unavailable) -> str | None:
        """Extra explanation shown under an unavailable reading's reason (e.g. what a
        ``kind`` means for the engineer and what still works). Default: none."""
        return None

    # -- one restyle per draw ----------------------------------------------------------------
    def add_class(self, *class_names: str, update: bool = True) -> Any:
        """Textual's ``add_class``; inside :meth:`_one_restyle` the styles are updated once,
        at its end."""
        return super().add_class(*class_names, update=update and not self._restyle_held)

    def remove_class(self, *class_names: str, update: bool = True) -> Any:
        """Textual's ``remove_class``; inside :meth:`_one_restyle` the styles are updated
        once, at its end."""
        return super().remove_class(*class_names, update=update and not self._restyle_held)

    def _one_restyle(self) -> _OneRestyle:
        """``with self._one_restyle():`` the class changes made inside restyle the panel (and
        its subtree) once, at the end, and only if the classes changed. A first reading
        changed three or four classes (``-waiting``, ``-no-value``, ``-unavailable``,
        ``-has-compact``), each a restyle of the panel's subtree on the UI thread: most of the
        UI thread's CPU between the first frame and the full screen (cProfile over a headless
        start on recorded readings; docs/benchmarks.md, issue 33)."""
        return _OneRestyle(self)

    # -- what the app calls -----------------------------------------------------------------
    def show(self, reading: BaseModel | None, last_good: BaseModel | None,
             last_good_at: datetime | None, *, now: datetime | None = None,
             reading_at: datetime | None = None) -> None:
        """Render the latest ``reading`` (a frozen model or :class:`Unavailable`).

        ``last_good`` is the newest reading that was not :class:`Unavailable` (or ``None``),
        taken at ``last_good_at`` (UTC). ``now`` (UTC) is the app's clock, injected so tests and
        snapshots are deterministic; defaults to the current time. ``reading_at`` (UTC) is when
        ``reading`` arrived, by the same clock; defaults to ``Unavailable.at`` for an unavailable
        reading, else ``last_good_at``. Never raises.
        """
        now = now or datetime.now(UTC)
        self.now = now
        with self._one_restyle():
            self._show(reading, last_good, last_good_at, now, reading_at)

    def _show(self, reading: BaseModel | None, last_good: BaseModel | None,
              last_good_at: datetime | None, now: datetime, reading_at: datetime | None) -> None:
        try:
            self.reading = reading
            self.last_good = last_good
            self.last_good_at = last_good_at
            if reading_at is not None:
                self._reading_at = reading_at
            else:
                self._reading_at = (reading.at if isinstance(reading, Unavailable)
                                    else last_good_at)
            self.remove_class("-waiting")
            shown = last_good if isinstance(reading, Unavailable) or reading is None else reading
            self.set_class(shown is None, "-no-value")
            if isinstance(reading, Unavailable):
                self.unavailable = reading
                self.add_class("-unavailable")
                self._set_status(self._unavailable_text(reading, now))
                if last_good is not None and last_good is not self._shown:
                    self._render_guarded(last_good)
            elif reading is not None:
                self.unavailable = None
                self.remove_class("-unavailable")
                self._render_guarded(reading)
            self._show_kept(now)
            self.show_age(now)
        except Exception as exc:  # noqa: BLE001 - a panel must never break the app; shown below
            self._show_render_error(exc)

    def show_age(self, now: datetime, *, stale_after_s: float | None = None,
                 busy_since: datetime | None = None, retry_s: float | None = None,
                 paused: bool | None = None) -> None:
        """Refresh the border subtitle with the newest reading's age; mark STALE when too old.

        ``stale_after_s``: threshold in seconds (the app passes ``max(STALE_FACTOR × interval,
        STALE_MIN_S)``; ``None`` keeps the previous one). ``busy_since``: when the poll in
        progress started (UTC), so a hung read is shown as "reading for N s". ``retry_s``: the
        back-off between polls while the source is unavailable (shown as "retry every N s").
        ``paused``: polling is paused (shown as "paused", and no retry is promised: nothing
        is read until it resumes); ``None`` keeps :attr:`paused`. Never raises.
        """
        try:
            if stale_after_s is not None:
                self._stale_after_s = stale_after_s
            if paused is not None:
                self.paused = paused
            threshold = getattr(self, "_stale_after_s", None)
            age = _age(now, self._reading_at)
            busy = _age(now, busy_since)
            stale = threshold is not None and (
                (age is not None and age > threshold)
                or (age is None and busy is not None and busy > threshold))
            self.stale = stale
            self.set_class(stale, "-stale")
            parts: list[str] = []
            if stale:
                parts.append("STALE")
            if age is not None:
                verb = "checked" if self.unavailable is not None else "updated"
                coarse = fmt_coarse_age(age, self.fresh_s)
                parts.append(f"{verb} {coarse}" if coarse == "just now"
                             else f"{verb} {coarse} ago")
            if self.paused:   # no retry comes while paused (it said "retry every 10 s")
                parts.append("paused")
            elif retry_s is not None and self.unavailable is not None:  # also while re-reading:
                parts.append(f"retry every {fmt_duration(retry_s, style='age')}")  # no flicker per poll
            if busy is not None and busy >= 2.0:
                parts.append(f"reading for {fmt_coarse_age(busy, 0)}")
            subtitle = " · ".join(parts)
            self._show_subtitle(subtitle)
            if self._shown is not None:
                if self._stale_prefix(now) != self._drawn_prefix:
                    self.now = now
                    self._render_guarded(self._shown)
                else:
                    self.retime(now)
            if self.unavailable is not None:
                self._set_status(self._unavailable_text(self.unavailable, now))
            else:
                self._show_kept(now)
        except Exception as exc:  # noqa: BLE001 - never raise into the app
            self._show_render_error(exc)

    # -- helpers ------------------------------------------------------------------------------
    def _show_subtitle(self, subtitle: str, force: bool = False) -> None:
        """The age in the bottom border; in compact mode (no bottom border) after the title.
        Touches the border only when the text changed."""
        if subtitle == self._subtitle and not force:
            return
        self._subtitle = subtitle
        if self.compact:
            title = self.compact_title or self.title
            self.border_title = f"{title} · {subtitle}" if subtitle else title
            self.border_subtitle = None
        else:
            self.border_title = self.title
            self.border_subtitle = subtitle

    def _show_kept(self, now: datetime) -> None:
        """A good reading that kept parts from the last good one (a half-failed read, see
        :mod:`seat_console.core.partial`): the status line names each kept part as stale,
        with its age and why the newest read missed it (compact: one line, the reasons on the
        detail view). The age is coarse, so the once-a-second tick rarely changes the text."""
        kept = () if self.unavailable is not None or self.reading is None else tuple(
            getattr(self.reading, "kept", ()) or ())
        self.set_class(bool(kept), "-partial")
        if kept:
            self._set_status(self._kept_text(kept, now))

    def _kept_text(self, kept: tuple, now: datetime) -> Text:
        if self.compact:
            t = Text(no_wrap=True, overflow="ellipsis")
            t.append("STALE ", style="bold yellow")
            return self._one_line(t, ", ".join(f"{k.part} {_ago(now, k.since)}" for k in kept),
                                  " · Enter: why")
        t = Text()
        for i, k in enumerate(kept):
            if i:
                t.append("\n")
            t.append("STALE ", style="bold yellow")
            t.append(f"{k.part}: last read {_ago(now, k.since)}, kept from then")
            t.append(f" (this read: {k.reason})", style="italic")
        return t

    def _unavailable_text(self, u: Unavailable, now: datetime) -> Text:
        if self.compact:   # one line; the reason in full and the fix are on the detail view
            t = Text(no_wrap=True, overflow="ellipsis")
            t.append("unavailable", style="bold")
            t.append(f" ({u.kind}): ")
            return self._one_line(t, u.reason, " · Enter: why & fix")
        t = Text()
        t.append(f"{u.source} unavailable", style="bold")
        t.append(f" ({u.kind}): ")
        t.append(u.reason)
        t.append("\n")
        hint = self.unavailable_hint(u)
        if hint:
            t.append(hint)
            t.append("\n")
        if self.last_good_at is None:
            t.append("no good value yet", style="italic")
        else:
            t.append(f"last good value {fmt_coarse_age(_age(now, self.last_good_at), 0)} "
                     "ago (shown dimmed below)", style="italic")
        return t

    def _one_line(self, head: Text, body: str, tail: str) -> Text:
        """``head`` + ``body`` + ``tail`` (dim) on one line of the panel's width: ``body`` is
        cut with "…" so that the tail (where the rest is: "Enter: why & fix") always shows.
        Before the first layout (width 0) nothing is cut (the line's own ellipsis applies)."""
        width = self.content_size.width
        room = width - head.cell_len - cell_len(tail)
        if width and cell_len(body) > room:
            cut = Text(body)
            cut.truncate(max(1, room), overflow="ellipsis")
            body = cut.plain
        head.append(body)
        head.append(tail, style="dim")
        return head

    def on_resize(self, _event: events.Resize) -> None:
        """Re-fit the one-line status (compact form) to the new width."""
        if self.compact and self.now is not None:
            if self.unavailable is not None:
                self._set_status(self._unavailable_text(self.unavailable, self.now))
            else:
                self._show_kept(self.now)

    def _set_status(self, text: Text) -> None:
        set_text_if_changed(self.query_one("#panel-status", Static), text)

    def _stale_prefix(self, now: datetime | None) -> str | None:
        """In compact mode while the source is unavailable, the words that head the dimmed
        last good value ("last good 6 s ago: "), so that it never reads as current (dimming
        alone is lost under NO_COLOR); ``None`` otherwise. The age is coarse."""
        if not self.compact or self.unavailable is None:
            return None
        if self.last_good_at is None or now is None:
            return "last good: "
        return f"last good {_ago(now, self.last_good_at)}: "

    def _mark_last_good(self, compact: Text, prefix: str) -> Text:
        """``compact`` with ``prefix`` before its first line and continuation lines indented
        under it (all of it the last good value, not the current state)."""
        out = Text(no_wrap=True, overflow="ellipsis")
        for i, line in enumerate(compact.split("\n")):
            if i:
                out.append("\n  ")
            else:
                out.append(prefix, style="bold italic")
            out.append_text(line)
        return out

    def _render_guarded(self, reading: BaseModel) -> None:
        self._shown = reading
        self.draws += 1
        try:
            compact = self.render_compact(reading) if self.compact else None
            self.set_class(self.compact and compact is not None, "-has-compact")
            self._drawn_prefix = self._stale_prefix(self.now)
            prefix = self._drawn_prefix if compact is not None else None
            if compact is not None and prefix is not None:
                compact = self._mark_last_good(compact, prefix)
            if compact is not None:
                set_text_if_changed(self.query_one("#panel-compact", Static), compact)
            else:
                self.render_reading(reading)
        except NoMatches as exc:
            if self.is_attached and self.children:
                self._show_render_error(exc)
                return
            # the panel's children are gone: the app is tearing the screen down (Ctrl-C during
            # start-up, quit) while a reading arrived; nothing to draw, nothing to report (a
            # logged traceback would land on the terminal the console just restored)
            log.debug("panel %s: reading arrived while the screen is torn down",
                      self.source_name)
        except Exception as exc:  # noqa: BLE001 - shown in the panel, logged
            self._show_render_error(exc)
        else:
            if self.render_error is not None:
                self.render_error = None
                self.remove_class("-render-error")

    def _show_render_error(self, exc: BaseException) -> None:
        self.render_error = f"{type(exc).__name__}: {exc}"
        log.exception("panel %s failed to render", self.source_name)
        try:
            self.add_class("-render-error")
            self._set_status(Text(f"panel could not render this reading: {self.render_error}",
                                  style="bold"))
        except Exception:  # noqa: BLE001 - not mounted yet; state above still records it
            log.debug("panel %s: status line not available", self.source_name)

    def extra_state(self) -> dict[str, Any]:
        """Panel state for debugging and tests (no rendering)."""
        return {"source": self.source_name, "stale": self.stale,
                "unavailable": None if self.unavailable is None else self.unavailable.kind,
                "render_error": self.render_error}


class PanelBody(Widget):
    """Container of a panel's body (auto height)."""

    DEFAULT_CSS = """
    PanelBody { height: auto; layout: vertical; }
    """


__all__ = ["STALE_FACTOR", "STALE_MIN_S", "PanelBody", "SourcePanel", "fmt_coarse_age",
           "set_text_if_changed"]
