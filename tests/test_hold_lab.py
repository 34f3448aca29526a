"""The hold, release and recovery against the lab's real systemd node and Alertmanager,
through the real CLI in child processes (so kill -9 is a real kill).

Every test here changes the lab (stops timers, places silences), so it holds the lab's
``.lab/disrupt.lock`` EXCLUSIVELY (``exclusive`` fixture) and leaves the node as it found it.
Leases use short TTLs (10–20 s) so the kill -9 matrix waits for the node itself to restore.
"""

from __future__ import annotations

import fcntl
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from conftest import _flock, wait_until
from lab_helpers import journal_rows

from seat_console.node.transport import DockerExecTransport
from seat_console.sources.timers import TimersReading, read_timers

TTL = 10
"""Seconds: the kill -9 matrix waits for the lease to elapse (5 kill points). It must outlast
the hold's steps after the lease is scheduled (three timer stops and the silence: ~2 s on the
loaded lab, journaled), so the kill lands before the lease elapses."""


@pytest.fixture
def exclusive(lab) -> Iterator[None]:
    """The lab's outage lock held exclusively for the test (it changes timers and silences)."""
    _flock(lab.lab_dir, fcntl.LOCK_EX, "hold tests change the node's timers")
    try:
        yield
    finally:
        _flock(lab.lab_dir, fcntl.LOCK_SH, "lab")


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    return {**os.environ, "SEAT_CONSOLE_STATE_DIR": str(tmp_path / "state"),
            "PYTHONUNBUFFERED": "1"}


@pytest.fixture
def node(lab) -> DockerExecTransport:
    return DockerExecTransport(lab.node_container, docker_host=lab.docker_host)


def cli(lab, env, *args: str, profile: Path | None = None,
        timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "seat_console.cli", "--profile",
                           str(profile or lab.profile_path), *args], capture_output=True,
                          text=True, env=env, timeout=timeout, check=False)


def active_timers(node, units) -> dict[str, bool]:
    r = read_timers(node, list(units))
    assert isinstance(r, TimersReading), r
    return {t.unit: t.active for t in r.timers}


def hold_units(node) -> list[str]:
    """Transient seat-hold-* units loaded on the node (a leftover lease shows here)."""
    res = node.run(["systemctl", "list-units", "--all", "--plain", "--no-legend", "seat-hold-*"])
    assert res.ok, res.failure
    return [line.split()[0] for line in res.stdout.splitlines() if line.strip()]


def silences_of(lab, hold_id: str) -> list[dict]:
    data = httpx.get(f"{lab.alertmanager_url}/api/v2/silences", timeout=5).json()
    return [s for s in data if f"[{hold_id}]" in s.get("comment", "")]


def hold_id_of(env) -> str:
    for r in reversed(journal_rows(env)):
        h = json.loads(r["facts"]).get("hold")
        if h:
            return h["hold_id"]
    raise AssertionError("no hold in the journal")


@pytest.fixture
def baseline(lab, node, exclusive) -> Iterator[dict[str, bool]]:
    """The timers' state before the test; afterwards, restart any the test left stopped."""
    before = active_timers(node, lab.timers)
    assert hold_units(node) == [], "a seat-hold lease is left on the node from before"
    yield before
    for unit, was in before.items():
        if was and not active_timers(node, [unit])[unit]:
            node.run(["systemctl", "start", unit])
    for u in hold_units(node):
        node.run(["systemctl", "stop", u])


