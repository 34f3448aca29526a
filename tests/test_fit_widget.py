"""The fit panel in the app (Pilot): stacked bars per card, verdict in words, resident and
candidate side by side, what-if controls that recompute as you type."""

from __future__ import annotations

import contextlib

from app_fixtures import FakeClock, default_loaded
from screen_fixtures import flat, screen_text, type_longest_what_ifs, wait_for
from textual.widgets import Input, Select

from seat_console.tui.app import SeatConsoleApp
from seat_console.tui.panels import PANELS
from seat_console.fit.budget import CardBudget, HostMemory
from seat_console.snapshot.fit_reading import gather_fit_inputs
from seat_console.fit.inputs import FitInputs
from seat_console.snapshot.fit_reading import make_source as make_fit_source
from seat_console.core.base import Source
from seat_console.widgets.fit import FitBar, FitPanel, bar_parts, render_side

GiB = 1 << 30
BIG_HOST = HostMemory(total_bytes=2048 * GiB, available_bytes=1536 * GiB)


class FixedFit(Source):
    """The fit inputs of the embedded default profile (no NVML: declared 95 GiB cards)."""

    name = "fit"

    def __init__(self, inputs: FitInputs) -> None:
        self.inputs = inputs
        self.reads = 0

    def read(self) -> FitInputs:
        self.reads += 1
        return self.inputs


def make_app(inputs: FitInputs | None = None) -> tuple[SeatConsoleApp, FixedFit]:
    """The app with only the fit panel (the full panel, as on its detail view) on ``inputs``
    (default: the embedded default profile's, no GPU reading, a large host)."""
    loaded = default_loaded()
    if inputs is None:
        inputs = gather_fit_inputs(loaded, None, gpu_unavailable="test", host=BIG_HOST)
    src = FixedFit(inputs)
    app = SeatConsoleApp(loaded, interval=3600.0, panels=[(lambda _l: src, FitPanel)],
                         clock=FakeClock(), age_tick_s=3600.0, watch_terminal=False,
                         compact=False)  # the full panel, as on its detail view
    return app, src


@contextlib.asynccontextmanager
async def fit_panel(size: tuple[int, int], inputs: FitInputs | None = None):
    """:func:`make_app` running at ``size`` once the panel has its first budget:
    ``(app, pilot, panel)``."""
    app, _src = make_app(inputs)
    async with app.run_test(size=size) as pilot:
        panel = app.query_one(FitPanel)
        await wait_for(pilot, lambda: panel.comparison is not None, "first fit reading")
        yield app, pilot, panel


def test_fit_panel_is_in_the_app_and_reads_the_gpu_panels_reading() -> None:
    from seat_console.tui.panels import LatestReading, LatestReadings, make_fit_source as app_fit

    spec = next(s for s in PANELS if s.panel is FitPanel)
    assert spec.source == "fit" and spec.factory == "seat_console.snapshot.live:make_fit_source"
    assert spec.uses_readings
    src = app_fit(default_loaded(), LatestReadings())
    assert isinstance(src._gpu, LatestReading) and src._gpu.key == "gpus"  # no NVML of its own
    assert make_fit_source is not None


def test_bar_segments_in_bytes() -> None:
    card = CardBudget(rank=0, label="GPU 0", total_bytes=95 * GiB, total_source="declared",
                      requested_bytes=91_804_925_952, weights_bytes=67_173_288_509,
                      ple_bytes=0, reserve_bytes=GiB, kv_bytes=91_804_925_952 - 67_173_288_509
                      - GiB)
    parts = dict(bar_parts(card))
    assert parts["KV cache"] == 91_804_925_952 - 67_173_288_509 - GiB
    assert parts["above util"] == 95 * GiB - 91_804_925_952  # above gpu_memory_utilization
    assert sum(parts.values()) == 95 * GiB                  # the bar covers the card exactly
    from rich.console import Console
    console = Console(width=40, color_system=None, record=True)
    console.print(FitBar(card))
    line = console.export_text().rstrip("\n")
    assert len(line) == 40 and "│" in line and line.count("█") == round(
        67_173_288_509 / (95 * GiB) * 40)


