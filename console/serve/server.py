"""The web server of ``seat-console serve``: textual-serve's ``Server``, bounded and offline.

textual-serve 1.1.3 (``textual_serve/server.py``, ``app_service.py``; MIT) serves a page whose
JavaScript (xterm.js) opens a websocket; per websocket it starts the app as a process and
relays its Textual ``WebDriver`` packets. :class:`SeatServer` keeps that and changes:

* **the process**: started from the plan's argument list with ``create_subprocess_exec`` (an
  absolute interpreter, ``-m seat_console --readonly …``; textual-serve's ``AppService`` runs a
  shell string), in a session of its own, under :class:`~seat_console.serve.driver.
  ServedWebDriver` (it exits when the server is gone); stopped with a ``quit`` packet, then
  SIGTERM, then SIGKILL (:data:`STOP_GRACE_S` each) — never left behind;
* **bounded**: at most ``max_viewers`` app processes; the next tab gets :data:`FULL_STATUS`
  and a page saying so (a websocket that still arrives is told in the terminal and closed
  with 1013 "try again later");
* **offline**: the page is the project's template (``templates/app_index.html``, package
  data), which loads only this server's own files — textual-serve's template links a web
  font from outside; the font files it ships are served from ``/static/fonts``. A
  Content-Security-Policy (:data:`CSP`) makes the browser refuse any other origin;
* **loopback, same origin**: requests whose ``Host`` is not a loopback name are refused (403:
  a DNS-rebinding page cannot read the screen); a websocket whose ``Origin`` is not this page's
  is refused (403: another site open in the viewer's browser cannot drive a console); URLs are
  built from the request's own ``Host``, so an SSH tunnel on another local port works;
* **no other inputs**: the index accepts only ``fontsize`` (textual.js would fetch any URL
  given as ``?ping=``: other parameters are redirected away); ``/static`` lists no folders.

No authentication is built in: the loopback listener plus SSH (docs/serve.md) is the access
control.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import shlex
import signal
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import aiohttp_jinja2
import jinja2
from aiohttp import WSCloseCode, web
from textual_serve.app_service import AppService
from textual_serve.server import Server, to_int

from seat_console.serve.driver import DRIVER_PATH
from seat_console.serve.plan import ServePlan, is_readonly_argv, loopback_host, ssh_hint

log = logging.getLogger("seat_console.serve")

TEMPLATES_DIR = Path(__file__).resolve().parent / "templates"
"""The project's page templates (package data): ``app_index.html``, ``full.html``."""

STOP_GRACE_S = 5.0
"""Seconds an app process gets after the ``quit`` packet, and again after SIGTERM."""

FULL_STATUS = 503
"""HTTP status of the "web view is full" page (Service Unavailable, RFC 9110 §15.6.4)."""

INDEX_PARAMS = frozenset({"fontsize"})
"""The only query parameter the page takes (the terminal's font size in px)."""

CSP = ("default-src 'self'; script-src 'self' 'unsafe-inline'; style-src 'self' "
       "'unsafe-inline'; img-src 'self' data:; font-src 'self'; connect-src 'self' {ws}; "
       "frame-ancestors 'none'; base-uri 'none'; form-action 'none'")
"""Content-Security-Policy of every response (``{ws}``: this page's websocket origin): the
browser loads nothing from anywhere but this server (W3C CSP Level 3)."""


def loopback_authority(host_header: str | None) -> bool:
    """Whether a request's ``Host`` header (``127.0.0.1:8470``, ``[::1]:8470``,
    ``localhost:9000``) names a loopback host, whatever the port (an SSH tunnel's local port
    may differ)."""
    if not host_header:
        return False
    h = host_header.strip()
    if h.startswith("["):
        name = h[1:h.find("]")] if "]" in h else h
    else:
        name = h.rsplit(":", 1)[0] if h.count(":") == 1 else h
    return loopback_host(name) is not None


