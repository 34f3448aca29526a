"""Verify branches that real components never reach (issue #12, "tests that can fail").

The real Alertmanager and the real systemd always store what they are told, so the read-back
checks of the writers (``create_silence``, ``expire_silence``, ``stop_timer``,
``start_timer``) were never exercised: a mutation that deleted them survived. Here the node is a
fake that *stores or reports something else* — an Alertmanager behind ``httpx.MockTransport``
that rewrites what it stores, a transport whose ``systemctl stop`` exits 0 but changes nothing —
and each check must turn that into the documented error naming what differs.
"""

from __future__ import annotations

import json
from datetime import timedelta

import httpx
import pytest

from seat_console.actions.node_ops import (
    TimerActionError,
    create_silence,
    expire_silence,
    start_timer,
    stop_timer,
)
from seat_console.node.runner import CommandResult
from seat_console.core.profile import AlertmanagerSpec
from seat_console.core.base import utcnow
from seat_console.node.alertmanager import AlertmanagerClient, AlertmanagerError, SilenceMatcher

SEAT = (SilenceMatcher(name="instance", value="seat-node:8000", isRegex=False),
        SilenceMatcher(name="job", value="vllm", isRegex=False))


class LyingAlertmanager:
    """Stores each POSTed silence after ``tamper(stored)``; DELETE sets ``delete_state``."""

    def __init__(self, tamper=lambda s: s, delete_state: str = "expired") -> None:  # noqa: ANN001
        self.tamper = tamper
        self.delete_state = delete_state
        self.store: dict[str, dict] = {}

    def __call__(self, request: httpx.Request) -> httpx.Response:
        path = request.url.path
        if request.method == "POST" and path == "/api/v2/silences":
            body = json.loads(request.content)
            sid = f"sil-{len(self.store) + 1}"
            stored = {"id": sid, "status": {"state": "active"}, "updatedAt": body["startsAt"],
                      **body}
            self.store[sid] = self.tamper(stored)
            return httpx.Response(200, json={"silenceID": sid})
        sid = path.rsplit("/", 1)[-1]
        if request.method == "DELETE":
            self.store[sid]["status"] = {"state": self.delete_state}
            return httpx.Response(200)
        return httpx.Response(200, json=self.store[sid])


def _client(am: LyingAlertmanager) -> AlertmanagerClient:
    c = AlertmanagerClient(AlertmanagerSpec(url="http://127.0.0.1:9"), read_attempts=1)
    c._client = httpx.Client(base_url=c.url, transport=httpx.MockTransport(am))
    return c


def _create(am: LyingAlertmanager):  # noqa: ANN202
    return create_silence(_client(am), SEAT, ends_at=utcnow() + timedelta(hours=2),
                          created_by="seat-console", comment="hold")


def test_an_honest_store_verifies():
    s = _create(LyingAlertmanager())
    assert s.state == "active" and set(s.matchers) == set(SEAT)


@pytest.mark.parametrize(("tamper", "words"), [
    (lambda s: {**s, "matchers": s["matchers"][:1]}, "matchers"),
    (lambda s: {**s, "matchers": [{**s["matchers"][0], "isEqual": False}, s["matchers"][1]]},
     "matchers"),
    (lambda s: {**s, "endsAt": s["startsAt"]}, "endsAt"),
    (lambda s: {**s, "createdBy": "someone-else"}, "createdBy"),
    (lambda s: {**s, "status": {"state": "expired"}}, "state expired"),
])
def test_create_read_back_that_differs_is_a_verify_error(tamper, words):
    with pytest.raises(AlertmanagerError) as e:
        _create(LyingAlertmanager(tamper))
    assert e.value.kind == "verify" and words in str(e.value) and "sil-1" in str(e.value)


def test_expire_that_does_not_stick_is_a_verify_error():
    am = LyingAlertmanager(delete_state="active")
    s = _create(am)
    with pytest.raises(AlertmanagerError, match="still active after DELETE") as e:
        expire_silence(_client(am), s.id)
    assert e.value.kind == "verify"
    honest = LyingAlertmanager()
    assert expire_silence(_client(honest), _create(honest).id).state == "expired"


class StubbornSystemd:
    """A node whose ``systemctl stop/start`` exits 0 but whose timer stays ``stays``."""

    where = "fake-node"

    def __init__(self, stays: str, honest: bool = False) -> None:
        self.state = stays
        self.honest = honest
        self.actions: list[str] = []

    def _result(self, argv, stdout: str = "") -> CommandResult:  # noqa: ANN001
        return CommandResult(argv=tuple(argv), rc=0, stdout=stdout, started_at=utcnow(),
                             duration_s=0.01, ok=True, where=self.where)

    def run(self, argv, timeout_s=10.0, **_kw):  # noqa: ANN001, ANN201 - transport protocol
        if argv[1] in ("stop", "start"):
            self.actions.append(argv[1])
            if self.honest:
                self.state = "inactive" if argv[1] == "stop" else "active"
            return self._result(argv)
        if argv[1] == "list-timers":
            return self._result(argv, "[]")
        return self._result(argv, f"LoadState=loaded\nActiveState={self.state}\n"
                                  "SubState=waiting\nUnit=fleet.service\n")


@pytest.mark.parametrize(("fn", "stays", "want"), [(stop_timer, "active", "inactive"),
                                                   (start_timer, "inactive", "active")])
def test_timer_command_exit_0_without_effect_is_not_done(fn, stays, want):
    node = StubbornSystemd(stays)
    with pytest.raises(TimerActionError) as e:
        fn(node, "fleet.timer", settle_s=0.3)
    assert f"ActiveState={stays}" in str(e.value) and f"wanted {want}" in str(e.value)
    assert node.actions == [fn.__name__.split("_")[0]]
    honest = StubbornSystemd(stays, honest=True)
    change = fn(honest, "fleet.timer", settle_s=0.3)
    assert change.after.active_state == want and change.changed
