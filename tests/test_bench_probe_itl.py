"""The issue-21 benchmark's arithmetic (``benchmarks/bench_probe.py``) and the stream server's
record (``benchmarks/stream_server.py``): the token-matched ITL error and the server's pace,
on hand-made records whose answers are known."""

from __future__ import annotations

import asyncio
import importlib.util
import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _load(name: str):  # noqa: ANN202 - a module
    spec = importlib.util.spec_from_file_location(name, ROOT / "benchmarks" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


bp = _load("bench_probe")
ss = _load("stream_server")


def test_itl_error_matches_token_by_token() -> None:
    sent = {"req-a": [10.0, 10.010, 10.020, 10.030], "req-b": [20.0, 20.005, 20.015],
            "req-c": [30.0, 30.01]}
    client = {"req-a": [0.011, 0.009, 0.010],      # +1 ms, -1 ms, 0 against 10, 10, 10 ms
              "req-b": [0.005, 0.010],             # exact
              "req-c": [0.01, 0.01],               # one ITL too many: not matched
              "req-x": [0.01]}                     # never sent: not matched
    e = bp.itl_error(client, sent)
    assert (e["matched_requests"], e["unmatched_requests"], e["tokens"]) == (2, 2, 5)
    assert e["error_p50_s"] == pytest.approx(0.0)
    assert e["abs_error_p50_s"] == pytest.approx(0.0)
    assert max(abs(e["error_p99_s"]), abs(e["error_p1_s"])) == pytest.approx(0.00098, abs=2e-5)
    assert e["sent_gap_p50_s"] == pytest.approx(0.010)
    assert e["dist_p50_diff_s"] == pytest.approx(0.0)


def test_itl_error_sees_a_late_client() -> None:
    """Every client gap 0.2 ms long: the signed error and the distributions' shift show it."""
    sent = {f"req-{i}": [i + 0.004 * k for k in range(9)] for i in range(5)}
    client = {k: [0.0042] * 8 for k in sent}
    e = bp.itl_error(client, sent)
    assert e["error_p50_s"] == pytest.approx(0.0002)
    assert e["dist_p50_diff_s"] == pytest.approx(0.0002)
    assert e["abs_error_p99_s"] == pytest.approx(0.0002)


def test_server_pace_counts_only_the_tagged_streams() -> None:
    summary = {"gap_s": 0.01, "cpu_s": 0.05, "send_lag_s": {}, "loadavg": [0, 0, 0],
               "sent": {"req-warmup-0": [0.0, 0.01],          # seconds before the phase
                        "req-p-0": [5.0, 5.01, 5.02], "req-p-1": [5.0, 5.01, 5.02]}}
    p = bp.server_pace(summary, {"req-p-0", "req-p-1"})
    assert p["tokens"] == 6 and p["span_s"] == pytest.approx(0.02)
    assert p["tok_s"] == pytest.approx(5 / 0.02)
    assert p["gap_p50_s"] == pytest.approx(0.01)
    assert bp.server_pace(summary)["span_s"] == pytest.approx(5.02)


def test_pct_is_numpys_linear() -> None:
    assert bp.pct([1.0, 2.0, 3.0, 4.0], 0.5) == 2.5
    assert bp.pct([1.0, 2.0, 3.0, 4.0], 0.99) == pytest.approx(3.97)
    assert bp.pct([], 0.5) is None


async def test_stream_server_records_each_tags_sends_in_order() -> None:
    """One request over a socket: the server streams max_tokens chunks and the summary holds
    one send time per token under the prompt's tag, a gap or more apart."""
    pacer = ss.Pacer(0.002)
    loop = asyncio.get_running_loop()
    server = await loop.create_server(lambda: ss._Server(pacer), "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        r, w = await asyncio.open_connection("127.0.0.1", port)
        body = json.dumps({"prompt": "req-t-7 hello", "max_tokens": 5}).encode()
        w.write(b"POST /v1/completions HTTP/1.1\r\nhost: x\r\ncontent-length: %d\r\n\r\n%s"
                % (len(body), body))
        data = await asyncio.wait_for(r.readuntil(b"0\r\n\r\n"), 30)
        w.close()
    finally:
        server.close()
    assert data.count(b"data: {") == 6 and b"data: [DONE]" in data    # 5 tokens + usage
    s = pacer.summary()
    assert list(s["sent"]) == ["req-t-7"] and s["tokens"] == 5
    t = s["sent"]["req-t-7"]
    assert len(t) == 5 and all(b - a >= 0 for a, b in zip(t, t[1:], strict=False))
    # the schedule: token k is due k+1 gaps after the arrival, never sent before it (a late
    # send is caught up by the next ones on a loaded machine, so the gaps between sends
    # themselves may be shorter than one gap)
    arrived = s["arrived"]["req-t-7"]
    assert all(tk >= arrived + (k + 1) * 0.002 - 1e-6 for k, tk in enumerate(t)), (arrived, t)


def test_server_pace_turnaround_and_served_rate_from_the_servers_record() -> None:
    """Two connections, two streams each: the window runs from the first arrival to the last
    send, the turnaround is the next arrival on a connection after the last send before it."""
    summary = {"gap_s": 0.01, "cpu_s": 0.05, "send_lag_s": {}, "loadavg": [0, 0, 0],
               "sent": {"req-p-0": [1.01, 1.02], "req-p-1": [1.03, 1.04],
                        "req-p-2": [1.0252, 1.0352], "req-p-3": [1.0482, 1.0582]},
               "arrived": {"req-p-0": 1.0, "req-p-1": 1.022, "req-p-2": 1.015,
                           "req-p-3": 1.0382},
               "conn": {"req-p-0": 1, "req-p-1": 1, "req-p-2": 2, "req-p-3": 2}}
    p = bp.server_pace(summary, set(summary["sent"]))
    assert p["window_s"] == pytest.approx(0.0582)
    assert p["served_tok_s"] == pytest.approx(8 / 0.0582)
    assert p["turnaround_s"]["n"] == 2 and p["connections"] == 2
    assert sorted([p["turnaround_s"]["p50"], p["turnaround_s"]["mean"]]) == pytest.approx(
        [0.0025, 0.0025])                      # (2 ms + 3 ms) / 2
    assert p["idle_share"] == pytest.approx(0.005 / (0.005 + 0.020 + 0.0202))
    old = {k: v for k, v in summary.items() if k not in ("arrived", "conn")}
    assert "window_s" not in bp.server_pace(old)     # a record without arrivals: no such figure


async def test_stream_server_records_arrival_and_connection() -> None:
    """Two requests one after the other on one connection, one on another: each stream's
    arrival precedes its first send by about a gap, the first two share a connection number."""
    pacer = ss.Pacer(0.002)
    loop = asyncio.get_running_loop()
    server = await loop.create_server(lambda: ss._Server(pacer), "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]

    async def ask(w: asyncio.StreamWriter, r: asyncio.StreamReader, tag: str) -> None:
        body = json.dumps({"prompt": f"{tag} hi", "max_tokens": 3}).encode()
        w.write(b"POST /v1/completions HTTP/1.1\r\nhost: x\r\ncontent-length: %d\r\n\r\n%s"
                % (len(body), body))
        await asyncio.wait_for(r.readuntil(b"0\r\n\r\n"), 30)

    try:
        r1, w1 = await asyncio.open_connection("127.0.0.1", port)
        r2, w2 = await asyncio.open_connection("127.0.0.1", port)
        await ask(w1, r1, "req-t-0")
        await ask(w1, r1, "req-t-1")
        await ask(w2, r2, "req-t-2")
        w1.close()
        w2.close()
    finally:
        server.close()
    s = pacer.summary()
    assert set(s["arrived"]) == set(s["conn"]) == {"req-t-0", "req-t-1", "req-t-2"}
    assert s["conn"]["req-t-0"] == s["conn"]["req-t-1"] != s["conn"]["req-t-2"]
    for tag, t in s["sent"].items():
        assert t[0] - s["arrived"][tag] >= 0.002 * 0.9
    p = bp.server_pace(s)
    assert p["turnaround_s"]["n"] == 1 and p["turnaround_s"]["p50"] > 0
    assert p["window_s"] >= p["span_s"]


# -- the rates' syntax and the verdicts (one run judges all four targets) --------------------

from hypothesis import given  # noqa: E402
from hypothesis import strategies as st  # noqa: E402


def test_parse_rates_reads_length_and_waves_or_takes_the_defaults() -> None:
    r = bp.parse_rates("64:0.0128:512:2,128:0.0064", output_len=64, waves=8)
    assert [(x["concurrency"], x["output_len"], x["waves"], x["requests"]) for x in r] == [
        (64, 512, 2, 128), (128, 64, 8, 1024)]
    assert [x["nominal_tok_s"] for x in r] == pytest.approx([5000.0, 20000.0])


@pytest.mark.parametrize("bad", ["64", "64:0", "0:0.01", "64:0.01:0", "64:0.01:64:0",
                                 "64:0.01:64:1:9", "x:0.01", "64:-1", ""])
def test_parse_rates_refuses_a_malformed_rate(bad: str) -> None:
    with pytest.raises(ValueError):
        bp.parse_rates(bad, 64, 8)


@given(st.lists(st.tuples(st.integers(1, 4096), st.floats(1e-5, 1.0),
                          st.one_of(st.none(), st.integers(1, 4096)),
                          st.one_of(st.none(), st.integers(1, 64))), min_size=1, max_size=8))
def test_parse_rates_round_trips(rates: list) -> None:
    """Any list of well-formed rates, written as the flag takes them, reads back as written
    (a missing WAVES with a LEN given; neither: the defaults)."""
    parts = []
    for c, gap, n, w in rates:
        if n is None:
            parts.append(f"{c}:{gap!r}")
        else:
            parts.append(f"{c}:{gap!r}:{n}" + (f":{w}" if w is not None else ""))
    got = bp.parse_rates(",".join(parts), output_len=7, waves=3)
    for (c, gap, n, w), x in zip(rates, got, strict=True):
        assert (x["concurrency"], x["gap_s"]) == (c, gap)
        assert x["output_len"] == (n if n is not None else 7)
        assert x["waves"] == (w if (n is not None and w is not None) else 3)
        assert x["requests"] == x["waves"] * c and x["nominal_tok_s"] == c / gap


def _client(cpu: float, tok: float, itl_us: float, served: float = 1.0) -> dict:
    return {"cpu_ratio": cpu, "tok_s_ratio": tok, "served_ratio": served,
            "itl_error": {"dist_p50_diff_s": itl_us * 1e-6}}


def _rate(nominal: float, pairs: list[tuple]) -> dict:
    return {"nominal_tok_s": nominal, "output_len": 512,
            "pairs": [{"clients": {"bench": _client(1, 1, 0), "hot": _client(*p)}}
                      for p in pairs]}


def _sat(ratio: float, bench_plateau: bool, probe_plateau: bool) -> dict:
    return {"share": 0.15, "ratio_vs_bench": {"hot": ratio},
            "clients": {"bench": {"sat_tok_s": 10_000, "at_nominal_tok_s": 40_000,
                                  "plateau": bench_plateau},
                        "hot": {"sat_tok_s": 10_000 * ratio, "at_nominal_tok_s": 80_000,
                                "plateau": probe_plateau}}}


def _by_target(vs: list[dict]) -> dict:
    return {v["target"]: v["met"] for v in vs}


def test_verdicts_every_pair_counts() -> None:
    """One pair over a limit fails its target; the 5k rate's CPU and ITL do not count (only
    the rates at 20k do), but every rate's tok/s does."""
    rates = [_rate(5000, [(0.9, 1.0, 400)] * 3),
             _rate(20000, [(0.33, 1.01, 10), (0.34, 1.02, -20), (0.35, 1.029, 45)]),
             _rate(50000, [(0.35, 1.025, 20)] * 3)]
    v = bp.verdicts(rates, _sat(2.2, True, True), ["hot"])
    assert _by_target(v) == {"cpu": True, "tok_s": True, "itl_p50": True, "saturation": True}
    rates[1]["pairs"][2]["clients"]["hot"] = _client(0.51, 1.031, -51)
    v = bp.verdicts(rates, _sat(1.9, True, True), ["hot"])
    assert _by_target(v) == {"cpu": False, "tok_s": False, "itl_p50": False,
                             "saturation": False}
    tok = next(x for x in v if x["target"] == "tok_s")
    assert "outside at 20k/512tok" in tok["text"] and "50k" not in tok["text"].split("outside")[1]
    rates[2]["pairs"][0]["clients"]["hot"] = _client(0.3, 0.96, 0)     # below by 4 %
    tok = next(x for x in bp.verdicts(rates, None, ["hot"]) if x["target"] == "tok_s")
    assert "50k/512tok" in tok["text"].split("outside")[1]


def test_verdicts_saturation_is_judged_only_where_bench_serve_stopped_growing() -> None:
    rates = [_rate(20000, [(0.3, 1.0, 0)])]
    sat = {(r, b, p): _by_target(bp.verdicts(rates, _sat(r, b, p), ["hot"]))["saturation"]
           for r in (1.5, 2.5) for b in (True, False) for p in (True, False)}
    assert sat == {(2.5, True, True): True, (2.5, True, False): True,     # a lower bound >= 2
                   (1.5, True, True): False, (1.5, True, False): None,    # still growing
                   (2.5, False, True): None, (2.5, False, False): None,
                   (1.5, False, True): None, (1.5, False, False): None}
    assert _by_target(bp.verdicts(rates, None, ["hot"]))["saturation"] is None
    assert _by_target(bp.verdicts([_rate(5000, [(0.3, 1.0, 0)])], None, ["hot"]))["cpu"] is None


def test_plateau_is_no_new_high_not_the_last_step() -> None:
    """bench serve's medians at 0.15 of a core on 2026-12-03 (flat from the first rate, the
    last step +13 % of noise) stopped growing; a series still climbing did not."""
    flat = [15860, 15113, 14928, 14101, 16006]
    assert bp.plateaued(flat)
    assert not bp.plateaued([18678, 34349, 36347, 37779, 41000])   # +8.5 % over the best
    assert bp.plateaued([18678, 34349, 36347, 37779, 39578])       # +4.8 %
    assert not bp.plateaued([10_000])
    rates = [{"nominal_tok_s": n, "pairs": [{"clients": {"bench": {
        "output_throughput": t, "server": {"tok_s": n, "send_lag_s": {"p50": 0.0006}},
        "core_share": 0.15, "cgroup": {"nr_throttled": 99, "nr_periods": 100}}}}]}
        for n, t in zip([20e3, 40e3, 60e3, 80e3, 100e3], flat, strict=True)]
    assert bp.saturation(rates, ["bench"], 0.15)["clients"]["bench"]["plateau"] is True
