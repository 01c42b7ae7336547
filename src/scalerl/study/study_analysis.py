"""Report of a recipe study: fit every variant's curve, compare each with the base, say which knob
moved the ceiling A or the efficiency B. Torch-free, so it runs on any finished runs' metrics.jsonl.

Rule (Khatri, Madaan et al., arXiv 2510.13786, sections 2 and 5): fit R(C) = R0 + (A - R0) /
(1 + (C_mid / C)^B) to each run; a pair whose ceilings A differ by more than the margin (0.02) is
decided by the ceiling, otherwise both are refitted with A fixed to the pair's mean and the higher
B is the more efficient (scalerl.forecast.compare.compare_runs on the pair).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import Sequence

import numpy as np

from scalerl.errors import FitError, InputError
from scalerl.forecast.compare import Comparison, compare_runs
from scalerl.forecast.fitting import fit_sigmoid
from scalerl.forecast.readers import read_curve
from scalerl.report.console import json_text
from scalerl.forecast.result import FitResult

STUDY_JSON, STUDY_MARKDOWN, STUDY_FIGURE = "study.json", "study.md", "study.png"

# Which parameter the paper found each knob to move (section 5): loss type, FP32 head and batch
# size move the ceiling A; aggregation, advantage normalisation, curriculum and zero-variance
# filtering mainly move the efficiency B. Keyed by the config field's leaf name.
PAPER_AXIS_BY_FIELD = {
    "loss": "A", "fp32_head": "A", "prompts_per_step": "A",
    "aggregation": "B", "advantage_norm": "B", "npr": "B", "npr_threshold": "B",
    "zero_variance_filter": "B",
}


@dataclass(frozen=True)
class ReportRun:
    """One variant as the report sees it: its name, the knob it flips, its metrics file(s) (one per seed)."""

    slug: str
    name: str
    knob: str | None
    is_base: bool
    metrics_paths: tuple[Path, ...]


@dataclass(frozen=True)
class VariantFit:
    """A variant's (seed-mean) curve and its fit, or why it could not be fitted."""

    run: ReportRun
    compute: np.ndarray | None
    reward: np.ndarray | None
    fit: FitResult | None
    error: str | None


@dataclass(frozen=True)
class VersusBase:
    """How a variant compares with the base: which parameter decided and in which direction."""

    verdict: str  # "higher ceiling" | "lower ceiling" | "more efficient" | "less efficient" | "not compared"
    decided_by: str | None  # "ceiling" | "efficiency" | None
    delta_a: float | None  # variant A - base A (free fits)
    b_at_shared_a: tuple[float, float] | None  # (variant B, base B) with A fixed to the pair's mean
    shared_a: float | None
    note: str | None = None


@dataclass(frozen=True)
class StudyReport:
    base: str
    x_name: str
    y_name: str
    margin: float
    level: float
    fits: tuple[VariantFit, ...]
    versus_base: dict  # slug -> VersusBase (every non-base variant)


def paper_axis(knob: str | None) -> str | None:
    """'A' or 'B': the parameter the paper found this `key=value` knob to move; None if unknown."""
    if not knob or "=" not in knob:
        return None
    return PAPER_AXIS_BY_FIELD.get(knob.split("=", 1)[0].strip().rsplit(".", 1)[-1])


def seed_mean_curve(metrics_paths: Sequence[Path], x: str, y: str) -> tuple[np.ndarray, np.ndarray]:
    """The curve of one run, or the mean over seeds: the i-th evaluations of all seeds averaged
    (same config, so the same evaluation steps), cut to the shortest seed."""
    curves = [read_curve(path, x=x, y=y) for path in metrics_paths]
    length = min(len(curve) for curve in curves)
    compute = np.mean([curve.compute[:length] for curve in curves], axis=0)
    reward = np.mean([curve.reward[:length] for curve in curves], axis=0)
    return compute, reward


def fit_variant(run: ReportRun, x: str, y: str, fit_options: dict) -> VariantFit:
    """Fit one variant; a missing log or a curve that cannot be fitted becomes `error`, not a crash."""
    try:
        compute, reward = seed_mean_curve(run.metrics_paths, x, y)
    except InputError as error:
        return VariantFit(run, None, None, None, f"no data: {error}")
    try:
        fit = fit_sigmoid(compute, reward, **fit_options)
    except (FitError, InputError) as error:
        return VariantFit(run, compute, reward, None, f"fit failed: {error}")
    return VariantFit(run, compute, reward, fit, None)


def verdict_from_comparison(comparison: Comparison, variant: str, base: str) -> VersusBase:
    """Read the pair comparison: decided by the ceiling -> higher/lower ceiling (sign of A_v - A_b);
    by the efficiency -> more/less efficient (sign of B_v - B_b at the shared A)."""
    delta_a = comparison.fits[variant].a - comparison.fits[base].a
    if comparison.decided_by == "ceiling":
        verdict = "higher ceiling" if delta_a > 0 else "lower ceiling"
        return VersusBase(verdict, "ceiling", delta_a, None, None)
    fixed_variant, fixed_base = comparison.fixed_ceiling_fits[variant], comparison.fixed_ceiling_fits[base]
    verdict = "more efficient" if fixed_variant.b > fixed_base.b else "less efficient"
    return VersusBase(verdict, "efficiency", delta_a, (fixed_variant.b, fixed_base.b), fixed_variant.a)


