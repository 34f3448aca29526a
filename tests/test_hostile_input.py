"""One regression test per class of hostile input a fuzz run found (issue #22).

Each fails on the code before the fix (a crash, a hang, a whole panel lost or a silent wrong
number) and holds the fix to its contract: a documented error naming the input, or the value
read as absent.
"""

from __future__ import annotations

import json
import os
import struct
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
import ckpt_factory as F  # noqa: E402

from seat_console.fit.kvcache import (  # noqa: E402
    EngineKVParams,
    KVModelError,
    LayerKV,
    ModelKV,
    kv_capacity,
    model_kv,
)
from seat_console.sources.checkpoint import (  # noqa: E402
    CheckpointError,
    SafetensorsHeaderError,
    parse_quant_config,
    scan_checkpoint,
)
from seat_console.core.untrusted import compile_re2, without_surrogates  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


def _shard(path: Path, header: dict) -> None:
    h = json.dumps(header).encode()   # ensure_ascii: a lone surrogate is written \ud800
    path.write_bytes(struct.pack("<Q", len(h)) + h + b"\0" * 64)


# -- lone surrogates -----------------------------------------------------------------------
@pytest.mark.parametrize("field", ["name", "dtype"])
def test_a_lone_surrogate_in_a_tensor_name_or_dtype_is_the_headers_named_error(tmp_path, field):
    name, dtype = ("w\ud800", "BF16") if field == "name" else ("w", "BF\udc80")
    _shard(tmp_path / "model.safetensors",
           {name: {"dtype": dtype, "shape": [2], "data_offsets": [0, 4]}})
    with pytest.raises(SafetensorsHeaderError, match="lone surrogate") as e:
        scan_checkpoint(tmp_path)
    assert "model.safetensors" in str(e.value)


def test_re2_matches_any_text_and_names_a_surrogate_pattern():
    prog = compile_re2("w.*", "ple_tensor_pattern", anchored=True)
    assert prog.search("w\ud800") is not None   # read as U+FFFD, as Go and Rust read it
    assert without_surrogates("ok") == "ok" and without_surrogates("a\ud800") == "a\ufffd"
    from seat_console.sources.silences import SilenceMatcher

    assert SilenceMatcher(name="instance", value="seat.*", isRegex=True).matches("seat\udcff")
    from seat_console.core.untrusted import InputError

    with pytest.raises(InputError, match=r"^matcher: .*lone surrogate"):
        compile_re2("a\ud800", "matcher")


def test_a_lone_surrogate_in_the_profile_text_is_a_named_profile_error():
    from seat_console.core.profile import ProfileError, parse_profile

    with pytest.raises(ProfileError, match=r"^p\.toml: line 2: .*lone surrogate"):
        parse_profile('[node]\nname = "n\ud800"\n', "p.toml")


def test_the_cli_prints_a_scan_result_holding_a_lone_surrogate(tmp_path):
    """An index naming a tensor ``ghost\\ud800`` that no shard holds: the problem names it, and
    printing it raised UnicodeEncodeError (the whole `fit` output lost, exit 1)."""
    root = tmp_path / "m"
    sizes = F.write_checkpoint(root, [F.llama_tensors(F.llama3_8b_config())[:3]],
                               config=F.llama3_8b_config())
    wm = {n: "model.safetensors" for n in sizes} | {"ghost\ud800": "model.safetensors"}
    (root / "model.safetensors.index.json").write_text(json.dumps({"weight_map": wm}))
    env = {**os.environ, "SEAT_CONSOLE_FIRST_FRAME": "0", "XDG_CONFIG_HOME": str(tmp_path),
           "PYTHONIOENCODING": "utf-8"}
    env.pop("SEAT_CONSOLE_PROFILE", None)
    cp = subprocess.run([sys.executable, "-m", "seat_console.cli", "fit", "--checkpoint",
                         str(root)], capture_output=True, text=True, timeout=120, env=env,
                        cwd=ROOT, check=False)
    assert "UnicodeEncodeError" not in cp.stderr, cp.stderr[-2000:]
    # the index is outside JSON: its lone surrogate escape is read as U+FFFD (as Go/Rust do)
    assert "tensor-absent: ghost\ufffd" in cp.stdout


