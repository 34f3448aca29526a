"""The runbook's three stages that read and journal but change nothing on the node — ``fit``,
``image`` and ``decide`` — below the fronts, so the TUI's runbook screen runs them as the CLI
does (same reads, same journal rows). ``seat-console runbook next`` takes its fit from here;
``image-check`` and ``decide`` (``commands/image_cmd.py``, ``commands/decide_cmd.py``) still
carry the same code as :func:`check_images` / :func:`record_image_check` and
:func:`newest_bracket` / :func:`make_decision` — to call these instead once the CLI-wording
work on those two files has landed (kept apart meanwhile so the two changes merge).

* **fit** — :func:`fit_facts` reads the candidate's fit verdict now; :func:`record_fit`
  journals it as the ``fit`` row (runbook ``fit``, kind ``end``, step ``verdict``, outcome
  ``done``; facts ``{"verdict": "fits" | "over" | "no verdict", "candidate", "resident",
  "words"}``), which :func:`seat_console.actions.stages.read_runbook` reads.
* **image** — :func:`image_targets` names the images that could serve the candidate;
  :func:`check_images` inspects each offline (:func:`seat_console.sources.image_caps.
  inspect_image`) and says which has ``[candidate.requires]``; :func:`record_image_check`
  journals the answer (runbook ``image-check``, one ``end`` row).
* **decide** — :func:`newest_bracket` finds the comparison to decide on;
  :func:`make_decision` builds the evidence report and its decision (with the minutes an
  INCONCLUSIVE's extra rounds would take on this node); recording it is
  :func:`seat_console.actions.decide.record_decision`.

No Textual, no printing: the fronts word the outcome.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from seat_console.actions.journal import Entry, Journal
from seat_console.core.profile import LoadedProfile


# -- fit ----------------------------------------------------------------------------------------
def fit_facts(nctx: Any) -> dict[str, Any]:
    """The fit verdict read now, as the ``fit`` row's facts: ``verdict`` (``fits`` / ``over``
    / ``no verdict``), ``candidate`` / ``resident`` (the profile's checkpoint names; ``None``
    without a candidate), ``words`` (the verdict's sentence, or why there is none). ``nctx``: a
    :class:`~seat_console.node.context.NodeContext`. Never raises for the node's state (no
    verdict, said why)."""
    from seat_console.actions.swap import fit_verdict

    prof = nctx.profile
    cand = prof.candidate.name if prof.candidate is not None else None
    facts: dict[str, Any] = {"candidate": cand, "resident": prof.resident.name}
    if cand is None:
        return {**facts, "verdict": "no verdict",
                "words": f"{nctx.loaded.source} names no [candidate]"}
    try:
        fits, words = fit_verdict(nctx)
    except Exception as exc:  # noqa: BLE001 - no verdict, said why
        return {**facts, "verdict": "no verdict", "words": f"{type(exc).__name__}: {exc}"}
    if not fits and "cannot be budgeted" in words:
        return {**facts, "verdict": "no verdict", "words": words}
    return {**facts, "verdict": "fits" if fits else "over", "words": words}


def record_fit(journal: Journal, loaded: LoadedProfile, facts: dict[str, Any]) -> Entry:
    """Journal ``facts`` (:func:`fit_facts`) as the ``fit`` row; the row. Raises
    :class:`~seat_console.actions.journal.JournalError` when the journal cannot be written."""
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S%fZ")
    return journal.append(run_id=f"fit-{loaded.sha256[:8]}-{stamp}", runbook="fit",
                          kind="end", step="verdict", outcome="done", facts=facts,
                          output=str(facts["words"]), profile_sha256=loaded.sha256)


# -- image --------------------------------------------------------------------------------------
def python_bin(loaded: LoadedProfile) -> str:
    """The interpreter in the image for the engine / python checks: ``[candidate.requires]
    python_bin``, else the swap command's first item when its name starts with ``python``,
    else ``python3``."""
    req = loaded.profile.candidate.requires if loaded.profile.candidate else None
    if req is not None and req.python_bin:
        return req.python_bin
    sw = loaded.profile.swap
    if sw is not None and sw.command and sw.command[0].rsplit("/", 1)[-1].startswith("python"):
        return sw.command[0]
    return "python3"


def image_targets(loaded: LoadedProfile) -> list[tuple[str, str]]:
    """``(role, reference)`` of every image that could serve the candidate, in the order a
    swap would reach them: the backport's base (by digest), its output (the content-hash tag),
    the swap's own image (unless it is the backport), the candidate's declared image."""
    from seat_console.actions.backport import BackportError, BackportInputs

    p = loaded.profile
    out: list[tuple[str, str]] = []
    if p.backport is not None:
        out.append(("backport base", p.backport.base))
        try:
            out.append(("backport output", BackportInputs.from_spec(p.backport).tag))
        except BackportError:
            pass
    if p.swap is not None and p.swap.image != "backport":
        out.append(("swap image", p.swap.image))
    if p.candidate is not None and p.candidate.image:
        out.append(("candidate image", p.candidate.image))
    seen: set[str] = set()
    return [(r, i) for r, i in out if not (i in seen or seen.add(i))]  # type: ignore[func-returns-value]


def _swap_image_id(loaded: LoadedProfile, client: Any) -> tuple[str | None, str]:
    from seat_console.actions.runbook import StepError
    from seat_console.actions.swap import probe_image
    from seat_console.node.context import NodeContext

    if loaded.profile.swap is None:
        return None, "the profile has no [swap]: no image will serve the candidate"
    try:
        return probe_image(NodeContext.from_profile(loaded), client)
    except StepError as exc:
        return None, str(exc)


@dataclass(frozen=True)
class ImageCheck:
    """One image check: ``caps`` (per image, :class:`~seat_console.sources.image_caps`'s
    answer, in :func:`image_targets` order), ``used`` (the one the swap will use, or
    ``None``), ``doc`` (``ok`` ``True`` / ``False`` / ``None`` for cannot tell, ``verdict``,
    ``swap_image_id``, ``requires``, ``images``: reference → the answer as JSON)."""

    caps: tuple[Any, ...]
    used: Any
    doc: dict[str, Any]


def check_images(loaded: LoadedProfile, client: Any) -> ImageCheck:
    """Check ``[candidate.requires]`` inside every image of :func:`image_targets`, offline,
    through the docker ``client`` (not closed here). Raises :class:`ValueError` when the
    profile has no ``[candidate.requires]``; docker errors are the caller's (an image that
    cannot be read is a ``problem`` of its answer, not an exception)."""
    from seat_console.sources.image_caps import inspect_image

    cand = loaded.profile.candidate
    req = cand.requires if cand is not None else None
    if req is None:
        raise ValueError(f"{loaded.source} has no [candidate.requires]: nothing to check")
    vols = list(loaded.profile.swap.volumes) if loaded.profile.swap else []
    caps = tuple(inspect_image(client, r, i, req, python_bin=python_bin(loaded), volumes=vols)
                 for r, i in image_targets(loaded))
    swap_id, swap_described = _swap_image_id(loaded, client)
    used = next((c for c in caps if swap_id and c.image_id == swap_id), None)
    ok = used.has if used is not None else None
    having = [c for c in caps if c.has]
    if used is not None:
        verdict = f"the image the swap will use ({used.role} {used.image}) {used.verdict_words()}"
    else:
        verdict = f"cannot tell for the swap's image: {swap_described}"
    if ok is not True and having:
        verdict += "; " + ", ".join(f"{c.role} {c.image} has it" for c in having)
    elif ok is not True:
        verdict += "; no image checked has it"
    doc = {"ok": ok, "verdict": verdict, "swap_image_id": swap_id,
           "requires": req.model_dump(mode="json"),
           "images": {c.image: c.model_dump(mode="json") for c in caps}}
    return ImageCheck(caps, used, doc)


def record_image_check(journal: Journal, loaded: LoadedProfile, doc: dict[str, Any]) -> Entry:
    """Journal ``doc`` (:attr:`ImageCheck.doc`) as one ``image-check`` row (``end``; outcome
    ``done`` / ``failed`` / ``unknown`` for ``ok`` true / false / cannot tell); the row.
    Raises :class:`~seat_console.actions.journal.JournalError`."""
    outcome = {True: "done", False: "failed"}.get(doc["ok"], "unknown")  # type: ignore[arg-type]
    facts = {"ok": doc["ok"], "verdict": doc["verdict"], "swap_image_id": doc["swap_image_id"],
             "images": {ref: {"role": c["role"], "image_id": c["image_id"], "has": c["has"],
                              "found": [x["evidence"] for x in c["checks"] if x["ok"] is True],
                              "missed": [x["evidence"] for x in c["checks"]
                                         if x["ok"] is not True]}
                        for ref, c in doc["images"].items()}}
    return journal.append(run_id=f"image-check-{uuid.uuid4().hex[:12]}", runbook="image-check",
                          kind="end", outcome=outcome, facts=facts,
                          profile_sha256=loaded.sha256)


# -- decide -------------------------------------------------------------------------------------
def newest_bracket(journal: Any, data_root: Path | None) -> Path | None:
    """The newest compare bracket's directory: the newest ``compare`` run in the journal
    whose ``bracket_id`` has a directory under the data dir's ``comparisons``; else the
    newest comparison there (IDs begin with their UTC start); ``None`` when there is none."""
    from seat_console.actions.compare import comparisons_dir
    from seat_console.evidence.runs import list_comparisons

    base = comparisons_dir(data_root)
    for rows in reversed(list(journal.runs().values())):
        if rows[0].runbook != "compare":
            continue
        bid = next((r.facts.get("bracket_id") for r in rows
                    if isinstance(r.facts.get("bracket_id"), str)), None)
        if bid and "/" not in bid and (base / bid).is_dir():
            return base / bid
    found = sorted(list_comparisons(base.parent), key=lambda c: str(c.get("bracket_id")))
    return Path(found[-1]["path"]) if found else None


@dataclass(frozen=True)
class Decided:
    """A decision made now: ``decision`` (the report's ``decision``: ``outcome``, ``why``,
    ``needs``, ``rounds_needed``, ``questions``), ``facts`` (the ``decide`` row's,
    :func:`seat_console.actions.decide.decision_facts`; ``needs`` with the minutes the extra
    rounds would take on this node), ``cost`` (:func:`seat_console.actions.compare.forecast`
    of those rounds, or ``None``), ``sources`` (the run / comparison directories read),
    ``at`` (the report's ``generated_at``, UTC, whole seconds)."""

    decision: dict[str, Any]
    facts: dict[str, Any]
    cost: dict[str, Any] | None
    sources: tuple[str, ...]
    at: datetime


def make_decision(journal: Journal, sources: list[str], data_root: Path | None = None,
                  at: datetime | None = None) -> Decided:
    """The decision over ``sources`` (run or comparison IDs / directories; ``[]``: the
    :func:`newest_bracket`). Journals nothing. Raises :class:`LookupError` when there is no
    bracket to decide on, :class:`~seat_console.evidence.runs.RunError` when a run cannot be
    read, :class:`~seat_console.actions.journal.JournalError` when the journal cannot."""
    from seat_console.actions import compare as cmp_mod
    from seat_console.actions import decide as dec
    from seat_console.core import jsonout
    from seat_console.evidence import report as rp

    if not sources:
        d = newest_bracket(journal, data_root)
        if d is None:
            raise LookupError("no compare bracket found (run `seat-console compare`, or give "
                              "RUN…)")
        sources = [str(d)]
    at = (at or datetime.now(UTC)).replace(microsecond=0)
    inputs = rp.load_inputs(sources, data_root)
    rep = json.loads(jsonout.dumps(rp.build_report(inputs, now=at), default=str))
    facts = dec.decision_facts(rep)
    decision = rep["decision"]
    cost = None
    if decision.get("rounds_needed"):
        order = (rep.get("comparison") or {}).get("order") or "ABBA"
        try:
            cost = cmp_mod.forecast(journal, str(order), int(decision["rounds_needed"]),
                                    data_root=data_root)
        except ValueError:
            cost = None
        if cost is not None:
            when = (f"≈ {cost['minutes']:.0f} min on this node" if cost["minutes"]
                    is not None else "no forecast: no measurement yet on this node")
            facts["needs"] = f"{facts['needs']} ({when})"
    return Decided(decision, facts, cost, tuple(inputs.sources), at)


__all__ = ["Decided", "ImageCheck", "check_images", "fit_facts", "image_targets",
           "make_decision", "newest_bracket", "python_bin", "record_fit", "record_image_check"]
