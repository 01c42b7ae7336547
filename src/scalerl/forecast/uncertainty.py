"""Evaluation noise and prediction-band helpers shared by the fits.

A pass rate measured on a finite set of prompts has binomial noise; sd 0.01 is the honest minimum
for ~1000 prompts at p ~ 0.5, hence the noise floor. The band-widening constant BAND_SCALE
stretches posterior-predictive bands about their centre and RATE_SCALE sets the uncertainty of
the rate of improvement beyond the data (rate_discrepancy). Both were chosen by
leave-one-curve-out on the real curves of benchmarks/data/curves (benchmarks/calibration.py says
how; benchmarks/forecast_accuracy.py prints the choice), never by scoring on the curve forecast.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike

DEFAULT_NOISE_FLOOR = 0.01
BAND_SCALE = 0.668
RATE_SCALE = 1.5


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


def widen(samples: ArrayLike, centre: ArrayLike, band_scale: float) -> np.ndarray:
    """Stretch samples about the point forecast: centre + k * (sample - centre), k = band_scale.

    k = 1 leaves the posterior-predictive band as sampled; k > 1 widens every quantile band by the
    same factor (the same k serves 50, 80 and 95 % bands).
    """
    return centre + band_scale * (np.asarray(samples, dtype=float) - centre)


def rate_discrepancy(slope: ArrayLike, log_distance: ArrayLike, standard_normal: ArrayLike,
                     rate_scale: float) -> np.ndarray:
    """Uncertainty of the rate of improvement beyond the data, added to each curve draw:

        delta = kappa * slope * max(log(C / C_last), 0) * z,   z ~ N(0, 1)

    `slope` is the draw's dR / d log C at the last fitted compute C_last and kappa = `rate_scale`.
    A sigmoid fitted before its bend is sure that the rise slows; real runs often keep their rate
    longer. This term lets the rate beyond C_last differ from the fitted one by a fraction kappa,
    so the band widens with the distance in log compute, and only for a curve still rising at
    C_last. Zero at and before C_last (and where slope 0 meets an infinite distance).
    """
    with np.errstate(invalid="ignore"):
        delta = rate_scale * slope * np.maximum(log_distance, 0.0) * standard_normal
    return np.where(np.isnan(delta), 0.0, delta)
