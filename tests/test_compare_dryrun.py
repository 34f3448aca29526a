"""compare --dry-run prints its plan once (one header, the runbook's lines), not twice."""

from __future__ import annotations

from pathlib import Path

import pytest
from seat_console.cli import main



def test_dry_run_text_prints_the_plan_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                           capsys: pytest.CaptureFixture, lab) -> None:
    # the plan reads only the journal (is a hold active?): the lab's profile (so: marked lab,
    # through the fixture), not its node
    monkeypatch.setenv("SEAT_CONSOLE_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.setenv("SEAT_CONSOLE_DATA_DIR", str(tmp_path / "data"))
    assert main(["--profile", str(lab.profile_path), "compare", "--bracket", "ABBA",
                 "--rounds", "1", "--dry-run"]) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert sum("compare ABBA x1 on the seat" in ln for ln in lines) == 1
    assert lines[1] == ("  4 legs: A1 (round 1, pair r1p1), B2 (round 1, pair r1p1), "
                        "B3 (round 1, pair r1p2), A4 (round 1, pair r1p2); pairs A1-B2, A4-B3")
    for leg in ("A1", "B2", "B3", "A4"):  # each leg: its transition and its measurement, once
        assert sum(f"leg {leg}" in ln for ln in lines) == 2, out
    assert "wait for /health" not in out  # the second (bracket) format is gone
    assert sum("release the hold" in ln for ln in lines) == 1
    assert not (tmp_path / "data" / "comparisons").exists()
    # no minted folder a later compare would not use (it mints its own when it starts)
    assert sum(ln.startswith("  folder: a new folder ") for ln in lines) == 1, out
    assert "cmp-<time>-<id>" in out and "cmp-2" not in out, out
