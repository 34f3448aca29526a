"""The prompt sets the evidence commands read — canaries (:mod:`.canaries`) and fidelity cases
(:mod:`.fidelity`) — share one shape: a non-empty JSON list of objects, each with a unique
``"id"``, a non-empty ``"prompt"`` and a ``"max_tokens"`` in a bounded range, plus fields of its
own kind. :func:`parse_item_set` reads that shape once (through
:func:`seat_console.core.untrusted.load_json`: bounded size and nesting, finite numbers only)
and each module checks only its own fields.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from seat_console.core.untrusted import InputError, load_json


@dataclass(frozen=True)
class SetItem:
    """One object of a prompt set: its position ``index`` in the list, ``where`` (the set and
    the item in words, for messages: ``"set.json item 3 (id)"``), ``item_id``, ``prompt``,
    ``max_tokens`` and the whole object ``fields`` (for the kind's own keys)."""

    index: int
    where: str
    item_id: str
    prompt: str
    max_tokens: int
    fields: dict[str, Any] = field(default_factory=dict)


def parse_item_set(raw: bytes | str, source: str, *, error: type[ValueError], noun: str,
                   max_tokens: int, id_forbids: str = "") -> list[SetItem]:
    """Parse a prompt set ``raw`` read from ``source`` (a path or a name, for messages).

    ``error``: the exception class to raise (the calling module's, a :class:`ValueError`);
    ``noun``: what the items are, in the plural ("canaries", "cases"); ``max_tokens``: the
    largest ``max_tokens`` allowed (the smallest is 1); ``id_forbids``: characters an ID may not
    hold (a canary ID cannot hold ``#``, which joins it to a run number).

    Returns the items in order. Raises ``error`` naming ``source`` (and the item) for: a
    document that :func:`~seat_console.core.untrusted.load_json` refuses (not UTF-8, not
    JSON, too large or deep, NaN), not a non-empty list, an item that is not an object, an ID
    that is not a non-empty string (or holds a forbidden character), a duplicate ID, an empty
    or missing prompt, a ``max_tokens`` that is not an integer from 1 to ``max_tokens``.
    """
    try:
        doc = load_json(raw, source)
    except InputError as exc:
        raise error(str(exc)) from None
    if not isinstance(doc, list) or not doc:
        raise error(f"{source}: expected a non-empty JSON list of {noun}")
    out: list[SetItem] = []
    seen: set[str] = set()
    for i, item in enumerate(doc):
        where = f"{source} item {i}"
        if not isinstance(item, dict):
            raise error(f"{where}: not an object")
        cid, prompt, mt = item.get("id"), item.get("prompt"), item.get("max_tokens")
        if not isinstance(cid, str) or not cid or any(c in cid for c in id_forbids):
            without = "".join(f" without {c!r}" for c in id_forbids)
            raise error(f"{where}: 'id' must be a non-empty string{without}")
        where = f"{where} ({cid})"
        if cid in seen:
            raise error(f"{where}: duplicate id")
        if not isinstance(prompt, str) or not prompt:
            raise error(f"{where}: 'prompt' must be a non-empty string")
        if isinstance(mt, bool) or not isinstance(mt, int) or not 1 <= mt <= max_tokens:
            raise error(f"{where}: 'max_tokens' must be an integer from 1 to {max_tokens}")
        seen.add(cid)
        out.append(SetItem(index=i, where=where, item_id=cid, prompt=prompt, max_tokens=mt,
                           fields=item))
    return out


__all__ = ["SetItem", "parse_item_set"]
