"""Panels for the node's services: timers, silences, containers and the engine.

Each panel draws one source's frozen reading (``seat_console.sources.timers.TimersReading``,
``seat_console.sources.silences.SilencesReading``, ``seat_console.sources.containers.ContainersReading``,
``seat_console.sources.engine.EngineReading``). When its source is unavailable the base class
(:class:`seat_console.widgets.panel.SourcePanel`) shows the reason and the last good value's age and keeps
the last good value dimmed below; :meth:`unavailable_hint` adds what that failure means for the
engineer. Times are UTC with a relative age against the app's clock (``self.now``). Unknown
values render ``n/a``; a metric the engine does not expose renders "metric missing" (never 0).

The widgets do no I/O and hold no business rules.
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, ClassVar

from pydantic import BaseModel
from rich.console import Group
from rich.table import Table
from rich.text import Text
from textual import events
from textual.app import ComposeResult
from textual.widgets import Static

from seat_console.core.base import Unavailable, utcnow
from seat_console.core.fmt import fmt_duration
from seat_console.widgets.panel import SourcePanel

if TYPE_CHECKING:  # the source modules (docker, httpx) load after the first frame
    from seat_console.sources.engine import HistogramSummary

MISSING = "metric missing"
"""How a metric the engine does not expose is shown (as ``seat_console.sources.engine.MISSING``)."""


def _short_digest(d: str | None, n: int = 12) -> str:
    """``sha256:a04e5f50632b47b4…`` → ``sha256:a04e5f50632b…``; ``repo@sha256:…`` keeps the
    repo; ``None`` → ``n/a``."""
    if not d:
        return "n/a"
    head, sep, tail = d.rpartition("sha256:")
    if not sep:
        return d
    return f"{head}sha256:{tail[:n]}…"


def _rel(t: datetime | None, now: datetime) -> str:
    """``in 6 min 31 s`` / ``3 min 02 s ago`` / ``n/a``."""
    if t is None:
        return "n/a"
    d = (t - now).total_seconds()
    return f"in {fmt_duration(d)}" if d >= 0 else f"{fmt_duration(d)} ago"


def _rel_coarse(t: datetime | None, now: datetime) -> str:
    """``in 6 min`` / ``3 min ago`` / ``n/a`` — the one duration rule's ``ticker`` style
    (:func:`~seat_console.core.fmt.fmt_duration`), so a compact line is not redrawn every
    second."""
    if t is None:
        return "n/a"
    d = (t - now).total_seconds()
    coarse = fmt_duration(d, style="ticker")
    return f"in {coarse}" if d >= 0 else f"{coarse} ago"


def _table(columns: tuple[str, ...], names: tuple[str, ...],
           min_widths: dict[str, int] | None = None) -> Table:
    """A borderless table whose ``names`` columns (unit, container, state: one word each) never
    wrap (sized to content, cut with "…" only if the panel is narrower); the other columns wrap
    at spaces, and a word too long for its column ends in "…" (never split mid-word);
    ``min_widths``: columns kept at least that wide (e.g. a ``12:06:31Z`` clock)."""
    table = Table(box=None, pad_edge=False, expand=True, show_edge=False)
    for col in columns:
        table.add_column(col, overflow="ellipsis", no_wrap=col in names,
                         min_width=(min_widths or {}).get(col))
    return table


def _hhmm(t: datetime | None) -> str:
    return "n/a" if t is None else t.strftime("%H:%M:%SZ")


def _when(t: datetime | None, now: datetime, rel=None) -> str:
    """``12:06:31Z (in 6 min 31 s)`` / ``n/a``; ``rel``: the relative form (default
    :func:`_rel`; a panel passes its :meth:`_ServicePanel.rel`)."""
    return "n/a" if t is None else f"{_hhmm(t)} ({(rel or _rel)(t, now)})"


class _ServicePanel(SourcePanel):
    """One ``Static`` body filled with a Rich renderable built by :meth:`build`."""

    body_id: ClassVar[str] = "svc-body"
    hold_banner: str | None = None
    """Set by the app while a hold is in effect ("held by the console until 12:41Z (lease
    …)"); the timers and silences panels show it on top."""

    def _with_banner(self, r: Group | Text | Table) -> Group | Text | Table:
        if not self.hold_banner:
            return r
        banner = Text(self.hold_banner, style="bold cyan")
        if isinstance(r, Text):
            return Text.assemble(banner, "\n", r)
        return Group(banner, r)

    NARROW_BELOW: ClassVar[int] = 90
    """Content width (columns) below which the full view stacks each row's fields on two lines
    instead of a table (the detail view at 80 columns): no column cut, no clock split."""

    def compose_body(self) -> ComposeResult:
        yield Static("", id=self.body_id)

    @property
    def narrow(self) -> bool:
        """Whether the full view uses the stacked form (see :attr:`NARROW_BELOW`)."""
        return 0 < self.content_size.width < self.NARROW_BELOW

    def on_resize(self, _event: events.Resize) -> None:
        """Redraw the full view when the width crosses :attr:`NARROW_BELOW`."""
        if self.narrow != getattr(self, "_drawn_narrow", self.narrow) and not self.compact \
                and self._shown is not None:
            self._render_guarded(self._shown)

    def _now(self) -> datetime:
        return self.now or utcnow()

    def rel(self, t: datetime | None, now: datetime) -> str:
        """A relative time as this view draws it: coarse on the main screen (``"3 min ago"``,
        :func:`_rel_coarse`: it changes only at step boundaries, so the age tick redraws it
        rarely), to the second on the detail view (``self.detail``: ``"3 min 02 s ago"``)."""
        return _rel(t, now) if self.detail else _rel_coarse(t, now)

    def time_points(self, reading: BaseModel) -> tuple[datetime | None, ...]:
        """The instants (UTC) the panel draws relative to now ("since 13:09:11Z (2 min ago)"):
        :meth:`retime` redraws when one of their relative texts changes. Default: none."""
        return ()

    def _time_key(self, reading: BaseModel, now: datetime) -> tuple[str, ...]:
        return tuple(self.rel(t, now) for t in self.time_points(reading))

    def retime(self, now: datetime) -> None:
        """The app's age tick (about once a second, no I/O): redraw the shown reading when a
        relative time it draws has moved at ``now`` — an equal reading is not redrawn by the
        app, so without this "since …(47 s ago)" stayed as first drawn. Coarse ages change at
        step boundaries only (10 s, then minutes), so most ticks redraw nothing."""
        shown = self._shown
        if shown is None or not self.time_points(shown):
            return
        if self._time_key(shown, now) != getattr(self, "_drawn_time_key", None):
            self.now = now
            self._render_guarded(shown)

    def build(self, reading: BaseModel, now: datetime) -> Group | Text | Table:
        """The renderable for one reading; subclasses implement."""
        raise NotImplementedError

    def build_compact(self, reading: BaseModel, now: datetime) -> Text | None:
        """The compact form (a few lines), or ``None`` for none; subclasses implement."""
        return None

    def render_compact(self, reading: BaseModel) -> Text | None:
        """:meth:`build_compact` at the app's clock (with the hold banner, if any)."""
        now = self._now()
        self._drawn_time_key = self._time_key(reading, now)
        t = self.build_compact(reading, now)
        return t if t is None else self._with_banner(t)  # type: ignore[return-value]

    def render_reading(self, reading: BaseModel) -> None:
        """Fill the body from one reading (raises TypeError for a reading of another source)."""
        self._drawn_narrow = self.narrow
        now = self._now()
        self._drawn_time_key = self._time_key(reading, now)
        self.query_one(f"#{self.body_id}", Static).update(
            self._with_banner(self.build(reading, now)))


