"""A knob's verdict against the base from its seeds' fits: paired by index (paired_verdict), by
seed label (labelled_verdict), or, when the labels do not match, unpaired with Welch's interval
over the seeds (unpaired_verdict); scalerl.study.paired has the rule and its formulas,
scalerl.study.verdict_reasons the words of why. Torch-free.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from scalerl.forecast.result import FitResult
from scalerl.study.paired import (
    Agreement,
    PairedInterval,
    ceiling_call,
    efficiency_call,
    knob_verdict,
    verdict_agreement,
    verdict_label,
    welch_interval,
)
from scalerl.study.seed_fits import SeedFit
from scalerl.study.seed_pairs import SeedPair, difference_interval, interval_halfwidth, refit_at_shared_a, seed_pair
from scalerl.study.verdict_reasons import paired_reason, unpaired_reason


@dataclass(frozen=True)
class PairedVerdict:
    """The knob's verdict from the paired differences over seed pairs."""

    verdict: str
    direction: str | None
    label: str
    margin: float
    delta_a: PairedInterval
    delta_b: PairedInterval | None
    a_call: str
    b_call: str
    pairs: tuple[SeedPair, ...]
    agreement: Agreement
    reason: str | None = None
    delta_speed: PairedInterval | None = None  # dS at the shared A (decades of compute saved)
    speed_call: str | None = None


def knob_result(
    delta_a: PairedInterval,
    delta_b: PairedInterval,
    delta_speed: PairedInterval,
    calls: tuple[str, str, str],
    margin: float,
    pairs: tuple[SeedPair, ...],
    reason: str | None,
) -> PairedVerdict:
    """The PairedVerdict of the calls on dA, dB and dS (`calls`: a_call, b_call, speed_call):
    knob_verdict's verdict and label, the agreement of the pairs that measured dA (none without
    pairs), and dB and dS only where their mean is finite."""
    a_call, b_call, speed_call = calls
    verdict, direction = knob_verdict(a_call, b_call, speed_call)
    agreement = verdict_agreement([pair.verdict for pair in pairs if pair.delta_a is not None], (verdict, direction))
    return PairedVerdict(
        verdict,
        direction,
        verdict_label(verdict, direction, margin),
        margin,
        delta_a,
        delta_b if np.isfinite(delta_b.mean) else None,
        a_call,
        b_call,
        pairs,
        agreement,
        reason,
        delta_speed if np.isfinite(delta_speed.mean) else None,
        speed_call,
    )


def _median_or_none(values: list) -> float | None:
    kept = [value for value in values if value is not None]
    return float(np.median(kept)) if kept else None


def paired_verdict(
    variant_seeds: Sequence[SeedFit],
    base_seeds: Sequence[SeedFit],
    margin: float,
    x: str,
    y: str,
    fit_options: dict,
    level: float,
) -> PairedVerdict:
    """The knob's verdict: the dA interval against the margin (tier 1), then the dB interval at
    the pairs' shared A (tier 2); scalerl.study.paired has the rule and its formulas."""
    pairs = tuple(
        seed_pair(index, v, b, margin, x, y, fit_options, level)
        for index, (v, b) in enumerate(zip(variant_seeds, base_seeds))
    )
    fitted = [
        (pair, variant_seeds[pair.seed_index].fit, base_seeds[pair.seed_index].fit)
        for pair in pairs
        if pair.delta_a is not None
    ]
    single_a = single_b = None
    if len(fitted) == 1:
        pair, fit_v, fit_b = fitted[0]
        single_a = float(np.hypot(interval_halfwidth(fit_v, "A", level), interval_halfwidth(fit_b, "A", level)))
        single_b = pair.b_halfwidth
    # Pairs whose dA measures no ceilings (both limits, or a run not bent over) are left out of
    # the dA interval; the ceiling is judged on the others.
    measurable = [pair.delta_a if pair.measures_a else None for pair in pairs]
    delta_a = difference_interval(measurable, single_a, level)
    delta_b = difference_interval([pair.delta_b for pair in pairs], single_b, level)
    b_noise = _median_or_none([pair.b_halfwidth for pair in pairs])
    delta_speed = difference_interval(
        [pair.delta_speed for pair in pairs], fitted[0][0].speed_halfwidth if len(fitted) == 1 else None, level
    )
    speed_noise = _median_or_none([pair.speed_halfwidth for pair in pairs])
    a_call, b_call = ceiling_call(delta_a, margin), efficiency_call(delta_b, b_noise)
    speed_call = efficiency_call(delta_speed, speed_noise)
    reason = paired_reason(
        [pair for pair, _, _ in fitted],
        a_call=a_call,
        b_call=b_call,
        speed_call=speed_call,
        delta_a=delta_a,
        delta_b=delta_b,
        delta_speed=delta_speed,
        b_noise=b_noise,
        speed_noise=speed_noise,
        margin=margin,
    )
    return knob_result(delta_a, delta_b, delta_speed, (a_call, b_call, speed_call), margin, pairs, reason)


