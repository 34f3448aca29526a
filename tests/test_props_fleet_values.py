"""Property tests of the fleet over the values Prometheus may send (issue 31): ``+Inf``,
``-Inf``, ``NaN``, 1e300, negative counts, times in milliseconds or in the future.

The rule: a value that is not a finite number in its range is unknown (``None``) with a reason
in the row's ``unknown``, never 0 and never a crash; a seat whose last sample time is not a
time, or is dated beyond the clock skew allowed, is never fresh (never healthy); the rows, the
table's cells, the detail view's text, the sparkline and ``fleet --json`` take any of them.
Each property failed on the code before the fix (``Fleet.refresh`` raised ``OverflowError`` on
a card count of ``+Inf``, ``iso()`` raised on a time in ms, the sparkline raised on ``±Inf``, a
seat dated ``+Inf`` read healthy)."""

from __future__ import annotations

import json
import math

from hypothesis import example, given, settings
from hypothesis import strategies as st

from seat_console.core.fmt import fmt_duration
from seat_console.fleet.detail import SPARK_BLOCKS, read_history, spark
from seat_console.fleet.promapi import QueryResult, parse_response
from seat_console.tui.fleet import SeatDetail
from seat_console.fleet.rows import (
    PART,
    Fleet,
    FleetRow,
    cells,
    hhmm,
    iso,
)

NOW = 1_800_000_000.0
MAX_CLOCK_SKEW_S = 30.0      # rows.MAX_CLOCK_SKEW_S, MAX_COUNT: literal, so this file runs on
MAX_COUNT = float(2**53)     # the code before the fix (and fails there)
URL = "http://prom.test:9090"

BAD_TIMES = ["+Inf", "-Inf", repr(NOW * 1000), "1e300", repr(NOW + 3600),
             repr(NOW + MAX_CLOCK_SKEW_S + 1)]
"""``seen`` values no seat may be read as current from (``-Inf`` negated is ``+Inf``)."""
GOOD_SEEN = [repr(NOW - 1), repr(NOW + MAX_CLOCK_SKEW_S - 1), repr(-(NOW - 3)), repr(NOW - 100)]
FLAG = st.sampled_from(["0", "1", "NaN", "+Inf", "-Inf", "0.5", "7", None])
TIME = st.sampled_from([repr(NOW + 600), "+Inf", "-Inf", repr(NOW * 1000), "1e300", "-5", "NaN",
                        None])
COUNT = st.sampled_from(["3", "0", "+Inf", "-Inf", "-1", "1e300", "NaN", None])
KV = st.sampled_from(["0.5", "1", "1.5", "+Inf", "-Inf", "-0.1", "NaN", None])
CARDS = st.sampled_from(["2", "+Inf", "1.5", "NaN", "-1", "1e300", None])
MIB = st.sampled_from(["1000", "+Inf", "1e300", "-5", "NaN", None])


def _no_constant(name: str) -> None:
    raise AssertionError(f"{name} written into JSON")


def _finite_in(raw: str | None, lo: float, hi: float) -> bool:
    try:
        v = float(raw) if raw is not None else math.nan
    except ValueError:
        return False
    return math.isfinite(v) and lo <= v <= hi


@st.composite
def seats(draw):  # noqa: ANN001, ANN202
    n = draw(st.integers(1, 6))
    out = {}
    for i in range(n):
        out[f"n{i}:9469"] = {
            "seen": draw(st.sampled_from(BAD_TIMES + GOOD_SEEN)),
            "flags": {f: draw(FLAG) for f in ("engine_not_up", "seat_hold_active",
                                              "seat_hold_lease_armed", "seat_hold_without_lease",
                                              "seat_silence_active")},
            "hold_until": draw(TIME), "silence_until": draw(TIME),
            "running": draw(COUNT), "waiting": draw(COUNT), "kv": draw(KV),
            "cards": draw(CARDS), "used": draw(MIB), "free": draw(MIB), "reserved": draw(MIB)}
    return out


def _result(series: list[tuple[dict, str | None]]) -> QueryResult:
    body = json.dumps({"status": "success", "data": {"resultType": "vector", "result": [
        {"metric": m, "value": [NOW, v]} for m, v in series if v is not None]}})
    return parse_response(body, "q", URL)


