"""Probe runs against the local SSE server with a *watching* monitor (a fake docker event
watcher at the node seam), so that "no headline" is asserted of runs that could have had one
(issue 22: the helper in test_probe_run runs without a watcher, so every phase is unverified
anyway); a failed request that had streamed tokens; "cannot tell whether a hold is active"."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from seat_console.node.docker import EventStreamStatus
from seat_console.probe.interference import InterferenceMonitor
from seat_console.probe.run import HoldInfo, Probe, ProbeRefused, preflight
from seat_console.probe.store import RunWriter
from sse_server import SSEServer
from test_probe_run import PHASES, _loaded, _pre


class FakeWatcher:
    """The docker event watcher as the monitor reads it: connected, no foreign change."""

    def status(self) -> EventStreamStatus:
        return EventStreamStatus(connected=True, since=datetime.now(UTC), reconnects=0,
                                 last_error=None, events_seen=0)

    def foreign_changes(self, since: datetime | None = None) -> tuple:
        return ()


def _watched(scrape):
    return InterferenceMonitor(watcher=FakeWatcher(), container_names={"seat-resident"},
                               transport=None, services=(), silence_state=None, scrape=scrape,
                               interval_s=0.1)


async def _run(tmp_path: Path, prompts: list[str]) -> dict:
    async with SSEServer() as srv:
        loaded = _loaded(tmp_path, srv.url, prompts, PHASES)
        probe = Probe(loaded, _pre(srv.url), writer=RunWriter(root=tmp_path / "runs"),
                      monitor_factory=_watched)
        return await probe.run()


async def test_a_watched_clean_run_is_complete_with_headlines(tmp_path: Path) -> None:
    # the control: with this monitor a run CAN have a headline, so the "no headline" below
    # is caused by what each test breaks
    s = await _run(tmp_path, ["normal", "multi"])
    assert s["status"] == "complete" and s["headline_allowed"] is True, s
    assert [b["state"] for b in s["phases"]] == ["complete", "complete"]
    assert all(b["stats"]["headline"] is not None for b in s["phases"])


async def test_one_headline_phase_does_not_make_the_run_complete(tmp_path: Path) -> None:
    """The first phase has its headline, the second lost a request: the run is
    ``incomplete`` — every phase must have its headline (the mutation ``probe-headline-any``,
    which 'all' → 'any' in the run's status, survived every test before this one)."""
    s = await _run(tmp_path, ["normal"] * 4 + ["http500"])
    single, conc = s["phases"]
    assert single["state"] == "complete" and single["stats"]["headline"] is not None
    assert conc["stats"]["failed"] >= 1 and conc["stats"]["headline"] is None, conc["state"]
    assert s["status"] == "incomplete" and s["headline_allowed"] is False


async def test_a_failed_request_makes_a_watched_run_incomplete(tmp_path: Path) -> None:
    s = await _run(tmp_path, ["normal", "http500", "normal", "multi"])
    single = s["phases"][0]
    assert single["state"] == "incomplete: 3/4 completed, 1 failed"
    assert single["stats"]["headline"] is None
    assert s["status"] == "incomplete" and s["headline_allowed"] is False
    assert s["phases"][1]["stats"]["headline"] is None     # conc also meets the http500


async def test_tokens_streamed_by_a_failed_request_are_in_the_client_count(
        tmp_path: Path) -> None:
    # "cut": two tokens streamed, then the body ends without usage — a failed request whose
    # tokens the engine generated; the client count must hold them (2 per cut request)
    s = await _run(tmp_path, ["normal", "cut"])
    single = s["phases"][0]
    assert single["stats"]["failed"] == 2 and single["stats"]["completed"] == 2
    assert single["accounting"]["tokens"]["client"] == 2 * 4 + 2 * 2
    assert single["stats"]["headline"] is None


def test_cannot_tell_whether_a_hold_is_active_refuses_the_probe(tmp_path: Path) -> None:
    loaded = _loaded(tmp_path, "http://127.0.0.1:9", ["normal"], PHASES)
    for unknown in (HoldInfo(None, "cannot tell whether a hold is active: JournalError: x"),
                    HoldInfo(False, "no active hold in the journal")):
        with pytest.raises(ProbeRefused) as e:
            preflight(loaded, hold=unknown)
        assert str(e.value) == (f"refusing to probe: {unknown.detail}. Place a hold first "
                                "(`seat-console hold`), or pass --force --reason '…' (journaled)")
        assert [(c.name, c.ok) for c in e.value.checks] == [("hold", False)]


def test_a_phase_whose_requests_were_never_sent_is_incomplete() -> None:
    from seat_console.core.probe_stats import phase_stats
    from test_probe_run import _rec

    s = phase_stats("p", [_rec(i) for i in range(6)], expected=10, concurrency=1)
    assert s.attempted == 6 and s.not_sent == 4 and s.failed == 0
    assert s.state == "incomplete: 6/10 completed, 4 not sent" and s.headline is None


def test_a_service_running_during_the_probe_is_a_disruption() -> None:
    from seat_console.probe.interference import service_changes

    base = {"x.service": {"InvocationID": "inv1", "ActiveState": "inactive", "SubState": "dead"}}
    running = {"x.service": {"InvocationID": "inv1", "ActiveState": "active",
                             "SubState": "running"}}
    assert service_changes(base, running) == ["x.service is running (active/running)"]
    done = {"x.service": {"InvocationID": "inv1", "ActiveState": "active", "SubState": "exited"}}
    assert service_changes(base, done) == []
