"""restore when no swap is recorded: worded by who holds the seat now (read only)."""

from __future__ import annotations

import json

import pytest
from seat_console.actions import swap as swap_mod
from seat_console.actions.runbook import StepError
from seat_console.cli import main



def test_resident_running_is_nothing_to_restore() -> None:
    e = swap_mod.no_swap_error("seat-resident", "seat-probe", True, False)
    assert isinstance(e, swap_mod.NothingToRestore)
    assert "the resident seat-resident holds the seat" in str(e)
    assert "nothing to restore" in str(e) and "docker start" not in str(e)


@pytest.mark.parametrize("res, probe, want", [
    (False, False, "`docker start seat-resident`"),
    (False, True, "seat-probe holds the seat and seat-resident is stopped"),
    (True, True, "both seat-resident and seat-probe are running"),
    (None, None, "cannot be read (socket gone)"),
])
def test_other_states_refuse_and_say_what_to_do(res, probe, want) -> None:
    e = swap_mod.no_swap_error("seat-resident", "seat-probe", res, probe, "socket gone")
    assert type(e) is StepError and want in str(e)
    assert "holds the seat (running" not in str(e)


@pytest.mark.parametrize("json_mode", [False, True])
def test_restore_dry_run_when_the_resident_holds_the_seat(tmp_path, monkeypatch, capsys,
                                                          json_mode, lab) -> None:
    # the lab's profile (its [swap]; marked lab through the fixture); the node is not read
    monkeypatch.setenv("SEAT_CONSOLE_STATE_DIR", str(tmp_path / "state"))  # empty journal
    monkeypatch.setenv("SEAT_CONSOLE_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setattr(swap_mod, "seat_state", lambda nctx: (True, False, None))
    rc = main(["--profile", str(lab.profile_path), "restore", "--dry-run"]
              + (["--json"] if json_mode else []))
    out, err = capsys.readouterr()
    assert rc == 0, err
    if json_mode:
        doc = json.loads(out)
        assert doc["nothing_to_restore"] is True and doc["dry_run"] is True
        assert "seat-resident holds the seat" in doc["detail"]
    else:
        assert "the resident seat-resident holds the seat" in out
        assert "nothing to restore" in out
    assert "docker start" not in out + err