# -- timers ----------------------------------------------------------------------------------
class TimersPanel(_ServicePanel):
    """systemd timer units of the profile (source ``timers``): load/active state, next elapse,
    last trigger, the triggered service and whether it runs now, and the Persistent= warning."""

    source_name: ClassVar[str] = "timers"
    title: ClassVar[str] = "Timers (systemd)"
    body_id: ClassVar[str] = "timers-body"

    def unavailable_hint(self, unavailable: Unavailable) -> str | None:
        """What an unreachable node / missing systemd means here."""
        if unavailable.kind in ("unreachable", "no-systemd"):
            return ("Timer state is unknown: do not assume the fleet's timers are stopped or "
                    "running. The other panels are not affected.")
        return None

    def time_points(self, reading: BaseModel) -> tuple[datetime | None, ...]:
        """Each timer's next elapse and last trigger."""
        return tuple(x for t in getattr(reading, "timers", ()) for x in (t.next_elapse,
                                                                         t.last_trigger))

    def build_compact(self, reading: BaseModel, now: datetime) -> Text | None:
        """One line per timer: unit, state in words, next elapse (UTC and relative)."""
        from seat_console.sources.timers import TimersReading

        if not isinstance(reading, TimersReading):
            raise TypeError(f"timers panel got {type(reading).__name__}")
        t = Text(no_wrap=True, overflow="ellipsis")
        if not reading.timers:
            t.append("no timer units in the profile ([timers])", style="italic")
        for i, tm in enumerate(reading.timers):
            if i:
                t.append("\n")
            if not tm.loaded:
                t.append(f"{tm.load_state or 'n/a':<8}", style="bold red")
            elif tm.active:
                t.append("ACTIVE  ", style="green")
            else:
                t.append("STOPPED ", style="bold yellow")
            t.append(tm.unit + (" [P]" if tm.persistent else ""))
            if tm.next_elapse is not None:
                t.append(f"  next {_hhmm(tm.next_elapse)} ({self.rel(tm.next_elapse, now)})")
            if tm.service is not None and tm.service.running:
                t.append("  RUNNING", style="bold magenta")
        return t

    def build(self, reading: BaseModel, now: datetime) -> Group:
        """Table of timers, then warnings and notes."""
        from seat_console.sources.timers import TimersReading

        if not isinstance(reading, TimersReading):
            raise TypeError(f"timers panel got {type(reading).__name__}")
        table = _table(("timer", "state", "next elapse", "last trigger", "svc"),
                       names=("timer", "state", "svc"), min_widths={"next elapse": 9,
                                                             "last trigger": 9})
        stacked = Text()
        warnings = Text()
        for t in reading.timers:
            if not t.loaded:
                state = Text(t.load_state or "n/a", style="bold red")
            else:
                style = "green" if t.active else "bold yellow"
                state = Text(f"{t.active_state}/{t.sub_state}", style=style)
            svc = Text("n/a")
            if t.service is not None:
                running = t.service.running
                same = t.service.unit.removesuffix(".service") == t.unit.removesuffix(".timer")
                svc = Text("" if same else t.service.unit + " ")   # the default unit: state only
                svc.append({True: "RUNNING", False: "idle", None: "state n/a"}[running],
                           style="bold magenta" if running else "dim")
            table.add_row(
                Text(t.unit + (" [P]" if t.persistent else "")), state,
                f"{_hhmm(t.next_elapse)}\n{self.rel(t.next_elapse, now)}" if t.next_elapse
                else "n/a",
                f"{_hhmm(t.last_trigger)}\n{self.rel(t.last_trigger, now)}" if t.last_trigger
                else "n/a", svc)
            if stacked:
                stacked.append("\n")
            stacked.append_text(Text.assemble(
                (t.unit + (" [P]" if t.persistent else ""), "bold"), "  ", state, "  svc ", svc))
            stacked.append(f"\n  next {_when(t.next_elapse, now, self.rel)} · last "
                           f"{_when(t.last_trigger, now, self.rel)}")
            if t.persistent_warning:
                warnings.append(f"[P] {t.unit}: {t.persistent_warning}\n", style="yellow")
        parts: list[Text | Table] = [Text(f"on {reading.where}", style="dim"),
                                     stacked if self.narrow else table]
        if not reading.timers:
            parts.append(Text("no timer units in the profile ([timers])", style="italic"))
        if warnings:
            warnings.rstrip()
            parts.append(warnings)
        for n in reading.notes:
            parts.append(Text(f"note: {n}", style="dim italic"))
        return Group(*parts)


