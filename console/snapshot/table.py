"""The one table of the node's sources: every front lists the sources it reads from here.

The TUI's panels (:data:`seat_console.tui.panels.PANELS`) name a source of this table and the
panel that draws it; ``seat-console status`` (:mod:`seat_console.snapshot.reading`) reads the
entries marked for it; the exporter (:mod:`seat_console.exporter.readers`) builds its readers
on the entries' sources and serves each under the ``seat_source_up{source}`` names of
:attr:`SourceEntry.exported_as`. A source added here is one line; a front that reads a source
not in this table fails at import (:func:`entry`), and ``tests/test_source_table.py`` checks
that the three fronts read this same table.

A factory is named ``"package.module:function"`` and imported only when a front builds the
source (:func:`resolve`): the docker SDK, httpx or the checkpoint scanner do not delay the
first frame, and this module imports no source (nor anything above ``snapshot``).
"""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

FRONTS = ("tui", "status", "exporter")
"""The fronts that read the node's live picture."""


@dataclass(frozen=True)
class SourceEntry:
    """One source of the node.

    ``name``: the key every front uses (the TUI's source key, ``status``'s JSON field);
    ``factory``: ``"package.module:function"`` building the source from the loaded profile
    (``factory(loaded, **kw)``; a callable is accepted too: tests); ``what``: one line for
    the reader; ``fronts``: which of :data:`FRONTS` read it; ``exported_as``: the exporter's
    ``seat_source_up{source}`` names this source's reading is served under (empty: not
    exported); ``eager``: the TUI reads it before its first frame; ``min_interval_s``: read no
    more often than this (s) whatever the refresh interval (the node's slow state: a hold, a
    silence, a container swap change a few times an evening, and an action of this console
    re-reads what it changed at once); ``on_docker_change``: a front that watches the docker
    engine's event stream reads it again at once when the stream reports a container or image
    change (so a container's state shows within a second whatever ``min_interval_s``);
    ``uses_readings``: the factory also takes the front's newest readings
    (:class:`seat_console.snapshot.live.LatestReadings`); ``exporter_interval_s``: the
    exporter's default seconds between two reads.
    """

    name: str
    factory: str | Callable[..., Any]
    what: str
    fronts: frozenset[str]
    exported_as: tuple[str, ...] = ()
    eager: bool = False
    min_interval_s: float = 0.0
    on_docker_change: bool = False
    uses_readings: bool = False
    exporter_interval_s: float = 15.0


def _e(name: str, factory: str, what: str, fronts: str, **kw: Any) -> SourceEntry:
    return SourceEntry(name, factory, what, frozenset(fronts.split()), **kw)


SLOW_S = 5.0
"""Seconds between two reads of the node's slow state (timers and hold leases, silences,
containers) at any faster refresh interval. At 1 Hz each read cost 3-7 ms of CPU (a
``docker exec``, Alertmanager's answers, docker's inspect: ``benchmarks/source_cost.py``) —
together ~1.7 % of a core, half of the idle console (docs/benchmarks.md, issue 33). The
console's own actions re-read the sources they changed at once, and the containers are read
again as soon as docker's event stream reports a change; another console's hold or silence
shows within this many seconds."""


