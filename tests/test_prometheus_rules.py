"""The Prometheus rules (docs/prometheus/seat.rules.yml) checked and unit-tested with the real
`promtool` (Debian's `prometheus` package; scripts/test installs it). Never skipped: without
promtool these tests fail and say how to install it."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
RULES = REPO / "docs" / "prometheus" / "seat.rules.yml"
TESTS = REPO / "tests" / "prometheus"


def promtool() -> str:
    found = shutil.which("promtool") or ("/usr/bin/promtool"
                                         if Path("/usr/bin/promtool").exists() else None)
    assert found, "promtool not found: apt-get install prometheus (scripts/test installs it)"
    return found


def run(*args: str, cwd: Path = REPO) -> subprocess.CompletedProcess[str]:
    return subprocess.run([promtool(), *args], capture_output=True, text=True, cwd=cwd,
                          timeout=120, check=False)


def test_rules_check() -> None:
    r = run("check", "rules", str(RULES))
    assert r.returncode == 0, r.stdout + r.stderr
    assert "SUCCESS" in r.stdout + r.stderr


def test_rules_unit_tests_pass() -> None:
    files = sorted(TESTS.glob("*.test.yml"))
    assert files, f"no rule tests in {TESTS}"
    r = run("test", "rules", *[f.name for f in files], cwd=TESTS)
    assert r.returncode == 0, r.stdout + r.stderr


def test_rule_tests_catch_a_held_seat_paging(tmp_path: Path) -> None:
    """The rule tests fail when the held seat's engine-down alert is no longer suppressed:
    the same tests against the rules with the `unless on (instance)` hold join removed."""
    text = RULES.read_text()
    start = text.index("      - alert: SeatDownNotHeld")
    end = text.index("      - alert: SeatHoldWithoutLease")
    block = text[start:end]
    assert "unless on (instance)" in block
    broken = block.replace(
        "\n            unless on (instance) (max by (instance) (seat_hold_active) == 1)", "")
    assert broken != block
    d = tmp_path / "docs" / "prometheus"
    d.mkdir(parents=True)
    (d / "seat.rules.yml").write_text(text[:start] + broken + text[end:])
    t = tmp_path / "tests" / "prometheus"
    t.mkdir(parents=True)
    for f in TESTS.glob("*.test.yml"):
        shutil.copy(f, t / f.name)
    r = run("test", "rules", *[f.name for f in sorted(t.glob("*.test.yml"))], cwd=t)
    assert r.returncode != 0, "the rule tests passed against a SeatDownNotHeld that pages " \
                              "for a held seat"
    assert 'instance="held"' in r.stdout + r.stderr
