"""Attribution of container changes to journaled runbook steps (console/node/attribution.py), and the
runbook engine journaling the containers each step acts on. Real SQLite journal files; the
docker side is tested against the lab in tests/test_attribution_lab.py."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

from seat_console.node.attribution import (
    ACTS_ON,
    AFTER_S,
    IN_FLIGHT_MAX_S,
    JournalAttributor,
    Row,
    attribute,
)
from seat_console.actions.journal import Journal
from seat_console.actions.runbook import Check, Runbook, Step, StepError
from seat_console.node.docker import ContainerEvent

T0 = datetime(2026, 12, 1, 12, 0, 0, tzinfo=UTC)


def _row(seq: int, s: float, kind: str, acts: tuple[str, ...] = (), run: str = "swap-1",
         step: str = "stop resident", runbook: str = "swap") -> Row:
    return Row(seq=seq, at=T0 + timedelta(seconds=s), user="alice", host="n1", run_id=run,
               runbook=runbook, kind=kind, step=step, acts_on=acts)


def _ok(name: str, acts: tuple[str, ...] = (), fail: bool = False, log: list | None = None
        ) -> Step:
    def apply(ctx):
        if fail:
            raise StepError(f"{name} broke")
        return None

    return Step(name, lambda ctx: Check(True, name), apply, lambda ctx: "ok",
                undo=lambda ctx: "undone", acts_on=acts)


def test_the_engine_journals_each_steps_containers(tmp_path: Path) -> None:
    j = Journal(tmp_path / "j.sqlite3")
    res = Runbook("swap", [_ok("timers"), _ok("stop resident", ("seat-resident",)),
                           _ok("start probe", ("seat-probe",)), _ok("wait")],
                  journal=j).run()
    assert res.ok and ACTS_ON not in res.facts
    got = [(e.kind, e.step, e.facts.get(ACTS_ON)) for e in j.entries()]
    assert ("begin", "timers", None) in got and ("verify", "timers", None) in got
    for kind in ("begin", "apply", "verify"):
        assert (kind, "stop resident", ["seat-resident"]) in got
        assert (kind, "start probe", ["seat-probe"]) in got
    assert ("begin", "wait", None) in got and got[-1] == ("end", "", None)
    # a failure: the fail row and the undo phase name every begun step's containers
    j2 = Journal(tmp_path / "j2.sqlite3")
    res = Runbook("swap", [_ok("stop resident", ("seat-resident",)), _ok("other"),
                           _ok("start probe", ("seat-probe",), fail=True)], journal=j2).run()
    assert res.outcome == "undone"
    rows = {(e.kind, e.step): e.facts.get(ACTS_ON) for e in j2.entries()}
    assert rows[("fail", "start probe")] == ["seat-probe", "seat-resident"]
    assert rows[("undo", "stop resident")] == ["seat-probe", "seat-resident"]
    assert rows[("undo", "other")] == ["seat-probe", "seat-resident"]
    assert rows[("end", "")] is None and rows[("begin", "other")] is None
    j.close()
    j2.close()


def test_attribute_covers_a_step_from_its_begin_to_its_end_plus_a_window() -> None:
    rows = [_row(1, 0, "start"), _row(2, 1, "begin", ("seat-resident",)),
            _row(3, 11, "apply", ("seat-resident",)), _row(4, 12, "verify", ("seat-resident",)),
            _row(5, 13, "begin", (), step="wait"), _row(6, 60, "end", (), step="")]
    a = attribute(rows, ["seat-resident"], T0 + timedelta(seconds=5), now=T0)
    assert a is not None and a.seq == 2 and a.step == "stop resident"
    assert a.label() == ("swap run swap-1, step 'stop resident' (journal seq 2, alice@n1)")
    assert attribute(rows, ["/seat-resident"], T0 + timedelta(seconds=12), now=T0).seq == 4
    assert attribute(rows, ["seat-resident"], T0 + timedelta(seconds=12 + AFTER_S - 1),
                     now=T0) is not None
    # after the window, another container, before the begin: someone else's
    assert attribute(rows, ["seat-resident"], T0 + timedelta(seconds=12 + AFTER_S + 1),
                     now=T0) is None
    assert attribute(rows, ["seat-probe"], T0 + timedelta(seconds=5), now=T0) is None
    assert attribute(rows, ["seat-resident"], T0 - timedelta(seconds=10), now=T0) is None
    assert attribute(rows, [], T0 + timedelta(seconds=5), now=T0) is None


def test_a_step_in_flight_covers_up_to_now_but_not_forever() -> None:
    rows = [_row(1, 0, "start"), _row(2, 1, "begin", ("seat-probe",), step="probe serving")]
    later = T0 + timedelta(minutes=10)
    assert attribute(rows, ["seat-probe"], later, now=later).step == "probe serving"
    stale = T0 + timedelta(seconds=IN_FLIGHT_MAX_S + 60)
    assert attribute(rows, ["seat-probe"], stale, now=stale) is None
    # the same rows with an end row: the step is over, the window is short
    ended = [*rows, _row(3, 2, "end")]
    assert attribute(ended, ["seat-probe"], later, now=later) is None


def test_the_innermost_run_is_named() -> None:
    outer = [_row(1, 0, "start", run="cmp-1", runbook="compare"),
             _row(2, 1, "begin", ("seat-probe", "seat-resident"), run="cmp-1",
                  runbook="compare", step="leg 1A: seat")]
    inner = [_row(3, 2, "start", run="swap-9"), _row(4, 3, "begin", ("seat-resident",),
                                                   run="swap-9")]
    a = attribute(outer + inner, ["seat-resident"], T0 + timedelta(seconds=4), now=T0)
    assert a is not None and a.run_id == "swap-9"
    b = attribute(outer + inner, ["seat-probe"], T0 + timedelta(seconds=4), now=T0)
    assert b is not None and b.run_id == "cmp-1"


def _event(name: str, at: datetime) -> ContainerEvent:
    return ContainerEvent(at=at, time_nano=int(at.timestamp() * 1e9), type="container",
                          action="stop", actor_id="abc123", actor_name=name)


def test_journal_attributor_reads_another_handles_rows_and_never_creates_a_journal(
        tmp_path: Path) -> None:
    path = tmp_path / "state" / "journal.sqlite3"
    attr = JournalAttributor(path)
    assert attr(_event("seat-resident", datetime.now(UTC))) is None
    assert not path.exists() and not path.parent.exists()
    j = Journal(path)          # "another console": writes while the attributor reads
    res = Runbook("swap", [_ok("stop resident", ("seat-resident",))], journal=j).run()
    assert res.ok
    now = datetime.now(UTC)
    label = attr(_event("seat-resident", now))
    assert label is not None and res.run_id in label and "step 'stop resident'" in label
    assert f"{j.user}@{j.host}" in label
    assert attr(_event("seat-probe", now)) is None
    assert attr(_event("seat-resident", now + timedelta(seconds=AFTER_S + 5))) is None
    attr.close()
    j.close()


def test_the_containers_panel_names_the_run_that_made_a_change() -> None:
    from seat_console.sources.containers import ContainersReading
    from seat_console.node.docker import EventStreamStatus
    from seat_console.widgets.services import ContainersPanel

    now = datetime.now(UTC)
    label = "swap run swap-1, step 'stop resident' (journal seq 2, alice@n1)"
    evs = (_event("seat-resident", now).model_copy(update={"by_console": True, "by": label}),
           _event("seat-resident", now).model_copy(update={"action": "start"}))
    reading = ContainersReading(engine="unix:///x", engine_version="25", api_version="1.41",
                                read_at=now, containers=(), recent_changes=evs,
                                events=EventStreamStatus(connected=True, since=now,
                                                         reconnects=0, last_error=None,
                                                         events_seen=2))
    group = ContainersPanel().build(reading, now)
    text = "\n".join(getattr(r, "plain", "") for r in group.renderables)
    assert f"stop  by console: {label}" in text
    assert "start  not by the console" in text


# -- properties -------------------------------------------------------------------------------
from hypothesis import given  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from seat_console.node.attribution import _acts_on  # noqa: E402

_NAMES = st.sampled_from(["seat-resident", "seat-probe", "other", "/seat-resident"])
_ROWS = st.lists(st.builds(
    lambda seq, s, kind, acts, run: _row(seq, s, kind, tuple(acts), run=run),
    st.integers(1, 10_000), st.floats(-4000, 4000, allow_nan=False),
    st.sampled_from(["start", "begin", "apply", "verify", "fail", "undo", "end", "warn"]),
    st.lists(_NAMES, max_size=3), st.sampled_from(["r1", "r2", "r3"])), max_size=40,
    unique_by=lambda r: r.seq)   # journal seqs are unique


@given(_ROWS, st.lists(_NAMES, max_size=3), st.floats(-5000, 5000, allow_nan=False))
def test_attribute_never_raises_and_names_only_a_run_that_acted_on_the_container(
        rows, names, s) -> None:
    at = T0 + timedelta(seconds=s)
    a = attribute(rows, names, at, now=T0 + timedelta(seconds=4000))
    if a is None:
        return
    want = {n.lstrip("/") for n in names}
    hit = [r for r in rows if r.run_id == a.run_id and r.seq == a.seq]
    assert hit and want & set(hit[0].acts_on)
    assert any(r.run_id == a.run_id and want & set(r.acts_on)
               and r.at - timedelta(seconds=5) <= at for r in rows)


@given(st.text(max_size=200))
def test_acts_on_of_any_facts_text_is_a_tuple_of_names(text) -> None:
    out = _acts_on(text)
    assert isinstance(out, tuple) and all(isinstance(x, str) for x in out)
    assert _acts_on('{"acts_on": ["a", 1, null, "b"]}') == ("a", "b")
    assert _acts_on('{"acts_on": "a"}') == () and _acts_on('["acts_on"]') == ()
