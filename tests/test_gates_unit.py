"""State-aware gates (issue 30, item 4), the release that degrades (item 7) and the non-TUI
defects of item 9, at the step seam: the docker engine is the in-process fake of
``test_actions_seam`` (:class:`FakeNodeContext`), systemd and Alertmanager are replaced at the
functions the steps call (``hold._timer``, ``hold._forecast``, ``node_ops.*``, ``hold._am``).
Every refusal sentence is checked word for word where it names the state and the fix; the lab
tests (``test_gates_lab``) check the same against real parts."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from test_actions_seam import RESIDENT, SWAP_PROFILE, FakeEngine, FakeNodeContext

from seat_console.actions import gates
from seat_console.actions import hold as hold_mod
from seat_console.actions import node_ops
from seat_console.actions import swap as swap_mod
from seat_console.actions.journal import Journal
from seat_console.actions.runbook import GATE_STEP, RunContext, StepError
from seat_console.core.profile import load_profile
from seat_console.node.alertmanager import AlertmanagerError
from seat_console.sources.silences import Silence
from seat_console.sources.timers import StartForecast, TimerState, TriggerForecast

TIMER = "fleet-remediation-cycle.timer"
NOW = datetime.now(UTC).replace(microsecond=0)


def _ctx(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, *, resident: bool,
         probe: bool) -> FakeNodeContext:
    f = tmp_path / "p.toml"
    f.write_text(SWAP_PROFILE)
    monkeypatch.setattr(swap_mod, "wait_serving", lambda c, *a, **k: f"{c.name} serving")
    nctx = FakeNodeContext(load_profile(f), FakeEngine())
    nctx.engine.add("res0001", "seat-resident", RESIDENT["image_id"], running=resident)
    nctx.engine.add("prb0001", "seat-probe", "sha256:" + "c" * 64, running=probe)
    return nctx


def _rc(facts: dict[str, Any] | None = None) -> RunContext:
    return RunContext(run_id="r-1", runbook="x", inputs={}, facts=dict(facts or {}))


def _hold(stopped: tuple[str, ...] = (TIMER,), silence_id: str | None = "sil-1",
          ends_in_s: int = 600) -> hold_mod.HoldState:
    return hold_mod.HoldState(
        hold_id="seat-hold-20261205t030000z-ab12", run_id="hold-1", state="active",
        lease_unit="seat-hold-20261205t030000z-ab12-lease.timer", silence_id=silence_id,
        stopped=stopped, expires_at=NOW + timedelta(seconds=ends_in_s), placed_at=NOW,
        placed_by="op@node", reason="test",
        timers_before={TIMER: {"next_elapse": None, "last_trigger": None,
                               "persistent": False}})


def _journal_hold(journal: Journal, h: hold_mod.HoldState) -> None:
    """A finished hold run in ``journal`` (the facts ``holds`` reads)."""
    facts = {"hold": {"hold_id": h.hold_id, "lease": h.lease_unit.removesuffix(".timer"),
                      "silence_id": h.silence_id, "stopped": list(h.stopped),
                      "expires_at": hold_mod.iso(h.expires_at), "reason": h.reason,
                      "timers_before": h.timers_before}}
    journal.append(run_id=h.run_id, runbook="hold", kind="start", outcome="started",
                   facts=facts)
    journal.append(run_id=h.run_id, runbook="hold", kind="end", outcome="done", facts=facts)


def _journal_swap(journal: Journal) -> None:
    journal.append(run_id="swap-1", runbook="swap", kind="start", outcome="started")
    journal.append(run_id="swap-1", runbook="swap", kind="end", outcome="done",
                   facts={"resident": dict(RESIDENT), "probe_id": "prb0001"})


def _promote(journal: Journal, runbook: str, run_id: str) -> None:
    journal.append(run_id=run_id, runbook=runbook, kind="start", outcome="started")
    journal.append(run_id=run_id, runbook=runbook, kind="end", outcome="done")


# -- who holds the seat -------------------------------------------------------------------------
@pytest.mark.parametrize("resident, probe, holder", [
    (True, False, "resident"), (False, True, "candidate"), (True, True, "both"),
    (False, False, "none")])
def test_the_seat_is_read_from_docker(tmp_path, monkeypatch, resident, probe, holder) -> None:
    assert gates.read_seat(_ctx(tmp_path, monkeypatch, resident=resident,
                                probe=probe)).holder == holder


def test_an_unreadable_docker_is_unknown_with_the_reason(tmp_path, monkeypatch) -> None:
    nctx = _ctx(tmp_path, monkeypatch, resident=True, probe=False)

    def boom(timeout_s: float = 5.0) -> Any:
        raise ConnectionError("no engine at unix:///nowhere")
    monkeypatch.setattr(nctx, "docker", boom)
    seat = gates.read_seat(nctx)
    assert seat.holder == "unknown" and "no engine at unix:///nowhere" in seat.words()


# -- compare: only with the resident in the seat ------------------------------------------------
COMPARE_REFUSED = {
    "candidate": "compare starts from the resident in the seat (it is arm A), but the candidate "
                 "seat-probe holds the seat (running; the resident seat-resident is stopped) — "
                 "run `seat-console restore --keep-hold` first (the resident back, the hold "
                 "kept), then compare",
    "none": "compare starts from the resident in the seat (it is arm A), but nothing holds the "
            "seat: neither seat-resident nor seat-probe is running — run `seat-console "
            "restore` (or `docker start seat-resident`) first, then compare",
    "both": "compare starts from the resident in the seat (it is arm A), but both the resident "
            "seat-resident and the candidate seat-probe are running — stop the one that should "
            "not serve (`docker stop seat-probe`), then compare",
}


@pytest.mark.parametrize("resident, probe, holder", [
    (False, True, "candidate"), (False, False, "none"), (True, True, "both")])
def test_compare_is_refused_unless_the_resident_holds_the_seat(
        tmp_path, monkeypatch, resident, probe, holder) -> None:
    from seat_console.actions import compare as cmp_mod

    nctx = _ctx(tmp_path, monkeypatch, resident=resident, probe=probe)
    journal = Journal(tmp_path / "j.sqlite3")
    rb, _ = cmp_mod.build_compare(nctx, journal, options=cmp_mod.CompareOptions(
        data_root=tmp_path / "data"))
    plan = rb.plan()
    assert not plan.ok
    assert plan.lines[0].step == GATE_STEP and plan.lines[0].error == COMPARE_REFUSED[holder]
    res = rb.run()
    assert res.outcome == "refused" and res.error == f"{GATE_STEP}: {COMPARE_REFUSED[holder]}"
    assert nctx.engine.calls == []                            # nothing touched
    rows = journal.entries(run_id=rb.run_id)
    assert [(r.kind, r.step) for r in rows] == [("start", ""), ("fail", GATE_STEP), ("end", "")]
    assert rows[-1].outcome == "refused"


def test_compare_is_refused_before_any_leg_when_the_candidates_image_is_missing(
        tmp_path, monkeypatch) -> None:
    """A new engineer's `compare --dry-run` planned a clean run while `swap --dry-run` refused
    for the backport image not built: the run would have restarted the resident (leg A1)
    before failing to start the candidate (B2). The compare now refuses at its gates with
    swap's own sentence, and a run changes nothing."""
    from seat_console.actions import compare as cmp_mod

    nctx = _ctx(tmp_path, monkeypatch, resident=True, probe=False)
    journal = Journal(tmp_path / "j.sqlite3")
    rb, _ = cmp_mod.build_compare(nctx, journal, options=cmp_mod.CompareOptions(
        data_root=tmp_path / "data"))
    missing = "swap.image 'img:1' is not on the engine (pull it first)"
    plan = rb.plan()
    assert not plan.ok and plan.refusals == (missing,)
    assert plan.text_lines()[0] == f"✗ {GATE_STEP}: {missing}"
    res = rb.run()
    assert res.outcome == "refused" and missing in res.describe()
    assert nctx.engine.calls == []
    nctx.engine.images["img:1"] = {"Id": "sha256:" + "d" * 64}
    rb2, _ = cmp_mod.build_compare(nctx, journal, options=cmp_mod.CompareOptions(
        data_root=tmp_path / "data"))
    assert rb2.plan().ok


