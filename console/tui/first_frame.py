"""The first frame, drawn before pydantic and Textual load: the header and each card's memory.

Measured on the H200 (docs/benchmarks.md), the TUI's first Textual frame came 0.96 s after
``exec``: Python imports under the GIL (the profile and pydantic ~0.16 s, Textual and the
widgets ~0.3 s), then ~70 widgets laid out. NVML was not the wait (``nvmlInit`` 9.5 ms). An
engineer who starts the console to see whether the cards are full should not wait for the
toolkit, so :mod:`seat_console.cli` (the TUI path only) first calls
:func:`draw_before_profile`, then validates the profile and imports the app:

* the alternate screen is entered and cleared (as Textual's driver does; Textual then draws
  over it, and leaving Textual restores the shell's screen);
* line 1: the header's identity — node, tensor parallel size, ``gpu_memory_utilization`` — read
  from the very profile file the TUI will load (the same lookup,
  :func:`seat_console.core.profile_path.resolve_profile_path`), but not yet validated, so it says
  ``checking the profile…``; a value of the wrong type shows as ``?``. If the validation then
  fails, the frame is taken down (:func:`leave`) and the error printed as without it;
* then one line per card from NVML through the console's one gateway
  (:class:`seat_console.node.nvml.Nvml`, which the app's node context adopts: NVML is
  initialised once per process): index, name, used / total memory in GiB (2^30 B) with the bar
  the compact GPU panel draws (:func:`seat_console.widgets.gpu_lines.memory_cells`), GPU
  utilisation; a card's own error on its line; NVML unavailable in one line with its reason.
  Which cards serve the seat needs the validated profile: the app's first frame says it;
* then ``starting the console…``.

The NVML reading runs in a thread and is waited for at most :data:`WAIT_FOR_READING_S` (an
``nvmlInit`` can hang on a sick card); keys typed meanwhile wait in the terminal for Textual.
Rich renders the lines (NO_COLOR honoured). Drawn only when stdin and stdout are terminals and
``TERM`` is not ``dumb``; ``SEAT_CONSOLE_FIRST_FRAME=0`` (or ``false``, ``no``, ``off``) turns it off.

Between the frame and Textual's driver the process is in the alternate screen with the cursor
hidden but without Textual's handlers: a Ctrl-Z then (SIGTSTP) gives the shell its screen
back before stopping and takes the frame's screen again on ``fg`` (:func:`_on_stop`), until
Textual's Linux driver installs its own SIGTSTP handler as it is built (``LinuxDriver.__init__``,
Textual 8); :func:`handoff` puts the previous handler back when the app never got that far.

Ctrl-C (SIGINT) at any instant of start-up (issue #22): :func:`guard_start_up` saves the
terminal's attributes and installs the console's own SIGINT handler before the frame, until the
app has ended (:func:`end_guard`). The handler never raises: while Textual's loop runs it asks
the app to exit with code 130 (:func:`set_interrupt_hook`: Textual's own exit restores the
terminal; one that came while ``asyncio.run`` built the loop is acted on at the app's mount,
:func:`run_pending_interrupt`); before that it marks the interrupt, and the start-up raises
:class:`KeyboardInterrupt` at its next safe point (:func:`raise_if_interrupted`), whose
``except`` calls :func:`leave` with ``force``: attributes, modes and the shell's screen
restored, exit 130. (Raised from the handler, a KeyboardInterrupt that landed in importlib's
module-lock callback was swallowed with the import lock held: a deadlock.) A second SIGINT
restores the terminal and exits 130 at once.
``tests/test_ctrl_c_startup.py`` checks it at 50 spread-out instants in a pty.
"""

from __future__ import annotations

from seat_console.core import interrupt
from seat_console.core.terminal import is_terminal  # shared with cli and the fleet screen

import os
import shutil
import sys
import threading
from typing import Any, TextIO

WAIT_FOR_READING_S = 0.5
"""Longest wait (s) for NVML before the frame is drawn without the cards ("reading the
GPUs…"); ``import pynvml`` + ``nvmlInit`` + one read took ~70 ms on the H200 machine."""

