"""The reworked checkpoint scan against the scanner it replaced (issue 33 item 4).

``scan_checkpoint`` and ``read_safetensors_header`` now check a header's entries with a few
C-level passes (orjson first), count tensors per name pattern and read the index through a fast
path; none of that may change a result or an error. ``tests/checkpoint_reference.py`` is the
scanner as it was (commit a657fc5, verbatim); every case here runs both on the same directory
and asserts the same :class:`CheckpointSummary` (all but ``scan_duration_s``) and the same
:class:`ShardHeader`, or the same error class and message. Cases: the factory's model-shaped
checkpoints (with and without ``keep_tensors``), hand-made ones for each path the rework takes
(headers out of offset order, duplicates, unlisted / misplaced / absent tensors, names that
defeat the digit marking, packed and unknown dtypes, JSON only one parser accepts), and
hypothesis-generated checkpoints with hostile headers and indexes.
"""

from __future__ import annotations

import json
import struct
import tempfile
from pathlib import Path
from typing import Any

import checkpoint_reference as old
import ckpt_factory as F
import pytest
from hypothesis import given
from hypothesis import strategies as st

from seat_console.sources import checkpoint as new


def _outcome(fn: Any, *args: Any, **kw: Any) -> tuple[Any, ...]:
    """``("ok", the result as a dict)`` or ``("error", class name, message)``."""
    try:
        result = fn(*args, **kw)
    except Exception as exc:  # both modules define their own error classes: compare by name
        return ("error", type(exc).__name__, str(exc))
    dumped = result.model_dump()
    dumped.pop("scan_duration_s", None)
    return ("ok", dumped)


def _same_scan(root: Path, **kw: Any) -> tuple[Any, ...]:
    got = _outcome(new.scan_checkpoint, root, **kw)
    want = _outcome(old.scan_checkpoint, root, **kw)
    assert got == want
    return got


def _same_headers(root: Path) -> None:
    for p in sorted(root.glob("*.safetensors")):
        assert _outcome(new.read_safetensors_header, p) == \
            _outcome(old.read_safetensors_header, p)


def _write_header(path: Path, entries: list[tuple[str, Any]], *, data: int | None = None,
                  raw: bytes | None = None) -> None:
    """A sparse shard whose JSON header holds ``entries`` in this order (a repeated name is
    written twice), or exactly ``raw``; ``data`` bytes of tensor data (default: the largest
    end offset found)."""
    if raw is None:
        raw = ("{" + ",".join(json.dumps(k) + ":" + json.dumps(v) for k, v in entries)
               + "}").encode("utf-8", "surrogatepass")
    if data is None:
        ends = [v["data_offsets"][1] for _k, v in entries
                if isinstance(v, dict) and isinstance(v.get("data_offsets"), list)
                and len(v["data_offsets"]) == 2 and type(v["data_offsets"][1]) is int]
        data = max([0, *ends])
    with path.open("wb") as f:
        f.write(struct.pack("<Q", len(raw)) + raw)
        f.truncate(8 + len(raw) + max(0, min(data, 1 << 40)))


def _entries(tensors: list[tuple[Any, ...]], off: int = 0) -> list[tuple[str, Any]]:
    """Header entries of (name, dtype, shape[, bytes]) from offset ``off`` on, contiguous
    (bytes: the format's, 6 for a dtype it does not define, unless given)."""
    out = []
    for name, dtype, shape, *size in tensors:
        n = size[0] if size else F.nbytes(dtype, shape) if dtype in F.BITS else 6
        out.append((name, {"dtype": dtype, "shape": shape, "data_offsets": [off, off + n]}))
        off += n
    return out


# -- the factory's model-shaped checkpoints --------------------------------------------------

MODELS = {
    "llama3-8b, 4 shards": (F.llama3_8b_config, lambda c: F.llama_tensors(c), 4),
    "llama3-8b nvfp4": (F.llama3_8b_config, lambda c: F.llama_tensors(c, linear="nvfp4"), 3),
    "qwen3-30b-a3b": (F.qwen3_30b_a3b_config, F.qwen3_moe_tensors, 8),
    "gemma3n-e4b (PLE)": (F.gemma3n_e4b_config, F.gemma3n_tensors, 2),
    "qwen3-next-80b-a3b": (F.qwen3_next_config, F.qwen3_next_tensors, 5),
    "deepseek-v3 fp8, 163 shards": (F.deepseek_v3_config, F.deepseek_v3_tensors, 163),
}


