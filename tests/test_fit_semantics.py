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


# ------------------------------------------------------------------ 1. served dtype

from seat_console.fit.budget import (  # noqa: E402
    CardInput,
    SeatParams,
    fit_budget,
    footprint_from_summary,
)
from seat_console.fit.dtype import resolve_kv_cache_dtype, resolve_served_dtype  # noqa: E402

GiB = 1 << 30
CARD = 100 * GiB  # one CUDA-visible total for every card here


def _tiny_cfg(**kw) -> dict:
    """A small Llama-shaped config: 4 layers, hidden 1024, 8 heads of 128, 2 KV heads."""
    return {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 1024,
            "intermediate_size": 4096, "num_attention_heads": 8, "num_hidden_layers": 4,
            "num_key_value_heads": 2, "head_dim": 128, "vocab_size": 32000,
            "max_position_embeddings": 8192, **kw}


def _budget(root: Path, tp: int = 1, **seat):
    s = scan_checkpoint(root)
    fp = footprint_from_summary(root.name, s)
    p = SeatParams(tensor_parallel_size=tp, gpu_memory_utilization=0.9,
                   max_model_len=seat.pop("max_model_len", 4096), max_num_seqs=16, **seat)
    cards = [CardInput(rank=r, label=f"GPU {r}", cuda_visible_bytes=CARD,
                       total_source="declared") for r in range(tp)]
    return s, fit_budget(fp, p, cards)


def test_float32_checkpoint_is_served_in_bfloat16_on_cuda(tmp_path: Path) -> None:
    cfg = _tiny_cfg(torch_dtype="float32")
    F.write_checkpoint(tmp_path, [F.llama_tensors(cfg, dtype="F32")], config=cfg)
    s, auto = _budget(tmp_path)
    # Every tensor is F32 and unquantised: vLLM holds them in bfloat16, half the stored bytes.
    assert auto.served.dtype == "bfloat16" and auto.served.config_dtype == "float32"
    assert auto.cards[0].weights_bytes * 2 == s.total_bytes
    # The KV cache under auto is the served dtype: 2 B per element, not float32's 4.
    assert auto.kv_model.kv_dtype_bytes == 2 and auto.kv_cache_dtype == "bfloat16"
    assert auto.kv_model.bytes_per_token == 4 * 2 * 2 * 128 * 2
    _, f32 = _budget(tmp_path, dtype="float32")
    assert f32.cards[0].weights_bytes == s.total_bytes and f32.kv_model.kv_dtype_bytes == 4
    # Twice the KV bytes per token, and more memory left for it: more than 2× the tokens.
    assert auto.kv_tokens > 2 * f32.kv_tokens
    assert any("float32 checkpoint served as bfloat16" in n for n in auto.notes)
    # On a pre-Ampere card auto means float16 (no bfloat16 there): same bytes.
    _, v100 = _budget(tmp_path, device="cuda-no-bf16")
    assert v100.served.dtype == "float16" and v100.cards[0].weights_bytes * 2 == s.total_bytes


def test_quantised_tensors_keep_their_stored_bytes(tmp_path: Path) -> None:
    cfg = _tiny_cfg(torch_dtype="bfloat16")
    hfq = {"producer": {"name": "modelopt"},
           "quantization": {"quant_algo": "NVFP4", "group_size": 16}}
    F.write_checkpoint(tmp_path, [F.llama_tensors(cfg, linear="nvfp4")], config=cfg,
                       hf_quant_config=hfq)
    s, auto = _budget(tmp_path)
    assert auto.cards[0].weights_bytes == s.total_bytes       # bfloat16 served as stored
    _, f32 = _budget(tmp_path, dtype="float32")
    by = {d.dtype: d.bytes for d in s.by_dtype}
    # float32: only the BF16 tensors (embeddings, norms, LM head) double; the U8 packed
    # weights, their F8_E4M3 block scales and the F32 scalar scales keep their bytes.
    assert f32.cards[0].weights_bytes == s.total_bytes + by["BF16"]
    assert by["U8"] > 0 and by["F8_E4M3"] > 0 and by["F32"] > 0


