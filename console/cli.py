"""``seat-console`` command line: the TUI by default, and headless subcommands.

Exit codes (documented in README.md):

* ``0`` — ok;
* ``1`` — error (a source or action failed, invalid profile);
* ``2`` — usage error (bad arguments; argparse's convention);
* ``2`` also: the TUI without a terminal (stdin or stdout a pipe or a file), refused with the
  headless command to use instead;
* under a web driver (``seat-console serve``'s app processes, :func:`served`) every command is
  read-only whatever the arguments say, and the TUI runs without a terminal on purpose;
* ``2`` also: ``--readonly`` with a command that changes the node (:data:`NODE_CHANGING`)
  without ``--dry-run`` — refused before anything runs, nothing journaled;
* ``3`` — unavailable: no GPU / NVML unavailable (``gpus``), or a required source is down;
* ``130`` — the TUI was interrupted (Ctrl-C) while starting, before Textual reads the keys;
  also any command interrupted before it began to run: from the package's first import, a
  Ctrl-C is held, never lost in an import, and honoured here quietly
  (:mod:`seat_console.core.interrupt`); once a headless command runs, Python's own handler
  is back (``KeyboardInterrupt``, ``asyncio.run``'s cancellation);
* a closed output pipe (``seat-console gpus | head -1``) is not an error of its own: the rest
  of the output is dropped and the command ends with its own code, without a traceback
  (``141``, 128 + SIGPIPE, only if the pipe breaks outside a command's writes).

Start-up: with no subcommand (the TUI) only the global options are parsed, so no command
module is imported before the first frame; ``--help`` and subcommands build the full parser.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import os
import re
import sys
from collections.abc import Sequence
from typing import NoReturn

from seat_console.core import interrupt
from seat_console.core.profile_path import (   # no pydantic yet: the TUI's first frame comes first
    REFRESH_INTERVAL_MAX_S,
    REFRESH_INTERVAL_MIN_S,
    ProfileError,
)

EXIT_OK = 0
EXIT_ERROR = 1
EXIT_USAGE = 2
EXIT_UNAVAILABLE = 3
EXIT_INTERRUPTED = 130
"""128 + SIGINT: Ctrl-C while the TUI was starting (before Textual reads keys itself)."""
EXIT_PIPE = 141
"""128 + SIGPIPE: the reader of our output went away while we were still writing."""

# Modules under seat_console.commands that provide ``register(subparsers)``.
COMMAND_MODULES = [
    "seat_console.commands.profile_cmd",
    "seat_console.commands.gpus_cmd",
    "seat_console.commands.fit_cmd",
    "seat_console.commands.status_cmd",
    "seat_console.commands.report_cmd",
    "seat_console.commands.compare_cmd",
    "seat_console.commands.decide_cmd",
    "seat_console.commands.backport_cmd",
    "seat_console.commands.image_cmd",
    "seat_console.commands.swap_cmd",
    "seat_console.commands.promote_cmd",
    "seat_console.commands.hold_cmd",
    "seat_console.commands.release_cmd",
    "seat_console.commands.recover_cmd",
    "seat_console.commands.journal_cmd",
    "seat_console.commands.approve_cmd",
    "seat_console.commands.probe_cmd",
    "seat_console.commands.runbook_cmd",
    "seat_console.exporter.cmd",
    "seat_console.commands.fleet_cmd",
    "seat_console.serve.command",
]

# Subcommands that change the node, each with a test of its arguments (``True``: this run
# would change the node). ``--readonly`` refuses them at once (:func:`readonly_refusal`);
# ``--dry-run`` (and read-only modes such as ``hold --status``) still run. ``decide`` is not
# here: it writes the journal only (the decision row), never the node.
NODE_CHANGING = {
    "hold": lambda a: not getattr(a, "status", False) and not getattr(a, "words", None),
    "release": lambda a: True,
    "recover": lambda a: bool(getattr(a, "undo", False) or getattr(a, "complete", False)),
    "build-backport": lambda a: True,
    "swap": lambda a: True,
    "restore": lambda a: True,
    "probe": lambda a: True,
    "compare": lambda a: True,
    "runbook": lambda a: getattr(a, "action", None) == "next",
    "approve": lambda a: bool(getattr(a, "id", None)),   # writes the journal
    "promote": lambda a: True,
}


SERVED_DRIVERS = frozenset({
    "seat_console.serve.driver:ServedWebDriver",   # seat_console.serve.driver.DRIVER_PATH
    "textual.drivers.web_driver:WebDriver",         # textual-serve's own choice
})
"""``TEXTUAL_DRIVER`` values under which the console is served to a browser (not imported
here: the string is what Textual reads from the environment)."""


def served(environ: dict[str, str] | None = None) -> bool:
    """Whether this process is a console served to a browser: ``TEXTUAL_DRIVER`` in the
    environment names a web driver (:data:`SERVED_DRIVERS`). Then :func:`main` forces
    ``--readonly`` (a second guard: ``seat-console serve`` passes ``--readonly`` itself) and
    the TUI's no-terminal refusal does not apply (its stdin / stdout are the server's pipes)."""
    env = os.environ if environ is None else environ
    return env.get("TEXTUAL_DRIVER", "").strip() in SERVED_DRIVERS


def readonly_refusal(args: argparse.Namespace) -> str | None:
    """The refusal message when ``--readonly`` is given with a node-changing subcommand (not
    ``--dry-run``), else ``None``. The one place that enforces ``--readonly`` for the CLI:
    checked before the profile is loaded or the journal opened, so nothing is journaled."""
    cmd = getattr(args, "command", None)
    if not getattr(args, "readonly", False) or cmd not in NODE_CHANGING:
        return None
    if getattr(args, "dry_run", False) or not NODE_CHANGING[cmd](args):
        return None
    return (f"seat-console {cmd}: --readonly forbids commands that change the node; nothing "
            f"was done or journaled (drop --readonly, or add --dry-run to see the plan)")


_MARKUP = [
    (re.compile(r":[a-z]+:`~?(?:[\w.]+\.)?([^`<]+?)`"), r"\1"),   # :class:`x.Y` → Y
    (re.compile(r"``([^`]+)``"), r"\1"),                            # ``x`` → x
    (re.compile(r"\*\*([^*]+)\*\*"), r"\1"),                        # **x** → x
]


def plain_help(text: str | None) -> str | None:
    """Help text without reStructuredText markup (``x``, :role:`x`, **x**): command modules
    use their docstrings as ``--help`` text, which a terminal shows raw."""
    if not text:
        return text
    for pat, repl in _MARKUP:
        text = pat.sub(repl, text)
    return text


_EXITS_IN_DESCRIPTION = re.compile(r"(?:(?<=\. )|(?<=\n)|^)(?:Exit codes:|exit codes:|Exit(?= \(|"
                                   r" \d))")
"""Where a description's exit codes begin ("Exit 0 ok, …", "Exit codes: …", "Exit (runbook) …")."""


