"""Journal histories for the runbook-state tests: rows as each stage's runbook writes them
(actions/runbook.py's start / begin / verify / end; the single ``end`` rows of ``fit``,
``image-check`` and ``decide`` documented in issue 30; the probe's ``probe`` rows), appended
to a real :class:`~seat_console.actions.journal.Journal` with explicit times."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from seat_console.actions.journal import Journal

T0 = datetime(2026, 12, 5, 10, 0, tzinfo=UTC)


class History:
    """Appends runs to ``journal`` one minute apart (``at`` explicit: deterministic), from
    ``t0`` (default :data:`T0`). A test whose read uses the real clock (the CLI, the TUI) passes
    a recent ``t0``: its hold (4 h) would otherwise lapse at T0 + 4 h of the real day."""

    def __init__(self, journal: Journal, data: Path, t0: datetime = T0) -> None:
        self.j, self.data, self.t, self.n = journal, data, t0, 0

    def tick(self) -> datetime:
        self.t += timedelta(minutes=1)
        return self.t

    def rid(self, name: str) -> str:
        self.n += 1
        return f"{name}-{self.n:04d}"

    def run(self, runbook: str, outcome: str | None = "done", facts: dict[str, Any] | None = None,
            steps: tuple[str, ...] = ("step",), run_id: str | None = None,
            inputs: dict[str, Any] | None = None) -> str:
        """A runbook-engine run: start, begin/apply/verify per step, end ``outcome`` (``None``:
        no end row, the console died inside the last step); ``inputs`` on its start row, as
        the engine writes them."""
        rid = run_id or self.rid(runbook)
        f = dict(facts or {})
        self.j.append(run_id=rid, runbook=runbook, kind="start", outcome="started", facts=f,
                      inputs=inputs, at=self.tick())
        for s in steps:
            self.j.append(run_id=rid, runbook=runbook, kind="begin", step=s, facts=f,
                          at=self.tick())
            if outcome is None:
                return rid
            self.j.append(run_id=rid, runbook=runbook, kind="verify", step=s, outcome="ok",
                          facts=f, at=self.tick())
        self.j.append(run_id=rid, runbook=runbook, kind="end", outcome=outcome, facts=f,
                      at=self.tick())
        return rid

    def single(self, runbook: str, facts: dict[str, Any], outcome: str = "done") -> str:
        """A one-row run (``fit``, ``image-check``, ``decide``): kind ``end``."""
        rid = self.rid(runbook)
        self.j.append(run_id=rid, runbook=runbook, kind="end", outcome=outcome, facts=facts,
                      at=self.tick())
        return rid

    # -- each stage --------------------------------------------------------------------------
    def fit(self, verdict: str = "fits") -> str:
        return self.single("fit", {"verdict": verdict, "candidate": "cand", "resident": "res"})

    def image(self, ok: bool = True) -> str:
        return self.single("image-check", {"ok": ok, "images": {"reg/cand:1": {
            "image_id": "sha256:" + "a" * 64, "has": ok, "found": [], "missed": [] if ok
            else ["vllm/x.py: def new_kernel"]}}})

    def hold(self, outcome: str | None = "done") -> str:
        return self.run("hold", outcome, {"hold": {
            "hold_id": f"seat-hold-{self.n}", "lease": f"seat-hold-{self.n}-lease",
            "expires_at": (self.t + timedelta(hours=4)).isoformat(), "stopped": []}},
            steps=("lease", "silence"))

    def backport(self, outcome: str | None = "done") -> str:
        return self.run("build-backport", outcome, {"image_id": "sha256:" + "b" * 64},
                        steps=("base", "build"))

    def swap(self, outcome: str | None = "done") -> str:
        return self.run("swap", outcome, {"probe_image_id": "sha256:" + "b" * 64},
                        steps=("record resident", "stop resident", "start probe"))

    def probe(self, status: str | None = "complete", *, store: bool = True) -> str:
        rid = f"20261205T1000{self.n:02d}Z-abcdef"
        self.n += 1
        self.j.append(run_id=rid, runbook="probe", kind="probe", step="start",
                      outcome="started", at=self.tick())
        if store:
            d = self.data / "runs" / rid
            d.mkdir(parents=True, exist_ok=True)
            (d / "summary.json").write_text(json.dumps({
                "run_id": rid, "status": status or "running",
                "identity": {"image_id": "sha256:" + "b" * 64}}))
        if status is not None:
            self.j.append(run_id=rid, runbook="probe", kind="probe", step="end",
                          outcome=status, at=self.tick())
        return rid

    def compare(self, outcome: str | None = "done", status: str = "complete",
                nested: tuple[str, ...] = ()) -> str:
        """A compare run; ``nested``: runbooks run inside it (its own hold, swap, restore,
        release), each a whole run between the compare's start and end."""
        rid = self.rid("compare")
        bid = f"cmp-{self.n:04d}"
        d = self.data / "comparisons" / bid
        d.mkdir(parents=True, exist_ok=True)
        (d / "compare.json").write_text(json.dumps({"bracket_id": bid, "status": status}))
        f = {"bracket_id": bid, "cmp_dir": str(d)}
        self.j.append(run_id=rid, runbook="compare", kind="start", outcome="started", facts=f,
                      at=self.tick())
        self.j.append(run_id=rid, runbook="compare", kind="begin", step="hold", facts=f,
                      at=self.tick())
        for rb in nested:
            self.run(rb, "done", steps=("release hold",) if rb in ("release", "restore")
                     else ("x",))
        if outcome is not None:
            self.j.append(run_id=rid, runbook="compare", kind="end", outcome=outcome,
                          facts=f, at=self.tick())
        return rid

    def decide(self, decision: str = "PROMOTE-ABLE", needs: str = "") -> str:
        return self.single("decide", {"decision": decision, "bracket_id": "cmp-1",
                                      "runs": [], "report_sha256": "c" * 64,
                                      "questions": [], "needs": needs})

    def restore(self, outcome: str | None = "done", release: bool = True,
                keep_hold: bool = False) -> str:
        """A restore; ``keep_hold``: ``restore --keep-hold`` (its last step keeps the hold)."""
        if keep_hold:
            return self.run("restore", outcome, steps=("stop probe", "start resident",
                                                       "keep hold"),
                            inputs={"swap_run_id": None, "keep_hold": True})
        return self.run("restore", outcome, steps=("stop probe", "start resident")
                        + (("release hold",) if release else ()))

    def promote(self, outcome: str | None = "done") -> str:
        return self.run("promote", outcome, steps=("promote",))

    def release(self, outcome: str | None = "done") -> str:
        return self.run("release", outcome, steps=("start timers", "expire silence"))

    def to_backport(self) -> None:
        """fit, image, hold, backport, all done."""
        self.fit()
        self.image()
        self.hold()
        self.backport()

    def to_decide(self) -> None:
        """fit, image, hold, backport, swap, probe, compare, decide (PROMOTE-ABLE), all done."""
        self.to_backport()
        self.swap()
        self.probe()
        self.compare()
        self.decide()
