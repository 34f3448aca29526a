"""The fleet core without a server: row building, trouble order, silences, the console's
argument list, the [fleet] profile block and the screen's layout arithmetic."""

from __future__ import annotations

import json
import re
import shlex
import sys
from datetime import UTC, datetime

import pytest
import re2
from hypothesis import given, settings
from hypothesis import strategies as st

from seat_console.fleet.promapi import PromClient, PromError, parse_response
from seat_console.fleet.rows import (
    FleetRow,
    InventoryEntry,
    SilenceIndex,
    build_rows,
    cells,
    instance_matcher,
    lease_overdue,
    node_names,
    queries,
)
from seat_console.fleet.setup import console_argv
from seat_console.core.profile import ProfileError, default_profile_text, parse_profile
from seat_console.sources.silences import Silence
from seat_console.tui.fleet import NARROW, backoff_s, layout

NOW = 1_800_000_000.0


def _vec(series):  # noqa: ANN001, ANN202
    body = json.dumps({"status": "success", "data": {"resultType": "vector", "result": [
        {"metric": m, "value": [NOW, str(v)]} for m, v in series]}})
    return parse_response(body, "q")


def states_answer(seats: dict[str, dict[str, object]]):  # noqa: ANN201
    """What the sparse ``states`` query answers for seats given as instance → {family: value}
    (value ``None``: the family was not sent), as Prometheus computes it: flags not at their
    usual value, and ``present`` only where not every core family was sent."""
    series = []
    for i, fams in seats.items():
        sent = {k: v for k, v in fams.items() if v is not None}
        for k, v in sent.items():
            if k == "seat_engine_up":
                if str(v) != "1":
                    series.append(({"instance": i, "q": "engine_not_up"}, v))
            elif str(v) != "0":
                series.append(({"instance": i, "__name__": k}, v))
        core = [k for k in sent if k != "seat_probe_disrupted"]
        if core and len(core) != 5:
            series.append(({"instance": i, "q": "present"}, len(core)))
    return _vec(series)


def requests_answer(seats: dict[str, dict[str, object]]):  # noqa: ANN201
    """What the ``requests`` query answers (its ``probe_zero`` part) for the same seats."""
    return _vec([({"instance": i, "q": "probe_zero"}, 1) for i, fams in seats.items()
                 if fams.get("seat_probe_disrupted") is not None
                 and str(fams["seat_probe_disrupted"]) == "0"])


def _got(seats: dict[str, dict]) -> dict:
    """Query results for seats given as instance → {family: value, 'seen': ts, ...}."""
    got = {name: None for name in queries(600, 15)}
    got["seen"] = _vec([({"instance": i}, d["seen"]) for i, d in seats.items()])
    fams = {i: {k: v for k, v in d.items() if k.startswith("seat_") and not k.endswith("_seconds")}
            for i, d in seats.items()}
    got["states"] = states_answer(fams)
    got["requests"] = requests_answer(fams)
    got["times"] = _vec([({"instance": i, "__name__": k}, v) for i, d in seats.items()
                         for k, v in d.items() if k.endswith("_seconds")])
    got["gpu"] = gpu_answer({i: d.get("cards", ()) for i, d in seats.items()})
    return got


def gpu_answer(seats: dict[str, list[dict[str, float]]]):  # noqa: ANN201
    """What the ``gpu`` query answers for seats given as instance → cards (family → MiB), as
    Prometheus computes it (the PromQL itself is checked by promtool in
    test_fleet_gpu_promql.py): ``cards``; USED / FREE summed when every card has the family;
    RESERVED summed over the cards that have it."""
    series = []
    for i, cards in seats.items():
        if not cards:
            continue
        series.append(({"instance": i, "q": "cards"}, len(cards)))
        for fam in ("DCGM_FI_DEV_FB_USED", "DCGM_FI_DEV_FB_FREE", "DCGM_FI_DEV_FB_RESERVED"):
            have = [c[fam] for c in cards if fam in c]
            if fam.endswith("RESERVED") and have:
                series.append(({"instance": i, "q": "reserved"}, sum(have)))
            elif have and len(have) == len(cards):
                series.append(({"instance": i, "__name__": fam}, sum(have)))
    return _vec(series)


