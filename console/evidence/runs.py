"""The run-summary model the report reads, loaded from the files on disk with their SHA-256.

Two kinds of directory are read:

* a **probe run** (``seat_console.probe.store``): ``summary.json`` + ``requests.jsonl``;
* a **leg** of a bracketed comparison (written by ``seat-console compare``): ``leg.json``
  (arm, leg number, bracket ID, the probe run it made, the fresh container's identity and
  the engine's KV capacity from its startup log), ``engine.log``, ``fidelity.jsonl`` (one
  :class:`~seat_console.evidence.fidelity.Trace` per line) and ``canaries.jsonl`` (one
  :class:`~seat_console.evidence.canaries.CanaryResult` per line).

Every file is read once as bytes; its SHA-256 is taken from those same bytes before parsing,
so the report's hashes are of exactly what it was built from. Fields that are absent are
``None`` ("unknown" on screen), never 0.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, TypeVar

from seat_console.core.engine_timing import MetricTiming, check_figure, parse_phase_timing
from seat_console.core.probe_stats import (
    Goodput,
    percentile,
    read_goodput,
    read_tpot_excluded,
    tpot_excluded,
    tpot_of,
    tpot_population,
)
from seat_console.core.untrusted import InputError, load_json
from seat_console.evidence.canaries import CanaryError, CanaryResult
from seat_console.evidence.fidelity import FidelityError, Trace

MAX_FILE_BYTES = 512 * 2**20
"""A raw file above 512 MiB is refused (the report reads files whole)."""


class RunError(ValueError):
    """A run or leg directory that cannot be read; the message names the file and the fix."""


RUN_FILE_INT_DIGITS = 20
"""Longest integer literal in a run's own files (summary, leg, comparison, request records):
they hold counts, bytes and nanosecond times, all below 10^20. A 400-digit integer (an edited
file) raised :class:`OverflowError` wherever it met a float (issue 31); it is refused as the
file's error instead."""

_EDITED = ("the file was edited or damaged: restore it from a copy, or re-run the probe "
           "(`seat-console probe`) to record it again")


def input_path(text: Any, what: str, *, expand_user: bool = False) -> Path:
    """A directory or file path taken from outside (a RUN argument, a path recorded in a report
    or a ``leg.json``) as a :class:`~pathlib.Path`, checked before the file system sees it.

    ``expand_user``: a leading ``~`` / ``~user`` is expanded (command-line arguments only; a
    recorded path is used as written). Raises :class:`RunError` naming ``what`` for a value that
    is not a string, is empty, holds a NUL byte or a lone surrogate (not a file name), is longer
    than the system's path limit (4,095 bytes) or has a name longer than 255 bytes
    (``ENAMETOOLONG``, which :meth:`~pathlib.Path.is_dir` raises rather than answers), or names
    an unknown user's home (``~nobody-here``: :meth:`~pathlib.Path.expanduser` raises
    :class:`RuntimeError`).
    """
    if not isinstance(text, str) or not text:
        raise RunError(f"{what}: {str(text)[:80]!r} is not a path (a non-empty string)")
    label = repr(text[:80]) + ("…" if len(text) > 80 else "")
    try:
        raw = os.fsencode(text)
    except UnicodeEncodeError:
        raise RunError(f"{what}: {label} holds a lone surrogate code point: not a file "
                       "name on this system; give the path as it is on disk") from None
    if b"\0" in raw:
        raise RunError(f"{what}: {label} holds a NUL byte: not a file name")
    if len(raw) > 4095:
        raise RunError(f"{what}: a path of {len(raw):,} bytes is above the system's 4,095-byte "
                       "limit; give the run's directory or its ID")
    longest = max((len(part) for part in raw.split(b"/")), default=0)
    if longest > 255:
        raise RunError(f"{what}: {label} has a name of {longest:,} bytes, above the file "
                       "system's 255-byte limit; give the run's directory or its ID")
    p = Path(text)
    if expand_user and text.startswith("~"):
        try:
            p = p.expanduser()
        except RuntimeError:
            user = text[1:].split("/", 1)[0]
            raise RunError(f"{what}: {label}: no home directory for "
                           f"{'user ' + repr(user) if user else 'this user'}; give the path "
                           "in full") from None
    return p


def is_kind(p: Path, what: str, kind: str = "file") -> bool:
    """Whether ``p`` is a regular file (``kind`` "file") or a directory ("dir"). An error the
    answer cannot be read through (``EACCES`` on a parent, a symlink loop, a name too long) is a
    :class:`RunError` naming ``what`` and the reason, never an exception of another type."""
    try:
        return p.is_file() if kind == "file" else p.is_dir()
    except OSError as exc:
        raise RunError(f"{what}: cannot look at {p} ({exc.strerror or exc}); check the path "
                       "and its permissions") from None
    except ValueError as exc:   # a NUL in a path joined from outside parts
        raise RunError(f"{what}: {str(p)[:80]!r} is not a file path ({exc})") from None


