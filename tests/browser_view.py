"""Driving ``seat-console serve`` from a real browser: Debian's Chromium through playwright.

* :class:`ServedConsole` — ``seat-console serve --port 0`` in a child process (its URL read
  from the ready line; its app processes found as its children; stopped by PID);
* :class:`BrowserTab` — one page in headless Chromium (``/usr/bin/chromium``: playwright
  cannot download browsers here) with every request it makes and every request the page's
  Content-Security-Policy blocked, and the terminal screen it is sent: the websocket's bytes
  fed to a VT100 emulator (pyte), the same bytes xterm.js draws (its WebGL canvas has no text
  to read);
* :func:`playwright_key` / :func:`binding_keys` — Textual binding keys as playwright key
  presses, read from the bindings themselves.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlparse

import psutil
import pytest

CHROMIUM = "/usr/bin/chromium"
"""Debian's ``chromium`` package (scripts/test installs it)."""

NAMED_KEYS = {
    "escape": "Escape", "enter": "Enter", "tab": "Tab", "space": " ", "backspace": "Backspace",
    "delete": "Delete", "up": "ArrowUp", "down": "ArrowDown", "left": "ArrowLeft",
    "right": "ArrowRight", "home": "Home", "end": "End", "pageup": "PageUp",
    "pagedown": "PageDown", "insert": "Insert",
}
MODIFIERS = {"ctrl": "Control", "shift": "Shift", "alt": "Alt", "meta": "Meta"}


def playwright_key(textual_key: str) -> str:
    """A Textual key name (``q``, ``P``, ``ctrl+q``, ``question_mark``, ``escape``) as a
    playwright ``keyboard.press`` argument (``q``, ``Shift+P``, ``Control+q``, ``?``,
    ``Escape``). ``ValueError`` for a key it cannot name."""
    from textual.keys import key_to_character

    *mods, key = textual_key.split("+")
    parts = [MODIFIERS[m] for m in mods]
    if key in NAMED_KEYS:
        name = NAMED_KEYS[key]
    else:
        ch = key if len(key) == 1 else key_to_character(key)
        if ch is None or len(ch) != 1 or not ch.isprintable():
            raise ValueError(f"no playwright name for Textual key {textual_key!r}")
        name = ch
        if ch.isalpha() and ch.isupper():
            parts.append("Shift")
    return "+".join([*parts, name])


def binding_keys(bindings: Iterable[Any]) -> list[tuple[str, str]]:
    """``(Textual key, action)`` for every key of ``bindings`` (``Binding`` objects or
    ``(key, action, description)`` tuples; ``"escape,q"`` gives two), in order."""
    out: list[tuple[str, str]] = []
    for b in bindings:
        keys, action = (b.key, b.action) if hasattr(b, "key") else (b[0], b[1])
        out += [(k.strip(), action) for k in keys.split(",") if k.strip()]
    return out


class ServedConsole:
    """``seat-console [--profile P] serve --port 0 ARGS`` in a child process, its own session.

    ``url`` once ready; :meth:`viewer_pids` its app processes (one per tab); :meth:`stop`
    SIGTERM then SIGKILL by PID. Use as a context manager."""

    def __init__(self, *args: str, profile: Path | None, env: dict[str, str],
                 ready_s: float = 120.0) -> None:
        argv = [sys.executable, "-m", "seat_console"]
        if profile is not None:
            argv += ["--profile", str(profile)]
        argv += ["serve", "--port", "0", *args]
        self.proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     text=True, env=env, start_new_session=True)
        self.url = self._read_url(ready_s)

    def _read_url(self, ready_s: float) -> str:
        import selectors

        sel = selectors.DefaultSelector()
        assert self.proc.stdout is not None
        sel.register(self.proc.stdout, selectors.EVENT_READ)
        deadline = time.monotonic() + ready_s
        while time.monotonic() < deadline:
            if sel.select(timeout=1.0):
                line = self.proc.stdout.readline()
                if not line:
                    break
                if line.startswith("seat-console serve: http://"):
                    return line.split()[2]
            if self.proc.poll() is not None:
                break
        err = self.stop()
        pytest.fail(f"seat-console serve did not come up within {ready_s:.0f}s; stderr:\n{err}")

    def viewer_pids(self) -> list[int]:
        """PIDs of the served console processes (children running ``-m seat_console
        --readonly``)."""
        try:
            kids = psutil.Process(self.proc.pid).children(recursive=False)
        except psutil.NoSuchProcess:
            return []
        out = []
        for k in kids:
            try:
                if k.status() != psutil.STATUS_ZOMBIE and "--readonly" in k.cmdline():
                    out.append(k.pid)
            except psutil.NoSuchProcess:
                continue
        return out

    def viewer_cmdlines(self) -> list[list[str]]:
        """The command lines of :meth:`viewer_pids`."""
        out = []
        for pid in self.viewer_pids():
            try:
                out.append(psutil.Process(pid).cmdline())
            except psutil.NoSuchProcess:
                continue
        return out

    def stop(self, sig: int = signal.SIGTERM, wait_s: float = 30.0) -> str:
        """Stop the server (``sig``, then SIGKILL after ``wait_s``); returns its stderr."""
        if self.proc.poll() is None:
            os.kill(self.proc.pid, sig)
            try:
                self.proc.wait(wait_s)
            except subprocess.TimeoutExpired:
                os.kill(self.proc.pid, signal.SIGKILL)
                self.proc.wait(30)
        assert self.proc.stderr is not None
        return self.proc.stderr.read()

    def __enter__(self) -> ServedConsole:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


