"""Baseline fitters of the ScaleRL sigmoid, used only by the forecast-accuracy benchmark.

Each takes (compute, reward, r0) with the R0 point already removed and returns a Baseline that
predicts the sigmoid R(C) = R0 + (A - R0) / (1 + (C_mid / C)^B) (Khatri, Madaan et al.,
arXiv 2510.13786) and, where the method has one, an 80 % band. They raise ValueError or
RuntimeError on failure; the benchmark counts those.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.optimize import curve_fit
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
    """Persistence forecast: the mean of the last three fitted evaluations, at any compute."""

    level: float

    def predict(self, compute):
        return np.full(np.shape(np.atleast_1d(compute)), self.level)


def last_value_fit(compute, reward, r0):
    """No curve at all: tomorrow looks like the last three evaluations."""
    return LastValue(float(np.mean(reward[-3:])))