@pytest.mark.parametrize("model", list(MODELS))
def test_factory_checkpoints_scan_as_before(tmp_path: Path, model: str) -> None:
    cfg_of, tensors_of, shards = MODELS[model]
    cfg = cfg_of()
    F.write_checkpoint(tmp_path, F.split_even(tensors_of(cfg), shards), config=cfg)
    got = _same_scan(tmp_path)
    assert got[0] == "ok" and got[1]["tensor_count"] > 0
    if shards <= 8:
        _same_scan(tmp_path, keep_tensors=True)
        _same_scan(tmp_path, ple_pattern=r"layers\.1\.")   # a pattern that sees layer numbers
        _same_headers(tmp_path)


def test_index_disagreements_scan_as_before(tmp_path: Path) -> None:
    """Duplicates, unlisted, misplaced and absent tensors, a missing and an unreferenced shard,
    a truncated shard: every problem list and its order as before."""
    cfg = F.llama3_8b_config()
    shards = F.split_even(F.llama_tensors(cfg), 4)
    F.write_checkpoint(tmp_path, shards, config=cfg)
    idx_path = tmp_path / "model.safetensors.index.json"
    idx = json.loads(idx_path.read_text())
    wm = idx["weight_map"]
    names = list(wm)
    for n in names[:60]:                       # 60 misplaced: 50 listed, then one for the rest
        wm[n] = "model-00004-of-00004.safetensors" if wm[n] != \
            "model-00004-of-00004.safetensors" else "model-00001-of-00004.safetensors"
    for n in names[100:170]:                   # 70 unlisted
        del wm[n]
    wm.update({f"ghost.{i}.weight": "model-00002-of-00004.safetensors" for i in range(55)})
    idx_path.write_text(json.dumps(idx))
    # a duplicate: shard 3 also holds shard 1's first tensor (and is rewritten with it first)
    first = shards[0][0]
    _write_header(tmp_path / "model-00003-of-00004.safetensors", _entries([first, *shards[2]]))
    (tmp_path / "model-00009-of-00009.safetensors").write_bytes(b"x" * 16)   # unreferenced
    got = _same_scan(tmp_path)
    kinds = {p["kind"] for p in got[1]["problems"]}
    assert {"tensor-misplaced", "unlisted-tensor", "tensor-absent", "duplicate-tensor",
            "unreferenced-shard"} <= kinds
    _same_scan(tmp_path, keep_tensors=True)
    (tmp_path / "model-00002-of-00004.safetensors").unlink()                  # a missing shard
    _same_scan(tmp_path)


def test_duplicate_of_a_sifted_shard_in_a_shard_the_index_lists_whole(tmp_path: Path) -> None:
    """Shard 1 holds x, which the index lists under shard 2 (so shard 1 is checked tensor by
    tensor); shard 2, whose every tensor the index lists there, holds x too: a duplicate."""
    one, two = "model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"
    _write_header(tmp_path / one, _entries([("a", "U8", [2]), ("x", "U8", [4])]))
    _write_header(tmp_path / two, _entries([("x", "U8", [4]), ("b", "U8", [2])]))
    (tmp_path / "model.safetensors.index.json").write_text(json.dumps(
        {"metadata": {"total_size": 8}, "weight_map": {"a": one, "x": two, "b": two}}))
    got = _same_scan(tmp_path)
    assert [p["kind"] for p in got[1]["problems"]] == ["duplicate-tensor", "tensor-misplaced"]


