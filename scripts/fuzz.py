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

    # the first frame's raw read of the profile
    def _ident_run(x, t):
        from seat_console.tui.first_frame import raw_identity
        p = t / "p.toml"
        p.write_bytes(x)
        return raw_identity(str(p))
    add("first_frame_identity", lambda r, t: _prof_gen(r, t).encode("utf-8", "surrogatepass"),
        _ident_run, lambda: ())
    return specs


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
                    "3000: 60,000 over the 20 parsers)")
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
