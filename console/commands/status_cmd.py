"""``seat-console status [--json] [--timeout S]``: the whole node snapshot, headless.

Reads every source once (GPUs, timers, silences, containers, engine; see
:func:`seat_console.snapshot.reading.take_snapshot`) and prints it as text, or as the
:class:`~seat_console.snapshot.reading.NodeSnapshot` JSON (the same model the panels render).

Exit codes: ``0`` every source was read; ``3`` at least one source is unavailable (the output
says which and why; the others are still printed); ``1`` error.
"""

from __future__ import annotations

import argparse
import math
import functools
import json
import re
import sys
from collections.abc import Callable, Sequence
from datetime import datetime

from seat_console.core import jsonout
from seat_console.sources.containers import ContainersReading
from seat_console.sources.engine import MISSING, EngineReading, HistogramSummary
from seat_console.sources.gpu import GpuSnapshot
from seat_console.snapshot.reading import NodeSnapshot, take_snapshot
from seat_console.core.fmt import fmt_duration, fmt_when
from seat_console.core.fmt import gib_unit
from seat_console.core.profile import LoadedProfile
from seat_console.sources.silences import SilencesReading
from seat_console.core.base import Unavailable
from seat_console.sources.timers import TimersReading

EXIT_OK = 0
EXIT_ERROR = 1
EXIT_UNAVAILABLE = 3


EXITS = ("exit codes: 0 every source was read; 1 error; 2 usage; 3 at least one source (or the"
         " hold's node leases) could not be read")
"""The exit codes, as ``--help`` ends (``epilog``)."""


def register(sub: argparse._SubParsersAction) -> None:
    """Add the ``status`` subcommand."""
    p = sub.add_parser("status", help="print the whole node snapshot (GPUs, timers, silences, "
                                      "containers, engine); exit 3 if a source is unavailable")
    p.epilog = EXITS
    p.add_argument("--json", action="store_true", help="print the snapshot as JSON")
    p.add_argument("--timeout", type=float, default=20.0, metavar="S",
                   help="seconds to wait for all sources (default 20)")
    p.set_defaults(func=run)


TIMEOUT_MAX_S = 3600.0
"""The longest ``--timeout`` (an hour: a status that waits longer is a hung one)."""


def timeout_error(value: float) -> str | None:
    """Why ``--timeout VALUE`` cannot be used (``nan``, ``inf``, ≤ 0, over an hour), or
    ``None``. ``nan`` was taken, and every source then said "no reading within nan s"."""
    if not math.isfinite(value) or not 0 < value <= TIMEOUT_MAX_S:
        return (f"--timeout {value:g}: give seconds above 0 and at most {TIMEOUT_MAX_S:g} "
                "(e.g. 20)")
    return None


def run(args: argparse.Namespace, loaded: LoadedProfile) -> int:
    """Take one snapshot and print it; exit 0 (all read), 3 (some unavailable), 1 (error),
    2 (usage: a ``--timeout`` that is not positive finite seconds up to an hour)."""
    why = timeout_error(args.timeout)
    if why is not None:
        print(f"seat-console status: {why}", file=sys.stderr)
        return 2
    try:
        snap = take_snapshot(loaded, timeout_s=args.timeout)
    except Exception as exc:  # noqa: BLE001 - report, exit 1
        print(f"seat-console status: {type(exc).__name__}: {exc}", file=sys.stderr)
        return EXIT_ERROR
    hold = read_hold_section(loaded, snap.timers, snap.taken_at)
    unread = hold_unread(hold)
    if args.json:
        # one model: the node's snapshot with its hold section (NodeSnapshot.hold), so the
        # JSON reads back with NodeSnapshot.model_validate_json
        doc = json.loads(snap.model_copy(update={"hold": hold}).model_dump_json())
        sys.stdout.write(jsonout.dumps(doc, indent=2, default=str) + "\n")
    else:
        sys.stdout.write(with_hold_section(render_text(snap, also=unread), render_hold(hold)))
    return EXIT_UNAVAILABLE if snap.unavailable() or unread else EXIT_OK


