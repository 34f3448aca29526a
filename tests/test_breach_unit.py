"""Issue 17, the breach side: interference that is true (the journal of every console is
consulted before a change is called foreign; one row per change event, journaled after it was
seen), the release's forecast of what a stopped timer does once started (systemd's rule), and
the smaller items (hold --dry-run wording, recover refusals, status hold section, a hold that
protects nothing, the report's breaches section, the swap's rename declared)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from seat_console.actions import hold as hold_mod
from seat_console.actions.hold import HoldState, breaches, observe, record_breaches
from seat_console.actions.journal import Journal
from seat_console.sources.timers import (
    TimersReading,
    TimerState,
    forecast_start,
    parse_monotonic_triggers,
    parse_timespan,
)

NOW = datetime(2026, 12, 1, 21, 0, tzinfo=UTC)


def _hold(**kw) -> HoldState:
    base = dict(hold_id="seat-hold-x", run_id="hold-1", state="active",
                lease_unit="seat-hold-x-lease.timer", silence_id=None,
                stopped=("fleet-remediation-cycle.timer",), expires_at=NOW + timedelta(hours=1),
                placed_at=NOW - timedelta(minutes=5), placed_by="u@h", reason="")
    base.update(kw)
    return HoldState(**base)


def _reading(at: datetime, active: bool, since: datetime | None = None) -> TimersReading:
    return TimersReading(where="test", read_at=at, timers=(TimerState(
        unit="fleet-remediation-cycle.timer", load_state="loaded",
        active_state="active" if active else "inactive", active_since=since),))


# -- the race: a reading older than the other process's stop is not a breach -------------------
def test_a_reading_taken_before_the_hold_stopped_the_timer_is_not_a_breach() -> None:
    """The issue's race: the TUI's newest timers reading was taken while another process was
    still placing the hold (the timer still active); 0.4 s after that hold finished, the old
    rule called it "started by someone else". The stop's verify time decides now."""
    h = _hold()
    stopped = NOW - timedelta(seconds=1)
    stale = _reading(NOW - timedelta(seconds=3), True, NOW - timedelta(hours=1))
    assert breaches(h, stale, None, NOW, settled={h.stopped[0]: stopped}) == []
    # the old rule (no journal consulted) flags it — the bug this replaces
    assert len(breaches(h, stale, None, NOW)) == 1
    # a reading taken after the stop that still shows it active is a real breach
    later = _reading(stopped + timedelta(seconds=10), True, stopped + timedelta(seconds=5))
    (b,) = breaches(h, later, None, NOW + timedelta(seconds=20),
                    settled={h.stopped[0]: stopped})
    assert b.changed_at == stopped + timedelta(seconds=5)
    assert "at 2026-12-01T21:00:04Z" in b.text     # the start's own time, to the second
    # a timer the hold never verified stopped is not judged
    assert breaches(h, later, None, NOW, settled={}) == []


def test_a_change_by_any_consoles_journaled_step_is_not_a_breach(tmp_path: Path) -> None:
    """A release (or any step acting on the timer) journaled by another process, on the same
    journal: its start of the timer is attributed to it."""
    j = Journal(tmp_path / "j.sqlite3")
    hf = {"hold_id": "seat-hold-x", "lease": "seat-hold-x-lease",
          "stopped": ["fleet-remediation-cycle.timer"], "silence_id": None,
          "expires_at": hold_mod.iso(datetime.now(UTC) + timedelta(hours=1))}
    t0 = datetime.now(UTC) - timedelta(minutes=2)
    j.append(run_id="hold-1", runbook="hold", kind="start", facts={"hold": hf}, at=t0)
    j.append(run_id="hold-1", runbook="hold", kind="verify",
             step="stop fleet-remediation-cycle.timer", outcome="inactive",
             facts={"hold": hf, "acts_on": ["fleet-remediation-cycle.timer"]}, at=t0)
    j.append(run_id="hold-1", runbook="hold", kind="end", outcome="done", facts={"hold": hf},
             at=t0)
    h = hold_mod.current_hold(j)
    seen = datetime.now(UTC)
    r = _reading(seen, True, seen - timedelta(seconds=1))
    # another console's in-flight step acting on the timer (no end row): its change
    other = Journal(tmp_path / "j.sqlite3")
    other.append(run_id="x-1", runbook="recover-ish", kind="start")
    other.append(run_id="x-1", runbook="recover-ish", kind="begin",
                 step="start fleet-remediation-cycle.timer",
                 facts={"acts_on": ["fleet-remediation-cycle.timer"]})
    assert observe(j, h, r, None, seen) == []
    other.append(run_id="x-1", runbook="recover-ish", kind="end", outcome="done")
    much_later = seen + timedelta(minutes=5)
    r2 = _reading(much_later, True, seen - timedelta(seconds=1))
    assert len(observe(j, h, r2, None, much_later)) == 1  # the step is long over: a breach
    j.close()
    other.close()


