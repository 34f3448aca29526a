"""KV cache model: bytes per token per GPU and vLLM's block arithmetic, computed by hand.

Per-layer bytes per token per rank = KV heads on the rank × (head_dim_k + head_dim_v) × dtype
bytes (``AttentionSpec.page_size_bytes`` / block_size, vllm/v1/kv_cache_interface.py); KV heads
per rank = max(1, total // TP) (``ModelConfig.get_num_kv_heads``). Capacity: num_blocks =
kv_bytes // bytes_per_block, concurrency = num_blocks / blocks per request, tokens =
int(concurrency × max_model_len) (vllm/v1/core/kv_cache_utils.py). Configs are the published
ones (``tests/ckpt_factory.py``); some are read back from checkpoint directories on disk.
``tests/test_fit_vllm.py`` runs the same cases through vLLM's own code in the lab.
"""

from __future__ import annotations

from pathlib import Path

import ckpt_factory as F
import pytest

from seat_console.sources.checkpoint import scan_checkpoint
from seat_console.fit.kvcache import (
    EngineKVParams,
    KVModelError,
    config_from_shape,
    kv_capacity,
    max_model_len_for,
    model_kv,
)
from seat_console.core.profile import ModelShapeSpec

GiB = 1 << 30


def test_llama3_8b_gqa_per_token_and_tp() -> None:
    cfg = F.llama3_8b_config()
    # 8 KV heads × (128 + 128) × 2 B = 4,096 B per layer; × 32 layers = 131,072 B ("128 KiB
    # per token", the figure usually quoted for Llama-3-8B in BF16).
    m1 = model_kv(cfg, tensor_parallel_size=1)
    assert (m1.attention, m1.kv_heads_per_rank, m1.head_dim) == ("gqa", 8, 128)
    assert m1.bytes_per_token == 32 * 8 * 256 * 2 == 131_072
    assert model_kv(cfg, tensor_parallel_size=2).bytes_per_token == 65_536   # 4 heads/rank
    assert model_kv(cfg, tensor_parallel_size=8).bytes_per_token == 16_384   # 1 head/rank
    # TP 16 > 8 KV heads: each head replicated on 2 ranks, still 1 head per rank.
    m16 = model_kv(cfg, tensor_parallel_size=16)
    assert (m16.kv_heads_per_rank, m16.kv_head_replicas, m16.bytes_per_token) == (1, 2, 16_384)
    assert any("replicated on 2 ranks" in n for n in m16.notes)
    # fp8 KV: 1 byte per element halves it.
    assert model_kv(cfg, tensor_parallel_size=1, kv_cache_dtype="fp8").bytes_per_token == 65_536
    # vLLM checks the attention heads first: 32 heads do not divide by TP 3.
    with pytest.raises(KVModelError, match="num_attention_heads 32 is not divisible by "
                                           "tensor_parallel_size 3"):
        model_kv(cfg, tensor_parallel_size=3)
    # 48 heads do, but 8 KV heads neither divide nor are divided by 3.
    with pytest.raises(KVModelError, match="cannot be split over tensor_parallel_size 3"):
        model_kv({**cfg, "num_attention_heads": 48, "head_dim": 128}, tensor_parallel_size=3)


def test_llama3_8b_capacity_block_granularity() -> None:
    m = model_kv(F.llama3_8b_config(), tensor_parallel_size=1)
    c = kv_capacity(m, 10 * GiB, EngineKVParams(max_model_len=8192, block_size=16))
    # One group of 32 layers: a block = 32 × 16 tokens × 4,096 B = 2,097,152 B (2 MiB).
    assert c.bytes_per_block == 2_097_152 and len(c.groups) == 1
    assert c.num_blocks == 10 * GiB // 2_097_152 == 5120
    assert c.blocks_per_request == 8192 // 16 == 512
    assert c.max_concurrency == 10.0 and c.kv_tokens == 81_920
    assert c.fits_one_request and c.min_kv_bytes == 2_097_152 * 513  # + the null block
    # A budget that does not hold whole blocks rounds down (block granularity).
    c2 = kv_capacity(m, 10 * GiB - 1, EngineKVParams(max_model_len=8192, block_size=16))
    assert c2.num_blocks == 5119 and c2.kv_tokens == int(5119 / 512 * 8192) == 81_904


