"""One-sentence headlines of a fit, for the top of figures, console output and report sections.

Words, one per meaning: "budget" is the compute a forecast is asked at, "target" a reward to reach.
"""

from __future__ import annotations

import math

from scalerl.forecast.diagnostics import FAR_RUN_LENGTH, late_stretch

# Beyond this many times the current compute "run N x longer" is no plan: the fitted midpoint sits
# so far past the data that the sigmoid has not seen the curve bend at all, or past the bend the
# curve rises too slowly to reach its ceiling in any run.
FAR_LONGER_FACTOR = FAR_RUN_LENGTH


def _short(value: float) -> str:
    return f"{value:.3g}"


def longer_run_factor(result) -> float:
    """How many times the current compute to run before the ceiling can be read:

        2 C_mid / C_last             while the last point is before the inflection (pass it first),
        C_within / C_last            past it: the run length (the fitted curve within 0.02 of A,
                                     FitResult.compute_near_ceiling)

    the advice of diagnostics.ceiling_identifiability."""
    last = float(max(result.compute))
    if last < float(result.c_mid):
        return 2.0 * float(result.c_mid) / last
    return float(result.compute_near_ceiling().times_current)


def _rise_per_doubling(result) -> float | None:
    """Slope of the run's late stretch per doubling of compute (beta ln 2), None without one."""
    if getattr(result, "reward", None) is None:
        return None
    late = late_stretch(result.compute, result.reward, getattr(result, "noise_sd", 0.0))
    return None if late is None else late.slope * math.log(2.0)


def ceiling_phrase(result, level: float = 0.8) -> str:
    """`ceiling A 0.61 [0.6, 0.62]`, `ceiling not identified yet: run ~6.5x longer` (longer_run_factor),
    or, when the fitted curve is already at its ceiling (the run length), that the evaluations are
    too noisy: "run longer" only where the run length says the ceiling is still ahead. Past
    FAR_LONGER_FACTOR no run length is a plan: before the inflection the curve has not begun to
    bend; past it the curve still rises (its late slope per doubling) with no ceiling in reach."""
    if not result.ceiling_identified:
        near = result.compute_near_ceiling(level=level)
        if near.value <= near.current:
            return "ceiling not identified: the evaluations are too noisy to pin A (the fitted curve is at its ceiling)"
        factor = longer_run_factor(result)
        if factor <= FAR_LONGER_FACTOR:
            return f"ceiling not identified yet: run ~{factor:.1f}x longer"
        if float(max(result.compute)) < float(result.c_mid):
            return (f"ceiling not identified yet: the curve has not begun to bend, so no run length can be "
                    f"read from it (over {FAR_LONGER_FACTOR:.0f}x the compute so far)")
        rise = _rise_per_doubling(result)
        rising = "" if rise is None else f" ({rise:+.3f} per doubling of compute over its last stretch)"
        return (f"ceiling not identified yet: past its bend the curve still rises{rising} with no ceiling "
                f"in reach: pinning A would take over {FAR_LONGER_FACTOR:.0f}x the compute so far")
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