# -- round trip --------------------------------------------------------------------------------
def test_hold_status_release_round_trip_and_journal(lab, node, env, baseline) -> None:
    dry = cli(lab, env, "hold", "--dry-run", "--ttl", "10m")
    assert dry.returncode == 0, dry.stderr
    assert "schedule lease" in dry.stdout and "create silence" in dry.stdout
    assert active_timers(node, lab.timers) == baseline and hold_units(node) == []

    r = cli(lab, env, "hold", "--yes", "--ttl", "10m", "--reason", "round trip", "--json")
    assert r.returncode == 0, r.stdout + r.stderr
    out = json.loads(r.stdout)
    h = out["hold"]
    assert out["outcome"] == "done" and h["active"]
    assert set(h["stopped"]) == {u for u, a in baseline.items() if a}
    assert all(not a for a in active_timers(node, lab.timers).values())
    assert hold_units(node) == [h["lease_unit"], h["lease_unit"].replace(".timer", ".service")] \
        or h["lease_unit"] in hold_units(node)

    st = json.loads(cli(lab, env, "hold", "--status", "--json").stdout)
    assert st["hold"]["hold_id"] == h["hold_id"] and st["lease"]["armed"]
    assert st["silence"]["state"] == "active" and 590 <= st["hold"]["remaining_s"] <= 600
    # a second hold is refused; nothing changes
    again = cli(lab, env, "hold", "--yes", "--ttl", "10m")
    assert again.returncode == 5 and "already active" in again.stderr

    rel = cli(lab, env, "release", "--yes")
    assert rel.returncode == 0, rel.stdout + rel.stderr
    assert active_timers(node, lab.timers) == baseline
    assert hold_units(node) == []
    (sil,) = silences_of(lab, h["hold_id"])
    assert sil["status"]["state"] == "expired"      # expired, still listed (not deleted)
    assert cli(lab, env, "release", "--yes").returncode == 5   # no hold: says so
    assert cli(lab, env, "journal", "--verify").returncode == 0

    # an edited journal row is found and named
    path = Path(env["SEAT_CONSOLE_STATE_DIR"]) / "journal.sqlite3"
    subprocess.run(["sqlite3", str(path), "DROP TRIGGER entries_no_update; UPDATE entries SET "
                    "outcome = 'nothing happened' WHERE seq = 3;"], check=True, timeout=30)
    bad = cli(lab, env, "journal", "--verify")
    assert bad.returncode == 1 and "row 3" in bad.stdout and "edited" in bad.stdout


# -- kill -9 -------------------------------------------------------------------------------------
KILL_POINTS = ["verify    schedule lease", "verify    stop seat-conformance-smoke.timer",
               "verify    stop seat-conformance-full.timer",
               "verify    stop fleet-remediation-cycle.timer", "verify    silence seat"]


def finished_before_kill(env) -> bool:
    """Whether the killed hold still wrote its end row (possible when killed right after the
    last step's verify line): then it is a complete hold, not an unfinished one."""
    return any(r["kind"] == "end" and r["runbook"] == "hold" for r in journal_rows(env))


