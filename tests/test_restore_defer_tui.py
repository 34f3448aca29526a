"""The TUI's restore offers the release's "defer those" (issue 30, item 4): the restore's plan
carries the release's forecast, so its confirmation offers "Defer N to HH:MMZ" for the
timers that fire the moment they are started; choosing it plans the restore again with
``defer_firing`` set, and the restore runbook is built with it."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from types import SimpleNamespace

from test_hold_tui import _plain_app, _wait

from seat_console.actions.runbook import Plan, PlanLine
from seat_console.widgets.confirm import ConfirmScreen


def _restore_plan(firing: dict[str, bool]) -> Plan:
    return Plan("restore", (PlanLine("release hold", True, "release hold h1: start …"),),
                facts={"forecast": {u: {"fires_at_once": f} for u, f in firing.items()}})


async def test_restore_confirmation_offers_to_defer_the_timers_that_fire_at_once(
        monkeypatch) -> None:
    from seat_console.tui import runbook as rb
    from seat_console.tui.messages import PlanReady

    app = _plain_app()
    async with app.run_test(size=(120, 40)) as pilot:
        ctl = app.runbooks
        replanned: list[str] = []
        monkeypatch.setattr(ctl, "_read_plan", lambda flow: replanned.append(flow.kind))
        ctl.plan_ready(PlanReady("restore", _restore_plan({"a.timer": True, "b.timer": False})))
        await _wait(pilot, lambda: isinstance(app.screen, ConfirmScreen)
                    and app.screen.query("#confirm-no-button"), "the confirmation")
        alt = app.screen.query_one("#confirm-alt-button")
        assert str(alt.label).startswith("Defer 1 to ") and str(alt.label).endswith("Z")
        t0 = datetime.now(UTC)
        await pilot.click("#confirm-alt-button")
        await _wait(pilot, lambda: replanned == ["restore"]
                    and not isinstance(app.screen, ConfirmScreen), "the restore planned again")
        assert ctl.defer_firing is not None
        assert t0 + timedelta(seconds=rb.DEFER_FIRING_S - 5) <= ctl.defer_firing


def test_the_tui_restore_is_built_with_the_chosen_deferral(monkeypatch) -> None:
    import seat_console.actions.swap as swap_mod
    from seat_console.tui import runbook as rb

    got: dict = {}
    monkeypatch.setattr(swap_mod, "build_restore",
                        lambda nctx, journal, **kw: got.update(kw) or "runbook")
    when = datetime(2026, 12, 5, 4, 41, tzinfo=UTC)
    ctl = SimpleNamespace(defer_firing=when, restore_keep_hold=False)
    assert rb._make_restore(ctl, None, None, None, None) == "runbook"
    assert got["defer_firing"] == when


def test_the_tui_shows_the_release_refusal_without_the_probes_hold_advice() -> None:
    """plain_words rewrote every text holding "--force --reason" into the probe's "Press H to
    place a hold first." — wrong under the release's refusal (the hold is there; the candidate
    holds the seat)."""
    from test_gates_unit import RELEASE_REFUSED

    from seat_console.tui import runbook as rb

    said = rb.plain_words(RELEASE_REFUSED)
    assert "Press H to place a hold first" not in said
    assert said.startswith("the candidate seat-probe holds the seat")
    assert "run `seat-console restore`" in said
