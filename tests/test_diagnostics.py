import numpy as np
import pytest

from scalerl.errors import FitError
from scalerl.forecast.curves import sigmoid_reward
from scalerl.forecast.diagnostics import (
    ceiling_identifiability,
    check_learning,
    detect_collapse,
    point_noise_sd,
    running_plateau_peak,
)
from scalerl.forecast.fitting import fit_sigmoid
from scalerl.forecast.uncertainty import DEFAULT_NOISE_FLOOR

COMPUTE = np.linspace(0.0, 200.0, 41)


def healthy(noise_sd=0.015, seed=0):
    clean = sigmoid_reward(COMPUTE, 0.85, 2.0, 40.0, 0.05)
    return clean + np.random.default_rng(seed).normal(0.0, noise_sd, COMPUTE.size) * (COMPUTE > 0)


def test_point_noise_recovers_known_sd_on_a_trending_curve():
    estimates = [point_noise_sd(healthy(0.03, seed), noise_floor=0.0) for seed in range(20)]
    assert np.median(estimates) == pytest.approx(0.03, rel=0.2)
    assert point_noise_sd(sigmoid_reward(COMPUTE, 0.85, 2.0, 40.0, 0.05), noise_floor=0.01) == 0.01  # floor
    assert point_noise_sd(np.linspace(0.2, 0.3, 20)) == DEFAULT_NOISE_FLOOR  # a noise-free line: the default floor


def test_collapse_fires_at_the_sustained_drop():
    reward = healthy()
    reward[30:] = np.linspace(0.5, 0.0, 11)  # falls from ~0.85 to 0 from point 30 on
    report = detect_collapse(COMPUTE, reward)
    assert report is not None and report.onset_index == 30 and report.last_good_index == 29
    assert report.last_good_compute == COMPUTE[29]
    assert "left the sigmoid after compute 145" in report.message()


@pytest.mark.parametrize("seed", range(5))
def test_noisy_plateau_and_a_single_dip_do_not_fire(seed):
    reward = healthy(seed=seed)
    assert detect_collapse(COMPUTE, reward) is None
    reward[25] -= 0.3  # one bad evaluation
    assert detect_collapse(COMPUTE, reward) is None


def test_immediate_divergence_fires_and_leaves_no_fit():
    reward = np.array([0.2, 0.0, 0.0, 0.01, 0.0, 0.0, 0.0, 0.0])
    compute = np.arange(8.0)
    assert detect_collapse(compute, reward).onset_index == 1
    with pytest.raises(FitError, match="before the collapse"):
        fit_sigmoid(compute, reward)


def test_fit_stops_at_collapse_unless_told_otherwise():
    reward = healthy()
    reward[30:] = 0.3
    fit = fit_sigmoid(COMPUTE, reward, n_bootstrap=30)
    assert fit.compute.max() == COMPUTE[29] and fit.collapse_compute == COMPUTE[30]
    assert any("collapse" in w and "before it" in w for w in fit.warnings)
    # Fitted to 3.6 x C_mid, the last quarter (0.78-0.79) is flat within the noise of 0.015: the
    # run is read where it levelled off (A = 0.85 lies 0.07 above), never past the truth.
    assert 0.75 <= fit.a <= 0.88
    through = fit_sigmoid(COMPUTE, reward, n_bootstrap=30, fit_through_collapse=True)
    assert through.compute.max() == COMPUTE[-1] and through.a < 0.8


def test_check_learning_rejects_gain_within_noise_only():
    with pytest.raises(FitError, match="flat run"):
        check_learning([0.31, 0.3, 0.32, 0.3, 0.31], r0=0.3, noise_sd=0.01)
    assert check_learning([0.35, 0.4, 0.42, 0.43], r0=0.3, noise_sd=0.01) == pytest.approx((0.4 + 0.42 + 0.43) / 3 - 0.3)