def test_each_change_event_gets_its_own_row_even_after_an_earlier_notice(tmp_path: Path
                                                                        ) -> None:
    """Keyed by the change event (the timer's ActiveEnterTimestamp), not by the unit: a timer
    started by hand, stopped, and started again later gets a second row; the same event seen
    by two consoles gets one; the row is written after it was seen."""
    path = tmp_path / "j.sqlite3"
    a, b = Journal(path), Journal(path)
    h = _hold()
    stopped = NOW - timedelta(minutes=10)
    first = _reading(NOW, True, NOW - timedelta(minutes=5))
    f1 = breaches(h, first, None, NOW, settled={h.stopped[0]: stopped})
    rows = record_breaches(a, h, f1)
    assert len(rows) == 1 and rows[0].at >= f1[0].seen_at
    assert record_breaches(b, h, breaches(h, first, None, NOW,
                                          settled={h.stopped[0]: stopped})) == []
    second = _reading(NOW + timedelta(minutes=3), True, NOW + timedelta(minutes=2))
    f2 = breaches(h, second, None, NOW + timedelta(minutes=3), settled={h.stopped[0]: stopped})
    rows2 = record_breaches(b, h, f2)
    assert len(rows2) == 1, "a later real breach must not be swallowed by the first notice"
    got = a.entries(kind="interference")
    assert [r.facts["breach"]["changed_at"] for r in got] == ["2026-12-01T20:55:00Z",
                                                              "2026-12-01T21:02:00Z"]
    assert record_breaches(a, h, f2, readonly=True) == []
    assert a.verify().ok
    a.close()
    b.close()


# -- the release's forecast (systemd's rule, src/core/timer.c) ---------------------------------
MANAGER = {"Virtualization": "docker", "UserspaceTimestamp": "@1796160425",
           "KernelTimestamp": ""}
T_USERSPACE = datetime.fromtimestamp(1796160425, UTC)


def test_forecast_a_monotonic_interval_that_passed_fires_at_once() -> None:
    last_run = datetime(2026, 12, 1, 21, 32, 7, tzinfo=UTC)
    timer = {"Unit": "s.service", "Persistent": "no",
             "TimersMonotonic": "{ OnUnitActiveUSec=2min ; next_elapse=8min 20.5s }\n"
                                "{ OnBootUSec=1min ; next_elapse=4min 19.2s }"}
    svc = {"InactiveExitTimestamp": f"@{int(last_run.timestamp())}"}
    early = forecast_start("s.timer", timer, svc, MANAGER, None, last_run + timedelta(seconds=60))
    assert not early.fires_at_once
    assert early.next_elapse == last_run + timedelta(minutes=2)
    late = forecast_start("s.timer", timer, svc, MANAGER, None, last_run + timedelta(minutes=3))
    assert late.fires_at_once
    assert [t.trigger for t in late.triggers if t.at_once] == ["OnUnitActiveSec=2min"]
    w = late.warning()
    assert w == ("s.timer fires at once when started: OnUnitActiveSec=2min elapsed at "
                 "2026-12-01T21:34:07Z (after s.service last started, 2026-12-01T21:32:07Z)")