def with_hold_section(text: str, hold: str) -> str:
    """``text`` (:func:`render_text`) with the hold section before the Timers section, whether
    the timers were read ("Timers (on …)") or not ("Timers" alone: the hold went first, above
    the GPUs, and a blank line doubled — the trial); after the head if there is no Timers
    section."""
    m = re.search(r"\nTimers(?: \(|\n)", text)
    cut = m.start() + 1 if m else text.find("\n\n") + 2
    return text[:cut] + hold + "\n" + text[cut:]


def hold_unread(sec: dict) -> list[str]:
    """What the hold section could not read (its ``errors``: ``"node leases: …"`` → ``"node
    leases"``), for the ``unavailable:`` line and exit 3: a trial's ``status`` said "cannot read
    node leases" in its body and left them out of that line."""
    return [str(e).split(":", 1)[0] for e in sec.get("errors", [])]


# -- text rendering ------------------------------------------------------------------------
def _unavail(u: Unavailable) -> str:
    return f"  UNAVAILABLE ({u.kind}): {u.reason}\n"


def _section(title: str) -> Callable[[Callable[..., str]], Callable[..., str]]:
    """Decorate a ``render_*(reading, *rest) -> str``: when the reading is :class:`Unavailable`
    the section is ``title`` and the ``UNAVAILABLE (kind): reason`` line, else the function's."""
    def wrap(render: Callable[..., str]) -> Callable[..., str]:
        @functools.wraps(render)
        def section(r: object, *rest: object) -> str:
            if isinstance(r, Unavailable):
                return f"{title}\n" + _unavail(r)
            return render(r, *rest)
        return section
    return wrap


def _pct(v: float | None) -> str:
    return MISSING if v is None else f"{v * 100:.1f} %"


def _num(v: float | None) -> str:
    return MISSING if v is None else f"{v:,.0f}"


def _hist(h: HistogramSummary | None) -> str:
    if h is None:
        return MISSING
    if h.count == 0:
        return "no requests yet"
    ms = lambda v: "n/a" if v is None else f"{v * 1000:.1f} ms"  # noqa: E731
    return (f"mean {ms(h.mean_s)}, p50 ~{ms(h.p50_s)}{_bucket(0.5, h)}, "
            f"p95 ~{ms(h.p95_s)}{_bucket(0.95, h)} (n={h.count})")


def _bucket(q: float, h: HistogramSummary) -> str:
    """`` (in bucket 0–5 ms)``: the histogram bucket a quantile was interpolated inside
    (``seat_console.sources.engine.quantile_bucket``, as Prometheus ``histogram_quantile``), so
    a p50 above the mean reads as the estimate it is; empty without buckets."""
    from seat_console.sources.engine import quantile_bucket

    b = quantile_bucket(q, h.buckets) if h.buckets else None
    if b is None:
        return ""
    lo, hi = b
    top = "+Inf" if hi == float("inf") else f"{hi * 1000:g}"
    return f" (in bucket {lo * 1000:g}–{top} ms)"


@_section("GPUs (NVML)")
def render_gpus(r: GpuSnapshot | Unavailable) -> str:
    """GPU section: per card name, UUID, memory (GiB) and process count."""
    out = "GPUs (NVML)\n"
    out += f"  driver {r.driver_version or 'n/a'}, memory API {r.memory_api or 'n/a'}\n"
    for c in r.cards:
        m = c.memory
        seat = " SEAT" if c.serves_seat else ""
        out += f"  [{c.index if c.index is not None else '?'}] {c.name or 'n/a'} {c.uuid or ''}"
        out += f" {c.state}{seat}\n"
        if m is not None:
            used = "used incl. reserved" if m.used_includes_reserved else "used"
            out += (f"      {used} {gib_unit(m.used_bytes)}, reserved {gib_unit(m.reserved_bytes)}, "
                    f"free {gib_unit(m.free_bytes)}, total {gib_unit(m.total_bytes)}, CUDA-visible "
                    f"{gib_unit(m.cuda_visible_bytes)}\n")
        if c.processes is not None:
            out += f"      {len(c.processes)} compute process(es)\n"
    if r.unmatched_seat_gpus:
        out += f"  seat GPUs not found: {', '.join(r.unmatched_seat_gpus)}\n"
    return out


