"""``seat-console probe [--phase NAME … | --sweep [--sweep-top N] [--sweep-goodput SHARE]
[--sweep-growth FRACTION]] [--json] [--dry-run] [--force --reason TEXT]`` and
``seat-console runs [--json] [RUN_ID]``.

``probe`` sends the profile's ``[probe]`` load to whichever container holds the seat and keeps
the run under the XDG data dir (:mod:`seat_console.probe.store`). It changes nothing on the node;
it refuses without an active hold unless ``--force --reason`` (the reason is journaled).
Ctrl-C stops it cleanly: the run is kept as ``interrupted``.

Exit codes of ``probe`` (README.md): ``0`` complete (every phase complete, accounting agrees,
nothing disturbed it; headlines printed); ``1`` error (invalid profile, data dir unwritable);
``2`` usage; ``5`` refused at preflight (no active hold, no seat container running, engine
down; nothing was sent — ``--dry-run`` prints the plan with each refused check marked ``✗``
first, then exits 5; with ``--sweep`` the plan is the sweep's steps, stop rule and forecast);
``7`` the run was kept but is not complete (incomplete, disrupted or failed: no headline);
``130`` interrupted (Ctrl-C), kept. ``runs`` exits 0, or 1 when the named run does not exist,
2 when RUN_ID is not a run id.
"""

from __future__ import annotations

import argparse
import re
import sys
from typing import Any

from seat_console.core import jsonout
from seat_console.core.fmt import share_text
from seat_console.core.sweep import GOODPUT_MIN, GROWTH_MIN
from seat_console.core.probe_stats import read_goodput, read_tpot_excluded, tpot_population
from seat_console.actions import probe_journal
from seat_console.actions.probe_journal import journal_force, journal_probe
from seat_console.core import engine_timing
from seat_console.commands import action_common as ac
from seat_console.probe.client import run_async
from seat_console.probe.plan import render_plan, render_preflight, sweep_plan
from seat_console.probe.run import (
    PreflightCheck,
    Probe,
    ProbeRefused,
    Progress,
    SweepSpec,
    default_monitor_factory,
    preflight,
)
from seat_console.probe.store import (
    RunWriter,
    StoreError,
    list_runs,
    read_summary,
    runs_dir,
)
from seat_console.core.profile import LoadedProfile

RUN_ID_RE = re.compile(r"^[0-9]{8}T[0-9]{6}Z-[0-9a-f]{6}$")
"""A run id as :func:`seat_console.probe.store.new_run_id` makes them (no path can hide in it)."""

PROBE_EXITS = ("exit codes: 0 complete; 1 error; 2 usage; 5 refused at preflight, nothing "
               "sent; 7 kept but not complete (no headline); 130 interrupted, kept")
"""``probe``'s exit codes, as its ``--help`` ends."""

EXIT_OK = 0
EXIT_ERROR = 1
EXIT_USAGE = 2
EXIT_REFUSED = 5
EXIT_NOT_COMPLETE = 7
EXIT_INTERRUPTED = 130


RUNS_EXITS = ("exit codes: 0 listed or shown; 1 the named run does not exist; 2 RUN_ID is not a run"
              " id")
"""The exit codes, as ``--help`` ends (``epilog``)."""


