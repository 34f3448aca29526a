"""Property tests: ``/proc/PID/cgroup`` text, NVML values and profile GPU entries (issue #12).

Through the NVML double (``tests/nvml_double.py``, the real ``pynvml`` error classes), any
memory figures and process memory values a driver could report. Asserted: the sampler returns a
snapshot (never raises); no memory figure is negative; free and CUDA-visible memory are never
negative; an unknown process memory is ``None``, never 0; ``parse_cgroup`` returns a container
reference or ``None`` in linear time; ``match_seat`` never raises.
"""

from __future__ import annotations

import time

from hypothesis import given
from hypothesis import strategies as st
from nvml_double import FakeCard, FakeProcess, NvmlDouble

from seat_console.sources.gpu import (
    GpuSampler,
    GpuSnapshot,
    ProcessMapper,
    checked_memory,
    parse_cgroup,
)
from seat_console.core.gpu_ids import match_seat
from seat_console.node.nvml import Nvml

HEX = "0123456789abcdef"
cgroup_lines = st.one_of(
    st.text(max_size=80),
    st.tuples(st.sampled_from(["0::", "12:memory:", "3:cpu,cpuacct:", ""]),
              st.lists(st.sampled_from(["/docker/", "docker-", ".scope", "/kubepods/", "pod",
                                        "crio-", "libpod-", "/", "_", "-", HEX * 4, "ab" * 32,
                                        "12345678-1234-1234-1234-123456789abc"]),
                       max_size=8).map("".join)).map("".join))


@given(st.lists(cgroup_lines, max_size=12).map("\n".join))
def test_parse_cgroup_is_a_ref_or_none(text):
    ref = parse_cgroup(text)
    if ref is not None:
        assert len(ref.id) == 64 and all(c in HEX for c in ref.id)


def test_parse_cgroup_long_line_is_linear():
    t0 = time.perf_counter()
    parse_cgroup("0::" + "/docker-" * 100_000 + "/kubepods" + "pod" * 50_000)
    assert time.perf_counter() - t0 < 1.0


byte_values = st.one_of(st.integers(-2**70, 2**70), st.sampled_from(
    [0, 2**64 - 1, 150_754_820_096, 644_939_776, -1]), st.none(), st.booleans(),
    st.floats(allow_nan=True))


@given(st.fixed_dictionaries({"total": byte_values, "reserved": byte_values,
                              "used": byte_values, "free": byte_values}))
def test_checked_memory_never_negative_never_above_total(m):
    out, problem = checked_memory(m)
    for v in out.values():
        assert v is None or (isinstance(v, int) and v >= 0)
    if out["total"] is not None:
        for k in ("reserved", "used", "free"):
            assert out[k] is None or out[k] <= out["total"]
    assert (problem is None) or problem.startswith("NVML memory reading inconsistent")


mem = st.integers(0, 2**64 - 1)


@given(mem, mem, mem, st.lists(st.one_of(st.none(), mem), max_size=3),
       st.sampled_from([("v3",), ("v2",), ("v1",)]))
def test_sampler_over_any_nvml_values(total, reserved, used, proc_mem, versions):
    procs = [FakeProcess(4_000_000 + i, v) for i, v in enumerate(proc_mem)]
    card = FakeCard(uuid="GPU-11111111-2222-3333-4444-555555555555", total=total,
                    reserved=reserved, used=used, processes=procs)
    double = NvmlDouble([card], process_versions=versions)
    snap = GpuSampler(Nvml(double), ["0"], ProcessMapper("/nonexistent-proc")).sample()
    assert isinstance(snap, GpuSnapshot)
    c = snap.cards[0]
    m = c.memory
    for v in (m.total_bytes, m.reserved_bytes, m.used_bytes, m.free_bytes, m.cuda_visible_bytes):
        assert v is None or v >= 0
    for p in c.processes:
        assert p.used_memory_bytes is None or 0 <= p.used_memory_bytes < 2**64 - 1
    if procs and all(p.used_memory_bytes is None for p in c.processes):
        assert c.process_memory_bytes is None


entries = st.one_of(st.text(max_size=20), st.sampled_from(
    ["0", "1", "GPU-x", "MIG-x", "2a:00.0", "0000:2a:00.0", "zz:zz.z", ":", "::::", "0x1f",
     "99999999999999999999", "٣"]))


@given(entries, st.one_of(st.none(), st.integers(0, 8)),
       st.one_of(st.none(), st.text(max_size=20)), st.one_of(st.none(), st.text(max_size=20)))
def test_match_seat_never_raises(entry, index, uuid, bus):
    assert isinstance(match_seat(entry, index, uuid, bus), bool)


def test_no_mig_instance_id_is_none_not_0xffffffff():
    """NVML reports "no MIG instance" as 0xFFFFFFFF in gpuInstanceId / computeInstanceId: a
    process on a plain card has no instance (None), never instance 4,294,967,295."""
    card = FakeCard(uuid="GPU-11111111-2222-3333-4444-555555555555",
                    processes=[FakeProcess(4_000_001, 1 << 30)])
    snap = GpuSampler(Nvml(NvmlDouble([card])), ["0"], ProcessMapper("/nonexistent")).sample()
    (p,) = snap.cards[0].processes
    assert p.gpu_instance_id is None and p.compute_instance_id is None
    card.processes = [FakeProcess(4_000_001, 1 << 30, gpu_instance_id=1, compute_instance_id=0)]
    snap = GpuSampler(Nvml(NvmlDouble([card])), ["0"], ProcessMapper("/nonexistent")).sample()
    (p,) = snap.cards[0].processes
    assert (p.gpu_instance_id, p.compute_instance_id) == (1, 0)
