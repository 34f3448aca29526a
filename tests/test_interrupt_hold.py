"""A Ctrl-C from the console process's first instant is held, never lost
(:mod:`seat_console.core.interrupt`).

On the loaded CI machine a SIGINT sent as the console was spawned was raised by Python's own
handler inside importlib's module-lock weakref callback; CPython printed "Exception ignored in
… cb" and dropped it, and the console ran on, deaf to it
(``tests/test_ctrl_c_startup.py``: start 0, spawn + 0.00 s). The children here make each
instant happen on purpose instead of hoping a timed signal lands in it: a SIGINT while the
console's modules import (the handler must not raise, the CLI must exit 130 quietly), and the
very swallow CPython does (the callback cut by a KeyboardInterrupt before the console's code
ran), which the console must find and honour.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from seat_console.core import interrupt

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize(("argv", "entry"), [
    (["/usr/bin/python3", "/venv/bin/seat-console"], True),
    (["/usr/bin/python3", "/venv/bin/seat-console", "status", "--json"], True),
    (["python3", "-m", "seat_console"], True),
    (["python3", "-X", "importtime", "-m", "seat_console.cli", "probe"], True),
    (["python3", "-u", "-mseat_console"], True),
    (["python3", "-m", "pytest", "tests"], False),
    (["python3", "-c", "import seat_console"], False),
    (["python3", "/venv/bin/pytest", "seat-console"], False),
    (["python3"], False),
    ([], False),
])
def test_the_console_entry_is_told_from_any_other_importer(argv, entry):
    assert interrupt.is_console_entry(argv) is entry


def test_a_launcher_declares_itself_the_entry():
    assert interrupt.is_console_entry(["python3", "bench.py"], {interrupt.ENTRY_MARK: True})
    assert not interrupt.is_console_entry(["python3", "bench.py"], {interrupt.ENTRY_MARK: 1})
    assert not interrupt.is_console_entry(["python3", "bench.py"], {})


@given(st.lists(st.text(max_size=30), max_size=8))
def test_any_command_line_gives_a_yes_or_no(argv):
    assert interrupt.is_console_entry(argv) in (True, False)


def test_in_this_process_nothing_is_held():
    """pytest imported the package: not the console's entry, Python's handler untouched."""
    import signal

    assert not interrupt.holding()
    assert signal.getsignal(signal.SIGINT) is not interrupt._on_sigint


def _child(code: str, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "SEAT_CONSOLE_PROFILE"}
    env.update(XDG_CONFIG_HOME=str(tmp_path / "config"), XDG_STATE_HOME=str(tmp_path / "state"),
               XDG_DATA_HOME=str(tmp_path / "data"))
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120, env=env, cwd=ROOT, check=False)


SIGINT_WHILE_IMPORTING = r"""
__seat_console_entry__ = True          # as benchmarks/nvml_double_console.py declares it
import os, signal, sys, importlib.abc

