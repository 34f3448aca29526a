"""GPU sampler: one batched NVML snapshot per tick, cards keyed by UUID and PCI bus id.

Shapes (all frozen pydantic models, bytes in code, UTC times):

* :class:`GpuSnapshot` — one tick: ``sampled_at``, ``sample_duration_s``, driver/NVML versions,
  ``cards`` (one :class:`GpuCard` per physical GPU, in NVML index order but *keyed* by UUID and
  PCI bus id, never by position), and which profile ``node.gpus`` entries matched nothing.
* :class:`GpuCard` — name, identity, ``state`` (``ok`` / ``lost`` / ``error``), memory
  (:class:`MemoryReading`), utilisation, temperature, power, running compute processes
  (:class:`GpuProcess`), MIG mode and instances (:class:`MigInstance`), and whether the card
  serves the seat (matched from the profile's ``node.gpus`` by UUID or index).

An unknown value is ``None`` (rendered ``n/a``), never 0. A field NVML reports as not supported
is listed in ``GpuCard.unsupported``; a field that failed for another reason is in
``GpuCard.errors`` with NVML's message; the other fields of the card stay live.

When the whole NVML is unusable the source returns :class:`seat_console.core.base.Unavailable` with
``source="nvml"`` and ``kind`` one of ``no-library``, ``no-driver``, ``version-mismatch``,
``no-permission``, ``no-gpu`` or ``error`` (see :mod:`seat_console.node.nvml`).

Each field's docstring names the equivalent ``nvidia-smi --query-gpu=...`` (or
``--query-compute-apps=...``) field, so a reader can check a value by hand.
"""

from __future__ import annotations

import logging
import os
import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, Literal

import psutil
from pydantic import Field, model_validator

from seat_console.node.nvml import (
    NA,
    GpuLost,
    Nvml,
    NvmlCallError,
    NvmlUnavailable,
    is_na,
    na_to_none,
)
from seat_console.core.gpu_ids import card_matches, norm_bus_id, seat_conflicts
from seat_console.core.profile import LoadedProfile
from seat_console.node.docker import docker_client
from seat_console.core.base import Frozen, Source, Unavailable, utcnow
from seat_console.core.partial import Kept, keep

log = logging.getLogger(__name__)

MemoryApi = Literal["v2", "v1"]
"""Which NVML memory call produced a reading: ``nvmlDeviceGetMemoryInfo_v2`` (``used`` excludes
the driver-reserved part, which is reported separately) or the original v1 call (``used``
includes the reserved part; no ``reserved`` figure)."""

ProcessApi = Literal["v3", "v2", "v1"]
"""Which ``nvmlDeviceGetComputeRunningProcesses`` version listed the processes."""

CardState = Literal["ok", "lost", "error"]
"""``ok``: the card answered; ``lost``: NVML_ERROR_GPU_IS_LOST (fallen off the bus, needs a
reset or reboot); ``error``: the card's handle or identity could not be read at all."""


class MemoryReading(Frozen):
    """Device memory of one card or MIG instance, in bytes.

    Source: NVML ``nvmlDeviceGetMemoryInfo_v2`` (``api="v2"``), else ``nvmlDeviceGetMemoryInfo``
    (``api="v1"``, where ``used`` includes the reserved part: ``used_includes_reserved=True``, and
    ``reserved_bytes`` / ``cuda_visible_bytes`` are ``None``). NVML API reference, "Device
    Queries", ``nvmlMemory_v2_t``: total = reserved + used + free.

    ``cuda_visible_bytes`` = total − reserved: the total that CUDA (``cudaMemGetInfo``,
    ``torch.cuda.mem_get_info``) reports and that vLLM budgets ``gpu_memory_utilization``
    from (vLLM ``vllm/v1/worker/gpu_worker.py`` ``init_device``: requested memory =
    total × ``gpu_memory_utilization``, the total taken from ``torch.cuda.mem_get_info`` by
    ``MemorySnapshot`` in ``vllm/utils/mem_utils.py``).
    On an H200: 150,754,820,096 − 644,939,776 = 150,109,880,320 B. If not given it is computed.
    """

    api: MemoryApi
    total_bytes: int | None = None
    """``memory.total`` (nvidia-smi prints MiB)."""
    reserved_bytes: int | None = None
    """``memory.reserved``: set aside by the driver/firmware; ``None`` with the v1 API."""
    used_bytes: int | None = None
    """``memory.used``; with ``api="v1"`` it includes the reserved part."""
    free_bytes: int | None = None
    """``memory.free``."""
    used_includes_reserved: bool = False
    """True for v1 readings: label ``used`` as "used incl. reserved"."""
    cuda_visible_bytes: int | None = None
    """total − reserved (what vLLM budgets from); ``None`` when reserved is unknown (v1)."""

    @model_validator(mode="before")
    @classmethod
    def _derive(cls, data: object) -> object:
        if isinstance(data, dict):
            data = dict(data)
            if data.get("api") == "v1":
                data.setdefault("used_includes_reserved", True)
            if data.get("cuda_visible_bytes") is None:
                total, reserved = data.get("total_bytes"), data.get("reserved_bytes")
                if total is not None and reserved is not None:
                    data["cuda_visible_bytes"] = total - reserved
        return data

    @model_validator(mode="after")
    def _consistent(self) -> MemoryReading:
        if self.api == "v1" and not self.used_includes_reserved:
            raise ValueError("a v1 memory reading always counts reserved memory as used")
        if (self.cuda_visible_bytes is not None and self.total_bytes is not None
                and self.reserved_bytes is not None
                and self.cuda_visible_bytes != self.total_bytes - self.reserved_bytes):
            raise ValueError("cuda_visible_bytes must equal total_bytes - reserved_bytes")
        return self

    @property
    def used_label(self) -> str:
        """How to label ``used_bytes``: ``"used"`` (v2) or ``"used incl. reserved"`` (v1)."""
        return "used incl. reserved" if self.used_includes_reserved else "used"


