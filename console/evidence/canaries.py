"""Canaries: small tasks judged by code, never by a model.

Four kinds, each with a verdict function over the answer text:

* ``arithmetic`` — the first number in the answer equals ``expected`` exactly (decimal
  comparison: ``391``, ``391.0`` and ``+391`` equal 391; ``390.9`` does not);
* ``tool_call`` — the first JSON object in the answer validates against ``schema``
  (JSON Schema draft 2020-12, via the ``jsonschema`` library);
* ``code`` — the Python in the answer (the first fenced block, else the whole answer) parses
  (:func:`ast.parse`) and, if ``defines`` is given, defines a function of that name;
* ``prose`` — the answer has from ``min_words`` to ``max_words`` words (split on whitespace).

Each item is run ``runs`` times per leg with the same seeds on the two legs of a pair (run *r*
of item *i* has case ID ``"<i>#r<r>"`` and ``seed`` *r*; ``compare`` gives every pair of legs
its own seeds), so pairs match by case ID. Identical outputs of one case (same seed) on several
legs are one trial (:func:`distinct_trials`, by answer SHA-256). Pass rates carry Wilson 95 %
intervals over the distinct trials and pass^k over items (:mod:`seat_console.evidence.stats`). A run
whose request failed has no verdict: it is counted as attempted, not completed, and no rate is
claimed from such a population.
"""

from __future__ import annotations

import ast
import hashlib
import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from importlib import resources
from typing import Any, Literal

import jsonschema

from seat_console.core.untrusted import load_json
from seat_console.evidence.itemset import parse_item_set
from seat_console.node.engine_client import EngineClient, EngineError
from seat_console.evidence.stats import (
    Interval,
    RateComparison,
    StatsError,
    compare_rates,
    pass_hat_k,
    wilson_interval,
)

Kind = Literal["arithmetic", "tool_call", "code", "prose"]
KINDS: tuple[str, ...] = ("arithmetic", "tool_call", "code", "prose")

MAX_ANSWER_CHARS = 200_000
"""Answers longer than this are judged on their first 200,000 characters (bounds parse time)."""

_NUMBER = re.compile(r"[-+]?\d+(?:\.\d+)?")
_FENCE = re.compile(r"```[a-zA-Z0-9_+-]*\n(.*?)```", re.S)


class CanaryError(ValueError):
    """A canary set (or a stored result) that is malformed; the message names the input."""


@dataclass(frozen=True)
class Canary:
    """One canary item: ``item_id``, ``kind``, ``prompt`` (a user message), ``max_tokens``,
    and ``spec``, the kind's parameters (``expected``; ``schema``; ``defines``;
    ``min_words``/``max_words``)."""

    item_id: str
    kind: str
    prompt: str
    max_tokens: int
    spec: Mapping[str, Any]


@dataclass(frozen=True)
class Verdict:
    """``passed`` and a one-line ``reason`` (why it failed, or what passed)."""

    passed: bool
    reason: str


def judge_arithmetic(answer: str, expected: str) -> Verdict:
    """Pass iff the first number in ``answer`` equals ``expected`` (decimal, exact)."""
    m = _NUMBER.search(answer[:MAX_ANSWER_CHARS])
    if m is None:
        return Verdict(False, "no number in the answer")
    try:
        got = Decimal(m.group(0))
    except InvalidOperation:  # pragma: no cover - the regex admits only decimals
        return Verdict(False, f"{m.group(0)!r} is not a number")
    if got == Decimal(expected):
        return Verdict(True, f"answered {m.group(0)}")
    return Verdict(False, f"answered {m.group(0)}, expected {expected}")


def _first_json_object(text: str) -> Any:
    dec = json.JSONDecoder()
    for m in re.finditer(r"\{", text):
        try:
            obj, _ = dec.raw_decode(text, m.start())
        except (ValueError, RecursionError):
            continue
        return obj
    raise ValueError("no JSON object in the answer")


def judge_tool_call(answer: str, schema: Mapping[str, Any]) -> Verdict:
    """Pass iff the first JSON object in ``answer`` validates against ``schema``."""
    try:
        obj = _first_json_object(answer[:MAX_ANSWER_CHARS])
    except ValueError as exc:
        return Verdict(False, str(exc))
    err = jsonschema.exceptions.best_match(
        jsonschema.Draft202012Validator(schema).iter_errors(obj))
    if err is not None:
        path = "/".join(str(p) for p in err.absolute_path) or "(root)"
        return Verdict(False, f"schema: at {path}: {err.message[:160]}")
    return Verdict(True, "valid tool call")


