"""The first frame drawn before pydantic and Textual load (:mod:`seat_console.tui.first_frame`):
the header read from the profile file the TUI will load, each card's memory through the one
NVML gateway (adopted by the app's node context), the frame taken down when the profile turns
out invalid, and no pydantic/Textual import before it. In a pty: the frame's lines come before
Textual's first byte."""

from __future__ import annotations

import io
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import seat_console.node.nvml as nvml_mod
from seat_console.tui import early, first_frame
from seat_console.core.profile import load_profile
from seat_console.node.nvml import Nvml

sys.path.insert(0, str(Path(__file__).parent))
import pty_helpers
from nvml_double import H200_RESERVED, H200_TOTAL, FakeCard, NvmlDouble, h200_pair  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
ANSI = re.compile(r"\x1b\[[0-9;?<>=]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[=>]")
GiB = 1 << 30


class Tty(io.StringIO):
    """A terminal-like output: what the frame wrote, ``isatty`` true."""

    def isatty(self) -> bool:
        return True


def plain(text: str) -> str:
    return ANSI.sub("", text).replace("\r\n", "\n")


@pytest.fixture
def tty_env(monkeypatch, tmp_path):
    monkeypatch.delenv("SEAT_CONSOLE_PROFILE", raising=False)
    monkeypatch.delenv("SEAT_CONSOLE_FIRST_FRAME", raising=False)
    monkeypatch.delenv("NO_COLOR", raising=False)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    monkeypatch.setenv("TERM", "xterm-256color")
    monkeypatch.setenv("COLUMNS", "100")
    monkeypatch.setattr(sys, "stdin", Tty())
    monkeypatch.setattr(first_frame, "_drawn", False)
    yield
    early._started.clear()
    early._contexts.clear()


def test_the_frame_shows_the_header_and_each_cards_memory(tty_env):
    cards = h200_pair()
    cards[0].used = 100 * GiB
    cards[1].util_gpu = 37
    out = Tty()
    gateway = Nvml(module=NvmlDouble(cards))
    got = first_frame.draw_before_profile(None, out=out, nvml=gateway)
    assert got is gateway
    text = out.getvalue()
    assert text.startswith(first_frame.ENTER)           # alternate screen, cleared
    lines = plain(text).splitlines()
    assert lines[0].startswith("node seat-node · TP 2 · gpu_memory_utilization 0.90")
    assert "checking the profile" in lines[0]            # not validated yet, and it says so
    visible = (H200_TOTAL - H200_RESERVED) / GiB
    assert re.match(rf"GPU 0 H200 +used +100\.00/{visible:.2f} GiB █+░+ +0 %$", lines[1]), lines
    assert re.match(rf"GPU 1 H200 +used +0\.00/{visible:.2f} GiB ░{{12}} +37 %$", lines[2]), lines
    assert lines[3] == "starting the console…"


def test_a_lost_card_and_a_failed_call_stay_on_their_own_line(tty_env):
    cards = h200_pair()
    cards[0].lost = True
    cards[1].errors = {"nvmlDeviceGetUtilizationRates": 999}
    lines = plain(first_frame.render(("n", "2", "0.90"),
                                     first_frame.nvml_lines(Nvml(module=NvmlDouble(cards))),
                                     width=120, no_color=True)).splitlines()
    assert "LOST" in lines[1] and lines[1].startswith("GPU 0 ")
    assert lines[2].startswith("GPU 1 H200") and "ERROR" in lines[2]


def test_nvml_unavailable_is_one_line_with_its_reason(tty_env):
    import pynvml

    double = NvmlDouble(h200_pair(), init_error=pynvml.NVML_ERROR_DRIVER_NOT_LOADED)
    text = plain(first_frame.render(("n", "2", "0.90"),
                                    first_frame.nvml_lines(Nvml(module=double)),
                                    width=200, no_color=True))
    gpu = text.splitlines()[1]
    assert gpu.startswith("GPU  NVML unavailable (no-driver):"), gpu
    assert "0.00" not in text                          # unknown is never shown as 0


