"""The runbook's state read from the journal and the run store (actions/stages.py
``read_runbook``), over concrete histories appended to a real journal (issue 30)."""

from __future__ import annotations

from pathlib import Path

import pytest

from seat_console.actions.journal import Journal
from seat_console.actions.stages import (
    COMMANDS,
    KEYS,
    NEEDS,
    RECOVER_COMMAND,
    STAGES,
    RunbookState,
    next_line,
    read_runbook,
    state_to_json,
)
from tests.runbook_history import History


@pytest.fixture
def hist(tmp_path: Path) -> History:
    j = Journal(path=tmp_path / "journal.sqlite3")
    yield History(j, tmp_path)
    j.close()


def read(h: History) -> RunbookState:
    return read_runbook(None, h.j, runs_dir=h.data / "runs", now=h.t)


def status(s: RunbookState) -> dict[str, str]:
    return {x.name: x.status for x in s.stages}


def test_empty_journal_is_all_todo_next_fit(hist: History) -> None:
    s = read(hist)
    assert set(status(s).values()) == {"todo"}
    assert s.next is not None and s.next.name == "fit"
    assert s.seat_holder == "unknown" and any("not read" in p for p in s.problems)
    assert next_line(s).startswith("next: fit")


def test_each_stage_names_its_key_and_command(hist: History) -> None:
    s = read(hist)
    for x in s.stages:
        assert x.key == KEYS[x.name] and x.command == COMMANDS[x.name] and x.needs
    from seat_console.tui.keys import KEYS as TUI_KEYS

    ids = {k.id for k in TUI_KEYS}
    assert {k for k in KEYS.values() if k} <= ids


def test_hold_done_next_backport(hist: History) -> None:
    hist.fit()
    hist.image()
    hist.hold()
    s = read(hist)
    assert status(s)["hold"] == "done"
    assert s.stage("hold").operator and s.stage("hold").evidence["hold"].startswith("seat-hold")
    assert s.next is not None and s.next.name == "backport"
    assert s.next.command == "seat-console build-backport" and s.next.key == "node.build-backport"


def test_whole_path_to_decide_then_promote_then_release_closes(hist: History) -> None:
    hist.to_decide()
    s = read(hist)
    assert all(status(s)[x] == "done" for x in STAGES[:8])
    assert s.stage("decide").evidence["decision"] == "PROMOTE-ABLE"
    assert s.next is not None and s.next.name == "promote"
    assert s.stage("probe").evidence["summary sha256"]
    assert s.stage("compare").evidence["compare.json sha256"]
    hist.promote()
    s = read(hist)
    assert status(s)["promote"] == "done" and status(s)["restore"] == "skipped"
    assert s.next is not None and s.next.name == "release"
    hist.release()
    s = read(hist)
    assert s.cycle_closed_at is not None and s.next is None
    assert status(s)["release"] == "done"
    assert "cycle closed" in next_line(s)
    hist.fit()   # a new cycle
    s = read(hist)
    assert s.cycle_started_at is not None and s.cycle_closed_at is None
    assert status(s)["fit"] == "done" and status(s)["hold"] == "todo"
    # image and backport are about the candidate, not the seat: carried into the new cycle
    assert status(s)["image"] == "done" and status(s)["backport"] == "done"
    assert s.next is not None and s.next.name == "hold"


def test_keep_skips_promote_and_restore_closes_the_cycle(hist: History) -> None:
    hist.to_decide()
    hist.decide("KEEP")
    s = read(hist)
    assert status(s)["promote"] == "skipped" and s.next is not None
    assert s.next.name == "restore"
    hist.restore()
    s = read(hist)
    assert s.cycle_closed_at is not None and status(s)["release"] == "done"
    assert s.stage("release").evidence["released by"].startswith("restore")


def test_new_backport_makes_swap_probe_compare_decide_stale(hist: History) -> None:
    hist.to_decide()
    hist.backport()
    s = read(hist)
    st = status(s)
    assert st["backport"] == "done"
    assert {st[x] for x in ("swap", "probe", "compare", "decide")} == {"stale"}
    assert "backport was redone" in s.stage("swap").reason
    assert s.next is not None and s.next.name == "swap"


def test_failed_fit_blocks_and_later_stages_done_without_it_are_stale(hist: History) -> None:
    hist.fit("over")
    hist.image()
    hist.hold()
    hist.backport()
    hist.swap()
    s = read(hist)
    assert status(s)["fit"] == "failed" and "over" in s.stage("fit").reason
    assert status(s)["swap"] == "stale" and status(s)["probe"] == "todo"
    assert s.next is not None and s.next.name == "fit"


def test_refused_run_does_not_hide_an_earlier_done(hist: History) -> None:
    hist.fit()
    hist.image()
    hist.hold()
    hist.hold(outcome="refused")
    assert status(read(hist))["hold"] == "done"