def test_kv_cache_dtype_auto_follows_the_served_dtype_and_modelopt() -> None:
    assert resolve_kv_cache_dtype("auto", "bfloat16")[0] == "bfloat16"
    assert resolve_kv_cache_dtype("fp8", "bfloat16")[0] == "fp8"
    qc = {"quant_method": "modelopt", "quant_algo": "FP8", "kv_cache_quant_algo": "FP8"}
    assert resolve_kv_cache_dtype("auto", "bfloat16", qc)[0] == "fp8_e4m3"
    assert resolve_kv_cache_dtype("bfloat16", "bfloat16", qc)[0] == "bfloat16"


def test_dtype_refusals_name_the_setting() -> None:
    import pytest

    from seat_console.fit.dtype import DtypeError

    with pytest.raises(DtypeError, match="float16 for model type 'gemma3_text'"):
        resolve_served_dtype("float16", "bfloat16", model_type="gemma3_text")
    with pytest.raises(DtypeError, match="seat.dtype 'int8'"):
        resolve_served_dtype("int8", "bfloat16")
    # auto never picks float16 for Gemma 3, even where bfloat16 is missing.
    assert resolve_served_dtype("auto", "float16", model_type="gemma3_text",
                                platform="cuda-no-bf16").dtype == "float32"


# ------------------------------------------------------------------ 4. context limit


def test_max_model_len_above_max_position_embeddings_is_refused(tmp_path: Path) -> None:
    cfg = _tiny_cfg(torch_dtype="bfloat16", max_position_embeddings=2048)
    F.write_checkpoint(tmp_path, [F.llama_tensors(cfg)], config=cfg)
    _, b = _budget(tmp_path, max_model_len=262_144)
    # The KV pool would hold many 262,144-token requests, but vLLM refuses to start.
    assert b.capacity is not None and b.capacity.max_concurrency > 1
    assert b.verdict.fits is False and len(b.verdict.refused) == 1
    assert "262,144" in b.verdict.words and "max_position_embeddings = 2,048" in b.verdict.words
    lever = next(lv for lv in b.verdict.levers if lv.lever == "context within the model's maximum")
    assert lever.helps is True and "max_model_len 2,048" in lever.effect
    _, ok = _budget(tmp_path, max_model_len=2048)
    assert ok.verdict.fits and not ok.verdict.refused
    # A linear rope scaling block extends it (×128 = 262,144): accepted.
    cfg2 = _tiny_cfg(max_position_embeddings=2048,
                     rope_scaling={"rope_type": "linear", "factor": 128.0})
    F.write_checkpoint(tmp_path / "rope", [F.llama_tensors(cfg2)], config=cfg2)
    _, scaled = _budget(tmp_path / "rope", max_model_len=262_144)
    assert not scaled.verdict.refused


# ------------------------------------------------------------------ 6. replicated small tensors


def test_shared_expert_gate_and_vision_patch_embedding_are_on_every_rank(tmp_path: Path) -> None:
    cfg = _tiny_cfg(torch_dtype="bfloat16")
    extra = [("model.layers.0.mlp.shared_expert_gate.weight", "BF16", [1, 1024]),   # 2,048 B
             ("visual.patch_embed.proj.weight", "BF16", [1024, 3, 2, 14, 14]),       # 2,408,448
             ("multi_modal_projector.mm_input_projection_weight", "BF16", [1152, 1024])]
    F.write_checkpoint(tmp_path, [F.llama_tensors(cfg) + extra], config=cfg)
    s = scan_checkpoint(tmp_path)
    small = 2048 + 1024 * 3 * 2 * 14 * 14 * 2 + 1152 * 1024 * 2
    F.write_checkpoint(tmp_path / "plain", [F.llama_tensors(cfg)], config=cfg)
    plain = scan_checkpoint(tmp_path / "plain")
    assert s.tp.replicated_bytes - plain.tp.replicated_bytes == small
    assert s.tp.split_bytes == plain.tp.split_bytes
    _, b2 = _budget(tmp_path, tp=2)
    _, p2 = _budget(tmp_path / "plain", tp=2)
    assert b2.cards[0].weights_bytes - p2.cards[0].weights_bytes == small  # whole, each rank


