"""The whole node in one frozen snapshot: every source's reading, or why it is unavailable.

:func:`take_snapshot` builds each source from the profile, reads them all in parallel (each in
a daemon thread, so a hung source costs at most ``timeout_s`` and never blocks the others or the
process exit), closes them, and returns a :class:`NodeSnapshot`. ``seat-console status`` prints
it; its JSON is the same model.

The display of times and durations is :mod:`seat_console.core.fmt` (``fmt_when``,
``fmt_duration``).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any

from pydantic import BaseModel

from seat_console.snapshot import table
from seat_console.sources.containers import ContainersReading
from seat_console.sources.engine import EngineReading
from seat_console.sources.gpu import GpuSnapshot
from seat_console.core.profile import LoadedProfile
from seat_console.sources.silences import SilencesReading
from seat_console.core.base import Frozen, Source, Unavailable, read_once, utcnow
from seat_console.sources.timers import TimersReading

SOURCE_NAMES = table.names_for("status")
"""The sources of a node snapshot, in display order: the source table's entries read by
``status`` (:mod:`seat_console.snapshot.table`)."""


class NodeSnapshot(Frozen):
    """Everything the console reads from the node, taken at ``taken_at`` (UTC).

    ``node``: the profile's node name; ``transport``: how the node was reached (``local``,
    ``ssh``, ``docker-exec``); ``profile_source`` / ``profile_sha256``: which profile; one field
    per source holding its frozen reading or an :class:`Unavailable` with the reason.
    ``hold``: the ``status`` command's hold / lease section (the journal's hold, the
    ``seat-hold-*`` leases and deferred starts armed on the node, ``protects_nothing``; see
    :func:`seat_console.commands.status_cmd.read_hold_section`), ``None`` where it was not read
    (the TUI, which shows it in its own panels).
    """

    taken_at: datetime
    node: str
    transport: str
    profile_source: str
    profile_sha256: str
    gpus: GpuSnapshot | Unavailable
    timers: TimersReading | Unavailable
    silences: SilencesReading | Unavailable
    containers: ContainersReading | Unavailable
    engine: EngineReading | Unavailable
    hold: dict[str, Any] | None = None

    def unavailable(self) -> dict[str, Unavailable]:
        """``{source name: Unavailable}`` for every source that could not be read."""
        return {n: getattr(self, n) for n in SOURCE_NAMES
                if isinstance(getattr(self, n), Unavailable)}


ONE_SHOT_KW: dict[str, dict[str, Any]] = {"containers": {"watch_events": False}}
"""Keywords for a one-shot read: the containers source without its event-stream thread (a
one-shot read has no history to show)."""


def _from_table(name: str) -> Callable[[LoadedProfile], Source]:
    def make(loaded: LoadedProfile) -> Source:
        return table.build(name, loaded, **ONE_SHOT_KW.get(name, {}))

    make.__name__ = f"make_{name}"
    make.__doc__ = f"The source table's ``{name}`` source, for one read."
    return make


DEFAULT_FACTORIES: dict[str, Callable[[LoadedProfile], Source]] = {
    n: _from_table(n) for n in SOURCE_NAMES}
"""How :func:`take_snapshot` builds each source: by the source table's entry (tests may pass
their own)."""


def _read_one(name: str, factory: Callable[[LoadedProfile], Source], loaded: LoadedProfile,
              out: dict[str, BaseModel]) -> None:
    try:
        out[name] = read_once(factory(loaded))
    except Exception as exc:  # noqa: BLE001 - a broken factory is one unavailable source
        out[name] = Unavailable(source=name, kind="error", reason=f"{type(exc).__name__}: {exc}")


def take_snapshot(loaded: LoadedProfile, *, timeout_s: float = 20.0,
                  factories: Mapping[str, Callable[[LoadedProfile], Source]] | None = None
                  ) -> NodeSnapshot:
    """Read every source once, in parallel, and assemble a :class:`NodeSnapshot`.

    ``timeout_s``: overall wait in seconds; a source still reading then is reported as
    ``Unavailable(kind="timeout")`` (its thread is abandoned; it is a daemon). ``factories``:
    ``{source name: make_source}``, default :data:`DEFAULT_FACTORIES`. Never raises for a source
    failure.
    """
    facts = dict(DEFAULT_FACTORIES if factories is None else factories)
    out: dict[str, BaseModel] = {}
    threads = []
    for name in SOURCE_NAMES:
        f = facts.get(name)
        if f is None:
            out[name] = Unavailable(source=name, kind="not-configured",
                                    reason=f"no {name} source in this build")
            continue
        t = threading.Thread(target=_read_one, args=(name, f, loaded, out),
                             name=f"snapshot-{name}", daemon=True)
        t.start()
        threads.append((name, t))
    deadline = utcnow().timestamp() + timeout_s
    for name, t in threads:
        t.join(max(0.0, deadline - utcnow().timestamp()))
        if t.is_alive():
            out[name] = Unavailable(source=name, kind="timeout",
                                    reason=f"no reading within {timeout_s:g} s")
    p = loaded.profile
    return NodeSnapshot(taken_at=utcnow(), node=p.node.name, transport=p.node.transport,
                        profile_source=loaded.source, profile_sha256=loaded.sha256,
                        **{n: out[n] for n in SOURCE_NAMES})  # type: ignore[arg-type]


__all__ = ["DEFAULT_FACTORIES", "NodeSnapshot", "SOURCE_NAMES", "take_snapshot"]
