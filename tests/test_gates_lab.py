"""The gates and the release that degrades (issue 30, items 4 and 7), on the lab's real parts:
docker (who holds the seat), the systemd node (timers, lease), Alertmanager (the silence).

* ``release`` with the lab's Alertmanager stopped: the timers are started and the lease
  cancelled anyway, the silence named with the time it lapses, exit 4 ("left partly changed");
  once Alertmanager is back a second ``release`` expires the silence and ends it.
* the candidate in the seat (the resident stopped, a container under the probe's name
  running): ``compare`` refused naming the state and "restore first"; ``release`` refused
  naming "restore or promote", ``--force --reason`` goes on and is journaled; ``restore``'s
  plan says first that it takes the seat down without a hold.

Each test leaves the lab as it found it: Alertmanager running, the resident serving, no hold,
every timer armed as before (``lab_stop`` puts the component back; ``finally`` blocks the rest).
"""

from __future__ import annotations

import json
from lab_helpers import PROBE_CONTAINER, node_transport, seat_cli, state_env, timers_active

from seat_console.actions.journal import Journal


def _hold_units(node) -> list[str]:
    res = node.run(["systemctl", "list-units", "--all", "--plain", "--no-legend", "seat-hold-*"])
    assert res.ok, res.failure
    return [line.split()[0] for line in res.stdout.splitlines() if line.strip()]


def _put_back(lab, env, node, before) -> None:
    seat_cli(lab.profile_path, env, "release", "--yes", "--force", "--reason", "test cleanup")
    for unit, was in before.items():
        if was and not timers_active(node, [unit])[unit]:
            node.run(["systemctl", "start", unit])
    for u in _hold_units(node):
        if u.endswith(".timer"):
            node.run(["systemctl", "stop", u])


def test_release_with_alertmanager_down_restarts_the_timers_and_names_the_silence(
        lab, lab_stop, tmp_path) -> None:
    node = node_transport(lab)
    env = state_env(tmp_path)
    before = timers_active(node, lab.timers)
    assert any(before.values()), "the lab's timers should be armed before the test"
    try:
        r = seat_cli(lab.profile_path, env, "hold", "--yes", "--ttl", "15m", "--json")
        assert r.returncode == 0, r.stdout + r.stderr
        h = json.loads(r.stdout)["hold"]
        assert h["silence_id"] and h["stopped"]
        assert not any(timers_active(node, h["stopped"]).values())
        with lab_stop("alertmanager"):
            dry = seat_cli(lab.profile_path, env, "release", "--dry-run")
            assert dry.returncode == 0, dry.stdout + dry.stderr       # planned, not refused
            assert f"lapses by itself at {h['expires_at']}" in dry.stdout
            rel = seat_cli(lab.profile_path, env, "release", "--yes", "--json")
            assert rel.returncode == 4, rel.stdout + rel.stderr      # left partly changed
            out = json.loads(rel.stdout)
            assert out["outcome"] == "partial"
            # the timers are armed again, the lease is gone
            assert all(timers_active(node, h["stopped"]).values())
            assert h["lease_unit"] not in _hold_units(node)
            # exactly one thing remains, named with the time it lapses
            assert len(out["remaining"]) == 1
            left = out["remaining"][0]
            assert left.startswith("expire silence: not done (Alertmanager at ")
            assert (f"silence {h['silence_id']} is left in place and lapses by itself at "
                    f"{h['expires_at']}") in left
            assert out["facts"]["silence_left"]["id"] == h["silence_id"]
        # Alertmanager back: the silence is still there (it was never expired) ...
        st = json.loads(seat_cli(lab.profile_path, env, "hold", "--status", "--json").stdout)
        assert st["hold"]["state"] == "release-partial"
        assert st["silence"]["state"] == "active"
        # ... and a second release ends it
        again = seat_cli(lab.profile_path, env, "release", "--yes", "--json")
        assert again.returncode == 0, again.stdout + again.stderr
        st = json.loads(seat_cli(lab.profile_path, env, "hold", "--status", "--json").stdout)
        assert st["hold"] is None
    finally:
        _put_back(lab, env, node, before)


def _journal_swap(env: dict[str, str], lab) -> None:
    """A swap in the test's journal that recorded the lab's resident (what ``restore`` reads)."""
    from pathlib import Path

    with lab.docker_client() as client:
        c = client.containers.get(lab.resident_container)
        rec = {"id": c.id, "name": c.name, "image_id": c.attrs["Image"],
               "image_ref": c.attrs["Config"]["Image"], "models": [lab.served_model_name],
               "stop_timeout_s": 10}
    with Journal(Path(env["SEAT_CONSOLE_STATE_DIR"]) / "journal.sqlite3") as j:
        j.append(run_id="swap-lab-1", runbook="swap", kind="start", outcome="started")
        j.append(run_id="swap-lab-1", runbook="swap", kind="end", outcome="done",
                 facts={"resident": rec})


