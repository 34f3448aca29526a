"""The distribution holds every package and data file the console needs.

The test command installs the project editable, which hides a package missing from the wheel
(``seat_console.commands`` once was: ``pip install . && seat-console`` then failed with
ModuleNotFoundError). Build the real wheel and compare it with the source tree.
"""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_wheel_contains_every_module_and_the_default_profile(tmp_path: Path) -> None:
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps",
                    "-q", "-w", str(tmp_path), str(ROOT)], check=True, capture_output=True,
                   timeout=300)
    (wheel,) = tmp_path.glob("seat_console-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    # The folders map onto one import name (pyproject's package-dir): console/ is seat_console/,
    # widgets/ and actions/ are seat_console/widgets/ and seat_console/actions/.
    where = {"console": "seat_console", "widgets": "seat_console/widgets",
             "actions": "seat_console/actions"}
    expected = {f"{where[pkg]}/{p.relative_to(ROOT / pkg).as_posix()}"
                for pkg in where
                for p in (ROOT / pkg).rglob("*.py") if "__pycache__" not in p.parts}
    assert expected, "no sources found"
    missing = sorted(expected - names)
    assert not missing, f"modules missing from the wheel: {missing}"
    assert "seat_console/default_profile.toml" in names
    assert "seat_console/probe/prompts.json" in names   # the probe's shipped prompt set
    entry = next(n for n in names if n.endswith("entry_points.txt"))
    assert "seat-console = seat_console.cli:main" in zipfile.ZipFile(wheel).read(entry).decode()


def test_the_console_runs_outside_the_source_tree(tmp_path: Path) -> None:
    """From another folder the folder name ``console/`` is not importable: everything must go
    through the import name ``seat_console`` (the default profile once was read with
    ``resources.files("console")``, which only worked with the repo as the working directory)."""
    env = {k: v for k, v in __import__("os").environ.items()
           if k not in ("PYTHONPATH", "SEAT_CONSOLE_PROFILE")}
    env["XDG_CONFIG_HOME"] = str(tmp_path / "xdg")
    cp = subprocess.run([sys.executable, "-m", "seat_console", "profile", "--print-default"],
                        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert cp.returncode == 0, cp.stderr
    assert "[seat]" in cp.stdout
    cp = subprocess.run([sys.executable, "-c", "import console"], cwd=tmp_path, env=env,
                        capture_output=True, text=True, timeout=60)
    assert cp.returncode != 0, "a top-level 'console' module is importable outside the tree"
