"""Drain the seat's engine before it is stopped, and measure how long the seat is down.

**Drain** (:func:`drain_plan`, :func:`drain_and_stop`; called by ``swap``'s *stop resident*,
``restore``'s *stop probe* and every ``compare`` leg through
:func:`seat_console.actions.swap.stop_container`):

1. The plan reads the engine's ``/metrics`` (requests running + waiting now) and whether the
   engine offers ``POST /pause``: vLLM mounts ``/pause``, ``/resume`` and ``/is_paused``
   (``entrypoints/rl/online/api_router.py``) and ``/sleep``, ``/wake_up``, ``/is_sleeping``
   (``entrypoints/serve/dev/sleep/api_router.py``) only when the server runs with
   ``VLLM_SERVER_DEV_MODE=1`` (``entrypoints/launchers/api_server/routers.py``,
   ``register_api_routers``: ``if envs.VLLM_SERVER_DEV_MODE``; 0.32.0 and 0.34.0 alike). The
   console asks ``GET /is_paused``: 200 = offered, 404 = not.
2. **Offered**: first the requests *waiting* when the drain starts are let reach a slot: the
   console polls ``/metrics`` until ``vllm:num_requests_waiting`` is 0 (the queue is FIFO, so
   every request queued before the drain has been scheduled), for at most half the bound (no
   read after it; :func:`_wait_queue_empty` says what the gauge counts), because a paused engine never
   schedules a queued request (below). Then ``POST /pause?mode=wait`` (``AsyncLLM.
   pause_generation``) with a client timeout of what is left of the bound (``[seat]
   drain_timeout_s``, default 60 s): it returns once the running requests finished. The
   requests still running when it returns or the bound passes, and those queued while paused,
   are **cut** by the stop: counted (``left_running``, ``queued_while_paused``) and journaled.
   If the pause call fails (an HTTP error other than a timeout) or the stop that follows fails,
   ``POST /resume`` undoes the pause and the error says so.
3. **Not offered**: SIGTERM (the stop, 5.) with a stop timeout of at least the engine's
   ``--shutdown-timeout`` plus :data:`STOP_MARGIN_S`. vLLM's ``--shutdown-timeout`` (``engine/
   arg_utils.py``, default 0; ``v1/engine/core.py`` ``EngineCore._handle_shutdown``): 0 aborts
   every unfinished request at SIGTERM (``mode=abort``), N > 0 lets them finish for up to N s
   (``mode=drain``). With 0 the plan says how many requests the stop would abort.
4. ``drain_timeout_s = 0`` turns the drain off (``mode`` ``off``): the stop at once, with the
   caller's stop timeout; the downtime still measured.
5. **The stop** (:func:`seat_console.actions.swap.docker_stop` with the engine's endpoint) ends
   as soon as the engine has let go of the seat: SIGTERM, then SIGKILL at once when a TCP
   connect to the engine's listener is refused — vLLM closes its listener only after its
   engine has shut down (below) — or when the container has not exited by the stop timeout;
   no SIGKILL when it exits by itself. How it ended goes into the record's ``stop`` (``way``,
   ``words``: "exited by itself", "listener closed after 0.1 s, then SIGKILL", "SIGKILL at the
   stop timeout"; ``stop_s``, ``listener_closed_s``, ``exit_code``) and the step's sentence.
   Where the endpoint is not known, or its listener did not accept before the stop: the plain
   ``docker stop``.

**What the engine does to each request** (read in vLLM's source, 0.32.0 — the lab's — and
0.33.0 / 0.34.0 where they differ):

- *pause, mode=wait* (``v1/engine/core.py`` ``EngineCore.pause_scheduler``,
  ``v1/core/sched/scheduler.py`` ``PauseState.PAUSED_NEW``): running requests keep stepping
  to the end; a request *waiting* for a slot is not scheduled (only those already holding KV
  blocks are) and stays queued until ``/resume``; the pause returns when no running request
  is left (``get_num_unfinished_requests`` leaves the queued ones out). *New connections and
  requests*: 0.32.0 accepts them (the HTTP server answers 200 and starts the stream) and
  queues them — so a stop after the pause cuts them; 0.33.0 and 0.34.0 reject them at once
  with a retryable error (``EngineCore._reject_add_while_paused``: ``engine_paused``, HTTP 503
  for a plain request, an error event with code 503 in a stream), so nothing is queued.
- *SIGTERM* (``entrypoints/launchers/launcher.py`` ``serve_http``, 0.32.0–0.34.0 alike): the
  API server's handler first shuts the engine down (``engine_client.shutdown(timeout=
  shutdown_timeout)``) and only then tells uvicorn to exit, so the listener keeps accepting
  connections while the engine stops: with ``--shutdown-timeout N`` a request arriving during
  the drain is answered 200 and aborted (``EngineCore._reject_add_in_shutdown``); with 0 the
  engine process is force-killed at once and the listener closes ~0.1 s later (the lab), a
  request in between getting HTTP 500 (``EngineDeadError``). uvicorn then waits for the open
  connections — whose engine is gone — which under a client load lasted until docker's
  SIGKILL at the stop timeout (exit 137, the full stop timeout of downtime: the lab, 15 s);
  hence the stop's rule (5.): the listener refused, SIGKILL at once.
- So on 0.32.0 no sequence of pause, ``--shutdown-timeout`` and SIGTERM stops admission before
  the engine stops: under a steady load the requests that arrive after the pause (about one per
  client connection that keeps sending) are accepted, queued and cut, and the engine's
  ``/metrics`` may not show them (a paused, idle scheduler publishes no counts). Every request
  admitted *before* the drain finishes. On 0.33.0+ the pause itself refuses the newcomers with
  a retryable 503, and a drained stop loses nothing a caller had admitted.

**Downtime**: :func:`mark_down` records when the seat stopped admitting (the pause, else the
stop); :func:`mark_up` when the first completion was verified on the engine that follows;
``facts["downtime"] = {"down_at", "up_at", "seconds", "start_s", "image_id"}`` is journaled with
the run. :func:`last_downtime` reads the newest from the journal; :func:`forecast` the plan's
estimate from the last measured start of that image on this node.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from seat_console.actions.journal import Journal
from seat_console.actions.runbook import StepError, facts_from_rows
from seat_console.core.base import utcnow
from seat_console.core.untrusted import InputError
from seat_console.node.engine_client import IS_PAUSED, EngineClient, EngineError
from seat_console.sources.engine import parse_flag, parse_metrics, parse_version

STOP_MARGIN_S = 15
"""Seconds added to the engine's ``--shutdown-timeout`` for the container's stop timeout (the
API server and the engine processes exit after the drain; vLLM ``entrypoints/cli/serve.py``)."""
DEFAULT_STOP_TIMEOUT_S = 10
"""docker's stop timeout when the container sets none."""
DOWNTIME_RUNBOOKS = ("swap", "restore", "compare", "promote-undo")
"""The runbooks whose facts may carry a ``downtime`` record."""


