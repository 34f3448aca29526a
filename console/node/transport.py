"""The node transport seam: run commands and read files on the serving node.

Nothing outside this module knows how the node is reached (``shared/DESIGN.md``, rule 2). Three
implementations of :class:`Transport`:

* :class:`LocalTransport` — the console runs on the node;
* :class:`SshTransport` — ``ssh`` (the OpenSSH client binary) to ``user@host`` with BatchMode
  (never a password prompt), a connect timeout, keep-alives and host-key checking;
* :class:`DockerExecTransport` — ``docker exec`` into a container (how the tests reach a real
  systemd running as PID 1 in a container) on the profile's ``node.docker_host``: through the
  Docker Engine API for a command without stdin (:mod:`seat_console.node.engine_exec`: no
  ``docker`` CLI process per command), through the ``docker`` CLI (``-H``) for one with stdin.

Every command is an argument list and goes through the one :class:`~seat_console.node.runner.Runner`
(the Engine API path starts no local process; its result is classified by the runner's own
:func:`~seat_console.node.runner.classify`).
On a remote node the command runs as ``/usr/bin/env -i PATH=<explicit> LC_ALL=C.UTF-8
LANG=C.UTF-8 <absolute binary> <args…>``: the node's environment is not inherited either, and the
binary was resolved to an absolute path on the node once (preflight, cached). For SSH the remote
argument list must travel as one string that the remote login shell splits; it is quoted with
:func:`shlex.join` (POSIX ``sh`` quoting: each argument single-quoted), so no value from the
profile is ever interpreted by a shell. (A remote login shell that is not POSIX — fish, csh — is
not supported.)

File reads on the node go through the same seam: :meth:`Transport.read_file` reads at most
``max_bytes`` (locally with ``open``; remotely with ``head -c`` through the runner).
"""

from __future__ import annotations

import os
import re
import shlex
import threading
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from datetime import datetime
from pathlib import Path

from seat_console.core.base import utcnow
from seat_console.core.profile import LoadedProfile, NodeSpec
from seat_console.node.docker import DEFAULT_DOCKER_HOST
from seat_console.node.engine_exec import EngineExec, ExecOutcome
from seat_console.node.runner import DEFAULT_PATH, CommandResult, Runner, classify

REMOTE_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
"""The explicit ``PATH`` given to commands on a remote node (and used to resolve them there)."""

ENV_BIN = "/usr/bin/env"
"""``env`` on the node, used to run each remote command with a cleared environment (``-i``)."""

SH_BIN = "/bin/sh"
"""POSIX shell on the node, used only for the fixed ``command -v "$1"`` lookup at preflight (the
name travels as a positional parameter, never inside the script)."""

_LOOKUP_SCRIPT = ('case "$1" in /*) if [ -f "$1" ] && [ -x "$1" ]; then echo "$1"; fi ;; '
                  '*) IFS=:; for d in $PATH; do if [ -f "$d/$1" ] && [ -x "$d/$1" ]; then '
                  'echo "$d/$1"; break; fi; done ;; esac; exit 0')
"""Fixed ``sh`` script that prints the first executable file named ``$1`` on ``$PATH`` (like
:func:`shutil.which`; shell builtins do not count: the command is exec'd by ``env``), or nothing.
It always exits 0 when the shell ran."""

_NAME_RE = re.compile(r"^[A-Za-z0-9_.+/][A-Za-z0-9_.+/-]*$")
_SSH_TARGET_RE = re.compile(r"^[A-Za-z0-9._][A-Za-z0-9._-]*@[A-Za-z0-9._:\[\]-]+$")
_CONTAINER_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")


_Lookup = tuple[str | None, CommandResult | None]
"""``(absolute path or None, failed lookup result or None)``: see :meth:`Transport.resolve`."""


class TransportError(Exception):
    """The node cannot be reached or a transport is misconfigured (message names the fix)."""