def test_a_hung_nvml_does_not_hold_the_frame(tty_env):
    class Hung(NvmlDouble):
        def nvmlInit(self) -> None:
            time.sleep(5)

    out = Tty()
    t0 = time.monotonic()
    first_frame.draw_before_profile(None, out=out, wait_s=0.2,
                                    nvml=Nvml(module=Hung(h200_pair())))
    assert time.monotonic() - t0 < 3                    # drawn without the cards (bound)
    assert "reading the GPUs… (NVML has not answered after 0.2 s)" in plain(out.getvalue())


def test_long_lines_are_cut_not_wrapped_and_no_color_has_no_colour(tty_env):
    cards = [FakeCard(uuid="GPU-x", name="NVIDIA " + "H" * 300)]
    text = first_frame.render(("n" * 200, "2", "0.90"),
                              first_frame.nvml_lines(Nvml(module=NvmlDouble(cards))),
                              width=60, no_color=True)
    lines = plain(text).splitlines()
    assert len(lines) == 3 and all(len(line) <= 60 for line in lines), lines
    assert lines[0].endswith("…") and lines[1].endswith("…")
    assert not re.search(r"\x1b\[[0-9;]*(3[0-9]|4[0-9]|9[0-7])m", text)   # no colour SGR


def test_not_drawn_without_a_terminal_or_when_turned_off(tty_env, monkeypatch):
    gateway = Nvml(module=NvmlDouble(h200_pair()))
    assert first_frame.draw_before_profile(None, out=io.StringIO(), nvml=gateway) is None
    monkeypatch.setenv("SEAT_CONSOLE_FIRST_FRAME", "0")
    out = Tty()
    assert first_frame.draw_before_profile(None, out=out, nvml=gateway) is None
    assert out.getvalue() == ""
    monkeypatch.setenv("SEAT_CONSOLE_FIRST_FRAME", "1")
    monkeypatch.setenv("TERM", "dumb")
    assert first_frame.draw_before_profile(None, out=out, nvml=gateway) is None


def test_leave_undoes_the_frame_only_once_and_only_if_drawn(tty_env):
    out = Tty()
    first_frame.leave(out)
    assert out.getvalue() == ""                        # nothing drawn: nothing to undo
    first_frame.draw_before_profile(None, out=Tty(), nvml=Nvml(module=NvmlDouble(h200_pair())))
    first_frame.leave(out)
    first_frame.leave(out)
    # once: the modes Textual may have turned on off, then cursor shown, alternate screen off
    assert out.getvalue() == first_frame.RESTORE and out.getvalue().endswith(first_frame.LEAVE)


def test_the_apps_context_adopts_the_frames_gateway(tty_env, monkeypatch):
    double = NvmlDouble(h200_pair())
    monkeypatch.setattr(nvml_mod, "module_factory", lambda: double)
    gateway = first_frame.draw_before_profile(None, out=Tty())
    loaded = load_profile(None)
    _, reading = early.prestart(loaded, nvml=gateway).result(timeout=10)
    ctx = early.take_context(loaded)
    assert ctx.nvml is gateway
    assert len(reading.cards) == 2 and double.calls["nvmlInit"] == 1   # NVML started once


def test_identity_comes_from_the_profile_the_tui_loads(tmp_path, monkeypatch):
    monkeypatch.delenv("SEAT_CONSOLE_PROFILE", raising=False)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "none"))
    p = tmp_path / "p.toml"
    p.write_text('[node]\nname = "gpu-17"\n[seat]\ntensor_parallel_size = 4\n'
                 'gpu_memory_utilization = 0.85\n')
    assert first_frame.raw_identity(str(p)) == ("gpu-17", "4", "0.85")
    monkeypatch.setenv("SEAT_CONSOLE_PROFILE", str(p))
    assert first_frame.raw_identity(None) == ("gpu-17", "4", "0.85")
    p.write_text('[node]\nname = 7\n[seat]\ntensor_parallel_size = true\n'
                 'gpu_memory_utilization = "high"\n')
    assert first_frame.raw_identity(str(p)) == ("?", "?", "?")   # wrong types: unknown
    assert first_frame.raw_identity(str(tmp_path / "missing.toml")) == ("?", "?", "?")


