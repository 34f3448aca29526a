"""The runbook's stages in the exporter (issue 30): ``seat_runbook_stage{stage, status}`` for
every stage, ``seat_runbook_next_info{stage, status}`` while a cycle is under way; read from
the journal opened read-only (:class:`ReadOnlyJournal`, hypothesis over hostile rows)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import os
import sqlite3
import tempfile
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from seat_console.actions.journal import Journal, JournalError
from seat_console.actions.stages import STAGES, read_runbook
from seat_console.exporter.model import JournalValue
from seat_console.exporter.readers import ReadOnlyJournal, runbook_stages
from tests.runbook_history import History
from tests.test_exporter import get, samples, up


@pytest.fixture
def hist(tmp_path: Path) -> History:
    j = Journal(path=tmp_path / "journal.sqlite3")
    # the exporter's runbook_stages reads with the real clock: the history starts an hour
    # ago (its hold lasts 4 h; T0 + 4 h lapsed at 14:03 UTC on T0's day)
    yield History(j, tmp_path, t0=datetime.now(UTC) - timedelta(hours=1))
    j.close()


def test_families_from_the_journal_value() -> None:
    stages = tuple((s, "done" if s in ("fit", "image", "hold") else "todo") for s in STAGES)
    s = samples({"journal": up("journal", JournalValue(stages=stages,
                                                       next_stage=("backport", "todo")))})
    assert get(s, "seat_runbook_stage", stage="hold", status="done") == 1.0
    assert get(s, "seat_runbook_stage", stage="swap", status="todo") == 1.0
    assert sum(1 for k in s if k[0] == "seat_runbook_stage") == len(STAGES)
    assert get(s, "seat_runbook_next_info", stage="backport", status="todo") == 1.0


def test_unknown_stages_are_absent() -> None:
    s = samples({"journal": up("journal", JournalValue())})
    assert not [k for k in s if k[0].startswith("seat_runbook_stage")
                or k[0].startswith("seat_runbook_next")]


def test_read_only_journal_reads_what_the_journal_wrote(hist: History) -> None:
    hist.fit()
    hist.image()
    hist.hold()
    ro = ReadOnlyJournal(hist.j.path)
    assert ro.entries() == hist.j.entries()
    a = read_runbook(None, ro, runs_dir=hist.data / "runs", now=hist.t)
    assert a == read_runbook(None, hist.j, runs_dir=hist.data / "runs", now=hist.t)
    stages, nxt = runbook_stages(ro, hist.data / "runs")
    assert dict(stages)["hold"] == "done" and nxt == ("backport", "todo")


def test_at_rest_there_is_no_next_stage(tmp_path: Path) -> None:
    stages, nxt = runbook_stages(ReadOnlyJournal(tmp_path / "none.sqlite3"), tmp_path)
    assert nxt is None and {s for _, s in stages} == {"todo"}
    assert not (tmp_path / "none.sqlite3").exists()   # never created


def test_the_image_stage_is_skipped_as_the_runbook_says_when_nothing_is_required(
        tmp_path: Path) -> None:
    """The exporter read ``image todo`` where ``seat-console runbook`` said ``image skipped``
    (the profile declares no ``[candidate.requires]``): the profile now decides both."""
    from seat_console.core.profile import load_profile

    prof = load_profile(None, environ={}).profile
    assert prof.candidate.requires is None
    ro = ReadOnlyJournal(tmp_path / "none.sqlite3")
    stages, nxt = runbook_stages(ro, tmp_path, prof)
    assert dict(stages)["image"] == "skipped" and nxt is None
    assert dict(runbook_stages(ro, tmp_path)[0])["image"] == "todo"   # no profile: not known
    wants = prof.model_copy(update={"candidate": prof.candidate.model_copy(
        update={"requires": object()})})
    assert dict(runbook_stages(ro, tmp_path, wants)[0])["image"] == "todo"


def test_a_closed_cycle_has_no_next_stage(hist: History) -> None:
    hist.fit()
    hist.image()
    hist.hold()
    hist.release()
    stages, nxt = runbook_stages(ReadOnlyJournal(hist.j.path), hist.data / "runs")
    assert nxt is None and dict(stages)["release"] == "done"


def test_an_unreadable_journal_is_a_sentence(tmp_path: Path) -> None:
    p = tmp_path / "j.sqlite3"
    p.write_bytes(b"garbage" * 1000)
    r = runbook_stages(ReadOnlyJournal(p), tmp_path)
    assert isinstance(r, str) and str(p) in r


_TMP = "/dev/shm" if os.path.isdir("/dev/shm") else None
_VAL = st.one_of(st.text(max_size=40), st.integers(-(2**63), 2**63 - 1), st.none(),
                 st.binary(max_size=20),
                 st.floats(allow_nan=True), st.sampled_from(["2026-12-05T10:00:00Z", "{}",
                                                             '{"a": 1}', "[1]", "nan"]))


@given(st.lists(st.fixed_dictionaries({c: _VAL for c in (
    "at", "run_id", "runbook", "kind", "step", "inputs", "outcome", "facts")}), max_size=5))
def test_hostile_rows_give_entries_or_a_journal_error(rows) -> None:
    """Rows written by hand (any type in any column): entries, or a JournalError naming the
    file; never another exception; read_runbook over them never raises."""
    with tempfile.TemporaryDirectory(dir=_TMP) as d:
        p = Path(d) / "journal.sqlite3"
        db = sqlite3.connect(p)
        db.execute("CREATE TABLE entries (seq INTEGER PRIMARY KEY, at, user, host, "
                   "profile_sha256, run_id, runbook, kind, step, inputs, outcome, output, "
                   "facts, prev_hash, hash)")
        for r in rows:
            db.execute("INSERT INTO entries (at, user, host, profile_sha256, run_id, runbook, "
                       "kind, step, inputs, outcome, output, facts, prev_hash, hash) VALUES "
                       "(?, 'u', 'h', '', ?, ?, ?, ?, ?, ?, '', ?, '', '')",
                       (r["at"], r["run_id"], r["runbook"], r["kind"], r["step"], r["inputs"],
                        r["outcome"], r["facts"]))
        db.commit()
        db.close()
        ro = ReadOnlyJournal(p)
        try:
            ro.entries()
        except JournalError as exc:
            assert str(p) in str(exc)
        r = runbook_stages(ro, Path(d))
        assert isinstance(r, (str, tuple))


def test_make_journal_reads_the_stages_again_only_when_the_files_change(hist: History,
                                                                        monkeypatch) -> None:
    from seat_console.core.profile import load_profile
    from seat_console.exporter import readers
    from tests.test_exporter import PROFILE

    prof = hist.data / "p.toml"
    prof.write_text(PROFILE)
    calls = []
    real = readers.runbook_stages
    monkeypatch.setattr(readers, "runbook_stages",
                        lambda j, r, p=None: calls.append(1) or real(j, r, p))
    env = {"SEAT_CONSOLE_STATE_DIR": str(hist.j.path.parent),
           "SEAT_CONSOLE_DATA_DIR": str(hist.data)}
    read, close = readers.make_journal(load_profile(str(prof)), env)
    hist.fit()
    first = read()
    # the profile requires nothing of the image: that stage is skipped, as the runbook says
    assert first.next_stage == ("hold", "todo") and len(calls) == 1
    assert read() == first and len(calls) == 1          # nothing changed: not read again
    hist.hold()
    assert read().next_stage == ("backport", "todo") and len(calls) == 2
    close()