@dataclass(frozen=True)
class DrainPlan:
    """What a drain will do: ``endpoint``; ``running`` / ``waiting`` requests now (``None``:
    unknown — ``/metrics`` not read); ``pause`` whether ``POST /pause`` is offered (``None``:
    the engine did not answer); ``bound_s`` the drain bound (s); ``shutdown_timeout_s`` the
    engine's ``--shutdown-timeout`` (s; ``None`` when its argv says something unreadable);
    ``stop_timeout_s`` the stop timeout the stop will use (s); ``problem`` why a reading is
    missing; ``newcomers`` what this engine's version does to a request arriving while paused
    (:func:`newcomers_while_paused`: ``"queued"``, ``"refused"``, ``None`` unknown)."""

    endpoint: str
    running: float | None
    waiting: float | None
    pause: bool | None
    bound_s: float
    shutdown_timeout_s: int | None
    stop_timeout_s: int
    problem: str | None = None
    newcomers: str | None = None

    @property
    def in_flight(self) -> float | None:
        """running + waiting, ``None`` when either is unknown."""
        if self.running is None or self.waiting is None:
            return None
        return self.running + self.waiting

    def words(self) -> str:
        """The plan line: the requests now, how admission stops, the bound, the stop timeout."""
        now = ("requests now: unknown" + (f" ({self.problem})" if self.problem else "")
               if self.in_flight is None else
               f"requests now: {self.running:.0f} running + {self.waiting:.0f} waiting")
        if self.bound_s <= 0:
            return (f"{now}; drain off ([seat] drain_timeout_s = 0): the stop at once, no "
                    "drain; the requests in flight are cut")
        if self.pause:
            how = (f"drain: wait for the queue to reach a slot, POST /pause?mode=wait, then "
                   f"wait for the running ones to finish, {self.bound_s:g} s in all (those left "
                   f"at the bound are cut and counted); stop timeout {self.stop_timeout_s} s")
            how += {"queued": "; this engine (vLLM < 0.33) accepts and queues requests that "
                              "arrive while paused: they are cut at the stop (about one per "
                              "client connection that keeps sending)",
                    "refused": "; this engine (vLLM ≥ 0.33) refuses requests that arrive "
                               "while paused with a retryable 503"}.get(self.newcomers or "",
                                                                       "")
        else:
            sd = self.shutdown_timeout_s
            off = "not offered" if self.pause is False else "not known (engine not answering)"
            how = (f"drain: /pause {off}; SIGTERM with stop timeout {self.stop_timeout_s} s "
                   f"(≥ the engine's --shutdown-timeout "
                   f"{'unknown' if sd is None else f'{sd} s'} + {STOP_MARGIN_S} s)")
            if sd == 0:
                n = "the" if self.in_flight is None else f"{self.in_flight:.0f}"
                how += (f"; --shutdown-timeout 0 aborts {n} request(s) in flight at SIGTERM "
                        "(set --shutdown-timeout or VLLM_SERVER_DEV_MODE=1 to drain)")
        return f"{now}; {how}"


