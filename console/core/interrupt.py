"""A Ctrl-C from the console process's first instant: held, never lost.

Why: with Python's own SIGINT handler (``signal.default_int_handler``) a Ctrl-C raises
:class:`KeyboardInterrupt` at whatever bytecode the main thread runs. During the console's
start that is mostly import machinery, and CPython swallows the exception in two places seen
on the loaded CI machine (a pty, ``SIGINT`` at spawn + 0.00 s, ``tests/test_ctrl_c_startup.py``):

* inside importlib's module-lock weakref callback (``_get_module_lock.<locals>.cb``): printed as
  "Exception ignored in …" and dropped — the console then ran on and drew its screen, deaf to
  the Ctrl-C (1 start in ~160 with the signal 20–75 ms after spawn, before this module);
  raised just after that callback took the global import lock, the lock stays held and the
  first import from another thread waits forever;
* in CPython's check of the script path (``Failed checking if argv[0] is an import path
  entry``): printed, dropped, and the script runs.

So the package's ``__init__`` calls :func:`hold_if_entry` as its first act. In a process whose
entry is the console (:func:`is_console_entry`: the ``seat-console`` script, ``python -m
seat_console``/``seat_console.cli``, or a launcher that declares itself) it replaces Python's
handler with :func:`_on_sigint`, which only counts the signal — it never raises, so nothing can
swallow it — and takes note of a Ctrl-C CPython already swallowed before any of the console's
code ran (:func:`swallowed_before`). The console then honours the held interrupt at points
where unwinding is safe:

* ``seat_console.cli.main`` first (:func:`check`: exit 130, quietly, no traceback);
* a headless command: :func:`release` just before the command runs puts Python's handler back
  (``asyncio.run`` installs its own only over that one) and raises the held interrupt;
* the TUI: ``seat_console.tui.first_frame.guard_start_up`` installs its own handler and takes
  the held interrupt over (:func:`take`), raised at its next safe point.

A second Ctrl-C while one is held (the start-up stuck somewhere: nothing drawn yet, nothing
changed on the node) ends the process at once with 130.

This holds also where the process inherited SIGINT ignored (:data:`INHERITED`: a job started
in the background by a script), as the TUI, ``exporter`` and ``serve`` always did.

In any other process that imports the package (the tests, a notebook) nothing is installed:
Python's handler and ``asyncio``'s behaviour stay as they are. Main thread only (signal
handlers can be set nowhere else); a handler someone else installed before is left alone.
Below the fronts: no Textual, no Rich, only the standard library.
"""

from __future__ import annotations

import os
import sys

# the C half of ``signal``, loaded when the interpreter starts: ``import signal`` would import
# ``enum`` under Python's own handler, the very window this module closes
import _signal as signal

TYPE_CHECKING = False   # typing's constant without importing typing (the same window)
if TYPE_CHECKING:
    from collections.abc import Sequence
    from typing import Any

EXIT_INTERRUPTED = 130
"""128 + SIGINT: the exit code of a process ended by a held interrupt (as the CLI's)."""

CONSOLE_SCRIPT = "seat-console"
"""The console script's file name (``[project.scripts]`` in ``pyproject.toml``)."""

CONSOLE_MODULES = frozenset({"seat_console", "seat_console.cli"})
"""The modules ``python -m`` runs the console as."""

ENTRY_MARK = "__seat_console_entry__"
"""A ``__main__`` global a launcher sets to ``True`` before it imports ``seat_console`` to say
that it runs ``seat_console.cli.main`` as its process's entry (``benchmarks/
nvml_double_console.py``)."""

_OPTIONS_WITH_VALUE = frozenset({"-X", "-W", "--check-hash-based-pycs"})

_held = 0            # SIGINTs counted by _on_sigint (or swallowed before) and not yet taken
_holding = False     # _on_sigint is the SIGINT handler


def is_console_entry(orig_argv: Sequence[str], main_globals: dict[str, Any] | None = None
                     ) -> bool:
    """Whether the interpreter's command line ``orig_argv`` (``sys.orig_argv``: the
    interpreter, its options, then ``-m MODULE``, ``-c CODE`` or a script, then the program's
    arguments) runs the console: ``-m`` one of :data:`CONSOLE_MODULES`, or a script named
    :data:`CONSOLE_SCRIPT` — or ``main_globals`` (the ``__main__`` module's) has
    :data:`ENTRY_MARK` set true. Any list of strings is accepted; never raises."""
    if main_globals is not None and main_globals.get(ENTRY_MARK) is True:
        return True
    args = list(orig_argv[1:])
    i = 0
    while i < len(args):
        arg = str(args[i])
        if arg in _OPTIONS_WITH_VALUE:
            i += 2
            continue
        if arg == "-m":
            return i + 1 < len(args) and args[i + 1] in CONSOLE_MODULES
        if arg.startswith("-m"):
            return arg[2:] in CONSOLE_MODULES
        if arg == "-" or arg.startswith("-c") or arg == "--":
            return False
        if arg.startswith("-"):
            i += 1
            continue
        return os.path.basename(arg) == CONSOLE_SCRIPT
    return False


