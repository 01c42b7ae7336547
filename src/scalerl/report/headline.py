"""One-sentence headlines of a fit, for the top of figures, console output and report sections:
the fit's verdict (forecast.verdict) first, then the budget and target when asked.

Words, one per meaning: "budget" is the compute a forecast is asked at, "target" a reward to reach.
"""

from __future__ import annotations

import math


def _short(value: float) -> str:
    return f"{value:.3g}"


def budget_phrase(result, budget: float, level: float = 0.8) -> str:
    """`final reward at the budget 2e+04: 0.44 [0.36, 0.48]` (the band for a new evaluation);
    `the fitted curve's reward at the budget ...` where the verdict says the curve does not
    describe the run's end (a collapse, an end above the curve): a forecast of the curve, not of the run."""
    lo, hi = result.interval(float(budget), level)
    forecast = _short(float(result.predict(float(budget))))
    subject = "the fitted curve's reward" if result.verdict.run_length_missing_because else "final reward"
    return f"{subject} at the budget {_short(budget)}: {forecast} [{_short(lo)}, {_short(hi)}]"


def target_phrase(result, target: float, level: float = 0.8) -> str:
    """`target 0.6 reached at compute 5.1e+04 [3e+04, never]`; `target 0.6 probably not reached:
    above the ceiling A 0.58, inside its interval (...)`; `target 0.6 not reachable: above the
    ceiling A's interval`; `the fitted curve reaches the target ...`
    where the verdict says the curve does not describe the run's end (as budget_phrase)."""
    needed = result.compute_to_reach(float(target), level)
    if needed.within_ceiling_interval:
        return (
            f"target {_short(target)} probably not reached: above the ceiling A {_short(result.a)}, inside its "
            f"interval (at the earliest at compute {_short(needed.lo)})"
        )
    if not needed.reachable:
        return f"target {_short(target)} not reachable: above the ceiling A's interval"
    hi = "never" if math.isinf(needed.hi) else _short(needed.hi)
    interval = f"at compute {_short(needed.value)} [{_short(needed.lo)}, {hi}]"
    if result.verdict.run_length_missing_because:
        return f"the fitted curve reaches the target {_short(target)} {interval}"
    return f"target {_short(target)} reached {interval}"


def fit_headline(result, *, budget: float | None = None, target: float | None = None, level: float = 0.8) -> str:
    """The verdict's sentence, then the reward at the budget and the compute to the target when given, '; '-joined."""
    parts = [result.verdict.text]
    if budget is not None and math.isfinite(budget) and budget > 0:
        parts.append(budget_phrase(result, budget, level))
    if target is not None and math.isfinite(target):
        parts.append(target_phrase(result, target, level))
    return "; ".join(parts)
