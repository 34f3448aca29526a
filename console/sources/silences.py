"""Alertmanager silences of the seat, read through the one Alertmanager v2 client
(:class:`seat_console.node.alertmanager.AlertmanagerClient`, on httpx).

API (Alertmanager ``api/v2/openapi.yaml``; verified against a real Alertmanager 0.25):

* ``GET /api/v2/silences`` → list of ``gettableSilence``: ``id``, ``status.state``
  (``pending`` / ``active`` / ``expired``), ``updatedAt``, ``matchers[]`` (``name``, ``value``,
  ``isRegex``, ``isEqual``), ``startsAt``, ``endsAt``, ``createdBy``, ``comment``;
* ``GET /api/v2/silence/{id}`` → one;
* ``POST /api/v2/silences`` with a ``postableSilence`` → ``{"silenceID": …}``;
* ``DELETE /api/v2/silence/{id}`` → expires it (the silence stays, with state ``expired``);
* ``GET /api/v2/status`` → ``versionInfo.version`` among others.

Rules this client keeps:

* every matcher is sent with **all four fields** (``name``, ``value``, ``isRegex``,
  ``isEqual``): an omitted ``isEqual`` defaults to ``true`` server-side, which would silently turn
  a negative matcher (``!=``) into a positive one;
* this module only reads; create / expire / extend (each verified by reading the silence back)
  live in :mod:`seat_console.actions.node_ops`, so reading code cannot change the node;
* times are timezone-aware UTC;
* credentials (basic or bearer) come from the environment or a file, never the profile, and never
  appear in a repr, log line or error message (:func:`redact`);
* TLS verification is on by default (``verify_tls``; ``ca_file`` for a private CA);
* every request has a timeout; only idempotent reads are retried (tenacity: connection errors,
  timeouts, HTTP 502/503/504, 3 attempts with exponential back-off). ``POST`` and ``DELETE`` are
  sent once.

Which silences "match the seat": see :func:`silence_applies_to_seat`.
"""

from __future__ import annotations

import time

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from pydantic import BaseModel

from seat_console.core.base import BrokenSource, Frozen, Source, Unavailable, utcnow
from seat_console.core.profile import LoadedProfile
from seat_console.core.untrusted import InputError
from seat_console.node.alertmanager import (
    AlertmanagerClient,
    AlertmanagerError,
    Silence,
    SilenceMatcher,
    redact,
)


class SilencesReading(Frozen):
    """The seat's silences at ``read_at``.

    ``url``: the Alertmanager; ``version``: its ``versionInfo.version`` (``None`` if not given);
    ``seat_matchers``: the profile's matchers; ``silences``: those that apply to the seat (see
    :func:`silence_applies_to_seat`), active first, then pending, then expired, newest end first;
    ``total``: all silences Alertmanager holds; ``tls_verify``: whether TLS is verified;
    ``unreadable``: one reason per silence object that could not be parsed (the others are
    still shown: one malformed silence must not blind the panel).
    """

    url: str
    version: str | None
    read_at: datetime
    seat_matchers: tuple[SilenceMatcher, ...]
    silences: tuple[Silence, ...]
    total: int
    tls_verify: bool
    unreadable: tuple[str, ...] = ()
    coverage: tuple[str, ...] = ()
    """:func:`coverage_warnings` of the profile's matchers against the seat's instance
    (``seat.prometheus_instance``, else ``seat.endpoint``'s host:port): the
    hold's silence would not cover the seat (shown as a warning)."""

    @property
    def active(self) -> tuple[Silence, ...]:
        """The silences in state ``active`` that are known to concern the seat."""
        return tuple(s for s in self.silences if s.state == "active" and s.match_unknown is None)

    @property
    def undecided(self) -> tuple[Silence, ...]:
        """Silences for which it cannot be told whether they concern the seat (see
        :attr:`Silence.match_unknown`)."""
        return tuple(s for s in self.silences if s.match_unknown is not None)


def seat_labels(seat: Sequence[SilenceMatcher]) -> dict[str, str]:
    """The label values the seat's plain equality matchers pin down (``name="value"``)."""
    return {m.name: m.value for m in seat if m.is_equal and not m.is_regex}