def _measures_ceiling(fit: FitResult) -> bool:
    """A seed's A is a ceiling estimate: the run has bent over and A is not at the top of its range."""
    return bool(fit.ceiling_identified and not fit.ceiling_at_bound)


def unpaired_verdict(
    variant_seeds: Sequence[SeedFit],
    base_seeds: Sequence[SeedFit],
    margin: float,
    x: str | None,
    y: str | None,
    fit_options: dict,
    level: float,
    note: str,
) -> PairedVerdict:
    """The knob's verdict when its seeds have no partners among the base's: Welch's interval of
    mean A_v - mean A_b over the seeds whose A is a ceiling estimate (tier 1); then every fitted seed
    refitted with A fixed to (mean A_v + mean A_b) / 2 and Welch's interval of mean B_v - mean B_b
    (tier 2, its noise h: the median refit B half-widths of the two sides combined); the same tiers
    and margin as the paired rule. No seed pairs, so no pair agreement;
    `note` (why the seeds are unpaired) starts the reason."""
    fits_v = [seed for seed in variant_seeds if seed.fit is not None]
    fits_b = [seed for seed in base_seeds if seed.fit is not None]
    delta_a = welch_interval(
        [seed.fit.a for seed in fits_v if _measures_ceiling(seed.fit)],
        [seed.fit.a for seed in fits_b if _measures_ceiling(seed.fit)],
        level,
    )
    delta_b = delta_speed = PairedInterval(float("nan"), float("nan"), float("nan"), None, 0, "none")
    b_noise = speed_noise = None
    if fits_v and fits_b:
        shared_a = (np.mean([seed.fit.a for seed in fits_v]) + np.mean([seed.fit.a for seed in fits_b])) / 2.0
        refits = [
            [fixed for seed in side if (fixed := refit_at_shared_a(seed, float(shared_a), x, y, fit_options, level))]
            for side in (fits_v, fits_b)
        ]
        delta_b = welch_interval(*([fixed.b for fixed in side] for side in refits), level)
        # decades of compute saved to half the shared gain: base's log10 C_mid minus the variant's
        delta_speed = welch_interval(*([fixed.log_c_mid for fixed in side] for side in refits[::-1]), level)
        if all(refits):
            b_noise = float(np.hypot(*(np.median([fixed.b_halfwidth for fixed in side]) for side in refits)))
            speed_noise = float(
                np.hypot(*(np.median([fixed.log_c_mid_halfwidth for fixed in side]) for side in refits))
            )
    a_call, b_call = ceiling_call(delta_a, margin), efficiency_call(delta_b, b_noise)
    speed_call = efficiency_call(delta_speed, speed_noise)
    reason = unpaired_reason(note, a_call, b_call, delta_a, margin)
    return knob_result(delta_a, delta_b, delta_speed, (a_call, b_call, speed_call), margin, (), reason)


def labelled_verdict(
    variant_seeds: Sequence[SeedFit],
    base_seeds: Sequence[SeedFit],
    margin: float,
    x: str | None,
    y: str | None,
    fit_options: dict,
    level: float,
) -> PairedVerdict:
    """Seeds with labels (logs from a manifest): when the variant's labels are the base's, seed s of
    the variant pairs with seed s of the base (paired_verdict); otherwise unpaired_verdict, with a
    note naming the seeds that have no partner."""
    labels_v, labels_b = [seed.label for seed in variant_seeds], [seed.label for seed in base_seeds]
    if sorted(labels_v) == sorted(labels_b):
        by_label = {seed.label: seed for seed in base_seeds}
        return paired_verdict(variant_seeds, [by_label[label] for label in labels_v], margin, x, y, fit_options, level)
    lonely_v = [label for label in labels_v if label not in labels_b]
    lonely_b = [label for label in labels_b if label not in labels_v]
    note = (
        f"unpaired: seeds {', '.join(lonely_v) or '-'} of the variant and {', '.join(lonely_b) or '-'} of the "
        "base have no partner, so dA and dB use Welch's interval over the seeds, not paired differences"
    )
    return unpaired_verdict(variant_seeds, base_seeds, margin, x, y, fit_options, level, note)
