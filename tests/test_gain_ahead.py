"""The factor on the gain beyond the last evaluation (forecast.posterior.gain_factor_draws) and the
fit's outputs under it: the fitted stretch unchanged, A the limit of the forecast, the band wider
only ahead."""

from __future__ import annotations

import numpy as np
import pytest

from scalerl.forecast.curves import sigmoid_reward
from scalerl.forecast.fitting import fit_sigmoid, with_gain_ahead_log_sd
from scalerl.forecast.posterior import gain_factor_draws


def test_gain_factors_are_log_normal_and_capped_at_the_top_of_a_range():
    rng = np.random.default_rng(0)
    normals = rng.standard_normal(20_000)
    draws = np.column_stack([np.full(20_000, 0.6), np.full(20_000, 1.5), np.full(20_000, 1.0)])
    # At C_last = C_mid the curve has half its gain 0.5 left: R(C_last) = 0.35, A - R = 0.25.
    free = gain_factor_draws(draws, 0.1, 1.0, normals, 0.8, (-np.inf, np.inf))
    assert np.std(np.log(free)) == pytest.approx(0.8, rel=0.02)
    assert np.all(gain_factor_draws(draws, 0.1, 1.0, normals, 0.0, (0.0, 1.0)) == 1.0)
    capped = gain_factor_draws(draws, 0.1, 1.0, normals, 0.8, (0.0, 1.0))
    # A* = 0.35 + m 0.25 <= 1 caps m at 0.65 / 0.25 = 2.6.
    assert capped.max() == pytest.approx(2.6) and np.all(capped[free < 2.6] == free[free < 2.6])


@pytest.fixture(scope="module")
def early_fit():
    """A textbook sigmoid (A 0.6, B 1.5, C_mid 1) seen to 1.5 C_mid with noise 0.01."""
    compute = np.linspace(0.0, 1.5, 25)
    reward = sigmoid_reward(compute, 0.6, 1.5, 1.0, 0.1) + np.random.default_rng(3).normal(0.0, 0.01, 25)
    return fit_sigmoid(compute, reward)


def test_the_gain_factor_leaves_the_fitted_stretch_alone_and_widens_the_band_ahead(early_fit):
    plain, wide = with_gain_ahead_log_sd(early_fit, 0.0), with_gain_ahead_log_sd(early_fit, 1.0)
    seen = np.linspace(0.1, 1.5, 8)
    assert np.allclose(plain.predict(seen), wide.predict(seen))
    assert np.allclose(plain.interval(seen, 0.8, kind="mean"), wide.interval(seen, 0.8, kind="mean"))
    ahead = 20.0
    (lo0, hi0), (lo1, hi1) = plain.interval(ahead, 0.8), wide.interval(ahead, 0.8)
    assert hi1 - lo1 > hi0 - lo0 and lo1 < lo0 and hi1 > hi0
    a0, a1 = plain.conf_int(0.8)["A"], wide.conf_int(0.8)["A"]
    assert a1[1] - a1[0] > a0[1] - a0[0]


@pytest.mark.parametrize("log_sd", [0.0, 0.5, 1.5])
def test_a_is_the_median_limit_of_the_forecast_under_any_gain_factor(early_fit, log_sd):
    fit = with_gain_ahead_log_sd(early_fit, log_sd)
    assert fit.a == pytest.approx(float(np.median(fit.ceiling_draws)))
    lo, hi = fit.conf_int(0.8)["A"]
    assert lo <= fit.a <= hi <= 1.0
    far = fit.last_compute * np.array([1e2, 1e4, 1e8])
    assert np.all(fit.predict(far) <= fit.a + 1e-12)
    assert fit.predict(fit.last_compute * 1e8) == pytest.approx(fit.a, abs=1e-3)
    near = fit.compute_near_ceiling()
    assert near.lo <= near.value <= near.hi