def compare_with_base(base: VariantFit, variant: VariantFit, margin: float, fit_options: dict) -> VersusBase:
    """The paper's pair rule between a variant and the base (compare_runs); failures become a note."""
    if variant.fit is None or base.fit is None:
        reason = variant.error if variant.fit is None else f"base {base.error}"
        return VersusBase("not compared", None, None, None, None, note=reason)
    curves = {variant.run.slug: (variant.compute, variant.reward), base.run.slug: (base.compute, base.reward)}
    try:
        comparison = compare_runs(curves, margin=margin, **fit_options)
    except (FitError, InputError) as error:
        return VersusBase("not compared", None, None, None, None, note=f"comparison failed: {error}")
    versus = verdict_from_comparison(comparison, variant.run.slug, base.run.slug)
    if not (variant.fit.ceiling_identified and base.fit.ceiling_identified):
        versus = replace(versus, note="a ceiling is not identified: the A comparison is uncertain")
    return versus


def build_study_report(runs: Sequence[ReportRun], *, x: str = "flops", y: str = "val_pass_rate",
                       margin: float = 0.02, level: float = 0.8,
                       reward_range: tuple[float, float] = (0.0, 1.0)) -> StudyReport:
    """Fit every run and compare each non-base run with the base (exactly one run is the base)."""
    bases = [run for run in runs if run.is_base]
    if len(bases) != 1:
        raise InputError(f"a study needs exactly one base run, got {len(bases)}")
    if not 0.0 <= margin < 1.0:
        raise InputError(f"margin must be in [0, 1), got {margin:g}")
    fit_options = {"level": level, "reward_range": tuple(reward_range)}
    fits = tuple(fit_variant(run, x, y, fit_options) for run in runs)
    base_fit = next(fit for fit in fits if fit.run.is_base)
    versus = {fit.run.slug: compare_with_base(base_fit, fit, margin, fit_options)
              for fit in fits if not fit.run.is_base}
    return StudyReport(bases[0].slug, x, y, float(margin), float(level), fits, versus)


# --- views: JSON, markdown, rich table, figure ----------------------------------------------------


def _fit_payload(fit: FitResult | None, level: float) -> dict | None:
    if fit is None:
        return None
    intervals = {name: list(bounds) for name, bounds in fit.conf_int(level).items()}
    return {"params": fit.params(), "intervals": intervals, "ceiling_identified": bool(fit.ceiling_identified),
            "n_points": int(fit.n_points), "warnings": list(fit.warnings)}


def report_payload(report: StudyReport) -> dict:
    """JSON view (study.json): settings, then one entry per variant with its fit and its verdict."""
    variants = []
    for item in report.fits:
        versus = report.versus_base.get(item.run.slug)
        variants.append({
            "slug": item.run.slug, "name": item.run.name, "knob": item.run.knob, "is_base": item.run.is_base,
            "metrics": [str(path) for path in item.run.metrics_paths],
            "fit": _fit_payload(item.fit, report.level), "error": item.error,
            "paper_moves": paper_axis(item.run.knob),
            "versus_base": None if versus is None else {
                "verdict": versus.verdict, "decided_by": versus.decided_by, "delta_A": versus.delta_a,
                "B_at_shared_A": None if versus.b_at_shared_a is None else {
                    "variant": versus.b_at_shared_a[0], "base": versus.b_at_shared_a[1]},
                "shared_A": versus.shared_a, "note": versus.note},
        })
    return {"base": report.base, "x": report.x_name, "y": report.y_name, "margin": report.margin,
            "level": report.level, "variants": variants}


def short_verdict(item: VariantFit, versus: VersusBase | None) -> str:
    """The verdict cell: 'base', 'higher ceiling', ..., 'fit failed', 'no data' (details in notes);
    '*' marks a comparison whose ceilings are not both identified."""
    if item.error is not None:
        return item.error.split(":", 1)[0] if not item.run.is_base else f"base, {item.error.split(':', 1)[0]}"
    if item.run.is_base:
        return "base"
    return versus.verdict + (" *" if versus.note and versus.decided_by else "")


def _row_cells(item: VariantFit, versus: VersusBase | None, level: float) -> list[str]:
    """Cells: variant, knob, A [interval], B, C_mid, ceiling identified, verdict, decided by, paper."""
    knob = item.run.knob or ("base" if item.run.is_base else "-")
    fit_cells = ["-", "-", "-", "-"]
    if item.fit is not None:
        fit = item.fit
        a_lo, a_hi = fit.conf_int(level)["A"]
        fit_cells = [f"{fit.a:.3f} [{a_lo:.3f}, {a_hi:.3f}]", f"{fit.b:.2f}", f"{fit.c_mid:.3g}",
                     "yes" if fit.ceiling_identified else "no"]
    decided = "" if versus is None else versus.decided_by or ""
    return [item.run.slug, knob, *fit_cells, short_verdict(item, versus), decided,
            paper_axis(item.run.knob) or "-"]


