"""Training commands of the `scalerl` CLI: `train`, `demo` and `presets`.

`register(app)` adds them to the typer app of scalerl.cli.app. Importing this module is cheap:
torch and the trainer are imported inside the command bodies only. Bad configs, paths or data
end as one `error: ...` line with exit code 2 (scalerl.cli.errors).
"""

from __future__ import annotations

from pathlib import Path
from typing import List, Optional

import typer
from rich.console import Console

from scalerl.cli.errors import exits_on_user_error
from scalerl.errors import ConfigError

SET_HELP = "Override one config field: key=value (dotted path or unique leaf name), repeatable."


def build_train_config(preset: str, assignments: List[str], model: Optional[str],
                       task: Optional[str], max_steps: Optional[int]):
    """The TrainConfig of `scalerl train`: preset, then --set, then the dedicated options."""
    from scalerl.train.presets import preset_config

    options = list(assignments)
    if model is not None:
        options.append(f"model.path={model}")
    if task is not None:
        options.append(f"task.name={task}")
    if max_steps is not None:
        options.append(f"max_steps={max_steps}")
    return preset_config(preset, options)


def resumed_train_config(out: Path, assignments: List[str], max_steps: Optional[int]):
    """The saved config of the run in `out`; on resume only max_steps may change."""
    from scalerl.train.config import load_config

    if not (out / "config.json").exists():
        raise ConfigError(f"--resume: no run to resume in {out} (no config.json)")
    config = load_config(out)
    if assignments:
        config = config.with_overrides(assignments)
    if max_steps is not None:
        config = config.with_overrides([f"max_steps={max_steps}"])
    return config


def pipeline_assignments(mode: Optional[str], max_lag: Optional[int], generators: Optional[int],
                         offpolicy_steps: Optional[int], ray_address: Optional[str]) -> List[str]:
    """The --pipeline/--max-lag/... options as `pipeline.*` config overrides."""
    values = {"mode": mode, "max_lag": max_lag, "num_generators": generators,
              "offpolicy_steps": offpolicy_steps, "ray_address": ray_address}
    return [f"pipeline.{key}={value}" for key, value in values.items() if value is not None]


def run_on_ray(config, out: Path, resume: bool) -> None:
    """`scalerl train --pipeline async|ppo-offpolicy`: the run on Ray (scalerl.distributed)."""
    from scalerl.distributed.pipeline import run_pipeline

    console = Console()
    result = run_pipeline(config, config.pipeline, out, resume=resume,
                          log=lambda line: console.print(line, markup=False))
    rates = [r["val_pass_rate"] for r in result.rows if r.get("val_pass_rate") is not None]
    last = f"{rates[-1]:.3f}" if rates else "n/a"
    state = "interrupted at" if result.interrupted else "trained"
    console.print(f"{state} step {result.steps_done} ({config.pipeline.mode}) into {out}; "
                  f"last validation pass rate {last}")
    console.print(f"fit it: scalerl fit {out / 'metrics.jsonl'} --x flops --y val_pass_rate")


