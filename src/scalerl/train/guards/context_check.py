"""Prompts that cannot fit the model's context are refused when a run is set up, not when a step
would allocate for them: prompt tokens + sampling.max_new_tokens must fit the model's positions."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from scalerl.errors import ConfigError
from scalerl.tasks.types import Task, TaskExample

_SPECIAL_TOKENS_MARGIN = 2  # a BOS/EOS a tokenizer may add around a prompt


def model_context(model: Any) -> int | None:
    """The model's number of positions (max_position_embeddings, or n_positions), None if unknown."""
    config = getattr(model, "config", None)
    for name in ("max_position_embeddings", "n_positions"):
        value = getattr(config, name, None)
        if isinstance(value, int) and value > 0:
            return value
    return None


def _too_long(examples: Sequence[TaskExample], tokenizer: Any, limit: int) -> tuple[int, int] | None:
    """(index, tokens) of the first prompt over `limit` tokens, or None. A prompt of at most `limit`
    UTF-8 bytes is not tokenized (a byte-level or character tokenizer makes no more tokens than bytes)."""
    for index, example in enumerate(examples):
        if len(example.prompt.encode("utf-8")) + _SPECIAL_TOKENS_MARGIN <= limit:
            continue
        tokens = len(tokenizer(example.prompt, verbose=False)["input_ids"])
        if tokens > limit:
            return index, tokens
    return None


def check_prompt_lengths(task: Task, tokenizer: Any, model: Any, max_new_tokens: int) -> None:
    """ConfigError naming the first training or validation prompt whose tokens plus
    `max_new_tokens` exceed the model's context (nothing is checked when the context is unknown)."""
    context = model_context(model)
    if context is None:
        return
    limit = context - max_new_tokens
    for split, examples in (("training", task.train), ("validation", task.validation)):
        found = _too_long(examples, tokenizer, limit)
        if found is not None:
            index, tokens = found
            raise ConfigError(
                f"task.name: {split} prompt {index} has {tokens} tokens; with sampling.max_new_tokens="
                f"{max_new_tokens} it does not fit the model's context of {context} positions "
                "(shorten the prompt, or lower sampling.max_new_tokens)"
            )