@dataclass
class FileLedger:
    """SHA-256 of every raw file read, ``{absolute path: hex digest}``, in reading order."""

    files: dict[str, str] = field(default_factory=dict)

    def read(self, path: Path) -> bytes:
        """Read ``path`` whole, record its SHA-256, return the bytes.

        Raises :class:`RunError` naming the path if it cannot be read or is over
        :data:`MAX_FILE_BYTES`.
        """
        try:
            size = path.stat().st_size
            if size > MAX_FILE_BYTES:
                raise RunError(f"{path}: {size:,} B is over the {MAX_FILE_BYTES:,} B limit")
            data = path.read_bytes()
            where = str(path.resolve())
        except OSError as exc:
            raise RunError(f"{path}: cannot read ({exc.strerror or exc})") from None
        except (ValueError, RuntimeError) as exc:   # a NUL; a symlink loop (resolve, 3.11)
            raise RunError(f"{str(path)[:200]!r}: cannot read ({exc})") from None
        self.files[where] = hashlib.sha256(data).hexdigest()
        return data


def read_json(data: bytes | str, what: str, fix: str = _EDITED) -> Any:
    """One of the run's own JSON files (or lines), parsed as outside input: nesting ≤ 64, only
    finite numbers, integers of at most :data:`RUN_FILE_INT_DIGITS` digits. Raises
    :class:`RunError` naming ``what`` (the file, or ``file:line``) and ``fix``."""
    try:
        return load_json(data, what, max_bytes=MAX_FILE_BYTES, max_int_digits=RUN_FILE_INT_DIGITS)
    except InputError as exc:
        raise RunError(f"{exc}; {fix}") from None


def shown(text: str, limit: int = 120) -> str:
    """``text`` as it can be printed in a message: itself when short and printable, else its
    ``repr`` cut to ``limit`` characters (a NUL, an escape sequence or 5,000 characters of an
    edited path never reach the terminal as they are)."""
    if len(text) <= limit and text.isprintable():
        return text
    return repr(text[:limit]) + ("…" if len(text) > limit else "")


_json = read_json


def _jsonl(data: bytes, path: Path) -> list[Any]:
    out = []
    for n, line in enumerate(data.decode("utf-8", "replace").splitlines(), 1):
        if line.strip():
            out.append(read_json(line, f"{path}:{n}"))
    return out


_Rec = TypeVar("_Rec")


def _records(path: Path, ledger: FileLedger, from_dict: Callable[[Any, str], _Rec],
             error: type[Exception]) -> list[_Rec]:
    """Each JSON line of ``path`` (read through ``ledger``) as ``from_dict(row, "path:n")``;
    ``[]`` when there is no such file. ``error`` (the record's own) is raised again as
    :class:`RunError`, as is a line that is not JSON."""
    if not is_kind(path, str(path)):
        return []
    out = []
    for n, d in enumerate(_jsonl(ledger.read(path), path), 1):
        try:
            out.append(from_dict(d, f"{path}:{n}"))
        except error as exc:
            raise RunError(str(exc)) from None
    return out


def parse_time(v: Any, what: str) -> datetime | None:
    """An ISO 8601 time as an aware UTC datetime; ``None`` for absent; :class:`RunError`
    naming ``what`` for a malformed or zone-less time."""
    if v is None:
        return None
    try:
        t = datetime.fromisoformat(str(v).replace("Z", "+00:00"))
    except ValueError:
        raise RunError(f"{what}: {str(v)[:40]!r} is not an ISO 8601 time") from None
    if t.tzinfo is None:
        raise RunError(f"{what}: {v!r} has no time zone (runs record UTC)")
    try:
        return t.astimezone(timezone.utc)
    except OverflowError:
        raise RunError(f"{what}: {str(v)[:40]!r} is outside the calendar in UTC") from None


