#!/usr/bin/env python3
"""A bounded, seeded fuzz run over every parser of outside input (issue #22). Not in CI.

For each parser, ``--examples N`` generated inputs (random generation from ``--seed``, hostile
by construction: lone surrogates, Unicode digits, calendar-edge times with offsets, runs of
escaped quotes, deep nesting, huge numbers, wrong JSON types, truncated and flipped bytes).
Each outcome is one of:

* ``ok``: a result; ``error``: a documented exception of that parser (its typed error);
* ``crash``: any other exception, counted by site (exception type, file:line);
* ``hang``: the input ran past ``--deadline`` seconds (the parser runs in a child process that
  reports each input; a late one is killed and the run resumes at the next input);
* ``silent-wrong``: a result that an oracle refutes (an unknown read as 0, a histogram sum
  without ``_sum``, a producer name of another type, a negative restart count…).

Prints the counts per parser; exits 1 on any crash, hang or silent-wrong result.

    python3 scripts/fuzz.py                      # 3,000 per parser: 60,000 inputs
    python3 scripts/fuzz.py --examples 200 -k silences,journal
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import random
import shutil
import struct
import sys
import tempfile
import time
import traceback
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]

# -- hostile generation ---------------------------------------------------------------------------
ODD_CHARS = ["\ud800", "\udfff", "\udc80", "²", "١", "٣", "\u200b", "\x00", "\x07", "\x1b",
             "\ufeff", "\u2028", "é", "\U0001F600", "\\", '"', "'", "\n", "{", "[", ":"]
TIMES = ["9999-12-31T23:59:59-01:00", "0001-01-01T00:00:00+01:00", "9999-12-31T23:59:59Z",
         "2026-12-01T12:00:00Z", "2026-12-01T12:00:00", "2026-13-01T00:00:00Z",
         "2026-12-01T12:00:00.123456789Z", "2026-12-01T12:00:00+99:99", "", "0"]


def h_text(r: random.Random, n: int = 30) -> str:
    """A short string mixing ASCII, odd code points and structure characters."""
    k = r.randrange(n + 1)
    return "".join(r.choice(ODD_CHARS) if r.random() < 0.3 else chr(r.randrange(32, 127))
                   for _ in range(k))


def h_scalar(r: random.Random) -> Any:
    c = r.randrange(12)
    return [None, True, False, 0, -1, 2**63, r.randrange(-10**6, 10**6), 1.5, -0.0,
            h_text(r), r.choice(TIMES), "9" * r.randrange(1, 30)][c]


def h_json(r: random.Random, depth: int = 0) -> Any:
    """A JSON value with hostile leaves, at most 4 levels."""
    if depth >= 4 or r.random() < 0.4:
        return h_scalar(r)
    if r.random() < 0.5:
        return [h_json(r, depth + 1) for _ in range(r.randrange(4))]
    return {h_text(r, 8): h_json(r, depth + 1) for _ in range(r.randrange(4))}


def h_big(r: random.Random) -> str:
    """A large hostile text: escaped-quote runs, deep brackets, long numbers (up to ~200 kB)."""
    n = r.choice([1000, 20_000, 100_000])
    return r.choice(['"' + '\\"' * n, "[" * n + "]" * n, '{"a":' * (n // 5) + "1",
                     "[" + "9" * (n // 10) + "]", "\\" * n, '["' + "\\u00" * (n // 4) + '"]'])


def h_doc(r: random.Random, template: Any = None) -> str:
    """JSON text: a (mutated) template, a random value, bytes-like garbage or a big text."""
    c = r.random()
    if template is not None and c < 0.5:
        return json.dumps(mutate(r, template))
    if c < 0.75:
        return json.dumps(h_json(r))
    if c < 0.9:
        return h_text(r, 200)
    return h_big(r)


def mutate(r: random.Random, v: Any, rate: float | None = None) -> Any:
    """``v`` with some fields replaced by hostile values (types changed, removed, odd text);
    ``rate``: the share of fields touched (default: drawn per input, 2 % to 40 %)."""
    rate = r.choice([0.02, 0.1, 0.4]) if rate is None else rate
    if r.random() > rate * 2.5 and not isinstance(v, dict | list):
        return v
    if isinstance(v, dict):
        out = {}
        for k, x in v.items():
            p = r.random()
            if p < rate / 4:
                continue
            out[k] = h_json(r) if p < rate else mutate(r, x, rate)
        return out
    if isinstance(v, list):
        return [mutate(r, x, rate) for x in v if r.random() > rate / 4]
    if isinstance(v, str):
        return r.choice([v, v + h_text(r, 4), h_text(r), r.choice(TIMES)])
    if isinstance(v, int | float) and not isinstance(v, bool):
        return r.choice([v, 0, -v, 2**64, 1e300, r.choice(["1", "١", "²"])])
    return v


# -- parsers ---------------------------------------------------------------------------------------
class Spec:
    """One parser: ``gen(r, tmp)`` makes an input, ``run(x, tmp)`` parses it, ``errors`` are its
    documented exception types, ``oracle(x, result)`` names a silent wrong result (or None)."""

    def __init__(self, name: str, gen: Callable[[random.Random, Path], Any],
                 run: Callable[[Any, Path], Any], errors: Callable[[], tuple[type, ...]],
                 oracle: Callable[[Any, Any], str | None] | None = None) -> None:
        self.name, self.gen, self.run, self.errors, self.oracle = name, gen, run, errors, oracle


def _specs() -> list[Spec]:
    sys.path.insert(0, str(ROOT / "tests"))
    import ckpt_factory as F

    specs: list[Spec] = []

    def add(name, gen, run, errors, oracle=None):
        specs.append(Spec(name, gen, run, errors, oracle))

    # untrusted JSON
    def _load_json(x, _t):
        from seat_console.core.untrusted import load_json
        return load_json(x, "reply")
    add("load_json", lambda r, t: h_doc(r), _load_json, lambda: (_err("untrusted", "InputError"),))

    # safetensors header
    def _hdr_gen(r, t):
        tensors = {h_text(r, 12) if r.random() < 0.3 else f"w{i}":
                   mutate(r, {"dtype": r.choice(["BF16", "F32", "U8", "F4", "X"]),
                              "shape": [r.randrange(4), 2], "data_offsets": [0, 0]})
                   for i in range(r.randrange(1, 4))}
        body = json.dumps(tensors).encode() if r.random() < 0.8 else h_big(r).encode(
            "utf-8", "surrogatepass")
        return struct.pack("<Q", len(body) if r.random() < 0.9 else r.randrange(2**40)) + body

    def _hdr_run(x, t):
        from seat_console.sources.checkpoint import read_safetensors_header
        p = t / "model.safetensors"
        p.write_bytes(x)
        return read_safetensors_header(p)
    add("safetensors_header", _hdr_gen, _hdr_run, lambda: (_err("checkpoint", "CheckpointError"),))

    # a checkpoint directory: index, config.json, hf_quant_config.json
    base_cfg = F.llama3_8b_config()

    def _ckpt_gen(r, t):
        wm = {"w": r.choice(["model.safetensors", "m" * 300 + ".safetensors", h_text(r, 20),
                             "../x.safetensors"])}
        if r.random() < 0.3:
            wm[h_text(r, 10)] = "model.safetensors"
        return {"config": h_doc(r, base_cfg), "index": json.dumps({"weight_map": wm})
                if r.random() < 0.8 else h_doc(r), "hfq": h_doc(r, {
                    "producer": {"name": "modelopt"}, "quantization": {"quant_algo": "FP8"}})}

    def _ckpt_run(x, t):
        from seat_console.sources.checkpoint import scan_checkpoint
        d = t / "ck"
        shutil.rmtree(d, ignore_errors=True)
        d.mkdir()
        F.write_sparse(d / "model.safetensors", [("w", "BF16", [2])])
        (d / "config.json").write_text(x["config"], "utf-8", errors="surrogatepass")
        (d / "model.safetensors.index.json").write_text(x["index"], "utf-8",
                                                         errors="surrogatepass")
        (d / "hf_quant_config.json").write_text(x["hfq"], "utf-8", errors="surrogatepass")
        s = scan_checkpoint(d)
        json.dumps(s.model_dump(mode="json"))   # the CLI's --json printing
        return s

    def _ckpt_oracle(x, s):
        if s.quantization.method is not None and not isinstance(s.quantization.method, str):
            return f"quant method {s.quantization.method!r} is not text"
        return None
    add("checkpoint_dir", _ckpt_gen, _ckpt_run, lambda: (_err("checkpoint", "CheckpointError"),),
        _ckpt_oracle)

    # the KV model over config.json
    def _kv_run(x, t):
        from seat_console.fit.kvcache import EngineKVParams, kv_capacity, model_kv
        m = model_kv(x, tensor_parallel_size=2)
        return kv_capacity(m, 1 << 30, EngineKVParams(max_model_len=4096))
    jamba = {"architectures": ["JambaForCausalLM"], "num_hidden_layers": 8, "hidden_size": 64,
             "num_attention_heads": 4, "num_key_value_heads": 2, "attn_layer_period": 4,
             "attn_layer_offset": 1, "mamba_d_state": 16, "mamba_d_conv": 4, "mamba_expand": 2}
    add("kv_model", lambda r, t: mutate(r, r.choice([base_cfg, jamba, base_cfg | {
        "layer_types": ["full_attention"] * 32}])), _kv_run,
        lambda: (_err("kvcache", "KVModelError"),),
        lambda x, c: "negative capacity" if c.kv_tokens < 0 or c.num_blocks < 0 else None)

    # vLLM /metrics
    metrics = (ROOT / "tests" / "data" / "engine" / "vllm-0.32.0-cpu.metrics.txt").read_text()
    lines = metrics.splitlines()

    def _metrics_gen(r, t):
        ls = [ln for ln in lines if r.random() > 0.2]
        for _ in range(r.randrange(5)):
            i = r.randrange(len(ls) or 1)
            ls.insert(i, r.choice([h_text(r, 60), "vllm:x_bucket{le=\"" + h_text(r, 5) + "\"} 1",
                                   "vllm:e2e_request_latency_seconds_sum NaN", h_big(r)[:2000]]))
        return "\n".join(ls) + "\n"

    def _metrics_run(x, t):
        from seat_console.sources.engine import parse_metrics
        return parse_metrics(x)

    def _metrics_oracle(x, m):
        for name in ("e2e_latency", "ttft", "itl", "tpot"):
            h = getattr(m, name, None)
            if h is not None and h.sum_s == 0 and "_sum" not in x:
                return f"{name}: sum 0 without a _sum sample"
        return None
    add("engine_metrics", _metrics_gen, _metrics_run, lambda: (ValueError,), _metrics_oracle)

    def _prom_run(x, t):
        from seat_console.core.promtext import parse_families
        return parse_families(x, "/metrics")
    add("prom_text", _metrics_gen, _prom_run, lambda: (ValueError,),
        lambda x, fams: None if isinstance(fams, list) else f"got {type(fams).__name__}")

    # the engine's own hold state (/is_paused, /is_sleeping) and the drain's argv read
    def _flag_run(x, _t):
        from seat_console.sources.engine import parse_flag
        return parse_flag(x, "/is_paused", "is_paused")
    add("engine_flag", lambda r, t: h_doc(r, {"is_paused": True}), _flag_run,
        lambda: (_err("untrusted", "InputError"),))

    def _argv_gen(r, t):
        return [r.choice(["--shutdown-timeout", "--shutdown-timeout=" + h_text(r, 4), h_text(r, 8),
                          str(r.randrange(-5, 10**9)), None, 7]) for _ in range(r.randrange(6))]

    def _argv_run(x, _t):
        from seat_console.actions.drain import shutdown_timeout_of
        return shutdown_timeout_of(x)
    add("drain_argv", _argv_gen, _argv_run, lambda: (),
        lambda x, v: None if v is None or (isinstance(v, int) and v >= 0) else f"got {v!r}")

    def _newcomers_run(x, _t):
        from seat_console.actions.drain import newcomers_while_paused
        return newcomers_while_paused(x)
    add("drain_version", lambda r, t: r.choice([h_text(r, 12), "0.32.0", "0.33.0.dev1", None, 7]),
        _newcomers_run, lambda: (),
        lambda x, v: None if v in ("queued", "refused", None) else f"got {v!r}")
    _engine_specs(add, lines)

    # Alertmanager
    def _sil_gen(r, t):
        good = {"id": "x", "status": {"state": "active"}, "matchers": [
            {"name": "instance", "value": "seat-node:8000", "isRegex": r.random() < 0.3,
             "isEqual": True}], "startsAt": "2026-12-01T10:00:00Z",
            "endsAt": "2026-12-01T14:00:00Z", "createdBy": "c", "comment": "c"}
        return [mutate(r, good) for _ in range(r.randrange(1, 4))] + [good]

    def _sil_run(x, t):
        from seat_console.sources.silences import SilenceSource
        return _silence_source(json.dumps(x).encode(), SilenceSource).read()

    def _sil_oracle(x, reading):
        from seat_console.core.base import Unavailable
        if isinstance(reading, Unavailable):
            return f"one bad silence made the panel unavailable: {reading.reason[:120]}"
        return None
    add("silences", _sil_gen, _sil_run, lambda: (), _sil_oracle)

    # docker inspect / events / times
    def _insp_run(x, t):
        from seat_console.sources.containers import container_state_from_inspect
        return container_state_from_inspect("resident", "seat", x, None)
    add("docker_inspect", lambda r, t: mutate(r, {"Id": "a" * 64, "RestartCount": 1, "State": {
        "Status": "running", "Running": True, "StartedAt": r.choice(TIMES), "ExitCode": 0},
        "Config": {"Image": "engine:1", "Env": ["CUDA_VISIBLE_DEVICES=0"]}, "Image": "sha256:x"}),
        _insp_run, lambda: (),
        lambda x, s: "negative restart count" if (s.restart_count or 0) < 0 else None)

    def _ev_run(x, t):
        from seat_console.node.docker import event_from_api
        return event_from_api(x)
    add("docker_events", lambda r, t: mutate(r, {"Type": "container", "Action": "die",
                                                 "timeNano": 1_700_000_000_000_000_000,
                                                 "Actor": {"ID": "a", "Attributes": {
                                                     "name": "seat", "exitCode": "0"}}}),
        _ev_run, lambda: ())

    def _inspect_obj_run(x, t):
        from seat_console.sources.containers import ContainerSource
        api = type("Api", (), {"inspect_container": lambda self, n: x,
                               "inspect_image": lambda self, i: {}})()
        client = type("C", (), {"api": api})()
        return ContainerSource("unix:///nonexistent", {"resident": "seat"},
                               watch_events=False)._inspect(client, "resident", "seat")
    add("docker_inspect_reply", lambda r, t: h_json(r), _inspect_obj_run, lambda: ())

    # /proc/PID/cgroup
    def _cg_gen(r, t):
        ids = ["a" * 64, "b" * 64, h_text(r, 64)]
        parts = [r.choice(["/docker/{}", "/system.slice/docker-{}.scope", "/kubepods/pod{}",
                           "/containerd/{}", "/{}", "/user.slice"]).format(r.choice(ids))
                 for _ in range(r.randrange(1, 4))]
        return "\n".join(f"{r.choice(['0', '1', h_text(r, 2)])}::{''.join(parts)}"
                         for _ in range(r.randrange(1, 3)))

    def _cg_run(x, t):
        from seat_console.sources.gpu import parse_cgroup
        return x, parse_cgroup(x)

    def _cg_oracle(x, res):
        text, ref = res
        if ref is None or "\n" in text:
            return None
        # the innermost id the path names must win (nested containers)
        import re
        hits = [(m.end(), m.group(1)) for m in re.finditer(
            r"(?:/docker/|/containerd/)([ab]{64})(?=/|$)|docker-([ab]{64})\.scope", text)
            for _ in [0] if m.group(1) or m.group(2)]
        hits = [(e, i or "") for e, i in hits]
        hits += [(m.end(), m.group(1)) for m in re.finditer(r"docker-([ab]{64})\.scope", text)]
        if "kubepods" in text:   # a bare id is a container under kubepods (the CRI layout)
            hits += [(m.end(), m.group(1)) for m in re.finditer(r"/([ab]{64})(?=/|$)", text)]
        hits = [h for h in hits if h[1]]
        if hits and ref.id in ("a" * 64, "b" * 64) and max(hits)[1] != ref.id:
            return f"outer container {ref.id[:8]} for {text[:80]!r}"
        return None
    add("cgroup", _cg_gen, _cg_run, lambda: (), _cg_oracle)

    # the profile
    from seat_console.core.profile import default_profile_text
    prof = default_profile_text()

    def _prof_gen(r, t):
        s = prof
        for _ in range(r.randrange(1, 4)):
            i = r.randrange(len(s))
            s = s[:i] + r.choice([h_text(r, 6), '"' + h_text(r, 6) + '"', r.choice(ODD_CHARS),
                                  'gpus = ["²", "1"]\n', "\n[node]\n"]) + s[i:]
        return s

    def _prof_run(x, t):
        from seat_console.core.profile import parse_profile
        return parse_profile(x, "p.toml")

    def _prof_oracle(x, p):
        from seat_console.core.gpu_ids import match_seat
        for e in p.node.gpus:
            match_seat(e, 0, "GPU-x", "00000000:2A:00.0")   # never raises on an accepted entry
            if not e.isascii():
                return f"non-ASCII GPU entry {e!r} accepted"
        return None
    add("profile", _prof_gen, _prof_run, lambda: (_err_mod("seat_console.core.profile", "ProfileError"),),
        _prof_oracle)

    # systemd
    def _show_run(x, t):
        from seat_console.sources.timers import build_timer_state, parse_show_blocks
        return [build_timer_state("x.timer", b, None) for b in parse_show_blocks(x)]
    add("systemctl_show", lambda r, t: "\n".join(
        f"{r.choice(['NextElapseUSecRealtime', 'LastTriggerUSec', 'ActiveState', 'Result', h_text(r, 5)])}"
        f"={r.choice([h_text(r, 20), r.choice(TIMES), str(2**64), 'yes', '١٢'])}"
        for _ in range(r.randrange(8))), _show_run, lambda: (ValueError,))

    def _lt_run(x, t):
        from seat_console.sources.timers import parse_list_timers_json
        return parse_list_timers_json(x)
    add("systemctl_list_timers", lambda r, t: h_doc(r, [{"unit": "a.timer", "next": 1, "last": 2,
                                                          "activates": "a.service"}]),
        _lt_run, lambda: (ValueError,))

    # vLLM start-up log, SSE chunks
    def _log_run(x, t):
        from seat_console.core.profile import DEFAULT_FAILURE_PATTERNS
        from seat_console.sources.startup_log import parse_startup_log, scan_failures
        return parse_startup_log(x), scan_failures(x, DEFAULT_FAILURE_PATTERNS)
    add("startup_log", lambda r, t: [r.choice([h_text(r, 80), "GPU KV cache size: "
                                               + r.choice(["1,234", "١٢", "-5"]) + " tokens",
                                               "Available KV cache memory: -1.5 GiB",
                                               "CUDA out of memory" + h_text(r, 5)])
                                     for _ in range(r.randrange(10))],
        _log_run, lambda: (),
        lambda x, res: "negative token count" if (res[0].kv_cache_tokens or 0) < 0 else None)

    def _chunk_run(x, t):
        from seat_console.probe.client import parse_chunk
        return parse_chunk(x)
    add("sse_chunk", lambda r, t: h_doc(r, {"choices": [{"text": "a", "index": 0}],
                                            "usage": {"completion_tokens": 3}}),
        _chunk_run, lambda: (_err_mod("seat_console.probe.client", "ChunkError"),),
        lambda x, c: "negative tokens" if (c.completion_tokens or 0) < 0 else None)

    # run store, run/leg files, report --verify, journal
    def _store_run(x, t):
        from seat_console.probe.store import list_runs
        root = t / "runs"
        shutil.rmtree(root, ignore_errors=True)
        for i, body in enumerate(x):
            (root / f"r{i}").mkdir(parents=True)
            (root / f"r{i}" / "summary.json").write_bytes(body)
        return list_runs(root)
    add("run_store", lambda r, t: [h_doc(r, {"status": "complete", "phases": [{"name": "a"}],
                                             "identity": {}}).encode("utf-8", "surrogatepass")
                                   for _ in range(r.randrange(1, 3))], _store_run, lambda: (),
        lambda x, rows: "a run missing from the list" if len(rows) != len(x) else None)

    def _waves_run(x, t):
        from seat_console.probe.store import measured_waves
        root = t / "runs"
        shutil.rmtree(root, ignore_errors=True)
        for i, body in enumerate(x):
            (root / f"r{i}").mkdir(parents=True)
            (root / f"r{i}" / "summary.json").write_bytes(body)
        return measured_waves("sha256:x", 16, "completions", root)
    add("sweep_history", lambda r, t: [h_doc(r, {
        "identity": {"container": {"image_id": "sha256:x"}},
        "settings": {"output_tokens": 16, "api": "completions"},
        "phases": [{"name": "a", "stats": {"concurrency": 2, "expected": 8, "completed": 8,
                                           "duration_s": 4.0, "complete": True,
                                           "request_rate": None}}]}).encode(
        "utf-8", "surrogatepass") for _ in range(r.randrange(1, 3))], _waves_run, lambda: (),
        lambda x, w: next((f"wave {v['wave_s']!r} at concurrency {c}" for c, v in w.items()
                           if not (isinstance(c, int) and c >= 1
                                   and 0 < v["wave_s"] <= 86_400)), None))

    def _run_run(x, t):
        from seat_console.evidence.runs import FileLedger, load_probe_run
        d = t / "run"
        shutil.rmtree(d, ignore_errors=True)
        d.mkdir()
        (d / "summary.json").write_bytes(x[0])
        (d / "requests.jsonl").write_bytes(x[1])
        return load_probe_run(d, FileLedger())
    add("probe_run_files", lambda r, t: (h_doc(r, {"status": "complete", "phases": [
        {"name": "p", "expected": 1, "attempted": 1, "completed": 1}],
        "started_at": "2026-12-01T12:00:00Z"}).encode("utf-8", "surrogatepass"),
        h_doc(r).encode("utf-8", "surrogatepass")), _run_run,
        lambda: (_err_mod("seat_console.evidence.runs", "RunError"),))

    def _verify_run(x, t):
        from seat_console.evidence.report import recorded_hashes, verify
        return verify(recorded_hashes(x, "report.json"))
    add("report_verify", lambda r, t: r.choice([h_doc(r, {"files": {"/tmp/x": "0" * 64}}),
                                                json.dumps({"files": {h_text(r, 20): "a" * 64}}),
                                                "| " + "a" * 64 + " | " + h_text(r) + " |"]),
        _verify_run, lambda: (_err_mod("seat_console.evidence.runs", "RunError"),))

    def _journal_run(x, t):
        from seat_console.actions.journal import Journal
        p = t / "j.db"
        for f in t.glob("j.db*"):
            f.unlink()
        p.write_bytes(x)
        j = Journal(p)
        try:
            return j.verify(), j.entries(), j.unfinished()
        finally:
            j.close()
    add("journal", _journal_gen, _journal_run,
        lambda: (_err_mod("seat_console.actions.journal", "JournalError"),))

    # -- issue 31: every entry of tests/parsers.toml has a target (tests/test_parser_list.py) --
    def _rr_gen(r, t):
        base = {"phase": "p", "index": 0, "api": "completions", "prompt_id": 0,
                "sent_at": "2026-12-01T12:00:00Z", "start_s": 0.0, "ok": True, "ttft_s": 0.1,
                "itl_s": [0.01, 0.02], "output_tokens": 3}
        x = h_doc(r, base)
        if r.random() < 0.4:   # a huge integer or deep nesting in one field
            x = json.dumps(base).replace('"ttft_s": 0.1', '"ttft_s": ' + r.choice(
                ["9" * r.randrange(20, 600), "[" * 70 + "]" * 70, '"Infinity"', '"NaN"',
                 "1e308"]))
        return x

    def _rr_run(x, t):
        from seat_console.core.probe_record import parse_record
        return parse_record(x, "requests.jsonl:1")

    def _rr_oracle(x, rec):
        import math
        vals = [rec.start_s, rec.ttft_s, rec.e2e_s, rec.tpot_s, rec.stream_end_s, *rec.itl_s]
        return "a non-finite time read" if any(v is not None and not math.isfinite(v)
                                               for v in vals) else None
    add("request_record", _rr_gen, _rr_run, lambda: (_err("untrusted", "InputError"),),
        _rr_oracle)

    def _leg_gen(r, t):
        poison = r.choice(["9" * r.randrange(20, 500), "[" * 80 + "]" * 80, '"x"', "null"])
        leg = {"arm": r.choice(["A", "B", "C"]), "leg": 1, "bracket_id": "b",
               "probe_run_dir": r.choice([None, "~nosuchuser-31/run", "x" * 300, "/" + "a" * 5000,
                                          "run", "a\u0000b"]),
               "status": "complete", "identity": {}, "kv_cache_tokens": 5}
        text = json.dumps(mutate(r, leg))
        if r.random() < 0.3:
            text = text.replace('"kv_cache_tokens": 5', '"kv_cache_tokens": ' + poison)
        trace = {"case_id": "c", "prompt": "p", "tokens": [{"token": "a", "logprob": -0.1}]}
        canary = {"canary_id": "k", "kind": "prose", "run": 1, "answer": "a", "passed": True}
        return {"leg": text.encode("utf-8", "surrogatepass"),
                "has_fidelity": r.random() < 0.5, "has_canaries": r.random() < 0.5,
                "fidelity": "\n".join(json.dumps(mutate(r, trace)) if r.random() < 0.8
                                       else r.choice([poison, h_text(r)]) for _ in range(3)),
                "canaries": "\n".join(json.dumps(mutate(r, canary)) if r.random() < 0.8
                                       else r.choice([poison, h_text(r)]) for _ in range(3))}

    def _leg_run(x, t):
        from seat_console.evidence.runs import FileLedger, load_leg
        d = t / "leg"
        shutil.rmtree(d, ignore_errors=True)
        d.mkdir()
        (d / "leg.json").write_bytes(x["leg"])
        for name in ("fidelity", "canaries"):   # absent in about half the legs
            if x[f"has_{name}"]:
                (d / f"{name}.jsonl").write_text(x[name], "utf-8", errors="surrogatepass")
        return load_leg(d, FileLedger())
    add("leg_files", _leg_gen, _leg_run,
        lambda: (_err_mod("seat_console.evidence.runs", "RunError"),))

    def _rederive_gen(r, t):
        paths = [r.choice(["~nosuchuser-31/r", "~", "a" * 5000, "/tmp/" + "x" * 300, "a\x00b",
                           h_text(r, 30), "/proc/self/root/" * 300, str(t)])
                 for _ in range(r.randrange(1, 3))]
        return r.choice([
            json.dumps({"inputs": paths, "files": {}, "generated_at": r.choice(TIMES)}),
            "\n".join(f"Input: `{p}`" for p in paths),
            '{"inputs": ' + "[" * r.randrange(60, 3000) + "]" * 3000,
            '{"inputs": [], "generated_at": ' + "9" * r.randrange(20, 600) + "}",
            h_doc(r, {"inputs": paths})])

    def _rederive_run(x, t):
        from seat_console.evidence.report import rederive, report_format
        out = rederive(x, "report.json")
        assert isinstance(out, list) and all(isinstance(s, str) for s in out)
        fmt = report_format(x, "report.json")
        assert fmt is None or (isinstance(fmt, int) and 0 <= fmt < 10 ** 6)
        return out
    add("report_rederive", _rederive_gen, _rederive_run, lambda: ())

    def _jrows_gen(r, t):
        cols = ("seq", "at", "user", "host", "profile_sha256", "run_id", "runbook", "kind",
                "step", "inputs", "outcome", "output", "facts", "prev_hash", "hash")
        hold = {"hold_id": "h", "lease": "seat-lease-h", "expires_at": "2026-12-05T13:00:00Z",
                "stopped": ["a.timer"], "silence_id": "s", "reason": "r", "timers_before": {}}

        def val(c, i):
            p = r.random()
            if p < 0.08:
                return r.randbytes(r.randrange(8))
            if p < 0.14:
                return r.choice([None, 7, 2.5, -1])
            if c == "seq":
                return i
            if c == "at":
                return r.choice(TIMES[:4] + ["2026-12-05T11:59:00.000000Z"])
            if c in ("inputs", "facts"):
                return r.choice([json.dumps({"hold": mutate(r, hold), "acts_on": h_json(r)}),
                                 json.dumps(h_json(r)), "[" * r.randrange(30, 20000),
                                 "9" * r.randrange(300, 5000), json.dumps({"hold_id": h_json(r)})])
            if c == "runbook":
                return r.choice(["hold", "release", "extend", "swap", "compare"])
            if c == "kind":
                return r.choice(["start", "begin", "verify", "end", "interference"])
            return r.choice(["", "r1", "stop a.timer", h_text(r, 10)])
        return [{c: val(c, i + 1) for c in cols} for i in range(r.randrange(1, 8))]

    def _jrows_run(x, t):
        import sqlite3
        from seat_console.actions import compare, hold, recover, swap
        from seat_console.actions.journal import Journal
        from seat_console.node.attribution import JournalAttributor
        for f in t.glob("jr.db*"):
            f.unlink()
        p = t / "jr.db"
        Journal(p).close()
        db = sqlite3.connect(p)
        for row in x:
            try:
                db.execute(f"INSERT INTO entries ({', '.join(row)}) VALUES "
                           f"({', '.join('?' * len(row))})", tuple(row.values()))
            except (sqlite3.Error, OverflowError, UnicodeEncodeError):
                pass   # a value SQLite cannot hold is not in the file
        db.commit()
        db.close()
        from datetime import UTC, datetime, timedelta
        now = datetime(2026, 12, 5, 12, 0, tzinfo=UTC)
        j = Journal(p)
        try:
            j.verify()
            for h in hold.holds(j):
                json.dumps(h.to_json(now))
                hold.journal_attribution(j, h, now)("a.timer", now)
                hold.own_change(j, h, now)
                compare.bracket_breaches(j, h.hold_id, "2026-12-05T10:00:00+00:00")
            for run in j.unfinished():
                recover.describe_text(run)
            swap.last_swap(j)
            out = [e.to_json() for e in j.entries()]
            json.dumps(out, default=str)
        finally:
            j.close()
        a = JournalAttributor(p, clock=lambda: now)
        try:
            a.attribution(["seat"], now - timedelta(minutes=1))
        finally:
            a.close()
        return out
    add("journal_rows", _jrows_gen, _jrows_run,
        lambda: (_err_mod("seat_console.actions.journal", "JournalError"),))

    def _items_gen(r, t):
        item = {"id": "a", "prompt": "p", "max_tokens": 8}
        doc = {"name": "s", "items": [item], "canaries": [item], "cases": [item],
               "prompts": ["x"]}
        return h_doc(r, doc).encode("utf-8", "surrogatepass")

    def _items_run(x, t):
        from seat_console.evidence.canaries import CanaryError, parse_canaries
        from seat_console.evidence.fidelity import FidelityError, parse_cases, parse_completion
        from seat_console.probe.prompts import PromptSetError, parse_prompt_set
        out = []
        for f in (lambda: parse_canaries(x, "c.json"), lambda: parse_cases(x, "f.json"),
                  lambda: parse_completion(x, "completion"),
                  lambda: parse_prompt_set(x, "p.json")):
            try:
                out.append(f())
            except (CanaryError, FidelityError, PromptSetError):
                out.append(None)
        return out
    add("item_sets", _items_gen, _items_run, lambda: ())

    def _timing_gen(r, t):
        lines = [f'vllm:time_to_first_token_seconds_bucket{{le="{le}"}} {n}'
                 for le, n in (("0.1", 1), ("1.0", 3), ("+Inf", 4))]
        lines += ["vllm:time_to_first_token_seconds_count 4",
                  "vllm:time_to_first_token_seconds_sum 1.5"]
        for _ in range(r.randrange(4)):
            i = r.randrange(len(lines) + 1)
            lines.insert(i, r.choice([h_text(r, 40), lines[r.randrange(len(lines))],
                                      'vllm:time_to_first_token_seconds_bucket{le="'
                                      + r.choice(["NaN", "-1", "1e400", "x"]) + '"} '
                                      + r.choice(["NaN", "+Inf", "-1", "9" * 400])]))
        return {"text": "\n".join(lines) + "\n", "obj": h_json(r)}

    def _timing_run(x, t):
        from seat_console.core.engine_timing import parse_histograms, parse_phase_timing
        out = parse_histograms(x["text"])
        try:
            parse_phase_timing(x["obj"], "summary.json phase p")
        except ValueError:
            pass
        return out
    add("engine_timing", _timing_gen, _timing_run, lambda: (ValueError,))

    def _counters_run(x, t):
        from seat_console.probe.engine_counters import parse_counters
        return parse_counters(x)
    add("counters_text", _metrics_gen, _counters_run, lambda: (ValueError,))

    def _exec_gen(r, t):
        out = b""
        for _ in range(r.randrange(6)):
            body = r.randbytes(r.randrange(20))
            n = len(body) if r.random() < 0.8 else r.randrange(2**32)
            out += bytes([r.choice([1, 2, 0, 3, 7]), 0, 0, 0]) + n.to_bytes(4, "big") + body
        cuts = sorted(r.randrange(len(out) + 1) for _ in range(r.randrange(4)))
        return [out[a:b] for a, b in zip([0, *cuts], [*cuts, len(out)])]

    def _exec_run(x, t):
        from seat_console.node.engine_exec import StreamDemux
        d = StreamDemux(cap=1 << 16)
        for part in x:
            d.feed(part)
        return d.stdout, d.stderr
    add("exec_stream", _exec_gen, _exec_run,
        lambda: (_err_mod("seat_console.node.engine_exec", "StreamProtocolError"),))

    def _imgcheck_gen(r, t):
        from seat_console.sources.image_caps import MARKER
        good = {"python": "3.12.1", "engine": {"package": "vllm", "version": "0.34.0"},
                "attrs": {"vllm.x": {"ok": True, "where": "vllm/x.py"}}}
        lines = [h_text(r, 40) for _ in range(r.randrange(3))]
        lines.insert(r.randrange(len(lines) + 1), MARKER + h_doc(r, good))
        return "\n".join(lines)

    def _imgcheck_run(x, t):
        from seat_console.sources.image_caps import parse_check_output
        return parse_check_output(x, "img:1")
    add("image_check_output", _imgcheck_gen, _imgcheck_run,
        lambda: (_err("untrusted", "InputError"),))

    def _seatfile_gen(r, t):
        rec = {"name": "seat-resident-promoted-20261205T033000Z", "id": "ab" * 32,
               "image_id": "sha256:" + "c" * 64, "image_ref": "reg/x:1", "repo_digests": [],
               "entrypoint": None, "cmd": ["--model", "/m"], "env_names": ["HF_TOKEN"],
               "mounts": ["/m:/m:ro"], "gpus": ["GPU-1"], "stop_timeout_s": 30,
               "started_at": None, "models": ["m"]}
        good = {"format": 1, "resident": rec, "previous": {**rec, "name": "seat-resident"},
                "promoted_at": "2026-12-05T03:30:00Z", "promoted_by": "op@node",
                "promote_run_id": "promote-1", "swap_run_id": "swap-1", "forced": None,
                "profile": {"source": "/p.toml", "written": False}}
        return h_doc(r, good)

    def _seatfile_run(x, t):
        from seat_console.core.seat_file import parse_seat_file
        return parse_seat_file(x, "/state/seat.json")
    add("seat_file", _seatfile_gen, _seatfile_run,
        lambda: (_err_mod("seat_console.core.seat_file", "SeatFileError"),))

    def _hot_gen(r, t):
        events = b"".join(b"data: " + json.dumps(mutate(r, {"choices": [{"text": "a"}], "usage": {
            "completion_tokens": i + 1}})).encode() + r.choice([b"\n\n", b"\r\n\r\n", b"\r\r"])
            for i in range(r.randrange(4))) + b"data: [DONE]\n\n"
        body = r.choice([events, r.randbytes(r.randrange(64)), b"\xef\xbb\xbf" + events])
        head = (b"HTTP/1.1 " + r.choice([b"200 OK", b"500 x", b"200", b"abc"]) + b"\r\n"
                + b"Content-Type: " + r.choice([b"text/event-stream", b"text/html", b""])
                + b"\r\n" + r.choice([b"Transfer-Encoding: chunked\r\n", b"",
                                       b"Content-Encoding: gzip\r\n"]) + b"\r\n")
        if b"chunked" in head:
            body = b"%x\r\n" % len(body) + body + b"\r\n0\r\n\r\n"
        data = head + body
        cuts = sorted(r.randrange(len(data) + 1) for _ in range(r.randrange(5)))
        return [data[a:b] for a, b in zip([0, *cuts], [*cuts, len(data)])]

    def _hot_run(x, t):
        import asyncio
        from seat_console.probe.client import SSEFeed
        from seat_console.probe.hotpath import _Conn, _Exchange

        class _T:
            def write(self, b): pass
            def close(self): pass
            def get_extra_info(self, k, d=None): return d
        loop = asyncio.new_event_loop()
        try:
            conn = _Conn()
            conn.connection_made(_T())
            ex = _Exchange(SSEFeed(), 0.0, loop.create_future())
            conn.start(b"GET / HTTP/1.1\r\n\r\n", ex)
            for part in x:
                if conn.closed:
                    break
                conn.data_received(part)
            if not conn.closed:
                conn.connection_lost(None)
            return ex.failure, ex.status
        finally:
            loop.close()
    add("hotpath_response", _hot_gen, _hot_run, lambda: ())

    # the first frame's raw read of the profile
    def _ident_run(x, t):
        from seat_console.tui.first_frame import raw_identity
        p = t / "p.toml"
        p.write_bytes(x)
        return raw_identity(str(p))
    add("first_frame_identity", lambda r, t: _prof_gen(r, t).encode("utf-8", "surrogatepass"),
        _ident_run, lambda: ())
    _fleet_specs(add)
    return specs


# -- the fleet's Prometheus replies and the exporter's node readers (issue 31) ---------------------
PROM_VALUES = ["1", "0", "0.5", "NaN", "+Inf", "-Inf", "1e300", "-1", "1.8e12", "1e-320", "",
               "nope", "2", "4096", "9007199254740993"]


def h_prom_value(r: random.Random) -> Any:
    """A sample value as Prometheus may send it (a string), or a wrong JSON type."""
    c = r.random()
    if c < 0.8:
        return r.choice(PROM_VALUES)
    if c < 0.9:
        return repr(r.choice([1.8e9, -1.8e9, 1.8e12, 1.8e9 + 3600, 1e308]))
    return h_scalar(r)


def h_prom_reply(r: random.Random, series: list[tuple[dict, Any]], matrix: bool = False) -> str:
    """A query reply holding ``series`` (labels, value), usually well formed, sometimes
    mutated, sometimes not a reply at all."""
    t = r.choice([1.8e9, 1.8e9, 0, -1, 1e300, 1.8e12])
    if matrix:
        result = [{"metric": m, "values": [[t + 60 * k, h_prom_value(r)]
                                           for k in range(r.randrange(0, 62))]}
                  for m, _ in series]
    else:
        result = [{"metric": m, "value": [t, v]} for m, v in series]
    doc = {"status": "success", "data": {"resultType": "matrix" if matrix else "vector",
                                         "result": result}}
    c = r.random()
    if c < 0.75:
        return json.dumps(doc)
    if c < 0.9:
        return json.dumps(mutate(r, doc, 0.1))
    return h_doc(r, doc)


_FLAGS = ("seat_hold_active", "seat_hold_lease_armed", "seat_hold_without_lease",
          "seat_silence_active", "seat_probe_disrupted")


def _fleet_gen(r: random.Random, t: Path) -> dict[str, str]:
    seats = [f"n{i}:9469" if r.random() < 0.9 else h_text(r, 10) for i in range(r.randrange(1, 5))]
    seen = [({"instance": s}, r.choice([repr(1.8e9 - 1), repr(-(1.8e9 - 5)), h_prom_value(r)]))
            for s in seats]
    state = []
    for s in seats:
        state += [({"instance": s, "part": "states", "__name__": f}, h_prom_value(r))
                  for f in _FLAGS if r.random() < 0.4]
        if r.random() < 0.3:
            state.append(({"instance": s, "part": "states", "q": r.choice(
                ["engine_not_up", "present"])}, h_prom_value(r)))
        state += [({"instance": s, "part": "times", "__name__": n}, h_prom_value(r))
                  for n in ("seat_hold_expiry_timestamp_seconds",
                            "seat_silence_end_timestamp_seconds") if r.random() < 0.5]
        if r.random() < 0.2:
            state.append(({"instance": s, "part": r.choice(["probe", "runbook", "sources_down"]),
                           "phase": h_text(r, 5), "source": "engine"}, "1"))
    numbers = []
    for s in seats:
        numbers += [({"instance": s, "part": "requests", "__name__": n}, h_prom_value(r))
                    for n in ("vllm:num_requests_running", "vllm:num_requests_waiting")
                    if r.random() < 0.7]
        numbers += [({"instance": s, "part": p, **lab}, h_prom_value(r)) for p, lab in (
            ("requests", {"q": "probe_zero"}), ("kv", {}), ("gpu", {"q": "cards"}),
            ("gpu", {"__name__": "DCGM_FI_DEV_FB_USED"}), ("gpu", {"__name__": "DCGM_FI_DEV_FB_FREE"}),
            ("gpu", {"q": "reserved"})) if r.random() < 0.6]
    return {"seen": h_prom_reply(r, seen), "identity": h_prom_reply(r, [
        ({"instance": s, "node": h_text(r, 8)}, "1") for s in seats]),
        "state": h_prom_reply(r, state), "numbers": h_prom_reply(r, numbers),
        "windowed": r.random() < 0.5}


class _FuzzProm:
    url = "http://prom.fuzz:9090"

    def __init__(self, bodies: dict[str, str], queries: dict[str, str]) -> None:
        self.bodies, self.names, self.requests = bodies, {q: n for n, q in queries.items()}, 0

    def query(self, expr: str, at: float | None = None) -> Any:
        from seat_console.fleet.promapi import parse_response
        self.requests += 1
        return parse_response(self.bodies[self.names.get(expr, "numbers")], expr, self.url)

    def query_range(self, expr: str, start: float, end: float, step_s: float) -> Any:
        from seat_console.fleet.promapi import parse_response
        self.requests += 1
        return parse_response(self.bodies["range"], expr, self.url)


FLEET_NOW = 1.8e9


def _fleet_run(x: dict, t: Path) -> Any:
    from seat_console.fleet.rows import Fleet, cells
    from seat_console.core.jsonout import dumps
    fleet = Fleet(prom=None, clock=lambda: FLEET_NOW)  # type: ignore[arg-type]
    fleet.prom = _FuzzProm(x, fleet.queries)  # type: ignore[assignment]
    reading = fleet.refresh((lambda rows: [r.instance for r in rows]) if x["windowed"] else None)
    json.loads(json.dumps(reading.to_json(), allow_nan=False))   # fleet --json, strict
    dumps(reading.to_json())
    for row in reading.rows:
        cells(row, FLEET_NOW), cells(row, FLEET_NOW, narrow=True)
    return x, reading


def _fleet_oracle(x: dict, res: Any) -> str | None:
    import math
    _, reading = res
    try:
        seen = {s["metric"]["instance"]: s["value"][1]
                for s in json.loads(x["seen"])["data"]["result"]}
    except Exception:  # noqa: BLE001 - a mutated reply: the seat times are what the parser read
        seen = {}
    for row in reading.rows:
        for name in ("running", "waiting", "kv_usage"):
            v = getattr(row, name)
            if v is not None and (not math.isfinite(v) or v < 0):
                return f"{name} {v!r} kept"
        if row.kv_usage is not None and row.kv_usage > 1:
            return f"KV usage {row.kv_usage} kept"
        raw = seen.get(row.instance)
        try:
            t = abs(float(raw)) if isinstance(raw, str) else None
        except ValueError:
            t = None
        if t is not None and (not math.isfinite(t) or t > FLEET_NOW + 30) \
                and row.state in ("healthy", "held") and row.last_seen is not None:
            return f"a seat last seen at {raw} read {row.state}"
    return None


def _history_gen(r: random.Random, t: Path) -> dict[str, str]:
    return {"range": h_prom_reply(r, [({"UUID": h_text(r, 14)} if r.random() < 0.3 else {}, None)
                                      for _ in range(r.randrange(0, 3))], matrix=True)}


def _history_run(x: dict, t: Path) -> Any:
    import math
    from seat_console.fleet.detail import read_history, spark
    h = read_history(_FuzzProm(x, {}), "a:1", now=FLEET_NOW)  # type: ignore[arg-type]
    for line in h.lines:
        spark(line.values, 60, lo=0.0), spark(line.values)
        if any(v is not None and not math.isfinite(v) for v in line.values):
            raise AssertionError("a non-finite point kept")
    return h


def _node_gen(r: random.Random, t: Path) -> dict[str, str]:
    lease = "seat-hold-20261202t200000z-abcd-lease.timer"
    blocks = []
    for unit in ["a.timer"] + ([lease] if r.random() < 0.5 else []) \
            + ([h_text(r, 12)] if r.random() < 0.1 else []):
        props = [f"Id={unit}"]
        for k, vals in (("LoadState", ["loaded", "not-found", "masked"]),
                        ("ActiveState", ["active", "inactive", "failed"]),
                        ("SubState", ["waiting", "elapsed", "dead"])):
            if r.random() < 0.8:
                props.append(f"{k}={r.choice(vals + [h_text(r, 6)])}")
        if r.random() < 0.1:
            props.append(h_text(r, 20))
        r.shuffle(props)
        blocks.append("\n".join(props))
    times = r.choice([json.dumps([{"unit": lease, "next": r.choice(
        [1_796_300_000_000_000, 2**64, -1, None, "x"])}]), h_doc(r)])
    return {"show": "\n\n".join(blocks) + "\n", "times": times}


class _FuzzNode:
    where = "fuzz-node"

    def __init__(self, show: str, times: str) -> None:
        self.show, self.times = show, times

    def run(self, argv: list[str], timeout_s: float = 10.0) -> Any:
        from seat_console.core.base import utcnow
        from seat_console.node.runner import CommandResult
        out = self.times if argv[1] == "list-timers" else self.show
        return CommandResult(argv=tuple(argv), rc=0, stdout=out, stderr="", ok=True,
                             failure=None, started_at=utcnow(), duration_s=0.01,
                             where=self.where)

    def close(self) -> None:
        pass


_NODE_PROFILE: list[Any] = []


def _node_run(x: dict, t: Path) -> Any:
    from unittest import mock

    from seat_console.exporter.model import Identity, build_families
    from seat_console.exporter.poller import PollerGroup
    from seat_console.exporter.readers import make_node
    if not _NODE_PROFILE:
        p = t / "node.toml"
        p.write_text('[resident]\nname = "r"\n[timers]\nconformance = ["a.timer"]\n'
                     '[[silence.matchers]]\nname = "instance"\nvalue = "127.0.0.1:8000"\n')
        from seat_console.core.profile import load_profile
        _NODE_PROFILE.append(load_profile(str(p)))
    tr = _FuzzNode(x["show"], x["times"])
    with mock.patch("seat_console.node.transport.make_transport", lambda loaded: tr):
        read, _ = make_node(_NODE_PROFILE[0])
        value = read()
    g = PollerGroup(("timers", "lease"), lambda: value, interval_s=15, timeout_s=25)
    g.read_now()
    fams = build_families(Identity("n", "s", "http://x", 2, ("a.timer",), "0"),
                          {n: p.state() for n, p in g.parts.items()})
    return {s.name: s.value for f in fams for s in f.samples if not s.labels
            or "unit" in s.labels}


def _node_oracle(x: dict, s: dict) -> str | None:
    first = x["show"].split("\n\n")[0].splitlines()
    props = dict(ln.split("=", 1) for ln in first if "=" in ln)
    says_stopped = props.get("LoadState") == "loaded" and props.get("ActiveState") not in (
        None, "active")
    if s.get("seat_hold_without_lease") == 1.0 and not says_stopped:
        return f"hold without lease from a block that does not say stopped: {props}"
    if s.get("seat_hold_active") == 1.0 and not says_stopped \
            and s.get("seat_hold_lease_armed") != 1.0:
        return f"hold active from a block that does not say stopped: {props}"
    if "ActiveState" not in props and "seat_timer_active" in s:
        return "seat_timer_active exported without ActiveState"
    return None


def _probe_state_gen(r: random.Random, t: Path) -> bytes:
    good = {"status": "running", "settings": {"phases": [{"name": "warm"}, {"name": "c64"}]},
            "phases": [{"name": "warm"}], "disruptions": []}
    return h_doc(r, good).encode("utf-8", "surrogatepass")


def _probe_state_run(x: bytes, t: Path) -> Any:
    from seat_console.exporter.readers import probe_state
    d = t / "runs" / "20261201T100000Z-cccccc"
    d.mkdir(parents=True, exist_ok=True)
    (d / "summary.json").write_bytes(x)
    return probe_state(t / "runs", 600)


def _probe_state_oracle(x: bytes, res: Any) -> str | None:
    phase, disrupted = res
    if phase is not None and not (isinstance(phase[1], str) and phase[1]):
        return f"phase {phase!r}"
    return None if disrupted in (True, False) else f"disrupted {disrupted!r}"


def _unfinished_run(x: bytes, t: Path) -> Any:
    from seat_console.exporter.readers import unfinished_runs
    p = t / "ej.db"
    p.write_bytes(x)
    return unfinished_runs(p)


def _fleet_specs(add: Callable[..., None]) -> None:
    """The fleet's Prometheus replies (the parser, the rows over them, the detail view's
    history) and the exporter's node readers (issue 31)."""
    def _reply_run(x, t):
        from seat_console.fleet.promapi import parse_response
        return parse_response(x, "q", "http://prom.fuzz:9090")

    def _reply_oracle(x, res):
        for s in res.series:
            for _, v in s.points:
                if v is not None and v != v:
                    return "a NaN value kept (unknown must be None)"
        return None

    add("prom_reply", lambda r, t: h_prom_reply(r, [({"instance": h_text(r, 8)}, h_prom_value(r))
                                                    for _ in range(r.randrange(4))],
                                                 matrix=r.random() < 0.3),
        _reply_run, lambda: (_err_mod("seat_console.fleet.promapi", "PromError"),),
        _reply_oracle)
    add("fleet_rows", _fleet_gen, _fleet_run, lambda: (), _fleet_oracle)
    add("fleet_history", _history_gen, _history_run, lambda: ())
    add("exporter_node", _node_gen, _node_run, lambda: (), _node_oracle)
    add("exporter_probe_state", _probe_state_gen, _probe_state_run, lambda: (ValueError,),
        _probe_state_oracle)
    add("exporter_journal", _journal_gen, _unfinished_run,
        lambda: (__import__("sqlite3").Error,))


