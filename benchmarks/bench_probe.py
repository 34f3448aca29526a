#!/usr/bin/env python3
"""The probe's load client vs ``vllm bench serve``, paired on the same vLLM server, and the
SSE parsing rate.

**Paired throughput and client CPU** (``--pairs N``): each pair runs ``vllm bench serve`` and
the probe one after the other (order alternating between pairs) against the same server, with
the same prompts (the probe's shipped set, written as a ``custom`` JSONL dataset with
``--disable-shuffle --skip-chat-template``), the same output length (``ignore_eos``), the same
closed-loop concurrency and request count, temperature 0, streaming ``/v1/completions``.
``vllm bench serve`` runs from the lab's vLLM venv through its module, as ``RECIPES.md`` says
(``from vllm.benchmarks.serve import add_cli_args, main``); its client CPU time is measured
around its ``benchmark()`` coroutine only (tokenizer and dataset loading excluded), the probe's
around its phase; the probe's phase CPU (``client_cpu_s``: the measured requests, no warm-up or
scrapes) is compared, its whole-run CPU (client setup, warm-up, two ``/metrics`` scrapes, run
files) is reported too. Each client runs in its own process; CPU = user + system time of that
process (``time.process_time``). Reported: output tok/s of each and their ratio, CPU seconds per
1,000 output tokens of each and their ratio, the load average after each client run. Each pair
runs ``bench serve`` and every probe ``--variants`` entry (``<http stack>-<event loop>``:
``aiohttp-uvloop`` is what the console runs, ``httpcore-asyncio`` the stack before it), the
order rotating between pairs. ``--url URL`` sends to another server instead of the lab's vLLM
and takes no lab lock — ``benchmarks/stream_server.py`` streams vLLM-shaped chunks at a fixed
pace, which measures client CPU with no engine competing for the cores.

**Stream server sweep** (``--stream C:GAP[:LEN[:WAVES]],...``, issue 21): for each rate this script
starts ``benchmarks/stream_server.py`` (one timer for all streams, pinned to ``--server-cpu``) and
runs ``--pairs`` pairs of ``bench serve`` and every variant (pinned to ``--client-cpu``) at
concurrency C, ``--waves`` × C requests. Each prompt is sent tagged (``req-bench-<i>`` in the
``bench serve`` dataset, ``req-<phase>-<index>`` by the probe), the server records when it sent
each token of each tag, and each client's ITLs are matched to the server's sent gaps token by token
(:func:`itl_error`): the ITL error is the client's gap minus the gap the server sent, and the
distributions' p50 / p99 differences are reported too. Per client run also: the server's achieved
pace and CPU (:func:`server_pace`), the client's core share (CPU s / its duration) and tokens per
CPU second (the aggregate rate at which it would fill one core if its CPU per token stayed as
measured — a derived figure), the load average; ``uptime`` before and after in the JSON. A rate may
name its own output length and waves, ``C:GAP:LEN:WAVES`` (else ``--output-len`` and ``--waves``),
so one run can hold short and long streams.

**Tok/s like for like** (:func:`server_pace`): each client computes its own tok/s over its
own duration (``bench serve``: from before it creates its request tasks to after the last one
is gathered; the probe: first request sent to last stream ended), so the server's record gives
the same figure for both — tokens over the window from the first request's arrival to the last
token's send (``served_tok_s``, and per pair ``served_ratio``) — and what the closed loop spends
between two requests of a slot: per connection, the next request's arrival after the last
token of the one before (``turnaround_s``), and that time's share of a slot's cycle
(``idle_share``).

**The lab's vLLM in the same run** (``--lab-pairs N`` with ``--stream``): after the stream
server's rates, N pairs of every client against the lab's vLLM (``--lab-requests``,
``--lab-concurrency``, ``--lab-output-len``), holding ``--lab-lock FILE`` (the shared
lab-tests lock) and then the lab's ``disrupt.lock``; per probe run its phase's engine timing
(client TTFT / ITL against the engine's histogram buckets) is kept.

**Saturation measured at a CPU quota** (``--quota SHARE``, with ``--stream``): every client run
gets a fresh cgroup v1 ``cpu`` cgroup (``/sys/fs/cgroup/cpu/bench-probe-<pid>-<n>``:
``cpu.cfs_quota_us`` = SHARE × ``cpu.cfs_period_us``, ``--quota-period-us``, default 10 ms),
which the child joins (its PID to ``cgroup.procs``) where its measured part starts — the
probe before its run, ``bench serve`` before its ``benchmark()``; imports, tokenizer and
dataset loading run uncapped — on its pinned core, so no client
can use more than SHARE of a core while the stream server runs on its own core with the rest
of it. Raising the rate (``--stream`` from low to high) then finds each client's saturation
directly: the aggregate tok/s at which it stops growing while the server keeps its schedule.
Per client run the cgroup's ``cpu.stat`` (periods, throttled periods, throttled time) is kept;
the summary (``saturation`` in the JSON) gives per client its median tok/s at each rate, the
highest (its saturation at SHARE of a core, **measured**), whether the growth had stopped (the
last rate within 5 % of the one before), the probe / ``bench serve`` ratio of the saturation
rates, and ``sat / SHARE`` — the one-core figure, **derived** (linear in the quota). Each
cgroup is removed after its run (and all of them on the way out, error or not). Needs root
and a writable cgroup v1 ``cpu`` controller. ``--quota`` caps every client run of the run.

**Saturation in the same run as the uncapped rates** (``--sat-stream C:GAP[:LEN[:WAVES]],...``
with ``--sat-quota SHARE``): after the ``--stream`` rates (uncapped) a second sweep over the
``--sat-stream`` rates, low to high, with every client capped at SHARE of a core as
``--quota`` does (its servers on the ports after the ``--stream`` ones); the JSON's
``saturation`` is that sweep's summary (as above) plus its ``rates``, ``quota`` and its own
``uptime_before`` / ``uptime_after``. It runs before the lab column: the lab's vLLM loads both
cores (1-min load up to ~4 in the main run), and the stream server's rates want the quieter
machine; the lab lock is then held only for the lab column at the end.

**Verdicts** (:func:`verdicts`, every ``--stream`` run without ``--quota``; printed last and
kept as ``verdicts`` in the JSON): issue 21's four targets (:data:`TARGETS`) per probe variant
with every pair's figures — CPU per 1k tokens vs ``bench serve`` at the rates at 20k tok/s,
tok/s vs ``bench serve`` at every rate (and the server's like-for-like ratio beside it), the
ITL p50 error at 20k, and the saturation ratio with whether each client's growth had stopped
(``NOT MEASURED`` without a saturation sweep, or while ``bench serve`` was still growing at the
top rate; while the probe was, its ratio is a lower bound).

**SSE events parsed per second per core** (``--events N``): vLLM-shaped completion chunks (with
continuous usage) run through the probe's parsing pipeline as ``run_request`` feeds it — the
incremental UTF-8 decoder, httpx-sse's line and event decoders,
:func:`~seat_console.probe.client.parse_chunk`, :class:`StreamTimer` — in one thread, at one
event per read and at 1,400-byte reads; events / CPU second.

Usage (on the lab: ``python scripts/lab.py up`` first)::

    python benchmarks/bench_probe.py --pairs 3 --requests 64 --concurrency 8 --output-len 64 \\
        --json docs/validation/cpu-lab-bench_probe.json

The issue-21 sweep (``docs/benchmarks.md``)::

    python benchmarks/bench_probe.py --stream 64:0.0128,128:0.0064,192:0.00512,256:0.00512 \\
        --pairs 3 --variants hot-uvloop,aiohttp-uvloop --json docs/validation/….json

Saturation at a quarter of a core (rates low to high)::

    python benchmarks/bench_probe.py --stream 32:0.0064,64:0.0064,128:0.0064,256:0.0064 \\
        --quota 0.25 --pairs 2 --variants hot-uvloop --json docs/validation/….json

Every target in one run (uncapped rates, then the saturation sweep, then the lab column)::

    python benchmarks/bench_probe.py --stream 64:0.0128:512:2,128:0.0064:512:2 \\
        --sat-stream 64:0.0064:512:1,256:0.0064:512:1,512:0.0064:512:1 --sat-quota 0.15 \\
        --pairs 3 --variants hot-uvloop,hot-uvloop-aa --lab-pairs 3 --json docs/validation/….json

Holds the lab's ``.lab/disrupt.lock`` exclusively while it sends load (no test session sends
requests meanwhile). Not a test: nothing is asserted.
"""

from __future__ import annotations

import argparse
import fcntl
import json
import os
import platform
import re
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