def test_identity_does_not_wait_on_hostile_text(tmp_path):
    p = tmp_path / "p.toml"
    p.write_text('[node]\nname = "n"\n' + "a" + ".a" * 20000 + " = 1\n")   # 0.6 s+ in tomllib
    t0 = time.process_time()
    assert first_frame.raw_identity(str(p), environ={}) == ("?", "?", "?")
    p.write_text('[node]\nname = "n"\nx = ' + "[" * 50000 + "]" * 50000 + "\n")
    assert first_frame.raw_identity(str(p), environ={}) == ("?", "?", "?")
    p.write_text('[node]\nname = "n"\nx = ' + "{a=" * 900 + "1" + "}" * 900 + "\n")
    assert first_frame.raw_identity(str(p), environ={}) == ("?", "?", "?")
    assert time.process_time() - t0 < 5        # liveness bound (the point: not quadratic)


@settings(max_examples=150, deadline=None)
@given(st.one_of(st.text(max_size=400), st.binary(max_size=400).map(
    lambda b: b.decode("latin-1"))))
def test_raw_identity_on_any_file_never_raises_and_unknown_is_never_zero(text):
    import tempfile

    with tempfile.NamedTemporaryFile("w", suffix=".toml", encoding="utf-8",
                                     errors="surrogateescape", delete=False) as f:
        f.write(text)
    try:
        ident = first_frame.raw_identity(f.name, environ={})
    finally:
        os.unlink(f.name)
    assert len(ident) == 3 and all(isinstance(v, str) and v for v in ident)
    assert ident[1] == "?" or ident[1].lstrip("-").isdigit()


def test_cli_imports_neither_pydantic_nor_textual_before_the_frame():
    code = ("import sys; from seat_console import cli; from seat_console.tui import first_frame; "
            "print(sorted({m.split('.')[0] for m in sys.modules} & {'pydantic', 'textual'}))")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                         text=True, timeout=60)
    assert out.stdout.strip() == "[]", out.stdout + out.stderr


def test_in_a_pty_the_frame_comes_before_textual(tmp_path):
    proc, master = pty_helpers.spawn_python(
        ["benchmarks/nvml_double_console.py", "--", "--interval", "1"],
        {"XDG_CONFIG_HOME": str(tmp_path)})
    try:
        buf = pty_helpers.read_until(master, b"GPUs (NVML)")
        assert b"GPUs (NVML)" in buf, buf[-2000:]
        text = buf.decode("utf-8", "replace")
        frame_end = text.index("starting the console…")
        textual_start = text.index("GPUs (NVML)")
        assert frame_end < textual_start
        frame = plain(text[:frame_end])
        assert "node seat-node · TP 2" in frame and re.search(r"GPU 0 H200 +used", frame)
    finally:
        pty_helpers.stop(proc, master)
    assert proc.returncode == 0


