import numpy as np
import pytest

from scalerl.forecast.curves import sigmoid_reward
from scalerl.forecast.fitting import fit_sigmoid
from scalerl.forecast.uncertainty import residual_noise_sd, residual_pool, student_t_dof


def test_residual_noise_sd_formula_and_floor():
    residual = np.array([0.02, -0.02, 0.02, -0.02, 0.02, -0.02])
    assert residual_noise_sd(residual, 3, noise_floor=0.0) == pytest.approx(np.sqrt(6 * 0.0004 / 3))
    assert residual_noise_sd(residual * 0.01, 3) == 0.01
    assert residual_noise_sd(residual[:3], 3, noise_floor=0.004) == 0.004  # no residual dof
    assert student_t_dof(10, 3) == 7 and student_t_dof(4, 3) == 2


def test_residual_pool_is_inflated_and_floored():
    residual = np.array([0.03, -0.01, 0.02, -0.04, 0.0, 0.0])
    pool = residual_pool(residual, 0.0, 3)
    assert np.allclose(pool, (residual - residual.mean()) * np.sqrt(6 / 3))
    floored = residual_pool(residual * 1e-3, 0.01, 3)
    assert np.sqrt(np.mean(floored**2)) == pytest.approx(0.01)
    exact = residual_pool(np.zeros(5), 0.02, 3)
    assert np.std(exact) > 0.01 and np.mean(exact) == pytest.approx(0.0, abs=1e-12)


def test_intervals_shrink_with_less_noise():
    compute = np.concatenate([[0.0], np.linspace(200.0, 20000.0, 15)])
    clean = sigmoid_reward(compute, 0.6, 1.8, 3000.0, 0.2)
    rng = np.random.default_rng(0)
    noisy = clean + rng.normal(0, 0.03, compute.size) * (compute > 0)
    quiet = clean + rng.normal(0, 0.003, compute.size) * (compute > 0)
    wide = fit_sigmoid(compute, noisy, n_bootstrap=60)
    narrow = fit_sigmoid(compute, quiet, n_bootstrap=60, noise_floor=0.001)
    floored = fit_sigmoid(compute, quiet, n_bootstrap=60)
    width = lambda fit: np.subtract(*fit.conf_int()["A"][::-1])  # noqa: E731
    assert width(wide) > 3 * width(narrow)
    assert width(floored) > 2 * width(narrow)
    assert wide.noise_sd == pytest.approx(0.03, rel=0.5) and floored.noise_sd == 0.01


def test_bootstrap_is_reproducible_for_a_seed():
    compute = np.concatenate([[0.0], np.linspace(200.0, 20000.0, 10)])
    reward = sigmoid_reward(compute, 0.6, 1.8, 3000.0, 0.2) + 0.01 * np.sin(np.arange(11)) * (compute > 0)
    first = fit_sigmoid(compute, reward, seed=7, n_bootstrap=30)
    second = fit_sigmoid(compute, reward, seed=7, n_bootstrap=30)
    assert np.array_equal(first.param_draws, second.param_draws)
    assert first.interval(5e4) == second.interval(5e4)


def synthetic_run(rng):
    """Random ScaleRL-like run: binomial pass-rate noise, linear eval grid, any compute unit."""
    a = rng.uniform(0.4, 0.9)
    r0 = rng.uniform(0.0, 0.4) * a
    b = rng.uniform(0.8, 3.0)
    c_max = 10 ** rng.uniform(-2, 18)
    c_mid = c_max * 10 ** rng.uniform(-1.5, -0.4)
    compute = np.linspace(0.0, c_max, rng.integers(10, 30) + 1)
    prompts = rng.choice([300, 1000])
    reward = rng.binomial(prompts, sigmoid_reward(compute, a, b, c_mid, r0)) / prompts
    return compute, reward


@pytest.mark.slow
def test_prediction_band_coverage_is_near_nominal_on_synthetic_ensemble():
    rng = np.random.default_rng(2024)
    covered = []
    for _ in range(40):
        compute, reward = synthetic_run(rng)
        train = compute <= 0.5 * compute.max()
        fit = fit_sigmoid(compute[train], reward[train], n_bootstrap=100)
        lo, hi = fit.interval(compute[-3:], level=0.8)
        covered += list((lo <= reward[-3:]) & (reward[-3:] <= hi))
    assert 0.70 <= np.mean(covered) <= 0.92