def _seat(up=1, held=0, lease=0, no_lease=0, seen=NOW - 1, **kw) -> dict:  # noqa: ANN001
    return {"seen": seen, "seat_engine_up": up, "seat_hold_active": held,
            "seat_hold_lease_armed": lease, "seat_hold_without_lease": no_lease,
            "seat_silence_active": 0, "seat_probe_disrupted": 0, **kw}


def test_trouble_order_and_states():
    seats = {
        "a:1": _seat(),                                          # healthy
        "b:1": _seat(up=1, held=1, lease=1, seat_hold_expiry_timestamp_seconds=NOW + 600),
        "c:1": _seat(up=0),                                      # down, not held
        "d:1": _seat(up=0, held=1, no_lease=1),                  # without lease
        "e:1": _seat(seen=NOW - 100),                            # stale
        "f:1": _seat(up=0, held=1, lease=1),                     # held, engine down: held
    }
    rows = build_rows(_got(seats), NOW, 15.0, [InventoryEntry("z:1", node="zz")])
    assert [(r.instance, r.state) for r in rows] == [
        ("d:1", "without-lease"), ("c:1", "down"), ("e:1", "stale"), ("z:1", "no-series"),
        ("b:1", "held"), ("f:1", "held"), ("a:1", "healthy")]
    texts = {r.instance: cells(r, NOW) for r in rows}
    assert texts["d:1"][2] == "WITHOUT LEASE"
    when = datetime.fromtimestamp(NOW + 600, UTC).strftime("%H:%MZ")
    assert texts["b:1"][2] == f"until {when}"
    assert texts["e:1"][1] == "stale 100 s" and texts["e:1"][7] == "n/a"
    assert texts["z:1"][0] == "zz" and texts["z:1"][1] == "no series"
    assert texts["a:1"][7] == "no DCGM"                  # the GPU query answered, no cards


def test_an_overdue_hold_lease_is_trouble_not_a_hold():
    """A seat held with a lease that was to fire at 07:12Z, read at 08:21Z, showed as a
    normal hold ("until 07:12Z", cyan, with the held seats): its restore did not run. It is
    ``hold-overdue``, after a hold without a lease and before an engine down; a lease just
    past its end (within two scrape intervals: the restore is on its way) is still held."""
    now = datetime(2027, 1, 15, 8, 21, tzinfo=UTC).timestamp()
    due = datetime(2027, 1, 15, 7, 12, tzinfo=UTC).timestamp()
    seen = now - 1
    seats = {
        "a:1": _seat(seen=seen, held=1, lease=1, seat_hold_expiry_timestamp_seconds=due),
        "b:1": _seat(seen=seen, held=1, lease=1,
                     seat_hold_expiry_timestamp_seconds=now - 20),     # just fired
        "c:1": _seat(seen=seen, up=0),                                  # down, not held
        "d:1": _seat(seen=seen, up=0, held=1, no_lease=1),              # without lease
        "e:1": _seat(seen=seen, up=0, held=1, lease=1,                  # engine down too
                     seat_hold_expiry_timestamp_seconds=due),
        "f:1": _seat(seen=seen, held=1, lease=1,
                     seat_hold_expiry_timestamp_seconds=now + 600),
    }
    rows = build_rows(_got(seats), now, 15.0)
    assert [(r.instance, r.state) for r in rows] == [
        ("d:1", "without-lease"), ("a:1", "hold-overdue"), ("e:1", "hold-overdue"),
        ("c:1", "down"), ("b:1", "held"), ("f:1", "held")]
    texts = {r.instance: cells(r, now) for r in rows}
    assert texts["a:1"][2] == "OVERDUE 07:12Z" and texts["e:1"][2] == "OVERDUE 07:12Z"
    assert texts["f:1"][2] == "until 08:31Z"
    assert lease_overdue("lease", due, now, 15.0) and not lease_overdue("held", due, now, 15.0)
    assert not lease_overdue("lease", None, now, 15.0)


def test_stale_after_two_intervals_not_one():
    rows = build_rows(_got({"a:1": _seat(seen=NOW - 29), "b:1": _seat(seen=NOW - 31)}),
                      NOW, 15.0)
    assert {r.instance: r.state for r in rows} == {"a:1": "healthy", "b:1": "stale"}


