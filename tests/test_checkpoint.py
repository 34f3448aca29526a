"""Checkpoint scan on real files: small checkpoints written with the ``safetensors`` library,
large ones as sparse files with real-size headers (``tests/ckpt_factory.py``).

Every expected number is computed by hand below from the model's published config (the source
is named next to it): bytes = elements × element size (BF16 2 B, F8_E4M3 / U8 1 B, F32 4 B).
Where the ``safetensors`` library can read the same file, its answer is compared too.
"""

from __future__ import annotations

import json
import struct
from pathlib import Path

import ckpt_factory as F
import numpy as np
import pytest
from safetensors import safe_open
from safetensors.numpy import save_file

from seat_console.sources.checkpoint import (
    CheckpointError,
    SafetensorsHeaderError,
    parse_quant_config,
    read_safetensors_header,
    scan_checkpoint,
)

# ----------------------------------------------------------------- small, library-written files

def test_small_checkpoint_written_by_the_library_matches_the_library(tmp_path: Path) -> None:
    tensors = {
        "model.embed_tokens.weight": np.zeros((100, 16), np.float16),      # 100·16·2 = 3,200 B
        "model.layers.0.self_attn.k_proj.weight": np.zeros((8, 16), np.float16),   # 256 B
        "model.layers.0.input_layernorm.weight": np.zeros(16, np.float32),          # 64 B
        "model.layers.0.mlp.experts.3.down_proj.weight": np.zeros((16, 32), np.uint8),  # 512 B
        "model.layers.0.mlp.shared_experts.down_proj.weight": np.zeros((4, 4), np.int64),  # 128
    }
    save_file(tensors, tmp_path / "model.safetensors", metadata={"format": "pt"})
    hdr = read_safetensors_header(tmp_path / "model.safetensors")
    with safe_open(tmp_path / "model.safetensors", "numpy") as lib:
        assert sorted(t.name for t in hdr.tensors) == sorted(lib.keys())
        assert hdr.metadata == lib.metadata() == {"format": "pt"}
        for t in hdr.tensors:
            sl = lib.get_slice(t.name)
            assert t.shape == list(sl.get_shape())
            assert t.dtype == sl.get_dtype()
            assert t.nbytes == lib.get_tensor(t.name).nbytes  # the library's own byte count
    assert hdr.missing_bytes == 0

    s = scan_checkpoint(tmp_path)
    assert s.total_bytes == 3200 + 256 + 64 + 512 + 128
    assert s.role_bytes("embed_lm_head") == 3200
    assert s.role_bytes("routed_experts") == 512          # experts.3 is routed
    assert s.role_bytes("other") == 256 + 64 + 128        # shared_experts is not routed
    assert s.role_bytes("ple") == 0
    assert {d.dtype: d.bytes for d in s.by_dtype} == {"F16": 3456, "U8": 512, "F32": 64,
                                                      "I64": 128}
    assert s.unknown_dtypes == [] and s.problems == [] and s.index is None
    assert not s.quantization.declared
    assert s.quantization.describe().startswith("none declared")


def test_scan_never_reads_tensor_data(tmp_path: Path) -> None:
    # A real file from the library, then its data area overwritten with garbage: the scan gives
    # the same answer because it reads only the header.
    save_file({"w": np.ones((64, 64), np.float32)}, tmp_path / "model.safetensors")
    before = scan_checkpoint(tmp_path).total_bytes
    raw = (tmp_path / "model.safetensors").read_bytes()
    n = struct.unpack("<Q", raw[:8])[0]
    (tmp_path / "model.safetensors").write_bytes(raw[:8 + n] + b"\xff" * (len(raw) - 8 - n))
    assert scan_checkpoint(tmp_path).total_bytes == before == 64 * 64 * 4


# ----------------------------------------------------------------- corrupt or lying headers

def _raw(path: Path, header: bytes, data_len: int, length: int | None = None) -> None:
    with path.open("wb") as f:
        f.write(struct.pack("<Q", len(header) if length is None else length))
        f.write(header)
        f.truncate(8 + len(header) + data_len)


