"""GPU sampler and NVML gateway against the in-process NVML double (tests/nvml_double.py).

The double raises the real ``pynvml.NVMLError`` subclasses with real codes, so the gateway's
error mapping (console/nvml.py) runs as it would on a driver. Process mapping runs against this
machine's real /proc (and, where noted, a real container under a real dockerd).
"""

from __future__ import annotations

import json
import logging
import math
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pynvml
import pytest

import seat_console.node.nvml as nvml_mod
from seat_console.sources.gpu import (
    ContainerRef,
    DockerNamer,
    GpuCard,
    GpuSampler,
    GpuSnapshot,
    GpuSource,
    MemoryReading,
    ProcessMapper,
    make_source,
    parse_cgroup,
)
from seat_console.core.gpu_ids import match_seat
from seat_console.node.nvml import NA, NaType, Nvml, is_na
from seat_console.core.profile import load_profile
from seat_console.core.base import Unavailable

sys.path.insert(0, str(Path(__file__).parent))
from nvml_double import (
    H200_RESERVED,
    H200_TOTAL,
    FakeCard,
    FakeMig,
    FakeProcess,
    NvmlDouble,
    h200_pair,
)

DATA = Path(__file__).parent / "data"
UUID0 = "GPU-11111111-2222-3333-4444-555555555555"
UUID1 = "GPU-aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee"
GIB = 1 << 30


def absent_pid() -> int:
    """A PID that cannot exist here: above the kernel's pid_max."""
    return int(Path("/proc/sys/kernel/pid_max").read_text()) + 12345


def sampler_for(double: NvmlDouble, seat: list[str] | None = None,
                mapper: ProcessMapper | None = None) -> GpuSampler:
    return GpuSampler(Nvml(double), seat if seat is not None else ["0", "1"], mapper)


def snap_of(double: NvmlDouble, **kw) -> GpuSnapshot:
    snap = sampler_for(double, **kw).sample()
    assert isinstance(snap, GpuSnapshot), snap
    return snap


# ---------------------------------------------------------------------------- memory figures

def test_h200_v2_memory_and_cuda_visible_total():
    used = 107_926_585_344  # v2 used with 100 GiB held by torch on the H200 (RECIPES.md)
    double = NvmlDouble(h200_pair(used=used))
    card = snap_of(double).cards[0]
    m = card.memory
    assert m.api == "v2" and not m.used_includes_reserved and m.used_label == "used"
    assert m.total_bytes == 150_754_820_096
    assert m.reserved_bytes == 644_939_776
    assert m.used_bytes == used
    assert m.free_bytes == 150_754_820_096 - 644_939_776 - used
    # what vLLM budgets gpu_memory_utilization from (DESIGN.md rule 6)
    assert m.cuda_visible_bytes == 150_109_880_320


def test_memory_reading_rejects_inconsistent_cuda_visible():
    with pytest.raises(ValueError, match="total_bytes - reserved_bytes"):
        MemoryReading(api="v2", total_bytes=10, reserved_bytes=2, used_bytes=0, free_bytes=8,
                      cuda_visible_bytes=10)
    with pytest.raises(ValueError, match="v1"):
        MemoryReading(api="v1", total_bytes=10, used_bytes=2, free_bytes=8,
                      used_includes_reserved=False)


def test_v1_only_driver_labels_used_incl_reserved_and_probes_once():
    double = NvmlDouble(h200_pair(used=5 * GIB, processes=[FakeProcess(absent_pid(), 5 * GIB)]),
                        memory_v2=False, process_versions=("v1",))
    sampler = sampler_for(double)
    for _ in range(3):
        snap = sampler.sample()
    m = snap.cards[0].memory
    assert snap.memory_api == "v1" and m.api == "v1"
    assert m.used_includes_reserved and m.used_label == "used incl. reserved"
    assert m.reserved_bytes is None and m.cuda_visible_bytes is None  # unknown, not 0
    assert m.used_bytes == 5 * GIB + H200_RESERVED
    assert m.total_bytes == H200_TOTAL
    # v1 processes came through the C-calling-convention path (ctypes struct array)
    assert snap.process_api == "v1"
    assert [(p.pid, p.used_memory_bytes) for p in snap.cards[0].processes] == [
        (absent_pid(), 5 * GIB)]
    # probed once: the v2 / v3 / v2-process functions were each tried a single time
    assert double.calls["nvmlDeviceGetMemoryInfo_v2"] == 1
    assert double.calls["nvmlDeviceGetComputeRunningProcesses_v3"] == 1
    assert double.calls["nvmlDeviceGetComputeRunningProcesses_v2"] == 1
    assert double.calls["nvmlDeviceGetComputeRunningProcesses"] == 3 * 2 * 2  # 2 calls/card/tick


