"""KV cache model: bytes per token per GPU from a model's ``config.json``, and KV capacity in
tokens and maximum concurrency computed the way vLLM computes them (block granularity).

Sources (vLLM 0.32.0, the version in the lab; paths inside the ``vllm`` package):

* ``vllm/v1/kv_cache_interface.py`` — per-layer specs: ``AttentionSpec.page_size_bytes`` =
  block_size × num_kv_heads × (head_size + head_size_v) × dtype size; ``MLAAttentionSpec`` (one
  "head" of kv_lora_rank + qk_rope_head_dim, head_size_v = 0, ``max_tp_shards=1``: the same on
  every rank); ``FullAttentionSpec.max_memory_usage_bytes`` = cdiv(max_model_len, block_size)
  pages; ``SlidingWindowSpec.max_admission_blocks_per_request`` = cdiv(min(window − 1 +
  max_in_flight_tokens, max_model_len), block_size) + 1; ``MambaSpec`` (fixed state: 1 page per
  request, + 1 with ``mamba_cache_mode="align"``, + speculative blocks).
* ``vllm/v1/core/kv_cache_utils.py`` — ``get_kv_cache_groups`` (one group when every layer has
  the same spec or type; otherwise ``_get_kv_cache_groups_uniform_page_size``: buckets of equal
  specs split into groups of ``group_size`` layers, padding the last), ``unify_kv_cache_spec_page_size``,
  ``unify_hybrid_kv_cache_specs`` (without the hybrid manager — vLLM's CPU backend — sliding
  layers count as full), ``get_kv_cache_config_from_groups`` (num_blocks = available //
  bytes_per_block, bytes_per_block = the widest group's summed pages),
  ``get_max_concurrency_for_kv_cache_config`` (num_blocks / Σ groups' blocks per request),
  ``get_kv_cache_capacity`` (tokens = int(concurrency × max_model_len)), ``update_kv_cache_capacity``
  (the log line "KV cache size: N tokens, Maximum concurrency for L tokens per request: X.XXx"),
  ``get_kv_cache_configs`` / ``_check_enough_kv_cache_memory`` (start-up refusal unless one
  request at max_model_len fits in the pool less the null block).
* ``vllm/platforms/interface.py`` ``_align_hybrid_block_size`` — for attention + Mamba/linear
  models the attention block size grows until a page holds a Mamba state; the state page is
  padded to match.
* ``vllm/config/model.py`` ``get_num_kv_heads`` = max(1, total_kv_heads // TP) (KV heads are
  replicated when there are fewer than TP); ``get_head_size`` (MLA: kv_lora_rank +
  qk_rope_head_dim).
* ``vllm/model_executor/layers/mamba/mamba_utils.py`` — ``gated_delta_net_state_shape`` and
  ``mamba1_state_shape`` (state shapes per TP rank).

Everything here is pure arithmetic on plain data; no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from pydantic import Field

from seat_console.core.base import Frozen

DTYPE_BYTES: dict[str, int] = {
    "float32": 4, "float": 4, "float16": 2, "half": 2, "bfloat16": 2,
    "fp8": 1, "fp8_e4m3": 1, "fp8_e5m2": 1, "fp8_inc": 1,
}
"""Bytes per element of a model / KV cache dtype name as vLLM spells them
(``vllm/utils/torch_utils.py`` ``STR_DTYPE_TO_TORCH_DTYPE``)."""

LayerKind = Literal["full", "sliding", "mla", "linear", "shared"]
"""Per-layer KV kind: ``full`` attention (MHA/GQA/MQA), ``sliding`` window attention, ``mla``
(multi-head latent attention), ``linear`` attention / Mamba (a fixed state per sequence),
``shared`` (reuses another layer's KV cache, e.g. Gemma 3n's ``num_kv_shared_layers``: no cache)."""


class KVModelError(ValueError):
    """A config lacks what the KV model needs, or describes a layout vLLM would refuse.
    The message names the key and the fix."""


class LayoutRefused(KVModelError):
    """The model shape is known and vLLM refuses to start with it at this tensor parallel
    size (its heads do not divide: ``vllm/config/model.py``
    ``verify_with_parallel_config``). Not an unknown: the fit budget's verdict is *does not
    fit* (:func:`seat_console.fit.budget.compute_budget`), never "KV tokens n/a"."""


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


class LayerKV(Frozen):
    """One layer's KV cache on one TP rank: ``bytes_per_token`` for attention layers (K+V, or
    the MLA latent), ``sliding_window`` for sliding layers, ``state_bytes`` (unpadded) for
    linear-attention / Mamba layers."""

    index: int
    kind: LayerKind
    bytes_per_token: int = 0
    sliding_window: int | None = None
    state_bytes: int = 0


class ModelKV(Frozen):
    """The KV cache layout of one model at one tensor parallel size and KV dtype (per rank).

    ``kv_heads_per_rank`` = max(1, total_kv_heads // TP); ``kv_head_replicas`` = how many ranks
    hold a copy of each KV head when total_kv_heads < TP (1 otherwise). ``fp8_kv_supported``:
    False when the architecture cannot use an fp8 KV cache at all, None when it depends on the
    attention backend (see ``notes``), True otherwise.
    """

    source: str
    architecture: str | None = None
    tensor_parallel_size: int
    model_dtype: str
    kv_cache_dtype: str
    kv_dtype_bytes: int
    attention: Literal["mha", "gqa", "mqa", "mla", "none"]
    num_attention_heads: int
    total_kv_heads: int
    kv_heads_per_rank: int
    kv_head_replicas: int = 1
    head_dim: int
    head_dim_v: int
    layers: list[LayerKV]
    fp8_kv_supported: bool | None = True
    notes: list[str] = Field(default_factory=list)

    def count(self, kind: LayerKind) -> int:
        """How many layers are of ``kind``."""
        return sum(1 for layer in self.layers if layer.kind == kind)

    @property
    def full_bytes_per_token(self) -> int:
        """Per-rank bytes every token adds for good (full attention and MLA layers)."""
        return sum(la.bytes_per_token for la in self.layers if la.kind in ("full", "mla"))

    @property
    def sliding_bytes_per_token(self) -> int:
        """Per-rank bytes a token adds in sliding-window layers (bounded by each window)."""
        return sum(la.bytes_per_token for la in self.layers if la.kind == "sliding")

    @property
    def bytes_per_token(self) -> int:
        """Per-rank KV bytes of one token while the context is within every window."""
        return self.full_bytes_per_token + self.sliding_bytes_per_token

    @property
    def state_bytes_per_seq(self) -> int:
        """Per-rank fixed state of one sequence in linear-attention / Mamba layers (unpadded)."""
        return sum(la.state_bytes for la in self.layers if la.kind == "linear")


def _text_config(config: Mapping[str, Any]) -> Mapping[str, Any]:
    tc = config.get("text_config")
    if isinstance(tc, Mapping):
        merged = dict(config)
        merged.update(tc)
        return merged
    return config


MAX_LAYERS = 10_000
"""Most ``num_hidden_layers`` accepted (real models have at most a few hundred). The KV model
builds one record per layer: 3,000,000 layers would allocate gigabytes."""

MAX_CONFIG_INT = 1 << 40
"""Largest integer accepted for a config dimension (heads, head_dim, hidden_size, windows…);
anything larger is a corrupt config, and would make the byte arithmetic meaningless."""


def _int(cfg: Mapping[str, Any], key: str, source: str, maximum: int = MAX_CONFIG_INT) -> int:
    v = cfg.get(key)
    if not isinstance(v, int) or isinstance(v, bool) or v < 0:
        shown = repr(v) if len(repr(v)) <= 80 else f"{repr(v)[:80]}…"
        raise KVModelError(f"{source}: '{key}' must be a non-negative integer (got {shown}); the "
                           "KV model needs it")
    if v > maximum:
        raise KVModelError(f"{source}: '{key}' = {v:,} is above {maximum:,}; not a real model "
                           "(a corrupt or hostile config)")
    return v


def _opt_positive(cfg: Mapping[str, Any], key: str, source: str) -> int | None:
    """``cfg[key]`` as a positive integer, ``None`` when absent or null; a present value that
    is 0, negative, a bool or not an integer is refused (vLLM refuses such a config)."""
    if cfg.get(key) is None:
        return None
    v = _int(cfg, key, source)
    if v == 0:
        raise KVModelError(f"{source}: '{key}' is 0; it must be a positive integer (vLLM refuses "
                           "this config)")
    return v


def _layer_kinds(cfg: Mapping[str, Any], n: int, source: str) -> list[LayerKind]:
    lt = cfg.get("layer_types")
    if lt is not None and not isinstance(lt, list):
        # silently falling back to another layout would size the cache of another model
        shown = repr(lt) if len(repr(lt)) <= 80 else f"{repr(lt)[:80]}…"
        raise KVModelError(f"{source}: layer_types must be a list of layer kinds, one per layer "
                           f"(got {type(lt).__name__} {shown})")
    if isinstance(lt, list):
        if len(lt) != n:
            raise KVModelError(f"{source}: layer_types has {len(lt)} entries but "
                               f"num_hidden_layers = {n}")
        kinds: list[LayerKind] = []
        for i, t in enumerate(lt):
            if t in ("full_attention", "attention", "global"):
                kinds.append("full")
            elif t in ("sliding_attention", "sliding_window", "local"):
                kinds.append("sliding")
            elif t in ("linear_attention", "mamba", "gated_deltanet"):
                kinds.append("linear")
            else:
                raise KVModelError(f"{source}: layer_types[{i}] = {t!r} is not modelled "
                                   "(full_attention | sliding_attention | linear_attention)")
        return kinds
    pattern = cfg.get("sliding_window_pattern")
    if isinstance(pattern, int) and pattern > 0 and cfg.get("sliding_window"):
        # Gemma 3 (transformers Gemma3TextConfig): layer i is global when (i + 1) % pattern == 0.
        return ["full" if (i + 1) % pattern == 0 else "sliding" for i in range(n)]
    interval = cfg.get("full_attention_interval")
    if isinstance(interval, int) and interval > 0:
        # Qwen3-Next: layer i is full attention when (i + 1) % interval == 0, else Gated DeltaNet.
        return ["full" if (i + 1) % interval == 0 else "linear" for i in range(n)]
    period, offset = cfg.get("attn_layer_period"), cfg.get("attn_layer_offset")
    if isinstance(period, int) and isinstance(offset, int) and period > 0:
        # Jamba: attention at i % period == offset, Mamba elsewhere.
        return ["full" if i % period == offset else "linear" for i in range(n)]
    if cfg.get("sliding_window") and cfg.get("use_sliding_window", True) \
            and not cfg.get("max_window_layers"):
        return ["sliding"] * n  # Mistral-style: every layer sliding
    return ["full"] * n


def config_from_shape(shape: Any) -> dict[str, Any]:
    """A config.json-like dict from a declared :class:`seat_console.core.profile.ModelShapeSpec`."""
    d = shape.model_dump(exclude_none=True)
    arch = d.pop("architecture", None)
    if arch:
        d["architectures"] = [arch]
    return d


def model_kv(config: Mapping[str, Any], *, tensor_parallel_size: int = 1,
             kv_cache_dtype: str = "auto", source: str = "config.json",
             fp8_checkpoint: bool = False, model_dtype: str | None = None) -> ModelKV:
    """The :class:`ModelKV` of a model at ``tensor_parallel_size`` with ``kv_cache_dtype``.

    ``config`` is ``config.json`` as a dict (a nested ``text_config`` is merged over it), or
    :func:`config_from_shape` of a declared shape. ``model_dtype``: the *served* dtype
    (:func:`seat_console.fit.dtype.resolve_served_dtype`: a float32 checkpoint is served in
    bfloat16 on CUDA under ``dtype auto``); ``None`` falls back to the config's
    ``torch_dtype``/``dtype`` (default bfloat16). ``kv_cache_dtype``: ``auto`` (= the served
    model dtype, vLLM ``kv_cache_dtype_str_to_dtype``), ``bfloat16``/``float16``/``float32``, or
    ``fp8``/``fp8_e4m3``/``fp8_e5m2`` (1 byte).
    ``fp8_checkpoint``: the weights are FP8-quantized (vLLM refuses ``fp8_e5m2`` KV then).
    Raises :class:`KVModelError` for a missing or invalid key, or KV heads that TP cannot place
    (neither divides the other: vLLM's QKVParallelLinear refuses).
    """
    if tensor_parallel_size < 1:
        raise KVModelError(f"tensor_parallel_size must be >= 1 (got {tensor_parallel_size})")
    cfg = _text_config(config)
    arch_list = config.get("architectures") or cfg.get("architectures")
    arch = arch_list[0] if isinstance(arch_list, list) and arch_list else None
    if not isinstance(arch, str):
        arch = None
    n_layers = _int(cfg, "num_hidden_layers", source, maximum=MAX_LAYERS)
    n_heads = _int(cfg, "num_attention_heads", source)
    if n_heads == 0:
        raise KVModelError(f"{source}: num_attention_heads is 0")
    if n_heads % tensor_parallel_size:
        # vllm/config/parallel.py ParallelConfig / ModelConfig.verify_with_parallel_config:
        # "Total number of attention heads must be divisible by tensor parallel size."
        raise LayoutRefused(f"{source}: num_attention_heads {n_heads} is not divisible by "
                           f"tensor_parallel_size {tensor_parallel_size}; vLLM refuses to start "
                           "(use a TP size that divides it)")
    model_dtype = str(model_dtype or cfg.get("torch_dtype") or cfg.get("dtype") or "bfloat16")
    if model_dtype not in DTYPE_BYTES:
        raise KVModelError(f"{source}: torch_dtype {model_dtype!r} not known "
                           "(bfloat16 | float16 | float32)")
    if kv_cache_dtype == "auto":
        kv_bytes = DTYPE_BYTES[model_dtype]
    elif kv_cache_dtype in DTYPE_BYTES:
        kv_bytes = DTYPE_BYTES[kv_cache_dtype]
    else:
        raise KVModelError(f"kv_cache_dtype {kv_cache_dtype!r} not modelled "
                           "(auto | fp8 | fp8_e4m3 | fp8_e5m2 | bfloat16 | float16 | float32)")
    tp = tensor_parallel_size
    notes: list[str] = []
    fp8_ok: bool | None = True
    is_fp8 = kv_cache_dtype.startswith("fp8")

    mla = cfg.get("kv_lora_rank") not in (None, 0)
    if mla:
        kv_lora = _int(cfg, "kv_lora_rank", source)
        rope = _int(cfg, "qk_rope_head_dim", source)
        total_kv, per_rank, replicas = 1, 1, tp
        head, head_v = kv_lora + rope, 0
        per_token = head * kv_bytes
        attention: Literal["mha", "gqa", "mqa", "mla", "none"] = "mla"
        notes.append(f"MLA: one latent 'head' of kv_lora_rank {kv_lora} + qk_rope_head_dim {rope}"
                     f" = {head} per token per layer, the same on every TP rank (not split)")
        if is_fp8:
            notes.append("MLA fp8 KV needs an MLA backend that supports it (FlashMLA / CUTLASS "
                         "MLA; Triton MLA needs SM89+); sparse MLA's fp8_ds_mla packs 656 B/token")
            fp8_ok = None
    else:
        kv_given = _opt_positive(cfg, "num_key_value_heads", source)
        total_kv = n_heads if kv_given is None else kv_given
        head_given = _opt_positive(cfg, "head_dim", source)
        if head_given is not None:
            head = head_given
        else:
            hidden = cfg.get("hidden_size")
            if not isinstance(hidden, int) or isinstance(hidden, bool) or hidden < n_heads:
                raise KVModelError(f"{source}: needs head_dim, or hidden_size (an integer of at "
                                   "least num_attention_heads) to derive it")
            head = _int(cfg, "hidden_size", source) // n_heads
        head_v = head
        if total_kv >= tp and total_kv % tp:
            raise KVModelError(f"{source}: {total_kv} KV heads cannot be split over "
                               f"tensor_parallel_size {tp} (neither divides the other)")
        if total_kv < tp and tp % total_kv:
            raise KVModelError(f"{source}: {total_kv} KV heads cannot be replicated over "
                               f"tensor_parallel_size {tp} (TP must be a multiple)")
        per_rank = max(1, total_kv // tp)
        replicas = max(1, tp // total_kv)
        per_token = per_rank * (head + head_v) * kv_bytes
        attention = "mha" if total_kv == n_heads else ("mqa" if total_kv == 1 else "gqa")
        if replicas > 1:
            notes.append(f"{total_kv} KV heads < TP {tp}: each KV head is replicated on {replicas}"
                         " ranks (1 KV head per rank)")
        if is_fp8 and cfg.get("alibi"):
            notes.append("ALiBi: FlashAttention falls back to FA2, which has no fp8 KV cache "
                         "(vllm/v1/attention/backends/fa_utils.py); another backend must serve it")
            fp8_ok = None
        if is_fp8 and head > 256 and head != 512:
            notes.append(f"head_dim {head} > 256: on SM90 FlashAttention switches to FA4, which "
                         "supports fp8 KV only for head_dim 512 (fa_utils.py)")
            fp8_ok = None
    if kv_cache_dtype == "fp8_e5m2":
        notes.append("fp8_e5m2: FlashAttention does not support it (fa_utils.py)")
        fp8_ok = None
        if fp8_checkpoint:
            notes.append("vLLM refuses fp8_e5m2 KV with an FP8-quantized checkpoint "
                         "(vllm/model_executor/layers/attention/attention.py)")
            fp8_ok = False

    kinds = _layer_kinds(cfg, n_layers, source)
    window = cfg.get("sliding_window")
    if "sliding" in kinds and not (isinstance(window, int) and not isinstance(window, bool)
                                   and 0 < window <= MAX_CONFIG_INT):
        raise KVModelError(f"{source}: sliding layers need a positive integer sliding_window")
    shared = cfg.get("num_kv_shared_layers") or 0
    if shared:
        if not isinstance(shared, int) or isinstance(shared, bool) or shared >= n_layers:
            raise KVModelError(f"{source}: num_kv_shared_layers must be < num_hidden_layers")
        notes.append(f"the last {shared} layers reuse earlier layers' KV cache "
                     "(num_kv_shared_layers): no cache of their own")

    state = 0
    if "linear" in kinds:
        state = _linear_state_bytes(cfg, tp, model_dtype, source)
        notes.append(f"{kinds.count('linear')} linear-attention/Mamba layers keep a fixed state "
                     f"of {state:,} B per sequence per rank instead of per-token KV")
        if is_fp8:
            notes.append("the linear-attention/Mamba state is not quantized by kv_cache_dtype "
                         "(mamba_cache_dtype stays auto = the model dtype)")
    if all(k == "linear" for k in kinds):
        attention = "none"
        if is_fp8:
            fp8_ok = False
            notes.append("no attention layers: an fp8 KV cache has nothing to quantize")

    layers: list[LayerKV] = []
    for i, k in enumerate(kinds):
        if shared and i >= n_layers - shared:
            layers.append(LayerKV(index=i, kind="shared"))
        elif k == "linear":
            layers.append(LayerKV(index=i, kind="linear", state_bytes=state))
        elif k == "sliding":
            layers.append(LayerKV(index=i, kind="sliding", bytes_per_token=per_token,
                                  sliding_window=int(window)))
        else:
            layers.append(LayerKV(index=i, kind="mla" if mla else "full",
                                  bytes_per_token=per_token))
    return ModelKV(source=source, architecture=arch, tensor_parallel_size=tp,
                   model_dtype=model_dtype, kv_cache_dtype=kv_cache_dtype,
                   kv_dtype_bytes=kv_bytes, attention=attention, num_attention_heads=n_heads,
                   total_kv_heads=total_kv, kv_heads_per_rank=per_rank,
                   kv_head_replicas=replicas, head_dim=head, head_dim_v=head_v, layers=layers,
                   fp8_kv_supported=fp8_ok, notes=notes)


def _linear_state_bytes(cfg: Mapping[str, Any], tp: int, model_dtype: str, source: str) -> int:
    """Per-rank state of one linear-attention layer for one sequence, in bytes.

    Gated DeltaNet (Qwen3-Next; ``mamba_utils.py`` ``gated_delta_net_state_shape``):
    conv (conv_dim / TP, kernel − 1) with conv_dim = 2 × k_heads × k_dim + v_heads × v_dim, plus
    temporal (v_heads / TP, v_dim, k_dim). Mamba-1 (Jamba; ``mamba1_state_shape``): conv
    (intermediate / TP, d_conv − 1) and temporal (intermediate / TP, d_state), intermediate =
    mamba_expand × hidden_size. Both in the model dtype (``mamba_cache_dtype`` /
    ``mamba_ssm_cache_dtype`` auto), no speculative decoding.
    """
    el = DTYPE_BYTES[model_dtype]
    if cfg.get("linear_num_value_heads"):
        kh = _int(cfg, "linear_num_key_heads", source)
        vh = _int(cfg, "linear_num_value_heads", source)
        kd = _int(cfg, "linear_key_head_dim", source)
        vd = _int(cfg, "linear_value_head_dim", source)
        kern = _int(cfg, "linear_conv_kernel_dim", source)
        if kern < 1:
            raise KVModelError(f"{source}: linear_conv_kernel_dim must be at least 1 (got {kern});"
                               " a 0-wide convolution would give a negative state size")
        conv_dim = kd * kh * 2 + vd * vh
        if conv_dim % tp or vh % tp:
            raise KVModelError(f"{source}: linear-attention dims do not divide by TP {tp}")
        return (conv_dim // tp * (kern - 1) + vh // tp * vd * kd) * el
    if cfg.get("mamba_d_state"):
        hidden = _int(cfg, "hidden_size", source)
        expand = cfg.get("mamba_expand", 2)
        if not isinstance(expand, int) or isinstance(expand, bool) or not 1 <= expand <= 64:
            raise KVModelError(f"{source}: mamba_expand must be an integer from 1 to 64")
        inter = expand * hidden
        d_conv = _int(cfg, "mamba_d_conv", source)
        if d_conv < 1:
            raise KVModelError(f"{source}: mamba_d_conv must be at least 1 (got {d_conv}); a "
                               "0-wide convolution would give a negative state size")
        d_state = _int(cfg, "mamba_d_state", source)
        if inter % tp:
            raise KVModelError(f"{source}: Mamba intermediate size {inter} does not divide by TP")
        return (inter // tp * (d_conv - 1) + inter // tp * d_state) * el
    raise KVModelError(f"{source}: linear-attention layers need linear_num_key_heads, "
                       "linear_num_value_heads, linear_key_head_dim, linear_value_head_dim and "
                       "linear_conv_kernel_dim (Gated DeltaNet) or mamba_d_state, mamba_d_conv, "
                       "mamba_expand and hidden_size (Mamba)")


class EngineKVParams(Frozen):
    """The engine settings that shape vLLM's block arithmetic.

    ``block_size``: tokens per KV block (vLLM ``--block-size``; CUDA default 16, MLA backends
    use 64/128). ``hybrid_kv_cache_manager``: True on GPUs; vLLM's CPU backend disables it, so
    sliding layers are then allocated as full attention (``vllm/config/vllm.py``).
    ``max_num_batched_tokens`` × ``max_concurrent_batches`` = tokens in flight that a sliding
    layer keeps beyond its window (``VllmConfig.max_in_flight_tokens``; H200 API-server
    defaults: 8192 × 2 with async scheduling). ``mamba_cache_mode``: ``align`` with prefix
    caching (2 state pages per request), ``none`` without (1). ``kernel_block_alignment``: the
    attention backend's smallest kernel block (16 for FlashAttention), used to size the
    attention block of hybrid attention + Mamba models.
    """

    max_model_len: int = Field(ge=1)
    block_size: int = Field(default=16, ge=1)
    hybrid_kv_cache_manager: bool = True
    max_num_batched_tokens: int = Field(default=8192, ge=1)
    max_concurrent_batches: int = Field(default=2, ge=1)
    mamba_cache_mode: Literal["none", "align"] = "align"
    kernel_block_alignment: int = Field(default=16, ge=1)
    num_speculative_tokens: int = Field(default=0, ge=0)


class KVGroup(Frozen):
    """One KV cache group: its layer kind, the real layers in it (``layers``) out of
    ``slots`` (= group size; the rest is padding), tokens per block, page bytes per layer, and
    blocks one request at max_model_len takes from the shared pool."""

    kind: LayerKind
    layers: int
    slots: int
    block_size: int
    page_bytes: int
    blocks_per_request: int
    sliding_window: int | None = None


class KVCapacity(Frozen):
    """KV cache capacity of a byte budget, as vLLM computes it.

    ``num_blocks`` = ``kv_bytes`` // ``bytes_per_block``; ``max_concurrency`` = num_blocks /
    ``blocks_per_request`` (requests of ``max_model_len`` tokens); ``kv_tokens`` =
    int(max_concurrency × max_model_len) — the "KV cache size: N tokens" of vLLM's log.
    ``fits_one_request``: vLLM starts only if one request at max_model_len fits in the pool
    less the null block (``min_kv_bytes`` is the smallest budget that does).
    """

    kv_bytes: int
    max_model_len: int
    block_size: int
    groups: list[KVGroup]
    bytes_per_block: int
    num_blocks: int
    blocks_per_request: int
    max_concurrency: float
    kv_tokens: int
    bytes_per_request: int
    min_kv_bytes: int
    fits_one_request: bool
    notes: list[str] = Field(default_factory=list)

    def log_line(self, device: str = "GPU") -> str:
        """vLLM's start-up line for these figures (``update_kv_cache_capacity``)."""
        return (f"{device} KV cache size: {self.kv_tokens:,} tokens, Maximum concurrency for "
                f"{self.max_model_len:,} tokens per request: {self.max_concurrency:.2f}x")


def _blocks_per_request(kind: LayerKind, block_size: int, window: int | None,
                        p: EngineKVParams) -> int:
    if kind in ("full", "mla"):
        return _cdiv(p.max_model_len, block_size)
    if kind == "sliding":
        assert window is not None
        in_flight = p.max_concurrent_batches * p.max_num_batched_tokens
        return _cdiv(min(window - 1 + in_flight, p.max_model_len), block_size) + 1
    if kind == "linear":
        return (2 if p.mamba_cache_mode == "align" else 1) + p.num_speculative_tokens
    raise ValueError(kind)


def kv_capacity(model: ModelKV, kv_bytes: int, params: EngineKVParams) -> KVCapacity:
    """Capacity of ``kv_bytes`` (per rank) for ``model`` under ``params``, as vLLM computes it.

    Follows ``get_kv_cache_groups`` → ``get_kv_cache_config_from_groups`` →
    ``get_kv_cache_capacity`` in ``vllm/v1/core/kv_cache_utils.py`` (see the module docstring).
    A negative ``kv_bytes`` counts as 0. Raises :class:`KVModelError` for a model with no layer
    that keeps a cache, a cache layer of 0 bytes per token (or a 0-byte state), or a hybrid layout vLLM cannot group (different attention page sizes
    that do not divide each other).
    """
    notes: list[str] = []
    specs = [la for la in model.layers if la.kind != "shared"]
    if not specs:
        raise KVModelError("the model has no layer with a KV cache of its own")
    empty = [la.index for la in specs
             if (la.state_bytes if la.kind == "linear" else la.bytes_per_token) <= 0]
    if empty:
        # a config that sizes a cache layer at 0 bytes (a 0 state dimension, head_dim 0…):
        # vLLM would divide by its page size too (division by zero here, issue #22)
        raise KVModelError(f"{model.source}: {len(empty)} cache layer(s) hold 0 bytes (first: "
                           f"layer {empty[0]}, {next(la.kind for la in specs if la.index == empty[0])}"
                           "); a config field that sizes the KV cache or the state is 0")
    has_linear = any(la.kind == "linear" for la in specs)
    if not params.hybrid_kv_cache_manager:
        if has_linear:
            raise KVModelError("hybrid attention + linear/Mamba models need vLLM's hybrid KV "
                               "cache manager (not available on this platform)")
        if any(la.kind == "sliding" for la in specs) and any(la.kind != "sliding"
                                                             for la in specs):
            notes.append("hybrid KV cache manager off: sliding-window layers are allocated as "
                         "full attention (unify_hybrid_kv_cache_specs)")
            specs = [la.model_copy(update={"kind": "full", "sliding_window": None})
                     if la.kind == "sliding" else la for la in specs]

    # Attention block size (vllm/platforms/interface.py _align_hybrid_block_size).
    bs = params.block_size
    attn = [la for la in specs if la.kind != "linear"]
    pad_state_to: int | None = None
    if has_linear and attn:
        per_tok = attn[0].bytes_per_token
        state = max(la.state_bytes for la in specs if la.kind == "linear")
        align = max(params.kernel_block_alignment, bs)
        attn_bs = align * _cdiv(state, align * per_tok)
        attn_bs = params.kernel_block_alignment * _cdiv(attn_bs, params.kernel_block_alignment)
        if bs < attn_bs:
            notes.append(f"attention block size raised to {attn_bs} tokens so a page holds a "
                         f"{state:,} B linear-attention state")
            bs = attn_bs
        pad_state_to = bs * per_tok

    # (kind, window, block_size, page) per layer.
    entries: list[tuple[LayerKind, int | None, int, int]] = []
    for la in specs:
        if la.kind == "linear":
            page = pad_state_to if pad_state_to is not None else la.state_bytes
            entries.append(("linear", None, bs, page))
        else:
            entries.append((la.kind, la.sliding_window, bs, bs * la.bytes_per_token))

    def group_kind_key(e: tuple[LayerKind, int | None, int, int]) -> tuple[str, int | None]:
        # The "type" of vLLM's UniformTypeKVCacheSpecs: full & MLA share the full base spec.
        kind = "full" if e[0] in ("full", "mla") else e[0]
        return kind, e[1]

    type_keys = {group_kind_key(e) for e in entries}
    groups: list[KVGroup] = []
    if len(type_keys) == 1:
        # One group (is_kv_cache_spec_uniform / UniformTypeKVCacheSpecs): pages summed.
        k, w, b, _ = entries[0]
        pages = [e[3] for e in entries]
        bpr = max(_blocks_per_request(e[0], e[2], e[1], params) for e in entries)
        groups.append(KVGroup(kind=k, layers=len(entries), slots=len(entries), block_size=b,
                              page_bytes=pages[0] if len(set(pages)) == 1 else 0,
                              blocks_per_request=bpr, sliding_window=w))
        bytes_per_block = sum(pages)
    else:
        # unify_kv_cache_spec_page_size: smaller attention pages grow their block size.
        max_page = max(e[3] for e in entries)
        unified: list[tuple[LayerKind, int | None, int, int]] = []
        for k, w, b, page in entries:
            if page == max_page:
                unified.append((k, w, b, page))
            elif k == "linear":
                unified.append((k, w, b, max_page))
            elif max_page % page == 0:
                unified.append((k, w, b * (max_page // page), max_page))
            else:
                raise KVModelError(f"attention page sizes {page:,} and {max_page:,} B do not "
                                   "divide; vLLM pads such pages — not modelled here")
        # _get_kv_cache_groups_uniform_page_size: buckets of equal specs, equal-size groups.
        buckets: dict[tuple[LayerKind, int | None, int], int] = {}
        for k, w, b, _ in unified:
            buckets[(k, w, b)] = buckets.get((k, w, b), 0) + 1
        sizes = list(buckets.values())
        group_size = min(sizes)
        if max(sizes) < group_size * 1.5:
            group_size = max(sizes)
        for (k, w, b), n in buckets.items():
            n_groups = _cdiv(n, group_size)
            bpr = _blocks_per_request(k, b, w, params)
            for gi in range(n_groups):
                real = len(range(gi, n, n_groups))
                groups.append(KVGroup(kind=k, layers=real, slots=group_size, block_size=b,
                                      page_bytes=max_page, blocks_per_request=bpr,
                                      sliding_window=w))
            if n % group_size:
                notes.append(f"{group_size - n % group_size} padding layer slot(s) in the "
                             f"{k} groups (vLLM: 'Add N padding layers')")
        bytes_per_block = group_size * max_page
        bs = min(g.block_size for g in groups)

    blocks_per_request = sum(g.blocks_per_request for g in groups)
    avail = max(0, kv_bytes)
    num_blocks = avail // bytes_per_block
    concurrency = num_blocks / blocks_per_request
    tokens = int(concurrency * params.max_model_len)
    needed = bytes_per_block * blocks_per_request
    fits = avail - bytes_per_block > 0 and needed <= avail - bytes_per_block
    return KVCapacity(kv_bytes=kv_bytes, max_model_len=params.max_model_len, block_size=bs,
                      groups=groups, bytes_per_block=bytes_per_block, num_blocks=num_blocks,
                      blocks_per_request=blocks_per_request, max_concurrency=concurrency,
                      kv_tokens=tokens, bytes_per_request=needed,
                      min_kv_bytes=needed + bytes_per_block, fits_one_request=fits, notes=notes)


def max_model_len_for(model: ModelKV, kv_bytes: int, params: EngineKVParams) -> int:
    """The largest max_model_len (multiple of the block size) whose single request fits in
    ``kv_bytes`` (vLLM's "estimated maximum model length" hint); 0 if none. Binary search over
    :func:`kv_capacity`."""
    lo, hi = 0, params.max_model_len
    step = params.block_size
    if kv_capacity(model, kv_bytes, params).fits_one_request:
        return params.max_model_len
    while hi - lo > step:
        mid = (lo + hi) // 2 // step * step
        if mid <= lo:
            break
        if kv_capacity(model, kv_bytes, params.model_copy(
                update={"max_model_len": mid})).fits_one_request:
            lo = mid
        else:
            hi = mid
    return lo


__all__ = [
    "DTYPE_BYTES", "EngineKVParams", "KVCapacity", "KVGroup", "KVModelError", "LayerKV",
    "LayerKind", "ModelKV", "config_from_shape", "kv_capacity", "max_model_len_for", "model_kv",
]

