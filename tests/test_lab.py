"""The lab is really up: each component answers as the real thing, and ``up`` is idempotent.

These tests check the lab itself (``scripts/lab.py``), not the console: the engine answers on its
socket, the registry serves the engine image's manifest, Alertmanager's v2 API answers, systemd is
PID 1 in the node with the profile's timers, vLLM serves the tiny model from an image that has a
repo digest, a second ``up`` changes nothing, and ``stop``/``start`` take a component down and
bring it back.
"""

from __future__ import annotations

import json
import subprocess
import urllib.request
from pathlib import Path

import httpx
import pytest
from conftest import Lab, lab_command, lab_status, wait_until

pytestmark = pytest.mark.lab


def _get_json(url: str) -> object:
    r = httpx.get(url, timeout=10)
    assert r.status_code == 200, f"GET {url} -> {r.status_code} {r.text[:200]}"
    return r.json()


def _exec(lab: Lab, *argv: str) -> tuple[int, str]:
    with lab.docker_client() as client:
        res = client.containers.get(lab.node_container).exec_run(list(argv))
    return res.exit_code, res.output.decode("utf-8", "replace")


def test_docker_engine_answers_on_the_lab_socket(lab: Lab) -> None:
    with lab.docker_client() as client:
        assert client.ping() is True
        info = client.info()
    assert info["Driver"] == "overlay2"
    assert info["LiveRestoreEnabled"] is True
    assert Path(info["DockerRootDir"]) == Path(lab.state["dockerd"]["data_root"])
    assert lab.docker_socket.is_socket()


def test_registry_lists_the_engine_repository_and_serves_its_digest(lab: Lab) -> None:
    catalog = _get_json(f"{lab.registry_url}/v2/_catalog")
    assert "engine" in catalog["repositories"]
    tags = _get_json(f"{lab.registry_url}/v2/engine/tags/list")
    assert lab.engine_image_tag_ref.rsplit(":", 1)[1] in tags["tags"]
    req = urllib.request.Request(
        f"{lab.registry_url}/v2/engine/manifests/day0", method="HEAD",
        headers={"Accept": "application/vnd.docker.distribution.manifest.v2+json"})
    with urllib.request.urlopen(req, timeout=10) as r:
        served = r.headers["Docker-Content-Digest"]
    assert lab.engine_repo_digest == f"{lab.state['registry']['addr']}/engine@{served}"


def test_alertmanager_v2_status_answers(lab: Lab) -> None:
    status = _get_json(f"{lab.alertmanager_url}/api/v2/status")
    assert status["versionInfo"]["version"]
    assert status["cluster"]["status"] == "disabled"  # --cluster.listen-address= (no gossip)
    assert isinstance(_get_json(f"{lab.alertmanager_url}/api/v2/silences"), list)


def test_node_runs_systemd_as_pid1_with_the_profile_timers(lab: Lab) -> None:
    code, out = _exec(lab, "systemctl", "is-system-running")
    # "degraded" only by units other than the lab's (other tests' failed transient units).
    assert out.strip() in ("running", "degraded"), out
    _, failed = _exec(lab, "systemctl", "list-units", "--failed", "--plain", "--no-legend")
    assert not [u for u in lab.timers + lab.services if u in failed.split()], failed
    code, comm = _exec(lab, "cat", "/proc/1/comm")
    assert comm.strip() == "systemd"
    code, out = _exec(lab, "systemctl", "list-timers", "--all", "--output=json")
    assert code == 0
    listed = {t["unit"]: t for t in json.loads(out)}
    for timer in lab.timers:
        assert timer in listed, f"{timer} not in list-timers: {sorted(listed)}"
        assert listed[timer]["activates"] == timer.removesuffix(".timer") + ".service"
    for timer in lab.timers:
        code, out = _exec(lab, "systemctl", "show", "-p", "ActiveState,UnitFileState,Persistent",
                          timer)
        props = dict(line.split("=", 1) for line in out.splitlines() if "=" in line)
        assert props["ActiveState"] == "active" and props["UnitFileState"] == "enabled", props
        assert props["Persistent"] == ("yes" if timer in lab.persistent_timers else "no")
    assert lab.persistent_timers == ("seat-conformance-full.timer",)