def test_v2_not_supported_on_one_card_falls_back_to_v1_for_that_card_only():
    cards = h200_pair()
    cards[1].unsupported.add("nvmlDeviceGetMemoryInfo_v2")
    snap = snap_of(NvmlDouble(cards))
    assert snap.cards[0].memory.api == "v2"
    assert snap.cards[1].memory.api == "v1" and snap.cards[1].memory.used_includes_reserved
    assert snap.memory_api == "v2"


def test_v2_not_supported_on_the_first_card_does_not_switch_the_other_cards_to_v1():
    """Review bug (#12): card 0 answering v2 NOT_SUPPORTED made every card use v1 for the rest
    of the run (reserved and CUDA-visible totals lost on healthy cards)."""
    cards = h200_pair(used=3 * GIB)
    cards[0].unsupported.add("nvmlDeviceGetMemoryInfo_v2")
    double = NvmlDouble(cards)
    sampler = sampler_for(double)
    for _ in range(3):
        snap = sampler.sample()
        healthy = snap.cards[1].memory
        assert healthy.api == "v2" and not healthy.used_includes_reserved
        assert healthy.reserved_bytes == H200_RESERVED
        assert healthy.cuda_visible_bytes == H200_TOTAL - H200_RESERVED
        assert healthy.used_bytes == 3 * GIB
        assert snap.cards[0].memory.api == "v1"
        assert snap.cards[0].memory.reserved_bytes is None
    # per call: the card that refused v2 gets v2 again once it answers it
    cards[0].unsupported.discard("nvmlDeviceGetMemoryInfo_v2")
    snap = sampler.sample()
    assert snap.cards[0].memory.api == "v2"
    assert snap.cards[0].memory.reserved_bytes == H200_RESERVED
    assert snap.memory_api == "v2"


def test_gateway_memory_fallback_is_per_call_and_per_card():
    cards = h200_pair()
    cards[0].unsupported.add("nvmlDeviceGetMemoryInfo_v2")
    double = NvmlDouble(cards)
    nvml = Nvml(double)
    h0 = nvml.call("nvmlDeviceGetHandleByIndex", 0)
    h1 = nvml.call("nvmlDeviceGetHandleByIndex", 1)
    assert nvml.memory_info(h0)[0] == "v1"
    assert nvml.memory_api is None  # a per-card NOT_SUPPORTED is not a choice of API
    api, m = nvml.memory_info(h1)
    assert api == "v2" and m["reserved"] == H200_RESERVED
    assert nvml.memory_info(h0)[0] == "v1" and nvml.memory_api == "v2"
    assert double.calls["nvmlDeviceGetMemoryInfo_v2"] == 3


def test_old_pynvml_without_v3_wrapper_uses_v2():
    double = NvmlDouble(h200_pair(processes=[FakeProcess(absent_pid(), GIB)]),
                        missing={"nvmlDeviceGetComputeRunningProcesses_v3"})
    snap = snap_of(double)
    assert snap.process_api == "v2"
    assert snap.cards[0].processes[0].used_memory_bytes == GIB


def test_driver_with_v2_processes_only():
    double = NvmlDouble(h200_pair(), process_versions=("v2",))
    snap = snap_of(double)
    assert snap.process_api == "v2" and snap.cards[0].processes == []


# ---------------------------------------------------------------------------- per-field n/a

FIELD_OF = {
    "nvmlDeviceGetPowerUsage": ["power_draw_mw"],
    "nvmlDeviceGetEnforcedPowerLimit": ["power_limit_mw"],
    "nvmlDeviceGetTemperature": ["temperature_c"],
    "nvmlDeviceGetUtilizationRates": ["utilization_gpu_pct", "utilization_memory_pct"],
    "nvmlDeviceGetName": ["name"],
    "nvmlDeviceGetMigMode": ["mig_enabled"],
    "nvmlDeviceGetComputeRunningProcesses_v3": ["processes"],
}
LIVE_FIELDS = ["name", "uuid", "pci_bus_id", "memory", "utilization_gpu_pct",
               "utilization_memory_pct", "temperature_c", "power_draw_mw", "power_limit_mw",
               "processes", "mig_enabled"]