def register(sub: argparse._SubParsersAction) -> None:
    """Add the ``probe`` and ``runs`` subcommands."""
    p = sub.add_parser("probe", help="run the profile's probe load against the seat and keep the "
                                     "run (needs an active hold, or --force --reason)")
    p.epilog = PROBE_EXITS
    p.add_argument("--phase", action="append", metavar="NAME",
                   help="run only this phase of probe.phases (repeatable)")
    p.add_argument("--json", action="store_true", help="print the run summary as JSON")
    p.add_argument("--dry-run", action="store_true",
                   help="preflight only: print what would be sent; send nothing")
    p.add_argument("--force", action="store_true",
                   help="probe without an active hold (needs --reason; journaled)")
    p.add_argument("--reason", metavar="TEXT", help="why --force is needed (journaled)")
    p.add_argument("--sweep", action="store_true",
                   help="instead of probe.phases: concurrency 1, 2, 4, … up to --sweep-top, "
                        "stopped by the rule (docs/probe.md, Sweep); reports the knee")
    p.add_argument("--sweep-top", type=int, default=64, metavar="N",
                   help="the sweep's highest concurrency (default 64)")
    p.add_argument("--sweep-goodput", type=float, default=GOODPUT_MIN, metavar="SHARE",
                   help="stop when a step's goodput share is under this (0-1; default 0.9; "
                        "needs [probe.slo])")
    p.add_argument("--sweep-growth", type=float, default=GROWTH_MIN, metavar="FRACTION",
                   help="stop when output tok/s grew less than this over the previous step "
                        "(default 0.10)")
    p.set_defaults(func=ac.ends_with_next(run_probe_cmd))
    r = sub.add_parser("runs", help="list kept comparisons and probe runs (never deleted), or show one run")
    r.epilog = RUNS_EXITS
    r.add_argument("run_id", nargs="?", help="show this run's summary")
    r.add_argument("--json", action="store_true", help="print as JSON")
    r.set_defaults(func=run_runs_cmd)


# -- formatting -------------------------------------------------------------------------------
def _ms(x: float | None) -> str:
    """Seconds ``x`` as milliseconds, one decimal; a positive time under 0.05 ms (which one
    decimal would print as 0.0) with three decimals, or ``<0.001``, so a measured time never
    reads as 0; ``None`` as ``n/a``."""
    if x is None:
        return "n/a"
    ms = x * 1000
    if 0 < ms < 0.05:
        return f"{ms:.3f}" if ms >= 0.001 else "<0.001"
    return f"{ms:,.1f}"


def _dist(name: str, d: dict[str, Any] | None) -> str:
    if not d or not d.get("n"):
        return f"{name} n/a (n=0)"
    zero = (" (ITL 0 = tokens that arrived in one network read; docs/probe.md, Timestamps)"
            if name == "ITL" and d.get("p50_s") == 0 else "")
    return (f"{name} p50/p95/p99 {_ms(d['p50_s'])}/{_ms(d['p95_s'])}/{_ms(d['p99_s'])} ms "
            f"(n={d['n']:,}){zero}")


def _check(c: dict[str, Any] | None) -> str:
    if not c:
        return "n/a"
    eng = "n/a" if c.get("engine") is None else f"{c['engine']:,.0f}"
    sign = "=" if c.get("ok") else "≠"
    return f"client {c['client']:,} {sign} engine Δ {eng}"


def sweep_lines(sw: dict[str, Any]) -> list[str]:
    """A run's ``sweep`` block as text: the rule, why it stopped, the knee."""
    k = sw.get("knee") if isinstance(sw.get("knee"), dict) else None
    knee = ("none: the first step already failed the rule" if k is None else
            f"concurrency {k.get('concurrency')}, {k.get('output_tok_s') or 0:,.1f} tok/s, "
            f"TTFT p95 {_ms(k.get('ttft_p95_s'))} ms"
            + (f", goodput {k['goodput'] * 100:.1f} %" if k.get("goodput") is not None else ""))
    stop = sw.get("stopped_by") or (f"not stopped: the top step ({sw.get('top')}) met the rule "
                                    "— the knee is above it")
    return [f"sweep: {sw.get('rule')}", f"  stopped: {stop}", f"  knee: {knee}"]


def server_lines(sv: dict[str, Any]) -> list[str]:
    """A phase's ``stats.server`` block as text: the client − engine TTFT per request and the
    token mismatches (nothing when the engine gave no per-request metrics and counts agree)."""
    out = []
    d = sv.get("client_minus_server") if isinstance(sv.get("client_minus_server"), dict) else {}
    if sv.get("with_metrics"):
        out.append(f"  per request vs the engine ({sv['with_metrics']} with its metrics): "
                   + _dist("client − engine TTFT (queue + TTFT)", d))
    n = sv.get("token_mismatches")
    if n or sv.get("with_metrics"):
        first = ", ".join(str(i) for i in sv.get("token_mismatch_first") or [])
        out.append(f"  token mismatches (stream count ≠ usage.completion_tokens): {n}"
                   + (f" (first: requests {first})" if first else ""))
    return out


