"""Item 10: the console's KV arithmetic against a real vLLM (0.32.0, CPU build, in the lab).

1. The running engine: the lab serves a tiny Llama with ``VLLM_CPU_KVCACHE_SPACE=1`` (a 1 GiB KV
   budget). The console's KV tokens, maximum concurrency and block count for that budget must
   equal, exactly, what vLLM logged at start-up ("CPU KV cache size: N tokens, Maximum
   concurrency for 512 tokens per request: X.XXx") and what it exports in
   ``vllm:cache_config_info`` on /metrics.
2. vLLM's own code on the hard cases: the engine in the lab can only run a tiny dense model on the
   CPU, so the sliding-window, MLA, shared-KV and hybrid linear-attention layouts are checked by
   running vLLM's real ``get_kv_cache_configs`` / ``get_kv_cache_capacity``
   (vllm/v1/core/kv_cache_utils.py), ``Platform._align_hybrid_block_size``
   (vllm/platforms/interface.py) and ``Qwen3NextForCausalLM.get_mamba_state_shape_from_config``
   in the lab's vLLM interpreter, with per-layer specs built from the same config.json through
   transformers' config classes — and comparing with :func:`seat_console.fit.kvcache.kv_capacity`.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import ckpt_factory as F
import httpx
import pytest
from conftest import Lab
from prometheus_client.parser import text_string_to_metric_families

from seat_console.sources.checkpoint import scan_checkpoint
from seat_console.fit.kvcache import (
    EngineKVParams,
    config_from_shape,
    kv_capacity,
    max_model_len_for,
    model_kv,
)
from seat_console.core.profile import default_profile_text, parse_profile

pytestmark = pytest.mark.lab

GiB = 1 << 30
LOG_RE = re.compile(r"(\w+) KV cache size: ([\d,]+) tokens, Maximum concurrency for ([\d,]+) "
                    r"tokens per request: ([\d.]+)x")


def _cache_config_info(url: str) -> dict[str, str]:
    text = httpx.get(f"{url}/metrics", timeout=10).text
    for fam in text_string_to_metric_families(text):
        if fam.name == "vllm:cache_config_info":
            (sample,) = [s for s in fam.samples if s.labels.get("engine") == "0"] or fam.samples
            return dict(sample.labels)
    raise AssertionError("vllm:cache_config_info missing from /metrics")


def _engine_arg(lab: Lab, flag: str) -> str:
    args = lab.state["vllm"]["engine_args"]
    return args[args.index(flag) + 1]


def test_kv_tokens_and_concurrency_match_the_running_engine(lab: Lab) -> None:
    info = _cache_config_info(lab.vllm_url)
    kv_budget = int(lab.state["vllm"]["env"]["VLLM_CPU_KVCACHE_SPACE"]) * GiB
    # The engine's KV byte budget is the one the lab set: VLLM_CPU_KVCACHE_SPACE=1 → 1 GiB.
    assert int(info["kv_cache_memory_bytes"]) == kv_budget == GiB

    # The real checkpoint the engine serves (written by transformers), scanned by the console.
    summary = scan_checkpoint(lab.model_dir)
    assert summary.problems == [] and summary.config is not None
    config = dict(summary.config)
    config["torch_dtype"] = _engine_arg(lab, "--dtype")   # "auto" KV = the served dtype
    model = model_kv(config, tensor_parallel_size=1, kv_cache_dtype=info["cache_dtype"],
                     source=str(lab.model_dir / "config.json"))
    params = EngineKVParams(max_model_len=lab.max_model_len, block_size=int(info["block_size"]),
                            hybrid_kv_cache_manager=False)   # vLLM's CPU backend disables it
    cap = kv_capacity(model, kv_budget, params)

    logs = lab.vllm_logs()
    found = LOG_RE.findall(logs)
    assert found, f"no 'KV cache size' line in the engine log:\n{logs[-2000:]}"
    device, tokens, max_len, conc = found[-1]
    assert device == "CPU" and int(max_len.replace(",", "")) == lab.max_model_len
    # Exact agreement with the log line …
    assert cap.kv_tokens == int(tokens.replace(",", ""))
    assert f"{cap.max_concurrency:.2f}" == conc
    assert cap.log_line("CPU") in logs
    # … and with /metrics (cache_config_info carries the unrounded concurrency and the blocks).
    assert cap.kv_tokens == int(info["kv_cache_size_tokens"])
    assert cap.max_concurrency == float(info["kv_cache_max_concurrency"])
    assert cap.num_blocks == int(info["num_gpu_blocks"])
    assert cap.block_size == int(info["block_size"])
    # The whole `seat-console fit` path on the lab profile (seat.device cpu): its budget —
    # KV space read from the running seat container's VLLM_CPU_KVCACHE_SPACE — gives the
    # engine's own tokens, concurrency and log line, device word included ("CPU", not "GPU":
    # before the CPU rule it printed "GPU KV cache size: 942,976 tokens … 1841.75x").
    fit = subprocess.run([sys.executable, "-m", "seat_console", "--profile",
                          str(lab.profile_path), "fit", "--json"],
                         capture_output=True, text=True, timeout=120)
    assert fit.returncode == 0, fit.stderr
    resident = json.loads(fit.stdout)["resident"]
    # The engine version (issue 34): read from the running engine's /version, budgeted by the
    # 0.32-0.33 rule, and the flag that pins the same KV cache is the 1 GiB space.
    assert resident["engine"]["version"] == "0.32.0"
    assert "/version" in resident["engine"]["source"]
    assert resident["engine_rule"] == "0.32-0.33"
    assert resident["kv_flag_bytes"] == 1 << 30
    assert resident["kv_tokens"] == int(tokens.replace(",", ""))
    assert f"{resident['max_concurrency']:.2f}" == conc
    assert resident["capacity"]["num_blocks"] == int(info["num_gpu_blocks"])
    text = subprocess.run([sys.executable, "-m", "seat_console", "--profile",
                           str(lab.profile_path), "fit"],
                          capture_output=True, text=True, timeout=120).stdout
    line = next(x for x in text.splitlines() if "as vLLM logs it:" in x)
    assert line.split("as vLLM logs it: ", 1)[1] in logs

    # And the per-token figure behind it, by hand from the tiny model's config.json.
    heads = config.get("num_key_value_heads") or config["num_attention_heads"]
    head = config.get("head_dim") or config["hidden_size"] // config["num_attention_heads"]
    assert model.bytes_per_token == (config["num_hidden_layers"] * heads * 2 * head
                                     * {"float32": 4, "bfloat16": 2, "float16": 2}[
                                         config["torch_dtype"]])


PROBE = r'''
import json, sys
import torch
from types import SimpleNamespace as NS
import transformers
from vllm.v1.kv_cache_interface import (FullAttentionSpec, SlidingWindowSpec, MLAAttentionSpec,
                                        MambaSpec)
from vllm.v1.core import kv_cache_utils as U
from vllm.config.cache import _layout_from_name
from vllm.platforms.interface import Platform
from vllm.v1.attention.backend import MultipleOf

DT = {"bfloat16": torch.bfloat16, "float16": torch.float16, "float32": torch.float32}


class FlashAttnLike:  # FlashAttention's kernel block sizes (MultipleOf(16)); spec unchanged
    @staticmethod
    def get_supported_kernel_block_sizes():
        return [MultipleOf(16)]

    @staticmethod
    def customize_spec(spec):
        return spec

    @staticmethod
    def get_name():
        return "FLASH_ATTN_LIKE"


Platform._find_non_ssm_backends = classmethod(lambda cls, vc: [FlashAttnLike])


def run(case):
    cfg, tp = case["config"], case["tp"]
    text = cfg.get("text_config", cfg)
    arch = cfg["architectures"][0]
    model_dtype = DT[text.get("torch_dtype", "bfloat16")]
    kv_dtype = model_dtype if case["kv_cache_dtype"] == "auto" else torch.float8_e4m3fn
    hf = text
    if arch.startswith("Gemma3n"):
        hf = transformers.Gemma3nTextConfig(**text)
    elif arch.startswith("Gemma3"):
        hf = transformers.Gemma3TextConfig(**text)
    elif arch.startswith("Qwen3Next"):
        hf = transformers.Qwen3NextConfig(**text)
    g = (lambda k, d=None: getattr(hf, k, d)) if not isinstance(hf, dict) else hf.get
    n = g("num_hidden_layers")
    kinds = list(g("layer_types", None) or ["full_attention"] * n)
    shared_from = n - (g("num_kv_shared_layers", 0) or 0)
    bs = case["block_size"]
    cache = NS(num_gpu_blocks_override=None, enable_prefix_caching=True,
               prefix_cache_retention_interval=0,
               get_resolved_kv_cache_layout=lambda: _layout_from_name("LBHNC"),
               mamba_cache_mode=case["mamba_cache_mode"], kv_cache_size_tokens=None,
               kv_cache_max_concurrency=None, cache_dtype=case["kv_cache_dtype"], block_size=bs,
               mamba_cache_dtype="auto", mamba_ssm_cache_dtype="auto",
               mamba_page_size_padded=None, kv_cache_dtype_skip_layers=[], mamba_block_size=None)
    mc = NS(max_model_len=case["max_model_len"], original_max_model_len=case["max_model_len"],
            use_mla=bool(g("kv_lora_rank")), dtype=model_dtype, architecture=arch,
            hf_text_config=hf, hf_config=hf, model_impl="auto", convert_type="none",
            runner_type="generate")
    vc = NS(cache_config=cache, model_config=mc,
            parallel_config=NS(decode_context_parallel_size=1, tensor_parallel_size=tp),
            scheduler_config=NS(disable_hybrid_kv_cache_manager=not case["hma"]),
            attention_config=NS(hisparse_config=None), kv_transfer_config=None,
            speculative_config=None, num_prefill_lookahead_tokens=0,
            max_in_flight_tokens=case["max_in_flight_tokens"], num_speculative_tokens=0,
            device_config=NS(device_type="cuda"))
    total_kv = g("num_key_value_heads") or g("num_attention_heads")
    kv_heads = max(1, total_kv // tp)                       # ModelConfig.get_num_kv_heads
    head = g("head_dim") or g("hidden_size") // g("num_attention_heads")
    mc.get_num_kv_heads = lambda pc: kv_heads
    mc.get_head_size = lambda: head
    mamba = None
    if "linear_attention" in kinds:
        Platform._align_hybrid_block_size(vc, FlashAttnLike)   # vLLM sizes the blocks
        from vllm.model_executor.models.qwen3_next import Qwen3NextForCausalLM
        cache.mamba_block_size = cache.block_size
        mamba = MambaSpec(shapes=tuple(Qwen3NextForCausalLM.get_mamba_state_shape_from_config(vc)),
                          dtypes=Qwen3NextForCausalLM.get_mamba_state_dtype_from_config(vc),
                          block_size=cache.block_size,
                          page_size_padded=cache.mamba_page_size_padded,
                          mamba_cache_mode=case["mamba_cache_mode"])
    bs = cache.block_size
    specs = {}
    for i, k in enumerate(kinds):
        if i >= shared_from:
            continue                                        # reuses another layer's KV
        if g("kv_lora_rank"):
            specs[f"l{i}"] = MLAAttentionSpec(
                block_size=bs, num_kv_heads=1, max_tp_shards=1,
                head_size=g("kv_lora_rank") + g("qk_rope_head_dim"), dtype=kv_dtype,
                cache_dtype_str=case["kv_cache_dtype"])
        elif k == "sliding_attention":
            specs[f"l{i}"] = SlidingWindowSpec(block_size=bs, num_kv_heads=kv_heads,
                                               head_size=head, dtype=kv_dtype,
                                               sliding_window=g("sliding_window"))
        elif k == "linear_attention":
            specs[f"l{i}"] = mamba
        else:
            specs[f"l{i}"] = FullAttentionSpec(block_size=bs, num_kv_heads=kv_heads,
                                               head_size=head, dtype=kv_dtype)
    try:
        confs = U.get_kv_cache_configs(vc, [specs], [case["kv_bytes"]])
    except ValueError as exc:
        return {"refused": str(exc)[:300]}
    sc = U.generate_scheduler_kv_cache_config(confs)
    tokens, conc = U.get_kv_cache_capacity(vc, sc)
    return {"num_blocks": sc.num_blocks, "kv_tokens": tokens, "max_concurrency": conc,
            "block_size": min(gr.kv_cache_spec.block_size for gr in sc.kv_cache_groups),
            "group_layers": sorted(len(gr.layer_names) for gr in sc.kv_cache_groups)}


print(json.dumps({c["name"]: run(c) for c in json.load(sys.stdin)}))
'''


def _cases() -> list[dict]:
    prof = parse_profile(default_profile_text(), "<embedded default>")
    declared = config_from_shape(prof.candidate.model_shape) | {
        "architectures": ["Gemma3ForCausalLM"]}   # sliding_window_pattern "as Gemma 3"
    base = {"kv_cache_dtype": "auto", "block_size": 16, "hma": True,
            "max_in_flight_tokens": 2 * 8192, "mamba_cache_mode": "align"}
    return [
        base | {"name": "llama3-8b tp2", "config": F.llama3_8b_config(), "tp": 2,
                "kv_bytes": 10 * GiB, "max_model_len": 8192},
        base | {"name": "llama3-8b tp16 fp8", "config": F.llama3_8b_config(), "tp": 16,
                "kv_cache_dtype": "fp8", "kv_bytes": 3 * GiB + 12345, "max_model_len": 8192},
        base | {"name": "gemma3-27b tp2 hybrid", "config": F.gemma3_27b_config(), "tp": 2,
                "kv_bytes": 20 * GiB, "max_model_len": 131_072},
        base | {"name": "gemma3-27b tp2 cpu", "config": F.gemma3_27b_config(), "tp": 2,
                "hma": False, "kv_bytes": 20 * GiB, "max_model_len": 65_536},
        base | {"name": "gemma3-27b refused", "config": F.gemma3_27b_config(), "tp": 2,
                "hma": False, "kv_bytes": 20 * GiB, "max_model_len": 131_072},
        base | {"name": "deepseek-v3 mla tp8", "config": F.deepseek_v3_config(), "tp": 8,
                "block_size": 64, "kv_bytes": 40 * GiB, "max_model_len": 163_840},
        base | {"name": "gemma3n shared kv", "config": F.gemma3n_e4b_config(), "tp": 1,
                "kv_bytes": 4 * GiB, "max_model_len": 32_768},
        base | {"name": "qwen3-next hybrid tp2", "config": F.qwen3_next_config(), "tp": 2,
                "kv_bytes": 40 * GiB, "max_model_len": 262_144},
        base | {"name": "default candidate, PLE on host", "config": declared, "tp": 2,
                "kv_bytes": 24_631_637_443, "max_model_len": 262_144},
    ]


def test_block_arithmetic_matches_vllms_own_code(lab: Lab, tmp_path: Path) -> None:
    cases = _cases()
    cp = subprocess.run([str(lab.vllm_python), "-c", PROBE], input=json.dumps(cases),
                        capture_output=True, text=True, timeout=300, cwd=tmp_path, check=False,
                        env={"PATH": "/usr/bin:/bin", "HF_HUB_OFFLINE": "1",
                             "VLLM_NO_USAGE_STATS": "1", "HOME": str(tmp_path)})
    assert cp.returncode == 0, cp.stderr[-3000:]
    theirs = json.loads(cp.stdout.strip().splitlines()[-1])
    for case in cases:
        v = theirs[case["name"]]
        model = model_kv(case["config"], tensor_parallel_size=case["tp"],
                         kv_cache_dtype=case["kv_cache_dtype"])
        params = EngineKVParams(max_model_len=case["max_model_len"],
                                block_size=case["block_size"],
                                hybrid_kv_cache_manager=case["hma"],
                                max_num_batched_tokens=case["max_in_flight_tokens"] // 2,
                                max_concurrent_batches=2,
                                mamba_cache_mode=case["mamba_cache_mode"])
        ours = kv_capacity(model, case["kv_bytes"], params)
        if "refused" in v:
            assert not ours.fits_one_request, (case["name"], v)
            assert "To serve at least one request" in v["refused"]
            # vLLM's hint names the longest context that fits; so does the lower-context lever.
            assert (f"estimated maximum model length is "
                    f"{max_model_len_for(model, case['kv_bytes'], params)}.") in v["refused"]
            continue
        assert ours.fits_one_request, case["name"]
        got = {"num_blocks": ours.num_blocks, "kv_tokens": ours.kv_tokens,
               "max_concurrency": ours.max_concurrency, "block_size": ours.block_size,
               "group_layers": sorted(g.layers for g in ours.groups)}
        assert got == v, case["name"]
    # The problem statement's host case, as vLLM computes it: 835,629 tokens.
    assert theirs["default candidate, PLE on host"]["kv_tokens"] == 835_629
    assert theirs["gemma3-27b refused"]["refused"]


def test_candidate_engine_version_read_from_its_image(lab: Lab) -> None:
    """Issue 34: ``fit --image-engine`` reads the candidate's engine from the image the swap
    would run (the backport's output), offline, from its package metadata: the lab's pin,
    vllm-cpu 0.32.0, budgeted by the 0.32-0.33 rule — while the resident's comes from the
    running engine's /version."""
    fit = subprocess.run([sys.executable, "-m", "seat_console", "--profile",
                          str(lab.profile_path), "fit", "--image-engine", "--json"],
                         capture_output=True, text=True, timeout=300)
    assert fit.returncode == 0, fit.stderr
    doc = json.loads(fit.stdout)
    cand, res = doc["candidate"]["engine"], doc["resident"]["engine"]
    assert (cand["package"], cand["version"]) == ("vllm-cpu", "0.32.0")
    assert "(package metadata)" in cand["source"] and "/version" in res["source"]
    assert doc["candidate"]["engine_rule"] == "0.32-0.33"