BENCH_SERVE = r"""
import json, os, sys, time, argparse
import vllm.benchmarks.serve as S
import vllm.benchmarks.datasets.datasets as D
# pandas is an optional vLLM dependency the lab venv lacks; CustomDataset only needs
# read_json(lines=True) -> .columns / .iterrows() of {"prompt": ...} rows (harness shim, not timed)
class _Rows:
    def __init__(self, path):
        self.rows = [json.loads(l) for l in open(path) if l.strip()]
        self.columns = sorted({k for r in self.rows for k in r})
    def iterrows(self):
        for i, r in enumerate(self.rows):
            yield i, type("Row", (), {"to_dict": lambda self, r=r: dict(r)})()
class _PD:
    @staticmethod
    def read_json(path_or_buf, lines):
        return _Rows(path_or_buf)
D.pd = _PD
cpu = {}
orig = S.benchmark
itl_file = os.environ.get("BENCH_ITL_FILE")
async def timed(*a, **k):
    if os.environ.get("BENCH_CGROUP_PROCS"):   # --quota: capped from here (setup excluded)
        with open(os.environ["BENCH_CGROUP_PROCS"], "w") as fh:
            fh.write(str(os.getpid()))
    c0, w0 = time.process_time(), time.perf_counter()
    r = await orig(*a, **k)
    cpu["cpu_s"], cpu["wall_s"] = time.process_time() - c0, time.perf_counter() - w0
    if itl_file:   # per-request ITLs, in dataset order (--disable-shuffle), tagged as sent
        with open(itl_file, "w") as fh:
            json.dump({f"req-bench-{i}": list(x) for i, x in enumerate(r["itls"])}, fh)
    return r
S.benchmark = timed
p = argparse.ArgumentParser()
S.add_cli_args(p)
res = S.main(p.parse_args(sys.argv[1:]))
print("@@RESULT@@" + json.dumps({"output_throughput": res["output_throughput"],
      "completed": res["completed"], "failed": res.get("failed"),
      "total_output_tokens": res["total_output_tokens"], "duration_s": res["duration"],
      **{k: res.get(k) for k in ("median_ttft_ms", "p99_ttft_ms", "median_itl_ms",
                                 "p99_itl_ms")}, **cpu}))
"""

PROBE = r"""
import asyncio, functools, json, sys, time
import seat_console.probe.run as R
from seat_console.probe.client import make_client, run_async
from seat_console.core.profile import load_profile
from seat_console.probe.run import Probe, Preflight, HoldInfo
from seat_console.probe.engine_counters import KvCapacity
from seat_console.probe.store import RunWriter
from pathlib import Path
loaded = load_profile(sys.argv[1])
url, model, out = sys.argv[2], sys.argv[3], Path(sys.argv[4])
http, loop, *opts = sys.argv[5].split("-")   # "aiohttp-uvloop" (the default), "httpcore-asyncio"
itl_file = sys.argv[6] if len(sys.argv) > 6 else ""   # "" : no tags, no ITL file
if itl_file:   # the stream server's tag: each prompt starts with req-<phase>-<index>
    from seat_console.probe.client import RequestSpec
    _tagless = RequestSpec.payload
    def _tagged(self):
        body = _tagless(self)
        body["prompt"] = f"req-{self.phase}-{self.index} " + body["prompt"]
        return body
    RequestSpec.payload = _tagged
if "nocus" in opts:   # A/B: no usage in every chunk (what bench serve asks for)
    from seat_console.probe.client import RequestSpec
    _payload = RequestSpec.payload
    def _no_cus(self):
        body = _payload(self)
        body["stream_options"] = {"include_usage": True}
        return body
    RequestSpec.payload = _no_cus
if "prev" in opts:   # A/B: SSEFeed.feed and parse_chunk as before the one-event shortcut
    import importlib.util, seat_console.probe.client as C
    spec = importlib.util.spec_from_file_location("client_prev", sys.argv[7])
    prev = importlib.util.module_from_spec(spec)
    sys.modules["client_prev"] = prev
    spec.loader.exec_module(prev)
    C.parse_chunk, C.SSEFeed.feed = prev.parse_chunk, prev.SSEFeed.feed
# any other option ("aa"): a label only, the same client run again (an A/A)
# "hot-uvloop": the stream hot path (probe/hotpath.py); otherwise the httpx path over `http`
object.__setattr__(loaded.profile.probe, "stream_client", "hot" if http == "hot" else http)
if http != "hot":
    R.make_client = functools.partial(make_client, http=http)
runner = run_async if loop == "uvloop" else asyncio.run
pre = Preflight(endpoint=url, model=model, identity={"endpoint": url}, kv=KvCapacity(),
                hold=HoldInfo(None, "benchmark"), seat_containers=set())
probe = Probe(loaded, pre, writer=RunWriter(root=out))
import os
if os.environ.get("BENCH_CGROUP_PROCS"):   # --quota: capped from here (imports excluded)
    with open(os.environ["BENCH_CGROUP_PROCS"], "w") as fh:
        fh.write(str(os.getpid()))
c0, w0 = time.process_time(), time.perf_counter()
s = runner(probe.run())
cpu, wall = time.process_time() - c0, time.perf_counter() - w0
st = s["phases"][0]["stats"]
print("@@RESULT@@" + json.dumps({"output_throughput": st["output_tok_s"],
      "completed": st["completed"], "failed": st["failed"],
      "total_output_tokens": st["output_tokens"], "duration_s": st["duration_s"],
      "cpu_s": s["phases"][0]["client_cpu_s"],
      "itl_p50_s": (st.get("itl") or {}).get("p50_s"),
      "itl_p99_s": (st.get("itl") or {}).get("p99_s"), "run_cpu_s": cpu, "wall_s": wall,
      "ttft_p50_s": (st.get("ttft") or {}).get("p50_s"),
      "ttft_p99_s": (st.get("ttft") or {}).get("p99_s"),
      "engine_timing": s["phases"][0].get("engine_timing"),
      "timing_findings": s["phases"][0].get("timing_findings"),
      "accounting": s["phases"][0]["accounting"], "status": s["status"]}))
if itl_file:
    name = s["phases"][0]["name"]
    recs = [json.loads(l) for l in (probe.writer.path / "requests.jsonl").open()]
    with open(itl_file, "w") as fh:
        json.dump({f"req-{r['phase']}-{r['index']}": r["itl_s"] for r in recs
                   if r["phase"] == name and r["ok"]}, fh)
"""


PREV_CLIENT = "893974f^"
"""The commit whose ``console/probe/client.py`` a ``…-prev`` variant runs ``SSEFeed.feed`` and
``parse_chunk`` from (the hot path before the one-event shortcut)."""


def without_probe(text: str) -> str:
    """Profile TOML text with its ``[probe]`` / ``[[probe.phases]]`` tables removed (the other
    tables — ``[swap]``, ``[candidate]``… — are kept)."""
    out, skipping = [], False
    for line in text.splitlines():
        s = line.strip()
        if s.startswith("["):
            skipping = bool(re.match(r"^\[\[?\s*probe\s*[\].]", s))
        if not skipping and not s.startswith("# The probe, bounded"):
            out.append(line)
    return "\n".join(out) + "\n"


def _result(cp: subprocess.CompletedProcess[str], what: str) -> dict:
    for line in cp.stdout.splitlines():
        if line.startswith("@@RESULT@@"):
            return json.loads(line[len("@@RESULT@@"):])
    raise SystemExit(f"{what} gave no result (rc {cp.returncode}):\n{cp.stdout[-3000:]}\n"
                     f"{cp.stderr[-3000:]}")


CGROUP_CPU = Path("/sys/fs/cgroup/cpu")
"""The cgroup v1 ``cpu`` controller's mount (``--quota``)."""


class CpuQuota:
    """A cgroup v1 ``cpu`` cgroup that caps its processes at ``share`` of one core: made at
    ``CGROUP_CPU / name`` with ``cpu.cfs_period_us`` = ``period_us`` and ``cpu.cfs_quota_us``
    = ``share`` × ``period_us``. A client joins it by writing its PID to :attr:`procs` (the
    child does, from ``BENCH_CGROUP_PROCS``, where its measured part starts: its imports and
    setup run uncapped); :meth:`stat` reads ``cpu.stat`` (``nr_periods``, ``nr_throttled``, ``throttled_time``
    in ns); :meth:`remove` deletes it once its processes have exited (waits up to 10 s).
    Raises :class:`OSError` when the controller is missing or not writable (not root)."""

    def __init__(self, name: str, share: float, period_us: int = 10_000) -> None:
        if not 0 < share <= 64:
            raise ValueError(f"--quota {share}: a share of one core, > 0")
        self.share, self.period_us = share, period_us
        self.quota_us = max(1000, round(share * period_us))   # the kernel's minimum is 1 ms
        self.path = CGROUP_CPU / name
        self.path.mkdir()
        try:
            (self.path / "cpu.cfs_period_us").write_text(str(period_us))
            (self.path / "cpu.cfs_quota_us").write_text(str(self.quota_us))
        except OSError:
            self.remove()
            raise

    @property
    def procs(self) -> Path:
        """The cgroup's ``cgroup.procs`` (write a PID there to move that process in)."""
        return self.path / "cgroup.procs"

    def stat(self) -> dict[str, int]:
        """``cpu.stat`` as a dict (throttled_time in ns), plus the quota and period (µs)."""
        out = {k: int(v) for k, v in (ln.split() for ln in
                                      (self.path / "cpu.stat").read_text().splitlines())}
        return {**out, "quota_us": self.quota_us, "period_us": self.period_us}

    def remove(self) -> None:
        """Delete the cgroup (its processes must have exited: retried for up to 10 s)."""
        deadline = time.monotonic() + 10
        while self.path.exists():
            try:
                self.path.rmdir()
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)


