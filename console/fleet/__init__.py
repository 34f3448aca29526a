"""The fleet core: seats read from any Prometheus-compatible query API (no Textual, no Rich)."""
