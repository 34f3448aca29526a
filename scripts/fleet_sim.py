#!/usr/bin/env python3
"""Fleet simulator: one HTTP target exposing many seats' series, for the fleet screen at scale.

``python scripts/fleet_sim.py --listen 127.0.0.1:19470 --seats 1000 [--seed N] [--stale N]
[--stale-after S]`` serves ``GET /metrics`` (Prometheus text format, written by
``prometheus_client.generate_latest`` from a custom collector) with, for every seat:

* the exporter's families of the agreed schema (``seat_info``, ``seat_engine_up``,
  ``seat_hold_*``, ``seat_timer_active``, ``seat_silence_*``, ``seat_container_info``,
  ``seat_runbook_active``, ``seat_runbook_next_info``, ``seat_probe_phase_info``, ``seat_probe_disrupted``, ``seat_fit_*``,
  ``seat_source_*``, ``seat_scrape_duration_seconds``, ``seat_exporter_build_info``);
* vLLM's ``vllm:num_requests_running``, ``vllm:num_requests_waiting``,
  ``vllm:kv_cache_usage_perc`` (0..1), labels ``model_name``, ``engine``;
* dcgm-exporter's ``DCGM_FI_DEV_FB_USED`` / ``DCGM_FI_DEV_FB_FREE`` in **MiB** per GPU (two per
  seat; labels ``gpu``, ``UUID``, ``device``, ``modelName``, ``Hostname``, ``pci_bus_id``).

Each seat's series carry its own ``instance`` label (``gpu-node-0042:9469``); scrape the target
with ``honor_labels: true`` so Prometheus keeps them. The seats' states are a pure function of
``--seed`` and the seat count (:func:`plan`): a few held with a lease, a few held **without**
a lease, a few engine-down and not held, a few without DCGM series, some with a probe phase or
runbook in progress, every fifth idle one without ``seat_probe_disrupted`` (no probe run
kept), and ``--stale N`` seats whose series stop being exposed
``--stale-after`` seconds after start (Prometheus then marks them stale). The gauges that
move (requests, KV usage, GPU memory) change every 5 s, deterministically from the seed.

A scrape is generated at most once per second and cached (1,000 seats are ~40k samples).
Stop it with SIGTERM or Ctrl-C.
"""

from __future__ import annotations

import argparse
import dataclasses
import random
import signal
import sys
import threading
import time
import uuid
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import CollectorRegistry

MIB_PER_H200 = 143_771
"""An H200's framebuffer in MiB as dcgm-exporter reports it (used + free; DCGM_FI_DEV_FB_*)."""
TIMERS = ("fleet-conformance.timer", "fleet-remediation-cycle.timer")
SOURCES = ("gpus", "timers", "silences", "containers", "engine", "journal", "lease")
PHASES = ("warmup", "single-stream", "concurrency-64")
BUCKET_S = 5
"""The moving gauges change every this many seconds; the scrape text is built once per bucket
(and when the stale seats vanish), then served from memory (1,000 seats: ~0.5 s of CPU to
build, 3.7 MB)."""


@dataclass(frozen=True)
class Seat:
    """One simulated seat: identity and its fixed state (see :func:`plan`).

    ``kind``: ``held`` (lease armed), ``held-no-lease`` (timers stopped, no lease), ``down``
    (engine down, not held), ``healthy``. ``stale``: its series vanish after ``--stale-after``.
    ``dcgm``: whether DCGM series are exposed. ``hold_ends_s``: the lease's fire time as an
    offset from the simulator's start (held only). ``phase``: a probe phase in progress or None.
    """

    index: int
    node: str
    instance: str
    kind: str
    stale: bool
    dcgm: bool
    gpu_uuids: tuple[str, str]
    hold_ends_s: float | None
    phase: str | None
    engine_up: bool

    @property
    def probe_kept(self) -> bool:
        """Whether a probe run is kept on the seat's node, so that its exporter sends
        ``seat_probe_disrupted`` (a seat that never ran a probe does not): every fifth seat
        without a probe in progress has none."""
        return self.phase is not None or self.index % 5 != 0