class ContainerRef(Frozen):
    """The container a GPU process runs in, parsed from the host's ``/proc/PID/cgroup``.

    ``runtime`` is the engine the cgroup path names: ``docker`` (``/docker/<id>``,
    ``docker-<id>.scope``), ``containerd`` (``cri-containerd-<id>.scope``, ``/containerd/<id>``),
    ``cri-o`` (``crio-<id>.scope``), ``podman`` (``libpod-<id>.scope``), or ``kubepods`` for a
    Kubernetes cgroupfs path that names no engine (``/kubepods/<qos>/pod<uid>/<id>``).
    ``pod_uid`` is set for any container of a Kubernetes pod. ``id`` is the full 64-hex container
    id; ``name`` is resolved through the docker engine when it is reachable, else ``None``.
    """

    runtime: str
    id: str
    name: str | None = None
    pod_uid: str | None = None

    @property
    def short_id(self) -> str:
        """The first 12 hex digits, as ``docker ps`` prints them."""
        return self.id[:12]


class GpuProcess(Frozen):
    """One process holding a compute context on a card (``nvidia-smi --query-compute-apps``).

    ``pid`` is as NVML reports it: a PID in the *host's* PID namespace. ``mapped`` is False when
    this console cannot see that PID as a GPU user (it runs in another PID namespace, or the
    process has exited since NVML listed it); ``unmapped_reason`` then says which. An unmapped
    process's memory still counts.
    """

    pid: int
    """``pid``."""
    used_memory_bytes: int | None = None
    """``used_memory`` (nvidia-smi prints MiB); ``None`` where NVML cannot attribute memory."""
    gpu_instance_id: int | None = None
    """``gpu_instance_id`` (MIG only; ``None`` otherwise)."""
    compute_instance_id: int | None = None
    """``compute_instance_id`` (MIG only)."""
    mapped: bool = False
    unmapped_reason: str | None = None
    name: str | None = None
    """``process_name`` (psutil ``Process.name()``)."""
    command: list[str] | None = None
    """The command line (psutil ``Process.cmdline()``); ``None`` when not readable."""
    username: str | None = None
    container: ContainerRef | None = None


class MigInstance(Frozen):
    """One MIG device (GPU instance + compute instance) of a MIG-enabled card.

    ``nvidia-smi -L`` lists them as ``MIG 3g.71gb Device 0: (UUID: MIG-…)``; memory is the
    instance's own (``nvmlDeviceGetMemoryInfo`` on the MIG handle).
    """

    index: int
    """Position under the parent (``nvmlDeviceGetMigDeviceHandleByIndex``)."""
    uuid: str | None = None
    name: str | None = None
    gpu_instance_id: int | None = None
    compute_instance_id: int | None = None
    memory: MemoryReading | None = None
    processes: list[GpuProcess] | None = None
    """``None`` when NVML could not list them (n/a), ``[]`` when none run."""


class GpuCard(Frozen):
    """One physical GPU in one tick. Keyed by ``uuid`` (else ``pci_bus_id``), never by index."""

    index: int | None = None
    """``index``: NVML's enumeration order; may change across reboots — display only."""
    uuid: str | None = None
    """``uuid`` (``GPU-…``)."""
    pci_bus_id: str | None = None
    """``pci.bus_id`` (``00000000:18:00.0``)."""
    state: CardState = "ok"
    state_reason: str | None = None
    name: str | None = None
    """``name`` (``NVIDIA H200``)."""
    serves_seat: bool = False
    """True when a profile ``node.gpus`` entry (UUID or index) matched this card."""
    seat_match: str | None = None
    """The ``node.gpus`` entry that matched (``"0"`` or ``"GPU-…"``)."""
    memory: MemoryReading | None = None
    utilization_gpu_pct: int | None = None
    """``utilization.gpu`` (%, over the driver's last sample period)."""
    utilization_memory_pct: int | None = None
    """``utilization.memory`` (% of time device memory was read or written)."""
    temperature_c: int | None = None
    """``temperature.gpu`` (°C)."""
    power_draw_mw: int | None = None
    """``power.draw`` (nvidia-smi prints W; NVML ``nvmlDeviceGetPowerUsage`` gives mW)."""
    power_limit_mw: int | None = None
    """``enforced.power.limit`` (mW; nvidia-smi prints W)."""
    processes: list[GpuProcess] | None = None
    """Compute processes on the whole card (with MIG: the union over instances). ``None`` when
    NVML could not list them (n/a), ``[]`` when none run."""
    processes_api: ProcessApi | None = None
    mig_enabled: bool | None = None
    """``mig.mode.current`` == Enabled; ``None`` when the card has no MIG support."""
    mig_instances: list[MigInstance] = Field(default_factory=list)
    unsupported: list[str] = Field(default_factory=list)
    """Model field names NVML reported as not supported on this card (shown as n/a)."""
    errors: dict[str, str] = Field(default_factory=dict)
    """Model field name → NVML error text for fields that failed otherwise (shown as n/a)."""

    @property
    def key(self) -> str:
        """Stable identity: the UUID, else ``pci:<bus id>``, else ``index:<n>`` (last resort)."""
        if self.uuid:
            return self.uuid
        if self.pci_bus_id:
            return f"pci:{self.pci_bus_id}"
        return f"index:{self.index}"

    @property
    def process_memory_bytes(self) -> int | None:
        """Sum of the known per-process memory (unmapped processes included); ``None`` if the
        process list is n/a, or processes run but NVML attributes memory to none of them
        (unknown, never "0 B"); 0 only when no process runs."""
        if self.processes is None:
            return None
        known = [p.used_memory_bytes for p in self.processes if p.used_memory_bytes is not None]
        if self.processes and not known:
            return None
        return sum(known)


