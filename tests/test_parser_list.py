"""The rule "every parser of outside input has property tests and a fuzz target", checked
(issue 31). The list is ``tests/parsers.toml``; this test fails when

* an entry's module or function does not exist (a rename left the list behind);
* an entry's hypothesis test file is missing, does not use hypothesis, or does not import the
  entry's module;
* an entry's fuzz target is not one of ``scripts/fuzz.py``'s targets;
* a module that reads outside input — under a watched folder, or calling a parsing primitive
  (``json.loads``, ``load_json``, ``sqlite3.connect``, ``fromisoformat``…) anywhere under
  ``console/``, ``actions/``, ``widgets/`` — is neither an entry's module nor exempt with a
  reason (a new parser added without its tests).
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
import re
import sys
import tomllib
from functools import cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
LIST = ROOT / "tests" / "parsers.toml"
# the package's folders and their import names (pyproject [tool.setuptools.package-dir])
PACKAGES = {"console": "seat_console", "actions": "seat_console.actions",
            "widgets": "seat_console.widgets"}


@cache
def _list() -> dict:
    return tomllib.loads(LIST.read_text("utf-8"))


def _entries() -> list[dict]:
    return _list()["parser"]


def _module_of(rel: str) -> str:
    """``console/sources/timers.py`` → ``seat_console.sources.timers``."""
    parts = Path(rel).with_suffix("").parts
    name = ".".join((PACKAGES[parts[0]], *parts[1:]))
    return name.removesuffix(".__init__")


def _file_of(module: str) -> str:
    """``seat_console.actions.journal`` → ``actions/journal.py`` (the inverse)."""
    for folder, pkg in sorted(PACKAGES.items(), key=lambda kv: -len(kv[1])):
        if module == pkg or module.startswith(pkg + "."):
            rest = module[len(pkg):].lstrip(".").replace(".", "/")
            return f"{folder}/{rest}.py" if rest else f"{folder}/__init__.py"
    raise AssertionError(module)


def _imports(path: Path) -> set[str]:
    """Every module a file imports, at any depth (inside functions too): ``import a.b`` gives
    ``a.b``; ``from a import b`` gives ``a`` and ``a.b``."""
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text("utf-8"))):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            out.add(node.module)
            out.update(f"{node.module}.{a.name}" for a in node.names)
    return out


@cache
def _fuzz_targets() -> frozenset[str]:
    spec = importlib.util.spec_from_file_location("seat_fuzz", ROOT / "scripts" / "fuzz.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("seat_fuzz", mod)
    spec.loader.exec_module(mod)
    return frozenset(s.name for s in mod._specs())


def _source_modules() -> list[str]:
    """Every module file of the package (relative paths), ``console/actions`` (a link to
    ``actions/``) not counted twice."""
    out = []
    for folder in PACKAGES:
        for p in sorted((ROOT / folder).rglob("*.py")):
            rel = p.relative_to(ROOT).as_posix()
            if rel.startswith("console/actions/") or "/__pycache__/" in rel:
                continue
            out.append(rel)
    return out


def _calls_primitive(path: Path, primitives: list[str]) -> str | None:
    text = path.read_text("utf-8")
    for prim in primitives:
        if re.search(rf"(?<![\w.]){re.escape(prim)}\s*\(", text) or (
                "." not in prim and re.search(rf"\.{re.escape(prim)}\s*\(", text)):
            return prim
    return None


@pytest.mark.parametrize("entry", _entries(), ids=lambda e: e["name"])
def test_each_entry_names_a_real_function(entry):
    mod = importlib.import_module(entry["module"])
    obj = mod
    for part in entry["function"].split("."):
        assert hasattr(obj, part), f"{entry['module']}.{entry['function']}: no {part!r}"
        obj = getattr(obj, part)
    assert callable(obj)


@pytest.mark.parametrize("entry", _entries(), ids=lambda e: e["name"])
def test_each_entry_has_a_hypothesis_test_that_imports_its_module(entry):
    assert entry["tests"], f"{entry['name']}: no test file"
    for rel in entry["tests"]:
        path = ROOT / rel
        assert path.is_file(), f"{entry['name']}: {rel} does not exist"
        imports = _imports(path)
        assert "hypothesis" in imports or any(i.startswith("hypothesis.") for i in imports), (
            f"{rel} does not use hypothesis")
        assert entry["module"] in imports, f"{rel} does not import {entry['module']}"


def test_fuzz_targets_cover_every_entry():
    named = {t for e in _entries() for t in e["fuzz"]}
    missing = sorted(named - _fuzz_targets())
    assert not missing, f"parsers.toml names fuzz targets scripts/fuzz.py lacks: {missing}"
    assert all(e["fuzz"] for e in _entries()), [e["name"] for e in _entries() if not e["fuzz"]]


def test_every_module_that_reads_outside_input_is_listed_or_exempt():
    rule = _list()["rule"]
    listed = {_file_of(e["module"]) for e in _entries()}
    exempt = set(rule["exempt"])
    unknown = sorted(exempt - set(_source_modules()))
    assert not unknown, f"[rule.exempt] names files that do not exist: {unknown}"
    assert not exempt & listed, f"both listed and exempt: {sorted(exempt & listed)}"
    missing = []
    for rel in _source_modules():
        if rel in listed or rel in exempt:
            continue
        watched = any(rel == w or rel.startswith(w.rstrip("/") + "/") for w in rule["watched"])
        prim = _calls_primitive(ROOT / rel, rule["primitives"])
        if watched or prim:
            missing.append(f"{rel} ({'watched' if watched else 'calls ' + prim})")
    assert not missing, (
        "modules that read outside input but are not in tests/parsers.toml (add an entry with "
        "its hypothesis test and fuzz target, or exempt it with the reason): "
        + "; ".join(missing))


def test_the_rule_catches_a_new_parser(tmp_path, monkeypatch):
    """The check can fail: a module calling ``json.loads`` that nobody listed is named."""
    rule = _list()["rule"]
    p = tmp_path / "new_reader.py"
    p.write_text("import json\n\ndef read(t):\n    return json.loads(t)\n")
    assert _calls_primitive(p, rule["primitives"]) == "json.loads"
    q = tmp_path / "quiet.py"
    q.write_text("def f(x):\n    return x.loads_more\n")
    assert _calls_primitive(q, rule["primitives"]) is None


def test_fuzz_target_names_are_unique():
    """``scripts/fuzz.py`` runs the first spec of a name: a second target of the same name
    (two branches adding one each) would silently never run."""
    spec = importlib.util.spec_from_file_location("seat_fuzz", ROOT / "scripts" / "fuzz.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    names = [s.name for s in mod._specs()]
    assert len(names) == len(set(names)), sorted({n for n in names if names.count(n) > 1})
