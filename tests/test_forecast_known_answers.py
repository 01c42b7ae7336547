"""Known answers of the forecaster on early-stopped and edge-case curves: intervals widen when the
data stop before the inflection, the seed form R0 = 0 recovers its parameters, and extreme inputs
(compute beyond the float range, huge R0, absurd draw counts) give one clear ScaleRL error."""

import json
import math

import numpy as np
import pytest

from scalerl.errors import ScaleRLError
from scalerl.forecast.curves import sigmoid_reward
from scalerl.forecast.fitting import fit_sigmoid

N_BOOTSTRAP = 20

TRUE_A, TRUE_B, TRUE_C_MID, TRUE_R0 = 0.61, 1.92, 2542.0, 0.1


def noisy_paper_curve(max_compute, n_points=16, noise_sd=0.01, seed=5):
    """The ScaleRL 8B curve sampled at n_points log-spaced computes up to max_compute, plus noise."""
    compute = np.concatenate([[0.0], np.geomspace(max_compute / 50.0, max_compute, n_points - 1)])
    reward = sigmoid_reward(np.maximum(compute, 1e-12), TRUE_A, TRUE_B, TRUE_C_MID, TRUE_R0)
    reward[0] = TRUE_R0
    reward[1:] += np.random.default_rng(seed).normal(0.0, noise_sd, n_points - 1)
    return compute, np.clip(reward, 0.0, 1.0)


@pytest.mark.parametrize("noise_seed", [4, 5])
def test_intervals_widen_when_data_stop_before_the_inflection(noise_seed):
    early = fit_sigmoid(*noisy_paper_curve(0.6 * TRUE_C_MID, seed=noise_seed), n_draws=60)
    full = fit_sigmoid(*noisy_paper_curve(10.0 * TRUE_C_MID, seed=noise_seed), n_draws=60)

    def width(interval):
        return interval[1] - interval[0]

    assert not early.ceiling_identified and full.ceiling_identified
    assert width(early.conf_int(0.8)["A"]) > 3.0 * width(full.conf_int(0.8)["A"])
    # One target, 4x the early fit's last compute (2.4 C_mid): inside the full run's data.
    target = 4.0 * early.compute.max()
    early_band, full_band = early.interval(target, 0.8), full.interval(target, 0.8)
    assert width(early_band) > 3.0 * width(full_band)
    assert full_band[0] < sigmoid_reward(target, TRUE_A, TRUE_B, TRUE_C_MID, TRUE_R0) < full_band[1]
    assert early.verdict.kind == "still_rising" and full.verdict.kind == "plateaued"
    assert full.conf_int(0.8)["A"][0] - 0.01 < TRUE_A < full.conf_int(0.8)["A"][1] + 0.01


def test_noise_free_seed_form_recovers_parameters():
    compute = np.geomspace(0.05, 40.0, 14) * 1e6
    reward = sigmoid_reward(compute, 0.83, 2.7, 3.1e6, 0.0)
    fit = fit_sigmoid(compute, reward, r0=0.0, n_draws=N_BOOTSTRAP)
    assert fit.r0 == 0.0 and fit.n_points == 14
    # posterior medians: the noise floor (0.002) leaves the posterior of a noise-free curve a width
    assert fit.a == pytest.approx(0.83, rel=3e-3)
    assert fit.b == pytest.approx(2.7, rel=1e-2)
    assert fit.c_mid == pytest.approx(3.1e6, rel=1e-2)


def test_compute_spanning_beyond_float_range_is_a_clear_error():
    # 5e-324 / 2 underflows to 0 and its log to -inf: found by the property test above.
    with pytest.raises(ScaleRLError, match="orders of magnitude"):
        fit_sigmoid([0.0, 5e-324, 1.0, 2.0, 3.0], [0.0, 0.1, 0.3, 0.5, 0.6], n_draws=N_BOOTSTRAP)


def test_to_dict_writes_null_for_an_infinite_prediction_compute():
    # Found by the query property: predict_at=(inf,) put a bare Infinity in the "x" field.
    compute = np.geomspace(10, 1e4, 10)
    fit = fit_sigmoid(compute, sigmoid_reward(compute, 0.7, 1.5, 300.0, 0.0), r0=0.0, n_draws=N_BOOTSTRAP)
    prediction = fit.to_dict(0.8, predict_at=(math.inf,))["predictions"][0]
    json.dumps(prediction, allow_nan=False)
    # at infinite compute the point forecast is its ceiling: the posterior median of A, the reported A
    assert prediction["x"] is None and prediction["reward"] == pytest.approx(fit.a)
    assert prediction["reward"] == pytest.approx(0.7, abs=0.01)


