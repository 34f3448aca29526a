"""The TUI's runbook keys' shared helper (console/tui/runbook.py): the plan read in a worker
thread with the app's journal and node context, and the one notification for a plan that
cannot go on (refused, or not readable)."""

from __future__ import annotations

from types import SimpleNamespace

from seat_console.tui.runbook import plan_problem, read_plan, with_journal


class _Ctx:
    def __init__(self) -> None:
        self.closed = 0

    def secrets(self):
        return ["s3cret"]

    def close(self):
        self.closed += 1


def _plan(ok: bool, error: str | None = None):
    return SimpleNamespace(ok=ok, lines=[SimpleNamespace(error=None), SimpleNamespace(error=error)])


def test_plan_problem_words() -> None:
    assert plan_problem("hold", _plan(True)) is None
    assert plan_problem("swap", _plan(False, "no active hold")) == (
        "swap refused, nothing changed: no active hold", 8.0)
    assert plan_problem("build", OSError("docker socket gone")) == (
        "build: docker socket gone", 8.0)
    assert plan_problem("release", LookupError("no hold to release: nothing changed")) == (
        "release: no hold to release: nothing changed", 8.0)


def test_read_plan_returns_the_error_and_uses_the_apps_context(tmp_path, monkeypatch) -> None:
    from seat_console.node.context import NodeContext
    from seat_console.core.profile import load_profile

    monkeypatch.setenv("SEAT_CONSOLE_STATE_DIR", str(tmp_path))
    shared = NodeContext.from_profile(load_profile(None, environ={}))
    app = SimpleNamespace(node=shared, loaded=None)
    seen = []

    def build(journal, nctx):
        seen.append(nctx)
        raise LookupError("nothing to do")

    got = read_plan(app, build)
    assert isinstance(got, LookupError) and seen == [shared]
    ok = read_plan(app, lambda j, n: SimpleNamespace(plan=lambda: "the plan"))
    assert ok == "the plan"
    shared.close()


def test_with_journal_closes_only_a_context_it_made(tmp_path, monkeypatch) -> None:
    import seat_console.node.context as nc

    monkeypatch.setenv("SEAT_CONSOLE_STATE_DIR", str(tmp_path))
    made = _Ctx()
    monkeypatch.setattr(nc, "app_context", lambda app: (made, True))
    got = with_journal(SimpleNamespace(), lambda journal, nctx: (journal.path, nctx),
                       secrets=True)
    assert got[1] is made and made.closed == 1
    shared = _Ctx()
    monkeypatch.setattr(nc, "app_context", lambda app: (shared, False))
    with_journal(SimpleNamespace(), lambda j, n: None)
    assert shared.closed == 0