def test_forecast_one_time_triggers_and_calendar() -> None:
    at = T_USERSPACE + timedelta(minutes=30)
    boot = {"Unit": "s.service", "TimersMonotonic": "{ OnBootUSec=1min 30s ; next_elapse=x }"}
    # the boot trigger passed before the service's last run: systemd disabled it
    ran = {"InactiveExitTimestamp": f"@{int((T_USERSPACE + timedelta(minutes=2)).timestamp())}"}
    assert forecast_start("s.timer", boot, ran, MANAGER, None, at).triggers == ()
    # never fired (the timer was stopped before it): starting it fires at once
    never = forecast_start("s.timer", boot, {}, MANAGER, None, at)
    assert never.fires_at_once and never.triggers[0].elapse == T_USERSPACE + timedelta(seconds=90)
    # OnActiveSec counts from the start: never at once
    act = forecast_start("s.timer", {"TimersMonotonic": "{ OnActiveUSec=5min ; next_elapse=0 }"},
                         {}, MANAGER, None, at)
    assert not act.fires_at_once and act.next_elapse == at + timedelta(minutes=5)
    # OnUnitActiveSec with a service that never ran: no elapse from it
    nr = forecast_start("s.timer", {"TimersMonotonic": "{ OnUnitActiveUSec=2min ; x }"}, {},
                        MANAGER, None, at)
    assert not nr.fires_at_once and nr.next_elapse is None
    past = int((at - timedelta(minutes=5)).timestamp())
    cal = {"Persistent": "yes", "TimersCalendar": f"{{ OnCalendar=*:0/15 ; next_elapse=@{past} }}"}
    pc = forecast_start("f.timer", cal, {}, MANAGER, None, at)
    assert pc.fires_at_once and "Persistent=true" in pc.triggers[0].base
    np_ = forecast_start("f.timer", {**cal, "Persistent": "no"}, {}, MANAGER, None, at)
    assert not np_.fires_at_once


@pytest.mark.parametrize("text,secs", [("2min", 120), ("1min 30s", 90),
                                       ("8min 20.556743s", 500.556743), ("1h 5min", 3900),
                                       ("100ms", 0.1), ("0", 0), ("1d", 86400), ("250us", 0.00025)])
def test_parse_timespan(text: str, secs: float) -> None:
    assert parse_timespan(text) == pytest.approx(secs)


@pytest.mark.parametrize("bad", ["", "infinity", "5 parsecs", "2min x", "min", "1.2.3s"])
def test_parse_timespan_rejects_naming_the_input(bad: str) -> None:
    with pytest.raises(ValueError, match="systemd time span"):
        parse_timespan(bad)


@settings(max_examples=300, deadline=200)
@given(st.text(max_size=60))
def test_parse_timespan_property(text: str) -> None:
    try:
        v = parse_timespan(text)
    except ValueError as exc:
        assert "systemd time span" in str(exc)
        return
    assert v >= 0


@settings(max_examples=200, deadline=300)
@given(st.lists(st.one_of(st.text(max_size=30), st.sampled_from(
    ["{ OnUnitActiveUSec=2min ; next_elapse=1min }", "{ OnBootUSec=bad ; x }", "{", ";"])),
    max_size=6))
def test_monotonic_triggers_one_bad_item_never_blanks_the_rest(parts: list[str]) -> None:
    text = "\n".join(parts)
    got = parse_monotonic_triggers(text)
    good = sum(p == "{ OnUnitActiveUSec=2min ; next_elapse=1min }" for p in parts)
    assert len([g for g in got if g == ("OnUnitActiveUSec", 120.0)]) >= good


# -- the smaller items ---------------------------------------------------------------------------
def test_protection_note_says_a_hold_protects_nothing() -> None:
    from seat_console.snapshot.verdicts import hold_fact, protection_note

    class H:
        state, foreign, expires_at, ttl_s = "active", True, NOW + timedelta(minutes=30), 1800

    all_on = TimersReading(where="t", read_at=NOW, timers=tuple(
        TimerState(unit=u, load_state="loaded", active_state="active")
        for u in ("a.timer", "b.timer", "c.timer")))
    f = hold_fact(H(), True, all_on)
    assert f.words.startswith("by another console until ")
    assert "protects nothing: timers 3/3 active" in f.words and f.level == "bad"
    one_off = all_on.model_copy(update={"timers": (*all_on.timers[:2], TimerState(
        unit="c.timer", load_state="loaded", active_state="inactive"))})
    assert "protects nothing" not in hold_fact(H(), True, one_off).words


