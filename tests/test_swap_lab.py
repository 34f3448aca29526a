"""Seat swap and restore on the lab: real dockerd, systemd node, Alertmanager and vLLM on the
CPU, through the real CLI in child processes (kill -9 is a real kill).

Each test that changes the seat holds the lab's ``.lab/disrupt.lock`` EXCLUSIVELY and, whatever
happens, leaves the resident serving (``seat`` fixture). vLLM restarts here take ~30-60 s each,
so there are four tests: refused without a hold (changes nothing), one round trip, one probe
that cannot start (restored automatically), one kill -9 mid-swap (lease + recover).
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from conftest import wait_until
from lab_helpers import (
    PROBE_CONTAINER as PROBE,
    exclusive_lab,
    node_transport,
    probe_metrics_profile,
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


def journal_rows(env) -> list[dict]:
    db = sqlite3.connect(Path(env["SEAT_CONSOLE_STATE_DIR"]) / "journal.sqlite3")
    db.row_factory = sqlite3.Row
    rows = [dict(r) for r in db.execute("SELECT * FROM entries ORDER BY seq")]
    db.close()
    return rows


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


def test_swap_to_the_backport_probe_then_restore(lab, env, node, seat, tmp_path):
    image_id = _backport(lab, env)
    h = _hold(lab, env)
    # the lab's probe engine runs with per-request metrics (scripts/lab.py PROBE_ENGINE_FLAGS)
    prof = probe_metrics_profile(lab, tmp_path)
    r = cli(lab, env, "swap", "--yes", "--json", profile=prof)
    assert r.returncode == 0, r.stdout + r.stderr[-3000:]
    out = json.loads(r.stdout)
    # the probe holds the seat, from the backport image by ID, and its startup lines were read
    probe = container(lab, PROBE)
    assert probe["State"]["Running"] and probe["Image"] == image_id
    assert not container(lab, lab.resident_container)["State"]["Running"]
    models = httpx.get(f"{lab.vllm_url}/v1/models", timeout=5).json()["data"]
    assert [m["id"] for m in models] == [lab.served_model_name]
    assert out["probe_startup"]["kv_cache_tokens"] == 1_048_576
    assert out["probe_startup"]["device"] == "CPU"
    rec = out["facts"]["resident"]
    assert rec["image_id"] == lab.engine_image_id and rec["id"] == seat["resident"]["Id"]
    _probe_has_per_request_server_truth(lab, env, prof, tmp_path)
    # restore: same container, same image ID, answers; hold released; probe kept
    r = cli(lab, env, "restore", "--yes", "--json")
    assert r.returncode == 0, r.stdout + r.stderr[-3000:]
    res = container(lab, lab.resident_container)
    assert res["State"]["Running"] and res["Id"] == seat["resident"]["Id"]
    assert res["Image"] == lab.engine_image_id
    done = json.loads(r.stdout)
    assert "one completion answered" in json.dumps(done["steps"])
    probe = container(lab, PROBE)
    assert probe is not None and not probe["State"]["Running"]   # stopped and kept
    st = json.loads(cli(lab, env, "hold", "--status", "--json", timeout=60).stdout)
    assert st["hold"] is None or st["hold"]["state"] == "released"
    assert timers_active(node, h["stopped"]) == {u: True for u in h["stopped"]}
    kinds = [(r["runbook"], r["kind"], r["step"]) for r in journal_rows(env)]
    for step in ("record resident", "stop resident", "start probe", "probe serving"):
        assert ("swap", "verify", step) in kinds
    for step in ("stop probe", "start resident", "release hold"):
        assert ("restore", "verify", step) in kinds


def _probe_has_per_request_server_truth(lab, env, prof: Path, tmp_path: Path) -> None:
    """Issue 35 on the probe engine (``--enable-per-request-metrics``): a short probe keeps
    the engine's queue time and TTFT beside the client's per request in ``requests.jsonl``;
    the report shows the client − engine distribution and 0 token mismatches (~10 s)."""
    data = {**env, "SEAT_CONSOLE_DATA_DIR": str(tmp_path / "data")}
    r = cli(lab, data, "probe", "--phase", "single-stream", "--json", profile=prof,
            timeout=300)
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
    rep = cli(lab, data, "report", "--json", s["path"], profile=prof, timeout=120)
    assert rep.returncode == 0, rep.stdout[-2000:] + rep.stderr[-2000:]
    doc = json.loads(rep.stdout)
    assert doc["consistency"] == [], doc["consistency"]       # re-derived from requests.jsonl
    (row,) = doc["phases"][0]["rows"]
    assert row["server"]["with_metrics"] == 4 and row["server"]["cmd_n"] == 4, row["server"]
    assert row["server"]["token_mismatches"] == 0, row["server"]
    md = cli(lab, data, "report", s["path"], profile=prof, timeout=120).stdout
    line = next(x for x in md.splitlines() if x.startswith(f"| {row['arm']} | {row['run']} | 4 |"))
    assert line.endswith("(4) | 0 |") and "n/a" not in line, line   # p50 / p95 (n), 0 mismatches


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