def test_gpu_memory_mib_to_bytes_and_missing_free_is_unknown():
    seats = {"a:1": _seat(cards=[{"DCGM_FI_DEV_FB_USED": 1000, "DCGM_FI_DEV_FB_FREE": 24}] * 2),
             "b:1": _seat(cards=[{"DCGM_FI_DEV_FB_USED": 1000}])}
    by = {r.instance: r for r in build_rows(_got(seats), NOW, 15.0)}
    assert by["a:1"].gpu_used_bytes == 2000 << 20 and by["a:1"].gpu_total_bytes == 2048 << 20
    assert by["b:1"].gpu_used_bytes == 1000 << 20 and by["b:1"].gpu_total_bytes is None
    assert cells(by["b:1"], NOW)[7] == "0.9/n/a"


def test_missing_family_is_unknown_not_default():
    seats = {"a:1": _seat(), "b:1": {**_seat(), "seat_hold_active": None},
             "c:1": {**_seat(), "seat_engine_up": None}, "d:1": _seat(up="NaN")}
    by = {r.instance: r for r in build_rows(_got(seats), NOW, 15.0)}
    assert by["a:1"].state == "healthy" and by["a:1"].hold == "none"
    assert by["b:1"].hold is None and by["b:1"].state == "unknown"
    assert by["c:1"].engine_up is None and by["c:1"].state == "unknown"
    assert by["d:1"].engine_up is None and cells(by["d:1"], NOW)[1] == "?"


def test_a_seat_that_never_ran_a_probe_is_healthy_its_probe_flag_unknown():
    """The exporter sends ``seat_probe_disrupted`` only while a probe run is kept: its absence
    says nothing about the engine or the hold (a fresh lab seat read 'unknown' before)."""
    seats = {"a:1": {**_seat(), "seat_probe_disrupted": None},
             "b:1": _seat(), "c:1": _seat(seat_probe_disrupted=1),
             "d:1": {**_seat(), "seat_probe_disrupted": None, "seat_silence_active": None}}
    by = {r.instance: r for r in build_rows(_got(seats), NOW, 15.0)}
    assert by["a:1"].state == "healthy" and by["a:1"].probe_disrupted is None
    assert by["a:1"].hold == "none" and by["a:1"].engine_up is True
    assert by["b:1"].probe_disrupted is False and by["c:1"].probe_disrupted is True
    assert by["d:1"].state == "unknown"        # a core family missing: still unknown


def test_one_failed_scrape_keeps_the_previous_row():
    got = _got({"a:1": _seat()})
    first = build_rows(got, NOW, 15.0)
    got["states"] = _vec([])                     # every series stale-marked at once:
    got["seen"] = _vec([({"instance": "a:1"}, -(NOW - 1))])   # no current sample
    again = build_rows(got, NOW + 5, 15.0, previous={r.instance: r for r in first})
    assert again[0].state == "healthy" and again[0].engine_up is True
    assert build_rows(got, NOW + 5, 15.0)[0].state == "unknown"    # no previous row


def _silence(sid: str, state: str, matchers: list[tuple[str, str, bool, bool]],
             ends: str = "2027-01-15T08:00:00Z") -> Silence:
    return Silence.from_api({"id": sid, "status": {"state": state}, "startsAt":
                             "2026-01-01T00:00:00Z", "endsAt": ends, "matchers": [
                                 {"name": n, "value": v, "isRegex": r, "isEqual": e}
                                 for n, v, r, e in matchers]})


def test_silence_index_matches_instance_node_and_regex():
    idx = SilenceIndex([
        _silence("s1", "active", [("instance", "a:1", False, True),
                                  ("alertname", "SeatDown", False, True)]),
        _silence("s2", "active", [("node", "gpu-.*-7", True, True)]),
        _silence("s3", "expired", [("instance", "b:1", False, True)]),
        _silence("s4", "active", [("alertname", "Everything", False, True)]),
        _silence("s5", "pending", [("instance", "c:1", False, True)]),
    ])
    ids = lambda labels: sorted(s.id for s in idx.for_seat(labels))  # noqa: E731
    assert ids({"instance": "a:1", "node": "gpu-a-1"}) == ["s1"]
    assert ids({"instance": "x:1", "node": "gpu-x-7"}) == ["s2"]
    assert ids({"instance": "b:1", "node": "gpu-b"}) == []          # expired
    assert ids({"instance": "c:1", "node": "gpu-c"}) == ["s5"]
    rows = build_rows(_got({"a:1": _seat(), "c:1": _seat()}), NOW, 15.0, silences=idx)
    by = {r.instance: r for r in rows}
    assert by["a:1"].silence == "active" and by["c:1"].silence == "pending"
    assert by["a:1"].silence_until == datetime(2027, 1, 15, 8, tzinfo=UTC).timestamp()


