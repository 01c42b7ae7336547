import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from scalerl.forecast.curves import (
    gain_ahead_ceiling,
    gain_ahead_compute_for_reward,
    gain_ahead_reward,
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


GAIN_AHEAD = dict(a=0.7, b=1.4, c_mid=2.0, r0=0.2, c_last=4.0)


@given(st.floats(0.2, 5.0), st.floats(0.05, 40.0))
def test_gain_ahead_curve_is_the_sigmoid_up_to_the_last_evaluation_and_scaled_beyond(factor, compute):
    p = GAIN_AHEAD
    sigmoid = float(sigmoid_reward(compute, p["a"], p["b"], p["c_mid"], p["r0"]))
    last = float(sigmoid_reward(p["c_last"], p["a"], p["b"], p["c_mid"], p["r0"]))
    value = float(gain_ahead_reward(compute, p["a"], p["b"], p["c_mid"], p["r0"], p["c_last"], factor))
    expected = sigmoid if compute <= p["c_last"] else last + factor * (sigmoid - last)
    assert value == pytest.approx(expected, abs=1e-12)
    ceiling = float(gain_ahead_ceiling(p["a"], p["b"], p["c_mid"], p["r0"], p["c_last"], factor))
    assert ceiling == pytest.approx(last + factor * (p["a"] - last), abs=1e-12)
    assert value <= ceiling + 1e-12


@given(st.floats(0.2, 5.0), st.floats(0.05, 400.0))
def test_gain_ahead_inverse_returns_the_compute_that_reaches_a_reward(factor, compute):
    p = GAIN_AHEAD
    reward = gain_ahead_reward(compute, p["a"], p["b"], p["c_mid"], p["r0"], p["c_last"], factor)
    back = float(gain_ahead_compute_for_reward(reward, p["a"], p["b"], p["c_mid"], p["r0"], p["c_last"], factor))
    assert back == pytest.approx(compute, rel=1e-6)


def test_gain_ahead_inverse_is_infinite_at_or_beyond_the_scaled_ceiling():
    p = GAIN_AHEAD
    ceiling = float(gain_ahead_ceiling(p["a"], p["b"], p["c_mid"], p["r0"], p["c_last"], 2.0))
    assert np.isinf(gain_ahead_compute_for_reward(ceiling, p["a"], p["b"], p["c_mid"], p["r0"], p["c_last"], 2.0))
    # m = 0: the curve stops at the last evaluation; nothing above R(C_last) is reached.
    last = float(sigmoid_reward(p["c_last"], p["a"], p["b"], p["c_mid"], p["r0"]))
    assert np.isinf(gain_ahead_compute_for_reward(last + 0.01, p["a"], p["b"], p["c_mid"], p["r0"], p["c_last"], 0.0))
