"""The main screen's panel table: which source of the one source table
(:data:`seat_console.snapshot.table.SOURCE_TABLE`) each panel draws.

Each :class:`PanelSpec` of :data:`PANELS` pairs a source — a name of the source table (its
factory, ``eager``, ``min_interval_s``, ``on_docker_change`` and ``uses_readings`` come from there), a
``"module:function"`` imported after the first frame, or a callable ``make_source(loaded_profile)
-> Source`` (tests) — with the :class:`~seat_console.widgets.panel.SourcePanel` subclass that
draws it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from seat_console.core.base import Source
from seat_console.snapshot import table
from seat_console.snapshot.live import LatestReading, LatestReadings, make_fit_source
from seat_console.snapshot.table import resolve as _resolve, takes_context
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

    ``source``: a name of the source table (:mod:`seat_console.snapshot.table`), a
    ``"module:function"`` (imported in a thread after the first frame, so docker, httpx or the
    checkpoint scanner do not delay it) or a callable factory (see :data:`SourceFactory`);
    ``panel``: the :class:`SourcePanel` subclass that draws it; ``span``: columns the panel
    takes in the two-column layout (1 or 2; ``None``: the panel class's ``wide_span``).
    ``eager`` (built and read before the first frame), ``min_interval_s`` (poll no more often
    than this, s), ``uses_readings`` (pass the app's :class:`LatestReadings` to the
    factory) and ``on_docker_change`` (read at once when docker's event stream reports a
    change): the table entry's when ``None`` (``False`` / ``0`` for a source not in it).
    Raises :class:`KeyError` for a name that is neither in the table nor ``module:function``.
    """

    source: str | SourceFactory
    panel: type[SourcePanel]
    eager: bool | None = None
    min_interval_s: float | None = None
    uses_readings: bool | None = None
    on_docker_change: bool | None = None
    span: int | None = None

    def __post_init__(self) -> None:
        e = self.entry
        for f, default in (("eager", False), ("min_interval_s", 0.0),
                           ("uses_readings", False), ("on_docker_change", False)):
            if getattr(self, f) is None:
                object.__setattr__(self, f, getattr(e, f) if e is not None else default)

    @property
    def entry(self) -> table.SourceEntry | None:
        """The source table's entry this panel draws (``None``: a factory of its own)."""
        if isinstance(self.source, str) and ":" not in self.source:
            return table.entry(self.source)
        return None

    @property
    def factory(self) -> str | SourceFactory:
        """The factory that builds this panel's source (the table entry's for a name)."""
        e = self.entry
        return e.factory if e is not None else self.source


PANELS: list[PanelSpec] = [PanelSpec(name, panel, span=span) for name, panel, span in (
    ("gpus", GpuPanel, None),
    ("actions", ActionLogPanel, 2),
    ("timers", TimersPanel, None),
    ("silences", SilencesPanel, None),
    ("fit", FitPanel, None),
    ("engine", EnginePanel, None),
    ("containers", ContainersPanel, None),
    ("seat", SeatPanel, None),
)]
"""The panels the app shows, in reading order (the seat's safety net — GPUs, the hold and its
countdown, timers, silences, fit — first, so it is on the first screen at 80×24; the Actions
panel was last, below the fold there, while a hold counted down; at two columns it takes the
whole width, its journal rows being long). Every source is a name of the source table.

To add a panel, add its source to the source table and one line here, e.g.
``("probe", ProbePanel, None),``. Plain ``(make_source, PanelClass)`` pairs are accepted too
(tests)."""

def resolve_factory(source: str | SourceFactory) -> SourceFactory:
    """A panel's source → its factory: a name of the source table → the entry's factory
    (imported), ``"package.module:function"`` → that function, a callable as is. Raises
    :class:`KeyError` for an unknown name, ``ImportError`` / ``AttributeError`` naming the
    module or function when it is missing."""
    if isinstance(source, str) and ":" not in source:
        return _resolve(table.entry(source).factory)
    return _resolve(source)


def as_spec(entry: PanelSpec | tuple) -> PanelSpec:
    """A :class:`PanelSpec` from a spec or a ``(factory, PanelClass)`` pair."""
    if isinstance(entry, PanelSpec):
        return entry
    factory, panel = entry
    return PanelSpec(factory, panel)


__all__ = ["PANELS", "LatestReading", "LatestReadings", "PanelSpec", "SourceFactory", "as_spec",
           "make_fit_source", "resolve_factory", "takes_context"]
