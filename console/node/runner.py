"""The one runner for every external command the console starts.

Every external command — ``systemctl`` on the node, ``ssh``, the ``docker`` CLI, a build step —
goes through :class:`Runner.run`. It enforces the design's rule 1 (``shared/DESIGN.md``):

* **argument lists only**: ``argv`` is a sequence of strings; nothing is ever parsed by a local
  shell (``shell=False``). A string where a list is expected is refused (a shell string built from
  config values is how injection and quoting bugs happen);
* **binary resolved at preflight**: ``argv[0]`` is resolved to an absolute path once, against the
  runner's *explicit* ``PATH`` (not the inherited one: a console started from cron, a systemd unit
  or a non-login SSH shell has a short or different ``PATH``), and the absolute path is what runs;
* **explicit environment**: the child gets exactly :attr:`Runner.env` (``PATH``, ``LC_ALL=C.UTF-8``
  so tools print machine-stable text, ``HOME``) plus what the caller passes; nothing else is
  inherited, so no stray ``DOCKER_HOST``/``LD_PRELOAD``/``PYTHONPATH`` changes what runs;
* **timeout**: every run has one; on expiry the whole process group is killed (SIGTERM, then
  SIGKILL), so an ``ssh`` with a ProxyCommand or a shell pipeline does not leave orphans;
* **captured output and measured duration** (monotonic clock);
* **failures are failures**: a binary that cannot be found, exit 126 ("found but not
  executable") or 127 ("command not found", as POSIX shells, ``env`` and ``docker exec`` report
  it), "command not found" / "executable file not found" in stderr, a timeout, or a step that
  "completes" faster than ``min_expected_s`` (it probably did nothing — e.g. a wrapper that
  found no work) are reported as ``ok = False`` with a clear :attr:`CommandResult.failure`, never
  as success.

The result is a frozen :class:`CommandResult`; the runner does not raise for a failed command
(only for a programming error such as a shell string). Callers that need an exception call
:meth:`CommandResult.raise_for_failure`.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
from collections.abc import Mapping, Sequence
from datetime import datetime

from pydantic import Field

from seat_console.core.base import Frozen, utcnow

DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
"""The explicit ``PATH`` of every command (a login shell's PATH on Debian for root), used instead
of the console's inherited ``PATH``."""

DEFAULT_TIMEOUT_S = 30.0
"""Timeout of a command when the caller gives none, in seconds."""

DRAIN_AFTER_KILL_S = 3.0
"""After a timeout kill, how long the runner keeps reading the child's output pipes (seconds);
a process outside the killed group that holds them open cannot block the runner longer."""

MAX_CAPTURE_BYTES = 4 * 1024 * 1024
"""At most this many bytes of stdout (and of stderr) are kept; the rest is dropped and the
result says so (``stdout_truncated``)."""


class CommandError(Exception):
    """A command failed (raised by :meth:`CommandResult.raise_for_failure`).

    ``result`` is the :class:`CommandResult`; the message is its :attr:`~CommandResult.failure`
    plus the tail of stderr.
    """

    def __init__(self, result: CommandResult) -> None:
        self.result = result
        tail = result.stderr.strip().splitlines()[-3:]
        extra = f" — stderr: {' | '.join(tail)}" if tail else ""
        super().__init__(f"{result.failure}{extra}")


class CommandResult(Frozen):
    """What one external command did.

    ``argv``: the argument list actually executed (``argv[0]`` absolute) — for a remote
    transport, the *local* argv (``ssh …`` / ``docker exec …``; through the Docker Engine API,
    where no local process runs, ``(<engine URL>, "exec", <container>, *remote)``) and
    ``remote_argv`` the command run on the node; ``rc``: exit status, ``None`` if it never started or was killed on timeout
    (a negative value is "killed by signal -rc"); ``stdout`` / ``stderr``: decoded as UTF-8 with
    undecodable bytes replaced; ``started_at``: UTC; ``duration_s``: wall time in seconds
    (monotonic clock); ``ok``: ``rc == 0`` and no failure detected; ``failure``: one sentence
    saying what went wrong and the fix, ``None`` when ``ok``; ``timed_out``; ``where``: where it
    ran (``"local"``, ``"ssh root@node"``, ``"docker-exec node"``); ``unreachable``: the
    command never reached the node (ssh could not connect, the container is missing or stopped,
    the docker engine is down) — set by the transport.
    """

    argv: tuple[str, ...]
    remote_argv: tuple[str, ...] | None = None
    where: str = "local"
    rc: int | None
    stdout: str = ""
    stderr: str = ""
    stdout_bytes: bytes = Field(default=b"", repr=False, exclude=True)
    stdout_truncated: bool = False
    started_at: datetime
    duration_s: float
    timed_out: bool = False
    ok: bool
    failure: str | None = None
    unreachable: bool = False

    def raise_for_failure(self) -> CommandResult:
        """Return ``self`` when ``ok``; else raise :class:`CommandError`."""
        if not self.ok:
            raise CommandError(self)
        return self

    @property
    def shown(self) -> str:
        """The command as one line for messages (the remote command when there is one)."""
        return " ".join(self.remote_argv or self.argv)


def _check_argv(argv: Sequence[str]) -> tuple[str, ...]:
    if isinstance(argv, (str, bytes)):
        raise TypeError("commands are argument lists, not shell strings: pass "
                        "['systemctl', 'show', unit], not 'systemctl show ' + unit")
    out = tuple(argv)
    if not out:
        raise ValueError("empty argument list")
    for a in out:
        if not isinstance(a, str):
            raise TypeError(f"argument {a!r} is {type(a).__name__}, not str")
        if "\x00" in a:
            raise ValueError(f"argument {a!r} contains a NUL byte")
    return out


def classify(rc: int | None, stderr: str, duration_s: float, *, timed_out: bool,
             timeout_s: float, min_expected_s: float | None, shown: str,
             where: str = "local", after_timeout: str = "was killed") -> str | None:
    """The failure sentence for one finished command, or ``None`` when it succeeded.

    Rules (in order): timeout; killed by a signal (``rc < 0``); rc 127 → "command not found";
    rc 126 → "found but cannot be executed"; any other non-zero rc; rc 0 with a not-found marker
    in stderr (a wrapper that swallowed the status); rc 0 faster than ``min_expected_s`` seconds.
    ``after_timeout``: what became of a timed-out command, for its sentence (default ``"was
    killed"``; a transport that could not stop it says so: ``"may still run on the node: …"``).
    Pure function, shared by every transport (the runner, and the docker-exec transport's
    Engine API path).
    """
    low = stderr.lower()
    if timed_out:
        return (f"`{shown}` on {where} timed out after {timeout_s:g} s and {after_timeout}; "
                "raise the timeout only if the step is known to take longer")
    if rc is None:
        return f"`{shown}` on {where} did not run"
    if rc < 0:
        try:
            sig = signal.Signals(-rc).name
        except ValueError:
            sig = f"signal {-rc}"
        return f"`{shown}` on {where} was killed by {sig}"
    if rc == 127:
        return (f"`{shown}` on {where}: command not found (exit 127); install it or fix the "
                "PATH the console uses")
    if rc == 126:
        return (f"`{shown}` on {where}: found but cannot be executed (exit 126: permission "
                "denied or not a program)")
    if rc != 0:
        return f"`{shown}` on {where} failed with exit status {rc}"
    if any(m in low for m in ("command not found", "executable file not found")):
        return (f"`{shown}` on {where} exited 0 but reported 'command not found'; treating it "
                "as failed")
    if min_expected_s is not None and duration_s < min_expected_s:
        return (f"`{shown}` on {where} completed in {duration_s:.3f} s, but this step takes at "
                f"least {min_expected_s:g} s; it probably did nothing (wrong binary, empty "
                "input, or a wrapper that found no work) — treating it as failed")
    return None


class Runner:
    """Runs local commands with a resolved binary, explicit environment and timeout.

    ``path``: the explicit ``PATH`` searched to resolve ``argv[0]`` and given to the child
    (default :data:`DEFAULT_PATH`); ``env``: extra variables for every child (``PATH`` and
    ``LC_ALL=C.UTF-8`` are set unless given; ``HOME`` is copied from the console's own
    environment so ``ssh`` finds its keys and ``known_hosts``); ``default_timeout_s``: used when
    :meth:`run` gets no ``timeout_s``. Thread-safe (no mutable state besides the resolve cache).
    """

    def __init__(self, path: str = DEFAULT_PATH, env: Mapping[str, str] | None = None,
                 default_timeout_s: float = DEFAULT_TIMEOUT_S) -> None:
        self.path = path
        base = {"PATH": path, "LC_ALL": "C.UTF-8", "LANG": "C.UTF-8"}
        if "HOME" in os.environ:
            base["HOME"] = os.environ["HOME"]
        base.update(env or {})
        base["PATH"] = base.get("PATH", path)
        self.env: dict[str, str] = base
        self.default_timeout_s = default_timeout_s
        self._resolved: dict[str, str] = {}

    def __repr__(self) -> str:  # never show env values (they may hold tokens)
        return f"Runner(path={self.path!r}, env_keys={sorted(self.env)})"

    # -- preflight ----------------------------------------------------------------------------
    def resolve(self, name: str) -> str | None:
        """Absolute path of ``name`` on the runner's ``PATH`` (or ``name`` itself when it is an
        absolute path to an executable file); ``None`` when not found. Cached per name."""
        if name in self._resolved:
            return self._resolved[name]
        if os.path.isabs(name):
            found = name if os.path.isfile(name) and os.access(name, os.X_OK) else None
        else:
            found = shutil.which(name, path=self.path)
        if found is not None:
            self._resolved[name] = found
        return found

    def preflight(self, names: Sequence[str]) -> dict[str, str | None]:
        """Resolve each binary of ``names``; returns ``{name: absolute path or None}``.

        Run it before a runbook starts, so a missing tool fails the preflight instead of a step
        half-way through.
        """
        return {n: self.resolve(n) for n in names}

    # -- running ----------------------------------------------------------------------------
    def run(self, argv: Sequence[str], *, timeout_s: float | None = None,
            min_expected_s: float | None = None, stdin: bytes | None = None,
            env: Mapping[str, str] | None = None, cwd: str | None = None,
            remote_argv: Sequence[str] | None = None, where: str = "local",
            describe_rc: Mapping[int, str] | None = None) -> CommandResult:
        """Run ``argv`` and return a :class:`CommandResult` (never raises for a failed command).

        ``timeout_s``: seconds before the process group is killed (default the runner's);
        ``min_expected_s``: a successful run faster than this is a failure (see module doc);
        ``stdin``: bytes fed to the child (else ``/dev/null``); ``env``: extra variables for this
        run only; ``remote_argv`` / ``where``: recorded in the result by remote transports;
        ``describe_rc``: extra failure sentences per exit status (e.g. ``{255: "ssh could not
        connect"}``) that replace the generic one.

        Raises :class:`TypeError` / :class:`ValueError` for a shell string or an empty list
        (programming errors).
        """
        args = _check_argv(argv)
        timeout = self.default_timeout_s if timeout_s is None else float(timeout_s)
        shown = " ".join(remote_argv) if remote_argv else " ".join(args)
        started_at = utcnow()
        exe = self.resolve(args[0])
        if exe is None:
            return CommandResult(
                argv=args, remote_argv=tuple(remote_argv) if remote_argv else None, where=where,
                rc=127, started_at=started_at, duration_s=0.0, ok=False,
                stderr=f"{args[0]}: command not found on PATH={self.path}",
                failure=(f"`{args[0]}` not found on the console's PATH ({self.path}) — exit 127; "
                         "install it or give its absolute path"))
        args = (exe, *args[1:])
        child_env = dict(self.env)
        if env:
            child_env.update(env)
        t0 = time.monotonic()
        timed_out = False
        try:
            proc = subprocess.Popen(
                args, stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
                stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=child_env, cwd=cwd,
                start_new_session=True, close_fds=True)
        except OSError as exc:
            rc = 126 if isinstance(exc, PermissionError) else 127
            return CommandResult(
                argv=args, remote_argv=tuple(remote_argv) if remote_argv else None, where=where,
                rc=rc, started_at=started_at, duration_s=time.monotonic() - t0, ok=False,
                stderr=str(exc), failure=f"`{shown}` could not be started: {exc} (exit {rc})")
        try:
            out, err = proc.communicate(input=stdin, timeout=timeout)
        except subprocess.TimeoutExpired:
            timed_out = True
            _kill_group(proc)
            try:
                # bounded too: a grandchild that left the process group (setsid, a daemonising
                # ssh ControlMaster) can hold the pipes open long after the group is dead
                out, err = proc.communicate(timeout=DRAIN_AFTER_KILL_S)
            except subprocess.TimeoutExpired as exc:
                out, err = _partial(exc.stdout), _partial(exc.stderr) + (
                    f"\n[seat-console: output still held open by a process outside its process "
                    f"group {DRAIN_AFTER_KILL_S:g} s after the kill; stopped reading]").encode()
                for pipe in (proc.stdout, proc.stderr):
                    if pipe is not None:
                        try:
                            pipe.close()
                        except OSError:
                            pass
        duration = time.monotonic() - t0
        exit_rc: int | None = None if timed_out else proc.returncode
        truncated = len(out) > MAX_CAPTURE_BYTES
        out = out[:MAX_CAPTURE_BYTES]
        err = err[-MAX_CAPTURE_BYTES:]
        stdout = out.decode("utf-8", errors="replace")
        stderr = err.decode("utf-8", errors="replace")
        failure = classify(exit_rc, stderr, duration, timed_out=timed_out, timeout_s=timeout,
                           min_expected_s=min_expected_s, shown=shown, where=where)
        if (failure is not None and exit_rc is not None and describe_rc
                and exit_rc in describe_rc):
            failure = f"`{shown}` on {where}: {describe_rc[exit_rc]} (exit {exit_rc})"
        return CommandResult(
            argv=args, remote_argv=tuple(remote_argv) if remote_argv else None, where=where,
            rc=exit_rc, stdout=stdout, stderr=stderr, stdout_bytes=out, stdout_truncated=truncated,
            started_at=started_at, duration_s=duration, timed_out=timed_out,
            ok=failure is None, failure=failure)


def _partial(data: object) -> bytes:
    """What ``communicate`` had read when it timed out (bytes, a list of chunks, or None)."""
    if isinstance(data, bytes):
        return data
    if isinstance(data, list):
        return b"".join(data)
    return b""


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    """SIGTERM the child's process group, then SIGKILL after 2 s if it is still there."""
    for sig, wait_s in ((signal.SIGTERM, 2.0), (signal.SIGKILL, 5.0)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(timeout=wait_s)
            return
        except subprocess.TimeoutExpired:
            continue


__all__ = ["DEFAULT_PATH", "DEFAULT_TIMEOUT_S", "CommandError", "CommandResult", "Runner",
           "classify"]
