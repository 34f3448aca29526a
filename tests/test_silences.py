"""Silences: matcher semantics and credential handling (unit), a create → list → expire round
trip against the lab's real Alertmanager, and basic auth + TLS against a real Alertmanager the
test starts itself with a web config (self-signed certificate, bcrypt password)."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import bcrypt
import httpx
import pytest
from conftest import free_port, wait_for_port

from seat_console.core.profile import AlertmanagerSpec, Matcher
from seat_console.sources.silences import SilenceSource, SilencesReading, silence_applies_to_seat
from seat_console.node.alertmanager import (
    ENV_PASSWORD,
    ENV_TOKEN,
    ENV_USER,
    AlertmanagerClient,
    AlertmanagerError,
    Credentials,
    Silence,
    SilenceMatcher,
    load_credentials,
    redact,
)
from seat_console.core.base import Unavailable, utcnow
from seat_console.actions.node_ops import create_silence, expire_silence

AM_BIN = "prometheus-alertmanager"


def M(name: str, value: str, regex: bool = False, equal: bool = True) -> SilenceMatcher:
    return SilenceMatcher(name=name, value=value, is_regex=regex, is_equal=equal)


SEAT = (M("instance", "seat-node:8000"), M("job", "seat"))


# -- matchers --------------------------------------------------------------------------------
def test_matcher_api_form_has_every_field() -> None:
    m = SilenceMatcher.from_profile(Matcher(name="alertname", value="Watchdog", is_equal=False))
    assert m.to_api() == {"name": "alertname", "value": "Watchdog", "isRegex": False,
                          "isEqual": False}
    assert str(m) == 'alertname!="Watchdog"'
    assert str(M("a", "x.*", regex=True, equal=False)) == 'a!~"x.*"'


@pytest.mark.parametrize("m,value,hit", [
    (M("i", "seat"), "seat", True),
    (M("i", "seat"), "seat-node", False),
    (M("i", "seat", regex=True), "seat-node", False),      # anchored, as Alertmanager
    (M("i", "seat.*", regex=True), "seat-node", True),
    (M("i", "seat", equal=False), "other", True),
    (M("i", "seat.*", regex=True, equal=False), "seat-1", False),
    (M("i", ""), None, True),                              # absent label == ""
])
def test_matcher_semantics(m: SilenceMatcher, value: str | None, hit: bool) -> None:
    assert m.matches(value) is hit


@pytest.mark.parametrize("silence,applies,exact", [
    (SEAT, True, True),
    ((SEAT[1], SEAT[0]), True, True),                                  # order does not matter
    ((*SEAT, M("alertname", "Watchdog", equal=False)), True, False),   # narrower, on the seat
    ((M("instance", "seat-.*", regex=True),), True, False),            # regex covering it
    ((M("instance", "other:8000"),), False, False),                    # another instance
    ((M("instance", "seat-node:8000", equal=False),), False, False),   # everything BUT the seat
    ((M("alertname", "Watchdog"),), False, False),                     # no seat label at all
])
def test_silence_applies_to_seat(silence: tuple[SilenceMatcher, ...], applies: bool,
                                 exact: bool) -> None:
    assert silence_applies_to_seat(silence, SEAT) == (applies, exact)


def test_from_api_defaults_missing_is_equal_and_parses_utc() -> None:
    s = Silence.from_api({
        "id": "abc", "status": {"state": "active"}, "updatedAt": "2026-11-29T13:00:00.000Z",
        "matchers": [{"name": "a", "value": "b", "isRegex": False}],
        "startsAt": "2026-11-29T13:00:00.000Z", "endsAt": "2026-11-29T15:00:00.000Z",
        "createdBy": "me", "comment": "c"})
    assert s.matchers[0].is_equal is True
    assert s.ends_at == datetime(2026, 11, 29, 15, tzinfo=UTC)
    assert s.ends_in_s(datetime(2026, 11, 29, 14, tzinfo=UTC)) == 3600
    with pytest.raises(AlertmanagerError) as e:
        Silence.from_api({"id": "x"})
    assert e.value.kind == "bad-response"


# -- credentials -----------------------------------------------------------------------------
SECRET = "pa55-w0rd-that-must-not-leak"


def test_basic_from_env_and_file(tmp_path: Path) -> None:
    spec = AlertmanagerSpec(auth="basic")
    c = load_credentials(spec, {ENV_USER: "ops", ENV_PASSWORD: SECRET})
    assert c.scheme == "basic" and c.origin == "environment"
    assert SECRET not in repr(c) and SECRET not in str(c)
    f = tmp_path / "am.cred"
    f.write_text(f"ops:{SECRET}\n")
    c2 = load_credentials(AlertmanagerSpec(auth="basic", credentials_file=f), {})
    assert c2.origin == str(f) and SECRET in c2.secrets()


def test_bearer_from_env_sets_header_and_hides_it() -> None:
    c = load_credentials(AlertmanagerSpec(auth="bearer"), {ENV_TOKEN: SECRET})
    auth = c.httpx_auth()
    assert auth is not None and SECRET not in repr(auth)
    req = httpx.Request("GET", "http://127.0.0.1/api/v2/silences")
    flow = auth.sync_auth_flow(req)
    sent = next(flow)
    assert sent.headers["Authorization"] == f"Bearer {SECRET}"


@pytest.mark.parametrize("auth,env", [("basic", {ENV_USER: "ops"}), ("bearer", {})])
def test_missing_credentials_named_not_shown(auth: str, env: dict[str, str]) -> None:
    with pytest.raises(AlertmanagerError) as e:
        load_credentials(AlertmanagerSpec(auth=auth), env)
    assert e.value.kind == "config"
    assert "SEAT_CONSOLE_AM_" in str(e.value)


def test_unreadable_credentials_file(tmp_path: Path) -> None:
    with pytest.raises(AlertmanagerError, match="cannot read"):
        load_credentials(AlertmanagerSpec(auth="bearer", credentials_file=tmp_path / "none"), {})


def test_url_with_credentials_refused() -> None:
    with pytest.raises(AlertmanagerError, match="must not contain credentials") as e:
        AlertmanagerClient(AlertmanagerSpec(url=f"http://ops:{SECRET}@127.0.0.1:9093"))
    assert SECRET not in str(e.value)


def test_redact() -> None:
    assert redact(f"x {SECRET} y", [SECRET]) == "x <redacted> y"
    assert redact("ab", ["a"]) == "ab"  # too short to scrub safely


def test_naive_times_refused() -> None:
    client = AlertmanagerClient(AlertmanagerSpec(url="http://127.0.0.1:1"))
    with pytest.raises(ValueError, match="timezone-aware"):
        create_silence(client, SEAT, ends_at=datetime(2030, 1, 1), created_by="t", comment="c")
    client.close()


def test_unreachable_alertmanager_is_unavailable() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again: nothing listens there
    src = SilenceSource(AlertmanagerClient(AlertmanagerSpec(url=f"http://127.0.0.1:{port}"),
                                           read_attempts=2), SEAT)
    r = src.read()
    assert isinstance(r, Unavailable) and r.kind == "unreachable"
    assert str(port) in r.reason
    src.close()


def _api_silence(sid: str, instance: str, state: str = "active") -> dict:
    return {"id": sid, "status": {"state": state}, "updatedAt": "2026-11-29T13:00:00.000Z",
            "matchers": [{"name": "instance", "value": instance, "isRegex": False},
                         {"name": "job", "value": "seat", "isRegex": False}],
            "startsAt": "2026-11-29T13:00:00.000Z", "endsAt": "2026-11-29T15:00:00.000Z",
            "createdBy": "me", "comment": "c"}


def test_an_unchanged_silence_list_is_not_parsed_or_matched_again(monkeypatch) -> None:
    # issue 33 (idle CPU): the silences source parsed and matched every silence Alertmanager
    # keeps (~70-200 on the lab, expired ones included) at every read; the same answer now
    # gives the same reading without either, and any change to the answer is read in full
    import httpx

    body = {"list": [_api_silence("s1", "seat-node:8000"), _api_silence("s2", "other:1")]}
    gets: list[str] = []

    def answer(req: httpx.Request) -> httpx.Response:
        gets.append(req.url.path)
        if req.url.path == "/api/v2/status":
            return httpx.Response(200, json={"versionInfo": {"version": "0.25.0"}})
        return httpx.Response(200, json=body["list"])

    client = AlertmanagerClient(AlertmanagerSpec(url="http://am.test:9093"))
    client._client = httpx.Client(base_url=client.url, transport=httpx.MockTransport(answer))
    parsed: list[str] = []
    real = Silence.from_api.__func__

    def counting(cls, d, what):
        parsed.append(d.get("id"))
        return real(cls, d, what)

    monkeypatch.setattr(Silence, "from_api", classmethod(counting))
    src = SilenceSource(client, SEAT)
    first = src.read()
    assert isinstance(first, SilencesReading) and [x.id for x in first.silences] == ["s1"]
    assert parsed == ["s1", "s2"]
    again = src.read()
    assert parsed == ["s1", "s2"], "the same answer was parsed again"
    assert again.silences == first.silences and again.total == 2
    assert gets.count("/api/v2/silences") == 2         # asked every read: never a stale list
    # the answer changed (s1 expired, a new one on the seat): read in full
    body["list"] = [_api_silence("s1", "seat-node:8000", "expired"),
                    _api_silence("s2", "other:1"), _api_silence("s3", "seat-node:8000")]
    third = src.read()
    assert parsed[2:] == ["s1", "s2", "s3"]
    assert {(x.id, x.state) for x in third.silences} == {("s1", "expired"), ("s3", "active")}
    src.close()


# -- the lab's Alertmanager: create → list → expire ------------------------------------------
def test_lab_silence_round_trip(lab) -> None:
    client = AlertmanagerClient(AlertmanagerSpec(url=lab.alertmanager_url))
    seat = (M("instance", f"seat-test-{os.getpid()}:8000"), M("job", "seat-lab"))
    negative = M("alertname", "Watchdog|InfoInhibitor", regex=True, equal=False)
    not_equal = M("severity", "info", equal=False)
    start = utcnow()
    ends = start + timedelta(minutes=30)
    created = []
    try:
        narrow = create_silence(client, (*seat, negative, not_equal), ends_at=ends,
                                       created_by="seat-console-test", comment="round trip")
        created.append(narrow.id)
        exact = create_silence(client, seat, ends_at=ends, created_by="seat-console-test",
                                      comment="exact")
        created.append(exact.id)
        later = create_silence(client, seat, starts_at=start + timedelta(minutes=10),
                                      ends_at=ends, created_by="seat-console-test",
                                      comment="pending")
        created.append(later.id)
        assert narrow.state == "active" and exact.state == "active"
        assert later.state == "pending" and 0 < later.starts_in_s() <= 600
        assert set(narrow.matchers) == {*seat, negative, not_equal}
        assert abs((narrow.ends_at - ends).total_seconds()) < 0.01
        assert narrow.ends_at.tzinfo is not None
        # an independent read of what Alertmanager stored: isEqual false is really false
        raw = httpx.get(f"{lab.alertmanager_url}/api/v2/silence/{narrow.id}").json()
        stored = {m["name"]: m for m in raw["matchers"]}
        assert stored["severity"]["isEqual"] is False and stored["severity"]["isRegex"] is False
        assert stored["alertname"]["isEqual"] is False and stored["alertname"]["isRegex"] is True

        reading = SilenceSource(client, seat).read()
        assert isinstance(reading, SilencesReading), reading
        by_id = {s.id: s for s in reading.silences}
        assert by_id[narrow.id].state == "active" and not by_id[narrow.id].exact
        assert by_id[exact.id].exact
        assert by_id[later.id].state == "pending"
        assert 29 * 60 < by_id[exact.id].ends_in_s(reading.read_at) <= 30 * 60
        assert reading.version and reading.total >= 3
        assert [s.state for s in reading.silences][:2] == ["active", "active"]

        for sid in list(created):
            gone = expire_silence(client, sid)
            assert gone.state == "expired"
            created.remove(sid)
        after = SilenceSource(client, seat).read()
        assert isinstance(after, SilencesReading)
        assert {s.id: s.state for s in after.silences if s.id in by_id} == {
            narrow.id: "expired", exact.id: "expired", later.id: "expired"}
        assert after.active == ()
    finally:
        for sid in created:
            expire_silence(client, sid)
        client.close()


def test_lab_expire_unknown_silence_is_an_error(lab) -> None:
    client = AlertmanagerClient(AlertmanagerSpec(url=lab.alertmanager_url))
    with pytest.raises(AlertmanagerError) as e:
        expire_silence(client, "00000000-0000-0000-0000-000000000000")
    assert e.value.kind == "http"
    client.close()


# -- a real Alertmanager with basic auth and TLS (started here) ------------------------------
@dataclass
class SecureAm:
    url: str
    ca_file: Path
    user: str
    password: str




SECURE = pytest.mark.lab
"""Tests on the secure Alertmanager need the binary the lab installs: selected with the lab."""


@pytest.fixture(scope="module")
def secure_am(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SecureAm]:
    binary = shutil.which(AM_BIN) or shutil.which(AM_BIN, path="/usr/bin:/usr/sbin")
    if binary is None or shutil.which("openssl") is None:
        pytest.fail(f"{AM_BIN} and openssl are needed: apt-get install prometheus-alertmanager "
                    "openssl (scripts/lab.py up installs Alertmanager)")
    d = tmp_path_factory.mktemp("am-secure")
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
                    "ec_paramgen_curve:prime256v1", "-nodes", "-keyout", str(d / "key.pem"),
                    "-out", str(d / "cert.pem"), "-days", "2", "-subj", "/CN=127.0.0.1",
                    "-addext", "subjectAltName=IP:127.0.0.1"], check=True, capture_output=True)
    password = "s3cret-" + os.urandom(6).hex()
    hashed = bcrypt.hashpw(password.encode(), bcrypt.gensalt(rounds=4)).decode()
    (d / "web.yml").write_text(
        f"tls_server_config:\n  cert_file: {d / 'cert.pem'}\n  key_file: {d / 'key.pem'}\n"
        f"basic_auth_users:\n  ops: '{hashed}'\n")
    (d / "am.yml").write_text("route: {receiver: 'null'}\nreceivers: [{name: 'null'}]\n")
    port = free_port(29300, 29400)
    proc = subprocess.Popen(
        [binary, f"--config.file={d / 'am.yml'}", f"--storage.path={d / 'data'}",
         f"--web.listen-address=127.0.0.1:{port}", f"--web.config.file={d / 'web.yml'}",
         "--cluster.listen-address="],
        stdout=subprocess.DEVNULL, stderr=open(d / "log", "w"))
    wait_for_port(port, proc, d / "log", "Alertmanager", timeout=20)
    try:
        yield SecureAm(url=f"https://127.0.0.1:{port}", ca_file=d / "cert.pem", user="ops",
                       password=password)
    finally:
        proc.terminate()
        proc.wait(10)


@SECURE
def test_tls_verified_by_default(secure_am: SecureAm) -> None:
    client = AlertmanagerClient(AlertmanagerSpec(url=secure_am.url, auth="basic"),
                                environ={ENV_USER: secure_am.user,
                                         ENV_PASSWORD: secure_am.password})
    r = SilenceSource(client, SEAT).read()
    assert isinstance(r, Unavailable) and r.kind == "tls", r
    assert "ca_file" in r.reason
    assert secure_am.password not in r.reason


@SECURE
def test_basic_auth_and_private_ca(secure_am: SecureAm) -> None:
    env = {ENV_USER: secure_am.user, ENV_PASSWORD: secure_am.password}
    spec = AlertmanagerSpec(url=secure_am.url, auth="basic", ca_file=secure_am.ca_file)
    client = AlertmanagerClient(spec, environ=env)
    assert secure_am.password not in repr(client)
    r = SilenceSource(client, SEAT).read()
    assert isinstance(r, SilencesReading), r
    assert r.tls_verify and r.version
    s = create_silence(client, SEAT, ends_at=utcnow() + timedelta(minutes=5),
                              created_by="seat-console-test", comment="auth")
    assert expire_silence(client, s.id).state == "expired"
    client.close()


@SECURE
def test_wrong_password_is_auth_error_without_the_secret(secure_am: SecureAm) -> None:
    wrong = "wrong-" + secure_am.password
    spec = AlertmanagerSpec(url=secure_am.url, auth="basic", ca_file=secure_am.ca_file)
    client = AlertmanagerClient(spec, environ={ENV_USER: secure_am.user, ENV_PASSWORD: wrong})
    r = SilenceSource(client, SEAT).read()
    assert isinstance(r, Unavailable) and r.kind == "auth", r
    assert "401" in r.reason
    assert wrong not in r.reason and wrong not in repr(client)
    with pytest.raises(AlertmanagerError) as e:
        create_silence(client, SEAT, ends_at=utcnow() + timedelta(minutes=5), created_by="t",
                              comment="c")
    assert e.value.kind == "auth" and wrong not in str(e.value)
    client.close()


@SECURE
def test_no_credentials_is_401(secure_am: SecureAm) -> None:
    spec = AlertmanagerSpec(url=secure_am.url, ca_file=secure_am.ca_file)
    r = SilenceSource(AlertmanagerClient(spec), SEAT).read()
    assert isinstance(r, Unavailable) and r.kind == "auth"


@SECURE
def test_credentials_are_not_logged(secure_am: SecureAm, caplog: pytest.LogCaptureFixture) -> None:
    import logging

    caplog.set_level(logging.DEBUG)
    env = {ENV_USER: secure_am.user, ENV_PASSWORD: secure_am.password}
    spec = AlertmanagerSpec(url=secure_am.url, auth="basic", ca_file=secure_am.ca_file)
    client = AlertmanagerClient(spec, environ=env)
    SilenceSource(client, SEAT).read()
    client.close()
    import base64

    b64 = base64.b64encode(f"{secure_am.user}:{secure_am.password}".encode()).decode()
    assert secure_am.password not in caplog.text and b64 not in caplog.text


def test_credentials_object_repr() -> None:
    c = Credentials("basic", "ops", SECRET, origin="environment")
    assert SECRET not in repr(c) and "redacted" in repr(c)


# -- Alertmanager's version read once a minute, not every poll (issue 33) ----------------------
class _CountingAM:
    """An Alertmanager client stand-in that counts its reads; ``fail``: the next read fails."""

    url = "http://am.test:9093"
    tls_verify = True

    def __init__(self) -> None:
        self.versions = 0
        self.fail = False

    def version(self) -> str:
        self.versions += 1
        return "0.25.0"

    def list_silences_tolerant(self):  # noqa: ANN201
        from seat_console.node.alertmanager import AlertmanagerError

        if self.fail:
            self.fail = False
            raise AlertmanagerError("unreachable", "connection refused")
        return [], []

    def close(self) -> None:
        pass


def test_version_is_kept_between_reads_and_read_again_after_a_failure(monkeypatch) -> None:
    import seat_console.sources.silences as S

    am = _CountingAM()
    from seat_console.node.alertmanager import SilenceMatcher

    seat = [SilenceMatcher(name="job", value="seat", is_regex=False, is_equal=True)]
    src = S.SilenceSource(am, seat, owns_client=False)  # type: ignore[arg-type]
    assert src.read().version == "0.25.0" and am.versions == 1
    assert src.read().version == "0.25.0" and am.versions == 1     # kept: no /api/v2/status
    am.fail = True
    assert src.read().kind == "unreachable"
    src.read()
    assert am.versions == 2                                         # read again after a failure
    monkeypatch.setattr(S, "VERSION_MAX_AGE_S", 0.0)
    src.read()
    assert am.versions == 3                                         # and when it is old
