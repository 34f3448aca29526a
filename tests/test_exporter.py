"""The exporter without the lab: the collector's edge cases with fake readers, the poller with a
hung source, the CLI's refusals, the unit, and property tests for what it parses
(``--listen``, probe summaries, the journal)."""

from __future__ import annotations

import json
import sqlite3
import threading
import time
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from seat_console.exporter.cmd import parse_listen
from seat_console.exporter.collector import Exporter
from seat_console.exporter.model import (
    SOURCES,
    ContainerValue,
    EngineCheck,
    FitVerdict,
    GpuValue,
    Identity,
    JournalValue,
    LeaseValue,
    RunbookRun,
    SilenceValue,
    TimerFact,
    build_families,
)
from seat_console.snapshot.poll import Poller, SourceView
from seat_console.exporter.readers import probe_state, unfinished_runs
from seat_console.exporter.unit import render_unit, systemd_arg
from seat_console.core.profile import load_profile
from seat_console.core.base import Unavailable

PROFILE = """[resident]
name = "r"
[timers]
conformance = ["a.timer"]
[[silence.matchers]]
name = "instance"
value = "127.0.0.1:8000"
"""
IDENT = Identity("n1", "resident-a", "http://127.0.0.1:8000", 2,
                 ("a.timer", "b.timer"), "0.1.0")
T_ON = (TimerFact("a.timer", True, True), TimerFact("b.timer", True, True))
T_OFF = (TimerFact("a.timer", True, False), TimerFact("b.timer", True, True))


def up(name: str, value: object, at: float = 1000.0) -> SourceView:
    return SourceView(name, True, value, at)


def samples(states: dict[str, SourceView]) -> dict[tuple[str, tuple], float]:
    out = {}
    for f in build_families(IDENT, states):
        for s in f.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def get(s: dict, metric: str, **labels: str) -> float | None:
    return s.get((metric, tuple(sorted(labels.items()))))


# -- the hold as the node sees it ------------------------------------------------------------
@pytest.mark.parametrize("timers, leases, active, armed, without", [
    (T_ON, (), 0.0, 0.0, 0.0),                 # no hold
    (T_OFF, (1900.0,), 1.0, 1.0, 0.0),         # a hold with its lease
    (T_OFF, (), 1.0, 0.0, 1.0),                # timers stopped, no lease: dangerous
    (T_ON, (1900.0,), 1.0, 1.0, 0.0),          # a lease armed, timers already back
])
def test_hold_flags(timers, leases, active, armed, without) -> None:
    s = samples({"timers": up("timers", timers), "lease": up("lease", LeaseValue(leases))})
    assert get(s, "seat_hold_active") == active
    assert get(s, "seat_hold_lease_armed") == armed
    assert get(s, "seat_hold_without_lease") == without
    assert get(s, "seat_hold_expiry_timestamp_seconds") == (min(leases) if leases else None)
    assert get(s, "seat_timer_active", unit="a.timer") == (1.0 if timers is T_ON else 0.0)


def test_a_timer_not_found_is_not_active_and_no_hold() -> None:
    ts = (TimerFact("a.timer", False, False), TimerFact("b.timer", True, True))
    s = samples({"timers": up("timers", ts), "lease": up("lease", LeaseValue(()))})
    assert get(s, "seat_timer_active", unit="a.timer") == 0.0
    assert get(s, "seat_hold_active") == 0.0 and get(s, "seat_hold_without_lease") == 0.0


def test_unknown_is_absent_never_zero() -> None:
    s = samples({})   # nothing read yet
    for name in ("seat_engine_up", "seat_hold_active", "seat_hold_lease_armed",
                 "seat_hold_without_lease", "seat_silence_active", "seat_probe_disrupted"):
        assert not [k for k in s if k[0] == name], name
    assert [get(s, "seat_source_up", source=n) for n in SOURCES] == [0.0] * len(SOURCES)
    assert not [k for k in s if k[0] == "seat_source_last_good_timestamp_seconds"]
    assert get(s, "seat_info", node="n1", seat="resident-a", endpoint="http://127.0.0.1:8000",
               tensor_parallel_size="2") == 1.0


def test_timers_known_lease_unknown_says_held_but_not_without_lease() -> None:
    s = samples({"timers": up("timers", T_OFF)})
    assert get(s, "seat_hold_active") == 1.0          # a stopped timer is a hold, whatever
    assert get(s, "seat_hold_without_lease") is None  # unknown: the lease was never read
    s = samples({"timers": up("timers", T_ON)})
    assert get(s, "seat_hold_active") is None         # no stopped timer, lease unknown