@exits_on_user_error
def train_command(
    out: Path = typer.Option(..., "--out", help="Run directory (config.json, metrics.jsonl, checkpoints/)."),
    preset: str = typer.Option("scalerl", "--preset", help="Recipe preset (see `scalerl presets`)."),
    set_: List[str] = typer.Option([], "--set", help=SET_HELP),
    model: Optional[str] = typer.Option(None, "--model", help="'builtin' or a local Hugging Face model directory."),
    task: Optional[str] = typer.Option(None, "--task", help="'builtin' or a JSONL file of {prompt, answer}."),
    max_steps: Optional[int] = typer.Option(None, "--max-steps", help="Number of optimiser steps."),
    resume: bool = typer.Option(False, "--resume", help="Continue the run in --out from its last checkpoint."),
    progress: bool = typer.Option(True, "--progress/--no-progress", help="Show a progress bar."),
    pipeline: Optional[str] = typer.Option(
        None, "--pipeline", help="sync (default) | async (PipelineRL on Ray) | ppo-offpolicy."),
    max_lag: Optional[int] = typer.Option(
        None, "--max-lag", help="async: most steps the trainer may be ahead of its data (k)."),
    generators: Optional[int] = typer.Option(None, "--generators", help="Ray generator actors."),
    offpolicy_steps: Optional[int] = typer.Option(
        None, "--offpolicy-steps", help="ppo-offpolicy: optimiser steps per generated round (k)."),
    ray_address: Optional[str] = typer.Option(
        None, "--ray-address", help="Join this Ray cluster ('auto' or host:port); default: local."),
) -> None:
    """Train a policy with a recipe preset; logs metrics.jsonl for `scalerl fit`."""
    set_ = [*set_, *pipeline_assignments(pipeline, max_lag, generators, offpolicy_steps, ray_address)]
    if resume:
        config = resumed_train_config(out, set_, max_steps)
        if preset != "scalerl" or model is not None or task is not None:
            raise ConfigError("--resume uses the saved config: drop --preset/--model/--task")
    else:
        config = build_train_config(preset, set_, model, task, max_steps)
    if config.pipeline.mode != "sync":
        run_on_ray(config, out, resume)
        return
    from scalerl.train.trainer import train

    result = train(config, out, resume=resume, show_progress=progress)
    console = Console()
    last = f"{result.val_pass_rates[-1]:.3f}" if result.val_pass_rates else "n/a"
    console.print(f"trained {result.last_step} steps into {out}; last validation pass rate {last}")
    console.print(f"fit it: scalerl fit {out / 'metrics.jsonl'} --x flops --y val_pass_rate")


@exits_on_user_error
def demo_command(
    out: Path = typer.Option(Path("runs/demo"), "--out", help="Run directory of the demo."),
    set_: List[str] = typer.Option([], "--set", help=SET_HELP),
    fit_fraction: float = typer.Option(0.5, "--fit-fraction", help="Share of the run's compute to fit on."),
    level: float = typer.Option(0.8, "--level", help="Level of the intervals and band."),
    progress: bool = typer.Option(True, "--progress/--no-progress", help="Show a progress bar."),
) -> None:
    """Train the built-in model with the ScaleRL preset, fit the first half, check the second."""
    if not 0 < fit_fraction < 1:
        raise ConfigError(f"--fit-fraction must be in (0, 1), got {fit_fraction:g}")
    if not 0 < level < 1:
        raise ConfigError(f"--level must be in (0, 1), got {level:g}")
    from scalerl.train.demo import render_report, run_demo

    report = run_demo(out, set_, fit_fraction=fit_fraction, level=level, show_progress=progress)
    console = Console()
    render_report(report, console)
    console.print(f"forecast.json and forecast.png written to {out}")


def presets_command() -> None:
    """List the recipe presets and the leave-one-out ablations (each one --set)."""
    from rich.table import Table

    from scalerl.train.presets import LEAVE_ONE_OUT, PRESETS

    console = Console()
    table = Table(title="presets (scalerl train --preset NAME)")
    for column in ("name", "recipe", "overrides of scalerl"):
        table.add_column(column)
    for preset in PRESETS.values():
        table.add_row(preset.name, preset.description, " ".join(preset.overrides) or "-")
    console.print(table)
    ablations = Table(title="leave-one-out ablations (scalerl train --set ...)")
    ablations.add_column("ablation")
    ablations.add_column("--set")
    for name, assignment in LEAVE_ONE_OUT.items():
        ablations.add_row(name, assignment)
    console.print(ablations)


def register(app: typer.Typer) -> None:
    """Add `train`, `demo` and `presets` to the `scalerl` app."""
    app.command("train")(train_command)
    app.command("demo")(demo_command)
    app.command("presets")(presets_command)
