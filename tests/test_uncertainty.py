import emcee
import numpy as np
import pytest

from scalerl.forecast.curves import sigmoid_reward
from scalerl.forecast.diagnostics import DEFAULT_NOISE_FLOOR
from scalerl.forecast.fitting import fit_sigmoid, with_gain_ahead_log_sd
from scalerl.forecast.posterior import (
    log_likelihood,
    log_prior,
    regroup_stuck_walkers,
    restart_next_to_good,
    sampler_moves,
)
from scalerl.forecast.sigmoid_solver import SolverProblem
from scalerl.forecast.uncertainty import residual_noise_sd


def test_residual_noise_sd_formula_and_floor():
    residual = np.array([0.02, -0.02, 0.02, -0.02, 0.02, -0.02])
    assert residual_noise_sd(residual, 3, noise_floor=0.0) == pytest.approx(np.sqrt(6 * 0.0004 / 3))
    assert residual_noise_sd(residual * 0.01, 3) == DEFAULT_NOISE_FLOOR == 0.002
    assert residual_noise_sd(residual[:3], 3, noise_floor=0.004) == 0.004  # no residual dof


def small_problem():
    u = np.log(np.array([0.25, 0.5, 0.75, 1.0]))
    reward = np.array([0.3, 0.4, 0.45, 0.5])
    lower, upper = np.array([0.21, 0.1, -8.0]), np.array([1.0, 12.0, 7.0])
    return SolverProblem(u, reward, 0.2, lower, upper)


def test_student_t_likelihood_and_prior_known_values():
    problem = small_problem()
    theta = np.array([[0.6, 2.0, -1.0, np.log(0.02)]])
    a, b, s, log_sigma = theta[0]
    predicted = 0.2 + (a - 0.2) / (1 + np.exp(-b * (problem.log_compute - s)))
    z = (predicted - problem.reward) / 0.02
    expected = np.sum(-2.5 * np.log1p(z**2 / 4.0) - log_sigma)
    assert log_likelihood(theta, problem)[0] == pytest.approx(expected)
    outside = np.array([[1.2, 2.0, -1.0, np.log(0.02)], [0.6, 2.0, -1.0, np.log(0.001)]])
    assert np.all(np.isneginf(log_prior(outside, problem, np.log(0.02), np.log(0.01))))
    # log-normal prior on B: density peaks at exp(mu - sd^2) in B once the 1/B Jacobian is included
    grid = np.column_stack(
        [np.full(400, 0.6), np.geomspace(0.2, 8, 400), np.full(400, -1.0), np.full(400, np.log(0.02))]
    )
    peak = grid[np.argmax(log_prior(grid, problem, np.log(0.02), np.log(0.01))), 1]
    assert peak == pytest.approx(1.5 * np.exp(-0.64), rel=0.02)


def test_intervals_shrink_with_less_noise():
    compute = np.concatenate([[0.0], np.linspace(200.0, 20000.0, 15)])
    clean = sigmoid_reward(compute, 0.6, 1.8, 3000.0, 0.2)
    rng = np.random.default_rng(0)
    noisy = clean + rng.normal(0, 0.03, compute.size) * (compute > 0)
    quiet = clean + rng.normal(0, 0.003, compute.size) * (compute > 0)
    # 400 draws: an interval's width from 60 draws moved by a factor 1.8 between sampler seeds
    wide = fit_sigmoid(compute, noisy, n_draws=400)
    narrow = fit_sigmoid(compute, quiet, n_draws=400)
    floored = fit_sigmoid(compute, quiet, n_draws=400, noise_floor=0.01)
    width = lambda fit: np.subtract(*fit.conf_int()["A"][::-1])  # noqa: E731
    assert width(wide) > 3 * width(narrow)
    assert width(floored) > 2 * width(narrow)
    assert wide.noise_sd == pytest.approx(0.03, rel=0.5) and floored.noise_sd == 0.01
    # the default floor only guards against zero: a quiet run keeps its own noise (this draw's
    # scatter is 0.0021), not the 0.005 floor the library had
    assert DEFAULT_NOISE_FLOOR <= narrow.noise_sd < 0.0025
    # the posterior noise scale follows the data and never goes under the floor
    assert np.median(wide.noise_scale_draws) == pytest.approx(0.03, rel=0.5)
    assert floored.noise_scale_draws.min() >= 0.01