def exit_codes_last(parser: argparse.ArgumentParser) -> None:
    """Move a subcommand's exit codes from its description to its epilog, so its ``--help``
    ends with them as the README says ("every command's ``--help`` ends with its exit codes"):
    ten commands said them at the top, in the middle of the description (the trial). A parser
    whose epilog names its exit codes already is left as it is."""
    desc = parser.description or ""
    if "exit codes" in (parser.epilog or "").lower():
        return
    m = _EXITS_IN_DESCRIPTION.search(desc)
    if m is None:
        return
    codes = desc[m.start():].strip()
    codes = re.sub(r"^(?:Exit codes:|exit codes:|Exit)\s*", "", codes)
    parser.description = desc[:m.start()].rstrip()
    parser.epilog = "exit codes: " + codes


def _strip_markup(parser: argparse.ArgumentParser) -> None:
    """Apply :func:`plain_help` to a parser, its options and its subcommands, recursively;
    each subcommand's exit codes last (:func:`exit_codes_last`)."""
    parser.description = plain_help(parser.description)
    parser.epilog = plain_help(parser.epilog)
    for action in parser._actions:
        if isinstance(action.help, str):
            action.help = plain_help(action.help)
        if isinstance(action, argparse._SubParsersAction):
            for choice in action._choices_actions:
                choice.help = plain_help(choice.help)
            for sub in action.choices.values():
                exit_codes_last(sub)
                _strip_markup(sub)


