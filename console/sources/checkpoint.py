"""Checkpoint scan: safetensors headers, the shard index and the declared quantization scheme.

Only headers are read. A safetensors file is (format spec, ``huggingface/safetensors``
README "Format" and ``safetensors/src/tensor.rs`` ``SafeTensors::read_metadata``)::

    bytes 0..8        N, an unsigned 64-bit little-endian integer: the header length
    bytes 8..8+N      a UTF-8 JSON object: {"__metadata__": {str: str}?,
                                            NAME: {"dtype": D, "shape": [..], "data_offsets": [b, e]}}
    bytes 8+N..       the tensor data; NAME's bytes are [8+N+b, 8+N+e)

so a tensor's size is exactly ``e − b`` (also for packed 4-bit weights stored as ``U8`` and their
FP8 scales), tensor data is never touched, and sparse or truncated files with real headers scan
the same as full ones. The checks are the library's (``Metadata::validate``): header length at
most 100,000,000 B, offsets sorted, contiguous from 0 and ``e ≥ b``, ``e − b`` = elements × dtype
size for dtypes the format defines. A header that breaks them is a :class:`SafetensorsHeaderError`
naming the file and the byte offset. A dtype this module does not know keeps its ``e − b`` bytes
and is flagged in :attr:`CheckpointSummary.unknown_dtypes`.

The loading rule is vLLM's (0.32.0, ``vllm/model_executor/model_loader/weight_utils.py``):
with a ``model.safetensors.index.json``, the files loaded are the shards its ``weight_map``
names (``filter_duplicate_safetensors_files``), and *every* tensor in each of them is loaded
(``safetensors_weights_iterator`` iterates all of a file's keys), wherever the index says it
is; without an index, every ``*.safetensors`` file. Totals count exactly those tensors.
``metadata.total_size`` is never read by vLLM. Disagreements between the index and the shards
are :class:`CheckpointProblem` warnings carrying the bytes involved — a tensor in a named shard
but not in the index (counted), in another named shard than the index says (counted where it
is), in two named shards (counted once), a shard on disk the index does not name (not
counted), ``total_size`` ≠ the counted sum. Errors (the sizes cannot be trusted; the fit gives
no verdict): a named shard missing, a listed tensor in no shard, a dtype the format does not
define.

The quantization scheme is reported as the files declare it — ModelOpt's ``hf_quant_config.json``
(``quantization.quant_algo`` FP8 / NVFP4 / MIXED_PRECISION with ``quantized_layers``) or
``config.json`` ``quantization_config`` (``quant_method`` modelopt, compressed-tensors with its
``config_groups`` including the ``mixed-precision`` format, fp8, …) — never guessed from dtypes.
Keys as vLLM reads them: ``vllm/model_executor/layers/quantization/modelopt.py``
(``ModelOptQuantConfigBase.from_config``, ``ModelOptMixedPrecisionConfig``) and
``.../compressed_tensors/compressed_tensors.py`` (``CompressedTensorsConfig.from_config``).
"""

from __future__ import annotations

import contextlib
import gc
import json
import math
import os
import re
import struct
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from itertools import chain, repeat
from operator import and_, itemgetter, mul, rshift, sub
from pathlib import Path
from typing import Any, Literal, NamedTuple

import orjson
from pydantic import Field

from seat_console.core.base import Frozen
from seat_console.core.checkpoint import (
    DEFAULT_PLE_PATTERN,
    ROLES,
    CheckpointProblem,
    CheckpointSummary,
    DtypeTotal,
    IndexSummary,
    ProblemKind,
    QuantGroup,
    QuantScheme,
    Role,
    RoleTotal,
    ShardSummary,
    TensorInfo,
    TpClass,
    TpSplit,
    VocabTensor,
)
from seat_console.core.untrusted import (
    MAX_DEPTH,
    InputError,
    compile_re2,
    get_dict,
    get_int,
    get_str,
    load_json,
    without_surrogates,
)

MAX_HEADER_BYTES = 100_000_000
"""The safetensors library refuses headers larger than this (``MAX_HEADER_SIZE``, tensor.rs)."""

MAX_TENSOR_DIMS = 64
"""Most dimensions a tensor's ``shape`` may have (PyTorch's limit is 64; real tensors have at
most 5). A longer shape is refused before ``math.prod`` multiplies thousands of big integers."""

MAX_CONFIG_BYTES = 16 << 20
"""Largest ``config.json`` / ``hf_quant_config.json`` / index file read (16 MiB; the index of a
~90,000-tensor DeepSeek-V3 checkpoint is ~9 MB)."""

DTYPE_BITS: dict[str, int] = {
    "BOOL": 8, "U8": 8, "I8": 8, "F8_E5M2": 8, "F8_E4M3": 8, "F8_E8M0": 8,
    "F8_E4M3FNUZ": 8, "F8_E5M2FNUZ": 8,
    "I16": 16, "U16": 16, "F16": 16, "BF16": 16,
    "I32": 32, "U32": 32, "F32": 32,
    "I64": 64, "U64": 64, "F64": 64, "C64": 64,
    "F4": 4, "F6_E2M3": 6, "F6_E3M2": 6,
}
"""Bits per element of each dtype the safetensors library (0.8) accepts (``Dtype::bitsize``); the
sub-byte ``F4``/``F6_*`` are packed: a tensor takes elements × bits / 8 bytes, which must be a
whole number (the library refuses it otherwise)."""


_EMBED_RE = re.compile(
    r"(^|\.)(embed_tokens|lm_head|wte|word_embeddings|embed_in|embed_out|tok_embeddings)(\.|$)")
_EXPERT_RE = re.compile(r"(^|\.)experts\.")
_NORM_RE = re.compile(r"(norm|(^|\.)ln_?\w*|layernorm)", re.IGNORECASE)
_ROUTER_RE = re.compile(r"(^|\.)(mlp|block_sparse_moe|feed_forward|moe)\.(gate|router)\.|"
                        r"(^|\.)router\.")
_REPLICATED_LINEAR_RE = re.compile(
    r"(^|\.)(q_a_proj|kv_a_proj_with_mqa|q_a_layernorm|kv_a_layernorm|rotary_emb|"
    r"shared_expert_gate|patch_embed|patch_embedding|per_layer_projection|per_layer_input_gate|"
    r"embedding_projection|eh_proj)\.|inv_freq$|(^|\.)(mm_input_projection_weight|"
    r"class_embedding)$|(^|\.)mm_soft_emb_norm\.")
"""Tensors vLLM builds as ``ReplicatedLinear``, a plain ``nn.Parameter`` or a convolution, so
every TP rank holds all of them (vLLM 0.32.0 ``vllm/model_executor/models/``): MLA's
``q_a_proj``/``kv_a_proj_with_mqa`` (deepseek_v2.py); the shared-expert gate
(``qwen2_moe.py`` / ``qwen3_next.py``: ``shared_expert_gate = ReplicatedLinear(hidden, 1)``);
vision patch embeddings (``Conv2dLayer`` / ``Conv3dLayer`` in siglip.py, qwen2_vl.py, or
``ReplicatedLinear``); Gemma 3's projector (``gemma3_mm.py``: ``mm_input_projection_weight =
nn.Parameter``, ``mm_soft_emb_norm``); Gemma 3n's ``per_layer_projection`` /
``per_layer_input_gate`` / ``embedding_projection``; CLIP's ``class_embedding``; MTP ``eh_proj``."""
_ROW_PARALLEL_RE = re.compile(r"(^|\.)(o_proj|down_proj|dense|out_proj|fc2|c_proj|w2|"
                              r"dense_4h_to_h)\.bias$")
_KV_PROJ_RE = re.compile(r"(^|\.)(k_proj|v_proj)\.")


class CheckpointError(Exception):
    """A checkpoint directory cannot be scanned (missing, no safetensors files, unreadable)."""


