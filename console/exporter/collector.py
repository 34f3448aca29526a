"""The ``prometheus_client`` custom collector, and the exporter that owns the pollers.

:class:`SeatCollector` answers a scrape from the pollers' caches only
(:meth:`seat_console.snapshot.poll.Poller.state`: the one poll engine): no I/O happens in a scrape, so its cost is
bounded whatever a source does, and ``seat_scrape_duration_seconds`` is the collector's own
time to build the families.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Mapping

from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector, CollectorRegistry

from seat_console.exporter.model import SOURCES, Identity, build_families
from seat_console.snapshot.poll import Poller, PollerGroup
from seat_console.exporter.readers import GROUP_READERS, INTERVALS_S, READERS, Reader
from seat_console.core.profile import LoadedProfile


class SeatCollector(Collector):
    """Collects the seat's families from ``pollers`` (``{source name: Poller}``) for
    ``ident``; see :func:`seat_console.exporter.model.build_families`."""

    def __init__(self, ident: Identity, pollers: Mapping[str, Poller]) -> None:
        self.ident = ident
        self.pollers = dict(pollers)

    def collect(self) -> Iterator[Metric]:
        """One scrape's families, then ``seat_scrape_duration_seconds``."""
        t0 = time.perf_counter()
        states = {n: p.state() for n, p in self.pollers.items()}
        fams = build_families(self.ident, states)
        d = GaugeMetricFamily("seat_scrape_duration_seconds",
                              "The exporter's own time to build this scrape (seconds).",
                              unit="seconds")
        d.add_metric([], time.perf_counter() - t0)
        yield from fams
        yield d


def identity(loaded: LoadedProfile, version: str) -> Identity:
    """The seat's :class:`~seat_console.exporter.model.Identity` from the profile."""
    p = loaded.profile
    return Identity(node=p.node.name, seat=p.resident.name,
                    endpoint=str(p.seat.endpoint).rstrip("/"),
                    tensor_parallel_size=p.seat.tensor_parallel_size,
                    units=tuple(p.timers.all_units), version=version)


class Exporter:
    """The pollers (one per source in :data:`~seat_console.exporter.model.SOURCES`) and the
    registry a server exposes.

    ``interval_s``: seconds between reads of every source (``None``: each source's default,
    :data:`~seat_console.exporter.readers.INTERVALS_S`; a group's shortest); ``timeout_s``: a
    read in flight longer than this reports its source down (default: its interval + 10 s);
    ``readers``: ``{source: make_reader(loaded)}`` (default
    :data:`~seat_console.exporter.readers.READERS`); ``groups``: ``{(source, …):
    make_reader(loaded)}``, sources read together by one call in one
    :class:`~seat_console.snapshot.poll.PollerGroup` (their ``readers`` entries are not
    used; default :data:`~seat_console.exporter.readers.GROUP_READERS` when ``readers`` is
    not given, none when it is). :attr:`pollers` has every source's :class:`Poller`, a
    group's parts included.
    """

    def __init__(self, loaded: LoadedProfile, version: str, *, interval_s: float | None = None,
                 timeout_s: float | None = None,
                 readers: Mapping[str, Callable[[LoadedProfile], Reader]] | None = None,
                 groups: Mapping[tuple[str, ...], Callable[[LoadedProfile], Reader]]
                 | None = None) -> None:
        makers = dict(READERS if readers is None else readers)
        joint = dict((GROUP_READERS if readers is None else {}) if groups is None else groups)
        self.pollers: dict[str, Poller] = {}
        self._threads: list[Poller | PollerGroup] = []
        grouped: dict[str, PollerGroup] = {}
        for names, make in joint.items():
            names = tuple(n for n in SOURCES if n in names)
            if not names:
                continue
            read, close = make(loaded)
            every = (interval_s if interval_s is not None
                     else min(INTERVALS_S[n] for n in names))
            group = PollerGroup(names, read, interval_s=every,
                                timeout_s=timeout_s if timeout_s is not None else every + 10.0,
                                close=close)
            self._threads.append(group)
            grouped.update((n, group) for n in names)
        for name in SOURCES:
            if name in grouped:
                self.pollers[name] = grouped[name].parts[name]
                continue
            if name not in makers:
                continue
            read, close = makers[name](loaded)
            every = interval_s if interval_s is not None else INTERVALS_S[name]
            self.pollers[name] = Poller(name, read, interval_s=every,
                                        timeout_s=timeout_s if timeout_s is not None
                                        else every + 10.0, close=close)
            self._threads.append(self.pollers[name])
        self.collector = SeatCollector(identity(loaded, version), self.pollers)
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(self.collector)

    def start(self) -> Exporter:
        """Start every poller's (and group's) thread."""
        for p in self._threads:
            p.start()
        return self

    def read_all_once(self, wait_s: float) -> None:
        """Read every source once, in parallel, waiting up to ``wait_s`` s in all (``--once`` /
        ``--json``): a source still reading then is reported down by the scrape."""
        import threading

        threads = [threading.Thread(target=p.read_now, daemon=True, name=f"once-{p.name}")
                   for p in self._threads]
        for t in threads:
            t.start()
        deadline = time.monotonic() + wait_s
        for t in threads:
            t.join(max(0.0, deadline - time.monotonic()))

    def stop(self) -> None:
        """Stop every poller's (and group's) thread (each ends after its current read)."""
        for p in self._threads:
            p.stop(join_s=0.5)


__all__ = ["Exporter", "SeatCollector", "identity"]
