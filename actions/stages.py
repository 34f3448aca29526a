"""The seat-swap runbook's state as one model: the stages, each read from the node, the journal
and the run store (never from one console's memory).

The stages, in order (../shared/DESIGN.md "The runbook")::

    fit -> image -> hold -> backport -> swap -> probe -> compare -> decide -> restore | promote -> release

``restore`` and ``promote`` are alternatives: the decision picks one; the other is ``skipped``.

This module holds the model every front renders (the TUI's runbook strip and screen, ``seat-console
runbook``, the exporter's ``seat_runbook_stage``, the fleet row). It imports no Textual.

Statuses (:data:`Status`):

* ``todo``: not done in this runbook cycle;
* ``done``: done at :attr:`StageState.at` by :attr:`StageState.operator`, its evidence given;
* ``failed``: the newest attempt failed (:attr:`StageState.reason` says how);
* ``stale``: done, but something it depends on changed after it (e.g. a new backport after the
  probe): it must be run again before a later stage may rely on it;
* ``skipped``: the branch not taken (``restore`` after a promote, ``promote`` after a restore),
  or a stage the profile does not ask for (``image`` without ``[candidate.requires]``);
* ``running``: a run of it has no ``end`` row and the console running it is alive on this host
  (:func:`~seat_console.actions.runner_id.runner_alive`): in progress, wait for it — never
  "failed, recover it".
"""

from __future__ import annotations

import bisect
import hashlib
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

from seat_console.actions.journal import Entry, Journal, JournalError
from seat_console.actions.runbook import PARENT_RUN
from seat_console.actions.runner_id import RUNNER, runner_alive

STAGES: tuple[str, ...] = ("fit", "image", "hold", "backport", "swap", "probe", "compare",
                           "decide", "restore", "promote", "release")
"""Stage names in runbook order; ``restore`` and ``promote`` are alternatives."""

Status = Literal["todo", "done", "failed", "stale", "skipped", "running"]
SeatHolder = Literal["resident", "candidate", "none", "both", "unknown"]


@dataclass(frozen=True)
class StageState:
    """One stage as read now.

    ``name``: one of :data:`STAGES`. ``status``: see the module docstring. ``at``: when it was
    done / failed (UTC; ``None`` for ``todo``). ``operator``: who did it (the journal row's
    operator), ``None`` when not done. ``evidence``: label -> value, e.g. ``{"image digest":
    "sha256:…", "run": "20261205T…", "report sha256": "…"}``. ``needs``: one sentence, what
    this stage needs before it can run (or what it gave the next stage). ``key``: the TUI
    binding id that runs it (``"node.hold"``), ``None`` when it has none. ``command``: the CLI
    that runs it (``"seat-console hold --ttl 4h"``). ``reason``: why it failed or is stale
    (``""`` otherwise).
    """

    name: str
    status: Status
    at: datetime | None = None
    operator: str | None = None
    evidence: Mapping[str, str] = field(default_factory=dict)
    needs: str = ""
    key: str | None = None
    command: str = ""
    reason: str = ""
    details: tuple[str, ...] = ()
    """Lines to show under the stage: ``decide``'s answer per question (``"fits? yes: …"``,
    from its journal row), so no front prints a row's raw JSON."""


@dataclass(frozen=True)
class RunbookState:
    """The runbook as read at :attr:`read_at`: every stage in :data:`STAGES` order, the next
    stage to run (``None`` when the cycle is complete), who holds the seat now (from docker),
    and the sources that could not be read (each a sentence; their stages say ``unknown`` in
    ``needs`` rather than guessing)."""

    stages: tuple[StageState, ...]
    next: StageState | None
    seat_holder: SeatHolder
    read_at: datetime
    problems: tuple[str, ...] = ()
    cycle_started_at: datetime | None = None
    """When the cycle shown began: the end of the release that closed the one before it
    (``None``: no cycle closed yet, the whole journal is this cycle)."""
    cycle_closed_at: datetime | None = None
    """When the cycle shown was closed by a release (``None``: it is open). A closed cycle
    has ``next = None``; the next runbook step (``fit``) opens a new one."""
    foreign_holds: tuple[str, ...] = ()
    """Hold leases armed on the node by another console (not this journal's own hold), each
    as ``hold --status`` names it (``seat-hold-…-lease.timer elapses … (in 9 min)``); both
    fronts show them next to who is in the seat. ``()``: none, or the node was not read."""
    next_why: str = ""
    """Why :attr:`next` jumps over earlier ``todo`` stages, one line (``"compare first: it
    starts from the resident in the seat; swap and probe come after"``); ``""`` when it does
    not. Both fronts (the runbook screen, ``seat-console runbook``) show it as it is."""
    seat_downtime: str = ""
    """The seat's downtime in the newest runbook run that stopped it, as a line
    (:func:`seat_console.actions.drain.downtime_line`: ``"seat down 31.4 s in the last
    runbook run that stopped it (restore …)"``, or that none was measured); ``""``: the
    journal was not read."""

    def stage(self, name: str) -> StageState:
        """The stage called ``name``; raises :class:`KeyError` for a name not in :data:`STAGES`."""
        for s in self.stages:
            if s.name == name:
                return s
        raise KeyError(name)




# -- reading the runbook's state ---------------------------------------------------------------
#
# The dependency graph (what each stage's evidence is built on). A stage shows ``done`` only
# when every stage it needs is ``done`` and was done no later than it; a stage it needs that
# was redone after it, or is no longer done, makes it ``stale`` (the rule carries down the
# graph: a new backport makes swap, probe, compare, decide stale). The hold is a gate each
# action checks for itself (``swap`` and ``probe`` refuse without one), not evidence: placing
# a new hold after one lapsed does not make the probe stale.
NEEDS: Mapping[str, tuple[str, ...]] = {
    "fit": (),
    "image": (),
    "hold": (),
    "backport": (),
    "swap": ("fit", "image", "backport"),
    "probe": ("swap",),
    "compare": ("fit", "image", "backport"),
    "decide": ("probe", "compare"),
    "restore": ("swap",),
    "promote": ("decide",),
    "release": ("hold",),
}
"""Stage -> the stages it needs (its evidence is built on them); every one earlier in
:data:`STAGES`."""

