"""``seat-console fit``: the default profile prints the paper's figures; files, what-ifs, JSON,
live NVML (through the in-process double) and errors."""

from __future__ import annotations

import json
import math
import os
import re
import struct
from pathlib import Path

import ckpt_factory as F
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from nvml_double import FakeCard, FakeProcess, NvmlDouble

import seat_console.node.nvml as nvml_mod
from seat_console.cli import main

GiB = 1 << 30


@pytest.fixture(autouse=True)
def _isolated(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SEAT_CONSOLE_PROFILE", raising=False)
    monkeypatch.setenv("XDG_CONFIG_HOME", "/nonexistent-for-tests")


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    rc = main(list(argv))
    out, err = capsys.readouterr()
    return rc, out, err


def test_default_profile_prints_the_papers_figures(capsys) -> None:
    rc, out, _ = run(capsys, "fit", "--no-live")
    assert rc == 0
    assert "GiB = 2^30 B" in out and "truncated" in out
    # 95.0 GiB CUDA-visible × 0.90 = 85.50 usable; 62.56 + 47.68 = 110.24; 24.74 over.
    assert "95.00 GiB (102,005,473,280 B)" in out
    assert "usable × 0.9" in out and "85.50 GiB (91,804,925,952 B)" in out
    assert "62.56 GiB (67,173,288,509 B)" in out
    assert "47.68 GiB (51,201,966,080 B)" in out
    assert "110.24 GiB (118,375,254,589 B)" in out
    assert "-24.74 GiB (-26,570,328,637 B)" in out
    assert "exceed usable memory by 24.74 GiB per card" in out
    # The headline relates the two figures (24.74 over + 7.19 of KV cache = 31.94 must leave).
    assert "  GPU 0: OVER: 24.74 GiB before any KV cache; 31.94 GiB must leave to serve one " \
           "262,144-token request\n" in out
    assert "does not fit: 31.94 GiB per card must leave the GPU" in out
    # The KV budget once the table moves to the host (the first lever).
    assert "PLE to host: frees 47.68 GiB per card; fits on the GPUs: KV 22.94 GiB per card = " \
           "835,629 tokens" in out
    # The resident's declared (illustrative) size: it fits, so the KV ratio appears — 0.00×
    # while the candidate is OVER (issue 17: it could never appear).
    assert "RESIDENT: resident-fp8 (declared sizes)" in out
    assert "fits: 10.20 GiB per card for the KV cache = 371,545 tokens" in out
    assert "KV capacity, candidate / resident: 0.00x in tokens" in out


def test_placement_host_and_what_ifs(capsys) -> None:
    rc, out, _ = run(capsys, "fit", "--no-live", "--placement", "host")
    assert rc == 0
    assert "22.94 GiB (24,631,637,443 B)" in out
    assert "GPU KV cache size: 835,629 tokens, Maximum concurrency for 262,144 tokens per " \
           "request: 3.19x" in out
    # the paper's 2.25× (NVFP4 vs FP8), with the default profile's declared resident size
    assert "KV capacity, candidate / resident: 2.25x in tokens, 2.25x in KV bytes per card" in out
    # A reserve of 2 GiB and utilisation 0.92: usable ceil(95 GiB × 0.92) = 93,845,035,418 B.
    rc, out, _ = run(capsys, "fit", "--no-live", "--placement", "host", "--reserve", "2 GiB",
                     "--utilization", "0.92", "--max-model-len", "131072")
    assert rc == 0 and "93,845,035,418 B" in out and "2.00 GiB (2,147,483,648 B)" in out
    kv = 93_845_035_418 - 67_173_288_509 - 2 * GiB
    assert f"({kv:,} B)" in out and "131,072 tokens per request" in out


def test_json_output(capsys) -> None:
    rc, out, _ = run(capsys, "fit", "--no-live", "--json")
    assert rc == 0
    doc = json.loads(out)
    assert doc["gib_bytes"] == GiB and doc["profile"] == "<embedded default>"
    cand = doc["candidate"]
    assert cand["cards"][0]["requested_bytes"] == 91_804_925_952
    assert cand["cards"][0]["kv_bytes"] == -26_570_328_637
    assert cand["verdict"]["fits"] is False
    assert cand["verdict"]["over_bytes"] == 26_570_328_637
    assert {lv["lever"] for lv in cand["verdict"]["levers"]} >= {"PLE to host", "lower context"}
    assert doc["resident"]["verdict"]["fits"] is True
    assert doc["resident"]["kv_tokens"] == 371_545
    assert doc["kv_tokens_ratio"] == 0.0  # the candidate is OVER: no KV cache


def test_scanned_resident_and_candidate_side_by_side(capsys, tmp_path: Path) -> None:
    cfg = F.llama3_8b_config()
    F.write_checkpoint(tmp_path / "bf16", F.split_even(F.llama_tensors(cfg), 4), config=cfg)
    hfq = {"producer": {"name": "modelopt"},
           "quantization": {"quant_algo": "NVFP4", "group_size": 16}}
    F.write_checkpoint(tmp_path / "nvfp4", [F.llama_tensors(cfg, linear="nvfp4")], config=cfg,
                       hf_quant_config=hfq)
    rc, out, _ = run(capsys, "fit", "--no-live", "--checkpoint", str(tmp_path / "bf16"),
                     "--candidate", str(tmp_path / "nvfp4"), "--max-model-len", "8192",
                     "--placement", "gpu-replicated", "--json")
    assert rc == 0
    doc = json.loads(out)
    r, c = doc["resident"], doc["candidate"]
    assert r["footprint_source"] == c["footprint_source"] == "scanned"
    # Resident BF16 at TP 2: (16,060,522,496 − 532,480) / 2 + 532,480 (norms on both ranks).
    assert r["cards"][0]["weights_bytes"] == 8_030_527_488
    assert r["scan"]["total_bytes"] == 16_060_522_496
    assert c["scan"]["quantization"]["quant_algo"] == "NVFP4"
    # Both at TP 2 see 65,536 B per token: capacity ratio = ratio of their KV blocks.
    rb = r["capacity"]["num_blocks"]
    cb = c["capacity"]["num_blocks"]
    assert r["capacity"]["bytes_per_block"] == 32 * 16 * 4 * 256 * 2
    assert doc["kv_tokens_ratio"] == pytest.approx(cb / rb, rel=1e-12)
    rc, text, _ = run(capsys, "fit", "--no-live", "--checkpoint", str(tmp_path / "bf16"),
                      "--candidate", str(tmp_path / "nvfp4"), "--max-model-len", "8192")
    assert "KV capacity, candidate / resident:" in text and "quantization: modelopt NVFP4" in text


def test_corrupt_header_is_a_clear_error(capsys, tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text("{}")
    h = b'{"w": {"dtype": "BF16", "shape": [4], "data_offsets": [0, 9]}}'
    with (tmp_path / "model.safetensors").open("wb") as f:
        f.write(struct.pack("<Q", len(h)) + h)
        f.truncate(8 + len(h) + 9)
    rc, _, err = run(capsys, "fit", "--no-live", "--checkpoint", str(tmp_path))
    assert rc == 1
    # The entry of tensor "w" starts at header byte 1 → file byte 8 + 1.
    assert str(tmp_path / "model.safetensors") in err and "byte offset 9" in err
    assert "needs 8 bytes but data_offsets [0, 9] span 9" in err


def test_missing_directory_and_usage_errors(capsys, tmp_path: Path) -> None:
    rc, _, err = run(capsys, "fit", "--no-live", "--checkpoint", str(tmp_path / "nope"))
    assert rc == 1 and "not a directory" in err
    with pytest.raises(SystemExit) as exc:
        main(["fit", "--utilization", "1.5"])
    assert exc.value.code == 2
    assert run(capsys, "fit", "--tp", "0")[0] == 2


def test_nothing_to_budget_is_unavailable(capsys, tmp_path: Path) -> None:
    prof = tmp_path / "p.toml"
    prof.write_text('[resident]\nname = "r"\n[[silence.matchers]]\nname = "i"\nvalue = "v"\n')
    rc, _, err = run(capsys, "--profile", str(prof), "fit", "--no-live")
    assert rc == 3 and "nothing to budget" in err


def test_live_cards_from_nvml_preflight_and_overlay(capsys, monkeypatch, tmp_path) -> None:
    # Two H200s through the NVML double: card 0 held by this very process (a real PID, so the
    # pre-flight names it), card 1 idle. CUDA-visible = 150,754,820,096 − 644,939,776.
    me = os.getpid()
    cards = [FakeCard(uuid="GPU-aaaa", pci_bus_id="00000000:18:00.0", used=120 * GiB,
                      processes=[FakeProcess(me, 120 * GiB)]),
             FakeCard(uuid="GPU-bbbb", pci_bus_id="00000000:2A:00.0")]
    monkeypatch.setattr(nvml_mod, "module_factory", lambda: NvmlDouble(cards))
    cfg = F.llama3_8b_config()
    F.write_checkpoint(tmp_path / "ck", [F.llama_tensors(cfg)], config=cfg)
    rc, out, _ = run(capsys, "fit", "--checkpoint", str(tmp_path / "ck"), "--json")
    assert rc == 0
    doc = json.loads(out)
    r = doc["resident"]
    assert doc["gpu_unavailable"] is None
    assert [c["total_source"] for c in r["cards"]] == ["nvml", "nvml"]
    assert r["cards"][0]["total_bytes"] == 150_109_880_320
    # ceil(total × 0.90) with vLLM's float arithmetic (request_memory).
    assert r["cards"][0]["requested_bytes"] == math.ceil(150_109_880_320 * 0.90) \
        == 135_098_892_288
    pf0, pf1 = r["preflight"]
    free0 = 150_109_880_320 - 120 * GiB
    assert pf0["ok"] is False and pf0["free_bytes"] == free0
    assert f"pid {me}" in pf0["words"] and "120.00 GiB" in pf0["words"]
    assert pf1["ok"] is True
    # Live overlay of the running seat: NVML used by the card's processes vs predicted.
    o0 = doc["overlay"][0]
    assert o0["nvml_used_bytes"] == 120 * GiB and o0["nvml_basis"] == "processes on the card"
    assert o0["difference_bytes"] == 120 * GiB - o0["predicted_bytes"]


def test_a_checkpoint_with_scan_errors_is_reported_and_exits_1(capsys, tmp_path: Path) -> None:
    """An index listing a shard that is not there: the report still prints (with the ERROR
    line), but the budget understates the checkpoint, so the exit code says so (1), not 0."""
    cfg = F.llama3_8b_config()
    shards = F.split_even(F.llama_tensors(cfg), 2)
    F.write_checkpoint(tmp_path / "ck", shards, config=cfg)
    (tmp_path / "ck" / "model-00002-of-00002.safetensors").unlink()
    rc, out, err = run(capsys, "fit", "--no-live", "--checkpoint", str(tmp_path / "ck"))
    assert "ERROR missing-shard: model-00002-of-00002.safetensors" in out
    assert rc == 1
    assert "resident" in err and "missing-shard" in err and "cannot be trusted" in err
    rc, out, err = run(capsys, "fit", "--no-live", "--json", "--checkpoint",
                       str(tmp_path / "ck"))
    assert rc == 1 and json.loads(out)["resident"]["scan"]["problems"][0]["kind"] == \
        "missing-shard"


def test_text_columns_stay_apart_with_full_gpu_uuids(capsys, monkeypatch) -> None:
    # Real UUIDs are 40 characters: "GPU 0 (GPU-7b262491-…)" is wider than a column and ran into
    # the next card's header on the 2 × H200 run ("…f834)GPU 1 (…").
    cards = [FakeCard(uuid="GPU-7b262491-9088-d3e9-325b-62aa6b35f834"),
             FakeCard(uuid="GPU-41c6d1a1-da2d-2609-9417-6353e4f5030c")]
    monkeypatch.setattr(nvml_mod, "module_factory", lambda: NvmlDouble(cards))
    rc, out, _ = run(capsys, "fit")
    assert rc == 0
    header = next(line for line in out.splitlines() if "GPU 1" in line and "GPU 0" in line)
    assert ")GPU" not in header and "…GPU" not in header
    assert "  GPU 1 (GPU-41c6d1a1" in header


@pytest.mark.parametrize("argv", [["--max-model-len", "99999999999999999999999"],
                                  ["--max-num-seqs", "9999999999"],
                                  ["--reserve", "2 PiB"]])
def test_absurdly_large_what_ifs_are_usage_errors(capsys, argv) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["fit", "--no-live", *argv])
    assert exc.value.code == 2
    assert argv[0] in capsys.readouterr().err


@given(tp=st.integers(), seqs=st.integers(min_value=-2, max_value=2**40),
       ctx=st.integers(min_value=-2, max_value=2**40))
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                  HealthCheck.function_scoped_fixture])
def test_any_integer_what_if_is_a_budget_or_a_named_usage_error(capsys, tp, seqs, ctx) -> None:
    """``--tp 1000000`` ended in pydantic's traceback (the trial, exit 1). Any integer given
    to --tp, --max-num-seqs or --max-model-len is checked first: exit 2 naming the flag, or the
    what-if is used. Only the check runs here (no budget is read)."""
    from argparse import Namespace

    from seat_console.commands.fit_cmd import whatif_usage_error

    args = Namespace(placement=None, utilization=None, tp=tp, max_model_len=ctx,
                     max_num_seqs=seqs, kv_cache_dtype=None, reserve=None)
    why = whatif_usage_error(args)
    bad = [f for f, v, hi in (("--tp", tp, 64), ("--max-num-seqs", seqs, None),
                              ("--max-model-len", ctx, None)) if v < 1 or (hi and v > hi)]
    if bad:
        assert why is not None and why.startswith(tuple(bad)), (why, bad)
    if why is None:
        assert 1 <= tp <= 64 and seqs >= 1 and ctx >= 1


