"""Training commands of the `scalerl` CLI: `train`, `demo` and `presets`.

`register(app)` adds them to the typer app of scalerl.cli.app. Importing this module is cheap:
torch and the trainer are imported inside the command bodies only. Bad configs, paths or data
end as one `error: ...` line with exit code 2 (scalerl.cli.errors).
"""

from __future__ import annotations

from pathlib import Path

import typer

from scalerl.cli.errors import INTERRUPTED_EXIT_CODE, exits_on_user_error
from scalerl.errors import ConfigError
from scalerl.train.config.config_keys import field_help
from scalerl.train.config.key_paths import config_field
from scalerl.train.config.train_config import TrainConfig

SET_HELP = (
    "Override one config field: key=value (dotted path or unique leaf name), repeatable; "
    "`scalerl config keys` lists them."
)
DEFAULT_PRESET = "scalerl"


def key_flag_help(path: str, note: str = "") -> str:
    """The help of a flag that sets config key `path`: the key, its meaning from its field's
    metadata, `note` (what the flag adds) and its default (a flag left out keeps the config's
    value, so typer shows none)."""
    default = config_field(TrainConfig, path).default
    shown = "" if isinstance(default, bool) or default == "" else f"; default {default}"
    return f"{path}: {field_help(path)}{note}{shown}."


def build_train_config(
    preset: str | None,
    assignments: list[str],
    model: str | None,
    task: str | None,
    max_steps: int | None,
    config_file: Path | None = None,
):
    """The TrainConfig of `scalerl train`: preset (default scalerl), then the --config file laid
    over it (a saved config.json is complete; a YAML file may name a few keys), then --set, then
    the dedicated options."""
    from scalerl.train.config.presets import preset_config
    from scalerl.train.config.train_config import config_from_file

    options = list(assignments)
    if model is not None:
        options.append(f"model.path={model}")
    if task is not None:
        options.append(f"task.name={task}")
    if max_steps is not None:
        options.append(f"max_steps={max_steps}")
    if config_file is None:
        return with_cached_model(preset_config(preset or DEFAULT_PRESET, options))
    config = config_from_file(config_file, preset_config(preset or DEFAULT_PRESET))
    return with_cached_model(config.with_overrides(options))


def config_file_notes(config_file: Path | None) -> list[str]:
    """What a --config file's TRL keys mean here (trl_config.trl_notes): the TRL defaults its
    missing keys took, the harmless keys accepted."""
    if config_file is None:
        return []
    from scalerl.train.config.config_io import is_trl_file, read_config_file
    from scalerl.train.config.trl_config import trl_notes

    values = read_config_file(config_file)
    return trl_notes(values, is_trl_file(TrainConfig, values))


def with_cached_model(config: TrainConfig) -> TrainConfig:
    """`config` with a hub id in model.path (`org/name`, not a local folder) replaced by its
    snapshot folder in the local Hugging Face cache, which the saved config then names."""
    from scalerl.models.hub_cache import cached_model_folder, is_hub_id

    if config.model.path == "builtin" or not is_hub_id(config.model.path):
        return config
    return config.with_overrides([f"model.path={cached_model_folder(config.model.path)}"])


def resumed_train_config(out: Path, assignments: list[str], max_steps: int | None):
    """The saved config of the run in `out`; on resume only max_steps may change."""
    from scalerl.train.config.train_config import load_config

    if not (out / "config.json").exists():
        raise ConfigError(f"--resume: no run to resume in {out} (no config.json)")
    config = load_config(out)
    if assignments:
        config = config.with_overrides(assignments)
    if max_steps is not None:
        config = config.with_overrides([f"max_steps={max_steps}"])
    return config


def logging_assignments(
    tensorboard: bool,
    wandb: bool,
    wandb_project: str | None,
    wandb_run_name: str | None,
    report_to: str | None,
) -> list[str]:
    """--tensorboard / --wandb / --report-to (transformers' spelling: none, all, or names) as config
    overrides. A flag that is not given changes nothing, so a resumed run keeps its saved loggers."""
    from scalerl.train.config.trl_config import report_targets

    assignments = []
    if report_to is not None:
        if not report_to.strip():
            raise ConfigError("--report-to takes all, none, or tensorboard and/or wandb, got ''")
        assignments += [f"{name}={on}" for name, on in report_targets(report_to, "--report-to").items()]
    if tensorboard:
        assignments.append("tensorboard=true")
    if wandb or wandb_project is not None or wandb_run_name is not None:
        assignments.append("wandb=true")
    if wandb_project is not None:
        assignments.append(f"wandb_project={wandb_project}")
    if wandb_run_name is not None:
        assignments.append(f"wandb_run_name={wandb_run_name}")
    return assignments


