"""Property tests: the run store, run and leg files, ``report --verify``, the journal on a
corrupted database, the startup-log scan on hostile lines (issue #22).

The same oracle as the other ``test_props_*`` suites: only the documented error types, each
naming its input (the file); no hang (the ``ci`` profile's 1 s deadline per example); one bad
item never blanks the whole list (one edited run is listed as unreadable, the others read); and
for a successful read, what was read is what the file says.
"""

from __future__ import annotations

import json
import random
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from seat_console.actions.journal import Journal, JournalError
from seat_console.evidence.report import recorded_hashes, verify
from seat_console.evidence.runs import FileLedger, RunError, load_probe_run
from seat_console.probe.store import StoreError, list_runs, read_summary
from seat_console.core.profile import DEFAULT_FAILURE_PATTERNS
from seat_console.sources.startup_log import parse_startup_log, scan_failures

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=12),
    lambda kids: st.lists(kids, max_size=4) | st.dictionaries(st.text(max_size=10), kids,
                                                              max_size=4),
    max_leaves=16)

summary_like = st.fixed_dictionaries({
    "status": st.one_of(st.sampled_from(["complete", "running", "failed"]), json_values),
    "identity": st.one_of(st.fixed_dictionaries({"endpoint": json_values,
                                                 "served_model": json_values}), json_values),
    "phases": st.one_of(st.lists(st.one_of(st.fixed_dictionaries(
        {"name": json_values, "state": json_values, "stats": json_values}), json_values),
        max_size=3), json_values),
    "disruptions": json_values, "started_at": json_values})

file_bytes = st.one_of(
    st.binary(max_size=300),
    json_values.map(lambda v: json.dumps(v).encode()),
    summary_like.map(lambda v: json.dumps(v).encode()),
    st.integers(1, 5000).map(lambda n: b"[" * n + b"]" * n),
    st.sampled_from([b"", b"\xff\xfe", b'{"status": "complete"', b"[NaN]"]))

_tmp = settings(suppress_health_check=[HealthCheck.function_scoped_fixture])


@given(st.lists(file_bytes, min_size=1, max_size=4))
def test_one_edited_summary_never_blanks_the_run_list(bodies):
    good = {"status": "complete", "started_at": "2026-12-01T12:00:00Z",
            "phases": [{"name": "steady", "state": "complete"}], "disruptions": []}
    with tempfile.TemporaryDirectory() as d:
        root = Path(d)
        (root / "run-good").mkdir()
        (root / "run-good" / "summary.json").write_text(json.dumps(good))
        for i, body in enumerate(bodies):
            (root / f"run-{i}").mkdir()
            (root / f"run-{i}" / "summary.json").write_bytes(body)
        rows = {r["run_id"]: r for r in list_runs(root)}
        assert len(rows) == len(bodies) + 1
        assert rows["run-good"]["status"] == "complete"
        assert rows["run-good"]["phases"] == [{"name": "steady", "state": "complete",
                                               "headline": None, "goodput": None}]
        for i, body in enumerate(bodies):
            r = rows[f"run-{i}"]
            try:
                s = read_summary(root / f"run-{i}")
            except StoreError as exc:
                assert f"run-{i}/summary.json" in str(exc)
                assert r["status"] == "unreadable" and r["problem"] == str(exc)
                continue
            assert isinstance(s, dict)
            assert isinstance(r["phases"], list) and r["disruptions"] >= 0
            if isinstance(s.get("status"), str) and s["status"] != "running":
                assert r["status"] == s["status"]   # what the file says


@given(file_bytes, st.one_of(st.none(), st.binary(max_size=200)))
def test_a_probe_run_reads_or_names_its_file(summary, requests):
    with tempfile.TemporaryDirectory() as d:
        run = Path(d) / "run-x"
        run.mkdir()
        (run / "summary.json").write_bytes(summary)
        if requests is not None:
            (run / "requests.jsonl").write_bytes(requests)
        ledger = FileLedger()
        try:
            r = load_probe_run(run, ledger)
        except RunError as exc:
            assert str(run) in str(exc)
            return
        assert str((run / "summary.json").resolve()) in ledger.files
        assert isinstance(r.status, str)


@given(st.one_of(st.text(max_size=400), json_values.map(json.dumps),
                 st.integers(1, 5000).map(lambda n: "[" * n + "]" * n),
                 st.dictionaries(st.text(max_size=30), st.text(alphabet="0123456789abcdef",
                                                               min_size=64, max_size=64),
                                 max_size=3).map(lambda f: json.dumps({"files": f}))))
