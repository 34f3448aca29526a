"""Strict JSON for every ``--json`` output (issue 31): one writer
(:mod:`seat_console.core.jsonout`), a non-finite reading written as ``null`` with its path and
what it was, never ``NaN`` / ``Infinity`` (not JSON: ``jq``, Go and ``JSON.parse`` refuse the
whole document).

* the writer, over any document (hypothesis);
* every front goes through it: no command module, nor the CLI, the web view's or the
  exporter's command, serialises JSON itself (an AST scan: a new command that does fails);
* end to end: ``exporter --json`` with a reading of ``+Inf``, and ``fleet --json`` against a
  Prometheus answering ``+Inf`` (it wrote ``Infinity`` before: failed on the old code)."""

from __future__ import annotations

import ast
import json
import math
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from seat_console import cli
from seat_console.core.jsonout import NON_FINITE_KEY, dumps, strict

ROOT = Path(__file__).resolve().parents[1]
FRONTS = [ROOT / "console" / "cli.py", ROOT / "console" / "serve" / "command.py",
          ROOT / "console" / "exporter" / "cmd.py",
          *sorted((ROOT / "console" / "commands").glob("*.py"))]


def _refuse(name: str) -> None:
    raise AssertionError(f"{name} is not JSON")


def strict_loads(text: str):  # noqa: ANN201
    """``json.loads`` that refuses ``NaN`` / ``Infinity`` / ``-Infinity``, as RFC 8259 does."""
    return json.loads(text, parse_constant=_refuse)


floats = st.floats(allow_nan=True, allow_infinity=True)
docs = st.recursive(st.none() | st.booleans() | st.integers() | floats | st.text(max_size=5),
                    lambda c: st.lists(c, max_size=4) | st.tuples(c, c)
                    | st.dictionaries(st.text(max_size=4), c, max_size=4), max_leaves=25)


def _same_but_unknown(a, b) -> bool:  # noqa: ANN001
    """``b`` (read back) is ``a`` with every non-finite float as ``None``."""
    if isinstance(a, float) and not math.isfinite(a):
        return b is None
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and all(
            _same_but_unknown(a[k], b[k]) for k in a)
    if isinstance(a, list | tuple):
        return isinstance(b, list) and len(a) == len(b) and all(
            _same_but_unknown(x, y) for x, y in zip(a, b, strict=True))
    return a == b


def _count(d) -> int:  # noqa: ANN001
    if isinstance(d, float):
        return 0 if math.isfinite(d) else 1
    if isinstance(d, dict):
        return sum(_count(v) for v in d.values())
    if isinstance(d, list | tuple):
        return sum(_count(v) for v in d)
    return 0


@given(docs, st.sampled_from([None, 1, 2]))
@example({"rows": [{"kv_usage": math.inf, "running": math.nan}]}, 1)
@example([-math.inf], None)
@example(math.nan, None)
def test_writer_writes_strict_json_unknown_as_null_with_the_path(doc, indent):
    text = dumps(doc, indent=indent)
    back = strict_loads(text)
    n = _count(doc)
    if isinstance(doc, dict):
        if n:
            listed = back.pop(NON_FINITE_KEY)
            assert len(listed) == n and set(listed.values()) <= {"NaN", "+Inf", "-Inf"}
        else:
            assert NON_FINITE_KEY not in back or NON_FINITE_KEY in doc
    assert _same_but_unknown(doc, back)
    assert len(strict(doc)[1]) == n


def test_writer_paths_name_the_value_and_leave_the_input_unchanged():
    doc = {"rows": [{"kv_usage": math.inf}, {"running": -math.inf, "x": (1.0, math.nan)}]}
    back = strict_loads(dumps(doc, indent=1))
    assert back[NON_FINITE_KEY] == {"rows[0].kv_usage": "+Inf", "rows[1].running": "-Inf",
                                    "rows[1].x[1]": "NaN"}
    assert back["rows"] == [{"kv_usage": None}, {"running": None, "x": [1.0, None]}]
    assert math.isinf(doc["rows"][0]["kv_usage"])          # the caller's data untouched
    deep: list = [math.nan]
    for _ in range(5000):                                  # strict() does not recurse
        deep = [deep]
    assert strict(deep)[1] == {"[0]" * 5000 + "[0]": "NaN"}
    shallow: list = [math.inf]
    for _ in range(200):
        shallow = [shallow]
    assert dumps([shallow, math.nan]).endswith("[null]" + "]" * 200 + ", null]")


def test_a_default_converter_returning_a_non_finite_float_is_made_strict():
    class Odd:
        pass

    back = strict_loads(dumps({"a": Odd()}, default=lambda o: math.inf))
    assert back["a"] is None