_FLAG = "--shutdown-timeout"


def shutdown_timeout_of(argv: Sequence[Any] | None) -> int | None:
    """The engine's ``--shutdown-timeout`` in ``argv`` (the container's entrypoint + cmd; either
    ``--shutdown-timeout N`` or ``--shutdown-timeout=N``, the last one wins as argparse does):
    0 when absent (vLLM's default, ``engine/arg_utils.py``); ``None`` (unknown) when the value
    is not a non-negative integer or the flag ends the list. Never raises for odd input (items
    that are not strings are skipped)."""
    out: int | None = 0
    items = [a for a in (argv or []) if isinstance(a, str)]
    for i, a in enumerate(items):
        val: str | None
        if a == _FLAG:
            val = items[i + 1] if i + 1 < len(items) else None
        elif a.startswith(_FLAG + "="):
            val = a[len(_FLAG) + 1:]
        else:
            continue
        out = int(val) if val is not None and re.fullmatch(r"[0-9]{1,7}", val) else None
    return out


def stop_timeout_for(container_stop_timeout_s: int | None, shutdown_timeout_s: int | None) -> int:
    """The stop timeout (s): the container's own (default :data:`DEFAULT_STOP_TIMEOUT_S`), at
    least the engine's ``--shutdown-timeout`` + :data:`STOP_MARGIN_S` (an unknown one counts
    as 0)."""
    own = int(container_stop_timeout_s or DEFAULT_STOP_TIMEOUT_S)
    return max(own, int(shutdown_timeout_s or 0) + STOP_MARGIN_S)


def _argv(c: Any) -> list[Any]:
    cfg = c.attrs.get("Config") or {}
    return [*(cfg.get("Entrypoint") or []), *(cfg.get("Cmd") or [])]


