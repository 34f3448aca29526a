"""The main screen's footer: the keys offered now, as many as fit the terminal's width.

Textual's :class:`~textual.widgets.Footer` lists every binding with ``show=True`` on one line,
and keys that do not fit run under the command palette's key docked at the right (the stray
character in the last column). :class:`SeatFooter` measures the keys it would show (a compact
key is ``key + space + label`` and a one-column gap) and, while they do not fit beside the
palette's key, leaves out keys in the order ``drop_order`` gives (the key table's
:func:`seat_console.tui.keys.footer_drop_order`: the rarest first), saying so on the help key
("? all keys"); the help screen (``?``) always lists every key. Under ``--readonly`` the app
disables node actions (``check_action``), so the Footer does not show them at any width.
Pure view: no I/O.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from rich.cells import cell_len
from textual.app import ComposeResult
from textual.events import Resize
from textual.widgets import Footer
from textual.widgets._footer import FooterKey

ALL_KEYS = "all keys"
"""The help key's label once any key is left out (the help screen lists them all)."""

ALL_KEYS_EXTRA = cell_len(ALL_KEYS) - cell_len("help")
"""Columns :data:`ALL_KEYS` takes beyond the help key's own label ("help", the key table's)."""

PALETTE_CELLS = 12
"""Columns the command palette's key takes at the right (``▏^p palette``)."""


def key_cells(w: FooterKey) -> int:
    """Columns one compact footer key takes: ``key label`` and its one-column gap."""
    return cell_len(w.key_display) + (1 + cell_len(w.description) if w.description else 0) + 1


def keys_to_drop(widths: Sequence[tuple[str, int]], width: int,
                 drop_order: Sequence[str]) -> set[str]:
    """The actions to leave out so ``widths`` (``(action, cells)`` per key, in order) fits in
    ``width`` columns beside the palette's key, dropping in ``drop_order``'s order (the help
    key's :data:`ALL_KEYS` is :data:`ALL_KEYS_EXTRA` columns longer than "help" once anything is
    left out)."""
    room = width - PALETTE_CELLS
    total = sum(c for _, c in widths)
    dropped: set[str] = set()
    for action in drop_order:
        if total + (ALL_KEYS_EXTRA if dropped else 0) <= room:
            break
        gone = sum(c for a, c in widths if a == action)
        if gone:
            dropped.add(action)
            total -= gone
    return dropped


def preset_compact(key: FooterKey, footer_compact: bool) -> None:
    """Give ``key`` (not yet mounted) the ``-compact`` class its ``compact`` watcher will ask
    for at mount, so that watcher finds the class already set and restyles nothing.

    Textual's ``FooterKey._watch_compact`` runs once per key as the key is mounted and calls
    ``set_class(compact, "-compact")``; the class was not there yet, so each key's styles were
    computed a second time: ~16 % of the UI thread's CPU from ``exec`` to the full screen
    (``py-spy --gil`` on the lab, docs/benchmarks.md, issue 33), for the footer's ~15 keys, and
    again on every recompose. The keys bound to the footer's ``compact`` get ``footer_compact``;
    the command palette's key, not bound, keeps ``FooterKey.compact``'s default (True)."""
    bound = "-command-palette" not in key.classes
    key.set_class(footer_compact if bound else FooterKey.compact._default, "-compact",
                  update=False)


class SeatFooter(Footer):
    """:class:`~textual.widgets.Footer` that fits its width (see the module docstring).
    ``drop_order``: actions that may be left out, the first to go first. Recomposes when a
    resize changes what fits."""

    HELP_ACTION: ClassVar[str] = "help"

    def __init__(self, *args, drop_order: Sequence[str] = (), **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.drop_order = list(drop_order)
        self.dropped: frozenset[str] | None = None
        self._widths: list[tuple[str, int]] = []
        self._composed: tuple | None = None

    def keys_now(self) -> tuple | None:
        """What the keys would show now: per binding shown, its key, key display,
        description, action, whether enabled and its tooltip; then the width, the compact
        form and the palette key's presence. ``None`` before the bindings are ready."""
        if not self._bindings_ready or not self.is_attached:
            return None
        shown = tuple((b.key, self.app.get_key_display(b), b.description, b.action,
                       enabled, tooltip, b.group)
                      for (_, b, enabled, tooltip) in self.screen.active_bindings.values()
                      if b.show)
        return (shown, self.app.size.width, self.compact, self.show_command_palette,
                self.app.ENABLE_COMMAND_PALETTE)

    async def recompose(self) -> None:
        """Textual's recompose, skipped when :meth:`keys_now` is what the keys on screen were
        composed from: the base footer recomposes on every change of the screen's bindings
        (a focus move, ``refresh_bindings``), four times in the first second of a start with
        the same keys each time (issue 33)."""
        now = self.keys_now()
        if now is not None and now == self._composed:
            return
        await super().recompose()

    def compose(self) -> ComposeResult:
        """The base footer's keys, minus the rare ones that do not fit."""
        self._composed = self.keys_now()
        widgets = list(super().compose())
        keys = [w for w in widgets if isinstance(w, FooterKey)
                and "-command-palette" not in w.classes]
        self._widths = [(w.action, key_cells(w)) for w in keys]
        drop = keys_to_drop(self._widths, self.app.size.width, self.drop_order)
        self.dropped = frozenset(drop)
        for w in widgets:
            if isinstance(w, FooterKey) and w.action in drop:
                continue
            if drop and isinstance(w, FooterKey) and w.action == self.HELP_ACTION:
                w = FooterKey(w.key, w.key_display, ALL_KEYS, w.action,
                              disabled=w.disabled, tooltip=w.tooltip).data_bind(
                                  compact=Footer.compact)
            if isinstance(w, FooterKey):
                preset_compact(w, self.compact)
            yield w

    def on_resize(self, event: Resize) -> None:
        """Recompose when the new width changes which keys fit."""
        if self.dropped is None:
            return
        if keys_to_drop(self._widths, self.app.size.width, self.drop_order) != self.dropped:
            self.call_later(self.recompose)


__all__ = ["ALL_KEYS", "ALL_KEYS_EXTRA", "PALETTE_CELLS", "SeatFooter", "key_cells", "keys_to_drop", "preset_compact"]
