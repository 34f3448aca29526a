"""The ground the runbooks stand on (issue 7): a cancelled poll worker, the runner after a
timeout kill, NVML shut down under a running call, and the hang-up watchdog with a runbook in
flight. Each test fails against the code before its fix."""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from app_fixtures import CountingPanel, HangingSource, default_loaded, fixed  # noqa: E402
from test_app import SIZE, make_app, wait_for  # noqa: E402

from seat_console.actions.journal import Journal
from seat_console.actions.runbook import Check, Runbook, Step, stop_in_flight
from seat_console.node.runner import Runner
from seat_console.node.nvml import Nvml


# -- a poll that fails outside read() ------------------------------------------------------------
async def test_a_poll_that_fails_outside_read_does_not_leave_its_source_busy():
    """Polls run on one reused thread per source (issue 11: no Textual worker per poll, so
    there is no poll worker to cancel); a failure outside ``read`` — here the guard itself —
    is posted as an error reading, so the source is not left busy and is polled again."""
    import seat_console.tui.polling as app_mod

    hang = HangingSource()
    app = make_app([(fixed(hang), CountingPanel)], interval=0.05)
    real = app_mod.read_guarded
    calls = {"n": 0}

    def failing_once(source):
        calls["n"] += 1
        if calls["n"] == 1:
            raise RuntimeError("guard broke")
        return real(source)

    app_mod.read_guarded = failing_once
    try:
        async with app.run_test(size=SIZE) as pilot:
            st = app.states["hanging"]
            await wait_for(pilot, lambda: st.polls >= 1, "the failed poll reported")
            assert not [w for w in app.workers if (w.name or "").startswith("poll:")]
            await wait_for(pilot, hang.entered.is_set, "the source read again")
            assert st.busy_since is not None   # now genuinely reading (hung)
            hang.release.set()     # later reads answer at once
            await wait_for(pilot, lambda: st.polls >= 2, "the source polled again")
    finally:
        app_mod.read_guarded = real
        hang.release.set()


# -- runner: communicate() after the timeout kill ------------------------------------------------
def test_runner_timeout_returns_although_a_grandchild_holds_the_pipes():
    """A grandchild in its own session (outside the killed process group) keeps stdout open;
    the runner's drain after the kill must itself be bounded."""
    t0 = time.monotonic()
    res = Runner().run(["sh", "-c", "setsid sleep 20 & echo $!; exec sleep 30"],
                       timeout_s=0.5)
    took = time.monotonic() - t0
    grandchild = int(res.stdout.split()[0])
    try:
        assert res.timed_out and not res.ok
        assert took < 12, f"run() took {took:.1f} s: the drain after the kill waited on the pipe"
        assert "outside its process group" in res.stderr
    finally:
        os.kill(grandchild, signal.SIGKILL)   # the one process this test started outside


# -- NVML close under a running call ---------------------------------------------------------
class _SlowNvml:
    """A pynvml stand-in whose ``nvmlDeviceGetCount`` blocks until released."""

    class NVMLError(Exception):
        value = 999

    def __init__(self) -> None:
        self.calls: list[str] = []
        self.entered = threading.Event()
        self.release = threading.Event()

    def nvmlInit(self) -> None:
        self.calls.append("init")

    def nvmlShutdown(self) -> None:
        self.calls.append("shutdown")

    def nvmlDeviceGetCount(self) -> int:
        self.calls.append("count:start")
        self.entered.set()
        self.release.wait(10)
        self.calls.append("count:end")
        return 2


def test_nvml_close_waits_for_a_running_call_then_shuts_down():
    mod = _SlowNvml()
    nvml = Nvml(mod)
    out: list = []
    t = threading.Thread(target=lambda: out.append(nvml.call("nvmlDeviceGetCount")))
    t.start()
    assert mod.entered.wait(5)
    nvml.close(wait_s=0.1)               # the call is still inside NVML
    assert "shutdown" not in mod.calls   # not shut down under it
    mod.release.set()
    t.join(5)
    assert out == [2]
    assert mod.calls[-2:] == ["count:end", "shutdown"]   # the last call out shut it down


def test_nvml_close_without_calls_shuts_down_at_once():
    mod = _SlowNvml()
    nvml = Nvml(mod)
    nvml.init()
    nvml.close()
    assert mod.calls == ["init", "shutdown"]


