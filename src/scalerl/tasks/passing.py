"""Validation verdicts: whether a sampled completion passes (its reward above task.pass_threshold,
or the task's verifier when task.pass_by_verifier), scored in one call per batch, with the mean of
each reward function over the batch."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from scalerl.tasks.custom_reward import function_rewards
from scalerl.tasks.types import Task, TaskExample


@dataclass(frozen=True)
class ScoredSamples:
    """Per sample: the reward and whether it passed; per reward function (task.reward): its values."""

    rewards: list[float]
    passed: list[bool]
    function_values: dict[str, list[float]] = field(default_factory=dict)


def function_label(name: str) -> str:
    """A reward function's short name in metric columns: 'my_rewards:correct' -> 'correct'."""
    return name.rpartition(":")[2].strip() or name


def score_samples(
    task: Task,
    texts: Sequence[str],
    examples: Sequence[TaskExample],
    *,
    pass_threshold: float = 0.0,
    by_verifier: bool = False,
) -> ScoredSamples:
    """Rewards and verdicts of completions `texts` of `examples`: passed_i = reward_i >
    pass_threshold, or (by_verifier, a task scored by reward functions) the verdict of the task's
    own answer check / data_source verifier (its reward > 0). Reward functions are called once for
    the whole batch."""
    functions = getattr(task, "reward_functions", None)
    if functions is None:
        rewards = [float(task.reward(text, example)) for text, example in zip(texts, examples)]
        return ScoredSamples(rewards, [reward > pass_threshold for reward in rewards])
    per_function = function_rewards(functions, list(texts), list(examples))
    rewards = [
        sum(reward.weight * values[i] for reward, values in zip(functions, per_function)) for i in range(len(texts))
    ]
    if by_verifier:
        passed = [task.base.reward(text, example) > 0 for text, example in zip(texts, examples)]
    else:
        passed = [reward > pass_threshold for reward in rewards]
    return ScoredSamples(
        rewards, passed, {function_label(reward.name): values for reward, values in zip(functions, per_function)}
    )
