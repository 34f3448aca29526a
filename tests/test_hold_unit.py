"""The hold's pure parts: TTL and --since parsing (property tests: documented error naming the
input, never a hang, never 0), the Persistent catch-up rule, interference, the hold state the
journal yields (hold → extend → release), and the action-log source journaling interference
once."""

from __future__ import annotations

import argparse
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from seat_console.actions.hold import (
    TTL_MAX_S,
    TTL_MIN_S,
    HoldState,
    active_hold,
    catchup_warning,
    current_hold,
    holds,
    interference,
    parse_ttl,
)
from seat_console.actions.journal import Journal
from seat_console.commands.journal_cmd import parse_since
from seat_console.actions.actionlog import ActionLogReading, ActionLogSource
from seat_console.node.alertmanager import Silence, SilenceMatcher
from seat_console.sources.timers import TimersReading, TimerState

NOW = datetime(2026, 12, 1, 10, 0, tzinfo=UTC)


@pytest.mark.parametrize("text,secs", [("4h", 14400), ("10m", 600), ("1h30m", 5400),
                                       ("90s", 90), ("900s", 900), ("2d", 172800),
                                       ("15 s", 15), ("1H 5MIN", 3900)])
def test_parse_ttl(text: str, secs: int) -> None:
    assert parse_ttl(text) == secs


@pytest.mark.parametrize("bad", ["", "  ", "0", "5s", "8d", "4x", "-10m", "1h-5m", "h", "1.5h",
                                 "10m5", "900", "1h30", "1d2"])
def test_parse_ttl_rejects_naming_the_input(bad: str) -> None:
    with pytest.raises(ValueError, match="TTL"):
        parse_ttl(bad)


@settings(max_examples=300, deadline=200)
@given(st.text(max_size=40))
def test_parse_ttl_property(text: str) -> None:
    try:
        v = parse_ttl(text)
    except ValueError as exc:
        assert str(exc).startswith(f"TTL {text!r}")      # names the input
        return
    assert TTL_MIN_S <= v <= TTL_MAX_S


@settings(max_examples=200, deadline=200)
@given(st.text(max_size=40))
def test_parse_since_property(text: str) -> None:
    try:
        t = parse_since(text, now=NOW)
    except ValueError as exc:
        assert "--since" in str(exc)
        return
    assert t.tzinfo is not None


def test_parse_since_forms() -> None:
    assert parse_since("2h", now=NOW) == NOW - timedelta(hours=2)
    assert parse_since("2026-12-01T09:00Z") == datetime(2026, 12, 1, 9, 0, tzinfo=UTC)
    assert parse_since("2026-12-01T09:00") == datetime(2026, 12, 1, 9, 0, tzinfo=UTC)


def test_catchup_warning_only_for_a_missed_persistent_elapse() -> None:
    missed = {"persistent": True, "next_elapse": "2026-12-01T09:30:00Z",
              "last_trigger": "2026-12-01T09:15:00Z"}
    w = catchup_warning("x.timer", missed, now=NOW)
    assert w and "fires the missed run at once" in w and "2026-12-01T09:15:00Z" in w
    assert catchup_warning("x.timer", {**missed, "persistent": False}, now=NOW) is None
    assert catchup_warning("x.timer", {**missed, "next_elapse": "2026-12-01T10:30:00Z"},
                           now=NOW) is None
    assert catchup_warning("x.timer", {**missed, "next_elapse": None}, now=NOW) is None


def _hold(**kw) -> HoldState:
    base = dict(hold_id="seat-hold-x", run_id="hold-1", state="active",
                lease_unit="seat-hold-x-lease.timer", silence_id="s1",
                stopped=("a.timer", "b.timer"), expires_at=NOW + timedelta(hours=1),
                placed_at=NOW - timedelta(minutes=5), placed_by="u@h", reason="")
    base.update(kw)
    return HoldState(**base)


def _timers(active: dict[str, bool], live: bool = False) -> TimersReading:
    """A reading taken at NOW (``live``: at the wall clock's now, after ``_held``'s stop)."""
    return TimersReading(where="test", read_at=datetime.now(UTC) if live else NOW, timers=tuple(
        TimerState(unit=u, load_state="loaded", active_state="active" if a else "inactive")
        for u, a in active.items()))


