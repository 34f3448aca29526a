"""The TUI path starts the GPU panel's first reading before the app is imported
(:mod:`seat_console.tui.early`), and the app uses that reading, source and node context instead of
building its own (one NVML init, one context shared by panels and actions); a failed early
start is built again the usual way."""

from __future__ import annotations

import concurrent.futures
import sys
from pathlib import Path

import pytest

import seat_console.node.nvml as nvml_mod
from seat_console.tui import early
from seat_console.tui.app import SeatConsoleApp
from seat_console.tui.panels import PanelSpec
from seat_console.core.profile import load_profile
from seat_console.sources.gpu import GpuSnapshot
from seat_console.widgets.gpu import GpuPanel

sys.path.insert(0, str(Path(__file__).parent))
from nvml_double import NvmlDouble, h200_pair  # noqa: E402
from test_app import wait_for  # noqa: E402

GPU_ONLY = [PanelSpec(early.EAGER_SOURCE, GpuPanel, eager=True)]


@pytest.fixture
def double(monkeypatch):
    monkeypatch.delenv("SEAT_CONSOLE_PROFILE", raising=False)
    monkeypatch.setenv("XDG_CONFIG_HOME", "/nonexistent-for-tests")
    d = NvmlDouble(h200_pair())
    monkeypatch.setattr(nvml_mod, "module_factory", lambda: d)
    yield d
    early._started.clear()
    early._contexts.clear()


async def test_the_app_takes_the_early_reading_source_and_context(double):
    loaded = load_profile(None)
    fut = early.prestart(loaded)
    source, reading = fut.result(timeout=10)
    assert isinstance(reading, GpuSnapshot) and double.calls["nvmlInit"] == 1
    ctx = early._contexts[id(loaded)]
    app = SeatConsoleApp(loaded, panels=GPU_ONLY, watch_terminal=False)
    assert app.node is ctx                       # one context for the panels and the actions
    assert early.take(early.EAGER_SOURCE, loaded) is None   # taken once
    async with app.run_test(size=(120, 40)) as pilot:
        st = app.states["gpus"]
        await wait_for(pilot, lambda: st.polls >= 1, "first reading handled")
        assert st.source is source and st.reading is reading
        assert source.sampler.nvml is ctx.nvml   # the GPU source reads through the context
    assert double.calls["nvmlInit"] == 1         # the app did not initialise NVML again


async def test_an_early_start_for_another_profile_is_not_taken(double):
    early.prestart(load_profile(None)).result(timeout=10)
    other = load_profile(None)
    app = SeatConsoleApp(other, panels=GPU_ONLY, watch_terminal=False)
    assert app.node is not None and early._contexts   # its own context; the early one unused
    async with app.run_test(size=(120, 40)) as pilot:
        st = app.states["gpus"]
        await wait_for(pilot, lambda: st.polls >= 1, "first reading handled")
        assert isinstance(st.reading, GpuSnapshot)


async def test_a_failed_early_start_is_built_again_the_usual_way(double):
    loaded = load_profile(None)
    failed: concurrent.futures.Future = concurrent.futures.Future()
    failed.loaded = loaded  # type: ignore[attr-defined]
    failed.set_exception(RuntimeError("early import broke"))
    early._started[early.EAGER_SOURCE] = failed
    app = SeatConsoleApp(loaded, panels=GPU_ONLY, watch_terminal=False)
    async with app.run_test(size=(120, 40)) as pilot:
        st = app.states["gpus"]
        await wait_for(pilot, lambda: st.polls >= 1, "first reading handled")
        assert isinstance(st.reading, GpuSnapshot)   # rebuilt: a real reading, not the error