# -- hang-up watchdog with a runbook in flight ------------------------------------------------
def test_stop_in_flight_lets_the_step_finish_and_journals(tmp_path: Path):
    journal = Journal(tmp_path / "j.sqlite3")
    node: dict = {}
    entered, release = threading.Event(), threading.Event()

    def apply(ctx):
        entered.set()
        release.wait(5)
        node["a"] = True

    def undo(ctx):
        node.pop("a", None)

    steps = [Step("a", lambda c: Check(True, "set a"), apply, lambda c: None, undo),
             Step("b", lambda c: Check(True, "set b"), lambda c: node.update(b=True),
                  lambda c: None)]
    rb = Runbook("demo", steps, journal=journal)
    t = threading.Thread(target=rb.run)
    t.start()
    assert entered.wait(5)
    threading.Timer(0.3, release.set).start()
    # a bound, not an expected duration: the stop returns as soon as the run has ended (its
    # step, the undo and their journal rows); 5 s was once too short with the lab's vLLM
    # starting beside the unit tests (CI's overlapped runs), and the run was reported cut off
    left = stop_in_flight(grace_s=60)
    t.join(60)
    assert not t.is_alive()
    assert not [x for x in left if rb.run_id in x]   # it finished within the grace: not cut off
    assert node == {}                     # the step finished, then everything was undone
    kinds = [e.kind for e in journal.entries(run_id=rb.run_id)]
    assert kinds[-1] == "end" and "undo" in kinds and "b" not in node

    # a step that outlives the grace is journaled as cut off
    entered.clear()
    release.clear()
    rb2 = Runbook("demo", steps, journal=journal)
    t2 = threading.Thread(target=rb2.run, daemon=True)
    t2.start()
    assert entered.wait(5)
    left = stop_in_flight(grace_s=0.2)
    mine = [x for x in left if rb2.run_id in x]
    assert mine and "cut off in step 'a'" in mine[0], left
    cut = journal.entries(run_id=rb2.run_id, kind="cut-off")
    assert cut and cut[0].step == "a" and "recover" in cut[0].outcome
    release.set()
    t2.join(60)
    journal.close()


def test_app_watchdog_waits_for_runbooks(monkeypatch):
    """``terminal_gone``'s watchdog asks in-flight runbooks to stop before ``os._exit``."""
    import seat_console.tui.app as app_mod
    import seat_console.tui.hangup as hangup_mod

    calls: list = []
    monkeypatch.setattr(hangup_mod, "HANGUP_EXIT_GRACE_S", 0.0)
    monkeypatch.setattr(hangup_mod, "stop_in_flight", lambda grace_s: calls.append(grace_s) or [])
    monkeypatch.setattr(hangup_mod.os, "_exit", lambda code: calls.append(("exit", code)))
    app = app_mod.SeatConsoleApp(default_loaded(), watch_terminal=False)
    monkeypatch.setattr(app, "exit", lambda **kw: None)
    app.terminal_gone("test")
    for _ in range(100):
        if len(calls) >= 2:
            break
        time.sleep(0.02)
    assert calls[0] == hangup_mod.RUNBOOK_STOP_GRACE_S and calls[1][0] == "exit"


def test_leaving_the_terminal_unblocks_a_ui_thread_stuck_behind_a_dead_writer(monkeypatch):
    """Textual's output thread died on the dead terminal with its queue full and the UI thread
    blocked in ``put``: leaving the terminal from the watch thread drains the queue, so the
    UI thread's write returns (it would block for good otherwise: seen under CI load)."""
    import queue

    import seat_console.tui.app as app_mod
    import seat_console.tui.hangup as hangup_mod

    calls: list = []
    monkeypatch.setattr(hangup_mod, "HANGUP_EXIT_GRACE_S", 0.0)
    monkeypatch.setattr(hangup_mod, "stop_in_flight", lambda grace_s: calls.append(grace_s) or [])
    monkeypatch.setattr(hangup_mod.os, "_exit", lambda code: calls.append(("exit", code)))

    class DeadWriter(threading.Thread):   # Textual's WriterThread's shape: _queue, join
        def __init__(self) -> None:
            super().__init__(daemon=True)
            self._queue: queue.Queue = queue.Queue(3)

        def run(self) -> None:
            return   # ended, as the real one dies on EIO, leaving its queue undrained

    class Driver:
        _writer_thread = DeadWriter()

    Driver._writer_thread.start()
    Driver._writer_thread.join()
    for frame in range(3):
        Driver._writer_thread._queue.put(f"frame {frame}")
    app = app_mod.SeatConsoleApp(default_loaded(), watch_terminal=False)
    monkeypatch.setattr(app, "_driver", Driver())
    wrote = threading.Event()

    def ui_write() -> None:
        Driver._writer_thread._queue.put("one frame too many")
        wrote.set()

    threading.Thread(target=ui_write, daemon=True).start()
    assert not wrote.wait(0.3)   # blocked: the queue is full and nobody drains it
    assert app._leave_terminal("terminal hung up")   # from this (the watch) thread
    assert wrote.wait(30), "the UI thread's write stayed blocked"
    assert not app._leave_terminal("again")   # once
    for _ in range(500):
        if len(calls) >= 2:
            break
        time.sleep(0.02)
    assert calls[-1] == ("exit", hangup_mod.EXIT_HANGUP_FORCED)
