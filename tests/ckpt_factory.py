"""Test helper: write checkpoint directories with real-size safetensors headers.

Large checkpoints are *sparse* files: the 8-byte length, the JSON header with every tensor's
real dtype/shape/offsets, then ``truncate`` to the full size, so a 16 GB shard takes a few kB
of disk. The element sizes below are the safetensors format's own (spec table, written out
independently of ``seat_console.sources.checkpoint`` so a bug there cannot hide here).
"""

from __future__ import annotations

import json
import math
import struct
from collections.abc import Iterable
from pathlib import Path

BITS = {"BOOL": 8, "U8": 8, "I8": 8, "F8_E4M3": 8, "F8_E5M2": 8, "F8_E8M0": 8, "F4": 4,
        "I16": 16, "F16": 16, "BF16": 16, "I32": 32, "F32": 32, "I64": 64, "F64": 64}

Tensor = tuple[str, str, list[int]]  # (name, dtype, shape)


def nbytes(dtype: str, shape: Iterable[int]) -> int:
    """Bytes of a tensor per the safetensors spec (elements × bits / 8)."""
    return math.prod(shape) * BITS[dtype] // 8


def header_bytes(tensors: list[Tensor], metadata: dict[str, str] | None = None,
                 sizes: dict[str, int] | None = None) -> tuple[bytes, int]:
    """The padded JSON header (as the library writes it: 8-byte aligned with spaces) and the
    data length. ``sizes`` overrides a tensor's byte count (e.g. an unknown dtype)."""
    hdr: dict[str, object] = {}
    if metadata is not None:
        hdr["__metadata__"] = metadata
    off = 0
    for name, dtype, shape in tensors:
        n = (sizes or {}).get(name, None)
        n = nbytes(dtype, shape) if n is None else n
        hdr[name] = {"dtype": dtype, "shape": shape, "data_offsets": [off, off + n]}
        off += n
    h = json.dumps(hdr, separators=(",", ":")).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    return h, off


