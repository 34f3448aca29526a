"""``docker exec`` through the Docker Engine API (no ``docker`` CLI process per command).

The docker-exec transport (:class:`~seat_console.node.transport.DockerExecTransport`) runs a
command **without stdin** here instead of starting the ``docker`` CLI: one start of the Go client
costs ~19 ms of CPU in the caller, the same exec through the API 4–5 ms (docs/benchmarks.md,
"Exporter"). Three engine calls per command, on one SDK client per transport
(:func:`~seat_console.node.docker.docker_client`, the console's one client factory):

1. ``POST /containers/{name}/exec`` (``exec_create``: stdout and stderr attached, no stdin, no
   tty, the argv as given — the transport has already wrapped it in ``env -i PATH=…``);
2. ``POST /exec/{id}/start`` (``exec_start(socket=True)``): the engine answers ``101 UPGRADED``
   and the connection becomes the command's multiplexed output stream (8-byte frame headers:
   stream 1 stdout, 2 stderr; :class:`StreamDemux`), read until EOF against the run's deadline;
3. ``GET /exec/{id}/json`` (``exec_inspect``): ``ExitCode`` (polled briefly until ``Running`` is
   false), ``Pid`` (the process's PID as the engine's host sees it; 0 when it never started).

What the engine does that the CLI hid: when the process cannot be started (``OCI runtime exec
failed…``, e.g. the container is stopping, or the program is missing), the engine writes its
error into the **stdout** frames and sets ``ExitCode`` 126/127 with ``Pid`` 0;
:meth:`EngineExec.run` moves that text to stderr (it is the engine speaking, not the program),
so the transport's rules see it where they look.

**Timeouts.** The Engine API has no "kill this exec" call, and closing the stream does not stop
the process (checked on the lab's engine 20.10: the process keeps running; killing the
``docker exec`` CLI leaves it running too). On a timeout :meth:`EngineExec.run` therefore signals
the process itself when it can: only for a ``unix://`` engine (on this machine), only a PID whose
``/proc/PID/cgroup`` names the exec's container (so a PID from another PID namespace is never
signalled), the exec's process and its descendants, SIGTERM then SIGKILL after 2 s. When it
cannot (an engine over ``tcp://``, another PID namespace, no permission), the outcome says so:
the command may still run on the node. The engine calls (create, start, inspect) are each
bounded by the client's timeout (:data:`API_TIMEOUT_S`); the output stream by the run's deadline.

Thread-safe: the client is created lazily under a lock and shared; the SDK's connection pool
(urllib3) hands each concurrent call its own connection, and each exec's stream is its own
connection, closed when the exec ends. :meth:`EngineExec.close` closes the client (a later run
creates a new one).
"""

from __future__ import annotations

import os
import struct
import threading
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from seat_console.node.docker import docker_client

if TYPE_CHECKING:
    import docker

API_TIMEOUT_S = 5.0
"""Bound of each engine call (exec create, start, inspect) in seconds; the command's own output
is bounded by the run's ``timeout_s``."""

EXIT_CODE_WAIT_S = 2.0
"""After the output stream ends, how long the exit status is polled for (seconds); the engine
records it as the process exits, in practice before the stream closes."""

DRAIN_AFTER_KILL_S = 3.0
"""After a timeout kill, how long the rest of the output is read (seconds)."""

MAX_CAPTURE_BYTES = 4 * 1024 * 1024
"""At most this many bytes of stdout (the first) and of stderr (the last) are kept, as the
runner keeps them (:data:`seat_console.node.runner.MAX_CAPTURE_BYTES`)."""

FRAME_HEADER = struct.Struct(">BxxxL")
"""The engine's multiplexed-stream frame header: stream (0 stdin, 1 stdout, 2 stderr, 3 the
engine's own error), three zero bytes, payload length (big-endian uint32)."""

_READ_CHUNK = 1 << 16


class StreamProtocolError(ValueError):
    """The engine's output stream is not a multiplexed stream (unknown stream byte), or the
    SDK handed back a stream of a shape this module does not know."""