def read_queue(endpoint: str, timeout_s: float = 3.0) -> tuple[float | None, float | None, str | None]:
    """``(running, waiting, problem)`` from ``endpoint``'s ``/metrics``; ``None`` and the reason
    when it cannot be read or does not expose the metric (unknown, never 0)."""
    try:
        with EngineClient(endpoint, timeout_s) as client:
            r = client.metrics()
    except EngineError as exc:
        return None, None, str(exc)
    if r.status != 200:
        return None, None, f"/metrics: HTTP {r.status}"
    try:
        m = parse_metrics(r.text)
    except ValueError as exc:
        return None, None, str(exc)[:200]
    return m.requests_running, m.requests_waiting, None


def pause_offered(endpoint: str, timeout_s: float = 3.0) -> bool | None:
    """Whether ``endpoint`` offers ``/pause``: ``GET /is_paused`` 200 with ``{"is_paused":
    bool}`` → ``True``; 404/405 → ``False``; no answer or another answer → ``None``."""
    try:
        with EngineClient(endpoint, timeout_s) as client:
            r = client.flag(IS_PAUSED)
    except EngineError:
        return None
    if r.status in (404, 405):
        return False
    if r.status != 200:
        return None
    try:
        parse_flag(r.body, IS_PAUSED, "is_paused")
    except InputError:
        return None
    return True


_VERSION = re.compile(r"v?([0-9]{1,4})\.([0-9]{1,4})(?![0-9])")


def newcomers_while_paused(version: Any) -> str | None:
    """What vLLM ``version`` (``GET /version``'s ``version``: ``"0.32.0"``, ``"0.33.1.dev4+g…"``)
    does to a request that arrives while it is paused (``POST /pause?mode=wait``):
    ``"queued"`` below 0.33 (accepted, answered 200 and queued; a stop cuts it — 0.32.0
    ``v1/core/sched/scheduler.py`` ``PauseState.PAUSED_NEW``), ``"refused"`` from 0.33 on (a
    retryable 503, ``v1/engine/core.py`` ``EngineCore._reject_add_while_paused``; a
    pre-release of 0.33 counts as 0.33), ``None`` when ``version`` is not a string starting
    ``MAJOR.MINOR``. Never raises."""
    if not isinstance(version, str) or len(version) > 200:
        return None
    m = _VERSION.match(version.strip())
    if m is None:
        return None
    return "refused" if (int(m[1]), int(m[2])) >= (0, 33) else "queued"


def engine_version(endpoint: str, timeout_s: float = 3.0) -> str | None:
    """``GET /version``'s ``version`` string (:func:`seat_console.sources.engine.parse_version`),
    ``None`` when not read (unknown)."""
    try:
        with EngineClient(endpoint, timeout_s) as client:
            r = client.version()
        if r.status != 200:
            return None
        return parse_version(r.body)
    except (EngineError, InputError):
        return None


def drain_plan(c: Any, endpoint: str, bound_s: float) -> DrainPlan:
    """The plan for draining container ``c`` serving at ``endpoint`` (reads only)."""
    sd = shutdown_timeout_of(_argv(c))
    own = (c.attrs.get("Config") or {}).get("StopTimeout")
    running, waiting, problem = read_queue(endpoint)
    return DrainPlan(endpoint=endpoint, running=running, waiting=waiting,
                     pause=pause_offered(endpoint), bound_s=float(bound_s),
                     shutdown_timeout_s=sd,
                     stop_timeout_s=stop_timeout_for(own if isinstance(own, int) else None, sd),
                     problem=problem, newcomers=newcomers_while_paused(engine_version(endpoint)))


def _resume(endpoint: str) -> str:
    try:
        with EngineClient(endpoint, 10.0) as client:
            r = client.resume()
    except EngineError as exc:
        return f"POST /resume failed ({exc.problem}): resume by hand (curl -X POST {exc.url})"
    if r.status != 200:
        return f"POST /resume answered HTTP {r.status}: resume by hand"
    return "the engine was resumed (POST /resume 200)"


