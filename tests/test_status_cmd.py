"""``seat-console status [--json]``: the whole node snapshot headless, and take_snapshot's
handling of broken and hung sources."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import os
import time
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from seat_console.snapshot.reading import SOURCE_NAMES, NodeSnapshot, take_snapshot
from seat_console.core.fmt import fmt_duration, fmt_when
from seat_console.core.profile import load_profile
from seat_console.core.base import Source, Unavailable


class _Fixed(Source):
    def __init__(self, name: str, reading) -> None:
        self.name = name
        self.reading = reading
        self.closed = False

    def read(self):
        return self.reading

    def close(self) -> None:
        self.closed = True


def test_take_snapshot_isolates_broken_and_hung_sources() -> None:
    release = threading.Event()
    made: dict[str, _Fixed] = {}

    class Hung(Source):
        name = "engine"

        def read(self):
            release.wait(30)
            return Unavailable(source="engine", reason="late")

    def broken(_loaded):
        raise RuntimeError("factory exploded")

    def fixed(name):
        def f(_loaded):
            made[name] = _Fixed(name, Unavailable(source=name, kind="unreachable", reason="x"))
            return made[name]
        return f

    factories = {"gpus": fixed("gpus"), "timers": broken, "silences": fixed("silences"),
                 "containers": fixed("containers"), "engine": lambda _l: Hung()}
    t0 = time.monotonic()
    snap = take_snapshot(load_profile(None, environ={}), timeout_s=1.0, factories=factories)
    elapsed = time.monotonic() - t0
    release.set()
    assert elapsed < 10  # bounded by the timeout, not the hung read
    down = snap.unavailable()
    assert set(down) == set(SOURCE_NAMES)
    assert down["timers"].kind == "error" and "factory exploded" in down["timers"].reason
    assert down["engine"].kind == "timeout"
    assert all(made[n].closed for n in ("gpus", "silences", "containers"))


def test_fmt_helpers() -> None:
    from datetime import UTC, datetime, timedelta

    now = datetime(2026, 11, 29, 13, 0, tzinfo=UTC)
    assert fmt_when(now + timedelta(seconds=391), now) == "2026-11-29T13:06:31Z (in 6 min 31 s)"
    assert fmt_when(now - timedelta(hours=2, minutes=5), now).endswith("(2 h 05 min ago)")
    assert fmt_when(None, now) == "n/a"
    assert fmt_duration(3 * 86400 + 4 * 3600) == "3 d 04 h"


def _status(lab, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "seat_console", "--profile", str(lab.profile_path),
                           "status", *args], capture_output=True, text=True, timeout=120)


def test_lab_status_json(lab) -> None:
    cp = _status(lab, "--json")
    # the lab has no GPU: NVML is unavailable, so the exit code says "a source is unavailable"
    assert cp.returncode == 3, cp.stderr
    snap = NodeSnapshot.model_validate_json(cp.stdout)
    assert set(snap.unavailable()) == {"gpus"}
    assert snap.transport == "docker-exec" and snap.profile_source == str(lab.profile_path)
    assert [t.unit for t in snap.timers.timers] == list(lab.timers)
    assert snap.containers.get(lab.resident_container).image_id == lab.engine_image_id
    assert snap.engine.healthy and snap.engine.models[0].id == lab.served_model_name
    assert snap.silences.url == lab.alertmanager_url
    raw = json.loads(cp.stdout)
    assert raw["gpus"]["unavailable"] is True and raw["gpus"]["kind"]


def test_lab_status_text(lab) -> None:
    cp = _status(lab)
    assert cp.returncode == 3, cp.stderr
    out = cp.stdout
    for section in ("GPUs (NVML)", "Timers (on docker-exec", "Silences (Alertmanager",
                    "Containers (docker", "Engine (vLLM"):
        assert section in out
    for unit in lab.timers:
        assert unit in out
    if lab.persistent_timers:
        assert "fire a missed run at once" in out
    assert f"repo digest (manifest)   {lab.engine_repo_digest}" in out
    assert f"image ID (config digest) {lab.engine_image_id}" in out
    assert "unavailable: gpus (" in out


def test_lab_status_with_alertmanager_down(lab, lab_stop) -> None:
    with lab_stop("alertmanager"):
        cp = _status(lab, "--json")
    assert cp.returncode == 3
    snap = NodeSnapshot.model_validate_json(cp.stdout)
    assert set(snap.unavailable()) == {"gpus", "silences"}
    assert snap.silences.kind == "unreachable"
    assert snap.engine.healthy  # the rest is still read


def test_exited_container_says_when_it_exited_not_started() -> None:
    """``status``: an exited container's line gives its end, never its old start time."""
    sys.path.insert(0, str(Path(__file__).parent))
    import screen_fixtures as F

    from seat_console.commands.status_cmd import render_containers

    now = F.NOW
    text = render_containers(F.containers(running=False), now)
    line = next(x for x in text.splitlines() if "seat-resident" in x)
    assert "ended 2026-11-29T11:57:00Z (3 min 00 s ago)" in line and "started" not in line
    assert "exit code 137" in text
    running = render_containers(F.containers(running=True), now)
    assert "started 2026-11-29T07:00:00Z (5 h" in running
    never = F.containers(running=False).model_copy(update={"containers": tuple(
        c.model_copy(update={"finished_at": None}) for c in F.containers(running=False).containers)})
    assert "exited, health n/a (no healthcheck), end n/a," in render_containers(never, now)


