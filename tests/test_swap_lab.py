"""Seat swap and restore on the lab: real dockerd, systemd node, Alertmanager and vLLM on the
CPU, through the real CLI in child processes (kill -9 is a real kill).

Each test that changes the seat holds the lab's ``.lab/disrupt.lock`` EXCLUSIVELY and, whatever
happens, leaves the resident serving (``seat`` fixture). vLLM restarts here take ~30-60 s each,
so there are three tests here: refused without a hold (changes nothing), one probe that cannot
start (restored automatically), one kill -9 mid-swap (lease + recover). The round trip's checks
run where a swap and a restore already happen: the swap's and the probe's in
tests/test_promote_lab.py, the restore's in tests/test_drain_lab.py (both on the lab).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import wait_until
from lab_helpers import (
    journal_rows,
    PROBE_CONTAINER as PROBE,
    exclusive_lab,
    node_transport,
    restore_seat,
    seat_cli,
    serving,
    state_env,
    timers_active,
)

from seat_console.node.transport import DockerExecTransport
from seat_console.core.profile import load_profile


def cli(lab, env, *args: str, profile: Path | None = None,
        timeout: float = 900) -> subprocess.CompletedProcess[str]:
    return seat_cli(profile or lab.profile_path, env, *args, timeout=timeout)


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    return state_env(tmp_path)


@pytest.fixture
def node(lab) -> DockerExecTransport:
    return node_transport(lab)


def container(lab, name: str) -> dict | None:
    with lab.docker_client() as client:
        from docker.errors import NotFound

        try:
            return client.containers.get(name).attrs
        except NotFound:
            return None


@pytest.fixture
def seat(lab, node, env) -> Iterator[dict]:
    """Exclusive lab lock; the resident's and timers' state before; afterwards, whatever
    happened: the probe stopped, the resident running and serving, the test's hold released,
    timers as before."""
    with exclusive_lab(lab, "swap tests stop the resident"):
        before = {"resident": container(lab, lab.resident_container),
                  "timers": timers_active(node, lab.timers)}
        assert before["resident"]["State"]["Running"], ("the resident is not running before "
                                                        "the test")
        try:
            yield before
        finally:
            restore_seat(lab, env, node, before["timers"])


def _hold(lab, env, ttl: str = "15m") -> dict:
    r = cli(lab, env, "hold", "--yes", "--ttl", ttl, "--reason", "swap test", "--json",
            timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    return json.loads(r.stdout)["hold"]


def _backport(lab, env) -> str:
    r = cli(lab, env, "build-backport", "--json", timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    return json.loads(r.stdout)["image_id"]


def test_swap_without_a_hold_is_refused_and_changes_nothing(lab, env):
    before = container(lab, lab.resident_container)
    probe_before = container(lab, PROBE)
    r = cli(lab, env, "swap", "--yes", timeout=120)
    assert r.returncode == 5, r.stdout + r.stderr
    assert "no active hold" in r.stderr and "nothing changed" in r.stderr
    after = container(lab, lab.resident_container)
    assert after["State"]["Running"] and after["State"]["StartedAt"] == before["State"]["StartedAt"]
    probe_after = container(lab, PROBE)
    assert (probe_after or {}).get("State") == (probe_before or {}).get("State")
    # the refusal is journaled, as a refused run that changed nothing
    ends = [r for r in journal_rows(env) if r["runbook"] == "swap" and r["kind"] == "end"]
    assert ends and ends[-1]["outcome"] == "refused"


def test_a_probe_that_cannot_start_is_restored_automatically(lab, env, tmp_path, seat):
    _backport(lab, env)
    text = lab.profile_path.read_text("utf-8").replace(
        '"--enforce-eager"', '"--enforce-eager", "--no-such-engine-flag"', 1)
    prof = tmp_path / "profile.toml"
    prof.write_text(text, "utf-8")
    assert "--no-such-engine-flag" in load_profile(prof).profile.swap.command
    _hold(lab, env)
    r = cli(lab, env, "swap", "--yes", "--json", profile=prof)
    assert r.returncode == 1, r.stdout + r.stderr[-3000:]       # failed, every change undone
    out = json.loads(r.stdout)
    assert out["outcome"] == "undone" and "exited" in out["error"]
    res = container(lab, lab.resident_container)
    assert res["State"]["Running"] and res["Id"] == seat["resident"]["Id"]
    assert serving(lab)
    probe = container(lab, PROBE)
    assert probe is not None and not probe["State"]["Running"]     # kept for its log
    fail = [r for r in journal_rows(env) if r["kind"] == "fail" and r["step"] == "start probe"
            or r["kind"] == "fail" and r["step"] == "probe serving"]
    assert fail and "no-such-engine-flag" in fail[0]["output"]     # the log tail is journaled


def test_kill_9_mid_swap_lease_restores_timers_and_recover_brings_the_resident_back(
        lab, env, node, seat):
    _backport(lab, env)
    ttl = 25
    h = _hold(lab, env, ttl=f"{ttl}s")
    t_hold = time.monotonic()
    p = subprocess.Popen([sys.executable, "-m", "seat_console.cli", "--profile",
                          str(lab.profile_path), "swap", "--yes"], stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, text=True, env=env)
    try:
        assert p.stdout is not None
        for line in p.stdout:
            if "begin     probe serving" in line:
                break
        else:
            pytest.fail("the swap ended before the probe started")
        os.kill(p.pid, signal.SIGKILL)
    finally:
        p.wait(timeout=30)
    assert p.returncode == -signal.SIGKILL
    assert not container(lab, lab.resident_container)["State"]["Running"]
    listing = cli(lab, env, "recover", timeout=60)
    assert listing.returncode == 4 and "unfinished swap run" in listing.stdout
    # the lease restores the timers by itself, console dead or not
    wait_until(lambda: time.monotonic() - t_hold > ttl + 3, ttl + 10, what="the lease expiry")
    wait_until(lambda: all(timers_active(node, h["stopped"]).values()), 60,
               what="the lease restarting the timers")
    r = cli(lab, env, "recover", "--undo", "--yes")
    assert r.returncode == 0, r.stdout + r.stderr[-3000:]
    res = container(lab, lab.resident_container)
    assert res["State"]["Running"] and res["Id"] == seat["resident"]["Id"]
    assert res["Image"] == lab.engine_image_id and serving(lab)
    assert not container(lab, PROBE)["State"]["Running"]
    assert cli(lab, env, "recover", timeout=60).returncode == 0   # nothing left unfinished