# -- the engine's exposition as the probe reads it, and the probe's SSE stream (issue 31) -------
HOSTILE_VALUES = ["NaN", "+Inf", "-Inf", "1e400", "-1", "1e308", "4e15", "0", "-0", "0x10"]
LINE_SEPARATORS = ["\u2028", "\x1c", "\x1d", "\x1e", "\x0b", "\x0c", "\x85", "\r"]


def _exposition_gen(r: random.Random, lines: list[str]) -> str:
    """The lab's ``/metrics`` text with hostile edits: values made non-finite / negative /
    huge, ``+Inf`` buckets dropped, lines repeated (with another value), label values holding
    a line separator and a counter line, ``cache_config_info`` labels made huge."""
    ls = list(lines)
    for _ in range(r.randrange(1, 12)):
        i = r.randrange(len(ls))
        ln = ls[i]
        c = r.randrange(7)
        if c == 0 and not ln.startswith("#") and " " in ln:
            ls[i] = ln.rsplit(" ", 1)[0] + " " + r.choice(HOSTILE_VALUES)
        elif c == 1:
            ls = [x for x in ls if 'le="+Inf"' not in x or r.random() < 0.5]
        elif c == 2 and not ln.startswith("#") and " " in ln:
            v = ln.rsplit(" ", 1)[1] if r.random() < 0.5 else r.choice(HOSTILE_VALUES)
            ls.insert(r.randrange(i, len(ls) + 1), ln.rsplit(" ", 1)[0] + " " + v)
        elif c == 3:
            sep = r.choice(LINE_SEPARATORS)
            ls.insert(i, f'foo_info{{note="x{sep}vllm:generation_tokens_total 1e9{sep}'
                         f'process_start_time_seconds NaN{sep}"}} 1')
        elif c == 4:
            n = r.choice(["1e200", str(2**62), "-5", "NaN", "16", "abc"])
            ls.insert(i, f'vllm:cache_config_info{{num_gpu_blocks="{n}",block_size="{n}",'
                         f'kv_cache_size_tokens="{r.choice(HOSTILE_VALUES)}"}} 1')
        elif c == 5:
            ls.insert(i, f"process_start_time_seconds {r.choice(HOSTILE_VALUES)}")
        elif r.random() < 0.15:    # a line the parser refuses: the whole scrape is an error
            ls.insert(i, h_text(r, 60))
    return "\n".join(ls) + "\n"


