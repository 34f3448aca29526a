"""The probe's journal: whether a hold is active (:func:`hold_info`, read from the journal) and
the probe's rows — a forced start (:func:`journal_force`), a start and an end
(:func:`journal_probe`) — so the action log shows every probe next to the hold and swap it ran
under.

The probe itself (:mod:`seat_console.probe.run`) writes no journal row and does not read the
journal: the fronts (``seat-console probe``, the TUI, the compare runbook) ask here and hand
the answer to :func:`~seat_console.probe.run.preflight` (``hold=``).
"""

from __future__ import annotations

from typing import Any

from seat_console.actions.hold import active_hold, iso
from seat_console.actions.journal import Journal
from seat_console.core.profile import LoadedProfile
from seat_console.probe.run import HoldInfo

__all__ = ["hold_info", "journal_force", "journal_probe"]


def hold_info() -> HoldInfo:
    """Whether a hold is active, by :func:`seat_console.actions.hold.active_hold` over the
    journal. ``active = None`` when that cannot be told (the journal cannot be read), with the
    reason. Never raises."""
    try:
        journal = Journal()
        try:
            h = active_hold(journal)
        finally:
            journal.close()
    except Exception as exc:  # noqa: BLE001 - any journal problem = cannot tell
        return HoldInfo(None, f"cannot tell whether a hold is active: {type(exc).__name__}: "
                              f"{exc}")
    if h is None:
        return HoldInfo(False, "no active hold in the journal")
    sid = getattr(h, "silence_id", None)
    exp = getattr(h, "expires_at", None)
    return HoldInfo(True, f"hold active (silence {sid}, expires {iso(exp) or 'n/a'})",
                    silence_id=sid,
                    expires_at=exp)


def journal_force(loaded: LoadedProfile, run_id: str, reason: str, hold: HoldInfo) -> str | None:
    """Journal a forced probe (no active hold: ``hold`` says why); returns a sentence when it
    could not be journaled (the caller refuses then: a force must leave a record)."""
    try:
        j = Journal()
        try:
            j.append(run_id=run_id, runbook="probe", kind="force", step="preflight",
                     inputs={"reason": reason}, outcome="forced",
                     output=f"probe started without an active hold: {hold.detail}",
                     profile_sha256=loaded.sha256)
        finally:
            j.close()
    except Exception as exc:  # noqa: BLE001
        return f"could not journal the forced start: {type(exc).__name__}: {exc}"
    return None


def journal_probe(loaded: LoadedProfile, run_id: str, step: str, outcome: str,
                  output: str = "", facts: dict[str, Any] | None = None) -> str | None:
    """Journal a probe's start or end (``kind = "probe"``, ``step`` ``start``/``end``) so the
    action log shows every probe next to the hold and swap it ran under. Returns a sentence
    when the journal could not be written (the run itself is kept either way)."""
    try:
        j = Journal()
        try:
            j.append(run_id=run_id, runbook="probe", kind="probe", step=step, outcome=outcome,
                     output=output, facts=facts or {}, profile_sha256=loaded.sha256)
        finally:
            j.close()
    except Exception as exc:  # noqa: BLE001 - a journal problem must not lose the run
        return f"could not journal the probe's {step}: {type(exc).__name__}: {exc}"
    return None