def test_console_argv_local_and_ssh(monkeypatch):
    local = console_argv(InventoryEntry("a:1", profile="/p/x.toml"), readonly=True)
    assert local == [sys.executable, "-m", "seat_console", "--profile", "/p/x.toml",
                     "--readonly"]
    assert console_argv(InventoryEntry("a:1")) is None
    monkeypatch.setattr("shutil.which", lambda name: "/usr/bin/ssh")
    evil = "/etc/p'; rm -rf / #.toml"
    argv = console_argv(InventoryEntry("a:1", profile=evil, ssh="oncall@gpu-1"))
    assert argv[:4] == ["/usr/bin/ssh", "-t", "--", "oncall@gpu-1"]
    assert shlex.split(argv[4]) == ["seat-console", "--profile", evil]   # one quoted word


def test_profile_fleet_block_strict():
    base = default_profile_text()
    p = parse_profile(base + '\n[fleet]\nprometheus_url = "http://prom:9090"\n'
                             '[[fleet.inventory]]\ninstance = "a:1"\nssh = "me@h"\n')
    assert str(p.fleet.prometheus_url).startswith("http://prom:9090")
    assert p.fleet.inventory[0].ssh == "me@h"
    for bad, word in (('[fleet]\nprometheus = "x"\n', "unknown key"),
                      ('[[fleet.inventory]]\ninstance = "a"\nssh = "-oProxyCommand=x"\n',
                       "ssh"),
                      ('[[fleet.inventory]]\ninstance = "a"\n[[fleet.inventory]]\n'
                       'instance = "a"\n', "twice"),
                      ('[fleet]\nrefresh_interval_s = 0.1\n', "refresh_interval_s")):
        with pytest.raises(ProfileError, match=word):
            parse_profile(base + "\n" + bad)


def test_client_refuses_bad_urls():
    for url in ("ftp://x", "not a url", "http://u:p@host:9090"):
        with pytest.raises(PromError):
            PromClient(url)


def test_layout_fits_80_columns_and_backoff():
    w = layout(80)
    assert sum(w.values()) + 3 <= 80 and w["node"] >= NARROW["node"]
    assert layout(200)["node"] >= 22
    assert backoff_s(5, 0) == 5 and backoff_s(5, 1) == 10 and backoff_s(1, 3) == 5
    assert backoff_s(60, 2) == 30


def test_row_json_times_are_z():
    r = FleetRow(instance="a:1", node="a", state="held", last_seen=NOW, hold="lease",
                 hold_until=NOW + 60)
    d = r.to_json()
    assert d["last_seen"] == "2027-01-15T08:00:00Z" and d["hold_until"].endswith("Z")


class _OneReading:
    """A fleet whose refresh returns a fixed reading (the markup check needs no server)."""

    def __init__(self, rows):  # noqa: ANN001
        from seat_console.fleet.rows import FleetReading

        self.reading = FleetReading(rows=tuple(rows), taken_at=NOW, rows_at=NOW, ok=True)
        self.prom = type("P", (), {"url": "http://prom.test:9090"})()
        self.inventory = ()
        self.last_good = None

    def refresh(self, window=None):  # noqa: ANN001, ANN201
        return self.reading


async def test_names_from_labels_are_not_markup():
    from seat_console.tui.fleet import FleetApp, FleetTable

    evil = "[bold red]gpu-1[/bold red] [link=http://x]y"
    app = FleetApp(_OneReading([FleetRow(instance="i:1", node=evil, state="healthy",
                                         engine_up=True, hold="none", silence="none")]),
                   interval_s=3600)
    async with app.run_test(size=(200, 20)) as pilot:
        for _ in range(100):
            if app._order:
                break
            await pilot.pause(0.05)
        table = app.query_one(FleetTable)
        assert table.get_cell("i:1", "node") == evil
        width = table.columns[0][2]                       # drawn as itself, not as markup
        assert table.render_line(1).text[1:1 + width] == evil[:width]


_FAMS = ("seat_engine_up", "seat_hold_active", "seat_hold_lease_armed", "seat_hold_without_lease",
         "seat_silence_active", "seat_probe_disrupted")


