"""The promises a fit's output keeps, checked on one result: what the property tests assert and the
forecast-accuracy benchmark counts ("contradictions", target 0)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from scalerl.forecast.settings import SETTINGS
from scalerl.forecast.verdict import AT_END

LEVELS = (0.5, 0.8, 0.95)
# Rounding slack: quantiles of the same draws compared as floats.
SLACK = 1e-9


def contradictions(fit, predict_at: Sequence[float] = (), levels: Sequence[float] = LEVELS) -> list[str]:
    """The names of the invariants `fit` (a FitResult) breaks, [] when none:

    estimate_outside_interval  A, B or C_mid outside its interval at a level
    forecast_above_ceiling     the point forecast above the reported A (at `predict_at` and far out)
    compute_outside_interval   the run length or a compute-to-target outside its own interval
    plateaued_too_wide         "plateaued" while A's 80 % interval is wider than +- the margin
    collapse_told_to_run_on    a collapsed run advised to run longer
    noisy_but_tail_open        "too noisy" (a longer run does not help) while the run length's 80 %
                               interval reaches beyond a tenth more compute (a longer run would)
    verdict_differs_by_level   the JSON's verdict is not the same at every level
    """
    broken = []
    for level in levels:
        intervals = fit.conf_int(level)
        for name, value in (("A", fit.a), ("B", fit.b), ("C_mid", fit.c_mid)):
            lo, hi = intervals[name]
            if not lo - SLACK * abs(value) <= value <= hi + SLACK * abs(value):
                broken.append("estimate_outside_interval")
                break
        near = fit.compute_near_ceiling(level=level)
        if not near.lo <= near.value <= near.hi:
            broken.append("compute_outside_interval")
    far = np.concatenate([np.asarray(predict_at, dtype=float), float(np.max(fit.compute)) * np.array([1e2, 1e6])])
    if np.any(fit.predict(far) > fit.a + SLACK):
        broken.append("forecast_above_ceiling")
    if fit.verdict.kind == "plateaued":
        tail = (1.0 - SETTINGS.verdict_level) / 2.0
        lo, hi = np.quantile(fit.ceiling_draws, [tail, 1.0 - tail])
        margin = SETTINGS.margin * fit.reward_unit
        if lo < fit.a - margin - SLACK or hi > fit.a + margin + SLACK:
            broken.append("plateaued_too_wide")
    if fit.collapse_compute is not None and fit.verdict.advises_longer_run:
        broken.append("collapse_told_to_run_on")
    if fit.verdict.kind == "too_noisy":
        near = fit.compute_near_ceiling(level=SETTINGS.verdict_level)
        if near.hi > AT_END * near.current:
            broken.append("noisy_but_tail_open")
    if len({str(fit.to_dict(level)["verdict"]) for level in levels}) > 1:
        broken.append("verdict_differs_by_level")
    return sorted(set(broken))
