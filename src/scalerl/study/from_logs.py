"""`scalerl ablate --from-logs`: the study's paired verdict on runs made elsewhere (TRL, verl, W&B,
TensorBoard logs), one engine with the study (scalerl.study.ablate_analysis).

The manifest's rows (scalerl.study.log_manifest) become one ReportRun per variant, its seeds
labelled, so seed s of a variant pairs with seed s of the base; a variant whose seed labels are not
the base's is judged unpaired (Welch), and says so. Every log must be on one compute axis: the axis
of a log is its declared unit, else what its x column measures (compute_axis); logs on different
axes are refused unless `--x` names one column every log has (and no declared units differ).
Torch-free.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

import numpy as np

from scalerl.errors import InputError
from scalerl.forecast.readers.columns import STEP_COLUMNS
from scalerl.forecast.readers.curve import fit_window_limit
from scalerl.forecast.reward_unit import inferred_reward_range
from scalerl.study.ablate_analysis import AblationReport, build_ablation_report
from scalerl.study.log_manifest import ManifestRow, check_rows
from scalerl.study.run_curves import ReportRun, read_source

KIND = "from-logs"


def compute_axis(x_name: str) -> str:
    """What an x column measures, from its name: GPU-hours, FLOPs, tokens, steps, or the name
    itself when it does not say (e.g. `compute`: the unit is the log's own)."""
    lowered = x_name.lower()
    if "gpu_hour" in lowered or "gpu-hour" in lowered or "gpu_h" == lowered:
        return "GPU-hours"
    if "flop" in lowered:
        return "FLOPs"
    if "token" in lowered:
        return "tokens"
    if x_name in STEP_COLUMNS or lowered.endswith("step"):
        return "steps"
    return x_name


def _grouped(axes: dict[str, list[str]]) -> str:
    return "; ".join(
        f"{axis} ({', '.join(origins[:3])}{' ...' if len(origins) > 3 else ''})" for axis, origins in axes.items()
    )


def check_axes(rows: Sequence[ManifestRow], x_names: Sequence[str], x_given: bool) -> str:
    """The one compute axis of all logs (a declared unit wins over the column's name); InputError
    when declared units differ, or when inferred axes differ and `--x` was not given."""
    declared: dict[str, list[str]] = {}
    for row in rows:
        if row.unit is not None:
            declared.setdefault(row.unit, []).append(row.origin)
    if len(declared) > 1:
        raise InputError(
            f"compute units differ between runs: {_grouped(declared)}; a verdict compares curves on one "
            "compute axis: list runs of one unit"
        )
    axes: dict[str, list[str]] = {}
    for row, x_name in zip(rows, x_names):
        axes.setdefault(row.unit or compute_axis(x_name), []).append(f"{row.origin}: {x_name}")
    if len(axes) > 1 and not x_given:
        raise InputError(
            f"compute axes differ between runs: {_grouped(axes)}; pass --x COLUMN naming a compute column every log has"
        )
    return next(iter(declared)) if declared else next(iter(axes))


def manifest_runs(rows: Sequence[ManifestRow], base: str) -> list[ReportRun]:
    """One ReportRun per variant (the base first, then manifest order), its seeds labelled."""
    variants = list(dict.fromkeys([base, *(row.variant for row in rows)]))
    runs = []
    for variant in variants:
        mine = [row for row in rows if row.variant == variant]
        runs.append(
            ReportRun(
                variant,
                variant,
                None,
                variant == base,
                tuple(row.source for row in mine),
                tuple(row.seed for row in mine),
            )
        )
    return runs


def axis_label(names: Sequence[str], axis: str) -> str:
    """`compute` when every log used that column; else the axis with the columns, e.g. `tokens (num_tokens, tokens)`."""
    distinct = list(dict.fromkeys(names))
    return distinct[0] if len(distinct) == 1 else f"{axis} ({', '.join(distinct)})"


def build_from_logs_report(
    rows: Sequence[ManifestRow],
    base: str,
    *,
    x: str | None = None,
    y: str | None = None,
    margin: float | None = None,
    level: float = 0.8,
    reward_range: tuple[float, float] | None = None,
    fit_until: float | None = None,
    fit_fraction: float | None = None,
) -> AblationReport:
    """Check the manifest, read every log once (its columns and axis), then fit and judge with
    build_ablation_report; x / y None: each log's default columns (scalerl.forecast.readers.columns).
    `reward_range` None: [0, 1] when every log's rewards lie in it, else open (as `scalerl fit`).
    `fit_until` / `fit_fraction`: every log is judged on the first part of its compute."""
    check_rows(list(rows), base)
    fit_window_limit(np.ones(1), fit_until, fit_fraction)  # a bad window is one error, before any read
    rows = [replace(row, source=replace(row.source, fit_until=fit_until, fit_fraction=fit_fraction)) for row in rows]
    curves = []
    for row in rows:
        try:
            curves.append(read_source(row.source, x, y))
        except InputError as error:
            raise InputError(f"{row.origin}: {error}") from None
    axis = check_axes(rows, [curve.x_name for curve in curves], x is not None)
    runs = manifest_runs(rows, base)
    seeds = max(len(run.metrics_paths) for run in runs)
    report = build_ablation_report(
        runs,
        kind=KIND,
        seeds=seeds,
        x=x,
        y=y,
        margin=margin,
        level=level,
        reward_range=inferred_reward_range([curve.reward for curve in curves], reward_range),
    )
    return replace(
        report,
        x_name=axis_label([curve.x_name for curve in curves], axis),
        y_name=axis_label([curve.y_name for curve in curves], "reward"),
    )