def _wait_queue_empty(endpoint: str, until: float, poll_s: float = 0.2) -> bool | None:
    """Poll ``endpoint``'s ``/metrics`` every ``poll_s`` s until ``vllm:num_requests_waiting``
    is 0 (``True``), the monotonic time ``until`` passes (``False``) or the metric cannot be
    read (``None``). No read starts after ``until``: the last sleep is cut to end there, and
    that read is the last (a read after it would count a queue that emptied after the wait's
    share of the bound, and take from the pause's share).

    What the gauge is (vLLM 0.32, read in its source): the scheduler's ``len(waiting)`` (+ the
    KV-holding waiting) at the end of each engine step (``Scheduler.make_stats`` in
    ``update_from_output``), set on ``/metrics`` by the API server when it handles that step's
    outputs (``PrometheusStatLogger.record``). So 0 means every request that had reached the
    scheduler by the last step was scheduled — the queue this wait is for. A request the HTTP
    server took but has not yet handed to the scheduler is in no gauge: if it arrives after
    the pause, vLLM 0.32 queues it and the stop cuts it, as any newcomer (module docstring)."""
    import time

    while True:
        _, waiting, _ = read_queue(endpoint)
        if waiting is None:
            return None
        if waiting == 0:
            return True
        left = until - time.monotonic()
        if left <= 0:
            return False
        time.sleep(min(poll_s, left))


def _pause(c: Any, plan: DrainPlan, rec: dict[str, Any], timeout_s: float) -> None:
    """``POST /pause?mode=wait`` waiting up to ``timeout_s``; fills ``rec`` (``reached_zero``,
    ``cut``, ``left_running``, ``queued_while_paused``). Raises :class:`StepError` (after
    ``POST /resume``) when the pause fails."""
    try:
        with EngineClient(plan.endpoint) as client:
            r = client.pause(timeout_s)
        if r.status != 200:
            raise StepError(f"drain failed: POST /pause?mode=wait answered HTTP "
                            f"{r.status} ({r.text[:200]}); {_resume(plan.endpoint)}; "
                            f"{c.name} was not stopped")
        rec["reached_zero"] = True
    except EngineError as exc:
        if exc.kind != "timeout":
            raise StepError(f"drain failed: {exc}; {_resume(plan.endpoint)}; "
                            f"{c.name} was not stopped") from None
        rec["reached_zero"] = False   # the pause itself applies at once; the wait ran past
    running, waiting, _ = read_queue(plan.endpoint)
    known = running is not None and waiting is not None
    rec["left_running"] = int(running) if running is not None else None
    rec["queued_while_paused"] = int(waiting) if waiting is not None else None
    rec["cut"] = int(running + waiting) if known else None  # type: ignore[operator]