# ------------------------------------------------------------------ 3. no verdict on damage

import struct  # noqa: E402

import pytest  # noqa: E402

from seat_console.cli import main  # noqa: E402


@pytest.fixture()
def cli(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]):
    monkeypatch.delenv("SEAT_CONSOLE_PROFILE", raising=False)
    monkeypatch.setenv("XDG_CONFIG_HOME", "/nonexistent-for-tests")

    def run(*argv: str) -> tuple[int, str, str]:
        rc = main(list(argv))
        out, err = capsys.readouterr()
        return rc, out, err
    return run


def _damaged(root: Path, how: str) -> Path:
    cfg = _tiny_cfg(torch_dtype="bfloat16")
    tensors = F.llama_tensors(cfg)
    if how == "missing-shard":
        F.write_checkpoint(root, F.split_even(tensors, 2), config=cfg)
        (root / "model-00002-of-00002.safetensors").unlink()
    elif how == "unknown-dtype":
        F.write_checkpoint(root, [tensors], config=cfg)
        F.write_sparse(root / "model.safetensors", tensors + [("q.weight", "Q4_K", [64, 64])],
                       sizes={"q.weight": 2304})
    elif how == "corrupt-header":
        F.write_checkpoint(root, [tensors], config=cfg)
        h = b'{"w": {"dtype": "BF16", "shape": [4], "data_offsets": [0, 9]}}'
        with (root / "model.safetensors").open("wb") as f:
            f.write(struct.pack("<Q", len(h)) + h)
            f.truncate(8 + len(h) + 9)
    return root


@pytest.mark.parametrize("how", ["missing-shard", "unknown-dtype", "corrupt-header"])
def test_a_damaged_checkpoint_gets_no_verdict_in_json_and_text(cli, tmp_path: Path,
                                                               how: str) -> None:
    root = _damaged(tmp_path / "ck", how)
    args = ("fit", "--no-live", "--checkpoint", str(root), "--max-model-len", "4096")
    rc, out, err = cli(*args, "--json")
    assert rc == 1
    r = json.loads(out)["resident"]
    assert r["verdict"] is None
    assert how.split("-")[0] in r["no_verdict"] or "scanned" in r["no_verdict"]
    assert str(root) in r["no_verdict"]
    rc, out, err = cli(*args)
    resident = out.split("\nCANDIDATE:")[0]   # the default profile's candidate is intact
    assert rc == 1 and "NO VERDICT: " in resident
    assert "VERDICT: fits" not in resident and "\n  VERDICT:" not in resident
    assert "NO VERDICT" in err


def test_the_panel_words_say_no_verdict(tmp_path: Path) -> None:
    """The TUI renders the budget's verdict words; with scan errors they are NO VERDICT."""
    from seat_console.core.profile import LoadedProfile, default_profile_text, parse_profile
    from seat_console.snapshot.fit_reading import gather_fit_inputs
    from seat_console.fit.inputs import compute_budgets

    root = _damaged(tmp_path / "ck", "missing-shard")
    prof = parse_profile(default_profile_text(), "<embedded default>")
    loaded = LoadedProfile(profile=prof, source="<embedded default>", origin="default",
                           sha256="0" * 64)
    inputs = gather_fit_inputs(loaded, None, checkpoint=root)
    comp, _ = compute_budgets(inputs)
    assert comp.resident.no_verdict and comp.resident.verdict.words.startswith("NO VERDICT: ")
    assert comp.resident.verdict.levers == []
    assert comp.resident.model_dump(mode="json")["verdict"] is None