# -- silences ------------------------------------------------------------------------------
class SilencesPanel(_ServicePanel):
    """Alertmanager silences that concern the seat (source ``silences``): state, time left,
    matchers (``=``, ``!=``, ``=~``, ``!~``), creator and comment."""

    source_name: ClassVar[str] = "silences"
    title: ClassVar[str] = "Silences (Alertmanager)"
    body_id: ClassVar[str] = "silences-body"

    def unavailable_hint(self, unavailable: Unavailable) -> str | None:
        """What an unreachable Alertmanager or an auth problem means here."""
        if unavailable.kind in ("unreachable", "timeout"):
            return ("Whether the seat is silenced is unknown; existing silences keep working in "
                    "Alertmanager. The other panels are not affected.")
        if unavailable.kind in ("auth", "config"):
            return ("Check alertmanager.auth and the credentials (environment variables or "
                    "credentials_file); they are never shown here.")
        return None

    def time_points(self, reading: BaseModel) -> tuple[datetime | None, ...]:
        """Each shown silence's start and end (the expired ones are only counted, except in
        the detail view: Alertmanager keeps them for days, and the lab's 60-odd were 14 % of
        the UI thread's idle CPU, each age tick formatting their times to draw nothing)."""
        return tuple(x for s in getattr(reading, "silences", ())
                     if self.detail or s.state != "expired" for x in (s.starts_at, s.ends_at))

    def build_compact(self, reading: BaseModel, now: datetime) -> Text | None:
        """One line per silence that concerns the seat (state, time left, matchers), or "no
        silence on the seat"."""
        from seat_console.sources.silences import SilencesReading

        if not isinstance(reading, SilencesReading):
            raise TypeError(f"silences panel got {type(reading).__name__}")
        t = Text(no_wrap=True, overflow="ellipsis")
        shown = [x for x in reading.silences if x.state != "expired"]
        if not shown:
            t.append("no silence in effect on the seat", style="bold")
            t.append(f" · {reading.total} in Alertmanager", style="dim")
            n_expired = len(reading.silences) - len(shown)
            if n_expired:
                t.append(f" · {n_expired} expired (Enter)", style="dim")
        for i, x in enumerate(shown):
            if i:
                t.append("\n")
            if x.state == "active":
                t.append("ACTIVE  ", style="bold green")
                t.append(f"ends {self.rel(x.ends_at, now)}")
            else:
                t.append(f"{x.state.upper():<8}", style="yellow")
                t.append(f"starts {self.rel(x.starts_at, now)}")
            t.append(f"  {x.id[:8]}  " + ", ".join(str(m) for m in x.matchers))
            t.append(f"  by {x.created_by}", style="dim")
        if not reading.tls_verify:
            t.append("\nTLS NOT VERIFIED", style="bold red")
        if reading.coverage:
            t.append("\nWARNING: the hold's silence would not cover the seat (Enter)",
                     style="bold red")
        return t

    def build(self, reading: BaseModel, now: datetime) -> Group:
        """Header (Alertmanager, seat matchers, counts), then one row per active or pending
        silence and a count of the expired ones; the detail view (``self.detail``) lists
        every silence."""
        from seat_console.sources.silences import SilencesReading

        if not isinstance(reading, SilencesReading):
            raise TypeError(f"silences panel got {type(reading).__name__}")
        head = Text()
        head.append(f"Alertmanager {reading.version or 'n/a'} at {reading.url}", style="dim")
        if not reading.tls_verify:
            head.append("  TLS NOT VERIFIED", style="bold red")
        head.append("\nseat: " + ", ".join(str(m) for m in reading.seat_matchers))
        for w in reading.coverage:
            head.append(f"\nWARNING: {w}", style="bold red")
            head.append("\n  fix [[silence.matchers]] in the profile", style="bold")
        n_active = len(reading.active)
        head.append(f"\n{n_active} active", style="bold green" if n_active else "bold")
        n_expired = sum(s.state == "expired" for s in reading.silences)
        # the panel's words (the trial read "no silence on the seat" vs "18 concern the seat")
        head.append(f" · {len(reading.silences)} on the seat, {n_expired} of them expired · "
                    f"{reading.total} in Alertmanager")
        parts: list[Text | Table | Group] = [head]
        rows = [s for s in reading.silences if self.detail or s.state != "expired"]
        if rows and self.narrow:
            stacked = Text()
            for s in rows:
                when, style = _silence_when(s, now, self.rel)
                if stacked:
                    stacked.append("\n")
                stacked.append(f"{s.id[:8]}  ")
                stacked.append(s.state, style=style)
                stacked.append(f"  {when}  by {s.created_by}: {s.comment}")
                stacked.append("\n  " + ", ".join(str(m) for m in s.matchers)
                               + (" (= seat)" if s.exact else ""))
            parts.append(stacked)
        elif rows:
            table = _table(("id", "state", "time", "matchers", "by"), names=("id", "state"))
            for s in rows:
                when, style = _silence_when(s, now, self.rel)
                table.add_row(s.id[:8], Text(s.state, style=style), when,
                              ", ".join(str(m) for m in s.matchers)
                              + (" (= seat)" if s.exact else ""),
                              f"{s.created_by}: {s.comment}")
            parts.append(table)
        if n_expired and not self.detail:   # Alertmanager keeps expired ones for days
            parts.append(Text(f"{n_expired} expired (Enter for details)", style="italic"))
        return Group(*parts)