def test_compare_plan_with_the_candidate_in_the_seat_agrees_with_its_refusal(
        tmp_path, monkeypatch) -> None:
    """The dry run with the candidate in the seat and a hold (issue 30 follow-up, item 3): the
    gate's refusal names `restore` (which releases the hold), so the steps under it say what
    the compare does once that is done — place its own hold — never "use the active hold"
    or "the resident already holds the seat"."""
    from seat_console.actions import compare as cmp_mod

    nctx = _ctx(tmp_path, monkeypatch, resident=False, probe=True)
    nctx.engine.images["img:1"] = {"Id": "sha256:" + "d" * 64}   # the candidate's image
    journal = Journal(tmp_path / "j.sqlite3")
    h = _hold()
    _journal_hold(journal, h)
    rb, _ = cmp_mod.build_compare(nctx, journal, options=cmp_mod.CompareOptions(
        data_root=tmp_path / "data"))
    plan = rb.plan()
    text = plan.text_lines()
    assert text[0] == f"✗ {GATE_STEP}: {COMPARE_REFUSED['candidate']}"
    assert text[1] == "not run now: once the refusal above is fixed, compare would:"
    assert text[2].startswith("  • place a hold for 1 h") and h.hold_id in text[2], text[2]
    assert all(line.startswith("  ") for line in text[2:])
    joined = "\n".join(text)
    assert "use the active hold" not in joined and "already holds the seat" not in joined
    assert "the last leg is the resident's" in text[-2], text


