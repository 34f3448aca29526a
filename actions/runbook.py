"""The runbook engine: ordered steps with precondition, apply, verify and undo, journaled.

A :class:`Runbook` is a list of :class:`Step`. Each step has

* ``check`` (the precondition, read from the node now): returns :class:`Check` — ``go=True``
  with what it will change ("stop fleet-remediation-cycle.timer (active, next in 3 min)"), or
  ``go=False`` with why it is skipped ("skip seat-conformance-smoke.timer: already inactive — not
  ours to restart"); raising :class:`StepError` refuses the step (the run stops there);
* ``apply``: changes the node; returns an output tail (journaled) or ``None``;
* ``verify``: reads the postcondition back from the source (never the command's exit code
  alone); returns a sentence or raises :class:`StepError`;
* ``undo``: puts back what ``apply`` changed and verifies that; idempotent (it reads the node and
  does nothing when there is nothing to put back), so :mod:`recover <seat_console.actions.recover>`
  can call it after a crash that happened anywhere inside ``apply``; ``None`` for a step that has
  nothing to undo;
* ``manual``: how to put it back by hand, shown when ``undo`` fails (or for a forward-only
  runbook's failed step).

:meth:`Runbook.run`: steps run in order; each step's precondition is checked again right before
its apply. The journal gets a ``begin`` row *before* ``apply`` runs (so a console killed inside a
step still leaves a record that the step may have changed the node), an ``apply`` row after, and
a ``verify`` row after the read-back. A failure (or Ctrl-C, or :meth:`Runbook.request_stop`)
stops the run and — with ``policy="undo"`` — undoes every begun step in reverse order; with
``policy="continue"`` (release / restore: putting the safety net back must not stop at the first
failure) the remaining steps still run. The :class:`Result` says exactly what remains changed on
the node and how to fix each by hand.

:meth:`Runbook.plan` runs only the checks and returns the dry-run :class:`Plan`.

Gates: a runbook may have ``gates`` (:data:`Gate`, built by :mod:`seat_console.actions.gates`):
preconditions on the *seat's* state (who holds the seat, the hold, a promote) read from docker,
the node and the journal. They run first in :meth:`Runbook.plan` (a refusal is the plan's first
line, ``✗ seat state: …``; a warning its first line) and again in :meth:`Runbook.run` right
after the ``start`` row, before any step: a refusal ends the run ``refused`` (journaled as a
``fail`` row of step ``seat state``), a warning is journaled (``warn``) and shown. Recovery
(:meth:`Runbook.finish_from_journal`) does not run them: putting back a crashed run is never
refused for the state that crash left.

Facts: steps share what they learn (a lease unit name, a silence ID, which timers were active) in
``ctx.facts`` (a JSON-able dict). Every row the engine writes carries the facts as they were then,
so a later console rebuilds the run from the journal (:func:`facts_from_rows`).

Nesting: a runbook run inside a step of another (a compare's own hold, swaps, restores and
release) records the outer run's ID in its facts as :data:`PARENT_RUN` (from the run in
progress on this thread), so a reader of the journal (:mod:`seat_console.actions.stages`) tells
a runbook's own steps from the stages from its first row on — not only once the outer run
writes a row after it.

Observers: ``observer(event)`` is called with an :class:`Event` for every start, check, skip,
begin, apply, verify, fail, undo, warning and end — the CLI prints lines, the TUI posts messages
from it (it is called on the runbook's thread). Nothing here imports Textual.

Defining a runbook (see :mod:`seat_console.actions.hold` for a full one)::

    steps = [Step(name="stop x.timer", check=..., apply=..., verify=..., undo=...,
                  manual="systemctl start x.timer")]
    result = Runbook("hold", steps, journal=journal, inputs={"ttl_s": 600}).run()
    if not result.ok: print(result.describe())
"""

from __future__ import annotations

import contextvars
import threading
import uuid
from contextlib import contextmanager
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal

from seat_console.actions.journal import Entry, Journal
from seat_console.actions.runner_id import RUNNER, runner_identity

Policy = Literal["undo", "continue"]


class StepError(Exception):
    """A step's precondition, apply, verify or undo failed.

    ``output``: a command output tail for the journal (may be empty). The message says what
    failed and, where known, the fix.
    """

    def __init__(self, message: str, output: str = "") -> None:
        self.output = output
        super().__init__(message)