def prefix_cache_line(pc: dict[str, Any]) -> str:
    """One phase's ``prefix_cache`` block as text: how it started cache-clean and its
    prefix-cache hit rate (Δ hits / Δ queries of the engine's counters)."""
    mode = pc.get("mode")
    how = {"reset": "reset before the phase", "off": "not cleaned (probe.prefix_cache = off)",
           "nonce": f"nonce {pc.get('nonce')} before every prompt"}.get(str(mode), "unknown")
    rate = pc.get("hit_rate")
    hits, queries = pc.get("hits"), pc.get("queries")
    if isinstance(rate, (int, float)) and isinstance(hits, (int, float)) and isinstance(
            queries, (int, float)):
        got = f"hit rate {rate * 100:.1f} % ({hits:,.0f}/{queries:,.0f} prompt tokens)"
    else:
        got = f"hit rate unknown ({pc.get('problem') or 'not read'})"
    return f"prefix cache: {how}; {got}"


def goodput_line(gp: dict[str, Any]) -> str:
    """One phase's goodput (its ``stats.goodput`` block) as text: the share of sent requests
    that met every target, its Wilson 95 % interval, the targets and what missed which."""
    slo = ", ".join(f"{k.removesuffix('_ms').upper()} <= {v:g} ms"
                    for k, v in (gp.get("slo") or {}).items())
    missed = ", ".join(f"{k.removesuffix('_ms').upper() if k != 'failed' else 'failed'} {v}"
                       for k, v in (gp.get("missed") or {}).items())
    text = share_text(gp["met"], gp["trials"], gp["low"], gp["high"])
    return (f"goodput {text} against {slo or 'no target'}"
            + (f"; missed: {missed}" if missed else ""))


def render_phase(b: dict[str, Any]) -> list[str]:
    """Text lines for one phase block of a summary (``docs/probe.md``)."""
    st = b.get("stats")
    if not st:
        why = f" — {b['reason']}" if b.get("reason") else ""
        return [f"phase {b['name']}: {b['state']}{why}"]
    lines = [f"phase {b['name']} (concurrency {st['concurrency']}"
             + (f", {st['request_rate']:g} req/s" if st.get("request_rate") else "")
             + f"): expected {st['expected']}, attempted {st['attempted']}, completed "
             f"{st['completed']}, failed {st['failed']}"
             + (f" ({', '.join(f'{k} {v}' for k, v in st['failures'].items())})"
                if st.get("failures") else "")]
    h = st.get("headline")
    dur = st.get("duration_s")
    if h:
        lines.append(f"  output {h['output_tok_s']:,.1f} tok/s · {h['request_s']:,.2f} req/s · "
                     f"total {h['total_tok_s']:,.1f} tok/s over {dur:,.2f} s (n={h['completed']} "
                     f"requests, {st['output_tokens']:,} output tokens)")
        lines.append("  " + " · ".join(_dist(n, st.get(k)) for n, k in
                                       (("TTFT", "ttft"), ("TPOT", "tpot"))))
        if any((excl := read_tpot_excluded(st.get("tpot_excluded"))).values()):
            lines.append("  " + tpot_population((st.get("tpot") or {}).get("n") or 0,
                                                 st["completed"], excl)
                         + " (undefined there, not 0; docs/probe.md)")
        lines.append("  " + " · ".join(_dist(n, st.get(k)) for n, k in
                                       (("ITL", "itl"), ("E2E", "e2e"))))
    else:
        lines.append(f"  {b['state']} — no headline")
    sv = st.get("server")
    if isinstance(sv, dict):
        lines += server_lines(sv)
    pc = b.get("prefix_cache")
    if isinstance(pc, dict):
        lines.append(f"  {prefix_cache_line(pc)}")
    gp = read_goodput(st.get("goodput"))
    if gp is not None:
        lines.append(f"  {goodput_line(gp.model_dump(mode='json'))}")
    elif st.get("goodput") is not None:
        lines.append("  goodput: unreadable in this summary")
    acc = b.get("accounting") or {}
    if "problem" in acc:
        lines.append(f"  accounting: {acc['problem']}")
    elif acc:
        lines.append(f"  accounting: output tokens {_check(acc.get('tokens'))}; requests "
                     f"{_check(acc.get('requests'))}"
                     + (f"; engine aborted/errored Δ {acc['engine_failed']:,.0f}"
                        if acc.get("engine_failed") else ""))
        for k in ("reset",):
            if acc.get(k):
                lines.append(f"  {acc[k]}")
    try:
        timing = engine_timing.parse_phase_timing(b.get("engine_timing"), "engine_timing")
    except ValueError as exc:
        lines.append(f"  engine timing: unreadable ({exc})")
    else:
        lines += [f"  engine timing {engine_timing.describe(t)}" for t in timing.values()]
    return lines