def judge_code(answer: str, defines: str | None = None) -> Verdict:
    """Pass iff the answer's Python (first fenced block, else all) parses and defines
    ``defines`` (a function name) when given."""
    text = answer[:MAX_ANSWER_CHARS]
    m = _FENCE.search(text)
    code = m.group(1) if m else text
    if not code.strip():
        return Verdict(False, "no code in the answer")
    try:
        tree = ast.parse(code)
    except (SyntaxError, ValueError, RecursionError, MemoryError) as exc:
        line = getattr(exc, "lineno", None)
        return Verdict(False, f"does not parse: {type(exc).__name__}"
                              + (f" at line {line}" if line else ""))
    if defines:
        names = {n.name for n in ast.walk(tree)
                 if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}
        if defines not in names:
            return Verdict(False, f"parses, but defines no function {defines!r}")
    return Verdict(True, "parses")


def judge_prose(answer: str, min_words: int, max_words: int) -> Verdict:
    """Pass iff the answer has ``min_words`` ≤ words ≤ ``max_words``."""
    n = len(answer[:MAX_ANSWER_CHARS].split())
    if min_words <= n <= max_words:
        return Verdict(True, f"{n} words")
    return Verdict(False, f"{n} words, outside {min_words}-{max_words}")


def judge(item: Canary, answer: str) -> Verdict:
    """The verdict for ``answer`` to ``item`` by its kind's rule."""
    s = item.spec
    if item.kind == "arithmetic":
        return judge_arithmetic(answer, str(s["expected"]))
    if item.kind == "tool_call":
        return judge_tool_call(answer, s["schema"])
    if item.kind == "code":
        return judge_code(answer, s.get("defines"))
    if item.kind == "prose":
        return judge_prose(answer, int(s["min_words"]), int(s["max_words"]))
    raise CanaryError(f"canary {item.item_id!r}: unknown kind {item.kind!r}")


def parse_canaries(raw: bytes | str, source: str) -> tuple[Canary, ...]:
    """Parse a canary set: a JSON list of ``{"id", "kind", "prompt", "max_tokens", ...spec}``.

    Raises :class:`CanaryError` naming ``source`` and the item for: not a JSON list, a missing
    field, a duplicate ID, an unknown kind, an ``expected`` that is not a decimal, a schema that
    is not valid JSON Schema, word bounds that are not 0 ≤ min ≤ max.
    """
    out: list[Canary] = []
    for it in parse_item_set(raw, source, error=CanaryError, noun="canaries", max_tokens=4096,
                             id_forbids="#"):
        kind = it.fields.get("kind")
        if kind not in KINDS:
            raise CanaryError(f"{it.where}: 'kind' must be one of {', '.join(KINDS)}")
        spec = {k: v for k, v in it.fields.items()
                if k not in ("id", "kind", "prompt", "max_tokens")}
        _check_spec(kind, spec, it.where)
        out.append(Canary(item_id=it.item_id, kind=kind, prompt=it.prompt,
                          max_tokens=it.max_tokens, spec=spec))
    return tuple(out)


def _check_spec(kind: str, spec: dict[str, Any], where: str) -> None:
    if kind == "arithmetic":
        e = spec.get("expected")
        if not isinstance(e, (str, int)) or isinstance(e, bool) or not _NUMBER.fullmatch(str(e)):
            raise CanaryError(f"{where}: 'expected' must be a decimal number")
    elif kind == "tool_call":
        schema = spec.get("schema")
        if not isinstance(schema, dict):
            raise CanaryError(f"{where}: 'schema' must be a JSON Schema object")
        try:
            jsonschema.Draft202012Validator.check_schema(schema)
        except jsonschema.exceptions.SchemaError as exc:
            raise CanaryError(f"{where}: 'schema' is not valid JSON Schema: "
                              f"{exc.message[:120]}") from None
    elif kind == "code":
        d = spec.get("defines")
        if d is not None and (not isinstance(d, str) or not d.isidentifier()):
            raise CanaryError(f"{where}: 'defines' must be a Python identifier")
    elif kind == "prose":
        lo, hi = spec.get("min_words"), spec.get("max_words")
        if not all(isinstance(v, int) and not isinstance(v, bool) for v in (lo, hi)) \
                or not 0 <= lo <= hi:  # type: ignore[operator]
            raise CanaryError(f"{where}: need integers 0 <= 'min_words' <= 'max_words'")


