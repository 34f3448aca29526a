"""The exporter, ``status`` and the TUI read the same source table (issue 33): each front lists
its sources from :data:`seat_console.snapshot.table.SOURCE_TABLE` and builds them by its
entries' factories — a factory swapped in the table is the one every front builds."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from seat_console.core.base import Source, Unavailable
from seat_console.snapshot import table
from seat_console.snapshot.table import SOURCE_TABLE, exported, names_for


def test_every_front_lists_its_sources_from_the_table() -> None:
    from seat_console.exporter.model import SOURCES as EXPORTED
    from seat_console.exporter.readers import INTERVALS_S, READERS
    from seat_console.snapshot.reading import DEFAULT_FACTORIES, SOURCE_NAMES
    from seat_console.tui.panels import PANELS

    tui = [p.source for p in PANELS]
    assert sorted(tui) == sorted(names_for("tui"))
    assert all(p.factory == SOURCE_TABLE[p.source].factory for p in PANELS)
    assert all((p.eager, p.min_interval_s, p.uses_readings, p.on_docker_change)
               == (SOURCE_TABLE[p.source].eager, SOURCE_TABLE[p.source].min_interval_s,
                   SOURCE_TABLE[p.source].uses_readings, SOURCE_TABLE[p.source].on_docker_change)
               for p in PANELS)
    assert SOURCE_NAMES == names_for("status") and set(DEFAULT_FACTORIES) == set(SOURCE_NAMES)
    assert EXPORTED == tuple(exported()) and set(READERS) == set(EXPORTED)
    assert INTERVALS_S == {x: e.exporter_interval_s for x, e in exported().items()}
    # each exported name stands on a table entry the exporter front reads
    assert all("exporter" in e.fronts for e in exported().values())


class _Marked(Source):
    """A source that says which table factory built it."""

    def __init__(self, name: str) -> None:
        self.name = name

    def read(self) -> Any:
        return Unavailable(source=self.name, kind="error", reason=f"built by the table {self.name}")


@pytest.fixture()
def swapped(monkeypatch: pytest.MonkeyPatch) -> dict[str, list]:
    """Every table factory replaced by one that records what it built."""
    built: dict[str, list] = {}

    def fake(name: str):
        def make(loaded: Any, *args: Any, **kw: Any) -> Source:
            built.setdefault(name, []).append(kw)
            return _Marked(name)
        return make

    monkeypatch.setattr(table, "SOURCE_TABLE",
                        {n: replace(e, factory=fake(n)) for n, e in SOURCE_TABLE.items()})
    return built


def test_status_builds_its_sources_by_the_table(swapped: dict[str, list]) -> None:
    from seat_console.core.profile import load_profile
    from seat_console.snapshot.reading import take_snapshot

    snap = take_snapshot(load_profile(), timeout_s=10)
    assert set(swapped) == set(names_for("status"))
    assert swapped["containers"] == [{"watch_events": False}]   # a one-shot read: no events
    assert all("built by the table" in u.reason for u in snap.unavailable().values())


def test_exporter_reads_the_table_sources(swapped: dict[str, list]) -> None:
    from seat_console.core.profile import load_profile
    from seat_console.exporter.readers import make_containers, make_gpus, make_silences

    loaded = load_profile()
    for make, name in ((make_gpus, "gpus"), (make_silences, "silences"),
                       (make_containers, "seat")):
        read, _close = make(loaded)
        got = read()
        assert isinstance(got, Unavailable) and got.reason == f"built by the table {name}"
    assert set(swapped) == {"gpus", "silences", "seat"}


def test_tui_builds_its_panels_sources_by_the_table(swapped: dict[str, list]) -> None:
    from seat_console.tui.panels import PANELS, resolve_factory

    for p in PANELS:
        src = resolve_factory(p.source)(None)
        assert src.name == p.source
    assert set(swapped) == set(names_for("tui"))


def test_an_unknown_source_is_refused_naming_the_table() -> None:
    from seat_console.tui.panels import PanelSpec
    from seat_console.widgets.gpu import GpuPanel

    with pytest.raises(KeyError, match="not in the source table"):
        PanelSpec("gpu", GpuPanel)
    with pytest.raises(ValueError, match="one of tui, status, exporter"):
        names_for("web")
