"""Guards for every parser of outside input: bounded nesting and size, typed fields, aware UTC
times and RE2 regular expressions.

Every source reads text it does not control (safetensors headers, ``config.json``, vLLM's
``/metrics`` and JSON endpoints, ``systemctl`` output, Alertmanager and docker JSON, the profile).
A fuzzing pass (issue #12) found the same classes of crash in all of them; this module is the one
place that fixes each class:

* **Nesting.** ``json.loads`` and :mod:`tomllib` recurse once per ``[`` / ``{``: a deeply
  nested document raises :class:`RecursionError` (not a ``ValueError``), which escaped the
  sources' ``except ValueError``. :func:`check_json_depth` measures the depth first, in linear
  time and without recursion, and :func:`load_json` refuses more than :data:`MAX_DEPTH` levels.
* **Size.** :func:`load_json` refuses a document above its ``max_bytes``.
* **Non-finite numbers.** ``NaN``, ``Infinity`` and ``1e400`` (which Python's parser turns into
  ``inf``) are refused by :func:`load_json`: no reply of these sources legitimately holds them,
  and ``int(inf)`` raises :class:`OverflowError` later.
* **Field types.** :func:`get_int`, :func:`get_str`, :func:`get_bool`, :func:`get_dict`,
  :func:`get_list` read one field and return ``None`` for a wrong type (a ``bool`` is never an
  ``int`` here, though Python says it is), so an object where a list is expected, a number
  where a string is, or ``null`` becomes "unknown" instead of an ``AttributeError`` /
  ``TypeError`` three calls later.
* **Times.** :func:`aware_utc` rejects naive datetimes and normalises aware ones to UTC.
* **Regular expressions.** Alertmanager matchers are Go ``regexp`` (RE2) patterns, fully
  anchored (Alertmanager ``pkg/labels/matcher.go``: ``"^(?:" + value + ")$"``). Python's ``re``
  is both wrong for them (RE2 accepts ``\\z``, which ``re`` refuses; ``re`` accepts
  back-references and look-arounds, which RE2 refuses) and a denial of service (``(.*){18}x``
  backtracks for hours). :func:`compile_re2` compiles with ``google-re2`` (linear-time matching)
  and raises :class:`InputError` naming the pattern's origin for a pattern RE2 refuses.

Every error is an :class:`InputError` (a :class:`ValueError`) whose message starts with the name
of the input (``what``), so the caller can add it to its own typed error or ``Unavailable``.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

import re2

MAX_DEPTH = 64
"""Deepest nesting of arrays/objects accepted in outside JSON or TOML. Real inputs nest at most
about 8 levels (a ``config.json`` with ``text_config.rope_scaling``, a compressed-tensors
``config_groups`` entry); the parsers' own limit is Python's recursion limit (~1000)."""

MAX_JSON_BYTES = 16 << 20
"""Default size limit for one JSON reply or file (16 MiB); safetensors headers pass their own
format limit (100,000,000 B)."""


class InputError(ValueError):
    """Outside input this console refuses. ``what`` names the input (a file, a URL path, a
    command, a profile key); ``problem`` says what is wrong; ``str()`` is ``"what: problem"``."""

    def __init__(self, what: str, problem: str) -> None:
        self.what = what
        self.problem = problem
        super().__init__(f"{what}: {problem}")


# -- nesting ------------------------------------------------------------------------------------
_DEPTH_TOKENS = re.compile(r'\\.|["\[\]{}]', re.DOTALL)
"""The only characters the depth scan looks at: an escape (a backslash and the character after
it, so an escaped quote does not end a string), a quote and a bracket. Every alternative matches
at most two characters and nothing is retried, so :func:`re.finditer` walks the text once."""


def json_depth_scan(text: str, max_depth: int = MAX_DEPTH) -> tuple[int, int]:
    """The deepest nesting of arrays/objects in JSON ``text`` (counted up to ``max_depth + 1``)
    and the number of scanner steps taken, as ``(depth, steps)``.

    One pass, no recursion, no backtracking: the scanner visits each quote, escape and bracket
    once (``steps`` ≤ ``len(text)``), tracking whether it is inside a string literal (brackets in
    strings do not count). Unbalanced or mismatched brackets are not judged (the JSON parser
    reports them with a line and column); the depth is the deepest prefix nesting, which is what
    the recursive parser would reach before failing. (The earlier pre-scan stripped strings with a
    backtracking regular expression first: quadratic on a long run of escaped quotes, 32 kB took
    4 s, issue #22.)
    """
    depth = deepest = steps = 0
    in_string = False
    for m in _DEPTH_TOKENS.finditer(text):
        steps += 1
        c = m.group()
        if in_string:
            if c == '"':
                in_string = False
            continue  # an escape or a bracket inside a string
        if c == '"':
            in_string = True
        elif c in "[{":
            depth += 1
            if depth > deepest:
                deepest = depth
                if deepest > max_depth:
                    break
        elif c in "]}":
            depth = max(depth - 1, 0)
        # a backslash outside a string is not JSON: the parser refuses it where it stands
    return deepest, steps


def json_depth_exceeds(text: str, max_depth: int = MAX_DEPTH) -> bool:
    """Whether JSON ``text`` nests arrays/objects deeper than ``max_depth`` (linear time,
    recursion-free: :func:`json_depth_scan`)."""
    if text.count("[") + text.count("{") <= max_depth:
        return False
    return json_depth_scan(text, max_depth)[0] > max_depth


def check_json_depth(text: str, what: str, max_depth: int = MAX_DEPTH) -> None:
    """Raise :class:`InputError` naming ``what`` when ``text`` nests deeper than ``max_depth``."""
    if json_depth_exceeds(text, max_depth):
        raise InputError(what, f"JSON nests arrays/objects deeper than {max_depth} levels; "
                               "refused (no real reply nests that deep)")


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"non-finite number {name} is not JSON")


def _finite_float(text: str) -> float:
    v = float(text)
    if not math.isfinite(v):
        raise ValueError(f"number {text[:40]} is out of range (it would be {v})")
    return v


def _bounded_int(max_digits: int) -> Any:
    def parse(text: str) -> int:
        digits = len(text) - (text[0] == "-")
        if digits > max_digits:
            raise ValueError(f"an integer of {digits:,} digits is out of range (at most "
                             f"{max_digits} here)")
        return int(text)
    return parse


def load_json(data: str | bytes, what: str, *, max_bytes: int = MAX_JSON_BYTES,
              max_depth: int = MAX_DEPTH, max_int_digits: int | None = None) -> Any:
    """Parse outside JSON with bounded size and nesting and only finite numbers.

    ``data``: the text (bytes are decoded as UTF-8); ``what``: the input's name for messages.
    Returns the parsed value. Raises :class:`InputError` naming ``what`` for a document above
    ``max_bytes`` bytes, nesting deeper than ``max_depth``, not UTF-8, not JSON (with line and
    column), ``NaN``/``Infinity`` or a number that overflows a float (``1e400``), or an integer
    literal of more than ``max_int_digits`` digits (default: Python's limit, 4,300; a 400-digit
    integer parses but raises :class:`OverflowError` wherever it meets a float, so readers of
    files that only ever hold counts, bytes and nanosecond times pass 20). A lone surrogate
    escape in a string is read as U+FFFD (as Go and Rust decode it).
    """
    size = len(data)
    if size > max_bytes:
        raise InputError(what, f"{size:,} bytes is above the {max_bytes:,}-byte limit")
    if isinstance(data, bytes | bytearray):
        try:
            data = bytes(data).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise InputError(what, f"not UTF-8 (byte {exc.start})") from None
    check_json_depth(data, what, max_depth)
    try:
        value = json.loads(data, parse_constant=_refuse_constant, parse_float=_finite_float,
                           parse_int=None if max_int_digits is None
                           else _bounded_int(max_int_digits))
    except json.JSONDecodeError as exc:
        raise InputError(what, f"not valid JSON at line {exc.lineno} column {exc.colno}: "
                               f"{exc.msg}") from None
    except RecursionError:
        raise InputError(what, "JSON nests too deeply to parse") from None
    except ValueError as exc:  # non-finite number, int digits limit
        raise InputError(what, f"not acceptable JSON: {exc}") from None
    # a \uD800-\uDFFF escape without its pair: read as U+FFFD, as Go's and Rust's decoders do,
    # so no lone surrogate reaches a printer, RE2 or a JSON encoder (issue #22)
    return _replace_surrogates(value) if "\\u" in data else value


def _replace_surrogates(value: Any) -> Any:
    """``value`` (parsed JSON) with :func:`without_surrogates` applied to every string and key,
    iteratively (no recursion)."""
    if isinstance(value, str):
        return without_surrogates(value)
    if not isinstance(value, dict | list):
        return value
    root: list[Any] = [value]
    stack: list[tuple[Any, Any]] = [(root, 0)]
    while stack:
        parent, key = stack.pop()
        v = parent[key]
        if isinstance(v, str):
            parent[key] = without_surrogates(v)
        elif isinstance(v, list):
            stack.extend((v, i) for i in range(len(v)))
        elif isinstance(v, dict):
            if any(without_surrogates(k) is not k for k in v):
                v = parent[key] = {without_surrogates(k): x for k, x in v.items()}
            stack.extend((v, k) for k in v)
    return root[0]


def nesting_depth(value: Any, limit: int = MAX_DEPTH) -> int:
    """Nesting depth of parsed data (dicts/lists/tuples), computed without recursion; stops
    counting at ``limit + 1``."""
    deepest = 0
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        v, d = stack.pop()
        if isinstance(v, Mapping):
            children = v.values()
        elif isinstance(v, list | tuple):
            children = v
        else:
            continue
        d += 1
        if d > deepest:
            deepest = d
            if deepest > limit:
                return deepest
        stack.extend((c, d) for c in children)
    return deepest


# -- typed fields --------------------------------------------------------------------------------
def get_int(d: Any, key: str, *, minimum: int | None = None,
            maximum: int | None = None) -> int | None:
    """``d[key]`` when ``d`` is a mapping and the value is an ``int`` (not a ``bool``) within
    ``[minimum, maximum]``; else ``None``."""
    v = d.get(key) if isinstance(d, Mapping) else None
    if not isinstance(v, int) or isinstance(v, bool):
        return None
    if (minimum is not None and v < minimum) or (maximum is not None and v > maximum):
        return None
    return v


def get_str(d: Any, key: str, *, max_len: int = 4096) -> str | None:
    """``d[key]`` when ``d`` is a mapping and the value is a ``str`` of at most ``max_len``
    characters; else ``None``."""
    v = d.get(key) if isinstance(d, Mapping) else None
    return v if isinstance(v, str) and len(v) <= max_len else None


def get_bool(d: Any, key: str) -> bool | None:
    """``d[key]`` when ``d`` is a mapping and the value is a ``bool``; else ``None``."""
    v = d.get(key) if isinstance(d, Mapping) else None
    return v if isinstance(v, bool) else None


def get_dict(d: Any, key: str) -> dict[str, Any]:
    """``d[key]`` when ``d`` is a mapping and the value is a mapping; else ``{}``."""
    v = d.get(key) if isinstance(d, Mapping) else None
    return dict(v) if isinstance(v, Mapping) else {}


def get_list(d: Any, key: str) -> list[Any]:
    """``d[key]`` when ``d`` is a mapping and the value is a list; else ``[]``."""
    v = d.get(key) if isinstance(d, Mapping) else None
    return list(v) if isinstance(v, list) else []


def finite_nonneg(v: Any) -> float | None:
    """``v`` as a float when it is a finite number ≥ 0 (not a ``bool``); else ``None``."""
    if isinstance(v, bool) or not isinstance(v, int | float):
        return None
    try:
        f = float(v)
    except OverflowError:
        return None
    return f if math.isfinite(f) and f >= 0 else None


# -- times ---------------------------------------------------------------------------------------
def aware_utc(value: datetime, what: str) -> datetime:
    """``value`` in UTC. Raises :class:`InputError` naming ``what`` for a naive datetime (no
    offset: the wall clock of an unknown zone; this console keeps every time aware UTC), or for
    a time whose UTC instant falls outside the calendar (``9999-12-31T23:00:00-05:00`` is in the
    year 10000 in UTC: ``OverflowError`` before, which lost a whole reply, issue #22)."""
    if value.tzinfo is None or value.tzinfo.utcoffset(value) is None:
        raise InputError(what, f"time {value.isoformat()} has no UTC offset; give it in UTC "
                               "(…Z or +00:00)")
    try:
        return value.astimezone(UTC)
    except OverflowError:
        raise InputError(what, f"time {value.isoformat()} is outside the calendar (years 1 to "
                               "9999) in UTC") from None


# -- regular expressions ---------------------------------------------------------------------------
def _options() -> Any:
    opts = re2.Options()
    opts.log_errors = False  # RE2 would print every refused pattern to stderr
    return opts


_RE2_OPTIONS = _options()
MAX_PATTERN_CHARS = 4096
"""Longest regular expression taken from outside (a matcher value, a profile pattern)."""


_SURROGATE = re.compile("[\ud800-\udfff]")
"""A surrogate code point; in a Python ``str`` every one is lone (a pair is one code point)."""


def without_surrogates(text: str) -> str:
    """``text`` with every lone surrogate code point (``\\ud800``–``\\udfff``, which JSON's
    ``\\uXXXX`` escapes and ``os.fsdecode`` can produce but UTF-8 cannot encode) replaced by
    U+FFFD, as Go (Alertmanager) and Rust (safetensors) read invalid UTF-8. Other text is returned
    unchanged (the same object)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return _SURROGATE.sub("\ufffd", text)
    return text


class Re2Program:
    """A compiled RE2 pattern whose :meth:`search` takes any ``str``: google-re2 encodes its
    subject strictly as UTF-8 and raised :class:`UnicodeEncodeError` on a lone surrogate
    (issue #22); the subject is matched as :func:`without_surrogates` reads it."""

    __slots__ = ("_prog",)

    def __init__(self, prog: Any) -> None:
        self._prog = prog

    @property
    def pattern(self) -> str:
        """The pattern as compiled (anchored form included)."""
        return str(self._prog.pattern)

    def search(self, text: str) -> Any:
        """RE2's match object for the first match in ``text``, or ``None``."""
        return self._prog.search(without_surrogates(text))


def compile_re2(pattern: str, what: str, *, anchored: bool = False) -> Re2Program:
    """Compile ``pattern`` with RE2 (Go ``regexp`` syntax; matching is linear-time).

    ``anchored``: wrap it as Alertmanager does, ``^(?:pattern)$``, so ``.search`` is a full
    match. Returns the compiled pattern (``.search(text)`` → match or ``None``). Raises
    :class:`InputError` naming ``what`` for a pattern that is not a ``str``, longer than
    :data:`MAX_PATTERN_CHARS`, or not valid RE2 (look-arounds, back-references, possessive
    quantifiers…), with RE2's reason, or holding a lone surrogate (not Unicode text).
    """
    if not isinstance(pattern, str):
        raise InputError(what, f"regular expression must be a string, got {type(pattern).__name__}")
    if len(pattern) > MAX_PATTERN_CHARS:
        raise InputError(what, f"regular expression of {len(pattern):,} characters is above the "
                               f"{MAX_PATTERN_CHARS:,}-character limit")
    text = f"^(?:{pattern})$" if anchored else pattern
    try:
        return Re2Program(re2.compile(text, _RE2_OPTIONS))
    except re2.error as exc:
        reason = exc.args[0] if exc.args else exc
        if isinstance(reason, bytes):
            reason = reason.decode("utf-8", "replace")
        raise InputError(what, f"{pattern!r} is not a valid RE2 regular expression "
                               f"({reason}); Alertmanager and this console use RE2 (Go regexp) "
                               "syntax: no look-arounds or back-references") from None
    except UnicodeEncodeError:
        raise InputError(what, f"{pattern!r} holds a lone surrogate code point (not Unicode "
                               "text); write the character itself") from None
    except (TypeError, ValueError) as exc:  # e.g. a NUL in the pattern
        raise InputError(what, f"{pattern!r} cannot be compiled: {exc}") from None


__all__ = [
    "InputError", "MAX_DEPTH", "Re2Program", "MAX_JSON_BYTES", "MAX_PATTERN_CHARS", "aware_utc",
    "check_json_depth", "compile_re2", "finite_nonneg", "get_bool", "get_dict", "get_int",
    "get_list", "get_str", "json_depth_exceeds", "json_depth_scan", "load_json", "nesting_depth",
    "without_surrogates",
]
