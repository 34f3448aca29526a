"""Seat profile: the TOML file that describes one serving node and its seat.

The profile is parsed with :mod:`tomllib` and validated by pydantic models that reject unknown
or misspelt keys (``extra="forbid"``). Sizes are bytes in code; in the file they may be integer
bytes or a string with a binary or decimal unit (``"62.56 GiB"``), parsed by pydantic's
:class:`pydantic.ByteSize` (``GiB`` = 2^30 B, ``GB`` = 10^9 B).

Lookup order (first found wins), see :func:`resolve_profile_path`:

1. ``--profile FILE`` on the command line;
2. the ``SEAT_CONSOLE_PROFILE`` environment variable;
3. ``$XDG_CONFIG_HOME/seat-console/profile.toml`` (``~/.config/...`` by default, via platformdirs);
4. the embedded default (``console/default_profile.toml``), the seat of the NVFP4 evaluation.
"""

from __future__ import annotations

import functools
import hashlib
import math
import os
import re
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Literal

from pydantic import (
    AnyHttpUrl,
    BaseModel,
    BeforeValidator,
    ByteSize,
    ConfigDict,
    Field,
    StrictBool,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)
from seat_console.core.fmt import GIB, MIB
from seat_console.core.gpu_ids import entry_identity
from seat_console.core.profile_path import (  # no pydantic: the first frame reads these first
    ENV_VAR,
    REFRESH_INTERVAL_MAX_S,
    REFRESH_INTERVAL_MIN_S,
    ProfileError,
    default_profile_text,
    resolve_profile_path,
    xdg_profile_path,
)

MAX_SIZE_BYTES = 1 << 50
"""Largest size (bytes) a profile may declare: 1 PiB, far above any card's memory or any
checkpoint's bytes per rank; a larger value is a typo (extra digits, a wrong unit)."""
MAX_MODEL_LEN = 1 << 32
"""Largest ``max_model_len`` (tokens) accepted: 4,294,967,296, far above any model's context."""
MAX_NUM_SEQS = 1 << 20
"""Largest ``max_num_seqs`` accepted: 1,048,576 concurrent sequences."""

MAX_PROFILE_CHARS = 256 << 10
"""Largest profile text accepted (256 KiB characters; the default profile is ~5 KB). Bounds
the parse time: ``tomllib`` takes ~1.3 s for an 800 KB array on the team's VM."""
MAX_DOTTED_KEY_PARTS = 32
"""Most parts in one dotted key or table header (``a.b.c``). ``tomllib`` is quadratic in them
(20,000 parts: 5 s; 40,000: out of memory), and no profile key has more than 4."""
MAX_PROFILE_DEPTH = 16
"""Deepest nesting of tables/arrays accepted in a profile (the deepest key nests 4 levels)."""

def _size_input(v: object) -> object:
    """Refuse what pydantic's ByteSize would crash on (OverflowError): a size string longer
    than 64 characters, a non-finite float."""
    if isinstance(v, str) and len(v) > 64:
        raise ValueError(f"a size is a number with an optional unit (\"62.56 GiB\"); "
                         f"got {len(v):,} characters")
    if isinstance(v, float) and not math.isfinite(v):
        raise ValueError(f"a size must be finite, got {v}")
    if isinstance(v, str) and re.fullmatch(r"\s*[0-9.]+[eE][+-]?[0-9]+\s*[A-Za-z]*\s*", v):
        # pydantic read "1e30 GiB" as 1 with the unit "e30" ("could not interpret byte unit:
        # e30": the trial); the unit was fine, the exponent is what is not read
        raise ValueError(f"{v.strip()!r}: a number with an exponent is not read as a size; "
                         "write its digits with a unit (\"62.56 GiB\") or a whole number of "
                         "bytes")
    return v


Size = Annotated[ByteSize, BeforeValidator(_size_input), Field(le=MAX_SIZE_BYTES)]
"""A byte count, integer or with a unit ("62.56 GiB"), at most :data:`MAX_SIZE_BYTES`."""

