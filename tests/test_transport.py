"""The node transport seam against real endpoints: the local machine, a real sshd on loopback
(started by the test with its own host key and authorized key), and ``docker exec`` into the
lab's systemd node container."""

from __future__ import annotations

import os
import shlex
import shutil
import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from conftest import free_port, wait_for_port

from seat_console.core.profile import NodeSpec
from seat_console.node.transport import (
    REMOTE_PATH,
    DockerExecTransport,
    LocalTransport,
    NodeFileError,
    SshTransport,
    Transport,
    TransportError,
    make_transport,
)

SSHD = "/usr/sbin/sshd"
TRICKY = ["a b", "$HOME", "it's", "semi;colon", "`echo x`", "*", "new\nline", "-n"]
"""Arguments a shell would mangle; they must arrive byte for byte."""


# -- shared behaviour, run against every real transport ------------------------------------
def _check_transport(t: Transport, node_hostname: str | None = None) -> None:
    # argument lists arrive exactly (printf is /usr/bin/printf, resolved on the node)
    r = t.run(["printf", "%s|", *TRICKY])
    assert r.ok, r.failure
    assert r.stdout == "".join(f"{a}|" for a in TRICKY)
    # the binary was resolved to an absolute path on the node before it ran
    ran = r.remote_argv or r.argv
    assert ran[0].startswith("/") and ran[0].endswith("/printf")
    # explicit environment on the node
    env = t.run(["env"])
    assert env.ok, env.failure
    lines = dict(line.split("=", 1) for line in env.stdout.splitlines() if "=" in line)
    assert lines["PATH"] in (REMOTE_PATH, t.runner.path)
    assert lines["LC_ALL"] == "C.UTF-8"
    # a missing binary is 127 with the node named
    miss = t.run(["seat-console-no-such-binary"])
    assert miss.rc == 127 and not miss.ok
    assert t.where in (miss.failure or "")
    # a 127 from the node's own shell is a failure too
    r127 = t.run(["sh", "-c", "exit 127"])
    assert r127.rc == 127 and not r127.ok
    # files through the seam
    data = t.read_file("/etc/hostname")
    if node_hostname is not None:
        assert data.decode().strip() == node_hostname
    assert len(t.read_file("/etc/os-release", max_bytes=5)) == 5  # bounded read
    with pytest.raises(NodeFileError, match="/no/such/file"):
        t.read_file("/no/such/file")
    with pytest.raises(ValueError):
        t.read_file("relative/path")
    # timeouts bound a hung command
    slow = t.run(["sleep", "30"], timeout_s=1)
    assert slow.timed_out and not slow.ok
    # preflight resolves on the node
    found = t.preflight(["sh", "seat-console-no-such-binary"])
    assert found["sh"] is not None and found["sh"].startswith("/")
    assert found["seat-console-no-such-binary"] is None


def test_local_transport() -> None:
    _check_transport(LocalTransport(), socket.gethostname())


def test_shell_strings_refused_by_transports() -> None:
    with pytest.raises(TypeError):
        LocalTransport().run("ls /")  # type: ignore[arg-type]


class _CountingLocal(LocalTransport):
    """A local transport whose node lookups are counted and held until ``release`` is set."""

    def __init__(self) -> None:
        super().__init__()
        self.lookups: list[str] = []
        self.entered = threading.Event()
        self.release = threading.Event()

    def _resolve_on_node(self, name: str, timeout_s: float):
        self.lookups.append(name)
        self.entered.set()
        assert self.release.wait(30)
        return super()._resolve_on_node(name, timeout_s)


def test_one_lookup_per_name_at_a_time_and_the_found_path_is_cached_too() -> None:
    """Two sources' first reads asking for ``systemctl`` at once cost the node one lookup, and a
    caller running the path it was given costs none (issue 33: the action log's first read ran
    two lookups of its own beside the timers' one)."""
    t = _CountingLocal()
    answers: list[tuple] = []
    first = threading.Thread(target=lambda: answers.append(t.resolve("printf")))
    first.start()
    assert t.entered.wait(30)              # the first lookup is on the node now
    second = threading.Thread(target=lambda: answers.append(t.resolve("printf")))
    second.start()
    second.join(0.2)
    assert second.is_alive()               # waiting for the first one's answer
    t.release.set()
    first.join(30)
    second.join(30)
    path = shutil.which("printf", path=t.runner.path)
    assert answers == [(path, None), (path, None)]
    assert t.resolve(path) == (path, None)   # the path itself: from the cache
    assert t.lookups == ["printf"]


def test_a_name_not_found_is_looked_up_again_by_the_waiter() -> None:
    t = _CountingLocal()
    t.release.set()
    assert t.resolve("no-such-program-here") == (None, None)
    assert t.resolve("no-such-program-here") == (None, None)
    assert t.lookups == ["no-such-program-here"] * 2     # nothing negative is cached


