"""The core: the shapes and rules every layer shares, with no I/O of the node and no Textual or
Rich — reading models (:mod:`.base`: ``Frozen``, ``Unavailable``, ``Source``), the time and
display rules in one place (:mod:`.fmt`), untrusted-input helpers (:mod:`.untrusted`,
:mod:`.partial`), checkpoint summary models (:mod:`.checkpoint`), GPU identity rules
(:mod:`.gpu_ids`) and the seat profile (:mod:`.profile`, :mod:`.profile_path`).

Everything above may import it; it imports nothing of the package above it (the layer contract
in ``pyproject.toml``).
"""
