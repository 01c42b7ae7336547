"""One verdict on the ceiling: identified whatever level intervals are reported at, plateaus read."""

from __future__ import annotations

import numpy as np
import pytest

from scalerl.forecast.curves import sigmoid_reward
from scalerl.forecast.diagnostics import late_stretch, plateau_reached
from scalerl.forecast.fitting import fit_sigmoid
from scalerl.forecast.sigmoid_solver import SolverProblem, jacobian, residuals
from scalerl.report.headline import ceiling_phrase

A, B, C_MID, R0 = 0.6, 1.5, 1.0, 0.1


def synthetic_run(noise, length, seed=0, n=41):
    """The textbook sigmoid, evaluated at n evenly spaced computes up to `length` x C_mid."""
    rng = np.random.default_rng(seed)
    compute = np.linspace(0.0, length * C_MID, n)
    return compute, sigmoid_reward(compute, A, B, C_MID, R0) + rng.normal(0.0, noise, n)


@pytest.mark.parametrize("noise", [0.002, 0.005, 0.01])
@pytest.mark.parametrize("length", [8, 16])
def test_a_run_past_eight_midpoints_is_identified_at_every_level_with_a_tight_interval(noise, length):
    compute, reward = synthetic_run(noise, length)
    fits = {level: fit_sigmoid(compute, reward, level=level) for level in (0.5, 0.8, 0.95)}
    assert all(fit.ceiling_identified for fit in fits.values())
    low, high = fits[0.8].conf_int(0.8)["A"]
    assert A - 0.03 <= low <= A <= high <= A + 0.03
    # At 95 % the lower end may reach the flat end's level (diagnostics.flat_end_floor): at 8 x
    # C_mid the data sit ~0.02 below A and cannot exclude a ceiling there.
    low, high = fits[0.95].conf_int(0.95)["A"]
    assert A - 0.04 <= low <= A <= high <= A + 0.03
    assert "longer" not in ceiling_phrase(fits[0.95], 0.95)


def test_a_run_stopped_before_its_midpoint_is_not_identified_at_any_level():
    compute, reward = synthetic_run(0.005, 0.6)
    for level in (0.5, 0.8, 0.95):
        fit = fit_sigmoid(compute, reward, level=level)
        assert not fit.ceiling_identified
        assert "longer" in ceiling_phrase(fit, level)


def test_a_long_flat_run_is_read_at_its_level_and_never_told_to_run_longer():
    """Jump then 1,000 steps flat at 0.69 (a verl GSM8K run's shape): identified, A within 0.01
    of the level, an interval holding it and no upper tail beyond 0.03 above it. The 95 % interval:
    this draw's noise averages -0.0015 over the flat stretch, 2 standard errors below 0.69."""
    rng = np.random.default_rng(5)
    compute = np.arange(1, 113) * 10.0
    reward = 0.69 - 0.04 * np.exp(-compute / 40.0) + rng.normal(0.0, 0.008, compute.size)
    fit = fit_sigmoid(compute, reward)
    low, high = fit.conf_int(0.95)["A"]
    assert fit.ceiling_identified
    assert abs(fit.a - 0.69) <= 0.01 and low <= 0.69 <= high <= 0.72
    assert "longer" not in ceiling_phrase(fit)


def test_plateau_reached_by_hand():
    compute = np.arange(1.0, 21.0)
    flat = np.r_[np.linspace(0.2, 0.5, 15), np.full(5, 0.5)] + np.array([0, 0.001] * 10)
    late = late_stretch(compute, flat, noise_sd=0.01)
    assert late.n == 5 and late.is_flat(0.8)
    mean, sd = late.ceiling_prior()
    assert mean == pytest.approx(np.mean(flat[-5:]))
    assert sd == pytest.approx(np.hypot(late.level_sd / np.sqrt(5), late.slope_se * np.log(20.0 / 16.0)))
    assert plateau_reached(late, mean + 0.019) and plateau_reached(late, mean - 0.019)
    assert not plateau_reached(late, mean + 0.021)
    rising = np.linspace(0.2, 0.8, 20)
    assert not late_stretch(compute, rising, noise_sd=0.001).is_flat(0.8)


def test_prior_on_a_is_one_more_residual_row_weighted_as_an_evaluation():
    problem = SolverProblem(np.array([-1.0, 0.0]), np.array([0.3, 0.5]), 0.1, np.array([0.1, 0.1, -5.0]),
                            np.array([1.0, 12.0, 5.0]), f_scale=0.01, a_prior=(0.55, 0.02))
    theta = np.array([0.6, 1.5, -0.5])
    rows = residuals(theta, problem)
    assert rows.size == 3 and rows[-1] == pytest.approx((0.6 - 0.55) * 0.01 / 0.02)
    assert jacobian(theta, problem)[-1] == pytest.approx([0.01 / 0.02, 0.0, 0.0])