def plan(seats: int, seed: int = 0, stale: int = 0) -> list[Seat]:
    """The seats' states, deterministic in ``(seats, seed, stale)``.

    About 3 % held with a lease (a third of those with the engine down: a swap in progress),
    1 % held without a lease, 2 % engine down and not held, 2 % without DCGM series; ``stale``
    seats (chosen among the healthy ones) have series that vanish. A fleet of 4 or more seats
    has at least one seat of each kind and one without DCGM. Raises ``ValueError`` for
    ``seats < 1`` or ``stale`` outside 0..seats.
    """
    if seats < 1:
        raise ValueError(f"--seats {seats}: give at least 1 seat")
    if not 0 <= stale <= seats:
        raise ValueError(f"--stale {stale}: give 0..{seats} (the number of seats)")
    rng = random.Random(seed)
    kinds = []
    for _ in range(seats):
        r = rng.random()
        kinds.append("held" if r < 0.03 else "held-no-lease" if r < 0.04
                     else "down" if r < 0.06 else "healthy")
    # small fleets: make sure each interesting kind exists at least once
    if seats >= 4:
        for i, k in enumerate(("held", "held-no-lease", "down")):
            if k not in kinds:
                kinds[i * (seats // 4) + 1] = k
    healthy = [i for i, k in enumerate(kinds) if k == "healthy"]
    stale_set = set(rng.sample(healthy, min(stale, len(healthy))))
    if len(stale_set) < stale:   # not enough healthy seats: take any remaining ones
        rest = [i for i in range(seats) if i not in stale_set]
        stale_set |= set(rng.sample(rest, stale - len(stale_set)))
    out = []
    for i, kind in enumerate(kinds):
        node = f"gpu-node-{i + 1:04d}"
        uuids = tuple(f"GPU-{uuid.UUID(int=rng.getrandbits(128), version=4)}" for _ in range(2))
        dcgm = rng.random() >= 0.02
        held = kind in ("held", "held-no-lease")
        phase = rng.choice(PHASES) if held and rng.random() < 0.5 else None
        engine_up = kind == "healthy" or (held and rng.random() < 0.67)
        out.append(Seat(index=i, node=node, instance=f"{node}:9469", kind=kind,
                        stale=i in stale_set, dcgm=dcgm, gpu_uuids=uuids,  # type: ignore[arg-type]
                        hold_ends_s=rng.uniform(600, 7200) if kind == "held" else None,
                        phase=phase, engine_up=engine_up))
    if seats >= 4 and all(s.dcgm for s in out):   # small fleets: one seat without DCGM too
        out[-1] = dataclasses.replace(out[-1], dcgm=False)
    return out



LEASE_PERIOD_S = 7200.0
"""A held seat's lease is extended by this much each time its end comes (s)."""


def lease_end(started: float, hold_ends_s: float | None, now: float) -> float | None:
    """When a held seat's lease fires, as seen at ``now`` (unix s): ``started + hold_ends_s``,
    moved on by whole :data:`LEASE_PERIOD_S` until it is not in the past — the seat stays held
    as long as the simulator runs, so its lease is extended as an engineer would; a lease left
    in the past would read as overdue (the fleet's ``hold-overdue``) once the simulator has
    run past it. ``None`` when the seat has no lease."""
    if hold_ends_s is None:
        return None
    end = started + hold_ends_s
    if end < now:
        end += LEASE_PERIOD_S * ((now - end) // LEASE_PERIOD_S + 1)
    return end

class FleetCollector:
    """A ``prometheus_client`` collector yielding every seat's families at scrape time.

    ``seats``: :func:`plan`'s list; ``started``: the simulator's start (unix s);
    ``stale_after_s``: when stale seats' series stop; ``seed``: the moving gauges' seed.
    """

    def __init__(self, seats: list[Seat], started: float, stale_after_s: float,
                 seed: int) -> None:
        self.seats = seats
        self.started = started
        self.stale_after_s = stale_after_s
        self.seed = seed

    def live(self, now: float) -> list[Seat]:
        """The seats whose series are exposed at ``now`` (unix s)."""
        gone = now - self.started >= self.stale_after_s
        return [s for s in self.seats if not (s.stale and gone)]

    def collect(self):  # noqa: ANN201 - prometheus_client's collector protocol
        """Yield the metric families (called by ``generate_latest``)."""
        now = time.time()
        bucket = int(now // BUCKET_S)
        seats = self.live(now)
        now = bucket * BUCKET_S   # every value moves per bucket: one scrape text per bucket
        g = {name: GaugeMetricFamily(name, doc, labels=labels) for name, doc, labels in (
            ("seat_info", "The seat's identity.",
             ["instance", "node", "seat", "endpoint", "tensor_parallel_size"]),
            ("seat_exporter_build_info", "The exporter's version.", ["instance", "version"]),
            ("seat_engine_up", "1 when the engine's /health answered 200.", ["instance"]),
            ("seat_hold_active", "1 when the seat is held.", ["instance"]),
            ("seat_hold_lease_armed", "1 when a hold lease timer is armed.", ["instance"]),
            ("seat_hold_without_lease", "1 when timers are stopped and no lease is armed.",
             ["instance"]),
            ("seat_hold_expiry_timestamp_seconds", "When the lease fires (unix s).",
             ["instance"]),
            ("seat_timer_active", "1 when the profile's timer unit is active.",
             ["instance", "unit"]),
            ("seat_silence_active", "1 when an active silence covers the seat.", ["instance"]),
            ("seat_silence_end_timestamp_seconds", "The silence's endsAt (unix s).",
             ["instance"]),
            ("seat_container_info", "The container holding the seat.",
             ["instance", "role", "name", "image_id", "repo_digest"]),
            ("seat_runbook_active", "An unfinished runbook.",
             ["instance", "runbook", "step", "run_id"]),
            ("seat_runbook_next_info", "The runbook's next stage while a cycle is under way.",
             ["instance", "stage", "status"]),
            ("seat_probe_phase_info", "A probe phase in progress.",
             ["instance", "run_id", "phase"]),
            ("seat_probe_disrupted", "1 when the latest probe run was disrupted.", ["instance"]),
            ("seat_fit_fits", "1 when the side fits.", ["instance", "side"]),
            ("seat_fit_over_bytes", "Bytes per card over the budget.", ["instance", "side"]),
            ("seat_source_up", "1 when the source's last read was good.",
             ["instance", "source"]),
            ("seat_source_last_good_timestamp_seconds", "The source's last good read (unix s).",
             ["instance", "source"]),
            ("seat_scrape_duration_seconds", "The exporter's time to build this scrape.",
             ["instance"]),
            ("vllm:num_requests_running", "Requests running on the engine.",
             ["instance", "model_name", "engine"]),
            ("vllm:num_requests_waiting", "Requests waiting.",
             ["instance", "model_name", "engine"]),
            ("vllm:kv_cache_usage_perc", "KV cache usage (1 = 100 %).",
             ["instance", "model_name", "engine"]),
            ("DCGM_FI_DEV_FB_USED", "Framebuffer memory used (in MiB).",
             ["instance", "gpu", "UUID", "device", "modelName", "Hostname", "pci_bus_id"]),
            ("DCGM_FI_DEV_FB_FREE", "Framebuffer memory free (in MiB).",
             ["instance", "gpu", "UUID", "device", "modelName", "Hostname", "pci_bus_id"]),
        )}
        for s in seats:
            i = s.instance
            rng = random.Random(hash((self.seed, s.index, bucket)) & 0xFFFFFFFF)
            held = s.kind in ("held", "held-no-lease")
            g["seat_info"].add_metric([i, s.node, "resident", f"http://{s.node}:8000", "2"], 1)
            g["seat_exporter_build_info"].add_metric([i, "0.1.0"], 1)
            g["seat_engine_up"].add_metric([i], 1 if s.engine_up else 0)
            g["seat_hold_active"].add_metric([i], 1 if held else 0)
            g["seat_hold_lease_armed"].add_metric([i], 1 if s.kind == "held" else 0)
            g["seat_hold_without_lease"].add_metric([i], 1 if s.kind == "held-no-lease" else 0)
            end = lease_end(self.started, s.hold_ends_s, now)
            if end is not None:
                g["seat_hold_expiry_timestamp_seconds"].add_metric([i], end)
            for unit in TIMERS:
                g["seat_timer_active"].add_metric([i, unit], 0 if held else 1)
            g["seat_silence_active"].add_metric([i], 1 if s.kind == "held" else 0)
            if s.kind == "held" and end is not None:
                g["seat_silence_end_timestamp_seconds"].add_metric([i], end)
            g["seat_container_info"].add_metric(
                [i, "probe" if s.phase else "resident", "seat-probe" if s.phase else "seat",
                 f"sha256:{s.index:064x}", f"registry.local/engine@sha256:{s.index:064x}"], 1)
            run_id = f"r{s.index:05d}"
            if s.phase:
                g["seat_runbook_active"].add_metric([i, "swap", "probe", run_id], 1)
                g["seat_probe_phase_info"].add_metric([i, run_id, s.phase], 1)
                g["seat_runbook_next_info"].add_metric([i, "probe", "todo"], 1)
            if s.probe_kept:
                g["seat_probe_disrupted"].add_metric([i], 0)
            for side in ("resident", "candidate"):
                g["seat_fit_fits"].add_metric([i, side], 1)
                g["seat_fit_over_bytes"].add_metric([i, side], 0)
            for src in SOURCES:
                up = 0 if (src == "engine" and not s.engine_up) else 1
                g["seat_source_up"].add_metric([i, src], up)
                g["seat_source_last_good_timestamp_seconds"].add_metric(
                    [i, src], now if up else self.started)
            g["seat_scrape_duration_seconds"].add_metric([i], rng.uniform(0.002, 0.02))
            if s.engine_up:
                model = "seat-resident"
                running = rng.randint(0, 64)
                g["vllm:num_requests_running"].add_metric([i, model, "0"], running)
                g["vllm:num_requests_waiting"].add_metric(
                    [i, model, "0"], rng.randint(0, 8) if running > 48 else 0)
                g["vllm:kv_cache_usage_perc"].add_metric([i, model, "0"],
                                                         min(1.0, running / 64 * rng.uniform(0.6, 1.1)))
            if s.dcgm:
                for k, u in enumerate(s.gpu_uuids):
                    used = rng.randint(120_000, 135_000) if s.engine_up else rng.randint(0, 600)
                    labels = [i, str(k), u, f"nvidia{k}", "NVIDIA H200", s.node,
                              f"00000000:{0x18 + 0x10 * k:02X}:00.0"]
                    g["DCGM_FI_DEV_FB_USED"].add_metric(labels, used)
                    g["DCGM_FI_DEV_FB_FREE"].add_metric(labels, MIB_PER_H200 - used)
        yield from g.values()


class _Cache:
    """The scrape text, rebuilt when the bucket or the set of live seats changes."""

    def __init__(self, registry: CollectorRegistry, collector: FleetCollector) -> None:
        self.registry = registry
        self.collector = collector
        self.lock = threading.Lock()
        self.key: tuple[int, int] | None = None
        self.body = b""

    def get(self) -> bytes:
        with self.lock:
            now = time.time()
            key = (int(now // BUCKET_S), len(self.collector.live(now)))
            if key != self.key:
                self.body = generate_latest(self.registry)
                self.key = key
            return self.body


def make_server(host: str, port: int, seats: int, seed: int = 0, stale: int = 0,
                stale_after_s: float = 10.0) -> ThreadingHTTPServer:
    """A server (not yet serving: call ``serve_forever``) for :func:`plan`'s seats. Its
    ``collector`` attribute is the :class:`FleetCollector`."""
    collector = FleetCollector(plan(seats, seed, stale), time.time(), stale_after_s, seed)
    registry = CollectorRegistry(auto_describe=False)
    registry.register(collector)
    cache = _Cache(registry, collector)

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - http.server's name
            if self.path.split("?")[0] != "/metrics":
                self.send_error(404, "only /metrics is served")
                return
            body = cache.get()
            self.send_response(200)
            self.send_header("Content-Type", CONTENT_TYPE_LATEST)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer((host, port), Handler)
    server.daemon_threads = True
    server.collector = collector  # type: ignore[attr-defined]
    return server


def _listen(text: str) -> tuple[str, int]:
    host, sep, port = text.rpartition(":")
    if not sep or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise argparse.ArgumentTypeError(f"{text!r}: give HOST:PORT, e.g. 127.0.0.1:19470")
    return host or "127.0.0.1", int(port)


def main(argv: list[str] | None = None) -> int:
    """Parse the arguments and serve until SIGTERM / Ctrl-C; exit 0 (2 for bad arguments)."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--listen", type=_listen, default=("127.0.0.1", 19470), metavar="HOST:PORT")
    p.add_argument("--seats", type=int, default=1000)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--stale", type=int, default=0, metavar="N",
                   help="seats whose series vanish --stale-after seconds after start")
    p.add_argument("--stale-after", type=float, default=10.0, metavar="S")
    a = p.parse_args(argv)
    try:
        server = make_server(*a.listen, a.seats, a.seed, a.stale, a.stale_after)
    except (ValueError, OSError) as exc:
        print(f"fleet_sim: {exc}", file=sys.stderr)
        return 2
    signal.signal(signal.SIGTERM, lambda *_: threading.Thread(target=server.shutdown).start())
    print(f"fleet_sim: {a.seats} seats on http://{a.listen[0]}:{server.server_address[1]}/metrics",
          flush=True)
    try:
        server.serve_forever(poll_interval=0.5)
    except KeyboardInterrupt:
        pass
    server.server_close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