def _sample_lines(text: str) -> list[str]:
    return [ln for ln in text.split("\n") if ln and not ln.startswith("#")]


def _engine_specs(add: Callable[..., None], lines: list[str]) -> None:
    """The probe's parsers of the engine's exposition and of the SSE stream."""

    def _counters_run(x, _t):
        from seat_console.probe.engine_counters import compare, kv_capacity, parse_counters
        c = parse_counters(x)
        return c, compare(c, c, client_tokens=0, client_requests=0), kv_capacity(
            c.cache_config, None)

    def _counters_oracle(x, res):
        from seat_console.core.engine_timing import Histogram
        from seat_console.probe import engine_counters
        parse_counters = engine_counters.parse_counters
        c, acc, kv = res
        top = getattr(engine_counters, "MAX_LABEL_COUNT", 2**53)
        if acc.reset is not None:
            return f"one scrape read as a restart: {acc.reset}"
        if c.process_start_s is not None and not (0 < c.process_start_s < float("inf")):
            return f"process start time {c.process_start_s!r} kept"
        for v in (c.generation_tokens, c.prompt_tokens, c.requests_succeeded, c.running):
            if v is not None and not (0 <= v < float("inf")):
                return f"a count of {v!r}"
        if kv.tokens is not None and not 0 <= kv.tokens <= top:
            return f"KV tokens {kv.tokens}"
        for name, h in (c.timing or {}).items():
            if isinstance(h, Histogram) and (h.bounds[-1] != float("inf") or not all(
                    0 <= n < float("inf") for n in h.cumulative)):
                return f"{name}: an unknown population kept as a histogram"
        # a repeated series counts once: every sample line again, at the end, changes nothing
        try:
            again = parse_counters(x + "\n".join(_sample_lines(x)) + "\n")
        except ValueError:
            return None
        for f in ("generation_tokens", "prompt_tokens", "requests_succeeded",
                  "requests_by_reason", "process_start_s"):
            if getattr(again, f) != getattr(c, f) and getattr(c, f) == getattr(c, f):
                return f"{f}: {getattr(c, f)!r} → {getattr(again, f)!r} with the lines repeated"
        return None
    add("engine_counters", lambda r, t: _exposition_gen(r, lines), _counters_run,
        lambda: (ValueError,), _counters_oracle)

    def _timing_run(x, _t):
        from seat_console.core import engine_timing as et
        hs = et.parse_histograms(x)
        zero = et.parse_histograms("\n".join(
            ln.rsplit(" ", 1)[0] + " 0" if "_bucket" in ln and " " in ln else ln
            for ln in x.split("\n")))
        d = et.engine_deltas(zero, hs)
        return hs, {f: et.check_figure(f, v if isinstance(v, et.Histogram) else None,
                                       {0.5: 0.05, 0.95: 5.0}, 3, None,
                                       problem=v if isinstance(v, str) else None)
                    for f, v in d.items()}

    def _timing_oracle(x, res):
        hs, checks = res
        for name, h in hs.items():
            if not isinstance(h, str) and h.bounds[-1] != float("inf"):
                return f"{name}: no +Inf bucket, kept as the whole population"
        for f, t in checks.items():
            if t.engine is not None and t.engine.bounds[-1] != float("inf"):
                return f"{f}: a finding from part of the population"
        return None
    add("engine_histograms", lambda r, t: _exposition_gen(r, lines), _timing_run,
        lambda: (ValueError,), _timing_oracle)

    def _sse_gen(r, _t):
        import json as _json

        def chunk(running, text="x"):
            obj = {"choices": [{"index": 0, "text": text, "finish_reason": None}]}
            if running is not None:
                obj["usage"] = {"prompt_tokens": 3, "completion_tokens": running}
            return b"data: " + _json.dumps(obj).encode() + b"\n\n"
        eol = [b"\n", b"\r", b"\r\n"]
        pieces = []
        running = 0
        for _ in range(r.randrange(1, 30)):
            c = r.randrange(14)
            if c < 5:
                running += r.choice([1, 1, 1, 2, 0, 2**40, -1])
                p = chunk(running if r.random() < 0.8 else None)
            elif c == 5:
                p = b"data: " + _json.dumps({"choices": [], "usage": {
                    "completion_tokens": running}}).encode() + b"\n\n"
            elif c == 6:
                p = b"data: [DONE]\n\n"
            elif c == 7:
                p = r.choice([b"retry: 10", b"event: x", b"id: 7", b": ping", b"data",
                              b"retry: " + b"9" * 5000, b"id: \x00"]) + r.choice(eol) * 2
            elif c == 8:
                p = b"\xef\xbb\xbf"
            elif c == 9:
                p = r.choice(eol)
            elif c == 10:
                p = b"data: " + h_text(r, 40).encode("utf-8", "surrogatepass") + r.choice(eol)
            elif c == 11:
                p = r.randbytes(r.randrange(20))
            elif c == 12:
                p = b'data: {"error": {"message": "' + h_text(r, 10).encode(
                    "utf-8", "surrogatepass") + b'"}}\n\n'
            else:
                p = b"data: " + _json.dumps(mutate(r, {"choices": [{"text": "a"}], "usage": {
                    "completion_tokens": running}})).encode() + b"\n\n"
            if r.random() < 0.2:
                p = p.replace(b"\n", r.choice(eol))
            pieces.append(p)
        data = b"".join(pieces)
        cuts = sorted(r.randrange(len(data) + 1) for _ in range(r.randrange(12)))
        bounds = [0, *cuts, len(data)]
        return [data[a:b] for a, b in zip(bounds, bounds[1:], strict=False) if b > a]

    def _sse_one(reads, max_tokens=4096):
        from seat_console.probe.client import SSEFeed, StreamFailure
        try:
            feed = SSEFeed(max_tokens)
        except TypeError:          # a feed without the bound (the code before issue 31)
            feed = SSEFeed()
        try:
            for i, raw in enumerate(reads):
                feed.feed(raw, 0.001 * i)
            feed.finish(1.0)
            out = feed.timer.result()
            res = ("ok", out["output_tokens"], len(out["itl_s"]))
        except StreamFailure as exc:
            res = (exc.kind, exc.reason[:0])
        tm = feed.timer
        return res, tm.tokens_streamed, tm.output_chunks, tm.events, len(tm.itl_s)

    def _sse_run(x, _t):
        from test_probe_ssefeed import fed, reference   # the standard, written out in the test
        return _sse_one(x), _sse_one([b"".join(x)] if x else []), fed(x), reference(x)

    def _sse_oracle(x, res):
        split, whole, events, standard = res
        if events != standard:
            return "events or their read times differ from the standard's"
        if split != whole:
            return f"split anywhere {split} ≠ unsplit {whole}"
        if split[4] > 4096 or split[1] > 4096:
            return (f"{split[1]:,} tokens streamed, {split[4]:,} ITL values for a "
                    "4,096-token request")
        if split[0][0] not in ("ok", "bad-chunk", "error-event", "truncated", "no-usage",
                               "no-output"):
            return f"an undocumented failure kind {split[0][0]}"
        return None
    add("sse_stream", _sse_gen, _sse_run, lambda: (), _sse_oracle)