class GpuSnapshot(Frozen):
    """One batched NVML sample of every card (what ``seat-console gpus --json`` prints)."""

    sampled_at: datetime = Field(default_factory=utcnow)
    """When the sample started (UTC)."""
    sample_duration_s: float = 0.0
    """Wall time the whole batch took, seconds."""
    driver_version: str | None = None
    """``driver_version`` (``580.159.04``)."""
    nvml_version: str | None = None
    cuda_driver_version: str | None = None
    """The CUDA version the driver supports (``13.0``), as ``nvidia-smi``'s header shows."""
    memory_api: MemoryApi | None = None
    """The memory API chosen by probing (v2 preferred)."""
    process_api: ProcessApi | None = None
    """The running-processes API chosen by probing (v3 → v2 → v1)."""
    cards: list[GpuCard] = Field(default_factory=list)
    seat_gpus: list[str] = Field(default_factory=list)
    """The profile's ``node.gpus`` entries."""
    unmatched_seat_gpus: list[str] = Field(default_factory=list)
    """``node.gpus`` entries that matched no card present (wrong UUID, card missing)."""
    seat_conflicts: list[str] = Field(default_factory=list)
    """``node.gpus`` entries resolving to one device (two TP ranks on one card), in words
    (:func:`seat_conflicts`); an error for the seat."""
    kept: tuple[Kept, ...] = ()
    """Card fields this sample missed (NVML errors) that the app filled from the last good
    sample, with the time each was really read (:meth:`with_last_good`)."""

    def with_last_good(self, last: GpuSnapshot) -> GpuSnapshot:
        """This sample with each card's failed fields (:attr:`GpuCard.errors`, e.g. the
        process list of one card while its memory was read) taken from the same card — by
        UUID / PCI bus id, never by position — in ``last``, the app's last good sample, where
        that card was ``ok`` and had the value (read, or kept itself). A filled field leaves
        ``errors`` and is listed in ``kept`` (:mod:`seat_console.core.partial`). Fields
        NVML does not support, lost cards and MIG instances are never filled."""
        kept: list[Kept] = []
        cards: list[GpuCard] = []
        for c in self.cards:
            lc = last.card(c.key) if c.state == "ok" and c.errors else None
            update: dict[str, Any] = {}
            errors = dict(c.errors)
            if lc is not None and lc.state == "ok" and lc.key == c.key:
                for field, why in c.errors.items():
                    if (field not in GpuCard.model_fields or getattr(c, field) is not None
                            or getattr(lc, field) is None):
                        continue
                    key = f"cards[{c.key}].{field}"
                    if field in lc.errors and not any(k.field == key for k in last.kept):
                        continue
                    k = keep(last, key, f"GPU {c.index} {field.replace('_', ' ')}", why)
                    if k is None:
                        continue
                    update[field] = getattr(lc, field)
                    if field == "processes":
                        update["processes_api"] = lc.processes_api
                    del errors[field]
                    kept.append(k)
            cards.append(c.model_copy(update={**update, "errors": errors}) if update else c)
        if not kept:
            return self
        return self.model_copy(update={"cards": cards, "kept": tuple(kept)})

    def card(self, key: str) -> GpuCard | None:
        """The card whose UUID, PCI bus id or :attr:`GpuCard.key` equals ``key``, else None."""
        for c in self.cards:
            if key in (c.uuid, c.pci_bus_id, c.key):
                return c
        return None

    @property
    def seat_cards(self) -> list[GpuCard]:
        """The cards that serve the seat, in profile order is not guaranteed (NVML order)."""
        return [c for c in self.cards if c.serves_seat]


# ====================================================================== cgroup → container

_SCOPE_RE = re.compile(r"(docker|cri-containerd|crio|libpod)-([0-9a-f]{64})\.scope")
_PATH_RE = re.compile(r"/(docker|containerd|crio|libpod|moby)/([0-9a-f]{64})(?=/|$)")
_BARE_ID_RE = re.compile(r"/([0-9a-f]{64})(?=/|$)")
_POD_RE = re.compile(
    r"pod([0-9a-f]{8}[-_][0-9a-f]{4}[-_][0-9a-f]{4}[-_][0-9a-f]{4}[-_][0-9a-f]{12})")
_RUNTIME = {"docker": "docker", "moby": "docker", "cri-containerd": "containerd",
            "containerd": "containerd", "crio": "cri-o", "libpod": "podman"}


