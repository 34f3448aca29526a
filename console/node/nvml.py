"""The one gateway for every NVML call the console makes.

Everything that talks to NVML goes through :class:`Nvml` (ideas from nvitop's
``nvitop/api/libnvml.py``, Apache-2.0; no code copied):

* **Lazy init.** The ``pynvml`` module (from the ``nvidia-ml-py`` distribution) is imported and
  ``nvmlInit()`` called on first use, not at import time. A failed init is retried on the next
  use (a driver may be loaded later), and :meth:`Nvml.close` shuts NVML down.
* **Injectable module.** ``Nvml(module=...)`` takes any ``pynvml``-like module (the tests pass
  ``tests/nvml_double.py``). Without one, :func:`module_factory` is called — the tests and the
  benchmarks replace that module-level function (``monkeypatch.setattr(seat_console.node.nvml,
  "module_factory", ...)``) to inject a double into code that builds its own gateway, such as
  the ``seat-console gpus`` command.
* **Not supported is not zero.** ``NVML_ERROR_NOT_SUPPORTED`` and ``NVML_ERROR_FUNCTION_NOT_FOUND``
  (and a function missing from an old ``pynvml``) return an :class:`NaType` sentinel that renders
  ``N/A``, is falsy, and turns arithmetic into N/A instead of crashing; a missing function is
  logged once.
* **Versioned calls probed once.** Memory info ``nvmlDeviceGetMemoryInfo_v2`` → v1, and compute
  running processes ``_v3`` → ``_v2`` → v1 are chosen the first time they are needed, by which
  exists, and the choice is kept (:attr:`Nvml.memory_api`, :attr:`Nvml.process_api`).
* **Distinct states.** Whole-library failures raise :class:`NvmlUnavailable` with ``kind``
  ``no-library`` (``NVML_ERROR_LIBRARY_NOT_FOUND`` or ``pynvml`` not importable), ``no-driver``
  (``NVML_ERROR_DRIVER_NOT_LOADED``), ``version-mismatch``
  (``NVML_ERROR_LIB_RM_VERSION_MISMATCH``), ``no-permission`` (``NVML_ERROR_NO_PERMISSION`` at
  init) or ``error``. A card that fell off the bus raises :class:`GpuLost`
  (``NVML_ERROR_GPU_IS_LOST``) so the caller marks that card alone. Any other NVML error of one
  call raises :class:`NvmlCallError` carrying the code, so the caller marks one field.

Error codes and meanings: NVML API reference, "Error reporting" (``nvmlReturn_t``).
"""

from __future__ import annotations

import ctypes
import logging
import math
import functools
import threading
from dataclasses import dataclass
from types import ModuleType
from typing import Any

log = logging.getLogger(__name__)

# nvmlReturn_t codes (NVML API reference; identical in pynvml). Used only when a module lacks
# the constant; the module's own values take precedence.
_CODES = {
    "NVML_SUCCESS": 0,
    "NVML_ERROR_UNINITIALIZED": 1,
    "NVML_ERROR_NOT_SUPPORTED": 3,
    "NVML_ERROR_NO_PERMISSION": 4,
    "NVML_ERROR_NOT_FOUND": 6,
    "NVML_ERROR_INSUFFICIENT_SIZE": 7,
    "NVML_ERROR_DRIVER_NOT_LOADED": 9,
    "NVML_ERROR_LIBRARY_NOT_FOUND": 12,
    "NVML_ERROR_FUNCTION_NOT_FOUND": 13,
    "NVML_ERROR_GPU_IS_LOST": 15,
    "NVML_ERROR_LIB_RM_VERSION_MISMATCH": 18,
    "NVML_ERROR_ARGUMENT_VERSION_MISMATCH": 25,
}

# NVML reports "no MIG instance" in gpuInstanceId / computeInstanceId as 0xFFFFFFFF.
_NO_INSTANCE = 0xFFFFFFFF
# NVML_VALUE_NOT_AVAILABLE_ulonglong: per-process memory NVML cannot attribute.
_VALUE_NOT_AVAILABLE_ULL = 0xFFFFFFFFFFFFFFFF


