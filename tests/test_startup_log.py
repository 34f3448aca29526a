"""The engine startup-log parser on recorded vLLM logs of several versions, and property tests."""

from __future__ import annotations

from pathlib import Path

from datetime import UTC, datetime

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from seat_console.core.profile import DEFAULT_FAILURE_PATTERNS, FailurePattern
from seat_console.sources.startup_log import (
    MAX_LINE_CHARS,
    StartupFacts,
    parse_startup_log,
    scan_failures,
)

DATA = Path(__file__).parent / "data" / "vllm_startup"
GIB = 1 << 30


def _read(name: str) -> str:
    return (DATA / name).read_text("utf-8")


@pytest.mark.parametrize("name, block_size, want", [
    # vLLM 0.32 on the CPU (the lab's own engine): one line, CPU form; KV memory from the
    # CPU worker's "Explicitly set (1.0/8.96) GiB".
    ("v0.32-cpu-lab.log", None, dict(device="CPU", kv_cache_tokens=1_048_576,
                                     max_concurrency=2048.0, concurrency_tokens_per_request=512,
                                     available_kv_cache_bytes=1 * GIB)),
    ("v0.2x-gpu-one-line.log", None, dict(device="GPU", kv_cache_tokens=174_643,
                                          max_concurrency=1.33,
                                          concurrency_tokens_per_request=131_072,
                                          available_kv_cache_bytes=None)),
    ("v0.11-tp2-two-line.log", None, dict(device="GPU", kv_cache_tokens=686_320,
                                          max_concurrency=6.86,
                                          concurrency_tokens_per_request=100_000,
                                          available_kv_cache_bytes=int(52.36 * GIB))),
    ("v0.10-v1-available-two-line.log", None, dict(kv_cache_tokens=216_496, max_concurrency=26.43,
                                                   available_kv_cache_bytes=int(26.43 * GIB))),
    ("v0.8-v1-two-line.log", None, dict(kv_cache_tokens=447_088, max_concurrency=13.64,
                                        concurrency_tokens_per_request=32_768,
                                        available_kv_cache_bytes=int(54.62 * GIB))),
    # V0 states blocks: tokens only with the block size (16, V0's CUDA default).
    ("v0.6-gpu-blocks.log", 16, dict(device="GPU", kv_cache_blocks=715, cpu_swap_blocks=1310,
                                     kv_cache_tokens=715 * 16, max_concurrency=5.59,
                                     concurrency_tokens_per_request=2048,
                                     available_kv_cache_bytes=int(2.18 * GIB))),
    ("v0.6-gpu-blocks.log", None, dict(kv_cache_blocks=715, kv_cache_tokens=None)),
    ("v0.7-cuda-blocks.log", None, dict(device="CUDA", kv_cache_blocks=5517,
                                        max_concurrency=2.69,
                                        available_kv_cache_bytes=int(2.36 * GIB))),
    ("v0-negative-kv.log", None, dict(available_kv_cache_bytes=int(-7.83 * GIB),
                                      max_concurrency=0.0, kv_cache_tokens=None)),
])
def test_recorded_logs(name, block_size, want):
    facts = parse_startup_log(_read(name), block_size=block_size)
    for key, value in want.items():
        got = getattr(facts, key)
        if isinstance(value, int) and key == "available_kv_cache_bytes":
            assert got is not None and abs(got - value) <= 1, (key, got, value)
        else:
            assert got == value, (key, got, value)


def test_forms_are_reported():
    assert "v1-one-line" in parse_startup_log(_read("v0.32-cpu-lab.log")).forms
    two = parse_startup_log(_read("v0.8-v1-two-line.log"))
    assert "v1-one-line" not in two.forms and {"v1-kv-size", "v1-concurrency", "v0-rest"} <= set(
        two.forms)
    assert "v0-blocks" in parse_startup_log(_read("v0.6-gpu-blocks.log")).forms
    assert parse_startup_log(_read("v0.32-cpu-lab.log")).complete


def test_nothing_found_is_none_not_zero():
    facts = parse_startup_log("INFO starting\nWARNING something else\n")
    assert facts == StartupFacts(lines=2)
    assert facts.kv_cache_tokens is None and facts.max_concurrency is None and not facts.complete


def test_last_value_wins_after_a_restart_in_the_text():
    text = _read("v0.8-v1-two-line.log") + _read("v0.32-cpu-lab.log")
    facts = parse_startup_log(text)
    assert facts.kv_cache_tokens == 1_048_576 and facts.device == "CPU"


def test_block_size_must_be_positive():
    with pytest.raises(ValueError, match="block_size"):
        parse_startup_log("", block_size=0)


def test_lookalike_lines_do_not_match():
    facts = parse_startup_log(
        "Multiplying the GPU KV cache size by the cp_world_size 2 (pcp 1 * dcp 2).\n"
        "the KV cache size: unknown tokens\n")
    assert facts.kv_cache_tokens is None


