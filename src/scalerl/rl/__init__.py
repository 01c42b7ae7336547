"""The ScaleRL recipe's algorithm blocks as pure torch functions (never transformers, ray, vllm).

losses (cispo, dapo, grpo, gspo) -> aggregation (prompt, sample, token) -> scalar loss;
advantages, zero-variance filtering, the no-positive-resampling prompt pool, length control and
batch statistics. Config strings resolve through `scalerl.rl.registry`.
"""

from scalerl.rl.advantages import ADVANTAGE_NORMALISATIONS, compute_advantages, group_centered_advantages
from scalerl.rl.aggregation import prompt_mean, sample_mean, token_mean
from scalerl.rl.curriculum import PromptPool, PromptPoolExhaustedError, pass_rates_by_prompt
from scalerl.rl.filtering import KeptPrompts, count_kept_prompts, zero_variance_keep_mask
from scalerl.rl.length_control import (
    INTERRUPTION_PHRASE,
    overlong_length_penalty,
    sample_interruption_budget,
    truncation_rate,
)
from scalerl.rl.losses import LossOutput, cispo, dapo, grpo, gspo
from scalerl.rl.registry import (
    AGGREGATIONS,
    LOSS_PARAMETERS,
    LOSSES,
    get_advantage_normalisation,
    get_aggregation,
    get_loss,
    loss_kwargs,
)
from scalerl.rl.stats import importance_ratio_stats, masked_mean, token_entropy

__all__ = [
    "ADVANTAGE_NORMALISATIONS",
    "AGGREGATIONS",
    "INTERRUPTION_PHRASE",
    "LOSSES",
    "LOSS_PARAMETERS",
    "KeptPrompts",
    "LossOutput",
    "PromptPool",
    "PromptPoolExhaustedError",
    "cispo",
    "compute_advantages",
    "count_kept_prompts",
    "dapo",
    "get_advantage_normalisation",
    "get_aggregation",
    "get_loss",
    "group_centered_advantages",
    "grpo",
    "gspo",
    "importance_ratio_stats",
    "loss_kwargs",
    "masked_mean",
    "overlong_length_penalty",
    "pass_rates_by_prompt",
    "prompt_mean",
    "sample_interruption_budget",
    "sample_mean",
    "token_entropy",
    "token_mean",
    "truncation_rate",
    "zero_variance_keep_mask",
]