def test_compare_passes_the_gate_with_the_resident_in_the_seat(tmp_path, monkeypatch) -> None:
    nctx = _ctx(tmp_path, monkeypatch, resident=True, probe=False)
    ctx = _rc()
    assert gates.compare_gate(nctx)(ctx) is None and ctx.facts["seat_holder"] == "resident"


# -- release: refused while the candidate holds the seat without a promote ----------------------
RELEASE_REFUSED = (
    "the candidate seat-probe holds the seat (running; the resident seat-resident is stopped) "
    "and no promote made it the resident: releasing the hold now would hand the fleet's timers "
    "and alerts a seat serving the candidate — run `seat-console restore` (the resident back, "
    "then the hold released) or `seat-console promote` (once the decision is PROMOTE-ABLE); to "
    "release anyway: `seat-console release --force --reason TEXT` (journaled)")


def test_release_is_refused_while_the_candidate_holds_the_seat(tmp_path, monkeypatch) -> None:
    nctx = _ctx(tmp_path, monkeypatch, resident=False, probe=True)
    journal = Journal(tmp_path / "j.sqlite3")
    rb = hold_mod.build_release(nctx, journal, _hold())
    plan = rb.plan()
    assert plan.lines[0].error == RELEASE_REFUSED and not plan.ok
    res = rb.run()
    assert res.outcome == "refused" and res.error == f"{GATE_STEP}: {RELEASE_REFUSED}"
    fail = [r for r in journal.entries(run_id=rb.run_id) if r.kind == "fail"]
    assert [(r.step, r.outcome) for r in fail] == [(GATE_STEP, RELEASE_REFUSED)]
    # a release refused changed nothing: the hold is still the one to release
    assert all(s.status == "not-run" for s in res.steps)


def test_release_force_with_a_reason_goes_on_and_is_journaled(tmp_path, monkeypatch) -> None:
    nctx = _ctx(tmp_path, monkeypatch, resident=False, probe=True)
    journal = Journal(tmp_path / "j.sqlite3")
    ctx = _rc()
    gate = gates.release_gate(nctx, journal, force=True, reason="node is being drained")
    text = gate(ctx)
    assert text == ("FORCED (reason: node is being drained): released while the candidate "
                    "seat-probe holds the seat (running; the resident seat-resident is stopped) "
                    "and no promote made it the resident — the fleet's timers and alerts now "
                    "act on it")
    assert ctx.facts["forced"] == {"gate": "release", "state": "candidate",
                                   "reason": "node is being drained"}
    with pytest.raises(StepError, match="--force needs --reason"):
        gates.release_gate(nctx, journal, force=True, reason=" ")(_rc())
    # journaled as a warning of the run, before any step (no step here: the gate only)
    from seat_console.actions.runbook import Runbook

    rb = Runbook("release", [], journal=journal, gates=[gate])
    res = rb.run()
    assert res.ok and res.warnings == (text,)
    warn = [r for r in journal.entries(run_id=rb.run_id) if r.kind == "warn"]
    assert [(r.step, r.outcome) for r in warn] == [(GATE_STEP, text)]
    assert warn[0].facts["forced"]["reason"] == "node is being drained"


def test_a_promote_in_effect_lets_the_release_go(tmp_path, monkeypatch) -> None:
    nctx = _ctx(tmp_path, monkeypatch, resident=False, probe=True)
    journal = Journal(tmp_path / "j.sqlite3")
    gate = gates.release_gate(nctx, journal)
    _promote(journal, "promote", "promote-1")
    assert gates.promote_in_effect(journal) is not None and gate(_rc()) is None
    _promote(journal, "promote-undo", "promote-undo-1")      # undone: refused again
    assert gates.promote_in_effect(journal) is None
    with pytest.raises(StepError) as e:
        gate(_rc())
    assert str(e.value) == RELEASE_REFUSED


def test_release_with_the_resident_in_the_seat_passes_and_unknown_warns(
        tmp_path, monkeypatch) -> None:
    nctx = _ctx(tmp_path, monkeypatch, resident=True, probe=False)
    journal = Journal(tmp_path / "j.sqlite3")
    assert gates.release_gate(nctx, journal)(_rc()) is None
    monkeypatch.setattr(nctx, "docker", lambda timeout_s=5.0: (_ for _ in ()).throw(
        ConnectionError("engine down")))
    text = gates.release_gate(nctx, journal)(_rc())
    assert text is not None and text.startswith(
        "who holds the seat cannot be read (ConnectionError: engine down): released anyway")