def _library_rejects(path: Path) -> bool:
    try:
        with safe_open(path, "numpy") as f:
            list(f.keys())
    except Exception:  # noqa: BLE001 - any refusal by the library
        return True
    return False


@pytest.mark.parametrize("case", ["short", "huge-length", "length-past-eof", "not-json",
                                  "not-utf8", "overlap", "gap", "size-mismatch", "end-before",
                                  "bad-shape", "subbyte"])
def test_corrupt_header_names_file_and_offset(tmp_path: Path, case: str) -> None:
    f = tmp_path / "model.safetensors"
    good = {"a": {"dtype": "F32", "shape": [2, 2], "data_offsets": [0, 16]},
            "b": {"dtype": "BF16", "shape": [4], "data_offsets": [16, 24]}}
    want_offset: int | None = None
    if case == "short":
        f.write_bytes(b"\x10\x00\x00")
        want_offset = 0
    elif case == "huge-length":
        _raw(f, b"{}", 0, length=200_000_000)
        want_offset = 0
    elif case == "length-past-eof":
        _raw(f, json.dumps(good).encode(), 0, length=10_000)
        f.write_bytes(f.read_bytes()[:8 + 40])
        want_offset = 0
    elif case == "not-json":
        h = b'{"a": {"dtype": "F32", "shape": [2, 2] "data_offsets": [0, 16]}}'
        _raw(f, h, 16)
        want_offset = 8 + h.index(b'"data_offsets"')  # the JSON error is at the missing comma
    elif case == "not-utf8":
        h = b'{"a\xff": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}}'
        _raw(f, h, 4)
        want_offset = 8 + h.index(b"\xff")
    else:
        hdr = json.loads(json.dumps(good))
        if case == "overlap":
            hdr["b"]["data_offsets"] = [8, 16]
            hdr["b"]["shape"] = [4]
        elif case == "gap":
            hdr["b"]["data_offsets"] = [20, 28]
        elif case == "size-mismatch":   # BF16 [4] is 8 bytes; the header says 12
            hdr["b"]["data_offsets"] = [16, 28]
        elif case == "end-before":
            hdr["b"]["data_offsets"] = [16, 10]
        elif case == "bad-shape":
            hdr["b"]["shape"] = [-4]
        elif case == "subbyte":         # F4 × 3 = 12 bits: not a whole number of bytes
            hdr["b"] = {"dtype": "F4", "shape": [3], "data_offsets": [16, 18]}
        h = json.dumps(hdr).encode()
        _raw(f, h, 28)
        want_offset = 8 + h.index(b'"b":')  # the offending tensor's entry
    with pytest.raises(SafetensorsHeaderError) as exc:
        read_safetensors_header(f)
    err = exc.value
    assert err.file == str(f) and str(f) in str(err)
    assert f"byte offset {err.offset}" in str(err)
    assert err.offset == want_offset, (case, err)
    assert _library_rejects(f), f"the safetensors library accepts the {case} file"
    with pytest.raises(SafetensorsHeaderError):
        scan_checkpoint(tmp_path)  # the scan surfaces it too


def test_unknown_dtype_keeps_its_bytes_and_is_flagged(tmp_path: Path) -> None:
    # "Q4_K" is not a safetensors dtype (the library refuses it); the scan keeps e − b bytes.
    F.write_sparse(tmp_path / "model.safetensors",
                   [("w.weight", "Q4_K", [256, 256]), ("b.weight", "BF16", [256])],
                   sizes={"w.weight": 36_864})
    s = scan_checkpoint(tmp_path)
    assert s.unknown_dtypes == ["Q4_K"]
    # … but its element size (so its served bytes) is unknown: an error, the fit gives no verdict.
    (p,) = s.errors
    assert p.kind == "unknown-dtype" and p.bytes == 36_864 and "'Q4_K'" in p.detail
    assert {d.dtype: (d.bytes, d.known) for d in s.by_dtype} == {"Q4_K": (36_864, False),
                                                                 "BF16": (512, True)}
    assert s.total_bytes == 36_864 + 512
    assert _library_rejects(tmp_path / "model.safetensors")