def test_a_tp_beyond_the_what_ifs_range_is_a_usage_error(capsys) -> None:
    assert main(["fit", "--tp", "1000000"]) == 2
    err = capsys.readouterr().err
    assert "--tp 1000000" in err and "64" in err and "Traceback" not in err, err


def test_an_overriding_checkpoint_is_named_after_its_directory(capsys, tmp_path: Path) -> None:
    """--checkpoint / --candidate replace the profile's path: the scanned files are not the
    profile's "resident-fp8" / "candidate-nvfp4", so the side is named after the directory and
    the report says the profile's name was overridden."""
    cfg = F.llama3_8b_config()
    F.write_checkpoint(tmp_path / "lab-tiny-llama", [F.llama_tensors(cfg)], config=cfg)
    F.write_checkpoint(tmp_path / "other-llama", [F.llama_tensors(cfg)], config=cfg)
    rc, out, _ = run(capsys, "fit", "--no-live", "--checkpoint", str(tmp_path / "lab-tiny-llama"),
                     "--candidate", str(tmp_path / "other-llama"), "--max-model-len", "8192")
    assert rc == 0
    assert f"RESIDENT: lab-tiny-llama (scanned files: {tmp_path / 'lab-tiny-llama'})" in out
    assert f"CANDIDATE: other-llama (scanned files: {tmp_path / 'other-llama'})" in out
    assert "RESIDENT: resident-fp8" not in out and "CANDIDATE: candidate-nvfp4" not in out
    assert "--checkpoint overrides resident.path: the profile's name 'resident-fp8'" in out
    assert "--candidate overrides candidate.path: the profile's name 'candidate-nvfp4'" in out
    rc, out, _ = run(capsys, "fit", "--no-live", "--json", "--checkpoint",
                     str(tmp_path / "lab-tiny-llama"))
    doc = json.loads(out)
    assert doc["resident"]["name"] == "lab-tiny-llama"
    assert "'resident-fp8'" in doc["resident"]["name_note"]
    assert doc["resident"]["path"] == str(tmp_path / "lab-tiny-llama")


