"""The TUI side of the hold: the hold (``H``) and release (``U``) keys' flow, kept out of
``console/app.py``.

The hold key first asks for the TTL and the reason
(:class:`~seat_console.widgets.hold_options.HoldOptionsScreen`). Each key then reads the plan in
a daemon thread (never on the UI thread: it runs ``systemctl`` on the
node and reads the journal), shows it in :class:`~seat_console.widgets.confirm.ConfirmScreen`,
and on yes runs the runbook in its own daemon thread with a fresh journal and the app's node
context (``app.node``: the timers and silences panels read through the same transport and
Alertmanager client).
Progress is shown in place in the action-log panel (one line per step, its latest state); the
outcome goes to one notification (an error once, not on every refresh); the timers, silences
and actions panels are re-read at the end. One hold action at a time. The runbook is
registered in :func:`seat_console.actions.runbook.in_flight`, so a hang-up lets it finish its
step (see the app's watchdog).
"""

from __future__ import annotations

import threading
from typing import Any

from seat_console.actions.runbook import Event, Plan, Result

DEFAULT_REASON = "placed from the console TUI"
"""The reason journaled when the options screen's reason is left empty."""

_MARK = {"begin": "…", "apply": "…", "verify": "✓", "skip": "–", "fail": "✗ FAILED",
         "undo": "↺ undone", "undo-fail": "✗ UNDO FAILED", "warn": "⚠"}


