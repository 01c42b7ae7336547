"""Baseline forecasters, used only by the forecast-accuracy benchmark.

Each takes (compute, reward, r0) with the R0 point already removed and returns an object with
`predict(compute)` and, where the method has one, `interval(compute, level)`. The sigmoid ones
predict R(C) = R0 + (A - R0) / (1 + (C_mid / C)^B) (Khatri, Madaan et al., arXiv 2510.13786).
They raise ValueError or RuntimeError on failure; the benchmark counts those.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.optimize import curve_fit
from scipy.stats import norm
from scipy.stats import t as student_t

from scalerl.forecast.curves import linearised_sigmoid, sigmoid_reward

A_STEP = 0.005  # the paper's ceiling grid step


@dataclass(frozen=True)
class Baseline:
    a: float
    b: float
    c_mid: float
    r0: float
    covariance: np.ndarray | None = None
    noise_sd: float | None = None
    dof: int = 1

    def predict(self, compute):
        return sigmoid_reward(compute, self.a, self.b, self.c_mid, self.r0)

    def interval(self, compute, level=0.8):
        """Delta-method band on the curve_fit covariance plus residual noise (None without one)."""
        if self.covariance is None or not np.all(np.isfinite(self.covariance)):
            return None
        compute = np.atleast_1d(np.asarray(compute, dtype=float))
        step = 1e-6
        theta = np.array([self.a, self.b, self.c_mid])
        grads = []
        for k in range(3):
            delta = np.zeros(3)
            delta[k] = step * max(abs(theta[k]), 1e-12)
            up = sigmoid_reward(compute, *(theta + delta), self.r0)
            down = sigmoid_reward(compute, *(theta - delta), self.r0)
            grads.append((up - down) / (2 * delta[k]))
        grad = np.column_stack(grads)
        variance = np.einsum("ij,jk,ik->i", grad, self.covariance, grad) + self.noise_sd**2
        half = student_t.ppf(0.5 + level / 2, self.dof) * np.sqrt(np.maximum(variance, 0.0))
        centre = self.predict(compute)
        return centre - half, centre + half


def _a_grid(reward, r0, a_top=1.0):
    start = max(float(np.max(reward)), r0) + A_STEP
    return np.arange(start, a_top + 1e-12, A_STEP)


def seed_linearised_fit(compute, reward, r0):
    """Seed-style fit: grid over A; for each A a straight line through the linearised form
    log((A - R0)/(R - R0) - 1) = B log C_mid - B log C; keep the A with the least squared line
    residual (in log space)."""
    best, best_sse = None, np.inf
    for a in _a_grid(reward, r0):
        log_c, lhs = linearised_sigmoid(compute, reward, a, r0)
        ok = np.isfinite(lhs)
        if ok.sum() < 3:
            continue
        slope, intercept = np.polyfit(log_c[ok], lhs[ok], 1)
        sse = float(np.sum((lhs[ok] - (slope * log_c[ok] + intercept)) ** 2))
        if slope < 0 and sse < best_sse:
            b = -slope
            best, best_sse = Baseline(a, b, float(np.exp(intercept / b)), r0), sse
    if best is None:
        raise ValueError("no ceiling on the grid gives a rising line")
    return best


def paper_grid_fit(compute, reward, r0):
    """The paper's grid: A on a 0.005 grid, 100 log-spaced C_mid values, B by least squares.

    The paper's absolute ranges (A 0.45-0.80, C_mid 100-40000 GPU-h) are adapted to the data:
    A from the top observed reward to 1, C_mid over [min C / 10, 100 max C]. B is least squares
    on a dense 200-value grid in [0.1, 10] for each (A, C_mid).
    """
    c_mid_grid = np.geomspace(compute.min() / 10, compute.max() * 100, 100)
    b_grid = np.geomspace(0.1, 10.0, 200)
    ratio = np.power(c_mid_grid[:, None, None] / compute[None, None, :], b_grid[None, :, None])
    shape = 1.0 / (1.0 + ratio)  # (C_mid, B, point)
    best, best_sse = None, np.inf
    for a in _a_grid(reward, r0):
        sse = np.sum((r0 + (a - r0) * shape - reward) ** 2, axis=-1)
        i_c, i_b = np.unravel_index(np.argmin(sse), sse.shape)
        if sse[i_c, i_b] < best_sse:
            best, best_sse = Baseline(a, b_grid[i_b], c_mid_grid[i_c], r0), float(sse[i_c, i_b])
    return best


N_BOOTSTRAP = 100


def _grid_shape(compute):
    """(C_mid grid, B grid, shape) with shape[i, j, k] = 1 / (1 + (C_mid_i / C_k)^B_j), the paper's grid."""
    c_mid_grid = np.geomspace(compute.min() / 10, compute.max() * 100, 100)
    b_grid = np.geomspace(0.1, 10.0, 200)
    ratio = np.power(c_mid_grid[:, None, None] / compute[None, None, :], b_grid[None, :, None])
    return c_mid_grid, b_grid, 1.0 / (1.0 + ratio)