def silence_applies_to_seat(silence: Sequence[SilenceMatcher],
                            seat: Sequence[SilenceMatcher]) -> tuple[bool, bool]:
    """Whether a silence concerns the seat: ``(applies, exact)``.

    ``exact``: the silence's matcher set equals the seat's (the hold's own silence). ``applies``:
    exact, or the silence contains every seat matcher (a narrower silence on the seat), or — for
    the labels the seat pins with ``name="value"`` — every silence matcher on one of those labels
    matches the seat's value and at least one such matcher exists (e.g. ``instance=~"seat-.*"``).
    Matchers on other labels (``alertname``…) narrow a silence but do not make it foreign.
    Raises :class:`~seat_console.core.untrusted.InputError` (naming the matcher) when a regex
    matcher that decides it is not valid RE2: the answer is then unknown, for that silence only.
    """
    s_set, seat_set = set(silence), set(seat)
    exact = s_set == seat_set
    if exact or seat_set <= s_set:
        return True, exact
    labels = seat_labels(seat)
    on_seat = [m for m in silence if m.name in labels]
    if on_seat and all(m.matches(labels[m.name]) for m in on_seat):
        return True, False
    return False, False


def seat_instance(endpoint: str) -> str:
    """``host:port`` of the seat's endpoint URL (``seat.endpoint``), as Prometheus writes a
    scrape target's ``instance`` label (its default: the target's ``__address__``,
    https://prometheus.io/docs/concepts/jobs_instances/); the scheme's port (80 / 443) when the
    URL has none. Raises :class:`ValueError` for a URL without a host."""
    from urllib.parse import urlsplit

    u = urlsplit(str(endpoint))
    if not u.hostname:
        raise ValueError(f"seat.endpoint {endpoint!r} has no host")
    host = f"[{u.hostname}]" if ":" in u.hostname else u.hostname
    return f"{host}:{u.port or (443 if u.scheme == 'https' else 80)}"


def coverage_warnings(matchers: Sequence[SilenceMatcher], endpoint: str,
                      instance: str | None = None) -> list[str]:
    """Why the hold's silence (``matchers``: the profile's ``[[silence.matchers]]``) would not
    cover the seat: one sentence per ``instance`` matcher that does not match the seat's own
    ``instance`` label — ``instance`` (the profile's ``seat.prometheus_instance``: the label as
    the fleet's Prometheus scrapes the seat) when given, else :func:`seat_instance` of
    ``endpoint`` (``seat.endpoint``) — e.g. "the hold's silence would not cover the seat:
    matcher instance="127.0.0.1:18001" vs the seat's 127.0.0.1:18000 (seat.endpoint)"; ``[]``
    when each matches (or there is none: the other matchers then decide). A regex RE2 refuses
    gives a sentence saying so."""
    where = "seat.prometheus_instance" if instance else "seat.endpoint"
    try:
        inst = instance or seat_instance(endpoint)
    except ValueError as exc:
        return [f"cannot tell whether the hold's silence covers the seat: {exc}"]
    out = []
    for m in matchers:
        if m.name != "instance":
            continue
        try:
            ok = m.matches(inst)
        except InputError as exc:
            out.append(f"cannot tell whether the hold's silence covers the seat: {exc}")
            continue
        if not ok:
            out.append(f"the hold's silence would not cover the seat: matcher {m} vs the "
                       f"seat's {inst} ({where})")
    return out


_ORDER = {"active": 0, "pending": 1, "expired": 2}


# -- source ------------------------------------------------------------------------------------
VERSION_MAX_AGE_S = 60.0
"""Seconds a silences source keeps Alertmanager's version before reading it again (it changes
only when Alertmanager is replaced; a failed read forgets it at once)."""


