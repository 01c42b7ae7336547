"""The reward's unit: every absolute tolerance of the fit is a share of it.

The fit's few absolute numbers were set for pass rates in [0, 1]: the noise floor (0.002,
uncertainty.DEFAULT_NOISE_FLOOR) and the paper's margin on A (0.02, diagnostics.NEAR_CEILING_WITHIN:
where a flat end counts as the ceiling, the run length, a comparison's tie). A log in percent
(0-100), a reward in [-1, 1] or a reward model's score would otherwise get a floor and a margin
in the wrong units: a pass rate logged in percent that has levelled off at 60 was told to run 26
times longer to come "within 0.02" of its ceiling. Scaling them by the unit makes the answer the
same whatever affine unit the reward is logged in, when its range is given.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike

PASS_RATE_UNIT = 1.0


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
