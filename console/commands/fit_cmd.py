"""``seat-console fit [--checkpoint DIR] [--candidate DIR] [--placement …] [--json]``.

Prints the fit budget of the resident and the candidate side by side: per card the
CUDA-visible total, usable memory (× gpu_memory_utilization), weights, PLE table, reserve and
what is left for the KV cache; KV tokens and maximum concurrency as vLLM computes them; the
verdict with levers; host RAM for a host-placed table; the pre-flight line; the KV capacity
ratio; and, for the running seat, predicted use next to NVML's.

Served dtype: unquantised weights and an ``auto`` KV cache are budgeted at the dtype vLLM
serves them in (profile ``seat.dtype`` / ``--dtype``, resolved for ``seat.device`` as vLLM
does: a float32 checkpoint under ``auto`` is served in bfloat16 on CUDA); quantised tensors keep
their stored bytes. A ``max_model_len`` above the model's ``max_position_embeddings`` (no RoPE
scaling extending it) is refused, as vLLM refuses it.

NO VERDICT: when a checkpoint cannot be scanned, or its scan has errors (a missing shard, a
listed tensor in no shard, an unreadable header, a dtype the format does not define), that
side's verdict is ``null`` in the JSON (with ``no_verdict``: the reason) and the text says
"NO VERDICT: …" — never "fits" on part of the weights.

Engine version: every side is budgeted by the memory accounting of the vLLM version serving
it (:mod:`seat_console.fit.engine_rules`): the running engine's ``/version`` (for the side
whose container runs), else the side's image's package metadata (``--image-engine``: the
side's image, for the candidate else the swap's, read offline in a container without network), else the profile's ``<role>.engine``; ``--engine``
replaces them for both sides (what-if). The version and the rule are printed beside the
figures and in ``--json`` (``engine``, ``engine_rule``, ``sizing``). A version outside the
supported ranges gets NO VERDICT naming them. A side that fits gets the
``--kv-cache-memory-bytes`` value that pins its KV cache on that version (``kv_flag_bytes``).

Exit codes: 0 the report was produced (whether or not it fits: see ``verdict.fits`` in the
JSON); 1 a side has NO VERDICT: its engine version is outside the supported ranges, a
checkpoint cannot be scanned (e.g. a corrupt header, named
with file and offset), or was scanned with errors (the report is printed, but its sizes cannot
be trusted); 3 nothing can be budgeted (neither checkpoint has a path or declared sizes).
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from pydantic import ByteSize, TypeAdapter, ValidationError

from seat_console.core import jsonout
from seat_console.fit.budget import GIB, Comparison, FitBudget, OverlayRow, gib, is_cpu_device
from seat_console.sources.checkpoint import CheckpointError
from seat_console.core.checkpoint import CheckpointSummary
from seat_console.snapshot.fit_reading import gather_fit_inputs, host_memory, running_engine_versions
from seat_console.fit.inputs import FitInputs, FitSide, WhatIf, compute_budgets, no_verdict_reason
from seat_console.core.profile import MAX_MODEL_LEN, MAX_NUM_SEQS, MAX_SIZE_BYTES, LoadedProfile
from seat_console.core.base import Unavailable, read_once

EXIT_OK, EXIT_ERROR, EXIT_UNAVAILABLE = 0, 1, 3

UNITS_LINE = ("GiB = 2^30 B, 2 decimals truncated toward zero (as the evaluation wrote its "
              "figures); exact bytes in parentheses")


def _bytes_arg(text: str) -> int:
    try:
        v = int(TypeAdapter(ByteSize).validate_python(text))
    except ValidationError:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a size (bytes, or e.g. '2 GiB')") from None
    if v > MAX_SIZE_BYTES:
        raise argparse.ArgumentTypeError(f"{text!r} is above {MAX_SIZE_BYTES:,} B (1 PiB)")
    return v


def _engine_arg(text: str) -> Any:
    from seat_console.fit.engine_rules import parse_engine

    try:
        return parse_engine(text, "--engine")
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _running_versions(loaded: LoadedProfile, conts: Any | None) -> dict[str, tuple[str, str]]:
    """The running engine's ``/version`` for the side it serves (one engine read now; the rule:
    :func:`seat_console.snapshot.fit_reading.running_engine_versions`). Empty when it cannot
    be read."""
    try:
        from seat_console.sources.engine import make_source

        reading = read_once(make_source(loaded))
    except Exception:  # noqa: BLE001 - optional to the budget
        return {}
    return running_engine_versions(loaded, reading, conts)


def _side_image(loaded: LoadedProfile, role: str) -> str | None:
    """The image serving ``role``: its ``<role>.image``; for the candidate without one, the
    swap's image when the swap runs the candidate's container (``"backport"``: the backport's
    output tag, as ``image-check`` reads it); ``None`` when none is known."""
    prof = loaded.profile
    spec = prof.resident if role == "resident" else prof.candidate
    if spec is None:
        return None
    if spec.image:
        return spec.image
    swap = prof.swap
    if role != "candidate" or swap is None or swap.container != spec.container:
        return None
    if swap.image != "backport":
        return swap.image
    if prof.backport is None:
        return None
    from seat_console.actions.backport import BackportError, BackportInputs

    try:
        return BackportInputs.from_spec(prof.backport).tag
    except BackportError:
        return None


def _image_versions(loaded: LoadedProfile, skip: set[str]) -> dict[str, tuple[str, str, str]]:
    """Each side's engine from its image's package metadata (``--image-engine``), for the
    sides not in ``skip``; a side whose image cannot be read is left out (the profile's
    ``<role>.engine`` then applies) with the reason on stderr."""
    from seat_console.commands.image_cmd import python_bin
    from seat_console.node.context import NodeContext
    from seat_console.sources.image_caps import image_engine_version

    prof = loaded.profile
    todo = [(r, i) for r, i in (("resident", _side_image(loaded, "resident")),
                                ("candidate", _side_image(loaded, "candidate")))
            if i and r not in skip]
    if not todo:
        return {}
    try:
        client = NodeContext.from_profile(loaded).docker(timeout_s=60)
    except Exception as exc:  # noqa: BLE001
        print(f"seat-console fit: --image-engine: docker unreachable: {exc}", file=sys.stderr)
        return {}
    out: dict[str, tuple[str, str, str]] = {}
    try:
        vols = list(prof.swap.volumes) if prof.swap else []
        for role, image in todo:
            got, why = image_engine_version(client, image, python_bin=python_bin(loaded),
                                            volumes=vols)
            if got is None:
                print(f"seat-console fit: {role} engine version from the image: {why}",
                      file=sys.stderr)
            else:
                out[role] = (got[0], got[1], image)
    finally:
        client.close()
    return out


def _count_arg(limit: int) -> Any:
    """An argparse type: an integer from 1 to ``limit``."""
    def parse(text: str) -> int:
        try:
            v = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
        if not 1 <= v <= limit:
            raise argparse.ArgumentTypeError(f"{v:,} must be from 1 to {limit:,}")
        return v
    return parse


def _util_arg(text: str) -> float:
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not 0 < v <= 1:
        raise argparse.ArgumentTypeError(f"{v} must be in (0, 1]")
    return v


def register(sub: argparse._SubParsersAction) -> None:
    """Add the ``fit`` subcommand."""
    p = sub.add_parser("fit", help="fit budget: weights + PLE + KV cache vs usable GPU memory",
                       description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--checkpoint", metavar="DIR", help="resident checkpoint directory to scan "
                   "(overrides resident.path)")
    p.add_argument("--candidate", metavar="DIR", help="candidate checkpoint directory to scan "
                   "(overrides candidate.path)")
    p.add_argument("--placement", choices=["gpu-replicated", "gpu-sharded", "host"],
                   help="the candidate's PLE table placement (default: the profile's)")
    p.add_argument("--utilization", type=_util_arg, metavar="U",
                   help="gpu_memory_utilization what-if (default: the profile's)")
    p.add_argument("--tp", type=int, metavar="N", help="tensor parallel size what-if")
    p.add_argument("--max-model-len", type=_count_arg(MAX_MODEL_LEN), metavar="N",
                   help="context length what-if")
    p.add_argument("--max-num-seqs", type=_count_arg(MAX_NUM_SEQS), metavar="N",
                   help="max sequences what-if")
    p.add_argument("--kv-cache-dtype", choices=["auto", "bfloat16", "float16", "fp8", "fp8_e4m3",
                                                "fp8_e5m2"],
                   help="KV cache dtype what-if (auto: the served dtype)")
    p.add_argument("--dtype", choices=["auto", "bfloat16", "float16", "float32"],
                   help="served dtype what-if (vLLM --dtype; default: the profile's seat.dtype)")
    p.add_argument("--reserve", type=_bytes_arg, metavar="SIZE",
                   help="activation / CUDA-graph reserve per card (bytes or '2 GiB')")
    p.add_argument("--engine", type=_engine_arg, metavar="VERSION",
                   help="engine version what-if for both sides (e.g. vllm==0.34.0)")
    p.add_argument("--image-engine", action="store_true",
                   help="read each side's engine version from its image's package metadata "
                        "(runs a fixed check offline in the image)")
    p.add_argument("--no-live", action="store_true",
                   help="do not read NVML; use the profile's declared CUDA-visible total")
    p.add_argument("--json", action="store_true", help="print the budgets as JSON")
    p.set_defaults(func=run)


def _read_snapshot(loaded: LoadedProfile) -> tuple[Any | None, str | None]:
    try:
        from seat_console.sources.gpu import make_source
    except Exception as exc:  # noqa: BLE001
        return None, f"GPU source unavailable: {exc}"
    snap = read_once(make_source(loaded))
    if isinstance(snap, Unavailable):
        return None, str(snap)
    return snap, None


def _read_containers(loaded: LoadedProfile) -> Any | None:
    """One containers reading (for the seat container's ``CUDA_VISIBLE_DEVICES`` /
    ``CUDA_DEVICE_ORDER``), or ``None`` when docker cannot be read (then only the console's
    environment is checked)."""
    try:
        from seat_console.sources.containers import make_source

        reading = read_once(make_source(loaded, watch_events=False))
    except Exception:  # noqa: BLE001 - optional to the budget
        return None
    return None if isinstance(reading, Unavailable) else reading


def whatif_from_args(args: argparse.Namespace) -> WhatIf:
    """The :class:`~seat_console.fit.inputs.WhatIf` of the command-line overrides."""
    return WhatIf(placement=args.placement, gpu_memory_utilization=args.utilization,
                  tensor_parallel_size=args.tp, max_model_len=args.max_model_len,
                  max_num_seqs=args.max_num_seqs, kv_cache_dtype=args.kv_cache_dtype,
                  activation_reserve_bytes=args.reserve, dtype=getattr(args, "dtype", None),
                  engine=getattr(args, "engine", None))


_KV_ROW = {False: "left for the KV cache", True: "KV cache (CPU: own space)"}
"""The KV row's label; on vLLM's CPU backend the KV cache is its own space
(VLLM_CPU_KVCACHE_SPACE), not usable − the rest (the trial read 1.00 GiB "left" of 0.90)."""

LABEL_W = 30
CELL_W = 36


def _fit_cell(text: str) -> str:
    """``text`` cut to one column cell with a trailing "…", so columns never run together."""
    return text if len(text) <= CELL_W - 2 else text[:CELL_W - 3] + "…"


def _row(label: str, values: list[int | None]) -> str:
    cells = [(f"{gib(v):>8} GiB" + (f" ({v:,} B)" if v is not None else "")).ljust(CELL_W)
             for v in values]
    return f"  {label:<{LABEL_W}}" + "".join(cells).rstrip()


def render_budget(b: FitBudget, scan: CheckpointSummary | None) -> list[str]:
    """Text lines of one budget (the CLI's and the TUI's words)."""
    p = b.params
    lines = [f"{b.heading()}, PLE {p.ple_placement}"]
    if b.name_note:
        lines.append(f"  note: {b.name_note}")
    if scan is not None:
        lines.append(f"  files: {scan.path} — {len(scan.shards)} shard(s), {scan.tensor_count:,} "
                     f"tensors, {scan.total_bytes:,} B, scanned in {scan.scan_duration_s:.3f} s")
        lines.append(f"  quantization: {scan.quantization.describe()}")
        lines.append("  by dtype: " + ", ".join(
            f"{d.dtype}{'' if d.known else ' (UNKNOWN dtype, bytes kept)'} {gib(d.bytes)} GiB "
            f"({d.bytes:,} B)" for d in scan.by_dtype))
        lines.append("  by role: " + ", ".join(f"{r.role} {gib(r.bytes)} GiB ({r.bytes:,} B)"
                                               for r in scan.by_role))
        for prob in scan.problems:
            lines.append(f"  {prob.severity.upper()} {prob.kind}: {prob.detail}")
    lines.append("  " + " " * LABEL_W + "".join(f"{_fit_cell(c.label):<{CELL_W}}"
                                                for c in b.cards).rstrip())
    lines.append(_row("CUDA-visible total", [c.total_bytes for c in b.cards]))
    if not is_cpu_device(p.device):   # the CPU backend's KV cache is its own space: no share
        lines.append(_row(f"usable × {b.util if b.util is not None else p.gpu_memory_utilization:g}",
                          [c.requested_bytes for c in b.cards]))
    lines.append(_row("weights (per TP rank)", [c.weights_bytes for c in b.cards]))
    lines.append(_row(f"PLE table ({p.ple_placement})", [c.ple_bytes for c in b.cards]))
    lines.append(_row("activation reserve", [c.reserve_bytes for c in b.cards]))
    lines.append(_row("weights + PLE + reserve", [c.static_bytes for c in b.cards]))
    lines.append(_row(_KV_ROW[is_cpu_device(p.device)], [c.kv_bytes for c in b.cards]))
    for c in b.cards:
        over = b.over_words(c)
        if over:
            lines.append(f"  {c.label}: {over}")
    for prov in b.provenance():
        lines.append(f"  {prov}")
    if b.flag_words():
        lines.append(f"  flag: {b.flag_words()}")
    if b.kv_model is not None:
        m = b.kv_model
        kinds = ", ".join(f"{m.count(k)} {k}" for k in ("full", "sliding", "mla", "linear",
                                                         "shared") if m.count(k))
        lines.append(f"  KV model ({m.source}): {m.attention.upper()}, {kinds} layers; "
                     f"{m.kv_heads_per_rank} KV head(s)/rank × head_dim {m.head_dim}, "
                     f"{p.kv_cache_dtype} = {m.kv_dtype_bytes} B/elem; {m.bytes_per_token:,} B "
                     f"per token per GPU ({m.full_bytes_per_token:,} B in full-attention layers)"
                     + (f"; state {m.state_bytes_per_seq:,} B/seq" if m.state_bytes_per_seq
                        else ""))
        fp8 = {True: "yes", False: "NO", None: "depends on the attention backend"}[
            m.fp8_kv_supported]
        lines.append(f"  fp8 KV cache possible: {fp8}")
        for n in m.notes:
            lines.append(f"    note: {n}")
    if b.capacity is not None:
        c = b.capacity
        lines.append(f"  KV cache: {c.kv_tokens:,} tokens, max concurrency {c.max_concurrency:.2f}"
                     f"x at {c.max_model_len:,} tokens ({c.num_blocks:,} blocks of "
                     f"{c.bytes_per_block:,} B, {c.blocks_per_request:,} blocks per request)")
        lines.append(f"  as vLLM logs it: {b.kv_log_line()}")
        for n in c.notes:
            lines.append(f"    note: {n}")
    elif b.kv_unavailable:
        lines.append(f"  KV cache: n/a — {b.kv_unavailable}")
    if b.served is not None:
        lines.append(f"  served dtype: {b.served.dtype} — {b.served.words}")
    if b.kv_cache_dtype_words:
        lines.append(f"  KV cache dtype: {b.kv_cache_dtype} — {b.kv_cache_dtype_words}")
    if b.no_verdict:
        lines.append(f"  NO VERDICT: {b.no_verdict}")
    else:
        on = f" (vLLM {b.engine.version})" if b.engine is not None else ""
        lines.append(f"  VERDICT{on}: {b.verdict.words}")
    for lev in b.verdict.levers:
        mark = {True: "+", False: "-", None: "·"}[lev.helps]
        lines.append(f"    {mark} {lev.lever}: {lev.effect}")
    if b.host_ram is not None:
        lines.append(f"  host RAM: {b.host_ram.words}")
    for pf in b.preflight:
        lines.append(f"  pre-flight: {pf.words}")
    for n in b.notes:
        lines.append(f"  note: {n}")
    return lines


def render_text(inputs: FitInputs, comp: Comparison, overlay: list[OverlayRow],
                source: str) -> str:
    """The whole ``seat-console fit`` text report."""
    s = comp.candidate.params if comp.candidate else (comp.resident.params if comp.resident
                                                      else inputs.seat)
    seat = (f"Seat: TP {s.tensor_parallel_size}, gpu_memory_utilization "
            f"{s.gpu_memory_utilization:g}, max_model_len {s.max_model_len:,}, max_num_seqs "
            f"{s.max_num_seqs}, kv_cache_dtype {s.kv_cache_dtype}, block_size {s.block_size}, "
            f"reserve {gib(s.activation_reserve_bytes)} GiB")
    out = [f"Fit budget — profile {source}", f"Units: {UNITS_LINE}.", seat]
    if inputs.gpu_unavailable:
        out.append(f"GPUs: no live reading ({inputs.gpu_unavailable}); using the profile's "
                   f"declared CUDA-visible total {gib(inputs.declared_total)} GiB per card")
    if inputs.unmatched_gpus:
        out.append("GPUs: node.gpus entries that matched no card: "
                   + ", ".join(repr(e) for e in inputs.unmatched_gpus)
                   + " (budgeted at the declared total; indices are NVML indices, not CUDA "
                     "ordinals)")
    for e in inputs.gpu_errors:
        out.append(f"GPUs: ERROR {e}")
    for w in inputs.env_warnings:
        out.append(f"GPUs: WARNING {w}")
    for role, b, why, side in (("RESIDENT", comp.resident, comp.resident_unavailable,
                                inputs.resident),
                               ("CANDIDATE", comp.candidate, comp.candidate_unavailable,
                                inputs.candidate)):
        out.append("")
        if b is None:
            nv = no_verdict_reason(side)
            out.append(f"{role}: NO VERDICT: {nv}" if nv else f"{role}: n/a — {why}")
            continue
        lines = render_budget(b, side.scan if side else None)
        out.append(f"{role}: {lines[0]}")
        out.extend(lines[1:])
    out.append("")
    if comp.kv_tokens_ratio is not None:
        out.append(f"KV capacity, candidate / resident: {comp.kv_tokens_ratio:.2f}x in tokens"
                   + (f", {comp.kv_bytes_ratio:.2f}x in KV bytes per card"
                      if comp.kv_bytes_ratio is not None else ""))
    else:
        out.append("KV capacity ratio: n/a (needs both budgets with KV tokens)")
    if overlay:
        out.append("Live overlay (resident, the running seat): predicted vs NVML")
        for r in overlay:
            out.append(f"  {r.label}: predicted {gib(r.predicted_bytes)} GiB, NVML "
                       f"{gib(r.nvml_used_bytes)} GiB ({r.nvml_basis}), difference "
                       f"{gib(r.difference_bytes)} GiB")
    return "\n".join(out) + "\n"


def to_json(inputs: FitInputs, comp: Comparison, overlay: list[OverlayRow], source: str) -> str:
    """The JSON report: ``{"profile", "gib_bytes", "resident", "candidate", ...}``."""
    def side(b: FitBudget | None, why: str | None, s: FitSide | None) -> dict[str, Any]:
        d: dict[str, Any] = {"unavailable": why} if b is None else b.model_dump(mode="json")
        if b is None:
            nv = no_verdict_reason(s)
            if nv:   # a checkpoint that cannot be scanned: no verdict, with the reason
                d.update({"verdict": None, "no_verdict": nv})
        else:
            d["kv_tokens"] = b.kv_tokens
            d["max_concurrency"] = b.max_concurrency
        if s is not None and s.scan is not None:
            d["scan"] = s.scan.model_dump(mode="json", exclude={"config", "tensors"})
        return d

    doc = {"profile": source, "gib_bytes": GIB, "gpu_unavailable": inputs.gpu_unavailable,
           "resident": side(comp.resident, comp.resident_unavailable, inputs.resident),
           "candidate": side(comp.candidate, comp.candidate_unavailable, inputs.candidate),
           "gpu_identity": {"unmatched": inputs.unmatched_gpus, "errors": inputs.gpu_errors,
                            "env_warnings": inputs.env_warnings},
           "kv_tokens_ratio": comp.kv_tokens_ratio, "kv_bytes_ratio": comp.kv_bytes_ratio,
           "overlay": [r.model_dump(mode="json") for r in overlay]}
    return jsonout.dumps(doc, indent=2)


_WHATIF_FLAGS = {"tensor_parallel_size": "--tp", "gpu_memory_utilization": "--utilization",
                 "max_model_len": "--max-model-len", "max_num_seqs": "--max-num-seqs",
                 "activation_reserve_bytes": "--reserve"}
"""The command-line flag of each :class:`~seat_console.fit.inputs.WhatIf` field."""


def whatif_usage_error(args: argparse.Namespace) -> str | None:
    """Why the what-if flags cannot be used (the flag, the value given, the range), or
    ``None``. ``--tp 1000000`` ended in pydantic's traceback (the trial); every bound of
    :class:`~seat_console.fit.inputs.WhatIf` is checked here first, as a usage error."""
    for name in ("tp", "max_model_len", "max_num_seqs"):
        v = getattr(args, name, None)
        if v is not None and v < 1:
            return f"--{name.replace('_', '-')} must be >= 1"
    try:
        whatif_from_args(args)
    except ValidationError as exc:
        err = exc.errors()[0]
        field = str(err["loc"][0]) if err["loc"] else ""
        flag = _WHATIF_FLAGS.get(field, field)
        return f"{flag} {err.get('input')!r}: {err['msg'].lower()}"
    return None


def run(args: argparse.Namespace, loaded: LoadedProfile) -> int:
    """Run ``fit``; see the module docstring for exit codes."""
    usage = whatif_usage_error(args)
    if usage is not None:
        print(f"seat-console fit: {usage}", file=sys.stderr)
        return 2
    snap, why = (None, "--no-live") if args.no_live else _read_snapshot(loaded)
    conts = None if args.no_live else _read_containers(loaded)
    running = {} if args.no_live else _running_versions(loaded, conts)
    images = (_image_versions(loaded, set(running)) if getattr(args, "image_engine", False)
              else {})
    try:
        inputs = gather_fit_inputs(loaded, snap, gpu_unavailable=why,
                                   checkpoint=args.checkpoint, candidate=args.candidate,
                                   host=host_memory(), containers=conts,
                                   running_versions=running, image_versions=images)
    except CheckpointError as exc:
        print(f"seat-console fit: {exc}", file=sys.stderr)
        return EXIT_ERROR
    failed = [s for s in (inputs.resident, inputs.candidate) if s is not None and s.scan_failed]
    for s in failed:
        print(f"seat-console fit: {s.role}: NO VERDICT: {s.unavailable}", file=sys.stderr)
    comp, overlay = compute_budgets(inputs, whatif_from_args(args))
    if comp.resident is None and comp.candidate is None and not failed:
        print(f"seat-console fit: nothing to budget: {comp.resident_unavailable}; "
              f"{comp.candidate_unavailable}", file=sys.stderr)
        return EXIT_UNAVAILABLE
    if args.json:
        print(to_json(inputs, comp, overlay, loaded.source))
    else:
        sys.stdout.write(render_text(inputs, comp, overlay, loaded.source))
    untrusted = [s for s in (inputs.resident, inputs.candidate)
                 if s is not None and s.scan is not None and s.scan.errors]
    for s in untrusted:
        assert s.scan is not None
        kinds = ", ".join(sorted({p.kind for p in s.scan.errors}))
        print(f"seat-console fit: {s.role}: {s.scan.path}: {len(s.scan.errors)} error(s) in the "
              f"checkpoint ({kinds}): its sizes cannot be trusted, so there is NO VERDICT; fix "
              f"the files (see the ERROR lines) and run it again", file=sys.stderr)
    for e in inputs.gpu_errors:
        print(f"seat-console fit: NO VERDICT: {e} (fix node.gpus in the profile)",
              file=sys.stderr)
    unsupported = [b for b in (comp.resident, comp.candidate)
                   if b is not None and b.engine is not None and b.engine_rule is None]
    for b in unsupported:
        print(f"seat-console fit: {b.name}: NO VERDICT: {b.no_verdict}", file=sys.stderr)
    return (EXIT_ERROR if untrusted or failed or inputs.gpu_errors or unsupported
            else EXIT_OK)
