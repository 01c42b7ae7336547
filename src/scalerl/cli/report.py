"""`scalerl report DIR... -o report.html`: one self-contained HTML page with every run's fit,
band and extrapolation, the comparison of the runs and the tables of study directories.

`register(app)` adds the command to the typer app of scalerl.cli.app. Torch-free
(scalerl.report.html_report does the work).
"""

from __future__ import annotations

from pathlib import Path

import typer

from scalerl.cli.errors import exits_on_user_error
from scalerl.cli.fit_inputs import MARGIN_HELP, REWARD_RANGE_OPTION, check_finite_options
from scalerl.cli.runs import FIT_FRACTION_OPTION, FIT_UNTIL_OPTION, LABEL_OPTION, chosen_labels, named_paths
from scalerl.escaping import plain


@exits_on_user_error
def report_command(
    paths: list[Path] = typer.Argument(
        ..., help="Run directories (metrics.jsonl), log files or study directories (NAME=PATH names one)."
    ),
    output: Path = typer.Option(..., "-o", "--output", help="The HTML file to write."),
    x: str | None = typer.Option(None, "--x", help="Compute column (default: as `scalerl fit`)."),
    y: str | None = typer.Option(None, "--y", help="Reward column (default: as `scalerl fit`)."),
    target_x: float | None = typer.Option(
        None, "--target-x", "--budget", help="Budget: extrapolate to this compute (default: 2x each run's)."
    ),
    level: float = typer.Option(0.8, "--level", help="Level of the intervals and bands."),
    margin: float | None = typer.Option(None, "--margin", help=MARGIN_HELP),
    n_draws: int | None = typer.Option(
        None, "--n-draws", help="Posterior draws kept behind the intervals and bands (default: the library's 200)."
    ),
    title: str | None = typer.Option(None, "--title", help="Title of the page."),
    reward_range: tuple[float, float] | None = REWARD_RANGE_OPTION,
    labels: list[str] = LABEL_OPTION,
    fit_until: float | None = FIT_UNTIL_OPTION,
    fit_fraction: float | None = FIT_FRACTION_OPTION,
) -> None:
    """Write one self-contained HTML report of runs and studies (open it in any browser)."""
    from rich.console import Console

    from scalerl.report.html_report import build_report, check_output_path, section_names, write_report

    check_finite_options(fit_until=fit_until, fit_fraction=fit_fraction)
    check_output_path(output)
    paths, given_names = named_paths(paths)
    if any(name is not None for name in given_names):
        labels = chosen_labels(section_names(paths), given_names, labels)
    with Console(stderr=True).status(f"fitting {len(paths)} input(s) ..."):
        report = build_report(
            paths,
            x=x,
            y=y,
            level=level,
            margin=margin,
            target_x=target_x,
            n_draws=n_draws,
            title=title,
            reward_range=reward_range,
            fit_until=fit_until,
            fit_fraction=fit_fraction,
            labels=labels,
        )
        written = write_report(report, output)
    console = Console(stderr=True)
    for warning in report.warnings:
        console.print(f"warning: {plain(warning)}", style="yellow", highlight=False, markup=False, soft_wrap=True)
    console.print(f"report written to {plain(written)}", highlight=False, markup=False)


def register(app: typer.Typer) -> None:
    """Add `report` to the `scalerl` app."""
    app.command("report")(report_command)
