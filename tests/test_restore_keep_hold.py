"""``restore --keep-hold`` (a QA walk: a swap made before the compare could only be undone by a
restore that ended the hold and the cycle): the runbook reads it as the swap undone under the
same hold, so the compare comes next, then the swap again — and the stage that points at it
names the command and the key's flow keeps the hold."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from runbook_history import History

from seat_console.actions.journal import Journal
from seat_console.actions.stages import (RESTORE_BEFORE_COMPARE, read_runbook,
                                          restore_keeps_hold, swap_before_compare)


@pytest.fixture(autouse=True)
def _state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SEAT_CONSOLE_STATE_DIR", str(tmp_path / "state"))   # a journal each
    monkeypatch.setenv("SEAT_CONSOLE_DATA_DIR", str(tmp_path / "data"))


def _history(j: Journal, tmp: Path) -> History:
    h = History(j, tmp, t0=datetime.now(UTC) - timedelta(hours=1))
    h.to_backport()
    h.swap()
    h.probe()
    return h


def test_swapped_before_the_compare_the_next_restore_keeps_the_hold(tmp_path: Path) -> None:
    with Journal() as j:
        _history(j, tmp_path)
        st = read_runbook(None, j, runs_dir=tmp_path, seat="candidate")
        assert st.next.name == "restore" and st.next_why == RESTORE_BEFORE_COMPARE
        assert st.next.command == "seat-console restore --keep-hold"
        assert restore_keeps_hold(st)
        # the stage list keeps the plain command (the cycle's restore, at its end)
        assert st.stage("restore").command == "seat-console restore"
        # the resident in the seat, or the compare done: a restore releases as before
        assert not restore_keeps_hold(read_runbook(None, j, runs_dir=tmp_path, seat="resident"))


def test_any_restore_before_the_compare_keeps_the_hold(tmp_path: Path) -> None:
    """Also where the probe, not the restore, is next: a restore of the candidate before the
    compare is the way back to it (every decision needs the compare); a cycle given up ends
    with a release. Without a hold placed in the cycle there is nothing to keep."""
    with Journal() as j:
        h = History(j, tmp_path, t0=datetime.now(UTC) - timedelta(hours=1))
        h.fit()
        h.image()
        h.backport()
        h.swap()
        assert not restore_keeps_hold(read_runbook(None, j, runs_dir=tmp_path,
                                                   seat="candidate"))      # no hold
        h.hold()
        h.swap()
        st = read_runbook(None, j, runs_dir=tmp_path, seat="candidate")
        assert st.next.name == "probe" and restore_keeps_hold(st)


def test_after_a_keep_hold_restore_compare_then_swap_again_in_the_same_cycle(
        tmp_path: Path) -> None:
    with Journal() as j:
        h = _history(j, tmp_path)
        h.restore(keep_hold=True)
        st = read_runbook(None, j, runs_dir=tmp_path, seat="resident")
        assert st.cycle_closed_at is None                       # the cycle stays open
        assert st.stage("hold").status == "done"
        assert st.stage("restore").status == "todo"             # not the cycle's restore
        assert st.stage("promote").status == "todo"             # nor a branch taken
        swap = st.stage("swap")
        assert swap.status == "stale" and "--keep-hold" in swap.reason, swap
        assert st.stage("probe").status == "stale"              # it needs the swap again
        assert st.next.name == "compare" and not restore_keeps_hold(st)
        assert swap_before_compare(st) is not None              # a swap now would warn again
        h.compare()
        st = read_runbook(None, j, runs_dir=tmp_path, seat="resident")
        assert st.next.name == "swap"
        h.swap()
        st = read_runbook(None, j, runs_dir=tmp_path, seat="candidate")
        assert st.stage("swap").status == "done" and st.next.name == "probe"
        h.probe()
        h.decide("KEEP")
        h.restore()                                             # the cycle's restore
        st = read_runbook(None, j, runs_dir=tmp_path, seat="resident")
        assert st.stage("restore").status == "done"
        assert st.cycle_closed_at is not None                   # it released the hold


def test_a_keep_hold_restore_that_failed_is_the_restore_stage_failed(tmp_path: Path) -> None:
    """Only a keep-hold restore that ended done is a step back; one that failed shows as the
    restore it is (its fix named), and the swap it did not undo stays done."""
    with Journal() as j:
        h = _history(j, tmp_path)
        h.restore("failed", keep_hold=True)
        st = read_runbook(None, j, runs_dir=tmp_path, seat="candidate")
        assert st.stage("restore").status == "failed"
        assert st.stage("swap").status == "done"


def test_keep_hold_refuses_defer_before_reading_anything() -> None:
    from seat_console.actions.swap import build_restore

    with pytest.raises(ValueError, match="--keep-hold releases nothing"):
        build_restore(None, None, keep_hold=True,  # type: ignore[arg-type]
                      defer={"a.timer": datetime.now(UTC)})
    with pytest.raises(ValueError, match="--keep-hold releases nothing"):
        build_restore(None, None, keep_hold=True,  # type: ignore[arg-type]
                      defer_firing=datetime.now(UTC))


def test_the_tuis_restore_keeps_the_hold_where_the_runbook_says_so(tmp_path: Path,
                                                                   monkeypatch) -> None:
    """R on the TUI: its question and its runbook follow the runbook read from the node and
    the journal — keep the hold while the compare is still to come, release it otherwise."""
    from types import SimpleNamespace

    from seat_console.actions import swap as swap_mod
    from seat_console.tui import runbook as rb

    got: list[dict] = []
    monkeypatch.setattr(swap_mod, "build_restore", lambda *a, **k: got.append(k))
    flow = rb.FLOWS["restore"]
    with Journal() as j:
        _history(j, tmp_path)
        before = read_runbook(None, j, runs_dir=tmp_path, seat="candidate")
        h = History(j, tmp_path, t0=datetime.now(UTC))
        h.compare()
        after = read_runbook(None, j, runs_dir=tmp_path, seat="candidate")
    assert restore_keeps_hold(before) and not restore_keeps_hold(after)
    for state, keep in ((before, True), (after, False), (None, False)):
        ctl = rb.RunbookController.__new__(rb.RunbookController)
        ctl.app = SimpleNamespace(runbook_state=state)
        ctl.planning, ctl.thread, ctl.probe = None, None, SimpleNamespace(running=False)
        read: list[str] = []
        ctl._read_plan = lambda f: read.append(f.kind)     # the key's answer, not the node
        ctl.key("restore")
        assert read == ["restore"] and ctl.restore_keep_hold is keep
        # the runbook on screen changes while the confirmation is open: the question, the
        # plan and the run keep the answer the key read
        ctl.app.runbook_state = after if keep else before
        ctl.app.loaded = SimpleNamespace(profile=SimpleNamespace(node=SimpleNamespace(
            name="node-7")))
        q = flow.question(ctl)
        assert q.endswith("and keep the hold (the compare comes next)?") is keep, q
        flow.make(ctl, None, None, None, None)
        flow.make(ctl, None, None, None, None)
        assert [g["keep_hold"] for g in got[-2:]] == [keep, keep]


def test_the_tui_says_r_for_restore_keep_hold_only_where_r_keeps_the_hold(tmp_path: Path) -> None:
    """The compare's refusal advises ``restore --keep-hold``: on the TUI that is "press R" only
    where R's restore keeps the hold (the candidate before the compare); after a compare (an
    INCONCLUSIVE decision, the candidate in the seat) R releases, so the command stays."""
    from types import SimpleNamespace

    from seat_console.tui import runbook as rb

    refusal = "compare starts from the resident … — run `seat-console restore --keep-hold` first"
    keymap = {"node.restore": "R", "node.compare": "C"}
    with Journal() as j:
        h = _history(j, tmp_path)
        before = read_runbook(None, j, runs_dir=tmp_path, seat="candidate")
        h.compare()
        h.decide("INCONCLUSIVE")
        after = read_runbook(None, j, runs_dir=tmp_path, seat="candidate")
    for state, said in ((before, "press R (restore --keep-hold) first"),
                        (after, "run `seat-console restore --keep-hold` first")):
        ctl = SimpleNamespace(app=SimpleNamespace(key_of=keymap.get, runbook_state=state))
        keys = rb.RunbookController.keys(ctl)  # type: ignore[arg-type]
        assert rb.press_keys(refusal, keys).endswith(said)
        assert keys("node.compare") == "C"


def test_recover_completes_a_keep_hold_restore_cut_off_mid_way_as_one(tmp_path: Path) -> None:
    """A console killed inside ``restore --keep-hold``: ``recover`` rebuilds it from the
    journal's rows (inputs ``keep_hold``) — it ends keeping the hold, not releasing it, and is
    not gated on the hold (a lapsed hold must not stop the resident coming back)."""
    from types import SimpleNamespace

    from seat_console.actions import swap as swap_mod

    nctx = SimpleNamespace(loaded=SimpleNamespace(sha256="p" * 64), profile=None)
    with Journal() as j:
        h = _history(j, tmp_path)
        rid = h.restore(None, keep_hold=True)              # no end row: killed mid-way
        rows = [e for e in j.entries() if e.run_id == rid]
        rb = swap_mod.rebuild(nctx, j, rows)  # type: ignore[arg-type]
        assert rb.run_id == rid and rb.ctx.inputs.get("keep_hold") is True
        assert [s.name for s in rb.steps][-1] == "keep hold"
        assert len(rb.gates) == 1                          # the downtime gate alone
        plain = h.restore(None)
        rb = swap_mod.rebuild(nctx, j, [e for e in j.entries() if e.run_id == plain])
        assert [s.name for s in rb.steps][-1] == "release hold"
