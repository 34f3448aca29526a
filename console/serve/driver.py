"""The Textual driver of a served console process: Textual's web driver, with two mends.

textual-serve starts one console process per browser tab and talks to it over the process's
stdin / stdout (Textual's ``WebDriver`` packets). :class:`ServedWebDriver` is Textual's driver
with two changes, both in its input loop:

- **The server gone**: Textual's driver ends its input thread when stdin reaches end-of-file
  but leaves the app running, so a server killed with SIGKILL (or crashed) would leave every
  viewer's console polling the node with nobody watching. The app is asked to exit then.
- **A lone Esc is the Escape key at once**: Textual's xterm parser holds a lone ESC for
  ``textual.constants.ESCAPE_DELAY`` (it may start a sequence) and its web driver flushes it
  only on the input reader's 0.1 s tick, so a key pressed within ~200 ms after Esc was fed to
  the parser as part of an "escape sequence" and lost with it (Textualize/textual#5969; the
  browser test's key walk lost its "?" about one walk in four). In the browser the terminal
  (xterm.js) sends each key's bytes as one data message, and an escape sequence always whole,
  so a data packet that is exactly ESC is the Escape key and is delivered as such.

Selected by the server through ``TEXTUAL_DRIVER`` (:data:`DRIVER_PATH`); ``seat_console.cli``
treats a console under this driver (or Textual's own web driver) as served: read-only whatever
its arguments say, and without a terminal on purpose.
"""

from __future__ import annotations

from codecs import getincrementaldecoder
from traceback import format_exc

from textual import events, log, messages
from textual._xterm_parser import XTermParser
from textual.drivers._byte_stream import ByteStream
from textual.drivers.web_driver import WebDriver, _ExitInput

DRIVER_PATH = "seat_console.serve.driver:ServedWebDriver"
"""``TEXTUAL_DRIVER`` value naming :class:`ServedWebDriver` (Textual's ``module:Class`` form)."""

LONE_ESC = b"\x1b"
"""A data packet of exactly this payload is the Escape key (see the module docstring)."""


def escape_key() -> events.Key:
    """The event the xterm parser makes of a lone ESC once its delay has passed."""
    return events.Key("escape", "\x1b")


class ServedWebDriver(WebDriver):
    """Textual's ``WebDriver`` (textual 8.2, ``drivers/web_driver.py``) with its input loop
    mended: a data packet that is exactly ESC is the Escape key at once, and when stdin ends
    without the app exiting (the server is gone) the app is told to exit
    (``messages.ExitApp``, as a ``quit`` packet does)."""

    def run_input_thread(self) -> None:
        """Textual's input loop with the lone-Esc mend, then the exit if it ended on EOF."""
        try:
            self._input_loop()
        finally:
            if not self.exit_event.is_set():   # not a normal exit: stdin closed under us
                self._app.post_message(messages.ExitApp())

    def _input_loop(self) -> None:
        """Textual's ``WebDriver.run_input_thread`` body, the lone-ESC packet aside."""
        input_reader = self._input_reader
        parser = XTermParser(debug=self._debug)
        decode = getincrementaldecoder("utf-8")().decode
        byte_stream = ByteStream()
        try:
            for data in input_reader:
                if data:
                    for packet_type, payload in byte_stream.feed(data):
                        if packet_type == "D":
                            if payload == LONE_ESC:
                                for event in parser.tick():   # anything held before it
                                    self.process_message(event)
                                self.process_message(escape_key())
                                continue
                            for event in parser.feed(decode(payload)):
                                self.process_message(event)
                        else:
                            self._on_meta(packet_type, payload)
                for event in parser.tick():
                    self.process_message(event)
        except _ExitInput:
            pass
        except Exception:
            log(format_exc())
        finally:
            input_reader.close()