# -- SSH: argv construction (pure) -------------------------------------------------------------
def test_ssh_argv_is_batchmode_and_quotes_each_argument() -> None:
    t = SshTransport("root@node-1", port=2222, identity_file="/k/id", known_hosts_file="/k/kh")
    argv = t._local_argv(t._wrap(["/usr/bin/systemctl", "stop", "--", "a b;rm -rf /"]), False)
    assert argv[0] == "ssh"
    opts = " ".join(argv)
    for o in ("BatchMode=yes", "StrictHostKeyChecking=yes", "ConnectTimeout=5",
              "IdentitiesOnly=yes", "UserKnownHostsFile=/k/kh"):
        assert o in opts
    assert argv[argv.index("-p") + 1] == "2222"
    assert argv[-3:-1] == ["--", "root@node-1"]
    # the remote shell splits the last argument back into exactly the original list
    assert shlex.split(argv[-1]) == ["/usr/bin/env", "-i", f"PATH={REMOTE_PATH}",
                                     "LC_ALL=C.UTF-8", "LANG=C.UTF-8", "/usr/bin/systemctl",
                                     "stop", "--", "a b;rm -rf /"]


@pytest.mark.parametrize("target", ["-oProxyCommand=x", "node", "root@", "@node", "a b@c",
                                    "root@node;ls"])
def test_ssh_target_validated(target: str) -> None:
    with pytest.raises(TransportError, match="user@host"):
        SshTransport(target)


def test_make_transport_from_profile() -> None:
    assert isinstance(make_transport(NodeSpec()), LocalTransport)
    t = make_transport(NodeSpec(transport="ssh", ssh_target="root@n", ssh_port=2200))
    assert isinstance(t, SshTransport) and t.where == "ssh root@n:2200"
    d = make_transport(NodeSpec(transport="docker-exec", exec_container="node",
                                docker_host="unix:///x.sock"), environ={})
    assert isinstance(d, DockerExecTransport) and d.docker_host == "unix:///x.sock"
    d2 = make_transport(NodeSpec(transport="docker-exec", exec_container="node"),
                        environ={"DOCKER_HOST": "unix:///env.sock"})
    assert isinstance(d2, DockerExecTransport) and d2.docker_host == "unix:///env.sock"


# -- SSH: a real sshd on loopback --------------------------------------------------------------
@dataclass
class Sshd:
    port: int
    key: Path
    known_hosts: Path
    pid: int




@pytest.fixture(scope="module")
def sshd(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Sshd]:
    """A real OpenSSH server on 127.0.0.1 with a generated host key and one authorized key."""
    if not os.path.exists(SSHD) or shutil.which("ssh-keygen") is None:
        pytest.fail(f"{SSHD} not installed: apt-get install openssh-server (scripts/test does)")
    if os.geteuid() != 0:
        pytest.skip("sshd with privilege separation needs root")
    d = tmp_path_factory.mktemp("sshd")
    for name in ("host_key", "client_key"):
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(d / name)],
                       check=True)
    (d / "authorized_keys").write_text((d / "client_key.pub").read_text())
    port = free_port(22200, 22300)
    (d / "sshd_config").write_text("\n".join([
        f"Port {port}", "ListenAddress 127.0.0.1", f"HostKey {d / 'host_key'}",
        f"AuthorizedKeysFile {d / 'authorized_keys'}", "PasswordAuthentication no",
        "KbdInteractiveAuthentication no", "PubkeyAuthentication yes",
        "PermitRootLogin prohibit-password", "UsePAM no", "StrictModes no",
        f"PidFile {d / 'sshd.pid'}", ""]))
    host_pub = (d / "host_key.pub").read_text().split()
    (d / "known_hosts").write_text(f"[127.0.0.1]:{port} {host_pub[0]} {host_pub[1]}\n")
    Path("/run/sshd").mkdir(exist_ok=True)
    proc = subprocess.Popen([SSHD, "-D", "-e", "-f", str(d / "sshd_config")],
                            stdout=subprocess.DEVNULL, stderr=open(d / "log", "w"))
    wait_for_port(port, proc, d / "log", "sshd", timeout=15)
    try:
        yield Sshd(port=port, key=d / "client_key", known_hosts=d / "known_hosts", pid=proc.pid)
    finally:
        proc.terminate()
        proc.wait(10)


def test_ssh_transport_real(sshd: Sshd) -> None:
    t = SshTransport("root@127.0.0.1", port=sshd.port, identity_file=sshd.key,
                     known_hosts_file=sshd.known_hosts)
    _check_transport(t, socket.gethostname())


