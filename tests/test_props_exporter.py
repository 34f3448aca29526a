"""Property tests of the exporter's node readers over hostile input (issue 31).

* ``systemctl show`` blocks missing ``LoadState`` / ``ActiveState`` / ``SubState``: what the
  block does not say is unknown (its ``seat_timer_active`` absent, the hold flags absent unless
  the known facts settle them), never a definite state — a block without ``ActiveState`` read
  as "stopped" set ``seat_hold_active`` and ``seat_hold_without_lease``, the series the fleet's
  alerts act on;
* a probe summary whose ``phases`` (planned or done) is any JSON type: a phase or ``None``,
  never a ``TypeError``.

Each property failed on the code before the fix."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from unittest import mock

from hypothesis import example, given, settings
from hypothesis import strategies as st

from seat_console.core.profile import load_profile
from seat_console.exporter.model import Identity, build_families
from seat_console.snapshot.poll import PollerGroup
from seat_console.exporter.readers import make_node, probe_state
from test_exporter import PROFILE, _NodeTransport

IDENT = Identity("n1", "resident-a", "http://127.0.0.1:8000", 2, ("a.timer",), "0.1.0")
LEASE = "seat-hold-20261202t200000z-abcd-lease.timer"
_DIR = Path(tempfile.mkdtemp(prefix="props-exporter-"))
(_DIR / "p.toml").write_text(PROFILE)
LOADED = load_profile(str(_DIR / "p.toml"))

LOAD = st.sampled_from(["loaded", "not-found", "masked", None])
ACTIVE = st.sampled_from(["active", "inactive", "failed", None])
SUB = st.sampled_from(["waiting", "elapsed", "dead", None])


def _block(unit: str, load: str | None, active: str | None, sub: str | None) -> str:
    props = [f"Id={unit}"] + [f"{k}={v}" for k, v in (("LoadState", load),
                                                       ("ActiveState", active),
                                                       ("SubState", sub)) if v is not None]
    return "\n".join(props) + "\n"


def _samples(show: str, times: str = "[]") -> dict[str, float]:
    tr = _NodeTransport(show, times)
    with mock.patch("seat_console.node.transport.make_transport", lambda loaded: tr):
        read, _close = make_node(LOADED)
        value = read()
    g = PollerGroup(("timers", "lease"), lambda: value, interval_s=15, timeout_s=25)
    g.read_now()
    out = {}
    for f in build_families(IDENT, {n: p.state() for n, p in g.parts.items()}):
        for s in f.samples:
            out[s.name + (f"{{{s.labels['unit']}}}" if "unit" in s.labels else "")] = s.value
    return out


@settings(max_examples=150, deadline=None)
@given(LOAD, ACTIVE, SUB, st.none() | st.tuples(LOAD, ACTIVE, SUB))
@example("loaded", None, "dead", None)                      # no ActiveState, no lease
@example(None, "inactive", "dead", None)                    # no LoadState
@example("loaded", "inactive", "dead", ("loaded", None, "waiting"))    # lease: no ActiveState
@example("loaded", "inactive", "dead", ("loaded", "active", None))     # lease: no SubState
def test_a_state_systemd_did_not_give_is_unknown_never_a_hold(load, active, sub, lease):
    show = _block("a.timer", load, active, sub)
    if lease is not None:
        show += "\n" + _block(LEASE, *lease)
    times = json.dumps([{"unit": LEASE, "next": 1_796_300_000_000_000}])
    s = _samples(show, times)
    # the truth, from what the blocks say
    stopped = (False if load not in ("loaded", None) else
               None if load is None or active is None else active != "active")
    if lease is None:
        armed: bool | None = False
    elif None in lease[:2] or (lease[1] == "active" and lease[2] is None):
        armed = None
    else:
        armed = lease[0] == "loaded" and lease[1] == "active" and lease[2] != "elapsed"
    unit = s.get("seat_timer_active{a.timer}")
    assert unit is None if active is None else unit == (1.0 if active == "active" else 0.0)
    hold, without = s.get("seat_hold_active"), s.get("seat_hold_without_lease")
    lease_g = s.get("seat_hold_lease_armed")
    if hold == 1.0:
        assert stopped is True or armed is True, (show, s)
    if hold == 0.0:
        assert stopped is False and armed is False, (show, s)
    if without == 1.0:
        assert stopped is True and armed is False, (show, s)
    if without == 0.0:
        assert stopped is not None and armed is not None, (show, s)
    if lease_g is not None:
        assert armed is not None and lease_g == float(armed), (show, s)


phase_any = st.recursive(st.none() | st.booleans() | st.integers() | st.floats()
                         | st.text(max_size=8),
                         lambda c: st.lists(c, max_size=4) | st.dictionaries(
                             st.sampled_from(["name", "x"]), c, max_size=3), max_leaves=10)


@settings(max_examples=200, deadline=None)
@given(phase_any, phase_any, st.sampled_from(["running", "complete"]))
@example(5, [], "running")
@example([{"name": "a"}], True, "running")
@example({"name": "a"}, 3.5, "running")
def test_probe_state_phases_of_any_type_give_a_phase_or_none(planned, done, status):
    root = Path(tempfile.mkdtemp(dir=_DIR))
    d = root / "20261201T100000Z-cccccc"
    d.mkdir()
    (d / "summary.json").write_text(json.dumps({"status": status, "settings": {
        "phases": planned}, "phases": done}, allow_nan=False) if not _has_nan(planned, done)
        else "{}")
    phase, disrupted = probe_state(root, 60)
    assert phase is None or (phase[0] == d.name and isinstance(phase[1], str) and phase[1])
    assert disrupted is False


def _has_nan(*vals: object) -> bool:
    try:
        json.dumps(vals, allow_nan=False)
    except ValueError:
        return True
    return False


_BASE_JOURNAL: list[bytes] = []


def _base_journal() -> bytes:
    if not _BASE_JOURNAL:
        import sqlite3

        p = _DIR / "base.sqlite3"
        db = sqlite3.connect(p)
        db.execute("CREATE TABLE entries (seq INTEGER PRIMARY KEY, run_id TEXT, runbook TEXT, "
                   "kind TEXT, step TEXT)")
        db.executemany("INSERT INTO entries (run_id, runbook, kind, step) VALUES (?,?,?,?)",
                       [("r1", "hold", "start", ""), ("r1", "hold", "step", "lease"),
                        ("r2", "swap", "start", ""), ("r2", "swap", "end", "done")])
        db.commit()
        db.close()
        _BASE_JOURNAL.append(p.read_bytes())
    return _BASE_JOURNAL[0]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(-40, 10**6), st.integers(0, 255)), min_size=1,
                max_size=30), st.booleans())
@example([(2, 0xCF)], True)     # a byte of the schema's SQL: the message is not UTF-8
def test_unfinished_runs_of_a_damaged_journal_are_runs_or_a_sqlite_error(flips, in_schema):
    """A byte-flipped journal file (anywhere, or in the schema's SQL text): its runs, or
    :class:`sqlite3.Error` — never a ``UnicodeDecodeError`` (SQLite's message about a damaged
    schema quotes it, and is then not UTF-8: the exporter's reader raised it before)."""
    import sqlite3

    from seat_console.exporter.readers import unfinished_runs

    data = bytearray(_base_journal())
    schema = data.find(b"CREATE TABLE")
    for at, byte in flips:
        data[(schema + at % 90) if in_schema else at % len(data)] = byte
    p = Path(tempfile.mkdtemp(dir=_DIR)) / "journal.sqlite3"
    p.write_bytes(bytes(data))
    try:
        runs = unfinished_runs(p)
    except sqlite3.Error:
        return
    assert all(isinstance(r.run_id, str) and isinstance(r.step, str) for r in runs)
