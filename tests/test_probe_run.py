"""Probe runs against the local SSE server (real HTTP, engine-like /metrics): phases, honest
accounting, incomplete / unverified / disrupted / interrupted runs kept; stats and store."""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import stat
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from seat_console.node.runner import Runner
from seat_console.node.transport import LocalTransport
from seat_console.core.probe_record import RequestRecord
from seat_console.probe.engine_counters import (
    EngineCounters,
    compare,
    kv_capacity,
    parse_counters,
)
from seat_console.probe.interference import (
    InterferenceMonitor,
    container_disruptions,
    counters_reset,
    read_services,
    service_changes,
)
from seat_console.probe.run import HoldInfo, Preflight, Probe
from seat_console.core.probe_stats import percentile, phase_stats
from seat_console.probe.store import RunWriter, list_runs, read_requests, read_summary
from seat_console.core.profile import LoadedProfile, default_profile_text, parse_profile
from seat_console.core.base import utcnow
from seat_console.node.docker import ContainerEvent
from sse_server import SSEServer


def _loaded(tmp_path: Path, url: str, prompts: list[str], phases: str) -> LoadedProfile:
    pfile = tmp_path / "prompts.json"
    pfile.write_text(json.dumps({"name": "test", "prompts": prompts}))
    text = default_profile_text().split("\n[probe]")[0] + f"""
[probe]
prompt_set = "{pfile}"
output_tokens = 8
warmup_requests = 1
read_timeout_s = 2
request_timeout_s = 10
watch_interval_s = 0.2
endpoint = "{url}"
model = "m"
{phases}
"""
    return LoadedProfile(profile=parse_profile(text), source=str(tmp_path / "p.toml"),
                         origin="test", sha256=hashlib.sha256(text.encode()).hexdigest())


PHASES = """[[probe.phases]]
name = "single"
requests = 4
concurrency = 1
[[probe.phases]]
name = "conc"
requests = 8
concurrency = 4
"""


def _pre(url: str) -> Preflight:
    from seat_console.probe.engine_counters import KvCapacity

    return Preflight(endpoint=url, model="m", identity={"endpoint": url, "served_model": "m"},
                     kv=KvCapacity(), hold=HoldInfo(True, "test hold"), seat_containers=set())


async def _started(loaded: LoadedProfile, url: str, runs: Path,
                   attempted: int) -> tuple[Probe, asyncio.Future]:
    """A probe run started as a task, returned once its first phase has sent ``attempted``
    requests (or after 5 s: the caller's assertions then say what it did)."""
    probe = Probe(loaded, _pre(url), writer=RunWriter(root=runs))
    task = asyncio.ensure_future(probe.run())
    for _ in range(100):
        await asyncio.sleep(0.05)
        if probe.progress.phases[0].attempted == attempted:
            break
    return probe, task


def _monitor(scrape, transport=None, services=()):
    return InterferenceMonitor(watcher=None, container_names=set(), transport=transport,
                               services=services, silence_state=None, scrape=scrape,
                               interval_s=0.1)


async def test_unwatched_run_counts_and_accounts_but_gives_no_headline(tmp_path: Path) -> None:
    async with SSEServer() as srv:
        loaded = _loaded(tmp_path, srv.url, ["normal", "multi"], PHASES)
        probe = Probe(loaded, _pre(srv.url), writer=RunWriter(root=tmp_path / "runs"))
        s = await probe.run()
    assert s["status"] == "incomplete" and not s["headline_allowed"]
    single, conc = s["phases"]
    assert single["stats"]["expected"] == single["stats"]["attempted"] == 4
    assert single["stats"]["completed"] == 4 and single["stats"]["failed"] == 0
    assert conc["stats"]["completed"] == 8
    assert single["stats"]["output_tokens"] == 4 + 6 + 4 + 6
    assert single["accounting"]["tokens"]["ok"] and single["accounting"]["requests"]["ok"]
    assert single["accounting"]["tokens"]["engine"] == 20
    assert single["state"] == "unverified: interference was not watched"
    assert single["stats"]["headline"] is None
    recs = list(read_requests(probe.writer.path))
    assert [r.phase for r in recs].count("warmup") == 1 and len(recs) == 13


