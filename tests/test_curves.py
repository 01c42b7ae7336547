import numpy as np

from scalerl.forecast.curves import (
    linearised_sigmoid,
    power_law_reward,
    sigmoid_compute_for_reward,
    sigmoid_reward,
)


def test_sigmoid_half_gain_at_c_mid():
    assert np.isclose(sigmoid_reward(2542.0, 0.61, 1.92, 2542.0, r0=0.2), 0.2 + 0.41 / 2)


def test_sigmoid_limits():
    assert sigmoid_reward(0.0, 0.6, 1.5, 100.0, r0=0.1) == 0.1
    assert np.isclose(sigmoid_reward(1e12, 0.6, 1.5, 100.0, r0=0.1), 0.6, atol=1e-9)


def test_inverse_round_trip_and_unreachable():
    compute = np.array([10.0, 100.0, 5000.0])
    reward = sigmoid_reward(compute, 0.7, 1.7, 400.0, r0=0.05)
    assert np.allclose(sigmoid_compute_for_reward(reward, 0.7, 1.7, 400.0, r0=0.05), compute)
    assert np.isinf(sigmoid_compute_for_reward(0.75, 0.7, 1.7, 400.0, r0=0.05))


def test_linearised_form_is_a_line_with_slope_minus_b():
    compute = np.array([50.0, 200.0, 800.0])
    reward = sigmoid_reward(compute, 0.65, 1.89, 300.0, r0=0.1)
    log_c, lhs = linearised_sigmoid(compute, reward, 0.65, r0=0.1)
    slope, intercept = np.polyfit(log_c, lhs, 1)
    assert np.isclose(slope, -1.89) and np.isclose(intercept, 1.89 * np.log(300.0))


def test_power_law_formula():
    assert np.isclose(power_law_reward(4.0, 1.0, 0.5, 0.5), 1.0 - 0.5 / 2.0)
