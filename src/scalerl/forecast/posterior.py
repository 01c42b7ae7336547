"""Bayesian uncertainty of the sigmoid fit: a posterior over (A, B, log C_mid, log sigma).

Before the inflection A, B and C_mid trade off along a ridge: many curves fit the data equally
well and disagree far out. A bootstrap around the best fit stays at one end of that ridge; the
posterior walks along it. In the scale-free coordinates of sigmoid_solver (u = log(C / C_ref),
s = log(C_mid / C_ref)) the model is

    R_i = R0 + (A - R0) * expit(B * (u_i - s)) + sigma * e_i,   e_i ~ Student-t(nu = 4)

with weakly informative priors (independent):

    A        (A - A_low) / (A_top - A_low) ~ Beta(2, 2)   on the least-squares bounds (A_top: the
             reward range's top): no mass at either bound, so A is never pinned at 1
    log B    normal(log 1.5, 0.8)              (the paper reports B of 1.6-2.0; RL curves 0.5-4)
             truncated to [b_min, b_max]
    s        1/2 uniform on the solver's bounds (observed log-compute range +- log 1000)
             + 1/2 uniform from log 10 below the first fitted evaluation to the upper bound
    log sig  normal(log sigma_hat, 0.7)         (sigma_hat: the residual sd sqrt(SSR / (n - p)) of the
             truncated below at log(noise_floor)     least-squares fit that starts the sampler; with
                                                     n <= p, the successive-difference noise)

(the numbers live in forecast.settings.ForecastSettings, each with its reason).

Beyond the last fitted evaluation the sigmoid's shape is an assumption the data cannot check: a
run that keeps climbing after its early points looked saturated, or one that stops sooner than
its rise implies. The model says so with one more variable, the factor m on the gain still ahead
(curves.gain_ahead_reward):

    R*(C) = R(C_last) + m (R(C) - R(C_last))  for C > C_last,   log m ~ normal(0, kappa)

independent of the data (the data end at C_last), capped so that A* stays inside A's range;
kappa (SETTINGS.gain_ahead_log_sd) is learned by source from held-out evaluations of real runs.
Every output of a fit (A* as the ceiling A, B, C_mid, the forecast, its band, the run length) is
a summary of these draws.

The Student-t likelihood keeps one wild evaluation from bending the whole curve. Sampled with
emcee (Foreman-Mackey et al. 2013, affine-invariant ensemble; pure numpy), log-probability
vectorised over walkers, walkers started around the least-squares fit and the best cells of a
coarse grid so that they cover the ridge from the first step, moved by differential evolution
(sampler_moves). Seeded: the same data and seed give the same draws.
"""

from __future__ import annotations

import sys

import numpy as np
from numpy.typing import ArrayLike
from scipy.special import chdtri, expit

from scalerl.forecast.curves import sigmoid_reward
from scalerl.forecast.settings import SETTINGS
from scalerl.forecast.sigmoid_solver import SolverProblem, grid_starts


def _import_emcee():
    """emcee, imported without scipy.stats when nothing has imported it yet.

    emcee's optional KDEMove (not used here) imports scipy.stats.gaussian_kde inside a
    try/except ImportError; scipy.stats costs about 0.5 s of CPU at start-up, a third of a
    `scalerl fit`. A None entry in sys.modules makes that optional import fail as emcee expects;
    the entry is removed right after, so a later `import scipy.stats` works as usual.
    """
    if "emcee" in sys.modules or "scipy.stats" in sys.modules:
        import emcee

        return emcee
    sys.modules["scipy.stats"] = None
    try:
        import emcee
    finally:
        del sys.modules["scipy.stats"]
    return emcee


emcee = _import_emcee()


def sampler_moves() -> list:
    """emcee moves: differential evolution, x' = x + gamma (x_j - x_k) with gamma ~ 2.38 / sqrt(2 d)
    (ter Braak 2006; Nelson et al. 2014), and gamma = 1 one step in SETTINGS.mode_jump_every.

    Both proposals are symmetric, so the chain targets the posterior. emcee 3.1.6's
    DESnookerMove does not: its direction (x - z) / sqrt(|x - z|) is not a unit vector, which
    makes the move along the line through z multiplicative, and its Metropolis factor is
    (d - 1) / 2 log(|x' - z| / |x - z|) where the snooker's is d - 1 times that (ter Braak & Vrugt
    2008; corrected upstream after that release). `python -m benchmarks.sampler_check` compares
    every fit's quantiles of A with a long chain of emcee's stretch move: over 93 fits of the
    bundled curves the 5 % quantile was off by 0.0022 on average with these moves, 0.0043 with the
    snooker move at 1 step in 5."""
    jump = 1.0 / SETTINGS.mode_jump_every
    return [(emcee.moves.DEMove(), 1.0 - jump), (emcee.moves.DEMove(gamma0=1.0), jump)]


