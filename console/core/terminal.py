"""Whether a stream is a terminal: the one check the first frame, the TUI's no-terminal refusal
and the fleet screen's share. No I/O beyond ``isatty``; no pydantic, no Textual (the first frame
imports it before either is loaded)."""

from __future__ import annotations

from typing import Any


def is_terminal(stream: Any) -> bool:
    """Whether ``stream`` is a terminal (``isatty``); ``False`` for a closed stream or an
    object without ``isatty``."""
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError, OSError):
        return False


__all__ = ["is_terminal"]