# -- an action that takes the seat down without a hold says so first ----------------------------
DOWN_NO_HOLD = (
    "the restore takes the seat down WITHOUT a hold (no hold is in effect): it stops the "
    "candidate and starts the resident while the fleet's timers and alerts are live, so they "
    "may page or remediate the seat meanwhile — to keep them off, place a hold first "
    "(`seat-console hold`)")


def test_restore_without_a_hold_says_so_first_in_its_plan(tmp_path, monkeypatch) -> None:
    nctx = _ctx(tmp_path, monkeypatch, resident=False, probe=True)
    journal = Journal(tmp_path / "j.sqlite3")
    _journal_swap(journal)
    rb = swap_mod.build_restore(nctx, journal)
    plan = rb.plan()
    assert plan.lines[0].step == GATE_STEP and plan.lines[0].text == f"⚠ {DOWN_NO_HOLD}"
    assert plan.text_lines()[0] == f"– ⚠ {DOWN_NO_HOLD}"
    assert plan.ok                                             # a warning, not a refusal


@pytest.mark.parametrize("hold, problem, resident, says", [
    (None, None, False, "no hold is in effect"),
    ("h", "its lease x.timer is not armed on the node (not-found/inactive): nothing restores "
          "the timers at its end", False,
     "hold seat-hold-20261205t030000z-ab12 is in the journal but its lease x.timer is not "
     "armed on the node"),
    ("h", None, False, None),              # held: nothing to say
    (None, None, True, None),              # the resident serves: nothing goes down
])
def test_the_downtime_gate(tmp_path, monkeypatch, hold, problem, resident, says) -> None:
    nctx = _ctx(tmp_path, monkeypatch, resident=resident, probe=not resident)
    h = _hold() if hold else None
    text = gates.downtime_gate(nctx, lambda: (h, problem), "promote",
                               "stops the resident and starts the candidate")(_rc())
    if says is None:
        assert text is None
    else:
        assert text is not None and says in text
        assert text.startswith("the promote takes the seat down WITHOUT a hold (")


def test_hold_in_effect_reads_the_lease_on_the_node(tmp_path, monkeypatch) -> None:
    nctx = _ctx(tmp_path, monkeypatch, resident=True, probe=False)
    journal = Journal(tmp_path / "j.sqlite3")
    assert hold_mod.hold_in_effect(nctx, journal) == (None, None)
    _journal_hold(journal, _hold())
    lease = TimerState(unit="x", load_state="not-found", active_state="inactive")
    monkeypatch.setattr(node_ops, "read_lease", lambda tr, name, **k: lease)
    h, problem = hold_mod.hold_in_effect(nctx, journal)
    assert h is not None and problem == (
        "its lease seat-hold-20261205t030000z-ab12-lease.timer is not armed on the node "
        "(not-found/inactive): nothing restores the timers at its end")
    lease = TimerState(unit="x", load_state="loaded", active_state="active",
                       sub_state="waiting", next_elapse=NOW + timedelta(minutes=9))
    assert hold_mod.hold_in_effect(nctx, journal)[1] is None


# -- restore forecasts the timers that fire at once and takes --defer ---------------------------
def _node_for_release(monkeypatch: pytest.MonkeyPatch, *, am: Any, calls: list[str],
                      fires: bool = True) -> None:
    """systemd and Alertmanager as the release's steps call them."""
    stopped = TimerState(unit=TIMER, load_state="loaded", active_state="inactive",
                         sub_state="dead")
    started = TimerState(unit=TIMER, load_state="loaded", active_state="active",
                         sub_state="waiting", next_elapse=NOW + timedelta(minutes=5))
    state = {"t": stopped, "lease": True}
    trig = TriggerForecast(trigger="OnUnitActiveSec=2min", elapse=NOW - timedelta(minutes=1),
                           base="2 min after the service last started", at_once=fires)
    fc = StartForecast(unit=TIMER, at=NOW, triggers=(trig,))
    monkeypatch.setattr(hold_mod, "_timer", lambda nctx, unit: state["t"])
    monkeypatch.setattr(hold_mod, "_forecast", lambda nctx, unit: fc)

    def start(tr: Any, unit: str, **k: Any) -> Any:
        calls.append(f"start {unit}")
        state["t"] = started
        return type("Ch", (), {"after": started})()

    def lease_state(tr: Any, name: str, **k: Any) -> TimerState:
        return TimerState(unit=f"{name}.timer", load_state="loaded" if state["lease"]
                          else "not-found", active_state="active" if state["lease"]
                          else "inactive", sub_state="waiting",
                          next_elapse=NOW + timedelta(minutes=9))

    def cancel(tr: Any, name: str, **k: Any) -> None:
        calls.append(f"cancel {name}")
        state["lease"] = False
    monkeypatch.setattr(node_ops, "start_timer", start)
    monkeypatch.setattr(node_ops, "read_lease", lease_state)
    monkeypatch.setattr(node_ops, "cancel_lease", cancel)
    monkeypatch.setattr(hold_mod, "_am", lambda nctx: am)


