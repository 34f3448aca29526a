"""The fit reading: gathers what the fit budget needs from the node — checkpoint scans (cached
while the files do not change), the model shape, a GPU snapshot and host memory — into one
frozen :class:`~seat_console.fit.inputs.FitInputs`. The budget itself
(:mod:`seat_console.fit.inputs`, :mod:`seat_console.fit.budget`) is pure arithmetic over it, so
the TUI's what-if controls recompute without I/O.
"""

from __future__ import annotations

import os
import threading
from datetime import datetime
from pathlib import Path
from typing import Any

from seat_console.core.base import Source, Unavailable
from seat_console.core.checkpoint import CheckpointSummary
from seat_console.core.profile import CheckpointSpec, LoadedProfile, Profile
from seat_console.core.untrusted import load_json
from seat_console.fit.budget import (
    HostMemory,
    cards_for_seat,
    cpu_kv_space,
    footprint_declared,
    footprint_from_summary,
    is_cpu_device,
)
from seat_console.fit.engine_rules import EngineVersion, parse_engine
from seat_console.fit.inputs import FitInputs, FitSide, seat_params
from seat_console.fit.kvcache import config_from_shape
from seat_console.sources.checkpoint import CheckpointError, scan_checkpoint

__all__ = ["FitSource", "cpu_kv_space_for", "engine_version_for", "dir_name", "env_warnings", "gather_fit_inputs",
           "host_memory", "load_side", "make_source", "running_engine_versions",
           "version_read_at"]


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
        except (OSError, ValueError, RuntimeError) as exc:   # RuntimeError: ~nouser (expanduser)
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


def engine_version_for(role: str, spec: CheckpointSpec | None, *,
                       running: tuple[str, str] | None = None,
                       image: tuple[str, str, str] | None = None
                       ) -> tuple[EngineVersion | None, str | None]:
    """The engine version serving ``role`` and what was skipped, as (version or ``None``,
    problems in words or ``None``).

    In order: ``running`` = (the ``/version`` body's ``version``, where it was read) — the
    engine serving this side now; ``image`` = (package, version, image reference) from the
    image's package metadata (:func:`seat_console.sources.image_caps.image_engine_version`);
    the profile's ``<role>.engine``. A value that is not a version is skipped with the reason
    (outside input: never guessed). Never raises."""
    problems: list[str] = []
    tries: list[tuple[str, str]] = []
    if running is not None:
        tries.append((running[0], f"the running engine's /version ({running[1]})"))
    if image is not None:
        tries.append((f"{image[0]}=={image[1]}", f"image {image[2]} (package metadata)"))
    if spec is not None and spec.engine:
        tries.append((spec.engine, f"the profile's {role}.engine"))
    for text, src in tries:
        try:
            return parse_engine(text, src), "; ".join(problems) or None
        except ValueError as exc:
            problems.append(str(exc))
    return None, "; ".join(problems) or None


def version_read_at(engine: Any) -> datetime | None:
    """When an engine reading's ``version`` was read (UTC): its ``identity_at`` where it has
    one (the engine source asks ``/version`` every 15 s, not every read:
    :data:`seat_console.sources.engine.IDENTITY_KEEP_S`), else its ``read_at``; ``None`` when
    it has neither."""
    at = getattr(engine, "identity_at", None)
    return at if isinstance(at, datetime) else getattr(engine, "read_at", None)