@pytest.mark.parametrize("function", sorted(FIELD_OF))
def test_not_supported_field_is_na_and_the_others_stay_live(function):
    cards = h200_pair(util_gpu=37, util_mem=12)
    cards[0].unsupported.add(function)
    snap = snap_of(NvmlDouble(cards))
    card, other = snap.cards
    for field in FIELD_OF[function]:
        assert getattr(card, field) is None, field  # n/a, never 0
        assert field in card.unsupported
    for field in LIVE_FIELDS:
        if field not in FIELD_OF[function]:
            assert getattr(card, field) is not None, field
        assert getattr(other, field) is not None, field
    assert card.state == "ok" and other.unsupported == []


def test_memory_not_supported_at_all_is_na():
    cards = h200_pair()
    cards[0].unsupported |= {"nvmlDeviceGetMemoryInfo_v2", "nvmlDeviceGetMemoryInfo"}
    card = snap_of(NvmlDouble(cards)).cards[0]
    assert card.memory is None and "memory" in card.unsupported
    assert card.temperature_c == 31


def test_other_nvml_error_marks_one_field_with_the_message():
    cards = h200_pair()
    cards[0].errors["nvmlDeviceGetTemperature"] = pynvml.NVML_ERROR_UNKNOWN
    card = snap_of(NvmlDouble(cards)).cards[0]
    assert card.temperature_c is None
    assert card.errors == {"temperature_c": "Unknown Error"}
    assert card.power_draw_mw == 75_123 and card.memory.used_bytes == 0


def test_missing_function_is_na_and_logged_once(caplog):
    double = NvmlDouble(h200_pair(), missing={"nvmlDeviceGetPowerUsage"})
    sampler = sampler_for(double)
    with caplog.at_level(logging.INFO, logger="seat_console.node.nvml"):
        for _ in range(3):
            snap = sampler.sample()
    assert snap.cards[0].power_draw_mw is None and "power_draw_mw" in snap.cards[0].unsupported
    logged = [r for r in caplog.records if "nvmlDeviceGetPowerUsage" in r.getMessage()]
    assert len(logged) == 1


# ---------------------------------------------------------------------------- lost card

def test_lost_card_is_marked_with_last_known_identity_and_others_stay_live():
    cards = h200_pair(used=3 * GIB)
    double = NvmlDouble(cards)
    sampler = sampler_for(double)
    assert sampler.sample().cards[1].state == "ok"
    cards[1].lost = True
    cards[0].used = 4 * GIB
    snap = sampler.sample()
    lost, live = snap.cards[1], snap.cards[0]
    assert lost.state == "lost" and "GPU is lost" in lost.state_reason
    assert lost.uuid == UUID1 and lost.memory is None  # last known identity, no stale memory
    assert live.state == "ok" and live.memory.used_bytes == 4 * GIB  # still live
    assert lost.serves_seat  # the seat entry "1" still names it


def test_card_lost_at_handle_from_the_start():
    cards = h200_pair()
    cards[0].lost_at_handle = True
    snap = snap_of(NvmlDouble(cards))
    assert snap.cards[0].state == "lost" and snap.cards[0].uuid is None
    assert snap.cards[1].state == "ok" and snap.cards[1].memory.total_bytes == H200_TOTAL


# ---------------------------------------------------------------------------- library states

@pytest.mark.parametrize(("code", "kind", "words"), [
    (pynvml.NVML_ERROR_DRIVER_NOT_LOADED, "no-driver", "kernel driver is not loaded"),
    (pynvml.NVML_ERROR_LIBRARY_NOT_FOUND, "no-library", "libnvidia-ml.so.1"),
    (pynvml.NVML_ERROR_LIB_RM_VERSION_MISMATCH, "version-mismatch", "does not match"),
    (pynvml.NVML_ERROR_NO_PERMISSION, "no-permission", "permissions"),
    (pynvml.NVML_ERROR_UNKNOWN, "error", "Unknown Error"),
])
def test_library_states_are_distinct(code, kind, words):
    reading = sampler_for(NvmlDouble(h200_pair(), init_error=code)).sample()
    assert isinstance(reading, Unavailable)
    assert reading.source == "nvml" and reading.kind == kind
    assert words in reading.reason


def test_pynvml_not_importable_is_no_library(monkeypatch):
    def no_pynvml():
        raise ImportError("No module named 'pynvml'")

    monkeypatch.setattr(nvml_mod, "module_factory", no_pynvml)
    reading = GpuSampler(Nvml(), ["0"]).sample()
    assert isinstance(reading, Unavailable) and reading.kind == "no-library"
    assert "nvidia-ml-py" in reading.reason


