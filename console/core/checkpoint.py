"""What a checkpoint scan found, as frozen models (the shapes only): the summary the fit budgets
from and the checkpoint panel shows. The scan itself (reading safetensors headers, the config,
the index) is :func:`seat_console.sources.checkpoint.scan_checkpoint`; the models live here so
that the pure fit arithmetic (:mod:`seat_console.fit`) needs no source. No I/O.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from seat_console.core.base import Frozen


DEFAULT_PLE_PATTERN = r"(^|\.)(embed_tokens_per_layer|per_layer_embed\w*)(\.|$)"
"""Default PLE-table tensor-name pattern (Gemma 3n: ``…embed_tokens_per_layer.weight``); the
profile's ``ple_tensor_pattern`` overrides it."""


Role = Literal["ple", "embed_lm_head", "routed_experts", "other"]
"""What a tensor is for, by name: the PLE table; the token embedding or LM head; a routed MoE
expert (``….experts.N.…`` or fused ``….experts.gate_up_proj``; shared experts are "other"); the
rest."""


ROLES: tuple[Role, ...] = ("ple", "embed_lm_head", "routed_experts", "other")


TpClass = Literal["split", "replicated", "vocab", "kv_proj"]
"""How tensor parallelism places a tensor (vLLM's layer classes,
``vllm/model_executor/layers/linear.py`` and ``vocab_parallel_embedding.py``):

* ``split``: Column/Row/QKV/MergedColumnParallelLinear and MoE experts (TP shards each expert):
  each rank holds 1/TP;
* ``replicated``: norms, scalars (per-tensor scales), MoE routers, ReplicatedLinear (MLA's
  ``q_a_proj``/``kv_a_proj_with_mqa``), row-parallel biases: every rank holds all of it;
* ``vocab``: VocabParallelEmbedding / ParallelLMHead (and a PLE table): the vocabulary rows,
  padded to a multiple of 64, are split across ranks;
* ``kv_proj``: separate ``k_proj``/``v_proj``: split across min(TP, KV heads) ranks (KV heads
  are replicated when there are fewer than TP).
"""


ProblemKind = Literal["missing-shard", "tensor-absent", "unlisted-tensor", "total-size",
                      "unreferenced-shard", "duplicate-tensor", "truncated-shard",
                      "config-unreadable", "quant-config-unreadable", "index-unreadable",
                      "quant-disagreement", "tensor-misplaced", "unknown-dtype",
                      "index-ignored"]


class CheckpointProblem(Frozen):
    """Something wrong or worth knowing about a checkpoint. ``severity``: ``error`` (the engine
    would fail to load it, or the sizes cannot be trusted: the fit gives NO VERDICT) or
    ``warning`` (the sizes are counted the way vLLM loads them; the files disagree with each
    other). ``bytes``: the bytes involved (a tensor's, a shard's, a total's difference), ``None``
    when not known."""

    kind: ProblemKind
    severity: Literal["error", "warning"] = "error"
    detail: str
    bytes: int | None = None


class DtypeTotal(Frozen):
    """Bytes and tensor count of one dtype; ``known`` False for a dtype not in the format."""

    dtype: str
    bytes: int
    tensors: int
    known: bool = True


class RoleTotal(Frozen):
    """Bytes and tensor count of one :data:`Role`, with its bytes per dtype."""

    role: Role
    bytes: int = 0
    tensors: int = 0
    by_dtype: dict[str, int] = Field(default_factory=dict)


class VocabTensor(Frozen):
    """A vocabulary-parallel tensor (embedding, LM head, PLE table): ``rows`` = its first
    dimension (the vocabulary), ``bytes`` its whole size as stored; per TP rank it holds
    ``pad64(rows) / TP`` rows of ``bytes / rows`` bytes each. ``elements``: its element count;
    ``castable``: an unquantised floating tensor, which vLLM holds at the served dtype
    (``elements × served size`` bytes) rather than as stored (see :data:`CASTABLE_DTYPES`)."""

    name: str
    role: Role
    rows: int
    bytes: int
    elements: int = 0
    castable: bool = False


class TpSplit(Frozen):
    """Bytes by :data:`TpClass`, excluding the PLE table (placed separately):
    ``split_bytes``, ``replicated_bytes``, ``kv_proj_bytes`` (as stored) and the vocab-parallel
    tensors. ``cast``: for each of ``split`` / ``replicated`` / ``kv_proj``, ``[stored bytes,
    elements]`` of its castable tensors (unquantised floating point, :data:`CASTABLE_DTYPES`),
    so the budget can hold them at the served dtype: served = stored − cast bytes + cast
    elements × served element size."""

    split_bytes: int = 0
    replicated_bytes: int = 0
    kv_proj_bytes: int = 0
    vocab: list[VocabTensor] = Field(default_factory=list)
    ple: list[VocabTensor] = Field(default_factory=list)
    cast: dict[str, list[int]] = Field(default_factory=dict)


class QuantGroup(Frozen):
    """One compressed-tensors ``config_groups`` entry: its targets, format and the weight /
    input-activation quantization args as declared (num_bits, type, strategy, group_size…)."""

    name: str
    targets: list[str] = Field(default_factory=list)
    format: str | None = None
    weights: dict[str, Any] | None = None
    input_activations: dict[str, Any] | None = None


