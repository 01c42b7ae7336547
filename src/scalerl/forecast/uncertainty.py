"""Evaluation noise and prediction-band helpers shared by the fits.

A pass rate measured on a finite set of prompts has binomial noise: sd 0.005 is what ~10,000
evaluations at p ~ 0.5 leave (sqrt(0.25 / 10000)), the honest minimum for the larger validation
sets of real runs, hence the noise floor. How wide a forecast band must be beyond the
data is learned across runs (band_calibration), not here.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike

DEFAULT_NOISE_FLOOR = 0.005


def residual_noise_sd(residual: ArrayLike, n_params: int, noise_floor: float = DEFAULT_NOISE_FLOOR) -> float:
    """Evaluation noise: sigma = sqrt(sum r^2 / (n - p)), floored at `noise_floor`.

    With n <= p there is no residual information and the floor alone is returned.
    """
    residual = np.asarray(residual, dtype=float)
    dof = residual.size - n_params
    if dof <= 0:
        return float(noise_floor)
    return float(max(np.sqrt(np.sum(residual**2) / dof), noise_floor))


def student_t_dof(n_points: int, n_params: int) -> int:
    """Degrees of freedom of the noise t distribution: n - p, at least 2 (finite variance)."""
    return int(max(n_points - n_params, 2))


def noise_t_draws(dof: int, n_draws: int, rng: np.random.Generator) -> np.ndarray:
    """Standard Student-t draws used to add evaluation noise to bands (fixed at fit time)."""
    return rng.standard_t(dof, size=n_draws)
