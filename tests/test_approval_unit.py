"""Four eyes (issue 30, item 8, optional part): with ``[runbook] approvals = 2`` a swap waits,
before any step, for ``seat-console approve ID`` by a second operator; the requester cannot
approve, nobody approves twice, an unknown / expired / closed request is refused, no approval in
time refuses the run with nothing changed. Two operators are two journals on one file, each
with its own operator (as two consoles of two people)."""

from __future__ import annotations

import json
import threading
from datetime import timedelta
from pathlib import Path

import pytest
from conftest import wait_until

from seat_console.actions import approval as ap
from seat_console.actions.journal import Journal
from seat_console.actions.runbook import GATE_STEP, Check, Runbook, Step
from seat_console.core.base import utcnow

ALICE = {"login": "alice", "sudo_user": None, "ssh_client": None, "tty": None}
BOB = {"login": "root", "sudo_user": "bob", "ssh_client": "203.0.113.9 40000", "tty": None}


def _journals(tmp_path: Path) -> tuple[Journal, Journal]:
    path = tmp_path / "journal.sqlite3"
    return Journal(path, operator=dict(ALICE)), Journal(path, operator=dict(BOB))


def _swap_like(journal: Journal, gate, ran: list[str]) -> Runbook:
    step = Step("stop resident", lambda ctx: Check(True, "stop seat-resident"),
                lambda ctx: ran.append("stop") or "stopped", lambda ctx: "verified")
    return Runbook("swap", [step], journal=journal, gates=[gate])


def test_one_approval_needed_is_no_gate(tmp_path) -> None:
    a, _ = _journals(tmp_path)
    assert ap.approval_gate(a, "swap", 1, 1800) is None


def test_the_plan_says_it_will_wait_and_writes_nothing(tmp_path) -> None:
    a, _ = _journals(tmp_path)
    rb = _swap_like(a, ap.approval_gate(a, "swap", 2, 1800), [])
    plan = rb.plan()
    assert plan.ok and plan.lines[0].step == GATE_STEP
    assert plan.lines[0].text == ("⚠ needs 1 more operator's approval: it waits up to 30 min "
                                  "for `seat-console approve ID` (the ID is printed when it "
                                  "starts)")
    assert a.entries() == []


def test_the_run_waits_for_a_second_operator_then_goes_on(tmp_path) -> None:
    alice, bob = _journals(tmp_path)
    ran: list[str] = []
    rb = _swap_like(alice, ap.approval_gate(alice, "swap", 2, 600, poll_s=0.05), ran)
    out: dict = {}
    t = threading.Thread(target=lambda: out.update(res=rb.run()), daemon=True)
    t.start()
    req = wait_until(lambda: ap.pending(bob), 30, what="the approval request")[0]
    assert req.runbook == "swap" and req.run_id == rb.run_id and req.requested_by == "alice"
    assert ran == []                                          # nothing before the approval
    with pytest.raises(ap.ApprovalError, match="alice requested it: approval .* needs another "
                                               "operator"):
        ap.approve(alice, req.id)                              # the requester cannot approve
    got = ap.approve(bob, req.id[-6:])                        # the short form works too
    assert got.approvers == ("alice", "bob") and got.ready()
    t.join(30)
    res = out["res"]
    assert res.ok and ran == ["stop"]
    assert res.facts["approval"] == {"id": req.id, "approvers": ["alice", "bob"]}
    rows = alice.entries(run_id=req.id)
    assert [(r.kind, r.operator and ap.who_key(r.operator)) for r in rows] == [
        ("request", "alice"), ("approve", "bob"), ("end", "alice")]
    assert rows[-1].outcome == "approved"
    with pytest.raises(ap.ApprovalError, match="is approved: nothing to approve"):
        ap.approve(bob, req.id)                                # closed
    warn = [r for r in alice.entries(run_id=rb.run_id) if r.kind == "warn"]
    assert warn and f"`seat-console approve {req.id}`" in warn[0].outcome


def test_nobody_approves_twice(tmp_path) -> None:
    alice, bob = _journals(tmp_path)
    a = ap.request(alice, "promote", "promote-1", 3, 600)     # three operators (a unit case)
    ap.approve(bob, a.id)
    with pytest.raises(ap.ApprovalError, match="bob approved it already"):
        ap.approve(bob, a.id)
    # the same person through another login (sudo) is the same operator
    bob_again = Journal(alice.path, operator={**BOB, "login": "bob"})
    with pytest.raises(ap.ApprovalError, match="bob approved it already"):
        ap.approve(bob_again, a.id)


