"""`scalerl report`: gather runs and studies into one self-contained HTML page.

Each input is a run directory (its metrics.jsonl), a metrics file (any format read_curve reads)
or a study directory: study.json (`scalerl study`) and/or ablation.json / sweep.json
(`scalerl ablate`), read as JSON only, with the PNG of the same name when present. Runs are fitted
with fit_sigmoid and drawn with scalerl.report.plotting (points, fit, band, extrapolation), each
on the first part of its compute with `fit_fraction` / `fit_until` (the rest drawn as held out);
two or more fitted runs are also compared with the paper's rule (compare_runs) and drawn on one
axes (the overlay figure). A run that cannot
be read or fitted becomes a warning on the page, not an error, so one bad run never hides the
others. The markup lives in scalerl.report.html_render. Torch-free.
"""

from __future__ import annotations

import base64
import io
import math
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from scalerl.errors import FitError, InputError
from scalerl.forecast.compare import Comparison, compare_runs
from scalerl.forecast.fitting import fit_sigmoid
from scalerl.forecast.readers import Curve, read_curve
from scalerl.forecast.readers.curve import axis_warnings, curve_up_to, fit_window_limit
from scalerl.forecast.result import FitResult
from scalerl.forecast.reward_unit import inferred_reward_range, open_range_note
from scalerl.report.schemas import parse_json_text, read_json_file, validate_forecast_row, validate_summary

METRICS_FILE = "metrics.jsonl"
SUMMARY_KINDS = {"study.json": "study", "ablation.json": "ablation", "sweep.json": "ablation"}
DEFAULT_EXTRAPOLATION = 2.0  # without --target-x, each run is extrapolated to twice its compute
HTML_SUFFIXES = (".html", ".htm")


@dataclass(frozen=True)
class RunSection:
    """One run on the page: its curve, its fit (or why there is none) and its figure (PNG, base64)."""

    name: str
    source: str
    curve: Curve | None
    fit: FitResult | None
    target_compute: float | None
    figure_png: str | None
    error: str | None = None
    history_png: str | None = None  # the live forecast of A during the run (metrics.jsonl with forecast_A)
    held_out: Curve | None = None  # the points after the fit window (--fit-fraction / --fit-until)


@dataclass(frozen=True)
class StudySection:
    """One summary of a study directory: its JSON as read ("study": study.json; "ablation":
    ablation.json or sweep.json) and the PNG of the same name (base64) when present."""

    name: str
    source: str
    kind: str
    payload: dict
    figure_png: str | None


@dataclass(frozen=True)
class HtmlReport:
    title: str
    level: float
    margin: float | None  # the comparison's margin; None without a comparison and no --margin
    runs: tuple[RunSection, ...]
    studies: tuple[StudySection, ...]
    comparison: Comparison | None
    warnings: tuple[str, ...] = field(default_factory=tuple)
    overlay_png: str | None = None  # every fitted run's points and curve on one axes (two or more runs)


def summary_files(directory: Path) -> list[Path]:
    """The study summaries (study.json, ablation.json, sweep.json) a directory holds; a symbolic
    link out of the directory is an InputError (nothing from outside a folder is read)."""
    found = [directory / name for name in SUMMARY_KINDS if (directory / name).is_file()]
    for path in found:
        require_inside(path, directory)
    return found


def stays_inside(path: Path, directory: Path) -> bool:
    """`path` (after following any symbolic link) lies in `directory`."""
    return path.resolve().is_relative_to(directory.resolve())


def require_inside(path: Path, directory: Path) -> None:
    """InputError when `path` is a symbolic link that leaves `directory`."""
    if not stays_inside(path, directory):
        raise InputError(
            f"{path} is a symbolic link to {path.resolve()}, outside {directory}: refused "
            "(a report reads only files inside the folders it is given)"
        )