def _silence_when(s: object, now: datetime, rel=None) -> tuple[str, str]:
    """A silence's time in words and the style of its state: ``("ends in 2 h 10 min 00 s",
    "green")``, ``("starts in …", "yellow")``, ``("ended … ago", "dim")``; ``rel``: the
    relative form (default :func:`_rel`; a panel passes its :meth:`_ServicePanel.rel`)."""
    rel = rel or _rel
    if s.state == "active":
        return f"ends {rel(s.ends_at, now)}", "green"
    if s.state == "pending":
        return f"starts {rel(s.starts_at, now)}", "yellow"
    return f"ended {rel(s.ends_at, now)}", "dim"


# -- containers ----------------------------------------------------------------------------
def _since(c: object, now: datetime, coarse: bool = False, rel=None) -> str:
    """A running container's start ("started 3 min 02 s ago"); a stopped one's end ("exited
    3 min 02 s ago", never its old start time). ``coarse``: "3 min ago" (compact lines);
    ``rel``: the relative form (a panel passes its :meth:`_ServicePanel.rel`)."""
    rel = rel or (_rel_coarse if coarse else _rel)
    if getattr(c, "running", False):
        return f"started {rel(getattr(c, 'started_at', None), now)}"
    finished = getattr(c, "finished_at", None)
    state = getattr(c, "state", None) or "stopped"
    if finished is None:
        return f"{state}, end n/a"
    return f"{state} {rel(finished, now)}"