def hold_killed_at(lab, env, marker: str, ttl: int = TTL) -> float:
    """Run ``hold --yes --ttl`` in a child and SIGKILL it right after ``marker`` is printed;
    returns the monotonic time the lease was scheduled (about when it elapses minus ttl)."""
    p = subprocess.Popen([sys.executable, "-m", "seat_console.cli", "--profile",
                          str(lab.profile_path), "hold", "--yes", "--ttl", f"{ttl}s"],
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
    t_lease, seen = None, []
    assert p.stdout is not None
    for line in p.stdout:
        seen.append(line)
        if "begin     schedule lease" in line:
            t_lease = time.monotonic()
        if marker in line:
            os.kill(p.pid, signal.SIGKILL)
            break
    p.wait(30)
    assert p.returncode == -signal.SIGKILL, "".join(seen)
    assert t_lease is not None
    return t_lease


@pytest.mark.parametrize("marker", KILL_POINTS, ids=[m.split()[-1] for m in KILL_POINTS])
def test_kill9_the_lease_restores_by_itself(lab, node, env, baseline, marker) -> None:
    t0 = hold_killed_at(lab, env, marker)
    hid = hold_id_of(env)
    assert hold_units(node) != []               # the lease is on the node, armed
    wait_until(lambda: hold_units(node) == [], timeout=TTL + 25, interval=0.5,
               what="the lease to elapse")
    assert time.monotonic() - t0 >= TTL - 2     # it was the lease, at its time, not earlier
    wait_until(lambda: active_timers(node, lab.timers) == baseline, timeout=10, interval=0.5,
               what="every timer the hold stopped to be active again")
    wait_until(lambda: all(s["status"]["state"] == "expired" for s in silences_of(lab, hid)),
               timeout=10, what="the silence to lapse")
    assert hold_units(node) == []
    # a later console sees the unfinished run, and recover closes it
    rec = cli(lab, env, "recover")
    if finished_before_kill(env):
        # killed after the silence's verify but after the end row too: a complete hold, lapsed
        assert rec.returncode == 0
        st = json.loads(cli(lab, env, "hold", "--status", "--json").stdout)
        assert st["hold"]["state"] == "active" and not st["hold"]["active"]   # lapsed
        assert cli(lab, env, "release", "--yes").returncode == 0
    else:
        assert rec.returncode == 4 and "unfinished hold run" in rec.stdout, rec.stdout
        done = cli(lab, env, "recover", "--undo", "--yes")
        assert done.returncode == 0, done.stdout + done.stderr
    assert cli(lab, env, "recover").returncode == 0
    assert active_timers(node, lab.timers) == baseline


@pytest.mark.parametrize("marker", KILL_POINTS, ids=[m.split()[-1] for m in KILL_POINTS])
def test_kill9_then_recover_undo_at_once(lab, node, env, baseline, marker) -> None:
    hold_killed_at(lab, env, marker, ttl=120)
    hid = hold_id_of(env)
    if finished_before_kill(env):   # the end row made it out before the kill: a hold in place
        r = cli(lab, env, "release", "--yes")
    else:
        r = cli(lab, env, "recover", "--undo", "--yes")
    assert r.returncode == 0, r.stdout + r.stderr
    assert active_timers(node, lab.timers) == baseline
    assert hold_units(node) == []
    assert all(s["status"]["state"] == "expired" for s in silences_of(lab, hid))
    assert cli(lab, env, "journal", "--verify").returncode == 0


def test_kill9_then_recover_complete_then_release(lab, node, env, baseline) -> None:
    hold_killed_at(lab, env, KILL_POINTS[1], ttl=120)
    r = cli(lab, env, "recover", "--complete", "--yes")
    assert r.returncode == 0, r.stdout + r.stderr
    assert all(not a for a in active_timers(node, lab.timers).values())
    st = json.loads(cli(lab, env, "hold", "--status", "--json").stdout)
    assert st["hold"]["active"] and st["silence"]["state"] == "active"
    assert cli(lab, env, "release", "--yes").returncode == 0
    assert active_timers(node, lab.timers) == baseline and hold_units(node) == []


# -- faults ------------------------------------------------------------------------------------
class _AmDownForWrites:
    """A loopback proxy in front of the lab's Alertmanager that answers reads (the hold's plan
    reads Alertmanager first, so a server down from the start refuses the hold before any
    change: tests/test_hold_refusals.py) and hangs up on every write, as a server that went down
    between the plan and the silence step would: the hold must fail at that step and undo."""

    def __init__(self, upstream: str) -> None:
        import http.server
        import socket
        import threading

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, *a: object) -> None:
                pass

            def do_GET(self) -> None:
                r = httpx.get(upstream + self.path, timeout=5)
                self.send_response(r.status_code)
                self.send_header("Content-Type", r.headers.get("content-type", "text/plain"))
                self.send_header("Content-Length", str(len(r.content)))
                self.end_headers()
                self.wfile.write(r.content)

            def _drop(self) -> None:
                self.close_connection = True
                self.connection.shutdown(socket.SHUT_RDWR)

            do_POST = do_DELETE = do_PUT = _drop

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> _AmDownForWrites:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()


