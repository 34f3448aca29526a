"""The fleet's rows: a fixed set of PromQL instant queries per refresh, whatever the seat count.

Every refresh sends the :func:`wire_queries` (4 instant queries at most, :data:`REFRESH_QUERIES`,
each aggregated ``by (instance)``
— never one query per node; the ten parts of :func:`queries`, the small ones merged with
``or``) evaluated at one instant, plus one Alertmanager
``GET /api/v2/silences`` for all silences, and joins the answers by the ``instance`` label into
one :class:`FleetRow` per seat. All of a seat's series must share its ``instance`` value (the
fleet simulator's do; in a real fleet relabel the exporter's, vLLM's and dcgm-exporter's jobs
to one ``instance`` per node — docs/fleet.md).

Staleness (a seat whose series stopped being scraped must never look healthy): the ``seen``
query gives each seat's last sample time of ``seat_engine_up`` — the exact time while the
series is current (``timestamp()``), else the last one from subqueries
(``last_over_time(timestamp(…)[W:S])``: one scrape interval's accuracy over the last 40
intervals, ``window / 60`` beyond, up to :attr:`Fleet.window_s`), so seats whose series
vanished (Prometheus wrote staleness markers) still have a row. A row not
scraped for more than two scrape intervals is ``stale N s``; a seat of the profile's inventory
with no series in the window is ``no series``.

Trouble order (:data:`RANK`): hold without a lease, hold lease overdue (:func:`lease_overdue`),
engine down and not held, stale / no series, unknown, held, healthy; by node name within a rank.

When Prometheus does not answer the ``seen`` query (down, slow, an error), the refresh keeps
the last good rows and says how old they are and why (:class:`FleetReading`); a failure of
another query blanks only its columns (``state``: hold, silence, probe, runbook, sources;
``numbers``: requests, KV, GPU — unknown, never 0) and is listed in ``problems``;
``warnings`` (partial responses of Thanos / Mimir) are passed on to the screen.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, fields, replace
from datetime import UTC, datetime
from typing import Any

from seat_console.core.fmt import GIB, MIB, fmt_duration, gib  # dcgm-exporter's DCGM_FI_DEV_FB_* are in MiB
from seat_console.fleet.promapi import PromClient, PromError, QueryResult, promql_string

MAX_CLOCK_SKEW_S = 30.0
"""How far after this console's clock a seat's last sample may be dated and still be read as
current (clocks of a fleet disagree by a few seconds under NTP). A sample dated later is not
fresh: the seat's row is ``unknown`` with the reason, never healthy."""
MAX_UNIX_S = 253_402_300_799.0
"""The last unix second a calendar time can have (9999-12-31T23:59:59Z, :mod:`datetime`'s
limit): a larger "time" (one in milliseconds, ``1e300``) is not a time."""
MAX_COUNT = float(2**53)
"""The largest request count read (a float64 counts by one up to 2^53)."""
MAX_MIB = 1024.0**3
"""The largest per-seat DCGM memory sum read, in MiB (2^30 MiB = 1 PiB)."""
MAX_CARDS = 4096
"""The largest card count of one seat read."""


def raw_number(v: float | None) -> str:
    """A sample value as Prometheus writes it, for reasons: ``+Inf``, ``-Inf``, ``1.7e+12``;
    ``None`` (``NaN`` or not a number) as ``NaN``."""
    if v is None:
        return "NaN"
    if math.isinf(v):
        return "+Inf" if v > 0 else "-Inf"
    return f"{v:.6g}"


def _amount(got: Mapping[str, float | None], key: str, what: str, top: float,
            why: list[str]) -> float | None:
    """``got[key]`` when it is a finite number in ``0..top``; else ``None`` (absent: no
    reason; present and ``NaN``, infinite, negative or above ``top``: the reason appended to
    ``why``)."""
    if key not in got:
        return None
    v = got[key]
    if v is not None and math.isfinite(v) and 0 <= v <= top:
        return v
    why.append(f"{what}: {raw_number(v)} from Prometheus is not a number in 0..{top:.6g}; "
               "unknown")
    return None


def unix_time(v: float | None, what: str, why: list[str]) -> float | None:
    """``v`` when it is a unix time in seconds a calendar can write (finite, ``0`` to
    :data:`MAX_UNIX_S`); else ``None`` with the reason appended to ``why`` (a value that is
    a time in milliseconds says so). ``None`` in, ``None`` out, no reason."""
    if v is None or (math.isfinite(v) and 0 <= v <= MAX_UNIX_S):
        return v
    hint = " (milliseconds? Prometheus times are seconds)" \
        if math.isfinite(v) and MAX_UNIX_S < v <= MAX_UNIX_S * 1000 else ""
    why.append(f"{what}: {raw_number(v)} from Prometheus is not a unix time in seconds"
               f"{hint}; unknown")
    return None


def seen_problem(last: float, now: float) -> str | None:
    """Why a seat's last sample time ``last`` (unix s, from the ``seen`` query) cannot say
    whether the seat is current at ``now``, or ``None`` when it can: not a time
    (:func:`unix_time`), or dated more than :data:`MAX_CLOCK_SKEW_S` after ``now``."""
    why: list[str] = []
    if unix_time(last, "last sample time", why) is None:
        return why[0]
    if last > now + MAX_CLOCK_SKEW_S:
        return (f"last sample time {iso(last)} is {last - now:,.0f} s after this console's "
                f"clock (more than the {MAX_CLOCK_SKEW_S:g} s of clock skew allowed): the "
                "seat is not read as current")
    return None

CORE_FLAGS = ("seat_engine_up", "seat_hold_active", "seat_hold_lease_armed",
              "seat_hold_without_lease", "seat_silence_active")
"""The flag families an exporter always sends for what it could read (the seat's state is
decided from these; one missing makes the flags it would have settled unknown)."""
STATE_FLAGS = CORE_FLAGS + ("seat_probe_disrupted",)
"""Every flag family decoded. ``seat_probe_disrupted`` is sent only while a probe run is kept on
the node (``console/exporter/model.py``): a seat that never ran a probe lacks it, which makes
its ``probe_disrupted`` unknown and nothing else."""
TIME_GAUGES = ("seat_hold_expiry_timestamp_seconds", "seat_silence_end_timestamp_seconds",
               "seat_downtime_seconds")
"""Gauges read per seat by the ``times`` query: two unix times, and the seat's downtime (s)
in its newest runbook run (:attr:`FleetRow.downtime_s`)."""
MAX_DOWNTIME_S = 7 * 86400.0
"""A seat downtime above this (a week, in seconds) is not one a runbook run measured: unknown."""
KV_NAMES = ("vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc")
"""vLLM's KV cache usage (0..1) under its current and its pre-0.10 name (found by either)."""
DCGM_NAMES = ("DCGM_FI_DEV_FB_USED", "DCGM_FI_DEV_FB_FREE", "DCGM_FI_DEV_FB_RESERVED")


def _names(names: Iterable[str]) -> str:
    return "|".join(names)   # metric names hold no regex metacharacters but ':' and '_'


NUMBER_QUERIES = ("requests", "kv", "gpu")
"""The queries of the seats' moving numbers (requests running / waiting, KV cache usage, GPU
memory): ~6 of a seat's ~10 series, which change at every scrape. The screen asks for them only
for the rows in and around its window (:meth:`Fleet.refresh`'s ``window``); ``fleet --json``
and a refresh without a window ask for every seat's."""
STATE_QUERIES = ("seen", "identity", "states", "times", "probe", "runbook", "sources_down")
"""The queries every refresh sends for every seat: the trouble order, the ``/`` filter and the
header's counts depend on them (7)."""


