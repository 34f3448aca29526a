"""What the app derives from the newest readings, on the UI thread (no I/O): the status line's
facts, the profile's fit verdict (computed once per change of the fit inputs, shared with the
fit panel and the exporter: :func:`seat_console.snapshot.fit_verdict.profile_budgets`), whether the GPU totals moved so
the fit source should be read again, and the hold banner of the timers and silences panels."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from pydantic import BaseModel

from seat_console.core.base import Unavailable
from seat_console.snapshot.fit_verdict import fit_signature, gpu_fit_signature, profile_budgets
from seat_console.snapshot.verdicts import Fact, build_status

log = logging.getLogger(__name__)


class SeatSummary:
    """The derived state of one app (see the module docstring). ``states``: the app's
    per-source :class:`~seat_console.tui.polling.PanelState` by key (read, never written)."""

    def __init__(self) -> None:
        self.fit_signature: object = None
        self.fit_comparison: Any = None
        self.gpu_signature: object = None

    def fit_changed(self, reading: BaseModel | None) -> None:
        """The fit source's newest good reading: recompute the profile's verdict only when its
        inputs changed (:func:`~seat_console.snapshot.fit_verdict.fit_signature`)."""
        sig = fit_signature(reading)
        if sig == self.fit_signature:
            return
        self.fit_signature = sig
        if sig is None:
            self.fit_comparison = None
            return
        try:
            self.fit_comparison, _ = profile_budgets(reading)
        except Exception:  # noqa: BLE001 - the panel shows the error; the line says n/a
            log.warning("fit summary failed", exc_info=True)
            self.fit_comparison = None

    def gpu_totals_moved(self, reading: BaseModel | None) -> bool:
        """Whether the GPU reading changed what the fit budget depends on (then the fit source
        is read again at once)."""
        sig = gpu_fit_signature(reading)
        if sig == self.gpu_signature:
            return False
        self.gpu_signature = sig
        return True

    def facts(self, states: Mapping[str, Any], now: datetime) -> list[Fact]:
        """The status line's facts from the newest readings (the hold as the action-log
        source reads it from the journal)."""
        def reading(key: str) -> BaseModel | None:
            st = states.get(key)
            return None if st is None else st.reading

        actions = reading("actions")
        hold_known = actions is not None and not isinstance(actions, Unavailable)
        return build_status(engine=reading("engine"), containers=reading("containers"),
                            timers=reading("timers"), silences=reading("silences"),
                            fit=self.fit_comparison,
                            hold=getattr(actions, "hold", None) if hold_known else None,
                            hold_known=hold_known, now=now)


def hold_banner(reading: BaseModel | None) -> str | None:
    """"held by the console until …" for the timers and silences panels while this console's
    hold is active, else ``None``."""
    h = getattr(reading, "hold", None)
    return h.banner if h is not None and h.state == "active" else None


__all__ = ["SeatSummary", "hold_banner"]
