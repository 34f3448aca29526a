"""``seat-console runbook [next]`` and the ``next: …`` line every action ends with (issue 30),
in-process against a journal in a temporary state dir (the default profile; docker may or may
not be reachable here: who holds the seat is then a listed problem, exit 3)."""

from __future__ import annotations

import argparse
import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from seat_console import cli
from seat_console.actions.journal import Journal
from seat_console.commands import action_common as ac
from tests.runbook_history import History


@pytest.fixture
def state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> History:
    monkeypatch.setenv("SEAT_CONSOLE_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.setenv("SEAT_CONSOLE_DATA_DIR", str(tmp_path / "data"))
    (tmp_path / "state").mkdir()
    j = Journal(path=tmp_path / "state" / "journal.sqlite3")
    # the CLI reads with the real clock: the history starts an hour ago (its hold lasts 4 h)
    yield History(j, tmp_path / "data", t0=datetime.now(UTC) - timedelta(hours=1))
    j.close()


def _json(capsys: pytest.CaptureFixture[str]) -> dict:
    return json.loads(capsys.readouterr().out)


def test_runbook_json_shows_the_stages_and_next(state: History, capsys) -> None:
    state.fit()
    state.image()
    state.hold()
    rc = cli.main(["runbook", "--json"])
    d = _json(capsys)
    assert rc == (3 if d["problems"] else 0)
    assert [s["status"] for s in d["stages"][:3]] == ["done", "done", "done"]
    assert d["next"]["name"] == "backport"
    assert d["next"]["command"] == "seat-console build-backport"


def test_runbook_text_ends_with_next(state: History, capsys) -> None:
    cli.main(["runbook"])
    out = capsys.readouterr().out.splitlines()
    assert out[-1].startswith("next: fit")
    assert any(line.startswith("▶· fit") for line in out)


def test_next_dry_run_at_fit_journals_nothing(state: History, capsys) -> None:
    before = len(state.j.entries())
    rc = cli.main(["runbook", "next", "--dry-run", "--json"])
    d = _json(capsys)
    assert d["dry_run"] and d["stage"] == "fit"
    assert d["would_journal"]["verdict"] in ("fits", "over", "no verdict")
    # the exit code the run would give: 5 when it does not fit (the trial saw 0)
    assert rc == (0 if d["would_journal"]["verdict"] == "fits" else 5)
    assert len(state.j.entries()) == before
    rc = cli.main(["runbook", "next", "--dry-run"])
    out = capsys.readouterr().out
    v = d["would_journal"]["verdict"]
    assert f"\nfit — plan: journal the fit verdict ({v}): " in out, out
    assert rc == (0 if v == "fits" else 5) and len(state.j.entries()) == before


def test_next_at_fit_journals_the_verdict_as_a_fit_row(state: History, capsys) -> None:
    rc = cli.main(["runbook", "next", "--json"])
    d = _json(capsys)
    rows = state.j.entries(runbook="fit")
    assert len(rows) == 1 and rows[0].kind == "end"
    assert rows[0].facts["verdict"] == d["verdict"]
    assert rc == (0 if d["verdict"] == "fits" else 5)
    assert d["next"]["name"] == ("image" if d["verdict"] == "fits" else "fit")


def test_without_requires_the_image_stage_is_skipped_and_hold_is_next(state: History,
                                                                      capsys) -> None:
    # the default profile declares no [candidate.requires]: nothing to check in the image, so
    # the runbook never sends an operator to a stage that can only refuse (new-user test)
    state.fit()
    assert cli.main(["runbook", "--json"]) in (0, 3)     # 3: docker not read here
    d = _json(capsys)
    img = next(s for s in d["stages"] if s["name"] == "image")
    assert img["status"] == "skipped" and "[candidate.requires]" in img["reason"]
    assert d["next"]["name"] == "hold"


def test_next_at_a_stage_whose_command_is_missing_names_it(state: History, capsys,
                                                           monkeypatch) -> None:
    from seat_console.commands import runbook_cmd

    monkeypatch.setitem(runbook_cmd.DELEGATE, "hold",
                        ("seat_console.commands.no_such_cmd", ["hold"]))
    state.fit()
    rc = cli.main(["runbook", "next", "--yes", "--json"])
    d = _json(capsys)
    assert rc == 5 and "seat-console hold" in d["error"] and "not in this" in d["error"]


def test_next_at_an_unfinished_run_runs_recover(state: History, capsys) -> None:
    state.fit()
    state.image()
    state.hold(outcome=None)
    rc = cli.main(["runbook", "next", "--dry-run", "--json"])
    out = capsys.readouterr().out
    assert rc in (0, 4), out   # recover's own code: it lists the unfinished hold
    assert "hold" in out


def test_runbook_next_is_node_changing_and_readonly_refuses_it(state: History, capsys) -> None:
    assert cli.main(["--readonly", "runbook", "next", "--yes"]) == 2
    assert cli.main(["--readonly", "runbook", "--json"]) in (0, 3)


# -- the next line ------------------------------------------------------------------------------
def _fake_next(loaded, profile=None):
    return "next: hold — `seat-console hold`", {"name": "hold", "line": "next: hold"}


def test_ends_with_next_adds_a_line_or_a_json_key(monkeypatch, capsys) -> None:
    monkeypatch.setattr(ac, "runbook_next", _fake_next)

    def cmd(args, loaded):
        print(json.dumps({"ok": True}) if args.json else "done")
        return 4
    f = ac.ends_with_next(cmd)
    assert f(argparse.Namespace(json=False, yes=True, dry_run=False), None) == 4
    assert capsys.readouterr().out.splitlines()[-1] == "next: hold — `seat-console hold`"
    assert f(argparse.Namespace(json=True, yes=True, dry_run=False), None) == 4
    assert _json(capsys) == {"ok": True, "next": {"name": "hold", "line": "next: hold"}}


def test_the_next_line_carries_the_profile_the_command_ran_with(monkeypatch, capsys) -> None:
    """A new engineer ran every command with ``--profile`` and was told ``next: hold —
    `seat-console hold` ``: pasted, that reads another profile (another node). With
    ``--profile`` the suggested commands carry it, absolute and shell-quoted; without, as
    before."""
    monkeypatch.setattr(ac, "runbook_next", lambda loaded, profile=None: (
        "next: hold — `seat-console hold` (or `seat-console --profile x restore`)",
        {"name": "hold", "command": "seat-console hold", "line": "next: hold"}))
    monkeypatch.chdir("/tmp")
    f = ac.ends_with_next(lambda a, lo: print("{}" if a.json else "done") or 0)
    f(argparse.Namespace(json=False, yes=True, dry_run=False, profile="lab dir/p.toml"), None)
    assert capsys.readouterr().out.splitlines()[-1] == (
        "next: hold — `seat-console --profile '/tmp/lab dir/p.toml' hold` (or `seat-console "
        "--profile x restore`)")
    f(argparse.Namespace(json=True, yes=True, dry_run=False, profile="/p.toml"), None)
    assert _json(capsys)["next"]["command"] == "seat-console --profile /p.toml hold"
    f(argparse.Namespace(json=False, yes=True, dry_run=False, profile=None), None)
    assert capsys.readouterr().out.splitlines()[-1].startswith("next: hold — `seat-console hold`")
    # the runbook's own text: every stage's command too
    assert ac.with_profile("      needs a hold; `seat-console hold`", "/p.toml") == (
        "      needs a hold; `seat-console --profile /p.toml hold`")
    assert ac.with_profile("seat-console fit", "/p.toml") == "seat-console --profile /p.toml fit"
    assert ac.with_profile("the seat-console docs", "/p.toml") == "the seat-console docs"


def test_a_usage_error_gets_no_next_line(monkeypatch, capsys) -> None:
    """`hold --ttl 4 --dry-run` printed its usage error and then `next: fit — …` (a new
    engineer's trial): a command not understood gets its own fix only, in text and JSON."""
    monkeypatch.setattr(ac, "runbook_next", _fake_next)

    def cmd(args, loaded):
        print(json.dumps({"ok": False, "exit": 2}) if args.json else "", end="")
        return ac.EXIT_USAGE
    f = ac.ends_with_next(cmd)
    assert f(argparse.Namespace(json=False, yes=True, dry_run=True), None) == 2
    assert "next:" not in capsys.readouterr().out
    assert f(argparse.Namespace(json=True, yes=True, dry_run=True), None) == 2
    assert _json(capsys) == {"ok": False, "exit": 2}


def test_ends_with_next_says_it_once_when_nested(monkeypatch, capsys) -> None:
    monkeypatch.setattr(ac, "runbook_next", _fake_next)
    inner = ac.ends_with_next(lambda a, lo: print("inner") or 0)
    outer = ac.ends_with_next(lambda a, lo: inner(a, lo))
    outer(argparse.Namespace(json=False, yes=True, dry_run=False), None)
    assert capsys.readouterr().out.count("next:") == 1


@pytest.mark.parametrize("argv", [["hold"], ["release"], ["build-backport"], ["swap"],
                                  ["restore"], ["probe"], ["compare"], ["promote"],
                                  ["recover"], ["decide"], ["image-check"]])
def test_every_action_is_wrapped(argv) -> None:
    p = cli.build_parser()
    args = p.parse_args(argv)
    assert getattr(args.func, "__wrapped__", None) is not None, argv


def test_release_without_a_hold_ends_with_next_in_its_json(state: History, capsys) -> None:
    rc = cli.main(["release", "--json", "--yes"])
    d = _json(capsys)
    assert rc == 5 and d["ok"] is False and d["next"]["name"] == "fit"


def test_ends_with_next_keeps_the_output_of_a_command_that_raises(monkeypatch, capsys) -> None:
    monkeypatch.setattr(ac, "runbook_next", _fake_next)

    def cmd(args, loaded):
        print('{"partial": true}')
        raise KeyboardInterrupt
    with pytest.raises(KeyboardInterrupt):
        ac.ends_with_next(cmd)(argparse.Namespace(json=True, yes=True, dry_run=False), None)
    assert '{"partial": true}' in capsys.readouterr().out


def test_one_next_format_for_runbook_decide_and_the_actions(state: History, capsys) -> None:
    """One `next:` line and one `next` JSON key, from one helper (stages.next_json), whichever
    command prints it (issue 30 follow-up, item 2): the runbook's own, `decide` (which printed
    its own "next: seat-console …" and a string key) and an action's."""
    state.fit()
    state.image()
    state.hold()
    cli.main(["runbook", "--json"])
    want = _json(capsys)["next"]
    assert want["name"] == "backport" and want["line"].startswith("next: backport — `")
    assert cli.main(["decide", "--json"]) == 1           # no bracket: the error, then next
    assert _json(capsys)["next"] == want
    assert cli.main(["release", "--json", "--yes"]) in (4, 5)
    assert _json(capsys)["next"] == want
    cli.main(["runbook"])
    assert capsys.readouterr().out.splitlines()[-1] == want["line"]
    cli.main(["decide"])
    assert capsys.readouterr().out.splitlines()[-1] == want["line"]


def test_recover_help_documents_the_exit_codes_it_returns(state: History, capsys,
                                                          monkeypatch) -> None:
    """`recover --help` names its exit codes (issue 30 follow-up, item 6), and they are true:
    listing 0 (none) / 4 (found), --dry-run 0, no --yes off a terminal 2."""
    from seat_console.commands import recover_cmd

    with pytest.raises(SystemExit):
        cli.main(["recover", "--help"])
    helptext = capsys.readouterr().out
    for words in ("0 no unfinished run; 4 one or more found", "--dry-run: 0",
                  "1 a completion failed", "4 a run is left partly changed",
                  "5 refused, nothing changed", "6 declined at the prompt",
                  "2 usage: --undo with --complete, no --yes off a terminal"):
        assert words in " ".join(helptext.split()), words
    assert recover_cmd.EXIT_HELP.splitlines()[0] == "exit codes:"
    assert cli.main(["recover"]) == 0
    state.fit()
    state.hold(outcome=None)                      # a hold run a killed console left open
    capsys.readouterr()
    assert cli.main(["recover"]) == 4
    assert cli.main(["recover", "--undo", "--dry-run"]) == 0
    monkeypatch.setattr("sys.stdin.isatty", lambda: False)
    assert cli.main(["recover", "--undo"]) == 2


def test_next_after_a_swap_before_the_compare_runs_restore_keeping_the_hold(
        state: History, capsys, monkeypatch) -> None:
    """Swapped before the compare, ``runbook next`` runs what its line names: ``restore
    --keep-hold`` (a plain restore would end the hold and the cycle without a decision)."""
    from seat_console.actions.stages import read_runbook
    from seat_console.commands import runbook_cmd, swap_cmd

    state.to_backport()
    state.swap()
    state.probe()
    monkeypatch.setattr(runbook_cmd, "read_state", lambda nctx, journal: read_runbook(
        None, journal, runs_dir=state.data / "runs", seat="candidate"))
    ran: list[argparse.Namespace] = []
    monkeypatch.setattr(swap_cmd, "run_restore", lambda a, lo: ran.append(a) or 0)
    assert cli.main(["runbook", "next", "--dry-run"]) == 0, capsys.readouterr()
    assert len(ran) == 1 and ran[0].keep_hold is True and ran[0].dry_run is True
    assert "seat-console restore --keep-hold" in capsys.readouterr().out
