"""One of each (issue 33, item 2): the code has one place for each generic thing, and this test
keeps it grep-true. A second copy added later fails here, naming the file and line and where the
one place is:

* one GiB constant, :data:`seat_console.core.fmt.GIB` (no ``2**30`` / ``1 << 30`` /
  ``1073741824`` outside ``core/``);
* one Prometheus text parser, :func:`seat_console.core.promtext.parse_families` (the only code
  naming ``prometheus_client.parser`` or its ``text_string_to_metric_families``).

Scans the package's source (``console/``, ``actions/``, ``widgets/``) as text, comments and
docstrings included in the scan only where a rule says so.
"""

from __future__ import annotations

import io
import re
import tokenize
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "console"


def sources() -> Iterator[Path]:
    """Every module of the package, once (``console/actions`` and ``console/widgets`` are links
    to ``actions/`` and ``widgets/``)."""
    seen: set[Path] = set()
    for p in sorted(PACKAGE.rglob("*.py")):
        real = p.resolve()
        if real not in seen:
            seen.add(real)
            yield p


def rel(p: Path) -> str:
    """``p`` as the package names it (``console/…``)."""
    return p.relative_to(PACKAGE).as_posix()


def code_lines(p: Path) -> Iterator[tuple[int, str]]:
    """``(line number, text)`` of the code of ``p``: comments and string literals blanked (a
    docstring may say "2^30"; only code counts)."""
    src = p.read_text(encoding="utf-8")
    lines = src.splitlines()
    blank: dict[int, list[tuple[int, int]]] = {}
    for tok in tokenize.generate_tokens(io.StringIO(src).readline):
        if tok.type in (tokenize.COMMENT, tokenize.STRING):
            (r0, c0), (r1, c1) = tok.start, tok.end
            for r in range(r0, r1 + 1):
                a = c0 if r == r0 else 0
                b = c1 if r == r1 else len(lines[r - 1])
                blank.setdefault(r, []).append((a, b))
    for i, line in enumerate(lines, 1):
        chars = list(line)
        for a, b in blank.get(i, ()):
            chars[a:b] = " " * (b - a)
        yield i, "".join(chars)


def hits(pattern: str, *, allowed: tuple[str, ...] = ()) -> list[str]:
    """``file:line: text`` of every code line matching ``pattern`` outside the ``allowed``
    module paths / folders (``core/``)."""
    rx = re.compile(pattern)
    out = []
    for p in sources():
        name = rel(p)
        if any(name == a or (a.endswith("/") and name.startswith(a)) for a in allowed):
            continue
        for i, line in code_lines(p):
            if rx.search(line):
                out.append(f"{name}:{i}: {line.strip()}")
    return out


GIB_LITERAL = r"\b2\s*\*\*\s*30\b|\b1\s*<<\s*30\b|\b1_?073_?741_?824\b"


def test_one_gib_constant() -> None:
    """GiB is :data:`seat_console.core.fmt.GIB`; code elsewhere imports it (it was defined five
    times: fit/engine_rules, sources/startup_log, fleet/rows, core/profile, widgets/gpu)."""
    found = hits(GIB_LITERAL, allowed=("core/fmt.py",))
    assert not found, ("a GiB literal outside core/fmt.py (import GIB from "
                       "seat_console.core.fmt):\n" + "\n".join(found))


def test_the_scan_sees_a_literal(tmp_path: Path) -> None:
    """The scanner itself: a literal in code is seen, one in a docstring or comment is not."""
    p = tmp_path / "m.py"
    p.write_text('"""2**30 in a docstring"""\nX = 1 << 30  # 2**30\nY = "1 << 30"\n')
    got = [(i, t.strip()) for i, t in code_lines(p) if re.search(GIB_LITERAL, t)]
    assert got == [(2, "X = 1 << 30")]


def test_one_prometheus_text_parser() -> None:
    """Every scrape goes through core/promtext.parse_families (the engine source, the probe's
    counters and the engine histograms each called prometheus_client's parser on their own)."""
    found = hits(r"text_string_to_metric_families|prometheus_client\.parser|"
                 r"prometheus_client\s+import\s+parser", allowed=("core/promtext.py",))
    assert not found, ("a second Prometheus text parser (use seat_console.core.promtext."
                       "parse_families):\n" + "\n".join(found))