async def test_default_seat_over_then_what_ifs_recompute_as_you_type() -> None:
    app, src = make_app()
    async with app.run_test(size=(160, 60)) as pilot:
        panel = app.query_one(FitPanel)
        await wait_for(pilot, lambda: "CANDIDATE candidate-nvfp4" in flat(screen_text(app)),
                       "first fit reading drawn")
        text = flat(screen_text(app))
        assert "CANDIDATE candidate-nvfp4 (declared sizes), PLE gpu-replicated" in text
        assert "OVER: 31.94 GiB per card must leave" not in text.split("Fit budget", 1)[1]  # the status line says it
        # One phrase relates the headline to the verdict (24.74 + 7.19 GiB of KV = 31.94).
        assert "OVER: 24.74 GiB before any KV cache; 31.94 GiB must leave to serve one " \
               "262,144-token request" in _line(
                   render_side("CANDIDATE", panel.comparison.candidate, None), 200)
        assert "does not fit: 31.94 GiB per card must leave the GPU" in text
        assert "RESIDENT resident-fp8 (declared sizes)" in text
        assert "KV capacity candidate / resident: 0.00× (tokens)" in text
        assert "weights 62.56" in text and "PLE 47.68" in text
        cand = panel.comparison.candidate
        assert cand.verdict.fits is False and cand.cards[0].kv_bytes == -26_570_328_637

        # Placement → host: the table leaves the GPUs; 22.94 GiB of KV per card. The what-if
        # controls are mounted after the first frame: wait until the Select has composed (a
        # value set before raised NoMatches '#label', once the runbook strip's first read
        # moved the timing)
        await wait_for(pilot, lambda: bool(panel.query("#fit-placement #label")),
                       "the what-if controls mounted")
        panel.query_one("#fit-placement", Select).value = "host"
        await wait_for(pilot, lambda: panel.comparison.candidate.params.ple_placement == "host",
                       "recompute for host placement")
        cand = panel.comparison.candidate
        assert cand.verdict.fits is True and cand.kv_tokens == 835_629
        await pilot.pause()
        assert "835,629 tokens" in flat(screen_text(app))

        # Type a utilisation: each keystroke recomputes (no new reading needed).
        reads = src.reads
        await pilot.click("#fit-util")
        await pilot.press("0", ".", "9", "5")
        await wait_for(pilot, lambda: panel.whatif.gpu_memory_utilization == 0.95,
                       "util 0.95 parsed")
        cand = panel.comparison.candidate
        assert cand.cards[0].requested_bytes == 96_905_199_616   # ceil(95 GiB × 0.95)
        assert src.reads == reads                                 # recomputed without I/O

        # Context: a shorter max_model_len raises the concurrency at that length.
        await pilot.click("#fit-context")
        await pilot.press(*"65536")
        await wait_for(pilot, lambda: panel.whatif.max_model_len == 65_536, "context parsed")
        assert panel.comparison.candidate.capacity.max_model_len == 65_536

        # TP 4 on a 2-card node: hypothetical cards, the verdict still computed.
        await pilot.click("#fit-tp")
        await pilot.press("4")
        await wait_for(pilot, lambda: panel.whatif.tensor_parallel_size == 4, "tp parsed")
        assert len(panel.comparison.candidate.cards) == 4

        # An invalid value is named and ignored (the profile's value is used).
        await pilot.click("#fit-util")
        await pilot.press("backspace", "backspace", "backspace", "backspace", "2")
        await wait_for(pilot, lambda: panel.whatif_error is not None, "invalid util")
        assert "util" in panel.whatif_error
        await pilot.pause()
        assert "what-if ignored, invalid: util" in flat(screen_text(app))


async def test_seqs_control_and_narrow_terminal() -> None:
    async with fit_panel((80, 24)) as (_app, pilot, panel):
        panel.query_one("#fit-seqs", Input).value = "8"
        await wait_for(pilot, lambda: panel.whatif.max_num_seqs == 8, "seqs parsed")
        levers = {lv.lever: lv for lv in panel.comparison.candidate.verdict.levers}
        assert "max_num_seqs 8" in levers["fewer sequences"].effect


async def test_invalid_what_if_uses_the_profile_value_not_a_half_typed_one() -> None:
    """Typing "1.5" passes through the valid "1": the budget must not stay at util 1.0 while
    the panel says the what-if is ignored; the other (valid) controls keep applying."""
    async with fit_panel((160, 50)) as (app, pilot, panel):
        panel.query_one("#fit-tp", Input).value = "4"
        await wait_for(pilot, lambda: panel.whatif.tensor_parallel_size == 4, "tp parsed")
        await pilot.click("#fit-util")
        await pilot.press("1", ".", "5")
        await wait_for(pilot, lambda: panel.whatif_error is not None, "invalid util")
        assert panel.query_one("#fit-util", Input).value == "1.5"
        assert panel.whatif.gpu_memory_utilization is None       # the profile's 0.90 applies
        assert panel.whatif.tensor_parallel_size == 4            # the valid control still applies
        cand = panel.comparison.candidate
        assert len(cand.cards) == 4
        assert cand.cards[0].requested_bytes == 91_804_925_952   # 102,005,473,280 B × 0.90
        await pilot.pause()
        assert "profile's value" in flat(screen_text(app))