def test_ceiling_rule_each_reason():
    ok, warning = ceiling_identifiability(0.6, 0.2, 100.0, (0.54, 0.66), 1.0, 1000.0)
    assert ok and warning is None
    ok, warning = ceiling_identifiability(0.6, 0.2, 2000.0, (0.59, 0.61), 1.0, 1000.0)
    assert not ok and "before the fitted inflection" in warning and "~4e+03" in warning and "4.0 times" in warning
    ok, warning = ceiling_identifiability(1.0, 0.2, 100.0, (0.9, 1.0), 1.0, 1000.0)
    assert not ok and "upper bound" in warning
    ok, warning = ceiling_identifiability(0.6, 0.2, 100.0, (0.5, 0.64), 1.0, 1000.0)
    assert not ok and "wider than a third of the gain" in warning
    # With B the warning adds the run length: C_mid (|A - R0| / 0.02 - 1)^(1/B) = 2000 x 19^(1/2),
    # 8.7 times the current max 1000.
    ok, warning = ceiling_identifiability(0.6, 0.2, 2000.0, (0.59, 0.61), 1.0, 1000.0, b=2.0)
    assert not ok and "Reading A to +-0.02 needs ~8.72 times the current max (the run length)." in warning
    assert "Run to at least ~4e+03 compute (4.0 times the current max) to pass the inflection" in warning


def test_fit_before_the_inflection_is_flagged_and_says_how_far_to_run():
    compute = np.linspace(0.0, 0.5 * 5000.0, 12)  # ends at half of C_mid
    reward = sigmoid_reward(compute, 0.7, 1.8, 5000.0, 0.1)
    reward = reward + np.random.default_rng(1).normal(0, 0.01, compute.size) * (compute > 0)
    fit = fit_sigmoid(compute, reward, n_bootstrap=60)
    assert not fit.ceiling_identified
    assert any("run to at least" in w.lower() and "times the current max" in w for w in fit.warnings)


def test_fit_past_the_inflection_is_identified():
    compute = np.linspace(0.0, 8 * 5000.0, 20)
    reward = sigmoid_reward(compute, 0.7, 1.8, 5000.0, 0.1)
    reward = reward + np.random.default_rng(1).normal(0, 0.01, compute.size) * (compute > 0)
    fit = fit_sigmoid(compute, reward, n_bootstrap=60)
    assert fit.ceiling_identified and not fit.warnings


def test_sparse_steep_rise_is_not_called_flat():
    # Successive differences of this run suggest noise sd ~0.09 (the trend inflates them); the
    # residuals of the fit do not, so the 0.24 gain counts as learning.
    reward = np.array([0.147, 0.36, 0.43, 0.357, 0.34, 0.433])
    assert point_noise_sd(reward) > 0.08
    fit = fit_sigmoid(np.arange(6.0), reward, n_bootstrap=30)
    assert fit.a > 0.35


def test_running_plateau_peak_uses_three_point_means_before_each_point():
    peaks = running_plateau_peak([0.1, 0.5, 0.2, 0.3, 0.9, 0.0])
    assert np.allclose(peaks, [0.1, 0.1, 0.1, 0.8 / 3, 1.0 / 3, 1.4 / 3])


def test_collapse_rule_rarely_fires_on_long_noisy_healthy_runs():
    rng = np.random.default_rng(11)
    compute = np.linspace(0.0, 1.0, 61)
    fired = 0
    for _ in range(100):
        a = rng.uniform(0.3, 0.9)
        mean = sigmoid_reward(compute, a, rng.uniform(0.8, 3.0), 10 ** rng.uniform(-1.5, -0.5), 0.2 * a)
        fired += detect_collapse(compute, rng.binomial(100, mean) / 100) is not None
    assert fired <= 3


def test_ceiling_unidentified_without_residual_dof_or_with_b_at_bound():
    args = (0.6, 0.1, 100.0, (0.59, 0.61), 1.0, 1000.0)
    assert ceiling_identifiability(*args)[0]
    identified, warning = ceiling_identifiability(*args, residual_dof=0)
    assert not identified and "no more points than parameters" in warning
    identified, warning = ceiling_identifiability(*args, b_at_bound=True)
    assert not identified and "B sits at a bound" in warning