def shipped_canaries() -> tuple[Canary, ...]:
    """The canary set shipped with the console (``evidence/data/canaries.json``)."""
    src = resources.files("seat_console.evidence").joinpath("data/canaries.json")
    return parse_canaries(src.read_bytes(), "seat_console.evidence/data/canaries.json")


@dataclass(frozen=True)
class CanaryResult:
    """One run of one item on one arm: ``case_id`` = ``"<item_id>#r<run>"``; ``passed`` and
    ``reason`` from the verdict, or ``passed`` None and ``error`` set when the request failed
    (no verdict). ``answer`` is the text judged (kept in the raw file)."""

    item_id: str
    kind: str
    run: int
    passed: bool | None
    reason: str
    answer: str = ""
    error: str | None = None

    @property
    def case_id(self) -> str:
        """``"<item_id>#r<run>"``, the pairing key across arms."""
        return f"{self.item_id}#r{self.run}"

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready."""
        return {"case_id": self.case_id, "item_id": self.item_id, "kind": self.kind,
                "run": self.run, "passed": self.passed, "reason": self.reason,
                "answer": self.answer, "error": self.error}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any], source: str = "canary result") -> CanaryResult:
        """Inverse of :meth:`as_dict`; :class:`CanaryError` naming ``source`` if malformed."""
        try:
            passed = d["passed"]
            if passed not in (True, False, None):
                raise TypeError("passed is not true/false/null")
            run = d["run"]
            if isinstance(run, bool) or not isinstance(run, int) or run < 0:
                raise TypeError("run is not a non-negative integer")
            return cls(item_id=str(d["item_id"]), kind=str(d["kind"]), run=run, passed=passed,
                       reason=str(d["reason"]), answer=str(d.get("answer", "")),
                       error=None if d.get("error") is None else str(d["error"]))
        except (KeyError, TypeError) as exc:
            raise CanaryError(f"{source}: not a canary result ({exc})") from None


def run_canary(client: EngineClient, model: str, item: Canary, run: int,
               temperature: float = 0.7) -> CanaryResult:
    """One chat request (``/v1/chat/completions``, non-streaming, ``seed`` = ``run``) and its
    verdict. A transport error, non-200 status or unreadable body gives a result with
    ``error`` set and no verdict (never a fail). Blocking: call from a worker."""
    body = {"model": model, "messages": [{"role": "user", "content": item.prompt}],
            "max_tokens": item.max_tokens, "temperature": temperature, "seed": run,
            "stream": False}
    try:
        r = client.completion(body, chat=True)
        if r.status != 200:
            raise ValueError(f"HTTP {r.status}: {r.text[:160]}")
        answer = load_json(r.body, r.url)["choices"][0]["message"]["content"]
        if not isinstance(answer, str):
            raise ValueError("choices[0].message.content is not text")
    except (EngineError, ValueError, KeyError, IndexError, TypeError) as exc:
        return CanaryResult(item.item_id, item.kind, run, None, "no verdict: request failed",
                            error=f"{type(exc).__name__}: {str(exc)[:200]}")
    v = judge(item, answer)
    return CanaryResult(item.item_id, item.kind, run, v.passed, v.reason, answer=answer)


def run_canaries(client: EngineClient, model: str, items: Sequence[Canary], runs: int,
                 temperature: float = 0.7, first_seed: int = 0) -> list[CanaryResult]:
    """Every item ``runs`` times (seeds ``first_seed`` … ``first_seed + runs − 1``; the run
    number is the seed), in item-major order. ``compare`` gives each pair of legs its own
    seeds, so the legs of one arm are distinct trials and the two arms of a pair match."""
    if runs < 1:
        raise CanaryError(f"runs={runs}: give at least 1 run per item")
    if first_seed < 0:
        raise CanaryError(f"first_seed={first_seed}: seeds are non-negative")
    return [run_canary(client, model, it, r, temperature) for it in items
            for r in range(first_seed, first_seed + runs)]


@dataclass(frozen=True)
class KindSummary:
    """One kind on one arm: ``attempted``, ``completed`` (with a verdict), ``passed`` — counts
    of results as recorded; ``distinct``/``distinct_passed`` — the independent trials among the
    completed ones (:func:`distinct_trials`); ``interval`` (Wilson 95 % over the distinct
    trials) and ``pass_k`` (pass^k over items, from their distinct trials) are ``None`` unless
    the population is complete (attempted = completed ≥ 1); ``k``; ``refused`` says why a rate
    is withheld; ``why`` says how the distinct trials were counted (copies found)."""

    kind: str
    attempted: int
    completed: int
    passed: int
    interval: Interval | None
    pass_k: float | None
    k: int
    refused: str | None
    distinct: int = 0
    distinct_passed: int = 0
    why: str = ""

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready."""
        return {"kind": self.kind, "attempted": self.attempted, "completed": self.completed,
                "passed": self.passed, "distinct": self.distinct,
                "distinct_passed": self.distinct_passed, "why": self.why,
                "interval": self.interval.as_dict() if self.interval else None,
                "pass_k": self.pass_k, "k": self.k, "refused": self.refused}


