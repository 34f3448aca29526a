"""The status line's fit word is the worst of the two sides, NO VERDICT included (issue 31: the
status line said `fit fits` while the Fit panel said the candidate had NO VERDICT)."""

from __future__ import annotations

import screen_fixtures as F
from seat_console.fit.inputs import compute_budgets
from seat_console.snapshot.fit_reading import gather_fit_inputs
from seat_console.snapshot.verdicts import NO_CANDIDATE, fit_fact


def _both_fit():
    comp = compute_budgets(F.fit_inputs())[0]
    assert comp.resident is not None and comp.candidate is not None
    assert comp.resident.verdict.fits and comp.candidate.verdict.fits
    return comp


def test_fits_only_when_both_sides_fit() -> None:
    assert fit_fact(_both_fit()).words == "fits"


def test_candidate_no_verdict_is_not_fits() -> None:
    comp = _both_fit()
    nv = comp.model_copy(update={"candidate": comp.candidate.model_copy(
        update={"no_verdict": "shard 3 could not be scanned"})})
    f = fit_fact(nv)
    assert (f.words, f.level) == ("NO VERDICT (candidate)", "bad")


def test_resident_worse_is_named() -> None:
    comp = _both_fit()
    over = compute_budgets(gather_fit_inputs(F.default_loaded(), None))[0]
    assert over.candidate is not None and not over.candidate.verdict.fits
    mixed = comp.model_copy(update={"resident": over.candidate})
    f = fit_fact(mixed)
    assert f.words.startswith("OVER: ") and f.words.endswith(" must leave (resident)")
    assert f.level == "bad"


def test_unbudgetable_candidate_is_unknown_not_fits() -> None:
    comp = _both_fit()
    na = comp.model_copy(update={"candidate": None, "candidate_unavailable": "no config.json"})
    assert fit_fact(na).words == "n/a (candidate)"
    none = comp.model_copy(update={"candidate": None, "candidate_unavailable": NO_CANDIDATE})
    assert fit_fact(none).words == "fits"        # no candidate: the resident alone decides


def test_unsupported_engine_version_of_one_side_shows_on_the_status_line() -> None:
    """Issue 34: a side served by a vLLM outside the supported ranges has no verdict, and the
    status line says so (never 'fits' from the other side)."""
    from seat_console.fit.engine_rules import parse_engine

    inputs = F.fit_inputs()
    assert compute_budgets(inputs)[0].candidate.verdict.fits
    old = inputs.model_copy(update={"candidate": inputs.candidate.model_copy(update={
        "engine_version": parse_engine("vllm==0.31.0", "the profile's candidate.engine")})})
    comp = compute_budgets(old)[0]
    assert comp.candidate.no_verdict and ">=0.34,<0.35" in comp.candidate.no_verdict
    f = fit_fact(comp)
    assert (f.words, f.level) == ("NO VERDICT (candidate)", "bad")


def test_the_words_are_fits_own_figure_and_a_refused_start_says_so() -> None:
    """The headline's figure is the one ``fit`` prints ("31.94 GiB per card must leave": two
    trials read "OVER by 24.74" beside it as two answers); a TP size that does not divide the
    heads reads "refuses to start", never "KV short by 0.00"."""
    from seat_console.fit.inputs import WhatIf

    over = compute_budgets(gather_fit_inputs(F.default_loaded(), None))[0]
    assert fit_fact(over).words == "OVER: 31.94 GiB per card must leave"
    tp3 = compute_budgets(gather_fit_inputs(F.default_loaded(), None),
                          WhatIf(tensor_parallel_size=3))[0]
    assert fit_fact(tp3).words.startswith("OVER: vLLM refuses to start"), fit_fact(tp3)
