"""The probe: a streaming load client for the seat's vLLM server, phases, honest accounting,
interference detection and kept runs (issue 9).

Modules: :mod:`.client` (one timed streaming request), :mod:`.stats` (per-phase figures),
:mod:`.prompts` (the shipped, deterministic prompt set), :mod:`.engine_counters` (the engine's
``/metrics`` counters and KV-cache capacity), :mod:`.interference` (what disrupts a run),
:mod:`.runner` (phases and the run), :mod:`.store` (run directories under the XDG data dir).
The probe changes nothing on the node; it needs an active hold (or ``--force`` with a reason).
"""
