"""Least-squares core of the sigmoid fit, in scale-free coordinates.

The sigmoid R(C) = R0 + (A - R0) / (1 + (C_mid / C)^B) (Khatri, Madaan et al., arXiv 2510.13786,
eq. 1) is rewritten with u = log(C / C_ref) and s = log(C_mid / C_ref):

    R = R0 + (A - R0) * expit(B * (u - s))

C_ref is the largest compute used in the fit, so u <= 0 for every point whatever the unit
(GPU-hours, samples, FLOPs): nothing here depends on the scale of compute. The parameter vector
is theta = (A, B, s); with a fixed ceiling only (B, s) are free.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike
from scipy.optimize import least_squares
from scipy.special import expit

from scalerl.forecast.settings import SETTINGS


@dataclass(frozen=True)
class SolverProblem:
    """Data and bounds of one fit in normalised coordinates."""

    log_compute: np.ndarray  # u = log(C / C_ref), one per fitted point
    reward: np.ndarray
    r0: float
    lower: np.ndarray  # bounds on (A, B, s)
    upper: np.ndarray
    loss: str = "linear"
    f_scale: float = 0.01  # residual scale where a robust loss switches from quadratic
    fixed_a: float | None = None


def sigmoid_in_log_compute(
    log_compute: ArrayLike, a: ArrayLike, b: ArrayLike, log_c_mid: ArrayLike, r0: float
) -> np.ndarray:
    """R = R0 + (A - R0) * expit(B * (u - s)): the sigmoid with u = log C, s = log C_mid."""
    return r0 + (a - r0) * expit(b * (log_compute - log_c_mid))


def parameter_bounds(
    log_compute: np.ndarray, reward: np.ndarray, r0: float, reward_range: tuple[float | None, float | None] | None
) -> tuple[np.ndarray, np.ndarray]:
    """Bounds on (A, B, s) derived from the data.

    - A in [R0 + 1e-3 * gain, top]: the curve rises (A > R0); top is the upper end of
      `reward_range` (1 for pass rates), or R0 + 3 * observed gain when the range is open
      (SETTINGS.open_range_gain_factor).
    - B in [SETTINGS.b_min, SETTINGS.b_max].
    - s = log C_mid within the observed log-compute range widened by SETTINGS.c_mid_range_factor each side.
    """
    gain = max(float(np.max(reward)) - r0, 1e-9)
    if reward_range is not None and reward_range[1] is not None:
        a_top = float(reward_range[1])
    else:
        a_top = r0 + SETTINGS.open_range_gain_factor * gain
    a_low = r0 + 1e-3 * gain
    margin = np.log(SETTINGS.c_mid_range_factor)
    lower = np.array([a_low, SETTINGS.b_min, float(np.min(log_compute)) - margin])
    upper = np.array([max(a_top, a_low + 1e-9), SETTINGS.b_max, float(np.max(log_compute)) + margin])
    return lower, upper


def _full_theta(problem: SolverProblem, free):
    if problem.fixed_a is None:
        return np.asarray(free, dtype=float)
    return np.concatenate([[problem.fixed_a], free])


def _free_bounds(problem: SolverProblem):
    if problem.fixed_a is None:
        return problem.lower, problem.upper
    return problem.lower[1:], problem.upper[1:]


def data_residuals(theta: ArrayLike, problem: SolverProblem) -> np.ndarray:
    """Model minus data at the fitted points for full theta = (A, B, s)."""
    a, b, s = theta
    return sigmoid_in_log_compute(problem.log_compute, a, b, s, problem.r0) - problem.reward


def jacobian(theta: ArrayLike, problem: SolverProblem) -> np.ndarray:
    """d residual / d (A, B, s): g, (A-R0) g (1-g) (u-s), -(A-R0) g (1-g) B with g = expit(B(u-s))."""
    a, b, s = theta
    centred = problem.log_compute - s
    g = expit(b * centred)
    slope = (a - problem.r0) * g * (1.0 - g)
    return np.column_stack([g, slope * centred, -slope * b])


def local_fit(problem: SolverProblem, start: ArrayLike, max_nfev: int | None = None) -> tuple[np.ndarray, float]:
    """Bounded least squares (trust-region reflective) from one start; returns (theta, cost)."""
    lower, upper = _free_bounds(problem)
    x0 = np.clip(np.asarray(start, dtype=float), lower + 1e-9 * (upper - lower), upper - 1e-9 * (upper - lower))
    cols = slice(0, 3) if problem.fixed_a is None else slice(1, 3)
    result = least_squares(
        lambda free: data_residuals(_full_theta(problem, free), problem),
        x0,
        jac=lambda free: jacobian(_full_theta(problem, free), problem)[:, cols],
        bounds=(lower, upper),
        loss=problem.loss,
        f_scale=problem.f_scale,
        method="trf",
        x_scale="jac",
        max_nfev=max_nfev,
    )
    return _full_theta(problem, result.x), float(result.cost)


def grid_starts(problem: SolverProblem, n_starts: int = 4) -> list[np.ndarray]:
    """Coarse grid over (A, B, s), vectorised; returns the best `n_starts` free-parameter vectors.

    A: 12 values spread over its bounds; B: 8 values geometric in [0.3, 8]; s: 16 values over its
    bounds. Starts are taken one per distinct A value so the local fits explore different ceilings.
    """
    u, y, r0 = problem.log_compute, problem.reward, problem.r0
    if problem.fixed_a is None:
        a_grid = np.linspace(problem.lower[0], problem.upper[0], 12)
    else:
        a_grid = np.array([problem.fixed_a])
    b_grid = np.geomspace(0.3, 8.0, 8)
    s_grid = np.linspace(problem.lower[2], problem.upper[2], 16)
    aa, bb, ss = np.meshgrid(a_grid, b_grid, s_grid, indexing="ij")
    pred = r0 + (aa[..., None] - r0) * expit(bb[..., None] * (u - ss[..., None]))
    sse = np.sum((pred - y) ** 2, axis=-1)
    best_per_a = np.argmin(sse.reshape(len(a_grid), -1), axis=1)
    order = np.argsort(sse.reshape(len(a_grid), -1)[np.arange(len(a_grid)), best_per_a])
    starts = []
    for ia in order[:n_starts]:
        ib, i_s = np.unravel_index(best_per_a[ia], (len(b_grid), len(s_grid)))
        theta = np.array([a_grid[ia], b_grid[ib], s_grid[i_s]])
        starts.append(theta if problem.fixed_a is None else theta[1:])
    return starts


def multi_start_fit(problem: SolverProblem, n_starts: int = 4) -> tuple[np.ndarray, float]:
    """Global + local: local fits from the best grid cells, keep the lowest cost."""
    best_theta, best_cost = None, np.inf
    for start in grid_starts(problem, n_starts):
        theta, cost = local_fit(problem, start)
        if cost < best_cost:
            best_theta, best_cost = theta, cost
    return best_theta, best_cost
