"""Fit budget arithmetic against the problem statement and hand-computed cases.

Units: bytes in code; GiB = 2^30 B. The evaluation wrote its figures to 2 decimals, truncated
(51,201,966,080 B = 47.685546875 GiB was written 47.68, which rounding would make 47.69), so the
console prints GiB the same way (:func:`seat_console.fit.budget.gib`) and always next to exact bytes.
"""

from __future__ import annotations

import math
from pathlib import Path

import ckpt_factory as F

from seat_console.fit.budget import (
    CardInput,
    Holder,
    HostMemory,
    SeatParams,
    cards_for_seat,
    compare,
    fit_budget,
    footprint_declared,
    footprint_from_summary,
    gib,
    live_overlay,
    pad_vocab,
    requested_bytes,
)
from seat_console.sources.checkpoint import scan_checkpoint
from seat_console.snapshot.fit_reading import gather_fit_inputs
from seat_console.fit.inputs import seat_params
from seat_console.sources.gpu import GpuCard, GpuProcess, GpuSnapshot, MemoryReading
from seat_console.core.profile import LoadedProfile, default_profile_text, parse_profile

GiB = 1 << 30
BIG_HOST = HostMemory(total_bytes=2048 * GiB, available_bytes=1536 * GiB)


def _default():
    prof = parse_profile(default_profile_text(), "<embedded default>")
    loaded = LoadedProfile(profile=prof, source="<embedded default>", origin="default",
                           sha256="x")
    inputs = gather_fit_inputs(loaded, None, gpu_unavailable="test: no NVML", host=BIG_HOST)
    return prof, inputs


def _budget(prof, inputs, **seat):
    p = seat_params(prof, prof.candidate).model_copy(update=seat)
    return fit_budget(inputs.candidate.footprint, p, inputs.cards[:p.tensor_parallel_size],
                      host=inputs.host, node_gpu_count=2, declared_total=inputs.declared_total)


def test_default_profile_reproduces_the_problem_statement() -> None:
    prof, inputs = _default()
    b = _budget(prof, inputs)
    c0, c1 = b.cards
    assert c0 == c1.model_copy(update={"rank": 0, "label": c0.label})  # both cards the same
    # "~95.0 GiB CUDA-visible each" = 95 × 2^30 B (declared: no live card here).
    assert c0.total_bytes == 95 * GiB == 102_005_473_280 and c0.total_source == "declared"
    # Usable = ceil(total × 0.90) = 91,804,925,952 B = exactly 85.5 GiB.
    assert c0.requested_bytes == math.ceil(102_005_473_280 * 0.90) == 91_804_925_952
    assert c0.requested_bytes == int(85.5 * GiB) and gib(c0.requested_bytes) == "85.50"
    # Weights "62.56 GiB" per card: parsed to whole bytes, int(62.56 × 2^30) = 67,173,288,509 B
    # (0.44 B under the decimal figure) — prints 62.56.
    assert c0.weights_bytes == 67_173_288_509 and gib(c0.weights_bytes) == "62.56"
    # PLE table replicated on each GPU: 51,201,966,080 B = 47.685546875 GiB; the paper's 47.68
    # is that truncated to 2 decimals (rounded it would be 47.69).
    assert c0.ple_bytes == 51_201_966_080 and 51_201_966_080 / GiB == 47.685546875
    assert gib(c0.ple_bytes) == "47.68"
    # 62.56 + 47.68 = 110.24 in the paper; exactly 118,375,254,589 B = 110.2455 GiB.
    assert c0.static_bytes == 67_173_288_509 + 51_201_966_080 == 118_375_254_589
    assert gib(c0.static_bytes) == "110.24"
    # "~24.74 GiB per card over": 118,375,254,589 − 91,804,925,952 = 26,570,328,637 B
    # = 24.7455 GiB (the paper's 110.24 − 85.5 = 24.74).
    assert c0.kv_bytes == -26_570_328_637 and gib(-c0.kv_bytes) == "24.74"
    assert b.verdict.fits is False and b.verdict.over_bytes == 26_570_328_637
    assert "exceed usable memory by 24.74 GiB per card" in b.verdict.words
    # To start at 262,144 tokens vLLM also needs one request's KV + the null block (declared
    # shape: 19,651 blocks of 393,216 B + 1, see the host case below).
    assert b.verdict.kv_short_bytes == 393_216 * 19_652
    assert b.verdict.must_leave_bytes == 26_570_328_637 + 393_216 * 19_652


