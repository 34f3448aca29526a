"""The probe's prompt set: shipped with the package (``prompts.json``), deterministic.

The file holds ``{"name", "generator", "prompts": [str, ...]}``; it was written once (its
``generator`` says how) and is what every probe sends, so two runs of the same profile send the
same bytes. Its sha256 is part of a run's identity.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from seat_console.core.untrusted import InputError, load_json

BUILTIN = "builtin:seat-probe-v1"
"""The profile value naming the shipped set."""


class PromptSetError(ValueError):
    """A prompt set file is missing or not ``{"prompts": [non-empty strings]}``; the message
    names the file and the fix."""


@dataclass(frozen=True)
class PromptSet:
    """``name``; ``prompts`` (non-empty strings); ``sha256`` of the file's bytes; ``source``
    (``builtin:…`` or a path)."""

    name: str
    prompts: tuple[str, ...]
    sha256: str
    source: str

    def pick(self, i: int) -> tuple[int, str]:
        """The ``i``-th prompt of a phase, cycling through the set: ``(prompt_id, text)``."""
        pid = i % len(self.prompts)
        return pid, self.prompts[pid]


def parse_prompt_set(raw: bytes, source: str) -> PromptSet:
    """Parse a prompt set file's bytes. Raises :class:`PromptSetError` naming ``source``."""
    try:   # bounded: size, nesting, finite numbers (untrusted.load_json)
        doc = load_json(raw, source)
    except InputError as exc:
        raise PromptSetError(f"{source}: {exc.problem}; give a file like "
                             '{"prompts": ["...", ...]}') from None
    prompts = doc.get("prompts") if isinstance(doc, dict) else None
    if (not isinstance(prompts, list) or not prompts
            or not all(isinstance(p, str) and p for p in prompts)):
        raise PromptSetError(f'{source}: needs "prompts": a non-empty list of non-empty '
                             "strings")
    name = doc.get("name") if isinstance(doc.get("name"), str) else Path(source).stem
    return PromptSet(name=name, prompts=tuple(prompts), sha256=hashlib.sha256(raw).hexdigest(),
                     source=source)


def load_prompt_set(spec: str = BUILTIN) -> PromptSet:
    """The set named by the profile's ``probe.prompt_set``: :data:`BUILTIN` or a file path.
    Raises :class:`PromptSetError` for a missing/unreadable/invalid file."""
    if spec == BUILTIN:
        raw = resources.files("seat_console.probe").joinpath("prompts.json").read_bytes()
        return parse_prompt_set(raw, BUILTIN)
    p = Path(spec).expanduser()
    try:
        raw = p.read_bytes()
    except OSError as exc:
        raise PromptSetError(f"probe.prompt_set {p}: cannot read ({exc.strerror}); give an "
                             f"existing JSON file or {BUILTIN!r}") from None
    return parse_prompt_set(raw, str(p))


NONCE_RE = r"^[0-9a-f]{16}\n"
"""What :func:`with_nonce` puts before a prompt (a regular expression)."""


def phase_nonce(run_id: str, phase: str, prompt_id: int) -> str:
    """The nonce of one prompt in one phase of one run (a leg is one run): 16 hex digits of
    SHA-256(``run_id/phase/prompt_id``). Unique per phase and leg, so no phase's prompts share
    a prefix-cache block with another's; per prompt, so two prompts of a phase share none
    through the nonce either (a shared nonce would be a shared first block), while a prompt
    repeated within the phase keeps its own — as after a reset."""
    return hashlib.sha256(f"{run_id}/{phase}/{prompt_id}".encode()).hexdigest()[:16]


def with_nonce(text: str, nonce: str | None) -> str:
    """``text`` behind ``"<nonce>\n"`` (at the very start: vLLM's prefix cache hashes blocks
    from the first token, so every block differs); ``text`` when ``nonce`` is ``None``."""
    return text if nonce is None else f"{nonce}\n{text}"


def strip_nonce(text: str) -> str:
    """``text`` without a leading :func:`with_nonce` prefix (for engine doubles and readers)."""
    m = re.match(NONCE_RE, text)
    return text[m.end():] if m else text


__all__ = ["BUILTIN", "NONCE_RE", "phase_nonce", "strip_nonce", "with_nonce", "PromptSet", "PromptSetError", "load_prompt_set", "parse_prompt_set"]