class SafetensorsHeaderError(CheckpointError):
    """A safetensors header is corrupt or lies about its data.

    ``file`` is the path, ``offset`` the byte offset in the file where the problem is (0: the
    length prefix; 8 + i: byte i of the JSON header, e.g. the tensor entry at fault).
    """

    def __init__(self, file: str | os.PathLike[str], offset: int, problem: str) -> None:
        self.file = str(file)
        self.offset = offset
        self.problem = problem
        super().__init__(f"{self.file}: corrupt safetensors header at byte offset {offset}: "
                         f"{problem}")


class ShardHeader(Frozen):
    """The parsed header of one safetensors file.

    ``data_bytes`` is the largest ``data_offsets`` end; ``missing_bytes`` is how much of the
    declared data the file lacks (a truncated copy; 0 for complete or sparse files).
    """

    path: str
    file_size: int
    header_len: int
    data_bytes: int
    missing_bytes: int = 0
    metadata: dict[str, str] | None = None
    tensors: list[TensorInfo] = Field(default_factory=list)


def _entry_offset(header: bytes, name: str) -> int:
    """Byte offset in the file of tensor ``name``'s key in the JSON header (8 if not found)."""
    pos = header.find(json.dumps(name).encode("utf-8") + b":")
    if pos < 0:  # a lone surrogate cannot be in the UTF-8 text unescaped: surrogatepass
        pos = header.find(json.dumps(name, ensure_ascii=False).encode("utf-8", "surrogatepass"))
    return 8 + max(pos, 0)


def expected_nbytes(dtype: str, shape: Iterable[int]) -> int | None:
    """Bytes a tensor of ``dtype`` and ``shape`` takes (ceil(elements × bits / 8)); ``None`` for a
    dtype not in :data:`DTYPE_BITS`."""
    bits = DTYPE_BITS.get(dtype)
    if bits is None:
        return None
    return (math.prod(shape) * bits + 7) // 8


_RawTensor = tuple[str, str, list[int], int, int]
"""(name, dtype, shape, begin, end) — one tensor as the per-entry checks read it."""


class _Columns(NamedTuple):
    """A shard's tensors as parallel lists, sorted by ``data_offsets`` (the scan's internal,
    allocation-light form: no per-tensor object is built). ``nbytes`` is ``end − begin`` (B),
    ``numels`` the element count (``math.prod(shape)``), ``ndims`` ``len(shape)``."""

    names: list[str]
    dtypes: list[str]
    shapes: list[list[int]]
    begins: Sequence[int]
    ends: Sequence[int]
    nbytes: list[int]
    numels: list[int]
    ndims: list[int]


class _Header(NamedTuple):
    """One parsed shard header: file size and header length (B), ``__metadata__``, the tensors
    and the data bytes (the last tensor's end)."""

    file_size: int
    header_len: int
    metadata: dict[str, str] | None
    columns: _Columns
    data_bytes: int


def read_safetensors_header(path: str | os.PathLike[str]) -> ShardHeader:
    """Read and validate one safetensors file's header (the tensor data is never read).

    Returns a :class:`ShardHeader` whose tensors are sorted by ``data_offsets`` (roles and TP
    classes left at their defaults; :func:`scan_checkpoint` fills them).
    Raises :class:`SafetensorsHeaderError` (file + byte offset) for: a file shorter than 8 bytes,
    a header length of 0, above 100,000,000 or beyond the end of the file, a header that is not
    UTF-8 JSON or not an object, an entry without a string ``dtype``, an integer ``shape`` list
    and a two-integer ``data_offsets``, offsets not contiguous from 0 or with end < begin,
    elements × bits not a whole number of bytes, or ``end − begin`` ≠ elements × dtype size for
    a known dtype; :class:`CheckpointError` if the file cannot be opened.
    """
    p = Path(path)
    size, n, meta, cols, cursor = _parse_header(p)
    tensors = [TensorInfo(name=name, shard=p.name, dtype=dtype, shape=shape, begin=b, end=e)
               for name, dtype, shape, b, e in zip(cols.names, cols.dtypes, cols.shapes,
                                                   cols.begins, cols.ends)]
    return ShardHeader(path=str(p), file_size=size, header_len=n, data_bytes=cursor,
                       missing_bytes=max(0, 8 + n + cursor - size), metadata=meta,
                       tensors=tensors)


def _parse_header(p: Path) -> _Header:
    """The header of shard ``p`` with the checks of :func:`read_safetensors_header` (its errors).

    First orjson parses the header and its entries are checked all at once
    (:func:`_header_at_once`, :func:`_entries_at_once`: a few passes of C-level builtins over
    each field). A header that path does not accept whole — a problem to report, a dtype the
    format does not define, JSON the two parsers could read apart — is parsed by ``json`` as
    before and checked all at once again or, with a ``\\u`` escape or a problem, entry by entry
    (:func:`_entries_one_by_one`), which finds the first problem and says which. Entry offsets
    are located only for errors."""
    try:
        with p.open("rb") as fh:
            size = os.fstat(fh.fileno()).st_size
            prefix = fh.read(8)
            if len(prefix) < 8:
                raise SafetensorsHeaderError(p, 0, f"file is {size} bytes; a safetensors file "
                                             "starts with an 8-byte little-endian header length")
            (n,) = struct.unpack("<Q", prefix)
            if n == 0 or n > MAX_HEADER_BYTES:
                raise SafetensorsHeaderError(
                    p, 0, f"header length {n:,} is {'zero' if n == 0 else 'above the format limit'}"
                    f" (1..{MAX_HEADER_BYTES:,} bytes); not a safetensors file?")
            if 8 + n > size:
                raise SafetensorsHeaderError(
                    p, 0, f"header length says {n:,} bytes but only {size - 8:,} bytes follow "
                    "the length prefix (truncated inside the header, or not safetensors)")
            header = fh.read(n)
    except OSError as exc:
        raise CheckpointError(f"{p}: cannot read: {exc.strerror or exc}") from None
    try:
        text = header.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise SafetensorsHeaderError(p, 8 + exc.start, "header is not valid UTF-8") from None
    fast = _header_at_once(text)
    if fast is not None:
        meta, cols = fast
        return _Header(size, n, meta, cols, cols.ends[-1] if cols.ends else 0)
    try:
        obj = json.loads(text)
    except json.JSONDecodeError as exc:
        raise SafetensorsHeaderError(
            p, 8 + len(text[:exc.pos].encode("utf-8")), f"header is not valid JSON: {exc.msg}"
        ) from None
    except RecursionError:
        # Only nesting this deep exhausts the C parser's recursion guard; the checks below
        # refuse any entry nested more than 3 levels, so no depth pre-scan is needed.
        raise SafetensorsHeaderError(p, 8, "header nests arrays/objects too deeply to parse"
                                     ) from None
    except ValueError as exc:  # an integer literal above Python's 4,300-digit limit
        raise SafetensorsHeaderError(p, 8, f"header is not acceptable JSON: {exc}") from None
    if not isinstance(obj, dict):
        raise SafetensorsHeaderError(p, 8, f"header is a JSON {type(obj).__name__}, not an object")
    meta = obj.pop("__metadata__", None)
    if meta is not None and not (isinstance(meta, dict)
                                 and all(isinstance(v, str) for v in meta.values())):
        raise SafetensorsHeaderError(p, _entry_offset(header, "__metadata__"),
                                     "__metadata__ must map strings to strings")

    # only a \uD800-\uDFFF escape can put a lone surrogate into the parsed text
    escapes = "\\u" in text
    cols = None if escapes else _entries_at_once(obj)
    if cols is None:
        cols = _entries_one_by_one(p, header, obj, escapes)
    return _Header(size, n, meta, cols, cols.ends[-1] if cols.ends else 0)