def answer_sha256(r: CanaryResult) -> str:
    """SHA-256 of the answer text (UTF-8): how copies are recognised."""
    return hashlib.sha256(r.answer.encode("utf-8", "surrogatepass")).hexdigest()


def distinct_trials(results: Iterable[CanaryResult]) -> list[CanaryResult]:
    """The independent trials among ``results`` (those with a verdict), first seen kept: two
    results of the same case (item and seed) with byte-identical answers (same SHA-256) are
    one trial — a deterministic engine given the same seed on another leg copies its output,
    and a copy is not new evidence. Different seeds, or the same seed with a different answer
    (sampling that varied), are distinct trials."""
    seen: set[tuple[str, str]] = set()
    out = []
    for r in results:
        if r.passed is None:
            continue
        key = (r.case_id, answer_sha256(r))
        if key not in seen:
            seen.add(key)
            out.append(r)
    return out


def summarise(results: Iterable[CanaryResult], k: int = 3) -> dict[str, KindSummary]:
    """Per kind (and ``"all"``): counts, distinct trials, Wilson interval and pass^k over the
    distinct trials, withheld with a reason when any run has no verdict or an item has fewer
    than ``k`` distinct trials (pass^k needs k independent runs: distinct seeds, or sampling
    that varied)."""
    rs = list(results)
    out: dict[str, KindSummary] = {}
    for kind in (*KINDS, "all"):
        sel = [r for r in rs if kind == "all" or r.kind == kind]
        if not sel:
            continue
        done = [r for r in sel if r.passed is not None]
        passed = sum(1 for r in done if r.passed)
        uniq = distinct_trials(done)
        upassed = sum(1 for r in uniq if r.passed)
        copies = len(done) - len(uniq)
        why = (f"{len(done)} trials, {len(uniq)} distinct"
               + (f": {copies} had the same case (item and seed) and a byte-identical answer "
                  f"(SHA-256) as another leg's — one trial each" if copies else
                  ": no two results of one case (item and seed) had the same answer"))
        interval = pk = None
        refused = None
        if len(done) != len(sel):
            refused = (f"incomplete population: {len(done)}/{len(sel)} runs have a verdict "
                       f"({len(sel) - len(done)} requests failed)")
        else:
            interval = wilson_interval(upassed, len(uniq))
            per_item: dict[str, list[int]] = {}
            for r in uniq:
                per_item.setdefault(r.item_id, [0, 0])
                per_item[r.item_id][0] += bool(r.passed)
                per_item[r.item_id][1] += 1
            try:
                pk = pass_hat_k([(c, n) for c, n in per_item.values()], k)
            except StatsError as exc:
                refused = (f"pass^{k} withheld: {exc} — pass^k needs {k} independent trials "
                           f"per item (distinct seeds, or sampling that varied)")
        out[kind] = KindSummary(kind, len(sel), len(done), passed, interval, pk, k, refused,
                                distinct=len(uniq), distinct_passed=upassed, why=why)
    return out


def compare_canaries(a: Mapping[str, KindSummary],
                     b: Mapping[str, KindSummary]) -> dict[str, RateComparison | str]:
    """Per kind present on both arms: the overlap rule's :class:`RateComparison`, or a string
    saying why no comparison is made (an arm's rate is withheld)."""
    out: dict[str, RateComparison | str] = {}
    for kind in a.keys() & b.keys():
        sa, sb = a[kind], b[kind]
        if sa.interval is None or sb.interval is None:
            out[kind] = "not compared: " + "; ".join(
                f"{arm}: {s.refused}" for arm, s in (("A", sa), ("B", sb)) if s.interval is None)
        else:
            out[kind] = compare_rates(sa.interval, sb.interval)
    return out
