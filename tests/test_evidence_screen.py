"""The read-only evidence report screen: built in a worker, shows the newest evidence."""

from __future__ import annotations

from pathlib import Path

from textual.app import App

from evidence_factory import T0, write_run
from seat_console.evidence.latest import build_markdown, newest_evidence
from seat_console.widgets.evidence import EvidenceScreen


async def _shown(tmp_path: Path) -> str:
    app = App()
    async with app.run_test(size=(120, 40)) as pilot:
        screen = EvidenceScreen(lambda: build_markdown(None, tmp_path))
        app.push_screen(screen)
        for _ in range(200):
            await pilot.pause(0.02)
            if screen.text is not None:
                break
        assert screen.text is not None, "the report was never built"
        from textual.widgets import Footer

        assert len(screen.query(Footer)) == 1, list(screen.walk_children())
        await pilot.press("escape")
        await pilot.pause()
        assert not isinstance(app.screen, EvidenceScreen)
        return screen.text


async def test_screen_shows_the_report_and_its_refusals(tmp_path: Path) -> None:
    write_run(tmp_path / "runs", at=T0, phases={"load": (64, 3)})
    text = await _shown(tmp_path)
    assert "# Seat evidence report" in text
    assert "REFUSED — throughput/latency (load)" in text and "61/64 completed" in text
    # which run it is, and how to print it outside the console (the trial could not tell)
    run = newest_evidence(tmp_path)
    assert text.startswith(f"Read from `{run}`, the newest probe run in `{tmp_path}`; "
                           f"`seat-console report {run}` prints it."), text[:300]


def test_newest_evidence_prefers_the_newest_comparison(tmp_path: Path) -> None:
    for name in ("20261201T090000Z-aaaaaa", "20261201T100000Z-bbbbbb"):
        (tmp_path / "runs" / name).mkdir(parents=True)
        (tmp_path / "runs" / name / "summary.json").write_text("{}")
    assert newest_evidence(tmp_path) == tmp_path / "runs" / "20261201T100000Z-bbbbbb"
    for name in ("cmp-20261201T080000Z-cccccc", "cmp-20261201T070000Z-dddddd"):
        (tmp_path / "comparisons" / name).mkdir(parents=True)
        (tmp_path / "comparisons" / name / "compare.json").write_text("{}")
    (tmp_path / "comparisons" / "cmp-20261201T090000Z-eeeeee").mkdir()  # no compare.json
    assert newest_evidence(tmp_path) == tmp_path / "comparisons" / "cmp-20261201T080000Z-cccccc"


async def test_screen_without_evidence_says_so(tmp_path: Path) -> None:
    text = await _shown(tmp_path)
    assert "No evidence yet" in text and f"`{tmp_path}`" in text