def _pinned(cpu: int | None):  # noqa: ANN202 - a preexec_fn or None
    """A ``preexec_fn`` that pins the child to core ``cpu`` (``None``: no pinning)."""
    if cpu is None:
        return None
    return lambda: os.sched_setaffinity(0, {cpu})


def _quota_env(quota: CpuQuota | None) -> dict[str, str]:
    """The child's environment entry naming ``quota``'s ``cgroup.procs`` (``{}``: none)."""
    return {"BENCH_CGROUP_PROCS": str(quota.procs)} if quota is not None else {}


def run_bench_serve(py: str, url: str, model: str, tokenizer: str, dataset: Path, n: int,
                    conc: int, out_len: int, cpu: int | None = None,
                    itl_file: Path | None = None, quota: CpuQuota | None = None) -> dict:
    """One ``vllm bench serve`` run in the vLLM venv's python (pinned to core ``cpu`` when
    given, in ``quota``'s cgroup when given); its result dict. ``itl_file``: where it writes
    each request's ITLs (s), keyed ``req-bench-<dataset index>``."""
    args = ["--backend", "vllm", "--base-url", url, "--endpoint", "/v1/completions",
            "--model", model, "--tokenizer", tokenizer, "--dataset-name", "custom",
            "--dataset-path", str(dataset), "--custom-output-len", str(out_len),
            "--skip-chat-template", "--disable-shuffle", "--num-prompts", str(n),
            "--max-concurrency", str(conc), "--ignore-eos", "--temperature", "0",
            "--disable-tqdm", "--percentile-metrics", "ttft,tpot,itl,e2el"]
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "VLLM_NO_USAGE_STATS": "1",
           "TORCHDYNAMO_DISABLE": "1", **_quota_env(quota)}
    if itl_file is not None:
        env["BENCH_ITL_FILE"] = str(itl_file)
    cp = subprocess.run([py, "-c", BENCH_SERVE, *args], capture_output=True, text=True,
                        timeout=900, env=env, check=False, preexec_fn=_pinned(cpu))
    return _result(cp, "vllm bench serve")


def run_probe(profile: Path, url: str, model: str, out: Path, variant: str,
              cpu: int | None = None, itl_file: Path | None = None,
              quota: CpuQuota | None = None, base: Path | None = None) -> dict:
    """One probe run (one phase) in a child process over ``variant`` (``<http stack>-<event
    loop>``: ``hot-uvloop`` is the stream hot path the console runs, ``aiohttp-uvloop`` the
    httpx path over aiohttp, ``httpcore-asyncio`` the stack before that), pinned to core
    ``cpu`` when given; its result dict. A ``-prev`` suffix runs ``SSEFeed.feed`` and
    ``parse_chunk`` from :data:`PREV_CLIENT` (an A/B); any other suffix (``-aa``) is a label
    only, the same client again (an A/A) — except ``-base``, which runs the probe from
    ``base`` (a tree holding ``seat_console``: the ``--base`` commit's code, an A/B).
    ``itl_file``: each prompt is sent tagged ``req-<phase>-<index>`` and each completed
    request's ITLs (s) are written there under its tag. ``quota``: run it in that cgroup."""
    prev: list[str] = []
    if "prev" in variant.split("-")[2:]:
        prev = [str(out.parent / "client_prev.py")]
        Path(prev[0]).write_text(subprocess.run(
            ["git", "-C", str(ROOT), "show", f"{PREV_CLIENT}:console/probe/client.py"],
            capture_output=True, text=True, check=True).stdout)
    path = str(ROOT)
    if "base" in variant.split("-")[2:]:
        if base is None:
            raise SystemExit(f"variant {variant}: give --base COMMIT")
        path = f"{base}{os.pathsep}{ROOT}"
    if os.environ.get("PYTHONPATH"):   # the caller's (a machine's carried site) after ours
        path = f"{path}{os.pathsep}{os.environ['PYTHONPATH']}"
    cp = subprocess.run([sys.executable, "-c", PROBE, str(profile), url, model, str(out),
                         variant, str(itl_file or ""), *prev],
                        capture_output=True, text=True, timeout=900, check=False,
                        env={**os.environ, "PYTHONPATH": path, **_quota_env(quota)},
                        preexec_fn=_pinned(cpu))
    return _result(cp, "probe")


def base_tree(commit: str, into: Path) -> Path:
    """``console/`` of ``commit`` extracted under ``into`` with a ``seat_console`` link to it
    (first on ``PYTHONPATH``, it shadows the editable install); returns ``into`` (already
    there: left as it is)."""
    if (into / "seat_console").exists():   # a second sweep of the same run
        return into
    into.mkdir(parents=True, exist_ok=True)
    arch = subprocess.run(["git", "-C", str(ROOT), "archive", commit, "console"],
                          capture_output=True, check=True).stdout
    subprocess.run(["tar", "-x", "-C", str(into)], input=arch, check=True)
    (into / "seat_console").symlink_to(into / "console")
    return into


def pct(xs: list[float], q: float) -> float | None:
    """The ``q`` quantile of ``xs`` (linear between order statistics, numpy's default
    ``linear`` method); ``None`` for no values."""
    if not xs:
        return None
    s = sorted(xs)
    h = (len(s) - 1) * q
    lo = int(h)
    return s[lo] + (s[min(lo + 1, len(s) - 1)] - s[lo]) * (h - lo)


def itl_error(client: dict[str, list[float]], sent: dict[str, list[float]]) -> dict:
    """A client's ITLs against the gaps the stream server sent, token by token.

    ``client``: tag → the request's ITLs as the client measured them (s; one per token after
    the first); ``sent``: tag → the server's send time of each token's chunk (monotonic s).
    A request is matched when the server streamed its tag with one more send than the client
    has ITLs. Returned (seconds): ``error_*`` — quantiles of (client gap − sent gap) over every
    matched token (signed) and of its absolute value; ``client_gap_*`` / ``sent_gap_*`` — the two
    distributions' p50 / p99 and ``dist_p50_diff_s`` / ``dist_p99_diff_s`` their differences
    (the client's reported ITL p50 / p99 minus the server's true ones); counts of matched and
    unmatched requests."""
    errs: list[float] = []
    cg: list[float] = []
    sg: list[float] = []
    unmatched = 0
    for tag, itl in client.items():
        t = sent.get(tag)
        if not t or len(t) - 1 != len(itl):
            unmatched += 1
            continue
        gaps = [b - a for a, b in zip(t, t[1:], strict=False)]
        errs += [c - g for c, g in zip(itl, gaps, strict=True)]
        cg += itl
        sg += gaps
    ab = [abs(e) for e in errs]
    out = {"matched_requests": len(client) - unmatched, "unmatched_requests": unmatched,
           "tokens": len(errs),
           "error_p50_s": pct(errs, 0.5), "error_p99_s": pct(errs, 0.99),
           "error_p1_s": pct(errs, 0.01),
           "abs_error_p50_s": pct(ab, 0.5), "abs_error_p99_s": pct(ab, 0.99),
           "client_gap_p50_s": pct(cg, 0.5), "client_gap_p99_s": pct(cg, 0.99),
           "sent_gap_p50_s": pct(sg, 0.5), "sent_gap_p99_s": pct(sg, 0.99)}
    if cg:
        out["dist_p50_diff_s"] = out["client_gap_p50_s"] - out["sent_gap_p50_s"]
        out["dist_p99_diff_s"] = out["client_gap_p99_s"] - out["sent_gap_p99_s"]
    return out