async def test_client_and_engine_ttft_itl_side_by_side_per_phase(tmp_path: Path) -> None:
    """Each phase block holds the engine's own TTFT / ITL bucket deltas over that phase (its
    two scrapes) beside the client's p50 / p95: the populations match request for request."""
    async with SSEServer() as srv:
        loaded = _loaded(tmp_path, srv.url, ["normal"], PHASES)
        probe = Probe(loaded, _pre(srv.url), writer=RunWriter(root=tmp_path / "runs"))
        s = await probe.run()
    for block, n in zip(s["phases"], (4, 8), strict=True):
        t = block["engine_timing"]
        assert t["ttft"]["engine_n"] == n == t["ttft"]["client_n"], t["ttft"]   # no warm-up
        assert t["itl"]["engine_n"] == 3 * n == t["itl"]["client_n"]            # 4 tokens each
        assert t["ttft"]["metric"] == "vllm:time_to_first_token_seconds"
        assert [c["q"] for c in t["ttft"]["checks"]] == [0.5, 0.95]
        c = t["ttft"]["checks"][0]
        assert c["client_s"] == block["stats"]["ttft"]["p50_s"]
        assert t["ttft"]["checks"][1]["client_s"] == block["stats"]["ttft"]["p95_s"]
        assert t["itl"]["checks"][1]["client_s"] == block["stats"]["itl"]["p95_s"]
        lo, hi = c["engine_bucket_s"]
        assert 0 <= lo < hi
        assert t["ttft"]["engine"]["cumulative"][-1] == n
    assert Path(probe.writer.path, "summary.json").exists()


async def test_a_delay_the_engine_never_saw_is_flagged_not_averaged(tmp_path: Path) -> None:
    """0.6 s before the engine sees each request (a slow path in front of it): the client's
    TTFT lies above the engine's own TTFT bucket at p50 and p95, and the run says so — with an
    idle client, as "network"."""
    async with SSEServer() as srv:
        srv.front_delay_s = 0.6
        loaded = _loaded(tmp_path, srv.url, ["normal"], PHASES.split("[[probe.phases]]\nname "
                                                                     '= "conc"')[0])
        probe = Probe(loaded, _pre(srv.url), writer=RunWriter(root=tmp_path / "runs"))
        s = await probe.run()
    (block,) = s["phases"]
    checks = block["engine_timing"]["ttft"]["checks"]
    assert [c["finding"] for c in checks] == ["network", "network"], checks
    assert all(c["client_s"] > 0.6 > c["engine_bucket_s"][1] for c in checks)
    assert any(f.startswith("TTFT p50: client ") and f.endswith(": network")
               for f in block["timing_findings"]), block["timing_findings"]


async def test_an_engine_without_the_histograms_says_so(tmp_path: Path) -> None:
    async with SSEServer() as srv:
        srv.histograms = False
        loaded = _loaded(tmp_path, srv.url, ["normal"], PHASES)
        probe = Probe(loaded, _pre(srv.url), writer=RunWriter(root=tmp_path / "runs"))
        s = await probe.run()
    t = s["phases"][0]["engine_timing"]
    assert t["ttft"]["problem"] == "the engine does not expose vllm:time_to_first_token_seconds"
    assert t["ttft"]["engine"] is None and t["ttft"]["checks"] == []
    assert t["ttft"]["client_n"] == 4 and s["phases"][0]["timing_findings"] == []


async def test_failed_request_makes_phase_incomplete_with_every_record(tmp_path: Path) -> None:
    async with SSEServer() as srv:
        loaded = _loaded(tmp_path, srv.url, ["normal", "http500", "normal", "cut"], PHASES)
        probe = Probe(loaded, _pre(srv.url), writer=RunWriter(root=tmp_path / "runs"),
                      monitor_factory=lambda scrape: _monitor(scrape))
        s = await probe.run()
    single = s["phases"][0]
    assert single["state"] == "incomplete: 2/4 completed, 2 failed"
    assert single["stats"]["failures"] == {"http": 1, "truncated": 1}
    assert single["stats"]["headline"] is None and s["status"] == "incomplete"
    recs = [r for r in read_requests(probe.writer.path) if r.phase == "single"]
    assert len(recs) == 4 and sum(not r.ok for r in recs) == 2


