"""A steady streaming load against the seat, counting for itself (issue 32): the drain lab test
(tests/test_drain_lab.py) and the drain benchmark (benchmarks/bench_drain.py) run it through a
swap and a restore.

Each of ``streams`` clients (one thread, one keep-alive ``httpx.Client``: how a fleet caller
calls) sends streaming completions one after the other until :meth:`Load.stop`. Every request
ends in one outcome:

- ``ok``: the stream ended with ``data: [DONE]`` and no abort or error event;
- ``refused: …``: the seat did not take the request — the connection was refused, or closed
  before any response, or answered 503 before the stream began or as its first event (vLLM
  0.33+ while paused). Nothing was admitted; the
  client backs off (``backoff_s``) and retries, as a fleet caller does;
- ``lost: …``: the request was admitted (a status line came back) and did not complete — an
  abort (``finish_reason`` ``abort``), an error event in the stream, a stream cut before
  ``[DONE]``, or another HTTP status.
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx


def _code(line: str) -> int | None:
    """The ``error.code`` of an SSE ``data:`` error event, ``None`` when it has none."""
    try:
        err = json.loads(line.removeprefix("data:").strip()).get("error")
        return int(err["code"]) if isinstance(err, dict) else None
    except (ValueError, TypeError, KeyError, AttributeError):
        return None


def _answered(body: bytes) -> str:
    """The outcome of a completion answered 200 without streaming: ``ok`` when its one choice
    finished by length or stop, else ``lost: …`` (an abort, or an answer that is not one)."""
    try:
        fin = json.loads(body)["choices"][0].get("finish_reason")
    except (ValueError, TypeError, KeyError, IndexError, AttributeError):
        return "lost: not a completion answer"
    return "ok" if fin in ("length", "stop") else f"lost: finish_reason {fin}"


@dataclass
class Load:
    """``streams`` concurrent streaming completions of ``max_tokens`` each against ``url``
    (``/v1/completions``, model ``model``) in a loop until :meth:`stop`; ``done`` holds every
    request's ``(started, ended, outcome)`` (UTC epoch seconds)."""

    url: str
    model: str
    streams: int = 8
    max_tokens: int = 24
    backoff_s: float = 0.2
    stream: bool = True
    """Streamed (SSE: the client reads and checks every token's line) or not (one JSON answer,
    ``finish_reason`` ``length`` or ``stop`` is ``ok``): a client thread of a load that is not
    streamed sleeps in its socket read, so a test process running 48 of them keeps its CPU
    (and GIL) for its own calls."""
    recover_then_stop: int = 0
    """0: send until :meth:`stop`. N > 0: once the seat went down (a request refused or lost)
    and then completed N requests that started after the last such one, set :attr:`recovered`
    and stop sending — what a runbook does after the seat's next engine serves (its release:
    timers, silence, lease) then runs without the load's CPU on this 2-core machine."""
    done: list[tuple[float, float, str]] = field(default_factory=list)
    recovered: threading.Event = field(default_factory=threading.Event)
    _stop: threading.Event = field(default_factory=threading.Event)
    _threads: list[threading.Thread] = field(default_factory=list)

    def _one(self, client: httpx.Client) -> str:
        body = {"model": self.model, "prompt": "Count: one two three", "stream": self.stream,
                "max_tokens": self.max_tokens, "ignore_eos": True, "temperature": 0}
        admitted = False
        try:
            with client.stream("POST", f"{self.url}/v1/completions", json=body) as r:
                admitted = True
                if r.status_code == 503:
                    return "refused: HTTP 503"
                if r.status_code != 200:
                    return f"lost: HTTP {r.status_code}"
                if not self.stream:
                    return _answered(r.read())
                tokens = False
                for line in r.iter_lines():
                    s = line.strip()
                    if s == "data: [DONE]":
                        return "ok"
                    if '"finish_reason": "abort"' in s or '"finish_reason":"abort"' in s:
                        return "lost: aborted"
                    if s.startswith("data:") and '"error"' in s[:40]:
                        # vLLM >= 0.33 refuses a stream while paused with an error event of
                        # code 503 before any token: retryable, nothing was done
                        return ("refused: 503 error event" if not tokens and _code(s) == 503
                                else "lost: error event")
                    tokens = tokens or '"text"' in s
                return "lost: stream ended without [DONE]"
        except httpx.ConnectError:
            return "refused: connection refused"
        except httpx.HTTPError as exc:
            if not admitted:
                return f"refused: closed before a response ({type(exc).__name__})"
            return f"lost: cut ({type(exc).__name__})"

    def _run(self) -> None:
        with httpx.Client(timeout=httpx.Timeout(120, connect=2)) as client:
            while not self._stop.is_set():
                t0 = time.time()
                out = self._one(client)
                self.done.append((t0, time.time(), out))
                if self.recover_then_stop and self._seat_recovered():
                    self.recovered.set()
                    self._stop.set()
                if out.startswith("refused"):
                    self._stop.wait(self.backoff_s)

    def _seat_recovered(self) -> bool:
        done = list(self.done)
        bad = [d[1] for d in done if d[2] != "ok"]
        return bool(bad) and sum(1 for d in done if d[0] >= max(bad) and d[2] == "ok") \
            >= self.recover_then_stop

    def start(self) -> Load:
        """Start the client threads; returns ``self``."""
        for _ in range(self.streams):
            t = threading.Thread(target=self._run, daemon=True)
            t.start()
            self._threads.append(t)
        return self

    def stop(self) -> None:
        """Stop sending; wait (≤ 150 s each) for the requests in flight to end."""
        self._stop.set()
        for t in self._threads:
            t.join(150)

    def count(self, what: str, since: float = 0.0) -> int:
        """Requests whose outcome starts with ``what`` and that ended after ``since``."""
        return sum(1 for d in list(self.done) if d[2].startswith(what) and d[1] >= since)

    def wait_ok(self, n: int, since: float, timeout_s: float) -> bool:
        """Wait (polling 0.2 s, at most ``timeout_s``) until ``n`` requests started after
        ``since`` completed ``ok``; whether they did."""
        end = time.time() + timeout_s
        while time.time() < end:
            if sum(1 for d in list(self.done) if d[0] >= since and d[2] == "ok") >= n:
                return True
            time.sleep(0.2)
        return False

    def tally(self, start: float, end: float) -> dict[str, int]:
        """``{outcome: count}`` of the requests that ended in ``[start, end)``."""
        out: dict[str, int] = {}
        for d in list(self.done):
            if start <= d[1] < end:
                out[d[2]] = out.get(d[2], 0) + 1
        return out


def drain_profile(lab_profile: Path, dest: Path, drain_s: float) -> Path:
    """The lab's profile written to ``dest`` with the probe run with ``VLLM_SERVER_DEV_MODE=1``
    (it offers ``/pause``) and ``[seat] drain_timeout_s = drain_s`` (0: the plain stop)."""
    text = lab_profile.read_text("utf-8")
    text = text.replace("env = { HF_HUB_OFFLINE", 'env = { VLLM_SERVER_DEV_MODE = "1", '
                                                  "HF_HUB_OFFLINE", 1)
    text = text.replace("[seat]\n", f"[seat]\ndrain_timeout_s = {drain_s}\n", 1)
    if 'VLLM_SERVER_DEV_MODE = "1"' not in text or f"drain_timeout_s = {drain_s}" not in text:
        raise ValueError(f"{lab_profile}: no [swap] env or [seat] table to edit")
    dest.write_text(text, "utf-8")
    return dest


__all__ = ["Load", "drain_profile"]