def test_default_profile_kv_budget_with_the_table_on_the_host() -> None:
    prof, inputs = _default()
    b = _budget(prof, inputs, ple_placement="host")
    c0 = b.cards[0]
    # KV left = 91,804,925,952 − 67,173,288,509 = 24,631,637,443 B = 22.94 GiB per card.
    assert c0.ple_bytes == 0 and c0.kv_bytes == 24_631_637_443 and gib(c0.kv_bytes) == "22.94"
    # Declared shape (default_profile.toml, labelled illustrative): 48 layers, every 4th full,
    # 8 KV heads / TP 2 × (128 + 128) × 2 B = 2,048 B per layer per token. Groups of 12 layers
    # → a block = 12 × 16 × 2,048 = 393,216 B; 24,631,637,443 // 393,216 = 62,641 blocks.
    # Per 262,144-token request: 16,384 full + 3 × (cdiv(1,023 + 16,384, 16) + 1 = 1,089).
    cap = b.capacity
    assert (cap.bytes_per_block, cap.num_blocks, cap.blocks_per_request) == (393_216, 62_641,
                                                                             19_651)
    assert cap.kv_tokens == int(62_641 / 19_651 * 262_144) == 835_629
    assert round(cap.max_concurrency, 2) == 3.19
    assert b.verdict.fits is True and b.kv_model.source == "candidate.model_shape (declared)"
    # Host RAM: one copy per TP worker process by default → 2 × 51,201,966,080 B.
    assert b.host_ram.needed_bytes == 2 * 51_201_966_080 and b.host_ram.fits is True
    shared = _budget(prof, inputs, ple_placement="host", ple_host_sharing="shared")
    assert shared.host_ram.needed_bytes == 51_201_966_080
    small = fit_budget(inputs.candidate.footprint, b.params, inputs.cards[:2],
                       host=HostMemory(total_bytes=64 * GiB, available_bytes=40 * GiB))
    assert small.verdict.fits is False and "short by" in small.verdict.words


def test_levers_on_the_default_profile() -> None:
    prof, inputs = _default()
    levers = {lv.lever: lv for lv in _budget(prof, inputs).verdict.levers}
    assert levers["PLE to host"].helps is True and levers["PLE to host"].kv_tokens == 835_629
    # Sharded by vocabulary (declared size: 51,201,966,080 / 2 per card): still 969,345,597 B
    # = 0.90 GiB over (67,173,288,509 + 25,600,983,040 − 91,804,925,952).
    sharded = levers["PLE sharded by vocabulary"]
    assert sharded.helps is False and "by 0.90 GiB" in sharded.effect
    assert "cannot help" in levers["lower context"].effect
    assert levers["higher TP (4)"].helps is False and "the node has 2" in levers[
        "higher TP (4)"].effect
    # Even all of the card would not hold 110.25 GiB + KV: (118,375,254,589 + 393,216 ×
    # 19,652) / 102,005,473,280 = 1.236.
    assert levers["higher utilisation"].helps is False and "1.236" in levers[
        "higher utilisation"].effect