def test_three_point_step_is_not_a_confident_ceiling():
    from scalerl.forecast.fitting import fit_sigmoid

    fit = fit_sigmoid([0, 1280, 2560, 3840], [0.164, 0.289, 0.391, 0.375], n_bootstrap=40)
    assert not fit.ceiling_identified


ERRATIC_FALL = np.array([0.51, 0.52, 0.54, 0.55, 0.56, 0.56, 0.55, 0.42, 0.50, 0.31, 0.38, 0.17, 0.25, 0.09])


def test_noisy_rise_then_fall_is_a_collapse_dated_at_its_first_step_down():
    # rose 0.51 -> 0.56, then fell erratically to 0.09: a collapse, not a flat run
    compute = np.arange(ERRATIC_FALL.size) * 100.0
    report = detect_collapse(compute, ERRATIC_FALL)
    assert report is not None and report.onset_index == 7
    fit = fit_sigmoid(compute, ERRATIC_FALL, n_bootstrap=30)
    assert fit.compute.max() == 600.0 and any(w.startswith("collapse") for w in fit.warnings)


def test_fall_with_nothing_to_fit_before_it_is_named_a_collapse_not_a_flat_run():
    reward = np.array([0.51, 0.51, 0.51, 0.51, 0.51, 0.51, 0.30, 0.35, 0.10, 0.20, 0.05, 0.12])
    with pytest.raises(FitError, match="^collapse.*too little rise before it"):
        fit_sigmoid(np.arange(reward.size) * 1.0, reward, n_bootstrap=30)


@pytest.mark.parametrize("seed", range(5))
def test_noisy_flat_run_is_flat_not_a_collapse(seed):
    reward = np.clip(0.3 + np.random.default_rng(seed).normal(0.0, 0.03, 30), 0.0, 1.0)
    assert detect_collapse(np.arange(30.0), reward) is None
    with pytest.raises(FitError, match="^flat run"):
        fit_sigmoid(np.arange(30.0), reward, n_bootstrap=30)


def test_erratic_falls_after_a_small_rise_are_collapses():
    rng = np.random.default_rng(5)
    fired = 0
    for _ in range(100):
        n_rise, n_fall = rng.integers(5, 12), rng.integers(4, 10)
        rise = np.linspace(0.5, 0.5 + rng.uniform(0.04, 0.1), n_rise) + rng.normal(0.0, 0.01, n_rise)
        fall = np.linspace(rise[-1], rng.uniform(0.05, 0.3), n_fall) + rng.normal(0.0, 0.08, n_fall)
        reward = np.clip(np.concatenate([rise, fall]), 0.0, 1.0)
        fired += detect_collapse(np.arange(reward.size) * 1.0, reward) is not None
    assert fired >= 95


# --- late plateau: the interval of A reaches down to a level the data cannot exclude ----------

def test_late_stretch_level_and_slope_by_hand():
    from scalerl.forecast.diagnostics import late_stretch

    compute = np.arange(1.0, 21.0)
    reward = np.concatenate([np.linspace(0.1, 0.6, 15), [0.61, 0.59, 0.62, 0.60, 0.61]])
    late = late_stretch(compute, reward)  # max(5, ceil(0.25 * 20)) = 5 points
    x, y = np.log(compute[-5:]), reward[-5:]
    beta, intercept = np.polyfit(x, y, 1)
    s = np.sqrt(np.sum((y - (intercept + beta * x)) ** 2) / 3)
    assert late.n == 5 and late.level == pytest.approx(y.mean()) and late.level_sd == pytest.approx(y.std(ddof=1))
    assert late.slope == pytest.approx(beta) and late.slope_se == pytest.approx(s / np.sqrt(np.sum((x - x.mean()) ** 2)))
    assert late.is_flat(0.8)


