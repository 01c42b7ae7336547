"""One verdict (forecast.verdict): the same at every level, plateaus read, run lengths from the posterior."""

from __future__ import annotations

import numpy as np
import pytest

from scalerl.forecast.curves import sigmoid_reward
from scalerl.forecast.diagnostics import end_misfit, late_stretch
from scalerl.forecast.fitting import fit_sigmoid
from scalerl.forecast.result import FitResult
from scalerl.forecast.verdict import decide, factor_text

A, B, C_MID, R0 = 0.6, 1.5, 1.0, 0.1


def synthetic_run(noise, length, seed=0, n=41):
    """The textbook sigmoid, evaluated at n evenly spaced computes up to `length` x C_mid."""
    rng = np.random.default_rng(seed)
    compute = np.linspace(0.0, length * C_MID, n)
    return compute, sigmoid_reward(compute, A, B, C_MID, R0) + rng.normal(0.0, noise, n)


@pytest.mark.parametrize("noise", [0.002, 0.005, 0.01])
@pytest.mark.parametrize("length", [8, 16])
def test_a_run_past_eight_midpoints_is_plateaued_at_every_level_with_a_tight_interval(noise, length):
    compute, reward = synthetic_run(noise, length)
    fits = {level: fit_sigmoid(compute, reward, level=level) for level in (0.5, 0.8, 0.95)}
    assert {fit.verdict.kind for fit in fits.values()} == {"plateaued"}
    low, high = fits[0.8].conf_int(0.8)["A"]
    assert A - 0.03 <= low <= fits[0.8].a <= high <= A + 0.03
    assert "longer" not in fits[0.95].verdict.text


def test_a_run_stopped_before_its_midpoint_is_still_rising_at_any_level():
    compute, reward = synthetic_run(0.005, 0.6)
    for level in (0.5, 0.8, 0.95):
        fit = fit_sigmoid(compute, reward, level=level)
        assert fit.verdict.kind == "still_rising" and not fit.ceiling_identified


def test_a_long_flat_run_is_read_at_its_level_and_never_told_to_run_longer():
    """Jump then 1,000 steps flat at 0.69 (a verl GSM8K run's shape): plateaued, A within 0.01
    of the level, its 95 % interval holding it and no upper tail beyond 0.03 above it."""
    rng = np.random.default_rng(5)
    compute = np.arange(1, 113) * 10.0
    reward = 0.69 - 0.04 * np.exp(-compute / 40.0) + rng.normal(0.0, 0.008, compute.size)
    fit = fit_sigmoid(compute, reward)
    low, high = fit.conf_int(0.95)["A"]
    assert fit.verdict.kind == "plateaued"
    assert abs(fit.a - 0.69) <= 0.01 and low <= 0.69 <= high <= 0.72
    assert "longer" not in fit.verdict.text


def test_a_known_ceiling_the_curve_has_not_reached_is_plateaued_with_its_run_length_as_a_fact():
    """Data to 6 C_mid (noise 0.002): A is known to +-0.02, but the curve reaches within 0.02 of it
    only at C_mid (|A - R0| / 0.02 - 1)^(1/B) = 24^(2/3) = 8.32 C_mid, 1.39x the compute so far.
    The verdict says so without advising a longer run, and the run-length line agrees with it."""
    compute, reward = synthetic_run(0.002, 6)
    fit = fit_sigmoid(compute, reward)
    verdict = fit.verdict
    assert verdict.kind == "plateaued" and not verdict.advises_longer_run
    assert verdict.numbers["times_longer"] == pytest.approx(24 ** (2 / 3) / 6, rel=0.15)
    assert "longer" not in verdict.text and f"~{verdict.numbers['times_longer']:.3g}x the compute" in verdict.text
    near = fit.compute_near_ceiling()
    assert near.times_current == pytest.approx(verdict.numbers["times_longer"], rel=1e-9)
    assert "pin" not in near.message() and "run about" not in near.message()