def test_utilisation_lever_warns_above_095() -> None:
    # 90 GiB of weights on a 95 GiB card at 0.90 (85.5 GiB usable) with a 4 KiB/token model
    # (1 GiB for one 262,144-token request): needs (90 GiB + 1 GiB + 2 blocks) / 95 GiB = 0.958
    # → the lever proposes 0.958 and names the risk.
    fp = footprint_declared("x", 90 * GiB, 1, None,
                            {"num_hidden_layers": 1, "num_attention_heads": 1, "head_dim": 1024},
                            "test")
    p = SeatParams(tensor_parallel_size=1, gpu_memory_utilization=0.90, max_model_len=262_144,
                   max_num_seqs=8)
    b = fit_budget(fp, p, [CardInput(rank=0, label="g", cuda_visible_bytes=95 * GiB,
                                     total_source="declared")])
    lv = {x.lever: x for x in b.verdict.levers}["higher utilisation"]
    assert lv.helps is True and "0.958" in lv.effect and "risky above ~0.95" in lv.effect


def test_scanned_weights_per_rank_llama3_8b(tmp_path: Path) -> None:
    cfg = F.llama3_8b_config()
    F.write_checkpoint(tmp_path, F.split_even(F.llama_tensors(cfg), 4), config=cfg)
    fp = footprint_from_summary("llama", scan_checkpoint(tmp_path))
    # 16,060,522,496 B in all; norms (65 × 4,096 × 2 = 532,480 B) are on every rank; every
    # other tensor splits in 2 (vocab 128,256 = 64 × 2,004 needs no padding).
    w2, _ = fp.weights_per_rank(2)
    assert w2 == (16_060_522_496 - 532_480) // 2 + 532_480 == 8_030_527_488
    # TP 16 > 8 KV heads: k/v proj split over only 8 ranks (32 × 2 × 1024 × 4096 × 2 / 8).
    w16, notes = fp.weights_per_rank(16)
    kv = 32 * 2 * 1024 * 4096 * 2
    assert w16 == (16_060_522_496 - 532_480 - kv) // 16 + kv // 8 + 532_480
    assert any("replicated" in n for n in notes)


def test_vocab_padding_to_the_partition_size(tmp_path: Path) -> None:
    # GPT-2's 50,257-token vocabulary: vLLM pads to 50,304 (multiple of 64) and gives each of 2
    # ranks 25,152 rows of 768 × 2 B (not 50,257 / 2 = 25,128.5).
    assert pad_vocab(50_257) == 50_304
    F.write_sparse(tmp_path / "model.safetensors",
                   [("transformer.wte.weight", "BF16", [50_257, 768]),
                    ("transformer.h.0.ln_1.weight", "BF16", [768])])
    fp = footprint_from_summary("gpt2ish", scan_checkpoint(tmp_path))
    assert fp.weights_per_rank(2)[0] == 25_152 * 1536 + 768 * 2
    assert fp.weights_per_rank(4)[0] == 12_576 * 1536 + 768 * 2


def test_ple_placements_scanned_gemma3n(tmp_path: Path) -> None:
    cfg = F.gemma3n_e4b_config()
    F.write_checkpoint(tmp_path, [F.gemma3n_tensors(cfg)], config=cfg)
    fp = footprint_from_summary("g3n", scan_checkpoint(tmp_path))
    whole = 262_144 * 35 * 256 * 2
    assert fp.ple_per_rank("gpu-replicated", 2)[0] == whole == 4_697_620_480
    # Sharded by vocabulary: 262,144 rows (already a multiple of 64) / 2 × 17,920 B per row.
    assert fp.ple_per_rank("gpu-sharded", 2)[0] == 131_072 * 17_920 == whole // 2
    assert fp.ple_per_rank("host", 2)[0] == 0
    p = SeatParams(tensor_parallel_size=2, gpu_memory_utilization=0.9, max_model_len=32_768,
                   max_num_seqs=64, ple_placement="gpu-sharded", activation_reserve_bytes=GiB)
    card = CardInput(rank=0, label="g0", cuda_visible_bytes=20 * GiB, total_source="declared")
    b = fit_budget(fp, p, [card, card.model_copy(update={"rank": 1})])
    c0 = b.cards[0]
    assert c0.ple_bytes == whole // 2 and c0.reserve_bytes == GiB
    assert c0.kv_bytes == requested_bytes(20 * GiB, 0.9) - c0.weights_bytes - whole // 2 - GiB
    assert b.kv_model.count("shared") == 15   # KV model from the scanned config.json


