"""The reward's unit: every absolute tolerance of the fit is a share of it.

The fit's few absolute numbers were set for pass rates in [0, 1]: the noise floor (0.002,
ForecastSettings.noise_floor) and the paper's margin on A (0.02, ForecastSettings.margin:
where a flat end counts as the ceiling, the run length, a comparison's tie). A log in percent
(0-100), a reward in [-1, 1] or a reward model's score would otherwise get a floor and a margin
in the wrong units: a sigmoid logged in percent, its ceiling at 60, was told to run 26 times
longer to come "within 0.02" of it (1.1 times as a pass rate). Scaling them by the unit makes the answer the
same whatever affine unit the reward is logged in, when its range is given.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from numpy.typing import ArrayLike

PASS_RATE_UNIT = 1.0
UNIT_REWARD_RANGE = (0.0, 1.0)  # pass rates and accuracies: the range used when every reward lies in it


def inferred_reward_range(
    rewards: Sequence[ArrayLike], given: tuple[float, float] | None = None
) -> tuple[float, float] | None:
    """The range to fit with: `given` as it is; else [0, 1] when every reward of every run lies
    in it (pass rates, accuracies); else open (None: the ceiling in the reward's own units)."""
    if given is not None:
        return (float(given[0]), float(given[1]))
    inside = all(np.min(r) >= 0.0 and np.max(r) <= 1.0 for r in map(np.asarray, rewards) if np.size(r))
    return UNIT_REWARD_RANGE if inside else None


def reward_unit(reward: ArrayLike, reward_range: tuple[float, float] | None) -> float:
    """u, the size of the reward's unit:

        u = HIGH - LOW                  for a known range [LOW, HIGH] (1 for a pass rate)
        u = max(1, max_i |y_i|)         for an open range

    An open range keeps the pass-rate unit for rewards within [-1, 1] and grows with rewards
    logged on a larger scale (a percentage whose best evaluation is 58 gets u = 58: pass
    reward_range=(0, 100) for the exact unit).
    """
    if reward_range is not None:
        return float(reward_range[1]) - float(reward_range[0])
    reward = np.asarray(reward, dtype=float)
    return max(PASS_RATE_UNIT, float(np.max(np.abs(reward)))) if reward.size else PASS_RATE_UNIT


def open_range_note(curves: Sequence) -> str | None:
    """The note said when rewards outside [0, 1] leave the range open (None when they all lie in
    it): where they go, that the ceiling and margins are then in the reward's own units, and the
    option to give the range (asking "a percentage?" when every reward lies in 0-100)."""
    outside = [c for c in curves if np.size(c.reward) and (np.min(c.reward) < 0.0 or np.max(c.reward) > 1.0)]
    if not outside:
        return None
    curve = outside[0]
    percent = all(np.min(c.reward) >= 0.0 and np.max(c.reward) <= 100.0 for c in curves if np.size(c.reward))
    return (
        f"rewards in {curve.source} ('{curve.y_name}') go from {np.min(curve.reward):.4g} to "
        f"{np.max(curve.reward):.4g}, outside [0, 1]: the reward range is inferred as open (the ceiling A is "
        "in the reward's own units, its margins 0.002 and 0.02 of the largest |reward|); pass "
        "--reward-range LOW HIGH for known bounds" + (" (a percentage? --reward-range 0 100)" if percent else "")
    )