class NaType:
    """"Not available": NVML does not support the value, or the function is missing.

    Renders as ``N/A``, is falsy, compares equal to any other ``NaType``, converts to ``nan``
    with ``float()``, and absorbs arithmetic (``NA + 1`` is ``NA``) so a not-supported field can
    never crash a sum or silently become 0. ``reason`` says why (for tooltips and logs).
    """

    __slots__ = ("reason",)

    def __init__(self, reason: str = "not available") -> None:
        self.reason = reason

    def __repr__(self) -> str:
        return f"NA({self.reason!r})"

    def __str__(self) -> str:
        return "N/A"

    def __format__(self, spec: str) -> str:
        return "N/A"

    def __bool__(self) -> bool:
        return False

    def __eq__(self, other: object) -> bool:
        return isinstance(other, NaType)

    def __hash__(self) -> int:
        return hash(NaType)

    def __float__(self) -> float:
        return math.nan

    def _absorb(self, *_: object) -> NaType:
        return self

    __add__ = __radd__ = __sub__ = __rsub__ = __mul__ = __rmul__ = _absorb
    __truediv__ = __rtruediv__ = __floordiv__ = __rfloordiv__ = __neg__ = _absorb


NA = NaType()
"""The generic not-available value."""


def is_na(value: object) -> bool:
    """True when ``value`` is an :class:`NaType` sentinel."""
    return isinstance(value, NaType)


def na_to_none(value: Any) -> Any:
    """``None`` for an :class:`NaType`, else ``value`` unchanged (for the pydantic models)."""
    return None if isinstance(value, NaType) else value


class NvmlUnavailable(Exception):
    """NVML as a whole cannot be used.

    ``kind``: ``no-library`` | ``no-driver`` | ``version-mismatch`` | ``no-permission`` |
    ``error``; ``reason``: one sentence with the fix; ``code``: the NVML error code or None.
    """

    def __init__(self, kind: str, reason: str, code: int | None = None) -> None:
        super().__init__(reason)
        self.kind = kind
        self.reason = reason
        self.code = code


class GpuLost(Exception):
    """``NVML_ERROR_GPU_IS_LOST`` from a call on one card: it fell off the bus (Xid 79 in the
    kernel log). The card needs a reset (``nvidia-smi -r``) or a reboot; other cards are fine."""


class NvmlCallError(Exception):
    """Any other NVML error from one call (``code`` = nvmlReturn_t, ``function`` = the name)."""

    def __init__(self, function: str, code: int | None, message: str) -> None:
        super().__init__(f"{function}: {message}")
        self.function = function
        self.code = code
        self.message = message


@dataclass(frozen=True)
class RawProcess:
    """One compute process as NVML lists it: host ``pid``, ``used_memory`` in bytes (``None``
    where NVML cannot attribute memory), MIG ``gpu_instance_id`` / ``compute_instance_id``
    (``None`` when not on a MIG instance)."""

    pid: int
    used_memory: int | None
    gpu_instance_id: int | None = None
    compute_instance_id: int | None = None


def module_factory() -> ModuleType:
    """Import and return the real ``pynvml`` module (``nvidia-ml-py``).

    Raises :class:`ImportError` when it is not installed. Replaced in tests/benchmarks to inject a
    double into code that creates its own :class:`Nvml`.
    """
    import pynvml

    return pynvml


class _ProcessInfoV1(ctypes.Structure):
    """``nvmlProcessInfo_v1_t`` (nvml.h before R470): pid, usedGpuMemory."""

    _fields_ = [("pid", ctypes.c_uint), ("usedGpuMemory", ctypes.c_ulonglong)]