def test_default_failure_patterns_on_recorded_logs():
    bad = scan_failures(_read("v1-kv-too-small.log"), DEFAULT_FAILURE_PATTERNS)
    assert [m.name for m in bad] == ["out-of-memory"] and bad[0].line_no == 3
    assert [m.name for m in scan_failures(_read("v0-negative-kv.log"),
                                          DEFAULT_FAILURE_PATTERNS)] == []  # V0 wording: no '-'
    for ok in ("v0.32-cpu-lab.log", "v0.2x-gpu-one-line.log", "v0.8-v1-two-line.log",
               "v0.6-gpu-blocks.log", "v0.7-cuda-blocks.log"):
        assert scan_failures(_read(ok), DEFAULT_FAILURE_PATTERNS) == (), ok
    lines = ["WARNING found zeros in PLE weights for layer 3",
             "INFO Falling back to CPU weight offload for 12 layers",
             "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB"]
    assert [m.name for m in scan_failures("\n".join(lines), DEFAULT_FAILURE_PATTERNS)] == [
        "ple-zeros", "weight-offload-fallback", "out-of-memory"]


def test_profile_pattern_is_re2_linear_on_a_pathological_line():
    # (a+)+$ is catastrophic for a backtracking engine on "aaaa…!"; RE2 answers at once.
    p = FailurePattern(name="x", pattern=r"(a+)+$")
    assert scan_failures("a" * 10_000 + "!", [p]) == ()
    assert len(scan_failures("a" * 10_000, [p])) == 1


NUM = st.floats(min_value=0, max_value=1e6, allow_nan=False).map(lambda x: f"{x:.2f}")


@settings(max_examples=200, deadline=None)
@given(tokens=st.integers(min_value=0, max_value=10**12), length=st.integers(1, 2**32),
       conc=NUM, gib=NUM, dev=st.sampled_from(["GPU", "CPU", "XPU", "GPU + host"]),
       one_line=st.booleans(), prefix=st.text(max_size=40).filter(lambda s: "\n" not in s
                                                                  and "\r" not in s))
def test_property_formatted_lines_round_trip(tokens, length, conc, gib, dev, one_line, prefix):
    """Lines built with vLLM's own format strings parse back to the numbers that made them."""
    size = f"{dev} KV cache size: {tokens:,} tokens"
    cc = f"Maximum concurrency for {length:,} tokens per request: {conc}x"
    body = f"{size}, {cc}" if one_line else f"{size}\n{prefix} {cc}"
    text = f"{prefix} Available KV cache memory: {gib} GiB\n{prefix} {body}\n"
    facts = parse_startup_log(text)
    assert facts.device == dev and facts.kv_cache_tokens == tokens
    assert facts.concurrency_tokens_per_request == length
    assert facts.max_concurrency == float(conc)
    assert facts.available_kv_cache_bytes is not None
    assert abs(facts.available_kv_cache_bytes - float(gib) * GIB) < 1e-3 * GIB + 1


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=3000))
def test_property_any_text_never_raises_and_unknown_is_none(text):
    facts = parse_startup_log(text)
    assert isinstance(facts, StartupFacts)
    if "KV cache size" not in text and " blocks: " not in text:
        assert facts.kv_cache_tokens is None and facts.kv_cache_blocks is None
    if "Maximum concurrency" not in text:
        assert facts.max_concurrency is None
    scan_failures(text, DEFAULT_FAILURE_PATTERNS)


def test_long_line_is_bounded():
    line = "x" * (MAX_LINE_CHARS + 10) + " GPU KV cache size: 5 tokens"
    assert parse_startup_log(line).kv_cache_tokens is None  # past the scanned prefix
    assert parse_startup_log(line[-40:]).kv_cache_tokens == 5


# -- the seat's startup facts: final once their window has closed (issue 33) ---------------------
class _Container:
    """A container stand-in whose log never gives every startup fact; counts the reads."""

    id = "c" * 64

    def __init__(self, started: datetime) -> None:
        self.attrs = {"State": {"StartedAt": started.isoformat()}}
        self.reads = 0

    def logs(self, **kw) -> bytes:  # noqa: ANN003
        self.reads += 1
        return b"INFO starting the engine\n"


def test_incomplete_startup_facts_are_read_again_only_while_their_window_is_open() -> None:
    from datetime import timedelta

    from seat_console.sources.seat import LOG_SETTLE_S, STARTUP_WINDOW_S, SeatSource

    src = SeatSource("unix:///nonexistent.sock", "seat-resident", None)
    now = datetime.now(UTC)
    young = _Container(now - timedelta(seconds=60))
    for _ in range(3):
        assert not src._startup(young, now - timedelta(seconds=60)).complete
    assert young.reads == 3                     # lines may still come: read every time
    old_start = now - timedelta(seconds=STARTUP_WINDOW_S + LOG_SETTLE_S + 60)
    old = _Container(old_start)
    for _ in range(3):
        assert not src._startup(old, old_start).complete
    assert old.reads == 1                       # the window closed: the facts are final