@_section("Timers")
def render_timers(r: TimersReading | Unavailable, now: datetime) -> str:
    """Timers section: state, next elapse, last trigger, triggered service, Persistent."""
    out = f"Timers (on {r.where})\n"
    if not r.timers:
        out += "  no timer units in the profile\n"
    for t in r.timers:
        out += f"  {t.unit}: {t.load_state or 'n/a'}, {t.active_state or 'n/a'}"
        out += f"/{t.sub_state or 'n/a'}\n"
        if t.loaded:
            out += (f"      next {fmt_when(t.next_elapse, now)}; "
                    f"last {fmt_when(t.last_trigger, now)}\n")
            if t.schedule:
                out += f"      schedule {'; '.join(t.schedule)}\n"
        if t.service is not None:
            run_s = {True: "RUNNING NOW", False: "not running",
                     None: "state n/a"}[t.service.running]
            out += f"      triggers {t.service.unit}: {run_s}"
            out += f" ({t.service.active_state or 'n/a'}/{t.service.sub_state or 'n/a'})\n"
        if t.persistent_warning:
            out += f"      ! {t.persistent_warning}\n"
    for n in r.notes:
        out += f"  note: {n}\n"
    return out


@_section("Silences (Alertmanager)")
def render_silences(r: SilencesReading | Unavailable, now: datetime) -> str:
    """Silences section: the seat's matchers and each active or pending silence with state and
    time left; expired ones (Alertmanager keeps them for days) only as a count."""
    out = (f"Silences (Alertmanager {r.version or 'n/a'} at {r.url}"
           f"{'' if r.tls_verify else ', TLS NOT VERIFIED'})\n")
    out += f"  seat matchers: {', '.join(str(m) for m in r.seat_matchers)}\n"
    expired = [s for s in r.silences if s.state == "expired"]
    out += (f"  {len(r.active)} active for the seat; {len(r.silences)} on the seat, "
            f"{len(expired)} of them expired; {r.total} in Alertmanager\n")
    for w in getattr(r, "coverage", ()):
        out += f"  WARNING: {w} — fix [[silence.matchers]] in the profile\n"
    for s in r.silences:
        if s.state == "expired":    # Alertmanager keeps them for days: counted below, not listed
            continue
        if s.state == "active":
            when = f"ends in {fmt_duration(s.ends_in_s(now))}"
        elif s.state == "pending":
            when = f"starts in {fmt_duration(s.starts_in_s(now))}"
        else:
            when = f"ended {fmt_when(s.ends_at, now)}"
        mine = " [exactly the seat's matchers]" if s.exact else ""
        if s.match_unknown:
            mine = f" [whether it concerns the seat is unknown: {s.match_unknown}]"
        out += f"  {s.id[:8]} {s.state:<8} {when}{mine}\n"
        out += f"      {', '.join(str(m) for m in s.matchers)} — by {s.created_by}: {s.comment}\n"
    if expired:
        out += f"  {len(expired)} expired silences not shown (--json lists all)\n"
    for reason in r.unreadable:
        out += f"  unreadable silence (not shown): {reason}\n"
    return out