def test_a_source_down_serves_its_last_value_and_says_so() -> None:
    down = SourceView("silences", False, SilenceValue((2000.0,)), 990.0, "unreachable")
    s = samples({"silences": down})
    assert get(s, "seat_source_up", source="silences") == 0.0
    assert get(s, "seat_source_last_good_timestamp_seconds", source="silences") == 990.0
    assert get(s, "seat_silence_active") == 1.0
    assert get(s, "seat_silence_end_timestamp_seconds") == 2000.0


def test_silence_engine_container_journal_fit() -> None:
    s = samples({
        "silences": up("silences", SilenceValue((1500.0, 2500.0))),
        "engine": up("engine", EngineCheck(False, None, "refused")),
        "containers": up("containers", ContainerValue("probe", "seat-probe", "sha256:1", None)),
        "journal": up("journal", JournalValue((RunbookRun("swap", "probe", "r1"),),
                                              ("20261201T000000Z-abcdef", "concurrency-8"),
                                              True)),
        "gpus": up("gpus", GpuValue({"resident": FitVerdict(True, 0),
                                     "candidate": FitVerdict(False, 26_567_151_616)})),
    })
    assert get(s, "seat_silence_end_timestamp_seconds") == 2500.0
    assert get(s, "seat_engine_up") == 0.0
    assert get(s, "seat_container_info", role="probe", name="seat-probe", image_id="sha256:1",
               repo_digest="") == 1.0
    assert get(s, "seat_runbook_active", runbook="swap", step="probe", run_id="r1") == 1.0
    assert get(s, "seat_probe_phase_info", run_id="20261201T000000Z-abcdef",
               phase="concurrency-8") == 1.0
    assert get(s, "seat_probe_disrupted") == 1.0
    assert get(s, "seat_fit_fits", side="resident") == 1.0
    assert get(s, "seat_fit_over_bytes", side="candidate") == 26_567_151_616
    assert get(s, "seat_fit_fits", side="candidate") == 0.0


def test_empty_seat_has_no_container_series() -> None:
    s = samples({"containers": up("containers", ContainerValue(None))})
    assert not [k for k in s if k[0] == "seat_container_info"]
    assert get(s, "seat_source_up", source="containers") == 1.0


# -- the poller: a hung source never holds a scrape up ---------------------------------------
def test_hung_source_is_down_with_its_last_good_value_and_scrape_does_not_wait() -> None:
    clock = [100.0]
    release = threading.Event()
    calls = [0]

    def read() -> object:
        calls[0] += 1
        if calls[0] > 1:
            release.wait(30)   # hangs until the test lets it go
        return "good"

    p = Poller("engine", read, interval_s=1, timeout_s=5, clock=lambda: clock[0])
    p.read_now()
    assert p.state().up and p.state().value == "good" and p.state().last_good_at == 100.0
    t = threading.Thread(target=p.read_now, daemon=True)
    t.start()
    wait = time.monotonic() + 10
    while p._st.busy_since is None and time.monotonic() < wait:   # noqa: SLF001
        time.sleep(0.01)
    clock[0] = 103.0
    assert p.state().up            # in flight, within its timeout
    clock[0] = 106.0
    st_ = p.state()                # past the timeout: down, last good value kept
    assert not st_.up and st_.value == "good" and st_.last_good_at == 100.0
    assert "in flight" in (st_.reason or "")
    release.set()
    t.join(5)
    assert p.state().up


def test_failed_read_is_down_and_keeps_the_last_good() -> None:
    vals: list[object] = ["ok", Unavailable(source="x", reason="gone"), RuntimeError("boom")]

    def read() -> object:
        v = vals.pop(0)
        if isinstance(v, Exception):
            raise v
        return v

    p = Poller("timers", read, interval_s=1, timeout_s=1, clock=lambda: 5.0)
    p.read_now()
    p.read_now()
    assert not p.state().up and p.state().value == "ok" and "gone" in p.state().reason
    p.read_now()
    assert not p.state().up and "RuntimeError: boom" in p.state().reason


