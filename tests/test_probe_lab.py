"""The probe on the lab: real vLLM on the CPU, real docker events, real systemd services.

hold → probe → release through the real CLI in child processes. Every test that holds changes
the lab (timers stopped, a silence placed), so it takes ``.lab/disrupt.lock`` EXCLUSIVELY and
releases the hold at the end (the lab is left as found: timers running, no silence, container
running and healthy). Counts are tiny (bounded: seconds per test).
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Self

import httpx
import pytest
from conftest import wait_until
from lab_helpers import exclusive_lab, seat_cli, state_env
from seat_console.node.transport import DockerExecTransport
from seat_console.probe.interference import read_services, service_units

PROBE = """
[probe]
output_tokens = {tokens}
warmup_requests = 1
read_timeout_s = 30
request_timeout_s = 120
watch_interval_s = 0.5
[[probe.phases]]
name = "single-stream"
requests = {single}
concurrency = 1
[[probe.phases]]
name = "concurrency-8"
requests = {conc}
concurrency = 8
"""


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


def probe_profile(lab, tmp_path: Path, single: int = 4, conc: int = 16, tokens: int = 16
                  ) -> Path:
    """The lab's profile with a bounded ``[probe]`` (replacing any the lab wrote)."""
    text = without_probe(lab.profile_path.read_text("utf-8"))
    p = tmp_path / "lab-probe.toml"
    p.write_text(text + PROBE.format(single=single, conc=conc, tokens=tokens), "utf-8")
    return p


@pytest.fixture
def exclusive(lab) -> Iterator[None]:
    """The lab's outage lock held exclusively (the test holds the seat: timers, silence)."""
    with exclusive_lab(lab, "probe tests hold the seat"):
        yield


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    return state_env(tmp_path, data=True)


cli = seat_cli


class ProbeChild:
    """``seat-console probe`` in a child process, its output read as it comes (a thread per
    stream: a full pipe would block the child), so a test's act can wait on what the probe
    says (:meth:`wait_for`) or on its run directory (:attr:`run_dir`)."""

    def __init__(self, proc: subprocess.Popen[str]) -> None:
        self.proc = proc
        self.out: list[str] = []
        self.err: list[str] = []
        self._seen = threading.Condition()
        self._ended = 0
        for stream, into in ((proc.stdout, self.out), (proc.stderr, self.err)):
            threading.Thread(target=self._read, args=(stream, into), daemon=True).start()

    def _read(self, stream, into: list[str]) -> None:
        for line in stream:
            with self._seen:
                into.append(line)
                self._seen.notify_all()
        with self._seen:
            self._ended += 1
            self._seen.notify_all()

    def wait_for(self, text: str, timeout: float = 120) -> str:
        """The first stderr line holding ``text``, waiting for it at most ``timeout`` s (a
        liveness bound); fails if the probe ended or the bound passed without it."""
        deadline = time.monotonic() + timeout
        with self._seen:
            while True:
                hit = next((line for line in self.err if text in line), None)
                if hit is not None:
                    return hit
                left = deadline - time.monotonic()
                if self._ended == 2 or left <= 0:
                    pytest.fail(f"the probe never said {text!r}: {''.join(self.err)[-2000:]}")
                self._seen.wait(left)

    @property
    def run_dir(self) -> Path:
        """The run's directory, as the probe's "[probe] run ID → PATH" line names it."""
        return Path(self.wait_for("[probe] run ").split(" → ", 1)[1].strip())

    def finish(self, timeout: float) -> tuple[int, str, str]:
        """Wait ≤ ``timeout`` s for the probe to end and for its output; return ``(exit code,
        stdout, stderr)``. One still running then is killed and
        :class:`subprocess.TimeoutExpired` raised."""
        try:
            self.proc.wait(timeout=timeout)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait()
        with self._seen:
            self._seen.wait_for(lambda: self._ended == 2, timeout=30)
            return self.proc.returncode, "".join(self.out), "".join(self.err)


