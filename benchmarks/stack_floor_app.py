#!/usr/bin/env python3
"""The floor of the console's *stack* for start-up: the least any console built on the
console's libraries could do before its full screen, on the lab's node.

A minimal Textual app with the main screen's eight panels as bordered :class:`Static`\\ s and a
status line. It imports the libraries the console reads the node with (pydantic, Textual,
the docker SDK, urllib3, httpx with tenacity, prometheus_client, psutil, pynvml, sqlite3),
validates the three endpoints it needs from the profile with one pydantic model, and on mount
starts one thread per reading, each the smallest form of a console source's first read:

* GPUs: ``nvmlInit`` (fails on a CPU machine: "unavailable", as the console's panel);
* containers: the docker SDK's client, ``containers.list``;
* timers: one ``docker exec`` of ``systemctl show`` in the node's container;
* engine: ``/health`` and ``/metrics`` over urllib3, the metrics parsed by prometheus_client;
* silences: Alertmanager's ``/api/v2/silences`` over httpx (tenacity imported, as the
  console's client retries with it);
* fit: the resident checkpoint's ``config.json`` read and ``json.loads``-ed;
* actions: one sqlite3 query (in memory) and the hold leases' ``systemctl list-units``;
* seat: the resident container's inspect and its image's.

Each panel's title becomes ``· updated HH:MM:SSZ`` on its reading and the status line says
``engine UP``/``engine DOWN`` — the marks ``bench_lab_idle.seat_marks`` recognises as the full
screen, so ``bench_lab_idle.py --order D…`` times it as it times the console. Nothing here
is shown to users; it answers "how far below the stack's own floor is the 0.5 s target"
(docs/benchmarks.md, issue 33).

Usage::

    python benchmarks/stack_floor_app.py PROFILE.toml
"""

from __future__ import annotations

import json
import sqlite3
import sys
import threading
import tomllib
from datetime import UTC, datetime
from pathlib import Path

import docker
import httpx
import psutil
import pynvml
import tenacity  # noqa: F401 - the console's Alertmanager client retries with it
import urllib3
from prometheus_client.parser import text_string_to_metric_families
from pydantic import BaseModel, HttpUrl
from textual.app import App, ComposeResult
from textual.widgets import Static

PANELS = ("gpus", "fit", "engine", "containers", "timers", "silences", "actions", "seat")
TITLES = {"gpus": "GPUs (NVML)"}
"""Titles other than the panel's name: the GPU panel's is the console's, the mark of the
Textual screen in ``bench_lab_idle.seat_marks``."""


class Endpoints(BaseModel):
    """What the floor reads from the profile: the node's docker socket and container, the
    engine's and Alertmanager's URLs, the resident checkpoint's path and the timer units."""

    docker_host: str
    exec_container: str
    endpoint: HttpUrl
    alertmanager: HttpUrl
    checkpoint: str
    resident: str
    timers: list[str]


def load(path: str) -> Endpoints:
    """The :class:`Endpoints` of the console's profile at ``path`` (TOML)."""
    raw = tomllib.loads(Path(path).read_text())
    return Endpoints(docker_host=raw["node"]["docker_host"],
                     exec_container=raw["node"]["exec_container"],
                     endpoint=raw["seat"]["endpoint"], alertmanager=raw["alertmanager"]["url"],
                     checkpoint=raw["resident"]["path"], resident=raw["resident"]["container"],
                     timers=[*raw["timers"]["conformance"], raw["timers"]["remediation"]])


class StackFloorApp(App[None]):
    """Eight panels and a status line; each panel's first reading in a thread of its own."""

    CSS = "Static.panel { border: round white; height: 4; }"

    def __init__(self, ep: Endpoints) -> None:
        super().__init__()
        self.ep = ep
        self.docker: docker.DockerClient | None = None
        self.docker_lock = threading.Lock()

    def compose(self) -> ComposeResult:
        yield Static("engine ?", id="status")
        for name in PANELS:
            panel = Static("reading…", id=name, classes="panel")
            panel.border_title = TITLES.get(name, name)
            yield panel

    def on_mount(self) -> None:
        for name in PANELS:
            threading.Thread(target=self._read, args=(name,), daemon=True).start()

    def _client(self) -> docker.DockerClient:
        with self.docker_lock:
            if self.docker is None:
                self.docker = docker.DockerClient(base_url=self.ep.docker_host)
            return self.docker

    def _exec(self, *argv: str) -> str:
        c = self._client().containers.get(self.ep.exec_container)
        return c.exec_run(list(argv)).output.decode()[:60]

    def _read(self, name: str) -> None:
        try:
            text = getattr(self, f"read_{name}")()
        except Exception as exc:  # noqa: BLE001 - shown, as a console panel would
            text = f"unavailable: {type(exc).__name__}"
        self.call_from_thread(self._show, name, text)

    def _show(self, name: str, text: str) -> None:
        panel = self.query_one(f"#{name}", Static)
        panel.update(text)
        panel.border_title = f"{TITLES.get(name, name)} · updated {datetime.now(UTC):%H:%M:%S}Z"
        if name == "engine":
            self.query_one("#status", Static).update(
                "engine UP" if text.startswith("200") else "engine DOWN")

    def read_gpus(self) -> str:
        pynvml.nvmlInit()
        return f"{pynvml.nvmlDeviceGetCount()} GPUs"

    def read_containers(self) -> str:
        return f"{len(self._client().containers.list(all=True))} containers"

    def read_timers(self) -> str:
        return self._exec("systemctl", "show", "-p", "ActiveState", "--", *self.ep.timers)

    def read_actions(self) -> str:
        sqlite3.connect(":memory:").execute("select 1").fetchone()
        return self._exec("systemctl", "list-units", "--all", "--type=timer", "--plain",
                          "--no-legend", "--", "seat-hold-*-lease.timer")

    def read_engine(self) -> str:
        http = urllib3.PoolManager(timeout=2.0, retries=False)
        base = str(self.ep.endpoint).rstrip("/")
        health = http.request("GET", f"{base}/health").status
        metrics = http.request("GET", f"{base}/metrics").data.decode()
        n = sum(1 for _ in text_string_to_metric_families(metrics))
        return f"{health} · {n} metric families"

    def read_silences(self) -> str:
        base = str(self.ep.alertmanager).rstrip("/")
        with httpx.Client(timeout=2.0) as c:
            return f"{len(c.get(f'{base}/api/v2/silences').json())} silences"

    def read_fit(self) -> str:
        cfg = json.loads((Path(self.ep.checkpoint) / "config.json").read_text())
        return f"{cfg.get('num_hidden_layers')} layers · {psutil.virtual_memory().total} B"

    def read_seat(self) -> str:
        c = self._client().containers.get(self.ep.resident)
        return f"{c.name} {c.status} {c.image.id[:19]}"


if __name__ == "__main__":
    StackFloorApp(load(sys.argv[1])).run()