class StreamDemux:
    """Incremental decoder of the engine's multiplexed output stream.

    :meth:`feed` takes the bytes as they arrive, split anywhere (a header or a payload may span
    calls). Stream 1 (and 0) goes to :attr:`stdout`, 2 and 3 to :attr:`stderr`. ``cap``: bytes
    kept per stream — the first ``cap`` of stdout (:attr:`stdout_truncated` says when more came),
    the last ``cap`` of stderr. :attr:`pending` is the size of an incomplete frame (header or
    payload) not yet finished: non-zero at EOF means the stream was cut. Raises
    :class:`StreamProtocolError` for a stream byte other than 0–3 (not a multiplexed stream:
    e.g. a tty exec); the decoder is then unusable.
    """

    def __init__(self, cap: int = MAX_CAPTURE_BYTES) -> None:
        self.cap = int(cap)
        self._out = bytearray()
        self._err = bytearray()
        self.stdout_truncated = False
        self._head = bytearray()
        self._stream = 0
        self._left = 0  # payload bytes still to come for the current frame

    @property
    def stdout(self) -> bytes:
        """The stdout kept (at most ``cap`` bytes, the first)."""
        return bytes(self._out)

    @property
    def stderr(self) -> bytes:
        """The stderr kept (at most ``cap`` bytes, the last)."""
        return bytes(self._err)

    @property
    def pending(self) -> int:
        """Bytes of an unfinished frame seen so far plus those still awaited (0 between frames)."""
        return len(self._head) + self._left

    def _put(self, stream: int, data: memoryview) -> None:
        if stream in (0, 1):
            room = self.cap - len(self._out)
            if len(data) > room:
                self.stdout_truncated = True
                data = data[:max(0, room)]
            self._out += data
        else:
            self._err += data
            if len(self._err) > 2 * self.cap:
                del self._err[:len(self._err) - self.cap]

    def feed(self, data: bytes) -> None:
        """Decode ``data``, the next bytes of the stream."""
        view = memoryview(data)
        i, n = 0, len(view)
        while i < n:
            if self._left:
                take = min(self._left, n - i)
                self._put(self._stream, view[i:i + take])
                self._left -= take
                i += take
                continue
            need = FRAME_HEADER.size - len(self._head)
            self._head += view[i:i + need]
            i += min(need, n - i)
            if len(self._head) < FRAME_HEADER.size:
                break
            stream, length = FRAME_HEADER.unpack(self._head)
            self._head.clear()
            if stream > 3:
                raise StreamProtocolError(
                    f"not a multiplexed docker stream (stream byte {stream})")
            self._stream, self._left = stream, length

    def finish(self) -> None:
        """Trim stderr to its last ``cap`` bytes (call once, at EOF)."""
        if len(self._err) > self.cap:
            del self._err[:len(self._err) - self.cap]


@dataclass
class ExecOutcome:
    """What one exec through the engine did (the transport turns it into a ``CommandResult``).

    ``rc``: the exit status (``None`` when it never ran, timed out, or the engine did not say);
    ``stdout`` / ``stderr``: bytes kept (see :class:`StreamDemux`); ``pid``: the process's PID on
    the engine's host (0 = never started); ``duration_s``: wall seconds, monotonic, from the
    create call; ``timed_out``: the run's deadline passed (the command's output, or an engine
    call); ``engine_error``: the engine (or the connection to it) failed — the sentence, with
    the engine's own message — and the command did not run or its result is unknown;
    ``after_timeout``: on a timeout, what became of the process (``"was killed (pid 123 …)"`` or
    ``"may still run on the node: …"``).
    """

    rc: int | None = None
    stdout: bytes = b""
    stderr: bytes = b""
    stdout_truncated: bool = False
    pid: int = 0
    duration_s: float = 0.0
    timed_out: bool = False
    engine_error: str | None = None
    after_timeout: str | None = None
    exec_id: str | None = None
    notes: list[str] = field(default_factory=list)