def stuck_log_prob_gap(n_dim: int) -> float:
    """gap = chi2.ppf(stuck_quantile, n_dim) / 2: the log-probability deficit one posterior draw in
    100 exceeds (a Gaussian posterior's -log p minus its minimum is chi2(n_dim) / 2)."""
    return float(chdtri(n_dim, 1.0 - SETTINGS.stuck_quantile) / 2.0)


def log_c_mid_prior(s: np.ndarray, problem: SolverProblem) -> np.ndarray:
    """log p(s), s = log(C_mid / C_ref), inside the bounds [s_lo, s_hi]: a mixture of two uniforms,

        p(s) = (1 - w) / (s_hi - s_lo) + w 1[s >= s_near] / (s_hi - s_near),
        s_near = min u - log(c_mid_near_factor),  w = c_mid_near_share

    (half the mass within a decade below the first evaluation and above, half over the whole range)."""
    s_lo, s_hi = float(problem.lower[2]), float(problem.upper[2])
    s_near = min(max(float(np.min(problem.log_compute)) - np.log(SETTINGS.c_mid_near_factor), s_lo), s_hi - 1e-12)
    w = SETTINGS.c_mid_near_share
    return np.log((1.0 - w) / (s_hi - s_lo) + np.where(s >= s_near, w / (s_hi - s_near), 0.0))


def log_prior(theta: np.ndarray, problem: SolverProblem, log_sigma_centre: float, log_sigma_floor: float) -> np.ndarray:
    """log p(A, B, s, log sigma) up to a constant, -inf outside the bounds; theta is (k, 4)."""
    a, b, s, log_sigma = theta.T
    lower, upper = problem.lower, problem.upper
    parameters = theta[:, :3]
    inside = np.all((parameters >= lower) & (parameters <= upper), axis=1) & (log_sigma >= log_sigma_floor)
    if problem.fixed_a is not None:
        inside &= a == problem.fixed_a
    # B > 0 inside the bounds; rows outside get -inf whatever their B.
    log_b = np.log(np.maximum(b, lower[1]))
    mean_b, sd_b = SETTINGS.log_b_prior_mean, SETTINGS.log_b_prior_sd
    # B is sampled directly, so the log-normal density carries the 1/B Jacobian.
    value = -0.5 * ((log_b - mean_b) / sd_b) ** 2 - log_b
    if problem.fixed_a is None:
        # Beta(2, 2) on the gain fraction f = (A - A_low) / (A_top - A_low): no mass at either bound.
        fraction = np.minimum(np.maximum((a - lower[0]) / (upper[0] - lower[0]), 1e-12), 1 - 1e-12)
        value += (SETTINGS.a_prior_beta - 1.0) * (np.log(fraction) + np.log1p(-fraction))
    value += log_c_mid_prior(s, problem)
    value += -0.5 * ((log_sigma - log_sigma_centre) / SETTINGS.log_sigma_prior_sd) ** 2
    value[~inside] = -np.inf
    return value


def log_likelihood(theta: np.ndarray, problem: SolverProblem) -> np.ndarray:
    """Student-t log likelihood: sum_i -(nu+1)/2 log(1 + r_i^2 / (nu sigma^2)) - log sigma."""
    a, b, s, log_sigma = (column[:, None] for column in theta.T)
    predicted = problem.r0 + (a - problem.r0) * expit(b * (problem.log_compute[None, :] - s))
    sigma = np.exp(log_sigma)
    scaled = (predicted - problem.reward[None, :]) / sigma
    nu = SETTINGS.student_t_nu
    return np.sum(-0.5 * (nu + 1.0) * np.log1p(scaled**2 / nu) - log_sigma, axis=1)


def log_posterior(
    theta: ArrayLike, problem: SolverProblem, log_sigma_centre: float, log_sigma_floor: float
) -> np.ndarray:
    """Vectorised over rows of theta: log prior + log likelihood (-inf outside the prior)."""
    theta = np.atleast_2d(theta)
    prior = log_prior(theta, problem, log_sigma_centre, log_sigma_floor)
    ok = np.isfinite(prior)
    if np.all(ok):
        return prior + log_likelihood(theta, problem)
    out = np.full(theta.shape[0], -np.inf)
    if np.any(ok):
        out[ok] = prior[ok] + log_likelihood(theta[ok], problem)
    return out