@st.composite
def _fleet_answers(draw):  # noqa: ANN001, ANN202
    """Random answers of the state queries for up to 12 seats, as Prometheus shapes them."""
    n = draw(st.integers(1, 12))
    seats = {}
    for i in range(n):
        seen = draw(st.sampled_from([NOW - 1, NOW - 20, NOW - 100, -(NOW - 3), -(NOW - 100)]))
        if draw(st.booleans()):       # most seats of a fleet: every family at its usual value
            fams = {f: (1 if f == "seat_engine_up" else 0) for f in _FAMS}
        else:
            fams = {f: draw(st.sampled_from([0, 1, None, "NaN"] if f != "seat_engine_up"
                                            else [1, 0, None, "NaN"])) for f in _FAMS}
        extra = {}
        if draw(st.integers(0, 3)) == 0:
            extra["seat_hold_expiry_timestamp_seconds"] = NOW + 300
        seats[f"n{i}:9469"] = {"seen": seen, **fams, **extra,
                               "_probe": draw(st.integers(0, 3)) == 0,
                               "_down": draw(st.integers(0, 3)) == 0}
    got = _got({i: {k: v for k, v in d.items() if not k.startswith("_")}
                for i, d in seats.items()})
    got["probe"] = _vec([({"instance": i, "phase": "c64"}, 1) for i, d in seats.items()
                         if d["_probe"]])
    got["sources_down"] = _vec([({"instance": i, "source": "engine"}, 1)
                                for i, d in seats.items() if d["_down"]])
    for name in ("requests", "kv", "gpu"):
        got[name] = None
    return got


@settings(max_examples=150, deadline=None)
@given(_fleet_answers(), st.booleans())
def test_the_fast_path_builds_the_rows_the_slow_path_does(got, with_silences):
    """``build_rows``' shortcut for seats with nothing unusual must give exactly the rows of
    the full decoding, for any mix of current, vanished, stale and troubled seats."""
    import seat_console.fleet.rows as rows_mod

    idx = SilenceIndex([_silence("s1", "active", [("instance", "n1:9469", False, True)])]) \
        if with_silences else None
    fast = build_rows(got, NOW, 15.0, silences=idx, numbers=False)
    rows_mod._FAST_PATH = False
    try:
        slow = build_rows(got, NOW, 15.0, silences=idx, numbers=False)
    finally:
        rows_mod._FAST_PATH = True
    assert fast == slow


_INSTANCE = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), min_size=1,
                    max_size=12)


@settings(max_examples=200, deadline=None)
@given(st.lists(_INSTANCE, min_size=1, max_size=6, unique=True), st.lists(_INSTANCE, max_size=6))
def test_instance_matcher_matches_its_members_literally_and_nothing_else(members, others):
    """The window's matcher, read back as Prometheus would (PromQL string unquoted, the
    pattern anchored, RE2): every member matches, a value that is not a member does not —
    metacharacters, quotes and backslashes in an instance are literal."""
    m = instance_matcher(members)
    assert m.startswith(', instance=~"') and m.endswith('"')
    assert not re.search(r"\\u[dD][89abAB]", m), m  # Go refuses surrogate-pair escapes
    pattern = json.loads(m[len(", instance=~"):])  # promql_string is a Go/JSON-style string
    rx = re2.compile(f"^(?:{pattern})$")
    for v in members:
        assert rx.fullmatch(v), (v, pattern)
    near = []  # what a pattern read as a regex would also match: a metacharacter's work
    for v in members:
        near += [v + "x", "x" + v, v + v, v[:-1]]
        for i, c in enumerate(v):
            near += [v[:i] + "x" + v[i + 1:], v[:i] + c + v[i:], v[:i] + v[i + 1:]]
    for v in [*others, *near]:
        if v not in members:
            assert not rx.fullmatch(v), (v, pattern)
    assert instance_matcher(None) == ""
    assert instance_matcher(list(reversed(members))) == m