ENTER = "\x1b[?1049h\x1b[?25l\x1b[H\x1b[2J"
"""Alternate screen on, cursor hidden, cursor home, screen cleared (xterm control sequences,
as Textual's Linux driver sends them)."""

LEAVE = "\x1b[?25h\x1b[?1049l"
"""Cursor shown, alternate screen off: written only if the app never started
(:func:`leave`)."""

RESTORE = ("\x1b[?1000l\x1b[?1002l\x1b[?1003l\x1b[?1015l\x1b[?1006l\x1b[?2004l\x1b[?1004l"
           + LEAVE)
"""What :func:`leave` writes: the modes Textual's driver may have turned on when an interrupt
cut its start or its exit short (mouse reporting 1000/1002/1003/1015/1006, bracketed paste
2004, focus events 1004) turned off, then :data:`LEAVE`. Each is a no-op on a terminal where the
mode is already off."""


UTIL_TERM = "gpu_memory_utilization"
"""The term the identity line names the seat's memory share by (the profile's and vLLM's)."""

UTIL_TERM_SHORT = "gpu_mem_util"
""":data:`UTIL_TERM` where the line is short of room (a narrow header; the header's tooltip and
the help give the long form)."""


def identity_text(name: str, tp: str, util: str, term: str | None = UTIL_TERM) -> Any:
    """``node NAME · TP N · gpu_memory_utilization U`` as a Rich ``Text`` (bold values), from
    display strings; ``name`` is shown through :func:`seat_console.core.fmt.printable`.
    ``term``: the utilisation's name (:data:`UTIL_TERM_SHORT` where room is short); ``None``
    leaves the utilisation out."""
    from rich.text import Text

    from seat_console.core.fmt import printable

    ident = Text()
    ident.append("node ")
    ident.append(printable(name), style="bold")
    ident.append(" · TP ")
    ident.append(tp, style="bold")
    if term is not None:
        ident.append(f" · {term} ")
        ident.append(util, style="bold")
    return ident


def header_forms(profile: Any) -> list[Any]:
    """The header's identity (:func:`identity_text`) from a validated
    :class:`seat_console.core.profile.Profile`, in the forms a one-line header picks from,
    longest first: in full (what the first frame shows), the term shortened to
    :data:`UTIL_TERM_SHORT`, then without the utilisation (node and TP, the identity's first
    facts). At 80 columns a longer node name wrapped ``gpu_memory_utilization`` onto a line of
    its own."""
    args = (profile.node.name, str(profile.seat.tensor_parallel_size),
            f"{profile.seat.gpu_memory_utilization:.2f}")
    return [identity_text(*args), identity_text(*args, term=UTIL_TERM_SHORT),
            identity_text(*args, term=None)]


def wanted(env: dict[str, str] | None = None, stdin: Any = None, stdout: Any = None) -> bool:
    """Whether to draw the first frame: stdin and stdout are terminals (:func:`is_terminal`),
    ``TERM`` is set and not ``dumb``, and ``SEAT_CONSOLE_FIRST_FRAME`` is not ``0``,
    ``false``, ``no`` or ``off``."""
    env = os.environ if env is None else env
    stdin = sys.stdin if stdin is None else stdin
    stdout = sys.stdout if stdout is None else stdout
    if env.get("SEAT_CONSOLE_FIRST_FRAME", "1").strip().lower() in ("0", "false", "no", "off"):
        return False
    if env.get("TERM", "dumb") in ("", "dumb"):
        return False
    return is_terminal(stdin) and is_terminal(stdout)


RAW_PARSE_MAX_CHARS = 64 << 10
"""Largest profile text (characters) the first frame parses (the default profile is ~5 KB).
``tomllib`` is slow on hostile input (a 16 KB dotted key took 0.6 s on this project's 2-core
machine); a longer text shows ``?`` and the validation that follows bounds and names it."""

RAW_MAX_DOTS = 64
"""More dots than this on one line and the first frame does not parse the text (a key of
more than :data:`seat_console.core.profile.MAX_DOTTED_KEY_PARTS` parts is the validation's own
refusal; a value such as a URL has a few dots)."""