PlePlacement = Literal["gpu-replicated", "gpu-sharded", "host"]
"""Where the per-layer embedding (PLE) table lives: a full copy on every TP rank, split by
vocabulary across TP ranks, or offloaded to host memory."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, validate_default=True)

    @model_validator(mode="before")
    @classmethod
    def _no_bool_as_number(cls, data: object) -> object:
        """``true`` / ``false`` only where the key is a boolean: pydantic would read
        ``tensor_parallel_size = true`` as 1 and ``gpu_memory_utilization = true`` as 1.0."""
        if isinstance(data, dict):
            for key, value in data.items():
                field = cls.model_fields.get(key) if isinstance(key, str) else None
                if isinstance(value, bool) and field is not None \
                        and "bool" not in repr(field.annotation):
                    raise ValueError(f"{key} = {str(value).lower()}: a boolean where a "
                                     f"{_kind_of(field.annotation)} is expected")
        return data


def _kind_of(annotation: object) -> str:
    text = repr(annotation)
    for word, kind in (("ByteSize", "size"), ("float", "number"), ("int", "whole number"),
                       ("str", "string"), ("Path", "path"), ("Url", "URL")):
        if word in text:
            return kind
    return "value of another type"


class NodeSpec(_Strict):
    """The serving node and how it is reached.

    ``gpus`` lists the cards that serve the seat, TP rank 0 first, each an NVML index (``"0"``:
    nvidia-smi's numbering, *not* the CUDA ordinal, which ``CUDA_VISIBLE_DEVICES`` /
    ``CUDA_DEVICE_ORDER`` change), a GPU UUID (``"GPU-…"``, as ``nvidia-smi --query-gpu=uuid``
    prints it), a PCI bus id (``"00000000:2A:00.0"`` or ``lspci``'s ``"2a:00.0"``) or a MIG
    instance's UUID (``"MIG-…"``: the fit budgets that instance's memory). Matching live cards by
    UUID is preferred: indices can change across reboots. Two entries naming one card are an
    error in the fit budget (two TP ranks cannot share a card).
    ``declared_cuda_visible_bytes`` is the per-card CUDA-visible total (NVML total − reserved) used
    when a card cannot be read live (planning on another machine).
    ``ssh_port`` / ``ssh_identity_file`` / ``ssh_known_hosts_file`` tune ``transport = "ssh"``
    (BatchMode is always on: no password prompts; host keys are always verified).
    """

    name: str = "seat-node"
    transport: Literal["local", "ssh", "docker-exec"] = "local"
    ssh_target: str | None = Field(default=None, description="user@host for transport = ssh")
    exec_container: str | None = Field(
        default=None, description="container name for transport = docker-exec"
    )
    docker_host: str | None = Field(
        default=None, description="docker engine URL; default: DOCKER_HOST or the local socket"
    )
    ssh_port: int | None = Field(default=None, ge=1, le=65535,
                                 description="ssh port for transport = ssh (default: ssh's own)")
    ssh_identity_file: Path | None = Field(
        default=None, description="private key for transport = ssh (default: ssh's own)")
    ssh_known_hosts_file: Path | None = Field(
        default=None, description="known_hosts for transport = ssh (default: ~/.ssh/known_hosts); "
                                  "host keys are always checked")
    gpus: list[str] = Field(default_factory=lambda: ["0", "1"], min_length=1)
    declared_cuda_visible_bytes: Size | None = None

    @field_validator("name")
    @classmethod
    def _printable_name(cls, v: str) -> str:
        from seat_console.core.fmt import first_control

        bad = first_control(v)
        if bad is not None:
            raise ValueError(f"contains the control character {v[bad]!r} at position {bad}: "
                             "give the node's name in printable characters (it is shown in "
                             "the header and the journal)")
        return v

    @field_validator("gpus", mode="before")
    @classmethod
    def _gpus_as_str(cls, v: object) -> object:
        if isinstance(v, list):
            return [str(x) if isinstance(x, int) and not isinstance(x, bool) else x for x in v]
        return v

    @field_validator("gpus")
    @classmethod
    def _gpus_ascii(cls, v: list[str]) -> list[str]:
        # NVML indices, UUIDs and PCI bus ids are ASCII: "²" or "١" pass str.isdigit() but not
        # (or not as meant) int(), and the GPU panel went unavailable later (issue #22)
        for i, e in enumerate(v):
            if not e.strip() or not e.isascii() or not e.isprintable():
                raise ValueError(f"entry {i} {e!r} is not a GPU: give an NVML index in ASCII "
                                 "digits (\"0\"), a GPU UUID (\"GPU-…\"), a MIG UUID (\"MIG-…\") "
                                 "or a PCI bus id (\"00000000:2A:00.0\")")
        seen: dict[str, str] = {}
        for e in v:   # `profile --check` said ok, and `fit` then said NO VERDICT (the trial)
            ident = entry_identity(e)
            if ident in seen:
                raise ValueError(f"entries {seen[ident]!r} and {e!r} name the same device: two "
                                 "TP ranks cannot share one card; list each card once")
            seen[ident] = e
        return v

    @model_validator(mode="after")
    def _transport_target(self) -> NodeSpec:
        if self.transport == "ssh" and not self.ssh_target:
            raise ValueError("transport = 'ssh' needs node.ssh_target = 'user@host'")
        if self.transport == "docker-exec" and not self.exec_container:
            raise ValueError("transport = 'docker-exec' needs node.exec_container = 'NAME'")
        return self


class SeatSpec(_Strict):
    """The vLLM engine settings of the seat (the same names as vLLM's engine arguments)."""

    tensor_parallel_size: int = Field(default=2, ge=1, le=64)
    gpu_memory_utilization: float = Field(default=0.90, gt=0.0, le=1.0)
    max_model_len: int = Field(default=262144, ge=1, le=MAX_MODEL_LEN)
    max_num_seqs: int = Field(default=256, ge=1, le=MAX_NUM_SEQS)
    kv_cache_dtype: Literal["auto", "bfloat16", "float16", "fp8", "fp8_e4m3",
                            "fp8_e5m2"] = "auto"
    dtype: Literal["auto", "bfloat16", "float16", "float32"] = Field(
        default="auto", description="vLLM --dtype: the served dtype of unquantised weights "
                                    "(auto: float32 checkpoints are served as bfloat16 on CUDA)")
    device: Literal["cuda", "cuda-no-bf16", "cpu", "cpu-ppc64le"] = Field(
        default="cuda", description="what serves the seat, for dtype auto: cuda (compute "
                                    "capability >= 8.0), cuda-no-bf16 (6.0-7.x), cpu, cpu-ppc64le")
    block_size: int = Field(default=16, ge=1, description="KV cache block size in tokens")
    activation_reserve_bytes: Size = Field(
        default=ByteSize(0),
        description="explicit per-card reserve for activations / CUDA graphs in the fit budget",
    )
    cpu_kvcache_space_bytes: Size | None = Field(
        default=None,
        description="device cpu only: the KV cache vLLM's CPU backend allocates "
        "(VLLM_CPU_KVCACHE_SPACE × 2^30, e.g. '4 GiB'); unset: read VLLM_CPU_KVCACHE_SPACE from "
        "the seat container's environment (or swap.env for the candidate)",
    )
    endpoint: AnyHttpUrl = AnyHttpUrl("http://127.0.0.1:8000")
    prometheus_instance: str | None = Field(
        default=None, min_length=1, max_length=255, pattern=r"^[^\s]+$",
        description="the seat's `instance` label as the fleet's Prometheus scrapes it (e.g. "
                    "'seat-node:8000' where the console reaches the engine on 127.0.0.1); the "
                    "hold checks its silence's instance matcher against it. Unset: host:port "
                    "of endpoint (Prometheus' default instance, the target's __address__)")
    drain_timeout_s: float = Field(
        default=60.0, ge=0.0, le=3600.0,
        description="before the seat's engine is stopped (swap, restore, each compare leg): how "
                    "long the console waits for the requests running and waiting to finish "
                    "once it stops admitting; the requests left at this bound are cut, counted "
                    "and journaled (actions/drain.py); 0 turns the drain off (the stop at once, "
                    "no drain)")


class ModelShapeSpec(_Strict):
    """The model shape the KV cache model needs, declared when no ``config.json`` is at hand.

    Keys are named as in a Hugging Face ``config.json`` (text config) and mean the same; the fit
    budget labels figures computed from them "declared". Layer kinds come from ``layer_types``
    (``full_attention`` / ``sliding_attention`` / ``linear_attention``), else from
    ``sliding_window_pattern`` (every Nth layer full, the rest sliding, as Gemma 3), else every
    layer is full attention. MLA models set ``kv_lora_rank`` + ``qk_rope_head_dim``; hybrid
    linear-attention (Gated DeltaNet) layers need the ``linear_*`` keys.
    """

    architecture: str | None = None
    num_hidden_layers: int = Field(ge=1)
    num_attention_heads: int = Field(ge=1)
    num_key_value_heads: int | None = Field(default=None, ge=1)
    head_dim: int | None = Field(default=None, ge=1)
    hidden_size: int | None = Field(default=None, ge=1)
    vocab_size: int | None = Field(default=None, ge=1)
    torch_dtype: Literal["bfloat16", "float16", "float32"] = "bfloat16"
    sliding_window: int | None = Field(default=None, ge=1)
    sliding_window_pattern: int | None = Field(default=None, ge=1)
    layer_types: (
        list[Literal["full_attention", "sliding_attention", "linear_attention"]] | None
    ) = None
    num_kv_shared_layers: int = Field(default=0, ge=0)
    kv_lora_rank: int | None = Field(default=None, ge=1)
    qk_rope_head_dim: int | None = Field(default=None, ge=0)
    linear_num_key_heads: int | None = Field(default=None, ge=1)
    linear_num_value_heads: int | None = Field(default=None, ge=1)
    linear_key_head_dim: int | None = Field(default=None, ge=1)
    linear_value_head_dim: int | None = Field(default=None, ge=1)
    linear_conv_kernel_dim: int | None = Field(default=None, ge=1)


class RequiredFile(_Strict):
    """A file the candidate's serving image must contain (``[[candidate.requires.files]]``):
    ``path`` (absolute, inside the image) and optionally ``pattern`` (RE2 syntax, google-re2:
    linear time; some line of the file must match it — the line found is shown). Without a
    pattern the file must exist."""

    path: str = Field(min_length=2, max_length=4096)
    pattern: str | None = Field(default=None, min_length=1, max_length=2000)

    @field_validator("path")
    @classmethod
    def _absolute(cls, v: str) -> str:
        if not v.startswith("/") or "\x00" in v:
            raise ValueError(f"path {v!r} must be absolute inside the image (start with '/')")
        return v

    @field_validator("pattern")
    @classmethod
    def _re2(cls, v: str | None) -> str | None:
        if v is None:
            return v
        from seat_console.core.untrusted import InputError, compile_re2

        try:
            compile_re2(v, "pattern")
        except InputError as exc:
            raise ValueError(f"{exc.problem} (matched with RE2: no lookaround or "
                             "backreferences)") from None
        return v


class Requires(_Strict):
    """What a side needs from its serving image (``[candidate.requires]``), checked inside the
    image itself, offline, by ``seat-console image-check`` — not the commit a README names (the
    mistake the evaluation behind this console lost days to; docs/runbook.md).

    ``engine``: a PEP 440 version specifier (``">=0.33,<0.35"``) the engine installed in the
    image must satisfy, read from its package metadata (the first of ``engine_packages``
    installed: ``vllm``, then ``vllm-cpu``); ``files``: :class:`RequiredFile` entries;
    ``python``: dotted names that must import in the image, ``"module:attr.attr"`` or
    ``"module"``; ``python_bin``: the interpreter in the image that runs the engine and
    python checks (default: the swap command's first item when it is a Python, else
    ``python3``). At least one of ``engine``, ``files``, ``python``."""

    engine: str | None = Field(default=None, max_length=200)
    engine_packages: list[str] = Field(default_factory=lambda: ["vllm", "vllm-cpu"],
                                       min_length=1, max_length=8)
    files: list[RequiredFile] = Field(default_factory=list, max_length=64)
    python: list[str] = Field(default_factory=list, max_length=64)
    python_bin: str | None = Field(default=None, max_length=4096)

    @field_validator("engine")
    @classmethod
    def _specifier(cls, v: str | None) -> str | None:
        if v is None:
            return v
        from packaging.specifiers import InvalidSpecifier, SpecifierSet

        try:
            SpecifierSet(v)
        except InvalidSpecifier:
            raise ValueError(f"engine {v!r} is not a PEP 440 version specifier (write e.g. "
                             "'>=0.33,<0.35' or '==0.34.*')") from None
        return v

    @field_validator("python")
    @classmethod
    def _dotted(cls, v: list[str]) -> list[str]:
        for name in v:
            mod, _, attr = name.partition(":")
            if not mod or not all(p.isidentifier() for p in mod.split(".")) or (
                    attr and not all(p.isidentifier() for p in attr.split("."))):
                raise ValueError(f"python {name!r}: write 'package.module' or "
                                 "'package.module:Class.attr' (Python identifiers)")
        return v

    @field_validator("engine_packages")
    @classmethod
    def _names(cls, v: list[str]) -> list[str]:
        for name in v:
            if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}", name):
                raise ValueError(f"engine_packages {name!r} is not a package name")
        return v

    @model_validator(mode="after")
    def _something(self) -> Requires:
        if self.engine is None and not self.files and not self.python:
            raise ValueError("give at least one of engine, files, python")
        return self


