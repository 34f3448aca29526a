"""Fidelity: greedy decoding with top-20 logprobs on two arms, compared position by position.

**What this is and is not.** This is a *localisation* signal: it says where (at which output
position of which prompt) the two arms' greedy outputs first part, and how close their top-20
candidate sets and log-probabilities were up to there. It is **not** a full-logit or KL
measurement: only the 20 most likely tokens per position are seen (vLLM's maximum for
``logprobs``: 21 is refused with HTTP 400), tokens outside either top-20 are invisible, and
positions after the first divergence are conditioned on different prefixes, so nothing is
compared past it.

Request (vLLM's OpenAI-compatible ``POST /v1/completions``, checked against vLLM 0.32's
``vllm/entrypoints/openai/completion/protocol.py`` and on the lab's engine):
``temperature`` 0 (greedy), ``logprobs`` 20, ``max_tokens`` N, ``ignore_eos`` true (fixed
length), and ``return_tokens_as_token_ids`` true, which makes vLLM write every token in
``choices[0].logprobs.tokens`` and the keys of ``top_logprobs`` as ``"token_id:<int>"``
(``format_token_id_placeholder`` in ``vllm/entrypoints/generate/base/serving.py``), so the
comparison is on token IDs, never on decoded strings (two IDs can decode to the same text).
vLLM reports *raw* log-probabilities by default (``logprobs_mode = "raw_logprobs"``: before
temperature, penalties or ``logit_bias``).

Units: log-probabilities are natural-log nats as the server returns them (floats ≤ 0; vLLM
clamps ``-inf`` to ``-9999.0``); positions are 0-based output-token indices.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from importlib import resources
from typing import Any


from seat_console.evidence.itemset import parse_item_set
from seat_console.core.untrusted import InputError, load_json
from seat_console.node.engine_client import COMPLETIONS, EngineClient

TOP_N = 20
"""Top-k log-probabilities requested per position: vLLM's maximum (``logprobs`` 21 → HTTP 400)."""

MAX_TOKENS_LIMIT = 4096
"""Upper bound on ``max_tokens`` per fidelity case (a typo must not ask for 10^9 tokens)."""

MAX_BODY_BYTES = 64 * 2**20
"""A completions body above 64 MiB is refused, not parsed."""

LOCALISATION_NOTE = ("Fidelity is a localisation signal (where greedy outputs first part, and "
                     "how close the top-20 sets were up to there), not a full-logit or KL "
                     "measurement: only each position's 20 most likely tokens are seen, and "
                     "nothing past the first divergence is compared.")

_TOKEN_ID = re.compile(r"token_id:(-?\d{1,12})")
_BARE_ID = re.compile(r"(-?\d{1,12})")


class FidelityError(ValueError):
    """A completions response (or a prompt set) that is not what this module can compare.

    The message names the input (``source``: e.g. the URL or the file) and what was wrong.
    """


@dataclass(frozen=True)
class FidelityCase:
    """One shipped fidelity prompt: ``case_id`` (stable across arms), ``prompt`` (text),
    ``max_tokens`` (greedy output length, 1..:data:`MAX_TOKENS_LIMIT`)."""

    case_id: str
    prompt: str
    max_tokens: int


@dataclass(frozen=True)
class Position:
    """One output position: the sampled ``token_id``, its ``logprob`` (nats), and ``top``:
    the position's top-:data:`TOP_N` as ``{token_id: logprob}``."""

    token_id: int
    logprob: float
    top: Mapping[int, float]


@dataclass(frozen=True)
class Trace:
    """One arm's greedy output for one case: ``positions`` in output order."""

    case_id: str
    positions: tuple[Position, ...]

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready (``top`` keys as strings of the token ID)."""
        return {"case_id": self.case_id,
                "positions": [{"token_id": p.token_id, "logprob": p.logprob,
                               "top": {str(k): v for k, v in p.top.items()}}
                              for p in self.positions]}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any], source: str = "trace") -> Trace:
        """Inverse of :meth:`as_dict`; :class:`FidelityError` naming ``source`` if malformed."""
        try:
            positions = tuple(
                Position(token_id=_int(p["token_id"], source), logprob=_lp(p["logprob"], source),
                         top={_int(k, source): _lp(v, source) for k, v in p["top"].items()})
                for p in d["positions"])
            return cls(case_id=str(d["case_id"]), positions=positions)
        except (KeyError, TypeError, AttributeError) as exc:
            raise FidelityError(f"{source}: not a fidelity trace ({exc!r})") from None


def _int(v: Any, source: str) -> int:
    if isinstance(v, bool):
        raise FidelityError(f"{source}: token ID {v!r} is not an integer")
    if isinstance(v, int):
        return v
    if isinstance(v, str):
        m = _TOKEN_ID.fullmatch(v) or _BARE_ID.fullmatch(v)
        if m:
            return int(m.group(1))
    raise FidelityError(f"{source}: token {str(v)[:60]!r} is not 'token_id:<int>' — send "
                        f"return_tokens_as_token_ids: true (vLLM's completions API)")


def _lp(v: Any, source: str) -> float:
    if isinstance(v, bool) or not isinstance(v, (int, float)) or math.isnan(v) or v > 1e-6:
        raise FidelityError(f"{source}: log-probability {str(v)[:40]!r} is not a number ≤ 0")
    return float(v)


def request_payload(model: str, prompt: str, max_tokens: int,
                    extra: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The ``/v1/completions`` JSON body for one greedy case (see the module docstring).

    ``extra`` overrides or adds fields (e.g. a deliberately different sampling setting in a
    test); it is recorded with the trace by the caller.
    """
    body: dict[str, Any] = {"model": model, "prompt": prompt, "max_tokens": max_tokens,
                            "temperature": 0.0, "logprobs": TOP_N, "ignore_eos": True,
                            "return_tokens_as_token_ids": True, "stream": False}
    body.update(extra or {})
    return body


def parse_completion(body: bytes | str, source: str = "completion",
                     top_n: int = TOP_N) -> tuple[Position, ...]:
    """Parse a non-streaming ``/v1/completions`` response body into positions.

    Shape read: ``choices[0].logprobs`` with ``tokens`` (list of ``"token_id:N"``),
    ``token_logprobs`` (floats) and ``top_logprobs`` (list of ``{"token_id:N": float}``), all
    the same length. ``top`` keeps the ``top_n`` highest entries (vLLM adds the sampled token
    when it is not among them, which can make 21). The sampled token's logprob must be
    present (vLLM sends ``null`` only for prompt positions, never for output).

    Raises :class:`FidelityError` naming ``source`` for anything else (not JSON, an error
    object, missing or mismatched lists, a token that is not an ID, a NaN or positive logprob,
    a body over :data:`MAX_BODY_BYTES`).
    """
    if len(body) > MAX_BODY_BYTES:
        raise FidelityError(f"{source}: response body of {len(body):,} B is over the "
                            f"{MAX_BODY_BYTES:,} B limit")
    try:
        doc = load_json(body, source, max_bytes=MAX_BODY_BYTES)
    except InputError as exc:
        raise FidelityError(f"{source}: response is not JSON we read ({exc.problem})") from None
    if not isinstance(doc, dict):
        raise FidelityError(f"{source}: response is a {type(doc).__name__}, not an object")
    if "error" in doc and "choices" not in doc:
        err = doc["error"]
        msg = err.get("message") if isinstance(err, dict) else err
        raise FidelityError(f"{source}: the server answered an error: {str(msg)[:200]}")
    try:
        lp = doc["choices"][0]["logprobs"]
        tokens, lps, tops = lp["tokens"], lp["token_logprobs"], lp["top_logprobs"]
    except (KeyError, IndexError, TypeError):
        raise FidelityError(f"{source}: no choices[0].logprobs with tokens, token_logprobs "
                            f"and top_logprobs (was logprobs requested?)") from None
    if not all(isinstance(x, list) for x in (tokens, lps, tops)):
        raise FidelityError(f"{source}: logprobs tokens/token_logprobs/top_logprobs are not lists")
    if not len(tokens) == len(lps) == len(tops):
        raise FidelityError(f"{source}: logprobs lists differ in length "
                            f"({len(tokens)}, {len(lps)}, {len(tops)})")
    out = []
    for i, (tok, tlp, top) in enumerate(zip(tokens, lps, tops, strict=True)):
        where = f"{source} position {i}"
        if not isinstance(top, dict):
            raise FidelityError(f"{where}: top_logprobs entry is not an object")
        parsed = {_int(k, where): _lp(v, where) for k, v in top.items()}
        ranked = sorted(parsed.items(), key=lambda kv: (-kv[1], kv[0]))[:top_n]
        out.append(Position(token_id=_int(tok, where), logprob=_lp(tlp, where),
                            top=dict(ranked)))
    return tuple(out)


def fetch_trace(client: EngineClient, model: str, case: FidelityCase,
                extra: Mapping[str, Any] | None = None) -> Trace:
    """POST one greedy case to ``client``'s base URL ``/v1/completions`` and parse it.

    ``client``: the one engine client (:class:`seat_console.node.engine_client.EngineClient`,
    e.g. on ``http://127.0.0.1:18000``, with a timeout fit for a generation); the answer is
    read up to :data:`MAX_BODY_BYTES` + 1 while it streams in. Raises :class:`FidelityError`
    for a non-200 answer or an unparseable body, and :class:`~seat_console.node.engine_client.
    EngineError` (naming the URL) when the engine does not answer.
    Blocking: call it from a worker thread, never the UI thread.
    """
    source = f"{client.url(COMPLETIONS)} case {case.case_id!r}"
    # read one byte more than the limit, cut there: parse_completion refuses it, naming the limit
    r = client.completion(request_payload(model, case.prompt, case.max_tokens, extra),
                          max_bytes=MAX_BODY_BYTES + 1, cut=True)
    body = r.body
    if r.status != 200:
        raise FidelityError(f"{source}: HTTP {r.status}: "
                            f"{body[:200].decode('utf-8', 'replace')}")
    positions = parse_completion(body, source)
    if len(positions) != case.max_tokens:
        raise FidelityError(f"{source}: {len(positions)} output positions, expected "
                            f"{case.max_tokens} (ignore_eos should fix the length)")
    return Trace(case_id=case.case_id, positions=positions)


@dataclass(frozen=True)
class CaseFidelity:
    """The comparison of one case across arms A and B.

    ``positions_compared``: positions looked at (up to and including the first divergence);
    ``first_divergence``: the first position whose sampled token IDs differ, or ``None``;
    ``min_top_overlap``: the smallest |top-20(A) ∩ top-20(B)| over the compared positions
    (20 = identical sets), ``None`` if nothing was compared; ``max_common_abs_dlogprob``: the
    largest |logprob_A − logprob_B| over tokens in both top-20 sets at a compared position
    (nats), ``None`` if there were none; ``length_a``/``length_b``: output lengths.
    ``exact`` is true when the outputs have the same length, no divergence, every top-20 set
    is identical, and every common logprob is equal.
    """

    case_id: str
    positions_compared: int
    first_divergence: int | None
    min_top_overlap: int | None
    max_common_abs_dlogprob: float | None
    length_a: int
    length_b: int
    top_sets_identical: bool

    @property
    def exact(self) -> bool:
        """Identical IDs, lengths, top-20 sets and logprobs over the whole output."""
        return (self.first_divergence is None and self.length_a == self.length_b
                and self.top_sets_identical and self.max_common_abs_dlogprob in (0.0, None))

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready, with ``exact``."""
        return {"case_id": self.case_id, "positions_compared": self.positions_compared,
                "first_divergence": self.first_divergence,
                "min_top_overlap": self.min_top_overlap,
                "max_common_abs_dlogprob": self.max_common_abs_dlogprob,
                "length_a": self.length_a, "length_b": self.length_b,
                "top_sets_identical": self.top_sets_identical, "exact": self.exact}


def compare_traces(a: Trace, b: Trace) -> CaseFidelity:
    """Compare two traces of the same case position by position; stop at the first output-ID
    divergence (that position is still compared: both arms saw the same prefix there).

    Raises :class:`FidelityError` if the case IDs differ (pairs must be matched by case ID).
    """
    if a.case_id != b.case_id:
        raise FidelityError(f"unmatched pair: case {a.case_id!r} vs {b.case_id!r}")
    compared = 0
    divergence: int | None = None
    min_overlap: int | None = None
    max_d: float | None = None
    identical = True
    for i, (pa, pb) in enumerate(zip(a.positions, b.positions, strict=False)):  # may differ
        compared = i + 1
        common = pa.top.keys() & pb.top.keys()
        overlap = len(common)
        min_overlap = overlap if min_overlap is None else min(min_overlap, overlap)
        if pa.top.keys() != pb.top.keys():
            identical = False
        for t in common:
            d = abs(pa.top[t] - pb.top[t])
            max_d = d if max_d is None else max(max_d, d)
        if pa.token_id != pb.token_id:
            divergence = i
            break
    return CaseFidelity(case_id=a.case_id, positions_compared=compared,
                        first_divergence=divergence, min_top_overlap=min_overlap,
                        max_common_abs_dlogprob=max_d, length_a=len(a.positions),
                        length_b=len(b.positions), top_sets_identical=identical)


@dataclass(frozen=True)
class FidelitySummary:
    """All cases: ``cases`` (matched by case ID, in A's order), ``unmatched`` (case IDs present
    on one arm only: never silently dropped), ``note`` (:data:`LOCALISATION_NOTE`)."""

    cases: tuple[CaseFidelity, ...]
    unmatched: tuple[str, ...] = ()
    note: str = field(default=LOCALISATION_NOTE)

    @property
    def all_exact(self) -> bool:
        """Every case exact and none unmatched (false with no cases)."""
        return bool(self.cases) and not self.unmatched and all(c.exact for c in self.cases)

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready."""
        return {"cases": [c.as_dict() for c in self.cases], "unmatched": list(self.unmatched),
                "all_exact": self.all_exact,
                "diverging": sum(c.first_divergence is not None for c in self.cases),
                "note": self.note}


def compare_arms(a: Iterable[Trace], b: Iterable[Trace]) -> FidelitySummary:
    """Match traces by case ID and compare each pair (:func:`compare_traces`).

    Raises :class:`FidelityError` if one arm has two traces of the same case.
    """
    def index(traces: Iterable[Trace], arm: str) -> dict[str, Trace]:
        out: dict[str, Trace] = {}
        for t in traces:
            if t.case_id in out:
                raise FidelityError(f"arm {arm}: case {t.case_id!r} appears twice")
            out[t.case_id] = t
        return out

    ia, ib = index(a, "A"), index(b, "B")
    cases = tuple(compare_traces(ia[c], ib[c]) for c in ia if c in ib)
    unmatched = tuple(sorted(ia.keys() ^ ib.keys()))
    return FidelitySummary(cases=cases, unmatched=unmatched)


def parse_cases(raw: bytes | str, source: str) -> tuple[FidelityCase, ...]:
    """Parse a fidelity prompt set: a JSON list of ``{"id", "prompt", "max_tokens"}``.

    Raises :class:`FidelityError` naming ``source`` for a malformed set (not a list, a missing
    or empty field, a duplicate ID, ``max_tokens`` outside 1..:data:`MAX_TOKENS_LIMIT`).
    """
    return tuple(FidelityCase(case_id=it.item_id, prompt=it.prompt, max_tokens=it.max_tokens)
                 for it in parse_item_set(raw, source, error=FidelityError, noun="cases",
                                          max_tokens=MAX_TOKENS_LIMIT))


def shipped_cases() -> tuple[FidelityCase, ...]:
    """The fidelity prompts shipped with the console (``evidence/data/fidelity_prompts.json``)."""
    src = resources.files("seat_console.evidence").joinpath("data/fidelity_prompts.json")
    return parse_cases(src.read_bytes(), "seat_console.evidence/data/fidelity_prompts.json")


def collect(client: EngineClient, model: str, cases: Sequence[FidelityCase],
            extra: Mapping[str, Any] | None = None) -> list[Trace]:
    """Run every case on one arm (sequentially: greedy outputs must not depend on batching
    order); see :func:`fetch_trace` for errors. Blocking: call from a worker."""
    return [fetch_trace(client, model, c, extra) for c in cases]