async def test_escape_leaves_a_what_if_field_so_the_keys_work_again() -> None:
    """Tab into a control, Escape: the console's keys (p, q, r, ?) work again."""
    async with fit_panel((80, 24)) as (app, pilot, panel):
        panel.query_one("#fit-util", Input).focus()
        await wait_for(pilot, lambda: isinstance(app.focused, Input), "util focused")
        await pilot.press("p")
        assert not app.paused                       # p went to the field (rejected by it)
        await pilot.press("escape")
        await wait_for(pilot, lambda: app.focused is panel, "field left, its panel focused")
        await pilot.press("p")
        await wait_for(pilot, lambda: app.paused, "p pauses again")


async def test_scan_errors_show_in_the_panel(tmp_path) -> None:
    """A checkpoint whose index lists a missing shard: the panel says so beside the budget
    (the sizes cannot be trusted), instead of a silent 'fits'."""
    import ckpt_factory as F
    cfg = F.llama3_8b_config()
    F.write_checkpoint(tmp_path / "ck", F.split_even(F.llama_tensors(cfg), 2), config=cfg)
    (tmp_path / "ck" / "model-00002-of-00002.safetensors").unlink()
    loaded = default_loaded()
    inputs = gather_fit_inputs(loaded, None, gpu_unavailable="test", host=BIG_HOST,
                               checkpoint=str(tmp_path / "ck"))
    assert inputs.resident.scan is not None and inputs.resident.scan.errors
    async with fit_panel((160, 50), inputs) as (app, pilot, _panel):
        await pilot.pause()
        text = flat(screen_text(app))
        assert "ERROR missing-shard" in text and "model-00002-of-00002.safetensors" in text
        assert "cannot be trusted" in text


async def test_a_huge_context_what_if_is_named_with_its_range() -> None:
    async with fit_panel((160, 50)) as (_app, pilot, panel):
        panel.query_one("#fit-context", Input).value = "99999999999999999999999"
        await wait_for(pilot, lambda: panel.whatif_error is not None, "invalid context")
        assert "context (1 to 4,294,967,296)" in panel.whatif_error
        assert panel.whatif.max_model_len is None
        assert panel.comparison.candidate.capacity.max_model_len == 262_144


async def test_what_if_fields_show_their_longest_values_at_80_columns() -> None:
    """Each what-if field holds its longest valid value plus the cursor at 80 columns: "0.9515"
    showed as ".9515" in a 6-cell field; the context's 4,294,967,296 lost its leading digit."""
    async with fit_panel((80, 24)) as (app, pilot, panel):
        await type_longest_what_ifs(pilot, panel, lambda _v: next(
            line for line in screen_text(app).splitlines() if "context" in line))
        controls = panel.query_one("#fit-controls")
        assert panel.whatif_error is None
        sel = panel.query_one("#fit-placement", Select)
        assert sel.region.right <= controls.region.right
        assert "gpu-replicated ▼" in next(line for line in screen_text(app).splitlines()
                                          if "context" in line)


async def test_an_overriding_checkpoint_is_named_after_its_directory(tmp_path) -> None:
    import ckpt_factory as F
    cfg = F.llama3_8b_config()
    F.write_checkpoint(tmp_path / "lab-tiny-llama", [F.llama_tensors(cfg)], config=cfg)
    loaded = default_loaded()
    inputs = gather_fit_inputs(loaded, None, gpu_unavailable="test", host=BIG_HOST,
                               checkpoint=str(tmp_path / "lab-tiny-llama"))
    async with fit_panel((160, 50), inputs) as (app, pilot, _panel):
        await pilot.pause()
        text = flat(screen_text(app))
        assert "RESIDENT lab-tiny-llama (scanned files:" in text
        assert "resident-fp8 (scanned" not in text
        assert "--checkpoint overrides resident.path" in text
        assert "'resident-fp8' does not apply" in text


def _line(renderable, width: int = 80) -> str:
    from rich.console import Console
    console = Console(width=width, color_system=None, record=True)
    console.print(renderable)
    return console.export_text()


def test_the_part_above_utilisation_is_not_called_free() -> None:
    """The segment is CUDA-visible total − usable (1 − gpu_memory_utilization of the card), not
    NVML free memory: "free 9.50" beside "OVER" read as 9.50 GiB to spare."""
    from seat_console.widgets.fit import SEGMENTS, legend
    assert [s[0] for s in SEGMENTS] == ["weights", "PLE", "reserve", "KV cache", "above util"]
    text = _line(legend(), 160)
    assert "above util (1 − util)" in text and "free" not in text


