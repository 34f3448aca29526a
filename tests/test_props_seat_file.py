"""Property tests: the seat-state file (``seat.json``, :mod:`seat_console.core.seat_file`).

Asserted: any text (random, hostile JSON: wrong types, huge numbers, NaN, deep nesting,
surrogates, values in ``env_names``) either parses into a :class:`SeatFile` whose records have the
documented shapes and an aware UTC time, or raises :class:`SeatFileError` naming the file and the
fix; never another exception. A record written by ``to_json`` reads back equal.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from seat_console.core.seat_file import (
    SeatFile,
    SeatFileError,
    parse_seat_file,
    read_seat_file,
)

SRC = "/state/seat.json"
REC = {"name": "seat-resident-promoted-20261205T033000Z", "id": "ab" * 32,
       "image_id": "sha256:" + "c" * 64, "image_ref": "127.0.0.1:15000/seat-backport:x",
       "repo_digests": ["127.0.0.1:15000/seat-backport@sha256:" + "d" * 64],
       "entrypoint": None, "cmd": ["--model", "/m"], "env_names": ["HF_TOKEN", "PATH"],
       "mounts": ["/models:/m:ro"], "gpus": ["GPU-1"], "stop_timeout_s": 30,
       "started_at": "2026-12-05T03:00:00Z", "models": ["lab"]}
GOOD = {"format": 1, "resident": REC, "previous": {**REC, "name": "seat-resident"},
        "promoted_at": "2026-12-05T03:30:00Z", "promoted_by": "op@node",
        "promote_run_id": "promote-1", "swap_run_id": "swap-1", "forced": None,
        "profile": {"source": "/etc/p.toml", "written": False}}

json_leaf = st.one_of(st.none(), st.booleans(), st.integers(-2**70, 2**70),
                      st.floats(allow_nan=False, allow_infinity=False), st.text(max_size=30))
json_value = st.recursive(json_leaf, lambda kids: st.one_of(
    st.lists(kids, max_size=4), st.dictionaries(st.text(max_size=12), kids, max_size=4)),
    max_leaves=20)
fields = sorted(GOOD) + ["resident.name", "resident.id", "resident.image_id",
                         "resident.env_names", "resident.stop_timeout_s", "resident.models",
                         "previous.cmd", "resident.gpus"]


def _set(doc: dict, path: str, value: object) -> dict:
    doc = json.loads(json.dumps(doc))
    parts = path.split(".")
    target = doc
    for p in parts[:-1]:
        if not isinstance(target.get(p), dict):
            target[p] = {}
        target = target[p]
    target[parts[-1]] = value
    return doc


def _check(text: str | bytes) -> None:
    try:
        sf = parse_seat_file(text, SRC)
    except SeatFileError as exc:
        assert str(exc).startswith(SRC + ": ")
        assert "fix:" in str(exc)
        return
    assert isinstance(sf, SeatFile)
    assert sf.promoted_at.tzinfo is not None and sf.promoted_at.utcoffset() == timedelta(0)
    for rec in (sf.resident, sf.previous):
        if rec is None:
            continue
        assert isinstance(rec["name"], str) and rec["image_id"].startswith("sha256:")
        assert all("=" not in n for n in rec["env_names"])
        assert isinstance(rec["stop_timeout_s"], int)
        assert all(isinstance(m, str) for m in rec["models"])


@given(st.text(max_size=200))
def test_any_text_parses_or_is_a_named_error(text):
    _check(text)


@given(st.binary(max_size=200))
def test_any_bytes_parse_or_are_a_named_error(data):
    _check(data)


@given(st.sampled_from(fields), json_value)
def test_hostile_field_values_parse_or_are_a_named_error(path, value):
    _check(json.dumps(_set(GOOD, path, value)))


@given(json_value)
def test_any_json_document_parses_or_is_a_named_error(doc):
    _check(json.dumps(doc))


@pytest.mark.parametrize("text, words", [
    ("[" * 500 + "]" * 500, "nest"),
    ('{"format": 1, "x": NaN}', "NaN"),
    ('{"format": 1, "x": 1e400}', "1e400"),
    (json.dumps(_set(GOOD, "resident.env_names", ["HF_TOKEN=hf_secret"])), "only names"),
    (json.dumps(_set(GOOD, "format", True)), "format"),
    (json.dumps(_set(GOOD, "promoted_at", "2026-12-05T03:30:00")), "ISO 8601 UTC"),
    (json.dumps(_set(GOOD, "resident.image_id", "sha256:abc")), "resident.image_id"),
    (json.dumps(_set(GOOD, "resident.name", "bad name; rm -rf /")), "resident.name"),
    ("", "not valid JSON"),
])
def test_named_refusals(text, words):
    with pytest.raises(SeatFileError) as e:
        parse_seat_file(text, SRC)
    assert str(e.value).startswith(SRC) and words in str(e.value) and "seat.json.prev" in str(e.value)


def test_round_trip_and_absent_file(tmp_path):
    sf = parse_seat_file(json.dumps(GOOD), SRC)
    assert sf.container == REC["name"] and sf.previous["name"] == "seat-resident"
    assert sf.promoted_at == datetime(2026, 12, 5, 3, 30, tzinfo=UTC)
    again = parse_seat_file(json.dumps(sf.to_json()), SRC)
    assert again == sf
    assert read_seat_file(tmp_path / "seat.json") is None
    (tmp_path / "seat.json").write_text("{")
    with pytest.raises(SeatFileError, match=str(tmp_path / "seat.json")):
        read_seat_file(tmp_path / "seat.json")