def test_log_line_format_matches_vllm() -> None:
    # RECIPES.md, vLLM on the CPU with the tiny Llama (2 layers, 2 KV heads, head_dim 32,
    # float32): 2 × 2 × 64 × 4 = 1,024 B per token; 1 GiB → 1,048,576 tokens, 2048 × 512.
    tiny = {"num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
            "head_dim": 32, "torch_dtype": "float32"}
    c = kv_capacity(model_kv(tiny), GiB, EngineKVParams(max_model_len=512, block_size=128,
                                                        hybrid_kv_cache_manager=False))
    assert c.log_line("CPU") == ("CPU KV cache size: 1,048,576 tokens, Maximum concurrency for "
                                 "512 tokens per request: 2048.00x")


def test_qwen3_moe_from_files_kv_heads_replicated_at_tp8(tmp_path: Path) -> None:
    cfg = F.qwen3_30b_a3b_config()
    F.write_checkpoint(tmp_path, [F.qwen3_moe_tensors(cfg | {"num_hidden_layers": 1,
                                                             "num_experts": 2})], config=cfg)
    config = scan_checkpoint(tmp_path).config  # read back from config.json on disk
    # 4 KV heads × 256 × 2 B = 2,048 B per layer; 48 layers.
    assert model_kv(config, tensor_parallel_size=1).bytes_per_token == 48 * 2048 == 98_304
    assert model_kv(config, tensor_parallel_size=4).bytes_per_token == 48 * 512
    m8 = model_kv(config, tensor_parallel_size=8)   # 4 heads < TP 8: replicated twice
    assert (m8.kv_heads_per_rank, m8.kv_head_replicas, m8.bytes_per_token) == (1, 2, 24_576)


def test_deepseek_v3_mla() -> None:
    cfg = F.deepseek_v3_config()
    m = model_kv(cfg, tensor_parallel_size=8)
    # MLA: one latent of kv_lora_rank 512 + qk_rope_head_dim 64 = 576 values, no V, on every
    # rank (not split by TP): 576 × 2 B × 61 layers = 70,272 B per token per GPU.
    assert (m.attention, m.head_dim, m.head_dim_v, m.kv_heads_per_rank) == ("mla", 576, 0, 1)
    assert m.bytes_per_token == 576 * 2 * 61 == 70_272
    assert model_kv(cfg, tensor_parallel_size=1).bytes_per_token == 70_272
    fp8 = model_kv(cfg, tensor_parallel_size=8, kv_cache_dtype="fp8")
    assert fp8.bytes_per_token == 576 * 61 and fp8.fp8_kv_supported is None
    assert any("MLA fp8 KV needs" in n for n in fp8.notes)
    # FlashMLA's block of 64 tokens: a block = 61 × 64 × 1,152 B = 4,497,408 B; 40 GiB holds
    # 9,549 blocks (4,497,408 × 9,549 = 42,945,748,992 ≤ 42,949,672,960); a 163,840-token
    # request (max_position_embeddings) takes 2,560 blocks.
    c = kv_capacity(m, 40 * GiB, EngineKVParams(max_model_len=163_840, block_size=64))
    assert (c.bytes_per_block, c.num_blocks, c.blocks_per_request) == (4_497_408, 9549, 2560)
    assert c.kv_tokens == 9549 * 64 == 611_136
    assert round(c.max_concurrency, 2) == 3.73


