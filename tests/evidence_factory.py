"""Writers of probe runs and comparison legs for the evidence tests, through the probe's own
store (RunWriter, RequestRecord, phase_stats), so the report reads what the probe writes."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

from seat_console.core.probe_record import RequestRecord
from seat_console.core.probe_stats import phase_stats
from seat_console.probe.store import SUMMARY_SCHEMA, RunWriter

T0 = datetime(2026, 12, 1, 9, 0, tzinfo=timezone.utc)
IDENT_A = {"endpoint": "http://127.0.0.1:18000", "served_model": "seat-resident",
           "image_id": "sha256:" + "a" * 64, "repo_digest": "127.0.0.1:15000/engine@sha256:"
           + "1" * 64, "patch_sha256s": [], "profile_sha256": "p" * 64,
           "engine_version": "0.32.0", "gpu_uuids": ["GPU-0"], "driver_version": "580.159.04"}
IDENT_B = {**IDENT_A, "image_id": "sha256:" + "b" * 64,
           "repo_digest": "127.0.0.1:15000/engine@sha256:" + "2" * 64,
           "patch_sha256s": {"/opt/vllm/x.py": "c" * 64}}


def records(phase: str, expected: int, failed: int = 0, tok: int = 16, speed: float = 1.0,
            at: datetime = T0) -> list[RequestRecord]:
    out = []
    for i in range(expected):
        ok = i >= failed
        out.append(RequestRecord(
            phase=phase, index=i, api="completions", prompt_id=i % 8, sent_at=at,
            start_s=i * 0.01, ok=ok, failure_kind=None if ok else "timeout",
            failure=None if ok else "read timeout after 30 s", http_status=200 if ok else None,
            ttft_s=0.05 / speed if ok else None, e2e_s=0.5 / speed if ok else None,
            tpot_s=(0.45 / 15) / speed if ok else None, stream_end_s=0.5 / speed if ok else None,
            output_tokens=tok if ok else None, prompt_tokens=8 if ok else None))
    return out


def write_run(root: Path, *, ident: dict[str, Any] = IDENT_A, phases: dict[str, tuple[int, int]]
              | None = None, at: datetime = T0, status: str | None = None, speed: float = 1.0,
              disruptions: list[dict[str, Any]] | None = None,
              slo: dict[str, float] | None = None,
              cache_hit_rate: float | None = None) -> Path:
    """A probe run: ``phases`` = {name: (expected, failed)}; ``slo``: ``[probe.slo]`` targets
    (goodput per phase); ``cache_hit_rate``: every phase's prefix-cache hit rate (nonce-cleaned;
    ``None``: no ``prefix_cache`` block, as before the probe read the counters); returns its
    directory."""
    phases = phases or {"single": (4, 0), "load": (64, 0)}
    w = RunWriter(root=root)
    summary_phases = []
    for name, (expected, failed) in phases.items():
        recs = records(name, expected, failed, speed=speed, at=at)
        for r in recs:
            w.append(r)
        st = phase_stats(name, recs, expected=expected, concurrency=8,
                         disrupted=disruptions[0]["reason"] if disruptions else None, slo=slo)
        summary_phases.append({"name": name, "state": st.state,
                               "stats": st.model_dump(mode="json")})
        if cache_hit_rate is not None:
            summary_phases[-1]["prefix_cache"] = {
                "mode": "nonce", "hits": round(cache_hit_rate * 1000), "queries": 1000,
                "hit_rate": cache_hit_rate}
    w.close()
    all_complete = all(p["stats"]["complete"] for p in summary_phases)
    w.write_summary({
        "schema": SUMMARY_SCHEMA, "run_id": w.run_id,
        "status": status or ("disrupted" if disruptions else
                             "complete" if all_complete else "incomplete"),
        "started_at": at.isoformat(), "ended_at": (at + timedelta(minutes=2)).isoformat(),
        "identity": ident, "phases": summary_phases, "disruptions": disruptions or []})
    return w.path


def write_leg(cmp_dir: Path, n: int, arm: str, probe_dir: Path, *, bracket: str = "br-1",
              kv: int | None = None, traces: list[dict[str, Any]] | None = None,
              canaries: list[dict[str, Any]] | None = None, ident: dict[str, Any] | None = None,
              status: str = "complete", pair: str | None = None,
              round_: int | None = None) -> str:
    d = cmp_dir / "legs" / f"{n}-{arm}"
    d.mkdir(parents=True)
    (d / "leg.json").write_text(json.dumps({
        "arm": arm, "leg": n, "bracket_id": bracket, "probe_run_dir": str(probe_dir),
        "status": status, "identity": ident or {}, "kv_cache_tokens": kv,
        **({"pair": pair, "round": round_} if pair else {})}))
    (d / "engine.log").write_text(f"CPU KV cache size: {kv or 0:,} tokens\n")
    if traces is not None:
        (d / "fidelity.jsonl").write_text("".join(json.dumps(t) + "\n" for t in traces))
    if canaries is not None:
        (d / "canaries.jsonl").write_text("".join(json.dumps(c) + "\n" for c in canaries))
    return f"legs/{n}-{arm}"
