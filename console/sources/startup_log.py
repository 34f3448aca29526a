"""The engine's startup lines: KV cache memory, KV cache size in tokens, maximum concurrency.

vLLM prints what it budgeted while it starts; the seat panel and the swap read it back from the
container's log (``docker logs``) instead of re-deriving it. The forms, by the source that prints
them (test data of each in ``tests/data/vllm_startup/``):

* V1 engine, recent (``vllm/v1/core/kv_cache_utils.py``, ``update_kv_cache_capacity``), one line:
  ``GPU KV cache size: 174,643 tokens, Maximum concurrency for 131,072 tokens per request: 1.33x``
  — ``CPU`` on the CPU backend, ``GPU + host`` with host-side sparse KV;
* V1 engine, older: the same two facts on two lines (``GPU KV cache size: 447,088 tokens`` then
  ``Maximum concurrency for 32,768 tokens per request: 13.64x``);
* V1 worker (``vllm/v1/worker/gpu_worker.py``): ``Available KV cache memory: 26.43 GiB``
  (``%.2f`` or ``format_gib``: rounded to 0.01 GiB);
* V1 CPU worker (``vllm/v1/worker/cpu_worker.py``): ``Explicitly set (1.0/8.96) GiB for KV cache
  on node 0.`` or ``Auto set (…/…) GiB for KV cache …`` (KV bytes / the node's total memory);
* V0 (``vllm/worker/worker.py``, ``vllm/executor/*``): ``the rest of the memory reserved for KV
  Cache is 2.18GiB.``, ``# GPU blocks: 715, # CPU blocks: 1310`` (``CUDA``/``cuda``/``TPU``… —
  the platform's key), ``Maximum concurrency for 2048 tokens per request: 5.59x`` (no thousands
  separators). V0 states blocks, not tokens: tokens = blocks × block size, and only when the
  caller knows the block size.

Bounds: each line is scanned up to :data:`MAX_LINE_CHARS` characters; every pattern is a fixed
sequence with bounded repeats (no nested quantifiers), so a scan is linear in the input. A fact
that is not in the log is ``None`` ("not in the log"), never 0; a fact printed several times (one
line per TP worker, or a restart inside the text) takes the **last** value.

Failure patterns (the profile's ``swap.failure_patterns``) are RE2 (google-re2, linear time), so
a pattern from a profile cannot hang the scan either.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Sequence
from decimal import Decimal, InvalidOperation

from seat_console.core.profile import FailurePattern
from seat_console.core.base import Frozen
from seat_console.core.fmt import GIB
from seat_console.core.untrusted import without_surrogates

MAX_LINE_CHARS = 16_384
"""Characters of one log line that are scanned (the rest is ignored): vLLM's startup lines are
under 400 characters; a request dump can be megabytes."""


_NUM = r"-?[0-9]{1,12}(?:\.[0-9]{1,6})?"
_INT = r"[0-9][0-9,]{0,24}"
KV_SIZE_RE = re.compile(rf"\b(?P<dev>[A-Za-z]{{2,10}}(?: \+ host)?) KV cache size: (?P<tok>{_INT}) tokens")
CONCURRENCY_RE = re.compile(
    rf"Maximum concurrency for (?P<len>{_INT}) tokens per request: (?P<x>{_NUM})x")
AVAILABLE_RE = re.compile(rf"Available KV cache memory: (?P<g>{_NUM}) ?GiB")
V0_REST_RE = re.compile(rf"the rest of the memory reserved for KV Cache is (?P<g>{_NUM}) ?GiB")
V0_BLOCKS_RE = re.compile(
    r"# (?P<dev>[A-Za-z]{2,10}) blocks: (?P<b>[0-9]{1,15}), # CPU blocks: (?P<c>[0-9]{1,15})")
CPU_SET_RE = re.compile(
    rf"\b(?P<how>Explicitly|Auto) set \((?P<g>{_NUM})/(?P<t>{_NUM})\) GiB for KV cache")


class StartupFacts(Frozen):
    """What the engine said about its KV cache while starting.

    ``device``: the pool the size line names (``"GPU"``, ``"CPU"``, ``"GPU + host"``; V0:
    ``"CUDA"``/``"GPU"``/…). ``available_kv_cache_bytes``: bytes for the KV cache per worker,
    from a GiB figure rounded by vLLM to 0.01 GiB (±5.4 MB), negative when the engine found no
    room (a start that fails). ``kv_cache_tokens``: KV cache size in tokens (V1), or V0 blocks ×
    ``block_size`` when given. ``kv_cache_blocks`` / ``cpu_swap_blocks``: V0's block counts.
    ``max_concurrency``: how many requests of ``concurrency_tokens_per_request`` tokens fit at
    once (the ``…x`` figure). ``forms``: which line forms were seen (``"v1-kv-size"``,
    ``"v1-concurrency"``, ``"v1-one-line"``, ``"v1-available"``, ``"cpu-kv-set"``,
    ``"v0-rest"``, ``"v0-blocks"``). ``lines``: lines scanned. Every figure is ``None`` when
    its line is absent.
    """

    device: str | None = None
    available_kv_cache_bytes: int | None = None
    kv_cache_tokens: int | None = None
    kv_cache_blocks: int | None = None
    cpu_swap_blocks: int | None = None
    max_concurrency: float | None = None
    concurrency_tokens_per_request: int | None = None
    forms: tuple[str, ...] = ()
    lines: int = 0

    @property
    def complete(self) -> bool:
        """True when the KV cache size (tokens) and the maximum concurrency were both found."""
        return self.kv_cache_tokens is not None and self.max_concurrency is not None


class FailureMatch(Frozen):
    """A failure pattern that matched: ``name`` and ``meaning`` from the profile, ``line_no``
    (1-based, in the text scanned), ``line`` (cut to 300 characters)."""

    name: str
    meaning: str = ""
    line_no: int
    line: str


def _gib_bytes(text: str) -> int | None:
    try:
        return int(Decimal(text) * GIB)
    except (InvalidOperation, ValueError):  # pragma: no cover - the pattern admits only numbers
        return None


def _int(text: str) -> int | None:
    digits = text.replace(",", "")
    return int(digits) if digits.isascii() and digits.isdigit() else None


def _lines(text: str | Iterable[str]) -> Iterable[str]:
    if isinstance(text, str):
        return text.splitlines()
    return text


def parse_startup_log(text: str | Iterable[str], block_size: int | None = None) -> StartupFacts:
    """Scan engine log text (a string or an iterable of lines) for the startup facts.

    ``block_size`` (tokens per KV block, the engine's ``--block-size``) turns V0 block counts
    into tokens; without it a V0 log gives blocks and ``kv_cache_tokens = None``. Never raises
    for any text; returns :class:`StartupFacts` (every field ``None`` when nothing matched).
    Raises ``ValueError`` only for a ``block_size`` below 1.
    """
    if block_size is not None and block_size < 1:
        raise ValueError(f"block_size {block_size}: give the engine's KV block size in tokens (≥ 1)")
    f: dict[str, object] = {}
    forms: list[str] = []
    n = 0

    def seen(form: str) -> None:
        if form not in forms:
            forms.append(form)

    for raw in _lines(text):
        n += 1
        line = raw[:MAX_LINE_CHARS]
        if "KV cache" in line or "KV Cache" in line:
            if m := KV_SIZE_RE.search(line):
                tok = _int(m["tok"])
                if tok is not None:
                    f["device"], f["kv_cache_tokens"] = m["dev"], tok
                    f.pop("kv_cache_blocks", None)
                    seen("v1-kv-size")
                    c = CONCURRENCY_RE.search(line, m.end())
                    if c:
                        seen("v1-one-line")
            if m := AVAILABLE_RE.search(line):
                f["available_kv_cache_bytes"] = _gib_bytes(m["g"])
                seen("v1-available")
            if m := V0_REST_RE.search(line):
                f["available_kv_cache_bytes"] = _gib_bytes(m["g"])
                seen("v0-rest")
            if m := CPU_SET_RE.search(line):
                f["available_kv_cache_bytes"] = _gib_bytes(m["g"])
                seen("cpu-kv-set")
        if "Maximum concurrency" in line and (m := CONCURRENCY_RE.search(line)):
            length = _int(m["len"])
            if length is not None:
                f["concurrency_tokens_per_request"] = length
                f["max_concurrency"] = float(m["x"])
                seen("v1-concurrency")
        if " blocks: " in line and (m := V0_BLOCKS_RE.search(line)):
            blocks = int(m["b"])
            f["device"], f["kv_cache_blocks"] = m["dev"], blocks
            f["cpu_swap_blocks"] = int(m["c"])
            f["kv_cache_tokens"] = blocks * block_size if block_size else None
            seen("v0-blocks")
    return StartupFacts(forms=tuple(forms), lines=n, **f)  # type: ignore[arg-type]


@functools.lru_cache(maxsize=256)
def _compiled(pattern: str):  # noqa: ANN202 - re2's pattern type
    import re2

    opts = re2.Options()
    opts.log_errors = False
    return re2.compile(pattern, options=opts)


def scan_failures(text: str | Iterable[str],
                  patterns: Sequence[FailurePattern]) -> tuple[FailureMatch, ...]:
    """Every line of ``text`` that matches one of ``patterns`` (RE2), at most one match per
    pattern and line, in line order; at most 100 matches are returned. Each line is scanned up
    to :data:`MAX_LINE_CHARS`. Patterns were validated (compiled) when the profile was loaded,
    so this does not raise for a profile's patterns."""
    compiled = [(p, _compiled(p.pattern)) for p in patterns]
    out: list[FailureMatch] = []
    for no, raw in enumerate(_lines(text), start=1):
        # google-re2 encodes strictly: a lone surrogate (a log decoded with surrogateescape)
        # raised UnicodeEncodeError; it is matched as U+FFFD
        line = without_surrogates(raw[:MAX_LINE_CHARS])
        for p, rx in compiled:
            if rx.search(line):
                out.append(FailureMatch(name=p.name, meaning=p.meaning, line_no=no,
                                        line=line[:300]))
                if len(out) >= 100:
                    return tuple(out)
    return tuple(out)


__all__ = ["FailureMatch", "MAX_LINE_CHARS", "StartupFacts", "parse_startup_log", "scan_failures"]
