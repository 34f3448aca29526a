"""Property tests: ``systemctl show`` and ``systemctl list-timers -o json`` output (issue #12).

Asserted: the parsers return their shapes or raise ``ValueError`` naming the input; times are
aware UTC; no parse over the 1 s deadline, including long values (the schedule regex and the
repeated-key join were quadratic); ``read_timers`` over any command output returns a reading or
``Unavailable``, and a bad ``list-timers`` reply only blanks the elapse times, with a note.
"""

from __future__ import annotations

import json
import time
from datetime import UTC, timedelta

from hypothesis import given
from hypothesis import strategies as st

from seat_console.node.runner import CommandResult
from seat_console.core.base import Unavailable, utcnow
from seat_console.sources.timers import (
    TimersReading,
    build_timer_state,
    parse_list_timers_json,
    parse_schedule,
    parse_show_blocks,
    parse_timestamp,
    read_timers,
)

PROPS = ["LoadState", "ActiveState", "SubState", "UnitFileState", "Result", "Persistent", "Unit",
         "TimersCalendar", "TimersMonotonic", "ExecMainStartTimestamp"]
show_text = st.lists(st.one_of(
    st.tuples(st.sampled_from(PROPS), st.text(max_size=40)).map(lambda t: f"{t[0]}={t[1]}"),
    st.just(""), st.text(max_size=30)), max_size=30).map("\n".join)
stamps = st.one_of(st.text(max_size=25), st.integers(-2**70, 2**70).map(str),
                   st.floats(allow_nan=True, allow_infinity=True).map(lambda f: f"@{f}"),
                   st.sampled_from(["@1e400", "@nan", "@-inf", "@99999999999999", "0", "@0",
                                    "n/a", str(2**64 - 1), "١٢٣", "Sat 2026-11-29 02:00 UTC"]))


def _fast(fn, *args):
    t0 = time.perf_counter()
    out = fn(*args)
    assert time.perf_counter() - t0 < 1.0
    return out


@given(stamps)
def test_timestamp_is_aware_utc_none_or_named_value_error(v):
    try:
        t = parse_timestamp(v)
    except ValueError as exc:
        assert "systemd time" in str(exc)
        return
    assert t is None or (t.tzinfo is not None and t.utcoffset() == timedelta(0))


@given(show_text)
def test_show_blocks_and_state_never_raise(text):
    for props in _fast(parse_show_blocks, text):
        state = build_timer_state("x.timer", props, None)
        assert state.persistent in (True, False, None)


def test_long_values_parse_in_linear_time():
    t0 = time.perf_counter()
    parse_schedule("{ OnCalendar=" * 200_000)
    parse_show_blocks("TimersMonotonic=x\n" * 200_000)
    parse_schedule("{" + "x" * 1_000_000)
    assert time.perf_counter() - t0 < 1.0


json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-2**80, 2**80) | st.floats(allow_nan=False)
    | st.text(max_size=10),
    lambda kids: st.lists(kids, max_size=4) | st.dictionaries(st.text(max_size=8), kids,
                                                              max_size=4), max_leaves=16)
rows = st.lists(st.fixed_dictionaries({
    "unit": st.one_of(st.just("a.timer"), json_values), "next": json_values,
    "last": json_values}), max_size=4)


@given(st.one_of(rows.map(json.dumps), json_values.map(json.dumps), st.text(max_size=40),
                 st.integers(1, 5000).map(lambda n: "[" * n + "]" * n),
                 st.sampled_from(['[{"unit": "a.timer", "next": 1e400}]', "[NaN]"])))
def test_list_timers_json_is_a_map_of_aware_times_or_a_named_value_error(text):
    try:
        out = _fast(parse_list_timers_json, text)
    except ValueError as exc:
        assert "list-timers" in str(exc)
        return
    for unit, (nxt, last) in out.items():
        assert isinstance(unit, str)
        for t in (nxt, last):
            assert t is None or t.utcoffset() == timedelta(0)