class _AM:
    """Alertmanager as the release calls it: one silence, or unreachable."""

    url = "http://am.example:9093"

    def __init__(self, silence: Silence | None, down: bool = False) -> None:
        self.silence, self.down, self.expired = silence, down, []

    def _check(self) -> None:
        if self.down:
            raise AlertmanagerError("unreachable", "GET http://am.example:9093/api/v2/silence"
                                                   ": connection refused")

    def get_silence(self, sid: str) -> Silence:
        self._check()
        assert self.silence is not None and sid == self.silence.id
        return self.silence

    def list_silences(self) -> list[Silence]:
        self._check()
        return [self.silence] if self.silence else []

    def delete_silence(self, sid: str) -> None:
        self._check()
        self.expired.append(sid)


def _silence(h: hold_mod.HoldState) -> Silence:
    return Silence(id="sil-1", state="active", matchers=(), starts_at=h.placed_at,
                   ends_at=h.expires_at, comment=f"[{h.hold_id}]")


def test_restore_plan_names_each_timer_that_fires_at_once(tmp_path, monkeypatch) -> None:
    nctx = _ctx(tmp_path, monkeypatch, resident=False, probe=True)
    journal = Journal(tmp_path / "j.sqlite3")
    h = _hold()
    _journal_hold(journal, h)
    _journal_swap(journal)
    _node_for_release(monkeypatch, am=_AM(_silence(h)), calls=[])
    rb = swap_mod.build_restore(nctx, journal)
    ctx = rb.ctx
    c = next(s for s in rb.steps if s.name == "release hold").check(ctx)
    assert c.go and c.text.startswith(f"release hold {h.hold_id}: start {TIMER}")
    assert (f"⚠ {TIMER} fires at once when started: OnUnitActiveSec=2min elapsed at "
            f"{hold_mod.iso(NOW - timedelta(minutes=1))}") in c.text
    assert f"`seat-console restore --defer {TIMER}=WHEN`" in c.text
    assert "seat-console release --defer" not in c.text
    assert ctx.facts["forecast"][TIMER]["fires_at_once"] is True
    # the plan carries the forecast (a front offers "defer those" from it)
    assert rb.plan().facts["forecast"][TIMER]["fires_at_once"] is True


def test_restore_defers_a_timer_as_release_does(tmp_path, monkeypatch) -> None:
    nctx = _ctx(tmp_path, monkeypatch, resident=False, probe=True)
    journal = Journal(tmp_path / "j.sqlite3")
    h = _hold()
    _journal_hold(journal, h)
    _journal_swap(journal)
    _node_for_release(monkeypatch, am=_AM(_silence(h)), calls=[])
    at = NOW + timedelta(minutes=30)
    rb = swap_mod.build_restore(nctx, journal, defer_firing=at)
    c = next(s for s in rb.steps if s.name == "release hold").check(rb.ctx)
    assert (f"defer {TIMER}: keep it stopped until {hold_mod.iso(at)}, when the transient "
            f"timer {h.hold_id}-defer-fleet-remediation-cycle.timer on the node starts it"
            in c.text)
    assert rb.ctx.inputs["defer_firing"] == hold_mod.iso(at)
    with pytest.raises(ValueError, match="--defer other.timer: hold seat-hold-.* did not "
                                         "stop it"):
        swap_mod.build_restore(nctx, journal, defer={"other.timer": at})


# -- release degrades when Alertmanager is unreachable (item 7) ---------------------------------
def test_release_with_alertmanager_down_restarts_timers_cancels_lease_and_says_what_remains(
        tmp_path, monkeypatch) -> None:
    nctx = _ctx(tmp_path, monkeypatch, resident=True, probe=False)
    journal = Journal(tmp_path / "j.sqlite3")
    h = _hold()
    _journal_hold(journal, h)
    calls: list[str] = []
    _node_for_release(monkeypatch, am=_AM(_silence(h), down=True), calls=calls, fires=False)
    rb = hold_mod.build_release(nctx, journal, h)
    plan = rb.plan()
    assert plan.ok, plan.text_lines()                          # not refused
    line = next(x.text for x in plan.lines if x.step == "expire silence")
    assert f"lapses by itself at {hold_mod.iso(h.expires_at)}" in line
    res = rb.run()
    assert calls == [f"start {TIMER}", f"cancel {h.lease_unit.removesuffix('.timer')}"]
    assert res.outcome == "partial"
    assert res.remaining == (
        "expire silence: not done (Alertmanager at http://127.0.0.1:9093 cannot be reached "
        "(GET http://am.example:9093/api/v2/silence: connection refused): silence sil-1 is left "
        f"in place and lapses by itself at {hold_mod.iso(h.expires_at)} — to end it sooner, "
        "once Alertmanager answers: `amtool silence expire sil-1` (or `seat-console release` "
        "again))",)
    assert res.manual[0].startswith(f"nothing (it lapses by itself at "
                                    f"{hold_mod.iso(h.expires_at)})")
    assert res.facts["silence_left"] == {"id": "sil-1", "lapses_at": hold_mod.iso(h.expires_at),
                                         "why": "GET http://am.example:9093/api/v2/silence: "
                                                "connection refused"}
    st = {s.step: s.status for s in res.steps}
    assert st == {f"start {TIMER}": "done", "expire silence": "failed", "cancel lease": "done"}
    # the journal says release-partial: a later release (Alertmanager back) finishes it
    assert next(x for x in hold_mod.holds(journal) if x.hold_id == h.hold_id).state == \
        "release-partial"


