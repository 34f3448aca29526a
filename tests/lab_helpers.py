"""What the lab tests that change the seat share (test_probe_lab, test_swap_lab,
test_compare_lab): the console's CLI in a child process, the state/data directories of one
test, the node's transport and timer states, the engine's health, the exclusive outage lock,
and putting the seat back as found (probe stopped, resident serving, the test's hold released,
timers as before) whatever the test did.
"""

from __future__ import annotations

import fcntl
import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
from conftest import _flock, wait_until

from seat_console.node.transport import DockerExecTransport
from seat_console.sources.timers import TimersReading, read_timers

PROBE_CONTAINER = "seat-probe"
"""The lab profile's probe container (``[swap]``)."""


def seat_cli(profile: Path, env: dict[str, str], *args: str,
             timeout: float = 180) -> subprocess.CompletedProcess[str]:
    """``seat-console --profile PROFILE ARGS…`` in a child process (text, not checked)."""
    return subprocess.run([sys.executable, "-m", "seat_console.cli", "--profile", str(profile),
                           *args], capture_output=True, text=True, env=env, timeout=timeout,
                          check=False)


def state_env(tmp_path: Path, *, data: bool = False) -> dict[str, str]:
    """The environment of a CLI child: the test's own journal (and, with ``data``, its own
    probe-run directory), unbuffered output."""
    env = {**os.environ, "SEAT_CONSOLE_STATE_DIR": str(tmp_path / "state"),
           "PYTHONUNBUFFERED": "1"}
    if data:
        env["SEAT_CONSOLE_DATA_DIR"] = str(tmp_path / "data")
    return env


def node_transport(lab) -> DockerExecTransport:
    """The lab's systemd node, reached through ``docker exec``."""
    return DockerExecTransport(lab.node_container, docker_host=lab.docker_host)


def timers_active(node, units) -> dict[str, bool]:
    """``{timer unit: armed?}`` read from the node's systemd now."""
    r = read_timers(node, list(units))
    assert isinstance(r, TimersReading), r
    return {t.unit: t.active for t in r.timers}


def serving(lab) -> bool:
    """Whether the lab's engine answers ``/health`` with 200 now."""
    try:
        return httpx.get(f"{lab.vllm_url}/health", timeout=3).status_code == 200
    except httpx.HTTPError:
        return False


@contextmanager
def exclusive_lab(lab, why: str) -> Iterator[None]:
    """The lab's outage lock (``.lab/disrupt.lock``) held EXCLUSIVELY inside the block (back
    to shared after it): ``why`` is shown while waiting for other sessions' tests."""
    _flock(lab.lab_dir, fcntl.LOCK_EX, why)
    try:
        yield
    finally:
        _flock(lab.lab_dir, fcntl.LOCK_SH, "lab")


def restore_seat(lab, env: dict[str, str], node, timers_before: dict[str, bool],
                 profile: Path | None = None) -> None:
    """Put the seat back as found: the probe container stopped, the resident started if it is
    not running and serving again (≤ 10 min: a vLLM start on this CPU), the test's hold
    released, and every timer that was armed before armed again."""
    with lab.docker_client(timeout=90) as client:
        for c in client.containers.list(filters={"name": PROBE_CONTAINER}):
            c.stop(timeout=10)
        res = client.containers.get(lab.resident_container)
        if not res.attrs["State"]["Running"]:
            res.start()
    wait_until(lambda: serving(lab), 600, what="the resident serving again")
    seat_cli(profile or lab.profile_path, env, "release", "--yes", timeout=120)
    for unit, was in timers_before.items():
        if was and not timers_active(node, [unit])[unit]:
            node.run(["systemctl", "start", unit])