def test_init_is_lazy_and_retried_after_a_driver_appears():
    double = NvmlDouble(h200_pair(), init_error=pynvml.NVML_ERROR_DRIVER_NOT_LOADED)
    sampler = sampler_for(double)
    assert double.calls["nvmlInit"] == 0  # nothing at construction
    assert sampler.sample().kind == "no-driver"
    double.init_error = None  # modprobe nvidia
    snap = sampler.sample()
    assert isinstance(snap, GpuSnapshot) and len(snap.cards) == 2
    sampler.sample()
    assert double.calls["nvmlInit"] == 2  # failed once, then initialised once


def test_no_gpu_is_its_own_state():
    reading = sampler_for(NvmlDouble([])).sample()
    assert isinstance(reading, Unavailable) and reading.kind == "no-gpu"


def test_close_shuts_nvml_down():
    double = NvmlDouble(h200_pair())
    source = GpuSource(sampler_for(double))
    assert isinstance(source.read(), GpuSnapshot) and double.initialised == 1
    source.close()
    assert double.initialised == 0


def test_source_never_raises():
    class Broken(GpuSampler):
        def sample(self):
            raise RuntimeError("boom")

    reading = GpuSource(Broken(Nvml(NvmlDouble([])))).read()
    assert isinstance(reading, Unavailable) and reading.kind == "error"
    assert "boom" in reading.reason


# ---------------------------------------------------------------------------- MIG

def test_mig_card_lists_instances_with_their_memory_and_processes():
    pid = absent_pid()
    mig_a = FakeMig("MIG-aaaa", "NVIDIA H200 MIG 3g.71gb", 1, 0, total=76_235_669_504,
                    reserved=0, used=20 * GIB, processes=[FakeProcess(pid, 19 * GIB, 1, 0)])
    mig_b = FakeMig("MIG-bbbb", "NVIDIA H200 MIG 1g.18gb", 9, 0, total=19_193_135_104,
                    reserved=0, used=0)
    cards = h200_pair()
    cards[0].mig_mode = True
    cards[0].mig = [mig_a, None, mig_b]  # slot 1 is empty (NVML_ERROR_NOT_FOUND)
    cards[1].mig_mode = None  # a card without MIG support
    snap = snap_of(NvmlDouble(cards))
    card = snap.cards[0]
    assert card.mig_enabled is True
    assert [(i.index, i.uuid, i.gpu_instance_id) for i in card.mig_instances] == [
        (0, "MIG-aaaa", 1), (2, "MIG-bbbb", 9)]
    assert card.mig_instances[0].memory.total_bytes == 76_235_669_504
    assert card.mig_instances[0].memory.used_bytes == 20 * GIB
    assert card.mig_instances[1].memory.free_bytes == 19_193_135_104
    (proc,) = card.processes  # union over instances
    assert (proc.gpu_instance_id, proc.compute_instance_id) == (1, 0)
    assert card.process_memory_bytes == 19 * GIB
    assert card.errors == {}
    assert snap.cards[1].mig_enabled is None and "mig_enabled" in snap.cards[1].unsupported


def test_mig_mode_is_reread_only_after_its_ttl():
    cards = h200_pair()
    double = NvmlDouble(cards)
    sampler = sampler_for(double)
    for _ in range(3):
        sampler.sample()
    assert double.calls["nvmlDeviceGetMigMode"] == 2  # once per card, then cached
    sampler.mig_mode_ttl_s = 0.0
    cards[0].mig_mode = True
    cards[0].mig = [FakeMig("MIG-x", "1g", 1, 0, GIB, 0, 0)]
    snap = sampler.sample()
    assert double.calls["nvmlDeviceGetMigMode"] == 4
    assert snap.cards[0].mig_enabled is True and snap.cards[0].mig_instances[0].uuid == "MIG-x"


def test_sample_duration_excludes_nvml_init():
    # nvmlInit takes ~0.1 s on the H200; here it takes 1 s, far more than a whole batch of
    # in-process reads, so a duration that included it could not pass.
    class SlowInit(NvmlDouble):
        def nvmlInit(self):
            time.sleep(1.0)
            super().nvmlInit()

    snap = snap_of(SlowInit(h200_pair()))
    assert 0 < snap.sample_duration_s < 1.0


# ---------------------------------------------------------------------------- processes

def test_unmappable_pid_is_shown_as_such_and_its_memory_counts():
    gone = absent_pid()
    cards = h200_pair(processes=[FakeProcess(gone, 7 * GIB), FakeProcess(gone + 1, None)])
    card = snap_of(NvmlDouble(cards)).cards[0]
    p = card.processes[0]
    assert not p.mapped and "another PID namespace" in p.unmapped_reason
    assert p.name is None and p.container is None
    assert p.used_memory_bytes == 7 * GIB
    assert card.processes[1].used_memory_bytes is None  # NVML could not attribute: n/a
    assert card.process_memory_bytes == 7 * GIB