class CheckpointSpec(_Strict):
    """A checkpoint that can sit in the seat (the resident) or is being tried (the candidate).

    Either ``path`` points at a local checkpoint directory (``config.json`` + safetensors), or the
    sizes are declared: ``weights_bytes_per_rank`` (per TP rank, excluding the PLE table) and
    ``ple_bytes`` (the whole PLE table). ``ple_tensor_pattern`` is a regular expression over
    tensor names that selects the PLE table when scanning files.
    The KV cache model reads the shape from ``path``/config.json, else from ``config_json`` (a
    config.json whose weights live elsewhere), else from the declared ``model_shape``.
    ``ple_host_sharing``: with ``ple_placement = "host"``, whether each TP worker process keeps its
    own host copy of the table (``per-process``) or one copy is shared (``shared``).
    ``requires``: what this side needs from its serving image (:class:`Requires`; checked by
    ``seat-console image-check``).
    ``engine``: the vLLM version serving this side (``"vllm==0.34.0"``, ``"0.34.0"``), the
    fit's last source after the running engine's ``/version`` and the image's package
    metadata (:mod:`seat_console.fit.engine_rules`).
    """

    name: str
    engine: str | None = Field(default=None, max_length=200)
    path: Path | None = None
    container: str | None = None
    image: str | None = None
    weights_bytes_per_rank: Size | None = None
    ple_bytes: Size | None = None
    ple_placement: PlePlacement = "gpu-replicated"
    ple_tensor_pattern: str = r"(^|\.)(embed_tokens_per_layer|per_layer_embed\w*)(\.|$)"
    config_json: Path | None = None
    model_shape: ModelShapeSpec | None = None
    ple_host_sharing: Literal["per-process", "shared"] = "per-process"
    requires: Requires | None = None

    @field_validator("engine")
    @classmethod
    def _engine_version(cls, v: str | None) -> str | None:
        if v is None:
            return v
        from packaging.version import InvalidVersion, Version

        try:
            Version(v.strip().split("==")[-1].strip())
        except InvalidVersion:
            raise ValueError(f"engine {v!r} is not one version: write e.g. "
                             "\"vllm==0.34.0\" (a specifier belongs in requires.engine)") from None
        return v.strip()

    @field_validator("ple_tensor_pattern")
    @classmethod
    def _ple_re2(cls, v: str) -> str:
        from seat_console.core.untrusted import InputError, compile_re2

        try:
            compile_re2(v, "ple_tensor_pattern")
        except InputError as exc:
            raise ValueError(f"{exc.problem} (the scan matches it with RE2, in linear time)"
                             ) from None
        return v


class TimerSpec(_Strict):
    """systemd timer units the hold recipe stops and restores (names of ``*.timer`` units)."""

    conformance: list[str] = Field(default_factory=list)
    remediation: str | None = None

    @field_validator("conformance")
    @classmethod
    def _timer_suffix(cls, v: list[str]) -> list[str]:
        for unit in v:
            if not unit.endswith(".timer"):
                raise ValueError(f"{unit!r} is not a timer unit name (must end in '.timer')")
        return v

    @field_validator("remediation")
    @classmethod
    def _remediation_suffix(cls, v: str | None) -> str | None:
        if v is not None and not v.endswith(".timer"):
            raise ValueError(f"{v!r} is not a timer unit name (must end in '.timer')")
        return v

    @property
    def all_units(self) -> list[str]:
        """Every timer unit of the profile, conformance timers first."""
        return [*self.conformance, *([self.remediation] if self.remediation else [])]


class AlertmanagerSpec(_Strict):
    """Where Alertmanager's v2 API is and how to authenticate.

    Credentials never live in the profile: ``auth = "basic"`` reads ``SEAT_CONSOLE_AM_USER`` /
    ``SEAT_CONSOLE_AM_PASSWORD`` (or ``credentials_file`` holding ``user:password``);
    ``auth = "bearer"`` reads ``SEAT_CONSOLE_AM_TOKEN`` (or ``credentials_file``).
    """

    url: AnyHttpUrl = AnyHttpUrl("http://127.0.0.1:9093")
    auth: Literal["none", "basic", "bearer"] = "none"
    credentials_file: Path | None = None
    verify_tls: StrictBool = True
    ca_file: Path | None = None


