"""Drain before stop on the lab's real vLLM 0.32 (issue 32), in one swap and one restore.

The module holds the lab exclusive for its whole run (:data:`LAB_MODULE_EXCLUSIVE`): one
``swap`` puts the probe in the seat — run with ``VLLM_SERVER_DEV_MODE=1``, so it offers
``/pause`` — with a steady streaming load (:class:`lab_load.Load`, the load's own count)
running through it; then

1. a drain that cannot finish within its bound stops at it with the cut counted: long
   requests are started and the engine's own ``vllm:num_requests_running`` / ``_waiting`` show
   more of them queued than it has slots before the drain (of the probe, 0.2 s bound); its
   stop is replaced by ``POST /resume`` so the same probe serves the next test (the cut
   requests then finish);
2. a load runs through a drained ``restore`` (60 s bound) that puts the resident back.

The lab's resident runs without ``VLLM_SERVER_DEV_MODE`` and with ``--shutdown-timeout 0``
(vLLM's default), so the swap's stop of it takes the SIGTERM path: the plan says how many
requests that aborts. What vLLM 0.32 does to each request is in actions/drain.py's docstring:
the drain finishes every request admitted before it; those that arrive while the engine is
paused are accepted and queued by 0.32 (0.33+ refuses them with a retryable 503), and the stop
cuts them — the test checks that every lost request arrived after the pause and that the
console counted what the stop cut. Each stop (the swap's, the restore's) ends when the engine
has let go of the seat — its listener refused, or the container exited — not at docker's
SIGKILL at the stop timeout (actions/swap.py ``docker_stop``; the journal's ``drain.stop``).
"""

from __future__ import annotations

import fcntl
import json
import sqlite3
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
from conftest import _flock
from lab_helpers import (journal_rows, node_transport, restore_seat, seat_cli, state_env,
                         timers_active)
from lab_load import Load, drain_profile

from seat_console.actions import drain as D
from seat_console.actions.drain import parse_iso

LAB_MODULE_EXCLUSIVE = True
"""The module fixture holds the lab's outage lock exclusive from the swap to the restore
(tests/conftest.py ``_lab_outage_guard`` leaves such a module's lock alone)."""

SLACK_S = 0.5
"""A request the client sent less than this before the pause may reach the server after it."""


def _facts(env: dict[str, str], runbook: str) -> dict[str, Any]:
    db = sqlite3.connect(Path(env["SEAT_CONSOLE_STATE_DIR"]) / "journal.sqlite3")
    rows = db.execute("SELECT run_id, facts FROM entries WHERE runbook = ? ORDER BY seq",
                      (runbook,)).fetchall()
    db.close()
    facts: dict[str, Any] = {}
    for run_id, f in rows:
        if run_id == rows[-1][0]:
            facts.update(json.loads(f or "{}"))
    return facts


class Seat:
    """The module's state: the CLI's environment and profile, the load run through the swap."""

    def __init__(self, lab: Any, env: dict[str, str], prof: Path) -> None:
        self.lab, self.env, self.prof = lab, env, prof
        self.load = Load(lab.vllm_url, lab.served_model_name, streams=4, max_tokens=24)
        self.swap_began = 0.0
        self.resident_id = ""
        self.timers: dict[str, bool] = {}


@pytest.fixture(scope="module")
def seat(lab: Any, tmp_path_factory: pytest.TempPathFactory) -> Any:
    tmp = tmp_path_factory.mktemp("drain")
    node = node_transport(lab)
    env = state_env(tmp)
    _flock(lab.lab_dir, fcntl.LOCK_EX, "drain tests swap the seat")
    try:
        timers = timers_active(node, lab.timers)
        s = Seat(lab, env, drain_profile(lab.profile_path, tmp / "p.toml", 60))
        s.timers = timers
        with lab.docker_client() as client:
            s.resident_id = client.containers.get(lab.resident_container).id
        try:
            r = seat_cli(s.prof, env, "build-backport", "--json", timeout=300)
            assert r.returncode == 0, r.stdout + r.stderr
            r = seat_cli(s.prof, env, "hold", "--yes", "--ttl", "20m", "--reason",
                         "drain test", timeout=120)
            assert r.returncode == 0, r.stdout + r.stderr
            s.load.start()
            assert s.load.wait_ok(4, 0, 120), s.load.done[-5:]
            s.swap_began = time.time()
            r = seat_cli(s.prof, env, "swap", "--yes", "--json", timeout=900)
            assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
            assert s.load.wait_ok(4, time.time(), 120), s.load.done[-5:]
            s.load.stop()
            print(f"\nswap (SIGTERM, no /pause): {s.load.tally(s.swap_began, float('inf'))}; "
                  f"drain {_facts(env, 'swap').get('drain')}")
            yield s
        finally:
            s.load.stop()
            restore_seat(lab, env, node, timers)
    finally:
        _flock(lab.lab_dir, fcntl.LOCK_UN, "lab")


