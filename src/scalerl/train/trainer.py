"""The synchronous reference trainer: orchestration only (the maths lives in scalerl.rl,
`train_step`, `flops`; generation and tasks in their own modules).

Each step: sample P prompts from the curriculum pool -> G generations each (KV cache, generator
log-probs recorded) -> rewards from the task's verifier (+ the length penalty in "penalty" mode)
-> `train_step` -> update the no-positive-resampling pool -> one metrics row (+ validation every
`eval_every` steps, at step 0 giving R0, and at the last step, each followed by the live forecast
of scalerl.forecast.live when forecast.enabled) -> checkpoint every
`checkpoint_every` steps. `--resume` restarts from the last checkpoint, drops the metrics rows
written after it and reproduces the uninterrupted run (RNG states are part of the checkpoint).
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import numpy as np
import torch

from scalerl.errors import ConfigError
from scalerl.forecast.live import LIVE_PLOT_NAME, LiveForecast, live_forecast, projected_budget
from scalerl.report.live_plot import write_live_plot
from scalerl.rl.curriculum import PromptPool, pass_rates_by_prompt
from scalerl.rl.length_control import overlong_length_penalty
from scalerl.train import flops
from scalerl.train.checkpoint import latest_checkpoint, load_checkpoint, save_checkpoint
from scalerl.train.config import CONFIG_FILE_NAME, TrainConfig, load_config, save_config
from scalerl.train.generation import generate_rollouts
from scalerl.train.metrics_log import MetricsLog, RunProgress, truncate_after_step
from scalerl.models.chat import chat_renderer
from scalerl.models.policy import BUILTIN_MODEL, TinyModelSpec, load_policy
from scalerl.train.progress import ForecastProgress
from scalerl.tasks.rollout import Rollout
from scalerl.tasks.arithmetic import Task
from scalerl.tasks.loading import load_task
from scalerl.train.train_step import StepStats, build_optimizer, build_scheduler, train_step
from scalerl.train.validation import length_control, sampling_settings, validation_pass_rate

RowCallback = Callable[[dict[str, Any]], None]
# Keys a resume may change: they say how long to run and where to log, not what is computed.
RESUMABLE_CHANGES = ("max_steps", "tensorboard", "wandb", "wandb_project", "wandb_run_name", "forecast")


@dataclass
class Counters:
    """Cumulative compute of the run (the x axes of the compute-performance curve)."""

    samples: int = 0
    tokens_generated: int = 0
    tokens_trained: int = 0
    flops: float = 0.0
    device_hours: float = 0.0


@dataclass
class Run:
    """The live objects of a run."""

    config: TrainConfig
    run_dir: Path
    model: torch.nn.Module
    tokenizer: Any
    task: Any
    pool: PromptPool
    optimizer: torch.optim.Optimizer
    scheduler: Any
    rollout_generator: torch.Generator
    numpy_rng: np.random.Generator
    shape: flops.ModelShape
    log: MetricsLog
    counters: Counters
    step: int = 0
    last_val_pass_rate: float | None = None
    val_curve: list[tuple[float, float]] = dataclasses.field(default_factory=list)  # (flops, val_pass_rate)


@dataclass(frozen=True)
class TrainResult:
    """What a finished run produced: its directory, the last step and the validation curve."""

    run_dir: Path
    last_step: int
    val_steps: tuple[int, ...]
    val_flops: tuple[float, ...]
    val_pass_rates: tuple[float, ...]


def check_paths(config: TrainConfig) -> None:
    """model.path and task.name must be 'builtin' or exist (checked before a run starts)."""
    model_path = config.model.path
    if model_path != BUILTIN_MODEL and not (Path(model_path) / "config.json").is_file():
        raise ConfigError(f"model.path: {model_path!r} is neither 'builtin' nor a local Hugging Face "
                          "model directory (no config.json)")
    task_name = config.task.name
    if task_name != "builtin" and not Path(task_name).is_file():
        raise ConfigError(f"task.name: {task_name!r} is neither 'builtin' nor an existing JSONL file")
    if config.wandb:
        from scalerl.train.wandb_log import require_wandb

        require_wandb()


def build_task(config: TrainConfig) -> Task:
    """The built-in arithmetic task at the configured difficulty, or a JSONL task.

    The held-out pool size is a task knob (not eval_prompts): changing how many prompts an
    evaluation uses must not change the training prompts or the warm-start cache key."""
    return load_task(config.task, render_chat=chat_renderer(config.model.path))


def tiny_model_spec(config: TrainConfig) -> TinyModelSpec:
    """Shape of the built-in model; positions cover the prompt plus max_new_tokens."""
    model = config.model
    return TinyModelSpec(num_layers=model.num_layers, hidden_size=model.hidden_size,
                         num_heads=model.num_heads, intermediate_size=3 * model.hidden_size,
                         max_positions=max(256, config.sampling.max_new_tokens + 128))


def fresh_policy(config: TrainConfig):
    """(model, tokenizer) as loaded from model.path, or a freshly initialised built-in model
    (initial weights from model.init_seed, shared by every RL seed)."""
    return load_policy(config.model.path, dtype=config.dtype, device=config.device,
                       tiny_spec=tiny_model_spec(config), seed=config.model.init_seed)


def build_policy(config: TrainConfig, task):
    """The starting policy: the built-in model is warm-started (cached on disk) on worked examples
    until a quick probe reaches model.warmstart_stop_pass_rate; a local model is used as is."""
    model, tokenizer = fresh_policy(config)
    if config.model.path != BUILTIN_MODEL or config.model.warmstart_steps == 0:
        return model, tokenizer
    from scalerl.train.warmstart_config import warm_start_for_config

    model, tokenizer, _ = warm_start_for_config(config, model, tokenizer, task)
    return model, tokenizer


def _check_resumable(config: TrainConfig, run_dir: Path) -> None:
    saved = load_config(run_dir)
    changed = [key for key, value in config.to_dict().items()
               if key not in RESUMABLE_CHANGES and saved.to_dict()[key] != value]
    if changed:
        raise ConfigError(f"--resume: the config differs from the saved run's in {', '.join(changed)}; "
                          "only max_steps may change (and tensorboard, wandb*, forecast.*)")


def prepare_run_dir(config: TrainConfig, run_dir: Path, resume: bool) -> None:
    """Check the run directory suits a fresh run or a resume; write config.json."""
    has_run = (run_dir / CONFIG_FILE_NAME).exists()
    if resume and not has_run:
        raise ConfigError(f"--resume: no run to resume in {run_dir} (no {CONFIG_FILE_NAME})")
    if resume:
        _check_resumable(config, run_dir)
    elif has_run:
        raise ConfigError(f"{run_dir} already holds a run; pass --resume or choose another --out")
    save_config(config, run_dir)


def _new_run(config: TrainConfig, run_dir: Path, task, *, warm_start: bool) -> Run:
    model, tokenizer = build_policy(config, task) if warm_start else fresh_policy(config)
    optimizer = build_optimizer(model, config.optim)
    device = next(model.parameters()).device
    return Run(
        config=config, run_dir=run_dir, model=model, tokenizer=tokenizer, task=task,
        pool=PromptPool(len(task.train), threshold=config.rl.npr_threshold, enabled=config.rl.npr),
        optimizer=optimizer, scheduler=build_scheduler(optimizer, config.optim.warmup_steps),
        rollout_generator=torch.Generator(device=device).manual_seed(config.seed),
        numpy_rng=np.random.default_rng(config.seed), shape=flops.model_shape(model),
        log=MetricsLog.for_config(run_dir, config), counters=Counters(),
    )


def open_run(config: TrainConfig, run_dir: Path, resume: bool) -> Run:
    """A fresh run, or the run restored from its last checkpoint (later metrics rows dropped).

    Paths and the task are checked before anything is written into `run_dir`."""
    check_paths(config)
    task = build_task(config)
    prepare_run_dir(config, run_dir, resume)
    checkpoint = latest_checkpoint(run_dir) if resume else None
    if checkpoint is None:
        truncate_after_step(run_dir / "metrics.jsonl", -1)
        return _new_run(config, run_dir, task, warm_start=True)
    run = _new_run(config, run_dir, task, warm_start=False)
    step, state = load_checkpoint(
        checkpoint, model=run.model, optimizer=run.optimizer, scheduler=run.scheduler,
        torch_generators={"rollout": run.rollout_generator}, numpy_rng=run.numpy_rng)
    run.step = step
    run.pool = PromptPool.from_state_dict(state["pool"])
    run.counters = Counters(**state["counters"])
    run.last_val_pass_rate = state.get("last_val_pass_rate")
    truncate_after_step(run.log.path, step)
    run.val_curve = [(float(row["flops"]), float(row["val_pass_rate"])) for row in run.log.rows()
                     if row.get("val_pass_rate") is not None]
    return run


def _checkpoint(run: Run) -> None:
    save_checkpoint(
        run.run_dir, run.step, model=run.model, optimizer=run.optimizer, scheduler=run.scheduler,
        torch_generators={"rollout": run.rollout_generator}, numpy_rng=run.numpy_rng,
        state={"pool": run.pool.state_dict(), "counters": dataclasses.asdict(run.counters),
               "last_val_pass_rate": run.last_val_pass_rate},
        keep=run.config.keep_checkpoints, tokenizer=run.tokenizer)


def _generate(run: Run) -> list[Rollout]:
    """P prompts from the pool x G generations, rewards filled in by the task's verifier."""
    config = run.config
    indices = run.pool.sample(config.sampling.prompts_per_step, run.numpy_rng)
    rollouts = generate_rollouts(
        run.model, run.tokenizer, [run.task.train[i].prompt for i in indices], indices,
        num_generations=config.sampling.generations_per_prompt, sampling=sampling_settings(config),
        length_control=length_control(config), torch_generator=run.rollout_generator,
        policy_version=run.step)
    examples = run.task.train
    return [r.with_reward(run.task.reward(r.completion_text, examples[r.prompt_index])) for r in rollouts]