_NOT_AVAILABLE = 0xFFFFFFFFFFFFFFFF  # NVML_VALUE_NOT_AVAILABLE_ulonglong


@pytest.mark.parametrize("versions", [("v3",), ("v2",), ("v1",)])
@pytest.mark.parametrize("raw", [None, _NOT_AVAILABLE])
def test_value_not_available_is_unknown_on_every_process_struct_path(versions, raw):
    """The sentinel was tested on the newest struct only: v2 (pynvml may pass the raw value)
    and the v1 ctypes struct (always raw) must give None too, never 2^64 − 1 bytes or 0."""
    gone = absent_pid()
    cards = h200_pair(processes=[FakeProcess(gone, raw), FakeProcess(gone + 1, raw)])
    snap = snap_of(NvmlDouble(cards, process_versions=versions))
    card = snap.cards[0]
    assert snap.process_api == versions[0]
    assert [p.used_memory_bytes for p in card.processes] == [None, None]
    assert card.process_memory_bytes is None  # unknown, not "0 B"


def test_process_memory_is_zero_only_without_processes():
    assert snap_of(NvmlDouble(h200_pair())).cards[0].process_memory_bytes == 0


@pytest.mark.parametrize(("reserved", "used", "what"), [
    (H200_TOTAL + 1, 0, "reserved"), (0, H200_TOTAL + 5, "used")])
def test_reserved_or_used_above_total_is_unknown_never_negative(reserved, used, what):
    cards = h200_pair()
    cards[0].reserved, cards[0].used = reserved, used
    card = snap_of(NvmlDouble(cards)).cards[0]
    m = card.memory
    assert getattr(m, f"{what}_bytes") is None and m.total_bytes == H200_TOTAL
    assert m.free_bytes is None or m.free_bytes >= 0
    assert m.cuda_visible_bytes is None or m.cuda_visible_bytes >= 0
    assert "above total" in card.errors["memory"]
    healthy = snap_of(NvmlDouble(h200_pair())).cards[1].memory  # the other card is untouched
    assert healthy.cuda_visible_bytes == H200_TOTAL - H200_RESERVED


def test_pid_reuse_invalidates_the_cached_mapping(sleeper, tmp_path, monkeypatch):
    """The cache is keyed by (PID, start time): the same PID with another start time is another
    process, and must be inspected again (not shown with the old process's container)."""
    import seat_console.sources.gpu as gpu_mod

    root = tmp_path / "proc"
    (root / str(sleeper.pid) / "fd").mkdir(parents=True)
    os.symlink("/dev/nvidia0", root / str(sleeper.pid) / "fd" / "3")
    cg = root / str(sleeper.pid) / "cgroup"
    cg.write_text("0::/system.slice/docker-" + "ab" * 32 + ".scope\n")
    starts = iter([100.0, 100.0, 555.0, 555.0])
    monkeypatch.setattr(gpu_mod, "_start_ticks", lambda pid: next(starts))
    mapper = ProcessMapper(root)
    first = mapper.map(sleeper.pid)
    assert first["container"].id == "ab" * 32
    assert mapper.map(sleeper.pid) is first  # same start time: cached
    cg.write_text("0::/user.slice/session-1.scope\n")  # the PID now names another process
    second = mapper.map(sleeper.pid)
    assert second is not first and second["container"] is None
    assert mapper.map(sleeper.pid) is second


def test_pid_reused_in_this_namespace_without_a_gpu_handle_is_not_mapped():
    # This test process exists here but holds no /dev/nvidia* device: the PID NVML gave must
    # belong to another PID namespace, so it must not be shown as this process.
    card = snap_of(NvmlDouble(h200_pair(processes=[FakeProcess(os.getpid(), GIB)]))).cards[0]
    p = card.processes[0]
    assert not p.mapped and "holding no /dev/nvidia" in p.unmapped_reason
    assert p.used_memory_bytes == GIB


@pytest.fixture
def sleeper():
    proc = subprocess.Popen(["sleep", "300"])
    yield proc
    proc.kill()
    proc.wait()


