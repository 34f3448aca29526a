"""``seat-console report RUN… [--md|--json] [--out FILE]``; ``seat-console report --verify FILE``.

Builds the evidence report (``seat_console.evidence.report``) from probe runs, comparison legs
or one comparison (by directory, or by ID under the data dir), prints it as Markdown (default)
or JSON, and optionally writes it to ``--out``. ``--verify FILE`` re-hashes every raw file the
report at FILE recorded, then re-derives the report from them (summaries from the raw requests,
the report at its own generation time) and names every difference from FILE's text.

Exit codes: 0 the report was produced / every file unchanged and the report re-derived
identically; 1 a run cannot be read, or ``--verify`` found a file changed or missing, a summary
that disagrees with its raw requests, or a difference in the report's text; 2 usage error.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from seat_console.core import jsonout

EXIT_OK, EXIT_ERROR, EXIT_USAGE = 0, 1, 2


def register(sub: argparse._SubParsersAction) -> None:
    """Add the ``report`` subcommand."""
    p = sub.add_parser("report", help="evidence report from probe runs or a bracketed "
                                      "comparison (claims, populations, SHA-256 of raw files)",
                       description=__doc__.split("\n\n")[0])
    p.add_argument("runs", nargs="*", metavar="RUN",
                   help="a run or comparison ID (see `seat-console runs`) or its directory")
    fmt = p.add_mutually_exclusive_group()
    fmt.add_argument("--md", action="store_true", help="Markdown (the default)")
    fmt.add_argument("--json", action="store_true", help="JSON")
    p.add_argument("--out", metavar="FILE", help="also write the report to FILE")
    p.add_argument("--verify", metavar="FILE",
                   help="re-check the SHA-256 of every raw file the report FILE recorded")
    p.add_argument("--data-dir", metavar="DIR",
                   help="where run IDs are looked up (default: $SEAT_CONSOLE_DATA_DIR or the "
                        "XDG data dir)")
    p.set_defaults(func=run, needs_profile=False)


def run(args: argparse.Namespace, _loaded: Any) -> int:
    """Build / print the report, or verify one; returns the exit code."""
    from seat_console.evidence import report as rp
    from seat_console.evidence.runs import RunError

    if args.verify:
        if args.runs:
            print("seat-console report: --verify FILE takes no RUN arguments", file=sys.stderr)
            return EXIT_USAGE
        src = Path(args.verify)
        try:
            text = src.read_text("utf-8")
            recorded = rp.recorded_hashes(text, str(src))
        except OSError as exc:
            print(f"seat-console report: {src}: cannot read ({exc.strerror})", file=sys.stderr)
            return EXIT_ERROR
        except UnicodeDecodeError as exc:   # an edited or foreign file (issue 31)
            print(f"seat-console report: {src}: not UTF-8 text (byte {exc.start}): not a report "
                  "this console wrote; regenerate it with `seat-console report`",
                  file=sys.stderr)
            return EXIT_ERROR
        except RunError as exc:
            print(f"seat-console report: {exc}", file=sys.stderr)
            return EXIT_ERROR
        rows = rp.verify(recorded)
        bad = [r for r in rows if not r.ok]
        diffs = rp.rederive(text, str(src))
        if args.json:
            print(jsonout.dumps({"report": str(src), "ok": not bad and not diffs,
                                 "files": [r.as_dict() for r in rows],
                                 "rederived_differences": diffs}, indent=2))
        else:
            for r in rows:
                print(f"{'ok     ' if r.ok else 'FAILED '} {r.path}"
                      + (f": {r.problem} (recorded {r.recorded[:12]}…, now "
                         f"{(r.actual or 'unreadable')[:12]}…)" if not r.ok else ""))
            print(f"{len(rows) - len(bad)}/{len(rows)} files unchanged"
                  + ("" if not bad else f"; {len(bad)} FAILED: the report no longer describes "
                                        f"these files"))
            for d in diffs:
                print(f"DIFFERS {d}")
            print("re-derived from the raw files: "
                  + ("identical to the report" if not diffs else
                     f"{len(diffs)} difference(s) FAILED: the report is not what its raw files "
                     f"give"))
        return EXIT_ERROR if bad or diffs else EXIT_OK
    if not args.runs:
        print("seat-console report: give at least one RUN (or --verify FILE)", file=sys.stderr)
        return EXIT_USAGE
    try:
        inputs = rp.load_inputs(args.runs, Path(args.data_dir) if args.data_dir else None)
    except RunError as exc:
        print(f"seat-console report: {exc}", file=sys.stderr)
        return EXIT_ERROR
    rep = rp.build_report(inputs)
    for c in rep["consistency"]:
        print(f"seat-console report: WARNING: {c['run']} ({c['path']}): {c['problem']} — the "
              f"summary was edited or not written from its raw requests; no claim rests on it",
              file=sys.stderr)
    text = jsonout.dumps(rep, indent=2) + "\n" if args.json else rp.render_markdown(rep)
    if args.out:
        try:
            Path(args.out).write_text(text, "utf-8")
        except OSError as exc:
            print(f"seat-console report: --out {args.out}: cannot write ({exc.strerror})",
                  file=sys.stderr)
            return EXIT_ERROR
    sys.stdout.write(text)
    return EXIT_OK
