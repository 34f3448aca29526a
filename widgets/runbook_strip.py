"""The runbook strip under the status line: every stage of the seat-swap runbook with its mark,
the next stage's key highlighted, in one line that fits the terminal (80 columns included).

``runbook ✓ fit  ✓ image  ✓ hold  ▸ B backport  · swap  · probe  · compare  · decide  · restore …``

Marks (:data:`MARKS`) are characters, so the strip reads the same under ``NO_COLOR``: done ✓,
failed ✗, stale ~ (done, but something it depends on changed after it), todo ·, skipped –;
``▸`` marks the next stage, its key (the key table's, as remapped) in reverse video — for a
stage without a key of its own (fit, image, decide) the runbook screen's key (``g``), where
Enter runs it. Colour only
repeats what the marks say. When the full form does not fit, :func:`render_strip` tries tighter
forms in turn (:data:`FORMS`): single spaces; the done and skipped stages before the next one as
bare marks (``✓✓✓``); the stages after the next one joined by their marks alone
(``·swap·probe``), its tail cut with ``…`` when only stages after the next one are cut;
every stage but the next one as its bare mark (``✓~✗✓ ▸ U release ·``: the next stage's name
is never cut, wherever it stands); last, the end cut with ``…``.
After a closed cycle the strip ends ``cycle closed ▸ fit`` (a new cycle begins at fit). The runbook screen (``g``) shows every stage
in full. Pure view of a :class:`~seat_console.actions.stages.RunbookState`: no I/O (the state is
read in a worker: :mod:`seat_console.tui.runbook_state`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from rich.cells import cell_len
from rich.text import Text
from textual.widgets import Static

if TYPE_CHECKING:   # annotations only: the runbook's modules are not on the first frame's path
    from seat_console.actions.stages import RunbookState, StageState

MARKS = {"done": "✓", "failed": "✗", "stale": "~", "todo": "·", "skipped": "–", "running": "…"}
"""A stage's mark by status (the words of ``NO_COLOR``)."""

STYLES = {"done": "green", "failed": "bold red", "stale": "bold yellow", "todo": "dim",
          "skipped": "dim", "running": "bold cyan"}
"""A stage's colour by status (repeats the mark)."""

NEXT_MARK = "▸"
KEY_STYLE = "bold reverse"
FORMS = ("spaced", "single", "collapsed", "joined", "marks")
"""The strip's forms, widest first (see the module docstring)."""

KeyOf = Callable[[str | None], str | None]
"""``key_of(binding id) -> the key as shown`` (``None``: no key offered, e.g. read-only)."""


def _mark(stage: StageState) -> str:
    return MARKS.get(stage.status, "?")


def _next_token(stage: StageState, key_of: KeyOf, guide: str | None = None) -> Text:
    """``▸ B backport``: the next stage, its mark when not todo (``▸✗``), its key reversed."""
    t = Text()
    t.append(NEXT_MARK, style="bold")
    if stage.status != "todo":
        t.append(_mark(stage), style=STYLES.get(stage.status, ""))
    key = key_of(stage.key) or (guide if stage.key is None else None)
    if key:
        t.append(f" {key} ", style=KEY_STYLE)
    else:
        t.append(" ")
    t.append(stage.name, style="bold")
    return t


def _form(state: RunbookState, key_of: KeyOf, form: str, problem: str | None = None,
          guide: str | None = None, which: bool = False) -> Text:
    """One form of the strip (:data:`FORMS`), uncut; ``which``: the sources not read are
    followed by where they are named (the runbook screen's key)."""
    spaced = form == "spaced"
    sep = "  " if spaced else " "
    nxt = state.next.name if state.next is not None else None
    idx = next((i for i, s in enumerate(state.stages) if s.name == nxt), len(state.stages))
    pieces: list[Text] = []
    next_piece: int | None = None
    marks = Text()          # done / skipped stages before the next one, collapsed to marks
    for i, s in enumerate(state.stages):
        if (form in ("collapsed", "joined") and i < idx and s.status in ("done", "skipped")
                or form == "marks" and i != idx):
            marks.append(_mark(s), style=STYLES.get(s.status, ""))
            continue
        if marks:
            pieces.append(marks)
            marks = Text()
        if i == idx:
            next_piece = len(pieces)
            pieces.append(_next_token(s, key_of, guide))
            continue
        t = Text()
        t.append(_mark(s), style=STYLES.get(s.status, ""))
        t.append((" " if spaced else "") + s.name,
                 style="dim" if s.status in ("todo", "skipped") else "")
        pieces.append(t)
    if marks:
        pieces.append(marks)
    out = Text(no_wrap=True, overflow="ellipsis")
    if state.problems and form not in ("spaced", "single"):   # narrow: the count first, where
        out.append(f"⚠{len(state.problems)}", style="bold yellow")   # no cut reaches it (80
        out.append(" ")                                               # columns lost it)
    if spaced:
        out.append("runbook ", style="bold")
    for j, p in enumerate(pieces):
        if j:   # joined: the stages after the next one are separated by their marks alone
            out.append("" if form == "joined" and next_piece is not None
                       and j > next_piece + 1 else sep)
        out.append_text(p)
    if state.next is None and state.cycle_closed_at is not None:
        out.append(sep + ("cycle closed" if form in ("spaced", "single") else "closed"),
                   style="bold green")
        out.append(sep + NEXT_MARK + " fit", style="bold")    # a new cycle begins at fit
    elif state.next is None:
        out.append(sep + "complete", style="bold green")
    if state.problems and form in ("spaced", "single"):
        n = len(state.problems)   # sources the read could not read (g: each, in words)
        out.append(f"{sep}⚠ {n} source{'s' if n > 1 else ''} not read", style="bold yellow")
        screen_key = key_of("runbook") if which else None
        if screen_key:   # the trial asked "which ones?": the runbook screen names each
            out.append(f" ({screen_key}: which)", style="yellow")
    if problem:   # the newest read failed: what is shown is the last good one, said so
        out.append(sep + ("⚠ last read failed" if form in ("spaced", "single") else "⚠ old"),
                   style="bold yellow")
    return out