class Matcher(_Strict):
    """One Alertmanager silence matcher, as the v2 API's ``matchers[]`` item. A regex
    (``is_regex = true``) must be valid RE2 (Go ``regexp``) syntax, as Alertmanager requires:
    look-arounds and back-references are refused here, at load time."""

    name: str = Field(min_length=1)
    value: str
    is_regex: StrictBool = False
    is_equal: StrictBool = True

    @model_validator(mode="after")
    def _re2(self) -> Matcher:
        if self.is_regex:
            from seat_console.core.untrusted import InputError, compile_re2

            try:
                compile_re2(self.value, "value", anchored=True)
            except InputError as exc:
                raise ValueError(exc.problem) from None
        return self


class SilenceSpec(_Strict):
    """The silence the hold places on the seat's endpoint."""

    matchers: list[Matcher] = Field(min_length=1)
    ttl_s: int = Field(default=7200, ge=60, le=7 * 86400)
    comment: str = "seat-console hold"
    created_by: str = "seat-console"


class ConsoleSpec(_Strict):
    """Console behaviour: refresh interval (seconds, :data:`REFRESH_INTERVAL_MIN_S` to
    :data:`REFRESH_INTERVAL_MAX_S`) and history kept for sparklines (seconds)."""

    refresh_interval_s: float = Field(default=1.0, ge=REFRESH_INTERVAL_MIN_S,
                                      le=REFRESH_INTERVAL_MAX_S)
    history_s: int = Field(default=300, ge=10, le=86400)


class RunbookSpec(_Strict):
    """``[runbook]``: ``approvals`` — how many operators a ``swap`` or ``promote`` needs (1: the
    one who runs it; 2: a second operator must run ``seat-console approve ID`` while it waits);
    ``approval_timeout_s`` — how long it waits for that (seconds, 10 to a day; default 30 min),
    then it is refused with nothing changed."""

    approvals: int = Field(default=1, ge=1, le=2)
    approval_timeout_s: int = Field(default=1800, ge=10, le=86400)


# -- [keys] (issue 18) ----------------------------------------------------------------------------
KEY_NAME_RE = re.compile(r"^[A-Za-z0-9_+\-]{1,32}(?:,[A-Za-z0-9_+\-]{1,32}){0,3}$")
"""A key as Textual names it (``H``, ``ctrl+h``, ``f5``, ``question_mark``), or up to four
comma-separated."""


def _flatten_keys(v: object, prefix: str = "") -> object:
    """``[keys]`` as ``binding id → key``: a dotted id written unquoted (``node.hold = "h"``)
    is a nested table in TOML; it is flattened back to ``"node.hold"``."""
    if not isinstance(v, dict):
        return v
    out: dict[str, object] = {}
    for k, val in v.items():
        name = f"{prefix}{k}"
        if isinstance(val, dict):
            flat = _flatten_keys(val, f"{name}.")
            assert isinstance(flat, dict)
            out.update(flat)
        else:
            out[name] = val
    return out


def _key_names(v: dict[str, str]) -> dict[str, str]:
    for ident, key in v.items():
        if not KEY_NAME_RE.match(key):
            raise ValueError(f"keys.{ident} = {key!r}: write a key as Textual names it, e.g. "
                             "\"H\", \"ctrl+h\", \"f5\" (several: \"h,ctrl+h\")")
    return v


KeyMap = Annotated[dict[str, str], BeforeValidator(_flatten_keys)]
"""The profile's ``[keys]``: binding id → key(s). Which ids exist is the TUI's key table's
business (:func:`seat_console.tui.keys.check_keymap`), not the profile's."""

# -- [fleet] (issue 19) ------------------------------------------------------------------------
SSH_TARGET_RE = re.compile(r"^(?:[A-Za-z0-9._][A-Za-z0-9._-]{0,63}@)?"
                           r"(?:[A-Za-z0-9][A-Za-z0-9.-]{0,252}|\[[0-9A-Fa-f:.]{2,45}\])$")
"""``[user@]host`` for the fleet inventory's SSH transport: a user of ``[A-Za-z0-9._-]`` (not
starting with ``-``), a host name or a bracketed IPv6 address. No leading ``-`` anywhere, no
spaces or shell characters: the value is one argument of ``ssh``, never an option."""


def _printable_field(v: str, what: str) -> str:
    from seat_console.core.fmt import first_control

    bad = first_control(v)
    if bad is not None:
        raise ValueError(f"{what} contains the control character {v[bad]!r} at position {bad}")
    return v


class FleetSeat(_Strict):
    """One seat of the fleet inventory (``[[fleet.inventory]]``).

    ``instance``: its Prometheus ``instance`` label (every series of the seat carries it);
    ``node``: the name shown (default: ``seat_info``'s ``node`` label, else the instance);
    ``profile``: the path of that node's seat profile where its console runs (over SSH: on the
    node) — ``a`` on the fleet screen opens that console; ``ssh``: ``[user@]host`` to reach the
    node (the console is started with ``ssh -t``; unset: run it on this machine).
    """

    instance: str = Field(min_length=1, max_length=256)
    node: str | None = Field(default=None, min_length=1, max_length=256)
    profile: str | None = Field(default=None, min_length=1, max_length=4096)
    ssh: str | None = None

    @field_validator("instance", "node", "profile")
    @classmethod
    def _printable(cls, v: str | None, info: ValidationInfo) -> str | None:
        return None if v is None else _printable_field(v, info.field_name or "value")

    @field_validator("ssh")
    @classmethod
    def _ssh_target(cls, v: str | None) -> str | None:
        if v is not None and not SSH_TARGET_RE.match(v):
            raise ValueError(f"ssh {_clip(repr(v))} is not '[user@]host' (letters, digits, "
                             "'.', '-', '_'; no leading '-', no spaces)")
        return v


class FleetSpec(_Strict):
    """The fleet screen (``seat-console fleet``): where the fleet's Prometheus-compatible query
    API and Alertmanager are, how often to refresh, and the seats it may open.

    ``prometheus_url``: any Prometheus HTTP API v1 (Prometheus, Thanos, Mimir's
    ``…/prometheus``, VictoriaMetrics); ``alertmanager_url``: unset = ``[alertmanager].url``
    (its auth settings are used for both); ``refresh_interval_s``: seconds between refreshes;
    ``scrape_interval_s``: the fleet's scrape interval (a seat is stale after two);
    ``window_s``: how long a seat whose series vanished stays listed; ``inventory``: seats
    listed even without series, and the consoles ``a`` opens (instances unique).
    """

    prometheus_url: AnyHttpUrl = AnyHttpUrl("http://127.0.0.1:9090")
    alertmanager_url: AnyHttpUrl | None = None
    refresh_interval_s: float = Field(default=5.0, ge=1.0, le=REFRESH_INTERVAL_MAX_S)
    scrape_interval_s: float = Field(default=15.0, ge=0.1, le=3600.0)
    window_s: float = Field(default=600.0, ge=60.0, le=86400.0)
    query_timeout_s: float = Field(default=5.0, gt=0.0, le=120.0)
    inventory: list[FleetSeat] = Field(default_factory=list, max_length=100_000)

    @field_validator("inventory")
    @classmethod
    def _unique_instances(cls, v: list[FleetSeat]) -> list[FleetSeat]:
        seen: set[str] = set()
        for s in v:
            if s.instance in seen:
                raise ValueError(f"instance {_clip(repr(s.instance))} appears twice in "
                                 "fleet.inventory")
            seen.add(s.instance)
        return v