def test_hand_made_headers_scan_as_before(tmp_path: Path) -> None:
    """Each path of the rework: out of offset order, names that defeat the digit marking (NUL,
    U+0001, ``#``, a newline before the end, Unicode digits, ``w1``/``fc2``), packed and
    unknown dtypes, empty shapes and zero-size tensors, JSON one parser reads differently."""
    names = ["m.layers.0.mlp.experts.1.w1.weight", "m.layers.0.mlp.experts.2.w1.weight",
             "m.layers.0.mlp.experts.1.w2.weight", "m.layers.10.fc2.weight",
             "m.layers.1.#.weight", "m.layers.#.1.weight", "m.layers.٣.x", "m.layers.3.x",
             "m.layers.4\n", "m.layers.5.y\n", "a\x00b.1.c", "a\x01b.2.c", "embed_tokens.1.w",
             "lm_head.weight", "m.norm.weight", "m.layers.2.self_attn.k_proj.weight"]
    tensors = [(n, "BF16", [4, 2]) for n in names] + [
        ("m.layers.0.fc1.bias", "BF16", [4]), ("m.layers.0.fc2.bias", "BF16", [4]),
        ("m.layers.7.scale", "F32", []), ("m.layers.8.zero", "F16", [0, 3]),
        ("m.layers.9.packed", "F4", [6, 2]), ("m.layers.9.odd", "X9", [3])]
    entries = _entries(tensors)
    cases: dict[str, list[tuple[str, Any]] | bytes] = {
        "in order": entries,
        "reversed": entries[::-1],
        "shuffled": entries[3:] + entries[:3],
        "known dtypes only": _entries(tensors[:-1]),
        "no NUL, no U+0001": _entries([t for t in tensors[:-1] if not t[0].startswith("a")]),
        "unknown dtype, sizes differ": _entries([("m.layers.1.odd", "X9", [3], 6),
                                                 ("m.layers.2.odd", "X9", [3], 10)]),
        "U+0001 beside a digit": _entries([("a.\x01.c", "U8", [2]), ("a.1.c", "U8", [2])]),
        "a NUL in a name": _entries([(n, "BF16", [4, 2]) for n in (
            "a\x00b", "m.layers.1.w", "lm_head.weight", "m.layers.2.w", "m.layers.3.x")]),
        "a gap": [*entries[:2], (entries[2][0], {**entries[2][1], "data_offsets": [
            entries[2][1]["data_offsets"][0] + 1, entries[2][1]["data_offsets"][1] + 1]})],
        "an extra key": [(entries[0][0], {**entries[0][1], "x": [[[[[[1]]]]]]}), *entries[1:3]],
        "nested 1,000 deep in an extra key": b'{"t": {"dtype": "U8", "shape": [1], '
                                              b'"data_offsets": [0, 1], "x": '
                                              + b"[" * 1000 + b"]" * 1000 + b"}}",
        "a big int in an extra key": [(entries[0][0], {**entries[0][1], "x": 2**70})],
        "a bool dim": [("t", {"dtype": "BF16", "shape": [True, 2], "data_offsets": [0, 4]})],
        "a float offset": [("t", {"dtype": "BF16", "shape": [2], "data_offsets": [0, 4.0]})],
        "a 3-item offsets": [("t", {"dtype": "BF16", "shape": [2], "data_offsets": [0, 4, 4]})],
        "shape a string": [("t", {"dtype": "U8", "shape": "", "data_offsets": [0, 1]})],
        "shape an object": [("t", {"dtype": "U8", "shape": {}, "data_offsets": [0, 1]})],
        "offsets an object": [("t", {"dtype": "U8", "shape": [1],
                                     "data_offsets": {"0": 0, "1": 1}})],
        "a repeated name": [entries[0], entries[1], (entries[0][0], entries[2][1])],
        "a lone surrogate": [("t\ud800", {"dtype": "U8", "shape": [1], "data_offsets": [0, 1]})],
        "a paired surrogate": [("t\ud83d\ude00", {"dtype": "U8", "shape": [1],
                                                 "data_offsets": [0, 1]})],
        "metadata not strings": [("__metadata__", {"a": 1}), entries[0]],
        "metadata null": [("__metadata__", None), entries[0]],
        "empty": [],
        "NaN": b'{"t": {"dtype": "U8", "shape": [1], "data_offsets": [0, 1]}, "x": NaN}',
        "BOM": b'\xef\xbb\xbf{"t": {"dtype": "U8", "shape": [1], "data_offsets": [0, 1]}}',
        "huge int dim": b'{"t": {"dtype": "U8", "shape": [' + b"9" * 30 + b'], '
                        b'"data_offsets": [0, 1]}}',
        "not an object": b'[1, 2]',
    }
    for case, entries_or_raw in cases.items():
        d = tmp_path / case.replace(" ", "-")
        d.mkdir()
        if isinstance(entries_or_raw, bytes):
            _write_header(d / "model.safetensors", [], raw=entries_or_raw, data=8)
        else:
            _write_header(d / "model.safetensors", entries_or_raw)
        _same_scan(d)
        _same_scan(d, keep_tensors=True)
        _same_scan(d, ple_pattern=r"\.1\.")   # a pattern that sees layer numbers
        _same_headers(d)