class NodeFileError(Exception):
    """A file on the node could not be read: ``path``, ``where`` and the reason in the message."""

    def __init__(self, path: str, where: str, reason: str) -> None:
        self.path = path
        self.where = where
        super().__init__(f"cannot read {path} on {where}: {reason}")


class Transport(ABC):
    """Runs argument-list commands and reads files on the node.

    ``kind``: ``"local"``, ``"ssh"`` or ``"docker-exec"``; ``where``: a short description used in
    messages (``"local"``, ``"ssh root@node:2222"``, ``"docker-exec node"``). Thread-safe.
    """

    kind: str = "transport"
    _node_path: str = REMOTE_PATH

    def __init__(self, runner: Runner | None = None) -> None:
        self.runner = runner or Runner()
        self._resolved: dict[str, str] = {}
        self._lookups: dict[str, threading.Event] = {}
        """Lookups in flight, by name: a second thread asking for the same name waits for
        the first one's answer instead of running its own."""
        self._lock = threading.Lock()

    @property
    @abstractmethod
    def where(self) -> str:
        """Where commands run, for messages."""

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.where!r})"

    # -- binaries ---------------------------------------------------------------------------
    @abstractmethod
    def local_binaries(self) -> list[str]:
        """Binaries this transport itself needs on the console's machine (e.g. ``ssh``)."""

    @abstractmethod
    def _resolve_on_node(self, name: str, timeout_s: float) -> _Lookup:
        """Find ``name`` on the node's explicit PATH (same return shape as :meth:`resolve`)."""

    def resolve(self, name: str, timeout_s: float = 10.0) -> _Lookup:
        """Absolute path of the binary ``name`` on the node (cached once found, and the path
        found with it: a later lookup of that path is answered from the cache). One lookup per
        name at a time: a thread asking while another looks the same name up waits for that
        answer (at most ``timeout_s``), so the sources' first reads at start-up, each needing
        ``systemctl``, cost the node one ``docker exec`` / ``ssh`` round trip, not one each
        (issue 33: the action log's first read ran two of its own beside the timers' one).

        Returns ``(path, None)`` when found (or cached); ``(None, None)`` when the lookup ran and
        the program is not on the node's PATH (or, for an absolute name, is not an executable
        file); ``(None, result)`` when the lookup itself failed — ``result`` says why (node
        unreachable, container missing or stopped, timeout).
        Raises :class:`ValueError` for a name that is not a plain program name or path.
        """
        if not _NAME_RE.match(name):
            raise ValueError(f"{name!r} is not a program name")
        with self._lock:
            if name in self._resolved:
                return self._resolved[name], None
            running = self._lookups.get(name)
            if running is None:
                self._lookups[name] = threading.Event()
        if running is not None:   # another thread looks it up now: its answer, if it finds it
            running.wait(timeout_s)
            with self._lock:
                if name in self._resolved:
                    return self._resolved[name], None
            return self._resolve_on_node(name, timeout_s)   # not found there: ask ourselves
        try:
            path, res = self._resolve_on_node(name, timeout_s)
            if path is not None:
                with self._lock:
                    self._resolved[name] = path
                    # the path found is an executable file on the node: what a lookup of
                    # the path itself would answer (callers run the path they were given)
                    self._resolved.setdefault(path, path)
            return path, res
        finally:
            with self._lock:
                self._lookups.pop(name).set()

    def preflight(self, names: Sequence[str], timeout_s: float = 10.0) -> dict[str, str | None]:
        """Resolve the transport's own local binaries and ``names`` on the node.

        Returns ``{name: absolute path or None}`` (local binaries keyed ``"local:NAME"``). Raises
        :class:`TransportError` when the node cannot be reached at all (the message names why).
        """
        out: dict[str, str | None] = {}
        for b in self.local_binaries():
            out[f"local:{b}"] = self.runner.resolve(b)
            if out[f"local:{b}"] is None:
                raise TransportError(f"{self.where}: `{b}` not found on the console's PATH "
                                     f"({self.runner.path}); install it")
        for n in names:
            path, res = self.resolve(n, timeout_s)
            if res is not None:
                raise TransportError(res.failure or f"{self.where}: cannot look up {n}")
            out[n] = path
        return out

    # -- running ----------------------------------------------------------------------------
    def run(self, argv: Sequence[str], *, timeout_s: float = 30.0,
            min_expected_s: float | None = None, stdin: bytes | None = None) -> CommandResult:
        """Run ``argv`` on the node; returns the :class:`~seat_console.node.runner.CommandResult`.

        ``argv[0]`` is resolved on the node first (see :meth:`resolve`); an unresolvable binary
        gives a failed result with rc 127 and says where it looked. Never raises for a failed
        command; raises :class:`TypeError` for a shell string.
        """
        if isinstance(argv, (str, bytes)):
            raise TypeError("commands are argument lists, not shell strings")
        argv = tuple(argv)
        path, res = self.resolve(argv[0], min(timeout_s, 10.0))
        if res is not None:
            return res
        if path is None:
            return CommandResult(
                argv=argv, remote_argv=argv, where=self.where, rc=127, started_at=utcnow(),
                duration_s=0.0, ok=False, stderr=f"{argv[0]}: command not found",
                failure=(f"`{argv[0]}` not found on {self.where} (PATH={self._node_path}) — "
                         "exit 127; install it on the node or fix the PATH"))
        return self._run_resolved((path, *argv[1:]), timeout_s=timeout_s,
                                  min_expected_s=min_expected_s, stdin=stdin)

    @abstractmethod
    def _run_resolved(self, argv: tuple[str, ...], *, timeout_s: float,
                      min_expected_s: float | None, stdin: bytes | None) -> CommandResult:
        """Run an argv whose ``argv[0]`` is absolute on the node."""

    def read_file(self, path: str, *, max_bytes: int = 1 << 20, timeout_s: float = 10.0) -> bytes:
        """Read at most ``max_bytes`` bytes of the file ``path`` (absolute) on the node.

        Raises :class:`NodeFileError` (missing file, permission, node unreachable) with the path,
        where, and reason; :class:`ValueError` for a relative path.
        """
        if not path.startswith("/"):
            raise ValueError(f"{path!r}: give an absolute path on the node")
        res = self.run(["head", "-c", str(int(max_bytes)), "--", path], timeout_s=timeout_s)
        if not res.ok:
            detail = res.stderr.strip().splitlines()[-1:] or [res.failure or "failed"]
            raise NodeFileError(path, self.where, detail[0])
        return res.stdout_bytes

    def read_text(self, path: str, *, max_bytes: int = 1 << 20, timeout_s: float = 10.0) -> str:
        """:meth:`read_file` decoded as UTF-8 (undecodable bytes replaced)."""
        return self.read_file(path, max_bytes=max_bytes, timeout_s=timeout_s).decode(
            "utf-8", errors="replace")

    def close(self) -> None:  # noqa: B027 - optional hook, nothing to release by default
        """Release resources (nothing to release for these transports)."""