def parse_cgroup(text: str) -> ContainerRef | None:
    """The container a process runs in, from the text of ``/proc/PID/cgroup``, or None.

    Each line is ``hierarchy-ID:controller-list:cgroup-path`` (man 7 cgroups). cgroup v2 has the
    single line ``0::PATH``; v1 has one line per hierarchy. The v2 line is preferred, then v1
    lines in file order. Recognised paths (the innermost container id wins when nested):

    * docker, cgroupfs driver: ``/docker/<64 hex>``; systemd driver: ``/system.slice/docker-<id>.scope``
    * containerd / CRI: ``…/cri-containerd-<id>.scope``, ``/containerd/<id>``
    * CRI-O: ``…/crio-<id>.scope``; podman: ``…/libpod-<id>.scope``
    * Kubernetes: ``/kubepods/<qos>/pod<uid>/<id>`` and
      ``/kubepods.slice/…/kubepods-<qos>-pod<uid_with_underscores>.slice/<engine>-<id>.scope``

    Paths are relative to the reader's cgroup namespace; read from the host's namespace they are
    absolute. Returns None for a host process (``0::/user.slice/…``, ``/init.scope``).
    """
    # the kernel ends each line with "\n" only: str.splitlines would also cut a path at
    # U+2028, \x1c or \x85 (valid in a directory name) and lose the inner container (issue #22)
    lines = [ln for ln in text.split("\n") if ln.strip()]
    v2 = [ln for ln in lines if ln.startswith("0::")]
    ordered = v2 + [ln for ln in lines if not ln.startswith("0::")]
    for line in ordered:
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        path = parts[2]
        pod = _POD_RE.search(path)
        pod_uid = pod.group(1).replace("_", "-") if pod else None
        # every container id the path names, of any spelling; the deepest one (the latest in
        # the path) is the container the process runs in. Scopes were tried before plain paths,
        # so /system.slice/docker-<outer>.scope/docker/<inner> was given to the outer container
        # (issue #22).
        found: list[tuple[int, int, str, str]] = []  # (end, priority, runtime, id)
        found += [(m.end(2), 2, _RUNTIME[m.group(1)], m.group(2))
                  for m in _SCOPE_RE.finditer(path)]
        found += [(m.end(2), 2, _RUNTIME[m.group(1)], m.group(2))
                  for m in _PATH_RE.finditer(path)]
        if "kubepods" in path:
            found += [(m.end(1), 1, "kubepods", m.group(1)) for m in _BARE_ID_RE.finditer(path)]
        if found:
            _end, _prio, runtime, cid = max(found)
            return ContainerRef(runtime=runtime, id=cid, pod_uid=pod_uid)
    return None


# ====================================================================== PID → process

_GONE = ("no such PID here: the process runs in another PID namespace (e.g. the console runs "
         "in a container without --pid=host) or has exited since NVML listed it")


@dataclass
class _Mapped:
    create_time: float | None
    fields: dict[str, Any]


def _start_ticks(pid: int) -> float | None:
    """Start time of ``pid`` in clock ticks since boot (``/proc/PID/stat`` field 22), or None
    when no such process is visible here."""
    try:
        with open(f"{psutil.PROCFS_PATH}/{pid}/stat", "rb") as fh:
            data = fh.read()
    except OSError:
        return None
    try:
        return float(data[data.rindex(b")") + 2:].split()[19])
    except (ValueError, IndexError):
        return None