async def test_foreign_traffic_is_reported_with_both_figures(tmp_path: Path) -> None:
    async with SSEServer() as srv:
        loaded = _loaded(tmp_path, srv.url, ["normal"], PHASES)

        def foreign(p) -> None:
            if p.phases[0].completed == 2 and srv.extra_tokens == 0:
                srv.extra_tokens = 7           # someone else's request generated 7 tokens

        probe = Probe(loaded, _pre(srv.url), writer=RunWriter(root=tmp_path / "runs"),
                      phases=["single"], on_progress=foreign,
                      monitor_factory=lambda scrape: _monitor(scrape))
        s = await probe.run()
    acc = s["phases"][0]["accounting"]
    assert not acc["tokens"]["ok"] and acc["tokens"]["client"] == 16
    assert acc["tokens"]["engine"] == 23
    assert "client 16 vs engine" in acc["tokens"]["note"] and "23" in acc["tokens"]["note"]
    assert s["phases"][0]["stats"]["headline"] is None
    assert len(s["phases"]) == 1


async def test_engine_restart_disrupts_the_run(tmp_path: Path) -> None:
    async with SSEServer() as srv:
        loaded = _loaded(tmp_path, srv.url, ["normal"], PHASES)

        def restart(p) -> None:
            if p.phases[1].completed >= 1:
                srv.process_start += 60        # the engine process started again

        probe = Probe(loaded, _pre(srv.url), writer=RunWriter(root=tmp_path / "runs"),
                      on_progress=restart, monitor_factory=lambda scrape: _monitor(scrape))
        s = await probe.run()
    assert s["status"] == "disrupted" and not s["headline_allowed"]
    kinds = {d["kind"] for d in s["disruptions"]}
    assert "engine-reset" in kinds
    d = next(d for d in s["disruptions"] if d["kind"] == "engine-reset")
    assert "process start time changed" in d["what"] and d["at"]
    assert all((b["stats"] or {}).get("headline") is None for b in s["phases"])


async def test_a_disruption_stops_the_run_before_its_next_phase(tmp_path: Path) -> None:
    """The tester's case: the seat was restarted during a phase; the next phase must not load
    the restarted engine (its figures could back nothing) and says why it did not run."""
    async with SSEServer() as srv:
        loaded = _loaded(tmp_path, srv.url, ["normal"], PHASES)

        def restart(p) -> None:
            if p.phases[0].completed >= 1:
                srv.process_start += 60

        async def slow_scrape_wait() -> None:  # let the 0.1 s watch see it before phase 2
            await asyncio.sleep(0.5)

        probe = Probe(loaded, _pre(srv.url), writer=RunWriter(root=tmp_path / "runs"),
                      on_progress=restart, monitor_factory=lambda scrape: _monitor(scrape))
        orig = probe._phase

        async def phase(client, ph, pp):
            await orig(client, ph, pp)
            await slow_scrape_wait()

        probe._phase = phase
        s = await probe.run()
    assert s["status"] == "disrupted"
    blocks = {b["name"]: b for b in s["phases"]}
    assert blocks["single"]["stats"]["completed"] == 4
    assert blocks["conc"]["state"] == "not run" and blocks["conc"]["stats"] is None
    assert "not started: the run was disrupted" in blocks["conc"]["reason"]
    assert "engine-reset" in blocks["conc"]["reason"]
    assert not probe.records["conc"]


async def test_watch_step_exiting_127_makes_the_phase_incomplete(tmp_path: Path) -> None:
    """A runner step that exits 127 in ~0 s is a failure: the services were not watched, so no
    phase is verified."""
    bindir = tmp_path / "bin"
    bindir.mkdir()
    fake = bindir / "systemctl"
    fake.write_text("#!/bin/sh\nexit 127\n")
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    transport = LocalTransport(Runner(path=str(bindir)))
    r = read_services(transport, ["fleet-remediation-cycle.service"])
    assert isinstance(r, str) and "exit 127" in r
    async with SSEServer() as srv:
        loaded = _loaded(tmp_path, srv.url, ["normal"], PHASES)
        probe = Probe(loaded, _pre(srv.url), writer=RunWriter(root=tmp_path / "runs"),
                      monitor_factory=lambda scrape: _monitor(
                          scrape, transport, ["fleet-remediation-cycle.service"]))
        s = await probe.run()
    assert s["status"] == "incomplete"
    assert any(p["check"] == "services" and "127" in p["reason"] for p in s["check_problems"])
    for b in s["phases"]:
        assert b["stats"]["completed"] == b["stats"]["expected"]
        assert b["state"].startswith("unverified: watch check services failed")
        assert b["stats"]["headline"] is None