# -- [backport] and [swap] (issue 8) -------------------------------------------------------------
DIGEST_REF_RE = re.compile(
    r"^(?P<repo>[a-z0-9]+(?:[._-][a-z0-9]+)*(?:\.[a-z0-9-]+)*(?::[0-9]{1,5})?"
    r"(?:/[a-z0-9]+(?:(?:\.|_|__|-+)[a-z0-9]+)*)*)@(?P<digest>sha256:[0-9a-f]{64})$")
"""``repo@sha256:<64 lowercase hex>``: a repository (optional ``host[:port]/``, lowercase path
components, Docker's reference grammar, ``distribution/reference``) pinned by a *manifest*
digest, with no tag. A tag next to a digest is refused: the digest alone decides, and a tag
there only misleads the reader."""
SHA256_HEX_RE = re.compile(r"^[0-9a-f]{64}$")
ENV_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
CONTAINER_NAME_RE = re.compile(r"^[a-zA-Z0-9][a-zA-Z0-9_.-]{0,127}$")
"""Docker's container name rule (``[a-zA-Z0-9][a-zA-Z0-9_.-]+``), bounded."""
TAG_REF_RE = re.compile(
    r"^[a-z0-9]+(?:[._-][a-z0-9]+)*(?:\.[a-z0-9-]+)*(?::[0-9]{1,5})?"
    r"(?:/[a-z0-9]+(?:(?:\.|_|__|-+)[a-z0-9]+)*)*:[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$")
"""``repo:tag`` (Docker's grammar: a tag is ``[\\w][\\w.-]{0,127}``)."""
TAG_TEMPLATE_FIELDS = frozenset({"content_hash"})
"""Placeholders a ``backport.tag`` template may use: ``{content_hash}`` (required) is the first
16 hex digits of the sha256 over the build's inputs (base digest, each file's dest and sha256,
env), so the same inputs always give the same tag and any change gives a new one."""


def _profile_dir(info: ValidationInfo) -> Path:
    ctx = info.context if isinstance(info.context, dict) else {}
    d = ctx.get("profile_dir")
    return Path(d) if d else Path.cwd()


class BackportFile(_Strict):
    """One patched file copied over the base image.

    ``source``: the patched file on this machine; a relative path is relative to the profile's
    directory; it must exist when the profile is loaded. ``dest``: the absolute path inside the
    image it replaces (it must already exist there: the preflight checks, since a typo'd path
    would add a new file and the backport would change nothing). ``original_sha256``: the
    sha256 (64 lowercase hex) the base image's file must have, so the patch lands on the file
    it was written against.
    """

    source: Path
    dest: str
    original_sha256: str | None = None

    @field_validator("source")
    @classmethod
    def _source_exists(cls, v: Path, info: ValidationInfo) -> Path:
        p = v.expanduser()
        if not p.is_absolute():
            p = _profile_dir(info) / p
        if not p.is_file():
            what = "is a directory" if p.is_dir() else "no such file"
            raise ValueError(f"patched source file {p}: {what} (give the patched file's path, "
                             "absolute or relative to the profile's directory)")
        return p

    @field_validator("dest")
    @classmethod
    def _dest_absolute(cls, v: str) -> str:
        if not v.startswith("/"):
            raise ValueError(f"dest {v!r} is a relative path: give the absolute path of the file "
                             "inside the image (e.g. '/usr/lib/python3/dist-packages/x.py')")
        parts = v.split("/")
        if ".." in parts or v.endswith("/") or "\n" in v or "\x00" in v:
            raise ValueError(f"dest {v!r} must name one file: no '..', no trailing '/'")
        return v

    @field_validator("original_sha256")
    @classmethod
    def _sha_hex(cls, v: str | None) -> str | None:
        if v is not None and not SHA256_HEX_RE.match(v):
            raise ValueError(f"original_sha256 {v!r} is not 64 lowercase hex digits "
                             "(as `sha256sum FILE` prints it)")
        return v


class BackportSpec(_Strict):
    """A backport: patched files copied over a base image pinned by digest (``seat-console
    build-backport``).

    ``base``: ``repo@sha256:…`` (:data:`DIGEST_REF_RE`), the registry manifest digest — not the
    image ID, which is local to one engine. ``files``: at least one :class:`BackportFile`,
    dests unique. ``env``: ``ENV`` lines added to the image (e.g. an offload switch the seat
    needs). ``tag``: the result's ``repo:tag`` template, which must contain ``{content_hash}``;
    ``--push`` pushes it to the registry named by its host part.
    """

    base: str
    files: list[BackportFile] = Field(min_length=1)
    env: dict[str, str] = Field(default_factory=dict)
    tag: str = "seat-backport:{content_hash}"

    @field_validator("base")
    @classmethod
    def _base_by_digest(cls, v: str) -> str:
        if DIGEST_REF_RE.match(v):
            return v
        if "@" not in v:
            raise ValueError(f"base {v!r} is not pinned by digest: write 'repo@sha256:<64 hex>' "
                             "(`docker inspect -f '{{.RepoDigests}}' IMAGE` prints it; a tag "
                             "can move, an image ID is local to one engine)")
        name, _, digest = v.partition("@")
        if ":" in name.rsplit("/", 1)[-1]:
            raise ValueError(f"base {v!r}: drop the tag, keep 'repo@sha256:…' (the digest alone "
                             "decides which image is built on)")
        raise ValueError(f"base {v!r}: bad digest syntax {digest!r} (expected 'sha256:' and 64 "
                         "lowercase hex digits) or bad repository name {name!r}")

    @field_validator("env")
    @classmethod
    def _env_names(cls, v: dict[str, str]) -> dict[str, str]:
        for k, val in v.items():
            if not ENV_NAME_RE.match(k):
                raise ValueError(f"env name {k!r} is not a valid variable name "
                                 "([A-Za-z_][A-Za-z0-9_]*)")
            if "\n" in val or "\x00" in val:
                raise ValueError(f"env {k}: the value must be one line")
        return v

    @field_validator("tag")
    @classmethod
    def _tag_template(cls, v: str) -> str:
        import string

        try:
            fields = {f for _, f, _, _ in string.Formatter().parse(v) if f is not None}
        except ValueError as exc:
            raise ValueError(f"tag template {v!r}: {exc} (use '{{content_hash}}')") from None
        unknown = fields - TAG_TEMPLATE_FIELDS
        if unknown:
            raise ValueError(f"tag template {v!r}: unknown placeholder(s) {sorted(unknown)}; "
                             "the only one is {content_hash}")
        if "content_hash" not in fields:
            raise ValueError(f"tag template {v!r} must contain {{content_hash}} (same inputs → "
                             "same tag, other inputs → another tag)")
        sample = v.format(content_hash="0" * 16)
        if not TAG_REF_RE.match(sample):
            raise ValueError(f"tag template {v!r} does not give a 'repo:tag' reference "
                             f"(gives {sample!r})")
        return v

    @model_validator(mode="after")
    def _unique_dests(self) -> BackportSpec:
        seen: set[str] = set()
        for f in self.files:
            if f.dest in seen:
                raise ValueError(f"dest {f.dest!r} appears twice in backport.files")
            seen.add(f.dest)
        return self