class LocalTransport(Transport):
    """The console runs on the node itself: commands run through the runner directly."""

    kind = "local"

    @property
    def where(self) -> str:
        return "local"

    def local_binaries(self) -> list[str]:
        return []

    def __init__(self, runner: Runner | None = None) -> None:
        super().__init__(runner)
        self._node_path = self.runner.path

    def _resolve_on_node(self, name: str, timeout_s: float) -> _Lookup:
        return self.runner.resolve(name), None

    def _run_resolved(self, argv: tuple[str, ...], *, timeout_s: float,
                      min_expected_s: float | None, stdin: bytes | None) -> CommandResult:
        return self.runner.run(argv, timeout_s=timeout_s, min_expected_s=min_expected_s,
                               stdin=stdin, where=self.where)

    def read_file(self, path: str, *, max_bytes: int = 1 << 20, timeout_s: float = 10.0) -> bytes:
        """Read the local file directly (no subprocess); errors as :class:`NodeFileError`."""
        if not path.startswith("/"):
            raise ValueError(f"{path!r}: give an absolute path on the node")
        try:
            with open(path, "rb") as fh:
                return fh.read(max_bytes)
        except OSError as exc:
            raise NodeFileError(path, self.where, exc.strerror or str(exc)) from None


class _RemoteTransport(Transport):
    """Shared logic of transports that run ``env -i PATH=… BINARY ARGS`` on another machine."""

    def _wrap(self, argv: Sequence[str]) -> list[str]:
        return [ENV_BIN, "-i", f"PATH={REMOTE_PATH}", "LC_ALL=C.UTF-8", "LANG=C.UTF-8", *argv]

    @abstractmethod
    def _local_argv(self, remote: list[str], stdin: bool) -> list[str]:
        """The local argv that runs ``remote`` on the node."""

    def _describe(self) -> dict[int, str]:
        return {}

    def _explain(self, res: CommandResult) -> CommandResult:
        return res

    def _run_remote(self, remote: list[str], *, timeout_s: float, min_expected_s: float | None,
                    stdin: bytes | None, shown: Sequence[str]) -> CommandResult:
        res = self.runner.run(self._local_argv(remote, stdin is not None), timeout_s=timeout_s,
                              min_expected_s=min_expected_s, stdin=stdin,
                              remote_argv=tuple(shown), where=self.where,
                              describe_rc=self._describe())
        return self._explain(res)

    _node_path = REMOTE_PATH

    def _resolve_on_node(self, name: str, timeout_s: float) -> _Lookup:
        # The script is fixed text; the name travels as "$1". It exits 0 whenever the shell ran,
        # so a non-zero status means the transport failed (ssh 255, docker exec 1/125/126).
        remote = self._wrap([SH_BIN, "-c", _LOOKUP_SCRIPT, "sh", name])
        res = self._run_remote(remote, timeout_s=timeout_s, min_expected_s=None, stdin=None,
                               shown=["command", "-v", name])
        if not res.ok:
            return None, res
        found = (res.stdout.strip().splitlines() or [""])[-1]
        return (found, None) if found.startswith("/") else (None, None)

    def _run_resolved(self, argv: tuple[str, ...], *, timeout_s: float,
                      min_expected_s: float | None, stdin: bytes | None) -> CommandResult:
        return self._run_remote(self._wrap(argv), timeout_s=timeout_s,
                                min_expected_s=min_expected_s, stdin=stdin, shown=argv)


