"""CLI manners (issue 11): a closed pipe ends quietly with the command's code, ``--version``,
``--help`` without reStructuredText markup, and the TUI path parsing only global options (no
command module imported before the first frame)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from seat_console import cli

ROOT = Path(__file__).resolve().parents[1]


def _run(*args: str, close_stdout_early: bool = False) -> tuple[int, str, str]:
    p = subprocess.Popen([sys.executable, "-m", "seat_console", *args], cwd=ROOT,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if close_stdout_early:   # the reader is gone before the command writes (| head -0)
        p.stdout.close()
        err = p.stderr.read()
        p.wait(60)
        return p.returncode, "", err
    out, err = p.communicate(timeout=60)
    return p.returncode, out, err


def test_closed_pipe_exits_quietly_with_the_commands_code() -> None:
    rc, _out, err = _run("profile", "--print-default", close_stdout_early=True)
    assert "BrokenPipeError" not in err and "Traceback" not in err, err
    assert rc == 0   # the command's own code: the pipe broke at the final flush


def test_broken_pipe_mid_output_is_141_without_traceback(monkeypatch, capsys) -> None:
    def writes_then_breaks(_argv):
        raise BrokenPipeError(32, "Broken pipe")

    monkeypatch.setattr(cli, "_main", writes_then_breaks)
    monkeypatch.setattr(cli, "_quiet_stdout", lambda: None)
    assert cli.main([]) == cli.EXIT_PIPE == 141


def test_version() -> None:
    rc, out, _err = _run("--version")
    assert rc == 0 and out.startswith("seat-console ") and out.strip() != "seat-console"


@pytest.mark.parametrize("text, plain", [
    ("run ``seat-console fit --json``", "run seat-console fit --json"),
    ("see :class:`seat_console.fit.budget.Verdict`", "see Verdict"),
    ("the :func:`~seat_console.x.gib` rule", "the gib rule"),
    ("**OVER** by", "OVER by"),
])
def test_plain_help_strips_markup(text: str, plain: str) -> None:
    assert cli.plain_help(text) == plain


def test_help_of_every_command_has_no_raw_markup() -> None:
    parser = cli.build_parser()
    sub = next(a for a in parser._actions if a.__class__.__name__ == "_SubParsersAction")
    texts = [parser.format_help()] + [p.format_help() for p in sub.choices.values()]
    assert len(texts) > 5
    for t in texts:
        assert "``" not in t and ":class:`" not in t and ":func:`" not in t, t[:400]


def test_tui_path_parses_only_global_options() -> None:
    args = cli._tui_args(["--readonly", "--interval", "2"])
    assert args is not None and args.readonly and args.interval == 2.0 and args.func is None
    assert cli._tui_args(["gpus", "--json"]) is None      # a subcommand: the full parser
    assert cli._tui_args(["--help"]) is None
    code = ("import sys; from seat_console import cli; cli._tui_args([]); "
            "print(sorted(m for m in sys.modules if m.startswith('seat_console.commands.')))")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                         text=True, timeout=60).stdout
    assert out.strip() == "[]", out


def test_the_tui_without_a_terminal_is_refused_with_the_headless_command() -> None:
    rc, out, err = _run()            # no subcommand: the TUI, with stdout a pipe
    assert rc == cli.EXIT_USAGE == 2, err
    assert "needs a terminal" in err and "stdout" in err and "seat-console status" in err
    assert out == "" and "Traceback" not in err


def test_no_terminal_names_the_stream_that_is_not_one() -> None:
    class Tty:
        def isatty(self) -> bool:
            return True

    class Pipe:
        def isatty(self) -> bool:
            return False

    assert cli._no_terminal(Tty(), Tty()) is None
    assert "stdin is not one" in cli._no_terminal(Pipe(), Tty())
    assert "stdout is not one" in cli._no_terminal(Tty(), Pipe())
    assert "stdin is not one" in cli._no_terminal(object(), Tty())   # no isatty at all


def test_a_bad_profile_under_json_is_a_json_error_too(tmp_path, capsys) -> None:
    """``--json`` on every command: a profile that does not load printed plain text only."""
    import json

    bad = tmp_path / "typo.toml"
    bad.write_text("[seat]\ntensor_paralel_size = 2\n")
    rc = cli.main(["--profile", str(bad), "status", "--json"])
    out, err = capsys.readouterr()
    doc = json.loads(out)
    assert rc == 1 and doc["ok"] is False and doc["exit"] == 1
    assert str(bad) in doc["error"] and "tensor_paralel_size" in doc["error"]
    assert "tensor_paralel_size" in err   # and on stderr, as without --json
    rc = cli.main(["--profile", str(bad), "status"])
    out, err = capsys.readouterr()
    assert rc == 1 and out == "" and "tensor_paralel_size" in err


@pytest.mark.parametrize("argv, names, form", [
    (["status", "--profile", "/x.toml"], "--profile is an option", "--profile FILE COMMAND"),
    (["runbook", "--readonly", "--interval=2"], "--readonly, --interval are options",
     "--readonly --interval S COMMAND"),
])
def test_a_global_option_after_the_command_is_told_where_it_goes(argv, names, form,
                                                                 capsys) -> None:
    """`seat-console status --profile FILE` — a new engineer's first mistake — was told only
    "unrecognized arguments"; now also that the option is seat-console's own, and where."""
    with pytest.raises(SystemExit) as e:
        cli.main(argv)
    err = capsys.readouterr().err
    assert e.value.code == 2
    assert f"({names} of seat-console itself: give " in err and f"seat-console {form}" in err
    with pytest.raises(SystemExit):
        cli.main(["status", "--bogus"])
    assert "of seat-console itself" not in capsys.readouterr().err