@pytest.mark.parametrize("how", ["missing-shard", "corrupt-header"])
@pytest.mark.parametrize("compact", [False, True])
async def test_the_tui_says_no_verdict(tmp_path: Path, how: str, compact: bool) -> None:
    from app_fixtures import FakeClock, default_loaded
    from test_fit_widget import BIG_HOST, FixedFit, flat, screen_text, wait_for

    from seat_console.tui.app import SeatConsoleApp
    from seat_console.snapshot.fit_reading import gather_fit_inputs
    from seat_console.widgets.fit import FitPanel

    root = _damaged(tmp_path / "ck", how)
    loaded = default_loaded()
    src = FixedFit(gather_fit_inputs(loaded, None, gpu_unavailable="test", host=BIG_HOST,
                                     checkpoint=str(root)))
    app = SeatConsoleApp(loaded, interval=3600.0, panels=[(lambda _l: src, FitPanel)],
                         clock=FakeClock(), age_tick_s=3600.0, watch_terminal=False,
                         compact=compact)
    async with app.run_test(size=(160, 50)) as pilot:
        panel = app.query_one(FitPanel)
        await wait_for(pilot, lambda: src.reads >= 1, "first fit reading")
        for _ in range(20):
            await pilot.pause()
        text = flat(screen_text(app))
        assert "NO VERDICT:" in text, text[:3000]
        resident = text.split("CANDIDATE")[0]
        assert " fits" not in resident
        assert panel is not None


# ------------------------------------------------------------------ 5. GPU identity

from nvml_double import FakeCard, FakeMig, NvmlDouble  # noqa: E402

import seat_console.node.nvml as nvml_mod  # noqa: E402
from seat_console.sources.containers import container_state_from_inspect  # noqa: E402
from seat_console.core.gpu_ids import match_seat, norm_bus_id, seat_conflicts  # noqa: E402


def _profile(tmp_path: Path, gpus: str) -> Path:
    p = tmp_path / "p.toml"
    p.write_text('[resident]\nname = "r"\nweights_bytes_per_rank = "10 GiB"\n'
                 '[[silence.matchers]]\nname = "i"\nvalue = "v"\n'
                 f'[node]\ngpus = {gpus}\ndeclared_cuda_visible_bytes = "95 GiB"\n')
    return p


def _two_cards(monkeypatch: pytest.MonkeyPatch, mig: bool = False) -> None:
    cards = [FakeCard(uuid="GPU-aaaa", pci_bus_id="00000000:18:00.0"),
             FakeCard(uuid="GPU-bbbb", pci_bus_id="00000000:2A:00.0")]
    if mig:
        cards[1].mig_mode = True
        cards[1].mig = [FakeMig(uuid="MIG-cccc", name="NVIDIA H200 MIG 3g.71gb",
                                gpu_instance_id=1, compute_instance_id=0, total=71 * GiB,
                                reserved=0, used=0)]
    monkeypatch.setattr(nvml_mod, "module_factory", lambda: NvmlDouble(cards))


def test_bus_ids_in_every_spelling_and_mig_uuids_match() -> None:
    assert norm_bus_id("2a:00.0") == norm_bus_id("0000:2A:00.0") == "00000000:2a:00.0"
    assert match_seat("2a:00.0", 1, "GPU-bbbb", "00000000:2A:00.0")       # lspci's short form
    assert not match_seat("18:00.0", 1, "GPU-bbbb", "00000000:2A:00.0")
    assert match_seat("mig-cccc", 1, "GPU-bbbb", None, ["MIG-cccc"])
    assert not match_seat("MIG-cccc", 1, "GPU-bbbb", None, [])
    for junk in ("zz:yy", "1:2:3:4", ":", "2a:00.9", "GPU-", ""):
        assert match_seat(junk, 0, "GPU-aaaa", "00000000:2A:00.0") is False


