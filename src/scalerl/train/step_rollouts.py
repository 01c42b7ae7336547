"""One step's rollouts, shared by the synchronous trainer and the pipeline's actors: generated on
the step's training prompts with the run's sampling and length control (scalerl.train.generation's
decoder, its sequences packed as it records them or made Rollouts), scored by the task's verifier
(or the user's reward functions), and the rewards the policy is trained on (the verifier's plus
DAPO's overlong penalty). The pipeline with max_lag = 0 reproduces the synchronous run because
both call these very functions. Under torchrun every rank generates its contiguous shard of the
step's prompts with the whole batch's random draws, scores it, and the scored shards are gathered
in rank order (`generate_together`): every rank holds the batch one process would have generated,
and its sampling stream ends where one process's would.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import torch

from scalerl.errors import ConfigError
from scalerl.tasks.custom_reward import RewardTrainerState
from scalerl.tasks.rollout import LengthControl, Rollout, SamplingSettings
from scalerl.tasks.types import Task
from scalerl.train.batch.packed_rollouts import (
    PackedRollouts,
    concat_packed,
    pack_decoded,
    pack_rollouts,
    unpack_rollouts,
)
from scalerl.train.config.step_recipe import StepRecipe
from scalerl.train.config.train_config import TrainConfig
from scalerl.train.generation import WeightUpdateHook, completion_text, decode_prompts, skip_decoding_steps
from scalerl.train.parallel.data_parallel import (
    StepPlan,
    all_gather_objects,
    all_reduce_max,
    rank_and_world_size,
    shard_rows,
)


def generate_rollouts(
    model: torch.nn.Module, tokenizer: Any, prompts: Sequence[str], prompt_indices: Sequence[int], **options: Any
) -> list[Rollout]:
    """`generate_packed`'s batch (its keyword `options`: num_generations, sampling, length_control,
    torch_generator, policy_version, weight_update_hook) unpacked into one Rollout per completion,
    rewards left at 0.0.

    Rollouts come grouped: prompt 0's generations first (group_index 0), then prompt 1's, ...
    Log-probs are those of the temperature-1 policy distribution softmax(logits) (what the
    trainer recomputes), whatever temperature/top-k/top-p/repetition penalty the sampling used. With length control
    "interrupt", each sequence's thinking budget is drawn from `torch_generator` before decoding.
    """
    packed, _ = generate_packed(model, tokenizer, prompts, prompt_indices, **options)
    return unpack_rollouts(packed)


def generate_packed(
    model: torch.nn.Module,
    tokenizer: Any,
    prompts: Sequence[str],
    prompt_indices: Sequence[int],
    *,
    num_generations: int,
    sampling: SamplingSettings,
    length_control: LengthControl,
    torch_generator: torch.Generator,
    policy_version: int = 0,
    weight_update_hook: WeightUpdateHook | None = None,
    prompt_rows: slice = slice(None),
) -> tuple[PackedRollouts, int]:
    """The sampled completions packed as the decoder records them (no Rollout is built), rewards
    0.0, and the number of decoding steps made: the whole batch, or the shard of the prompts in
    `prompt_rows` with the random draws of all of them (every sequence's thinking budget is drawn
    and each decoding step draws every sequence's noise, the shard's sequences using their own
    rows; group indices are those of the whole batch). Processes that each generate one shard,
    then advance their generator to the largest count (`skip_decoding_steps`), sample exactly
    what one process samples for the whole batch and end with its generator state."""
    decoded = decode_prompts(
        model,
        tokenizer,
        prompts,
        prompt_indices,
        num_generations=num_generations,
        sampling=sampling,
        length_control=length_control,
        torch_generator=torch_generator,
        policy_version=policy_version,
        weight_update_hook=weight_update_hook,
        prompt_rows=prompt_rows,
        record_grid=True,
    )
    if decoded is None:
        return pack_rollouts([]), 0
    prompt_ids, first, states, steps, grid = decoded
    first_prompt, stop_prompt = first // num_generations, (first + len(states)) // num_generations
    texts = [completion_text(state, tokenizer) for state in states]
    packed = pack_decoded(
        grid,
        prompt_ids[first_prompt:stop_prompt],
        prompt_indices[first_prompt:stop_prompt],
        num_generations,
        texts,
        truncated=[not state.finished for state in states],
        interrupted=[state.interrupted for state in states],
        first_group=first_prompt,
    )
    return packed, steps


def verifier_rewards(
    task: Task, texts: Sequence[str], prompt_indices: Sequence[int], global_step: int | None = None
) -> list[float]:
    """The verifier's reward of each completion text of training prompt `prompt_indices[i]`; a
    task with a batch `rewards` method (user reward functions) is called once for all of them,
    told `global_step` (optimiser steps done: the newest weight version that sampled them) in
    TRL's trainer_state."""
    examples = [task.train[int(i)] for i in prompt_indices]
    batch_rewards = getattr(task, "rewards", None)
    if batch_rewards is not None:
        state = None if global_step is None else RewardTrainerState(global_step, getattr(task, "max_steps", 0))
        return [float(value) for value in batch_rewards(list(texts), examples, state)]
    return [float(task.reward(text, example)) for text, example in zip(texts, examples)]