def test_unread_hold_leases_are_on_the_unavailable_line_and_exit_3(monkeypatch) -> None:
    """A trial's `status` said "cannot read node leases: …" in its hold section and then
    "unavailable: gpus, timers, …" without them — or, with every source read, "all sources
    read". The leases are named on that line now, and `status` exits 3 for them."""
    from seat_console.commands import status_cmd

    def fixed(name):
        return lambda _l: _Fixed(name, Unavailable(source=name, kind="unreachable", reason="x"))
    snap = take_snapshot(load_profile(None, environ={}), timeout_s=5.0,
                         factories={n: fixed(n) for n in SOURCE_NAMES})
    sec = {"errors": ["node leases: cannot list the hold leases on local: exit 1"]}
    assert status_cmd.hold_unread(sec) == ["node leases"] and status_cmd.hold_unread({}) == []
    text = status_cmd.render_text(snap, also=status_cmd.hold_unread(sec))
    assert text.rstrip().splitlines()[-1].endswith("engine (unreachable), node leases")
    monkeypatch.setattr(NodeSnapshot, "unavailable", lambda self: {})
    assert text != (t := status_cmd.render_text(snap, also=["node leases"]))
    assert t.rstrip().splitlines()[-1] == "unavailable: node leases"
    assert status_cmd.render_text(snap).rstrip().splitlines()[-1] == "all sources read"
    monkeypatch.setattr(status_cmd, "take_snapshot", lambda loaded, timeout_s: snap)
    monkeypatch.setattr(status_cmd, "read_hold_section", lambda *a: sec)
    from types import SimpleNamespace
    for js in (False, True):
        args = SimpleNamespace(timeout=5.0, json=js)
        assert status_cmd.run(args, load_profile(None, environ={})) == 3


@given(st.floats(allow_nan=True, allow_infinity=True))
def test_any_timeout_is_used_or_refused_naming_it(value: float) -> None:
    """``--timeout`` is outside input: ``nan`` was taken and every source then said "no
    reading within nan s". A finite value in (0, 3600] is used; any other is refused, the
    sentence naming what was given and the range."""
    import math

    from seat_console.commands.status_cmd import TIMEOUT_MAX_S, timeout_error

    why = timeout_error(value)
    if math.isfinite(value) and 0 < value <= TIMEOUT_MAX_S:
        assert why is None
    else:
        assert why is not None and why.startswith(f"--timeout {value:g}:") and "3600" in why


def test_a_nan_timeout_is_a_usage_error(tmp_path: Path) -> None:
    r = subprocess.run([sys.executable, "-m", "seat_console", "status", "--timeout", "nan"],
                       capture_output=True, text=True, timeout=120,
                       env={**os.environ, "SEAT_CONSOLE_STATE_DIR": str(tmp_path)})
    assert r.returncode == 2 and "--timeout nan" in r.stderr, (r.returncode, r.stderr)


def test_the_hold_section_goes_before_the_timers_whether_or_not_they_were_read() -> None:
    """The trial: on the default profile (timers unread: "Timers" alone) the hold section went
    first, above the GPUs, with a blank line doubled; on the lab after the GPUs."""
    from seat_console.commands.status_cmd import with_hold_section

    head = "Seat Console status: …\nprofile p\n\n"
    for timers in ("Timers (on local)\n  ACTIVE a.timer\n", "Timers\n  UNAVAILABLE (x)\n"):
        text = head + "GPUs (NVML)\n  g\n\n" + timers + "\nEngine\n  e\n\nall sources read\n"
        out = with_hold_section(text, "Hold and lease\n  none\n")
        order = [ln for ln in out.splitlines() if ln and not ln.startswith(" ")]
        assert order[2:5] == ["GPUs (NVML)", "Hold and lease", order[4]], order
        assert order[4].startswith("Timers") and "\n\n\n" not in out, out
