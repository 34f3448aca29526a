"""Property tests: the seat profile TOML (``parse_profile``), issue #12.

Asserted for any text: a :class:`Profile` or a :class:`ProfileError` naming the file, never
another exception (RecursionError, ValueError from a date, MemoryError from a long dotted key);
no parse over the 1 s deadline; unknown keys refused at every level, nested tables included;
regexes (silence matchers, ``ple_tensor_pattern``) must be valid RE2.
"""

from __future__ import annotations

import re
import time

import pytest
from hypothesis import given
from hypothesis import strategies as st

from seat_console.core.profile import (
    MAX_PROFILE_CHARS,
    Profile,
    ProfileError,
    default_profile_text,
    parse_profile,
)

SRC = "/etc/seat/hostile.toml"
DEFAULT = default_profile_text()
VALUE_LINES = [i for i, line in enumerate(DEFAULT.splitlines())
               if re.match(r"^[a-z_]+ *= *", line)]

weird_literals = st.sampled_from([
    "nan", "+inf", "-inf", "1e400", "-1", "0", "true", "false", "[]", "{}", '""', '"x"',
    "1979-05-27T07:32:00", "1979-05-27", "07:32:00", "2026-13-01T00:00:00Z",
    "99999999999999999999999999999", "0x7fffffffffffffff", "[[[[1]]]]", "{a = {b = 1}}",
    '"(?<=a)b"', "'(.*){18}x'", '"\\u0000"', "'" + "9" * 5000 + "'",
])


def _check(text: str) -> Profile | None:
    t0 = time.perf_counter()
    try:
        p = parse_profile(text, SRC)
    except ProfileError as exc:
        assert str(exc).startswith(SRC), exc
        p = None
    assert time.perf_counter() - t0 < 10.0   # no hang: a generous bound (CI runs loaded)
    return p


@given(st.text(max_size=400))
def test_any_text_is_a_profile_or_a_profile_error_naming_the_file(text):
    _check(text)


@given(st.sampled_from(VALUE_LINES), weird_literals)
def test_one_value_of_the_default_replaced_by_a_hostile_literal(line_no, literal):
    lines = DEFAULT.splitlines()
    key = lines[line_no].split("=", 1)[0]
    lines[line_no] = f"{key}= {literal}"
    p = _check("\n".join(lines))
    if p is not None:  # accepted: the sizes/lengths are still within their bounds
        assert 0 < p.seat.gpu_memory_utilization <= 1
        assert p.seat.max_model_len >= 1


@pytest.mark.parametrize("text,words", [
    ("a=" + "[" * 3000 + "]" * 3000, "nest too deeply"),
    ("x = " + "{a = " * 40 + "1" + "}" * 40, "deeper than 16"),
    ("a." * 40000 + "b = 1", "more than 32 parts"),
    ("[" + ".".join(["t"] * 20000) + "]", "more than 32 parts"),
    ("# " + "x" * (MAX_PROFILE_CHARS + 1), "character limit"),
    ("a = 2026-13-01", "not valid TOML"),
])
def test_hostile_shapes_are_refused_quickly_with_a_reason(text, words):
    t0 = time.perf_counter()
    with pytest.raises(ProfileError, match=re.escape(words)) as e:
        parse_profile(text, SRC)
    assert str(e.value).startswith(SRC)
    assert time.perf_counter() - t0 < 10.0   # no hang: a generous bound (CI runs loaded)


def _tables(text: str) -> list[tuple[int, str]]:
    """(line index, dotted key path of the table's first entry) of every table header of
    ``text``; an array of tables (``[[a.b]]``) gets index ``0`` (``a.b.0``) for its first."""
    out, seen = [], set()
    for i, line in enumerate(text.splitlines()):
        m = re.match(r"^(\[\[?)([a-z_.]+)\]\]?", line)
        if m and m.group(2) not in seen:
            seen.add(m.group(2))
            out.append((i, m.group(2) + (".0" if m.group(1) == "[[" else "")))
    return out


@pytest.mark.parametrize("line,table", _tables(DEFAULT))
def test_unknown_key_refused_in_every_table_including_nested_ones(line, table):
    """Unknown keys were only tested at the top level: a typo in `[[silence.matchers]]`
    (`is_regexp = true`) must be refused, not silently ignored."""
    lines = DEFAULT.splitlines()
    lines.insert(line + 1, "surely_not_a_key = 1")
    with pytest.raises(ProfileError) as e:
        parse_profile("\n".join(lines), SRC)
    assert f"{table}.surely_not_a_key: unknown key" in str(e.value)


