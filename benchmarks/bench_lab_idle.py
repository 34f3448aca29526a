#!/usr/bin/env python3
"""The console with every source live (the lab) beside the floor, in one run: idle CPU at 1 Hz,
the full screen after ``exec`` and RSS, at 120×40 (issue 33).

Sessions (each a pty, :func:`bench_vs_nvitop.session`: drained, CPU of the process and its
children over ``--seconds`` after ``--warmup``, RSS at the end and its maximum):

* A — ``python -m seat_console --profile PROFILE --interval 1`` on the lab's profile (every
  source live: timers and leases through docker exec into the node's systemd, Alertmanager,
  docker, vLLM's ``/health`` and ``/metrics``, the journal; NVML is absent on a CPU machine, so
  the GPU panel reads "unavailable" once per back-off);
* B — ``benchmarks/floor_app.py``: a minimal Textual app redrawing one line a second (Textual's
  own floor);
* D — ``benchmarks/stack_floor_app.py``: the floor of the console's stack (its libraries and
  the smallest form of each panel's first read, on the same profile);
* C (``--baseline-src DIR``) — A's command with the code in DIR first on ``PYTHONPATH`` (a
  ``git archive`` of the code before a change, with a ``seat_console`` link to its
  ``console/``): before and after in one run.

``--python PATH`` runs A, B and C with that interpreter (default: the one running this script):
a virtual environment holding only the product and its dependencies (the README's first
command, ``pip install .``; add ``pyte`` only if the script itself runs there) measures the
console as a node installs it — a development environment's extra packages change start-up
(httpcore imports ``trio`` when it is installed: ~80 ms of CPU; a ``.pth`` that imports
``certifi`` at every start), not what the product does.

Before the first session A's and C's trees are compiled (:func:`compile_trees`), as a node
has them; ``--no-compile`` measures without (an environment with ``PYTHONDONTWRITEBYTECODE``
set then compiles every module of the console at every start).

Run in the order ``--order`` (default ABBA) so drift of the shared machine falls on both. The
**full screen** is the first output on which every panel of the main screen has its first
reading (as many ``· updated`` / ``· checked`` titles as panels, :data:`PANELS_N`) and the
status line names the engine's state; for the floor, its line ``floor ready``. The load
average (1 min) before and after each session is recorded: CPU shares on a loaded machine are
noisy, read them pairwise; so is the wall time to each screen, and the process's CPU seconds
at each screen are recorded beside it (``cpu_s_at_textual_screen``, ``cpu_s_at_full_screen``).
``--starts N`` then runs N more rounds of start-up-only sessions (each program of ``--order``
once a round, no idle window) for more start-up samples. ``--profile-s S`` then runs the console once more under ``py-spy
record`` (``bench_vs_nvitop.profile``) and reports where its CPU goes.

Usage::

    python benchmarks/bench_lab_idle.py --profile /work/main/.lab/profile.toml --json out.json

Not a test: nothing is asserted.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import time  # noqa: E402

import psutil  # noqa: E402
import pyte  # noqa: E402
from bench_vs_nvitop import _cpu_s, machine, profile  # noqa: E402
from ptyrun import PtyRun  # noqa: E402

PANELS_N = 8
"""Panels of the main screen (``seat_console.tui.panels.PANELS``)."""

READ_TITLE = re.compile(r"· (updated|checked) ")
"""A panel title once its source has a reading."""


def seat_marks(screen: str) -> dict[str, bool]:
    """What is on the console's screen (text of a pyte screen): ``textual`` — the Textual
    screen is up (its GPU panel title); ``full`` — every panel has its first reading
    (:data:`PANELS_N` read titles) and the status line names the engine's state."""
    return {"textual": "GPUs (NVML)" in screen,
            "full": len(READ_TITLE.findall(screen)) >= PANELS_N
            and re.search(r"engine (UP|DOWN|PAUSED|ASLEEP)", screen) is not None}


def floor_marks(screen: str) -> dict[str, bool]:
    """The floor app's screen: up and full once its line is drawn."""
    up = "floor ready" in screen
    return {"textual": up, "full": up}