def run_directory(out: Path | None, config_file: Path | None) -> Path:
    """--out, else the --config file's output_dir (TRL's name for the run directory)."""
    if out is not None:
        return out
    if config_file is not None:
        from scalerl.train.config.config_io import run_directory_of

        named = run_directory_of(config_file)
        if named is not None:
            return Path(named)
    raise ConfigError("missing the run directory: give --out DIR (or output_dir in the --config file)")


def closing_hint(out: Path) -> str:
    """`fit it: scalerl fit ...` when the run's validation curve can be fitted now; otherwise
    why not and how to continue the run (a hint that fails is worse than none)."""
    from scalerl.errors import ScaleRLError
    from scalerl.forecast.fitting import fit_sigmoid
    from scalerl.forecast.readers import read_curve

    metrics = out / "metrics.jsonl"
    try:
        curve = read_curve(metrics, x="flops", y="val_pass_rate")
        fit_sigmoid(curve.compute, curve.reward, n_draws=20)
    except ScaleRLError as error:
        return (
            f"no forecast yet ({' '.join(str(error).split())}); continue the run to add "
            f"evaluations: scalerl train --out {out} --resume --max-steps N"
        )
    return f"fit it: scalerl fit {metrics} --x flops --y val_pass_rate"


def say(line: str) -> None:
    """One plain line on stdout, never wrapped (commands in it must survive a pipe)."""
    typer.echo(line)


def pipeline_assignments(
    mode: str | None,
    max_lag: int | None,
    generators: int | None,
    offpolicy_steps: int | None,
    ray_address: str | None,
) -> list[str]:
    """The --pipeline/--max-lag/... options as `pipeline.*` config overrides."""
    values = {
        "mode": mode,
        "max_lag": max_lag,
        "num_generators": generators,
        "offpolicy_steps": offpolicy_steps,
        "ray_address": ray_address,
    }
    return [f"pipeline.{key}={value}" for key, value in values.items() if value is not None]


def end_interrupted(out: Path, step: int, exit_code: int = INTERRUPTED_EXIT_CODE) -> None:
    """After Ctrl-C or SIGTERM (a checkpoint of `step` written): say how to continue, exit with
    `exit_code` (130 after Ctrl-C, 143 after SIGTERM)."""
    say(f"interrupted at step {step}; checkpoint written into {out}; continue with: scalerl train --out {out} --resume")
    raise typer.Exit(code=exit_code)


def run_on_ray(config, out: Path, resume: bool, show_progress: bool = True, accept_old: bool = False) -> None:
    """`scalerl train --pipeline async|ppo-offpolicy`: the run on Ray (scalerl.distributed)."""
    from rich.console import Console

    from scalerl.distributed.pipeline import run_pipeline

    console = Console(soft_wrap=True)
    result = run_pipeline(
        config,
        config.pipeline,
        out,
        resume=resume,
        show_progress=show_progress,
        accept_old_checkpoints=accept_old,
        log=lambda line: console.print(line, markup=False, highlight=False),
    )
    if result.interrupted:
        end_interrupted(out, result.steps_done, result.exit_code)
    rates = [r["val_pass_rate"] for r in result.rows if r.get("val_pass_rate") is not None]
    last = f"{rates[-1]:.3f}" if rates else "n/a"
    say(f"trained step {result.steps_done} ({config.pipeline.mode}) into {out}; last validation pass rate {last}")
    say(closing_hint(out))


