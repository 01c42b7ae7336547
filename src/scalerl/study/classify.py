"""The paper's two-tier verdict on one knob: does flipping it move the ceiling A, only the
efficiency B, or nothing measurable? Numbers in, verdict out (numpy only, no fitting here).

Rule (Khatri, Madaan et al., arXiv 2510.13786, section 2 "comparing recipes" and section 5):
ceilings A that differ by more than the seed-to-seed noise of A (the paper: about +-0.015 over
3 seeds, so a margin of 0.02) are different ceilings; otherwise both runs are refitted with A fixed
to a shared value and compared by B. Here the margins are measured from the seeds of the study
itself (`seed_spread_margin`, `b_noise_margin`) instead of taken from the paper.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping, Sequence

import numpy as np

from scalerl.errors import ConfigError

PAPER_MARGIN = 0.02  # the paper's margin on A, used when no seed spread can be measured
MARGIN_FLOOR = 0.005  # below this, fitted ceilings of pass rates on ~10^2 samples are not distinct
SPREAD_Z = 2.0  # a difference of two seed means beyond 2 standard errors counts as real

CEILING, EFFICIENCY, NO_EFFECT, NOT_CLASSIFIED = (
    "moves the ceiling", "efficiency only", "no measurable effect", "not classified")


@dataclass(frozen=True)
class PooledSpread:
    """Pooled within-group standard deviation `sd` with `dof` degrees of freedom."""

    sd: float
    dof: int


@dataclass(frozen=True)
class Margin:
    """The margin on A and where it came from: "seed spread", "floor", "paper default" or "given"."""

    value: float
    source: str
    pooled_sd: float | None = None
    dof: int = 0
    seeds: int = 1

    def describe(self) -> str:
        if self.source == "given":
            return f"margin {self.value:.4f} (given)"
        if self.source == "paper default":
            return f"margin {self.value:.4f} (the paper's; no variant has two fitted seeds to measure a spread)"
        spread = f"pooled seed SD of A {self.pooled_sd:.4f} ({self.dof} dof), {self.seeds} seeds"
        if self.source == "floor":
            return f"margin {self.value:.4f} (the floor; {spread} gives less)"
        return f"margin {self.value:.4f} = {SPREAD_Z:g} x SD x sqrt(2/{self.seeds}) ({spread})"


def pooled_seed_sd(values_by_group: Mapping[str, Sequence[float]]) -> PooledSpread | None:
    """s_p = sqrt( sum_g sum_i (x_gi - mean_g)^2 / sum_g (n_g - 1) ), the spread between seeds of
    the same variant, pooled over every variant with at least two values; None when none has two.
    Pooling keeps the difference between variants (the effect being measured) out of the noise."""
    squares, dof = 0.0, 0
    for values in values_by_group.values():
        values = np.asarray([v for v in values if np.isfinite(v)], dtype=float)
        if values.size >= 2:
            squares += float(np.sum((values - values.mean()) ** 2))
            dof += values.size - 1
    return None if dof == 0 else PooledSpread(float(np.sqrt(squares / dof)), dof)


def seed_spread_margin(a_by_variant: Mapping[str, Sequence[float]], seeds: int, *, z: float = SPREAD_Z,
                       floor: float = MARGIN_FLOOR, default: float = PAPER_MARGIN) -> Margin:
    """The margin on A measured in this study:

        margin = max(floor, z * s_A * sqrt(2 / n))

    s_A: pooled within-variant standard deviation of the per-seed fitted A (`pooled_seed_sd`),
    n: seeds per variant, so s_A * sqrt(2 / n) is the standard error of the difference between two
    seed-mean ceilings; z = 2. With no variant fitted on two seeds, the paper's 0.02."""
    if seeds < 1:
        raise ConfigError(f"seeds must be >= 1, got {seeds}")
    spread = pooled_seed_sd(a_by_variant)
    if spread is None:
        return Margin(float(default), "paper default", seeds=seeds)
    measured = z * spread.sd * np.sqrt(2.0 / seeds)
    source = "seed spread" if measured >= floor else "floor"
    return Margin(float(max(measured, floor)), source, spread.sd, spread.dof, seeds)