def session(cmd: str, marks, *, cols: int, rows: int, seconds: float, warmup: float,
            env: dict[str, str | None] | None = None, start_only: bool = False) -> dict:
    """Run ``cmd`` in a ``cols``×``rows`` pty; the screen is emulated (pyte) until ``marks``
    says it is full: seconds from ``exec`` to the first byte, the Textual screen and the full
    screen, and the process's CPU seconds at each screen (user + system, with its children:
    on a loaded machine the wall times move with the load, the CPU much less); then CPU,
    terminal bytes, RSS over ``seconds``. ``start_only``: return once the screen is full (or
    after ``warmup`` seconds), without the idle window."""
    screen = pyte.Screen(cols, rows)
    stream = pyte.ByteStream(screen)
    t: dict[str, float | None] = {"first_byte": None, "textual": None, "full": None}
    cpu: dict[str, float | None] = {"textual": None, "full": None}
    procs: list[psutil.Process] = []

    def on_chunk(chunk: bytes, now: float) -> None:
        if t["first_byte"] is None:
            t["first_byte"] = now
        if t["full"] is not None:
            return
        stream.feed(chunk)
        for k, v in marks("\n".join(screen.display)).items():
            if v and t[k] is None:   # the CPU first: a start-only session ends once t is full
                cpu[k] = _cpu_or_none(procs)
                t[k] = now

    out: dict = {"command": cmd, "size": f"{cols}x{rows}"}
    with PtyRun(shlex.split(cmd), cols=cols, rows=rows, env={"NO_COLOR": None, **(env or {})},
                on_chunk=on_chunk) as run:
        proc = psutil.Process(run.pid)
        procs.append(proc)
        if start_only:
            end = time.monotonic() + warmup
            while t["full"] is None and time.monotonic() < end:
                time.sleep(0.02)
            return {**out, "first_byte_s": t["first_byte"], "textual_screen_s": t["textual"],
                    "full_screen_s": t["full"], "cpu_s_at_textual_screen": cpu["textual"],
                    "cpu_s_at_full_screen": cpu["full"]}
        time.sleep(warmup)
        if run.child.poll() is not None:
            return {**out, "error": f"exited during warm-up (rc {run.child.returncode})",
                    "screen": "\n".join(screen.display)}
        c0, b0, t0 = _cpu_s(proc), run.bytes, time.monotonic()
        rss_max = 0
        end = t0 + seconds
        while time.monotonic() < end:
            rss_max = max(rss_max, proc.memory_info().rss)
            time.sleep(min(1.0, max(0.0, end - time.monotonic())))
        c1, b1, t1 = _cpu_s(proc), run.bytes, time.monotonic()
        rss = proc.memory_info().rss
        threads = proc.num_threads()
    wall = t1 - t0
    return {**out, "cpu_s": c1 - c0, "wall_s": wall,
            "cpu_pct_of_one_core": 100 * (c1 - c0) / wall,
            "tty_bytes_per_s": (b1 - b0) / wall, "rss_mib": rss / 2**20,
            "rss_max_mib": max(rss_max, rss) / 2**20, "threads": threads,
            "first_byte_s": t["first_byte"], "textual_screen_s": t["textual"],
            "full_screen_s": t["full"], "cpu_s_at_textual_screen": cpu["textual"],
            "cpu_s_at_full_screen": cpu["full"]}


def _cpu_or_none(procs: list[psutil.Process]) -> float | None:
    """CPU seconds (user + system, the process and its children) of the session's process so
    far, or ``None`` before it is known or once it is gone. Children it has already reaped
    count too (``children_user`` + ``children_system``): the console's first-readings child
    (``seat_console.snapshot.forked``) has often ended by the full screen."""
    try:
        if not procs:
            return None
        t = procs[0].cpu_times()
        return _cpu_s(procs[0]) + t.children_user + t.children_system
    except (psutil.Error, IndexError):
        return None