def _version() -> str:
    """The installed distribution's version (``importlib.metadata``), or a sentence saying it
    is not installed. Read only when asked (:class:`_VersionAction`): importing
    ``importlib.metadata`` and scanning the path's distributions cost ~35 ms of CPU, which
    every start paid while the parser was built."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("seat-console")
    except PackageNotFoundError:
        return "unknown (not installed)"


class _VersionAction(argparse.Action):
    """``--version``: prints ``seat-console VERSION`` and exits 0, as argparse's own
    ``version`` action does, but reads the version only when the flag is given."""

    def __init__(self, option_strings: list[str], dest: str = argparse.SUPPRESS,
                 default: str = argparse.SUPPRESS,
                 help: str = "show the program's version number and exit") -> None:
        super().__init__(option_strings=option_strings, dest=dest, default=default, nargs=0,
                         help=help)

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
                 values: object, option_string: str | None = None) -> None:
        sys.stdout.write(f"seat-console {_version()}\n")   # argparse's version: stdout
        parser.exit()


def _seconds(text: str) -> float:
    """``--interval``'s value as a float (the range is checked after parsing, so ``0``, ``nan``
    and ``inf`` get the same sentence); not a number: the same sentence, naming the value."""
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{text!r}: give seconds between {REFRESH_INTERVAL_MIN_S:g} and "
            f"{REFRESH_INTERVAL_MAX_S:g}, a number without a unit (e.g. 1 or 0.5)") from None


class _NotTheTui(Exception):
    """The quick parser of :func:`_tui_args` met an error: the full parser runs and says it."""


class _QuickParser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise _NotTheTui(message)


def _add_global_options(parser: argparse.ArgumentParser) -> None:
    """The options before any subcommand (shared by the fast TUI path and the full parser)."""
    parser.add_argument("--version", action=_VersionAction)
    parser.add_argument("--profile", metavar="FILE",
                        help="seat profile TOML (else $SEAT_CONSOLE_PROFILE, the XDG config "
                             "path, then the embedded default)")
    parser.add_argument("--readonly", action="store_true",
                        help="hide every action that changes the node")
    parser.add_argument("--interval", type=_seconds, metavar="S",
                        help="refresh interval in seconds, 0.1 to 3600 (default: the profile's, 1 s)")


GLOBAL_OPTIONS = ("--profile", "--readonly", "--interval")
"""The options of ``seat-console`` itself, given before the command."""


_WANTS_JSON = [False]
"""Whether the command line being parsed names ``--json`` (set by :func:`main`)."""


class _Parser(argparse.ArgumentParser):
    """The top-level parser: an unrecognized global option after the command (``seat-console
    status --profile FILE``, a new engineer's first mistake) gets the line that moves it."""

    def error(self, message: str) -> NoReturn:
        if message.startswith("unrecognized arguments:"):
            late = [a for a in message.split(":", 1)[1].split()
                    if a.split("=", 1)[0] in GLOBAL_OPTIONS]
            names = list(dict.fromkeys(x.split("=", 1)[0] for x in late))
            if names:
                form = {"--profile": "--profile FILE", "--interval": "--interval S"}
                one = len(names) == 1
                message += (f" ({', '.join(names)} {'is an option' if one else 'are options'} "
                            f"of seat-console itself: give {'it' if one else 'them'} before "
                            "the command, seat-console "
                            f"{' '.join(form.get(n, n) for n in names)} COMMAND …)")
        if _WANTS_JSON[0]:   # a script asked for JSON: the usage error is one too (the trial)
            from seat_console.core import jsonout

            print(jsonout.dumps({"ok": False, "error": f"{self.prog}: {message}", "exit": 2}))
        super().error(message)


def build_parser() -> argparse.ArgumentParser:
    """The argument parser with every registered subcommand (help text without markup)."""
    parser = _Parser(
        prog="seat-console",
        description="Watch an LLM serving seat and run the seat-swap runbook safely.",
    )
    _add_global_options(parser)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMAND_MODULES:
        importlib.import_module(name).register(sub)
    _strip_markup(parser)
    return parser


def _tui_args(argv: Sequence[str] | None) -> argparse.Namespace | None:
    """The global options when ``argv`` asks for the TUI (no subcommand, no ``--help``), else
    ``None`` (then the full parser runs)."""
    quick = _QuickParser(prog="seat-console", add_help=False)
    _add_global_options(quick)
    try:
        args, rest = quick.parse_known_args(argv)
    except _NotTheTui:   # a bad global option: the full parser's usage and message
        return None
    if rest:
        return None
    args.command = None
    args.func = None
    return args


def _quiet_stdout() -> None:
    """Point stdout at /dev/null so the interpreter's last flush cannot raise again."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError):
        pass


class PipeSafeStdout:
    """``sys.stdout`` for headless commands: once the reader has gone (``BrokenPipeError``),
    further output is dropped instead of raising, so the command runs to its end and returns
    its own exit code. Everything else is the wrapped stream's."""

    def __init__(self, stream: object) -> None:
        self._stream = stream
        self.broken = False

    def write(self, text: str) -> int:
        """Write ``text``, or drop it once the pipe is closed; returns ``len(text)``."""
        if not self.broken:
            try:
                return self._stream.write(text)  # type: ignore[attr-defined]
            except BrokenPipeError:
                self._broke()
        return len(text)

    def flush(self) -> None:
        """Flush, or nothing once the pipe is closed."""
        if not self.broken:
            try:
                self._stream.flush()  # type: ignore[attr-defined]
            except BrokenPipeError:
                self._broke()

    def _broke(self) -> None:
        self.broken = True
        _quiet_stdout()

    def __getattr__(self, name: str) -> object:
        return getattr(self._stream, name)


def _printable_streams() -> None:
    """Headless output never raises on text it cannot encode: a lone surrogate code point read
    from outside (a JSON ``\\ud800`` escape in a tensor name, a file name) is written as its
    ``\\ud800`` escape instead of a ``UnicodeEncodeError`` that lost the command's whole result
    (issue #22)."""
    for stream in (sys.stdout, sys.stderr):
        reconfigure = getattr(stream, "reconfigure", None)
        if reconfigure is not None:
            with contextlib.suppress(ValueError, OSError):
                reconfigure(errors="backslashreplace")


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``seat-console`` and ``python -m seat_console``; returns the exit code.

    A closed output pipe (``seat-console gpus | head -1``) ends quietly with the command's
    own code (:class:`PipeSafeStdout`); :data:`EXIT_PIPE` only if it breaks elsewhere."""
    rc = EXIT_PIPE
    try:
        interrupt.check()   # a Ctrl-C held since the process began (seat_console.core.interrupt)
        rc = _main(argv)
        sys.stdout.flush()
    except BrokenPipeError:
        _quiet_stdout()
    except KeyboardInterrupt:   # Ctrl-C outside a command's own handling: 130, no traceback
        rc = EXIT_INTERRUPTED
    return rc


def _main(argv: Sequence[str] | None) -> int:
    args = _tui_args(argv)
    parser: argparse.ArgumentParser | None = None
    if args is None:
        _printable_streams()
        if not isinstance(sys.stdout, PipeSafeStdout) and sys.stdout is not None:
            sys.stdout = PipeSafeStdout(sys.stdout)  # headless: a closed pipe is not an error
        parser = build_parser()
        _WANTS_JSON[0] = "--json" in (sys.argv[1:] if argv is None else list(argv))
        args = parser.parse_args(argv)
    if args.interval is not None and not (
            REFRESH_INTERVAL_MIN_S <= args.interval <= REFRESH_INTERVAL_MAX_S):  # also NaN
        parser = parser or build_parser()
        parser.error(f"--interval {args.interval:g}: give seconds between "
                     f"{REFRESH_INTERVAL_MIN_S:g} and {REFRESH_INTERVAL_MAX_S:g}")
    if served():
        args.readonly = True   # a browser never reaches an action, whatever argv says
    refusal = readonly_refusal(args)
    if refusal is not None:
        if getattr(args, "json", False):
            from seat_console.core import jsonout

            print(jsonout.dumps({"ok": False, "error": refusal, "exit": EXIT_USAGE}))
        print(refusal, file=sys.stderr)
        return EXIT_USAGE
    func = getattr(args, "func", None)
    if func is None:
        return _run_tui(args)   # its start-up guard takes the held Ctrl-C over
    if getattr(args, "needs_profile", True) is False:
        interrupt.release()   # the command gets Python's own SIGINT handler (raises one held)
        return func(args, None)
    from seat_console.core.profile import load_profile

    try:
        loaded = load_profile(args.profile)
    except ProfileError as exc:
        if getattr(args, "json", False):   # --json: the error as a document too
            from seat_console.core import jsonout

            print(jsonout.dumps({"ok": False, "error": str(exc), "exit": EXIT_ERROR}))
        print(f"seat-console: {exc}", file=sys.stderr)
        return EXIT_ERROR
    interrupt.release()
    if getattr(args, "screen", None) == "fleet" and not getattr(args, "json", False):
        return run_fleet_screen(args, loaded)
    return func(args, loaded)


def run_fleet_screen(args: argparse.Namespace, loaded: object) -> int:
    """``seat-console fleet`` without ``--json``: the fleet screen
    (:mod:`seat_console.tui.fleet`), with the checks of
    :func:`seat_console.commands.fleet_cmd.prepare`. Here, above both fronts: commands and
    the TUI do not import each other."""
    from seat_console.commands.fleet_cmd import prepare

    prepared = prepare(args, loaded)  # type: ignore[arg-type]
    if isinstance(prepared, int):
        return prepared
    fleet, interval = prepared
    from seat_console.tui.fleet import run_fleet_app

    return run_fleet_app(fleet, interval_s=interval,  # type: ignore[arg-type]
                         readonly=bool(getattr(args, "readonly", False)),
                         keymap=loaded.profile.keys,  # type: ignore[attr-defined]
                         keymap_source=loaded.source)  # type: ignore[attr-defined]


def _no_terminal(stdin: object = None, stdout: object = None) -> str | None:
    """The refusal when the TUI would not run on a terminal (stdin or stdout is a pipe or a
    file: ``seat-console | cat``, ``ssh host seat-console`` without ``-t``), else ``None``.
    Textual would draw screens into the pipe and read no keys."""
    from seat_console.core.terminal import is_terminal

    stdin = sys.stdin if stdin is None else stdin
    stdout = sys.stdout if stdout is None else stdout
    for name, stream in (("stdout", stdout), ("stdin", stdin)):
        if not is_terminal(stream):
            return (f"seat-console: the console needs a terminal, and {name} is not one (a pipe "
                    "or a file). For one reading without a terminal run `seat-console status` "
                    "(or `status --json`); over ssh use `ssh -t`.")
    return None


def _run_tui(args: argparse.Namespace) -> int:
    """The TUI: the first frame (header + each card's memory, :mod:`seat_console.tui.first_frame`)
    before pydantic and Textual load, then the profile validated, then the app; the process
    ends through :func:`seat_console.tui.first_frame.end_process` (no thread left to the
    interpreter's finalization)."""
    rc = _run_tui_app(args)
    from seat_console.tui import first_frame

    return first_frame.end_process(rc)


def _run_tui_app(args: argparse.Namespace) -> int:
    refusal = None if served() else _no_terminal()
    if refusal is not None:
        print(refusal, file=sys.stderr)
        return EXIT_USAGE
    from seat_console.tui import first_frame
    from seat_console.tui.early import limit_malloc_arenas, prestart
    from seat_console.tui.heap import hold_collector

    limit_malloc_arenas()   # before any thread: one heap per idle thread was ~11 MiB RSS
    hold_collector()   # until the app's start-up heap is frozen (tui/heap.py: ~0.1 s of CPU)
    # from here until the app has ended, a SIGINT is ours: it unwinds to the except below,
    # which restores the terminal whatever instant of start-up it cut (issue #22)
    first_frame.guard_start_up()
    try:
        first_frame.raise_if_interrupted()   # one held since the process began: nothing drawn
        # a Ctrl-C here is acted on at the next of these safe points (raise_if_interrupted):
        # raised from the signal handler inside an import, it could leave the import lock held
        nvml = first_frame.draw_before_profile(args.profile)
        first_frame.raise_if_interrupted()
        from seat_console.core.profile import load_profile

        try:
            loaded = load_profile(args.profile)
        except ProfileError as exc:
            first_frame.leave()
            print(f"seat-console: {exc}", file=sys.stderr)
            return EXIT_ERROR
        first_frame.raise_if_interrupted()
        prestart(loaded, nvml=nvml)   # the GPU panel's first reading, while the TUI imports
        from seat_console.tui.app import run_app

        first_frame.raise_if_interrupted()

        try:
            return run_app(loaded, readonly=args.readonly, interval=args.interval)
        except ProfileError as exc:   # the profile's [keys] (checked against the key table)
            first_frame.leave()
            print(f"seat-console: {exc}", file=sys.stderr)
            return EXIT_ERROR
    except KeyboardInterrupt:   # Ctrl-C before Textual took the keys (it reads them raw after)
        # wherever it landed (the frame, the imports, Textual's driver half started or half
        # stopped): the saved terminal attributes, the modes and the shell's screen back
        first_frame.leave(force=True)
        return EXIT_INTERRUPTED
    except BaseException:
        first_frame.leave()   # the app died before its driver: give the shell its screen
        raise
    finally:
        first_frame.end_guard()


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
