"""The synchronous trainer's building blocks, as the pipeline's actors and driver use them.

Everything that decides what a run computes (task, starting policy, prompt sampling, sampling
settings, rewards, metrics rows, validation and checkpoint cadence, checkpoint format) comes from
scalerl.train.trainer, so that the pipeline with max_lag = 0 reproduces the synchronous run and a
pipeline checkpoint is a synchronous checkpoint. This file only splits that state between the
driver (`RunBooks`: pool, RNG streams, counters, metrics log) and the actors.
"""
from __future__ import annotations

import dataclasses
import time
from collections.abc import Sequence
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import torch

from scalerl.rl.curriculum import PromptPool, pass_rates_by_prompt
from scalerl.train import flops, trainer
from scalerl.train.checkpoint import latest_checkpoint, load_checkpoint, save_checkpoint, training_file
from scalerl.train.generation import generate_rollouts
from scalerl.train.metrics_log import MetricsLog, truncate_after_step
from scalerl.tasks.rollout import Rollout
from scalerl.train.validation import length_control, sampling_settings, validation_pass_rate

ROLLOUT_GENERATOR = "rollout"  # the synchronous trainer's name for its sampling generator


# ----------------------------------------------------------------------------- actors' side


def build_task(config):
    return trainer.build_task(config)


def build_trainer_policy(config, *, warm_start: bool = True):
    """The starting policy exactly as the synchronous trainer builds it (warm start cached)."""
    if not warm_start:
        return trainer.fresh_policy(config)
    return trainer.build_policy(config, trainer.build_task(config))


def build_generator_policy(config):
    """Architecture and tokenizer only: a generator's weights always come from the registry."""
    return trainer.fresh_policy(config)


def build_optimisation(model, config):
    from scalerl.train.train_step import build_optimizer, build_scheduler

    optimizer = build_optimizer(model, config.optim)
    return optimizer, build_scheduler(optimizer, config.optim.warmup_steps)


def generation_seed(config, step: int) -> int:
    """Seed of step `step`'s sampling generator when the chained stream is not available
    (several generators in parallel): a fixed function of (run seed, step)."""
    return int(np.random.SeedSequence([int(config.seed), int(step)]).generate_state(1)[0])


def score_rollouts(task, config, rollouts: Sequence[Rollout]) -> list[Rollout]:
    """Verifier rewards, as the synchronous trainer fills them in (penalty applied at training)."""
    examples = task.train
    return [r.with_reward(task.reward(r.completion_text, examples[r.prompt_index])) for r in rollouts]


def generate_step_rollouts(model, tokenizer, task, config, prompt_indices: Sequence[int], *,
                           seed: int, rng_state: torch.Tensor | None, policy_version: int,
                           weight_update_hook=None) -> tuple[list[Rollout], torch.Tensor]:
    """The synchronous trainer's generation of one step; returns (rollouts, generator state after).

    With `rng_state` the sampling generator continues the run's single stream (what the
    synchronous trainer does); otherwise it is seeded with `seed`.
    """
    device = next(model.parameters()).device
    generator = torch.Generator(device=device)
    if rng_state is not None:
        generator.set_state(rng_state)
    else:
        generator.manual_seed(int(seed))
    indices = [int(i) for i in prompt_indices]
    rollouts = generate_rollouts(
        model, tokenizer, [task.train[i].prompt for i in indices], indices,
        num_generations=config.sampling.generations_per_prompt, sampling=sampling_settings(config),
        length_control=length_control(config), torch_generator=generator,
        policy_version=policy_version, weight_update_hook=weight_update_hook)
    return score_rollouts(task, config, rollouts), generator.get_state()


def training_rewards(rollouts, config):
    return trainer.training_rewards(list(rollouts), config)


def validation(model, tokenizer, task, config) -> float:
    return validation_pass_rate(model, tokenizer, task, config)


def restore_trainer(worker, checkpoint_dir: str) -> int:
    """Load weights, optimiser and LR schedule of a synchronous-format checkpoint; its step."""
    step, _ = load_checkpoint(
        checkpoint_dir, model=worker.model, optimizer=worker.optimizer, scheduler=worker.scheduler,
        torch_generators={ROLLOUT_GENERATOR: torch.Generator()},
        numpy_rng=np.random.default_rng(0))
    return step


def save_trainer_checkpoint(worker, run_dir: str, step: int, driver_state: dict) -> Path:
    """The synchronous trainer's checkpoint: the worker's tensors plus the driver's run state."""
    generator = torch.Generator()
    generator.set_state(torch.tensor(driver_state["rollout_rng"], dtype=torch.uint8))
    numpy_rng = np.random.default_rng(0)
    numpy_rng.bit_generator.state = driver_state["numpy_rng"]
    return save_checkpoint(
        run_dir, step, model=worker.model, optimizer=worker.optimizer, scheduler=worker.scheduler,
        torch_generators={ROLLOUT_GENERATOR: generator}, numpy_rng=numpy_rng,
        state=driver_state["run"], keep=worker.config.keep_checkpoints, tokenizer=worker.tokenizer)


# ----------------------------------------------------------------------------- driver's side