def test_index_json_only_one_parser_reads_alike_is_read_as_before(tmp_path: Path) -> None:
    """The index's fast path (orjson) gives way to ``load_json`` wherever they could differ."""
    F.write_checkpoint(tmp_path, [[("a", "BF16", [4])], [("b", "BF16", [4])]])
    idx = tmp_path / "model.safetensors.index.json"
    good = {"a": "model-00001-of-00002.safetensors", "b": "model-00002-of-00002.safetensors"}
    texts = [
        json.dumps({"metadata": {"total_size": 2**70}, "weight_map": good}),
        json.dumps({"metadata": {"total_size": 16.0}, "weight_map": good}),
        json.dumps({"metadata": {"total_size": 16}, "weight_map": good, "deep": [[[[1]]]]}),
        json.dumps({"weight_map": good, "deep": eval("[" * 70 + "]" * 70)}),  # noqa: S307
        json.dumps({"weight_map": good, "x": "\ud800"}),
        json.dumps({"weight_map": {**good, "c\ud800": "model-00001-of-00002.safetensors"}}),
        json.dumps({"weight_map": good, "x": float("nan")}),
        json.dumps({"weight_map": {"a": 7}}),
        json.dumps({"weight_map": {"a": ["x"]}}),
        json.dumps({"weight_map": {"a": "../x"}}),
        json.dumps({"weight_map": {}}),
        json.dumps({"weight_map": good}).replace("{", "\ufeff{", 1),
        json.dumps([good]),
    ]
    for text in texts:
        idx.write_text(text, encoding="utf-8", errors="surrogatepass")
        _same_scan(tmp_path)


# -- hypothesis: generated checkpoints, hostile headers and indexes ---------------------------

_parts = st.sampled_from(["model", "layers", "mlp", "experts", "self_attn", "k_proj",
                          "v_proj", "o_proj", "w1", "w2", "fc2", "embed_tokens", "lm_head",
                          "input_layernorm", "norm", "gate", "router", "weight",
                          "weight_scale", "embed_tokens_per_layer", "#", "٣", "x\n"])
_names = st.lists(st.one_of(_parts, st.integers(0, 12).map(str)), min_size=1,
                  max_size=6).map(".".join)
_dtypes = st.sampled_from(["BF16", "F32", "U8", "F8_E4M3", "F4", "I64", "X9"])
_tensor = st.tuples(_names, _dtypes, st.lists(st.integers(0, 9), max_size=3))
_hostile = st.one_of(st.none(), st.booleans(), st.integers(-3, 2**70),
                     st.floats(allow_nan=True), st.text(max_size=4),
                     st.lists(st.integers(-2, 9), max_size=3),
                     st.dictionaries(st.text(max_size=3), st.integers(), max_size=2))