def test_node_names_from_the_identity_answer_given_or_decoded():
    """A seat's node name is its ``seat_info`` ``node`` label (the last series of a seat
    renamed within the window); ``build_rows`` decodes ``identity`` itself, or takes the
    decoding :class:`Fleet` keeps beside a reused answer — the same rows either way; a seat
    with no ``node`` label shows its instance."""
    got = _got({"a:1": _seat(), "b:1": _seat(), "c:1": _seat()})
    got["identity"] = _vec([({"instance": "a:1", "node": "old-a"}, 1),
                            ({"instance": "a:1", "node": "node-a"}, 1),
                            ({"instance": "b:1", "node": "node-b"}, 1),
                            ({"instance": "c:1"}, 1)])
    names = node_names(got["identity"])
    assert names == {"a:1": "node-a", "b:1": "node-b", "c:1": None}
    assert node_names(None) == {}
    decoded = build_rows(got, NOW, 15.0)
    assert {r.instance: r.node for r in decoded} == {"a:1": "node-a", "b:1": "node-b",
                                                     "c:1": "c:1"}
    assert build_rows(got, NOW, 15.0, nodes=names) == decoded
    renamed = build_rows(got, NOW, 15.0, nodes={**names, "b:1": "node-b2"})
    assert {r.instance: r.node for r in renamed}["b:1"] == "node-b2"


def test_history_points_read_in_the_rows_units() -> None:
    from seat_console.fleet.detail import Line, fmt_point

    assert fmt_point("KV cache usage", 0.532) == "53%"          # the row says "KV cache 53%"
    assert fmt_point("GPU memory used", 81920.0) == "80.0 GiB"   # DCGM's MiB, as the row: GiB
    assert fmt_point("GPU memory used", 81970.0) == "80.0 GiB"   # one decimal, truncated
    assert fmt_point("requests running", 3.0) == "3" and fmt_point("held", 1.0) == "1"
    assert fmt_point("KV cache usage", None) == "n/a"
    line = Line("x", (1.0, None, 2.0, None))
    assert line.last == 2.0 and line.last_index == 2 and Line("y", (None,)).last_index is None
    from seat_console.fleet.detail import SEAT_GPU_LINE, seat_sum

    both = seat_sum([Line("a", (1.0, None, 3.0)), Line("b", (2.0, 5.0, 4.0))])
    assert both == Line(SEAT_GPU_LINE, (3.0, None, 7.0))     # a partial sum is a gap


async def test_columns_sized_by_content_at_120_columns():
    """At 120 columns the node column took ~57 while a probe phase was cut to ``single-`` and
    ``Silence`` ran into ``Run`` (issue 33): the columns are sized by their content."""
    from seat_console.fleet.rows import COLUMNS
    from seat_console.tui.fleet import FleetApp, FleetTable

    rows = [FleetRow(instance="gpu-1:9469", node="gpu-1", state="held", engine_up=True,
                     hold="lease", silence="active", silence_until=NOW + 3600,
                     probe_phase="single-stream-warmup"),
            FleetRow(instance="gpu-22:9469", node="gpu-22", state="healthy", engine_up=True,
                     hold="none", silence="none")]
    app = FleetApp(_OneReading(rows), interval_s=3600)
    async with app.run_test(size=(120, 20)) as pilot:
        for _ in range(100):
            if app._order:
                break
            await pilot.pause(0.05)
        table = app.query_one(FleetTable)
        widths = {k: w for k, _, w in table.columns}
        assert widths["node"] < 20                                   # not ~57
        assert table.get_cell("gpu-1:9469", "probe") == "single-stream-warmup"
        assert widths["probe"] > len("single-stream-warmup")         # shown whole
        header = table.render_line(0).text
        for _key, name in COLUMNS:
            assert f"{name} " in header or header.rstrip().endswith(name), (name, header)
        assert "SilenceRun" not in header and "WaitKV" not in header
        assert table.line_width <= 120


def test_the_seat_detail_puts_gib_after_a_figure_only():
    """The trial's seat detail: "GPU memory no DCGM GiB". A figure gets its unit; words
    (no DCGM, n/a) get none."""
    from seat_console.tui.fleet import SeatDetail

    def said(**kw) -> str:
        row = FleetRow(instance="a:1", node="a", state="healthy", last_seen=NOW,
                       numbers_read=True, **kw)
        return SeatDetail.__new__(SeatDetail)._summary.__func__(
            type("D", (), {"row": row, "read_at": None})()).plain

    assert "GPU memory no DCGM (0 card(s) with DCGM series)" in said(gpus=0)
    assert "GPU memory n/a (" in said(gpus=-1)
    two = said(gpus=2, gpu_used_bytes=80 * 2**30, gpu_total_bytes=160 * 2**30)
    assert "GPU memory 80.0/160.0 GiB (GiB = 2^30 B; 2 card(s)" in two, two