def test_posterior_is_reproducible_for_a_seed_and_differs_across_seeds():
    compute = np.concatenate([[0.0], np.linspace(200.0, 20000.0, 10)])
    reward = sigmoid_reward(compute, 0.6, 1.8, 3000.0, 0.2) + 0.01 * np.sin(np.arange(11)) * (compute > 0)
    first = fit_sigmoid(compute, reward, seed=7, n_draws=30)
    second = fit_sigmoid(compute, reward, seed=7, n_draws=30)
    other = fit_sigmoid(compute, reward, seed=8, n_draws=30)
    assert np.array_equal(first.param_draws, second.param_draws)
    assert first.interval(5e4) == second.interval(5e4)
    assert not np.array_equal(first.param_draws, other.param_draws)


def test_posterior_walks_the_ridge_before_the_inflection():
    """Cut at half of C_mid the ceiling is not pinned down: the A interval must be wide (the
    bootstrap's was a few hundredths) and still hold the truth; past the inflection it is narrow."""
    c_mid = 3000.0
    early = np.concatenate([[0.0], np.linspace(c_mid / 20, c_mid / 2, 10)])
    late = np.concatenate([[0.0], np.linspace(c_mid / 20, 8 * c_mid, 20)])
    rng = np.random.default_rng(5)
    fits = {}
    for name, compute in (("early", early), ("late", late)):
        reward = rng.binomial(1000, sigmoid_reward(compute, 0.6, 1.8, c_mid, 0.2)) / 1000
        fits[name] = fit_sigmoid(compute, reward)
    early_a, late_a = fits["early"].conf_int(0.8)["A"], fits["late"].conf_int(0.8)["A"]
    assert early_a[0] < 0.6 < early_a[1] and early_a[1] - early_a[0] > 0.15
    assert late_a[0] < 0.6 < late_a[1] and late_a[1] - late_a[0] < 0.06
    assert not fits["early"].ceiling_identified and fits["late"].ceiling_identified


def noisy_sigmoid_run(rng, cut):
    """Random ScaleRL-like sigmoid observed to `cut` x C_mid (12 evaluations, 1000 prompts);
    returns the run and a fresh evaluation at the far end, 4 x C_mid."""
    a = rng.uniform(0.5, 0.9)
    r0 = rng.uniform(0.0, 0.3) * a
    b = rng.uniform(1.0, 2.5)
    c_mid = 10 ** rng.uniform(0, 6)
    compute = np.concatenate([[0.0], np.linspace(cut * c_mid / 12, cut * c_mid, 12)])
    reward = rng.binomial(1000, sigmoid_reward(compute, a, b, c_mid, r0)) / 1000
    far_evaluation = rng.binomial(1000, sigmoid_reward(4 * c_mid, a, b, c_mid, r0)) / 1000
    return compute, reward, 4 * c_mid, far_evaluation


@pytest.mark.slow
@pytest.mark.parametrize("cut", [0.6, 2.5], ids=["before_inflection", "after_inflection"])
def test_80_percent_band_covers_the_far_end_on_70_to_90_percent_of_sigmoids(cut):
    """The posterior-predictive band without the gain factor (the factor is learned on real runs,
    which are not sigmoids plus independent noise) is calibrated on data from its own model. The
    shipped band, with the factor, holds at least as many: on these pure sigmoids it is wider than
    their own model needs (the price of holding real runs, docs/forecasting-decisions.md, "Choosing
    kappa_1"), but the factor widens the posterior's band, it does not swamp it: its median width
    at the far end stays under twice the posterior's (measured 1.5x before the inflection, 1.7x
    after)."""
    rng = np.random.default_rng(11)
    raw, shipped, widths = [], [], []
    for _ in range(60):
        compute, reward, far, observed = noisy_sigmoid_run(rng, cut)
        fit = fit_sigmoid(compute, reward)
        bands = []
        for covered, variant in ((raw, with_gain_ahead_log_sd(fit, 0.0)), (shipped, fit)):
            lo, hi = np.quantile(variant.observation_draws(far), [0.1, 0.9])
            covered.append(lo <= observed <= hi)
            bands.append(hi - lo)
        widths.append(bands[1] / bands[0])
    assert 0.70 <= np.mean(raw) <= 0.90
    assert np.mean(raw) <= np.mean(shipped)
    assert 1.0 < np.median(widths) < 2.0