class SshTransport(_RemoteTransport):
    """Commands over the OpenSSH client to ``target`` (``user@host``).

    Options always given: ``BatchMode=yes`` (no password or passphrase prompts: a missing key is a
    failure, not a hang), ``ConnectTimeout``, ``ServerAliveInterval``/``CountMax`` (a dead link is
    noticed within ~15 s), ``StrictHostKeyChecking=yes`` (unknown host keys are refused), ``-T``
    (no tty), ``LogLevel=ERROR``. ``port``, ``identity_file`` (with ``IdentitiesOnly=yes``) and
    ``known_hosts_file`` are optional. ssh exits 255 when it cannot connect or authenticate.
    Raises :class:`TransportError` for a target that is not ``user@host`` (or starts with ``-``).
    """

    kind = "ssh"

    def __init__(self, target: str, *, port: int | None = None,
                 identity_file: str | os.PathLike[str] | None = None,
                 known_hosts_file: str | os.PathLike[str] | None = None,
                 connect_timeout_s: int = 5, runner: Runner | None = None) -> None:
        super().__init__(runner)
        if not _SSH_TARGET_RE.match(target or ""):
            raise TransportError(f"node.ssh_target = {target!r}: give user@host (letters, digits, "
                                 "'.', '_', '-'; no leading '-')")
        self.target = target
        self.port = port
        self.identity_file = None if identity_file is None else Path(identity_file).expanduser()
        self.known_hosts_file = (None if known_hosts_file is None
                                 else Path(known_hosts_file).expanduser())
        self.connect_timeout_s = int(connect_timeout_s)

    @property
    def where(self) -> str:
        return f"ssh {self.target}" + (f":{self.port}" if self.port else "")

    def local_binaries(self) -> list[str]:
        return ["ssh"]

    def ssh_options(self) -> list[str]:
        """The ``ssh`` options before the destination (a pure function of the settings)."""
        opts = ["-T", "-o", "BatchMode=yes", "-o", f"ConnectTimeout={self.connect_timeout_s}",
                "-o", "ServerAliveInterval=5", "-o", "ServerAliveCountMax=3",
                "-o", "StrictHostKeyChecking=yes", "-o", "LogLevel=ERROR"]
        if self.port:
            opts += ["-p", str(self.port)]
        if self.identity_file is not None:
            opts += ["-i", str(self.identity_file), "-o", "IdentitiesOnly=yes"]
        if self.known_hosts_file is not None:
            opts += ["-o", f"UserKnownHostsFile={self.known_hosts_file}"]
        return opts

    def _local_argv(self, remote: list[str], stdin: bool) -> list[str]:
        # ssh joins everything after the destination with spaces and hands it to the remote
        # login shell; shlex.join quotes each argument so the shell splits it back exactly.
        return ["ssh", *self.ssh_options(), "--", self.target, shlex.join(remote)]

    def _explain(self, res: CommandResult) -> CommandResult:
        if res.rc == 255 or (res.timed_out and not res.stdout and not res.stderr):
            return res.model_copy(update={"unreachable": True})
        return res

    def _describe(self) -> dict[int, str]:
        return {255: (f"ssh could not connect to or authenticate with {self.target} (BatchMode "
                      "is on, so no prompts): check the host, port, key and known_hosts")}