class EngineExec:
    """Runs commands in one container through the Engine API at ``docker_host``.

    ``docker_host``: ``unix:///path/docker.sock`` or ``tcp://host:port`` (plain HTTP: the
    console passes no TLS settings, as the CLI path passes none either); ``container``: name or
    ID. The SDK client is built on first use (API version negotiated: one ``GET /version``) and
    rebuilt after :meth:`close`; it does not read the console's environment (no proxies, no
    ``DOCKER_*``). Thread-safe. Raises :class:`ValueError` for another URL scheme (the
    transport keeps the CLI for those).
    """

    SCHEMES = ("unix://", "tcp://")

    def __init__(self, docker_host: str, container: str, *,
                 api_timeout_s: float = API_TIMEOUT_S) -> None:
        if not docker_host.startswith(self.SCHEMES):
            raise ValueError(f"{docker_host!r}: the Engine API path takes unix:// or tcp://")
        self.docker_host = docker_host
        self.container = container
        self.api_timeout_s = api_timeout_s
        self.local = docker_host.startswith("unix://")
        self._client: docker.DockerClient | None = None
        self._lock = threading.Lock()

    def _api(self) -> Any:
        with self._lock:
            if self._client is None:
                client = docker_client(self.docker_host, timeout_s=self.api_timeout_s)
                client.api.trust_env = False  # no proxy / netrc from the console's environment
                self._client = client
            return self._client.api

    def close(self) -> None:
        """Close the client's connections (idempotent; a later :meth:`run` opens a new one)."""
        with self._lock:
            client, self._client = self._client, None
        if client is not None:
            client.close()

    # -- one command -----------------------------------------------------------------------
    def run(self, argv: list[str], timeout_s: float) -> ExecOutcome:
        """Run ``argv`` (``argv[0]`` absolute in the container) with no stdin; never raises for
        an engine or command failure (see :class:`ExecOutcome`)."""
        import docker.errors
        import requests.exceptions

        out = ExecOutcome()
        t0 = time.monotonic()
        deadline = t0 + float(timeout_s)
        step = "connect"
        try:
            api = self._api()
            step = "exec create"
            exec_id = api.exec_create(self.container, argv, stdout=True, stderr=True,
                                      stdin=False, tty=False)["Id"]
            out.exec_id = exec_id
            step = "exec start"
            sock = api.exec_start(exec_id, socket=True)
            step = "output stream"
            try:
                demux = self._read_stream(sock, deadline, out)
            finally:
                _close_stream(sock)
            out.stdout, out.stderr = demux.stdout, demux.stderr
            out.stdout_truncated = demux.stdout_truncated
            step = "exec inspect"
            if not out.timed_out:
                info = self._wait_exit(api, exec_id, time.monotonic() + EXIT_CODE_WAIT_S)
                out.pid = int(info.get("Pid") or 0)
                code = info.get("ExitCode")
                if info.get("Running") or not isinstance(code, int):
                    out.engine_error = (f"the engine reported no exit status for the exec "
                                        f"within {EXIT_CODE_WAIT_S:g} s of its output ending")
                else:
                    out.rc = code
                if out.pid == 0 and out.stdout and not out.stderr:
                    # the engine's own "OCI runtime exec failed …" line, written to stdout
                    out.stderr, out.stdout = out.stdout, b""
        except docker.errors.APIError as exc:
            out.engine_error = (f"Error response from daemon ({step}): "
                                f"{exc.explanation or exc}")
        except requests.exceptions.Timeout as exc:
            out.timed_out = True
            out.engine_error = (f"the docker engine at {self.docker_host} did not answer "
                                f"({step}) within {self.api_timeout_s:g} s: {exc}")
        except StreamProtocolError as exc:
            out.engine_error = f"the engine's output stream for the exec was not readable: {exc}"
        except (requests.exceptions.ConnectionError, docker.errors.DockerException,
                OSError) as exc:
            if step == "connect" and "timed out" in str(exc).lower():
                # the SDK wraps the version negotiation's read timeout in a DockerException
                out.timed_out = True
                out.engine_error = (f"the docker engine at {self.docker_host} did not answer "
                                    f"({step}) within {self.api_timeout_s:g} s: {exc}")
            elif step in ("connect", "exec create", "exec start"):
                out.engine_error = (f"Cannot connect to the Docker daemon at "
                                    f"{self.docker_host} ({step}): {exc}")
            else:  # it ran (or may have): the engine went away under it
                out.engine_error = (f"lost the docker engine at {self.docker_host} ({step}): "
                                    f"{exc}; the command's result is unknown")
        out.duration_s = time.monotonic() - t0
        if out.exec_id is not None:
            _forget_exec_pools(self._client, out.exec_id)
        return out

    def _read_stream(self, sock: Any, deadline: float, out: ExecOutcome) -> StreamDemux:
        demux = StreamDemux()
        reader, raw = _stream_parts(sock)
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                break
            raw.settimeout(left)
            try:
                chunk = reader.read1(_READ_CHUNK)
            except TimeoutError:
                break
            if not chunk:
                if demux.pending:
                    out.notes.append(f"the output stream ended inside a frame "
                                     f"({demux.pending} bytes missing)")
                demux.finish()
                return demux
            demux.feed(chunk)
        # the deadline passed with the stream still open
        out.timed_out = True
        out.after_timeout = self._stop_after_timeout(out)
        # what it wrote until it died (the reader timed out: read the socket itself)
        end = time.monotonic() + DRAIN_AFTER_KILL_S
        while (left := end - time.monotonic()) > 0:
            raw.settimeout(left)
            try:
                chunk = raw.recv(_READ_CHUNK)
            except (TimeoutError, OSError):
                break
            if not chunk:
                break
            demux.feed(chunk)
        demux.finish()
        return demux

    def _wait_exit(self, api: Any, exec_id: str, until: float) -> dict[str, Any]:
        pause = 0.002
        while True:
            info = api.exec_inspect(exec_id)
            if not info.get("Running") and isinstance(info.get("ExitCode"), int):
                return info
            if time.monotonic() >= until:
                return info
            time.sleep(pause)
            pause = min(pause * 2, 0.1)

    def _stop_after_timeout(self, out: ExecOutcome) -> str:
        """Signal the timed-out exec's process tree when it is ours to signal; the sentence."""
        if out.exec_id is None:
            return "may still run on the node (no exec ID)"
        try:
            info = self._api().exec_inspect(out.exec_id)
        except Exception as exc:  # noqa: BLE001 - any engine failure: say so, do not raise
            return (f"may still run on the node: the engine could not be asked for its PID "
                    f"({exc}); the Engine API has no exec kill")
        pid = int(info.get("Pid") or 0)
        out.pid = pid
        if not info.get("Running"):
            return "had exited by the time it was inspected"
        if not self.local:
            return (f"may still run on the node: the Engine API has no exec kill and the engine "
                    f"at {self.docker_host} is not on this machine (its pid {pid} was not "
                    "signalled)")
        return kill_exec_tree(pid, str(info.get("ContainerID") or ""))


