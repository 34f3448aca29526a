"""The newest evidence and its report as Markdown (what the TUI's evidence screen shows): the
newest comparison directory, else the newest probe run, read from the data dir. Blocking file
reads: call from a worker thread."""

from __future__ import annotations

from pathlib import Path


def newest_evidence(data_root: Path | None = None) -> Path | None:
    """The newest comparison directory (``comparisons/<id>`` with ``compare.json``), else the
    newest probe run directory (``runs/<id>`` with ``summary.json``), else ``None``. IDs start
    with their UTC start time, so the newest sorts last."""
    from seat_console.core.paths import data_dir

    base = data_root or data_dir()
    for sub, marker in (("comparisons", "compare.json"), ("runs", "summary.json")):
        d = base / sub
        if d.is_dir():
            found = sorted(p for p in d.iterdir() if (p / marker).is_file())
            if found:
                return found[-1]
    return None


def build_markdown(target: Path | None, data_root: Path | None = None) -> str:
    """The report of ``target`` (default :func:`newest_evidence`) as Markdown, or a sentence
    saying there is nothing to show / why it cannot be read. Blocking: call from a worker."""
    from seat_console.evidence import report as rp
    from seat_console.evidence.runs import RunError

    target = target or newest_evidence(data_root)
    if target is None:
        return ("# No evidence yet\n\nNo comparison or probe run is kept in the data dir. "
                "Run `seat-console compare --bracket ABBA` (or a probe) first.")
    try:
        return rp.render_markdown(rp.build_report(rp.load_inputs([str(target)])))
    except RunError as exc:
        return f"# The report cannot be built\n\n{exc}"


__all__ = ["build_markdown", "newest_evidence"]