def test_a_non_connection_alertmanager_error_still_refuses_the_silence_step(
        tmp_path, monkeypatch) -> None:
    nctx = _ctx(tmp_path, monkeypatch, resident=True, probe=False)
    h = _hold()
    am = _AM(_silence(h))

    def forbidden(sid: str) -> Silence:
        raise AlertmanagerError("auth", "401 from Alertmanager: check [alertmanager] auth")
    am.get_silence = forbidden  # type: ignore[method-assign]
    _node_for_release(monkeypatch, am=am, calls=[])
    rb = hold_mod.build_release(nctx, Journal(tmp_path / "j.sqlite3"), h)
    step = next(s for s in rb.steps if s.name == "expire silence")
    with pytest.raises(StepError, match="401 from Alertmanager"):
        step.check(rb.ctx)


# -- hold --status: exit 3 when the hold's silence (or lease) cannot be read (item 9) ------------
def test_hold_status_exits_unavailable_when_the_silence_cannot_be_read(
        tmp_path, monkeypatch, capsys) -> None:
    from seat_console.commands import hold_cmd
    from seat_console.sources.timers import TimersReading

    nctx = _ctx(tmp_path, monkeypatch, resident=True, probe=False)
    journal = Journal(tmp_path / "j.sqlite3")
    h = _hold()
    _journal_hold(journal, h)
    armed = TimerState(unit=h.lease_unit, load_state="loaded", active_state="active",
                       sub_state="waiting", next_elapse=h.expires_at)
    monkeypatch.setattr(node_ops, "node_leases", lambda tr, **k: [armed])
    monkeypatch.setattr(node_ops, "read_lease", lambda tr, name, **k: armed)
    monkeypatch.setattr(hold_cmd, "read_timers", lambda tr, units, **k: TimersReading(
        read_at=datetime.now(UTC), where="fake", timers=()))

    class DownAM:
        def get_silence(self, sid: str) -> Silence:
            raise AlertmanagerError("unreachable", "GET …/silence/sil-1: connection refused")
    monkeypatch.setattr(type(nctx), "alertmanager", property(lambda self: DownAM()))
    code = hold_cmd.status(nctx, journal, True)
    out = json.loads(capsys.readouterr().out)
    assert code == 3 and out["unreadable"] == ["silence"]
    assert out["silence"]["error"].endswith("connection refused")
    assert hold_cmd.status(nctx, journal, False) == 3
    assert "NOT READ: silence (exit 3" in capsys.readouterr().out

    class UpAM:
        def get_silence(self, sid: str) -> Silence:
            return _silence(h)
    monkeypatch.setattr(type(nctx), "alertmanager", property(lambda self: UpAM()))
    assert hold_cmd.status(nctx, journal, True) == 0
    assert json.loads(capsys.readouterr().out)["unreadable"] == []


