"""An in-process NVML double: a ``pynvml``-like module whose cards are configured per test.

It is *not* a mock of the gateway: it stands where ``pynvml`` stands, and it raises the real
``pynvml.NVMLError`` (``pynvml.NVMLError(code)`` builds the real per-code subclass, e.g.
``NVMLError_NotSupported``), with the real ``NVML_ERROR_*`` codes and constants re-exported from
the installed ``nvidia-ml-py``, so :mod:`seat_console.node.nvml`'s error mapping is exercised for real.
Functions the double does not define are really absent (``AttributeError``), as in an old
``pynvml``.

Configure with :class:`FakeCard` (one physical GPU), :class:`FakeProcess`, :class:`FakeMig`, and
driver-level switches on :class:`NvmlDouble`:

* ``init_error``: an ``NVML_ERROR_*`` code ``nvmlInit`` raises (no driver, no library, mismatch);
* ``memory_v2``: False → ``nvmlDeviceGetMemoryInfo(h, version=…)`` raises FUNCTION_NOT_FOUND, as
  a driver without ``nvmlDeviceGetMemoryInfo_v2`` does through the real pynvml;
* ``process_versions``: which of ``"v3"``, ``"v2"``, ``"v1"`` the driver exports; a missing one
  raises FUNCTION_NOT_FOUND. v1 is reached the way the gateway reaches it on a real driver:
  through ``_nvmlGetFunctionPointer("nvmlDeviceGetComputeRunningProcesses")``, which returns a
  Python callable with the C calling convention (count by reference, struct array) so the
  gateway's ctypes code runs.

Per card: ``unsupported`` (NVML function names that raise NOT_SUPPORTED on that card),
``errors`` (function name → NVML error code), ``lost`` (every call on the card raises
GPU_IS_LOST; ``lost_at_handle`` makes ``nvmlDeviceGetHandleByIndex`` raise it too).

``calls`` counts every call by function name, so tests can check that probing happens once.
"""

from __future__ import annotations

import ctypes
from collections import Counter
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

import pynvml as _real

H200_TOTAL = 150_754_820_096
"""NVML v2 ``total`` of an H200 (143,771 MiB), read on the team's H200 (shared/RECIPES.md)."""
H200_RESERVED = 644_939_776
"""NVML v2 ``reserved`` of an idle H200 (shared/RECIPES.md)."""


@dataclass
class FakeProcess:
    """A compute process as NVML lists it. ``used`` None = NVML_VALUE_NOT_AVAILABLE."""

    pid: int
    used: int | None
    gpu_instance_id: int = 0xFFFFFFFF
    compute_instance_id: int = 0xFFFFFFFF


@dataclass
class FakeMig:
    """One MIG device of a card."""

    uuid: str
    name: str
    gpu_instance_id: int
    compute_instance_id: int
    total: int
    reserved: int
    used: int
    processes: list[FakeProcess] = field(default_factory=list)


@dataclass
class FakeCard:
    """One physical GPU. Defaults: an idle H200."""

    uuid: str
    pci_bus_id: str = "00000000:18:00.0"
    name: str = "NVIDIA H200"
    total: int = H200_TOTAL
    reserved: int = H200_RESERVED
    used: int = 0
    util_gpu: int = 0
    util_mem: int = 0
    temperature: int = 31
    power_mw: int = 75_123
    power_limit_mw: int = 700_000
    processes: list[FakeProcess] = field(default_factory=list)
    mig_mode: bool | None = False
    """None: the card has no MIG support (NOT_SUPPORTED); False: disabled; True: enabled."""
    mig: list[FakeMig | None] = field(default_factory=list)
    """MIG slots; None = an empty slot (NOT_FOUND)."""
    unsupported: set[str] = field(default_factory=set)
    errors: dict[str, int] = field(default_factory=dict)
    lost: bool = False
    lost_at_handle: bool = False

    @property
    def free(self) -> int:
        return self.total - self.reserved - self.used


class _Absent:
    """A descriptor that makes an attribute absent (``AttributeError`` on access)."""

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    def __get__(self, obj: object, owner: type | None = None) -> Any:
        raise AttributeError(getattr(self, "name", "absent"))


@dataclass(frozen=True)
class _Handle:
    index: int


@dataclass(frozen=True)
class _MigHandle:
    index: int
    slot: int


