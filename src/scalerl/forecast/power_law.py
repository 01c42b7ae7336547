"""Power-law fit R(C) = A - D * C^(-B), the alternative the ScaleRL paper compares with.

Source: Khatri, Madaan et al., arXiv 2510.13786 (2025): on an early window the power law
extrapolates a ceiling near 1.0 where the sigmoid gives ~0.645, so it is only a comparison here.
Fitted in normalised compute x = C / C_ref (C_ref = largest fitted compute):
R = A - D' x^(-B) with D = D' C_ref^B. For fixed B the model is linear in (A, D'), which seeds a
B grid; bounded least squares polishes all three. Uncertainty is the delta method on the
Gauss-Newton covariance with Student-t quantiles (n - 3 degrees of freedom).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike
from scipy.optimize import least_squares
from scipy.special import stdtrit

from scalerl.errors import FitError
from scalerl.forecast.curves import power_law_reward
from scalerl.forecast.diagnostics import point_noise_sd
from scalerl.forecast.reward_unit import reward_unit
from scalerl.forecast.settings import SETTINGS
from scalerl.forecast.uncertainty import residual_noise_sd
from scalerl.forecast.validation import validate_curve

B_BOUNDS = (0.01, 5.0)


def _design(norm_compute, b):
    """Columns of the model linear in (A, D'): R = 1 * A - x^(-B) * D'."""
    return np.column_stack([np.ones_like(norm_compute), -np.power(norm_compute, -b)])


def _residuals(theta, norm_compute, reward):
    a, d_norm, b = theta
    return a - d_norm * np.power(norm_compute, -b) - reward


def _jacobian(theta, norm_compute, reward):
    a, d_norm, b = theta
    powered = np.power(norm_compute, -b)
    return np.column_stack([np.ones_like(norm_compute), -powered, d_norm * powered * np.log(norm_compute)])


def _grid_start(norm_compute, reward, lower, upper):
    best, best_sse = None, np.inf
    for b in np.geomspace(0.05, 3.0, 25):
        design = _design(norm_compute, b)
        if not np.all(np.isfinite(design)):  # LAPACK would print to stdout and raise
            continue
        coef, *_ = np.linalg.lstsq(design, reward, rcond=None)
        theta = np.clip(np.array([coef[0], coef[1], b]), lower, upper)
        sse = float(np.sum(_residuals(theta, norm_compute, reward) ** 2))
        if sse < best_sse:
            best, best_sse = theta, sse
    return best


@dataclass(frozen=True)
class PowerLawFitResult:
    """Fitted R(C) = A - D * C^(-B) with the Gauss-Newton covariance of (A, D', B)."""

    a: float
    d: float
    b: float
    stderr: dict
    n_points: int
    compute: np.ndarray
    reward: np.ndarray
    noise_sd: float
    compute_ref: float
    covariance: np.ndarray  # of (A, D', B), D' = D / C_ref^B
    reward_range: tuple | None = (0.0, 1.0)

    def params(self) -> dict:
        return {"A": self.a, "D": self.d, "B": self.b}

    def predict(self, compute: ArrayLike) -> np.ndarray:
        return power_law_reward(compute, self.a, self.d, self.b)

    def _t_quantile(self, level):
        return float(stdtrit(max(self.n_points - 3, 1), 0.5 + level / 2.0))

    def conf_int(self, level: float = 0.8) -> dict:
        q = self._t_quantile(level)
        return {
            name: (value - q * self.stderr[name], value + q * self.stderr[name])
            for name, value in self.params().items()
        }

    def interval(
        self, compute: ArrayLike, level: float = 0.8, kind: str = "observation"
    ) -> tuple[np.ndarray | float, np.ndarray | float]:
        """Delta-method band: var = g' Cov g (+ noise_sd^2 for a new observation), t quantile."""
        scalar = np.ndim(compute) == 0
        norm = np.atleast_1d(np.asarray(compute, dtype=float)) / self.compute_ref
        d_norm = self.d / self.compute_ref**self.b
        with np.errstate(divide="ignore", invalid="ignore"):  # C = 0: the power law is undefined there (NaN band)
            grad = _jacobian((self.a, d_norm, self.b), norm, np.zeros_like(norm))
            variance = np.einsum("ij,jk,ik->i", grad, self.covariance, grad)
        if kind == "observation":
            variance = variance + self.noise_sd**2
        half = self._t_quantile(level) * np.sqrt(np.maximum(variance, 0.0))
        centre = self.predict(norm * self.compute_ref)
        lo, hi = centre - half, centre + half
        if self.reward_range is not None:
            lo, hi = np.clip(lo, *self.reward_range), np.clip(hi, *self.reward_range)
        return (float(lo[0]), float(hi[0])) if scalar else (lo, hi)

    def summary(self) -> str:
        return (
            "Power-law fit  R(C) = A - D * C^(-B)\n"
            f"  points used: {self.n_points}\n"
            f"  A = {self.a:.4f} (se {self.stderr['A']:.4f})   B = {self.b:.3f} (se {self.stderr['B']:.3f})"
            f"   D = {self.d:.4g}\n  evaluation noise sd: {self.noise_sd:.4f}"
        )

    def to_dict(self) -> dict:
        clean = lambda v: float(v) if math.isfinite(v) else None  # noqa: E731
        return {
            "params": {k: clean(v) for k, v in self.params().items()},
            "stderr": {k: clean(v) for k, v in self.stderr.items()},
            "n_points": self.n_points,
        }


def fit_power_law(
    compute: ArrayLike,
    reward: ArrayLike,
    *,
    min_compute: float | None = None,
    reward_range: tuple[float, float] | None = (0.0, 1.0),
    loss: str = "linear",
    noise_floor: float | None = None,
) -> PowerLawFitResult:
    """Fit R = A - D C^(-B) on points with C > 0 (and C >= min_compute).

    Bounds: A in [min reward, top of reward_range] (open range: max + 3 x observed spread),
    D' >= 0 (a rising curve), B in B_BOUNDS. `noise_floor` None: 0.002 of the reward's unit
    (forecast.reward_unit).
    """
    compute, reward = validate_curve(compute, reward, reward_range)
    if noise_floor is None:
        noise_floor = SETTINGS.noise_floor * reward_unit(reward, reward_range)
    keep = compute > 0
    if min_compute is not None:
        keep &= compute >= min_compute
    compute, reward = compute[keep], reward[keep]
    if compute.size < 4:
        raise FitError(f"too few points for the power law: {compute.size} with compute > 0, need at least 4")
    compute_ref = float(compute.max())
    norm = compute / compute_ref
    with np.errstate(over="ignore", divide="ignore"):
        span_overflows = not np.isfinite(np.power(norm.min(), -B_BOUNDS[1]))
    if span_overflows:
        raise FitError(
            f"compute spans too many decades for the power law ({compute.min():.3g} to {compute_ref:.3g}): "
            "C^-B overflows; leave the smallest points out with --min-x"
        )
    spread = max(float(np.ptp(reward)), 1e-6)
    a_top = float(reward_range[1]) if reward_range is not None else float(reward.max()) + 3 * spread
    lower = np.array([float(reward.min()), 0.0, B_BOUNDS[0]])
    upper = np.array([max(a_top, lower[0] + 1e-9), np.inf, B_BOUNDS[1]])
    start = _grid_start(norm, reward, lower, upper)
    start = np.clip(start, lower + 1e-9, np.where(np.isfinite(upper), upper - 1e-9, start + 1.0))
    fit = least_squares(
        _residuals,
        start,
        jac=_jacobian,
        bounds=(lower, upper),
        args=(norm, reward),
        loss=loss,
        f_scale=point_noise_sd(reward, noise_floor),
        x_scale="jac",
        method="trf",
    )
    noise_sd = residual_noise_sd(fit.fun, 3, noise_floor)
    jac = _jacobian(fit.x, norm, reward)
    covariance = noise_sd**2 * np.linalg.pinv(jac.T @ jac)
    a, d_norm, b = fit.x
    d = d_norm * compute_ref**b
    se = np.sqrt(np.maximum(np.diag(covariance), 0.0))
    se_d = d * math.sqrt((se[1] / d_norm) ** 2 + (math.log(compute_ref) * se[2]) ** 2) if d_norm > 0 else float("inf")
    covariance.setflags(write=False)
    return PowerLawFitResult(
        a=float(a),
        d=float(d),
        b=float(b),
        stderr={"A": float(se[0]), "D": float(se_d), "B": float(se[2])},
        n_points=int(compute.size),
        compute=compute,
        reward=reward,
        noise_sd=noise_sd,
        compute_ref=compute_ref,
        covariance=covariance,
        reward_range=None if reward_range is None else tuple(float(v) for v in reward_range),
    )