def swallowed_before() -> list[str]:
    """Traces of a :class:`KeyboardInterrupt` CPython swallowed before the console's code ran
    (each a short reason; empty: none):

    * ``sys.last_value`` is one: CPython printed it ("Failed checking if argv[0] is an import
      path entry") and went on;
    * a dead entry in importlib's module-lock table (``_frozen_importlib._module_locks``): the
      lock's weakref callback, which removes the entry, was cut by the exception;
    * the global import lock held while no import runs and no other thread exists: the
      callback was cut after taking it. The lock is released here (else the first import
      from another thread would wait forever).

    CPython internals are read defensively: a missing table or function is no trace."""
    found = []
    if isinstance(getattr(sys, "last_value", None), KeyboardInterrupt):
        found.append("CPython printed and dropped a KeyboardInterrupt (sys.last_value)")
    bootstrap = sys.modules.get("_frozen_importlib")
    locks = getattr(bootstrap, "_module_locks", None)
    if isinstance(locks, dict):
        dead = [name for name, ref in list(locks.items()) if callable(ref) and ref() is None]
        if dead:
            found.append(f"importlib's module-lock callback was cut ({', '.join(dead)})")
    found += _release_leaked_import_lock()
    return found


def _release_leaked_import_lock() -> list[str]:
    imp = sys.modules.get("_imp")
    thread = sys.modules.get("_thread")
    held = getattr(imp, "lock_held", None)
    count = getattr(thread, "_count", None)
    if not (callable(held) and callable(count)) or count() != 0 or not held():
        return []
    for _ in range(64):   # re-entrant: as many times as it was taken, bounded
        try:
            imp.release_lock()   # type: ignore[union-attr]
        except RuntimeError:     # not ours after all
            break
        if not held():
            break
    return ["importlib's module-lock callback was cut holding the import lock (released)"]


def _on_sigint(signum: int, frame: Any) -> None:
    """The held-interrupt handler: count the SIGINT, never raise; a second one while one is
    held ends the process with :data:`EXIT_INTERRUPTED` at once."""
    global _held
    _held += 1
    if _held > 1:
        os._exit(EXIT_INTERRUPTED)


INHERITED = (signal.default_int_handler, signal.SIG_DFL, signal.SIG_IGN)
"""The SIGINT dispositions a console entry takes over: Python's own handler, and the default
or ignored disposition the process inherited. A process started as a background job by a shell
without job control (``cmd &`` in a script, ``nohup cmd &``: how a long test run or a remote
command is often started) inherits SIGINT *ignored*; Python then installs no handler and
``asyncio.run`` none either, so ``kill -INT`` did nothing to a probe, while the TUI's start-up
guard, ``exporter`` and ``serve`` took SIGINT anyway. Every console entry now takes it (a
terminal's Ctrl-C reaches only its foreground job, never such a process: only an explicit
``kill -INT`` does, whose sender means it)."""


def hold_if_entry(orig_argv: Sequence[str] | None = None,
                  main_globals: dict[str, Any] | None = None) -> bool:
    """Install :func:`_on_sigint` for SIGINT when this process's entry is the console
    (:func:`is_console_entry` of ``orig_argv``, default ``sys.orig_argv``, and ``main_globals``,
    default the ``__main__`` module's), this is the main thread and the disposition in place is
    one of :data:`INHERITED` (not a handler someone else installed); count a Ctrl-C CPython
    swallowed before (:func:`swallowed_before`). Returns whether it holds SIGINT now. Called
    by the package's ``__init__``; safe to call again."""
    global _holding, _held
    if _holding:
        return True
    if orig_argv is None:
        orig_argv = getattr(sys, "orig_argv", sys.argv)
    if main_globals is None:
        main_globals = getattr(sys.modules.get("__main__"), "__dict__", None)
    if not is_console_entry(orig_argv, main_globals):
        return False
    try:
        if signal.getsignal(signal.SIGINT) not in INHERITED:
            return False
        signal.signal(signal.SIGINT, _on_sigint)
    except (ValueError, OSError):   # not the main thread
        return False
    _holding = True
    if swallowed_before():
        _held += 1
    return True


def holding() -> bool:
    """Whether :func:`_on_sigint` holds SIGINT (between :func:`hold_if_entry` and
    :func:`release`)."""
    return _holding


def pending() -> bool:
    """Whether a held SIGINT waits to be honoured."""
    return _held > 0


def take() -> bool:
    """Return whether a SIGINT was held, and forget it: the caller (the TUI's start-up guard,
    once its own handler is in place) honours it now."""
    global _held
    was, _held = _held > 0, 0
    return was


def check() -> None:
    """Raise :class:`KeyboardInterrupt` if a SIGINT is held (and forget it); else nothing.
    Called where unwinding is safe and quiet (``seat_console.cli.main``'s start)."""
    if take():
        raise KeyboardInterrupt


def release() -> None:
    """Give SIGINT to Python's own handler (``signal.default_int_handler``, also where the
    process inherited SIGINT ignored: :data:`INHERITED`): a Ctrl-C raises
    :class:`KeyboardInterrupt` again, and ``asyncio.run`` installs its handler over it (the
    probe's run is cancelled and kept as interrupted); then raise a held SIGINT as
    :class:`KeyboardInterrupt`. SIGINT is blocked meanwhile, so one that comes during the swap
    is raised too, by Python's handler. Nothing when not holding."""
    global _holding
    if not _holding:
        return
    blocked = _block_sigint()
    try:
        signal.signal(signal.SIGINT, signal.default_int_handler)
        _holding = False
        check()
    finally:
        if blocked:
            signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})


def _block_sigint() -> bool:
    try:
        old = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    except (AttributeError, OSError, ValueError):
        return False
    return signal.SIGINT not in old


__all__ = ["CONSOLE_MODULES", "CONSOLE_SCRIPT", "ENTRY_MARK", "EXIT_INTERRUPTED", "INHERITED",
           "check", "hold_if_entry", "holding", "is_console_entry", "pending", "release",
           "swallowed_before", "take"]