def _re2_options() -> object:
    import re2

    opts = re2.Options()
    opts.log_errors = False
    return opts


class FailurePattern(_Strict):
    """A log pattern that fails a swap's startup check when it matches any line of the probe's
    log. ``pattern`` is RE2 syntax (google-re2: linear time, so a pattern cannot hang on a long
    line; no lookaround or backreferences); ``(?i)`` makes it case-insensitive."""

    name: str = Field(min_length=1, max_length=64)
    pattern: str = Field(min_length=1, max_length=2000)
    meaning: str = ""

    @field_validator("pattern")
    @classmethod
    def _compiles(cls, v: str) -> str:
        import re2

        try:
            re2.compile(v, options=_re2_options())
        except re2.error as exc:
            msg = exc.args[0].decode() if exc.args and isinstance(exc.args[0], bytes) else exc
            raise ValueError(f"pattern {v!r} is not valid RE2 syntax: {msg} (RE2 has no "
                             "lookaround or backreferences)") from None
        return v


DEFAULT_FAILURE_PATTERNS: tuple[FailurePattern, ...] = (
    FailurePattern(
        name="out-of-memory",
        pattern=r"(?i)(CUDA out of memory|OutOfMemoryError|No available memory for the cache "
                r"blocks|larger than the available KV cache memory|Available KV cache memory: -)",
        meaning="the engine ran out of device memory or has no room for one request's KV cache"),
    FailurePattern(
        name="ple-zeros",
        pattern=r"(?i)(zeros? in (the )?(PLE|per[-_ ]layer[-_ ]embed)|(PLE|per[-_ ]layer[-_ ]"
                r"embed\w*)[^\n]{0,200}(all[-_ ]zeros?|zero[-_ ]filled|filled with zeros))",
        meaning="the per-layer embedding table loaded as zeros: it serves, but degraded"),
    FailurePattern(
        name="weight-offload-fallback",
        pattern=r"(?i)(fall(ing|s)? back to [^\n]{0,80}offload|offloading [^\n]{0,40}weights "
                r"to (the )?cpu|cpu[-_ ]offload(ing)?[-_ ]gb ?= ?[1-9])",
        meaning="weights were offloaded to host memory: it serves, far slower than the seat needs"),
)
"""The default ``swap.failure_patterns``: illustrative wording, not vLLM's exact strings for
every version — check them against the candidate's real log (``docker logs``) and extend."""


class SwapSpec(_Strict):
    """The probe container a seat swap starts (``seat-console swap``) in the resident's place.

    ``container``: its name. ``image``: ``"backport"`` (the image ``build-backport`` made from
    ``[backport]``, run by image ID) or an image reference. ``entrypoint`` (optional) and
    ``command`` are the container's argv (for a vLLM image, the engine arguments).
    ``volumes``: ``"/host/path:/container/path[:ro|:rw]"``. ``gpus``: GPU UUIDs given to the
    container (``DeviceRequests``); unset = ``node.gpus`` (which must then be UUIDs); ``[]`` =
    none (the lab's CPU engine). ``served_model_name``: what ``/v1/models`` must list.
    ``endpoint``: the probe's URL (default ``seat.endpoint``: the probe takes the seat's port).
    ``start_timeout_s``: how long ``/health`` may take (a large model loads for minutes).
    ``failure_patterns``: log patterns that fail the start (:data:`DEFAULT_FAILURE_PATTERNS`).
    """

    container: str = "seat-probe"
    image: str = "backport"
    entrypoint: list[str] | None = None
    command: list[str] = Field(default_factory=list)
    env: dict[str, str] = Field(default_factory=dict)
    volumes: list[str] = Field(default_factory=list)
    network_mode: str = "host"
    ipc_mode: str | None = None
    shm_size: Size | None = None
    gpus: list[str] | None = None
    served_model_name: str = Field(min_length=1)
    endpoint: AnyHttpUrl | None = None
    start_timeout_s: float = Field(default=900.0, ge=5.0, le=7200.0)
    failure_patterns: list[FailurePattern] = Field(
        default_factory=lambda: list(DEFAULT_FAILURE_PATTERNS))

    @field_validator("container")
    @classmethod
    def _name(cls, v: str) -> str:
        if not CONTAINER_NAME_RE.match(v):
            raise ValueError(f"container name {v!r} is not a valid docker name "
                             "([a-zA-Z0-9][a-zA-Z0-9_.-]*)")
        return v

    @field_validator("env")
    @classmethod
    def _env(cls, v: dict[str, str]) -> dict[str, str]:
        for k in v:
            if not ENV_NAME_RE.match(k):
                raise ValueError(f"env name {k!r} is not a valid variable name")
        return v

    @field_validator("volumes")
    @classmethod
    def _volumes(cls, v: list[str]) -> list[str]:
        for spec in v:
            parts = spec.split(":")
            if len(parts) not in (2, 3) or not all(p.startswith("/") for p in parts[:2]) or (
                    len(parts) == 3 and parts[2] not in ("ro", "rw")):
                raise ValueError(f"volume {spec!r}: write '/host/path:/container/path[:ro|:rw]' "
                                 "(absolute paths)")
        return v


class ProbePhaseSpec(_Strict):
    """One measured phase of the probe (``[[probe.phases]]``).

    ``name``: shown and used in file names (``[a-z0-9][a-z0-9_-]*``); ``requests``: how many
    requests the phase sends (its expected population); ``concurrency``: closed loop — at most
    this many in flight, a new one sent as soon as one finishes; ``request_rate``: optional
    open-loop arrival rate (requests/s, Poisson arrivals seeded by ``probe.seed``, as ``vllm
    bench serve --request-rate``), still capped by ``concurrency``.
    """

    name: str = Field(pattern=r"^[a-z0-9][a-z0-9_-]{0,40}$")
    requests: int = Field(ge=1, le=1_000_000)
    concurrency: int = Field(default=1, ge=1, le=4096)
    request_rate: float | None = Field(default=None, gt=0.0, le=1e6)


