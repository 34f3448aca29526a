"""Promote: the candidate in the seat becomes the seat's resident; and its undo.

**Promote** (:func:`build_promote`, runbook ``promote``, policy ``undo``):

1. **check seat** — precondition, read now from docker, the journal and the seat endpoint:
   the seat-state file is readable; a hold is active (:func:`~seat_console.actions.hold.
   active_hold`); the candidate (the ``[swap]`` probe container) is running and the resident
   (:func:`~seat_console.actions.swap.resident_name`) is not; a journaled ``swap`` started that
   candidate (its recorded resident is the rollback); the candidate serves (``/health`` 200,
   ``/v1/models`` lists ``swap.served_model_name``); and the newest ``decide`` journal row says
   **PROMOTE-ABLE** for the image the candidate runs (:func:`decision_images`). Otherwise it is
   refused with that state and the fix — unless ``force`` with a ``reason`` (journaled, fact
   ``forced``, written in the seat-state file). Apply: record the candidate's launch record
   (image ID and repo digests, entrypoint/cmd, env *names* — never values —, mounts, GPUs by
   UUID, container ID; :func:`launch_record`) and the old resident's, as facts ``promoted`` and
   ``previous``.
2. **rename candidate** — the candidate container (running; nothing restarts) is renamed
   ``<resident>-promoted-<UTC>`` so the probe's name is free for the next swap and no prune of
   kept probes can ever take it. Undo: renamed back.
3. **write seat state** — ``seat.json`` in the state dir (:mod:`seat_console.core.seat_file`)
   names the promoted container as the resident and keeps the previous one's record; written
   atomically, the version it replaces kept as ``seat.json.prev``. From here on every
   ``swap``, ``restore`` and ``compare`` reads the resident through that file. Verify: read
   back. Undo: the version before put back (or the file moved aside when there was none).
4. **write profile** — when the profile is a writable file: a new version with the sides
   exchanged (``[resident]`` = the candidate's checkpoint, container and image by digest;
   ``[candidate]`` = the old resident), validated before it is written atomically, the old
   text kept beside it as ``<profile>.before-<run id>``. A read-only (or the embedded) profile
   is left alone and the plan says so: then the seat-state file alone names the resident.
   Undo: the old text back, when the file is still the version this run wrote.
5. **verify serving** — the seat-state file read back names the promoted container, which is
   running, and its endpoint answers ``/health``, ``/v1/models`` and one completion
   (:func:`~seat_console.actions.swap.completion`).

The old resident's container is never removed: it stays stopped, recorded in the seat-state
file's ``previous``, for the undo.

**Promote undo** (:func:`build_promote_undo`, runbook ``promote-undo``, policy ``undo``): from
the seat-state file and the promote run it names: (needs an active hold: it takes the seat
down) stop the promoted container (kept); start the previous resident as recorded and verify
its image ID, ``/health`` and one completion; put the profile back when the promote wrote it
and nobody changed it since; put the seat-state file back to the version before the promote
(verified: a console started now reads the previous resident). A failure undoes in reverse (the promoted container started and serving again).

After a kill -9, ``seat-console recover --undo`` finishes either run (:func:`rebuild`): every
undo reads the node and the files first and does only what is still changed.
"""

from __future__ import annotations

import hashlib
import os
import re
import tempfile
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from seat_console.actions import hold as hold_mod
from seat_console.actions.approval import approval_gate
from seat_console.actions import swap as swap_mod
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
from seat_console.core.seat_file import (
    SeatFile,
    SeatFileError,
    parse_record,
    parse_seat_file,
    prev_path,
    read_seat_file,
    seat_file_path,
)
from seat_console.node.context import NodeContext

DECISIONS = ("PROMOTE-ABLE", "KEEP", "INCONCLUSIVE")
"""The outcomes a ``decide`` row may carry (:data:`seat_console.actions.decide.OUTCOMES`)."""
_ZERO = datetime(1970, 1, 1, tzinfo=UTC)
"""A placeholder time: ``promoted_name(nctx, _ZERO)[:-16]`` is the name's stem (plan text)."""
PROMOTED_SUFFIX_RE = re.compile(r"-promoted-\d{8}T\d{6}Z$")
"""The suffix a promoted container's name carries (stripped before a new one is added)."""


# -- reads -----------------------------------------------------------------------------------------
def newest_decision(journal: Journal) -> dict[str, Any] | None:
    """The newest decision in the journal (:func:`seat_console.actions.decide.newest_decision`:
    the ``decide`` row's facts plus ``run_id``, ``at``, ``by``), or ``None`` when none was
    journaled. Raises :class:`StepError` naming the row and the fix when the newest row is not
    a decision (an older one is never used in its place)."""
    from seat_console.actions.decide import DecisionRowError
    from seat_console.actions.decide import newest_decision as decide_newest

    try:
        return decide_newest(journal)
    except DecisionRowError as exc:
        raise StepError(f"{exc}: decide again (`seat-console decide`); or --force --reason "
                        "TEXT") from None


def decision_images(decision: Mapping[str, Any], runs_root: Path | None = None) -> set[str]:
    """The candidate image IDs a decision speaks about: the image ID of every probe run it
    cites (``runs``) whose identity recorded the probe container (:func:`seat_console.probe.
    store.list_runs`, role ``probe``): the arms come from the runs' identity. Runs that cannot
    be read are skipped (the set is then smaller, never guessed)."""
    from seat_console.probe.store import list_runs

    out: set[str] = set()
    runs = {r for r in decision.get("runs") or [] if isinstance(r, str)}
    if runs:
        for row in list_runs(runs_root):
            c = row.get("container") or {}
            if row.get("run_id") in runs and c.get("role") == "probe" and c.get("image_id"):
                out.add(str(c["image_id"]))
    return out