_JOURNAL: list[bytes] = []


def _journal_gen(r: random.Random, t: Path) -> bytes:
    if not _JOURNAL:
        from seat_console.actions.journal import Journal
        p = t / "base.db"
        j = Journal(p)
        for i in range(4):
            j.append(run_id=f"r{i % 2}", runbook="hold", kind="start" if i < 2 else "step",
                     step=f"s{i}", inputs={"i": i}, outcome="ok")
        j.close()
        _JOURNAL.append(p.read_bytes())
    d = bytearray(_JOURNAL[0])
    mode = r.randrange(3)
    if mode == 0:
        return bytes(d[:r.randrange(len(d))])
    if mode == 1:
        for _ in range(r.randint(1, 30)):
            d[r.randrange(len(d))] = r.randrange(256)
        return bytes(d)
    return r.randbytes(r.randrange(4096))


_AM: list[Any] = []


def _silence_source(body: bytes, source_cls: Any) -> Any:
    import httpx

    from seat_console.core.profile import AlertmanagerSpec
    from seat_console.sources.silences import AlertmanagerClient, SilenceMatcher
    if not _AM:
        reply: dict[str, bytes] = {}
        am = AlertmanagerClient(AlertmanagerSpec(url="http://127.0.0.1:9"), read_attempts=1)
        am._client = httpx.Client(base_url=am.url, transport=httpx.MockTransport(
            lambda req: httpx.Response(200, content=reply[req.url.path])))
        _AM.extend([am, reply])
    am, reply = _AM
    reply.clear()
    reply.update({"/api/v2/status": b'{"versionInfo": {"version": "0.25.0"}}',
                  "/api/v2/silences": body})
    seat = (SilenceMatcher(name="instance", value="seat-node:8000", isRegex=False),)
    return source_cls(am, seat)


