import dataclasses
import json
import math

import numpy as np
import pytest

from scalerl.errors import ConfigError, FitError, InputError
from scalerl.forecast.curves import sigmoid_reward
from scalerl.forecast.fitting import fit_sigmoid


def paper_curve(scale=1.0, n=14, noise_sd=0.0, seed=0, a=0.61, b=1.92, c_mid=2542.0, r0=0.2, c_max=40000.0):
    """ScaleRL 8B run (paper table): A 0.61, B 1.92, C_mid 2542 GPU-h, in any compute unit."""
    compute = np.concatenate([[0.0], np.geomspace(c_mid / 5, c_max, n)]) * scale
    reward = sigmoid_reward(compute, a, b, c_mid * scale, r0)
    reward = reward + np.random.default_rng(seed).normal(0.0, noise_sd, reward.size) * (compute > 0)
    return compute, np.clip(reward, 0.0, 1.0)


@pytest.mark.parametrize("scale", [1e-4, 1.0, 1e15])
def test_recovers_noise_free_parameters_in_any_unit(scale):
    compute, reward = paper_curve(scale)
    fit = fit_sigmoid(compute, reward, n_draws=40)
    # posterior medians: a noise-free curve still has the noise floor's (0.002) width around it
    assert fit.a == pytest.approx(0.61, abs=2e-3)
    assert fit.b == pytest.approx(1.92, rel=2e-2)
    assert fit.c_mid == pytest.approx(2542.0 * scale, rel=2e-2)
    assert fit.r0 == 0.2 and fit.n_points == 14 and fit.ceiling_identified


def test_noisy_fit_interval_contains_truth():
    compute, reward = paper_curve(noise_sd=0.01, seed=3)
    fit = fit_sigmoid(compute, reward)
    ci = fit.conf_int(0.95)
    assert ci["A"][0] < 0.61 < ci["A"][1]
    assert ci["B"][0] < 1.92 < ci["B"][1]
    assert ci["C_mid"][0] < 2542.0 < ci["C_mid"][1]
    assert abs(fit.a - 0.61) < 0.02


def test_seed_form_r0_zero_uses_every_positive_point():
    compute = np.geomspace(10, 1e4, 10)
    reward = sigmoid_reward(compute, 0.7, 1.5, 300.0, 0.0)
    fit = fit_sigmoid(compute, reward, r0=0.0, n_draws=40)
    assert fit.n_points == 10 and fit.r0 == 0.0
    assert fit.a == pytest.approx(0.7, abs=3e-3) and fit.c_mid == pytest.approx(300.0, rel=3e-2)


def test_min_compute_drops_warm_up_points():
    compute, reward = paper_curve()
    fit = fit_sigmoid(compute, reward, min_compute=1500.0, n_draws=40)
    assert fit.compute.min() >= 1500.0 and fit.n_points == int(np.sum(compute >= 1500.0))


def test_robust_loss_resists_one_outlier():
    compute, reward = paper_curve(noise_sd=0.005, seed=1)
    reward[8] = 0.05
    plain = fit_sigmoid(compute, reward, n_draws=40)
    robust = fit_sigmoid(compute, reward, loss="soft_l1", n_draws=40)
    assert abs(robust.a - 0.61) < abs(plain.a - 0.61) or abs(robust.b - 1.92) < abs(plain.b - 1.92)
    assert abs(robust.a - 0.61) < 0.015


def test_to_dict_matches_cli_contract_and_is_json():
    compute, reward = paper_curve(noise_sd=0.01)
    out = fit_sigmoid(compute, reward, n_draws=40).to_dict(0.8, predict_at=[1e5], target=0.9)
    assert set(out) == {
        "schema_version",
        "verdict",
        "params",
        "intervals",
        "level",
        "ceiling_identified",
        "ceiling_at_bound",
        "predictions",
        "compute_to_target",
        "compute_near_ceiling",
        "collapse_compute",
        "noise_sd",
        "reward_range",
        "n_points",
        "warnings",
    }
    assert out["schema_version"] == 3 and set(out["verdict"]) == {"kind", "text", "numbers"}
    assert set(out["compute_near_ceiling"]) == {"within", "value", "lo", "hi", "times_current", "level"}
    assert set(out["params"]) == {"A", "B", "C_mid", "R0"} and set(out["intervals"]) == {"A", "B", "C_mid"}
    assert set(out["predictions"][0]) == {"x", "reward", "lo", "hi"}
    assert out["compute_to_target"]["value"] is None and not out["compute_to_target"]["reachable"]  # above A
    json.dumps(out, allow_nan=False)


