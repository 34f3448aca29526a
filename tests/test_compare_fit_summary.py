"""The compare runbook's fit context (``actions.compare.fit_summary``) reads the typed budget
directly: it must say what ``seat-console fit --no-live --json`` says, arm by arm (it once
imported the command and parsed its JSON back)."""

from __future__ import annotations

import json
from pathlib import Path

import ckpt_factory as F
import pytest

from seat_console.actions.compare import fit_summary
from seat_console.commands.fit_cmd import to_json
from seat_console.core.profile import LoadedProfile, default_profile_text, parse_profile
from seat_console.node.context import NodeContext
from seat_console.snapshot.fit_reading import gather_fit_inputs, host_memory
from seat_console.fit.inputs import WhatIf, compute_budgets


def _from_json(loaded: LoadedProfile) -> dict:
    """The old derivation: the fit command's JSON, parsed back."""
    inputs = gather_fit_inputs(loaded, None, gpu_unavailable="not read by compare",
                               host=host_memory(), containers=None)
    comp, overlay = compute_budgets(inputs, WhatIf())
    doc = json.loads(to_json(inputs, comp, overlay, loaded.source))
    out = {"kv_tokens_ratio": doc.get("kv_tokens_ratio")}
    for arm, side in (("A", "resident"), ("B", "candidate")):
        d = doc.get(side) or {}
        v = d.get("verdict") if isinstance(d.get("verdict"), dict) else {}
        out[arm] = {"name": d.get("name"), "kv_tokens": d.get("kv_tokens"),
                    "max_concurrency": d.get("max_concurrency"), "fits": v.get("fits"),
                    "words": v.get("words") or d.get("unavailable") or d.get("no_verdict")}
    return out


def _loaded(text: str) -> LoadedProfile:
    return LoadedProfile(profile=parse_profile(text, "<test>"), source="<test>", origin="test",
                         sha256="0" * 64)


def _check(loaded: LoadedProfile) -> dict:
    got = fit_summary(NodeContext(loaded))
    assert "problem" not in got, got
    want = _from_json(loaded)
    assert got["kv_tokens_ratio"] == pytest.approx(want["kv_tokens_ratio"]) \
        if want["kv_tokens_ratio"] is not None else got["kv_tokens_ratio"] is None
    for arm in ("A", "B"):
        g, w = dict(got[arm]), dict(want[arm])
        for k in ("max_concurrency",):
            if w[k] is not None:
                assert g.pop(k) == pytest.approx(w.pop(k)), arm
        assert g == w, arm
    return got


def test_default_profile_arms_match_the_fit_command() -> None:
    got = _check(_loaded(default_profile_text()))
    assert got["A"]["words"]      # the default resident has a verdict in words


def test_scanned_checkpoint_matches_the_fit_command(tmp_path: Path) -> None:
    """Resident scanned from a checkpoint (a verdict with KV tokens), candidate declared."""
    cfg = F.llama3_8b_config()
    F.write_checkpoint(tmp_path / "bf16", F.split_even(F.llama_tensors(cfg), 4), config=cfg)
    text = default_profile_text().replace(
        '[resident]\nname = "resident-fp8"\n',
        f'[resident]\nname = "resident-fp8"\npath = "{tmp_path / "bf16"}"\n', 1)
    assert str(tmp_path / "bf16") in text
    got = _check(_loaded(text))
    assert got["A"]["kv_tokens"] is not None and got["A"]["fits"] is not None
