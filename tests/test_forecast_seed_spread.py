"""benchmarks/forecast_seed_spread.py: the spread over seeds, the best baseline and the verdict."""

from __future__ import annotations

import pytest

from benchmarks.forecast_seed_spread import best_baselines, spread
from benchmarks.render.forecast_checks import seed_spread, seed_verdict


def test_spread_is_the_min_max_and_mean_over_seeds():
    per_seed = [
        {"seed": 0, "metrics": {"m": 0.2}},
        {"seed": 1, "metrics": {"m": 0.1}},
        {"seed": 2, "metrics": {"m": 0.3}},
    ]
    assert spread(per_seed) == {"m": {"min": 0.1, "max": 0.3, "mean": pytest.approx(0.2)}}
    # a cell with no runs scores None on every seed and is left out
    assert spread([{"seed": 0, "metrics": {"m": 0.2, "empty": None}}]) == {"m": {"min": 0.2, "max": 0.2, "mean": 0.2}}


def test_the_best_baseline_is_the_lowest_one_and_never_scalerl():
    errors = {
        "all": {
            "scalerl": {"median_abs_error": 0.001, "mean_abs_error": 0.001},
            "grid": {"median_abs_error": 0.02, "mean_abs_error": 0.03},
            "persistence": {"median_abs_error": 0.01, "mean_abs_error": 0.05},
        }
    }
    band = {
        "scalerl": {"0.8": {"interval_score": 0.01}},
        "grid": {"0.8": {"interval_score": 0.2}},
        "persistence": {"0.8": {"interval_score": 0.1}},
    }
    accuracy = {
        "errors": {str(f): errors for f in (0.25, 0.5, 0.75)},
        "bands": {str(f): {"healthy": band} for f in (0.25, 0.5, 0.75)},
    }
    best = best_baselines(accuracy)
    assert best["median_error@0.5"] == ["persistence", 0.01]
    assert best["mean_error@0.5"] == ["grid", 0.03]
    assert best["interval_score80@0.25/healthy"] == ["persistence", 0.1]
    assert "interval_score80@0.25/still rising" not in best


def test_a_gap_inside_the_seed_range_is_a_tie():
    assert seed_verdict(0.10, 0.12, 0.13) == "better"
    assert seed_verdict(0.10, 0.12, 0.09) == "worse"
    assert seed_verdict(0.10, 0.12, 0.11) == "tie"


def test_the_table_names_each_cell_and_the_coverage_target():
    metrics = {"median_error@0.5": 0.0096, "coverage80@0.5/healthy": 0.86, "plateau_read": 27, "plateau_runs": 30}
    per_seed = [{"seed": 0, "metrics": metrics}, {"seed": 1, "metrics": {**metrics, "coverage80@0.5/healthy": 0.90}}]
    text = seed_spread(
        {
            "runs": 39,
            "seeds": [0, 1],
            "per_seed": per_seed,
            "spread": spread(per_seed),
            "baselines": {"median_error@0.5": ["paper_grid_bootstrap", 0.0093]},
        }
    )
    assert (
        "| median abs error, all runs | 50% | all | 0.0096 | 0.0096-0.0096 | 0.0093 (paper grid bootstrap) | worse |"
        in text
    )
    assert "| 80 % coverage | 50% | healthy | 0.86 | 0.86-0.90 | target 0.72-0.88 | missed on some seeds |" in text
    assert "Plateau read: 27 of 30 with seed 0, 27-27 over the seeds." in text