async def test_stop_keeps_the_run_as_interrupted(tmp_path: Path) -> None:
    async with SSEServer() as srv:
        loaded = _loaded(tmp_path, srv.url, ["stall"], """[[probe.phases]]
name = "slow"
requests = 6
concurrency = 2
""")
        loaded = loaded.__class__(profile=loaded.profile.model_copy(update={
            "probe": loaded.profile.probe.model_copy(update={"warmup_requests": 0,
                                                             "read_timeout_s": 30.0})}),
            source=loaded.source, origin="test", sha256=loaded.sha256)
        probe, task = await _started(loaded, srv.url, tmp_path / "runs", attempted=2)
        probe.stop()
        s = await asyncio.wait_for(task, 10)
    assert s["status"] == "interrupted"
    st_ = s["phases"][0]["stats"]
    assert st_["attempted"] == 2 and st_["not_sent"] == 4 and st_["failures"] == {"interrupted": 2}
    assert s["phases"][0]["state"] == "incomplete: 0/6 completed, 2 failed, 4 not sent"
    saved = read_summary(probe.writer.path)
    assert saved["status"] == "interrupted"
    rows = list_runs(tmp_path / "runs")
    assert rows[-1]["status"] == "interrupted"


async def test_cancel_like_ctrl_c_keeps_the_run(tmp_path: Path) -> None:
    async with SSEServer() as srv:
        loaded = _loaded(tmp_path, srv.url, ["stall"], """[[probe.phases]]
name = "slow"
requests = 3
concurrency = 3
""")
        probe, task = await _started(loaded, srv.url, tmp_path / "runs", attempted=3)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
    s = read_summary(probe.writer.path)
    assert s["status"] == "interrupted" and s["ended_at"]
    recs = [r for r in read_requests(probe.writer.path) if r.phase == "slow"]
    assert len(recs) == 3 and {r.failure_kind for r in recs} == {"interrupted"}


# -- pure parts -------------------------------------------------------------------------------
@settings(max_examples=200, deadline=None)
@given(st.lists(st.floats(min_value=0, max_value=1e4), min_size=1, max_size=60),
       st.sampled_from([0, 1, 25, 50, 95, 99, 100]))
def test_percentile_is_numpy_linear(xs: list[float], p: int) -> None:
    assert percentile(xs, p) == pytest.approx(float(np.percentile(xs, p)), rel=1e-9, abs=1e-9)


def _rec(i: int, ok: bool = True, toks: int = 4) -> RequestRecord:
    return RequestRecord(phase="p", index=i, api="completions", prompt_id=0, sent_at=utcnow(),
                         start_s=i * 0.1, ok=ok, failure_kind=None if ok else "timeout",
                         ttft_s=0.05, e2e_s=0.2, tpot_s=0.05, itl_s=(0.05,) * (toks - 1),
                         stream_end_s=0.21, output_tokens=toks if ok else None,
                         prompt_tokens=10)


def test_incomplete_phase_says_so_and_has_no_headline() -> None:
    recs = [_rec(i) for i in range(61)] + [_rec(61 + i, ok=False) for i in range(3)]
    s = phase_stats("c64", recs, expected=64, concurrency=64)
    assert s.state == "incomplete: 61/64 completed, 3 failed" and s.headline is None
    assert s.ttft.n == 61 and s.output_tokens == 61 * 4