def classify_input(path: str | os.PathLike) -> tuple[str, Path]:
    """('study', dir) for a directory holding a study summary, ('run', metrics file) for a run
    directory or a log file; InputError for anything else."""
    path = Path(path)
    if path.is_dir():
        if summary_files(path):
            return "study", path
        if (path / METRICS_FILE).is_file():
            require_inside(path / METRICS_FILE, path)
            return "run", path / METRICS_FILE
        if any(path.glob("events.out.tfevents.*")):
            return "run", path
        raise InputError(
            f"{path} is neither a run directory ({METRICS_FILE}) nor a study directory ({', '.join(SUMMARY_KINDS)})"
        )
    if path.is_file():
        return "run", path
    raise InputError(f"no such file or directory: {path}")


def section_names(paths: Sequence[Path]) -> list[str]:
    """A short distinct name per input: the directory name for run/study directories and
    metrics.jsonl files, the file stem otherwise; the full path when names collide."""
    names = [(p.parent.name if p.name == METRICS_FILE else p.name if p.is_dir() else p.stem) or str(p) for p in paths]
    return names if len(set(names)) == len(names) else [str(p) for p in paths]


def png_base64(figure) -> str:
    """A matplotlib figure as base64 PNG text for an <img src="data:image/png;base64,...">."""
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", bbox_inches="tight")
    return base64.b64encode(buffer.getvalue()).decode("ascii")


def extrapolation_target(curve: Curve, target_x: float | None) -> float:
    """--target-x, or DEFAULT_EXTRAPOLATION times the largest compute of the run."""
    return float(target_x) if target_x is not None else DEFAULT_EXTRAPOLATION * float(curve.compute.max())


def run_section(
    name: str,
    path: Path,
    *,
    x: str | None,
    y: str | None,
    target_x: float | None,
    fit_options: dict,
    reward_range: tuple[float, float] | None = None,
    fit_window: tuple[float | None, float | None] = (None, None),
) -> RunSection:
    """Read and fit one run and draw its figure; a read or fit failure becomes `error`. The reward
    range: `reward_range` (--reward-range) when given, else inferred as `scalerl fit` does it
    ([0, 1] when every reward lies in it, else open). `fit_window`: (fit_until, fit_fraction)."""
    from scalerl.report.plotting import fit_figure

    try:
        curve, held_out = curve_up_to(read_curve(path, x=x, y=y), *fit_window)
    except InputError as error:
        return RunSection(name, str(path), None, None, None, None, f"not read: {error}")
    try:
        fit = fit_sigmoid(
            curve.compute, curve.reward, **fit_options, reward_range=inferred_reward_range([curve.reward], reward_range)
        )
    except (FitError, InputError) as error:
        return RunSection(name, str(path), curve, None, None, None, f"not fitted: {error}")
    target = extrapolation_target(curve if held_out is None else held_out, target_x)
    unused = ~np.isin(curve.compute, fit.compute)
    figure = fit_figure(
        fit,
        not_fitted=(curve.compute[unused], curve.reward[unused]),
        target_compute=target,
        held_out=None if held_out is None else (held_out.compute, held_out.reward),
        level=fit_options.get("level", 0.8),
        x_label=curve.x_name,
        y_label=curve.y_name,
    )
    return RunSection(
        name,
        str(path),
        curve,
        fit,
        target,
        png_base64(figure),
        history_png=live_history_png(path, fit.a),
        held_out=held_out,
    )


def live_history_png(path: Path, final_a: float) -> str | None:
    """The figure of the live forecasts logged in a metrics.jsonl (base64 PNG), or None.

    Rows with `forecast_A` are checked (schemas.ForecastRow): a bad one is an InputError naming
    the file, line and field."""
    from scalerl.forecast.live import forecast_history
    from scalerl.report.live_plot import forecast_history_figure

    if path.name != METRICS_FILE:
        return None
    rows = []
    for line_number, line in enumerate(path.read_bytes().splitlines(), start=1):
        if b"forecast_A" not in line:
            continue
        try:
            row = parse_json_text(line, f"{path}: line {line_number}")
        except InputError:  # a torn last line of a running or killed run
            continue
        if isinstance(row, dict) and row.get("forecast_A") is not None:
            validate_forecast_row(row, line_number, str(path))
            rows.append(row)
    history = forecast_history(rows)
    return None if history is None else png_base64(forecast_history_figure(history, final_a=final_a))