class SigintOnImport(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name == "seat_console.core.profile_path":   # in the middle of cli's imports
            sys.meta_path.remove(self)
            os.kill(os.getpid(), signal.SIGINT)        # Python runs the handler at once
            print("handler returned", flush=True)
        return None

sys.meta_path.insert(0, SigintOnImport())
from seat_console.cli import main
print("imported", flush=True)
sys.exit(main(["profile", "--print-default"]))
"""


def test_a_sigint_while_the_console_imports_exits_130_quietly(tmp_path):
    cp = _child(SIGINT_WHILE_IMPORTING, tmp_path)
    assert cp.returncode == 130, cp
    assert "handler returned" in cp.stdout and "imported" in cp.stdout, cp
    assert "Traceback" not in cp.stderr and "[probe]" not in cp.stdout, cp
    assert "[[probe.phases]]" not in cp.stdout, cp   # the command never ran


CPYTHON_SWALLOWS_ONE = r"""
__seat_console_entry__ = True
import gc, sys, _frozen_importlib as bootstrap

class CutImp:   # the callback's first call raises, as Python's SIGINT handler did on CI
    def __init__(self, real):
        self.real, self.cut = real, False
    def acquire_lock(self):
        if not self.cut:
            self.cut = True
            raise KeyboardInterrupt
        return self.real.acquire_lock()
    def __getattr__(self, name):
        return getattr(self.real, name)

lock = bootstrap._get_module_lock("some.module")
real, bootstrap._imp = bootstrap._imp, CutImp(bootstrap._imp)
del lock                                  # the weakref callback runs, is cut, CPython swallows it
bootstrap._imp = real
print("swallowed, running on", flush=True)
from seat_console.cli import main
sys.exit(main(["profile", "--print-default"]))
"""


def test_a_sigint_cpython_swallowed_before_the_console_ran_is_honoured(tmp_path):
    cp = _child(CPYTHON_SWALLOWS_ONE, tmp_path)
    assert "Exception ignored in" in cp.stderr and "KeyboardInterrupt" in cp.stderr, cp
    assert "swallowed, running on" in cp.stdout, cp
    assert cp.returncode == 130, cp
    assert "[[probe.phases]]" not in cp.stdout, cp


def test_one_cpython_printed_and_dropped_is_honoured(tmp_path):
    """CPython's "Failed checking if argv[0] is an import path entry" prints the interrupt
    and keeps it as ``sys.last_value`` (``PyErr_Print``), then runs the script."""
    code = ("__seat_console_entry__ = True\nimport sys\nsys.last_value = KeyboardInterrupt()\n"
            "from seat_console.cli import main\nsys.exit(main(['profile', '--print-default']))\n")
    cp = _child(code, tmp_path)
    assert cp.returncode == 130 and "Traceback" not in cp.stderr, cp


def test_without_a_sigint_the_command_runs_and_python_handles_ctrl_c_again(tmp_path):
    code = ("__seat_console_entry__ = True\nimport signal, sys\n"
            "from seat_console.core import interrupt\nfrom seat_console.cli import main\n"
            "assert interrupt.holding()\nrc = main(['profile', '--print-default'])\n"
            "assert not interrupt.holding()\n"
            "assert signal.getsignal(signal.SIGINT) is signal.default_int_handler\n"
            "sys.exit(rc)\n")
    cp = _child(code, tmp_path)
    assert cp.returncode == 0 and "[[probe.phases]]" in cp.stdout, cp


def test_a_second_sigint_while_one_is_held_ends_the_process(tmp_path):
    code = ("__seat_console_entry__ = True\nimport os, signal, time\nimport seat_console\n"
            "os.kill(os.getpid(), signal.SIGINT)\nprint('held', flush=True)\n"
            "os.kill(os.getpid(), signal.SIGINT)\nprint('still running', flush=True)\n")
    cp = _child(code, tmp_path)
    assert cp.returncode == 130 and "held" in cp.stdout and "still running" not in cp.stdout, cp


def _in_background(code: str, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    """``python -c code`` started as a script starts a job in the background (``cmd &`` in a
    shell without job control): SIGINT ignored from its first instant."""
    env = {k: v for k, v in os.environ.items() if k != "SEAT_CONSOLE_PROFILE"}
    env.update(XDG_CONFIG_HOME=str(tmp_path / "config"), XDG_STATE_HOME=str(tmp_path / "state"),
               CHILD_CODE=code)
    return subprocess.run(["bash", "-c", '"$0" -c "$CHILD_CODE" & wait $!', sys.executable],
                          capture_output=True, text=True, timeout=120, env=env, cwd=ROOT,
                          check=False)


def test_a_background_job_inherits_sigint_ignored_which_is_what_the_test_reproduces(tmp_path):
    cp = _in_background("import signal; print(signal.getsignal(signal.SIGINT) == signal.SIG_IGN)",
                        tmp_path)
    assert cp.stdout.strip() == "True", cp


PROBE_LIKE_IN_BACKGROUND = r"""
__seat_console_entry__ = True
import asyncio, os, signal, sys
from seat_console.core import interrupt
from seat_console.cli import main     # imported: the package took SIGINT over
assert interrupt.holding(), signal.getsignal(signal.SIGINT)
interrupt.release()                   # as main() does before a headless command runs

async def run():                      # the probe's run: asyncio.run cancels it on SIGINT
    os.kill(os.getpid(), signal.SIGINT)
    await asyncio.sleep(60)
    print("ran to its end", flush=True)

try:
    asyncio.run(run())
except KeyboardInterrupt:
    print("interrupted", flush=True)
    sys.exit(130)
"""


def test_a_command_started_with_sigint_ignored_still_takes_a_sigint(tmp_path):
    """The probe that ran on to "complete" (exit 0) when the suite was started in the
    background: Python kept the inherited SIG_IGN and ``asyncio.run`` installed no handler."""
    cp = _in_background(PROBE_LIKE_IN_BACKGROUND, tmp_path)
    assert cp.returncode == 130 and "interrupted" in cp.stdout, cp
    assert "ran to its end" not in cp.stdout, cp


def test_the_suites_children_take_sigint_as_a_foreground_job(tmp_path):
    """tests/conftest.py gives this process SIGINT back if it was started ignoring it, so the
    consoles the tests start can be interrupted from their first instant."""
    cp = subprocess.run([sys.executable, "-c",
                         "import signal; print(signal.getsignal(signal.SIGINT))"],
                        capture_output=True, text=True, timeout=60, check=False)
    assert cp.stdout.strip() == "<built-in function default_int_handler>", cp
