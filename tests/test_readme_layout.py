"""README's layout table has a row for every package of ``seat_console`` (issue 33: it had
none for ``exporter/`` or ``fleet/``)."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_every_package_has_a_layout_row() -> None:
    readme = (ROOT / "README.md").read_text("utf-8")
    table = readme[readme.index("## Layout"):]
    table = "\n".join(line for line in table.splitlines() if line.startswith("| `"))
    missing = []
    for d in sorted((ROOT / "console").iterdir()):
        if not (d / "__init__.py").exists():
            continue
        names = (f"`console/{d.name}/`", f"`{d.name}/`")
        if not any(n in table for n in names):
            missing.append(d.name)
    assert not missing, f"README's layout table has no row for: {', '.join(missing)}"