class Refusals(StepError):
    """A precondition that refuses for several reasons at once, each a sentence with the state
    and the fix (``problems``, at least one). :meth:`Runbook.plan` lists each as its own
    ``✗`` line; a run refuses with them joined by ``"; "`` (its message)."""

    def __init__(self, problems: Sequence[str]) -> None:
        self.problems = tuple(problems) or ("refused",)
        super().__init__("; ".join(self.problems))


class StopRequested(Exception):
    """Raised between steps when :meth:`Runbook.request_stop` was called (e.g. the terminal hung
    up): the run stops there and undoes (policy ``undo``) what it began."""


@dataclass(frozen=True)
class Check:
    """A step's precondition: ``go`` (apply it) and ``text`` (the plan line: what it will
    change, or why it is skipped)."""

    go: bool
    text: str


@dataclass(frozen=True)
class Event:
    """One thing that happened in a run, for observers.

    ``kind``: ``start``, ``check``, ``skip``, ``begin``, ``apply``, ``verify``, ``fail``,
    ``undo``, ``undo-fail``, ``warn``, ``end``; ``step``: the step's name (``""`` for run-level
    events); ``ok``: ``True``/``False`` for verify/fail/undo/end, else ``None``; ``at``: UTC.
    """

    run_id: str
    runbook: str
    kind: str
    step: str
    message: str
    ok: bool | None = None
    at: datetime = field(default_factory=lambda: datetime.now(UTC))

    def line(self) -> str:
        """One terminal line: ``HH:MM:SSZ kind  step: message``."""
        head = f"{self.at:%H:%M:%S}Z {self.kind:<9}"
        return f"{head} {self.step + ': ' if self.step else ''}{self.message}"


GATE_STEP = "seat state"
"""The step name under which gates appear in plans and journal rows."""

Observer = Callable[[Event], None]
"""Called with each :class:`Event`, on the runbook's thread (keep it quick; the TUI posts a
message from it, the CLI prints)."""


@dataclass
class RunContext:
    """What a step's functions receive: ``run_id``, the runbook's ``inputs`` and ``facts`` (a
    JSON-able dict the steps share and the journal records), and :meth:`warn`."""

    run_id: str
    runbook: str
    inputs: dict[str, Any]
    facts: dict[str, Any]
    _emit: Callable[[str, str, str], None] = field(repr=False, default=lambda *a: None)
    planning: bool = False
    """``True`` while :meth:`Runbook.plan` runs the checks and gates (a gate that would wait,
    e.g. for an approval, only says so then)."""

    def warn(self, message: str, step: str = "") -> None:
        """Journal and show a warning (e.g. a Persistent=true timer that will fire at once, or
        interference by someone else)."""
        self._emit("warn", step, message)


Gate = Callable[["RunContext"], "str | None"]
"""A runbook gate (module docstring): reads the seat's state now; raises :class:`StepError`
to refuse (the message names the state and the fix); returns a warning sentence to show first
(journaled when the run starts), or ``None``."""


@dataclass
class Step:
    """One runbook step (see the module docstring for each part's contract).

    ``name``: short, unique within the runbook ("stop fleet-remediation-cycle.timer");
    ``check`` / ``apply`` / ``verify`` / ``undo``: functions of the :class:`RunContext`;
    ``manual``: text, or a function of the context, saying how to put the change back by hand;
    ``acts_on``: the docker containers (names) the step (or its undo) changes, or a function of
    the context giving them — journaled in the step's rows (``facts["acts_on"]``, see
    :mod:`seat_console.node.attribution`) so any console's event watcher tells these changes
    from someone else's.
    """

    name: str
    check: Callable[[RunContext], Check]
    apply: Callable[[RunContext], str | None]
    verify: Callable[[RunContext], str | None]
    undo: Callable[[RunContext], str | None] | None = None
    manual: str | Callable[[RunContext], str] = ""
    acts_on: Sequence[str] | Callable[[RunContext], Sequence[str]] = ()

    def manual_text(self, ctx: RunContext) -> str:
        """The by-hand fix as text."""
        return self.manual(ctx) if callable(self.manual) else self.manual

    def targets(self, ctx: RunContext) -> list[str]:
        """:attr:`acts_on` as a sorted list of names (``[]`` when its function fails)."""
        try:
            names = self.acts_on(ctx) if callable(self.acts_on) else self.acts_on
            return sorted({str(n) for n in names if n})
        except Exception:  # noqa: BLE001 - a missing fact: nothing declared
            return []