def test_late_stretch_flat_by_hand():
    compute = np.arange(1.0, 21.0)
    flat = np.r_[np.linspace(0.2, 0.5, 15), np.full(5, 0.5)] + np.array([0, 0.001] * 10)
    late = late_stretch(compute, flat, noise_sd=0.01)
    assert late.n == 5 and late.is_flat(0.8) and late.level == pytest.approx(np.mean(flat[-5:]))
    rising = np.linspace(0.2, 0.8, 20)
    assert not late_stretch(compute, rising, noise_sd=0.001).is_flat(0.8)


def stub(a_draws, b_draws, c_mid_draws, last=10.0, r0=0.1, collapse=None):
    """A result with the given posterior draws of (A, B, C_mid), fitted up to compute `last`."""
    draws = np.column_stack([np.broadcast_to(v, (400,)) for v in (a_draws, b_draws, c_mid_draws)])
    return FitResult(
        a=float(np.median(draws[:, 0])),
        b=float(np.median(draws[:, 1])),
        c_mid=float(np.median(draws[:, 2])),
        r0=r0,
        stderr={},
        n_points=1,
        compute=np.array([last]),
        reward=np.array([0.5]),
        warnings=(),
        param_draws=draws,
        noise_sd=0.01,
        noise_dof=4.0,
        noise_draws=np.zeros(400),
        collapse_compute=collapse,
    )


def test_verdict_rules_by_hand():
    rng = np.random.default_rng(0)
    # A's 80 % interval 0.6 +- 1.2816 x 0.01 = +-0.013: within +-0.02, plateaued.
    tight = stub(0.6 + 0.01 * rng.standard_normal(400), 2.0, 1.0)
    assert decide(tight).kind == "plateaued"
    # +-0.038 at sd 0.03: not known to the margin. At 10 x C_mid with B = 2 the curve is within 0.02
    # of A (C_within = C_mid (0.5 / 0.02 - 1)^(1/2) = 4.9 C_mid < 10): too noisy, not "run longer".
    wide = stub(0.6 + 0.03 * rng.standard_normal(400), 2.0, 1.0)
    assert decide(wide).kind == "too_noisy" and "longer run does not" in decide(wide).text
    # The same curve seen only to 2 x C_mid: run ~4.9 / 2 = 2.45x longer.
    short = stub(0.6 + 0.03 * rng.standard_normal(400), 2.0, 1.0, last=2.0)
    verdict = decide(short)
    assert verdict.kind == "still_rising" and verdict.numbers["times_longer"] == pytest.approx(2.45, rel=0.1)
    lo, hi = verdict.numbers["times_longer_interval"]
    assert lo <= verdict.numbers["times_longer"] <= hi and "x longer" in verdict.text
    # B = 0.1: C_within = C_mid 24^10, far beyond 100x: no run length offered.
    slow = stub(0.6 + 0.03 * rng.standard_normal(400), 0.1, 1.0, last=2.0)
    assert decide(slow).kind == "still_rising" and "x longer" not in decide(slow).text
    # A collapse comes first and never advises a longer run.
    collapsed = decide(stub(0.6 + 0.03 * rng.standard_normal(400), 2.0, 1.0, last=2.0, collapse=5.0))
    assert collapsed.kind == "collapsed" and not collapsed.advises_longer_run


def test_a_slow_tail_the_data_cannot_rule_out_is_never_called_too_noisy():
    """Seen to 10 x C_mid, 70 % of the draws have B = 2 (within 0.02 of A from
    C_mid (0.5 / 0.02 - 1)^(1/2) = 4.9 C_mid: at the end of the data) and 30 % B = 0.5 (from
    C_mid 24^2 = 576 C_mid, 57.6x the compute so far, at A = 0.6; A's own spread moves it). The
    median is within the data, but the 80 % interval of the run length reaches about 58x: a longer
    run is what would pin A, so the verdict
    never says "a longer run does not" and names how much longer tells."""
    rng = np.random.default_rng(0)
    b_draws = np.where(np.arange(400) < 280, 2.0, 0.5)
    verdict = decide(stub(0.6 + 0.03 * rng.standard_normal(400), b_draws, 1.0))
    assert verdict.kind == "still_rising" and verdict.advises_longer_run
    assert verdict.numbers["times_longer"] <= 1.0
    high = verdict.numbers["times_longer_interval"][1]
    assert high == pytest.approx(57.6, rel=0.1)
    assert (
        "probably at its ceiling" in verdict.text and f"run up to ~{factor_text(high)}x longer to tell" in verdict.text
    )
    assert "longer run does not" not in verdict.text