def _na(value: Any) -> str:
    """A run file's value as the text says it: a missing one (``None``, empty) is ``n/a``,
    never Python's ``None`` (the trial read "seat: None (None), image ID None")."""
    return "n/a" if value is None or value == "" else str(value)


def render_summary(s: dict[str, Any], path: str | None = None) -> str:
    """The whole run as text."""
    ident = s.get("identity") or {}
    c = ident.get("container") or {}
    kv = s.get("kv_capacity") or {}
    hold = s.get("hold") or {}
    out = [f"probe run {s['run_id']}: {s['status'].upper()}"
           + (f"  (kept in {path})" if path else ""),
           f"  {s.get('started_at')} → {s.get('ended_at') or '…'} (UTC)",
           (f"seat: {_na(c.get('name'))} ({_na(c.get('role'))}), image ID "
            f"{_na(c.get('image_id'))}, repo digest {_na(c.get('repo_digest'))}; engine "
            f"{_na(ident.get('engine_version'))}, model {_na(ident.get('served_model'))} at "
            f"{_na(ident.get('endpoint'))}"),
           "hold: " + (f"FORCED without a hold: {hold['forced_reason']!r} "
                       f"({_na(hold.get('detail'))})"
                       if hold.get("forced_reason") else _na(hold.get("detail")))]
    tok = kv.get("tokens")
    conc = kv.get("max_concurrency")
    out.append("KV cache: " + (f"{tok:,} tokens" if tok is not None else "tokens n/a")
               + (f", max concurrency {conc:,.2f}x for {kv.get('per_request_tokens') or '?'} "
                  "tokens per request" if conc is not None else ", max concurrency n/a")
               + f" ({', '.join(kv.get('source') or ()) or 'no source'})")
    sw = s.get("sweep")
    if isinstance(sw, dict):
        out += sweep_lines(sw)
    if s.get("server_metrics"):
        out.append(f"per-request metrics: {s['server_metrics']}")
    if s.get("prefix_cache_reset"):
        out.append(f"prefix-cache reset: {s['prefix_cache_reset']}")
    w = s.get("warmup") or {}
    out.append(f"warm-up: {w.get('completed', 0)}/{w.get('expected', 0)} completed (excluded)")
    for b in s.get("phases", []):
        out += render_phase(b)
    for d in s.get("disruptions", []):
        out.append(f"DISRUPTED {d['at']} ({d.get('phase') or 'between phases'}) {d['kind']}: "
                   f"{d['what']}")
    for p in s.get("check_problems", []):
        out.append(f"NOT WATCHED {p['at']} {p['check']}: {p['reason']}")
    for p in s.get("problems", []):
        out.append(f"problem: {p}")
    if not s.get("headline_allowed"):
        out.append(f"no headline: the run is {s['status']}")
    return "\n".join(out) + "\n"