def test_an_over_card_shows_no_kv_and_no_room_above_util() -> None:
    """An OVER card: the bar is all weights + PLE up to the card's edge (red past the usable
    mark, » where it spills over the card) and its numbers list no KV cache and no part above
    util — nothing a bar segment does not show."""
    from seat_console.widgets.fit import card_numbers
    usable = 91_804_925_952
    over = CardBudget(rank=0, label="GPU 0", total_bytes=102_005_473_280,
                      total_source="declared", requested_bytes=usable,
                      weights_bytes=67_173_288_509, ple_bytes=51_201_966_080, reserve_bytes=0,
                      kv_bytes=usable - 67_173_288_509 - 51_201_966_080)
    bar = _line(FitBar(over), 40).rstrip("\n")
    assert "·" not in bar and "░" not in bar and bar.endswith("»") and "│" in bar
    nums = _line(card_numbers(over), 160)
    assert "above util" not in nums and "KV cache 0" not in nums and "free" not in nums
    assert "weights 62.56  PLE 47.68  reserve 0.00 = 110.24 > usable 85.50" in nums
    assert "OVER: 24.74 GiB before any KV cache" in nums
    fits = over.model_copy(update={"ple_bytes": 0, "kv_bytes": usable - 67_173_288_509})
    nums = _line(card_numbers(fits), 160)
    assert "KV cache 22.94" in nums and "above util 9.50" in nums
    bar = _line(FitBar(fits), 40)
    assert "·" in bar and "»" not in bar


def test_panel_names_the_engine_version_and_the_flag() -> None:
    """Issue 34: the version beside the verdict, and the flag when the side fits."""
    from rich.console import Console

    from seat_console.fit.engine_rules import parse_engine
    from seat_console.fit.inputs import compute_budgets

    inputs = gather_fit_inputs(default_loaded(), None)
    res = inputs.resident.model_copy(update={
        "engine_version": parse_engine("vllm==0.34.0", "the profile's resident.engine")})
    comp = compute_budgets(inputs.model_copy(update={"resident": res}))[0]
    console = Console(width=400, color_system=None, record=True)
    console.print(render_side("RESIDENT", comp.resident, None))
    console.print(render_side("CANDIDATE", comp.candidate, None))
    text = console.export_text()
    assert "vLLM 0.34.0: fits:" in text
    assert f"flag: --kv-cache-memory-bytes={comp.resident.kv_flag_bytes} " in text
    assert "vLLM 0.33.0: does not fit" in text   # the candidate's own version (profile)


async def test_a_side_without_a_known_engine_names_the_rule_it_was_budgeted_by(monkeypatch):
    """The trial read "vLLM version unknown" beside a candidate that was not running yet; the
    row now says which engine rule budgeted it."""
    import seat_console.widgets.fit as fit_mod

    real = fit_mod.profile_budgets

    def no_engine(*args, **kwargs):
        comp, rest = real(*args, **kwargs)
        cand = comp.candidate.model_copy(update={"engine": None})
        return comp.model_copy(update={"candidate": cand}), rest

    monkeypatch.setattr(fit_mod, "profile_budgets", no_engine)
    app, _src = make_app()
    async with app.run_test(size=(160, 60)) as pilot:
        await wait_for(pilot, lambda: "CANDIDATE" in screen_text(app), "the fit rows")
        panel = app.query_one(FitPanel)
        rows = panel.render_compact(app.states["fit"].last_good).plain.splitlines()
        cand = next(r for r in rows if r.startswith("CANDIDATE"))
        rule = panel._compact_comparison.candidate.engine_rule
        assert rule and f"· vLLM ? (rule {rule})" in cand and "unknown" not in cand, cand
        res = next(r for r in rows if r.startswith("RESIDENT"))
        assert "· vLLM 0.33.0" in res, res


async def test_a_blank_what_if_field_is_not_drawn_invalid() -> None:
    """A blank field means "the profile's value" (its placeholder): the trial saw every
    emptied field drawn red as if it were wrong. A typed value that is not a number still is."""
    async with fit_panel((160, 50)) as (_app, pilot, panel):
        field = panel.query_one("#fit-context", Input)
        field.value = "65536"
        await wait_for(pilot, lambda: panel.whatif.max_model_len == 65_536, "context parsed")
        field.value = ""
        await wait_for(pilot, lambda: panel.whatif.max_model_len is None, "back to the profile")
        await pilot.pause()
        assert "-invalid" not in field.classes, field.classes
        assert panel.whatif_error is None
        util = panel.query_one("#fit-util", Input)
        util.value = "-"
        await wait_for(pilot, lambda: panel.whatif_error is not None, "invalid util")
        await pilot.pause()
        assert "-invalid" in util.classes, util.classes
