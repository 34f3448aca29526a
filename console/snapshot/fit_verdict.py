"""The fit verdict, computed once per change of its inputs, for every front: the TUI's status
line, its fit panel (compact and full views) and the exporter's ``seat_fit_fits`` read one
computation of :func:`seat_console.fit.inputs.compute_budgets` instead of one each.

Pure (no I/O, no Textual/Rich): :func:`fit_signature` says what the budget depends on (live
memory figures counted in steps of :data:`SIGNIFICANT_BYTES`), :func:`profile_budgets` keeps the
last few results by signature, :func:`gpu_fit_signature` says when a GPU snapshot moved what
the budget depends on (the fit inputs are then read again).
"""

from __future__ import annotations

import threading
from typing import Any

SIGNIFICANT_BYTES = 1 << 28
"""Live GPU and host memory figures count as changed for the fit budget only when they move
by this much (256 MiB): the budget is recomputed when an input changes, not every second."""


def _q(n: int | None) -> int | None:
    return None if n is None else n // SIGNIFICANT_BYTES


def fit_signature(inputs: Any) -> tuple | None:
    """What the fit budget depends on in ``inputs`` (a
    :class:`~seat_console.fit.inputs.FitInputs`): everything but the live memory
    figures, which count in steps of :data:`SIGNIFICANT_BYTES`. Equal signatures → the same
    budget, so it is not recomputed. ``None`` for anything that is not a FitInputs."""
    if inputs is None or not hasattr(inputs, "cards") or not hasattr(inputs, "resident"):
        return None
    cards = tuple((c.rank, c.label, c.key, c.cuda_visible_bytes, c.total_source,
                   _q(c.used_bytes), _q(c.free_bytes),
                   tuple((h.pid, h.name, h.container, _q(h.used_bytes)) for h in c.holders))
                  for c in inputs.cards)
    host = None if inputs.host is None else (inputs.host.total_bytes,
                                             _q(inputs.host.available_bytes))
    return (inputs.resident, inputs.candidate, inputs.seat, cards, inputs.gpu_unavailable,
            host, inputs.node_gpu_count, inputs.declared_total)


_BUDGETS: list[tuple[tuple, tuple[Any, list]]] = []
"""The last few :func:`profile_budgets` results with their key (inputs' signature, what-if);
compared by equality (a signature may hold lists)."""

_LOCK = threading.Lock()
"""Guards :data:`_BUDGETS` (the exporter computes in its reading thread, the TUI on its UI
thread)."""


def profile_budgets(inputs: Any, whatif: Any = None) -> tuple[Any, list]:
    """:func:`seat_console.fit.inputs.compute_budgets` of ``inputs`` (a FitInputs) and
    ``whatif`` → ``(Comparison, overlay rows)``, computed once per change of
    :func:`fit_signature`: the status line's verdict, the compact view, the full view and the
    exporter share one computation. Pure arithmetic (no I/O); raises what
    ``compute_budgets`` raises."""
    from seat_console.fit.inputs import compute_budgets

    blank = whatif is None or all(v is None for v in whatif.model_dump().values())
    key = (fit_signature(inputs), None if blank else whatif.model_dump_json())
    if key[0] is not None:
        with _LOCK:
            for k, got in _BUDGETS:
                if k == key:
                    return got
    got = compute_budgets(inputs, whatif)
    if key[0] is not None:
        with _LOCK:
            _BUDGETS.append((key, got))
            del _BUDGETS[:-4]
    return got


def gpu_fit_signature(snapshot: Any) -> tuple | None:
    """What the fit budget takes from a GPU snapshot: per card its key, CUDA-visible total and
    used memory in steps of :data:`SIGNIFICANT_BYTES`. The app re-reads the fit inputs when
    this changes. ``None`` without a snapshot."""
    cards = getattr(snapshot, "cards", None)
    if cards is None:
        return None
    out = []
    for c in cards:
        m = c.memory
        out.append((c.key, c.state, None if m is None else m.cuda_visible_bytes,
                    None if m is None else _q(m.used_bytes)))
    return tuple(out)


__all__ = ["SIGNIFICANT_BYTES", "fit_signature", "gpu_fit_signature", "profile_budgets"]
