"""Evidence: turning probe runs into a seat decision a reviewer can trust.

Modules:

* :mod:`seat_console.evidence.stats` — Wilson 95 % score intervals, pass^k, and the
  "no difference can be claimed" rule for two arms whose intervals overlap (pure).
* :mod:`seat_console.evidence.fidelity` — greedy decoding with ``logprobs`` = 20 through the
  engine's ``/v1/completions``; per-position comparison of sampled token IDs and top-20 sets
  (a localisation signal, not a full-logit or KL measurement).
* :mod:`seat_console.evidence.canaries` — code-judged canaries (exact arithmetic, a tool call
  validated against its JSON schema, a snippet that parses, prose within length bounds).
* :mod:`seat_console.evidence.runs` — the run-summary model the report reads.
* :mod:`seat_console.evidence.report` — the report (identity, fit, phases, fidelity, canaries,
  retained failures, claims, SHA-256 of every raw file) and its ``--verify``.
* :mod:`seat_console.evidence.bracket` — the A/B/B/A bracket plan and pairing.
"""
