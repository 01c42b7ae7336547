"""The state of one training run, in one place, for the synchronous trainer and the pipeline.

`RunState` owns what decides what a run computes and what it has computed beside the trainer's
tensors: the step, the cumulative compute counters, the no-positive-resampling prompt pool, the
prompt RNG (numpy) and the sampling RNG (one torch stream), the validation/checkpoint schedule,
the metrics rows (and the live forecast of each validation row) and the checkpoint's run state.
The synchronous trainer (scalerl.train.trainer) holds one next to its model; the pipeline's
driver (scalerl.distributed.session) holds one while its actors hold the model; both go through
the same methods, so the pipeline with max_lag = 0 reproduces the synchronous run and a pipeline
checkpoint is a synchronous checkpoint.

A checkpoint is the trainer's tensors plus the `RunSnapshot` this state takes
(scalerl.train.run_checkpoint); on resume `RunState.open` reads the newest intact checkpoint
(scalerl.train.checkpoint.resume) before it writes anything.
"""

from __future__ import annotations

import dataclasses
import shutil
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch

from scalerl.forecast.live import LIVE_PLOT_NAME, LiveForecast, live_forecast, projected_budget
from scalerl.report.live_plot import write_live_plot
from scalerl.rl.curriculum import PromptPool, pass_rates_by_prompt
from scalerl.train import flops
from scalerl.train.batch.packed_rollouts import BatchColumns, generation_totals
from scalerl.train.checkpoint.manifest import manifest_path
from scalerl.train.checkpoint.resume import check_rows_for_resume, newest_intact
from scalerl.train.checkpoint.run_lock import RunLock, acquire_run_lock
from scalerl.train.config.train_config import CONFIG_FILE_NAME, TrainConfig, save_config
from scalerl.train.flops import Counters
from scalerl.train.records.metrics_log import METRICS_FILE_NAME, MetricsLog, truncate_after_step
from scalerl.train.run_checkpoint import ResumePoint, RunSnapshot, read_resume_point
from scalerl.train.run_setup import check_resumable, check_run_dir
from scalerl.train.train_step import StepStats