@pytest.mark.parametrize("value", ["abc", "2s"])
def test_an_interval_that_is_not_a_number_says_the_range_too(value, capsys) -> None:
    """`--interval abc` got argparse's "invalid float value" under the quick parser's shorter
    usage line, while `--interval 0` got the range: one usage line and one sentence now."""
    for argv in ([f"--interval={value}"], [f"--interval={value}", "status"]):
        with pytest.raises(SystemExit) as e:
            cli.main(argv)
        err = capsys.readouterr().err
        assert e.value.code == 2 and "COMMAND ..." in err, err
        assert f"'{value}': give seconds between 0.1 and 3600" in err


def test_every_commands_help_ends_with_its_exit_codes() -> None:
    """A new engineer found exit codes in hold's --help but not in swap's, restore's, probe's,
    compare's… — the commands a script most needs them for."""
    p = cli.build_parser()
    sub = next(a for a in p._actions if isinstance(a, cli.argparse._SubParsersAction))
    missing = [name for name, sp in sub.choices.items()
               if not re.search(r"(?i)exit(?: codes?)?:? *\(?[^)]*\)?:? *0\b|exit 0",
                                sp.format_help())]
    assert missing == [], missing
    # and *ends* with them, as the README says (ten commands said them at the top, in their
    # description, before the options: the trial)
    not_last = [name for name, sp in sub.choices.items()
                if not sp.format_help().rstrip().split("\n\n")[-1].startswith("exit codes")]
    assert not_last == [], not_last


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=40) | st.sampled_from(["nan", "-inf", "1e400", "\ufeff1", "0x10", "1_0",
                                                "  2 ", "", "²"]))
def test_any_interval_text_is_a_number_or_the_one_sentence(text: str) -> None:
    """--interval's value (outside input): a float, or ArgumentTypeError naming the value and
    the range; never another exception. NaN and ±Inf pass here and are refused by the range
    check after parsing (one sentence for both)."""
    try:
        v = cli._seconds(text)
    except cli.argparse.ArgumentTypeError as exc:
        assert repr(text) in str(exc) and "between 0.1 and 3600" in str(exc)
        return
    assert isinstance(v, float)
    if not 0.1 <= v <= 3600:
        with pytest.raises(SystemExit) as e:
            cli.main(["--interval", text, "status"])
        assert e.value.code == 2


@pytest.mark.parametrize("argv", [["status", "--json", "--bogus"], ["report", "--json"],
                                  ["fleet", "--json", "--interval", "0.5"],
                                  ["fleet", "--json", "--prometheus", "notaurl"],
                                  ["report", "--json", "--verify", "/nonexistent/r.md"]])
def test_a_usage_error_under_json_is_a_json_document_too(argv, capsys, tmp_path,
                                                          monkeypatch) -> None:
    """The trial: these printed plain text only while ``hold --status --json`` printed JSON; a
    script parsing stdout got nothing. Under --json stdout holds one JSON document naming the
    error and the exit code; stderr still says it in words."""
    monkeypatch.setenv("SEAT_CONSOLE_STATE_DIR", str(tmp_path))
    try:
        rc = cli.main(argv)
    except SystemExit as e:   # argparse's usage error
        rc = e.code
    out, err = capsys.readouterr()
    doc = json.loads(out)
    assert doc["ok"] is False and doc["exit"] == rc != 0 and doc["error"], doc
    assert doc["error"].split(": ")[-1] in err, (doc, err)
