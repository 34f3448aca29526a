"""What a first-time on-call engineer tripped over doing one seat swap from the runbook screen
on the lab (120×40, tmux), each pinned here:

* the probe's preflight named the hold's end as Python prints a datetime
  (``expires 2026-12-05 21:11:07+00:00``), where every other screen says ``…T21:11:07Z``;

Pilot tests over the app without the lab (:mod:`app_fixtures`), and the journal in a temporary
state dir."""

from __future__ import annotations

from datetime import UTC, datetime
from types import SimpleNamespace

import pytest


@pytest.fixture(autouse=True)
def _state(tmp_path, monkeypatch):
    monkeypatch.setenv("SEAT_CONSOLE_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.setenv("SEAT_CONSOLE_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("TZ", "UTC")


# -- the probe's preflight: the hold's end in UTC with Z ----------------------------------------
def test_the_probe_preflight_names_the_hold_end_as_every_screen_does(monkeypatch) -> None:
    from seat_console.actions import probe_journal

    end = datetime(2026, 12, 5, 21, 11, 7, 512000, tzinfo=UTC)
    monkeypatch.setattr(probe_journal, "active_hold",
                        lambda journal: SimpleNamespace(silence_id="e8b4bec1", expires_at=end))
    info = probe_journal.hold_info()
    assert info.active is True and info.expires_at == end
    assert info.detail == "hold active (silence e8b4bec1, expires 2026-12-05T21:11:07Z)"