def test_headless_output_escapes_a_lone_surrogate_instead_of_raising(monkeypatch):
    import io

    from seat_console import cli

    raw = io.BytesIO()
    out = io.TextIOWrapper(raw, encoding="utf-8", errors="strict")
    monkeypatch.setattr(sys, "stdout", out)
    monkeypatch.setattr(sys, "stderr", io.TextIOWrapper(io.BytesIO(), encoding="utf-8"))
    cli._printable_streams()
    print("name w\ud800 read from a file name")
    out.flush()
    assert raw.getvalue() == b"name w\\ud800 read from a file name\n"


# -- file names, zero-byte layers, layer_types, producer -----------------------------------
def test_a_shard_name_longer_than_the_file_system_allows_is_a_named_index_error(tmp_path):
    F.write_checkpoint(tmp_path, [[("w", "BF16", [2])]])
    (tmp_path / "model.safetensors.index.json").write_text(json.dumps(
        {"weight_map": {"w": "m" * 300 + ".safetensors"}}))
    with pytest.raises(CheckpointError, match=r"model\.safetensors\.index\.json: weight_map"
                                              r".*at most 255 bytes"):
        scan_checkpoint(tmp_path)


def test_cache_layers_of_zero_bytes_are_a_named_kv_model_error():
    layers = [LayerKV(index=i, kind="linear", state_bytes=0) for i in range(4)]
    m = ModelKV(source="config.json", tensor_parallel_size=1, model_dtype="bfloat16",
                kv_cache_dtype="auto", kv_dtype_bytes=2, attention="none",
                num_attention_heads=1, total_kv_heads=1, kv_heads_per_rank=1, head_dim=1,
                head_dim_v=1, layers=layers)
    with pytest.raises(KVModelError, match=r"config\.json: 4 cache layer\(s\) hold 0 bytes"):
        kv_capacity(m, 1 << 30, EngineKVParams(max_model_len=4096))
    full = [LayerKV(index=0, kind="full", bytes_per_token=0)]
    with pytest.raises(KVModelError, match="hold 0 bytes"):
        kv_capacity(m.model_copy(update={"layers": full}), 1 << 30,
                    EngineKVParams(max_model_len=4096))


@pytest.mark.parametrize("bad", [{"0": "full_attention"}, "full_attention", 7])
def test_a_layer_types_that_is_not_a_list_is_an_error_naming_it(bad):
    cfg = F.llama3_8b_config() | {"layer_types": bad}
    with pytest.raises(KVModelError, match=r"^cfg: layer_types must be a list"):
        model_kv(cfg, source="cfg")
    assert model_kv(F.llama3_8b_config() | {"layer_types": None}).count("full") == 32


@pytest.mark.parametrize("name, method", [(5, "modelopt"), (["x"], "modelopt"),
                                          ("nvidia-modelopt", "nvidia-modelopt")])
def test_a_producer_name_that_is_not_a_string_is_absent(name, method):
    q = parse_quant_config(None, {"producer": {"name": name},
                                  "quantization": {"quant_algo": "FP8"}})
    assert q.method == method and isinstance(q.method, str)


# -- Alertmanager, docker, GPU entries, /metrics, cgroups ----------------------------------
def test_a_silence_at_the_edge_of_the_calendar_is_marked_alone():
    from test_props_silences import SEAT, _silence, _source

    seat_m = [m.to_api() for m in SEAT]
    edge = _silence("edge", "active", seat_m) | {"endsAt": "9999-12-31T23:59:59-01:00"}
    r = _source(json.dumps([edge, _silence("good", "active", seat_m)]).encode()).read()
    assert [s.id for s in r.silences] == ["good"], r
    assert len(r.unreadable) == 1 and "'edge'" in r.unreadable[0]
    assert "endsAt" in r.unreadable[0] and "outside the calendar" in r.unreadable[0]


class _Api:
    def __init__(self, reply):
        self.reply = reply

    def inspect_container(self, name):
        return self.reply

    def inspect_image(self, ref):
        return {"RepoDigests": []}


class _Client:
    def __init__(self, reply):
        self.api = _Api(reply)


@pytest.mark.parametrize("reply", [[], ["x"], "text", 7, None])
def test_a_docker_inspect_reply_that_is_not_an_object_makes_that_container_unknown(reply):
    from seat_console.sources.containers import ContainerSource

    src = ContainerSource("unix:///nonexistent.sock", {"resident": "seat"}, watch_events=False)
    st = src._inspect(_Client(reply), "resident", "seat")
    assert st.state == "unknown" and "docker inspect seat" in st.problem
    assert type(reply).__name__ in st.problem
    ok = src._inspect(_Client({"Id": "abc", "State": {"Status": "running", "Running": True},
                               "Image": 7}), "resident", "seat")
    assert ok.problem is None and ok.running and ok.image_id is None