def engine_health(url: str | None) -> int | None:
    """``GET <url>/health``'s status (``None``: no answer, or no ``url``): whether the lab's
    engine was up around a session (a lab shared with tests is swapped now and then)."""
    if not url:
        return None
    import urllib.error
    import urllib.request

    try:
        with urllib.request.urlopen(f"{url.rstrip('/')}/health", timeout=2) as r:
            return r.status
    except urllib.error.HTTPError as exc:
        return exc.code
    except OSError:
        return None


def _code() -> str:
    """The commit measured as A (``+`` when the tree has changes)."""
    import subprocess

    root = Path(__file__).resolve().parents[1]
    head = subprocess.run(["git", "-C", str(root), "rev-parse", "--short", "HEAD"],
                          capture_output=True, text=True).stdout.strip()
    dirty = subprocess.run(["git", "-C", str(root), "status", "--porcelain", "--", "console",
                            "widgets", "actions"], capture_output=True, text=True).stdout.strip()
    return head + ("+" if dirty else "")


def compile_trees(python: str, baseline_src: str | None) -> list[str]:
    """Compile the console's trees with ``python`` before any session (``python -m compileall
    -q``), as a node has them: pip compiles a wheel's modules at install, and an editable
    install's first run writes its bytecode cache. Without this, an environment with
    ``PYTHONDONTWRITEBYTECODE`` set (this project's development machines have it) compiled
    every module of the console from source at every start: ~0.2–0.3 s more to the full
    screen on the lab (docs/benchmarks.md, r19). A: the repository's ``console``, ``widgets``
    and ``actions`` (the last two are linked into the first, and compileall does not follow a
    link to a folder); C: the real folder behind ``baseline_src/seat_console`` and its
    siblings. Returns the folders compiled; raises ``CalledProcessError`` when compileall
    fails."""
    root = Path(__file__).resolve().parents[1]
    trees = [str(root / d) for d in ("console", "widgets", "actions")]
    if baseline_src:
        trees.append(str(Path(baseline_src, "seat_console").resolve().parent))
    subprocess.run([python, "-m", "compileall", "-q", "-j", "0", *trees], check=True,
                   stdout=subprocess.DEVNULL)
    return trees


