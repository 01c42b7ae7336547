"""`scalerl demo`: train the built-in model with the ScaleRL preset, then check the forecast.

The curve R(C) (validation pass rate against cumulative training FLOPs) is fitted on the first
half of the run's compute only (scalerl.forecast.fitting.fit_sigmoid); the later evaluations are
held out and compared with the extrapolated curve and its prediction band, as the paper does
(Khatri, Madaan et al., arXiv 2510.13786, section 2: fit early, check later points in the band).
Writes `forecast.json` and `forecast.png` next to the run's metrics.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from scalerl.train.config.presets import preset_config
from scalerl.train.config.train_config import CONFIG_FILE_NAME, TrainConfig
from scalerl.train.records.metrics_log import METRICS_FILE_NAME

# The ScaleRL preset at the scale of the demo, on a built-in task with a ceiling below 1 that the
# policy reaches within the run (README, "What a newcomer gets"; docs/study.md):
# - 4 one-digit operands, every reduction modulo 10 (`7+8=5`): every step of every prompt sits at the
#   same offset, so the policy learns all prompts together. On plain sums the steps move with the
#   width of the running sum, the rare layouts are learned last, and the curve kept rising as
#   R0 + (1 - R0) C / (C + C_mid) to the end of any run that fits the demo (A = 1, a limit).
# - A quarter of the prompts (training and held out) have 12 operands, whose worked solution is
#   longer than the thinking budget: they stay unsolved but for a lucky one-digit guess after the
#   forced interruption, so the pass rate levels off near 0.75 + 0.25 / 10 ~ 0.78.
# - Greedy validation (one completion per held-out prompt, the most likely one, as verl validates;
#   512 prompts for the cost of the former 128 x 4 samples): the sampled pass rate keeps a slow
#   tail as the policy sharpens; the greedy one levels off when every solvable prompt is solved.
# - 250 steps: the held-out pass rate levels off from step ~80-100; later, no-positive-resampling
#   has retired most solvable prompts, the pool is mostly the unsolvable quarter, and the policy's
#   entropy rises (seen from step ~300 in a 400-step run).
DEMO_OVERRIDES: tuple[str, ...] = (
    "max_steps=250",
    "eval_every=10",
    "model.warmstart_stop_pass_rate=0.2",
    "task.modulus=10",
    "task.hard_fraction=0.25",
    "task.num_val_prompts=512",
    "task.num_train_prompts=6000",
    "eval_prompts=512",
    "eval_samples_per_prompt=1",
    "eval_greedy=true",
    "checkpoint_every=20",
)
FORECAST_FILE_NAME = "forecast.json"
PLOT_FILE_NAME = "forecast.png"


@dataclass(frozen=True)
class HeldOutPoint:
    """One later evaluation compared with the forecast made from the first part of the run."""

    flops: float
    observed: float
    predicted: float
    lower: float
    upper: float

    @property
    def inside_band(self) -> bool:
        return self.lower <= self.observed <= self.upper

    @property
    def abs_error(self) -> float:
        return abs(self.predicted - self.observed)


@dataclass(frozen=True)
class DemoReport:
    """The fit on the early part of the run and how it predicted the rest."""

    fit: object  # scalerl.forecast.result.FitResult
    fit_until_flops: float
    level: float
    held_out: tuple[HeldOutPoint, ...]
    train_seconds: float
    whole: object = None  # FitResult on every evaluation (None when it cannot be fitted)

    @property
    def mean_abs_error(self) -> float:
        return float(np.mean([p.abs_error for p in self.held_out])) if self.held_out else float("nan")

    @property
    def max_abs_error(self) -> float:
        return float(np.max([p.abs_error for p in self.held_out])) if self.held_out else float("nan")

    @property
    def band_coverage(self) -> float:
        return float(np.mean([p.inside_band for p in self.held_out])) if self.held_out else float("nan")


def demo_config(overrides: Sequence[str] = ()) -> TrainConfig:
    """The `scalerl` preset with the demo's run length, then the user's overrides."""
    return preset_config("scalerl", [*DEMO_OVERRIDES, *overrides])


def forecast_from_metrics(
    metrics_path: Path, *, fit_fraction: float = 0.5, level: float = 0.8, train_seconds: float = float("nan")
) -> DemoReport:
    """Fit R(flops) on points with flops <= fit_fraction * max flops; compare the rest."""
    from scalerl.forecast.fitting import fit_sigmoid
    from scalerl.forecast.readers import read_curve

    curve = read_curve(metrics_path, x="flops", y="val_pass_rate")
    fit_until = fit_fraction * float(np.max(curve.compute))
    in_fit = curve.compute <= fit_until
    result = fit_sigmoid(curve.compute[in_fit], curve.reward[in_fit], level=level)
    later_compute, later_reward = curve.compute[~in_fit], curve.reward[~in_fit]
    points: tuple[HeldOutPoint, ...] = ()
    if later_compute.size:
        predicted = result.predict(later_compute)
        lower, upper = result.interval(later_compute, level=level)
        points = tuple(
            HeldOutPoint(float(c), float(r), float(p), float(lo), float(hi))
            for c, r, p, lo, hi in zip(later_compute, later_reward, predicted, lower, upper)
        )
    return DemoReport(result, fit_until, level, points, train_seconds, _fit_whole(curve, level))


def _fit_whole(curve, level: float):
    """The sigmoid on every evaluation, as `scalerl fit` gives it; None when it cannot be fitted."""
    from scalerl.errors import FitError
    from scalerl.forecast.fitting import fit_sigmoid

    try:
        return fit_sigmoid(curve.compute, curve.reward, level=level)
    except FitError:
        return None


def report_to_dict(report: DemoReport) -> dict:
    """forecast.json: the fit in the CLI's JSON shape plus the held-out comparison."""
    fit_dict = report.fit.to_dict(report.level, predict_at=[p.flops for p in report.held_out])
    held_out = [
        {
            "flops": p.flops,
            "observed": p.observed,
            "predicted": p.predicted,
            "lo": p.lower,
            "hi": p.upper,
            "inside_band": p.inside_band,
        }
        for p in report.held_out
    ]
    return {
        "x": "flops",
        "y": "val_pass_rate",
        "fit_until_flops": report.fit_until_flops,
        "fit": fit_dict,
        "held_out": held_out,
        "mean_abs_error": _finite_or_none(report.mean_abs_error),
        "max_abs_error": _finite_or_none(report.max_abs_error),
        "band_coverage": _finite_or_none(report.band_coverage),
        "train_seconds": _finite_or_none(report.train_seconds),
        "fit_all_points": None if report.whole is None else report.whole.to_dict(report.level),
    }


