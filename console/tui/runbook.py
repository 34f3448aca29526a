"""The one runbook controller of the TUI: plan → confirm → run with progress → journal → notify,
for every key that changes the node (hold, release, build backport, swap, restore, compare,
probe, promote and its undo) and the runbook's read stages the runbook screen runs (fit,
image, decide: :mod:`seat_console.tui.stage_flows`).

Each key names a :class:`Flow` of :data:`FLOWS`. :meth:`RunbookController.key`

1. reads the plan in a daemon thread (never on the UI thread: it runs ``systemctl`` / docker on
   the node and reads the journal) and posts :class:`PlanReady` to the app;
2. shows the plan in :class:`~seat_console.widgets.confirm.ConfirmScreen` — with the seat's name
   to be typed where the flow asks (the swap stops the resident) — with the flow's own "yes"
   label;
3. on yes runs the runbook in its own daemon thread, with a fresh journal (every step journaled)
   and the app's node context, posting one :class:`RunbookEvent` per step event or log line:
   shown in place in the action-log panel (hold, release) or in
   :class:`~seat_console.widgets.runlog.RunLogScreen` (build, swap, restore; Esc closes it, the
   run goes on, the key reopens it);
4. posts :class:`RunFinished`; the app re-reads the sources the flow names and the controller
   notifies the outcome once.

An error reaches the engineer as a sentence with its fix (:func:`human_error`), never a
``Type: repr`` dump. One node action at a time. The probe's run and live screen are
:mod:`seat_console.tui.probe_tui`'s; its preflight, confirmation and outcome come through here.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import Any, Protocol, TypeVar

from rich.markup import escape
from textual.message import Message

from seat_console.core.fmt import clock_z
from seat_console.tui.messages import ConsoleApp, PlanReady, RunbookEvent, RunFinished

T = TypeVar("T")

DEFAULT_REASON = "placed from the console TUI"
"""The reason journaled when the hold's reason is left empty."""

MAX_LINES = 2000
"""Log lines kept for the log screen."""

ERROR_TIMEOUT_S = 8.0
"""Seconds an error notification stays (it also goes when a screen is opened or closed)."""

_MARK = {"begin": "…", "apply": "…", "verify": "✓", "skip": "–", "fail": "✗ FAILED",
         "undo": "↺ undone", "undo-fail": "✗ UNDO FAILED", "warn": "⚠"}


# -- the journal and the node context, in a worker thread ------------------------------------
class HasNode(Protocol):
    """What the journal helpers need of the app: its node context (``app.node``)."""

    node: Any


def with_journal(app: HasNode, fn: Callable[[Any, Any], T], *, secrets: bool = False) -> T:
    """``fn(journal, node context)`` with a fresh :class:`~seat_console.actions.journal.Journal`
    and the app's node context (``app.node``; an app without one gets a new context, closed
    after). ``secrets``: register the context's credentials with the journal first (before a
    run writes anything). Raises what opening the journal or ``fn`` raises. Worker thread."""
    from seat_console.actions.journal import Journal
    from seat_console.node.context import app_context

    nctx, own = app_context(app)
    try:
        with Journal() as journal:
            if secrets:
                journal.add_secrets(nctx.secrets())
            return fn(journal, nctx)
    finally:
        if own:
            nctx.close()


def read_plan(app: HasNode, build: Callable[[Any, Any], Any]) -> Any:
    """The plan of the runbook ``build(journal, node context)`` returns, or the exception that
    stopped it — returned, to be shown once, never raised into the UI. Worker thread."""
    try:
        return with_journal(app, lambda journal, nctx: build(journal, nctx).plan())
    except Exception as exc:  # noqa: BLE001 - shown once, never raised into the UI
        return exc


_DOCKER_DOWN = re.compile(r"(?:DockerException: )?Error while fetching server API version: "
                          r"\(.*?\)\)", re.S)
"""The docker SDK's words for an engine that does not answer (a repr of the urllib3 error)."""

_TYPE_PREFIX = re.compile(r"\b(?:[A-Z][A-Za-z]*\.)*[A-Z]\w*(?:Error|Exception|Refused): ")
"""``StepError: `` and the like: an exception's type name before its message."""


def plain_words(text: str, docker_host: str | None = None) -> str:
    """``text`` without exception type names or the docker SDK's repr of a dead engine (named
    instead by the URL tried: the profile's ``node.docker_host``, else ``$DOCKER_HOST``, else
    the default), and without the CLI-only ``--force --reason`` advice (the probe's refusal
    ends "Place a hold first (`seat-console hold`)."; :func:`press_keys`, which every error
    shown passes through, says that command as the key that runs it here, remapped or none)."""
    if "Error while fetching server API version" in text:
        from seat_console.sources.containers import resolve_docker_host

        url = resolve_docker_host(docker_host)
        text = _DOCKER_DOWN.sub(f"no docker engine answers at {url}", text)
    text = _TYPE_PREFIX.sub("", text)
    if "--force --reason" in text and ". Place a hold first" in text:   # the probe's refusal
        text = text.split(". Place a hold first")[0] + ". Place a hold first (`seat-console hold`)."
    return text


_CLI_KEY = {"hold": "node.hold", "release": "node.release", "restore": "node.restore",
            "restore --keep-hold": "node.restore+keep-hold",
            "promote": "node.promote", "promote --undo": "node.promote-undo",
            "compare": "node.compare", "swap": "node.swap", "probe": "node.probe"}