def test_packed_fp4_dtype_counts_half_a_byte(tmp_path: Path) -> None:
    # F4 (4 bits): [128, 64] = 8192 elements = 4096 B; the library agrees (it reads F4).
    F.write_sparse(tmp_path / "model.safetensors", [("w", "F4", [128, 64])])
    assert scan_checkpoint(tmp_path).total_bytes == 4096
    with safe_open(tmp_path / "model.safetensors", "numpy") as lib:
        assert lib.get_slice("w").get_dtype() == "F4"


def test_not_a_directory_and_empty_directory(tmp_path: Path) -> None:
    with pytest.raises(CheckpointError, match="not a directory"):
        scan_checkpoint(tmp_path / "nope")
    with pytest.raises(CheckpointError, match="no \\*.safetensors file"):
        scan_checkpoint(tmp_path)
    (tmp_path / "model.safetensors").write_bytes(b"")
    with pytest.raises(CheckpointError, match="ple_tensor_pattern.*not a valid RE2 regular"):
        scan_checkpoint(tmp_path, ple_pattern="(")


# ----------------------------------------------------------------- large sparse checkpoints

def test_llama3_8b_sharded_with_index(tmp_path: Path) -> None:
    cfg = F.llama3_8b_config()
    tensors = F.llama_tensors(cfg)
    F.write_checkpoint(tmp_path, F.split_even(tensors, 4), config=cfg)
    s = scan_checkpoint(tmp_path)
    # Meta-Llama-3-8B: 8,030,261,248 parameters in BF16 → 16,060,522,496 B, which is exactly
    # the "total_size" of its published model.safetensors.index.json.
    assert s.total_bytes == 16_060_522_496
    assert s.problems == [] and s.index is not None and s.index.total_size == 16_060_522_496
    assert len(s.shards) == 4 and all(sh.missing_bytes == 0 for sh in s.shards)
    # Embeddings + LM head: 2 × 128,256 × 4,096 × 2 B.
    assert s.role_bytes("embed_lm_head") == 2 * 128_256 * 4096 * 2 == 2_101_346_304
    assert s.role_bytes("routed_experts") == 0 and s.role_bytes("ple") == 0
    # TP classes: k/v proj 32 layers × 2 × (1024 × 4096) × 2 B; norms 65 × 4096 × 2 B.
    assert s.tp.kv_proj_bytes == 32 * 2 * 1024 * 4096 * 2
    assert s.tp.replicated_bytes == (32 * 2 + 1) * 4096 * 2
    assert [(v.name, v.rows) for v in s.tp.vocab] == [("model.embed_tokens.weight", 128_256),
                                                      ("lm_head.weight", 128_256)]
    assert s.tp.split_bytes == 16_060_522_496 - 2_101_346_304 - s.tp.kv_proj_bytes \
        - s.tp.replicated_bytes
    # The library reads the sparse shards' headers the same way.
    with safe_open(tmp_path / "model-00001-of-00004.safetensors", "numpy") as lib:
        first = read_safetensors_header(tmp_path / "model-00001-of-00004.safetensors")
        assert sorted(lib.keys()) == sorted(t.name for t in first.tensors)