def test_alertmanager_down_at_the_silence_step_undoes(lab, node, env, baseline,
                                                      tmp_path: Path) -> None:
    with _AmDownForWrites(lab.alertmanager_url.rstrip("/")) as am:
        prof = tmp_path / "am-proxy.toml"
        text = lab.profile_path.read_text("utf-8")
        assert lab.alertmanager_url.rstrip("/") in text
        prof.write_text(text.replace(lab.alertmanager_url.rstrip("/"), am.url), "utf-8")
        r = cli(lab, env, "hold", "--yes", "--ttl", "60s", profile=prof)
        assert r.returncode == 1, r.stdout + r.stderr
        assert am.url in r.stderr                          # the error names the URL
        assert "every change was undone" in r.stderr
        assert active_timers(node, lab.timers) == baseline
        assert hold_units(node) == []
    kinds = [(x["kind"], x["step"]) for x in journal_rows(env)]
    assert ("fail", "silence seat") in kinds and ("undo", "schedule lease") in kinds


def test_node_stopped_changes_nothing(lab, node, env, baseline, lab_stop) -> None:
    with lab_stop("node"):
        r = cli(lab, env, "hold", "--yes", "--ttl", "60s")
        assert r.returncode == 5, r.stdout + r.stderr
        assert "not running" in r.stderr or "not reachable" in r.stderr
    assert hold_units(node) == []
    assert [x["kind"] for x in journal_rows(env)] == []     # refused at the plan: no run


def test_node_without_systemd_run_fails_naming_it(lab, node, env, baseline) -> None:
    assert node.run(["mv", "/usr/bin/systemd-run", "/usr/bin/systemd-run.hidden"]).ok
    try:
        r = cli(lab, env, "hold", "--yes", "--ttl", "60s")
        assert r.returncode == 5, r.stdout + r.stderr
        assert "`systemd-run` not found" in r.stderr
        assert active_timers(node, lab.timers) == baseline
    finally:
        assert node.run(["mv", "/usr/bin/systemd-run.hidden", "/usr/bin/systemd-run"]).ok


CATCHUP = "seat-console-test-holdcatchup"


def test_persistent_timer_catch_up_warning_on_release(lab, node, env, baseline,
                                                      tmp_path: Path) -> None:
    """A Persistent=true timer stopped across its elapse: release warns it fires at once and
    shows LastTriggerUSec and the next elapse after the start."""
    timer = tmp_path / f"{CATCHUP}.timer"
    timer.write_text("[Timer]\nOnCalendar=*:*:0/10\nAccuracySec=1ms\nPersistent=true\n")
    (tmp_path / f"{CATCHUP}.service").write_text("[Service]\nType=oneshot\nExecStart=/bin/true\n")
    for f in (timer, tmp_path / f"{CATCHUP}.service"):
        subprocess.run(lab.docker_argv("cp", str(f), f"{lab.node_container}:/etc/systemd/system/"),
                       check=True, capture_output=True, timeout=60)
    profile = tmp_path / "profile.toml"
    text = lab.profile_path.read_text()
    start = text.index("[timers]")
    end = text.index("\n[", start + 1) + 1
    profile.write_text(text[:start] + f'[timers]\nconformance = ["{CATCHUP}.timer"]\n\n'
                       + text[end:])
    try:
        assert node.run(["systemctl", "daemon-reload"]).ok
        assert node.run(["systemctl", "start", f"{CATCHUP}.timer"]).ok
        r = cli(lab, env, "hold", "--yes", "--ttl", "60s", profile=profile)
        assert r.returncode == 0, r.stdout + r.stderr
        time.sleep(11)       # its 10 s elapse passes while it is stopped
        dry = cli(lab, env, "release", "--dry-run", profile=profile)
        assert "Persistent=true" in dry.stdout and "at once" in dry.stdout, dry.stdout
        rel = cli(lab, env, "release", "--yes", profile=profile)
        assert rel.returncode == 0, rel.stdout + rel.stderr
        assert "at once" in rel.stdout
        assert "last trigger" in rel.stdout and "next elapse after the start" in rel.stdout
    finally:
        node.run(["systemctl", "stop", f"{CATCHUP}.timer"])
        node.run(["rm", "-f", f"/etc/systemd/system/{CATCHUP}.timer",
                  f"/etc/systemd/system/{CATCHUP}.service",
                  f"/var/lib/systemd/timers/stamp-{CATCHUP}.timer"])
        node.run(["systemctl", "daemon-reload"])