def test_late_stretch_of_a_rising_run_is_not_flat_and_too_few_points_give_none():
    from scalerl.forecast.diagnostics import late_stretch

    compute = np.geomspace(1.0, 100.0, 20)
    reward = 0.2 + 0.5 / (1.0 + (30.0 / compute) ** 1.5)  # noise-free, still climbing at the end
    assert not late_stretch(compute, reward).is_flat(0.8)
    assert late_stretch(compute[:4], reward[:4]) is None  # too few points for a slope


def test_late_stretch_judges_a_quiet_late_stretch_with_the_runs_noise():
    """Five late points that rise by 0.01 with a scatter of ~0.004 look like a steady climb on their
    own three residual dof; with the run's noise of 0.013 the slope's interval reaches 0."""
    from scalerl.forecast.diagnostics import late_stretch

    compute = np.array([1.0, 1.5, 2.0, 2.5, 3.0, 3.5, 4.2, 4.7, 5.2, 5.8, 6.3]) * 1e12
    reward = np.array([0.48, 0.55, 0.60, 0.66, 0.69, 0.71, 0.775, 0.777, 0.787, 0.785, 0.785])
    assert not late_stretch(compute, reward).is_flat(0.8)
    quiet = late_stretch(compute, reward, noise_sd=0.013)
    assert quiet.is_flat(0.8) and quiet.level_sd == pytest.approx(0.013)


def test_forecast_band_beyond_a_flat_end_holds_a_flat_continuation():
    """A pass rate that climbs linearly in compute and stops dead at 0.78 (as the demo's greedy
    validation does), fitted on the first half, whose last five points are flat: the band beyond
    the data must hold the flat continuation on at least 80 % of the later evaluations."""
    for seed in range(4):
        rng = np.random.default_rng(seed)
        steps = np.arange(0.0, 26.0)
        compute = steps * 1e12
        reward = np.minimum(0.44 + 0.045 * steps, 0.78) + rng.normal(0.0, 0.004, steps.size)
        fit = fit_sigmoid(compute[:13], reward[:13])
        assert fit.stratum == "flat_end"
        lower, upper = fit.interval(compute[13:], level=0.8)
        assert np.mean((lower <= reward[13:]) & (reward[13:] <= upper)) >= 0.8


def _band_by_hand(fit, later, level_quantiles=(0.1, 0.9)):
    """[m + Q_lo s_lo, m + Q_hi s], s = sqrt(sigma_d^2 + s_curve^2), s_lo = sqrt(s^2 + g^2) with g the
    forecast's rise over the mean of the last three fitted evaluations; Q from the shipped table at each horizon."""
    from scalerl.forecast.band_calibration import horizon, horizon_bin, shipped_table
    from scalerl.forecast.diagnostics import trend_free_noise_sd

    table = shipped_table()
    rows = np.asarray(table["strata"][fit.stratum]["quantiles"])[horizon_bin(horizon(later, fit.compute.max()))]
    probabilities = table["probabilities"]
    q_lo = np.minimum(rows[:, probabilities.index(level_quantiles[0])], 0.0)
    q_hi = np.maximum(rows[:, probabilities.index(level_quantiles[1])], 0.0)
    curves = fit._mean_draws(later) + fit._form_shift(later)
    curve_sd = (np.quantile(curves, 0.9, axis=0) - np.quantile(curves, 0.1, axis=0)) / 2.563
    sigma_d = trend_free_noise_sd(np.concatenate([[fit.r0], fit.reward]))
    spread = np.sqrt(sigma_d**2 + curve_sd**2)
    centre = fit.predict(later)
    gain = np.maximum(centre - np.mean(fit.reward[-3:]), 0.0)  # every `later` point is beyond the data
    spread_below = np.sqrt(spread**2 + gain**2)
    mean_lo, mean_hi = np.quantile(curves, level_quantiles, axis=0)  # the curve's band, held by the observation's
    return centre + q_lo * spread_below, centre + q_hi * spread, mean_lo, mean_hi


