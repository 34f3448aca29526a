"""The seat-swap runbook's state as one model: the stages, each read from the node, the journal
and the run store (never from one console's memory).

The stages, in order (../shared/DESIGN.md "The runbook")::

    fit -> image -> hold -> backport -> swap -> probe -> compare -> decide -> restore | promote -> release

``restore`` and ``promote`` are alternatives: the decision picks one; the other is ``skipped``.

This module holds the model every front renders (the TUI's runbook strip and screen, ``seat-console
runbook``, the exporter's ``seat_runbook_stage``, the fleet row). It imports no Textual.

Statuses (:data:`Status`):

* ``todo``: not done in this runbook cycle;
* ``done``: done at :attr:`StageState.at` by :attr:`StageState.operator`, its evidence given;
* ``failed``: the newest attempt failed (:attr:`StageState.reason` says how);
* ``stale``: done, but something it depends on changed after it (e.g. a new backport after the
  probe): it must be run again before a later stage may rely on it;
* ``skipped``: the branch not taken (``restore`` after a promote, ``promote`` after a restore).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Literal

STAGES: tuple[str, ...] = ("fit", "image", "hold", "backport", "swap", "probe", "compare",
                           "decide", "restore", "promote", "release")
"""Stage names in runbook order; ``restore`` and ``promote`` are alternatives."""

Status = Literal["todo", "done", "failed", "stale", "skipped"]
SeatHolder = Literal["resident", "candidate", "none", "both", "unknown"]


@dataclass(frozen=True)
class StageState:
    """One stage as read now.

    ``name``: one of :data:`STAGES`. ``status``: see the module docstring. ``at``: when it was
    done / failed (UTC; ``None`` for ``todo``). ``operator``: who did it (the journal row's
    operator), ``None`` when not done. ``evidence``: label -> value, e.g. ``{"image digest":
    "sha256:…", "run": "20261205T…", "report sha256": "…"}``. ``needs``: one sentence, what
    this stage needs before it can run (or what it gave the next stage). ``key``: the TUI
    binding id that runs it (``"node.hold"``), ``None`` when it has none. ``command``: the CLI
    that runs it (``"seat-console hold --ttl 4h"``). ``reason``: why it failed or is stale
    (``""`` otherwise).
    """

    name: str
    status: Status
    at: datetime | None = None
    operator: str | None = None
    evidence: Mapping[str, str] = field(default_factory=dict)
    needs: str = ""
    key: str | None = None
    command: str = ""
    reason: str = ""


@dataclass(frozen=True)
class RunbookState:
    """The runbook as read at :attr:`read_at`: every stage in :data:`STAGES` order, the next
    stage to run (``None`` when the cycle is complete), who holds the seat now (from docker),
    and the sources that could not be read (each a sentence; their stages say ``unknown`` in
    ``needs`` rather than guessing)."""

    stages: tuple[StageState, ...]
    next: StageState | None
    seat_holder: SeatHolder
    read_at: datetime
    problems: tuple[str, ...] = ()

    def stage(self, name: str) -> StageState:
        """The stage called ``name``; raises :class:`KeyError` for a name not in :data:`STAGES`."""
        for s in self.stages:
            if s.name == name:
                return s
        raise KeyError(name)


__all__ = ["STAGES", "RunbookState", "SeatHolder", "StageState", "Status"]