class RunState:
    """Step accounting, schedule, prompt pool, RNG streams and metrics rows of one run."""

    def __init__(
        self, config: TrainConfig, run_dir: str | Path, *, num_train_prompts: int, rng_device: str = "cpu"
    ) -> None:
        self.config, self.run_dir = config, Path(run_dir)
        self.pool = PromptPool(num_train_prompts, threshold=config.rl.npr_threshold, enabled=config.rl.npr)
        self.numpy_rng = np.random.default_rng(config.seed)
        self.rng_device = str(rng_device)
        self.rollout_generator = torch.Generator(device=self.rng_device).manual_seed(config.seed)
        self.counters = Counters()
        self.step = 0
        self.last_val_pass_rate: float | None = None
        self.val_curve: list[tuple[float, float]] = []  # (flops, val_pass_rate) for the live forecast
        self.rows: list[dict[str, Any]] = []
        self.resumed_from: Path | None = None
        self._rng_out = 0  # requests handed out since the stream was last given back
        self.notes: list[str] = []  # what opening the run skipped or dropped (said to the user)
        self.log = MetricsLog.for_config(self.run_dir, config)
        self.lock: RunLock | None = None  # the run folder's lock, held from `open` to `close`
        self.fresh = False  # opened as a new run (not a resume)
        self._closed = False

    @classmethod
    def open(
        cls,
        config: TrainConfig,
        run_dir: str | Path,
        *,
        resume: bool,
        num_train_prompts: int,
        rng_device: str = "cpu",
        weight_shapes: Mapping[str, tuple[int, ...]] | None = None,
        accept_old_checkpoints: bool = False,
    ) -> RunState:
        """Check `run_dir` suits the run, then a fresh state, or on resume the state of its newest
        intact checkpoint (scalerl.train.checkpoint.resume; `weight_shapes`, the model's, when the caller
        knows them) with the metrics rows written after it dropped. A checkpoint without a manifest
        is damaged unless `accept_old_checkpoints` (an older scalerl's: used with a warning).
        config.json is written only once every check passed; `notes` says what the resume skipped
        or dropped.

        The run folder's lock (scalerl.train.checkpoint.run_lock) is taken first and held until `close`: a
        folder another process trains is one ConfigError naming its PID."""
        run_dir = Path(run_dir)
        lock = acquire_run_lock(run_dir)
        try:
            state = cls._open_locked(
                config,
                run_dir,
                resume=resume,
                num_train_prompts=num_train_prompts,
                rng_device=rng_device,
                weight_shapes=weight_shapes,
                accept_old=accept_old_checkpoints,
            )
        except BaseException:
            lock.release(remove_empty_dir=True)
            raise
        state.lock, state.fresh = lock, not resume
        return state

    @classmethod
    def _open_locked(
        cls,
        config: TrainConfig,
        run_dir: Path,
        *,
        resume: bool,
        num_train_prompts: int,
        rng_device: str,
        weight_shapes: Mapping[str, tuple[int, ...]] | None,
        accept_old: bool,
    ) -> RunState:
        check_run_dir(config, run_dir, resume)
        checkpoint, point, notes = None, None, []
        if resume:
            chosen = newest_intact(
                run_dir,
                lambda folder: read_resume_point(
                    folder,
                    config,
                    num_train_prompts=num_train_prompts,
                    rng_device=rng_device,
                    weight_shapes=weight_shapes,
                    accept_old=accept_old,
                ),
            )
            if chosen is not None:
                checkpoint, point, notes = chosen
                if not manifest_path(checkpoint).exists():
                    notes = [
                        *notes,
                        f"warning: {checkpoint} has no manifest (written by an older scalerl): "
                        "its files' checksums cannot be checked",
                    ]
                if point.config is not None:
                    check_resumable(config, point.config, f"checkpoint {checkpoint}")
            notes = [
                *notes,
                *check_rows_for_resume(
                    run_dir / METRICS_FILE_NAME, None if point is None else point.step, config.max_steps
                ),
            ]
        save_config(config, run_dir)
        state = cls(config, run_dir, num_train_prompts=num_train_prompts, rng_device=rng_device)
        state.notes = notes
        if point is not None:
            state._apply(checkpoint, point)
        truncate_after_step(state.log.path, state.step if point is not None else -1)
        if point is not None:
            state.val_curve = [
                (float(row["flops"]), float(row["val_pass_rate"]))
                for row in state.log.rows()
                if row.get("val_pass_rate") is not None
            ]
        return state

    def _apply(self, checkpoint: Path, point: ResumePoint) -> None:
        self.step = point.step
        self.pool = point.pool
        self.counters = point.counters
        self.last_val_pass_rate = point.last_val_pass_rate
        self.rollout_generator.set_state(point.rollout_rng)
        self.numpy_rng.bit_generator.state = point.numpy_rng
        self.resumed_from = checkpoint

    # ------------------------------------------------------------------ prompts and RNG streams

    def sample_prompts(self, num_prompts: int | None = None) -> list[int]:
        """The next step's prompt indices from the pool (prompts_per_step by default)."""
        return self.pool.sample(num_prompts or self.config.sampling.prompts_per_step, self.numpy_rng)

    def update_pool(self, columns: BatchColumns) -> None:
        """Retire the prompts whose pass rate reached the no-positive-resampling threshold.
        `columns`: the step's batch's (PackedRollouts.columns())."""
        self.pool.update_many(pass_rates_by_prompt(columns.prompt_index.tolist(), columns.reward.tolist()))

    def take_rng_state(self) -> torch.Tensor | None:
        """The sampling stream's state for the next request, or None while another request holds
        it (that request's generator then seeds itself with `generation_seed`)."""
        state = self.rollout_generator.get_state() if self._rng_out == 0 else None
        self._rng_out += 1
        return state

    def return_rng_state(self, state: torch.Tensor | None) -> None:
        """A request finished; `state`: its generator's state after it (None: it did not hold the stream)."""
        self._rng_out -= 1
        if state is not None:
            self.rollout_generator.set_state(state)

    # ------------------------------------------------------------------ schedule

    def finished(self) -> bool:
        """max_steps reached, or every training prompt left the pool."""
        return self.step >= self.config.max_steps or self.pool.active_count == 0

    def _last(self, step: int) -> bool:
        return step == self.config.max_steps or self.pool.active_count == 0

    def validation_due(self, step: int) -> bool:
        """Validate at step 0 (R0), every eval_every steps and at the last step."""
        return step == 0 or step % self.config.eval_every == 0 or self._last(step)

    def checkpoint_due(self, step: int) -> bool:
        """Checkpoint every checkpoint_every steps and at the last step."""
        return step > 0 and (step % self.config.checkpoint_every == 0 or self._last(step))

    # ------------------------------------------------------------------ accounting and rows

    def book_step(
        self,
        step: int,
        columns: BatchColumns,
        stats: StepStats,
        *,
        shape: flops.ModelShape,
        wall_seconds: float,
        dropped: Sequence[BatchColumns] = (),
    ) -> dict[str, Any]:
        """Step `step` is done: add its compute (and the generation of `dropped` batches, generated
        but never trained on) to the counters; return its metrics row (not yet appended).
        Batches come as their columns (PackedRollouts.columns(): views, nothing unpacked)."""
        self.step = int(step)
        self._book_generation(shape, columns)
        self.counters.tokens_trained += stats.tokens_trained
        self.counters.flops += flops.training_flops(shape, stats.tokens_trained, stats.trained_context_sum)
        self.counters.flops += flops.recompute_flops(shape, stats.tokens_recomputed, stats.recomputed_context_sum)
        self.counters.device_hours += flops.device_hours(wall_seconds, self.config.num_devices)
        for batch in dropped:
            self._book_generation(shape, batch)
        return self._train_row(columns, stats)

    def _book_generation(self, shape: flops.ModelShape, columns: BatchColumns) -> None:
        generated, context = generation_totals(columns)
        self.counters.samples += len(columns)
        self.counters.tokens_generated += generated
        self.counters.flops += flops.generation_flops(shape, generated, context)

    def _train_row(self, columns: BatchColumns, stats: StepStats) -> dict[str, Any]:
        """The metrics row of one step (TRAIN_COLUMNS first, then diagnostics)."""
        return {
            "step": self.step,
            **dataclasses.asdict(self.counters),
            "train_reward": float(np.mean(columns.reward)),
            "kept_prompts": stats.kept_prompts,
            "pool_size": self.pool.active_count,
            "mean_length": float(np.mean(columns.completion_lengths)),
            "truncation_rate": float(np.mean(columns.truncated)),
            "entropy": stats.entropy,
            "loss": stats.loss,
            "lr": stats.lr,
            "grad_norm": stats.grad_norm,
            "train_pass_rate": float(np.mean(columns.reward > 0)),
            "interruption_rate": float(np.mean(columns.interrupted)),
            "mean_ratio": stats.mean_ratio,
            "clipped_fraction": stats.clipped_fraction,
        }

    def initial_row(self) -> dict[str, Any]:
        """Step 0's row (its validation gives R0)."""
        return {"step": 0, **dataclasses.asdict(self.counters), "pool_size": self.pool.active_count}

    def append(self, row: dict[str, Any]) -> LiveForecast | None:
        """Write one row. A validation row first gets the live forecast (forecast.enabled) of the
        validation curve so far; that forecast is returned."""
        forecast = None
        if row.get("val_pass_rate") is not None:
            self.last_val_pass_rate = row["val_pass_rate"]
            self.val_curve.append((float(row["flops"]), float(row["val_pass_rate"])))
            if self.config.forecast.enabled:
                forecast = add_live_forecast(self.config, self.run_dir, self.val_curve, row, row["step"])
        self.log.append(row)
        self.rows.append(row)
        return forecast

    # ------------------------------------------------------------------ checkpoints

    def snapshot(self) -> RunSnapshot:
        """The run state a checkpoint of the current step saves."""
        return RunSnapshot(
            step=self.step,
            rollout_rng=self.rollout_generator.get_state(),
            rng_device=self.rng_device,
            numpy_rng=self.numpy_rng.bit_generator.state,
            run={
                "pool": self.pool.state_dict(),
                "counters": dataclasses.asdict(self.counters),
                "last_val_pass_rate": self.last_val_pass_rate,
                "config": self.config.to_dict(),
            },
        )

    def close(self) -> None:
        """Close the metrics sinks and let the next writer in (the folder's lock); idempotent."""
        self._close(discard=False)

    def discard_unstarted(self) -> None:
        """`close`; a new run that failed before its first metrics row also leaves nothing behind
        (its config.json and TensorBoard folder removed, the folder too when this run created it),
        so the same command can simply be run again."""
        self._close(discard=True)

    def _close(self, *, discard: bool) -> None:
        if self._closed:
            return
        self._closed = True
        self.log.close()
        unstarted = discard and self.fresh and not self.log.path.exists()
        if unstarted:
            (self.run_dir / CONFIG_FILE_NAME).unlink(missing_ok=True)
            shutil.rmtree(self.run_dir / "tensorboard", ignore_errors=True)
        if self.lock is not None:
            self.lock.release(remove_empty_dir=unstarted)