def test_ssh_unknown_host_key_is_refused_not_prompted(sshd: Sshd, tmp_path: Path) -> None:
    empty = tmp_path / "known_hosts"
    empty.write_text("")
    t = SshTransport("root@127.0.0.1", port=sshd.port, identity_file=sshd.key,
                     known_hosts_file=empty)
    r = t.run(["true"], timeout_s=20)
    assert not r.ok and r.rc == 255 and r.unreachable
    assert "could not connect to or authenticate" in (r.failure or "")
    with pytest.raises(TransportError, match="authenticate"):
        t.preflight(["sh"])


def test_ssh_wrong_key_fails_fast_in_batch_mode(sshd: Sshd, tmp_path: Path) -> None:
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(tmp_path / "k")],
                   check=True)
    t = SshTransport("root@127.0.0.1", port=sshd.port, identity_file=tmp_path / "k",
                     known_hosts_file=sshd.known_hosts)
    r = t.run(["true"], timeout_s=20)
    assert not r.ok and r.rc == 255 and not r.timed_out


def test_ssh_nothing_listening_is_unreachable() -> None:
    port = free_port(22300, 22400)
    t = SshTransport("root@127.0.0.1", port=port)
    r = t.run(["true"], timeout_s=20)
    assert r.unreachable and r.rc == 255


# -- docker exec into the lab's systemd node -------------------------------------------------
def test_docker_exec_transport_real(lab) -> None:
    t = DockerExecTransport(lab.node_container, docker_host=lab.docker_host)
    _check_transport(t)
    # it really is the node: systemd is PID 1 there
    comm = t.read_text("/proc/1/comm").strip()
    assert comm == "systemd"
    # the container's own environment is not inherited (env -i)
    env = t.run(["env"]).stdout
    assert "container=" not in env


def test_docker_exec_cli_path_real(lab) -> None:
    """The CLI path (commands with stdin, other engine URLs) keeps every rule too."""
    t = DockerExecTransport(lab.node_container, docker_host=lab.docker_host, engine_api=False)
    assert not t.uses_engine_api
    _check_transport(t)
    r = t.run(["cat"], stdin=b"through -i\n")
    assert r.ok and r.stdout == "through -i\n" and r.argv[0].endswith("/docker")
    slow = t.run(["sleep", "3"], timeout_s=1)
    assert slow.timed_out and "may still run in the container" in (slow.failure or "")


# -- the Engine API path (commands without stdin) -------------------------------------------
def test_engine_api_rc_streams_and_large_output(lab) -> None:
    t = DockerExecTransport(lab.node_container, docker_host=lab.docker_host)
    assert t.uses_engine_api and t.local_binaries() == []
    f = t.run(["false"])
    assert f.rc == 1 and not f.ok and not f.unreachable
    assert f.argv[:3] == (lab.docker_host, "exec", lab.node_container)
    assert f.remote_argv is not None and f.remote_argv[0].endswith("/false")
    assert f.started_at.tzinfo is not None and f.duration_s > 0
    three = t.run(["sh", "-c", "echo out; echo err >&2; exit 3"])
    assert (three.rc, three.stdout, three.stderr, three.ok) == (3, "out\n", "err\n", False)
    assert "exit status 3" in (three.failure or "")
    # > 64 KiB on each stream, interleaved line by line, then 300 KB / 200 KB blocks
    script = ("i=0; while [ $i -lt 3000 ]; do echo out$i; echo err$i >&2; i=$((i+1)); done; "
              "head -c 300000 /dev/zero | tr '\\0' a; head -c 200000 /dev/zero | tr '\\0' b >&2")
    big = t.run(["sh", "-c", script], timeout_s=60)
    assert big.ok, big.failure
    want_out = "".join(f"out{i}\n" for i in range(3000)) + "a" * 300000
    want_err = "".join(f"err{i}\n" for i in range(3000)) + "b" * 200000
    assert big.stdout == want_out and big.stdout_bytes == want_out.encode()
    assert big.stderr == want_err
    # a missing binary on the node: env's own 127, through the API (not the preflight lookup)
    gone = t._run_resolved(("/usr/bin/seat-console-no-such-binary",), timeout_s=10,
                           min_expected_s=None, stdin=None)
    assert gone.rc == 127 and not gone.ok and "command not found" in (gone.failure or "")
    assert not gone.unreachable
    # "~0 s completions" of a step that must take time are failures
    quick = t.run(["true"], min_expected_s=5)
    assert not quick.ok and "it probably did nothing" in (quick.failure or "")
    # a 0-exit "command not found" in stderr is a failure
    swallowed = t.run(["sh", "-c", "echo 'x: command not found' >&2; exit 0"])
    assert swallowed.rc == 0 and not swallowed.ok
    t.close()