def server_pace(summary: dict, tags: set[str] | None = None) -> dict:
    """The stream server's achieved pace over one client run (its ``/summary``): tokens sent,
    aggregate tokens/s between its first and last send, the per-stream sent gaps' p50 / p99
    (s), its send lag behind schedule and its CPU seconds and core share over the send span.
    ``tags``: only these streams (``None``: all; the probe's warm-up request, sent seconds
    before its phase, would stretch the span).

    From the server's ``arrived`` / ``conn`` record (when the summary has it), the same for
    every client, whatever its own clock and duration say: ``window_s`` — the first request's
    arrival to the last token's send; ``served_tok_s`` = tokens / ``window_s`` (the like-for-like
    tok/s); ``stream_s`` — the quantiles of a stream's life (arrival to last send);
    ``turnaround_s`` — per connection, the gap from one stream's last send to the next request's
    arrival on it (what the client's closed loop spends between two requests of a slot:
    reading the tail, finishing the request, starting the next), quantiles, mean and count;
    ``idle_share`` = Σ turnaround / (Σ turnaround + Σ stream lives of the streams followed by
    one), the share of a slot's cycle spent between requests."""
    sent = {k: v for k, v in summary["sent"].items() if tags is None or k in tags}
    times = sorted(t for v in sent.values() for t in v)
    span = times[-1] - times[0] if len(times) > 1 else 0.0
    gaps = [b - a for v in sent.values() for a, b in zip(v, v[1:], strict=False)]
    out = {"tokens": len(times), "span_s": span,
           "tok_s": (len(times) - 1) / span if span else None,
           "gap_p50_s": pct(gaps, 0.5), "gap_p99_s": pct(gaps, 0.99),
           "nominal_gap_s": summary["gap_s"], "send_lag_s": summary["send_lag_s"],
           "cpu_s": summary["cpu_s"], "core_share": summary["cpu_s"] / span if span else None,
           "loadavg": summary["loadavg"]}
    arrived, conn = summary.get("arrived") or {}, summary.get("conn") or {}
    tagged = [k for k, v in sent.items() if v and k in arrived and k in conn]
    if tagged:
        window = max(sent[k][-1] for k in tagged) - min(arrived[k] for k in tagged)
        lives = [sent[k][-1] - arrived[k] for k in tagged]
        by_conn: dict[int, list[str]] = {}
        for k in tagged:
            by_conn.setdefault(conn[k], []).append(k)
        turn, followed = [], []
        for ks in by_conn.values():
            ks.sort(key=lambda k: arrived[k])
            for a, b in zip(ks, ks[1:], strict=False):
                turn.append(arrived[b] - sent[a][-1])
                followed.append(sent[a][-1] - arrived[a])
        out.update({
            "window_s": window,
            "served_tok_s": sum(len(sent[k]) for k in tagged) / window if window else None,
            "stream_s": {"p50": pct(lives, 0.5), "p99": pct(lives, 0.99)},
            "turnaround_s": {"p50": pct(turn, 0.5), "p99": pct(turn, 0.99),
                             "mean": sum(turn) / len(turn) if turn else None,
                             "n": len(turn)},
            "idle_share": sum(turn) / (sum(turn) + sum(followed)) if turn else None,
            "connections": len(by_conn)})
    return out