def test_in_a_pty_an_invalid_profile_takes_the_frame_down_and_says_why(tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text('[node]\nname = "n1"\n[seat]\ntensor_parallel_size = 0\n')
    proc, master = pty_helpers.spawn_python(
        ["benchmarks/nvml_double_console.py", "--", "--profile", str(bad)],
        {"XDG_CONFIG_HOME": str(tmp_path)})
    try:
        buf = pty_helpers.read_until(master, b"invalid seat profile")
        buf += pty_helpers.drain(proc, master)
    finally:
        pty_helpers.close(proc, master)
    text = buf.decode("utf-8", "replace")
    assert proc.returncode == 1
    assert text.index(first_frame.ENTER) < text.index(first_frame.LEAVE) < text.index(
        "invalid seat profile")                        # the error is printed on the shell's screen


def _start_with_slow_nvml(tmp_path):
    """The console on a pty with the NVML double's ``nvmlInit`` taking 3 s: the first frame
    is up ("reading the GPUs…") well before Textual. Returns ``(proc, master)``."""
    return pty_helpers.spawn_python(
        ["benchmarks/nvml_double_console.py", "--init-s", "3", "--", "--interval", "1"],
        {"XDG_CONFIG_HOME": str(tmp_path)})


def test_in_a_pty_ctrl_z_during_start_up_gives_the_shell_its_screen(tmp_path):
    import signal

    proc, master = _start_with_slow_nvml(tmp_path)
    try:
        buf = pty_helpers.read_until(master, "starting the console…".encode())
        assert first_frame.ENTER.encode() in buf, buf[-2000:]
        os.kill(proc.pid, signal.SIGTSTP)          # as Ctrl-Z sends it
        # The child leads its own session here, so its process group is orphaned and the
        # kernel discards the re-sent SIGTSTP (POSIX): it does not stop, as it would under a
        # shell, and goes straight on to what `fg` does. What is checked: the shell's screen
        # and cursor given back, then the frame's screen taken again, then Textual's screen.
        buf = pty_helpers.read_until(master, b"GPUs (NVML)")
        leave = buf.find(first_frame.LEAVE.encode())
        assert leave >= 0, buf[-2000:]
        assert buf.find(first_frame.ENTER.encode(), leave) > leave
        assert b"GPUs (NVML)" in buf[leave:]
    finally:
        pty_helpers.stop(proc, master)
    assert proc.returncode == 0


def test_in_a_pty_ctrl_c_while_starting_exits_130_without_a_traceback(tmp_path):
    import signal

    proc, master = _start_with_slow_nvml(tmp_path)
    try:
        buf = pty_helpers.read_until(master, "starting the console…".encode())
        os.kill(proc.pid, signal.SIGINT)           # as Ctrl-C sends it before Textual's raw mode
        buf += pty_helpers.drain(proc, master, 120)  # generous: a loaded machine is slow to exit
    finally:
        pty_helpers.close(proc, master)
    assert proc.returncode == 130, buf[-2000:]
    assert b"Traceback" not in buf and buf.rindex(first_frame.LEAVE.encode()) > buf.index(
        first_frame.ENTER.encode())


def test_identity_refuses_a_dotted_key_hidden_behind_a_quoted_equals_sign(tmp_path):
    p = tmp_path / "q.toml"
    p.write_text('[node]\nname = "n"\n"=".' + ".".join(["a"] * 20000) + " = 1\n")   # 4 s, 1.5 GB
    t0 = time.process_time()
    assert first_frame.raw_identity(str(p), environ={}) == ("?", "?", "?")
    assert time.process_time() - t0 < 2                         # liveness bound


@settings(max_examples=100, deadline=None)
@given(st.binary(max_size=300))
def test_raw_identity_on_any_bytes_never_raises(data):
    import tempfile

    with tempfile.NamedTemporaryFile("wb", suffix=".toml", delete=False) as f:
        f.write(b'[node]\nname = "n"\n' + data)
    try:
        ident = first_frame.raw_identity(f.name, environ={})
    finally:
        os.unlink(f.name)
    assert len(ident) == 3 and all(isinstance(v, str) and v for v in ident)


def test_control_characters_in_the_node_name_are_refused_and_never_reach_the_terminal(
        tmp_path):
    from seat_console.core.profile import ProfileError, default_profile_text

    hostile = "seat\x1b]2;PWNED\x07\x1b[2Jnode"
    p = tmp_path / "p.toml"
    p.write_text(default_profile_text().replace('name = "seat-node"',
                                                f'name = "{hostile.encode("unicode_escape").decode()}"'
                                                .replace("\\x1b", "\\u001b")
                                                .replace("\\x07", "\\u0007"), 1))
    with pytest.raises(ProfileError) as e:
        load_profile(str(p))
    assert "node.name" in str(e.value) and "control character" in str(e.value)
    name, _, _ = first_frame.raw_identity(str(p), environ={})
    assert name == "seat\\x1b]2;PWNED\\x07\\x1b[2Jnode"          # shown escaped, never raw
    frame = first_frame.render((name, "2", "0.90"), first_frame.nvml_lines(
        Nvml(module=NvmlDouble(h200_pair()))), width=120, no_color=True)
    assert "\x1b]2;" not in frame and "\x07" not in frame
