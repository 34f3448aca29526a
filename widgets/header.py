"""The main screen's header: the node and seat identity (the same line as the first frame's) on
the left, the refresh state (READ-ONLY, PAUSED, "every 1 s") on the right, and — on a full
screen — the endpoint and the profile with its hash. Pure view: the app hands it the facts."""

from __future__ import annotations

from rich.cells import cell_len
from rich.console import Group
from rich.table import Table
from rich.text import Text
from textual.widgets import Static

from seat_console.core.profile import LoadedProfile


class SeatHeader(Static):
    """Header: node and seat identity on the left, refresh state (PAUSED, READ-ONLY) right."""

    DEFAULT_CSS = """
    SeatHeader { height: auto; background: $panel; color: $text; padding: 0 1; }
    """

    def draw(self, loaded: LoadedProfile, ident: Text, *, readonly: bool, paused: bool,
             interval_s: float, compact: bool) -> None:
        """Draw from the profile and the refresh state; ``ident``: the node and seat identity
        (the first frame's ``header_line``, handed down by the app); ``compact`` keeps one line
        (the detail is in help and ``--json``; on the embedded default profile it still says
        "default profile": a new user's trial at 120×40 never saw which profile ran);
        ``interval_s`` in seconds."""
        p = loaded.profile
        where = ("embedded default" if loaded.origin == "default"
                 else f"{loaded.source} ({loaded.origin})")
        detail = Text(f"endpoint {p.seat.endpoint} · profile {where} · "
                      f"sha256 {loaded.sha256[:8]}", style="dim")
        mode = Text()
        if readonly:
            mode.append(" READ-ONLY ", style="bold reverse")
            mode.append(" ")
        if paused:
            mode.append(" PAUSED ", style="bold reverse")
        else:
            mode.append(f"every {interval_s:g} s")
        if compact and loaded.origin == "default":   # the one profile fact a compact header
            mark = Text("default profile · ", style="bold yellow")   # keeps: no real seat's
            width = self.app.size.width if self.is_attached else 0   # where it fits on the
            if cell_len(ident.plain) + cell_len(mark.plain + mode.plain) + 3 <= width:  # line
                mode = mark + mode
        grid = Table.grid(expand=True, padding=(0, 1))
        grid.add_column(ratio=1)
        grid.add_column(justify="right", no_wrap=True)
        grid.add_row(ident, mode)
        self.update(grid if compact else Group(grid, detail))


__all__ = ["SeatHeader"]