@dataclass(frozen=True)
class Identity:
    """What was measured: ``endpoint``, ``served_model``, ``image_id`` (config digest),
    ``repo_digest`` (manifest digest reference), ``patch_sha256s`` (``path=sha256`` strings),
    ``profile_sha256``, ``engine_version``, ``gpu_uuids``, ``driver_version``,
    ``prompt_set_sha256``, ``container_id``, ``base_digest`` (a backport image's base,
    ``repo@sha256:…``, from its ``org.seat-console.backport.base`` label: a locally built
    image has no repo digest of its own). ``None`` = not recorded."""

    endpoint: str | None = None
    served_model: str | None = None
    image_id: str | None = None
    repo_digest: str | None = None
    patch_sha256s: tuple[str, ...] | None = None
    profile_sha256: str | None = None
    engine_version: str | None = None
    gpu_uuids: tuple[str, ...] | None = None
    driver_version: str | None = None
    prompt_set_sha256: str | None = None
    container_id: str | None = None
    base_digest: str | None = None

    FIELDS = ("image_id", "repo_digest", "base_digest", "patch_sha256s", "profile_sha256",
              "engine_version", "gpu_uuids", "driver_version", "served_model", "endpoint",
              "prompt_set_sha256", "container_id")

    @classmethod
    def from_mapping(cls, d: Mapping[str, Any] | None) -> Identity:
        """From a summary's ``identity`` (tolerant: unknown keys ignored, aliases accepted)."""
        d = dict(d) if isinstance(d, Mapping) else {}

        def s(*keys: str) -> str | None:
            for k in keys:
                if d.get(k) not in (None, ""):
                    return str(d[k])
            return None

        def seq(*keys: str) -> tuple[str, ...] | None:
            for k in keys:
                v = d.get(k)
                if isinstance(v, dict):
                    return tuple(f"{p}={h}" for p, h in sorted(v.items()))
                if isinstance(v, (list, tuple)):
                    return tuple(str(x) for x in v)
            return None

        # The probe's summary (issue 9, schema seat-console.probe-run/1) nests some fields:
        # container {id, image_id, repo_digest}, backport_patches [{dest, sha256}],
        # gpus {driver, cards: [{uuid}]}, prompt_set {sha256}. Flat names are accepted too.
        c = d.get("container") if isinstance(d.get("container"), Mapping) else {}
        for k_flat, k_nested in (("image_id", "image_id"), ("repo_digest", "repo_digest"),
                                 ("container_id", "id")):
            if d.get(k_flat) in (None, "") and c.get(k_nested):
                d[k_flat] = c[k_nested]
        bp = d.get("backport_patches")
        if c.get("role") == "resident":  # the probe lists the profile's [backport] files for
            bp = []                      # any seat container; the resident runs none of them
        if isinstance(bp, list) and "patch_sha256s" not in d:
            d["patch_sha256s"] = [f"{x.get('dest')}={x.get('sha256')}" for x in bp
                                  if isinstance(x, Mapping)]
        g = d.get("gpus")
        if isinstance(g, Mapping):
            d.pop("gpus")
            cards = g.get("cards")
            if isinstance(cards, list) and "gpu_uuids" not in d:
                d["gpu_uuids"] = [str(x.get("uuid")) for x in cards if isinstance(x, Mapping)]
            if g.get("driver") and "driver_version" not in d:
                d["driver_version"] = g["driver"]
        ps = d.get("prompt_set")
        if isinstance(ps, Mapping) and ps.get("sha256") and "prompt_set_sha256" not in d:
            d["prompt_set_sha256"] = ps["sha256"]
        return cls(endpoint=s("endpoint"), served_model=s("served_model", "model"),
                   image_id=s("image_id"), repo_digest=s("repo_digest"),
                   patch_sha256s=seq("patch_sha256s", "patches"),
                   profile_sha256=s("profile_sha256", "profile_hash"),
                   engine_version=s("engine_version", "vllm_version"),
                   gpu_uuids=seq("gpu_uuids", "gpus"),
                   driver_version=s("driver_version", "driver"),
                   prompt_set_sha256=s("prompt_set_sha256"),
                   container_id=s("container_id"), base_digest=s("base_digest"))

    def merged(self, other: Identity) -> Identity:
        """Fields of ``self``, with ``other``'s filling the unknown ones."""
        return Identity(**{k: getattr(self, k) if getattr(self, k) is not None
                           else getattr(other, k) for k in self.FIELDS})

    def key(self) -> tuple[Any, ...]:
        """What makes two runs the same arm: image, digest, patches, served model."""
        return (self.image_id, self.repo_digest, self.patch_sha256s, self.served_model)

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready (tuples as lists)."""
        return {k: (list(v) if isinstance(v, tuple) else v)
                for k in self.FIELDS for v in [getattr(self, k)]}


@dataclass(frozen=True)
class Phase:
    """One phase's population and figures (seconds, tokens/s); ``None`` = unknown.

    ``expected``/``attempted``/``completed``/``failed``; ``state`` (the probe's phrase);
    ``complete`` (expected = attempted = completed); ``output_tok_s``, ``request_s``;
    ``ttft_p50_s``/``ttft_p95_s``, ``tpot_p50_s``, ``itl_p50_s``/``itl_p95_s``,
    ``e2e_p50_s``/``e2e_p95_s``; ``tpot_n`` (requests with a TPOT) and ``tpot_excluded``
    (completed requests without one, by reason — one output token, all output in one read:
    :func:`~seat_console.core.probe_stats.tpot_of`; never counted as 0); ``duration_s`` and
    ``client_cpu_s`` (the probe's own CPU over
    the phase); ``engine_timing``: the engine's own TTFT / ITL histograms over the phase as the
    probe recorded them (figure → :class:`~seat_console.core.engine_timing.MetricTiming`;
    empty for a run from before the check), ``timing_problem``: why they could not be read;
    ``goodput``: the phase's goodput against its ``[probe.slo]`` (``None``: no SLO, or a block
    that does not read back whole — :func:`~seat_console.core.probe_stats.read_goodput`);
    ``cache_mode`` (``reset`` / ``nonce`` / ``off``; ``None``: a run from before cache-clean
    phases), ``cache_hit_rate`` (the phase's prefix-cache hit rate, 0–1, from the engine's
    counters; ``None`` = unknown), ``cache_note`` (why unknown, or the reset's answer) —
    :func:`read_prefix_cache`; ``server``: the client against the engine per request
    (``with_metrics``, ``cmd_p50_s`` / ``cmd_p95_s`` / ``cmd_n`` of client − engine TTFT,
    ``token_mismatches``, ``token_mismatch_first``) — :func:`read_server_check`, ``None`` for a
    run from before it.
    """

    name: str
    expected: int | None
    attempted: int | None
    completed: int | None
    failed: int | None
    state: str
    output_tok_s: float | None = None
    request_s: float | None = None
    ttft_p50_s: float | None = None
    ttft_p95_s: float | None = None
    tpot_p50_s: float | None = None
    itl_p50_s: float | None = None
    itl_p95_s: float | None = None
    e2e_p50_s: float | None = None
    e2e_p95_s: float | None = None
    duration_s: float | None = None
    client_cpu_s: float | None = None
    engine_timing: Mapping[str, MetricTiming] = field(default_factory=dict)
    timing_problem: str | None = None
    goodput: Goodput | None = None
    cache_mode: str | None = None
    cache_hit_rate: float | None = None
    cache_note: str | None = None
    server: Mapping[str, Any] | None = None
    concurrency: int | None = None
    tpot_n: int | None = None
    tpot_excluded: Mapping[str, int] = field(default_factory=dict)

    @property
    def tpot_partial(self) -> str | None:
        """The TPOT population's words when some completed request has no TPOT
        (``"TPOT over 1 of 4 requests; 3 had all output in one network read"``), else
        ``None``."""
        if not any(self.tpot_excluded.values()):
            return None
        return tpot_population(self.tpot_n or 0, self.completed or 0, dict(self.tpot_excluded))

    @property
    def complete(self) -> bool:
        """expected = attempted = completed, all known and ≥ 1, and the probe's own state
        says ``complete`` (not e.g. ``unverified: …`` when its engine accounting disagreed)."""
        return (self.expected is not None and self.expected >= 1
                and self.expected == self.attempted == self.completed
                and self.state in ("complete", "unknown"))

    @property
    def population(self) -> str:
        """``"completed/expected"`` with attempted, e.g. ``"61/64 completed (64 attempted)"``."""
        def f(v: int | None) -> str:
            return "?" if v is None else str(v)
        text = f"{f(self.completed)}/{f(self.expected)} completed ({f(self.attempted)} attempted)"
        if self.state not in ("complete", "unknown") and not self.state.startswith("incomplete"):
            text += f"; {self.state}"
        return text

    @classmethod
    def from_summary(cls, p: Mapping[str, Any], where: str) -> Phase:
        """From one ``phases[]`` entry of a probe summary (``{name, state, stats}``)."""
        if not isinstance(p, Mapping):
            raise RunError(f"{where}: a phase is not an object")
        st = p.get("stats") if isinstance(p.get("stats"), Mapping) else p

        def i(k: str) -> int | None:
            v = st.get(k)
            return v if isinstance(v, int) and not isinstance(v, bool) and v >= 0 else None

        def fl(k: str) -> float | None:
            v = st.get(k)
            return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None

        def dist(k: str, q: str) -> float | None:
            d = st.get(k)
            v = d.get(q) if isinstance(d, Mapping) else None
            return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None

        name = p.get("name") or st.get("phase")
        if not isinstance(name, str) or not name:
            raise RunError(f"{where}: a phase has no name")
        timing: dict[str, MetricTiming] = {}
        problem = None
        try:
            timing = parse_phase_timing(p.get("engine_timing"), f"{where} phase {name}")
        except ValueError as exc:
            problem = str(exc)
        cpu = p.get("client_cpu_s")
        cpu_s = float(cpu) if isinstance(cpu, (int, float)) and not isinstance(cpu, bool) \
            and math.isfinite(cpu) and cpu >= 0 else None
        tpot_n = st["tpot"].get("n") if isinstance(st.get("tpot"), Mapping) else None
        return cls(name=name, expected=i("expected"), attempted=i("attempted"),
                   completed=i("completed"), failed=i("failed"),
                   state=str(p.get("state") or st.get("state") or "unknown"),
                   output_tok_s=fl("output_tok_s"), request_s=fl("request_s"),
                   ttft_p50_s=dist("ttft", "p50_s"), ttft_p95_s=dist("ttft", "p95_s"),
                   tpot_p50_s=dist("tpot", "p50_s"), itl_p50_s=dist("itl", "p50_s"),
                   itl_p95_s=dist("itl", "p95_s"),
                   e2e_p50_s=dist("e2e", "p50_s"), e2e_p95_s=dist("e2e", "p95_s"),
                   duration_s=fl("duration_s"), client_cpu_s=cpu_s, engine_timing=timing,
                   timing_problem=problem, goodput=read_goodput(st.get("goodput")),
                   server=read_server_check(st.get("server")), concurrency=i("concurrency"),
                   tpot_n=tpot_n if isinstance(tpot_n, int) and not isinstance(tpot_n, bool)
                   and tpot_n >= 0 else None,
                   tpot_excluded=read_tpot_excluded(st.get("tpot_excluded")),
                   **read_prefix_cache(p.get("prefix_cache")))

    def timing_checks(self) -> dict[str, MetricTiming]:
        """The client-vs-engine checks of this phase made again here: the engine's recorded
        bucket deltas against this phase's client p50 / p95 (the figures re-derived from
        ``requests.jsonl``, :data:`REDERIVED_FIELDS`) — the recorded verdicts are not
        trusted."""
        share = (self.client_cpu_s / self.duration_s
                 if self.client_cpu_s is not None and self.duration_s else None)
        client = {"ttft": {0.5: self.ttft_p50_s, 0.95: self.ttft_p95_s},
                  "itl": {0.5: self.itl_p50_s, 0.95: self.itl_p95_s}}
        return {f: check_figure(f, t.engine, client[f], t.client_n, share, problem=t.problem)
                for f, t in self.engine_timing.items()}

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready, with ``complete``, ``population``, ``tpot_population``
        (:attr:`tpot_partial`) and ``engine_timing`` (the checks made again,
        :meth:`timing_checks`)."""
        d = {k: getattr(self, k) for k in self.__dataclass_fields__}
        d.update(complete=self.complete, population=self.population,
                 tpot_population=self.tpot_partial,
                 goodput=self.goodput.model_dump(mode="json") if self.goodput else None,
                 engine_timing={f: t.model_dump(mode="json")
                                for f, t in self.timing_checks().items()})
        return d