def test_report_verify_on_an_edited_or_hostile_report(text):
    try:
        rec = recorded_hashes(text, "report.md")
    except RunError as exc:
        assert str(exc).startswith("report.md: ")
        return
    rows = verify(rec)   # paths that are not files (NUL, surrogates, too long) are rows too
    assert [r.path for r in rows] == list(rec)
    for r in rows:
        assert r.ok is False or r.actual == r.recorded
        assert (r.actual is None) == (r.problem is not None and "changed" not in r.problem)


@given(st.one_of(st.text(max_size=400), json_values.map(json.dumps),
                 st.integers(1, 5000).map(lambda n: '{"schema": ' + "[" * n + "]" * n + "}"),
                 st.text(max_size=40).map(lambda v: json.dumps({"schema": v})),
                 st.integers(-10, 10 ** 30).map(
                     lambda n: f"# Seat evidence report\n\nReport format "
                               f"seat-console.evidence-report/{n}.\n")))
def test_report_format_of_any_text_is_a_version_or_none_never_raises(text):
    """The format version a report's text names (report --verify, issue 30 follow-up item 7):
    any text (hostile JSON nesting, a schema of any value, a huge number) gives a small
    non-negative integer or None, and never raises."""
    from seat_console.evidence.report import report_format

    got = report_format(text, "report.json")
    assert got is None or (isinstance(got, int) and 0 <= got < 10 ** 6)
    if text.startswith("# Seat evidence report") and "/" in text:
        n = text.rsplit("/", 1)[1].rstrip(".\n")
        assert got == (int(n) if n.isdigit() and len(n) <= 6 else 1)


def test_report_verify_names_an_edited_and_a_missing_file(tmp_path):
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    a.write_text("one")
    b.write_text("two")
    import hashlib

    rec = {str(p): hashlib.sha256(p.read_bytes()).hexdigest() for p in (a, b)}
    rec["bad\0path"] = "0" * 64
    a.write_text("edited")
    b.unlink()
    rows = {r.path: r for r in verify(rec)}
    assert rows[str(a)].problem == "changed since the report" and not rows[str(a)].ok
    assert rows[str(b)].actual is None and "cannot read" in rows[str(b)].problem
    assert rows["bad\0path"].actual is None and "not a file path" in rows["bad\0path"].problem


def _journal_bytes(tmp: Path) -> bytes:
    j = Journal(tmp / "base.db")
    for i in range(4):
        j.append(run_id=f"r{i % 2}", runbook="hold", kind="start" if i < 2 else "step",
                 step=f"s{i}", inputs={"i": i}, outcome="ok")
    j.close()
    return (tmp / "base.db").read_bytes()


_BASE: dict[str, bytes] = {}


@settings(max_examples=120)
@given(st.sampled_from(["truncate", "flip", "garbage"]), st.integers(0, 2**32),
       st.integers(1, 30))
def test_a_corrupted_journal_is_a_journal_error_naming_the_file(mode, seed, flips):
    rnd = random.Random(seed)
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        if "db" not in _BASE:
            _BASE["db"] = _journal_bytes(tmp)
        data = bytearray(_BASE["db"])
        if mode == "truncate":
            data = data[:rnd.randrange(len(data))]
        elif mode == "flip":
            for _ in range(flips):
                data[rnd.randrange(len(data))] = rnd.randrange(256)
        else:
            data = bytearray(rnd.randbytes(rnd.randrange(5000)))
        p = tmp / "journal.db"
        p.write_bytes(bytes(data))
        try:
            j = Journal(p)
            try:
                report = j.verify()
                entries = j.entries()
                unfinished = j.unfinished()
            finally:
                j.close()
        except JournalError as exc:
            assert str(p) in str(exc)
            return
        assert report.rows >= len(entries) or not report.ok
        assert all(isinstance(e.seq, int) for e in entries)
        assert all(rows for rows in unfinished)


def test_an_edited_row_is_named_by_verify(tmp_path):
    import sqlite3

    j = Journal(tmp_path / "j.db")
    for i in range(3):
        j.append(run_id="r", runbook="hold", kind="step", step=f"s{i}", outcome="ok")
    j.close()
    db = sqlite3.connect(tmp_path / "j.db")
    db.execute("DROP TRIGGER entries_no_update")   # as someone editing the file would
    db.execute("UPDATE entries SET outcome = 'failed' WHERE seq = 2")
    db.execute("UPDATE entries SET at = 'not a time' WHERE seq = 3")
    db.commit()
    db.close()
    j = Journal(tmp_path / "j.db")
    report = j.verify()
    assert not report.ok and 2 in report.bad_seqs and 3 in report.bad_seqs
    try:   # issue 31: the unparsable row is skipped and named, the others still read
        assert [e.seq for e in j.entries()] == [1, 2]
        assert [b.seq for b in j.skipped] == [3] and "at:" in j.skipped[0].problem
    finally:
        j.close()


