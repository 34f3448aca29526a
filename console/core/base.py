"""Shared shapes for sources: the typed "unavailable" value and UTC time helpers.

Every source (NVML, timers, Alertmanager, docker, the engine, checkpoint files) returns either a
frozen pydantic model of what it read, or an :class:`Unavailable` carrying why it could not read.
A source never raises into the UI and never reports an unknown as 0.
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime

from pydantic import BaseModel, ConfigDict, Field


def utcnow() -> datetime:
    """The current time as a timezone-aware UTC :class:`datetime`."""
    return datetime.now(UTC)


class Frozen(BaseModel):
    """Base for snapshot models: immutable, unknown keys rejected; an infinite float (a
    histogram's ``+Inf`` bucket bound) is written to JSON as ``"Infinity"`` and read back as
    ``math.inf`` (pydantic's default, ``null``, could not be read back)."""

    model_config = ConfigDict(frozen=True, extra="forbid", ser_json_inf_nan="strings")


class Unavailable(Frozen):
    """A source could not produce a reading.

    ``source`` names the source (``"nvml"``, ``"timers"``, ``"alertmanager"``, ``"docker"``,
    ``"engine"``…); ``kind`` is a short machine-readable class of failure (``"no-driver"``,
    ``"no-library"``, ``"version-mismatch"``, ``"unreachable"``, ``"timeout"``, ``"error"``…);
    ``reason`` is one human sentence that says what happened and, where there is one, the fix;
    ``at`` is when it was observed (UTC).
    """

    unavailable: bool = True
    source: str
    kind: str = "error"
    reason: str
    at: datetime = Field(default_factory=utcnow)

    def __str__(self) -> str:  # rendered in panels
        return f"{self.source} unavailable ({self.kind}): {self.reason}"


class Source:
    """A node source the app polls: ``read()`` is blocking I/O and runs in a worker thread.

    Subclasses set ``name`` (unique, e.g. ``"gpus"``, ``"timers"``, ``"silences"``,
    ``"containers"``, ``"engine"``) and implement :meth:`read`, which returns a frozen model or an
    :class:`Unavailable` and must not raise (the app still guards against it). ``read`` must bound
    its own I/O with timeouts; the app additionally never waits on it from the UI thread, so a hung
    source only stales its own panel. ``close()`` releases resources (connections, NVML).
    """

    name: str = "source"

    def read(self) -> BaseModel:  # pragma: no cover - interface
        """Take one reading: a frozen model, or :class:`Unavailable` with the reason."""
        raise NotImplementedError

    def close(self) -> None:
        """Release resources; called once when the app exits."""


class BrokenSource(Source):
    """A source that cannot work with this profile (bad settings, a factory that raised).

    Every :meth:`read` returns the same ``Unavailable(kind="config")`` carrying ``reason``, so
    the app starts and the panel says what to fix instead of the console refusing to run.
    """

    def __init__(self, name: str, reason: str) -> None:
        self.name = name
        self.reason = reason

    def read(self) -> BaseModel:
        """Always ``Unavailable(source=name, kind="config", reason=reason)``."""
        return Unavailable(source=self.name, kind="config", reason=self.reason)


def read_once(source: Source) -> BaseModel:
    """One reading of ``source``, then :meth:`Source.close` (the headless commands' pattern).

    Returns what :meth:`Source.read` returns (a model or :class:`Unavailable`); an exception from
    ``read`` propagates after the source is closed; one from ``close`` is logged and does not
    lose the reading.
    """
    try:
        return source.read()
    finally:
        try:
            source.close()
        except Exception:  # noqa: BLE001 - closing must not lose the reading
            logging.getLogger("seat_console.sources").warning("closing source %r failed", source.name,
                                                exc_info=True)