@st.composite
def _checkpoints(draw: Any) -> tuple[list[list[tuple[str, Any]]], dict[str, Any] | None]:
    """Shards of entries (model-like, then corrupted: a field replaced by a hostile value,
    entries reordered, a tensor copied to another shard) and an index (or none) that may lie."""
    tensors = draw(st.lists(_tensor, min_size=0, max_size=14, unique_by=lambda t: t[0]))
    n = draw(st.integers(1, 3))
    shards = [_entries(tensors[i::n]) for i in range(n)]
    for _ in range(draw(st.integers(0, 3))):
        s = draw(st.integers(0, n - 1))
        if not shards[s]:
            continue
        i = draw(st.integers(0, len(shards[s]) - 1))
        name, entry = shards[s][i]
        what = draw(st.sampled_from(["field", "reorder", "copy", "drop-key", "extra-key"]))
        if what == "field":
            field = draw(st.sampled_from(["dtype", "shape", "data_offsets"]))
            shards[s][i] = (name, {**entry, field: draw(_hostile)})
        elif what == "reorder":
            shards[s] = shards[s][i:] + shards[s][:i]
        elif what == "copy":   # the same tensor in another shard, after its last tensor
            t = draw(st.integers(0, n - 1))
            ends = [e["data_offsets"][1] for _n, e in shards[t]
                    if type(e.get("data_offsets")) is list and len(e["data_offsets"]) == 2
                    and type(e["data_offsets"][1]) is int]
            shards[t] += _entries([(name, entry.get("dtype"), entry.get("shape"),
                                    F.nbytes(entry["dtype"], entry["shape"])
                                    if entry.get("dtype") in F.BITS
                                    and type(entry.get("shape")) is list else 6)],
                                  max([0, *ends]))
        elif what == "drop-key":
            shards[s][i] = (name, {k: v for k, v in entry.items() if k != "shape"})
        else:
            shards[s][i] = (name, {**entry, "extra": draw(_hostile)})
    if not draw(st.booleans()):
        return shards, None
    wm: dict[str, Any] = {}
    for s, entries in enumerate(shards):
        for name, _e in entries:
            wm[name] = f"model-{s + 1:05d}-of-{n:05d}.safetensors"
    for name in draw(st.lists(st.sampled_from(sorted(wm) or ["x"]), max_size=3)):
        wm[name] = draw(st.one_of(st.sampled_from(
            [f"model-{s + 1:05d}-of-{n:05d}.safetensors" for s in range(n)]
            + ["model-00009-of-00009.safetensors"]), _hostile))
    for name in draw(st.lists(st.sampled_from(sorted(wm) or ["x"]), max_size=2)):
        wm.pop(name, None)
    meta = {"total_size": draw(st.one_of(st.integers(0, 2**70), _hostile))}
    return shards, {"metadata": meta, "weight_map": wm}


@given(_checkpoints(), st.booleans())
def test_generated_checkpoints_scan_as_before(ckpt: Any, keep: bool) -> None:
    shards, index = ckpt
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        n = len(shards)
        for s, entries in enumerate(shards):
            name = f"model-{s + 1:05d}-of-{n:05d}.safetensors" if index or n > 1 \
                else "model.safetensors"
            _write_header(root / name, entries)
        if index is not None:
            (root / "model.safetensors.index.json").write_text(
                json.dumps(index), encoding="utf-8", errors="surrogatepass")
        _same_scan(root, keep_tensors=keep)
        _same_headers(root)


def test_scan_leaves_the_collector_as_it_found_it(tmp_path: Path) -> None:
    """The scan pauses the cyclic collector and starts it again only if it was running, also
    when the scan raises."""
    import gc

    F.write_checkpoint(tmp_path, [[("a", "BF16", [4])]])
    (tmp_path / "bad").mkdir()
    _write_header(tmp_path / "bad" / "model.safetensors", [], raw=b"[1]", data=0)
    assert gc.isenabled()
    seen: list[bool] = []
    real = new._Tally.shard

    def shard(self: Any, *args: Any) -> None:
        seen.append(gc.isenabled())
        real(self, *args)

    new._Tally.shard = shard  # type: ignore[method-assign]
    try:
        new.scan_checkpoint(tmp_path)
        assert seen == [False] and gc.isenabled()
        with pytest.raises(new.SafetensorsHeaderError):
            new.scan_checkpoint(tmp_path / "bad")
        assert gc.isenabled()
        gc.disable()
        try:
            new.scan_checkpoint(tmp_path)
            assert not gc.isenabled()
        finally:
            gc.enable()
    finally:
        new._Tally.shard = real  # type: ignore[method-assign]
