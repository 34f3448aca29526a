"""The Textual driver of a served console process: Textual's web driver, ending with its server.

textual-serve starts one console process per browser tab and talks to it over the process's
stdin / stdout (Textual's ``WebDriver`` packets). Textual's driver ends its input thread when
stdin reaches end-of-file but leaves the app running, so a server killed with SIGKILL (or
crashed) would leave every viewer's console polling the node with nobody watching.
:class:`ServedWebDriver` asks the app to exit then. Otherwise it is Textual's driver unchanged.

Selected by the server through ``TEXTUAL_DRIVER`` (:data:`DRIVER_PATH`); ``seat_console.cli``
treats a console under this driver (or Textual's own web driver) as served: read-only whatever
its arguments say, and without a terminal on purpose.
"""

from __future__ import annotations

from textual import messages
from textual.drivers.web_driver import WebDriver

DRIVER_PATH = "seat_console.serve.driver:ServedWebDriver"
"""``TEXTUAL_DRIVER`` value naming :class:`ServedWebDriver` (Textual's ``module:Class`` form)."""


class ServedWebDriver(WebDriver):
    """Textual's ``WebDriver``; when stdin ends without the app exiting (the server is gone),
    the app is told to exit (``messages.ExitApp``, as a ``quit`` packet does)."""

    def run_input_thread(self) -> None:
        """Textual's input loop, then the exit if the loop ended on end-of-file."""
        try:
            super().run_input_thread()
        finally:
            if not self.exit_event.is_set():   # not a normal exit: stdin closed under us
                self._app.post_message(messages.ExitApp())