class DockerExecTransport(_RemoteTransport):
    """Commands via ``docker exec`` into the container ``container``.

    ``docker_host``: the engine URL (e.g. ``unix:///work/lab/docker.sock``); ``None`` means the
    engine's default socket, ``unix:///var/run/docker.sock`` — the console's own
    ``DOCKER_HOST`` is *not* inherited here (explicit environment; :func:`make_transport` reads
    it once). Raises :class:`TransportError` for an invalid container name.

    Two paths, one set of rules (:func:`~seat_console.node.runner.classify`, then
    :meth:`_explain`):

    * a command **without stdin**, on a ``unix://`` or ``tcp://`` engine, runs through the
      Docker Engine API (:class:`~seat_console.node.engine_exec.EngineExec`: exec create /
      start / inspect on one SDK client, created on first use, closed by :meth:`close`) —
      no ``docker`` CLI process (~19 ms of CPU per start) per command. The result's ``argv`` is
      ``(<engine URL>, "exec", <container>, *remote argv)``. On a timeout the exec's process is
      killed by its PID when the engine is on this machine and the PID is the container's;
      otherwise the failure says it may still run on the node (the API has no exec kill);
    * a command **with stdin**, another URL scheme (``ssh://``…), or ``engine_api=False``:
      the ``docker`` CLI through the runner, ``docker -H <docker_host> exec [-i] <container>
      …``. On a timeout the runner kills the CLI; the command in the container is *not*
      stopped by that (checked on the lab's engine), and the failure says so.
    """

    kind = "docker-exec"

    def __init__(self, container: str, *, docker_host: str | None = None,
                 runner: Runner | None = None, engine_api: bool = True) -> None:
        super().__init__(runner)
        if not _CONTAINER_RE.match(container or ""):
            raise TransportError(f"node.exec_container = {container!r}: not a container name "
                                 "(letters, digits, '_', '.', '-')")
        self.container = container
        self.docker_host = docker_host
        url = docker_host or DEFAULT_DOCKER_HOST
        self._engine: EngineExec | None = (
            EngineExec(url, container) if engine_api and url.startswith(EngineExec.SCHEMES)
            else None)

    @property
    def where(self) -> str:
        return f"docker-exec {self.container}"

    @property
    def uses_engine_api(self) -> bool:
        """Whether commands without stdin go through the Engine API (else the ``docker`` CLI)."""
        return self._engine is not None

    def local_binaries(self) -> list[str]:
        # over the Engine API the CLI is needed only for a command with stdin (none today)
        return [] if self._engine is not None else ["docker"]

    def _local_argv(self, remote: list[str], stdin: bool) -> list[str]:
        base = ["docker"] + (["-H", self.docker_host] if self.docker_host else [])
        return [*base, "exec", *(["-i"] if stdin else []), self.container, *remote]

    def _run_remote(self, remote: list[str], *, timeout_s: float, min_expected_s: float | None,
                    stdin: bytes | None, shown: Sequence[str]) -> CommandResult:
        if stdin is None and self._engine is not None:
            started_at = utcnow()
            outcome = self._engine.run(remote, timeout_s)
            return self._engine_result(outcome, remote, shown=tuple(shown),
                                       started_at=started_at, timeout_s=timeout_s,
                                       min_expected_s=min_expected_s)
        res = super()._run_remote(remote, timeout_s=timeout_s, min_expected_s=min_expected_s,
                                  stdin=stdin, shown=shown)
        if res.timed_out and not res.unreachable:
            res = res.model_copy(update={"failure": classify(
                None, res.stderr, res.duration_s, timed_out=True, timeout_s=timeout_s,
                min_expected_s=min_expected_s, shown=res.shown, where=self.where,
                after_timeout=("its `docker exec` client was killed; the command itself may "
                               "still run in the container (killing the CLI does not stop "
                               "it)"))})
        return res

    def _engine_result(self, o: ExecOutcome, remote: list[str], *, shown: tuple[str, ...],
                       started_at: datetime, timeout_s: float,
                       min_expected_s: float | None) -> CommandResult:
        """The :class:`CommandResult` of one exec through the Engine API, by the runner's
        rules (:func:`classify`) and the transport's (:meth:`_explain_engine`, asked only
        about what the engine itself said — not the program's own stderr)."""
        assert self._engine is not None
        line = " ".join(shown)
        stdout = o.stdout.decode("utf-8", errors="replace")
        stderr = o.stderr.decode("utf-8", errors="replace")
        # the process never started (pid 0): its "stderr" is the engine's refusal
        engine_said = o.engine_error or (stderr if o.pid == 0 and o.rc not in (None, 0) else "")
        if o.engine_error is not None:
            sep = "\n" if stderr and not stderr.endswith("\n") else ""
            stderr = f"{stderr}{sep}{o.engine_error}"
            failure: str | None = f"`{line}` on {self.where} did not complete: {o.engine_error}"
        else:
            failure = classify(o.rc, stderr, o.duration_s, timed_out=o.timed_out,
                               timeout_s=timeout_s, min_expected_s=min_expected_s, shown=line,
                               where=self.where, after_timeout=o.after_timeout or "was killed")
            if failure is None and o.notes:
                failure = (f"`{line}` on {self.where}: {'; '.join(o.notes)} — its output is "
                           "incomplete")
        res = CommandResult(
            argv=(self._engine.docker_host, "exec", self.container, *remote),
            remote_argv=shown, where=self.where,
            rc=None if o.engine_error is not None else o.rc, stdout=stdout, stderr=stderr,
            stdout_bytes=o.stdout, stdout_truncated=o.stdout_truncated, started_at=started_at,
            duration_s=o.duration_s, timed_out=o.timed_out, ok=failure is None,
            failure=failure)
        return self._explain(res, engine_text=engine_said)

    def _explain_engine(self, text: str, *, api: bool = False) -> str | None:
        """The transport-level reason in ``text`` (what the engine or the CLI said), or
        ``None`` when it names none: missing container, stopped or paused container, the
        engine refusing the exec (``OCI runtime exec failed``: stopping), engine unreachable
        or (``api``: the Engine API path's own sentences) not answering / lost mid-command."""
        if "No such container" in text:
            return f"container {self.container!r} does not exist on the docker engine"
        if "is not running" in text:
            return f"container {self.container!r} is not running"
        if api and "is paused" in text:
            return f"container {self.container!r} is paused (docker unpause {self.container})"
        if "OCI runtime exec failed" in text:
            # docker exec's own 126 while the container is stopping / restarting, e.g.
            # "cannot exec in a stopped state": the transport failed, not the program.
            detail = text.strip().splitlines()[-1] if text.strip() else "no detail"
            if "cannot exec in a stopped" in detail:
                # runc's "stopped state" (stopping) / "stopped container" (stopped): either
                # way the container is not running, which is what an engineer needs to read
                return (f"container {self.container!r} is not running (stopping or stopped; "
                        f"the engine refused the exec: {detail})")
            return f"container {self.container!r} refused the exec (stopping?): {detail}"
        host = self.docker_host or DEFAULT_DOCKER_HOST
        if ("Cannot connect to the Docker daemon" in text or "error during connect" in text
                or (api and "lost the docker engine" in text)):
            return f"cannot connect to the docker engine at {host} (is dockerd running?)"
        if api and "did not answer" in text:
            return (f"the docker engine at {host} did not answer in time (dockerd hung or "
                    "overloaded?)")
        return None

    def _explain(self, res: CommandResult, engine_text: str | None = None) -> CommandResult:
        if res.ok:
            return res
        if engine_text is None:  # the CLI: its errors and the program's stderr are one stream
            reason = self._explain_engine(res.stderr)
        else:
            reason = self._explain_engine(engine_text, api=True)
        if reason is None:
            return res
        return res.model_copy(update={"failure": f"`{res.shown}` on {self.where}: {reason}",
                                      "unreachable": True})

    def close(self) -> None:
        """Close the Engine API client's connections (a later command opens new ones)."""
        if self._engine is not None:
            self._engine.close()