# -- one read for two sources: the node's timers and leases (PollerGroup) ---------------------
def test_group_one_read_feeds_each_source_and_a_bad_part_downs_only_itself() -> None:
    from seat_console.snapshot.poll import PollerGroup

    answers: list[object] = [
        {"timers": T_ON, "lease": LeaseValue(())},
        {"timers": T_OFF, "lease": Unavailable(source="lease", reason="block 4 has no Id")},
        {"timers": T_ON},                        # a part missing: that part down
        RuntimeError("docker exec died"),        # the read raised: every part down
    ]
    calls = [0]

    def read() -> object:
        calls[0] += 1
        v = answers.pop(0)
        if isinstance(v, Exception):
            raise v
        return v

    g = PollerGroup(("timers", "lease"), read, interval_s=15, timeout_s=25,
                    clock=lambda: 50.0 + calls[0])
    tim, lea = g.parts["timers"], g.parts["lease"]
    g.read_now()
    assert calls[0] == 1 and tim.state().up and lea.state().up
    assert tim.state().value == T_ON and lea.state().value == LeaseValue(())
    g.read_now()
    assert tim.state().up and tim.state().value == T_OFF
    assert not lea.state().up and "block 4 has no Id" in lea.state().reason
    assert lea.state().value == LeaseValue(()) and lea.state().last_good_at == 51.0
    g.read_now()
    assert tim.state().up and not lea.state().up and "no lease value" in lea.state().reason
    g.read_now()
    for p in (tim, lea):
        assert not p.state().up and "RuntimeError: docker exec died" in p.state().reason
    assert calls[0] == 4 and tim.reads == lea.reads == 4


def test_group_hung_read_downs_every_part_and_the_scrape_does_not_wait() -> None:
    from seat_console.snapshot.poll import PollerGroup

    clock = [100.0]
    release = threading.Event()
    g = PollerGroup(("timers", "lease"), lambda: release.wait(30) and {}, interval_s=1,
                    timeout_s=5, clock=lambda: clock[0])
    t = threading.Thread(target=g.read_now, daemon=True)
    t.start()
    wait = time.monotonic() + 10
    while g.parts["lease"]._st.busy_since is None and time.monotonic() < wait:  # noqa: SLF001
        time.sleep(0.01)
    clock[0] = 106.0
    assert not g.parts["timers"].state().up and not g.parts["lease"].state().up
    assert "in flight" in g.parts["lease"].state().reason
    release.set()
    t.join(5)


def test_exporter_reads_a_group_with_one_call_per_interval(tmp_path) -> None:
    calls = [0]

    def node(_loaded: object) -> tuple:
        def read() -> dict:
            calls[0] += 1
            return {"timers": T_OFF, "lease": LeaseValue((1900.0,))}
        return read, (lambda: None)

    exp = Exporter(_profile(tmp_path), "0.1.0", readers={},
                   groups={("timers", "lease"): node})
    assert set(exp.pollers) == {"timers", "lease"}
    exp.read_all_once(10)
    assert calls[0] == 1
    fams = {f.name: f for f in exp.collector.collect()}
    ups = {s.labels["source"]: s.value for s in fams["seat_source_up"].samples}
    assert ups["timers"] == ups["lease"] == 1.0
    assert [s.value for s in fams["seat_hold_lease_armed"].samples] == [1.0]
    exp.stop()


def test_default_exporter_reads_timers_and_lease_as_one_group(tmp_path) -> None:
    from seat_console.snapshot.poll import PollerGroup

    exp = Exporter(_profile(tmp_path), "0.1.0")
    groups = [t for t in exp._threads if isinstance(t, PollerGroup)]  # noqa: SLF001
    assert [tuple(g.parts) for g in groups] == [("timers", "lease")]
    assert exp.pollers["lease"] is groups[0].parts["lease"]
    assert len(exp._threads) == len(SOURCES) - 1  # noqa: SLF001
    exp.stop()


class _NodeTransport:
    """The node as make_node sees it: ``show`` answers the one ``systemctl show`` (``None``:
    it fails), ``times`` the ``list-timers`` JSON; every argv is recorded."""

    where = "fake-node"

    def __init__(self, show: str | None, times: str = "[]") -> None:
        self.show, self.times, self.calls = show, times, []

    def run(self, argv, timeout_s=10.0):  # noqa: ANN001, ANN201 - transport protocol
        from seat_console.core.base import utcnow
        from seat_console.node.runner import CommandResult

        self.calls.append(list(argv))
        out = self.times if argv[1] == "list-timers" else self.show
        ok = out is not None
        return CommandResult(argv=tuple(argv), rc=0 if ok else 1, stdout=out or "",
                             stderr="" if ok else "Failed to connect to bus", ok=ok,
                             failure=None if ok else "exit 1", started_at=utcnow(),
                             duration_s=0.01, where=self.where)

    def close(self) -> None:
        pass


