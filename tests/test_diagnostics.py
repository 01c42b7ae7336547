import numpy as np
import pytest

from scalerl.errors import FitError, NoForecastError
from scalerl.forecast.curves import sigmoid_reward
from scalerl.forecast.diagnostics import (
    DEFAULT_NOISE_FLOOR,
    detect_collapse,
    learning_gain,
    net_fall,
    point_noise_sd,
    running_plateau_peak,
)
from scalerl.forecast.fitting import fit_sigmoid
from scalerl.forecast.verdict import learning_verdict

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


def test_immediate_fall_without_a_rise_is_decreasing_not_a_collapse():
    reward = np.array([0.2, 0.0, 0.0, 0.01, 0.0, 0.0, 0.0, 0.0])
    compute = np.arange(8.0)
    report = detect_collapse(compute, reward)
    assert report.onset_index == 1 and not report.rose
    with pytest.raises(NoForecastError, match="^decreasing") as caught:
        fit_sigmoid(compute, reward)
    assert caught.value.verdict.kind == "decreasing"


def test_fit_stops_at_collapse_unless_told_otherwise():
    reward = healthy()
    reward[30:] = 0.3
    fit = fit_sigmoid(COMPUTE, reward, n_draws=30)
    assert fit.compute.max() == COMPUTE[29] and fit.collapse_compute == COMPUTE[30]
    assert any("collapse" in w and "before it" in w for w in fit.warnings)
    assert fit.verdict.kind == "collapsed" and not fit.verdict.advises_longer_run
    assert 0.75 <= fit.a <= 0.9
    through = fit_sigmoid(COMPUTE, reward, n_draws=30, fit_through_collapse=True)
    assert through.compute.max() == COMPUTE[-1] and through.a < 0.8


def test_learning_gain_and_the_no_learning_verdicts_by_hand():
    assert learning_gain([0.35, 0.4, 0.42, 0.43], r0=0.3) == pytest.approx((0.4 + 0.42 + 0.43) / 3 - 0.3)
    # best 3-point mean 0.31 - 0.3 = 0.01 < 3 x 0.01: flat
    flat = learning_verdict(np.array([0.31, 0.3, 0.32, 0.3, 0.31]), r0=0.3, noise_sd=0.01)
    assert flat.kind == "flat" and flat.numbers["gain"] == pytest.approx(0.01)
    assert learning_verdict(np.array([0.35, 0.4, 0.42, 0.43]), r0=0.3, noise_sd=0.01) is None
    # thirds of [0.5, 0.5, 0.4, 0.3, 0.2, 0.1]: (0.5 - 0.15) / (0.01 sqrt(2 / 2)) = 35 standard errors
    assert net_fall(np.array([0.5, 0.5, 0.4, 0.3, 0.2, 0.1]), 0.01) == pytest.approx(35.0)
    falling = learning_verdict(np.array([0.5, 0.4, 0.3, 0.2, 0.1]), r0=0.5, noise_sd=0.01)
    assert falling.kind == "decreasing"


def test_fit_before_the_inflection_is_still_rising():
    compute = np.linspace(0.0, 0.5 * 5000.0, 12)  # ends at half of C_mid
    reward = sigmoid_reward(compute, 0.7, 1.8, 5000.0, 0.1)
    reward = reward + np.random.default_rng(1).normal(0, 0.01, compute.size) * (compute > 0)
    fit = fit_sigmoid(compute, reward, n_draws=60)
    assert not fit.ceiling_identified and fit.verdict.kind == "still_rising"
    assert fit.verdict.text.startswith("still rising")


def test_fit_past_the_inflection_is_plateaued():
    compute = np.linspace(0.0, 8 * 5000.0, 20)
    reward = sigmoid_reward(compute, 0.7, 1.8, 5000.0, 0.1)
    reward = reward + np.random.default_rng(1).normal(0, 0.01, compute.size) * (compute > 0)
    fit = fit_sigmoid(compute, reward, n_draws=60)
    assert fit.ceiling_identified and fit.verdict.kind == "plateaued" and not fit.warnings


def test_sparse_steep_rise_is_not_called_flat():
    # Successive differences of this run suggest noise sd ~0.09 (the trend inflates them); the
    # residuals of the fit do not, so the 0.24 gain counts as learning.
    reward = np.array([0.147, 0.36, 0.43, 0.357, 0.34, 0.433])
    assert point_noise_sd(reward) > 0.08
    fit = fit_sigmoid(np.arange(6.0), reward, n_draws=30)
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


