"""The fit gives the same answer whatever affine unit the reward is logged in (forecast.reward_unit)."""

import json

import numpy as np
import pytest
from cli_invocation import invoke

from scalerl.forecast.compare import compare_runs
from scalerl.forecast.curves import sigmoid_reward
from scalerl.forecast.fitting import fit_sigmoid
from scalerl.forecast.reward_unit import reward_unit

# (scale, shift, range): a pass rate, a percentage, the mean of +1/-1 rewards
UNITS = [(1.0, 0.0, (0.0, 1.0)), (100.0, 0.0, (0.0, 100.0)), (2.0, -1.0, (-1.0, 1.0))]


def test_the_unit_is_the_range_width_or_the_largest_reward_of_an_open_range():
    assert reward_unit([0.2, 0.9], (0.0, 1.0)) == 1.0
    assert reward_unit([20.0, 90.0], (0.0, 100.0)) == 100.0
    assert reward_unit([-0.6, 0.2], (-1.0, 1.0)) == 2.0
    assert reward_unit([-0.6, 0.2], None) == 1.0  # within [-1, 1]: the pass-rate unit
    assert reward_unit([10.0, -58.0, 40.0], None) == 58.0


def _levelled_off_run(seed=0):
    """Rises to ~0.52 by a third of the run, then flat within noise 0.01 for the rest (41 points)."""
    rng = np.random.default_rng(seed)
    step = np.linspace(0.0, 300.0, 41)
    return step, 0.30 + 0.22 * (1.0 - np.exp(-step / 40.0)) + rng.normal(0.0, 0.01, step.size)


def _still_rising_run(seed=1):
    """A sigmoid at 4 C_mid: past its bend, still 11 % of its gain short of A (A known to about
    +-0.03, well outside the +-0.02 margin, so the verdict is no coin toss of the sampler)."""
    rng = np.random.default_rng(seed)
    compute = np.linspace(0.0, 4.0, 31)
    return compute, sigmoid_reward(compute, 0.6, 1.5, 1.0, 0.1) + rng.normal(0.0, 0.01, compute.size)


@pytest.mark.parametrize("scale,shift,reward_range", UNITS[1:])
@pytest.mark.parametrize("make_run", [_levelled_off_run, _still_rising_run])
def test_a_run_in_another_unit_gets_the_same_ceiling_verdict_run_length_and_band(make_run, scale, shift, reward_range):
    compute, rate = make_run()
    as_rate = fit_sigmoid(compute, rate, n_draws=1000)
    other = fit_sigmoid(compute, scale * rate + shift, reward_range=reward_range, n_draws=1000)
    back = lambda value: (np.asarray(value) - shift) / scale  # noqa: E731
    assert other.reward_unit == scale
    assert other.ceiling_identified == as_rate.ceiling_identified
    assert other.verdict.kind == as_rate.verdict.kind
    assert back(other.a) == pytest.approx(as_rate.a, abs=0.005)
    # the sampler's chain is the same draw up to rounding; its quantiles agree to a fraction of their width
    low, high = as_rate.conf_int(0.8)["A"]
    assert back(other.conf_int(0.8)["A"]) == pytest.approx((low, high), abs=max(0.005, 0.15 * (high - low)))
    near_other, near_rate = other.compute_near_ceiling(), as_rate.compute_near_ceiling()
    assert near_other.within == pytest.approx(0.02 * scale)
    assert near_other.times_current == pytest.approx(near_rate.times_current, rel=0.05)  # medians of near-equal chains
    ahead = compute[-1] * np.array([1.5, 3.0])
    assert back(other.predict(ahead)) == pytest.approx(as_rate.predict(ahead), abs=3e-3)
    assert np.allclose(back(np.array(other.interval(ahead, 0.8))), np.array(as_rate.interval(ahead, 0.8)), atol=0.005)


def test_a_levelled_off_percentage_is_read_at_its_level_and_not_told_to_run_on():
    step, rate = _levelled_off_run()
    fit = fit_sigmoid(step, 100.0 * rate, reward_range=(0.0, 100.0))
    settled = 100.0 * rate[-10:].mean()
    lo, hi = fit.conf_int(0.8)["A"]
    assert fit.ceiling_identified and abs(fit.a - settled) <= 2.0 and lo <= fit.a <= hi
    assert fit.verdict.kind == "plateaued"
    # the run length is the fraction's: the fitted curve is already within 2 points of A
    assert fit.compute_near_ceiling().times_current <= 1.0


def test_compare_counts_ceilings_within_two_points_of_a_percentage_as_equal():
    compute = np.linspace(0.0, 8.0, 33)
    low = sigmoid_reward(compute, 0.60, 2.0, 1.0, 0.1)
    high = sigmoid_reward(compute, 0.61, 1.2, 1.0, 0.1)
    runs_rate = {"a": (compute, low), "b": (compute, high)}
    runs_percent = {"a": (compute, 100 * low), "b": (compute, 100 * high)}
    as_rate = compare_runs(runs_rate, n_draws=50)
    as_percent = compare_runs(runs_percent, n_draws=50, reward_range=(0.0, 100.0))
    assert as_rate.margin == pytest.approx(0.02) and as_percent.margin == pytest.approx(2.0)
    assert as_rate.decided_by == as_percent.decided_by == "efficiency"  # A 0.60 and 0.61: within the margin
    assert as_rate.ranking == as_percent.ranking == ("a", "b")  # then the higher B wins


def test_cli_fit_of_a_percentage_reports_the_run_length_in_its_unit_and_hints_at_the_range(tmp_path):
    step, rate = _levelled_off_run()
    path = tmp_path / "percent.csv"
    path.write_text("step,accuracy\n" + "".join(f"{s},{100 * r}\n" for s, r in zip(step, rate)))
    given = invoke("fit", path, "--y", "accuracy", "--reward-range", "0", "100", "--json")
    assert given.exit_code == 0, given.output
    payload = json.loads(given.stdout)
    assert payload["compute_near_ceiling"]["within"] == pytest.approx(2.0)
    inferred = invoke("fit", path, "--y", "accuracy")
    assert inferred.exit_code == 0
    assert "inferred as open" in inferred.output and "--reward-range 0 100" in inferred.output


def _percent_csv(path, rate):
    step = np.linspace(0.0, 300.0, rate.size)
    path.write_text("step,reward\n" + "".join(f"{s},{100 * r}\n" for s, r in zip(step, rate)))
    return path


def test_report_fits_percentages_with_the_range_inferred_or_given_and_compares_them_in_points(tmp_path):
    from scalerl.report.html_report import build_report

    _, low = _levelled_off_run(seed=0)
    _, high = _levelled_off_run(seed=1)
    paths = [_percent_csv(tmp_path / "a.csv", low), _percent_csv(tmp_path / "b.csv", high + 0.05)]
    inferred = build_report(paths, n_draws=50)
    assert all(run.fit is not None and run.error is None for run in inferred.runs)
    assert any("(a percentage? --reward-range 0 100)" in w for w in inferred.warnings)
    given = build_report(paths, n_draws=50, reward_range=(0.0, 100.0))
    assert all(run.fit.reward_range == (0.0, 100.0) for run in given.runs)
    assert given.comparison.margin == pytest.approx(2.0) and given.margin == pytest.approx(2.0)
    assert given.comparison.ranking[0] == "b"  # 5 points higher: more than the margin
    assert not any("percentage?" in w for w in given.warnings)