CARRIED: tuple[str, ...] = ("fit", "image", "backport")
"""Stages about the candidate and its image, not the seat: a cycle without its own attempt
takes the newest one from any cycle (a compare after a restore still has its fit, image and
backport)."""

STAGE_OF_RUNBOOK: Mapping[str, str] = {
    "fit": "fit", "image-check": "image", "hold": "hold", "build-backport": "backport",
    "swap": "swap", "probe": "probe", "compare": "compare", "decide": "decide",
    "restore": "restore", "promote": "promote", "promote-undo": "promote",
    "release": "release", "extend": "hold",
}
"""Journal ``runbook`` column -> the stage its runs are attempts of (``../CONVENTIONS``:
``fit`` rows are written by ``seat-console runbook next``, ``image-check`` by ``image-check``,
``decide`` by ``decide``, ``promote`` / ``promote-undo`` by ``promote``; an ``extend`` of
the hold that was done, or never ended, counts as the hold's newest run)."""

KEYS: Mapping[str, str | None] = {
    "fit": None, "image": None, "hold": "node.hold", "backport": "node.build-backport",
    "swap": "node.swap", "probe": "node.probe", "compare": "node.compare", "decide": None,
    "restore": "node.restore", "promote": "node.promote", "release": "node.release",
}
"""Stage -> the TUI binding id that runs it (``console/tui/keys.py``; this layer cannot
import it, a test checks every id named here exists there). ``None``: no key yet."""

COMMANDS: Mapping[str, str] = {
    "fit": "seat-console runbook next",
    "image": "seat-console image-check",
    "hold": "seat-console hold",
    "backport": "seat-console build-backport",
    "swap": "seat-console swap",
    "probe": "seat-console probe",
    "compare": "seat-console compare",
    "decide": "seat-console decide",
    "restore": "seat-console restore",
    "promote": "seat-console promote",
    "release": "seat-console release",
}
"""Stage -> the CLI that runs it."""

RECOVER_COMMAND = "seat-console recover"
"""The fix for a run that never ended (a console killed inside it)."""

_NEEDS_TEXT: Mapping[str, str] = {
    "fit": "the candidate's fit verdict on this node (weights + PLE + KV cache within the "
           "cards' memory)",
    "image": "the capability the candidate needs, found inside the serving images (offline)",
    "hold": "a hold: the fleet's timers stopped and the seat silenced for a TTL",
    "backport": "the backport image built (a patched file over a base pinned by digest)",
    "swap": "the fit verdict, the image check and the backport image (and a hold: swap "
            "refuses without one): the candidate put in the seat",
    "probe": "the candidate serving in the seat: a probe run measures it",
    "compare": "the backport image: a bracket of resident and candidate legs",
    "decide": "the probe run and the comparison: PROMOTE-ABLE, KEEP or INCONCLUSIVE",
    "restore": "a KEEP (or no) decision: the resident back in the seat, the hold released",
    "promote": "a PROMOTE-ABLE decision: the candidate made the seat's resident",
    "release": "the hold: the timers restarted, the silence expired, the lease cancelled",
}

_ENGINE_KINDS = frozenset({"start", "skip", "begin", "apply", "verify", "fail", "undo",
                           "undo-fail", "warn", "end", "recover"})
"""Row kinds the runbook engine writes for a run (its window; notes such as a hold's
``interference`` rows, appended later under the hold's run ID, are not part of it)."""
_SEAT_CHANGING = ("swap", "restore", "compare", "promote", "promote-undo")
DECISIONS = ("PROMOTE-ABLE", "KEEP", "INCONCLUSIVE")