def test_report_lists_every_breach_and_the_bracket_is_not_complete() -> None:
    from seat_console.evidence.report import bracket_problem, breaches_markdown
    from seat_console.evidence.report import breaches as report_breaches

    cmp_ = {"status": "complete", "planned_legs": [], "breaches": [
        {"changed_at": "2026-12-01T21:40:05Z", "seen_at": "2026-12-01T21:40:06Z",
         "journaled_at": "2026-12-01T21:40:07Z", "by": "u@h", "seq": 9,
         "what": "fleet-remediation-cycle.timer was started by someone else"}, "junk"]}
    found = report_breaches(cmp_)
    assert len(found) == 2
    md = "\n".join(breaches_markdown(found))
    assert "## Breaches of the hold during the bracket" in md
    assert "| 2026-12-01T21:40:05Z |" in md and "fleet-remediation-cycle.timer" in md
    assert "unreadable breach record" in md
    assert bracket_problem(cmp_, []) is not None and "breached 2 time(s)" in bracket_problem(
        cmp_, [])
    assert "None recorded" in "\n".join(breaches_markdown([]))


# -- recover: a refused --complete leaves the run open; --undo --dry-run lists the steps --------
def test_a_refused_recover_complete_leaves_the_run_open_for_undo(tmp_path: Path) -> None:
    from seat_console.actions import recover as rec
    from seat_console.actions.runbook import Check, Runbook, Step, StepError

    j = Journal(tmp_path / "j.sqlite3")
    node: dict = {}

    def step(key: str, refuse: bool = False) -> Step:
        def check(ctx):
            if refuse:
                raise StepError("the lease already fired: refusing to stop without a restore")
            return Check(True, f"turn {key} on")

        def undo(ctx):
            node.pop(key, None)
            return f"{key} off"
        return Step(f"turn {key} on", check, lambda c: node.__setitem__(key, True),
                    lambda c: "on", undo)

    rb = Runbook("hold", [step("a"), step("b")], journal=j)
    rb._row("start")
    node["a"] = True
    for kind in ("begin", "apply", "verify"):
        rb._row(kind, "turn a on")
    (rows,) = j.unfinished()
    res = Runbook("hold", [step("a"), step("b", refuse=True)], journal=j,
                  run_id=rb.run_id).finish_from_journal(rows, "complete")
    assert res.outcome == "refused"
    (rows,) = j.unfinished()          # still open: --undo has it
    assert rec.describe(rows)["would_undo"] == ["turn a on"]
    text = "\n".join(rec.describe_text(rows, "undo"))
    assert "--undo would put back" in text and "undo: turn a on" in text
    res = Runbook("hold", [step("a"), step("b")], journal=j,
                  run_id=rb.run_id).finish_from_journal(rows, "undo")
    assert res.outcome == "undone" and node == {} and not j.unfinished()
    assert j.verify().ok
    j.close()


def test_hold_dry_run_under_a_foreign_lease_does_not_say_became_active() -> None:
    """The stop steps' plan line when the lease step was refused (another console's lease):
    the timers were active all along, so "became active after the lease was planned" was
    wrong."""
    from app_fixtures import default_loaded

    from seat_console.actions.hold import _stop_step
    from seat_console.actions.runbook import RunContext

    class Node:
        where, _node_path = "fake", "/usr/bin"

        def run(self, argv, timeout_s=10.0):
            from seat_console.node.runner import CommandResult
            if argv[:2] == ["systemctl", "show"]:
                out = ("Id=a.timer\nLoadState=loaded\nActiveState=active\nSubState=waiting\n"
                       "Unit=a.service\n")
            elif argv[:2] == ["systemctl", "list-timers"]:
                out = "[]"
            else:
                out = "Id=a.service\nLoadState=loaded\nActiveState=inactive\nSubState=dead\n"
            return CommandResult(argv=list(argv), rc=0, stdout=out, stderr="", duration_s=0.01,
                                 where="fake", started_at=NOW, ok=True)

        def close(self):
            pass

    from seat_console.node.context import NodeContext

    nctx = NodeContext(default_loaded(), transport=Node())
    facts = {"hold": {"hold_id": "h", "lease": "h-lease", "to_stop": [], "stopped": [],
                      "expires_at": None}}
    ctx = RunContext(run_id="r", runbook="hold", inputs={}, facts=facts)
    c = _stop_step(nctx, "a.timer", lambda ctx: ctx.facts["hold"]).check(ctx)
    assert not c.go and "became active" not in c.text and "lease step was refused" in c.text