_LEASE = "seat-hold-20261202t200000z-abcd-lease.timer"


def _show(*blocks: tuple[str, str, str]) -> str:
    return "\n".join(f"Id={u}\nLoadState=loaded\nActiveState={a}\nSubState={s}\n"
                     for u, a, s in blocks)


def _node_read(monkeypatch, tmp_path, transport) -> dict:
    import seat_console.node.transport as tmod
    from seat_console.exporter.readers import make_node

    monkeypatch.setattr(tmod, "make_transport", lambda loaded: transport)
    read, _close = make_node(_profile(tmp_path))
    return read()


def test_node_read_idle_is_one_command(monkeypatch, tmp_path) -> None:
    tr = _NodeTransport(_show(("a.timer", "active", "waiting")))
    v = _node_read(monkeypatch, tmp_path, tr)
    assert v == {"timers": (TimerFact("a.timer", True, True),), "lease": LeaseValue(())}
    (argv,) = tr.calls
    assert argv[1] == "show" and argv[-2:] == ["a.timer", "seat-hold-*-lease.timer"]


def test_node_read_with_a_lease_armed_reads_its_elapse(monkeypatch, tmp_path) -> None:
    tr = _NodeTransport(_show(("a.timer", "inactive", "dead"), (_LEASE, "active", "waiting")),
                        json.dumps([{"unit": _LEASE, "next": 1_796_300_000_000_000}]))
    v = _node_read(monkeypatch, tmp_path, tr)
    assert v == {"timers": (TimerFact("a.timer", True, False),),
                 "lease": LeaseValue((1_796_300_000.0,))}
    assert [a[1] for a in tr.calls] == ["show", "list-timers"]


def test_node_read_bad_lease_block_is_lease_unknown_never_no_lease(monkeypatch,
                                                                    tmp_path) -> None:
    """A matched block that cannot be trusted: the timers still served, the lease source
    down — no ``seat_hold_lease_armed`` 0, no ``seat_hold_without_lease`` — never "no
    lease"."""
    tr = _NodeTransport(_show(("a.timer", "inactive", "dead"))
                        + "\nLoadState=loaded\nActiveState=active\nSubState=waiting\n")
    v = _node_read(monkeypatch, tmp_path, tr)
    assert v["timers"] == (TimerFact("a.timer", True, False),)
    assert isinstance(v["lease"], Unavailable) and "matched block 2 has no Id" in \
        v["lease"].reason
    from seat_console.snapshot.poll import PollerGroup

    g = PollerGroup(("timers", "lease"), lambda: v, interval_s=15, timeout_s=25)
    g.read_now()
    s = samples({n: p.state() for n, p in g.parts.items()})
    assert get(s, "seat_source_up", source="lease") == 0.0
    assert get(s, "seat_source_up", source="timers") == 1.0
    assert get(s, "seat_hold_lease_armed") is None
    assert get(s, "seat_hold_without_lease") is None
    assert get(s, "seat_hold_active") == 1.0            # a stopped timer is a hold anyway
    assert get(s, "seat_timer_active", unit="a.timer") == 0.0


def test_node_read_failed_command_downs_both(monkeypatch, tmp_path) -> None:
    v = _node_read(monkeypatch, tmp_path, _NodeTransport(None))
    assert isinstance(v["timers"], Unavailable) and isinstance(v["lease"], Unavailable)
    assert v["lease"].source == "lease" and "systemd is not reachable" in v["lease"].reason


def test_poller_refuses_a_bad_interval() -> None:
    with pytest.raises(ValueError, match="interval"):
        Poller("x", lambda: 1, interval_s=0, timeout_s=1)


def _profile(tmp_path: Path) -> object:
    f = tmp_path / "p.toml"
    f.write_text(PROFILE)
    return load_profile(str(f))