@_section("Containers (docker)")
def render_containers(r: ContainersReading | Unavailable, now: datetime) -> str:
    """Containers section: state, health, start, restarts, image ID vs repo digest."""
    out = f"Containers (docker {r.engine_version or 'n/a'} at {r.engine})\n"
    if not r.containers:
        out += "  no containers in the profile\n"
    for c in r.containers:
        if c.state == "absent":
            out += f"  {c.role} {c.name}: absent (no such container)\n"
            continue
        if c.problem is not None:
            out += f"  {c.role} {c.name}: unknown ({c.problem})\n"
            continue
        # a stopped container says when it ended, never "started 3 min ago" (its old start)
        when = (f"started {fmt_when(c.started_at, now)}" if c.running else
                f"ended {fmt_when(c.finished_at, now)}" if c.finished_at is not None
                else "end n/a")
        out += (f"  {c.role} {c.name}: {c.state}, health {c.health or 'n/a (no healthcheck)'}, "
                f"{when}, restarts {'n/a' if c.restart_count is None else c.restart_count}\n")
        if not c.running and c.exit_code is not None:
            out += f"      exit code {c.exit_code}{', OOM-killed' if c.oom_killed else ''}\n"
        out += f"      image {c.image_ref or 'n/a'}\n"
        out += f"      image ID (config digest) {c.image_id or 'n/a'}\n"
        out += f"      repo digest (manifest)   {c.repo_digest or 'n/a (never pushed/pulled)'}\n"
    if r.events is not None:
        ev = r.events
        out += (f"  events: {ev.word}, "
                f"{len(r.recent_changes)} recent change(s)\n")
        for e in r.recent_changes[-10:]:
            who = (f"console: {e.by}" if e.by_console and e.by
                   else "console" if e.by_console else "NOT the console")
            out += f"    {fmt_when(e.at, now)} {e.type} {e.actor_name or e.actor_id[:12]} "
            out += f"{e.action} ({who})\n"
    return out


@_section("Engine (vLLM)")
def render_engine(r: EngineReading | Unavailable) -> str:
    """Engine section: health, version, models, queue, KV cache, counters, latencies."""
    state = {"PAUSED": "PAUSED (healthy, admits nothing new: POST /resume to serve)",
             "ASLEEP": "ASLEEP (healthy, weights put away: POST /wake_up to serve)"}.get(
        r.hold_state or "")
    health = 'healthy' if r.healthy else f'NOT healthy (HTTP {r.health_status})'
    out = f"Engine (vLLM {r.version or 'n/a'} at {r.endpoint}): {state or health}\n"
    if r.models is not None:
        for model in r.models:
            out += f"  model {model.id} (max_model_len {model.max_model_len or 'n/a'})\n"
    m = r.metrics
    if m is not None:
        out += (f"  requests running {_num(m.requests_running)}, waiting "
                f"{_num(m.requests_waiting)}; KV cache usage {_pct(m.kv_cache_usage)}\n")
        out += (f"  tokens: prompt {_num(m.prompt_tokens)}, generation "
                f"{_num(m.generation_tokens)}; preemptions {_num(m.preemptions)}; finished "
                f"requests {_num(m.requests_finished)}\n")
        out += f"  TTFT {_hist(m.ttft)}\n  ITL  {_hist(m.itl)}\n  E2E  {_hist(m.e2e)}\n"
        if m.missing:
            out += f"  metric missing: {', '.join(m.missing)}\n"
    for p in r.problems:
        out += f"  problem: {p}\n"
    return out