def test_a_drain_that_cannot_finish_stops_at_the_bound_with_the_cut_counted(
        lab: Any, seat: Any) -> None:
    drain = _facts(seat.env, "swap")["drain"]
    # the lab's resident: no /pause, --shutdown-timeout 0 -> SIGTERM, said so; its stop ended
    # when its listener closed (or it exited), not at the stop timeout
    assert drain["mode"] == "sigterm" and drain["shutdown_timeout_s"] == 0
    assert drain["stop"]["way"] in ("listener_closed", "exited"), drain["stop"]
    assert drain["stop_timeout_s"] >= D.STOP_MARGIN_S
    # three times the engine's max-num-seqs of long requests (480 tokens: the lab's
    # max-model-len is 512): as the engine itself says, max-num-seqs of them run and more than
    # max-num-seqs wait in its scheduler before the drain with its 0.2 s bound begins. The
    # drain first lets the waiting ones reach a slot (for bound/2), then pauses; a paused vLLM
    # 0.32 (PAUSED_NEW, v1/core/sched/scheduler.py) never schedules a waiting request, so
    # those waiting at the pause are still there at the bound however fast the running ones
    # finish: the cut is at least one on any machine (the running ones alone raced the bound
    # on a loaded one). For the queue to empty before the pause, more than max-num-seqs
    # requests would have to reach a slot, so at least one that was waiting when the test
    # looked would have to be scheduled and generate all its 480 tokens between that look and
    # the drain's reads. With twice max-num-seqs of streamed requests it emptied that way
    # under a CPU hog: the one slot-group that runs at once finished while the test process,
    # starved by its own 32 streaming client threads, took 4.5 s for one /metrics read (the
    # load is not streamed now, its clients sleep in their reads)
    with lab.docker_client() as client:
        c = client.containers.get("seat-probe")
    streams = 3 * lab.max_num_seqs
    resumed, words, rec, long = _bounded_drain(lab, c, streams)
    print(f"\nbounded drain of {streams} long requests: {rec}")
    assert resumed == [200]
    assert rec["mode"] == "pause" and rec["reached_zero"] is False
    assert rec["queue_empty"] is False, rec        # the wait for the queue ran out at bound/2
    assert rec["left_running"] is not None and rec["queued_while_paused"] is not None, rec
    assert rec["cut"] == rec["left_running"] + rec["queued_while_paused"], rec
    assert rec["queued_while_paused"] >= 1 and rec["cut"] >= 1, rec
    assert "cut at the bound" in words, words
    # resumed, the requests the bound would have cut finished
    assert long.count("ok") >= streams and long.count("lost") == 0, long.done


def _queue(url: str) -> tuple[float, float]:
    """The engine's own ``vllm:num_requests_running`` and ``vllm:num_requests_waiting``."""
    m = httpx.get(f"{url}/metrics", timeout=5).text

    def total(name: str) -> float:
        return sum(float(line.rsplit(" ", 1)[1]) for line in m.splitlines()
                   if line.startswith(name + "{") or line.startswith(name + " "))
    return total("vllm:num_requests_running"), total("vllm:num_requests_waiting")


def _bounded_drain(lab: Any, c: Any, streams: int) -> tuple[list[int], str, dict, Load]:
    """``streams`` long requests (not streamed) started, the engine's max-num-seqs of them
    seen running and more than max-num-seqs waiting, then a drain with a 0.2 s bound whose stop
    is replaced by ``POST /resume`` (the probe serves on). Returns the resume's status codes,
    the drain's sentence and record, and the (stopped) load."""
    long = Load(lab.vllm_url, lab.served_model_name, streams=streams, max_tokens=480,
                stream=False).start()
    resumed: list[int] = []
    try:
        end = time.time() + 60
        while time.time() < end:
            running, waiting = _queue(lab.vllm_url)
            if running >= lab.max_num_seqs and waiting > lab.max_num_seqs:
                break
            time.sleep(0.05)
        else:
            pytest.fail(f"{streams} requests: the engine never showed {lab.max_num_seqs} "
                        f"running and more waiting (last: {running}, {waiting})")
        plan = D.drain_plan(c, lab.vllm_url, bound_s=0.2)
        assert plan.pause is True and plan.newcomers == "queued"   # vLLM 0.32

        def resume_instead_of_stop(t: int) -> str:
            resumed.append(httpx.post(f"{lab.vllm_url}/resume", timeout=10).status_code)
            return "resumed (the test keeps the probe)"

        words, rec = D.drain_and_stop(c, plan, resume_instead_of_stop)
    finally:
        long.stop()
    return resumed, words, rec, long