def kill_exec_tree(pid: int, container_id: str, *, grace_s: float = 2.0) -> str:
    """SIGTERM the process ``pid`` and its descendants, SIGKILL those left after ``grace_s``;
    only when ``/proc/PID/cgroup`` names ``container_id`` (a full container ID), so a PID seen
    from another PID namespace, or reused, is never signalled. Returns the sentence for the
    result (``"was killed (…)"`` or ``"may still run on the node: …"``); never raises."""
    import psutil

    if pid <= 0 or len(container_id) < 12:
        return f"may still run on the node: the engine gave no usable PID ({pid})"
    try:
        with open(f"/proc/{pid}/cgroup", encoding="utf-8", errors="replace") as fh:
            cgroup = fh.read()
    except FileNotFoundError:
        return (f"may still run on the node: pid {pid} is not visible here (the engine runs in "
                "another PID namespace); the Engine API has no exec kill")
    except OSError as exc:
        return f"may still run on the node: cannot read /proc/{pid}/cgroup ({exc})"
    if container_id not in cgroup:
        return (f"may still run on the node: pid {pid} here is not in container "
                f"{container_id[:12]}'s cgroup (another PID namespace?), so it was not signalled")
    try:
        top = psutil.Process(pid)
        procs = [top, *top.children(recursive=True)]
    except psutil.NoSuchProcess:
        return "had exited before it could be signalled"
    except psutil.Error as exc:
        return f"may still run on the node: cannot list pid {pid}'s processes ({exc})"
    try:
        for p in procs:
            try:
                p.terminate()
            except psutil.NoSuchProcess:
                pass
        _gone, alive = psutil.wait_procs(procs, timeout=grace_s)
        for p in alive:
            try:
                p.kill()
            except psutil.NoSuchProcess:
                pass
        _gone2, still = psutil.wait_procs(alive, timeout=grace_s)
    except psutil.AccessDenied:
        return (f"may still run on the node: not permitted to signal pid {pid} (the console "
                "is not root or not the engine's user); the Engine API has no exec kill")
    how = "SIGTERM" if not alive else f"SIGTERM, then SIGKILL for {len(alive)}"
    if still:
        return (f"may still run on the node: {len(still)} of its {len(procs)} processes "
                f"(pid {pid} and descendants) survived SIGKILL")
    return f"was killed (pid {pid} and {len(procs) - 1} descendants on the engine's host, {how})"