def _tracked(method: Any) -> Any:
    """Count the call as in flight for :meth:`Nvml.close` (see there)."""
    @functools.wraps(method)
    def wrapper(self: Nvml, *args: Any, **kwargs: Any) -> Any:
        self._enter()
        try:
            return method(self, *args, **kwargs)
        finally:
            self._leave()
    return wrapper


class Nvml:
    """Gateway to NVML, shared by the threads that read it: the GPU source's sampler, the first
    frame's one-shot read (:mod:`seat_console.tui.first_frame`, which may still be running when the
    sampler starts) and the UI's ``close()``. Init and shutdown are under the lock; the probed
    API choices (:attr:`memory_api`, :attr:`process_api`) are written without it, and two
    threads probing at once write the same value.

    Use :meth:`call` for a plain NVML function, :meth:`memory_info` and
    :meth:`running_processes` for the versioned calls. Every call initialises lazily.

    Raises (from every method): :class:`NvmlUnavailable` (whole library), :class:`GpuLost` (one
    card), :class:`NvmlCallError` (one call, other codes). Not-supported values come back as
    :class:`NaType`, never raised.
    """

    def __init__(self, module: ModuleType | Any | None = None) -> None:
        self._module = module
        self._lock = threading.RLock()
        self._initialised = False
        self._logged_missing: set[str] = set()
        # Calls in flight (a read abandoned by a timed-out poll may still be inside NVML):
        # close() waits for them, or leaves the shutdown to the last one to finish.
        self._busy = threading.Condition(threading.Lock())
        self._in_flight = 0
        self._close_pending = False
        self.memory_api: str | None = None
        """``"v2"`` or ``"v1"`` once probed."""
        self.process_api: str | None = None
        """``"v3"``, ``"v2"`` or ``"v1"`` once probed."""

    # ------------------------------------------------------------------ library state
    @property
    def module(self) -> Any:
        """The ``pynvml``-like module; imports it on first use.

        Raises :class:`NvmlUnavailable` (``no-library``) when ``pynvml`` cannot be imported."""
        if self._module is None:
            try:
                self._module = module_factory()
            except ImportError as exc:
                raise NvmlUnavailable(
                    "no-library",
                    f"the Python NVML binding is not installed ({exc}); install it with "
                    "`pip install nvidia-ml-py`",
                ) from None
        return self._module

    def _code(self, name: str) -> int:
        return int(getattr(self._module, name, _CODES[name]))

    def _error_code(self, exc: BaseException) -> int | None:
        value = getattr(exc, "value", None)
        return value if isinstance(value, int) else None

    def _is_nvml_error(self, exc: BaseException) -> bool:
        cls = getattr(self._module, "NVMLError", None)
        return isinstance(cls, type) and isinstance(exc, cls)

    def _unavailable_for(self, code: int | None, exc: BaseException) -> NvmlUnavailable | None:
        """The whole-library state an NVML error code means, or None for a per-call error."""
        if code == self._code("NVML_ERROR_LIBRARY_NOT_FOUND"):
            return NvmlUnavailable(
                "no-library",
                "the NVML shared library (libnvidia-ml.so.1) was not found: no NVIDIA driver "
                "is installed here, or its library is not on the loader path (inside a "
                "container: run it with the NVIDIA container toolkit, e.g. `--gpus all`)",
                code)
        if code == self._code("NVML_ERROR_DRIVER_NOT_LOADED"):
            return NvmlUnavailable(
                "no-driver",
                "NVML is installed but the NVIDIA kernel driver is not loaded (`lsmod | grep "
                "nvidia` is empty); load it (`modprobe nvidia`) or check `dmesg` for why it "
                "failed",
                code)
        if code == self._code("NVML_ERROR_LIB_RM_VERSION_MISMATCH"):
            return NvmlUnavailable(
                "version-mismatch",
                "driver/library version mismatch: the NVML library in user space does not "
                "match the loaded kernel driver (typically after a driver upgrade without a "
                "reboot); reboot, or reload the nvidia kernel modules",
                code)
        if code == self._code("NVML_ERROR_UNINITIALIZED"):
            return NvmlUnavailable("error", f"NVML is not initialised ({exc})", code)
        return None

    def _ensure_init(self) -> Any:
        mod = self.module
        if self._initialised:
            return mod
        with self._lock:
            if self._initialised:
                return mod
            try:
                mod.nvmlInit()
            except Exception as exc:  # noqa: BLE001 - classified below
                if not self._is_nvml_error(exc):
                    raise NvmlUnavailable("error", f"nvmlInit failed: {exc!r}") from None
                code = self._error_code(exc)
                state = self._unavailable_for(code, exc)
                if state is None and code == self._code("NVML_ERROR_NO_PERMISSION"):
                    state = NvmlUnavailable(
                        "no-permission",
                        "NVML refused access (insufficient permissions): run as a user that "
                        "may open /dev/nvidia*", code)
                if state is None:
                    state = NvmlUnavailable("error", f"nvmlInit failed: {exc}", code)
                raise state from None
            self._initialised = True
        return mod

    def init(self) -> None:
        """Initialise NVML now if not yet (every call does this lazily anyway).

        Raises :class:`NvmlUnavailable` with the library state when it cannot."""
        self._ensure_init()

    @property
    def initialised(self) -> bool:
        """True after a successful ``nvmlInit``."""
        return self._initialised

    def _enter(self) -> None:
        with self._busy:
            self._in_flight += 1

    def _leave(self) -> None:
        with self._busy:
            self._in_flight -= 1
            last = self._in_flight == 0
            pending = last and self._close_pending
            if last:
                self._busy.notify_all()
        if pending:
            self._shutdown()

    def close(self, wait_s: float = 2.0) -> None:
        """``nvmlShutdown`` if initialised; never raises.

        A call still running in another thread (a read the app abandoned after a timeout) is
        waited for up to ``wait_s`` seconds; if it is still inside NVML then, the shutdown is
        left to that call, which performs it when it returns — NVML is never shut down under a
        running call.
        """
        with self._busy:
            self._busy.wait_for(lambda: self._in_flight == 0, timeout=wait_s)
            if self._in_flight:
                self._close_pending = True
                return
        self._shutdown()

    def _shutdown(self) -> None:
        with self._lock:
            self._close_pending = False
            if not self._initialised:
                return
            self._initialised = False
            try:
                self._module.nvmlShutdown()
            except Exception as exc:  # noqa: BLE001 - shutting down; nothing to do
                log.debug("nvmlShutdown failed: %s", exc)

    # ------------------------------------------------------------------ calls
    def _log_missing(self, name: str, why: str) -> None:
        if name not in self._logged_missing:
            self._logged_missing.add(name)
            log.info("NVML function %s is not available (%s); its values show as N/A", name, why)

    def _classify(self, name: str, exc: BaseException) -> Any:
        """Map an exception from ``name`` to a return value (NaType) or raise the right type."""
        if not self._is_nvml_error(exc):
            raise NvmlCallError(name, None, repr(exc)) from None
        code = self._error_code(exc)
        if code == self._code("NVML_ERROR_NOT_SUPPORTED"):
            return NaType("not supported")
        if code == self._code("NVML_ERROR_FUNCTION_NOT_FOUND"):
            self._log_missing(name, "not in this driver's NVML")
            return NaType("function not found in this driver")
        if code == self._code("NVML_ERROR_GPU_IS_LOST"):
            raise GpuLost(f"{name}: GPU is lost (NVML_ERROR_GPU_IS_LOST)") from None
        state = self._unavailable_for(code, exc)
        if state is not None:
            # The library went away under us (driver unloaded, upgrade): re-init next time.
            self._initialised = False
            raise state from None
        raise NvmlCallError(name, code, str(exc)) from None

    @_tracked
    def call(self, name: str, *args: Any) -> Any:
        """Call NVML function ``name`` (a ``pynvml`` attribute) with ``args``.

        Returns its value, or an :class:`NaType` when the function is missing or NVML says not
        supported. Raises :class:`NvmlUnavailable`, :class:`GpuLost` or :class:`NvmlCallError`.
        """
        mod = self._ensure_init()
        fn = getattr(mod, name, None)
        if fn is None:
            self._log_missing(name, "not in this pynvml")
            return NaType("function not in this pynvml")
        try:
            return fn(*args)
        except Exception as exc:  # noqa: BLE001 - classified
            return self._classify(name, exc)

    @staticmethod
    def text(value: Any) -> Any:
        """Decode bytes returned by older ``pynvml`` versions; pass anything else through."""
        if isinstance(value, bytes):
            return value.decode("utf-8", "replace")
        return value

    # ------------------------------------------------------------------ versioned: memory
    @_tracked
    def memory_info(self, handle: Any) -> tuple[str, dict[str, int | None]] | NaType:
        """Memory of a device or MIG handle: ``(api, {total, reserved, used, free})`` in bytes.

        ``api`` is ``"v2"`` (``nvmlDeviceGetMemoryInfo_v2``: ``used`` excludes ``reserved``) or
        ``"v1"`` (``nvmlDeviceGetMemoryInfo``: ``used`` includes reserved; ``reserved`` is
        None). v2 is probed once; if its function is missing (``FUNCTION_NOT_FOUND``, an old
        ``pynvml`` without the ``version`` argument, or ``ARGUMENT_VERSION_MISMATCH``) v1 is used
        from then on. A card whose v2 answer is NOT_SUPPORTED falls back to v1 for that call
        only: the choice (:attr:`memory_api`) is not changed by it, so the next call, and every
        other card, tries v2 again (one card's NOT_SUPPORTED must not cost the healthy cards
        their reserved and CUDA-visible figures).
        Returns :class:`NaType` when neither works. nvidia-smi: ``memory.total``,
        ``memory.reserved``, ``memory.used``, ``memory.free``.
        """
        mod = self._ensure_init()
        per_call_fallback = False
        if self.memory_api != "v1":
            version = getattr(mod, "nvmlMemory_v2", None)
            fn = getattr(mod, "nvmlDeviceGetMemoryInfo", None)
            if version is None or fn is None:
                self._choose_memory("v1", "pynvml has no nvmlMemory_v2")
            else:
                try:
                    m = fn(handle, version=version)
                except TypeError:
                    self._choose_memory("v1", "pynvml's nvmlDeviceGetMemoryInfo takes no version")
                except Exception as exc:  # noqa: BLE001 - classified
                    code = self._error_code(exc) if self._is_nvml_error(exc) else None
                    if code in (self._code("NVML_ERROR_FUNCTION_NOT_FOUND"),
                                self._code("NVML_ERROR_ARGUMENT_VERSION_MISMATCH")):
                        self._choose_memory("v1", f"nvmlDeviceGetMemoryInfo_v2: {exc}")
                    else:
                        result = self._classify("nvmlDeviceGetMemoryInfo_v2", exc)
                        if not is_na(result):  # pragma: no cover - _classify raises otherwise
                            return result
                        # not supported on this card: try v1 for this call only
                        per_call_fallback = True
                else:
                    self.memory_api = "v2"
                    return "v2", {"total": int(m.total), "reserved": int(m.reserved),
                                  "used": int(m.used), "free": int(m.free)}
        m = self.call("nvmlDeviceGetMemoryInfo", handle)
        if is_na(m):
            return m
        if self.memory_api is None and not per_call_fallback:
            self.memory_api = "v1"
        return "v1", {"total": int(m.total), "reserved": None, "used": int(m.used),
                      "free": int(m.free)}

    def _choose_memory(self, api: str, why: str) -> None:
        if self.memory_api != api:
            log.info("NVML memory info: using %s (%s)", api, why)
        self.memory_api = api

    # ------------------------------------------------------------------ versioned: processes
    @_tracked
    def running_processes(self, handle: Any) -> tuple[str, list[RawProcess]] | NaType:
        """Compute processes on a device or MIG handle: ``(api, [RawProcess, ...])``.

        Tries ``nvmlDeviceGetComputeRunningProcesses_v3`` → ``_v2`` → the v1 C symbol
        ``nvmlDeviceGetComputeRunningProcesses`` (``nvmlProcessInfo_v1_t``: pid and memory only)
        once, by which exists, and keeps the first that does. nvidia-smi:
        ``--query-compute-apps=pid,used_memory``. Returns :class:`NaType` when none works.
        """
        mod = self._ensure_init()
        order = ["v3", "v2", "v1"] if self.process_api is None else [self.process_api]
        for api in order:
            try:
                raw = self._processes_call(mod, api, handle)
            except Exception as exc:  # noqa: BLE001 - classified
                code = self._error_code(exc) if self._is_nvml_error(exc) else None
                if self.process_api is None and code == self._code(
                        "NVML_ERROR_FUNCTION_NOT_FOUND"):
                    self._log_missing(f"nvmlDeviceGetComputeRunningProcesses ({api})",
                                      "not in this driver")
                    continue
                result = self._classify(f"nvmlDeviceGetComputeRunningProcesses ({api})", exc)
                return result
            if raw is None:  # this pynvml has no wrapper for the version
                continue
            if self.process_api is None:
                self.process_api = api
                log.info("NVML running processes: using %s", api)
            return api, [self._raw_process(p) for p in raw]
        return NaType("no running-processes function")

    def _processes_call(self, mod: Any, api: str, handle: Any) -> list[Any] | None:
        if api in ("v3", "v2"):
            fn = getattr(mod, f"nvmlDeviceGetComputeRunningProcesses_{api}", None)
            return None if fn is None else fn(handle)
        fn = getattr(mod, "nvmlDeviceGetComputeRunningProcesses_v1", None)
        if fn is not None:
            return fn(handle)
        return self._processes_v1_ctypes(mod, handle)

    def _processes_v1_ctypes(self, mod: Any, handle: Any) -> list[Any] | None:
        """Call the unversioned C symbol with the v1 struct (pynvml ≥ 11.510 has no wrapper)."""
        get_fn = getattr(mod, "_nvmlGetFunctionPointer", None)
        if get_fn is None:
            return None
        fn = get_fn("nvmlDeviceGetComputeRunningProcesses")
        count = ctypes.c_uint(0)
        ret = fn(handle, ctypes.byref(count), None)
        if ret == self._code("NVML_SUCCESS"):
            return []
        if ret != self._code("NVML_ERROR_INSUFFICIENT_SIZE"):
            raise mod.NVMLError(ret)
        count.value = count.value * 2 + 5  # processes may start between the two calls
        procs = (_ProcessInfoV1 * count.value)()
        ret = fn(handle, ctypes.byref(count), procs)
        if ret != self._code("NVML_SUCCESS"):
            raise mod.NVMLError(ret)
        return [procs[i] for i in range(count.value)]

    @staticmethod
    def _raw_process(p: Any) -> RawProcess:
        used = getattr(p, "usedGpuMemory", None)
        if used is not None and int(used) == _VALUE_NOT_AVAILABLE_ULL:
            used = None
        gi = getattr(p, "gpuInstanceId", None)
        ci = getattr(p, "computeInstanceId", None)
        return RawProcess(
            pid=int(p.pid),
            used_memory=None if used is None else int(used),
            gpu_instance_id=None if gi is None or gi == _NO_INSTANCE else int(gi),
            compute_instance_id=None if ci is None or ci == _NO_INSTANCE else int(ci),
        )


__all__ = [
    "NA", "GpuLost", "NaType", "Nvml", "NvmlCallError", "NvmlUnavailable", "RawProcess",
    "is_na", "module_factory", "na_to_none",
]
