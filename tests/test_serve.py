"""``seat-console serve`` without a browser: the refusals (non-loopback host, a full view, a
foreign origin or Host), the served command (read-only, an argument list, no shell), the
project's offline page, and the served console ending with its server.

The browser test on the lab is ``tests/test_serve_browser.py``.
"""

from __future__ import annotations

import asyncio
import ipaddress
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import aiohttp
import psutil
import pytest
from aiohttp.test_utils import TestClient, TestServer
from hypothesis import given, settings
from hypothesis import strategies as st

from seat_console import cli
from seat_console.serve import plan as plan_mod
from seat_console.serve.driver import DRIVER_PATH
from seat_console.serve.plan import (
    ServeUsageError,
    is_readonly_argv,
    loopback_host,
    make_plan,
    served_argv,
)
from seat_console.serve.server import TEMPLATES_DIR, SeatServer, loopback_authority

NOT_LOOPBACK = ["0.0.0.0", "::", "10.0.0.5", "192.168.1.20", "8.8.8.8", "example.com",
                "node.internal", "fe80::1", "", "127.0.0.1.nip.io"]
LOOPBACK = {"127.0.0.1": "127.0.0.1", "127.4.5.6": "127.4.5.6", "::1": "::1",
            "[::1]": "::1", "localhost": "127.0.0.1", "LOCALHOST": "127.0.0.1"}


# -- loopback only ------------------------------------------------------------------------------
@pytest.mark.parametrize("host", NOT_LOOPBACK)
def test_non_loopback_host_refused_with_the_tunnel(host: str, capsys) -> None:
    rc = cli.main(["serve", "--host", host, "--port", "8470", "--dry-run"])
    err = capsys.readouterr().err
    assert rc == 2
    assert "is not a loopback address" in err
    assert "ssh -L 8470:127.0.0.1:8470" in err


def test_non_loopback_refusal_names_the_chosen_port_and_json(capsys) -> None:
    rc = cli.main(["serve", "--host", "0.0.0.0", "--port", "9001", "--json"])
    out, err = capsys.readouterr()
    assert rc == 2
    doc = json.loads(out)
    assert doc["ok"] is False and doc["exit"] == 2
    assert "ssh -L 9001:127.0.0.1:9001" in doc["error"] and "ssh -L 9001" in err


def test_non_loopback_host_refused_before_listening() -> None:
    """Without --dry-run too: exit 2 at once, nothing listens."""
    cp = subprocess.run([sys.executable, "-m", "seat_console", "serve", "--host", "0.0.0.0",
                         "--port", "0"], capture_output=True, text=True, timeout=120)
    assert cp.returncode == 2, cp
    assert "ssh -L" in cp.stderr and cp.stdout == ""


@pytest.mark.parametrize(("host", "listen"), sorted(LOOPBACK.items()))
def test_loopback_hosts_accepted(host: str, listen: str) -> None:
    p = make_plan(host, 8470, 4, python=sys.executable, profile=None)
    assert p.host == listen
    assert ipaddress.ip_address(p.host).is_loopback


@given(st.text(max_size=60))
@settings(max_examples=300, deadline=None)
def test_loopback_host_property(host: str) -> None:
    """Any text: no exception; either refused (None) or a loopback address."""
    got = loopback_host(host)
    assert got is None or ipaddress.ip_address(got).is_loopback
    assert (plan_mod.loopback_refusal(host) is None) == (got is not None)


@given(st.one_of(st.none(), st.text(max_size=60),
                 st.ip_addresses().map(lambda a: f"[{a}]:8470" if a.version == 6
                                       else f"{a}:8470")))
@settings(max_examples=300, deadline=None)
def test_host_header_property(header: str | None) -> None:
    """The Host header check: any value, no exception; true only for loopback names."""
    ok = loopback_authority(header)
    assert isinstance(ok, bool)
    if ok:
        assert header is not None
        name = header.strip()
        name = name[1:name.index("]")] if name.startswith("[") else name.rsplit(":", 1)[0] \
            if name.count(":") == 1 else name
        assert loopback_host(name) is not None