class ContainersPanel(_ServicePanel):
    """The resident and probe containers (source ``containers``): state, health, start time,
    restart count, image ID (config digest) vs repo digest (registry manifest), and the recent
    engine events, flagging changes the console did not make."""

    source_name: ClassVar[str] = "containers"
    title: ClassVar[str] = "Containers (docker)"
    body_id: ClassVar[str] = "containers-body"

    RECENT_SHOWN: ClassVar[int] = 5

    def unavailable_hint(self, unavailable: Unavailable) -> str | None:
        """What an unreachable docker engine means here."""
        if unavailable.kind == "unreachable":
            return ("The docker engine does not answer; containers may still be running "
                    "(live-restore) — check the engine panel. The other panels are not affected.")
        return None

    def time_points(self, reading: BaseModel) -> tuple[datetime | None, ...]:
        """Each container's start (running) or end (stopped)."""
        return tuple(c.started_at if c.running else c.finished_at
                     for c in getattr(reading, "containers", ()))

    def build_compact(self, reading: BaseModel, now: datetime) -> Text | None:
        """One line per container: role, name, state (exit code), health, since."""
        from seat_console.sources.containers import ContainersReading

        if not isinstance(reading, ContainersReading):
            raise TypeError(f"containers panel got {type(reading).__name__}")
        t = Text(no_wrap=True, overflow="ellipsis")
        if not reading.containers:
            t.append("no containers in the profile", style="italic")
        for i, c in enumerate(reading.containers):
            if i:
                t.append("\n")
            t.append(f"{c.role:<9}", style="bold")
            t.append(f"{c.name}  ")
            if c.state == "absent":
                t.append("absent", style="dim")
                continue
            state = c.state + ("" if c.running or c.exit_code is None else f" ({c.exit_code})")
            t.append(state, style="green" if c.running else "bold yellow")
            if c.health:
                t.append(f" {c.health}", style={"healthy": "green",
                                                "unhealthy": "bold red"}.get(c.health, ""))
            t.append(f"  {_since(c, now, rel=self.rel)}")
        ev = reading.events
        if ev is not None and not ev.connected:
            t.append(f"\nevents {ev.word}", style="dim" if ev.connecting else "bold red")
        return t

    def build(self, reading: BaseModel, now: datetime) -> Group:
        """Table of containers, then the event stream's state and the latest changes."""
        from seat_console.sources.containers import ContainersReading

        if not isinstance(reading, ContainersReading):
            raise TypeError(f"containers panel got {type(reading).__name__}")
        table = _table(("role", "container", "state", "health", "since", "restarts",
                        "image ID / repo digest"), names=("role", "container", "state", "health",
                                                          "restarts"))
        stacked = Text()
        for c in reading.containers:
            if stacked:
                stacked.append("\n")
            stacked.append(f"{c.role:<9}", style="bold")
            stacked.append(f"{c.name}  ")
            if c.state == "absent":
                table.add_row(c.role, c.name, Text("absent", style="dim"), "", "", "", "")
                stacked.append("absent", style="dim")
                continue
            if c.problem is not None:  # the engine's reply for it was unreadable
                table.add_row(c.role, c.name, Text("unknown", style="bold yellow"), "", "", "",
                              Text(c.problem, style="dim"))
                stacked.append(f"unknown: {c.problem}", style="bold yellow")
                continue
            stacked.append(c.state + ("" if c.running or c.exit_code is None
                                      else f" ({c.exit_code})"),
                           style="green" if c.running else "bold yellow")
            stacked.append(f"  health {c.health or 'n/a'}  restarts "
                           f"{'n/a' if c.restart_count is None else c.restart_count}")
            stacked.append(f"\n  {_since(c, now, rel=self.rel)}")
            stacked.append(f"\n  image ID {_short_digest(c.image_id)}\n  repo digest "
                           f"{_short_digest(c.repo_digest)}", style="dim")
            style = "green" if c.running else "bold yellow"
            state = c.state + ("" if c.running or c.exit_code is None else f" ({c.exit_code})")
            health_style = {"healthy": "green", "unhealthy": "bold red"}.get(c.health or "", "")
            table.add_row(
                c.role, c.name, Text(state, style=style),
                Text(c.health or "n/a", style=health_style),
                _since(c, now, rel=self.rel), "n/a" if c.restart_count is None else str(c.restart_count),
                f"{_short_digest(c.image_id)}\n{_short_digest(c.repo_digest)}")
        head = Text(f"docker {reading.engine_version or 'n/a'} at {reading.engine}", style="dim")
        parts: list[Text | Table] = [head, stacked if self.narrow else table]
        if not reading.containers:
            parts.append(Text("no containers in the profile", style="italic"))
        ev = reading.events
        if ev is not None:
            t = Text("events: ")
            t.append(ev.word, style="green" if ev.connected else "dim" if ev.connecting
                     else "bold red")
            if ev.reconnects:
                t.append(f" · {ev.reconnects} reconnect(s)")
            if not ev.connected and ev.last_error:
                t.append(f" · {ev.last_error}", style="dim")
            for e in reading.recent_changes[-self.RECENT_SHOWN:]:
                t.append(f"\n  {_hhmm(e.at)} {e.actor_name or e.actor_id[:12]} {e.action}")
                if e.exit_code is not None:
                    t.append(f" (exit {e.exit_code})")
                if e.by_console:   # the journaled run, when another process made it
                    t.append("  by console" + (f": {e.by}" if e.by and e.by != "this console"
                                               else ""), style="dim")
                else:
                    t.append("  not by the console", style="yellow")
            parts.append(t)
        return Group(*parts)