@pytest.mark.parametrize("shape", ["collapse", "rise_above"])
def test_no_run_length_where_the_curve_does_not_describe_the_end(shape):
    """After a collapse, or where the run's end lies above the fitted curve, the run length of the
    curve is no answer for the run: the JSON's compute_near_ceiling is null and the text says why."""
    rng = np.random.default_rng(0)
    compute = np.linspace(0.25, 10.0, 40) * C_MID
    reward = sigmoid_reward(compute, A, 3.0, C_MID, R0) + rng.normal(0.0, 0.01, compute.size)
    if shape == "collapse":
        reward[-10:] = 0.15 + rng.normal(0.0, 0.01, 10)
    else:
        reward[-10:] += np.linspace(0.01, 0.1, 10)
    fit = fit_sigmoid(compute, reward)
    assert fit.verdict.kind == ("collapsed" if shape == "collapse" else "still_rising")
    assert fit.to_dict()["compute_near_ceiling"] is None
    assert (
        fit.run_length_text().startswith("none: ") and fit.verdict.run_length_missing_because in fit.run_length_text()
    )
    assert "run length: none" in fit.summary()
    # a forecast at a budget is the fitted curve's, and says so
    from scalerl.report.headline import fit_headline

    headline = fit_headline(fit, budget=20.0)
    assert "the fitted curve's reward at the budget 20: " in headline and "final reward" not in headline
    # so is the compute to a target the curve reaches, in the headline and on the console's line
    target = 0.5
    needed = fit.compute_to_reach(target)
    assert needed.reachable
    assert "the fitted curve reaches the target 0.5 at compute " in fit_headline(fit, target=target)
    assert needed.message(of_curve=True).startswith("the fitted curve reaches reward 0.5 at compute ")


def test_a_run_still_rising_past_its_bend_gets_no_run_length():
    # A bundled verl run: a jump at its first evaluation, then +0.049 per doubling of compute over its
    # last six evaluations (0.862 -> 0.889); no ceiling in reach.
    from pathlib import Path

    import pandas as pd

    frame = pd.read_csv(
        Path(__file__).resolve().parents[1]
        / "benchmarks"
        / "data"
        / "curves"
        / "verl-asyncreward__q3b_fsdp_off_ppl.csv"
    )
    result = fit_sigmoid(frame["compute"].to_numpy(float), frame["reward"].to_numpy(float))
    assert result.verdict.kind in ("still_rising", "too_noisy") and not result.ceiling_identified


