"""The command palette's entries for the rarer console actions (pause, refresh, the refresh
interval, help, the runbook screen, the evidence report), and the console's own Quit in place
of Textual's (:func:`with_console_quit`)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from functools import partial

from textual.app import App, SystemCommand
from textual.command import DiscoveryHit, Hit, Hits, Provider

from seat_console.core.profile import REFRESH_INTERVAL_MAX_S, REFRESH_INTERVAL_MIN_S
from seat_console.tui.keys import KEYS

INTERVAL_CHOICES_S = (0.5, 1.0, 2.0, 5.0, 10.0, 30.0, 60.0)
"""Refresh intervals offered in the command palette (seconds); any positive number may be typed."""


class SeatCommands(Provider):
    """Command palette entries for the rarer console actions (pause, interval, help, refresh)."""

    def _commands(self) -> list[tuple[str, Callable[[], object], str]]:
        app = self.app
        assert hasattr(app, "set_refresh_interval")
        keymap = getattr(app, "keymap", None)
        ro = getattr(app, "readonly", False)
        cmds: list[tuple[str, Callable[[], object], str]] = [
            ("Resume polling" if app.paused else "Pause polling", app.action_toggle_pause,
             f"Stop or restart reading the node (same as {key_of('toggle-pause', keymap)})"),
            ("Refresh now", app.action_refresh_now,
             f"Read every source once now (same as {key_of('refresh-now', keymap)})"),
            ("Open help", app.action_help,
             f"Keys and how to read the panels (same as {key_of('help', keymap)})"),
            ("Open the runbook", app.action_runbook,
             "Every stage of the seat swap, its evidence; "
             + ("shown, not run: read-only" if ro else "Enter runs the next")
             + f" (same as {key_of('runbook', keymap)})"),
            ("Open the evidence report", app.action_evidence,
             "The newest comparison's (else probe run's) report, read-only "
             f"(same as {key_of('evidence', keymap)})"),
        ]
        for s in INTERVAL_CHOICES_S:
            cmds.append((f"Set refresh interval to {s:g} s", partial(app.set_refresh_interval, s),
                         f"Poll every source every {s:g} s (now {app.interval_s:g} s)"))
        return cmds

    async def discover(self) -> Hits:
        """Every command, for the palette's empty prompt."""
        for text, cb, help_ in self._commands():
            yield DiscoveryHit(text, cb, text=text, help=help_)

    async def search(self, query: str) -> Hits:
        """Fuzzy matches; ``interval N`` (N seconds, 0.1 to 3600) offers that interval, and only
        that one.

        A typed interval replaces the offered choices: the fuzzy matcher scores "interval 3"
        as high against "… to 30 s" as against "… to 3 s", so Enter would otherwise set 30 s.
        """
        matcher = self.matcher(query)
        typed: float | None = None
        words = query.lower().split()
        if len(words) == 2 and words[0] in {"interval", "refresh"}:
            try:
                s = float(words[1].removesuffix("s"))
            except ValueError:
                s = 0.0
            if REFRESH_INTERVAL_MIN_S <= s <= REFRESH_INTERVAL_MAX_S:
                typed = s
        for text, cb, help_ in self._commands():
            if typed is not None and text.startswith("Set refresh interval"):
                continue
            score = matcher.match(text)
            if score > 0:
                yield Hit(score, matcher.highlight(text), cb, text=text, help=help_)
        if typed is not None:
            text = f"Set refresh interval to {typed:g} s"
            assert hasattr(self.app, "set_refresh_interval")
            score = max(matcher.match(text), 1.0)
            yield Hit(score, matcher.highlight(text), partial(self.app.set_refresh_interval, typed),
                      text=text, help=f"Poll every source every {typed:g} s "
                                      f"(now {self.app.interval_s:g} s)")


def key_of(key_id: str, keymap: Mapping[str, str] | None = None) -> str:
    """The key that runs the key table's entry ``key_id`` as the user types it: the profile's
    ``[keys]`` remapping (``keymap``: binding id → key(s), the first of several) or the table's
    own; ``question_mark`` is written ``?``. Raises :class:`StopIteration` for an unknown id."""
    own = next(k for k in KEYS if k.id == key_id).key
    key = (keymap or {}).get(key_id, own).split(",")[0].strip()
    return "?" if key == "question_mark" else key


def with_console_quit(app: App, commands: Iterable[SystemCommand],
                      keymap: Mapping[str, str] | None = None) -> Iterator[SystemCommand]:
    """Textual's system commands (``App.get_system_commands``) with its "Quit" — which calls
    ``App.action_quit`` straight, "as soon as possible", past the app's ``check_action`` —
    replaced by the console's: the ``quit`` action run as the ``q`` key runs it
    (``App.run_action``), its help the key's, which says the quit rule (a runbook in flight
    finishes its current step). ``keymap``: the profile's ``[keys]`` (binding id → key(s)), so
    "same as" names the key the user has."""
    quit_key = next(k for k in KEYS if k.id == "quit")
    key = key_of(quit_key.id, keymap)
    for cmd in commands:
        if cmd.title == "Quit":
            cmd = SystemCommand("Quit", f"{quit_key.help.rstrip('.')} (same as {key}).",
                                partial(app.run_action, quit_key.action))
        yield cmd


__all__ = ["INTERVAL_CHOICES_S", "SeatCommands", "key_of", "with_console_quit"]