def test_unfinished_run_is_that_stage_failed_with_recover(hist: History) -> None:
    hist.fit()
    hist.image()
    hist.hold(outcome=None)   # kill -9 inside the hold
    s = read(hist)
    h = s.stage("hold")
    assert h.status == "failed" and h.command == RECOVER_COMMAND
    assert "never ended" in h.reason and "recover" in h.reason
    assert s.next is not None and s.next.name == "hold"
    # a second reader (a console started after the crash) sees the same
    j2 = Journal(path=hist.j.path)
    try:
        assert read_runbook(None, j2, runs_dir=hist.data / "runs", now=hist.t) == s
    finally:
        j2.close()


def test_probe_needs_the_run_store_to_agree(hist: History) -> None:
    hist.fit()
    hist.image()
    hist.hold()
    hist.backport()
    hist.swap()
    rid = hist.probe("complete", store=False)
    s = read(hist)
    assert any(rid in p for p in s.problems)   # the store cannot be read: said, not guessed
    (hist.data / "runs" / rid).mkdir(parents=True)
    (hist.data / "runs" / rid / "summary.json").write_text('{"status": "disrupted"}')
    s = read(hist)
    assert status(s)["probe"] == "failed" and "disrupted" in s.stage("probe").reason


def test_probe_without_end_row_is_failed_not_done(hist: History) -> None:
    hist.fit()
    hist.image()
    hist.hold()
    hist.backport()
    hist.swap()
    hist.probe(None)
    s = read(hist)
    assert status(s)["probe"] == "failed" and "no end row" in s.stage("probe").reason


def test_compare_incomplete_bracket_is_failed(hist: History) -> None:
    hist.fit()
    hist.image()
    hist.backport()
    hist.compare(status="disrupted")
    s = read(hist)
    assert status(s)["compare"] == "failed" and "disrupted" in s.stage("compare").reason


def test_runs_inside_compare_are_not_stages(hist: History) -> None:
    """compare's own hold, swap, restore and release are its steps: they neither count as
    stages nor close the cycle."""
    hist.fit()
    hist.image()
    hist.backport()
    hist.compare(nested=("hold", "swap", "restore", "release"))
    s = read(hist)
    st = status(s)
    assert st["compare"] == "done" and st["hold"] == "todo" and st["swap"] == "todo"
    assert st["restore"] == "todo" and s.cycle_closed_at is None


def test_promote_undo_puts_promote_back_to_todo(hist: History) -> None:
    hist.to_decide()
    hist.promote()
    hist.run("promote-undo", "done")
    s = read(hist)
    assert status(s)["promote"] == "todo" and "undone" in s.stage("promote").reason


def test_json_shape(hist: History) -> None:
    hist.fit()
    d = state_to_json(read(hist))
    assert [x["name"] for x in d["stages"]] == list(STAGES)
    assert d["next"]["name"] == "image" and d["stages"][0]["at"].endswith("Z")


def test_needs_graph_points_backwards() -> None:
    for s, deps in NEEDS.items():
        for d in deps:
            assert STAGES.index(d) < STAGES.index(s)


def test_unreadable_journal_is_a_problem_not_a_guess(tmp_path: Path) -> None:
    p = tmp_path / "journal.sqlite3"
    j = Journal(path=p)
    j.close()
    p.write_bytes(b"not a database" * 100)
    try:
        j = Journal(path=p)
    except Exception:   # noqa: BLE001 - opening already refuses: nothing to read
        return
    s = read_runbook(None, j, now=None)
    assert s.next is None and any("journal" in x for x in s.problems)
    assert all("unknown" in x.needs for x in s.stages)


def test_a_lapsed_hold_is_stale_and_next(hist: History) -> None:
    from datetime import timedelta

    hist.fit()
    hist.image()
    hist.hold()
    hist.backport()
    s = read_runbook(None, hist.j, runs_dir=hist.data / "runs", now=hist.t + timedelta(hours=5))
    assert status(s)["hold"] == "stale" and "lapsed" in s.stage("hold").reason
    assert s.next is not None and s.next.name == "hold"
    assert status(s)["backport"] == "done"   # a lapse is no new evidence: nothing else stale


def test_an_extend_moves_the_hold_and_a_failed_one_does_not(hist: History) -> None:
    from datetime import timedelta

    hist.fit()
    hist.image()
    hold_at = hist.t
    hist.hold()
    later = (hold_at + timedelta(hours=8)).isoformat()
    hist.run("extend", "undone", {"hold": {"hold_id": "h", "expires_at": later}})
    s = read_runbook(None, hist.j, runs_dir=hist.data / "runs", now=hist.t + timedelta(hours=5))
    assert status(s)["hold"] == "stale"          # the failed extend left the old end
    hist.run("extend", "done", {"hold": {"hold_id": "h", "expires_at": later}})
    s = read_runbook(None, hist.j, runs_dir=hist.data / "runs", now=hist.t + timedelta(hours=5))
    assert status(s)["hold"] == "done" and s.stage("hold").evidence["expires at"] == later
    hist.run("extend", None, {"hold": {"hold_id": "h", "expires_at": later}})   # killed
    s = read(hist)
    assert s.stage("hold").status == "failed" and s.stage("hold").command == RECOVER_COMMAND


