"""Verifiable tasks: the protocol the trainer uses, and the built-in multi-step arithmetic task.

Built-in task: prompts like `12+47+30=`, worked solutions like `<think>12+47=59;59+30=89</think>89`
(one reduction per step, `*` before `+`/`-`, left to right). Reward +1 if the final answer (the text
after `</think>`) equals the reference exactly, else -1. Difficulty: number of operands, digits,
operations. Train and validation prompts are disjoint and deterministic under the seed.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Protocol, Sequence

from scalerl.errors import ConfigError
from scalerl.tasks.config import TaskConfig
from scalerl.tasks.rollout import Rollout
from scalerl.tasks.verifiers import answer_reward

OPERATIONS = "+-*"


@dataclass(frozen=True)
class TaskExample:
    """One prompt, its reference answer, and (if known) a worked completion for warm-up."""

    prompt: str
    answer: str
    demonstration: str | None = None


class Task(Protocol):
    """What the trainer needs from a task: two disjoint prompt pools and a reward."""

    name: str
    train: tuple[TaskExample, ...]
    validation: tuple[TaskExample, ...]

    def reward(self, completion_text: str, example: TaskExample) -> float:
        """+1 for a correct final answer, -1 otherwise."""
        ...


def _apply(left: int, operation: str, right: int) -> int:
    if operation == "+":
        return left + right
    if operation == "-":
        return left - right
    return left * right


def solve_with_steps(operands: Sequence[int], operations: Sequence[str]) -> tuple[list[str], int]:
    """Evaluate with the usual precedence, one binary reduction per step.

    Returns the steps (e.g. ["4*5=20", "3+20=23"] for 3+4*5) and the value.
    """
    values, ops = list(operands), list(operations)
    steps = []
    while ops:
        index = ops.index("*") if "*" in ops else 0
        result = _apply(values[index], ops[index], values[index + 1])
        steps.append(f"{values[index]}{ops[index]}{values[index + 1]}={result}")
        values[index : index + 2] = [result]
        del ops[index]
    return steps, values[0]


def arithmetic_example(operands: Sequence[int], operations: Sequence[str]) -> TaskExample:
    """The prompt `a+b+c=`, the answer, and the worked demonstration `<think>steps</think>answer`."""
    prompt = "".join(f"{value}{op}" for value, op in zip(operands, list(operations) + ["="]))
    steps, value = solve_with_steps(operands, operations)
    demonstration = f"<think>{';'.join(steps)}</think>{value}"
    return TaskExample(prompt=prompt, answer=str(value), demonstration=demonstration)


def _random_example(settings: TaskConfig, rng: random.Random) -> TaskExample:
    operands = [rng.randrange(10**settings.max_digits) for _ in range(settings.num_operands)]
    operations = [rng.choice(settings.operations) for _ in range(settings.num_operands - 1)]
    return arithmetic_example(operands, operations)


def _unique_examples(
    count: int, settings: TaskConfig, rng: random.Random, exclude: set[str]
) -> list[TaskExample]:
    examples: list[TaskExample] = []
    while len(examples) < count:
        example = _random_example(settings, rng)
        if example.prompt not in exclude:
            exclude.add(example.prompt)
            examples.append(example)
    return examples


def check_enough_prompts(settings: TaskConfig) -> None:
    """ConfigError unless twice the train + validation prompts fit in the distinct prompts:
    (10**max_digits)**num_operands * len(set(operations))**(num_operands - 1)."""
    distinct = (10**settings.max_digits) ** settings.num_operands * len(set(settings.operations)) ** (
        settings.num_operands - 1
    )
    if 2 * (settings.num_train_prompts + settings.num_val_prompts) > distinct:
        raise ConfigError(
            f"only {distinct} distinct prompts exist at this difficulty; ask for at most "
            f"{distinct // 2} train + validation prompts"
        )


class ArithmeticTask:
    """The built-in task. Validation prompts are drawn first, so they do not depend on the size
    of the training pool; training prompts never repeat a validation prompt."""

    def __init__(self, settings: TaskConfig = TaskConfig()) -> None:
        check_enough_prompts(settings)
        self.settings = settings
        self.name = (
            f"arithmetic-{settings.num_operands}x{settings.max_digits}d-{settings.operations}"
        )
        rng = random.Random(settings.seed)
        seen: set[str] = set()
        self.validation = tuple(_unique_examples(settings.num_val_prompts, settings, rng, seen))
        self.train = tuple(_unique_examples(settings.num_train_prompts, settings, rng, seen))

    def reward(self, completion_text: str, example: TaskExample) -> float:
        return answer_reward(completion_text, example.answer, check="exact")


def assign_rewards(task: Task, rollouts: Sequence[Rollout], split: str = "train") -> list[Rollout]:
    """Fill in each rollout's reward with the task's verifier (prompt_index indexes the split)."""
    examples = task.train if split == "train" else task.validation
    return [
        rollout.with_reward(task.reward(rollout.completion_text, examples[rollout.prompt_index]))
        for rollout in rollouts
    ]
