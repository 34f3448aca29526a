"""A hold's expiry on screen: to the second under an hour, a countdown in coarse steps."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from types import SimpleNamespace

from seat_console.actions.hold import countdown, expiry_text
from seat_console.actions.actionlog import ActionLogReading, HoldInfo
from seat_console.widgets.actionlog import ActionLogPanel
from seat_console.widgets.status import hold_fact

NOW = datetime(2026, 12, 1, 12, 37, 20, tzinfo=UTC)


def _info(ttl_s: float, left_s: float) -> HoldInfo:
    return HoldInfo(hold_id="seat-hold-x", state="active",
                    expires_at=NOW + timedelta(seconds=left_s), lease_unit="seat-hold-x-lease",
                    silence_id="s1", stopped=("a.timer",), placed_by="u@h", reason="",
                    banner="", ttl_s=ttl_s)


def test_countdown_changes_only_in_coarse_steps() -> None:
    assert countdown(NOW + timedelta(seconds=250), NOW) == "in 4 min"
    assert countdown(NOW + timedelta(seconds=47), NOW) == "in 40 s"
    assert countdown(NOW + timedelta(seconds=3), NOW) == "in under 10 s"
    assert countdown(NOW - timedelta(seconds=1), NOW) == "passed"
    assert countdown(NOW + timedelta(seconds=7500), NOW) == "in 2 h 05 min"
    assert countdown(None, NOW) == "n/a"
    # one text per 10 s window at most below a minute, per minute above: no per-second redraw
    texts = {countdown(NOW + timedelta(seconds=250), NOW + timedelta(seconds=k))
             for k in range(0, 60)}
    assert len(texts) <= 2
    texts = {countdown(NOW + timedelta(seconds=59), NOW + timedelta(seconds=k))
             for k in range(0, 50)}
    assert len(texts) == 5    # 50 s, 40 s, 30 s, 20 s, 10 s


def test_short_hold_shows_seconds_and_countdown_long_hold_minutes() -> None:
    short_end = NOW + timedelta(seconds=250)
    assert expiry_text(short_end, 600, NOW) == "until 12:41:30Z, in 4 min"
    assert expiry_text(NOW + timedelta(hours=3), 4 * 3600, NOW) == "until 15:37Z, in 3 h 00 min"


def test_panel_and_status_line_show_a_short_hold_to_the_second() -> None:
    panel = ActionLogPanel()
    reading = ActionLogReading(path="/j", read_at=NOW, hold=_info(600, 250))
    panel.now = NOW
    assert "HOLD ACTIVE until 12:41:30Z, in 4 min" in panel.render_compact(reading).plain
    body = "\n".join(t.plain for t in panel.build(reading, NOW).renderables)
    assert "until 12:41:30Z, in 4 min" in body
    # the compact line is the same text for the whole minute (redrawn rarely)
    later = panel.build(reading, NOW + timedelta(seconds=9)).renderables[0].plain
    assert later == panel.build(reading, NOW).renderables[0].plain
    assert hold_fact(_info(600, 250), True).words == "active until 12:41:30Z"
    assert hold_fact(_info(4 * 3600, 250), True).words == "active until 12:41Z"
    # a hold object without ttl_s (older readers) keeps the minute form
    assert hold_fact(SimpleNamespace(state="active", expires_at=NOW), True).words == \
        "active until 12:37Z"