def read_summary(name: str, path: Path) -> StudySection:
    """A summary JSON checked against its schema (InputError naming file and field) and its PNG."""
    kind = SUMMARY_KINDS[path.name]
    payload = validate_summary(read_json_file(path), kind, str(path))
    figure_path = path.with_suffix(".png")
    embedded = figure_path.is_file() and stays_inside(figure_path, path.parent)
    figure = base64.b64encode(figure_path.read_bytes()).decode("ascii") if embedded else None
    label = name if path.name == "study.json" else f"{name} ({path.stem})"
    return StudySection(label, str(path), kind, payload, figure)


def study_warnings(study: StudySection) -> list[str]:
    """Errors, comparison notes and fit warnings of a study's variants, one line each."""
    warnings = []
    for variant in study.payload.get("variants") or []:
        slug = f"{study.name}/{variant.get('slug', '?')}"
        for seed in variant.get("seeds") or []:  # ablation.json: one entry per seed
            if isinstance(seed, dict) and seed.get("error"):
                warnings.append(f"{slug} ({seed.get('metrics', 'a seed')}): {seed['error']}")
        if variant.get("error"):
            warnings.append(f"{slug}: {variant['error']}")
        versus = variant.get("versus_base") or {}
        if versus.get("note") and versus.get("note") != variant.get("error"):
            warnings.append(f"{slug}: {versus['note']}")
        warnings += [f"{slug}: {w}" for w in ((variant.get("fit") or {}).get("warnings") or [])]
    return warnings


def compare_fitted(
    runs: Sequence[RunSection], margin: float | None, fit_options: dict, reward_range: tuple[float, float] | None = None
) -> tuple[Comparison | None, list]:
    """The paper's comparison of the fitted runs (two or more), in one reward range for all
    (given, else inferred from all of them); a failure becomes a warning."""
    fitted = {run.name: (run.curve.compute, run.curve.reward) for run in runs if run.fit is not None}
    if len(fitted) < 2:
        return None, []
    common = inferred_reward_range([reward for _, reward in fitted.values()], reward_range)
    try:
        return compare_runs(fitted, margin=margin, **fit_options, reward_range=common), []
    except (FitError, InputError) as error:
        return None, [f"comparison not made: {error}"]