@dataclass(frozen=True)
class PlanLine:
    """One step of a dry-run plan: ``step`` name, ``go`` (will change the node) and ``text``;
    ``error``: set when the precondition itself failed (the run would stop there);
    ``after_refusal``: the step comes after a refusal in the plan, so it says what the step
    would do once the refusals are fixed — not what this run will do."""

    step: str
    go: bool
    text: str
    error: str | None = None
    after_refusal: bool = False


@dataclass(frozen=True)
class Plan:
    """The dry-run plan of a runbook, read from the node's current state."""

    runbook: str
    lines: tuple[PlanLine, ...]
    facts: Mapping[str, Any] = field(default_factory=dict, compare=False)
    """What the preconditions read (the run context's ``facts`` after planning, e.g. the
    release's ``forecast``: timer → ``{"fires_at_once": bool, …}``): for a front that offers a
    choice from the plan (the TUI's "defer those"); not part of ``to_json``."""

    @property
    def ok(self) -> bool:
        """``True`` when no precondition failed."""
        return all(line.error is None for line in self.lines)

    @property
    def changes(self) -> tuple[PlanLine, ...]:
        """The lines that will change the node."""
        return tuple(line for line in self.lines if line.go and line.error is None)

    @property
    def refusals(self) -> tuple[str, ...]:
        """Every refusal of the plan (the ``error`` of each line that has one), in order."""
        return tuple(line.error for line in self.lines if line.error is not None)

    def refusal_text(self) -> str:
        """Every refusal as one sentence (``"; "``-joined; ``""`` when the plan can run)."""
        return "; ".join(self.refusals)

    def text_lines(self) -> list[str]:
        """Plan lines as shown by ``--dry-run`` and the confirmation modal: the lines before
        the first refusal in order; then each distinct refusal once, as one ``✗`` line naming
        every step it stops (``✗ record resident, start probe: <error>``; three steps refused
        for one missing table were three identical lines, under a count of three); then the
        steps that would run once the refusals are fixed, under one line that says so
        (indented), the count in it being the ``✗`` lines shown."""
        first = next((i for i, x in enumerate(self.lines) if x.error is not None), None)
        if first is None:
            return [("• " if x.go else "– ") + x.text for x in self.lines]
        out = [("• " if x.go else "– ") + x.text for x in self.lines[:first]]
        steps_of: dict[str, list[str]] = {}
        for x in self.lines[first:]:
            if x.error is not None:
                steps = steps_of.setdefault(x.error, [])
                if x.step not in steps:
                    steps.append(x.step)
        out += [f"✗ {', '.join(steps)}: {err}" for err, steps in steps_of.items()]
        rest = [x for x in self.lines[first:] if x.error is None]
        later = [x for x in rest if x.after_refusal]
        out += [("• " if x.go else "– ") + x.text for x in rest if not x.after_refusal]
        if later:
            n = len(steps_of)
            out.append(f"not run now: once the {'refusal' if n == 1 else f'{n} refusals'}"
                       f" above {'is' if n == 1 else 'are'} fixed, {self.runbook} would:")
            out += ["  " + ("• " if x.go else "– ") + x.text for x in later]
        return out

    def to_json(self) -> dict[str, Any]:
        """JSON-ready dict: ``runbook``, ``ok``, ``refusals`` (every refusal, in order) and
        ``steps`` (``step``, ``go``, ``text``, ``error``, ``after_refusal``)."""
        return {"runbook": self.runbook, "ok": self.ok, "refusals": list(self.refusals),
                "steps": [{"step": p.step, "go": p.go, "text": p.text, "error": p.error,
                           "after_refusal": p.after_refusal} for p in self.lines]}


StepStatus = Literal["done", "skipped", "failed", "undone", "undo-failed", "not-run", "left"]


@dataclass(frozen=True)
class StepOutcome:
    """What happened to one step: ``status`` — ``done`` (applied and verified), ``skipped``
    (precondition said no), ``failed``, ``undone``, ``undo-failed``, ``not-run``, ``left`` (done,
    not undone: a forward-only step); ``detail``: the last message."""

    step: str
    status: StepStatus
    detail: str = ""