def write_sparse(path: Path, tensors: list[Tensor], metadata: dict[str, str] | None = None,
                 sizes: dict[str, int] | None = None, truncate_to: int | None = None) -> int:
    """Write a sparse safetensors file; returns the data bytes. ``truncate_to`` cuts the file
    short (a truncated copy)."""
    h, data = header_bytes(tensors, metadata if metadata is not None else {"format": "pt"},
                           sizes)
    with path.open("wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        f.truncate(8 + len(h) + data if truncate_to is None else truncate_to)
    return data


def write_checkpoint(root: Path, shards: list[list[Tensor]], config: dict | None = None,
                     hf_quant_config: dict | None = None, index: bool | None = None,
                     total_size: int | None = None) -> dict[str, int]:
    """Write a checkpoint directory: ``config.json``, optional ``hf_quant_config.json``, one
    sparse shard per list (``model-0000i-of-0000n.safetensors``, or ``model.safetensors`` for
    one) and, for several shards (or ``index=True``), ``model.safetensors.index.json`` whose
    ``total_size`` is the summed data bytes unless given. Returns tensor name → bytes."""
    root.mkdir(parents=True, exist_ok=True)
    if config is not None:
        (root / "config.json").write_text(json.dumps(config))
    if hf_quant_config is not None:
        (root / "hf_quant_config.json").write_text(json.dumps(hf_quant_config))
    n = len(shards)
    use_index = n > 1 if index is None else index
    weight_map: dict[str, str] = {}
    sizes: dict[str, int] = {}
    total = 0
    for i, tensors in enumerate(shards, 1):
        fname = f"model-{i:05d}-of-{n:05d}.safetensors" if use_index else "model.safetensors"
        total += write_sparse(root / fname, tensors)
        for name, dtype, shape in tensors:
            weight_map[name] = fname
            sizes[name] = nbytes(dtype, shape)
    if use_index:
        (root / "model.safetensors.index.json").write_text(json.dumps(
            {"metadata": {"total_size": total if total_size is None else total_size},
             "weight_map": weight_map}))
    return sizes


def split_even(tensors: list[Tensor], n: int) -> list[list[Tensor]]:
    """Split a tensor list into ``n`` consecutive shards."""
    k = -(-len(tensors) // n)
    return [tensors[i:i + k] for i in range(0, len(tensors), k)]


# ---------------------------------------------------------------- model-shaped tensor lists

def llama3_8b_config() -> dict:
    """Meta-Llama-3-8B config.json (the fields that matter here, as published)."""
    return {"architectures": ["LlamaForCausalLM"], "hidden_size": 4096,
            "intermediate_size": 14336, "num_attention_heads": 32, "num_hidden_layers": 32,
            "num_key_value_heads": 8, "vocab_size": 128256, "torch_dtype": "bfloat16",
            "tie_word_embeddings": False, "max_position_embeddings": 8192}


def llama_tensors(cfg: dict, dtype: str = "BF16", linear: str | None = None) -> list[Tensor]:
    """Llama-architecture tensors. ``linear`` = ``"nvfp4"`` / ``"fp8"`` writes the linear layers
    ModelOpt-style (NVFP4: U8 [out, in/2] + F8_E4M3 scales [out, in/16] + F32 scalars
    weight_scale_2/input_scale; FP8: F8_E4M3 [out, in] + F32 weight_scale/input_scale)."""
    h, i, v = cfg["hidden_size"], cfg["intermediate_size"], cfg["vocab_size"]
    nh, kv = cfg["num_attention_heads"], cfg["num_key_value_heads"]
    hd = cfg.get("head_dim") or h // nh
    out: list[Tensor] = [("model.embed_tokens.weight", dtype, [v, h])]

    def lin(name: str, o: int, n: int) -> list[Tensor]:
        if linear == "nvfp4":
            return [(f"{name}.weight", "U8", [o, n // 2]),
                    (f"{name}.weight_scale", "F8_E4M3", [o, n // 16]),
                    (f"{name}.weight_scale_2", "F32", []), (f"{name}.input_scale", "F32", [])]
        if linear == "fp8":
            return [(f"{name}.weight", "F8_E4M3", [o, n]), (f"{name}.weight_scale", "F32", []),
                    (f"{name}.input_scale", "F32", [])]
        return [(f"{name}.weight", dtype, [o, n])]

    for L in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{L}"
        out += lin(f"{p}.self_attn.q_proj", nh * hd, h)
        out += lin(f"{p}.self_attn.k_proj", kv * hd, h)
        out += lin(f"{p}.self_attn.v_proj", kv * hd, h)
        out += lin(f"{p}.self_attn.o_proj", h, nh * hd)
        out += lin(f"{p}.mlp.gate_proj", i, h)
        out += lin(f"{p}.mlp.up_proj", i, h)
        out += lin(f"{p}.mlp.down_proj", h, i)
        out += [(f"{p}.input_layernorm.weight", dtype, [h]),
                (f"{p}.post_attention_layernorm.weight", dtype, [h])]
    out += [("model.norm.weight", dtype, [h]), ("lm_head.weight", dtype, [v, h])]
    return out


def qwen3_30b_a3b_config() -> dict:
    """Qwen/Qwen3-30B-A3B config.json (published values that shape the tensors and KV)."""
    return {"architectures": ["Qwen3MoeForCausalLM"], "hidden_size": 2048,
            "intermediate_size": 6144, "moe_intermediate_size": 768, "num_experts": 128,
            "num_experts_per_tok": 8, "num_attention_heads": 32, "num_key_value_heads": 4,
            "head_dim": 128, "num_hidden_layers": 48, "vocab_size": 151936,
            "tie_word_embeddings": False, "torch_dtype": "bfloat16", "sliding_window": None,
            "use_sliding_window": False}


def qwen3_moe_tensors(cfg: dict) -> list[Tensor]:
    """Qwen3-MoE tensors: attention with q/k norms, a router ``mlp.gate`` and per-expert MLPs."""
    h, nh, kv, hd = (cfg["hidden_size"], cfg["num_attention_heads"],
                     cfg["num_key_value_heads"], cfg["head_dim"])
    e, mi, v = cfg["num_experts"], cfg["moe_intermediate_size"], cfg["vocab_size"]
    out: list[Tensor] = [("model.embed_tokens.weight", "BF16", [v, h])]
    for L in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{L}"
        out += [(f"{p}.self_attn.q_proj.weight", "BF16", [nh * hd, h]),
                (f"{p}.self_attn.k_proj.weight", "BF16", [kv * hd, h]),
                (f"{p}.self_attn.v_proj.weight", "BF16", [kv * hd, h]),
                (f"{p}.self_attn.o_proj.weight", "BF16", [h, nh * hd]),
                (f"{p}.self_attn.q_norm.weight", "BF16", [hd]),
                (f"{p}.self_attn.k_norm.weight", "BF16", [hd]),
                (f"{p}.input_layernorm.weight", "BF16", [h]),
                (f"{p}.post_attention_layernorm.weight", "BF16", [h]),
                (f"{p}.mlp.gate.weight", "BF16", [e, h])]
        for x in range(e):
            out += [(f"{p}.mlp.experts.{x}.gate_proj.weight", "BF16", [mi, h]),
                    (f"{p}.mlp.experts.{x}.up_proj.weight", "BF16", [mi, h]),
                    (f"{p}.mlp.experts.{x}.down_proj.weight", "BF16", [h, mi])]
    out += [("model.norm.weight", "BF16", [h]), ("lm_head.weight", "BF16", [v, h])]
    return out


def deepseek_v3_config() -> dict:
    """deepseek-ai/DeepSeek-V3 config.json (published values; FP8 block-quantized)."""
    return {"architectures": ["DeepseekV3ForCausalLM"], "hidden_size": 7168,
            "intermediate_size": 18432, "moe_intermediate_size": 2048, "n_routed_experts": 256,
            "n_shared_experts": 1, "first_k_dense_replace": 3, "num_hidden_layers": 61,
            "num_attention_heads": 128, "num_key_value_heads": 128, "q_lora_rank": 1536,
            "kv_lora_rank": 512, "qk_nope_head_dim": 128, "qk_rope_head_dim": 64,
            "v_head_dim": 128, "vocab_size": 129280, "torch_dtype": "bfloat16",
            "num_nextn_predict_layers": 1, "tie_word_embeddings": False,
            "quantization_config": {"activation_scheme": "dynamic", "fmt": "e4m3",
                                    "quant_method": "fp8", "weight_block_size": [128, 128]}}


def deepseek_v3_tensors(cfg: dict) -> list[Tensor]:
    """DeepSeek-V3 tensors as published: FP8 (F8_E4M3) linear weights, each with an F32
    ``weight_scale_inv`` of [ceil(out/128), ceil(in/128)]; BF16 norms, router, embeddings.
    The MTP layer (model.layers.61) is left out."""
    h, v = cfg["hidden_size"], cfg["vocab_size"]
    nh, qr, kvr = cfg["num_attention_heads"], cfg["q_lora_rank"], cfg["kv_lora_rank"]
    nope, rope, vd = cfg["qk_nope_head_dim"], cfg["qk_rope_head_dim"], cfg["v_head_dim"]
    e, mi, di = cfg["n_routed_experts"], cfg["moe_intermediate_size"], cfg["intermediate_size"]

    def fp8(name: str, o: int, n: int) -> list[Tensor]:
        return [(f"{name}.weight", "F8_E4M3", [o, n]),
                (f"{name}.weight_scale_inv", "F32", [-(-o // 128), -(-n // 128)])]

    out: list[Tensor] = [("model.embed_tokens.weight", "BF16", [v, h])]
    for L in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{L}"
        out += fp8(f"{p}.self_attn.q_a_proj", qr, h)
        out += [(f"{p}.self_attn.q_a_layernorm.weight", "BF16", [qr])]
        out += fp8(f"{p}.self_attn.q_b_proj", nh * (nope + rope), qr)
        out += fp8(f"{p}.self_attn.kv_a_proj_with_mqa", kvr + rope, h)
        out += [(f"{p}.self_attn.kv_a_layernorm.weight", "BF16", [kvr])]
        out += fp8(f"{p}.self_attn.kv_b_proj", nh * (nope + vd), kvr)
        out += fp8(f"{p}.self_attn.o_proj", h, nh * vd)
        out += [(f"{p}.input_layernorm.weight", "BF16", [h]),
                (f"{p}.post_attention_layernorm.weight", "BF16", [h])]
        if L < cfg["first_k_dense_replace"]:
            out += fp8(f"{p}.mlp.gate_proj", di, h) + fp8(f"{p}.mlp.up_proj", di, h)
            out += fp8(f"{p}.mlp.down_proj", h, di)
            continue
        out += [(f"{p}.mlp.gate.weight", "BF16", [e, h]),
                (f"{p}.mlp.gate.e_score_correction_bias", "F32", [e])]
        for x in range(e):
            q = f"{p}.mlp.experts.{x}"
            out += fp8(f"{q}.gate_proj", mi, h) + fp8(f"{q}.up_proj", mi, h)
            out += fp8(f"{q}.down_proj", h, mi)
        q = f"{p}.mlp.shared_experts"
        out += fp8(f"{q}.gate_proj", mi, h) + fp8(f"{q}.up_proj", mi, h)
        out += fp8(f"{q}.down_proj", h, mi)
    out += [("model.norm.weight", "BF16", [h]), ("lm_head.weight", "BF16", [v, h])]
    return out


def gemma3n_e4b_config() -> dict:
    """google/gemma-3n-E4B config.json, text tower (published values), nested as published."""
    text = {"hidden_size": 2048, "hidden_size_per_layer_input": 256,
            "intermediate_size": [16384] * 35, "num_hidden_layers": 35,
            "num_attention_heads": 8, "num_key_value_heads": 2, "head_dim": 256,
            "vocab_size": 262400, "vocab_size_per_layer_input": 262144, "sliding_window": 512,
            "layer_types": (["sliding_attention"] * 4 + ["full_attention"]) * 7,
            "num_kv_shared_layers": 15, "torch_dtype": "bfloat16", "model_type": "gemma3n_text"}
    return {"architectures": ["Gemma3nForConditionalGeneration"], "model_type": "gemma3n",
            "text_config": text, "torch_dtype": "bfloat16"}


def gemma3n_tensors(cfg: dict) -> list[Tensor]:
    """Gemma-3n-shaped text tensors: the token embedding, the per-layer embedding (PLE) table
    ``embed_tokens_per_layer`` [vocab_per_layer, layers × per_layer_dim], its projection and
    per-layer gates, attention and MLP (AltUp / LAuReL tensors left out)."""
    t = cfg["text_config"]
    h, ple, n = t["hidden_size"], t["hidden_size_per_layer_input"], t["num_hidden_layers"]
    nh, kv, hd = t["num_attention_heads"], t["num_key_value_heads"], t["head_dim"]
    base = "model.language_model"
    out: list[Tensor] = [
        (f"{base}.embed_tokens.weight", "BF16", [t["vocab_size"], h]),
        (f"{base}.embed_tokens_per_layer.weight", "BF16", [t["vocab_size_per_layer_input"],
                                                           n * ple]),
        (f"{base}.per_layer_model_projection.weight", "BF16", [n * ple, h]),
        (f"{base}.per_layer_projection_norm.weight", "BF16", [ple])]
    for L in range(n):
        p = f"{base}.layers.{L}"
        i = t["intermediate_size"][L]
        out += [(f"{p}.self_attn.q_proj.weight", "BF16", [nh * hd, h]),
                (f"{p}.self_attn.k_proj.weight", "BF16", [kv * hd, h]),
                (f"{p}.self_attn.v_proj.weight", "BF16", [kv * hd, h]),
                (f"{p}.self_attn.o_proj.weight", "BF16", [h, nh * hd]),
                (f"{p}.mlp.gate_proj.weight", "BF16", [i, h]),
                (f"{p}.mlp.up_proj.weight", "BF16", [i, h]),
                (f"{p}.mlp.down_proj.weight", "BF16", [h, i]),
                (f"{p}.per_layer_input_gate.weight", "BF16", [ple, h]),
                (f"{p}.per_layer_projection.weight", "BF16", [h, ple]),
                (f"{p}.input_layernorm.weight", "BF16", [h])]
    out += [(f"{base}.norm.weight", "BF16", [h])]
    return out


def gemma3_27b_config() -> dict:
    """google/gemma-3-27b-it text config (published values: 62 layers, 5 local : 1 global,
    window 1024)."""
    return {"architectures": ["Gemma3ForCausalLM"], "hidden_size": 5376,
            "intermediate_size": 21504, "num_hidden_layers": 62, "num_attention_heads": 32,
            "num_key_value_heads": 16, "head_dim": 128, "sliding_window": 1024,
            "sliding_window_pattern": 6, "vocab_size": 262208, "torch_dtype": "bfloat16"}


def qwen3_next_config() -> dict:
    """Qwen/Qwen3-Next-80B-A3B-Instruct config.json (published values)."""
    return {"architectures": ["Qwen3NextForCausalLM"], "hidden_size": 2048,
            "num_hidden_layers": 48, "full_attention_interval": 4, "num_attention_heads": 16,
            "num_key_value_heads": 2, "head_dim": 256, "linear_num_key_heads": 16,
            "linear_num_value_heads": 32, "linear_key_head_dim": 128,
            "linear_value_head_dim": 128, "linear_conv_kernel_dim": 4, "num_experts": 512,
            "moe_intermediate_size": 512, "shared_expert_intermediate_size": 512,
            "vocab_size": 151936, "torch_dtype": "bfloat16"}


def qwen3_next_tensors(cfg: dict) -> list[Tensor]:
    """Qwen3-Next-shaped tensors: gated attention every 4th layer, Gated DeltaNet
    (``linear_attn``) elsewhere, 512 routed experts + a shared expert per layer."""
    h, v = cfg["hidden_size"], cfg["vocab_size"]
    nh, kv, hd = cfg["num_attention_heads"], cfg["num_key_value_heads"], cfg["head_dim"]
    kh, vh = cfg["linear_num_key_heads"], cfg["linear_num_value_heads"]
    kd, vd = cfg["linear_key_head_dim"], cfg["linear_value_head_dim"]
    e, mi = cfg["num_experts"], cfg["moe_intermediate_size"]
    out: list[Tensor] = [("model.embed_tokens.weight", "BF16", [v, h])]
    for L in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{L}"
        if (L + 1) % cfg["full_attention_interval"] == 0:
            out += [(f"{p}.self_attn.q_proj.weight", "BF16", [nh * hd * 2, h]),
                    (f"{p}.self_attn.k_proj.weight", "BF16", [kv * hd, h]),
                    (f"{p}.self_attn.v_proj.weight", "BF16", [kv * hd, h]),
                    (f"{p}.self_attn.o_proj.weight", "BF16", [h, nh * hd])]
        else:
            conv = kh * kd * 2 + vh * vd
            out += [(f"{p}.linear_attn.in_proj_qkvz.weight", "BF16", [conv + vh * vd, h]),
                    (f"{p}.linear_attn.in_proj_ba.weight", "BF16", [vh * 2, h]),
                    (f"{p}.linear_attn.conv1d.weight", "BF16",
                     [conv, 1, cfg["linear_conv_kernel_dim"]]),
                    (f"{p}.linear_attn.A_log", "F32", [vh]),
                    (f"{p}.linear_attn.dt_bias", "BF16", [vh]),
                    (f"{p}.linear_attn.norm.weight", "F32", [vd]),
                    (f"{p}.linear_attn.out_proj.weight", "BF16", [h, vh * vd])]
        out += [(f"{p}.input_layernorm.weight", "BF16", [h]),
                (f"{p}.post_attention_layernorm.weight", "BF16", [h]),
                (f"{p}.mlp.gate.weight", "BF16", [e, h]),
                (f"{p}.mlp.shared_expert_gate.weight", "BF16", [1, h])]
        for x in range(e):
            q = f"{p}.mlp.experts.{x}"
            out += [(f"{q}.gate_proj.weight", "BF16", [mi, h]),
                    (f"{q}.up_proj.weight", "BF16", [mi, h]),
                    (f"{q}.down_proj.weight", "BF16", [h, mi])]
        q = f"{p}.mlp.shared_expert"
        out += [(f"{q}.gate_proj.weight", "BF16", [mi, h]), (f"{q}.up_proj.weight", "BF16", [mi, h]),
                (f"{q}.down_proj.weight", "BF16", [h, mi])]
    out += [("model.norm.weight", "BF16", [h]), ("lm_head.weight", "BF16", [v, h])]
    return out
