"""One of each (issue 33, item 2): the code has one place for each generic thing, and this test
keeps it grep-true. A second copy added later fails here, naming the file and line and where the
one place is:

* one GiB constant, :data:`seat_console.core.fmt.GIB` (no ``2**30`` / ``1 << 30`` /
  ``1073741824`` outside ``core/``);
* one Prometheus text parser, :func:`seat_console.core.promtext.parse_families` (the only code
  naming ``prometheus_client.parser`` or its ``text_string_to_metric_families``);
* one engine client, :class:`seat_console.node.engine_client.EngineClient`: no other module
  calls an engine path (``/health``, ``/v1/models``, ``/metrics``, ``/is_paused``…) over HTTP
  or builds an engine URL, no other module names ``"/health"`` at all, and ``httpx`` is
  imported only where :data:`HTTPX_ALLOWED` says why;
* one place that reads the journal's SQL, ``actions/journal.py`` (no other module opens an
  SQLite file or names the ``entries`` table), with one exception below the actions layer
  (:data:`JOURNAL_SQL_ALLOWED`);
* one duration formatter, :func:`seat_console.core.fmt.fmt_duration` (its styles): no f-string
  outside ``core/fmt.py`` writes a value followed by a unit of minutes, hours or days;
* one byte formatter, :func:`seat_console.core.fmt.gib` (and its ``gib_unit`` / ``gib_b``): no
  code outside ``core/`` divides by a GiB or MiB constant (:data:`BYTES_ALLOWED` says why not).

Scans the package's source (``console/``, ``actions/``, ``widgets/``) as text, comments and
docstrings included in the scan only where a rule says so.
"""

from __future__ import annotations

import ast
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


ENGINE_PATHS = ("/health", "/version", "/v1/models", "/metrics", "/v1/completions",
                "/v1/chat/completions", "/is_paused", "/is_sleeping", "/pause", "/resume",
                "/reset_prefix_cache")
HTTP_CALLS = {"get", "post", "put", "delete", "head", "request", "stream", "urlopen", "send"}
ENGINE_CLIENT = "node/engine_client.py"

HTTPX_ALLOWED = {
    ENGINE_CLIENT: "the one engine client",
    "node/alertmanager.py": "the one Alertmanager client (not the engine)",
    "probe/client.py": "the probe's load generator: its measured async transport (streams)",
    "probe/hotpath.py": "the probe's hot path: httpx.URL only (the stream is httptools)",
    "probe/run.py": "the probe's AsyncClient passed to get_async / post_async (types)",
    "probe/engine_counters.py": "the probe's AsyncClient passed to get_async (a type)",
}
"""Modules that may import httpx, and why."""


def _docstrings(tree: ast.AST) -> set[int]:
    out = set()
    for n in ast.walk(tree):
        if isinstance(n, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) \
                and n.body and isinstance(n.body[0], ast.Expr) \
                and isinstance(n.body[0].value, ast.Constant):
            out.add(id(n.body[0].value))
    return out