def _grid_best(shape, a_grid, r0, rewards):
    """Best (A, C_mid index, B index) per row of `rewards` (n_sets, n_points) on the grid.

    sse(A, i, j) = (A - R0)^2 S2_ij - 2 (A - R0) S1_ij + S0 with S2 = sum shape^2,
    S1 = sum shape (y - R0), S0 = sum (y - R0)^2: one matrix product for every data set.
    """
    flat = shape.reshape(-1, shape.shape[-1])
    s2 = np.sum(flat**2, axis=1)
    s1 = flat @ (rewards - r0).T  # (cells, n_sets)
    s0 = np.sum((rewards - r0) ** 2, axis=1)
    best_sse = np.full(rewards.shape[0], np.inf)
    best = np.zeros((rewards.shape[0], 2))
    for a in a_grid:
        gain = a - r0
        sse = gain**2 * s2[:, None] - 2.0 * gain * s1 + s0[None, :]
        cell = np.argmin(sse, axis=0)
        value = sse[cell, np.arange(rewards.shape[0])]
        better = value < best_sse
        best_sse[better], best[better, 0], best[better, 1] = value[better], a, cell[better]
    return best


@dataclass(frozen=True)
class GridBootstrap:
    """The paper's grid fit with a residual bootstrap band: `curves` are the refits' parameters
    (A, B, C_mid), `residuals` the centred residuals of the fit resampled as new evaluation noise."""

    fit: Baseline
    curves: np.ndarray
    residuals: np.ndarray
    seed: int = 0

    def predict(self, compute):
        return self.fit.predict(compute)

    def interval(self, compute, level=0.8):
        compute = np.atleast_1d(np.asarray(compute, dtype=float))
        rng = np.random.default_rng(self.seed)
        curves = sigmoid_reward(
            compute[None, :], self.curves[:, :1], self.curves[:, 1:2], self.curves[:, 2:3], self.fit.r0
        )
        noise = rng.choice(self.residuals, size=curves.shape)
        lo, hi = np.quantile(curves + noise, [(1 - level) / 2, (1 + level) / 2], axis=0)
        centre = self.predict(compute)
        return np.minimum(lo, centre), np.maximum(hi, centre)


def paper_grid_bootstrap(compute, reward, r0, n_bootstrap=N_BOOTSTRAP, seed=0):
    """paper_grid_fit plus a residual bootstrap: the grid refitted on fit + resampled residuals."""
    fit = paper_grid_fit(compute, reward, r0)
    if fit is None:  # no grid cell fits (a reward that never rises above R0): no forecast
        raise ValueError("the paper's grid found no fit")
    residuals = reward - fit.predict(compute)
    residuals = residuals - residuals.mean()
    rng = np.random.default_rng(seed)
    resampled = fit.predict(compute)[None, :] + rng.choice(residuals, size=(n_bootstrap, compute.size))
    c_mid_grid, b_grid, shape = _grid_shape(compute)
    best = _grid_best(shape, _a_grid(reward, r0), r0, resampled)
    i_c, i_b = np.unravel_index(best[:, 1].astype(int), shape.shape[:2])
    curves = np.column_stack([best[:, 0], b_grid[i_b], c_mid_grid[i_c]])
    return GridBootstrap(fit, curves, residuals, seed)


def curve_fit_default(compute, reward, r0):
    """scipy.optimize.curve_fit with default settings (p0 = ones, no bounds), R0 fixed."""

    def model(c, a, b, c_mid):
        return r0 + (a - r0) / (1.0 + np.power(c_mid / c, b))

    with np.errstate(all="ignore"):
        params, covariance = curve_fit(model, compute, reward)
    if not np.all(np.isfinite(params)):
        raise RuntimeError("curve_fit returned non-finite parameters")
    resid = model(compute, *params) - reward
    dof = max(compute.size - 3, 1)
    noise_sd = float(np.sqrt(np.sum(resid**2) / dof))
    return Baseline(*map(float, params), r0, covariance=covariance, noise_sd=noise_sd, dof=dof)


@dataclass(frozen=True)
class LastValue:
    """Persistence forecast: the mean of the last three fitted evaluations, at any compute.

    Band: a random walk from that level, sd = sigma_d sqrt(k) at k evaluations ahead (k >= 1,
    k = (C - C_last) / the fitted points' median compute step), sigma_d the robust sd of
    successive differences (1.4826 MAD): the noise grows with the steps ahead.
    """

    level: float
    step_sd: float = 0.0
    last_compute: float = 1.0
    compute_step: float = 1.0

    def predict(self, compute):
        return np.full(np.shape(np.atleast_1d(compute)), self.level)

    def interval(self, compute, level=0.8):
        compute = np.atleast_1d(np.asarray(compute, dtype=float))
        ahead = (compute - self.last_compute) / self.compute_step
        half = norm.ppf(0.5 + level / 2) * self.step_sd * np.sqrt(np.maximum(ahead, 1.0))
        return self.level - half, self.level + half


def last_value_fit(compute, reward, r0):
    """No curve at all: tomorrow looks like the last three evaluations."""
    diff = np.diff(reward)
    step_sd = float(1.4826 * np.median(np.abs(diff - np.median(diff)))) if diff.size >= 2 else 0.0
    steps = np.diff(compute)
    compute_step = float(np.median(steps[steps > 0])) if np.any(steps > 0) else float(compute.max())
    return LastValue(float(np.mean(reward[-3:])), max(step_sd, 1e-3), float(compute.max()), compute_step)
