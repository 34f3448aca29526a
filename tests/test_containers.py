"""Containers: docker time and digest helpers (unit, recorded events from docker 20.10), and
against the lab's real dockerd and registry: image ID vs repo digest checked against the
registry's manifest, state across a stop/start, events for changes made outside the console,
reconnect with ``since`` after a drop, and the engine going away."""

from __future__ import annotations

import json
import os
import subprocess
import time
from datetime import UTC, datetime
from pathlib import Path

import httpx
import pytest
from conftest import wait_until

from seat_console.sources.containers import ContainerSource, ContainersReading, pick_repo_digest
from seat_console.node.docker import EventWatcher, event_from_api, parse_docker_time
from seat_console.core.base import Unavailable

DATA = Path(__file__).parent / "data" / "containers"


# -- unit --------------------------------------------------------------------------------------
@pytest.mark.parametrize("raw,expected", [
    ("2026-11-29T13:05:57.011463287Z", datetime(2026, 11, 29, 13, 5, 57, 11463, tzinfo=UTC)),
    ("2026-11-29T13:05:57Z", datetime(2026, 11, 29, 13, 5, 57, tzinfo=UTC)),
    ("2026-11-29T15:05:57.5+02:00", datetime(2026, 11, 29, 13, 5, 57, 500000, tzinfo=UTC)),
    ("0001-01-01T00:00:00Z", None),     # docker's zero time: never
    ("", None), (None, None),
])
def test_parse_docker_time(raw: str | None, expected: datetime | None) -> None:
    assert parse_docker_time(raw) == expected


def test_parse_docker_time_rejects_other_text() -> None:
    with pytest.raises(ValueError):
        parse_docker_time("yesterday")


def test_pick_repo_digest_matches_repository() -> None:
    digests = ["mirror.example/engine@sha256:aaa", "127.0.0.1:15000/engine@sha256:bbb"]
    assert pick_repo_digest("127.0.0.1:15000/engine:day0", digests) == digests[1]
    assert pick_repo_digest("127.0.0.1:15000/engine@sha256:bbb", digests) == digests[1]
    assert pick_repo_digest("other:1", digests) == digests[0]
    assert pick_repo_digest("x:1", []) is None


def test_events_recorded_from_docker_20_10() -> None:
    raw = json.loads((DATA / "docker-20.10-events.json").read_text())
    evs = [event_from_api(e) for e in raw]
    assert [e.action for e in evs] == ["create", "start", "kill", "kill", "die", "stop",
                                       "destroy"]
    die = evs[4]
    assert die.exit_code == 137 and die.actor_name == "svc-rec" and die.type == "container"
    assert die.at.tzinfo is not None and die.time_nano == 1795958135688319165
    assert evs[0].image == raw[0]["Actor"]["Attributes"]["image"]
    assert event_from_api({"nonsense": True}) is None


def test_the_engine_is_asked_for_every_change_and_no_exec_event() -> None:
    """The watcher's ``event`` filter: the engine matches each name as a prefix (it holds
    ``health_status``), so no watched name may be a prefix of an ignored action, and every
    action of the recorded event stream that is a change is asked for."""
    from seat_console.node.docker import IGNORED_ACTIONS, WATCHED_ACTIONS

    assert not any(i.startswith(w) for w in WATCHED_ACTIONS for i in IGNORED_ACTIONS)
    assert "health_status" in WATCHED_ACTIONS
    raw = json.loads((DATA / "docker-20.10-events.json").read_text())
    for e in raw:
        action = e["Action"]
        if action.split(":", 1)[0] not in IGNORED_ACTIONS:
            assert any(action.startswith(w) for w in WATCHED_ACTIONS), action


def test_changes_seen_counts_kept_changes_only() -> None:
    """The count the TUI's wake-up compares (tests/test_poll_wake.py): changes kept, not the
    exec events of the console's own ``docker exec``s, not a replay after a reconnect."""
    from seat_console.core.profile import load_profile
    from seat_console.node.context import NodeContext

    raw = json.loads((DATA / "docker-20.10-events.json").read_text())
    watcher = EventWatcher(lambda: None)
    assert watcher.changes_seen == 0
    exec_event = {**raw[0], "Action": "exec_start: systemctl show", "timeNano":
                  raw[0]["timeNano"] + 1}
    for e in (*raw, exec_event, *raw):   # the second pass: replayed, dropped
        watcher._handle(e)
    assert watcher.changes_seen == len(raw) == 7 and watcher.status().ignored == 1
    ctx = NodeContext(load_profile(None))
    assert ctx.docker_changes_seen() is None       # no watcher built: nothing to compare
    ctx.watcher()
    assert ctx.docker_changes_seen() is None       # built, not running: nothing either