class ProbeSloSpec(_Strict):
    """Latency targets for goodput (``[probe.slo]``; any subset, at least one): ``ttft_ms``,
    ``tpot_ms``, ``e2e_ms`` — milliseconds, a request meets one when its figure is ``<=`` it.
    Per phase the probe reports the share of requests that met all of them, with its Wilson
    95 % interval (:func:`seat_console.core.probe_stats.goodput`)."""

    ttft_ms: float | None = Field(default=None, gt=0.0, le=1e7, allow_inf_nan=False)
    tpot_ms: float | None = Field(default=None, gt=0.0, le=1e7, allow_inf_nan=False)
    e2e_ms: float | None = Field(default=None, gt=0.0, le=1e7, allow_inf_nan=False)

    @model_validator(mode="after")
    def _one(self) -> ProbeSloSpec:
        if not self.targets():
            raise ValueError("[probe.slo] sets no target: give ttft_ms, tpot_ms and/or e2e_ms "
                             "(milliseconds), or remove the table")
        return self

    def targets(self) -> dict[str, float]:
        """The targets given: name → ms (e.g. ``{"ttft_ms": 500.0}``)."""
        return {k: v for k, v in self.model_dump().items() if v is not None}


def _default_probe_phases() -> list[ProbePhaseSpec]:
    return [ProbePhaseSpec(name="single-stream", requests=32, concurrency=1),
            ProbePhaseSpec(name="concurrency-64", requests=256, concurrency=64)]


class ProbeSpec(_Strict):
    """The probe (``seat-console probe``): load sent to whichever container holds the seat.

    ``api``: ``completions`` (``/v1/completions``) or ``chat`` (``/v1/chat/completions``);
    ``prompt_set``: ``"builtin:seat-probe-v1"`` (shipped) or a JSON file path;
    ``output_tokens``: ``max_tokens`` of every request; ``ignore_eos``: generate exactly that many
    (vLLM's extension; needed for fixed lengths); ``warmup_requests``: sent first, one at a time,
    excluded from every figure; ``phases``: the measured phases in order; ``model``: served model
    name (default: the first of ``/v1/models``); ``endpoint``: default ``seat.endpoint``;
    ``read_timeout_s``: longest silence inside a stream before the request fails;
    ``request_timeout_s``: longest whole request; ``seed``: arrival times of rate-limited
    phases; ``watch_interval_s``: how often interference is checked during a run;
    ``stream_client``: how streams are read — ``hot`` (default: an asyncio protocol with
    httptools, ``probe/hotpath.py``) or the httpx path over ``aiohttp`` / ``httpcore`` (kept
    selectable; both give the same records, ``tests/test_probe_hotpath.py``); ``slo``: latency
    targets for goodput (:class:`ProbeSloSpec`, ``[probe.slo]``; none = no goodput);
    ``prefix_cache``: how each phase starts cache-clean — ``auto`` (default: ``POST
    /reset_prefix_cache`` before every phase where the engine offers it, else a recorded nonce
    before every prompt of the phase), ``nonce`` (always the nonce), ``off`` (neither: a phase
    may hit what an earlier one cached; recorded so).
    """

    api: Literal["completions", "chat"] = "completions"
    prompt_set: str = "builtin:seat-probe-v1"
    output_tokens: int = Field(default=256, ge=1, le=1_000_000)
    ignore_eos: StrictBool = True
    warmup_requests: int = Field(default=2, ge=0, le=10_000)
    phases: list[ProbePhaseSpec] = Field(default_factory=_default_probe_phases, min_length=1)
    model: str | None = None
    endpoint: AnyHttpUrl | None = None
    read_timeout_s: float = Field(default=60.0, gt=0.0, le=3600.0)
    request_timeout_s: float = Field(default=600.0, gt=0.0, le=86400.0)
    seed: int = 0
    watch_interval_s: float = Field(default=2.0, ge=0.2, le=60.0)
    stream_client: Literal["hot", "aiohttp", "httpcore"] = "hot"
    slo: ProbeSloSpec | None = None
    prefix_cache: Literal["auto", "nonce", "off"] = "auto"

    @field_validator("phases")
    @classmethod
    def _unique(cls, v: list[ProbePhaseSpec]) -> list[ProbePhaseSpec]:
        names = [p.name for p in v]
        dup = sorted({n for n in names if names.count(n) > 1})
        if dup:
            raise ValueError(f"phase names must be unique; repeated: {', '.join(dup)}")
        return v


class Profile(_Strict):
    """A whole seat profile. See ``console/default_profile.toml`` for every key with a comment."""

    node: NodeSpec = Field(default_factory=NodeSpec)
    seat: SeatSpec = Field(default_factory=SeatSpec)
    resident: CheckpointSpec
    candidate: CheckpointSpec | None = None
    timers: TimerSpec = Field(default_factory=TimerSpec)
    alertmanager: AlertmanagerSpec = Field(default_factory=AlertmanagerSpec)
    silence: SilenceSpec
    console: ConsoleSpec = Field(default_factory=ConsoleSpec)
    backport: BackportSpec | None = None
    swap: SwapSpec | None = None
    probe: ProbeSpec = Field(default_factory=ProbeSpec)
    fleet: FleetSpec = Field(default_factory=FleetSpec)
    runbook: RunbookSpec = Field(default_factory=RunbookSpec)
    """``[runbook]``: approvals by a second operator (issue 30)."""
    keys: KeyMap = Field(default_factory=dict)
    """``[keys]``: remapped TUI keys, binding id → key (issue 18)."""

    _check_keys = field_validator("keys")(_key_names)

    @model_validator(mode="after")
    def _gpus_vs_tp(self) -> Profile:
        if len(self.node.gpus) < self.seat.tensor_parallel_size:
            raise ValueError(
                f"seat.tensor_parallel_size = {self.seat.tensor_parallel_size} needs at least that "
                f"many cards in node.gpus (has {len(self.node.gpus)})"
            )
        return self


@dataclass(frozen=True)
class LoadedProfile:
    """A validated profile with where it came from.

    ``source`` is a file path, or ``"<embedded default>"``; ``origin`` says which lookup step
    found it (``"--profile"``, ``"$SEAT_CONSOLE_PROFILE"``, ``"xdg"``, ``"default"``);
    ``sha256`` is the hex digest of the file's bytes (the profile hash in run evidence).
    """

    profile: Profile
    source: str
    origin: str
    sha256: str

    @property
    def given_path(self) -> str | None:
        """The path given with ``--profile`` (``source``), else ``None``: what a command the
        console suggests must name to read this same profile when pasted
        (:func:`~seat_console.core.profile_path.with_profile`); a profile found through
        ``$SEAT_CONSOLE_PROFILE``, XDG or the default is found again the same way."""
        return self.source if self.origin == "--profile" else None


def _clip(text: str, limit: int = 120) -> str:
    """``text`` cut to ``limit`` characters with its length said (hostile values are long)."""
    return text if len(text) <= limit else f"{text[:limit]}… ({len(text):,} characters)"


def _bounds_words(loc: tuple) -> str:
    """" from A to B" for the profile field at ``loc`` (its ``ge``/``le`` constraints), or ""
    when the path does not lead to a field of a model or the field has no bounds."""
    model: object = Profile
    info = None
    for part in loc:
        fields = getattr(model, "model_fields", None)
        if not isinstance(part, str) or not isinstance(fields, dict) or part not in fields:
            return ""
        info = fields[part]
        model = info.annotation
    if info is None:
        return ""
    ge = next((m.ge for m in info.metadata if getattr(m, "ge", None) is not None), None)
    le = next((m.le for m in info.metadata if getattr(m, "le", None) is not None), None)
    if ge is None or le is None:
        return ""
    return f" from {ge:,} to {le:,}"


