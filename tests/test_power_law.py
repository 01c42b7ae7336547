import numpy as np
import pytest

from scalerl.errors import FitError
from scalerl.forecast.curves import power_law_reward, sigmoid_reward
from scalerl.forecast.power_law import fit_power_law


@pytest.mark.parametrize("unit_scale", [1e-3, 1.0, 1e18])
def test_recovers_power_law_parameters_in_any_unit(unit_scale):
    compute = np.geomspace(1.0, 1e4, 12) * unit_scale
    d = 0.5 * unit_scale**0.4  # the same curve expressed in a rescaled compute unit
    reward = power_law_reward(compute, 0.8, d, 0.4)
    fit = fit_power_law(compute, reward)
    assert fit.a == pytest.approx(0.8, abs=1e-5)
    assert fit.b == pytest.approx(0.4, rel=1e-4)
    assert fit.d == pytest.approx(d, rel=1e-3)
    assert np.allclose(fit.predict(compute), reward, atol=1e-6)


def test_early_window_of_a_sigmoid_extrapolates_a_higher_ceiling():
    # The paper's observation: fitted on the early part, the power law overshoots the sigmoid ceiling.
    compute = np.geomspace(300.0, 12000.0, 12)
    reward = sigmoid_reward(compute, 0.645, 1.7, 10909.0, 0.2)
    fit = fit_power_law(compute, reward)
    assert fit.a > 0.645 + 0.05


def test_band_widens_with_extrapolation_and_contains_fit():
    rng = np.random.default_rng(0)
    compute = np.geomspace(1.0, 1e3, 10)
    reward = power_law_reward(compute, 0.7, 0.4, 0.5) + rng.normal(0, 0.01, 10)
    fit = fit_power_law(compute, reward)
    near = np.subtract(*fit.interval(1e3)[::-1])
    far = np.subtract(*fit.interval(1e6)[::-1])
    assert far > near > 0
    lo, hi = fit.interval(1e3, kind="mean")
    assert lo <= fit.predict(1e3) <= hi


def test_needs_four_positive_compute_points():
    with pytest.raises(FitError, match="too few"):
        fit_power_law([0, 1, 2, 3], [0.1, 0.2, 0.3, 0.35])


def test_robust_loss_resists_an_outlier():
    compute = np.geomspace(1.0, 1e4, 14)
    reward = power_law_reward(compute, 0.8, 0.5, 0.4)
    reward[6] = 0.05
    plain = fit_power_law(compute, reward)
    robust = fit_power_law(compute, reward, loss="soft_l1")
    assert abs(robust.a - 0.8) < 0.01 < abs(plain.a - 0.8)