@pytest.mark.parametrize(("port", "viewers"), [(-1, 4), (65536, 4), (8470, 0), (8470, 33)])
def test_limits_refused(port: int, viewers: int, capsys) -> None:
    rc = cli.main(["serve", "--port", str(port), "--max-viewers", str(viewers), "--dry-run"])
    err = capsys.readouterr().err
    assert rc == 2
    assert ("--port" in err) if viewers == 4 else ("--max-viewers" in err)


def test_fleet_served_readonly_or_refused_clearly(capsys) -> None:
    """With a `fleet` command: the plan serves `… --readonly … fleet`; without one: exit 2
    saying so (never the node's screen in its place)."""
    import argparse

    subs = next(a for a in cli.build_parser()._actions
                if isinstance(a, argparse._SubParsersAction))
    rc = cli.main(["serve", "--fleet", "--json"])
    out, err = capsys.readouterr()
    if "fleet" in subs.choices:
        doc = json.loads(out)
        assert rc == 0 and doc["screen"] == "fleet"
        assert doc["argv"][3] == "--readonly" and "fleet" in doc["argv"]
    else:
        assert rc == 2
        assert "no `fleet` command" in err and json.loads(out)["ok"] is False


def test_fleet_plan_is_readonly() -> None:
    argv = served_argv("/usr/bin/python3", profile="p.toml", fleet=True)
    assert argv[3] == "--readonly" and argv[-1] == "fleet"
    own = served_argv("/usr/bin/python3", profile=None, fleet=True, fleet_has_own_readonly=True)
    assert own[-2:] == ["fleet", "--readonly"] and own[3] == "--readonly"


# -- the served command -------------------------------------------------------------------------
def test_served_argv_readonly_absolute_profile(tmp_path: Path) -> None:
    os.chdir(tmp_path)
    argv = served_argv(sys.executable, profile="rel/profile.toml", interval_s=2.5)
    assert argv[:4] == [os.path.abspath(sys.executable), "-m", "seat_console", "--readonly"]
    assert argv[argv.index("--profile") + 1] == str(tmp_path / "rel/profile.toml")
    assert argv[-2:] == ["--interval", "2.5"]
    assert is_readonly_argv(argv)
    with pytest.raises(ServeUsageError):
        served_argv("", profile=None)


def test_plan_json(capsys, tmp_path: Path) -> None:
    prof = tmp_path / "p.toml"
    prof.write_text(Path(cli.__file__).with_name("default_profile.toml").read_text())
    rc = cli.main(["--profile", str(prof), "serve", "--port", "8555", "--max-viewers", "2",
                   "--json"])
    doc = json.loads(capsys.readouterr().out)
    assert rc == 0
    assert doc["url"] == "http://127.0.0.1:8555/" and doc["readonly"] is True
    assert doc["shell"] is False and doc["limits"]["max_viewers"] == 2
    assert doc["argv"][1:6] == ["-m", "seat_console", "--readonly", "--profile", str(prof)]


@pytest.mark.parametrize("argv", [
    ["/usr/bin/python3", "-m", "seat_console"],
    ["/usr/bin/python3", "-m", "seat_console", "--profile", "x", "--readonly"],
    ["python3", "-m", "seat_console", "--readonly"],
    ["/bin/sh", "-c", "seat-console --readonly"],
])
def test_server_refuses_a_command_that_is_not_readonly(argv: list[str]) -> None:
    p = make_plan("127.0.0.1", 0, 1, python=sys.executable, profile=None)
    bad = plan_mod.ServePlan(host=p.host, port=0, argv=tuple(argv), max_viewers=1,
                             fleet=False, profile=None)
    with pytest.raises(ValueError, match="not `python -m seat_console --readonly"):
        SeatServer(bad)


def test_served_console_is_readonly_whatever_its_arguments(monkeypatch, capsys) -> None:
    """Under the served driver the CLI forces --readonly: a node-changing command is refused
    (exit 2) before anything is read or journaled."""
    monkeypatch.setenv("TEXTUAL_DRIVER", DRIVER_PATH)
    assert cli.served()
    rc = cli.main(["release", "--yes"])
    assert rc == 2
    assert "--readonly forbids" in capsys.readouterr().err
    assert DRIVER_PATH in cli.SERVED_DRIVERS


