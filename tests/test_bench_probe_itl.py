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
    assert t[-1] - t[0] >= 4 * 0.002 * 0.9          # the schedule: 4 gaps after the first