def running_engine_versions(loaded: LoadedProfile, engine: Any | None,
                            containers: Any | None) -> dict[str, tuple[str, str]]:
    """The running engine's ``/version`` for the side it serves, as ``{role: (version,
    endpoint)}`` — the ``running_versions`` of :func:`gather_fit_inputs`. No I/O: ``engine`` is
    an engine reading (:class:`seat_console.sources.engine.EngineReading`, duck-typed:
    ``version``, ``healthy``, ``read_at`` and, where it has one, ``identity_at``: when the
    version was read, :func:`version_read_at`) and ``containers`` a containers reading (``get(name)``
    → a state with ``running`` and ``started_at``) or a seat reading
    (:class:`seat_console.sources.seat.SeatReading`: ``role``, ``since``), either possibly
    ``None`` or :class:`Unavailable`.

    The side is the candidate when only the candidate's container runs (after a swap), else the
    resident. Empty — the version is not known from the engine — when the reading is missing,
    unhealthy or has no version, or when the version was read before the serving container's
    start (a reading of the engine that served before a swap is not the new engine's version). The CLI's
    ``fit`` and the TUI's and exporter's fit source all take the side's version from here, so
    every front budgets the same side by the same rule (docs/fit.md, "The engine version")."""
    if engine is None or isinstance(engine, Unavailable):
        return {}
    version = getattr(engine, "version", None)
    if not isinstance(version, str) or getattr(engine, "healthy", None) is not True:
        return {}
    prof = loaded.profile
    conts = None if isinstance(containers, Unavailable) else containers
    if conts is not None and hasattr(conts, "role") and hasattr(conts, "since"):
        # a seat reading (seat_console.sources.seat.SeatReading): who holds the seat, since
        if conts.role not in ("resident", "probe"):
            return {}
        role = "candidate" if conts.role == "probe" and prof.candidate is not None \
            else "resident"
        started = conts.since
    else:
        def state(spec: Any) -> Any:
            get = getattr(conts, "get", None)
            name = getattr(spec, "container", None)
            return get(name) if name and callable(get) else None

        def running(spec: Any) -> bool | None:
            st = state(spec)
            return None if st is None else bool(getattr(st, "running", False))

        role = ("candidate" if prof.candidate is not None and running(prof.candidate)
                and running(prof.resident) is False else "resident")
        started = getattr(state(prof.candidate if role == "candidate" else prof.resident),
                          "started_at", None)
    read_at = version_read_at(engine)
    if started is not None and read_at is not None and read_at < started:
        return {}
    return {role: (version, str(prof.seat.endpoint))}


def gather_fit_inputs(loaded: LoadedProfile, snapshot: Any | None, *,
                      gpu_unavailable: str | None = None,
                      checkpoint: str | os.PathLike[str] | None = None,
                      candidate: str | os.PathLike[str] | None = None,
                      host: HostMemory | None = None,
                      containers: Any | None = None,
                      environ: Any | None = None,
                      running_versions: Any | None = None,
                      image_versions: Any | None = None) -> FitInputs:
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
    ``os.environ``). ``running_versions`` / ``image_versions``: per role (``"resident"``,
    ``"candidate"``), the running engine's ``/version`` as (version, where) and the serving
    image's engine as (package, version, image); each side's engine version is the first of
    those and the profile's ``<role>.engine`` (:func:`engine_version_for`).

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
    turns any exception into :class:`~seat_console.core.base.Unavailable`.
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
        from seat_console.core.gpu_ids import card_matches, seat_conflicts

        live = list(getattr(snapshot, "cards", None) or [])
        unmatched = [e for e in gpus if not any(card_matches(e, c) for c in live)]
        errors = seat_conflicts(gpus, live)
    # two entries spelling one card are refused by the profile itself (NodeSpec, one
    # identity per card: core.gpu_ids.entry_identity); two naming one live card, above
    warnings = env_warnings(os.environ if environ is None else environ,
                            "the console's environment")
    for role, spec in (("resident", prof.resident), ("candidate", prof.candidate)):
        name = getattr(spec, "container", None) if spec is not None else None
        get = getattr(containers, "get", None)
        state = get(name) if name and callable(get) else None
        if state is not None and getattr(state, "device_env", None):
            warnings += env_warnings(state.device_env, f"the {role} container {name}")
        side = resident if role == "resident" else cand
        if side is not None:
            ev, problem = engine_version_for(
                role, spec, running=(running_versions or {}).get(role),
                image=(image_versions or {}).get(role))
            side = side.model_copy(update={"engine_version": ev,
                                           "engine_version_problem": problem})
            if role == "resident":
                resident = side
            else:
                cand = side
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
                 containers_source: Source | None = None,
                 engine_source: Source | None = None) -> None:
        self.loaded = loaded
        self._gpu = gpu_source
        self._containers = containers_source
        self._engine = engine_source

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
            engine = self._engine.read() if self._engine is not None else None
            return gather_fit_inputs(self.loaded, snap, gpu_unavailable=why, host=host_memory(),
                                     containers=conts,
                                     running_versions=running_engine_versions(
                                         self.loaded, engine, conts))
        except Exception as exc:  # noqa: BLE001 - the contract: never raise into the UI
            return Unavailable(source="fit", kind="error",
                               reason=f"fit inputs failed: {type(exc).__name__}: {exc}")

    def close(self) -> None:
        """Close the GPU source it owns."""
        if self._gpu is not None:
            self._gpu.close()


def make_source(loaded_profile: LoadedProfile) -> FitSource:
    """The :class:`FitSource` for a loaded profile (the app's ``PANELS`` factory)."""
    return FitSource(loaded_profile)