def test_gemma3_sliding_window_hybrid_groups() -> None:
    cfg = F.gemma3_27b_config()
    m = model_kv(cfg, tensor_parallel_size=2)
    # sliding_window_pattern 6: layers 5, 11, …, 59 are global → 10 full, 52 sliding; 16 KV
    # heads / TP 2 = 8 per rank × 256 × 2 B = 4,096 B per layer per token.
    assert (m.count("full"), m.count("sliding")) == (10, 52)
    assert m.full_bytes_per_token == 10 * 4096 and m.sliding_bytes_per_token == 52 * 4096
    p = EngineKVParams(max_model_len=131_072, block_size=16)  # H200 defaults: 8192 × 2 in flight
    c = kv_capacity(m, 20 * GiB, p)
    # Groups of 10 layers (the smaller bucket; 52 ≥ 1.5 × 10): 1 full + cdiv(52, 10) = 6
    # sliding groups (8 padding slots). A block = 10 × 16 × 4,096 = 655,360 B → 32,768 blocks.
    assert [g.kind for g in c.groups].count("sliding") == 6 and len(c.groups) == 7
    assert sorted(g.layers for g in c.groups) == [8, 8, 9, 9, 9, 9, 10]
    assert c.bytes_per_block == 655_360 and c.num_blocks == 32_768
    # Per request: full 131,072 / 16 = 8,192 blocks; each sliding group cdiv(min(1024 − 1 +
    # 16,384, 131,072), 16) + 1 = 1,089 → 8,192 + 6 × 1,089 = 14,726.
    assert c.blocks_per_request == 8192 + 6 * 1089 == 14_726
    assert c.kv_tokens == int(32_768 / 14_726 * 131_072) == 291_658
    # Without the hybrid manager (vLLM's CPU backend) sliding layers are allocated as full:
    # a block = 62 × 16 × 4,096 = 4,063,232 B → 5,285 blocks < 8,192 + 1: vLLM would refuse.
    c2 = kv_capacity(m, 20 * GiB, p.model_copy(update={"hybrid_kv_cache_manager": False}))
    assert (c2.bytes_per_block, c2.num_blocks, c2.blocks_per_request) == (4_063_232, 5285, 8192)
    assert not c2.fits_one_request and c2.min_kv_bytes == 4_063_232 * 8193
    # The longest context that fits: (5,285 − 1 null block) × 16 = 84,544 tokens.
    assert max_model_len_for(m, 20 * GiB, p.model_copy(
        update={"hybrid_kv_cache_manager": False})) == 84_544


def test_gemma3n_shared_kv_layers_from_files(tmp_path: Path) -> None:
    cfg = F.gemma3n_e4b_config()
    F.write_checkpoint(tmp_path, [F.gemma3n_tensors(cfg)], config=cfg)
    m = model_kv(scan_checkpoint(tmp_path).config, tensor_parallel_size=1)
    # 35 layers, the last 15 reuse KV (num_kv_shared_layers): of layers 0-19, 4 full
    # (4, 9, 14, 19) and 16 sliding (window 512); 2 KV heads × 512 × 2 B = 2,048 B per layer.
    assert (m.count("full"), m.count("sliding"), m.count("shared")) == (4, 16, 15)
    assert m.bytes_per_token == 20 * 2048 == 40_960
    c = kv_capacity(m, 4 * GiB, EngineKVParams(max_model_len=32_768, block_size=16))
    # Groups of 4: 1 full + 4 sliding; a block = 4 × 16 × 2,048 = 131,072 B → 32,768 blocks.
    # Per request: 32,768 / 16 = 2,048 + 4 × (cdiv(511 + 16,384, 16) + 1 = 1,057) = 6,276.
    assert (c.bytes_per_block, c.num_blocks, c.blocks_per_request) == (131_072, 32_768, 6276)
    assert c.kv_tokens == int(32_768 / 6276 * 32_768)


def test_qwen3_next_linear_attention_hybrid() -> None:
    m = model_kv(F.qwen3_next_config(), tensor_parallel_size=2)
    # full_attention_interval 4 → 12 full, 36 Gated DeltaNet layers. Attention: 2 KV heads /
    # TP 2 = 1 × (256 + 256) × 2 B = 1,024 B per layer per token.
    assert (m.count("full"), m.count("linear")) == (12, 36)
    assert m.full_bytes_per_token == 12 * 1024
    # GDN state per rank (mamba_utils.gated_delta_net_state_shape): conv_dim = 128·16·2 +
    # 128·32 = 8,192 → conv (4,096, 3); temporal (32/2, 128, 128) → (12,288 + 262,144) × 2 B.
    assert m.state_bytes_per_seq == 36 * 548_864
    c = kv_capacity(m, 40 * GiB, EngineKVParams(max_model_len=262_144, block_size=16))
    # Attention block grows until a page holds a state: 16 × cdiv(548,864, 16 × 1,024) = 544
    # tokens; page 544 × 1,024 = 557,056 B (state padded to it). Groups of 12: 1 full + 3
    # linear; a block = 12 × 557,056 = 6,684,672 B → 6,425 blocks in 40 GiB.
    assert c.block_size == 544 and c.groups[0].page_bytes == 557_056
    assert (c.bytes_per_block, c.num_blocks) == (6_684_672, 6425)
    # Per request: cdiv(262,144, 544) = 482 + 3 groups × 2 state blocks (prefix caching:
    # mamba_cache_mode "align") = 488.
    assert c.blocks_per_request == 482 + 6 == 488
    assert c.kv_tokens == int(6425 / 488 * 262_144)
    fp8 = model_kv(F.qwen3_next_config(), tensor_parallel_size=2, kv_cache_dtype="fp8")
    assert any("not quantized by kv_cache_dtype" in n for n in fp8.notes)
    assert fp8.state_bytes_per_seq == m.state_bytes_per_seq   # state stays in the model dtype


