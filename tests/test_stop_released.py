"""The seat's stop ends as soon as the engine has let go of the seat (issue 32's finding).

vLLM's API server closes its listener only after its engine has shut down (``entrypoints/
launchers/launcher.py`` ``serve_http``), then uvicorn waits for the open keep-alive connections,
under a load until docker's SIGKILL at the stop timeout. :func:`seat_console.actions.swap.
docker_stop` with the engine's endpoint sends SIGTERM, then SIGKILL at once when a TCP connect to
that endpoint is refused, no SIGKILL when the container exits by itself, and SIGKILL at the stop
timeout otherwise.

The listener is a real socket on 127.0.0.1 that the test closes; the container is the docker
SDK's ``Container`` as the existing drain tests stand it in (tests/test_drain.py): ``name``,
``attrs``, ``reload()``, ``kill(signal)``, ``stop(timeout)``.
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

import pytest
from docker.errors import APIError
from hypothesis import given
from hypothesis import strategies as st

from seat_console.actions import drain as D
from seat_console.actions import swap as swap_mod
from seat_console.actions.runbook import StepError
from seat_console.node.engine_client import listening


class Listener:
    """A real TCP listener on 127.0.0.1 (what the engine's uvicorn holds); :meth:`close` it."""

    def __init__(self) -> None:
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.port = self.sock.getsockname()[1]
        self.closed = threading.Event()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def close(self) -> None:
        self.sock.close()
        self.closed.set()


class Box:
    """The container: running until SIGKILL (exit 137) or :meth:`exit`; ``on_term`` runs at
    SIGTERM (what the engine does then); ``fail``: ``kill`` raises docker's APIError for those
    signals; ``inspect_fails``: ``reload`` raises after SIGTERM."""

    def __init__(self, on_term: Callable[[Box], None] | None = None,
                 fail: tuple[str, ...] = (), inspect_fails: bool = False) -> None:
        self.name = "seat-probe"
        self.attrs: dict[str, Any] = {"Config": {"Cmd": []}, "State": {"Running": True,
                                                                    "ExitCode": 0}}
        self.on_term = on_term
        self.fail = fail
        self.inspect_fails = inspect_fails
        self.signals: list[str] = []      # signals delivered
        self.tried: list[str] = []        # kill calls, delivered or refused
        self.stops: list[int] = []

    def exit(self, code: int) -> None:
        self.attrs["State"] = {"Running": False, "ExitCode": code}

    def reload(self) -> None:
        if self.inspect_fails and self.signals:
            raise APIError("500 Server Error: inspect failed")

    def kill(self, signal: str) -> None:
        self.tried.append(signal)
        if signal in self.fail:
            raise APIError(f"500 Server Error: cannot kill container: {signal}")
        if not self.attrs["State"]["Running"]:
            raise APIError("409 Client Error: Conflict (container is not running)")
        self.signals.append(signal)
        if signal == "SIGKILL":
            self.exit(137)
        elif self.on_term is not None:
            self.on_term(self)

    def stop(self, timeout: int) -> None:
        self.stops.append(timeout)
        self.exit(0)


def later(s: float, fn: Callable[[], None]) -> None:
    """What the engine does a moment after SIGTERM, on its own thread."""
    threading.Timer(s, fn).start()


def test_listener_closed_then_sigkill_at_once() -> None:
    lis = Listener()
    # the engine shuts down, then uvicorn closes its listener; its keep-alive connections
    # keep the process alive (it never exits by itself)
    box = Box(on_term=lambda b: later(0.3, lis.close))
    rec: dict[str, Any] = {}
    out = swap_mod.docker_stop(None, box, 30, endpoint=lis.url, record=rec)
    assert lis.closed.is_set()
    assert box.signals == ["SIGTERM", "SIGKILL"]
    assert rec["way"] == "listener_closed" and rec["exit_code"] == 137
    assert rec["words"].startswith("listener closed after ") and rec["words"] in out
    assert rec["words"].endswith(", then SIGKILL") and "seat-probe" in out
    assert rec["listener_closed_s"] is not None and rec["stop_timeout_s"] == 30
    assert "still accepted" not in out


def test_exits_by_itself_no_sigkill() -> None:
    lis = Listener()
    try:
        box = Box(on_term=lambda b: later(0.3, lambda: b.exit(0)))   # the listener stays open
        rec: dict[str, Any] = {}
        out = swap_mod.docker_stop(None, box, 30, endpoint=lis.url, record=rec)
    finally:
        lis.close()
    assert box.tried == ["SIGTERM"], "no SIGKILL once it exited"
    assert rec["way"] == "exited" and rec["words"] == "exited by itself" and rec["exit_code"] == 0
    assert "exited by itself" in out and rec["listener_closed_s"] is None


def test_exited_and_listener_closed_together_is_exited_by_itself() -> None:
    # no load: uvicorn closes its listener and the process exits; the container has exited by
    # the time the stop looks, so no SIGKILL
    lis = Listener()

    def term(b: Box) -> None:
        lis.close()
        b.exit(0)
    box = Box(on_term=term)
    rec: dict[str, Any] = {}
    swap_mod.docker_stop(None, box, 30, endpoint=lis.url, record=rec)
    assert box.tried == ["SIGTERM"] and rec["way"] == "exited"


def test_listener_never_closes_sigkill_at_the_stop_timeout() -> None:
    lis = Listener()
    try:
        box = Box()                                   # SIGTERM changes nothing it shows
        rec: dict[str, Any] = {}
        out = swap_mod.docker_stop(None, box, 1, endpoint=lis.url, record=rec)
    finally:
        lis.close()
    assert box.signals == ["SIGTERM", "SIGKILL"]
    assert rec["way"] == "stop_timeout" and rec["words"] == "SIGKILL at the stop timeout"
    assert rec["stop_s"] >= 1.0, "never before the stop timeout"
    assert "SIGKILL at the stop timeout" in out and "still accepted connections" in out


@pytest.mark.parametrize(("fail", "inspect_fails", "words"), [
    (("SIGTERM",), False, r"stop seat-probe: SIGTERM failed .*docker stop seat-probe"),
    (("SIGKILL",), False, r"stop seat-probe: SIGKILL failed .*docker kill seat-probe"),
    ((), True, r"stop seat-probe: cannot inspect it after SIGTERM .*docker stop seat-probe")])
def test_a_failing_docker_call_is_a_step_error_naming_the_container(
        fail: tuple[str, ...], inspect_fails: bool, words: str) -> None:
    lis = Listener()
    try:
        box = Box(fail=fail, inspect_fails=inspect_fails)
        with pytest.raises(StepError, match=words):
            swap_mod.docker_stop(None, box, 1, endpoint=lis.url)
    finally:
        lis.close()


def test_a_signal_refused_because_it_already_exited_is_exited_by_itself() -> None:
    lis = Listener()
    try:
        box = Box(fail=("SIGTERM",))
        box.exit(0)                                   # it exited between the check and the kill
        rec: dict[str, Any] = {}
        out = swap_mod.docker_stop(None, box, 5, endpoint=lis.url, record=rec)
    finally:
        lis.close()
    assert rec["way"] == "exited" and "exited by itself" in out


def test_without_an_endpoint_the_plain_docker_stop() -> None:
    box = Box()
    rec: dict[str, Any] = {}
    out = swap_mod.docker_stop(None, box, 10, record=rec)
    assert box.stops == [10] and box.signals == []
    assert rec["way"] == "docker_stop" and "docker stop, t=10 s" in out


def test_a_listener_not_open_before_the_stop_gets_the_plain_docker_stop() -> None:
    lis = Listener()
    lis.close()                                       # nothing listens: its closing says nothing
    box = Box()
    rec: dict[str, Any] = {}
    out = swap_mod.docker_stop(None, box, 10, endpoint=lis.url, record=rec)
    assert box.stops == [10] and box.signals == [] and rec["way"] == "docker_stop"
    assert "was refused before the stop" in out


def test_the_drained_stop_records_how_it_ended() -> None:
    # through stop_container (swap, restore, compare legs, promote): the drain's record carries
    # the stop's, the sentence and the verify clause say which way it ended
    from test_drain import Engine

    nctx = SimpleNamespace(profile=SimpleNamespace(seat=SimpleNamespace(drain_timeout_s=30)),
                           expect=lambda *a: None)
    with Engine(running=0, offers_pause=False) as eng:
        def term(b: Box) -> None:
            def close() -> None:
                eng.shutdown()
                eng.server_close()
            later(0.2, close)
        box = Box(on_term=term)
        rec: dict[str, Any] = {}
        words = swap_mod.stop_container(None, box, 10, nctx,  # type: ignore[arg-type]
                                        endpoint=eng.url, record=rec)
    assert rec["mode"] == "sigterm" and rec["stop"]["way"] == "listener_closed"
    assert rec["stop"]["stop_timeout_s"] == rec["stop_timeout_s"] == 15
    assert "then SIGKILL" in words and box.signals == ["SIGTERM", "SIGKILL"]
    assert D.summary(rec).startswith("SIGTERM (no /pause); stop: listener closed after ")


# -- the readings -------------------------------------------------------------------------------
def test_listening_reads_a_real_listener() -> None:
    lis = Listener()
    assert listening(lis.url) is True
    assert listening(lis.url + "/") is True
    lis.close()
    assert listening(lis.url) is False
    assert listening("not a url") is None and listening("http://127.0.0.1:99999") is None


@given(st.one_of(st.text(alphabet=st.characters(blacklist_characters=":/.@[]"), max_size=40),
                 st.builds(lambda sch, p: f"{sch}://127.0.0.1:{p}",
                           st.sampled_from(["http", "https", "ftp", ""]),
                           # no port another test on this machine may listen on: out of range,
                           # or 9 (discard: nothing listens here)
                           st.one_of(st.integers(-5, 0), st.integers(65_536, 70_000),
                                     st.just(9)))))
def test_listening_never_raises(url: str) -> None:
    assert listening(url, timeout_s=0.05) in (True, False, None)


_ANY = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(), st.text(max_size=30),
                 st.lists(st.integers(), max_size=2), st.dictionaries(st.text(max_size=5),
                                                                      st.integers(), max_size=2))