class HoldController:
    """The hold/release keys for one app (uses ``loaded``, ``push_screen``, ``notify``,
    ``call_from_thread``, ``states``)."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self.thread: threading.Thread | None = None
        self._planning = False
        self.lines: dict[str, str] = {}
        self.title = ""
        self.last_result: Result | None = None
        self.ttl_s: int | None = None
        """The hold's TTL (s) as last given in the options screen (``None``: the profile's)."""
        self.reason = ""
        """The hold's reason as last given (journaled, in the silence's comment)."""

    @property
    def hold_ttl_s(self) -> int:
        """The TTL (s) the hold is planned with: the one given, else the profile's."""
        return self.ttl_s or self.app.loaded.profile.silence.ttl_s

    @property
    def busy(self) -> bool:
        """Whether a plan is being read or a runbook runs."""
        return self._planning or (self.thread is not None and self.thread.is_alive())

    def key(self, kind: str) -> None:
        """``kind``: ``"hold"`` (first its TTL and reason,
        :class:`~seat_console.widgets.hold_options.HoldOptionsScreen`) or ``"release"``: read
        the plan, then confirm."""
        if self.busy:
            self.app.notify("a hold action is already running", severity="warning")
            return
        if kind == "hold":
            from seat_console.widgets.hold_options import HoldOptionsScreen

            p = self.app.loaded.profile
            self.app.push_screen(HoldOptionsScreen(p.node.name, p.silence.ttl_s),
                                 self._options_given)
            return
        self._read_plan(kind)

    def _options_given(self, got: tuple[int, str] | None) -> None:
        if got is None:
            self.app.notify("hold: cancelled; nothing read or changed")
            return
        if self.busy:   # another key started meanwhile
            self.app.notify("a hold action is already running", severity="warning")
            return
        self.ttl_s, self.reason = got[0], got[1] or DEFAULT_REASON
        self._read_plan("hold")

    def _read_plan(self, kind: str) -> None:
        self._planning = True
        self.app.notify(f"{kind}: reading the plan from the node…")
        threading.Thread(target=self._plan, args=(kind,), daemon=True,
                         name=f"seat-console:{kind}-plan").start()

    def _build(self, kind: str, journal: Any, nctx: Any, observer: Any) -> Any:
        from seat_console.actions import hold as hold_mod

        if kind == "hold":
            return hold_mod.build_hold(nctx, journal, ttl_s=self.hold_ttl_s,
                                       reason=self.reason or DEFAULT_REASON, observer=observer)
        h = hold_mod.current_hold(journal)
        if h is None:
            raise LookupError("no hold to release: nothing changed")
        if h.state == "unfinished":
            raise LookupError(f"hold {h.hold_id} never finished (its console died): run "
                              "`seat-console recover` in a shell")
        return hold_mod.build_release(nctx, journal, h, observer=observer)

    def _plan(self, kind: str) -> None:
        from seat_console.tui_runbook import read_plan

        self._call(self._confirm, kind,
                   read_plan(self.app, lambda journal, nctx: self._build(kind, journal, nctx,
                                                                         None)))

    def _call(self, fn: Any, *args: Any) -> None:
        try:
            self.app.call_from_thread(fn, *args)
        except RuntimeError:  # the app is gone
            pass

    def _confirm(self, kind: str, plan: Plan | Exception) -> None:
        from seat_console.widgets.confirm import ConfirmScreen

        from seat_console.tui_runbook import plan_problem

        self._planning = False
        problem = plan_problem(kind, plan)
        if problem is not None:
            self.app.notify(problem[0], severity="error", timeout=problem[1])
            return
        assert not isinstance(plan, Exception)
        seat = self.app.loaded.profile.node.name
        from seat_console.actions.hold import fmt_ttl

        title = (f"Place the hold on {seat} for {fmt_ttl(self.hold_ttl_s)} ({self.reason})?"
                 if kind == "hold" else f"Release the hold on {seat}?")
        self.app.push_screen(ConfirmScreen(title, plan.text_lines()),
                             lambda yes: self._start(kind, title) if yes
                             else self.app.notify(f"{kind}: cancelled; nothing changed"))

    def _start(self, kind: str, title: str) -> None:
        self.title = title.rstrip("?")
        self.lines = {}
        self._show()
        self.thread = threading.Thread(target=self._run, args=(kind,), daemon=True,
                                       name=f"seat-console:{kind}")
        self.thread.start()

    def _event(self, e: Event) -> None:
        """Runbook thread: record the step's latest state and show it."""
        if e.kind in ("start", "end", "check"):
            return
        key = e.step or e.kind
        if e.kind == "warn":
            key = f"warn:{len(self.lines)}"
        self.lines[key] = f"{_MARK.get(e.kind, e.kind)} {e.step}: {e.message}"
        self._call(self._show)

    def _show(self) -> None:
        st = getattr(self.app, "states", {}).get("actions")
        if st is not None:
            try:
                st.panel.set_progress(self.title, list(self.lines.values()))
            except Exception:  # noqa: BLE001 - the panel may not be mounted (compact, tests)
                pass

    def _run(self, kind: str) -> None:
        from seat_console.tui_runbook import with_journal

        res: Result | Exception
        try:
            res = with_journal(self.app, lambda journal, nctx: self._build(
                kind, journal, nctx, self._event).run(), secrets=True)
        except Exception as exc:  # noqa: BLE001 - shown once
            res = exc
        self._call(self._done, kind, res)

    def _done(self, kind: str, res: Result | Exception) -> None:
        if isinstance(res, Exception):
            self.app.notify(f"{kind}: {type(res).__name__}: {res}", severity="error", timeout=20)
        else:
            self.last_result = res
            self.lines["end"] = ("✓ done" if res.ok else
                                 f"✗ FAILED ({res.outcome}): {res.error}")
            for r in res.remaining:
                self.lines[f"left:{r}"] = f"✗ still changed: {r}"
            self._show()
            if res.ok:
                self.app.notify(f"{kind}: done", timeout=8)
            else:
                self.app.notify(res.describe(), severity="error", timeout=30)
        start = getattr(self.app, "_start_poll", None)
        for key in ("actions", "timers", "silences"):
            if start is not None and key in getattr(self.app, "states", {}):
                start(key, manual=True)


def attach(app: Any) -> HoldController:
    """The app's :class:`HoldController` (made once, kept on the app)."""
    ctl = getattr(app, "_hold_controller", None)
    if ctl is None:
        ctl = app._hold_controller = HoldController(app)
    return ctl


__all__ = ["DEFAULT_REASON", "HoldController", "attach"]