def _long_dotted_key(text: str) -> bool:
    """Whether a line has more than :data:`RAW_MAX_DOTS` dots anywhere (a dotted key cannot
    span lines, and quoted parts may hold ``=``): the input on which ``tomllib``'s time and
    memory grow with the square (a 20,000-part key: 4 s and 1.5 GB)."""
    return any(line.count(".") > RAW_MAX_DOTS for line in text.splitlines())


def raw_identity(cli_path: str | None, environ: dict[str, str] | None = None
                 ) -> tuple[str, str, str]:
    """``(node name, tensor parallel size, gpu_memory_utilization)`` as display strings (the
    name through :func:`seat_console.core.fmt.printable`, which :func:`identity_text` applies again
    harmlessly: escaped text has no control characters left), read
    with ``tomllib`` from the profile the TUI will load (same lookup as
    :func:`seat_console.core.profile.load_profile`), before validation: each is ``"?"`` when the file
    cannot be found, read or parsed, or the value is missing or of the wrong type (the
    validation that follows names the problem), and for a text above
    :data:`RAW_PARSE_MAX_CHARS` or with a key of more than :data:`RAW_MAX_DOTS` parts (slow to
    parse; not waited for). Never raises for bad input."""
    import tomllib

    from seat_console.core.profile_path import (ProfileError, default_profile_text,
                                           resolve_profile_path)

    unknown = ("?", "?", "?")
    try:
        path, _ = resolve_profile_path(cli_path, environ)
        if path is None:
            text = default_profile_text()
        else:
            with path.open("r", encoding="utf-8") as f:
                text = f.read(RAW_PARSE_MAX_CHARS + 1)
        if len(text) > RAW_PARSE_MAX_CHARS or _long_dotted_key(text):
            return unknown   # the validation bounds these; the first frame does not wait
        data = tomllib.loads(text)
    except (ProfileError, OSError, UnicodeDecodeError, tomllib.TOMLDecodeError, ValueError,
            RecursionError, MemoryError):
        return unknown
    node = data.get("node") if isinstance(data.get("node"), dict) else {}
    seat = data.get("seat") if isinstance(data.get("seat"), dict) else {}
    name = node.get("name")
    tp = seat.get("tensor_parallel_size")
    util = seat.get("gpu_memory_utilization")
    from seat_console.core.fmt import printable

    return (printable(name) if isinstance(name, str) and name else "?",
            str(tp) if isinstance(tp, int) and not isinstance(tp, bool) else "?",
            f"{util:.2f}" if isinstance(util, (int, float)) and not isinstance(util, bool)
            else "?")


def nvml_lines(nvml: Any) -> Any:
    """One Rich ``Text`` line per card read through the gateway ``nvml``
    (:class:`seat_console.node.nvml.Nvml`): ``GPU i NAME  used U/T GiB ████░░░░  N %``.
    A card that fell off the bus says LOST, a failed call on one card says so on its line;
    NVML unavailable as a whole is one line with its kind and reason. Sources: NVML API
    reference (``nvmlDeviceGetCount``, ``…GetHandleByIndex``, ``…GetName``,
    ``…GetMemoryInfo_v2``, ``…GetUtilizationRates``)."""
    from rich.text import Text

    from seat_console.node.nvml import GpuLost, NvmlCallError, NvmlUnavailable, is_na
    from seat_console.widgets.gpu_lines import memory_cells, na

    t = Text()
    try:
        count = nvml.call("nvmlDeviceGetCount")
        if is_na(count) or not count:
            t.append("GPU  no card listed by NVML (nvidia-smi -L)", style="yellow")
            return t
        for i in range(int(count)):
            if i:
                t.append("\n")
            t.append(f"GPU {i} ", style="bold")
            try:
                h = nvml.call("nvmlDeviceGetHandleByIndex", i)
                name = nvml.text(nvml.call("nvmlDeviceGetName", h))
                t.append(f"{('n/a' if is_na(name) else str(name)).removeprefix('NVIDIA ')} ")
                mem = nvml.memory_info(h)
                if is_na(mem):
                    t.append("  memory n/a", style="dim")
                else:
                    api, m = mem
                    total = m.get("total")
                    shown = (total - m["reserved"] if api == "v2" and total is not None
                             and m.get("reserved") is not None else total)
                    t.append_text(memory_cells(m.get("used"), shown, total, api == "v1"))
                util = nvml.call("nvmlDeviceGetUtilizationRates", h)
                gpu_pct = None if is_na(util) else getattr(util, "gpu", None)
                t.append(f" {na(gpu_pct, '{:>3} %')}")
            except GpuLost:
                t.append(" LOST ", style="bold reverse red")
                t.append(" fell off the bus (NVML_ERROR_GPU_IS_LOST)")
            except NvmlCallError as exc:
                t.append(" ERROR ", style="bold reverse red")
                t.append(f" {exc}")
    except NvmlUnavailable as exc:
        t = Text(f"GPU  NVML unavailable ({exc.kind}): {exc}", style="yellow")
    return t


