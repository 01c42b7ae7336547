"""Report of `scalerl ablate`: fit every seed of every variant, measure the seed-to-seed spread of
A, and classify each knob with the paper's two-tier rule (scalerl.study.classify). Torch-free.

Per variant the table gives A, B and C_mid averaged over the fitted seeds with an interval: for
n >= 2 seeds the Student-t interval of the mean, mean +- t_{(1+level)/2, n-1} s / sqrt(n) (C_mid
in log space: geometric mean); for one seed the fit's own bootstrap interval.
Khatri, Madaan et al., arXiv 2510.13786, sections 2 and 5.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import numpy as np
from scipy import stats

from scalerl.errors import FitError, InputError
from scalerl.study.classify import (
    KnobEffect,
    Margin,
    ceiling_effect,
    efficiency_effect,
    seed_spread_margin,
    shared_ceiling,
)
from scalerl.forecast.fitting import fit_sigmoid
from scalerl.forecast.readers import read_curve
from scalerl.forecast.result import FitResult
from scalerl.study.study_analysis import ReportRun, VariantFit, fit_variant

PARAMETERS = ("A", "B", "C_mid")
QUICK_BOOTSTRAP = 20  # shared-A refits of several seeds need only B itself, not its interval


@dataclass(frozen=True)
class SeedFit:
    """One seed's curve fitted (fit) or the reason it could not be (error)."""

    metrics_path: Path
    fit: FitResult | None
    error: str | None


@dataclass(frozen=True)
class ParamSummary:
    """A parameter over the fitted seeds: mean and interval (see the module docstring), n seeds."""

    mean: float
    lo: float
    hi: float
    n: int


@dataclass(frozen=True)
class VariantResult:
    """A variant's per-seed fits, their summary, and (not for the base) its verdict against the base."""

    run: ReportRun
    seeds: tuple[SeedFit, ...]
    params: dict  # name -> ParamSummary (empty when no seed was fitted)
    effect: KnobEffect | None
    shared_a: float | None = None
    b_at_shared_a: tuple[tuple[float, ...], tuple[float, ...]] | None = None  # (variant Bs, base Bs)

    @property
    def fitted(self) -> list[FitResult]:
        return [seed.fit for seed in self.seeds if seed.fit is not None]


@dataclass(frozen=True)
class AblationReport:
    kind: str  # "leave-one-out" | "sweep"
    sweep_knob: str | None
    base: str
    x_name: str
    y_name: str
    level: float
    seeds: int
    margin: Margin
    variants: tuple[VariantResult, ...]
    mean_curve_fits: tuple[VariantFit, ...]  # the seed-mean curve of each variant, for the figure


def fit_seed(path: Path, x: str, y: str, fit_options: dict) -> SeedFit:
    """Fit one seed's metrics.jsonl; no data or no fit becomes `error` (the study goes on)."""
    try:
        curve = read_curve(path, x=x, y=y)
    except InputError as error:
        return SeedFit(path, None, f"no data: {error}")
    try:
        return SeedFit(path, fit_sigmoid(curve.compute, curve.reward, **fit_options), None)
    except (FitError, InputError) as error:
        return SeedFit(path, None, f"fit failed: {error}")


def summarise(values: Sequence[float], level: float, single_interval: tuple[float, float] | None,
              log_scale: bool = False) -> ParamSummary:
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
    return {name: summarise([fit.params()[name] for fit in fits], level, single.get(name), name == "C_mid")
            for name in PARAMETERS}


def shared_a_b_values(seeds: Sequence[SeedFit], shared_a: float, x: str, y: str, fit_options: dict,
                      quick: bool) -> tuple[list[float], list[tuple[float, float]]]:
    """B of each fitted seed refitted with A fixed to `shared_a`, and its B interval; a seed whose
    curve cannot take that A (e.g. it lies above it) is left out."""
    options = {**fit_options, **({"n_bootstrap": QUICK_BOOTSTRAP} if quick else {})}
    b_values, intervals = [], []
    for seed in seeds:
        if seed.fit is None:
            continue
        curve = read_curve(seed.metrics_path, x=x, y=y)
        try:
            fixed = fit_sigmoid(curve.compute, curve.reward, fixed_a=shared_a, **options)
        except (FitError, InputError):
            continue
        b_values.append(fixed.b)
        intervals.append(fixed.conf_int(fit_options["level"])["B"])
    return b_values, intervals