def probe_metrics_profile(lab, tmp_path: Path) -> Path:
    """The lab's profile with ``scripts/lab.py``'s ``PROBE_ENGINE_FLAGS`` (per-request metrics)
    in the ``[swap]`` command, as ``lab.py up`` writes it since issue 35 (then this is a copy);
    a shared lab brought up by an older ``lab.py`` gets them added here. Any other line as is."""
    import tomllib

    from conftest import _lab_module

    flags = _lab_module().PROBE_ENGINE_FLAGS
    text = lab.profile_path.read_text("utf-8")
    lines, in_swap = text.splitlines(), False
    for i, line in enumerate(lines):
        if line.startswith("["):
            in_swap = line.strip() == "[swap]"
        elif in_swap and line.startswith("command = [") and line.rstrip().endswith("]"):
            missing = [f for f in flags if f'"{f}"' not in line]
            if missing:
                lines[i] = line.rstrip()[:-1] + "".join(f', "{f}"' for f in missing) + "]"
    out = tmp_path / "lab-probe-metrics.toml"
    out.write_text("\n".join(lines) + "\n", "utf-8")
    cmd = tomllib.loads(out.read_text("utf-8"))["swap"]["command"]
    assert all(f in cmd for f in flags), cmd
    return out


__all__ = ["PROBE_CONTAINER", "exclusive_lab", "node_transport", "probe_metrics_profile",
           "restore_seat", "seat_cli", "serving", "state_env", "timers_active"]


def probe_has_per_request_server_truth(profile: Path, env: dict[str, str],
                                       tmp_path: Path) -> dict:
    """Issue 35 on the probe engine (``--enable-per-request-metrics``): a short probe
    (single-stream, 4 requests) of what holds the seat keeps the engine's queue time and TTFT
    beside the client's per request in ``requests.jsonl``; the report shows the client −
    engine distribution and 0 token mismatches (~10 s). Returns the run's summary (``--json``)."""
    import json

    data = {**env, "SEAT_CONSOLE_DATA_DIR": env.get("SEAT_CONSOLE_DATA_DIR")
            or str(tmp_path / "data")}
    r = seat_cli(profile, data, "probe", "--phase", "single-stream", "--json", timeout=300)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    s = json.loads(r.stdout)
    assert "server_metrics" not in s, s["server_metrics"]     # the engine gave them
    recs = [json.loads(x) for x in (Path(s["path"]) / "requests.jsonl").read_text().splitlines()]
    measured = [x for x in recs if x["phase"] == "single-stream"]
    assert len(measured) == 4 and all(x["ok"] for x in measured), measured
    for x in measured:       # the engine's own figures, seconds, beside the client's
        assert x["server_queue_s"] is not None and x["server_queue_s"] >= 0, x
        assert 0 < x["server_ttft_s"] <= x["ttft_s"], x
    (ph,) = s["phases"]
    sv = ph["stats"]["server"]
    assert sv["with_metrics"] == 4 and sv["client_minus_server"]["n"] == 4, sv
    assert sv["token_mismatches"] == 0 and sv["token_mismatch_first"] == [], sv
    rep = seat_cli(profile, data, "report", "--json", s["path"], timeout=120)
    assert rep.returncode == 0, rep.stdout[-2000:] + rep.stderr[-2000:]
    doc = json.loads(rep.stdout)
    assert doc["consistency"] == [], doc["consistency"]       # re-derived from requests.jsonl
    (row,) = doc["phases"][0]["rows"]
    assert row["server"]["with_metrics"] == 4 and row["server"]["cmd_n"] == 4, row["server"]
    assert row["server"]["token_mismatches"] == 0, row["server"]
    md = seat_cli(profile, data, "report", s["path"], timeout=120).stdout
    line = next(x for x in md.splitlines() if x.startswith(f"| {row['arm']} | {row['run']} | 4 |"))
    assert line.endswith("(4) | 0 |") and "n/a" not in line, line   # p50 / p95 (n), 0 mismatches
    return s


def journal_rows(env: dict[str, str]) -> list[dict]:
    """Every row of the test's journal (``SEAT_CONSOLE_STATE_DIR``), in order, as dicts of its
    columns (raw: ``facts`` and ``inputs`` are JSON text)."""
    import sqlite3

    db = sqlite3.connect(Path(env["SEAT_CONSOLE_STATE_DIR"]) / "journal.sqlite3")
    db.row_factory = sqlite3.Row
    rows = [dict(r) for r in db.execute("SELECT * FROM entries ORDER BY seq")]
    db.close()
    return rows
