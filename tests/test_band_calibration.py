"""Known answers for the horizon calibration of the forecast band (forecast.band_calibration)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from scalerl.errors import InputError
from scalerl.forecast.band_calibration import (
    HORIZON_EDGES,
    MIN_PAIRS_PER_BIN,
    PROBABILITIES,
    HeldOutScores,
    band_multipliers,
    build_table,
    gain_ahead,
    horizon,
    horizon_bin,
    lower_spread,
    normalised_score,
    shipped_table,
    weighted_quantile,
)


def test_horizon_is_log_compute_ahead_and_zero_inside_the_data():
    assert horizon([0.0, 5.0, 10.0, 10.0 * np.e], 10.0) == pytest.approx([0.0, 0.0, 0.0, 1.0])
    assert list(horizon_bin([0.0, 0.24, 0.25, 0.7, 1.0, 5.0])) == [0, 0, 1, 2, 3, 3]


def test_spread_below_the_forecast_grows_with_the_gain_still_ahead():
    """g = max(m - r_now, 0) beyond C_last (0 within the data and where the forecast is below the
    present level), s_lo = sqrt(s^2 + g^2), and the score divides by s_lo below the forecast only."""
    centre = np.array([0.50, 0.62, 0.66, 0.58])
    gain = gain_ahead(centre, [5.0, 12.0, 20.0, 30.0], 10.0, 0.60)
    assert gain == pytest.approx([0.0, 0.02, 0.06, 0.0])
    spread_below = lower_spread([0.03, 0.03, 0.08, 0.01], gain)
    assert spread_below == pytest.approx([0.03, np.sqrt(0.03**2 + 0.02**2), 0.10, 0.01])
    score = normalised_score([0.53, 0.58, 0.61, 0.60], centre, [0.03, 0.03, 0.08, 0.01], spread_below)
    assert score == pytest.approx([1.0, -0.04 / np.sqrt(0.0013), -0.5, 2.0])


def test_weighted_quantile_by_hand():
    # Equal weights: midpoints of four values sit at 1/8, 3/8, 5/8, 7/8.
    assert weighted_quantile([4, 1, 3, 2], [1, 1, 1, 1], [0.125, 0.5, 0.875]) == pytest.approx([1.0, 2.5, 4.0])
    # A value with three times the weight moves the median onto it.
    assert weighted_quantile([1, 2], [3, 1], [0.5]) == pytest.approx([1.0 + (0.5 - 0.375) / 0.5])


def cells_from(rng, stratum, scale, n_cells, h=0.1):
    return [HeldOutScores(stratum, np.full(10, h), rng.normal(0.0, scale, 10)) for _ in range(n_cells)]


def test_table_recovers_normal_quantiles_per_stratum():
    rng = np.random.default_rng(0)
    cells = cells_from(rng, "flat_end", 1.0, 400) + cells_from(rng, "rising", 2.0, 400)
    table = build_table(cells)
    p90 = table["probabilities"].index(0.9)
    assert table["strata"]["flat_end"]["quantiles"][0][p90] == pytest.approx(1.2816, abs=0.05)
    assert table["strata"]["rising"]["quantiles"][0][p90] == pytest.approx(2 * 1.2816, abs=0.1)
    lower, upper = band_multipliers(table, "rising", [0.1], 0.8)
    assert lower[0] == pytest.approx(-2 * 1.2816, abs=0.12) and upper[0] == pytest.approx(2 * 1.2816, abs=0.12)


def test_each_run_weighs_the_same_whatever_its_length():
    """One long run of +3 scores against many short runs of 0: the long one is one vote of many."""
    short = [HeldOutScores("rising", np.full(2, 0.1), np.zeros(2)) for _ in range(30)]
    long = [HeldOutScores("rising", np.full(500, 0.1), np.full(500, 3.0))]
    median = build_table(short + long)["strata"]["rising"]["quantiles"][0][PROBABILITIES.index(0.5)]
    assert median == pytest.approx(0.0)


def test_a_sparse_bin_borrows_its_strata_scores():
    rng = np.random.default_rng(1)
    cells = cells_from(rng, "rising", 1.0, 50, h=0.1) + cells_from(rng, "rising", 5.0, MIN_PAIRS_PER_BIN - 1, h=2.0)
    cells += cells_from(rng, "flat_end", 1.0, 50)
    table = build_table(cells)
    far = table["strata"]["rising"]["pairs"][len(HORIZON_EDGES)]
    assert far == 50 + MIN_PAIRS_PER_BIN - 1  # pooled over the stratum, not the six far pairs alone


def test_band_multipliers_hold_the_centre_and_reject_bad_levels():
    cells = [HeldOutScores(s, np.full(5, 0.1), np.full(5, 1.0)) for s in ("flat_end", "rising") for _ in range(20)]
    lower, upper = band_multipliers(build_table(cells), "rising", [0.1], 0.5)
    assert lower[0] == 0.0 and upper[0] == pytest.approx(1.0)  # all scores +1: the band still holds m
    with pytest.raises(InputError):
        band_multipliers(build_table(cells), "rising", [0.1], 1.5)
    with pytest.raises(InputError):
        build_table([])


def test_shipped_table_covers_every_stratum_and_bin_and_is_monotone():
    table = shipped_table()
    assert table["probabilities"] == list(PROBABILITIES)
    for stratum in ("flat_end", "rising"):
        rows = np.asarray(table["strata"][stratum]["quantiles"])
        assert rows.shape == (len(HORIZON_EDGES) + 1, len(PROBABILITIES))
        assert np.all(np.diff(rows, axis=1) >= 0)


@pytest.mark.slow
def test_shipped_table_reproduces_from_its_rebuild_command(tmp_path):
    """`python -m benchmarks.band_table --check` refits the bundled curves and compares (~5 min)."""
    from benchmarks.band_table import TABLE, main

    assert json.loads(TABLE.read_text())["command"] == "python -m benchmarks.band_table"
    assert main(["--check"]) == 0