def classify_against_base(variant_seeds, base_seeds, margin: float, x: str, y: str, fit_options: dict,
                          seeds: int) -> tuple[KnobEffect, float | None, tuple | None]:
    """Tier 1 on the per-seed ceilings; within the margin, tier 2 on B refitted with the pair's
    shared A. Returns (effect, shared A, (variant Bs, base Bs))."""
    variant_a = [seed.fit.a for seed in variant_seeds if seed.fit is not None]
    base_a = [seed.fit.a for seed in base_seeds if seed.fit is not None]
    decided = ceiling_effect(base_a, variant_a, margin)
    if decided is not None:
        return decided, None, None
    shared_a = shared_ceiling(base_a, variant_a)
    quick = seeds > 1
    variant_b, variant_intervals = shared_a_b_values(variant_seeds, shared_a, x, y, fit_options, quick)
    base_b, base_intervals = shared_a_b_values(base_seeds, shared_a, x, y, fit_options, quick)
    halfwidths = None
    if len(variant_b) == 1 and len(base_b) == 1:
        halfwidths = ((base_intervals[0][1] - base_intervals[0][0]) / 2,
                      (variant_intervals[0][1] - variant_intervals[0][0]) / 2)
    effect = efficiency_effect(float(np.mean(variant_a) - np.mean(base_a)), margin, base_b, variant_b,
                               interval_halfwidths=halfwidths)
    return effect, shared_a, (tuple(variant_b), tuple(base_b))


def build_ablation_report(runs: Sequence[ReportRun], *, kind: str = "leave-one-out", sweep_knob: str | None = None,
                          seeds: int = 1, x: str = "flops", y: str = "val_pass_rate", margin: float | None = None,
                          level: float = 0.8, reward_range: tuple[float, float] = (0.0, 1.0)) -> AblationReport:
    """Fit every seed of every run, set the margin (given, or from the seed spread of A), classify
    each non-base run against the base (exactly one run is the base)."""
    bases = [run for run in runs if run.is_base]
    if len(bases) != 1:
        raise InputError(f"an ablation needs exactly one base run, got {len(bases)}")
    if margin is not None and not 0.0 <= margin < 1.0:
        raise InputError(f"margin must be in [0, 1), got {margin:g}")
    fit_options = {"level": level, "reward_range": tuple(reward_range)}
    seed_fits = {run.slug: tuple(fit_seed(path, x, y, fit_options) for path in run.metrics_paths) for run in runs}
    if margin is None:
        a_by_run = {slug: [seed.fit.a for seed in fits if seed.fit is not None] for slug, fits in seed_fits.items()}
        study_margin = seed_spread_margin(a_by_run, seeds)
    else:
        study_margin = Margin(float(margin), "given", seeds=seeds)
    base_seeds = seed_fits[bases[0].slug]
    results = []
    for run in runs:
        fitted = [seed.fit for seed in seed_fits[run.slug] if seed.fit is not None]
        params = parameter_summaries(fitted, level)
        if run.is_base:
            results.append(VariantResult(run, seed_fits[run.slug], params, None))
            continue
        effect, shared_a, b_values = classify_against_base(seed_fits[run.slug], base_seeds, study_margin.value,
                                                           x, y, fit_options, seeds)
        results.append(VariantResult(run, seed_fits[run.slug], params, effect, shared_a, b_values))
    mean_fits = tuple(fit_variant(run, x, y, fit_options) for run in runs)
    return AblationReport(kind, sweep_knob, bases[0].slug, x, y, float(level), int(seeds), study_margin,
                          tuple(results), mean_fits)
