"""The node's live picture shared between sources: the newest good reading per source, and the
sources built on another source's reading (the fit inputs read the GPU reading instead of NVML
a second time). No I/O, no Textual/Rich."""

from __future__ import annotations

import threading

from pydantic import BaseModel

from seat_console.core.base import Source, Unavailable
from seat_console.core.profile import LoadedProfile


class LatestReadings:
    """The newest good reading per source key, readable from any thread (the poll engine's
    owner writes it; a reader gets a frozen model or ``None``)."""

    def __init__(self) -> None:
        self._by_key: dict[str, BaseModel] = {}
        self._lock = threading.Lock()

    def get(self, key: str) -> BaseModel | None:
        """The newest good reading of source ``key``, or ``None`` before the first."""
        with self._lock:
            return self._by_key.get(key)

    def put(self, key: str, reading: BaseModel) -> None:
        """Record ``reading`` as source ``key``'s newest good reading."""
        with self._lock:
            self._by_key[key] = reading


class LatestReading(Source):
    """A source that returns another source's newest good reading (no I/O): how the fit source
    shares the GPU reading's NVML sample. Before the first one: ``Unavailable(kind="waiting")``."""

    def __init__(self, readings: LatestReadings, key: str) -> None:
        self.readings = readings
        self.key = key
        self.name = key

    def read(self) -> BaseModel:
        """The newest good reading of ``key``, or :class:`Unavailable` naming what is awaited."""
        got = self.readings.get(self.key)
        if got is None:
            return Unavailable(source=self.key, kind="waiting",
                               reason=f"no {self.key} reading yet")
        return got


def make_fit_source(loaded: LoadedProfile, readings: LatestReadings) -> Source:
    """The fit source (the ``fit`` entry of :data:`seat_console.snapshot.table.SOURCE_TABLE`),
    reading the GPU source's newest snapshot instead of NVML (so the GPU and fit panels show one
    sample, and no second sampler, ``/proc`` mapper or docker client runs), and the engine's
newest ``/version`` for the side it serves (the CLI's ``fit`` reads the same rule,
:func:`seat_console.snapshot.fit_reading.running_engine_versions`)."""
    from seat_console.snapshot.fit_reading import FitSource

    return FitSource(loaded, gpu_source=LatestReading(readings, "gpus"),
                     containers_source=LatestReading(readings, "containers"),
                     engine_source=LatestReading(readings, "engine"))


__all__ = ["LatestReading", "LatestReadings", "make_fit_source"]
