"""Action behaviours checked at the node seam, without the lab (issue 22, item 3).

The swap / restore and the backport talk to the docker engine only through
:meth:`NodeContext.docker` (swap) or the ``client`` handed to ``build_runbook`` (backport); here
that seam is an in-process fake engine (containers and images as dicts, the SDK's own
``NotFound`` / ``ImageNotFound``), so each test fails when the behaviour breaks, lab or not.
The lab tests (``test_swap_lab``, ``test_backport``) check the same against a real engine.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import pytest
from docker.errors import ImageNotFound, NotFound

from seat_console.actions import backport as bp
from seat_console.actions import swap as swap_mod
from seat_console.actions.runbook import Check, RunContext, Runbook, Step, StepError
from seat_console.core.profile import load_profile
from seat_console.node.context import NodeContext

# -- the fake engine ----------------------------------------------------------------------------


class FakeContainer:
    """A docker SDK ``Container`` as the actions use it: ``id``, ``name``, ``attrs`` and
    start / stop / reload / rename / logs, changing the fake engine's state."""

    def __init__(self, engine: FakeEngine, cid: str, name: str, image: str, running: bool):
        self.engine, self.id, self.name = engine, cid, name
        self.attrs: dict[str, Any] = {"Id": cid, "Name": "/" + name, "Image": image,
                                      "Config": {"Image": "img", "StopTimeout": 1},
                                      "State": {"Running": running, "ExitCode": 0,
                                                "StartedAt": "2026-12-01T10:00:00Z"}}

    def start(self) -> None:
        self.engine.calls.append(("start", self.name))
        self.attrs["State"]["Running"] = True

    def stop(self, timeout: int = 10) -> None:
        self.engine.calls.append(("stop", self.name))
        self.attrs["State"]["Running"] = False

    def kill(self, signal: str = "SIGKILL") -> None:
        # the seat's stop where the engine's listener accepted (swap.docker_stop): it exits at
        # the first signal, as a stop
        self.engine.calls.append(("stop", self.name))
        self.attrs["State"]["Running"] = False

    def reload(self) -> None:
        pass

    def rename(self, new: str) -> None:
        self.engine.calls.append(("rename", self.name, new))
        self.name = new

    def logs(self, **kw: Any) -> bytes:
        return b""


class _Containers:
    def __init__(self, engine: FakeEngine) -> None:
        self.engine = engine

    def get(self, key: str) -> FakeContainer:
        for c in self.engine.containers:
            if key in (c.id, c.name):
                return c
        raise NotFound(f"no container {key}")


class _Image:
    def __init__(self, attrs: dict[str, Any]) -> None:
        self.attrs = attrs


class _Images:
    def __init__(self, engine: FakeEngine) -> None:
        self.engine = engine

    def get(self, ref: str) -> _Image:
        if ref not in self.engine.images:
            raise ImageNotFound(f"no image {ref}")
        return _Image(self.engine.images[ref])


class FakeEngine:
    """The docker client the actions get: ``containers``, ``images`` (ref → inspect dict),
    ``calls`` (what was done to the node, in order); ``close`` is a no-op."""

    def __init__(self) -> None:
        self.containers: list[FakeContainer] = []
        self.images: dict[str, dict[str, Any]] = {}
        self.calls: list[tuple[str, ...]] = []

    def add(self, cid: str, name: str, image: str, running: bool) -> FakeContainer:
        c = FakeContainer(self, cid, name, image, running)
        self.containers.append(c)
        return c

    def close(self) -> None:
        pass


class _Client:
    """The SDK-shaped view of a :class:`FakeEngine` (``.containers.get``, ``.images.get``)."""

    def __init__(self, engine: FakeEngine) -> None:
        self.containers = _Containers(engine)
        self.images = _Images(engine)

    def close(self) -> None:
        pass