def test_a_ceiling_pinned_at_the_top_of_its_range_is_reported_as_a_limit():
    # The demo's shape: R = R0 + (1 - R0) C / (C + C_mid) with its true ceiling at 1, the top of
    # the pass-rate range, and least squares lands there.
    steps = np.arange(0.0, 201.0, 10.0)
    reward = 0.28 + 0.72 * steps / (steps + 180.0)
    fit = fit_sigmoid(steps, reward, n_draws=40)
    assert fit.a > 0.85 and fit.conf_int()["A"][1] >= 0.98
    assert fit.ceiling_at_bound and not fit.ceiling_identified
    assert "a limit, not an estimate" in fit.summary()
    assert fit.to_dict()["ceiling_at_bound"] is True
    identified = fit_sigmoid(*paper_curve(), n_draws=40)
    assert not identified.ceiling_at_bound and "a limit" not in identified.summary()


def test_compute_to_reach_inverts_the_curve():
    compute, reward = paper_curve()
    fit = fit_sigmoid(compute, reward, n_draws=40)
    needed = fit.compute_to_reach(0.5)
    # both are posterior medians: of C(0.5) per draw, and of R(C) per draw at that C
    assert needed.reachable and fit.predict(needed.value) == pytest.approx(0.5, abs=1e-3)
    assert needed.lo <= needed.value <= needed.hi
    assert not fit.compute_to_reach(0.7).reachable and math.isinf(fit.compute_to_reach(0.7).value)
    assert "not reachable" in fit.compute_to_reach(0.7).message()


def test_observation_band_holds_the_mean_band():
    """A new evaluation is the curve plus noise: its band holds the curve's, inside the data and
    beyond it (where the calibrated band on a flat end can be narrower than the posterior's)."""
    compute, reward = paper_curve(noise_sd=0.01)
    fit = fit_sigmoid(compute, reward, n_draws=60)
    at = np.array([5000.0, 20000.0, 60000.0, 200000.0])
    lo_obs, hi_obs = fit.interval(at)
    lo_mean, hi_mean = fit.interval(at, kind="mean")
    assert np.all(lo_obs <= lo_mean) and np.all(lo_mean <= fit.predict(at))
    assert np.all(fit.predict(at) <= hi_mean) and np.all(hi_mean <= hi_obs)
    assert np.all(hi_obs - lo_obs > hi_mean - lo_mean)  # the noise widens it somewhere on each point


def test_result_is_immutable():
    compute, reward = paper_curve()
    fit = fit_sigmoid(compute, reward, n_draws=20)
    with pytest.raises(dataclasses.FrozenInstanceError):
        fit.a = 1.0
    with pytest.raises(ValueError):
        fit.param_draws[0, 0] = 1.0


def test_as_many_points_as_parameters_fits_exactly_and_says_so():
    compute = np.array([0.0, 100.0, 200.0, 400.0])
    reward = sigmoid_reward(compute, 0.6, 2.0, 300.0, r0=0.1)
    fit = fit_sigmoid(compute, reward, n_draws=40)
    assert fit.n_points == 3
    # B and C_mid are medians of a wide posterior; A, a gain beyond data spanning 0.6 decades, only
    # within its interval
    assert (fit.b, fit.c_mid) == pytest.approx((2.0, 300.0), rel=0.15)
    low_a, high_a = fit.conf_int(0.8)["A"]
    assert low_a <= 0.6 <= high_a and high_a - low_a > 0.1
    # the point forecast is the posterior median: with no residual left it is held only to the noise floor
    assert np.allclose(fit.predict(compute[1:]), reward[1:], atol=3 * fit.noise_sd)
    assert any("only 3 points for 3 parameters" in w for w in fit.warnings)
    low, high = fit.interval(400.0)
    assert high - low > 0.01  # the band rests on the noise floor, never collapses to the fitted line


def test_too_few_points_and_bad_input_raise():
    with pytest.raises(FitError, match="too few points"):
        fit_sigmoid([0, 1, 2], [0.1, 0.3, 0.4])
    with pytest.raises(InputError, match="non-decreasing"):
        fit_sigmoid([0, 3, 2, 4, 5], [0.1, 0.2, 0.3, 0.4, 0.5])
    with pytest.raises(InputError, match="NaN"):
        fit_sigmoid([0, 1, 2, 3, 4], [0.1, np.nan, 0.3, 0.4, 0.5])
    with pytest.raises(InputError, match="reward_range"):
        fit_sigmoid([0, 1, 2, 3, 4], [0.1, 2.0, 3.0, 4.0, 5.0])
    with pytest.raises(ConfigError, match="loss"):
        fit_sigmoid([0, 1, 2, 3, 4], [0.1, 0.2, 0.3, 0.4, 0.5], loss="l3")