def b_noise_margin(base_b: Sequence[float], variant_b: Sequence[float], *, z: float = SPREAD_Z,
                   interval_halfwidths: tuple[float, float] | None = None) -> float | None:
    """How far apart the B of two recipes (fitted with A shared) must be to differ:

        z * s_B * sqrt(1 / n_base + 1 / n_variant)

    with s_B the pooled seed SD of B over the two recipes. With a single seed each, the B
    intervals of the two fits stand in: sqrt(h_base^2 + h_variant^2) (h: interval half-widths).
    None when neither is available."""
    spread = pooled_seed_sd({"base": base_b, "variant": variant_b})
    if spread is not None:
        return float(z * spread.sd * np.sqrt(1.0 / len(base_b) + 1.0 / len(variant_b)))
    if interval_halfwidths is not None:
        return float(np.hypot(*interval_halfwidths))
    return None


@dataclass(frozen=True)
class KnobEffect:
    """The verdict on one knob against the base. `direction` is "up" / "down" for A (ceiling) or
    B (efficiency); `delta_b` is the variant's mean B minus the base's, both at the shared A."""

    effect: str
    direction: str | None
    delta_a: float | None
    margin: float
    delta_b: float | None = None
    b_margin: float | None = None
    reason: str | None = None

    def label(self) -> str:
        """'moves the ceiling (down)', 'efficiency only (up)', 'no measurable effect', ..."""
        return self.effect + (f" ({self.direction})" if self.direction else "")


def shared_ceiling(base_a: Sequence[float], variant_a: Sequence[float]) -> float:
    """The A both recipes are refitted with: the mean of the two seed-mean ceilings (the pair's mean)."""
    return float((np.mean(base_a) + np.mean(variant_a)) / 2.0)


def ceiling_effect(base_a: Sequence[float], variant_a: Sequence[float], margin: float) -> KnobEffect | None:
    """Tier 1: |mean A_variant - mean A_base| > margin -> "moves the ceiling" (up or down); None
    when the ceilings are within the margin (tier 2 decides), or a "not classified" verdict when a
    side has no fitted seed."""
    if margin < 0:
        raise ConfigError(f"margin must be >= 0, got {margin:g}")
    if len(base_a) == 0 or len(variant_a) == 0:
        side = "base" if len(base_a) == 0 else "variant"
        return KnobEffect(NOT_CLASSIFIED, None, None, margin, reason=f"no fitted seed of the {side}")
    delta_a = float(np.mean(variant_a) - np.mean(base_a))
    if abs(delta_a) > margin:
        return KnobEffect(CEILING, "up" if delta_a > 0 else "down", delta_a, margin)
    return None


def efficiency_effect(delta_a: float, margin: float, base_b: Sequence[float], variant_b: Sequence[float],
                      *, interval_halfwidths: tuple[float, float] | None = None) -> KnobEffect:
    """Tier 2 (ceilings within the margin; B fitted with A shared): |mean B_v - mean B_b| beyond
    `b_noise_margin` -> "efficiency only" (up or down), else "no measurable effect"."""
    if len(base_b) == 0 or len(variant_b) == 0:
        return KnobEffect(NOT_CLASSIFIED, None, delta_a, margin, reason="no fit with the shared A")
    delta_b = float(np.mean(variant_b) - np.mean(base_b))
    b_margin = b_noise_margin(base_b, variant_b, interval_halfwidths=interval_halfwidths)
    if b_margin is None:
        return KnobEffect(NOT_CLASSIFIED, None, delta_a, margin, delta_b,
                          reason="no seed spread or interval of B to judge the difference")
    if abs(delta_b) > b_margin:
        return KnobEffect(EFFICIENCY, "up" if delta_b > 0 else "down", delta_a, margin, delta_b, b_margin)
    return KnobEffect(NO_EFFECT, None, delta_a, margin, delta_b, b_margin)