def training_rewards(rollouts: list[Rollout], config: TrainConfig) -> list[Rollout]:
    """Rewards the policy is trained on: the verifier's, plus DAPO's overlong penalty in
    "penalty" mode (max_len = max_new_tokens, cache = penalty_cache_tokens)."""
    if config.sampling.length_control != "penalty":
        return rollouts
    penalties = overlong_length_penalty([r.num_completion_tokens for r in rollouts],
                                        config.sampling.max_new_tokens,
                                        config.sampling.penalty_cache_tokens).tolist()
    return [r.with_reward(r.reward + p) for r, p in zip(rollouts, penalties)]


def account_step(run: Run, rollouts: list[Rollout], stats: StepStats, wall_seconds: float) -> None:
    """Add this step's samples, tokens, FLOPs and device-hours to the cumulative counters."""
    counters = run.counters
    generated = sum(r.num_completion_tokens for r in rollouts)
    context = sum(flops.context_token_sum(len(r.prompt_token_ids), r.num_completion_tokens)
                  for r in rollouts)
    counters.samples += len(rollouts)
    counters.tokens_generated += generated
    counters.tokens_trained += stats.tokens_trained
    counters.flops += flops.generation_flops(run.shape, generated, context)
    counters.flops += flops.training_flops(run.shape, stats.tokens_trained, stats.trained_context_sum)
    counters.device_hours += flops.device_hours(wall_seconds, run.config.num_devices)