"""The node actions a refusal names as a command (``seat-console restore``) → their binding
ids (:data:`seat_console.tui.keys.KEYS`); ``restore --keep-hold`` → :data:`KEEP_HOLD_ID`, which
the controller answers with R only where its restore keeps the hold."""

KEEP_HOLD_ID = "node.restore+keep-hold"
"""The id :func:`press_keys` asks ``key_of`` for ``restore --keep-hold``: not a binding; the
controller's :meth:`RunbookController.keys` answers it with the restore's key where R keeps the
hold (:func:`_restore_keeps_hold`), else ``None`` (the command stays)."""

_CLI_COMMAND = re.compile(r"(?:\brun )?(\()?`seat-console (promote --undo|restore --keep-hold|"
                          r"hold|release|restore|promote|compare|swap|probe)`(?(1)\))")


def press_keys(text: str, key_of: Callable[[str], str | None]) -> str:
    """``text`` with each node action it names as a bare command (```seat-console restore```,
    ``run `seat-console release```) said as the key that runs it here: ``press R (restore)``.
    ``key_of`` maps a binding id to the key as the screen shows it (the profile's ``[keys]``
    remapping), ``None`` where none runs it (``--readonly``): then the command stays. A
    command in brackets after the words that name it ("place a hold first (`seat-console
    hold`)") is said as ``(press H)``. ``restore --keep-hold`` is looked up as
    :data:`KEEP_HOLD_ID` (R where the TUI's restore keeps the hold). Another command with
    arguments stays as it is (the TUI's flows take none). Pure."""
    def sub(m: re.Match[str]) -> str:
        key = key_of(_CLI_KEY[m.group(2)])
        if key is None:
            return m.group(0)
        return f"(press {key})" if m.group(1) else f"press {key} ({m.group(2)})"
    return _CLI_COMMAND.sub(sub, text)


_DEFER_ADVICE = re.compile(r" ?\(to keep it stopped until a quiet moment: `seat-console "
                           r"(?:release|restore) --defer [^`]*`\)")
"""The release plan's CLI advice for a timer that fires at once
(:func:`seat_console.actions.hold.build_release`)."""


def defer_advice(text: str, alt: str | None) -> str:
    """``text`` with the plan's CLI advice for a timer that fires at once (`` (to keep it
    stopped until a quiet moment: `seat-console release --defer UNIT=WHEN`)``) put in the
    TUI's words: ``alt`` is the confirmation's defer button (``"Defer 3 to 21:17Z"``), named
    instead; ``None`` (the deferral already chosen, or the run under way) drops the advice.
    The TUI has no ``--defer``: the on-call trial read it as a command to type. Pure."""
    return _DEFER_ADVICE.sub(f" (“{alt}” keeps it stopped)" if alt else "", text)


def human_error(kind: str, exc: BaseException, docker_host: str | None = None) -> str:
    """``exc`` as a sentence for the engineer: what failed and the fix, without the exception's
    type name or repr (:func:`plain_words`). ``docker_host``: the profile's
    ``node.docker_host``, to name the docker engine actually tried."""
    text = str(exc).strip() or type(exc).__name__
    name = type(exc).__name__
    if name in ("DockerException", "APIError") or "docker" in type(exc).__module__:
        from seat_console.node.docker import docker_error_sentence

        return f"{kind}: {docker_error_sentence(exc, docker_host)}."
    text = plain_words(text, docker_host)
    if isinstance(exc, TypeError | AttributeError | KeyError | AssertionError | NameError):
        return f"{kind} failed (a bug in the console; the log has the details): {text}"
    return f"{kind}: {text}"


def plan_problem(kind: str, plan: Any, docker_host: str | None = None) -> tuple[str, float] | None:
    """Why the ``kind`` action cannot go on to its confirmation — ``(message, notification
    timeout s)`` — or ``None`` when it can: the plan could not be read (an exception, in words:
    :func:`human_error`) or a step refuses (its error; nothing was changed). Pure."""
    if isinstance(plan, BaseException):
        return human_error(kind, plan, docker_host), ERROR_TIMEOUT_S
    if not plan.ok:
        err = next((p.error for p in plan.lines if p.error), "a step refuses")
        return (f"{kind} refused, nothing changed: {plain_words(err, docker_host)}",
                ERROR_TIMEOUT_S)
    return None


# -- the flows -------------------------------------------------------------------------------
@dataclass(frozen=True)
class Flow:
    """One node action's flow. ``kind``: its name in messages; ``question(ctl)``: the
    confirmation's title; ``yes``: the confirm button's label; ``typed``: the seat's name must
    be typed; ``view``: ``"panel"`` (progress in the action-log panel) or ``"log"`` (the log
    screen); ``refresh``: sources read again at the end; ``make(ctl, journal, nctx, observer,
    on_log)``: the runbook (``None`` for the probe, whose plan and run are its own)."""

    kind: str
    question: Callable[[RunbookController], str]
    yes: str
    typed: bool = False
    view: str = "log"
    refresh: tuple[str, ...] = ("actions", "timers", "silences", "containers", "seat")
    make: Callable[..., Any] | None = None


SEAT_SOURCES = ("actions", "timers", "silences", "containers", "seat", "engine", "gpus", "fit")
"""Sources a flow that changes who serves the seat (swap, restore) re-reads at its end, their
back-off reset (:meth:`~seat_console.tui.polling.PollingMixin.poll_now`)."""


