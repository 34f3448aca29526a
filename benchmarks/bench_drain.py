#!/usr/bin/env python3
"""Benchmark: a steady streaming load through a swap and a restore on the lab, the old path
(plain ``docker stop``) vs the drained path, in one run (issue 32).

Each arm holds the seat, starts a :class:`lab_load.Load` of ``--streams`` concurrent streaming
completions (one keep-alive client each, back-off ``0.2 s`` after a refusal; a request is
``ok``, ``refused`` — not admitted, retried — or ``lost`` — admitted and not completed; the
load's own count, ``tests/lab_load.py``), then runs ``seat-console swap`` and ``restore``
through it, and waits for the load to complete requests on each engine that follows. Both arms
run the probe with ``VLLM_SERVER_DEV_MODE=1`` (it offers ``/pause``); the lab's resident does
not (so its stop is SIGTERM in both arms: vLLM's ``--shutdown-timeout`` 0 aborts what runs).

- ``old``: ``[seat] drain_timeout_s = 0``: no drain, as before the drain existed (the stop
  itself is the same in both arms: it ends when the engine lets go of the seat);
- ``drained``: ``[seat] drain_timeout_s = --bound`` (60 s): the drain (actions/drain.py).

Per arm and runbook (a request belongs to the runbook that started last before it ended):
requests ok / refused / lost by kind, the drain record and the seat's downtime from the
run's journal facts, the runbook's wall time; and for the drained restore the time the drain
added (its queue wait + pause). The stop: how it ended (``stop_way``: the drain record's
``stop.way``, ``actions/swap.py`` ``docker_stop``) and how long it took (``stop_s``, SIGTERM to
not running); ``down_before_start_s`` = the downtime less the next engine's start (drain +
stop + the create/start calls), comparable with runs from before the stop record existed.
Not a test: the figures depend on the machine and the load.

Run (holds the lab for ~4 min; the seat is put back and the hold released at the end)::

    SEAT_LAB_DIR=/work/main/.lab flock /work/wt/lab.lock .venv/bin/python \\
        benchmarks/bench_drain.py --json docs/validation/lab-YYYY-MM-DD-drain/bench_drain.json
"""

from __future__ import annotations

import argparse
import fcntl
import json
import sqlite3
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT))

from conftest import Lab, _flock  # noqa: E402  (the lab as scripts/lab.py recorded it)
from lab_helpers import node_transport, restore_seat, seat_cli, state_env, \
    timers_active  # noqa: E402
from lab_load import Load, drain_profile  # noqa: E402


def _facts(env: dict[str, str], runbook: str) -> dict[str, Any]:
    db = sqlite3.connect(Path(env["SEAT_CONSOLE_STATE_DIR"]) / "journal.sqlite3")
    try:
        rows = db.execute("SELECT run_id, facts FROM entries WHERE runbook = ? ORDER BY seq",
                          (runbook,)).fetchall()
    finally:
        db.close()
    if not rows:
        return {}
    facts: dict[str, Any] = {}
    for run_id, f in rows:
        if run_id == rows[-1][0]:
            facts.update(json.loads(f or "{}"))
    return facts


def _cli(prof: Path, env: dict[str, str], *args: str) -> tuple[float, int, str]:
    t0 = time.time()
    r = seat_cli(prof, env, *args, timeout=900)
    return time.time() - t0, r.returncode, (r.stdout[-1500:] + r.stderr[-1500:])


