"""The one runner: resolved binaries, explicit environment, timeouts, failures that are failures.

Real processes on this machine (no mocks): missing binaries, a PATH that differs from the
console's own, a process group that ignores SIGTERM, a step that "completes" at once.
"""

from __future__ import annotations

import os
import stat
import time
from pathlib import Path

import psutil
import pytest
from pydantic import ValidationError

from seat_console.node.runner import DEFAULT_PATH, CommandError, Runner, classify


def test_missing_binary_is_127_with_a_clear_message() -> None:
    r = Runner().run(["seat-console-no-such-binary", "--version"])
    assert not r.ok
    assert r.rc == 127
    assert "not found" in (r.failure or "")
    assert "seat-console-no-such-binary" in (r.failure or "")
    with pytest.raises(CommandError, match="not found"):
        r.raise_for_failure()


def test_binary_resolved_to_absolute_path_before_running() -> None:
    r = Runner().run(["true"])
    assert r.ok, r.failure
    assert os.path.isabs(r.argv[0]) and r.argv[0].endswith("/true")


def test_uses_its_own_path_not_the_inherited_one(tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """A tool found only on the console's (e.g. a login shell's) PATH is not found by the
    runner, whose PATH is explicit — the failure a cron/systemd-started console would hit."""
    tool = tmp_path / "only-in-my-shell"
    tool.write_text("#!/bin/sh\necho ran\n")
    tool.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}:{os.environ['PATH']}")
    r = Runner().run(["only-in-my-shell"])
    assert r.rc == 127 and not r.ok
    assert DEFAULT_PATH in (r.failure or "")
    # and with the directory on the runner's explicit PATH it runs
    r2 = Runner(path=f"{tmp_path}:{DEFAULT_PATH}").run(["only-in-my-shell"])
    assert r2.ok and r2.stdout == "ran\n"


def test_child_environment_is_explicit(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SEAT_CONSOLE_LEAK_CHECK", "leaked")
    monkeypatch.setenv("DOCKER_HOST", "tcp://wrong:2375")
    r = Runner().run(["env"])
    assert r.ok
    env = dict(line.split("=", 1) for line in r.stdout.splitlines() if "=" in line)
    assert env["PATH"] == DEFAULT_PATH
    assert env["LC_ALL"] == "C.UTF-8"
    assert "SEAT_CONSOLE_LEAK_CHECK" not in env
    assert "DOCKER_HOST" not in env
    r2 = Runner().run(["env"], env={"EXTRA": "1"})
    assert "EXTRA=1" in r2.stdout.splitlines()


def test_exit_126_not_executable(tmp_path: Path) -> None:
    script = tmp_path / "noexec.sh"
    script.write_text("#!/bin/sh\nexit 0\n")
    script.chmod(0o644)
    # through a shell so the 126 comes from the real exec failure, not our resolver
    r = Runner().run(["sh", "-c", f'"{script}"'])
    assert r.rc == 126 and not r.ok
    assert "cannot be executed" in (r.failure or "")


def test_command_not_found_from_a_wrapper_with_rc_0_is_a_failure() -> None:
    r = Runner().run(["sh", "-c", "echo 'foo: command not found' >&2; exit 0"])
    assert r.rc == 0
    assert not r.ok
    assert "command not found" in (r.failure or "")


def test_nonzero_exit_is_a_failure_with_output_captured() -> None:
    r = Runner().run(["sh", "-c", "echo out; echo err >&2; exit 3"])
    assert (r.rc, r.ok, r.stdout, r.stderr) == (3, False, "out\n", "err\n")
    assert "exit status 3" in (r.failure or "")


def test_step_that_completes_too_fast_is_a_failure() -> None:
    r = Runner().run(["true"], min_expected_s=2.0)
    assert r.rc == 0
    assert not r.ok
    assert "probably did nothing" in (r.failure or "")
    assert r.duration_s < 2.0


def test_step_that_takes_its_time_passes_min_expected() -> None:
    r = Runner().run(["sleep", "0.3"], min_expected_s=0.2)
    assert r.ok, r.failure
    assert r.duration_s >= 0.2


def test_timeout_kills_the_whole_process_group(tmp_path: Path) -> None:
    """A shell that ignores SIGTERM and has a child: both are gone after the timeout."""
    pidfile = tmp_path / "child.pid"
    script = f"trap '' TERM; sleep 60 & echo $! > {pidfile}; wait"
    t0 = time.monotonic()
    r = Runner().run(["sh", "-c", script], timeout_s=0.5)
    assert r.timed_out and not r.ok and r.rc is None
    assert "timed out after 0.5 s" in (r.failure or "")
    assert time.monotonic() - t0 < 30  # bounded, not the sleep's 60 s
    child = int(pidfile.read_text())
    assert not psutil.pid_exists(child) or psutil.Process(child).status() == psutil.STATUS_ZOMBIE


def test_stdin_is_fed_and_closed() -> None:
    r = Runner().run(["cat"], stdin=b"hello\n")
    assert r.ok and r.stdout == "hello\n"


def test_stdin_is_devnull_by_default() -> None:
    r = Runner().run(["cat"], timeout_s=5)  # would hang on an inherited terminal
    assert r.ok and r.stdout == ""


def test_shell_strings_are_refused() -> None:
    with pytest.raises(TypeError, match="argument lists"):
        Runner().run("systemctl stop foo.timer")  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        Runner().run([])


def test_absolute_path_that_is_not_executable_is_not_resolved(tmp_path: Path) -> None:
    f = tmp_path / "data"
    f.write_text("x")
    f.chmod(stat.S_IRUSR)
    r = Runner().run([str(f)])
    assert r.rc == 127 and not r.ok


def test_preflight_reports_each_binary() -> None:
    found = Runner().preflight(["sh", "seat-console-no-such-binary"])
    assert found["sh"] is not None and os.path.isabs(found["sh"])
    assert found["seat-console-no-such-binary"] is None


def test_result_is_frozen_and_timestamped() -> None:
    r = Runner().run(["true"])
    assert r.started_at.tzinfo is not None
    with pytest.raises(ValidationError):
        r.rc = 5  # type: ignore[misc]


def test_repr_does_not_show_environment_values() -> None:
    r = Runner(env={"SEAT_CONSOLE_AM_TOKEN": "s3cr3t-token"})
    assert "s3cr3t-token" not in repr(r)


@pytest.mark.parametrize("rc,stderr,dur,minexp,expect", [
    (0, "", 1.0, None, None),
    (0, "", 0.01, 1.0, "probably did nothing"),
    (127, "", 0.0, None, "command not found"),
    (126, "", 0.0, None, "cannot be executed"),
    (-9, "", 0.0, None, "SIGKILL"),
    (2, "", 0.0, None, "exit status 2"),
    (0, "x: executable file not found in $PATH", 0.1, None, "command not found"),
])
def test_classify(rc: int, stderr: str, dur: float, minexp: float | None,
                  expect: str | None) -> None:
    got = classify(rc, stderr, dur, timed_out=False, timeout_s=5, min_expected_s=minexp,
                   shown="cmd")
    if expect is None:
        assert got is None
    else:
        assert got is not None and expect in got