def _stream_parts(sock: Any) -> tuple[Any, Any]:
    """The buffered reader and the socket of an ``exec_start(socket=True)`` stream.

    The SDK returns the connection's raw ``SocketIO``; bytes the HTTP layer already read past
    the ``101`` header (the first frames, when they arrive with it) sit in the response's
    buffered reader, so the stream is read through that reader, never the raw object alone."""
    response = getattr(sock, "_response", None)
    reader = getattr(getattr(getattr(response, "raw", None), "_fp", None), "fp", None)
    raw = getattr(sock, "_sock", None)
    if reader is None or not hasattr(reader, "read1") or raw is None:
        raise StreamProtocolError("the docker SDK's exec stream has an unexpected shape "
                      f"({type(sock).__name__}); this console expects docker-py 7")
    return reader, raw


def _forget_exec_pools(client: Any, exec_id: str) -> None:
    """Drop the connection pools of one exec's URLs from the SDK client.

    The SDK's adapters key their pools by request URL (docker-py 7.1, ``UnixHTTPAdapter.
    get_connection``), so ``/exec/{id}/start`` and ``/exec/{id}/json`` each get a pool that
    keeps an idle socket to the engine until 25 pools are held (its ``num_pools`` argument is
    ignored for non-SSH URLs): ~10 idle sockets per transport in the lab. Dropping them after
    the exec closes those sockets; ``/containers/{name}/exec`` stays pooled. Best effort: an SDK
    of another shape is left alone."""
    api = getattr(client, "api", None)
    for adapter in (getattr(api, "adapters", None) or {}).values():
        pools = getattr(adapter, "pools", None)
        if pools is None or not hasattr(pools, "keys"):
            continue
        for key in [k for k in pools.keys() if isinstance(k, str) and exec_id in k]:
            try:
                del pools[key]   # disposes: closes the pool's idle connections
            except KeyError:
                pass


def _close_stream(sock: Any) -> None:
    response = getattr(sock, "_response", None)
    for obj in (response, sock, getattr(sock, "_sock", None)):
        if obj is not None:
            try:
                obj.close()
            except OSError:
                pass


__all__ = ["API_TIMEOUT_S", "EngineExec", "ExecOutcome", "FRAME_HEADER", "StreamDemux",
           "StreamProtocolError", "kill_exec_tree"]