class ProcessMapper:
    """Maps NVML's host PIDs to process name, command line, user and container.

    ``proc_root`` is the host's ``/proc`` (the console must share the host's PID namespace to see
    the processes; otherwise every PID is reported unmapped, with that reason, and its memory
    still counts). A PID that exists here but holds no ``/dev/nvidia*`` file descriptor is *not*
    the process NVML meant (another PID namespace reuses the number) and is reported unmapped.
    Results are cached per (PID, start time), so a long-lived engine costs one ``/proc`` read of
    its start time per tick. ``container_namer(ref) -> name | None`` resolves container names
    (None: names left empty). ``require_gpu_fd=False`` skips the ``/dev/nvidia*`` check (for
    reading a process that is known to be the right one, e.g. in tests without a GPU).
    """

    def __init__(self, proc_root: str | os.PathLike[str] = "/proc",
                 container_namer: Callable[[ContainerRef], str | None] | None = None,
                 require_gpu_fd: bool = True) -> None:
        self.proc_root = Path(proc_root)
        self.container_namer = container_namer
        self.require_gpu_fd = require_gpu_fd
        self._cache: dict[int, _Mapped] = {}

    def map(self, pid: int) -> dict[str, Any]:
        """Fields for :class:`GpuProcess` (``mapped``, ``unmapped_reason``, ``name``,
        ``command``, ``username``, ``container``). Never raises.

        The cache key is the process start time (field 22 of ``/proc/PID/stat``, clock ticks
        since boot; man 5 proc), read with one small file read per tick."""
        start = _start_ticks(pid)
        if start is None:
            self._cache.pop(pid, None)
            return {"mapped": False, "unmapped_reason": _GONE}
        cached = self._cache.get(pid)
        if cached is not None and cached.create_time == start:
            return cached.fields
        try:
            proc: psutil.Process | None = psutil.Process(pid)
        except psutil.ZombieProcess:
            return {"mapped": False, "unmapped_reason": "process has exited (zombie)"}
        except psutil.NoSuchProcess:
            return {"mapped": False, "unmapped_reason": _GONE}
        except (psutil.AccessDenied, OSError) as exc:
            proc = None
            log.debug("pid %s: %s", pid, exc)
        fields = self._inspect(pid, proc)
        self._cache[pid] = _Mapped(start, fields)
        return fields

    def forget_except(self, pids: set[int]) -> None:
        """Drop cache entries of PIDs not in ``pids`` (called once per tick)."""
        for pid in list(self._cache):
            if pid not in pids:
                del self._cache[pid]

    def _holds_nvidia_device(self, pid: int) -> bool | None:
        """True if the process has a ``/dev/nvidia*`` fd open, False if not, None if unknown."""
        fd_dir = self.proc_root / str(pid) / "fd"
        try:
            names = os.listdir(fd_dir)
        except FileNotFoundError:
            return False
        except OSError:
            return None
        for name in names:
            try:
                if os.readlink(fd_dir / name).startswith("/dev/nvidia"):
                    return True
            except OSError:
                continue
        return False

    def _inspect(self, pid: int, proc: psutil.Process | None) -> dict[str, Any]:
        fields: dict[str, Any] = {"mapped": True, "unmapped_reason": None}
        if proc is not None:
            with proc.oneshot():
                for key, getter in (("name", proc.name), ("command", proc.cmdline),
                                    ("username", proc.username)):
                    try:
                        fields[key] = getter()
                    except (psutil.AccessDenied, psutil.ZombieProcess, OSError, KeyError):
                        fields[key] = None
                    except psutil.NoSuchProcess:
                        return {"mapped": False, "unmapped_reason": _GONE}
            if fields.get("command") == []:
                fields["command"] = None  # kernel thread or unreadable
        holds = self._holds_nvidia_device(pid) if self.require_gpu_fd else None
        if holds is False:
            return {"mapped": False, "unmapped_reason": (
                f"PID {pid} here is {fields.get('name') or 'a process'} holding no /dev/nvidia* "
                "device: NVML's PID is from another PID namespace (run the console with the "
                "host's PID namespace)")}
        try:
            text = (self.proc_root / str(pid) / "cgroup").read_text()
        except OSError:
            text = ""
        ref = parse_cgroup(text)
        if ref is not None and self.container_namer is not None:
            try:
                name = self.container_namer(ref)
            except Exception as exc:  # noqa: BLE001 - names are best effort
                log.debug("container name for %s: %s", ref.id, exc)
                name = None
            if name:
                ref = ref.model_copy(update={"name": name})
        fields["container"] = ref
        return fields


class DockerNamer:
    """Resolves docker container ids to names through the docker engine (SDK), best effort.

    ``base_url``: the profile's ``node.docker_host`` (None: ``DOCKER_HOST`` or the local socket).
    Each lookup has a 2 s timeout; names are cached by id; after a failure to reach the engine
    no lookup is tried for 60 s. Only ``docker`` (and ``podman``, whose API is compatible when
    its socket is given) ids are looked up. Returns None when unknown.
    """

    def __init__(self, base_url: str | None = None, timeout_s: float = 2.0) -> None:
        self.base_url = base_url
        self.timeout_s = timeout_s
        self._client: Any = None
        self._names: dict[str, str | None] = {}
        self._retry_at = 0.0

    def __call__(self, ref: ContainerRef) -> str | None:
        if ref.runtime not in ("docker", "podman"):
            return None
        if ref.id in self._names:
            return self._names[ref.id]
        if time.monotonic() < self._retry_at:
            return None
        try:
            if self._client is None:
                self._client = docker_client(self.base_url, timeout_s=self.timeout_s)
            name = self._client.containers.get(ref.id).name
        except Exception as exc:  # noqa: BLE001 - engine down / no SDK / not found
            if type(exc).__name__ == "NotFound":
                self._names[ref.id] = None
            else:
                self._retry_at = time.monotonic() + 60.0
                log.debug("docker name lookup failed: %s", exc)
            return None
        self._names[ref.id] = name
        return name

    def close(self) -> None:
        """Close the SDK client, if one was made."""
        if self._client is not None:
            try:
                self._client.close()
            except Exception as exc:  # noqa: BLE001 - closing
                log.debug("closing the docker client: %s", exc)
            self._client = None


# ====================================================================== seat matching


def _norm_bus_id(bus_id: str) -> str:
    return norm_bus_id(bus_id) or bus_id.lower()


# ====================================================================== the sampler

_MEM_FIELDS = "memory"


_MAX_BYTES = 1 << 56
"""Largest device memory figure believed (64 PiB); NVML's "not available" value is 2^64 − 1."""


