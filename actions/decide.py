"""The decide stage: the evidence report's decision, journaled, and read back by any console.

Runbook ``decide`` has one journal row per decision (``docs/runbook.md``; the shared
convention of issue 30): ``kind`` ``end``, ``outcome`` ``done``, ``facts``::

    {"decision": "PROMOTE-ABLE" | "KEEP" | "INCONCLUSIVE", "bracket_id": str | None,
     "runs": [run ids], "report_sha256": str,
     "questions": [{"question", "answer", "critical"}, ...], "needs": str}

``report_sha256`` is the SHA-256 of the report's canonical JSON (:func:`report_sha256`: keys
sorted, no spaces, UTF-8) built at the row's own time (``generated_at`` = the row's ``at``), so
the report a decision rests on can be re-derived from the runs and checked against it
(:func:`rederive_sha256`).

Writing a decision changes nothing on the node: only the journal (``seat-console decide``
is therefore not in the CLI's ``NODE_CHANGING``; ``--readonly`` still allows it). The promote
stage reads :func:`newest_decision` right before it acts, from the journal, never from one
console's memory.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from seat_console.actions.journal import Entry, Journal
from seat_console.actions.runbook import new_run_id
from seat_console.evidence.decision import OUTCOMES

RUNBOOK = "decide"
FACT_KEYS = ("decision", "bracket_id", "runs", "report_sha256", "questions", "needs")


class DecisionRowError(ValueError):
    """A ``decide`` journal row whose facts are not a decision (edited, or written by
    something else); the message names the row's ``seq`` and what is wrong."""


def report_sha256(rep: Mapping[str, Any]) -> str:
    """SHA-256 (hex) of ``rep`` as canonical JSON: ``sort_keys``, separators ``,`` ``:``,
    ``ensure_ascii`` off, UTF-8; a non-finite float a run file carried is written as Python's
    ``json`` writes it (``NaN``, ``Infinity``), so hashing never fails on one."""
    text = json.dumps(rep, sort_keys=True, separators=(",", ":"), ensure_ascii=False,
                      default=str)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def decision_facts(rep: Mapping[str, Any]) -> dict[str, Any]:
    """The ``decide`` row's facts (module docstring) for a report that carries its decision
    (:func:`seat_console.evidence.report.build_report`). Raises :class:`ValueError` when the
    report has no decision."""
    d = rep.get("decision")
    if not isinstance(d, Mapping) or d.get("outcome") not in OUTCOMES:
        raise ValueError("the report carries no decision (built by an older console?)")
    runs = sorted({str(r.get("run_id")) for a in (rep.get("arms") or {}).values()
                   for r in a.get("runs") or []})
    cmp_ = rep.get("comparison") or {}
    return {"decision": d["outcome"],
            "bracket_id": cmp_.get("bracket_id") if cmp_ else None,
            "runs": runs, "report_sha256": report_sha256(rep),
            "questions": [{"question": q.get("question"), "answer": q.get("answer"),
                           "critical": bool(q.get("critical"))}
                          for q in d.get("questions") or []],
            "needs": str(d.get("needs") or "")}


def record_decision(journal: Journal, decision: Mapping[str, Any], *,
                    at: datetime | None = None, profile_sha256: str = "",
                    inputs: Mapping[str, Any] | None = None,
                    output: str = "") -> Entry:
    """Journal a decision: one ``decide`` row, ``kind`` ``end``, ``outcome`` ``done``,
    ``facts`` = ``decision`` (:func:`decision_facts`' shape, checked by :func:`parse_facts`),
    at ``at`` (default now; the report's ``generated_at`` should be the same second).
    Returns the row. Raises :class:`DecisionRowError` for facts that are not a decision (so a
    bad row is never written) and :class:`~seat_console.actions.journal.JournalError` when
    the journal cannot be written."""
    facts = parse_facts(decision, "the decision to record")
    return journal.append(run_id=new_run_id(RUNBOOK), runbook=RUNBOOK, kind="end",
                          outcome="done", facts=facts, inputs=dict(inputs or {}),
                          output=output, profile_sha256=profile_sha256,
                          at=(at or datetime.now(UTC)).replace(microsecond=0))