# -- the lab's engine --------------------------------------------------------------------------
def _docker(lab, *args: str) -> subprocess.CompletedProcess[str]:
    """The docker CLI against the lab engine: changes made *outside* the console."""
    return subprocess.run(lab.docker_argv(*args), capture_output=True, text=True, timeout=120,
                          check=True, env={"PATH": "/usr/sbin:/usr/bin:/sbin:/bin"})


@pytest.fixture
def scratch(lab):
    """A throwaway container (from the node image, running ``sleep``) on the lab engine."""
    name = f"seat-console-test-{os.getpid()}"
    _docker(lab, "run", "-d", "--name", name, lab.node_image_id, "sleep", "3600")
    try:
        yield name
    finally:
        subprocess.run(lab.docker_argv("rm", "-f", name), capture_output=True, timeout=120)


def _read(src: ContainerSource) -> ContainersReading:
    r = src.read()
    assert isinstance(r, ContainersReading), r
    return r


def test_resident_identity_matches_the_registry(lab) -> None:
    """Image ID = digest of the image config; repo digest = digest of the registry manifest —
    both checked against what the lab's registry serves for the tag."""
    src = ContainerSource(lab.docker_host, {"resident": lab.resident_container},
                          watch_events=False)
    c = _read(src).get(lab.resident_container)
    src.close()
    assert c is not None and c.running and c.state == "running"
    assert c.started_at is not None and c.started_at.tzinfo is not None
    assert c.restart_count == 0 and c.health is None
    repo, tag = lab.engine_image_tag_ref.rsplit(":", 1)
    name = repo.split("/", 1)[1]
    r = httpx.get(f"{lab.registry_url}/v2/{name}/manifests/{tag}", headers={
        "Accept": "application/vnd.docker.distribution.manifest.v2+json"})
    r.raise_for_status()
    manifest_digest = r.headers["Docker-Content-Digest"]
    config_digest = r.json()["config"]["digest"]
    assert c.image_id == config_digest == lab.engine_image_id
    assert c.repo_digest == f"{repo}@{manifest_digest}" == lab.engine_repo_digest
    assert manifest_digest != config_digest


def test_imported_image_has_no_repo_digest(lab, scratch) -> None:
    src = ContainerSource(lab.docker_host, {"probe": scratch}, watch_events=False)
    c = _read(src).get(scratch)
    src.close()
    assert c is not None and c.image_id == lab.node_image_id
    assert c.repo_digests == () and c.repo_digest is None


def test_absent_container(lab) -> None:
    src = ContainerSource(lab.docker_host, {"probe": "seat-console-no-such-container"},
                          watch_events=False)
    r = _read(src)
    src.close()
    assert r.containers[0].state == "absent" and not r.containers[0].running


def test_state_and_events_across_stop_start(lab, scratch) -> None:
    src = ContainerSource(lab.docker_host, {"probe": scratch})
    try:
        first = _read(src).get(scratch)
        assert first is not None and first.running
        wait_until(lambda: src.watcher.status().connected, what="event stream connected")
        # a stop made outside the console
        _docker(lab, "stop", "-t", "1", scratch)
        stopped = _read(src).get(scratch)
        assert stopped is not None and stopped.state == "exited" and not stopped.running
        assert stopped.exit_code == 137          # sleep as PID 1 ignores SIGTERM: killed
        assert stopped.finished_at is not None and stopped.finished_at >= first.started_at
        seen = wait_until(lambda: [e for e in src.watcher.changes()
                                   if e.actor_name == scratch and e.action == "stop"],
                          what="the stop event")
        assert not seen[0].by_console
        actions = [e.action for e in src.watcher.foreign_changes() if e.actor_name == scratch]
        assert {"kill", "die", "stop"} <= set(actions)
        die = next(e for e in src.watcher.changes() if e.actor_name == scratch
                   and e.action == "die")
        assert die.exit_code == 137
        # a start the console announces first is attributed to the console
        src.watcher.expect(scratch, ["start"])
        _docker(lab, "start", scratch)
        again = _read(src).get(scratch)
        assert again is not None and again.running
        assert again.started_at > first.started_at
        assert again.restart_count == 0          # a manual start is not a policy restart
        start = wait_until(lambda: [e for e in src.watcher.changes()
                                    if e.actor_name == scratch and e.action == "start"],
                           what="the start event")
        assert start[-1].by_console
        r = _read(src)
        assert any(e.actor_name == scratch and e.action == "stop" for e in r.recent_changes)
        assert r.events is not None and r.events.connected
        # exec noise (the docker-exec transport's own polls) is not a change, and the engine
        # does not even send it (the watcher's event filter): events come in order, so once
        # the pause after the exec is in, the exec's would have been
        _docker(lab, "exec", scratch, "true")
        _docker(lab, "pause", scratch)
        wait_until(lambda: any(e.actor_name == scratch and e.action == "pause"
                               for e in src.watcher.changes()), what="the pause after the exec")
        _docker(lab, "unpause", scratch)
        assert not any(e.action.startswith("exec") for e in src.watcher.changes())
        assert src.watcher.status().ignored == 0
    finally:
        src.close()
    assert not src.watcher.alive


