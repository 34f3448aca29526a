"""Shared pytest fixtures.

Sections (keep this order; add new shared fixtures at the end, under "Other fixtures"):

1. The lab (``scripts/lab.py``): the ``lab`` session fixture (a typed view of ``.lab/state.json``)
   and ``lab_stop`` / ``lab_start`` to take one component down for a test and bring it back.
   A test that uses ``lab`` is marked ``lab`` automatically (``pytest -m "not lab"`` skips them).
   If the lab is not up, such tests FAIL (never skip) with "run `python scripts/lab.py up`".
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import importlib.util
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

# ==============================================================================================
# 1. The lab
# ==============================================================================================

REPO = Path(__file__).resolve().parent.parent
LAB_SCRIPT = REPO / "scripts" / "lab.py"
LAB_UP_HINT = "run `python scripts/lab.py up`"


@functools.cache
def _lab_module() -> ModuleType:
    """``scripts/lab.py`` imported as a module (its paths, constants and health checks)."""
    spec = importlib.util.spec_from_file_location("seat_lab", LAB_SCRIPT)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("seat_lab", mod)
    spec.loader.exec_module(mod)
    return mod


@dataclass(frozen=True)
class Lab:
    """The running lab, as ``scripts/lab.py up`` recorded it in ``.lab/state.json``.

    URLs are ``http://127.0.0.1:PORT`` (no trailing slash); ``docker_host`` is the engine's
    ``unix://…/docker.sock`` URL for the docker SDK (``base_url``) or ``DOCKER_HOST``.
    Image identity: ``engine_image_id`` is the image ID (config digest); ``engine_repo_digest``
    is ``127.0.0.1:15000/engine@sha256:…`` (the manifest digest the registry serves), which is
    also the reference the ``seat-resident`` container was run by.
    ``dockerd_pid`` (and ``state``) are as read when the session began: ``lab_stop("dockerd")``
    and friends start new processes; :meth:`current_state` re-reads the state file.
    """

    lab_dir: Path
    state_file: Path
    profile_path: Path
    docker_host: str
    docker_socket: Path
    docker_cli: str
    dockerd_pid: int
    registry_url: str
    alertmanager_url: str
    vllm_url: str
    node_container: str
    resident_container: str
    served_model_name: str
    model_dir: Path
    vllm_python: Path
    vllm_log_path: Path | None
    engine_image_tag_ref: str
    engine_repo_digest: str
    engine_image_id: str
    node_image_id: str
    timers: tuple[str, ...]
    persistent_timers: tuple[str, ...]
    services: tuple[str, ...]
    job_log_dir: str
    max_model_len: int
    max_num_seqs: int
    block_size: int
    state: dict[str, Any] = field(repr=False, compare=False)

    @classmethod
    def from_state(cls, s: dict[str, Any]) -> Lab:
        """Build from the state file's dict; KeyError if the lab was not fully brought up."""
        v = s["vllm"]
        return cls(
            lab_dir=Path(s["lab_dir"]), state_file=Path(s["state_file"]),
            profile_path=Path(s["profile"]),
            docker_host=s["dockerd"]["host"], docker_socket=Path(s["dockerd"]["socket"]),
            docker_cli=s["dockerd"]["cli"], dockerd_pid=int(s["dockerd"]["pid"]),
            registry_url=s["registry"]["url"], alertmanager_url=s["alertmanager"]["url"],
            vllm_url=v["url"], node_container=s["node"]["container"],
            resident_container=v["container"], served_model_name=v["served_model_name"],
            model_dir=Path(v["model_dir"]), vllm_python=Path(v["python"]),
            vllm_log_path=Path(v["log_path"]) if v.get("log_path") else None,
            engine_image_tag_ref=v["image_tag_ref"], engine_repo_digest=v["repo_digest"],
            engine_image_id=v["image_id"], node_image_id=s["node"]["image_id"],
            timers=tuple(s["node"]["timers"]),
            persistent_timers=tuple(s["node"]["persistent_timers"]),
            services=tuple(s["node"]["services"]), job_log_dir=s["node"]["job_log_dir"],
            max_model_len=int(v["max_model_len"]), max_num_seqs=int(v["max_num_seqs"]),
            block_size=int(v["block_size"]), state=s,
        )

    @contextlib.contextmanager
    def docker_client(self, timeout: int = 30) -> Iterator[Any]:
        """``with lab.docker_client() as client:`` a docker SDK client on the lab engine."""
        import docker

        client = docker.DockerClient(base_url=self.docker_host, timeout=timeout)
        try:
            yield client
        finally:
            client.close()

    def current_state(self) -> dict[str, Any]:
        """``state.json`` as it is now (PIDs change when a component is restarted)."""
        return json.loads(self.state_file.read_text("utf-8"))

    def docker_argv(self, *args: str) -> list[str]:
        """An argument list for the docker CLI against the lab engine."""
        return [self.docker_cli, "-H", self.docker_host, *args]

    def vllm_logs(self) -> str:
        """The ``seat-resident`` container's output (vLLM's log) so far."""
        cp = subprocess.run(self.docker_argv("logs", self.resident_container),
                            capture_output=True, timeout=60, check=False,
                            env={"PATH": "/usr/sbin:/usr/bin:/sbin:/bin"})
        return (cp.stdout + cp.stderr).decode("utf-8", "replace")


