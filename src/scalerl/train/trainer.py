"""The synchronous reference trainer: orchestration only (the maths lives in scalerl.rl,
`train_step`, `flops`; generation and tasks in their own modules).

Each step: sample P prompts from the curriculum pool -> G generations each (KV cache, generator
log-probs recorded) -> rewards from the task's verifier (+ the length penalty in "penalty" mode)
-> `train_step` -> update the no-positive-resampling pool -> one metrics row (+ validation every
`eval_every` steps, at step 0 giving R0, and at the last step, each followed by the live forecast
of scalerl.forecast.live when forecast.enabled) -> checkpoint every
`checkpoint_every` steps. `--resume` restarts from the last checkpoint, drops the metrics rows
written after it and reproduces the uninterrupted run (RNG states are part of the checkpoint).
Under torchrun rank 0 runs this loop and every other rank follows its step plans (`follow`;
scalerl.train.parallel.data_parallel).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from scalerl.models.lora import require_peft
from scalerl.tasks.custom_reward import RewardFunction
from scalerl.tasks.types import Task
from scalerl.train import flops
from scalerl.train.batch.packed_rollouts import PackedRollouts
from scalerl.train.checkpoint.save_load import checkpoint_folders, weight_shapes_of
from scalerl.train.config.step_recipe import StepRecipe, step_recipe
from scalerl.train.config.train_config import TrainConfig
from scalerl.train.guards.context_check import check_prompt_lengths
from scalerl.train.guards.divergence_guard import DivergenceGuard, guard_for, require_finite_validation
from scalerl.train.guards.interrupt import STOPPING_NOTE, StopRequest, stop_on_interrupt
from scalerl.train.held_out import PASS_RATE_COLUMN, validation_pass_rates
from scalerl.train.lora_policy import run_policy
from scalerl.train.parallel.data_parallel import (
    announce_start,
    announce_step,
    announce_stop,
    broadcast_model_state,
    broadcast_object,
    init_from_environment,
    joins_from_environment,
    leave_process_group,
    rank_and_world_size,
)
from scalerl.train.records.progress import RunProgress
from scalerl.train.run_checkpoint import restore_training, save_run_checkpoint
from scalerl.train.run_setup import build_optimisation, build_task, check_paths, reference_policy, with_device_resolved
from scalerl.train.run_state import RunState
from scalerl.train.step_rollouts import generate_step, generate_together, training_rewards
from scalerl.train.train_step import guarded_train_step

RowCallback = Callable[[dict[str, Any]], None]


@dataclass
class Run:
    """The live objects of a synchronous run: the trainer's tensors next to the run's state."""

    config: TrainConfig
    model: torch.nn.Module
    tokenizer: Any
    task: Task
    optimizer: torch.optim.Optimizer
    scheduler: Any
    shape: flops.ModelShape
    state: RunState
    reference: torch.nn.Module | None = None  # frozen starting policy of a KL penalty (else None)
    guard: DivergenceGuard | None = None  # non-finite steps: skip (train.skip_nonfinite_steps) or stop
    recipe: StepRecipe | None = None  # the config resolved for every step (step_recipe)

    def __post_init__(self) -> None:
        if self.guard is None:
            self.guard = guard_for(self.config)
        if self.recipe is None:
            self.recipe = step_recipe(self.config)

    @property
    def step(self) -> int:
        return self.state.step

    @property
    def run_dir(self) -> Path:
        return self.state.run_dir


@dataclass(frozen=True)
class RunResult:
    """What a finished run produced: its directory, the last step and the validation curve."""

    run_dir: Path
    last_step: int
    val_steps: tuple[int, ...]
    val_flops: tuple[float, ...]
    val_pass_rates: tuple[float, ...]
    interrupted: bool = False  # stopped by Ctrl-C or SIGTERM (a checkpoint of the last step was written)
    exit_code: int = 130  # when interrupted: 128 + the signal (130 Ctrl-C, 143 SIGTERM)
    rank: int = 0  # under torchrun, this process's rank (rank 0 alone writes the run and reports it)


def open_run(
    config: TrainConfig,
    run_dir: Path,
    resume: bool,
    reward_functions: Sequence[RewardFunction] = (),
    *,
    accept_old_checkpoints: bool = False,
) -> Run:
    """A fresh run, or the run restored from its last checkpoint (later metrics rows dropped).

    Paths and the task are checked before anything is written into `run_dir`. On resume the
    bare architecture is built first, so that checkpoints whose weights do not fit it are skipped
    like any damaged checkpoint. The run state holds the folder's lock (scalerl.train.checkpoint.run_lock);
    a new run that fails before its first row leaves no folder behind."""
    check_paths(config)
    if config.model.lora_r > 0:
        require_peft()  # before the run folder is made
    task = build_task(config, reward_functions)
    bare = run_policy(config, task, resuming=True) if resume and checkpoint_folders(run_dir) else None
    state = RunState.open(
        config,
        run_dir,
        resume=resume,
        num_train_prompts=len(task.train),
        rng_device=config.device,
        weight_shapes=None if bare is None else weight_shapes_of(bare[0]),
        accept_old_checkpoints=accept_old_checkpoints,
    )
    try:
        resumed = state.resumed_from is not None
        model, tokenizer = bare if resumed else run_policy(config, task, resuming=False)
        check_prompt_lengths(task, tokenizer, model, config.sampling.max_new_tokens)
        optimizer, scheduler = build_optimisation(model, config)
        if state.resumed_from is not None:
            restore_training(state.resumed_from, model=model, optimizer=optimizer, scheduler=scheduler)
        return Run(
            config=config,
            model=model,
            tokenizer=tokenizer,
            task=task,
            optimizer=optimizer,
            scheduler=scheduler,
            shape=flops.model_shape(model),
            state=state,
            reference=reference_policy(config, task),
        )
    except BaseException:
        state.discard_unstarted()  # e.g. a --model that does not load: no half-made run folder
        raise


def _generate(run: Run) -> PackedRollouts:
    """P prompts from the pool x G generations, packed, rewards filled in by the task's verifier
    (under torchrun each rank generates its shard of the prompts: step_rollouts.generate_together)."""
    state = run.state
    if rank_and_world_size()[1] > 1:
        plan = announce_step(run.step + 1, state.sample_prompts(), state.rollout_generator)
        return generate_together(run.model, run.tokenizer, run.task, run.recipe, plan, state.rollout_generator)
    return generate_step(
        run.model,
        run.tokenizer,
        run.task,
        run.recipe,
        state.sample_prompts(),
        torch_generator=state.rollout_generator,
        policy_version=state.step,
    )


def run_one_step(run: Run) -> dict[str, Any]:
    """Generate, reward, update, account; return the step's metrics row (step = run.step + 1)."""
    started = time.perf_counter()
    rollouts = _generate(run)
    stats = guarded_train_step(
        run.guard,
        run.step + 1,
        run.model,
        run.optimizer,
        run.scheduler,
        training_rewards(rollouts, run.config),
        run.recipe,
        reference=run.reference,
    )
    columns = rollouts.columns()
    run.state.update_pool(columns)
    row = run.state.book_step(run.step + 1, columns, stats, shape=run.shape, wall_seconds=time.perf_counter() - started)
    if stats.nonfinite:
        row["nonfinite"] = stats.nonfinite  # the warning `_write` shows (not a column)
    return row