def test_engine_api_timeout_kills_the_process_on_the_node(lab) -> None:
    t = DockerExecTransport(lab.node_container, docker_host=lab.docker_host)
    t0 = time.monotonic()
    r = t.run(["sh", "-c", "echo started; exec sleep 31.25"], timeout_s=1)
    took = time.monotonic() - t0
    assert r.timed_out and not r.ok and r.rc is None and not r.unreachable
    assert took < 8, took   # 1 s + the kill (SIGTERM: at once) + the drain, under load
    assert "was killed (pid" in (r.failure or ""), r.failure
    assert r.stdout == "started\n"   # what it wrote before the timeout is kept
    ps = t.run(["sh", "-c", "cat /proc/[0-9]*/cmdline 2>/dev/null | tr '\\0' ' '"])
    assert ps.ok and "sleep 31.25" not in ps.stdout
    t.close()


def test_engine_api_stopped_container_is_unreachable(lab) -> None:
    name = f"seat-console-test-stopped-{os.getpid()}"
    with lab.docker_client() as client:
        c = client.containers.create(lab.node_image_id, ["/bin/true"], name=name)
        try:
            t = DockerExecTransport(name, docker_host=lab.docker_host)
            r = t.run(["true"])
            assert not r.ok and r.unreachable and r.rc is None
            assert "is not running" in (r.failure or ""), r.failure
            t.close()
        finally:
            c.remove(force=True)


def test_engine_api_concurrent_runs_and_no_leaked_sockets(lab) -> None:
    t = DockerExecTransport(lab.node_container, docker_host=lab.docker_host)
    t.run(["true"])
    fds0 = len(os.listdir("/proc/self/fd"))
    bad: list[str] = []

    def work(k: int) -> None:
        for j in range(6):
            r = t.run(["printf", "%s", f"token-{k}-{j}"])
            if not (r.ok and r.stdout == f"token-{k}-{j}"):
                bad.append(f"{k}/{j}: {r.failure} {r.stdout!r}")

    threads = [threading.Thread(target=work, args=(k,)) for k in range(6)]
    for th in threads:
        th.start()
    for th in threads:
        th.join(120)
    assert not bad, bad
    for _ in range(20):
        assert t.run(["true"]).ok
    # idle sockets: the `/containers/{name}/exec` pool's (at most 6 here: 6 threads), none per
    # exec (the SDK keeps a pool per URL: ~10 idle sockets per transport before the fix)
    assert len(os.listdir("/proc/self/fd")) <= fds0 + 6
    t.close()


def test_docker_exec_missing_container_is_unreachable(lab) -> None:
    t = DockerExecTransport("seat-console-no-such-container", docker_host=lab.docker_host)
    r = t.run(["true"])
    assert not r.ok and r.unreachable
    assert "does not exist" in (r.failure or "")


def test_docker_exec_engine_down_is_unreachable(tmp_path: Path) -> None:
    t = DockerExecTransport("node", docker_host=f"unix://{tmp_path}/none.sock")
    r = t.run(["true"])
    assert not r.ok and r.unreachable
    assert "cannot connect to the docker engine" in (r.failure or "")


def test_docker_exec_refused_while_stopping_is_unreachable_not_126() -> None:
    """docker exec exits 126 itself while the container stops; that is the transport failing,
    not "the program cannot be executed" (seen in the lab while `docker stop` ran)."""
    from datetime import UTC, datetime

    from seat_console.node.runner import CommandResult

    t = DockerExecTransport("seat-lab-node", docker_host="unix:///x.sock")
    stderr = ("OCI runtime exec failed: exec failed: cannot exec in a stopped state: unknown\n")
    res = CommandResult(argv=("/usr/bin/docker", "exec", "seat-lab-node", "/bin/systemctl"),
                        rc=126, stderr=stderr, started_at=datetime.now(UTC), duration_s=0.05,
                        ok=False, failure="exit 126: permission denied or not a program")
    out = t._explain(res)
    assert out.unreachable
    assert "'seat-lab-node' is not running (stopping or stopped" in out.failure
    assert "cannot exec in a stopped state" in out.failure
    # runc's words once the container has stopped: the same sentence (seen in CI as the
    # node's `docker stop` ended mid-poll), and another OCI refusal keeps "stopping?"
    for said, words in (("cannot exec in a stopped container", "is not running"),
                        ("container_linux.go: starting container process caused: boom",
                         "refused the exec (stopping?)")):
        stderr = f"OCI runtime exec failed: exec failed: {said}: unknown\n"
        got = t._explain(res.model_copy(update={"stderr": stderr}))
        assert got.unreachable and words in got.failure and said in got.failure