_STOP = st.one_of(_ANY, st.fixed_dictionaries({}, optional={
    "way": st.one_of(_ANY, st.sampled_from(list(swap_mod.STOP_WAYS))),
    "stop_s": _ANY, "listener_closed_s": _ANY}))


@given(st.fixed_dictionaries({"mode": st.sampled_from(["pause", "sigterm", "off", "none", "x"])},
                             optional={"cut": _ANY, "drained_s": _ANY, "bound_s": _ANY,
                                       "reached_zero": _ANY, "queued_while_paused": _ANY,
                                       "newcomers": _ANY, "stop": _STOP}))
def test_a_journaled_drain_record_reads_without_raising(rec: dict[str, Any]) -> None:
    assert isinstance(D.summary(rec), str)


@pytest.mark.parametrize(("stop", "want"), [
    ({"way": "exited", "stop_s": 0.91}, "exited by itself (0.9 s)"),
    ({"way": "listener_closed", "listener_closed_s": 0.12, "stop_s": 0.31},
     "listener closed after 0.1 s, then SIGKILL (0.3 s)"),
    ({"way": "listener_closed", "listener_closed_s": "x"}, "listener closed, then SIGKILL"),
    ({"way": "stop_timeout", "stop_s": 15.02}, "SIGKILL at the stop timeout (15.0 s)"),
    ({"way": "docker_stop", "stop_s": 10.2}, "docker stop (10.2 s)"),
    ({"way": "exited", "stop_s": float("nan")}, "exited by itself"),
    ({"way": "exited", "stop_s": -1}, "exited by itself"),
    ({"way": "exited", "stop_s": float("inf")}, "exited by itself"),
    ({"way": "[red]x", "words": "exited by itself"}, ""), ({"way": 3}, ""), ({}, ""),
    (None, ""), ("x", "")])
def test_stop_words_unknown_seconds_never_shown(stop: Any, want: str) -> None:
    assert D.stop_words(stop) == want


def test_every_way_a_stop_ends_is_told() -> None:
    assert all(D.stop_words({"way": w}) for w in swap_mod.STOP_WAYS)