def test_qwen3_moe_routed_experts(tmp_path: Path) -> None:
    cfg = F.qwen3_30b_a3b_config()
    F.write_checkpoint(tmp_path, F.split_even(F.qwen3_moe_tensors(cfg), 16), config=cfg)
    s = scan_checkpoint(tmp_path)
    # Qwen3-30B-A3B: 48 layers × 128 experts × 3 matrices × (768 × 2048) × 2 B.
    assert s.role_bytes("routed_experts") == 48 * 128 * 3 * 768 * 2048 * 2 == 57_982_058_496
    # Embedding + LM head: 2 × 151,936 × 2048 × 2 B.
    assert s.role_bytes("embed_lm_head") == 2 * 151_936 * 2048 * 2
    # Total 30,532,122,624 parameters × 2 B (per layer: attention 18,874,368 + norms 4,352 +
    # router 262,144 + experts 603,979,776 = 623,120,640; × 48 + final norm + 2 embeddings).
    assert s.total_bytes == (48 * 623_120_640 + 2048 + 2 * 151_936 * 2048) * 2 == 61_064_245_248
    # The router (mlp.gate) is replicated on every TP rank: 48 × 128 × 2048 × 2 B (+ norms).
    router = 48 * 128 * 2048 * 2
    norms = (48 * (128 + 128 + 2048 + 2048) + 2048) * 2
    assert s.tp.replicated_bytes == router + norms
    assert s.problems == []


def test_deepseek_v3_fp8_mla_multi_hundred_gb(tmp_path: Path) -> None:
    cfg = F.deepseek_v3_config()
    F.write_checkpoint(tmp_path, F.split_even(F.deepseek_v3_tensors(cfg), 163), config=cfg)
    s = scan_checkpoint(tmp_path)
    assert len(s.shards) == 163
    # Routed experts: 58 MoE layers (61 − first_k_dense_replace 3) × 256 experts × (3 FP8
    # matrices of 2048 × 7168 × 1 B + 3 F32 block scales of 16 × 56 × 4 B).
    assert s.role_bytes("routed_experts") == 58 * 256 * (3 * 2048 * 7168 + 3 * 16 * 56 * 4)
    fp8 = {d.dtype: d.bytes for d in s.by_dtype}
    assert set(fp8) == {"F8_E4M3", "F32", "BF16"}
    # Declared as DeepSeek writes it: quant_method fp8, e4m3, 128 × 128 blocks.
    q = s.quantization
    assert q.declared and q.method == "fp8" and q.source == "config.json:quantization_config"
    assert q.extra == {"fmt": "e4m3", "weight_block_size": [128, 128],
                       "activation_scheme": "dynamic"}
    # MLA: q_a_proj and kv_a_proj_with_mqa are ReplicatedLinear in vLLM → replicated per rank.
    # Per layer: q_a (1536 × 7168 + 12 × 56 × 4) + kv_a (576 × 7168 + 5 × 56 × 4) + the two
    # latent norms (1536 + 512) × 2 + input/post norms 2 × 7168 × 2; routers 58 × (256 × 7168
    # × 2 + 256 × 4); final norm 7168 × 2.
    per_layer = (1536 * 7168 + 12 * 56 * 4) + (576 * 7168 + 5 * 56 * 4) + (1536 + 512) * 2 \
        + 2 * 7168 * 2
    assert s.tp.replicated_bytes == 61 * per_layer + 58 * (256 * 7168 * 2 + 256 * 4) + 7168 * 2
    assert s.problems == []


def test_gemma3n_per_layer_embedding_table_by_default_pattern(tmp_path: Path) -> None:
    cfg = F.gemma3n_e4b_config()
    F.write_checkpoint(tmp_path, F.split_even(F.gemma3n_tensors(cfg), 3), config=cfg)
    s = scan_checkpoint(tmp_path)
    # PLE: embed_tokens_per_layer [262,144, 35 × 256] × 2 B (gemma-3n-E4B text config).
    assert s.ple_bytes == 262_144 * 35 * 256 * 2 == 4_697_620_480
    assert [(t.name, t.rows) for t in s.tp.ple] == [
        ("model.language_model.embed_tokens_per_layer.weight", 262_144)]
    # The token embedding is not PLE: 262,400 × 2048 × 2 B.
    assert s.role_bytes("embed_lm_head") == 262_400 * 2048 * 2
    # A custom pattern from the profile selects something else.
    s2 = scan_checkpoint(tmp_path, ple_pattern=r"per_layer_model_projection")
    assert s2.ple_bytes == 35 * 256 * 2048 * 2