def start_spread(problem: SolverProblem) -> np.ndarray:
    """The sd of the walkers' start around a centre, per parameter (A, B, log C_mid, log sigma):
    2 % of A's range, 0.05 in B, 0.1 in log C_mid and in log sigma."""
    return np.array([0.02 * (problem.upper[0] - problem.lower[0]), 0.05, 0.1, 0.1])


def initial_walkers(
    problem: SolverProblem, theta_hat: ArrayLike, log_sigma: float, n_walkers: int, rng: np.random.Generator
) -> np.ndarray:
    """Walkers spread around the least-squares fit and the best grid cells, inside the bounds."""
    starts = [np.asarray(theta_hat, dtype=float)]
    if problem.fixed_a is None:
        starts += [np.asarray(start, dtype=float) for start in grid_starts(problem, SETTINGS.n_starts)]
    centres = np.array([start if start.size == 3 else np.concatenate([[problem.fixed_a], start]) for start in starts])
    picks = centres[np.arange(n_walkers) % len(centres)]
    span = problem.upper - problem.lower
    jitter = rng.normal(size=(n_walkers, 3)) * start_spread(problem)[:3]
    if problem.fixed_a is not None:
        jitter[:, 0] = 0.0
    inner = 1e-6 * span
    walkers = np.clip(picks + jitter, problem.lower + inner, problem.upper - inner)
    if problem.fixed_a is not None:
        walkers[:, 0] = problem.fixed_a
    sigma_column = log_sigma + np.abs(rng.normal(0.0, 0.1, n_walkers))
    return np.column_stack([walkers, sigma_column])


def restart_next_to_good(
    coords: np.ndarray,
    stuck: np.ndarray,
    rng: np.random.Generator,
    log_prob_fn=None,
    jitter_sd: np.ndarray | None = None,
) -> np.ndarray:
    """`coords` with each `stuck` walker moved next to a walker drawn from the others, with a jitter
    of 1e-3 of their spread (sd `jitter_sd` per coordinate when given); a jitter that would leave
    the support (`log_prob_fn` -inf) is dropped."""
    coords = np.array(coords, dtype=float)
    good = np.flatnonzero(~stuck)
    spread = 1e-3 * (np.std(coords[good], axis=0) + 1e-12) if jitter_sd is None else np.asarray(jitter_sd, float)
    picks = rng.choice(good, size=int(stuck.sum()))
    moved = coords[picks] + spread * rng.standard_normal((int(stuck.sum()), coords.shape[1]))
    if log_prob_fn is not None:
        outside = ~np.isfinite(np.asarray(log_prob_fn(moved), dtype=float))
        moved[outside] = coords[picks][outside]
    coords[stuck] = moved
    return coords


def regroup_stuck_walkers(
    state: emcee.State, rng: np.random.Generator, log_prob_fn=None, start_sd: np.ndarray | None = None
) -> emcee.State:
    """Walkers left after a burn-in round more than stuck_log_prob_gap below the best log-probability
    (a start on the far end of the ridge that has not come back: on a run past its midpoint they
    left 95 % intervals of A reaching 0.9 where the data pin it to 0.6) restart next to a walker
    drawn from the others, with a jitter of 1e-3 of that group's spread, so the kept chain is
    the posterior's, not the starts'. `log_prob_fn` (vectorised over rows): a jitter that would carry
    a walker out of the posterior's support (next to a bound) is dropped, so no walker restarts at
    -inf (emcee's acceptance of -inf against -inf is NaN: a warning on the user's console, and a
    walker that could enter the kept chain outside the support).

    When a single walker is good its spread is zero: every restart would land on it, within 1e-15,
    and the ensemble could only grow back by emcee's 1e-5 proposal noise (a reward logged as a
    percentage with an open range kept A's whole posterior on one point, or crashed the fit when
    emcee found the walkers not linearly independent). The stuck walkers then restart around the
    good one as the ensemble started around the least-squares fit, with sd `start_sd` per
    coordinate (start_spread; None: the spread of the best n_dim + 1 walkers, the fewest that
    span the space)."""
    log_prob = np.asarray(state.log_prob, dtype=float)
    n_dim = np.shape(state.coords)[1]
    stuck = ~np.isfinite(log_prob) | (log_prob < np.nanmax(log_prob) - stuck_log_prob_gap(n_dim))
    if not np.any(stuck) or np.all(stuck):
        return state
    if np.sum(~stuck) > 1:
        coords = restart_next_to_good(state.coords, stuck, rng, log_prob_fn)
    else:
        if start_sd is None:
            finite = np.flatnonzero(np.isfinite(log_prob))
            start_sd = np.std(np.asarray(state.coords)[finite[np.argsort(-log_prob[finite])[: n_dim + 1]]], axis=0)
        coords = restart_next_to_good(state.coords, stuck, rng, log_prob_fn, jitter_sd=start_sd)
    return emcee.State(coords, random_state=state.random_state)


