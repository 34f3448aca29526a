"""The snapshot: the node in one reading (:mod:`.reading`), the fit inputs gathered from the
sources (:mod:`.fit_reading`), the engine's rates between readings (:mod:`.engine_rates`).
Above sources and fit, below probe/evidence, actions and the fronts; no Textual, no Rich."""