def make_transport(node: NodeSpec | LoadedProfile, runner: Runner | None = None,
                   environ: Mapping[str, str] | None = None) -> Transport:
    """The transport the profile's ``[node]`` asks for.

    ``node``: a :class:`~seat_console.core.profile.NodeSpec` or a loaded profile; ``runner``: shared runner
    (default: a new one with :data:`~seat_console.node.runner.DEFAULT_PATH`); ``environ``: where
    ``DOCKER_HOST`` is looked up when ``node.docker_host`` is unset (default ``os.environ``).
    Raises :class:`TransportError` for an invalid target.
    """
    if isinstance(node, LoadedProfile):
        node = node.profile.node
    runner = runner or Runner(DEFAULT_PATH)
    if node.transport == "local":
        return LocalTransport(runner)
    if node.transport == "ssh":
        assert node.ssh_target is not None
        return SshTransport(node.ssh_target, port=node.ssh_port,
                            identity_file=node.ssh_identity_file,
                            known_hosts_file=node.ssh_known_hosts_file, runner=runner)
    env = os.environ if environ is None else environ
    assert node.exec_container is not None
    return DockerExecTransport(node.exec_container,
                               docker_host=node.docker_host or env.get("DOCKER_HOST"),
                               runner=runner)


__all__ = ["DockerExecTransport", "LocalTransport", "NodeFileError", "REMOTE_PATH",
           "SshTransport", "Transport", "TransportError", "make_transport"]
