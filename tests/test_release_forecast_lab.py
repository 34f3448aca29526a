"""Release sees every timer (issue 17): on the lab's real systemd node, a monotonic timer
(``seat-conformance-smoke.timer``, ``OnUnitActiveSec=120s``) kept stopped past its interval
fires the moment it is started — the release names it with the time before starting it, can
keep it stopped until a chosen time (a transient timer on the node), and the deferral can be
cancelled (the timer is then started, and systemd runs its service at once, as forecast).

Holds the lab's outage lock exclusively; the fixture leaves every timer active and no
seat-hold-* unit behind."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest
from conftest import wait_until
from lab_helpers import exclusive_lab, node_transport, seat_cli, state_env, timers_active

from seat_console.sources.timers import _machine_time, parse_show_blocks

SMOKE = "seat-conformance-smoke.timer"
SMOKE_SVC = "seat-conformance-smoke.service"
# The lab's unit says OnUnitActiveSec=120s; the test shortens it with a runtime drop-in (removed
# afterwards) so waiting out one interval costs seconds of CI time, not two minutes.
INTERVAL_S = 12
DROPIN_DIR = "/run/systemd/system/seat-conformance-smoke.timer.d"
DROPIN = f"{DROPIN_DIR}/zz-test-short-interval.conf"


def _svc_started(node, svc: str) -> datetime | None:
    res = node.run(["systemctl", "show", "--timestamp=unix", "-p", "InactiveExitTimestamp",
                    "--", svc])
    assert res.ok, res.failure
    return _machine_time(parse_show_blocks(res.stdout)[0].get("InactiveExitTimestamp"))


def _seat_hold_units(node) -> list[str]:
    res = node.run(["systemctl", "list-units", "--all", "--plain", "--no-legend", "seat-hold-*"])
    assert res.ok, res.failure
    return [line.split()[0] for line in res.stdout.splitlines() if line.strip()]


def _short_interval(node) -> None:
    """Shorten the smoke timer's OnUnitActiveSec with a runtime drop-in and let it fire once,
    so its last trigger is fresh and the interval is ``INTERVAL_S``."""
    for argv in (["mkdir", "-p", DROPIN_DIR],
                 ["sh", "-c", f"printf '[Timer]\\nOnUnitActiveSec=\\nOnUnitActiveSec={INTERVAL_S}s\\n'"
                              f" > {DROPIN}"],
                 ["systemctl", "daemon-reload"]):
        res = node.run(argv)
        assert res.ok, res.failure
    t0 = datetime.now(UTC).replace(microsecond=0)
    assert node.run(["systemctl", "start", SMOKE_SVC]).ok
    wait_until(lambda: (s := _svc_started(node, SMOKE_SVC)) is not None and s >= t0, 30,
               what=f"{SMOKE_SVC} to run once under the short interval")


@pytest.fixture
def guarded(lab, tmp_path) -> Iterator[tuple]:
    node = node_transport(lab)
    env = state_env(tmp_path)
    with exclusive_lab(lab, "release forecast test stops the timers"):
        before = timers_active(node, lab.timers)
        assert _seat_hold_units(node) == [], "a seat-hold unit is left from before"
        _short_interval(node)
        try:
            yield node, env, before
        finally:
            node.run(["rm", "-f", DROPIN])
            node.run(["systemctl", "daemon-reload"])
            seat_cli(lab.profile_path, env, "release", "--cancel-deferred", "--yes")
            seat_cli(lab.profile_path, env, "release", "--yes")
            for unit, was in before.items():
                if was and not timers_active(node, [unit])[unit]:
                    node.run(["systemctl", "start", unit])
            for u in _seat_hold_units(node):
                node.run(["systemctl", "stop", u])


def test_release_names_the_monotonic_timer_that_fires_at_once_and_defers_it(lab, guarded
                                                                             ) -> None:
    node, env, before = guarded
    assert before.get(SMOKE), f"{SMOKE} must be active before the test"
    r = seat_cli(lab.profile_path, env, "hold", "--yes", "--ttl", "15m", "--json")
    assert r.returncode == 0, r.stdout + r.stderr
    assert not timers_active(node, [SMOKE])[SMOKE]
    last = _svc_started(node, SMOKE_SVC)
    assert last is not None
    due = last + timedelta(seconds=INTERVAL_S)
    # wait (at most the interval) until the smoke timer's interval has passed while stopped
    wait_until(lambda: datetime.now(UTC) > due + timedelta(seconds=2), INTERVAL_S + 30,
               interval=1.0, what=f"{SMOKE}'s OnUnitActiveSec={INTERVAL_S}s to pass")

    dry = seat_cli(lab.profile_path, env, "release", "--dry-run", "--json")
    assert dry.returncode == 0, dry.stdout + dry.stderr
    plan = json.loads(dry.stdout)
    fc = plan["forecast"][SMOKE]
    assert fc["fires_at_once"] is True, fc
    hit = [t for t in fc["triggers"] if t["at_once"]]
    assert [t["trigger"] for t in hit] == [f"OnUnitActiveSec={INTERVAL_S}s"]
    want = due.strftime("%Y-%m-%dT%H:%M:%SZ")
    assert hit[0]["elapse"] == want
    line = next(s["text"] for s in plan["steps"] if s["step"] == f"start {SMOKE}")
    assert f"{SMOKE} fires at once when started" in line and want in line
    text = seat_cli(lab.profile_path, env, "release", "--dry-run")
    assert f"{SMOKE} fires at once when started: OnUnitActiveSec={INTERVAL_S}s elapsed at {want}" \
        in text.stdout
    assert not timers_active(node, [SMOKE])[SMOKE]           # the dry run changed nothing

    rel = seat_cli(lab.profile_path, env, "release", "--yes", "--json",
                   "--defer", f"{SMOKE}=10m")
    assert rel.returncode == 0, rel.stdout + rel.stderr
    out = json.loads(rel.stdout)
    d = out["deferred"][SMOKE]
    at = datetime.fromisoformat(d["at"].replace("Z", "+00:00"))
    assert timedelta(minutes=9) < at - datetime.now(UTC) <= timedelta(minutes=10, seconds=5)
    assert not timers_active(node, [SMOKE])[SMOKE]           # kept stopped
    assert d["unit"] in _seat_hold_units(node)                 # the scheduled start is armed
    for unit, was in before.items():
        if unit != SMOKE and was:
            assert timers_active(node, [unit])[unit], f"{unit} not restarted by the release"
    # the smoke service did not run: the timer was never started
    assert _svc_started(node, SMOKE_SVC) == last

    # cancelling the deferral starts it now; systemd then runs the service at once, as forecast
    t0 = datetime.now(UTC).replace(microsecond=0)
    c = seat_cli(lab.profile_path, env, "release", "--cancel-deferred", "--yes", "--json")
    assert c.returncode == 0, c.stdout + c.stderr
    assert timers_active(node, [SMOKE])[SMOKE]
    wait_until(lambda: d["unit"] not in _seat_hold_units(node), 20,
               what=f"{d['unit']} gone after the cancel")
    fired = wait_until(lambda: (s := _svc_started(node, SMOKE_SVC)) and s >= t0 and s, 20,
                       what=f"{SMOKE_SVC} to run right after {SMOKE} was started")
    assert fired - t0 < timedelta(seconds=10)
    assert json.loads(c.stdout)["outcome"] == "done"