def _silence(state: str) -> Silence:
    return Silence(id="s1", state=state, matchers=(SilenceMatcher(name="a", value="b",
                                                                  isRegex=False),),
                   starts_at=NOW - timedelta(minutes=5), ends_at=NOW + timedelta(hours=1))


def test_interference_flags_someone_elses_changes_only_while_active() -> None:
    h = _hold()
    assert interference(h, _timers({"a.timer": False, "b.timer": False}),
                        [_silence("active")], NOW) == []
    notes = interference(h, _timers({"a.timer": True, "b.timer": False}),
                         [_silence("expired")], NOW)
    assert len(notes) == 2
    assert "a.timer was started by someone else" in notes[0]
    assert "silence s1" in notes[1] and "expired by someone else" in notes[1]
    lapsed = _hold(expires_at=NOW - timedelta(seconds=1))
    assert interference(lapsed, _timers({"a.timer": True}), [_silence("expired")], NOW) == []


def _run(j: Journal, runbook: str, run_id: str, hold: dict, outcome: str | None,
         inputs: dict | None = None) -> None:
    j.append(run_id=run_id, runbook=runbook, kind="start", facts={"hold": hold},
             inputs=inputs or {})
    if outcome is not None:
        j.append(run_id=run_id, runbook=runbook, kind="end", outcome=outcome,
                 facts={"hold": hold})


def test_hold_state_from_the_journal(tmp_path: Path) -> None:
    j = Journal(tmp_path / "j.sqlite3")
    exp = (datetime.now(UTC) + timedelta(hours=1)).isoformat().replace("+00:00", "Z")
    h = {"hold_id": "seat-hold-a", "lease": "seat-hold-a-lease", "stopped": ["a.timer"],
         "silence_id": "s1", "expires_at": exp, "timers_before": {}}
    _run(j, "hold", "hold-1", h, "done")
    assert active_hold(j).hold_id == "seat-hold-a"
    exp2 = (datetime.now(UTC) + timedelta(hours=3)).isoformat().replace("+00:00", "Z")
    _run(j, "extend", "ext-1", {**h, "lease": "seat-hold-a-lease-2", "silence_id": "s2",
                                "expires_at": exp2}, "done")
    a = active_hold(j)
    assert a.lease_unit == "seat-hold-a-lease-2.timer" and a.silence_id == "s2"
    assert a.expires_at > datetime.now(UTC) + timedelta(hours=2)
    _run(j, "extend", "ext-2", {**h, "expires_at": exp}, "undone")     # failed: no change
    assert active_hold(j).silence_id == "s2"
    _run(j, "release", "rel-1", h, "done")
    assert active_hold(j) is None and current_hold(j) is None
    assert [x.state for x in holds(j)] == ["released"]
    # a hold whose console died: unfinished, found by current_hold, not "active"
    _run(j, "hold", "hold-2", {**h, "hold_id": "seat-hold-b"}, None)
    assert active_hold(j) is None and current_hold(j).state == "unfinished"
    j.close()


class _Readings:
    def __init__(self, **kw) -> None:
        self.kw = kw

    def get(self, key: str):
        return self.kw.get(key)


def test_action_log_source_journals_interference_once(tmp_path: Path) -> None:
    path, j, _h = _held(tmp_path)
    src = ActionLogSource(_Readings(timers=_timers({"a.timer": True}, live=True)), str(path))
    r1 = src.read()
    assert isinstance(r1, ActionLogReading) and r1.hold is not None
    assert r1.hold.banner.startswith("held by the console until")
    assert len(r1.interference) == 1
    src.read()
    src.close()
    again = ActionLogSource(_Readings(timers=_timers({"a.timer": True}, live=True)), str(path))
    again.read()
    again.close()
    rows = j.entries(kind="interference")
    assert len(rows) == 1 and "a.timer was started by someone else" in rows[0].outcome
    assert j.verify().ok
    j.close()