def test_unknown_and_expired_requests_are_refused(tmp_path) -> None:
    alice, bob = _journals(tmp_path)
    with pytest.raises(ap.ApprovalError, match=r"no approval request 'nope' in the journal "
                                               r"\(pending: none\)"):
        ap.approve(bob, "nope")
    a = ap.request(alice, "swap", "swap-1", 2, 600)
    with pytest.raises(ap.ApprovalError, match="expired at .* the run was refused"):
        ap.approve(bob, a.id, now=utcnow() + timedelta(seconds=601))


def test_no_approval_in_time_refuses_the_run_with_nothing_changed(tmp_path) -> None:
    alice, _ = _journals(tmp_path)
    ran: list[str] = []
    stop = threading.Event()
    stop.set()                                                 # given up at once (Ctrl-C, hang-up)
    rb = _swap_like(alice, ap.approval_gate(alice, "swap", 2, 600, poll_s=0.05, stop=stop), ran)
    res = rb.run()
    assert res.outcome == "refused" and ran == []
    assert res.error.startswith(f"{GATE_STEP}: not approved by another operator within 10 min "
                                "(approval approval-")
    assert "interrupted): nothing changed" in res.error
    a = ap.approvals(alice)[0]
    assert a.state == "interrupted" and ap.pending(alice) == []
    # a deadline already passed: timed out
    rb = _swap_like(alice, ap.approval_gate(alice, "swap", 2, 0, poll_s=0.05), ran)
    res = rb.run()
    assert res.outcome == "refused" and "timed out" in res.error and ran == []


def test_the_profile_bounds_approvals(tmp_path) -> None:
    from app_fixtures import default_loaded

    from seat_console.core.profile import load_profile
    from seat_console.core.profile_path import ProfileError

    assert default_loaded().profile.runbook.approvals == 1
    base = ('[resident]\nname = "r"\n[[silence.matchers]]\nname = "instance"\n'
            'value = "n:8000"\n')
    f = tmp_path / "p.toml"
    f.write_text(base + "[runbook]\napprovals = 2\napproval_timeout_s = 600\n")
    assert load_profile(f).profile.runbook.approvals == 2
    f.write_text(base + "[runbook]\napprovals = 3\n")
    with pytest.raises(ProfileError, match="approvals"):
        load_profile(f)


def test_seat_console_approve(tmp_path, monkeypatch, capsys) -> None:
    from seat_console.cli import main

    state = tmp_path / "state"
    state.mkdir()
    monkeypatch.setenv("SEAT_CONSOLE_STATE_DIR", str(state))
    alice = Journal(state / "journal.sqlite3", operator=dict(ALICE))
    a = ap.request(alice, "swap", "swap-1", 2, 600)
    monkeypatch.setenv("SUDO_USER", "carol")
    assert main(["approve"]) == 0
    assert f"`seat-console approve {a.id}`" in capsys.readouterr().out
    assert main(["approve", a.id, "--dry-run"]) == 0
    assert f"would approve {a.id}" in capsys.readouterr().out
    assert [r.kind for r in alice.entries(run_id=a.id)] == ["request"]   # nothing written
    assert main(["approve", a.id, "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["approval"]["approvers"] == ["alice", "carol"]
    assert main(["approve", a.id]) == 5
    assert "refused, nothing written: carol approved it already" in capsys.readouterr().err
    rows = alice.entries(run_id=a.id)
    assert rows[-1].kind == "approve" and rows[-1].operator["sudo_user"] == "carol"


def test_swap_and_compare_get_the_gate_a_compare_leg_does_not(tmp_path) -> None:
    from test_actions_seam import SWAP_PROFILE, FakeEngine, FakeNodeContext

    from seat_console.actions import compare as cmp_mod
    from seat_console.actions import swap as swap_mod
    from seat_console.core.profile import load_profile

    f = tmp_path / "p.toml"
    f.write_text(SWAP_PROFILE + "[runbook]\napprovals = 2\n")
    nctx = FakeNodeContext(load_profile(f), FakeEngine())
    j = Journal(tmp_path / "j.sqlite3", operator=dict(ALICE))
    assert len(swap_mod.build_swap(nctx, j).gates) == 1
    assert swap_mod.build_swap(nctx, j, approval=False).gates == []
    rb, _ = cmp_mod.build_compare(nctx, j, options=cmp_mod.CompareOptions(
        data_root=tmp_path / "data"))
    assert len(rb.gates) == 3         # the seat's state, the candidate's image, the approval
    f.write_text(SWAP_PROFILE)
    assert swap_mod.build_swap(FakeNodeContext(load_profile(f), FakeEngine()), j).gates == []
