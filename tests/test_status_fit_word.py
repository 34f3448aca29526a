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
    assert f.words.startswith("OVER by ") and f.words.endswith(" (resident)")
    assert f.level == "bad"


def test_unbudgetable_candidate_is_unknown_not_fits() -> None:
    comp = _both_fit()
    na = comp.model_copy(update={"candidate": None, "candidate_unavailable": "no config.json"})
    assert fit_fact(na).words == "n/a (candidate)"
    none = comp.model_copy(update={"candidate": None, "candidate_unavailable": NO_CANDIDATE})
    assert fit_fact(none).words == "fits"        # no candidate: the resident alone decides
