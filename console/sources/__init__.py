"""Sources: the modules that read the node (NVML, timers, Alertmanager, docker, the engine,
checkpoint files), and their shared shapes.

Every source returns either a frozen pydantic model of what it read, or an
:class:`~seat_console.sources.base.Unavailable` carrying why it could not read; a source never
raises into the UI and never reports an unknown as 0. The shared shapes live in
:mod:`seat_console.sources.base` and are re-exported here lazily (PEP 562 ``__getattr__``), so
importing a pydantic-free module of this package — the NVML gateway,
:mod:`seat_console.sources.nvml`, which the first frame uses before pydantic is loaded
(:mod:`seat_console.tui.first_frame`) — does not import pydantic.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

_BASE_NAMES = ("BrokenSource", "Frozen", "Source", "Unavailable", "read_once", "utcnow")

if TYPE_CHECKING:
    from seat_console.sources.base import (BrokenSource, Frozen, Source, Unavailable,
                                           read_once, utcnow)


def __getattr__(name: str) -> Any:
    """The shared shapes of :mod:`seat_console.sources.base`, imported on first use."""
    if name in _BASE_NAMES:
        from seat_console.sources import base

        return getattr(base, name)
    raise AttributeError(f"module 'seat_console.sources' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted([*globals(), *_BASE_NAMES])


__all__ = list(_BASE_NAMES)
