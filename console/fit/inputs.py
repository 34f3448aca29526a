"""The fit budget's inputs and the what-if, as frozen models, and the budgets they give (pure
arithmetic, no I/O): :class:`FitSide` (one checkpoint as the budget sees it), :class:`FitInputs`
(both checkpoints, the cards, host memory), :class:`WhatIf` (the seat overrides of the fit
panel and ``seat-console fit``), :func:`compute_budgets` (both budgets side by side).

Gathering the inputs from the node (checkpoint scans, a GPU snapshot, host memory) is
:func:`seat_console.snapshot.fit_reading.gather_fit_inputs`; the TUI's what-if controls then
recompute from here without I/O.
"""

from __future__ import annotations

from pydantic import Field

from seat_console.core.base import Frozen
from seat_console.core.checkpoint import CheckpointSummary
from seat_console.fit.engine_rules import EngineVersion
from seat_console.core.profile import (
    MAX_MODEL_LEN,
    MAX_NUM_SEQS,
    MAX_SIZE_BYTES,
    CheckpointSpec,
    Profile,
)
from seat_console.fit.budget import (
    CardInput,
    Comparison,
    FitBudget,
    Footprint,
    HostMemory,
    OverlayRow,
    SeatParams,
    cards_for_tp,
    compare,
    fit_budget,
    live_overlay,
)

__all__ = ["FitInputs", "FitSide", "WhatIf", "compute_budgets", "no_verdict_reason",
           "seat_params"]


class FitSide(Frozen):
    """One checkpoint (resident or candidate) as the budget sees it: its footprint, or why it
    is unavailable (``scan_failed``: its files could not be scanned, e.g. a corrupt header);
    the scan summary when files were scanned; its PLE placement."""

    role: str
    name: str
    footprint: Footprint | None = None
    unavailable: str | None = None
    scan: CheckpointSummary | None = None
    ple_placement: str = "gpu-replicated"
    ple_host_sharing: str = "per-process"
    scan_failed: bool = False
    cpu_kvcache_space_bytes: int | None = None
    """On a CPU device: the KV cache bytes vLLM's CPU backend allocates for this side
    (:func:`cpu_kv_space_for`); ``None`` = unknown."""
    cpu_kvcache_space_source: str | None = None
    """Where :attr:`cpu_kvcache_space_bytes` came from, or why it is unknown, in words."""
    engine_version: EngineVersion | None = None
    """The vLLM version serving this side: the running engine's ``/version``, else the
    serving image's package metadata, else the profile's ``<role>.engine``; ``None``: none
    known (:func:`seat_console.snapshot.fit_reading.engine_version_for`)."""
    engine_version_problem: str | None = None
    """Why a source of the version was skipped (an unreadable value), in words."""


class FitInputs(Frozen):
    """Everything :func:`seat_console.fit.budget.fit_budget` needs for both checkpoints.

    ``cards``: one :class:`~seat_console.fit.budget.CardInput` per ``node.gpus`` entry (live from NVML
    where present); ``gpu_unavailable``: why there is no live reading (then totals are the
    profile's declared figure); ``host``: host memory now (psutil).
    """

    resident: FitSide
    candidate: FitSide | None = None
    seat: SeatParams
    cards: list[CardInput] = Field(default_factory=list)
    gpu_unavailable: str | None = None
    host: HostMemory | None = None
    node_gpu_count: int
    declared_total: int | None = None
    unmatched_gpus: list[str] = Field(default_factory=list)
    """``node.gpus`` entries that matched no card in the live reading (empty without one)."""
    gpu_errors: list[str] = Field(default_factory=list)
    """Entries resolving to one device (two TP ranks on one card): no verdict is given."""
    env_warnings: list[str] = Field(default_factory=list)
    """``CUDA_VISIBLE_DEVICES`` / ``CUDA_DEVICE_ORDER`` set in the console's or the seat
    container's environment: ``node.gpus`` indices are NVML's, not CUDA's, and these renumber
    or hide CUDA devices."""


