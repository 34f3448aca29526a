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

When the whole NVML is unusable the source returns :class:`console.sources.Unavailable` with
``source="nvml"`` and ``kind`` one of ``no-library``, ``no-driver``, ``version-mismatch``,
``no-permission``, ``no-gpu`` or ``error`` (see :mod:`console.nvml`).

Each field's docstring names the equivalent ``nvidia-smi --query-gpu=...`` (or
``--query-compute-apps=...``) field, so a reader can check a value by hand.
"""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import Field, model_validator

from console.sources import Frozen, utcnow

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
    def _consistent(self) -> "MemoryReading":
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

    ``runtime`` is the pattern that matched: ``docker`` (``/docker/<id>``,
    ``docker-<id>.scope``), ``containerd`` (``cri-containerd-<id>.scope``, ``/containerd/<id>``),
    ``cri-o`` (``crio-<id>.scope``), ``podman`` (``libpod-<id>.scope``) or ``kubepods`` (a
    Kubernetes pod cgroup; ``pod_uid`` set). ``id`` is the full 64-hex container id; ``name`` is
    resolved through the docker engine when it is reachable, else ``None``.
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
        process list is n/a."""
        if self.processes is None:
            return None
        return sum(p.used_memory_bytes or 0 for p in self.processes)


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