class _FakeTransport:
    """Stands where the node transport stands: answers each systemctl call with given text."""

    where = "fake-node"

    def __init__(self, show: str, services: str, timers: str, timers_ok: bool = True) -> None:
        self.out = {"show-timer": show, "show-service": services, "list-timers": timers}
        self.timers_ok = timers_ok

    def run(self, argv, timeout_s=10.0):  # noqa: ANN001, ANN201 - transport protocol
        if argv[1] == "list-timers":
            key, ok = "list-timers", self.timers_ok
        else:
            key, ok = ("show-service" if "ExecMainStartTimestamp" in argv[4] or
                       argv[-1].endswith(".service") else "show-timer"), True
        return CommandResult(argv=tuple(argv), rc=0 if ok else 1, stdout=self.out[key],
                             started_at=utcnow(), duration_s=0.01, ok=ok,
                             failure=None if ok else "exit 1", where=self.where)


@given(show_text, show_text, st.one_of(rows.map(json.dumps), st.text(max_size=30)))
def test_read_timers_over_any_output_is_a_reading_or_unavailable(show, services, timers):
    r = _fast(read_timers, _FakeTransport(show, services, timers), ["a.timer"])
    assert isinstance(r, TimersReading | Unavailable)
    if isinstance(r, Unavailable):
        assert r.source == "timers" and r.reason


def test_bad_list_timers_reply_blanks_only_the_elapse_times_with_a_note():
    show = ("LoadState=loaded\nActiveState=active\nSubState=waiting\nUnit=a.service\n"
            "TimersCalendar={ OnCalendar=*-*-* 02:00:00 ; next_elapse=@1 }\n")
    r = read_timers(_FakeTransport(show, "LoadState=loaded\nActiveState=inactive\n",
                                   "[" * 5000 + "]" * 5000), ["a.timer"])
    assert isinstance(r, TimersReading)
    t = r.timers[0]
    assert t.active_state == "active" and t.schedule == ("OnCalendar=*-*-* 02:00:00",)
    assert t.next_elapse is None and t.last_trigger is None
    assert any("list-timers" in n and "deeper" in n for n in r.notes)
    assert UTC  # times elsewhere in the reading stay aware


def test_times_at_or_above_2_63_usec_are_no_time_not_an_error():
    """systemd prints USEC_INFINITY (2^64 − 1) and values ≥ 2^63 µs mean "never"; they must be
    None, not a year-292,277 error."""
    for v in (str(2**63), str(2**64 - 2), str(2**64 - 1)):
        assert parse_timestamp(v) is None
    # below 2^63 but past year 9999: a corrupt value, refused by name (not an OverflowError)
    import pytest

    with pytest.raises(ValueError, match="9223372036854775807.*out of range"):
        parse_timestamp(str(2**63 - 1))


def test_a_trigger_without_its_semicolon_is_not_a_schedule():
    assert parse_schedule("{ OnCalendar=daily }") == ()
    assert parse_schedule("{ OnCalendar=*-*-* 02:00:00 ; next_elapse=@1 } { OnBootSec=5min") \
        == ("OnCalendar=*-*-* 02:00:00",)


def test_systemd_booleans_all_spellings():
    from seat_console.sources.timers import parse_bool

    for v in ("yes", "true", "1", "on", " YES "):
        assert parse_bool(v) is True
    for v in ("no", "false", "0", "off", "No"):
        assert parse_bool(v) is False  # Persistent=0 is "no", not unknown
    for v in (None, "", "maybe", "2"):
        assert parse_bool(v) is None


@given(show_text, st.booleans())
def test_read_unit_states_over_any_output_is_a_reading_or_unavailable(show, ok):
    """The exporter's one-command read: any ``systemctl show`` answer gives a reading (one
    timer per unit, only the states set) or ``Unavailable`` with a reason; never raises."""
    from seat_console.sources.timers import read_unit_states

    r = _fast(read_unit_states, _FakeTransport(show, "", "", timers_ok=True)
              if ok else _FailingShow(), ["a.timer"])
    assert isinstance(r, TimersReading | Unavailable)
    if isinstance(r, Unavailable):
        assert r.source == "timers" and r.reason
    else:
        (t,) = r.timers
        assert t.unit == "a.timer" and t.next_elapse is None and t.service is None


def test_read_unit_states_reads_the_states() -> None:
    from seat_console.sources.timers import read_unit_states

    show = ("Id=a.timer\nLoadState=loaded\nActiveState=inactive\nSubState=dead\n\n"
            "Id=b.timer\nLoadState=not-found\nActiveState=inactive\nSubState=dead\n")
    r = read_unit_states(_FakeTransport(show, "", ""), ["a.timer", "b.timer"])
    assert isinstance(r, TimersReading)
    a, b = r.timers
    assert a.loaded and not a.active and not b.loaded