def test_end_misfit_by_hand():
    # 20 points, late stretch max(5, 20 / 4) = 5: residuals 0.02 each, sigma 0.01 -> z = 0.02 / (0.01 / sqrt(5)).
    fitted = np.linspace(0.1, 0.6, 20)
    reward = fitted.copy()
    reward[-5:] += 0.02
    end = end_misfit(reward, fitted, 0.01)
    assert end.n == 5 and end.mean_residual == pytest.approx(0.02) and end.z == pytest.approx(2.0 * np.sqrt(5))
    assert end_misfit(reward[:9], fitted[:9], 0.01) is None  # fewer than 2 n points: nothing to check against


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_a_second_rise_at_the_end_is_still_rising_with_nothing_read(seed):
    """A steep sigmoid (B = 3) pinned by 30 evenly spaced evaluations over its rise and level, whose
    last 10 of 40 climb again by up to 0.1 (a VLM DAPO run's shape): the sigmoid cannot follow,
    the end lies above it; A and the run length are said to describe the run before that rise."""
    rng = np.random.default_rng(seed)
    compute = np.linspace(0.25, 10.0, 40) * C_MID
    reward = sigmoid_reward(compute, A, 3.0, C_MID, R0) + rng.normal(0.0, 0.01, compute.size)
    reward[-10:] += np.linspace(0.01, 0.1, 10)
    verdict = fit_sigmoid(compute, reward).verdict
    assert verdict.kind == "still_rising" and verdict.numbers["end_z"] >= 3.0
    assert "describes the run before that rise, not its end" in verdict.text
    assert "run length are no ceiling for this run" in verdict.text
    assert "times_longer" not in verdict.numbers


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_a_run_that_falls_at_its_end_says_so(seed):
    """The same run whose last 10 evaluations fall by 0.01 to 0.06 (below a collapse): its verdict
    names the fall and how far below the fitted curve the end lies."""
    compute, reward = synthetic_run(0.01, 8, seed=seed)
    reward[-10:] -= np.linspace(0.01, 0.06, 10)
    fit = fit_sigmoid(compute, reward)
    assert fit.collapse_compute is None and fit.verdict.numbers["end_z"] <= -3.0
    assert "levelled off or fell below the ceiling" in fit.verdict.text


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_a_jump_then_a_slow_creep_is_not_called_plateaued_below_its_own_end(seed):
    """A run that jumps from 0.001 to 0.3 between two evaluations, then creeps from 0.36 to 0.46
    over 15 more (noise 0.008; a GSM8K GRPO run's shape): the steep sigmoid of the jump levels off
    near 0.43, the creep's structured residuals widen the residual noise to about twice the
    evaluations' own, and checked against that the end hid (z about 2). Against the
    successive-difference noise it is a misfit: still rising above the fitted curve, never
    "plateaued" with A's interval below the run's last evaluations."""
    rng = np.random.default_rng(seed)
    compute = np.arange(0.0, 210.0, 10.0)
    reward = np.r_[np.full(4, 0.001), 0.1, 0.3, np.linspace(0.36, 0.46, 15)]
    reward[5:] += rng.normal(0.0, 0.008, 16)
    fit = fit_sigmoid(compute, reward)
    assert fit.difference_noise_sd < fit.noise_sd
    assert fit.verdict.kind == "still_rising" and fit.verdict.numbers["end_z"] >= 3.0


def test_textbook_runs_pass_the_end_check():
    """40 textbook sigmoids of random length (2-16 C_mid), steepness, size and noise: none misfit at its end."""
    rng = np.random.default_rng(100)
    for _ in range(40):
        compute = np.linspace(0.0, rng.uniform(2, 16), int(rng.integers(15, 60)))
        reward = sigmoid_reward(compute, A, rng.uniform(0.8, 3.0), C_MID, R0)
        fit = fit_sigmoid(compute, reward + rng.normal(0.0, rng.uniform(0.003, 0.02), compute.size))
        assert "end_z" not in fit.verdict.numbers


def test_run_length_factors_are_written_without_exponents():
    from scalerl.forecast.verdict import factor_text

    assert [factor_text(x) for x in (1.06, 21.3, 250.4, 1234.0, 0.93)] == ["1.1", "21", "250", "1200", "0.93"]


def test_a_run_length_interval_past_the_far_limit_is_said_in_words():
    """Seen to 2 x C_mid: half the draws B = 2 (within 0.02 of A at 4.9 C_mid, 2.45x), half B = 0.3
    (C_mid 24^(1/0.3), over 100x): the median is ~2.45x and the interval's top is written "over 100x",
    never as a number in exponent notation."""
    rng = np.random.default_rng(0)
    b_draws = np.where(np.arange(400) < 300, 2.0, 0.3)
    verdict = decide(stub(0.6 + 0.03 * rng.standard_normal(400), b_draws, 1.0, last=2.0))
    assert verdict.kind == "still_rising" and "to over 100x) to read A" in verdict.text
    assert "e+" not in verdict.text