def _header_at_once(text: str) -> tuple[dict[str, str] | None, _Columns] | None:
    """``(__metadata__, entries)`` of header ``text`` parsed by orjson (a project dependency,
    ~1.7× the standard parser's speed on these headers) when it is a header the checks accept
    whole (:func:`_entries_at_once`), each entry exactly ``dtype``, ``shape`` and
    ``data_offsets``; else ``None``, and :func:`_parse_header` parses and checks it the
    standard way, which says what is wrong.

    Where the two parsers differ, orjson refuses (NaN and infinities, a lone-surrogate escape,
    a byte order mark) or reads an integer beyond 64 bits as a float, which the checks refuse;
    an accepted header nests three deep at most (no extra keys, no nested values), so the
    standard parser's recursion limit cannot refuse it either. Both keep a repeated key's last
    value in its first place. So what comes back is what ``json.loads`` gives."""
    try:
        obj = orjson.loads(text)
    except orjson.JSONDecodeError:
        return None
    if type(obj) is not dict:
        return None
    meta = obj.pop("__metadata__", None)
    if meta is not None and not (type(meta) is dict
                                 and all(type(v) is str for v in meta.values())):
        return None
    try:
        if obj and set(map(len, obj.values())) != {3}:
            return None
    except TypeError:   # an entry without a length (a number, null): not an object
        return None
    cols = _entries_at_once(obj)
    return None if cols is None else (meta, cols)


_DTYPE, _SHAPE, _OFFSETS = itemgetter("dtype"), itemgetter("shape"), itemgetter("data_offsets")
_KNOWN_DTYPES = frozenset(DTYPE_BITS)
_DTYPE_BYTES = {d: b >> 3 for d, b in DTYPE_BITS.items() if not b & 7}
"""Bytes per element of the whole-byte dtypes (all but the packed ``F4``/``F6_*``)."""


def _entries_at_once(obj: dict[str, Any]) -> _Columns | None:
    """Header entries ``obj`` (name → entry, ``__metadata__`` removed) as :class:`_Columns`
    sorted by offset, when every entry passes every check of :func:`_entries_one_by_one` and
    every dtype is one the format defines; else ``None`` (the caller checks entry by entry,
    which names the problem). Each check is one pass of a C-level builtin over one field of all
    entries: a non-object entry or a missing field raises in ``itemgetter``; the dtypes must
    all be in :data:`DTYPE_BITS` (so strings); the shapes lists of at most
    :data:`MAX_TENSOR_DIMS` items; ``data_offsets`` two items; every dimension and offset an
    ``int`` (``type`` is ``int``: not a bool, not a float) ≥ 0; elements × bits / 8 =
    ``end − begin`` (so end ≥ begin); sorted by (begin, end) as the per-entry path sorts
    (stable), each begin the previous end, from 0."""
    names = list(obj)
    if not names:
        return _Columns([], [], [], [], [], [], [], [])
    try:
        entries = list(obj.values())
        dtypes = list(map(_DTYPE, entries))
        shapes = list(map(_SHAPE, entries))
        offsets = list(map(_OFFSETS, entries))
        kinds = set(dtypes)
        ndims = list(map(len, shapes))   # a number or null has no length: TypeError
        # a string or object shape of some length yields characters or keys below, which are
        # not ints; only an empty one needs its type looked at
        if not (kinds <= _KNOWN_DTYPES and max(ndims) <= MAX_TENSOR_DIMS
                and (0 not in ndims or set(map(type, shapes)) == {list})
                and set(map(len, offsets)) == {2}):
            return None
        begins, ends = zip(*offsets)   # an object's keys or a string's characters: not ints
        dims = list(chain.from_iterable(shapes))
    except (KeyError, TypeError):
        return None
    # offsets need no sign check: ends − begins = bytes ≥ 0, contiguous from 0
    if set(map(type, chain(dims, begins, ends))) != {int} or (dims and min(dims) < 0):
        return None
    nbytes = list(map(sub, ends, begins))
    numels = list(map(math.prod, shapes))
    whole = kinds <= _DTYPE_BYTES.keys()   # whole bytes per element: no remainder to check
    per = _DTYPE_BYTES if whole else DTYPE_BITS
    sizes = repeat(per[next(iter(kinds))]) if len(kinds) == 1 else map(per.__getitem__, dtypes)
    need = list(map(mul, numels, sizes))
    if not whole:
        if any(map(and_, need, repeat(7))):   # elements × bits not a multiple of 8
            return None
        need = list(map(rshift, need, repeat(3)))
    if need != nbytes:   # so end ≥ begin ≥ 0 everywhere
        return None
    columns: list[Any] = [names, dtypes, shapes, begins, ends, nbytes, numels, ndims]
    if begins[0] or begins[1:] != ends[:-1]:
        # not written in offset order: sort as the per-entry path does ((begin, end), stable;
        # [b, e] lists compare as those tuples) and look again
        order = sorted(range(len(names)), key=offsets.__getitem__)
        columns = [list(map(col.__getitem__, order)) for col in columns]
        begins, ends = columns[3], columns[4]
        if begins[0] or begins[1:] != ends[:-1]:
            return None
    return _Columns(*columns)


def _entries_one_by_one(p: Path, header: bytes, obj: dict[str, Any], escapes: bool) -> _Columns:
    """Header entries ``obj`` checked one by one, in the file's order, then sorted by offset and
    checked contiguous: the first problem raises :class:`SafetensorsHeaderError` naming the
    tensor and its byte offset in ``p`` (``header`` is the JSON text's bytes); ``escapes``: the
    text holds a ``\\u`` escape (so a name or dtype may hold a lone surrogate)."""
    def bad(name: str, problem: str) -> SafetensorsHeaderError:
        return SafetensorsHeaderError(p, _entry_offset(header, name),
                                      f"tensor {name!r}: {problem}")

    raw: list[_RawTensor] = []
    bits_of = DTYPE_BITS.get
    for name, entry in obj.items():
        if escapes and without_surrogates(name) is not name:
            raise bad(name, "tensor name holds a lone surrogate code point (a \\uD800-\\uDFFF "
                            "escape without its pair): not Unicode text; safetensors refuses it")
        if not isinstance(entry, dict):
            raise bad(name, "entry is not an object")
        dtype, shape, offsets = entry.get("dtype"), entry.get("shape"), entry.get("data_offsets")
        if not isinstance(dtype, str):
            raise bad(name, "missing or non-string dtype")
        if escapes and without_surrogates(dtype) is not dtype:
            raise bad(name, f"dtype {dtype!r} holds a lone surrogate code point: not a dtype")
        if type(shape) is not list:
            raise bad(name, f"shape must be a list of non-negative integers, got "
                            f"{_clip(repr(shape))}")
        if len(shape) > MAX_TENSOR_DIMS:
            raise bad(name, f"shape has {len(shape):,} dimensions (at most {MAX_TENSOR_DIMS})")
        for d in shape:
            if type(d) is not int or d < 0:
                raise bad(name, f"shape must be a list of non-negative integers, got "
                                f"{_clip(repr(shape))}")
        if not (isinstance(offsets, list) and len(offsets) == 2
                and type(offsets[0]) is int and type(offsets[1]) is int
                and offsets[0] >= 0 and offsets[1] >= 0):
            raise bad(name, f"data_offsets must be two non-negative integers, got "
                            f"{_clip(repr(offsets))}")
        begin, end = offsets
        if end < begin:
            raise bad(name, f"data_offsets end {end} is before begin {begin}")
        bits = bits_of(dtype)
        if bits is not None:
            total_bits = math.prod(shape) * bits
            if total_bits % 8:
                raise bad(name, f"{dtype} {shape} is {total_bits} bits, not a whole number of "
                                "bytes")
            if total_bits // 8 != end - begin:
                raise bad(name, f"{dtype} {shape} needs {total_bits // 8:,} bytes but "
                                f"data_offsets [{begin}, {end}] span {end - begin:,}")
        raw.append((name, dtype, shape, begin, end))
    raw.sort(key=lambda t: (t[3], t[4]))
    cursor = 0
    for name, _d, _s, b, e in raw:
        if b != cursor:
            kind = "overlaps the previous tensor" if b < cursor else \
                f"leaves a gap of {b - cursor:,} bytes after the previous tensor"
            raise bad(name, f"data_offsets [{b}, {e}] {kind} (data must be contiguous from "
                            "offset 0)")
        cursor = e
    if not raw:
        return _Columns([], [], [], [], [], [], [], [])
    names, dtypes, shapes, begins, ends = map(list, zip(*raw))
    return _Columns(names, dtypes, shapes, begins, ends, list(map(sub, ends, begins)),
                    list(map(math.prod, shapes)), list(map(len, shapes)))