class FakeProm:
    """Answers the fleet's 4 wire queries (and a window's numbers query) from ``seats``, as
    Prometheus shapes them: each part tagged ``part=NAME``, the values as sent."""

    url = URL

    def __init__(self, seats: dict, queries: dict[str, str]) -> None:
        self.seats, self.by_expr, self.requests = seats, {q: n for n, q in queries.items()}, 0

    def query(self, expr: str, at: float | None = None) -> QueryResult:
        self.requests += 1
        name = self.by_expr.get(expr, "numbers")
        out: list[tuple[dict, str | None]] = []
        for i, s in self.seats.items():
            tag = lambda part, **labels: {"instance": i, PART: part, **labels}  # noqa: E731
            if name == "seen":
                out.append(({"instance": i}, s["seen"]))
            elif name == "identity":
                out.append(({"instance": i, "node": f"node-{i}"}, "1"))
            elif name == "state":
                for f, v in s["flags"].items():
                    out.append((tag("states", q=f) if f == "engine_not_up"
                                else tag("states", __name__=f), v))
                out.append((tag("times", __name__="seat_hold_expiry_timestamp_seconds"),
                            s["hold_until"]))
                out.append((tag("times", __name__="seat_silence_end_timestamp_seconds"),
                            s["silence_until"]))
            else:
                out += [(tag("requests", __name__="vllm:num_requests_running"), s["running"]),
                        (tag("requests", __name__="vllm:num_requests_waiting"), s["waiting"]),
                        (tag("kv"), s["kv"]), (tag("gpu", q="cards"), s["cards"]),
                        (tag("gpu", __name__="DCGM_FI_DEV_FB_USED"), s["used"]),
                        (tag("gpu", __name__="DCGM_FI_DEV_FB_FREE"), s["free"]),
                        (tag("gpu", q="reserved"), s["reserved"])]
        return _result(out)


def _fleet(seats: dict) -> Fleet:
    fleet = Fleet(prom=None, clock=lambda: NOW)  # type: ignore[arg-type]
    fleet.prom = FakeProm(seats, fleet.queries)  # type: ignore[assignment]
    return fleet


def _check_row(row: FleetRow, seat: dict) -> None:
    """The row's values are each unknown or in range; a value sent out of range is unknown
    with a reason naming it; a seat whose time is unusable is never read as current."""
    json.dumps(row.to_json(), allow_nan=False)
    cells(row, NOW), cells(row, NOW, narrow=True)
    text = SeatDetail(None, row)._summary().plain   # the detail view's words  # type: ignore
    for why in row.unknown:
        assert why in text
    for v in (row.running, row.waiting):
        assert v is None or (math.isfinite(v) and 0 <= v <= MAX_COUNT)
    assert row.kv_usage is None or 0 <= row.kv_usage <= 1
    assert row.gpus >= -1
    for b in (row.gpu_used_bytes, row.gpu_total_bytes):
        assert b is None or (isinstance(b, int) and b >= 0)
    for t in (row.last_seen, row.hold_until, row.silence_until):
        assert t is None or iso(t) is not None
    if seat["seen"] in BAD_TIMES:
        assert row.state == "unknown" and row.last_seen is None and row.engine_up is None
        assert row.hold is None and row.running is None and row.gpus == -1
        assert row.unknown, "an unusable time without a reason"
        return
    assert row.state != "no-series"
    if row.state == "stale":
        return
    why = " | ".join(row.unknown)
    if not row.numbers_read:
        return
    for field, label, raw, hi in (("running", "requests running", seat["running"], MAX_COUNT),
                                  ("waiting", "requests waiting", seat["waiting"], MAX_COUNT),
                                  ("kv_usage", "KV cache usage", seat["kv"], 1.0)):
        if raw is not None and not _finite_in(raw, 0, hi):
            assert getattr(row, field) is None and label in why, (field, raw, why)
        elif raw is not None:
            assert getattr(row, field) == float(raw)
    if seat["cards"] is not None and not (_finite_in(seat["cards"], 0, 4096)
                                          and float(seat["cards"]).is_integer()):
        assert row.gpus == -1 and "GPU cards" in why, why      # unknown, never "no DCGM"
    if row.hold is not None and seat["hold_until"] is not None \
            and not _finite_in(seat["hold_until"], 0, 253_402_300_799):
        assert row.hold_until is None and "hold expiry" in why, why
    for f, v in seat["flags"].items():
        if v is not None and v not in ("0", "1") and float(seat["seen"]) > 0:
            assert "not 0 or 1" in why, (f, v, why)


@settings(max_examples=120, deadline=None)
@given(seats(), st.booleans())
@example({"a:1": {"seen": repr(NOW - 1), "flags": dict.fromkeys(
    ("engine_not_up", "seat_hold_active", "seat_hold_lease_armed", "seat_hold_without_lease",
     "seat_silence_active")), "hold_until": None, "silence_until": None, "running": "1",
    "waiting": "0", "kv": "0.5", "cards": "+Inf", "used": "+Inf", "free": "1",
    "reserved": None}}, False)