def test_reconnect_uses_since_no_loss_no_duplicates(lab, scratch) -> None:
    watcher = EventWatcher(lambda: ContainerSource(lab.docker_host, {})._new_client(),
                           backoff_s=(1.5, 1.5)).start()
    try:
        wait_until(lambda: watcher.status().connected, what="event stream connected")
        _docker(lab, "pause", scratch)
        wait_until(lambda: any(e.action == "pause" for e in watcher.changes()), what="pause")
        watcher.reconnect()
        wait_until(lambda: not watcher.status().connected, what="disconnected")
        # happens while the watcher is disconnected (1.5 s back-off)
        _docker(lab, "unpause", scratch)
        wait_until(lambda: watcher.status().reconnects >= 1 and watcher.status().connected,
                   what="reconnected")
        wait_until(lambda: any(e.action == "unpause" for e in watcher.changes()),
                   what="the unpause made during the drop, replayed via since=")
        keys = [(e.time_nano, e.actor_id, e.action) for e in watcher.changes()]
        assert len(keys) == len(set(keys))      # the boundary event was not duplicated
        assert [e.action for e in watcher.changes()].count("pause") == 1
        assert watcher.status().last_error == "reconnect requested"
    finally:
        watcher.close()
    assert not watcher.alive


def test_dockerd_down_then_back(lab, lab_stop, scratch) -> None:
    src = ContainerSource(lab.docker_host, {"probe": scratch})
    try:
        assert _read(src).get(scratch).running
        wait_until(lambda: src.watcher.status().connected, what="event stream connected")
        with lab_stop("dockerd"):
            r = src.read()
            assert isinstance(r, Unavailable) and r.kind == "unreachable"
            assert lab.docker_host in r.reason
            wait_until(lambda: not src.watcher.status().connected, what="stream dropped")
        wait_until(lambda: src.watcher.status().connected and src.watcher.status().reconnects,
                   timeout=60, what="event stream reconnected")
        back = _read(src).get(scratch)
        assert back is not None and back.running       # live-restore kept it running
        _docker(lab, "stop", "-t", "1", scratch)
        wait_until(lambda: any(e.actor_name == scratch and e.action == "stop"
                               for e in src.watcher.changes()), what="stop seen after reconnect")
    finally:
        src.close()


def test_reconnect_back_off_doubles_and_is_capped_counted_by_attempts() -> None:
    """The back-off was only 'tested' by a lab test that never counted connection attempts (a
    watcher retrying in a tight loop passed it). Count them: with back-off (0.1, 0.4) s the
    attempts are ~0.1, 0.2, 0.4, 0.4 s apart — about 5 in 1.2 s, never dozens."""
    from seat_console.node.docker import EventWatcher

    attempts: list[float] = []

    def unreachable_engine():  # noqa: ANN202 - a docker client factory that always fails
        attempts.append(time.monotonic())
        raise ConnectionRefusedError("engine down")

    watcher = EventWatcher(unreachable_engine, backoff_s=(0.1, 0.4)).start()
    time.sleep(1.25)
    watcher.close()
    gaps = [b - a for a, b in zip(attempts, attempts[1:])]
    assert 3 <= len(attempts) <= 7, attempts
    assert gaps[0] >= 0.09 and gaps[1] >= 0.18, gaps      # doubles...
    assert all(g < 0.4 + 0.15 for g in gaps), gaps        # ...up to the cap
    assert watcher.status().last_error == "ConnectionRefusedError: engine down"
    assert not watcher.status().connected