class ExecAppService(AppService):
    """textual-serve's ``AppService`` for one browser tab, with the process started from an
    argument list (no shell) under :data:`~seat_console.serve.driver.DRIVER_PATH`, and a stop
    that always ends it (quit packet → SIGTERM → SIGKILL, :data:`STOP_GRACE_S` apart).
    ``argv``: the plan's served command."""

    def __init__(self, argv: tuple[str, ...], **kwargs: Any) -> None:
        super().__init__(shlex.join(argv), **kwargs)
        self.argv = argv
        self._stopped = False

    @property
    def pid(self) -> int | None:
        """The app process's PID once started."""
        return None if self._process is None else self._process.pid

    def _build_environment(self, width: int = 80, height: int = 24) -> dict[str, str]:
        env = super()._build_environment(width=width, height=height)
        env["TEXTUAL_DRIVER"] = DRIVER_PATH
        for name in ("TEXTUAL", "TEXTUAL_LOG"):   # no devtools, no log file on the node
            env.pop(name, None)
        return env

    async def _open_app_process(self, width: int = 80, height: int = 24) -> Any:
        """Start the app process: ``argv`` exactly, stdin / stdout / stderr piped, in a new
        session (a Ctrl-C at the server's terminal reaches the server only; it stops them)."""
        self._process = process = await asyncio.create_subprocess_exec(
            *self.argv, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE, env=self._build_environment(width, height),
            start_new_session=True)
        assert process.stdin is not None
        self._stdin = process.stdin
        log.info("viewer started: pid %d", process.pid)
        return process

    async def stop(self) -> None:
        """End the app process (idempotent): a ``quit`` packet, then SIGTERM, then SIGKILL,
        :data:`STOP_GRACE_S` apart; its relay task is awaited."""
        if self._stopped:
            return
        self._stopped = True
        task, process = self._task, self._process
        self._task = None
        if task is not None:
            with contextlib.suppress(Exception):
                await self._download_manager.cancel_app_downloads(
                    app_service_id=self.app_service_id)
            with contextlib.suppress(Exception):
                await self.send_meta({"type": "quit"})
        if process is not None:
            for sig in (None, signal.SIGTERM, signal.SIGKILL):
                if process.returncode is not None:
                    break
                if sig is not None:
                    with contextlib.suppress(ProcessLookupError):
                        process.send_signal(sig)
                with contextlib.suppress(asyncio.TimeoutError):
                    await asyncio.wait_for(process.wait(), STOP_GRACE_S)
            log.info("viewer ended: pid %d, exit %s", process.pid, process.returncode)
        if task is not None:
            with contextlib.suppress(asyncio.TimeoutError, asyncio.CancelledError):
                await asyncio.wait_for(task, STOP_GRACE_S)


