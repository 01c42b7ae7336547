"""One-sentence headlines of a fit, for the top of figures, console output and report sections.

Words, one per meaning: "budget" is the compute a forecast is asked at, "target" a reward to reach.
"""

from __future__ import annotations

import math

# Beyond this many times the current compute "run N x longer" is no plan: the fitted midpoint sits
# so far past the data that the sigmoid has not seen the curve bend at all.
FAR_LONGER_FACTOR = 100.0


def _short(value: float) -> str:
    return f"{value:.3g}"


def longer_run_factor(result) -> float:
    """How many times the current compute to run before the ceiling can be identified:
    2 x max(C_mid, C_last) / C_last, the advice of diagnostics.ceiling_identifiability."""
    last = float(max(result.compute))
    return 2.0 * max(float(result.c_mid), last) / last


def ceiling_phrase(result, level: float = 0.8) -> str:
    """`ceiling A 0.61 [0.6, 0.62]`, `ceiling not identified yet: run ~6.5x longer`, or, when the
    fitted curve is already at its ceiling (the run length), that the evaluations are too noisy:
    "run longer" only where the run length says the ceiling is still ahead."""
    if not result.ceiling_identified:
        near = result.compute_near_ceiling(level=level)
        if near.value <= near.current:
            return "ceiling not identified: the evaluations are too noisy to pin A (the fitted curve is at its ceiling)"
        factor = longer_run_factor(result)
        if factor > FAR_LONGER_FACTOR:
            return (f"ceiling not identified yet: the curve has not begun to bend, so no run length can be "
                    f"read from it (over {FAR_LONGER_FACTOR:.0f}x the compute so far)")
        return f"ceiling not identified yet: run ~{factor:.1f}x longer"
    lo, hi = result.conf_int(level)["A"]
    return f"ceiling A {_short(result.a)} [{_short(lo)}, {_short(hi)}]"


def budget_phrase(result, budget: float, level: float = 0.8) -> str:
    """`final reward at the budget 2e+04: 0.44 [0.36, 0.48]` (the band for a new evaluation)."""
    lo, hi = result.interval(float(budget), level)
    return f"final reward at the budget {_short(budget)}: {_short(float(result.predict(float(budget))))} [{_short(lo)}, {_short(hi)}]"


def target_phrase(result, target: float, level: float = 0.8) -> str:
    """`target 0.6 reached at compute 5.1e+04 [3e+04, 9e+04]` or `target 0.6 not reachable: above the forecast ceiling`."""
    needed = result.compute_to_reach(float(target), level)
    if not needed.reachable:
        return f"target {_short(target)} not reachable: above the forecast ceiling"
    hi = "never" if math.isinf(needed.hi) else _short(needed.hi)
    return f"target {_short(target)} reached at compute {_short(needed.value)} [{_short(needed.lo)}, {hi}]"


def fit_headline(result, *, budget: float | None = None, target: float | None = None, level: float = 0.8) -> str:
    """The ceiling, then the reward at the budget and the compute to the target when given, '; '-joined."""
    parts = [ceiling_phrase(result, level)]
    if budget is not None and math.isfinite(budget) and budget > 0:
        parts.append(budget_phrase(result, budget, level))
    if target is not None and math.isfinite(target):
        parts.append(target_phrase(result, target, level))
    if getattr(result, "collapse_compute", None) is not None:
        parts.append(f"collapse at compute {_short(result.collapse_compute)} (fitted before it)")
    return "; ".join(parts)