# -- the engine's version answer kept a minute (issue 33) -------------------------------------
class _CountingDocker:
    """A docker client stand-in: counts ``version`` calls; no container exists."""

    def __init__(self) -> None:
        from types import SimpleNamespace

        from docker.errors import NotFound

        self.versions = 0

        def version():  # noqa: ANN202
            self.versions += 1
            return {"Version": "20.10.24", "ApiVersion": "1.41"}

        def inspect_container(name):  # noqa: ANN001, ANN202
            raise NotFound(f"no container {name}")

        self.api = SimpleNamespace(version=version, inspect_container=inspect_container)

    def close(self) -> None:
        pass


def test_the_engine_version_is_kept_while_the_client_lives(monkeypatch) -> None:
    import seat_console.sources.containers as C

    made: list[_CountingDocker] = []

    def make() -> _CountingDocker:
        made.append(_CountingDocker())
        return made[-1]

    src = C.ContainerSource("tcp://docker.test:2375", {"resident": "seat-resident"},
                            watch_events=False, make_client=make)   # type: ignore[arg-type]
    first = src.read()
    second = src.read()
    assert first.engine_version == second.engine_version == "20.10.24"
    assert len(made) == 1 and made[0].versions == 1          # kept: one version call
    assert second.containers[0].state == "absent"             # the containers read every time
    monkeypatch.setattr(C, "VERSION_MAX_AGE_S", 0.0)
    src.read()
    assert made[0].versions == 2                               # read again when old
    src._drop_client()                                         # a failure drops the client
    monkeypatch.setattr(C, "VERSION_MAX_AGE_S", 60.0)
    src.read()
    assert len(made) == 2 and made[1].versions == 1            # and the answer with it


# -- an image's inspect kept while docker reports no change (issue 33) -------------------------
class _ImageDocker:
    """A docker client stand-in: one running container on image ``sha256:img``; counts the
    image inspects."""

    def __init__(self) -> None:
        from types import SimpleNamespace

        self.images = 0
        self.digests: list[str] = []

        def inspect_container(name):  # noqa: ANN001, ANN202
            return {"Id": "c" * 64, "Name": f"/{name}", "Image": "sha256:img",
                    "State": {"Status": "running", "Running": True,
                              "StartedAt": "2026-12-05T10:00:00.000000000Z"},
                    "Config": {"Image": "seat/resident:1"}, "RestartCount": 0}

        def inspect_image(image_id):  # noqa: ANN001, ANN202
            self.images += 1
            return {"Id": image_id, "RepoTags": ["seat/resident:1"],
                    "RepoDigests": list(self.digests)}

        self.api = SimpleNamespace(version=lambda: {"Version": "27.0", "ApiVersion": "1.46"},
                                   inspect_container=inspect_container,
                                   inspect_image=inspect_image)

    def close(self) -> None:
        pass


class _Watcher:
    """An event watcher stand-in: ``seen`` changes so far, ``connected`` or not."""

    def __init__(self) -> None:
        self.seen, self.connected = 0, True

    def start(self) -> None:
        pass

    def status(self):  # noqa: ANN201
        from seat_console.node.docker import EventStreamStatus

        return EventStreamStatus(connected=self.connected, since=datetime.now(UTC),
                                 reconnects=0, last_error=None, events_seen=self.seen)

    def changes(self) -> tuple:
        return ()


def test_an_image_is_inspected_again_only_after_docker_reported_a_change() -> None:
    import seat_console.sources.containers as C

    d, w = _ImageDocker(), _Watcher()
    src = C.ContainerSource("tcp://docker.test:2375", {"resident": "seat-resident"},
                            watcher=w, make_client=lambda: d)   # type: ignore[arg-type]
    src.read()
    src.read()
    assert d.images == 1                       # no change reported: the answer kept
    d.digests = ["seat/resident@sha256:" + "a" * 64]
    w.seen += 1                                 # a push event
    r = src.read()
    assert d.images == 2 and r.containers[0].repo_digests == tuple(d.digests)
    w.connected = False                         # the stream down: nothing says what changed
    src.read()
    src.read()
    assert d.images == 4