class QuantScheme(Frozen):
    """The quantization scheme exactly as the checkpoint declares it (never inferred).

    ``declared`` False: no quantization config in the files (dtypes are as stored).
    ``source``: ``hf_quant_config.json`` or ``config.json:quantization_config``.
    ``method``: ``modelopt``, ``compressed-tensors``, ``fp8``… (``quant_method``).
    ``quant_algo``: ModelOpt's ``FP8`` / ``NVFP4`` / ``MIXED_PRECISION`` / …;
    ``per_layer``: ModelOpt MIXED_PRECISION ``quantized_layers`` (layer prefix → algo);
    ``groups``: compressed-tensors ``config_groups`` (with ``format`` ``mixed-precision`` each
    group carries its own format); ``exclude``: ``exclude_modules`` / ``ignore``.
    """

    declared: bool = False
    source: str | None = None
    method: str | None = None
    quant_algo: str | None = None
    kv_cache_quant_algo: str | None = None
    kv_cache_scheme: dict[str, Any] | None = None
    group_size: int | None = None
    format: str | None = None
    per_layer: dict[str, str] = Field(default_factory=dict)
    groups: list[QuantGroup] = Field(default_factory=list)
    exclude: list[str] = Field(default_factory=list)
    extra: dict[str, Any] = Field(default_factory=dict)

    @property
    def per_layer_counts(self) -> dict[str, int]:
        """How many layers each algo covers in :attr:`per_layer`."""
        out: dict[str, int] = {}
        for algo in self.per_layer.values():
            out[algo] = out.get(algo, 0) + 1
        return out

    def describe(self) -> str:
        """One line in words, e.g. ``"modelopt NVFP4 (group 16), KV FP8 — hf_quant_config.json"``."""
        if not self.declared:
            return "none declared (weights as stored)"
        parts = [self.method or "unknown method"]
        if self.quant_algo:
            parts.append(self.quant_algo)
        if self.format:
            parts.append(f"format {self.format}")
        if self.group_size:
            parts.append(f"(group {self.group_size})")
        s = " ".join(parts)
        if self.per_layer:
            s += " — per layer: " + ", ".join(f"{a} ×{n}"
                                              for a, n in sorted(self.per_layer_counts.items()))
        if self.groups:
            s += " — groups: " + "; ".join(
                f"{g.name}: {g.format or self.format or '?'} "
                f"w{(g.weights or {}).get('num_bits', '?')}"
                f"{'a' + str(g.input_activations.get('num_bits')) if g.input_activations else ''}"
                for g in self.groups)
        if self.kv_cache_quant_algo:
            s += f", KV {self.kv_cache_quant_algo}"
        return f"{s} — {self.source}"


class ShardSummary(Frozen):
    """One shard file: size on disk, header length, tensors, declared data bytes, and bytes the
    file lacks (truncated copy)."""

    file: str
    file_size: int
    header_len: int
    tensors: int
    data_bytes: int
    missing_bytes: int = 0


class IndexSummary(Frozen):
    """The shard index: path, ``metadata.total_size`` (``None`` if absent), tensors and shards
    it lists."""

    file: str
    total_size: int | None = None
    tensors_listed: int
    shards_listed: int


class CheckpointSummary(Frozen):
    """Everything the fit budget needs from a checkpoint directory (bytes in code).

    ``total_bytes`` sums the tensors counted (those the index lists and that are present, or every
    tensor when there is no index); ``by_dtype`` / ``by_role`` split it; ``tp`` says how tensor
    parallelism places it; ``config`` is ``config.json`` as read (``None`` if absent/unreadable).
    """

    path: str
    scan_duration_s: float
    config: dict[str, Any] | None = None
    config_file: str | None = None
    quantization: QuantScheme = Field(default_factory=QuantScheme)
    shards: list[ShardSummary] = Field(default_factory=list)
    index: IndexSummary | None = None
    problems: list[CheckpointProblem] = Field(default_factory=list)
    total_bytes: int = 0
    tensor_count: int = 0
    by_dtype: list[DtypeTotal] = Field(default_factory=list)
    by_role: list[RoleTotal] = Field(default_factory=list)
    unknown_dtypes: list[str] = Field(default_factory=list)
    ple_pattern: str = DEFAULT_PLE_PATTERN
    tp: TpSplit = Field(default_factory=TpSplit)
    tensors: list[TensorInfo] | None = None

    def role_bytes(self, role: Role) -> int:
        """Bytes of one role (0 if none)."""
        for r in self.by_role:
            if r.role == role:
                return r.bytes
        return 0

    @property
    def ple_bytes(self) -> int:
        """Bytes of the PLE table (the tensors the pattern selected)."""
        return self.role_bytes("ple")

    @property
    def errors(self) -> list[CheckpointProblem]:
        """Problems of severity ``error``."""
        return [p for p in self.problems if p.severity == "error"]


class TensorInfo(Frozen):
    """One tensor as its header declares it: bytes = ``data_offsets`` end − begin."""

    name: str
    shard: str
    dtype: str
    shape: list[int]
    begin: int
    end: int
    role: Role = "other"
    tp: TpClass = "split"

    @property
    def nbytes(self) -> int:
        """``end − begin`` bytes."""
        return self.end - self.begin


__all__ = ["CheckpointProblem", "CheckpointSummary", "DEFAULT_PLE_PATTERN", "DtypeTotal",
           "IndexSummary", "ProblemKind", "QuantGroup", "QuantScheme", "ROLES", "Role",
           "RoleTotal", "ShardSummary", "TensorInfo", "TpClass", "TpSplit", "VocabTensor"]