def test_docker_swap_undone_by_hand_is_stale(hist: History) -> None:
    hist.fit()
    hist.image()
    hist.hold()
    hist.backport()
    hist.swap()
    s = read_runbook(None, hist.j, runs_dir=hist.data / "runs", now=hist.t, seat="resident")
    assert status(s)["swap"] == "stale" and "docker" in s.stage("swap").reason
    s = read_runbook(None, hist.j, runs_dir=hist.data / "runs", now=hist.t, seat="candidate")
    assert status(s)["swap"] == "done" and s.seat_holder == "candidate" and not s.problems


def test_keep_after_compare_with_the_resident_back_skips_restore(hist: History) -> None:
    hist.to_decide()
    hist.decide("KEEP")
    s = read_runbook(None, hist.j, runs_dir=hist.data / "runs", now=hist.t, seat="resident")
    assert status(s)["restore"] == "skipped" and status(s)["promote"] == "skipped"
    assert s.next is not None and s.next.name == "release"
    # with the candidate in the seat, restore is what is next
    s = read_runbook(None, hist.j, runs_dir=hist.data / "runs", now=hist.t, seat="candidate")
    assert s.next is not None and s.next.name == "restore"


def test_inconclusive_says_what_would_decide_it(hist: History) -> None:
    hist.to_decide()
    hist.decide("INCONCLUSIVE", needs="3 more rounds ≈ 14 min on this node")
    s = read_runbook(None, hist.j, runs_dir=hist.data / "runs", now=hist.t, seat="candidate")
    assert s.next is not None and s.next.name == "restore"
    assert status(s)["promote"] == "skipped"
    assert "INCONCLUSIVE: 3 more rounds" in next_line(s)


def test_operator_from_the_row_record(hist: History) -> None:
    # the journal's operator column (actions/who.py) is the record: who wrote the row
    hist.j.operator = {"login": "alice", "sudo_user": "bob", "ssh_client": None, "tty": None}
    hist.single("fit", {"verdict": "fits"})
    assert read(hist).stage("fit").operator.startswith("alice (sudo from bob)@")


def test_the_decide_row_renders_each_answer_not_its_json(hist: History) -> None:
    """`seat-console runbook`'s decide row (issue 30 follow-up, item 5): the runs as a list of
    names and one line per question, never the row's raw JSON; an INCONCLUSIVE whose needs
    name compare is not told "(or compare again)" a second time."""
    from seat_console.commands.runbook_cmd import render

    hist.to_decide()
    facts = {"decision": "INCONCLUSIVE", "bracket_id": "cmp-1", "runs": ["r-a1", "r-b2"],
             "report_sha256": "c" * 64,
             "questions": [{"question": "fits?", "answer": "yes: the fit budget says it fits",
                            "critical": False},
                           {"question": "throughput and latency?", "answer": "cannot tell, "
                            "because 2 pairs; needs ≥ 3 rounds", "critical": False}],
             "needs": "one `seat-console compare --rounds 3` for: ≥ 3 rounds (6 pairs)"}
    hist.single("decide", facts)
    s = read_runbook(None, hist.j, runs_dir=hist.data / "runs", now=hist.t, seat="candidate")
    lines = render(s)
    row = next(i for i, line in enumerate(lines) if " decide " in line)
    assert "runs r-a1, r-b2" in lines[row] and "[" not in lines[row], lines[row]
    assert lines[row + 1].strip() == "fits? yes: the fit budget says it fits"
    assert lines[row + 2].strip().startswith("throughput and latency? cannot tell")
    assert s.stage("decide").details == ("fits? yes: the fit budget says it fits",
                                         lines[row + 2].strip())
    assert next_line(s).count("seat-console compare") == 1, next_line(s)


def test_a_decision_from_runs_says_no_bracket_not_null(hist: History) -> None:
    """The trial read "bracket null" on the decide row of a decision made from two runs."""
    hist.to_decide()
    hist.single("decide", {"decision": "KEEP", "bracket_id": None, "runs": ["r1", "r2"],
                           "report_sha256": "c" * 64, "questions": [], "needs": ""})
    ev = read(hist).stage("decide").evidence
    assert ev["bracket"] == "none (decided from runs)" and ev["runs"] == "r1, r2", ev
    assert "null" not in " ".join(map(str, ev.values()))