def _ends_with_path(node: ast.AST) -> str | None:
    """The engine path a string or f-string ends with (``f"{base}/health"``), else None."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        text = node.value
    elif isinstance(node, ast.JoinedStr) and node.values and isinstance(
            node.values[-1], ast.Constant):
        text = str(node.values[-1].value)
    else:
        return None
    return next((p for p in ENGINE_PATHS if text.endswith(p)), None)


def engine_calls(src: str) -> list[tuple[int, str]]:
    """``(line, what)`` for each HTTP call to an engine path in ``src`` (a call named
    get/post/stream/… with a string or f-string argument ending in one), each ``"/health"``
    literal outside a docstring, and each f-string that builds an engine URL (``f"{base}/health"``
    as a value, not a sentence)."""
    tree = ast.parse(src)
    docs = _docstrings(tree)
    out = []
    for n in ast.walk(tree):
        if isinstance(n, ast.Call):
            name = n.func.attr if isinstance(n.func, ast.Attribute) else getattr(n.func, "id", "")
            if name in HTTP_CALLS:
                for a in [*n.args, *(k.value for k in n.keywords)]:
                    if (p := _ends_with_path(a)) is not None:
                        out.append((n.lineno, f"{name}(… {p})"))
        elif isinstance(n, ast.Constant) and n.value == "/health" and id(n) not in docs:
            out.append((n.lineno, '"/health"'))
        elif isinstance(n, ast.JoinedStr) and len(n.values) == 2 and isinstance(
                n.values[0], ast.FormattedValue) and isinstance(n.values[1], ast.Constant) \
                and n.values[1].value in ENGINE_PATHS:
            out.append((n.lineno, f"an engine URL f\"{{…}}{n.values[1].value}\""))
    return sorted(dict(out).items())    # one finding per line


def test_one_engine_client() -> None:
    """Every caller reaches the engine through node/engine_client.EngineClient (five
    implementations did: the engine source, the exporter, swap/promote, the drain, the probe's
    side calls; /health was read three ways)."""
    found = [f"{rel(p)}:{i}: {what}" for p in sources() if rel(p) != ENGINE_CLIENT
             for i, what in engine_calls(p.read_text(encoding="utf-8"))]
    assert not found, ("the engine reached outside seat_console.node.engine_client (use "
                       "EngineClient, or get_async / post_async on the probe's transport):\n"
                       + "\n".join(found))


def test_httpx_only_where_allowed() -> None:
    found = [f"{rel(p)}:{i}" for p in sources() if rel(p) not in HTTPX_ALLOWED
             for i, line in code_lines(p)
             if re.search(r"^\s*(import httpx\b|from httpx\b)", line)]
    assert not found, ("httpx imported outside the modules allowed (HTTPX_ALLOWED: the engine "
                       "and Alertmanager clients, the probe's transport):\n" + "\n".join(found))


def test_the_engine_scan_sees_the_three_old_health_readers() -> None:
    """The scan finds each way /health was read before (the engine source, the exporter,
    actions/swap), and not a sentence that names it."""
    old = '''
def a(client):
    return client._get("/health")
def b(client, base):
    return client.get(f"{base}/health")
def c(endpoint):
    return httpx.get(f"{endpoint}/health", timeout=3).status_code
def d(endpoint):
    raise StepError(f"{endpoint}/health is not 200")
def e(endpoint):
    return httpx.post(f"{endpoint}/resume", timeout=10.0)
'''
    assert [i for i, _ in engine_calls(old)] == [3, 5, 7, 11]


JOURNAL_SQL_ALLOWED = {
    "actions/journal.py": "the journal",
    "node/attribution.py": "below actions (node may not import actions/journal.py, the layer "
                           "contract): its one read-only query of rows since a time stays here "
                           "until the journal's reading moves below the node layer",
}
"""Modules that may run SQL on the journal, and why."""


def test_one_place_reads_the_journal_sql() -> None:
    """The exporter read the journal raw twice (the unfinished runs' query, and every row for
    the runbook stages); both are actions/journal.py's now (unfinished_heads, ReadOnlyJournal)."""
    found = [f"{rel(p)}:{i}: {line.strip()}" for p in sources()
             if rel(p) not in JOURNAL_SQL_ALLOWED
             for i, line in code_lines(p)
             if re.search(r"sqlite3\.connect\b|\.execute\(|\bimport sqlite3\b.*connect", line)]
    # the SQL itself sits in string literals (blanked by code_lines): look at them too
    for p in sources():
        if rel(p) in JOURNAL_SQL_ALLOWED:
            continue
        src = p.read_text(encoding="utf-8")
        for m in re.finditer(r"\bFROM\s+entries\b", src, re.IGNORECASE):
            found.append(f"{rel(p)}:{src.count(chr(10), 0, m.start()) + 1}: FROM entries")
    assert not found, ("the journal's SQL read outside actions/journal.py (use Journal, "
                       "ReadOnlyJournal or unfinished_heads):\n" + "\n".join(found))


DURATION_UNIT = re.compile(r"^\s?(min|h|d|days?|hours?|minutes?)\b")
DURATION_ALLOWED = {
    "commands/decide_cmd.py": "an estimate, '≈ N min on this node' (whole minutes, never more)",
    "actions/compare.py": "the same estimate where it is made ('≈ N min', 'took 4.2 min')",
    "actions/hold.py": "the TTL limit in the refusal, 'between 60 s and 7 days' (a constant)",
}


def duration_fstrings(src: str) -> list[int]:
    """Lines of f-strings that write a value followed by a minutes / hours / days unit
    (``f"{m} min {r:02d} s"``, ``f"{s / 3600:.1f} hours"``): a duration formatted by hand."""
    out = []
    for n in ast.walk(ast.parse(src)):
        if isinstance(n, ast.JoinedStr):
            vals = n.values
            if any(isinstance(v, ast.FormattedValue) and isinstance(w, ast.Constant)
                   and DURATION_UNIT.match(str(w.value)) for v, w in zip(vals, vals[1:])):
                out.append(n.lineno)
    return sorted(set(out))


def test_one_duration_formatter() -> None:
    """Durations are written by core/fmt.fmt_duration (eight functions did it beside it:
    snapshot/verdicts, widgets/panel ×2, widgets/services, widgets/gpu, fleet/rows,
    sources/timers, evidence/report)."""
    found = [f"{rel(p)}:{i}" for p in sources()
             if rel(p) != "core/fmt.py" and rel(p) not in DURATION_ALLOWED
             for i in duration_fstrings(p.read_text(encoding="utf-8"))]
    assert not found, ("a duration formatted outside core/fmt.py (use fmt_duration and a "
                       "style):\n" + "\n".join(found))


BYTES_ALLOWED = {
    "commands/gpus_cmd.py": "nvidia-smi's own MiB rule (rounded up), printed beside gib()",
}


def test_one_byte_formatter() -> None:
    """Bytes are shown through core/fmt.gib (the fleet table had its own _gib0 / _gib1, and
    core/profile, commands/status_cmd, widgets/gpu each a wrapper of their own)."""
    found = hits(r"/\s*\(?\s*(GIB|GiB|MIB|MiB)\b", allowed=("core/",))
    found = [f for f in found if f.split(":", 1)[0] not in BYTES_ALLOWED]
    found += hits(r"\bdef\s+(_?gib\d*|_?gib_unit|fmt_gib|fmt_bytes)\s*\(",
                  allowed=("core/fmt.py",))
    assert not found, ("a byte formatter outside core/fmt.py (use gib / gib_unit / gib_b):\n"
                       + "\n".join(found))
