"""Views of an ablation report written to its folder: the JSON (scalerl.study.ablation_payload),
the markdown (scalerl.study.ablation_markdown) and the figure of all curves with their fitted A and
B, with the paper's expectation for a swept axis under it (scalerl.study.paper_expectations).
"""

from __future__ import annotations

from pathlib import Path

from scalerl.report.console import json_text
from scalerl.study.ablate_analysis import AblationReport
from scalerl.study.ablation_markdown import markdown_text
from scalerl.study.ablation_payload import report_payload
from scalerl.study.paper_expectations import SWEEP_EXPECTATIONS
from scalerl.study.run_curves import points_not_fitted

OUTPUT_STEMS = {"leave-one-out": "ablation", "recipes": "ablation", "sweep": "sweep", "from-logs": "ablation"}


def write_figure(report: AblationReport, path: Path) -> Path | None:
    """Every seed-mean curve on one compute axis with its fit (A and B in the legend) and, for a
    sweep, the paper's expectation under the axes; None when no curve could be fitted."""
    from scalerl.report.plotting import RunPoints, comparison_figure, save_figure

    fitted = {item.run.slug: item.fit for item in report.mean_curve_fits if item.fit is not None}
    if not fitted:
        return None
    points = {
        item.run.slug: RunPoints(not_fitted=points_not_fitted(item))
        for item in report.mean_curve_fits
        if item.fit is not None
    }
    what = f"sweep of {report.sweep_knob}" if report.kind == "sweep" else f"{report.kind} vs {report.base}"
    figure = comparison_figure(
        fitted,
        points=points,
        level=report.level,
        x_label=report.x_name,
        y_label=report.y_name,
        title=f"{what} (seed-mean curves, {report.seeds} seed(s))",
    )
    if report.kind == "sweep":
        figure.text(
            0.01, 0.005, f"paper: {SWEEP_EXPECTATIONS.get(report.sweep_knob or '', '-')}", fontsize=7, wrap=True
        )
    return save_figure(figure, path)


def atomic_write_text(path: Path, text: str) -> Path:
    temp_path = path.with_name(path.name + ".tmp")
    temp_path.write_text(text)
    temp_path.replace(path)
    return path


def write_ablation_outputs(
    report: AblationReport, out_dir, command: str | None = None, design: dict | None = None
) -> list[Path]:
    """DIR/ablation.{json,md,png} (leave-one-out, recipes) or DIR/sweep.{json,md,png}, written
    atomically; `design` (the plan's seeds) goes into the JSON."""
    out_dir = Path(out_dir)
    stem = OUTPUT_STEMS.get(report.kind, "ablation")
    written = [
        atomic_write_text(out_dir / f"{stem}.json", json_text(report_payload(report, design)) + "\n"),
        atomic_write_text(out_dir / f"{stem}.md", markdown_text(report, command, design)),
    ]
    temp_figure = out_dir / f".{stem}.tmp.png"
    if write_figure(report, temp_figure) is not None:
        written.append(temp_figure.replace(out_dir / f"{stem}.png"))
    return written
