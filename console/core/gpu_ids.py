"""GPU identity rules: how a profile's ``node.gpus`` entry (an index, a ``GPU-…`` / ``MIG-…``
UUID or a PCI bus id) names a card, and the one spelling of a PCI bus id. Pure (no NVML, no
I/O): used by the GPU source, the fit arithmetic and the fit inputs.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any


def match_seat(entry: str, index: int | None, uuid: str | None,
               pci_bus_id: str | None, mig_uuids: Iterable[str | None] = ()) -> bool:
    """Does profile ``node.gpus`` entry ``entry`` name this card?

    A decimal string matches the NVML ``index`` — NVML's enumeration order (PCI bus order, as
    ``nvidia-smi`` numbers cards), which is *not* the CUDA device ordinal (CUDA orders by speed
    unless ``CUDA_DEVICE_ORDER=PCI_BUS_ID``, and renumbers under ``CUDA_VISIBLE_DEVICES``);
    ``GPU-…`` matches the card's UUID and ``MIG-…`` the UUID of one of its MIG instances
    (``mig_uuids``), case-insensitive, as ``nvidia-smi -L`` prints them; anything with a ``:``
    matches the PCI bus id, in any of its spellings: NVML's ``00000000:2A:00.0``,
    ``0000:2a:00.0`` (sysfs) or ``lspci``'s short ``2a:00.0`` (domain 0). Never raises.
    """
    e = entry.strip()
    if e.isascii() and e.isdigit():
        return index is not None and int(e) == index
    if e.upper().startswith("GPU-"):
        return uuid is not None and uuid.lower() == e.lower()
    if e.upper().startswith("MIG-"):
        return any(m is not None and m.lower() == e.lower() for m in mig_uuids)
    if ":" in e and pci_bus_id:
        mine = norm_bus_id(e)
        return mine is not None and mine == norm_bus_id(pci_bus_id)
    return False


def entry_identity(entry: str) -> str:
    """One spelling per device for a ``node.gpus`` entry, without a reading: ``index:N`` for
    an NVML index (``"0"``, ``"00"``), ``pci:…`` for a bus id in any spelling
    (:func:`norm_bus_id`), a UUID lower-cased. Two entries with one identity name one card
    (the profile refuses them; the fit budget says so too). Never raises."""
    e = entry.strip()
    if e.isascii() and e.isdigit():
        return f"index:{int(e)}"
    if ":" in e and not e.upper().startswith(("GPU-", "MIG-")):
        return f"pci:{norm_bus_id(e) or e.lower()}"
    return e.lower()


def norm_bus_id(bus_id: str) -> str | None:
    """A PCI bus id in one spelling, ``dddddddd:bb:dd.f`` lower-case hex: ``2a:00.0``
    (``lspci``, domain 0), ``0000:2a:00.0`` and ``00000000:2A:00.0`` (NVML) all give
    ``00000000:2a:00.0``. ``None`` for text that is not a bus id. Never raises."""
    parts = bus_id.strip().lower().split(":")
    if len(parts) == 2:
        parts = ["0", *parts]
    if len(parts) != 3:
        return None
    domain, bus, devfn = parts
    dev, _, fn = devfn.partition(".")
    try:
        d, b, v, f = int(domain, 16), int(bus, 16), int(dev, 16), int(fn or "0", 16)
    except ValueError:
        return None
    if not (0 <= d <= 0xFFFFFFFF and 0 <= b <= 0xFF and 0 <= v <= 0x1F and 0 <= f <= 7):
        return None
    return f"{d:08x}:{b:02x}:{v:02x}.{f:x}"


def card_matches(entry: str, card: Any) -> bool:
    """:func:`match_seat` of ``entry`` against a :class:`GpuCard` (its MIG instances too)."""
    return match_seat(entry, getattr(card, "index", None), getattr(card, "uuid", None),
                      getattr(card, "pci_bus_id", None),
                      [getattr(m, "uuid", None) for m in getattr(card, "mig_instances", None)
                       or []])


def seat_conflicts(entries: Iterable[str], cards: Iterable[Any]) -> list[str]:
    """Profile ``node.gpus`` entries that resolve to the same device — two TP ranks on one card
    (or one MIG instance), which vLLM cannot run — in words, one per device; ``[]`` when every
    entry names its own. Entries naming different MIG instances of one card are distinct
    devices. Never raises."""
    out: list[str] = []
    for card in cards:
        hits = [e for e in entries if card_matches(e, card)]
        whole = [e for e in hits if not e.strip().upper().startswith("MIG-")]
        migs: dict[str, list[str]] = {}
        for e in hits:
            if e.strip().upper().startswith("MIG-"):
                migs.setdefault(e.strip().lower(), []).append(e)
        label = (f"GPU {getattr(card, 'index', '?')} "
                 f"({getattr(card, 'uuid', None) or getattr(card, 'pci_bus_id', None) or '?'})")
        if len(whole) > 1 or (whole and migs):
            out.append(f"node.gpus entries {', '.join(repr(e) for e in hits)} all name {label}:"
                       " two TP ranks cannot share one card; list each card once")
        for same in migs.values():
            if len(same) > 1:
                out.append(f"node.gpus entries {', '.join(repr(e) for e in same)} name the same "
                           f"MIG instance of {label}; list each device once")
    return out


__all__ = ["entry_identity", "card_matches", "match_seat", "norm_bus_id", "seat_conflicts"]
