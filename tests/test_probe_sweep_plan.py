"""``probe --sweep --dry-run`` (issue 35): the sweep's plan before it runs — its steps, the stop
rule and a forecast from this seat's kept runs (``core.sweep.plan``; the kept runs read by
``probe.store.measured_waves``, a reader of our own run files: hypothesis here), in text and
``--json``. Preflight's seat container and hold are replaced as in ``test_probe_dryrun.py``;
the engine is a real closed port (connection refused)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from seat_console.commands import probe_cmd
from seat_console.core.sweep import plan, rule_text
from seat_console.probe.run import SETTLE_S, SweepSpec
from seat_console.probe.store import RunWriter, measured_waves
from test_probe_dryrun import SEAT, _args, _closed_port, _loaded, no_hold  # noqa: F401

IMAGE = SEAT["image_id"]


def _sweep_args(**kw) -> object:
    return _args(sweep=True, sweep_top=8, sweep_goodput=0.9, sweep_growth=0.1, **kw)


def _kept(root: Path, *, image: str = IMAGE, out_tokens: int = 24, api: str = "completions",
          phases: list[dict] | None = None) -> Path:
    """A kept run's summary (our own file) with the figures a forecast reads; run ids one
    second apart, in the order written (ids sort by time)."""
    n = len(list(root.iterdir())) if root.is_dir() else 0
    w = RunWriter(run_id=f"20261201T0900{n:02d}Z-abcdef", root=root)
    w.write_summary({"run_id": w.run_id, "status": "complete",
                     "identity": {"container": {"image_id": image, "role": "resident"}},
                     "settings": {"output_tokens": out_tokens, "api": api},
                     "phases": phases or []})
    w.close()
    return w.path


def _phase(name: str, c: int, n: int, dur: float, **kw) -> dict:
    return {"name": name, "stats": {"concurrency": c, "expected": n, "completed": n,
                                    "duration_s": dur, "complete": True, "request_rate": None,
                                    **kw}}


# -- the arithmetic ---------------------------------------------------------------------------
def test_the_forecast_is_waves_times_the_measured_wave_plus_the_settle() -> None:
    steps = [("sweep-c1", 1, 8), ("sweep-c2", 2, 8), ("sweep-c4", 4, 16)]
    waves = {1: {"wave_s": 0.5, "run_id": "r1", "phase": "single"},
             2: {"wave_s": 0.75, "run_id": "r1", "phase": "pair"},
             4: {"wave_s": 1.0, "run_id": "r2", "phase": "four"}}
    p = plan(steps, waves, request_timeout_s=120, overhead_s=3.0)
    assert [s.forecast_s for s in p.steps] == [8 * 0.5 + 3, 4 * 0.75 + 3, 4 * 1.0 + 3]
    assert p.forecast_s == p.measured_s == 7 + 6 + 7 and p.unmeasured == []
    assert [s.worst_s for s in p.steps] == [8 * 120 + 3, 4 * 120 + 3, 4 * 120 + 3]
    assert p.rule == rule_text(0.9, 0.1)
    assert p.text.startswith("≈ 20 s if it runs to the top step") and "earlier" in p.text
    assert "run r2 four: 1.00 s a wave of 4" == p.steps[2].basis


def test_a_step_never_measured_has_no_forecast_never_a_made_up_one() -> None:
    p = plan([("sweep-c1", 1, 8), ("sweep-c2", 2, 8)],
             {1: {"wave_s": 0.5, "run_id": "r", "phase": "x"}}, request_timeout_s=60,
             overhead_s=0.0)
    assert p.steps[1].forecast_s is None and p.forecast_s is None and p.unmeasured == [2]
    assert p.text.startswith("unknown: no measurement yet on this image at concurrency 2; "
                             "the other steps ≈ 4 s")
    assert "at most 12 min 00 s (every request at its 60 s timeout)" in p.text


@settings(max_examples=200, deadline=None)
@given(steps=st.lists(st.tuples(st.integers(1, 64), st.integers(1, 512)), max_size=8),
       waves=st.dictionaries(st.integers(0, 70), st.one_of(
           st.none(), st.text(max_size=3), st.dictionaries(st.sampled_from(
               ["wave_s", "run_id", "phase"]), st.one_of(
               st.none(), st.booleans(), st.text(max_size=3), st.integers(-5, 10**9),
               st.floats(allow_nan=True, allow_infinity=True))))),
       timeout=st.floats(0, 1e4), overhead=st.floats(0, 100))
def test_plan_never_raises_and_forecasts_only_from_a_measurement(steps, waves, timeout,
                                                                   overhead) -> None:
    p = plan([(f"s{c}", c, n) for c, n in steps], waves, request_timeout_s=timeout,
             overhead_s=overhead)
    json.dumps(p.model_dump(mode="json"), allow_nan=False)
    assert p.forecast_s is None or math.isclose(p.forecast_s, p.measured_s)
    assert (p.forecast_s is None) == (bool(p.unmeasured) or not steps)
    for s in p.steps:
        assert (s.forecast_s is None) == (s.concurrency in p.unmeasured)
        assert s.forecast_s is None or (math.isfinite(s.forecast_s) and s.forecast_s > overhead)


@pytest.mark.parametrize("bad", [dict(request_timeout_s=-1, overhead_s=0),
                                 dict(request_timeout_s=1, overhead_s=-1)])
def test_plan_refuses_a_negative_time(bad) -> None:
    with pytest.raises(ValueError, match="give both >= 0"):
        plan([("s", 1, 1)], {}, **bad)
    with pytest.raises(ValueError, match="step s has concurrency 0"):
        plan([("s", 0, 1)], {}, request_timeout_s=1, overhead_s=0)


# -- the kept runs it stands on (our own files: outside input) ---------------------------------
def test_measured_waves_reads_the_newest_matching_whole_closed_loop_phases(tmp_path) -> None:
    root = tmp_path / "runs"
    _kept(root, phases=[_phase("old-c1", 1, 8, 16.0), _phase("old-c4", 4, 16, 8.0)])
    _kept(root, phases=[_phase("c1", 1, 8, 4.0),                       # newest: 0.5 s a wave
                        _phase("c2-cut", 2, 8, 1.0, complete=False),   # not whole: skipped
                        _phase("c2-rate", 2, 8, 1.0, request_rate=3.0),  # open loop: skipped
                        _phase("c8", 8, 20, 6.0)])                     # ⌈20/8⌉ = 3 waves
    _kept(root, image="sha256:" + "cd" * 32, phases=[_phase("other", 2, 8, 1.0)])
    _kept(root, out_tokens=99, phases=[_phase("longer", 2, 8, 1.0)])
    _kept(root, api="chat", phases=[_phase("chat", 2, 8, 1.0)])
    w = measured_waves(IMAGE, 24, "completions", root)
    assert sorted(w) == [1, 4, 8]
    assert w[1]["wave_s"] == 0.5 and w[1]["phase"] == "c1"
    assert w[4] == {"wave_s": 2.0, "run_id": w[4]["run_id"], "phase": "old-c4"}
    assert w[8]["wave_s"] == 2.0
    assert measured_waves("", 24, "completions", root) == {}
    assert measured_waves(IMAGE, 24, "completions", tmp_path / "none") == {}


_junk = st.recursive(st.none() | st.booleans() | st.integers(-10, 10**12) | st.text(max_size=6)
                     | st.floats(allow_nan=True, allow_infinity=True),
                     lambda c: st.lists(c, max_size=3) | st.dictionaries(st.sampled_from(
                         ["stats", "concurrency", "completed", "expected", "duration_s",
                          "complete", "request_rate", "name", "x"]), c, max_size=5),
                     max_leaves=16)


@settings(max_examples=150, deadline=None)
@given(phases=st.lists(_junk, max_size=4), settings_=_junk, raw=st.binary(max_size=40))
def test_measured_waves_never_raises_and_keeps_only_finite_waves(tmp_path_factory, phases,
                                                                  settings_, raw) -> None:
    root = tmp_path_factory.mktemp("w") / "runs"
    w = RunWriter(root=root)
    w.write_summary({"identity": {"container": {"image_id": IMAGE}},
                     "settings": settings_ if not isinstance(settings_, dict) else
                     {**settings_, "output_tokens": 24, "api": "completions"},
                     "phases": phases})
    w.close()
    (root / "zz-garbage").mkdir()
    (root / "zz-garbage" / "summary.json").write_bytes(raw)
    for c, v in measured_waves(IMAGE, 24, "completions", root).items():
        assert isinstance(c, int) and c >= 1
        assert math.isfinite(v["wave_s"]) and 0 < v["wave_s"] <= 86_400


# -- the command ------------------------------------------------------------------------------
def test_sweep_dry_run_prints_steps_rule_and_forecast(no_hold, capsys) -> None:
    rc = probe_cmd.run_probe_cmd(_sweep_args(), _loaded(f"http://127.0.0.1:{_closed_port()}"))
    out = capsys.readouterr().out
    assert rc == 5                                   # no hold, engine down: still the plan
    assert "closed loop at concurrency 1, 2, 4, 8 (top 8)" in out
    for c, n in ((1, 8), (2, 8), (4, 16), (8, 32)):
        assert (f"step sweep-c{c}: {n} requests at concurrency {c} — no forecast (no "
                f"measurement yet at concurrency {c} on this image)") in out
    assert f"stop rule: {rule_text(0.9, 0.1)}" in out
    assert "forecast: unknown: no measurement yet on this image at concurrency 1, 2, 4, 8" in out
    assert "phase single:" not in out and "phase burst:" not in out   # not probe.phases
    assert "no [probe.slo]" in out


def test_sweep_dry_run_json_forecasts_from_this_seats_kept_runs(no_hold, capsys,
                                                                tmp_path) -> None:
    _kept(tmp_path / "data" / "runs",
          phases=[_phase(f"c{c}", c, n, w * -(-n // c))       # duration = waves × wave
                  for c, n, w in ((1, 8, 0.5), (2, 8, 0.5), (4, 16, 1.0), (8, 32, 2.0))])
    rc = probe_cmd.run_probe_cmd(_sweep_args(json=True),
                                 _loaded(f"http://127.0.0.1:{_closed_port()}"))
    doc = json.loads(capsys.readouterr().out)
    assert rc == 5 and doc["dry_run"] is True and doc["phases"] == []
    sw = doc["sweep"]
    assert [(s["phase"], s["concurrency"], s["requests"]) for s in sw["steps"]] == [
        ("sweep-c1", 1, 8), ("sweep-c2", 2, 8), ("sweep-c4", 4, 16), ("sweep-c8", 8, 32)]
    want = [8 * 0.5, 4 * 0.5, 4 * 1.0, 4 * 2.0]
    assert [s["forecast_s"] for s in sw["steps"]] == [w + SETTLE_S for w in want]
    assert sw["forecast_s"] == sum(want) + 4 * SETTLE_S and sw["unmeasured"] == []
    assert sw["rule"] == rule_text(0.9, 0.1) and sw["top"] == 8
    assert sw["worst_s"] == sum(-(-n // c) * 600 + SETTLE_S for c, n in
                                ((1, 8), (2, 8), (4, 16), (8, 32)))


def test_sweep_spec_steps_match_the_plan() -> None:
    assert [(p.name, p.concurrency, p.requests) for p in SweepSpec(top=8).phases()] == [
        ("sweep-c1", 1, 8), ("sweep-c2", 2, 8), ("sweep-c4", 4, 16), ("sweep-c8", 8, 32)]