def decision_problem(decision: Mapping[str, Any] | None, image_id: str | None,
                     runs_root: Path | None = None) -> str | None:
    """Why ``decision`` does not allow promoting the candidate running ``image_id`` — a
    sentence with the state and the fix — or ``None`` when it is PROMOTE-ABLE for it
    (``image_id`` ``None``: no candidate container to compare it with — only the decision's
    outcome is checked)."""
    if decision is None:
        return ("no decision in the journal: compare the candidate with the resident "
                "(`seat-console compare`) and decide (`seat-console decide`); or "
                "--force --reason TEXT")
    what = decision.get("decision")
    when = f"decide run {decision.get('run_id', '?')} at {decision.get('at', '?')}"
    needs = decision.get("needs")
    needs_text = f"; it needs: {needs}" if isinstance(needs, str) and needs else ""
    if what == "KEEP":
        return (f"the newest decision ({when}) is KEEP{needs_text}: keep the resident "
                "(`seat-console restore`); or --force --reason TEXT")
    if what == "INCONCLUSIVE":
        return (f"the newest decision ({when}) is INCONCLUSIVE{needs_text}: measure more "
                "(`seat-console compare`) and decide again; or --force --reason TEXT")
    if what != "PROMOTE-ABLE":
        return (f"the newest decision ({when}) is {what!r}, not one of {', '.join(DECISIONS)}: "
                "decide again (`seat-console decide`); or --force --reason TEXT")
    images = decision_images(decision, runs_root)
    if image_id is not None and image_id not in images:
        seen = ", ".join(sorted(i[:19] + "…" for i in images)) or "no readable run identity"
        return (f"the newest decision ({when}) is PROMOTE-ABLE for {seen}, not for the "
                f"candidate in the seat (image ID {image_id[:19]}…): decide on this candidate "
                "(`seat-console compare`, `seat-console decide`); or --force --reason TEXT")
    return None


def swap_of(journal: Journal, probe_id: str) -> list[Entry] | None:
    """The newest ``swap`` run that started the container ``probe_id`` and recorded a
    resident (its rows), or ``None``."""
    best: list[Entry] | None = None
    for rows in journal.runs().values():
        if not rows or rows[0].runbook != "swap":
            continue
        f = facts_from_rows(rows)
        if f.get("probe_id") == probe_id and f.get("resident"):
            if best is None or rows[0].at >= best[0].at:
                best = rows
    return best


def launch_record(c: Any, *, endpoint: str = "", models: list[str] | None = None
                  ) -> dict[str, Any]:
    """A container's launch record (:mod:`seat_console.core.seat_file` RECORD): the
    :func:`~seat_console.actions.swap.identity` (image ID, repo digests, entrypoint/cmd, env
    names only, stop timeout, models at ``endpoint`` or ``models``) plus ``mounts``
    (``"source:destination[:ro]"``) and ``gpus`` (device IDs of its NVIDIA device requests)."""
    rec = swap_mod.identity(c, endpoint, models=models)
    mounts = []
    for m in c.attrs.get("Mounts") or []:
        if isinstance(m, dict) and m.get("Destination"):
            src = m.get("Source") or m.get("Name") or ""
            mounts.append(f"{src}:{m['Destination']}" + ("" if m.get("RW", True) else ":ro"))
    gpus: list[str] = []
    for dr in ((c.attrs.get("HostConfig") or {}).get("DeviceRequests") or []):
        if isinstance(dr, dict):
            gpus.extend(str(g) for g in dr.get("DeviceIDs") or [])
    return {**rec, "mounts": mounts, "gpus": gpus}


def promoted_name(nctx: NodeContext, at: datetime | None = None) -> str:
    """``<profile resident container>-promoted-<YYYYmmddTHHMMSSZ>``: the name the candidate
    takes when promoted (an earlier promotion's suffix is replaced, not stacked)."""
    base = PROMOTED_SUFFIX_RE.sub("", nctx.profile.resident.container or "seat-resident")
    return f"{base}-promoted-{(at or datetime.now(UTC)):%Y%m%dT%H%M%SZ}"