def test_the_swaps_rename_is_declared_so_any_console_attributes_it(tmp_path: Path) -> None:
    """The rename event's actor is the *new* name: the start-probe step's rows must name it
    (and the old container's ID), or another console's watcher shows it "not by the
    console"."""
    from seat_console.node.attribution import Row, attribute
    from seat_console.actions.runbook import RunContext
    from seat_console.actions.swap import build_swap
    from seat_console.node.context import NodeContext

    from seat_console.core.profile import load_profile

    f = tmp_path / "p.toml"
    f.write_text('[resident]\nname = "r"\n[[silence.matchers]]\nname = "instance"\n'
                 'value = "n:8000"\n[swap]\ncontainer = "seat-probe"\nimage = "img:1"\n'
                 'command = ["--model", "/m"]\nserved_model_name = "seat-resident"\n'
                 'gpus = []\n')
    loaded = load_profile(f)
    nctx = NodeContext(loaded)
    rb = build_swap(nctx, None)  # type: ignore[arg-type]
    step = next(s for s in rb.steps if s.name == "start probe")
    probe = loaded.profile.swap.container
    ctx = RunContext(run_id="swap-1", runbook="swap", inputs={}, facts={"probe_rename": {
        "from": probe, "to": f"{probe}-20261201T204000Z-abcdef", "id": "abcdef123456"}})
    names = step.targets(ctx)
    assert f"{probe}-20261201T204000Z-abcdef" in names and "abcdef123456" in names
    rows = [Row(seq=1, at=NOW, user="u", host="h", run_id="swap-1", runbook="swap",
                kind="begin", step="start probe", acts_on=tuple(names))]
    a = attribute(rows, [f"{probe}-20261201T204000Z-abcdef"], NOW + timedelta(seconds=1),
                  now=NOW + timedelta(seconds=2))
    assert a is not None and a.step == "start probe"


def test_status_hold_section_text() -> None:
    from seat_console.commands.status_cmd import render_hold

    sec = {"hold": None, "foreign_leases": [{"unit": "seat-hold-a-lease.timer",
                                             "next_elapse": "2026-12-01T22:00:00Z"}],
           "deferred_starts": [{"unit": "seat-hold-a-defer-x.timer", "starts": "x.timer",
                                "next_elapse": "2026-12-01T23:00:00Z"}],
           "protects_nothing": "the hold protects nothing: every timer is active (3/3) — x",
           "errors": []}
    text = render_hold(sec)
    assert text.startswith("Hold and lease\n")
    assert "FOREIGN LEASE seat-hold-a-lease.timer elapses 2026-12-01T22:00:00Z" in text
    assert "deferred start seat-hold-a-defer-x.timer: starts x.timer at 2026-12-01T23:00:00Z" \
        in text
    assert "WARNING: the hold protects nothing" in text


def test_release_when_forms() -> None:
    from seat_console.commands.release_cmd import parse_when

    assert parse_when("30m", NOW) == NOW + timedelta(minutes=30)
    assert parse_when("21:30Z", NOW) == NOW.replace(minute=30)
    assert parse_when("20:30Z", NOW) == NOW.replace(minute=30, hour=20) + timedelta(days=1)
    assert parse_when("2026-12-01T23:00Z", NOW) == NOW.replace(hour=23)
    for bad in ("", "soon", "2026-12-01T23:00", "2026-12-01T20:00Z", "99:99Z"):
        with pytest.raises(ValueError, match="WHEN"):
            parse_when(bad, NOW)


@settings(max_examples=200, deadline=200)
@given(st.text(max_size=30))
def test_release_when_property(text: str) -> None:
    from seat_console.commands.release_cmd import parse_when

    try:
        t = parse_when(text, NOW)
    except ValueError as exc:
        assert "WHEN" in str(exc)
        return
    assert t.tzinfo is not None and t > NOW