def test_matcher_typo_in_nested_table_is_refused():
    text = DEFAULT.replace("[[silence.matchers]]", "[[silence.matchers]]\nis_regexp = true", 1)
    with pytest.raises(ProfileError, match=r"silence\.matchers\.0\.is_regexp: unknown key"):
        parse_profile(text, SRC)


@pytest.mark.parametrize("pattern", [r"(?<=seat)-node", r"(a)\1", "[", r"a++"])
def test_regex_matcher_must_be_re2(pattern):
    text = DEFAULT.replace("[[silence.matchers]]",
                           f"[[silence.matchers]]\nname = \"instance\"\nvalue = '{pattern}'\n"
                           "is_regex = true\n[[silence.matchers]]", 1)
    with pytest.raises(ProfileError, match=r"silence\.matchers\.0.*not a valid RE2"):
        parse_profile(text, SRC)


def test_re2_only_matcher_syntax_is_accepted():
    text = DEFAULT.replace("[[silence.matchers]]",
                           "[[silence.matchers]]\nname = \"instance\"\n"
                           "value = 'seat-node:8000\\z'\nis_regex = true\n[[silence.matchers]]",
                           1)
    p = parse_profile(text, SRC)
    assert p.silence.matchers[0].value == r"seat-node:8000\z"


@pytest.mark.parametrize("pattern", [r"(?<=x)embed", r"(\w+\.?)*\1x$"])
def test_ple_pattern_must_be_re2(pattern):
    text = DEFAULT.replace("[candidate]", f"[candidate]\nple_tensor_pattern = '{pattern}'", 1)
    with pytest.raises(ProfileError, match=r"candidate\.ple_tensor_pattern.*RE2"):
        parse_profile(text, SRC)


def test_a_5000_digit_size_is_refused_by_name_not_an_overflow():
    text = re.sub(r'(?m)^weights_bytes_per_rank = .*$',
                  'weights_bytes_per_rank = "' + "9" * 5000 + '"', DEFAULT, count=1)
    with pytest.raises(ProfileError, match=r"weights_bytes_per_rank: .*5,000 characters"):
        parse_profile(text, SRC)


@pytest.mark.parametrize(("gpus", "ok"), [('["0"]', False), ('["0", "1"]', True)])
def test_fewer_cards_than_tensor_parallel_size_is_refused(gpus, ok):
    text = re.sub(r"(?m)^gpus = .*$", f"gpus = {gpus}", DEFAULT, count=1)
    text = re.sub(r"(?m)^tensor_parallel_size = .*$", "tensor_parallel_size = 2", text, count=1)
    if ok:
        assert parse_profile(text, SRC).seat.tensor_parallel_size == 2
    else:
        with pytest.raises(ProfileError, match="needs at least that many cards in node.gpus"):
            parse_profile(text, SRC)


@pytest.mark.parametrize("key", ["tensor_parallel_size", "max_num_seqs",
                                 "gpu_memory_utilization", "weights_bytes_per_rank",
                                 "refresh_interval_s"])
def test_a_boolean_is_not_a_number(key):
    """pydantic reads `tensor_parallel_size = true` as 1: refused, naming the key."""
    text = re.sub(rf"(?m)^{key} = .*$", f"{key} = true", DEFAULT, count=1)
    with pytest.raises(ProfileError, match=rf"{key} = true: a boolean where a"):
        parse_profile(text, SRC)


def test_a_boolean_key_still_takes_a_boolean():
    text = re.sub(r"(?m)^verify_tls = .*$", "verify_tls = false", DEFAULT, count=1)
    assert parse_profile(text, SRC).alertmanager.verify_tls is False


@pytest.mark.parametrize("literal", ["nan", "+inf", "-inf"])
def test_a_non_finite_number_is_said_to_be_one(literal):
    """``refresh_interval_s = nan`` was refused as "less than or equal to 3600 (got nan)",
    which reads as if nan were too large."""
    text = DEFAULT.replace("refresh_interval_s = 1.0", f"refresh_interval_s = {literal}")
    assert text != DEFAULT
    with pytest.raises(ProfileError) as got:
        parse_profile(text, SRC)
    msg = str(got.value)
    assert msg.startswith(SRC) and "console.refresh_interval_s: must be a finite number, not " \
        f"{float(literal)!r}" in msg, msg