def test_fit_names_entries_that_matched_no_card(cli, monkeypatch, tmp_path: Path) -> None:
    _two_cards(monkeypatch)
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    monkeypatch.delenv("CUDA_DEVICE_ORDER", raising=False)
    prof = _profile(tmp_path, '["2a:00.0", "GPU-dead"]')
    rc, out, _ = cli("--profile", str(prof), "fit", "--json")
    doc = json.loads(out)
    assert doc["gpu_identity"]["unmatched"] == ["GPU-dead"]
    r = doc["resident"]
    assert r["cards"][0]["total_source"] == "nvml" and "GPU-bbbb" in r["cards"][0]["label"]
    assert r["cards"][1]["total_source"] == "declared"
    rc, text, _ = cli("--profile", str(prof), "fit")
    assert "node.gpus entries that matched no card: 'GPU-dead'" in text


def test_two_ranks_on_one_card_is_an_error_with_no_verdict(cli, monkeypatch,
                                                           tmp_path: Path) -> None:
    _two_cards(monkeypatch)
    prof = _profile(tmp_path, '["1", "GPU-bbbb"]')      # both are the second card
    rc, out, err = cli("--profile", str(prof), "fit", "--json")
    assert rc == 1
    doc = json.loads(out)
    assert doc["resident"]["verdict"] is None
    (e,) = doc["gpu_identity"]["errors"]
    assert "'1', 'GPU-bbbb'" in e and "two TP ranks" in e
    # Without a live reading the same entries still cannot both be one device: the profile
    # itself refuses them now (it passed `profile --check`, then fit said NO VERDICT)
    prof2 = _profile(tmp_path, '["0", "0"]')
    rc, out, err = cli("--profile", str(prof2), "fit", "--no-live", "--json")
    assert rc != 0 and "'0' and '0' name the same device" in out + err, (rc, out, err)
    assert seat_conflicts(["0", "1"], []) == []     # nothing to resolve against: no conflict


def test_a_mig_entry_budgets_the_mig_instance_memory(cli, monkeypatch, tmp_path: Path) -> None:
    _two_cards(monkeypatch, mig=True)
    prof = _profile(tmp_path, '["MIG-cccc"]').read_text().replace(
        "[node]", "[seat]\ntensor_parallel_size = 1\n[node]")
    (tmp_path / "m.toml").write_text(prof)
    rc, out, _ = cli("--profile", str(tmp_path / "m.toml"), "fit", "--json")
    card = json.loads(out)["resident"]["cards"][0]
    assert card["total_bytes"] == 71 * GiB and card["total_source"] == "nvml"
    assert "MIG" in card["label"] and "MIG-cccc" in card["label"]


def test_cuda_device_variables_are_warned_about(cli, monkeypatch, tmp_path: Path) -> None:
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1,0")
    rc, out, _ = cli("--profile", str(_profile(tmp_path, '["0", "1"]')), "fit", "--no-live",
                     "--json")
    (w,) = json.loads(out)["gpu_identity"]["env_warnings"]
    assert "CUDA_VISIBLE_DEVICES='1,0'" in w and "NVML indices" in w
    # The seat container's environment, from docker inspect (only these variables are kept).
    st = container_state_from_inspect("resident", "seat-resident", {
        "State": {"Status": "running"},
        "Config": {"Env": ["HF_TOKEN=secret", "CUDA_DEVICE_ORDER=FASTEST_FIRST"]}}, None)
    assert st.device_env == {"CUDA_DEVICE_ORDER": "FASTEST_FIRST"}
    from seat_console.core.profile import load_profile
    from seat_console.snapshot.fit_reading import gather_fit_inputs

    class Conts:
        def get(self, name):
            return st if name == "seat-resident" else None

    monkeypatch.delenv("CUDA_VISIBLE_DEVICES")
    prof = _profile(tmp_path, '["0", "1"]')
    prof.write_text(prof.read_text().replace('name = "r"\n', 'name = "r"\ncontainer = "seat-resident"\n'))
    inputs = gather_fit_inputs(load_profile(str(prof)), None, containers=Conts(), environ={})
    (w,) = inputs.env_warnings
    assert "CUDA_DEVICE_ORDER='FASTEST_FIRST'" in w and "resident container seat-resident" in w