def read_hold_section(loaded: LoadedProfile, timers: object, now: datetime) -> dict:
    """The hold / lease section of ``status``: ``hold`` (the journal's hold not yet released,
    :meth:`~seat_console.actions.hold.HoldState.to_json`, or ``None``; the journal is read,
    never created), ``foreign_leases`` and ``deferred_starts`` (``seat-hold-*`` transient timers
    armed on the node: unit, next elapse), ``protects_nothing`` (a sentence when a hold is in
    effect but every timer is armed, else ``None``), ``seat_downtime`` (the seat's downtime in
    the newest runbook run that stopped it, :func:`seat_console.actions.drain.last_downtime`:
    ``{"run_id", "runbook", "at", "seconds", "start_s", "image_id"}``, or ``None``: none
    measured), ``errors`` (what could not be read)."""
    from seat_console.actions import hold as hold_mod
    from seat_console.actions import node_ops
    from seat_console.actions.journal import Journal, JournalError
    from seat_console.core.paths import journal_path
    from seat_console.node.transport import TransportError, make_transport

    from seat_console.actions.drain import last_downtime

    out: dict = {"hold": None, "foreign_leases": [], "deferred_starts": [],
                 "protects_nothing": None, "seat_downtime": None, "errors": []}
    own = None
    try:
        p = journal_path()
        if p.exists():
            with Journal(p) as j:
                h = hold_mod.current_hold(j)
                if h is not None:
                    out["hold"] = h.to_json(now)
                    own = h.lease_unit
                out["seat_downtime"] = last_downtime(j)
    except JournalError as exc:
        out["errors"].append(f"journal: {exc}")
    try:
        tr = make_transport(loaded)
        try:
            out["foreign_leases"] = [
                {"unit": t.unit, "next_elapse": hold_mod.iso(t.next_elapse)}
                for t in node_ops.node_leases(tr) if t.unit != own]
            out["deferred_starts"] = [
                {"unit": t.unit, "starts": t.unit.removesuffix(".timer").split("-defer-", 1)[1]
                 + ".timer", "next_elapse": hold_mod.iso(t.next_elapse)}
                for t in node_ops.node_deferrals(tr)]
        finally:
            tr.close()
    except (node_ops.LeaseError, TransportError) as exc:
        out["errors"].append(f"node leases: {exc}")
    in_effect = (out["hold"] is not None and out["hold"]["active"]) or out["foreign_leases"]
    if in_effect and isinstance(timers, TimersReading) and timers.timers and all(
            t.active for t in timers.timers):
        n = len(timers.timers)
        out["protects_nothing"] = (f"the hold protects nothing: every timer is active "
                                   f"({n}/{n}) — someone started them again, or it stopped none")
    return out


def render_hold(sec: dict) -> str:
    """The ``Hold and lease`` text section of :func:`read_hold_section`."""
    out = "Hold and lease\n"
    h = sec.get("hold")
    if h is None:
        out += "  no hold in this console's journal\n"
    else:
        out += (f"  hold {h['hold_id']}: {h['state']}{' (active)' if h['active'] else ''}, "
                f"placed {h['placed_at']} by {h['placed_by']}, expires {h['expires_at']}\n"
                f"      lease {h['lease_unit']}; silence {h['silence_id'] or 'none'}; stopped "
                f"{', '.join(h['stopped']) or 'none'}\n")
    for fl in sec.get("foreign_leases", []):
        out += (f"  FOREIGN LEASE {fl['unit']} elapses {fl['next_elapse']}: a hold by another "
                "console (another state dir)\n")
    for d in sec.get("deferred_starts", []):
        out += f"  deferred start {d['unit']}: starts {d['starts']} at {d['next_elapse']}\n"
    if sec.get("protects_nothing"):
        out += f"  WARNING: {sec['protects_nothing']}\n"
    from seat_console.commands.runbook_cmd import downtime_line
    out += f"  {downtime_line(sec.get('seat_downtime'))}\n"
    for e in sec.get("errors", []):
        out += f"  cannot read {e}\n"
    return out


def render_text(snap: NodeSnapshot, also: Sequence[str] = ()) -> str:
    """The whole snapshot as text (sections in :data:`seat_console.snapshot.reading.SOURCE_NAMES`
    order); ``also``: more that could not be read, named on the ``unavailable:`` line (the hold
    section's, :func:`hold_unread`)."""
    now = snap.taken_at
    head = (f"Seat Console status: node {snap.node} via {snap.transport}, "
            f"{now.strftime('%Y-%m-%d %H:%M:%SZ')}\nprofile {snap.profile_source} "
            f"(sha256 {snap.profile_sha256[:12]})\n\n")
    parts = [render_gpus(snap.gpus), render_timers(snap.timers, now),
             render_silences(snap.silences, now), render_containers(snap.containers, now),
             render_engine(snap.engine)]
    down = snap.unavailable()
    names = [*(f"{n} ({u.kind})" for n, u in down.items()), *also]
    tail = "\nunavailable: " + ", ".join(names) + "\n" if names else "\nall sources read\n"
    return head + "\n".join(parts) + tail


__all__ = ["hold_unread", "read_hold_section", "register", "render_hold", "render_text", "run",
           "with_hold_section"]