def test_compare_and_release_are_refused_while_the_candidate_holds_the_seat(
        lab, lab_stop, tmp_path) -> None:
    node = node_transport(lab)
    env = state_env(tmp_path, data=True)
    before = timers_active(node, lab.timers)
    with lab.docker_client() as client:
        for old in client.containers.list(all=True, filters={"name": f"^{PROBE_CONTAINER}$"}):
            assert not old.attrs["State"]["Running"], f"{PROBE_CONTAINER} is running already"
            # a probe kept by an earlier swap: kept under its finished name, as the next swap
            # would keep it (never removed)
            from seat_console.actions.swap import _kept_name

            old.rename(_kept_name(PROBE_CONTAINER, old))
    try:
        with lab_stop("vllm"):   # the resident stopped ...
            with lab.docker_client() as client:   # ... and a container under the probe's name
                client.containers.run(lab.node_image_id, name=PROBE_CONTAINER, detach=True,
                                      entrypoint=["sleep", "900"],
                                      labels={"org.seat-console.test": "gates"})
            try:
                state = ("the candidate seat-probe holds the seat (running; the resident "
                         f"{lab.resident_container} is stopped)")
                cmp = seat_cli(lab.profile_path, env, "compare", "--dry-run")
                assert cmp.returncode == 5, cmp.stdout + cmp.stderr
                assert ("✗ seat state: compare starts from the resident in the seat (it is "
                        f"arm A), but {state} — run `seat-console restore --keep-hold` first") in cmp.stdout
                cmp = seat_cli(lab.profile_path, env, "compare", "--yes")
                assert cmp.returncode == 5 and "refused, nothing changed: compare starts " \
                    "from the resident" in cmp.stderr, cmp.stdout + cmp.stderr

                r = seat_cli(lab.profile_path, env, "hold", "--yes", "--ttl", "15m", "--json")
                assert r.returncode == 0, r.stdout + r.stderr
                stopped = json.loads(r.stdout)["hold"]["stopped"]
                rel = seat_cli(lab.profile_path, env, "release", "--yes")
                assert rel.returncode == 5, rel.stdout + rel.stderr
                assert (f"refused, nothing changed: {state} and no promote made it the "
                        "resident: releasing the hold now would hand the fleet's timers and "
                        "alerts a seat serving the candidate — run `seat-console restore`"
                        ) in rel.stderr
                assert not any(timers_active(node, stopped).values())   # nothing changed
                assert seat_cli(lab.profile_path, env, "release", "--yes",
                                "--force").returncode == 2             # --force needs a reason
                forced = seat_cli(lab.profile_path, env, "release", "--yes", "--force",
                                  "--reason", "gates lab test", "--json")
                assert forced.returncode == 0, forced.stdout + forced.stderr
                assert all(timers_active(node, stopped).values())
                rows = json.loads(seat_cli(lab.profile_path, env, "journal", "--json").stdout)
                warn = [x for x in rows["rows"] if x["runbook"] == "release"
                        and x["kind"] == "warn" and x["step"] == "seat state"]
                assert len(warn) == 1 and warn[0]["outcome"].startswith(
                    "FORCED (reason: gates lab test): released while the candidate seat-probe")

                # no hold now: restore's plan says first that the seat goes down unheld
                _journal_swap(env, lab)
                dry = seat_cli(lab.profile_path, env, "restore", "--dry-run")
                assert dry.returncode == 0, dry.stdout + dry.stderr
                first = dry.stdout.splitlines()[1]
                assert first.startswith("  – ⚠ the restore takes the seat down WITHOUT a hold "
                                        "(no hold is in effect): it stops the candidate and "
                                        "starts the resident"), dry.stdout
                # --keep-hold with no hold to keep: refused before anything is stopped
                keep = seat_cli(lab.profile_path, env, "restore", "--keep-hold", "--dry-run")
                assert keep.returncode == 5, keep.stdout + keep.stderr
                assert "there is no active hold to keep" in keep.stdout, keep.stdout
                keep = seat_cli(lab.profile_path, env, "restore", "--keep-hold", "--yes")
                assert keep.returncode == 5, keep.stdout + keep.stderr
                with lab.docker_client() as client:     # nothing changed
                    assert client.containers.get(PROBE_CONTAINER).attrs["State"]["Running"]
                bad = seat_cli(lab.profile_path, env, "restore", "--keep-hold", "--defer",
                               f"{lab.timers[0]}=30m", "--dry-run")
                assert bad.returncode == 2 and "--keep-hold releases nothing" in bad.stderr, \
                    bad.stdout + bad.stderr
            finally:
                with lab.docker_client() as client:
                    client.containers.get(PROBE_CONTAINER).remove(force=True)
    finally:
        _put_back(lab, env, node, before)
