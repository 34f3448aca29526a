"""Fit budget: per-card usable memory vs weights + PLE table + KV cache + reserve.

Pure arithmetic, no I/O: every input (profile values, a checkpoint summary, a GPU snapshot, host
memory figures) is passed in, and every result is a frozen model. Bytes in code; the display
helpers print GiB = 2^30 B truncated toward zero (:func:`seat_console.core.fmt.gib`, the one display
rule, re-exported here), always next to exact bytes.

The arithmetic follows vLLM (0.32.0):

* usable ("requested") memory per card = ceil(CUDA-visible total × gpu_memory_utilization)
  (``vllm/v1/worker/utils.py`` ``request_memory``); the CUDA-visible total is NVML total −
  reserved (``MemoryReading.cuda_visible_bytes`` in :mod:`seat_console.sources.gpu`), read live where the card
  is present, else the profile's ``node.declared_cuda_visible_bytes``;
* vLLM refuses to start when a card's free memory is below that figure (same function) — the
  pre-flight line;
* KV cache bytes = requested − (weights + PLE on the GPU + activation / CUDA-graph reserve)
  (``vllm/v1/worker/gpu_worker.py`` ``determine_available_memory``: requested − non-KV memory);
  the reserve is the profile's explicit ``seat.activation_reserve_bytes`` because vLLM measures
  the real peak only at start-up;
* on the CPU backend (``seat.device`` cpu / cpu-ppc64le) the KV cache is NOT requested −
  non-KV memory: ``vllm/platforms/cpu.py`` ``CpuPlatform.check_and_update_config`` sets
  ``cache_config.kv_cache_memory_bytes = int(VLLM_CPU_KVCACHE_SPACE) × 2^30`` when the variable
  is set and not empty, and ``vllm/v1/worker/cpu_worker.py`` ``CPUWorker.
  determine_available_memory`` returns that explicit size as the KV budget (refusing to start
  when the NUMA node's available memory is below it). Unset, the worker takes
  ceil(node total × gpu_memory_utilization) − its RSS after a warm-up pass, which cannot be
  predicted before start: the budget then says KV n/a (:func:`cpu_kv_space`);
* KV tokens and maximum concurrency: :func:`seat_console.fit.kvcache.kv_capacity`; the log
  line's device word is vLLM's ``_kv_cache_device_name`` (``vllm/v1/core/kv_cache_utils.py``:
  "GPU" for cuda, else the device type upper-cased — "CPU"; :func:`kv_log_device`);
* weights per TP rank: :class:`seat_console.core.checkpoint.TpClass` — split tensors / TP, replicated
  tensors on every rank, vocabulary-parallel tensors as pad64(rows) / TP rows
  (``vllm/model_executor/layers/vocab_parallel_embedding.py``: ``pad_vocab_size`` to
  ``DEFAULT_VOCAB_PADDING_SIZE`` = 64, then ``divide(num_embeddings_padded, tp_size)``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any, Literal

from pydantic import Field, field_serializer

from seat_console.core.checkpoint import CheckpointSummary, VocabTensor
from seat_console.fit.kvcache import (
    EngineKVParams,
    KVCapacity,
    KVModelError,
    LayoutRefused,
    ModelKV,
    kv_capacity,
    max_model_len_for,
    model_kv,
)
from seat_console.fit.dtype import (
    DtypeError,
    ServedDtype,
    check_max_model_len,
    config_dtype,
    derived_max_model_len,
    resolve_kv_cache_dtype,
    resolve_served_dtype,
)
from seat_console.fit.engine_rules import (
    KV_FLAG,
    RULES,
    EngineVersion,
    accounting,
    kv_flag_bytes,
    rule_for,
    unsupported_words,
)
from seat_console.fit.engine_rules import kv_bytes as rule_kv_bytes
from seat_console.fit.engine_rules import requested as rule_requested
from seat_console.core.fmt import GIB, gib, gib_b  # the one GiB display rule (re-exported)
from seat_console.core.base import Frozen

VOCAB_PADDING = 64
"""vLLM's ``DEFAULT_VOCAB_PADDING_SIZE`` (vocab_parallel_embedding.py)."""

UTILISATION_RISK = 0.95
"""Above this gpu_memory_utilization the budget warns: the CUDA context, NCCL buffers and
allocator fragmentation live outside vLLM's requested memory and need the rest of the card."""

Placement = Literal["gpu-replicated", "gpu-sharded", "host"]