def test_complete_phase_headline_and_disrupted_phase_none() -> None:
    recs = [_rec(i) for i in range(10)]
    s = phase_stats("p", recs, expected=10, concurrency=1)
    assert s.headline is not None and s.state == "complete"
    assert s.duration_s == pytest.approx(0.9 + 0.21)
    assert s.output_tok_s == pytest.approx(40 / (0.9 + 0.21))
    assert s.itl.n == 30
    d = phase_stats("p", recs, expected=10, concurrency=1, disrupted="container restarted")
    assert d.headline is None and d.state == "disrupted: container restarted"
    with pytest.raises(ValueError):
        phase_stats("p", recs, expected=9, concurrency=1)


def test_counters_reset_and_compare() -> None:
    a = EngineCounters(generation_tokens=100, requests_succeeded=10, process_start_s=1.0)
    b = EngineCounters(generation_tokens=5, requests_succeeded=1, process_start_s=1.0)
    assert "went down" in (counters_reset(a, b) or "")
    acc = compare(a, b, client_tokens=0, client_requests=0)
    assert acc.reset and not acc.ok
    missing = compare(EngineCounters(), EngineCounters(), client_tokens=3, client_requests=1)
    assert not missing.ok and missing.tokens.engine is None and "not exposed" in missing.tokens.note


def test_parse_counters_breaks_down_request_success() -> None:
    text = ('vllm:request_success_total{finished_reason="length"} 5\n'
            'vllm:request_success_total{finished_reason="stop"} 2\n'
            'vllm:request_success_total{finished_reason="abort"} 3\n'
            "vllm:generation_tokens_total 70\nprocess_start_time_seconds 12.5\n")
    c = parse_counters(text)
    assert c.requests_succeeded == 7 and c.requests_by_reason["abort"] == 3
    assert c.generation_tokens == 70 and c.process_start_s == 12.5
    empty = parse_counters("")
    assert empty.generation_tokens is None and empty.requests_succeeded is None


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=300))
def test_parse_counters_only_raises_value_error(text: str) -> None:
    try:
        c = parse_counters(text)
    except ValueError:
        return
    assert c.generation_tokens is None or isinstance(c.generation_tokens, float)


def test_kv_capacity_prefers_metric_and_names_sources() -> None:
    from seat_console.sources.startup_log import parse_startup_log

    log = ("CPU KV cache size: 1,048,576 tokens, Maximum concurrency for 512 tokens per "
           "request: 2048.00x\n")
    k = kv_capacity({"kv_cache_size_tokens": "1048576", "num_gpu_blocks": "8192",
                     "block_size": "128"}, parse_startup_log(log), 512)
    assert k.tokens == 1_048_576 and k.max_concurrency == 2048.0
    assert k.source == ("vllm:cache_config_info", "startup log")
    only_log = kv_capacity(None, parse_startup_log(log), None)
    assert only_log.tokens == 1_048_576 and "vllm:cache_config_info not exposed" in only_log.notes
    none = kv_capacity(None, None)
    assert none.tokens is None and none.max_concurrency is None


def test_service_and_container_changes() -> None:
    base = {"a.service": {"InvocationID": "x1", "ActiveState": "inactive", "SubState": "dead"}}
    same = service_changes(base, base)
    assert same == []
    ran = service_changes(base, {"a.service": {"InvocationID": "y2", "ActiveState": "inactive",
                                               "SubState": "dead"}})
    assert ran and "was started" in ran[0]
    running = service_changes(base, {"a.service": {"InvocationID": "x1",
                                                   "ActiveState": "activating",
                                                   "SubState": "start"}})
    assert running and "is running" in running[0]
    ev = ContainerEvent(at=utcnow(), time_nano=1, type="container", action="restart",
                        actor_id="abc", actor_name="seat-resident")
    mine = ev.model_copy(update={"by_console": True})
    other = ev.model_copy(update={"actor_name": "someone-else"})
    exec_ = ev.model_copy(update={"action": "exec_start: sh"})
    assert len(container_disruptions([ev, mine, other, exec_], {"seat-resident"})) == 1


def test_list_runs_keeps_unreadable_and_running(tmp_path: Path) -> None:
    root = tmp_path / "runs"
    w = RunWriter(root=root)
    w.write_summary({"status": "running", "phases": []})
    w.close()
    bad = root / "20000101T000000Z-000000"
    bad.mkdir()
    (bad / "summary.json").write_text("{trunc")
    rows = list_runs(root)
    assert {r["status"] for r in rows} == {"running (or killed)", "unreadable"}
    assert "not JSON" in next(r for r in rows if r["status"] == "unreadable")["problem"]


