"""compare --dry-run prints its plan once (one header, the runbook's lines), not twice."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from seat_console.cli import main

REPO = Path(__file__).resolve().parents[1]
LAB_PROFILE = Path(os.environ.get("SEAT_LAB_DIR") or REPO / ".lab") / "profile.toml"


def test_dry_run_text_prints_the_plan_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                           capsys: pytest.CaptureFixture) -> None:
    # the plan reads only the journal (is a hold active?): the lab's profile, not its node
    assert LAB_PROFILE.is_file(), "run `python scripts/lab.py up` (writes .lab/profile.toml)"
    monkeypatch.setenv("SEAT_CONSOLE_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.setenv("SEAT_CONSOLE_DATA_DIR", str(tmp_path / "data"))
    assert main(["--profile", str(LAB_PROFILE), "compare", "--bracket", "ABBA",
                 "--dry-run"]) == 0
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
