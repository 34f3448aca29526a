"""A run whose console is still running it is "in progress", never "failed, recover it" (the
new-user test: during a TUI swap, `runbook` said `swap failed` and `recover --undo` offered to
undo the live swap)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from seat_console.actions import recover
from seat_console.actions.journal import Journal
from seat_console.actions.runner_id import runner_alive, runner_identity
from seat_console.actions.stages import read_runbook


def test_a_run_in_progress_is_running_and_recover_refuses_it(tmp_path: Path) -> None:
    # a stand-in console: its command line names seat_console, as a real one's does
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)",
                             "seat_console"])
    runner = {**runner_identity(), "pid": proc.pid}
    with Journal(tmp_path / "journal.sqlite3") as j:
        j.append(run_id="swap-1", runbook="swap", kind="start", outcome="started",
                 facts={"runner": runner})
        j.append(run_id="swap-1", runbook="swap", kind="begin", step="stop resident",
                 facts={"runner": runner})
        try:
            assert runner_alive(runner) is True
            s = read_runbook(None, j, runs_dir=tmp_path / "runs", seat="none")
            sw = s.stage("swap")
            assert sw.status == "running" and "in progress" in sw.reason, sw
            assert "recover" not in sw.command
            d = recover.describe(j.unfinished()[0])
            assert d["in_progress"] and d["can"] == []
        finally:
            proc.kill()
            proc.wait()
        assert runner_alive(runner) is False
        s = read_runbook(None, j, runs_dir=tmp_path / "runs", seat="none")
        assert s.stage("swap").status == "failed" and "recover" in s.stage("swap").command
        assert recover.describe(j.unfinished()[0])["can"] == ["undo"]


def test_a_runner_that_cannot_be_told_is_not_taken_for_alive() -> None:
    me = runner_identity()
    assert runner_alive(None) is None and runner_alive({"pid": "1"}) is None
    assert runner_alive({**me, "host": "another-node"}) is None
    assert runner_alive({**me, "boot_id": "an-earlier-boot"}) is False
    # a live PID that is not a console (this test runner's own command line is pytest's)
    assert runner_alive({**me, "pid": 1}) in (False, None)