def checked_memory(m: dict[str, Any]) -> tuple[dict[str, int | None], str | None]:
    """NVML memory figures (``total``, ``reserved``, ``used``, ``free``, bytes) with impossible
    values made unknown, and why (or ``None``): a value that is not an integer, is negative or
    above 2^56 (NVML_VALUE_NOT_AVAILABLE is 2^64 − 1) is ``None``; ``reserved``, ``used`` or
    ``free`` above ``total`` is ``None`` — so free memory and the CUDA-visible total (total −
    reserved) are never negative. Never raises."""
    out: dict[str, int | None] = {}
    bad: list[str] = []
    for k in ("total", "reserved", "used", "free"):
        v = m.get(k)
        if v is None:
            out[k] = None
        elif isinstance(v, bool) or not isinstance(v, int) or not 0 <= v <= _MAX_BYTES:
            out[k] = None
            bad.append(f"{k} {v!r} is not a byte count")
        else:
            out[k] = v
    total = out["total"]
    if total is not None:
        for k in ("reserved", "used", "free"):
            v = out[k]
            if v is not None and v > total:
                out[k] = None
                bad.append(f"{k} {v:,} B is above total {total:,} B")
    return out, ("NVML memory reading inconsistent: " + "; ".join(bad) + " (shown as n/a)"
                 if bad else None)


def _guarded(field: str, call: Callable[[], Any], unsupported: list[str],
             errors: dict[str, str]) -> Any:
    """Run one NVML read for snapshot field ``field``.

    Returns the value; or ``None`` with ``field`` appended to ``unsupported`` when NVML says
    NOT_SUPPORTED / FUNCTION_NOT_FOUND (the gateway's n/a sentinel, :func:`seat_console.node.nvml.is_na`);
    or ``None`` with ``errors[field]`` set to the message when the call failed otherwise. Never 0
    for an unknown. :class:`seat_console.node.nvml.GpuLost` is not caught: a lost card ends the card's
    read.
    """
    try:
        value = call()
    except NvmlCallError as exc:
        errors[field] = exc.message
        return None
    if is_na(value):
        unsupported.append(field)
        return None
    return value