def test_three_point_step_is_not_a_confident_ceiling():
    from scalerl.forecast.fitting import fit_sigmoid

    fit = fit_sigmoid([0, 1280, 2560, 3840], [0.164, 0.289, 0.391, 0.375], n_draws=40)
    assert not fit.ceiling_identified


ERRATIC_FALL = np.array([0.51, 0.52, 0.54, 0.55, 0.56, 0.56, 0.55, 0.42, 0.50, 0.31, 0.38, 0.17, 0.25, 0.09])


def test_noisy_rise_then_fall_is_a_collapse_dated_at_its_first_step_down():
    # rose 0.51 -> 0.56, then fell erratically to 0.09: a collapse, not a flat run
    compute = np.arange(ERRATIC_FALL.size) * 100.0
    report = detect_collapse(compute, ERRATIC_FALL)
    assert report is not None and report.onset_index == 7 and report.rose
    fit = fit_sigmoid(compute, ERRATIC_FALL, n_draws=30)
    assert fit.compute.max() == 600.0 and any(w.startswith("collapse") for w in fit.warnings)
    assert fit.verdict.kind == "collapsed"


def test_fall_with_no_rise_before_it_is_decreasing_not_a_flat_run():
    reward = np.array([0.51, 0.51, 0.51, 0.51, 0.51, 0.51, 0.30, 0.35, 0.10, 0.20, 0.05, 0.12])
    with pytest.raises(FitError, match="^decreasing"):
        fit_sigmoid(np.arange(reward.size) * 1.0, reward, n_draws=30)


@pytest.mark.parametrize("peak", [0.52, 0.56])
def test_small_rise_then_fall_is_a_collapse_whether_or_not_it_can_be_fitted(peak):
    reward = np.array([0.50, 0.50, 0.51, peak, peak, peak, 0.30, 0.35, 0.10, 0.20, 0.05, 0.12])
    try:
        verdict = fit_sigmoid(np.arange(reward.size) * 1.0, reward, n_draws=30).verdict
    except NoForecastError as error:
        verdict = error.verdict
    assert verdict.kind == "collapsed" and verdict.numbers["collapse_compute"] == 6.0


def test_a_run_flat_at_zero_is_flat():
    reward = np.zeros(20)
    reward[[4, 11]] = 0.01
    with pytest.raises(NoForecastError, match="^flat"):
        fit_sigmoid(np.arange(20.0), reward, n_draws=30)


@pytest.mark.parametrize("seed", range(5))
def test_noisy_flat_run_is_flat_not_a_collapse(seed):
    reward = np.clip(0.3 + np.random.default_rng(seed).normal(0.0, 0.03, 30), 0.0, 1.0)
    assert detect_collapse(np.arange(30.0), reward) is None
    with pytest.raises(FitError, match="^flat"):
        fit_sigmoid(np.arange(30.0), reward, n_draws=30)


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
    assert late.slope == pytest.approx(beta) and late.slope_se == pytest.approx(
        s / np.sqrt(np.sum((x - x.mean()) ** 2))
    )
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


def test_ceiling_of_a_capped_rise_stays_near_the_cap():
    """A hyperbolic rise cut flat at 0.66 (the true ceiling) from ~55 % of the compute on (noise
    0.015): the sigmoid bends to the flat end (A within 0.05 of the cap), where the rise alone
    would carry it to ~0.76. The curve's form still leaves A 0.02-0.04 above the cap, so the
    verdict is never far from the end of the run: plateaued, too noisy, or still rising with the
    ceiling in reach within 2.5x the compute so far (never "no ceiling in reach")."""
    for seed in range(4):
        rng = np.random.default_rng(seed)
        compute = np.linspace(5e11, 1.8e13, 40)
        reward = np.minimum(0.24 + 0.76 * compute / (compute + 8e12), 0.66) + rng.normal(0.0, 0.015, compute.size)
        fit = fit_sigmoid(compute, reward)
        assert abs(fit.a - 0.66) <= 0.05
        verdict = fit.verdict
        assert verdict.kind in ("plateaued", "too_noisy", "still_rising")
        if verdict.kind == "still_rising":
            assert verdict.numbers["times_longer"] <= 2.5, verdict.text