def _plan_json(loaded: LoadedProfile, phases: list[str] | None, *,
               checks: list[PreflightCheck], sweep: SweepSpec | None = None,
               **info: Any) -> dict[str, Any]:
    spec = loaded.profile.probe
    plan = None
    if sweep is not None:
        plan = {**sweep_plan(loaded, sweep, (info.get("container") or {}).get(
            "image_id")).model_dump(mode="json"), "top": sweep.top,
            "goodput_min": sweep.goodput_min, "growth_min": sweep.growth_min,
            "requests_per_slot": sweep.requests_per_slot}
    return {"dry_run": True,
            "checks": [{"name": c.name, "ok": c.ok, "detail": c.detail} for c in checks],
            "output_tokens": spec.output_tokens, "warmup_requests": spec.warmup_requests,
            "api": spec.api,
            "phases": [] if sweep is not None else
            [p.model_dump() for p in spec.phases if not phases or p.name in phases],
            "sweep": plan, **info}


# -- commands ------------------------------------------------------------------------------
def _progress_printer(json_mode: bool) -> Any:
    shown: set[str] = set()
    stream = sys.stderr

    def cb(p: Progress) -> None:
        for ph in p.phases:
            if ph.state == "running" and f"{ph.name}:run" not in shown:
                shown.add(f"{ph.name}:run")
                print(f"[probe] phase {ph.name}: {ph.expected} requests at concurrency "
                      f"{ph.concurrency}…", file=stream, flush=True)
            if ph.state == "measured" and f"{ph.name}:end" not in shown:
                shown.add(f"{ph.name}:end")
                print(f"[probe] phase {ph.name}: {ph.completed}/{ph.expected} completed, "
                      f"{ph.failed} failed", file=stream, flush=True)
        for d in p.disruptions:
            if d not in shown:
                shown.add(d)
                print(f"[probe] DISRUPTED: {d}", file=stream, flush=True)
    return cb


def _dry_run(args: argparse.Namespace, loaded: LoadedProfile, forced: str | None,
             sweep: SweepSpec | None = None) -> int:
    """``probe --dry-run``: every preflight check, then the plan (with ``--sweep``: its steps,
    stop rule and forecast), always; exit 0 when the probe would start, 5 when preflight would
    refuse (plan shown first), 1 on an error."""
    try:
        pre = preflight(loaded, hold=probe_journal.hold_info(), force_reason=forced, collect=True)
    except ProbeRefused as exc:
        part = exc.partial
        info = {"endpoint": part.get("endpoint"), "container": part.get("container"),
                "model": part.get("model"), "hold": part.get("hold"), "forced": forced}
        if args.json:
            print(jsonout.dumps({**_plan_json(loaded, args.phase, checks=exc.checks,
                                              sweep=sweep, **info),
                                 "refused": str(exc)}, indent=2, default=str))
        else:
            sys.stdout.write(render_plan(loaded, args.phase, checks=exc.checks, sweep=sweep,
                                         **info))
        print(f"seat-console probe: {exc}", file=sys.stderr)
        return EXIT_REFUSED
    except Exception as exc:  # noqa: BLE001 - report, exit 1
        print(f"seat-console probe: {type(exc).__name__}: {exc}", file=sys.stderr)
        return EXIT_ERROR
    if args.json:
        print(jsonout.dumps({**_plan_json(loaded, args.phase, checks=pre.checks, sweep=sweep,
                                          endpoint=pre.endpoint, container=pre.identity.get(
                                              "container"), model=pre.model, hold=pre.hold.detail,
                                          forced=pre.forced),
                             "refused": None, "identity": pre.identity,
                             "kv_capacity": pre.kv.model_dump()}, indent=2, default=str))
    else:
        sys.stdout.write(render_preflight(pre, loaded, args.phase, sweep))
    return EXIT_OK


