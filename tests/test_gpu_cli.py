"""``seat-console gpus [--json]`` with the NVML double injected.

Injection: ``monkeypatch.setattr(seat_console.node.nvml, "module_factory", lambda: double)`` — every
:class:`seat_console.node.nvml.Nvml` built without an explicit module (as the command's
``make_source`` does) then talks to the double. One test runs the installed command for real on
this machine, which has no NVIDIA driver.
"""

from __future__ import annotations

import ctypes.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pynvml
import pytest

import seat_console.node.nvml as nvml_mod
from seat_console.cli import main
from seat_console.sources.gpu import GpuSnapshot
from seat_console.core.base import Unavailable

sys.path.insert(0, str(Path(__file__).parent))
from nvml_double import FakeProcess, NvmlDouble, h200_pair

GIB = 1 << 30


@pytest.fixture
def inject(monkeypatch):
    """Install a double as the pynvml module; returns a function taking the double."""
    monkeypatch.delenv("SEAT_CONSOLE_PROFILE", raising=False)
    monkeypatch.setenv("XDG_CONFIG_HOME", "/nonexistent-for-tests")

    def _inject(double: NvmlDouble) -> NvmlDouble:
        monkeypatch.setattr(nvml_mod, "module_factory", lambda: double)
        return double

    return _inject


def test_json_is_the_snapshot_model(inject, capsys):
    pid = int(Path("/proc/sys/kernel/pid_max").read_text()) + 1
    double = inject(NvmlDouble(h200_pair(used=100 * GIB,
                                         processes=[FakeProcess(pid, 100 * GIB)])))
    assert main(["gpus", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    snap = GpuSnapshot.model_validate(data)  # the same model the TUI renders
    assert data == snap.model_dump(mode="json")
    assert [c.uuid for c in snap.cards] == [c.uuid for c in double.cards]
    assert snap.cards[0].memory.cuda_visible_bytes == 150_109_880_320
    assert snap.cards[0].processes[0].used_memory_bytes == 100 * GIB
    assert [c.seat_match for c in snap.cards] == ["0", "1"]  # default profile: node.gpus
    assert double.initialised == 0  # NVML shut down after the one snapshot


def test_table_in_gib_and_mib(inject, capsys):
    cards = h200_pair(used=100 * GIB)
    cards[1].unsupported.add("nvmlDeviceGetPowerUsage")
    inject(NvmlDouble(cards))
    assert main(["gpus"]) == 0
    out = capsys.readouterr().out
    assert "GiB = 2^30 bytes, MiB = 2^20 bytes" in out
    assert "total 140.40 GiB (143,771 MiB)" in out
    assert "reserved 0.60 GiB (616 MiB)" in out  # 615.06 MiB, rounded up like nvidia-smi
    assert "used 100.00 GiB (102,400 MiB)" in out
    assert "CUDA-visible (total - reserved) 139.80 GiB (143,156 MiB)" in out
    assert "[serves the seat: node.gpus '0']" in out
    assert "power n/a / 700.0 W" in out and "power_draw_mw" in out


@pytest.mark.parametrize(("nvml_bytes", "smi_mib"), [
    # (NVML bytes, what nvidia-smi printed) on the H200, driver 580.159.04 (docs/validation.md)
    (150_754_820_096, 143_771), (644_939_776, 616), (108_023_054_336, 103_019),
    (42_086_825_984, 40_138), (108_013_813_760, 103_010), (150_109_880_320, 143_156), (0, 0),
])
def test_mib_rounding_matches_nvidia_smi(nvml_bytes, smi_mib):
    from seat_console.commands.gpus_cmd import mib_as_nvidia_smi

    assert mib_as_nvidia_smi(nvml_bytes) == smi_mib


def test_v1_table_says_used_incl_reserved(inject, capsys):
    inject(NvmlDouble(h200_pair(), memory_v2=False))
    assert main(["gpus"]) == 0
    out = capsys.readouterr().out
    assert "used incl. reserved 0.60 GiB (616 MiB)" in out
    assert "CUDA-visible (total - reserved) n/a" in out


def test_lost_card_in_table(inject, capsys):
    cards = h200_pair()
    cards[1].lost_at_handle = True
    inject(NvmlDouble(cards))
    assert main(["gpus"]) == 0
    assert "STATE LOST: " in capsys.readouterr().out


@pytest.mark.parametrize(("code", "kind"), [
    (pynvml.NVML_ERROR_DRIVER_NOT_LOADED, "no-driver"),
    (pynvml.NVML_ERROR_LIB_RM_VERSION_MISMATCH, "version-mismatch"),
    (pynvml.NVML_ERROR_LIBRARY_NOT_FOUND, "no-library"),
])
def test_unavailable_exits_3_with_the_reason_on_stderr(inject, capsys, code, kind):
    inject(NvmlDouble(h200_pair(), init_error=code))
    assert main(["gpus", "--json"]) == 3
    captured = capsys.readouterr()
    assert f"({kind})" in captured.err
    assert Unavailable.model_validate_json(captured.out).kind == kind


def test_no_gpu_exits_3(inject, capsys):
    inject(NvmlDouble([]))
    assert main(["gpus"]) == 3
    assert "no-gpu" in capsys.readouterr().err


def test_other_error_exits_1(inject, capsys):
    inject(NvmlDouble(h200_pair(), init_error=pynvml.NVML_ERROR_UNKNOWN))
    assert main(["gpus"]) == 1
    assert "Unknown Error" in capsys.readouterr().err


def test_installed_command_without_a_driver_exits_3(tmp_path):
    if ctypes.util.find_library("nvidia-ml") or Path("/dev/nvidiactl").exists():
        pytest.skip("this machine has an NVIDIA driver")
    env = {**os.environ, "XDG_CONFIG_HOME": str(tmp_path)}
    env.pop("SEAT_CONSOLE_PROFILE", None)
    proc = subprocess.run([sys.executable, "-m", "seat_console", "gpus"], capture_output=True,
                          text=True, env=env, timeout=60, check=False)
    assert proc.returncode == 3, proc.stderr
    assert "(no-library)" in proc.stderr and "libnvidia-ml.so.1" in proc.stderr