def drain_and_stop(c: Any, plan: DrainPlan, stop: Any) -> tuple[str, dict[str, Any]]:
    """Drain per ``plan`` (module docstring), then call ``stop(stop_timeout_s) -> str`` (the
    stop: :func:`seat_console.actions.swap.docker_stop`, whose record the caller adds as
    ``stop``). Returns ``(sentence, record)``; the record (JSON-able) holds ``mode``
    (``pause`` / ``sigterm`` / ``none`` / ``off``), ``bound_s``, ``running_before``,
    ``waiting_before``, ``queue_s`` (s spent letting the queue reach a slot before the pause),
    ``drained_s``, ``cut`` (requests left at the stop, ``None`` unknown) split into
    ``left_running`` and ``queued_while_paused`` for a pause, ``reached_zero``,
    ``stop_timeout_s``, ``shutdown_timeout_s``, ``down_at`` (ISO UTC: admission stopped).
    Raises :class:`StepError` when the pause or the stop fails — after ``POST /resume`` when
    the engine had been paused, said in the message."""
    import time

    rec: dict[str, Any] = {"endpoint": plan.endpoint, "bound_s": plan.bound_s,
                           "running_before": plan.running, "waiting_before": plan.waiting,
                           "stop_timeout_s": plan.stop_timeout_s,
                           "shutdown_timeout_s": plan.shutdown_timeout_s,
                           "newcomers": plan.newcomers}
    t0 = utcnow()
    m0 = time.monotonic()
    paused = False
    if plan.bound_s <= 0:
        rec.update(mode="off", reached_zero=None, cut=None)
    elif plan.pause:
        rec["mode"] = "pause"
        # requests queued before the drain: a paused engine would never schedule them
        rec["queue_empty"] = _wait_queue_empty(plan.endpoint, m0 + plan.bound_s / 2)
        rec["queue_s"] = round(time.monotonic() - m0, 3)
        t0 = utcnow()     # admission stops at the pause (the queue wait still served)
        paused = True
        _pause(c, plan, rec, plan.bound_s - (time.monotonic() - m0))
    else:
        rec["mode"] = "sigterm" if plan.pause is False else "none"
        rec["reached_zero"] = None
        cut = plan.in_flight
        # --shutdown-timeout N > 0: the engine drains them itself within the stop timeout
        rec["cut"] = (None if cut is None else int(cut)) if plan.shutdown_timeout_s == 0 else None
    rec["down_at"] = iso(t0)
    rec["drained_s"] = round((utcnow() - t0).total_seconds(), 3)
    try:
        out = stop(plan.stop_timeout_s)
    except StepError as exc:
        tail = f"; {_resume(plan.endpoint)}" if paused else ""
        raise StepError(f"{exc}{tail}") from None
    return f"{_words(rec, plan)}; {out}", rec


def _words(rec: dict[str, Any], plan: DrainPlan) -> str:
    if rec["mode"] == "off":
        return "drain off (drain_timeout_s = 0): no drain"
    if rec["mode"] == "pause":
        cut = rec["cut"]
        where = "at the stop" if rec.get("reached_zero") else "at the bound"
        if cut == 0:
            tail = "0 requests cut"
        elif cut is None:
            tail = "an unknown number of requests cut (/metrics not read after the pause)"
        else:
            tail = (f"{cut} request(s) cut {where}: {rec.get('left_running')} still running, "
                    f"{rec.get('queued_while_paused')} queued, never started")
        if rec.get("newcomers") == "queued":
            tail += (" (vLLM < 0.33 queues the requests that arrive while paused and the stop "
                     "cuts them; its /metrics may miss them: a paused, idle scheduler publishes "
                     "no counts)")
        return (f"drained in {rec['drained_s']:.1f} s (bound {plan.bound_s:g} s), {tail}; "
                "counted just before the stop")
    if rec["cut"]:
        return (f"/pause not offered: SIGTERM aborted about {rec['cut']} request(s) in flight "
                "(--shutdown-timeout 0)")
    if plan.shutdown_timeout_s:
        return ("/pause not offered: SIGTERM, the engine drains within --shutdown-timeout "
                f"{plan.shutdown_timeout_s} s")
    return "/pause not offered: SIGTERM"


