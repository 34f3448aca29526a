"""Property tests of ``read_runbook`` over random journal histories (issue 30): no stage shows
done before a stage it needs, a stale stage never shows done, the next stage is never done,
and reading is deterministic (the same journal read twice, or by a second connection — a
console started later — gives the same state)."""

from __future__ import annotations

import tempfile
from datetime import timedelta
from pathlib import Path

import os

from hypothesis import given, settings
from hypothesis import strategies as st

from seat_console.actions.journal import Journal
from seat_console.actions.stages import NEEDS, STAGES, read_runbook
from tests.runbook_history import History

_OUT = st.sampled_from(["done", "done", "done", "refused", "undone", "partial", None])
EVENTS = st.one_of(
    st.tuples(st.just("fit"), st.sampled_from(["fits", "fits", "over", "no verdict", 3])),
    st.tuples(st.just("image"), st.booleans()),
    st.tuples(st.just("hold"), _OUT),
    st.tuples(st.just("backport"), _OUT),
    st.tuples(st.just("swap"), _OUT),
    st.tuples(st.just("probe"), st.sampled_from(["complete", "complete", "disrupted", None])),
    st.tuples(st.just("compare"), st.sampled_from(["complete", "complete", "incomplete"])),
    st.tuples(st.just("decide"), st.sampled_from(["PROMOTE-ABLE", "KEEP", "INCONCLUSIVE",
                                                  "maybe"])),
    st.tuples(st.just("restore"), _OUT),
    st.tuples(st.just("promote"), _OUT),
    st.tuples(st.just("promote-undo"), _OUT),
    st.tuples(st.just("release"), _OUT),
    st.tuples(st.just("extend"), _OUT),
)


def _apply(h: History, ev: tuple[str, object]) -> None:
    name, arg = ev
    if name == "fit":
        h.single("fit", {"verdict": arg})
    elif name == "image":
        h.image(bool(arg))
    elif name == "probe":
        h.probe(arg)  # type: ignore[arg-type]
    elif name == "compare":
        h.compare(status=str(arg))
    elif name == "decide":
        h.decide(str(arg))
    elif name in ("promote-undo", "extend"):
        h.run(name, arg, {"hold": {"hold_id": "h", "expires_at": h.t.isoformat()}}
              if name == "extend" else None)  # type: ignore[arg-type]
    else:
        getattr(h, name.replace("-", "_"))(arg)


# the journal writes with synchronous=FULL: in memory-backed /dev/shm where there is one
_TMP = "/dev/shm" if os.path.isdir("/dev/shm") else None


SEATS = st.sampled_from(["resident", "candidate", "none", "both", "unknown"])


@settings(max_examples=100)
@given(st.lists(EVENTS, max_size=12), SEATS, st.integers(0, 6 * 3600))
def test_random_histories_keep_the_invariants(events: list[tuple[str, object]], seat: str,
                                              later_s: int) -> None:
    with tempfile.TemporaryDirectory(dir=_TMP) as d:
        j = Journal(path=Path(d) / "journal.sqlite3")
        try:
            h = History(j, Path(d))
            for ev in events:
                _apply(h, ev)
            now = h.t + timedelta(seconds=later_s)
            s = read_runbook(None, j, runs_dir=Path(d) / "runs", now=now, seat=seat)
            by = {x.name: x for x in s.stages}
            assert tuple(by) == STAGES
            for x in s.stages:
                assert x.status in ("todo", "done", "failed", "stale", "skipped")
                if x.status == "done":
                    assert x.at is not None and x.operator
                    for dep in NEEDS[x.name]:   # never done before a stage it needs
                        assert by[dep].status == "done", (x.name, dep, by[dep])
                        assert by[dep].at is not None and by[dep].at <= x.at
                if x.status in ("stale", "failed"):
                    assert x.reason
            if s.next is not None:
                assert s.next.status not in ("done", "skipped")
                assert s.cycle_closed_at is None
            # deterministic: the same journal again, and through a second connection
            assert read_runbook(None, j, runs_dir=Path(d) / "runs", now=now, seat=seat) == s
            j2 = Journal(path=j.path)
            try:
                assert read_runbook(None, j2, runs_dir=Path(d) / "runs", now=now,
                                    seat=seat) == s
            finally:
                j2.close()
        finally:
            j.close()
