"""The `sampling` section of a run's config: rollout batch shape, sampling and length control
(ScaleRL section 4). Torch-free, like the config.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from scalerl.checks import require as _require
from scalerl.checks import require_choice as _require_choice
from scalerl.checks import require_fraction as _require_fraction
from scalerl.checks import require_positive as _require_positive
from scalerl.rl.registry import LENGTH_CONTROLS


@dataclass(frozen=True)
class SamplingConfig:
    """Rollout generation: batch shape, sampling, and length control (ScaleRL section 4)."""

    prompts_per_step: int = field(default=32, metadata={"help": "prompts per optimiser step (P)"})
    generations_per_prompt: int = field(
        default=16, metadata={"help": "completions per prompt (G, TRL's num_generations)"}
    )
    max_new_tokens: int = field(
        default=64, metadata={"help": "most generated tokens per completion (TRL's max_completion_length)"}
    )
    temperature: float = field(default=1.0, metadata={"help": "sampling temperature"})
    top_p: float = field(default=1.0, metadata={"help": "nucleus sampling mass (1: off)"})
    top_k: int = field(
        default=0,
        metadata={
            "help": "sample among the k most likely tokens only (0: off); the log-probs recorded for training stay "
            "the policy's own (untruncated, temperature 1), as in TRL and verl"
        },
    )
    repetition_penalty: float = field(
        default=1.0,
        metadata={
            "help": "CTRL repetition penalty (1: off): the logit l of a token already in the prompt or completion "
            "becomes l / penalty if l > 0, else l * penalty, for sampling only (recorded log-probs are the policy's)"
        },
    )
    max_prompt_length: int = field(
        default=0,
        metadata={
            "help": "most prompt tokens (0: no limit); a longer prompt keeps its last max_prompt_length tokens "
            "(left truncation, as TRL's max_prompt_length), in training and validation"
        },
    )
    length_control: str = field(default="interrupt", metadata={"help": "length control", "choices": LENGTH_CONTROLS})
    # `follows`: left unset, the key keeps its share of max_new_tokens when that changes (overrides).
    thinking_budget_min: int = field(
        default=40,
        metadata={
            "help": "interrupt: thinking tokens after which a thinking section may be cut (unset: 5/8 of "
            "max_new_tokens)",
            "follows": "max_new_tokens",
        },
    )
    thinking_budget_max: int = field(
        default=48,
        metadata={
            "help": "interrupt: thinking tokens after which it is always cut (unset: 3/4 of max_new_tokens)",
            "follows": "max_new_tokens",
        },
    )
    penalty_cache_tokens: int = field(
        default=16,
        metadata={
            "help": "penalty: soft-penalty window before max_new_tokens, DAPO (unset: 1/4 of max_new_tokens)",
            "follows": "max_new_tokens",
        },
    )

    def __post_init__(self) -> None:
        for name in ("prompts_per_step", "generations_per_prompt", "max_new_tokens"):
            _require_positive(getattr(self, name), f"sampling.{name}")
        _require_positive(self.temperature, "sampling.temperature")
        _require_fraction(self.top_p, "sampling.top_p", open_low=True)
        _require(self.top_k >= 0, "sampling.top_k", "must be >= 0 (0: off)")
        _require_positive(self.repetition_penalty, "sampling.repetition_penalty")
        _require(self.max_prompt_length >= 0, "sampling.max_prompt_length", "must be >= 0 (0: no limit)")
        _require_choice(self.length_control, "sampling.length_control", tuple(LENGTH_CONTROLS))
        _require_positive(self.thinking_budget_min, "sampling.thinking_budget_min")
        _require(
            self.thinking_budget_min <= self.thinking_budget_max,
            "sampling.thinking_budget_max",
            f"must be >= sampling.thinking_budget_min={self.thinking_budget_min}",
        )
        _require(
            self.thinking_budget_max < self.max_new_tokens,
            "sampling.thinking_budget_max",
            f"must be < sampling.max_new_tokens={self.max_new_tokens}",
        )
        _require(
            0 < self.penalty_cache_tokens <= self.max_new_tokens,
            "sampling.penalty_cache_tokens",
            f"must be in (0, sampling.max_new_tokens={self.max_new_tokens}]",
        )