def test_flat_run_raises_fit_error():
    compute = np.arange(12) * 100.0
    reward = 0.3 + np.random.default_rng(0).normal(0, 0.005, 12)
    with pytest.raises(FitError, match="^flat: no learning"):
        fit_sigmoid(compute, reward)


def test_fixed_ceiling_fits_only_b_and_c_mid():
    compute, reward = paper_curve()
    fit = fit_sigmoid(compute, reward, fixed_a=0.61, n_draws=30)
    assert fit.a == 0.61 and fit.fixed == ("R0", "A")
    assert fit.b == pytest.approx(1.92, rel=1e-3) and fit.conf_int()["A"] == (0.61, 0.61)


@pytest.mark.parametrize("c_max, branch", [(40000.0, "on_sigmoid"), (5000.0, "beyond")])
def test_compute_near_ceiling_is_the_sigmoids_inverse_at_a_minus_the_width_by_hand(c_max, branch):
    compute, reward = paper_curve(noise_sd=0.01, seed=3, c_max=c_max)
    fit = fit_sigmoid(compute, reward, n_draws=60)
    near = fit.compute_near_ceiling(0.02, level=0.8)
    a, b, c_mid = fit.param_draws.T
    m, r0 = fit.gain_factor_draws, fit.r0
    # Per draw, the curve is the sigmoid up to C_last and R_l + m (R(C) - R_l) beyond (R_l =
    # R(C_last)), its ceiling A* = R_l + m (A - R_l). Within 0.02 of A* at T = A* - 0.02: on the
    # sigmoid, C = C_mid ((A - R0) / (T - R0) - 1)^(-1/B), when T <= R_l; beyond, where the sigmoid
    # is within 0.02 / m of A, C = C_mid ((A - R0) / (0.02 / m) - 1)^(1/B).
    r_last = r0 + (a - r0) / (1.0 + (c_mid / compute.max()) ** b)
    target = r_last + m * (a - r_last) - 0.02
    with np.errstate(invalid="ignore"):
        on_sigmoid = c_mid * ((a - r0) / (target - r0) - 1.0) ** (-1.0 / b)
    beyond = c_mid * ((a - r0) / (0.02 / m) - 1.0) ** (1.0 / b)
    by_hand = np.where(target <= r_last, on_sigmoid, beyond)
    share_on_sigmoid = float(np.mean(target <= r_last))
    assert share_on_sigmoid > 0.5 if branch == "on_sigmoid" else share_on_sigmoid < 0.5
    median, lo, hi = np.quantile(by_hand, [0.5, 0.1, 0.9], method="inverted_cdf")
    assert (near.value, near.lo, near.hi) == (pytest.approx(median), pytest.approx(lo), pytest.approx(hi))
    assert near.times_current == pytest.approx(near.value / compute.max())


def test_compute_near_ceiling_recovers_the_true_run_length_of_a_run_stopped_early():
    # Stopped at 2 C_mid (before the plateau): the true curve is within 0.02 of A = 0.61 at
    # C = C_mid ((0.61 - 0.2) / 0.02 - 1)^(1 / 1.92) = 4.78 C_mid, 2.4 times the stopping point.
    compute, reward = paper_curve(noise_sd=0.003, seed=4, n=12, c_max=2 * 2542.0)
    fit = fit_sigmoid(compute, reward, n_draws=80)
    truth = 2542.0 * ((0.61 - 0.2) / 0.02 - 1.0) ** (1.0 / 1.92)
    near = fit.compute_near_ceiling(0.02)
    assert near.value == pytest.approx(truth, rel=0.25)
    assert near.times_current > 1.5 and "times the current max" in near.message()


def test_a_run_already_on_its_plateau_needs_no_more_compute():
    compute, reward = paper_curve(noise_sd=0.002, seed=5, c_max=200 * 2542.0, n=20)
    near = fit_sigmoid(compute, reward, n_draws=40).compute_near_ceiling(0.02)
    assert near.times_current < 1.0 and "within 0.02 of its ceiling at the last point" in near.message()
    with pytest.raises(InputError, match="within must be in"):
        fit_sigmoid(compute, reward, n_draws=40).compute_near_ceiling(0.0)
