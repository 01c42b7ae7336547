"""The runs of a study as its report reads them (one metrics.jsonl per seed, or any log the
forecast readers take, with its run / segment selectors: LogSource), their seed-mean curve and its
fit (for the figure), and what the paper found each knob to move. Torch-free.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from scalerl.errors import FitError, InputError
from scalerl.forecast.fitting import fit_sigmoid
from scalerl.forecast.readers import Curve, read_curve
from scalerl.forecast.readers.curve import curve_up_to
from scalerl.forecast.result import FitResult

# Which parameter the paper found each knob to move (section 5): loss type, FP32 head and batch
# size move the ceiling A; aggregation, advantage normalisation, curriculum and zero-variance
# filtering mainly move the efficiency B. Keyed by the config field's leaf name.
PAPER_AXIS_BY_FIELD = {
    "loss": "A",
    "fp32_head": "A",
    "prompts_per_step": "A",
    "aggregation": "B",
    "advantage_norm": "B",
    "npr": "B",
    "npr_threshold": "B",
    "zero_variance_filter": "B",
}


@dataclass(frozen=True)
class LogSource:
    """One seed's log outside a study directory: a file or folder any forecast reader takes, the
    run (`run`: a long-format file's series or a TensorBoard run; `group`: the column naming runs)
    and the 1-based `segment` of several runs appended in one file; `fit_until` / `fit_fraction`
    keep the first part of its compute (`ablate --from-logs --fit-fraction`: decide early)."""

    path: Path
    run: str | None = None
    segment: int | None = None
    group: str | None = None
    fit_until: float | None = None
    fit_fraction: float | None = None


def read_source(source: Path | LogSource, x: str | None, y: str | None) -> Curve:
    """The (compute, reward) curve of one seed: a metrics.jsonl path, or a LogSource with its selectors."""
    if isinstance(source, LogSource):
        curve = read_curve(source.path, x=x, y=y, run=source.run, group=source.group, segment=source.segment)
        return curve_up_to(curve, source.fit_until, source.fit_fraction)[0]
    return read_curve(source, x=x, y=y)


@dataclass(frozen=True)
class ReportRun:
    """One variant as the report sees it: its name, the knob it flips, its metrics file(s) (one per
    seed, a Path or a LogSource) and, for logs read from a manifest, each seed's label (seeds are
    then paired by label, not by index)."""

    slug: str
    name: str
    knob: str | None
    is_base: bool
    metrics_paths: tuple[Path | LogSource, ...]
    seed_labels: tuple[str, ...] | None = None


@dataclass(frozen=True)
class VariantFit:
    """A variant's (seed-mean) curve and its fit, or why it could not be fitted."""

    run: ReportRun
    compute: np.ndarray | None
    reward: np.ndarray | None
    fit: FitResult | None
    error: str | None


def paper_axis(knob: str | None) -> str | None:
    """'A' or 'B': the parameter the paper found this `key=value` knob to move; None if unknown."""
    if not knob or "=" not in knob:
        return None
    return PAPER_AXIS_BY_FIELD.get(knob.split("=", 1)[0].strip().rsplit(".", 1)[-1])


def seed_mean_curve(
    metrics_paths: Sequence[Path | LogSource], x: str | None, y: str | None
) -> tuple[np.ndarray, np.ndarray]:
    """The curve of one run, or the mean over seeds: the i-th evaluations of all seeds averaged
    (same config, so the same evaluation steps), cut to the shortest seed."""
    curves = [read_source(path, x, y) for path in metrics_paths]
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


def points_not_fitted(item: VariantFit) -> tuple[np.ndarray, np.ndarray]:
    """The curve's points the fit left out (the R0 point, points after a collapse), for the figure."""
    unused = ~np.isin(item.compute, item.fit.compute)
    return item.compute[unused], item.reward[unused]


WARM_START_RECORD = "warm_start.json"  # in each run directory of a study: the weights it started from


def read_warm_start(metrics_path: Path | LogSource) -> dict | None:
    """The warm-start record (key, weights_sha256, ...) next to a run's metrics.jsonl; None when
    the run has none (trained outside a study, a log read from a manifest, or a model that is not
    warm-started)."""
    if isinstance(metrics_path, LogSource):
        return None
    path = Path(metrics_path).parent / WARM_START_RECORD
    try:
        record = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError):
        return None
    return record if isinstance(record, dict) else None