def _arm(lab: Lab, name: str, prof: Path, env: dict[str, str], streams: int,
         max_tokens: int) -> dict[str, Any]:
    out: dict[str, Any] = {"arm": name}
    _, rc, text = _cli(prof, env, "hold", "--yes", "--ttl", "20m", "--reason", "drain bench")
    if rc != 0:
        raise SystemExit(f"hold failed: {text}")
    load = Load(lab.vllm_url, lab.served_model_name, streams=streams,
                max_tokens=max_tokens).start()
    try:
        if not load.wait_ok(streams, 0, 180):
            raise SystemExit(f"the load never got {streams} completions: {load.done[-5:]}")
        marks = {}
        for runbook in ("swap", "restore"):
            marks[runbook] = time.time()
            wall, rc, text = _cli(prof, env, runbook, "--yes", "--json")
            if rc != 0:
                raise SystemExit(f"{runbook} failed (rc {rc}): {text}")
            after = time.time()
            if not load.wait_ok(streams, after, 180):
                raise SystemExit(f"no completions after the {runbook}: {load.done[-5:]}")
            facts = _facts(env, runbook)
            out[runbook] = {"wall_s": round(wall, 2), "drain": facts.get("drain"),
                            "downtime": facts.get("downtime")}
        marks["end"] = time.time()
    finally:
        load.stop()
    ends = [marks["swap"], marks["restore"], float("inf")]
    for i, runbook in enumerate(("swap", "restore")):
        t = load.tally(ends[i], ends[i + 1])
        out[runbook]["requests"] = t
        out[runbook]["ok"] = sum(v for k, v in t.items() if k == "ok")
        out[runbook]["refused"] = sum(v for k, v in t.items() if k.startswith("refused"))
        out[runbook]["lost"] = sum(v for k, v in t.items() if k.startswith("lost"))
        d = out[runbook]["drain"] or {}
        out[runbook]["drain_added_s"] = (round(float(d.get("queue_s") or 0)
                                               + float(d.get("drained_s") or 0), 3)
                                         if d.get("mode") == "pause" else None)
        # the stop (how it ended, SIGTERM -> not running), and the seat's downtime before the
        # next engine's start (drain + stop + create/start call): downtime - start_s
        stop = d.get("stop") or {}
        out[runbook]["stop_way"] = stop.get("way")
        out[runbook]["stop_s"] = stop.get("stop_s")
        dt = out[runbook]["downtime"] or {}
        out[runbook]["down_before_start_s"] = (
            round(dt["seconds"] - dt["start_s"], 3)
            if isinstance(dt.get("seconds"), float | int) and isinstance(dt.get("start_s"),
                                                                        float | int) else None)
    out["before"] = load.tally(0, marks["swap"])
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--streams", type=int, default=8)
    ap.add_argument("--max-tokens", type=int, default=24)
    ap.add_argument("--bound", type=float, default=60.0, help="the drained arm's drain_timeout_s")
    ap.add_argument("--lab-dir", type=Path, default=ROOT / ".lab")
    ap.add_argument("--json", type=Path, help="write the results here")
    args = ap.parse_args()
    import os
    lab_dir = Path(os.environ.get("SEAT_LAB_DIR") or args.lab_dir)
    lab = Lab.from_state(json.loads((lab_dir / "state.json").read_text("utf-8")))
    node = node_transport(lab)
    started = datetime.now(UTC)
    results: dict[str, Any] = {"started": started.isoformat(), "streams": args.streams,
                               "max_tokens": args.max_tokens, "bound_s": args.bound, "arms": []}
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        env = state_env(tmp)
        _flock(lab.lab_dir, fcntl.LOCK_EX, "bench_drain stops the resident")
        timers = timers_active(node, lab.timers)
        try:
            old = drain_profile(lab.profile_path, tmp / "old.toml", 0)
            _, rc, text = _cli(old, env, "build-backport", "--json")
            if rc != 0:
                raise SystemExit(f"build-backport failed: {text}")
            results["arms"].append(_arm(lab, "old", old, env, args.streams, args.max_tokens))
            restore_seat(lab, env, node, timers)
            drained = drain_profile(lab.profile_path, tmp / "drained.toml", args.bound)
            results["arms"].append(_arm(lab, "drained", drained, env, args.streams,
                                        args.max_tokens))
        finally:
            restore_seat(lab, env, node, timers)
            _flock(lab.lab_dir, fcntl.LOCK_UN, "lab")
    results["finished"] = datetime.now(UTC).isoformat()
    for a in results["arms"]:
        for rb in ("swap", "restore"):
            r = a[rb]
            dn = (r["downtime"] or {}).get("seconds")
            print(f"{a['arm']:>8} {rb:<8} ok {r['ok']:>4}  refused {r['refused']:>4}  "
                  f"lost {r['lost']:>3}  down {dn if dn is not None else '-':>7} s  "
                  f"wall {r['wall_s']:>6} s  drain {(r['drain'] or {}).get('mode')} "
                  f"added {r['drain_added_s']}  stop {r['stop_way']} {r['stop_s']} s  "
                  f"down before the start {r['down_before_start_s']} s  {r['requests']}")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(results, indent=1) + "\n", "utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