def test_the_tuis_action_log_does_not_flag_a_reading_older_than_another_consoles_stop(
        tmp_path: Path) -> None:
    """The TUI (ActionLogSource) watching while another process placed the hold: its newest
    timers reading predates that process's verified stop — no notice (4 of 5 holds journaled
    one before); a reading after the stop showing the timer active again is journaled once."""
    from seat_console.actions.actionlog import ActionLogSource

    path = tmp_path / "j.sqlite3"
    placer = Journal(path)                       # the other process
    unit = "fleet-remediation-cycle.timer"
    hf = {"hold_id": "seat-hold-x", "lease": "seat-hold-x-lease", "stopped": [unit],
          "silence_id": None,
          "expires_at": hold_mod.iso(datetime.now(UTC) + timedelta(hours=1))}
    placer.append(run_id="hold-9", runbook="hold", kind="start", facts={"hold": hf})
    placer.append(run_id="hold-9", runbook="hold", kind="verify", step=f"stop {unit}",
                  outcome="inactive", facts={"hold": hf})
    placer.append(run_id="hold-9", runbook="hold", kind="end", outcome="done",
                  facts={"hold": hf})

    class Readings:
        def __init__(self) -> None:
            self.timers = None

        def get(self, key: str):
            return self.timers if key == "timers" else None

    rd = Readings()
    now = datetime.now(UTC)
    rd.timers = _reading(now - timedelta(seconds=1), True, now - timedelta(hours=2))
    src = ActionLogSource(rd, str(path))
    assert src.read().interference == ()
    assert placer.entries(kind="interference") == []
    started = datetime.now(UTC).replace(microsecond=0)
    rd.timers = _reading(datetime.now(UTC) + timedelta(seconds=3), True, started)
    r = src.read()
    assert len(r.interference) == 1 and unit in r.interference[0]
    src.read()
    src.close()
    rows = placer.entries(kind="interference")
    assert len(rows) == 1 and rows[0].facts["breach"]["changed_at"] == hold_mod.iso(started)
    placer.close()


# -- a breach stops the bracket before its next leg --------------------------------------------
def test_a_breach_stops_the_bracket_before_the_next_leg(monkeypatch) -> None:
    """Once a breach of the hold is journaled, the next leg's seat step and measure step are
    skipped with the breach and its time in the text, and so is every later leg, even if the
    journal read then finds nothing. A plan (no ``compare_started_at`` yet) never stops a leg:
    it shares the run's facts."""
    from seat_console.actions import compare as cmp_mod
    from seat_console.actions.runbook import RunContext
    from seat_console.evidence.bracket import plan_bracket

    found: list[dict] = []
    monkeypatch.setattr(cmp_mod, "bracket_breaches",
                        lambda journal, hold_id, since, until=None: list(found))
    journal = object()   # read only through bracket_breaches, replaced above
    legs = plan_bracket("ABBA", 1)
    prev = [None, *[leg.arm for leg in legs[:-1]]]
    opts = cmp_mod.CompareOptions()
    seat = [cmp_mod._seat_step(None, journal, leg, p, opts, None, "resident", "probe",
                               lambda ctx: "") for leg, p in zip(legs, prev, strict=True)]
    measure = [cmp_mod._measure_step(None, leg, "bid", Path("/nonexistent"), opts, journal)
               for leg in legs]
    ctx = RunContext("run-1", "compare", {}, {"hold_id": "seat-hold-x"})
    breach = {"what": "fleet-remediation-cycle.timer: active again (stopped by the hold)",
              "changed_at": "2026-12-01T20:55:00Z", "journaled_at": "2026-12-01T20:55:03Z"}

    found.append(breach)
    assert seat[0].check(ctx).go, "a plan must never stop a leg"
    assert cmp_mod.BREACH_STOP_FACT not in ctx.facts
    found.clear()
    ctx.facts["compare_started_at"] = "2026-12-01T20:50:00+00:00"
    assert seat[0].check(ctx).go and measure[0].check(ctx).go      # A1 runs
    found.append(breach)                                             # journaled after A1
    c = seat[1].check(ctx)
    assert not c.go and "B2 not run" in c.text and "2026-12-01T20:55:00Z" in c.text
    assert "fleet-remediation-cycle.timer" in c.text and "restored" in c.text
    assert ctx.facts[cmp_mod.BREACH_STOP_FACT] == "B2"
    assert not measure[1].check(ctx).go
    found.clear()                                # the stop holds for every later leg
    for s in (seat[2], measure[2], seat[3], measure[3]):
        c = s.check(ctx)
        assert not c.go and "stopped before leg B2" in c.text, (s.name, c.text)
