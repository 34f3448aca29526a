"""The compare's plan names the folder its run writes (the on-call trial: the TUI's
confirmation said ``cmp-…201210Z-7fa08e`` and the run wrote ``cmp-…201221Z-592915`` — the plan
and the run each minted a bracket ID); a ``compare --dry-run`` names no folder a later
``compare`` would not use."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from seat_console.actions import compare as cmp_mod
from seat_console.actions import swap as swap_mod
from seat_console.actions.journal import Journal
from seat_console.commands.compare_cmd import render_dry_run
from seat_console.core.profile import load_profile
from seat_console.evidence.bracket import pairs, plan_bracket
from seat_console.tui import runbook as rb

PROFILE = ('[node]\nname = "seat-node"\n'
           '[resident]\nname = "old-model"\ncontainer = "seat-resident"\nimage = "img:0"\n'
           '[candidate]\nname = "new-model"\nimage = "img:1"\n'
           '[[silence.matchers]]\nname = "instance"\nvalue = "n:8000"\n'
           '[swap]\ncontainer = "seat-probe"\nimage = "img:1"\ncommand = ["--model", "/m"]\n'
           'served_model_name = "seat-model"\ngpus = []\n')


@pytest.fixture
def nctx(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> SimpleNamespace:
    monkeypatch.setenv("SEAT_CONSOLE_DATA_DIR", str(tmp_path / "data"))
    # the resident's name as the seat-state file would give it (nothing here reads the node)
    monkeypatch.setattr(swap_mod, "resident_or_profile", lambda _n: "seat-resident")
    p = tmp_path / "profile.toml"
    p.write_text(PROFILE)
    loaded = load_profile(p)
    return SimpleNamespace(profile=loaded.profile, loaded=loaded)


def test_the_tui_compare_runs_into_the_folder_its_confirmation_named(
        tmp_path: Path, nctx: SimpleNamespace) -> None:
    """The controller builds the compare twice — for the plan it confirms, then for the run —
    and keeps the confirmed plan's facts (``plan_facts``): the run uses its bracket ID."""
    ctl = SimpleNamespace(app=SimpleNamespace(loaded=nctx.loaded), compare_rounds=1,
                          plan_facts=None)
    with Journal(tmp_path / "journal.sqlite3") as j:
        planned = rb._make_compare(ctl, j, nctx, None, lambda _l: None)
        plan_lines = "\n".join(line.text for line in planned.rb.plan().lines)
        ctl.plan_facts = dict(planned.rb.plan().facts)   # what plan_ready keeps
        run = rb._make_compare(ctl, j, nctx, None, lambda _l: None)
    assert run.cmp_dir == planned.cmp_dir, (run.cmp_dir, planned.cmp_dir)
    assert str(run.cmp_dir) in plan_lines
    assert run.rb.ctx.inputs["bracket_id"] == planned.cmp_dir.name
    ctl.plan_facts = None   # a new plan (the key again, or the other design): a new folder
    assert rb._make_compare(ctl, j, nctx, None, lambda _l: None).cmp_dir != planned.cmp_dir


def test_a_dry_run_names_no_folder_a_later_compare_would_not_use(
        tmp_path: Path, nctx: SimpleNamespace) -> None:
    """The CLI's ``--dry-run`` builds with :data:`~seat_console.actions.compare.UNNAMED_BRACKET`
    and says the folder is made when the compare starts; the plan lines name that pattern."""
    with Journal(tmp_path / "journal.sqlite3") as j:
        book, cmp_dir = cmp_mod.build_compare(nctx, j, options=cmp_mod.CompareOptions(),
                                              bracket_id=cmp_mod.UNNAMED_BRACKET)
        plan = book.plan()
    legs = plan_bracket("ABBA", 1)
    text = render_dry_run("compare ABBA x1", legs, pairs(legs), plan, None,
                          f"a new folder {cmp_dir} is made when the compare starts")
    assert "folder: a new folder " in text and "cmp-<time>-<id>" in text
    assert "cmp-2" not in text, text      # no minted ID (cmp-<UTC year>…) anywhere
