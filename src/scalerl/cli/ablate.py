"""`scalerl ablate` (alias `scalerl study`): a leave-one-out ablation (knob=value pairs, or the
whole table), a recipe study or a sweep of one scaling axis, over paired seeds (same warm start,
seed i of every variant on the same RL seed), sequentially or on Ray; then the paired verdict per
knob (moves the ceiling / moves efficiency only / no measurable effect at the margin / undecided;
docs/study.md). `--from-logs` gives the same verdict to runs made elsewhere (a manifest of logs).

`register(app)` adds the command to scalerl.cli.app's app; torch and ray are imported only when runs
train, so `--report-only` needs neither.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer

from scalerl.cli.errors import exits_on_user_error
from scalerl.errors import ConfigError, InputError

REPORT_WIDTH = 160  # columns of the table when the output is not a terminal (file, pipe)

KNOBS_HELP = (
    "With --leave-one-out: knob=value per variant, e.g. loss=dapo aggregation=sample adv_norm=none "
    "(short names or dotted config paths); none: the whole leave-one-out table."
)
FROM_LOGS_HELP = (
    "Judge runs you already have: a CSV/YAML manifest with path, variant, seed (optional run, "
    "segment, group, unit) of any log `scalerl fit` reads; with --pattern, one W&B export of several runs."
)
PATTERN_HELP = "--from-logs W&B export: regular expression with (?P<variant>...) and (?P<seed>...) on the run names."
SWEEP_HELP = (
    "One scaling axis and its values, e.g. batch_prompts=8,16,32; also generations, "
    "generations_fixed_batch, gen_length, model_size (xs,s,m,l,xl) or any config path."
)


def study_overrides(assignments: list[str], max_steps: int | None) -> list[str]:
    """The `--set`s shared by every variant, `--max-steps` last."""
    if max_steps is not None and max_steps < 1:
        raise ConfigError(f"--max-steps must be >= 1, got {max_steps}")
    return [*assignments, *([f"max_steps={max_steps}"] if max_steps is not None else [])]


def recipe_names(recipes: str | None) -> list[str]:
    """'scalerl,grpo, dapo' -> ['scalerl', 'grpo', 'dapo']."""
    return [] if recipes is None else [name.strip() for name in recipes.split(",") if name.strip()]


def plan_from_options(
    preset: str,
    knobs: list[str],
    leave_one_out: bool,
    sweep: str | None,
    overrides: list[str],
    seeds: int,
    recipes: str | None = None,
    only: list[str] = (),
):
    """The leave-one-out, recipe or sweep plan the options ask for (exactly one of the three)."""
    from scalerl.study.ablate_plan import plan_leave_one_out, plan_recipes, plan_sweep

    if leave_one_out + (sweep is not None) + (recipes is not None) != 1:
        raise ConfigError(
            "choose one: --leave-one-out [knob=value ...], --recipes NAME,NAME,... or --sweep knob=v1,v2,..."
        )
    if knobs and not leave_one_out:
        raise ConfigError(f"knob=value arguments ({' '.join(knobs)}) go with --leave-one-out")
    if sweep is not None:
        if only:
            raise ConfigError("--only goes with --leave-one-out or --recipes, not --sweep")
        return plan_sweep(preset, sweep, common_overrides=overrides, seeds=seeds)
    if recipes is not None:
        return plan_recipes(preset, recipe_names(recipes), common_overrides=overrides, seeds=seeds, only=only)
    return plan_leave_one_out(preset, knobs, common_overrides=overrides, seeds=seeds, only=only)


def report_ablation(out: Path, *, x: str, y: str, margin: float | None, level: float) -> None:
    """Fit every seed of the study in `out`, classify each knob, print the table, write the outputs."""
    from rich.console import Console

    from scalerl.study.ablate_analysis import build_ablation_report
    from scalerl.study.ablation_views import write_ablation_outputs
    from scalerl.study.study_runs import read_plan, report_runs

    plan = read_plan(out)
    runs = report_runs(plan, out)
    with Console(stderr=True).status(f"fitting {len(runs)} variants x {plan.seeds} seed(s) ..."):
        report = build_ablation_report(
            runs, kind=plan.kind, sweep_knob=plan.sweep_knob, seeds=plan.seeds, x=x, y=y, margin=margin, level=level
        )
        written = write_ablation_outputs(report, out, design=plan.design())
    print_report(report, written)


def report_from_logs(source: Path, out: Path, *, base: str | None, pattern: str | None, **judging: Any) -> None:
    """Read the manifest (or the W&B export with --pattern), judge each variant against --base with
    `judging` (build_from_logs_report's x, y, margin, level, reward_range, fit_until,
    fit_fraction), print, write."""
    from rich.console import Console

    from scalerl.study.ablation_views import write_ablation_outputs
    from scalerl.study.from_logs import build_from_logs_report
    from scalerl.study.log_manifest import read_manifest, wandb_rows

    if base is None:
        raise ConfigError("--from-logs needs --base VARIANT: the variant the others are compared with")
    rows = wandb_rows(source, pattern) if pattern is not None else read_manifest(source)
    with Console(stderr=True).status(f"fitting {len(rows)} runs ..."):
        report = build_from_logs_report(rows, base, **judging)
        out.mkdir(parents=True, exist_ok=True)
        written = write_ablation_outputs(
            report, out, design={"source": str(source), "pattern": pattern, "pairing": "by seed label"}
        )
    print_report(report, written)


def print_report(report, written) -> None:
    """The table, the sweep's expectation, the notes and the files written."""
    from rich.console import Console
    from rich.markup import escape

    from scalerl.study.ablation_markdown import report_notes
    from scalerl.study.ablation_table import ablation_table
    from scalerl.study.paper_expectations import sweep_expectation_line

    console = Console() if Console().is_terminal else Console(width=REPORT_WIDTH)
    console.print(ablation_table(report))
    if sweep_expectation_line(report):
        console.print(sweep_expectation_line(report), highlight=False, soft_wrap=True)
    for note in report_notes(report):
        console.print(f"[yellow]{escape(note)}[/yellow]", highlight=False, soft_wrap=True)
    console.print(f"written: {', '.join(str(path) for path in written)}", highlight=False, soft_wrap=True)