def test_cards_from_a_live_snapshot_and_preflight_names_holders() -> None:
    def card(i: int, used: int, procs: list[GpuProcess]) -> GpuCard:
        total, reserved = 150_754_820_096, 644_939_776   # H200, RECIPES.md
        return GpuCard(index=i, uuid=f"GPU-{i}", name="NVIDIA H200", serves_seat=True,
                       memory=MemoryReading(api="v2", total_bytes=total, reserved_bytes=reserved,
                                            used_bytes=used,
                                            free_bytes=total - reserved - used),
                       processes=procs)
    holder = GpuProcess(pid=4242, used_memory_bytes=100 * GiB, mapped=True, name="python3")
    snap = GpuSnapshot(cards=[card(0, 0, []), card(1, 100 * GiB, [holder])])
    # Profile order picks ranks: node.gpus = ["GPU-1", "0"] → rank 0 is the card with index 1.
    cards = cards_for_seat(["GPU-1", "0"], 2, None, snap)
    assert [c.label for c in cards] == ["GPU 1 (GPU-1)", "GPU 0 (GPU-0)"]
    assert cards[0].cuda_visible_bytes == 150_109_880_320 and cards[0].total_source == "nvml"
    fp = footprint_declared("m", 40 * GiB, 2, None, None, None)
    p = SeatParams(tensor_parallel_size=2, gpu_memory_utilization=0.9, max_model_len=4096,
                   max_num_seqs=8)
    b = fit_budget(fp, p, cards)
    req = math.ceil(150_109_880_320 * 0.9)
    assert b.cards[0].requested_bytes == req
    pf0, pf1 = b.preflight
    assert pf0.ok is False and "pid 4242 python3" in pf0.words and "100.00 GiB" in pf0.words
    assert pf1.ok is True and pf1.free_bytes == 150_109_880_320
    assert b.kv_unavailable and "no model shape" in b.kv_unavailable  # shape unknown: n/a


def test_live_overlay_and_comparison() -> None:
    shape = {"num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 8,
             "head_dim": 128, "torch_dtype": "bfloat16"}
    p = SeatParams(tensor_parallel_size=1, gpu_memory_utilization=0.9, max_model_len=8192,
                   max_num_seqs=16)
    live = CardInput(rank=0, label="GPU 0", cuda_visible_bytes=80 * GiB, total_source="nvml",
                     free_bytes=0, used_bytes=75 * GiB,
                     holders=[Holder(pid=1, name="vllm", used_bytes=74 * GiB)])
    resident = fit_budget(footprint_declared("fp8", 40 * GiB, 1, None, shape, "t"), p, [live])
    candidate = fit_budget(footprint_declared("nvfp4", 22 * GiB, 1, None, shape, "t"), p,
                           [live])
    # requested = ceil(80 GiB × 0.9) = 77,309,411,328 B = 72 GiB; KV = requested − weights.
    req = math.ceil(80 * GiB * 0.9)
    assert req == 72 * GiB and resident.cards[0].kv_bytes == 32 * GiB
    # 2 MiB blocks (32 layers × 16 × 4,096 B): resident 32 GiB → 16,384 blocks, candidate
    # 50 GiB → 25,600 blocks; 512 blocks per 8,192-token request.
    assert resident.capacity.num_blocks == 16_384 and candidate.capacity.num_blocks == 25_600
    assert (resident.kv_tokens, candidate.kv_tokens) == (16_384 * 16, 25_600 * 16)
    comp = compare(resident, candidate)
    assert comp.kv_tokens_ratio == 25_600 / 16_384 == 1.5625
    assert comp.kv_bytes_ratio == 50 / 32
    (row,) = live_overlay(resident, [live])
    predicted = 40 * GiB + 16_384 * 2 * 1024 * 1024   # weights + the KV pool vLLM allocates
    assert row.predicted_bytes == predicted and row.nvml_used_bytes == 74 * GiB
    assert row.difference_bytes == 74 * GiB - predicted and row.nvml_basis.startswith("proc")