def test_run_longer_is_advised_only_while_the_fitted_curve_is_below_its_ceiling():
    from types import SimpleNamespace

    from scalerl.forecast.diagnostics import ceiling_identifiability
    from scalerl.forecast.result import ComputeNearCeiling

    # A wide interval (0.3 of a 0.5 gain) on a curve at 10 x C_mid, B = 2: within 0.02 of A since
    # C_mid (0.5 / 0.02 - 1)^(1/2) = 4.9 x C_mid, so noise, not compute, is what is missing.
    identified, warning = ceiling_identifiability(0.6, 0.1, 1.0, (0.45, 0.75), 1.0, 10.0, residual_dof=5, b=2.0)
    assert not identified and "running longer will not pin A" in warning and "Run to at least" not in warning
    # The same curve seen only to 2 x C_mid: past the inflection, so the run length alone, 4.9 / 2.
    identified, warning = ceiling_identifiability(0.6, 0.1, 1.0, (0.45, 0.75), 1.0, 2.0, residual_dof=5, b=2.0)
    assert not identified and "only a longer run pins A" in warning and "needs ~2.45 times" in warning
    assert "pass the inflection" not in warning
    # Seen to half of C_mid: pass the inflection first (2 x C_mid = 2, 4 x the current max).
    identified, warning = ceiling_identifiability(0.6, 0.1, 1.0, (0.45, 0.75), 1.0, 0.5, residual_dof=5, b=2.0)
    assert not identified and "Run to at least ~2 compute (4.0 times the current max) to pass the inflection" in warning
    # Past the inflection with a run length of 1e4 x: no run pins A.
    identified, warning = ceiling_identifiability(1.0, 0.1, 1.0, (0.8, 1.0), 1.0, 2.0, residual_dof=5, b=0.1)
    assert not identified and "rises too slowly for any run to pin A" in warning

    def stub(near_value, current, c_mid=1.0):
        near = ComputeNearCeiling(0.02, near_value, near_value, near_value, current, 0.8)
        return SimpleNamespace(ceiling_identified=False, compute=[current], c_mid=c_mid,
                               compute_near_ceiling=lambda level=0.8: near)

    assert "longer" not in ceiling_phrase(stub(4.9, 10.0)) and "noisy" in ceiling_phrase(stub(4.9, 10.0))
    # Past the inflection (C_last = 2 x C_mid) the run length: 4.8 / 2.
    assert "run ~2.4x longer" in ceiling_phrase(stub(4.8, 2.0))
    # Before it, 2 x C_mid / C_last: 100 is still a plan; 1,000 (a midpoint 500x past the data) is not.
    assert "run ~100.0x longer" in ceiling_phrase(stub(4.9e3, 2.0, c_mid=100.0))
    far = ceiling_phrase(stub(4.9e3, 2.0, c_mid=1000.0))
    assert "x longer" not in far and "not begun to bend" in far and "over 100x" in far
    # Past the inflection with a run length of 500x: still rising, no run length.
    slow = ceiling_phrase(stub(1e3, 2.0))
    assert "x longer" not in slow and "still rises" in slow and "over 100x" in slow


def test_a_run_still_rising_past_its_bend_is_told_its_slope_not_a_run_length():
    # A bundled verl run: a jump at its first evaluation, then +0.049 per doubling of compute over its
    # last six evaluations (0.862 -> 0.889), with the fitted A at its bound 1. Its old headline read
    # "run ~2.0x longer" (to pass an inflection already 1,900x behind the last point).
    from pathlib import Path

    import pandas as pd

    frame = pd.read_csv(Path(__file__).resolve().parents[1] / "benchmarks" / "data" / "curves"
                        / "verl-asyncreward__q3b_fsdp_off_ppl.csv")
    result = fit_sigmoid(frame["compute"].to_numpy(float), frame["reward"].to_numpy(float))
    assert not result.ceiling_identified and result.c_mid < frame["compute"].max()
    phrase = ceiling_phrase(result)
    assert "x longer" not in phrase and "still rises (+0.049 per doubling of compute" in phrase
    assert result.compute_near_ceiling().times_current > 100
    assert "no run pins A" in result.compute_near_ceiling().message()
