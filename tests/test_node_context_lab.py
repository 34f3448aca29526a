"""One node context shared by the app's sources and its actions, and the docker event watcher
telling the console's own container changes (also another process's journaled runbook) from
someone else's — against the lab's real dockerd, systemd node and Alertmanager.

Nothing here changes the seat: the hold key's plan is only read (the modal is declined), and the
container changes are made on a throwaway container (``sleep`` from the node image), so the
lab's shared lock suffices.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from conftest import wait_until

from seat_console.actions import hold as hold_mod
from seat_console.node.attribution import BEFORE_S
from seat_console.actions.journal import Journal
from seat_console.tui.app import SeatConsoleApp
from seat_console.tui.panels import PanelSpec
from seat_console.node.context import NodeContext
from seat_console.core.profile import load_profile
from seat_console.widgets.actionlog import ActionLogPanel
from seat_console.widgets.confirm import ConfirmScreen
from seat_console.widgets.services import ContainersPanel, SilencesPanel, TimersPanel


async def _wait(pilot, pred, what: str, limit: int = 3000) -> None:
    for _ in range(limit):
        if pred():
            return
        await pilot.pause(0.02)
    raise AssertionError(f"timed out waiting for {what}")


async def test_app_sources_and_the_hold_share_one_node_context(lab, tmp_path: Path,
                                                               monkeypatch) -> None:
    monkeypatch.setenv("SEAT_CONSOLE_STATE_DIR", str(tmp_path / "state"))
    seen: list[NodeContext] = []
    real = hold_mod.build_hold

    def spy(nctx, *a, **kw):
        seen.append(nctx)
        return real(nctx, *a, **kw)

    monkeypatch.setattr(hold_mod, "build_hold", spy)
    loaded = load_profile(str(lab.profile_path))
    panels = [PanelSpec("seat_console.sources.timers:make_source", TimersPanel),
              PanelSpec("seat_console.sources.silences:make_source", SilencesPanel),
              PanelSpec("seat_console.sources.containers:make_source", ContainersPanel),
              PanelSpec("seat_console.actions.actionlog:make_source", ActionLogPanel,
                        uses_readings=True)]
    app = SeatConsoleApp(loaded, interval=0.5, panels=panels, watch_terminal=False)
    async with app.run_test(size=(160, 60)) as pilot:
        await _wait(pilot, lambda: all(app.states[k].reading is not None
                                       for k in ("timers", "silences", "containers")),
                    "first readings")
        timers = app.states["timers"].source
        silences = app.states["silences"].source
        containers = app.states["containers"].source
        assert timers.transport is app.node.transport
        assert silences.client is app.node.alertmanager
        assert containers.watcher is app.node.watcher() and containers.watcher.alive
        await pilot.press("H")
        await _wait(pilot, lambda: app.screen.id == "hold-options", "the TTL/reason question")
        await pilot.press("enter")                        # the profile's TTL, no reason
        await _wait(pilot, lambda: isinstance(app.screen, ConfirmScreen), "the plan modal")
        assert seen and all(n is app.node for n in seen)
        assert seen[0].transport is timers.transport      # the hold verifies what the panel reads
        await pilot.press("n")                            # declined: nothing changes
    watcher = app.node.watcher()
    app.close_sources()
    assert not watcher.alive                              # NodeContext.close on exit


@pytest.fixture
def scratch(lab):
    """A throwaway container (the node image running ``sleep``) on the lab engine."""
    name = f"seat-console-attr-{os.getpid()}"
    subprocess.run(lab.docker_argv("run", "-d", "--name", name, lab.node_image_id, "sleep",
                                   "3600"), check=True, capture_output=True, timeout=120)
    try:
        yield name
    finally:
        subprocess.run(lab.docker_argv("rm", "-f", name), capture_output=True, timeout=120)


CHILD = textwrap.dedent("""
    import sys
    import docker
    from seat_console.actions.journal import Journal
    from seat_console.actions.runbook import Check, Runbook, Step

    host, name = sys.argv[1], sys.argv[2]

    def apply(ctx):
        client = docker.DockerClient(base_url=host, version="auto", timeout=60)
        try:
            client.containers.get(name).restart(timeout=1)
        finally:
            client.close()
        return "restarted"

    step = Step("restart " + name, lambda ctx: Check(True, "restart " + name), apply,
                lambda ctx: "running again", acts_on=[name])
    res = Runbook("swap-like", [step], journal=Journal()).run()
    print(res.run_id)
    sys.exit(0 if res.ok else 1)