def render_strip(state: RunbookState | None, width: int, key_of: KeyOf,
                 problem: str | None = None, guide: str | None = None) -> Text:
    """The strip for ``state`` in at most ``width`` cells: the widest of :data:`FORMS` that
    fits, else the tightest cut with ``…``. ``state`` ``None``: ``problem`` (why there is
    none: not read yet, the reader failed) or "reading…"; with a ``state``, a ``problem``
    says the newest read failed (``⚠ last read failed`` / ``⚠ old``: the state shown is the
    last good one, never passed off as fresh); sources not read are counted, and where the
    line has room followed by the key of the screen that names them. ``guide``: the key shown for a next stage
    without a key of its own (the runbook screen's, ``g``; ``None`` under ``--readonly``,
    where nothing runs). Pure."""
    if state is None:
        t = Text(no_wrap=True, overflow="ellipsis")
        t.append("runbook ", style="bold")
        t.append(problem or "reading the runbook's state…", style="dim")
        t.truncate(max(width, 1), overflow="ellipsis")
        return t
    for form in FORMS:
        if state.problems and form in ("spaced", "single"):   # where they are named, if it fits
            t = _form(state, key_of, form, problem, guide, which=True)
            if cell_len(t.plain) <= width:
                return t
        t = _form(state, key_of, form, problem, guide)
        if cell_len(t.plain) <= width:
            return t
        if form == "joined" and _next_within(t.plain, state, width - 1):
            t.truncate(max(width, 1), overflow="ellipsis")   # only stages after it are cut
            return t
    t.truncate(max(width, 1), overflow="ellipsis")
    return t


def _next_within(plain: str, state: RunbookState, cells: int) -> bool:
    """Whether the next stage's token (``▸ … name``) ends within the first ``cells``."""
    at = plain.find(NEXT_MARK)
    if state.next is None or at < 0:
        return False
    end = plain.find(state.next.name, at)
    return end >= 0 and cell_len(plain[:end + len(state.next.name)]) <= cells


class RunbookStrip(Static):
    """The strip widget (see the module docstring). :meth:`show` gives it the newest state;
    it redraws at its own width. ``key_of``: the app's key display of a binding id;
    ``guide``: see :func:`render_strip`."""

    DEFAULT_CSS = """
    RunbookStrip { height: 1; padding: 0 1; background: $boost; }
    """

    def __init__(self, key_of: KeyOf, guide: str | None = None, **kwargs: Any) -> None:
        super().__init__("", **kwargs)
        self.key_of = key_of
        self.guide = guide
        self.state: RunbookState | None = None
        self.problem: str | None = None
        self.draws = 0

    def show(self, state: RunbookState | None, problem: str | None = None) -> None:
        """Show ``state`` and ``problem`` (why the newest read failed, or ``None``); no redraw
        when nothing changed (the read time alone does not count)."""
        if (_same(state, self.state) and problem == self.problem):
            return
        self.state, self.problem = state, problem
        self.draws += 1
        self.refresh()

    def render(self) -> Text:
        """The strip at the widget's content width."""
        return render_strip(self.state, self.content_region.width or self.size.width,
                            self.key_of, self.problem, self.guide)


def _same(a: RunbookState | None, b: RunbookState | None) -> bool:
    if a is None or b is None:
        return a is b
    return (a.stages, a.next, a.seat_holder, a.problems) == (b.stages, b.next, b.seat_holder,
                                                              b.problems)


__all__ = ["FORMS", "MARKS", "RunbookStrip", "render_strip"]
