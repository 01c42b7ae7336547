"""Point forecast averaged over curve forms: weights with known answers, members, humility on few points."""

import numpy as np
import pytest

from scalerl.forecast.averaging import (
    FORM_NAMES,
    averaged_forms,
    draw_members,
    form_weights,
    held_out_count,
    least_squares_sigmoid,
)
from scalerl.forecast.curves import sigmoid_reward
from scalerl.forecast.fitting import fit_sigmoid


def test_weights_are_inverse_error_plus_noise_and_equal_without_errors():
    weights = form_weights({"a": 0.0, "b": 0.0003}, noise_sd=0.01)  # 1/1e-4 : 1/4e-4 = 4 : 1
    assert weights == pytest.approx({"a": 0.8, "b": 0.2})
    assert form_weights({"a": 1e-8, "b": 2e-8}, noise_sd=0.01)["a"] == pytest.approx(0.5, abs=1e-3)  # within noise
    assert form_weights({"a": 0.01, "b": None, "c": 0.0}, noise_sd=0.01) == pytest.approx({"a": 1 / 3, "b": 1 / 3, "c": 1 / 3})


def test_held_out_count_is_a_third_and_leaves_three_to_refit():
    assert [held_out_count(n) for n in (3, 4, 5, 6, 9, 30)] == [0, 1, 1, 2, 3, 10]


def test_draw_members_follow_the_weights_in_a_seeded_shuffle():
    from scalerl.forecast.averaging import FormCurve

    forms = tuple(FormCurve(name, weight, "posterior") for name, weight in (("p", 0.5), ("s", 0.3), ("z", 0.2)))
    members = draw_members(forms, 200, seed=1)
    assert np.bincount(members, minlength=3).tolist() == [100, 60, 40]
    assert np.array_equal(members, draw_members(forms, 200, seed=1)) and not np.array_equal(members[:50], np.sort(members)[:50])


def test_least_squares_sigmoid_recovers_a_clean_curve():
    compute = np.linspace(100.0, 4000.0, 15)
    a, b, c_mid, r0 = least_squares_sigmoid(compute, sigmoid_reward(compute, 0.7, 2.0, 1000.0, 0.2), 0.2, (0.0, 1.0))
    assert (a, b, c_mid, r0) == pytest.approx((0.7, 2.0, 1000.0, 0.2), rel=1e-3)


def test_a_clean_sigmoid_puts_most_weight_on_the_sigmoid_forms():
    compute = np.linspace(100.0, 4000.0, 15)
    reward = sigmoid_reward(compute, 0.7, 2.0, 1000.0, 0.2) + np.random.default_rng(0).normal(0, 0.003, 15)
    forms = {form.name: form.weight for form in averaged_forms(compute, reward, 0.2, (0.0, 1.0), 0.003)}
    assert set(forms) == set(FORM_NAMES) and sum(forms.values()) == pytest.approx(1.0)
    assert forms["power_law"] < min(forms["sigmoid"], forms["sigmoid_posterior"])


def test_forecast_from_three_points_is_humble():
    # R0 + 3 points at the start of a take-off (a real GSM8K run read 0.037, 0.045, 0.049, 0.114 and
    # ended at 0.69): the forms disagree, so the 80 % band at 4 x the compute spans most of the range.
    compute, reward = np.array([0.0, 6144.0, 12288.0, 18432.0]), np.array([0.037, 0.045, 0.049, 0.114])
    fit = fit_sigmoid(compute, reward, n_bootstrap=100)
    assert len(fit.forms) == 3 and all(form.weight == pytest.approx(1 / 3) for form in fit.forms)  # no form trusted
    lo, hi = fit.interval(4 * 18432.0, 0.8)
    assert hi - lo > 0.4 and lo < 0.3 < 0.6 < hi


def test_fixed_ceiling_and_average_forms_false_keep_the_posterior_alone():
    compute = np.linspace(100.0, 4000.0, 12)
    reward = sigmoid_reward(compute, 0.7, 2.0, 1000.0, 0.2)
    assert fit_sigmoid(compute, reward, fixed_a=0.7, r0=0.2, n_bootstrap=30).forms == ()
    alone = fit_sigmoid(compute, reward, r0=0.2, n_bootstrap=30, average_forms=False)
    assert alone.forms == () and float(alone.predict(8000.0)) == pytest.approx(
        float(np.median(sigmoid_reward(8000.0, *alone.param_draws.T, 0.2))))


def test_the_floor_form_starts_at_the_range_floor_and_is_left_out_of_an_open_range():
    compute = np.linspace(100.0, 4000.0, 12)
    reward = sigmoid_reward(compute, 0.4, 2.0, 1000.0, -0.6)  # mean of +1/-1 rewards
    forms = {form.name: form for form in averaged_forms(compute, reward, -0.6, (-1.0, 1.0), 0.01)}
    assert forms["sigmoid_r0_floor"].params[3] == -1.0
    # the same run as a pass rate, (reward + 1) / 2: the floor form is the paper's R0 = 0 and predicts the same
    rate = {form.name: form for form in averaged_forms(compute, (reward + 1) / 2, 0.2, (0.0, 1.0), 0.01)}
    assert rate["sigmoid_r0_floor"].params[3] == 0.0
    far = np.array([8000.0, 20000.0])
    assert np.allclose((forms["sigmoid_r0_floor"].reward(far, None) + 1) / 2, rate["sigmoid_r0_floor"].reward(far, None), atol=1e-4)
    names = {form.name for form in averaged_forms(compute, reward, -0.6, None, 0.01)}
    assert "sigmoid_r0_floor" not in names and {"sigmoid_posterior", "sigmoid"} <= names