@pytest.mark.parametrize("c_mid, stratum", [(300.0, "rising"), (3.0, "flat_end")])
def test_forecast_band_is_the_table_multipliers_times_the_predictive_spread(c_mid, stratum):
    """Band = [m + Q(0.1) s_lo, m + Q(0.9) s], s = sqrt(sigma_d^2 + s_curve^2) (second-difference
    noise and the posterior curves' robust sd), s_lo = sqrt(s^2 + g^2) (g: the rise the forecast
    still expects over the last three evaluations' mean), Q from the shipped table at the point's
    horizon and stratum, after a flat end its lower edge at most the stop-now floor (the last three
    evaluations' mean - z sigma sqrt(4/3)), holding the posterior curves' band, by hand, on a
    rising and on a flat end."""
    compute = np.geomspace(1.0, 100.0, 20)
    reward = 0.2 + 0.5 / (1.0 + (c_mid / compute) ** 1.5) + np.random.default_rng(0).normal(0.0, 0.002, 20)
    fit = fit_sigmoid(compute, reward)
    assert fit.stratum == stratum
    later = np.geomspace(150.0, 1000.0, 5)
    low, high, mean_lo, mean_hi = _band_by_hand(fit, later)
    lower, upper = fit.interval(later, level=0.8)
    stop_now = np.mean(fit.reward[-3:]) - 1.2816 * fit.noise_sd * np.sqrt(1 + 1 / 3) if stratum == "flat_end" else np.inf
    assert lower == pytest.approx(np.clip(np.minimum.reduce([low, [stop_now] * 5, mean_lo]), 0.0, 1.0), abs=1e-4)
    assert upper == pytest.approx(np.clip(np.maximum(high, mean_hi), 0.0, 1.0), abs=1e-4)


def test_ceiling_of_a_capped_rise_stays_near_the_cap():
    """A hyperbolic rise cut flat at 0.66 (the true ceiling) from ~55 % of the compute on: the
    sigmoid bends to the flat end (A within 0.05 of the cap, identified), where the rise alone
    would carry it to ~0.76."""
    for seed in range(4):
        rng = np.random.default_rng(seed)
        compute = np.linspace(5e11, 1.8e13, 40)
        reward = np.minimum(0.24 + 0.76 * compute / (compute + 8e12), 0.66) + rng.normal(0.0, 0.015, compute.size)
        fit = fit_sigmoid(compute, reward)
        assert fit.ceiling_identified and abs(fit.a - 0.66) <= 0.05



def test_trend_free_noise_is_the_noise_sd_and_blind_to_a_straight_climb():
    from scalerl.forecast.diagnostics import point_noise_sd, trend_free_noise_sd

    rng = np.random.default_rng(3)
    noise = rng.normal(0.0, 0.02, 4000)
    # var(R_(i+1) - 2 R_i + R_(i-1)) = 6 sigma^2: the MAD-based estimate returns sigma.
    assert trend_free_noise_sd(0.5 + noise) == pytest.approx(0.02, rel=0.05)
    # A climb that slows steadily between sparse evaluations (steps 0.08, 0.07, ..., 0.01: a
    # sigmoid's bend, no noise at all): successive differences spread by 0.02 around their median
    # and read as noise 1.4826 x 0.02 / sqrt(2) = 0.021; second differences are all -0.01: the floor.
    climb = np.concatenate([[0.1], 0.1 + np.cumsum(np.arange(0.08, 0.005, -0.01))])
    assert point_noise_sd(climb) == pytest.approx(1.4826 * 0.02 / np.sqrt(2.0))
    assert trend_free_noise_sd(climb) == DEFAULT_NOISE_FLOOR
    # Fewer than four evaluations: successive differences.
    assert trend_free_noise_sd([0.1, 0.3, 0.2]) == point_noise_sd([0.1, 0.3, 0.2])
