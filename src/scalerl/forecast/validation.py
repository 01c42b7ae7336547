"""Checks of a (compute, reward) curve shared by every fit: lengths, finiteness, order, range."""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike

from scalerl.errors import ConfigError, InputError

MAX_ABS_REWARD = 1e100  # squared residuals must stay finite


def validate_curve(
    compute: ArrayLike, reward: ArrayLike, reward_range: tuple[float, float] | None
) -> tuple[np.ndarray, np.ndarray]:
    """Arrays of equal length, finite, compute >= 0 and non-decreasing, reward inside its range."""
    compute = np.asarray(compute, dtype=float).ravel()
    reward = np.asarray(reward, dtype=float).ravel()
    if compute.size != reward.size:
        raise InputError(f"compute has {compute.size} values but reward has {reward.size}")
    if compute.size == 0:
        raise InputError("empty curve: no points")
    if not (np.all(np.isfinite(compute)) and np.all(np.isfinite(reward))):
        raise InputError("compute and reward must be finite (found NaN or infinity)")
    if np.any(compute < 0):
        raise InputError("compute must be >= 0")
    if np.any(np.abs(reward) > MAX_ABS_REWARD):
        raise InputError(f"rewards beyond +-{MAX_ABS_REWARD:g} overflow the least squares; rescale them")
    if np.any(np.diff(compute) < 0):
        raise InputError("compute must be non-decreasing (sort the points by compute)")
    if reward_range is not None:
        low, high = reward_range
        if not (np.isfinite(low) and np.isfinite(high) and low < high):
            raise ConfigError(f"reward_range must be two finite numbers LOW < HIGH, got [{low}, {high}]")
        if np.any(reward < low) or np.any(reward > high):
            raise InputError(
                f"reward outside reward_range [{low}, {high}]; pass reward_range=None for unbounded rewards"
            )
    return compute, reward
