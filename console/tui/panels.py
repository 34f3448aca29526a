"""The main screen's panel table: which source each panel draws, and the sources that share
another panel's reading (the fit source reads the GPU panel's NVML sample).

Each :class:`PanelSpec` of :data:`PANELS` pairs a source factory (``"module:function"``
imported after the first frame, or a callable ``make_source(loaded_profile) -> Source``) with
the :class:`~seat_console.widgets.panel.SourcePanel` subclass that draws it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from pydantic import BaseModel

from seat_console.core.profile import LoadedProfile
from seat_console.core.base import Source, Unavailable
from seat_console.widgets.actionlog import ActionLogPanel
from seat_console.widgets.fit import FitPanel
from seat_console.widgets.gpu import GpuPanel
from seat_console.widgets.panel import SourcePanel
from seat_console.widgets.seat import SeatPanel
from seat_console.widgets.services import ContainersPanel, EnginePanel, SilencesPanel, TimersPanel


SourceFactory = Callable[..., Source]
"""``make_source(loaded_profile) -> Source`` builds one source from the seat profile; with
``PanelSpec.uses_readings`` it is called as ``make_source(loaded_profile, readings)`` where
``readings`` is the app's :class:`LatestReadings` (e.g. the fit source takes the GPU reading)."""


@dataclass(frozen=True)
class PanelSpec:
    """One panel of the main screen.

    ``source``: ``"module:function"`` (imported in a thread after the first frame, so docker,
    httpx or the checkpoint scanner do not delay it) or a callable factory (see
    :data:`SourceFactory`); ``panel``: the :class:`SourcePanel` subclass that draws it;
    ``eager``: built and read at start-up, before the first frame (the GPU panel);
    ``min_interval_s``: poll no more often than this (s), whatever the refresh interval;
    ``uses_readings``: pass the app's :class:`LatestReadings` to the factory; ``span``: columns
    the panel takes in the two-column layout (1 or 2; ``None``: the panel class's
    ``wide_span``).
    """

    source: str | SourceFactory
    panel: type[SourcePanel]
    eager: bool = False
    min_interval_s: float = 0.0
    uses_readings: bool = False
    span: int | None = None


PANELS: list[PanelSpec] = [
    PanelSpec("seat_console.sources.gpu:make_source", GpuPanel, eager=True),
    PanelSpec("seat_console.actions.actionlog:make_source", ActionLogPanel, uses_readings=True,
              span=2),
    PanelSpec("seat_console.sources.timers:make_source", TimersPanel),
    PanelSpec("seat_console.sources.silences:make_source", SilencesPanel),
    PanelSpec("seat_console.tui.panels:make_fit_source", FitPanel, uses_readings=True,
              min_interval_s=10.0),
    PanelSpec("seat_console.sources.engine:make_source", EnginePanel),
    PanelSpec("seat_console.sources.containers:make_source", ContainersPanel),
    PanelSpec("seat_console.sources.seat:make_source", SeatPanel),
]
"""The panels the app shows, in reading order (the seat's safety net — GPUs, the hold and its
countdown, timers, silences, fit — first, so it is on the first screen at 80×24; the Actions
panel was last, below the fold there, while a hold counted down; at two columns it takes the
whole width, its journal rows being long).

To add a panel, append one line, e.g.
``PanelSpec("seat_console.sources.probe:make_source", ProbePanel),``. Plain
``(make_source, PanelClass)`` pairs are accepted too (tests)."""

class LatestReadings:
    """The app's newest good reading per source key, readable from any thread (the app writes
    it on the UI thread; a reader gets a frozen model or ``None``)."""

    def __init__(self) -> None:
        self._by_key: dict[str, BaseModel] = {}

    def get(self, key: str) -> BaseModel | None:
        """The newest good reading of source ``key``, or ``None`` before the first."""
        return self._by_key.get(key)

    def put(self, key: str, reading: BaseModel) -> None:
        """Record ``reading`` as source ``key``'s newest good reading (UI thread)."""
        self._by_key[key] = reading


class LatestReading(Source):
    """A source that returns another panel's newest good reading (no I/O): how the fit source
    shares the GPU panel's NVML sample. Before the first one: ``Unavailable(kind="waiting")``."""

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
    """The fit panel's source, reading the GPU panel's newest snapshot instead of NVML (so the
    GPU and fit panels show one sample, and no second sampler, ``/proc`` mapper or docker
    client runs)."""
    from seat_console.snapshot.fit_reading import FitSource

    return FitSource(loaded, gpu_source=LatestReading(readings, "gpus"),
                     containers_source=LatestReading(readings, "containers"))


def takes_context(factory: SourceFactory) -> bool:
    """Whether ``factory`` accepts a ``context`` keyword (the app's shared
    :class:`~seat_console.node.context.NodeContext`); test factories without it still work."""
    import inspect

    try:
        params = inspect.signature(factory).parameters
    except (TypeError, ValueError):
        return False
    return "context" in params or any(p.kind is inspect.Parameter.VAR_KEYWORD
                                      for p in params.values())


def resolve_factory(source: str | SourceFactory) -> SourceFactory:
    """``"package.module:function"`` → that function (imports the module); a callable as is.

    Raises ``ImportError`` / ``AttributeError`` naming the module or function when it is
    missing, ``ValueError`` for a string without ``:``."""
    if callable(source):
        return source
    mod, sep, fn = source.partition(":")
    if not sep:
        raise ValueError(f"panel source {source!r}: write 'package.module:function'")
    import importlib

    return getattr(importlib.import_module(mod), fn)


def as_spec(entry: PanelSpec | tuple) -> PanelSpec:
    """A :class:`PanelSpec` from a spec or a ``(factory, PanelClass)`` pair."""
    if isinstance(entry, PanelSpec):
        return entry
    factory, panel = entry
    return PanelSpec(factory, panel)


__all__ = ["PANELS", "LatestReading", "LatestReadings", "PanelSpec", "SourceFactory", "as_spec",
           "make_fit_source", "resolve_factory", "takes_context"]
