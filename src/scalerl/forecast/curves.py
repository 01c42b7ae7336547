"""Curve models as pure functions: the ScaleRL sigmoid and the power law it is compared with.

Source: Khatri, Madaan et al., "The Art of Scaling Reinforcement Learning Compute for LLMs",
arXiv 2510.13786 (2025), eq. (1) and section on the power-law alternative.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike


def sigmoid_reward(compute: ArrayLike, a: ArrayLike, b: ArrayLike, c_mid: ArrayLike, r0: ArrayLike = 0.0) -> np.ndarray:
    """Sigmoidal compute-performance curve.

        R(C) = R0 + (A - R0) / (1 + (C_mid / C)^B)

    `a` is the ceiling A, `b` > 0 the scaling exponent, `c_mid` > 0 the compute at which half of
    the gain A - R0 is reached. At C = 0 the curve equals R0 (the limit), returned exactly.
    """
    compute = np.asarray(compute, dtype=float)
    with np.errstate(divide="ignore", over="ignore"):
        ratio_pow = np.power(c_mid / np.where(compute > 0, compute, np.nan), b)
    value = r0 + (a - r0) / (1.0 + ratio_pow)
    return np.where(compute > 0, value, r0)


def sigmoid_compute_for_reward(
    reward: ArrayLike, a: ArrayLike, b: ArrayLike, c_mid: ArrayLike, r0: ArrayLike = 0.0
) -> np.ndarray:
    """Inverse of the sigmoid: compute needed to reach `reward`.

        C(R) = C_mid * ((A - R0) / (R - R0) - 1)^(-1/B)

    Returns inf where the reward is at or beyond the ceiling A, and 0 where it is at or below R0.
    """
    reward = np.asarray(reward, dtype=float)
    gain_fraction = (reward - r0) / (a - r0)
    with np.errstate(divide="ignore", invalid="ignore"):
        compute = c_mid * np.power(1.0 / gain_fraction - 1.0, -1.0 / b)
    compute = np.where(gain_fraction >= 1.0, np.inf, compute)
    return np.where(gain_fraction <= 0.0, 0.0, compute)


def sigmoid_compute_near_ceiling(
    within: float, a: ArrayLike, b: ArrayLike, c_mid: ArrayLike, r0: ArrayLike = 0.0
) -> np.ndarray:
    """Compute at which the sigmoid is within `within` of its ceiling A:

        C_within = C_mid (|A - R0| / within - 1)^(1/B)    (|R(C_within) - A| = within)

    0 where the whole gain |A - R0| is within `within`.
    """
    a = np.asarray(a, dtype=float)
    return sigmoid_compute_for_reward(a - within * np.sign(a - r0), a, b, c_mid, r0)


def gain_ahead_reward(
    compute: ArrayLike, a: ArrayLike, b: ArrayLike, c_mid: ArrayLike, r0: ArrayLike, c_last: float, factor: ArrayLike
) -> np.ndarray:
    """The sigmoid with the gain beyond the last evaluation scaled by `factor` m:

        R*(C) = R(C)                                for C <= C_last
        R*(C) = R(C_last) + m (R(C) - R(C_last))    for C >  C_last

    so R* is continuous, equals the sigmoid where it was fitted, and tends to
    A* = R(C_last) + m (A - R(C_last)). m = 1 is the sigmoid itself.
    """
    compute = np.asarray(compute, dtype=float)
    here = sigmoid_reward(compute, a, b, c_mid, r0)
    last = sigmoid_reward(np.asarray(c_last, dtype=float), a, b, c_mid, r0)
    return np.where(compute > c_last, last + np.asarray(factor, dtype=float) * (here - last), here)


def gain_ahead_ceiling(a: ArrayLike, b: ArrayLike, c_mid: ArrayLike, r0: ArrayLike, c_last: float, factor: ArrayLike):
    """The limit of gain_ahead_reward: A* = R(C_last) + m (A - R(C_last))."""
    last = sigmoid_reward(np.asarray(c_last, dtype=float), a, b, c_mid, r0)
    return last + np.asarray(factor, dtype=float) * (np.asarray(a, dtype=float) - last)


def gain_ahead_compute_for_reward(
    reward: ArrayLike, a: ArrayLike, b: ArrayLike, c_mid: ArrayLike, r0: ArrayLike, c_last: float, factor: ArrayLike
) -> np.ndarray:
    """Inverse of gain_ahead_reward: the compute at which R* reaches `reward`. A reward the sigmoid
    reaches by C_last is inverted on the sigmoid; beyond, R* = T where the sigmoid reaches
    R(C_last) + (T - R(C_last)) / m (inf at or beyond the ceiling A*)."""
    reward = np.asarray(reward, dtype=float)
    a = np.asarray(a, dtype=float)
    factor = np.asarray(factor, dtype=float)
    last = sigmoid_reward(np.asarray(c_last, dtype=float), a, b, c_mid, r0)
    ahead = (reward - last) * np.sign(a - r0) > 0.0
    with np.errstate(divide="ignore", invalid="ignore"):
        target = np.where(ahead, last + (reward - last) / factor, reward)
    return sigmoid_compute_for_reward(target, a, b, c_mid, r0)


def linearised_sigmoid(
    compute: ArrayLike, reward: ArrayLike, a: float, r0: float = 0.0
) -> tuple[np.ndarray, np.ndarray]:
    """The straight-line form of the sigmoid for a fixed ceiling A.

        log((A - R0) / (R - R0) - 1) = B log C_mid - B log C

    Returns (log C, left-hand side); points with R outside (R0, A) give NaN.
    """
    compute = np.asarray(compute, dtype=float)
    reward = np.asarray(reward, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        lhs = np.log((a - r0) / (reward - r0) - 1.0)
        log_compute = np.log(compute)
    return log_compute, lhs


def power_law_reward(compute: ArrayLike, a: ArrayLike, d: ArrayLike, b: ArrayLike) -> np.ndarray:
    """Power-law alternative rejected by the paper for its unbounded ceiling.

    R(C) = A - D * C^(-B)
    """
    compute = np.asarray(compute, dtype=float)
    with np.errstate(divide="ignore"):
        return a - d * np.power(compute, -b)
