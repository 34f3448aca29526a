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

import hashlib
import os
import tomllib
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Annotated, Literal

import platformdirs
from pydantic import (
    AnyHttpUrl,
    BaseModel,
    ByteSize,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

ENV_VAR = "SEAT_CONSOLE_PROFILE"
"""Environment variable naming a profile file (second in the lookup order)."""

MAX_SIZE_BYTES = 1 << 50
"""Largest size (bytes) a profile may declare: 1 PiB, far above any card's memory or any
checkpoint's bytes per rank; a larger value is a typo (extra digits, a wrong unit)."""
MAX_MODEL_LEN = 1 << 32
"""Largest ``max_model_len`` (tokens) accepted: 4,294,967,296, far above any model's context."""
MAX_NUM_SEQS = 1 << 20
"""Largest ``max_num_seqs`` accepted: 1,048,576 concurrent sequences."""

Size = Annotated[ByteSize, Field(le=MAX_SIZE_BYTES)]
"""A byte count, integer or with a unit ("62.56 GiB"), at most :data:`MAX_SIZE_BYTES`."""

PlePlacement = Literal["gpu-replicated", "gpu-sharded", "host"]
"""Where the per-layer embedding (PLE) table lives: a full copy on every TP rank, split by
vocabulary across TP ranks, or offloaded to host memory."""


class ProfileError(Exception):
    """A profile could not be read or is invalid.

    The message names the file, the offending key (dotted path) and the fix; it never contains
    secret values (credentials are not part of a profile).
    """


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, validate_default=True)


class NodeSpec(_Strict):
    """The serving node and how it is reached.

    ``gpus`` lists the cards that serve the seat, each an NVML index (``"0"``) or a GPU UUID
    (``"GPU-…"``, as ``nvidia-smi --query-gpu=uuid`` prints it). Matching live cards by UUID is
    preferred: indices can change across reboots.
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

    @field_validator("gpus", mode="before")
    @classmethod
    def _gpus_as_str(cls, v: object) -> object:
        if isinstance(v, list):
            return [str(x) if isinstance(x, int) and not isinstance(x, bool) else x for x in v]
        return v

    @model_validator(mode="after")
    def _transport_target(self) -> "NodeSpec":
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
    kv_cache_dtype: Literal["auto", "fp8", "fp8_e4m3", "fp8_e5m2"] = "auto"
    block_size: int = Field(default=16, ge=1, description="KV cache block size in tokens")
    activation_reserve_bytes: Size = Field(
        default=ByteSize(0),
        description="explicit per-card reserve for activations / CUDA graphs in the fit budget",
    )
    endpoint: AnyHttpUrl = AnyHttpUrl("http://127.0.0.1:8000")


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
    """

    name: str
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
    verify_tls: bool = True
    ca_file: Path | None = None


class Matcher(_Strict):
    """One Alertmanager silence matcher, as the v2 API's ``matchers[]`` item."""

    name: str = Field(min_length=1)
    value: str
    is_regex: bool = False
    is_equal: bool = True


class SilenceSpec(_Strict):
    """The silence the hold places on the seat's endpoint."""

    matchers: list[Matcher] = Field(min_length=1)
    ttl_s: int = Field(default=7200, ge=60, le=7 * 86400)
    comment: str = "seat-console hold"
    created_by: str = "seat-console"


REFRESH_INTERVAL_MIN_S = 0.1
"""Shortest refresh interval (s) the profile, ``--interval`` and the palette accept: each source
is polled again as soon as its last poll ends plus the interval, so a tiny one would hammer
the node (``docker exec``, ``/metrics``) in a tight loop."""
REFRESH_INTERVAL_MAX_S = 3600.0
"""Longest refresh interval (s)."""


class ConsoleSpec(_Strict):
    """Console behaviour: refresh interval (seconds, :data:`REFRESH_INTERVAL_MIN_S` to
    :data:`REFRESH_INTERVAL_MAX_S`) and history kept for sparklines (seconds)."""

    refresh_interval_s: float = Field(default=1.0, ge=REFRESH_INTERVAL_MIN_S,
                                      le=REFRESH_INTERVAL_MAX_S)
    history_s: int = Field(default=300, ge=10, le=86400)


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

    @model_validator(mode="after")
    def _gpus_vs_tp(self) -> "Profile":
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