def build_report(
    paths: Sequence[str | os.PathLike],
    *,
    x: str | None = None,
    y: str | None = None,
    level: float = 0.8,
    margin: float | None = None,
    target_x: float | None = None,
    n_draws: int | None = None,
    title: str | None = None,
    reward_range: tuple[float, float] | None = None,
    fit_until: float | None = None,
    fit_fraction: float | None = None,
    labels: Sequence[str] = (),
) -> HtmlReport:
    """Read, fit and compare every input; see the module docstring. `reward_range`: --reward-range
    (None: inferred per run as `scalerl fit` does, and once over all runs for the comparison);
    `fit_until` / `fit_fraction`: fit each run on the first part of its compute; `labels`: a name
    per input, in order (default: section_names)."""
    if not paths:
        raise InputError("report needs at least one run or study directory")
    if not 0.0 < level < 1.0:
        raise InputError(f"--level must be in (0, 1), got {level:g}")
    if margin is not None and not margin >= 0.0:
        raise InputError(f"--margin must be >= 0, got {margin:g}")
    if target_x is not None and not (math.isfinite(target_x) and target_x > 0):
        raise InputError(f"--target-x must be a positive compute value, got {target_x:g}")
    fit_window_limit(np.ones(1), fit_until, fit_fraction)  # a bad window is one error, before any fit
    kinds = [classify_input(path) for path in paths]
    names = section_names([Path(p) for p in paths])
    if labels:
        if len(labels) != len(paths) or len(set(labels)) != len(labels):
            raise InputError(f"--label needs one distinct name per input: {len(labels)} for {len(paths)} inputs")
        names = list(labels)
    fit_options: dict[str, Any] = {"level": level, **({"n_draws": n_draws} if n_draws else {})}
    runs, studies = [], []
    for name, (kind, path) in zip(names, kinds):
        if kind == "study":
            studies += [read_summary(name, summary) for summary in summary_files(path)]
        else:
            runs.append(
                run_section(
                    name,
                    path,
                    x=x,
                    y=y,
                    target_x=target_x,
                    fit_options=fit_options,
                    reward_range=reward_range,
                    fit_window=(fit_until, fit_fraction),
                )
            )
    comparison, warnings = compare_fitted(runs, margin, fit_options, reward_range)
    warnings += axis_warnings({run.name: run.curve for run in runs if run.fit is not None})
    warnings += [f"{run.name}: {note}" for run in runs if run.curve is not None for note in run.curve.notes]
    note = None if reward_range is not None else open_range_note([run.curve for run in runs if run.fit is not None])
    warnings += [] if note is None else [note]
    warnings += [f"{run.name}: {run.error}" for run in runs if run.error]
    warnings += [f"{run.name}: {w}" for run in runs if run.fit is not None for w in run.fit.warnings]
    warnings += list(comparison.warnings) if comparison is not None else []
    for study in studies:
        warnings += study_warnings(study)
        figure_path = Path(study.source).with_suffix(".png")
        if figure_path.is_file() and not stays_inside(figure_path, figure_path.parent):
            warnings.append(
                f"{study.name}: {figure_path} is a symbolic link out of the study folder; its image is not embedded"
            )
    if comparison is not None:
        margin = comparison.margin
    return HtmlReport(
        title or "scalerl report: " + ", ".join(names),
        level,
        margin,
        tuple(runs),
        tuple(studies),
        comparison,
        tuple(warnings),
        overlay_png=overlay_figure(runs, comparison, level),
    )


def overlay_figure(runs: Sequence[RunSection], comparison: Comparison | None, level: float) -> str | None:
    """Every fitted run's points (held-out ones hollow) and fitted curve on one axes, names cut as
    in the tables (base64 PNG); None with fewer than two fitted runs."""
    from scalerl.report.console import run_labels, with_short_names
    from scalerl.report.plotting import RunPoints, comparison_figure

    fitted = [run for run in runs if run.fit is not None]
    if len(fitted) < 2:
        return None
    points = {}
    labels = run_labels([run.name for run in fitted])
    for run in fitted:
        unused = ~np.isin(run.curve.compute, run.fit.compute)
        points[labels[run.name]] = RunPoints(
            not_fitted=(run.curve.compute[unused], run.curve.reward[unused]),
            held_out=None if run.held_out is None else (run.held_out.compute, run.held_out.reward),
        )
    headline = None if comparison is None else with_short_names(comparison.headline(), [run.name for run in fitted])
    figure = comparison_figure(
        {labels[run.name]: run.fit for run in fitted},
        points=points,
        level=level,
        x_label=fitted[0].curve.x_name,
        y_label=fitted[0].curve.y_name,
        title=f"{len(fitted)} runs on one axes, {level:.0%} bands",
        headline=headline,
    )
    return png_base64(figure)


def check_output_path(path: str | os.PathLike) -> Path:
    """The output must be an .html / .htm file in an existing directory."""
    path = Path(path)
    if path.suffix.lower() not in HTML_SUFFIXES:
        raise InputError(f"cannot write the report to {path}: the name must end in .html")
    if not path.parent.is_dir():
        raise InputError(f"cannot write the report to {path}: no directory {path.parent}")
    return path


def write_report(report: HtmlReport, path: str | os.PathLike) -> Path:
    """Render and write the page atomically (temporary file in the same directory, then rename)."""
    from scalerl.report.html_render import render_html

    path = check_output_path(path)
    temp_path = path.with_name(f".{path.name}.tmp")
    temp_path.write_text(render_html(report), encoding="utf-8", errors="backslashreplace")  # undecodable names
    os.replace(temp_path, path)
    return path
