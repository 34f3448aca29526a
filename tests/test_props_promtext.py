"""Property tests of the one Prometheus text reader, :func:`seat_console.core.promtext.
parse_families` (issue 33): any text gives the library's families or one :class:`ValueError`
whose message starts with the input's name; text above the limit is refused with its size before
it is parsed; values pass through as written (``NaN`` / ``+Inf`` / negative are the caller's to
refuse, never turned into 0); it agrees with ``prometheus_client``'s own parser on every text
that parser accepts.
"""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st
from prometheus_client.parser import text_string_to_metric_families

from seat_console.core.promtext import MAX_TEXT_CHARS, parse_families

NAMES = st.sampled_from(["vllm:num_requests_running", "vllm:generation_tokens_total",
                         "process_start_time_seconds", "x_bucket", "a", "vllm:kv"])
VALUES = st.one_of(st.sampled_from(["NaN", "+Inf", "-Inf", "-1", "0", "1e400", "1e308", "abc"]),
                   st.floats(allow_nan=True).map(repr), st.integers(-10, 10**9).map(str))
LABEL_VALUES = st.text(alphabet=st.characters(codec="utf-8"), max_size=6)
LINES = st.one_of(
    st.builds(lambda n, v: f"{n} {v}", NAMES, VALUES),
    st.builds(lambda n, k, lv, v: f'{n}{{{k}="{lv}"}} {v}', NAMES,
              st.sampled_from(["le", "engine", "finished_reason"]), LABEL_VALUES, VALUES),
    st.builds(lambda n, t: f"# TYPE {n} {t}", NAMES,
              st.sampled_from(["counter", "gauge", "histogram", "untyped", "nonsense"])),
    st.text(max_size=40))


def _library(text: str) -> list | None:
    """What ``prometheus_client`` itself makes of ``text``: its families, ``None`` if it raises."""
    try:
        return list(text_string_to_metric_families(text))
    except Exception:  # noqa: BLE001 - any failure counts as "refused"
        return None


@given(st.lists(LINES, max_size=12).map("\n".join), st.sampled_from(["/metrics", "scrape.txt"]))
def test_families_or_one_named_error(text: str, source: str) -> None:
    """Families (the library's, same names, samples and values) or a ValueError naming the
    input; never another exception type."""
    want = _library(text)
    try:
        got = parse_families(text, source)
    except ValueError as exc:
        assert str(exc).startswith(f"{source}: not Prometheus text ("), exc
        assert want is None
        return
    assert want is not None
    assert [(f.name, f.type) for f in got] == [(f.name, f.type) for f in want]
    for a, b in zip(got, want, strict=True):
        for sa, sb in zip(a.samples, b.samples, strict=True):
            assert (sa.name, sa.labels) == (sb.name, sb.labels)
            assert sa.value == sb.value or (math.isnan(sa.value) and math.isnan(sb.value))


@given(st.sampled_from(["NaN", "+Inf", "-Inf", "-1"]))
def test_unknown_values_pass_through_never_zero(value: str) -> None:
    """A value that is not a count stays what it was: the caller refuses it, never reads 0."""
    (fam,) = parse_families(f"# TYPE x gauge\nx {value}\n")
    v = fam.samples[0].value
    assert v != 0 and (math.isnan(v) if value == "NaN" else v == float(value))


@given(st.integers(1, 64))
def test_above_the_limit_is_refused_with_its_size(extra: int) -> None:
    text = "x 1\n" + "#" * extra
    with pytest.raises(ValueError, match=r"^scrape: .* characters is above the 4-character"):
        parse_families(text, "scrape", max_chars=4)
    assert MAX_TEXT_CHARS == 16 << 20


def test_a_bare_library_error_still_names_the_input() -> None:
    """prometheus_client raises ``ValueError()`` with no message for some lines."""
    with pytest.raises(ValueError, match=r"^/metrics: not Prometheus text \(\w+: .+\)$"):
        parse_families('x{le="1" 1\n')