def test_data_dir_env_override(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from seat_console.probe.store import runs_dir

    monkeypatch.setenv("SEAT_CONSOLE_DATA_DIR", str(tmp_path))
    assert runs_dir() == tmp_path / "runs"
    monkeypatch.delenv("SEAT_CONSOLE_DATA_DIR")
    assert str(runs_dir()).endswith(os.path.join("seat-console", "runs"))


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=300))
def test_parse_prompt_set_only_raises_prompt_set_error(raw: bytes) -> None:
    from seat_console.probe.prompts import PromptSetError, parse_prompt_set

    try:
        ps = parse_prompt_set(raw, "f.json")
    except PromptSetError as exc:
        assert "f.json" in str(exc)
        return
    assert ps.prompts and all(isinstance(p, str) and p for p in ps.prompts)


def test_shipped_prompt_set_is_deterministic() -> None:
    from seat_console.probe.prompts import load_prompt_set

    a, b = load_prompt_set(), load_prompt_set()
    assert a == b and len(a.prompts) == 128 and a.pick(130) == (2, a.prompts[2])
    assert a.sha256 == hashlib.sha256(
        (Path(__file__).parents[1] / "console" / "probe" / "prompts.json").read_bytes()
    ).hexdigest()


async def test_request_rate_phase_follows_the_seeded_poisson_schedule(tmp_path: Path) -> None:
    import random

    async with SSEServer() as srv:
        loaded = _loaded(tmp_path, srv.url, ["normal"], """[[probe.phases]]
name = "open"
requests = 10
concurrency = 4
request_rate = 40.0
""")
        probe = Probe(loaded, _pre(srv.url), writer=RunWriter(root=tmp_path / "runs"))
        s = await probe.run()
    rng = random.Random(f"{loaded.profile.probe.seed}:open")
    due, t = [], 0.0
    for _ in range(10):
        t += rng.expovariate(40.0)
        due.append(t)
    recs = sorted(probe.records["open"], key=lambda r: r.index)
    assert [r.index for r in recs] == list(range(10)) and all(r.ok for r in recs)
    for r, d in zip(recs, due, strict=True):
        assert r.start_s >= d - 0.005, (r.index, r.start_s, d)   # never sent before it is due
    assert s["phases"][0]["stats"]["request_rate"] == 40.0


def test_runs_command_lists_shows_and_refuses_a_path(tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    from seat_console.cli import main

    monkeypatch.setenv("SEAT_CONSOLE_DATA_DIR", str(tmp_path))
    w = RunWriter()
    w.write_summary({"schema": "seat-console.probe-run/1", "run_id": w.run_id,
                     "status": "interrupted", "phases": [], "disruptions": []})
    w.close()
    assert main(["runs", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)["runs"]
    assert [r["run_id"] for r in rows] == [w.run_id] and rows[0]["status"] == "interrupted"
    assert main(["runs", w.run_id]) == 0
    assert "INTERRUPTED" in capsys.readouterr().out
    assert main(["runs", "../../etc"]) == 2
    assert main(["runs", "20000101T000000Z-abcdef"]) == 1


def test_prompt_set_is_read_bounded_naming_the_file() -> None:
    """A prompt set is outside input: deep nesting and NaN are refused by untrusted.load_json
    with the file named (json.loads took both)."""
    import pytest as _pytest

    from seat_console.probe.prompts import PromptSetError, parse_prompt_set

    deep = b'{"prompts": ["a"], "x": ' + b"[" * 70 + b"]" * 70 + b"}"
    with _pytest.raises(PromptSetError, match=r"my-set\.json: .*nest"):
        parse_prompt_set(deep, "my-set.json")
    with _pytest.raises(PromptSetError, match=r"my-set\.json: .*NaN"):
        parse_prompt_set(b'{"prompts": ["a"], "weight": NaN}', "my-set.json")
    assert parse_prompt_set(b'{"prompts": ["a", "b"]}', "ok.json").prompts == ("a", "b")
