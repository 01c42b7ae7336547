"""The messages between generator and trainer: one `Rollout` per generated sequence, plus the
sampling and length-control settings a generator runs with. Pure data: no torch import."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass

from scalerl.errors import ConfigError, InputError
from scalerl.rl.registry import LENGTH_CONTROLS

#: ScaleRL's forced-interruption phrase (arXiv 2510.13786).
INTERRUPTION_PHRASE = "Okay, time is up. Let me stop thinking and formulate a final answer now. </think>"
#: Short interruption phrase for the character-level built-in model (the default).
SHORT_INTERRUPTION_PHRASE = " time is up</think>"


@dataclass(frozen=True)
class Rollout:
    """One generated sequence, as the generator produced it.

    `loss_mask[t]` is 1 for tokens the policy sampled and 0 for tokens forced by the generator
    (the interruption phrase): forced tokens are part of the completion the model conditions on,
    but carry no policy-gradient signal. `generator_logprobs[t]` is the generator's log-prob of
    completion token t (FP32 head, temperature-1 policy distribution), forced tokens included.
    `token_policy_versions[t]` is the weight version whose forward pass produced token t.
    """

    prompt_index: int
    group_index: int
    prompt_token_ids: tuple[int, ...]
    completion_token_ids: tuple[int, ...]
    generator_logprobs: tuple[float, ...]
    token_policy_versions: tuple[int, ...]
    reward: float
    truncated: bool
    interrupted: bool
    completion_text: str
    loss_mask: tuple[int, ...] = ()

    def __post_init__(self) -> None:
        n_tokens = len(self.completion_token_ids)
        if not self.loss_mask:
            object.__setattr__(self, "loss_mask", (1,) * n_tokens)
        lengths = {
            "generator_logprobs": len(self.generator_logprobs),
            "token_policy_versions": len(self.token_policy_versions),
            "loss_mask": len(self.loss_mask),
        }
        for field_name, length in lengths.items():
            if length != n_tokens:
                raise InputError(f"Rollout.{field_name} has {length} entries for {n_tokens} completion tokens")

    @property
    def oldest_policy_version(self) -> int:
        """The oldest weight version that produced any token (the staleness of this sequence)."""
        return min(self.token_policy_versions) if self.token_policy_versions else 0

    @property
    def num_completion_tokens(self) -> int:
        return len(self.completion_token_ids)

    def with_reward(self, reward: float) -> Rollout:
        """A copy with `reward` filled in (generation leaves it at 0.0)."""
        return dataclasses.replace(self, reward=float(reward))


@dataclass(frozen=True)
class SamplingSettings:
    """How the generator samples: temperature, top-k and nucleus (top-p) truncation, the CTRL
    repetition penalty, maximum length, the prompts' maximum length (0: any; a longer prompt keeps
    its last max_prompt_length tokens, as TRL cuts it). Temperature 0 is greedy decoding: the most
    likely token of the penalised logits at every step (validation only). top_k 0 and
    repetition_penalty 1: off."""

    max_new_tokens: int = 64
    temperature: float = 1.0
    top_p: float = 1.0
    fp32_head: bool = True
    top_k: int = 0
    repetition_penalty: float = 1.0
    max_prompt_length: int = 0

    def __post_init__(self) -> None:
        if self.max_new_tokens < 1:
            raise ConfigError(f"max_new_tokens must be >= 1, got {self.max_new_tokens}")
        if not self.temperature >= 0:
            raise ConfigError(f"temperature must be >= 0 (0: greedy), got {self.temperature}")
        if not 0 < self.top_p <= 1:
            raise ConfigError(f"top_p must be in (0, 1], got {self.top_p}")
        if self.top_k < 0:
            raise ConfigError(f"top_k must be >= 0 (0: off), got {self.top_k}")
        if not self.repetition_penalty > 0:
            raise ConfigError(f"repetition_penalty must be > 0 (1: off), got {self.repetition_penalty}")
        if self.max_prompt_length < 0:
            raise ConfigError(f"max_prompt_length must be >= 0 (0: no limit), got {self.max_prompt_length}")

    def cut_prompt(self, prompt_ids: Sequence[int]) -> list[int]:
        """The prompt's token ids the generator sees: its last max_prompt_length tokens (left
        truncation, as TRL's max_prompt_length), all of them when max_prompt_length is 0."""
        prompt_ids = list(prompt_ids)
        return prompt_ids[-self.max_prompt_length :] if 0 < self.max_prompt_length < len(prompt_ids) else prompt_ids


@dataclass(frozen=True)
class LengthControl:
    """How over-long reasoning is handled.

    - "interrupt" (ScaleRL, arXiv 2510.13786 section 4): each sequence draws a thinking budget
      uniformly in [thinking_budget_min, thinking_budget_max] tokens; a sequence still inside its
      thinking section (no `think_end_text` emitted yet) when its completion reaches the budget gets
      `interruption_phrase` appended (forced tokens, loss_mask 0) and continues with the answer.
      The end of thinking is detected on token ids: the completion ends with the ids of
      `think_end_text` encoded alone (one token for the built-in tokenizer and for reasoning models
      that register the tag as a special token).
    - "truncate": sequences are simply cut at max_new_tokens (truncated=True).
    - "penalty": generation as "truncate"; the caller applies a length penalty to the reward.
    """

    mode: str = "interrupt"
    thinking_budget_min: int = 40
    thinking_budget_max: int = 48
    interruption_phrase: str = SHORT_INTERRUPTION_PHRASE
    think_end_text: str = "</think>"

    def __post_init__(self) -> None:
        if self.mode not in LENGTH_CONTROLS:
            raise ConfigError(f"length control mode must be one of {', '.join(LENGTH_CONTROLS)}, got {self.mode!r}")
        if not 1 <= self.thinking_budget_min <= self.thinking_budget_max:
            raise ConfigError(
                "thinking budgets must satisfy 1 <= thinking_budget_min <= thinking_budget_max, "
                f"got {self.thinking_budget_min} and {self.thinking_budget_max}"
            )
        if self.mode == "interrupt" and not self.interruption_phrase.endswith(self.think_end_text):
            raise ConfigError(f"interruption_phrase must end with {self.think_end_text!r} so the answer follows it")
