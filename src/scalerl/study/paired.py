"""The paired verdict of `scalerl ablate`: per knob, does flipping it move the ceiling A, only the
efficiency B, nothing measurable at the margin, or can the seeds not tell? Numbers in, verdict out
(numpy/scipy only; the fitting is done by scalerl.study.seed_fits and seed_pairs).

Design (common random numbers): seed i of every variant starts from the same warm-started weights,
draws its prompts and sampling noise from the same seed as seed i of the base, so most of the
seed-to-seed noise is shared by the pair and cancels in the per-seed difference
d_i = x_i(variant) - x_i(base). The verdict reads the spread of the d_i (a paired t-interval), not
the spread of unpaired seed means. The rule follows the paper's two tiers (Khatri, Madaan et al.,
arXiv 2510.13786, section 2: ceilings apart by more than a margin differ; otherwise compare B at
a shared A), with the tiers decided by interval against margin, as in an equivalence test
(two one-sided tests at (1 - level) / 2 each; Schuirmann 1987).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy import stats

from scalerl.errors import ConfigError

CEILING, EFFICIENCY, NO_EFFECT, UNDECIDED = (
    "moves the ceiling",
    "moves efficiency only",
    "no measurable effect",
    "undecided",
)
PAPER_MARGIN = 0.02  # the paper's margin on A (about the seed-to-seed spread of A at 3 seeds)
VERDICT_LEVEL = 0.9  # two one-sided tests at 5 % each


@dataclass(frozen=True)
class PairedInterval:
    """Mean paired difference and its interval; `source`: "paired t" (n >= 2 pairs), "fit
    intervals" (one pair: the two fits' own intervals combined), "Welch" (seeds without partners:
    the unpaired interval of welch_interval) or "none" (no interval)."""

    mean: float
    lo: float
    hi: float
    sd: float | None
    n: int
    source: str


def paired_differences(variant: Sequence[float | None], base: Sequence[float | None]) -> np.ndarray:
    """d_i = v_i - b_i for every seed index i at which both values are finite numbers (seed i of
    the variant is paired with seed i of the base; an unfitted seed drops its pair)."""
    if len(variant) != len(base):
        raise ConfigError(f"paired values need one per seed on both sides, got {len(variant)} and {len(base)}")
    pairs = [
        (v, b) for v, b in zip(variant, base) if v is not None and b is not None and np.isfinite(v) and np.isfinite(b)
    ]
    return np.array([v - b for v, b in pairs], dtype=float)


def paired_t_interval(differences: Sequence[float], level: float = VERDICT_LEVEL) -> PairedInterval:
    """Student-t interval of the mean paired difference:

        d_bar = (1/n) sum_i d_i,  s_d = sqrt( sum_i (d_i - d_bar)^2 / (n - 1) ),
        d_bar +- t_{(1 + level)/2, n - 1} s_d / sqrt(n)

    With fewer than two differences no spread exists: lo = hi = nan, source "none"."""
    if not 0.0 < level < 1.0:
        raise ConfigError(f"level must be in (0, 1), got {level:g}")
    values = np.asarray(differences, dtype=float)
    if values.size < 2:
        mean = float(values[0]) if values.size else float("nan")
        return PairedInterval(mean, float("nan"), float("nan"), None, int(values.size), "none")
    mean, sd = float(values.mean()), float(values.std(ddof=1))
    half = float(stats.t.ppf((1.0 + level) / 2.0, values.size - 1)) * sd / np.sqrt(values.size)
    return PairedInterval(mean, mean - half, mean + half, sd, int(values.size), "paired t")


def welch_interval(variant: Sequence[float], base: Sequence[float], level: float = VERDICT_LEVEL) -> PairedInterval:
    """Unpaired (seeds without partners): Welch's interval of mean(v) - mean(b),

        d = v_bar - b_bar,  se = sqrt(s_v^2 / n_v + s_b^2 / n_b),  d +- t_{(1 + level)/2, nu} se,
        nu = se^4 / ((s_v^2 / n_v)^2 / (n_v - 1) + (s_b^2 / n_b)^2 / (n_b - 1))  (Welch-Satterthwaite),

    as scipy.stats.ttest_ind(equal_var=False) gives it. Fewer than two values on a side: no
    spread, lo = hi = nan, source "none". `sd` is se * sqrt(n) with n the smaller side."""
    if not 0.0 < level < 1.0:
        raise ConfigError(f"level must be in (0, 1), got {level:g}")
    v, b = np.asarray(variant, dtype=float), np.asarray(base, dtype=float)
    n = int(min(v.size, b.size))
    mean = float(v.mean() - b.mean()) if v.size and b.size else float("nan")
    if n < 2:
        return PairedInterval(mean, float("nan"), float("nan"), None, n, "none")
    low, high = stats.ttest_ind(v, b, equal_var=False).confidence_interval(confidence_level=level)
    se = float(np.sqrt(v.var(ddof=1) / v.size + b.var(ddof=1) / b.size))
    return PairedInterval(mean, float(low), float(high), se * float(np.sqrt(n)), n, "Welch")


def single_pair_interval(difference: float, halfwidths: tuple[float, float]) -> PairedInterval:
    """One seed pair: d +- sqrt(h_variant^2 + h_base^2), the two fits' interval half-widths combined
    as independent errors (no seed spread can be measured from one pair)."""
    half = float(np.hypot(*halfwidths))
    return PairedInterval(float(difference), difference - half, difference + half, None, 1, "fit intervals")


def ceiling_call(interval: PairedInterval, margin: float) -> str:
    """Tier 1 on the dA interval [lo, hi] against the margin m:

        lo > m -> "up";  hi < -m -> "down";  -m <= lo and hi <= m -> "within";  else "unclear"
    (an interval that crosses +-m, or none at all, cannot tell)."""
    if margin < 0:
        raise ConfigError(f"margin must be >= 0, got {margin:g}")
    if not (np.isfinite(interval.lo) and np.isfinite(interval.hi)):
        return "unclear"
    if interval.lo > margin:
        return "up"
    if interval.hi < -margin:
        return "down"
    return "within" if -margin <= interval.lo and interval.hi <= margin else "unclear"


def efficiency_call(interval: PairedInterval, noise: float | None = None) -> str:
    """Tier 2 on the dB interval (B of both refitted with A shared per pair): lo > 0 -> "up",
    hi < 0 -> "down", an interval holding 0 -> "none"; no interval -> "unclear". With `noise` h
    (the refits' own B half-widths combined, the median over pairs) a mean |dB| <= h is "none"
    whatever the interval: fixing two ceilings that differ by less than the margin to their mean
    shifts both B by a bias of its own (up to about h), which pairing does not cancel; this is the
    test each pair applies (pair_verdict), on the mean."""
    if not (np.isfinite(interval.lo) and np.isfinite(interval.hi)):
        return "unclear"
    if noise is not None and np.isfinite(noise) and abs(interval.mean) <= noise:
        return "none"
    if interval.lo > 0:
        return "up"
    return "down" if interval.hi < 0 else "none"


def knob_verdict(a_call: str, b_call: str, speed_call: str | None = None) -> tuple[str, str | None]:
    """(verdict, direction): A up/down -> moves the ceiling; A within the margin and B up/down ->
    moves efficiency only; A within, B holding 0 and the compute to half the shared gain up/down
    (`speed_call`: "up" when the variant gets there sooner) -> moves efficiency only (a curve shifted
    along log compute with the same B and A: a lower learning rate); A within and B holding 0 ->
    no measurable effect; otherwise undecided."""
    if a_call in ("up", "down"):
        return CEILING, a_call
    if a_call == "within" and b_call in ("up", "down"):
        return EFFICIENCY, b_call
    if a_call == "within" and b_call == "none" and speed_call in ("up", "down"):
        return EFFICIENCY, speed_call
    if a_call == "within" and b_call == "none":
        return NO_EFFECT, None
    return UNDECIDED, None


def pair_verdict(
    delta_a: float | None,
    delta_b: float | None,
    margin: float,
    b_halfwidth: float | None,
    delta_speed: float | None = None,
    speed_halfwidth: float | None = None,
) -> tuple[str, str | None]:
    """The paper's rule on one seed pair: |dA_i| > m -> moves the ceiling (sign of dA_i); else
    |dB_i| > h_i (h_i: the pair's B interval half-widths combined) -> moves efficiency only (sign
    of dB_i); else |dS_i| > its noise (dS_i: decades of compute the variant saves to half the
    shared gain) -> moves efficiency only (sign of dS_i); else no measurable effect. A pair without
    dA_i, or within m without dB_i: undecided."""
    if delta_a is None or not np.isfinite(delta_a):
        return UNDECIDED, None
    if abs(delta_a) > margin:
        return CEILING, "up" if delta_a > 0 else "down"
    if delta_b is None or b_halfwidth is None or not np.isfinite(delta_b):
        return UNDECIDED, None
    if abs(delta_b) > b_halfwidth:
        return EFFICIENCY, "up" if delta_b > 0 else "down"
    if (
        delta_speed is not None
        and speed_halfwidth is not None
        and np.isfinite(delta_speed)
        and abs(delta_speed) > speed_halfwidth
    ):
        return EFFICIENCY, "up" if delta_speed > 0 else "down"
    return NO_EFFECT, None


def verdict_label(verdict: str, direction: str | None, margin: float) -> str:
    """'moves the ceiling (down)', 'moves efficiency only (up)', 'no measurable effect at margin
    0.02', 'undecided'."""
    if verdict == NO_EFFECT:
        return f"{NO_EFFECT} at margin {margin:.3g}"
    return verdict + (f" ({direction})" if direction else "")


@dataclass(frozen=True)
class Agreement:
    """How many seed pairs' own verdicts equal the knob's verdict (`agreeing` of `pairs`), and the
    most common pair verdict with its count (what the pairs say when the knob is undecided)."""

    agreeing: int
    pairs: int
    modal: tuple[str, str | None] | None
    modal_count: int


def verdict_agreement(pair_verdicts: Sequence[tuple[str, str | None]], verdict: tuple[str, str | None]) -> Agreement:
    """Count the seed pairs whose (verdict, direction) equals the knob's."""
    if not pair_verdicts:
        return Agreement(0, 0, None, 0)
    modal, count = Counter(pair_verdicts).most_common(1)[0]
    return Agreement(sum(1 for item in pair_verdicts if item == verdict), len(pair_verdicts), modal, count)
