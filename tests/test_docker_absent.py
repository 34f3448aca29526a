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


def test_the_runbooks_read_of_who_holds_the_seat_imports_no_sdk_without_an_engine(tmp_path):
    """The TUI's runbook reader asks who holds the seat at every read: on a node without the
    engine's socket (the GPU machine) it imported the docker SDK all the same, ~4.5 MiB of the
    console's RSS (issue 33's RSS ≤ 100 MiB on the card). It now says so from one ``stat``."""
    code = textwrap.dedent(f"""
        import dataclasses, sys
        from pathlib import Path
        from seat_console.actions.journal import Journal
        from seat_console.actions.stages import read_runbook
        from seat_console.actions.swap import seat_state
        from seat_console.core.profile import load_profile
        from seat_console.node.context import NodeContext
        lp = load_profile(None)
        host = "unix://{tmp_path}/none.sock"
        node = lp.profile.node.model_copy(update={{"docker_host": host}})
        lp = dataclasses.replace(lp, profile=lp.profile.model_copy(update={{"node": node}}))
        nctx = NodeContext.from_profile(lp)
        res, probe, why = seat_state(nctx)
        assert res is None and probe is None and "no socket at" in why and host in why, why
        with Journal(Path("{tmp_path}") / "journal.sqlite3") as j:
            state = read_runbook(nctx, j, runs_dir=Path("{tmp_path}") / "runs")
        assert state.seat_holder == "unknown", state.seat_holder
        assert any("no socket at" in p for p in state.problems), state.problems
        assert "docker" not in sys.modules and "requests" not in sys.modules
        print("ok")
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr
