"""A Linux terminal driver that does not wake ten times a second while nobody types.

Textual's ``LinuxDriver`` reads keys in a thread that calls ``select(timeout=0.1)`` in a loop:
it must notice the app exiting and flush a lone Escape (the parser waits briefly to tell Esc
from the start of an escape sequence). On an idle console that is ten wake-ups a second; on
the H200 VM py-spy put ~22 % of the idle console's CPU there (docs/benchmarks.md).

:class:`QuietLinuxDriver` keeps Textual's loop (the same parser, decoder and events) but waits
:data:`IDLE_WAIT_S` while no key came for :data:`BUSY_FOR_S`, and 0.1 s otherwise — so a lone
Escape is delivered exactly as fast as before. Exiting writes to a wake-up pipe that the loop
selects on, so quitting is not delayed. Used only for a real terminal (``App.get_driver_class``
returns Textual's own driver for headless tests and the web).
"""

from __future__ import annotations

import os
import selectors
import time
from codecs import getincrementaldecoder

from textual._loop import loop_last
from textual._parser import ParseError
from textual._xterm_parser import XTermParser
from textual.drivers.linux_driver import LinuxDriver

IDLE_WAIT_S = 1.0
"""Longest wait (s) of the input thread when no key arrived lately."""

BUSY_WAIT_S = 0.1
"""Textual's own wait (s): used for :data:`BUSY_FOR_S` after any input."""

BUSY_FOR_S = 2.0
"""How long after the last input the short wait applies (s)."""


class QuietLinuxDriver(LinuxDriver):
    """Textual's Linux driver with an idle input thread that wakes once a second (see the
    module docstring). Behaviour otherwise identical."""

    _wake_w: int | None = None

    def run_input_thread(self) -> None:
        """Textual's ``LinuxDriver.run_input_thread`` with the adaptive wait and a wake-up
        pipe (textual/drivers/linux_driver.py, MIT licence)."""
        selector = selectors.SelectSelector()
        selector.register(self.fileno, selectors.EVENT_READ)
        wake_r, wake_w = os.pipe()
        self._wake_w = wake_w
        selector.register(wake_r, selectors.EVENT_READ)
        fileno = self.fileno
        event_read = selectors.EVENT_READ
        parser = XTermParser(self._debug)
        feed = parser.feed
        tick = parser.tick
        decode = getincrementaldecoder("utf-8")().decode
        busy_until = time.monotonic() + BUSY_FOR_S
        state = {"gone": False}

        def process(events: list[tuple[selectors.SelectorKey, int]], final: bool = False) -> bool:
            got = False
            keys = [(k, m) for k, m in events if k.fd == fileno]
            for last, (_key, mask) in loop_last(keys):
                if mask & event_read:
                    try:
                        raw = os.read(fileno, 1024 * 4)
                    except OSError:   # the terminal hung up (EIO): stop reading; the app's
                        raw = b""     # terminal watch exits it cleanly (no panic traceback)
                    if not raw:
                        state["gone"] = True
                        break
                    data = decode(raw, final=final and last)
                    if not data:
                        break
                    got = True
                    for event in feed(data):
                        self.process_message(event)
            for event in tick():
                self.process_message(event)
            return got

        try:
            while not self.exit_event.is_set():
                wait = BUSY_WAIT_S if time.monotonic() < busy_until else IDLE_WAIT_S
                if process(selector.select(wait)):
                    busy_until = time.monotonic() + BUSY_FOR_S
                if state["gone"]:   # nothing more to read: end the thread (it is not a
                    return          # daemon; a waiting one would hold up the exit)
            selector.unregister(self.fileno)
            process(selector.select(BUSY_WAIT_S), final=True)
        finally:
            selector.close()
            self._wake_w = None
            for fd in (wake_r, wake_w):
                try:
                    os.close(fd)
                except OSError:
                    pass
            try:
                for _event in feed(""):
                    pass
            except (EOFError, ParseError):
                pass

    def disable_input(self) -> None:
        """Wake the input thread at once, then Textual's shutdown of it."""
        wake = self._wake_w
        if wake is not None:
            try:
                os.write(wake, b"x")
            except OSError:
                pass
        super().disable_input()



def driver_class(chosen: type) -> type:
    """The driver to run with: Textual's ``chosen`` one, except on a Linux terminal
    :class:`QuietLinuxDriver` (its input thread wakes once a second while nobody types instead
    of ten times; keys and exit as fast as before). ``SEAT_CONSOLE_TEXTUAL_DRIVER=1`` in the
    environment keeps Textual's own driver (a way out if a terminal misbehaves)."""
    import os

    from textual.drivers.linux_driver import LinuxDriver

    if chosen is LinuxDriver and not os.environ.get("SEAT_CONSOLE_TEXTUAL_DRIVER"):
        return QuietLinuxDriver
    return chosen

__all__ = ["BUSY_FOR_S", "BUSY_WAIT_S", "IDLE_WAIT_S", "QuietLinuxDriver", "driver_class"]