class _FailingShow:
    where = "fake-node"

    def run(self, argv, timeout_s=10.0):  # noqa: ANN001, ANN201 - transport protocol
        return CommandResult(argv=tuple(argv), rc=1, stdout="", stderr="Failed to connect to bus",
                             started_at=utcnow(), duration_s=0.01, ok=False, failure="exit 1",
                             where=self.where)


# -- the exporter's one node read: named units and a lease pattern in one `systemctl show` ------
_UNITS = ["a.timer", "b.timer"]
_GLOB = "seat-hold-*-lease.timer"
_LEASES = ["seat-hold-x1-lease.timer", "seat-hold-x2-lease.timer"]
_STATES = st.fixed_dictionaries({"LoadState": st.sampled_from(["loaded", "not-found", ""]),
                                 "ActiveState": st.sampled_from(["active", "inactive", ""]),
                                 "SubState": st.sampled_from(["waiting", "elapsed", "dead"])})


def _block(ident: str | None, states: dict[str, str], names: str | None = None) -> str:
    lines = [] if ident is None else [f"Id={ident}"]
    lines += [] if names is None else [f"Names={names}"]
    return "\n".join(lines + [f"{k}={v}" for k, v in states.items()]) + "\n"


class _ShowTransport:
    """Answers the one ``systemctl show`` with ``stdout`` (rc 0) and records the argv."""

    where = "fake-node"

    def __init__(self, stdout: str, ok: bool = True) -> None:
        self.stdout, self.ok, self.calls = stdout, ok, []

    def run(self, argv, timeout_s=10.0):  # noqa: ANN001, ANN201 - transport protocol
        self.calls.append(list(argv))
        return CommandResult(argv=tuple(argv), rc=0 if self.ok else 1, stdout=self.stdout,
                             stderr="" if self.ok else "Failed to connect to bus",
                             started_at=utcnow(), duration_s=0.01, ok=self.ok,
                             failure=None if self.ok else "exit 1", where=self.where)


# any block: a named unit, a lease, a stranger, junk Ids, no Id; in any order and number
_ANY_ID = st.one_of(st.none(), st.sampled_from(_UNITS + _LEASES + ["c.timer", "seat-hold-.timer",
                                                                  "-x.timer", "evil;rm.timer"]),
                    st.text(max_size=12))
_any_show = st.lists(st.tuples(_ANY_ID, _STATES), max_size=7).map(
    lambda bs: "\n".join(_block(i, s) for i, s in bs))


@given(st.one_of(_any_show, show_text), st.booleans())
def test_read_unit_states_matching_over_any_output_is_a_reading_or_named_unavailable(show, ok):
    """Any answer: a :class:`UnitStates` (every named unit once, in order; matched units each a
    unit name matching the pattern, once; ``None`` only with a reason naming systemctl show) or
    ``Unavailable`` of the timers with a reason; never raises."""
    from seat_console.sources.timers import UnitStates, read_unit_states_matching

    tr = _ShowTransport(show, ok)
    r = _fast(read_unit_states_matching, tr, _UNITS, [_GLOB])
    assert len(tr.calls) == 1 and tr.calls[0][-3:] == [*_UNITS, _GLOB]   # ONE command
    assert isinstance(r, UnitStates | Unavailable)
    if isinstance(r, Unavailable):
        assert r.source == "timers" and r.reason
        if ok:
            assert "systemctl show" in r.reason
        return
    assert [t.unit for t in r.named.timers] == _UNITS
    if r.matched is None:
        assert r.matched_error and "systemctl show: matched block" in r.matched_error
    else:
        assert r.matched_error is None
        ids = [t.unit for t in r.matched]
        assert len(ids) == len(set(ids))
        assert all(i.startswith("seat-hold-") and i.endswith("-lease.timer") for i in ids)


@given(st.lists(_STATES, min_size=2, max_size=2), st.lists(_STATES, max_size=2),
       st.integers(0, 1), st.sampled_from([None, "c.timer", "-x.timer", ""]))
