"""Report of `scalerl ablate` (and its alias `scalerl study`): fit every seed of every variant,
pair seed i of each variant with seed i of the base, and give each knob the paired verdict of
scalerl.study.paired (moves the ceiling / moves efficiency only / no measurable effect at the
margin / undecided) with the agreement of the seed pairs. Torch-free.

Per variant the report gives A, B and C_mid averaged over the fitted seeds with an interval
(scalerl.study.seed_fits), and, for every variant but the base, the knob's verdict
(scalerl.study.knob_verdicts, from the seed pairs of scalerl.study.seed_pairs).
Logs read from a manifest (`scalerl ablate --from-logs`) carry seed labels: seeds pair by label;
a variant whose seeds do not match the base's is judged unpaired, with Welch's interval over the
seeds (said in its reason, never silently paired).
Khatri, Madaan et al., arXiv 2510.13786, sections 2 and 5.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from scalerl.errors import InputError
from scalerl.forecast.result import FitResult
from scalerl.study.knob_verdicts import PairedVerdict, labelled_verdict, paired_verdict
from scalerl.study.paired import PAPER_MARGIN, VERDICT_LEVEL
from scalerl.study.run_curves import ReportRun, VariantFit, fit_variant
from scalerl.study.seed_fits import SeedFit, fit_seed, parameter_summaries


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