def pad_vocab(rows: int, pad_to: int = VOCAB_PADDING) -> int:
    """vLLM's ``pad_vocab_size``: rows rounded up to a multiple of ``pad_to``."""
    return -(-rows // pad_to) * pad_to


def vocab_rows_per_rank(rows: int, tp: int) -> int:
    """Vocabulary rows one TP rank holds: pad64(rows) / TP (rounded up when TP does not divide
    it; vLLM asserts it divides)."""
    return -(-pad_vocab(rows) // tp)


def served_tensor_bytes(t: VocabTensor, element_bytes: int | None = None) -> int:
    """Bytes of a whole tensor as vLLM holds it: ``elements × element_bytes`` for a castable
    (unquantised floating) tensor when the served element size is given, else as stored."""
    if element_bytes and t.castable and t.elements:
        return t.elements * element_bytes
    return t.bytes


def vocab_bytes_per_rank(t: VocabTensor, tp: int, element_bytes: int | None = None) -> int:
    """Bytes of a vocabulary-parallel tensor on one rank: rows per rank × bytes per row (a
    castable tensor's row at ``element_bytes`` per element when given, see
    :func:`served_tensor_bytes`)."""
    whole = served_tensor_bytes(t, element_bytes)
    if t.rows <= 0:
        return whole
    row = whole // t.rows
    return vocab_rows_per_rank(t.rows, tp) * row


def requests_at_once(concurrency: float) -> str:
    """A KV pool's maximum concurrency (requests of the full context at once; vLLM's
    "Maximum concurrency …: 1.33x", a ratio) as a count of requests: the whole requests that fit
    (floor, a count is an integer), with the ratio beside it when it is not whole —
    ``"2,048 requests"``, ``"1 request (1.33×)"``, ``"0 requests (0.50×)"``."""
    whole = math.floor(concurrency) if math.isfinite(concurrency) else None
    if whole is None:
        return "an unknown number of requests"
    text = f"{whole:,} request{'' if whole == 1 else 's'}"
    return text if whole == concurrency else f"{text} ({concurrency:.2f}×)"


class Footprint(Frozen):
    """What a checkpoint puts on the GPUs, scanned from files or declared in the profile.

    Scanned (``source="scanned"``): the :class:`seat_console.core.checkpoint.TpSplit` figures and
    ``total_kv_heads`` (to place ``k_proj``/``v_proj``). Declared: ``declared_weights_per_rank``
    at ``declared_tp`` (excluding the PLE table) and ``declared_ple_bytes``.
    ``kv_config`` is the config.json-like dict the KV model reads (``None``: unknown shape) and
    ``kv_config_source`` says where it came from. ``name_note``: why ``name`` is not the
    profile's (``--checkpoint`` / ``--candidate`` replaced the path: the side is named after the
    directory), else ``None``.
    """

    name: str
    source: Literal["scanned", "declared"]
    path: str | None = None
    name_note: str | None = None
    split_bytes: int = 0
    replicated_bytes: int = 0
    kv_proj_bytes: int = 0
    vocab: list[VocabTensor] = Field(default_factory=list)
    ple: list[VocabTensor] = Field(default_factory=list)
    total_kv_heads: int | None = None
    declared_weights_per_rank: int | None = None
    declared_tp: int | None = None
    declared_ple_bytes: int | None = None
    kv_config: dict[str, Any] | None = None
    kv_config_source: str | None = None
    fp8_checkpoint: bool = False
    quantization: str | None = None
    has_routed_experts: bool = False
    cast: dict[str, list[int]] = Field(default_factory=dict)
    config_dtype: str | None = None
    config_dtype_source: str | None = None
    model_type: str | None = None
    quantization_config: dict[str, Any] | None = None

    @property
    def ple_bytes(self) -> int:
        """The whole PLE table in bytes as stored (0 when the model has none)."""
        if self.source == "declared":
            return self.declared_ple_bytes or 0
        return sum(t.bytes for t in self.ple)

    def ple_served_bytes(self, element_bytes: int | None = None) -> int:
        """The whole PLE table as vLLM holds it (castable tensors at ``element_bytes`` per
        element; declared sizes as declared)."""
        if self.source == "declared" or not element_bytes:
            return self.ple_bytes
        return sum(served_tensor_bytes(t, element_bytes) for t in self.ple)

    def _served(self, cls: str, stored: int, element_bytes: int | None) -> int:
        c = self.cast.get(cls)
        if not element_bytes or not c:
            return stored
        return stored - c[0] + c[1] * element_bytes

    def weights_per_rank(self, tp: int, element_bytes: int | None = None
                         ) -> tuple[int, list[str]]:
        """Weights (excluding the PLE table) on one TP rank in bytes, and notes on how they
        were split.

        Scanned: ceil(split / TP) + replicated + ceil(kv_proj / min(TP, KV heads)) + Σ vocab
        tensors per rank, each class at the served dtype when ``element_bytes`` (the served
        dtype's element size, :class:`seat_console.fit.dtype.ServedDtype`) is given: castable
        tensors (:data:`seat_console.sources.checkpoint.CASTABLE_DTYPES`) count elements ×
        ``element_bytes``, quantised tensors their stored bytes. Declared: the declared figure
        at its TP, rescaled by declared_tp / TP for another TP (an approximation: treats
        everything as split); declared sizes are taken as served.
        """
        notes: list[str] = []
        if self.source == "declared":
            if self.declared_weights_per_rank is None:
                raise ValueError(f"{self.name}: no declared weights_bytes_per_rank")
            base_tp = self.declared_tp or tp
            if tp == base_tp:
                return self.declared_weights_per_rank, notes
            notes.append(f"declared weights per rank at TP {base_tp} rescaled to TP {tp} "
                         "(approximation: assumes every tensor splits)")
            return -(-self.declared_weights_per_rank * base_tp // tp), notes
        kv_split = min(tp, self.total_kv_heads) if self.total_kv_heads else tp
        eb = element_bytes
        vocab = sum(vocab_bytes_per_rank(t, tp, eb) for t in self.vocab)
        total = (-(-self._served("split", self.split_bytes, eb) // tp)
                 + self._served("replicated", self.replicated_bytes, eb)
                 + -(-self._served("kv_proj", self.kv_proj_bytes, eb) // kv_split) + vocab)
        if self.total_kv_heads and self.total_kv_heads < tp and self.kv_proj_bytes:
            notes.append(f"k_proj/v_proj split over {kv_split} ranks ({self.total_kv_heads} KV "
                         f"heads < TP {tp}: replicated)")
        if self.has_routed_experts:
            notes.append("routed experts split by TP (vLLM's default without expert parallel)")
        return total, notes

    def ple_per_rank(self, placement: Placement, tp: int,
                     element_bytes: int | None = None) -> tuple[int, list[str]]:
        """PLE table bytes on one TP rank's GPU for ``placement``, with notes (castable
        tensors at ``element_bytes`` per element when given)."""
        whole = self.ple_served_bytes(element_bytes)
        if whole == 0 or placement == "host":
            return 0, []
        if placement == "gpu-replicated":
            return whole, []
        if self.source == "declared" or not any(t.rows for t in self.ple):
            note = "PLE sharded as bytes / TP (rows unknown: no vocabulary padding applied)"
            return -(-whole // tp), [note]
        return sum(vocab_bytes_per_rank(t, tp, element_bytes) for t in self.ple), [
            "PLE sharded by vocabulary: pad64(rows) / TP rows per rank"]


def footprint_from_summary(name: str, summary: CheckpointSummary, *,
                           name_note: str | None = None) -> Footprint:
    """A scanned :class:`Footprint` from a :class:`seat_console.core.checkpoint.CheckpointSummary`
    (``name_note``: see :class:`Footprint`)."""
    cfg = summary.config or {}
    text = cfg.get("text_config") if isinstance(cfg.get("text_config"), dict) else cfg
    kv_heads = text.get("num_key_value_heads") or text.get("num_attention_heads")
    q = summary.quantization
    fp8 = bool(q.declared and ((q.quant_algo or "").startswith("FP8")
                               or q.method == "fp8"
                               or "FP8" in q.per_layer_counts))
    cdt, csrc = config_dtype(summary.config, {d.dtype: d.bytes for d in summary.by_dtype})
    qc = cfg.get("quantization_config")
    mt = text.get("model_type") or cfg.get("model_type")
    return Footprint(
        cast=summary.tp.cast, config_dtype=cdt, config_dtype_source=csrc,
        model_type=mt if isinstance(mt, str) else None,
        quantization_config=qc if isinstance(qc, dict) else None,
        name=name, source="scanned", path=summary.path, name_note=name_note,
        split_bytes=summary.tp.split_bytes,
        replicated_bytes=summary.tp.replicated_bytes, kv_proj_bytes=summary.tp.kv_proj_bytes,
        vocab=summary.tp.vocab, ple=summary.tp.ple,
        total_kv_heads=kv_heads if isinstance(kv_heads, int) else None,
        kv_config=summary.config, kv_config_source=summary.config_file,
        fp8_checkpoint=fp8, quantization=q.describe(),
        has_routed_experts=summary.role_bytes("routed_experts") > 0)


def footprint_declared(name: str, weights_per_rank: int | None, tp: int, ple_bytes: int | None,
                       kv_config: Mapping[str, Any] | None,
                       kv_config_source: str | None) -> Footprint:
    """A declared :class:`Footprint` (sizes from the profile). ``kv_config_source`` names the
    model shape (a ``config_json`` path, or ``"<role>.model_shape (declared)"``); the model
    dtype's provenance says that, never a checkpoint's config.json."""
    if kv_config_source is None:
        origin = "model shape in the profile"
    elif kv_config_source.endswith(" (declared)"):
        origin = kv_config_source.removesuffix(" (declared)") + " (declared in the profile)"
    else:
        origin = f"{kv_config_source} (the profile's config_json)"
    cdt, csrc = config_dtype(kv_config, origin=origin)
    return Footprint(name=name, source="declared", declared_weights_per_rank=weights_per_rank,
                     config_dtype=cdt, config_dtype_source=csrc,
                     declared_tp=tp, declared_ple_bytes=ple_bytes,
                     kv_config=dict(kv_config) if kv_config is not None else None,
                     kv_config_source=kv_config_source)


class SeatParams(Frozen):
    """The engine settings the budget uses (the profile's ``[seat]`` plus the checkpoint's PLE
    placement); the what-if controls change these. ``dtype``: vLLM ``--dtype`` (auto |
    bfloat16 | float16 | float32); ``device``: the :data:`seat_console.fit.dtype.Platform` the
    seat runs on (cuda | cuda-no-bf16 | cpu | cpu-ppc64le), which decides what ``auto``
    resolves to; ``kv_cache_dtype``: vLLM ``--kv-cache-dtype``."""

    tensor_parallel_size: int = Field(ge=1)
    gpu_memory_utilization: float = Field(gt=0, le=1)
    max_model_len: int = Field(ge=1)
    max_num_seqs: int = Field(ge=1)
    kv_cache_dtype: str = "auto"
    dtype: str = "auto"
    device: str = "cuda"
    block_size: int = Field(default=16, ge=1)
    activation_reserve_bytes: int = Field(default=0, ge=0)
    ple_placement: Placement = "gpu-replicated"
    ple_host_sharing: Literal["per-process", "shared"] = "per-process"
    hybrid_kv_cache_manager: bool = True
    max_num_batched_tokens: int = 8192
    max_concurrent_batches: int = 2
    cpu_kvcache_space_bytes: int | None = Field(default=None, ge=0)
    """On a CPU device: the KV cache bytes vLLM allocates (``VLLM_CPU_KVCACHE_SPACE`` × 2^30);
    ``None`` = unknown (the variable is unset: vLLM sizes it from the worker's RSS at start).
    Ignored on CUDA."""
    cpu_kvcache_space_source: str | None = None
    """Where :attr:`cpu_kvcache_space_bytes` came from, in words (e.g.
    ``"VLLM_CPU_KVCACHE_SPACE=1 in container seat-resident"``)."""
    engine_version: EngineVersion | None = None
    """The vLLM version serving this side (:mod:`seat_console.fit.engine_rules`); ``None`` =
    not known: budgeted by the oldest supported rule (0.32–0.33), said in the provenance."""
    util_unset: bool = False
    """``gpu_memory_utilization`` left unset on the engine (it then resolves per version:
    1.0 under 0.34's extensible KV cache, else 0.92); ``False``: the value above is passed."""

    def engine(self) -> EngineKVParams:
        """The :class:`seat_console.fit.kvcache.EngineKVParams` of these settings."""
        return EngineKVParams(max_model_len=self.max_model_len, block_size=self.block_size,
                              hybrid_kv_cache_manager=self.hybrid_kv_cache_manager,
                              max_num_batched_tokens=self.max_num_batched_tokens,
                              max_concurrent_batches=self.max_concurrent_batches)


class Holder(Frozen):
    """A process holding GPU memory (for the pre-flight line)."""

    pid: int
    name: str | None = None
    container: str | None = None
    used_bytes: int | None = None

    def describe(self) -> str:
        """``"pid 4242 python3 (container seat-resident) 80.00 GiB"``."""
        s = f"pid {self.pid} {self.name or '?'}"
        if self.container:
            s += f" (container {self.container})"
        return s + f" {gib(self.used_bytes)} GiB" if self.used_bytes is not None else s


class CardInput(Frozen):
    """One card serving TP rank ``rank``: its CUDA-visible total (``None`` = unknown) and where
    that came from (``nvml`` live or ``declared`` in the profile), and — when live — free and
    used memory now and the processes holding it."""

    rank: int
    label: str
    key: str | None = None
    cuda_visible_bytes: int | None = None
    total_source: Literal["nvml", "declared", "unknown"] = "unknown"
    free_bytes: int | None = None
    used_bytes: int | None = None
    holders: list[Holder] = Field(default_factory=list)


def cards_for_seat(gpus: Sequence[str], tp: int, declared_total: int | None,
                   snapshot: Any | None = None) -> list[CardInput]:
    """The :class:`CardInput` of TP ranks 0..tp−1: rank r is the device named by ``gpus[r]``
    (the profile's ``node.gpus``: an NVML index — NVML's order, not the CUDA ordinal —, a
    ``GPU-…`` UUID, a PCI bus id in NVML's or ``lspci``'s spelling, or a ``MIG-…`` UUID:
    :func:`seat_console.core.gpu_ids.match_seat`), read from ``snapshot`` (a
    :class:`seat_console.sources.gpu.GpuSnapshot`) when that device is present with a
    CUDA-visible total, else the declared total. A ``MIG-…`` entry budgets that MIG instance's
    own memory (``nvmlDeviceGetMemoryInfo`` on the MIG handle), not the card's. Ranks beyond
    ``gpus`` (a what-if TP above the node's cards) use the declared total, or rank 0's,
    labelled as hypothetical."""
    from seat_console.core.gpu_ids import card_matches  # pure; lazy to keep imports light

    cards = list(getattr(snapshot, "cards", None) or [])
    out: list[CardInput] = []
    for r in range(tp):
        entry = gpus[r] if r < len(gpus) else None
        match = None
        mig = None
        if entry is not None:
            for c in cards:
                if card_matches(entry, c):
                    match = c
                    break
            if match is not None and entry.strip().upper().startswith("MIG-"):
                mig = next((m for m in getattr(match, "mig_instances", None) or []
                            if (getattr(m, "uuid", None) or "").lower()
                            == entry.strip().lower()), None)
        holder_of = mig if mig is not None else match
        mem = getattr(holder_of, "memory", None) if holder_of is not None else None
        visible = getattr(mem, "cuda_visible_bytes", None) if mem is not None else None
        if match is not None and visible is not None:
            holders = []
            for p in getattr(holder_of, "processes", None) or []:
                cont = getattr(p, "container", None)
                holders.append(Holder(pid=p.pid, name=getattr(p, "name", None),
                                      container=(getattr(cont, "name", None)
                                                 or getattr(cont, "short_id", None))
                                      if cont is not None else None,
                                      used_bytes=getattr(p, "used_memory_bytes", None)))
            label = f"GPU {getattr(match, 'index', '?')} ({getattr(match, 'uuid', None) or entry})"
            key = getattr(match, "key", None)
            if mig is not None:
                label = (f"GPU {getattr(match, 'index', '?')} MIG {getattr(mig, 'name', None) or '?'}"
                         f" ({getattr(mig, 'uuid', None)})")
                key = getattr(mig, "uuid", None) or key
            out.append(CardInput(rank=r, label=label, key=key,
                                 cuda_visible_bytes=visible, total_source="nvml",
                                 free_bytes=getattr(mem, "free_bytes", None),
                                 used_bytes=getattr(mem, "used_bytes", None), holders=holders))
        else:
            label = f"GPU {entry}" if entry is not None else f"rank {r} (no card in node.gpus)"
            out.append(CardInput(rank=r, label=label, cuda_visible_bytes=declared_total,
                                 total_source="declared" if declared_total else "unknown"))
    return out


def cards_for_tp(cards: Sequence[CardInput], tp: int,
                 declared_total: int | None = None) -> list[CardInput]:
    """The first ``tp`` of ``cards``, extended with hypothetical cards (the declared total, else
    rank 0's) when a what-if TP exceeds the cards the node has."""
    cs = list(cards[:tp])
    if tp > len(cs):
        fill = declared_total or (cs[0].cuda_visible_bytes if cs else None)
        cs += [CardInput(rank=r, label=f"rank {r} (hypothetical card)", cuda_visible_bytes=fill,
                         total_source="declared" if fill else "unknown")
               for r in range(len(cs), tp)]
    return cs


class CardBudget(Frozen):
    """One card's budget (bytes). ``kv_bytes`` = requested − weights − PLE − reserve; negative
    means the static footprint alone does not fit."""

    rank: int
    label: str
    total_bytes: int | None
    total_source: str
    requested_bytes: int | None
    weights_bytes: int
    ple_bytes: int
    reserve_bytes: int
    kv_bytes: int | None
    free_bytes: int | None = None

    @property
    def static_bytes(self) -> int:
        """Weights + PLE + reserve on this card."""
        return self.weights_bytes + self.ple_bytes + self.reserve_bytes


class Lever(Frozen):
    """One way to make the seat fit, evaluated: ``helps`` True when applying it alone makes it
    fit, False when it does not, None when it cannot be applied; ``effect`` says what it does in
    words, with the resulting figures."""

    lever: str
    helps: bool | None
    effect: str
    kv_tokens: int | None = None


class Verdict(Frozen):
    """Whether the seat fits, and if not exactly how much must leave each card.

    ``over_bytes``: weights + PLE + reserve − requested on the worst card (> 0: over before any
    KV cache: the paper's "~24.74 GiB per card over"). ``kv_short_bytes``: what the KV pool lacks
    for one request at max_model_len (vLLM's start-up check). ``must_leave_bytes`` = the sum:
    bytes per card that must leave the GPU for vLLM to start.
    """

    fits: bool
    over_bytes: int = 0
    kv_short_bytes: int = 0
    must_leave_bytes: int = 0
    words: str
    levers: list[Lever] = Field(default_factory=list)
    refused: list[str] = Field(default_factory=list)
    """Why vLLM would refuse these settings outright, whatever the memory (max_model_len above
    the model's maximum, a dtype vLLM refuses); empty when it would not."""


class HostRam(Frozen):
    """Host memory for a PLE table placed on the host: needed vs available (psutil
    ``virtual_memory().available``, passed in), per TP worker process or one shared copy."""

    mode: Literal["per-process", "shared"]
    needed_bytes: int
    available_bytes: int | None = None
    fits: bool | None = None
    words: str


class PreflightCard(Frozen):
    """Free memory now on one card vs the memory vLLM will request there: vLLM refuses to start
    when free < requested (``request_memory``); ``holders`` are the processes holding it."""

    label: str
    free_bytes: int | None
    requested_bytes: int | None
    ok: bool | None
    holders: list[Holder] = Field(default_factory=list)
    words: str


class FitBudget(Frozen):
    """The fit budget of one checkpoint in the seat: per card, the KV model and capacity, the
    verdict with levers, host RAM for a host-placed table, and the pre-flight line. ``name``,
    ``path`` (scanned directory, else ``None``) and ``name_note`` come from the
    :class:`Footprint`."""

    name: str
    footprint_source: str
    path: str | None = None
    name_note: str | None = None
    params: SeatParams
    cards: list[CardBudget]
    kv_model: ModelKV | None = None
    capacity: KVCapacity | None = None
    kv_unavailable: str | None = None
    verdict: Verdict
    host_ram: HostRam | None = None
    preflight: list[PreflightCard] = Field(default_factory=list)
    notes: list[str] = Field(default_factory=list)
    served: ServedDtype | None = None
    kv_cache_dtype: str | None = None
    kv_cache_dtype_words: str | None = None
    engine: EngineVersion | None = None
    """The engine version this budget follows (``None``: not known, the 0.32–0.33 rule)."""
    engine_rule: str | None = None
    """The :data:`seat_console.fit.engine_rules.RULES` entry used; ``None``: the version is
    outside every supported range (then :attr:`no_verdict` says so)."""
    sizing: str | None = None
    """``"profiled"`` or ``"extensible"`` (0.34 on CUDA): how the engine sizes the KV cache."""
    util: float | None = None
    """The gpu_memory_utilization the engine resolves (explicit, or the version's default)."""
    util_explicit: bool = True
    kv_flag_bytes: int | None = None
    """When the side fits: the ``--kv-cache-memory-bytes`` value that pins this KV cache on
    this version (the value the engine's start-up log suggests "to fit into requested
    memory": :func:`seat_console.fit.engine_rules.kv_flag_bytes`; on the CPU backend the KV
    space itself); ``None`` when it does not fit."""
    kv_flag_tokens: int | None = None
    """KV tokens with :attr:`kv_flag_bytes` set (vLLM takes exactly that size)."""
    no_verdict: str | None = None
    """Why no verdict is given (the checkpoint's scan has errors: its sizes cannot be trusted);
    ``None`` when the verdict stands. With a reason, ``verdict`` serialises as ``null`` and
    its words start "NO VERDICT: "; the numbers are shown for diagnosis only."""

    @field_serializer("verdict")
    def _verdict_or_null(self, v: Verdict) -> Any:
        return None if self.no_verdict else v.model_dump(mode="json")

    def heading(self) -> str:
        """``"lab-tiny-llama (scanned files: /models/lab-tiny-llama)"`` or
        ``"candidate-nvfp4 (declared sizes)"``: the name and where the sizes came from (shared
        by ``seat-console fit`` and the TUI's fit panel)."""
        if self.footprint_source == "scanned":
            return f"{self.name} (scanned files" + (f": {self.path})" if self.path else ")")
        return f"{self.name} (declared sizes)"

    def over_words(self, card: CardBudget) -> str | None:
        """The headline of an OVER card in one phrase, relating the two figures the verdict
        gives: ``"OVER: 24.74 GiB before any KV cache; 31.94 GiB must leave to serve one
        262,144-token request"`` — the first is weights + PLE + reserve − usable (−``kv_bytes``),
        the second adds the KV cache vLLM needs for one max_model_len request
        (:attr:`seat_console.fit.kvcache.KVCapacity.min_kv_bytes`, vLLM's
        ``_check_enough_kv_cache_memory``); on the worst card it is
        :attr:`Verdict.must_leave_bytes`. GiB = 2^30 B (:func:`gib`). ``None`` when ``card`` is
        not over (``kv_bytes`` ≥ 0 or unknown)."""
        if card.kv_bytes is None or card.kv_bytes >= 0:
            return None
        over = -card.kv_bytes
        head = f"OVER: {gib(over)} GiB before any KV cache; "
        ctx = f"{self.params.max_model_len:,}-token request"
        if self.capacity is None:
            return head + f"plus the KV cache for one {ctx} (n/a: model shape unknown)"
        return head + f"{gib(over + self.capacity.min_kv_bytes)} GiB must leave to serve one {ctx}"

    def kv_log_line(self) -> str | None:
        """vLLM's start-up line for this budget's capacity, with the device word vLLM prints
        for ``params.device`` (:func:`kv_log_device`: "CPU KV cache size: …" on the CPU
        backend); ``None`` without a capacity."""
        if self.capacity is None:
            return None
        return self.capacity.log_line(kv_log_device(self.params.device))

    def provenance(self) -> list[str]:
        """Where each input of this budget came from, one ``"what: source"`` phrase each
        (shared by ``seat-console fit`` and the TUI): sizes (scanned files at a path, or the
        profile's declared figures), the per-card CUDA-visible totals (NVML live, the
        profile's ``node.declared_cuda_visible_bytes``, or unknown), the model dtype, and on a
        CPU device the KV cache space."""
        out = [("sizes: scanned files" + (f" ({self.path})" if self.path else ""))
               if self.footprint_source == "scanned" else
               "sizes: declared in the profile (no checkpoint scanned)"]
        words = {"nvml": "NVML (live)",
                 "declared": "declared in the profile (node.declared_cuda_visible_bytes)",
                 "unknown": "unknown (no live reading, none declared)"}
        srcs = [c.total_source for c in self.cards]
        if srcs and len(set(srcs)) == 1:
            out.append(f"CUDA-visible totals: {words.get(srcs[0], srcs[0])}")
        elif srcs:
            out.append("CUDA-visible totals: " + ", ".join(
                f"{c.label} {words.get(c.total_source, c.total_source)}" for c in self.cards))
        if self.served is not None:
            what = "checkpoint dtype" if self.footprint_source == "scanned" else "model dtype"
            out.append(f"{what}: {self.served.config_dtype} from {self.served.config_source}")
        out.append(self.engine_words())
        if is_cpu_device(self.params.device):
            sp = self.params.cpu_kvcache_space_bytes
            out.append("KV cache space (CPU backend): " + (
                f"{gib_b(sp)} from {self.params.cpu_kvcache_space_source or 'the profile'}"
                if sp is not None else "unknown (VLLM_CPU_KVCACHE_SPACE not known)"))
        return out

    def engine_words(self) -> str:
        """``"engine: vllm 0.34.0 (from the profile's candidate.engine); rule 0.34:
        extensible KV cache, gpu_memory_utilization 0.9 (explicit: a cap)"``."""
        how = (f"{self.sizing} KV cache" if self.sizing else "")
        util = (f"gpu_memory_utilization {self.util} "
                + ("(explicit" + (": a cap)" if self.sizing == "extensible" else ")")
                   if self.util_explicit else "(unset: the version's default)"))
        if self.engine is None:
            return ("engine: version not known (no /version, image metadata or "
                    "<role>.engine): budgeted by the vLLM 0.32-0.33 rule; " + util)
        if self.engine_rule is None:
            return f"engine: {self.engine.describe()}: outside the supported ranges"
        return f"engine: {self.engine.describe()}; rule {self.engine_rule}: {how}, {util}"

    def flag_words(self) -> str | None:
        """``"set --kv-cache-memory-bytes=… (… GiB) to pin … tokens on vllm 0.34.0"`` when
        the side fits; ``None`` otherwise."""
        if self.kv_flag_bytes is None or self.kv_flag_bytes <= 0:
            return None
        v = (f"vLLM {self.engine.version}" if self.engine
             else "a vLLM of the 0.32-0.33 rule (version not known)")
        toks = f" = {self.kv_flag_tokens:,} KV tokens" if self.kv_flag_tokens else ""
        left = [c.kv_bytes for c in self.cards if c.kv_bytes is not None]
        below = min(left) - self.kv_flag_bytes if left else 0
        why = (f"; {below / (1 << 20):,.0f} MiB below the KV cache above: vLLM's own "
               "suggestion keeps its redundancy buffer" if below > 0 else "")
        return (f"{KV_FLAG}={self.kv_flag_bytes} ({gib(self.kv_flag_bytes)} GiB per card"
                f"{toks}{why}) pins this KV cache on {v}")

    @property
    def kv_tokens(self) -> int | None:
        """KV cache size in tokens (None when the shape or totals are unknown)."""
        return self.capacity.kv_tokens if self.capacity else None

    @property
    def max_concurrency(self) -> float | None:
        """Maximum concurrency at max_model_len."""
        return self.capacity.max_concurrency if self.capacity else None


class HostMemory(Frozen):
    """Host memory figures (psutil ``virtual_memory()``: ``total`` and ``available``)."""

    total_bytes: int
    available_bytes: int


def is_cpu_device(device: str) -> bool:
    """Whether ``device`` (a :data:`seat_console.fit.dtype.Platform`) is vLLM's CPU backend."""
    return device.startswith("cpu")


def kv_log_device(device: str) -> str:
    """The device word of vLLM's "<device> KV cache size: …" start-up line for ``device`` (a
    :data:`seat_console.fit.dtype.Platform`): ``"GPU"`` for cuda / cuda-no-bf16, ``"CPU"`` for
    cpu / cpu-ppc64le. Source: ``_kv_cache_device_name`` in ``vllm/v1/core/kv_cache_utils.py``
    (vLLM 0.32.0): ``"GPU" if device_type == "cuda" else device_type.upper()``."""
    return "CPU" if is_cpu_device(device) else "GPU"


def cpu_kv_space(env_value: str | None) -> int | None:
    """The CPU backend's KV cache bytes for a ``VLLM_CPU_KVCACHE_SPACE`` value (GiB, a decimal
    integer), as ``CpuPlatform.check_and_update_config`` (``vllm/platforms/cpu.py``, vLLM
    0.32.0) reads it: ``int(value) × 2^30``; ``None`` or ``""`` → ``None`` (unset: vLLM sizes
    the cache from the worker's memory at start, unknown here). Raises :class:`ValueError`
    naming the variable for a value ``int()`` refuses or a negative one (vLLM would fail to
    start on the first; the second is no size)."""
    if env_value is None or env_value == "":
        return None
    try:
        v = int(env_value)
    except ValueError:
        raise ValueError(f"VLLM_CPU_KVCACHE_SPACE={env_value!r} is not a whole number of GiB "
                         "(vLLM reads it with int()): set it to e.g. 4") from None
    if v < 0:
        raise ValueError(f"VLLM_CPU_KVCACHE_SPACE={env_value!r} is negative: set a size in GiB")
    return v * GIB


def requested_bytes(total: int, utilisation: float) -> int:
    """ceil(total × gpu_memory_utilization), as ``vllm/v1/worker/utils.py`` ``request_memory``
    (same float arithmetic)."""
    return math.ceil(total * utilisation)


def _core(fp: Footprint, p: SeatParams, cards: Sequence[CardInput]) -> FitBudget:
    tp = p.tensor_parallel_size
    notes: list[str] = []
    refused: list[str] = []
    served: ServedDtype | None = None
    try:
        served = resolve_served_dtype(p.dtype, fp.config_dtype or "float32",
                                      model_type=fp.model_type, platform=p.device,
                                      config_source=fp.config_dtype_source or "config.json")
    except DtypeError as exc:
        refused.append(str(exc))
    eb = served.element_bytes if served is not None and fp.source == "scanned" else None
    weights, wnotes = fp.weights_per_rank(tp, eb)
    ple, pnotes = fp.ple_per_rank(p.ple_placement, tp, eb)
    notes += wnotes + pnotes
    if served is not None:
        if fp.source == "scanned" and served.dtype != served.config_dtype:
            stored_w, _ = fp.weights_per_rank(tp)
            notes.append(f"served dtype: {served.words}; unquantised weights per rank "
                         f"{stored_w:,} B as stored → {weights:,} B served (quantised tensors "
                         "and scales keep their stored bytes)")
        elif fp.source == "declared" and fp.kv_config is not None \
                and served.dtype != served.config_dtype:
            notes.append(f"served dtype: {served.words}; declared weights are taken as served")
    kv_dtype, kv_words = resolve_kv_cache_dtype(
        p.kv_cache_dtype, served.dtype if served else (fp.config_dtype or "bfloat16"),
        fp.quantization_config)
    if fp.kv_config is not None:
        why = check_max_model_len(p.max_model_len, fp.kv_config)
        if why:
            refused.append(why)
    rule = rule_for(p.engine_version) if p.engine_version is not None else RULES[0]
    acc = accounting(rule or RULES[0], p.device,
                     None if p.util_unset else p.gpu_memory_utilization)
    rows: list[CardBudget] = []
    for c in cards[:tp]:
        total = c.cuda_visible_bytes
        req = rule_requested(total, acc.util) if total is not None else None
        kv = (rule_kv_bytes(acc, total, weights + ple, p.activation_reserve_bytes,
                            c.free_bytes) if total is not None else None)
        rows.append(CardBudget(rank=c.rank, label=c.label, total_bytes=total,
                               total_source=c.total_source, requested_bytes=req,
                               weights_bytes=weights, ple_bytes=ple,
                               reserve_bytes=p.activation_reserve_bytes, kv_bytes=kv,
                               free_bytes=c.free_bytes))
    if len(rows) < tp:
        notes.append(f"only {len(rows)} card(s) known for TP {tp}")
    cpu_unknown: str | None = None
    if is_cpu_device(p.device):
        # CPU backend: the KV cache is VLLM_CPU_KVCACHE_SPACE, not requested − non-KV memory
        # (vllm/platforms/cpu.py check_and_update_config; v1/worker/cpu_worker.py
        # determine_available_memory).
        space = p.cpu_kvcache_space_bytes
        if space is None:
            cpu_unknown = ("device cpu: vLLM's CPU backend sizes the KV cache from "
                           "VLLM_CPU_KVCACHE_SPACE, which is not known here (unset, it takes "
                           "gpu_memory_utilization × the NUMA node's memory − the worker's RSS "
                           "after warm-up, known only at start): set "
                           "seat.cpu_kvcache_space_bytes in the profile")
        else:
            notes.append(f"device {p.device}: the KV cache is {gib_b(space)} (from "
                         f"{p.cpu_kvcache_space_source or 'the profile'}), not usable × "
                         "gpu_memory_utilization − weights (vLLM's CPU backend)")
        rows = [r.model_copy(update={"kv_bytes": space}) for r in rows]
    kvm: ModelKV | None = None
    cap: KVCapacity | None = None
    kv_unavailable: str | None = None
    if fp.kv_config is None:
        kv_unavailable = (f"{fp.name}: no model shape (no config.json, config_json or "
                          "model_shape in the profile): KV tokens n/a")
    else:
        try:
            kvm = model_kv(fp.kv_config, tensor_parallel_size=tp, kv_cache_dtype=kv_dtype,
                           source=fp.kv_config_source or "config", fp8_checkpoint=fp.fp8_checkpoint,
                           model_dtype=served.dtype if served else None)
        except LayoutRefused as exc:   # known, and refused: does not fit (the trial's --tp 3
            kv_unavailable = str(exc)  # read "fits … KV tokens n/a: model shape unknown")
            refused.append(str(exc))
        except KVModelError as exc:
            kv_unavailable = str(exc)
    known = [r.kv_bytes for r in rows if r.kv_bytes is not None]
    if kvm is not None and known and len(known) == len(rows):
        try:
            # vLLM uses the smallest rank's block count for every rank (get_kv_cache_configs).
            cap = kv_capacity(kvm, min(known), p.engine())
        except KVModelError as exc:
            kv_unavailable = str(exc)
    elif cpu_unknown:
        kv_unavailable = kv_unavailable or cpu_unknown
    elif not known or len(known) != len(rows):
        kv_unavailable = kv_unavailable or ("a card's CUDA-visible total is unknown (no live "
                                            "reading, no node.declared_cuda_visible_bytes)")
    verdict = (_verdict(rows, cap, p) if not cpu_unknown else
               Verdict(fits=False, words=f"unknown: {cpu_unknown}"))
    if refused:
        verdict = Verdict(fits=False, over_bytes=verdict.over_bytes,
                          kv_short_bytes=verdict.kv_short_bytes,
                          must_leave_bytes=verdict.must_leave_bytes, refused=refused,
                          words="does not fit: vLLM refuses to start: " + "; ".join(refused))
    flag = flag_tokens = None
    if verdict.fits and rows and all(r.kv_bytes is not None for r in rows):
        if is_cpu_device(p.device):
            flag = min(r.kv_bytes or 0 for r in rows)
        else:
            flag = min(kv_flag_bytes(r.requested_bytes or 0, r.weights_bytes + r.ple_bytes,
                                     r.reserve_bytes) for r in rows)
        if kvm is not None and flag > 0:
            try:
                flag_tokens = kv_capacity(kvm, flag, p.engine()).kv_tokens
            except KVModelError:
                flag_tokens = None
    if (acc.sizing == "extensible" and acc.util_explicit and 0.7 < acc.util < 1.0
            and rows and rows[0].total_bytes is not None):
        full = accounting(rule or RULES[0], p.device, 1.0)
        withheld = (rule_kv_bytes(full, rows[0].total_bytes, weights + ple,
                                  p.activation_reserve_bytes) - (rows[0].kv_bytes or 0))
        if withheld >= GIB:
            notes.append(f"vLLM {p.engine_version.version if p.engine_version else ''} warns: "
                         f"gpu_memory_utilization={acc.util} caps the extensible KV cache and "
                         f"keeps {gib(withheld)} GiB per card out of it; unset, it resolves to "
                         "1.0 (measure_kv_cache_blocks)")
    return FitBudget(name=fp.name, footprint_source=fp.source, path=fp.path,
                     name_note=fp.name_note, params=p, cards=rows, kv_model=kvm,
                     capacity=cap, kv_unavailable=kv_unavailable, verdict=verdict, notes=notes,
                     served=served, kv_cache_dtype=kv_dtype, kv_cache_dtype_words=kv_words,
                     engine=p.engine_version, engine_rule=rule.name if rule else None,
                     sizing=acc.sizing, util=acc.util, util_explicit=acc.util_explicit,
                     kv_flag_bytes=flag, kv_flag_tokens=flag_tokens)


def _verdict(rows: Sequence[CardBudget], cap: KVCapacity | None, p: SeatParams) -> Verdict:
    known = [r for r in rows if r.requested_bytes is not None]
    if not known or len(known) != len(rows):
        return Verdict(fits=False, words="unknown: a card's CUDA-visible total is not known")
    worst = min(known, key=lambda r: r.kv_bytes if r.kv_bytes is not None else 0)
    over = max(0, -(worst.kv_bytes or 0))
    short = 0
    if cap is not None:
        short = max(0, cap.min_kv_bytes - max(0, worst.kv_bytes or 0))
    must = over + short
    if cap is None:
        if over:
            return Verdict(fits=False, over_bytes=over, must_leave_bytes=over,
                           words=f"does not fit: weights + PLE + reserve exceed usable memory by "
                                 f"{gib(over)} GiB per card before any KV cache")
        return Verdict(fits=over == 0 and (worst.kv_bytes or 0) > 0, over_bytes=0,
                       words=f"weights + PLE + reserve fit, leaving {gib(worst.kv_bytes)} GiB per "
                             "card for the KV cache (KV tokens n/a: model shape unknown)")
    if must == 0 and cap.fits_one_request:
        return Verdict(fits=True, words=(
            f"fits: {gib(worst.kv_bytes)} GiB per card for the KV cache = {cap.kv_tokens:,} "
            f"tokens, {requests_at_once(cap.max_concurrency)} of {p.max_model_len:,} tokens at "
            "once"))
    parts = []
    if over:
        parts.append(f"weights + PLE + reserve exceed usable memory by {gib(over)} GiB per card "
                     "before any KV cache")
    if short:
        parts.append(f"vLLM needs {gib(cap.min_kv_bytes)} GiB of KV cache per card to serve one "
                     f"{p.max_model_len:,}-token request and start")
    return Verdict(fits=False, over_bytes=over, kv_short_bytes=short, must_leave_bytes=must,
                   words=f"does not fit: {gib(must)} GiB per card must leave the GPU ("
                         + "; ".join(parts) + ")")


def _host_ram(fp: Footprint, p: SeatParams, host: HostMemory | None,
              element_bytes: int | None = None) -> HostRam | None:
    table = fp.ple_served_bytes(element_bytes)
    if p.ple_placement != "host" or table == 0:
        return None
    copies = p.tensor_parallel_size if p.ple_host_sharing == "per-process" else 1
    need = table * copies
    how = (f"one copy per TP worker process ({copies} × {gib(table)} GiB)"
           if p.ple_host_sharing == "per-process" else "one shared copy")
    if host is None:
        return HostRam(mode=p.ple_host_sharing, needed_bytes=need,
                       words=f"PLE on the host needs {gib(need)} GiB of host RAM, {how}; "
                             "available n/a")
    ok = host.available_bytes >= need
    return HostRam(mode=p.ple_host_sharing, needed_bytes=need,
                   available_bytes=host.available_bytes, fits=ok,
                   words=f"PLE on the host needs {gib(need)} GiB of host RAM, {how}; "
                         f"{gib(host.available_bytes)} GiB available now on this host: "
                         + ("enough" if ok else f"short by {gib(need - host.available_bytes)} GiB"))


def _preflight(rows: Sequence[CardBudget], cards: Sequence[CardInput],
               extensible: bool = False) -> list[PreflightCard]:
    out = []
    by_rank = {c.rank: c for c in cards}
    for r in rows:
        c = by_rank.get(r.rank)
        if c is None or c.free_bytes is None or r.requested_bytes is None:
            out.append(PreflightCard(label=r.label, free_bytes=None,
                                     requested_bytes=r.requested_bytes, ok=None,
                                     words=f"{r.label}: free memory now n/a (no live reading)"))
            continue
        ok = c.free_bytes >= r.requested_bytes
        holders = [h for h in c.holders if (h.used_bytes or 0) > 0 or h.used_bytes is None]
        if extensible:
            # 0.34's extensible KV cache: request_memory does not refuse; the KV cache is
            # sized from the free memory instead (the budget above already uses it).
            out.append(PreflightCard(label=r.label, free_bytes=c.free_bytes,
                                     requested_bytes=r.requested_bytes, ok=True,
                                     holders=holders, words=(
                                         f"{r.label}: {gib(c.free_bytes)} GiB free now vs "
                                         f"{gib(r.requested_bytes)} GiB requested: starts "
                                         "either way (extensible KV cache: the KV cache is "
                                         "sized from the free memory)")))
            continue
        words = (f"{r.label}: {gib(c.free_bytes)} GiB free now vs {gib(r.requested_bytes)} GiB "
                 "requested: " + ("ok" if ok else
                                  f"vLLM would refuse to start (short by "
                                  f"{gib(r.requested_bytes - c.free_bytes)} GiB)"))
        if not ok:
            words += "; held by " + (", ".join(h.describe() for h in holders)
                                     if holders else "no listed process (driver/other context)")
        out.append(PreflightCard(label=r.label, free_bytes=c.free_bytes,
                                 requested_bytes=r.requested_bytes, ok=ok, holders=holders,
                                 words=words))
    return out


def fit_budget(fp: Footprint, params: SeatParams, cards: Sequence[CardInput], *,
               host: HostMemory | None = None, node_gpu_count: int | None = None,
               declared_total: int | None = None, levers: bool = True,
               no_verdict: str | None = None) -> FitBudget:
    """The :class:`FitBudget` of ``fp`` in a seat with ``params`` on ``cards`` (one per TP rank,
    see :func:`cards_for_seat`).

    ``host``: host memory now (for a host-placed PLE table); ``node_gpu_count``: cards the node
    has (for the higher-TP lever); ``declared_total``: per-card total for hypothetical extra
    cards. ``levers`` False skips the what-if evaluation (used by the levers themselves).
    ``no_verdict``: why the footprint cannot be trusted (the checkpoint's scan errors); then
    the budget carries it in :attr:`FitBudget.no_verdict`, its verdict reads "NO VERDICT: …"
    (and serialises as ``null``) and no levers are evaluated.
    Raises ``ValueError`` when a declared footprint lacks ``weights_bytes_per_rank``.
    """
    b = _core(fp, params, cards)
    hr = _host_ram(fp, params, host, b.served.element_bytes if b.served else None)
    verdict = b.verdict
    if hr is not None and hr.fits is False and verdict.fits:
        verdict = verdict.model_copy(update={
            "fits": False,
            "words": f"does not fit on this host: the GPUs fit ({verdict.words}), but {hr.words}"})
    b = b.model_copy(update={"host_ram": hr, "verdict": verdict,
                             "preflight": _preflight(b.cards, cards, b.sizing == "extensible")})
    if params.engine_version is not None and b.engine_rule is None:
        no_verdict = "; ".join(filter(None, [unsupported_words(params.engine_version), no_verdict]))
    if no_verdict:
        return b.model_copy(update={"no_verdict": no_verdict, "kv_flag_bytes": None,
                                    "kv_flag_tokens": None, "verdict": Verdict(
            fits=False, words=f"NO VERDICT: {no_verdict}")})
    if not levers:
        return b
    return b.model_copy(update={"verdict": b.verdict.model_copy(
        update={"levers": _levers(fp, params, cards, b, host, node_gpu_count, declared_total)})})


def _levers(fp: Footprint, p: SeatParams, cards: Sequence[CardInput], base: FitBudget,
            host: HostMemory | None, node_gpu_count: int | None,
            declared_total: int | None) -> list[Lever]:
    out: list[Lever] = []

    def run(**changes: Any) -> FitBudget:
        q = p.model_copy(update=changes)
        cs = cards_for_tp(cards, q.tensor_parallel_size, declared_total)
        return fit_budget(fp, q, cs, host=host, levers=False)

    def words(b: FitBudget) -> str:
        gpu_fits = (b.capacity is not None and b.capacity.fits_one_request
                    and all((r.kv_bytes or 0) > 0 for r in b.cards))
        if gpu_fits and b.capacity:
            return (f"fits on the GPUs: KV {gib(min(r.kv_bytes or 0 for r in b.cards))} GiB per "
                    f"card = {b.capacity.kv_tokens:,} tokens, {b.capacity.max_concurrency:.2f}× "
                    f"at {b.params.max_model_len:,}")
        return b.verdict.words

    if fp.ple_bytes and p.ple_placement != "host":
        b = run(ple_placement="host")
        hr = b.host_ram
        out.append(Lever(lever="PLE to host",
                         helps=b.verdict.fits and not (hr is not None and hr.fits is False),
                         effect=f"frees {gib(base.cards[0].ple_bytes if base.cards else 0)} GiB "
                                f"per card; {words(b)}" + (f"; {hr.words}" if hr else ""),
                         kv_tokens=b.kv_tokens))
    if fp.ple_bytes and p.ple_placement == "gpu-replicated" and p.tensor_parallel_size > 1:
        b = run(ple_placement="gpu-sharded")
        out.append(Lever(lever="PLE sharded by vocabulary", helps=b.verdict.fits,
                         effect=f"PLE {gib(b.cards[0].ple_bytes if b.cards else 0)} GiB per card; "
                                + words(b), kv_tokens=b.kv_tokens))
    limit = None
    if fp.kv_config is not None and check_max_model_len(p.max_model_len, fp.kv_config):
        derived, _key, said = derived_max_model_len(fp.kv_config)
        limit = int(derived)
        if limit >= 1:
            b = run(max_model_len=limit)
            out.append(Lever(lever="context within the model's maximum", helps=b.verdict.fits,
                             effect=f"max_model_len {limit:,} ({said}) is the most vLLM "
                                    f"accepts; {words(b)}", kv_tokens=b.kv_tokens))
    worst_kv = min((r.kv_bytes for r in base.cards if r.kv_bytes is not None), default=None)
    if base.kv_model is not None and worst_kv is not None and limit is None:
        if worst_kv <= 0:
            out.append(Lever(lever="lower context", helps=False,
                             effect="cannot help: weights + PLE + reserve alone exceed usable "
                                    "memory; no context length fits"))
        else:
            try:
                ml = max_model_len_for(base.kv_model, worst_kv, p.engine())
            except KVModelError:
                ml = 0
            if ml >= p.max_model_len:
                out.append(Lever(lever="lower context", helps=None,
                                 effect=f"not needed: {p.max_model_len:,} tokens already fit"))
            elif ml > 0:
                b = run(max_model_len=ml)
                out.append(Lever(lever="lower context", helps=b.verdict.fits,
                                 effect=f"max_model_len ≤ {ml:,} lets vLLM start; {words(b)}",
                                 kv_tokens=b.kv_tokens))
            else:
                out.append(Lever(lever="lower context", helps=False,
                                 effect="no context length fits the KV left"))
    if base.capacity is not None:
        conc = base.capacity.max_concurrency
        if conc < p.max_num_seqs:
            out.append(Lever(lever="fewer sequences", helps=None,
                             effect=f"max_num_seqs {p.max_num_seqs} > {requests_at_once(conc)} of "
                                    f"{p.max_model_len:,} tokens the KV cache holds: at full "
                                    "context vLLM queues or preempts the rest. max_num_seqs does "
                                    "not size the KV pool; it bounds the activation peak (the "
                                    "reserve)"))
        else:
            out.append(Lever(lever="fewer sequences", helps=None,
                             effect=f"not needed: {conc:.2f} full-context requests fit, "
                                    f"≥ max_num_seqs {p.max_num_seqs}"))
    if base.sizing == "extensible" and base.util_explicit:
        b = run(util_unset=True)
        out.append(Lever(lever="gpu_memory_utilization unset", helps=b.verdict.fits,
                         effect=f"vLLM {p.engine_version.version if p.engine_version else ''}'s extensible KV "
                                f"cache resolves it to {b.util} and keeps a measured margin "
                                f"instead (CacheConfig.resolved_gpu_memory_utilization); "
                                + words(b), kv_tokens=b.kv_tokens))
    tp2 = p.tensor_parallel_size * 2
    b = run(tensor_parallel_size=tp2)
    have = node_gpu_count if node_gpu_count is not None else len(cards)
    need_cards = "" if tp2 <= have else f" — needs {tp2} cards, the node has {have}"
    out.append(Lever(lever=f"higher TP ({tp2})", helps=b.verdict.fits and tp2 <= have,
                     effect=f"weights {gib(b.cards[0].weights_bytes if b.cards else None)} GiB + "
                            f"PLE {gib(b.cards[0].ple_bytes if b.cards else None)} GiB per card; "
                            + words(b) + need_cards, kv_tokens=b.kv_tokens))
    if base.cards and all(r.total_bytes for r in base.cards) and not is_cpu_device(p.device):
        # on vLLM's CPU backend gpu_memory_utilization sizes nothing (the KV cache is its own
        # space, VLLM_CPU_KVCACHE_SPACE): no utilisation lever there
        need = max(r.static_bytes + (base.capacity.min_kv_bytes if base.capacity else 0)
                   for r in base.cards)
        util = need / min(r.total_bytes or 1 for r in base.cards)
        if p.gpu_memory_utilization >= util:
            out.append(Lever(lever="higher utilisation", helps=None,
                             effect=f"not needed at {p.gpu_memory_utilization:.2f}"))
        elif util > 1.0:
            out.append(Lever(lever="higher utilisation", helps=False,
                             effect=f"would need {util:.3f} of the card (> 1.0): impossible"))
        else:
            u = math.ceil(util * 1000) / 1000
            b = run(gpu_memory_utilization=min(1.0, u))
            risk = (f" — risky above ~{UTILISATION_RISK}: the CUDA context, NCCL buffers and "
                    "fragmentation live outside vLLM's budget" if u > UTILISATION_RISK else "")
            out.append(Lever(lever="higher utilisation", helps=b.verdict.fits,
                             effect=f"gpu_memory_utilization {u:.3f}: {words(b)}{risk}",
                             kv_tokens=b.kv_tokens))
    return out


class Comparison(Frozen):
    """Resident and candidate budgets side by side, with the ratio of their KV capacities
    (candidate / resident, in tokens and in KV bytes per card); ``None`` where either is
    unknown or zero."""

    resident: FitBudget | None = None
    resident_unavailable: str | None = None
    candidate: FitBudget | None = None
    candidate_unavailable: str | None = None
    kv_tokens_ratio: float | None = None
    kv_bytes_ratio: float | None = None


def compare(resident: FitBudget | None, candidate: FitBudget | None, *,
            resident_unavailable: str | None = None,
            candidate_unavailable: str | None = None) -> Comparison:
    """Put two budgets side by side (see :class:`Comparison`).

    ``resident`` / ``candidate``: a :class:`FitBudget` from :func:`fit_budget`, or ``None`` when
    that side cannot be budgeted; ``resident_unavailable`` / ``candidate_unavailable`` then say
    why (shown as "n/a — …"). The returned :class:`Comparison` carries them and two ratios,
    candidate / resident, dimensionless:

    * ``kv_tokens_ratio`` = candidate KV tokens / resident KV tokens (tokens as vLLM's
      ``get_kv_cache_capacity`` counts them, :func:`seat_console.fit.kvcache.kv_capacity`). ``None`` when
      either budget is ``None``, the resident's KV tokens are 0 or unknown, or the candidate's are
      unknown (no model shape, or a card total unknown); 0.0 when the candidate has no KV cache.
    * ``kv_bytes_ratio`` = max(0, candidate KV bytes) / resident KV bytes, each the smallest
      :attr:`CardBudget.kv_bytes` (bytes per card) over its cards — vLLM sizes every rank's pool
      by the smallest (``vllm/v1/core/kv_cache_utils.py`` ``get_kv_cache_configs``). ``None``
      when either budget is ``None``, the resident's KV bytes are ≤ 0 or unknown, or the
      candidate's are unknown; an OVER candidate (negative KV bytes) counts as 0.

    Pure arithmetic: no I/O, never raises.
    """
    tr = kr = None
    if resident and candidate:
        if resident.kv_tokens and candidate.kv_tokens is not None:
            tr = candidate.kv_tokens / resident.kv_tokens
        rk = min((c.kv_bytes for c in resident.cards if c.kv_bytes is not None), default=None)
        ck = min((c.kv_bytes for c in candidate.cards if c.kv_bytes is not None), default=None)
        if rk and rk > 0 and ck is not None:
            kr = max(0, ck) / rk
    return Comparison(resident=resident, resident_unavailable=resident_unavailable,
                      candidate=candidate, candidate_unavailable=candidate_unavailable,
                      kv_tokens_ratio=tr, kv_bytes_ratio=kr)


class OverlayRow(Frozen):
    """Live overlay for one card of the running seat: predicted use (weights + PLE + the KV
    pool vLLM allocates, num_blocks × bytes_per_block, + reserve) vs NVML used now (the seat's
    processes on the card, else the card's used), and the difference (NVML − predicted: the
    CUDA context, activations, allocator slack…)."""

    label: str
    predicted_bytes: int | None
    nvml_used_bytes: int | None
    nvml_basis: str
    difference_bytes: int | None


def live_overlay(budget: FitBudget, cards: Sequence[CardInput]) -> list[OverlayRow]:
    """Predicted per-card use of ``budget`` next to the live NVML figures of ``cards``.

    ``budget``: the running seat's (the resident's) :class:`FitBudget`; ``cards``: one
    :class:`CardInput` per TP rank (:func:`cards_for_seat` / :func:`cards_for_tp`), matched to
    ``budget.cards`` by ``rank``. Returns one :class:`OverlayRow` per ``budget.cards`` entry, in
    the same order; every figure is bytes on that card:

    * ``predicted_bytes`` = weights + PLE + reserve (:attr:`CardBudget.static_bytes`) + the KV
      pool vLLM allocates, num_blocks × bytes_per_block (:class:`seat_console.fit.kvcache.KVCapacity`;
      ``vllm/v1/core/kv_cache_utils.py`` ``get_kv_cache_configs``). ``None`` when the budget has
      no KV capacity (model shape or a card total unknown).
    * ``nvml_used_bytes``: the sum of the card's processes' used memory (NVML
      ``nvmlDeviceGetComputeRunningProcesses`` ``usedGpuMemory``; ``nvml_basis`` "processes on
      the card"), else the card's used memory (``nvmlDeviceGetMemoryInfo(_v2)`` ``used``; "card
      used"). ``None`` (basis "n/a") when the card was not read live (``total_source`` not
      ``nvml``: a declared or hypothetical card) or NVML gave neither figure.
    * ``difference_bytes`` = NVML − predicted: positive is memory beyond the model's (CUDA
      context, activations / CUDA graphs beyond the reserve, allocator slack), negative is less
      than predicted (e.g. the engine is not up). ``None`` when either side is ``None``.

    Pure arithmetic: no I/O, never raises.
    """
    pool = (budget.capacity.num_blocks * budget.capacity.bytes_per_block
            if budget.capacity else None)
    by_rank = {c.rank: c for c in cards}
    out = []
    for r in budget.cards:
        pred = r.static_bytes + pool if pool is not None else None
        c = by_rank.get(r.rank)
        used: int | None = None
        basis = "n/a"
        if c is not None and c.total_source == "nvml":
            procs = [h.used_bytes for h in c.holders if h.used_bytes is not None]
            if procs:
                used, basis = sum(procs), "processes on the card"
            elif c.used_bytes is not None:
                used, basis = c.used_bytes, "card used"
        diff = used - pred if used is not None and pred is not None else None
        out.append(OverlayRow(label=r.label, predicted_bytes=pred, nvml_used_bytes=used,
                              nvml_basis=basis, difference_bytes=diff))
    return out


__all__ = [
    "requests_at_once",
    "GIB",
    "UTILISATION_RISK",
    "VOCAB_PADDING",
    "CardBudget",
    "CardInput",
    "Comparison",
    "FitBudget",
    "Footprint",
    "Holder",
    "HostMemory",
    "HostRam",
    "Lever",
    "OverlayRow",
    "Placement",
    "PreflightCard",
    "SeatParams",
    "Verdict",
    "cards_for_seat",
    "cards_for_tp",
    "compare",
    "fit_budget",
    "footprint_declared",
    "cpu_kv_space",
    "is_cpu_device",
    "kv_log_device",
    "footprint_from_summary",
    "gib",
    "gib_b",
    "live_overlay",
    "pad_vocab",
    "requested_bytes",
    "vocab_bytes_per_rank",
    "vocab_rows_per_rank",
]