def _err(module: str, name: str) -> type:
    pkg = {"kvcache": "fit", "untrusted": "core"}.get(module, "sources")
    return _err_mod(f"seat_console.{pkg}.{module}", name)


def _err_mod(module: str, name: str) -> type:
    import importlib
    return getattr(importlib.import_module(module), name)


# -- the run ---------------------------------------------------------------------------------------
def _site(exc: BaseException) -> str:
    tb = [f for f in traceback.extract_tb(exc.__traceback__)
          if "seat_console" in f.filename or "/console/" in f.filename or "/actions/" in f.filename]
    f = tb[-1] if tb else traceback.extract_tb(exc.__traceback__)[-1]
    return f"{type(exc).__name__} at {Path(f.filename).name}:{f.lineno}"


def _child(name: str, seed: int, start: int, n: int, conn: Any) -> None:
    """Run parser ``name`` on inputs ``start``..``n-1`` (input i from ``Random(seed, name, i)``),
    sending ``(i, 'begin')`` then ``(i, outcome, detail)`` for each."""
    import warnings
    warnings.simplefilter("ignore")
    spec = next(s for s in _specs() if s.name == name)
    errors = spec.errors()
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        for i in range(start, n):
            r = random.Random(f"{seed}:{name}:{i}")
            x = spec.gen(r, tmp)
            conn.send((i, "begin", ""))
            try:
                res = spec.run(x, tmp)
            except errors as exc:
                str(exc)   # the message itself must be buildable
                conn.send((i, "error", ""))
                continue
            except BaseException as exc:  # noqa: BLE001 - what is being counted
                conn.send((i, "crash", _site(exc)))
                continue
            try:
                wrong = spec.oracle(x, res) if spec.oracle else None
            except Exception as exc:  # noqa: BLE001 - a result the oracle cannot read is wrong
                wrong = f"the result could not be read: {_site(exc)}"
            conn.send((i, "silent-wrong", wrong) if wrong else (i, "ok", ""))
    conn.send((n, "done", ""))