def _make_hold(ctl: RunbookController, journal: Any, nctx: Any, observer: Any, _log: Any) -> Any:
    from seat_console.actions import hold as hold_mod

    # the run places the hold the confirmed plan named (its ID, so its lease unit), not a new one
    planned = ((getattr(ctl, "plan_facts", None) or {}).get("hold") or {}).get("hold_id")
    return hold_mod.build_hold(nctx, journal, ttl_s=ctl.hold_ttl_s,
                               reason=ctl.reason or DEFAULT_REASON, observer=observer,
                               hold_id=planned)


def _make_release(_ctl: RunbookController, journal: Any, nctx: Any, observer: Any,
                  _log: Any) -> Any:
    from seat_console.actions import hold as hold_mod

    h = hold_mod.current_hold(journal)
    if h is None:
        raise LookupError("no hold to release: nothing changed")
    if h.state == "unfinished":
        raise LookupError(f"hold {h.hold_id} never finished (its console died): run "
                          "`seat-console recover` in a shell")
    return hold_mod.build_release(nctx, journal, h, observer=observer,
                                  defer_firing=_ctl.defer_firing)


DEFER_FIRING_S = 3600
"""The TUI release's "defer those" choice: the timers that would fire at once when started
are kept stopped this long (s) and then started by a transient timer on the node, as
``seat-console release --defer-firing WHEN`` does (the CLI takes any time)."""


DEFERRING = ("release", "restore")
"""The flows whose confirmation offers "defer those" (both end the hold: the restore's plan
carries the release's ``forecast``)."""


def firing_at_once(plan: Any) -> list[str]:
    """The timers a release plan says would fire the moment they are started (the plan's
    ``forecast`` facts, :func:`seat_console.actions.hold.build_release`), sorted; ``[]`` for
    any other plan."""
    facts = getattr(plan, "facts", None)
    fc = facts.get("forecast") if isinstance(facts, dict) else None
    if not isinstance(fc, dict):
        return []
    return sorted(u for u, f in fc.items() if isinstance(f, dict) and f.get("fires_at_once"))


def _make_build(ctl: RunbookController, journal: Any, nctx: Any, observer: Any,
                on_log: Any) -> Any:
    from seat_console.actions.backport import BuildOptions, build_runbook

    return build_runbook(ctl.app.loaded, nctx.docker(timeout_s=60), journal,
                         options=BuildOptions(on_log=on_log), observer=observer)


def _make_swap(_ctl: RunbookController, journal: Any, nctx: Any, observer: Any,
               on_log: Any) -> Any:
    from seat_console.actions import swap as swap_mod

    return swap_mod.build_swap(nctx, journal, observer=observer,
                               options=swap_mod.SwapOptions(on_log=on_log))


def _restore_keeps_hold(ctl: RunbookController) -> bool:
    """Whether R runs ``restore --keep-hold``: the runbook on screen (read from the node and
    the journal) has the candidate in the seat before the compare
    (:func:`seat_console.actions.stages.restore_keeps_hold`); its plan and question say so."""
    from seat_console.actions.stages import restore_keeps_hold

    return restore_keeps_hold(getattr(getattr(ctl, "app", None), "runbook_state", None))


def _make_restore(_ctl: RunbookController, journal: Any, nctx: Any, observer: Any,
                  on_log: Any) -> Any:
    from seat_console.actions import swap as swap_mod

    keep = _ctl.restore_keep_hold   # chosen at the key: the plan read and the run built alike
    return swap_mod.build_restore(nctx, journal, on_log=on_log, observer=observer,
                                  defer_firing=None if keep else _ctl.defer_firing,
                                  keep_hold=keep)


class ComparePlan:
    """The compare's plan for the confirmation: the bracket's legs named first (as
    ``seat-console compare --dry-run`` prints them), then the runbook's plan lines — whatever
    they say (its cost forecast included). ``ok``, ``lines``, ``facts``: the plan's;
    ``rounds``: the bracket's rounds (the confirmation offers the other design); ``legs``:
    how many legs (the run's progress line counts them)."""

    def __init__(self, plan: Any, head: list[str], rounds: int = 1,
                 legs: int | None = None) -> None:
        self.plan = plan
        self.head = head
        self.rounds = rounds
        self.legs = legs
        self.ok = plan.ok
        self.lines = plan.lines
        self.facts = getattr(plan, "facts", None)

    def text_lines(self) -> list[str]:
        """The legs, then the plan's lines."""
        return [*self.head, *self.plan.text_lines()]