def test_record_interference_once_across_journal_handles(tmp_path: Path) -> None:
    """Two consoles (two Journal handles on one file) seeing the same notice journal it once;
    a read-only console writes nothing."""
    from seat_console.actions.hold import record_interference

    path = tmp_path / "j.sqlite3"
    a, b = Journal(path), Journal(path)
    h = _hold()
    note = ["a.timer was started by someone else during hold seat-hold-x"]
    assert record_interference(b, h, note, readonly=True) == []
    assert [e.outcome for e in record_interference(a, h, note)] == note
    assert record_interference(b, h, note) == []
    assert record_interference(a, h, note) == []
    other = _hold(run_id="hold-2")          # the same text for another hold is new
    assert len(record_interference(b, other, note)) == 1
    assert len(a.entries(kind="interference")) == 2 and a.verify().ok
    a.close()
    b.close()


class _ResolvingTransport:
    """Finds every binary; anything else would be a bug here (the check refuses first)."""

    where = "fake"
    _node_path = "/usr/bin"

    def resolve(self, name: str):
        return f"/usr/bin/{name}", None

    def run(self, *a, **kw):  # pragma: no cover - must not be reached
        raise AssertionError("the hold must refuse before it reads the node")

    def close(self) -> None:
        pass


def test_a_new_hold_is_refused_while_a_crashed_one_is_unfinished(tmp_path: Path) -> None:
    from app_fixtures import default_loaded

    from seat_console.actions.hold import build_hold
    from seat_console.node.context import NodeContext

    j = Journal(tmp_path / "j.sqlite3")
    _run(j, "hold", "hold-crashed", {"hold_id": "seat-hold-old", "lease": "seat-hold-old-lease"},
         None)
    nctx = NodeContext(default_loaded(), transport=_ResolvingTransport())
    plan = build_hold(nctx, j, ttl_s=600).plan()
    assert not plan.ok
    assert "unfinished hold run hold-crashed" in plan.lines[0].error
    assert "seat-console recover" in plan.lines[0].error
    j.close()


# -- global --readonly refuses node-changing commands (one check in console/cli.py) ------------
@pytest.mark.parametrize("argv", [
    ["hold", "--ttl", "5m"], ["hold", "--ttl", "5m", "--yes"], ["release", "--yes"],
    ["recover", "--undo", "--yes"], ["build-backport"], ["swap", "--yes"], ["restore", "--yes"],
    ["probe"], ["compare", "--yes"], ["hold", "--extend", "10m", "--yes", "--json"]])