SOURCE_TABLE: dict[str, SourceEntry] = {e.name: e for e in (
    _e("gpus", "seat_console.sources.gpu:make_source",
       "NVML: every card's memory (v2), processes and their containers",
       "tui status exporter", exported_as=("gpus",), eager=True, exporter_interval_s=30.0),
    _e("timers", "seat_console.sources.timers:make_source",
       "systemd: the profile's timer units and the hold leases armed on the node",
       "tui status exporter", exported_as=("timers", "lease"), min_interval_s=SLOW_S),
    _e("silences", "seat_console.sources.silences:make_source",
       "Alertmanager: the silences on the seat's endpoint", "tui status exporter",
       exported_as=("silences",), min_interval_s=SLOW_S),
    _e("seat", "seat_console.sources.seat:make_source",
       "who holds the seat: the running container, its image ID and digest",
       "tui exporter", exported_as=("containers",), min_interval_s=SLOW_S,
       on_docker_change=True),
    _e("containers", "seat_console.sources.containers:make_source",
       "docker: the resident and probe containers and their events", "tui status",
       min_interval_s=SLOW_S, on_docker_change=True),
    _e("engine", "seat_console.sources.engine:make_source",
       "vLLM: /health, /metrics, the hold state, startup log lines", "tui status exporter",
       exported_as=("engine",), exporter_interval_s=5.0),
    _e("actions", "seat_console.actions.actionlog:make_source",
       "the journal: this console's hold and the runbooks' rows",
       "tui exporter", exported_as=("journal",), uses_readings=True,
       exporter_interval_s=5.0),
    _e("fit", "seat_console.snapshot.live:make_fit_source",
       "the fit budget's inputs: checkpoint headers, the GPU reading, host memory",
       "tui", uses_readings=True, min_interval_s=10.0),
)}
"""Every source of the node, in ``status``'s and the exporter's order (the TUI's panels have
their own order, :data:`seat_console.tui.panels.PANELS`)."""


def entry(name: str) -> SourceEntry:
    """The entry named ``name``. Raises :class:`KeyError` naming the known sources."""
    try:
        return SOURCE_TABLE[name]
    except KeyError:
        raise KeyError(f"source {name!r} is not in the source table "
                       f"(seat_console.snapshot.table): {', '.join(SOURCE_TABLE)}") from None


def names_for(front: str) -> tuple[str, ...]:
    """The names of the sources ``front`` (one of :data:`FRONTS`) reads, in table order.
    Raises :class:`ValueError` for an unknown front."""
    if front not in FRONTS:
        raise ValueError(f"front {front!r}: one of {', '.join(FRONTS)}")
    return tuple(n for n, e in SOURCE_TABLE.items() if front in e.fronts)


def exported() -> dict[str, SourceEntry]:
    """``{exporter source name: the entry it is read from}``, in table order."""
    return {x: e for e in SOURCE_TABLE.values() for x in e.exported_as}


def resolve(factory: str | Callable[..., Any]) -> Callable[..., Any]:
    """``"package.module:function"`` → that function (imports the module); a callable as is.
    Raises ``ImportError`` / ``AttributeError`` naming the module or function when it is
    missing, ``ValueError`` for a string without ``:``."""
    if callable(factory):
        return factory
    mod, sep, fn = factory.partition(":")
    if not sep:
        raise ValueError(f"source factory {factory!r}: write 'package.module:function'")
    return getattr(importlib.import_module(mod), fn)


def takes_context(factory: Callable[..., Any]) -> bool:
    """Whether ``factory`` accepts a ``context`` keyword (a shared
    :class:`~seat_console.node.context.NodeContext`); test factories without it still work."""
    try:
        params = inspect.signature(factory).parameters
    except (TypeError, ValueError):
        return False
    return "context" in params or any(p.kind is inspect.Parameter.VAR_KEYWORD
                                      for p in params.values())


def build(name: str, loaded: Any, *args: Any, table: Mapping[str, SourceEntry] | None = None,
          **kw: Any) -> Any:
    """Build source ``name`` from ``loaded`` (a LoadedProfile) by its entry's factory:
    ``factory(loaded, *args, **kw)``; a ``context`` keyword is dropped for a factory that takes
    none. ``table``: default :data:`SOURCE_TABLE`. Raises :class:`KeyError` for a name not in
    the table and what the factory raises."""
    e = entry(name) if table is None else table[name]
    factory = resolve(e.factory)
    if "context" in kw and not takes_context(factory):
        kw.pop("context")
    return factory(loaded, *args, **kw)


__all__ = ["FRONTS", "SLOW_S", "SOURCE_TABLE", "SourceEntry", "build", "entry", "exported", "names_for",
           "resolve", "takes_context"]