@dataclass(frozen=True)
class RunSummary:
    """One run (a probe run, possibly as a leg of a bracket), as the report needs it.

    ``status``: complete / incomplete / interrupted / disrupted / failed / running (or
    killed) / unreadable; ``reason``: why it is not complete; ``cases``: the request keys
    ``(phase, index, prompt_id)`` measured (for pairing); ``arm``/``leg``/``bracket_id``: set
    for a leg of a comparison; ``kv_cache_tokens``: the engine's KV capacity in tokens (from
    its startup log); ``fit``: the fit budget recorded for the leg (free-form dict);
    ``fidelity``/``canaries``: the leg's traces and canary results; ``pair``/``round``: the
    bracket pair (``"r<round>p<k>"``) and round of a leg (``None`` for a plain run);
    ``warmup_requests``/``measured_requests``: request records in ``requests.jsonl`` (warm-up
    excluded from every figure; ``None`` when there is no such file); ``consistency``: each way
    ``summary.json`` disagrees with the figures re-derived from ``requests.jsonl`` (empty when
    they agree); ``sweep``: the run's ``sweep`` block as recorded (``probe --sweep``; the
    report re-derives its knee from the phases), ``None`` for other runs.
    """

    run_id: str
    path: Path
    status: str
    reason: str | None
    started_at: datetime | None
    ended_at: datetime | None
    identity: Identity
    phases: tuple[Phase, ...]
    disruptions: tuple[str, ...]
    cases: frozenset[tuple[str, int, int]] = frozenset()
    arm: str | None = None
    leg: int | None = None
    bracket_id: str | None = None
    kv_cache_tokens: int | None = None
    fit: Mapping[str, Any] | None = None
    fidelity: tuple[Trace, ...] = ()
    canaries: tuple[CanaryResult, ...] = ()
    pair: str | None = None
    round: int | None = None
    warmup_requests: int | None = None
    measured_requests: int | None = None
    consistency: tuple[str, ...] = ()
    side: str | None = None
    sweep: Mapping[str, Any] | None = None

    @property
    def complete(self) -> bool:
        """Status complete, no disruption, and every phase's population complete."""
        return (self.status == "complete" and not self.disruptions
                and bool(self.phases) and all(p.complete for p in self.phases))