CASTABLE_DTYPES: dict[str, int] = {"F16": 2, "BF16": 2, "F32": 4, "F64": 8}
"""Stored floating-point dtypes (bytes per element) that vLLM converts to the served dtype:
parameters are created in the model dtype (``vllm/model_executor/model_loader/utils.py``
``set_default_torch_dtype(model_config.dtype)``) and ``default_weight_loader`` copies the
checkpoint tensor into them (``param.data.copy_(loaded_weight)``, a cast). Quantised weights
(``U8``/``I8``/``I32`` packed, ``F8_*``, ``F4``) keep their stored bytes, and so do a quantised
checkpoint's scales and zero points (:data:`QUANT_AUX_RE`), which the quantisation methods
create in their own dtype."""

QUANT_AUX_RE = re.compile(r"(_scale|_scale_inv|_scale_2|\.scales|\.qzeros|\.zeros|\.g_idx|"
                          r"_zero_point|\.zp|_global_scale)$|(^|\.)(weight_scale|input_scale|"
                          r"k_scale|v_scale|q_scale)(\.|$)")
"""Names of a quantised checkpoint's auxiliary tensors (scales, zero points, group indices):
kept at their stored bytes when the checkpoint declares a quantisation scheme."""


def is_castable(name: str, dtype: str, quantised: bool) -> bool:
    """Whether vLLM holds tensor ``name`` at the served dtype rather than as stored: an
    unquantised floating dtype (:data:`CASTABLE_DTYPES`), and not a scale / zero point of a
    checkpoint that declares quantisation (``quantised``)."""
    if dtype not in CASTABLE_DTYPES:
        return False
    return not (quantised and QUANT_AUX_RE.search(name))


def _clip(text: str, limit: int = 120) -> str:
    return text if len(text) <= limit else f"{text[:limit]}… ({len(text):,} characters)"


def compile_ple_pattern(pattern: str) -> Any:
    """The PLE tensor-name pattern compiled with RE2 (linear-time matching: a pattern such as
    ``(\\w+\\.?)*x$`` cannot hang the scan, as it did with Python ``re``).

    Raises :class:`CheckpointError` naming ``ple_tensor_pattern`` for a pattern RE2 refuses
    (look-arounds, back-references) or that is not a string."""
    try:
        return compile_re2(pattern, "ple_tensor_pattern")
    except InputError as exc:
        raise CheckpointError(str(exc)) from None


def classify_role(name: str, ple_pattern: Any) -> Role:
    """The :data:`Role` of a tensor name (the PLE pattern, an RE2 or ``re`` program with
    ``.search``, is tested first)."""
    if ple_pattern.search(name):
        return "ple"
    if _EMBED_RE.search(name):
        return "embed_lm_head"
    if _EXPERT_RE.search(name):
        return "routed_experts"
    return "other"


def classify_tp(name: str, shape: list[int], role: Role) -> TpClass:
    """The :data:`TpClass` of a tensor, by vLLM's layer classes (see :data:`TpClass`)."""
    numel = math.prod(shape)
    if numel <= 1:
        return "replicated"
    if role in ("ple", "embed_lm_head"):
        return "vocab" if len(shape) >= 2 else "replicated"
    if len(shape) == 1 and _NORM_RE.search(name.rsplit(".", 1)[0]):
        return "replicated"
    if _ROUTER_RE.search(name) or _REPLICATED_LINEAR_RE.search(name):
        return "replicated"
    if len(shape) == 1 and _ROW_PARALLEL_RE.search(name):
        return "replicated"
    if _KV_PROJ_RE.search(name):
        return "kv_proj"
    return "split"


def _as_int(v: Any) -> int | None:
    """``v`` as a non-negative int when it is one (not a ``bool``: ``true`` is not 1 byte) or
    a string of up to 20 decimal digits; else ``None`` (a negative size is unknown, not a
    size)."""
    if isinstance(v, bool):
        return None
    if isinstance(v, int):
        return v if v >= 0 else None
    if isinstance(v, str) and v.strip().isascii() and v.strip().isdigit() and len(v) <= 20:
        return int(v)
    return None


def _strs(v: Any) -> list[str]:
    """A list of strings from a JSON value: a list keeps its string items, anything else is
    empty (a bare string is not iterated character by character)."""
    return [x for x in v if isinstance(x, str)] if isinstance(v, list) else []


def _algo(v: Any) -> str | None:
    return v.upper() if isinstance(v, str) and v else None


def parse_quant_config(config: dict[str, Any] | None,
                       hf_quant_config: dict[str, Any] | None) -> QuantScheme:
    """The :class:`QuantScheme` declared by ``config.json`` and/or ``hf_quant_config.json``.

    ``config.json`` ``quantization_config`` wins when both are present (vLLM reads it first,
    ``vllm/config/model.py`` ``_parse_quant_hf_config``); ``hf_quant_config.json`` (ModelOpt's
    legacy file, ``{"producer": …, "quantization": {"quant_algo": …}}``) otherwise.
    Never raises: a field of the wrong JSON type (an object where a list is expected, a number
    where a string is, ``null``) is read as absent.
    """
    qc = (config or {}).get("quantization_config") if isinstance(config, dict) else None
    if isinstance(qc, dict):
        return _scheme_from(qc, "config.json:quantization_config")
    if isinstance(hf_quant_config, dict):
        scheme = _scheme_from(hf_quant_config, "hf_quant_config.json")
        if scheme.method is None:
            # a producer name of another JSON type (a number) is absent, never stored as is
            method = get_str(get_dict(hf_quant_config, "producer"), "name", max_len=200)
            scheme = scheme.model_copy(update={"method": method or "modelopt"})
        return scheme
    return QuantScheme()


def _per_layer(layers: dict[str, Any]) -> dict[str, str]:
    return {str(k): _algo(v.get("quant_algo")) or "?"
            for k, v in layers.items() if isinstance(v, dict)}


def _scheme_from(qc: dict[str, Any], source: str) -> QuantScheme:
    method = get_str(qc, "quant_method")
    if isinstance(qc.get("quantization"), dict):  # ModelOpt nested form
        q = qc["quantization"]
        return QuantScheme(
            declared=True, source=source, method=method or None,
            quant_algo=_algo(q.get("quant_algo")),
            kv_cache_quant_algo=_algo(q.get("kv_cache_quant_algo")),
            group_size=_as_int(q.get("group_size")),
            per_layer=_per_layer(get_dict(q, "quantized_layers")),
            exclude=_strs(q.get("exclude_modules")),
            extra={k: v for k, v in qc.items() if k in ("producer",)},
        )
    groups = []
    for gname, g in get_dict(qc, "config_groups").items():
        if isinstance(g, dict):
            groups.append(QuantGroup(
                name=str(gname), targets=_strs(g.get("targets")), format=get_str(g, "format"),
                weights=g["weights"] if isinstance(g.get("weights"), dict) else None,
                input_activations=(g["input_activations"]
                                   if isinstance(g.get("input_activations"), dict) else None)))
    kv_scheme = qc.get("kv_cache_scheme") if isinstance(qc.get("kv_cache_scheme"), dict) else None
    kv_algo = _algo(qc.get("kv_cache_quant_algo"))
    if kv_algo is None and kv_scheme and kv_scheme.get("type") == "float" \
            and get_int(kv_scheme, "num_bits") == 8:
        kv_algo = "FP8"
    extra_keys = ("fmt", "weight_block_size", "activation_scheme", "bits", "quant_type")
    return QuantScheme(
        declared=True, source=source, method=method or None,
        quant_algo=_algo(qc.get("quant_algo")),
        kv_cache_quant_algo=kv_algo,
        kv_cache_scheme=kv_scheme, group_size=_as_int(qc.get("group_size")),
        format=get_str(qc, "format"),
        per_layer=_per_layer(get_dict(qc, "quantized_layers")),
        groups=groups,
        exclude=_strs(qc.get("ignore")) or _strs(qc.get("exclude_modules")),
        extra={k: qc[k] for k in extra_keys if k in qc},
    )