class CompareRun:
    """The compare as the controller runs a flow: :meth:`plan` reads the bracket's plan,
    :meth:`run` runs it with :func:`seat_console.actions.compare.run_compare` (``compare.json``
    written before and after) and logs the bracket's status — "NOT complete" when a leg is
    not (the report then refuses every cross-arm claim), never just "done"."""

    def __init__(self, rb: Any, cmp_dir: Any, opts: Any, nctx: Any, legs: Any,
                 on_log: Callable[[str], None], journal: Any = None) -> None:
        self.rb, self.cmp_dir, self.opts, self.nctx = rb, cmp_dir, opts, nctx
        self.legs = legs
        self.on_log = on_log
        self.journal = journal

    def plan(self) -> ComparePlan:
        """The runbook's plan (read from the node now): its legs named first, then its cost
        (:meth:`cost_line`), then the plan's lines."""
        from seat_console.evidence.bracket import pairs

        head = [f"{len(self.legs)} legs: " + ", ".join(
            f"{x.name} (round {x.round}, pair {x.pair})" for x in self.legs) + "; pairs "
            + ", ".join(f"{a.name}-{b.name}" for a, b in pairs(self.legs))]
        cost = self.cost_line()
        return ComparePlan(self.rb.plan(), head + ([cost] if cost else []),
                           max((x.round for x in self.legs), default=1), len(self.legs))

    def cost_line(self) -> str | None:
        """``cost: …``: :func:`seat_console.actions.compare.forecast`'s line (minutes from this
        node's measured swap, restore and probe times, whether the design can reach a claim),
        the hold read from the journal now — as ``seat-console compare`` prints it; a forecast
        that cannot be made is said (``cost: n/a (…)``); ``None`` without a journal."""
        from seat_console.actions import compare as cmp_mod
        from seat_console.actions.hold import active_hold

        forecast = getattr(cmp_mod, "forecast", None)
        if self.journal is None or forecast is None or self.opts is None:
            return None
        try:
            cost = forecast(self.journal, self.opts.order, self.opts.rounds,
                            hold_active=active_hold(self.journal) is not None)
            return f"cost: {cost['text']}"
        except Exception as exc:  # noqa: BLE001 - said in the plan, never raised into the UI
            return f"cost: n/a ({exc})"

    def run(self) -> Any:
        """Run the bracket; its :class:`~seat_console.actions.runbook.Result`."""
        from seat_console.actions.compare import run_compare
        from seat_console.evidence.runs import RunError, read_json

        res = run_compare(self.rb, self.cmp_dir, self.opts, self.nctx)
        path = self.cmp_dir / "compare.json"
        try:   # the run file read back as outside input (evidence.runs, in tests/parsers.toml)
            doc = read_json(path.read_bytes(), str(path))
            status, reason = doc.get("status"), doc.get("reason")
        except (OSError, RunError, AttributeError) as exc:
            status, reason = "unknown", f"compare.json unreadable ({exc})"
        self.on_log(f"comparison {self.cmp_dir}: bracket {status}")
        if res.ok and status != "complete":
            self.on_log(f"bracket NOT complete: {reason or 'no reason recorded'}; the legs are "
                        "kept and the report refuses every cross-arm claim")
        return res


def _make_compare(ctl: RunbookController, journal: Any, nctx: Any, observer: Any,
                  on_log: Any) -> CompareRun:
    from seat_console.actions import compare as cmp_mod
    from seat_console.evidence.bracket import plan_bracket

    loaded = ctl.app.loaded
    if loaded.profile.swap is None:
        raise LookupError(f"{loaded.source} has no [swap] section: there is no candidate to "
                          "compare (see docs/evidence.md)")
    # default the smallest design that can reach a claim (one round only reads INCONCLUSIVE);
    # the confirmation's other button plans one round (ctl.compare_rounds)
    opts = cmp_mod.CompareOptions(on_log=on_log)
    opts.rounds = getattr(ctl, "compare_rounds", None) or cmp_mod.claim_rounds(opts.order)
    # the run writes into the folder the confirmed plan named (its bracket ID), not a new one
    planned = (getattr(ctl, "plan_facts", None) or {}).get("bracket_id")
    rb, cmp_dir = cmp_mod.build_compare(nctx, journal, options=opts, observer=observer,
                                        bracket_id=planned if isinstance(planned, str) else None)
    return CompareRun(rb, cmp_dir, opts, nctx, plan_bracket(opts.order, opts.rounds), on_log,
                      journal)


def _make_promote(_ctl: RunbookController, journal: Any, nctx: Any, observer: Any,
                  _log: Any) -> Any:
    from seat_console.actions import promote as promote_mod

    return promote_mod.build_promote(nctx, journal, observer=observer)


def _make_promote_undo(_ctl: RunbookController, journal: Any, nctx: Any, observer: Any,
                       _log: Any) -> Any:
    from seat_console.actions import promote as promote_mod

    return promote_mod.build_promote_undo(nctx, journal, observer=observer)


def _stage_maker(name: str) -> Callable[..., Any]:
    """The ``make`` of a read stage's flow: :mod:`seat_console.tui.stage_flows`' ``name``."""
    def make(ctl: RunbookController, journal: Any, nctx: Any, observer: Any,
             on_log: Any) -> Any:
        from seat_console.tui import stage_flows

        return getattr(stage_flows, name)(ctl, journal, nctx, observer, on_log)
    return make


def _decision_question(ctl: RunbookController) -> str:
    d = (ctl.plan_facts or {}).get("decision")
    return f"Record the decision {d}? (promote and restore read it)" if d else \
        "Record the decision?"


def _hold_question(ctl: RunbookController) -> str:
    from seat_console.actions.hold import fmt_ttl

    return (f"Place the hold on {ctl.seat} for {fmt_ttl(ctl.hold_ttl_s)} "
            f"({ctl.reason or DEFAULT_REASON})?")