def test_readonly_refuses_node_changing_commands_and_journals_nothing(
        argv: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    from seat_console.cli import main

    monkeypatch.setenv("SEAT_CONSOLE_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.setenv("SEAT_CONSOLE_PROFILE", str(tmp_path / "no-such-profile.toml"))
    assert main(["--readonly", *argv]) == 2
    err = capsys.readouterr().err
    assert "--readonly forbids" in err and "nothing was done or journaled" in err
    assert not (tmp_path / "state").exists()


def test_readonly_lets_read_only_modes_through() -> None:
    import argparse

    from seat_console.cli import readonly_refusal

    ns = argparse.Namespace
    assert readonly_refusal(ns(readonly=True, command="hold", status=True, dry_run=False)) is None
    assert readonly_refusal(ns(readonly=True, command="swap", dry_run=True)) is None
    assert readonly_refusal(ns(readonly=True, command="recover", undo=False, complete=False,
                               dry_run=False)) is None
    assert readonly_refusal(ns(readonly=True, command="journal", dry_run=False)) is None
    assert readonly_refusal(ns(readonly=False, command="swap", dry_run=False)) is None
    assert readonly_refusal(ns(readonly=True, command="swap", dry_run=False)) is not None


# -- interference: the console's own release is not interference; --readonly never writes ------
def _held(tmp_path: Path) -> tuple[Path, Journal, dict]:
    """A journal at ``tmp_path/j.sqlite3`` with one finished hold of ``a.timer`` (no silence)
    that ends in an hour: ``(path, journal, the hold's facts)``."""
    path = tmp_path / "j.sqlite3"
    j = Journal(path)
    exp = (datetime.now(UTC) + timedelta(hours=1)).isoformat().replace("+00:00", "Z")
    h = {"hold_id": "seat-hold-a", "lease": "seat-hold-a-lease", "stopped": ["a.timer"],
         "silence_id": None, "expires_at": exp, "timers_before": {}}
    j.append(run_id="hold-1", runbook="hold", kind="start", facts={"hold": h})
    j.append(run_id="hold-1", runbook="hold", kind="verify", step="stop a.timer",
             outcome="a.timer inactive", facts={"hold": h},
             at=datetime.now(UTC) - timedelta(minutes=10))
    j.append(run_id="hold-1", runbook="hold", kind="end", outcome="done", facts={"hold": h})
    return path, j, h


def test_a_release_in_flight_or_just_ended_is_not_interference(tmp_path: Path) -> None:
    path, j, h = _held(tmp_path)
    _run(j, "release", "release-1", h, None, inputs={"hold_id": "seat-hold-a"})  # in flight
    src = ActionLogSource(_Readings(timers=_timers({"a.timer": True}, live=True)), str(path))
    r = src.read()
    assert isinstance(r, ActionLogReading) and r.interference == ()
    src.close()
    assert j.entries(kind="interference") == []
    j.close()


def test_a_readonly_action_log_shows_interference_but_never_writes(tmp_path: Path) -> None:
    path, j, _ = _held(tmp_path)
    n = len(j.entries())
    src = ActionLogSource(_Readings(timers=_timers({"a.timer": True}, live=True)), str(path), readonly=True)
    r = src.read()
    assert isinstance(r, ActionLogReading) and len(r.interference) == 1
    src.close()
    assert len(j.entries()) == n and j.entries(kind="interference") == []
    j.close()


def test_ttl_empty_is_a_usage_error_not_the_default(capsys: pytest.CaptureFixture[str]) -> None:
    from app_fixtures import default_loaded

    from seat_console.commands import hold_cmd

    args = argparse.Namespace(ttl="", extend=None, json=False, status=False, dry_run=True,
                              yes=False, reason="")
    assert hold_cmd.run(args, default_loaded()) == 2
    assert "--ttl: TTL ''" in capsys.readouterr().err


def test_short_hold_times_are_shown_to_the_second() -> None:
    from seat_console.actions.hold import zulu

    t = datetime(2026, 12, 1, 10, 23, 40, tzinfo=UTC)
    assert zulu(t, 30) == "10:23:40Z" and zulu(t, 3599) == "10:23:40Z"
    assert zulu(t, 3600) == "10:23Z" and zulu(t) == "10:23Z"
    short = _hold(placed_at=t - timedelta(seconds=30), expires_at=t)
    assert "until 10:23:40Z" in short.banner()


def test_one_hold_prints_its_ids_labelled() -> None:
    from seat_console.actions.runbook import Result
    from seat_console.commands.hold_cmd import placed_line

    line = placed_line(_hold())
    assert line.startswith("hold ID seat-hold-x: active until ")
    assert "lease seat-hold-x-lease.timer on the node" in line
    assert "(journal run hold-1)" in line
    res = Result(run_id="hold-1", runbook="hold", outcome="done", steps=[])
    assert res.describe().startswith("hold (journal run hold-1): done")


# -- a lease armed on the node by another console (lab test: test_hold_lab) -----------------------
_OTHER = "seat-hold-20261201t100000z-abcd-lease.timer"


def _armed(unit: str = _OTHER) -> TimerState:
    return TimerState(unit=unit, load_state="loaded", active_state="active", sub_state="waiting",
                      next_elapse=datetime.now(UTC) + timedelta(minutes=9))


class _ListingTransport(_ResolvingTransport):
    def __init__(self, stdout: str) -> None:
        self.stdout, self.argv = stdout, None

    def run(self, argv, **kw):
        from seat_console.node.runner import CommandResult

        self.argv = list(argv)
        return CommandResult(argv=tuple(argv), rc=0, stdout=self.stdout, ok=True,
                             started_at=datetime.now(UTC), duration_s=0.01)


def test_node_leases_lists_armed_seat_hold_leases(monkeypatch: pytest.MonkeyPatch) -> None:
    from seat_console.actions import node_ops

    tr = _ListingTransport(f"{_OTHER} loaded active waiting seat-console hold x\n"
                           "seat-hold-zz-lease.timer loaded inactive dead y\n"
                           "evil;rm.timer loaded active waiting z\n")
    seen = {}

    def fake_read(transport, units, **kw):
        seen["units"] = list(units)
        return TimersReading(read_at=datetime.now(UTC), where="fake", timers=(
            _armed(), TimerState(unit="seat-hold-zz-lease.timer", load_state="loaded",
                                 active_state="inactive", sub_state="dead")))
    monkeypatch.setattr(node_ops, "read_timers", fake_read)
    assert [t.unit for t in node_ops.node_leases(tr)] == [_OTHER]
    assert seen["units"] == [_OTHER, "seat-hold-zz-lease.timer"]   # the odd name is dropped
    assert tr.argv[-2:] == ["--", node_ops.LEASE_GLOB]
    assert node_ops.node_leases(_ListingTransport("")) == []


def test_hold_refuses_while_another_consoles_lease_is_armed(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from app_fixtures import default_loaded

    from seat_console.actions import hold as hold_mod
    from seat_console.node.context import NodeContext

    monkeypatch.setattr(hold_mod.node_ops, "node_leases", lambda tr, **kw: [_armed()])
    j = Journal(tmp_path / "j.sqlite3")
    nctx = NodeContext(default_loaded(), transport=_ResolvingTransport())
    plan = hold_mod.build_hold(nctx, j, ttl_s=600).plan()
    assert not plan.ok
    err = plan.lines[0].error
    assert f"{_OTHER} elapses " in err and "not in this console's journal" in err
    assert "--force --reason" in err
    assert j.entries() == []          # a plan journals nothing
    j.close()


# -- the exporter's lease read: armed leases among the states one `systemctl show` gave ---------
class _TimesTransport(_ResolvingTransport):
    """Answers ``systemctl list-timers -o json`` with ``stdout`` (or fails) and counts calls."""

    def __init__(self, stdout: str, ok: bool = True) -> None:
        self.stdout, self.ok, self.calls = stdout, ok, []

    def run(self, argv, **kw):
        from seat_console.node.runner import CommandResult

        self.calls.append(list(argv))
        return CommandResult(argv=tuple(argv), rc=0 if self.ok else 1, stdout=self.stdout,
                             ok=self.ok, failure=None if self.ok else "exit 1",
                             started_at=datetime.now(UTC), duration_s=0.01)


def _st(unit: str, active: str = "active", sub: str = "waiting") -> TimerState:
    return TimerState(unit=unit, load_state="loaded", active_state=active, sub_state=sub)


def test_armed_leases_read_next_elapse_only_when_one_is_armed() -> None:
    import json

    from seat_console.actions import node_ops

    first = "seat-hold-a-lease.timer"
    later = _OTHER
    tr = _TimesTransport(json.dumps([
        {"unit": later, "next": 1_796_300_000_000_000, "last": None},
        {"unit": first, "next": 1_796_200_000_000_000, "last": None}]))
    matched = [_st(later), _st("seat-hold-b-lease.timer", sub="elapsed"),
               _st("seat-hold-c-lease.timer", active="inactive", sub="dead"),
               _st("seat-hold-x\\x2dy-lease.timer"), _st(first)]
    got = node_ops.armed_leases(tr, matched)
    assert [t.unit for t in got] == [first, later]           # oldest next elapse first
    assert [t.next_elapse.timestamp() for t in got] == [1_796_200_000, 1_796_300_000]
    (argv,) = tr.calls                                        # one list-timers, armed only
    assert argv[1:4] == ["list-timers", "--all", "--output=json"]
    assert argv[-2:] == [later, first]
    idle = _TimesTransport("[]")
    assert node_ops.armed_leases(idle, [_st("seat-hold-b-lease.timer", sub="elapsed")]) == []
    assert idle.calls == []                                   # no lease armed: no command


def test_armed_leases_without_their_times_are_armed_with_unknown_elapse() -> None:
    from seat_console.actions import node_ops

    for tr in (_TimesTransport("", ok=False), _TimesTransport("[" * 5000 + "]" * 5000),
               _TimesTransport("[]")):
        (t,) = node_ops.armed_leases(tr, [_st(_OTHER)])
        assert t.next_elapse is None and "list-timers" in t.errors["times"]