class RunBooks:
    """Driver-side state of a run: pool, prompt RNG, sampling-RNG chain, counters, metrics log."""

    def __init__(self, config, run_dir: Path, *, checkpoint: Path | None) -> None:
        self.config, self.run_dir, self.checkpoint = config, run_dir, checkpoint
        task = trainer.build_task(config)
        self.pool = PromptPool(len(task.train), threshold=config.rl.npr_threshold,
                               enabled=config.rl.npr)
        self.numpy_rng = np.random.default_rng(config.seed)
        self.rollout_rng = torch.Generator().manual_seed(config.seed).get_state()
        self.counters = trainer.Counters()
        self.step = 0
        self.last_val_pass_rate = None
        self.rows: list[dict] = []
        self.val_curve: list[tuple[float, float]] = []  # (flops, val_pass_rate) for the live forecast
        self.in_flight = 0
        self.last_row_time = time.perf_counter()
        self.log = MetricsLog.for_config(run_dir, config)
        if checkpoint is not None:
            self._restore(checkpoint)
        truncate_after_step(self.log.path, self.step if checkpoint is not None else -1)
        if checkpoint is not None:
            self.val_curve = [(float(row["flops"]), float(row["val_pass_rate"])) for row in self.log.rows()
                              if row.get("val_pass_rate") is not None]

    @classmethod
    def start(cls, config, run_dir: Path, *, resume: bool) -> "RunBooks":
        """Check/prepare the run directory as the synchronous trainer does; restore on resume."""
        trainer.prepare_run_dir(config, run_dir, resume)
        return cls(config, run_dir, checkpoint=latest_checkpoint(run_dir) if resume else None)

    def _restore(self, checkpoint: Path) -> None:
        import json

        from safetensors.torch import load_file

        state = json.loads(training_file(checkpoint, "state.json").read_text())
        self.step = int(state["step"])
        self.numpy_rng.bit_generator.state = state["numpy_rng"]
        self.rollout_rng = load_file(str(training_file(checkpoint, "rng.safetensors")))[f"generator/{ROLLOUT_GENERATOR}"]
        self.pool = PromptPool.from_state_dict(state["run"]["pool"])
        self.counters = trainer.Counters(**state["run"]["counters"])
        self.last_val_pass_rate = state["run"].get("last_val_pass_rate")

    def trainer_resume_state(self) -> str | None:
        return None if self.checkpoint is None else str(self.checkpoint)

    def sample_prompts(self, num_prompts: int | None = None) -> list[int]:
        return self.pool.sample(num_prompts or self.config.sampling.prompts_per_step, self.numpy_rng)

    def take_chained_rng_state(self) -> torch.Tensor | None:
        """The run's sampling stream for the next request, if no other request holds it."""
        state = self.rollout_rng if self.in_flight == 0 else None
        self.in_flight += 1
        return state

    def chain_rng_state(self, state: torch.Tensor) -> None:
        self.in_flight -= 1
        self.rollout_rng = state

    def update_pool(self, rollouts: Sequence[Rollout]) -> None:
        self.pool.update_many(pass_rates_by_prompt([r.prompt_index for r in rollouts],
                                                   [r.reward for r in rollouts]))

    def _view(self, shape) -> SimpleNamespace:
        """What the synchronous trainer's accounting and row functions read from its Run."""
        return SimpleNamespace(config=self.config, counters=self.counters, pool=self.pool,
                               shape=shape, step=self.step)

    def step_row(self, step: int, rollouts, stats, extras: dict, *, model_shape,
                 dropped: Sequence[Sequence[Rollout]] = (), excluded_seconds: float = 0.0) -> dict:
        """Account a step like the synchronous trainer (plus dropped batches' generation).

        The step's wall time runs from the previous step's row, minus `excluded_seconds`
        (evaluation during that time, which the synchronous trainer does not count either).
        """
        now = time.perf_counter()
        self.step = int(step)
        view = self._view(model_shape)
        wall_seconds = max(0.0, now - self.last_row_time - excluded_seconds)
        trainer.account_step(view, list(rollouts), stats, wall_seconds)
        for batch in dropped:
            book_generation_only(self.counters, model_shape, batch)
        self.last_row_time = now
        return {**trainer.train_row(view, list(rollouts), stats), **extras}

    def validation_due(self, step: int) -> bool:
        last = step == self.config.max_steps or self.pool.active_count == 0
        return step == 0 or step % self.config.eval_every == 0 or last

    def checkpoint_due(self, step: int) -> bool:
        last = step == self.config.max_steps or self.pool.active_count == 0
        return step > 0 and (step % self.config.checkpoint_every == 0 or last)

    def initial_row(self) -> dict:
        return {"step": 0, **dataclasses.asdict(self.counters), "pool_size": self.pool.active_count}

    def append(self, row: dict) -> None:
        """Write one row; a validation row first gets the live forecast (as in the synchronous
        trainer: scalerl.forecast.live, on the driver while the actors keep working)."""
        if row.get("val_pass_rate") is not None:
            self.last_val_pass_rate = row["val_pass_rate"]
            self.val_curve.append((float(row["flops"]), float(row["val_pass_rate"])))
            if self.config.forecast.enabled:
                trainer.add_live_forecast(self.config, self.run_dir, self.val_curve, row, row["step"])
        self.log.append(row)
        self.rows.append(row)

    def driver_state(self) -> dict[str, Any]:
        """Run state for a synchronous-format checkpoint (JSON-serialisable)."""
        return {"rollout_rng": self.rollout_rng.tolist(),
                "numpy_rng": self.numpy_rng.bit_generator.state,
                "run": {"pool": self.pool.state_dict(), "counters": dataclasses.asdict(self.counters),
                        "last_val_pass_rate": self.last_val_pass_rate}}

    def close(self) -> None:
        self.log.close()


def book_generation_only(counters, shape, rollouts: Sequence[Rollout]) -> None:
    """Generation compute of a batch that was generated but never trained on (dropped as stale)."""
    generated = sum(r.num_completion_tokens for r in rollouts)
    context = sum(flops.context_token_sum(len(r.prompt_token_ids), r.num_completion_tokens)
                  for r in rollouts)
    counters.samples += len(rollouts)
    counters.tokens_generated += generated
    counters.flops += flops.generation_flops(shape, generated, context)