lines = st.lists(st.one_of(
    st.text(max_size=80),
    st.sampled_from(["GPU KV cache size: 1,234 tokens", "CUDA out of memory",
                     "Maximum concurrency for 4,096 tokens per request: 2.50x"]),
    st.text(alphabet=st.characters(min_codepoint=0xD800, max_codepoint=0xDFFF), min_size=1,
            max_size=3).map(lambda s: f"ERROR {s} CUDA out of memory")), max_size=12)


@given(lines)
def test_startup_log_lines_with_lone_surrogates_are_scanned_not_fatal(ls):
    facts = parse_startup_log(ls)
    assert facts.lines == len(ls)
    if any("KV cache size: 1,234 tokens" in ln for ln in ls):
        assert facts.kv_cache_tokens == 1234   # one hostile line does not hide the others
    hits = scan_failures(ls, DEFAULT_FAILURE_PATTERNS)
    assert all(1 <= h.line_no <= len(ls) for h in hits)
    oom = [i + 1 for i, ln in enumerate(ls) if "CUDA out of memory" in ln]
    assert oom == [] or any(h.line_no == oom[0] for h in hits)


# -- our own files read back (issue 31): huge integers, deep nesting, recorded paths -------------
def _leaves(v: object, path: tuple = ()) -> list[tuple]:
    if isinstance(v, dict):
        return [p for k, x in v.items() for p in _leaves(x, (*path, k))] or [path]
    if isinstance(v, list):
        return [p for i, x in enumerate(v) for p in _leaves(x, (*path, i))] or [path]
    return [path]


def _set(v: object, path: tuple, new: object) -> object:
    if not path:
        return new
    out = dict(v) if isinstance(v, dict) else list(v)   # type: ignore[arg-type]
    out[path[0]] = _set(out[path[0]], path[1:], new)    # type: ignore[index]
    return out


_MARK = "\u0000poison"
poisons = st.one_of(
    st.integers(21, 600).map(lambda n: "9" * n),                        # OverflowError before
    st.integers(21, 600).map(lambda n: "-" + "9" * n),
    st.integers(65, 3000).map(lambda n: "[" * n + "1" + "]" * n),       # RecursionError before
    st.integers(65, 3000).map(lambda n: '{"a":' * n + "1" + "}" * n),
    st.sampled_from(['"Infinity"', '"-Infinity"', '"NaN"', "1e308", "-1e308", "1e400"]))

_RUN: dict[str, object] = {}


def _base_run() -> tuple[dict, list[dict]]:
    """One real run, written by the probe's own store (through tests/evidence_factory.py)."""
    if not _RUN:
        import sys

        sys.path.insert(0, str(Path(__file__).parent))
        from evidence_factory import write_run

        with tempfile.TemporaryDirectory() as d:
            run = write_run(Path(d), phases={"steady": (3, 1)})
            _RUN["summary"] = json.loads((run / "summary.json").read_text())
            _RUN["requests"] = [json.loads(ln) for ln in
                                (run / "requests.jsonl").read_text().splitlines()]
    return _RUN["summary"], _RUN["requests"]  # type: ignore[return-value]


@settings(deadline=10_000)   # a whole report built and printed per example
@given(st.sampled_from(["summary.json", "requests.jsonl"]), st.integers(0, 10**6), poisons,
       st.booleans())
