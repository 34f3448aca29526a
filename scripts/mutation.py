#!/usr/bin/env python3
"""Mutation run: do the tests fail when the code is wrong? (issue #12, "tests that can fail").

A curated list of realistic mutations (an off-by-one, a dropped check, ``min`` for ``max``, a
``None`` turned into 0, a fallback made global, a regex made unanchored…) over the core
modules: kvcache, runner, budget, silences, timers, gpu/nvml, checkpoint, profile, and the
parsers hardened for issue #12 (engine, containers, untrusted). Each mutation is one exact
text replacement (it must occur exactly once, else the mutation is reported ``invalid``).

For each mutation the script applies it to a **copy** of the working tree (never the tree it
was started from: several builders share that one), runs the mutation's test files there, and
restores the file. The mutation is *killed* when the tests fail, *survived* when they pass,
*timeout* (counted as killed, as mutmut does) when they run past ``--timeout``. Lab tests are
deselected (``-m "not lab"``): the copy has no lab state, and the lab is shared.

The copy is imported as ``seat_console`` through a ``PYTHONPATH`` folder of symlinks
(``_imp/seat_console → console``, ``console/widgets → widgets``, ``console/actions →
actions``), which precedes the editable install's finder; the script checks that the copy's
files are what gets imported before it starts.

Usage (not run in CI; ~5 minutes on the 2-core VM)::

    python3 scripts/mutation.py                 # all mutations; writes docs/mutation.json
    python3 scripts/mutation.py -k silences     # only ids containing "silences"
    python3 scripts/mutation.py --list          # list the mutations
    python3 scripts/mutation.py --check         # only check every mutation applies

Exit status: 0 when the kill rate is at least ``--target`` (default 0.90), 1 below it, 2 when a
mutation is invalid or the unmutated tests fail in the copy.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class Mutation:
    """One mutation: ``id``, the file (repo-relative), the exact text ``old`` → ``new``, what
    it breaks (``why``) and the test files that should catch it."""

    id: str
    file: str
    old: str
    new: str
    why: str
    tests: tuple[str, ...]


K = "console/fit/kvcache.py"
R = "console/node/runner.py"
B = "console/fit/budget.py"
S = "console/sources/silences.py"
AM = "console/node/alertmanager.py"
T = "console/sources/timers.py"
G = "console/sources/gpu.py"
N = "console/node/nvml.py"
C = "console/sources/checkpoint.py"
P = "console/core/profile.py"
E = "console/sources/engine.py"
D = "console/sources/containers.py"
DK = "console/node/docker.py"
U = "console/core/untrusted.py"
ET = "console/core/engine_timing.py"

T_KV = ("tests/test_kvcache.py", "tests/test_props_checkpoint.py")
T_RUN = ("tests/test_runner.py",)
T_BUD = ("tests/test_budget.py",)
T_SIL = ("tests/test_silences.py", "tests/test_props_silences.py", "tests/test_verify_fakes.py")
T_TIM = ("tests/test_timers.py", "tests/test_props_timers.py", "tests/test_verify_fakes.py")
T_GPU = ("tests/test_gpu.py", "tests/test_props_gpu.py")
T_CK = ("tests/test_checkpoint.py", "tests/test_props_checkpoint.py")
T_PRO = ("tests/test_profile.py", "tests/test_props_profile.py")
T_ENG = ("tests/test_engine.py", "tests/test_props_engine.py")
T_DOC = ("tests/test_containers.py", "tests/test_props_containers.py")
T_UNT = ("tests/test_untrusted.py",)
T_TIM21 = ("tests/test_props_engine_timing.py", "tests/test_probe_run.py")
RB = "actions/runbook.py"
SW = "actions/swap.py"
BP = "actions/backport.py"
HO = "actions/hold.py"
JO = "actions/journal.py"
SWC = "console/commands/swap_cmd.py"
AC = "console/commands/action_common.py"
PR = "console/probe/run.py"
PS = "console/core/probe_stats.py"
PI = "console/probe/interference.py"
FI = "console/evidence/fidelity.py"
RU = "console/evidence/runs.py"
RE = "console/evidence/report.py"
ST = "console/evidence/stats.py"

T_ACT = ("tests/test_runbook.py", "tests/test_hold_unit.py", "tests/test_hold_refusals.py",
         "tests/test_backport.py", "tests/test_restore_nothing.py", "tests/test_action_common.py",
         "tests/test_breach_unit.py", "tests/test_actionlog_unchanged.py",
         "tests/test_ground_fixes.py", "tests/test_actions_seam.py",
         "tests/test_journal_tamper.py")
T_PRB = ("tests/test_probe_run.py", "tests/test_probe_dryrun.py", "tests/test_probe_seam.py")
T_EV = ("tests/test_evidence_fidelity.py", "tests/test_evidence_report.py",
        "tests/test_evidence_stats.py", "tests/test_evidence_calibration.py",
        "tests/test_evidence_itemset.py", "tests/test_props_evidence.py",
        "tests/test_evidence_gaps.py")

M = Mutation
MUTATIONS: list[Mutation] = [
    # -- kvcache ---------------------------------------------------------------------------
    M("kvcache-replicas", K, "replicas = max(1, tp // total_kv)", "replicas = 1",
      "KV heads fewer than TP are not replicated", T_KV),
    M("kvcache-per-rank", K, "per_rank = max(1, total_kv // tp)", "per_rank = total_kv",
      "KV heads not split across TP ranks", T_KV),
    M("kvcache-head-v", K, "        head_v = head\n", "        head_v = 0\n",
      "V half of the KV cache forgotten", T_KV),
    M("kvcache-kv0", K, '''    if v == 0:
        raise KVModelError(f"{source}: '{key}' is 0''', '''    if v < 0:
        raise KVModelError(f"{source}: '{key}' is 0''',
      "num_key_value_heads / head_dim 0 accepted", T_KV),
    M("kvcache-heads-tp", K, "    if n_heads % tensor_parallel_size:",
      "    if False and n_heads % tensor_parallel_size:",
      "attention heads not divisible by TP accepted (vLLM refuses)", T_KV),
    M("kvcache-max-layers", K, "MAX_LAYERS = 10_000", "MAX_LAYERS = 10_000_000",
      "3,000,000 layers allocated", T_KV),
    M("kvcache-blocks-ceil", K, "        return _cdiv(p.max_model_len, block_size)",
      "        return p.max_model_len // block_size",
      "a partial last block not counted", T_KV),
    M("kvcache-shared", K, "        if shared and i >= n_layers - shared:",
      "        if shared and i > n_layers - shared:", "off by one in KV-shared layers", T_KV),
    # -- runner ----------------------------------------------------------------------------
    M("runner-127", R, "    if rc == 127:", "    if rc == 128:",
      "exit 127 not recognised as command not found", T_RUN),
    M("runner-126", R, "    if rc == 126:", "    if rc == 125:",
      "exit 126 not recognised", T_RUN),
    M("runner-min-expected", R, "    if min_expected_s is not None and duration_s < min_expected_s:",
      "    if min_expected_s is not None and duration_s < min_expected_s / 100:",
      "a step done in ~0 s counted as complete", T_RUN),
    M("runner-signal", R, "    if rc < 0:", "    if rc < -100:",
      "killed by a signal not a failure", T_RUN),
    M("runner-not-found-marker", R,
      '    if any(m in low for m in ("command not found", "executable file not found")):',
      '    if any(m in low for m in ("executable file not found",)):',
      "a wrapper that swallowed 'command not found' counted as success", T_RUN),
    # -- budget ----------------------------------------------------------------------------
    M("budget-min-card", B, "            cap = kv_capacity(kvm, min(known), p.engine())",
      "            cap = kv_capacity(kvm, max(known), p.engine())",
      "capacity from the largest card's pool instead of the smallest", T_BUD),
    M("budget-worst", B,
      "    worst = min(known, key=lambda r: r.kv_bytes if r.kv_bytes is not None else 0)",
      "    worst = max(known, key=lambda r: r.kv_bytes if r.kv_bytes is not None else 0)",
      "verdict on the best card", T_BUD),
    M("budget-compare-min", B,
      "        rk = min((c.kv_bytes for c in resident.cards if c.kv_bytes is not None), "
      "default=None)",
      "        rk = max((c.kv_bytes for c in resident.cards if c.kv_bytes is not None), "
      "default=None)", "comparison against the resident's largest pool", T_BUD),
    M("budget-pad64", B, "def pad_vocab(rows: int, pad_to: int = VOCAB_PADDING) -> int:",
      "def pad_vocab(rows: int, pad_to: int = 1) -> int:",
      "vocabulary not padded to the partition size", T_BUD),
    # -- silences --------------------------------------------------------------------------
    M("silences-unanchored", AM, '        prog = compile_re2(pattern, f"matcher {what}", anchored=True)',
      '        prog = compile_re2(pattern, f"matcher {what}", anchored=False)',
      "regex matchers not fully anchored (Alertmanager anchors them)", T_SIL),
    M("silences-negative", AM, "        return hit if self.is_equal else not hit",
      "        return hit", "negative matchers (!=, !~) treated as positive", T_SIL),
    M("silences-one-blinds-all", S, '''            except InputError as exc:
                # one silence's regex RE2 refuses: that silence's match is unknown, no more
                mine.append(s.model_copy(update={"match_unknown": str(exc)}))
                continue''', '''            except InputError as exc:
                return Unavailable(source=self.name, kind="error", reason=str(exc))''',
      "one RE2-invalid silence blinds the whole panel", T_SIL),
    M("silences-naive", AM, "            return aware_utc(v, \"time\")", "            return v",
      "naive times accepted", T_SIL),
    M("silences-superset", S, "    if exact or seat_set <= s_set:", "    if exact:",
      "a narrower silence on the seat not recognised", T_SIL),
    M("silences-verify-matchers", "actions/node_ops.py",
      "    if set(back.matchers) != set(ms):", "    if False:",
      "create verify ignores the matchers read back", T_SIL),
    M("silences-verify-state", "actions/node_ops.py",
      '    if back.state not in ("pending", "active"):', "    if False:",
      "create verify ignores an expired read-back", T_SIL),
    M("silences-retry", AM, "    return isinstance(exc, httpx.HTTPStatusError) and "
      "exc.response.status_code in (502, 503, 504)", "    return False",
      "idempotent reads not retried", T_SIL),
    # -- timers ----------------------------------------------------------------------------
    M("timers-verify", "actions/node_ops.py", "    if after.active_state not in want:\n",
      "    if False:\n", "systemctl exit 0 counted as done without the read-back", T_TIM),
    M("timers-usec-max", T, "        return None if usec <= 0 or usec >= 2**63 else "
      "datetime.fromtimestamp(usec / 1e6, UTC)", "        return None if usec <= 0 else "
      "datetime.fromtimestamp(usec / 1e6, UTC)", "systemd's infinity read as a time", T_TIM),
    M("timers-bool", T, '    if v in ("no", "false", "0", "off"):\n        return False',
      '    if v in ("no", "false", "off"):\n        return False',
      "Persistent=0 read as unknown", T_TIM),
    M("timers-running", T, '        return sub_state != "exited"', "        return True",
      "a finished oneshot (active/exited) shown as running", T_TIM),
    M("timers-schedule", T, "            if not sep:\n                continue\n",
      "            if not sep:\n                pass\n",
      "a trigger without its ';' still parsed", T_TIM),
    # -- gpu / nvml ------------------------------------------------------------------------
    M("nvml-global-fallback", N, "        if self.memory_api is None and not per_call_fallback:",
      "        if self.memory_api is None:",
      "one card's v2 NOT_SUPPORTED switches every card to v1", T_GPU),
    M("nvml-sentinel", N, "        if used is not None and int(used) == _VALUE_NOT_AVAILABLE_ULL:",
      "        if used is not None and int(used) == -1:",
      "NVML_VALUE_NOT_AVAILABLE shown as 16 EiB", T_GPU),
    M("nvml-mig-none", N, "            gpu_instance_id=None if gi is None or gi == _NO_INSTANCE "
      "else int(gi),", "            gpu_instance_id=None if gi is None else int(gi),",
      "no-MIG instance id 0xFFFFFFFF kept", T_GPU),
    M("gpu-process-sum-zero", G, "        if self.processes and not known:\n            return None",
      "        if False:\n            return None", "unknown process memory shown as 0 B", T_GPU),
    M("gpu-reserved-above-total", G, "            if v is not None and v > total:",
      "            if v is not None and v > total * 2:",
      "reserved > total gives negative CUDA-visible memory", T_GPU),
    M("gpu-pid-reuse", G, "        if cached is not None and cached.create_time == start:",
      "        if cached is not None:", "a reused PID shown as the old process", T_GPU),
    M("gpu-cuda-visible", G, "                    data[\"cuda_visible_bytes\"] = total - reserved",
      "                    data[\"cuda_visible_bytes\"] = total",
      "CUDA-visible total without the reserved part", T_GPU),
    M("gpu-gpu-fd", G, "        if holds is False:", "        if holds is None:",
      "a PID from another namespace mapped to this one's process", T_GPU),
    # -- checkpoint ------------------------------------------------------------------------
    M("checkpoint-contiguous", C, "        if b != cursor:", "        if b > cursor:",
      "overlapping tensors accepted", T_CK),
    M("checkpoint-nbytes", C, "            if total_bits // 8 != end - begin:",
      "            if total_bits // 8 > end - begin:",
      "a tensor claiming more bytes than its shape accepted", T_CK),
    M("checkpoint-bool-size", C, "    if isinstance(v, bool):\n        return None\n    if isinstance(v, int):",
      "    if isinstance(v, int):", "total_size true read as 1 byte", T_CK),
    M("checkpoint-plain-name", C, r'''    if not name or "/" in name or "\\" in name''',
      r'''    if not name or "\\" in name''',
      "an index naming ../ shards outside the directory", T_CK),
    M("checkpoint-ple-re2", C, '        return compile_re2(pattern, "ple_tensor_pattern")',
      '        import re\n        return re.compile(pattern)',
      "the PLE pattern matched with backtracking re", T_CK),
    M("checkpoint-unlisted", C, "                if listed is None:",
      "                if listed is None and False:",
      "tensors absent from the index counted", T_CK),
    # -- profile ---------------------------------------------------------------------------
    M("profile-extra-nested", P, '''class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, validate_default=True)''',
      '''class _Strict(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True, validate_default=True)''',
      "unknown keys ignored in every table (nested ones too)", T_PRO),
    M("profile-matcher-re2", P, "        if self.is_regex:\n            from seat_console.core.untrusted",
      "        if False:\n            from seat_console.core.untrusted",
      "a non-RE2 matcher regex accepted", T_PRO),
    M("profile-dotted", P, "MAX_DOTTED_KEY_PARTS = 32", "MAX_DOTTED_KEY_PARTS = 100_000",
      "a 40,000-part dotted key parsed (quadratic)", T_PRO),
    M("profile-size-cap", P, "    if isinstance(v, str) and len(v) > 64:",
      "    if isinstance(v, str) and len(v) > 100_000:",
      "a 5,000-digit size crashes ByteSize", T_PRO),
    M("profile-tp-gpus", P, "        if len(self.node.gpus) < self.seat.tensor_parallel_size:",
      "        if len(self.node.gpus) < self.seat.tensor_parallel_size - 1:",
      "fewer cards than TP accepted", T_PRO),
    # -- engine / containers / untrusted (hardened parsers) ----------------------------------
    M("engine-count-unknown", E, '''        if math.inf not in buckets:
            return None  # how many observations there were is unknown''', '''        if math.inf not in buckets:
            count = 0''', "a histogram without _count shown as no requests", T_ENG),
    M("engine-duplicates", E, "        if key not in seen:\n            seen.add(key)",
      "        if True:\n            seen.add(key)", "a duplicate series summed twice", T_ENG),
    M("engine-negative", E, "    return math.isfinite(v) and 0 <= v <= upper",
      "    return not math.isnan(v)", "negative / infinite counts summed", T_ENG),
    M("engine-missing-zero", E, "    return float(sum(vals)) if vals else None",
      "    return float(sum(vals))", "a missing scalar reported as 0", T_ENG),
    M("containers-backoff", DK, "            delay = min(delay * 2, self._backoff[1])",
      "            delay = self._backoff[0]", "reconnects without back-off", T_DOC),
    M("containers-restart-negative", D, '        restart_count=get_int(c, "RestartCount", minimum=0),',
      '        restart_count=c.get("RestartCount") if isinstance(c, dict) else None,',
      "a negative / non-integer restart count passed through", T_DOC),
    M("untrusted-depth", U, "MAX_DEPTH = 64", "MAX_DEPTH = 100_000",
      "deep JSON reaches the recursive parser", T_UNT + T_SIL + T_ENG),
    M("untrusted-depth-escaped-quote", U,
      "            if c == '\"':\n                in_string = False",
      "            if c.endswith('\"'):\n                in_string = False",
      "an escaped quote ends a string: brackets inside it counted as nesting", T_UNT),
    M("untrusted-bool-int", U, "    if not isinstance(v, int) or isinstance(v, bool):\n        return None\n    if (minimum",
      "    if not isinstance(v, int):\n        return None\n    if (minimum",
      "true read as the integer 1", T_UNT + T_ENG),
    # == issue 22: actions, probe, evidence (written from the product code, before reading the
    # tests; the test files are picked by which modules they import) ==========================
    # -- actions: runbook engine, swap/restore, backport, confirmations, hold, journal ---------
    M("runbook-refused-after-begin", RB,
      '                if self.policy == "undo" or not isinstance(exc, StepError):\n'
      '                    if not begun:',
      '                if self.policy == "undo" or not isinstance(exc, StepError):\n'
      '                    if len(begun) <= 1:',
      "a step that failed after changing the node reported 'refused: nothing was changed'",
      T_ACT),
    M("runbook-no-undo", RB, '        if self.policy == "undo":\n            for s in reversed(begun):',
      '        if False:\n            for s in reversed(begun):',
      "policy undo never undoes (swap's automatic restore gone)", T_ACT),
    M("runbook-undo-order", RB, "            for s in reversed(begun):", "            for s in begun:",
      "undo in forward order (resident started before the probe is stopped)", T_ACT),
    M("runbook-undo-fail-hidden", RB,
      "                outcomes[s.name] = StepOutcome(s.name, \"undone\" if ok else \"undo-failed\", detail)\n"
      "                if not ok:",
      "                outcomes[s.name] = StepOutcome(s.name, \"undone\" if ok else \"undo-failed\", detail)\n"
      "                if False:",
      "a failed undo not listed as still changed", T_ACT),
    M("swap-policy-continue", SW,
      'return Runbook("swap", steps, journal=journal, observer=observer, policy="undo",',
      'return Runbook("swap", steps, journal=journal, observer=observer, policy="continue",',
      "a failed swap goes on instead of restoring the resident", T_ACT),
    M("swap-restore-image-id", SW, '        if c.attrs["Image"] != rec["image_id"]:\n'
      '            raise StepError(f"{rec[\'name\']} now has image',
      '        if False:\n            raise StepError(f"{rec[\'name\']} now has image', "restore starts a resident whose image changed since the swap", T_ACT),
    M("swap-probe-image-id", SW, '            if c.attrs["Image"] != ctx.facts["probe_image_id"]:',
      "            if False:", "the probe container's image not checked after start", T_ACT),
    M("backport-image-id-as-digest", BP,
      "        local = image_by_id(client, inputs.base_digest)\n        if local is not None:",
      "        local = image_by_id(client, inputs.base_digest)\n        if False:",
      "a base 'digest' that is a local image ID not explained/refused", T_ACT),
    M("backport-repodigests", BP,
      '    if inputs.base in (img.attrs.get("RepoDigests") or []):\n        return img.attrs',
      "    if True:\n        return img.attrs",
      "an image found by that name but without the repo digest taken as the base", T_ACT),
    M("backport-label-skip", BP,
      '        return attrs if labels.get(f"{LABEL_PREFIX}.content-hash") == inputs.content_hash '
      "else None", "        return attrs",
      "an existing tag reused without checking its content-hash label", T_ACT),
    M("backport-hash-env", BP, '                            "env": env}, sort_keys=True',
      "                            }, sort_keys=True",
      "the content hash ignores the ENV settings (same tag for different images)", T_ACT),
    M("backport-label-value", BP, '        f"{LABEL_PREFIX}.content-hash": inputs.content_hash,',
      '        f"{LABEL_PREFIX}.content-hash": inputs.tag,', "content-hash label holds the tag",
      T_ACT),
    M("typed-confirm-any", SWC, "    if answer != seat:", "    if not answer:",
      "any typed text confirms the swap, not the seat's name", T_ACT),
    M("typed-confirm-case", SWC, "    if answer != seat:", "    if answer.lower() != seat.lower():",
      "the seat name matched case-insensitively", T_ACT),
    M("confirm-yn", AC, '    if answer not in ("y", "yes"):', '    if answer in ("n", "no"):',
      "an empty / other answer at [y/N] goes on", T_ACT),
    M("hold-lease-not-armed", HO,
      '            if not node_ops.lease_pending(ls) and h.get("expires_at") is not None:',
      "            if False:", "a timer stopped while the restore lease is not armed", T_ACT),
    M("hold-expiry-minutes", HO,
      '        h["expires_at"] = iso(utcnow() + timedelta(seconds=ttl_s))\n        try:',
      '        h["expires_at"] = iso(utcnow() + timedelta(minutes=ttl_s))\n        try:',
      "hold expiry = now + TTL minutes (not seconds)", T_ACT),
    M("hold-expiry-planned", HO, "            return utcnow() + timedelta(seconds=ttl_s)",
      "            return utcnow()", "planned expiry is now (TTL dropped)", T_ACT),
    M("hold-silence-endsat", HO,
      "        if abs((back.ends_at - expires(ctx)).total_seconds()) > 1.0:",
      "        if abs((back.ends_at - expires(ctx)).total_seconds()) > 3600.0:",
      "a silence read back with the wrong endsAt accepted", T_ACT),
    M("hold-silence-state", HO, '        if back.state != "active":', "        if False:",
      "a silence read back pending/expired accepted", T_ACT),
    M("hold-stop-unplanned", HO,
      '        if not h.get("lease_planned"):\n            return Check(False',
      "        if False:\n            return Check(False",
      "a timer stopped although the lease step was refused", T_ACT),
    M("journal-own-hash", JO, '                same = row_hash(r["prev_hash"], r) == r["hash"]',
      "                same = True", "an edited row not detected", T_ACT),
    M("journal-prev-hash", JO, '            elif r["prev_hash"] != prev_hash:', "            elif False:",
      "a row edited with its own hash recomputed not detected (chain link unchecked)", T_ACT),
    M("journal-head-rewritten", JO, "            elif hrows and by_seq.get(hrows) != hhash:",
      "            elif False:", "a rewritten last row not detected", T_ACT),
    M("journal-head-cut", JO, "            if hrows > prev_seq:", "            if hrows > prev_seq + 1:",
      "one row cut from the end not detected", T_ACT),
    M("journal-redact-key", JO,
      '"<redacted>" if _SECRET_KEY_RE.search(str(k)) and v not in (None, "")',
      '"<redacted>" if False and v not in (None, "")',
      "a 'token' key's value written when it was not registered as a secret", T_ACT),
    M("journal-secret-order", JO, "        for s in sorted(secrets, key=len, reverse=True):",
      "        for s in secrets:",
      "a shorter secret inside a longer one leaves the longer one's tail", T_ACT),
    # -- probe -----------------------------------------------------------------------------
    M("probe-streamed-tokens", PR,
      "        toks = sum(r.output_tokens or 0 for r in recs if r.ok) + sum(",
      "        toks = sum(r.output_tokens or 0 for r in recs if r.ok) + 0 * sum(",
      "tokens streamed by a failed request left out of the client count", T_PRB),
    M("probe-hold-unknown", PR, "    if h.active is not True and not force_reason:",
      "    if h.active is False and not force_reason:",
      "'cannot tell whether a hold is active' lets the probe run", T_PRB),
    M("probe-status-disrupted", PR, '        elif out["disruptions"]:\n            status = "disrupted"',
      '        elif False:\n            status = "disrupted"',
      "a disrupted run called complete", T_PRB),
    M("probe-disrupt-keeps-loading", PR,
      "                if monitor is not None and monitor.disruptions:\n                    # No",
      "                if False:\n                    # No",
      "phases still run after a disruption", T_PRB),
    M("probe-headline-any", PR,
      '        elif all(b.get("stats") and b["stats"].get("headline") for b in out["phases"]):',
      '        elif any(b.get("stats") and b["stats"].get("headline") for b in out["phases"]):',
      "a run with one headline phase called complete", T_PRB),
    M("probe-not-sent", PS, "    complete = attempted == expected and not bad",
      "    complete = not bad", "a phase whose requests were never sent counted complete", T_PRB),
    M("probe-own-events", PI, '        if e.by_console or e.type != "container":',
      '        if e.type != "container":',
      "the console's own container events counted as disruptions", T_PRB),
    M("probe-counter-reset", PI, "        if a is not None and b is not None and b < a:",
      "        if a is not None and b is not None and b < 0:",
      "an engine counter going down not read as a restart", T_PRB),
    M("probe-service-running", PI, '                and props.get("SubState") not in ("exited", "dead")):',
      '                and props.get("SubState") not in ("exited", "dead", "running")):',
      "a timer's service running during the probe not a disruption", T_PRB),
    # -- evidence --------------------------------------------------------------------------
    M("fidelity-logprobs-exact", FI,
      "                and self.top_sets_identical and self.max_common_abs_dlogprob in (0.0, None))",
      "                and self.top_sets_identical)",
      "same tokens with different logprobs counted exact", T_EV),
    M("fidelity-topset", FI, "        if pa.top.keys() != pb.top.keys():\n            identical = False",
      "        if False:\n            identical = False", "different top-20 sets counted identical",
      T_EV),
    M("fidelity-length", FI,
      "        return (self.first_divergence is None and self.length_a == self.length_b",
      "        return (self.first_divergence is None",
      "a shorter output (prefix of the other) counted exact", T_EV),
    M("fidelity-unmatched", FI,
      "        return bool(self.cases) and not self.unmatched and all(",
      "        return bool(self.cases) and all(", "unmatched cases ignored in all_exact", T_EV),
    M("runs-complete-disruptions", RU,
      '        return (self.status == "complete" and not self.disruptions',
      '        return (self.status == "complete"',
      "a 'complete' run that lists disruptions counted complete", T_EV),
    M("runs-phase-state", RU, '                and self.state in ("complete", "unknown"))',
      "                )", "a phase the probe called unverified counted complete", T_EV),
    M("report-phase-missing", RE,
      "for lst in per_arm.values() for r, p in lst if p is None or not p.complete]",
      "for lst in per_arm.values() for r, p in lst if p is not None and not p.complete]",
      "a phase missing from one run allows a claim", T_EV),
    M("stats-wald", ST, "    half = (z / denom) * math.sqrt(p * (1.0 - p) / n + z2 / (4 * n * n))",
      "    half = z * math.sqrt(p * (1.0 - p) / n)", "Wald interval instead of Wilson", T_EV),
    M("stats-overlap-strict", ST,
      "        return self.low <= other.high and other.low <= self.high",
      "        return self.low < other.high and other.low < self.high",
      "touching intervals read as disjoint (a difference claimed)", T_EV),
    M("stats-pairs-one-sided", ST, "math.ceil(math.log2(2.0 / alpha) - 1e-12)",
      "math.ceil(math.log2(1.0 / alpha) - 1e-12)", "pairs needed for a one-sided test", T_EV),
    M("stats-claimable-2alpha", ST, "        return self.p_value <= self.alpha",
      "        return self.p_value <= 2 * self.alpha", "claim at twice the false-claim rate",
      T_EV),
    # -- client timings against the engine's own (issue 21, part 2) ---------------------------
    M("timing-cause-swapped", ET,
      '    return "client-side delay" if cpu_share >= BUSY_SHARE else "network"',
      '    return "network" if cpu_share >= BUSY_SHARE else "client-side delay"',
      "a busy client's delay blamed on the network", T_TIM21),
    M("timing-edge-inside", ET, "    if client_value > hi:", "    if client_value >= hi:",
      "a client value on the bucket's upper bound (inside it) called a delay", T_TIM21),
    M("timing-restart-unseen", ET, "    if any(x < 0 for x in d):", "    if False:",
      "an engine restart between the scrapes read as negative counts", T_TIM21),
    M("timing-p95-is-p50", PR, "                {0.5: dist.p50_s, 0.95: dist.p95_s}, dist.n, share,",
      "                {0.5: dist.p50_s, 0.95: dist.p50_s}, dist.n, share,",
      "the client's p50 checked as its p95", T_PRB),
    M("timing-report-trusts-recorded", RU,
      "        return {f: check_figure(f, t.engine, client[f], t.client_n, share, problem=t.problem)\n"
      "                for f, t in self.engine_timing.items()}",
      "        return dict(self.engine_timing)",
      "the report takes the recorded verdicts instead of making the checks again", T_EV),
]


# -- the code added since the first half (issue 31: its own mutation set) -------------------
CM = "actions/compare.py"
CMC = "console/commands/compare_cmd.py"
LV = "console/probe/live.py"
VD = "console/snapshot/verdicts.py"
SP = "console/serve/plan.py"
SV = "console/serve/server.py"
KT = "console/tui/keys.py"
T_CMP = ("tests/test_compare_breach_unit.py", "tests/test_breach_unit.py",
         "tests/test_compare_cli.py", "tests/test_compare_dryrun.py")
T_INT = ("tests/test_interference_time.py", "tests/test_probe_run.py", "tests/test_probe_seam.py",
         "tests/test_slips_since.py")
T_REL = ("tests/test_release_defer_unit.py", "tests/test_breach_unit.py",
         "tests/test_hold_unit.py", "tests/test_slips_since.py")
T_LIVE = ("tests/test_probe_live_rate.py", "tests/test_probe_tui.py")
T_FITW = ("tests/test_status_fit_word.py", "tests/test_screen.py")
T_SRV = ("tests/test_serve.py", "tests/test_slips_since.py")
T_FLEET = ("tests/test_fleet_rows.py", "tests/test_props_fleet_values.py",
           "tests/test_props_promapi.py")
T_EXP = ("tests/test_exporter.py", "tests/test_props_exporter.py")
T_HOT = ("tests/test_probe_hotpath.py", "tests/test_probe_client.py",
         "tests/test_props_sse_stream.py", "tests/test_slips_since.py")
T_TIMING = ("tests/test_props_engine_timing.py", "tests/test_props_engine_exposition.py",
            "tests/test_probe_run.py")
T_DEC = ("tests/test_evidence_decision.py", "tests/test_decide.py")
T_STG = ("tests/test_runbook_state.py", "tests/test_props_runbook_state.py")
T_GATE = ("tests/test_gates_unit.py",)
T_PROM = ("tests/test_promote_unit.py",)
T_IMG = ("tests/test_image_caps.py",)
T_KEYS = ("tests/test_tui_keys.py", "tests/test_slips_since.py")

MUTATIONS_SINCE: list[Mutation] = [
    # -- compare: the breach stop, the bracket's status and exit code ----------------------
    M("since-breach-stop-sticky", CM, "    if ctx.facts.get(BREACH_STOP_FACT):\n        return (f\"leg",
      "    if False:\n        return (f\"leg",
      "a leg after the stopped one runs once the journal read finds nothing", T_CMP),
    M("since-breach-plan-stops", CM, "    if journal is None or not since:\n        return None",
      "    if journal is None:\n        return None",
      "a plan (no compare_started_at) stops a leg", T_CMP),
    M("since-breach-no-restore", CM,
      "        if ctx.facts.get(BREACH_STOP_FACT):   # stopped early: the seat as it is now",
      "        if False:   # stopped early: the seat as it is now",
      "after a breach stop the candidate holding the seat is not restored", T_CMP),
    M("since-breach-restore-resident", CM,
      "            if c is not None and c.name == resident:\n                return Check(False, f\"the resident ({resident}) already holds the seat\")\n        elif",
      "            if c is None or c.name != resident:\n                return Check(False, f\"the resident ({resident}) already holds the seat\")\n        elif",
      "the resident restored over itself / the candidate left in the seat", T_CMP),
    M("since-breach-legs-not-run", CM, "    if res.facts.get(BREACH_STOP_FACT):\n        run = set",
      "    if False:\n        run = set",
      "a breached bracket with its legs not run called complete", T_CMP),
    M("since-bracket-exit-0", CMC, "    if status == \"complete\":\n        return ac.EXIT_OK",
      "    if status in (\"complete\", \"incomplete\"):\n        return ac.EXIT_OK",
      "a breached (incomplete) bracket exits 0", T_CMP),
    # -- interference: node time, timers, dedupe ---------------------------------------------
    M("since-int-detected-time", "console/probe/interference.py",
      "            at=at or seen, kind=kind,", "            at=seen, kind=kind,",
      "interference stamped when detected, not by the node's clock", T_INT),
    M("since-int-dedupe", "console/probe/interference.py",
      "        key = f\"{kind}:{what}\"\n        if key in self._seen:\n            return\n        self._seen.add(key)\n        seen",
      "        key = f\"{kind}:{what}\"\n        self._seen.add(key)\n        seen",
      "the same disruption recorded again at every check", T_INT),
    M("since-int-timer-active", "console/probe/interference.py",
      "        if was in (None, \"\") or was == \"active\" or props.get(\"ActiveState\") != \"active\":",
      "        if was in (None, \"\") or props.get(\"ActiveState\") != \"active\":",
      "a timer active since before the run (not stopped by the hold) called a breach", T_INT),
    M("since-int-timer-unknown", "console/probe/interference.py",
      "        if was in (None, \"\") or was == \"active\"", "        if was == \"active\"",
      "a timer whose state was not read at the start judged started", T_INT),
    M("since-int-timers-unwatched", "console/probe/interference.py",
      "                for s, at in timer_events(self._timer_base, t):", "                for s, at in []:",
      "a timer started by hand mid-probe never disrupts the run", T_INT),
    M("since-int-svc-time", "console/probe/interference.py",
      "        at = _node_time(props, \"ExecMainStartTimestamp\", \"InactiveExitTimestamp\",\n                        \"ActiveEnterTimestamp\")",
      "        at = None",
      "a service's start stamped by detection", T_INT),
    M("since-int-first-disruption", "console/probe/interference.py",
      "    return min(disruptions, key=lambda x: x.at) if disruptions else None",
      "    return disruptions[-1] if disruptions else None",
      "the run's disruption taken from the last seen, not the earliest by the node's clock", T_INT),
    M("since-int-disturbed-inflight", PR,
      "r.sent_at + timedelta(seconds=max(dur, 0.0)) >= at:",
      "r.sent_at >= at:",
      "a request in flight at the disruption counted as undisturbed", T_INT),
    M("since-int-counter-down", "console/probe/interference.py",
      "        if a is not None and b is not None and b < a:",
      "        if a is not None and b is not None and b < a - 1:",
      "a counter that went down by one read as no restart", T_INT),
    # -- release --defer and the fire-at-once forecast ----------------------------------------
    M("since-defer-unstopped-ignored", HO,
      "        if u not in h.stopped:\n            raise ValueError",
      "        if False:\n            raise ValueError",
      "--defer of a timer the hold did not stop silently ignored", T_REL),
    M("since-defer-too-soon", HO,
      "            if w <= utcnow() + timedelta(seconds=TTL_MIN_S):",
      "            if w <= utcnow():",
      "a deferral a second away accepted", T_REL),
    M("since-defer-firing-all", HO,
      "        if defer_firing is not None and not isinstance(fc, str) and fc.fires_at_once:",
      "        if defer_firing is not None:",
      "--defer-firing defers timers that would not fire", T_REL),
    M("since-onboot-container", T,
      "    boot = userspace if virt in CONTAINER_VIRT else (kernel or userspace)",
      "    boot = kernel or userspace",
      "OnBootSec counted from the host kernel's boot inside a container", T_REL),
    M("since-onboot-disabled", T,
      "            if fired and e <= max(fired):\n                continue",
      "            if fired and e < min(fired):\n                continue",
      "a one-time trigger systemd disabled forecast as firing", T_REL),
    # -- the live probe panel -----------------------------------------------------------------
    M("since-live-window-5s", LV,
      "        return cur.name, max(now - RATE_WINDOW_S, cur.started), now",
      "        return cur.name, now - RATE_WINDOW_S, now",
      "a 1.5 s phase divided by 5 s", T_LIVE),
    M("since-live-ended-window", LV,
      "    return last.name, max(last.ended - RATE_WINDOW_S, last.started), last.ended",
      "    return last.name, last.ended - RATE_WINDOW_S, last.ended",
      "a finished phase's rate over 5 s whatever it lasted", T_LIVE),
    M("since-live-unknown-zero", LV, "    if not span > 0:\n        return None",
      "    if not span > 0:\n        return 0.0", "no rate shown as 0 tok/s", T_LIVE),
    # -- the status line's fit word -------------------------------------------------------------
    M("since-fitword-candidate-only", VD,
      "    for role in (\"candidate\", \"resident\"):", "    for role in (\"candidate\",):",
      "the resident's OVER hidden behind the candidate's fits", T_FITW),
    M("since-fitword-noverdict", VD,
      "    if getattr(budget, \"no_verdict\", None):\n        return 2, \"NO VERDICT\", \"bad\"",
      "    if False:\n        return 2, \"NO VERDICT\", \"bad\"",
      "a candidate without a verdict read from its verdict", T_FITW),
    M("since-fitword-na-fits", VD, "        return 1, \"n/a\", \"unknown\"",
      "        return 0, \"n/a\", \"unknown\"", "a side that cannot be budgeted ranked as fits",
      T_FITW),
    # -- the web view -------------------------------------------------------------------------
    M("since-serve-any-host", SP, "    return str(addr) if addr.is_loopback else None",
      "    return str(addr)", "--host 0.0.0.0 accepted: the view unauthenticated on the LAN",
      T_SRV),
    M("since-serve-localhost", SP, "    if h.lower() == \"localhost\":\n        return \"127.0.0.1\"",
      "    if h.lower().startswith(\"localhost\"):\n        return \"127.0.0.1\"",
      "localhost.evil.example taken for loopback", T_SRV),
    M("since-serve-host-header", SV, "    if not host_header:\n        return False",
      "    if not host_header:\n        return True", "a request without Host served", T_SRV),
    M("since-serve-readonly-argv", SP,
      "            and list(argv[1:4]) == [\"-m\", \"seat_console\", READONLY_FLAG])",
      "            and READONLY_FLAG in argv)",
      "a served command with --readonly after the subcommand (overridden) accepted", T_SRV),
    M("since-serve-viewers-cap", SP, "    if not 1 <= max_viewers <= MAX_VIEWERS_CAP:",
      "    if not 0 <= max_viewers <= MAX_VIEWERS_CAP:", "--max-viewers 0 accepted", T_SRV),
    # -- the fleet screen's rows (Prometheus values are outside input) ------------------------
    M("since-fleet-amount-negative", "console/fleet/rows.py",
      "    if v is not None and math.isfinite(v) and 0 <= v <= top:",
      "    if v is not None and math.isfinite(v) and v <= top:",
      "a negative memory/count from Prometheus taken as a value", T_FLEET),
    M("since-fleet-amount-inf", "console/fleet/rows.py",
      "    if v is not None and math.isfinite(v) and 0 <= v <= top:",
      "    if v is not None and 0 <= v:",
      "+Inf from Prometheus taken as a value", T_FLEET),
    M("since-fleet-future-fresh", "console/fleet/rows.py",
      "    if last > now + MAX_CLOCK_SKEW_S:\n        return (",
      "    if False:\n        return (",
      "a seat whose last sample is dated in the future shows fresh", T_FLEET),
    M("since-fleet-flag-half", "console/fleet/rows.py", "    if v == 1:\n        return True",
      "    if v is not None and v >= 0.5:\n        return True", "a flag of 0.5 or +Inf read as set",
      T_FLEET),
    M("since-fleet-absent-usual", "console/fleet/rows.py",
      "    complete = p is not None and p == len(CORE_FLAGS)",
      "    complete = True", "a seat that sent only some flag families read as at their usual "
      "value (not held, engine up)", T_FLEET),
    M("since-fleet-stale", "console/fleet/rows.py",
      "        if age > 2 * scrape_interval_s:\n            state = \"stale\"",
      "        if age > 20 * scrape_interval_s:\n            state = \"stale\"",
      "a seat silent for ten scrapes shown as current", T_FLEET),
    M("since-fleet-no-lease-first", "console/fleet/rows.py",
      "        elif no_lease:\n            state = \"without-lease\"\n        elif up is False",
      "        elif False:\n            state = \"without-lease\"\n        elif up is False",
      "a hold without lease (nothing will restore the timers) not ranked as trouble", T_FLEET),
    M("since-fleet-down-held", "console/fleet/rows.py",
      "        elif up is False and held is not True:", "        elif up is False:",
      "a held seat with its engine down (deliberate) shown as broken", T_FLEET),
    M("since-fleet-unknown-healthy", "console/fleet/rows.py",
      "        elif up is True and held is False:\n            state = \"healthy\"",
      "        elif up is not False and held is not True:\n            state = \"healthy\"",
      "a seat whose state is unknown shown healthy", T_FLEET),
    # -- the exporter's hold metrics (the fleet's alerts act on them) ------------------------
    M("since-exp-stopped-unknown", "console/exporter/model.py",
      "        if self.loaded is None or self.active is None:\n            return None",
      "        if self.loaded is None:\n            return None",
      "a timer block without ActiveState read as stopped: a hold where there is none", T_EXP),
    M("since-exp-any-stopped", "console/exporter/model.py",
      "    return None if None in states else False", "    return False",
      "timers of unknown state read as none stopped", T_EXP),
    M("since-exp-without-lease-unknown", "console/exporter/model.py",
      "    if stopped is not None and armed is not None:\n        without.add_metric",
      "    if True:\n        without.add_metric",
      "hold WITHOUT lease exported from an unknown reading", T_EXP),
    # -- the probe's hot path and the timing check ------------------------------------------
    M("since-hot-close-pooled", "console/probe/hotpath.py",
      "            if ex is not None and ex.complete and ex.keep_alive and ex.failure is None \\\n",
      "            if ex is not None and ex.complete and ex.failure is None \\\n",
      "a Connection: close connection goes back to the pool", T_HOT),
    M("since-hot-stale-idle", "console/probe/hotpath.py",
      "            if not c.closed and now - c.idle_since < KEEPALIVE_EXPIRY_S and (",
      "            if not c.closed and (",
      "an idle connection past the server's keep-alive reused", T_HOT),
    M("since-hot-idle-bytes", "console/probe/hotpath.py",
      "        if ex is None:                   # bytes on an idle connection: not ours to keep\n            self.close()\n            return",
      "        if ex is None:                   # bytes on an idle connection: not ours to keep\n            return",
      "a connection that spoke while idle kept in the pool", T_HOT),
    M("since-timing-no-inf", "console/core/engine_timing.py",
      "    if bounds[-1] != math.inf:\n        return (",
      "    if False:\n        return (",
      "a histogram without its +Inf bucket taken as the whole population", T_TIMING),
    M("since-timing-not-cumulative", "console/core/engine_timing.py",
      "    if any(b > a for a, b in zip(cumulative[1:], cumulative, strict=False)):",
      "    if False:", "bucket counts that go down taken as a histogram", T_TIMING),
    M("since-timing-rank", "console/core/engine_timing.py",
      "    rank = max(math.ceil(q * n - 1e-9), 1)", "    rank = max(math.floor(q * n), 1)",
      "the quantile's rank rounded down: the bucket below the p95's", T_TIMING),
    # -- this session's runbook code (issue 30): decision, stages, gates, promote, image ----
    M("since-decide-keep-unknown", "console/evidence/decision.py",
      "    if failed:\n        why = ", "    if failed and not unknown:\n        why = ",
      "a failed check hidden behind an unanswered question (INCONCLUSIVE, not KEEP)", T_DEC),
    M("since-decide-unknown-pass", "console/evidence/decision.py",
      "    if unknown:\n        needs = ", "    if False:\n        needs = ",
      "too little data read as PROMOTE-ABLE", T_DEC),
    M("since-stages-redone", "actions/stages.py",
      "            if dep.at is not None and cur.at is not None and dep.at > cur.at:",
      "            if False:",
      "a probe before a new backport shown done, not stale", T_STG),
    M("since-stages-notdone", "actions/stages.py",
      "            if dep.status != \"done\":\n                st[s] = _replace(cur, status=\"stale\",",
      "            if dep.status == \"todo\":\n                st[s] = _replace(cur, status=\"stale\",",
      "a stage resting on a failed or stale one shown done", T_STG),
    M("since-gate-compare-candidate", "actions/gates.py",
      "        if seat.holder == \"resident\":\n            return None\n        fix = ",
      "        if seat.holder in (\"resident\", \"candidate\"):\n            return None\n        fix = ",
      "compare started with the candidate in the seat (measured as arm A)", T_GATE),
    M("since-gate-release-candidate", "actions/gates.py",
      "        if seat.holder not in (\"candidate\", \"both\") or promote_in_effect(journal) is not None:",
      "        if seat.holder not in (\"both\",) or promote_in_effect(journal) is not None:",
      "release accepted silently with the candidate in the seat", T_GATE),
    M("since-gate-force-reason", "actions/gates.py",
      "            if not reason.strip():\n                raise StepError(\"--force needs --reason",
      "            if False:\n                raise StepError(\"--force needs --reason",
      "a forced release without a reason", T_GATE),
    M("since-promote-not-promoteable", "actions/promote.py",
      "    if what != \"PROMOTE-ABLE\":\n        return (",
      "    if what not in (\"PROMOTE-ABLE\", \"INCONCLUSIVE\", \"KEEP\"):\n        return (",
      "a decision of another kind taken as PROMOTE-ABLE", T_PROM),
    M("since-promote-other-image", "actions/promote.py",
      "    if image_id not in images:", "    if False:",
      "a decision about another image promotes the candidate in the seat", T_PROM),
    M("since-image-has-unknown", "console/sources/image_caps.py",
      "    if checks and all(c.ok is True for c in checks):\n        return True",
      "    if checks and all(c.ok is not False for c in checks):\n        return True",
      "an image whose checks could not run called HAS it", T_IMG),
    # -- the key table ------------------------------------------------------------------------
    M("since-keys-readonly", KT,
      "    return [b for b in bindings if not (isinstance(b, Binding) and is_node_action(b))]",
      "    return list(bindings)", "node actions offered under --readonly", T_KEYS),
    M("since-keys-remap-label", KT, "            b = replace(b, key=keymap[b.id], key_display=None)",
      "            b = replace(b, key=keymap[b.id])",
      "a remapped key keeps its old label in help", T_KEYS),
    M("since-keys-clash", KT,
      "            if other is not None and other != k.action and not {other, k.action} <= pair:",
      "            if other is not None and other != k.action and False:",
      "two actions on one key accepted", T_KEYS),
    M("since-keys-unknown-id", KT, "    if unknown:\n        raise KeymapError",
      "    if False:\n        raise KeymapError", "an unknown binding id ignored", T_KEYS),
]
"""Realistic slips in the code added since the first half (issue 31), run with
``--set since`` (results in ``docs/mutation-since.json``)."""


def _area(file: str) -> str:
    """The area a mutated file belongs to, for the per-area kill rate."""
    if file.startswith(("actions/", "console/commands/")):
        return "actions"
    if file.startswith("console/probe/") or file in ("console/core/probe_stats.py",
                                                     "console/core/engine_timing.py"):
        return "probe"
    if file.startswith("console/evidence/"):
        return "evidence"
    return "core"


def _tree_files(src: Path) -> list[str]:
    """Tracked files plus untracked files git does not ignore (the working tree as it is)."""
    out = subprocess.run(["git", "-C", str(src), "ls-files", "-z", "--cached", "--others",
                          "--exclude-standard"], capture_output=True, check=True).stdout
    return [f for f in out.decode().split("\0") if f and (src / f).is_file()]


def make_copy(src: Path, dest: Path) -> dict[str, str]:
    """Copy the working tree to ``dest`` and return the environment that imports it."""
    if dest.exists():
        shutil.rmtree(dest)
    for rel in _tree_files(src):
        target = dest / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(src / rel, target)
    (dest / "_imp").mkdir()
    os.symlink(dest / "console", dest / "_imp" / "seat_console")
    for sub in ("widgets", "actions"):
        link = dest / "console" / sub
        if not link.exists():
            os.symlink(dest / sub, link)
    env = dict(os.environ, PYTHONPATH=str(dest / "_imp"), PYTHONDONTWRITEBYTECODE="1",
               HYPOTHESIS_PROFILE=os.environ.get("HYPOTHESIS_PROFILE", "ci"))
    check = subprocess.run(
        [sys.executable, "-c", "import seat_console.node.nvml as m, seat_console.actions as a;"
                               "print(m.__file__); print(a.__file__)"],
        cwd=dest, env=env, capture_output=True, text=True, check=True).stdout.split()
    for path in check:
        if not path.startswith(str(dest)):
            raise SystemExit(f"the copy is not what gets imported: {path} (expected under {dest})")
    return env


def run_tests(dest: Path, env: dict[str, str], tests: tuple[str, ...],
              timeout_s: float) -> tuple[str, float, str]:
    """``("passed" | "failed" | "timeout", seconds, output tail)`` of ``tests`` in the copy."""
    t0 = time.monotonic()
    try:
        r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider",
                            "-m", "not lab", *tests], cwd=dest, env=env, capture_output=True,
                           text=True, timeout=timeout_s)
    except subprocess.TimeoutExpired:
        return "timeout", time.monotonic() - t0, ""
    return (("passed" if r.returncode == 0 else "failed"), time.monotonic() - t0,
            (r.stdout + r.stderr)[-3000:])


def main(argv: list[str] | None = None) -> int:
    """Run the mutations (see the module docstring). Returns the exit status."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--set", default="core", choices=("core", "since"),
                    help="core: the first half's mutations (docs/mutation.json); since: the "
                         "code added since (issue 31, docs/mutation-since.json)")
    ap.add_argument("-k", default="", help="only mutations whose id contains this")
    ap.add_argument("--area", action="append", default=[],
                    help="only mutations of files under this path (repeatable), e.g. actions/")
    ap.add_argument("--ids", default="", help="only these mutation ids (comma-separated)")
    ap.add_argument("--list", action="store_true", help="list the mutations and exit")
    ap.add_argument("--check", action="store_true", help="only check that each one applies")
    ap.add_argument("--timeout", type=float, default=240.0, help="seconds per test run")
    ap.add_argument("--target", type=float, default=0.90, help="kill rate to reach")
    ap.add_argument("--out", default=None,
                    help="where to write the results (JSON)")
    ap.add_argument("--workdir", default=None, help="where to put the copy (default: a temp dir)")
    args = ap.parse_args(argv)
    if args.out is None:
        args.out = str(REPO / "docs" / ("mutation.json" if args.set == "core"
                                        else "mutation-since.json"))
    pool = MUTATIONS if args.set == "core" else MUTATIONS_SINCE
    chosen = [m for m in pool if args.k in m.id
              and (not args.area or any(m.file.startswith(a) for a in args.area))
              and (not args.ids or m.id in args.ids.split(","))]
    if args.list:
        for m in chosen:
            print(f"{m.id:32} {m.file:34} {m.why}")
        return 0
    invalid = []
    for m in chosen:
        n = (REPO / m.file).read_text().count(m.old)
        if n != 1:
            invalid.append(f"{m.id}: the text to mutate occurs {n} times in {m.file}")
    if invalid:
        print("\n".join(invalid))
        return 2
    if args.check:
        print(f"{len(chosen)} mutations apply")
        return 0
    dest = Path(args.workdir or tempfile.mkdtemp(prefix="seat-mutation-")) / "tree"
    print(f"copying the working tree to {dest}", flush=True)
    env = make_copy(REPO, dest)
    all_tests = tuple(sorted({t for m in chosen for t in m.tests}))
    status, secs, tail = run_tests(dest, env, all_tests, args.timeout * 3)
    print(f"baseline (unmutated) {status} in {secs:.0f} s: {' '.join(all_tests)}", flush=True)
    if status != "passed":
        print(tail)
        return 2
    results = []
    for m in chosen:
        path = dest / m.file
        original = path.read_text()
        path.write_text(original.replace(m.old, m.new, 1))
        try:
            status, secs, _tail = run_tests(dest, env, m.tests, args.timeout)
        finally:
            path.write_text(original)
        outcome = {"passed": "survived", "failed": "killed", "timeout": "timeout"}[status]
        results.append({"id": m.id, "file": m.file, "why": m.why, "outcome": outcome,
                        "seconds": round(secs, 1)})
        print(f"{outcome:9} {secs:5.0f} s  {m.id:32} {m.why}", flush=True)
    killed = sum(r["outcome"] in ("killed", "timeout") for r in results)
    rate = killed / len(results) if results else 0.0
    summary = {"mutations": len(results), "killed": killed, "survived": len(results) - killed,
               "kill_rate": round(rate, 4), "results": results}
    by_area: dict[str, list[int]] = {}
    for r in results:
        area = _area(r["file"])
        k_n = by_area.setdefault(area, [0, 0])
        k_n[0] += r["outcome"] in ("killed", "timeout")
        k_n[1] += 1
    summary["by_area"] = {a: {"killed": k, "mutations": n, "kill_rate": round(k / n, 4)}
                          for a, (k, n) in sorted(by_area.items())}
    for a, (k, n) in sorted(by_area.items()):
        print(f"  {a:20} {k}/{n} killed ({k / n:.0%})")
    if not args.k and not args.area and not args.ids:
        Path(args.out).write_text(json.dumps(summary, indent=2) + "\n")
    print(f"\n{killed}/{len(results)} killed ({rate:.1%}); target {args.target:.0%}")
    shutil.rmtree(dest.parent, ignore_errors=True)
    return 0 if rate >= args.target else 1


if __name__ == "__main__":
    sys.exit(main())
