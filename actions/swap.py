"""The seat swap (the probe container takes the seat) and the restore (the resident comes back).

**Swap** (:func:`build_swap`, runbook ``swap``, policy ``undo``):

1. **record resident** — precondition: a hold is active (:func:`~seat_console.actions.hold.
   active_hold`), the fit budget says the candidate fits (or ``force`` with a reason, journaled),
   the resident container is running, the probe image resolves (``swap.image = "backport"``: the
   image ``build-backport`` tagged from ``[backport]``, with the matching content-hash label),
   the GPU UUIDs are known, no probe container is running. Apply: record the resident's
   identity — container ID, image ID, image reference, repo digest, entrypoint/cmd, stop
   timeout, start time, the models ``/v1/models`` lists — in the journal (facts ``resident``).
2. **stop resident** — drained first (:mod:`seat_console.actions.drain`: ``POST /pause?mode=
   wait`` where the engine offers it, else SIGTERM with a stop timeout ≥ its
   ``--shutdown-timeout`` + margin; bound ``[seat] drain_timeout_s``; facts ``drain``), then
   stopped with the stop timeout ``t`` = its StopTimeout or the drain's, the larger
   (:func:`docker_stop`): SIGTERM, then SIGKILL as soon as the engine's listener at the seat's
   endpoint refuses a connection (vLLM closes it only after its engine is gone) — or at ``t`` —
   and no SIGKILL when it exits by itself; how it ended in facts ``drain.stop``. Where the
   listener did not accept before the stop: ``POST /containers/{id}/stop?t=…`` with a client
   timeout above ``t``; after a client timeout the container is inspected again before the
   step is called failed. Verify: not running.
   Undo: start the recorded container and verify image ID, ``/health`` 200 and the models.
3. **start probe** — an old stopped probe container of the same name is renamed
   (``<name>-<finished UTC>``, kept, never removed); the probe is created from the image **by
   ID**, with the profile's argv, env, volumes, network/IPC mode, shm size and GPUs by UUID
   (``DeviceRequests``), labelled with the run ID. Verify: running. Undo: stop it, keep it.
4. **probe serving** — wait until ``/health`` is 200 and ``/v1/models`` lists
   ``swap.served_model_name`` (up to ``swap.start_timeout_s``; the log tail goes to the
   observer); fail at once if the container exits or a failure pattern (``swap.failure_
   patterns``: out-of-memory, "zeros in PLE", weight-offload fallback) matches its log. Verify:
   the engine's startup lines parsed (KV cache memory, KV tokens, max concurrency;
   :mod:`seat_console.sources.startup_log`) into facts ``probe_startup``, then one real
   completion on the probe, and the seat's downtime (drain → that completion) into facts
   ``downtime`` (:func:`seat_console.actions.drain.mark_up`).

Any failure undoes in reverse: the probe is stopped (kept), the resident started and verified.
The hold stays in place (so a corrected retry needs no new hold; its lease still restores the
timers at expiry); ``restore`` releases it.

**Restore** (:func:`build_restore`, runbook ``restore``, policy ``continue``): from the newest
swap's recorded identity: drain and stop (keep) the probe; start the resident as recorded (same
container, so the same image, args and mounts); verify its image ID is the recorded one,
``/health`` 200, the recorded models listed, and **one real completion** answered (the seat's
downtime measured to it, facts ``downtime``); then run
part 1's release of the hold (timers started and verified, silence expired, lease cancelled) —
or, with ``keep_hold`` (``restore --keep-hold``), check the hold is still active and keep it
(the cycle stays open: the compare, which starts from the resident, can run next).

After a kill -9: the journal holds an unfinished ``swap`` (or ``restore``) run; :func:`rebuild`
gives ``recover`` the runbook with the same run ID and facts; every undo reads the node first
and does only what is still needed (idempotent).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from seat_console.actions import hold as hold_mod
from seat_console.actions.journal import Entry, Journal
from seat_console.actions.runbook import (
    Check,
    Observer,
    Refusals,
    Runbook,
    RunContext,
    Step,
    StepError,
    facts_from_rows,
)
from seat_console.core.untrusted import load_json
from seat_console.node.context import NodeContext
from seat_console.node.docker import container_running, find_container
from seat_console.node.engine_client import EngineClient, EngineError
from seat_console.sources.engine import parse_models
from seat_console.core.profile import SwapSpec
from seat_console.sources.startup_log import parse_startup_log, scan_failures

SWAP_LABEL = "org.seat-console.swap.run-id"
"""Label on a probe container: the swap run that started it."""
DOCKER_TIMEOUT_S = 60
"""Docker client timeout (s) for one API call (a stop adds the container's stop timeout)."""
RESIDENT_START_TIMEOUT_S = 900.0
"""How long (s) the restored resident may take to answer ``/health`` and ``/v1/models``."""
POLL_S = 1.0

def _expect(nctx: NodeContext | None, name: str, actions: Sequence[str]) -> None:
    """Right before a step changes container ``name``: the context's event watcher (the TUI's
    containers panel, :meth:`NodeContext.expect`) marks those engine events as the console's.
    Other processes' watchers know it from the journal: each step declares the containers it
    acts on (``Step.acts_on``, :mod:`seat_console.node.attribution`)."""
    if nctx is not None:
        nctx.expect(name, actions)


@dataclass
class SwapOptions:
    """``force`` + ``reason``: swap without a fitting budget (the reason is journaled);
    ``on_log``: called with each new line of the starting engine's log (TUI log pane, CLI)."""

    force: bool = False
    reason: str = ""
    on_log: Callable[[str], None] = lambda line: None


# -- small reads -----------------------------------------------------------------------------------
def _client(nctx: NodeContext) -> Any:
    return nctx.docker(timeout_s=DOCKER_TIMEOUT_S)


_inspect = find_container   # the names every step of this module and promote's use


def _inspect_once(nctx: NodeContext, name_or_id: str) -> Any | None:
    """The container ``name_or_id`` as docker inspects it now (a ``docker`` ``Container``, its
    ``attrs`` read), or ``None`` when there is none; through its own client, closed after."""
    client = _client(nctx)
    try:
        return _inspect(client, name_or_id)
    finally:
        client.close()


_running = container_running


def _models(endpoint: str, timeout_s: float = 5.0) -> list[str] | None:
    """Model IDs ``/v1/models`` lists (:func:`seat_console.sources.engine.parse_models`), or
    ``None`` when it does not answer 200 with that JSON. Through the one engine client."""
    try:
        with EngineClient(endpoint, timeout_s) as client:
            a = client.models()
    except EngineError:
        return None
    if not a.ok:
        return None
    try:
        return [m.id for m in parse_models(load_json(a.body, a.url))]
    except ValueError:   # InputError too
        return None


def _health(endpoint: str, timeout_s: float = 3.0) -> int | None:
    """``/health`` status code, or ``None`` when nothing answers (the one engine client)."""
    try:
        with EngineClient(endpoint, timeout_s) as client:
            return client.health()
    except EngineError:
        return None


def completion(endpoint: str, model: str, timeout_s: float = 120.0) -> str:
    """One real completion (``POST /v1/completions``, 4 tokens): returns a sentence with the
    tokens counted; raises :class:`StepError` when it is not answered with ≥ 1 token (no
    answer: the client's error, naming the URL)."""
    body = {"model": model, "prompt": "The seat is back:", "max_tokens": 4, "temperature": 0,
            "ignore_eos": True}
    try:
        with EngineClient(endpoint, timeout_s) as client:
            r = client.completion(body)
    except EngineError as exc:
        raise StepError(f"completion on {endpoint}: {exc}") from None
    if r.status != 200:
        raise StepError(f"completion on {endpoint}: HTTP {r.status}: {r.text[:300]}")
    try:
        doc = load_json(r.body, r.url)
        text = doc["choices"][0]["text"]
        n = int((doc.get("usage") or {}).get("completion_tokens") or 0)
    except (ValueError, KeyError, IndexError, TypeError, AttributeError):
        raise StepError(f"completion on {endpoint}: unexpected answer {r.text[:300]!r}") from None
    if n < 1:
        raise StepError(f"completion on {endpoint}: answered with {n} tokens")
    return f"one completion answered: {n} token(s), {len(text)} characters"


def _logs(c: Any, since: datetime | None = None) -> str:
    try:
        kw: dict[str, Any] = {"stdout": True, "stderr": True}
        if since is not None:
            kw["since"] = since
        return c.logs(**kw).decode("utf-8", "replace")
    except Exception:  # noqa: BLE001 - a log that cannot be read is reported as empty
        return ""


def _tail(text: str, n: int = 20) -> str:
    return "\n".join(text.splitlines()[-n:])


def _started_at(c: Any) -> datetime | None:
    from seat_console.node.docker import parse_docker_time

    return parse_docker_time(c.attrs.get("State", {}).get("StartedAt"))


def identity(c: Any, endpoint: str, *, models: list[str] | None = None) -> dict[str, Any]:
    """The recorded identity of a container (JSON-able; env as names only — values may hold
    credentials): ``id``, ``name``, ``image_id``, ``image_ref``, ``repo_digests``,
    ``entrypoint``, ``cmd``, ``env_names``, ``stop_timeout_s``, ``started_at`` (ISO UTC),
    ``models`` (what ``/v1/models`` listed at ``endpoint``; ``models`` given: those, and
    ``endpoint`` is not asked — for a stopped container)."""
    a = c.attrs
    cfg = a.get("Config") or {}
    img = None
    try:
        img = c.client.images.get(a["Image"]).attrs
    except Exception:  # noqa: BLE001 - the image may be gone; the ID is still recorded
        pass
    started = _started_at(c)
    return {"id": a["Id"], "name": a.get("Name", "").lstrip("/"), "image_id": a["Image"],
            "image_ref": cfg.get("Image"), "repo_digests": (img or {}).get("RepoDigests") or [],
            "entrypoint": cfg.get("Entrypoint"), "cmd": cfg.get("Cmd"),
            "env_names": sorted(e.split("=", 1)[0] for e in cfg.get("Env") or []),
            "stop_timeout_s": int(cfg.get("StopTimeout") or 10),
            "started_at": hold_mod.iso(started) if started else None,
            "models": list(models) if models is not None else (_models(endpoint) or [])}


def stop_container(client: Any, c: Any, stop_timeout_s: int,
                   nctx: NodeContext | None = None, *, endpoint: str | None = None,
                   record: dict[str, Any] | None = None) -> str:
    """Drain ``c``'s engine, then stop ``c``. With ``nctx`` the engine serving at ``endpoint``
    (default ``seat.endpoint``) is drained first within ``[seat] drain_timeout_s``
    (:func:`seat_console.actions.drain.drain_and_stop`: ``POST /pause?mode=wait`` where the
    engine offers it, else SIGTERM with a stop timeout ≥ its ``--shutdown-timeout`` + margin);
    the stop timeout is the larger of ``stop_timeout_s`` and the drain plan's (the drain off,
    ``drain_timeout_s = 0``: ``stop_timeout_s``, the plain stop). Then the stop ends as soon
    as the engine has let go of the seat (:func:`docker_stop` with that ``endpoint``: SIGTERM,
    then SIGKILL once the engine's listener is closed, never later than the stop timeout).
    ``record``: filled with the drain's record, the stop's own under ``"stop"``
    (:func:`docker_stop`; journal it in the run's facts). Without ``nctx``: the plain
    ``docker stop`` (:func:`docker_stop` without an endpoint). Returns a sentence; raises
    :class:`StepError` when the drain fails (the engine resumed, said so), the docker call
    fails or the container still runs (the container named, with the fix)."""
    if nctx is None:
        return docker_stop(client, c, stop_timeout_s)
    from dataclasses import replace

    from seat_console.actions import drain as drain_mod

    ep = (endpoint or _seat(nctx)).rstrip("/")
    plan = drain_mod.drain_plan(c, ep, nctx.profile.seat.drain_timeout_s)
    # the drain off (bound 0): the stop as before the drain, with the caller's stop timeout
    plan = replace(plan, stop_timeout_s=(int(stop_timeout_s) if plan.bound_s <= 0 else
                                         max(plan.stop_timeout_s, int(stop_timeout_s))))
    stop_rec: dict[str, Any] = {}
    words, rec = drain_mod.drain_and_stop(
        c, plan, lambda t: docker_stop(client, c, t, nctx, endpoint=ep, record=stop_rec))
    if stop_rec:
        rec["stop"] = stop_rec
    if record is not None:
        record.update(rec)
    return words


def drain_words(nctx: NodeContext, c: Any, endpoint: str | None = None) -> str:
    """The plan's drain line for container ``c`` (:meth:`~seat_console.actions.drain.
    DrainPlan.words`): requests running + waiting now, the bound, how admission stops, the
    stop timeout. Reads only."""
    from seat_console.actions import drain as drain_mod

    ep = (endpoint or _seat(nctx)).rstrip("/")
    return drain_mod.drain_plan(c, ep, nctx.profile.seat.drain_timeout_s).words()


STOP_POLL_S = 0.1
"""Seconds between two looks (``docker inspect``, a TCP connect to the engine's listener) while
a stop waits for the engine to let go of the seat (:func:`docker_stop`)."""
KILL_WAIT_S = 30.0
"""Seconds a container may take, after SIGKILL, until docker reports it not running."""

STOP_WAYS = ("exited", "listener_closed", "stop_timeout", "docker_stop")
"""How a stop ended (:func:`docker_stop`'s record ``way``): the container exited by itself
after SIGTERM; the engine's listener closed, then SIGKILL; SIGKILL at the stop timeout; the
plain ``docker stop`` (no endpoint known, or its listener not accepting before the stop)."""


def docker_stop(client: Any, c: Any, stop_timeout_s: int, nctx: NodeContext | None = None,
                *, endpoint: str | None = None, record: dict[str, Any] | None = None) -> str:
    """Stop ``c``, at the latest ``stop_timeout_s`` s after SIGTERM (then SIGKILL, as
    ``docker stop`` does). ``nctx``: its event watcher is told first (:func:`_expect`: the
    ``kill`` / ``die`` / ``stop`` events are the console's). ``client`` is unused (``c`` carries
    its own); kept for the callers.

    **With ``endpoint``** (the URL the container's engine serves at): the stop ends as soon as
    the engine has let go of the seat. The rule, from vLLM's API server (``entrypoints/
    launchers/launcher.py`` ``serve_http``, read in the lab's vLLM 0.32.0; the same order in
    0.33.0 and 0.34.0): its SIGTERM handler first shuts the engine down (``engine_client.
    shutdown(timeout=--shutdown-timeout)``: with 0 it force-kills the engine process at once,
    with N > 0 it lets the engine finish its requests for up to N s, the listener open all the
    while), and only then tells uvicorn to exit (``server.should_exit``; ``server.shutdown()``
    closes the listening socket first, then waits for the open connections). So once a TCP
    connect to the endpoint is **refused** (:func:`seat_console.node.engine_client.listening`)
    the engine is gone and nothing it could still finish remains; uvicorn would only wait for
    the open keep-alive connections — under a client load until docker's SIGKILL at the stop
    timeout (exit 137, the full stop timeout of seat downtime for nothing; measured on the
    lab, docs/benchmarks.md, issue 32). Steps: the listener must accept a connection first
    (else the plain ``docker stop``: a listener that was never open cannot tell when the engine
    let go); ``POST /containers/{id}/kill?signal=SIGTERM``; then every :data:`STOP_POLL_S` s
    the listener is tried and the container inspected, until it exited by itself (no SIGKILL),
    the listener is refused (SIGKILL at once) or ``stop_timeout_s`` passed (SIGKILL); after a
    SIGKILL, wait up to :data:`KILL_WAIT_S` s for docker to report it not running.

    **Without ``endpoint``**: the plain ``docker stop`` (``t = stop_timeout_s``, a client
    timeout above it; after a client timeout, inspect again before calling it failed).

    ``record`` is filled with the stop's record (JSON-able): ``way`` (:data:`STOP_WAYS`),
    ``words`` (how it ended: ``"exited by itself"``, ``"listener closed after 0.1 s, then
    SIGKILL"``, ``"SIGKILL at the stop timeout"``, ``"docker stop"``), ``stop_s`` (s from
    SIGTERM — or the ``docker stop`` call — until not running), ``listener_closed_s`` (s from
    SIGTERM until the listener was refused, else ``None``), ``stop_timeout_s``, ``exit_code``
    (docker's ``State.ExitCode``; 137 = SIGKILL), ``endpoint``. Returns a sentence that says
    the same; raises :class:`StepError` naming the container and the fix when a docker call
    fails and it still runs (or cannot be read), or it still runs after the stop."""
    rec: dict[str, Any] = record if record is not None else {}
    t = int(stop_timeout_s)
    rec.update(endpoint=endpoint, stop_timeout_s=t, listener_closed_s=None)
    if endpoint is not None:
        from seat_console.node.engine_client import listening

        before = listening(endpoint)
        if before is True:
            return _stop_released(c, t, endpoint, nctx, rec)
        why = ("refused" if before is False else "not answered")
        out = _docker_stop(c, t, nctx, rec)
        return (f"{out}; the plain docker stop: a connect to the engine's listener at "
                f"{endpoint} was {why} before the stop, so its closing cannot say when the "
                "engine let go")
    return _docker_stop(c, t, nctx, rec)


def _ended(c: Any, rec: dict[str, Any], way: str, words: str, m0: float) -> None:
    rec.update(way=way, words=words, stop_s=round(time.monotonic() - m0, 3))
    code = (c.attrs.get("State") or {}).get("ExitCode")
    rec["exit_code"] = code if isinstance(code, int) and not isinstance(code, bool) else None


def _docker_stop(c: Any, t: int, nctx: NodeContext | None, rec: dict[str, Any]) -> str:
    """The plain ``docker stop`` (``POST /containers/{id}/stop?t=t``), its record in ``rec``."""
    import requests

    _expect(nctx, c.name, ("kill", "die", "stop"))
    m0 = time.monotonic()
    try:
        c.stop(timeout=t)
    except requests.exceptions.RequestException as exc:
        c.reload()
        if _running(c):
            raise StepError(f"stop {c.name}: client gave up after {DOCKER_TIMEOUT_S + t}"
                            f" s ({exc}) and it is still running") from None
        _ended(c, rec, "docker_stop", "docker stop", m0)
        return f"stopped {c.name} (the stop call timed out; re-inspected: not running)"
    except Exception as exc:  # noqa: BLE001 - APIError
        raise StepError(f"stop {c.name}: {exc}; check dockerd and stop it by hand "
                        f"(`docker stop {c.name}`)") from None
    try:
        c.reload()
    except Exception:  # noqa: BLE001 - the exit code is then not recorded; the stop is done
        pass
    _ended(c, rec, "docker_stop", "docker stop", m0)
    code = rec["exit_code"]
    return (f"stopped {c.name} (docker stop, t={t} s: {rec['stop_s']:.1f} s"
            + ("" if code is None else f", exit code {code}"
               + (" — SIGKILL at the stop timeout" if code == 137 else "")) + ")")


def _still_running(c: Any, what: str) -> bool:
    """``c`` inspected again: whether it runs (``False`` once it is gone). Raises
    :class:`StepError` naming it when docker cannot be read (``what``: the stop's state)."""
    from docker.errors import NotFound

    try:
        c.reload()
    except NotFound:
        return False
    except Exception as exc:  # noqa: BLE001 - APIError, a connection error
        raise StepError(f"stop {c.name}: cannot inspect it {what} ({type(exc).__name__}: "
                        f"{exc}); whether it still runs is unknown: check `docker ps`, stop "
                        f"it by hand (`docker stop {c.name}`)") from None
    return _running(c)


def _signal(c: Any, sig: str, what: str) -> bool:
    """``POST /containers/{id}/kill?signal=sig``: ``True`` when sent, ``False`` when ``c``
    turned out not running (docker's 409 "is not running", or gone). Raises :class:`StepError`
    naming ``c`` and the fix when the call fails and it still runs."""
    try:
        c.kill(signal=sig)
        return True
    except Exception as exc:  # noqa: BLE001 - APIError, a connection error
        if not _still_running(c, f"after a failed {sig}"):
            return False
        by_hand = "docker stop" if sig == "SIGTERM" else "docker kill"
        raise StepError(f"stop {c.name}: {sig} failed {what} ({type(exc).__name__}: {exc}) and "
                        f"it still runs: check dockerd, stop it by hand (`{by_hand} "
                        f"{c.name}`)") from None


def _stop_released(c: Any, t: int, endpoint: str, nctx: NodeContext | None,
                   rec: dict[str, Any]) -> str:
    """SIGTERM, then SIGKILL as soon as the engine's listener at ``endpoint`` is closed, never
    later than ``t`` s (:func:`docker_stop`'s rule); its record in ``rec``."""
    from seat_console.node.engine_client import listening

    _expect(nctx, c.name, ("kill", "die", "stop"))
    m0 = time.monotonic()
    if not _signal(c, "SIGTERM", "(the stop's first signal)"):
        _ended(c, rec, "exited", "exited by itself", m0)
        return f"stopped {c.name}: it had exited by itself before the SIGTERM"
    deadline = m0 + t
    while True:
        closed = listening(endpoint, timeout_s=max(0.05, min(0.5, deadline - time.monotonic())))
        seen = time.monotonic()
        if not _still_running(c, "after SIGTERM"):
            _ended(c, rec, "exited", "exited by itself", m0)
            return (f"stopped {c.name}: SIGTERM, exited by itself after {rec['stop_s']:.1f} s "
                    f"(stop timeout {t} s; exit code {rec['exit_code']})")
        now = time.monotonic()
        if closed is False:
            rec["listener_closed_s"] = round(seen - m0, 3)
            way = "listener_closed"
            words = f"listener closed after {rec['listener_closed_s']:.1f} s, then SIGKILL"
            break
        if now >= deadline:
            way, words = "stop_timeout", "SIGKILL at the stop timeout"
            break
        time.sleep(max(0.0, min(STOP_POLL_S, deadline - now)))
    if not _signal(c, "SIGKILL", f"({words.split(',')[0]})"):
        _ended(c, rec, "exited", "exited by itself", m0)
        return (f"stopped {c.name}: SIGTERM, exited by itself after {rec['stop_s']:.1f} s, "
                "just before the SIGKILL")
    until = time.monotonic() + KILL_WAIT_S
    while _still_running(c, "after SIGKILL"):
        if time.monotonic() >= until:
            raise StepError(f"stop {c.name}: still running {KILL_WAIT_S:.0f} s after SIGKILL: "
                            f"check dockerd (`docker ps`, `docker kill {c.name}`)")
        time.sleep(STOP_POLL_S)
    _ended(c, rec, way, words, m0)
    tail = ("" if way == "listener_closed" else
            f"; the listener at {endpoint} still accepted connections")
    return (f"stopped {c.name}: SIGTERM, {words} ({rec['stop_s']:.1f} s in all, stop timeout "
            f"{t} s; exit code {rec['exit_code']}){tail}")


def wait_serving(c: Any, endpoint: str, want_models: Sequence[str], timeout_s: float,
                 on_log: Callable[[str], None], patterns: Sequence[Any] = (),
                 since: datetime | None = None) -> str:
    """Wait until ``endpoint`` answers ``/health`` 200 and ``/v1/models`` lists every name in
    ``want_models``, streaming new log lines of ``c`` to ``on_log``. Raises :class:`StepError`
    (with the log tail) when ``c`` stops running, a failure pattern matches its log, or
    ``timeout_s`` passes."""
    deadline = time.monotonic() + timeout_s
    seen = 0
    log = ""
    while True:
        log = _logs(c, since)
        lines = log.splitlines()
        for line in lines[seen:]:
            on_log(line)
        seen = len(lines)
        if patterns:
            bad = scan_failures(log, patterns)
            if bad:
                raise StepError(f"{c.name}: failure pattern '{bad[0].name}' in its log (line "
                                f"{bad[0].line_no}: {bad[0].line[:200]})", _tail(log))
        c.reload()
        if not _running(c):
            st = c.attrs.get("State", {})
            raise StepError(f"{c.name} exited (code {st.get('ExitCode')}, "
                            f"OOMKilled {st.get('OOMKilled')}) before serving", _tail(log))
        if _health(endpoint) == 200:
            models = _models(endpoint)
            if models is not None and all(m in models for m in want_models):
                return f"{c.name} serving at {endpoint}: /health 200, /v1/models {models}"
        if time.monotonic() > deadline:
            raise StepError(f"{c.name}: not serving after {timeout_s:.0f} s", _tail(log))
        time.sleep(POLL_S)


def probe_image(nctx: NodeContext, client: Any) -> tuple[str, str]:
    """``(image_id, described)`` of the probe image; raises :class:`StepError` when it cannot
    be resolved (no backport built yet, label mismatch, unknown reference)."""
    from docker.errors import ImageNotFound

    spec = _swap_spec(nctx)
    if spec.image == "backport":
        from seat_console.actions.backport import LABEL_PREFIX, BackportError, BackportInputs

        if nctx.profile.backport is None:
            raise StepError("swap.image = 'backport' but the profile has no [backport]")
        try:
            inputs = BackportInputs.from_spec(nctx.profile.backport)
        except BackportError as exc:
            raise StepError(str(exc)) from None
        try:
            attrs = client.images.get(inputs.tag).attrs
        except ImageNotFound:
            raise StepError(f"the backport image {inputs.tag} is not built: run "
                            "`seat-console build-backport` first") from None
        got = ((attrs.get("Config") or {}).get("Labels") or {}).get(f"{LABEL_PREFIX}.content-hash")
        if got != inputs.content_hash:
            raise StepError(f"{inputs.tag} carries content hash {got!r}, not "
                            f"{inputs.content_hash}: rebuild it with build-backport")
        return attrs["Id"], f"backport {inputs.tag} (image ID {attrs['Id']})"
    try:
        attrs = client.images.get(spec.image).attrs
    except ImageNotFound:
        raise StepError(f"swap.image {spec.image!r} is not on the engine (pull it first)") from None
    return attrs["Id"], f"{spec.image} (image ID {attrs['Id']})"


def gpu_uuids(nctx: NodeContext) -> list[str]:
    """The GPUs the probe gets, by UUID (``swap.gpus``, else ``node.gpus``); raises
    :class:`StepError` when ``node.gpus`` are indices (positions can change; the probe must
    get the same cards by UUID)."""
    spec = _swap_spec(nctx)
    ids = list(spec.gpus) if spec.gpus is not None else list(nctx.profile.node.gpus)
    bad = [g for g in ids if not g.startswith("GPU-")]
    if bad:
        raise StepError(f"GPUs {bad} are not UUIDs: set swap.gpus (or node.gpus) to the cards' "
                        "UUIDs (`nvidia-smi --query-gpu=uuid --format=csv`)")
    return ids


def fit_verdict(nctx: NodeContext) -> tuple[bool, str]:
    """``(fits, words)`` from the candidate's fit budget (the same as ``seat-console fit``)."""
    from seat_console.core.base import Unavailable, read_once
    from seat_console.snapshot.fit_reading import gather_fit_inputs, host_memory
    from seat_console.fit.inputs import compute_budgets

    snap, why = None, None
    try:
        from seat_console.sources.gpu import make_source

        snap = read_once(make_source(nctx.loaded))
        if isinstance(snap, Unavailable):
            why, snap = str(snap), None
    except Exception as exc:  # noqa: BLE001 - no live reading: declared totals are used
        why, snap = f"{type(exc).__name__}: {exc}", None
    inputs = gather_fit_inputs(nctx.loaded, snap, gpu_unavailable=why, host=host_memory())
    comp, _ = compute_budgets(inputs)
    if comp.candidate is None:
        return False, f"the candidate cannot be budgeted: {comp.candidate_unavailable}"
    v = comp.candidate.verdict
    return v.fits, v.words


def _swap_spec(nctx: NodeContext) -> SwapSpec:
    spec = nctx.profile.swap
    if spec is None:
        raise StepError(f"{nctx.loaded.source}: the profile has no [swap] table (the probe "
                        "container: image, command, volumes, served_model_name; see "
                        "`seat-console profile --print-default`)")
    return spec


def seat_file(nctx: NodeContext) -> Any | None:
    """The seat-state file (:mod:`seat_console.core.seat_file`) when a ``promote`` wrote one:
    a :class:`~seat_console.core.seat_file.SeatFile` naming the promoted resident, else
    ``None``. Raises :class:`StepError` (the file named, with the fix) when it cannot be read
    or parsed: nothing may act on a seat whose resident is unknown. ``nctx`` is unused today
    (the file lives in the console's state dir); it is where a per-node file would be found."""
    from seat_console.core.seat_file import SeatFileError, read_seat_file

    try:
        return read_seat_file()
    except SeatFileError as exc:
        raise StepError(str(exc)) from None


def resident_name(nctx: NodeContext) -> str:
    """The container that is the seat's resident: the one the seat-state file names after a
    ``promote`` (:func:`seat_file`), else the profile's ``[resident] container``. The ONE
    reader every swap, restore and promote step uses. Raises :class:`StepError` when neither
    names one, or the seat-state file is unreadable."""
    sf = seat_file(nctx)
    if sf is not None:
        return sf.container
    name = nctx.profile.resident.container
    if not name:
        raise StepError("resident.container is not set in the profile")
    return name


_resident_name = resident_name   # the name every step of this module used before promote


def resident_or_profile(nctx: NodeContext) -> str | None:
    """:func:`resident_name`, or the profile's name when the seat-state file is unreadable
    (for journal inputs and messages only, never to act on)."""
    try:
        return resident_name(nctx)
    except StepError:
        return nctx.profile.resident.container


def protected_names(nctx: NodeContext) -> set[str]:
    """Containers no prune ever removes: the profile's resident, the seat-state file's
    resident and the previous one it keeps for rollback (names and IDs); ``{"*"}`` added when
    the seat-state file is unreadable (then nothing may be pruned)."""
    out = {n for n in (nctx.profile.resident.container,) if n}
    try:
        sf = seat_file(nctx)
    except StepError:
        return out | {"*"}
    if sf is not None:
        for rec in (sf.resident, sf.previous):
            if rec:
                out.update((rec["name"], rec["id"]))
    return out


def _seat(nctx: NodeContext) -> str:
    return str(nctx.profile.seat.endpoint).rstrip("/")


def _probe_endpoint(nctx: NodeContext) -> str:
    spec = _swap_spec(nctx)
    return str(spec.endpoint or nctx.profile.seat.endpoint).rstrip("/")


# -- shared steps ---------------------------------------------------------------------------------
def start_recorded(nctx: NodeContext, rec: Mapping[str, Any],
                   on_log: Callable[[str], None] = lambda line: None) -> str:
    """Start the recorded container ``rec`` (a recorded identity or launch record: ``id``,
    ``name``, ``image_id``, ``models``; by ID) if it does not run, and wait until the seat
    endpoint serves its recorded models (≤ :data:`RESIDENT_START_TIMEOUT_S`; its new log lines
    to ``on_log``). Idempotent. The one start of a recorded resident (``restore``, a swap's
    undo, ``promote --undo`` and its undo). Raises :class:`StepError` when the container no
    longer exists or its image is not the recorded one."""
    client = _client(nctx)
    try:
        c = _inspect(client, rec["id"])
        if c is None:
            raise StepError(f"the container {rec['name']} ({rec['id'][:12]}) no longer exists: "
                            "recreate it by hand from its recorded identity (the journal, or "
                            "the seat-state file)")
        if c.attrs["Image"] != rec["image_id"]:
            raise StepError(f"{rec['name']} now has image {c.attrs['Image']}, recorded "
                            f"{rec['image_id']}")
        out = "already running"
        since = None
        if not _running(c):
            _expect(nctx, c.name, ("start",))
            c.start()
            c.reload()
            since = _started_at(c)
            out = "started"
        msg = wait_serving(c, _seat(nctx), list(rec.get("models") or []),
                           RESIDENT_START_TIMEOUT_S, on_log, since=since)
        return f"{rec['name']} {out}, image ID {rec['image_id'][:19]}… as recorded; {msg}"
    finally:
        client.close()


def _start_resident(nctx: NodeContext, ctx: RunContext, on_log: Callable[[str], None]) -> str:
    """Start the recorded resident (if not running) and verify it (image ID, serving)."""
    rec = ctx.facts.get("resident")
    if not rec:
        raise StepError("no recorded resident identity in this run's facts")
    return start_recorded(nctx, rec, on_log)


def verify_recorded(nctx: NodeContext, rec: Mapping[str, Any]) -> tuple[Any, str]:
    """Read back that the recorded container ``rec`` holds the seat as recorded: running, its
    image ID the recorded one, the seat's ``/health`` 200, ``/v1/models`` listing its first
    recorded model, and one real completion answered (:func:`completion`). Returns ``(the
    container, a sentence)``; raises :class:`StepError` naming what differs. The one verify of
    a put-back resident (``restore``, ``promote --undo``)."""
    c = _inspect_once(nctx, rec["id"])
    if not _running(c):
        raise StepError(f"{rec['name']} is not running")
    if c.attrs["Image"] != rec["image_id"]:
        raise StepError(f"{rec['name']} runs image {c.attrs['Image']}, recorded "
                        f"{rec['image_id']}")
    seat = _seat(nctx)
    if _health(seat) != 200:
        raise StepError(f"{seat}/health is not 200")
    models = _models(seat) or []
    if not rec.get("models") or rec["models"][0] not in models:
        raise StepError(f"/v1/models lists {models}, recorded {rec.get('models')}")
    done = completion(seat, rec["models"][0])
    return c, f"{rec['name']} image ID {c.attrs['Image']} as recorded, /health 200; {done}"


def stop_kept(nctx: NodeContext, refs: Sequence[str | None], stop_timeout_s: int | None = None,
              *, endpoint: str | None = None, facts: dict[str, Any] | None = None,
              absent: str = "not running") -> str:
    """Drain and stop — never remove — the first container of ``refs`` (IDs or names, ``None``
    skipped) that exists, if it runs; ``absent`` when none runs (idempotent). Its engine at
    ``endpoint`` (default the seat's) is drained first (:func:`stop_container`; stop timeout
    ``stop_timeout_s``, default its ``StopTimeout`` or 10 s); ``facts`` gets the drain's
    record as ``drain``. The one stop of a container the runbooks keep (``restore``'s and a
    swap's probe, ``promote --undo``'s promoted resident and its undo). Raises
    :class:`StepError` when it still runs after the stop."""
    client = _client(nctx)
    try:
        c = next((x for r in refs if r and (x := _inspect(client, r)) is not None), None)
        if not _running(c):
            return absent
        t = int(stop_timeout_s or (c.attrs.get("Config") or {}).get("StopTimeout") or 10)
        rec: dict[str, Any] = {}
        try:
            out = stop_container(client, c, t, nctx, endpoint=endpoint, record=rec)
        finally:
            if rec and facts is not None:
                facts["drain"] = rec
        c.reload()
        if _running(c):
            raise StepError(f"{c.name} still running after stop")
        return out + " (kept, not removed)"
    finally:
        client.close()


def _stop_probe(nctx: NodeContext, ctx: RunContext) -> str:
    """Stop (never remove) the probe container if it runs; idempotent."""
    return stop_kept(nctx, [ctx.facts.get("probe_id"), _swap_spec(nctx).container],
                     endpoint=_probe_endpoint(nctx), facts=ctx.facts,
                     absent="the probe container is not running")


def _seat_up(ctx: RunContext, started: datetime | None, image_id: str | None) -> str:
    """After the first verified completion on the engine that follows a drain: record the
    seat's downtime in the run's facts (:func:`seat_console.actions.drain.mark_up`) and return
    ``"; seat down 31.4 s"`` (``""`` when this run drained nothing, e.g. a recovered run)."""
    from seat_console.actions import drain as drain_mod

    if "downtime" in ctx.facts and ctx.facts["downtime"].get("down_at") == (
            ctx.facts.get("drain") or {}).get("down_at"):
        return f"; seat down {ctx.facts['downtime']['seconds']:.1f} s"
    words = drain_mod.mark_up(ctx.facts, started_at=started, image_id=image_id)
    return f"; {words}" if words else ""


# -- swap ------------------------------------------------------------------------------------------
def candidate_in_seat(nctx: NodeContext, journal: Journal) -> str | None:
    """When the candidate (the ``[swap]`` probe container) already holds the seat and the
    resident does not run: the refusal ``swap`` gives — that state (the swap run that started
    it, when journaled) and what to run next (probe, compare after a restore, restore) — else
    ``None`` (also when docker cannot be read: the swap's own checks say so). Reads only."""
    from seat_console.actions.gates import read_seat

    seat = read_seat(nctx)
    if seat.holder != "candidate":
        return None
    rows = last_swap(journal)
    by = (f", started by swap run {rows[0].run_id} at {hold_mod.zulu(rows[0].at)}"
          if rows is not None else "")
    return (f"the candidate {seat.probe} already holds the seat (running{by}; the resident "
            f"{seat.resident} is stopped): there is nothing to swap — next: measure it "
            "(`seat-console probe`), compare it with the resident (`seat-console restore`, "
            "then `seat-console compare`), or put the resident back (`seat-console restore`)")


def build_swap(nctx: NodeContext, journal: Journal, *, options: SwapOptions | None = None,
               observer: Observer | None = None, run_id: str | None = None,
               facts: dict[str, Any] | None = None, approval: bool = True) -> Runbook:
    """The swap runbook (module docstring). With ``[runbook] approvals = 2`` (and
    ``approval``), it waits for a second operator before any step
    (:func:`~seat_console.actions.approval.approval_gate`); a compare's swap legs pass
    ``approval=False`` (the compare was approved once)."""
    opts = options or SwapOptions()

    checked = [False]   # the first check passed (the plan's later lines read the node)

    def pre_check(ctx: RunContext) -> Check:
        # every gate that reads no container is asked, and all that refuse are named at once:
        # a dry run that named only the first sent the engineer back once per gate
        # (the candidate already in the seat is the state that makes the rest moot: alone)
        in_seat = candidate_in_seat(nctx, journal)
        if in_seat is not None:
            raise StepError(in_seat)
        problems: list[str] = []
        try:
            spec = _swap_spec(nctx)
        except StepError as exc:
            problems.append(str(exc))
        h = hold_mod.active_hold(journal)
        if h is None:
            problems.append("no active hold: place one first (`seat-console hold`) — the swap "
                            "stops the resident, and the fleet's timers and alerts must be held")
        if opts.force:
            if not opts.reason.strip():
                problems.append("--force needs --reason (it is journaled)")
            fit_text = f"fit check skipped (--force: {opts.reason})"
        else:
            try:
                fits, words = fit_verdict(nctx)
            except Exception as exc:  # noqa: BLE001
                fits, words = False, f"fit budget failed: {type(exc).__name__}: {exc}"
            if not fits:
                problems.append(f"the fit budget: {words} (or --force --reason '…')")
            fit_text = f"fit: {words}"
        if problems:   # the plan lists each on its own ✗ line; a run joins them
            raise Refusals(problems)
        assert h is not None
        ctx.facts["hold_id"] = h.hold_id
        if opts.force:
            ctx.facts["forced"] = opts.reason
        client = _client(nctx)
        try:
            res = _inspect(client, _resident_name(nctx))
            if not _running(res):
                raise StepError(f"the resident container {_resident_name(nctx)} is not running: "
                                "nothing to swap out")
            image_id, image_words = probe_image(nctx, client)
            gpus = gpu_uuids(nctx)
            old = _inspect(client, spec.container)
            if _running(old):
                raise StepError(f"a probe container {spec.container} is already running: "
                                "`seat-console restore` first")
        finally:
            client.close()
        ctx.facts.update(probe_image_id=image_id, gpus=gpus)
        checked[0] = True
        return Check(True, f"record {_resident_name(nctx)} (image ID "
                           f"{res.attrs['Image'][:19]}…); hold {h.hold_id} until "
                           f"{hold_mod.zulu(h.expires_at)}; {fit_text}; probe: {image_words}")

    def pre_apply(ctx: RunContext) -> str:
        client = _client(nctx)
        try:
            c = _inspect(client, _resident_name(nctx))
            if c is None:
                raise StepError(f"{_resident_name(nctx)} vanished")
            ctx.facts["resident"] = identity(c, _seat(nctx))
        finally:
            client.close()
        return "recorded " + ", ".join(f"{k}={v}" for k, v in ctx.facts["resident"].items()
                                       if k in ("id", "image_id", "image_ref", "models"))

    def pre_verify(ctx: RunContext) -> str:
        rec = ctx.facts.get("resident") or {}
        if not rec.get("id") or not rec.get("image_id"):
            raise StepError("the resident identity was not recorded")
        if not rec.get("models"):
            raise StepError(f"{rec.get('name')}: /v1/models listed no model before the swap: "
                            "is the resident serving?")
        return f"resident {rec['name']} = image ID {rec['image_id']}, models {rec['models']}"

    def stop_check(ctx: RunContext) -> Check:
        if ctx.planning and not checked[0]:   # after a refusal: what it would do
            return Check(True, f"stop {resident_or_profile(nctx)} after draining it")
        c = _inspect_once(nctx, _resident_name(nctx))
        if not _running(c):
            return Check(False, f"{_resident_name(nctx)} is already stopped")
        from seat_console.actions import drain as drain_mod

        forecast = drain_mod.forecast(journal, ctx.facts.get("probe_image_id"),
                                      nctx.profile.seat.drain_timeout_s)
        return Check(True, f"stop {_resident_name(nctx)} after draining it "
                           f"({drain_words(nctx, c)}); {forecast}")

    def stop_apply(ctx: RunContext) -> str:
        client = _client(nctx)
        try:
            c = _inspect(client, ctx.facts["resident"]["id"])
            if c is None:
                raise StepError("the resident container vanished")
            rec: dict[str, Any] = {}
            try:
                return stop_container(client, c, ctx.facts["resident"]["stop_timeout_s"], nctx,
                                      record=rec)
            finally:
                if rec:
                    ctx.facts["drain"] = rec
        finally:
            client.close()

    def stop_verify(ctx: RunContext) -> str:
        c = _inspect_once(nctx, ctx.facts["resident"]["id"])
        if _running(c):
            raise StepError(f"{_resident_name(nctx)} still running after stop")
        from seat_console.actions.drain import summary

        drained = summary(ctx.facts.get("drain"))
        return f"{_resident_name(nctx)} not running" + (f"; {drained}" if drained else "")

    def stop_undo(ctx: RunContext) -> str:
        return _start_resident(nctx, ctx, opts.on_log)

    def probe_check(ctx: RunContext) -> Check:
        spec = _swap_spec(nctx)
        image = ctx.facts.get("probe_image_id")
        client = _client(nctx)
        try:
            if image is None:
                image = probe_image(nctx, client)[0]
            old = _inspect(client, spec.container)
        finally:
            client.close()
        keep = ""
        ctx.facts.pop("probe_rename", None)
        if old is not None and not _running(old):
            # the rename is declared before the step begins: the begin row names the new name
            # and the old container's ID, so any console's watcher attributes the rename event
            # (its actor is the *new* name) to this step
            new_name = _kept_name(spec.container, old)
            ctx.facts["probe_rename"] = {"from": spec.container, "to": new_name,
                                         "id": old.id}
            keep = f"; keep the previous {spec.container} as {new_name}"
        return Check(True, f"start {spec.container} from image {image} with GPUs "
                           f"{gpu_uuids(nctx) or 'none'}{keep}")

    def probe_apply(ctx: RunContext) -> str:
        from docker.types import DeviceRequest

        spec = _swap_spec(nctx)
        client = _client(nctx)
        try:
            notes = []
            old = _inspect(client, spec.container)
            if old is not None:
                if _running(old):
                    raise StepError(f"{spec.container} is running (started by someone else?)")
                new_name = _kept_name(spec.container, old)
                _expect(nctx, spec.container, ("rename",))
                _expect(nctx, new_name, ("rename",))
                old.rename(new_name)
                notes.append(f"kept the previous probe container as {new_name}")
            kw: dict[str, Any] = dict(
                image=ctx.facts["probe_image_id"], name=spec.container, detach=True,
                command=list(spec.command) or None, environment=dict(spec.env),
                volumes=list(spec.volumes), network_mode=spec.network_mode,
                labels={SWAP_LABEL: ctx.run_id, "org.seat-console.role": "probe"})
            if spec.entrypoint is not None:
                kw["entrypoint"] = list(spec.entrypoint)
            if spec.ipc_mode:
                kw["ipc_mode"] = spec.ipc_mode
            if spec.shm_size is not None:
                kw["shm_size"] = int(spec.shm_size)
            if ctx.facts.get("gpus"):
                kw["device_requests"] = [DeviceRequest(driver="nvidia",
                                                       device_ids=ctx.facts["gpus"],
                                                       capabilities=[["gpu"]])]
            try:
                _expect(nctx, spec.container, ("create", "start"))
                c = client.containers.run(**kw)
            except Exception as exc:  # noqa: BLE001 - APIError, ImageNotFound
                raise StepError(f"start {spec.container}: {exc}") from None
            ctx.facts["probe_id"] = c.id
            c.reload()
            started = _started_at(c)
            ctx.facts["probe_started_at"] = hold_mod.iso(started) if started else None
            return "; ".join([*notes, f"started {spec.container} ({c.id[:12]})"])
        finally:
            client.close()

    def probe_verify(ctx: RunContext) -> str:
        client = _client(nctx)
        try:
            c = _inspect(client, ctx.facts["probe_id"])
            if c is None:
                raise StepError("the probe container vanished")
            if c.attrs["Image"] != ctx.facts["probe_image_id"]:
                raise StepError(f"the probe runs image {c.attrs['Image']}, not "
                                f"{ctx.facts['probe_image_id']}")
            if not _running(c):
                st = c.attrs.get("State", {})
                raise StepError(f"the probe exited at once (code {st.get('ExitCode')})",
                                _tail(_logs(c)))
        finally:
            client.close()
        return f"probe {ctx.facts['probe_id'][:12]} running image {ctx.facts['probe_image_id']}"

    def probe_undo(ctx: RunContext) -> str:
        return _stop_probe(nctx, ctx)

    def serve_check(ctx: RunContext) -> Check:
        spec = _swap_spec(nctx)
        return Check(True, f"wait ≤ {spec.start_timeout_s:.0f} s for /health 200 and "
                           f"/v1/models listing {spec.served_model_name}; scan the log for "
                           f"{', '.join(p.name for p in spec.failure_patterns) or 'no patterns'}")

    def serve_apply(ctx: RunContext) -> str:
        spec = _swap_spec(nctx)
        client = _client(nctx)
        try:
            c = _inspect(client, ctx.facts["probe_id"])
            if c is None:
                raise StepError("the probe container vanished")
            return wait_serving(c, _probe_endpoint(nctx), [spec.served_model_name],
                                spec.start_timeout_s, opts.on_log, spec.failure_patterns)
        finally:
            client.close()

    def serve_verify(ctx: RunContext) -> str:
        spec = _swap_spec(nctx)
        client = _client(nctx)
        try:
            c = _inspect(client, ctx.facts["probe_id"])
            log = _logs(c) if c is not None else ""
        finally:
            client.close()
        bad = scan_failures(log, spec.failure_patterns)
        if bad:
            raise StepError("failure pattern(s) in the probe's log: " + "; ".join(
                f"{m.name} (line {m.line_no}: {m.line[:160]})" for m in bad[:3]), _tail(log))
        facts = parse_startup_log(log, block_size=nctx.profile.seat.block_size)
        ctx.facts["probe_startup"] = facts.model_dump()
        kv = (f"KV cache {facts.kv_cache_tokens:,} tokens" if facts.kv_cache_tokens is not None
              else "KV cache size not in the log")
        conc = (f", max concurrency {facts.max_concurrency:.2f}x at "
                f"{facts.concurrency_tokens_per_request:,} tokens"
                if facts.max_concurrency is not None and facts.concurrency_tokens_per_request
                else "")
        done = completion(_probe_endpoint(nctx), spec.served_model_name)
        started = None
        if ctx.facts.get("probe_started_at"):
            from seat_console.actions.drain import parse_iso

            started = parse_iso(ctx.facts["probe_started_at"])
        return (f"probe serving; {kv}{conc}; no failure pattern matched; {done}"
                + _seat_up(ctx, started, ctx.facts.get("probe_image_id")))

    steps = [
        Step("record resident", pre_check, pre_apply, pre_verify, None),
        Step("stop resident", stop_check, stop_apply, stop_verify, stop_undo,
             manual=lambda ctx: f"docker start {(ctx.facts.get('resident') or {}).get('name')}",
             acts_on=lambda ctx: [_resident_name(nctx)]),
        Step("start probe", probe_check, probe_apply, probe_verify, probe_undo,
             manual=lambda ctx: f"docker stop {_swap_spec(nctx).container} (keep it)",
             acts_on=lambda ctx: [_swap_spec(nctx).container,
                                  *(ctx.facts.get("probe_rename") or {}).values()]),
        Step("probe serving", serve_check, serve_apply, serve_verify, None,
             acts_on=lambda ctx: [_swap_spec(nctx).container]),
    ]
    from seat_console.actions.approval import approval_gate

    spec = nctx.profile.runbook
    gate = (approval_gate(journal, "swap", spec.approvals, spec.approval_timeout_s)
            if approval and journal is not None else None)
    return Runbook("swap", steps, journal=journal, observer=observer, policy="undo",
                   gates=[gate] if gate is not None else [],
                   inputs={"force": opts.force, "reason": opts.reason,
                           "resident": resident_or_profile(nctx),
                           "probe": (nctx.profile.swap.container if nctx.profile.swap else None)},
                   facts=facts, run_id=run_id, profile_sha256=nctx.loaded.sha256)


KEEP_PROBE_CONTAINERS = 3
"""How many *kept* probe containers (stopped, renamed ``<probe>-<finished>Z-<id>`` by a later
swap) the restore keeps, newest first; the older ones are removed by the restore's journaled
``prune kept probes`` step. The current probe container (the profile's ``[swap] container``
name), any running container and the resident are never removed; images are never removed."""


def kept_probes(nctx: NodeContext, client: Any) -> list[Any]:
    """The kept probe containers on the engine, newest finished first: label
    ``org.seat-console.role=probe``, named ``<[swap] container>-…``, not running, not the
    resident."""
    spec = _swap_spec(nctx)
    keep = protected_names(nctx)
    if "*" in keep:      # the seat-state file is unreadable: which container is kept is unknown
        return []
    out = []
    for c in client.containers.list(all=True, filters={"label": "org.seat-console.role=probe"}):
        if (c.name.startswith(f"{spec.container}-") and c.name != spec.container
                and c.name not in keep and c.id not in keep and not _running(c)):
            out.append(c)
    return sorted(out, key=lambda c: c.attrs.get("State", {}).get("FinishedAt", ""),
                  reverse=True)


def _prune_step(nctx: NodeContext, keep: int = KEEP_PROBE_CONTAINERS) -> Step:
    """Restore's ``prune kept probes``: remove kept probe containers beyond the newest
    ``keep`` (:data:`KEEP_PROBE_CONTAINERS`); journaled, each removed one named."""
    def doomed(ctx: RunContext) -> list[Any]:
        if nctx.profile.swap is None:
            return []
        client = _client(nctx)
        try:
            return kept_probes(nctx, client)[keep:]
        finally:
            client.close()

    def check(ctx: RunContext) -> Check:
        try:
            old = doomed(ctx)
        except Exception as exc:  # noqa: BLE001 - the engine unreadable: prune nothing
            return Check(False, f"skip pruning kept probe containers: cannot list them ({exc})")
        ctx.facts["prune"] = [{"name": c.name, "id": c.id} for c in old]
        if not old:
            return Check(False, f"keep every kept probe container (at most {keep} are kept)")
        return Check(True, f"remove {len(old)} kept probe container(s) beyond the newest {keep}"
                           f": {', '.join(c.name for c in old)} (their images stay)")

    def apply(ctx: RunContext) -> str:
        client = _client(nctx)
        done = []
        try:
            for item in ctx.facts.get("prune") or []:
                c = _inspect(client, item["id"])
                if c is None:
                    continue
                keep = protected_names(nctx)
                if _running(c) or "*" in keep or c.name == _swap_spec(nctx).container or (
                        c.name in keep or c.id in keep):
                    raise StepError(f"{c.name} is running or is the probe/resident now: not "
                                    "removed")
                _expect(nctx, c.name, ("destroy",))
                c.remove()
                done.append(c.name)
        finally:
            client.close()
        return f"removed {', '.join(done) or 'none'}"

    def verify(ctx: RunContext) -> str:
        client = _client(nctx)
        try:
            left = [i["name"] for i in ctx.facts.get("prune") or []
                    if _inspect(client, i["id"]) is not None]
        finally:
            client.close()
        if left:
            raise StepError(f"still present: {', '.join(left)}")
        return f"{len(ctx.facts.get('prune') or [])} kept probe container(s) removed"

    return Step("prune kept probes", check, apply, verify, None,
                manual="docker rm <the kept probe containers named above>",
                acts_on=lambda ctx: [x for i in ctx.facts.get("prune") or []
                                     for x in (i["name"], i["id"])])


def _kept_name(container: str, old: Any) -> str:
    """``<name>-<finished UTC, YYYYmmddTHHMMSS>Z-<id[:6]>``: the name a stopped probe container
    is kept under when the next swap starts a new one."""
    fin = old.attrs.get("State", {}).get("FinishedAt", "")[:19].replace(":", "")
    return f"{container}-{fin.replace('-', '')}Z-{old.id[:6]}"


# -- restore ---------------------------------------------------------------------------------------
def last_swap(journal: Journal) -> list[Entry] | None:
    """The newest ``swap`` run that recorded a resident identity (its rows), or ``None``."""
    best: list[Entry] | None = None
    for rows in journal.runs().values():
        if rows and rows[0].runbook == "swap" and facts_from_rows(rows).get("resident"):
            if best is None or rows[0].at >= best[0].at:
                best = rows
    return best


class NothingToRestore(StepError):
    """``restore`` has nothing to do: the resident holds the seat and no swap needs undoing
    (the message says so). A :class:`StepError`, so older callers still refuse cleanly."""


def seat_state(nctx: NodeContext) -> tuple[bool | None, bool | None, str | None]:
    """Whether the resident and the probe container run now: ``(resident, probe, problem)``;
    ``None`` and the reason in ``problem`` when docker cannot be read (read only). A node
    without the engine's socket is said so without importing the docker SDK
    (``NodeContext.docker``: the TUI's runbook reader asks this at every read)."""
    from seat_console.node.docker import docker_error_sentence

    host = nctx.profile.node.docker_host
    try:
        client = _client(nctx)
    except Exception as exc:  # noqa: BLE001 - unknown state, said so
        return None, None, docker_error_sentence(exc, host)
    try:
        res = _running(_inspect(client, _resident_name(nctx)))
        spec = nctx.profile.swap
        probe = _running(_inspect(client, spec.container)) if spec is not None else False
        return res, probe, None
    except Exception as exc:  # noqa: BLE001
        return None, None, docker_error_sentence(exc, host)
    finally:
        client.close()


def no_swap_error(resident: str, probe: str | None, resident_running: bool | None,
                  probe_running: bool | None, problem: str | None = None) -> StepError:
    """The error ``restore`` raises when no swap in the journal recorded a resident, worded by
    who holds the seat now: :class:`NothingToRestore` when the resident runs and the probe does
    not; otherwise a :class:`StepError` saying what to do by hand."""
    base = "no swap in the journal recorded a resident"
    p = probe or "the probe"
    if resident_running and not probe_running:
        return NothingToRestore(f"the resident {resident} holds the seat (running; {p} is not "
                                "running) and no swap is recorded: nothing to restore")
    if resident_running is None:
        return StepError(f"{base}, and whether {resident} runs cannot be read ({problem}): "
                         f"nothing to restore from; check with `docker ps`")
    if resident_running and probe_running:
        return StepError(f"{base}, but both {resident} and {p} are running: stop {p} by hand "
                         f"(`docker stop {p}`) if it should not hold the seat")
    if probe_running:
        return StepError(f"{base} (swapped by another console or by hand?): {p} holds the "
                         f"seat and {resident} is stopped; start the resident by hand: "
                         f"`docker stop {p}` then `docker start {resident}`")
    return StepError(f"{base} and {resident} is not running: nothing to restore from; start "
                     f"the resident by hand: `docker start {resident}`")


def build_restore(nctx: NodeContext, journal: Journal, *, on_log: Callable[[str], None] =
                  lambda line: None, observer: Observer | None = None,
                  run_id: str | None = None, facts: dict[str, Any] | None = None,
                  defer: dict[str, datetime] | None = None,
                  defer_firing: datetime | None = None, keep_hold: bool = False) -> Runbook:
    """The restore runbook (module docstring); raises :class:`StepError` when no swap recorded
    a resident identity (nothing to restore from) — :class:`NothingToRestore` when the
    resident holds the seat now (:func:`no_swap_error`; reads docker, changes nothing).

    Its plan says first when it takes the seat down without a hold
    (:func:`~seat_console.actions.gates.downtime_gate`), and its ``release hold`` line is the
    release's own plan: each timer that fires the moment it is started is named with the time
    (the facts' ``forecast``, as :func:`~seat_console.actions.hold.build_release` plans it).
    ``defer`` / ``defer_firing``: passed to the release (keep a timer stopped until then; a
    transient timer on the node starts it). Raises :class:`ValueError` for a ``defer`` timer
    the current hold did not stop.

    ``keep_hold``: put the resident back and keep the hold (journaled in the run's inputs,
    ``keep_hold: true``): its last step is ``keep hold`` — the hold must be active when
    planned and still active after (its lease still ends it at ``expires_at``) — instead of
    ``release hold``, so the cycle stays open: a swap made before the compare is undone and
    the compare, which starts from the resident, can run under the same hold
    (:func:`seat_console.actions.stages.read_runbook` reads that swap as to be done again).
    Raises :class:`ValueError` with ``defer`` / ``defer_firing`` (they belong to a release)."""
    fresh = facts is None    # not a recovery (rebuild): only a fresh run is gated on the hold
    if keep_hold and (defer or defer_firing is not None):
        raise ValueError("--defer and --defer-firing plan the hold's release; --keep-hold "
                         "releases nothing: leave them out, or restore without --keep-hold")
    if defer and facts is None:
        cur = hold_mod.current_hold(journal)
        for u in defer:
            if cur is None or u not in cur.stopped:
                raise ValueError(f"--defer {u}: " + (
                    "there is no hold to release" if cur is None else
                    f"hold {cur.hold_id} did not stop it (it stopped "
                    f"{', '.join(cur.stopped) or 'none'})"))
    if facts is None:
        rows = last_swap(journal)
        sf = seat_file(nctx)
        if rows is not None and sf is not None and sf.swap_run_id == rows[0].run_id:
            # that swap's candidate was promoted (`seat-console promote`): it is the resident
            # now, so that swap has nothing left to restore
            rows = None
        if rows is None:
            res, probe, problem = seat_state(nctx)
            raise no_swap_error(resident_or_profile(nctx) or "the resident",
                                nctx.profile.swap.container if nctx.profile.swap else None,
                                res, probe, problem)
        prev = facts_from_rows(rows)
        facts = {"resident": prev["resident"], "probe_id": prev.get("probe_id"),
                 "swap_run_id": rows[0].run_id}

    def probe_check(ctx: RunContext) -> Check:
        c = _inspect_once(nctx, ctx.facts.get("probe_id") or _swap_spec(nctx).container)
        if not _running(c):
            return Check(False, "the probe container is not running")
        from seat_console.actions import drain as drain_mod

        forecast = drain_mod.forecast(journal, (ctx.facts.get("resident") or {}).get("image_id"),
                                      nctx.profile.seat.drain_timeout_s)
        return Check(True, f"stop the probe {c.name} ({c.id[:12]}) after draining it "
                           f"({drain_words(nctx, c, _probe_endpoint(nctx))}) and keep it; "
                           f"{forecast}")

    def probe_verify(ctx: RunContext) -> str:
        c = _inspect_once(nctx, ctx.facts.get("probe_id") or _swap_spec(nctx).container)
        if _running(c):
            raise StepError("the probe is still running")
        from seat_console.actions.drain import summary

        drained = summary(ctx.facts.get("drain"))
        return ("probe stopped" + (" and kept" if c is not None else "")
                + (f"; {drained}" if drained else ""))

    def res_check(ctx: RunContext) -> Check:
        rec = ctx.facts["resident"]
        c = _inspect_once(nctx, rec["id"])
        if c is None:
            raise StepError(f"the recorded resident container {rec['name']} ({rec['id'][:12]}) "
                            "is gone: recreate it by hand from the journal's identity")
        what = "verify" if _running(c) else "start"
        return Check(True, f"{what} {rec['name']} as recorded (image ID {rec['image_id'][:19]}…)")

    def res_apply(ctx: RunContext) -> str:
        return _start_resident(nctx, ctx, on_log)

    def res_verify(ctx: RunContext) -> str:
        rec = ctx.facts["resident"]
        c, done = verify_recorded(nctx, rec)
        return done + _seat_up(ctx, _started_at(c), rec["image_id"])

    def rel_check(ctx: RunContext) -> Check:
        h = hold_mod.current_hold(journal)
        if h is None:
            return Check(False, "no hold to release")
        ctx.facts["hold_id"] = h.hold_id
        # the release's own plan (the seat gate left out: the resident is put back first)
        rel = hold_mod.build_release(nctx, journal, h, defer=defer, defer_firing=defer_firing,
                                     check_seat=False)
        plan = rel.plan()
        ctx.facts["forecast"] = dict(rel.ctx.facts.get("forecast") or {})
        err = next((x for x in plan.lines if x.error), None)
        if err is not None:
            raise StepError(f"the release of hold {h.hold_id} would refuse: {err.step}: "
                            f"{err.error}")
        parts = [x.text.replace("seat-console release --defer", "seat-console restore --defer")
                 for x in plan.lines]
        return Check(True, f"release hold {h.hold_id}: " + "; ".join(parts))

    def rel_apply(ctx: RunContext) -> str:
        h = hold_mod.current_hold(journal)
        if h is None:
            return "the hold was released meanwhile"
        res = hold_mod.build_release(nctx, journal, h, observer=observer, defer=defer,
                                     defer_firing=defer_firing).run()
        ctx.facts["release_run_id"] = res.run_id
        if not res.ok:
            raise StepError(f"release {res.outcome}: {res.describe()}")
        return res.describe()

    def rel_verify(ctx: RunContext) -> str:
        hid = ctx.facts.get("hold_id")
        state = next((h.state for h in hold_mod.holds(journal) if h.hold_id == hid), None)
        if state not in ("released", None):
            raise StepError(f"hold {hid} is {state} after the release")
        return f"hold {hid} released (timers verified active, silence expired, lease cancelled)"

    def active_to_keep() -> hold_mod.HoldState:
        h = hold_mod.current_hold(journal)
        if h is None or h.state != "active" or h.remaining_s() <= 0:
            raise StepError("there is no active hold to keep" + (
                "" if h is None else f" (hold {h.hold_id} is "
                + (h.state if h.state != "active" else "past its end") + ")")
                + ": restore without --keep-hold (the seat goes back and the cycle closes), "
                  "or place a hold first")
        return h

    def keep_gate(ctx: RunContext) -> None:
        # read right before the first step acts: nothing is stopped when there is no hold (a
        # hold in effect says nothing here: a gate's text is a warning; `keep hold` says it)
        active_to_keep()

    def keep_check(ctx: RunContext) -> Check:
        h = active_to_keep()
        ctx.facts["hold_id"] = h.hold_id
        until = f"{h.expires_at.astimezone(UTC):%Y-%m-%d %H:%M}Z"
        return Check(True, f"keep hold {h.hold_id} until {until} (timers stay "
                           "stopped, the silence stays; the compare can run under it, and "
                           "`seat-console release` ends it)")

    def keep_verify(ctx: RunContext) -> str:
        hid = ctx.facts.get("hold_id")
        h = hold_mod.current_hold(journal)
        if h is None or h.hold_id != hid or h.state != "active":
            raise StepError(f"hold {hid} is "
                            + ("gone" if h is None or h.hold_id != hid else h.state)
                            + " after the restore: check `seat-console hold --status`")
        return f"hold {hid} kept, active until {h.expires_at.astimezone(UTC):%H:%M}Z"

    last = (Step("keep hold", keep_check, lambda ctx: "kept", keep_verify, None,
                 manual="seat-console release (when the hold is no longer needed)")
            if keep_hold else
            Step("release hold", rel_check, rel_apply, rel_verify, None,
                 manual="seat-console release"))
    steps = [
        Step("stop probe", probe_check, lambda ctx: _stop_probe(nctx, ctx), probe_verify, None,
             acts_on=lambda ctx: [_swap_spec(nctx).container]),
        Step("start resident", res_check, res_apply, res_verify, None,
             manual=lambda ctx: f"docker start {ctx.facts['resident']['name']}; check /health",
             acts_on=lambda ctx: [(ctx.facts.get("resident") or {}).get("name")
                                  or _resident_name(nctx)]),
        _prune_step(nctx),
        last,
    ]
    from seat_console.actions.gates import downtime_gate

    inputs: dict[str, Any] = {"swap_run_id": facts.get("swap_run_id")}
    if keep_hold:
        inputs["keep_hold"] = True
    if defer:
        inputs["defer"] = {u: hold_mod.iso(t) for u, t in defer.items()}
    if defer_firing is not None:
        inputs["defer_firing"] = hold_mod.iso(defer_firing)
    return Runbook("restore", steps, journal=journal, observer=observer, policy="continue",
                   inputs=inputs, facts=facts, run_id=run_id,
                   profile_sha256=nctx.loaded.sha256,
                   gates=[downtime_gate(nctx, lambda: hold_mod.hold_in_effect(nctx, journal),
                                        "restore",
                                        "stops the candidate and starts the resident"),
                          *([keep_gate] if keep_hold and fresh else [])])


def rebuild(nctx: NodeContext, journal: Journal, rows: Sequence[Entry],
            observer: Observer | None = None) -> Runbook:
    """For ``recover``: the ``swap`` or ``restore`` runbook of an unfinished run, with its
    run ID and facts (``swap``: undo; ``restore``: complete). Raises :class:`ValueError` for
    another runbook."""
    first = rows[0]
    facts = facts_from_rows(rows)
    if first.runbook == "swap":
        opts = SwapOptions(force=bool(first.inputs.get("force")),
                           reason=str(first.inputs.get("reason", "")))
        return build_swap(nctx, journal, options=opts, observer=observer,
                          run_id=first.run_id, facts=facts)
    if first.runbook == "restore":
        when = hold_mod._from_iso
        defer = {str(u): t for u, v in (first.inputs.get("defer") or {}).items()
                 if (t := when(v)) is not None}
        return build_restore(nctx, journal, observer=observer, run_id=first.run_id,
                             facts=facts, defer=defer or None,
                             defer_firing=when(first.inputs.get("defer_firing")),
                             keep_hold=first.inputs.get("keep_hold") is True)
    raise ValueError(f"swap.rebuild: {first.runbook!r} is not a swap or restore run")


__all__ = ["NothingToRestore", "SwapOptions", "build_restore", "build_swap",
           "candidate_in_seat", "completion",
           "STOP_WAYS", "docker_stop", "drain_words", "fit_verdict",
           "gpu_uuids", "identity", "last_swap", "probe_image", "protected_names", "rebuild",
           "resident_name", "resident_or_profile", "seat_file",
           "start_recorded", "stop_container", "stop_kept", "verify_recorded", "wait_serving"]

