"""A timer started by hand mid-bracket (issue 17): on the lab, a compare (``--bracket AB``,
the resident against the backport image) runs in a child process; once its hold has stopped
the timers, ``fleet-remediation-cycle.timer`` is started by hand on the node. The breach is
journaled with its own time (the timer's ActiveEnterTimestamp, to the second), recorded in
``compare.json``, named with that time in the report's breaches section, and the bracket is
not complete. The breach stops the bracket: leg B2 is never run (no swap with the hold
broken), the resident keeps the seat, the hold is released, and the compare exits 7 (bracket
not complete).

Holds the lab's outage lock exclusively; whatever happens the lab is left as found (probe
stopped, resident serving, the hold released, every timer active)."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

from conftest import wait_until
from lab_helpers import (
    exclusive_lab,
    node_transport,
    restore_seat,
    seat_cli,
    state_env,
    timers_active,
)

from seat_console.sources.timers import read_timers

UNIT = "fleet-remediation-cycle.timer"


def _rows(env) -> list[dict]:
    p = Path(env["SEAT_CONSOLE_STATE_DIR"]) / "journal.sqlite3"
    if not p.exists():
        return []
    db = sqlite3.connect(f"file:{p}?mode=ro", uri=True)
    db.row_factory = sqlite3.Row
    try:
        return [dict(r) for r in db.execute("SELECT * FROM entries ORDER BY seq")]
    except sqlite3.Error:
        return []
    finally:
        db.close()


def test_a_timer_started_by_hand_mid_bracket_is_a_breach_in_the_report(lab, tmp_path: Path
                                                                        ) -> None:
    env = state_env(tmp_path, data=True)
    node = node_transport(lab)
    with exclusive_lab(lab, "the breach test runs a compare and starts a timer by hand"):
        before = timers_active(node, lab.timers)
        assert before[UNIT], f"{UNIT} must be active before the test"
        proc = None
        try:
            b = seat_cli(lab.profile_path, env, "build-backport", "--json", timeout=300)
            assert b.returncode == 0, b.stdout + b.stderr
            proc = subprocess.Popen(
                [sys.executable, "-m", "seat_console.cli", "--profile", str(lab.profile_path),
                 "compare", "--bracket", "AB", "--yes", "--json", "--ttl", "30m",
                 "--no-fidelity", "--no-canaries"],
                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
            # the compare's hold has stopped the timer (its verify row is journaled)
            wait_until(lambda: any(r["kind"] == "verify" and r["step"] == f"stop {UNIT}"
                                   for r in _rows(env)), 180, interval=0.5,
                       what=f"the compare's hold to stop {UNIT}")
            assert not timers_active(node, [UNIT])[UNIT]
            res = node.run(["systemctl", "start", UNIT])           # by hand, mid-bracket
            assert res.ok, res.failure
            r = read_timers(node, [UNIT])
            started = r.timers[0].active_since
            assert started is not None
            out, err = proc.communicate(timeout=900)
            doc = json.loads(out)
            assert proc.returncode == 7, (proc.returncode, err[-4000:])
        finally:
            if proc is not None and proc.poll() is None:
                proc.kill()
            restore_seat(lab, env, node, before)
        want = started.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        # journaled at its time: one row, the change's own time, written after it
        rows = [x for x in _rows(env) if x["kind"] == "interference"]
        assert len(rows) == 1, rows
        facts = json.loads(rows[0]["facts"])
        assert facts["breach"]["changed_at"] == want and facts["breach"]["unit"] == UNIT
        at = datetime.fromisoformat(rows[0]["at"].replace("Z", "+00:00"))
        assert at >= started
        # recorded for the report, the bracket not complete, the report names it with its time
        rep = doc["report"]
        assert rep["comparison"]["status"] != "complete", rep["comparison"]
        assert [x["changed_at"] for x in rep["breaches"]] == [want]
        assert UNIT in rep["breaches"][0]["what"]
        cmp_doc = json.loads((Path(doc["comparison"]) / "compare.json").read_text())
        # The hand start races leg A1's probe: before the probe's baseline it is the hold's
        # breach alone (bracket ``incomplete``); after it, the probe's own monitor also sees it
        # and the leg is ``disrupted``, which the bracket then is — by the timer's start, or by
        # the service the started timer fires at once (whichever check of the round sees it
        # first stops the probe; CI, stop 40). Either way the breach is named; which window it
        # fell in is read from the leg, not assumed.
        leg1 = json.loads((Path(doc["comparison"]) / "legs/1-A/leg.json").read_text())
        if leg1["status"] == "disrupted":
            run = json.loads((Path(leg1["probe_run_dir"]) / "summary.json").read_text())
            unit = UNIT.removesuffix(".timer")
            seen = [x for x in run["disruptions"]
                    if x["kind"] == "timer" and UNIT in x["what"] and "breach" in x["what"]
                    or x["kind"] == "service" and f"{unit}.service" in x["what"]]
            assert seen, run
            assert cmp_doc["status"] == "disrupted", cmp_doc
        else:
            assert leg1["status"] == "complete", leg1
            assert cmp_doc["status"] == "incomplete", cmp_doc
        assert "breach" in cmp_doc["reason"], cmp_doc["reason"]
        # stopped at the breach: A1 measured, B2 never begun (no swap), the seat restored
        assert cmp_doc["legs"] == ["legs/1-A"], cmp_doc["legs"]
        assert "2-B not run" in cmp_doc["reason"], cmp_doc["reason"]
        assert "leg2_container" not in cmp_doc["containers"], cmp_doc["containers"]
        assert cmp_doc["restored"] is True and cmp_doc["hold_released"] is True, cmp_doc
        skips = [x for x in _rows(env) if x["kind"] == "skip" and x["step"] == "leg B2: seat"]
        assert skips and want in skips[0]["outcome"], skips
        md = seat_cli(lab.profile_path, env, "report", doc["comparison"], "--md", timeout=120)
        assert md.returncode == 0, md.stdout + md.stderr
        assert "## Breaches of the hold during the bracket" in md.stdout
        assert f"| {want} |" in md.stdout and UNIT in md.stdout
        assert all(not c["survives"] for c in rep["claims"]
                   if not c["subject"].startswith("identity of arm"))
        assert timers_active(node, lab.timers) == {u: True for u in lab.timers} or \
            timers_active(node, lab.timers) == before