def uptime() -> str:
    """``uptime``'s line (the machine's load), or the load average when it is missing."""
    try:
        return subprocess.run(["uptime"], capture_output=True, text=True, check=True,
                              timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "load average: " + ", ".join(f"{x:.2f}" for x in os.getloadavg())


def sse_rate(n_events: int, read_bytes: int | None) -> dict:
    """Events per CPU second through the probe's SSE parsing pipeline (one thread), fed as
    :func:`~seat_console.probe.client.run_request` feeds it: bytes reads → stdlib incremental
    UTF-8 decoder → httpx-sse's line and event decoders → ``StreamTimer.feed`` (``parse_chunk``,
    orjson), one timestamp per read. ``read_bytes``: bytes per read (``None``: one event per
    read, as vLLM sends each token in its own HTTP chunk)."""
    import codecs

    from httpx_sse._decoders import SSEDecoder, SSELineDecoder
    from seat_console.probe.client import StreamTimer

    chunks = []
    for i in range(1, n_events + 1):
        obj = {"id": "cmpl-0123456789abcdef", "object": "text_completion", "created": 1796116449,
               "model": "seat-resident", "choices": [{"index": 0, "text": " tok", "logprobs": None,
                                                      "finish_reason": None, "stop_reason": None,
                                                      "prompt_token_ids": None,
                                                      "token_ids": None}],
               "usage": {"prompt_tokens": 60, "total_tokens": 60 + i, "completion_tokens": i}}
        chunks.append(("data: " + json.dumps(obj, separators=(",", ":")) + "\n\n").encode())
    if read_bytes is None:
        reads = chunks
    else:
        data = b"".join(chunks)
        reads = [data[i:i + read_bytes] for i in range(0, len(data), read_bytes)]
    best = None
    for _ in range(3):
        lines, events, timer = SSELineDecoder(), SSEDecoder(), StreamTimer()
        utf8 = codecs.getincrementaldecoder("utf-8")("replace")
        c0 = time.process_time()
        for raw in reads:
            t = time.perf_counter()
            for line in lines.decode(utf8.decode(raw)):
                ev = events.decode(line.rstrip("\n"))
                if ev is not None and (ev.data or ev.event):
                    timer.feed(ev.data, t)
        cpu = time.process_time() - c0
        assert timer.tokens_streamed == n_events
        best = cpu if best is None else min(best, cpu)
    return {"events": n_events, "read_bytes": read_bytes, "cpu_s": best,
            "events_per_cpu_s": n_events / best,
            "bytes_per_event": sum(map(len, chunks)) / n_events}


def _get(url: str, what: str, post: bool = False) -> dict:
    import httpx

    r = httpx.post(url + what, timeout=30) if post else httpx.get(url + what, timeout=30)
    r.raise_for_status()
    return r.json() if r.content else {}


def parse_rates(spec: str, output_len: int, waves: int) -> list[dict]:
    """A ``--stream`` / ``--sat-stream`` value, ``C:GAP[:LEN[:WAVES]],...``, as one dict per
    rate: ``concurrency`` C (streams in flight), ``gap_s`` GAP (s between a stream's tokens),
    ``output_len`` LEN (tokens per stream; else ``output_len``), ``waves`` WAVES (requests =
    WAVES × C; else ``waves``), ``requests`` and ``nominal_tok_s`` = C / GAP. Raises
    :class:`ValueError` for a malformed entry, a count below 1 or a gap that is not > 0."""
    out = []
    for entry in spec.split(","):
        parts = entry.strip().split(":")
        if not 2 <= len(parts) <= 4:
            raise ValueError(f"rate {entry!r}: C:GAP[:LEN[:WAVES]]")
        conc, gap = int(parts[0]), float(parts[1])
        out_len = int(parts[2]) if len(parts) > 2 else output_len
        w = int(parts[3]) if len(parts) > 3 else waves
        if conc < 1 or out_len < 1 or w < 1 or not gap > 0:
            raise ValueError(f"rate {entry!r}: C, LEN and WAVES >= 1, GAP > 0")
        out.append({"concurrency": conc, "gap_s": gap, "output_len": out_len, "waves": w,
                    "requests": w * conc, "nominal_tok_s": conc / gap})
    return out


def stream_sweep(a: argparse.Namespace, py: str, model: str, tok: str, tmp: Path,
                 prompts: list[str], lab_profile: str, spec: str, quota_share: float | None,
                 port0: int, name: str = "stream") -> dict:
    """One sweep over ``spec``'s rates (``C:GAP[:LEN[:WAVES]],...``, :func:`parse_rates`;
    ``--stream``, or ``--sat-stream`` for the saturation sweep): for each rate start
    ``benchmarks/stream_server.py`` at gap GAP on port ``port0`` + its index (pinned to
    ``--server-cpu``), then run ``--pairs`` pairs of every client (``bench serve`` and each
    variant, the order rotating, pinned to ``--client-cpu``) at concurrency C with WAVES × C
    requests; per client run: the server's record reset before and read after (its achieved
    pace, its send lag, its CPU), the client's tok/s, CPU, core share and the token-matched ITL
    error (:func:`itl_error`). ``quota_share``: every client run in a fresh :class:`CpuQuota`
    cgroup at that share of a core (``None``: uncapped), and the result gets ``quota`` and
    ``saturation`` (:func:`saturation`). ``name`` labels the files of this sweep. Returns the
    JSON-able result: ``rates`` (one per rate), ``pinning``, ``base_commit``."""
    variants = a.variants.split(",")
    pin_s = None if a.no_pin else a.server_cpu
    pin_c = None if a.no_pin else a.client_cpu
    base = base_tree(a.base, tmp / "base") if a.base else None
    out = []
    for k, r0 in enumerate(parse_rates(spec, a.output_len, a.waves)):
        conc, gap, out_len, waves = r0["concurrency"], r0["gap_s"], r0["output_len"], r0["waves"]
        n = r0["requests"]
        port = port0 + k
        key = f"{name}-{k}"   # this sweep's files
        url = f"http://127.0.0.1:{port}"
        srv = subprocess.Popen([sys.executable, str(ROOT / "benchmarks" / "stream_server.py"),
                                str(port), str(gap),
                                *(["--cpu", str(pin_s)] if pin_s is not None else [])])
        try:
            deadline = time.monotonic() + 60
            while True:
                try:
                    _get(url, "/summary")
                    break
                except Exception:   # noqa: BLE001 - not up yet
                    if time.monotonic() > deadline or srv.poll() is not None:
                        raise SystemExit(f"the stream server on {url} did not start") from None
                    time.sleep(0.2)
            dataset = tmp / f"prompts-{key}.jsonl"
            with dataset.open("w") as fh:
                for i in range(n):
                    fh.write(json.dumps({"prompt": f"req-bench-{i} " + prompts[i % len(prompts)]})
                             + "\n")
            profile = probe_profile(tmp / f"profile-{key}.toml", lab_profile, out_len, n, conc)
            rate = {"concurrency": conc, "gap_s": gap, "nominal_tok_s": conc / gap,
                    "requests": n, "waves": waves, "output_len": out_len, "url": url,
                    "pairs": []}
            for p_i in range(a.pairs):
                who_all = ["bench", *variants]
                order = who_all[p_i % len(who_all):] + who_all[:p_i % len(who_all)]
                pair: dict = {"order": order, "clients": {}}
                for who in order:
                    itl_file = tmp / f"itl-{key}-{p_i}-{who}.json"
                    _get(url, "/reset", post=True)
                    quota = None
                    if quota_share is not None:
                        quota = CpuQuota(f"bench-probe-{os.getpid()}-{next(_CG_SEQ)}",
                                         quota_share, a.quota_period_us)
                        _CGROUPS.append(quota)
                    try:
                        if who == "bench":
                            r = run_bench_serve(py, url, model, tok, dataset, n, conc,
                                                out_len, pin_c, itl_file, quota)
                        else:
                            r = run_probe(profile, url, model, tmp / "runs", who, pin_c,
                                          itl_file, quota, base)
                        if quota is not None:
                            r["cgroup"] = {"share": quota.share, **quota.stat()}
                    finally:
                        if quota is not None:
                            quota.remove()
                    summ = _get(url, "/summary")
                    client = json.loads(itl_file.read_text())
                    r["server"] = server_pace(summ, set(client))
                    r["itl_error"] = itl_error(client, summ["sent"])
                    r["cpu_s_per_1k"] = r["cpu_s"] / r["total_output_tokens"] * 1000
                    r["tok_per_cpu_s"] = r["total_output_tokens"] / r["cpu_s"]
                    r["core_share"] = r["cpu_s"] / r["duration_s"]
                    r["loadavg"] = os.getloadavg()
                    pair["clients"][who] = r
                    e = r["itl_error"]
                    print(f"{conc / gap:>8,.0f} nominal ({out_len} tok), pair {p_i + 1}, "
                          f"{who:15s}: "
                          f"{r['output_throughput']:>8,.0f} tok/s (server {r['server']['tok_s']:,.0f}"
                          f", its core {r['server']['core_share']:.2f}), "
                          f"{r['cpu_s_per_1k']:.4f} CPU s/1k, core {r['core_share']:.2f}, ITL p50 "
                          f"diff {e.get('dist_p50_diff_s', float('nan')) * 1e6:+.0f} µs, |err| "
                          f"p50 {(e['abs_error_p50_s'] or float('nan')) * 1e6:.0f} µs p99 "
                          f"{(e['abs_error_p99_s'] or float('nan')) * 1e6:.0f} µs "
                          f"({e['matched_requests']}/{e['matched_requests'] + e['unmatched_requests']}"
                          f" matched), server lag p50 "
                          f"{(r['server']['send_lag_s']['p50'] or 0) * 1e3:.2f} ms"
                          + (f", served {r['server']['served_tok_s']:,.0f} tok/s over "
                             f"{r['server']['window_s']:.3f} s (client's own duration "
                             f"{r['duration_s']:.3f} s), turnaround p50 "
                             f"{r['server']['turnaround_s']['p50'] * 1e3:.2f} ms mean "
                             f"{r['server']['turnaround_s']['mean'] * 1e3:.2f} ms, idle share "
                             f"{r['server']['idle_share']:.4f}"
                             if r['server'].get('turnaround_s', {}).get('mean') is not None
                             else "")
                          + (f", throttled {r['cgroup']['nr_throttled']}/"
                             f"{r['cgroup']['nr_periods']} periods" if "cgroup" in r else "")
                          + f", load {r['loadavg'][0]:.2f}", flush=True)
                b = pair["clients"]["bench"]
                for who, r in pair["clients"].items():
                    r["tok_s_ratio"] = r["output_throughput"] / b["output_throughput"]
                    r["cpu_ratio"] = r["cpu_s_per_1k"] / b["cpu_s_per_1k"]
                    if r["server"].get("served_tok_s") and b["server"].get("served_tok_s"):
                        # like for like: both clients' tok/s from the server's own record
                        r["served_ratio"] = (r["server"]["served_tok_s"]
                                             / b["server"]["served_tok_s"])
                rate["pairs"].append(pair)
            rate["median"] = {
                who: {key: statistics.median(p["clients"][who][key] for p in rate["pairs"])
                      for key in ("output_throughput", "cpu_s_per_1k", "cpu_ratio",
                                  "tok_s_ratio", "core_share", "tok_per_cpu_s")}
                for who in ["bench", *variants]}
            for who in ["bench", *variants]:
                runs = [p["clients"][who] for p in rate["pairs"]]
                if all("served_ratio" in r for r in runs):
                    m = rate["median"][who]
                    m["served_tok_s"] = statistics.median(r["server"]["served_tok_s"]
                                                          for r in runs)
                    m["served_ratio"] = statistics.median(r["served_ratio"] for r in runs)
                    turn = [r["server"]["turnaround_s"]["mean"] for r in runs
                            if r["server"]["turnaround_s"]["mean"] is not None]
                    idle = [r["server"]["idle_share"] for r in runs
                            if r["server"]["idle_share"] is not None]
                    # one wave: no slot sent a second request, no turnaround (None)
                    m["turnaround_mean_s"] = statistics.median(turn) if turn else None
                    m["idle_share"] = statistics.median(idle) if idle else None
            out.append(rate)
        finally:
            srv.terminate()
            srv.wait(timeout=30)
    res = {"rates": out, "pinning": {"server_cpu": pin_s, "client_cpu": pin_c},
           "base_commit": a.base}
    if quota_share is not None:
        res["quota"] = {"share": quota_share, "period_us": a.quota_period_us}
        res["saturation"] = saturation(out, ["bench", *variants], quota_share)
        for who, x in res["saturation"]["clients"].items():
            print(f"saturation at {quota_share:g} of a core, {who:15s}: {x['sat_tok_s']:,.0f} "
                  f"tok/s (at {x['at_nominal_tok_s']:,.0f} nominal; growth stopped: "
                  f"{x['plateau']}), one core derived {x['one_core_derived_tok_s']:,.0f}",
                  flush=True)
        for who, ratio in res["saturation"]["ratio_vs_bench"].items():
            print(f"saturation ratio {who} / bench serve at {quota_share:g} of a core: "
                  f"{ratio:.2f}")
    return res


_CG_SEQ = iter(range(1, 1 << 30))
_CGROUPS: list[CpuQuota] = []
"""Every cgroup this run made (removed on the way out, see :func:`main`)."""


def plateaued(tok_s: list[float], tol: float = 0.05) -> bool:
    """Whether a client's medians over rates low to high (``tok_s``) had stopped growing: at
    least two rates and the last at most ``tol`` above the highest of the ones before."""
    return len(tok_s) > 1 and tok_s[-1] <= (1 + tol) * max(tok_s[:-1])


def saturation(rates: list[dict], clients: list[str], share: float) -> dict:
    """Each client's saturation from a sweep at a CPU quota (``rates``: :func:`stream_sweep`'s,
    low to high): per rate its median tok/s, the server's median sent tok/s and send lag p50;
    ``sat_tok_s`` the highest median (measured, at ``share`` of a core), ``plateau`` whether
    the growth had stopped: the last rate's median is at most 5 % above the highest median of
    the rates before it (if not, the sweep did not reach saturation; a flat series whose last
    step is noise, e.g. 14.1k → 16.0k after 15.9k at a lower rate, counts as stopped — the rule
    until 2026-12-03 16:40 compared with the one rate before only and called that growing),
    ``one_core_derived_tok_s`` = sat / share; and ``ratio_vs_bench`` — each variant's sat over
    ``bench serve``'s."""
    out: dict = {"share": share, "clients": {}, "ratio_vs_bench": {}}
    for who in clients:
        per = []
        for rate in rates:
            runs = [p["clients"][who] for p in rate["pairs"]]
            per.append({"nominal_tok_s": rate["nominal_tok_s"],
                        "tok_s": statistics.median(r["output_throughput"] for r in runs),
                        "server_tok_s": statistics.median(r["server"]["tok_s"] or 0
                                                          for r in runs),
                        "server_lag_p50_s": statistics.median(
                            r["server"]["send_lag_s"]["p50"] or 0 for r in runs),
                        "core_share": statistics.median(r["core_share"] for r in runs),
                        "throttled_frac": statistics.median(
                            r["cgroup"]["nr_throttled"] / max(1, r["cgroup"]["nr_periods"])
                            for r in runs)})
        best = max(per, key=lambda x: x["tok_s"])
        plateau = plateaued([x["tok_s"] for x in per])
        out["clients"][who] = {"per_rate": per, "sat_tok_s": best["tok_s"],
                               "at_nominal_tok_s": best["nominal_tok_s"], "plateau": plateau,
                               "one_core_derived_tok_s": best["tok_s"] / share}
    b = out["clients"]["bench"]["sat_tok_s"]
    for who in clients:
        if who != "bench":
            out["ratio_vs_bench"][who] = out["clients"][who]["sat_tok_s"] / b
    return out


TARGETS = {"cpu_ratio_max": 0.5, "tok_s_ratio_tol": 0.03, "itl_p50_err_max_s": 50e-6,
           "sat_ratio_min": 2.0, "at_tok_s": 20_000.0}
"""Issue 21's targets: the probe's CPU per 1k tokens at most 0.5× ``bench serve``'s at 20k
tok/s; its tok/s within ±3 % of ``bench serve``'s on the stream server (every rate); its ITL
p50 error (reported p50 − the server's sent-gap p50) at most 50 µs at 20k tok/s; its
saturation rate at least 2× ``bench serve``'s. A rate is "at 20k" when its nominal
aggregate rate is within 10 % of ``at_tok_s``."""


def _span(xs: list[float], fmt: str) -> str:
    """``min–max`` of ``xs`` in ``fmt`` (one value when they agree; "–" for none)."""
    if not xs:
        return "–"
    lo, hi = format(min(xs), fmt), format(max(xs), fmt)
    return lo if lo == hi else f"{lo}–{hi}"


def verdicts(rates: list[dict], sat: dict | None, variants: list[str]) -> list[dict]:
    """Issue 21's four targets (:data:`TARGETS`) judged per probe variant on one run: ``rates``
    — the uncapped stream-server rates (:func:`stream_sweep`'s ``rates``); ``sat`` — the
    saturation sweep's :func:`saturation` summary (``None``: not in this run). Every pair
    counts: a target is met for a variant when every one of its pairs meets it (the A/A
    variant is judged the same way, so its figures give the spread). Returns one dict per
    target and variant: ``target`` (``cpu``, ``tok_s``, ``itl_p50``, ``saturation``),
    ``variant``, ``met`` (``True`` / ``False``; ``None``: not measurable in this run — no rate
    at 20k, no saturation sweep, or ``bench serve`` still growing at the sweep's top rate),
    ``values`` (per rate label: the per-pair figures; for ``saturation`` the ratio and both
    plateaus) and ``text``, a line with the figures."""
    t = TARGETS
    at20 = [r for r in rates if abs(r["nominal_tok_s"] - t["at_tok_s"]) <= 0.1 * t["at_tok_s"]]

    def label(r: dict) -> str:
        return f"{r['nominal_tok_s'] / 1000:.0f}k/{r['output_len']}tok"

    def per_pair(rs: list[dict], v: str, key: str) -> dict[str, list[float]]:
        out: dict[str, list[float]] = {}
        for r in rs:
            xs = []
            for p in r["pairs"]:
                c = p["clients"][v]
                x = c["itl_error"].get("dist_p50_diff_s") if key == "itl" else c.get(key)
                if x is not None:
                    xs.append(x)
            out[label(r)] = xs
        return out

    out = []
    for v in variants:
        cpu = per_pair(at20, v, "cpu_ratio")
        vals = [x for xs in cpu.values() for x in xs]
        met = (all(x <= t["cpu_ratio_max"] for x in vals) if vals else None)
        out.append({"target": "cpu", "variant": v, "met": met, "values": cpu, "text": (
            f"CPU per 1k tokens <= {t['cpu_ratio_max']}x bench serve's at 20k: "
            + ", ".join(f"{k} {_span(xs, '.3f')}" for k, xs in cpu.items()) if vals
            else "CPU at 20k: no rate at 20k tok/s in this run")})
        tok = per_pair(rates, v, "tok_s_ratio")
        vals = [x for xs in tok.values() for x in xs]
        bad = [k for k, xs in tok.items() if any(abs(x - 1) > t["tok_s_ratio_tol"] for x in xs)]
        met = (not bad) if vals else None
        served = per_pair(rates, v, "served_ratio")
        out.append({"target": "tok_s", "variant": v, "met": met, "values": tok, "text": (
            f"tok/s within +-{t['tok_s_ratio_tol']:.0%} of bench serve's: "
            + ", ".join(f"{k} {_span(xs, '.3f')} (served "
                        f"{_span(served.get(k, []), '.3f')})" for k, xs in tok.items())
            + (f"; outside at {', '.join(bad)}" if bad else ""))})
        itl = per_pair(at20, v, "itl")
        vals = [x for xs in itl.values() for x in xs]
        met = (all(abs(x) <= t["itl_p50_err_max_s"] for x in vals) if vals else None)
        out.append({"target": "itl_p50", "variant": v, "met": met, "values": itl, "text": (
            f"ITL p50 error <= {t['itl_p50_err_max_s'] * 1e6:.0f} us at 20k: "
            + ", ".join(f"{k} {_span([x * 1e6 for x in xs], '+.0f')} us"
                        for k, xs in itl.items()) if vals
            else "ITL p50 at 20k: no rate at 20k tok/s in this run")})
        if sat is None:
            out.append({"target": "saturation", "variant": v, "met": None, "values": {},
                        "text": "saturation: no saturation sweep in this run"})
            continue
        ratio = sat["ratio_vs_bench"][v]
        cb, cv = sat["clients"]["bench"], sat["clients"][v]
        if not cb["plateau"]:       # bench serve's saturation not reached: no ratio to judge
            met = None
        elif ratio >= t["sat_ratio_min"]:   # the probe's figure is its own or a lower bound
            met = True
        else:                       # below the target: a verdict only if the probe plateaued
            met = False if cv["plateau"] else None
        out.append({"target": "saturation", "variant": v, "met": met,
                    "values": {"ratio": ratio, "bench_plateau": cb["plateau"],
                               "probe_plateau": cv["plateau"]},
                    "text": (
            f"saturation >= {t['sat_ratio_min']:g}x bench serve's at {sat['share']:g} of a "
            f"core: {ratio:.2f}x ({cv['sat_tok_s']:,.0f} vs {cb['sat_tok_s']:,.0f} tok/s; "
            f"bench serve {'stopped growing' if cb['plateau'] else 'STILL GROWING'} at "
            f"{cb['at_nominal_tok_s']:,.0f} nominal, the probe "
            f"{'stopped growing' if cv['plateau'] else 'still growing: the ratio is a lower bound'}"
            f" at {cv['at_nominal_tok_s']:,.0f} nominal)")})
    return out


def probe_profile(path: Path, base: str, output_tokens: int, requests: int,
                  concurrency: int) -> Path:
    """Write ``base`` (a profile's TOML text) plus a ``[probe]`` block of one phase named
    ``paired`` (``requests`` requests at ``concurrency``, ``output_tokens`` each, one warm-up
    request) to ``path``; returns ``path``. Raises ``OSError`` from the write."""
    path.write_text(base + f"""
[probe]
output_tokens = {output_tokens}
warmup_requests = 1
[[probe.phases]]
name = "paired"
requests = {requests}
concurrency = {concurrency}
""")
    return path


def paired_runs(py: str, url: str, model: str, tok: str, dataset: Path, profile: Path,
                tmp: Path, variants: list[str], n_pairs: int, requests: int, conc: int,
                out_len: int, lab: bool, lab_lock: Path | None = None) -> tuple[list, list]:
    """``n_pairs`` pairs of ``bench serve`` and every probe variant against ``url``, the order
    rotating (every client runs first, in the middle and last in turn), ``requests`` requests
    at closed-loop concurrency ``conc``, ``out_len`` tokens each. ``lab``: the server is the
    lab's vLLM — ``lab_lock`` (when given, e.g. the shared lab-tests lock) and then the lab's
    ``.lab/disrupt.lock`` are held exclusively while the load runs, and ``/health`` must answer
    200 first (another session may have just restored the seat). Returns the pairs (per pair:
    ``bench_serve``, ``probe`` per variant with its tok/s and CPU ratios against the pair's
    ``bench serve``, ``order``, ``loadavg_1m``) and the 1-minute load after each client run."""
    import httpx

    locks = []
    if lab:
        for path in ([lab_lock] if lab_lock else []) + [ROOT / ".lab" / "disrupt.lock"]:
            fh = open(path, "a+")  # noqa: SIM115 - held until the end
            print(f"waiting for {path} (exclusive)…", file=sys.stderr, flush=True)
            fcntl.flock(fh, fcntl.LOCK_EX)
            locks.append(fh)
    pairs: list = []
    load_during: list = []
    try:
        deadline = time.monotonic() + 600
        while lab:
            try:
                if httpx.get(url + "/health", timeout=3).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                raise SystemExit(f"{url}/health did not answer 200 within 10 min")
            time.sleep(2)
        for k in range(n_pairs):
            who_all = ["bench", *variants]
            order = who_all[k % len(who_all):] + who_all[:k % len(who_all)]
            r: dict = {"probe": {}}
            for who in order:
                if who == "bench":
                    r["bench_serve"] = run_bench_serve(py, url, model, tok, dataset, requests,
                                                       conc, out_len)
                else:
                    r["probe"][who] = run_probe(profile, url, model, tmp / "runs", who)
                load_during.append(os.getloadavg()[0])
            b = r["bench_serve"]
            r["bench_cpu_s_per_1k"] = b["cpu_s"] / b["total_output_tokens"] * 1000
            line = (f"pair {k + 1}: bench serve {b['output_throughput']:,.1f} tok/s, "
                    f"{r['bench_cpu_s_per_1k']:.4f} CPU s/1k")
            for v, p in r["probe"].items():
                p["tok_s_ratio"] = p["output_throughput"] / b["output_throughput"]
                p["cpu_s_per_1k"] = p["cpu_s"] / p["total_output_tokens"] * 1000
                p["cpu_ratio"] = p["cpu_s_per_1k"] / r["bench_cpu_s_per_1k"]
                line += (f"; {v} {p['output_throughput']:,.1f} tok/s (ratio "
                         f"{p['tok_s_ratio']:.3f}), {p['cpu_s_per_1k']:.4f} CPU s/1k (ratio "
                         f"{p['cpu_ratio']:.3f})")
            r["order"] = order
            r["loadavg_1m"] = os.getloadavg()[0]
            pairs.append(r)
            print(line, flush=True)
    finally:
        for fh in reversed(locks):
            fcntl.flock(fh, fcntl.LOCK_UN)
            fh.close()
    return pairs, load_during


def lab_column(a: argparse.Namespace, py: str, url: str, model: str, tok: str, tmp: Path,
               prompts: list[str], lab_profile: str) -> dict:
    """``--lab-pairs``: the lab's vLLM column of a ``--stream`` run — :func:`paired_runs`
    against the lab's vLLM (``url``) with ``--lab-requests`` / ``--lab-concurrency`` /
    ``--lab-output-len``, every variant of the run; ``uptime`` before and after, per client its
    median tok/s, CPU s per 1k tokens and (the probe's) ratios to the pair's ``bench serve``;
    each probe run keeps its phase's ``engine_timing`` (client vs engine TTFT / ITL)."""
    variants = a.variants.split(",")
    dataset = tmp / "prompts-lab.jsonl"
    with dataset.open("w") as fh:
        for i in range(a.lab_requests):
            fh.write(json.dumps({"prompt": prompts[i % len(prompts)]}) + "\n")
    profile = probe_profile(tmp / "profile-lab.toml", lab_profile, a.lab_output_len,
                            a.lab_requests, a.lab_concurrency)
    up0 = uptime()
    print(f"lab vLLM column, {url}: {up0}", flush=True)
    pairs, load_during = paired_runs(py, url, model, tok, dataset, profile, tmp, variants,
                                     a.lab_pairs, a.lab_requests, a.lab_concurrency,
                                     a.lab_output_len, lab=True, lab_lock=a.lab_lock)
    up1 = uptime()
    print(f"lab vLLM column done: {up1}", flush=True)
    med: dict = {"bench": {
        "output_throughput": statistics.median(p["bench_serve"]["output_throughput"]
                                               for p in pairs),
        "cpu_s_per_1k": statistics.median(p["bench_cpu_s_per_1k"] for p in pairs)}}
    for v in variants:
        med[v] = {key: statistics.median(p["probe"][v][key] for p in pairs)
                  for key in ("output_throughput", "cpu_s_per_1k", "cpu_ratio", "tok_s_ratio")}
    for who, m in med.items():
        print(f"lab vLLM median {who}: {m['output_throughput']:,.0f} tok/s, "
              f"{m['cpu_s_per_1k']:.4f} CPU s/1k"
              + (f", tok/s ratio {m['tok_s_ratio']:.3f}, CPU ratio {m['cpu_ratio']:.3f}"
                 if who != "bench" else ""), flush=True)
    return {"url": url, "model": model, "vllm": "0.32.0 (CPU)", "requests": a.lab_requests,
            "concurrency": a.lab_concurrency, "output_len": a.lab_output_len,
            "uptime_before": up0, "uptime_after": up1, "load_1m_during": load_during,
            "pairs": pairs, "median": med}


def _print_verdicts(vs: list[dict]) -> None:
    for x in vs:
        word = {True: "MET", False: "NOT MET", None: "NOT MEASURED"}[x["met"]]
        print(f"verdict {x['target']:10s} {x['variant']:15s} {word}: {x['text']}", flush=True)


def judge(path: Path) -> int:
    """``--judge FILE``: a saved ``--stream`` run's JSON (``rates``, ``variants``, and a
    ``saturation`` with its own ``rates`` from ``--sat-stream``) judged again with this code —
    the saturation summary recomputed from the sweep's per-run figures, then
    :func:`verdicts` — and the verdict lines printed; the file is not changed. Returns 0;
    raises ``KeyError`` for a file without those keys (a run with ``--quota`` has no
    uncapped rates to judge)."""
    d = json.loads(path.read_text())
    sat = d.get("saturation")
    if sat is not None and "rates" in sat:
        summ = saturation(sat["rates"], ["bench", *d["variants"]], sat["share"])
        for who, x in summ["clients"].items():
            print(f"saturation at {sat['share']:g} of a core, {who:15s}: medians "
                  + ", ".join(f"{r['tok_s']:,.0f}" for r in x["per_rate"])
                  + f" tok/s; growth stopped: {x['plateau']}")
        sat = summ
    elif sat is not None:
        raise KeyError("saturation.rates: a --quota run caps every rate; nothing uncapped")
    _print_verdicts(verdicts(d["rates"], sat, d["variants"]))
    return 0


def git_state() -> dict:
    """The tree this run measured: ``HEAD``'s commit and the paths under ``benchmarks/`` and
    ``console/`` that differ from it (``[]``: the commit's code exactly)."""
    def git(*args: str) -> str:
        return subprocess.run(["git", "-C", str(ROOT), *args], capture_output=True, text=True,
                              check=False).stdout
    if os.environ.get("BENCH_GIT_HEAD") or not (ROOT / ".git").exists():
        # a copy of the tree (the GPU machine's .git, where one travels, is not the tree's
        # commit): the caller's word
        return {"head": os.environ.get("BENCH_GIT_HEAD", ""), "changed": None}
    return {"head": git("rev-parse", "HEAD").strip(),
            "changed": [ln[3:] for ln in git("status", "--porcelain", "--", "benchmarks",
                                             "console").splitlines()]}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--pairs", type=int, default=3)
    ap.add_argument("--requests", type=int, default=64)
    ap.add_argument("--concurrency", type=int, default=8)
    ap.add_argument("--output-len", type=int, default=64)
    ap.add_argument("--events", type=int, default=100_000)
    ap.add_argument("--variants", default="aiohttp-uvloop,httpcore-asyncio",  # "-nocus" suffix:
                    # without stream_options.continuous_usage_stats (an A/B of its server cost)
                    help="probe client variants, <http stack>-<event loop>, comma-separated "
                         "(the first is what the console runs)")
    ap.add_argument("--url", help="send to this server instead of the lab's vLLM (e.g. "
                                  "benchmarks/stream_server.py: client CPU without an engine "
                                  "on the same cores); the lab lock is not taken")
    ap.add_argument("--stream", metavar="C:GAP[:LEN[:WAVES]],...",
                    help="start benchmarks/stream_server.py at each rate (concurrency C, GAP s "
                         "between a stream's tokens, LEN tokens a stream, WAVES x C requests; "
                         "else --output-len, --waves) and measure every client against it: "
                         "tok/s, CPU, core share, token-matched ITL error (--url ignored)")
    ap.add_argument("--waves", type=int, default=8, help="--stream: requests = waves × C")
    ap.add_argument("--port", type=int, default=18970, help="--stream: the first server port")
    ap.add_argument("--server-cpu", type=int, default=0, help="--stream: the server's core")
    ap.add_argument("--client-cpu", type=int, default=1, help="--stream: the clients' core")
    ap.add_argument("--no-pin", action="store_true", help="--stream: pin nothing")
    ap.add_argument("--quota", type=float, metavar="SHARE",
                    help="--stream: run every client in a cgroup v1 cpu cgroup capped at SHARE "
                         "of one core (saturation measured at that quota; needs root)")
    ap.add_argument("--quota-period-us", type=int, default=10_000,
                    help="--quota / --sat-quota: cpu.cfs_period_us (default 10 ms)")
    ap.add_argument("--sat-stream", metavar="C:GAP[:LEN[:WAVES]],...",
                    help="the saturation sweep of the same run, after the --stream rates (which "
                         "stay uncapped) and before the lab column: rates low to high, every "
                         "client capped at --sat-quota of a core; the JSON's 'saturation' holds "
                         "its rates and summary (needs root)")
    ap.add_argument("--sat-quota", type=float, metavar="SHARE",
                    help="--sat-stream: the share of one core every client is capped at")
    ap.add_argument("--base", metavar="COMMIT",
                    help="--stream: a '-base' variant runs the probe from this commit's code")
    ap.add_argument("--lab-pairs", type=int, default=0,
                    help="--stream: after the stream server's rates (and --sat-stream), this "
                         "many pairs of every client against the lab's vLLM (--lab-requests "
                         "at --lab-concurrency, --lab-output-len tokens), in the same run")
    ap.add_argument("--lab-requests", type=int, default=64)
    ap.add_argument("--lab-concurrency", type=int, default=16)
    ap.add_argument("--lab-output-len", type=int, default=64)
    ap.add_argument("--lab-lock", type=Path, metavar="FILE",
                    help="a lock file held exclusively (flock) around the lab's load, before "
                         "the lab's own disrupt.lock (e.g. the shared lab-tests lock)")
    ap.add_argument("--state", type=Path, metavar="FILE", default=ROOT / ".lab" / "state.json",
                    help="the lab's state file: the vLLM venv's python (for bench serve), the "
                         "tokenizer, the served model name and the lab profile (default "
                         ".lab/state.json; benchmarks/device_bench_probe.sh writes one for a "
                         "machine with no lab)")
    ap.add_argument("--json", metavar="FILE")
    ap.add_argument("--judge", metavar="FILE",
                    help="send no load: re-judge a saved --stream run's JSON with this code's "
                         "saturation() and verdicts() and print the verdict lines")
    a = ap.parse_args(argv)
    if a.judge:
        return judge(Path(a.judge))
    if a.sat_stream and a.sat_quota is None:
        ap.error("--sat-stream needs --sat-quota SHARE")
    if a.sat_stream and a.quota is not None:
        ap.error("--sat-stream is the capped sweep of a run whose --stream rates are uncapped; "
                 "give --quota or --sat-stream, not both")
    if a.sat_stream and not a.stream:
        ap.error("--sat-stream goes with --stream")
    for spec in (a.stream, a.sat_stream):
        if spec:
            try:
                parse_rates(spec, a.output_len, a.waves)
            except ValueError as exc:
                ap.error(str(exc))
    from seat_console.probe.prompts import load_prompt_set

    state = json.loads(a.state.read_text())
    v = state["vllm"]
    url, model, py, tok = v["url"], v["served_model_name"], v["python"], v["model_dir"]
    url = a.url or url
    tmp = Path(tempfile.mkdtemp(prefix="bench-probe-"))
    prompts = load_prompt_set().prompts
    dataset = tmp / "prompts.jsonl"
    with dataset.open("w") as fh:
        for i in range(a.requests):
            fh.write(json.dumps({"prompt": prompts[i % len(prompts)]}) + "\n")
    lab_profile = without_probe(Path(state["profile"]).read_text())
    if a.stream:
        up0 = uptime()
        print(up0, flush=True)
        n_stream = len(parse_rates(a.stream, a.output_len, a.waves))
        try:
            res = stream_sweep(a, py, model, tok, tmp, prompts, lab_profile, a.stream, a.quota,
                               a.port)
            if a.sat_stream:   # before the lab column: the lab's vLLM loads both cores
                s_up0 = uptime()
                print(f"saturation sweep at {a.sat_quota:g} of a core: {s_up0}", flush=True)
                sat = stream_sweep(a, py, model, tok, tmp, prompts, lab_profile, a.sat_stream,
                                   a.sat_quota, a.port + n_stream, name="sat")
                s_up1 = uptime()
                print(f"saturation sweep done: {s_up1}", flush=True)
                res["saturation"] = {**sat["saturation"], "quota": sat["quota"],
                                     "uptime_before": s_up0, "uptime_after": s_up1,
                                     "rates": sat["rates"]}
        finally:   # no cgroup outlives the run, whatever happened
            for cg in _CGROUPS:
                try:
                    cg.remove()
                except OSError as exc:
                    print(f"could not remove {cg.path}: {exc}", file=sys.stderr)
        if a.lab_pairs:
            res["lab_vllm"] = lab_column(a, py, v["url"], model, tok, tmp, prompts, lab_profile)
        if a.quota is None:   # the targets, on this run's uncapped rates (printed last)
            res["verdicts"] = verdicts(res["rates"], res.get("saturation"),
                                       a.variants.split(","))
            _print_verdicts(res["verdicts"])
        up1 = uptime()
        print(up1, flush=True)
        if a.json:
            Path(a.json).write_text(json.dumps({
                "date_utc": datetime.now(UTC).isoformat(timespec="seconds"),
                "machine": {"node": platform.node(), "python": platform.python_version(),
                            "cpus": os.cpu_count(), "uptime_before": up0, "uptime_after": up1},
                "argv": sys.argv, "git": git_state(), "variants": a.variants.split(","),
                **res}, indent=1) + "\n")
        return 0
    profile = probe_profile(tmp / "profile.toml", lab_profile, a.output_len, a.requests,
                            a.concurrency)
    variants = a.variants.split(",")
    pairs, load_during = paired_runs(py, url, model, tok, dataset, profile, tmp, variants,
                                     a.pairs, a.requests, a.concurrency, a.output_len,
                                     lab=not a.url)
    sse = {"one_event_per_read": sse_rate(a.events, None),
           "reads_1400_bytes": sse_rate(a.events, 1400)}
    for name, x in sse.items():
        print(f"SSE pipeline ({name}): {x['events_per_cpu_s']:,.0f} events per CPU second "
              f"({1e6 / x['events_per_cpu_s']:.1f} µs/event, {x['bytes_per_event']:.0f} B/event)")
    med: dict = {"bench_cpu_s_per_1k": statistics.median(p["bench_cpu_s_per_1k"] for p in pairs)}
    spread: dict = {}
    for v in variants:
        for key in ("tok_s_ratio", "cpu_ratio", "cpu_s_per_1k"):
            vals = [p["probe"][v][key] for p in pairs]
            med[f"{v}.{key}"] = statistics.median(vals)
            spread[f"{v}.{key}"] = [min(vals), max(vals)]
        print(f"median {v}: tok/s ratio {med[v + '.tok_s_ratio']:.3f} (range "
              f"{spread[v + '.tok_s_ratio'][0]:.3f}–{spread[v + '.tok_s_ratio'][1]:.3f}), "
              f"CPU s/1k {med[v + '.cpu_s_per_1k']:.4f} vs bench serve "
              f"{med['bench_cpu_s_per_1k']:.4f}, CPU ratio {med[v + '.cpu_ratio']:.3f} (range "
              f"{spread[v + '.cpu_ratio'][0]:.3f}–{spread[v + '.cpu_ratio'][1]:.3f})")
    print(f"load average (1 min) after each client run: {min(load_during):.2f}–"
          f"{max(load_during):.2f}")
    if a.json:
        Path(a.json).write_text(json.dumps({
            "date_utc": datetime.now(UTC).isoformat(timespec="seconds"),
            "machine": {"node": platform.node(), "python": platform.python_version(),
                        "cpus": os.cpu_count(), "loadavg": os.getloadavg()},
            "argv": sys.argv, "server": {"url": url, "model": model,
                                                "vllm": "0.32.0 (CPU)" if not a.url else None},
            "load_1m_during": load_during, "variants": variants,
            "pairs": pairs, "median": med, "range": spread, "sse": sse}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