def main(argv: list[str] | None = None) -> int:
    """Run the sessions, print a table and write the JSON."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--profile", required=True, help="the lab's profile.toml")
    ap.add_argument("--engine", metavar="URL",
                    help="the seat's endpoint: its /health is recorded before and after each "
                         "session")
    ap.add_argument("--seconds", type=float, default=60.0)
    ap.add_argument("--warmup", type=float, default=8.0)
    ap.add_argument("--size", default="120x40")
    ap.add_argument("--order", default="ABBA",
                    help="A = seat-console, B = the floor app, C = the baseline code, D = the "
                         "stack's floor (benchmarks/stack_floor_app.py: the console's "
                         "libraries and one minimal read per panel)")
    ap.add_argument("--baseline-src", metavar="DIR",
                    help="C: the console from DIR (a folder holding seat_console/, e.g. a "
                         "git archive of the code before a change) on PYTHONPATH")
    ap.add_argument("--starts", type=int, default=0, metavar="N",
                    help="then N rounds of start-up-only sessions, one per program of --order "
                         "in its order (more start-up samples; no idle window)")
    ap.add_argument("--profile-s", type=float, default=0.0, metavar="S",
                    help="then py-spy the console for S seconds")
    ap.add_argument("--python", metavar="PATH", default=sys.executable,
                    help="the interpreter that runs A, B and C (default: this one): a venv "
                         "with only the product installed measures what a node runs")
    ap.add_argument("--no-compile", action="store_true",
                    help="measure without compiling A's and C's trees first (each start then "
                         "compiles whatever has no bytecode cache: no node runs that way)")
    ap.add_argument("--json", metavar="FILE")
    args = ap.parse_args(argv)
    cols, rows = (int(x) for x in args.size.lower().split("x"))
    compiled = [] if args.no_compile else compile_trees(args.python, args.baseline_src)
    py = shlex.quote(args.python)
    seat_cmd = f"{py} -m seat_console --profile {shlex.quote(args.profile)} --interval 1"
    floor_cmd = f"{py} {shlex.quote(str(Path(__file__).resolve().parent / 'floor_app.py'))}"
    stack_cmd = (f"{py} {shlex.quote(str(Path(__file__).resolve().parent / 'stack_floor_app.py'))}"
                 f" {shlex.quote(args.profile)}")
    progs = {"A": ("seat-console", seat_cmd, seat_marks, None),
             "D": ("stack-floor", stack_cmd, seat_marks, None),
             "B": ("floor", floor_cmd, floor_marks, None),
             "C": ("baseline", seat_cmd, seat_marks, {"PYTHONPATH": args.baseline_src})}
    runs = []
    for letter in args.order:
        name, cmd, marks, env = progs[letter]
        load0, up0 = os.getloadavg()[0], engine_health(args.engine)
        res = session(cmd, marks, cols=cols, rows=rows, seconds=args.seconds,
                      warmup=args.warmup, env=env)
        res.update(program=name, load1_before=load0, load1_after=os.getloadavg()[0],
                   engine_health_before=up0, engine_health_after=engine_health(args.engine),
                   at_utc=datetime.now(UTC).isoformat(timespec="seconds"))
        runs.append(res)
        print(json.dumps({k: (round(v, 3) if isinstance(v, float) else v)
                          for k, v in res.items() if k != "screen"}), flush=True)
    letters = list(dict.fromkeys(args.order))
    for _ in range(args.starts):
        for letter in letters:
            name, cmd, marks, env = progs[letter]
            load0 = os.getloadavg()[0]
            res = session(cmd, marks, cols=cols, rows=rows, seconds=0, warmup=args.warmup,
                          env=env, start_only=True)
            res.update(program=name, start_only=True, load1_before=load0,
                       at_utc=datetime.now(UTC).isoformat(timespec="seconds"))
            runs.append(res)
            print(json.dumps({k: (round(v, 3) if isinstance(v, float) else v)
                              for k, v in res.items() if k != "command"}), flush=True)
    keys = ("cpu_pct_of_one_core", "tty_bytes_per_s", "rss_mib", "rss_max_mib",
            "textual_screen_s", "full_screen_s", "cpu_s_at_textual_screen",
            "cpu_s_at_full_screen")
    means: dict[str, dict] = {}
    names = [n for n in ("seat-console", "baseline", "stack-floor", "floor") if any(r["program"] == n for r in runs)]
    for name in names:
        ok = [r for r in runs if r["program"] == name and "error" not in r]
        means[name] = {}
        for k in keys:
            vals = [r[k] for r in ok if r.get(k) is not None]
            means[name][k] = sum(vals) / len(vals) if vals else None
    result = {"benchmark": "seat-console on the lab (every source live) vs a minimal Textual "
                           "app, idle, 1 Hz, pty", "date_utc": datetime.now(UTC).isoformat(
                               timespec="seconds"),
              "order": args.order, "seconds": args.seconds, "warmup": args.warmup,
              "code": _code(), "baseline_src": args.baseline_src, "python": args.python,
              "compiled_before": compiled,
              "pythondontwritebytecode": os.environ.get("PYTHONDONTWRITEBYTECODE"),
              "machine": machine(), "runs": runs, "means": means}
    if args.profile_s > 0:
        out_dir = Path(args.json).parent if args.json else Path(".")
        result["pyspy"] = profile(seat_cmd, args.profile_s, cols, rows, out_dir)
    print(f"\n{'':22}" + "".join(f"{n:>14}" for n in names))
    for k in keys:
        print(f"{k:22}" + "".join("           n/a" if means[n][k] is None
                                  else f"{means[n][k]:14.3f}" for n in names))
    if "pyspy" in result:
        p = result["pyspy"]
        print("\npy-spy:", p.get("error") or f"{p['samples']} samples")
        for fn, pc in p.get("inclusive_pct", [])[:25]:
            print(f"  {pc:5.1f} %  {fn}")
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