def default_profile_text() -> str:
    """The embedded default profile, as TOML text (what ``profile --print-default`` prints)."""
    return resources.files("console").joinpath("default_profile.toml").read_text("utf-8")


def xdg_profile_path() -> Path:
    """``$XDG_CONFIG_HOME/seat-console/profile.toml`` (platformdirs' user config dir on Linux)."""
    return Path(platformdirs.user_config_dir("seat-console")) / "profile.toml"


def _format_validation_error(err: ValidationError, source: str) -> str:
    lines = [f"{source}: invalid seat profile ({err.error_count()} problem(s)):"]
    for e in err.errors():
        loc = ".".join(str(p) for p in e["loc"]) or "(top level)"
        if e["type"] == "extra_forbidden":
            lines.append(f"  {loc}: unknown key; check its spelling against "
                         "`seat-console profile --print-default`")
        elif e["type"] == "missing":
            lines.append(f"  {loc}: required key is missing")
        else:
            got = e.get("input")
            shown = "" if isinstance(got, dict) else f" (got {got!r})"
            lines.append(f"  {loc}: {e['msg']}{shown}")
    return "\n".join(lines)


def parse_profile(text: str, source: str = "<string>") -> Profile:
    """Parse and validate profile TOML text.

    Raises :class:`ProfileError` naming ``source`` and each offending key on a TOML syntax error
    (with line and column), an unknown key, a missing key, or a wrong type.
    """
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ProfileError(f"{source}: not valid TOML: {exc}") from None
    try:
        return Profile.model_validate(data)
    except ValidationError as exc:
        raise ProfileError(_format_validation_error(exc, source)) from None


def resolve_profile_path(cli_path: str | os.PathLike[str] | None = None,
                         environ: dict[str, str] | None = None,
                         flag: str = "--profile") -> tuple[Path | None, str]:
    """Which profile file to load, and the lookup step that chose it.

    Returns ``(path, origin)``; ``path`` is ``None`` for the embedded default. A path given on
    the command line (``flag`` names the option the user typed, for the message) or in
    ``$SEAT_CONSOLE_PROFILE`` must exist (raises :class:`ProfileError` naming it); the XDG path
    is used only if present.
    """
    env = os.environ if environ is None else environ
    if cli_path:
        p = Path(cli_path).expanduser()
        if not p.is_file():
            what = "is a directory" if p.is_dir() else "no such file"
            raise ProfileError(f"{flag} {p}: {what} (give an existing TOML file"
                               + (", or omit --profile to use the embedded default)"
                                  if flag == "--profile" else ")"))
        return p, flag
    if env.get(ENV_VAR):
        p = Path(env[ENV_VAR]).expanduser()
        if not p.is_file():
            what = "is a directory" if p.is_dir() else "no such file"
            raise ProfileError(f"${ENV_VAR}={p}: {what} (point it at a TOML file, or unset the "
                               "variable)")
        return p, f"${ENV_VAR}"
    xdg = xdg_profile_path()
    if xdg.is_file():
        return xdg, "xdg"
    return None, "default"


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


GiB = 1 << 30
"""Bytes in one GiB (2^30). Display only; code carries bytes."""

MiB = 1 << 20
"""Bytes in one MiB (2^20), the unit nvidia-smi prints."""


def fmt_gib(n: int | None, digits: int = 2) -> str:
    """Format a byte count as GiB (2^30 B) with ``digits`` decimals; ``None`` renders ``n/a``."""
    if n is None:
        return "n/a"
    return f"{n / GiB:.{digits}f}"


__all__ = [
    "AlertmanagerSpec", "CheckpointSpec", "ConsoleSpec", "ENV_VAR", "GiB", "LoadedProfile",
    "Matcher", "MiB", "ModelShapeSpec", "NodeSpec", "PlePlacement", "Profile", "ProfileError",
    "SeatSpec", "SilenceSpec", "TimerSpec", "default_profile_text", "fmt_gib", "load_profile",
    "parse_profile", "resolve_profile_path", "xdg_profile_path",
]