def score_batch(task: Task, packed: PackedRollouts) -> PackedRollouts:
    """The verifier's reward of each rollout, read from its completion text (the length penalty
    is added at training), told the newest weight version behind the batch; an empty batch is
    returned as it is (no reward function is called)."""
    if not len(packed):
        return packed
    text, offsets = packed.text_bytes.tobytes(), packed.text_offsets.tolist()
    texts = [text[start:end].decode("utf-8") for start, end in zip(offsets, offsets[1:])]
    global_step = int(packed.versions.max()) if packed.versions.size else 0
    rewards = verifier_rewards(task, texts, packed.prompt_index.tolist(), global_step)
    return packed.with_rewards(np.array(rewards, dtype=np.float64))


def generate_step(
    model: torch.nn.Module,
    tokenizer: Any,
    task: Task,
    recipe: StepRecipe,
    prompt_indices: Sequence[int],
    *,
    torch_generator: torch.Generator,
    policy_version: int,
    weight_update_hook: Callable[[], int | None] | None = None,
) -> PackedRollouts:
    """One step's rollouts: G generations of each training prompt, sampled with `torch_generator`
    with the run's sampling and length control (resolved in `recipe`), packed as the decoder records them
    (generate_packed), scored. The synchronous trainer and the pipeline's generators
    both call it."""
    indices = [int(i) for i in prompt_indices]
    packed, _ = generate_packed(
        model,
        tokenizer,
        [task.train[i].prompt for i in indices],
        indices,
        num_generations=recipe.config.sampling.generations_per_prompt,
        sampling=recipe.sampling,
        length_control=recipe.length_control,
        torch_generator=torch_generator,
        policy_version=policy_version,
        weight_update_hook=weight_update_hook,
    )
    return score_batch(task, packed)


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


def overlong_length_penalty(lengths: torch.Tensor | Sequence[int], max_len: int, cache_len: int) -> torch.Tensor:
    """DAPO's soft overlong punishment (arXiv 2503.14476, eq. 13), added to the reward; float32
    tensor shaped like `lengths`.

    R_len(L) = 0                              if L <= max_len - cache_len
             = (max_len - cache_len - L) / cache_len   if max_len - cache_len < L <= max_len
             = -1                             if L > max_len
    """
    if cache_len <= 0 or cache_len > max_len:
        raise ConfigError(f"cache_len must be in (0, max_len={max_len}], got {cache_len}")
    lengths = torch.as_tensor(lengths, dtype=torch.float32)
    soft_start = max_len - cache_len
    ramp = (soft_start - lengths) / cache_len
    penalty = torch.where(lengths <= soft_start, torch.zeros_like(lengths), ramp)
    return torch.where(lengths > max_len, torch.full_like(lengths, -1.0), penalty)


def training_rewards(packed: PackedRollouts, config: TrainConfig) -> PackedRollouts:
    """Rewards the policy is trained on: the verifier's, plus DAPO's overlong penalty in
    "penalty" mode (max_len = max_new_tokens, cache = penalty_cache_tokens)."""
    if config.sampling.length_control != "penalty":
        return packed
    penalties = overlong_length_penalty(
        np.diff(packed.completion_offsets).tolist(),
        config.sampling.max_new_tokens,
        config.sampling.penalty_cache_tokens,
    )
    return packed.with_rewards(packed.reward + np.array(penalties.tolist(), dtype=np.float64))
