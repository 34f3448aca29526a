"""Property tests: Alertmanager JSON and matchers (RE2 semantics), issue #12.

Entry points: :meth:`Silence.from_api`, :meth:`SilenceMatcher.matches`,
:func:`silence_applies_to_seat`, and :class:`SilenceSource` reading whatever bytes the HTTP
reply holds (a real httpx client over ``httpx.MockTransport``: the bytes are the input).
Asserted: only the documented error types, each naming its input; no call over the profile's
1 s deadline; one malformed silence or one RE2-invalid regex never blinds the panel.
"""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime, timedelta

import httpx
import pytest
from hypothesis import given
from hypothesis import strategies as st

from seat_console.core.profile import AlertmanagerSpec
from seat_console.core.base import Unavailable
from seat_console.sources.silences import SilencesReading, SilenceSource, silence_applies_to_seat
from seat_console.node.alertmanager import (
    AlertmanagerClient,
    AlertmanagerError,
    Silence,
    SilenceMatcher,
)
from seat_console.core.untrusted import InputError

SEAT = (SilenceMatcher(name="instance", value="seat-node:8000", isRegex=False, isEqual=True),
        SilenceMatcher(name="job", value="vllm", isRegex=False, isEqual=True))

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=20),
    lambda kids: st.lists(kids, max_size=4) | st.dictionaries(st.text(max_size=8), kids,
                                                              max_size=4),
    max_leaves=20)

times = st.one_of(
    st.datetimes(timezones=st.just(UTC)).map(lambda t: t.isoformat().replace("+00:00", "Z")),
    st.datetimes().map(lambda t: t.isoformat()),  # naive: must be refused
    st.text(max_size=30), st.integers(), st.none(), st.floats())

matcher_objs = st.fixed_dictionaries(
    {"name": st.one_of(st.sampled_from(["instance", "job", "alertname"]), st.integers()),
     "value": st.one_of(st.text(max_size=30), st.sampled_from(
         [r"seat-node:8000\z", r"(.*){18}x", r"(?<=a)b", r"seat-.*", r"(a|b)\1", "[", ""]),
         st.none()),
     "isRegex": st.one_of(st.booleans(), st.integers(0, 1), st.none()),
     "isEqual": st.booleans()})

silence_objs = st.fixed_dictionaries(
    {"id": st.one_of(st.uuids().map(str), st.integers(), st.none()),
     "status": st.one_of(st.fixed_dictionaries(
         {"state": st.sampled_from(["active", "pending", "expired", "odd"])}), json_values),
     "matchers": st.one_of(st.lists(matcher_objs, max_size=3), json_values),
     "startsAt": times, "endsAt": times,
     "createdBy": st.one_of(st.text(max_size=10), st.integers()),
     "comment": st.text(max_size=10)})


@given(st.one_of(silence_objs, json_values))
def test_from_api_returns_an_aware_silence_or_a_named_bad_response(obj):
    try:
        s = Silence.from_api(obj, "GET /api/v2/silences")
    except AlertmanagerError as exc:
        assert exc.kind == "bad-response"
        assert "GET /api/v2/silences" in str(exc)
        return
    for t in (s.starts_at, s.ends_at):
        assert t.tzinfo is not None and t.utcoffset() == timedelta(0)
    s.ends_in_s(datetime.now(UTC))  # arithmetic on its times never raises


@given(st.text(max_size=60), st.text(max_size=200), st.booleans())
def test_regex_matcher_is_bool_or_named_input_error_and_fast(pattern, label, equal):
    m = SilenceMatcher(name="instance", value=pattern, isRegex=True, isEqual=equal)
    t0 = time.perf_counter()
    try:
        hit = m.matches(label)
    except InputError as exc:
        assert "instance=~" in str(exc) or "instance!~" in str(exc)
    else:
        assert isinstance(hit, bool)
    assert time.perf_counter() - t0 < 0.5


