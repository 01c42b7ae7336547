"""`scalerl study`: train a base recipe and its leave-one-out ablations (or named recipes), then
fit, compare and report which knob moved the ceiling A or the efficiency B.

`register(app)` adds the command to the typer app of scalerl.cli.app. Torch is imported only when a
variant trains (inside scalerl.study.study_runs.run_study); `--report-only` needs no torch at all.
"""

from __future__ import annotations

from pathlib import Path
from typing import List, Optional

import typer
from rich.console import Console
from rich.markup import escape

from scalerl.cli.errors import exits_on_user_error
from scalerl.errors import ConfigError, InputError

REPORT_WIDTH = 160  # columns of the table when the output is not a terminal (file, pipe)
SET_HELP = "Override one config field of every variant: key=value (repeatable), e.g. max_steps=40."


def recipe_names(recipes: Optional[str]) -> list[str]:
    """'scalerl,grpo, dapo' -> ['scalerl', 'grpo', 'dapo']."""
    return [] if recipes is None else [name.strip() for name in recipes.split(",") if name.strip()]


def study_overrides(assignments: List[str], max_steps: Optional[int]) -> list[str]:
    """The `--set`s shared by every variant, `--max-steps` last."""
    if max_steps is not None and max_steps < 1:
        raise ConfigError(f"--max-steps must be >= 1, got {max_steps}")
    return [*assignments, *([f"max_steps={max_steps}"] if max_steps is not None else [])]


def report_study(out: Path, *, x: str, y: str, margin: float, level: float) -> None:
    """Fit and compare the runs of the study in `out`; print the table; write study.json/.md/.png."""
    from scalerl.study.study_runs import read_plan, report_runs
    from scalerl.study.study_analysis import build_study_report, report_notes, study_table, write_study_outputs

    runs = report_runs(read_plan(out), out)
    with Console(stderr=True).status(f"fitting {len(runs)} variants ..."):
        report = build_study_report(runs, x=x, y=y, margin=margin, level=level)
        written = write_study_outputs(report, out)
    console = Console() if Console().is_terminal else Console(width=REPORT_WIDTH)
    console.print(study_table(report))
    if any(versus.note and versus.decided_by for versus in report.versus_base.values()):
        console.print("* a ceiling of the pair is not identified: the comparison of A is uncertain", highlight=False)
    for note in report_notes(report):
        console.print(f"[yellow]{escape(note)}[/yellow]", highlight=False, soft_wrap=True)
    console.print(f"written: {', '.join(str(path) for path in written)}", highlight=False, soft_wrap=True)


@exits_on_user_error
def study_command(
    out: Path = typer.Option(..., "--out", help="Study directory: one run directory per variant."),
    preset: str = typer.Option("scalerl", "--preset", help="Base recipe every variant is compared with."),
    leave_one_out: bool = typer.Option(False, "--leave-one-out", help="Base plus each ablation with one knob flipped."),
    recipes: Optional[str] = typer.Option(None, "--recipes", help="Comma-separated presets, e.g. scalerl,grpo,dapo."),
    only: List[str] = typer.Option([], "--only", help="Train only these variants (slug or name; the base always)."),
    set_: List[str] = typer.Option([], "--set", help=SET_HELP),
    max_steps: Optional[int] = typer.Option(None, "--max-steps", help="Optimiser steps of every variant."),
    seeds: int = typer.Option(1, "--seeds", help="Seeds per variant (the report fits their mean curve)."),
    x: str = typer.Option("flops", "--x", help="Compute column of metrics.jsonl."),
    y: str = typer.Option("val_pass_rate", "--y", help="Reward column of metrics.jsonl."),
    margin: float = typer.Option(0.02, "--margin", help="Ceilings within this margin count as equal."),
    level: float = typer.Option(0.8, "--level", help="Level of the intervals."),
    report_only: bool = typer.Option(False, "--report-only", help="Only fit and report the runs already in --out."),
    progress: bool = typer.Option(True, "--progress/--no-progress", help="Show progress on stderr."),
) -> None:
    """Leave-one-out (or recipe) study: train each variant, then say which knob moved A or B."""
    if not 0.0 <= margin < 1.0:
        raise InputError(f"--margin must be in [0, 1), got {margin:g}")
    if not 0.0 < level < 1.0:
        raise InputError(f"--level must be in (0, 1), got {level:g}")
    if not report_only:
        from scalerl.study.study_runs import plan_study, run_study

        plan = plan_study(preset, leave_one_out=leave_one_out, recipes=recipe_names(recipes), only=only,
                          common_overrides=study_overrides(set_, max_steps), seeds=seeds)
        for note in plan.notes:
            Console(stderr=True).print(note, highlight=False)
        run_study(plan, out, show_progress=progress)
    report_study(out, x=x, y=y, margin=margin, level=level)


def register(app: typer.Typer) -> None:
    """Add `study` to the `scalerl` app."""
    app.command("study")(study_command)