def test_gpu_process_mapped_to_name_command_and_container(sleeper, tmp_path):
    # The process is real (psutil reads its name/command from /proc); its fd table and cgroup
    # are presented from a host-like proc root: an open /dev/nvidia0 and the cgroup text
    # captured from a real docker container on this machine (cgroup v1, cgroupfs driver).
    root = tmp_path / "proc"
    (root / str(sleeper.pid) / "fd").mkdir(parents=True)
    os.symlink("/dev/nvidia0", root / str(sleeper.pid) / "fd" / "3")
    shutil.copy(DATA / "cgroup_v1_docker_cgroupfs.txt", root / str(sleeper.pid) / "cgroup")
    names = {"4c0a1b7d4ad395694bee0c2848084b95681f651f2f3f57b9ee119f87a0d4a7b3": "seat-resident"}
    mapper = ProcessMapper(root, container_namer=lambda ref: names.get(ref.id))
    card = snap_of(NvmlDouble(h200_pair(processes=[FakeProcess(sleeper.pid, 100 * GIB)])),
                   mapper=mapper).cards[0]
    p = card.processes[0]
    assert p.mapped and p.name == "sleep" and p.command == ["sleep", "300"]
    assert p.container == ContainerRef(
        runtime="docker", id="4c0a1b7d4ad395694bee0c2848084b95681f651f2f3f57b9ee119f87a0d4a7b3",
        name="seat-resident")
    assert p.container.short_id == "4c0a1b7d4ad3"


def test_mapping_is_cached_per_pid_and_start_time(sleeper, tmp_path):
    root = tmp_path / "proc"
    (root / str(sleeper.pid) / "fd").mkdir(parents=True)
    os.symlink("/dev/nvidia-uvm", root / str(sleeper.pid) / "fd" / "7")
    calls = []
    mapper = ProcessMapper(root, container_namer=lambda ref: calls.append(ref) or "x")
    (root / str(sleeper.pid) / "cgroup").write_text(
        "0::/system.slice/docker-" + "ab" * 32 + ".scope\n")
    first = mapper.map(sleeper.pid)
    (root / str(sleeper.pid) / "cgroup").write_text("0::/user.slice\n")  # not re-read
    assert mapper.map(sleeper.pid) is first and len(calls) == 1
    mapper.forget_except(set())
    assert mapper.map(sleeper.pid)["container"] is None


# ---------------------------------------------------------------------------- cgroup parsing

ID = "0123456789abcdef" * 4


@pytest.mark.parametrize(("text", "runtime", "pod"), [
    # cgroup v2, docker with the systemd cgroup driver
    (f"0::/system.slice/docker-{ID}.scope\n", "docker", None),
    # cgroup v2, docker with the cgroupfs driver
    (f"0::/docker/{ID}\n", "docker", None),
    # cgroup v2, Kubernetes (systemd driver) + containerd; the pod UID's dashes are underscores
    (("0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod12345678_1234_1234_1234"
      f"_123456789abc.slice/cri-containerd-{ID}.scope\n"), "containerd",
     "12345678-1234-1234-1234-123456789abc"),
    # cgroup v2, Kubernetes + CRI-O
    (("0::/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod0b7632a2_a56e_4278"
      f"_987a_22de18008dbe.slice/crio-{ID}.scope\n"), "cri-o",
     "0b7632a2-a56e-4278-987a-22de18008dbe"),
    # cgroup v1, Kubernetes with the cgroupfs driver: the id follows the pod directory
    ((f"12:pids:/kubepods/burstable/pod12345678-1234-1234-1234-123456789abc/{ID}\n"
      f"11:memory:/kubepods/burstable/pod12345678-1234-1234-1234-123456789abc/{ID}\n"),
     "kubepods", "12345678-1234-1234-1234-123456789abc"),
    # podman (cgroup v2)
    (f"0::/machine.slice/libpod-{ID}.scope/container\n", "podman", None),
    # docker in docker: the innermost container wins
    (f"0::/docker/{'f' * 64}/docker/{ID}\n", "docker", None),
])
def test_parse_cgroup_formats(text, runtime, pod):
    ref = parse_cgroup(text)
    assert ref is not None and ref.id == ID and ref.runtime == runtime and ref.pod_uid == pod


def test_parse_real_v1_docker_cgroup_text():
    ref = parse_cgroup((DATA / "cgroup_v1_docker_cgroupfs.txt").read_text())
    assert ref == ContainerRef(
        runtime="docker", id="4c0a1b7d4ad395694bee0c2848084b95681f651f2f3f57b9ee119f87a0d4a7b3")


@pytest.mark.parametrize("text", [
    (DATA / "cgroup_v1_host_process.txt").read_text(),  # real: a 32-hex path, not a container
    "0::/user.slice/user-1000.slice/session-3.scope\n",
    "0::/init.scope\n",
    "0::/system.slice/containerd.service\n",  # the container engine itself
    "",
])
def test_parse_cgroup_host_processes(text):
    assert parse_cgroup(text) is None