def generation_seed(config: TrainConfig, step: int) -> int:
    """Seed of step `step`'s sampling generator when the run's stream is held by another request
    (several generators in parallel): a fixed function of (run seed, step)."""
    return int(np.random.SeedSequence([int(config.seed), int(step)]).generate_state(1)[0])


def forecast_budget(config: TrainConfig, flops_so_far: float, step: int) -> float:
    """forecast.budget_flops, or (when 0) the FLOPs at max_steps projected from the rate so far."""
    if config.forecast.budget_flops > 0:
        return config.forecast.budget_flops
    return projected_budget(flops_so_far, step, config.max_steps)


def add_live_forecast(
    config: TrainConfig, run_dir: Path, val_curve: Sequence[tuple[float, float]], row: dict[str, Any], step: int
) -> LiveForecast | None:
    """Refit on the validation curve so far; add the forecast keys to `row` and redraw the live
    plot. Nothing is added while the curve cannot be fitted (scalerl.forecast.live)."""
    flops_axis, pass_rates = zip(*val_curve)
    forecast = live_forecast(
        flops_axis, pass_rates, budget=forecast_budget(config, row["flops"], step), n_draws=config.forecast.n_draws
    )
    if forecast is not None:
        row.update(forecast.row())
        write_live_plot(forecast, flops_axis, pass_rates, Path(run_dir) / LIVE_PLOT_NAME)
    return forecast
