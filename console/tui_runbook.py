"""What the TUI's runbook keys share (hold/release in :mod:`seat_console.hold_tui`; build, swap
and restore in :mod:`seat_console.swap_tui`): opening the journal and the app's node context in
a worker thread, reading a runbook's plan there, and the one notification for a plan that
cannot go on.

Threads: :func:`with_journal` and :func:`read_plan` run on a daemon thread (they run
``systemctl`` / docker on the node and read the journal), never on the UI thread;
:func:`plan_problem` is pure.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")


def with_journal(app: Any, fn: Callable[[Any, Any], T], *, secrets: bool = False) -> T:
    """``fn(journal, node context)`` with a fresh :class:`~seat_console.actions.journal.Journal`
    and the app's node context (``app.node``; an app without one gets a new context, closed
    after). ``secrets``: register the context's credentials with the journal first (before a
    run writes anything). Raises what opening the journal or ``fn`` raises."""
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


def read_plan(app: Any, build: Callable[[Any, Any], Any]) -> Any:
    """The plan (:class:`~seat_console.actions.runbook.Plan`) of the runbook
    ``build(journal, node context)`` returns, or the exception that stopped it — returned, to be
    shown once, never raised into the UI."""
    try:
        return with_journal(app, lambda journal, nctx: build(journal, nctx).plan())
    except Exception as exc:  # noqa: BLE001 - shown once, never raised into the UI
        return exc


def plan_problem(kind: str, plan: Any) -> tuple[str, float] | None:
    """Why the ``kind`` action cannot go on to its confirmation — ``(message, notification
    timeout s)`` — or ``None`` when it can: the plan could not be read (an exception, named
    with its type unless it is a :class:`LookupError`, a refusal in words), or a step refuses (its error; nothing was changed)."""
    if isinstance(plan, Exception):   # a LookupError is a refusal in words ("no hold to …")
        name = "" if isinstance(plan, LookupError) else f"{type(plan).__name__}: "
        return f"{kind}: {name}{plan}", 15.0
    if not plan.ok:
        err = next((p.error for p in plan.lines if p.error), "a step refuses")
        return f"{kind} refused, nothing changed: {err}", 20.0
    return None


__all__ = ["plan_problem", "read_plan", "with_journal"]