def test_nvfp4_modelopt_declared_and_packed_sizes(tmp_path: Path) -> None:
    cfg = F.llama3_8b_config()
    hfq = {"producer": {"name": "modelopt", "version": "0.27.1"},
           "quantization": {"quant_algo": "NVFP4", "kv_cache_quant_algo": "FP8",
                            "group_size": 16, "exclude_modules": ["lm_head"]}}
    F.write_checkpoint(tmp_path, F.split_even(F.llama_tensors(cfg, linear="nvfp4"), 2),
                       config=cfg, hf_quant_config=hfq)
    s = scan_checkpoint(tmp_path)
    q = s.quantization
    assert (q.declared, q.source, q.method, q.quant_algo, q.kv_cache_quant_algo, q.group_size,
            q.exclude) == (True, "hf_quant_config.json", "modelopt", "NVFP4", "FP8", 16,
                           ["lm_head"])
    assert "NVFP4" in q.describe() and "KV FP8" in q.describe()
    # Packed 4-bit weights stored as U8 [out, in/2]; FP8 scales [out, in/16] — per layer the 7
    # linears hold 218,103,808 weights (q 4096², k/v 1024 × 4096, o 4096², 3 × 14336 × 4096).
    w = 4096 * 4096 * 2 + 1024 * 4096 * 2 + 14336 * 4096 * 3
    assert {d.dtype: d.bytes for d in s.by_dtype} == {
        "U8": 32 * w // 2, "F8_E4M3": 32 * w // 16,
        "F32": 32 * 7 * 2 * 4,                     # weight_scale_2 + input_scale per linear
        "BF16": 2 * 128_256 * 4096 * 2 + 65 * 4096 * 2}   # embeddings + norms
    assert s.unknown_dtypes == []


def test_fp8_modelopt(tmp_path: Path) -> None:
    cfg = F.llama3_8b_config()
    hfq = {"producer": {"name": "modelopt"}, "quantization": {"quant_algo": "FP8",
                                                              "kv_cache_quant_algo": None}}
    F.write_checkpoint(tmp_path, [F.llama_tensors(cfg, linear="fp8")], config=cfg,
                       hf_quant_config=hfq)
    s = scan_checkpoint(tmp_path)
    assert s.quantization.quant_algo == "FP8" and s.quantization.kv_cache_quant_algo is None
    w = 4096 * 4096 * 2 + 1024 * 4096 * 2 + 14336 * 4096 * 3
    assert {d.dtype: d.bytes for d in s.by_dtype}["F8_E4M3"] == 32 * w  # 1 B per weight


def test_modelopt_mixed_precision_per_layer_map(tmp_path: Path) -> None:
    cfg = F.llama3_8b_config() | {"num_hidden_layers": 2}
    layers = {f"model.layers.{i}.{m}": {"quant_algo": "FP8" if "self_attn" in m else "NVFP4",
                                        **({"group_size": 16} if "mlp" in m else {})}
              for i in range(2) for m in ("self_attn.q_proj", "self_attn.o_proj",
                                          "mlp.down_proj")}
    cfg["quantization_config"] = {"quant_method": "modelopt", "quant_algo": "MIXED_PRECISION",
                                  "kv_cache_scheme": {"type": "float", "num_bits": 8},
                                  "quantized_layers": layers, "ignore": ["lm_head"]}
    F.write_checkpoint(tmp_path, [F.llama_tensors(cfg)], config=cfg)
    q = scan_checkpoint(tmp_path).quantization
    assert q.source == "config.json:quantization_config" and q.method == "modelopt"
    assert q.quant_algo == "MIXED_PRECISION" and q.kv_cache_quant_algo == "FP8"
    assert q.per_layer["model.layers.1.mlp.down_proj"] == "NVFP4"
    assert q.per_layer_counts == {"FP8": 4, "NVFP4": 2}
    assert "FP8 ×4" in q.describe() and "NVFP4 ×2" in q.describe()