def probe_during(prof: Path, env: dict[str, str], act, *args: str, timeout: float = 180
                 ) -> tuple[int, str, str]:
    """Run ``seat-console probe ARGS`` in a child process; once its first phase starts (its
    stderr says ``phase single-stream:``) call ``act(child)`` (a :class:`ProbeChild`); wait
    ≤ ``timeout`` s for it to end (killed if it has not). Returns ``(exit code, stdout,
    stderr)``."""
    proc = subprocess.Popen([sys.executable, "-m", "seat_console.cli", "--profile", str(prof),
                             "probe", *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env=env)
    child = ProbeChild(proc)
    try:
        child.wait_for("phase single-stream:")
        act(child)
    except BaseException:
        proc.kill()
        proc.wait()
        raise
    return child.finish(timeout)


def requests_kept(run_dir: Path) -> int:
    """Request records the run has kept so far (lines of its ``requests.jsonl``; the probe
    flushes each as it ends)."""
    try:
        return len((run_dir / "requests.jsonl").read_text("utf-8").splitlines())
    except FileNotFoundError:
        return 0


@pytest.fixture
def node(lab) -> DockerExecTransport:
    return DockerExecTransport(lab.node_container, docker_host=lab.docker_host)


@pytest.fixture
def held(lab, exclusive, env, tmp_path: Path, node) -> Iterator[Path]:
    """A real hold on the lab (released afterwards, always); yields the probe profile. Waits
    until no timer's service is running, so the probe's baseline is quiet."""
    prof = probe_profile(lab, tmp_path)
    cp = cli(prof, env, "hold", "--yes", "--ttl", "10m", "--reason", "probe lab test")
    assert cp.returncode == 0, cp.stdout + cp.stderr
    try:
        units = service_units(lab.timers)

        def quiet() -> bool:
            r = read_services(node, units)
            return isinstance(r, dict) and all(
                p.get("ActiveState") in ("inactive", "failed") for p in r.values())

        wait_until(quiet, 30, what="the lab's timer services to finish")
        yield prof
    finally:
        rc = cli(prof, env, "release", "--yes")
        assert rc.returncode == 0, rc.stdout + rc.stderr


def _engine_healthy(lab) -> bool:
    try:
        return httpx.get(f"{lab.vllm_url}/health", timeout=3).status_code == 200
    except httpx.HTTPError:
        return False


def test_probe_refuses_without_a_hold(lab, env, tmp_path: Path) -> None:
    prof = probe_profile(lab, tmp_path)
    cp = cli(prof, env, "probe")
    assert cp.returncode == 5, cp.stdout + cp.stderr
    assert "no active hold" in cp.stderr and "--force --reason" in cp.stderr
    assert not (tmp_path / "data" / "runs").exists()     # nothing sent, nothing kept
    plan = cli(prof, env, "probe", "--dry-run")          # refused, but the plan comes first
    assert plan.returncode == 5, plan.stdout + plan.stderr
    assert "✗ hold: refusing to probe: no active hold" in plan.stdout
    assert "✓ seat container: seat-resident (resident) running" in plan.stdout
    assert "phase " in plan.stdout and " requests, concurrency " in plan.stdout
    dry = cli(prof, env, "probe", "--dry-run", "--force", "--reason", "dry")
    assert dry.returncode == 0 and "nothing sent" in dry.stdout
    assert "seat-resident" in dry.stdout


def test_hold_probe_release_counts_equal_the_engines(lab, held: Path, env, tmp_path: Path
                                                     ) -> None:
    cp = cli(held, env, "probe", "--json")
    assert cp.returncode == 0, cp.stdout + cp.stderr
    s = json.loads(cp.stdout)
    assert s["status"] == "complete" and s["headline_allowed"], s
    assert s["hold"]["active"] is True and s["hold"]["silence_id"]
    ident = s["identity"]
    assert ident["container"]["image_id"] == lab.engine_image_id
    assert ident["container"]["repo_digest"] == lab.engine_repo_digest
    assert ident["served_model"] == lab.served_model_name and ident["engine_version"]
    assert s["kv_capacity"]["tokens"] and s["kv_capacity"]["max_concurrency"]
    for b, n in zip(s["phases"], (4, 16), strict=True):
        st = b["stats"]
        assert st["expected"] == st["attempted"] == st["completed"] == n and st["failed"] == 0
        acc = b["accounting"]
        assert acc["tokens"]["ok"] and acc["requests"]["ok"], acc
        assert acc["tokens"]["client"] == acc["tokens"]["engine"] == n * 16
        assert acc["requests"]["engine"] == n
        assert st["headline"]["completed"] == n and st["ttft"]["n"] == n
    runs = cli(held, env, "runs", "--json")
    assert runs.returncode == 0
    assert json.loads(runs.stdout)["runs"][-1]["run_id"] == s["run_id"]



def test_a_lab_probes_report_shows_client_and_engine_timing_side_by_side(
        lab, held: Path, env, tmp_path: Path) -> None:
    """Issue 21's "done when": a probe on the lab's vLLM keeps, per phase, the engine's own
    TTFT / ITL histograms over the phase beside the client's figures, and the run's report
    (``seat-console report RUN``) shows them side by side, a row per phase and figure, with
    both populations (TTFT: one per request on each side)."""
    cp = cli(held, env, "probe", "--json")
    assert cp.returncode == 0, cp.stdout + cp.stderr
    s = json.loads(cp.stdout)
    for b in s["phases"]:
        t = b["engine_timing"]
        for fig, metric in (("ttft", "vllm:time_to_first_token_seconds"),
                            ("itl", "vllm:inter_token_latency_seconds")):
            assert t[fig]["metric"] == metric and t[fig]["problem"] is None, t[fig]
            assert t[fig]["engine"] is not None and t[fig]["engine_n"] > 0
            assert [c["q"] for c in t[fig]["checks"]] == [0.5, 0.95]
            assert all(c["engine_bucket_s"] is not None for c in t[fig]["checks"])
        n = b["stats"]["completed"]
        assert t["ttft"]["client_n"] == n and t["ttft"]["engine_n"] == n
        assert t["ttft"]["checks"][0]["client_s"] == b["stats"]["ttft"]["p50_s"]
    rep = cli(held, env, "report", s["run_id"], timeout=120)
    assert rep.returncode == 0, rep.stdout + rep.stderr
    assert "Client vs engine" in rep.stdout, rep.stdout
    rows = re.findall(r"\| (TTFT|ITL) \| ([\d,]+) / ([\d,]+) \| ([\d.]+) \| "
                      r"(\([^|]+\]) ms \|", rep.stdout)
    assert sorted(r[0] for r in rows) == ["ITL"] * len(s["phases"]) + ["TTFT"] * len(s["phases"])
    ttft = [r for r in rows if r[0] == "TTFT"]
    assert sorted(int(r[1].replace(",", "")) for r in ttft) == sorted(
        b["stats"]["completed"] for b in s["phases"])
    assert all(r[1] == r[2] for r in ttft), ttft
    assert len(rows) == 2 * len(s["phases"]), rows     # each with the engine's (lo, hi] bucket


C64 = """
[probe]
output_tokens = 32
warmup_requests = 1
read_timeout_s = 60
request_timeout_s = 120
watch_interval_s = 0.5
[[probe.phases]]
name = "single-stream"
requests = 2
concurrency = 1
[[probe.phases]]
name = "concurrency-64"
requests = 64
concurrency = {conc}
"""


class QueuePeaks:
    """Samples the engine's ``vllm:num_requests_running`` / ``_waiting`` gauges from its
    ``/metrics`` every 0.1 s in a thread (``with QueuePeaks(url) as q:`` → ``q.peak``)."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.peak = {"running": 0.0, "waiting": 0.0}
        self.samples = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        with httpx.Client(base_url=self.url, timeout=5) as c:
            while not self._stop.is_set():
                try:
                    text = c.get("/metrics").text
                except httpx.HTTPError:
                    continue
                self.samples += 1
                for key in self.peak:
                    for m in re.finditer(rf"^vllm:num_requests_{key}{{[^}}]*}} (\S+)$", text,
                                         re.MULTILINE):
                        self.peak[key] = max(self.peak[key], float(m.group(1)))
                self._stop.wait(0.1)

    def __enter__(self) -> Self:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(10)


QUEUED_S = 0.3
"""A request counted as queued: over this long in the engine's WAITING state (the lowest
bucket bound of vLLM's ``vllm:request_queue_time_seconds``)."""


def _queued_over(url: str) -> tuple[float, float]:
    """``(requests ever queued, of them over QUEUED_S)`` from the engine's
    ``vllm:request_queue_time_seconds`` histogram (count, count − bucket{le=QUEUED_S})."""
    from prometheus_client.parser import text_string_to_metric_families

    count = below = 0.0
    text = httpx.get(f"{url}/metrics", timeout=30).text
    for fam in text_string_to_metric_families(text):
        if fam.name != "vllm:request_queue_time_seconds":
            continue
        for smp in fam.samples:
            if smp.name.endswith("_count"):
                count += smp.value
            elif smp.name.endswith("_bucket") and float(smp.labels["le"]) == QUEUED_S:
                below += smp.value
    return count, count - below


def test_concurrency_64_queues_past_max_num_seqs_and_counts_equal(lab, held: Path, env,
                                                                  tmp_path: Path) -> None:
    """64 requests at once against the lab's ``--max-num-seqs 16``: the engine runs 16 and
    queues the rest (its waiting gauge shows it), every request completes, and the usage tokens
    and requests equal the engine's counters. Bounded: 32 tokens each (with 8 the engine could
    drain the queue between two gauge samples on a busy machine), well under a minute."""
    prof = tmp_path / "c64.toml"
    prof.write_text(without_probe(lab.profile_path.read_text("utf-8")) + C64.format(conc=64),
                    "utf-8")
    t0 = time.monotonic()
    n0, over0 = _queued_over(lab.vllm_url)
    with QueuePeaks(lab.vllm_url) as q:
        cp = cli(prof, env, "probe", "--json", timeout=120)
    took = time.monotonic() - t0
    n1, over1 = _queued_over(lab.vllm_url)
    assert cp.returncode == 0, cp.stdout + cp.stderr
    s = json.loads(cp.stdout)
    assert s["status"] == "complete" and s["headline_allowed"], s
    b = next(b for b in s["phases"] if b["name"] == "concurrency-64")
    st, acc = b["stats"], b["accounting"]
    assert st["expected"] == st["attempted"] == st["completed"] == 64 and st["failed"] == 0
    assert acc["tokens"]["ok"] and acc["requests"]["ok"], acc
    assert acc["tokens"]["client"] == acc["tokens"]["engine"] == 64 * 32
    assert acc["requests"]["engine"] == 64
    assert st["headline"]["completed"] == 64 and st["ttft"]["n"] == 64
    # the engine never runs more than max_num_seqs; the rest wait in its queue
    assert q.samples > 0 and 0 < q.peak["running"] <= lab.max_num_seqs, q.peak
    # The queue, seen either way: the waiting gauge while sampling (the API server may answer
    # /metrics only after the burst on a busy machine), or the engine's own queue-time
    # histogram: requests that waited longer than QUEUED_S (64 on 16 seqs: the last waves).
    assert n1 - n0 >= 64 + 2 + 1, (n0, n1)               # c64 + single-stream + warm-up
    assert q.peak["waiting"] > 0 or over1 - over0 > 0, (q.peak, q.samples, over0, over1)
    assert took < 60, took


def test_remediation_service_during_probe_disrupts_the_run(lab, held: Path, env, node,
                                                           tmp_path: Path) -> None:
    prof = probe_profile(lab, tmp_path, single=30, conc=16, tokens=32)

    def remediate(_child: ProbeChild) -> None:
        started = node.run(["systemctl", "start", "--no-block",
                            "fleet-remediation-cycle.service"])
        assert started.ok, started.failure

    rc, out, err = probe_during(prof, env, remediate)
    assert rc == 7, out + err
    assert "DISRUPTED" in out and "fleet-remediation-cycle.service" in out
    assert "no headline: the run is disrupted" in out
    assert "tok/s ·" not in out                              # no headline line printed
    run_dir = next((tmp_path / "data" / "runs").iterdir())
    s = json.loads((run_dir / "summary.json").read_text())
    assert s["status"] == "disrupted"
    d = next(d for d in s["disruptions"] if d["kind"] == "service")
    assert "fleet-remediation-cycle.service" in d["what"] and d["at"]
    assert all((b["stats"] or {}).get("headline") is None for b in s["phases"])
    wait_until(lambda: isinstance(r := read_services(node, ["fleet-remediation-cycle.service"]),
                                  dict) and r["fleet-remediation-cycle.service"]["ActiveState"]
               != "activating", 30, what="the remediation service to finish")


def test_timer_started_by_hand_mid_probe_disrupts_at_the_units_own_time(
        lab, held: Path, env, node, tmp_path: Path) -> None:
    """Issue 31: a timer the hold stopped, started by hand inside the probe's window, left the
    run COMPLETE while `hold --status` named the breach. Now the run is disrupted, stamped
    with the timer's own ActiveEnterTimestamp (not when a check noticed it), and every request
    from that instant on is counted as disturbed."""
    prof = probe_profile(lab, tmp_path, single=30, conc=16, tokens=32)
    unit = lab.timers[0]
    when: dict[str, object] = {}

    def start_timer(_child: ProbeChild) -> None:
        started = node.run(["systemctl", "start", unit])           # by hand, mid-probe
        assert started.ok, started.failure
        shown = node.run(["systemctl", "show", "--timestamp=unix", "-p",
                          "ActiveEnterTimestamp", "--", unit])
        when["at"] = shown.stdout.strip().split("=", 1)[1]

    rc, out, err = probe_during(prof, env, start_timer)
    assert rc == 7, out + err
    run_dir = next((tmp_path / "data" / "runs").iterdir())
    s = json.loads((run_dir / "summary.json").read_text())
    assert s["status"] == "disrupted" and not s["headline_allowed"], s["status"]
    d = next(d for d in s["disruptions"] if d["kind"] == "timer")
    assert unit in d["what"] and d["at_source"] == "node"
    unit_at = float(str(when["at"]).lstrip("@"))
    assert abs(datetime.fromisoformat(d["at"]).timestamp() - unit_at) < 1e-3, (d, when)
    assert datetime.fromisoformat(d["detected_at"]) >= datetime.fromisoformat(d["at"])
    ran = [b for b in s["phases"] if b.get("stats")]
    assert ran and all(b["disturbed"]["requests"] >= 1 for b in ran[-1:]), ran


def test_container_pause_during_probe_disrupts_the_run(lab, held: Path, env,
                                                       tmp_path: Path) -> None:
    prof = probe_profile(lab, tmp_path, single=30, conc=16, tokens=32)

    def pause(child: ProbeChild) -> None:
        with lab.docker_client() as dc:
            c = dc.containers.get(lab.resident_container)
            c.pause()
            try:   # paused until the probe itself says it saw it (its docker event watcher)
                child.wait_for("DISRUPTED:", 60)
            finally:
                c.unpause()

    rc, out, err = probe_during(prof, env, pause, "--json")
    assert rc == 7, out + err
    s = json.loads(out)
    assert s["status"] == "disrupted" and not s["headline_allowed"]
    whats = [d["what"] for d in s["disruptions"] if d["kind"] == "container"]
    assert any("seat-resident: pause" in w for w in whats), s["disruptions"]
    assert all((b["stats"] or {}).get("headline") is None for b in s["phases"])
    wait_until(lambda: _engine_healthy(lab), 60, what="vLLM healthy again")


def test_ctrl_c_keeps_the_run_as_interrupted(lab, held: Path, env, tmp_path: Path) -> None:
    import signal

    prof = probe_profile(lab, tmp_path, single=200, conc=16, tokens=32)

    def ctrl_c(child: ProbeChild) -> None:
        # mid-phase: once the phase's first request is kept (after the warm-up's), with 199
        # still to send (~14 s here), the SIGINT as a Ctrl-C sends it
        run_dir = child.run_dir
        wait_until(lambda: requests_kept(run_dir) >= 2, 60,
                   what="the phase's first request kept in requests.jsonl")
        child.proc.send_signal(signal.SIGINT)

    rc, out, err = probe_during(prof, env, ctrl_c, "--json", timeout=60)
    assert rc == 130, out + err
    s = json.loads(out)
    assert s["status"] == "interrupted" and not s["headline_allowed"]
    st = s["phases"][0]["stats"]
    assert 0 < st["attempted"] < 200 and st["not_sent"] == 200 - st["attempted"]
    run_dir = Path(s["path"])
    assert json.loads((run_dir / "summary.json").read_text())["status"] == "interrupted"
    lines = (run_dir / "requests.jsonl").read_text().splitlines()
    assert len(lines) == 1 + st["attempted"]       # warm-up + every request sent, kept


def test_silence_checker_sees_the_silence_expire(lab, exclusive, tmp_path: Path) -> None:
    """The interference check on the hold's silence, against the lab's real Alertmanager (a
    silence on a label no alert carries; expired again at the end)."""
    from datetime import UTC, datetime, timedelta

    from seat_console.probe.run import _silence_checker
    from seat_console.core.profile import load_profile

    loaded = load_profile(lab.profile_path)
    now = datetime.now(UTC)
    body = {"matchers": [{"name": "seat_console_probe_test", "value": "x", "isRegex": False,
                          "isEqual": True}],
            "startsAt": now.isoformat(), "endsAt": (now + timedelta(minutes=10)).isoformat(),
            "createdBy": "test_probe_lab", "comment": "probe silence-checker test"}
    sid = httpx.post(f"{lab.alertmanager_url}/api/v2/silences", json=body,
                     timeout=5).json()["silenceID"]
    try:
        check = _silence_checker(loaded, sid, now + timedelta(minutes=10))
        assert check() is None
        lapsed = _silence_checker(loaded, sid, now - timedelta(seconds=1))
        assert "lease expired" in (lapsed() or "")
    finally:
        httpx.delete(f"{lab.alertmanager_url}/api/v2/silence/{sid}", timeout=5)
    gone = check()
    assert gone is not None and "expired" in gone and sid in gone
    unknown = _silence_checker(loaded, "00000000-0000-0000-0000-000000000000")()
    assert unknown is not None and unknown.startswith("check failed:")
