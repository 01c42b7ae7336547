"""Each seed of an ablation's variant fitted, and A, B and C_mid summarised over a variant's fitted
seeds: for n >= 2 seeds the mean and the Student-t interval of the mean,
mean +- t_{(1+level)/2, n-1} s / sqrt(n) (C_mid in log space: geometric mean); for one seed the
fit's own posterior interval. Torch-free.
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
from scalerl.study.run_curves import LogSource, read_source, read_warm_start

PARAMETERS = ("A", "B", "C_mid")


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
