"""The words of a knob's verdict: why it could not be reached (no fitted pair, ceilings that are
limits or extrapolations, an interval that crosses the margin or is missing) or what an effect
below the noise rests on, and which seed pairs the ceiling was judged without. Torch-free.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from scalerl.study.paired import PairedInterval
from scalerl.study.seed_pairs import SeedPair


def paired_reason(
    fitted_pairs: Sequence[SeedPair],
    *,
    a_call: str,
    b_call: str,
    speed_call: str,
    delta_a: PairedInterval,
    delta_b: PairedInterval,
    delta_speed: PairedInterval,
    b_noise: float | None,
    speed_noise: float | None,
    margin: float,
) -> str | None:
    """The reason of a paired verdict over the seed pairs with both runs fitted (`fitted_pairs`),
    from its calls on A, B and the compute to half the gain; None when the verdict needs none."""
    limits_only = bool(fitted_pairs) and all(pair.ceilings_at_bound for pair in fitted_pairs)
    unmeasured_only = bool(fitted_pairs) and not any(pair.measures_a for pair in fitted_pairs)
    b_text = (
        f"; dB at the shared A: {delta_b.mean:+.2f} [{delta_b.lo:+.2f}, {delta_b.hi:+.2f}]"
        if np.isfinite(delta_b.lo)
        else ""
    )
    reason = None
    if not fitted_pairs:
        reason = "no seed pair with both the variant and the base fitted"
    elif limits_only:
        reason = (
            "in every seed pair both ceilings sit at the top of their range (limits, not estimates), "
            "so dA cannot be measured" + b_text
        )
    elif unmeasured_only:
        reason = (
            "in every seed pair a run has not bent over (ceiling not identified: its A is an "
            "extrapolation), so dA cannot be measured; run longer" + b_text
        )
    elif a_call == "unclear":
        reason = (
            f"the dA interval [{delta_a.lo:+.3f}, {delta_a.hi:+.3f}] crosses the margin +-{margin:.3g}"
            if np.isfinite(delta_a.lo)
            else "one pair and no interval for dA"
        )
    elif a_call == "within" and b_call == "unclear":
        reason = "no interval for dB at the shared A"
    elif a_call == "within" and b_call == "none" and speed_call in ("up", "down"):
        reason = (
            f"B at the shared A does not tell ({delta_b.mean:+.3g} [{delta_b.lo:+.3g}, {delta_b.hi:+.3g}]); "
            f"the compute to half the shared gain does: the variant saves {delta_speed.mean:+.3f} "
            f"[{delta_speed.lo:+.3f}, {delta_speed.hi:+.3f}] decades of it (log10 C_mid, base minus variant), "
            f"beyond the refits' own noise +-{speed_noise:.3f}"
        )
    elif a_call == "within" and b_call == "none" and (delta_b.lo > 0 or delta_b.hi < 0):
        reason = (
            f"dB at the shared A {delta_b.mean:+.3g} [{delta_b.lo:+.3g}, {delta_b.hi:+.3g}] excludes 0 but is "
            f"within the refits' own B noise +-{b_noise:.3g} (their B half-widths plus the shift that fixing "
            "ceilings that differ by dA to their mean puts into dB)"
        )
    left_out = sum(not pair.measures_a for pair in fitted_pairs)
    if left_out and not unmeasured_only:
        note = (
            f"{left_out} of {len(fitted_pairs)} seed pairs left out of dA (a run not bent over, or both ceilings "
            f"limits); the ceiling is judged on the other {len(fitted_pairs) - left_out}"
        )
        reason = note if reason is None else f"{reason}; {note}"
    return reason


def unpaired_reason(note: str, a_call: str, b_call: str, delta_a: PairedInterval, margin: float) -> str:
    """The reason of an unpaired verdict: `note` (why the seeds are unpaired), then why the verdict
    could not be reached, if it could not."""
    reason = note
    if a_call == "unclear":
        reason += (
            f"; the dA interval [{delta_a.lo:+.3f}, {delta_a.hi:+.3f}] crosses the margin +-{margin:.3g}"
            if np.isfinite(delta_a.lo)
            else "; fewer than two seeds with a measured ceiling (bent over, not a limit) on a side: no interval for dA"
        )
    elif a_call == "within" and b_call == "unclear":
        reason += "; no interval for dB at the shared A"
    return reason