# -- engine ----------------------------------------------------------------------------------
_HELD_WORDS = {"PAUSED": "PAUSED healthy, admits nothing new",
               "ASLEEP": "ASLEEP healthy, weights put away"}
"""The engine panel's words for the engine's own hold state (``EngineReading.hold_state``):
``/health`` is 200 in both, so the panel must not say UP."""


def _num(v: float | None) -> Text:
    return Text(MISSING, style="italic yellow") if v is None else Text(f"{v:,.0f}")


def _pct(v: float | None) -> Text:
    return Text(MISSING, style="italic yellow") if v is None else Text(f"{v * 100:.1f} %")


def _lat(h: HistogramSummary | None) -> Text:
    if h is None:
        return Text(MISSING, style="italic yellow")
    if h.count == 0 or h.mean_s is None:
        return Text("no requests yet", style="dim")
    p = "n/a" if h.p95_s is None else f"{h.p95_s * 1000:.0f}"
    return Text(f"mean {h.mean_s * 1000:.1f} ms · p95 ~{p} ms (n={h.count})")


def _rate(v: float | None, width: int = 7) -> str:
    """A rate in a fixed width (so columns do not shift): ``"   12.3"``; unknown → ``n/a``."""
    return f"{'n/a':>{width}}" if v is None else f"{v:>{width}.1f}"