SIDE_RESIDENT = "resident"
SIDE_CANDIDATE = "candidate"
_ROLE_SIDE = {"resident": SIDE_RESIDENT, "probe": SIDE_CANDIDATE, "candidate": SIDE_CANDIDATE}


def recorded_side(ident: Any) -> str | None:
    """The seat side a probe summary's ``identity`` says it measured: its
    ``container.role`` (``resident`` → :data:`SIDE_RESIDENT`; ``probe`` or ``candidate`` →
    :data:`SIDE_CANDIDATE`), or a flat ``role`` / ``side``; ``None`` when absent or anything
    else (never guessed)."""
    if not isinstance(ident, Mapping):
        return None
    c = ident.get("container")
    for v in ((c.get("role") if isinstance(c, Mapping) else None), ident.get("role"),
              ident.get("side")):
        if isinstance(v, str) and v in _ROLE_SIDE:
            return _ROLE_SIDE[v]
    return None


def _list(doc: Mapping[str, Any], key: str, path: Path) -> list[Any]:
    v = doc.get(key)
    if v is None:
        return []
    if not isinstance(v, list):
        raise RunError(f"{path}: '{key}' is a {type(v).__name__}, not a list")
    return v


def _disruption_text(d: Any) -> str:
    if isinstance(d, Mapping):
        for k in ("reason", "detail", "message", "what"):
            if d.get(k):
                at = d.get("at") or d.get("time")
                kind = f"{d['kind']}: " if d.get("kind") else ""
                return f"{kind}{d[k]}" + (f" (at {at})" if at else "")
        return json.dumps(d, sort_keys=True)[:200]
    return str(d)[:200]


REDERIVED_FIELDS = ("attempted", "completed", "failed", "output_tokens", "output_tok_s",
                    "request_s", "duration_s", "ttft.p50_s", "ttft.p95_s", "tpot.p50_s",
                    "itl.p50_s", "itl.p95_s", "e2e.p50_s", "e2e.p95_s", "goodput.met",
                    "goodput.trials")
"""The figures of a phase that are re-derived from ``requests.jsonl`` and compared."""