class NvmlDouble:
    """A fake ``pynvml`` module. See the module docstring."""

    NVMLError = _real.NVMLError

    def __init__(self, cards: list[FakeCard], *, init_error: int | None = None,
                 memory_v2: bool = True, process_versions: tuple[str, ...] = ("v3", "v2", "v1"),
                 driver_version: str = "580.159.04", nvml_version: str = "13.580.159.04",
                 cuda_version: int = 13000, missing: set[str] | None = None) -> None:
        self.cards = cards
        self.init_error = init_error
        self.memory_v2 = memory_v2
        self.process_versions = process_versions
        self.driver_version = driver_version
        self.nvml_version = nvml_version
        self.cuda_version = cuda_version
        self.initialised = 0
        self.calls: Counter[str] = Counter()
        if missing:
            # Function names this "pynvml" lacks (AttributeError), as in an old nvidia-ml-py.
            self.__class__ = type("NvmlDoubleLacking", (NvmlDouble,),
                                  {name: _Absent() for name in missing})

    # Constants and error classes come from the real pynvml; functions do not.
    def __getattr__(self, name: str) -> Any:
        if name.startswith(("NVML_", "NVMLError", "nvmlMemory_v")):
            return getattr(_real, name)
        raise AttributeError(name)


    # ------------------------------------------------------------------ helpers
    @staticmethod
    def _raise(code: int) -> None:
        raise _real.NVMLError(code)

    def _enter(self, fn: str, handle: Any = None) -> FakeCard | None:
        self.calls[fn] += 1
        if not self.initialised:
            self._raise(_real.NVML_ERROR_UNINITIALIZED)
        if handle is None:
            return None
        card = self.cards[handle.index]
        if card.lost:
            self._raise(_real.NVML_ERROR_GPU_IS_LOST)
        if fn in card.unsupported:
            self._raise(_real.NVML_ERROR_NOT_SUPPORTED)
        if fn in card.errors:
            self._raise(card.errors[fn])
        return card

    # ------------------------------------------------------------------ library
    def nvmlInit(self) -> None:
        self.calls["nvmlInit"] += 1
        if self.init_error is not None:
            self._raise(self.init_error)
        self.initialised += 1

    def nvmlShutdown(self) -> None:
        self._enter("nvmlShutdown")
        self.initialised -= 1

    def nvmlSystemGetDriverVersion(self) -> str:
        self._enter("nvmlSystemGetDriverVersion")
        return self.driver_version

    def nvmlSystemGetNVMLVersion(self) -> str:
        self._enter("nvmlSystemGetNVMLVersion")
        return self.nvml_version

    def nvmlSystemGetCudaDriverVersion(self) -> int:
        self._enter("nvmlSystemGetCudaDriverVersion")
        return self.cuda_version

    def nvmlDeviceGetCount(self) -> int:
        self._enter("nvmlDeviceGetCount")
        return len(self.cards)

    def nvmlDeviceGetHandleByIndex(self, index: int) -> _Handle:
        self._enter("nvmlDeviceGetHandleByIndex")
        if index >= len(self.cards):
            self._raise(_real.NVML_ERROR_INVALID_ARGUMENT)
        if self.cards[index].lost_at_handle:
            self._raise(_real.NVML_ERROR_GPU_IS_LOST)
        return _Handle(index)

    # ------------------------------------------------------------------ device queries
    def _target(self, fn: str, handle: Any) -> tuple[FakeCard, FakeMig | None]:
        if isinstance(handle, _MigHandle):
            card = self._enter(fn, _Handle(handle.index))
            return card, card.mig[handle.slot]
        return self._enter(fn, handle), None

    def nvmlDeviceGetUUID(self, handle: Any) -> str:
        card, mig = self._target("nvmlDeviceGetUUID", handle)
        return mig.uuid if mig else card.uuid

    def nvmlDeviceGetName(self, handle: Any) -> str:
        card, mig = self._target("nvmlDeviceGetName", handle)
        return mig.name if mig else card.name

    def nvmlDeviceGetPciInfo(self, handle: Any) -> Any:
        card = self._enter("nvmlDeviceGetPciInfo", handle)
        # The real struct returns busId as bytes (a c_char array).
        return SimpleNamespace(busId=card.pci_bus_id.encode())

    def nvmlDeviceGetMemoryInfo(self, handle: Any, version: int | None = None) -> Any:
        fn = "nvmlDeviceGetMemoryInfo_v2" if version else "nvmlDeviceGetMemoryInfo"
        if version and not self.memory_v2:
            self.calls[fn] += 1
            self._raise(_real.NVML_ERROR_FUNCTION_NOT_FOUND)
        card, mig = self._target(fn, handle)
        src = mig or card
        reserved = src.reserved
        free = src.total - reserved - src.used
        if version:
            return SimpleNamespace(version=version, total=src.total, reserved=reserved,
                                   used=src.used, free=free)
        return SimpleNamespace(total=src.total, used=src.used + reserved, free=free)

    def nvmlDeviceGetUtilizationRates(self, handle: Any) -> Any:
        card = self._enter("nvmlDeviceGetUtilizationRates", handle)
        return SimpleNamespace(gpu=card.util_gpu, memory=card.util_mem)

    def nvmlDeviceGetTemperature(self, handle: Any, sensor: int) -> int:
        card = self._enter("nvmlDeviceGetTemperature", handle)
        assert sensor == _real.NVML_TEMPERATURE_GPU
        return card.temperature

    def nvmlDeviceGetPowerUsage(self, handle: Any) -> int:
        return self._enter("nvmlDeviceGetPowerUsage", handle).power_mw

    def nvmlDeviceGetEnforcedPowerLimit(self, handle: Any) -> int:
        return self._enter("nvmlDeviceGetEnforcedPowerLimit", handle).power_limit_mw

    def nvmlDeviceGetMigMode(self, handle: Any) -> list[int]:
        card = self._enter("nvmlDeviceGetMigMode", handle)
        if card.mig_mode is None:
            self._raise(_real.NVML_ERROR_NOT_SUPPORTED)
        mode = _real.NVML_DEVICE_MIG_ENABLE if card.mig_mode else _real.NVML_DEVICE_MIG_DISABLE
        return [mode, mode]

    def nvmlDeviceGetMaxMigDeviceCount(self, handle: Any) -> int:
        return len(self._enter("nvmlDeviceGetMaxMigDeviceCount", handle).mig)

    def nvmlDeviceGetMigDeviceHandleByIndex(self, handle: Any, slot: int) -> _MigHandle:
        card = self._enter("nvmlDeviceGetMigDeviceHandleByIndex", handle)
        if slot >= len(card.mig) or card.mig[slot] is None:
            self._raise(_real.NVML_ERROR_NOT_FOUND)
        return _MigHandle(handle.index, slot)

    def nvmlDeviceGetGpuInstanceId(self, handle: Any) -> int:
        return self._target("nvmlDeviceGetGpuInstanceId", handle)[1].gpu_instance_id

    def nvmlDeviceGetComputeInstanceId(self, handle: Any) -> int:
        return self._target("nvmlDeviceGetComputeInstanceId", handle)[1].compute_instance_id

    # ------------------------------------------------------------------ processes
    def _procs(self, version: str, handle: Any) -> list[FakeProcess]:
        fn = ("nvmlDeviceGetComputeRunningProcesses" if version == "v1"
              else f"nvmlDeviceGetComputeRunningProcesses_{version}")
        if version not in self.process_versions:
            self.calls[fn] += 1
            self._raise(_real.NVML_ERROR_FUNCTION_NOT_FOUND)
        card, mig = self._target(fn, handle)
        return (mig or card).processes

    def _friendly(self, procs: list[FakeProcess]) -> list[Any]:
        return [SimpleNamespace(pid=p.pid, usedGpuMemory=p.used,
                                gpuInstanceId=p.gpu_instance_id,
                                computeInstanceId=p.compute_instance_id) for p in procs]

    def nvmlDeviceGetComputeRunningProcesses_v3(self, handle: Any) -> list[Any]:
        return self._friendly(self._procs("v3", handle))

    def nvmlDeviceGetComputeRunningProcesses_v2(self, handle: Any) -> list[Any]:
        return self._friendly(self._procs("v2", handle))

    def _nvmlGetFunctionPointer(self, name: str) -> Any:
        """Like pynvml's: a C function of the driver. Only the v1 process list is offered."""
        if name != "nvmlDeviceGetComputeRunningProcesses" or "v1" not in self.process_versions:
            self._raise(_real.NVML_ERROR_FUNCTION_NOT_FOUND)

        def c_function(handle: Any, count_ref: Any, array: Any) -> int:
            """``nvmlReturn_t fn(nvmlDevice_t, unsigned int *count, nvmlProcessInfo_v1_t *)``"""
            try:
                procs = self._procs("v1", handle)
            except _real.NVMLError as exc:
                return exc.value
            count = count_ref._obj  # ctypes.byref(c_uint) → the c_uint
            if array is None or count.value < len(procs):
                count.value = len(procs)
                return _real.NVML_SUCCESS if not procs else _real.NVML_ERROR_INSUFFICIENT_SIZE
            for i, p in enumerate(procs):
                array[i].pid = p.pid
                array[i].usedGpuMemory = (0xFFFFFFFFFFFFFFFF if p.used is None
                                          else ctypes.c_ulonglong(p.used).value)
            count.value = len(procs)
            return _real.NVML_SUCCESS

        return c_function


def h200_pair(**kwargs: Any) -> list[FakeCard]:
    """Two idle H200s with distinct UUIDs and bus ids (the seat's two cards)."""
    return [
        FakeCard(uuid="GPU-11111111-2222-3333-4444-555555555555", pci_bus_id="00000000:18:00.0",
                 **kwargs),
        FakeCard(uuid="GPU-aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee", pci_bus_id="00000000:2A:00.0",
                 **kwargs),
    ]