def lab_command(*args: str, timeout: float = 900) -> subprocess.CompletedProcess[str]:
    """Run ``python scripts/lab.py ARGS`` (same interpreter); output captured as text."""
    return subprocess.run([sys.executable, str(LAB_SCRIPT), *args], capture_output=True,
                          text=True, timeout=timeout, check=False, cwd=REPO,
                          env={**os.environ, "PYTHONUNBUFFERED": "1"})


def lab_status() -> dict[str, dict[str, Any]]:
    """``lab.py status --json``: ``{component: {"healthy": bool, "detail": str, ...}}``."""
    return _lab_module().collect_status()


# Outage lock: every test that uses the lab holds ``.lab/disrupt.lock`` SHARED while it runs;
# ``lab_stop`` converts it to EXCLUSIVE for the outage. So, across test sessions sharing one lab,
# a component is never taken down under another session's running test, and a test never starts
# while another session has a component down. (flock: one open file per process; converting a
# lock on the same open file cannot deadlock with itself.)
_LOCK_WAIT_S = 900.0
_lock_files: dict[Path, Any] = {}


def _lock_file(lab_dir: Path) -> Any:
    fh = _lock_files.get(lab_dir)
    if fh is None:
        lab_dir.mkdir(parents=True, exist_ok=True)
        fh = _lock_files[lab_dir] = open(lab_dir / "disrupt.lock", "a+")  # noqa: SIM115
    return fh


def _flock(lab_dir: Path, mode: int, what: str) -> None:
    """flock ``.lab/disrupt.lock`` in ``mode`` (LOCK_SH / LOCK_EX / LOCK_UN), waiting ≤ 15 min."""
    fh = _lock_file(lab_dir)
    if mode == fcntl.LOCK_UN:
        fcntl.flock(fh, fcntl.LOCK_UN)
        return
    deadline = time.monotonic() + _LOCK_WAIT_S
    while True:
        try:
            fcntl.flock(fh, mode | fcntl.LOCK_NB)
            return
        except BlockingIOError:
            if time.monotonic() > deadline:
                pytest.fail(f"{what}: {lab_dir / 'disrupt.lock'} held by another test session "
                            f"for over {_LOCK_WAIT_S:.0f}s", pytrace=False)
            time.sleep(0.2)


@pytest.fixture(scope="session")
def lab() -> Lab:
    """The running lab. Fails (does not skip) with the command to run if it is not up."""
    mod = _lab_module()
    state_file = Path(mod.STATE_FILE)
    _flock(Path(mod.LAB), fcntl.LOCK_SH, "waiting out another session's lab outage")
    try:
        try:
            state = json.loads(state_file.read_text("utf-8"))
            lab_ = Lab.from_state(state)
        except (OSError, ValueError, KeyError, TypeError) as exc:
            pytest.fail(f"the lab is not up ({state_file}: {exc!r}): {LAB_UP_HINT}",
                        pytrace=False)
        down = {c: s["detail"] for c, s in mod.collect_status().items() if not s["healthy"]}
        if down:
            pytest.fail(f"the lab is not (fully) up, down: {down}: {LAB_UP_HINT}",
                        pytrace=False)
    finally:
        _flock(Path(mod.LAB), fcntl.LOCK_UN, "lab")
    return lab_