def _sweep_spec(args: argparse.Namespace) -> SweepSpec | int | None:
    """``--sweep``'s :class:`SweepSpec` (``None`` without ``--sweep``), or :data:`EXIT_USAGE`
    after saying which argument is out of range."""
    if not getattr(args, "sweep", False):
        return None
    if args.phase:
        print("seat-console probe: --sweep runs its own steps; drop --phase", file=sys.stderr)
        return EXIT_USAGE
    if not (1 <= args.sweep_top <= 4096 and 0.0 <= args.sweep_goodput <= 1.0
            and 0.0 <= args.sweep_growth <= 10.0):
        print("seat-console probe: --sweep-top 1-4096, --sweep-goodput 0-1, "
              "--sweep-growth 0-10", file=sys.stderr)
        return EXIT_USAGE
    return SweepSpec(top=args.sweep_top, goodput_min=args.sweep_goodput,
                     growth_min=args.sweep_growth)


def run_probe_cmd(args: argparse.Namespace, loaded: LoadedProfile) -> int:
    """Run ``probe`` (see the module docstring for exit codes)."""
    if args.force and not (args.reason and args.reason.strip()):
        print("seat-console probe: --force needs --reason 'why there is no hold' (journaled)",
              file=sys.stderr)
        return EXIT_USAGE
    if args.reason and not args.force:
        print("seat-console probe: --reason goes with --force", file=sys.stderr)
        return EXIT_USAGE
    sweep = _sweep_spec(args)
    if isinstance(sweep, int):
        return sweep
    known = {p.name for p in loaded.profile.probe.phases}
    bad = [n for n in (args.phase or []) if n not in known]
    if bad:
        print(f"seat-console probe: --phase {', '.join(bad)}: not in probe.phases of "
              f"{loaded.source} ({', '.join(sorted(known))})", file=sys.stderr)
        return EXIT_USAGE
    forced = args.reason if args.force else None
    if args.dry_run:
        return _dry_run(args, loaded, forced, sweep)
    try:
        pre = preflight(loaded, hold=probe_journal.hold_info(), force_reason=forced)
    except ProbeRefused as exc:
        if args.json:
            print(jsonout.dumps({"refused": str(exc), "dry_run": False}, indent=2))
        print(f"seat-console probe: {exc}", file=sys.stderr)
        return EXIT_REFUSED
    except Exception as exc:  # noqa: BLE001 - report, exit 1
        print(f"seat-console probe: {type(exc).__name__}: {exc}", file=sys.stderr)
        return EXIT_ERROR
    try:
        writer = RunWriter()
    except StoreError as exc:
        print(f"seat-console probe: {exc}", file=sys.stderr)
        return EXIT_ERROR
    if pre.forced:
        why = journal_force(loaded, writer.run_id, pre.forced, pre.hold)
        if why:
            writer.write_summary({"schema": "seat-console.probe-run/1", "run_id": writer.run_id,
                                  "status": "failed", "problems": [
                                      f"--force could not be journaled: {why}"], "phases": []})
            writer.close()
            print(f"seat-console probe: refusing: --force could not be journaled ({why})",
                  file=sys.stderr)
            return EXIT_REFUSED
    probe = Probe(loaded, pre, phases=args.phase, writer=writer, sweep=sweep,
                  monitor_factory=default_monitor_factory(loaded, pre),
                  on_progress=_progress_printer(args.json))
    print(f"[probe] run {probe.run_id} → {writer.path}", file=sys.stderr, flush=True)
    for why in filter(None, [journal_probe(loaded, probe.run_id, "start", "started",
                                           f"probe run kept in {writer.path}")]):
        print(f"[probe] warning: {why}", file=sys.stderr)
    interrupted = False
    try:
        summary = run_async(probe.run())
    except KeyboardInterrupt:
        interrupted = True
        summary = probe.summary or read_summary(writer.path)
    for why in filter(None, [journal_probe(
            loaded, probe.run_id, "end", str(summary.get("status")),
            f"headline {'allowed' if summary.get('headline_allowed') else 'withheld'}",
            {"disruptions": len(summary.get("disruptions", [])),
             "phases": {b["name"]: b["state"] for b in summary.get("phases", [])}})]):
        print(f"[probe] warning: {why}", file=sys.stderr)
    if args.json:
        print(jsonout.dumps({**summary, "path": str(writer.path)}, indent=2, default=str))
    else:
        sys.stdout.write(render_summary(summary, str(writer.path)))
    if interrupted or summary.get("status") == "interrupted":
        return EXIT_INTERRUPTED
    return EXIT_OK if summary.get("status") == "complete" else EXIT_NOT_COMPLETE