def fuzz_one(name: str, seed: int, n: int, deadline_s: float) -> tuple[Counter, Counter]:
    """Counts of outcomes and of crash/hang/silent-wrong sites for one parser."""
    counts: Counter = Counter()
    sites: Counter = Counter()
    ctx = mp.get_context("fork")
    start = 0
    while start < n:
        parent, child = ctx.Pipe(duplex=False)
        proc = ctx.Process(target=_child, args=(name, seed, start, n, child), daemon=True)
        proc.start()
        child.close()
        current, began = start, time.monotonic()
        restarted = False
        while True:
            if parent.poll(0.2):
                try:
                    i, what, detail = parent.recv()
                except EOFError:
                    counts["crash"] += 1
                    sites[f"child died at input {current} (exit {proc.exitcode})"] += 1
                    start, restarted = current + 1, True
                    break
                if what == "done":
                    start = n
                    break
                if what == "begin":
                    current, began = i, time.monotonic()
                    continue
                counts[what] += 1
                if detail:
                    sites[f"{what}: {detail}"] += 1
            elif time.monotonic() - began > deadline_s:
                counts["hang"] += 1
                sites[f"hang: input {current} ran past {deadline_s:g} s"] += 1
                proc.kill()
                start, restarted = current + 1, True
                break
            elif not proc.is_alive() and not parent.poll(0):
                counts["crash"] += 1
                sites[f"child died at input {current} (exit {proc.exitcode})"] += 1
                start, restarted = current + 1, True
                break
        proc.join(5)
        parent.close()
        if not restarted:
            break
    return counts, sites


