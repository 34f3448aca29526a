"""Property tests: safetensors headers, the shard index, ``config.json`` /
``quantization_config`` / ``hf_quant_config.json``, and the KV model over a config (issue #12).

Asserted: only the documented errors (:class:`CheckpointError` and its
:class:`SafetensorsHeaderError`, :class:`KVModelError`), each naming its input (the file, or the
config's source); ``parse_quant_config`` never raises; no call over the 1 s deadline; no negative
byte counts; sizes bounded (3,000,000 layers are refused, not allocated).
"""

from __future__ import annotations

import json
import struct
import tempfile
import time
from pathlib import Path

import ckpt_factory as F
import pytest
from hypothesis import given
from hypothesis import strategies as st

from seat_console.fit.kvcache import KVModelError, kv_capacity, model_kv, EngineKVParams
from seat_console.sources.checkpoint import (
    CheckpointError,
    SafetensorsHeaderError,
    parse_quant_config,
    read_safetensors_header,
    scan_checkpoint,
)
from seat_console.core.checkpoint import QuantScheme

scalars = (st.none() | st.booleans() | st.integers(-2**70, 2**70)
           | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=12))
json_values = st.recursive(
    scalars, lambda kids: st.lists(kids, max_size=4) | st.dictionaries(st.text(max_size=10),
                                                                        kids, max_size=4),
    max_leaves=16)

entry = st.fixed_dictionaries({
    "dtype": st.one_of(st.sampled_from(["BF16", "F32", "U8", "F4", "F8_E4M3", "X9"]), scalars),
    "shape": st.one_of(st.lists(st.integers(-2, 2**40), max_size=4), json_values),
    "data_offsets": st.one_of(st.lists(st.integers(-5, 2**41), min_size=2, max_size=2),
                              json_values)})
headers = st.one_of(
    st.dictionaries(st.text(max_size=20), st.one_of(entry, json_values), max_size=5)
    .map(lambda d: json.dumps(d).encode()),
    json_values.map(lambda v: json.dumps(v).encode()),
    st.binary(max_size=200),
    st.integers(1, 20000).map(lambda n: b"[" * n + b"]" * n),
    st.sampled_from([b'{"t": {"dtype": "BF16", "shape": [NaN], "data_offsets": [0, 2]}}',
                     b'{"t": {"dtype": "BF16", "shape": [1e400], "data_offsets": [0, 2]}}',
                     b'{"t": {"dtype": "BF16", "shape": [' + b"9" * 5000 + b'], '
                     b'"data_offsets": [0, 2]}}',
                     b'{"t": {"dtype": "BF16", "shape": [' + b"1," * 5000 + b'1], '
                     b'"data_offsets": [0, 2]}}']))


def _file(d: Path, header: bytes, length: int | None = None, pad: int = 0) -> Path:
    p = d / "model.safetensors"
    n = len(header) if length is None else length
    p.write_bytes(struct.pack("<Q", n) + header + b"\0" * pad)
    return p


@given(headers, st.one_of(st.none(), st.integers(0, 2**64 - 1)), st.integers(0, 64))
def test_header_is_parsed_or_refused_with_file_and_offset(header, length, pad):
    with tempfile.TemporaryDirectory() as tmp:
        p = _file(Path(tmp), header, length, pad)
        t0 = time.perf_counter()
        try:
            h = read_safetensors_header(p)
        except SafetensorsHeaderError as exc:
            assert exc.file == str(p) and str(exc).startswith(str(p))
            assert 0 <= exc.offset <= 8 + len(header)
        else:
            assert h.data_bytes >= 0 and h.missing_bytes >= 0
            assert all(t.nbytes >= 0 for t in h.tensors)
        assert time.perf_counter() - t0 < 1.0


@given(st.one_of(json_values.map(json.dumps), st.text(max_size=50),
                 st.integers(1, 5000).map(lambda n: "[" * n + "]" * n)),
       st.sampled_from(["config.json", "hf_quant_config.json", "model.safetensors.index.json"]))
def test_json_side_files_are_read_or_refused_naming_the_file(text, name):
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        F.write_checkpoint(root, [[("model.embed_tokens.weight", "BF16", [64, 8])]],
                           config=F.llama3_8b_config())
        (root / name).write_text(text)
        try:
            s = scan_checkpoint(root)
        except CheckpointError as exc:
            assert str(root / name) in str(exc) or name in str(exc)
            return
        assert s.total_bytes >= 0 and s.tensor_count >= 0
        for prob in s.problems:
            if prob.kind in ("config-unreadable", "quant-config-unreadable"):
                assert name in prob.detail


@given(st.dictionaries(st.text(max_size=12), json_values, max_size=6) | json_values,
       st.dictionaries(st.text(max_size=12), json_values, max_size=6) | st.none())
def test_parse_quant_config_never_raises(qc, hfq):
    for cfg in ({"quantization_config": qc}, {"quantization_config": {"quantization": qc}},
                {"quantization_config": {"config_groups": qc, "quantized_layers": qc,
                                         "ignore": qc, "kv_cache_scheme": qc}}):
        scheme = parse_quant_config(cfg, hfq)
        assert isinstance(scheme, QuantScheme)
        scheme.describe()
    assert isinstance(parse_quant_config(None, {"quantization": qc, "producer": qc}),
                      QuantScheme)