@dataclass(frozen=True)
class Result:
    """The outcome of a run.

    ``outcome``: ``done`` (every step done or skipped); ``undone`` (a step failed, everything
    begun was undone: the node is as before); ``partial`` (something could not be undone, or a
    forward-only step failed: see ``remaining`` and ``manual``); ``refused`` (the first
    precondition failed: nothing changed). ``error``: the failure that stopped the run;
    ``remaining``: what is left changed on the node, one sentence each; ``manual``: how to fix
    each by hand; ``facts``: the run's facts at the end.
    """

    run_id: str
    runbook: str
    outcome: Literal["done", "undone", "partial", "refused"]
    steps: tuple[StepOutcome, ...]
    error: str | None = None
    remaining: tuple[str, ...] = ()
    manual: tuple[str, ...] = ()
    warnings: tuple[str, ...] = ()
    facts: dict[str, Any] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        """``True`` when the run completed (``outcome == "done"``)."""
        return self.outcome == "done"

    def describe(self) -> str:
        """Human text: the outcome, the error, what remains and how to fix it by hand. The
        first line names the run as the *journal run* (``seat-console journal`` lists it), so
        it is not taken for the ID of what the run made (e.g. a hold's ``seat-hold-…``)."""
        head = {"done": "done", "undone": "FAILED — every change was undone; the node is as "
                "it was", "partial": "FAILED — the node is left partly changed",
                "refused": "REFUSED — nothing was changed"}[self.outcome]
        lines = [f"{self.runbook} (journal run {self.run_id}): {head}"]
        if self.error:
            lines.append(f"  error: {self.error}")
        for w in self.warnings:
            lines.append(f"  warning: {w}")
        for r in self.remaining:
            lines.append(f"  still changed: {r}")
        for m in self.manual:
            lines.append(f"  fix by hand: {m}")
        return "\n".join(lines)

    def to_json(self) -> dict[str, Any]:
        """JSON-ready dict."""
        return {"run_id": self.run_id, "runbook": self.runbook, "outcome": self.outcome,
                "ok": self.ok, "error": self.error, "remaining": list(self.remaining),
                "manual": list(self.manual), "warnings": list(self.warnings),
                "steps": [{"step": s.step, "status": s.status, "detail": s.detail}
                          for s in self.steps], "facts": self.facts}


_IN_FLIGHT: set[Runbook] = set()
_IN_FLIGHT_LOCK = threading.Lock()

PARENT_RUN = "parent_run"
"""The fact naming the run (its ``run_id``) that this run was started inside — a compare's
own hold, swaps, restores and release carry their compare's (module docstring, "Nesting").
Absent on a top-level run, and on rows written before it was recorded."""

_CURRENT_RUN: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "seat_console_current_run", default=None)
"""The run in progress on this thread (a new thread starts with none)."""


@contextmanager
def _running(rb: Runbook) -> Iterator[None]:
    """While ``rb`` runs: record the run in progress on this thread as its
    :data:`PARENT_RUN` (when it is another run), and make ``rb`` the one in progress."""
    parent = _CURRENT_RUN.get()
    if parent is not None and parent != rb.run_id:
        rb.ctx.facts.setdefault(PARENT_RUN, parent)
    token = _CURRENT_RUN.set(rb.run_id)
    try:
        yield
    finally:
        _CURRENT_RUN.reset(token)


def in_flight() -> list[Runbook]:
    """Runbooks running now in this process (the hang-up watchdog asks them to stop)."""
    with _IN_FLIGHT_LOCK:
        return list(_IN_FLIGHT)


def stop_in_flight(grace_s: float, why: str = "terminal gone") -> list[str]:
    """Ask every runbook running in this process to stop (:meth:`Runbook.request_stop`) and wait
    up to ``grace_s`` seconds for them to finish their current step and undo. A run still going
    after that gets a ``cut-off`` journal row naming the step it was in and ``why`` the console
    ended (``"terminal gone"``, ``"quit"``), so ``seat-console recover`` knows exactly where it
    stopped. Returns one sentence per run cut off. Used by the app's hang-up watchdog before it
    ends the process, and by the app's exit."""
    import time

    runs = in_flight()
    for rb in runs:
        rb.request_stop()
    deadline = time.monotonic() + grace_s
    while in_flight() and time.monotonic() < deadline:
        time.sleep(0.05)
    left = []
    for rb in in_flight():
        step = rb.current_step or ""
        msg = (f"the console is ending ({why}) while step '{step}' was running; it may "
               "have changed the node — run `seat-console recover`")
        try:
            rb._row("cut-off", step, msg)
        except Exception:  # noqa: BLE001 - the process is ending; the row is best effort
            pass
        left.append(f"{rb.name} {rb.run_id}: cut off in step '{step}'")
    return left


def new_run_id(runbook: str) -> str:
    """``<runbook>-YYYYmmddTHHMMSSZ-<6 hex>`` (UTC)."""
    return f"{runbook}-{datetime.now(UTC):%Y%m%dT%H%M%SZ}-{uuid.uuid4().hex[:6]}"