def test_jamba_mamba1_state() -> None:
    # ai21labs/Jamba-v0.1: 32 layers, attention at i % 8 == 4, Mamba elsewhere; hidden 4096,
    # mamba_expand 2, d_conv 4, d_state 16 → per layer conv 8,192 × 3 + ssm 8,192 × 16 =
    # 155,648 values × 2 B = 311,296 B.
    cfg = {"architectures": ["JambaForCausalLM"], "num_hidden_layers": 32, "hidden_size": 4096,
           "num_attention_heads": 32, "num_key_value_heads": 8, "attn_layer_period": 8,
           "attn_layer_offset": 4, "mamba_d_state": 16, "mamba_d_conv": 4, "mamba_expand": 2,
           "torch_dtype": "bfloat16"}
    m = model_kv(cfg)
    assert (m.count("full"), m.count("linear")) == (4, 28)
    assert m.layers[4].kind == "full" and m.layers[12].kind == "full"
    assert m.layers[0].state_bytes == 311_296
    c = kv_capacity(m, 8 * GiB, EngineKVParams(max_model_len=65_536))
    # 16 × cdiv(311,296, 16 × 4,096) = 80-token blocks; page 327,680 B; groups of 4 layers.
    assert c.block_size == 80 and c.bytes_per_block == 4 * 327_680


def test_fp8_notes_and_refusals() -> None:
    all_linear = F.qwen3_next_config() | {"layer_types": ["linear_attention"] * 48}
    m = model_kv(all_linear, tensor_parallel_size=2, kv_cache_dtype="fp8")
    assert m.fp8_kv_supported is False and m.attention == "none"
    alibi = F.llama3_8b_config() | {"alibi": True}
    assert model_kv(alibi, kv_cache_dtype="fp8").fp8_kv_supported is None
    e5m2 = model_kv(F.llama3_8b_config(), kv_cache_dtype="fp8_e5m2", fp8_checkpoint=True)
    assert e5m2.fp8_kv_supported is False
    assert any("refuses fp8_e5m2" in n for n in e5m2.notes)
    assert model_kv(F.llama3_8b_config(), kv_cache_dtype="fp8").fp8_kv_supported is True


def test_declared_shape_from_the_profile_and_bad_configs() -> None:
    shape = ModelShapeSpec(num_hidden_layers=48, num_attention_heads=32, num_key_value_heads=8,
                           head_dim=128, sliding_window=1024, sliding_window_pattern=4)
    m = model_kv(config_from_shape(shape), tensor_parallel_size=2, source="declared")
    # Every 4th layer full: 12 full + 36 sliding; 4 heads/rank × 256 × 2 B = 2,048 B per layer.
    assert (m.count("full"), m.count("sliding"), m.bytes_per_token) == (12, 36, 48 * 2048)
    with pytest.raises(KVModelError, match="num_hidden_layers"):
        model_kv({"num_attention_heads": 8})
    with pytest.raises(KVModelError, match="layer_types has 2 entries"):
        model_kv({"num_hidden_layers": 3, "num_attention_heads": 2, "head_dim": 8,
                  "layer_types": ["full_attention", "full_attention"]})
    with pytest.raises(KVModelError, match="head_dim"):
        model_kv({"num_hidden_layers": 3, "num_attention_heads": 2})
    with pytest.raises(KVModelError, match="linear_num_key_heads"):
        model_kv({"num_hidden_layers": 4, "num_attention_heads": 2, "head_dim": 8,
                  "full_attention_interval": 2})