def test_a_candidate_without_a_profile_entry_has_no_override_note(capsys, tmp_path) -> None:
    cfg = F.llama3_8b_config()
    F.write_checkpoint(tmp_path / "ck", [F.llama_tensors(cfg)], config=cfg)
    prof = tmp_path / "p.toml"
    prof.write_text('[resident]\nname = "r"\n[[silence.matchers]]\nname = "i"\nvalue = "v"\n'
                    '[node]\ndeclared_cuda_visible_bytes = 102005473280\n')
    rc, out, _ = run(capsys, "--profile", str(prof), "fit", "--no-live", "--candidate",
                     str(tmp_path / "ck") + "/")
    assert f"CANDIDATE: ck (scanned files: {tmp_path / 'ck'})" in out
    assert "overrides" not in out


@pytest.mark.parametrize("tp", ["3", "6"])
def test_a_tp_size_that_does_not_divide_the_heads_does_not_fit(capsys, tp) -> None:
    """The trial's ``fit --tp 3``: the KV line said vLLM refuses to start (32 heads do not
    divide by 3) and the verdict below it said "fits … (KV tokens n/a: model shape unknown)",
    with a --kv-cache-memory-bytes flag to pin it. The shape is known, and refused: does not
    fit, naming why, and no flag."""
    assert main(["fit", "--no-live", "--tp", tp, "--json"]) == 0   # the report was produced
    doc = json.loads(capsys.readouterr().out)
    for role in ("resident", "candidate"):
        side = doc[role]
        v = side["verdict"]
        assert v["fits"] is False and v["refused"], v
        assert f"not divisible by tensor_parallel_size {tp}" in v["words"], v["words"]
        assert "model shape unknown" not in v["words"] and side["kv_flag_bytes"] is None