class Runbook:
    """An ordered list of steps run with journaling, undo on failure and observers.

    ``name``: the runbook kind (``"hold"``, ``"release"``…); ``inputs``: JSON-able parameters
    (journaled with the start row; never secrets); ``journal``: where rows go (``None``: not
    journaled — only for tests of the engine); ``observer``: see :data:`Observer`;
    ``policy``: ``"undo"`` or ``"continue"`` (module docstring); ``facts``: initial facts;
    ``run_id``: default :func:`new_run_id`; ``profile_sha256``: recorded in every row;
    ``gates``: :data:`Gate` s checked before any step (module docstring).
    """

    def __init__(self, name: str, steps: Sequence[Step], *, journal: Journal | None,
                 inputs: Mapping[str, Any] | None = None, observer: Observer | None = None,
                 policy: Policy = "undo", facts: Mapping[str, Any] | None = None,
                 run_id: str | None = None, profile_sha256: str = "",
                 gates: Sequence[Gate] = ()) -> None:
        names = [s.name for s in steps]
        if len(set(names)) != len(names):
            raise ValueError(f"runbook {name}: step names must be unique: {names}")
        self.name = name
        self.steps = list(steps)
        self.journal = journal
        self.observer = observer
        self.policy: Policy = policy
        self.run_id = run_id or new_run_id(name)
        self.profile_sha256 = profile_sha256
        self.gates = list(gates)
        self.ctx = RunContext(run_id=self.run_id, runbook=name, inputs=dict(inputs or {}),
                              facts=dict(facts or {}), _emit=self._emit_warn)
        self._stop = threading.Event()
        self._warnings: list[str] = []
        self._planning = False
        self.current_step: str | None = None

    def __repr__(self) -> str:
        return f"Runbook({self.name!r}, run_id={self.run_id!r}, steps={len(self.steps)})"

    # -- observers and journal ------------------------------------------------------------------
    def _event(self, kind: str, step: str, message: str, ok: bool | None = None) -> None:
        if self.observer is not None:
            try:
                self.observer(Event(self.run_id, self.name, kind, step, message, ok))
            except Exception:  # noqa: BLE001 - a broken observer must not break the runbook
                pass

    def _row(self, kind: str, step: str = "", outcome: str = "", output: str = "") -> Entry | None:
        if self.journal is None:
            return None
        return self.journal.append(run_id=self.run_id, runbook=self.name, kind=kind, step=step,
                                   inputs=self.ctx.inputs, outcome=outcome, output=output or "",
                                   facts=self.ctx.facts, profile_sha256=self.profile_sha256)

    def _acting_on(self, names: Sequence[str]) -> None:
        """Set (or clear) ``facts["acts_on"]`` for the rows that follow."""
        from seat_console.node.attribution import ACTS_ON

        if names:
            self.ctx.facts[ACTS_ON] = sorted(set(names))
        else:
            self.ctx.facts.pop(ACTS_ON, None)

    def _emit_warn(self, kind: str, step: str, message: str) -> None:
        if self._planning:   # a dry run journals nothing; the plan line says it
            return
        self._warnings.append(message)
        self._row(kind, step, message)
        self._event(kind, step, message)

    def request_stop(self) -> None:
        """Ask the run to stop before its next step (thread-safe). The step in progress
        finishes (its apply and verify are not cut in half); then the run undoes (policy
        ``undo``) and journals where it stopped."""
        self._stop.set()

    # -- plan -------------------------------------------------------------------------------------
    def plan(self) -> Plan:
        """The dry-run plan: every step's precondition read from the node now; nothing changes.
        Each line is a :class:`PlanLine` (a precondition that raised gives ``error``; a
        :class:`Refusals` one line per problem); a step after a refusal is marked
        ``after_refusal`` (what it would do once the refusals are fixed)."""
        lines: list[PlanLine] = []
        self._planning = True
        self.ctx.planning = True

        def refused(step: str, exc: Exception) -> None:
            if isinstance(exc, Refusals):
                lines.extend(PlanLine(step, False, "", error=p) for p in exc.problems)
            elif isinstance(exc, StepError):
                lines.append(PlanLine(step, False, "", error=str(exc)))
            else:   # a bug in a gate or a check: the plan says it
                lines.append(PlanLine(step, False, "", error=f"{type(exc).__name__}: {exc}"))

        try:
            for g in self.gates:
                try:
                    text = g(self.ctx)
                    if text:
                        lines.append(PlanLine(GATE_STEP, False, f"⚠ {text}"))
                except Exception as exc:  # noqa: BLE001 - StepError, or a bug: said
                    refused(GATE_STEP, exc)
            for s in self.steps:
                after = any(x.error is not None for x in lines)
                try:
                    c = s.check(self.ctx)
                    lines.append(PlanLine(s.name, c.go, c.text, after_refusal=after))
                except Exception as exc:  # noqa: BLE001 - StepError, or a bug: said
                    refused(s.name, exc)
        finally:
            self._planning = False
            self.ctx.planning = False
        return Plan(self.name, tuple(lines), facts=dict(self.ctx.facts))

    # -- run --------------------------------------------------------------------------------------
    def run(self) -> Result:
        """Run every step (module docstring); returns the :class:`Result`, never raises for a
        step failure. Raises :class:`~seat_console.actions.journal.JournalError` when the start
        row cannot be written (then nothing was changed)."""
        with _IN_FLIGHT_LOCK:
            _IN_FLIGHT.add(self)
        try:
            with _running(self):
                return self._run()
        finally:
            with _IN_FLIGHT_LOCK:
                _IN_FLIGHT.discard(self)
            self.current_step = None

    def _run(self) -> Result:
        # who runs it, so another console tells "in progress" from "its console died"
        self.ctx.facts.setdefault(RUNNER, runner_identity())
        self._row("start", outcome="started")
        self._event("start", "", f"{len(self.steps)} steps")
        outcomes: dict[str, StepOutcome] = {s.name: StepOutcome(s.name, "not-run")
                                            for s in self.steps}
        begun: list[Step] = []
        error: str | None = None
        failed_any = False
        for g in self.gates:   # the seat's state, read right before the first step acts
            try:
                text = g(self.ctx)
            except (Exception, KeyboardInterrupt) as exc:  # noqa: BLE001 - a refusal, a bug
                msg = (str(exc) if isinstance(exc, StepError) else "interrupted (Ctrl-C)"
                       if isinstance(exc, KeyboardInterrupt) else f"{type(exc).__name__}: {exc}")
                self._row("fail", GATE_STEP, msg)
                self._event("fail", GATE_STEP, msg, ok=False)
                return self._end("refused", outcomes, f"{GATE_STEP}: {msg}", [], [])
            if text:
                self._emit_warn("warn", GATE_STEP, text)
        for s in self.steps:
            self.current_step = s.name
            try:
                if self._stop.is_set():
                    raise StopRequested("stop requested (terminal hung up?) before this step")
                try:
                    c = s.check(self.ctx)
                except StepError as exc:
                    raise StepError(f"precondition: {exc}", exc.output) from None
                if not c.go:
                    outcomes[s.name] = StepOutcome(s.name, "skipped", c.text)
                    self._row("skip", s.name, c.text)
                    self._event("skip", s.name, c.text)
                    continue
                self._acting_on(s.targets(self.ctx))   # journaled before the node is touched
                self._row("begin", s.name, c.text)
                self._event("begin", s.name, c.text)
                begun.append(s)
                out = s.apply(self.ctx) or ""
                self._row("apply", s.name, "applied", out)
                self._event("apply", s.name, "applied")
                v = s.verify(self.ctx) or "verified"
                self._row("verify", s.name, v)
                self._acting_on([])
                self._event("verify", s.name, v, ok=True)
                outcomes[s.name] = StepOutcome(s.name, "done", v)
            except (StepError, StopRequested, KeyboardInterrupt) as exc:
                msg = (str(exc) if not isinstance(exc, KeyboardInterrupt)
                       else "interrupted (Ctrl-C)")
                outcomes[s.name] = self._failed(s, begun, msg, getattr(exc, "output", ""))
                error = error or f"{s.name}: {msg}"
                failed_any = True
                if self.policy == "undo" or not isinstance(exc, StepError):
                    if not begun:
                        return self._end("refused", outcomes, error, [], [])
                    break
            except Exception as exc:  # noqa: BLE001 - a bug in a step is still a failed step
                msg = f"{type(exc).__name__}: {exc}"
                outcomes[s.name] = self._failed(s, begun, msg)
                error = error or f"{s.name}: {msg}"
                failed_any = True
                if self.policy == "undo":
                    if not begun:
                        return self._end("refused", outcomes, error, [], [])
                    break
        self.current_step = None
        if not failed_any:
            self._acting_on([])
            return self._end("done", outcomes, None, [], [])
        remaining: list[str] = []
        manual: list[str] = []
        if self.policy == "undo":
            for s in reversed(begun):
                ok, detail = self.undo_step(s)
                outcomes[s.name] = StepOutcome(s.name, "undone" if ok else "undo-failed", detail)
                if not ok:
                    remaining.append(f"{s.name}: {detail}")
                    manual.append(s.manual_text(self.ctx) or f"undo '{s.name}' by hand")
            self._acting_on([])
        else:
            self._acting_on([])
            for s in self.steps:
                if outcomes[s.name].status in ("failed", "not-run"):
                    remaining.append(f"{s.name}: not done ({outcomes[s.name].detail or 'not run'})")
                    manual.append(s.manual_text(self.ctx) or f"do '{s.name}' by hand")
        return self._end("partial" if remaining else "undone", outcomes, error, remaining, manual)

    def _failed(self, s: Step, begun: Sequence[Step], msg: str, output: str = "") -> StepOutcome:
        """Journal step ``s`` failing with ``msg`` (and the step's ``output``), naming the
        containers :meth:`_acting_on_after_fail` names (cleared after unless the run undoes),
        tell the observer, and return the step's ``failed`` outcome."""
        self._acting_on_after_fail(s, begun)
        self._row("fail", s.name, msg, output)
        if self.policy != "undo":
            self._acting_on([])
        self._event("fail", s.name, msg, ok=False)
        return StepOutcome(s.name, "failed", msg)

    def _acting_on_after_fail(self, s: Step, begun: Sequence[Step]) -> None:
        """The fail row names the failed step's containers and, when the run undoes, every
        begun step's (the undo phase that follows acts on them; its rows keep the list)."""
        names = set(s.targets(self.ctx))
        if self.policy == "undo":
            for b in begun:
                names.update(b.targets(self.ctx))
        self._acting_on(sorted(names))

    def undo_step(self, s: Step) -> tuple[bool, str]:
        """Undo one step (journaled ``undo`` / ``undo-fail``); returns ``(ok, detail)``. A step
        without ``undo`` counts as undone (it changed nothing that needs putting back)."""
        self.current_step = s.name
        try:
            if s.undo is None:
                detail = "nothing to undo"
            else:
                detail = s.undo(self.ctx) or "undone"
            self._row("undo", s.name, detail)
            self._event("undo", s.name, detail, ok=True)
            return True, detail
        except Exception as exc:  # noqa: BLE001 - report every undo failure, keep undoing
            detail = str(exc) if isinstance(exc, StepError) else f"{type(exc).__name__}: {exc}"
            self._row("undo-fail", s.name, detail, getattr(exc, "output", ""))
            self._event("undo-fail", s.name, detail, ok=False)
            return False, detail
        finally:
            self.current_step = None

    def _end(self, outcome: Literal["done", "undone", "partial", "refused"],
             outcomes: Mapping[str, StepOutcome], error: str | None, remaining: list[str],
             manual: list[str]) -> Result:
        self._acting_on([])   # the end row names no container: nothing is in flight any more
        res = Result(run_id=self.run_id, runbook=self.name, outcome=outcome,
                     steps=tuple(outcomes[s.name] for s in self.steps), error=error,
                     remaining=tuple(remaining), manual=tuple(manual),
                     warnings=tuple(self._warnings), facts=dict(self.ctx.facts))
        self._row("end", outcome=outcome, output=res.describe())
        self._event("end", "", outcome, ok=res.ok)
        return res

    # -- after a crash ----------------------------------------------------------------------------
    def finish_from_journal(self, rows: Sequence[Entry], action: Literal["undo", "complete"]
                            ) -> Result:
        """Finish an unfinished run of this runbook (same ``run_id``) found in the journal.

        ``rows``: the run's journal rows; the facts are taken from them
        (:func:`facts_from_rows`). ``"undo"``: every step with a ``begin`` row is undone in
        reverse order (undo is idempotent, so a step killed inside ``apply`` is safe to undo);
        ``"complete"``: steps already verified are kept, the rest run from the first one not
        verified, with the usual undo on failure. Rows are appended under the same ``run_id``
        and the run gets its ``end`` row.
        """
        with _running(self):
            return self._finish_from_journal(rows, action)

    def _finish_from_journal(self, rows: Sequence[Entry], action: Literal["undo", "complete"]
                             ) -> Result:
        self.ctx.facts.update(facts_from_rows(rows))
        begun_names = [r.step for r in rows if r.kind == "begin"]
        verified = {r.step for r in rows if r.kind == "verify"}
        undone = {r.step for r in rows if r.kind == "undo"}
        by_name = {s.name: s for s in self.steps}
        self._row("recover", outcome=action)
        self._event("start", "", f"recovering ({action})")
        outcomes = {s.name: StepOutcome(s.name, "done" if s.name in verified else
                                        ("skipped" if any(r.kind == "skip" and r.step == s.name
                                                          for r in rows) else "not-run"))
                    for s in self.steps}
        if action == "undo":
            remaining, manual = [], []
            for name in reversed(begun_names):
                s = by_name.get(name)
                if s is None or name in undone:
                    continue
                ok, detail = self.undo_step(s)
                outcomes[name] = StepOutcome(name, "undone" if ok else "undo-failed", detail)
                if not ok:
                    remaining.append(f"{name}: {detail}")
                    manual.append(s.manual_text(self.ctx))
            return self._end("partial" if remaining else "undone", outcomes,
                             "recovered after a crash: undone", remaining, manual)
        todo = [s for s in self.steps if s.name not in verified
                and not any(r.kind == "skip" and r.step == s.name for r in rows)]
        done_begun = [by_name[n] for n in begun_names if n in by_name and n in verified]
        sub = Runbook(self.name, todo, journal=None, inputs=self.ctx.inputs,
                      observer=self.observer, policy=self.policy, facts=self.ctx.facts,
                      run_id=self.run_id, profile_sha256=self.profile_sha256)
        sub.journal = self.journal
        sub._row = self._row_for(sub)  # type: ignore[method-assign]
        with _IN_FLIGHT_LOCK:
            _IN_FLIGHT.add(sub)
        try:
            res = sub._run_steps_only(done_begun)
        finally:
            with _IN_FLIGHT_LOCK:
                _IN_FLIGHT.discard(sub)
        self.ctx.facts = sub.ctx.facts
        merged = {**outcomes, **{o.step: o for o in res.steps}}
        if res.outcome == "refused":
            # nothing was changed: the run stays unfinished (no end row), so `recover --undo`
            # still has it to put back
            self._row("recover", outcome=f"complete refused, run left open: {res.error}")
            self._event("end", "", "refused", ok=False)
            return Result(run_id=self.run_id, runbook=self.name, outcome="refused",
                          steps=tuple(merged[s.name] for s in self.steps), error=res.error,
                          warnings=tuple(self._warnings), facts=dict(self.ctx.facts))
        return self._end(res.outcome, merged, res.error, list(res.remaining), list(res.manual))

    def _row_for(self, sub: Runbook) -> Callable[..., Entry | None]:
        def row(kind: str, step: str = "", outcome: str = "", output: str = "") -> Entry | None:
            if kind in ("start", "end"):  # the parent writes the run's start/end
                return None
            return Runbook._row(sub, kind, step, outcome, output)
        return row

    def _run_steps_only(self, already_begun: list[Step]) -> Result:
        """``_run`` for recovery: steps already begun before the crash are undone too if a later
        step fails."""
        res = self._run()
        if res.outcome in ("undone", "partial") and self.policy == "undo" and already_begun:
            remaining, manual = list(res.remaining), list(res.manual)
            outs = {o.step: o for o in res.steps}
            for s in reversed(already_begun):
                ok, detail = self.undo_step(s)
                outs[s.name] = StepOutcome(s.name, "undone" if ok else "undo-failed", detail)
                if not ok:
                    remaining.append(f"{s.name}: {detail}")
                    manual.append(s.manual_text(self.ctx))
            return Result(self.run_id, self.name, "partial" if remaining else "undone",
                          tuple(outs.values()), res.error, tuple(remaining), tuple(manual),
                          res.warnings, dict(self.ctx.facts))
        return res


def facts_from_rows(rows: Sequence[Entry]) -> dict[str, Any]:
    """The facts of a run as of its last journal row (each row records the whole fact dict)."""
    facts: dict[str, Any] = {}
    for r in rows:
        facts.update(r.facts)
    return facts


def printing_observer(write: Callable[[str], Any]) -> Observer:
    """An observer that writes :meth:`Event.line` for each event (the CLI passes
    ``lambda s: print(s, flush=True)``)."""
    def obs(e: Event) -> None:
        write(e.line())
    return obs


__all__ = ["GATE_STEP", "PARENT_RUN", "Check", "Event", "Gate", "Observer", "Plan", "PlanLine",
           "Refusals", "Result", "RunContext", "Runbook",
           "Step", "StepError", "StepOutcome", "StopRequested", "facts_from_rows", "in_flight",
           "new_run_id", "printing_observer", "stop_in_flight"]