class SeatServer(Server):
    """textual-serve's ``Server`` for a :class:`~seat_console.serve.plan.ServePlan` (see the
    module docstring for what differs). ``ValueError`` if the plan's command is not a read-only
    console (:func:`~seat_console.serve.plan.is_readonly_argv`).

    ``viewers``: the app services running now; ``pids()`` their process IDs."""

    def __init__(self, plan: ServePlan, templates_path: Path = TEMPLATES_DIR) -> None:
        if not is_readonly_argv(plan.argv):
            raise ValueError(f"refusing to serve {list(plan.argv)!r}: not `python -m "
                             f"seat_console --readonly …`")
        super().__init__(shlex.join(plan.argv), host=plan.host, port=plan.port,
                         title="Seat Console · read-only", templates_path=templates_path)
        self.plan = plan
        self.argv = plan.argv
        self.max_viewers = plan.max_viewers
        self.viewers: set[ExecAppService] = set()
        self._slots = 0
        self._sockets: set[web.WebSocketResponse] = set()
        self._releasing: set[asyncio.Future[None]] = set()
        self.refused = 0
        """Tabs refused because the view was full (page or websocket)."""

    def pids(self) -> list[int]:
        """PIDs of the app processes running now (one per viewer)."""
        return [p for p in (s.pid for s in self.viewers) if p is not None]

    # -- the aiohttp application -----------------------------------------------------------
    async def _make_app(self) -> web.Application:
        app = web.Application(middlewares=[self._guard])
        aiohttp_jinja2.setup(app, loader=jinja2.FileSystemLoader(self.templates_path),
                             autoescape=True)
        app.add_routes([
            web.get("/", self.handle_index, name="index"),
            web.get("/ws", self.handle_websocket, name="websocket"),
            web.get("/download/{key}", self.handle_download, name="download"),
            web.static("/static", self.statics_path, show_index=False, name="static"),
        ])
        app.on_shutdown.append(self.on_shutdown)
        return app

    @web.middleware
    async def _guard(self, request: web.Request,
                     handler: Callable[[web.Request], Any]) -> web.StreamResponse:
        """Loopback ``Host`` only; then the handler; then the security headers."""
        if not loopback_authority(request.headers.get("Host")):
            return web.Response(status=403, text=(
                f"seat-console serve answers to a loopback address only (Host "
                f"{request.headers.get('Host')!r} refused). Browse http://127.0.0.1:"
                f"{self.port}/ through an SSH tunnel: {ssh_hint(self.port)}\n"))
        resp = await handler(request)
        if not resp.prepared:
            resp.headers["Content-Security-Policy"] = CSP.format(ws=f"ws://{request.host}")
            resp.headers["X-Content-Type-Options"] = "nosniff"
            resp.headers["Referrer-Policy"] = "no-referrer"
            resp.headers.setdefault("Cache-Control", "no-store")
        return resp

    def full_message(self) -> str:
        """What a refused viewer is told."""
        return (f"The Seat Console web view is full: {self.max_viewers} of "
                f"{self.max_viewers} viewers are connected (seat-console serve --max-viewers "
                f"{self.max_viewers}). Each viewer is a console process on the node; close "
                f"another tab, or ask whoever runs `seat-console serve` to restart it with a "
                f"higher --max-viewers.")

    async def handle_index(self, request: web.Request) -> web.StreamResponse:
        """The page (the project's template), or the "full" page (:data:`FULL_STATUS`) when
        ``max_viewers`` tabs are connected. Query parameters other than ``fontsize`` are
        redirected away (303)."""
        if set(request.query) - INDEX_PARAMS:
            keep = {k: v for k, v in request.query.items() if k in INDEX_PARAMS}
            raise web.HTTPSeeOther(location=str(request.rel_url.with_query(keep)))
        if self._slots >= self.max_viewers:
            self.refused += 1
            return aiohttp_jinja2.render_template(
                "full.html", request, {"message": self.full_message(),
                                       "max_viewers": self.max_viewers}, status=FULL_STATUS)
        font_size = max(6, min(48, to_int(request.query.get("fontsize", "16"), 16)))
        return aiohttp_jinja2.render_template("app_index.html", request, {
            "font_size": font_size,
            "app_websocket_url": f"ws://{request.host}/ws",
            "config": {"static": {"url": "/static/"}},
            "application": {"name": self.title},
            "max_viewers": self.max_viewers,
        })

    def _origin_ok(self, request: web.Request) -> bool:
        origin = request.headers.get("Origin")
        return origin is not None and origin == f"http://{request.host}"

    async def handle_websocket(self, request: web.Request) -> web.WebSocketResponse:
        """One browser tab: its app process, relayed until either side ends. Refused (403)
        from another origin; closed with 1013 and a message when the view is full."""
        if not self._origin_ok(request):
            raise web.HTTPForbidden(text="seat-console serve: websocket from another origin "
                                         "refused\n")
        full = self._slots >= self.max_viewers
        if not full:
            self._slots += 1   # taken before any await: no two tabs get the last slot
        websocket = web.WebSocketResponse(heartbeat=15)
        service: ExecAppService | None = None
        try:
            await websocket.prepare(request)
            if full:
                self.refused += 1
                await websocket.send_bytes(("\r\n  " + self.full_message() + "\r\n").encode())
                await websocket.close(code=WSCloseCode.TRY_AGAIN_LATER, message=b"full")
                return websocket
            self._sockets.add(websocket)
            width = to_int(request.query.get("width", "80"), 80)
            height = to_int(request.query.get("height", "24"), 24)
            service = ExecAppService(self.argv, write_bytes=websocket.send_bytes,
                                     write_str=websocket.send_str, close=websocket.close,
                                     download_manager=self.download_manager, debug=False)
            self.viewers.add(service)
            await service.start(width, height)
            await self._process_messages(websocket, service)
        except asyncio.CancelledError:   # the browser went away: aiohttp cancels us
            with contextlib.suppress(Exception):
                await websocket.close()
        except Exception:  # noqa: BLE001 - one tab's failure is logged, the server goes on
            log.exception("viewer failed")
        finally:
            # the release runs in a task of its own: aiohttp may cancel this handler again
            # while the app process is being stopped, and the slot must be freed only once
            # the process has ended
            release = asyncio.ensure_future(self._release(service, not full, websocket))
            self._releasing.add(release)
            release.add_done_callback(self._releasing.discard)
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.shield(release)
        return websocket

    async def _release(self, service: ExecAppService | None, slot: bool,
                       websocket: web.WebSocketResponse) -> None:
        """After a tab: its app process ended (:meth:`ExecAppService.stop`), then its slot."""
        try:
            if service is not None:
                await service.stop()
        finally:
            if service is not None:
                self.viewers.discard(service)
            if slot:
                self._slots -= 1
            self._sockets.discard(websocket)

    async def on_shutdown(self, app: web.Application) -> None:
        """Stop every app process and close every websocket."""
        await asyncio.gather(*(s.stop() for s in list(self.viewers)), return_exceptions=True)
        await asyncio.gather(*list(self._releasing), return_exceptions=True)
        for ws in list(self._sockets):
            with contextlib.suppress(Exception):
                await ws.close(code=WSCloseCode.GOING_AWAY, message=b"server stopped")

    # -- running ---------------------------------------------------------------------------
    async def start(self) -> tuple[web.AppRunner, int]:
        """Bind and start serving; return the runner and the bound port (``port`` 0 picks a
        free one). ``OSError`` if the address cannot be bound (e.g. the port is in use)."""
        runner = web.AppRunner(await self._make_app(), handle_signals=False, access_log=None)
        await runner.setup()
        site = web.TCPSite(runner, self.host, self.port, shutdown_timeout=STOP_GRACE_S)
        try:
            await site.start()
        except BaseException:
            await runner.cleanup()
            raise
        sockets = getattr(site._server, "sockets", None) or []   # aiohttp has no public API
        if sockets:
            self.port = sockets[0].getsockname()[1]
        return runner, self.port

    async def run_until_stopped(self, ready: Callable[[int], None]) -> None:
        """Serve until SIGINT or SIGTERM; ``ready(port)`` is called once listening. Every app
        process is stopped before returning. ``OSError`` as :meth:`start`."""
        runner, port = await self.start()
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        try:
            ready(port)
            await stop.wait()
        finally:
            for sig in (signal.SIGINT, signal.SIGTERM):
                loop.remove_signal_handler(sig)
            await runner.cleanup()


def serve(plan: ServePlan, ready: Callable[[int], None]) -> None:
    """Run :class:`SeatServer` for ``plan`` until SIGINT / SIGTERM (blocking). ``OSError`` if
    it cannot listen. Logs (viewers started / ended, errors) go to stderr."""
    logging.basicConfig(level=os.environ.get("SEAT_CONSOLE_SERVE_LOG", "INFO"),
                        format="seat-console serve: %(message)s", stream=sys.stderr)
    server = SeatServer(plan)
    asyncio.run(server.run_until_stopped(ready))
