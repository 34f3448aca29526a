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


AM_EXAMPLE = REPO / "docs" / "prometheus" / "alertmanager.example.yml"


def test_alertmanager_example_config_checks() -> None:
    amtool = shutil.which("amtool") or "/usr/bin/amtool"
    assert Path(amtool).exists(), "amtool not found: apt-get install prometheus-alertmanager"
    r = subprocess.run([amtool, "check-config", str(AM_EXAMPLE)], capture_output=True,
                       text=True, timeout=60, check=False)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "1 inhibit rules" in r.stdout


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_alertmanager_example_inhibits_a_held_seats_alerts(tmp_path: Path) -> None:
    """A real Alertmanager (its own, on a free loopback port) with the example config: while
    SeatHeld fires for instance "held", that instance's page is inhibited; the same page of an
    unheld instance, and SeatHoldWithoutLease and SeatHoldOverdue of the held one, are not."""
    import time
    from datetime import UTC, datetime, timedelta

    import httpx

    binary = shutil.which("prometheus-alertmanager") or "/usr/bin/prometheus-alertmanager"
    port = _free_port()
    proc = subprocess.Popen([binary, f"--config.file={AM_EXAMPLE}",
                             f"--storage.path={tmp_path / 'data'}",
                             f"--web.listen-address=127.0.0.1:{port}",
                             "--cluster.listen-address="],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                if httpx.get(f"{url}/-/ready", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            assert time.monotonic() < deadline, "Alertmanager did not become ready"
            time.sleep(0.2)
        now = datetime.now(UTC)
        end = (now + timedelta(minutes=10)).isoformat()

        def alert(name: str, instance: str, severity: str) -> dict:
            return {"labels": {"alertname": name, "instance": instance, "severity": severity},
                    "startsAt": now.isoformat(), "endsAt": end}

        r = httpx.post(f"{url}/api/v2/alerts", json=[
            alert("SeatHeld", "held", "none"),
            alert("VLLMDown", "held", "page"),
            alert("VLLMDown", "broken", "page"),
            alert("SeatHoldWithoutLease", "held", "page"),
            alert("SeatHoldOverdue", "held", "page"),
        ], timeout=5)
        assert r.status_code == 200, r.text

        def states() -> dict[tuple[str, str], list[str]]:
            got = httpx.get(f"{url}/api/v2/alerts", timeout=5).json()
            return {(a["labels"]["alertname"], a["labels"]["instance"]):
                    a["status"]["inhibitedBy"] for a in got}

        deadline = time.monotonic() + 60
        while True:
            st = states()
            if len(st) == 5 and st[("VLLMDown", "held")]:
                break
            assert time.monotonic() < deadline, f"no inhibition seen: {st}"
            time.sleep(0.5)
        assert st[("VLLMDown", "broken")] == []
        assert st[("SeatHoldWithoutLease", "held")] == []
        assert st[("SeatHoldOverdue", "held")] == []   # the held seat's own danger
    finally:
        proc.terminate()
        proc.wait(20)
