"""``seat-console report RUN… [--md|--json] [--out FILE]``; ``seat-console report --verify FILE``.

Builds the evidence report (``seat_console.evidence.report``) from probe runs, comparison legs
or one comparison (by directory, or by ID under the data dir), prints it as Markdown (default)
or JSON, and optionally writes it to ``--out``. ``--verify FILE`` re-hashes every raw file the
report at FILE recorded, then re-derives the report from them (summaries from the raw requests,
the report at its own generation time) and names every difference from FILE's text.

``--verify`` says which format version the report is (:data:`~seat_console.evidence.report.
REPORT_FORMAT`: JSON ``schema``, the Markdown "Report format" line; a Markdown report without
one is format 1). A report of the format this console writes must re-derive to the letter; one
of another format (written before a format change) is verified as far as it can be — its raw
files re-hashed, each summary checked against its raw requests — and its text differences are
listed as a format mismatch, not called an edit.

Exit codes: 0 the report was produced / every file unchanged and the report re-derived
identically; 1 a run cannot be read, or ``--verify`` found a file changed or missing, a summary
that disagrees with its raw requests, or a difference in the text of a report of this
console's format; 2 usage error; 3 (``--verify``) every file unchanged, but the report is of
another format version and its text differs from the re-derived one (listed, not judged:
regenerate it to verify its claims).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from seat_console.core import jsonout

EXIT_OK, EXIT_ERROR, EXIT_USAGE = 0, 1, 2
EXIT_FORMAT = 3
"""``--verify``: every raw file unchanged and no summary disagrees with its raw requests, but
the report was written in another format version (an older console) and its text differs
from the one this console re-derives: the differences are listed, not judged."""


EXITS = ("exit codes: 0 produced (or, --verify, every file unchanged and the report re-derived"
         " identically); 1 a run cannot be read, or --verify found a change; 2 usage; 3 "
         "(--verify) files unchanged, the report of another format version")
"""The exit codes, as ``--help`` ends (``epilog``)."""


def register(sub: argparse._SubParsersAction) -> None:
    """Add the ``report`` subcommand."""
    p = sub.add_parser("report", help="evidence report from probe runs or a bracketed "
                                      "comparison (claims, populations, SHA-256 of raw files)",
                       description=__doc__.split("\n\n")[0])
    p.epilog = EXITS
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


def _verify(text: str, src: Path, recorded: dict[str, str], json_mode: bool) -> int:
    """``--verify``: re-hash the raw files, re-derive the report, print, return the exit code
    (module docstring): a report of another format whose text differs is
    :data:`EXIT_FORMAT`, its differences listed but not judged."""
    from seat_console.evidence import report as rp

    rows = rp.verify(recorded)
    bad = [r for r in rows if not r.ok]
    problems, diffs = rp.rederive_parts(text, str(src))
    fmt = rp.report_format(text, str(src))
    other = fmt != rp.REPORT_FORMAT and bool(diffs)
    code = EXIT_ERROR if bad or problems or (diffs and not other) else \
        EXIT_FORMAT if other else EXIT_OK
    fmt_words = (f"the report is format {fmt if fmt is not None else 'unknown'} "
                 f"({'seat-console.evidence-report/' + str(fmt) if fmt else 'no format named'})"
                 f"; this console writes format {rp.REPORT_FORMAT}")
    if json_mode:
        print(jsonout.dumps({
            "report": str(src), "ok": code == EXIT_OK,
            "outcome": {EXIT_OK: "verified", EXIT_FORMAT: "format mismatch"}.get(
                code, "failed"),
            "format": fmt, "current_format": rp.REPORT_FORMAT,
            "files": [r.as_dict() for r in rows], "problems": problems,
            "rederived_differences": diffs}, indent=2))
        return code
    print(f"format: {fmt_words}" if fmt != rp.REPORT_FORMAT else
          f"format: {fmt} (seat-console.evidence-report/{fmt}), the one this console writes")
    for r in rows:
        print(f"{'ok     ' if r.ok else 'FAILED '} {r.path}"
              + (f": {r.problem} (recorded {r.recorded[:12]}…, now "
                 f"{(r.actual or 'unreadable')[:12]}…)" if not r.ok else ""))
    print(f"{len(rows) - len(bad)}/{len(rows)} files unchanged"
          + ("" if not bad else f"; {len(bad)} FAILED: the report no longer describes "
                                f"these files"))
    for d in problems:
        print(f"DIFFERS {d}")
    for d in diffs:
        print(f"{'DIFFERS (format)' if other else 'DIFFERS'} {d}")
    if other:
        print(f"re-derived from the raw files: {len(diffs)} difference(s) NOT JUDGED — "
              f"{fmt_words}, so its text cannot be re-derived to the letter (the difference "
              "may come from the format change or from an edit); what it rests on — the raw "
              "files above — is what this verify checks. Regenerate it (`seat-console report "
              "RUN…`) to verify its claims")
    else:
        print("re-derived from the raw files: "
              + ("identical to the report" if not diffs and not problems else
                 f"{len(diffs) + len(problems)} difference(s) FAILED: the report is not what "
                 "its raw files give"))
    return code


def _fail(args: argparse.Namespace, message: str, code: int) -> int:
    """The error on stderr, and with ``--json`` as a JSON document on stdout too (the trial:
    ``report --json`` without a RUN printed plain text only)."""
    from seat_console.commands.action_common import fail

    return fail("seat-console report", message, code, bool(getattr(args, "json", False)))


def run(args: argparse.Namespace, _loaded: Any) -> int:
    """Build / print the report, or verify one; returns the exit code."""
    from seat_console.evidence import report as rp
    from seat_console.evidence.runs import RunError

    if args.verify:
        if args.runs:
            return _fail(args, "--verify FILE takes no RUN arguments", EXIT_USAGE)
        src = Path(args.verify)
        try:
            text = src.read_text("utf-8")
            recorded = rp.recorded_hashes(text, str(src))
        except OSError as exc:
            return _fail(args, f"{src}: cannot read ({exc.strerror})", EXIT_ERROR)
        except UnicodeDecodeError as exc:   # an edited or foreign file (issue 31)
            return _fail(args, f"{src}: not UTF-8 text (byte {exc.start}): not a report "
                               "this console wrote; regenerate it with `seat-console report`",
                         EXIT_ERROR)
        except RunError as exc:
            return _fail(args, f"{exc}", EXIT_ERROR)
        return _verify(text, src, recorded, args.json)
    if not args.runs:
        return _fail(args, "give at least one RUN (or --verify FILE)", EXIT_USAGE)
    try:
        inputs = rp.load_inputs(args.runs, Path(args.data_dir) if args.data_dir else None)
    except RunError as exc:
        return _fail(args, f"{exc}", EXIT_ERROR)
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
            return _fail(args, f"--out {args.out}: cannot write ({exc.strerror})", EXIT_ERROR)
    sys.stdout.write(text)
    return EXIT_OK