class GpuSampler:
    """Takes one batched :class:`GpuSnapshot` per call from an :class:`~seat_console.node.nvml.Nvml`.

    ``seat_gpus``: the profile's ``node.gpus`` entries (index or UUID) that mark seat cards.
    ``mapper``: maps PIDs to processes/containers (default: the host's ``/proc``, no names).
    :meth:`sample` returns the snapshot, or :class:`Unavailable` (``source="nvml"``) when NVML
    as a whole cannot be used or finds no GPU. It never raises for NVML errors; a bug surfaces
    as an exception for the :class:`GpuSource` to turn into ``Unavailable(kind="error")``.
    """

    def __init__(self, nvml: Nvml, seat_gpus: list[str] | None = None,
                 mapper: ProcessMapper | None = None, mig_mode_ttl_s: float = 30.0) -> None:
        self.nvml = nvml
        self.seat_gpus = list(seat_gpus or [])
        self.mapper = mapper if mapper is not None else ProcessMapper()
        self.mig_mode_ttl_s = mig_mode_ttl_s
        """How long a card's MIG mode is reused before it is read again (s). The current MIG
        mode changes only with a GPU reset, and ``nvmlDeviceGetMigMode`` measured ~183 µs on an
        H200 — more than every other call of a card's tick together (docs/benchmarks.md)."""
        self._system: dict[str, str | None] | None = None
        self._last_identity: dict[int, dict[str, Any]] = {}
        self._mig_mode: dict[str, tuple[float, Any]] = {}

    def sample(self) -> GpuSnapshot | Unavailable:
        """One snapshot of every card. See the class docstring.

        ``sample_duration_s`` covers the batch of reads, not NVML's one-time initialisation
        (about 0.1 s on the H200), which happens before the clock starts."""
        sampled_at = utcnow()
        try:
            self.nvml.init()
            t0 = time.perf_counter()
            sampled_at = utcnow()
            count = self.nvml.call("nvmlDeviceGetCount")
            system = self._system_info()
            if is_na(count):
                return Unavailable(source="nvml", kind="error",
                                   reason="nvmlDeviceGetCount is not available")
            if count == 0:
                return Unavailable(source="nvml", kind="no-gpu",
                                   reason="NVML works but finds no GPU (driver "
                                          f"{system.get('driver_version') or 'n/a'})")
            cards = [self._card(i) for i in range(int(count))]
        except NvmlUnavailable as exc:
            self._system = None
            return Unavailable(source="nvml", kind=exc.kind, reason=exc.reason, at=sampled_at)
        except NvmlCallError as exc:
            return Unavailable(source="nvml", kind="error", reason=str(exc), at=sampled_at)
        pids = {p.pid for c in cards for p in (c.processes or [])}
        self.mapper.forget_except(pids)
        cards = self._mark_seat(cards)
        unmatched = [e for e in self.seat_gpus if not any(card_matches(e, c) for c in cards)]
        return GpuSnapshot(
            sampled_at=sampled_at,
            sample_duration_s=time.perf_counter() - t0,
            driver_version=system.get("driver_version"),
            nvml_version=system.get("nvml_version"),
            cuda_driver_version=system.get("cuda_driver_version"),
            memory_api=self.nvml.memory_api,
            process_api=self.nvml.process_api,
            cards=cards,
            seat_gpus=self.seat_gpus,
            unmatched_seat_gpus=unmatched,
            seat_conflicts=seat_conflicts(self.seat_gpus, cards),
        )

    # ------------------------------------------------------------------ pieces
    def _system_info(self) -> dict[str, str | None]:
        if self._system is None:
            info: dict[str, str | None] = {}
            for key, fn in (("driver_version", "nvmlSystemGetDriverVersion"),
                            ("nvml_version", "nvmlSystemGetNVMLVersion")):
                try:
                    info[key] = na_to_none(Nvml.text(self.nvml.call(fn)))
                except NvmlCallError:
                    info[key] = None
            try:
                cuda = self.nvml.call("nvmlSystemGetCudaDriverVersion")
            except NvmlCallError:
                cuda = NA
            info["cuda_driver_version"] = (None if is_na(cuda)
                                           else f"{int(cuda) // 1000}.{int(cuda) % 1000 // 10}")
            self._system = info
        return self._system

    def _mark_seat(self, cards: list[GpuCard]) -> list[GpuCard]:
        out = []
        for card in cards:
            entry = next((e for e in self.seat_gpus if card_matches(e, card)), None)
            if entry is not None:
                card = card.model_copy(update={"serves_seat": True, "seat_match": entry})
            out.append(card)
        return out

    def _card(self, index: int) -> GpuCard:
        f: dict[str, Any] = {"index": index}
        unsupported: list[str] = []
        errors: dict[str, str] = {}

        def read(field: str, fn: str, *args: Any) -> Any:
            """One NVML value for ``field`` (see :func:`_guarded`)."""
            return _guarded(field, lambda: self.nvml.call(fn, *args), unsupported, errors)

        try:
            handle = self.nvml.call("nvmlDeviceGetHandleByIndex", index)
            if is_na(handle):
                raise NvmlCallError("nvmlDeviceGetHandleByIndex", None, "not available")
            uuid = read("uuid", "nvmlDeviceGetUUID", handle)
            f["uuid"] = Nvml.text(uuid) if uuid is not None else None
            pci = read("pci_bus_id", "nvmlDeviceGetPciInfo", handle)
            f["pci_bus_id"] = Nvml.text(pci.busId) if pci is not None else None
            name = read("name", "nvmlDeviceGetName", handle)
            f["name"] = Nvml.text(name) if name is not None else None
            self._last_identity[index] = {k: f.get(k) for k in ("uuid", "pci_bus_id", "name")}
            f["memory"] = self._memory(handle, unsupported, errors)
            util = read("utilization_gpu_pct", "nvmlDeviceGetUtilizationRates", handle)
            if util is not None:
                f["utilization_gpu_pct"] = int(util.gpu)
                f["utilization_memory_pct"] = int(util.memory)
            elif "utilization_gpu_pct" in unsupported:
                unsupported.append("utilization_memory_pct")
            elif "utilization_gpu_pct" in errors:
                errors["utilization_memory_pct"] = errors["utilization_gpu_pct"]
            sensor = getattr(self.nvml.module, "NVML_TEMPERATURE_GPU", 0)
            f["temperature_c"] = read("temperature_c", "nvmlDeviceGetTemperature", handle, sensor)
            f["power_draw_mw"] = read("power_draw_mw", "nvmlDeviceGetPowerUsage", handle)
            f["power_limit_mw"] = read("power_limit_mw", "nvmlDeviceGetEnforcedPowerLimit",
                                       handle)
            mig = self._mig_mode_of(f.get("uuid") or f"index:{index}", handle, unsupported,
                                    errors)
            enabled_value = getattr(self.nvml.module, "NVML_DEVICE_MIG_ENABLE", 1)
            f["mig_enabled"] = None if mig is None else (int(mig[0]) == enabled_value)
            if f["mig_enabled"]:
                f["mig_instances"] = self._mig_instances(handle, errors)
                procs = [p for inst in f["mig_instances"] for p in (inst.processes or [])]
                all_na = all(inst.processes is None for inst in f["mig_instances"])
                f["processes"] = None if (all_na and f["mig_instances"]) else procs
                f["processes_api"] = self.nvml.process_api
            else:
                f["processes"] = self._processes(handle, "processes", unsupported, errors)
                f["processes_api"] = self.nvml.process_api if f["processes"] is not None else None
        except GpuLost as exc:
            known = self._last_identity.get(index, {})
            for k, v in known.items():
                if f.get(k) is None:
                    f[k] = v
            f = {k: f[k] for k in ("index", "uuid", "pci_bus_id", "name") if k in f}
            return GpuCard(**f, state="lost", state_reason=(
                f"{exc}: the GPU fell off the bus (see Xid 79 in the kernel log); it needs a "
                "reset (`nvidia-smi -r`) or a reboot; identity shown is the last known"))
        except NvmlCallError as exc:
            known = self._last_identity.get(index, {})
            return GpuCard(index=index, **known, state="error", state_reason=str(exc))
        return GpuCard(**f, unsupported=unsupported, errors=errors)

    def _mig_mode_of(self, key: str, handle: Any, unsupported: list[str],
                     errors: dict[str, str]) -> Any:
        """``nvmlDeviceGetMigMode`` ``[current, pending]`` for card ``key``, re-read at most
        every :attr:`mig_mode_ttl_s`; None when not supported (listed) or failed (in errors)."""
        now = time.monotonic()
        cached = self._mig_mode.get(key)
        if cached is not None and now - cached[0] < self.mig_mode_ttl_s:
            value = cached[1]
        else:
            try:
                value = self.nvml.call("nvmlDeviceGetMigMode", handle)
            except NvmlCallError as exc:
                errors["mig_enabled"] = exc.message
                return None
            self._mig_mode[key] = (now, value)
        if is_na(value):
            unsupported.append("mig_enabled")
            return None
        return value

    def _memory(self, handle: Any, unsupported: list[str], errors: dict[str, str],
                field: str = _MEM_FIELDS) -> MemoryReading | None:
        result = _guarded(field, lambda: self.nvml.memory_info(handle), unsupported, errors)
        if result is None:
            return None
        api, m = result
        checked, problem = checked_memory(m)
        if problem:
            errors[field] = problem
        return MemoryReading(api=api, total_bytes=checked["total"],
                             reserved_bytes=checked["reserved"], used_bytes=checked["used"],
                             free_bytes=checked["free"])

    def _processes(self, handle: Any, field: str, unsupported: list[str],
                   errors: dict[str, str]) -> list[GpuProcess] | None:
        result = _guarded(field, lambda: self.nvml.running_processes(handle), unsupported,
                          errors)
        if result is None:
            return None
        _api, raw = result
        out = []
        for p in raw:
            out.append(GpuProcess(pid=p.pid, used_memory_bytes=p.used_memory,
                                  gpu_instance_id=p.gpu_instance_id,
                                  compute_instance_id=p.compute_instance_id,
                                  **self.mapper.map(p.pid)))
        return out

    def _mig_instances(self, handle: Any, errors: dict[str, str]) -> list[MigInstance]:
        count = self.nvml.call("nvmlDeviceGetMaxMigDeviceCount", handle)
        if is_na(count):
            errors["mig_instances"] = "nvmlDeviceGetMaxMigDeviceCount not available"
            return []
        not_found = getattr(self.nvml.module, "NVML_ERROR_NOT_FOUND", 6)
        instances = []
        for i in range(int(count)):
            try:
                mh = self.nvml.call("nvmlDeviceGetMigDeviceHandleByIndex", handle, i)
            except NvmlCallError as exc:
                if exc.code == not_found:  # slot without an instance
                    continue
                errors[f"mig_instances[{i}]"] = exc.message
                continue
            if is_na(mh):
                continue
            inst_unsupported: list[str] = []
            inst_errors: dict[str, str] = {}

            def val(fn: str, mh: Any = mh, inst_errors: dict[str, str] = inst_errors) -> Any:
                try:
                    v = self.nvml.call(fn, mh)
                except NvmlCallError as exc:
                    inst_errors[fn] = exc.message
                    return None
                return na_to_none(v)

            uuid, name = val("nvmlDeviceGetUUID"), val("nvmlDeviceGetName")
            instances.append(MigInstance(
                index=i,
                uuid=Nvml.text(uuid) if uuid is not None else None,
                name=Nvml.text(name) if name is not None else None,
                gpu_instance_id=val("nvmlDeviceGetGpuInstanceId"),
                compute_instance_id=val("nvmlDeviceGetComputeInstanceId"),
                memory=self._memory(mh, inst_unsupported, inst_errors),
                processes=self._processes(mh, "processes", inst_unsupported, inst_errors),
            ))
            for k, v in inst_errors.items():
                errors[f"mig_instances[{i}].{k}"] = v
        return instances