def run_runs_cmd(args: argparse.Namespace, _loaded: LoadedProfile) -> int:
    """Run ``runs``: list every kept comparison and run (oldest first) — per run the seat
    container it measured (role, name, image ID) and, for a comparison's leg, the bracket and
    leg (``cmp-… B2``) — or show one run."""
    if args.run_id:
        if not RUN_ID_RE.match(args.run_id):
            print(f"seat-console runs: {args.run_id!r} is not a run id (YYYYMMDDTHHMMSSZ-xxxxxx, "
                  "as `seat-console runs` lists them)", file=sys.stderr)
            return EXIT_USAGE
        d = runs_dir() / args.run_id
        try:
            s = read_summary(d)
        except StoreError as exc:
            print(f"seat-console runs: {exc} (list runs with `seat-console runs`)",
                  file=sys.stderr)
            return EXIT_ERROR
        if args.json:
            print(jsonout.dumps({**s, "path": str(d)}, indent=2))
        else:
            sys.stdout.write(render_summary(s, str(d)))
        return EXIT_OK
    from seat_console.evidence.runs import list_comparisons
    from seat_console.probe.store import data_dir

    rows = list_runs()
    comparisons = list_comparisons(data_dir())
    legs = {p: f"{c['bracket_id']} {name}" for c in comparisons
            for p, name in c["leg_runs"].items()}
    for r in rows:
        r["leg"] = legs.get(r["path"])
    if args.json:
        print(jsonout.dumps({"runs_dir": str(runs_dir()), "runs": rows,
                             "comparisons": comparisons}, indent=2))
        return EXIT_OK
    if not rows and not comparisons:
        print(f"no probe runs kept in {runs_dir()}")
        return EXIT_OK
    if comparisons:
        print("comparisons (give the ID to `seat-console report`):")
        for c in comparisons:
            extra = f" — {c.get('problem') or c.get('reason')}" if (
                c.get("problem") or c.get("reason")) else ""
            print(f"  {c['bracket_id']}  {c['status']}  {c.get('order')} x{c.get('rounds')}, "
                  f"{c.get('legs', '?')}/{c.get('planned_legs') or '?'} legs{extra}")
        print("runs:")
    for r in rows:
        ph = "; ".join(
            f"{p['name']}: " + (f"{p['headline']['output_tok_s']:,.1f} tok/s "
                                f"(n={p['headline']['completed']})" if p.get("headline")
                                else str(p.get("state")))
            + (", goodput " + share_text(p["goodput"]["met"], p["goodput"]["trials"],
                                         p["goodput"]["low"], p["goodput"]["high"])
               if p.get("goodput") else "")
            for p in r.get("phases") or [])
        extra = f" — {r['problem']}" if r.get("problem") else ""
        dis = f", {r['disruptions']} disruption(s)" if r.get("disruptions") else ""
        cont = r.get("container") or {}
        img = str(cont.get("image_id") or "")
        seat = (f"{cont.get('role') or '?'} {cont.get('name') or '?'} "
                f"image {img.removeprefix('sha256:')[:12] or 'unknown'}") if cont else \
            "seat container not recorded"
        leg = f"leg {r['leg']}; " if r.get("leg") else ""
        print(f"{r['run_id']}  {r['status']}{dis}  {leg}{seat}  {ph}{extra}")
    return EXIT_OK


__all__ = ["sweep_lines", "goodput_line", "prefix_cache_line", "server_lines", "register", "render_phase", "render_summary", "run_probe_cmd", "run_runs_cmd"]