def _checkpoint(run: Run) -> None:
    save_run_checkpoint(
        run.run_dir,
        run.state.snapshot(),
        model=run.model,
        optimizer=run.optimizer,
        scheduler=run.scheduler,
        keep=run.config.keep_checkpoints,
        tokenizer=run.tokenizer,
    )


def _write(run: Run, row: dict[str, Any], validate: bool, progress: RunProgress, on_row: RowCallback | None) -> None:
    """Validate into the row when due, append it (with its live forecast), report it."""
    if validate:
        rates = validation_pass_rates(
            run.model, run.tokenizer, run.task, run.config, run_dir=run.run_dir, step=row["step"]
        )
        require_finite_validation(row["step"], rates[PASS_RATE_COLUMN])
        row.update(rates)
    if row.get("nonfinite"):
        progress.note(row.pop("nonfinite"))
    forecast = run.state.append(row)
    progress.show_row(row, run.state.last_val_pass_rate, forecast)
    if on_row is not None:
        on_row(row)


def _result(run: Run, stop: StopRequest) -> RunResult:
    rows = [row for row in run.state.log.rows() if row.get("val_pass_rate") is not None]
    return RunResult(
        run.run_dir,
        run.step,
        tuple(r["step"] for r in rows),
        tuple(float(r["flops"]) for r in rows),
        tuple(float(r["val_pass_rate"]) for r in rows),
        stop.requested,
        stop.exit_code,
    )