def test_a_cpu_seats_kv_row_says_it_is_its_own_space(capsys, tmp_path) -> None:
    """The trial, on the CPU lab: "usable × 0.9  0.90 GiB" above "left for the KV cache
    1.00 GiB" — more left than usable. On vLLM's CPU backend the KV cache is its own space
    (VLLM_CPU_KVCACHE_SPACE), not usable − the rest: the row says so; a GPU seat's does not."""
    from seat_console.core.profile_path import default_profile_text

    text = default_profile_text().replace('device = "cuda"', 'device = "cpu"\n'
                                          'cpu_kvcache_space_bytes = "1 GiB"', 1)
    assert 'device = "cpu"' in text
    (tmp_path / "cpu.toml").write_text(text)
    main(["--profile", str(tmp_path / "cpu.toml"), "fit", "--no-live"])
    out = capsys.readouterr().out
    assert "KV cache (CPU: own space)" in out and "left for the KV cache" not in out, out
    # gpu_memory_utilization sizes nothing there: no "usable × 0.9" row, no utilisation lever
    assert not re.search(r"(?m)^  usable ×", out) and "higher utilisation" not in out, out
    main(["fit", "--no-live"])
    gpu = capsys.readouterr().out
    assert "left for the KV cache" in gpu and re.search(r"(?m)^  usable × 0\.9", gpu)
    assert "higher utilisation" in gpu