@exits_on_user_error
def ablate_command(
    knobs: list[str] | None = typer.Argument(None, help=KNOBS_HELP, show_default=False),
    out: Path = typer.Option(..., "--out", help="Study directory: one run directory per variant (and seed)."),
    preset: str = typer.Option("scalerl", "--preset", help="Base recipe every variant is compared with."),
    leave_one_out: bool = typer.Option(False, "--leave-one-out", help="Base plus one variant per knob=value."),
    recipes: str | None = typer.Option(None, "--recipes", help="Base plus these presets, e.g. grpo,dapo."),
    sweep: str | None = typer.Option(None, "--sweep", help=SWEEP_HELP),
    only: list[str] = typer.Option([], "--only", help="Train only these variants (slug or name; the base always)."),
    seeds: int = typer.Option(1, "--seeds", help="Paired seeds per variant (seed i of every variant: same RL seed)."),
    max_steps: int | None = typer.Option(None, "--max-steps", help="Optimiser steps of every run."),
    set_: list[str] = typer.Option([], "--set", help="Override a config field of every run: key=value (repeatable)."),
    parallel: bool = typer.Option(False, "--parallel", help="Train the runs as Ray tasks instead of one by one."),
    cpus_per_run: float = typer.Option(1.0, "--cpus-per-run", help="--parallel: Ray CPUs of each run."),
    ray_cpus: int = typer.Option(0, "--ray-cpus", help="--parallel: CPUs of the local Ray (0: all)."),
    ray_address: str = typer.Option("", "--ray-address", help="--parallel: join this Ray cluster ('auto', host:port)."),
    margin: float | None = typer.Option(
        None,
        "--margin",
        help="Margin on A (default: the paper's 0.02 of the "
        "reward's unit: 0.02 for pass rates, 2 for a percentage in 0-100).",
    ),
    reward_range: tuple[float, float] | None = typer.Option(
        None,
        "--reward-range",
        metavar="LOW HIGH",
        help="--from-logs: range the rewards lie in (default: [0, 1] when every log's rewards lie in it, else open).",
    ),
    level: float = typer.Option(0.8, "--level", help="Level of the intervals."),
    x: str | None = typer.Option(None, "--x", help="Compute column (study: flops; --from-logs: each log's default)."),
    y: str | None = typer.Option(
        None, "--y", help="Reward column (study: val_pass_rate; --from-logs: each log's default)."
    ),
    report_only: bool = typer.Option(False, "--report-only", help="Only fit and report the runs already in --out."),
    from_logs: Path | None = typer.Option(None, "--from-logs", help=FROM_LOGS_HELP),
    base: str | None = typer.Option(None, "--base", help="--from-logs: the variant the others are compared with."),
    pattern: str | None = typer.Option(None, "--pattern", help=PATTERN_HELP),
    fit_until: float | None = typer.Option(
        None, "--fit-until", help="--from-logs: judge each log on its points with x <= X."
    ),
    fit_fraction: float | None = typer.Option(
        None, "--fit-fraction", help="--from-logs: judge each log on x <= F * its max(x) (decide early)."
    ),
    progress: bool = typer.Option(True, "--progress/--no-progress", help="Show progress on stderr."),
) -> None:
    """Ablate knobs, compare recipes or sweep a scaling axis over paired seeds (or judge logs you
    have: --from-logs); say which moved the ceiling A, only the efficiency B, nothing at the margin,
    or cannot be told yet."""
    if margin is not None and not margin >= 0.0:
        raise InputError(f"--margin must be >= 0, got {margin:g}")
    if reward_range is not None and from_logs is None:
        raise ConfigError("--reward-range goes with --from-logs (a study's runs log pass rates in [0, 1])")
    if not 0.0 < level < 1.0:
        raise InputError(f"--level must be in (0, 1), got {level:g}")
    if from_logs is not None:
        if knobs or sweep is not None or leave_one_out or recipes is not None or report_only:
            raise ConfigError(
                "--from-logs judges the logs its manifest lists: drop --leave-one-out/--recipes/--sweep/--report-only"
            )
        report_from_logs(
            from_logs,
            out,
            base=base,
            pattern=pattern,
            x=x,
            y=y,
            margin=margin,
            level=level,
            reward_range=reward_range,
            fit_until=fit_until,
            fit_fraction=fit_fraction,
        )
        return
    if fit_until is not None or fit_fraction is not None:
        raise ConfigError("--fit-until and --fit-fraction go with --from-logs (a study fits its runs whole)")
    if base is not None or pattern is not None:
        raise ConfigError("--base and --pattern go with --from-logs (a study's base is --preset)")
    x, y = x or "flops", y or "val_pass_rate"
    if not report_only:
        from rich.console import Console

        from scalerl.study.study_runs import RayOptions, run_study

        ray_options = RayOptions(cpus_per_run, ray_address, ray_cpus) if parallel else None
        plan = plan_from_options(
            preset, list(knobs or []), leave_one_out, sweep, study_overrides(set_, max_steps), seeds, recipes, only
        )
        stderr = Console(stderr=True)
        for note in plan.notes:
            stderr.print(note, highlight=False)
        run_study(
            plan,
            out,
            show_progress=progress,
            ray_options=ray_options,
            log=lambda line: stderr.print(line, highlight=False, markup=False),
        )
    elif knobs or sweep is not None or leave_one_out or recipes is not None:
        raise ConfigError("--report-only reports the study already in --out: drop --leave-one-out/--recipes/--sweep")
    report_ablation(out, x=x, y=y, margin=margin, level=level)


def register(app: typer.Typer) -> None:
    """Add `ablate` to the `scalerl` app."""
    app.command("ablate")(ablate_command)