FLOWS: dict[str, Flow] = {f.kind: f for f in (
    Flow("hold", _hold_question, "Yes, place the hold", view="panel",
         refresh=("actions", "timers", "silences"), make=_make_hold),
    Flow("release", lambda c: f"Release the hold on {c.seat}?", "Yes, release the hold",
         view="panel", refresh=("actions", "timers", "silences"), make=_make_release),
    Flow("build", lambda c: "Build the backport image?", "Yes, build the image",
         make=_make_build),
    Flow("swap", lambda c: f"Swap the seat {c.seat}? (stops the resident)",
         "Yes, swap the seat", typed=True, refresh=SEAT_SOURCES, make=_make_swap),
    Flow("restore", lambda c: f"Restore the resident in the seat {c.seat}"
         + (" and keep the hold (the compare comes next)?" if c.restore_keep_hold else "?"),
         "Yes, restore the seat", refresh=SEAT_SOURCES, make=_make_restore),
    Flow("compare", lambda c: f"Compare the resident and the candidate on the seat {c.seat}? "
         "(stops the resident; restored at the end)", "Yes, compare", typed=True,
         refresh=SEAT_SOURCES, make=_make_compare),
    Flow("probe", lambda c: "Start the probe? (sends load to the seat)", "Yes, start the probe",
         view="probe", refresh=("actions", "engine")),
    Flow("fit", lambda c: "Record the candidate's fit verdict in the runbook?",
         "Yes, record the verdict", refresh=("actions",), make=_stage_maker("make_fit")),
    Flow("image", lambda c: "Check what the candidate needs inside the images?",
         "Yes, check the images", refresh=("actions",), make=_stage_maker("make_image")),
    Flow("decide", _decision_question, "Yes, record the decision", refresh=("actions",),
         make=_stage_maker("make_decide")),
    Flow("promote", lambda c: f"Promote the candidate to resident of the seat {c.seat}? (the "
         "old resident is kept stopped, for the undo)", "Yes, promote the candidate",
         typed=True, refresh=SEAT_SOURCES, make=_make_promote),
    Flow("promote-undo", lambda c: f"Undo the promote on the seat {c.seat}? (stops the "
         "promoted resident, starts the previous one)", "Yes, undo the promote", typed=True,
         refresh=SEAT_SOURCES, make=_make_promote_undo),
)}
"""Every node action the TUI offers, by the kind its key names."""


def confirm_labels(flow: Flow, question: str, plan: Any, *,
                   deferred: bool) -> tuple[str, dict[str, Any]]:
    """The confirmation's question and its buttons' words for ``flow``'s ``plan``: ``(question,
    ConfirmScreen keyword arguments)``. A build with nothing to build (the plan's ``no_op``)
    says so and offers Close, or recording the image it found; a release or restore whose
    plan forecasts timers firing at once (and not ``deferred`` already) offers both ways,
    each button saying what it does, and a note naming the timers. Pure."""
    facts = getattr(plan, "facts", None) or {}
    if flow.kind == "compare" and isinstance(plan, ComparePlan):
        return question, compare_labels(plan.rounds)
    if flow.kind == "build" and facts.get("no_op"):
        return ("Nothing to build: the backport image was already built from these inputs.",
                {"yes_label": "Record it (no build)", "no_label": "Close",
                 "note": "Close: nothing happens. Record it: the runbook's backport stage "
                         "is marked done with the image that is there (nothing is built)."})
    firing = firing_at_once(plan) if flow.kind in DEFERRING else []
    if not firing or deferred:
        return question, {"yes_label": flow.yes}
    at = clock_z(datetime.now(timezone.utc) + timedelta(seconds=DEFER_FIRING_S))
    timers = ", ".join(firing)
    one = len(firing) == 1
    alt = f"Defer {len(firing)} to {at}"
    others = len(facts.get("forecast") or {}) > len(firing)   # a stopped timer that does not fire
    return question, {
        "yes_label": "Start all now", "alt_label": alt,    # the three buttons fit 80 columns
        "note": (f"Both {'restore the resident and ' if flow.kind == 'restore' else ''}"
                 f"release the hold. Start all now: every stopped timer starts now — "
                 f"{timers} {'fires' if one else 'fire'} at once. {alt}: {timers} "
                 f"{'stays' if one else 'stay'} stopped until {at}, then "
                 f"{'starts' if one else 'start'}"
                 f"{'; the others start now.' if others else '.'}")}


def compare_labels(rounds: int) -> dict[str, Any]:
    """The compare confirmation's buttons for a bracket of ``rounds`` (ABBA): go with it, or
    plan the other design — one round (quick, cannot reach a claim) or the fewest rounds that
    can (:func:`seat_console.actions.compare.claim_rounds`); the plan's ``cost:`` line says
    the minutes of the one shown. Pure."""
    from seat_console.actions.compare import claim_rounds

    need = claim_rounds("ABBA")
    if rounds >= need:
        return {"yes_label": f"Run {rounds} rounds", "alt_label": "1 round instead",
                "note": f"Run {rounds} rounds: can reach a claim. 1 round instead: quicker, "
                        "but it can only read INCONCLUSIVE (its plan and cost are shown "
                        "first)."}
    return {"yes_label": f"Run {rounds} round{'s' if rounds > 1 else ''}",
            "alt_label": f"{need} rounds instead",
            "note": f"Run {rounds}: cannot reach a claim (INCONCLUSIVE at best). {need} rounds "
                    "instead: can (its plan and cost are shown first)."}