def test_re2_semantics_anchored_and_go_syntax():
    z = SilenceMatcher(name="instance", value=r"seat-node:8000\z", isRegex=True)
    assert z.matches("seat-node:8000")  # Python re refuses \z ("bad escape \z")
    part = SilenceMatcher(name="instance", value="seat", isRegex=True)
    assert not part.matches("seat-node:8000")  # anchored: a full match, as Alertmanager
    nl = SilenceMatcher(name="instance", value="seat.*", isRegex=True)
    assert not nl.matches("seat\nnode")  # Go: '.' does not match a newline
    assert not SilenceMatcher(name="i", value="a$", isRegex=True).matches("a\n")  # $ = end
    t0 = time.perf_counter()
    assert not SilenceMatcher(name="i", value="(.*){18}x", isRegex=True).matches("a" * 5000)
    assert time.perf_counter() - t0 < 0.1  # Python re backtracks for hours here
    with pytest.raises(InputError, match=r'instance=~"\(\?<=a\)b"'):
        SilenceMatcher(name="instance", value="(?<=a)b", isRegex=True).matches("ab")


@given(st.lists(matcher_objs.map(lambda d: {**d, "name": str(d["name"]),
                                            "value": str(d["value"] or ""),
                                            "isRegex": bool(d["isRegex"])}), max_size=4))
def test_applies_to_seat_is_a_pair_of_bools_or_input_error(raw):
    ms = [SilenceMatcher.model_validate(d) for d in raw]
    try:
        applies, exact = silence_applies_to_seat(ms, SEAT)
    except InputError as exc:
        assert "matcher " in str(exc)
        return
    assert isinstance(applies, bool) and isinstance(exact, bool)
    assert applies or not exact


def _silence(sid: str, state: str, matchers: list[dict], ends_in_h: float = 1.0) -> dict:
    now = datetime.now(UTC)
    return {"id": sid, "status": {"state": state}, "matchers": matchers,
            "startsAt": (now - timedelta(hours=2)).isoformat().replace("+00:00", "Z"),
            "endsAt": (now + timedelta(hours=ends_in_h)).isoformat().replace("+00:00", "Z"),
            "updatedAt": now.isoformat().replace("+00:00", "Z"),
            "createdBy": "colleague", "comment": "c"}


_REPLY: dict[str, bytes] = {}


def _am_handler(request: httpx.Request) -> httpx.Response:
    return httpx.Response(200, content=_REPLY[request.url.path])


# One client for every example: building an httpx client per example costs more than the
# parsing under test (and made the 1 s deadline flaky on a loaded VM).
_AM = AlertmanagerClient(AlertmanagerSpec(url="http://127.0.0.1:9"), read_attempts=1)
_AM._client = httpx.Client(base_url=_AM.url, transport=httpx.MockTransport(_am_handler))


def _source(body: bytes, status_body: bytes = b'{"versionInfo": {"version": "0.25.0"}}'
            ) -> SilenceSource:
    _REPLY.clear()
    _REPLY.update({"/api/v2/status": status_body, "/api/v2/silences": body})
    return SilenceSource(_AM, SEAT)


def test_one_colleagues_odd_regex_does_not_blind_the_panel():
    """amtool's `instance=~"seat-node:8000\\z"` (expired, still listed) made the whole panel and
    `status` 'unavailable: bad escape \\z'. Now it matches (RE2), an RE2-invalid pattern makes
    only its own silence's match unknown, and a malformed object is listed as unreadable."""
    seat_m = [m.to_api() for m in SEAT]
    body = json.dumps([
        _silence("a-expired-z", "expired", [{"name": "instance",
                                             "value": r"seat-node:8000\z", "isRegex": True,
                                             "isEqual": True}], ends_in_h=-24),
        _silence("b-bad-re2", "active", [{"name": "instance", "value": r"seat-(?=node).*",
                                          "isRegex": True, "isEqual": True}]),
        _silence("c-hold", "active", seat_m),
        {"id": "d-broken", "status": {"state": "active"}, "matchers": {"not": "a list"}},
        _silence("e-naive", "active", seat_m) | {"endsAt": "2026-12-01T10:00:00"},
    ]).encode()
    r = _source(body).read()
    assert isinstance(r, SilencesReading), r
    by_id = {s.id: s for s in r.silences}
    assert by_id["c-hold"].exact and by_id["c-hold"] in r.active
    assert by_id["a-expired-z"].match_unknown is None  # \z is RE2: it concerns the seat
    assert "not a valid RE2" in by_id["b-bad-re2"].match_unknown
    assert by_id["b-bad-re2"] not in r.active and r.undecided == (by_id["b-bad-re2"],)
    assert len(r.unreadable) == 2
    assert any("'d-broken'" in u and "matchers" in u for u in r.unreadable)
    assert any("'e-naive'" in u and "endsAt" in u and "offset" in u for u in r.unreadable)
    assert r.total == 5