@pytest.mark.parametrize("r0", [1.5, -0.2, math.nan, math.inf])
def test_r0_outside_the_reward_range_is_a_clear_error(r0):
    # Found by the options property: r0 = 16777216 reached scipy as inconsistent bounds.
    compute = np.geomspace(10, 1e4, 10)
    with pytest.raises(ScaleRLError, match="r0"):
        fit_sigmoid(compute, sigmoid_reward(compute, 0.7, 1.5, 300.0, 0.0), r0=r0, n_draws=N_BOOTSTRAP)


@pytest.mark.parametrize("reward_range", [(0.0, math.inf), (-math.inf, 1.0), (0.0, math.nan), (1.0, 0.0)])
def test_non_finite_or_empty_reward_range_is_a_clear_error(reward_range):
    # Found by the CLI options property: --reward-range 0 1e400 reached scipy as an infinite bound.
    compute = np.geomspace(10, 1e4, 10)
    with pytest.raises(ScaleRLError, match="reward_range"):
        fit_sigmoid(
            compute, sigmoid_reward(compute, 0.7, 1.5, 300.0, 0.0), reward_range=reward_range, n_draws=N_BOOTSTRAP
        )


def test_huge_r0_above_every_reward_without_a_range_is_a_fit_error():
    # Found by the options property: R0 = 33554432 over rewards of 0 gave A bounds lower == upper.
    with pytest.raises(ScaleRLError):
        fit_sigmoid([0.1, 0.2, 0.4], [0.0, 0.0, 0.0], r0=33554432.0, reward_range=None, n_draws=N_BOOTSTRAP)


def test_absurd_n_draws_is_a_config_error_not_a_memory_error():
    # Found by the CLI options property: --n-draws 4326646508 tried to allocate 97 GiB.
    compute = np.geomspace(10, 1e4, 10)
    with pytest.raises(ScaleRLError, match="n_draws"):
        fit_sigmoid(compute, sigmoid_reward(compute, 0.7, 1.5, 300.0, 0.0), n_draws=4_326_646_508)


def test_reward_too_large_to_square_is_an_input_error():
    # Found by the messy-curve property: a reward of 1e300 (no reward range) overflowed the residuals.
    with pytest.raises(ScaleRLError, match="reward"):
        fit_sigmoid([0.1, 0.11, 0.19, 0.43], [0.0, 1e300, 0.0, 0.0], reward_range=None, n_draws=N_BOOTSTRAP)


def test_c_mid_prior_puts_half_its_mass_from_a_decade_below_the_first_evaluation():
    # log C_mid's prior: an even mixture of a uniform on [u_min - log 1000, u_max + log 1000] and one
    # on [u_min - log 10, u_max + log 1000]; u spans log(1e-2) .. 0 here.
    from scalerl.forecast.posterior import log_c_mid_prior
    from scalerl.forecast.sigmoid_solver import SolverProblem

    log_compute = np.log(np.geomspace(1e-2, 1.0, 9))
    s_lo, s_hi, s_near = math.log(1e-2) - math.log(1e3), math.log(1e3), math.log(1e-2) - math.log(10.0)
    problem = SolverProblem(
        log_compute, np.linspace(0.2, 0.6, 9), 0.1, np.array([0.1, 0.1, s_lo]), np.array([1.0, 12.0, s_hi])
    )
    grid = np.linspace(s_lo, s_hi, 400_001)
    density = np.exp(log_c_mid_prior(grid, problem))
    step = grid[1] - grid[0]
    assert np.sum(density) * step == pytest.approx(1.0, abs=1e-4)
    near = grid >= s_near
    # 0.5 from the near component + 0.5 x its share of the wide range.
    expected = 0.5 + 0.5 * (s_hi - s_near) / (s_hi - s_lo)
    assert np.sum(density[near]) * step == pytest.approx(expected, abs=1e-4)
    # Below the decade the density is the wide component's alone: 0.5 / (s_hi - s_lo).
    assert density[0] == pytest.approx(0.5 / (s_hi - s_lo))