# A real container under a real dockerd, read through the host's /proc.

@pytest.fixture(scope="module")
def real_container():
    dockerd, busybox = shutil.which("dockerd"), shutil.which("busybox")
    if os.geteuid() != 0 or not dockerd or not busybox or not shutil.which("docker"):
        pytest.skip("needs root, dockerd, docker and busybox (apt-get install docker.io "
                    "busybox-static)")
    d = Path(tempfile.mkdtemp(prefix="gpu-dockerd-"))
    sock = f"unix://{d}/docker.sock"
    log_file = open(d / "log", "wb")  # noqa: SIM115 - closed below
    daemon = subprocess.Popen(
        [dockerd, "--host", sock, "--data-root", str(d / "root"), "--exec-root", str(d / "exec"),
         "--pidfile", str(d / "pid"), "--bridge=none", "--iptables=false", "--ip-masq=false"],
        stdout=log_file, stderr=subprocess.STDOUT)
    docker = ["docker", "-H", sock]
    try:
        deadline = time.monotonic() + 30
        while subprocess.run([*docker, "info"], capture_output=True, check=False).returncode:
            if time.monotonic() > deadline or daemon.poll() is not None:
                pytest.skip(f"dockerd did not start: {(d / 'log').read_text()[-500:]}")
            time.sleep(0.2)
        rootfs = d / "rootfs" / "bin"
        rootfs.mkdir(parents=True)
        shutil.copy(busybox, rootfs / "busybox")
        for tool in ("sh", "sleep"):
            os.symlink("busybox", rootfs / tool)
        tar = subprocess.Popen(["tar", "-C", str(d / "rootfs"), "-c", "."],
                               stdout=subprocess.PIPE)
        subprocess.run([*docker, "import", "-", "local/gpu-test:1"], stdin=tar.stdout,
                       check=True, capture_output=True)
        tar.wait()
        cid = subprocess.run([*docker, "run", "-d", "--network", "none", "--name",
                              "gpu-test-engine", "local/gpu-test:1", "sleep", "600"],
                             check=True, capture_output=True, text=True).stdout.strip()
        pid = int(subprocess.run([*docker, "inspect", "-f", "{{.State.Pid}}", cid], check=True,
                                 capture_output=True, text=True).stdout)
        yield {"sock": sock, "id": cid, "pid": pid}
        subprocess.run([*docker, "rm", "-f", cid], capture_output=True, check=False)
    finally:
        daemon.terminate()
        try:
            daemon.wait(20)
        except subprocess.TimeoutExpired:
            daemon.kill()
            daemon.wait()
        log_file.close()
        shutil.rmtree(d, ignore_errors=True)


def test_real_container_process_maps_to_its_container_id_and_name(real_container):
    namer = DockerNamer(real_container["sock"])
    # No GPU here, so the /dev/nvidia* check is off; everything else is read for real.
    mapper = ProcessMapper("/proc", container_namer=namer, require_gpu_fd=False)
    fields = mapper.map(real_container["pid"])
    namer.close()
    assert fields["mapped"] and fields["name"] == "sleep"
    assert fields["container"].id == real_container["id"]
    assert fields["container"].runtime == "docker"
    assert fields["container"].name == "gpu-test-engine"


def test_docker_namer_engine_down_gives_no_name_quickly(tmp_path):
    namer = DockerNamer(f"unix://{tmp_path}/nothing.sock")
    ref = ContainerRef(runtime="docker", id=ID)
    assert namer(ref) is None
    assert namer(ref) is None  # backed off: no second connection attempt
    assert namer(ContainerRef(runtime="containerd", id=ID)) is None  # not a docker id


# ---------------------------------------------------------------------------- seat matching

def test_seat_cards_matched_by_uuid_and_index():
    snap = snap_of(NvmlDouble(h200_pair()), seat=[UUID1.upper(), "0", "GPU-not-here", "7"])
    assert [(c.index, c.serves_seat, c.seat_match) for c in snap.cards] == [
        (0, True, "0"), (1, True, UUID1.upper())]
    assert snap.unmatched_seat_gpus == ["GPU-not-here", "7"]
    assert [c.uuid for c in snap.seat_cards] == [UUID0, UUID1]


def test_seat_match_by_uuid_follows_the_card_when_indices_change():
    cards = h200_pair()
    snap = snap_of(NvmlDouble(list(reversed(cards))), seat=[UUID0])
    (seat,) = snap.seat_cards
    assert seat.uuid == UUID0 and seat.index == 1
    assert snap.card(UUID0) is seat and snap.card("00000000:18:00.0") is seat
    assert snap.card(UUID1).serves_seat is False