def train_row(run: Run, rollouts: list[Rollout], stats: StepStats) -> dict[str, Any]:
    """The metrics row of one step (issue 5 columns first, then diagnostics)."""
    passed = [r.reward > 0 for r in rollouts]
    return {
        "step": run.step, **dataclasses.asdict(run.counters),
        "train_reward": float(np.mean([r.reward for r in rollouts])),
        "kept_prompts": stats.kept_prompts, "pool_size": run.pool.active_count,
        "mean_length": float(np.mean([r.num_completion_tokens for r in rollouts])),
        "truncation_rate": float(np.mean([r.truncated for r in rollouts])),
        "entropy": stats.entropy, "loss": stats.loss, "lr": stats.lr, "grad_norm": stats.grad_norm,
        "train_pass_rate": float(np.mean(passed)),
        "interruption_rate": float(np.mean([r.interrupted for r in rollouts])),
        "mean_ratio": stats.mean_ratio, "clipped_fraction": stats.clipped_fraction,
    }


def run_one_step(run: Run) -> dict[str, Any]:
    """Generate, reward, update, account; return the step's metrics row (step = run.step + 1)."""
    started = time.perf_counter()
    rollouts = _generate(run)
    stats = train_step(run.model, run.optimizer, run.scheduler, training_rewards(rollouts, run.config),
                       run.config)
    run.pool.update_many(pass_rates_by_prompt([r.prompt_index for r in rollouts],
                                              [r.reward for r in rollouts]))
    run.step += 1
    account_step(run, rollouts, stats, time.perf_counter() - started)
    return train_row(run, rollouts, stats)


