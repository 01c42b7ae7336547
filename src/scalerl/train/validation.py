"""Validation: the held-out pass rate R(C) that the compute-performance curve is fitted to.

Every evaluation uses the same held-out prompts (the first `eval_prompts` of the task's
validation split), `eval_samples_per_prompt` samples each, and a sampling generator reseeded to
the same value each time (common random numbers: the difference between two evaluations then
reflects the policy, not the sampling noise). Evaluation draws from its own generator, so it never
perturbs the training run's random streams (a resumed run stays reproducible).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import torch

from scalerl.train.config import TrainConfig
from scalerl.train.generation import evaluate_pass_rate
from scalerl.train.generation_settings import length_control, sampling_settings
from scalerl.tasks.rollout import SamplingSettings
from scalerl.tasks.types import Task, TaskExample

_EVAL_SEED_OFFSET = 1_000_003


def validation_sampling(config: TrainConfig) -> SamplingSettings:
    """The sampling settings of an evaluation: the run's, at temperature 0 (greedy) with eval_greedy."""
    sampling = sampling_settings(config)
    return dataclasses.replace(sampling, temperature=0.0) if config.eval_greedy else sampling


def validation_examples(task: Task, config: TrainConfig) -> tuple[TaskExample, ...]:
    """The held-out prompts every evaluation uses (at most `eval_prompts`)."""
    return tuple(task.validation[: config.eval_prompts])


def validation_pass_rate(model: torch.nn.Module, tokenizer: Any, task: Task, config: TrainConfig) -> float:
    """Mean of (reward > 0) over the held-out prompts x `eval_samples_per_prompt` samples
    (one greedy completion each with eval_greedy)."""
    device = next(model.parameters()).device
    generator = torch.Generator(device=device).manual_seed(config.seed + _EVAL_SEED_OFFSET)
    return evaluate_pass_rate(
        model, tokenizer, task, validation_examples(task, config), config.eval_samples_per_prompt,
        sampling=validation_sampling(config), length_control=length_control(config),
        torch_generator=generator,
    )