def parse_facts(facts: Any, where: str) -> dict[str, Any]:
    """A decide row's facts, checked: exactly :data:`FACT_KEYS` (extra keys dropped),
    ``decision`` one of the outcomes, ``bracket_id`` text or null, ``runs`` a list of text,
    ``report_sha256`` 64 hex digits, ``questions`` a list of ``{question: text, answer: text,
    critical: bool}``, ``needs`` text. Raises :class:`DecisionRowError` naming ``where``."""
    def bad(what: str) -> DecisionRowError:
        return DecisionRowError(f"{where}: not a decision ({what})")

    if not isinstance(facts, Mapping):
        raise bad("facts are not an object")
    if facts.get("decision") not in OUTCOMES:
        raise bad(f"decision {str(facts.get('decision'))[:40]!r} is not one of "
                  f"{', '.join(OUTCOMES)}")
    bid = facts.get("bracket_id")
    if bid is not None and not isinstance(bid, str):
        raise bad("bracket_id is not text")
    runs = facts.get("runs")
    if not isinstance(runs, list) or not all(isinstance(r, str) for r in runs):
        raise bad("runs is not a list of run IDs")
    sha = facts.get("report_sha256")
    if not (isinstance(sha, str) and len(sha) == 64
            and all(c in "0123456789abcdef" for c in sha)):
        raise bad("report_sha256 is not 64 hex digits")
    qs = facts.get("questions")
    if not isinstance(qs, list) or not all(
            isinstance(q, Mapping) and isinstance(q.get("question"), str)
            and isinstance(q.get("answer"), str) and isinstance(q.get("critical"), bool)
            for q in qs):
        raise bad("questions is not a list of {question, answer, critical}")
    needs = facts.get("needs")
    if not isinstance(needs, str):
        raise bad("needs is not text")
    return {"decision": facts["decision"], "bracket_id": bid, "runs": list(runs),
            "report_sha256": sha,
            "questions": [{"question": q["question"], "answer": q["answer"],
                           "critical": q["critical"]} for q in qs], "needs": needs}


def newest_decision(journal: Journal) -> dict[str, Any] | None:
    """The newest ``decide`` row's decision: its facts (:data:`FACT_KEYS`) plus ``at`` (ISO
    UTC), ``by`` (``user@host``), ``seq`` and ``run_id``; ``None`` when no decision was ever
    journaled. Raises :class:`DecisionRowError` naming the row when the newest one does not
    parse (an older decision is never silently used in its place), and
    :class:`~seat_console.actions.journal.JournalError` when the journal cannot be read."""
    rows = [r for r in journal.entries(runbook=RUNBOOK, kind="end") if r.outcome == "done"]
    if not rows:
        return None
    r = rows[-1]
    facts = parse_facts(r.facts, f"journal row {r.seq} (decide)")
    return {**facts, "at": r.at.astimezone(UTC).isoformat().replace("+00:00", "Z"),
            "by": f"{r.user}@{r.host}", "seq": r.seq, "run_id": r.run_id}


def rederive_sha256(sources: Sequence[str], at: datetime) -> str:
    """The :func:`report_sha256` of the report re-built now from ``sources`` (run or
    comparison directories) at time ``at``, as ``--json`` writes it (strict JSON:
    :func:`seat_console.core.jsonout.dumps`) — equal to a decide row's ``report_sha256`` when
    the runs are unchanged. Raises :class:`~seat_console.evidence.runs.RunError`."""
    from seat_console.evidence import report as rp

    from seat_console.core import jsonout

    return report_sha256(json.loads(jsonout.dumps(
        rp.build_report(rp.load_inputs(list(sources)), now=at), default=str)))


__all__ = ["DecisionRowError", "FACT_KEYS", "RUNBOOK", "decision_facts", "newest_decision",
           "parse_facts", "record_decision", "rederive_sha256", "report_sha256"]
