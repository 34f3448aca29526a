"""The TUI caps glibc's malloc arenas before it starts its threads (RSS: one heap per idle
thread was ~11 MiB on the 16-core GPU machine). Checked in a fresh interpreter with glibc's own
``malloc_info`` report (one ``<heap nr=…>`` per arena)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

from seat_console.tui.early import MALLOC_ARENAS

PROBE = textwrap.dedent("""
    import ctypes, sys, threading
    if sys.argv[1] == "cap":
        from seat_console.tui.early import limit_malloc_arenas
        assert limit_malloc_arenas()
    libc = ctypes.CDLL(None)
    go, hold = threading.Barrier(7), threading.Event()
    def work():
        blocks = [bytearray(100_000) for _ in range(20)]   # > 512 B: glibc malloc, not pymalloc
        go.wait()
        hold.wait()
    ts = [threading.Thread(target=work) for _ in range(6)]
    for t in ts: t.start()
    go.wait()
    buf, size = ctypes.c_char_p(), ctypes.c_size_t()
    libc.open_memstream.restype = ctypes.c_void_p
    fp = libc.open_memstream(ctypes.byref(buf), ctypes.byref(size))
    libc.malloc_info(0, ctypes.c_void_p(fp))
    libc.fclose(ctypes.c_void_p(fp))
    print(buf.value.decode().count("<heap nr="))
    hold.set()
    for t in ts: t.join()
""")


def _heaps(mode: str) -> int:
    env = {k: v for k, v in os.environ.items() if k != "MALLOC_ARENA_MAX"}
    out = subprocess.run([sys.executable, "-c", PROBE, mode], capture_output=True, text=True,
                         env=env, timeout=60, check=True).stdout
    return int(out.strip())


@pytest.mark.skipif(not sys.platform.startswith("linux") or os.confstr(
    "CS_GNU_LIBC_VERSION") is None, reason="glibc malloc only")
def test_the_cap_bounds_the_arenas_of_many_threads():
    assert _heaps("nocap") > MALLOC_ARENAS   # six threads get heaps of their own
    assert _heaps("cap") <= MALLOC_ARENAS


def test_a_users_malloc_arena_max_wins(monkeypatch):
    from seat_console.tui.early import limit_malloc_arenas

    monkeypatch.setenv("MALLOC_ARENA_MAX", "8")
    assert limit_malloc_arenas() is False
