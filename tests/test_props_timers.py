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
