"""``probe --dry-run`` shows the plan even when preflight would refuse (no hold, engine down).

Real parts: the profile parser, the engine client against a closed local port (a real
connection refused), the command's output. Replaced: the hold lookup (the shared journal) and
the seat-container inspection (the lab's docker engine; tested in ``test_probe_lab.py``).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import socket
from pathlib import Path

import pytest
from seat_console.actions import probe_journal
from seat_console.commands import probe_cmd
from seat_console.probe import run as probe_run
from seat_console.probe.run import HoldInfo, ProbeRefused, preflight
from seat_console.core.profile import LoadedProfile, default_profile_text, parse_profile


def _closed_port() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()  # nothing listens there now: connection refused
    return port


def _loaded(url: str) -> LoadedProfile:
    text = default_profile_text().split("\n[probe]")[0] + f"""
[probe]
output_tokens = 24
warmup_requests = 1
endpoint = "{url}"
[[probe.phases]]
name = "single"
requests = 5
concurrency = 1
[[probe.phases]]
name = "burst"
requests = 40
concurrency = 8
"""
    return LoadedProfile(profile=parse_profile(text), source="test", origin="test",
                         sha256=hashlib.sha256(text.encode()).hexdigest())


SEAT = {"name": "seat-resident", "role": "resident", "image_id": "sha256:" + "ab" * 32,
        "repo_digest": None}


@pytest.fixture
def no_hold(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> list[int]:
    calls: list[int] = []

    def seat(_loaded):
        calls.append(1)
        return dict(SEAT), {"seat-resident"}, None
    monkeypatch.setattr(probe_journal, "hold_info",
                        lambda: HoldInfo(False, "no active hold in the journal"))
    monkeypatch.setattr(probe_run, "_seat_container", seat)
    monkeypatch.setenv("SEAT_CONSOLE_DATA_DIR", str(tmp_path / "data"))
    return calls


def _args(**kw) -> argparse.Namespace:
    base = {"phase": None, "json": False, "dry_run": True, "force": False, "reason": None}
    return argparse.Namespace(**{**base, **kw})


def test_dry_run_without_hold_prints_the_plan_then_exits_5(no_hold, capsys) -> None:
    url = f"http://127.0.0.1:{_closed_port()}"
    rc = probe_cmd.run_probe_cmd(_args(), _loaded(url))
    out, err = capsys.readouterr()
    assert rc == probe_cmd.EXIT_REFUSED == 5
    assert "PREFLIGHT WOULD REFUSE (exit 5)" in out.splitlines()[0]
    assert "✗ hold: refusing to probe: no active hold in the journal" in out
    assert "✓ seat container: seat-resident (resident) running" in out
    assert "✗ engine:" in out and "– model: not checked" in out
    assert f"seat: seat-resident (resident), image ID sha256:{'ab' * 32}" in out
    assert f"endpoint {url}," in out and "24 output tokens per request" in out
    assert sum("hold:" in x for x in out.splitlines()) == 1, out   # said once, by its check
    assert "phase single: 5 requests, concurrency 1, 24 output tokens each" in out
    assert "phase burst: 40 requests, concurrency 8, 24 output tokens each" in out
    assert "warm-up: 1 request(s)" in out
    assert "refusing to probe: no active hold" in err


def test_dry_run_json_without_hold_has_plan_and_checks(no_hold, capsys) -> None:
    url = f"http://127.0.0.1:{_closed_port()}"
    rc = probe_cmd.run_probe_cmd(_args(json=True, phase=["burst"]), _loaded(url))
    doc = json.loads(capsys.readouterr().out)
    assert rc == 5
    assert doc["dry_run"] is True and doc["refused"].startswith("refusing to probe: no active")
    assert [(c["name"], c["ok"]) for c in doc["checks"]] == [
        ("hold", False), ("seat container", True), ("engine", False), ("model", None)]
    assert doc["phases"] == [{"name": "burst", "requests": 40, "concurrency": 8,
                              "request_rate": None}]
    assert doc["output_tokens"] == 24 and doc["endpoint"] == url
    assert doc["container"]["name"] == "seat-resident"
    assert doc["hold"] == "no active hold in the journal"


def test_real_probe_still_stops_at_the_first_refusal(no_hold) -> None:
    with pytest.raises(ProbeRefused) as ei:
        preflight(_loaded(f"http://127.0.0.1:{_closed_port()}"), hold=probe_journal.hold_info())
    assert "no active hold" in str(ei.value)
    assert no_hold == []  # nothing else was read
    assert [(c.name, c.ok) for c in ei.value.checks] == [("hold", False)]


def test_forced_dry_run_marks_the_hold_forced(no_hold, capsys) -> None:
    rc = probe_cmd.run_probe_cmd(_args(force=True, reason="bench night"),
                                 _loaded(f"http://127.0.0.1:{_closed_port()}"))
    out = capsys.readouterr().out
    assert rc == 5  # engine down still refuses
    assert "✓ hold: no active hold in the journal; FORCED: 'bench night'" in out
    assert "✗ hold" not in out
    assert out.count("hold: ") == 1, out   # the check says it; no second "hold:" line
