"""A real Prometheus scraping the fleet simulator, for the fleet tests and the benchmark.

:func:`start_fleet` starts ``scripts/fleet_sim.py`` and Debian's ``/usr/bin/prometheus`` (own
config with ``honor_labels: true``, own ``--storage.tsdb.path`` in a temp dir, a free loopback
port) and returns a :class:`PromFleet`; :meth:`PromFleet.stop` stops both by PID. Nothing
here touches the lab's Prometheus.
"""

from __future__ import annotations

import importlib.util
import os
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from types import ModuleType

import httpx

REPO = Path(__file__).resolve().parent.parent
PROMETHEUS = "/usr/bin/prometheus"
SIM = REPO / "scripts" / "fleet_sim.py"


@cache
def fleet_sim() -> ModuleType:
    """``scripts/fleet_sim.py`` as a module (its :func:`plan` is the truth the rows are
    checked against)."""
    spec = importlib.util.spec_from_file_location("fleet_sim", SIM)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("fleet_sim", mod)
    spec.loader.exec_module(mod)
    return mod


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_until(pred, timeout_s: float, what: str, every_s: float = 0.2):  # noqa: ANN001, ANN201
    """Poll ``pred()`` until it returns a truthy value (returned) or ``timeout_s`` passes
    (AssertionError naming ``what``)."""
    deadline = time.monotonic() + timeout_s
    last = None
    while time.monotonic() < deadline:
        try:
            last = pred()
        except Exception as exc:  # noqa: BLE001 - keep polling until the deadline
            last = exc
        if last and not isinstance(last, Exception):
            return last
        time.sleep(every_s)
    raise AssertionError(f"timed out after {timeout_s:g} s waiting for {what} (last: {last!r})")


@dataclass
class PromFleet:
    """A running simulator + Prometheus. ``url``: Prometheus' base URL; ``plan``: the
    simulator's seats (:func:`fleet_sim.plan`); ``scrape_interval_s``: Prometheus' interval."""

    url: str
    sim_url: str
    plan: list
    scrape_interval_s: float
    dir: Path
    procs: dict[str, subprocess.Popen] = field(default_factory=dict)

    def stop(self, which: str | None = None) -> None:
        """Stop ``which`` (``prometheus`` / ``sim``) or both, by PID (SIGTERM, then SIGKILL)."""
        for name, p in list(self.procs.items()):
            if which not in (None, name) or p.poll() is not None:
                continue
            p.send_signal(signal.SIGTERM)
            try:
                p.wait(15)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait(5)

    def pause(self, which: str = "prometheus") -> None:
        """SIGSTOP a process (a server that accepts connections and never answers)."""
        os.kill(self.procs[which].pid, signal.SIGSTOP)

    def resume(self, which: str = "prometheus") -> None:
        """SIGCONT it."""
        os.kill(self.procs[which].pid, signal.SIGCONT)

    def query_requests(self) -> int:
        """Instant queries Prometheus has answered (its own
        ``prometheus_http_requests_total{handler="/api/v1/query"}``, all codes)."""
        text = httpx.get(f"{self.url}/metrics", timeout=10).text
        total = 0
        for line in text.splitlines():
            if line.startswith("prometheus_http_requests_total{") and \
                    'handler="/api/v1/query"' in line:
                total += int(float(line.rsplit(" ", 1)[1]))
        return total


def start_fleet(tmp: Path, seats: int, *, seed: int = 0, stale: int = 0,
                stale_after_s: float = 25.0, scrape_interval_s: float = 1.0,
                timeout_s: float = 60.0, min_seats: int | None = None) -> PromFleet:
    """Start the simulator and a Prometheus scraping it; wait until Prometheus has every
    seat's ``seat_engine_up`` (all ``seats`` instances: ``stale_after_s`` must leave the time
    for Prometheus to start and scrape once; ``min_seats``: accept fewer). Raises AssertionError with the logs when either does not come up."""
    if not Path(PROMETHEUS).exists():
        raise AssertionError(f"{PROMETHEUS} is missing: apt-get install prometheus (scripts/test "
                             "installs it); the fleet tests need a real Prometheus")
    tmp.mkdir(parents=True, exist_ok=True)
    sim_port, prom_port = _free_port(), _free_port()
    procs: dict[str, subprocess.Popen] = {}
    sim_log = open(tmp / "sim.log", "wb")  # noqa: SIM115 - closed with the process
    procs["sim"] = subprocess.Popen(
        [sys.executable, str(SIM), "--listen", f"127.0.0.1:{sim_port}", "--seats", str(seats),
         "--seed", str(seed), "--stale", str(stale), "--stale-after", str(stale_after_s)],
        stdout=sim_log, stderr=subprocess.STDOUT)
    cfg = tmp / "prometheus.yml"
    cfg.write_text(
        f"global: {{scrape_interval: {scrape_interval_s:g}s, evaluation_interval: 15s}}\n"
        "scrape_configs:\n"
        "  - job_name: fleet-sim\n"
        "    honor_labels: true\n"
        f"    scrape_timeout: {scrape_interval_s:g}s\n"
        f"    static_configs: [{{targets: ['127.0.0.1:{sim_port}']}}]\n")
    prom_log = open(tmp / "prometheus.log", "wb")  # noqa: SIM115
    procs["prometheus"] = subprocess.Popen(
        [PROMETHEUS, f"--config.file={cfg}", f"--storage.tsdb.path={tmp / 'data'}",
         f"--web.listen-address=127.0.0.1:{prom_port}", "--log.level=warn"],
        stdout=prom_log, stderr=subprocess.STDOUT)
    fleet = PromFleet(url=f"http://127.0.0.1:{prom_port}", sim_url=f"http://127.0.0.1:{sim_port}",
                      plan=fleet_sim().plan(seats, seed, stale),
                      scrape_interval_s=scrape_interval_s, dir=tmp, procs=procs)

    def ready() -> bool:
        for name, p in procs.items():
            if p.poll() is not None:
                raise RuntimeError(f"{name} exited {p.returncode}")
        r = httpx.get(f"{fleet.url}/api/v1/query",
                      params={"query": "count(seat_engine_up)"}, timeout=5).json()
        res = r["data"]["result"]
        return bool(res) and int(float(res[0]["value"][1])) >= (min_seats or seats)

    try:
        wait_until(ready, timeout_s, "Prometheus to scrape the simulator", every_s=0.5)
    except (AssertionError, RuntimeError) as exc:
        fleet.stop()
        logs = "\n".join(f"--- {n}:\n{(tmp / n).read_text(errors='replace')[-2000:]}"
                         for n in ("sim.log", "prometheus.log"))
        raise AssertionError(f"{exc}\n{logs}") from None
    return fleet