def test_fit_dtype_what_if_and_json_carry_the_served_dtype(cli, tmp_path: Path) -> None:
    cfg = _tiny_cfg(torch_dtype="float32")
    F.write_checkpoint(tmp_path / "f32", [F.llama_tensors(cfg, dtype="F32")], config=cfg)
    base = ("fit", "--no-live", "--checkpoint", str(tmp_path / "f32"), "--max-model-len", "4096")
    rc, out, _ = cli(*base, "--json")
    r = json.loads(out)["resident"]
    assert rc == 0 and r["served"]["dtype"] == "bfloat16" and r["kv_cache_dtype"] == "bfloat16"
    rc, out, _ = cli(*base, "--json", "--dtype", "float32")
    r32 = json.loads(out)["resident"]
    assert r32["served"]["dtype"] == "float32"
    # Every tensor is F32: per rank, float32 serving holds exactly twice bfloat16's bytes
    # (± the rounding of ceil(split / TP)).
    assert abs(r32["cards"][0]["weights_bytes"] - 2 * r["cards"][0]["weights_bytes"]) <= 2
    rc, text, _ = cli(*base)
    assert "served dtype: bfloat16 — float32 checkpoint served as bfloat16" in text


def test_gpus_says_which_entries_matched_no_card_and_which_share_one(cli, monkeypatch,
                                                                     tmp_path: Path) -> None:
    _two_cards(monkeypatch, mig=True)
    monkeypatch.setenv("CUDA_DEVICE_ORDER", "FASTEST_FIRST")
    prof = _profile(tmp_path, '["18:00.0", "GPU-aaaa", "MIG-cccc", "GPU-gone"]')
    rc, out, _ = cli("--profile", str(prof), "gpus")
    assert "WARNING: node.gpus entries matching no card: GPU-gone" in out
    assert "ERROR: node.gpus entries '18:00.0', 'GPU-aaaa' all name GPU 0" in out
    assert "WARNING: CUDA_DEVICE_ORDER='FASTEST_FIRST' is set" in out and "NVML indices" in out
    rc, out, _ = cli("--profile", str(prof), "gpus", "--json")
    snap = json.loads(out)
    assert snap["unmatched_seat_gpus"] == ["GPU-gone"] and len(snap["seat_conflicts"]) == 1
    assert [c["seat_match"] for c in snap["cards"]] == ["18:00.0", "MIG-cccc"]


async def test_the_gpu_panel_shows_a_seat_conflict() -> None:
    from app_fixtures import FakeClock, default_loaded
    from test_fit_widget import flat, screen_text, wait_for

    from seat_console.tui.app import SeatConsoleApp
    from seat_console.sources.gpu import GpuSnapshot
    from seat_console.widgets.gpu import GpuPanel

    class Fixed:
        name = "gpus"

        def read(self):
            return GpuSnapshot(seat_gpus=["0", "0"], seat_conflicts=[
                "node.gpus entries '0', '0' all name GPU 0 (GPU-aaaa): two TP ranks cannot "
                "share one card; list each card once"])

        def close(self):
            pass

    src = Fixed()
    app = SeatConsoleApp(default_loaded(), interval=3600.0, panels=[(lambda _l: src, GpuPanel)],
                         clock=FakeClock(), age_tick_s=3600.0, watch_terminal=False,
                         compact=False)
    async with app.run_test(size=(160, 50)) as pilot:
        await wait_for(pilot, lambda: "two TP ranks" in flat(screen_text(app)), "conflict line")


def test_an_index_vllm_does_not_read_selects_nothing(tmp_path: Path) -> None:
    sizes = _two_shards(tmp_path)
    (tmp_path / "model.safetensors.index.json").rename(tmp_path / "other.safetensors.index.json")
    F.write_sparse(tmp_path / "extra.safetensors", [("x", "BF16", [8])])
    s = scan_checkpoint(tmp_path)
    # Without model.safetensors.index.json vLLM loads every *.safetensors file.
    assert s.total_bytes == sum(sizes.values()) + 16 and s.index is None
    (p,) = s.problems
    assert p.kind == "index-ignored" and p.severity == "warning"