def _format_validation_error(err: ValidationError, source: str) -> str:
    lines = [f"{source}: invalid seat profile ({err.error_count()} problem(s)):"]
    for e in err.errors():
        loc = ".".join(str(p) for p in e["loc"]) or "(top level)"
        if e["type"] == "extra_forbidden":
            lines.append(f"  {loc}: unknown key; check its spelling against "
                         "`seat-console profile --print-default`")
        elif e["type"] == "missing":
            lines.append(f"  {loc}: required key is missing")
        elif e["type"] == "bool_type":   # StrictBool: "yes", 1, "true" are not booleans
            lines.append(f"  {loc}: must be a TOML boolean, true or false unquoted (got "
                         f"{_clip(repr(e.get('input')))}); write `{loc.rsplit('.', 1)[-1]} = "
                         "true` or `= false`")
        elif isinstance(e.get("input"), float) and not math.isfinite(e["input"]):
            # TOML's nan / inf fail the range check, whose words ("less than or equal to
            # 3600 (got nan)") read as if nan were too large; a number too large for a float
            # (1e400) is inf by the time it is read: said so
            lines.append(f"  {loc}: must be a finite number, not {e['input']!r} (TOML nan and "
                         "inf are refused here, and so is a number beyond a float's range, "
                         "which TOML reads as inf)")
        elif e["type"] in ("int_parsing_size", "int_from_float"):
            # pydantic says "exceeded maximum size" of 1e308 and "fractional part" of 36.5,
            # neither of which names the range a reader may write (the trial's ttl_s = 1e308)
            lines.append(f"  {loc}: must be a whole number{_bounds_words(e['loc'])} (got "
                         f"{_clip(repr(e.get('input')))})")
        else:
            got = e.get("input")
            shown = "" if isinstance(got, dict) else f" (got {_clip(repr(got))})"
            # pydantic's "Value error, " before our own sentence is no word for a reader
            lines.append(f"  {loc}: {e['msg'].removeprefix('Value error, ')}{shown}")
    return "\n".join(lines)


def parse_profile(text: str, source: str = "<string>") -> Profile:
    """Parse and validate profile TOML text.

    Raises :class:`ProfileError` naming ``source`` and each offending key on a TOML syntax error
    (with line and column), an unknown key, a missing key, or a wrong type; also for a profile
    above :data:`MAX_PROFILE_CHARS` or nesting tables/arrays deeper than
    :data:`MAX_PROFILE_DEPTH` (``tomllib`` would raise :class:`RecursionError`), and for text
    holding a lone surrogate code point.
    """
    if len(text) > MAX_PROFILE_CHARS:
        raise ProfileError(f"{source}: {len(text):,} characters is above the "
                           f"{MAX_PROFILE_CHARS:,}-character limit for a profile")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:  # RE2 and the profile's hash encode strictly (issue #22)
        line = text.count("\n", 0, exc.start) + 1
        raise ProfileError(f"{source}: line {line}: holds the lone surrogate code point "
                           f"{text[exc.start]!r}, which is not Unicode text; write the character "
                           "itself and save the profile as UTF-8") from None
    long_key = _dotted_key_re().search(text)
    if long_key is not None:
        line = text.count("\n", 0, long_key.start()) + 1
        raise ProfileError(f"{source}: line {line}: a dotted key or table header with more than "
                           f"{MAX_DOTTED_KEY_PARTS} parts (no profile key has more than 4)")
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ProfileError(f"{source}: not valid TOML: {exc}") from None
    except RecursionError:
        raise ProfileError(f"{source}: arrays or inline tables nest too deeply to parse "
                           f"(a profile nests at most {MAX_PROFILE_DEPTH} levels)") from None
    except ValueError as exc:  # tomllib lets a few value errors through (e.g. int digit limit)
        raise ProfileError(f"{source}: not valid TOML: {exc}") from None
    from seat_console.core.untrusted import nesting_depth

    if nesting_depth(data, MAX_PROFILE_DEPTH) > MAX_PROFILE_DEPTH:
        raise ProfileError(f"{source}: tables or arrays nest deeper than {MAX_PROFILE_DEPTH} "
                           "levels (no profile key does)")
    try:
        # Relative paths in the profile (backport.files[].source) are relative to its directory.
        src = Path(source)
        profile_dir = src.parent if not source.startswith("<") and src.parent != Path("") \
            else Path.cwd()
        return Profile.model_validate(data, context={"profile_dir": str(profile_dir)})
    except ValidationError as exc:
        raise ProfileError(_format_validation_error(exc, source)) from None


@functools.cache
def _dotted_key_re():
    """An RE2 program (linear time) finding a run of more than :data:`MAX_DOTTED_KEY_PARTS`
    dot-separated bare or quoted key parts."""
    import re2

    part = r"""(?:[A-Za-z0-9_-]+|"[^"\n]*"|'[^'\n]*')"""
    opts = re2.Options()
    opts.log_errors = False
    return re2.compile(rf"(?:{part}[ \t]*\.[ \t]*){{{MAX_DOTTED_KEY_PARTS}}}{part}", opts)


def load_profile(cli_path: str | os.PathLike[str] | None = None,
                 environ: dict[str, str] | None = None,
                 flag: str = "--profile") -> LoadedProfile:
    """Find (see :func:`resolve_profile_path`; ``flag`` as there), read and validate the seat
    profile.

    Raises :class:`ProfileError` for a missing/unreadable file or invalid content.
    """
    path, origin = resolve_profile_path(cli_path, environ, flag)
    if path is None:
        text, source = default_profile_text(), "<embedded default>"
    else:
        try:
            text = path.read_text("utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise ProfileError(f"{path}: cannot read profile: {exc} (make it readable by this "
                               "user and save it as UTF-8 TOML)") from None
        source = str(path)
    profile = parse_profile(text, source)
    return LoadedProfile(profile=profile, source=source, origin=origin,
                         sha256=hashlib.sha256(text.encode("utf-8")).hexdigest())


GiB = GIB
"""Bytes in one GiB (2^30; :data:`seat_console.core.fmt.GIB`, the one constant). Display only;
code carries bytes."""

MiB = MIB
"""Bytes in one MiB (2^20; :data:`seat_console.core.fmt.MIB`), the unit nvidia-smi prints."""


__all__ = [
    "DEFAULT_FAILURE_PATTERNS",
    "ENV_VAR",
    "AlertmanagerSpec",
    "BackportFile",
    "BackportSpec",
    "CheckpointSpec",
    "ConsoleSpec",
    "FailurePattern",
    "FleetSeat",
    "FleetSpec",
    "GiB",
    "LoadedProfile",
    "Matcher",
    "MiB",
    "ModelShapeSpec",
    "NodeSpec",
    "PlePlacement",
    "ProbePhaseSpec",
    "ProbeSloSpec",
    "ProbeSpec",
    "Profile",
    "ProfileError",
    "SeatSpec",
    "SilenceSpec",
    "SwapSpec",
    "TimerSpec",
    "default_profile_text",
    "load_profile",
    "parse_profile",
    "resolve_profile_path",
    "xdg_profile_path",
]