SERVER_FIELDS = ("server.with_metrics", "server.token_mismatches", "server.token_mismatch_first",
                 "server.client_minus_server.n", "server.client_minus_server.p50_s",
                 "server.client_minus_server.p95_s")
"""The per-request client-against-engine figures, re-derived and compared too when the phase
records them (a run from before the probe read the engine's per-request metrics has none)."""


CACHE_MODES = ("reset", "nonce", "off")


def read_prefix_cache(d: Any) -> dict[str, Any]:
    """A phase's ``prefix_cache`` block from a run file (outside input) → ``cache_mode``,
    ``cache_hit_rate``, ``cache_note`` for :class:`Phase`. Never raises: a mode not in
    :data:`CACHE_MODES` is ``None``; a hit rate that is not a finite number in [0, 1] is
    unknown (``None``, with a note), never 0."""
    out: dict[str, Any] = {"cache_mode": None, "cache_hit_rate": None, "cache_note": None}
    if not isinstance(d, Mapping):
        return out
    mode = d.get("mode")
    out["cache_mode"] = mode if mode in CACHE_MODES else None
    rate = d.get("hit_rate")
    if isinstance(rate, (int, float)) and not isinstance(rate, bool) and math.isfinite(rate) \
            and 0.0 <= rate <= 1.0:
        out["cache_hit_rate"] = float(rate)
    elif rate is not None:
        out["cache_note"] = "hit rate unreadable in the run file"
    note = d.get("problem")
    if out["cache_note"] is None and isinstance(note, str):
        out["cache_note"] = note[:300]
    return out


def with_tpot(p: Phase, records: Sequence[Any]) -> Phase:
    """``p`` with its TPOT p50, population and exclusions computed from its request
    ``records`` (:class:`~seat_console.core.probe_record.RequestRecord`) by the current
    definition (:func:`~seat_console.core.probe_stats.tpot_of`): a summary written before
    undefined TPOTs were excluded holds a p50 pulled to 0 by them. ``p`` unchanged when there
    are no records."""
    if not records:
        return p
    ok = [r for r in records if r.ok]
    vals = [v for r in ok for v, _ in [tpot_of(r)] if v is not None]
    return replace(p, tpot_p50_s=percentile(vals, 50), tpot_n=len(vals),
                   tpot_excluded=tpot_excluded(ok))


def _legacy_tpot_p50(records: Sequence[Any]) -> float | None:
    """TPOT p50 as the probe computed it before undefined TPOTs were excluded (every completed
    request's recorded ``tpot_s``, 0.0 for an all-in-one-read request)."""
    return percentile([r.tpot_s for r in records if r.ok and r.tpot_s is not None], 50)


def read_server_check(d: Any) -> dict[str, Any] | None:
    """A phase's ``stats.server`` block from a run file (outside input) → a flat dict
    (``with_metrics``, ``cmd_n``, ``cmd_p50_s``, ``cmd_p95_s``, ``token_mismatches``,
    ``token_mismatch_first``), or ``None`` when absent or not an object. Never raises; a count
    that is not an integer ≥ 0 and a figure that is not finite are ``None`` (unknown)."""
    if not isinstance(d, Mapping):
        return None

    def count(v: Any) -> int | None:
        return v if isinstance(v, int) and not isinstance(v, bool) and v >= 0 else None

    def fig(v: Any) -> float | None:
        return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) \
            and math.isfinite(v) else None

    dist = d.get("client_minus_server") if isinstance(d.get("client_minus_server"),
                                                      Mapping) else {}
    first = d.get("token_mismatch_first")
    return {"with_metrics": count(d.get("with_metrics")), "cmd_n": count(dist.get("n")),
            "cmd_p50_s": fig(dist.get("p50_s")), "cmd_p95_s": fig(dist.get("p95_s")),
            "token_mismatches": count(d.get("token_mismatches")),
            "token_mismatch_first": [i for i in first[:10] if count(i) is not None]
            if isinstance(first, list) else []}


def rederive_problems(phases: list[Any], records: Mapping[str, list[Any]], sp: Path,
                      rp: Path) -> list[str]:
    """Each figure of ``summary.json``'s phases (:data:`REDERIVED_FIELDS`, and
    :data:`SERVER_FIELDS` where the phase has a ``server`` block) that differs from
    the same figure computed again from the raw request records by the probe's own
    :func:`seat_console.core.probe_stats.phase_stats` (relative tolerance 1e-9): the summary was
    edited, or was not written from these records. ``[]`` when every figure agrees."""
    from seat_console.core.probe_stats import phase_stats

    out: list[str] = []
    named = set()
    for p in phases:
        if not isinstance(p, Mapping):
            continue
        st = p.get("stats") if isinstance(p.get("stats"), Mapping) else p
        name = p.get("name") or st.get("phase")
        exp, conc = st.get("expected"), st.get("concurrency")
        if not isinstance(name, str) or not isinstance(exp, int) or isinstance(exp, bool):
            continue
        named.add(name)
        recs = records.get(name, [])
        gp = st.get("goodput")
        slo = read_goodput(gp)
        if gp is not None and slo is None:
            out.append(f"{sp.name} phase {name} goodput: the block does not read back whole "
                       "(counts, interval or targets edited)")
        try:
            again = phase_stats(name, recs, expected=max(exp, len(recs)),
                                concurrency=conc if isinstance(conc, int) else 1,
                                slo=slo.slo if slo else None).model_dump(mode="json")
        except (ValueError, TypeError) as exc:
            out.append(f"{sp.name} phase {name}: cannot be re-derived from {rp.name} ({exc})")
            continue
        server = SERVER_FIELDS if isinstance(st.get("server"), Mapping) else ()
        for f in (*REDERIVED_FIELDS, *server):
            a, b = _dig(st, f), _dig(again, f)
            if f == "tpot.p50_s" and not _same(a, b) and _same(a, _legacy_tpot_p50(recs)):
                continue  # written before undefined TPOTs were excluded: with_tpot corrects
            if not _same(a, b):
                out.append(f"{sp.name} phase {name} {f} = {a!r}, but {rp.name} gives {b!r}")
    for name in sorted(set(records) - named):
        out.append(f"{rp.name} has {len(records[name])} records of phase {name!r} that "
                   f"{sp.name} does not list")
    return out