def _finite_or_none(value: float):
    return float(value) if np.isfinite(value) else None


def write_outputs(report: DemoReport, run_dir: Path) -> tuple[Path, Path]:
    """forecast.json and forecast.png in the run directory."""
    from scalerl.report.plotting import plot_fit

    json_path = run_dir / FORECAST_FILE_NAME
    json_path.write_text(json.dumps(report_to_dict(report), indent=2, allow_nan=False) + "\n")
    held_out = (np.array([p.flops for p in report.held_out]), np.array([p.observed for p in report.held_out]))
    plot_path = plot_fit(
        report.fit,
        run_dir / PLOT_FILE_NAME,
        held_out=held_out,
        level=report.level,
        x_label="training FLOPs",
        y_label="validation pass rate",
    )
    return json_path, plot_path


def train_demo(out_dir: Path, overrides: Sequence[str] = (), *, show_progress: bool = True) -> float:
    """Train (or resume an unfinished demo run in `out_dir`); return the seconds it took.
    KeyboardInterrupt when Ctrl-C stopped the run (its checkpoint written)."""
    from scalerl.train.trainer import train

    out_dir = Path(out_dir)
    started = time.perf_counter()
    result = train(
        demo_config(overrides), out_dir, resume=(out_dir / CONFIG_FILE_NAME).exists(), show_progress=show_progress
    )
    if result.interrupted:
        raise KeyboardInterrupt  # Ctrl-C checkpointed the run: no forecast; rerunning the demo resumes it
    return time.perf_counter() - started


def forecast_demo(
    out_dir: Path, *, fit_fraction: float = 0.5, level: float = 0.8, train_seconds: float = float("nan")
) -> DemoReport:
    """Fit the trained demo's first part, compare the rest, write forecast.json/png.

    FitError when the run is too short (or flat) to fit: the caller says so, it is not a crash."""
    report = forecast_from_metrics(
        Path(out_dir) / METRICS_FILE_NAME, fit_fraction=fit_fraction, level=level, train_seconds=train_seconds
    )
    write_outputs(report, Path(out_dir))
    return report


def render_report(report: DemoReport, console) -> None:
    """Rich tables: fitted parameters, then predicted vs observed on the held-out evaluations."""
    from rich.table import Table

    fit = report.fit
    intervals = fit.conf_int(report.level)
    params = Table(title=f"sigmoid fitted on flops <= {report.fit_until_flops:.3g}")
    for column in ("parameter", "estimate", f"{report.level:.0%} interval"):
        params.add_column(column)
    for name, value in (("A", fit.a), ("B", fit.b), ("C_mid", fit.c_mid)):
        lo, hi = intervals[name]
        params.add_row(name, f"{value:.4g}", f"[{lo:.4g}, {hi:.4g}]")
    params.add_row("R0", f"{fit.r0:.4g}", "fixed (step 0)")
    console.print(params)
    held = Table(title="forecast vs later evaluations (held out)")
    for column in ("flops", "observed", "predicted", f"{report.level:.0%} band", "inside"):
        held.add_column(column)
    for point in report.held_out:
        held.add_row(
            f"{point.flops:.3g}",
            f"{point.observed:.3f}",
            f"{point.predicted:.3f}",
            f"[{point.lower:.3f}, {point.upper:.3f}]",
            "yes" if point.inside_band else "[red]no",
        )
    console.print(held)
    console.print(
        f"mean |error| {report.mean_abs_error:.3f}, max |error| {report.max_abs_error:.3f}, "
        f"band coverage {report.band_coverage:.0%}"
    )
    for warning in fit.warnings:
        console.print(f"[yellow]warning: {warning}")
    if report.whole is not None:
        console.print(whole_run_line(report.whole, report.level), highlight=False, soft_wrap=True)


def whole_run_line(whole, level: float) -> str:
    """The fit on every evaluation: A with its interval, and how far the run would have to go for A
    to be read to the paper's margin (FitResult.compute_near_ceiling)."""
    lo, hi = whole.conf_int(level)["A"]
    limit = " (a limit, not an estimate)" if whole.ceiling_at_bound else ""
    return (
        f"fitted on every evaluation: A = {whole.a:.3f}{limit} [{lo:.3f}, {hi:.3f}]; "
        f"run length: {whole.run_length_text(level=level)}"
    )