def _read_in_thread(nvml: Any, wait_s: float) -> Any:
    """:func:`nvml_lines` in a daemon thread, waited for ``wait_s`` s at most (then a
    "reading the GPUs…" line; the gateway stays usable, the app's GPU source reads on)."""
    from rich.text import Text

    box: list[Any] = []

    def run() -> None:
        try:
            box.append(nvml_lines(nvml))
        except Exception as exc:  # noqa: BLE001 - shown in the frame; the app reports it again
            box.append(Text(f"GPU  unavailable: {type(exc).__name__}: {exc}", style="yellow"))

    th = threading.Thread(target=run, name="seat-console:first-frame", daemon=True)
    th.start()
    th.join(wait_s)
    if box:
        return box[0]
    return Text(f"GPU  reading the GPUs… (NVML has not answered after {wait_s:g} s)",
                style="dim")


def render(identity: tuple[str, str, str], gpus: Any, *, width: int, no_color: bool) -> str:
    """The frame's text (control sequences included, :data:`ENTER` first) for a terminal
    ``width`` columns wide: the header (``identity`` from :func:`raw_identity`, with
    "checking the profile…"), the GPU lines ``gpus`` (a Rich ``Text``), "starting the
    console…". Long lines are cut with an ellipsis, never wrapped."""
    import io

    from rich.console import Console
    from rich.text import Text

    header = identity_text(*identity)
    header.append("   checking the profile…", style="dim")
    buf = io.StringIO()
    console = Console(file=buf, width=max(20, width), force_terminal=True,
                      no_color=no_color, highlight=False, emoji=False, markup=False,
                      legacy_windows=False, soft_wrap=False)
    for text in (header, gpus, Text("starting the console…", style="dim")):
        for line in text.split("\n"):   # one screen line each: cut, never wrapped
            console.print(line, no_wrap=True, overflow="ellipsis", crop=True)
    return ENTER + buf.getvalue().replace("\n", "\r\n")


_drawn = False


def draw_before_profile(cli_path: str | None, out: TextIO | None = None,
                        wait_s: float = WAIT_FOR_READING_S, nvml: Any | None = None
                        ) -> Any | None:
    """Draw the first frame on ``out`` (default ``sys.stdout``) if :func:`wanted`, before the
    profile is validated; return the NVML gateway it opened (for the app's node context to
    adopt), or ``None`` when nothing was drawn. ``nvml``: a gateway to use instead of a new
    one (tests pass one on the NVML double). A write error (the terminal went away) is
    swallowed: the app finds that out itself."""
    global _drawn
    out = sys.stdout if out is None else out
    if not wanted(stdout=out):
        return None
    from seat_console.node.nvml import Nvml

    gateway = Nvml() if nvml is None else nvml
    identity = raw_identity(cli_path)
    gpus = _read_in_thread(gateway, wait_s)
    width = shutil.get_terminal_size((80, 24)).columns
    frame = render(identity, gpus, width=width, no_color=bool(os.environ.get("NO_COLOR")))
    # both before the write: a Ctrl-C or Ctrl-Z that comes as (or just after) the frame reaches
    # the terminal must find the frame marked drawn and our SIGTSTP handler in place
    _drawn = True
    _catch_stop()
    try:
        out.write(frame)
        out.flush()
    except (OSError, ValueError):
        return gateway
    return gateway


_previous_tstp: Any = None
_catching = False