@pytest.fixture(autouse=True)
def _lab_outage_guard(request: pytest.FixtureRequest) -> Iterator[None]:
    """Hold the outage lock shared for the duration of every test that uses ``lab``."""
    if "lab" not in request.fixturenames or getattr(request.module, "LAB_MODULE_EXCLUSIVE",
                                                    False):
        # (a module whose fixture holds the lock exclusive for all its tests: left alone)
        yield
        return
    lab_: Lab = request.getfixturevalue("lab")
    _flock(lab_.lab_dir, fcntl.LOCK_SH, "waiting out another session's lab outage")
    try:
        yield
    finally:
        _flock(lab_.lab_dir, fcntl.LOCK_UN, "lab")


@pytest.fixture
def lab_start(lab: Lab) -> Callable[[str], None]:
    """``lab_start(component)``: start it (idempotent) and wait until healthy; fails if not."""

    def _start(component: str) -> None:
        cp = lab_command("start", component)
        if cp.returncode != 0:
            pytest.fail(f"`lab.py start {component}` failed:\n{cp.stdout}{cp.stderr}")

    return _start


@pytest.fixture
def lab_stop(lab: Lab, lab_start: Callable[[str], None]
             ) -> Callable[[str], contextlib.AbstractContextManager[None]]:
    """``with lab_stop("alertmanager"): ...`` — the component is down inside the block.

    Components: ``dockerd``, ``registry``, ``alertmanager``, ``node`` (the systemd container is
    stopped), ``vllm`` (the ``seat-resident`` container is stopped). On leaving the block, always
    (also on failure), the component is started again and the block waits until it is healthy.
    ``dockerd`` runs with ``--live-restore``: while it is down, the containers keep running.
    The outage holds the lab's outage lock exclusively (see ``_lab_outage_guard``).
    """

    depth = [0]  # nested outages (two components down at once) keep the lock exclusive

    @contextlib.contextmanager
    def _stop(component: str) -> Iterator[None]:
        if depth[0] == 0:
            _flock(lab.lab_dir, fcntl.LOCK_EX, f"stopping {component}")
        depth[0] += 1
        try:
            cp = lab_command("stop", component, timeout=120)
            try:
                if cp.returncode != 0:
                    pytest.fail(f"`lab.py stop {component}` failed:\n{cp.stdout}{cp.stderr}")
                yield
            finally:
                lab_start(component)
        finally:
            depth[0] -= 1
            if depth[0] == 0:
                _flock(lab.lab_dir, fcntl.LOCK_SH, "lab")

    return _stop