def seat_params(profile: Profile, spec: CheckpointSpec | None = None) -> SeatParams:
    """The profile's ``[seat]`` as :class:`~seat_console.fit.budget.SeatParams`, with ``spec``'s PLE
    placement."""
    s = profile.seat
    return SeatParams(
        tensor_parallel_size=s.tensor_parallel_size,
        gpu_memory_utilization=s.gpu_memory_utilization, max_model_len=s.max_model_len,
        max_num_seqs=s.max_num_seqs, kv_cache_dtype=s.kv_cache_dtype, dtype=s.dtype,
        device=s.device, block_size=s.block_size,
        activation_reserve_bytes=int(s.activation_reserve_bytes),
        ple_placement=spec.ple_placement if spec else "gpu-replicated",
        ple_host_sharing=spec.ple_host_sharing if spec else "per-process")


class WhatIf(Frozen):
    """What-if overrides of the seat (``None`` keeps the profile's value): the candidate's PLE
    placement, gpu_memory_utilization, tensor parallel size, max_model_len, max_num_seqs, KV
    cache dtype, activation reserve (bytes), served dtype (vLLM ``--dtype``)."""

    placement: str | None = None
    gpu_memory_utilization: float | None = Field(default=None, gt=0, le=1)
    tensor_parallel_size: int | None = Field(default=None, ge=1, le=64)
    max_model_len: int | None = Field(default=None, ge=1, le=MAX_MODEL_LEN)
    max_num_seqs: int | None = Field(default=None, ge=1, le=MAX_NUM_SEQS)
    kv_cache_dtype: str | None = None
    activation_reserve_bytes: int | None = Field(default=None, ge=0, le=MAX_SIZE_BYTES)
    dtype: str | None = None
    engine: EngineVersion | None = None


def no_verdict_reason(side: FitSide | None) -> str | None:
    """Why ``side`` gets no verdict, or ``None``: its files could not be scanned (a corrupt
    header, an unreadable file: :attr:`FitSide.scan_failed`), or the scan found errors (a shard
    the index names is missing, a listed tensor in no shard, a dtype the safetensors format does
    not define): the sizes cannot be trusted, so neither can a verdict. The reason names the
    checkpoint and each error (the first three, then a count)."""
    if side is None:
        return None
    if side.scan_failed:
        return f"{side.role} {side.name}: the checkpoint cannot be scanned: {side.unavailable}"
    errors = side.scan.errors if side.scan is not None else []
    if not errors:
        return None
    assert side.scan is not None
    shown = "; ".join(f"{p.kind}: {p.detail}" for p in errors[:3])
    more = f"; and {len(errors) - 3} more" if len(errors) > 3 else ""
    return (f"{side.role} {side.name} ({side.scan.path}) was scanned with {len(errors)} "
            f"error(s), so its sizes cannot be trusted: {shown}{more}")


def compute_budgets(inputs: FitInputs, whatif: WhatIf | None = None
                    ) -> tuple[Comparison, list[OverlayRow]]:
    """Both budgets side by side with the what-if overrides (pure: no I/O), and the resident's
    live overlay (empty without live cards). Shared by ``seat-console fit`` and the TUI."""
    w = whatif or WhatIf()
    upd = {k: getattr(w, k) for k, v in w.model_dump().items()
           if v is not None and k not in ("placement", "engine")}
    seat = inputs.seat.model_copy(update=upd)
    cards = cards_for_tp(inputs.cards, seat.tensor_parallel_size, inputs.declared_total)

    def one(side: FitSide | None, placement: str | None) -> tuple[FitBudget | None, str | None]:
        if side is None:
            return None, "no candidate in the profile"
        if side.footprint is None:
            return None, side.unavailable
        p = seat.model_copy(update={"ple_placement": placement or side.ple_placement,
                                    "ple_host_sharing": side.ple_host_sharing,
                                    "cpu_kvcache_space_bytes": side.cpu_kvcache_space_bytes,
                                    "cpu_kvcache_space_source": side.cpu_kvcache_space_source,
                                    "engine_version": w.engine or side.engine_version})
        nv = no_verdict_reason(side)
        if inputs.gpu_errors:
            nv = "; ".join(filter(None, [nv, *inputs.gpu_errors]))
        return fit_budget(side.footprint, p, cards, host=inputs.host,
                          node_gpu_count=inputs.node_gpu_count,
                          declared_total=inputs.declared_total,
                          no_verdict=nv or None), None

    rb, rwhy = one(inputs.resident, None)
    cb, cwhy = one(inputs.candidate, w.placement)
    comp = compare(rb, cb, resident_unavailable=rwhy, candidate_unavailable=cwhy)
    overlay = live_overlay(rb, cards) if rb is not None and any(
        c.total_source == "nvml" for c in cards) else []
    return comp, overlay
