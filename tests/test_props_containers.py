"""Property tests: docker ``inspect`` / ``version`` / ``events`` JSON (issue #12).

Asserted: ``container_state_from_inspect`` never raises and reports unknowns as ``None`` (a
restart count is never negative, times are aware UTC); ``event_from_api`` returns an event or
``None``, never raises; ``parse_docker_time`` returns aware UTC or a ``ValueError`` naming the
value; none over the 1 s deadline.
"""

from __future__ import annotations

import time
from datetime import timedelta

from hypothesis import given
from hypothesis import strategies as st

from seat_console.sources.containers import container_state_from_inspect
from seat_console.node.docker import event_from_api, parse_docker_time

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-2**70, 2**70) | st.floats(allow_nan=False)
    | st.text(max_size=12),
    lambda kids: st.lists(kids, max_size=3) | st.dictionaries(st.text(max_size=8), kids,
                                                              max_size=3), max_leaves=14)
time_texts = st.one_of(st.text(max_size=40), st.sampled_from([
    "2026-11-29T13:00:00.123456789Z", "2026-13-29T13:00:00Z", "2026-11-29T13:00:00+99:99",
    "0001-01-01T00:00:00Z", "9999-12-31T23:59:59-23:59", "", "2026-11-29T13:00:00"]))
times = st.one_of(json_values, time_texts)
inspect = st.fixed_dictionaries({
    "Id": json_values, "Image": json_values, "RestartCount": json_values,
    "State": st.one_of(json_values, st.fixed_dictionaries({
        "Status": json_values, "Running": json_values, "ExitCode": json_values,
        "OOMKilled": json_values, "StartedAt": times, "FinishedAt": times,
        "Health": st.one_of(json_values, st.fixed_dictionaries({"Status": json_values}))})),
    "Config": st.one_of(json_values, st.fixed_dictionaries({"Image": json_values,
                                                            "Env": json_values}))})


@given(st.one_of(inspect, json_values), st.one_of(
    st.none(), json_values, st.fixed_dictionaries({"RepoDigests": json_values})))
def test_inspect_never_raises_and_unknown_is_none(c, image):
    t0 = time.perf_counter()
    s = container_state_from_inspect("resident", "seat-vllm", c, image)
    assert time.perf_counter() - t0 < 1.0
    assert s.restart_count is None or s.restart_count >= 0
    for t in (s.started_at, s.finished_at):
        assert t is None or t.utcoffset() == timedelta(0)
    assert all(isinstance(d, str) for d in s.repo_digests)
    assert isinstance(s.state, str) and isinstance(s.running, bool)


events = st.fixed_dictionaries({
    "timeNano": st.one_of(json_values, st.integers(-2**80, 2**80)),
    "time": st.one_of(json_values, st.floats()), "Type": json_values, "Action": json_values,
    "Actor": st.one_of(json_values, st.fixed_dictionaries({
        "ID": json_values, "Attributes": st.one_of(json_values, st.fixed_dictionaries(
            {"name": json_values, "exitCode": json_values, "image": json_values}))}))})


@given(st.one_of(events, json_values))
def test_event_is_an_event_or_none(ev):
    e = event_from_api(ev)
    if e is not None:
        assert e.time_nano > 0 and e.at.utcoffset() == timedelta(0)
        assert isinstance(e.action, str) and isinstance(e.actor_id, str)


@given(time_texts)
def test_docker_time_is_aware_or_named_error(v):
    try:
        t = parse_docker_time(v)
    except ValueError as exc:
        assert "docker" in str(exc) and repr(v[:20])[1:-1] in str(exc)
        return
    assert t is None or t.utcoffset() == timedelta(0)


def test_month_13_names_the_value():
    try:
        parse_docker_time("2026-13-29T13:00:00Z")
    except ValueError as exc:
        assert "2026-13-29T13:00:00Z" in str(exc)
    else:
        raise AssertionError("month 13 accepted")
