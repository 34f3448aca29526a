"""The runbook's state on the lab (issue 30): ``runbook next`` at fit journals the verdict, a
hold shows as done with backport next, a release closes the cycle; a console killed (-9) inside
a hold leaves a state that any new ``seat-console runbook --json`` rebuilds the same: the hold
stage failed with the ``seat-console recover`` fix.

Real CLI in child processes against the lab's systemd node and Alertmanager; the lab's
outage lock held exclusively (``exclusive``, via ``baseline``), the node left as found.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from test_hold_lab import active_timers, baseline, cli, exclusive, hold_units, node  # noqa: F401



@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    return {**os.environ, "SEAT_CONSOLE_STATE_DIR": str(tmp_path / "state"),
            "SEAT_CONSOLE_DATA_DIR": str(tmp_path / "data"), "PYTHONUNBUFFERED": "1"}


def state(lab, env) -> dict:
    r = cli(lab, env, "runbook", "--json")
    assert r.returncode in (0, 3), r.stdout + r.stderr
    d = json.loads(r.stdout)
    d.pop("read_at")
    return d


def stages(d: dict) -> dict[str, dict]:
    return {s["name"]: s for s in d["stages"]}


def fit_and_image(lab, env) -> None:
    """The fit stage through ``runbook next``; the lab's profile declares no
    ``[candidate.requires]``, so the image stage is skipped (nothing to check in the image) and
    the next stage is the hold."""
    r = cli(lab, env, "runbook", "next", "--yes", "--json")
    assert r.returncode == 0, r.stdout + r.stderr
    assert json.loads(r.stdout)["verdict"] == "fits"
    d = state(lab, env)
    assert stages(d)["fit"]["status"] == "done", stages(d)["fit"]
    assert stages(d)["image"]["status"] == "skipped", stages(d)["image"]
    assert "[candidate.requires]" in stages(d)["image"]["reason"]
    assert d["next"]["name"] == "hold"


def test_hold_then_next_is_backport_and_release_closes_the_cycle(lab, node, env,  # noqa: F811
                                                                  baseline) -> None:  # noqa: F811
    fit_and_image(lab, env)
    r = cli(lab, env, "runbook", "next", "--yes", "--json")   # runs `hold`
    assert r.returncode == 0, r.stdout + r.stderr
    out = json.loads(r.stdout)
    assert out["outcome"] == "done" and out["next"]["name"] == "backport"
    d = state(lab, env)
    h = stages(d)["hold"]
    assert h["status"] == "done" and h["operator"] and h["evidence"]["hold"]
    # the command to paste carries the profile this one ran with (the stage's own stays bare)
    assert d["next"]["name"] == "backport" and d["next"]["command"] == \
        f"seat-console --profile {os.path.abspath(lab.profile_path)} build-backport"
    assert stages(d)["backport"]["command"] == "seat-console build-backport"
    assert d["seat_holder"] == "resident"

    rel = cli(lab, env, "release", "--yes")
    assert rel.returncode == 0, rel.stdout + rel.stderr
    assert rel.stdout.splitlines()[-1].startswith("next: fit — the cycle closed")
    d = state(lab, env)
    # the cycle is closed: no next stage, only the line that says how a new cycle starts
    assert d["cycle_closed_at"] and d["next"]["name"] is None, d["next"]
    assert "cycle closed" in d["next"]["line"], d["next"]
    assert stages(d)["release"]["status"] == "done"
    assert active_timers(node, lab.timers) == baseline


def test_kill9_inside_a_hold_a_new_console_shows_the_same_stage(lab, node, env,  # noqa: F811
                                                                 baseline) -> None:  # noqa: F811
    fit_and_image(lab, env)
    p = subprocess.Popen([sys.executable, "-m", "seat_console.cli", "--profile",
                          str(lab.profile_path), "runbook", "next", "--yes"],
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
    seen = []
    assert p.stdout is not None
    for line in p.stdout:
        seen.append(line)
        if "verify    stop seat-conformance-smoke.timer" in line:
            os.kill(p.pid, signal.SIGKILL)
            break
    p.wait(30)
    assert p.returncode == -signal.SIGKILL, "".join(seen)
    try:
        first = state(lab, env)
        h = stages(first)["hold"]
        assert h["status"] == "failed" and h["command"] == "seat-console recover", h
        assert "never ended" in h["reason"] and first["next"]["name"] == "hold"
        assert state(lab, env) == first   # another console, the same state
        # runbook next offers recover, not a second hold
        r = cli(lab, env, "runbook", "next", "--dry-run")
        assert "runbook: next stage recover" in r.stdout and "hold" in r.stdout, r.stdout
    finally:
        r = cli(lab, env, "recover", "--undo", "--yes")
        assert r.returncode == 0, r.stdout + r.stderr
    assert active_timers(node, lab.timers) == baseline and hold_units(node) == []
    d = state(lab, env)
    assert stages(d)["hold"]["status"] == "failed" and d["next"]["name"] == "hold"
    assert stages(d)["hold"]["command"] == "seat-console hold"