def main(argv: list[str] | None = None) -> int:
    """Parse the options, fuzz every (selected) parser, print the table; exit 1 on a defect."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--examples", type=int, default=3000, help="inputs per parser (default "
                    "3000)")
    ap.add_argument("--seed", type=int, default=22)
    ap.add_argument("--deadline", type=float, default=10.0,
                    help="seconds one input may take before it counts as a hang (generous: "
                         "a loaded machine is slow, a hang is forever)")
    ap.add_argument("-k", default="", help="comma-separated parser names (default: all)")
    ap.add_argument("--list", action="store_true", help="list the parsers")
    args = ap.parse_args(argv)
    sys.path.insert(0, str(ROOT))
    names = [s.name for s in _specs()]
    if args.list:
        print("\n".join(names))
        return 0
    chosen = [n for n in names if not args.k or n in args.k.split(",")]
    total: Counter = Counter()
    bad = False
    t0 = time.monotonic()
    print(f"{'parser':<22} {'ok':>6} {'error':>6} {'crash':>6} {'hang':>5} {'wrong':>6}")
    for name in chosen:
        counts, sites = fuzz_one(name, args.seed, args.examples, args.deadline)
        total.update(counts)
        print(f"{name:<22} {counts['ok']:>6} {counts['error']:>6} {counts['crash']:>6} "
              f"{counts['hang']:>5} {counts['silent-wrong']:>6}", flush=True)
        for site, k in sites.most_common(8):
            print(f"    {k:>5} × {site}")
        bad |= bool(counts["crash"] or counts["hang"] or counts["silent-wrong"])
    print(f"{'total':<22} {total['ok']:>6} {total['error']:>6} {total['crash']:>6} "
          f"{total['hang']:>5} {total['silent-wrong']:>6}   ({sum(total.values()):,} inputs, "
          f"{time.monotonic() - t0:.0f} s, seed {args.seed})")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