# -- the hold's plan names the lease unit the run then creates (item 9) -------------------------
def test_the_hold_run_creates_the_lease_its_plan_named(tmp_path, monkeypatch) -> None:
    """The TUI plans with one runbook and runs another (its controller's flow builds it twice):
    the run must schedule the lease unit the confirmed plan showed, not a new hold ID's."""
    from types import SimpleNamespace

    from app_fixtures import default_loaded

    from seat_console.node.context import NodeContext
    from seat_console.node.runner import CommandResult
    from seat_console.sources.timers import TimersReading
    from seat_console.tui.runbook import FLOWS

    unit = NodeContext(default_loaded()).timer_units[0]

    def fake_read(transport: Any, units: Any, **kw: Any) -> TimersReading:
        return TimersReading(read_at=datetime.now(UTC), where="fake", timers=tuple(
            TimerState(unit=u, load_state="loaded",
                       active_state="active" if u == unit else "inactive",
                       sub_state="waiting") for u in units))
    monkeypatch.setattr(hold_mod, "read_timers", fake_read)
    monkeypatch.setattr(node_ops, "read_timers", fake_read)
    monkeypatch.setattr(node_ops, "node_leases", lambda tr, **k: [])
    scheduled: list[str] = []

    def fake_schedule(transport: Any, name: str, ttl_s: int, timers: Any, **kw: Any) -> Any:
        scheduled.append(f"{name}.timer")
        return None, CommandResult(argv=("systemd-run",), rc=0, stdout="", ok=True,
                                   started_at=datetime.now(UTC), duration_s=0.01)
    monkeypatch.setattr(node_ops, "schedule_lease", fake_schedule)

    class Tr:
        where, _node_path = "fake", "/usr/bin"

        def resolve(self, b: str) -> tuple[str, None]:
            return f"/usr/bin/{b}", None
    nctx = NodeContext(default_loaded(), transport=Tr(), alertmanager=object())
    journal = Journal(tmp_path / "j.sqlite3")
    ctl = SimpleNamespace(hold_ttl_s=600, reason="r", plan_facts=None)
    make = FLOWS["hold"].make
    plan = make(ctl, journal, nctx, None, None).plan()        # the plan thread's runbook
    line = next(x.text for x in plan.lines if x.step == "schedule lease")
    named = line.split("schedule lease ")[1].split(" on ")[0]
    ctl.plan_facts = dict(plan.facts)                         # what the confirmation showed
    run_rb = make(ctl, journal, nctx, None, None)             # the run thread's runbook
    run_rb.steps[0].apply(run_rb.ctx)
    assert scheduled == [named]
    with pytest.raises(ValueError, match="is not one"):
        hold_mod.build_hold(nctx, journal, ttl_s=600, hold_id="seat-hold-x; rm -rf /")


def test_compare_refused_when_docker_cannot_be_read_and_release_warns_on_both(
        tmp_path, monkeypatch) -> None:
    nctx = _ctx(tmp_path, monkeypatch, resident=True, probe=True)
    journal = Journal(tmp_path / "j.sqlite3")
    text = gates.release_gate(nctx, journal)(_rc())
    assert text == ("both the resident seat-resident and the candidate seat-probe are running: "
                    "the candidate may be serving callers and no promote made it the resident "
                    "— `seat-console restore` stops it")
    monkeypatch.setattr(nctx, "docker", lambda timeout_s=5.0: (_ for _ in ()).throw(
        ConnectionError("engine down")))
    with pytest.raises(StepError) as e:
        gates.compare_gate(nctx)(_rc())
    assert str(e.value) == ("compare starts from the resident in the seat (it is arm A), but "
                            "who holds the seat cannot be read (ConnectionError: engine down) — "
                            "fix the docker connection (`docker ps` on the node), then compare")


def test_swap_with_the_candidate_in_the_seat_says_the_state_and_what_to_run_next(
        tmp_path, monkeypatch) -> None:
    """`swap --dry-run` with the candidate already serving (issue 30 follow-up, item 4): not
    the dead end "the resident is not running: nothing to swap out", but the state (which
    swap started it) and the next commands; nothing is touched."""
    nctx = _ctx(tmp_path, monkeypatch, resident=False, probe=True)
    journal = Journal(tmp_path / "j.sqlite3")
    _journal_hold(journal, _hold())
    _journal_swap(journal)
    rb = swap_mod.build_swap(nctx, journal)
    plan = rb.plan()
    assert not plan.ok
    err = plan.refusals[0]
    assert err.startswith("the candidate seat-probe already holds the seat (running, started "
                          "by swap run swap-1 at "), err
    for cmd in ("`seat-console probe`", "`seat-console compare`", "`seat-console restore`"):
        assert cmd in err
    assert "nothing to swap out" not in "\n".join(plan.text_lines())
    assert "already stopped" not in "\n".join(plan.text_lines())
    assert rb.run().outcome == "refused" and nctx.engine.calls == []


def test_swap_names_every_gate_that_refuses_at_once(tmp_path, monkeypatch) -> None:
    """`swap --dry-run` with no hold and a candidate that does not fit: both named, each on its
    own ✗ line (a trial's dry run named only the first, and the engineer met the second after
    fixing it); a run refuses with both; the containers are not touched."""
    nctx = _ctx(tmp_path, monkeypatch, resident=True, probe=False)
    journal = Journal(tmp_path / "j.sqlite3")
    monkeypatch.setattr(swap_mod, "fit_verdict",
                        lambda n: (False, "does not fit: 24.74 GiB per card must leave"))
    no_hold = ("no active hold: place one first (`seat-console hold`) — the swap stops the "
               "resident, and the fleet's timers and alerts must be held")
    no_fit = ("the fit budget: does not fit: 24.74 GiB per card must leave (or --force "
              "--reason '…')")
    rb = swap_mod.build_swap(nctx, journal)
    plan = rb.plan()
    assert not plan.ok and plan.refusals[:2] == (no_hold, no_fit)
    lines = plan.text_lines()
    assert f"✗ record resident: {no_hold}" in lines and f"✗ record resident: {no_fit}" in lines
    res = rb.run()
    assert res.outcome == "refused" and no_hold in res.describe() and no_fit in res.describe()
    # one of them alone reads as before
    _journal_hold(journal, _hold())
    assert swap_mod.build_swap(nctx, journal).plan().refusals[0] == no_fit
    assert nctx.engine.calls == []


