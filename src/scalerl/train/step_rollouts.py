"""One step's rollouts, shared by the synchronous trainer and the pipeline's actors: generated on
the step's training prompts with the run's sampling and length control, scored by the task's
verifier (or the user's reward functions), and the rewards the policy is trained on (the
verifier's plus DAPO's overlong penalty). The pipeline with max_lag = 0 reproduces the
synchronous run because both call these very functions.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import torch

from scalerl.rl.length_control import overlong_length_penalty
from scalerl.tasks.custom_reward import RewardTrainerState
from scalerl.tasks.types import Task
from scalerl.train.batch.packed_rollouts import PackedRollouts
from scalerl.train.config.generation_settings import length_control, sampling_settings
from scalerl.train.config.train_config import TrainConfig
from scalerl.train.generation import generate_packed


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
    config: TrainConfig,
    prompt_indices: Sequence[int],
    *,
    torch_generator: torch.Generator,
    policy_version: int,
    weight_update_hook: Callable[[], int | None] | None = None,
) -> PackedRollouts:
    """One step's rollouts: G generations of each training prompt, sampled with `torch_generator`
    with the run's sampling and length control, packed as the decoder records them
    (generation.generate_packed), scored. The synchronous trainer and the pipeline's generators
    both call it."""
    indices = [int(i) for i in prompt_indices]
    return score_batch(
        task,
        generate_packed(
            model,
            tokenizer,
            [task.train[i].prompt for i in indices],
            indices,
            num_generations=config.sampling.generations_per_prompt,
            sampling=sampling_settings(config),
            length_control=length_control(config),
            torch_generator=torch_generator,
            policy_version=policy_version,
            weight_update_hook=weight_update_hook,
        ),
    )


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