def _json_serialisations(path: Path) -> list[str]:
    """Calls in ``path`` that serialise JSON other than through jsonout: ``json.dumps``,
    ``json.dump``, ``orjson.dumps``, ``.model_dump_json()`` (outside ``json.loads(...)``)."""
    tree = ast.parse(path.read_text("utf-8"))
    inside_loads: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                and node.func.attr == "loads":
            inside_loads |= {id(n) for n in ast.walk(node)}
    out = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Attribute):
            continue
        f = node.func
        owner = f.value.id if isinstance(f.value, ast.Name) else ""
        if (owner in ("json", "orjson") and f.attr in ("dumps", "dump")) or (
                f.attr == "model_dump_json" and id(node) not in inside_loads):
            out.append(f"{path.relative_to(ROOT)}:{node.lineno}: {owner}.{f.attr}")
    return out


def test_every_front_writes_json_through_the_one_writer():
    assert len(FRONTS) > 15
    found = [hit for p in FRONTS for hit in _json_serialisations(p)]
    assert not found, ("--json output must go through seat_console.core.jsonout.dumps "
                       f"(strict: NaN/Infinity as null): {found}")


# -- end to end -----------------------------------------------------------------------------
PROFILE = """[resident]
name = "r"
[timers]
conformance = ["a.timer"]
[[silence.matchers]]
name = "instance"
value = "127.0.0.1:8000"
"""


def test_exporter_json_with_an_infinite_reading_writes_null(tmp_path, capsys):
    from seat_console.core.profile import load_profile
    from seat_console.exporter.cmd import once
    from seat_console.exporter.collector import Exporter
    from seat_console.exporter.model import LeaseValue, SilenceValue

    f = tmp_path / "p.toml"
    f.write_text(PROFILE)
    noop = lambda: None  # noqa: E731
    exp = Exporter(load_profile(str(f)), "0.1.0", readers={
        "lease": lambda loaded: ((lambda: LeaseValue((math.inf,))), noop),
        "silences": lambda loaded: ((lambda: SilenceValue((math.nan,))), noop)}, groups={})
    once(exp, True, 5.0)
    doc = strict_loads(capsys.readouterr().out)
    values = {fam["name"]: [s["value"] for s in fam["samples"]] for fam in doc["families"]}
    assert values["seat_hold_expiry_timestamp_seconds"] == [None]
    assert values["seat_silence_end_timestamp_seconds"] == [None]
    assert sorted(doc[NON_FINITE_KEY].values()) == ["+Inf", "NaN"]


class _InfProm(BaseHTTPRequestHandler):
    """A Prometheus whose every moving number is ``+Inf`` (one seat, ``a:1``, current)."""

    def do_POST(self) -> None:  # noqa: N802 - http.server's name
        q = parse_qs(self.rfile.read(int(self.headers["Content-Length"])).decode())["query"][0]
        now = time.time()
        if "timestamp(seat_engine_up)" in q and "label_replace" not in q:
            res = [{"metric": {"instance": "a:1"}, "value": [now, repr(now)]}]
        elif "seat_info" in q:
            res = [{"metric": {"instance": "a:1", "node": "a"}, "value": [now, "1"]}]
        elif "vllm:num_requests_running" in q:
            res = [{"metric": {"instance": "a:1", "part": "requests",
                               "__name__": "vllm:num_requests_running"}, "value": [now, "+Inf"]},
                   {"metric": {"instance": "a:1", "part": "kv"}, "value": [now, "+Inf"]}]
        else:
            res = []
        body = json.dumps({"status": "success", "data": {"resultType": "vector",
                                                         "result": res}}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args) -> None:  # noqa: ANN002
        pass


@pytest.fixture
def inf_prom():  # noqa: ANN201
    srv = ThreadingHTTPServer(("127.0.0.1", 0), _InfProm)
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    yield f"http://127.0.0.1:{srv.server_address[1]}"
    srv.shutdown()
    srv.server_close()


def test_fleet_json_with_inf_from_prometheus_is_strict_json_unknown_with_reasons(inf_prom,
                                                                                 capsys):
    rc = cli.main(["fleet", "--json", "--prometheus", inf_prom, "--alertmanager", "none"])
    out = capsys.readouterr().out
    doc = strict_loads(out)                     # wrote Infinity before: not JSON
    assert doc["ok"] is True and rc in (0, 3)
    (row,) = doc["rows"]
    assert row["running"] is None and row["kv_usage"] is None
    assert any("requests running" in u and "+Inf" in u for u in row["unknown"])
    assert any("KV cache usage" in u for u in row["unknown"])


def test_the_readonly_refusal_in_json_is_strict(capsys):
    assert cli.main(["--readonly", "hold", "--json", "--ttl", "10m", "--reason", "x"]) == 2
    strict_loads(capsys.readouterr().out.splitlines()[0])