def test_the_hold_plan_names_one_end_for_the_lease_and_the_silence(tmp_path, monkeypatch
                                                                    ) -> None:
    """Met by a new on-call engineer: the plan's lease line said ``at 21:10Z`` and its silence
    line ``until 2026-12-05T21:11:00Z`` — two forms and, a second apart, two instants for one
    hold's end. Both lines now give the same instant in the same form."""
    import re
    from types import SimpleNamespace

    from app_fixtures import default_loaded

    from seat_console.node.context import NodeContext
    from seat_console.sources.timers import TimersReading
    from seat_console.tui.runbook import FLOWS

    units = NodeContext(default_loaded()).timer_units

    def fake_read(transport: Any, us: Any, **kw: Any) -> TimersReading:
        return TimersReading(read_at=datetime.now(UTC), where="fake", timers=tuple(
            TimerState(unit=u, load_state="loaded", active_state="active",
                       sub_state="waiting") for u in units))
    monkeypatch.setattr(hold_mod, "read_timers", fake_read)
    monkeypatch.setattr(node_ops, "read_timers", fake_read)
    monkeypatch.setattr(node_ops, "node_leases", lambda tr, **k: [])
    # the embedded profile's matcher names the node's Prometheus instance, not 127.0.0.1
    monkeypatch.setattr(hold_mod, "coverage_warnings", lambda matchers, endpoint, instance=None: [])
    ticks = iter(range(10_000))
    real_now = hold_mod.utcnow
    # each call a second later: the plan's lines are checked at different instants
    monkeypatch.setattr(hold_mod, "utcnow", lambda: real_now() + timedelta(seconds=next(ticks)))

    class Tr:
        where, _node_path = "fake", "/usr/bin"

        def resolve(self, b: str) -> tuple[str, None]:
            return f"/usr/bin/{b}", None

    class AM:
        url = "http://am.invalid:9093"

        def list_silences_tolerant(self) -> list:
            return []
    nctx = NodeContext(default_loaded(), transport=Tr(), alertmanager=AM())
    ctl = SimpleNamespace(hold_ttl_s=3600, reason="r", plan_facts=None)
    plan = FLOWS["hold"].make(ctl, Journal(tmp_path / "j.sqlite3"), nctx, None, None).plan()
    text = {x.step: x.text or str(x.error) for x in plan.lines}
    lease = re.search(r"at (\S+Z) \(1 h after it is placed\)", text["schedule lease"])
    silence = re.search(r"until (\S+Z)", text["silence seat"])
    assert lease and silence, "\n".join(f"{k}: {v}" for k, v in text.items())
    assert lease.group(1) == silence.group(1), text


def test_one_refusal_of_several_steps_is_one_line_and_the_count_is_what_is_shown() -> None:
    """swap --dry-run on a profile without [swap]: the one missing table refused three steps
    as three identical ✗ lines, and the header counted "3 refusals above" where only one ✗
    line stood above it (the others came after). Now: each distinct refusal once, naming its
    steps, then the steps that would run, under a count that matches."""
    from seat_console.actions.runbook import Plan, PlanLine

    no_swap = "the profile has no [swap] table"
    plan = Plan("swap", (
        PlanLine("seat state", False, "⚠ the seat is down"),
        PlanLine("record resident", False, "", error=no_swap),
        PlanLine("stop resident", True, "stop seat-resident after draining it",
                 after_refusal=True),
        PlanLine("start probe", False, "", error=no_swap),
        PlanLine("probe serving", False, "", error=no_swap),
        PlanLine("hold", False, "", error="no active hold"),
    ))
    assert plan.text_lines() == [
        "– ⚠ the seat is down",
        f"✗ record resident, start probe, probe serving: {no_swap}",
        "✗ hold: no active hold",
        "not run now: once the 2 refusals above are fixed, swap would:",
        "  • stop seat-resident after draining it",
    ]
    assert len(plan.refusals) == 4   # the machine-readable list keeps every step's
    ok = Plan("swap", (PlanLine("a", True, "do a"), PlanLine("b", False, "b: nothing to do")))
    assert ok.text_lines() == ["• do a", "– b: nothing to do"]