def noisy_power_law_run(rng):
    """Truth R = R0 + 0.25 (A - R0) (C / C_ref)^0.35: no ceiling in sight, it keeps rising.
    12 evaluations up to C_ref (1000 prompts); a fresh evaluation at 8 x C_ref."""
    a = rng.uniform(0.5, 0.9)
    r0 = rng.uniform(0.0, 0.3) * a
    c_ref = 10 ** rng.uniform(0, 6)

    def truth(compute):
        return np.where(compute > 0, r0 + 0.25 * (a - r0) * np.power(np.maximum(compute, 1e-300) / c_ref, 0.35), r0)

    compute = np.concatenate([[0.0], np.linspace(c_ref / 12, c_ref, 12)])
    reward = rng.binomial(1000, truth(compute)) / 1000
    return compute, reward, 8 * c_ref, rng.binomial(1000, truth(8 * c_ref)) / 1000


@pytest.mark.slow
def test_power_law_truth_gets_a_wide_band_rather_than_a_wrong_one():
    """A sigmoid posterior alone bends where a power law keeps rising (it covers ~40 %); the gain
    factor on the gain beyond the data (forecast.posterior) should widen the band enough to hold it."""
    rng = np.random.default_rng(3)
    covered, widths = [], []
    for _ in range(40):
        compute, reward, far, observed = noisy_power_law_run(rng)
        lo, hi = fit_sigmoid(compute, reward).interval(far, 0.8)
        covered.append(lo <= observed <= hi)
        widths.append(hi - lo)
    assert np.mean(covered) >= 0.8
    assert np.median(widths) > 0.15


def take_off_run(rng, rise_widths):
    """A run flat at R0 that takes off late: R = R0 + (A - R0) expit((step - t0) / w) over 40
    evaluations of 500 prompts, t0 at 30-50 % of the run, w 3-8 % of it (the GSM8K runs of larger
    models stay flat and then climb like this). Cut `rise_widths` x w after t0: the fitted points
    hold the flat start and the first part of the climb. Returns the fitted and the later points."""
    steps = np.arange(1, 41) * 10.0
    r0 = rng.uniform(0.02, 0.3)
    a = rng.uniform(r0 + 0.2, min(0.95, r0 + 0.6))
    t0, w = rng.uniform(0.3, 0.5) * steps[-1], rng.uniform(0.03, 0.08) * steps[-1]
    reward = rng.binomial(500, r0 + (a - r0) / (1.0 + np.exp(-(steps - t0) / w))) / 500
    cut = int(np.searchsorted(steps, t0 + rise_widths * w, side="right"))
    compute = steps * 1e4
    return compute[:cut], reward[:cut], compute[cut:], reward[cut:]


@pytest.mark.parametrize(
    "rise_widths",
    [
        0.0,
        # The posterior alone is overconfident two widths into a climb that is logistic in linear compute
        # (0.32 of the later evaluations inside the 80 % band); a calibration across runs lifted it to >= 0.7.
        pytest.param(2.0, marks=pytest.mark.xfail(strict=True, reason="the one posterior's band is too narrow here")),
    ],
    ids=["at_take_off", "two_widths_into_the_climb"],
)
def test_a_run_that_takes_off_late_keeps_an_honest_band(rise_widths):
    """Fitted where the climb has just begun, the curve's shape is unknown: the 80 % band must
    hold at least 70 % of the later evaluations pooled over 12 such runs (a band that followed the
    flat start or the early slope alone would hold far fewer)."""
    rng = np.random.default_rng(21)
    covered = []
    for _ in range(12):
        compute, reward, later_compute, later_reward = take_off_run(rng, rise_widths)
        lo, hi = fit_sigmoid(compute, reward).interval(later_compute, 0.8)
        covered.extend((later_reward >= lo) & (later_reward <= hi))
    assert np.mean(covered) >= 0.7


def _gaussian_ridge_quantile_error(moves, seed: int = 0, kept: int = 2500, burn: int = 500) -> float:
    """Largest error, in standard deviations, of the 5 / 50 / 95 % quantiles of every margin of a
    4-d Gaussian with correlations 0.95 and -0.8 and scales 0.05-3 (a ridge like A against C_mid
    before the inflection), sampled by emcee with `moves` as run_sampler runs it (32 walkers)."""
    from scipy.stats import norm

    scales = np.array([0.05, 1.0, 3.0, 0.3])
    correlation = np.eye(4)
    correlation[0, 2] = correlation[2, 0] = 0.95
    correlation[1, 3] = correlation[3, 1] = -0.8
    precision = np.linalg.inv(correlation * np.outer(scales, scales))

    def log_prob(x):
        x = np.atleast_2d(x)
        return -0.5 * np.einsum("ij,jk,ik->i", x, precision, x)

    rng = np.random.default_rng(seed)
    sampler = emcee.EnsembleSampler(32, 4, log_prob, vectorize=True, moves=moves)
    sampler.random_state = np.random.RandomState(seed).get_state()
    start = np.array([0.1, 2.0, 4.0, 0.5]) + 0.1 * scales * rng.normal(size=(32, 4))
    sampler.run_mcmc(start, burn + kept, progress=False)
    chain = sampler.get_chain(discard=burn, flat=True)
    quantiles = np.quantile(chain, [0.05, 0.5, 0.95], axis=0) / scales
    return float(np.abs(quantiles - norm.ppf([0.05, 0.5, 0.95])[:, None]).max())