def _catch_stop() -> None:
    """Install :func:`_on_stop` for SIGTSTP (main thread only; elsewhere nothing)."""
    global _previous_tstp, _catching
    import signal

    if _catching:
        return
    try:
        _previous_tstp = signal.signal(signal.SIGTSTP, _on_stop)
        _catching = True
    except (ValueError, OSError, AttributeError):   # not the main thread, or no SIGTSTP
        pass


def _on_stop(signum: int, frame: Any) -> None:
    """SIGTSTP while the frame is up: leave the alternate screen and show the cursor, stop
    (the default action), and on ``fg`` enter it again (Textual draws the screen soon)."""
    import signal

    out = sys.stdout
    try:
        out.write(LEAVE)
        out.flush()
    except (OSError, ValueError):
        pass
    signal.signal(signal.SIGTSTP, signal.SIG_DFL)
    os.kill(os.getpid(), signal.SIGTSTP)   # stops here until SIGCONT
    signal.signal(signal.SIGTSTP, _on_stop)
    try:
        out.write(ENTER)
        out.flush()
    except (OSError, ValueError):
        pass


def handoff() -> None:
    """Put back the SIGTSTP handler :func:`draw_before_profile` replaced (called by
    :func:`leave`, when the app ended or never started; once Textual's driver is built it has
    replaced ours with its own anyway). Safe to call when none was set."""
    global _catching
    import signal

    if not _catching:
        return
    _catching = False
    try:
        signal.signal(signal.SIGTSTP, _previous_tstp if _previous_tstp is not None
                      else signal.SIG_DFL)
    except (ValueError, OSError):
        pass


def leave(out: TextIO | None = None, *, force: bool = False) -> None:
    """Give the shell its terminal back if a frame was drawn (or ``force``: the start-up was
    interrupted or crashed after Textual's driver may have begun): write :data:`RESTORE` and put
    back the terminal attributes :func:`guard_start_up` saved (Textual's raw mode undone).
    Called when the app ended without starting its driver or without stopping it (an import
    error, a crash, a Ctrl-C during Textual's start), so the shell is not left on a blank
    alternate screen with the cursor hidden. Harmless after Textual left the alternate screen.
    SIGINT is blocked while it writes: a second Ctrl-C cannot cut the restore short."""
    global _drawn
    handoff()
    if not (_drawn or force):
        return
    _drawn = False
    out = sys.stdout if out is None else out
    with _sigint_blocked():
        _restore_attrs()
        try:
            out.write(RESTORE)
            out.flush()
        except (OSError, ValueError):
            pass


# -- Ctrl-C during start-up -------------------------------------------------------------------
_saved_attrs: tuple[int, list[Any]] | None = None
_previous_int: Any = None
_guarding = False


class _sigint_blocked:
    """``with _sigint_blocked():`` SIGINT held pending (main thread; elsewhere a no-op)."""

    def __enter__(self) -> None:
        import signal

        self.old: Any = None
        try:
            self.old = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
        except (AttributeError, OSError, ValueError):
            self.old = None

    def __exit__(self, *exc: object) -> None:
        import signal

        if self.old is not None and signal.SIGINT not in self.old:
            try:
                signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
            except (AttributeError, OSError, ValueError):
                pass


def _restore_attrs() -> None:
    """Put back the terminal attributes saved by :func:`guard_start_up` (if any)."""
    if _saved_attrs is None:
        return
    import termios

    fd, attrs = _saved_attrs
    try:
        termios.tcsetattr(fd, termios.TCSANOW, attrs)
    except (termios.error, OSError, ValueError):
        pass


_interrupt_hook: Any = None
_interrupt_pending = False


def set_interrupt_hook(hook: Any) -> None:
    """``hook()`` (or ``None``: none) is what a SIGINT does while an event loop runs in the
    main thread (Textual's): the app passes one that asks it to exit with code 130, so the
    interrupt takes Textual's own exit path (its driver restores the terminal) instead of a
    :class:`KeyboardInterrupt` raised in the middle of one of its tasks (which ended the run
    too, but printed "Task exception was never retrieved" with a traceback)."""
    global _interrupt_hook, _interrupt_pending
    _interrupt_hook = hook
    if hook is not None:
        _interrupt_pending = False


