"""A node without a docker engine: the containers and seat panels say so (the socket path and
the fix) without importing the docker SDK (~6 MiB RSS and ~0.2 s on the GPU machine)."""

from __future__ import annotations

import socket
import subprocess
import sys
import textwrap

from seat_console.node.docker import missing_socket


def test_missing_socket_names_the_path_and_the_fix(tmp_path):
    gone = tmp_path / "docker.sock"
    reason = missing_socket(f"unix://{gone}")
    assert reason is not None and str(gone) in reason and "node.docker_host" in reason
    sock = socket.socket(socket.AF_UNIX)
    sock.bind(str(gone))   # a socket that exists is left to the SDK
    try:
        assert missing_socket(f"unix://{gone}") is None
    finally:
        sock.close()
    assert missing_socket("tcp://127.0.0.1:2375") is None
    assert missing_socket("ssh://node") is None


def test_no_engine_no_sdk_import(tmp_path):
    code = textwrap.dedent(f"""
        import sys
        from seat_console.sources.containers import ContainerSource
        from seat_console.sources.seat import SeatSource
        host = "unix://{tmp_path}/none.sock"
        c = ContainerSource(host, {{"resident": "seat-resident"}})
        s = SeatSource(host, "seat-resident", None)
        rc, rs = c.read(), s.read()
        assert rc.kind == "unreachable" and "no socket at" in rc.reason, rc
        assert rs.kind == "unreachable" and "no socket at" in rs.reason, rs
        assert "docker" not in sys.modules and "requests" not in sys.modules
        c.close(); s.close()
        print("ok")
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr
