"""The one JSON writer of every ``--json`` output: strict JSON (RFC 8259), never ``NaN`` or
``Infinity``.

Python's :func:`json.dumps` writes a non-finite float as the bare words ``NaN`` /
``Infinity`` / ``-Infinity``, which are not JSON: ``jq``, Go, JavaScript's ``JSON.parse`` and
orjson refuse the whole document (``fleet --json`` wrote ``Infinity`` for a value Prometheus
sent as ``+Inf``, issue 31). :func:`dumps` writes each non-finite float as ``null`` (unknown:
never 0) and, when the document is an object, says which and why under
:data:`NON_FINITE_KEY` (``{"rows[3].kv_usage": "+Inf"}``), then encodes with
``allow_nan=False`` so nothing non-finite can slip through. The walk is iterative (no
recursion limit) and leaves every other value as it is.

Every command that prints JSON calls :func:`dumps` (``tests/test_jsonout.py`` fails on a
front that calls ``json.dumps`` itself).
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping
from typing import Any

NON_FINITE_KEY = "non_finite_values"
"""The key, added to a top-level object only when a value was replaced, mapping each replaced
value's path (``rows[3].kv_usage``) to what it was (``NaN``, ``+Inf``, ``-Inf``)."""


def _word(v: float) -> str:
    return "NaN" if math.isnan(v) else ("+Inf" if v > 0 else "-Inf")


def _path(parent: str, key: Any) -> str:
    if isinstance(key, int):
        return f"{parent}[{key}]"
    return f"{parent}.{key}" if parent else str(key)


def strict(doc: Any) -> tuple[Any, dict[str, str]]:
    """``doc`` with every non-finite float (in dicts, lists and tuples, at any depth) replaced
    by ``None``, and ``{path: "NaN" | "+Inf" | "-Inf"}`` of the replaced ones. Containers
    holding one are copied (dicts and lists; a tuple becomes a list, as JSON writes it);
    ``doc`` itself is not changed. Iterative: any depth. Raises nothing."""
    found: dict[str, str] = {}
    if isinstance(doc, float):
        if math.isfinite(doc):
            return doc, found
        found["$"] = _word(doc)
        return None, found
    if not isinstance(doc, Mapping | list | tuple):
        return doc, found
    root = [doc]
    # (container, key, path): the slot to look at; containers are copied on first write
    stack: list[tuple[Any, Any, str]] = [(root, 0, "")]
    while stack:
        holder, key, path = stack.pop()
        v = holder[key]
        if isinstance(v, float):
            if not math.isfinite(v):
                holder[key] = None
                found[path or "$"] = _word(v)
        elif isinstance(v, Mapping):
            copy = dict(v)
            holder[key] = copy
            stack.extend((copy, k, _path(path, k)) for k in copy)
        elif isinstance(v, list | tuple):
            copy_l = list(v)
            holder[key] = copy_l
            stack.extend((copy_l, i, _path(path, i)) for i in range(len(copy_l)))
    return root[0], found


def dumps(doc: Any, *, indent: int | None = None,
          default: Callable[[Any], Any] | None = None, sort_keys: bool = False) -> str:
    """``doc`` as strict JSON text: :func:`strict` first, then :func:`json.dumps` with
    ``allow_nan=False`` (``indent``, ``default`` and ``sort_keys`` as there). When values were
    replaced and ``doc`` is an object, :data:`NON_FINITE_KEY` lists them. Raises
    :class:`TypeError` for a value JSON cannot hold and ``default`` does not convert (as
    :func:`json.dumps` does), never :class:`ValueError` for a non-finite number."""
    clean, found = strict(doc)
    if found and isinstance(clean, dict):
        clean = {**clean, NON_FINITE_KEY: found}
    return json.dumps(clean, indent=indent, default=_strict_default(default),
                      sort_keys=sort_keys, allow_nan=False)


def _strict_default(default: Callable[[Any], Any] | None) -> Callable[[Any], Any] | None:
    """``default`` whose result is made strict too (a converter may return a float)."""
    if default is None:
        return None

    def conv(o: Any) -> Any:
        return strict(default(o))[0]

    return conv


__all__ = ["NON_FINITE_KEY", "dumps", "strict"]