def test_collector_scrape_with_a_hung_source_answers_and_parses_back(tmp_path) -> None:
    gate = threading.Event()

    def hung(_loaded: object) -> tuple:
        return (lambda: gate.wait(60)), (lambda: None)

    def fine(_loaded: object) -> tuple:
        return (lambda: T_ON), (lambda: None)

    exp = Exporter(_profile(tmp_path), "0.1.0", interval_s=1, timeout_s=0.2,
                   readers={"timers": fine, "lease": hung})
    exp.start()
    try:
        deadline = time.monotonic() + 10
        while exp.pollers["timers"].reads == 0 and time.monotonic() < deadline:
            time.sleep(0.02)
        t0 = time.monotonic()
        text = generate_latest(exp.registry).decode()
        took = time.monotonic() - t0
        assert took < 5   # generous: it reads the cache only, the hung read is 60 s
        fams = {f.name: f for f in text_string_to_metric_families(text)}
        ups = {s.labels["source"]: s.value for s in fams["seat_source_up"].samples}
        assert ups["timers"] == 1.0 and ups["lease"] == 0.0
        assert "seat_scrape_duration_seconds" in fams
        assert fams["seat_hold_active"].samples == []   # lease unknown, no timer stopped
    finally:
        gate.set()
        exp.stop()


# -- the CLI ---------------------------------------------------------------------------------
def test_cli_refuses_actions_and_bad_listen(capsys) -> None:
    from seat_console.cli import main

    assert main(["exporter", "--yes"]) == 2
    assert "read-only" in capsys.readouterr().err
    assert main(["exporter", "--ttl", "4h"]) == 2
    assert main(["exporter", "--listen", "nowhere"]) == 2
    assert "--listen 'nowhere'" in capsys.readouterr().err


def test_print_unit_runs_unprivileged_with_absolute_exec(tmp_path, capsys) -> None:
    from seat_console.cli import main

    prof = tmp_path / "p.toml"
    prof.write_text(PROFILE)
    assert main(["exporter", "--profile", str(prof), "--print-unit"]) == 0
    text = capsys.readouterr().out
    lines = text.splitlines()
    (exec_start,) = [ln for ln in lines if ln.startswith("ExecStart=")]
    argv = exec_start.removeprefix("ExecStart=").split()
    assert argv[0].startswith("/") and "sh" not in Path(argv[0]).name.split(".")
    assert argv[argv.index("--profile") + 1] == str(prof.resolve())
    assert "DynamicUser=yes" in lines and "NoNewPrivileges=yes" in lines
    assert "ProtectSystem=strict" in lines and "CapabilityBoundingSet=" in lines
    assert main(["exporter", "--profile", str(prof), "--print-unit", "--unit-user",
                 "seatexp"]) == 0
    assert "User=seatexp" in capsys.readouterr().out.splitlines()


def test_render_unit_refuses_unquotable_and_relative() -> None:
    with pytest.raises(ValueError, match="absolute"):
        render_unit(["seat-console"], user=None, state_dir=Path("/s"), data_dir=Path("/d"))
    with pytest.raises(ValueError, match="one word"):
        render_unit(["/usr/bin/x", "--profile", "/a b.toml"], user=None,
                    state_dir=Path("/s"), data_dir=Path("/d"))
    assert systemd_arg("/p/100%$x", "x") == "/p/100%%$$x"


# -- parsers: --listen, probe summaries, the journal -----------------------------------------
@pytest.mark.parametrize("text, want", [
    ("127.0.0.1:9469", ("127.0.0.1", 9469)), ("[::1]:19469", ("::1", 19469)),
    ("node-7.example:80", ("node-7.example", 80)), ("0.0.0.0:65535", ("0.0.0.0", 65535)),
])
def test_parse_listen(text, want) -> None:
    assert parse_listen(text) == want


@pytest.mark.parametrize("text", ["", "9469", ":9469", "host:", "host:0", "host:65536",
                                  "[::1]", "::1:9469", "a b:1", "host:+1", "[zz]:1", "h:١٢"])
def test_parse_listen_refuses(text) -> None:
    with pytest.raises(ValueError, match="--listen"):
        parse_listen(text)


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=120))
def test_parse_listen_only_documented_errors(text) -> None:
    try:
        host, port = parse_listen(text)
    except ValueError as exc:
        assert "--listen" in str(exc) and "HOST:PORT" in str(exc)
        return
    assert host and 1 <= port <= 65535


def _run(root: Path, name: str, summary: object, age_s: float = 0.0) -> Path:
    d = root / name
    d.mkdir(parents=True)
    f = d / "summary.json"
    f.write_text(summary if isinstance(summary, str) else json.dumps(summary))
    t = time.time() - age_s
    import os

    os.utime(f, (t, t))
    return d