def summary(rec: dict[str, Any] | None) -> str:
    """One clause for a verify message from a journaled drain record (:func:`drain_and_stop`):
    ``"drained by /pause in 0.4 s, 0 requests cut"``, ``"drain stopped at the 60 s bound, 3
    request(s) cut"``, ``"SIGTERM (no /pause), about 2 request(s) aborted"``, followed by how
    the stop ended where the record holds it (:func:`stop_words`: ``"; stop: listener closed
    after 0.1 s, then SIGKILL (0.3 s)"``); ``""`` without a record. A journaled record is
    outside input: a value of the wrong kind reads as unknown, never raises."""
    if not isinstance(rec, dict) or "mode" not in rec:
        return ""
    stop = stop_words(rec.get("stop"))
    tail = f"; stop: {stop}" if stop else ""
    cut = rec.get("cut")
    n = (str(cut) if isinstance(cut, int) and not isinstance(cut, bool) and cut >= 0 else
         "an unknown number of")
    if rec["mode"] == "pause":
        queued = rec.get("queued_while_paused")
        why = (f" ({queued} queued, never started)" if isinstance(queued, int)
               and not isinstance(queued, bool) and queued > 0 else "")
        late = (" (vLLM < 0.33: requests arriving while paused are queued and cut, maybe "
                "uncounted)" if rec.get("newcomers") == "queued" else "")
        if rec.get("reached_zero") is True:
            took = _seconds(rec.get("drained_s"))
            return ("drained by /pause in " + ("an unknown time" if took is None else
                                               f"{took:.1f} s") + ", "
                    + ("0 requests cut" if cut == 0 else f"{n} request(s) cut at the stop{why}")
                    + late + tail)
        bound = _seconds(rec.get("bound_s"))
        return (f"drain stopped at the {'unknown' if bound is None else f'{bound:g} s'} bound, "
                f"{n} request(s) cut at the bound{why}{late}{tail}")
    if rec["mode"] == "sigterm":
        return (f"SIGTERM (no /pause), about {n} request(s) aborted" if cut else
                "SIGTERM (no /pause)") + tail
    if rec["mode"] == "off":
        return "drain off: no drain" + tail
    return "not drained (the engine did not answer)" + tail


def stop_words(stop: Any) -> str:
    """How a journaled stop ended (the drain record's ``stop``, :func:`seat_console.actions.
    swap.docker_stop`'s record), told again from its ``way`` and seconds — not from its stored
    ``words`` — : ``"listener closed after 0.1 s, then SIGKILL (0.3 s)"``, ``"exited by itself
    (0.9 s)"``, ``"SIGKILL at the stop timeout (15.0 s)"``, ``"docker stop (10.2 s)"``; ``""``
    when there is none or its ``way`` is unknown. Outside input: never raises; seconds that
    are not a finite number ≥ 0 are left out, never shown as 0."""
    if not isinstance(stop, dict):
        return ""
    way = stop.get("way")
    closed = _seconds(stop.get("listener_closed_s"))
    words = {"exited": "exited by itself",
             "listener_closed": ("listener closed" + ("" if closed is None else
                                                      f" after {closed:.1f} s")
                                 + ", then SIGKILL"),
             "stop_timeout": "SIGKILL at the stop timeout",
             "docker_stop": "docker stop"}.get(way) if isinstance(way, str) else None
    if words is None:
        return ""
    secs = _seconds(stop.get("stop_s"))
    return words + ("" if secs is None else f" ({secs:.1f} s)")


# -- downtime --------------------------------------------------------------------------------------
def iso(t: datetime) -> str:
    """ISO 8601 UTC with ``Z``, millisecond precision (a downtime is told to 0.1 s)."""
    return t.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def parse_iso(v: Any) -> datetime | None:
    """An ISO 8601 time with an offset (our journal's facts) → aware UTC; ``None`` for
    anything else (not a string, no offset, not a time)."""
    if not isinstance(v, str) or len(v) > 64:
        return None
    try:
        t = datetime.fromisoformat(v.replace("Z", "+00:00"))
    except ValueError:
        return None
    return t.astimezone(UTC) if t.tzinfo is not None else None