def test_a_huge_integer_or_deep_nesting_in_a_run_file_is_that_files_error(which, pick, poison,
                                                                          twice):
    """A 400-digit integer raised OverflowError (float(), math.isfinite, the re-derivation's
    tolerance), deep nesting RecursionError, and "Infinity" / 1e400 read into a request record
    as inf: each is now the file's RunError, naming it and the fix, from the reader to the
    printed report."""
    from seat_console.evidence.report import build_report, load_inputs, render_markdown

    summary, reqs = _base_run()
    with tempfile.TemporaryDirectory() as d:
        run = Path(d) / "run-x"
        run.mkdir()
        if which == "summary.json":
            spots = _leaves(summary)
            doc = _set(summary, spots[pick % len(spots)], _MARK)
            if twice:
                doc = _set(doc, spots[(pick * 7 + 3) % len(spots)], _MARK)
            text = json.dumps(doc).replace(json.dumps(_MARK), poison)
            lines = [json.dumps(r) for r in reqs]
        else:
            text = json.dumps(summary)
            k = pick % len(reqs)
            spots = _leaves(reqs[k])
            lines = [json.dumps(r) for r in reqs]
            lines[k] = json.dumps(_set(reqs[k], spots[pick % len(spots)], _MARK)).replace(
                json.dumps(_MARK), poison)
        (run / "summary.json").write_text(text)
        (run / "requests.jsonl").write_text("\n".join(lines) + "\n")
        try:
            rep = build_report(load_inputs([str(run)]))
        except RunError as exc:
            assert str(run / which) in str(exc) or str(run / "summary.json") in str(exc)
            return
        json.dumps(rep, allow_nan=False, default=str)   # --json: strict JSON
        render_markdown(rep)


hostile_paths = st.one_of(
    st.sampled_from(["~nosuchuser-31/run", "~", "~/", "~nosuchuser-31", "a\x00b", "a\ud800",
                     "/proc/self/root/" * 300, "/" + "a" * 256, "a" * 5000, "", ".",
                     "/dev/null", "/etc/shadow"]),
    st.integers(256, 2000).map(lambda n: "/tmp/" + "x" * n),
    st.text(max_size=40))


@given(st.one_of(
    st.lists(hostile_paths, min_size=1, max_size=3).map(
        lambda ps: json.dumps({"inputs": ps, "files": {}, "generated_at": "2026-12-01T09:00Z"})),
    st.lists(hostile_paths, min_size=1, max_size=3).map(
        lambda ps: "\n".join(f"Input: `{p}`" for p in ps) + "\n"),
    st.integers(65, 3000).map(lambda n: '{"inputs": ' + "[" * n + "]" * n + "}"),
    st.integers(21, 600).map(lambda n: '{"inputs": [], "generated_at": ' + "9" * n + "}")))
@example("Input: `a\ud800`\n")   # written with surrogatepass: not UTF-8 (UnicodeDecodeError)
@settings(suppress_health_check=[HealthCheck.function_scoped_fixture], deadline=10_000)
def test_report_verify_on_hostile_recorded_inputs_names_them_never_raises(tmp_path_factory, text):
    """``report --verify``: a recorded ``~user`` (RuntimeError before), an over-long name
    (OSError ENAMETOOLONG before), deep nesting (RecursionError before) or a huge integer are
    each named in the re-derivation's differences, and the command exits 1 (or 0), never with
    a traceback."""
    import contextlib
    import io

    from seat_console.cli import main
    from seat_console.evidence.report import rederive

    out = rederive(text, "report.json")
    assert isinstance(out, list) and all(isinstance(x, str) for x in out)
    p = tmp_path_factory.mktemp("r") / "report.json"
    p.write_text(text, "utf-8", errors="surrogatepass")
    err = io.StringIO()
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
        rc = main(["report", "--verify", str(p), "--json"])
    assert rc in (0, 1)


@given(st.one_of(
    st.text(max_size=200), st.binary(max_size=200),
    json_values.map(json.dumps),
    st.fixed_dictionaries({"phase": st.text(max_size=5), "index": st.integers(), "api": st.just("x"),
                           "prompt_id": st.integers(), "sent_at": st.sampled_from(
                               ["2026-12-01T00:00:00Z", "2026-12-01T00:00:00", "x", 0]),
                           "start_s": st.one_of(st.floats(), st.integers(),
                                                st.sampled_from(["Infinity", "NaN"])),
                           "ok": st.booleans(),
                           "itl_s": st.lists(st.floats(), max_size=3)}).map(
        lambda d: json.dumps(d).replace("NaN", '"NaN"').replace('""NaN""', '"NaN"')),
    st.integers(21, 500).map(lambda n: '{"index": ' + "9" * n + "}")))
def test_parse_record_takes_a_record_or_names_the_line(line):
    """A request line read back: a record whose floats are finite and integers within ±2^63,
    or the line's InputError — never OverflowError or a pydantic error of another type."""
    import math

    from seat_console.core.probe_record import parse_record
    from seat_console.core.untrusted import InputError

    try:
        rec = parse_record(line, "run/requests.jsonl:3")
    except InputError as exc:
        assert str(exc).startswith("run/requests.jsonl:3: ")
        return
    for v in (rec.start_s, rec.ttft_s, rec.e2e_s, *rec.itl_s):
        assert v is None or math.isfinite(v)
    assert -2**63 <= rec.index < 2**63