def _dig(d: Any, dotted: str) -> Any:
    for k in dotted.split("."):
        d = d.get(k) if isinstance(d, Mapping) else None
    return d


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, bool) or isinstance(b, bool):
        return a is b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return abs(a - b) <= 1e-9 * max(abs(a), abs(b), 1e-12)
    return a == b


def load_probe_run(run_dir: Path, ledger: FileLedger) -> RunSummary:
    """Read a probe run directory (``summary.json`` + ``requests.jsonl`` if present).

    Raises :class:`RunError` naming the file for a missing or malformed summary, a request
    line that is not a request record, or a time without a zone.
    """
    from seat_console.core.probe_record import parse_record  # the probe's own record model

    sp = run_dir / "summary.json"
    if not is_kind(sp, str(run_dir)):
        raise RunError(f"{run_dir}: no summary.json — not a probe run directory (give a run "
                       f"directory, or a run ID under the data dir's runs/)")
    s = _json(ledger.read(sp), sp)
    if not isinstance(s, dict):
        raise RunError(f"{sp}: the summary is not a JSON object")
    status = str(s.get("status") or "unknown")
    if status == "running":
        status = "running (or killed)"
    phases = tuple(Phase.from_summary(p, str(sp)) for p in _list(s, "phases", sp))
    disruptions = tuple(_disruption_text(d) for d in _list(s, "disruptions", sp))
    cases: set[tuple[str, int, int]] = set()
    rp = run_dir / "requests.jsonl"
    by_phase: dict[str, list[Any]] | None = None
    warmup = measured = None
    if is_kind(rp, str(rp)):
        by_phase, warmup, measured = {}, 0, 0
        for n, line in enumerate(ledger.read(rp).decode("utf-8", "replace").splitlines(), 1):
            if not line.strip():
                continue
            try:
                rec = parse_record(line, f"{rp}:{n}")
            except InputError as exc:
                raise RunError(f"{exc}; {_EDITED}") from None
            if rec.phase != "warmup":
                cases.add((rec.phase, rec.index, rec.prompt_id))
                by_phase.setdefault(rec.phase, []).append(rec)
                measured += 1
            else:
                warmup += 1
    consistency = (tuple(rederive_problems(_list(s, "phases", sp), by_phase, sp, rp))
                   if by_phase is not None else ())
    if by_phase is not None:
        phases = tuple(with_tpot(p, by_phase.get(p.name, [])) for p in phases)
    reason = s.get("reason") or s.get("status_reason")
    if reason is None and status != "complete":
        bad = [f"{p.name}: {p.state}" for p in phases if not p.complete]
        reason = "; ".join(bad) or None
    ident = s.get("identity") if isinstance(s.get("identity"), Mapping) else {}
    kv = ident.get("kv_cache_tokens")
    kvc = s.get("kv_capacity")
    if kv is None and isinstance(kvc, Mapping):  # the probe's summary: kv_capacity.tokens
        kv = kvc.get("tokens")
    return RunSummary(
        run_id=str(s.get("run_id") or run_dir.name), path=run_dir, status=status,
        reason=None if reason is None else str(reason),
        started_at=parse_time(s.get("started_at"), f"{sp} started_at"),
        ended_at=parse_time(s.get("ended_at"), f"{sp} ended_at"),
        identity=Identity.from_mapping(ident), phases=phases, disruptions=disruptions,
        cases=frozenset(cases), warmup_requests=warmup, measured_requests=measured,
        consistency=consistency, side=recorded_side(ident),
        sweep=s.get("sweep") if isinstance(s.get("sweep"), Mapping) else None,
        kv_cache_tokens=kv if isinstance(kv, int) and not isinstance(kv, bool) else None)