def test_match_seat_rules():
    assert match_seat("0", 0, None, None) and not match_seat("1", 0, UUID0, None)
    assert match_seat(UUID0.lower(), 3, UUID0, None)
    assert match_seat("0000:18:00.0", 5, None, "00000000:18:00.0")
    assert not match_seat("GPU-other", 0, UUID0, "00000000:18:00.0")
    assert not match_seat("0", None, UUID0, None)


def test_make_source_uses_the_profile_gpus(monkeypatch):
    double = NvmlDouble(h200_pair())
    monkeypatch.setattr(nvml_mod, "module_factory", lambda: double)
    source = make_source(load_profile(environ={}))  # embedded default: node.gpus = ["0", "1"]
    snap = source.read()
    source.close()
    assert [c.seat_match for c in snap.cards] == ["0", "1"]


# ---------------------------------------------------------------------------- JSON

def test_json_round_trip_of_a_full_snapshot(sleeper, tmp_path):
    pid = absent_pid()
    root = tmp_path / "proc"
    (root / str(sleeper.pid) / "fd").mkdir(parents=True)
    os.symlink("/dev/nvidia1", root / str(sleeper.pid) / "fd" / "9")
    (root / str(sleeper.pid) / "cgroup").write_text(f"0::/system.slice/docker-{ID}.scope\n")
    cards = h200_pair(processes=[FakeProcess(pid, GIB), FakeProcess(sleeper.pid, 2 * GIB)])
    cards.append(FakeCard(uuid="GPU-mig", pci_bus_id="00000000:3B:00.0", mig_mode=True,
                          mig=[FakeMig("MIG-1", "3g", 1, 0, 10 * GIB, 0, GIB)]))
    cards.append(FakeCard(uuid="GPU-lost", pci_bus_id="00000000:4C:00.0", lost=True))
    cards[1].unsupported |= {"nvmlDeviceGetMemoryInfo_v2", "nvmlDeviceGetPowerUsage"}
    cards[0].errors["nvmlDeviceGetTemperature"] = pynvml.NVML_ERROR_UNKNOWN
    snap = snap_of(NvmlDouble(cards), mapper=ProcessMapper(root))
    text = json.dumps(snap.model_dump(mode="json"))
    back = GpuSnapshot.model_validate_json(text)
    assert back == snap
    assert back.sampled_at.tzinfo is not None and back.sampled_at.utcoffset().total_seconds() == 0
    assert back.cards[1].memory.used_label == "used incl. reserved"
    assert back.cards[0].processes[1].container.id == ID
    assert back.cards[3].state == "lost"
    with pytest.raises(ValueError):
        GpuCard.model_validate({**snap.cards[0].model_dump(mode="json"), "bogus": 1})


def test_snapshot_is_frozen():
    snap = snap_of(NvmlDouble(h200_pair()))
    with pytest.raises(ValueError):
        snap.cards[0].name = "x"
    assert snap.sample_duration_s > 0


# ---------------------------------------------------------------------------- the sentinel

def test_na_sentinel_renders_na_and_absorbs_arithmetic():
    na = NaType("not supported")
    assert str(na) == "N/A" and f"{na:>8}" == "N/A" and not na
    assert is_na(na + 1) and is_na(2 * na) and is_na(na - na) and is_na(10 / na)
    assert na == NA and na != 0 and math.isnan(float(na))
    assert nvml_mod.na_to_none(na) is None and nvml_mod.na_to_none(0) == 0


def test_gateway_returns_na_for_not_supported_and_raises_typed_errors():
    cards = h200_pair()
    cards[0].unsupported.add("nvmlDeviceGetPowerUsage")
    cards[0].errors["nvmlDeviceGetTemperature"] = pynvml.NVML_ERROR_TIMEOUT
    cards[1].lost = True
    nv = Nvml(NvmlDouble(cards))
    h0 = nv.call("nvmlDeviceGetHandleByIndex", 0)
    h1 = nv.call("nvmlDeviceGetHandleByIndex", 1)
    assert is_na(nv.call("nvmlDeviceGetPowerUsage", h0))
    with pytest.raises(nvml_mod.NvmlCallError) as err:
        nv.call("nvmlDeviceGetTemperature", h0, 0)
    assert err.value.code == pynvml.NVML_ERROR_TIMEOUT
    with pytest.raises(nvml_mod.GpuLost):
        nv.call("nvmlDeviceGetName", h1)