@given(st.one_of(st.binary(max_size=300),
                 json_values.map(lambda v: json.dumps(v).encode()),
                 st.lists(silence_objs, max_size=4).map(lambda v: json.dumps(v).encode()),
                 st.integers(1, 5000).map(lambda n: b"[" * n + b"]" * n),
                 st.sampled_from([b"[NaN]", b"[1e400]", b'{"a": Infinity}'])))
def test_source_reading_or_unavailable_naming_the_reply(body):
    r = _source(body).read()
    if isinstance(r, Unavailable):
        assert r.source == "silences" and r.kind == "bad-response"
        assert "/api/v2/silences" in r.reason
    else:
        assert isinstance(r, SilencesReading)
        assert r.total >= len(r.silences) >= 0
        for u in r.unreadable:
            assert u.startswith("GET /api/v2/silences: silence")


@given(json_values.map(lambda v: json.dumps(v).encode()) | st.binary(max_size=50))
def test_odd_status_reply_leaves_version_unknown_or_names_it(status_body):
    r = _source(b"[]", status_body).read()
    if isinstance(r, Unavailable):
        assert "/api/v2/status" in r.reason
    else:
        assert r.version is None or isinstance(r.version, str)


def _counting_client(status: int, attempts: int = 3) -> tuple[AlertmanagerClient, list[float]]:
    calls: list[float] = []

    def handler(request: httpx.Request) -> httpx.Response:
        calls.append(time.monotonic())
        return httpx.Response(status, content=b"busy")

    client = AlertmanagerClient(AlertmanagerSpec(url="http://127.0.0.1:9"),
                                read_attempts=attempts)
    client._client = httpx.Client(base_url=client.url, transport=httpx.MockTransport(handler))
    return client, calls


def test_idempotent_reads_retry_with_growing_back_off_counted_by_attempts():
    """The unreachable-Alertmanager test never counted attempts (a client that gave up at once,
    or retried without waiting, passed it). 503 is retried read_attempts times, waits growing;
    a 404 is not retried."""
    client, calls = _counting_client(503)
    with pytest.raises(AlertmanagerError) as e:
        client.list_silences()
    assert e.value.kind == "http" and len(calls) == 3
    gaps = [b - a for a, b in zip(calls, calls[1:])]
    assert gaps[0] >= 0.15 and gaps[1] >= 1.5 * gaps[0], gaps  # exponential: 0.2 s, 0.4 s
    client, calls = _counting_client(404)
    with pytest.raises(AlertmanagerError):
        client.list_silences()
    assert len(calls) == 1


def test_status_text_names_the_undecided_and_the_unreadable_silences():
    from seat_console.commands.status_cmd import render_silences

    body = json.dumps([
        _silence("b-bad-re2", "active", [{"name": "instance", "value": r"seat-(?=node).*",
                                          "isRegex": True, "isEqual": True}]),
        {"id": "d-broken", "status": {"state": "active"}, "matchers": 7},
    ]).encode()
    r = _source(body).read()
    text = render_silences(r, datetime.now(UTC))
    assert "0 active for the seat" in text
    assert "whether it concerns the seat is unknown" in text and "not a valid RE2" in text
    assert "unreadable silence (not shown): GET /api/v2/silences: silence 'd-broken'" in text


def test_a_narrower_silence_on_a_regex_seat_applies():
    """A silence holding every seat matcher plus more (e.g. one alertname) is a narrower silence
    on the seat, also when the seat pins no label by equality (a regex-only seat)."""
    seat = (SilenceMatcher(name="job", value="vllm.*", isRegex=True),)
    narrower = seat + (SilenceMatcher(name="alertname", value="KVCacheFull", isRegex=False),)
    assert silence_applies_to_seat(narrower, seat) == (True, False)
    assert silence_applies_to_seat(seat, seat) == (True, True)
    other = (SilenceMatcher(name="alertname", value="KVCacheFull", isRegex=False),)
    assert silence_applies_to_seat(other, seat) == (False, False)
