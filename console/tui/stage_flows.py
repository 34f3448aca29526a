"""The runbook's read stages — ``fit``, ``image``, ``decide`` — as flows of the one runbook
controller (:mod:`seat_console.tui.runbook`), so the runbook screen's Enter runs them as it
runs hold or swap: the plan read in a worker, a confirmation, the run in a worker with its
lines in the log screen, the outcome once.

Each is an object with ``plan()`` and ``run()`` (what :class:`~seat_console.tui.runbook.Flow`
``make`` returns), over :mod:`seat_console.actions.read_stages` — the code the CLI's
``runbook next``, ``image-check`` and ``decide`` use, writing the same journal rows:

* :class:`FitRun` — the plan is the fit verdict read now; yes journals it (the ``fit`` row);
  a candidate that does not fit is journaled too, and the run says the runbook stops there;
* :class:`ImageRun` — the plan names the images and what is checked (nothing read yet); yes
  inspects each offline and journals the answer (``image-check``);
* :class:`DecideRun` — the plan *is* the decision, built from the newest bracket: the outcome,
  each question's answer, what would decide an INCONCLUSIVE; yes journals it (``decide``),
  which is what promote reads.

None of them changes the node. Worker threads only: every method here reads the node, the
journal or the run store.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from seat_console.actions.runbook import PlanLine
from seat_console.widgets.decision import answer_mark

@dataclass(frozen=True)
class StagePlan:
    """A read stage's plan as the controller shows it: ``ok`` (it can go on), ``lines``
    (:class:`~seat_console.actions.runbook.PlanLine`; a refusal is one with ``error``),
    ``shown`` (the confirmation's lines, in order), ``facts`` (what the plan read)."""

    lines: tuple[PlanLine, ...]
    shown: tuple[str, ...]
    facts: dict[str, Any] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        """No line refuses."""
        return all(x.error is None for x in self.lines)

    def text_lines(self) -> list[str]:
        """The confirmation's lines."""
        return list(self.shown)


@dataclass(frozen=True)
class StageResult:
    """A read stage's outcome as the controller's :class:`RunFinished` carries it: ``ok``,
    ``outcome`` (``done`` / ``failed``), ``text`` (its lines; the first is the notification),
    ``error``, ``facts``; ``remaining`` is always empty (nothing on the node changed)."""

    kind: str
    ok: bool
    text: tuple[str, ...]
    error: str | None = None
    facts: dict[str, Any] = field(default_factory=dict)
    remaining: tuple[str, ...] = ()

    @property
    def outcome(self) -> str:
        """``done`` or ``failed``."""
        return "done" if self.ok else "failed"

    def describe(self) -> str:
        """The lines, one per row."""
        return "\n".join(self.text)


def refused(step: str, why: str) -> StagePlan:
    """A plan that cannot go on: one line with ``why`` as its error."""
    return StagePlan((PlanLine(step, False, why, error=why),), (f"✗ {step}: {why}",))


class FitRun:
    """The fit stage (module docstring). ``nctx``: the node context; ``journal``: open;
    ``on_log``: a line for the log screen."""

    def __init__(self, loaded: Any, journal: Any, nctx: Any,
                 on_log: Callable[[str], None]) -> None:
        self.loaded, self.journal, self.nctx, self.on_log = loaded, journal, nctx, on_log

    def plan(self) -> StagePlan:
        """The verdict read now and what yes does with it."""
        from seat_console.actions.read_stages import fit_facts

        f = fit_facts(self.nctx)
        shown = [f"fit verdict now: {verdict_words(f)}",
                 f"• journal it as the fit stage (candidate {f['candidate']}, resident "
                 f"{f['resident']}); nothing on the node changes"]
        if f["verdict"] != "fits":
            shown.append("– the runbook stops at fit until the candidate fits (change the "
                         "profile's [candidate] or the node, then run fit again)")
        return StagePlan((PlanLine("fit", True, shown[1]),), tuple(shown), dict(f))

    def run(self) -> StageResult:
        """Read the verdict again, journal it; ok only when the candidate fits."""
        from seat_console.actions.read_stages import fit_facts, record_fit

        f = fit_facts(self.nctx)
        row = record_fit(self.journal, self.loaded, f)
        ok = f["verdict"] == "fits"
        head = (f"fit: {f['verdict']} — journaled (row {row.seq})" if ok else
                f"fit: {f['verdict']} — the runbook stops here (journaled, row {row.seq})")
        return StageResult("fit", ok, (head, f"  {f['words']}"),
                           None if ok else f"the candidate's fit verdict is {f['verdict']}",
                           dict(f))


class ImageRun:
    """The image stage (module docstring)."""

    def __init__(self, loaded: Any, journal: Any, nctx: Any,
                 on_log: Callable[[str], None]) -> None:
        self.loaded, self.journal, self.nctx, self.on_log = loaded, journal, nctx, on_log

    def plan(self) -> StagePlan:
        """The images and the requirements; refused without ``[candidate.requires]``."""
        from seat_console.actions.read_stages import image_targets

        cand = self.loaded.profile.candidate
        req = cand.requires if cand is not None else None
        if req is None:
            return refused("image", f"{self.loaded.source} declares no [candidate.requires]: "
                                    "nothing to check inside the image (the stage is skipped; "
                                    "docs/runbook.md, 'The image stage')")
        targets = image_targets(self.loaded)
        shown = [f"• check [candidate.requires] inside {len(targets)} image(s), offline "
                 "(docker, no network); journal the answer",
                 *(f"  {role}: {ref}" for role, ref in targets),
                 "– nothing on the node changes"]
        return StagePlan((PlanLine("image", True, shown[0]),), tuple(shown))

    def run(self) -> StageResult:
        """Inspect, journal, say which image has it; ok when the swap's image has it."""
        from seat_console.actions.read_stages import check_images, record_image_check

        client = self.nctx.docker(timeout_s=60)
        try:
            checked = check_images(self.loaded, client)
        finally:
            client.close()
        for c in checked.caps:
            self.on_log(f"{c.role} {c.image}: {c.verdict_words()}"
                        + ("  ← the swap uses this image" if c is checked.used else ""))
            for ch in c.checks:
                self.on_log(f"  {'✓' if ch.ok is True else '✗' if ch.ok is False else '?'} "
                            f"{ch.evidence}")
        row = record_image_check(self.journal, self.loaded, checked.doc)
        ok = checked.doc["ok"] is True
        return StageResult("image", ok, (f"image: {checked.doc['verdict']} (journaled, row "
                                         f"{row.seq})",),
                           None if ok else checked.doc["verdict"], dict(checked.doc))


class DecideRun:
    """The decide stage (module docstring)."""

    def __init__(self, loaded: Any, journal: Any, nctx: Any,
                 on_log: Callable[[str], None]) -> None:
        self.loaded, self.journal, self.nctx, self.on_log = loaded, journal, nctx, on_log

    def _decide(self) -> Any:
        from seat_console.actions.read_stages import make_decision

        return make_decision(self.journal, [])

    def plan(self) -> StagePlan:
        """The decision built now from the newest bracket: its lines; refused when there is
        no bracket or a run cannot be read."""
        from seat_console.evidence.runs import RunError

        try:
            made = self._decide()
        except (LookupError, RunError) as exc:
            return refused("decide", str(exc))
        shown = [*decision_lines(made.decision, made.facts.get("needs", "")),
                 f"• journal it (the decide stage; promote reads it); inputs: "
                 f"{', '.join(made.sources)}", "– nothing on the node changes"]
        return StagePlan((PlanLine("decide", True, shown[-2]),), tuple(shown),
                         {"decision": made.facts["decision"]})

    def run(self) -> StageResult:
        """Build the decision again and journal it; ok whatever it is (a KEEP is a decision)."""
        from seat_console.actions.decide import record_decision

        made = self._decide()
        d = made.decision
        row = record_decision(self.journal, made.facts, at=made.at,
                              inputs={"sources": list(made.sources)},
                              output=f"{made.facts['decision']}: {d.get('why')}")
        return StageResult("decide", True, (f"decide: {made.facts['decision']} — journaled "
                                            f"(decide row {row.seq})",
                                            *decision_lines(d, made.facts.get("needs", ""))),
                           None, {"decision": made.facts["decision"]})


def decision_lines(decision: dict[str, Any], needs: str = "") -> list[str]:
    """A decision as the confirmation and the log show it: ``decision: KEEP — why``, then
    one line per question (``✓ fits? (critical): yes: …``), then what would decide it.

    A KEEP's or INCONCLUSIVE's ``why`` is its deciding questions' answers joined
    (:func:`seat_console.evidence.decision.outcome_of`): when it is made of nothing else, the
    headline names those questions instead (``decision: INCONCLUSIVE — from throughput and
    latency? (its answer below)``), so a long "cannot tell, because …" is shown once."""
    qs = decision.get("questions") or []
    why = _why_words(str(decision.get("why") or ""), qs)
    out = [f"decision: {decision.get('outcome')} — {why}".rstrip(" —")]
    for q in qs:
        ans = str(q.get("answer") or "")
        out.append(f"  {answer_mark(ans)} {q.get('question')}"
                   f"{' (critical)' if q.get('critical') else ''}: {ans}")
    if needs or decision.get("needs"):
        out.append(f"what would decide it: {needs or decision.get('needs')}")
    return out


def verdict_words(facts: dict[str, Any]) -> str:
    """The fit verdict and its sentence (:func:`~seat_console.actions.read_stages.fit_facts`)
    once: the sentence alone when it starts with the verdict (``fits: 2 × … GiB free``), else
    ``<verdict> — <sentence>`` (``no verdict — the profile names no [candidate]``)."""
    verdict, words = str(facts.get("verdict") or ""), str(facts.get("words") or "")
    if verdict and words.lower().startswith(verdict.lower()) \
            and words[len(verdict):len(verdict) + 1] in (":", " ", ""):
        return words
    return f"{verdict} — {words}".strip(" —")


def _why_words(why: str, questions: list[Any]) -> str:
    """``why``, or — when it is only the answers of some of ``questions`` (each as
    ``"<question> [(critical) ]<answer>"``, joined by ``"; "``) — ``from <those questions>
    (their answers below)``."""
    rest, named = why, []
    for q in questions:
        if not isinstance(q, dict):
            continue
        question, answer = str(q.get("question") or ""), str(q.get("answer") or "")
        for part in (f"{question} (critical) {answer}", f"{question} {answer}"):
            if question and answer and part in rest:
                rest = rest.replace(part, "", 1)
                named.append(question)
                break
    if not named or rest.replace(";", "").strip():
        return why
    return (f"from {', '.join(named)} "
            f"({'its answer' if len(named) == 1 else 'their answers'} below)")


def make_fit(ctl: Any, journal: Any, nctx: Any, _observer: Any, on_log: Any) -> FitRun:
    """The fit flow's runbook (a :class:`~seat_console.tui.runbook.Flow` ``make``)."""
    return FitRun(ctl.app.loaded, journal, nctx, on_log)


def make_image(ctl: Any, journal: Any, nctx: Any, _observer: Any, on_log: Any) -> ImageRun:
    """The image flow's runbook."""
    return ImageRun(ctl.app.loaded, journal, nctx, on_log)


def make_decide(ctl: Any, journal: Any, nctx: Any, _observer: Any, on_log: Any) -> DecideRun:
    """The decide flow's runbook."""
    return DecideRun(ctl.app.loaded, journal, nctx, on_log)


__all__ = ["DecideRun", "FitRun", "ImageRun", "StagePlan", "StageResult",
           "decision_lines", "make_decide", "make_fit", "make_image", "refused",
           "verdict_words"]