class SilenceSource(Source):
    """Polls Alertmanager for the seat's silences (``name = "silences"``)."""

    name = "silences"

    def __init__(self, client: AlertmanagerClient, seat: Sequence[SilenceMatcher], *,
                 owns_client: bool = True, endpoint: str | None = None,
                 instance: str | None = None) -> None:
        self.client = client
        self.seat = tuple(seat)
        self.coverage = (tuple(coverage_warnings(self.seat, endpoint or "", instance))
                         if endpoint or instance else ())
        """Set once from the profile (``endpoint``: ``seat.endpoint``; ``instance``:
        ``seat.prometheus_instance``)."""
        self.owns_client = owns_client
        """``False``: the client is shared (the app's node context closes it)."""
        self._version: str | None = None
        self._version_at: float | None = None
        """When :attr:`_version` was read (monotonic s); ``None``: read it again."""
        self._mine_last: tuple[tuple[int, ...], tuple[Silence, ...], tuple[Silence, ...]] \
            | None = None
        """The last :meth:`_seat_silences`: the ids of the silences it was given, its result,
        and those silences (held, so their ids stay theirs)."""

    def read(self) -> BaseModel:
        """A :class:`SilencesReading` or :class:`Unavailable` (kind from
        :class:`AlertmanagerError`); never raises, never shows a secret. Alertmanager's
        version (``GET /api/v2/status``, a large answer: its whole configuration) is read
        again only after :data:`VERSION_MAX_AGE_S` or a failed read."""
        try:
            now = time.monotonic()
            if self._version_at is None or now - self._version_at > VERSION_MAX_AGE_S:
                self._version_at = None
                self._version = self.client.version()
                self._version_at = now
            version = self._version
            all_s, unreadable = self.client.list_silences_tolerant()
        except AlertmanagerError as exc:
            self._version_at = None
            return Unavailable(source=self.name, kind=exc.kind, reason=str(exc))
        except Exception as exc:  # noqa: BLE001 - never raise into the UI
            self._version_at = None
            return Unavailable(source=self.name, kind="error", reason=redact(
                f"{type(exc).__name__}: {exc}", self.client.credentials.secrets()))
        mine = self._seat_silences(all_s)
        return SilencesReading(url=self.client.url, version=version, read_at=utcnow(),
                               seat_matchers=self.seat, silences=tuple(mine),
                               total=len(all_s) + len(unreadable),
                               tls_verify=self.client.tls_verify,
                               unreadable=tuple(unreadable), coverage=self.coverage)

    def _seat_silences(self, all_s: Sequence[Silence]) -> list[Silence]:
        """The silences of ``all_s`` that apply to the seat (each marked ``exact`` or with why
        its match is unknown), most relevant first. The same silence objects as last time —
        Alertmanager's answer unchanged (:meth:`AlertmanagerClient.list_silences_tolerant`
        parses a body once) — give the last result without matching them again."""
        key = tuple(map(id, all_s))
        last = self._mine_last
        if last is not None and last[0] == key:
            return list(last[1])
        mine = []
        for s in all_s:
            try:
                applies, exact = silence_applies_to_seat(s.matchers, self.seat)
            except InputError as exc:
                # one silence's regex RE2 refuses: that silence's match is unknown, no more
                mine.append(s.model_copy(update={"match_unknown": str(exc)}))
                continue
            if applies:
                mine.append(s.model_copy(update={"exact": exact}))
        mine.sort(key=lambda s: (_ORDER[s.state], -s.ends_at.timestamp()))
        # the objects themselves are kept with their ids, so an id is not reused meanwhile
        self._mine_last = (key, tuple(mine), tuple(all_s))
        return mine

    def close(self) -> None:
        """Close the HTTP client (unless it is shared)."""
        if self.owns_client:
            self.client.close()


def make_source(loaded: LoadedProfile, *, context: Any | None = None) -> Source:
    """The silences source for ``loaded``'s ``[alertmanager]`` and ``[silence]`` matchers.

    ``context``: the app's :class:`~seat_console.node.context.NodeContext` — its Alertmanager
    client is used (the one the hold's steps use); without it the source makes its own. Bad
    auth configuration (missing credentials, URL with credentials) becomes a source that
    reports it as :class:`Unavailable` (kind ``config``) on every read.
    """
    p = loaded.profile
    matchers = [SilenceMatcher.from_profile(m) for m in p.silence.matchers]
    try:
        if context is not None:
            return SilenceSource(context.alertmanager, matchers, owns_client=False,
                                 endpoint=str(p.seat.endpoint),
                                 instance=p.seat.prometheus_instance)
        client = AlertmanagerClient(p.alertmanager)
    except AlertmanagerError as exc:
        return BrokenSource("silences", str(exc))
    return SilenceSource(client, matchers, endpoint=str(p.seat.endpoint),
                         instance=p.seat.prometheus_instance)


__all__ = ["SilenceSource", "SilencesReading", "coverage_warnings", "make_source", "seat_labels",
           "seat_instance", "silence_applies_to_seat"]
