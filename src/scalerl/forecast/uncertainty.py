"""Uncertainty of a sigmoid fit: evaluation-noise estimate and a residual bootstrap with refits.

With 5-15 points a plain bootstrap over points under-covers, so the bootstrap here is a
residual (semi-parametric) one: new data sets are the fitted curve plus residuals drawn with
replacement, the residual pool first inflated by sqrt(n / (n - p)) (the small-sample correction of
the residual variance) and scaled up to at least a noise floor (a pass rate measured on a finite
set of prompts has binomial noise; sd 0.01 is the honest minimum for ~1000 prompts at p ~ 0.5).
Each data set is refitted from the point estimate (warm start), which keeps it fast.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from scalerl.forecast.sigmoid_solver import SolverProblem, local_fit, residuals

DEFAULT_NOISE_FLOOR = 0.01


def residual_noise_sd(residual, n_params, noise_floor=DEFAULT_NOISE_FLOOR):
    """Evaluation noise: sigma = sqrt(sum r^2 / (n - p)), floored at `noise_floor`.

    With n <= p there is no residual information and the floor alone is returned.
    """
    residual = np.asarray(residual, dtype=float)
    dof = residual.size - n_params
    if dof <= 0:
        return float(noise_floor)
    return float(max(np.sqrt(np.sum(residual**2) / dof), noise_floor))


def student_t_dof(n_points, n_params):
    """Degrees of freedom of the noise t distribution: n - p, at least 2 (finite variance)."""
    return int(max(n_points - n_params, 2))


def residual_pool(residual, noise_sd, n_params):
    """Centred residuals inflated by sqrt(n / (n - p)) and rescaled to sd >= noise_sd.

    Falls back to a normal pool of sd `noise_sd` when residuals are all zero (exact data).
    """
    residual = np.asarray(residual, dtype=float)
    n = residual.size
    pool = residual - residual.mean()
    pool *= np.sqrt(n / max(n - n_params, 1))
    sd = float(np.sqrt(np.mean(pool**2)))
    if sd < 1e-12:
        quantiles = (np.arange(n) + 0.5) / n
        from scipy.stats import norm

        return noise_sd * norm.ppf(quantiles)
    return pool * max(1.0, noise_sd / sd)


def bootstrap_theta(problem: SolverProblem, theta_hat, noise_sd, n_bootstrap, rng):
    """Residual bootstrap: refit fitted + resampled residuals `n_bootstrap` times.

    Returns an (n_bootstrap, 3) array of (A, B, s) with s = log(C_mid / C_ref).
    """
    theta_hat = np.asarray(theta_hat, dtype=float)
    fitted = problem.reward + residuals(theta_hat, problem)
    n_params = 3 if problem.fixed_a is None else 2
    pool = residual_pool(problem.reward - fitted, noise_sd, n_params)
    start = theta_hat if problem.fixed_a is None else theta_hat[1:]
    draws = np.empty((n_bootstrap, 3))
    for k in range(n_bootstrap):
        noisy = fitted + rng.choice(pool, size=fitted.size, replace=True)
        theta, _ = local_fit(replace(problem, reward=noisy), start, max_nfev=50)
        draws[k] = theta
    return draws


def noise_t_draws(dof, n_draws, rng):
    """Standard Student-t draws used to add evaluation noise to bands (fixed at fit time)."""
    return rng.standard_t(dof, size=n_draws)
