"""The A/A compare on the lab through the real CLI in a child process: the candidate is the
resident's own image, so every difference claimed would be a false claim.

The A/B/B/A compare of the resident against the backport image is the one the runbook screen
runs (tests/test_runbook_tui_lab.py checks its evidence through the CLI): one bracket, four vLLM
restarts fewer. This one restarts vLLM four times (~30-60 s each on this CPU): it holds
``.lab/disrupt.lock`` EXCLUSIVELY and, whatever happens, leaves the lab as it found it (probe
stopped, resident serving, the test's hold released, timers as before).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from lab_helpers import (
    exclusive_lab,
    node_transport,
    restore_seat,
    seat_cli,
    state_env,
    timers_active as _timers,
)


def test_lab_aa_compare_claims_no_difference(lab, tmp_path: Path) -> None:
    """A/A on the lab (issue 17): the candidate is the resident's own image (same image ID,
    same weights, same engine). One ABBA round: every throughput/latency difference is refused
    (the design cannot reach p <= 0.05), no canary or fidelity difference is claimed, and the
    canaries' distinct trials are counted per seed, never copies."""
    from seat_console.evidence import report as rp

    prof = tmp_path / "aa-profile.toml"
    text = lab.profile_path.read_text()
    assert '\nimage = "backport"\n' in text, "the lab profile's [swap] image changed"
    # the same image and the same engine command: the lab's probe engine flags (per-request
    # metrics, scripts/lab.py PROBE_ENGINE_FLAGS) left out, so B runs exactly what A runs
    prof.write_text(text.replace('\nimage = "backport"\n',
                                 f'\nimage = "{lab.engine_image_id}"\n', 1)
                    .replace(', "--enable-per-request-metrics"]', "]", 1))
    env = state_env(tmp_path, data=True)
    node = node_transport(lab)
    with exclusive_lab(lab, "the A/A compare test restarts the seat four times"):
        timers_before = _timers(node, lab.timers)
        try:
            r = seat_cli(prof, env, "compare", "--bracket", "ABBA", "--rounds", "1", "--yes",
                         "--json", "--ttl", "30m", timeout=900)
        finally:
            restore_seat(lab, env, node, timers_before, profile=prof)
    assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-6000:]
    out = json.loads(r.stdout)
    _nested_runs_name_their_compare(tmp_path)
    assert out["result"]["outcome"] == "done"  # exit 0 and "done" only for a complete bracket
    rep = out["report"]
    assert rep["comparison"]["status"] == "complete", rep["comparison"]
    # the CLI's compare took its own hold: the resident restored, that hold released
    assert rep["comparison"]["restored"] is True and rep["comparison"]["hold_released"]
    a_id, b_id = rep["arms"]["A"]["identity"], rep["arms"]["B"]["identity"]
    assert a_id["image_id"] == b_id["image_id"] == lab.engine_image_id
    diffs = [c for c in rep["claims"] if " difference (" in c["subject"]]
    assert diffs and not [c for c in diffs if c["survives"]], diffs
    # refused because one round cannot reach p <= 0.05 and/or, for an ITL/TPOT that is
    # undefined on this CPU (all output in one network read), because the value is unknown:
    # no other rule may refuse an A/A difference
    for c in diffs:
        rules = {x["rule"] for x in c["refused_by"]}
        assert rules and rules <= {rp.RULE_UNDERPOWERED, rp.RULE_UNKNOWN}, c
        if rp.RULE_UNDERPOWERED in rules:
            assert "needs ≥ 3 rounds" in json.dumps(c, ensure_ascii=False), c
    assert any(x["rule"] == rp.RULE_UNDERPOWERED for c in diffs for x in c["refused_by"])
    for c in rep["claims"]:
        if c["subject"].startswith("canaries ("):
            assert not c["survives"], c
        if c["subject"].startswith("fidelity"):
            assert "diverges" not in c["statement"] or not c["survives"], c
    arith = rep["canaries"]["arms"]["A"]["all"]
    assert arith["distinct"] == arith["completed"], arith  # each pair of legs: its own seeds
    assert rep["requests"]["all"]["legs"] == 4 and rep["requests"]["all"]["warmup"] > 0
    md = tmp_path / "aa.md"
    md.write_text(rp.render_markdown(rep))
    v = seat_cli(prof, env, "report", "--verify", str(md), timeout=120)
    assert v.returncode == 0, v.stdout + v.stderr
    assert "identical to the report" in v.stdout


def _nested_runs_name_their_compare(tmp_path: Path) -> None:
    """The compare's own hold, swap, restores and release name it (``parent_run``) from their
    first row on, so the runbook's stages never take them for the swap stage while the compare
    runs (the on-call trial); the one folder written is the one its plan named."""
    from seat_console.actions.journal import Journal
    from seat_console.actions.runbook import PARENT_RUN

    with Journal(tmp_path / "state" / "journal.sqlite3") as j:
        rows = j.entries()
    cmp_rows = [e for e in rows if e.runbook == "compare"]
    cid = cmp_rows[0].run_id
    inner: dict[str, Any] = {}   # each nested run's first row
    for e in rows:
        if e.runbook in ("hold", "swap", "restore", "release") \
                and cmp_rows[0].seq < e.seq < cmp_rows[-1].seq:
            inner.setdefault(e.run_id, e)
    assert {e.runbook for e in inner.values()} >= {"hold", "swap", "restore", "release"}, inner
    assert all(e.facts.get(PARENT_RUN) == cid for e in inner.values()), inner
    assert [p.name for p in (tmp_path / "data" / "comparisons").iterdir()] == \
        [cmp_rows[0].inputs["bracket_id"]]