def wait_until(pred: Callable[[], Any], timeout: float = 30.0, interval: float = 0.2,
               what: str = "condition") -> Any:
    """Poll ``pred`` until it returns a truthy value (returned) or fail after ``timeout`` s."""
    deadline = time.monotonic() + timeout
    while True:
        value = pred()
        if value:
            return value
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout:.0f}s waiting for {what}")
        time.sleep(interval)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark every test that uses the ``lab`` fixture (directly or not) with ``lab``, and put
    it in the pytest-xdist group ``lab``: under ``-n N --dist loadgroup`` (scripts/test) the lab
    tests run one after another on one worker (they share one lab, and ``lab_stop`` takes a
    component down for the test that asked), while the other tests run on the other workers."""
    for item in items:
        if "lab" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.lab)
        if item.get_closest_marker("lab") is not None:   # also those marked lab by hand
            item.add_marker(pytest.mark.xdist_group("lab"))


# ==============================================================================================
# Other fixtures (add below; one section per owner)
# ==============================================================================================

# -- shared helpers for tests that start their own servers on loopback (lead) -------------------
def free_port(start: int, end: int) -> int:
    """The first TCP port in ``[start, end)`` that binds on 127.0.0.1; RuntimeError if none."""
    import socket

    for port in range(start, end):
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise RuntimeError(f"no free port in {start}-{end - 1} on 127.0.0.1")


def wait_for_port(port: int, proc: subprocess.Popen, log: Path, what: str,
                  timeout: float = 20.0) -> None:
    """Wait until 127.0.0.1:``port`` accepts a TCP connection from the server ``proc`` started.

    Fails the test (after killing ``proc``) with ``log``'s text when ``proc`` exits first or
    ``timeout`` seconds pass.
    """
    import socket

    deadline = time.monotonic() + timeout
    while True:
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            pytest.fail(f"{what} did not start: {log.read_text()}")
        time.sleep(0.1)


# Property tests (tests/test_props_*.py): one bounded hypothesis profile for every suite.
# "ci" (the default): at most 200 examples per property, 5 s per example as the hang bound (the
# parsers' "no call over 1 s" is a speed target: scripts/fuzz.py measures it; as a per-example
# deadline it failed on a loaded machine, where the unit run shares two cores with the lab
# tests, and hypothesis itself called the slow example flaky on re-run), no example database
# (CI starts cold), derandomized (the same examples every run: CI and the mutation score do not
# flicker). "dev": 1,000 random examples for a longer local
# hunt: HYPOTHESIS_PROFILE=dev python3 -m pytest tests/test_props_*.py
try:
    from hypothesis import HealthCheck
    from hypothesis import settings as _hyp_settings

    _hyp_settings.register_profile(
        "ci", max_examples=200, deadline=5000, database=None, derandomize=True,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
    _hyp_settings.register_profile(
        "dev", max_examples=1000, deadline=1000,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
    _hyp_settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))
except ImportError:  # hypothesis is in the test extra; without it the property suites fail
    pass


# -- each test process its own state and data dirs (ci) -----------------------------------------
_OWN_DIRS_FLAG = "SEAT_TESTS_OWN_DIRS"


def pytest_configure(config: pytest.Config) -> None:
    """Give this test process (the session, or each pytest-xdist worker) its own console state
    dir (the journal) and data dir (probe runs, comparisons), unless the person running pytest
    set ``SEAT_CONSOLE_STATE_DIR`` / ``SEAT_CONSOLE_DATA_DIR`` themselves. A test that sets its
    own (most do, under ``tmp_path``) is unchanged; one that does not no longer reads or writes
    ``~/.local/state/seat-console``, which tests on other workers would share. xdist's workers
    inherit the controller's environment, so the flag tells a worker the dirs are the
    controller's (to be replaced), not the person's (to be kept)."""
    import tempfile

    ours = os.environ.get(_OWN_DIRS_FLAG) == "1"
    if not ours and (os.environ.get("SEAT_CONSOLE_STATE_DIR")
                     or os.environ.get("SEAT_CONSOLE_DATA_DIR")):
        return
    worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
    root = Path(tempfile.mkdtemp(prefix=f"seat-tests-{worker}-"))
    os.environ["SEAT_CONSOLE_STATE_DIR"] = str(root / "state")
    os.environ["SEAT_CONSOLE_DATA_DIR"] = str(root / "data")
    os.environ[_OWN_DIRS_FLAG] = "1"
    config.stash[_own_root] = root


_own_root = pytest.StashKey[Path]()


def pytest_unconfigure(config: pytest.Config) -> None:
    """Remove the dirs :func:`pytest_configure` made for this process (if it made them)."""
    import shutil

    root = config.stash.get(_own_root, None)
    if root is not None:
        shutil.rmtree(root, ignore_errors=True)


# ----------------------------------------------------------------------------------------------
# SIGINT as a terminal's foreground job has it (tests/test_ctrl_c_startup.py,
# tests/test_probe_lab.py's Ctrl-C, tests/test_interrupt_hold.py)
# ----------------------------------------------------------------------------------------------
def _sigint_as_a_foreground_job() -> None:
    """Let this test process (and so every child it starts) take SIGINT as a terminal's
    foreground job does, when it was started with SIGINT ignored.

    A suite started in the background by a shell without job control (``bash .ci/run >log &``,
    ``nohup … &``: how a half-hour run is started on a shared machine) inherits SIGINT
    *ignored*, and an ignored disposition survives ``exec``: every console a test started
    ignored the SIGINT the test sent it before the console's own code could take it (the
    50-instant start-up test's "spawn + 0.00 s" ran on and drew its screen). A Ctrl-C comes
    only to a foreground job, whose shell gave it SIGINT's default disposition; Python's
    handler here becomes that default in each child (handlers reset at ``exec``)."""
    import signal

    if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


_sigint_as_a_foreground_job()
