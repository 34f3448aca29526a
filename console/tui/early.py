"""Start the GPU panel's first reading while the TUI is still importing (its first Textual
frame sooner; the pre-Textual first frame is :mod:`seat_console.tui.first_frame`).

The TUI's first Textual frame waits for two things: the imports (Textual, the widgets: ~0.2 s) and the
GPU panel's first reading (``pynvml`` import, ``nvmlInit`` — the driver's start-up, for which
the ctypes call releases the GIL — and one sample). Before this module the reading was started
by :class:`seat_console.tui.app.SeatConsoleApp` after every import; now ``seat-console`` starts it
right after the profile is loaded (:func:`prestart`, called by :mod:`seat_console.cli` on the
TUI path only), in a daemon thread, so the driver's start-up overlaps the imports.

The thread builds the node context the app will use
(:class:`seat_console.node.context.NodeContext`, whose NVML gateway the GPU source reads
through) and the GPU source with ``context=`` that context, then takes one reading. The app
takes both (:func:`take_context`, :func:`take`) instead of building its own, so the panels and
the actions still share one context and one NVML gateway. A source or read that failed is built
again by the app the usual way, which reports the failure as it always has.

Only the TUI path uses it (CLI commands and tests build their sources as before), and only the
source of :data:`EAGER_SOURCE` — the one panel drawn in the first Textual frame.
"""

from __future__ import annotations

import concurrent.futures
import importlib
import inspect
import os
import sys
import threading
from typing import Any

EAGER_SOURCE = "seat_console.sources.gpu:make_source"
"""The source factory (``"module:function"``, as in :data:`seat_console.tui.app.PANELS`) whose
first reading is started early."""

_started: dict[str, concurrent.futures.Future] = {}
_contexts: dict[int, Any] = {}
_lock = threading.Lock()


MALLOC_ARENAS = 2
"""glibc malloc arenas the TUI process may use (:func:`limit_malloc_arenas`)."""

M_ARENA_MAX = -8
"""``mallopt`` parameter number of ``M_ARENA_MAX`` (glibc ``malloc.h``)."""


def limit_malloc_arenas(arenas: int = MALLOC_ARENAS) -> bool:
    """Cap glibc's malloc arenas at ``arenas`` (``mallopt(M_ARENA_MAX, arenas)``), before the
    console starts its threads; return whether the cap was set.

    glibc gives each new thread its own arena, up to 8 per core (mallopt(3)); the console's
    ~12 mostly idle threads (one per source, the input thread) each kept a partly used heap:
    on the 16-core H200 machine the idle console's RSS was 109.7 MiB, 98.7 MiB with
    ``MALLOC_ARENA_MAX=2`` (docs/benchmarks.md). Its threads rarely allocate at once, so the
    shared arenas cost no measurable time. Does nothing when ``MALLOC_ARENA_MAX`` is set in the
    environment (the user's choice wins), off Linux, or without glibc's ``mallopt``."""
    if os.environ.get("MALLOC_ARENA_MAX") or not sys.platform.startswith("linux"):
        return False
    try:
        import ctypes

        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError, ImportError):
        return False
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    mallopt.restype = ctypes.c_int
    return bool(mallopt(M_ARENA_MAX, int(arenas)))


def prestart(loaded: Any, source: str = EAGER_SOURCE, nvml: Any | None = None
             ) -> concurrent.futures.Future:
    """Build the node context and ``source``'s source for the loaded profile and take the
    source's first reading, in a daemon thread; return the future of ``(source, reading)``.

    ``nvml``: an :class:`~seat_console.node.nvml.Nvml` gateway already opened (the first
    frame's, :func:`seat_console.tui.first_frame.draw_before_profile`), which the context adopts so
    the process initialises NVML once. The future's exception is whatever the import, the
    factory or the read raised. The context is made at once (it connects to nothing until
    used; :func:`take_context`). A second call for the same factory returns the first future."""
    from seat_console.node.context import NodeContext

    with _lock:
        fut = _started.get(source)
        if fut is not None:
            return fut
        fut = _started[source] = concurrent.futures.Future()
        fut.loaded = loaded  # type: ignore[attr-defined] - take() hands it only to this profile
        ctx = _contexts.setdefault(id(loaded), NodeContext.from_profile(loaded))
        if nvml is not None:
            ctx.adopt_nvml(nvml)

    def run() -> None:
        if not fut.set_running_or_notify_cancel():
            return
        try:
            module, _, func = source.partition(":")
            factory = getattr(importlib.import_module(module), func)
            kw = {"context": ctx} if "context" in inspect.signature(factory).parameters else {}
            src = factory(loaded, **kw)
            fut.set_result((src, src.read()))
        except BaseException as exc:  # noqa: BLE001 - handed to the app, which rebuilds
            fut.set_exception(exc)

    threading.Thread(target=run, name="seat-console:prestart", daemon=True).start()
    return fut


def take(source: str, loaded: Any) -> concurrent.futures.Future | None:
    """The future :func:`prestart` started for ``source`` with this same ``loaded`` profile
    (removed: it is taken once), or ``None``."""
    with _lock:
        fut = _started.get(source)
        if fut is None or getattr(fut, "loaded", None) is not loaded:
            return None
        return _started.pop(source)


def take_context(loaded: Any) -> Any | None:
    """The :class:`~seat_console.node.context.NodeContext` :func:`prestart` made for this
    ``loaded`` profile (removed: taken once), or ``None`` (then the app makes its own)."""
    with _lock:
        return _contexts.pop(id(loaded), None) if _belongs(loaded) else None


def _belongs(loaded: Any) -> bool:
    ctx = _contexts.get(id(loaded))
    return ctx is not None and getattr(ctx, "loaded", None) is loaded


__all__ = ["EAGER_SOURCE", "MALLOC_ARENAS", "limit_malloc_arenas", "prestart", "take", "take_context"]
