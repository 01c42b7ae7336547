"""The generator's settings read from a run config: sampling (temperature, top-k, top-p, repetition
penalty, lengths, FP32 head) and length control, the same for training rollouts, evaluation and the vLLM backend.

Kept apart from scalerl.train.generation, which takes these settings as arguments, so that the
generation code (and the warm start built on it) does not depend on the run config.
"""

from __future__ import annotations

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
