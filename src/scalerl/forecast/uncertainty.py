"""Evaluation noise helpers shared by the fits.

The noise floor (ForecastSettings.noise_floor) only guards an estimate against zero (an exact
fit, a stretch of identical values); how far the forecast may stray beyond the data is the
posterior's to say (forecast.posterior).
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike

from scalerl.forecast.settings import SETTINGS


def residual_noise_sd(residual: ArrayLike, n_params: int, noise_floor: float = SETTINGS.noise_floor) -> float:
    """Evaluation noise: sigma = sqrt(sum r^2 / (n - p)), floored at `noise_floor`.

    With n <= p there is no residual information and the floor alone is returned.
    """
    residual = np.asarray(residual, dtype=float)
    dof = residual.size - n_params
    if dof <= 0:
        return float(noise_floor)
    return float(max(np.sqrt(np.sum(residual**2) / dof), noise_floor))


def noise_t_draws(dof: float, n_draws: int, rng: np.random.Generator) -> np.ndarray:
    """Standard Student-t draws used to add evaluation noise to bands (fixed at fit time)."""
    return rng.standard_t(dof, size=n_draws)