# -- a lease armed by another console (another state dir) ---------------------------------------
def test_a_lease_of_another_console_is_seen_and_refused(lab, node, env, baseline,
                                                        tmp_path: Path) -> None:
    other = {**env, "SEAT_CONSOLE_STATE_DIR": str(tmp_path / "other-state")}
    a = cli(lab, env, "hold", "--yes", "--ttl", "10m", "--json")
    assert a.returncode == 0, a.stdout + a.stderr
    lease = json.loads(a.stdout)["hold"]["lease_unit"]
    try:
        st = json.loads(cli(lab, other, "hold", "--status", "--json").stdout)
        assert st["hold"] is None
        assert [fl["unit"] for fl in st["foreign_leases"]] == [lease]
        assert st["foreign_leases"][0]["next_elapse"]
        text = cli(lab, other, "hold", "--status").stdout
        assert f"FOREIGN LEASE {lease} elapses " in text
        dry = cli(lab, other, "hold", "--dry-run", "--ttl", "10m")
        assert dry.returncode == 5 and lease in dry.stdout and "already armed" in dry.stdout
        b = cli(lab, other, "hold", "--yes", "--ttl", "10m")
        assert b.returncode == 5 and lease in b.stderr and "--force --reason" in b.stderr
        assert cli(lab, other, "hold", "--yes", "--force", "--ttl", "10m").returncode == 2
        forced = cli(lab, other, "hold", "--yes", "--force", "--reason", "lab test", "--ttl",
                     "10m", "--json")
        assert forced.returncode == 0, forced.stdout + forced.stderr
        assert any("FORCED past " + lease in r["outcome"] + r["output"]
                   for r in journal_rows(other)), journal_rows(other)
        assert cli(lab, other, "release", "--yes").returncode == 0
    finally:
        rel = cli(lab, env, "release", "--yes")
    assert rel.returncode == 0, rel.stdout + rel.stderr
    assert active_timers(node, lab.timers) == baseline and hold_units(node) == []


# -- interference seen by `hold --status` ----------------------------------------------------
def test_hold_status_journals_interference_once(lab, node, env, baseline) -> None:
    """A timer the hold stopped, started by someone else during the hold: `hold --status`
    flags it and journals it once (a second --status, or a --readonly one, writes nothing)."""
    r = cli(lab, env, "hold", "--yes", "--ttl", "3m", "--json")
    assert r.returncode == 0, r.stdout + r.stderr
    h = json.loads(r.stdout)["hold"]
    assert h["stopped"], "the lab's timers should be active before the hold"
    unit = h["stopped"][0]
    try:
        quiet = json.loads(cli(lab, env, "hold", "--status", "--json").stdout)
        assert quiet["interference"] == [] and quiet["interference_journaled"] == []
        assert node.run(["systemctl", "start", unit]).ok      # someone else, by hand
        st1 = cli(lab, env, "hold", "--status", "--json")
        assert st1.returncode == 0, st1.stderr
        one = json.loads(st1.stdout)
        assert [i for i in one["interference"] if unit in i] == one["interference"] != []
        assert one["interference_journaled"] == one["interference"]
        two = json.loads(cli(lab, env, "hold", "--status", "--json").stdout)
        assert two["interference"] == one["interference"]
        assert two["interference_journaled"] == []               # once, whoever saw it first
        ro = cli(lab, env, "--readonly", "hold", "--status")
        assert ro.returncode == 0 and f"INTERFERENCE: {unit}" in ro.stdout, ro.stdout + ro.stderr
        rows = [x for x in journal_rows(env) if x["kind"] == "interference"]
        assert [x["outcome"] for x in rows] == one["interference"]
        assert rows[0]["run_id"] == h["run_id"]
    finally:
        rel = cli(lab, env, "release", "--yes")
        assert rel.returncode == 0, rel.stdout + rel.stderr
    # the console's own release (timers started again) is not interference
    assert [x for x in journal_rows(env) if x["kind"] == "interference"] == rows
