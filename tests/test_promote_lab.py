"""Promote and its undo on the lab: real dockerd, systemd node, Alertmanager and vLLM on the
CPU, through the real CLI in child processes (issue 30, item 6).

One round trip: hold → swap (the backport candidate takes the seat) → probe it (a real run in
the run store, role ``probe``) → a PROMOTE-ABLE ``decide`` row citing that run journaled →
``promote --yes`` (the candidate is renamed and named the resident by the seat-state file; the
test's copy of the profile gets its new version) → ``restore`` has nothing to restore (the
promoted container is the resident) → ``promote --undo --yes`` (the old resident serves again,
same container, same image) → ``release``.

The test's own state and data dirs (``SEAT_CONSOLE_STATE_DIR`` / ``SEAT_CONSOLE_DATA_DIR`` under
``tmp_path``: the journal and ``seat.json`` live there and go with it) and its own copy of the
lab profile (``promote`` writes a new version of a writable profile; the lab's own file is never
touched). It holds ``.lab/disrupt.lock`` exclusively and, whatever happens, leaves the lab as
found: the original resident serving, no hold, the promoted container stopped and removed (it is
this test's artefact), timers as before.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from lab_helpers import (
    PROBE_CONTAINER as PROBE,
    exclusive_lab,
    node_transport,
    probe_has_per_request_server_truth,
    restore_seat,
    seat_cli,
    serving,
    state_env,
    timers_active,
)

from seat_console.actions.decide import record_decision
from seat_console.actions.journal import Journal
from seat_console.core.profile import load_profile


def container(lab, name: str) -> dict | None:
    from docker.errors import NotFound

    with lab.docker_client() as client:
        try:
            return client.containers.get(name).attrs
        except NotFound:
            return None


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    return state_env(tmp_path, data=True)


@pytest.fixture
def prof(lab, tmp_path: Path) -> Path:
    p = tmp_path / "profile.toml"
    p.write_text(lab.profile_path.read_text("utf-8"), "utf-8")
    return p


@pytest.fixture
def seat(lab, env, prof) -> Iterator[dict]:
    """Exclusive lab lock; afterwards, whatever happened: a promoted container this test made
    stopped and removed, the resident serving, the hold released, timers as before."""
    node = node_transport(lab)
    with exclusive_lab(lab, "promote tests change the seat's resident"):
        before = {"resident": container(lab, lab.resident_container),
                  "timers": timers_active(node, lab.timers), "promoted": []}
        assert before["resident"]["State"]["Running"], "the resident is not running"
        try:
            yield before
        finally:
            with lab.docker_client(timeout=90) as client:
                for cid in before["promoted"]:
                    from docker.errors import NotFound

                    try:
                        c = client.containers.get(cid)
                    except NotFound:
                        continue
                    if c.attrs["State"]["Running"]:
                        c.stop(timeout=10)
                    c.remove()
            restore_seat(lab, env, node, before["timers"], profile=prof)


def cli(prof: Path, env, *args: str, timeout: float = 900):
    return seat_cli(prof, env, *args, timeout=timeout)


def test_hold_swap_decide_promote_restore_undo_release(lab, env, prof, seat, tmp_path):
    original_profile = prof.read_text("utf-8")
    r = cli(prof, env, "build-backport", "--json", timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    cand_image = json.loads(r.stdout)["image_id"]
    r = cli(prof, env, "hold", "--yes", "--ttl", "20m", "--reason", "promote test", "--json",
            timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    # refused with the resident in the seat: nothing to promote
    r = cli(prof, env, "promote", "--yes", timeout=120)
    assert r.returncode == 5 and "holds the seat" in r.stderr, r.stdout + r.stderr
    r = cli(prof, env, "swap", "--yes", "--json")
    assert r.returncode == 0, r.stdout + r.stderr[-3000:]
    cand = container(lab, PROBE)
    seat["promoted"].append(cand["Id"])
    assert cand["State"]["Running"] and cand["Image"] == cand_image
    # the swap: the probe holds the seat, from the backport image by ID, its startup lines
    # read; the resident stopped and recorded by its ID and image ID
    out = json.loads(r.stdout)
    assert not container(lab, lab.resident_container)["State"]["Running"]
    models = httpx.get(f"{lab.vllm_url}/v1/models", timeout=5).json()["data"]
    assert [m["id"] for m in models] == [lab.served_model_name]
    assert out["probe_startup"]["kv_cache_tokens"] == 1_048_576
    assert out["probe_startup"]["device"] == "CPU"
    rec = out["facts"]["resident"]
    assert rec["image_id"] == lab.engine_image_id and rec["id"] == seat["resident"]["Id"]
    kinds = [(e.runbook, e.kind, e.step) for e in Journal(
        Path(env["SEAT_CONSOLE_STATE_DIR"]) / "journal.sqlite3").entries()]
    for step in ("record resident", "stop resident", "start probe", "probe serving"):
        assert ("swap", "verify", step) in kinds
    # refused without a decision, with the fix
    r = cli(prof, env, "promote", "--yes", timeout=120)
    assert r.returncode == 5 and "no decision in the journal" in r.stderr, r.stderr
    # a real probe of the candidate — the lab's probe engine runs with per-request metrics
    # (scripts/lab.py PROBE_ENGINE_FLAGS): its own figures beside the client's — then the
    # decision citing it
    run = probe_has_per_request_server_truth(prof, env, tmp_path)
    assert run["identity"]["container"]["image_id"] == cand_image
    j = Journal(Path(env["SEAT_CONSOLE_STATE_DIR"]) / "journal.sqlite3")
    try:
        # as `seat-console decide` journals it (a real decide needs a compare: ~15 min here)
        record_decision(j, {"decision": "PROMOTE-ABLE", "bracket_id": None,
                            "runs": [run["run_id"]], "report_sha256": "0" * 64,
                            "questions": [], "needs": ""})
    finally:
        j.close()
    dry = cli(prof, env, "promote", "--dry-run", timeout=120)
    assert dry.returncode == 0, dry.stdout + dry.stderr
    assert "write a new version of" in dry.stdout and "seat.json" in dry.stdout
    r = cli(prof, env, "promote", "--yes", "--json", timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr[-3000:]
    out = json.loads(r.stdout)
    name = out["resident"]
    assert name.startswith(f"{lab.resident_container}-promoted-")
    # the same container, renamed, still serving; the old resident stopped and kept
    promoted = container(lab, name)
    assert promoted["Id"] == cand["Id"] and promoted["State"]["Running"]
    assert container(lab, PROBE) is None
    old = container(lab, lab.resident_container)
    assert old["Id"] == seat["resident"]["Id"] and not old["State"]["Running"]
    models = httpx.get(f"{lab.vllm_url}/v1/models", timeout=5).json()["data"]
    assert [m["id"] for m in models] == [lab.served_model_name]
    sf = json.loads((Path(env["SEAT_CONSOLE_STATE_DIR"]) / "seat.json").read_text())
    assert sf["resident"]["name"] == name and sf["resident"]["image_id"] == cand_image
    assert sf["previous"]["id"] == seat["resident"]["Id"]
    assert load_profile(prof).profile.resident.container == name
    # restore treats the promoted container as the resident: nothing to restore
    r = cli(prof, env, "restore", "--yes", "--json", timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    doc = json.loads(r.stdout)
    assert doc["nothing_to_restore"] is True and name in doc["detail"]
    # the undo: the old resident back, the same container and image, answering
    r = cli(prof, env, "promote", "--undo", "--yes", "--json", timeout=900)
    assert r.returncode == 0, r.stdout + r.stderr[-3000:]
    old = container(lab, lab.resident_container)
    assert old["State"]["Running"] and old["Id"] == seat["resident"]["Id"]
    assert old["Image"] == lab.engine_image_id and serving(lab)
    assert "one completion answered" in json.dumps(json.loads(r.stdout)["steps"])
    promoted = container(lab, name)
    assert promoted is not None and not promoted["State"]["Running"]   # stopped, kept
    assert not (Path(env["SEAT_CONSOLE_STATE_DIR"]) / "seat.json").exists()
    assert prof.read_text("utf-8") == original_profile
    r = cli(prof, env, "release", "--yes", "--json", timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    rows = [(e.runbook, e.kind, e.step) for e in Journal(
        Path(env["SEAT_CONSOLE_STATE_DIR"]) / "journal.sqlite3").entries()]
    for step in ("check seat", "rename candidate", "write seat state", "write profile",
                 "verify serving"):
        assert ("promote", "verify", step) in rows
    for step in ("stop promoted", "start previous", "seat state back", "profile back"):
        assert ("promote-undo", "verify", step) in rows