def load_leg(leg_dir: Path, ledger: FileLedger, runs_root: Path | None = None) -> RunSummary:
    """Read a comparison leg (``leg.json`` and its files) and the probe run it points at.

    ``leg.json``: ``{"arm": "A"|"B", "leg": int, "bracket_id", "probe_run_dir" (absolute, or
    relative to the leg), "status", "reason", "identity": {...}, "kv_cache_tokens", "fit",
    "started_at", "ended_at"}``. A leg whose probe never ran (failed before it) is still
    returned, with the leg's own status and reason. Raises :class:`RunError` naming the file.
    """
    lp = leg_dir / "leg.json"
    leg = _json(ledger.read(lp), lp)
    if not isinstance(leg, dict) or leg.get("arm") not in ("A", "B"):
        raise RunError(f"{lp}: not a leg record (needs arm 'A' or 'B')")
    probe_dir = leg.get("probe_run_dir")
    if probe_dir is not None and not isinstance(probe_dir, str):
        raise RunError(f"{lp}: 'probe_run_dir' is not a path string")
    ident = Identity.from_mapping(leg.get("identity"))
    if probe_dir:
        pdir = input_path(probe_dir, f"{lp} probe_run_dir")
        if not pdir.is_absolute():
            pdir = (leg_dir / pdir) if runs_root is None else runs_root / pdir
        run = load_probe_run(pdir, ledger)
        ident = ident.merged(run.identity)
    else:
        run = RunSummary(run_id=leg_dir.name, path=leg_dir, status=str(
            leg.get("status") or "failed"), reason=leg.get("reason") or "the probe never ran",
            started_at=None, ended_at=None, identity=ident, phases=(), disruptions=())
    traces = _records(leg_dir / "fidelity.jsonl", ledger, Trace.from_dict, FidelityError)
    results = _records(leg_dir / "canaries.jsonl", ledger, CanaryResult.from_dict, CanaryError)
    if is_kind(leg_dir / "engine.log", str(leg_dir)):
        ledger.read(leg_dir / "engine.log")
    leg_status = leg.get("status")
    status, reason = run.status, run.reason
    if leg_status and leg_status != "complete" and status == "complete":
        status, reason = str(leg_status), leg.get("reason") or reason
    kv = leg.get("kv_cache_tokens")
    disruptions = run.disruptions + tuple(_disruption_text(d)
                                          for d in _list(leg, "disruptions", lp))
    return RunSummary(
        run_id=run.run_id, path=leg_dir, status=status, reason=reason,
        started_at=run.started_at or parse_time(leg.get("started_at"), f"{lp} started_at"),
        ended_at=run.ended_at or parse_time(leg.get("ended_at"), f"{lp} ended_at"),
        identity=ident, phases=run.phases, disruptions=disruptions, cases=run.cases,
        sweep=run.sweep,
        arm=leg["arm"], leg=leg.get("leg") if isinstance(leg.get("leg"), int) else None,
        bracket_id=str(leg["bracket_id"]) if leg.get("bracket_id") else None,
        kv_cache_tokens=kv if isinstance(kv, int) and not isinstance(kv, bool)
        else run.kv_cache_tokens,
        fit=leg.get("fit") if isinstance(leg.get("fit"), Mapping) else None,
        fidelity=tuple(traces), canaries=tuple(results),
        pair=str(leg["pair"]) if isinstance(leg.get("pair"), str) else None,
        round=leg["round"] if isinstance(leg.get("round"), int)
        and not isinstance(leg.get("round"), bool) else None,
        warmup_requests=run.warmup_requests, measured_requests=run.measured_requests,
        consistency=run.consistency, side=run.side)


def list_comparisons(data_root: Path) -> list[dict[str, Any]]:
    """Every comparison under ``data_root/comparisons``, oldest first: ``bracket_id``,
    ``path``, ``status``, ``reason``, ``order``, ``rounds``, ``legs`` (measured) and
    ``planned_legs`` (counts), ``started_at``, and ``leg_runs`` — ``{probe run dir: leg
    name}`` (e.g. ``"A1"``) for the legs whose probe ran. A comparison whose ``compare.json``
    cannot be read is listed with ``status`` "unreadable" and ``problem``; never raises."""
    base = data_root / "comparisons"
    if not base.is_dir():
        return []
    out: list[dict[str, Any]] = []
    for d in sorted(p for p in base.iterdir() if p.is_dir()):
        row: dict[str, Any] = {"bracket_id": d.name, "path": str(d), "leg_runs": {}}
        try:
            doc = read_json((d / "compare.json").read_bytes(), "compare.json")
            if not isinstance(doc, dict):
                raise ValueError("not a JSON object")
        except (OSError, ValueError) as exc:   # RunError is a ValueError
            row.update(status="unreadable", problem=str(exc) if isinstance(exc, RunError)
                       else f"compare.json: {exc}")
            out.append(row)
            continue
        legs = doc.get("legs") if isinstance(doc.get("legs"), list) else []
        planned = doc.get("planned_legs")
        row.update(status=str(doc.get("status") or "unknown"), reason=doc.get("reason"),
                   order=doc.get("order"), rounds=doc.get("rounds"), legs=len(legs),
                   planned_legs=len(planned) if isinstance(planned, list) else None,
                   started_at=doc.get("started_at"))
        for leg in legs:
            try:
                ld = read_json((d / str(leg) / "leg.json").read_bytes(), "leg.json")
            except (OSError, ValueError):   # a NUL in the leg's name, a bad file: not listed
                continue
            if isinstance(ld, dict) and isinstance(ld.get("probe_run_dir"), str):
                row["leg_runs"][ld["probe_run_dir"]] = f"{ld.get('arm')}{ld.get('leg')}"
        out.append(row)
    return out