@pytest.mark.parametrize("entry", ["²", "١", "0\u200b", " ", "GPU-\x07"])
def test_gpu_entries_in_unicode_digits_are_refused_by_the_profile(entry):
    from pydantic import ValidationError

    from seat_console.core.profile import NodeSpec
    from seat_console.core.gpu_ids import match_seat

    with pytest.raises(ValidationError, match="is not a GPU: give an NVML index in ASCII"):
        NodeSpec(gpus=[entry, "1"])
    assert match_seat(entry, 1, "GPU-x", None) is False   # and never int() on them
    assert NodeSpec(gpus=["0", "GPU-1234", "00000000:2A:00.0", "MIG-ab"]).gpus[0] == "0"


def test_a_histogram_without_sum_has_an_unknown_sum_not_zero():
    from seat_console.sources.engine import parse_metrics, summarize_histogram
    from prometheus_client.parser import text_string_to_metric_families

    text = ("# TYPE vllm:e2e_request_latency_seconds histogram\n"
            'vllm:e2e_request_latency_seconds_bucket{le="1.0"} 2\n'
            'vllm:e2e_request_latency_seconds_bucket{le="+Inf"} 3\n'
            "vllm:e2e_request_latency_seconds_count 3\n")
    fam = next(iter(text_string_to_metric_families(text)))
    h = summarize_histogram(fam)
    assert h is not None and h.count == 3 and h.sum_s is None and h.mean_s is None
    assert parse_metrics(text) is not None


def test_a_nested_cgroup_path_is_the_innermost_container():
    from seat_console.sources.gpu import parse_cgroup

    outer, inner = "a" * 64, "b" * 64
    for path in (f"/system.slice/docker-{outer}.scope/docker/{inner}",
                 f"/docker/{outer}/system.slice/docker-{inner}.scope",
                 f"/kubepods/besteffort/pod12345678-1234-1234-1234-123456789abc/{outer}"
                 f"/docker/{inner}"):
        ref = parse_cgroup(f"0::{path}\n")
        assert ref is not None and ref.id == inner, (path, ref)
    assert parse_cgroup(f"0::/system.slice/docker-{outer}.scope\n").id == outer
    # only "\n" ends a line of /proc/PID/cgroup: a U+2028 inside a directory name does not
    assert parse_cgroup(f"0::/docker/{outer}/x\u2028y/docker/{inner}\n").id == inner


def test_times_outside_the_calendar_in_run_and_journal_files_are_named():
    from seat_console.actions.journal import parse_time
    from seat_console.evidence.runs import RunError
    from seat_console.evidence.runs import parse_time as run_time

    with pytest.raises(ValueError, match="outside the calendar"):
        parse_time("9999-12-31T23:59:59-05:00")
    with pytest.raises(RunError, match="^summary.started_at: .*outside the calendar"):
        run_time("0001-01-01T00:00:00+01:00", "summary.started_at")
    assert run_time("2026-12-01T12:00:00Z", "x") == datetime(2026, 12, 1, 12, tzinfo=UTC)
    assert parse_time("2026-12-01T12:00:00+01:00").utcoffset() == timedelta(0)


@pytest.mark.parametrize("pair", [["0", "0"], ["1", "01"], ["GPU-AbC", "gpu-abc"],
                                  ["2a:00.0", "00000000:2A:00.0"]])
def test_two_entries_naming_one_card_are_refused_by_the_profile(pair, tmp_path):
    """The trial: ``gpus = ["0", "0"]`` passed ``profile --check`` and ``fit`` then said NO
    VERDICT. Two TP ranks cannot share a card: the profile names both entries; distinct cards
    pass."""
    from pydantic import ValidationError

    from seat_console.core.profile import NodeSpec

    with pytest.raises(ValidationError, match=r"name the same device: two TP ranks cannot"):
        NodeSpec(gpus=pair)
    assert NodeSpec(gpus=[pair[0], "7"]).gpus == [pair[0], "7"]
    from seat_console.cli import main
    from seat_console.core.profile_path import default_profile_text

    text = default_profile_text().replace('gpus = ["0", "1"]', f'gpus = {json.dumps(pair)}', 1)
    assert f'gpus = {json.dumps(pair)}' in text
    (tmp_path / "p.toml").write_text(text)
    assert main(["profile", "--check", str(tmp_path / "p.toml")]) != 0