def _summary(status: str, planned: list[str], done: list[str], disruptions: int = 0) -> dict:
    return {"status": status, "settings": {"phases": [{"name": n} for n in planned]},
            "phases": [{"name": n} for n in done], "disruptions": [{}] * disruptions}


def test_probe_state(tmp_path) -> None:
    assert probe_state(tmp_path / "none", 60) == (None, None)
    _run(tmp_path, "20261201T090000Z-aaaaaa", _summary("disrupted", ["a"], ["a"], 1))
    assert probe_state(tmp_path, 60) == (None, True)
    _run(tmp_path, "20261201T100000Z-bbbbbb", _summary("running", ["a", "b", "c"], ["a"]))
    assert probe_state(tmp_path, 60) == (("20261201T100000Z-bbbbbb", "b"), False)


def test_probe_state_a_killed_run_is_not_in_progress(tmp_path) -> None:
    _run(tmp_path, "20261201T100000Z-bbbbbb", _summary("running", ["a", "b"], []), age_s=600)
    assert probe_state(tmp_path, 180) == (None, False)


@settings(max_examples=200, deadline=None)
@given(st.one_of(st.text(max_size=200), st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=10),
    lambda c: st.lists(c, max_size=4) | st.dictionaries(
        st.sampled_from(["status", "settings", "phases", "name", "disruptions", "x"]), c,
        max_size=5), max_leaves=20)))
def test_probe_state_any_summary_gives_a_state_or_a_named_error(tmp_path_factory, doc) -> None:
    root = tmp_path_factory.mktemp("runs")
    _run(root, "20261201T100000Z-cccccc", doc if isinstance(doc, str) else json.dumps(doc))
    try:
        phase, disrupted = probe_state(root, 60)
    except ValueError as exc:
        assert "summary.json" in str(exc)
        return
    assert phase is None or (isinstance(phase[1], str) and phase[1])
    assert disrupted in (True, False)


def _journal(path: Path, rows: list[tuple[str, str, str, str]]) -> None:
    db = sqlite3.connect(path)
    db.execute("CREATE TABLE entries (seq INTEGER PRIMARY KEY, run_id TEXT, runbook TEXT, "
               "kind TEXT, step TEXT)")
    db.executemany("INSERT INTO entries (run_id, runbook, kind, step) VALUES (?,?,?,?)", rows)
    db.commit()
    db.close()


def test_unfinished_runs_read_only(tmp_path) -> None:
    assert unfinished_runs(tmp_path / "absent.sqlite3") == ()
    assert not (tmp_path / "absent.sqlite3").exists()   # never created
    j = tmp_path / "journal.sqlite3"
    _journal(j, [("r1", "hold", "start", ""), ("r1", "hold", "step", "lease"),
                 ("r1", "hold", "end", ""), ("r2", "swap", "start", ""),
                 ("r2", "swap", "step", "stop resident"), ("r3", "x", "step", "orphan")])
    before = j.read_bytes()
    assert unfinished_runs(j) == (RunbookRun("swap", "stop resident", "r2"),)
    assert j.read_bytes() == before


def test_the_exporter_imports_no_textual_or_rich() -> None:
    import subprocess
    import sys

    code = ("import sys; import seat_console.exporter.cmd, "
            "seat_console.exporter.collector, seat_console.exporter.readers, "
            "seat_console.exporter.unit; "
            "bad = sorted(m for m in sys.modules if m.split('.')[0] in ('textual', 'rich')); "
            "print(bad); sys.exit(1 if bad else 0)")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       timeout=120, check=False)
    assert r.returncode == 0, r.stdout + r.stderr


def test_a_started_poller_and_group_stop_and_close() -> None:
    """The exporter stops every poller and group on SIGTERM: each loop ends and closes."""
    from seat_console.snapshot.poll import Poller, PollerGroup

    closed: list[str] = []
    g = PollerGroup(("timers", "lease"), lambda: {"timers": 1, "lease": 2}, interval_s=1,
                    timeout_s=5, close=lambda: closed.append("group")).start()
    p = Poller("engine", lambda: "up", interval_s=1, timeout_s=5,
               close=lambda: closed.append("poller")).start()
    deadline = time.monotonic() + 10
    while (g.parts["lease"].reads < 1 or p.reads < 1) and time.monotonic() < deadline:
        time.sleep(0.01)
    g.stop(join_s=5)
    p.stop(join_s=5)
    assert sorted(closed) == ["group", "poller"]
    assert g.parts["lease"].state().value == 2 and p.state().up
