"""The main screen's header: the node and seat identity (the same line as the first frame's) on
the left, the refresh state (READ-ONLY, PAUSED, "every 1 s") on the right, and — on a full
screen — the endpoint and the profile with its hash. Each is one line at any width: the
identity comes in forms, longest first (:class:`OneLine` shows the first that fits), and the
tooltip carries the whole text. Pure view: the app hands it the facts."""

from __future__ import annotations

from collections.abc import Sequence

from rich.console import Console, ConsoleOptions, Group, RenderResult
from rich.measure import Measurement
from rich.table import Table
from rich.text import Text
from textual.widgets import Static

from seat_console.core.profile import LoadedProfile

GAP = 2
"""Cells between the left and the right part of a header line (the grid's padding)."""


class OneLine:
    """A line of a left part and a right part (justified right) that never wraps: the first
    ``(left, right)`` of ``choices`` (preferred first) that fits the width it is drawn at,
    else the last with its left part cut with "…". Chosen at each draw, so a resize picks
    again."""

    def __init__(self, choices: Sequence[tuple[Text, Text]]) -> None:
        self.choices = list(choices)

    def pick(self, width: int) -> tuple[Text, Text]:
        """The ``(left, right)`` shown at ``width`` cells (the last one cut to fit)."""
        for left, right in self.choices:
            if left.cell_len + GAP + right.cell_len <= width:
                return left, right
        left, right = self.choices[-1]
        left = left.copy()
        left.no_wrap, left.overflow = True, "ellipsis"
        left.truncate(max(1, width - GAP - right.cell_len), overflow="ellipsis")
        return left, right

    def __rich_measure__(self, console: Console, options: ConsoleOptions) -> Measurement:
        """From the shortest choice to the longest."""
        sizes = [left.cell_len + GAP + right.cell_len for left, right in self.choices]
        return Measurement(min(sizes), max(sizes)).clamp(max_width=options.max_width)

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        left, right = self.pick(options.max_width)
        if not right.plain:   # a line of one part: as it is (no grid)
            yield left
            return
        grid = Table.grid(expand=True, padding=(0, GAP // 2))
        grid.add_column(ratio=1)
        grid.add_column(justify="right", no_wrap=True)
        grid.add_row(left, right)
        yield grid


class SeatHeader(Static):
    """Header: node and seat identity on the left, refresh state (PAUSED, READ-ONLY) right."""

    DEFAULT_CSS = """
    SeatHeader { height: auto; background: $panel; color: $text; padding: 0 1; }
    """

    def draw(self, loaded: LoadedProfile, ident: Text | Sequence[Text], *, readonly: bool,
             paused: bool, interval_s: float, compact: bool) -> None:
        """Draw from the profile and the refresh state; ``ident``: the node and seat identity
        (the first frame's, handed down by the app: ``header_forms``), or its forms, longest
        first — the line shows the longest that fits beside the refresh state, so it stays
        one line (at 80 columns a node name of 16 characters wrapped the utilisation onto a
        line of its own); the tooltip has the whole of it. ``compact`` keeps one line (the
        detail is in help and ``--json``; on the embedded default profile it still says
        "default profile" where the whole identity fits beside it: a new user's trial at
        120×40 never saw which profile ran); else a second line, the endpoint and the profile
        with its hash (the endpoint left out, then the line cut, where they do not fit);
        ``interval_s`` in seconds."""
        forms = [ident] if isinstance(ident, Text) else list(ident)
        p = loaded.profile
        where = ("embedded default" if loaded.origin == "default"
                 else f"{loaded.source} ({loaded.origin})")
        detail = Text(f"endpoint {p.seat.endpoint} · profile {where} · "
                      f"sha256 {loaded.sha256[:8]}", style="dim")
        short = Text(f"profile {where} · sha256 {loaded.sha256[:8]}", style="dim")
        mode = Text()
        if readonly:
            mode.append(" READ-ONLY ", style="bold reverse")
            mode.append(" ")
        if paused:
            mode.append(" PAUSED ", style="bold reverse")
        else:
            mode.append(f"every {interval_s:g} s")
        choices = [(form, mode) for form in forms]
        if compact and loaded.origin == "default":   # the one profile fact a compact header
            mark = Text("default profile · ", style="bold yellow")   # keeps (no real seat's),
            choices.insert(0, (forms[0], mark + mode))            # beside the whole identity
        line = OneLine(choices)
        self.tooltip = Text("\n").join([forms[0], mode, detail])   # the whole, at any width
        self.update(line if compact else Group(line, OneLine([(detail, Text()), (short, Text())])))


__all__ = ["GAP", "OneLine", "SeatHeader"]