def test_a_load_through_a_drained_restore_loses_no_request_admitted_before_the_drain(
        lab: Any, seat: Any) -> None:
    # the load stops by itself once the resident has served 4 of its requests after the
    # downtime: the restore's release (timers, silence, lease) then runs without it
    load = Load(lab.vllm_url, lab.served_model_name, streams=4, max_tokens=24,
                recover_then_stop=4).start()
    try:
        assert load.wait_ok(4, time.time(), 60), load.done[-5:]
        t0 = time.time()
        # --keep-hold: the swap undone, the hold kept (the way back to a compare in this cycle)
        r = seat_cli(seat.prof, seat.env, "restore", "--keep-hold", "--yes", "--json",
                     timeout=900)
        assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
        assert load.recovered.wait(120), load.done[-5:]   # the resident serves it
    finally:
        load.stop()
    kept = json.loads(seat_cli(seat.prof, seat.env, "hold", "--status", "--json",
                               timeout=60).stdout)["hold"]
    assert kept is not None and kept["state"] == "active", kept
    node = node_transport(lab)
    assert not any(timers_active(node, kept["stopped"]).values())   # still stopped
    book = json.loads(seat_cli(seat.prof, seat.env, "runbook", "--json", timeout=60).stdout)
    stage = {x["name"]: x for x in book["stages"]}
    assert book["cycle_closed_at"] is None and stage["hold"]["status"] == "done", book
    assert stage["swap"]["status"] == "stale" and "--keep-hold" in stage["swap"]["reason"]
    assert stage["restore"]["status"] == "todo", stage["restore"]
    rel = seat_cli(seat.prof, seat.env, "release", "--yes", "--json", timeout=300)
    assert rel.returncode == 0, rel.stdout[-3000:] + rel.stderr[-3000:]
    # the restore: the same resident container and image ID, answering (one completion
    # verified); the probe stopped and kept; the hold kept, then released by `release`, its
    # timers active again
    done = json.loads(r.stdout)
    assert "one completion answered" in json.dumps(done["steps"])
    with lab.docker_client() as client:
        res = client.containers.get(lab.resident_container).attrs
        probe = client.containers.get("seat-probe").attrs
    assert res["State"]["Running"] and res["Id"] == seat.resident_id
    assert res["Image"] == lab.engine_image_id
    assert not probe["State"]["Running"]
    st = json.loads(seat_cli(seat.prof, seat.env, "hold", "--status", "--json",
                             timeout=60).stdout)
    assert st["hold"] is None or st["hold"]["state"] == "released"
    assert timers_active(node_transport(lab), lab.timers) == seat.timers
    kinds = [(r["runbook"], r["kind"], r["step"]) for r in journal_rows(seat.env)]
    for step in ("stop probe", "start resident", "keep hold"):
        assert ("restore", "verify", step) in kinds
    assert ("restore", "verify", "release hold") not in kinds
    facts = _facts(seat.env, "restore")
    drain, down = facts["drain"], facts["downtime"]
    assert drain["mode"] == "pause" and drain["reached_zero"] is True
    assert drain["newcomers"] == "queued"
    down_at = parse_iso(drain["down_at"]).timestamp()
    restore = [d for d in load.done if d[1] >= t0]
    lost = [d for d in restore if d[2].startswith("lost")]
    # every request admitted before the drain finished: the drain let it
    assert [d for d in lost if d[0] < down_at - SLACK_S] == [], lost
    # what was lost arrived after the pause: vLLM 0.32 queues it and the stop cuts it, as the
    # plan said (newcomers "queued", above); its /metrics may not count it (the benchmark's
    # run counted 0 of 8), so the console's count is not compared with the load's
    assert 0 < down["seconds"] < 900 and down["down_at"] == drain["down_at"]
    # the stop ended when the engine let go of the seat (its listener refused, or it exited),
    # not at docker's SIGKILL at the stop timeout (the keep-alive connections of the load)
    assert drain["stop"]["way"] in ("listener_closed", "exited"), drain["stop"]
    print(f"\nrestore: {load.tally(t0, float('inf'))}; drain {drain}; downtime {down}")