_NOT_AT_ONCE = object()


def _json_at_once(raw: bytes) -> Any:
    """``raw`` parsed by orjson (~1.8× the standard parser's speed on a 90,000-entry shard
    index) when that is sure to be what :func:`~seat_console.core.untrusted.load_json` returns
    for it (with ``max_bytes`` :data:`MAX_CONFIG_BYTES`), else :data:`_NOT_AT_ONCE` (the
    caller uses ``load_json``, which also says what is wrong).

    Sure means: at most :data:`MAX_CONFIG_BYTES`, UTF-8, accepted by orjson — which refuses
    NaN, infinities and a lone-surrogate escape, as ``load_json`` does or replaces — nested at
    most :data:`~seat_console.core.untrusted.MAX_DEPTH` deep and holding no float (orjson reads
    an integer beyond 64 bits as a float; a document with any float is left to ``load_json``).
    The walk looks at each container's values with one ``set(map(type, …))``."""
    if len(raw) > MAX_CONFIG_BYTES:
        return _NOT_AT_ONCE
    try:
        value = orjson.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, orjson.JSONDecodeError):
        return _NOT_AT_ONCE
    if type(value) is float:
        return _NOT_AT_ONCE
    stack: list[tuple[Any, int]] = [(value, 1)] if type(value) in (dict, list) else []
    while stack:
        container, depth = stack.pop()
        items = container.values() if type(container) is dict else container
        kinds = set(map(type, items))
        if float in kinds:
            return _NOT_AT_ONCE
        if dict in kinds or list in kinds:
            if depth >= MAX_DEPTH:   # a container inside would be nested deeper
                return _NOT_AT_ONCE
            stack.extend((v, depth + 1) for v in items if type(v) in (dict, list))
    return value


def _read_json(path: Path) -> tuple[dict[str, Any] | None, str | None]:
    """``(object, None)``, ``(None, None)`` when absent, or ``(None, reason naming the file)``
    for a file that is unreadable, above :data:`MAX_CONFIG_BYTES`, not bounded JSON
    (:func:`~seat_console.core.untrusted.load_json`) or not an object."""
    try:
        with path.open("rb") as fh:
            size = os.fstat(fh.fileno()).st_size
            if size > MAX_CONFIG_BYTES:
                return None, (f"{path}: {size:,} bytes is above the {MAX_CONFIG_BYTES:,}-byte "
                              "limit for a JSON file of a checkpoint")
            raw = fh.read(MAX_CONFIG_BYTES + 1)
    except FileNotFoundError:
        return None, None
    except OSError as exc:
        return None, f"{path}: cannot read: {exc.strerror or exc}"
    data = _json_at_once(raw)
    if data is _NOT_AT_ONCE:
        try:
            data = load_json(raw, str(path), max_bytes=MAX_CONFIG_BYTES)
        except InputError as exc:
            return None, str(exc)
    if not isinstance(data, dict):
        return None, f"{path}: top level is a JSON {type(data).__name__}, expected an object"
    return data, None


LISTED_AT_MOST = 50
"""Per-tensor problems of one kind listed one by one at most; the rest are one problem."""


def _listed_problems(kind: ProblemKind, found: list[Any], *,
                     detail: Callable[[Any], str], more: Callable[[int, int | None], str],
                     nbytes: Callable[[Any], int] | None = None,
                     severity: Literal["error", "warning"] = "warning",
                     ) -> list[CheckpointProblem]:
    """One :class:`CheckpointProblem` of ``kind`` per item of ``found`` (``detail(item)``, bytes
    ``nbytes(item)`` or ``None`` without ``nbytes``) for the first :data:`LISTED_AT_MOST`, then
    one for the rest: ``more(count, their bytes summed or None)``. Empty ``found``: ``[]``."""
    out = [CheckpointProblem(kind=kind, severity=severity, detail=detail(t),
                             bytes=None if nbytes is None else nbytes(t))
           for t in found[:LISTED_AT_MOST]]
    rest = found[LISTED_AT_MOST:]
    if rest:
        total = None if nbytes is None else sum(nbytes(t) for t in rest)
        out.append(CheckpointProblem(kind=kind, severity=severity, bytes=total,
                                     detail=more(len(rest), total)))
    return out


def scan_checkpoint(directory: str | os.PathLike[str], *,
                    ple_pattern: str | None = None,
                    keep_tensors: bool = False) -> CheckpointSummary:
    """Scan a local checkpoint directory: headers, index, config and quantization.

    ``ple_pattern`` is a regex over tensor names selecting the PLE table (default
    :data:`DEFAULT_PLE_PATTERN`); ``keep_tensors`` keeps every :class:`TensorInfo` in the result
    (large for big MoE checkpoints). Reads only ``config.json``, ``hf_quant_config.json``,
    ``*.safetensors.index.json`` and each shard's header.
    Raises :class:`CheckpointError` if the directory does not exist or holds no ``*.safetensors``
    file and no index, or the PLE pattern is not a valid regex; :class:`SafetensorsHeaderError`
    for a corrupt or lying header (file + byte offset).

    The cyclic garbage collector is paused while it runs (:func:`_collector_paused`).
    """
    with _collector_paused():
        return _scan_checkpoint(directory, ple_pattern, keep_tensors)


