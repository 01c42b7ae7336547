"""The synthetic runs of benchmarks/plateau_shapes.py have the shapes and noise they claim."""

from __future__ import annotations

import numpy as np
import pytest

from benchmarks.plateau_shapes import AR_COEFFICIENT, SHAPES, noise, shape_curve, summarise, synthetic_run


def test_ar1_noise_has_the_stated_sd_and_lag_one_correlation():
    draws = noise("ar1", 0.02, 200_000, np.random.default_rng(0))
    assert np.std(draws) == pytest.approx(0.02, rel=0.02)
    assert np.corrcoef(draws[:-1], draws[1:])[0, 1] == pytest.approx(AR_COEFFICIENT, abs=0.01)
    independent = noise("iid", 0.02, 200_000, np.random.default_rng(0))
    assert abs(np.corrcoef(independent[:-1], independent[1:])[0, 1]) < 0.01


@pytest.mark.parametrize("shape", SHAPES)
def test_every_shape_starts_at_r0_and_levels_off_near_a(shape):
    x = np.linspace(0.0, 1.0, 401)
    curve = shape_curve(shape, x, 0.2, 0.7, np.random.default_rng(1))
    assert curve[0] == pytest.approx(0.2, abs=0.01)
    late = curve[x >= 0.75]
    assert np.all(np.abs(late - 0.7) < 0.04) and np.ptp(late) < 0.02


def test_a_run_has_step_zero_at_r0_and_rewards_in_range():
    compute, reward = synthetic_run("step", "ar1", 0.02, np.random.default_rng(2))
    assert compute[0] == 0.0 and np.all(np.diff(compute) > 0) and 11 <= compute.size <= 41
    assert np.all((reward >= 0.0) & (reward <= 1.0))


def test_summary_counts_reads_advice_and_refusals():
    rows = [
        {"settled": 0.5, "A": 0.51, "read": True, "told_to_run_longer": False},
        {"settled": 0.5, "A": 0.6, "read": False, "told_to_run_longer": True},
        {"settled": 0.5, "refused": "flat run"},
    ]
    assert summarise(rows) == {
        "runs": 3,
        "read": 1,
        "told_to_run_longer": 1,
        "refused": 1,
        "median_abs_gap": pytest.approx(0.055),
    }