def test_index_entries_must_be_plain_shard_names(tmp_path: Path):
    F.write_checkpoint(tmp_path, [[("a", "BF16", [4])], [("b", "BF16", [4])]])
    idx = tmp_path / "model.safetensors.index.json"
    for bad in ({"weight_map": {"a": {"not": "a name"}}}, {"weight_map": {"a": "../x.bin"}},
                {"weight_map": {"a": "/etc/passwd"}}, {"weight_map": {"a": 7}}):
        idx.write_text(json.dumps(bad))
        with pytest.raises(CheckpointError, match=r"index\.json: weight_map\['a'\]"):
            scan_checkpoint(tmp_path)


def test_total_size_true_is_not_one_byte(tmp_path: Path):
    F.write_checkpoint(tmp_path, [[("a", "BF16", [4])], [("b", "BF16", [4])]])
    idx = tmp_path / "model.safetensors.index.json"
    d = json.loads(idx.read_text())
    for bogus in (True, "1e3", [8], -5):
        d["metadata"]["total_size"] = bogus
        idx.write_text(json.dumps(d))
        s = scan_checkpoint(tmp_path)
        assert s.index.total_size is None  # unknown: never 1 for true, never negative
    idx.write_text(json.dumps(d).replace("-5", "1e400"))
    with pytest.raises(CheckpointError, match=r"index\.json: .*1e400 is out of range"):
        scan_checkpoint(tmp_path)


def test_ple_pattern_that_hangs_python_re_is_linear_with_re2(tmp_path: Path):
    F.write_checkpoint(tmp_path, [[("a" * 40 + "y", "BF16", [4])]])
    t0 = time.perf_counter()
    s = scan_checkpoint(tmp_path, ple_pattern=r"(\w+\.?)*x$")
    assert time.perf_counter() - t0 < 1.0 and s.ple_bytes == 0
    with pytest.raises(CheckpointError, match="ple_tensor_pattern.*RE2"):
        scan_checkpoint(tmp_path, ple_pattern=r"(?<=a)x")


# -- the KV model over config.json ------------------------------------------------------------
BASE = F.llama3_8b_config()
cfg_keys = st.sampled_from(["num_hidden_layers", "num_attention_heads", "num_key_value_heads",
                            "head_dim", "hidden_size", "sliding_window", "layer_types",
                            "kv_lora_rank", "qk_rope_head_dim", "num_kv_shared_layers",
                            "torch_dtype", "architectures", "text_config", "mamba_d_state",
                            "linear_num_value_heads", "sliding_window_pattern"])
cfg_values = st.one_of(json_values, st.integers(-3, 3_000_000), st.sampled_from(
    [0, True, False, None, 2**64, "32", 3_000_000, ["full_attention"] * 32]))


@given(st.dictionaries(cfg_keys, cfg_values, max_size=4), st.sampled_from([1, 2, 3, 4, 8]))
def test_model_kv_is_a_model_or_a_named_kv_error(changes, tp):
    cfg = {**BASE, **changes}
    t0 = time.perf_counter()
    try:
        m = model_kv(cfg, tensor_parallel_size=tp, source="/ckpt/config.json")
    except KVModelError as exc:
        assert "/ckpt/config.json" in str(exc) or "tensor_parallel_size" in str(exc)
        return
    finally:
        assert time.perf_counter() - t0 < 1.0
    assert m.bytes_per_token >= 0 and m.state_bytes_per_seq >= 0
    assert m.num_attention_heads % tp == 0 and m.total_kv_heads >= 1 and m.head_dim >= 1
    try:
        cap = kv_capacity(m, 10 << 30, EngineKVParams(max_model_len=4096))
    except KVModelError:
        return
    assert cap.num_blocks >= 0 and cap.kv_tokens >= 0


@pytest.mark.parametrize("change,words", [
    ({"num_hidden_layers": 3_000_000}, "above 10,000"),
    ({"num_key_value_heads": 0}, "'num_key_value_heads' is 0"),
    ({"head_dim": 0}, "'head_dim' is 0"),
    ({"head_dim": True}, "'head_dim' must be a non-negative integer"),
    ({"num_attention_heads": 30}, "not divisible by tensor_parallel_size 4"),
    ({"num_hidden_layers": True}, "'num_hidden_layers' must be"),
])
def test_configs_vllm_refuses_are_refused_by_name(change, words):
    t0 = time.perf_counter()
    with pytest.raises(KVModelError, match=words):
        model_kv({**BASE, **change}, tensor_parallel_size=4)
    assert time.perf_counter() - t0 < 0.1


NEXT = F.qwen3_next_config()
linear_keys = st.sampled_from(["linear_num_key_heads", "linear_num_value_heads",
                               "linear_key_head_dim", "linear_value_head_dim",
                               "linear_conv_kernel_dim", "full_attention_interval"])


@given(st.dictionaries(linear_keys, st.one_of(st.integers(-2, 300), st.booleans(), st.none()),
                       max_size=3), st.sampled_from([1, 2, 4]))
def test_linear_attention_state_is_never_negative(changes, tp):
    """A 0-wide convolution (linear_conv_kernel_dim = 0) gave a negative state size."""
    try:
        m = model_kv({**NEXT, **changes}, tensor_parallel_size=tp, source="next/config.json")
    except KVModelError as exc:
        assert "next/config.json" in str(exc) or "tensor_parallel_size" in str(exc)
        return
    assert all(la.state_bytes >= 0 and la.bytes_per_token >= 0 for la in m.layers)


@pytest.mark.parametrize("key", ["linear_conv_kernel_dim"])
def test_zero_wide_convolution_is_refused(key):
    with pytest.raises(KVModelError, match=f"{key} must be at least 1"):
        model_kv({**NEXT, key: 0}, tensor_parallel_size=1)