@exits_on_user_error
def train_command(
    overrides: list[str] | None = typer.Argument(
        None,
        help="key=value overrides as hydra users type them (same as --set), after everything else.",
        show_default=False,
    ),
    out: Path | None = typer.Option(
        None,
        "--out",
        help="Run directory (config.json, metrics.jsonl, checkpoints/); default: the "
        "--config file's output_dir (TRL's key).",
    ),
    preset: str | None = typer.Option(
        None, "--preset", help=f"Recipe preset (see `scalerl presets`); default {DEFAULT_PRESET}."
    ),
    config_file: Path | None = typer.Option(
        None,
        "--config",
        help="Start from this config file: JSON (e.g. a run's config.json), YAML or TOML, "
        "ours or TRL's GRPOConfig keys; --set and the options below apply on top.",
    ),
    set_: list[str] = typer.Option([], "--set", help=SET_HELP),
    model: str | None = typer.Option(None, "--model", help=key_flag_help("model.path")),
    task: str | None = typer.Option(None, "--task", help=key_flag_help("task.name")),
    max_steps: int | None = typer.Option(None, "--max-steps", help=key_flag_help("max_steps")),
    resume: bool = typer.Option(False, "--resume", help="Continue the run in --out from its last checkpoint."),
    accept_old: bool = typer.Option(
        False,
        "--accept-old-checkpoints",
        help="--resume may use a checkpoint without a manifest (written by an older scalerl; its files' checksums "
        "cannot be checked). Without it such a checkpoint is damaged: skipped for an older one, or an error.",
    ),
    progress: bool = typer.Option(
        True,
        "--progress/--no-progress",
        help="Show progress: a bar on a terminal, a plain line every few steps otherwise.",
    ),
    pipeline: str | None = typer.Option(None, "--pipeline", help=key_flag_help("pipeline.mode")),
    max_lag: int | None = typer.Option(None, "--max-lag", help=key_flag_help("pipeline.max_lag")),
    generators: int | None = typer.Option(None, "--generators", help=key_flag_help("pipeline.num_generators")),
    offpolicy_steps: int | None = typer.Option(
        None, "--offpolicy-steps", help=key_flag_help("pipeline.offpolicy_steps")
    ),
    ray_address: str | None = typer.Option(None, "--ray-address", help=key_flag_help("pipeline.ray_address")),
    tensorboard: bool = typer.Option(False, "--tensorboard", help=key_flag_help("tensorboard")),
    wandb: bool = typer.Option(False, "--wandb", help=key_flag_help("wandb", "; WANDB_MODE=offline logs locally")),
    wandb_project: str | None = typer.Option(None, "--wandb-project", help=key_flag_help("wandb_project")),
    wandb_run_name: str | None = typer.Option(None, "--wandb-run-name", help=key_flag_help("wandb_run_name")),
    report_to: str | None = typer.Option(
        None, "--report-to", help="Loggers as in transformers: all, none, tensorboard, wandb (comma-separated)."
    ),
) -> None:
    """Train a policy with a recipe preset; logs metrics.jsonl for `scalerl fit`."""
    out = run_directory(out, config_file)
    set_ = [
        *set_,
        *pipeline_assignments(pipeline, max_lag, generators, offpolicy_steps, ray_address),
        *logging_assignments(tensorboard, wandb, wandb_project, wandb_run_name, report_to),
        *(overrides or []),
    ]
    if resume:
        if preset is not None or model is not None or task is not None or config_file is not None:
            raise ConfigError("--resume uses the saved config: drop --preset/--config/--model/--task")
        config = resumed_train_config(out, set_, max_steps)
    else:
        config = build_train_config(preset, set_, model, task, max_steps, config_file)
        for note in config_file_notes(config_file):
            say(f"note: {config_file}: {note}")
    if config.pipeline.mode != "sync":
        run_on_ray(config, out, resume, show_progress=progress, accept_old=accept_old)
        return
    from scalerl.train.trainer import train

    result = train(config, out, resume=resume, show_progress=progress, accept_old_checkpoints=accept_old)
    if result.rank > 0:  # torchrun: rank 0 reports the run
        return
    if result.interrupted:
        end_interrupted(out, result.last_step, result.exit_code)
    last = f"{result.val_pass_rates[-1]:.3f}" if result.val_pass_rates else "n/a"
    say(f"trained {result.last_step} steps into {out}; last validation pass rate {last}")
    say(closing_hint(out))


@exits_on_user_error
def demo_command(
    out: Path = typer.Option(Path("runs/demo"), "--out", help="Run directory of the demo."),
    set_: list[str] = typer.Option([], "--set", help=SET_HELP),
    fit_fraction: float = typer.Option(0.5, "--fit-fraction", help="Share of the run's compute to fit on."),
    level: float = typer.Option(0.8, "--level", help="Level of the intervals and band."),
    progress: bool = typer.Option(True, "--progress/--no-progress", help="Show a progress bar."),
) -> None:
    """Train the built-in model with the ScaleRL preset, fit the first half, check the second."""
    if not 0 < fit_fraction < 1:
        raise ConfigError(f"--fit-fraction must be in (0, 1), got {fit_fraction:g}")
    if not 0 < level < 1:
        raise ConfigError(f"--level must be in (0, 1), got {level:g}")
    from rich.console import Console

    from scalerl.errors import FitError
    from scalerl.train.demo import forecast_demo, render_report, train_demo

    seconds = train_demo(out, set_, show_progress=progress)
    try:
        report = forecast_demo(out, fit_fraction=fit_fraction, level=level, train_seconds=seconds)
    except FitError as error:
        say(
            f"trained into {out}; no forecast: the first {fit_fraction:g} of the run cannot be fitted yet "
            f"({' '.join(str(error).split())}); run longer, e.g. scalerl demo --out {out} --set max_steps=400"
        )
        return
    render_report(report, Console())
    say(f"forecast.json and forecast.png written to {out}")


def presets_command() -> None:
    """List the recipe presets and the leave-one-out ablations (each one --set)."""
    from rich.console import Console
    from rich.table import Table

    from scalerl.train.config.presets import LEAVE_ONE_OUT, PRESETS

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