def test_compressed_tensors_mixed_precision_groups(tmp_path: Path) -> None:
    cfg = F.llama3_8b_config() | {"num_hidden_layers": 1}
    cfg["quantization_config"] = {
        "quant_method": "compressed-tensors", "format": "mixed-precision",
        "config_groups": {
            "group_0": {"targets": ["re:.*mlp.*"], "format": "nvfp4-pack-quantized",
                        "weights": {"num_bits": 4, "type": "float", "strategy": "tensor_group",
                                    "group_size": 16},
                        "input_activations": {"num_bits": 4, "type": "float",
                                              "strategy": "tensor_group", "group_size": 16}},
            "group_1": {"targets": ["re:.*self_attn.*"], "format": "float-quantized",
                        "weights": {"num_bits": 8, "type": "float", "strategy": "channel"},
                        "input_activations": {"num_bits": 8, "type": "float",
                                              "strategy": "token", "dynamic": True}}},
        "ignore": ["lm_head"], "kv_cache_scheme": None}
    F.write_checkpoint(tmp_path, [F.llama_tensors(cfg)], config=cfg)
    q = scan_checkpoint(tmp_path).quantization
    assert q.method == "compressed-tensors" and q.format == "mixed-precision"
    assert [(g.name, g.format, g.weights["num_bits"]) for g in q.groups] == [
        ("group_0", "nvfp4-pack-quantized", 4), ("group_1", "float-quantized", 8)]
    assert q.exclude == ["lm_head"] and q.kv_cache_quant_algo is None
    assert "group_0: nvfp4-pack-quantized w4a4" in q.describe()


def test_quant_config_json_wins_and_disagreement_is_reported(tmp_path: Path) -> None:
    cfg = F.llama3_8b_config() | {"num_hidden_layers": 1,
                                  "quantization_config": {"quant_method": "modelopt",
                                                          "quant_algo": "FP8"}}
    F.write_checkpoint(tmp_path, [F.llama_tensors(cfg)], config=cfg,
                       hf_quant_config={"quantization": {"quant_algo": "NVFP4"}})
    s = scan_checkpoint(tmp_path)
    assert s.quantization.quant_algo == "FP8"
    assert [p.kind for p in s.problems] == ["quant-disagreement"]
    # No quantization config at all: nothing is guessed from the FP8 dtypes.
    assert parse_quant_config({"architectures": ["X"]}, None).declared is False


# ----------------------------------------------------------------- the index is checked

def _sharded(tmp_path: Path) -> Path:
    cfg = F.llama3_8b_config() | {"num_hidden_layers": 4}
    F.write_checkpoint(tmp_path, F.split_even(F.llama_tensors(cfg), 3), config=cfg)
    return tmp_path


def test_index_missing_shard(tmp_path: Path) -> None:
    root = _sharded(tmp_path)
    (root / "model-00002-of-00003.safetensors").unlink()
    s = scan_checkpoint(root)
    kinds = [p.kind for p in s.problems]
    assert "missing-shard" in kinds and all(p.severity == "error" for p in s.errors)
    assert any("model-00002-of-00003.safetensors" in p.detail for p in s.problems)


def test_index_lists_tensor_absent_from_shard_and_total_size_lie(tmp_path: Path) -> None:
    root = _sharded(tmp_path)
    idx = json.loads((root / "model.safetensors.index.json").read_text())
    idx["weight_map"]["model.layers.9.mlp.up_proj.weight"] = "model-00001-of-00003.safetensors"
    true_total = idx["metadata"]["total_size"]
    idx["metadata"]["total_size"] = true_total + 4096
    (root / "model.safetensors.index.json").write_text(json.dumps(idx))
    s = scan_checkpoint(root)
    details = {p.kind: p.detail for p in s.problems}
    assert "model.layers.9.mlp.up_proj.weight" in details["tensor-absent"]
    assert f"{true_total + 4096:,}" in details["total-size"] and "(+4,096 B)" in details[
        "total-size"]
    assert s.total_bytes == true_total


