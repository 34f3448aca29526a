"""What the action commands share (console/commands/action_common.py): the --dry-run / --yes /
--json flags on every one of them, and opening the node context and the journal — a journal
that cannot be opened is exit 1 naming it, and the node context is closed either way."""

from __future__ import annotations

import argparse
import json

import pytest

from seat_console.commands import action_common as ac
from seat_console.core.profile import load_profile


@pytest.mark.parametrize("mod, cmd", [("recover_cmd", "recover"), ("release_cmd", "release"),
                                      ("hold_cmd", "hold"), ("swap_cmd", "restore")])
def test_every_action_command_takes_the_shared_flags(mod, cmd) -> None:
    import importlib

    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers()
    importlib.import_module(f"seat_console.commands.{mod}").register(sub)
    args = parser.parse_args([cmd, "--dry-run", "--yes", "--json"])
    assert (args.dry_run, args.yes, args.json) == (True, True, True)


class _Ctx:
    closed = 0

    def secrets(self):
        return []

    def close(self):
        _Ctx.closed += 1


@pytest.mark.parametrize("json_mode", [False, True])
def test_unopenable_journal_is_exit_1_naming_it_and_the_context_is_closed(
        tmp_path, monkeypatch, capsys, json_mode) -> None:
    not_a_dir = tmp_path / "state"
    not_a_dir.write_text("a file where the state directory should be")
    monkeypatch.setenv("SEAT_CONSOLE_STATE_DIR", str(not_a_dir))
    monkeypatch.setattr(ac, "context", lambda _loaded: _Ctx())
    _Ctx.closed = 0
    ran = []
    code = ac.with_node_and_journal(load_profile(None, environ={}), "seat-console release",
                                    json_mode, lambda n, j: ran.append(1) or 0)
    assert code == ac.EXIT_ERROR and ran == [] and _Ctx.closed == 1
    out = capsys.readouterr()
    text = out.out + out.err
    assert str(not_a_dir) in text
    if json_mode:
        assert json.loads(out.out)["error"]


def test_body_exit_code_is_returned_and_both_are_closed(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("SEAT_CONSOLE_STATE_DIR", str(tmp_path))
    monkeypatch.setattr(ac, "context", lambda _loaded: _Ctx())
    _Ctx.closed = 0
    seen = []

    def body(nctx, journal):
        seen.append(journal)
        raise RuntimeError("boom")

    with pytest.raises(RuntimeError):
        ac.with_node_and_journal(load_profile(None, environ={}), "p", False, body)
    assert _Ctx.closed == 1
    with pytest.raises(Exception):   # closed: the journal refuses further use
        seen[0].append(run_id="x", runbook="r", kind="notice", step=None, inputs={},
                       outcome="ok", output="", facts={})
    assert ac.with_node_and_journal(load_profile(None, environ={}), "p", False,
                                    lambda n, j: 5) == 5