def test_gib_display_rule() -> None:
    assert gib(51_201_966_080) == "47.68"          # 47.685546875, truncated
    assert gib(int(62.56 * GiB)) == "62.56"        # 62.5599999996: sub-byte parse remainder
    assert gib(-26_570_328_637) == "-24.74"
    assert gib(0) == "0.00" and gib(None) == "n/a" and gib(GiB - 1) == "1.00"
    assert gib(GiB - 2**20) == "0.99"              # 1 MiB short of 1 GiB is not rounded up


def test_declared_shape_file_and_missing_sizes(tmp_path: Path) -> None:
    # config_json: a real config.json whose weights live elsewhere.
    (tmp_path / "config.json").write_text(
        '{"num_hidden_layers": 2, "num_attention_heads": 4, "head_dim": 64}')
    text = default_profile_text().replace(
        'ple_placement = "gpu-replicated"  # gpu-replicated | gpu-sharded | host',
        f'ple_placement = "host"\nconfig_json = "{tmp_path / "config.json"}"')
    text = text[:text.index("[candidate.model_shape]")] + text[text.index("[timers]"):]
    text = text.replace('weights_bytes_per_rank = "75.30 GiB"\n', "", 1)  # the resident's
    prof = parse_profile(text, "t")
    loaded = LoadedProfile(profile=prof, source="t", origin="--profile", sha256="x")
    inputs = gather_fit_inputs(loaded, None, host=BIG_HOST)
    fp = inputs.candidate.footprint
    assert fp.kv_config_source == str(tmp_path / "config.json")
    b = _budget(prof, inputs)
    # 4 heads (MHA: no num_key_value_heads) / TP 2 = 2 per rank × (64 + 64) × 2 B × 2 layers.
    assert b.kv_model.attention == "mha" and b.kv_model.bytes_per_token == 2 * 2 * 128 * 2
    # The resident has neither a path nor declared sizes: unavailable, with the fix.
    assert inputs.resident.footprint is None
    assert "set resident.path, or resident.weights_bytes_per_rank" in inputs.resident.unavailable


def test_over_headline_carries_the_over_and_the_must_leave_figures() -> None:
    """"OVER by 24.74 GiB" above "31.94 GiB per card must leave the GPU" read as two answers; the
    headline says how they relate: 24.74 before any KV cache + 7.19 GiB of KV cache for one
    max_model_len request = 31.94."""
    prof, inputs = _default()
    b = _budget(prof, inputs)
    c0 = b.cards[0]
    words = b.over_words(c0)
    assert words == ("OVER: 24.74 GiB before any KV cache; 31.94 GiB must leave to serve one "
                     "262,144-token request")
    assert b.verdict.must_leave_bytes == -c0.kv_bytes + b.capacity.min_kv_bytes
    assert f"{gib(b.verdict.must_leave_bytes)} GiB must leave" in words
    assert b.over_words(c0.model_copy(update={"kv_bytes": 1})) is None     # not over
    nocap = b.model_copy(update={"capacity": None})
    assert nocap.over_words(c0) == ("OVER: 24.74 GiB before any KV cache; plus the KV cache for "
                                    "one 262,144-token request (n/a: model shape unknown)")