def queries(window_s: float, scrape_interval_s: float) -> dict[str, str]:
    """The parts of one refresh's instant queries, name → PromQL (10; independent of the seat
    count): the :data:`STATE_QUERIES` then the :data:`NUMBER_QUERIES` for every seat. A
    refresh sends them as the 4 :func:`wire_queries` (the small parts merged).

    ``window_s``: how far back a vanished seat is still listed (s); ``scrape_interval_s``:
    the scrape interval (s). ``seen`` is ``A or B or C``: A the current sample's exact time;
    B the last sample time over the last 40 intervals at one-interval steps (a seat that just
    vanished: exact to one interval); C over the whole window at ``window / 60`` steps (60
    points per seat: the subquery at one-interval steps over 10 min was 0.4 s of a
    1,000-seat refresh). B and C are negated: a positive value is a seat with a current
    sample, a negative one a seat without (its series stale-marked), last seen at ``-value``.

    ``states`` is sparse: only what is not usual — a flag family's series that is not 0,
    ``engine_not_up`` where ``seat_engine_up`` is not 1, ``present`` (the count of distinct
    :data:`CORE_FLAGS` families sent) where it is not all of them. A seat with a current sample
    and nothing here sent every core family at its usual value (:func:`state_flags`): at
    1,000 seats the answer is the ~100 seats in trouble, not a series or two for each."""
    iv = max(1, int(round(scrape_interval_s)))
    fine = min(int(window_s), 40 * iv)
    coarse = max(iv, int(window_s // 60))
    ts, w = "timestamp(seat_engine_up)", f"{int(window_s)}s"
    core = f'count by (instance) (count by (instance, __name__) ({{__name__=~"{_names(CORE_FLAGS)}"}}))'
    return {
        "seen": (f"max by (instance) ({ts}) or -max by (instance) (last_over_time({ts}"
                 f"[{fine}s:{iv}s])) or -max by (instance) (last_over_time({ts}"
                 f"[{int(window_s)}s:{coarse}s]))"),
        "identity": f"group by (instance, node) (last_over_time(seat_info[{w}]))",
        "states": (f'max by (instance, __name__) ({{__name__=~"{_names(STATE_FLAGS[1:])}"}} != 0)'
                   ' or label_replace(max by (instance) (seat_engine_up != 1), "q", '
                   f'"engine_not_up", "", "") or label_replace({core} != {len(CORE_FLAGS)}, '
                   '"q", "present", "", "")'),
        "times": f'max by (instance, __name__) ({{__name__=~"{_names(TIME_GAUGES)}"}})',
        "probe": "group by (instance, phase) (seat_probe_phase_info)",
        "runbook": ("group by (instance, runbook, step) (seat_runbook_active) or "
                    "group by (instance, stage, status) (seat_runbook_next_info)"),
        "sources_down": "group by (instance, source) (seat_source_up == 0)",
        **number_queries(None),
    }


_RE_SPECIAL = frozenset("\\.+*?()|[]{}^$")


def instance_matcher(instances: Iterable[str] | None) -> str:
    """A label matcher to put inside a selector's braces, ``', instance=~"a|b"'``, that keeps
    only the series of ``instances`` (``None``: every seat, ``''``). Each value is matched
    literally: RE2's metacharacters are escaped with a backslash (RE2, which Prometheus' Go
    ``regexp`` implements, reads a backslash before punctuation as that character), and the
    whole pattern is quoted as a PromQL string (:func:`promql_string`); PromQL anchors ``=~``
    at both ends. Sorted, so one window gives one query text."""
    if instances is None:
        return ""
    alt = "|".join("".join("\\" + c if c in _RE_SPECIAL else c for c in inst)
                   for inst in sorted(set(instances)))
    return f", instance=~{promql_string(alt)}"


def number_queries(instances: Iterable[str] | None) -> dict[str, str]:
    """The :data:`NUMBER_QUERIES`, name → PromQL, for ``instances`` only (``None``: every
    seat); the instance matcher is :func:`instance_matcher`. ``requests`` also carries
    ``q="probe_zero"`` where the seat sends ``seat_probe_disrupted`` (a kept probe run) and it
    is 0: the seat's probe is known not to be disrupted (``False``) rather than unknown. Raises nothing; an empty
    ``instances`` gives queries that match nothing (the caller skips them)."""
    m = instance_matcher(instances)
    return {
        "requests": ('sum by (instance, __name__) ({__name__=~"vllm:num_requests_running|'
                     f'vllm:num_requests_waiting"{m}}}) or label_replace(count by (instance) '
                     f'({{__name__="seat_probe_disrupted"{m}}} == 0), "q", "probe_zero", "", "")'),
        "kv": f'max by (instance) ({{__name__=~"{_names(KV_NAMES)}"{m}}})',
        "gpu": gpu_query(m),
    }


PART = "part"
"""The label each part of a merged query is tagged with (:func:`merge`)."""
WIRE = {"state": ("states", "times", "probe", "runbook", "sources_down"),
        "numbers": NUMBER_QUERIES}
"""The merged queries a refresh sends, name → the :func:`queries` parts each carries. A query
costs the client ~0.6 ms of CPU before its first series (request, headers, retry wrapper,
JSON envelope) and a thread: five small state queries sent as one saved ~3 ms of a
1,000-seat refresh's ~20 (docs/benchmarks.md)."""


def merge(parts: Mapping[str, str]) -> str:
    """One PromQL instant query that answers every ``parts`` query (name → PromQL) at once:
    each part wrapped in ``label_replace(…, "part", name, "", "")`` and the parts joined with
    ``or``. The tag keeps them apart: ``or`` matches label sets without ``__name__`` (checked
    on Prometheus 2.42: ``max by (instance, __name__) (a) or max by (instance, __name__) (b)``
    drops ``b`` of every instance in ``a``), so two parts that aggregate ``by (instance,
    __name__)`` would otherwise shadow each other. Every part aggregates ``by`` its own labels,
    so no scraped ``part`` label reaches the answer. :func:`split` takes it apart."""
    return " or ".join(f'label_replace({q}, "{PART}", "{n}", "", "")' for n, q in parts.items())


def split(res: QueryResult | None, names: Sequence[str]) -> dict[str, QueryResult | None]:
    """The answer of a :func:`merge` query → one :class:`QueryResult` per part name (``None``
    for all when ``res`` is ``None``: the query failed). A series tagged with no name of
    ``names`` is left out and named in the first part's ``problems``; warnings go with the
    first part. Raises nothing."""
    if res is None:
        return dict.fromkeys(names)
    by: dict[str, list] = {n: [] for n in names}
    stray = 0
    for s in res.series:
        b = by.get(s.labels.get(PART, ""))
        if b is None:
            stray += 1
        else:
            b.append(s)
    problems = res.problems + ((f"{stray} series of the merged query carry no known "
                                f"'{PART}' label (a proxy rewrote labels?); left out",)
                               if stray else ())
    return {n: QueryResult(res.query, res.result_type, tuple(by[n]),
                           res.warnings if i == 0 else (), problems if i == 0 else ())
            for i, n in enumerate(names)}


def wire_queries(window_s: float, scrape_interval_s: float) -> dict[str, str]:
    """The instant queries a refresh sends, name → PromQL (4, independent of the seat count):
    ``seen`` and ``identity`` of :func:`queries`, ``state`` (its other five state parts
    merged) and ``numbers`` (the three :data:`NUMBER_QUERIES` merged, every seat's:
    a windowed refresh sends :func:`number_queries` for its window instead)."""
    q = queries(window_s, scrape_interval_s)
    out = {"seen": q["seen"], "identity": q["identity"]}
    out.update({w: merge({n: q[n] for n in parts}) for w, parts in WIRE.items()})
    return out


def gpu_query(match: str = "") -> str:
    """The ``gpu`` query: three series a seat (four with ``_RESERVED``), summed by
    ``instance`` in PromQL — not one per card and family (1,000 seats × 2 cards × 2 families
    was the largest reply, 0.63 MB). ``match``: extra label matchers for every selector
    (:func:`instance_matcher`; ``''``: every seat).

    Series: ``q="cards"`` — the seat's cards (distinct ``UUID``) with any DCGM series;
    ``__name__="DCGM_FI_DEV_FB_USED"`` / ``_FREE`` — the family's sum over the seat's cards
    (dcgm-exporter, MiB), only when the family has exactly one series per card (the ``and``
    guard: a partial sum, or a card counted twice, is never shown as the seat's);
    ``q="reserved"`` — ``_RESERVED`` summed over the cards that have it (a card without it
    counts 0; labelled apart because ``or`` matches label sets without ``__name__``). A
    ``NaN`` sample makes its sum ``NaN``: unknown. Checked by ``promtool`` in
    ``tests/test_fleet_gpu_promql.py``."""
    used, free, reserved = DCGM_NAMES
    fam = f'{{__name__=~"{used}|{free}"{match}}}'
    cards = (f'count by (instance) (max by (instance, UUID) '
             f'({{__name__=~"{_names(DCGM_NAMES)}"{match}}}))')
    return (f'label_replace({cards}, "q", "cards", "", "") or (sum by (instance, __name__) '
            f'({fam}) and on (instance, __name__) (count by (instance, __name__) ({fam}) == on '
            f'(instance) group_left () {cards})) or label_replace(sum by (instance) '
            f'({{__name__="{reserved}"{match}}}), "q", "reserved", "", "")')


REFRESH_QUERIES = tuple(wire_queries(600.0, 15.0))
"""The instant queries one refresh sends at most, by name (``seen``, ``identity``, ``state``,
``numbers``): as many for any seat count, window or scrape interval. ``identity`` is left out
while its answer is reused (:attr:`Fleet.identity_every_s`), ``numbers`` when the screen's
window wants no seat's numbers; a numbers-only read (:meth:`Fleet.read_numbers`) sends one
more between refreshes; each retry is one more request (:attr:`FleetReading.later_queries`,
:attr:`FleetReading.queries`)."""
REUSED_QUERIES = ("identity",)
"""The queries of :data:`REFRESH_QUERIES` whose answer a refresh may reuse instead of
sending."""


RANK = {"without-lease": 0, "hold-overdue": 1, "down": 2, "stale": 3, "no-series": 3,
        "unknown": 4, "held": 5, "healthy": 6}
"""Trouble order of a row's ``state`` (lower first)."""
OVERDUE_AFTER_INTERVALS = 2
"""A hold lease is overdue once its end is more than this many scrape intervals past: the lease
fires at its end and the hold is released within a scrape or two of it (the same two intervals
as staleness), so a seat seen held just after its end is not called overdue."""


def lease_overdue(hold: str | None, hold_until: float | None, now: float,
                  scrape_interval_s: float) -> bool:
    """Whether a seat's hold lease is overdue at ``now`` (unix s, UTC): the seat is held with
    a lease (``hold`` ``lease``) whose end ``hold_until`` is more than
    :data:`OVERDUE_AFTER_INTERVALS` scrape intervals before ``now`` — the lease should have
    fired and restored the timers, and the seat is still held (e.g. ``until 07:12Z`` read at
    08:21): the restore did not run. Unknown end (``None``): not overdue."""
    return hold == "lease" and hold_until is not None and \
        hold_until < now - OVERDUE_AFTER_INTERVALS * scrape_interval_s


@dataclass(frozen=True)
class InventoryEntry:
    """A seat the profile's ``[fleet] inventory`` names: ``instance`` (its Prometheus label),
    ``node`` (display name), ``profile`` (its seat profile's path where the console runs),
    ``ssh`` (``user@host`` for the SSH transport; ``None``: run the console here)."""

    instance: str
    node: str | None = None
    profile: str | None = None
    ssh: str | None = None


@dataclass(slots=True)
class FleetRow:
    """One seat. Times are unix seconds (UTC); memory in bytes; ``None`` is unknown (never 0).

    Treat it as immutable (build a changed copy with :func:`dataclasses.replace`): a row is
    built once on the refresh thread and then read by the UI thread. It is not ``frozen``
    only because a frozen dataclass's ``__init__`` was 4× slower (2.8 vs 0.7 µs) and a
    refresh builds one row per seat (1,000+).

    ``state``: ``without-lease`` / ``hold-overdue`` (held, its lease's end past:
    :func:`lease_overdue`) / ``down`` (engine down, not held) / ``stale`` / ``no-series``
    / ``unknown`` / ``held`` / ``healthy``. ``stale_s``: seconds since its last sample.
    ``hold``: ``none`` / ``lease`` / ``without-lease`` / ``held`` (active, no lease armed
    without being the dangerous case, e.g. lease state unknown) / ``None``.
    ``silence``: ``none`` / ``active`` / ``pending`` / ``None``; ``silence_from``:
    ``alertmanager`` or ``exporter`` (Alertmanager unavailable: the exporter's view).
    ``gpus``: cards with DCGM series (0: no DCGM; -1: the ``gpu`` query failed).
    ``runbook``: unfinished runbook runs (``swap:probe``); ``stage``: the seat-swap
    runbook's next stage while a cycle is under way (``backport``; ``hold failed``: its status
    when not ``todo``), from ``seat_runbook_next_info``; ``None`` at rest or unknown.
    ``kv_usage``: 0..1. ``numbers_read``: whether this refresh read the moving numbers
    (``running``, ``waiting``, ``kv_usage``, the GPU fields) for this seat — false for a row
    away from the screen's window (:meth:`Fleet.refresh`): they are then ``None`` and shown as
    ``…`` (not read), never as a value. ``unknown``: why values Prometheus sent were not
    taken (non-finite, out of range, a time that is not one), one sentence each naming the
    value; those fields are ``None``. A row whose last sample time is not usable
    (:func:`seen_problem`) is ``unknown`` with ``last_seen`` ``None`` and nothing read as
    current.
    """

    instance: str
    node: str
    state: str
    last_seen: float | None = None
    stale_s: float | None = None
    engine_up: bool | None = None
    running: float | None = None
    waiting: float | None = None
    kv_usage: float | None = None
    gpus: int = 0
    gpu_used_bytes: int | None = None
    gpu_total_bytes: int | None = None
    hold: str | None = None
    hold_until: float | None = None
    silence: str | None = None
    silence_until: float | None = None
    silence_from: str = "alertmanager"
    probe_phase: str | None = None
    runbook: str | None = None
    stage: str | None = None
    probe_disrupted: bool | None = None
    sources_down: tuple[str, ...] = ()
    downtime_s: float | None = None
    """How long the seat was down in its newest runbook run (``seat_downtime_seconds``: the
    drain to the first verified completion after it); ``None``: none measured or unknown."""
    in_inventory: bool = False
    numbers_read: bool = True
    unknown: tuple[str, ...] = ()

    @property
    def rank(self) -> int:
        """Its trouble rank (:data:`RANK`)."""
        return RANK.get(self.state, RANK["unknown"])

    def to_json(self) -> dict[str, Any]:
        """The row as JSON-ready data: times as ``2026-12-01T12:41:30Z`` strings."""
        d = asdict(self)
        for k in ("last_seen", "hold_until", "silence_until"):
            d[k] = iso(d[k])
        d["sources_down"] = list(self.sources_down)
        d["unknown"] = list(self.unknown)
        return d


def iso(t: float | None) -> str | None:
    """Unix seconds → ``2026-12-01T12:41:30Z`` (UTC, no microseconds); ``None``, and a value
    no calendar can write (non-finite, before 1970, after :data:`MAX_UNIX_S`) → ``None``.
    Raises nothing."""
    if t is None or not (math.isfinite(t) and 0 <= t <= MAX_UNIX_S):
        return None
    return datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def hhmm(t: float, now: float) -> str:
    """``12:41Z`` for a time within 20 h of ``now``, else ``2026-12-03T12:41:30Z``; ``?``
    for a value that is not a time (:func:`iso`)."""
    full = iso(t)
    if full is None:
        return "?"
    if abs(t - now) < 20 * 3600:
        return full[11:16] + "Z"
    return full


COLUMNS = (("node", "Node"), ("engine", "Engine"), ("hold", "Hold"), ("silence", "Silence"),
           ("running", "Run"), ("waiting", "Wait"), ("kv", "KV"), ("gpu", "GPU GiB"),
           ("probe", "Probe"))
"""The table's columns: key, header. ``GPU GiB`` is used/total over the seat's cards (GiB =
2^30 B, one decimal truncated)."""


def content_widths(rows: Sequence[FleetRow], now: float, narrow: bool = False
                   ) -> dict[str, int]:
    """Per column of :data:`COLUMNS`, the widest of its header and its cells over ``rows``
    (:func:`cells` at ``now``, unix s; characters): what the table needs to show every cell
    whole."""
    need = {k: len(h) for k, h in COLUMNS}
    keys = [k for k, _ in COLUMNS]
    for r in rows:
        for k, text in zip(keys, cells(r, now, narrow=narrow), strict=True):
            if len(text) > need[k]:
                need[k] = len(text)
    return need


def cells(row: FleetRow, now: float, narrow: bool = False) -> tuple[str, ...]:
    """The row's texts in :data:`COLUMNS` order, at ``now`` (unix s). Plain strings (no
    markup): unknown is ``n/a``, never 0; numbers this refresh did not read
    (``numbers_read`` false) are ``…``. ``narrow`` (an 80-column terminal): the silence's
    end without "until", GPU memory in whole GiB (truncated)."""
    if row.state == "no-series":
        engine = "no series"
    elif row.state == "stale":
        engine = ("stale " + fmt_duration(now - row.last_seen if row.last_seen else None,
                                           style="cell", unknown="?"))
    else:
        engine = {True: "up", False: "DOWN", None: "?"}[row.engine_up]
    if row.hold == "without-lease":
        hold = "WITHOUT LEASE"
    elif row.hold == "lease" and row.state == "hold-overdue" and row.hold_until:
        hold = f"OVERDUE {hhmm(row.hold_until, now)}"
    elif row.hold == "lease":
        hold = f"until {hhmm(row.hold_until, now)}" if row.hold_until else "lease, no end"
    elif row.hold == "held":
        hold = "held"
    else:
        hold = row.hold or ("n/a" if row.state not in ("stale", "no-series") else "")
    if row.silence == "active":
        silence = ((hhmm(row.silence_until, now) if narrow else
                    f"until {hhmm(row.silence_until, now)}") if row.silence_until else "active")
    elif row.silence == "pending":
        silence = "pending"
    else:
        silence = row.silence or "n/a"
    if row.silence_from == "exporter" and row.silence is not None:
        silence += "*"
    num = (lambda v: "n/a" if v is None else f"{v:.0f}")
    kv = "n/a" if row.kv_usage is None else f"{row.kv_usage * 100:.0f}%"
    if row.state in ("stale", "no-series"):
        gpu = "n/a"
    elif not row.numbers_read:
        return (row.node, engine, hold, silence, "…", "…", "…", "…", _probe(row))
    elif row.gpus < 0:
        gpu = "n/a"
    elif row.gpus == 0:
        gpu = "no DCGM"
    else:
        d = 0 if narrow else 1     # the one byte rule: truncated, no thousands separator
        gpu = (f"{gib(row.gpu_used_bytes, d, group=False)}/"
               f"{gib(row.gpu_total_bytes, d, group=False)}")
    return (row.node, engine, hold, silence, num(row.running), num(row.waiting), kv, gpu,
            _probe(row))


def _probe(row: FleetRow) -> str:
    probe = row.probe_phase or row.runbook or (f"next {row.stage}" if row.stage else "")
    if row.probe_disrupted:
        probe = f"{probe} DISRUPTED".strip()
    return probe


@dataclass(frozen=True)
class FleetReading:
    """One refresh. ``rows``: trouble first (the last good rows when ``ok`` is false);
    ``taken_at``: when this refresh ran (unix s); ``rows_at``: when the shown rows were read
    (``None``: never); ``ok``: Prometheus answered the ``seen`` query; ``error``: why not;
    ``warnings``: the server's partial-response warnings; ``problems``: failed queries,
    malformed series, Alertmanager trouble; ``queries``: instant queries sent (HTTP requests,
    retries included), ``later_queries`` of them by numbers-only reads after the refresh
    (:meth:`Fleet.read_numbers`: rows that came into view); ``duration_s``: the refresh's
    wall time."""

    rows: tuple[FleetRow, ...]
    taken_at: float
    rows_at: float | None
    ok: bool
    error: str | None = None
    warnings: tuple[str, ...] = ()
    problems: tuple[str, ...] = ()
    queries: int = 0
    alertmanager_reads: int = 0
    duration_s: float = 0.0
    later_queries: int = 0

    def age_s(self, now: float) -> float | None:
        """Seconds since the shown rows were read (``None``: never read)."""
        return None if self.rows_at is None else max(0.0, now - self.rows_at)

    def to_json(self) -> dict[str, Any]:
        """JSON-ready data (times as ``…Z`` strings)."""
        return {"ok": self.ok, "error": self.error, "taken_at": iso(self.taken_at),
                "rows_at": iso(self.rows_at), "queries": self.queries,
                "alertmanager_reads": self.alertmanager_reads,
                "duration_s": round(self.duration_s, 4), "warnings": list(self.warnings),
                "problems": list(self.problems), "seats": len(self.rows),
                "rows": [r.to_json() for r in self.rows]}


_FIELDS = tuple(f.name for f in fields(FleetRow))
_FIELD_INDEX = {f: i for i, f in enumerate(_FIELDS)}


def sort_rows(rows: Iterable[FleetRow]) -> list[FleetRow]:
    """Trouble first (:data:`RANK`), then by node name and instance."""
    return sorted(rows, key=lambda r: (r.rank, r.node, r.instance))


def _by_instance(res: QueryResult | None) -> dict[str, list]:
    out: dict[str, list] = {}
    if res is None:
        return out
    for s in res.series:
        inst = s.labels.get("instance")
        if inst is not None:
            out.setdefault(inst, []).append(s)
    return out


def _flag(v: float | None, name: str, why: list[str] | None) -> bool | None:
    """A 0/1 flag's value: ``True`` for 1, ``False`` for 0; anything else (``NaN``, ``±Inf``,
    0.5, 7) is unknown, with the reason appended to ``why`` (when given)."""
    if v == 1:
        return True
    if v == 0:
        return False
    if why is not None:
        why.append(f"{name}: {raw_number(v)} from Prometheus is not 0 or 1; unknown")
    return None


def state_flags(got: Mapping[str, float | None],
                why: list[str] | None = None) -> dict[str, bool | None]:
    """Decode the sparse ``states`` answer of one seat **with a current sample**
    (:func:`queries`): the flags that are not at their usual value (``seat_engine_up`` as
    ``engine_not_up``, the others by name when not 0) and ``present``, the number of distinct
    :data:`CORE_FLAGS` families the seat sent, given only when it is not all of them. A core
    family not in the answer is at its usual value (up / 0) only when all were sent
    (``present`` absent); otherwise it is unknown (``None``), never assumed. A ``NaN`` sample
    is unknown. ``seat_probe_disrupted`` is ``True`` when sent and not 0, else ``None`` here
    (whether it was sent at all comes with the moving numbers: :func:`fill_numbers`). A value
    that is not 0 or 1 (``NaN``, ``±Inf``, 0.5) is unknown, its reason appended to ``why``
    (when given); a ``present`` that is not a count makes the absent families unknown.
    Returns family name → ``True`` / ``False`` / ``None``."""
    p = got.get("present", len(CORE_FLAGS))
    complete = p is not None and p == len(CORE_FLAGS)
    out: dict[str, bool | None] = {}
    if "engine_not_up" in got:
        out["seat_engine_up"] = _flag(got["engine_not_up"], "seat_engine_up", why)
    else:
        out["seat_engine_up"] = True if complete else None
    for n in CORE_FLAGS[1:]:
        out[n] = _flag(got[n], n, why) if n in got else (False if complete else None)
    n = "seat_probe_disrupted"
    out[n] = (_flag(got[n], n, why) or None) if n in got else None
    return out


_USUAL = state_flags({})
"""The flags of a seat with a current sample and nothing in the ``states`` answer."""


class SilenceIndex:
    """Alertmanager's silences, indexed for matching ~1,000 seats.

    A silence concerns a seat when it has at least one matcher on ``instance`` or ``node`` and
    every such matcher matches the seat's value (Alertmanager's semantics, pkg/labels: equality,
    ``!=``, anchored RE2 ``=~`` / ``!~``); matchers on other labels (``alertname``…) narrow it
    without making it foreign. ``silences``: :class:`~seat_console.sources.silences.Silence`
    objects (active and pending ones are used). ``unreadable`` counts regex matchers RE2
    refused (those silences are left out)."""

    KEYS = ("instance", "node")

    def __init__(self, silences: Sequence[Any]) -> None:
        self.by_value: dict[tuple[str, str], list] = {}
        self.scan: list = []
        self.unreadable = 0
        for s in silences:
            if s.state not in ("active", "pending"):
                continue
            on_seat = [m for m in s.matchers if m.name in self.KEYS]
            if not on_seat:
                continue
            eq = next((m for m in on_seat if m.is_equal and not m.is_regex), None)
            if eq is not None:
                self.by_value.setdefault((eq.name, eq.value), []).append((s, on_seat))
            else:
                self.scan.append((s, on_seat))

    def for_seat(self, labels: Mapping[str, str]) -> list:
        """The active/pending silences concerning a seat with ``labels`` (instance, node)."""
        cands = list(self.scan)
        for k in self.KEYS:
            if k in labels:
                cands += self.by_value.get((k, labels[k]), [])
        out = []
        for s, on_seat in cands:
            try:
                if all(m.matches(labels.get(m.name)) for m in on_seat):
                    out.append(s)
            except ValueError:
                self.unreadable += 1
        return out


def _parallel(jobs: Mapping[str, Callable[[], Any]]) -> dict[str, Any]:
    """Run the jobs at once: the first on this thread, each other in its own daemon thread (a
    hung request cannot keep the process alive at exit); returns name → result or the
    exception it raised."""
    out: dict[str, Any] = {}

    def run(name: str, fn: Callable[[], Any]) -> None:
        try:
            out[name] = fn()
        except BaseException as exc:  # noqa: BLE001 - handed back to the caller
            out[name] = exc

    items = list(jobs.items())
    threads = [threading.Thread(target=run, args=(n, f), daemon=True, name=f"fleet:{n}")
               for n, f in items[1:]]
    for t in threads:
        t.start()
    if items:
        run(*items[0])
    for t in threads:
        t.join()
    return out


@dataclass
class Fleet:
    """Reads the fleet: :meth:`refresh` → :class:`FleetReading`.

    ``prom``: the Prometheus-compatible API; ``alertmanager``: an
    :class:`~seat_console.sources.silences.AlertmanagerClient` or ``None`` (then the
    exporter's ``seat_silence_*`` are shown, marked ``*``); ``inventory``: seats listed even
    with no series; ``scrape_interval_s``: the scrape interval (stale after two);
    ``window_s``: how long a vanished seat stays listed; ``clock``: unix seconds;
    ``identity_every_s``: how long the ``identity`` answer (each seat's ``node`` name, which
    changes only when a node is renamed) is reused — it is asked again sooner when ``seen``
    names a seat it does not know, and at every refresh without a ``window``.
    Keeps the last good reading (UI thread or one worker at a time; not for concurrent use).
    """

    prom: PromClient
    alertmanager: Any = None
    inventory: Sequence[InventoryEntry] = ()
    scrape_interval_s: float = 15.0
    window_s: float = 600.0
    clock: Callable[[], float] = time.time
    last_good: FleetReading | None = None
    queries: dict[str, str] = field(default_factory=dict)
    identity_every_s: float = 60.0
    _identity: tuple[float, QueryResult, dict[str, str | None]] | None = field(
        default=None, repr=False)
    """The last ``identity`` answer: when it was read, the answer, and its
    :func:`node_names` (decoded once, reused with the answer)."""

    def __post_init__(self) -> None:
        self.queries = wire_queries(self.window_s, self.scrape_interval_s)

    def refresh(self, window: Callable[[Sequence[FleetRow]], Iterable[str]] | None = None
                ) -> FleetReading:
        """One refresh (blocking: run it in a worker thread). Never raises for Prometheus or
        Alertmanager trouble: it is in the reading.

        ``window``: ``None`` reads every seat's moving numbers with the rest (the 4
        :func:`wire_queries` at once: ``fleet --json``). Otherwise the refresh is two rounds:
        ``seen``, ``identity`` and ``state`` (and Alertmanager) for every seat, which settle
        the rows and their order; then ``window(rows)`` — the sorted rows, called on this
        thread — names the seats whose numbers to read (the screen's visible rows and a page
        around them), and one ``numbers`` query (:func:`merge` of :func:`number_queries`) is
        sent for those seats only (skipped when it names none). The other rows have
        ``numbers_read`` false. At most 4 queries (``identity`` is reused for
        ``identity_every_s``: 3 at most refreshes); at 1,000 seats about a third of the
        samples of a full refresh (docs/benchmarks.md)."""
        t0 = time.perf_counter()
        now = self.clock()
        sent0 = self.prom.requests
        ident = self._identity
        reuse = window is not None and ident is not None and now - ident[0] < \
            self.identity_every_s
        names = [n for n in self.queries if (window is None or n != "numbers")
                 and not (reuse and n in REUSED_QUERIES)]
        jobs: dict[str, Callable[[], Any]] = {
            n: (lambda q=self.queries[n]: self.prom.query(q, at=now)) for n in names}
        if self.alertmanager is not None:
            jobs["__silences"] = self.alertmanager.list_silences_tolerant
        results = _parallel(jobs)
        am_reads = 1 if self.alertmanager is not None else 0
        seen = results.get("seen")
        if not isinstance(seen, QueryResult):
            reason = str(seen) if isinstance(seen, BaseException) else "no answer"
            last = self.last_good
            return FleetReading(rows=last.rows if last else (), taken_at=now,
                                rows_at=last.rows_at if last else None, ok=False,
                                error=reason, warnings=last.warnings if last else (),
                                queries=self.prom.requests - sent0, alertmanager_reads=am_reads,
                                duration_s=time.perf_counter() - t0)
        problems: list[str] = []
        warnings: list[str] = []
        got = _collect(results, names, warnings, problems)
        for w in WIRE:
            if w in got:
                got.update(split(got.pop(w), WIRE[w]))
        if reuse:
            assert ident is not None
            known = {x.labels.get("instance") for x in ident[1].series}
            if any(x.labels.get("instance") not in known for x in seen.series):
                got.update(_collect({"identity": self._query_or_error(self.queries["identity"],
                                                                        now)},
                                    ["identity"], warnings, problems))
            else:
                got["identity"] = ident[1]
        answer = got.get("identity")
        if isinstance(answer, QueryResult) and answer is not (ident[1] if ident else None):
            self._identity = (now, answer, node_names(answer))
        nodes = (self._identity[2] if self._identity is not None
                 and answer is self._identity[1] else None)
        silences = results.get("__silences")
        index: SilenceIndex | None = None
        if isinstance(silences, tuple):
            good, bad = silences
            index = SilenceIndex(good)
            problems += [f"Alertmanager: {b}" for b in bad[:5]]
        elif self.alertmanager is not None:
            problems.append(f"Alertmanager: {silences}; silences shown are the exporters' (*)")
        previous = {r.instance: r for r in self.last_good.rows} if self.last_good else {}
        carried: set[str] = set()
        rows = build_rows(got, now, self.scrape_interval_s, self.inventory, index, previous,
                          numbers=window is None, carried=carried, nodes=nodes)
        if index is not None and index.unreadable:
            problems.append(f"Alertmanager: {index.unreadable} matcher(s) are not valid RE2; "
                            "those silences are left out")
        if window is not None:
            rows = self._numbers(rows, window(rows), now, warnings, problems, carried)
        reading = FleetReading(rows=tuple(rows), taken_at=now, rows_at=now, ok=True,
                               warnings=tuple(dict.fromkeys(warnings)),
                               problems=tuple(problems), queries=self.prom.requests - sent0,
                               alertmanager_reads=am_reads,
                               duration_s=time.perf_counter() - t0)
        self.last_good = reading
        return reading

    def _query_or_error(self, expr: str, at: float) -> QueryResult | BaseException:
        try:
            return self.prom.query(expr, at=at)
        except Exception as exc:  # noqa: BLE001 - handed back like _parallel's
            return exc

    def _numbers(self, rows: list[FleetRow], instances: Iterable[str], at: float,
                 warnings: list[str], problems: list[str],
                 keep: Iterable[str] = ()) -> list[FleetRow]:
        want = {r.instance for r in rows} & set(instances)
        want -= set(keep)
        if not want:
            return rows
        results = {"numbers": self._query_or_error(merge(number_queries(want)), at)}
        got = _collect(results, ["numbers"], warnings, problems)
        return fill_numbers(rows, split(got["numbers"], WIRE["numbers"]), want)

    def read_numbers(self, reading: FleetReading, instances: Iterable[str]) -> FleetReading:
        """``reading`` with the moving numbers of ``instances`` read (at the reading's own
        time) and filled in: for rows that came into the screen's window between refreshes
        (a scroll, a filter). Blocking (a worker thread); never raises: a failed query leaves
        its columns unknown and is in ``problems``. A reading that was not ``ok`` is returned
        as it is. Becomes :attr:`last_good` when ``reading`` was."""
        if not reading.ok:
            return reading
        t0 = time.perf_counter()
        sent0 = self.prom.requests
        warnings, problems = list(reading.warnings), list(reading.problems)
        rows = self._numbers(list(reading.rows), instances, reading.taken_at, warnings, problems)
        new = replace(reading, rows=tuple(rows), warnings=tuple(dict.fromkeys(warnings)),
                      problems=tuple(dict.fromkeys(problems)),
                      queries=reading.queries + self.prom.requests - sent0,
                      later_queries=reading.later_queries + self.prom.requests - sent0,
                      duration_s=reading.duration_s + time.perf_counter() - t0)
        if self.last_good is reading:
            self.last_good = new
        return new


def _collect(results: Mapping[str, Any], names: Iterable[str], warnings: list[str],
             problems: list[str]) -> dict[str, QueryResult | None]:
    """The answers of ``names`` from :func:`_parallel`'s ``results``: a failed query is
    ``None`` and named in ``problems``; warnings and malformed series are appended."""
    got: dict[str, QueryResult | None] = {}
    for name in names:
        r = results.get(name)
        if isinstance(r, QueryResult):
            got[name] = r
            warnings += r.warnings
            problems += r.problems[:5]
            if len(r.problems) > 5:
                problems.append(f"… and {len(r.problems) - 5} more malformed series in "
                                f"query {name!r}")
        else:
            got[name] = None
            problems.append(f"query {name!r} failed: {r}")
    return got


def _decode_numbers(got: Mapping[str, QueryResult | None]) -> tuple[dict, dict, dict, bool]:
    """The :data:`NUMBER_QUERIES`' answers by instance: ``(requests, kv, gpu, gpu_ok)``."""
    reqs = _per_name(got.get("requests"))
    kv = {inst: ss[0].value for inst, ss in _by_instance(got.get("kv")).items()}
    gpus = _per_name(got.get("gpu"))  # instance → {"cards": n, family: MiB over its cards}
    return reqs, kv, gpus, got.get("gpu") is not None


def _per_name(res: QueryResult | None) -> dict[str, dict[str, float | None]]:
    out: dict[str, dict[str, float | None]] = {}
    for inst, ss in _by_instance(res).items():
        for s in ss:
            key = s.labels.get("q") or s.labels.get("__name__", "")
            out.setdefault(inst, {})[key] = s.value
    return out


def _number_fields(inst: str, fresh: bool, dec: tuple[dict, dict, dict, bool]) -> dict[str, Any]:
    """One seat's moving-number fields of :class:`FleetRow` from :func:`_decode_numbers`, and
    under ``"unknown"`` the reasons for values not taken (non-finite, negative, out of range:
    :data:`MAX_COUNT`, :data:`MAX_MIB`, :data:`MAX_CARDS`, KV usage outside 0..1). A card
    count that is not a whole number makes ``gpus`` -1 (unknown), never 0 ("no DCGM")."""
    reqs, kv, gpus, gpu_ok = dec
    if not fresh:
        return {"running": None, "_probe_present": False, "waiting": None, "kv_usage": None,
                "gpus": 0 if gpu_ok else -1, "gpu_used_bytes": None, "gpu_total_bytes": None,
                "numbers_read": True, "unknown": ()}
    why: list[str] = []
    g = gpus.get(inst, {})
    ncards: int | None = 0
    if "cards" in g:
        c = _amount(g, "cards", "GPU cards", MAX_CARDS, why)
        ncards = int(c) if c is not None and c == int(c) else None
        if c is not None and ncards is None:
            why.append(f"GPU cards: {raw_number(c)} is not a whole number; unknown")
    used = total = None
    if ncards:
        u = _amount(g, "DCGM_FI_DEV_FB_USED", "GPU memory used (MiB)", MAX_MIB, why)
        f = _amount(g, "DCGM_FI_DEV_FB_FREE", "GPU memory free (MiB)", MAX_MIB, why)
        r = _amount(g, "reserved", "GPU memory reserved (MiB)", MAX_MIB, why)
        if u is not None:
            used = int(u * MIB)
            if f is not None and (r is not None or "reserved" not in g):
                total = int((u + f + (r or 0.0)) * MIB)
    rq = reqs.get(inst, {})
    pz = rq.get("probe_zero")
    return {"running": _amount(rq, "vllm:num_requests_running", "requests running",
                               MAX_COUNT, why),
            "_probe_present": pz is not None and math.isfinite(pz) and pz >= 1,
            "waiting": _amount(rq, "vllm:num_requests_waiting", "requests waiting",
                               MAX_COUNT, why),
            "kv_usage": _amount(kv, inst, "KV cache usage", 1.0, why),
            "gpus": (-1 if ncards is None else ncards) if gpu_ok else -1,
            "gpu_used_bytes": used, "gpu_total_bytes": total, "numbers_read": True,
            "unknown": tuple(why)}


_NOT_READ = {"running": None, "waiting": None, "kv_usage": None, "gpus": -1,
             "gpu_used_bytes": None, "gpu_total_bytes": None, "numbers_read": False,
             "_probe_present": False, "unknown": ()}


def _with_probe(nums: dict[str, Any], disrupted: bool | None) -> dict[str, Any]:
    """``nums`` as :class:`FleetRow` fields: ``probe_disrupted`` is ``False`` where the states
    left it unknown and the seat sends ``seat_probe_disrupted`` at 0."""
    out = dict(nums)
    present = out.pop("_probe_present")
    out["probe_disrupted"] = False if (disrupted is None and present) else disrupted
    return out


def _changed(row: FleetRow, changes: Mapping[str, Any]) -> FleetRow:
    """A copy of ``row`` with ``changes`` (names of :class:`FleetRow` fields) set: what
    :func:`dataclasses.replace` gives, built positionally (``replace`` checks every field's
    kind first: ~7 µs a row; a windowed refresh changes ~110). Raises KeyError for a name
    that is not a field."""
    index = _FIELD_INDEX
    vals = [getattr(row, f) for f in _FIELDS]
    for k, v in changes.items():
        vals[index[k]] = v
    return FleetRow(*vals)


def fill_numbers(rows: Sequence[FleetRow], got: Mapping[str, QueryResult | None],
                 instances: Iterable[str], keep: Iterable[str] = ()) -> list[FleetRow]:
    """``rows`` (order kept) with the moving numbers of the seats in ``instances`` taken from
    ``got`` (the :data:`NUMBER_QUERIES`' answers for those seats, ``None`` for a failed
    query: its columns unknown); the other rows, ``no series`` rows and the seats in ``keep``
    (rows :func:`build_rows` carried over from the previous refresh: no current sample) are
    returned as they are, and so are rows whose last sample time was not usable
    (``last_seen`` ``None``: nothing of theirs is read as current). Reasons for values not
    taken are added to the row's ``unknown``. Pure."""
    want = set(instances) - set(keep)
    dec = _decode_numbers(got)
    out = []
    for r in rows:
        if r.instance in want and r.state != "no-series" and r.last_seen is not None:
            fresh = r.state != "stale"
            nums = _with_probe(_number_fields(r.instance, fresh, dec), r.probe_disrupted)
            nums["unknown"] = tuple(dict.fromkeys(r.unknown + nums["unknown"]))
            r = _changed(r, nums)
        out.append(r)
    return out


def _silence_of(silences: SilenceIndex, inst: str, node: str) -> tuple[str, float | None, str]:
    """``(silence, its end or None, "alertmanager")`` of one seat from Alertmanager's."""
    found = silences.for_seat({"instance": inst, "node": node})
    act = [s for s in found if s.state == "active"]
    if act:
        return "active", max(s.ends_at for s in act).timestamp(), "alertmanager"
    return ("pending" if found else "none"), None, "alertmanager"


_FAST_PATH = True
""":func:`build_rows` builds the rows of seats with nothing unusual directly (tests switch it
off to compare the two paths)."""


def _seen(res: QueryResult | None) -> tuple[dict[str, float | None], set[str]]:
    """The ``seen`` answer → (instance → last sample time or ``None``, the instances with a
    current sample): a seat's largest value (one series a seat from Prometheus; several only
    from a proxy that merged replies), positive for a current sample, negated for a last one."""
    best: dict[str, float | None] = {}
    if res is None:
        return best, set()
    for s in res.series:
        inst = s.labels.get("instance")
        if inst is None:
            continue
        v = s.points[-1][1] if s.points else None
        if v is None:
            best.setdefault(inst, None)
        else:
            old = best.get(inst)
            if old is None or v > old:
                best[inst] = v
    current = {inst for inst, v in best.items() if v is not None and v > 0}
    return {inst: (v if v is None or v >= 0 else -v) for inst, v in best.items()}, current


def node_names(res: QueryResult | None) -> dict[str, str | None]:
    """The ``identity`` answer → ``{instance: node label}`` (a seat's last series; ``None``
    where it has no ``node`` label); ``{}`` for no answer. Pure; raises nothing.
    :class:`Fleet` keeps it beside the answer it reuses (``identity_every_s``), so a reused
    answer is decoded once."""
    if res is None:
        return {}
    return {inst: ss[-1].labels.get("node") for inst, ss in _by_instance(res).items()}


def build_rows(got: Mapping[str, QueryResult | None], now: float, scrape_interval_s: float,
               inventory: Sequence[InventoryEntry] = (),
               silences: SilenceIndex | None = None,
               previous: Mapping[str, FleetRow] | None = None,
               numbers: bool = True, carried: set[str] | None = None,
               nodes: Mapping[str, str | None] | None = None) -> list[FleetRow]:
    """Join the queries' results (name → :class:`QueryResult`, ``None`` for a failed query) by
    ``instance`` into sorted rows. A seat is stale when its last sample is more than
    ``2 × scrape_interval_s`` before ``now``.

    ``previous``: the last good rows by instance. A seat seen within the two intervals but
    with no current sample (one failed scrape: Prometheus marks all its series stale at once)
    keeps its previous row's values, with the new last-seen time, instead of turning unknown
    for one refresh; without a previous row it is ``unknown`` (a seat with no current sample
    is never read as all-usual from the sparse ``states``). ``numbers``: whether ``got``
    holds the :data:`NUMBER_QUERIES` for every seat; when false every row has
    ``numbers_read`` false (:func:`fill_numbers` adds them for some seats). ``carried``: when
    given, the instances whose previous row was kept are added to it. ``nodes``:
    :func:`node_names` of ``got["identity"]`` when the caller has it already (decoded
    otherwise). Pure (no I/O)."""
    seen, current = _seen(got.get("seen"))
    ident = node_names(got.get("identity")) if nodes is None else nodes
    inv = {e.instance: e for e in inventory}
    states, times = _per_name(got.get("states")), _per_name(got.get("times"))
    dec = _decode_numbers(got) if numbers else None
    probe = {inst: sorted(s.labels.get("phase", "?") for s in ss)
             for inst, ss in _by_instance(got.get("probe")).items()}
    runbook: dict[str, list[str]] = {}
    stage: dict[str, list[str]] = {}
    for inst, ss in _by_instance(got.get("runbook")).items():
        for s in ss:
            if "stage" in s.labels:   # seat_runbook_next_info
                st_ = s.labels.get("status", "")
                stage.setdefault(inst, []).append(
                    s.labels["stage"] + (f" {st_}" if st_ and st_ != "todo" else ""))
            else:
                runbook.setdefault(inst, []).append(
                    f"{s.labels.get('runbook', '?')}:{s.labels.get('step', '?')}")
    runbook = {k: sorted(v) for k, v in runbook.items()}
    down = {inst: tuple(sorted({s.labels.get("source", "?") for s in ss}))
            for inst, ss in _by_instance(got.get("sources_down")).items()}
    states_ok = got.get("states") is not None
    fast = _FAST_PATH and states_ok and dec is None
    usual_nums = _with_probe(_NOT_READ, None)
    rows = []
    for inst in (seen.keys() | inv.keys()) if inv else seen:   # sort_rows orders them
        entry = inv.get(inst) if inv else None
        node = ident.get(inst) or (entry.node if entry and entry.node else inst)
        last = seen.get(inst)
        if last is None:
            rows.append(FleetRow(instance=inst, node=node, state="no-series",
                                 in_inventory=entry is not None))
            continue
        bad_time = None if 0.0 <= last <= now + MAX_CLOCK_SKEW_S else seen_problem(last, now)
        if bad_time is not None:
            # +Inf, a time in ms, a sample dated in the future: whether the seat is current
            # cannot be told, so nothing of it is read as current (never fresh, never healthy)
            rows.append(FleetRow(instance=inst, node=node, state="unknown", gpus=-1,
                                 in_inventory=entry is not None, unknown=(bad_time,)))
            continue
        age = max(0.0, now - last)
        if fast and inst in current and inst not in states and inst not in times \
                and inst not in probe and inst not in runbook and inst not in stage \
                and inst not in down \
                and age <= 2 * scrape_interval_s:
            # A seat with a current sample and nothing unusual (~900 of 1,000): the slow path
            # below gives exactly this row (tests/test_fleet_rows.py compares the two).
            sil, sil_until, sil_from = "none", None, "exporter"
            if silences is not None:
                sil, sil_until, sil_from = _silence_of(silences, inst, node)
            rows.append(FleetRow(inst, node, "healthy", last, age, True, hold="none",
                                 silence=sil, silence_until=sil_until, silence_from=sil_from,
                                 in_inventory=entry is not None, **usual_nums))
            continue
        why: list[str] = []
        if not states_ok or inst not in current:
            flag = dict.fromkeys(STATE_FLAGS)
        else:
            st = states.get(inst)
            flag = _USUAL if st is None else state_flags(st, why)
        up, held, lease, no_lease = (flag["seat_engine_up"], flag["seat_hold_active"],
                                     flag["seat_hold_lease_armed"],
                                     flag["seat_hold_without_lease"])
        if age > 2 * scrape_interval_s:
            state = "stale"
        elif inst not in current and previous and inst in previous \
                and previous[inst].state != "stale":
            rows.append(replace(previous[inst], last_seen=last, stale_s=age))
            if carried is not None:
                carried.add(inst)
            continue
        elif no_lease:
            state = "without-lease"
        elif up is False and held is not True:
            state = "down"
        elif held:
            state = "held"
        elif up is True and held is False:
            state = "healthy"
        else:
            state = "unknown"
        fresh = state != "stale"
        tm = times.get(inst, {})
        if not fresh:
            hold = None
        elif no_lease:
            hold = "without-lease"
        elif held and lease:
            hold = "lease"
        elif held:
            hold = "held"
        elif held is False:
            hold = "none"
        else:
            hold = None
        sil, sil_until, sil_from = None, None, "alertmanager"
        if silences is not None:
            sil, sil_until, sil_from = _silence_of(silences, inst, node)
        elif fresh and flag["seat_silence_active"] is not None:
            sil_from = "exporter"
            sil = "active" if flag["seat_silence_active"] else "none"
            sil_until = unix_time(tm.get("seat_silence_end_timestamp_seconds"),
                                  "silence end", why) if sil == "active" else None
        hold_until = unix_time(tm.get("seat_hold_expiry_timestamp_seconds"), "hold expiry",
                               why) if hold else None
        if state == "held" and lease_overdue(hold, hold_until, now, scrape_interval_s):
            state = "hold-overdue"
        downtime = tm.get("seat_downtime_seconds") if fresh else None
        if downtime is not None and not (math.isfinite(downtime)
                                         and 0 <= downtime <= MAX_DOWNTIME_S):
            why.append(f"seat downtime: {raw_number(downtime)} s from Prometheus is not a "
                       "downtime a runbook run measured; unknown")
            downtime = None
        nums = _with_probe(_number_fields(inst, fresh, dec) if dec is not None else _NOT_READ,
                           flag["seat_probe_disrupted"] if fresh else None)
        why += nums.pop("unknown")
        rows.append(FleetRow(
            instance=inst, node=node, state=state, last_seen=last, stale_s=age,
            engine_up=up if fresh else None,
            hold=hold, hold_until=hold_until, unknown=tuple(why),
            silence=sil, silence_until=sil_until, silence_from=sil_from,
            probe_phase=", ".join(probe.get(inst, [])) or None if fresh else None,
            runbook=", ".join(runbook.get(inst, [])) or None if fresh else None,
            stage=", ".join(sorted(stage.get(inst, []))) or None if fresh else None,
            sources_down=down.get(inst, ()) if fresh else (), downtime_s=downtime,
            in_inventory=entry is not None, **nums))
    return sort_rows(rows)


def with_state(row: FleetRow, **changes: Any) -> FleetRow:
    """A copy of ``row`` with ``changes`` (tests and what-ifs)."""
    return replace(row, **changes)


__all__ = ["COLUMNS", "MAX_CARDS", "MAX_CLOCK_SKEW_S", "MAX_COUNT", "MAX_MIB", "MAX_UNIX_S",
           "NUMBER_QUERIES", "STATE_QUERIES", "WIRE", "Fleet", "FleetReading",
           "FleetRow", "InventoryEntry", "OVERDUE_AFTER_INTERVALS", "PromError", "RANK", "REFRESH_QUERIES", "REUSED_QUERIES", "SilenceIndex", "build_rows", "cells",
           "content_widths", "fill_numbers", "gpu_query", "hhmm", "instance_matcher", "iso", "lease_overdue",
           "merge", "node_names", "number_queries", "queries", "raw_number", "seen_problem",
           "sort_rows", "split", "unix_time", "wire_queries"]