def test_one_bad_matched_block_never_blanks_the_named_units(named, leases, bad_at, bad_id):
    """A good answer read right; the same answer with one matched block spoiled (no Id, a
    stranger, not a unit name) keeps the named units exactly and makes only the matched part
    unknown (``None``, never an empty "no lease")."""
    from seat_console.sources.timers import read_unit_states_matching

    good = [_block(u, s) for u, s in zip(_UNITS, named, strict=True)]
    good += [_block(u, s) for u, s in zip(_LEASES, leases, strict=False)]
    r = read_unit_states_matching(_ShowTransport("\n".join(good)), _UNITS, [_GLOB])
    assert [(t.load_state or "", t.active_state or "", t.sub_state)
            for t in r.named.timers] == [(s["LoadState"], s["ActiveState"], s["SubState"])
                                         for s in named]
    assert [t.unit for t in r.matched] == _LEASES[:len(leases)]
    if leases:   # one lease block spoiled in place
        i = 2 + min(bad_at, len(leases) - 1)
        spoiled = good[:i] + [_block(bad_id, leases[i - 2])] + good[i + 1:]
    else:        # a spoiled block after the named ones
        spoiled = good + [_block(bad_id, named[0])]
    r2 = read_unit_states_matching(_ShowTransport("\n".join(spoiled)), _UNITS, [_GLOB])
    assert r2.named.timers == r.named.timers
    assert r2.matched is None and "matched block" in r2.matched_error


def test_named_blocks_are_positional_and_must_name_their_unit():
    """systemctl prints the named units first: a first block for another unit (the order not
    as expected) is refused whole, naming the block; an alias (``Names``) is its unit; a
    missing named block is refused."""
    from seat_console.sources.timers import read_unit_states_matching

    on = {"LoadState": "loaded", "ActiveState": "active", "SubState": "waiting"}
    lease_first = _block(_LEASES[0], on) + "\n" + _block("a.timer", on) + "\n" + _block(
        "b.timer", on)
    r = read_unit_states_matching(_ShowTransport(lease_first), _UNITS, [_GLOB])
    assert isinstance(r, Unavailable) and "block 1 is 'seat-hold-x1-lease.timer'" in r.reason
    alias = _block("real.timer", on, names="real.timer a.timer") + "\n" + _block("b.timer", on)
    r = read_unit_states_matching(_ShowTransport(alias), _UNITS, [_GLOB])
    assert [t.unit for t in r.named.timers] == _UNITS and r.matched == ()
    r = read_unit_states_matching(_ShowTransport(_block("a.timer", on)), _UNITS, [_GLOB])
    assert isinstance(r, Unavailable) and "1 blocks for 2 units and 1 patterns" in r.reason


def test_a_duplicate_match_counts_once_and_a_named_unit_may_match_too():
    """systemd 252 prints a named unit again when a pattern matches it (checked in the lab:
    ``show apt-daily.timer 'apt-daily*.timer'``); each match is listed once."""
    from seat_console.sources.timers import read_unit_states_matching

    on = {"LoadState": "loaded", "ActiveState": "active", "SubState": "waiting"}
    text = "\n".join([_block("a.timer", on), _block("b.timer", on), _block(_LEASES[0], on),
                      _block(_LEASES[0], on)])
    r = read_unit_states_matching(_ShowTransport(text), _UNITS, [_GLOB])
    assert [t.unit for t in r.matched] == [_LEASES[0]]
    r = read_unit_states_matching(_ShowTransport(text), _UNITS, ["*.timer"])
    assert [t.unit for t in r.matched] == [_LEASES[0]]   # named units match nothing here


def test_patterns_are_checked_and_no_units_no_patterns_runs_nothing():
    import pytest

    from seat_console.sources.timers import check_unit_pattern, read_unit_states_matching

    for bad in ("-x*.timer", "a.timer", "x y*.timer", "*", "a;*.timer"):
        with pytest.raises(ValueError, match="not a systemd unit pattern"):
            check_unit_pattern(bad)
    tr = _ShowTransport("")
    r = read_unit_states_matching(tr, [], [])
    assert r.named.timers == () and r.matched == () and tr.calls == []
    # a pattern alone that matches nothing: systemctl prints nothing (checked on 252)
    r = read_unit_states_matching(_ShowTransport(""), [], [_GLOB])
    assert r.matched == ()