def test_a_timer_service_does_something_observable(lab: Lab) -> None:
    service = lab.services[0]
    name = service.removesuffix(".service")
    log = f"{lab.job_log_dir}/{name}.log"
    _, before = _exec(lab, "sh", "-c", f"cat {log} 2>/dev/null || true")
    code, out = _exec(lab, "systemctl", "start", service)  # oneshot: returns when it finished
    assert code == 0, out
    _, after = _exec(lab, "cat", log)
    # A run the timer fired just before ours (after a hold test restored it) may have written
    # its "start" line before we read ``before``; our start then joins that run. Either way a
    # run that started before the last "done" finished after we started the service.
    old_n, lines = len(before.splitlines()), after.splitlines()
    done = [i for i, line in enumerate(lines) if f"{name} done" in line]
    assert done and done[-1] >= old_n, (before, after)
    assert any(f"{name} start" in line for line in lines[:done[-1]]), after
    code, out = _exec(lab, "systemctl", "show", "-p", "Result,ExecMainStatus", service)
    assert "Result=success" in out and "ExecMainStatus=0" in out


def test_vllm_serves_the_tiny_model(lab: Lab) -> None:
    assert httpx.get(f"{lab.vllm_url}/health", timeout=10).status_code == 200
    models = _get_json(f"{lab.vllm_url}/v1/models")
    assert [m["id"] for m in models["data"]] == [lab.served_model_name]
    assert models["data"][0]["max_model_len"] == lab.max_model_len
    metrics = httpx.get(f"{lab.vllm_url}/metrics", timeout=10).text
    assert "vllm:kv_cache_usage_perc" in metrics
    cfg = json.loads((lab.model_dir / "config.json").read_text())
    assert (cfg["hidden_size"], cfg["num_hidden_layers"], cfg["num_attention_heads"],
            cfg["num_key_value_heads"], cfg["head_dim"]) == (64, 2, 4, 2, 32)
    assert (lab.model_dir / "model.safetensors").is_file()
    r = httpx.post(f"{lab.vllm_url}/v1/completions", timeout=60, json={
        "model": lab.served_model_name, "prompt": "The seat", "max_tokens": 4,
        "ignore_eos": True})
    assert r.status_code == 200
    assert r.json()["usage"]["completion_tokens"] == 4
    assert "KV cache size:" in lab.vllm_logs()


def test_resident_container_has_image_id_and_repo_digest(lab: Lab) -> None:
    with lab.docker_client() as client:
        c = client.containers.get(lab.resident_container)
        image = client.images.get(c.attrs["Image"])
    assert c.status == "running"
    assert c.attrs["Config"]["Image"] == lab.engine_repo_digest  # run by digest
    assert image.id == lab.engine_image_id
    assert lab.engine_repo_digest in image.attrs["RepoDigests"]
    assert c.attrs["HostConfig"]["NetworkMode"] == "host"
    mounts = {m["Destination"]: m["RW"] for m in c.attrs["Mounts"]}
    assert mounts[str(lab.model_dir)] is False


def test_profile_validates_and_points_at_the_lab(lab: Lab) -> None:
    from seat_console.core.profile import load_profile

    cp = subprocess.run([__import__("sys").executable, "-m", "seat_console", "profile", "--check",
                         str(lab.profile_path)], capture_output=True, text=True, timeout=60,
                        check=False)
    assert cp.returncode == 0, cp.stderr
    p = load_profile(lab.profile_path).profile
    assert (p.node.transport, p.node.exec_container, p.node.docker_host) == (
        "docker-exec", lab.node_container, lab.docker_host)
    assert str(p.seat.endpoint).rstrip("/") == lab.vllm_url
    assert str(p.alertmanager.url).rstrip("/") == lab.alertmanager_url
    assert p.resident.container == lab.resident_container and p.resident.path == lab.model_dir
    assert tuple(p.timers.all_units) == lab.timers
    assert (p.seat.tensor_parallel_size, p.node.gpus) == (1, ["0"])
    assert (p.seat.max_model_len, p.seat.max_num_seqs, p.seat.block_size) == (
        lab.max_model_len, lab.max_num_seqs, lab.block_size)