def report_notes(report: StudyReport) -> list[str]:
    """Why a variant has no fit or no comparison, and fit warnings, one line each."""
    notes = []
    for item in report.fits:
        versus = report.versus_base.get(item.run.slug)
        if item.error is not None:
            notes.append(f"{item.run.slug}: {item.error}")
        elif versus is not None and versus.note:
            notes.append(f"{item.run.slug}: {versus.note}")
        if item.fit is not None:
            notes += [f"{item.run.slug}: {warning}" for warning in item.fit.warnings]
    return notes


TABLE_COLUMNS = ("variant", "knob", "A [interval]", "B", "C_mid", "ceiling identified", "verdict vs base",
                 "decided by", "paper: moves")
NO_WRAP_COLUMNS = ("A [interval]", "B", "C_mid", "verdict vs base", "decided by")


def study_table(report: StudyReport):
    """The rich table of the study (one row per variant, base first as planned)."""
    from rich.markup import escape
    from rich.table import Table

    table = Table(title=f"study: {report.y_name} vs {report.x_name}, margin {report.margin:g}, "
                        f"{report.level:.0%} intervals", title_justify="left")
    for column in TABLE_COLUMNS:
        table.add_column(escape(column), no_wrap=column in NO_WRAP_COLUMNS, overflow="fold")
    for item in report.fits:
        cells = _row_cells(item, report.versus_base.get(item.run.slug), report.level)
        table.add_row(*(escape(cell) for cell in cells))
    return table


def knob_sentence(item: VariantFit, versus: VersusBase, base: str) -> str:
    """`rl.loss=dapo` lowered the ceiling A by 0.050 (decided by the ceiling; the paper: moves A)."""
    knob = item.run.knob or item.run.slug
    expected = paper_axis(item.run.knob)
    paper = f"; the paper: this knob moves {expected}" if expected else ""
    if versus.decided_by == "ceiling":
        verb = "raised" if versus.delta_a > 0 else "lowered"
        return f"`{knob}` {verb} the ceiling A by {abs(versus.delta_a):.3f} vs {base}{paper}."
    if versus.decided_by == "efficiency":
        b_variant, b_base = versus.b_at_shared_a
        word = "raised" if b_variant > b_base else "lowered"
        return (f"`{knob}` kept the ceiling (|dA| = {abs(versus.delta_a):.3f} within the margin) and {word} "
                f"the efficiency B from {b_base:.3f} to {b_variant:.3f} at A = {versus.shared_a:.3f}{paper}.")
    return f"`{knob}`: not compared ({versus.note})."


def markdown_text(report: StudyReport) -> str:
    """study.md: the table and one sentence per knob."""
    lines = [f"# Study: {report.y_name} vs {report.x_name}", "",
             f"Base: `{report.base}`. Rule: ceilings A more than {report.margin:g} apart decide; otherwise "
             "A is fixed to the pair's mean and the higher B is more efficient (arXiv 2510.13786).", "",
             "| " + " | ".join(TABLE_COLUMNS) + " |", "|" + "---|" * len(TABLE_COLUMNS)]
    for item in report.fits:
        cells = _row_cells(item, report.versus_base.get(item.run.slug), report.level)
        lines.append("| " + " | ".join(cell.replace("|", "/") for cell in cells) + " |")
    lines += ["", "## What each knob moved", ""]
    for item in report.fits:
        if not item.run.is_base:
            lines.append(f"- {knob_sentence(item, report.versus_base[item.run.slug], report.base)}")
    notes = report_notes(report)
    if notes:
        lines += ["", "## Notes", "", *[f"- {note}" for note in notes]]
    return "\n".join(lines) + "\n"


def points_not_fitted(item: VariantFit) -> tuple[np.ndarray, np.ndarray]:
    """The curve's points the fit left out (the R0 point, points after a collapse), for the figure."""
    unused = ~np.isin(item.compute, item.fit.compute)
    return item.compute[unused], item.reward[unused]


def write_study_outputs(report: StudyReport, out_dir: str | Path) -> list[Path]:
    """Write study.json, study.md and (when any variant was fitted) study.png into `out_dir`."""
    out_dir = Path(out_dir)
    written = [out_dir / STUDY_JSON, out_dir / STUDY_MARKDOWN]
    written[0].write_text(json_text(report_payload(report)) + "\n")
    written[1].write_text(markdown_text(report))
    fitted = {item.run.slug: item.fit for item in report.fits if item.fit is not None}
    if fitted:
        from scalerl.report.plotting import RunPoints, plot_comparison

        points = {item.run.slug: RunPoints(not_fitted=points_not_fitted(item)) for item in report.fits
                  if item.fit is not None}
        written.append(plot_comparison(fitted, out_dir / STUDY_FIGURE, points=points, level=report.level,
                                       x_label=report.x_name, y_label=report.y_name,
                                       title=f"study vs base {report.base}"))
    return written