""")


def _restarts(watcher, name: str) -> list:
    return [e for e in watcher.changes() if e.actor_name == name and e.action == "restart"]


def test_a_journaled_change_in_another_process_is_the_consoles_a_bare_restart_is_not(
        lab, scratch, tmp_path: Path) -> None:
    state = tmp_path / "state"
    env = {**os.environ, "SEAT_CONSOLE_STATE_DIR": str(state)}
    Journal(state / "journal.sqlite3").close()     # an empty journal: nothing is the console's
    nctx = NodeContext(load_profile(str(lab.profile_path)),
                       journal_path=state / "journal.sqlite3")
    watcher = nctx.watcher().start()
    try:
        wait_until(lambda: watcher.status().connected, what="event stream connected")
        # 1. someone restarts the container by hand: foreign
        subprocess.run(lab.docker_argv("restart", "-t", "1", scratch), check=True,
                       capture_output=True, timeout=60)
        wait_until(lambda: _restarts(watcher, scratch), what="the bare restart's event")
        bare_done = time.monotonic()
        mine = [e for e in watcher.changes() if e.actor_name == scratch]
        assert {"kill", "die", "start", "restart"} <= {e.action for e in mine}
        assert not any(e.by_console for e in mine), [(e.action, e.by) for e in mine]
        # keep the journaled run's begin row clear of the bare restart's window
        time.sleep(max(0.0, BEFORE_S + 1 - (time.monotonic() - bare_done)))
        # 2. a journaled runbook in ANOTHER process (like `seat-console swap --yes` in another
        # shell) restarts it: this process's watcher attributes it to that run
        child = subprocess.run([sys.executable, "-c", CHILD, lab.docker_host, scratch],
                               env=env, capture_output=True, text=True, timeout=60)
        assert child.returncode == 0, child.stdout + child.stderr
        run_id = child.stdout.strip().splitlines()[-1]
        wait_until(lambda: len(_restarts(watcher, scratch)) >= 2,
                   what="the journaled restart's event")
        ours = [e for e in watcher.changes() if e.actor_name == scratch][len(mine):]
        assert {"kill", "die", "start", "restart"} <= {e.action for e in ours}
        assert all(e.by_console for e in ours), [(e.action, e.by) for e in ours]
        j = Journal(state / "journal.sqlite3")
        who = f"{j.user}@{j.host}"
        begin = next(e for e in j.entries(run_id=run_id) if e.kind == "begin")
        j.close()
        label = ours[-1].by or ""
        assert f"swap-like run {run_id}, step 'restart {scratch}'" in label
        assert who in label and "journal seq" in label
        assert begin.facts["acts_on"] == [scratch]
        # the bare restart's events stay foreign; foreign_changes() lists only them
        foreign = [e for e in watcher.foreign_changes() if e.actor_name == scratch]
        assert [e.time_nano for e in foreign] == [e.time_nano for e in mine]
    finally:
        nctx.close()
    assert not watcher.alive


def test_swap_restore_and_compare_steps_declare_the_containers_they_change(lab, tmp_path: Path
                                                                         ) -> None:
    from seat_console.actions import swap as swap_mod

    loaded = load_profile(str(lab.profile_path))
    resident, probe = loaded.profile.resident.container, loaded.profile.swap.container
    nctx = NodeContext(loaded)
    j = Journal(tmp_path / "j.sqlite3")
    try:
        rb = swap_mod.build_swap(nctx, j)
        assert {s.name: s.targets(rb.ctx) for s in rb.steps} == {
            "record resident": [], "stop resident": [resident], "start probe": [probe],
            "probe serving": [probe]}
        rr = swap_mod.build_restore(nctx, j, facts={"resident": {"name": "seat-old-name"}})
        assert {s.name: s.targets(rr.ctx) for s in rr.steps} == {
            "stop probe": [probe], "start resident": ["seat-old-name"], "release hold": [],
            "prune kept probes": []}
    finally:
        j.close()
        nctx.close()


def test_the_probe_monitor_reads_through_the_apps_context(lab) -> None:
    """The probe TUI passes the app's context: its interference monitor watches the shared
    event watcher (and does not close it when the probe ends) and uses the shared transport
    and Alertmanager client."""
    from seat_console.probe.engine_counters import KvCapacity
    from seat_console.probe.run import HoldInfo, Preflight, default_monitor_factory

    loaded = load_profile(str(lab.profile_path))
    nctx = NodeContext(loaded)
    pre = Preflight(endpoint="http://127.0.0.1:1", model="m", identity={}, kv=KvCapacity(),
                    hold=HoldInfo(True, "test hold", silence_id="no-such-silence"),
                    seat_containers=set())
    try:
        mon = default_monitor_factory(loaded, pre, context=nctx)(lambda: None)
        assert mon.watcher is nctx.watcher() and mon.watcher.alive
        assert mon.transport is nctx.transport
        mon.close_watcher()
        assert nctx.watcher().alive                    # the context's owner closes it
        own = default_monitor_factory(loaded, pre)(lambda: None)
        assert own.watcher is not nctx.watcher() and own.transport is not nctx.transport
        own.close_watcher()
        wait_until(lambda: not own.watcher.alive, 30, what="the probe's own watcher to stop")
    finally:
        nctx.close()
    assert not nctx.watcher().alive