def mark_up(facts: dict[str, Any], *, started_at: datetime | None = None,
            image_id: str | None = None, now: datetime | None = None) -> str:
    """Record the first verified completion (``now``) on the engine that follows the drain in
    ``facts["downtime"]`` (``down_at`` from ``facts["drain"]``): ``up_at``, ``seconds``
    (``up_at - down_at``), ``start_s`` (``up_at - started_at``, the container's start to its
    first completion) and ``image_id``. Returns ``"seat down 31.4 s"``, or ``""`` when no drain
    recorded when the seat went down."""
    now = now or utcnow()
    down_at = parse_iso((facts.get("drain") or {}).get("down_at"))
    if down_at is None:
        return ""
    down = iso(down_at)
    secs = (now - down_at).total_seconds()
    rec: dict[str, Any] = {"down_at": down, "up_at": iso(now), "seconds": round(secs, 3),
                           "image_id": image_id}
    if started_at is not None:
        rec["start_s"] = round((now - started_at).total_seconds(), 3)
    facts["downtime"] = rec
    return f"seat down {secs:.1f} s"


def _seconds(v: Any) -> float | None:
    if isinstance(v, bool) or not isinstance(v, int | float):
        return None
    f = float(v)
    return f if math.isfinite(f) and f >= 0 else None


def downtimes(journal: Journal | Any) -> list[dict[str, Any]]:
    """Every run's measured downtime, oldest first: ``{"run_id", "runbook", "at",
    "seconds", "start_s", "image_id"}`` from the facts of :data:`DOWNTIME_RUNBOOKS` runs. A
    record whose ``seconds`` is not a finite number ≥ 0 is skipped (unknown, never 0).
    ``journal``: anything with ``entries()`` (the journal, the exporter's read-only one), or
    its entries already read."""
    runs: dict[str, list[Any]] = {}
    rows = journal.entries() if hasattr(journal, "entries") else journal
    for e in rows:
        runs.setdefault(e.run_id, []).append(e)
    out = []
    for rows in runs.values():
        if not rows or rows[0].runbook not in DOWNTIME_RUNBOOKS:
            continue
        d = facts_from_rows(rows).get("downtime")
        if not isinstance(d, dict):
            continue
        secs = _seconds(d.get("seconds"))
        if secs is None:
            continue
        out.append({"run_id": rows[0].run_id, "runbook": rows[0].runbook,
                    "at": d.get("up_at"), "seconds": secs, "start_s": _seconds(d.get("start_s")),
                    "image_id": d.get("image_id") if isinstance(d.get("image_id"), str) else None})
    return sorted(out, key=lambda d: str(d["at"]))


def downtime_line(d: dict[str, Any] | None) -> str:
    """``"seat down 31.4 s in the last runbook run that stopped it (swap 2f3a…, serving again
    at …)"`` from a :func:`downtimes` record; says so when none was measured (``None``)."""
    if d is None:
        return "seat downtime: none measured yet (swap, restore, compare and promote's undo " \
               "measure it)"
    return (f"seat down {d['seconds']:.1f} s in the last runbook run that stopped it "
            f"({d['runbook']} {d['run_id']}, serving again at {d['at']})")


def last_downtime(journal: Journal) -> dict[str, Any] | None:
    """The newest :func:`downtimes` record, or ``None``."""
    ds = downtimes(journal)
    return ds[-1] if ds else None


def forecast(journal: Journal, image_id: str | None, bound_s: float) -> str:
    """The plan's downtime forecast for starting ``image_id``: ``"seat down ≈ 30 s (last start
    of this image 28.8 s + drain up to 60 s)"`` from the newest measured ``start_s`` of that
    image; says so when none was measured."""
    if image_id:
        for d in reversed(downtimes(journal)):
            if d["image_id"] == image_id and d["start_s"] is not None:
                return (f"seat down ≈ {d['start_s']:.0f} s (last start of this image "
                        f"{d['start_s']:.1f} s, run {d['run_id']}) + the drain (up to "
                        f"{bound_s:.0f} s)")
    return "seat downtime: no start of this image measured on this node yet"


__all__ = ["DrainPlan", "STOP_MARGIN_S", "downtime_line", "downtimes", "drain_and_stop",
           "drain_plan", "engine_version", "forecast", "last_downtime", "mark_up",
           "newcomers_while_paused", "pause_offered", "read_queue", "shutdown_timeout_of",
           "stop_timeout_for", "stop_words", "summary"]
