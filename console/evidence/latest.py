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
    saying there is nothing to show / why it cannot be read. It opens with where it was read
    (the directory, and the data dir it is the newest of) and the command that prints it: the
    trial could not tell which run the screen showed. Blocking: call from a worker."""
    import shlex

    from seat_console.core.paths import data_dir
    from seat_console.evidence import report as rp
    from seat_console.evidence.runs import RunError

    base = data_root or data_dir()
    newest = target is None
    target = target or newest_evidence(base)
    if target is None:
        return ("# No evidence yet\n\nNo comparison or probe run is kept in the data dir "
                f"`{base}`. Run `seat-console compare --bracket ABBA` (or a probe) first.")
    kind = "comparison" if (target / "compare.json").is_file() else "probe run"
    where = (f"Read from `{target}`" + (f", the newest {kind} in `{base}`" if newest else "")
             + f"; `seat-console report {shlex.quote(str(target))}` prints it.\n\n")
    try:
        return where + rp.render_markdown(rp.build_report(rp.load_inputs([str(target)])))
    except RunError as exc:
        return f"# The report cannot be built\n\n{where}{exc}"


__all__ = ["build_markdown", "newest_evidence"]