class FakeNodeContext(NodeContext):
    """A :class:`NodeContext` whose docker engine is the fake (the seam the swap uses)."""

    def __init__(self, loaded: Any, engine: FakeEngine) -> None:
        super().__init__(loaded)
        self.engine = engine

    def docker(self, timeout_s: float = 5.0) -> Any:
        return _Client(self.engine)


SWAP_PROFILE = ('[resident]\nname = "r"\ncontainer = "seat-resident"\n[[silence.matchers]]\n'
                'name = "instance"\nvalue = "n:8000"\n[swap]\ncontainer = "seat-probe"\n'
                'image = "img:1"\ncommand = ["--model", "/m"]\n'
                'served_model_name = "seat-resident"\ngpus = []\n')

RESIDENT = {"id": "res0001", "name": "seat-resident", "image_id": "sha256:" + "a" * 64,
            "image_ref": "img:0", "models": ["seat-resident"], "stop_timeout_s": 1}


@pytest.fixture
def swap_ctx(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> FakeNodeContext:
    f = tmp_path / "p.toml"
    f.write_text(SWAP_PROFILE)
    # serving is HTTP to the seat, not the node seam: answered at once
    monkeypatch.setattr(swap_mod, "wait_serving", lambda c, *a, **k: f"{c.name} serving")
    return FakeNodeContext(load_profile(f), FakeEngine())


def _swap_steps(nctx: NodeContext) -> tuple[Runbook, dict[str, Step]]:
    rb = swap_mod.build_swap(nctx, None)  # type: ignore[arg-type]
    return rb, {s.name: s for s in rb.steps}


def _failing_probe_step() -> Step:
    def apply(ctx: RunContext) -> str:
        raise StepError("the probe image would not start")
    return Step("start probe", lambda ctx: Check(True, "start the probe"), apply,
                lambda ctx: "verified", None)


def _run_stop_then_fail(nctx: NodeContext) -> Any:
    """The swap's real 'stop resident' step, then a probe start that fails, under the swap's
    own policy: the automatic restore must start the resident again."""
    rb, steps = _swap_steps(nctx)
    run = Runbook("swap", [steps["stop resident"], _failing_probe_step()], journal=None,
                  policy=rb.policy, facts={"resident": dict(RESIDENT)})
    return run.run()


# -- swap: the automatic restore ----------------------------------------------------------------
def test_a_failed_swap_restores_the_resident_automatically(swap_ctx: FakeNodeContext) -> None:
    res = swap_ctx.engine.add("res0001", "seat-resident", RESIDENT["image_id"], running=True)
    result = _run_stop_then_fail(swap_ctx)
    assert swap_ctx.engine.calls == [("stop", "seat-resident"), ("start", "seat-resident")]
    assert res.attrs["State"]["Running"] is True
    assert result.outcome == "undone", result
    assert not result.remaining


def test_restore_refuses_a_resident_whose_image_changed(swap_ctx: FakeNodeContext) -> None:
    swap_ctx.engine.add("res0001", "seat-resident", "sha256:" + "b" * 64, running=True)
    result = _run_stop_then_fail(swap_ctx)
    # the resident was stopped; the undo must not start a container on another image
    assert ("start", "seat-resident") not in swap_ctx.engine.calls
    assert result.outcome == "partial"
    assert any("now has image sha256:bbbb" in r for r in result.remaining), result.remaining


def test_the_probe_must_run_the_image_the_swap_resolved(swap_ctx: FakeNodeContext) -> None:
    _, steps = _swap_steps(swap_ctx)
    swap_ctx.engine.add("prb0001", "seat-probe", "sha256:" + "c" * 64, running=True)
    ctx = RunContext(run_id="swap-1", runbook="swap", inputs={},
                     facts={"probe_id": "prb0001", "probe_image_id": "sha256:" + "d" * 64})
    with pytest.raises(StepError, match="the probe runs image sha256:cccc"):
        steps["start probe"].verify(ctx)
    ctx.facts["probe_image_id"] = "sha256:" + "c" * 64
    assert "running image" in steps["start probe"].verify(ctx)


# -- backport: base digest vs image ID, content-hash label --------------------------------------
DIGEST = "sha256:" + "ab" * 32
BASE = f"127.0.0.1:15000/engine@{DIGEST}"


def _backport_profile(tmp_path: Path, env: str = 'SEAT_PLE_OFFLOAD = "1"') -> Any:
    (tmp_path / "patched.py").write_text("x = 1\n")
    f = tmp_path / "p.toml"
    f.write_text('[resident]\nname = "r"\n[[silence.matchers]]\nname = "instance"\n'
                 f'value = "n:8000"\n[backport]\nbase = "{BASE}"\n'
                 'tag = "127.0.0.1:15000/seat-backport:{content_hash}"\n'
                 f"env = {{ {env} }}\n[[backport.files]]\nsource = \"patched.py\"\n"
                 f'dest = "/usr/lib/x.py"\noriginal_sha256 = "{"cd" * 32}"\n')
    return load_profile(f)


def _base_step(loaded: Any, engine: FakeEngine) -> Step:
    rb = bp.build_runbook(loaded, _Client(engine), None)
    return rb.steps[0]


def _ctx() -> RunContext:
    return RunContext(run_id="bp-1", runbook="build-backport", inputs={}, facts={})


def test_a_base_digest_that_is_a_local_image_id_is_refused_with_the_reason(tmp_path) -> None:
    engine = FakeEngine()
    # built locally, never pushed: its ID is the profile's "digest", RepoDigests is empty
    engine.images[DIGEST] = {"Id": DIGEST, "RepoDigests": [], "RepoTags": ["engine:local"]}
    step = _base_step(_backport_profile(tmp_path), engine)
    with pytest.raises(StepError, match="is the IMAGE ID of a local image") as e:
        step.check(_ctx())
    assert "engine:local" in str(e.value) and "docker push" in str(e.value)


def test_an_image_without_the_repo_digest_is_not_the_base(tmp_path) -> None:
    engine = FakeEngine()
    other = "127.0.0.1:15000/engine@sha256:" + "ef" * 32
    engine.images[BASE] = {"Id": "sha256:" + "11" * 32, "RepoDigests": [other]}
    c = _base_step(_backport_profile(tmp_path), engine).check(_ctx())
    assert c.go is True and "pull base" in c.text   # pulled by digest, not taken as it is
    engine.images[BASE]["RepoDigests"] = [other, BASE]
    ctx = _ctx()
    c = _base_step(_backport_profile(tmp_path), engine).check(ctx)
    assert c.go is False and ctx.facts["base_image_id"] == "sha256:" + "11" * 32


def test_content_hash_covers_env_and_is_the_label(tmp_path) -> None:
    a = bp.BackportInputs.from_spec(_backport_profile(tmp_path).profile.backport)
    b = bp.BackportInputs.from_spec(
        _backport_profile(tmp_path, env='SEAT_PLE_OFFLOAD = "0"').profile.backport)
    assert a.content_hash != b.content_hash and a.tag != b.tag
    assert a.tag.endswith(":" + a.content_hash)
    labels = bp.provenance_labels(a, "f" * 64)
    assert labels[f"{bp.LABEL_PREFIX}.content-hash"] == a.content_hash
    assert labels[f"{bp.LABEL_PREFIX}.base"] == BASE


@pytest.mark.parametrize("label_matches", [True, False])
def test_an_existing_tag_is_reused_only_when_its_content_hash_label_matches(
        tmp_path, monkeypatch, label_matches) -> None:
    loaded = _backport_profile(tmp_path)
    inputs = bp.BackportInputs.from_spec(loaded.profile.backport)
    engine = FakeEngine()
    engine.images[BASE] = {"Id": "sha256:" + "11" * 32, "RepoDigests": [BASE]}
    engine.images[inputs.tag] = {"Id": "sha256:" + "22" * 32, "Config": {"Labels": {
        f"{bp.LABEL_PREFIX}.content-hash": inputs.content_hash if label_matches else "0" * 16}}}
    # reading files out of an image needs a container: the file check is not what this is about
    monkeypatch.setattr(bp, "read_image_files", lambda client, image, paths: {})
    monkeypatch.setattr(bp, "check_files", lambda inputs, found: ["/usr/lib/x.py: sha256 ok"])
    rb = bp.build_runbook(loaded, _Client(engine), None)
    build = next(s for s in rb.steps if s.name.startswith("build"))
    ctx = _ctx()
    ctx.facts["base_image_id"] = "sha256:" + "11" * 32
    c = build.check(ctx)
    if label_matches:
        assert c.go is False and "no-op" in c.text and ctx.facts["image_id"] == "sha256:" + "22" * 32
    else:
        assert c.go is True and "no-op" not in c.text and "image_id" not in ctx.facts


def test_sha256_file_is_the_file_hash(tmp_path) -> None:
    f = tmp_path / "x"
    f.write_bytes(b"abc")
    assert bp.sha256_file(f) == hashlib.sha256(b"abc").hexdigest()


# -- the typed seat-name confirmation (CLI) -----------------------------------------------------
class _FakeSwapRunbook:
    """What ``seat-console swap`` gets from ``build_swap``: a plan that would go, and a run that
    records that it ran (nothing touches a node)."""

    ran: list[str] = []

    def plan(self) -> Any:
        from seat_console.actions.runbook import Plan, PlanLine

        return Plan("swap", (PlanLine("stop resident", True, "stop seat-resident"),))

    def run(self) -> Any:
        _FakeSwapRunbook.ran.append("run")
        return Runbook("swap", [], journal=None).run()


@pytest.mark.parametrize("typed, code, ran", [
    ("seat-node", 0, ["run"]), ("  seat-node \n", 0, ["run"]),
    ("Seat-Node", 6, []), ("y", 6, []), ("", 6, []), ("seat-nod", 6, []), (None, 6, [])])
def test_swap_runs_only_when_the_seat_name_is_typed(tmp_path, monkeypatch, capsys, typed,
                                                    code, ran) -> None:
    import builtins
    import sys

    from seat_console.cli import main

    f = tmp_path / "p.toml"
    f.write_text(SWAP_PROFILE)
    monkeypatch.setenv("SEAT_CONSOLE_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.setenv("SEAT_CONSOLE_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setattr(swap_mod, "build_swap", lambda *a, **k: _FakeSwapRunbook())
    monkeypatch.setattr(sys.stdin, "isatty", lambda: True, raising=False)
    asked: list[str] = []

    def fake_input(prompt: str = "") -> str:
        asked.append(prompt)
        if typed is None:
            raise EOFError
        return typed
    monkeypatch.setattr(builtins, "input", fake_input)
    _FakeSwapRunbook.ran = []
    rc = main(["--profile", str(f), "swap"])
    out, err = capsys.readouterr()
    assert rc == code, out + err
    assert _FakeSwapRunbook.ran == ran
    assert asked == ["Type the seat's name (seat-node) to proceed: "]
    if code:
        assert "nothing was changed" in err


def test_swap_yes_skips_the_question_and_no_terminal_refuses(tmp_path, monkeypatch) -> None:
    import builtins
    import sys

    from seat_console.cli import main

    f = tmp_path / "p.toml"
    f.write_text(SWAP_PROFILE)
    monkeypatch.setenv("SEAT_CONSOLE_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.setenv("SEAT_CONSOLE_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setattr(swap_mod, "build_swap", lambda *a, **k: _FakeSwapRunbook())
    monkeypatch.setattr(builtins, "input", lambda *a: pytest.fail("asked"))
    monkeypatch.setattr(sys.stdin, "isatty", lambda: False, raising=False)
    _FakeSwapRunbook.ran = []
    assert main(["--profile", str(f), "swap"]) == 2 and _FakeSwapRunbook.ran == []
    assert main(["--profile", str(f), "swap", "--yes"]) == 0 and _FakeSwapRunbook.ran == ["run"]


# -- the hold: no timer stopped without an armed lease; expiry = now + TTL ----------------------
def _hold_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
              states: dict[str, tuple[str, str]]) -> tuple[Any, dict[str, Step]]:
    """``build_hold`` over a node whose timers read as ``states`` (unit → (active, sub)); the
    read is the node seam (``read_timers`` over the transport)."""
    from datetime import UTC, datetime

    from app_fixtures import default_loaded

    from seat_console.actions import hold as hold_mod
    from seat_console.actions import node_ops
    from seat_console.actions.journal import Journal
    from seat_console.sources.timers import TimersReading, TimerState

    def fake_read(transport: Any, units: Any, **kw: Any) -> TimersReading:
        out = []
        for u in units:
            active, sub = states.get(u, ("inactive", "dead"))
            out.append(TimerState(unit=u, load_state="loaded" if u in states else "not-found",
                                  active_state=active, sub_state=sub))
        return TimersReading(read_at=datetime.now(UTC), where="fake", timers=tuple(out))
    monkeypatch.setattr(hold_mod, "read_timers", fake_read)
    monkeypatch.setattr(node_ops, "read_timers", fake_read)
    nctx = NodeContext(default_loaded(), transport=object(), alertmanager=object())
    rb = hold_mod.build_hold(nctx, Journal(tmp_path / "j.sqlite3"), ttl_s=600)
    return rb, {s.name: s for s in rb.steps}


def test_a_timer_is_not_stopped_while_the_lease_is_not_armed(tmp_path, monkeypatch) -> None:
    from app_fixtures import default_loaded

    unit = NodeContext(default_loaded()).timer_units[0]
    states = {unit: ("active", "waiting")}
    rb, steps = _hold_run(tmp_path, monkeypatch, states)
    h = rb.ctx.facts["hold"]
    h.update(lease_planned=True, to_stop=[unit], expires_at="2026-12-01T12:00:00Z")
    lease = f"{h['lease']}.timer"
    states[lease] = ("inactive", "dead")                 # the lease never armed / was cancelled
    with pytest.raises(StepError, match="is not armed.*refusing to stop"):
        steps[f"stop {unit}"].check(rb.ctx)
    states[lease] = ("active", "waiting")                # armed: the stop may go
    assert steps[f"stop {unit}"].check(rb.ctx).go is True
    h["lease_planned"] = False                           # the lease step was refused: skip
    c = steps[f"stop {unit}"].check(rb.ctx)
    assert c.go is False and "no timer is stopped without a lease" in c.text


def test_the_hold_expires_ttl_seconds_from_now(tmp_path, monkeypatch) -> None:
    from datetime import UTC, datetime, timedelta

    from seat_console.actions import hold as hold_mod
    from seat_console.actions import node_ops
    from seat_console.node.runner import CommandResult

    rb, steps = _hold_run(tmp_path, monkeypatch, {})
    got: dict[str, Any] = {}

    def fake_schedule(transport: Any, name: str, ttl_s: int, timers: Any, **kw: Any) -> Any:
        got["ttl_s"] = ttl_s
        return None, CommandResult(argv=("systemd-run",), rc=0, stdout="ok", ok=True,
                                   started_at=datetime.now(UTC), duration_s=0.01)

    def fake_silence(am: Any, matchers: Any, *, ends_at: datetime, **kw: Any) -> Any:
        got["ends_at"] = ends_at
        return type("S", (), {"id": "sil-1"})()
    monkeypatch.setattr(node_ops, "schedule_lease", fake_schedule)
    monkeypatch.setattr(node_ops, "create_silence", fake_silence)
    before = datetime.now(UTC)
    steps["schedule lease"].apply(rb.ctx)
    after = datetime.now(UTC)
    exp = hold_mod._from_iso(rb.ctx.facts["hold"]["expires_at"])
    assert got["ttl_s"] == 600
    assert before + timedelta(seconds=599) <= exp <= after + timedelta(seconds=601)
    steps["silence seat"].apply(rb.ctx)
    assert got["ends_at"] == exp                        # the silence ends with the lease


@pytest.mark.parametrize("answer, goes", [("y", True), ("YES", True), (" y ", True), ("", False),
                                          ("n", False), ("sure", False), (None, False)])
def test_the_y_n_confirmation_goes_only_on_yes(monkeypatch, capsys, answer, goes) -> None:
    import builtins
    import sys

    from seat_console.actions.runbook import Plan, PlanLine
    from seat_console.commands import action_common as ac

    def fake_input(prompt: str = "") -> str:
        if answer is None:
            raise EOFError
        return answer
    monkeypatch.setattr(sys.stdin, "isatty", lambda: True, raising=False)
    monkeypatch.setattr(builtins, "input", fake_input)
    plan = Plan("hold", (PlanLine("stop a.timer", True, "stop a.timer"),))
    code = ac.confirm(plan, "hold", False, "seat-console hold")
    assert code == (None if goes else ac.EXIT_DECLINED)
    if not goes:
        assert "declined; nothing was changed" in capsys.readouterr().err
    assert ac.confirm(plan, "hold", True, "seat-console hold") is None


class _FakeAM:
    """The Alertmanager client as the hold's verify reads it: one stored silence."""

    def __init__(self, silence: Any) -> None:
        self.silence = silence

    def get_silence(self, sid: str) -> Any:
        assert sid == self.silence.id
        return self.silence


@pytest.mark.parametrize("state, end_off_s, ok", [
    ("active", 0, True), ("active", 0.5, True), ("active", 120, False), ("active", -3600, False),
    ("pending", 0, False), ("expired", 0, False)])
def test_the_silence_must_read_back_active_until_the_hold_expires(
        tmp_path, monkeypatch, state, end_off_s, ok) -> None:
    from datetime import UTC, datetime, timedelta

    from seat_console.actions import hold as hold_mod
    from seat_console.sources.silences import Silence

    from app_fixtures import default_loaded

    rb, steps = _hold_run(tmp_path, monkeypatch, {})
    h = rb.ctx.facts["hold"]
    exp = datetime.now(UTC).replace(microsecond=0) + timedelta(minutes=10)
    h.update(expires_at=hold_mod.iso(exp), silence_id="sil-1")
    matchers = tuple(NodeContext(default_loaded()).silence_matchers())
    s = Silence(id="sil-1", state=state, matchers=matchers, starts_at=exp - timedelta(minutes=10),
                ends_at=exp + timedelta(seconds=end_off_s))
    step = steps["silence seat"]
    monkeypatch.setattr(hold_mod, "_am", lambda nctx: _FakeAM(s))
    if ok:
        assert "active until" in step.verify(rb.ctx)
    else:
        with pytest.raises(StepError, match="reads back wrong"):
            step.verify(rb.ctx)


def test_the_planned_expiry_is_ttl_from_now(tmp_path, monkeypatch) -> None:
    from datetime import UTC, datetime, timedelta

    from seat_console.actions import hold as hold_mod

    rb, steps = _hold_run(tmp_path, monkeypatch, {})
    monkeypatch.setattr(hold_mod, "am_reachable", lambda nctx: None)
    monkeypatch.setattr(hold_mod, "coverage_warnings", lambda matchers, endpoint, instance=None: [])
    monkeypatch.setattr(hold_mod, "_am", lambda nctx: type("AM", (), {"url": "http://am"})())
    before = datetime.now(UTC)
    c = steps["silence seat"].check(rb.ctx)       # planned: expires_at not fixed yet
    after = datetime.now(UTC)
    until = datetime.fromisoformat(c.text.split(" until ")[1].split(";")[0].split(" ")[0]
                                   .replace("Z", "+00:00"))
    assert before + timedelta(seconds=599) <= until <= after + timedelta(seconds=601)