CSP_LISTENER = """
window.__csp_blocked = [];
document.addEventListener('securitypolicyviolation',
    e => window.__csp_blocked.push(e.blockedURI + ' (' + e.violatedDirective + ')'));
"""


class BrowserTab:
    """A page of :class:`ServedConsole`'s view in headless Chromium, with its terminal screen.

    ``requests``: every URL the page asked for (playwright ``request`` events: documents,
    scripts, styles, fonts, the websocket); :meth:`csp_blocked` what the page's CSP refused
    to load; :meth:`lines` the terminal's rows now (pyte, from the websocket's bytes)."""

    def __init__(self, browser: Any, url: str, *, viewport: tuple[int, int] = (1600, 1000),
                 font_size: int = 14) -> None:
        import pyte

        self.page = browser.new_page(viewport={"width": viewport[0], "height": viewport[1]})
        self.requests: list[str] = []
        self.console: list[str] = []
        self.screen = pyte.Screen(80, 24)
        self._stream = pyte.ByteStream(self.screen)
        self.ws_closed = False
        self.page.add_init_script(CSP_LISTENER)
        self.page.on("request", lambda r: self.requests.append(r.url))
        self.page.on("console", lambda m: self.console.append(m.text))
        self.page.on("websocket", self._on_websocket)
        self.response = self.page.goto(f"{url}?fontsize={font_size}")

    def _on_websocket(self, ws: Any) -> None:
        self.requests.append(ws.url)
        q = parse_qs(urlparse(ws.url).query)
        if "width" in q and "height" in q:
            self.screen.resize(int(q["height"][0]), int(q["width"][0]))

        def received(payload: str | bytes) -> None:
            if isinstance(payload, bytes):
                self._stream.feed(payload)

        def sent(payload: str | bytes) -> None:
            if isinstance(payload, str) and payload.startswith('["resize"'):
                size = json.loads(payload)[1]
                self.screen.resize(size["height"], size["width"])

        def closed(_ws: Any) -> None:
            self.ws_closed = True

        ws.on("framereceived", received)
        ws.on("framesent", sent)
        ws.on("close", closed)

    def lines(self) -> list[str]:
        """The terminal's rows now (right-trimmed)."""
        return [line.rstrip() for line in self.screen.display]

    def text(self) -> str:
        """The terminal's rows joined by newlines."""
        return "\n".join(self.lines())

    def csp_blocked(self) -> list[str]:
        """What the page's Content-Security-Policy refused (``securitypolicyviolation``)."""
        return list(self.page.evaluate("window.__csp_blocked || []"))

    def wait_for(self, pred: Callable[[], Any], what: str, timeout_s: float = 60.0) -> Any:
        """Pump the browser's events until ``pred()`` is truthy (returned) or fail after
        ``timeout_s`` naming ``what`` and showing the screen."""
        deadline = time.monotonic() + timeout_s
        while True:
            value = pred()
            if value:
                return value
            if time.monotonic() > deadline:
                pytest.fail(f"timed out after {timeout_s:.0f}s waiting for {what}; the "
                            f"browser's screen:\n{self.text()}", pytrace=False)
            self.page.wait_for_timeout(50)   # lets playwright deliver the websocket frames

    def wait_text(self, needle: str, what: str | None = None, timeout_s: float = 60.0) -> None:
        """Wait until ``needle`` is on the screen."""
        self.wait_for(lambda: needle in self.text(), what or repr(needle), timeout_s)

    def focus(self) -> None:
        """Give the terminal the keyboard focus (xterm.js reads keys from a hidden textarea;
        no click, which the app would get as a mouse event)."""
        self.page.locator(".xterm-helper-textarea").focus()

    def press(self, textual_key: str) -> None:
        """Press a Textual key in the page, the terminal focused."""
        if not self.page.evaluate(
                "document.activeElement && document.activeElement.classList"
                ".contains('xterm-helper-textarea')"):
            self.focus()
        self.page.keyboard.press(playwright_key(textual_key))

    def closed(self) -> bool:
        """Whether the page shows its "Session ended" dialog (the websocket closed)."""
        return bool(self.page.evaluate("document.body.classList.contains('-closed')"))


def launch_chromium(playwright: Any) -> Any:
    """Headless Chromium from Debian's package. Fails (never skips) when it is missing.
    Playwright's default ``chromium_sandbox=False`` passes ``--no-sandbox``, which Chromium
    needs as root in a container."""
    if not Path(CHROMIUM).exists():
        pytest.fail(f"{CHROMIUM} is missing: `apt-get install chromium` (scripts/test does)",
                    pytrace=False)
    return playwright.chromium.launch(executable_path=CHROMIUM, headless=True)


__all__ = ["CHROMIUM", "BrowserTab", "ServedConsole", "binding_keys", "launch_chromium",
           "playwright_key"]
