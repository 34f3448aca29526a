"""The layer contract is a test: ``[tool.importlinter]`` in pyproject.toml, run by import-linter
(grimp's graph: every import, those inside functions included).

* the package as it is keeps every contract;
* a probe that hides a forbidden import inside a function — Textual in the core, a source in
  the core, an action in the probe — breaks it (on a copy of the tree, so the repo is not
  touched): the contract sees function-level imports, and the test could fail;
* the ``packages`` list of pyproject.toml names every package folder (a missing sub-package
  once shipped a wheel without ``seat_console.commands``).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text("utf-8"))


def _lint(tree: Path, config: Path) -> subprocess.CompletedProcess[str]:
    """``lint-imports`` over the ``seat_console`` package found first on ``tree`` (the real
    package when ``tree`` is the repo: the editable install; a copy otherwise)."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["PYTHONPATH"] = str(tree)
    code = ("import sys; from importlinter.cli import lint_imports; "
            f"sys.exit(lint_imports(config_filename={str(config)!r}, no_cache=True, "
            "no_logo=True))")
    return subprocess.run([sys.executable, "-c", code], cwd=tree, env=env, capture_output=True,
                          text=True, timeout=300)


def _copy_package(tmp_path: Path) -> Path:
    """The package as the wheel lays it out (``seat_console/`` with ``widgets/`` and
    ``actions/`` inside) under ``tmp_path``, with the project's pyproject.toml."""
    ignore = shutil.ignore_patterns("__pycache__")
    pkg = tmp_path / "seat_console"
    shutil.copytree(ROOT / "console", pkg, ignore=ignore, symlinks=False)
    for sub in ("widgets", "actions"):   # the symlinks were followed; the real folders win
        shutil.rmtree(pkg / sub, ignore_errors=True)
        shutil.copytree(ROOT / sub, pkg / sub, ignore=ignore)
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    return tmp_path


def test_the_package_keeps_every_contract() -> None:
    cp = _lint(ROOT, ROOT / "pyproject.toml")
    out = cp.stdout + cp.stderr
    assert cp.returncode == 0, out
    assert "0 broken" in out and "BROKEN" not in out


def test_the_contract_counts_imports_inside_functions() -> None:
    cfg = PYPROJECT["tool"]["importlinter"]
    assert cfg["include_external_packages"] is True
    assert not cfg.get("exclude_type_checking_imports", False)
    kinds = {c["type"] for c in cfg["contracts"]}
    assert {"layers", "forbidden", "acyclic_siblings"} <= kinds


PROBES = [
    # (file, the function appended to it, what the broken contract must name)
    ("core/fmt.py", "def _probe():\n    import textual\n    return textual\n",
     ["Below the fronts nothing imports Textual or Rich BROKEN", "seat_console.core.fmt"]),
    ("node/runner.py", "def _probe():\n    from rich.text import Text\n    return Text\n",
     ["Below the fronts nothing imports Textual or Rich BROKEN", "seat_console.node.runner"]),
    ("core/base.py", "def _probe():\n    from seat_console.sources import gpu\n    return gpu\n",
     ["Layers: each layer imports only the layers below it BROKEN",
      "seat_console.core.base -> seat_console.sources.gpu"]),
    ("probe/run.py",
     "def _probe():\n    from seat_console.actions import journal\n    return journal\n",
     ["Layers: each layer imports only the layers below it BROKEN",
      "seat_console.probe.run -> seat_console.actions.journal"]),
    ("fit/budget.py",
     "def _probe():\n    from seat_console.sources import checkpoint\n    return checkpoint\n",
     ["Layers: each layer imports only the layers below it BROKEN",
      "seat_console.fit.budget -> seat_console.sources.checkpoint"]),
]


@pytest.mark.parametrize("rel, probe, named", PROBES, ids=[p[0] for p in PROBES])
def test_a_forbidden_import_inside_a_function_breaks_the_contract(
        tmp_path: Path, rel: str, probe: str, named: list[str]) -> None:
    tree = _copy_package(tmp_path)
    target = tree / "seat_console" / rel
    target.write_text(target.read_text("utf-8") + "\n\n" + probe, "utf-8")
    cp = _lint(tree, tree / "pyproject.toml")
    out = cp.stdout + cp.stderr
    assert cp.returncode != 0, out
    for text in named:
        assert text in out, out


def test_the_copy_without_a_probe_keeps_the_contracts(tmp_path: Path) -> None:
    """The probes' baseline: the copied tree alone is green (a probe's failure is its own)."""
    tree = _copy_package(tmp_path)
    cp = _lint(tree, tree / "pyproject.toml")
    assert cp.returncode == 0, cp.stdout + cp.stderr


def _package_folders() -> set[str]:
    """Dotted names of every package folder, by pyproject's ``package-dir`` mapping."""
    mapping = PYPROJECT["tool"]["setuptools"]["package-dir"]   # name -> folder
    names: set[str] = set()
    for name, folder in mapping.items():
        base = ROOT / folder
        for init in base.rglob("__init__.py"):
            rel = init.parent.relative_to(base)
            if any(p == "__pycache__" for p in rel.parts):
                continue
            if rel.parts and (base / rel.parts[0]).is_symlink():
                continue   # console/widgets, console/actions: the mapped folders themselves
            names.add(".".join([name, *rel.parts]))
    return names


def test_the_packages_list_names_every_package_folder() -> None:
    listed = set(PYPROJECT["tool"]["setuptools"]["packages"])
    found = _package_folders()
    assert found, "no package folder found"
    assert not found - listed, f"package folders missing from pyproject's packages: {sorted(found - listed)}"
    assert not listed - found, f"pyproject lists packages with no folder: {sorted(listed - found)}"


def test_every_folder_with_modules_is_a_package() -> None:
    """A folder of modules without ``__init__.py`` would be a namespace package that the
    ``packages`` list cannot name (and the wheel would leave out)."""
    bare = []
    for top in ("console", "widgets", "actions"):
        for py in (ROOT / top).rglob("*.py"):
            d = py.parent
            if "__pycache__" in d.parts or any((ROOT / top / p).is_symlink()
                                               for p in d.relative_to(ROOT / top).parts[:1]):
                continue
            if not (d / "__init__.py").is_file():
                bare.append(str(d.relative_to(ROOT)))
    assert not bare, f"folders with modules but no __init__.py: {sorted(set(bare))}"
