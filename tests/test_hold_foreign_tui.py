"""The TUI shows a hold placed by another console (another state dir: not in this console's
journal) — read from the node's lease timer units in the action-log source's poll worker, on
the lab's real systemd node: the status line says "hold by another console until …", the
Actions panel "HOLD BY ANOTHER CONSOLE", the timers and silences panels' banner "hold by
another console until 13:41:30Z (lease seat-hold-…)". (Before the fix: "hold none" / "no hold
in effect" / no banner.)"""

from __future__ import annotations

from datetime import UTC, datetime

from lab_helpers import exclusive_lab, node_transport, timers_active

from seat_console.actions import node_ops
from seat_console.actions.hold import new_hold_id
from seat_console.node.context import NodeContext
from seat_console.core.profile import load_profile
from seat_console.actions.actionlog import ActionLogReading, ActionLogSource, HoldInfo
from seat_console.widgets.actionlog import ActionLogPanel
from seat_console.widgets.status import hold_fact


def test_a_lease_armed_by_another_console_shows_as_a_hold(lab, tmp_path):
    loaded = load_profile(str(lab.profile_path))
    node = node_transport(lab)
    units = list(loaded.profile.timers.all_units)
    with exclusive_lab(lab, "foreign hold lease"):
        armed = [u for u, on in timers_active(node, units).items() if on]
        assert armed, "the lab's timers should be armed"
        lease = f"{new_hold_id()}-lease"
        # the other console's lease: it would start timers that are armed already (a no-op)
        node_ops.schedule_lease(node, lease, 120, armed[:1], description="test foreign hold")
        nctx = NodeContext(loaded)
        src = ActionLogSource(None, str(tmp_path / "journal.sqlite3"), context=nctx)
        try:
            r = src.read()
            assert isinstance(r, ActionLogReading), r
            h = r.hold
            assert isinstance(h, HoldInfo) and h.foreign, r
            assert h.lease_unit == f"{lease}.timer"
            assert h.state == "active" and h.placed_by == "another console"
            assert h.banner.startswith("hold by another console until ")
            assert h.banner.endswith(f"Z (lease {lease}.timer)")
            assert 60 <= (h.expires_at - datetime.now(UTC)).total_seconds() <= 125
            assert h.ttl_s is not None and 100 <= h.ttl_s <= 125   # under an hour: seconds
            assert h.banner.count(":") == 2                        # "13:41:30Z"
            fact = hold_fact(h, True)
            assert fact.words.startswith("by another console until "), fact
            panel = ActionLogPanel()
            body = panel.build(r, datetime.now(UTC))
            text = "\n".join(str(p) for p in body.renderables)
            assert "HOLD BY ANOTHER CONSOLE" in text and "no hold in effect" not in text
            assert "HOLD BY ANOTHER CONSOLE" in str(panel.render_compact(r))
        finally:
            src.close()
            node_ops.cancel_lease(node, lease)
            nctx.close()
        # the lease gone: the next look at the node (after FOREIGN_EVERY_S) shows no hold
        src = ActionLogSource(None, str(tmp_path / "journal.sqlite3"), context=NodeContext(loaded))
        try:
            after = src.read()
            assert isinstance(after, ActionLogReading) and after.hold is None, after
        finally:
            src.close()


def test_without_a_node_context_nothing_is_read_from_the_node(tmp_path):
    src = ActionLogSource(None, str(tmp_path / "journal.sqlite3"))
    try:
        r = src.read()
        assert isinstance(r, ActionLogReading) and r.hold is None
        assert hold_fact(r.hold, True).words == "none"
    finally:
        src.close()
