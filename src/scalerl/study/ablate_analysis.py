"""Report of `scalerl ablate` (and its alias `scalerl study`): fit every seed of every variant,
pair seed i of each variant with seed i of the base, and give each knob the paired verdict of
scalerl.study.paired (moves the ceiling / moves efficiency only / no measurable effect at the
margin / undecided) with the agreement of the seed pairs. Torch-free.

Per variant the table gives A, B and C_mid averaged over the fitted seeds with an interval: for
n >= 2 seeds the Student-t interval of the mean, mean +- t_{(1+level)/2, n-1} s / sqrt(n) (C_mid
in log space: geometric mean); for one seed the fit's own posterior interval.
Logs read from a manifest (`scalerl ablate --from-logs`) carry seed labels: seeds pair by label;
a variant whose seeds do not match the base's is judged unpaired, with Welch's interval over the
seeds (said in its reason, never silently paired).
Khatri, Madaan et al., arXiv 2510.13786, sections 2 and 5.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from scipy import stats

from scalerl.errors import FitError, InputError
from scalerl.forecast.fitting import fit_sigmoid
from scalerl.forecast.result import FitResult
from scalerl.study.paired import (
    PAPER_MARGIN,
    UNDECIDED,
    VERDICT_LEVEL,
    Agreement,
    PairedInterval,
    ceiling_call,
    efficiency_call,
    knob_verdict,
    pair_verdict,
    paired_differences,
    paired_t_interval,
    single_pair_interval,
    verdict_agreement,
    verdict_label,
    welch_interval,
)
from scalerl.study.run_curves import LogSource, ReportRun, VariantFit, fit_variant, read_source, read_warm_start

PARAMETERS = ("A", "B", "C_mid")
QUICK_DRAWS = 40  # shared-A refits: B and a rough interval of B per seed pair


@dataclass(frozen=True)
class SeedFit:
    """One seed's curve fitted (fit) or the reason it could not be (error), the warm start its run
    started from (None when not recorded) and its label (logs from a manifest; else None)."""

    metrics_path: Path | LogSource
    fit: FitResult | None
    error: str | None
    warm_start: dict | None = None
    label: str | None = None


@dataclass(frozen=True)
class ParamSummary:
    """A parameter over the fitted seeds: mean and interval (see the module docstring), n seeds."""

    mean: float
    lo: float
    hi: float
    n: int


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


@dataclass(frozen=True)
class VariantResult:
    """A variant's per-seed fits, their summary, and (not for the base) its paired verdict."""

    run: ReportRun
    seeds: tuple[SeedFit, ...]
    params: dict  # name -> ParamSummary (empty when no seed was fitted)
    verdict: PairedVerdict | None

    @property
    def fitted(self) -> list[FitResult]:
        return [seed.fit for seed in self.seeds if seed.fit is not None]


@dataclass(frozen=True)
class AblationReport:
    kind: str  # "leave-one-out" | "recipes" | "sweep"
    sweep_knob: str | None
    base: str
    x_name: str
    y_name: str
    level: float
    verdict_level: float
    seeds: int
    margin: float
    margin_source: str  # "given" | "paper default"
    variants: tuple[VariantResult, ...]
    mean_curve_fits: tuple[VariantFit, ...]  # the seed-mean curve of each variant, for the figure


def fit_seed(
    path: Path | LogSource, x: str | None, y: str | None, fit_options: dict, label: str | None = None
) -> SeedFit:
    """Fit one seed's log; no data or no fit becomes `error` (the study goes on)."""
    warm_start = read_warm_start(path)
    try:
        curve = read_source(path, x, y)
    except InputError as error:
        return SeedFit(path, None, f"no data: {error}", warm_start, label)
    try:
        return SeedFit(path, fit_sigmoid(curve.compute, curve.reward, **fit_options), None, warm_start, label)
    except (FitError, InputError) as error:
        return SeedFit(path, None, f"fit failed: {error}", warm_start, label)


def summarise(
    values: Sequence[float], level: float, single_interval: tuple[float, float] | None, log_scale: bool = False
) -> ParamSummary:
    """Mean and Student-t interval of the mean over seeds (in log space if `log_scale`); one seed:
    its own interval `single_interval`."""
    values = np.asarray(values, dtype=float)
    if values.size == 1:
        lo, hi = single_interval if single_interval is not None else (values[0], values[0])
        return ParamSummary(float(values[0]), float(lo), float(hi), 1)
    work = np.log(values) if log_scale else values
    half = stats.t.ppf((1.0 + level) / 2.0, values.size - 1) * work.std(ddof=1) / np.sqrt(values.size)
    mean, lo, hi = work.mean(), work.mean() - half, work.mean() + half
    if log_scale:
        mean, lo, hi = np.exp(mean), np.exp(lo), np.exp(hi)
    return ParamSummary(float(mean), float(lo), float(hi), int(values.size))


def parameter_summaries(fits: Sequence[FitResult], level: float) -> dict:
    """A, B, C_mid summarised over the fitted seeds; {} when none."""
    if not fits:
        return {}
    single = fits[0].conf_int(level) if len(fits) == 1 else {}
    return {
        name: summarise([fit.params()[name] for fit in fits], level, single.get(name), name == "C_mid")
        for name in PARAMETERS
    }


def _halfwidth(fit: FitResult, name: str, level: float) -> float:
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
        fixed.b, _halfwidth(fixed, "B", level), float(np.log10(fixed.c_mid)), float(np.log10(c_hi / c_lo) / 2.0)
    )


def pair_noise(halfwidth_v: float, halfwidth_b: float, delta_shared: float, delta_own: float) -> float:
    """h = sqrt(h_v^2 + h_b^2) + |d(shared A) - d(own A)|: the two refits' interval half-widths
    combined plus the shift that fixing both ceilings to their mean put into the difference."""
    return float(np.hypot(halfwidth_v, halfwidth_b) + abs(delta_shared - delta_own))


