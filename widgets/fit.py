"""The fit panel: resident and candidate side by side, a stacked bar per card, what-if controls.

Per checkpoint and card: a bar of weights | PLE table | reserve | KV cache | above util (CUDA-
visible total − usable = the (1 − gpu_memory_utilization) share of the card that vLLM never
requests; not NVML's free memory), scaled to the card's total, with the numbers in GiB (2^30 B;
2 decimals truncated, as :func:`seat_console.fit.budget.gib`); a ``│`` marks the usable limit. When
weights + PLE + reserve exceed the usable memory (OVER) there is no KV cache and no room above
util: the bar is red past the mark (``»`` where it spills past the card), the numbers say
weights + PLE + reserve > usable, and the headline relates the two figures of the verdict
("OVER: 24.74 GiB before any KV cache; 31.94 GiB must leave to serve one 262,144-token
request"). Below:
KV tokens and maximum concurrency (as vLLM computes them), the verdict in words and the levers.
At the bottom: the KV capacity ratio (candidate / resident) and the live overlay of the running
seat (predicted vs NVML).

What-if controls — the candidate's PLE placement, gpu_memory_utilization, tensor parallel size,
context (max_model_len) and sequences (max_num_seqs) — recompute as you type; a blank field
keeps the profile's value (shown as the placeholder), and so does an invalid one (named). The
recomputation is
:func:`seat_console.fit.inputs.compute_budgets`, pure arithmetic on the last reading: no I/O here.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, ClassVar

from pydantic import BaseModel, ValidationError
from rich.console import Console, ConsoleOptions, Group, RenderResult
from rich.text import Text
from textual import events, on
from textual.app import ComposeResult
from textual.containers import Horizontal
from textual.css.query import NoMatches
from textual.widgets import Input, Label, Select, Static

from seat_console.core.fmt import gib
from seat_console.snapshot.verdicts import over_words
from seat_console.snapshot.fit_verdict import (  # noqa: F401 - re-exported
    SIGNIFICANT_BYTES,
    fit_signature,
    gpu_fit_signature,
    profile_budgets,
)
from seat_console.core.profile import MAX_MODEL_LEN, MAX_NUM_SEQS
from seat_console.widgets.panel import SourcePanel

if TYPE_CHECKING:  # imported where used: the checkpoint scanner loads after the first frame
    from seat_console.fit.budget import CardBudget, Comparison, FitBudget, OverlayRow
    from seat_console.core.checkpoint import CheckpointProblem
    from seat_console.fit.inputs import FitInputs, FitSide, WhatIf

PLACEMENTS = ("gpu-replicated", "gpu-sharded", "host")

SEGMENTS: tuple[tuple[str, str, str], ...] = (
    ("weights", "█", "cyan"),
    ("PLE", "▓", "magenta"),
    ("reserve", "▒", "yellow"),
    ("KV cache", "░", "green"),
    ("above util", "·", "bright_black"),
)
"""Bar segments in order: (name, glyph, style). Glyphs differ so the bar reads under NO_COLOR.
"above util" is CUDA-visible total − usable (ceil(total × gpu_memory_utilization)): memory vLLM
leaves to the CUDA context, NCCL and other processes — not free memory (NVML's free is in the
pre-flight line)."""


def bar_parts(card: CardBudget) -> list[tuple[str, int]]:
    """Bytes of each segment of ``card``'s bar, in :data:`SEGMENTS` order: weights, PLE,
    reserve, KV cache (what is left, ≥ 0), above util (CUDA-visible total − usable, bytes;
    unknown totals count as 0). On an OVER card the static parts alone exceed the card's usable
    memory, so :class:`FitBar` cuts the last two off (see :func:`card_numbers`)."""
    total = card.total_bytes or 0
    usable = card.requested_bytes or 0
    kv = max(0, card.kv_bytes or 0)
    return [("weights", card.weights_bytes), ("PLE", card.ple_bytes),
            ("reserve", card.reserve_bytes), ("KV cache", kv),
            ("above util", max(0, total - usable))]


class FitBar:
    """Rich renderable: one card's stacked bar across the available width (see module doc).

    Cells are proportional to bytes over the CUDA-visible total (a non-zero part gets at least
    one cell); a ``│`` marks where usable memory ends. On an OVER card (KV bytes < 0) the cells
    past the mark are red and, when weights + PLE + reserve exceed even the total, the part
    beyond the card is cut and the last cell is a red ``»``.
    """

    def __init__(self, card: CardBudget) -> None:
        self.card = card

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        width = max(10, options.max_width)
        total = self.card.total_bytes
        text = Text()
        if not total:
            yield Text("total n/a", style="italic")
            return
        cells: list[tuple[str, str]] = []
        for (name, nbytes), (_n, glyph, style) in zip(bar_parts(self.card), SEGMENTS,
                                                      strict=True):
            n = round(nbytes / total * width)
            if nbytes > 0:
                n = max(1, n)
            cells += [(glyph, style)] * n
        cells = cells[:width] + [(" ", "")] * max(0, width - len(cells))
        mark = min(width - 1, round((self.card.requested_bytes or 0) / total * width))
        over = (self.card.kv_bytes or 0) < 0
        if over:   # no KV cache and nothing above util: only the static parts, cut at the card
            static = sum(len(g) for g, _s in cells[:width] if g not in ("░", "·"))
            cells = [c for c in cells if c[0] not in ("░", "·")][:width]
            cells += [(" ", "")] * max(0, width - static)
            if self.card.static_bytes > total:
                cells[-1] = ("»", "bold red")
        for i, (glyph, style) in enumerate(cells):
            if i == mark:
                text.append("│", style="bold red" if over else "bold")
            else:
                text.append(glyph, style=("red" if over and i > mark and glyph != " "
                                          else style))
        yield text


def legend() -> Text:
    """The bar legend line; the last segment is spelled out as "above util (1 − util)": the
    share of the card above gpu_memory_utilization, not free memory."""
    t = Text()
    for name, glyph, style in SEGMENTS:
        t.append(f"{glyph} ", style=style)
        t.append(f"{name}  " if name != "above util" else
                 "above util (1 − util)  ")
    t.append("│ usable limit", style="bold")
    return t


def card_numbers(card: CardBudget, budget: FitBudget | None = None) -> Text:
    """The numbers under ``card``'s bar in GiB: each :func:`bar_parts` segment; on an OVER card
    only weights, PLE and reserve, "= static > usable" (the bar shows no KV cache and nothing
    above util then), and on the next line the headline :meth:`FitBudget.over_words` of
    ``budget`` (which adds what must leave to serve one max_model_len request; without
    ``budget`` only the part before any KV cache)."""
    line = Text()
    if (card.kv_bytes or 0) >= 0:
        for name, nbytes in bar_parts(card):
            line.append(f"{name} {gib(nbytes)}  ")
        return line
    line.append(f"weights {gib(card.weights_bytes)}  PLE {gib(card.ple_bytes)}  reserve "
                f"{gib(card.reserve_bytes)} = {gib(card.static_bytes)} > usable "
                f"{gib(card.requested_bytes)}\n")
    words = (budget.over_words(card) if budget is not None else None) or (
        f"OVER: {gib(-(card.kv_bytes or 0))} GiB before any KV cache")
    line.append(words, style="bold red")
    return line


def render_side(title: str, b: FitBudget | None, why: str | None,
                problems: Sequence[CheckpointProblem] = (),
                no_verdict: str | None = None) -> Group:
    """One column: title, the checkpoint scan's problems, per-card bars with numbers, KV,
    verdict and levers. ``problems``: from :attr:`seat_console.core.checkpoint.CheckpointSummary.problems`;
    with any of severity ``error`` the budget is marked untrustworthy (its sizes are not) and
    its verdict reads "NO VERDICT: …" (:attr:`FitBudget.no_verdict`). ``no_verdict``: for a
    side without a budget (``b`` None), why it gets no verdict (its files cannot be scanned:
    :func:`seat_console.fit.inputs.no_verdict_reason`); shown as "NO VERDICT: …"."""
    head = Text(title, style="bold")
    if b is None:
        if no_verdict:
            return Group(head, Text(f"NO VERDICT: {no_verdict}", style="bold red"))
        return Group(head, Text(f"n/a — {why}", style="italic"))
    p = b.params
    head.append(f"  {b.heading()}, PLE {p.ple_placement}", style="")
    parts: list = [head]
    if b.name_note:
        parts.append(Text(b.name_note, style="yellow"))
    for prob in problems:
        parts.append(Text(f"{prob.severity.upper()} {prob.kind}: {prob.detail}",
                          style="bold red" if prob.severity == "error" else "yellow"))
    if any(prob.severity == "error" for prob in problems):
        parts.append(Text("the checkpoint's sizes cannot be trusted, so neither can this budget",
                          style="bold red"))
    for c in b.cards:
        src = {"nvml": "NVML", "declared": "declared total"}.get(c.total_source, "unknown")
        parts.append(Text(f"{c.label}: {gib(c.total_bytes)} GiB ({src}), usable "
                          f"{gib(c.requested_bytes)} GiB "
                          f"(×{b.util if b.util is not None else p.gpu_memory_utilization:g})"))
        parts.append(FitBar(c))
        parts.append(card_numbers(c, b))
    if b.capacity is not None:
        cap = b.capacity
        parts.append(Text(f"KV cache {cap.kv_tokens:,} tokens · max concurrency "
                          f"{cap.max_concurrency:.2f}× at {cap.max_model_len:,} · "
                          f"{b.kv_model.bytes_per_token:,} B/token/GPU" if b.kv_model else ""))
    else:
        parts.append(Text(f"KV cache n/a — {b.kv_unavailable}", style="italic"))
    style = "bold green" if b.verdict.fits else "bold red"
    parts.append(Text(" · ".join(b.provenance()), style="dim"))
    if b.served is not None:
        parts.append(Text(f"served {b.served.dtype} ({b.served.words}) · KV cache "
                          f"{b.kv_cache_dtype}", style="dim"))
    on = f"vLLM {b.engine.version}: " if b.engine is not None else ""
    parts.append(Text(on + b.verdict.words, style=style))
    if b.flag_words():
        parts.append(Text(f"flag: {b.flag_words()}", style="green"))
    for lev in b.verdict.levers:
        mark = {True: "+", False: "-", None: "·"}[lev.helps]
        parts.append(Text(f" {mark} {lev.lever}: {lev.effect}", style="dim" if lev.helps
                          is not True else ""))
    if b.host_ram is not None:
        parts.append(Text(f"host RAM: {b.host_ram.words}"))
    for pf in b.preflight:
        if pf.ok is False:
            parts.append(Text(f"pre-flight: {pf.words}", style="yellow"))
    return Group(*parts)


def identity_lines(inputs: FitInputs | None) -> list[Text]:
    """The GPU identity findings of ``inputs``: errors (two TP ranks on one card: no verdict),
    ``node.gpus`` entries that matched no card, and ``CUDA_VISIBLE_DEVICES`` /
    ``CUDA_DEVICE_ORDER`` set in the console's or the seat container's environment."""
    if inputs is None:
        return []
    out = [Text(f"GPU identity: {e}", style="bold red") for e in inputs.gpu_errors]
    if inputs.unmatched_gpus:
        out.append(Text("node.gpus matched no card: " + ", ".join(inputs.unmatched_gpus)
                        + " (NVML indices, not CUDA ordinals; budgeted at the declared total)",
                        style="bold yellow"))
    out += [Text(w, style="yellow") for w in inputs.env_warnings]
    return out


def render_footer(comp: Comparison, overlay: list[OverlayRow],
                  identity: Sequence[Text] = ()) -> Group:
    """Ratio line, live overlay rows and the GPU identity lines (:func:`identity_lines`)."""
    parts: list = [legend(), *identity]
    if comp.kv_tokens_ratio is not None:
        parts.append(Text(f"KV capacity candidate / resident: {comp.kv_tokens_ratio:.2f}× "
                          "(tokens)", style="bold"))
    else:
        parts.append(Text("KV capacity ratio: n/a (needs both budgets with KV tokens)",
                          style="dim"))
    for r in overlay:
        parts.append(Text(f"live {r.label}: predicted {gib(r.predicted_bytes)} GiB · NVML "
                          f"{gib(r.nvml_used_bytes)} GiB ({r.nvml_basis}) · difference "
                          f"{gib(r.difference_bytes)} GiB"))
    return Group(*parts)


class FitPanel(SourcePanel):
    """Fit budget panel (source ``fit``: :class:`seat_console.fit.inputs.FitInputs`).

    State for tests: ``comparison`` / ``overlay`` (the last computed), ``whatif`` (the parsed
    controls), ``whatif_error`` (why the controls are invalid, or ``None``).
    """

    source_name: ClassVar[str] = "fit"
    title: ClassVar[str] = "Fit budget (GiB = 2^30 B)"
    compact_title: ClassVar[str] = "Fit (GiB = 2^30 B; Enter: budget per card, what-if)"
    wide_span: ClassVar[int] = 2
    compact_when_wide: ClassVar[bool] = True
    """Compact on the main screen at ≥ 160 columns too (the full budget would push the engine,
    containers, seat and actions panels below the first screen); Enter: the full budget."""

    DEFAULT_CSS = """
    FitPanel #fit-controls { height: auto; }
    FitPanel .fit-controls-group { width: auto; height: auto; }
    FitPanel.-narrow-controls #fit-controls { layout: vertical; }
    FitPanel.-narrow-controls #fit-controls .fit-controls-group > Label:first-child {
        padding: 0;
    }
    FitPanel #fit-controls Label { padding: 0 0 0 1; }
    FitPanel #fit-controls Input { margin: 0 0 0 1; }
    FitPanel #fit-controls #fit-placement-label { padding: 0; }
    FitPanel #fit-placement { width: 16; margin: 0 0 0 1; }
    FitPanel #fit-placement > SelectCurrent { padding: 0; }
    FitPanel #fit-util { width: 7; }
    FitPanel #fit-tp { width: 3; }
    FitPanel #fit-context { width: 11; }
    FitPanel #fit-seqs { width: 8; }
    FitPanel #fit-sides { height: auto; }
    FitPanel #fit-sides > Static { width: 1fr; }
    FitPanel #fit-sides > #fit-resident { padding: 0 1 0 0; border-right: solid $primary 60%; }
    FitPanel #fit-sides > #fit-candidate { padding: 0 0 0 1; }
    FitPanel #fit-error { color: $error; height: auto; }
    """

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self._inputs: FitInputs | None = None
        self._signature: tuple | None = None
        self.comparison: Comparison | None = None
        self.overlay: list[OverlayRow] = []
        self.whatif: WhatIf | None = None
        self.whatif_error: str | None = None
        self.recomputes = 0
        """How many times the budgets were computed (tests: not on unchanged inputs)."""

    def compose_body(self) -> ComposeResult:
        """What-if controls (on the detail view now; on the main screen once the panel is
        shown in full, :meth:`mount_controls`), the two sides, the footer."""
        if self.detail:
            yield Horizontal(*self._controls(), id="fit-controls")
        else:
            yield Horizontal(id="fit-controls")
        yield Static("", id="fit-error")
        with Horizontal(id="fit-sides"):
            yield Static("", id="fit-resident")
            yield Static("", id="fit-candidate")
        yield Static("", id="fit-footer")

    def on_mount(self) -> None:
        """On the main screen: mount the what-if controls after the first frame if the panel
        is shown in full (a compact panel never shows them: 10 of the screen's ~80 widgets,
        ~50 ms of the first frame)."""
        if not self.detail:
            self.call_after_refresh(lambda: None if self.compact else self.mount_controls())

    def set_compact(self, compact: bool) -> None:
        """As :meth:`SourcePanel.set_compact`; the full form gets the what-if controls."""
        super().set_compact(compact)
        if not compact and self.is_mounted:
            self.mount_controls()

    def mount_controls(self) -> None:
        """Mount the what-if controls into ``#fit-controls`` unless they are there."""
        box = self.query_one("#fit-controls", Horizontal)
        if not box.children:
            box.mount(*self._controls())

    CONTROLS_CELLS: ClassVar[int] = 71
    """Columns the what-if controls take on one row (labels, fields sized for their longest
    values, margins; tests/test_screen_80x24.py). Narrower panels (the detail view at
    80 columns) put them on two rows, so no field is cut."""

    def on_resize(self, _event: events.Resize) -> None:
        """One row of what-if controls when they fit, else two (PLE/util/TP, context/seqs)."""
        self.set_class(self.content_size.width < self.CONTROLS_CELLS, "-narrow-controls")

    def _controls(self) -> list:
        """The what-if widgets in two groups — PLE placement, util, TP; context, seqs
        (placeholders show the profile's values) — side by side, or stacked when narrow."""
        seat = self.loaded.profile.seat if self.loaded else None
        cand = self.loaded.profile.candidate if self.loaded else None
        w = self._control_widgets(seat, cand)
        return [Horizontal(*w[:6], classes="fit-controls-group"),
                Horizontal(*w[6:], classes="fit-controls-group")]

    @staticmethod
    def _control_widgets(seat, cand) -> list:
        return [
            Label("PLE", id="fit-placement-label"),
            Select([(p, p) for p in PLACEMENTS], allow_blank=False, compact=True,
                   value=cand.ple_placement if cand else "gpu-replicated", id="fit-placement"),
            Label("util"),
            Input(placeholder=f"{seat.gpu_memory_utilization:g}" if seat else "",
                  type="number", compact=True, valid_empty=True, id="fit-util"),
            Label("TP"),
            Input(placeholder=str(seat.tensor_parallel_size) if seat else "",
                  type="integer", compact=True, valid_empty=True, id="fit-tp"),
            Label("context"),
            Input(placeholder=str(seat.max_model_len) if seat else "", type="integer",
                  compact=True, valid_empty=True, id="fit-context"),
            Label("seqs"),
            Input(placeholder=str(seat.max_num_seqs) if seat else "", type="integer",
                  compact=True, valid_empty=True, id="fit-seqs"),
        ]

    def render_reading(self, reading: BaseModel) -> None:
        """Keep the latest inputs and recompute with the current what-if controls — only when
        they differ from the last inputs (:func:`fit_signature`)."""
        from seat_console.fit.inputs import FitInputs

        if not isinstance(reading, FitInputs):
            raise TypeError(f"fit panel got a {type(reading).__name__}")
        self._inputs = reading
        sig = fit_signature(reading)
        if sig == self._signature and self.comparison is not None:
            return
        self._signature = sig
        self._recompute()

    def render_compact(self, reading: BaseModel) -> Text | None:
        """One line per side: verdict and KV capacity with the profile's settings (the full
        budget per card, what-if controls included, is on the detail view, Enter — the title
        says so)."""
        from seat_console.fit.inputs import FitInputs, no_verdict_reason

        if not isinstance(reading, FitInputs):
            raise TypeError(f"fit panel got a {type(reading).__name__}")
        sig = fit_signature(reading)
        if sig != self._signature or self._compact_comparison is None:
            self._signature = sig
            self._compact_comparison, _ = profile_budgets(reading)
            self.recomputes += 1
        c = self._compact_comparison
        t = Text()
        for i, (label, b, why, side) in enumerate((
                ("RESIDENT", c.resident, c.resident_unavailable, reading.resident),
                ("CANDIDATE", c.candidate, c.candidate_unavailable, reading.candidate))):
            if i:
                t.append("\n")
            t.append(f"{label:<10}", style="bold")
            nv = b.no_verdict if b is not None else no_verdict_reason(side)
            if nv:
                t.append(f"NO VERDICT: {nv}", style="bold red")
                continue
            if b is None:
                t.append(f"n/a — {why}", style="italic")
                continue
            v = b.verdict
            if v.refused:
                t.append("vLLM refuses to start: " + "; ".join(v.refused), style="bold red")
            elif v.fits:
                t.append("fits", style="bold green")
            else:   # the status line's words and figure (fit's "must leave")
                t.append(over_words(v), style="bold red")
            t.append(f"  {b.name} · TP {b.params.tensor_parallel_size} · util "
                     f"{b.util if b.util is not None else b.params.gpu_memory_utilization:g}"
                     + (f" · vLLM {b.engine.version}" if b.engine is not None else
                        f" · vLLM ? (rule {b.engine_rule})" if b.engine_rule else
                        " · vLLM version unknown"))   # not running: Enter's detail says why
            if b.capacity is not None:
                t.append(f" · KV {b.capacity.kv_tokens:,} tokens, "
                         f"{b.capacity.max_concurrency:.2f}× at {b.capacity.max_model_len:,}")
        for line in identity_lines(reading):
            t.append("\n")
            t.append_text(line)
        return t

    _compact_comparison: Any = None

    def _read_controls(self) -> tuple[WhatIf, str | None]:
        from seat_console.fit.inputs import WhatIf

        """The what-if of the controls, and the error text naming any invalid control.

        An invalid control falls back to the profile's value (``None``) while the valid ones
        keep applying: never the last valid value, which while typing "1.5" is the "1" that the
        user passed through, not a value they chose.
        """
        if not self.query("#fit-placement"):   # controls not mounted (compact): the profile's
            return WhatIf.model_validate({}), None

        def val(wid: str) -> str | None:
            v = self.query_one(f"#{wid}", Input).value.strip()
            return v or None

        placement = self.query_one("#fit-placement", Select).value
        raw = {"placement": placement if isinstance(placement, str) else None,
               "gpu_memory_utilization": val("fit-util"),
               "tensor_parallel_size": val("fit-tp"), "max_model_len": val("fit-context"),
               "max_num_seqs": val("fit-seqs")}
        try:
            return WhatIf.model_validate(raw), None
        except ValidationError as exc:
            names = {"gpu_memory_utilization": "util (0 < u ≤ 1)",
                     "tensor_parallel_size": "TP (1-64)",
                     "max_model_len": f"context (1 to {MAX_MODEL_LEN:,})",
                     "max_num_seqs": f"seqs (1 to {MAX_NUM_SEQS:,})"}
            keys = [str(e["loc"][0]) for e in exc.errors()]
            bad = ", ".join(names.get(k, k) for k in keys)
            kept = {k: v for k, v in raw.items() if k not in keys}
            return (WhatIf.model_validate(kept),
                    f"what-if ignored, invalid: {bad} — the profile's value is used")

    def _controls_untouched(self) -> bool:
        """No what-if typed and the PLE choice as composed (the state at mount)."""
        try:
            if any(self.query_one(f"#{wid}", Input).value.strip()
                   for wid in ("fit-util", "fit-tp", "fit-context", "fit-seqs")):
                return False
            placement = self.query_one("#fit-placement", Select).value
        except NoMatches:
            return True
        cand = self.loaded.profile.candidate if self.loaded else None
        return placement == (cand.ple_placement if cand else "gpu-replicated")

    def _recompute(self) -> None:
        if self._inputs is None and self._controls_untouched():
            return   # nothing to compute or to refuse yet: fit_source loads after the first frame
        from seat_console.fit.inputs import no_verdict_reason

        self.whatif, self.whatif_error = self._read_controls()
        self.query_one("#fit-error", Static).update(self.whatif_error or "")
        if self._inputs is None:
            return
        self.recomputes += 1
        self.comparison, self.overlay = profile_budgets(self._inputs, self.whatif)
        c = self.comparison
        inp = self._inputs

        def problems(side: FitSide | None) -> list[CheckpointProblem]:
            return list(side.scan.problems) if side is not None and side.scan else []

        self.query_one("#fit-resident", Static).update(
            render_side("RESIDENT", c.resident, c.resident_unavailable, problems(inp.resident),
                        no_verdict_reason(inp.resident)))
        self.query_one("#fit-candidate", Static).update(
            render_side("CANDIDATE", c.candidate, c.candidate_unavailable,
                        problems(inp.candidate), no_verdict_reason(inp.candidate)))
        self.query_one("#fit-footer", Static).update(
            render_footer(c, self.overlay, identity_lines(inp)))

    @on(Input.Changed)
    @on(Select.Changed)
    def _controls_changed(self) -> None:
        """A what-if control changed: recompute at once (no I/O)."""
        self._recompute()


__all__ = [
    "PLACEMENTS",
    "SIGNIFICANT_BYTES",
    "fit_signature",
    "gpu_fit_signature",
    "profile_budgets",
    "SEGMENTS",
    "FitBar",
    "FitPanel",
    "bar_parts",
    "card_numbers",
    "legend",
    "identity_lines",
    "render_footer",
    "render_side",
]