# ====================================================================== the source

class GpuSource(Source):
    """The GPU source the app polls: ``read()`` → :class:`GpuSnapshot` or :class:`Unavailable`.

    Wraps a :class:`GpuSampler`. ``read`` never raises: any unexpected exception becomes
    ``Unavailable(source="nvml", kind="error")`` with the exception text. NVML calls are local
    ioctls (µs each; docs/benchmarks.md), so no extra timeout is applied; a docker name lookup is
    bounded at 2 s and cached. ``close()`` shuts NVML down and closes the docker client.
    """

    name = "gpus"

    def __init__(self, sampler: GpuSampler, namer: DockerNamer | None = None) -> None:
        self.sampler = sampler
        self._namer = namer

    def read(self) -> GpuSnapshot | Unavailable:
        """One snapshot (see :meth:`GpuSampler.sample`)."""
        try:
            return self.sampler.sample()
        except Exception as exc:
            log.exception("GPU sampler failed")
            return Unavailable(source="nvml", kind="error",
                               reason=f"GPU sampler failed: {type(exc).__name__}: {exc}")

    def close(self) -> None:
        """Shut NVML down and close the docker client; never raises."""
        self.sampler.nvml.close()
        if self._namer is not None:
            self._namer.close()


def make_source(loaded_profile: LoadedProfile | None, nvml: Nvml | None = None,
                proc_root: str = "/proc", *, context: Any | None = None) -> GpuSource:
    """The :class:`GpuSource` for a loaded profile.

    Seat cards come from ``profile.node.gpus``; container names from the engine at
    ``profile.node.docker_host``. ``nvml`` defaults to the ``context``'s gateway (the app's
    :class:`~seat_console.node.context.NodeContext`, shared with the actions), else a new
    :class:`Nvml` over the real ``pynvml`` (or whatever
    :func:`seat_console.node.nvml.module_factory` returns).
    """
    if nvml is None and context is not None:
        nvml = context.nvml
    seat: list[str] = []
    docker_host: str | None = None
    if loaded_profile is not None:
        seat = list(loaded_profile.profile.node.gpus)
        docker_host = loaded_profile.profile.node.docker_host
    namer = DockerNamer(docker_host)
    sampler = GpuSampler(nvml or Nvml(), seat, ProcessMapper(proc_root, container_namer=namer))
    return GpuSource(sampler, namer)
