"""``seat-console serve`` on the lab, in headless Chromium (Debian's) driven by playwright.

One browser session (an app start costs seconds on this machine): the page shows the live
screen (header, GPU and engine panels, the status line reading as ``seat-console status``);
the help lists no node action; every key of the console's bindings, and each node action
typed into the command palette, reaches the app (the pause key visibly pauses) yet the node
is unchanged (timers, silences, containers, journal rows); the quit keys end only that tab's
process; a tab over ``--max-viewers`` gets the "full" page; no request leaves 127.0.0.1 and
the page's CSP had nothing to block. A screenshot is saved (``SEAT_SERVE_SCREENSHOT=PATH``
copies it there: docs/serve-screenshot.png is made so).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path
from urllib.parse import urlparse

import httpx
import pytest
from browser_view import BrowserTab, ServedConsole, binding_keys, launch_chromium
from lab_helpers import node_transport, state_env

from seat_console.tui.app import SeatConsoleApp
from seat_console.tui.keys import is_node_action
from seat_console.widgets.detail import DetailScreen
from seat_console.widgets.help import HelpScreen
from seat_console.sources.timers import TimersReading, read_timers
from seat_console.widgets.confirm import ConfirmScreen
from seat_console.widgets.evidence import EvidenceScreen
from seat_console.widgets.panel import SourcePanel
from seat_console.widgets.runbook_screen import RunbookScreen

HELP_TITLE = "Seat Console — help"
HELP_KEY = "question_mark"
"""The key that opens the help on the main screen and closes it on the help screen."""

KEY_SOURCES = (SeatConsoleApp, SourcePanel, HelpScreen, DetailScreen, EvidenceScreen,
               ConfirmScreen, RunbookScreen)
"""Where the console's keys are bound: the main screen, a focused panel, and the screens a
key opens (a node action's confirmation included: its ``y`` must not confirm anything)."""


def quit_keys() -> set[str]:
    """The keys that quit the console on its main screen (pressed last, once each)."""
    return {k for k, a in binding_keys(SeatConsoleApp.BINDINGS) if a == "quit"}


def all_keys() -> list[tuple[str, str]]:
    """Every ``(key, action)`` the console binds (read from the bindings), in table order."""
    keys: list[tuple[str, str]] = []
    for cls in KEY_SOURCES:
        keys += [k for k in binding_keys(cls.BINDINGS) if k not in keys]
    return keys


def node_state(lab, env: dict[str, str]) -> dict[str, object]:
    """What an action would change, read from the lab now: the timers (state and the
    transient units a hold adds), the silences, the containers, the journal's rows."""
    node = node_transport(lab)
    timers = read_timers(node, list(lab.timers))
    assert isinstance(timers, TimersReading), timers
    units = node.run(["systemctl", "list-units", "--all", "--type=timer", "--no-legend",
                      "--plain"])
    silences = httpx.get(f"{lab.alertmanager_url}/api/v2/silences", timeout=10).json()
    with lab.docker_client() as client:
        containers = sorted((c.name, c.id, c.status, c.image.id, c.attrs["State"]["StartedAt"])
                            for c in client.containers.list(all=True))
    journal = subprocess.run([sys.executable, "-m", "seat_console", "--profile",
                              str(lab.profile_path), "journal", "--json"], env=env,
                             capture_output=True, text=True, timeout=60, check=False)
    return {
        # not the sub-state: a timer is "running" while its service runs, "waiting" between
        # runs (the lab's remediation timer fires every 5 min); an action stops the timer
        "timers": [(t.unit, t.active_state, t.unit_file_state) for t in timers.timers],
        "timer_units": sorted(line.split()[0] for line in units.stdout.splitlines()
                              if line.strip()),
        "silences": sorted((s["id"], s["status"]["state"], s["endsAt"]) for s in silences),
        "containers": containers,
        "journal_rows": (json.loads(journal.stdout)["rows"] if journal.returncode == 0
                         else journal.stderr),
    }


def status_words(lab, env: dict[str, str]) -> dict[str, str]:
    """The status line's verdict words as ``seat-console status --json`` reads the node now
    (the status line's own pure rule over that snapshot): engine, seat, silence, timers."""
    from seat_console.snapshot.reading import NodeSnapshot
    from seat_console.widgets.status import build_status

    cp = subprocess.run([sys.executable, "-m", "seat_console", "--profile",
                         str(lab.profile_path), "status", "--json"], env=env,
                        capture_output=True, text=True, timeout=120, check=False)
    snap = NodeSnapshot.model_validate_json(cp.stdout)
    facts = build_status(engine=snap.engine, containers=snap.containers, timers=snap.timers,
                         silences=snap.silences, fit=None, hold=None, hold_known=False,
                         now=datetime.now(UTC))
    return {f.label: f.words for f in facts if f.label in ("engine", "seat", "silence", "timers")}


def screen_words(tab: BrowserTab) -> dict[str, str] | None:
    """The browser's status line as ``{label: words}`` (the row starting ``engine ``)."""
    for line in tab.lines():
        s = line.strip()
        if s.startswith("engine ") and " · seat " in s:
            out = {}
            for part in s.split(" · "):
                label, _, words = part.partition(" ")
                out[label] = words
            return out
    return None


PALETTE = "\N{RIGHT-POINTING MAGNIFYING GLASS}"
"""The command palette's prompt mark (Textual 8)."""

MAIN_MARKS = ("Engine (vLLM)", "Timers (systemd)", "Containers (docker)", "Actions (hold, journal)")


def at_main(tab: BrowserTab) -> bool:
    """Whether the browser shows the main screen and nothing over it: the status line and
    the panels' titles (a modal covers some), no help, no palette."""
    text = tab.text()
    return (screen_words(tab) is not None and all(m in text for m in MAIN_MARKS)
            and HELP_TITLE not in text and PALETTE not in text)


SCREEN_MARKS = {
    "help": HELP_TITLE,
    "palette": PALETTE,
    "evidence": "read-only · Esc closes",       # EvidenceScreen's hint line
    "detail": "Esc or q: back to the seat",      # DetailScreen's hint line
    "runbook": "Runbook — the seat swap, stage by stage",   # RunbookScreen's head (g)
}
"""Text that shows a screen over the main one is open (each closes with Esc)."""


def open_screens(tab: BrowserTab) -> frozenset[str]:
    """Which of :data:`SCREEN_MARKS` are on the browser's screen now."""
    text = tab.text()
    return frozenset(k for k, mark in SCREEN_MARKS.items() if mark in text)


def _help(tab: BrowserTab, after: str) -> frozenset[str]:
    """Press the help key on the main screen until a screen answers: the screens open then
    (:func:`open_screens`). A key can be lost on its way through the browser and the web
    driver under load (CI, stops 31 and 40: the main screen unchanged 90 s after one "?"), so
    it is pressed again after 20 s, four times in all; a dialog that takes the keys takes
    every one of them, and still fails it, naming ``after``."""
    for attempt in range(4):
        tab.press(HELP_KEY)
        try:
            return tab.wait_for(lambda: open_screens(tab), f"the help screen after {after} "
                                "(a dialog took the keys?)", timeout_s=20 if attempt < 3 else 60)
        except pytest.fail.Exception:
            if attempt == 3:
                raise
    raise AssertionError("unreachable")


def settle(tab: BrowserTab, after: str) -> bool:
    """After a key: back to the main screen, through the help screen. "?" opens the help only
    once the keys before it were handled; a screen the key opened (the evidence report, a
    panel's detail, the palette) is closed with Esc, one at a time, each time waiting for it
    to go. Fails naming the key if no known screen answers (a dialog took the keys) or the
    main screen does not come back. Returns whether the header said PAUSED meanwhile."""
    paused = False
    helped = False
    for _ in range(12):
        shown = open_screens(tab)
        if not shown:
            if helped and at_main(tab):
                return paused
            shown = _help(tab, after)
            paused = paused or "PAUSED" in tab.lines()[0]
            helped = helped or shown == {"help"}
        for attempt in range(3):   # close the screen on top (the palette may take two:
            tab.press("escape")    # the first Esc can hide only its list of results)
            try:
                tab.wait_for(lambda: open_screens(tab) != shown, f"{sorted(shown)} to close "
                             f"(after {after})", timeout_s=10)
                break
            except pytest.fail.Exception:
                if attempt == 2:
                    raise
    pytest.fail(f"after {after} the main screen did not come back:\n{tab.text()}",
                pytrace=False)


@pytest.fixture
def chromium():
    """Headless Debian Chromium through playwright (stopped after the test)."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        browser = launch_chromium(pw)
        try:
            yield browser
        finally:
            browser.close()


def test_serve_live_readonly_offline(lab, chromium, tmp_path: Path) -> None:
    env = state_env(tmp_path)
    before = node_state(lab, env)
    node_actions = [b for b in SeatConsoleApp.BINDINGS if is_node_action(b)]
    assert node_actions, "the key table has no node actions: nothing to test"
    with ServedConsole("--max-viewers", "1", profile=lab.profile_path, env=env) as served:
        host = urlparse(served.url).hostname
        tab = BrowserTab(chromium, served.url)
        assert tab.response is not None and tab.response.status == 200
        # the live screen: header (read-only), the GPU and engine panels with readings
        tab.wait_text("node seat-lab", "the header")
        tab.wait_text("READ-ONLY", "the READ-ONLY mark in the header")
        tab.wait_text("GPUs (NVML)", "the GPU panel")
        tab.wait_for(lambda: "Engine (vLLM)" in tab.text() and "healthy" in tab.text(),
                     "the engine panel's reading", timeout_s=120)
        tab.wait_for(lambda: "waiting for the first reading" not in tab.text(),
                     "every panel's first reading", timeout_s=120)
        [argv] = served.viewer_cmdlines()
        assert argv[1:4] == ["-m", "seat_console", "--readonly"], argv
        # the status line reads as `seat-console status` at that moment (retried while the
        # node moves between the two readings)
        seen: list[tuple[object, object]] = []

        def same_as_status() -> bool:
            want, got = status_words(lab, env), screen_words(tab)
            seen.append((want, got))
            return got is not None and all(got.get(k) == v for k, v in want.items())

        tab.wait_for(same_as_status, "the status line to read as `seat-console status` "
                                     f"(last: {seen[-1:] or 'none'})", timeout_s=90)
        shot = tmp_path / "serve.png"
        tab.page.screenshot(path=str(shot))
        assert shot.stat().st_size > 10_000
        if os.environ.get("SEAT_SERVE_SCREENSHOT"):
            shutil.copyfile(shot, os.environ["SEAT_SERVE_SCREENSHOT"])

        # a second tab over --max-viewers 1 gets the "full" page (a real page, in the browser)
        second = chromium.new_page()
        resp = second.goto(served.url)
        assert resp is not None and resp.status == 503
        assert "The web view is full" in second.inner_text("#full")
        assert "--max-viewers 1" in second.inner_text("#message")
        second.close()
        assert len(served.viewer_pids()) == 1

        # the help (?) lists no node action, only what a viewer may do
        tab.press(HELP_KEY)
        tab.wait_text(HELP_TITLE, "the help screen")
        # (not the runbook strip behind the help: it names every stage, "release" the last)
        help_text = "\n".join(line for line in tab.text().splitlines()
                              if not all(w in line for w in ("compare", "promote", "release")))
        for b in node_actions:
            assert f" {b.description}\n" not in help_text + "\n", (b, help_text)
        tab.press("escape")
        tab.wait_for(lambda: at_main(tab), "the main screen after the help")
        footer = tab.lines()[-2:]
        for b in node_actions:
            assert b.description not in " ".join(footer), (b, footer)

        # every key the console binds, then back to the main screen through the help screen:
        # "?" opens it only once the key before it was handled (and not at all if a dialog
        # took the keys). The pause key shows that the keys do reach the app.
        paused_seen = False
        assert quit_keys() == {"q", "ctrl+q"}, quit_keys()   # both pressed at the end
        for key, action in all_keys():
            if key in quit_keys():   # q also closes help / detail: it is pressed last
                continue
            if key == HELP_KEY:      # settle's own probe key: walked on its own (below)
                continue
            tab.press(key)
            paused_seen = settle(tab, f"{key} ({action})") or paused_seen
        # "?" both opens the help (main screen) and closes it (the help's own binding), so it
        # cannot be settle's probe for itself: pressed blind after it, the probe closed the
        # help the key had opened before the browser showed it, and waited for a screen
        # that would never come (CI, stop 28). Each of its two bindings, awaited:
        tab.press(HELP_KEY)
        tab.wait_text(HELP_TITLE, "the help screen after ? on the main screen")
        tab.press(HELP_KEY)
        tab.wait_for(lambda: at_main(tab), "the main screen after ? on the help screen")
        assert paused_seen, "p never paused: the keys did not reach the app"
        if "PAUSED" in tab.lines()[0]:
            tab.press("p")
        # each node action by name in the command palette, run with Enter
        for b in node_actions:
            tab.press("ctrl+p")
            tab.wait_text(PALETTE, "the command palette")
            tab.page.keyboard.type(b.description)
            tab.wait_text(b.description, f"{b.description!r} typed in the palette")
            tab.press("enter")
            settle(tab, f"palette {b.description!r} + Enter")

        # the quit key ends this tab's console only
        [pid] = served.viewer_pids()
        tab.press("q")
        tab.wait_for(tab.closed, "the page's 'Session ended' after q")
        tab.wait_for(lambda: pid not in served.viewer_pids(), "the tab's console to exit")
        assert served.proc.poll() is None, "the server itself stopped"
        # ...and so does the other quit key, in a new console for the reloaded page (once the
        # ended tab's slot is free: the page is served again)
        tab.wait_for(lambda: httpx.get(served.url, timeout=10).status_code == 200,
                     "the ended tab's slot to be free")
        tab.page.reload()
        tab.wait_for(lambda: len(served.viewer_pids()) == 1 and not tab.closed(),
                     "a new console for the reloaded page")
        tab.wait_text("READ-ONLY", "the reloaded page's header")
        [pid] = served.viewer_pids()
        tab.press("ctrl+q")
        tab.wait_for(tab.closed, "the page's 'Session ended' after ctrl+q")
        tab.wait_for(lambda: pid not in served.viewer_pids(), "the tab's console to exit")

        # offline: every request went to this server, and the CSP had nothing to refuse
        off = [u for u in tab.requests if urlparse(u).hostname != host]
        assert host == "127.0.0.1" and not off, off
        assert tab.csp_blocked() == [], tab.csp_blocked()
        assert any(u.endswith(".ttf") for u in tab.requests), tab.requests  # the local font
        stderr = served.stop()
    assert "viewer ended" in stderr, stderr
    after = node_state(lab, env)
    assert after == before