def interrupt_pending() -> bool:
    """Whether a SIGINT came since :func:`guard_start_up` took SIGINT: while a hook was set
    (:func:`set_interrupt_hook`; the run it cut ends with code 130 even when it came while no
    event loop ran to take it), or before, when its :class:`KeyboardInterrupt` should have
    ended the start-up — if something swallowed it (a finaliser, a library's ``except``), the
    start-up still ends with 130 instead of running on as if no Ctrl-C had come."""
    return _interrupt_pending or bool(getattr(_on_interrupt, "fired", False))


def raise_if_interrupted() -> None:
    """Raise :class:`KeyboardInterrupt` if a SIGINT came (:func:`interrupt_pending`): the
    start-up's safe points call it between its phases (the frame, the profile, the early
    reading, Textual's import), where unwinding leaves no lock held."""
    if interrupt_pending():
        raise KeyboardInterrupt


def run_pending_interrupt() -> bool:
    """Called by the app once its event loop runs (its first mount): a SIGINT that came while
    the hook was set but before the loop ran (``asyncio.run`` still building it) is acted on
    now, by calling the hook. Returns whether one was pending."""
    hook = _interrupt_hook
    if interrupt_pending() and hook is not None:
        hook()
        return True
    return False


def _on_interrupt(signum: int, frame: Any) -> None:
    """SIGINT during start-up: the first asks the running app to exit (:func:`set_interrupt_hook`)
    or, with no app loop running yet, raises :class:`KeyboardInterrupt` (the start-up's
    ``except`` restores the terminal, exit 130); a second while that exit or clean-up runs
    restores the terminal from here and exits 130 at once (a clean-up that waits on a thread
    cannot keep the shell's screen)."""
    if getattr(_on_interrupt, "fired", False):
        _restore_attrs()
        try:
            os.write(sys.stdout.fileno(), RESTORE.encode())
        except (OSError, ValueError, AttributeError):
            pass
        os._exit(130)
    global _interrupt_pending
    _on_interrupt.fired = True  # type: ignore[attr-defined]
    hook = _interrupt_hook
    if hook is None:
        # never raised from here: a KeyboardInterrupt raised at an arbitrary bytecode of the
        # start-up's imports can land inside importlib's own weakref callback, which holds the
        # global import lock — CPython swallows it ("Exception ignored in … _get_module_lock
        # … cb") and the lock is never released, so the early-reading thread's import and the
        # main thread's deadlock (the hang in the 50-instant pty test). The start-up raises it
        # itself at its next safe point (:func:`raise_if_interrupted`).
        return
    # the app's run is under way (the hook is set from just before ``App.run`` until it has
    # returned): never a KeyboardInterrupt here. Raised while ``asyncio.run`` was still
    # building its loop, it left a half-made loop and an un-awaited coroutine (warnings and a
    # traceback on the shell's screen); raised inside a task, asyncio's clean-up could wait
    # on a task that swallowed it (a hang). Instead: the exit is pending — the running loop
    # calls the hook now, or the app calls it when its loop runs
    # (:func:`run_pending_interrupt`), and the run ends with code 130 (:func:`interrupt_pending`)
    _interrupt_pending = True
    # the loop running in this (the main) thread, or None; never an import here: the signal
    # may come while asyncio itself is being imported (a partly initialised module)
    running = getattr(sys.modules.get("asyncio.events"), "_get_running_loop", None)
    loop = running() if callable(running) else None
    if loop is not None and not loop.is_closed():
        try:
            loop.call_soon_threadsafe(hook)   # safe from a signal handler (the loop's self-pipe)
        except RuntimeError:   # the loop closed meanwhile: the run is ending anyway
            pass