def forecast_budget(config: TrainConfig, flops_so_far: float, step: int) -> float:
    """forecast.budget_flops, or (when 0) the FLOPs at max_steps projected from the rate so far."""
    if config.forecast.budget_flops > 0:
        return config.forecast.budget_flops
    return projected_budget(flops_so_far, step, config.max_steps)


def add_live_forecast(config: TrainConfig, run_dir: Path, val_curve, row: dict[str, Any],
                      step: int) -> LiveForecast | None:
    """Refit on the validation curve so far; add the forecast keys to `row` and redraw the live
    plot. Nothing is added while the curve cannot be fitted (scalerl.forecast.live). Shared with
    the async pipeline's driver (scalerl.distributed.run_parts)."""
    flops_axis, pass_rates = zip(*val_curve)
    forecast = live_forecast(flops_axis, pass_rates, budget=forecast_budget(config, row["flops"], step),
                             n_bootstrap=config.forecast.n_bootstrap)
    if forecast is not None:
        row.update(forecast.row())
        write_live_plot(forecast, flops_axis, pass_rates, Path(run_dir) / LIVE_PLOT_NAME)
    return forecast


def _validate_into(run: Run, row: dict[str, Any], progress: ForecastProgress) -> None:
    run.last_val_pass_rate = validation_pass_rate(run.model, run.tokenizer, run.task, run.config)
    row["val_pass_rate"] = run.last_val_pass_rate
    run.val_curve.append((float(row["flops"]), run.last_val_pass_rate))
    if run.config.forecast.enabled:
        forecast = add_live_forecast(run.config, run.run_dir, run.val_curve, row, run.step)
        if forecast is not None:
            progress.show_forecast(forecast.short_text())


def _emit(run: Run, row: dict[str, Any], progress: RunProgress, on_row: RowCallback | None) -> None:
    run.log.append(row)
    progress.update(run.step, row.get("train_reward"), run.last_val_pass_rate)
    if on_row is not None:
        on_row(row)


def _result(run: Run) -> TrainResult:
    rows = [row for row in run.log.rows() if row.get("val_pass_rate") is not None]
    return TrainResult(run.run_dir, run.step, tuple(r["step"] for r in rows),
                       tuple(float(r["flops"]) for r in rows),
                       tuple(float(r["val_pass_rate"]) for r in rows))


def train(config: TrainConfig, run_dir: str | Path, *, resume: bool = False,
          show_progress: bool = True, on_row: RowCallback | None = None) -> TrainResult:
    """Run (or resume) training into `run_dir`; `on_row` sees each metrics row after it is logged."""
    if config.torch_threads > 0:
        torch.set_num_threads(config.torch_threads)
    run = open_run(config, Path(run_dir), resume)
    progress = ForecastProgress(config.max_steps, enabled=show_progress, start_step=run.step)
    try:
        with progress:
            if run.step == 0:
                row = {"step": 0, **dataclasses.asdict(run.counters), "pool_size": run.pool.active_count}
                _validate_into(run, row, progress)
                _emit(run, row, progress, on_row)
            while run.step < config.max_steps and run.pool.active_count > 0:
                row = run_one_step(run)
                last = run.step == config.max_steps or run.pool.active_count == 0
                if run.step % config.eval_every == 0 or last:
                    _validate_into(run, row, progress)
                _emit(run, row, progress, on_row)
                if run.step % config.checkpoint_every == 0 or last:
                    _checkpoint(run)
            if run.step < config.max_steps:
                progress.note(f"stopped at step {run.step}: every training prompt left the pool")
    finally:
        run.log.close()
    return _result(run)
