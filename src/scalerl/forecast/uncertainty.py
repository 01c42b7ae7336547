"""Evaluation noise and prediction-band helpers shared by the fits.

A pass rate measured on a finite set of prompts has binomial noise; sd 0.01 is the honest minimum
for ~1000 prompts at p ~ 0.5, hence the noise floor. The band-widening constant BAND_SCALE
stretches posterior-predictive bands about their centre; it was chosen by leave-one-curve-out on
the real curves of benchmarks/data/curves (benchmarks/forecast_accuracy.py prints the choice),
never by scoring on the curve being forecast.
"""

from __future__ import annotations

import numpy as np

DEFAULT_NOISE_FLOOR = 0.01
BAND_SCALE = 1.0


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


def noise_t_draws(dof, n_draws, rng):
    """Standard Student-t draws used to add evaluation noise to bands (fixed at fit time)."""
    return rng.standard_t(dof, size=n_draws)


def widen(samples, centre, band_scale):
    """Stretch samples about the point forecast: centre + k * (sample - centre), k = band_scale.

    k = 1 leaves the posterior-predictive band as sampled; k > 1 widens every quantile band by the
    same factor (the same k serves 50, 80 and 95 % bands).
    """
    return centre + band_scale * (np.asarray(samples, dtype=float) - centre)