@example({"a:1": {"seen": "+Inf", "flags": dict.fromkeys(
    ("engine_not_up", "seat_hold_active", "seat_hold_lease_armed", "seat_hold_without_lease",
     "seat_silence_active")), "hold_until": None, "silence_until": None, "running": "1",
    "waiting": "0", "kv": "0.5", "cards": "2", "used": "1", "free": "1", "reserved": None}},
    False)
def test_refresh_never_raises_and_out_of_range_values_are_unknown_with_a_reason(seats,
                                                                              windowed):
    fleet = _fleet(seats)
    reading = fleet.refresh((lambda rows: [r.instance for r in rows]) if windowed else None)
    assert reading.ok, reading.error
    text = json.dumps(reading.to_json())
    json.loads(text, parse_constant=_no_constant)   # strict JSON: no Infinity / NaN literal
    assert {r.instance for r in reading.rows} == set(seats)
    for row in reading.rows:
        _check_row(row, seats[row.instance])
        if row.state == "healthy":
            assert seats[row.instance]["seen"] not in BAD_TIMES


def test_a_seat_dated_inf_or_in_the_future_is_never_fresh_or_healthy():
    flags = {"engine_not_up": None, "seat_hold_active": None, "seat_hold_lease_armed": None,
             "seat_hold_without_lease": None, "seat_silence_active": None}
    base = {"flags": flags, "hold_until": None, "silence_until": None, "running": "1",
            "waiting": "0", "kv": "0.5", "cards": "2", "used": "1", "free": "1",
            "reserved": None}
    seats = {f"s{i}:1": {**base, "seen": t} for i, t in enumerate(BAD_TIMES)}
    seats["ok:1"] = {**base, "seen": repr(NOW - 1)}
    rows = {r.instance: r for r in _fleet(seats).refresh().rows}
    assert rows["ok:1"].state == "healthy"
    for i, t in enumerate(BAD_TIMES):
        r = rows[f"s{i}:1"]
        assert r.state == "unknown" and r.last_seen is None, (t, r)
        assert r.running is None and r.kv_usage is None and r.engine_up is None
    assert "milliseconds" in rows[f"s{BAD_TIMES.index(repr(NOW * 1000))}:1"].unknown[0]
    assert "clock skew" in rows[f"s{BAD_TIMES.index(repr(NOW + 3600))}:1"].unknown[0]


@given(st.floats(allow_nan=True, allow_infinity=True) | st.none(),
       st.floats(allow_nan=True, allow_infinity=True))
def test_time_and_age_formatting_take_any_float(t, now):
    s = iso(t)
    assert s is None or (len(s) == 20 and s.endswith("Z"))
    assert isinstance(fmt_duration(t, style="cell", unknown="?"), str)   # the fleet's ages
    if t is not None:
        assert isinstance(hhmm(t, now), str)


finite_or_not = st.floats(allow_nan=True, allow_infinity=True) | st.none()


@given(st.lists(finite_or_not, max_size=40), st.integers(0, 50) | st.none(),
       finite_or_not, finite_or_not)
@example([math.inf, 1.0, -math.inf], None, None, None)
@example([1e308, -1e308, 0.0], None, 0.0, None)
def test_spark_draws_any_series_with_gaps_for_unknown(values, width, lo, hi):
    out = spark(values, width, lo=lo, hi=hi)
    pts = values[-width:] if width else values
    assert len(out) == len(pts)
    for v, c in zip(pts, out, strict=True):
        if v is None or not math.isfinite(v):
            assert c == " "                     # a gap: never 0, never a full block
        else:
            assert c in SPARK_BLOCKS


class _RangeProm:
    def __init__(self, points: list) -> None:
        self.points = points

    def query_range(self, expr, start, end, step_s):  # noqa: ANN001, ANN201
        body = json.dumps({"status": "success", "data": {"resultType": "matrix", "result": [
            {"metric": {}, "values": [[start + k * step_s, v] for k, v in
                                      enumerate(self.points)]}]}})
        return parse_response(body, expr, URL)


@given(st.lists(st.sampled_from(["1", "0", "NaN", "+Inf", "-Inf", "1e308", "-1e308"]),
                min_size=1, max_size=61))
def test_history_points_of_inf_are_gaps_named_in_problems(points):
    h = read_history(_RangeProm(points), "a:1", now=NOW)     # type: ignore[arg-type]
    infs = sum(1 for p in points if p in ("+Inf", "-Inf"))
    for line in h.lines:
        assert all(v is None or math.isfinite(v) for v in line.values)
        assert sum(1 for v in line.values if v is None) >= infs
        spark(line.values, 60, lo=0.0)
    assert any("±Inf" in p for p in h.problems) == bool(infs)
