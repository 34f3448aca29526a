"""The main screen's footer: every key offered now, node actions included where they fit.

Textual's :class:`~textual.widgets.Footer` lists every binding with ``show=True``. With the
node-action keys (hold, release, backport, swap, restore, probe) that line is about 140 columns
wide, so below :data:`ALL_KEYS_FROM_COLS` columns :class:`SeatFooter` leaves out the rarer node
keys (:data:`NARROW_HIDDEN_ACTIONS`) and says so on the help key ("? more keys"); the
help screen (``?``) always lists every key. Under ``--readonly`` the app disables node actions
(``check_action``), so Textual's Footer does not show them at any width.
"""

from __future__ import annotations

from typing import ClassVar

from textual.app import ComposeResult
from textual.events import Resize
from textual.widgets import Footer
from textual.widgets._footer import FooterKey

ALL_KEYS_FROM_COLS = 150
"""Terminal width (columns) from which the footer shows every key, node actions included."""

NARROW_HIDDEN_ACTIONS: frozenset[str] = frozenset(
    {"hold", "release", "build_backport", "swap", "restore"})
"""Actions left out of the footer below :data:`ALL_KEYS_FROM_COLS` (still on ``?``)."""


class SeatFooter(Footer):
    """:class:`~textual.widgets.Footer` that fits: below :data:`ALL_KEYS_FROM_COLS` columns the
    keys of :data:`NARROW_HIDDEN_ACTIONS` are left out and the help key reads "more keys".
    Recomposes when the width crosses that line."""

    HELP_ACTION: ClassVar[str] = "help"

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self._narrow: bool | None = None

    def _is_narrow(self) -> bool:
        return self.app.size.width < ALL_KEYS_FROM_COLS

    def compose(self) -> ComposeResult:
        """The base footer's keys, minus the rare node keys when narrow."""
        narrow = self._narrow = self._is_narrow()
        widgets = list(super().compose())
        if not narrow:
            yield from widgets
            return
        kept = [w for w in widgets if not (isinstance(w, FooterKey)
                                           and w.action in NARROW_HIDDEN_ACTIONS)]
        hid = len(kept) < len(widgets)
        for w in kept:
            if hid and isinstance(w, FooterKey) and w.action == self.HELP_ACTION:
                w = FooterKey(w.key, w.key_display, "more keys", w.action,
                              disabled=w.disabled, tooltip=w.tooltip).data_bind(
                                  compact=Footer.compact)
            yield w

    def on_resize(self, event: Resize) -> None:
        """Recompose when the terminal crosses :data:`ALL_KEYS_FROM_COLS`."""
        if self._narrow is not None and self._is_narrow() != self._narrow:
            self.call_later(self.recompose)


__all__ = ["ALL_KEYS_FROM_COLS", "NARROW_HIDDEN_ACTIONS", "SeatFooter"]
