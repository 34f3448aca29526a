"""Property tests for the fit's new readers of outside input (issue 12): GPU identity entries
(profile ``node.gpus`` against NVML's bus ids and UUIDs), the dtype / context reading of
``config.json``, and the device variables of ``docker inspect``'s ``Config.Env``.

Properties: never raise (or only the documented :class:`DtypeError`), return only the
documented shapes, canonical forms are stable. Example counts come from the suite-wide
hypothesis profile in ``tests/conftest.py``.
"""

from __future__ import annotations

import math

from hypothesis import example, given
from hypothesis import strategies as st

from seat_console.fit.dtype import (
    ELEMENT_BYTES,
    DtypeError,
    check_max_model_len,
    config_dtype,
    derived_max_model_len,
    resolve_kv_cache_dtype,
    resolve_served_dtype,
)
from seat_console.sources.containers import DEVICE_ENV_VARS, device_env
from seat_console.core.gpu_ids import match_seat, norm_bus_id

json_scalar = st.none() | st.booleans() | st.integers(-(2**70), 2**70) | st.floats(
    allow_nan=False, allow_infinity=False) | st.text(max_size=20)
json_value = st.recursive(json_scalar, lambda kids: st.lists(kids, max_size=4)
                          | st.dictionaries(st.text(max_size=12), kids, max_size=4),
                          max_leaves=20)
config_keys = st.sampled_from(["max_position_embeddings", "n_positions", "model_max_length",
                               "seq_len", "rope_scaling", "rope_parameters", "text_config",
                               "torch_dtype", "dtype", "model_type", "vision_config",
                               "quantization_config", "rope_type", "factor", "type"])
configs = st.recursive(json_scalar, lambda kids: st.lists(kids, max_size=3)
                       | st.dictionaries(config_keys, kids, max_size=6), max_leaves=25)
"""Config-shaped JSON: the keys the readers look at, nested, with any value (a dict where a
string is expected, a list where a dict is…)."""
bus_like = st.text(alphabet="0123456789abcdefABCDEF:.xg -", max_size=24)


@given(bus_like)
def test_norm_bus_id_is_total_and_canonical(text: str) -> None:
    n = norm_bus_id(text)
    assert n is None or (len(n) == 16 and n == norm_bus_id(n))


@given(st.text(max_size=40) | bus_like, st.none() | st.integers(0, 64),
       st.none() | st.text(max_size=40), st.none() | bus_like,
       st.lists(st.none() | st.text(max_size=20), max_size=3))
def test_match_seat_never_raises(entry, index, uuid, bus, migs) -> None:
    assert match_seat(entry, index, uuid, bus, migs) in (True, False)


@given(configs | json_value)
@example({"max_position_embeddings": 100, "rope_scaling": {"rope_type": {"a": 1}, "factor": 2}})
@example({"text_config": {"dtype": ["bfloat16"]}, "rope_parameters": {"full": {"factor": []}}})
def test_config_readers_never_raise(cfg) -> None:
    dt, where = config_dtype(cfg if isinstance(cfg, dict) else None)
    assert dt in ELEMENT_BYTES and where
    length, key, words = derived_max_model_len(cfg if isinstance(cfg, dict) else None)
    assert isinstance(words, str) and not (isinstance(length, float) and math.isnan(length))
    assert check_max_model_len(1 << 20, cfg if isinstance(cfg, dict) else None) is None \
        or "1,048,576" in check_max_model_len(1 << 20, cfg)
    kv, why = resolve_kv_cache_dtype("auto", dt, cfg.get("quantization_config")
                                     if isinstance(cfg, dict) else None)
    assert isinstance(kv, str) and why


@given(st.text(max_size=12), st.text(max_size=12), st.text(max_size=12),
       st.sampled_from(["cuda", "cuda-no-bf16", "cpu", "cpu-ppc64le", "tpu"]))
def test_served_dtype_only_raises_dtype_error(requested, cfg, model_type, platform) -> None:
    try:
        s = resolve_served_dtype(requested, cfg, model_type=model_type, platform=platform)
    except DtypeError as exc:
        assert str(exc)
    else:
        assert s.dtype in ELEMENT_BYTES and s.element_bytes == ELEMENT_BYTES[s.dtype]


@given(json_value | st.lists(st.text(max_size=40), max_size=6))
def test_device_env_keeps_only_the_device_variables(env) -> None:
    out = device_env(env)
    assert set(out) <= set(DEVICE_ENV_VARS) and all(isinstance(v, str) for v in out.values())
