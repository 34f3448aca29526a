"""The Engine API path of the docker-exec transport without the lab: what it refuses, an engine
that accepts and never answers (a real unix socket that stays silent), and the timeout kill's
guard (a real local process that is in no container is never signalled). The path against the
real engine is in ``tests/test_transport.py`` (lab)."""

from __future__ import annotations

import socket
import subprocess
import threading
import time
from pathlib import Path

import pytest

from seat_console.node.engine_exec import EngineExec, kill_exec_tree
from seat_console.node.transport import DockerExecTransport


def test_paths_by_scheme_and_switch() -> None:
    assert DockerExecTransport("n", docker_host="unix:///x.sock").uses_engine_api
    assert DockerExecTransport("n", docker_host="tcp://127.0.0.1:2375").uses_engine_api
    assert DockerExecTransport("n").uses_engine_api          # the default socket
    ssh = DockerExecTransport("n", docker_host="ssh://root@node")
    assert not ssh.uses_engine_api and ssh.local_binaries() == ["docker"]
    cli = DockerExecTransport("n", docker_host="unix:///x.sock", engine_api=False)
    assert not cli.uses_engine_api and cli.local_binaries() == ["docker"]
    assert DockerExecTransport("n", docker_host="unix:///x.sock").local_binaries() == []
    with pytest.raises(ValueError, match="unix:// or tcp://"):
        EngineExec("ssh://root@node", "n")


@pytest.fixture
def silent_engine(tmp_path: Path):
    """A unix socket that accepts connections and never answers (a hung dockerd)."""
    path = tmp_path / "hung.sock"
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    srv.bind(str(path))
    srv.listen(8)
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        srv.settimeout(0.2)
        while not stop.is_set():
            try:
                held.append(srv.accept()[0])
            except TimeoutError:
                continue
            except OSError:
                return

    th = threading.Thread(target=accept, daemon=True)
    th.start()
    yield f"unix://{path}"
    stop.set()
    th.join(2)
    for c in held:
        c.close()
    srv.close()


def test_an_engine_that_never_answers_is_a_bounded_timeout(silent_engine: str) -> None:
    ex = EngineExec(silent_engine, "node", api_timeout_s=1)
    t0 = time.monotonic()
    out = ex.run(["/usr/bin/true"], timeout_s=30)
    took = time.monotonic() - t0
    assert out.timed_out and out.rc is None
    assert "did not answer" in (out.engine_error or "")
    assert took < 10, took   # the engine call's bound (1 s), not the command's 30 s
    ex.close()


def test_transport_maps_a_hung_engine_to_unreachable(silent_engine: str) -> None:
    t = DockerExecTransport("node", docker_host=silent_engine)
    t._engine.api_timeout_s = 1  # type: ignore[union-attr]
    r = t.run(["true"], timeout_s=30)
    assert not r.ok and r.unreachable and r.timed_out and r.rc is None
    assert "did not answer in time" in (r.failure or "")
    t.close()


def test_kill_guard_never_signals_a_process_outside_the_container() -> None:
    """A PID the engine names but that is not in the container's cgroup here (another PID
    namespace, or a reused PID) is left alone, and the sentence says the command may still
    run."""
    proc = subprocess.Popen(["sleep", "30"])
    try:
        said = kill_exec_tree(proc.pid, "f" * 64, grace_s=0.5)
        assert said.startswith("may still run on the node") and "cgroup" in said
        assert proc.poll() is None  # still running: not signalled
    finally:
        proc.kill()
        proc.wait()
    gone = kill_exec_tree(proc.pid, "f" * 64)
    assert gone.startswith("may still run on the node") and "not visible" in gone
    assert kill_exec_tree(0, "f" * 64).startswith("may still run on the node")