@contextlib.contextmanager
def _collector_paused() -> Iterator[None]:
    """Pause CPython's cyclic garbage collector for the block (``gc.disable``), and start it
    again after if it was running.

    A scan parses a few hundred thousand JSON containers that reference counting frees (parsed
    JSON holds no reference cycle, and neither does the scan), yet each ~700 of them start a
    young collection and every ~25 % growth of the old generation a full one, which walks every
    object the process holds: on a 163-shard DeepSeek-V3 checkpoint the collector took 15–20 %
    of the scan's time (``gc.callbacks``; docs/benchmarks.md). Paused, cycles made meanwhile by
    other threads wait for the next collection after the block (tenths of a second). The TUI
    already keeps the collector out of the way of its start-up heap for the same reason
    (:mod:`seat_console.tui.heap`). Only a block that found it running starts it again: of two
    scans at once in two threads, the one that paused it restarts it when it ends, and the
    other finishes with it running; one that found it off (a caller's choice) leaves it off."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def _scan_checkpoint(directory: str | os.PathLike[str], ple_pattern: str | None,
                     keep_tensors: bool) -> CheckpointSummary:
    """:func:`scan_checkpoint` itself (the collector paused by the caller)."""
    t0 = time.perf_counter()
    root = Path(directory).expanduser()
    if not root.is_dir():
        raise CheckpointError(f"{root}: not a directory (give the checkpoint directory holding "
                              "config.json and the *.safetensors files)")
    pattern_text = ple_pattern or DEFAULT_PLE_PATTERN
    ple_re = compile_ple_pattern(pattern_text)
    problems: list[CheckpointProblem] = []

    config, err = _read_json(root / "config.json")
    if err:
        problems.append(CheckpointProblem(kind="config-unreadable", detail=err))
    hfq, err = _read_json(root / "hf_quant_config.json")
    if err:
        problems.append(CheckpointProblem(kind="quant-config-unreadable", detail=err))
    quant = parse_quant_config(config, hfq)
    if isinstance(config, dict) and isinstance(config.get("quantization_config"), dict) \
            and hfq is not None:
        other = parse_quant_config(None, hfq)
        if other.quant_algo and quant.quant_algo and other.quant_algo != quant.quant_algo:
            problems.append(CheckpointProblem(
                kind="quant-disagreement", severity="warning",
                detail=f"config.json declares {quant.quant_algo} but hf_quant_config.json "
                       f"declares {other.quant_algo}; vLLM uses config.json's"))

    # vLLM reads only model.safetensors.index.json (transformers' SAFE_WEIGHTS_INDEX_NAME,
    # vllm/model_executor/model_loader/default_loader.py): another index is not a filter.
    index_file = (root / "model.safetensors.index.json"
                  if (root / "model.safetensors.index.json").exists() else None)
    for other_index in sorted(root.glob("*.safetensors.index.json")):
        if other_index.name != "model.safetensors.index.json":
            problems.append(CheckpointProblem(
                kind="index-ignored", severity="warning",
                detail=f"{other_index.name}: vLLM reads only model.safetensors.index.json, so "
                       "this index selects nothing"
                       + ("" if index_file else "; every *.safetensors file is loaded")))
    weight_map: dict[str, str] | None = None
    listed_per_shard: Counter[str] = Counter()   # shard → tensors the index lists under it
    index_summary: IndexSummary | None = None
    if index_file is not None:
        idx, err = _read_json(index_file)
        if err or idx is None or not isinstance(idx.get("weight_map"), dict):
            raise CheckpointError(err or f"{index_file}: no 'weight_map' object; the index "
                                  "must map tensor names to shard files")
        weight_map = idx["weight_map"]
        try:   # ~90k entries name a few hundred shards: each name is checked once
            listed_per_shard = Counter(weight_map.values())
        except TypeError:   # an object or a list: not a name; the loop below says which
            listed_per_shard = Counter()
        if not listed_per_shard or not all(type(v) is str and _plain_file_name(v)
                                           for v in listed_per_shard):
            for k, v in weight_map.items():   # the first entry that is not a plain name
                if not isinstance(v, str) or not _plain_file_name(v):
                    raise CheckpointError(
                        f"{index_file}: weight_map[{_clip(repr(k))}] = {_clip(repr(v))} is not "
                        "a shard file name in this directory (a plain name of at most 255 "
                        "bytes such as 'model-00001-of-00002.safetensors')")
        meta = get_dict(idx, "metadata")
        index_summary = IndexSummary(file=index_file.name,
                                     total_size=_as_int(meta.get("total_size")),
                                     tensors_listed=len(weight_map),
                                     shards_listed=len(listed_per_shard))

    on_disk = sorted(p.name for p in root.glob("*.safetensors") if p.is_file())
    if weight_map is None and not on_disk:
        raise CheckpointError(f"{root}: no *.safetensors file and no "
                              "model.safetensors.index.json (is this a checkpoint directory?)")
    # The loading rule (vLLM 0.32.0 vllm/model_executor/model_loader/weight_utils.py):
    # with an index, the files are the shards its weight_map names
    # (filter_duplicate_safetensors_files keeps the files that appear as weight_map values),
    # and every tensor in each of those files is loaded (safetensors_weights_iterator iterates
    # all keys of a file), wherever the index says it is. Without an index, every
    # *.safetensors file. metadata.total_size is never read.
    shard_names = sorted(listed_per_shard) if weight_map is not None else on_disk
    index_name = index_file.name if index_file else "the index"

    tally = _Tally(ple_re, quant.declared, weight_map, listed_per_shard, keep_tensors)
    headers: dict[str, tuple[int, int, int, int]] = {}   # shard → size, header, tensors, data
    present = set(on_disk)   # regular files already (the glob above): no second stat
    for shard in shard_names:
        sp = root / shard
        if shard not in present and not sp.is_file():
            n_listed = listed_per_shard[shard]
            problems.append(CheckpointProblem(
                kind="missing-shard",
                detail=f"{shard}: listed in {index_name} for {n_listed} tensor(s) but not in "
                       f"{root}; vLLM would fail to load them, and their sizes are unknown"))
            continue
        # each shard is counted as soon as it is read, so no shard's parsed header outlives
        # its turn (less for the garbage collector to walk); the problems found while
        # counting follow the shard problems below, in the order they were found
        size, n, _meta, cols, data = _parse_header(sp)
        headers[shard] = (size, n, len(cols.names), data)
        missing = max(0, 8 + n + data - size)
        if missing:
            tally.problems.append(CheckpointProblem(
                kind="truncated-shard", severity="warning", bytes=missing,
                detail=f"{shard}: header declares {data:,} data bytes but the file lacks the "
                       f"last {missing:,} (sizes come from the header)"))
        tally.shard(shard, cols)
        del cols   # its shape lists are not kept alive through the next shard's parse
    if weight_map is not None:
        for extra in sorted(set(on_disk) - set(shard_names)):
            try:
                extra_size = (root / extra).stat().st_size
            except OSError:
                extra_size = None
            problems.append(CheckpointProblem(
                kind="unreferenced-shard", severity="warning", bytes=extra_size,
                detail=f"{extra}: on disk ({extra_size:,} B) but not named by {index_name}; "
                       "vLLM loads only the shards the index names, so it is not counted"
                       if extra_size is not None else
                       f"{extra}: on disk but not named by {index_name}; not counted"))
    problems += tally.problems
    unlisted, misplaced = tally.unlisted, tally.misplaced
    total, count = tally.total, tally.count
    by_dtype, roles, split = tally.totals()
    problems += _listed_problems(
        "unlisted-tensor", unlisted, nbytes=lambda t: t[2],
        detail=lambda t: (f"{t[0]}: in {t[1]} ({t[2]:,} B) but not in {index_name}'s "
                          "weight_map; counted: vLLM loads every tensor of a shard the index "
                          "names"),
        more=lambda n, b: f"… and {n} more unlisted tensors ({b:,} B), counted")
    problems += _listed_problems(
        "tensor-misplaced", misplaced, nbytes=lambda t: t[3],
        detail=lambda t: (f"{t[0]}: the index says {t[1]}, found in {t[2]} ({t[3]:,} B); "
                          "counted where it is (vLLM loads it from the file that holds it)"),
        more=lambda n, b: f"… and {n} more misplaced tensors ({b:,} B), counted")
    if weight_map is not None:
        absent = tally.absent(headers)
        problems += _listed_problems(
            "tensor-absent", absent, severity="error",
            detail=lambda n: (f"{n}: listed in {index_name} under {weight_map[n]} but in no "
                              "shard's header; its size is unknown and vLLM would fail to "
                              "initialise it"),
            more=lambda n, _b: f"… and {n} more tensors absent")

    if index_summary is not None and index_summary.total_size is not None \
            and not any(p.kind == "missing-shard" for p in problems) \
            and index_summary.total_size != total:
        diff = index_summary.total_size - total
        problems.append(CheckpointProblem(
            kind="total-size", severity="warning", bytes=diff,
            detail=f"index metadata.total_size = {index_summary.total_size:,} B but the "
                   f"tensors vLLM would load sum to {total:,} B ({diff:+,} B); vLLM does not "
                   "read total_size, so the headers' sum is used"))

    for dt in sorted(d for d in by_dtype if d not in DTYPE_BITS):
        nb, nt = by_dtype[dt]
        problems.append(CheckpointProblem(
            kind="unknown-dtype", bytes=nb,
            detail=f"dtype {dt!r} ({nt} tensor(s), {nb:,} B by their offsets) is not defined "
                   "by the safetensors format (the library and vLLM refuse the file); its "
                   "element size, and so the served bytes, are unknown"))

    unknown = sorted(d for d in by_dtype if d not in DTYPE_BITS)
    return CheckpointSummary(
        path=str(root), scan_duration_s=time.perf_counter() - t0,
        config=config, config_file=str(root / "config.json") if config is not None else None,
        quantization=quant,
        shards=[ShardSummary(file=sh, file_size=size, header_len=n, tensors=tensors,
                             data_bytes=data, missing_bytes=max(0, 8 + n + data - size))
                for sh, (size, n, tensors, data) in headers.items()],
        index=index_summary, problems=problems, total_bytes=total, tensor_count=count,
        by_dtype=[DtypeTotal(dtype=k, bytes=v[0], tensors=v[1], known=k in DTYPE_BITS)
                  for k, v in sorted(by_dtype.items(), key=lambda kv: -kv[1][0])],
        by_role=[RoleTotal(role=r, **roles[r]) for r in ROLES],
        unknown_dtypes=unknown, ple_pattern=pattern_text, tp=split.build(),
        tensors=tally.kept,
    )


def _plain_file_name(name: str) -> bool:
    """A file name inside the checkpoint directory: no separator, not ``.``/``..``, no NUL, and
    one the file system can hold: encodable (no lone surrogate) and at most 255 bytes (NAME_MAX
    on Linux; a longer name made the path check raise ``OSError``, issue #22)."""
    if not name or "/" in name or "\\" in name or "\0" in name or name in (".", ".."):
        return False
    try:
        return len(os.fsencode(name)) <= 255
    except UnicodeError:
        return False


_LAYER_NUMBERS = re.compile(r"(?<=\.)\d+(?=\.|$)")
"""A name's layer / expert numbers (a run of digits between dots or at the end; not the ``2`` of
``fc2`` or ``w2``): masked to ``#``, the rest of the name settles a tensor's role, TP class and
castability (:func:`classify_role`, :func:`classify_tp`, :func:`is_castable` look at nothing
else), so those are computed once per masked name."""

_ASCII_DIGIT = re.compile(r"[0-9]")
_DIGIT_MARK = {c: "\x01" for c in b"0123456789"}
"""``str.translate`` table of :func:`_digits_marked`: each ASCII digit to U+0001."""


def _digits_marked(names: list[str]) -> list[str] | None:
    """``names`` with every ASCII digit replaced by U+0001 (one ``translate`` of the names joined
    by NUL, split again), or ``None`` when a name holds a NUL or U+0001 itself.

    Two names marked alike differ only in which ASCII digits stand where digits stand, so the
    layer-number mask (:data:`_LAYER_NUMBERS`) finds the same runs in both; when it masks every
    ASCII digit of one of them (nothing of ``0-9`` is left), both mask to the same name. That
    lets :class:`_Tally` mask one name per marked pattern instead of every name."""
    joined = "\0".join(names)
    if "\x01" in joined:
        return None
    marked = joined.translate(_DIGIT_MARK).split("\0")
    return marked if len(marked) == len(names) else None   # else a name holds a NUL


class _Tally:
    """The per-tensor accounting of :func:`scan_checkpoint`, shard by shard, done per name
    pattern instead of per tensor.

    Exactly the per-tensor rule it replaces: a tensor already seen in an earlier shard is a
    ``duplicate-tensor`` problem and not counted; with an index, a tensor it does not list is
    ``unlisted``, one it lists under another shard ``misplaced`` (both counted); a counted
    tensor's role and TP class come from the first counted tensor with its masked name
    (:data:`_LAYER_NUMBERS`), number of dimensions and scalar flag (≤ 8 B and ≤ 1 element),
    its castability from the first with its masked name and dtype; vocabulary-parallel and PLE
    tensors are listed one by one in the order read; every dict keeps first-seen order.

    How it gets there without a Python step per tensor: a shard whose tensors the index all
    lists under it cannot hold a tensor of another such shard, so only the names of the other
    shards (sifted tensor by tensor, :meth:`_sift`) are kept to find duplicates, and a shard
    holding exactly as many tensors as the index lists under it holds exactly those
    (``complete``: "seen" there is the index's word). The totals are summed per distinct
    (digit-marked name, dtype, elements, dimensions) by a ``Counter`` over a shard's names
    (:func:`_digits_marked`), each pattern masked and classified once; a shard with a pattern
    whose mask keeps a digit (``w1``, ``fc2``), a dtype the format does not define, or with
    ``keep_tensors`` is counted tensor by tensor (:meth:`_one_by_one`).
    """

    def __init__(self, ple_re: Any, quantised: bool, weight_map: dict[str, str] | None,
                 listed_per_shard: dict[str, int], keep_tensors: bool) -> None:
        self.ple_re = ple_re
        self.quantised = quantised
        self.weight_map = weight_map
        self.listed_per_shard = listed_per_shard
        self.seen: dict[str, str] = {}        # name → shard, where the index does not say it
        self.complete: set[str] = set()       # shards whose names are exactly the index's
        self.problems: list[CheckpointProblem] = []       # duplicate-tensor, truncated-shard
        self.unlisted: list[tuple[str, str, int]] = []    # (name, shard, bytes)
        self.misplaced: list[tuple[str, str, str, int]] = []  # (name, listed, shard, bytes)
        self.total = 0
        self.count = 0
        self.kept: list[TensorInfo] | None = [] if keep_tensors else None
        # group: [bytes, elements, tensors, listed one by one, role, tp, castable, dtype]
        self.groups: dict[tuple[str, str, int, bool], list[Any]] = {}
        # (digit-marked name, dtype, elements, dimensions) → (group, elements, bytes) of one
        self.patterns: dict[tuple[str, str, int, int], tuple[list[Any], int, int]] = {}
        self.role_tp: dict[tuple[str, int, bool], tuple[Role, TpClass]] = {}
        self.castable: dict[tuple[str, str], bool] = {}
        self.vocab: list[VocabTensor] = []
        self.ple: list[VocabTensor] = []

    def where(self, name: str) -> str | None:
        """The shard tensor ``name`` was counted in so far, or ``None``."""
        shard = self.seen.get(name)
        if shard is None and self.complete:
            shard = self.weight_map.get(name) if self.weight_map is not None else None
            if shard not in self.complete:
                return None
        return shard

    def shard(self, shard: str, cols: _Columns) -> None:
        """Count the tensors of ``shard`` (its columns, sorted by offset)."""
        names = cols.names
        seen, wm = self.seen, self.weight_map
        if wm is None:
            clean = seen.keys().isdisjoint(names)
            if clean:
                seen.update(dict.fromkeys(names, shard))
        else:
            clean = list(map(wm.get, names)).count(shard) == len(names) \
                and (not seen or seen.keys().isdisjoint(names))
            if clean:
                if self.listed_per_shard.get(shard) == len(names):
                    self.complete.add(shard)
                else:
                    seen.update(dict.fromkeys(names, shard))
        if not clean:
            cols = self._sift(shard, cols)
        self.total += sum(cols.nbytes)
        self.count += len(cols.names)
        if self.kept is not None or not self._by_pattern(cols):
            self._one_by_one(shard, cols)

    def _sift(self, shard: str, cols: _Columns) -> _Columns:
        """Tensor by tensor, for a shard holding a duplicate or a tensor the index lists
        elsewhere or not at all: the problems, in order; the columns of the tensors counted."""
        wm = self.weight_map
        keep: list[int] = []
        for i, (name, nb) in enumerate(zip(cols.names, cols.nbytes)):
            earlier = self.where(name)
            if earlier is not None:
                self.problems.append(CheckpointProblem(
                    kind="duplicate-tensor", severity="warning", bytes=nb,
                    detail=f"{name}: in both {earlier} and {shard} ({nb:,} B); vLLM loads "
                           "both into the same parameter (the later one wins), so it is "
                           "counted once"))
                continue
            self.seen[name] = shard
            keep.append(i)
            if wm is not None:
                listed = wm.get(name)
                if listed is None:
                    self.unlisted.append((name, shard, nb))
                elif listed != shard:
                    self.misplaced.append((name, listed, shard, nb))
        return _Columns(*(list(map(col.__getitem__, keep)) for col in cols))

    def _by_pattern(self, cols: _Columns) -> bool:
        """Count ``cols`` per distinct (digit-marked name, dtype, elements, dimensions), which
        settles a tensor's group and bytes; ``False`` (nothing counted) where it does not (see
        the class)."""
        marked = _digits_marked(cols.names)
        if marked is None:
            return False
        keys = list(zip(marked, cols.dtypes, cols.numels, cols.ndims))
        counts = Counter(keys)
        patterns = self.patterns
        found = []
        for key in counts:   # first-seen order: new groups are made in the order read
            pat = patterns.get(key)
            if pat is None:
                dtype = key[1]
                if dtype not in DTYPE_BITS:   # bytes not settled by the shape
                    return False
                i = keys.index(key)
                ne, nb = cols.numels[i], cols.nbytes[i]
                g, mask = self._group(cols.names[i], dtype, cols.shapes[i], nb, ne)
                if _ASCII_DIGIT.search(mask):   # names marked alike may mask apart
                    return False
                pat = patterns[key] = (g, ne, nb)
            found.append(pat)
        one_by_one = False
        for (g, ne, nb), n in zip(found, counts.values()):
            g[0] += nb * n
            g[1] += ne * n
            g[2] += n
            one_by_one = one_by_one or g[3]
        if one_by_one:
            for key, name, shape in zip(keys, cols.names, cols.shapes):
                g, ne, nb = patterns[key]
                if g[3]:
                    self._list(g, name, shape, nb, ne)
        return True

    def _one_by_one(self, shard: str, cols: _Columns) -> None:
        """Count ``cols`` tensor by tensor (and keep them with ``keep_tensors``)."""
        kept = self.kept
        for name, dtype, shape, b, e, nb, ne, _ndim in zip(*cols):
            g, _mask = self._group(name, dtype, shape, nb, ne)
            g[0] += nb
            g[1] += ne
            g[2] += 1
            if g[3]:
                self._list(g, name, shape, nb, ne)
            if kept is not None:
                kept.append(TensorInfo(name=name, shard=shard, dtype=dtype, shape=shape,
                                       begin=b, end=e, role=g[4], tp=g[5]))

    def _group(self, name: str, dtype: str, shape: list[int], nb: int,
               ne: int) -> tuple[list[Any], str]:
        """The group of a tensor (made on the first tensor of its masked name, dtype,
        dimensions and scalar flag) and its masked name."""
        mask = _LAYER_NUMBERS.sub("#", name)
        small = nb <= 8 and ne <= 1
        ndim = len(shape)
        g = self.groups.get((mask, dtype, ndim, small))
        if g is None:
            cls = self.role_tp.get((mask, ndim, small))
            if cls is None:
                role = classify_role(name, self.ple_re)
                cls = self.role_tp[(mask, ndim, small)] = (role, classify_tp(name, shape, role))
            castable = self.castable.get((mask, dtype))
            if castable is None:
                castable = self.castable[(mask, dtype)] = is_castable(name, dtype,
                                                                      self.quantised)
            role, tp = cls
            g = self.groups[(mask, dtype, ndim, small)] = [
                0, 0, 0, tp == "vocab" or role == "ple", role, tp, castable, dtype]
        return g, mask

    def _list(self, g: list[Any], name: str, shape: list[int], nb: int, ne: int) -> None:
        """List a vocabulary-parallel or PLE tensor (group ``g``) on its own."""
        role, tp, castable = g[4], g[5], g[6]
        (self.ple if role == "ple" else self.vocab).append(VocabTensor(
            name=name, role=role, rows=shape[0] if tp == "vocab" else 0, bytes=nb,
            elements=ne, castable=castable))

    def absent(self, headers: dict[str, Any]) -> list[str]:
        """The index's names listed under a shard that was read but in no shard's header."""
        wm = self.weight_map
        if wm is None or self.complete.issuperset(headers):
            return []
        complete, seen = self.complete, self.seen
        return [n for n, s in wm.items() if s in headers and s not in complete
                and n not in seen]

    def totals(self) -> tuple[dict[str, list[int]], dict[str, dict[str, Any]], TpSplitBuilder]:
        """``(by dtype: [bytes, tensors], by role: {bytes, tensors, by_dtype}, TP split)`` of the
        tensors counted, each dict in first-seen order (the groups are in first-seen order)."""
        by_dtype: dict[str, list[int]] = {}
        roles: dict[str, dict[str, Any]] = {r: {"bytes": 0, "tensors": 0, "by_dtype": {}}
                                            for r in ROLES}
        split = TpSplitBuilder(vocab=self.vocab, ple=self.ple)
        for nb, ne, nt, one_by_one, role, tp, castable, dtype in self.groups.values():
            d = by_dtype.get(dtype)
            if d is None:
                d = by_dtype[dtype] = [0, 0]
            d[0] += nb
            d[1] += nt
            r = roles[role]
            r["bytes"] += nb
            r["tensors"] += nt
            rd = r["by_dtype"]
            rd[dtype] = rd.get(dtype, 0) + nb
            if not one_by_one:
                split.add_sum(nb, tp, castable=castable, elements=ne)
        return by_dtype, roles, split


class TpSplitBuilder:
    """Accumulates :class:`TpSplit` from tensors (internal helper of :func:`scan_checkpoint`)."""

    def __init__(self, vocab: list[VocabTensor] | None = None,
                 ple: list[VocabTensor] | None = None) -> None:
        self.split = 0
        self.replicated = 0
        self.kv_proj = 0
        self.vocab: list[VocabTensor] = [] if vocab is None else vocab
        self.ple: list[VocabTensor] = [] if ple is None else ple
        self.cast: dict[str, list[int]] = {}

    def add(self, name: str, shape: list[int], nbytes: int, role: Role, tp: TpClass, *,
            castable: bool = False, elements: int = 0) -> None:
        """Count one tensor by its TP class (PLE tensors go to ``ple``); ``castable`` /
        ``elements``: see :attr:`TpSplit.cast`."""
        if tp == "vocab":
            vt = VocabTensor(name=name, role=role, rows=shape[0], bytes=nbytes,
                             elements=elements, castable=castable)
            (self.ple if role == "ple" else self.vocab).append(vt)
            return
        if role == "ple":
            self.ple.append(VocabTensor(name=name, role=role, rows=0, bytes=nbytes,
                                        elements=elements, castable=castable))
            return
        self.add_sum(nbytes, tp, castable=castable, elements=elements)

    def add_sum(self, nbytes: int, tp: TpClass, *, castable: bool = False,
                elements: int = 0) -> None:
        """Count tensors of one TP class that are neither vocabulary-parallel nor PLE, together:
        ``nbytes`` (B) and ``elements`` their sums."""
        cls = tp if tp in ("replicated", "kv_proj") else "split"
        if cls == "replicated":
            self.replicated += nbytes
        elif cls == "kv_proj":
            self.kv_proj += nbytes
        else:
            self.split += nbytes
        if castable:
            c = self.cast.setdefault(cls, [0, 0])
            c[0] += nbytes
            c[1] += elements

    def build(self) -> TpSplit:
        """The accumulated :class:`TpSplit`."""
        return TpSplit(split_bytes=self.split, replicated_bytes=self.replicated,
                       kv_proj_bytes=self.kv_proj, vocab=self.vocab, ple=self.ple,
                       cast={k: list(v) for k, v in self.cast.items()})


__all__ = [
    "CASTABLE_DTYPES",
    "DEFAULT_PLE_PATTERN",
    "DTYPE_BITS",
    "MAX_HEADER_BYTES",
    "ROLES",
    "CheckpointError",
    "CheckpointProblem",
    "CheckpointSummary",
    "DtypeTotal",
    "IndexSummary",
    "QuantGroup",
    "QuantScheme",
    "Role",
    "RoleTotal",
    "SafetensorsHeaderError",
    "ShardHeader",
    "ShardSummary",
    "TensorInfo",
    "TpClass",
    "TpSplit",
    "VocabTensor",
    "classify_role",
    "classify_tp",
    "expected_nbytes",
    "is_castable",
    "parse_quant_config",
    "read_safetensors_header",
    "scan_checkpoint",
]