def _ms(v: float | None) -> str:
    return f"{'n/a':>6}" if v is None else f"{v * 1000:>6.0f}"


def _window(lat: object | None) -> Text:
    """``p50    36 · p95    58 ms (n=   12)`` over the window; fixed widths."""
    if lat is None:
        return Text(f"{'n/a (one scrape, missing or reset)':<33}", style="dim")
    n = getattr(lat, "n", 0)
    if n == 0:
        return Text(f"{'no requests in the window':<33}", style="dim")
    return Text(f"p50 {_ms(lat.p50_s)} · p95 {_ms(lat.p95_s)} ms (n={n:>5})")


def _rates_key(r: object) -> tuple:
    """What the compact engine line shows of the rates (the window's length aside)."""
    return (r.req_per_s, r.out_tok_per_s, r.ttft, r.itl, r.e2e)


def rates_lines(rates: object) -> list[tuple[str, Text, str, Text]]:
    """Rows of the rates grid: req/s and output tok/s over the last interval, TTFT / ITL / E2E
    percentiles over the window."""
    win = getattr(rates, "window_s", None)
    wl = "n/a" if win is None else f"{win:.0f} s"
    return [
        ("req/s", Text(_rate(rates.req_per_s)), "output tok/s", Text(_rate(rates.out_tok_per_s))),
        (f"TTFT ({wl})", _window(rates.ttft), f"ITL ({wl})", _window(rates.itl)),
        (f"E2E ({wl})", _window(rates.e2e), "", Text("")),
    ]