def _lab_processes(lab: Lab) -> dict[str, list[int]]:
    """PIDs of lab processes found by their lab-unique paths (to count duplicates)."""
    mod = __import__("conftest")._lab_module()
    s = lab.state
    return {
        "dockerd": mod.find_pids(s["dockerd"]["data_root"], "dockerd"),
        "registry": mod.find_pids(s["registry"]["config"], "docker-registry"),
        "alertmanager": mod.find_pids(s["alertmanager"]["config"], "prometheus-alertmanager"),
    }


def test_up_again_is_a_no_op(lab: Lab) -> None:
    with lab.docker_client() as client:
        before = {c.name: (c.id, c.attrs["State"]["StartedAt"])
                  for c in client.containers.list(all=True)}
    procs_before = _lab_processes(lab)
    assert all(len(p) == 1 for p in procs_before.values()), procs_before
    # Read now: earlier tests may have restarted components (new PIDs) since the session began.
    state_before = json.loads(lab.state_file.read_text())
    assert state_before["dockerd"]["pid"] == procs_before["dockerd"][0]
    cp = lab_command("up")
    assert cp.returncode == 0, cp.stdout + cp.stderr
    assert "already running" in cp.stdout and "started pid" not in cp.stdout
    assert _lab_processes(lab) == procs_before
    with lab.docker_client() as client:
        after = {c.name: (c.id, c.attrs["State"]["StartedAt"])
                 for c in client.containers.list(all=True)}
    assert after == before
    assert sorted(n for n in after if n in (lab.node_container, lab.resident_container)) == [
        lab.node_container, lab.resident_container]
    state = json.loads(lab.state_file.read_text())
    for comp in ("dockerd", "registry", "alertmanager"):
        assert state[comp]["pid"] == state_before[comp]["pid"], comp
    assert state["vllm"]["container_id"] == state_before["vllm"]["container_id"]


def test_status_shows_a_stopped_component_and_start_brings_it_back(lab: Lab, lab_stop) -> None:
    with lab_stop("alertmanager"):
        st = lab_status()
        assert st["alertmanager"]["healthy"] is False
        assert st["alertmanager"]["stopped_by_lab"] is True
        assert all(st[c]["healthy"] for c in ("dockerd", "registry", "node", "vllm")), st
        with pytest.raises(httpx.TransportError):
            httpx.get(f"{lab.alertmanager_url}/-/ready", timeout=3)
    st = lab_status()
    assert st["alertmanager"]["healthy"] is True and st["alertmanager"]["stopped_by_lab"] is False


def test_engine_down_leaves_containers_running(lab: Lab, lab_stop) -> None:
    """dockerd runs with --live-restore: with the engine stopped, vLLM still serves."""
    with lab_stop("dockerd"):
        st = lab_status()
        assert st["dockerd"]["healthy"] is False
        assert st["node"]["healthy"] is False  # reached through the engine (docker exec)
        assert httpx.get(f"{lab.vllm_url}/health", timeout=10).status_code == 200
    with lab.docker_client() as client:
        names = {c.name for c in client.containers.list()}
    assert {lab.node_container, lab.resident_container} <= names
    wait_until(lambda: lab_status()["node"]["healthy"], 60, what="node healthy again")


def test_node_stop_and_start_brings_systemd_and_timers_back(lab: Lab, lab_stop) -> None:
    with lab_stop("node"):
        st = lab_status()
        assert st["node"]["healthy"] is False
        with lab.docker_client() as client:
            assert client.containers.get(lab.node_container).status == "exited"
    _, out = _exec(lab, "systemctl", "is-system-running")
    assert out.strip() == "running"  # a fresh boot: no failed units at all
    _, out = _exec(lab, "systemctl", "show", "-p", "ActiveState", *lab.timers)
    assert out.split() == ["ActiveState=active"] * len(lab.timers)