def _median_or_none(values: list) -> float | None:
    kept = [value for value in values if value is not None]
    return float(np.median(kept)) if kept else None


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
        single_a = float(np.hypot(_halfwidth(fit_v, "A", level), _halfwidth(fit_b, "A", level)))
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
    limits_only = bool(fitted) and all(pair.ceilings_at_bound for pair, _, _ in fitted)
    unmeasured_only = bool(fitted) and not any(pair.measures_a for pair, _, _ in fitted)
    b_text = (
        f"; dB at the shared A: {delta_b.mean:+.2f} [{delta_b.lo:+.2f}, {delta_b.hi:+.2f}]"
        if np.isfinite(delta_b.lo)
        else ""
    )
    verdict, direction = knob_verdict(a_call, b_call, speed_call)
    agreement = verdict_agreement([pair.verdict for pair in pairs if pair.delta_a is not None], (verdict, direction))
    reason = None
    if not fitted:
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
    left_out = sum(not pair.measures_a for pair, _, _ in fitted)
    if left_out and not unmeasured_only:
        note = (
            f"{left_out} of {len(fitted)} seed pairs left out of dA (a run not bent over, or both ceilings "
            f"limits); the ceiling is judged on the other {len(fitted) - left_out}"
        )
        reason = note if reason is None else f"{reason}; {note}"
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
    verdict, direction = knob_verdict(a_call, b_call, speed_call)
    reason = note
    if a_call == "unclear":
        reason += (
            f"; the dA interval [{delta_a.lo:+.3f}, {delta_a.hi:+.3f}] crosses the margin +-{margin:.3g}"
            if np.isfinite(delta_a.lo)
            else "; fewer than two seeds with a measured ceiling (bent over, not a limit) on a side: no interval for dA"
        )
    elif a_call == "within" and b_call == "unclear":
        reason += "; no interval for dB at the shared A"
    return PairedVerdict(
        verdict,
        direction,
        verdict_label(verdict, direction, margin),
        margin,
        delta_a,
        delta_b if np.isfinite(delta_b.mean) else None,
        a_call,
        b_call,
        (),
        verdict_agreement([], (verdict, direction)),
        reason,
        delta_speed if np.isfinite(delta_speed.mean) else None,
        speed_call,
    )


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


def build_ablation_report(
    runs: Sequence[ReportRun],
    *,
    kind: str = "leave-one-out",
    sweep_knob: str | None = None,
    seeds: int = 1,
    x: str = "flops",
    y: str = "val_pass_rate",
    margin: float | None = None,
    level: float = 0.8,
    verdict_level: float = VERDICT_LEVEL,
    reward_range: tuple[float, float] | None = (0.0, 1.0),
) -> AblationReport:
    """Fit every seed of every run and give each non-base run its paired verdict against the base
    (exactly one run is the base; seed i pairs with seed i, or, for runs with seed labels, seed s
    with seed s: labelled_verdict). Margin on A: given, else the paper's 0.02 of the reward's unit
    (forecast.reward_unit: 0.02 for pass rates; `reward_range` None: an open range)."""
    bases = [run for run in runs if run.is_base]
    if len(bases) != 1:
        raise InputError(f"an ablation needs exactly one base run, got {len(bases)}")
    if margin is not None and not margin >= 0.0:
        raise InputError(f"margin must be >= 0, got {margin:g}")
    if not 0.0 < verdict_level < 1.0:
        raise InputError(f"verdict level must be in (0, 1), got {verdict_level:g}")
    fit_options = {"level": level, "reward_range": None if reward_range is None else tuple(reward_range)}
    seed_fits = {
        run.slug: tuple(
            fit_seed(path, x, y, fit_options, label)
            for path, label in zip(run.metrics_paths, run.seed_labels or [None] * len(run.metrics_paths))
        )
        for run in runs
    }
    unit = max(
        (seed.fit.reward_unit for fits in seed_fits.values() for seed in fits if seed.fit is not None), default=1.0
    )
    study_margin, source = (PAPER_MARGIN * unit, "paper default") if margin is None else (float(margin), "given")
    base_seeds = seed_fits[bases[0].slug]
    judge = labelled_verdict if bases[0].seed_labels is not None else paired_verdict
    results = []
    for run in runs:
        fitted = [seed.fit for seed in seed_fits[run.slug] if seed.fit is not None]
        verdict = (
            None
            if run.is_base
            else judge(seed_fits[run.slug], base_seeds, study_margin, x, y, fit_options, verdict_level)
        )
        results.append(VariantResult(run, seed_fits[run.slug], parameter_summaries(fitted, level), verdict))
    mean_fits = tuple(fit_variant(run, x, y, fit_options) for run in runs)
    return AblationReport(
        kind,
        sweep_knob,
        bases[0].slug,
        x,
        y,
        float(level),
        float(verdict_level),
        int(seeds),
        study_margin,
        source,
        tuple(results),
        mean_fits,
    )


def warm_start_summary(report: AblationReport) -> dict:
    """Which warm-started weights the runs started from: each digest with the runs that used it,
    whether every recorded run shares one, and the runs with no record."""
    users: dict[str, list[str]] = {}
    missing = []
    for item in report.variants:
        for index, seed in enumerate(item.seeds):
            name = f"{item.run.slug}/seed-{index}"
            digest = (seed.warm_start or {}).get("weights_sha256")
            if digest:
                users.setdefault(digest, []).append(name)
            else:
                missing.append(name)
    return {"digests": users, "shared_by_all": len(users) == 1 and not missing, "not_recorded": missing}