# -- the page is offline ------------------------------------------------------------------------
def test_templates_refer_to_nothing_outside() -> None:
    for f in TEMPLATES_DIR.glob("*.html"):
        text = f.read_text("utf-8")
        assert "://" not in text, f
        for ref in re.findall(r'(?:src|href)="([^"]+)"', text):
            assert ref.startswith(("{{ config.static.url }}", "data:")), (f, ref)


# -- the server in-process: the limit, the origin, the process per tab --------------------------
async def _serve(max_viewers: int, tmp_path: Path) -> tuple[TestClient, SeatServer]:
    p = make_plan("127.0.0.1", 0, max_viewers, python=sys.executable, profile=None)
    server = SeatServer(p)
    client = TestClient(TestServer(await server._make_app(), host="127.0.0.1"))
    await client.start_server()
    server.port = client.port
    return client, server


async def _wait(pred, what: str, timeout_s: float = 90.0):
    deadline = time.monotonic() + timeout_s
    while not (value := pred()):
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout_s:.0f}s waiting for {what}")
        await asyncio.sleep(0.05)
    return value


async def test_max_viewers_origin_and_process_per_tab(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("SEAT_CONSOLE_STATE_DIR", str(tmp_path / "state"))
    client, server = await _serve(1, tmp_path)
    origin = {"Origin": f"http://127.0.0.1:{client.port}"}
    try:
        page = await client.get("/")
        assert page.status == 200
        html = await page.text()
        assert "://" not in html.replace(f"ws://127.0.0.1:{client.port}/ws", "")
        # another site's page cannot drive a console; a rebound name cannot read the page
        assert (await client.get("/ws")).status == 403
        assert (await client.get("/ws", headers={"Origin": "http://evil.example"})).status == 403
        assert (await client.get("/", headers={"Host": "evil.example:80"})).status == 403
        ping = await client.get("/?fontsize=12&ping=http://evil.example/",
                                allow_redirects=False)
        assert ping.status == 303 and "ping" not in ping.headers["Location"]
        assert (await client.get("/static/")).status in (403, 404)   # no folder listing

        ws1 = await client.ws_connect("/ws?width=100&height=30", headers=origin)
        first = await asyncio.wait_for(ws1.receive(), 90)
        assert first.type == aiohttp.WSMsgType.BINARY   # the console's first frame
        [pid] = await _wait(server.pids, "the first tab's console")
        assert psutil.Process(pid).cmdline() == list(server.argv)   # exec'd: no shell
        assert psutil.Process(pid).ppid() == os.getpid()

        full = await client.get("/")
        assert full.status == 503
        body = await full.text()
        assert "The web view is full" in body and "--max-viewers 1" in body
        ws2 = await client.ws_connect("/ws", headers=origin)
        msg = await asyncio.wait_for(ws2.receive(), 30)
        assert msg.type == aiohttp.WSMsgType.BINARY and b"is full" in msg.data
        closed = await asyncio.wait_for(ws2.receive(), 30)
        assert closed.type == aiohttp.WSMsgType.CLOSE and closed.data == 1013
        assert len(server.pids()) == 1 and server.refused == 2

        await ws1.close()
        await _wait(lambda: not psutil.pid_exists(pid) or
                    psutil.Process(pid).status() == psutil.STATUS_ZOMBIE,
                    "the tab's console to end")
        await _wait(lambda: not server.viewers, "the slot to free")
        assert (await client.get("/")).status == 200
    finally:
        await client.close()
    assert not server.viewers


def test_served_console_ends_when_the_server_is_killed(tmp_path: Path) -> None:
    """SIGKILL to the server (no goodbye to its consoles): each console sees its stdin end
    and exits (Textual's own web driver would keep polling the node)."""
    env = {**os.environ, "SEAT_CONSOLE_STATE_DIR": str(tmp_path / "state")}
    sys.path.insert(0, str(Path(__file__).parent))
    from browser_view import ServedConsole

    served = ServedConsole(profile=None, env=env)
    try:
        async def connect() -> None:
            async with aiohttp.ClientSession() as s:
                ws = await s.ws_connect(served.url + "ws", headers={
                    "Origin": served.url.rstrip("/")})
                await asyncio.wait_for(ws.receive(), 90)
                await _wait(served.viewer_pids, "the console")
                pids = served.viewer_pids()
                os.kill(served.proc.pid, signal.SIGKILL)
                served.proc.wait(30)
                await _wait(lambda: not any(psutil.pid_exists(p) and psutil.Process(p).status()
                                            != psutil.STATUS_ZOMBIE for p in pids),
                            "the console to exit after its server was killed", 60)

        asyncio.run(connect())
    finally:
        served.stop()


class _Packets:
    """A stand-in for Textual's stdin ``InputReader``: yields the given reads (``b""`` is the
    reader's 0.1 s tick with no input), then ends as stdin at end-of-file does."""

    def __init__(self, reads: list[bytes]) -> None:
        self.reads = reads
        self.closed = False

    def __iter__(self):
        yield from self.reads

    def close(self) -> None:
        self.closed = True


def _packet(kind: str, payload: bytes) -> bytes:
    """One packet of the web driver's stream: type byte, 4-byte big-endian size, payload."""
    return kind.encode() + len(payload).to_bytes(4, "big") + payload


def _keys_through_driver(reads: list[bytes]) -> tuple[list[str], list[type]]:
    """Run :class:`ServedWebDriver`'s input loop over ``reads``; the keys it delivered and
    the types of the messages it posted to the app."""
    from textual import events
    from seat_console.serve.driver import ServedWebDriver

    class App:
        posted: list = []

        def post_message(self, message) -> bool:
            self.posted.append(message)
            return True

    app = App()
    driver = ServedWebDriver.__new__(ServedWebDriver)   # no stdin / stdout of a real process
    keys: list[str] = []
    driver._app = app
    driver._debug = False
    driver._input_reader = _Packets(reads)
    driver.exit_event = threading.Event()
    driver.process_message = lambda m: keys.append(m.key) if isinstance(m, events.Key) else None
    driver.run_input_thread()
    assert driver._input_reader.closed
    return keys, [type(m) for m in app.posted]


@pytest.mark.parametrize("together", [True, False], ids=["one-read", "two-reads"])
def test_served_driver_delivers_a_lone_esc_at_once(together: bool) -> None:
    """Esc then "?" from the browser, with no reader tick between them (the key walk's lost
    "?", Textualize/textual#5969): both keys arrive, in order; a lone ESC packet is not held
    back for an escape sequence. Textual's parser, fed the same bytes, loses both."""
    from textual._xterm_parser import XTermParser
    from textual import messages

    esc, quest = _packet("D", b"\x1b"), _packet("D", b"?")
    keys, posted = _keys_through_driver([esc + quest] if together else [esc, quest])
    assert keys == ["escape", "question_mark"]
    assert posted == [messages.ExitApp]   # stdin ended without an exit: the app is told to
    parser = XTermParser()
    lost = [*parser.feed("\x1b"), *parser.feed("?")]
    assert [getattr(e, "key", None) for e in lost] != ["escape", "question_mark"]


def test_served_driver_keeps_escape_sequences_whole() -> None:
    """An escape sequence in one packet (an arrow key, Alt+x) is still parsed as one key, and
    meta packets still reach the driver's handler (a resize)."""
    keys, posted = _keys_through_driver([
        _packet("D", b"\x1b[A"), _packet("D", b"x"),
        _packet("M", json.dumps({"type": "resize", "width": 100, "height": 30}).encode()), b""])
    assert keys == ["up", "x"]
    assert [t.__name__ for t in posted] == ["Resize", "ExitApp"]


def test_the_plan_of_port_0_names_no_port_it_will_not_listen_on(capsys) -> None:
    """The trial: ``serve --port 0 --dry-run`` said "would listen on …:0/" and "share: ssh -L
    8470:127.0.0.1:8470", a port nothing would listen on. With --port 0 the share line says
    the port is the one printed at start; any other port is named as given."""
    assert cli.main(["serve", "--port", "0", "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "8470" not in out and "PORT being the port it prints when it starts" in out, out
    assert cli.main(["serve", "--port", "9123", "--dry-run", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["share"] == "ssh -L 9123:127.0.0.1:9123 <node>", doc["share"]
