"""The run config resolved once, where a run is set up, into what every step runs with: the
generator's sampling settings and length control (the same for training rollouts, evaluation and
the vLLM backend) and the registry's loss, aggregation and advantage normalisation with the loss's
keyword arguments. A step reads these; it never looks a name up again.

Kept apart from scalerl.train.generation, which takes the settings as arguments, so that the
generation code (and the warm start built on it) does not depend on the run config.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from scalerl.rl.registry import get_advantage_normalisation, get_aggregation, get_loss
from scalerl.tasks.rollout import LengthControl, SamplingSettings
from scalerl.train.config.train_config import TrainConfig


def sampling_settings(config: TrainConfig) -> SamplingSettings:
    """The generator's sampling settings from the run config."""
    sampling = config.sampling
    return SamplingSettings(
        max_new_tokens=sampling.max_new_tokens,
        temperature=sampling.temperature,
        top_p=sampling.top_p,
        top_k=sampling.top_k,
        repetition_penalty=sampling.repetition_penalty,
        max_prompt_length=sampling.max_prompt_length,
        fp32_head=config.model.fp32_head,
    )


def length_control(config: TrainConfig) -> LengthControl:
    """The generator's length control (interrupt | truncate | penalty) from the run config."""
    sampling = config.sampling
    return LengthControl(
        mode=sampling.length_control,
        thinking_budget_min=sampling.thinking_budget_min,
        thinking_budget_max=sampling.thinking_budget_max,
    )


@dataclass(frozen=True)
class StepRecipe:
    """A run's config with the blocks it names resolved: what one step generates and trains with.

    loss: `(logprobs, generator_logprobs, advantages, mask, **loss_kwargs) -> LossOutput`;
    aggregation: `(token_loss, mask, group_ids) -> scalar`; advantage_normalisation:
    `(centred, group_ids, eps) -> advantages`; needs_reference: the loss, with these keyword
    arguments, needs the frozen reference policy's log-probs (GRPO with rl.grpo_kl_coef > 0)."""

    config: TrainConfig
    sampling: SamplingSettings
    length_control: LengthControl
    loss: Callable[..., Any]
    loss_kwargs: Mapping[str, float]  # read only: a step copies it before adding ref_logprobs
    needs_reference: bool
    aggregation: Callable[..., Any]
    advantage_normalisation: Callable[..., Any]


def step_recipe(config: TrainConfig) -> StepRecipe:
    """`config` resolved for its steps (once per run: by the run setup, each actor, each rank)."""
    rl = config.rl
    return StepRecipe(
        config=config,
        sampling=sampling_settings(config),
        length_control=length_control(config),
        loss=get_loss(rl.loss),
        loss_kwargs=rl.loss_kwargs(),
        needs_reference=rl.needs_reference(),
        aggregation=get_aggregation(rl.aggregation),
        advantage_normalisation=get_advantage_normalisation(rl.advantage_norm),
    )