# -- files -----------------------------------------------------------------------------------------
def write_atomic(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` atomically: a temporary file in the same directory,
    ``fsync``, ``os.replace``, then the directory ``fsync``'d (a crash leaves the old or the new
    version, never half of one). Raises :class:`OSError`."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    dfd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(dfd)
    finally:
        os.close(dfd)


def _read_text(path: Path) -> str | None:
    try:
        return path.read_text("utf-8")
    except FileNotFoundError:
        return None


def put_seat_file(text: str | None, path: Path | None = None) -> str:
    """Make the seat-state file hold ``text`` (``None``: no file), keeping the version it
    replaces as ``seat.json.prev``. ``text`` is parsed first (a :class:`SeatFileError` is
    raised before anything is written). Returns a sentence. Raises :class:`OSError`."""
    p = path or seat_file_path()
    if text is not None:
        parse_seat_file(text, str(p))
    cur = _read_text(p)
    if cur == text:
        return f"{p} already {'absent' if text is None else 'as wanted'}"
    if cur is not None:
        write_atomic(prev_path(p), cur)
    if text is None:
        if cur is not None:
            os.unlink(p)
        return f"{p} removed (the promoted version kept as {prev_path(p).name})"
    write_atomic(p, text)
    return f"{p} written" + (f" (the version before kept as {prev_path(p).name})"
                             if cur is not None else "")


def _seat_read(sp: Path) -> SeatFile | None:
    """:func:`read_seat_file` of ``sp``, its :class:`SeatFileError` a :class:`StepError`."""
    try:
        return read_seat_file(sp)
    except SeatFileError as exc:
        raise StepError(str(exc)) from None


def _seat_put(text: str | None, sp: Path, what: str = "") -> str:
    """:func:`put_seat_file` of ``text`` at ``sp``; an error is a :class:`StepError`
    ``"<sp>: <what>: <error>"``."""
    try:
        return put_seat_file(text, sp)
    except (OSError, SeatFileError) as exc:
        raise StepError(f"{sp}: {what + ': ' if what else ''}{exc}") from None


def profile_writable(nctx: NodeContext) -> tuple[Path | None, str]:
    """``(path, why)``: the profile's file when this user may replace it atomically (file and
    directory writable), else ``None`` and why not (embedded default, read-only)."""
    src = nctx.loaded.source
    if src.startswith("<"):
        return None, f"the profile is the {src}, not a file"
    p = Path(src)
    if not p.is_file():
        return None, f"{p} is not a regular file"
    if not os.access(p, os.W_OK) or not os.access(p.parent, os.W_OK):
        return None, f"{p} (or its directory) is not writable by this user"
    return p, ""


def _image_ref(rec: Mapping[str, Any]) -> str:
    """The image by digest (its first repo digest), else by image ID."""
    digests = rec.get("repo_digests") or []
    return str(digests[0]) if digests else str(rec["image_id"])


def new_profile_text(text: str, source: str, new_container: str,
                     promoted: Mapping[str, Any]) -> str:
    """The profile ``text`` with its sides exchanged for a promotion: ``[resident]`` takes
    the ``[candidate]`` checkpoint's keys (when there is a ``[candidate]``; with its
    ``requires``: what that model needs from its image) with ``container`` = ``new_container`` and
    ``image`` = the promoted image by digest; ``[candidate]`` takes the old ``[resident]``.
    Comments and layout are kept (tomlkit). The result is validated
    (:func:`~seat_console.core.profile.parse_profile`); raises :class:`StepError` naming the
    profile when it would not be valid."""
    import tomlkit
    from tomlkit.exceptions import TOMLKitError

    from seat_console.core.profile import ProfileError, parse_profile

    try:
        doc = tomlkit.parse(text)
    except TOMLKitError as exc:
        raise StepError(f"{source}: cannot be rewritten: {exc}") from None
    old_res = doc.get("resident")
    if not isinstance(old_res, Mapping):
        raise StepError(f"{source}: has no [resident] table to rewrite")
    cand = doc.get("candidate")
    new_res = tomlkit.table()
    src_tab = cand if isinstance(cand, Mapping) else old_res
    for k, v in src_tab.items():
        new_res[k] = v
    new_res["container"] = new_container
    new_res["image"] = _image_ref(promoted)
    if isinstance(cand, Mapping):
        new_cand = tomlkit.table()
        for k, v in old_res.items():
            new_cand[k] = v
        doc["candidate"] = new_cand
    doc["resident"] = new_res
    out = tomlkit.dumps(doc)
    try:
        prof = parse_profile(out, source)
    except ProfileError as exc:
        raise StepError(f"the new profile version would not be valid, so it is not written: "
                        f"{exc}") from None
    if prof.resident.container != new_container:
        raise StepError(f"{source}: the rewrite did not name {new_container} as the resident")
    return out


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _unplanned(ctx: RunContext, would: str) -> Check | None:
    """The plan line of a step after a refused ``check seat`` (nothing recorded to act on):
    ``would``, what the step does once the refusals are fixed (the plan shows it under one
    "once … fixed" line, :meth:`~seat_console.actions.runbook.Plan.text_lines`); ``None``
    when the check recorded its facts."""
    if ctx.facts.get("promoted") and ctx.facts.get("previous"):
        return None
    return Check(True, would)


# -- promote ---------------------------------------------------------------------------------------
def build_promote(nctx: NodeContext, journal: Journal, *, force: bool = False, reason: str = "",
                  observer: Observer | None = None, run_id: str | None = None,
                  facts: dict[str, Any] | None = None, runs_root: Path | None = None,
                  seat_path: Path | None = None) -> Runbook:
    """The promote runbook (module docstring). ``force`` + ``reason``: promote without a
    PROMOTE-ABLE decision for the candidate (journaled; the seat-state file records it);
    ``runs_root``: the probe run store the decision's runs are read from (default the data
    dir's); ``seat_path``: the seat-state file (default :func:`~seat_console.core.seat_file.
    seat_file_path`). Building reads nothing; every step reads the node when it runs."""
    sp = seat_path or seat_file_path()

    def probe_name() -> str:
        return swap_mod._swap_spec(nctx).container

    def pre_check(ctx: RunContext) -> Check:
        if force and not reason.strip():
            raise StepError("--force needs --reason TEXT (it is journaled)")
        for key in ("seat_before", "seat_promoted", "profile", "forced"):
            ctx.facts.pop(key, None)    # derived by the checks below from what is read now
        problems: list[str] = []        # every refusal, each with its state and fix
        try:
            resident: str | None = swap_mod.resident_name(nctx)   # the seat-state file first
        except StepError as exc:
            resident = None
            problems.append(str(exc))
        spec = swap_mod._swap_spec(nctx)
        h = hold_mod.active_hold(journal)
        if h is None:
            problems.append("no active hold: the seat is not held; place one "
                            "(`seat-console hold`) before changing its resident")
        else:
            ctx.facts["hold_id"] = h.hold_id
        cand = old = prev_rec = rows = models = client = None
        try:
            try:
                client = swap_mod._client(nctx)
                res = swap_mod._inspect(client, resident) if resident else None
                cand = swap_mod._inspect(client, spec.container)
                if swap_mod._running(res):
                    cand_state = "running too" if swap_mod._running(cand) else "not running"
                    problems.append(f"the resident {resident} holds the seat (running; "
                                    f"{spec.container} is {cand_state}): nothing to promote; swap "
                                    "the candidate in first (`seat-console swap`)")
                elif not swap_mod._running(cand):
                    problems.append(f"the candidate {spec.container} is not running (and the "
                                    f"resident {resident} is stopped): the seat is empty; "
                                    "`seat-console restore` brings the resident back")
                if swap_mod._running(cand):
                    rows = swap_of(journal, cand.id)
                    if rows is None:
                        problems.append(f"no journaled swap started {spec.container} "
                                        f"({cand.id[:12]}) and recorded the resident it replaced: "
                                        "nothing to roll back to; restore the resident and swap "
                                        "with `seat-console swap`")
                    else:
                        prev_rec = facts_from_rows(rows)["resident"]
                        old = swap_mod._inspect(client, prev_rec["id"])
                        if old is None:
                            problems.append(f"the resident {prev_rec['name']} "
                                            f"({prev_rec['id'][:12]}) that the swap recorded is "
                                            "gone: no rollback would be possible")
                    endpoint = swap_mod._probe_endpoint(nctx)
                    if swap_mod._health(endpoint) != 200:
                        problems.append(f"the candidate does not serve: {endpoint}/health is not "
                                        "200; wait for it, or `seat-console restore`")
                    else:
                        models = swap_mod._models(endpoint)
                        if models is None or spec.served_model_name not in models:
                            problems.append(f"the candidate does not serve "
                                            f"{spec.served_model_name}: {endpoint}/v1/models lists "
                                            f"{models}")
            except StepError:
                raise
            except Exception as exc:  # noqa: BLE001 - docker unreadable: a refusal, said
                problems.append(f"docker cannot be read ({type(exc).__name__}: {exc}): who "
                                "holds the seat is unknown; check `docker ps` on the node")
                cand = None
            image_id = cand.attrs["Image"] if cand is not None else None
            try:
                decision = newest_decision(journal)
            except StepError as exc:   # not a decision: refused, --force or not
                decision, problem = None, None
                problems.append(str(exc))
            else:
                problem = decision_problem(decision, image_id, runs_root)
            ctx.facts["decision"] = ({k: decision.get(k) for k in
                                      ("decision", "run_id", "at", "bracket_id",
                                       "report_sha256")} if decision else None)
            if problem is not None and not force:
                problems.append(problem)
            if problems:
                raise Refusals(problems)
            if problem is not None:
                ctx.facts["forced"] = reason
                ctx.warn(f"promoting without a PROMOTE-ABLE decision (--force: {reason}): "
                         f"{problem}", "check seat")
            ctx.facts.update(
                promoted=launch_record(cand, models=models),
                previous=launch_record(old, models=list(prev_rec.get("models") or [])),
                swap_run_id=rows[0].run_id, new_name=ctx.facts.get("new_name")
                or promoted_name(nctx))
        finally:
            if client is not None:
                client.close()
        dec = ("forced: " + reason if problem is not None else
               f"decision PROMOTE-ABLE ({ctx.facts['decision']['run_id']})")
        return Check(True, f"{spec.container} ({cand.id[:12]}, image ID {image_id[:19]}…) "
                           f"serves in the seat; {dec}; hold {h.hold_id}; the old resident "
                           f"{prev_rec['name']} stays stopped and kept for `promote --undo`")

    def pre_apply(ctx: RunContext) -> str:
        p = ctx.facts["promoted"]
        return (f"recorded {p['name']} ({p['id'][:12]}): image {_image_ref(p)}, cmd "
                f"{p.get('cmd')}, env names {p.get('env_names')}, mounts {p.get('mounts')}, "
                f"GPUs {p.get('gpus') or 'none'}")

    def pre_verify(ctx: RunContext) -> str:
        for key in ("promoted", "previous"):
            try:
                parse_record(ctx.facts.get(key), key)
            except ValueError as exc:
                raise StepError(f"the {key} launch record is not complete: {exc}") from None
        return (f"candidate {ctx.facts['promoted']['id'][:12]} and old resident "
                f"{ctx.facts['previous']['name']} recorded")

    # 2. rename
    def ren_check(ctx: RunContext) -> Check:
        if (u := _unplanned(ctx, f"rename {probe_name()} to {promoted_name(nctx, _ZERO)[:-16]}"
                                 "<UTC> (running; nothing restarts)")) is not None:
            return u
        return Check(True, f"rename {probe_name()} to {ctx.facts.get('new_name')} (running; "
                           "nothing restarts): the probe's name is free for the next swap")

    def ren_apply(ctx: RunContext) -> str:
        client = swap_mod._client(nctx)
        try:
            c = swap_mod._inspect(client, ctx.facts["promoted"]["id"])
            if c is None:
                raise StepError("the candidate container vanished")
            if c.name == ctx.facts["new_name"]:
                return f"already named {c.name}"
            swap_mod._expect(nctx, c.name, ("rename",))
            swap_mod._expect(nctx, ctx.facts["new_name"], ("rename",))
            c.rename(ctx.facts["new_name"])
        finally:
            client.close()
        return f"renamed {probe_name()} to {ctx.facts['new_name']}"

    def ren_verify(ctx: RunContext) -> str:
        c = swap_mod._inspect_once(nctx, ctx.facts["promoted"]["id"])
        if c is None or c.name != ctx.facts["new_name"] or not swap_mod._running(c):
            raise StepError(f"{ctx.facts['promoted']['id'][:12]} is not running as "
                            f"{ctx.facts['new_name']}")
        ctx.facts["promoted"]["name"] = ctx.facts["new_name"]
        return f"{ctx.facts['new_name']} running"

    def ren_undo(ctx: RunContext) -> str:
        client = swap_mod._client(nctx)
        try:
            c = swap_mod._inspect(client, ctx.facts["promoted"]["id"])
            if c is None:
                raise StepError("the candidate container is gone: nothing to rename back")
            if c.name == probe_name():
                return f"already named {probe_name()}"
            swap_mod._expect(nctx, c.name, ("rename",))
            swap_mod._expect(nctx, probe_name(), ("rename",))
            c.rename(probe_name())
        finally:
            client.close()
        ctx.facts["promoted"]["name"] = probe_name()
        return f"renamed back to {probe_name()}"

    # 3. seat state
    def seat_text(ctx: RunContext) -> str:
        import getpass
        import json
        import socket

        sf = SeatFile(resident={**ctx.facts["promoted"], "name": ctx.facts["new_name"]},
                      previous=ctx.facts["previous"],
                      promoted_at=datetime.now(UTC),
                      promoted_by=f"{getpass.getuser()}@{socket.gethostname()}",
                      promote_run_id=ctx.run_id, swap_run_id=ctx.facts.get("swap_run_id"),
                      forced=ctx.facts.get("forced"),
                      profile={"source": nctx.loaded.source,
                               "written": profile_writable(nctx)[0] is not None})
        return json.dumps(sf.to_json(), indent=2) + "\n"

    def seat_check(ctx: RunContext) -> Check:
        if (u := _unplanned(ctx, f"write {sp} naming it the resident (the version it replaces "
                                 f"kept as {prev_path(sp).name})")) is not None:
            return u
        before = _seat_read(sp)
        was = f"it names {before.container} now" if before else "there is none yet"
        if "seat_before" not in ctx.facts and ctx.facts.get("promoted"):
            # both journaled with this step's begin row, before the file is touched: an undo
            # after a kill anywhere inside apply knows what to put back
            ctx.facts["seat_before"] = _read_text(sp)
            ctx.facts["seat_promoted"] = seat_text(ctx)
        return Check(True, f"write {sp} naming {ctx.facts.get('new_name')} the resident ({was}; "
                           f"the version it replaces kept as {prev_path(sp).name}); every later "
                           "swap and restore reads it")

    def seat_apply(ctx: RunContext) -> str:
        return _seat_put(ctx.facts["seat_promoted"], sp, "cannot write")

    def seat_verify(ctx: RunContext) -> str:
        sf = _seat_read(sp)
        if sf is None or sf.container != ctx.facts["new_name"] or sf.promote_run_id != ctx.run_id:
            raise StepError(f"{sp} read back does not name {ctx.facts['new_name']}")
        if swap_mod.resident_name(nctx) != ctx.facts["new_name"]:
            raise StepError("swap.resident_name does not read the new resident")
        return f"{sp} names {sf.container} (id {sf.resident['id'][:12]}) the resident"

    def seat_undo(ctx: RunContext) -> str:
        if "seat_before" not in ctx.facts:
            return "the seat-state file was not written"
        cur = _read_text(sp)
        if cur is not None and cur != ctx.facts.get("seat_promoted") and \
                cur != ctx.facts["seat_before"]:
            raise StepError(f"{sp} was changed by someone else since: left as it is")
        return _seat_put(ctx.facts["seat_before"], sp, "cannot put back")

    # 4. profile
    def prof_check(ctx: RunContext) -> Check:
        where, why = profile_writable(nctx)
        if (u := _unplanned(ctx, f"write a new version of {where} with the sides exchanged "
                                 "(the old text kept beside it)" if where is not None else
                                 f"leave the profile as it is ({why})")) is not None:
            return u
        where, why = profile_writable(nctx)
        if where is None:
            ctx.facts.pop("profile", None)
            return Check(False, f"leave the profile as it is ({why}): the seat-state file alone "
                                f"names {ctx.facts.get('new_name')} the resident")
        if ctx.facts.get("promoted") and not ctx.facts.get("profile"):
            # paths and hashes journaled with the begin row, before anything is written
            old = where.read_text("utf-8")
            new = new_profile_text(old, str(where), ctx.facts["new_name"],
                                   ctx.facts["promoted"])
            ctx.facts["profile"] = {
                "path": str(where), "backup": str(where.with_name(
                    f"{where.name}.before-{ctx.run_id}")),
                "sha_before": _sha(old), "sha_after": _sha(new)}
        return Check(True, f"write a new version of {where}: [resident] = the candidate "
                           f"(container {ctx.facts.get('new_name')}, image by digest), "
                           f"[candidate] = the old resident; the old text kept as "
                           f"{where.name}.before-{ctx.run_id}")

    def prof_apply(ctx: RunContext) -> str:
        where, why = profile_writable(nctx)
        if where is None:
            raise StepError(f"the profile cannot be written: {why}")
        p = ctx.facts["profile"]
        old = where.read_text("utf-8")
        if _sha(old) != p["sha_before"]:
            raise StepError(f"{where} changed since the plan was read: not written")
        new = new_profile_text(old, str(where), ctx.facts["new_name"], ctx.facts["promoted"])
        if _sha(new) != p["sha_after"]:
            raise StepError(f"{where}: the new version differs from the one planned")
        backup = Path(p["backup"])
        try:
            if not backup.exists():
                write_atomic(backup, old)
            write_atomic(where, new)
        except OSError as exc:
            raise StepError(f"{where}: cannot write: {exc}") from None
        return f"wrote the new version of {where}; the old one kept as {backup.name}"

    def prof_verify(ctx: RunContext) -> str:
        from seat_console.core.profile import ProfileError, load_profile

        p = ctx.facts["profile"]
        try:
            lp = load_profile(p["path"])
        except ProfileError as exc:
            raise StepError(str(exc)) from None
        if lp.profile.resident.container != ctx.facts["new_name"]:
            raise StepError(f"{p['path']} read back names {lp.profile.resident.container}")
        return f"{p['path']} names {ctx.facts['new_name']} the resident (sha256 {lp.sha256[:12]})"

    def prof_undo(ctx: RunContext) -> str:
        return _profile_back(ctx.facts.get("profile"))

    # 5. verify
    def ver_check(ctx: RunContext) -> Check:
        if (u := _unplanned(ctx, "check it serves (/health, /v1/models, one completion) and "
                                 "that the seat-state file names it")) is not None:
            return u
        return Check(True, f"check {ctx.facts.get('new_name')} serves: /health, /v1/models, "
                           "one completion; the seat-state file names it")

    def ver_apply(ctx: RunContext) -> str:
        spec = swap_mod._swap_spec(nctx)
        endpoint = swap_mod._probe_endpoint(nctx)
        if swap_mod._health(endpoint) != 200:
            raise StepError(f"{endpoint}/health is not 200")
        models = swap_mod._models(endpoint) or []
        if spec.served_model_name not in models:
            raise StepError(f"{endpoint}/v1/models lists {models}")
        return swap_mod.completion(endpoint, spec.served_model_name)

    def ver_verify(ctx: RunContext) -> str:
        c = swap_mod._inspect_once(nctx, ctx.facts["promoted"]["id"])
        if not swap_mod._running(c):
            raise StepError(f"{ctx.facts['new_name']} is not running")
        if swap_mod.resident_name(nctx) != c.name:
            raise StepError(f"the seat-state file names {swap_mod.resident_name(nctx)}, not "
                            f"{c.name}")
        return (f"{c.name} is the seat's resident (image ID {c.attrs['Image'][:19]}…), "
                "serving; the old resident is kept stopped for `seat-console promote --undo`")

    new = lambda ctx: [ctx.facts.get("new_name"), probe_name()]  # noqa: E731
    steps = [
        Step("check seat", pre_check, pre_apply, pre_verify, None),
        Step("rename candidate", ren_check, ren_apply, ren_verify, ren_undo,
             manual=lambda ctx: f"docker rename {ctx.facts.get('new_name')} {probe_name()}",
             acts_on=new),
        Step("write seat state", seat_check, seat_apply, seat_verify, seat_undo,
             manual=lambda ctx: f"put {prev_path(sp)} back as {sp} (or remove {sp} when it "
                                "did not exist before)"),
        Step("write profile", prof_check, prof_apply, prof_verify, prof_undo,
             manual=lambda ctx: (f"copy {(ctx.facts.get('profile') or {}).get('backup')} over "
                                 f"{(ctx.facts.get('profile') or {}).get('path')}")),
        Step("verify serving", ver_check, ver_apply, ver_verify, None, acts_on=new),
    ]
    spec = nctx.profile.runbook
    gate = (approval_gate(journal, "promote", spec.approvals, spec.approval_timeout_s)
            if journal is not None and run_id is None else None)   # not again on recover
    return Runbook("promote", steps, journal=journal, observer=observer, policy="undo",
                   inputs={"force": force, "reason": reason, "profile": nctx.loaded.source,
                           "seat_file": str(sp)},
                   facts=facts, run_id=run_id, profile_sha256=nctx.loaded.sha256,
                   gates=[gate] if gate is not None else [])


def _profile_back(p: Mapping[str, Any] | None) -> str:
    """Put the profile text a promote replaced back (``p``: its ``profile`` fact), when the
    file is still the version that promote wrote; idempotent. Raises :class:`StepError`."""
    if not p:
        return "the profile was not written"
    path, backup = Path(p["path"]), Path(p["backup"])
    cur = _read_text(path)
    if cur is not None and _sha(cur) == p["sha_before"]:
        return f"{path} is already the version before"
    if cur is None or _sha(cur) != p["sha_after"]:
        raise StepError(f"{path} was changed since the promote wrote it: left as it is; the "
                        f"version before is {backup}")
    old = _read_text(backup)
    if old is None or _sha(old) != p["sha_before"]:
        raise StepError(f"{backup} (the version before) is missing or changed: {path} left "
                        "as it is")
    try:
        write_atomic(path, old)
    except OSError as exc:
        raise StepError(f"{path}: cannot write: {exc}") from None
    return f"{path} put back to the version before ({backup.name})"


# -- promote undo ----------------------------------------------------------------------------------
def promote_run(journal: Journal, run_id: str) -> list[Entry] | None:
    """The rows of the ``promote`` run ``run_id``, or ``None``."""
    rows = journal.runs().get(run_id)
    return rows if rows and rows[0].runbook == "promote" else None


def build_promote_undo(nctx: NodeContext, journal: Journal, *, observer: Observer | None = None,
                       run_id: str | None = None, facts: dict[str, Any] | None = None,
                       seat_path: Path | None = None) -> Runbook:
    """The ``promote-undo`` runbook (module docstring). ``seat_path``: as
    :func:`build_promote`."""
    sp = seat_path or seat_file_path()

    def pre_check(ctx: RunContext) -> Check:
        sf = _seat_read(sp)
        if sf is None:
            raise StepError(f"no promote to undo: {sp} does not exist, so the profile's "
                            f"[resident] ({nctx.profile.resident.container}) is the resident")
        if sf.previous is None:
            raise StepError(f"{sp} keeps no previous resident: nothing to roll back to")
        rows = promote_run(journal, sf.promote_run_id)
        if rows is None:
            raise StepError(f"{sp} names promote run {sf.promote_run_id}, which is not in this "
                            "journal: undo by hand (docker stop/start, then move the file)")
        h = hold_mod.active_hold(journal)
        if h is None:
            raise StepError("no active hold: the undo stops the promoted resident (the seat is "
                            "down for a restart); place one first (`seat-console hold`)")
        pf = facts_from_rows(rows)
        if "seat_before" not in ctx.facts:
            ctx.facts.update(promote_run_id=sf.promote_run_id, promoted=sf.resident,
                             previous=sf.previous, seat_before=pf.get("seat_before"),
                             seat_promoted=_read_text(sp), profile=pf.get("profile"),
                             hold_id=h.hold_id)
        client = swap_mod._client(nctx)
        try:
            old = swap_mod._inspect(client, sf.previous["id"])
            if old is None:
                raise StepError(f"the previous resident {sf.previous['name']} "
                                f"({sf.previous['id'][:12]}) is gone: recreate it by hand from "
                                f"its record in {sp}")
            if old.attrs["Image"] != sf.previous["image_id"]:
                raise StepError(f"{sf.previous['name']} now has image {old.attrs['Image']}, "
                                f"recorded {sf.previous['image_id']}")
        finally:
            client.close()
        return Check(True, f"put {sf.previous['name']} back as the resident in place of "
                           f"{sf.container} (promote run {sf.promote_run_id}); hold {h.hold_id}")

    def stop_check(ctx: RunContext) -> Check:
        if (u := _unplanned(ctx, "stop the promoted resident (kept)")) is not None:
            return u
        c = swap_mod._inspect_once(nctx, ctx.facts["promoted"]["id"])
        if not swap_mod._running(c):
            return Check(False, f"{ctx.facts['promoted']['name']} is not running")
        return Check(True, f"stop {c.name} ({c.id[:12]}) and keep it")

    def stop_apply(ctx: RunContext) -> str:
        rec = ctx.facts["promoted"]
        # the drain and the seat's downtime journaled as swap's (issue 32): facts["drain"]
        return swap_mod.stop_kept(nctx, [rec["id"]], int(rec.get("stop_timeout_s") or 10),
                                  facts=ctx.facts)

    def stop_verify(ctx: RunContext) -> str:
        c = swap_mod._inspect_once(nctx, ctx.facts["promoted"]["id"])
        if swap_mod._running(c):
            raise StepError(f"{ctx.facts['promoted']['name']} still running")
        return f"{ctx.facts['promoted']['name']} stopped (kept)"

    def stop_undo(ctx: RunContext) -> str:
        return swap_mod.start_recorded(nctx, ctx.facts["promoted"])

    def start_check(ctx: RunContext) -> Check:
        if (u := _unplanned(ctx, "start the previous resident as recorded; verify its image "
                                 "ID, /health and one completion")) is not None:
            return u
        rec = ctx.facts["previous"]
        c = swap_mod._inspect_once(nctx, rec["id"])
        if c is None:
            raise StepError(f"the previous resident {rec['name']} is gone")
        ctx.facts["previous_was_running"] = swap_mod._running(c)
        return Check(True, f"{'verify' if swap_mod._running(c) else 'start'} {rec['name']} as "
                           f"recorded (image ID {rec['image_id'][:19]}…), /health, a completion")

    def start_apply(ctx: RunContext) -> str:
        return swap_mod.start_recorded(nctx, ctx.facts["previous"])

    def start_verify(ctx: RunContext) -> str:
        rec = ctx.facts["previous"]
        c, done = swap_mod.verify_recorded(nctx, rec)
        return done + swap_mod._seat_up(ctx, swap_mod._started_at(c), rec["image_id"])

    def start_undo(ctx: RunContext) -> str:
        if ctx.facts.get("previous_was_running"):
            return "it was running before: left running"
        rec = ctx.facts["previous"]
        return swap_mod.stop_kept(nctx, [rec["id"]], int(rec.get("stop_timeout_s") or 10))

    def seat_check(ctx: RunContext) -> Check:
        if (u := _unplanned(ctx, f"put {sp} back to the version before the promote")
            ) is not None:
            return u
        before = ctx.facts.get("seat_before")
        what = ("remove it (there was none before the promote; the promoted version kept as "
                f"{prev_path(sp).name})" if before is None else
                f"put back the version before the promote (the promoted one kept as "
                f"{prev_path(sp).name})")
        return Check(True, f"{sp}: {what}")

    def seat_apply(ctx: RunContext) -> str:
        return _seat_put(ctx.facts.get("seat_before"), sp)

    def seat_verify(ctx: RunContext) -> str:
        sf = _seat_read(sp)
        want = ctx.facts.get("seat_before")
        want_name = parse_seat_file(want, str(sp)).container if want is not None else None
        if (sf.container if sf is not None else None) != want_name:
            raise StepError(f"{sp} read back is not the version before the promote")
        name = _resident_on_disk(nctx, sf)
        if name != ctx.facts["previous"]["name"]:
            raise StepError(f"the resident reads as {name}, not {ctx.facts['previous']['name']}")
        return f"the resident is {name} again ({sp} {'absent' if sf is None else 'restored'})"

    def seat_undo(ctx: RunContext) -> str:
        return _seat_put(ctx.facts.get("seat_promoted"), sp)

    def prof_check(ctx: RunContext) -> Check:
        if (u := _unplanned(ctx, "put the profile back to the version before the promote, if "
                                 "the promote wrote it")) is not None:
            return u
        p = ctx.facts.get("profile")
        if not p:
            return Check(False, "the promote did not write the profile: nothing to put back")
        return Check(True, f"put {p['path']} back to the version before the promote "
                           f"({Path(p['backup']).name}), if nobody changed it since")

    def prof_apply(ctx: RunContext) -> str:
        return _profile_back(ctx.facts.get("profile"))

    def prof_verify(ctx: RunContext) -> str:
        p = ctx.facts["profile"]
        cur = _read_text(Path(p["path"]))
        if cur is None or _sha(cur) != p["sha_before"]:
            raise StepError(f"{p['path']} is not the version before the promote")
        return f"{p['path']} is the version before the promote"

    def prof_undo(ctx: RunContext) -> str:
        p = ctx.facts.get("profile")
        if not p:
            return "nothing to undo"
        path = Path(p["path"])
        cur = _read_text(path)
        if cur is not None and _sha(cur) == p["sha_after"]:
            return "already the promoted version"
        text = ctx.facts.get("profile_promoted_text")
        if text is None or cur is None or _sha(cur) != p["sha_before"]:
            raise StepError(f"{path}: cannot put the promoted version back by itself")
        write_atomic(path, text)
        return f"{path}: the promoted version back"

    def prof_apply_keep(ctx: RunContext) -> str:
        p = ctx.facts.get("profile") or {}
        cur = _read_text(Path(p["path"])) if p else None
        if cur is not None and _sha(cur) == p.get("sha_after"):
            ctx.facts["profile_promoted_text"] = cur
        return prof_apply(ctx)

    names = lambda ctx: [(ctx.facts.get("promoted") or {}).get("name"),  # noqa: E731
                         (ctx.facts.get("previous") or {}).get("name")]
    steps = [
        Step("check seat", pre_check, lambda ctx: "recorded the promote to undo",
             lambda ctx: f"undoing promote run {ctx.facts['promote_run_id']}", None),
        Step("stop promoted", stop_check, stop_apply, stop_verify, stop_undo,
             manual=lambda ctx: f"docker start {(ctx.facts.get('promoted') or {}).get('name')}",
             acts_on=names),
        Step("start previous", start_check, start_apply, start_verify, start_undo,
             manual=lambda ctx: f"docker start {(ctx.facts.get('previous') or {}).get('name')}",
             acts_on=names),
        Step("profile back", prof_check, prof_apply_keep, prof_verify, prof_undo,
             manual=lambda ctx: f"copy {(ctx.facts.get('profile') or {}).get('backup')} over "
                                f"{(ctx.facts.get('profile') or {}).get('path')}"),
        Step("seat state back", seat_check, seat_apply, seat_verify, seat_undo,
             manual=lambda ctx: f"put the promoted version ({prev_path(sp)}) back as {sp}"),
    ]
    return Runbook("promote-undo", steps, journal=journal, observer=observer, policy="undo",
                   inputs={"seat_file": str(sp)}, facts=facts, run_id=run_id,
                   profile_sha256=nctx.loaded.sha256)


def _resident_on_disk(nctx: NodeContext, sf: SeatFile | None) -> str | None:
    """The resident a console started now would read: the seat-state file's, else the
    ``[resident] container`` of the profile *file* as it is on disk (this process's profile
    may be the version a promote wrote and the undo has just put back)."""
    if sf is not None:
        return sf.container
    from seat_console.core.profile import ProfileError, load_profile

    if not nctx.loaded.source.startswith("<"):
        try:
            return load_profile(nctx.loaded.source).profile.resident.container
        except ProfileError as exc:
            raise StepError(str(exc)) from None
    return nctx.profile.resident.container


def rebuild(nctx: NodeContext, journal: Journal, rows: list[Entry] | tuple[Entry, ...],
            observer: Observer | None = None) -> Runbook:
    """For ``recover``: the ``promote`` or ``promote-undo`` runbook of an unfinished run, with
    its run ID and facts (both: undo). Raises :class:`ValueError` for another runbook."""
    first = rows[0]
    facts = facts_from_rows(rows)
    sp = Path(first.inputs["seat_file"]) if first.inputs.get("seat_file") else None
    if first.runbook == "promote":
        return build_promote(nctx, journal, force=bool(first.inputs.get("force")),
                             reason=str(first.inputs.get("reason", "")), observer=observer,
                             run_id=first.run_id, facts=facts, seat_path=sp)
    if first.runbook == "promote-undo":
        return build_promote_undo(nctx, journal, observer=observer, run_id=first.run_id,
                                  facts=facts, seat_path=sp)
    raise ValueError(f"promote.rebuild: {first.runbook!r} is not a promote run")


__all__ = ["DECISIONS", "build_promote", "build_promote_undo", "decision_images",
           "decision_problem", "launch_record", "new_profile_text", "newest_decision",
           "promote_run", "promoted_name", "put_seat_file", "rebuild", "swap_of",
           "write_atomic"]