def test_tensor_present_but_unlisted_and_unreferenced_shard(tmp_path: Path) -> None:
    root = _sharded(tmp_path)
    idx = json.loads((root / "model.safetensors.index.json").read_text())
    del idx["weight_map"]["model.norm.weight"]
    idx["metadata"]["total_size"] -= 4096 * 2
    (root / "model.safetensors.index.json").write_text(json.dumps(idx))
    F.write_sparse(root / "stray.safetensors", [("x", "BF16", [8])])
    s = scan_checkpoint(root)
    kinds = sorted(p.kind for p in s.problems)
    # vLLM loads every tensor of a shard the index names, listed or not: the unlisted norm is
    # counted, so the lowered total_size now disagrees by its 8,192 B (a warning: vLLM never
    # reads total_size); the stray shard is not named by the index, so it is not loaded.
    assert kinds == ["total-size", "unlisted-tensor", "unreferenced-shard"]
    assert all(p.severity == "warning" for p in s.problems)
    by_kind = {p.kind: p for p in s.problems}
    assert by_kind["unlisted-tensor"].bytes == 4096 * 2
    assert by_kind["total-size"].bytes == -4096 * 2
    assert s.total_bytes == idx["metadata"]["total_size"] + 4096 * 2


def test_many_index_problems_list_fifty_then_one_for_the_rest(tmp_path: Path) -> None:
    cfg = F.llama3_8b_config() | {"num_hidden_layers": 30}
    sizes = F.write_checkpoint(tmp_path, F.split_even(F.llama_tensors(cfg), 3), config=cfg)
    idx = json.loads((tmp_path / "model.safetensors.index.json").read_text())
    wm = idx["weight_map"]
    first = [n for n, s in wm.items() if s == "model-00001-of-00003.safetensors"]
    third = [n for n, s in wm.items() if s == "model-00003-of-00003.safetensors"]
    for n in third[:60]:
        del wm[n]                                                  # unlisted
    for n in first[:60]:
        wm[n] = "model-00002-of-00003.safetensors"                 # misplaced
    for i in range(70):
        wm[f"ghost.{i}.weight"] = "model-00001-of-00003.safetensors"   # absent
    (tmp_path / "model.safetensors.index.json").write_text(json.dumps(idx))
    problems = scan_checkpoint(tmp_path).problems
    for kind, names, more in [("unlisted-tensor", third[:60], "… and 10 more unlisted tensors"),
                              ("tensor-misplaced", first[:60], "… and 10 more misplaced tensors")]:
        mine = [p for p in problems if p.kind == kind]
        assert len(mine) == 51 and all(p.severity == "warning" for p in mine)
        assert [p.bytes for p in mine[:50]] == [sizes[n] for n in names[:50]]
        rest = sum(sizes[n] for n in names[50:])
        assert mine[50].bytes == rest and mine[50].detail == f"{more} ({rest:,} B), counted"
    absent = [p for p in problems if p.kind == "tensor-absent"]
    assert len(absent) == 51 and all(p.severity == "error" and p.bytes is None for p in absent)
    assert absent[0].detail.startswith("ghost.0.weight: listed in model.safetensors.index.json")
    assert absent[50].detail == "… and 20 more tensors absent"


def test_truncated_shard_still_scans_from_its_header(tmp_path: Path) -> None:
    # A partial download: the header is whole, the data is cut short. The library refuses it
    # (data must reach the end of the file); the scan sizes it from the header and warns.
    data = F.write_sparse(tmp_path / "model.safetensors",
                          [("a", "BF16", [1024, 1024]), ("b", "BF16", [1024])],
                          truncate_to=4096)
    s = scan_checkpoint(tmp_path)
    assert s.total_bytes == data == 1024 * 1024 * 2 + 1024 * 2
    (p,) = s.problems
    assert p.kind == "truncated-shard" and p.severity == "warning"
    assert s.shards[0].missing_bytes == 8 + s.shards[0].header_len + data - 4096
    assert _library_rejects(tmp_path / "model.safetensors")
