"""Seed i of a variant against seed i of the base: dA_i, both refitted with A fixed to their mean
for dB_i and dS_i (the decades of compute the variant saves to half the shared gain), each with
the noise of the refits, and the paired interval of such differences over the pairs.
Khatri, Madaan et al., arXiv 2510.13786, section 2 (compare B at a shared A). Torch-free.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from scalerl.errors import FitError, InputError
from scalerl.forecast.fitting import fit_sigmoid
from scalerl.forecast.result import FitResult
from scalerl.study.paired import (
    UNDECIDED,
    PairedInterval,
    pair_verdict,
    paired_differences,
    paired_t_interval,
    single_pair_interval,
)
from scalerl.study.run_curves import read_source
from scalerl.study.seed_fits import SeedFit

QUICK_DRAWS = 40  # shared-A refits: B and a rough interval of B per seed pair


@dataclass(frozen=True)
class SeedPair:
    """Seed i of the variant against seed i of the base: dA_i, the A both were refitted with
    (their mean), dB_i at that shared A, the pair's B noise (interval half-widths combined), the
    compute the variant saves to half the shared gain, dS_i = log10 C_mid(base) - log10 C_mid(variant)
    at that A, with its noise, and the paper's rule on this pair alone."""

    seed_index: int
    delta_a: float | None
    shared_a: float | None
    delta_b: float | None
    b_halfwidth: float | None
    verdict: tuple[str, str | None]
    ceilings_at_bound: bool = False  # both A at the top of their range: limits, dA not measurable
    ceiling_unidentified: bool = False  # a run of the pair has not bent over: its A is an extrapolation
    delta_speed: float | None = None  # dS_i, decades of compute saved to half the shared gain
    speed_halfwidth: float | None = None

    @property
    def measures_a(self) -> bool:
        """Whether dA_i measures a difference of ceilings (both identified, not both limits)."""
        return self.delta_a is not None and not (self.ceilings_at_bound or self.ceiling_unidentified)


def interval_halfwidth(fit: FitResult, name: str, level: float) -> float:
    """(hi - lo) / 2 of the fit's interval of parameter `name` at `level`."""
    lo, hi = fit.conf_int(level)[name]
    return (hi - lo) / 2.0


@dataclass(frozen=True)
class SharedARefit:
    """One seed refitted with A fixed to a pair's shared A: B and log10 C_mid, each with the
    half-width of its interval at the study's level."""

    b: float
    b_halfwidth: float
    log_c_mid: float
    log_c_mid_halfwidth: float


def refit_at_shared_a(
    seed: SeedFit, shared_a: float, x: str, y: str, fit_options: dict, level: float
) -> SharedARefit | None:
    """One seed refitted with A fixed to `shared_a` (SharedARefit); None when its curve cannot take
    that A."""
    curve = read_source(seed.metrics_path, x, y)
    try:
        fixed = fit_sigmoid(curve.compute, curve.reward, fixed_a=shared_a, **{**fit_options, "n_draws": QUICK_DRAWS})
    except (FitError, InputError):
        return None
    c_lo, c_hi = fixed.conf_int(level)["C_mid"]
    return SharedARefit(
        fixed.b, interval_halfwidth(fixed, "B", level), float(np.log10(fixed.c_mid)), float(np.log10(c_hi / c_lo) / 2.0)
    )


def pair_noise(halfwidth_v: float, halfwidth_b: float, delta_shared: float, delta_own: float) -> float:
    """h = sqrt(h_v^2 + h_b^2) + |d(shared A) - d(own A)|: the two refits' interval half-widths
    combined plus the shift that fixing both ceilings to their mean put into the difference."""
    return float(np.hypot(halfwidth_v, halfwidth_b) + abs(delta_shared - delta_own))


def seed_pair(
    index: int, variant: SeedFit, base: SeedFit, margin: float, x: str, y: str, fit_options: dict, level: float
) -> SeedPair:
    """dA_i = A_v,i - A_b,i; both refitted with A fixed to (A_v,i + A_b,i) / 2 for
    dB_i = B_v,i - B_b,i and its noise h_i = sqrt(h_v,i^2 + h_b,i^2) + |dB_i - dB_i(own A)|: the
    refits' own B half-widths plus the shift that sharing A alone put into dB_i (each run's B
    moves when its A is fixed away from its own; two ceilings within the margin moved to their mean
    shift dB_i by a bias pairing does not cancel); the same for dS_i = log10 C_mid,b,i -
    log10 C_mid,v,i at the shared A (the decades of compute the variant saves to reach half the
    shared gain); the pair's own verdict.
    When both A sit at the top of their range (FitResult.ceiling_at_bound) each is a lower limit:
    dA_i = 0 measures nothing; when either run has not bent over (not FitResult.ceiling_identified)
    its A is an extrapolation, and dA_i says how two extrapolations differ, not two ceilings. Either
    way the pair says "undecided" whatever dB_i (kept for the report)."""
    if variant.fit is None or base.fit is None:
        return SeedPair(index, None, None, None, None, pair_verdict(None, None, margin, None))
    both_limits = bool(variant.fit.ceiling_at_bound and base.fit.ceiling_at_bound)
    unidentified = not (variant.fit.ceiling_identified and base.fit.ceiling_identified)
    delta_a = variant.fit.a - base.fit.a
    shared_a = (variant.fit.a + base.fit.a) / 2.0
    fixed_v = refit_at_shared_a(variant, shared_a, x, y, fit_options, level)
    fixed_b = refit_at_shared_a(base, shared_a, x, y, fit_options, level)
    if fixed_v is None or fixed_b is None:
        verdict = (UNDECIDED, None) if both_limits or unidentified else pair_verdict(delta_a, None, margin, None)
        return SeedPair(index, delta_a, shared_a, None, None, verdict, both_limits, unidentified)
    delta_b = fixed_v.b - fixed_b.b
    halfwidth = pair_noise(fixed_v.b_halfwidth, fixed_b.b_halfwidth, delta_b, variant.fit.b - base.fit.b)
    delta_speed = fixed_b.log_c_mid - fixed_v.log_c_mid
    speed_halfwidth = pair_noise(
        fixed_v.log_c_mid_halfwidth,
        fixed_b.log_c_mid_halfwidth,
        delta_speed,
        float(np.log10(base.fit.c_mid / variant.fit.c_mid)),
    )
    verdict = (
        (UNDECIDED, None)
        if both_limits or unidentified
        else pair_verdict(delta_a, delta_b, margin, halfwidth, delta_speed, speed_halfwidth)
    )
    return SeedPair(
        index, delta_a, shared_a, delta_b, halfwidth, verdict, both_limits, unidentified, delta_speed, speed_halfwidth
    )


def difference_interval(values: list[float | None], single_halfwidth: float | None, level: float) -> PairedInterval:
    """Paired t-interval of the differences (n >= 2); for one pair the fits' own intervals."""
    finite = paired_differences(values, [0.0] * len(values))
    if finite.size == 1 and single_halfwidth is not None:
        return single_pair_interval(float(finite[0]), (single_halfwidth, 0.0))
    return paired_t_interval(finite, level)