def tui_next_line(state: Any, key_of: Callable[[str | None], str | None],
                  profile: str | None = None) -> str:
    """``state``'s ``next:`` line as every action's output ends it
    (:func:`~seat_console.actions.stages.next_line`, its command naming ``profile``, the
    ``--profile`` given: :func:`~seat_console.core.profile_path.with_profile`), then how to run
    it here: the stage's key (``key_of`` of its binding id, as remapped; ``None`` under
    ``--readonly``), else the runbook screen's (``g``, then Enter). Pure."""
    from seat_console.actions.stages import next_line
    from seat_console.core.profile_path import with_profile

    line = with_profile(next_line(state), profile)
    nxt = getattr(state, "next", None)
    if nxt is None:
        return line
    key = key_of(nxt.key) if nxt.key else None
    guide = key_of("runbook")
    if key:
        return f"{line} · here: {key}"
    if guide:
        return f"{line} · here: {guide}, then Enter"
    return line


class RunbookController:
    """Drives every node action of one app (see the module docstring). ``app``: the
    :class:`~seat_console.tui.app.SeatConsoleApp`; it forwards :class:`PlanReady`,
    :class:`RunbookEvent` and :class:`RunFinished` to :meth:`plan_ready`, :meth:`event` and
    :meth:`finished`."""

    def __init__(self, app: ConsoleApp) -> None:
        self.app = app
        self.thread: threading.Thread | None = None
        self.planning: str | None = None
        self.running: str | None = None
        self.title = ""
        self.lines: dict[str, str] = {}
        self.last_result: Any = None
        self.log_screen: Any = None
        self.next_after: datetime | None = None
        """When the last log-screen run ended, until its log got the ``next:`` line from a
        runbook read begun after that (:meth:`state_read`); ``None``: nothing waits."""
        self.ttl_s: int | None = None
        """The hold's TTL (s) as last given in the options screen (``None``: the profile's)."""
        self.reason = ""
        """The hold's reason as last given (journaled, in the silence's comment)."""
        self.plan_facts: dict[str, Any] | None = None
        """The facts of the plan confirmed last (``None`` while one is read): the run builds
        its runbook from them where the plan fixed a name (the hold's ID and lease unit)."""
        self.defer_firing: datetime | None = None
        self.restore_keep_hold = False
        """Whether the restore R planned keeps the hold (:func:`_restore_keeps_hold`, read when
        the key is pressed): its plan, question and run all follow this one answer, though the
        runbook on screen is read again while the confirmation is open."""
        self.compare_rounds: int | None = None
        """The compare's rounds chosen on its confirmation; ``None``: the fewest that can
        reach a claim."""
        self.progress: Any = None
        """The running (or last) compare's progress
        (:class:`~seat_console.tui.compare_progress.CompareProgress`), fed from its runbook's
        events; ``None`` for other flows."""
        """The release being planned keeps the timers that would fire at once stopped until
        this UTC time (the confirmation's "defer those" choice); ``None``: start them now."""
        from seat_console.tui.probe_tui import ProbeController

        self.probe = ProbeController(app, self)

    @property
    def seat(self) -> str:
        """The seat's node name (``node.name``): typed to confirm a swap."""
        return self.app.loaded.profile.node.name

    @property
    def hold_ttl_s(self) -> int:
        """The TTL (s) the hold is planned with: the one given, else the profile's."""
        return self.ttl_s or self.app.loaded.profile.silence.ttl_s

    @property
    def busy(self) -> bool:
        """Whether a plan is being read or a runbook (or probe) runs."""
        return (self.planning is not None or (self.thread is not None and self.thread.is_alive())
                or self.probe.running)

    # -- 1. the key, the plan ----------------------------------------------------------------
    def key(self, kind: str) -> None:
        """The key of flow ``kind`` (:data:`FLOWS`): reopen a running flow's view, or read the
        plan (the hold asks its TTL and reason first)."""
        flow = FLOWS[kind]
        if self.busy:
            self._busy_key(kind)
            return
        if kind == "hold":
            from seat_console.actions.hold import fmt_ttl, parse_ttl
            from seat_console.widgets.hold_options import HoldOptionsScreen

            p = self.app.loaded.profile
            self.app.push_screen(HoldOptionsScreen(p.node.name, p.silence.ttl_s,
                                                   ttl_text=fmt_ttl, parse_ttl=parse_ttl),
                                 self._options_given)
            return
        if kind in DEFERRING:
            self.defer_firing = None
        if kind == "restore":
            self.restore_keep_hold = _restore_keeps_hold(self)
        if kind == "compare":
            self.compare_rounds = None   # the default design again (compare_labels)
        self._read_plan(flow)

    def _busy_key(self, kind: str) -> None:
        if self.probe.running and kind == "probe":
            self.probe.open_screen()
        elif self.running is not None and FLOWS[self.running].view == "log":
            self.app.notify(f"{self.title} is running; showing its log")
            self.open_log()
        else:
            what = self.planning or self.running or "probe"
            self.app.notify(f"{kind}: the {what} is still under way; one node action at a "
                            "time", severity="warning")

    def _options_given(self, got: tuple[int, str] | None) -> None:
        if got is None:
            self.app.notify("hold: cancelled; nothing read or changed")
            return
        if self.busy:   # another key started meanwhile
            self._busy_key("hold")
            return
        self.ttl_s, self.reason = got[0], got[1] or DEFAULT_REASON
        self._read_plan(FLOWS["hold"])

    def _read_plan(self, flow: Flow) -> None:
        self.planning = flow.kind
        self.plan_facts = None
        self.app.notify(f"{flow.kind}: reading the plan from the node…")
        threading.Thread(target=self._plan_thread, args=(flow,), daemon=True,
                         name=f"seat-console:{flow.kind}-plan").start()

    def _plan_thread(self, flow: Flow) -> None:
        if flow.make is None:
            plan = self.probe.preflight()
        else:
            make = flow.make
            plan = read_plan(self.app, lambda journal, nctx: make(self, journal, nctx, None,
                                                                  lambda line: None))
        self.app.post_message(PlanReady(flow.kind, plan))

    # -- 2. confirm --------------------------------------------------------------------------
    def plan_ready(self, message: PlanReady) -> None:
        """UI thread: the plan is in: say why it cannot go on, or ask to confirm it."""
        from seat_console.widgets.confirm import ConfirmScreen

        self.planning = None
        flow = FLOWS[message.kind]
        plan = message.plan
        if flow.make is None and not isinstance(plan, BaseException):
            lines = self.probe.plan_lines(plan)
        else:
            problem = plan_problem(flow.kind, plan, self.app.loaded.profile.node.docker_host)
            if problem is not None:
                self.error(problem[0])
                return
            lines = plan.text_lines()
        if isinstance(plan, BaseException):
            self.error(human_error(flow.kind, plan, self.app.loaded.profile.node.docker_host))
            return
        self.plan_facts = dict(getattr(plan, "facts", None) or {})
        question, labels = confirm_labels(flow, flow.question(self), plan,
                                          deferred=self.defer_firing is not None)
        if flow.kind in DEFERRING:
            lines = [defer_advice(x, labels.get("alt_label")) for x in lines]
        if flow.kind == "swap":
            from seat_console.actions.stages import swap_before_compare

            warn = swap_before_compare(getattr(self.app, "runbook_state", None))
            lines = [warn, *lines] if warn else lines
        screen = ConfirmScreen(question, lines, typed=self.seat if flow.typed else None,
                               **labels)
        self.app.push_screen(screen, lambda yes: self._answered(flow, question, plan, yes))

    def _answered(self, flow: Flow, question: str, plan: Any, yes: bool | str | None) -> None:
        if yes == "alt" and flow.kind in DEFERRING:
            # the variant is planned from the node again and confirmed again (its plan says
            # "defer <timer>: keep it stopped until …" for each)
            self.defer_firing = datetime.now(timezone.utc) + timedelta(seconds=DEFER_FIRING_S)
            self._read_plan(flow)
            return
        if yes == "alt" and flow.kind == "compare":
            from seat_console.actions.compare import claim_rounds

            need = claim_rounds("ABBA")
            self.compare_rounds = 1 if getattr(plan, "rounds", need) >= need else need
            self._read_plan(flow)     # planned (its cost) and confirmed again
            return
        if not yes:
            self.app.notify(f"{flow.kind}: cancelled; nothing changed")
            return
        if flow.make is None:
            self.probe.start(plan)
            return
        self.title = question.rstrip("?")
        self.lines = {}
        self.progress = None
        if flow.kind == "compare":
            from seat_console.tui.compare_progress import CompareProgress

            self.progress = CompareProgress(legs=getattr(plan, "legs", None))
        self.running = flow.kind
        self.thread = threading.Thread(target=self._run_thread, args=(flow,), daemon=True,
                                       name=f"seat-console:{flow.kind}")
        self.thread.start()
        self._show(flow)

    # -- 3. run ------------------------------------------------------------------------------
    def _run_thread(self, flow: Flow) -> None:
        """Worker thread: the runbook with a fresh journal; every event a message."""
        assert flow.make is not None
        make = flow.make

        def observer(e: Any) -> None:
            if flow.view == "panel":
                if e.kind in ("start", "end", "check"):
                    return
                key = e.step or e.kind
                if e.kind == "warn":
                    key = f"warn:{id(e)}"
                line = " ".join(p for p in (_MARK.get(e.kind, e.kind),
                                            f"{e.step}:" if e.step else "", e.message) if p)
            else:
                line, key = e.line(), None
            # the choice between starting now and deferring was made at the confirmation
            self._post(RunbookEvent(flow.kind, defer_advice(line, None)
                                    if flow.kind in DEFERRING else line, key, event=e))

        def on_log(line: str) -> None:
            self._post(RunbookEvent(flow.kind, f"  | {line}"))

        res: Any
        try:
            def run(journal: Any, nctx: Any) -> Any:
                # who confirmed it: the TUI's confirmation (the seat's name, where typed)
                journal.confirmed("tui", self.seat if flow.typed else None)
                return make(self, journal, nctx, observer, on_log).run()
            res = with_journal(self.app, run, secrets=True)
        except Exception as exc:  # noqa: BLE001 - shown once, never raised into the UI
            res = exc
        self._post(RunFinished(flow.kind, res, flow.refresh))

    def _post(self, message: Message) -> None:
        self.app.post_message(message)   # thread-safe; dropped once the app is gone

    def event(self, message: RunbookEvent) -> None:
        """UI thread: one line of the running flow, shown in place."""
        if message.event is not None and self.progress is not None:
            from seat_console.tui.compare_progress import advance

            self.progress = advance(self.progress, message.event)
        key = message.key or f"line:{len(self.lines)}"
        self.lines[key] = message.line
        if len(self.lines) > MAX_LINES:
            del self.lines[next(iter(self.lines))]
        flow = FLOWS[message.kind]
        if flow.view == "log" and self.log_screen is not None:
            self.log_screen.add(message.line)
        elif flow.view == "panel":
            self._show(flow)

    def _show(self, flow: Flow) -> None:
        if flow.view == "panel":
            self.app.show_progress(self.title, list(self.lines.values()))
        elif flow.view == "log":
            self.open_log()

    def open_log(self) -> None:
        """Open the log screen of the running (or last) flow."""
        from seat_console.widgets.runlog import RunLogScreen

        screen = RunLogScreen(self.title, list(self.lines.values()), ended=self.running is None,
                              progress=self.progress_text if self.progress is not None
                              else None)
        self.log_screen = screen

        def closed(_: object) -> None:
            self.log_screen = None

        self.app.push_screen(screen, closed)

    def progress_text(self) -> str:
        """The running compare's progress line (:mod:`seat_console.tui.compare_progress`), its
        elapsed times to now (UTC); ``""`` when no compare ran."""
        from seat_console.tui.compare_progress import progress_line

        if self.progress is None:
            return ""
        return progress_line(self.progress, datetime.now(timezone.utc))

    # -- 4. notify ---------------------------------------------------------------------------
    def finished(self, message: RunFinished) -> None:
        """UI thread: the flow ended: its outcome in place and once as a notification; a log
        screen's title becomes the outcome, and its last line will say what comes next
        (:meth:`state_read`, from a read of the runbook begun now)."""
        self.running = None
        flow = FLOWS[message.kind]
        res = message.result
        if flow.kind == "probe" and getattr(self.probe, "screen", None) is not None:
            self.probe.screen.mark_ended()   # its footer no longer offers "x stop probe"
        if flow.view == "log":
            self.next_after = datetime.now(timezone.utc)
            read_now = getattr(self.app, "read_runbook_now", None)
            if read_now is not None:
                read_now()
        if isinstance(res, BaseException):
            # the log says the keys, as the notification does
            text = self.keyed(human_error(flow.kind, res,
                                          self.app.loaded.profile.node.docker_host))
            self.event(RunbookEvent(flow.kind, text, "end"))
            self._mark_log_ended(flow, text.splitlines()[0])
            self.error(text)
            return
        self.last_result = res
        if flow.view == "panel":
            self.lines["end"] = ("✓ done" if res.ok else f"✗ FAILED ({res.outcome}): {res.error}")
            for r in res.remaining:
                self.lines[f"left:{r}"] = f"✗ still changed: {r}"
            self._show(flow)
            text = f"{flow.kind}: done" if res.ok else res.describe()
        else:
            for line in res.describe().splitlines():
                self.event(RunbookEvent(flow.kind, line))
            text = res.describe().splitlines()[0]
            self._mark_log_ended(flow, text)
        if res.ok:
            self.app.notify(escape(text), timeout=8)
        else:
            self.error(text)

    def _mark_log_ended(self, flow: Flow, outcome: str) -> None:
        if flow.view != "log":
            return
        self.title = outcome   # a reopened log is titled with it too
        if self.log_screen is not None:
            self.log_screen.mark_ended(outcome)   # the outcome, not "the run goes on"

    def state_read(self, state: Any) -> None:
        """UI thread, on every runbook read: the first state read after the last log-screen
        run ended (its ``read_at`` not before the end) adds the ``next:`` line
        (:func:`~seat_console.actions.stages.next_line`, and the key that runs it here) to
        that log; on its screen if open, else to the lines it reopens with."""
        if self.next_after is None or state is None or self.running is not None:
            return
        read_at = getattr(state, "read_at", None)
        if read_at is None or read_at < self.next_after:
            return
        self.next_after = None
        line = tui_next_line(state, getattr(self.app, "key_of", lambda _id: None),
                             getattr(getattr(self.app, "loaded", None), "given_path", None))
        self.lines["next"] = line
        if self.log_screen is not None:
            self.log_screen.add(line)

    def keys(self) -> Callable[[str], str | None] | None:
        """The app's ``key_of`` for :func:`press_keys` (``None`` without one), answering
        :data:`KEEP_HOLD_ID` with the restore's key only where R keeps the hold now."""
        key_of = getattr(self.app, "key_of", None)
        if not callable(key_of):
            return None

        def keys(binding_id: str) -> str | None:
            if binding_id == KEEP_HOLD_ID:
                return key_of("node.restore") if _restore_keeps_hold(self) else None
            return key_of(binding_id)
        return keys

    def keyed(self, text: str) -> str:
        """``text`` with the node actions it names as commands said as their keys here
        (:func:`press_keys` with :meth:`keys`); as it is without the app's ``key_of``."""
        keys = self.keys()
        return text if keys is None else press_keys(text, keys)

    def error(self, text: str) -> None:
        """One error notification (markup escaped: ``[swap]`` stays ``[swap]``), the node
        actions it names as commands said as their keys (:meth:`keyed`)."""
        self.app.notify(escape(self.keyed(text)), severity="error", timeout=ERROR_TIMEOUT_S)


__all__ = ["DEFAULT_REASON", "FLOWS", "KEEP_HOLD_ID", "Flow", "confirm_labels", "RunbookController", "human_error", "plain_words", "plan_problem", "press_keys", "read_plan", "with_journal"]