def test_fit_docstrings_give_units_none_and_errors(tmp_path: Path) -> None:
    """The standards: public functions say shapes, units, what None means, errors and sources."""
    import inspect

    from seat_console.snapshot.fit_reading import gather_fit_inputs as gather
    from seat_console.snapshot.fit_reading import host_memory
    need = {compare: ["bytes", "None", "candidate / resident", "get_kv_cache_capacity",
                      "never raises"],
            live_overlay: ["bytes", "None", "num_blocks", "nvmlDeviceGetComputeRunningProcesses",
                           "nvmlDeviceGetMemoryInfo", "NVML − predicted"],
            gather: ["CheckpointError", "scan_failed", "not a directory", "bytes"],
            host_memory: ["bytes", "None", "virtual_memory"]}
    for fn, words in need.items():
        doc = inspect.getdoc(fn) or ""
        missing = [w for w in words if w not in doc]
        assert not missing, f"{fn.__name__}: docstring lacks {missing}"
    # What the docstring says about CheckpointError is what happens: a missing directory is
    # not raised, it becomes the side's reason with scan_failed set.
    prof, _ = _default()
    loaded = LoadedProfile(profile=prof, source="<embedded default>", origin="default",
                           sha256="x")
    inputs = gather(loaded, None, checkpoint=tmp_path / "nope")
    assert inputs.resident.scan_failed and "not a directory" in inputs.resident.unavailable


def test_non_identical_cards_budget_the_smallest_pool_in_any_order() -> None:
    """Every test used identical cards, so min vs max per card was never exercised: vLLM sizes
    every rank's KV pool to the smallest one, so the capacity, the verdict and the comparison
    must all follow the card with the least room, wherever it sits in node.gpus."""
    shape = {"num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 8,
             "head_dim": 128, "torch_dtype": "bfloat16"}
    p = SeatParams(tensor_parallel_size=2, gpu_memory_utilization=0.9, max_model_len=8192,
                   max_num_seqs=16)
    big = CardInput(rank=0, label="GPU 0", cuda_visible_bytes=80 * GiB, total_source="nvml")
    small = CardInput(rank=1, label="GPU 1", cuda_visible_bytes=60 * GiB, total_source="nvml")
    fp = footprint_declared("m", 20 * GiB, 2, None, shape, "t")
    b = fit_budget(fp, p, [big, small])
    kv = {r.label: r.kv_bytes for r in b.cards}
    # requested = ceil(total × 0.9); KV = requested − 20 GiB of weights per rank
    assert kv == {"GPU 0": math.ceil(80 * GiB * 0.9) - 20 * GiB,
                  "GPU 1": math.ceil(60 * GiB * 0.9) - 20 * GiB}
    # TP 2 halves the 8 KV heads: a block is 32 layers × 16 tokens × 4 heads × 256 × 2 B = 1 MiB
    assert b.capacity.bytes_per_block == 1 << 20
    assert b.capacity.num_blocks == kv["GPU 1"] // (1 << 20)  # the smaller pool, not the larger
    assert f"{gib(kv['GPU 1'])} GiB per card" in b.verdict.words
    swapped = fit_budget(fp, p, [small.model_copy(update={"rank": 0}),
                                 big.model_copy(update={"rank": 1})])
    assert swapped.capacity.num_blocks == b.capacity.num_blocks
    same = fit_budget(fp, p, [big, big.model_copy(update={"rank": 1, "label": "GPU 1"})])
    assert same.capacity.num_blocks > b.capacity.num_blocks
    comp = compare(same, b)
    assert comp.kv_bytes_ratio == kv["GPU 1"] / kv["GPU 0"]  # smallest of each side
    back = compare(b, same)  # the non-identical side as the resident
    assert back.kv_bytes_ratio == kv["GPU 0"] / kv["GPU 1"]


def test_requests_at_once_is_a_whole_count():
    """A count of requests is an integer: the lab's fit read "2048.00 requests of 512 tokens"."""
    from seat_console.fit.budget import requests_at_once

    assert requests_at_once(2048.0) == "2,048 requests"
    assert requests_at_once(1.0) == "1 request"
    assert requests_at_once(3.19) == "3 requests (3.19×)"
    assert requests_at_once(0.5) == "0 requests (0.50×)"
    assert requests_at_once(float("nan")) == "an unknown number of requests"
