"""Probe container retention (issue 17: six kept probe containers after one evening): the
restore's journaled ``prune kept probes`` step removes kept (renamed, stopped) probe
containers beyond the newest :data:`~seat_console.actions.swap.KEEP_PROBE_CONTAINERS`, on the
lab's real docker engine — never the current probe container, a running one or the resident.

The test makes its own kept containers (from the lab's engine image, running ``true``) under
a name prefix of its own profile's probe (``breach-probe``), so the lab's containers are
never touched; it removes whatever it made."""

from __future__ import annotations

import time
from pathlib import Path

from lab_helpers import exclusive_lab

from seat_console.actions import swap as swap_mod
from seat_console.actions.journal import Journal
from seat_console.actions.runbook import Runbook
from seat_console.node.context import NodeContext
from seat_console.core.profile import load_profile

PROBE = "breach-probe"


def test_restore_prunes_kept_probes_beyond_the_newest_three(lab, tmp_path: Path) -> None:
    text = lab.profile_path.read_text()
    text = text.replace('container = "seat-probe"', f'container = "{PROBE}"')
    prof = tmp_path / "profile.toml"
    prof.write_text(text)
    loaded = load_profile(prof)
    assert loaded.profile.swap is not None and loaded.profile.swap.container == PROBE
    made: list[str] = []
    with exclusive_lab(lab, "the retention test creates containers"), \
            lab.docker_client(timeout=60) as client:
        try:
            def kept(i: int, *, run: bool = False) -> str:
                name = f"{PROBE}-2026120{i}T000000Z-{i:06d}"
                c = client.containers.create(lab.engine_image_id, ["sleep 600" if run
                                                                   else "true"], name=name,
                                             entrypoint=["/bin/sh", "-c"],
                                             labels={"org.seat-console.role": "probe"})
                made.append(c.id)
                c.start()
                if not run:
                    c.wait(timeout=30)
                time.sleep(1.1)            # distinct FinishedAt, oldest first
                return name
            names = [kept(i) for i in range(1, 6)]           # five kept, oldest first
            current = client.containers.create(lab.engine_image_id, ["true"], name=PROBE,
                                               entrypoint=["/bin/sh", "-c"],
                                               labels={"org.seat-console.role": "probe"})
            made.append(current.id)
            running = kept(7, run=True)                        # a running one: never removed
            nctx = NodeContext(loaded)
            j = Journal(tmp_path / "j.sqlite3")
            try:
                rb = Runbook("restore", [swap_mod._prune_step(nctx)], journal=j)
                plan = rb.plan()
                (line,) = plan.lines
                assert line.go and names[0] in line.text and names[1] in line.text
                res = rb.run()
                assert res.ok, res.describe()
                left = {c.name for c in client.containers.list(
                    all=True, filters={"label": "org.seat-console.role=probe"})
                    if c.name.startswith(PROBE)}
                assert left == {*names[2:], PROBE, running}, left
                rows = [r for r in j.entries() if r.step == "prune kept probes"]
                assert any(r.kind == "begin" for r in rows)
                begin = next(r for r in rows if r.kind == "begin")
                assert set(names[:2]) <= set(begin.facts.get("acts_on", []))
                assert j.verify().ok
                # nothing left to prune: the step is skipped
                again = Runbook("restore", [swap_mod._prune_step(nctx)], journal=j).run()
                assert again.ok and again.steps[0].status == "skipped"
            finally:
                j.close()
                nctx.close()
        finally:
            for cid in made:
                try:
                    client.containers.get(cid).remove(force=True)
                except Exception:  # noqa: BLE001 - already removed by the step under test
                    pass
