"""The fit source: gathers what the fit budget needs from the node — checkpoint scans (cached
while the files do not change), the model shape, a GPU snapshot and host memory — into one
frozen :class:`FitInputs`. The budget itself (:mod:`seat_console.fit.budget`) is pure arithmetic over it,
so the TUI's what-if controls recompute without I/O.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import Any

from pydantic import Field

from seat_console.fit.budget import (
    CardInput,
    Comparison,
    FitBudget,
    Footprint,
    HostMemory,
    OverlayRow,
    SeatParams,
    cards_for_seat,
    cards_for_tp,
    compare,
    cpu_kv_space,
    fit_budget,
    footprint_declared,
    footprint_from_summary,
    is_cpu_device,
    live_overlay,
)
from seat_console.sources.checkpoint import CheckpointError, CheckpointSummary, scan_checkpoint
from seat_console.fit.kvcache import config_from_shape
from seat_console.profile import (
    MAX_MODEL_LEN,
    MAX_NUM_SEQS,
    MAX_SIZE_BYTES,
    CheckpointSpec,
    LoadedProfile,
    Profile,
)
from seat_console.sources import Frozen, Source, Unavailable
from seat_console.sources.untrusted import load_json

__all__ = ["FitInputs", "FitSide", "FitSource", "WhatIf", "compute_budgets", "cpu_kv_space_for", "dir_name",
           "env_warnings", "gather_fit_inputs", "host_memory", "load_side", "make_source",
           "no_verdict_reason",
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


_scan_cache: dict[tuple[str, str], tuple[tuple[Any, ...], CheckpointSummary]] = {}
_scan_lock = threading.Lock()


def _dir_signature(path: Path) -> tuple[Any, ...]:
    sig = []
    try:
        for e in sorted(os.scandir(path), key=lambda e: e.name):
            if e.name.endswith((".safetensors", ".json")):
                st = e.stat()
                sig.append((e.name, st.st_size, st.st_mtime_ns))
    except OSError:
        return ()
    return tuple(sig)


def _scan_cached(path: Path, pattern: str) -> CheckpointSummary:
    key = (str(path), pattern)
    sig = _dir_signature(path)
    with _scan_lock:
        hit = _scan_cache.get(key)
        if hit is not None and hit[0] == sig and sig:
            return hit[1]
    summary = scan_checkpoint(path, ple_pattern=pattern)
    with _scan_lock:
        _scan_cache[key] = (sig, summary)
    return summary


def dir_name(path: str | os.PathLike[str]) -> str:
    """The name of checkpoint directory ``path`` (``~`` expanded; ``"."`` and a trailing ``/``
    resolved: ``"models/lab-tiny-llama/"`` → ``"lab-tiny-llama"``)."""
    p = Path(path).expanduser()
    return p.name or p.resolve().name or str(p)


def load_side(role: str, spec: CheckpointSpec, tp: int,
              override_path: str | os.PathLike[str] | None = None) -> FitSide:
    """Build one :class:`FitSide` from a profile checkpoint entry (I/O: scans files).

    ``override_path`` (``--checkpoint`` / ``--candidate``) replaces ``spec.path``; the side is
    then named after that directory (:func:`dir_name`), with a ``name_note`` on its footprint
    saying the profile's ``spec.name`` was overridden when the two differ. Never raises:
    a scan failure or missing sizes become ``unavailable`` with the reason and the fix.
    """
    path = Path(override_path).expanduser() if override_path else spec.path
    name, name_note = spec.name, None
    if override_path:
        name = dir_name(path)
        if name != spec.name:
            flag = "--checkpoint" if role == "resident" else f"--{role}"
            name_note = (f"named after the directory: {flag} overrides {role}.path: the "
                         f"profile's name {spec.name!r} does not apply")
    base = {"role": role, "name": name, "ple_placement": spec.ple_placement,
            "ple_host_sharing": spec.ple_host_sharing}
    if path is not None:
        try:
            summary = _scan_cached(Path(path), spec.ple_tensor_pattern)
        except CheckpointError as exc:
            return FitSide(**base, unavailable=str(exc), scan_failed=True)
        fp = footprint_from_summary(name, summary, name_note=name_note)
        if fp.kv_config is None and spec.model_shape is not None:
            fp = fp.model_copy(update={"kv_config": config_from_shape(spec.model_shape),
                                       "kv_config_source": f"{role}.model_shape (declared)"})
        return FitSide(**base, footprint=fp, scan=summary)
    if spec.weights_bytes_per_rank is None:
        return FitSide(**base, unavailable=(
            f"{role} {spec.name!r}: no checkpoint path and no declared weights_bytes_per_rank in "
            f"the profile (set {role}.path, or {role}.weights_bytes_per_rank and "
            f"{role}.ple_bytes)"))
    cfg: dict[str, Any] | None = None
    src: str | None = None
    if spec.config_json is not None:
        try:
            # bounded like every outside JSON (size, nesting, finite numbers; an InputError is
            # a ValueError naming the file)
            cfg = load_json(Path(spec.config_json).expanduser().read_bytes(),
                            str(spec.config_json))
            src = str(spec.config_json)
            if not isinstance(cfg, dict):
                raise ValueError(f"top level is a JSON {type(cfg).__name__}, expected an object")
        except (OSError, ValueError) as exc:
            return FitSide(**base, unavailable=f"{role}.config_json {spec.config_json}: cannot "
                                               f"read it as JSON: {exc}")
    elif spec.model_shape is not None:
        cfg = config_from_shape(spec.model_shape)
        src = f"{role}.model_shape (declared)"
    fp = footprint_declared(spec.name, int(spec.weights_bytes_per_rank), tp,
                            int(spec.ple_bytes) if spec.ple_bytes is not None else None, cfg, src)
    return FitSide(**base, footprint=fp)


def host_memory() -> HostMemory | None:
    """Host memory of the machine running the console, now: psutil ``virtual_memory()``
    ``total`` and ``available`` (bytes; ``available`` is what new processes can get without
    swapping, which a host-placed PLE table must fit in). ``None`` when psutil is missing or
    cannot read it (the budget then says host RAM "available n/a", never 0). Never raises."""
    try:
        import psutil

        vm = psutil.virtual_memory()
        return HostMemory(total_bytes=int(vm.total), available_bytes=int(vm.available))
    except Exception:  # noqa: BLE001 - host memory is optional to the budget
        return None


def _entry_identity(entry: str) -> str:
    """One spelling per device for a ``node.gpus`` entry (for duplicates without a reading)."""
    from seat_console.sources.gpu import norm_bus_id

    e = entry.strip()
    if e.isascii() and e.isdigit():
        return f"index:{int(e)}"
    if ":" in e and not e.upper().startswith(("GPU-", "MIG-")):
        return f"pci:{norm_bus_id(e) or e.lower()}"
    return e.lower()


def env_warnings(environ: Any, where: str) -> list[str]:
    """Warnings for the device-renumbering variables set in ``environ`` (a mapping, or a
    :class:`seat_console.sources.containers.ContainerState`'s ``device_env``), naming
    ``where`` (``"the console's environment"``, ``"container seat-resident"``)."""
    from seat_console.sources.containers import DEVICE_ENV_VARS

    out = []
    for k in DEVICE_ENV_VARS:
        v = environ.get(k) if hasattr(environ, "get") else None
        if isinstance(v, str):
            out.append(f"{k}={v!r} is set in {where}: it renumbers or hides CUDA devices; "
                       "node.gpus indices are NVML indices (nvidia-smi's order), not CUDA "
                       "ordinals — name cards by UUID to be sure")
    return out


def cpu_kv_space_for(role: str, prof: Profile, state: Any | None
                     ) -> tuple[int | None, str | None]:
    """The CPU backend's KV cache bytes for ``role``'s engine and where that came from, as
    (bytes or ``None``, words). ``state``: the role's
    :class:`seat_console.sources.containers.ContainerState` or ``None``.

    In order: ``VLLM_CPU_KVCACHE_SPACE`` in the role's container (``Config.Env``: what the
    running engine was given; vLLM's CPU platform reads it as int GiB —
    :func:`seat_console.fit.budget.cpu_kv_space`), then the profile's
    ``seat.cpu_kvcache_space_bytes``, then (candidate only, when its container is
    ``swap.container``) ``swap.env``. A value vLLM cannot read gives ``None`` with the reason.
    Never raises."""
    env = getattr(state, "engine_env", None) or {}
    raw, where = env.get("VLLM_CPU_KVCACHE_SPACE"), f"the {role} container {getattr(state, 'name', '')}"
    declared = prof.seat.cpu_kvcache_space_bytes
    swap = getattr(prof, "swap", None)
    if raw in (None, "") and declared is None and role == "candidate" and swap is not None \
            and prof.candidate is not None and prof.candidate.container == swap.container:
        raw, where = swap.env.get("VLLM_CPU_KVCACHE_SPACE"), "the profile's swap.env"
    if raw not in (None, ""):
        try:
            space = cpu_kv_space(raw)
        except ValueError as exc:
            return None, f"{exc} (in {where})"
        return space, f"VLLM_CPU_KVCACHE_SPACE={raw} in {where}"
    if declared is not None:
        return int(declared), "the profile's seat.cpu_kvcache_space_bytes"
    return None, None


def gather_fit_inputs(loaded: LoadedProfile, snapshot: Any | None, *,
                      gpu_unavailable: str | None = None,
                      checkpoint: str | os.PathLike[str] | None = None,
                      candidate: str | os.PathLike[str] | None = None,
                      host: HostMemory | None = None,
                      containers: Any | None = None,
                      environ: Any | None = None) -> FitInputs:
    """Assemble :class:`FitInputs` from the profile, a GPU snapshot (or ``None``) and host
    memory (I/O: scans checkpoint headers, reads ``config_json`` files).

    ``snapshot``: a :class:`seat_console.sources.gpu.GpuSnapshot` (cards matched to ``node.gpus``), or
    ``None`` for no live reading — then every card's total is ``node.declared_cuda_visible_bytes``
    (bytes) and ``gpu_unavailable`` says why. ``checkpoint`` / ``candidate``: directories that
    override the resident's / candidate's path (``--checkpoint`` / ``--candidate``); the side is
    then named after the directory. ``host``: host memory in bytes (:func:`host_memory`), or
    ``None`` for unknown. ``containers``: a
    :class:`seat_console.sources.containers.ContainersReading` (or ``None``), for the seat
    container's device variables; ``environ``: the console's environment (default
    ``os.environ``).

    GPU identity: :attr:`FitInputs.unmatched_gpus` (entries no live card matched),
    :attr:`FitInputs.gpu_errors` (entries resolving to one device: two TP ranks on one card;
    the budgets then get no verdict) and :attr:`FitInputs.env_warnings`
    (``CUDA_VISIBLE_DEVICES`` / ``CUDA_DEVICE_ORDER`` set here or in the seat container).

    Checkpoint problems are not raised: a :class:`seat_console.sources.checkpoint.CheckpointError` from
    scanning — the path is not a directory, it holds no ``*.safetensors``, a header is corrupt
    or a file unreadable (named with file and byte offset), the index has no ``weight_map``, or
    ``ple_tensor_pattern`` is not a valid regular expression — is caught and becomes that side's
    :attr:`FitSide.unavailable` reason with :attr:`FitSide.scan_failed` set (``seat-console
    fit`` exits 1 on it). Problems found while scanning (e.g. a missing shard) are in
    ``FitSide.scan.problems``. A side with neither a path nor declared sizes is ``unavailable``
    without ``scan_failed``. Nothing else is expected to raise; :meth:`FitSource.read` still
    turns any exception into :class:`~seat_console.sources.Unavailable`.
    """
    prof = loaded.profile
    tp = prof.seat.tensor_parallel_size
    resident = load_side("resident", prof.resident, tp, checkpoint)
    cand: FitSide | None = None
    if prof.candidate is not None or candidate:
        spec = prof.candidate or CheckpointSpec(name=dir_name(str(candidate)))
        cand = load_side("candidate", spec, tp, candidate)
    declared = (int(prof.node.declared_cuda_visible_bytes)
                if prof.node.declared_cuda_visible_bytes is not None else None)
    gpus = list(prof.node.gpus)
    cards = cards_for_seat(gpus, len(gpus), declared, snapshot)
    unmatched: list[str] = []
    errors: list[str] = []
    if snapshot is not None:
        from seat_console.sources.gpu import card_matches, seat_conflicts

        live = list(getattr(snapshot, "cards", None) or [])
        unmatched = [e for e in gpus if not any(card_matches(e, c) for c in live)]
        errors = seat_conflicts(gpus, live)
    seen: dict[str, str] = {}
    for e in gpus:
        ident = _entry_identity(e)
        if ident in seen and not errors:
            errors.append(f"node.gpus entries {seen[ident]!r} and {e!r} name the same device: "
                          "two TP ranks cannot share one card; list each card once")
        seen.setdefault(ident, e)
    warnings = env_warnings(os.environ if environ is None else environ,
                            "the console's environment")
    for role, spec in (("resident", prof.resident), ("candidate", prof.candidate)):
        name = getattr(spec, "container", None) if spec is not None else None
        get = getattr(containers, "get", None)
        state = get(name) if name and callable(get) else None
        if state is not None and getattr(state, "device_env", None):
            warnings += env_warnings(state.device_env, f"the {role} container {name}")
        side = resident if role == "resident" else cand
        if side is not None and is_cpu_device(prof.seat.device):
            space, where = cpu_kv_space_for(role, prof, state)
            upd = {"cpu_kvcache_space_bytes": space, "cpu_kvcache_space_source": where}
            if role == "resident":
                resident = resident.model_copy(update=upd)
            else:
                cand = side.model_copy(update=upd)
    return FitInputs(resident=resident, candidate=cand, seat=seat_params(prof),
                     cards=cards, gpu_unavailable=gpu_unavailable, host=host,
                     node_gpu_count=len(gpus), declared_total=declared,
                     unmatched_gpus=unmatched, gpu_errors=errors, env_warnings=warnings)


class FitSource(Source):
    """The fit panel's source: one :class:`FitInputs` per poll. Reads NVML through its own
    :class:`seat_console.sources.gpu.GpuSource` (µs per call), scans checkpoints only when their files
    change, and reads host memory with psutil. Never raises."""

    name = "fit"

    def __init__(self, loaded: LoadedProfile, gpu_source: Source | None = None,
                 containers_source: Source | None = None) -> None:
        self.loaded = loaded
        self._gpu = gpu_source
        self._containers = containers_source

    def _gpu_source(self) -> Source | None:
        if self._gpu is None:
            try:
                from seat_console.sources.gpu import make_source as make_gpu_source

                self._gpu = make_gpu_source(self.loaded)
            except Exception:  # noqa: BLE001
                return None
        return self._gpu

    def read(self) -> FitInputs | Unavailable:
        """One :class:`FitInputs` (or :class:`Unavailable` if assembling it failed)."""
        try:
            src = self._gpu_source()
            snap = src.read() if src is not None else None
            why = None
            if isinstance(snap, Unavailable) or snap is None:
                why = str(snap) if snap is not None else "GPU source could not be created"
                snap = None
            conts = self._containers.read() if self._containers is not None else None
            if isinstance(conts, Unavailable):
                conts = None
            return gather_fit_inputs(self.loaded, snap, gpu_unavailable=why, host=host_memory(),
                                     containers=conts)
        except Exception as exc:  # noqa: BLE001 - the contract: never raise into the UI
            return Unavailable(source="fit", kind="error",
                               reason=f"fit inputs failed: {type(exc).__name__}: {exc}")

    def close(self) -> None:
        """Close the GPU source it owns."""
        if self._gpu is not None:
            self._gpu.close()


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
    upd = {k: v for k, v in w.model_dump().items() if v is not None and k != "placement"}
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
                                    "cpu_kvcache_space_source": side.cpu_kvcache_space_source})
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


def make_source(loaded_profile: LoadedProfile) -> FitSource:
    """The :class:`FitSource` for a loaded profile (the app's ``PANELS`` factory)."""
    return FitSource(loaded_profile)
