"""The synchronous trainer on several processes (`torchrun --nproc-per-node N -m scalerl.cli train ...`):
rank 0 runs the run as a single process does (run folder and its lock, metrics, validation,
checkpoints; scalerl.train.trainer) and every other rank follows it.

At the start rank 0 says which checkpoint it resumed from (the others restore the same one) or
sends its starting weights (warm start and LoRA adapters included). Each step rank 0 broadcasts a
`StepPlan` (the prompts it sampled, the state of the run's sampling stream); every rank generates
its contiguous shard of the prompts with the whole batch's random draws, packed as it is decoded
(step_rollouts.generate_packed), scores it, and the scored shards are gathered in rank order:
every rank holds the batch one process would have generated, its stream ends where
one process's would, and `train_step` is data parallel over the ranks (data_parallel.py). When the
run stops (its last step, every prompt retired, Ctrl-C or SIGTERM) rank 0 broadcasts None and
every rank stops after the same step.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from scalerl.tasks.custom_reward import RewardFunction
from scalerl.tasks.types import Task
from scalerl.train.batch.packed_rollouts import PackedRollouts, concat_packed
from scalerl.train.config.step_recipe import StepRecipe, step_recipe
from scalerl.train.config.train_config import TrainConfig
from scalerl.train.generation import skip_decoding_steps
from scalerl.train.guards.divergence_guard import guard_for
from scalerl.train.guards.interrupt import stop_on_interrupt
from scalerl.train.lora_policy import run_policy
from scalerl.train.parallel.data_parallel import (
    all_gather_objects,
    all_reduce_max,
    broadcast_model_state,
    broadcast_object,
    rank_and_world_size,
    shard_rows,
)
from scalerl.train.run_checkpoint import restore_training
from scalerl.train.run_setup import build_optimisation, build_task, reference_policy
from scalerl.train.step_rollouts import generate_packed, score_batch, training_rewards
from scalerl.train.train_step import guarded_train_step


@dataclass(frozen=True)
class StepPlan:
    """What every rank needs to generate step `step`: the prompts and the sampling stream's state."""

    step: int
    prompt_indices: tuple[int, ...]
    rng_state: torch.Tensor


def announce_start(resumed_from: Path | None, model: torch.nn.Module) -> None:
    """Rank 0, once its run is open: the checkpoint it resumed from, else its starting weights."""
    broadcast_object(None if resumed_from is None else str(resumed_from))
    if resumed_from is None:
        broadcast_model_state(model)


def announce_step(step: int, prompt_indices: Sequence[int], generator: torch.Generator) -> StepPlan:
    """Rank 0: send (and return) the plan of step `step`."""
    plan = StepPlan(step=step, prompt_indices=tuple(int(i) for i in prompt_indices), rng_state=generator.get_state())
    broadcast_object(plan)
    return plan


def announce_stop() -> None:
    """Rank 0: the run stops; every rank leaves its loop."""
    broadcast_object(None)


def generate_together(
    model: torch.nn.Module, tokenizer: Any, task: Task, recipe: StepRecipe, plan: StepPlan, generator: torch.Generator
) -> PackedRollouts:
    """This rank's shard of the plan's prompts x G generations, scored, then every rank's shards
    gathered and packed: the whole batch, in the order one process generates it. `generator` (in
    the plan's state) ends where the whole batch's generation leaves it."""
    rank, world_size = rank_and_world_size()
    indices = list(plan.prompt_indices)
    generations = recipe.config.sampling.generations_per_prompt
    shard, steps = generate_packed(
        model,
        tokenizer,
        [task.train[i].prompt for i in indices],
        indices,
        num_generations=generations,
        sampling=recipe.sampling,
        length_control=recipe.length_control,
        torch_generator=generator,
        policy_version=plan.step - 1,
        prompt_rows=shard_rows(len(indices), rank, world_size),
    )
    vocab_size = model.get_output_embeddings().weight.shape[0]
    skip_decoding_steps(generator, all_reduce_max(steps) - steps, len(indices) * generations, vocab_size)
    scored = score_batch(task, shard)
    return concat_packed(all_gather_objects(scored))


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
