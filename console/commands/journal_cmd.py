"""``seat-console journal [--json] [--since WHEN] [--verify]``: the action journal.

Lists the journal's rows (UTC time, user@host, run, step, outcome) and, under a run's first row
(and wherever it changes), who did it: ``by alice (sudo from bob) ssh 203.0.113.5 53122
/dev/pts/3; typed 'seat-node'`` — login, ``SUDO_USER``, the SSH client, the tty and how the run
was confirmed (``operator`` in ``--json``; ``null`` on rows written before it was recorded).
``--since`` takes an ISO
8601 time (``2026-12-01T09:00Z``) or an age (``2h``, ``30m``). ``--verify`` recomputes the hash
chain and names every edited, deleted or reordered row (exit 1 when the chain is broken).

A row that does not read as a row (edited outside the console: a BLOB or NULL where text
belongs, ``inputs`` / ``facts`` that are not JSON objects) is not listed: it is named by its
``seq`` after the list (``--json``: ``bad_rows``), with the fix (``--verify``), and the listing
still exits 0.

Exit codes: 0 ok; 1 the chain is broken (``--verify``) or the journal cannot be read; 2 usage.
"""

from __future__ import annotations

import argparse
import sys
from datetime import UTC, datetime, timedelta
from typing import Any

from seat_console.core import jsonout
from seat_console.actions.hold import parse_ttl
from seat_console.actions.journal import Journal, JournalError
from seat_console.actions.who import describe as describe_operator
from seat_console.core.paths import journal_path
from seat_console.core.profile import LoadedProfile

PROG = "seat-console journal"


def register(sub: argparse._SubParsersAction) -> None:
    """Add the ``journal`` subcommand."""
    p = sub.add_parser("journal", help="list the action journal, or --verify its hash chain",
                       description="The append-only, hash-chained action journal. Exit 0 ok, "
                                   "1 chain broken / unreadable, 2 usage.")
    p.add_argument("--json", action="store_true", help="print rows (or the report) as JSON")
    p.add_argument("--since", metavar="WHEN", help="only rows at/after WHEN: ISO 8601 UTC time "
                                                   "or an age such as 2h, 30m")
    p.add_argument("--verify", action="store_true", help="check the hash chain")
    p.set_defaults(func=run, needs_profile=False)


def parse_since(text: str, now: datetime | None = None) -> datetime:
    """``--since`` → aware UTC time. Raises :class:`ValueError` naming the text."""
    try:
        return (now or datetime.now(UTC)) - timedelta(seconds=parse_ttl(text))
    except ValueError:
        pass
    try:
        t = datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    except ValueError:
        raise ValueError(f"--since {text!r}: give an ISO 8601 time (2026-12-01T09:00Z) or an "
                         "age (2h, 30m)") from None
    return t.replace(tzinfo=UTC) if t.tzinfo is None else t.astimezone(UTC)


def run(args: argparse.Namespace, loaded: LoadedProfile | None) -> int:
    """List or verify."""
    try:
        since = parse_since(args.since) if args.since else None
    except ValueError as exc:
        print(f"{PROG}: {exc}", file=sys.stderr)
        return 2
    path = journal_path()
    if not path.exists():
        if args.json:
            print(jsonout.dumps({"path": str(path), "rows": [], "ok": True}))
        else:
            print(f"no journal yet at {path}")
        return 0
    try:
        j = Journal(path)
    except JournalError as exc:
        print(f"{PROG}: {exc}", file=sys.stderr)
        return 1
    try:
        if args.verify:
            rep = j.verify()
            if args.json:
                print(jsonout.dumps({"path": str(path), "ok": rep.ok, "rows": rep.rows,
                                     "problems": list(rep.problems),
                                     "bad_rows": list(rep.bad_seqs)}, indent=2))
            elif rep.ok:
                print(f"journal {path}: {rep.rows} rows, hash chain intact")
            else:
                print(f"journal {path}: hash chain BROKEN ({len(rep.problems)} problem(s)):")
                for p in rep.problems:
                    print(f"  {p}")
            return 0 if rep.ok else 1
        rows = j.entries(since=since)
        bad = j.skipped
        if args.json:
            print(jsonout.dumps({"path": str(path), "rows": [r.to_json() for r in rows],
                                 "bad_rows": [{"seq": b.seq if isinstance(b.seq, int) else
                                               repr(b.seq), "problem": b.problem} for b in bad]},
                                indent=2, default=str))
            return 0
        shown: dict[str, Any] = {}
        for r in rows:
            what = r.step or r.runbook
            print(f"#{r.seq:<5} {r.at:%Y-%m-%d %H:%M:%S}Z {r.user}@{r.host} {r.run_id} "
                  f"{r.kind:<9} {what}: {r.outcome}")
            if r.operator is not None and shown.get(r.run_id) != r.operator:
                print(f"       by {describe_operator(r.operator)}")   # once a run, and on change
                shown[r.run_id] = r.operator
        if not rows:
            print(f"no rows in {path}"
                  + (f" since {since:%Y-%m-%d %H:%M:%SZ}" if since else ""))
        for b in bad:
            print(f"UNREADABLE {b.text()}: not listed")
        if bad:
            print(f"{len(bad)} row(s) not listed: edited outside the console? "
                  f"`{PROG} --verify` names what changed")
        return 0
    except JournalError as exc:
        print(f"{PROG}: {exc}", file=sys.stderr)
        return 1
    finally:
        j.close()