class EnginePanel(_ServicePanel):
    """The seat's vLLM engine (source ``engine``): health, version, model (the engine's
    identity, with the time it was read: the source asks it every 15 s, not every read,
    :data:`seat_console.sources.engine.IDENTITY_KEEP_S`), queue, KV cache usage, rates (req/s
    and output tok/s over the last interval, from counter differences), TTFT / ITL / E2E
    percentiles over the last minute (from histogram bucket differences, with the sample
    count), preemptions. Rates: :mod:`seat_console.snapshot.engine_rates`."""

    source_name: ClassVar[str] = "engine"
    title: ClassVar[str] = "Engine (vLLM)"
    body_id: ClassVar[str] = "engine-body"
    NARROW_BELOW: ClassVar[int] = 72
    """The four-column grid fits from 72 columns (the two-column layout at 160)."""

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        from seat_console.snapshot.engine_rates import RateHistory

        self.history = RateHistory()
        self._last_added: object = None

    def _add(self, reading: BaseModel) -> None:
        """Add the reading's scrape to the rate history (once per reading)."""
        if reading is self._last_added:
            return
        self._last_added = reading
        at = getattr(reading, "read_at", None)
        # metrics kept from an earlier scrape (this one failed) are no new sample: a rate of 0
        kept = any(k.field == "metrics" for k in getattr(reading, "kept", ()))
        if at is not None and not kept:
            self.history.add(at, getattr(reading, "metrics", None))

    def render_reading(self, reading: BaseModel) -> None:
        """Add the scrape to the history, then draw."""
        self._add(reading)
        super().render_reading(reading)

    def carry_over(self, shown: SourcePanel) -> None:
        """The detail view shares the main panel's rate history: a fresh one said "req/s n/a",
        "TTFT n/a (one scrape…)" for the next two reads while the line behind it said 0.0
        (the trial). One history, fed by both: a scrape already in it is not added again
        (:meth:`~seat_console.snapshot.engine_rates.RateHistory.add`)."""
        if isinstance(shown, EnginePanel):
            self.history = shown.history

    def note_unchanged(self, reading: BaseModel) -> None:
        """An equal scrape: no traffic since the last one; the rates fall to 0 (redrawn only
        if their text changes), in the compact and in the full view alike."""
        if isinstance(reading, Unavailable) or self.unavailable is not None:
            return
        before = _rates_key(self.history.rates())
        self._add(reading)
        if _rates_key(self.history.rates()) != before:
            self._render_guarded(reading)

    def time_points(self, reading: BaseModel) -> tuple[datetime | None, ...]:
        """The identity's read time on the detail view (drawn there as "… (12 s ago)"; the
        main screen draws its clock time only, which no tick moves)."""
        return (getattr(reading, "identity_at", None),) if self.detail else ()

    def build_compact(self, reading: BaseModel, now: datetime) -> Text | None:
        """Two lines: health, model, queue and KV cache; then req/s, tok/s, TTFT p50/p95."""
        from seat_console.sources.engine import EngineReading

        if not isinstance(reading, EngineReading):
            raise TypeError(f"engine panel got {type(reading).__name__}")
        self._add(reading)
        t = Text(no_wrap=True, overflow="ellipsis")
        held = _HELD_WORDS.get(reading.hold_state or "")
        if held is not None:
            t.append(held, style="bold yellow")
        else:
            t.append("UP healthy" if reading.healthy else
                     f"DOWN: not healthy (HTTP {reading.health_status})",
                     style="bold green" if reading.healthy else "bold red")
        if reading.models:
            t.append(f" · {reading.models[0].id}")
        m = reading.metrics
        if m is None:
            t.append(" · metrics n/a", style="yellow")
            return t
        run = "n/a" if m.requests_running is None else f"{m.requests_running:.0f}"
        wait = "n/a" if m.requests_waiting is None else f"{m.requests_waiting:.0f}"
        kv = "n/a" if m.kv_cache_usage is None else f"{m.kv_cache_usage * 100:5.1f} %"
        t.append(f" · running {run:>3} waiting {wait:>3} · KV {kv}")
        r = self.history.rates()
        t.append(f"\nreq/s {_rate(r.req_per_s, 6)} · tok/s {_rate(r.out_tok_per_s, 7)} · TTFT ")
        t.append_text(_window(r.ttft))
        return t

    def unavailable_hint(self, unavailable: Unavailable) -> str | None:
        """What an engine that does not answer means here."""
        if unavailable.kind in ("unreachable", "timeout"):
            return ("The seat's endpoint does not answer: the seat is down or restarting (check "
                    "the containers panel). The other panels are not affected.")
        return None

    def build(self, reading: BaseModel, now: datetime) -> Group:
        """Health line, models, then a two-column grid of metrics."""
        from seat_console.sources.engine import EngineReading

        if not isinstance(reading, EngineReading):
            raise TypeError(f"engine panel got {type(reading).__name__}")
        head = Text()
        held = _HELD_WORDS.get(reading.hold_state or "")
        if held is not None:
            head.append(held, style="bold yellow")
        else:
            head.append("healthy" if reading.healthy else
                        f"NOT healthy (HTTP {reading.health_status})",
                        style="bold green" if reading.healthy else "bold red")
        head.append(f" · vLLM {reading.version or 'n/a'} at {reading.endpoint}")
        if reading.models:
            head.append("\nmodel " + ", ".join(
                f"{m.id} (max_model_len {m.max_model_len or 'n/a'})" for m in reading.models))
        if reading.identity_at is not None:   # read every 15 s, not every read: its real time
            head.append(" · identity read " + (_when(reading.identity_at, now, self.rel)
                                                if self.detail else _hhmm(reading.identity_at)),
                        style="dim")
        parts: list[Text | Table] = [head]
        m = reading.metrics
        if m is not None:
            rows = [("running", _num(m.requests_running), "waiting", _num(m.requests_waiting)),
                    ("KV cache", _pct(m.kv_cache_usage), "preemptions", _num(m.preemptions)),
                    *rates_lines(self.history.rates()),
                    ("prompt tokens", _num(m.prompt_tokens), "generation tokens",
                     _num(m.generation_tokens)),
                    ("finished", _num(m.requests_finished), "", ""),
                    ("TTFT (all)", _lat(m.ttft), "ITL (all)", _lat(m.itl)),
                    ("E2E (all)", _lat(m.e2e), "", "")]
            grid = Table.grid(padding=(0, 2), expand=True)
            if self.narrow:   # label, value: one pair a line
                grid.add_column(no_wrap=True)
                grid.add_column()
                for a, va, b, vb in rows:
                    grid.add_row(a, va)
                    if b:
                        grid.add_row(b, vb)
            else:
                for _ in range(4):
                    grid.add_column()
                for row in rows:
                    grid.add_row(*row)
            parts.append(grid)
        for p in reading.problems:
            parts.append(Text(f"problem: {p}", style="yellow"))
        return Group(*parts)


__all__ = ["ContainersPanel", "EnginePanel", "SilencesPanel", "TimersPanel"]