def test_sampler_moves_sample_a_known_posterior():
    """The library's moves leave the target invariant: a correlated Gaussian's quantiles come back
    within 0.08 sd (Monte Carlo error alone is ~0.03-0.04 sd here). emcee 3.1.6's snooker move,
    the library's earlier choice, misses them by ~0.2 sd: the check sees a sampler that does not
    target its posterior."""
    assert _gaussian_ridge_quantile_error(sampler_moves()) < 0.08
    if emcee.__version__ == "3.1.6":  # the release whose snooker direction is not a unit vector
        assert _gaussian_ridge_quantile_error([(emcee.moves.DESnookerMove(), 1.0)]) > 0.12


def test_a_stuck_walker_regrouped_next_to_a_bound_never_restarts_outside_the_support():
    """Walkers far below the best log-probability restart next to a good one; one that sits on the
    bound x <= 1 of a one-dimensional posterior would be jittered across it half the time, where
    emcee's acceptance of -inf against -inf is NaN. With the log-probability given, every restart
    is inside the support, next to the good walker (within its jitter of 1e-3 of the spread)."""

    def log_prob(coords):
        x = np.atleast_2d(coords)[:, 0]
        return np.where(x <= 1.0, -0.5 * ((x - 1.0) / 0.1) ** 2, -np.inf)

    coords = np.column_stack([np.r_[np.linspace(0.9, 1.0, 8), np.full(24, -5.0)]])
    state = emcee.State(coords, log_prob=log_prob(coords))
    unguarded = regroup_stuck_walkers(state, np.random.default_rng(0)).coords
    assert np.any(~np.isfinite(log_prob(unguarded)))  # without the guard some cross the bound
    regrouped = regroup_stuck_walkers(state, np.random.default_rng(0), log_prob).coords
    assert np.all(np.isfinite(log_prob(regrouped)))
    assert np.all((regrouped[8:, 0] >= 0.9 - 1e-4) & (regrouped[8:, 0] <= 1.0))


def test_a_single_good_walker_does_not_collapse_the_ensemble_onto_itself():
    """After a burn-in round with one walker far above the rest, restarting every other walker next
    to it with a jitter of its own (zero) spread stacks them on one point (emcee then refuses the
    ensemble, or keeps a posterior of one point). They restart around it as the sampler started
    instead: with the given sd per coordinate."""
    from emcee.ensemble import walkers_independent

    coords = np.random.default_rng(0).normal(size=(32, 4)) + np.array([65.0, 1.5, -3.4, -1.5])
    log_prob = -50.0 - np.arange(32.0)
    log_prob[7] = 0.0  # one good walker, every other one more than 6.6 below it
    stacked = restart_next_to_good(coords, log_prob < -6.6, np.random.default_rng(1))
    assert np.all(np.std(stacked, axis=0) < 1e-12)  # what the sampler was given before
    start_sd = np.array([0.5, 0.05, 0.1, 0.1])
    regrouped = regroup_stuck_walkers(
        emcee.State(coords, log_prob=log_prob), np.random.default_rng(1), start_sd=start_sd
    ).coords
    assert walkers_independent(regrouped)
    assert np.allclose(np.std(regrouped, axis=0), start_sd, rtol=0.35)  # 31 draws of sd start_sd
    assert np.allclose(np.mean(regrouped, axis=0), coords[7], atol=3 * start_sd / np.sqrt(31))
    # with several good walkers the regrouping is the plain restart, draw for draw
    log_prob[:8] = 0.0
    plain = restart_next_to_good(coords, log_prob < -6.6, np.random.default_rng(1))
    assert np.array_equal(
        regroup_stuck_walkers(emcee.State(coords, log_prob=log_prob), np.random.default_rng(1)).coords, plain
    )