@dataclass(frozen=True)
class _Attempt:
    """One top-level run of a stage, as the journal has it."""

    stage: str
    runbook: str
    run_id: str
    first: Entry
    end: Entry | None
    rows: tuple[Entry, ...]

    @property
    def facts(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for r in self.rows:
            if isinstance(r.facts, dict):
                out.update(r.facts)
        return out


def _operator(e: Entry) -> str:
    """Who wrote row ``e``: the row's operator record when it has one (the journal's
    ``operator`` column, or ``facts["operator"]``: a string, or a dict with ``login`` and,
    where present, ``sudo_user`` — ``alice (sudo from bob)@host``), else ``user@host``."""
    op = getattr(e, "operator", None)
    if not op and isinstance(e.facts, dict):
        op = e.facts.get("operator")
    if isinstance(op, str) and op:
        return op[:200]
    if isinstance(op, Mapping) and isinstance(op.get("login"), str) and op["login"]:
        sudo = op.get("sudo_user")
        who = op["login"][:100] + (f" (sudo from {sudo[:100]})" if isinstance(sudo, str)
                                   and sudo and sudo != op["login"] else "")
        return f"{who}@{e.host}"
    return f"{e.user}@{e.host}"


def _windows(runs: Mapping[str, Sequence[Entry]]) -> list[tuple[int, int, str]]:
    """Each run's ``(first seq, last seq, run_id)`` over its engine rows."""
    out = []
    for rid, rows in runs.items():
        seqs = [r.seq for r in rows if r.kind in _ENGINE_KINDS]
        if seqs:
            out.append((min(seqs), max(seqs), rid))
    return out


def _top_level(runs: Mapping[str, Sequence[Entry]]) -> list[str]:
    """Run IDs not started inside another run (``compare`` runs its own hold, swaps,
    restores and release: those are its steps, not stages), in order of their first row.

    A run whose first row names its parent (:data:`~seat_console.actions.runbook.PARENT_RUN`,
    written by the engine since the parent run is known) is nested from that row on — while
    its compare runs, before the compare writes a row after it. For rows written before that
    fact existed, the window rule: a run is nested when its first row's ``seq`` lies strictly
    inside another run's window (:func:`_windows`). A run's own window never starts before
    its first row, so "some window that starts before ``first`` ends after it" is that test:
    one sort and a running maximum, O(n log n) in the runs (the exporter reads it every 5 s)."""
    wins = sorted((lo, hi) for lo, hi, _ in _windows(runs))
    los = [lo for lo, _ in wins]
    reach: list[int] = []   # reach[i]: the latest end among the windows wins[:i + 1]
    for _, hi in wins:
        reach.append(max(hi, reach[-1]) if reach else hi)
    out = []
    for rid, rows in runs.items():
        if _parent(rows, runs) is not None:
            continue
        first = min(r.seq for r in rows)
        i = bisect.bisect_left(los, first)   # windows starting strictly before ``first``
        if i == 0 or reach[i - 1] <= first:
            out.append(rid)
    return out


def _parent(rows: Sequence[Entry], runs: Mapping[str, Sequence[Entry]]) -> str | None:
    """The run ``rows`` were started inside, as its first row records it
    (:data:`~seat_console.actions.runbook.PARENT_RUN`), when that run is in the journal too;
    ``None`` otherwise (a row without it, a value that is not a run ID of this journal)."""
    facts = rows[0].facts if rows else None
    parent = facts.get(PARENT_RUN) if isinstance(facts, Mapping) else None
    if isinstance(parent, str) and parent != rows[0].run_id and parent in runs:
        return parent
    return None


def _probe_attempts(rows: Sequence[Entry]) -> list[_Attempt]:
    """The probe runs among ``rows`` (runbook ``probe``, kind ``probe``, step ``start`` /
    ``end``; a forced start's ``force`` row belongs to its run)."""
    by: dict[str, list[Entry]] = {}
    for r in rows:
        if r.runbook == "probe":
            by.setdefault(r.run_id, []).append(r)
    out = []
    for rid, rs in by.items():
        end = next((r for r in reversed(rs) if r.kind == "probe" and r.step == "end"), None)
        if not any(r.kind == "probe" for r in rs):
            continue
        out.append(_Attempt("probe", "probe", rid, rs[0], end, tuple(rs)))
    return out


def _keeps_hold(a: _Attempt) -> bool:
    """A ``restore --keep-hold`` run that ended done: it undid a swap and kept the hold, so it
    is not the cycle's restore stage (that one ends the hold) but a step back before the
    compare (:func:`seat_console.actions.swap.build_restore`, inputs ``keep_hold``)."""
    return (a.runbook == "restore" and a.first.inputs.get("keep_hold") is True
            and a.end is not None and a.end.outcome == "done")


def _closes_cycle(a: _Attempt) -> bool:
    """A top-level ``release`` that ended (done or partly: the timers are back), or a
    ``restore`` whose ``release hold`` step verified."""
    if a.end is None:
        return False
    if a.runbook == "release":
        return a.end.outcome in ("done", "partial")
    if a.runbook == "restore":
        return any(r.kind == "verify" and r.step == "release hold" for r in a.rows)
    return False


def _sha256_file(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _text(v: Any, limit: int = 200) -> str:
    """A fact as evidence text, at most ``limit`` characters; one that is longer is cut to
    ``limit - 1`` and ends with ``…``, so a cut never reads as the whole answer (the runbook
    screen's decide row showed "… (no decode time the cl"). Never raises."""
    text = v if isinstance(v, str) else json.dumps(v, default=str, sort_keys=True)
    return text if len(text) <= limit else text[:max(limit - 1, 0)] + "…"


class _Reader:
    """One reading: the journal's rows, the run store, docker; builds the stages."""

    def __init__(self, nctx: Any, journal: Journal, runs_dir: Path | None,
                 now: datetime) -> None:
        self.nctx, self.journal, self.runs_dir, self.now = nctx, journal, runs_dir, now
        self.problems: list[str] = []

    # -- sources ----------------------------------------------------------------------------
    def foreign_holds(self) -> tuple[str, ...]:
        """Other consoles' hold leases on the node now (``systemctl``), as lines; an
        unreadable node is a problem, never "none"."""
        if self.nctx is None:
            return ()
        from seat_console.actions import hold as hold_mod
        from seat_console.actions.node_ops import LeaseError, node_leases

        try:
            h = hold_mod.current_hold(self.journal)
            own = h.lease_unit if h is not None else None
            return tuple(hold_mod.foreign_lease_text(t, self.now)
                         for t in node_leases(self.nctx.transport) if t.unit != own)
        except (LeaseError, JournalError) as exc:
            self.problems.append(f"the node's hold leases cannot be read ({exc}); "
                                 "`seat-console hold --status` says what is known")
            return ()

    def seat_holder(self) -> SeatHolder:
        if self.nctx is None:
            self.problems.append("the node was not read (no node context): who holds the seat "
                                 "is unknown")
            return "unknown"
        from seat_console.actions.swap import seat_state

        res, probe, why = seat_state(self.nctx)
        if why is not None or res is None or probe is None:
            self.problems.append(f"docker: who holds the seat cannot be read ({why}); check "
                                 "`docker ps` on the node")
            return "unknown"
        return "both" if res and probe else "resident" if res else "candidate" if probe \
            else "none"

    def probe_summary(self, run_id: str) -> tuple[dict[str, Any] | None, str | None]:
        """The run's ``summary.json`` and its SHA-256, or ``(None, None)`` with a problem."""
        from seat_console.probe.store import StoreError, read_summary
        from seat_console.probe.store import runs_dir as default_runs_dir

        run_id = str(run_id)
        if not re.fullmatch(r"[0-9A-Za-z_.-]{1,100}", run_id) or run_id in (".", ".."):
            self.problems.append(f"probe run ID {run_id[:100]!r} in the journal is not a run "
                                 "store name: its summary is not read")
            return None, None
        try:
            base = self.runs_dir or default_runs_dir()
            doc = read_summary(base / run_id)
            return doc, _sha256_file(base / run_id / "summary.json")
        except (StoreError, OSError) as exc:
            self.problems.append(f"probe run {run_id}: the run store cannot be read ({exc})")
            return None, None

    def compare_doc(self, a: _Attempt) -> tuple[dict[str, Any] | None, str | None]:
        """The bracket's ``compare.json`` (from the run's ``cmp_dir`` fact) and its SHA-256."""
        from seat_console.core.untrusted import load_json

        d = a.facts.get("cmp_dir")
        if not isinstance(d, str) or not d:
            self.problems.append(f"compare run {a.run_id}: the journal names no comparison "
                                 "folder (cmp_dir)")
            return None, None
        p = Path(d) / "compare.json"
        try:
            data = p.read_bytes()
            doc = load_json(data, str(p))
        except (OSError, ValueError) as exc:
            self.problems.append(f"{p}: cannot be read ({exc})")
            return None, None
        if not isinstance(doc, dict):
            self.problems.append(f"{p}: not a JSON object")
            return None, None
        return doc, hashlib.sha256(data).hexdigest()

    # -- one stage from its newest attempt ----------------------------------------------------
    def from_attempts(self, stage: str, attempts: Sequence[_Attempt]) -> StageState:
        base = dict(name=stage, needs=_NEEDS_TEXT[stage], key=KEYS[stage],
                    command=COMMANDS[stage])
        # a refused run changed nothing: it does not undo an earlier attempt; an extend that
        # failed left the hold as it was
        real = [a for a in attempts if a.end is None or (
            a.end.outcome != "refused" and (a.runbook != "extend" or a.end.outcome == "done"))]
        pick = real[-1] if real else (attempts[-1] if attempts else None)
        if pick is None:
            return StageState(status="todo", **base)  # type: ignore[arg-type]
        a = pick
        if a.end is None:
            last = a.rows[-1]
            where = f" inside step {last.step!r}" if last.step else ""
            if stage == "probe":
                return StageState(status="failed", at=a.first.at, operator=_operator(a.first),
                                  evidence={"run": a.run_id},
                                  reason=f"probe run {a.run_id} has no end row: still running, "
                                         "or its console was killed (its summary says "
                                         "`running`); if no console is probing, probe again",
                                  **base)  # type: ignore[arg-type]
            runner = next((r.facts.get(RUNNER) for r in a.rows
                           if isinstance(r.facts.get(RUNNER), dict)), None)
            if runner_alive(runner):
                base["command"] = ""
                return StageState(status="running", at=last.at, operator=_operator(a.first),
                                  evidence={"run": a.run_id},
                                  reason=f"{a.runbook} run {a.run_id} is in progress (pid "
                                         f"{runner.get('pid')} on this host; last row "
                                         f"{last.kind}{where} at {_z(last.at)}): wait for it "
                                         "to end",
                                  **base)  # type: ignore[arg-type]
            base["command"] = RECOVER_COMMAND
            return StageState(status="failed", at=last.at, operator=_operator(a.first),
                              evidence={"run": a.run_id},
                              reason=f"{a.runbook} run {a.run_id} never ended (last row "
                                     f"{last.kind}{where} at {_z(last.at)}): in progress, or "
                                     f"its console was killed; if no console is running it, "
                                     f"`{RECOVER_COMMAND}` undoes or completes it",
                              **base)  # type: ignore[arg-type]
        end = a.end
        f = a.facts
        ev: dict[str, str] = {"run": a.run_id}
        ok = end.outcome == "done"
        why = f"{a.runbook} {end.outcome}" + (f": {_text(end.output)}" if end.output else "")
        if stage == "fit":
            v = f.get("verdict")
            ok = v == "fits"
            ev.update({"verdict": _text(v), "candidate": _text(f.get("candidate", "")),
                       "resident": _text(f.get("resident", ""))})
            why = (f"fit verdict {_text(v)!s}: " + _text(f.get("words", ""), 300)).rstrip(": ")
        elif stage == "image":
            imgs = f.get("images") if isinstance(f.get("images"), dict) else {}
            ok = ok and f.get("ok") is True
            missed = []
            for ref, d in sorted(imgs.items()):
                if isinstance(d, dict):
                    ev[f"image {ref}"[:120]] = _text(d.get("image_id", "?"))
                    if d.get("has") is not True:
                        missed.append(f"{ref} lacks {_text(d.get('missed', []), 200)}")
            why = "image check: " + ("; ".join(missed) or f"ok={_text(f.get('ok'))}")
        elif stage == "hold":
            h = f.get("hold") if isinstance(f.get("hold"), dict) else {}
            ev.update({"hold": _text(h.get("hold_id", "?")),
                       "expires at": _text(h.get("expires_at", "?"))})
            if a.runbook == "extend":
                ev["extended by"] = a.run_id
            if h.get("silence_id"):
                ev["silence"] = _text(h["silence_id"])
        elif stage == "backport":
            for k, label in (("image_id", "image ID"), ("pushed_repo_digest", "image digest"),
                             ("tag", "tag")):
                if f.get(k):
                    ev[label] = _text(f[k])
        elif stage == "swap":
            for k, label in (("probe_image_id", "image ID"), ("probe_id", "container")):
                if f.get(k):
                    ev[label] = _text(f[k])
        elif stage == "probe":
            ok = end.outcome == "complete"
            why = f"probe run ended {end.outcome}"
            doc, sha = self.probe_summary(a.run_id)
            if doc is not None:
                ident = doc.get("identity") if isinstance(doc.get("identity"), dict) else {}
                ev["summary sha256"] = sha or "?"
                if ident.get("repo_digest") or ident.get("image_id"):
                    ev["image digest"] = _text(ident.get("repo_digest") or ident.get("image_id"))
                st = doc.get("status")
                if ok and st != "complete":   # the store disagrees with the journal: say so
                    ok, why = False, f"the run store says the run is {_text(st)}"
        elif stage == "compare":
            ev["bracket"] = _text(f.get("bracket_id", "?"))
            if ok:
                doc, sha = self.compare_doc(a)
                if doc is None:
                    ok, why = False, "its compare.json cannot be read (see problems)"
                else:
                    ev["compare.json sha256"] = sha or "?"
                    if doc.get("status") != "complete":
                        ok = False
                        why = (f"bracket {_text(doc.get('status'))}: "
                               f"{_text(doc.get('reason') or '', 300)}").rstrip(": ")
        elif stage == "decide":
            d = f.get("decision")
            runs = f.get("runs")
            ev.update({"decision": _text(d), "bracket": _text(f.get("bracket_id")),
                       "report sha256": _text(f.get("report_sha256", "?")),
                       "runs": (_text(", ".join(runs) or "none") if isinstance(runs, list)
                                and all(isinstance(r, str) for r in runs)
                                else _text(runs))})
            if f.get("bracket_id") is None:   # decided from runs, no bracket: not "null"
                ev["bracket"] = "none (decided from runs)"
            qs = f.get("questions")
            base["details"] = tuple(
                _text(f"{q.get('question')} {q.get('answer')}", 300)
                for q in (qs if isinstance(qs, list) else [])
                if isinstance(q, Mapping) and isinstance(q.get("question"), str))
            if d not in DECISIONS:
                ok, why = False, f"decision {_text(d)!s} is not one of {', '.join(DECISIONS)}"
            if isinstance(f.get("needs"), str) and f["needs"]:
                base["needs"] = _text(f["needs"], 300)
        elif stage == "promote":
            if a.runbook == "promote-undo" and ok:
                return StageState(status="todo", at=None, operator=None,
                                  evidence={"undone by": a.run_id},
                                  reason=f"promote undone at {_z(end.at)} by "
                                         f"{_operator(end)}: the previous resident is back",
                                  **base)  # type: ignore[arg-type]
        elif stage == "release":
            if end.outcome == "partial":
                ok = True
                ev["left"] = _text(end.output)
            if a.runbook == "restore":
                ev["released by"] = f"restore {a.run_id}"
        if ok:
            return StageState(status="done", at=end.at, operator=_operator(end),
                              evidence=ev, **base)  # type: ignore[arg-type]
        return StageState(status="failed", at=end.at, operator=_operator(end), evidence=ev,
                          reason=why, **base)  # type: ignore[arg-type]


def _z(t: datetime | None) -> str:
    return "?" if t is None else t.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _replace(s: StageState, **kw: Any) -> StageState:
    return StageState(**{**s.__dict__, **kw})


def read_runbook(nctx: Any, journal: Journal, *, runs_dir: Path | None = None,
                 now: datetime | None = None, seat: SeatHolder | None = None,
                 leases: bool = False, profile: Any = None) -> RunbookState:
    """The runbook's state, read now from the node (``nctx``: who holds the seat, by docker;
    ``None``: not read, said in ``problems``), the journal (every stage's runs) and the run
    store (``runs_dir``, default the probe store's; each probe run's summary).

    The cycle: the runs after the newest top-level ``release`` that ended (done, or partly:
    the timers are back) or ``restore`` that released the hold. When nothing ran since, the
    closed cycle is shown (``cycle_closed_at`` set, ``next = None``). Runs started inside
    another run (``compare``'s own hold, swaps, restores and release) are its steps, not
    stages.

    Each stage is read from its newest top-level run in the cycle (a ``refused`` run changed
    nothing and does not hide an earlier one): ``done`` (its check passed: the fit verdict
    ``fits``, the image check ``ok``, the probe run ``complete`` in the journal *and* the run
    store, the bracket's ``compare.json`` ``complete``, a decision one of :data:`DECISIONS`),
    ``failed`` (with the reason; a run without an end row is the console killed inside it, or
    still running: its command is ``seat-console recover``), else ``todo``. Then
    :data:`NEEDS`, in :data:`STAGES` order: a ``done`` stage whose needed stage is not
    ``done``, or was done after it, is ``stale``. From docker: a swap (or restore) that was
    the last change to the seat, while the other container holds it now, is ``stale``.
    A ``restore --keep-hold`` that ended done is not the restore stage: it undid the swap
    (``swap`` is ``stale`` when it came after the newest swap) and kept the hold, so the cycle
    stays open and the compare comes next. While the candidate holds the seat and the compare
    is next, ``next`` is the restore with ``--keep-hold`` (:data:`RESTORE_BEFORE_COMPARE`).
    ``restore`` / ``promote``: the one not taken is ``skipped`` once the other is done, and
    ``promote`` after a KEEP or INCONCLUSIVE decision.

    ``next``: an unfinished run's stage first; else the first stage in order neither ``done``
    nor ``skipped`` (``promote`` before ``restore`` after a PROMOTE-ABLE decision; ``compare``
    before ``swap`` while the resident holds the seat and neither is done — the bracket starts
    from the resident, and after the swap it is refused until a restore, which ends the hold). Sources
    that cannot be read are sentences in ``problems`` (a journal that cannot be read: every
    stage ``todo`` with ``needs`` saying unknown, ``next = None``). Never raises for bad input;
    the same journal, run store, node and ``now`` give the same state.

    The hold (journal: the ``hold`` run, moved by a done ``extend``): ``stale`` once its
    ``expires_at`` passed in an open cycle (the lease restarted the timers: hold again, or
    release). ``restore`` is ``skipped`` after a decision when the resident holds the seat
    (docker) and no swap since put the candidate in (``compare`` ends with the resident back:
    nothing to restore).

    ``journal``: a :class:`~seat_console.actions.journal.Journal`, or any object whose
    ``entries()`` returns its rows in ``seq`` order and raises
    :class:`~seat_console.actions.journal.JournalError` (the exporter's read-only reader).
    ``seat``: who holds the seat when the caller read it already (then docker is not read).
    ``leases``: also read the hold leases armed on the node by other consoles
    (:attr:`RunbookState.foreign_holds`; one more ``systemctl`` read, so only the fronts that
    show them ask). ``profile``: the seat profile when there is no ``nctx`` (the exporter):
    its ``[candidate.requires]`` decides whether the image stage is ``skipped`` as with one."""
    now = now or datetime.now(UTC)
    rd = _Reader(nctx, journal, runs_dir, now)
    holder = rd.seat_holder() if seat is None else seat
    foreign = rd.foreign_holds() if leases and seat is None else ()
    try:
        entries = journal.entries()
    except JournalError as exc:
        rd.problems.append(f"the journal cannot be read: {exc}")
        unknown = tuple(StageState(name=s, status="todo", key=KEYS[s], command=COMMANDS[s],
                                   needs="unknown: the journal cannot be read")
                        for s in STAGES)
        return RunbookState(unknown, None, holder, now, tuple(rd.problems))
    runs: dict[str, list[Entry]] = {}
    for e in entries:
        runs.setdefault(e.run_id, []).append(e)
    attempts: list[_Attempt] = []
    for rid in _top_level({k: v for k, v in runs.items() if v[0].runbook != "probe"}):
        rows = runs[rid]
        stage = STAGE_OF_RUNBOOK.get(rows[0].runbook)
        if stage is None:
            continue
        end = next((r for r in reversed(rows) if r.kind == "end"), None)
        attempts.append(_Attempt(stage, rows[0].runbook, rid, rows[0], end, tuple(rows)))
    attempts.extend(_probe_attempts(entries))
    attempts.sort(key=lambda a: a.first.seq)
    # -- the cycle --------------------------------------------------------------------------
    closes = [i for i, a in enumerate(attempts) if _closes_cycle(a)]
    start_i, started_at, closed_at = 0, None, None
    if closes:
        last = closes[-1]
        if last == len(attempts) - 1:   # nothing since the newest close: show that cycle
            prev = closes[-2] if len(closes) > 1 else None
            start_i = prev + 1 if prev is not None else 0
            prev_end = attempts[prev].end if prev is not None else None
            started_at = prev_end.at if prev_end is not None else None
            closed_at = attempts[last].end.at  # type: ignore[union-attr]
        else:
            start_i, started_at = last + 1, attempts[last].end.at  # type: ignore[union-attr]
    for a in attempts[:start_i]:
        if a.end is None and a.stage != "probe":
            rd.problems.append(f"{a.runbook} run {a.run_id} from {_z(a.first.at)} never ended "
                               f"(an earlier cycle): `{RECOVER_COMMAND}` finishes it")
    cycle = attempts[start_i:]
    per: dict[str, list[_Attempt]] = {s: [] for s in STAGES}
    for a in cycle:
        if _keeps_hold(a):
            continue       # a step back to the resident, not the restore stage (below)
        per[a.stage].append(a)
        if a.runbook == "restore" and _closes_cycle(a):
            per["release"].append(a)
    for s in CARRIED:    # about the candidate, not the seat: the newest counts in any cycle
        if not per[s]:
            per[s] = [a for a in attempts if a.stage == s][-1:]
    st: dict[str, StageState] = {s: rd.from_attempts(s, per[s]) for s in STAGES}
    # (a) the image stage when the profile asks nothing of the image
    prof = getattr(nctx, "profile", None) or profile
    cand = getattr(prof, "candidate", None) if prof is not None else None
    if prof is not None and getattr(cand, "requires", None) is None \
            and st["image"].status == "todo":
        st["image"] = _replace(st["image"], status="skipped",
                               reason="the profile declares no [candidate.requires]: nothing "
                                      "to check inside the image (declare it to have the "
                                      "capability checked; docs/runbook.md, 'The image stage')")
    # -- the node: the last change to the seat against who holds it now ----------------------
    changers = [a for a in cycle if a.runbook in _SEAT_CHANGING and a.end is not None
                and a.end.outcome == "done"]
    if changers and holder in ("resident", "candidate"):
        last_change = changers[-1]
        if last_change.runbook == "swap" and holder == "resident" \
                and st["swap"].status == "done":
            st["swap"] = _replace(st["swap"], status="stale",
                                  reason="the resident holds the seat now (docker), not the "
                                         "candidate this swap put in: swap again")
        if last_change.runbook == "restore" and holder == "candidate" \
                and st["restore"].status == "done":
            st["restore"] = _replace(st["restore"], status="stale",
                                     reason="the candidate holds the seat now (docker), not "
                                            "the resident this restore put back: restore again")
    # -- a swap undone by `restore --keep-hold` (the hold kept, the cycle open) --------------
    back = next((a for a in reversed(cycle) if _keeps_hold(a)), None)
    swap_a = per["swap"][-1] if per["swap"] else None
    if back is not None and st["swap"].status == "done" \
            and (swap_a is None or swap_a.first.seq < back.first.seq):
        st["swap"] = _replace(st["swap"], status="stale",
                              reason=f"`restore --keep-hold` at "
                                     f"{_z(back.end.at if back.end else None)} "
                                     "put the resident back and kept the hold: compare from "
                                     "the resident, then swap again")
    # -- the hold's lease: lapsed in an open cycle -------------------------------------------
    if closed_at is None and st["hold"].status == "done":
        try:
            exp = datetime.fromisoformat(st["hold"].evidence.get("expires at", "")
                                         .replace("Z", "+00:00"))
        except ValueError:
            exp = None
        if exp is not None and exp.tzinfo is not None and exp <= now:
            st["hold"] = _replace(st["hold"], status="stale",
                                  reason=f"the hold lapsed at {_z(exp)} (its lease restarted "
                                         "the timers, the silence ended): `seat-console hold` "
                                         "again, or `seat-console release` to close the cycle")
    # -- needs: stale carries down the graph ------------------------------------------------
    for s in STAGES:
        cur = st[s]
        if cur.status != "done":
            continue
        for d in NEEDS[s]:
            dep = st[d]
            if dep.status == "skipped":
                continue          # not asked for (image without [candidate.requires])
            if dep.status != "done":
                st[s] = _replace(cur, status="stale",
                                 reason=f"it needs {d}, which is {dep.status}"
                                        + (" (never done in this cycle)" if dep.status == "todo"
                                           else "") + f": run {d}, then {s} again")
                break
            if dep.at is not None and cur.at is not None and dep.at > cur.at:
                st[s] = _replace(cur, status="stale",
                                 reason=f"{d} was redone at {_z(dep.at)}, after this: run {s} "
                                        "again")
                break
    # -- the branch not taken -----------------------------------------------------------------
    decision = st["decide"].evidence.get("decision") if st["decide"].status == "done" else None
    last_changer = changers[-1].runbook if changers else None
    if decision is not None and holder == "resident" and st["restore"].status == "todo" \
            and last_changer in (None, "compare", "restore", "promote-undo"):
        st["restore"] = _replace(st["restore"], status="skipped",
                                 reason="the resident holds the seat (docker) and no swap "
                                        "since put the candidate in: nothing to restore")
    if st["promote"].status == "done" and st["restore"].status != "done":
        st["restore"] = _replace(st["restore"], status="skipped",
                                 reason="the candidate was promoted")
    elif st["restore"].status == "done" and st["promote"].status != "done":
        st["promote"] = _replace(st["promote"], status="skipped",
                                 reason="the resident was restored")
    elif decision in ("KEEP", "INCONCLUSIVE") and st["promote"].status == "todo":
        st["promote"] = _replace(st["promote"], status="skipped",
                                 reason=f"the decision is {decision}: promote needs "
                                        "PROMOTE-ABLE")
    stages = tuple(st[s] for s in STAGES)
    # -- next ---------------------------------------------------------------------------------
    nxt: StageState | None = None
    why = ""
    if closed_at is None:
        open_runs = [a for a in cycle if a.end is None and a.stage != "probe"]
        if open_runs:
            nxt = st[open_runs[-1].stage]
        else:
            order = list(STAGES)
            if decision == "PROMOTE-ABLE":
                order.remove("promote")
                order.insert(order.index("restore"), "promote")
            if holder == "resident" and st["compare"].status != "done" \
                    and st["swap"].status != "done":
                # the bracket measures the resident as arm A and is refused while the
                # candidate holds the seat (gates.compare_gate): compare before the swap
                order.remove("compare")
                order.insert(order.index("swap"), "compare")
            nxt = next((st[s] for s in order if st[s].status not in ("done", "skipped")), None)
            why = _jump_reason(nxt, st)
            if nxt is not None and nxt.name == "compare" and holder in ("candidate", "both") \
                    and st["restore"].status not in ("done", "skipped"):
                # swapped before comparing: the compare is refused while the candidate holds
                # the seat (gates.compare_gate), so pointing at it is a dead end; the restore
                # that keeps the hold is the way back to it (a QA walk met this)
                nxt = _replace(st["restore"], command=f"{COMMANDS['restore']} --keep-hold")
                why = RESTORE_BEFORE_COMPARE
    from seat_console.actions.drain import downtime_line, downtimes

    down = downtimes(entries)
    return RunbookState(stages, nxt, holder, now, tuple(rd.problems),
                        cycle_started_at=started_at, cycle_closed_at=closed_at, next_why=why,
                        foreign_holds=foreign,
                        seat_downtime=downtime_line(down[-1] if down else None))


RESTORE_BEFORE_COMPARE = (
    "the compare starts from the resident in the seat and is refused while the candidate holds "
    "it: `restore --keep-hold` puts the resident back and keeps the hold (the cycle stays "
    "open), then compare, then swap again; a plain restore ends the hold and closes the cycle "
    "without a decision")
""":attr:`RunbookState.next_why` when the candidate was swapped in before the compare."""


def swap_before_compare(state: RunbookState | None) -> str | None:
    """The warning a swap's confirmation carries when ``state`` (the runbook read from the node
    and the journal) has the resident in the seat, an open cycle and its compare not done:
    once the candidate is in the seat the compare is refused until the resident is back
    (``restore --keep-hold`` keeps the hold; a plain restore ends it and the cycle without a
    decision). ``None``: nothing to warn of (or no state). Pure."""
    if state is None or state.seat_holder != "resident" or state.cycle_closed_at is not None:
        return None
    if state.stage("compare").status == "done":
        return None
    return ("⚠ the compare is not done in this cycle and it starts from the resident: after "
            "this swap it is refused until the resident is back (`restore --keep-hold` keeps "
            "the hold; then compare and swap again) — compare first to save two restarts")


def restore_keeps_hold(state: RunbookState | None) -> bool:
    """Whether a restore now should keep the hold (``seat-console restore --keep-hold``): the
    cycle is open with its hold placed, the candidate holds the seat and the compare — which
    starts from the resident and which every decision needs — is not done in this cycle
    (:data:`RESTORE_BEFORE_COMPARE`). A cycle given up is then closed by a release. ``False``
    for no state, a closed cycle, the resident in the seat or the compare done. Pure."""
    return (state is not None and state.cycle_closed_at is None
            and state.seat_holder in ("candidate", "both")
            and state.stage("hold").status == "done"
            and state.stage("compare").status != "done")


_SEAT_PHRASE = {"resident": "the resident", "candidate": "the candidate",
                "none": "no engine (the seat is empty)",
                "both": "both the resident and the candidate (check `docker ps`)",
                "unknown": "unknown (docker was not read)"}


def seat_phrase(holder: str) -> str:
    """Who is in the seat, for a line after ``"in the seat: "``: ``"the resident"``, ``"the
    candidate"``, … (what runs there, not a hold: a hold is said apart). Pure; an unexpected
    value is shown as it is."""
    return _SEAT_PHRASE.get(holder, holder)


def _jump_reason(nxt: StageState | None, st: dict[str, StageState]) -> str:
    """:attr:`RunbookState.next_why` for ``nxt``: the ``todo`` stages before it in
    :data:`STAGES` order that it jumps over, and why (the compare starts from the resident).
    ``""``: none jumped, or the decision's own line says why (promote before restore). Pure."""
    if nxt is None:
        return ""
    over = [s for s in STAGES[:STAGES.index(nxt.name)] if st[s].status == "todo"]
    if not over:
        return ""
    names = " and ".join(over) if len(over) <= 2 else ", ".join(over[:-1]) + " and " + over[-1]
    if nxt.name == "compare":
        return (f"compare first: it starts from the resident in the seat; {names} "
                f"come{'s' if len(over) == 1 else ''} after")
    return ""    # promote before restore: the decision's line says it already


def state_to_json(state: RunbookState) -> dict[str, Any]:
    """``state`` as a JSON-ready dict: ``stages`` (each: ``name``, ``status``, ``at`` ISO 8601
    ``Z`` or ``None``, ``operator``, ``evidence``, ``needs``, ``key``, ``command``,
    ``reason``), ``next`` (the same for the next stage, or ``None``), ``seat_holder``,
    ``read_at``, ``cycle_started_at``, ``cycle_closed_at``, ``next_why``, ``foreign_holds``,
    ``problems``."""
    def one(s: StageState | None) -> dict[str, Any] | None:
        if s is None:
            return None
        return {"name": s.name, "status": s.status, "at": None if s.at is None else _z(s.at),
                "operator": s.operator, "evidence": dict(s.evidence), "needs": s.needs,
                "key": s.key, "command": s.command, "reason": s.reason,
                "details": list(s.details)}
    return {"stages": [one(s) for s in state.stages], "next": one(state.next),
            "seat_holder": state.seat_holder, "read_at": _z(state.read_at),
            "cycle_started_at": None if state.cycle_started_at is None
            else _z(state.cycle_started_at),
            "cycle_closed_at": None if state.cycle_closed_at is None
            else _z(state.cycle_closed_at),
            "next_why": state.next_why, "foreign_holds": list(state.foreign_holds),
            "problems": list(state.problems)}


def next_json(state: RunbookState) -> dict[str, Any]:
    """The ``next`` key of every ``--json`` document (actions, ``decide``, ``image-check``,
    ``runbook``, ``runbook next``): the next stage as :func:`state_to_json` gives it (``name``,
    ``status``, ``command``, ``key``, ``needs``, ``reason``, …; ``{"name": None}`` when there
    is none) plus ``line``, the :func:`next_line` the text output ends with."""
    return {**(state_to_json(state)["next"] or {"name": None}), "line": next_line(state)}


def next_line(state: RunbookState) -> str:
    """The one ``next: …`` line every action's output ends with, in one format:
    ``next: STAGE — `COMMAND` (why)`` (or the cycle closed / unreadable). After a PROMOTE-ABLE
    decision the promote line names the other branch (keep: restore); after an INCONCLUSIVE
    one, restore and release name what would decide it (and ``compare`` only when that does
    not name it already)."""
    if state.next is None:
        if state.cycle_closed_at is not None:
            return (f"next: fit — the cycle closed at {_z(state.cycle_closed_at)}; "
                    "`seat-console runbook next` starts a new one")
        if state.problems:
            return f"next: unknown — {state.problems[0]}"
        return "next: nothing — every stage is done"
    n = state.next
    why = f" ({n.reason})" if n.reason else ""
    d = state.stage("decide")
    decision = d.evidence.get("decision") if d.status == "done" else None
    if decision == "INCONCLUSIVE" and n.name in ("restore", "release"):
        again = "" if "seat-console compare" in d.needs else " (or `seat-console compare` again)"
        why += f"; the decision is INCONCLUSIVE: {d.needs}{again}"
    elif decision == "PROMOTE-ABLE" and n.name == "promote":
        why += "; or keep the resident: `seat-console restore`"
    return f"next: {n.name} — `{n.command}`{why}"


__all__ = ["COMMANDS", "DECISIONS", "KEYS", "NEEDS", "RECOVER_COMMAND", "RESTORE_BEFORE_COMPARE",
           "STAGES", "STAGE_OF_RUNBOOK", "RunbookState", "SeatHolder", "StageState", "Status",
           "next_json", "next_line", "read_runbook", "restore_keeps_hold", "seat_phrase",
           "state_to_json", "swap_before_compare"]