def guard_start_up(stdin: Any = None) -> None:
    """Own SIGINT and remember the terminal's attributes from before the first frame until
    :func:`end_guard`, so a Ctrl-C at any instant of start-up restores the terminal.

    Why (issue #22): with Python's own handler in place, ``asyncio.run`` (under
    ``App.run``) turns the first SIGINT into a cancellation of Textual's main task; cut at the
    wrong instant of Textual's start, the app either went on running (a hang: it had
    swallowed the cancellation) or ended without its driver's restore, leaving the shell on
    the alternate screen with the cursor hidden, about 1 start in 10. With a handler of our
    own, asyncio installs none, and the interrupt is taken at safe points only (the module
    docstring); :func:`leave` restores the saved attributes and modes. A Ctrl-C held since
    the process began (:mod:`seat_console.core.interrupt`) is taken over: the first
    :func:`raise_if_interrupted` raises it. Main thread only; elsewhere nothing."""
    global _saved_attrs, _previous_int, _guarding
    import signal

    stdin = sys.stdin if stdin is None else stdin
    try:
        import termios

        fd = stdin.fileno()
        _saved_attrs = (fd, termios.tcgetattr(fd))
    except (ImportError, AttributeError, OSError, ValueError, Exception):  # noqa: BLE001
        _saved_attrs = None
    if _guarding:
        return
    fired = getattr(_on_interrupt, "fired", False)
    # reset before the swap: a SIGINT just after it is never erased
    _on_interrupt.fired = False  # type: ignore[attr-defined]
    try:
        _previous_int = signal.signal(signal.SIGINT, _on_interrupt)
        _guarding = True
    except (ValueError, OSError):   # not the main thread
        _on_interrupt.fired = fired  # type: ignore[attr-defined]
        return
    # a Ctrl-C the process held since its start (seat_console.core.interrupt), counted before
    # the swap above: ours now, raised at the start-up's first safe point
    if interrupt.take():
        _on_interrupt.fired = True  # type: ignore[attr-defined]


def end_guard() -> None:
    """Put back the SIGINT handler :func:`guard_start_up` replaced (safe when none was)."""
    global _guarding, _saved_attrs
    import signal

    _saved_attrs = None
    if not _guarding:
        return
    _guarding = False
    try:
        signal.signal(signal.SIGINT, _previous_int if _previous_int is not None
                      else signal.default_int_handler)
    except (ValueError, OSError):
        pass


__all__ = ["ENTER", "LEAVE", "RESTORE", "UTIL_TERM", "UTIL_TERM_SHORT", "WAIT_FOR_READING_S",
           "draw_before_profile", "end_guard",
           "guard_start_up", "handoff", "header_forms", "identity_text", "interrupt_pending",
           "is_terminal", "leave", "nvml_lines", "raise_if_interrupted", "raw_identity", "render",
           "run_pending_interrupt",
           "set_interrupt_hook", "wanted"]


THREAD_GRACE_S = 2.0
"""How long :func:`end_process` waits for the process's other threads to end (seconds)."""


def end_process(rc: int, grace_s: float = THREAD_GRACE_S) -> int:
    """The TUI's last act, after the terminal is restored: returns ``rc`` (the exit code) — or
    does not return, exiting the process with ``rc`` at once.

    Threads still alive when the interpreter finalizes (a reading blocked in a socket or a
    C call) are unwound by CPython with ``pthread_exit``; on the loaded 2-core CI machine
    glibc once aborted such an unwind ("FATAL: exception not rethrown", exit −6) in 50
    interrupted starts, after the terminal had been given back. So this waits up to
    ``grace_s`` for the other threads; if any is still alive and the console runs on a
    terminal (the real TUI, not a test calling it in-process), it runs the ``atexit`` handlers
    (a probe's stop-and-wait among them), flushes stdout and stderr and leaves with
    ``os._exit(rc)``: nothing is left for finalization to do (the journal commits each row).
    A thread marked ``never_ends`` (the hang-up watch, blocked in ``poll(2)`` for the life of
    the process) is not waited for: every quit waited the whole grace for it (the trial's
    "``q`` takes 2-3 s"), as for each source's idle read thread, which the app now retires
    before it ends (``Poller.retire``)."""
    import time

    end = time.monotonic() + grace_s
    for t in threading.enumerate():   # a thread that never ends by itself is not waited for
        if t is not threading.current_thread() and t.is_alive() \
                and not getattr(t, "never_ends", False):
            t.join(max(0.0, end - time.monotonic()))
    alive = [t for t in threading.enumerate()
             if t is not threading.current_thread() and t.is_alive()]
    if not alive or not is_terminal(sys.stdout):
        return rc
    import atexit

    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError, AttributeError):
            pass
    os._exit(rc)