def run_sampler(
    problem: SolverProblem,
    theta_hat: ArrayLike,
    noise_sd: float,
    noise_floor: float,
    seed: int,
    n_steps: int | None = None,
    moves: list | None = None,
) -> emcee.EnsembleSampler:
    """The emcee sampler after n_burn burn-in steps in n_burn_rounds rounds, each followed by a
    regrouping of stuck walkers (regroup_stuck_walkers), and n_steps - n_burn kept steps (its
    chain holds only the kept ones). `moves`: emcee moves (default sampler_moves())."""
    n_steps = SETTINGS.n_steps if n_steps is None else int(n_steps)
    n_walkers, n_burn = SETTINGS.n_walkers, SETTINGS.n_burn
    rng = np.random.default_rng(seed)
    log_floor = float(np.log(noise_floor))
    log_centre = float(np.log(max(noise_sd, noise_floor)))
    walkers = initial_walkers(problem, theta_hat, log_centre, n_walkers, rng)
    free = slice(0, 4) if problem.fixed_a is None else slice(1, 4)

    def log_prob(free_theta):
        theta = np.atleast_2d(free_theta)
        if problem.fixed_a is not None:
            theta = np.column_stack([np.full(theta.shape[0], problem.fixed_a), theta])
        return log_posterior(theta, problem, log_centre, log_floor)

    sampler = emcee.EnsembleSampler(
        n_walkers,
        walkers[:, free].shape[1],
        log_prob,
        vectorize=True,
        moves=sampler_moves() if moves is None else moves,
    )
    state = emcee.State(walkers[:, free], random_state=np.random.RandomState(seed % 2**32).get_state())
    rounds = np.diff(np.linspace(0, n_burn, SETTINGS.n_burn_rounds + 1).round().astype(int))
    for steps in rounds:
        state = regroup_stuck_walkers(
            sampler.run_mcmc(state, int(steps), progress=False), rng, log_prob, start_spread(problem)[free]
        )
        sampler.reset()
    sampler.run_mcmc(state, n_steps - n_burn, progress=False)
    return sampler


def gain_factor_draws(
    param_draws: np.ndarray, r0: float, c_last: float, normals: np.ndarray, log_sd: float, bounds: tuple[float, float]
) -> np.ndarray:
    """m per row of (A, B, C_mid) draws: m = exp(log_sd z), z the given standard normals, capped so
    that A* = R(C_last) + m (A - R(C_last)) stays within `bounds` (A's range):
    m <= (bound - R(C_last)) / (A - R(C_last)), bound the top when A > R(C_last), else the bottom."""
    a, b, c_mid = np.asarray(param_draws, dtype=float).T
    factor = np.exp(float(log_sd) * np.asarray(normals, dtype=float))
    last = sigmoid_reward(np.asarray(c_last, dtype=float), a, b, c_mid, r0)
    gain = a - last
    room = np.where(gain > 0, bounds[1] - last, bounds[0] - last)
    with np.errstate(divide="ignore", invalid="ignore"):
        cap = np.where(gain != 0, room / gain, np.inf)
    return np.minimum(factor, np.maximum(cap, 0.0))


def sample_posterior(
    problem: SolverProblem, theta_hat: ArrayLike, noise_sd: float, noise_floor: float, n_draws: int, seed: int
) -> np.ndarray:
    """Posterior draws of (A, B, s, sigma): an (n_draws, 4) array, sigma on its natural scale.

    32 walkers x 300 steps, the first 150 discarded as burn-in, in two rounds after each of which
    stuck walkers are regrouped (regroup_stuck_walkers); the kept 32 x 150 states are thinned evenly to `n_draws`
    rows (repeated when more are asked for than the chain holds). `python -m
    benchmarks.sampler_check` measures acceptance and autocorrelation on the bundled curves.
    """
    chain = run_sampler(problem, theta_hat, noise_sd, noise_floor, seed).get_chain(flat=True)
    if problem.fixed_a is not None:
        chain = np.column_stack([np.full(chain.shape[0], problem.fixed_a), chain])
    pick = np.linspace(0, chain.shape[0] - 1, int(n_draws)).round().astype(int)
    draws = chain[pick].copy()
    draws[:, 3] = np.exp(draws[:, 3])
    return draws