def _run_loop(run: Run, progress: RunProgress, on_row: RowCallback | None, stop: StopRequest) -> None:
    """Step 0's validation, then steps until the run is finished or Ctrl-C asked it to stop."""
    state = run.state
    if run.step == 0:
        _write(run, state.initial_row(), True, progress, on_row)
    while not state.finished() and not stop.requested:
        row = run_one_step(run)
        _write(run, row, state.validation_due(run.step), progress, on_row)
        if state.checkpoint_due(run.step):
            _checkpoint(run)
    if rank_and_world_size()[1] > 1:
        announce_stop()
    if stop.requested:
        if run.step > 0 and not state.checkpoint_due(run.step):
            _checkpoint(run)
        progress.note(f"interrupted: checkpoint of step {run.step} written; continue with --resume")
    elif run.step < run.config.max_steps:
        progress.note(f"stopped at step {run.step}: every training prompt left the pool")


def train(
    config: TrainConfig,
    run_dir: str | Path,
    *,
    resume: bool = False,
    show_progress: bool = True,
    on_row: RowCallback | None = None,
    reward_functions: Sequence[RewardFunction] = (),
    accept_old_checkpoints: bool = False,
) -> RunResult:
    """Run (or resume) training into `run_dir`; `on_row` sees each metrics row after it is logged;
    `reward_functions` (callables, TRL's reward_funcs convention) replace task.reward's;
    `accept_old_checkpoints`: a resume may use a checkpoint without a manifest (else damaged).

    Ctrl-C or SIGTERM (in the main thread) stops the run after the step it is in, with a
    checkpoint of that step: the result says `interrupted` (and the exit code, 130 or 143) and
    `resume=True` continues it; a second signal stops at once (KeyboardInterrupt).

    Under torchrun (WORLD_SIZE > 1) every rank calls this: rank 0 runs and writes the run, the
    others follow it (`follow`) and return its last step with their rank;
    the process group this joins is left at the end (data_parallel.leave_process_group)."""
    config = with_device_resolved(config)
    if config.torch_threads > 0:
        torch.set_num_threads(config.torch_threads)
    joins = joins_from_environment()
    rank, world_size = init_from_environment(config.device)
    completed = False
    try:
        result = _train_rank(
            config,
            Path(run_dir),
            resume,
            show_progress,
            on_row,
            reward_functions,
            rank,
            world_size,
            accept_old_checkpoints,
        )
        completed = True
        return result
    finally:
        if joins:
            leave_process_group(completed)


def follow(config: TrainConfig, reward_functions: Sequence[RewardFunction] = ()) -> int:
    """A rank > 0: build the policy as rank 0 did, take its starting point, then generate and train
    each announced step until rank 0 says stop; returns the last step. Ctrl-C and SIGTERM are left
    to rank 0 (which stops every rank after the step in progress)."""
    resumed_from = broadcast_object()
    task = build_task(config, reward_functions)
    model, tokenizer = run_policy(config, task, resuming=True)  # its weights come from rank 0 or the checkpoint
    optimizer, scheduler = build_optimisation(model, config)
    if resumed_from is None:
        broadcast_model_state(model)
    else:
        restore_training(resumed_from, model=model, optimizer=optimizer, scheduler=scheduler)
    reference, guard, recipe = reference_policy(config, task), guard_for(config), step_recipe(config)
    generator = torch.Generator(device=config.device)
    last_step = 0
    with stop_on_interrupt():
        while (plan := broadcast_object()) is not None:
            generator.set_state(plan.rng_state)
            rollouts = generate_together(model, tokenizer, task, recipe, plan, generator)
            guarded_train_step(
                guard,
                plan.step,
                model,
                optimizer,
                scheduler,
                training_rewards(rollouts, config),
                recipe,
                reference=reference,
            )
            last_step = plan.step
    return last_step


def _train_rank(
    config: TrainConfig,
    run_dir: Path,
    resume: bool,
    show_progress: bool,
    on_row: RowCallback | None,
    reward_functions: Sequence[RewardFunction],
    rank: int,
    world_size: int,
    accept_old_checkpoints: bool = False,
) -> RunResult:
    """train() on one rank, in a joined process group (or alone)."""
    if rank > 0:
        return RunResult(Path(run_dir), follow(config, reward_functions), (), (), (), rank=rank)
    run = open_run(config, Path(run_dir), resume, reward_functions, accept_old_checkpoints=accept_old_checkpoints)
    if world_size > 1:
        announce_start(run.state.resumed_from, run.model)
    state = run.state
    progress = RunProgress(config.max_steps, enabled=show_progress, start_step=run.step)
    try:
        with progress, stop_on_interrupt(lambda: progress.note(STOPPING_NOTE)) as stop:
            for note in state.notes:
                progress.note(note)
            _run_loop(run, progress, on_row, stop)
    except BaseException:
        state.discard_unstarted()
        raise
    finally:
        state.close()
    return _result(run, stop)
