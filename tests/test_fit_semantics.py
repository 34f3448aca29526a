"""Issue 12, "Fit: what vLLM would actually do": the loading rule, served dtype, no verdict on
damaged checkpoints, the context limit, replicated small tensors and GPU identity.

Checkpoints are sparse files with real headers (``tests/ckpt_factory.py``); every expected number
is worked out by hand next to it from the tensors written.
"""

from __future__ import annotations

import json
from pathlib import Path

import ckpt_factory as F

from seat_console.sources.checkpoint import scan_checkpoint

# ------------------------------------------------------------------ 2. the loading rule


def _two_shards(root: Path) -> dict[str, int]:
    """Two shards of four BF16 tensors: a (1 MiB), b (2 KiB) in shard 1; c (4 KiB), d (8 B)."""
    return F.write_checkpoint(root, [[("a", "BF16", [512, 1024]), ("b", "BF16", [1024])],
                                     [("c", "BF16", [2048]), ("d", "BF16", [4])]],
                              config={})


def test_a_tensor_where_the_index_does_not_say_is_counted_with_a_warning(tmp_path: Path) -> None:
    sizes = _two_shards(tmp_path)
    idx_path = tmp_path / "model.safetensors.index.json"
    idx = json.loads(idx_path.read_text())
    idx["weight_map"]["c"] = "model-00001-of-00002.safetensors"   # really in shard 2
    idx_path.write_text(json.dumps(idx))
    s = scan_checkpoint(tmp_path)
    # vLLM loads every tensor of every shard the index names, from the file that holds it.
    assert s.total_bytes == sum(sizes.values()) == 1_048_576 + 2048 + 4096 + 8
    (p,) = s.problems
    assert p.kind == "tensor-misplaced" and p.severity == "warning" and p.bytes == 4096
    assert "the index says model-00001-of-00002.safetensors" in p.detail and "4,096 B" in p.detail
    assert s.errors == []


def test_total_size_mismatch_is_a_warning_with_the_difference(tmp_path: Path) -> None:
    sizes = _two_shards(tmp_path)
    idx_path = tmp_path / "model.safetensors.index.json"
    idx = json.loads(idx_path.read_text())
    idx["metadata"]["total_size"] = 1
    idx_path.write_text(json.dumps(idx))
    s = scan_checkpoint(tmp_path)
    (p,) = s.problems
    assert p.kind == "total-size" and p.severity == "warning"
    assert p.bytes == 1 - sum(sizes.values())
    assert s.errors == [] and s.total_bytes == sum(sizes.values())


def test_a_tensor_in_two_named_shards_is_counted_once_with_a_warning(tmp_path: Path) -> None:
    F.write_checkpoint(tmp_path, [[("a", "BF16", [512, 1024]), ("b", "BF16", [1024])],
                                  [("b", "BF16", [1024]), ("d", "BF16", [4])]], config={})
    s = scan_checkpoint(tmp_path)
    # The index can name b in one shard only (here the second): the first copy is also reported
    # as misplaced, and the factory's total_size (both files' data) is b's bytes too high. All
    # warnings with b's 2,048 B; b is counted once.
    by_kind = {p.kind: p for p in s.problems}
    assert sorted(by_kind) == ["duplicate-tensor", "tensor-misplaced", "total-size"]
    assert all(p.severity == "warning" and p.bytes == 2048 for p in s.problems)
    assert s.total_bytes == 1_048_576 + 2048 + 8


def test_a_listed_tensor_in_no_shard_is_an_error(tmp_path: Path) -> None:
    _two_shards(tmp_path)
    idx_path = tmp_path / "model.safetensors.index.json"
    idx = json.loads(idx_path.read_text())
    idx["weight_map"]["ghost"] = "model-00002-of-00002.safetensors"
    idx_path.write_text(json.dumps(idx))
    s = scan_checkpoint(tmp_path)
    kinds = {p.kind: p.severity for p in s.problems}
    assert kinds["tensor-absent"] == "error"
