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


@dataclass(frozen=True)
class ArithmeticSettings:
    """Difficulty and size of the built-in task. Operands are uniform in 0 .. 10**max_digits - 1;
    operators are drawn uniformly from `operations` (a subset of "+-*")."""

    num_operands: int = 4
    max_digits: int = 1
    operations: str = "+"
    num_train_prompts: int = 4000
    num_val_prompts: int = 256
    seed: int = 0

    def __post_init__(self) -> None:
        if self.num_operands < 2:
            raise ConfigError(f"num_operands must be >= 2, got {self.num_operands}")
        if self.max_digits < 1:
            raise ConfigError(f"max_digits must be >= 1, got {self.max_digits}")
        if not self.operations or set(self.operations) - set(OPERATIONS):
            raise ConfigError(f"operations must be made of {OPERATIONS!r}, got {self.operations!r}")
        if self.num_train_prompts < 1 or self.num_val_prompts < 0:
            raise ConfigError("num_train_prompts must be >= 1 and num_val_prompts >= 0")
        distinct = (10**self.max_digits) ** self.num_operands * len(set(self.operations)) ** (
            self.num_operands - 1
        )
        if 2 * (self.num_train_prompts + self.num_val_prompts) > distinct:
            raise ConfigError(
                f"only {distinct} distinct prompts exist at this difficulty; ask for at most "
                f"{distinct // 2} train + validation prompts"
            )


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


def _random_example(settings: ArithmeticSettings, rng: random.Random) -> TaskExample:
    operands = [rng.randrange(10**settings.max_digits) for _ in range(settings.num_operands)]
    operations = [rng.choice(settings.operations) for _ in range(settings.num_operands - 1)]
    return arithmetic_example(operands, operations)


def _unique_examples(
    count: int, settings: ArithmeticSettings, rng: random.Random, exclude: set[str]
) -> list[TaskExample]:
    examples: list[TaskExample] = []
    while len(examples) < count:
        example = _random_example(settings, rng)
        if example.prompt not in exclude:
            exclude.add(example.prompt)
            examples.append(example)
    return examples


class ArithmeticTask:
    """The built-in task. Validation prompts are drawn first, so they do not depend on the size
    of the training pool; training prompts never repeat a validation prompt."""

    def __init__(self, settings: ArithmeticSettings = ArithmeticSettings()) -> None:
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


def load_task(
    name_or_path: str,
    *,
    settings: ArithmeticSettings = ArithmeticSettings(),
    answer_check: str = "exact",
    val_fraction: float = 0.1,
) -> Task:
    """"builtin" -> the arithmetic task with `settings`; anything else is read as a JSONL file."""
    if name_or_path == "builtin":
        return ArithmeticTask(settings)
    from scalerl.tasks.jsonl import JsonlTask

    return JsonlTask.from_file(
        name_or_path, answer_check=answer_check, val_fraction=val_fraction, seed=settings.seed
    )
